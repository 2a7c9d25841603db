/*  fused_mlp, Hopper-native (cuda, sm_90a), one persistent launch.
      h = silu (x Wg) * (x Wu)     [batch][hidden], an output
      y = h Wd                     [batch][dim]

    The GEMM core of kernels/matmul/cuda/wgmma.cu (read its header for the
    pipeline, the shared-memory layouts and the wgmma descriptors): a
    producer warpgroup (setmaxnreg.dec to 72 or 120) filling a ring of STAGES stages
    with TMA, CONSUMERS math warpgroups (setmaxnreg.inc) running
    `wgmma.mma_async m64nBNk16` from shared memory, full / empty mbarriers
    per stage.  Two phases, as in kernels/fused_mlp/cuda/tc.cu:

      phase 1  tiles of h: a stage holds x (BM x BK) and the Wg and Wu
               panels (BK x BN each); every k16 step issues two wgmma per
               m64 slice into two accumulator sets (gate, up); the
               epilogue stores silu(g) * u in the element type;
      barrier  grid-wide: each consumer warpgroup, its h stores done,
               fences them (`__threadfence`, and `fence.proxy.async.global`
               since phase 2 reads h through TMA, the async proxy) and
               arrives on a shared `done` mbarrier; the producer waits for
               it, then joins the grid barrier (an arrival counter in device
               memory), fences again and only then loads h;
      phase 2  tiles of y = h Wd (one B panel a stage, one accumulator set).

    The stage ring and its phase bits run on from phase 1 into phase 2; the
    producer loads phase-2 stages as soon as the barrier opens, while the
    consumers may still store their last h tile.  Tiles go column panel by
    column panel (blocks running together share a weight panel).

    Maps (dims and box innermost first): tm_x {dim, batch} box {64, BM},
    tm_wg / tm_wu {hidden, dim} box {64, BK}, tm_h {hidden, batch} box
    {64, BM}, tm_wd {dim, hidden} box {64, BK}; 128-byte swizzle, zero
    fill.  Where dim or hidden is not a multiple of 8 (row strides TMA
    cannot take), a base is not 16-byte aligned or a map is all zero, the
    producer warpgroup fills the stages itself (h read back with
    L1-bypassing loads after the barrier).

    The grid barrier needs every block resident: a grid larger than the SM
    count returns at once without writing (the gates then report unwritten
    outputs rather than a hang); GRID is the H100 / H200 SM count, and a
    block takes most of an SM's shared memory, so one block an SM.

    float32: the two phases with a plain shared-memory FMA tiling (TF32
    could not meet the float32 tolerance), the maps unused.

    Deterministic: every output sums in one fixed order.

    Launch: grid [GRID], block [128*(CONSUMERS+1)],
    shared STAGES*(BM+2*BN)*BK*2 + 1024. */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
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

#ifndef AK_CUDA_ABI
/* The tensor-map parameter (CUtensorMap's size and alignment) until the
   prelude defines it. */
typedef struct __align__ (64) { ak_u64 opaque[16]; } ak_tensor_map_t;
#endif

#define NT          (128 * (CONSUMERS + 1))
#define WGM         (BM / CONSUMERS)
#define MI          (WGM / 64)
#define A_BYTES     (BM * BK * 2)
#define B_BYTES     (BN * BK * 2)
#define STAGE_BYTES (A_BYTES + 2 * B_BYTES)

static_assert (CONSUMERS == 1 || CONSUMERS == 2, "1 or 2 consumer warpgroups");
static_assert (BM % (64 * CONSUMERS) == 0, "BM must be a multiple of 64 per consumer warpgroup");
static_assert (BN == 64 || BN == 128 || BN == 256, "BN: 64, 128 or 256");
static_assert (BK % 64 == 0 && BK <= 256, "BK: 64-element (128-byte) panels");
static_assert (MI * BN <= 128, "two accumulator sets, at most 128 registers a thread");
static_assert (STAGES >= 2, "at least 2 stages");

/*  Register budgets as in matmul's wgmma.cu, but the producer keeps more:
    its two phases and five maps do not fit in 40, and with BN 64 not in
    72 (ptxas spills there; measured with NVRTC 13.0).  CONSUMERS 2:
    72 + 2*216 == 3*168 (BN 128), 120 + 2*192 == 3*168 (BN 64). */
#if CONSUMERS == 2
#define R_START 168
#if BN == 64
#define R_PROD  120
#define R_CONS  192
#else
#define R_PROD  72
#define R_CONS  216
#endif
#else
#define R_START 240
#define R_PROD  120
#define R_CONS  240
#endif
static_assert (R_PROD + CONSUMERS * R_CONS <= (CONSUMERS + 1) * R_START, "register budget");

/* ------------------------------------------------------ the grid barrier */

__device__ unsigned long long s_barrier;          /* arrivals, over every launch of the module */

/*  One thread of each block: every launch adds exactly gridDim.x arrivals,
    and launches of a module are ordered on the stream, so the target is
    the next multiple of the grid size. */
__device__ __forceinline__ void s_grid_arrive_wait (void)
{
    const unsigned long long g = gridDim.x;
    __threadfence ();
    const unsigned long long target = (atomicAdd (&s_barrier, 1ull) / g + 1) * g;
    while (*(volatile unsigned long long *) &s_barrier < target)
        __nanosleep (32);
    __threadfence ();
}

__device__ __forceinline__ float s_silu_mul (float g, float u)
{
    return g / (1.0f + __expf (-g)) * u;
}

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)

/* The Hopper building blocks (ak_smem, ak_bar_*, ak_tma_load_2d, ak_wgmma*)
   are in the second prelude, kernels/ak_blocks_cuda.h. */

/* ------------------------------------------------------------ the stages */

/*  8 elements from row[col..col+8) as raw bits, zero past n or when the
    row is outside the matrix; L1 bypassed (h, written by other blocks in
    phase 1, is read back in phase 2). */
__device__ __forceinline__ uint4 s_load8 (const unsigned short *row, ak_i64 col, ak_i64 n, bool row_ok)
{
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const ak_i64 c = col + 2 * e;
        const unsigned lo = row_ok && c < n ? __ldcg (row + c) : 0u;
        const unsigned hi = row_ok && c + 1 < n ? __ldcg (row + c + 1) : 0u;
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

/*  A consumer warpgroup's tiles of one phase (PHASE 0: h with two
    accumulator sets and the gated epilogue; 1: y), the stage ring's
    position in s / ph carried from one phase into the next. */
template <int PHASE>
__device__ __forceinline__ void s_consume (int tiles, int tiles_m, int KT, unsigned base_s, unsigned full_s,
                                           unsigned empty_s, int cw, int tid, int &s, unsigned &ph, ak_t *C,
                                           ak_i64 rows, ak_i64 cols)
{
    float acc_g[MI][BN / 2], acc_u[MI][PHASE ? 1 : BN / 2];
#pragma unroll
    for (int i = 0; i < MI; i++) {
#pragma unroll
        for (int j = 0; j < BN / 2; j++)
            acc_g[i][j] = 0.0f;
#pragma unroll
        for (int j = 0; j < (PHASE ? 1 : BN / 2); j++)
            acc_u[i][j] = 0.0f;
    }
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const ak_i64 m0 = (ak_i64) (t % tiles_m) * BM, n0 = (ak_i64) (t / tiles_m) * BN;
        int prev = 0;
        for (int kt = 0; kt < KT; kt++) {
            ak_bar_wait (full_s + 8 * s, ph);
            const unsigned sa = base_s + s * STAGE_BYTES + cw * WGM * 128;
            const unsigned sb = base_s + s * STAGE_BYTES + A_BYTES;
            ak_wgmma_fence ();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                const ak_u64 dg = ak_wgmma_desc (sb + kk * 16 * 128, BK * 128, 1024);
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const ak_u64 da = ak_wgmma_desc (sa + (kk / 4) * BM * 128 + i * 64 * 128 + (kk % 4) * 32, 16, 1024);
                    ak_wgmma<BN> (acc_g[i], da, dg, kt > 0 || kk > 0);
                    if constexpr (PHASE == 0)
                        ak_wgmma<BN> (acc_u[i], da, ak_wgmma_desc (sb + B_BYTES + kk * 16 * 128, BK * 128, 1024),
                                     kt > 0 || kk > 0);
                }
            }
            ak_wgmma_commit ();
            if (kt > 0) {
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
        for (int i = 0; i < MI; i++) {
#pragma unroll
            for (int j = 0; j < BN / 2; j++)
                ak_reg_fence (acc_g[i][j]);
#pragma unroll
            for (int j = 0; j < (PHASE ? 1 : BN / 2); j++)
                ak_reg_fence (acc_u[i][j]);
        }
        /* silu(g) * u in phase 1, g in phase 2 (ak_blocks_cuda.h) */
        if constexpr (PHASE == 0)
            ak_wg_store_direct<MI, BN> ([&] (int i, int e) { return s_silu_mul (acc_g[i][e], acc_u[i][e]); }, C,
                                        rows, cols, m0 + cw * WGM, n0, tid);
        else
            ak_wg_store_direct<MI, BN> ([&] (int i, int e) { return acc_g[i][e]; }, C, rows, cols, m0 + cw * WGM,
                                        n0, tid);
    }
}

/* ------------------------------------------------------------ the kernel */

extern "C" __global__ void __launch_bounds__ (NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_x,
           const __grid_constant__ ak_tensor_map_t tm_wg, const __grid_constant__ ak_tensor_map_t tm_wu,
           const __grid_constant__ ak_tensor_map_t tm_h, const __grid_constant__ ak_tensor_map_t tm_wd)
{
    if (gridDim.x > ak_nsmid ())
        return;
    AK_DYNAMIC_SHARED (unsigned char, s_raw);
    __shared__ __align__ (8) ak_u64 full[STAGES], empty[STAGES], done;
    const unsigned raw_s = ak_smem (s_raw), base_s = (raw_s + 1023u) & ~1023u;
    unsigned char *smem = s_raw + (base_s - raw_s);
    const unsigned full_s = ak_smem (full), empty_s = ak_smem (empty), done_s = ak_smem (&done);

    const ak_i64 batch = a.dims[0], dim = a.dims[1], hidden = a.dims[2];
    const ak_t *X = AK_IN (a, 0), *Wg = AK_IN (a, 1), *Wu = AK_IN (a, 2), *Wd = AK_IN (a, 3);
    ak_t *Y = AK_OUT (a, 0), *H = AK_OUT (a, 1);
    const int tiles_m = (int) ((batch + BM - 1) / BM);
    const int tiles1 = tiles_m * (int) ((hidden + BN - 1) / BN), tiles2 = tiles_m * (int) ((dim + BN - 1) / BN);
    const int KT1 = (int) ((dim + BK - 1) / BK), KT2 = (int) ((hidden + BK - 1) / BK);
    const int wg = threadIdx.x / 128;
    const ak_u64 ptr_or = (ak_u64) X | (ak_u64) Wg | (ak_u64) Wu | (ak_u64) Wd | (ak_u64) H;
    const bool tma = dim % 8 == 0 && hidden % 8 == 0 && (ptr_or & 15) == 0 && ak_tensor_map_present (&tm_x)
                     && ak_tensor_map_present (&tm_wg) && ak_tensor_map_present (&tm_wu)
                     && ak_tensor_map_present (&tm_h) && ak_tensor_map_present (&tm_wd);

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            ak_bar_init (full_s + 8 * s, 1);
            ak_bar_init (empty_s + 8 * s, CONSUMERS);
        }
        ak_bar_init (done_s, CONSUMERS);
        ak_mbar_fence_init ();
    }
    __syncthreads ();

    if (wg == 0) {
        /* ---------------------------------------------------- producer */
        ak_setmaxnreg_dec<R_PROD> ();
        const int ptid = threadIdx.x;
        if (tma && ptid != 0)
            return;
        int s = 0;
        unsigned ph = 0;
        for (int phase = 0; phase < 2; phase++) {
            if (phase == 1) {
                /* h complete everywhere before any of it is loaded */
                ak_bar_wait (done_s, 0);
                if (ptid == 0)
                    s_grid_arrive_wait ();
                if (!tma)
                    ak_bar_sync_n<1, 128> ();
                ak_fence_proxy_async_global ();
            }
            const int tiles = phase ? tiles2 : tiles1, KT = phase ? KT2 : KT1;
            const ak_i64 K = phase ? hidden : dim, N = phase ? dim : hidden;
            const ak_tensor_map_t *ma = phase ? &tm_h : &tm_x, *mb = phase ? &tm_wd : &tm_wg;
            const unsigned short *A = (const unsigned short *) (phase ? (const ak_t *) H : X);
            const unsigned short *B = (const unsigned short *) (phase ? Wd : Wg);
            const unsigned bytes = phase ? A_BYTES + B_BYTES : STAGE_BYTES;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                const ak_i64 m0 = (ak_i64) (t % tiles_m) * BM, n0 = (ak_i64) (t / tiles_m) * BN;
                for (int kt = 0; kt < KT; kt++) {
                    const unsigned fb = full_s + 8 * s, st = base_s + s * STAGE_BYTES;
                    ak_bar_wait (empty_s + 8 * s, ph ^ 1);
                    if (tma) {
                        ak_bar_expect (fb, bytes);
#pragma unroll
                        for (int p = 0; p < BK / 64; p++)
                            ak_tma_load_2d (st + p * BM * 128, ma, kt * BK + p * 64, (int) m0, fb);
#pragma unroll
                        for (int p = 0; p < BN / 64; p++) {
                            ak_tma_load_2d (st + A_BYTES + p * BK * 128, mb, (int) n0 + p * 64, kt * BK, fb);
                            if (phase == 0)
                                ak_tma_load_2d (st + A_BYTES + B_BYTES + p * BK * 128, &tm_wu, (int) n0 + p * 64,
                                            kt * BK, fb);
                        }
                    }
                    else {
                        unsigned char *sp = smem + s * STAGE_BYTES;
                        const ak_i64 k0 = (ak_i64) kt * BK;
                        s_fill (sp, A, batch, K, m0, k0, BM, BK / 64, ptid);
                        s_fill (sp + A_BYTES, B, K, N, k0, n0, BK, BN / 64, ptid);
                        if (phase == 0)
                            s_fill (sp + A_BYTES + B_BYTES, (const unsigned short *) Wu, K, N, k0, n0, BK, BN / 64,
                                    ptid);
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
        }
        return;
    }

    /* -------------------------------------------------------- consumers */
    ak_setmaxnreg_inc<R_CONS> ();
    const int tid = threadIdx.x % 128, cw = wg - 1;
    int s = 0;
    unsigned ph = 0;
    s_consume<0> (tiles1, tiles_m, KT1, base_s, full_s, empty_s, cw, tid, s, ph, H, batch, hidden);
    /* this warpgroup's h stores, visible at gpu scope and to the async
       proxy, then one arrive for the producer */
    __threadfence ();
    ak_fence_proxy_async_global ();
    if (cw == 0)
        ak_bar_sync_n<2, 128> ();
    else
        ak_bar_sync_n<3, 128> ();
    if (tid == 0)
        ak_bar_arrive (done_s);
    s_consume<1> (tiles2, tiles_m, KT2, base_s, full_s, empty_s, cw, tid, s, ph, Y, batch, dim);
}

#else   /* float32: the two phases with a shared-memory FMA tiling */

#define FT  32                            /* a 32 x 32 tile of the output per step */
#define FPER ((FT * FT + NT - 1) / NT)    /* outputs per thread */

/*  C[rows][cols] = A[rows][K] B[K][cols] (gated: silu(A Bg) * (A Bu), Bu
    given), tiles spread over the grid. */
__device__ void s_gemm_f32 (const float *A, const float *Bg, const float *Bu, float *C, ak_i64 rows, ak_i64 cols,
                            ak_i64 K, float (*As)[FT + 1], float (*Bs)[FT + 1], float (*Us)[FT + 1])
{
    const ak_i64 tiles_n = (cols + FT - 1) / FT, tiles = (rows + FT - 1) / FT * tiles_n;
    const int tid = threadIdx.x;
    for (ak_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const ak_i64 m0 = t / tiles_n * FT, n0 = t % tiles_n * FT;
        float g[FPER], u[FPER];
#pragma unroll
        for (int e = 0; e < FPER; e++)
            g[e] = u[e] = 0.0f;
        for (ak_i64 k0 = 0; k0 < K; k0 += FT) {
            for (int c = tid; c < FT * FT; c += NT) {
                const int r = c / FT, q = c % FT;
                const bool bok = k0 + r < K && n0 + q < cols;
                As[r][q] = m0 + r < rows && k0 + q < K ? __ldcg (A + (m0 + r) * K + k0 + q) : 0.0f;
                Bs[r][q] = bok ? Bg[(k0 + r) * cols + n0 + q] : 0.0f;
                if (Bu)
                    Us[r][q] = bok ? Bu[(k0 + r) * cols + n0 + q] : 0.0f;
            }
            __syncthreads ();
#pragma unroll
            for (int e = 0; e < FPER; e++) {
                const int idx = tid + e * NT;
                if (idx < FT * FT)
                    for (int kk = 0; kk < FT; kk++) {
                        const float av = As[idx / FT][kk];
                        g[e] += av * Bs[kk][idx % FT];
                        if (Bu)
                            u[e] += av * Us[kk][idx % FT];
                    }
            }
            __syncthreads ();
        }
#pragma unroll
        for (int e = 0; e < FPER; e++) {
            const int idx = tid + e * NT;
            const ak_i64 r = m0 + idx / FT, n = n0 + idx % FT;
            if (idx < FT * FT && r < rows && n < cols)
                C[r * cols + n] = Bu ? s_silu_mul (g[e], u[e]) : g[e];
        }
    }
}

extern "C" __global__ void __launch_bounds__ (NT)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_x,
           const __grid_constant__ ak_tensor_map_t tm_wg, const __grid_constant__ ak_tensor_map_t tm_wu,
           const __grid_constant__ ak_tensor_map_t tm_h, const __grid_constant__ ak_tensor_map_t tm_wd)
{
    (void) tm_x;
    (void) tm_wg;
    (void) tm_wu;
    (void) tm_h;
    (void) tm_wd;
    if (gridDim.x > ak_nsmid ())
        return;
    __shared__ float As[FT][FT + 1], Bs[FT][FT + 1], Us[FT][FT + 1];
    const ak_i64 batch = a.dims[0], dim = a.dims[1], hidden = a.dims[2];
    const ak_t *X = AK_IN (a, 0), *Wg = AK_IN (a, 1), *Wu = AK_IN (a, 2), *Wd = AK_IN (a, 3);
    ak_t *Y = AK_OUT (a, 0), *H = AK_OUT (a, 1);
    s_gemm_f32 (X, Wg, Wu, H, batch, hidden, dim, As, Bs, Us);
    __syncthreads ();
    if (threadIdx.x == 0)
        s_grid_arrive_wait ();
    __syncthreads ();
    s_gemm_f32 (H, Wd, NULL, Y, batch, dim, hidden, As, Bs, Us);
}

#endif
