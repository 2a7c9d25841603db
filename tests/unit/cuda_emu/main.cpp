/*  tests/unit/cuda_emu/main.cpp: one operator's float64 references, the
    host's (ref.c, compiled apart with ak_reference renamed
    ak_host_reference) and the device's (ref.cu, run through emu.h's
    CUDA), on the same inputs; test_cuda_ref_emu.c builds it and compares.
    Built with -DAK_EMU_CAND='"path"' and -DAK_DTYPE_*, the device side is
    a candidate kernel (ak_kernel) in that element type instead
    (test_cuda_cand_emu.c): the inputs are rounded to the type, the host
    reference gets the rounded values, the candidate's outputs come back
    as doubles.

        emu JOB OUT

    JOB (native int64 and float64, written by the test): ndims, dims[8],
    nin, in_count[8], nout, out_count[8], grid[3], block[3], dynamic
    shared bytes, cluster[3] (along x only), the number of tensor maps and 20 words each (absent,
    output, buffer, rank, dims[5], strides[4], box[5], swizzle bytes, NaN
    fill), then every input's elements.  A candidate built with
    -DAK_EMU_NMAPS=n (0..5) takes its n maps after the argument block:
    emu.h's ak_emu_map_make fills them for its TMA copies (absent ones
    all zero, as the worker passes them).  OUT: every output as
    ak_host_reference wrote it, then every output as the device kernel
    did (each output starts as NaN in both; a candidate is launched twice
    where its buffers hold at most 2^18 elements in all, its outputs set
    back to NaN between, and the second launch's are written).  Exit 0,
    or 1 with a message (bad job, deadlock, a shared address outside the
    block's shared memory). */
#include "emu.h"
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <algorithm>
#include <vector>

#ifdef AK_EMU_CAND
#include "ak_blocks_cuda.h"                    /* the worker prepends both to every kernel */
#ifdef AK_EMU_HOPPER
#include AK_EMU_HOPPER                         /* a changed copy (test_cuda_cand_emu's planted kernels) */
#else
#include "ak_hopper_cuda.h"
#endif
#include AK_EMU_CAND
#else
#include "ak_blocks_cuda.h"
#include AK_EMU_REF
#endif

#ifdef AK_EMU_CAND
#define ak_args_t ak_cuda_args_t               /* the same layout (ak_kernel_cuda.h's static_assert) */
#endif
extern "C" void ak_host_reference (const ak_args_t *a);

extern char __start_ak_emu_shared[] __attribute__ ((weak));
extern char __stop_ak_emu_shared[] __attribute__ ((weak));

#define S_STACK (64 * 1024)
#define S_TWICE (1u << 18)                     /* a candidate launched twice up to this many elements */

/*  A thread starts on its own stack, and afterwards it and the scheduler
    switch with _setjmp / _longjmp, which, unlike swapcontext, make no
    system call (the signal mask is left alone): a third of the run's time
    went to those.  On x86-64 the start is a jump onto the stack too
    (s_start); elsewhere it is ucontext's setcontext, and getcontext
    and setcontext each set the signal mask with a system call, two a
    thread (which took a tenth of the larger runs). */
struct s_thr {
#ifndef __x86_64__
    ucontext_t ctx;
#endif
    jmp_buf    jb;
    int        state;
    bool       started;
    ak_emu_dim3 idx;                           /* its threadIdx */
};

struct s_blk {
    uint64_t            id;                    /* linear block index */
    unsigned            x, y, z;
    std::vector<s_thr>  t;
    std::vector<double> slots;                 /* warp exchanges */
    std::vector<unsigned> mma;                 /* 6 words a thread: an MMA's registers */
    std::vector<double> dyn;                   /* the launch's dynamic shared memory */
    std::vector<char>   shm;                   /* its shared memory while set aside */
    struct { unsigned arrived, count, gen; } named[16] = {};   /* bar.sync / bar.arrive */
    char               *stacks = nullptr;
    bool                done = false;
};

static jmp_buf s_main;
static s_blk *s_blk_cur, *s_shm_owner;
static std::vector<s_blk *> *s_waiting;         /* the launch's blocks set aside */
static unsigned s_cluster_x = 1;                /* blocks a cluster, along x */
struct s_cbar { unsigned arrived, gen; };
static std::vector<s_cbar> s_cbars;             /* a barrier a cluster */
static unsigned s_tid;
static ak_cuda_args_t s_args;
#ifdef AK_EMU_CAND
#ifndef AK_EMU_NMAPS
#define AK_EMU_NMAPS 0
#endif
static ak_tensor_map_t s_maps[AK_EMU_NMAPS > 0 ? AK_EMU_NMAPS : 1];
#endif

void ak_emu_yield (int why)
{
    s_thr &t = s_blk_cur->t[s_tid];
    t.state = why;
    if (!_setjmp (t.jb))
        _longjmp (s_main, 1);
}

double *ak_emu_lane_slot (void)
{
    return &s_blk_cur->slots[s_tid];
}

double ak_emu_lane_get (unsigned lane)
{
    size_t i = (s_tid & ~31u) + lane;
    return i < s_blk_cur->slots.size () ? s_blk_cur->slots[i] : NAN;
}

static int64_t s_dyn_bytes;

#ifdef AK_EMU_CAND
unsigned *ak_emu_mma_slot (void)
{
    return &s_blk_cur->mma[6 * (size_t) s_tid];
}

const unsigned *ak_emu_mma_lane (unsigned lane)
{
    static const unsigned none[6] = { 0, 0, 0, 0, 0, 0 };
    size_t i = (s_tid & ~31u) + lane;
    return i < s_blk_cur->t.size () ? &s_blk_cur->mma[6 * i] : none;
}

void *ak_emu_dynamic_smem (void)
{
    return s_blk_cur->dyn.data ();
}

unsigned ak_emu_dynamic_smem_size (void)
{
    return (unsigned) s_dyn_bytes;
}
#endif

static size_t s_shm_size (void);
[[noreturn]] static void s_die (const char *what);

/* Where the dynamic shared memory starts in the window: after the
   section, at the next 16-byte boundary. */
static unsigned s_dyn_window (void)
{
    return (unsigned) ((s_shm_size () + 15) & ~(size_t) 15);
}

unsigned ak_emu_smem_addr (const void *p)
{
    const char *c = (const char *) p;
    const size_t sn = s_shm_size ();
    if (sn && c >= __start_ak_emu_shared && c < __start_ak_emu_shared + sn)
        return (unsigned) (c - __start_ak_emu_shared);
    const char *d = (const char *) s_blk_cur->dyn.data ();
    if (c >= d && c <= d + s_dyn_bytes)
        return s_dyn_window () + (unsigned) (c - d);
    s_die ("the shared-memory address of a pointer outside the block's shared memory");
    return 0;
}

/*  The bytes [addr, addr+len) of block b's shared memory: its __shared__
    variables in the section while it owns it, else in its copy (a block
    set aside), or its dynamic shared memory.  Outside both the run ends,
    naming the address. */
static void *s_smem_of (s_blk *b, unsigned addr, size_t len)
{
    const size_t sn = s_shm_size (), dw = s_dyn_window ();
    if ((size_t) addr + len <= sn)
        return (s_shm_owner == b ? __start_ak_emu_shared : b->shm.data ()) + addr;
    if (addr >= dw && (size_t) addr + len <= dw + (size_t) s_dyn_bytes)
        return (char *) b->dyn.data () + (addr - dw);
    fprintf (stderr, "emu: shared address 0x%x (%zu bytes) outside the shared memory of block %llu (static "
             "0x0-0x%zx, dynamic 0x%zx-0x%zx)\n", addr, len, (unsigned long long) b->id, sn, dw,
             dw + (size_t) s_dyn_bytes);
    exit (1);
}

#ifdef AK_EMU_CAND
ak_emu_smem_t ak_emu_smem_cur;

void ak_emu_smem_bad (unsigned addr, size_t len)
{
    s_smem_of (s_blk_cur, addr, len);          /* says where it is not, and ends the run */
    s_die ("ak_emu_smem_bad on an address inside shared memory");
}
#endif

unsigned ak_emu_cluster_rank (void)
{
    return blockIdx.x % s_cluster_x;
}

void ak_emu_cluster_sync (void)
{
    const uint64_t c = s_blk_cur->id / s_cluster_x;       /* s_launch sized s_cbars */
    const unsigned gen = s_cbars[c].gen, all = s_cluster_x * (unsigned) s_blk_cur->t.size ();
    if (++s_cbars[c].arrived == all) {
        s_cbars[c].arrived = 0;
        s_cbars[c].gen++;
        return;
    }
    while (s_cbars[c].gen == gen)
        ak_emu_yield (AK_EMU_SPIN);
}

void *ak_emu_peer_smem (unsigned rank, unsigned addr, size_t len)
{
    if (rank >= s_cluster_x)
        s_die ("a cluster rank beyond the cluster");
    const uint64_t id = s_blk_cur->id - s_blk_cur->id % s_cluster_x + rank;
    s_blk *p = id == s_blk_cur->id ? s_blk_cur : nullptr;
    for (s_blk *b : *s_waiting)
        if (b->id == id)
            p = b;
    if (!p)
        s_die ("shared memory of a cluster's block that is not running (not started, or gone)");
    return s_smem_of (p, addr, len);
}

void ak_emu_named_bar (unsigned id, unsigned count, bool wait)
{
    if (id >= 16 || count == 0 || count % 32 != 0 || count > s_blk_cur->t.size ())
        s_die ("a named barrier with an id above 15 or a thread count not a multiple of 32 within the block");
    auto &b = s_blk_cur->named[id];
    if (b.arrived && b.count != count)
        s_die ("a named barrier's phase with two thread counts");
    b.count = count;
    const unsigned gen = b.gen;
    if (++b.arrived == count) {
        b.arrived = 0;
        b.gen++;
        return;
    }
    if (wait)
        while (b.gen == gen)
            ak_emu_yield (AK_EMU_SPIN);
}

static void s_entry (void)
{
#ifdef AK_EMU_CAND
#if AK_EMU_NMAPS == 0
    ak_kernel (s_args);
#elif AK_EMU_NMAPS == 1
    ak_kernel (s_args, s_maps[0]);
#elif AK_EMU_NMAPS == 2
    ak_kernel (s_args, s_maps[0], s_maps[1]);
#elif AK_EMU_NMAPS == 3
    ak_kernel (s_args, s_maps[0], s_maps[1], s_maps[2]);
#elif AK_EMU_NMAPS == 4
    ak_kernel (s_args, s_maps[0], s_maps[1], s_maps[2], s_maps[3]);
#elif AK_EMU_NMAPS == 5
    ak_kernel (s_args, s_maps[0], s_maps[1], s_maps[2], s_maps[3], s_maps[4]);
#else
#error "AK_EMU_NMAPS: 0 to 5"
#endif
#else
    ak_reference (s_args);
#endif
    s_blk_cur->t[s_tid].state = AK_EMU_DONE;
    _longjmp (s_main, 1);                      /* never returns: its stack goes with the block */
}

[[noreturn]] static void s_die (const char *what)
{
    fprintf (stderr, "emu: %s\n", what);
    exit (1);
}

static size_t s_shm_size (void)
{
    return __start_ak_emu_shared && __stop_ak_emu_shared ? (size_t) (__stop_ak_emu_shared - __start_ak_emu_shared) : 0;
}

/*  b's shared memory in the section (the owner's copied out first). */
static void s_shm_take (s_blk *b)
{
    size_t n = s_shm_size ();
    if (s_shm_owner == b || !n)
        return;
    if (s_shm_owner && !s_shm_owner->done)
        memcpy (s_shm_owner->shm.data (), __start_ak_emu_shared, n);
    memcpy (__start_ak_emu_shared, b->shm.data (), n);
    s_shm_owner = b;
}

/*  Thread stacks, kept from a finished block for the next one (of the
    same size): mapping fresh ones for each block, and unmapping them, cost
    a page fault a thread and a TLB flush a block, 40% of an emulation's
    time in the kernel (perf, session 39).  A thread starts at the top of
    its stack and reads nothing it has not written there, so a stack a
    finished block used serves as well as a fresh one. */
static std::vector<char *> s_stack_pool;
static size_t s_stack_pool_bytes;

static char *s_stacks_get (size_t bytes)
{
    if (bytes != s_stack_pool_bytes) {
        for (char *p : s_stack_pool)
            munmap (p, s_stack_pool_bytes);
        s_stack_pool.clear ();
        s_stack_pool_bytes = bytes;
    }
    if (!s_stack_pool.empty ()) {
        char *p = s_stack_pool.back ();
        s_stack_pool.pop_back ();
        return p;
    }
    void *p = mmap (nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : (char *) p;
}

static void s_stacks_put (char *p, size_t bytes)
{
    if (bytes == s_stack_pool_bytes)
        s_stack_pool.push_back (p);
    else
        munmap (p, bytes);
}

static void s_blk_start (s_blk *b, unsigned nthr)
{
    b->t.resize (nthr);
    b->slots.assign (nthr, NAN);
    b->mma.assign (6 * (size_t) nthr, 0u);
    double ones;                                       /* every byte 0xff: NaN as any float type */
    memset (&ones, 0xff, sizeof ones);
    b->dyn.assign ((size_t) (s_dyn_bytes + 7) / 8, ones);
    b->shm.assign (s_shm_size (), (char) 0xff);        /* uninitialised shared memory reads as NaN */
    b->stacks = s_stacks_get ((size_t) nthr * S_STACK);
    if (!b->stacks)
        s_die ("mmap of the thread stacks failed");
    for (unsigned i = 0; i < nthr; i++) {
        s_thr &t = b->t[i];
#ifndef __x86_64__
        getcontext (&t.ctx);
        t.ctx.uc_stack.ss_sp = b->stacks + (size_t) i * S_STACK;
        t.ctx.uc_stack.ss_size = S_STACK;
        t.ctx.uc_link = nullptr;
        makecontext (&t.ctx, s_entry, 0);
#endif
        t.state = AK_EMU_RUN;
        t.started = false;
        t.idx = { i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y) };
    }
}

/*  Thread i of b from its first instruction (s_entry, which never
    returns): on x86-64 the stack pointer set to the top of its stack (16
    bytes aligned, as a call wants it) and s_entry called. */
static void s_start (s_blk *b, unsigned i)
{
#ifdef __x86_64__
    char *top = b->stacks + (size_t) (i + 1) * S_STACK;
    __asm__ volatile ("mov %0, %%rsp\n\tcall *%1\n\tud2" : : "r" (top), "r" (s_entry) : "memory");
    __builtin_unreachable ();
#else
    setcontext (&b->t[i].ctx);
#endif
}

/*  Runs b until it is done (true) or waits for other blocks (false);
    *moved: whether anything in it changed. */
static bool s_blk_run (s_blk *b, bool *moved)
{
    s_shm_take (b);
    s_blk_cur = b;
#ifdef AK_EMU_CAND
    /* its shared memory while it runs: the section (it owns it now) and its dynamic part */
    ak_emu_smem_cur = { __start_ak_emu_shared, s_shm_size (), s_dyn_window (), (char *) b->dyn.data (),
                        (size_t) s_dyn_bytes };
#endif
    blockIdx = { b->x, b->y, b->z };
    const unsigned n = (unsigned) b->t.size ();
    /* A pass runs every runnable thread until it yields, and counts the
       states as it goes (a thread changes only its own): then the block's
       barrier opens where every live thread waits at it, and a warp's
       exchange where every live lane of it waits (the released threads
       run in the next pass). */
    for (;;) {
        bool progress = false;
        unsigned live = 0, at_block = 0, wl = 0, ww = 0;
        for (unsigned i = 0; i < n; i++) {
            s_thr &t = b->t[i];
            if (t.state == AK_EMU_RUN || t.state == AK_EMU_SPIN) {
                int before = t.state;
                s_tid = i;
                threadIdx = t.idx;
                if (!_setjmp (s_main)) {
                    if (!t.started) {
                        t.started = true;
                        s_start (b, i);
                    }
                    _longjmp (t.jb, 1);
                }
                if (before != AK_EMU_SPIN || t.state != AK_EMU_SPIN)
                    progress = true;
            }
            const int st = t.state;
            live += st != AK_EMU_DONE;
            at_block += st == AK_EMU_BLOCK_WAIT;
            wl += st != AK_EMU_DONE;
            ww += st == AK_EMU_WARP_WAIT;
            if ((i & 31u) == 31u || i + 1 == n) {
                if (wl && ww == wl) {
                    for (unsigned j = i & ~31u; j <= i; j++)
                        if (b->t[j].state == AK_EMU_WARP_WAIT)
                            b->t[j].state = AK_EMU_RUN;
                    progress = true;
                }
                wl = ww = 0;
            }
        }
        if (!live) {
            if (s_shm_owner == b)
                s_shm_owner = nullptr;
            s_stacks_put (b->stacks, (size_t) n * S_STACK);
            b->stacks = nullptr;
            b->done = true;
            *moved = true;
            return true;
        }
        if (at_block == live) {
            for (unsigned i = 0; i < n; i++)
                if (b->t[i].state == AK_EMU_BLOCK_WAIT)
                    b->t[i].state = AK_EMU_RUN;
            progress = true;
        }
        if (progress)
            *moved = true;
        else
            return false;
    }
}

static void s_launch (const int64_t grid[3], const int64_t block[3])
{
    gridDim = { (unsigned) grid[0], (unsigned) grid[1], (unsigned) grid[2] };
    blockDim = { (unsigned) block[0], (unsigned) block[1], (unsigned) block[2] };
    const unsigned nthr = blockDim.x * blockDim.y * blockDim.z;
    const uint64_t nblk = (uint64_t) grid[0] * grid[1] * grid[2];
    std::vector<s_blk *> waiting;
    s_waiting = &waiting;
    s_cbars.assign ((size_t) (nblk / s_cluster_x), s_cbar { 0, 0 });
    uint64_t next = 0;
    int idle_rounds = 0;
    while (next < nblk || !waiting.empty ()) {
        bool moved = false;
        if (next < nblk) {
            s_blk *b = new s_blk;
            b->id = next;
            b->x = (unsigned) (next % grid[0]);
            b->y = (unsigned) (next / grid[0] % grid[1]);
            b->z = (unsigned) (next / ((uint64_t) grid[0] * grid[1]));
            next++;
            s_blk_start (b, nthr);
            if (s_blk_run (b, &moved))
                delete b;
            else
                waiting.push_back (b);
            moved = true;
        }
        for (size_t i = 0; i < waiting.size ();) {
            if (s_blk_run (waiting[i], &moved)) {
                delete waiting[i];
                waiting.erase (waiting.begin () + (long) i);
            } else
                i++;
        }
        idle_rounds = moved ? 0 : idle_rounds + 1;
        if (idle_rounds > 1000)
            s_die ("deadlock: every block left waits and none moves");
    }
    s_shm_owner = nullptr;
}

static void s_read (FILE *f, void *p, size_t n)
{
    if (n && fread (p, 1, n, f) != n)
        s_die ("short job file");
}

int main (int argc, char **argv)
{
    if (argc != 3)
        s_die ("usage: emu JOB OUT");
    FILE *f = fopen (argv[1], "rb");
    if (!f)
        s_die ("cannot open the job file");
    int64_t ndims, dims[8], nin, inc[8], nout, outc[8], grid[3], block[3], shared;
    s_read (f, &ndims, 8);
    s_read (f, dims, sizeof dims);
    s_read (f, &nin, 8);
    s_read (f, inc, sizeof inc);
    s_read (f, &nout, 8);
    s_read (f, outc, sizeof outc);
    s_read (f, grid, sizeof grid);
    s_read (f, block, sizeof block);
    s_read (f, &shared, sizeof shared);
    int64_t cluster[3];
    s_read (f, cluster, sizeof cluster);
    if (cluster[0] < 1 || cluster[0] > 8 || cluster[1] != 1 || cluster[2] != 1 || grid[0] % cluster[0] != 0)
        s_die ("a cluster shape the emulation does not have (clusters along x of 1 to 8 blocks dividing the grid)");
    s_cluster_x = (unsigned) cluster[0];
    if (ndims < 0 || ndims > 8 || nin < 0 || nin > 8 || nout < 1 || nout > 8 || shared < 0 || shared > (1 << 20))
        s_die ("bad job header");
    for (int i = 0; i < 3; i++)
        if (grid[i] < 1 || block[i] < 1 || grid[i] > (1 << 24) || block[i] > 1024)
            s_die ("bad launch in the job");
    int64_t nmaps, mw[5][20];
    s_read (f, &nmaps, 8);
    if (nmaps < 0 || nmaps > 5)
        s_die ("bad number of tensor maps in the job");
    for (int m = 0; m < nmaps; m++)
        s_read (f, mw[m], sizeof mw[m]);
    s_dyn_bytes = shared;
    std::vector<std::vector<double>> in (nin), host (nout), dev (nout);
    ak_cuda_args_t a;
    memset (&a, 0, sizeof a);
    a.ndims = (int) ndims;
    memcpy (a.dims, dims, sizeof dims);
    a.nin = (int) nin;
    a.nout = (int) nout;
    for (int j = 0; j < nin; j++) {
        in[j].resize ((size_t) inc[j]);
        s_read (f, in[j].data (), (size_t) inc[j] * 8);
        a.in[j] = in[j].data ();
    }
    fclose (f);
#ifdef AK_EMU_CAND
    /* the candidate's inputs in its type; the host reference gets the same values */
    std::vector<std::vector<ak_t>> cin (nin), cout (nout);
    for (int j = 0; j < nin; j++) {
        cin[j].resize (in[j].size ());
        for (size_t i = 0; i < in[j].size (); i++) {
            cin[j][i] = ak_from_acc ((ak_acc_t) in[j][i]);
            in[j][i] = (double) ak_to_acc (cin[j][i]);
        }
    }
#endif
    for (int k = 0; k < nout; k++) {
        host[k].assign ((size_t) outc[k], NAN);
        dev[k].assign ((size_t) outc[k], NAN);
        a.out[k] = host[k].data ();
    }
    ak_host_reference ((const ak_args_t *) &a);
#ifdef AK_EMU_CAND
    for (int j = 0; j < nin; j++)
        a.in[j] = cin[j].data ();
    for (int k = 0; k < nout; k++) {
        cout[k].assign ((size_t) outc[k], ak_from_acc ((ak_acc_t) NAN));
        a.out[k] = cout[k].data ();
    }
#else
    for (int k = 0; k < nout; k++)
        a.out[k] = dev[k].data ();
#endif
#ifdef AK_EMU_CAND
    if (nmaps != AK_EMU_NMAPS)
        s_die ("the job's tensor maps are not the ones the build takes (AK_EMU_NMAPS)");
    for (int m = 0; m < nmaps; m++) {
        const int64_t *w = mw[m];
        if (w[2] < 0 || w[2] >= (w[1] ? nout : nin))
            s_die ("a tensor map names no buffer");
        const void *base = w[1] ? (const void *) cout[w[2]].data () : (const void *) cin[w[2]].data ();
        ak_emu_map_make (&s_maps[m], w[0] != 0, base, w + 3);
    }
#else
    if (nmaps != 0)
        s_die ("tensor maps in a reference's job");
#endif
    s_args = a;
    s_launch (grid, block);
#ifdef AK_EMU_CAND
    /* a second launch on outputs set back to NaN, the module's __device__
       variables as the first left them (split counters, grid barriers):
       what it writes is compared, so a kernel that leaves its state
       unfit for the next launch (as the GPU times it, launch after
       launch) fails here; where the buffers hold at most S_TWICE
       elements in all (the largest sizes, whose second launch doubled
       test_cuda_cand_emu's time, run once) */
    size_t elems = 0;
    for (int j = 0; j < nin; j++)
        elems += cin[j].size ();
    for (int k = 0; k < nout; k++)
        elems += cout[k].size ();
    if (elems <= S_TWICE) {
        for (int k = 0; k < nout; k++)
            std::fill (cout[k].begin (), cout[k].end (), ak_from_acc ((ak_acc_t) NAN));
        s_launch (grid, block);
    }
    for (int k = 0; k < nout; k++)
        for (size_t i = 0; i < cout[k].size (); i++)
            dev[k][i] = (double) ak_to_acc (cout[k][i]);
#endif
    FILE *o = fopen (argv[2], "wb");
    if (!o)
        s_die ("cannot write the output file");
    for (int k = 0; k < nout; k++)
        fwrite (host[k].data (), 8, host[k].size (), o);
    for (int k = 0; k < nout; k++)
        fwrite (dev[k].data (), 8, dev[k].size (), o);
    if (fclose (o) != 0)
        s_die ("cannot write the output file");
    return 0;
}
