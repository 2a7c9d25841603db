/*  tests/unit/cuda_emu/emu.h: enough of CUDA to run a catalog operator's
    float64 device reference (kernels/<op>/cuda/ref.cu) on the CPU, for
    test_cuda_ref_emu.  C++ (g++), single translation unit (main.cpp).

    Every thread of the grid is a coroutine (ucontext).  Blocks run one at
    a time: a block's threads take turns until each is done, waits at
    __syncthreads (all of the block's live threads there: all go on),
    waits in a warp shuffle (all live lanes of the warp there: the values
    are exchanged) or spins in __nanosleep.  A block whose live threads
    are all waiting and at least one spinning waits for the others (a
    grid-wide barrier of atomics and spins, as fused_mlp's reference
    has): it is set aside with its shared memory (every __shared__
    variable is placed in the section ak_emu_shared, copied out and back
    in) and the next block runs.  A grid that stops moving is a deadlock:
    the run aborts with a message.  Atomics are plain (one thread runs at
    a time); __threadfence is nothing.  Not emulated (a build error, or
    the test refuses the source): inline PTX, textures, other warp
    intrinsics.

    With AK_EMU_CAND (test_cuda_cand_emu) it runs a catalog candidate
    instead, in its element type (-DAK_DTYPE_*): CUDA's own cuda_fp16.h
    and cuda_bf16.h (they compile for the host) and kernels/ak_kernel_cuda.h
    give the types and conversions, and the PTX a kernel cannot do without
    goes through functions here, which kernels/ak_blocks_cuda.h's blocks
    call under AK_CUDA_EMU (a kernel's own inline PTX needs a hook of its
    own): ak_emu_mma_16816 (mma.sync m16n8k16 row.col, float accumulators,
    the fragments of the PTX ISA: every lane offers its A and B registers,
    then each computes its own four accumulators), ak_emu_ldmatrix_x4
    (ldmatrix m8n8.x4 [.trans]: every lane offers its row's address),
    ak_emu_dynamic_smem and ak_emu_dynamic_smem_size (the launch's dynamic
    shared memory, one buffer a block, every byte 0xff at the start: NaN).
    __any_sync, __shfl_sync (float), __syncwarp, __byte_perm, __ldg and
    __ldcg as CUDA defines them.  Tensor maps (kernel ABI 2): the job
    carries the launch's evaluated maps, ak_emu_map_make keeps each in the
    map's 128 bytes (absent ones zero, as the worker passes them), and
    ak_emu_tma_load_2d (_3d) copies a box as cp.async.bulk.tensor.2d (.3d)
    does (zero or NaN outside, the 32/64/128-byte swizzle), at once:
    kernels/ak_blocks_cuda.h's ak_tma_into_2d (_3d) call them, beside its
    emulated mbarriers (ak_mbar_*: a barrier's phase in its 8 bytes);
    matmul's skinny and split_kv_attention's tma_decode run on them.
    The Hopper kit (kernels/ak_hopper_cuda.h) and the prelude's address
    forms run on a 32-bit window onto the block's shared memory
    (ak_emu_smem_addr / ak_emu_smem_ptr, main.cpp: a GPU's layout, the
    __shared__ variables from 0 and the dynamic shared memory after
    them), with ak_emu_wgmma (m64nNk16 from descriptors, 128-byte
    swizzle), ak_emu_tma_store_2d, ak_emu_named_bar (bar.sync and
    bar.arrive with a thread count) and ak_emu_ex2_ftz: matmul's,
    fused_mlp's and flash_attention's wgmma and wg_decode run on them.
    Thread-block clusters along x (ak_emu_cluster_rank, _sync,
    ak_emu_peer_smem: main.cpp) run as their blocks interleaved, a peer's
    shared memory reached where it is kept while the peer waits. */
#ifndef AK_CUDA_EMU_H
#define AK_CUDA_EMU_H
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef AK_EMU_CAND
#include <cuda_fp16.h>                 /* before the macros below: they have their own */
#include <cuda_bf16.h>
#include <vector_functions.h>
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __restrict__
#undef __shared__
#undef __align__
#undef __grid_constant__
#define __align__(n) __attribute__ ((aligned (n)))
#define __grid_constant__
#define AK_CUDA_EMU 1
#elif !defined(AK_REFERENCE)
#define AK_REFERENCE 1                 /* ak_blocks_cuda.h: the float64 references' blocks */
#endif
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static __attribute__ ((section ("ak_emu_shared")))

/* The argument block: the host ABI's struct (kernels/ak_kernel.h), which
   kernels/ak_kernel_cuda.h mirrors field for field, taken by value. */
#ifndef AK_EMU_CAND
#include "ak_kernel.h"
typedef long long ak_i64;
typedef unsigned long long ak_u64;
typedef unsigned int ak_u32;
typedef double ak_acc_t;
typedef ak_args_t ak_cuda_args_t;
#undef AK_IN
#undef AK_OUT
#define AK_IN(a, i)  ((const ak_t *) (a).in[i])
#define AK_OUT(a, i) ((ak_t *) (a).out[i])
#endif

struct ak_emu_dim3 { unsigned x, y, z; };
static ak_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

/* How a thread left the CPU (main.cpp's scheduler reads it). */
enum { AK_EMU_RUN, AK_EMU_BLOCK_WAIT, AK_EMU_WARP_WAIT, AK_EMU_SPIN, AK_EMU_DONE };
void ak_emu_yield (int why);
/* The value each lane offered in the current warp exchange. */
double *ak_emu_lane_slot (void);
double ak_emu_lane_get (unsigned lane);

static inline void __syncthreads () { ak_emu_yield (AK_EMU_BLOCK_WAIT); }
static inline void __threadfence () {}
static inline void __nanosleep (unsigned) { ak_emu_yield (AK_EMU_SPIN); }

/* v of lane src (xor: of lane ^ src) */
template <typename T> static inline T ak_emu_shfl (T v, int src, bool xr)
{
    double d;
    static_assert (sizeof (T) <= sizeof d, "a shuffled value of at most 8 bytes");
    memcpy (&d, &v, sizeof v);
    *ak_emu_lane_slot () = d;
    ak_emu_yield (AK_EMU_WARP_WAIT);           /* every lane has offered */
    unsigned lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
    double got = ak_emu_lane_get (xr ? lane ^ (unsigned) src : (unsigned) src & 31u);
    ak_emu_yield (AK_EMU_WARP_WAIT);           /* every lane has read */
    T r;
    memcpy (&r, &got, sizeof r);
    return r;
}
template <typename T> static inline T ak_emu_shfl_xor (T v, int mask) { return ak_emu_shfl (v, mask, true); }
static inline float __shfl_sync (unsigned, float v, int src) { return ak_emu_shfl (v, src, false); }
static inline void __syncwarp (unsigned = 0xffffffffu) { ak_emu_yield (AK_EMU_WARP_WAIT); }
static inline double __shfl_xor_sync (unsigned, double v, int m) { return ak_emu_shfl_xor (v, m); }
static inline float __shfl_xor_sync (unsigned, float v, int m) { return ak_emu_shfl_xor (v, m); }
static inline int __shfl_xor_sync (unsigned, int v, int m) { return ak_emu_shfl_xor (v, m); }
static inline unsigned __shfl_xor_sync (unsigned, unsigned v, int m) { return ak_emu_shfl_xor (v, m); }

template <typename T> static inline T atomicAdd (T *p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> static inline T atomicMax (T *p, T v) { T o = *p; *p = o > v ? o : v; return o; }

static inline double __longlong_as_double (long long v) { double d; memcpy (&d, &v, 8); return d; }
static inline double __longlong_as_double (unsigned long long v) { double d; memcpy (&d, &v, 8); return d; }
static inline long long __double_as_longlong (double v) { long long r; memcpy (&r, &v, 8); return r; }
static inline float __int_as_float (int v) { float f; memcpy (&f, &v, 4); return f; }
static inline int __float_as_int (float v) { int r; memcpy (&r, &v, 4); return r; }

#ifdef AK_EMU_CAND
static inline long long __shfl_xor_sync (unsigned, long long v, int m) { return ak_emu_shfl_xor (v, m); }
static inline float __uint_as_float (unsigned v) { float f; memcpy (&f, &v, 4); return f; }
static inline unsigned __float_as_uint (float v) { unsigned r; memcpy (&r, &v, 4); return r; }
static inline int min (int a, int b) { return a < b ? a : b; }
static inline int max (int a, int b) { return a > b ? a : b; }
static inline long long min (long long a, long long b) { return a < b ? a : b; }
static inline long long max (long long a, long long b) { return a > b ? a : b; }
static inline unsigned min (unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max (unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned __umulhi (unsigned a, unsigned b) { return (unsigned) (((unsigned long long) a * b) >> 32); }
static inline double __dmul_rn (double a, double b) { return a * b; }
static inline float ak_emu_expf (float x) { return expf (x); }
#define __expf ak_emu_expf                     /* glibc declares an __expf of its own, not exported */
static inline double __dadd_rn (double a, double b) { return a + b; }
static inline float __double2float_rn (double a) { return (float) a; }
template <typename T> static inline void __stcs (T *p, T v) { *p = v; }
template <typename T> static inline void __stcg (T *p, T v) { *p = v; }
template <typename T> static inline T __ldg (const T *p) { return *p; }
template <typename T> static inline T __ldcg (const T *p) { return *p; }

/* CUDA's __byte_perm: byte i of the result is byte (s >> 4i) & 7 of y:x. */
static inline unsigned __byte_perm (unsigned x, unsigned y, unsigned s)
{
    const unsigned long long v = ((unsigned long long) y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++)
        r |= (unsigned) ((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
}

static inline unsigned ak_emu_lane (void)
{
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
}

static inline int __any_sync (unsigned, int pred)
{
    *ak_emu_lane_slot () = pred ? 1.0 : 0.0;
    ak_emu_yield (AK_EMU_WARP_WAIT);
    int any = 0;
    for (unsigned l = 0; l < 32; l++)
        any |= ak_emu_lane_get (l) == 1.0;
    ak_emu_yield (AK_EMU_WARP_WAIT);
    return any;
}

/* The block's shared memory as a 32-bit address space (main.cpp): the
   __shared__ variables (the section) from 0, the launch's dynamic shared
   memory from the next 16-byte boundary on, as a GPU lays them out, so a
   kernel's own 1024-byte alignment of its stages is exercised.
   ak_emu_smem_ptr: the bytes [addr, addr+len), which must lie inside one
   of the two (else the run ends with a message, ak_emu_smem_bad's).  It
   is inline, on the running block's two ranges (ak_emu_smem_cur, set by
   main.cpp as a block starts to run): a wgmma reads its operands an
   element at a time, and a call each took a fifth of such a run. */
unsigned ak_emu_smem_addr (const void *p);
struct ak_emu_smem_t {
    char    *sbase;                             /* the section, where the running block's variables are */
    size_t   sn;
    unsigned dw;                                /* the dynamic window's start */
    char    *dbase;
    size_t   dn;
};
extern ak_emu_smem_t ak_emu_smem_cur;
[[noreturn]] void ak_emu_smem_bad (unsigned addr, size_t len);
static inline void *ak_emu_smem_ptr (unsigned addr, size_t len)
{
    const ak_emu_smem_t &m = ak_emu_smem_cur;
    if ((size_t) addr + len <= m.sn)
        return m.sbase + addr;
    if (addr >= m.dw && (size_t) addr + len <= m.dw + m.dn)
        return m.dbase + (addr - m.dw);
    ak_emu_smem_bad (addr, len);
}
/* bar.sync (wait) / bar.arrive id, count (main.cpp: count arrivals of
   threads; the count of one barrier's phase must not change) */
void ak_emu_named_bar (unsigned id, unsigned count, bool wait);
/* Thread-block clusters along x (main.cpp): this block's rank, a barrier
   of every thread of the cluster, and the bytes [addr, addr+len) of the
   shared memory of the cluster's block of rank `rank` (this block's own
   or a peer's, wherever the emulation keeps it while the peer waits). */
unsigned ak_emu_cluster_rank (void);
void ak_emu_cluster_sync (void);
void *ak_emu_peer_smem (unsigned rank, unsigned addr, size_t len);

static inline unsigned ak_emu_tid (void)
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/* ex2.approx.ftz.f32: 2^x, denormal inputs and results flushed to zero */
static inline float ak_emu_ex2_ftz (float x)
{
    if (std::fpclassify (x) == FP_SUBNORMAL)
        x = 0.0f;
    const float y = exp2f (x);
    return std::fpclassify (y) == FP_SUBNORMAL ? 0.0f : y;
}

/* The MMA's registers each lane offered (main.cpp: 6 words a thread). */
unsigned *ak_emu_mma_slot (void);
const unsigned *ak_emu_mma_lane (unsigned lane);
void *ak_emu_dynamic_smem (void);
unsigned ak_emu_dynamic_smem_size (void);

/* Half h (0 low, 1 high) of a register of two elements, as a float. */
/*  The float of IEEE half bits u, exactly (every half is a float): what
    cuda_fp16.h's __half2float gives, whose host path took a third of a
    wgmma run's time.  A subnormal half is its 10-bit mantissa times
    2^-24; every NaN is 0x7fffffff, as there (and as a GPU's conversion
    gives it). */
static inline float ak_emu_f16 (unsigned short u)
{
    const unsigned sign = (unsigned) (u & 0x8000u) << 16, e = (u >> 10) & 0x1fu, m = u & 0x3ffu;
    if (e == 0x1f)
        return __uint_as_float (m ? 0x7fffffffu : sign | 0x7f800000u);
    if (e == 0) {
        const float f = (float) m * 0x1p-24f;
        return sign ? -f : f;
    }
    return __uint_as_float (sign | ((e + 112u) << 23) | (m << 13));
}

static inline float ak_emu_half (unsigned reg, int h)
{
    const unsigned short u = (unsigned short) (h ? reg >> 16 : reg & 0xffffu);
#if defined(AK_DTYPE_BFLOAT16)
    return __uint_as_float ((unsigned) u << 16);
#else
    return ak_emu_f16 (u);
#endif
}

/*  mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: lane (g, t) = (lane/4, lane%4) holds
    A rows g (a0: cols 2t, 2t+1; a2: 2t+8, 2t+9) and g+8 (a1, a3), B col g (b0: rows 2t, 2t+1;
    b1: 2t+8, 2t+9), C rows g (c0, c1: cols 2t, 2t+1) and g+8 (c2, c3); the lower column or row
    of a pair in the low half. */
static inline void ak_emu_mma_16816 (float *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                     unsigned b1)
{
    unsigned *mine = ak_emu_mma_slot ();
    mine[0] = a0, mine[1] = a1, mine[2] = a2, mine[3] = a3, mine[4] = b0, mine[5] = b1;
    ak_emu_yield (AK_EMU_WARP_WAIT);
    const unsigned lane = ak_emu_lane (), g = lane >> 2, t = lane & 3;
    float d[4];
    for (int e = 0; e < 4; e++) {
        const unsigned row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float acc = c[e];
        for (unsigned k = 0; k < 16; k++) {
            const unsigned *la = ak_emu_mma_lane (4 * (row & 7) + (k & 7) / 2);
            const unsigned *lb = ak_emu_mma_lane (4 * col + (k & 7) / 2);
            const float av = ak_emu_half (la[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], (int) (k & 1));
            const float bv = ak_emu_half (lb[4 + (k >= 8 ? 1 : 0)], (int) (k & 1));
            acc += av * bv;
        }
        d[e] = acc;
    }
    ak_emu_yield (AK_EMU_WARP_WAIT);           /* every lane has read the others' registers */
    for (int e = 0; e < 4; e++)
        c[e] = d[e];
}

/*  ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane l gives the address of row l%8 of
    matrix l/8; r[i] of lane l is row l/4, elements 2(l%4) and 2(l%4)+1 of matrix i, or with
    trans of its transpose (rows 2(l%4) and 2(l%4)+1, element l/4). */
static inline void ak_emu_ldmatrix_x4 (unsigned r[4], const void *p, bool trans)
{
    double d;
    memcpy (&d, &p, sizeof p);
    *ak_emu_lane_slot () = d;
    ak_emu_yield (AK_EMU_WARP_WAIT);
    const unsigned lane = ak_emu_lane ();
    for (unsigned i = 0; i < 4; i++) {
        const unsigned short *row[2];
        for (unsigned h = 0; h < 2; h++) {
            const unsigned src = trans ? 8 * i + 2 * (lane & 3) + h : 8 * i + (lane >> 2);
            const double a = ak_emu_lane_get (src);
            memcpy (&row[h], &a, sizeof row[h]);
        }
        unsigned short lo, hi;
        if (trans) {
            lo = row[0][lane >> 2];
            hi = row[1][lane >> 2];
        } else {
            lo = row[0][2 * (lane & 3)];
            hi = row[0][2 * (lane & 3) + 1];
        }
        r[i] = (unsigned) lo | (unsigned) hi << 16;
    }
    ak_emu_yield (AK_EMU_WARP_WAIT);
}

/*  An mbarrier in its 8 bytes: pending arrivals (bits 0-15), the count
    (16-31), the parity of the phases completed (32) and the transaction
    bytes still expected (33-63, signed: a copy may complete before its
    bytes are expected).  A phase completes when no arrival and no byte
    is pending: the parity flips, the arrivals start again from the
    count.  expect_tx adds bytes and arrives; a TMA copy, done when
    issued, takes its box's bytes off (complete_tx), so a stage whose
    expected bytes are not what its copies bring never completes and the
    run ends as a deadlock, as the GPU would hang. */
static inline void ak_emu_mbar_set (unsigned long long *bar, unsigned pending, unsigned count, unsigned par, long tx)
{
    *bar = (unsigned long long) pending | (unsigned long long) count << 16 | (unsigned long long) par << 32
           | (unsigned long long) ((unsigned long) tx & 0x7fffffffu) << 33;
}

static inline void ak_emu_mbar_get (const unsigned long long *bar, unsigned *pending, unsigned *count, unsigned *par,
                                    long *tx)
{
    *pending = (unsigned) (*bar & 0xffffu);
    *count = (unsigned) ((*bar >> 16) & 0xffffu);
    *par = (unsigned) ((*bar >> 32) & 1u);
    long t = (long) ((*bar >> 33) & 0x7fffffffu);
    *tx = t >= 0x40000000L ? t - 0x80000000L : t;
}

/* arrivals (one, or none for a copy's completion) and bytes (+ expected, - completed) */
static inline void ak_emu_mbar_update (unsigned long long *bar, unsigned arrivals, long bytes)
{
    unsigned pending, count, par;
    long tx;
    ak_emu_mbar_get (bar, &pending, &count, &par, &tx);
    if (arrivals > pending) {
        fprintf (stderr, "emu: an mbarrier arrived on more often than its count (%u)\n", count);
        exit (1);
    }
    pending -= arrivals;
    tx += bytes;
    if (pending == 0 && tx == 0)
        ak_emu_mbar_set (bar, count, count, par ^ 1u, 0);
    else
        ak_emu_mbar_set (bar, pending, count, par, tx);
}

/*  wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16} for the calling
    thread t of its warpgroup (t = thread % 128), computed at once: d[N/2]
    of the 64 x N accumulator tile, d[4j+e] its row 16(t/32) + (t%32)/4 +
    8(e/2), column 8j + 2(t%4) + e%2; acc false overwrites d.  A (64 x 16)
    from shared memory through descriptor da, K-major (a == nullptr), or
    from registers (a: mma.sync's m16n8k16 A fragment of the warp's 16
    rows, exchanged through the warp's lanes like ak_emu_mma_16816); B
    (16 x N) through db, N-major (tb: imm-trans-b 1) or K-major.
    Descriptors: start address >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO
    >> 4 in 32-45, swizzle mode in 62-63, of which only 1 (128-byte) is
    emulated (the run ends on any other, or on a base offset, bits 49-51).
    128-byte swizzle: the 16-byte chunk bits (4-6) of an address XOR its
    bits 7-9, as TMA writes it.  K-major element (row i, k) at start +
    (i/8) SBO + (i%8) 128 + 2k; N-major element (k, n) at start + (n/64)
    LBO + (k/8) SBO + (k%8) 128 + 2(n%64) (the layouts
    kernels/matmul/cuda/wgmma.cu describes, confirmed by its gates on the
    H200). */
static inline float ak_emu_sw128_at (unsigned addr)
{
    const unsigned phys = addr ^ (((addr >> 7) & 7u) << 4);
    unsigned short u;
    memcpy (&u, ak_emu_smem_ptr (phys, 2), 2);
    return ak_emu_half (u, 0);
}

static inline void ak_emu_desc (unsigned long long d, unsigned *start, unsigned *lbo, unsigned *sbo)
{
    if ((d >> 62) != 1 || ((d >> 49) & 7u) != 0) {
        fprintf (stderr, "emu: a wgmma descriptor with swizzle mode %llu and base offset %llu: only 128-byte "
                 "swizzle at offset 0 is emulated\n", d >> 62, (d >> 49) & 7u);
        exit (1);
    }
    *start = (unsigned) (d & 0x3fffu) << 4;
    *lbo = (unsigned) ((d >> 16) & 0x3fffu) << 4;
    *sbo = (unsigned) ((d >> 32) & 0x3fffu) << 4;
}

static inline void ak_emu_wgmma (float *d, int n, unsigned long long da, const unsigned *a, unsigned long long db,
                                 bool tb, bool acc)
{
    const unsigned t = ak_emu_tid () % 128u, r0 = 16 * (t / 32) + (t % 32) / 4;
    float av[2][16];
    if (a) {
        unsigned *mine = ak_emu_mma_slot ();
        for (int i = 0; i < 4; i++)
            mine[i] = a[i];
        ak_emu_yield (AK_EMU_WARP_WAIT);
        const unsigned g = ak_emu_lane () >> 2;
        for (int h = 0; h < 2; h++)
            for (unsigned k = 0; k < 16; k++)
                av[h][k] = ak_emu_half (ak_emu_mma_lane (4 * g + (k & 7) / 2)[h + (k >= 8 ? 2 : 0)], (int) (k & 1));
        ak_emu_yield (AK_EMU_WARP_WAIT);       /* every lane has read the others' registers */
    } else {
        unsigned st, lbo, sbo;
        ak_emu_desc (da, &st, &lbo, &sbo);
        for (int h = 0; h < 2; h++) {
            const unsigned i = r0 + 8 * h;
            for (unsigned k = 0; k < 16; k++)
                av[h][k] = ak_emu_sw128_at (st + (i / 8) * sbo + (i % 8) * 128 + 2 * k);
        }
    }
    unsigned st, lbo, sbo;
    ak_emu_desc (db, &st, &lbo, &sbo);
    for (int j = 0; j < n / 8; j++)
        for (int e = 0; e < 2; e++) {
            const unsigned c = 8 * j + 2 * (t % 4) + e;
            float bv[16];
            for (unsigned k = 0; k < 16; k++)
                bv[k] = ak_emu_sw128_at (tb ? st + (c / 64) * lbo + (k / 8) * sbo + (k % 8) * 128 + 2 * (c % 64)
                                            : st + (c / 8) * sbo + (c % 8) * 128 + 2 * k);
            for (int h = 0; h < 2; h++) {
                float sum = acc ? d[4 * j + 2 * h + e] : 0.0f;
                for (int k = 0; k < 16; k++)
                    sum += av[h][k] * bv[k];
                d[4 * j + 2 * h + e] = sum;
            }
        }
}

#include "ak_kernel_cuda.h"

/*  A tensor map as the emulation keeps it in the 128 opaque bytes: a tag,
    the buffer, then w[0..16] of the job's words (rank, dims[5],
    strides[4], box[5], swizzle bytes, NaN fill); absent: all zero. */
#define AK_EMU_MAP_TAG 0x50414d544b41ULL       /* "AKTMAP" */
static inline void ak_emu_map_make (ak_tensor_map_t *m, bool absent, const void *base, const int64_t *w)
{
    memset (m, 0, sizeof *m);
    if (absent)
        return;
    m->opaque[0] = AK_EMU_MAP_TAG;
    m->opaque[1] = (ak_u64) base;
    for (int i = 0; i < 14; i++)
        m->opaque[2 + i] = (ak_u64) w[i];
    /* 16 words: box[3] and box[4] are dropped (the copies below are
       2-D and 3-D), swizzle bytes and NaN fill share the last word */
    m->opaque[15] = (ak_u64) w[15] | (ak_u64) w[16] << 32;
}

/*  cp.async.bulk.tensor.2d as the TMA unit does it: box[0] x box[1]
    elements from (c0, c1) (innermost first) into dst row after row,
    zeros (or NaN) outside the tensor, the 16-byte chunks of each
    1024-byte span swizzled as the map says (dst 1024-byte aligned, as
    the hardware wants for 128-byte swizzle). */
static inline long ak_emu_tma_load_2d (void *dst, const ak_tensor_map_t *m, int c0, int c1)
{
    if (m->opaque[0] != AK_EMU_MAP_TAG) {
        fprintf (stderr, "emu: a TMA load through an absent or foreign tensor map\n");
        exit (1);
    }
    const unsigned char *base = (const unsigned char *) m->opaque[1];
    const int64_t d0 = (int64_t) m->opaque[3], d1 = (int64_t) m->opaque[4];
    const int64_t stride1 = (int64_t) m->opaque[8];
    const int64_t b0 = (int64_t) m->opaque[12], b1 = (int64_t) m->opaque[13];
    const unsigned sw = (unsigned) (m->opaque[15] & 0xffffffffu), nanfill = (unsigned) (m->opaque[15] >> 32);
    const size_t e = sizeof (ak_t);
    unsigned char *out = (unsigned char *) dst;
    for (int64_t r = 0; r < b1; r++)
        for (int64_t i = 0; i < b0; i++) {
            size_t off = (size_t) (r * b0 + i) * e;
            if (sw)                     /* 32, 64, 128: 2, 4, 8 chunks a span */
                off ^= ((off >> 7) & (sw / 16 - 1)) << 4;
            const int64_t x = c0 + i, y = c1 + r;
            if (x >= 0 && x < d0 && y >= 0 && y < d1)
                memcpy (out + off, base + y * stride1 + x * (int64_t) e, e);
            else if (nanfill)
                memset (out + off, 0xff, e);
            else
                memset (out + off, 0, e);
        }
    return (long) (b0 * b1) * (long) e;                /* the box's bytes, out-of-bounds fill included */
}

/*  The destination of an address-form TMA load (ak_blocks_cuda.h's
    ak_tma_load_2d / _3d under the emulation): the box's bytes in the
    block's shared memory, 1024-byte aligned where the map swizzles by
    128 bytes (the hardware's rule; the swizzle follows the address). */
static inline void *ak_emu_tma_dst (unsigned dst, const ak_tensor_map_t *m)
{
    const size_t bytes = (size_t) (m->opaque[12] * m->opaque[13] * (m->opaque[2] == 3 ? m->opaque[14] : 1))
                         * sizeof (ak_t);
    if ((m->opaque[15] & 0xffffffffu) == 128 && (dst & 1023u) != 0) {
        fprintf (stderr, "emu: a TMA box with 128-byte swizzle to shared address 0x%x, not 1024-byte aligned\n", dst);
        exit (1);
    }
    return ak_emu_smem_ptr (dst, bytes);
}

/*  cp.async.bulk.tensor.2d.global.shared::cta: the box at shared address
    src (swizzled as the map says, from src) into the tensor at (c0, c1),
    what lies outside the tensor left out; done when issued. */
static inline void ak_emu_tma_store_2d (const ak_tensor_map_t *m, int c0, int c1, unsigned src)
{
    if (m->opaque[0] != AK_EMU_MAP_TAG || m->opaque[2] != 2) {
        fprintf (stderr, "emu: a TMA store through an absent, foreign or not 2-D tensor map\n");
        exit (1);
    }
    unsigned char *base = (unsigned char *) m->opaque[1];
    const int64_t d0 = (int64_t) m->opaque[3], d1 = (int64_t) m->opaque[4];
    const int64_t stride1 = (int64_t) m->opaque[8];
    const int64_t b0 = (int64_t) m->opaque[12], b1 = (int64_t) m->opaque[13];
    const unsigned sw = (unsigned) (m->opaque[15] & 0xffffffffu);
    const size_t e = sizeof (ak_t);
    if (sw == 128 && (src & 1023u) != 0) {
        fprintf (stderr, "emu: a TMA store with 128-byte swizzle from shared address 0x%x, not 1024-byte aligned\n",
                 src);
        exit (1);
    }
    const unsigned char *in = (const unsigned char *) ak_emu_smem_ptr (src, (size_t) (b0 * b1) * e);
    for (int64_t r = 0; r < b1; r++)
        for (int64_t i = 0; i < b0; i++) {
            size_t off = (size_t) (r * b0 + i) * e;
            if (sw)
                off ^= ((off >> 7) & (sw / 16 - 1)) << 4;
            const int64_t x = c0 + i, y = c1 + r;
            if (x >= 0 && x < d0 && y >= 0 && y < d1)
                memcpy (base + y * stride1 + x * (int64_t) e, in + off, e);
        }
}

/*  cp.async.bulk.tensor.3d: box[0] x box[1] x box[2] elements from (c0,
    c1, c2) into dst, rows of box[0] elements in order (box[1] rows a
    plane), as ak_emu_tma_load_2d (tma_decode's K and V tiles). */
static inline long ak_emu_tma_load_3d (void *dst, const ak_tensor_map_t *m, int c0, int c1, int c2)
{
    if (m->opaque[0] != AK_EMU_MAP_TAG || m->opaque[2] != 3) {
        fprintf (stderr, "emu: a 3-D TMA load through an absent, foreign or not 3-D tensor map\n");
        exit (1);
    }
    const unsigned char *base = (const unsigned char *) m->opaque[1];
    const int64_t d0 = (int64_t) m->opaque[3], d1 = (int64_t) m->opaque[4], d2 = (int64_t) m->opaque[5];
    const int64_t stride1 = (int64_t) m->opaque[8], stride2 = (int64_t) m->opaque[9];
    const int64_t b0 = (int64_t) m->opaque[12], b1 = (int64_t) m->opaque[13], b2 = (int64_t) m->opaque[14];
    const unsigned sw = (unsigned) (m->opaque[15] & 0xffffffffu), nanfill = (unsigned) (m->opaque[15] >> 32);
    const size_t e = sizeof (ak_t);
    unsigned char *out = (unsigned char *) dst;
    for (int64_t z = 0; z < b2; z++)
        for (int64_t r = 0; r < b1; r++)
            for (int64_t i = 0; i < b0; i++) {
                size_t off = (size_t) ((z * b1 + r) * b0 + i) * e;
                if (sw)
                    off ^= ((off >> 7) & (sw / 16 - 1)) << 4;
                const int64_t x = c0 + i, y = c1 + r, w = c2 + z;
                if (x >= 0 && x < d0 && y >= 0 && y < d1 && w >= 0 && w < d2)
                    memcpy (out + off, base + w * stride2 + y * stride1 + x * (int64_t) e, e);
                else if (nanfill)
                    memset (out + off, 0xff, e);
                else
                    memset (out + off, 0, e);
            }
    return (long) (b0 * b1 * b2) * (long) e;
}
#endif

#endif
