/*  matmul, Hopper-native (cuda, sm_90a).  C[M][N] = A[M][K] * B[K][N],
    row-major, float accumulation, C in the input dtype.

    float16 / bfloat16: a persistent, warp-specialised kernel.

    Block: 1 + CONSUMERS warpgroups (128 threads each).  Warpgroup 0 is the
    producer: it gives registers back (`setmaxnreg.dec` to 40) and one of
    its threads fills a ring of STAGES shared-memory stages with TMA
    (`cp.async.bulk.tensor.2d`, the tensor maps tm_a / tm_b the worker
    encodes, 128-byte swizzle, zero fill out of bounds so ragged M / N / K
    edges load as zeros).  Warpgroups 1..CONSUMERS take registers
    (`setmaxnreg.inc`) and each computes BM/CONSUMERS rows x BN columns of
    the block's tile with `wgmma.mma_async.m64nBNk16` straight from shared
    memory, fp32 accumulators in registers.

    Pipeline, per stage s: full[s] (count 1: the producer's
    arrive.expect_tx of the stage's bytes, completed by the TMA
    transactions) and empty[s] (count CONSUMERS: one arrive per consumer
    warpgroup once the wgmma that read the stage finished).  Waits are
    `mbarrier.try_wait.parity` on the phase bit (it / STAGES) & 1; the
    producer waits on empty with the opposite parity, which a fresh
    barrier passes at once.  A consumer issues the BK/16 k-steps of a
    stage, commits them as one wgmma group and waits until only that group
    is in flight (`wgmma.wait_group 1`): the previous stage is then free.

    Shared memory layouts (1024-byte aligned stages, TMA SWIZZLE_128B:
    16-byte chunk c of a 128-byte row r sits at chunk c ^ (r & 7)):
      A stage: BK/64 panels of [BM rows][64 k] (box {64, BM} of tm_a, dims
               {K, M}): K-major.  wgmma descriptor: SBO = 1024 bytes (one
               8-row swizzle atom to the next), LBO unused for swizzled
               K-major (1), swizzle mode 1 (128B) in bits 62-63; a k16
               step inside a panel advances the start address by 32 bytes.
      B stage: BN/64 panels of [BK rows][64 n] (box {64, BK} of tm_b,
               dims {N, K}).  B is row-major [K][N], so in shared memory it
               is N-major ("MN-major"): wgmma takes it with the transpose
               bit imm-trans-b = 1.  Descriptor for MN-major swizzled:
               LBO = bytes from one 64-column panel to the next (BK*128),
               SBO = bytes from 8 k rows to the next 8 (1024); a k16 step
               advances the start address by 16 rows (2048 bytes).
    Accumulators of m64nNk16 (f32): thread t of a warpgroup holds d[N/2];
    d[4j+e] is row 16*(t/32) + (t%32)/4 + 8*(e/2), column 8j + 2*(t%4) +
    (e%2) of its 64-row slice.

    Tiles: ceil(M/BM) x ceil(N/BN), walked by every block from blockIdx.x
    in steps of gridDim.x (persistent: launch min(tiles, GRID) blocks).
    RASTER 0: bands of GROUP tile rows, each walked column by column (down
    the band first), so blocks running together share B column panels and
    the band's A rows stay in L2; RASTER 1: bands of GROUP tile columns,
    walked row by row.  The producer runs ahead into the next tile while
    the consumers store the last one.

    CLUSTER 2: thread-block clusters of two blocks on two SMs, which walk
    pairs of vertically adjacent tiles (BM*2 rows, the same BN columns:
    the walk above over tiles of 2*BM rows, block rank r taking rows
    r*BM..).  The pair's B stage is the same, so each block loads its own
    A and half of B's panels (rank r: panels r*BN/128..), and the B half
    goes to both blocks' shared memory at once (TMA multicast, ctaMask 3,
    which also completes the bytes on the same barrier of each block): a
    third less traffic out of L2 at BM 128 BN 256.  A block's full[s]
    still expects the whole stage; empty[s] counts 2*CONSUMERS arrivals,
    its own consumers' and the peer's (`mapa` + a remote arrive),
    since the block's producer writes into both blocks' stage s.  The
    blocks meet at a cluster barrier after initialising the barriers; at
    the end each producer waits until both blocks released every stage
    (its tail), so no block signals a peer that has left.  When the
    pair's second tile is past M its A loads are TMA's zero fill and its
    stores are skipped.

    SPLIT 2, 4 (split K): the tiles of the grid's full waves are walked
    whole, those of the last, partial wave (every tile where there are
    fewer tiles than blocks) as SPLIT slices each, a tile's slices
    consecutive units, each slice whole BK steps of K (s_walk: at most KT
    slices, fewer where the partials would not fit the workspace): the
    partial wave's tiles become a full wave of smaller units.  With
    CLUSTER 2 the units are the pairs' slices, both blocks of a cluster
    on the same slice (B's multicast stays whole), each block's partials
    apart from its peer's.  A consumer warpgroup's slice goes to the
    workspace as float32 (s_reduce), the tile's last warpgroup of the
    slices adds them in slice order (deterministic) and stores the tile
    as below.  SPLIT 1 compiles to the kernel without it.

    Epilogue: each consumer warpgroup writes its accumulators as 64 x 64
    chunks into one of its two 8 KB shared buffers (128-byte swizzle, the
    layout of tm_c's box: conflict-free 4-byte stores), fences them for the
    async proxy, and one thread stores the chunk with TMA
    (`cp.async.bulk.tensor.2d.global.shared::cta`, which leaves out rows and
    columns past the matrix); before a buffer is written again its last
    store must have read it (`cp.async.bulk.wait_group.read 1`).  The
    stores run while the consumers go on to the next tile: stores straight
    from the accumulators took 10% of the time at 4096^3.  Where tm_c is
    not set (or C not 16-byte aligned) the consumers store straight from
    the accumulators, guarded (pairs of elements where N is even).

    Where TMA cannot be used (a row stride K*2 or N*2 not a multiple of 16
    bytes, a base not 16-byte aligned, or a tensor map the worker left
    zero), the producer warpgroup fills the same swizzled stages itself
    (bounds-checked element loads, zero past the edges, then
    `fence.proxy.async` so wgmma sees them, a named barrier, one arrive):
    the consumers do not change.  Slow, but only the ragged edge shapes
    take it.

    float32: wgmma on float32 is TF32, which cannot meet the float32
    tolerance, so the same launch runs a plain shared-memory FMA tiling
    (the tensor maps unused); the tuner finds this candidate slow there.

    Deterministic: every output sums its k products in one fixed order.

    Launch: grid [min(tiles*SPLIT, GRID)] (CLUSTER 2: twice
    min(pairs*SPLIT, GRID/2), clusters [2]), block [128*(CONSUMERS+1)],
    shared STAGES*(BM+BN)*BK*2 + 1024 + CONSUMERS*16384 (the stages, the
    slack to align them to 1024 bytes, two C buffers a consumer; the
    barriers are static). */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef RASTER
#define RASTER 0
#endif
#ifndef GROUP
#define GROUP 8
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef SPLIT
#define SPLIT 1
#endif

#ifndef AK_CUDA_ABI
/* The tensor-map parameter (CUtensorMap's size and alignment) until the
   prelude defines it. */
typedef struct __align__ (64) { ak_u64 opaque[16]; } ak_tensor_map_t;
#endif

#define NT          (128 * (CONSUMERS + 1))
#define WGM         (BM / CONSUMERS)              /* rows per consumer warpgroup */
#define MI          (WGM / 64)                    /* m64 wgmma per k16 step */
#define A_BYTES     (BM * BK * 2)
#define B_BYTES     (BN * BK * 2)
#define STAGE_BYTES (A_BYTES + B_BYTES)
#define TM          (BM * CLUSTER)                /* rows of a cluster's tile pair */

static_assert (CLUSTER == 1 || CLUSTER == 2, "CLUSTER: 1 or 2");
static_assert (CLUSTER == 1 || BN >= 128, "CLUSTER 2 splits B's 64-column panels between the two blocks");
static_assert (CONSUMERS == 1 || CONSUMERS == 2, "1 or 2 consumer warpgroups");
static_assert (BM % (64 * CONSUMERS) == 0, "BM must be a multiple of 64 per consumer warpgroup");
static_assert (BN == 64 || BN == 128 || BN == 256, "BN: 64, 128 or 256");
static_assert (BK % 64 == 0 && BK <= 256, "BK: 64-element (128-byte) panels");
static_assert (MI * BN / 2 <= 128, "at most 128 accumulator registers a thread");
static_assert (STAGES >= 2, "at least 2 stages");
static_assert (RASTER == 0 || RASTER == 1, "RASTER: 0 or 1");
static_assert (GROUP >= 1, "GROUP >= 1");
static_assert (SPLIT == 1 || SPLIT == 2 || SPLIT == 4 || SPLIT == 8, "SPLIT: 1, 2, 4 or 8");

/*  Register budgets.  ptxas compiles the whole kernel within one register
    count, the launch bound's cap or the largest setmaxnreg, whichever is
    less, and the block starts with it.  CONSUMERS 2: 65536/384 -> 168; the
    producer gives all but 40 back and the consumers take them (40 + 2*232
    == 3*168; an increase beyond what was given back would block forever).
    CONSUMERS 1: the cap is 255, so the block starts at 240 and the
    consumer's increase is a no-op; the producer's decrease still frees
    registers for nothing else, but keeps one code path. */
#if CONSUMERS == 2
#define R_START 168
#define R_CONS  232
#else
#define R_START 240
#define R_CONS  240
#endif
#define R_PROD 40
static_assert (R_PROD + CONSUMERS * R_CONS <= (CONSUMERS + 1) * R_START, "register budget");

/*  Split K (SPLIT > 1): the partial tiles of the slices, float32 in the
    order of the consumers' accumulators (for warpgroup cw of slice q of
    split tile j, element e of slice i of thread tid at ((j*nsplit +
    q)*CONSUMERS + cw)*WGM*BN + (i*BN/2 + e)*128 + tid: every store and
    load of a warpgroup coalesced), and a counter a split tile and
    consumer warpgroup. */
#if SPLIT > 1
#define WS_FLOATS (GRID * BM * BN)      /* one wave of units: tail*nsplit <= the grid */
#define WS_COUNTERS 4096
__device__ float s_ws[WS_FLOATS];
__device__ unsigned int s_cnt[WS_COUNTERS];
#endif

/*  The walk, the same in every thread: the tiles of the grid's full
    waves (full: the largest multiple of the grid below or at the tile
    count) whole, then the rest, the last partial wave, each split into
    nsplit slices of K.  nsplit: the largest of 2, 4 .. SPLIT (at most
    KT: every slice at least one BK step) whose units still fit one wave
    (tail*nsplit <= the grid), else 1: 32 tiles on 132 blocks split in 4,
    64 in 2 even at SPLIT 4, 96 not at all.  More waves of smaller units
    lost on the H100 (session 36): 96 tiles of 128 x 128 at 128 x 12288 x
    4096 took 39 us whole, 53 us in two waves of halves and 61 us in three
    of quarters, the partials' float32 traffic on top of a memory-bound
    tile.  units: the work units, full + (tiles - full)*nsplit. */
typedef struct {
    int full, nsplit, units;
} s_walk_t;

__device__ __forceinline__ s_walk_t s_walk (int tiles, int KT)
{
    s_walk_t w;
#if SPLIT > 1
    const int lanes = (int) gridDim.x / CLUSTER;     /* units running at once */
    w.full = tiles / lanes * lanes;
    const int tail = tiles - w.full;
    int best = 1;
    for (int n = 2; n <= SPLIT && n <= KT && tail * n <= lanes; n *= 2)
        if ((ak_i64) tail * n * CLUSTER * BM * BN <= WS_FLOATS && (ak_i64) tail * CLUSTER * CONSUMERS <= WS_COUNTERS)
            best = n;
    w.nsplit = best;
    w.units = w.full + tail * best;
#else
    (void) KT;
    w.full = tiles;
    w.nsplit = 1;
    w.units = tiles;
#endif
    return w;
}

/*  Work unit u of the walk -> its tile t, its slice q (-1: the tile
    whole, or split into one slice) and the slice's BK steps [kt0, kt1);
    a split tile's slices are consecutive units. */
__device__ __forceinline__ void s_unit (int u, const s_walk_t &w, int KT, int *t, int *q, int *kt0, int *kt1)
{
#if SPLIT > 1
    if (u < w.full || w.nsplit == 1) {
        *t = u;                         /* with one slice, units are tiles */
        *q = -1;
        *kt0 = 0;
        *kt1 = KT;
        return;
    }
    const int v = u - w.full;
    *t = w.full + v / w.nsplit;
    *q = v % w.nsplit;
    *kt0 = (int) ((ak_i64) *q * KT / w.nsplit);
    *kt1 = (int) ((ak_i64) (*q + 1) * KT / w.nsplit);
#else
    (void) w;
    *t = u;
    *q = -1;
    *kt0 = 0;
    *kt1 = KT;
#endif
}

/*  Tile t of the walk (tiles of TM rows: a cluster's pair) -> its first
    row and column. */
__device__ __forceinline__ void s_tile (int t, int tiles_m, int tiles_n, ak_i64 *m0, ak_i64 *n0)
{
#if RASTER == 0
    const int per_group = GROUP * tiles_n, g = t / per_group, first = g * GROUP;
    const int rows = min (tiles_m - first, GROUP), r = t - g * per_group;
    *m0 = (ak_i64) (first + r % rows) * TM;
    *n0 = (ak_i64) (r / rows) * BN;
#else
    const int per_group = GROUP * tiles_m, g = t / per_group, first = g * GROUP;
    const int cols = min (tiles_n - first, GROUP), r = t - g * per_group;
    *n0 = (ak_i64) (first + r % cols) * BN;
    *m0 = (ak_i64) (r / cols) * TM;
#endif
}

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)

/* The Hopper building blocks (ak_smem, ak_bar_*, ak_tma_load_2d, ak_wgmma*)
   are in the second prelude, kernels/ak_blocks_cuda.h. */

/* ------------------------------------------------------------ the stages */

/*  8 elements from row[col..col+8) as raw bits, zero past n or when the
    row is outside the matrix. */
__device__ __forceinline__ uint4 s_load8 (const unsigned short *row, ak_i64 col, ak_i64 n, bool row_ok)
{
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const ak_i64 c = col + 2 * e;
        const unsigned lo = row_ok && c < n ? row[c] : 0u;
        const unsigned hi = row_ok && c + 1 < n ? row[c + 1] : 0u;
        w[e] = lo | hi << 16;
    }
    return make_uint4 (w[0], w[1], w[2], w[3]);
}

/*  Part of a stage without TMA, by the 128 producer threads (ptid): the
    tile of rows r0.. and columns c0.. of a row-major rows x cols matrix as
    TMA would place it, P panels of R rows x 64 columns, swizzled, zero
    out of bounds. */
__device__ __forceinline__ void s_fill (unsigned char *dst, const unsigned short *src, ak_i64 rows, ak_i64 cols,
                                     ak_i64 r0, ak_i64 c0, int R, int P, int ptid)
{
    for (int c = ptid; c < P * R * 8; c += 128) {
        const int p = c / (R * 8), r = (c / 8) % R, ch = c % 8;
        const ak_i64 gr = r0 + r;
        const bool ok = gr < rows;
        *(uint4 *) (dst + p * R * 128 + ak_swz128 (r, ch))
            = s_load8 (src + (ok ? gr : 0) * cols, c0 + p * 64 + ch * 8, cols, ok);
    }
}

/* ------------------------------------------------------------ the cluster */

/*  This block's rank in its cluster (0 without clusters). */
__device__ __forceinline__ unsigned s_rank (void)
{
#if CLUSTER > 1
    return ak_cluster_rank ();
#else
    return 0;
#endif
}

/*  Every thread of the cluster meets here (release / acquire): once, after
    the barriers are initialised.  (At the end the producer's tail keeps a
    block alive instead, so the idle producer threads can leave early.) */
__device__ __forceinline__ void s_cluster_sync (void)
{
#if CLUSTER > 1
    ak_cluster_sync ();
#endif
}

/*  Stage s of both blocks read: one arrive on this block's empty[s] and,
    with clusters, one on the peer's (its producer writes into ours too).
    The remote arrive keeps the default semantics (release at CTA scope):
    the wgmma that read the stage has completed (wait_group), so nothing
    needs ordering before it, and `.release.cluster` made it a cluster-wide
    fence on the consumers' path, 35% slower at 4096^3 (docs/benchmarks.md,
    session 24). */
__device__ __forceinline__ void s_release (unsigned bar, unsigned peer)
{
    ak_bar_arrive (bar);
#if CLUSTER > 1
    ak_bar_arrive_peer (bar, peer);
#else
    (void) peer;
#endif
}

/* ------------------------------------------------------------ split K */

#if SPLIT > 1
/*  Consumer warpgroup cw's part of slice q of split tile j (acc; j
    counts the split tiles from 0) into the workspace; the warpgroup that
    arrives last of the tile's nsplit (one counter a split tile and
    warpgroup, set back to 0 by it for the next launch) then adds the
    slices in order into acc (deterministic) and returns true: it stores
    the tile.  *last: an int of the block's shared memory, the
    warpgroup's answer. */
__device__ __forceinline__ bool s_reduce (float (&acc)[MI][BN / 2], int j, int q, int nsplit, int cw, int tid,
                                          int *last)
{
    constexpr int PART = WGM * BN;               /* floats of a warpgroup's part of a tile */
    float *ws = s_ws + (ak_i64) j * nsplit * CONSUMERS * PART + cw * PART;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int e = 0; e < BN / 2; e++)
            __stcg (ws + (ak_i64) q * CONSUMERS * PART + (i * (BN / 2) + e) * 128 + tid, acc[i][e]);
    __threadfence ();
    ak_wg_sync (cw);
    if (tid == 0) {
        unsigned int *cnt = &s_cnt[j * CONSUMERS + cw];
        const bool l = atomicAdd (cnt, 1u) == (unsigned) nsplit - 1;
        if (l)
            *cnt = 0;
        *last = l;
    }
    ak_wg_sync (cw);
    if (!*last)
        return false;
    __threadfence ();
    /* slice by slice, every element's load of a slice issued before the
       sums that wait on them: one L2 round trip a slice, not one an
       element (an element's loop over the slices innermost waited on each
       load in turn: SPLIT 4 took 167-188 us at 256 x 4096 x 11008 on an
       H100, 45-48 us with this and the walk of one wave, session 36) */
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int e = 0; e < BN / 2; e++)
            acc[i][e] = __ldcg (ws + (i * (BN / 2) + e) * 128 + tid);
    for (int p = 1; p < nsplit; p++) {
        const float *wp = ws + (ak_i64) p * CONSUMERS * PART;
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int e = 0; e < BN / 2; e++)
                acc[i][e] += __ldcg (wp + (i * (BN / 2) + e) * 128 + tid);
    }
    return true;
}
#endif

/* ------------------------------------------------------------ the kernel */

extern "C" __global__ void __launch_bounds__ (NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a,
           const __grid_constant__ ak_tensor_map_t tm_b, const __grid_constant__ ak_tensor_map_t tm_c)
{
    AK_DYNAMIC_SHARED (unsigned char, s_raw);
    __shared__ __align__ (8) ak_u64 full[STAGES], empty[STAGES];
#if SPLIT > 1
    __shared__ int last[CONSUMERS];
#endif
    const unsigned raw_s = ak_smem (s_raw), base_s = (raw_s + 1023u) & ~1023u;
    unsigned char *smem = s_raw + (base_s - raw_s);
    const unsigned full_s = ak_smem (full), empty_s = ak_smem (empty);

    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    /* tiles of TM rows: with clusters, the pairs the clusters walk */
    const int tiles_m = (int) ((M + TM - 1) / TM), tiles_n = (int) ((N + BN - 1) / BN);
    const int tiles = tiles_m * tiles_n, KT = (int) ((K + BK - 1) / BK);
    const s_walk_t walk = s_walk (tiles, KT);
    const int wg = threadIdx.x / 128;
    const unsigned rank = s_rank (), peer = rank ^ 1u;
    const int first = blockIdx.x / CLUSTER, step = gridDim.x / CLUSTER;
    /* cuTensorMapEncodeTiled's rules: 16-byte aligned base and row strides */
    const bool tma = K % 8 == 0 && N % 8 == 0 && ((ak_u64) A & 15) == 0 && ((ak_u64) B & 15) == 0
                     && ak_tensor_map_present (&tm_a) && ak_tensor_map_present (&tm_b);
    /* the epilogue through shared memory and TMA stores (C's rows 16-byte
       aligned too: N % 8 == 0 is in tma) */
    const bool tma_c = tma && ((ak_u64) C & 15) == 0 && ak_tensor_map_present (&tm_c);

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            ak_bar_init (full_s + 8 * s, 1);
            ak_bar_init (empty_s + 8 * s, CONSUMERS * CLUSTER);
        }
        ak_mbar_fence_init ();
        if (tma) {
            ak_tma_prefetch (&tm_a);
            ak_tma_prefetch (&tm_b);
        }
        if (tma_c)
            ak_tma_prefetch (&tm_c);
    }
    __syncthreads ();
    s_cluster_sync ();     /* the peer's barriers are initialised */

    if (wg == 0) {
        /* ---------------------------------------------------- producer */
        ak_setmaxnreg_dec<R_PROD> ();
        const int ptid = threadIdx.x;
        if (tma && ptid != 0)
            return;
        int s = 0;
        unsigned ph = 0;
        for (int u = first; u < walk.units; u += step) {
            int t, q, kt0, kt1;
            s_unit (u, walk, KT, &t, &q, &kt0, &kt1);
            ak_i64 m0, n0;
            s_tile (t, tiles_m, tiles_n, &m0, &n0);
            m0 += rank * BM;
            for (int kt = kt0; kt < kt1; kt++) {
                const unsigned fb = full_s + 8 * s, st = base_s + s * STAGE_BYTES;
                ak_bar_wait (empty_s + 8 * s, ph ^ 1);
                if (tma) {
                    ak_bar_expect (fb, STAGE_BYTES);
#pragma unroll
                    for (int p = 0; p < BK / 64; p++)
                        ak_tma_load_2d (st + p * BM * 128, &tm_a, kt * BK + p * 64, (int) m0, fb);
#if CLUSTER == 1
#pragma unroll
                    for (int p = 0; p < BN / 64; p++)
                        ak_tma_load_2d (st + A_BYTES + p * BK * 128, &tm_b, (int) n0 + p * 64, kt * BK, fb);
#else
                    /* this block's half of B's panels, into both blocks */
#pragma unroll
                    for (int q = 0; q < BN / 128; q++) {
                        const int p = (int) rank * (BN / 128) + q;
                        ak_tma_load_2d_multicast (st + A_BYTES + p * BK * 128, &tm_b, (int) n0 + p * 64, kt * BK, fb,
                                                  3);
                    }
#endif
                }
                else {
                    unsigned char *sp = smem + s * STAGE_BYTES;
                    s_fill (sp, (const unsigned short *) A, M, K, m0, (ak_i64) kt * BK, BM, BK / 64, ptid);
                    s_fill (sp + A_BYTES, (const unsigned short *) B, K, N, (ak_i64) kt * BK, n0, BK, BN / 64, ptid);
                    /* the generic-proxy stores, visible to wgmma's async proxy */
                    ak_fence_proxy_async_shared ();
                    ak_bar_sync_n<1, 128> ();
                    if (ptid == 0)
                        ak_bar_arrive (fb);
                }
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1;
                }
            }
        }
#if CLUSTER > 1
        /* the tail: wait as for STAGES more loads, so this block leaves only
           once every stage was released by both blocks (no arrive of the
           peer's consumers can then reach a block that has left) */
        for (int i = 0; i < STAGES; i++) {
            ak_bar_wait (empty_s + 8 * s, ph ^ 1);
            if (++s == STAGES) {
                s = 0;
                ph ^= 1;
            }
        }
#endif
        return;
    }

    /* -------------------------------------------------------- consumers */
    ak_setmaxnreg_inc<R_CONS> ();
    const int tid = threadIdx.x % 128, cw = wg - 1;
    float acc[MI][BN / 2];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < BN / 2; j++)
            acc[i][j] = 0.0f;

    int s = 0, nc = 0;     /* nc: C chunks this warpgroup stored */
    unsigned ph = 0;
    const unsigned cbuf = base_s + STAGES * STAGE_BYTES + cw * 2 * AK_WG_CHUNK;
    for (int u = first; u < walk.units; u += step) {
        int t, q, kt0, kt1;
        s_unit (u, walk, KT, &t, &q, &kt0, &kt1);
        ak_i64 m0, n0;
        s_tile (t, tiles_m, tiles_n, &m0, &n0);
        m0 += rank * BM;
        int prev = 0;
        for (int kt = kt0; kt < kt1; kt++) {
            ak_bar_wait (full_s + 8 * s, ph);
            const unsigned sa = base_s + s * STAGE_BYTES + cw * WGM * 128, sb = base_s + s * STAGE_BYTES + A_BYTES;
            ak_wgmma_fence ();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                const ak_u64 db = ak_wgmma_desc (sb + kk * 16 * 128, BK * 128, 1024);
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const ak_u64 da = ak_wgmma_desc (sa + (kk / 4) * BM * 128 + i * 64 * 128 + (kk % 4) * 32, 16, 1024);
                    ak_wgmma<BN> (acc[i], da, db, kt > kt0 || kk > 0);
                }
            }
            ak_wgmma_commit ();
            if (kt > kt0) {
                /* the previous stage's group is done: hand it back */
                ak_wgmma_wait<1> ();
                if (tid == 0)
                    s_release (empty_s + 8 * prev, peer);
            }
            prev = s;
            if (++s == STAGES) {
                s = 0;
                ph ^= 1;
            }
        }
        ak_wgmma_wait<0> ();
        if (tid == 0)
            s_release (empty_s + 8 * prev, peer);
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < BN / 2; j++)
                ak_reg_fence (acc[i][j]);
#if SPLIT > 1
        if (q >= 0 && !s_reduce (acc, (t - walk.full) * CLUSTER + (int) rank, q, walk.nsplit, cw, tid, &last[cw]))
            continue;      /* not the tile's last slice: its partial is written */
#endif

        if (tma_c) {
            /* through two shared buffers, stored by TMA (ak_blocks_cuda.h) */
            ak_wg_store_tma<MI, BN> ([&] (int i, int e) { return acc[i][e]; }, &tm_c, (int) m0 + cw * WGM,
                                     (int) n0, cbuf, cw, tid, nc);
            continue;
        }

        ak_wg_store_direct<MI, BN> ([&] (int i, int e) { return acc[i][e]; }, C, M, N, m0 + cw * WGM, n0, tid);
    }
    /* the last stores have read shared memory and written C */
    if (tma_c && tid == 0)
        ak_bulk_wait<0, false> ();
}

#else   /* float32: shared-memory FMA tiling inside the same launch */

#define FT  32                            /* a 32 x 32 tile of C per step */
#define FPER ((FT * FT + NT - 1) / NT)    /* outputs per thread */

extern "C" __global__ void __launch_bounds__ (NT)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a,
           const __grid_constant__ ak_tensor_map_t tm_b, const __grid_constant__ ak_tensor_map_t tm_c)
{
    (void) tm_a;
    (void) tm_b;
    (void) tm_c;
    /* the two tiles in the launch's dynamic shared memory (sized for the
       16-bit path, at least 90 KB): static arrays on top of it would pass
       the block's limit at the largest configurations */
    AK_DYNAMIC_SHARED (unsigned char, s_raw);
    float (*As)[FT + 1] = (float (*)[FT + 1]) s_raw, (*Bs)[FT + 1] = As + FT;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const ak_i64 tiles_n = (N + FT - 1) / FT, tiles = (M + FT - 1) / FT * tiles_n;
    const int tid = threadIdx.x;
    for (ak_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const ak_i64 m0 = t / tiles_n * FT, n0 = t % tiles_n * FT;
        float acc[FPER];
#pragma unroll
        for (int e = 0; e < FPER; e++)
            acc[e] = 0.0f;
        for (ak_i64 k0 = 0; k0 < K; k0 += FT) {
            for (int c = tid; c < FT * FT; c += NT) {
                const int r = c / FT, q = c % FT;
                As[r][q] = m0 + r < M && k0 + q < K ? A[(m0 + r) * K + k0 + q] : 0.0f;
                Bs[r][q] = k0 + r < K && n0 + q < N ? B[(k0 + r) * N + n0 + q] : 0.0f;
            }
            __syncthreads ();
#pragma unroll
            for (int e = 0; e < FPER; e++) {
                const int idx = tid + e * NT;
                if (idx < FT * FT)
                    for (int kk = 0; kk < FT; kk++)
                        acc[e] += As[idx / FT][kk] * Bs[kk][idx % FT];
            }
            __syncthreads ();
        }
#pragma unroll
        for (int e = 0; e < FPER; e++) {
            const int idx = tid + e * NT;
            const ak_i64 r = m0 + idx / FT, n = n0 + idx % FT;
            if (idx < FT * FT && r < M && n < N)
                C[r * N + n] = acc[e];
        }
    }
}

#endif
