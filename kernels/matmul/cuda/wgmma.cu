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

    Epilogue: guarded stores straight from the accumulators (pairs of
    elements where N is even), so every edge is exact.

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

    Launch: grid [min(tiles, GRID)], block [128*(CONSUMERS+1)],
    shared STAGES*(BM+BN)*BK*2 + 1024 (the stages and the slack to align
    them to 1024 bytes; the barriers are static). */
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

static_assert (CLUSTER == 1, "clusters are not implemented yet");
static_assert (CONSUMERS == 1 || CONSUMERS == 2, "1 or 2 consumer warpgroups");
static_assert (BM % (64 * CONSUMERS) == 0, "BM must be a multiple of 64 per consumer warpgroup");
static_assert (BN == 64 || BN == 128 || BN == 256, "BN: 64, 128 or 256");
static_assert (BK % 64 == 0 && BK <= 256, "BK: 64-element (128-byte) panels");
static_assert (MI * BN / 2 <= 128, "at most 128 accumulator registers a thread");
static_assert (STAGES >= 2, "at least 2 stages");
static_assert (RASTER == 0 || RASTER == 1, "RASTER: 0 or 1");
static_assert (GROUP >= 1, "GROUP >= 1");

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

/*  Tile t of the walk -> its first row and column. */
__device__ __forceinline__ void s_tile (int t, int tiles_m, int tiles_n, ak_i64 *m0, ak_i64 *n0)
{
#if RASTER == 0
    const int per_group = GROUP * tiles_n, g = t / per_group, first = g * GROUP;
    const int rows = min (tiles_m - first, GROUP), r = t - g * per_group;
    *m0 = (ak_i64) (first + r % rows) * BM;
    *n0 = (ak_i64) (r / rows) * BN;
#else
    const int per_group = GROUP * tiles_m, g = t / per_group, first = g * GROUP;
    const int cols = min (tiles_n - first, GROUP), r = t - g * per_group;
    *n0 = (ak_i64) (first + r % cols) * BN;
    *m0 = (ak_i64) (r / cols) * BM;
#endif
}

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)

/* The Hopper building blocks (ak_smem, ak_bar_*, ak_tma_load_2d, ak_wgmma*)
   are in the second prelude, kernels/ak_blocks_cuda.h. */

/* ------------------------------------------------------------ the stages */

/*  Whether the worker encoded the map (a zero map: it could not). */
__device__ __forceinline__ bool s_map_set (const ak_tensor_map_t *map)
{
    ak_u64 x = 0;
#pragma unroll
    for (int i = 0; i < 16; i++)
        x |= map->opaque[i];
    return x != 0;
}

/*  16-byte chunk ch (8 elements) of 128-byte row r of a panel, where
    TMA's 128-byte swizzle puts it. */
__device__ __forceinline__ unsigned s_swz (int r, int ch)
{
    return (unsigned) (r * 128 + ((ch ^ (r & 7)) << 4));
}

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
        *(uint4 *) (dst + p * R * 128 + s_swz (r, ch)) = s_load8 (src + (ok ? gr : 0) * cols, c0 + p * 64 + ch * 8,
                                                                 cols, ok);
    }
}

/* ------------------------------------------------------------ the kernel */

extern "C" __global__ void __launch_bounds__ (NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a,
           const __grid_constant__ ak_tensor_map_t tm_b)
{
    extern __shared__ __align__ (16) unsigned char s_raw[];
    __shared__ __align__ (8) ak_u64 full[STAGES], empty[STAGES];
    const unsigned raw_s = ak_smem (s_raw), base_s = (raw_s + 1023u) & ~1023u;
    unsigned char *smem = s_raw + (base_s - raw_s);
    const unsigned full_s = ak_smem (full), empty_s = ak_smem (empty);

    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tiles_m = (int) ((M + BM - 1) / BM), tiles_n = (int) ((N + BN - 1) / BN);
    const int tiles = tiles_m * tiles_n, KT = (int) ((K + BK - 1) / BK);
    const int wg = threadIdx.x / 128;
    /* cuTensorMapEncodeTiled's rules: 16-byte aligned base and row strides */
    const bool tma = K % 8 == 0 && N % 8 == 0 && ((ak_u64) A & 15) == 0 && ((ak_u64) B & 15) == 0
                     && s_map_set (&tm_a) && s_map_set (&tm_b);

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            ak_bar_init (full_s + 8 * s, 1);
            ak_bar_init (empty_s + 8 * s, CONSUMERS);
        }
        asm volatile ("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        if (tma) {
            asm volatile ("prefetch.tensormap [%0];\n" :: "l" ((ak_u64) &tm_a) : "memory");
            asm volatile ("prefetch.tensormap [%0];\n" :: "l" ((ak_u64) &tm_b) : "memory");
        }
    }
    __syncthreads ();

    if (wg == 0) {
        /* ---------------------------------------------------- producer */
        asm volatile ("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n" (R_PROD));
        const int ptid = threadIdx.x;
        if (tma && ptid != 0)
            return;
        int s = 0;
        unsigned ph = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            ak_i64 m0, n0;
            s_tile (t, tiles_m, tiles_n, &m0, &n0);
            for (int kt = 0; kt < KT; kt++) {
                const unsigned fb = full_s + 8 * s, st = base_s + s * STAGE_BYTES;
                ak_bar_wait (empty_s + 8 * s, ph ^ 1);
                if (tma) {
                    ak_bar_expect (fb, STAGE_BYTES);
#pragma unroll
                    for (int p = 0; p < BK / 64; p++)
                        ak_tma_load_2d (st + p * BM * 128, &tm_a, kt * BK + p * 64, (int) m0, fb);
#pragma unroll
                    for (int p = 0; p < BN / 64; p++)
                        ak_tma_load_2d (st + A_BYTES + p * BK * 128, &tm_b, (int) n0 + p * 64, kt * BK, fb);
                }
                else {
                    unsigned char *sp = smem + s * STAGE_BYTES;
                    s_fill (sp, (const unsigned short *) A, M, K, m0, (ak_i64) kt * BK, BM, BK / 64, ptid);
                    s_fill (sp + A_BYTES, (const unsigned short *) B, K, N, (ak_i64) kt * BK, n0, BK, BN / 64, ptid);
                    /* the generic-proxy stores, visible to wgmma's async proxy */
                    asm volatile ("fence.proxy.async.shared::cta;\n" ::: "memory");
                    asm volatile ("bar.sync 1, 128;\n" ::: "memory");
                    if (ptid == 0)
                        ak_bar_arrive (fb);
                }
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1;
                }
            }
        }
        return;
    }

    /* -------------------------------------------------------- consumers */
    asm volatile ("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n" (R_CONS));
    const int tid = threadIdx.x % 128, cw = wg - 1;
    float acc[MI][BN / 2];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < BN / 2; j++)
            acc[i][j] = 0.0f;

    int s = 0;
    unsigned ph = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        ak_i64 m0, n0;
        s_tile (t, tiles_m, tiles_n, &m0, &n0);
        int prev = 0;
        for (int kt = 0; kt < KT; kt++) {
            ak_bar_wait (full_s + 8 * s, ph);
            const unsigned sa = base_s + s * STAGE_BYTES + cw * WGM * 128, sb = base_s + s * STAGE_BYTES + A_BYTES;
            ak_wgmma_fence ();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                const ak_u64 db = ak_wgmma_desc (sb + kk * 16 * 128, BK * 128, 1024);
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const ak_u64 da = ak_wgmma_desc (sa + (kk / 4) * BM * 128 + i * 64 * 128 + (kk % 4) * 32, 16, 1024);
                    ak_wgmma<BN> (acc[i], da, db, kt > 0 || kk > 0);
                }
            }
            ak_wgmma_commit ();
            if (kt > 0) {
                /* the previous stage's group is done: hand it back */
                ak_wgmma_wait<1> ();
                if (tid == 0)
                    ak_bar_arrive (empty_s + 8 * prev);
            }
            prev = s;
            if (++s == STAGES) {
                s = 0;
                ph ^= 1;
            }
        }
        ak_wgmma_wait<0> ();
        if (tid == 0)
            ak_bar_arrive (empty_s + 8 * prev);
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < BN / 2; j++)
                ak_reg_fence (acc[i][j]);

        /* d[4j+e]: row warp*16 + lane/4 + 8*(e/2), column 8j + 2*(lane%4) + e%2 */
        const bool pairs = N % 2 == 0;
        const ak_i64 row0 = m0 + cw * WGM + (tid / 32) * 16 + (tid % 32) / 4;
        const ak_i64 col0 = n0 + 2 * (tid % 4);
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const ak_i64 r = row0 + i * 64 + h * 8, col = col0 + j * 8;
                    if (r >= M)
                        continue;
                    ak_t *out = C + r * N + col;
                    const float v0 = acc[i][4 * j + 2 * h], v1 = acc[i][4 * j + 2 * h + 1];
                    if (pairs && col + 1 < N) {
                        ak_t v[2] = { ak_from_acc (v0), ak_from_acc (v1) };
                        *(unsigned *) out = *(const unsigned *) v;
                    }
                    else {
                        if (col < N)
                            out[0] = ak_from_acc (v0);
                        if (col + 1 < N)
                            out[1] = ak_from_acc (v1);
                    }
                }
    }
}

#else   /* float32: shared-memory FMA tiling inside the same launch */

#define FT  32                            /* a 32 x 32 tile of C per step */
#define FPER ((FT * FT + NT - 1) / NT)    /* outputs per thread */

extern "C" __global__ void __launch_bounds__ (NT)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a,
           const __grid_constant__ ak_tensor_map_t tm_b)
{
    (void) tm_a;
    (void) tm_b;
    __shared__ float As[FT][FT + 1], Bs[FT][FT + 1];
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
