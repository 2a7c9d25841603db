/*  matmul for few rows (cuda): C[M][N] = A[M][K] * B[K][N], row-major,
    float accumulation, built for the decode step of a language model
    (M = 1 .. 16 tokens against a weight matrix B of many megabytes), where
    the time is reading B once and a GEMM's tiles leave most of the device
    idle.

    float16 / bfloat16: `mma.sync.m16n8k16` with the 16 rows of a row tile
    as the MMA's M (rows past M are zeros) and B read once.  On sm_90 each
    warp has a ring of STG stages of its own in shared memory, a stage 64
    rows of K: CW boxes of the tensor map tm_b (64 rows x 64 columns) and
    one of tm_a (16 rows of A x 64 k), 128-byte swizzled, zero-filled by
    the TMA unit where they pass the matrices' edges; lane 0 issues them
    and the stage's mbarrier counts the bytes in: STG - 1 stages in flight
    a warp without a register or a thread waiting on them.  The WARPS
    warps of a block take alternate 64-row chunks of the block's slice of
    K.  From a stage, lane (g, t) reads 16 bytes (8 columns, 8g .. 8g+7 of
    a 64-column group) of each of the rows 2t, 2t+1, 2t+8, 2t+9 of a k16
    step (the swizzle puts them in distinct banks), and `prmt` pairs the
    two rows' element i into the B fragment of n8 tile i, whose column g
    then stands for memory column 8g + i (the MMA does not care which
    columns its eight are; the accumulators are put back in memory order
    through shared memory at the end).  Without the maps (the worker
    leaves an optional map it cannot encode absent), before sm_90, or where
    N or K is not a multiple of 8 or A or B not 16-byte aligned, the same
    lanes load the same chunks straight into registers, 2 steps ahead
    (bound-checked at the edges): the direct path.  The CPU emulation
    (test_cuda_cand_emu) runs both: the TMA path through the prelude's
    emulated mbarriers and copies (ak_mbar_*, ak_tma_into_2d) where the
    maps are present.
    Measured on the H200 (docs/benchmarks.md, session 23): per-lane
    cp.async copies of these chunks (the L2 then looked to see every
    sector twice) and a bulk copy a row were both far slower than a TMA
    box a panel.

    The split over K: grid.y slices of K for each (column tile, row tile),
    the floor of WAVES x 132 blocks (an H200's SMs) over the tiles, at
    least one; the warps' partials are added in warp order in shared
    memory, then each block writes its
    tile's partial to a module-scope workspace and counts itself in on a
    per-tile counter; the last block to arrive adds the slices in index
    order and writes C (ak_last_arrival: no block waits for another;
    bitwise deterministic).  A launch whose partials do not fit the
    workspace (32 MiB, 2^16 tiles) runs unsplit.  Launches of one loaded
    module must not overlap (the workers run one launch at a time).

    M above 16 runs (M+15)/16 row tiles (grid.z), each reading B again:
    correct for any M, fast only for few rows.

    float32: no tensor-core path meets its tolerance (TF32), so the same
    launch runs an FMA loop, a thread a column and one of the block's
    WARPS*32/(64*CW) lanes of K, the 16 rows in registers.

    WARPS  warps a block
    CW     64-column groups a block (and a warp): BN = 64*CW
    STG    stages of a warp's ring (STG - 1 stages of 64 rows in flight)
    WAVES  about WAVES x 132 blocks over the split K
    Launch: grid [(N+64*CW-1)/(64*CW), splits, (M+15)/16], block
    [WARPS*32], shared WARPS*STG*(8192*CW+2048) + 1024 bytes (the rings,
    1024-byte aligned for the swizzle; the warps' partials,
    WARPS*16*(64*CW+4) floats, reuse them); tensor maps tm_a, tm_b. */
#ifndef WARPS
#define WARPS 4
#endif
#ifndef CW
#define CW 1
#endif
#ifndef STG
#define STG 4
#endif
#ifndef WAVES
#define WAVES 2
#endif

#define S_NT (WARPS * 32)
#define S_BN (64 * CW)                 /* columns a block */
#define S_SR (S_BN + 4)                /* a row of the shared partials, floats */
#define S_WS_FLOATS (1 << 23)
#define S_WS_TILES (1 << 16)

static_assert (S_NT >= S_BN, "the float32 path needs a thread a column");
static_assert (STG >= 2, "STG: at least two stages");

__device__ float s_ws[S_WS_FLOATS];
__device__ unsigned int s_cnt[S_WS_TILES];

/*  The chunks of `unit` rows of K [lo, hi) that slice split of the
    launch takes, and the slices there are (nsplit: 1 where the partials
    would not fit the workspace); false for a block past the last slice
    (nothing to do). */
__device__ __forceinline__ bool s_slice (ak_i64 K, ak_i64 unit, ak_i64 split, ak_i64 *lo, ak_i64 *hi, ak_i64 *nsplit)
{
    const ak_i64 steps = (K + unit - 1) / unit, tiles = (ak_i64) gridDim.x * gridDim.z;
    const bool fits = (ak_i64) gridDim.y * tiles * 16 * S_BN <= S_WS_FLOATS && tiles <= S_WS_TILES;
    ak_i64 per;
    ak_split_slices (steps, gridDim.y, fits, &per, nsplit);
    if (split >= *nsplit)
        return false;
    *lo = split * per;
    *hi = *lo + per < steps ? *lo + per : steps;
    return true;
}

/*  The block's partials red[nparts][16][S_SR] (rows r0.., columns n0..)
    added in part order: into C when the launch is unsplit, else into the
    workspace, and the split tile's last block adds the slices into C. */
__device__ __forceinline__ void s_finish (const float *red, int nparts, ak_t *C, ak_i64 M, ak_i64 N, ak_i64 r0,
                                          ak_i64 n0, ak_i64 split, ak_i64 nsplit, int *last)
{
    const int rows = M - r0 < 16 ? (int) (M - r0) : 16;
    const ak_i64 tile = (ak_i64) blockIdx.z * gridDim.x + blockIdx.x;
    for (int e = threadIdx.x; e < rows * S_BN; e += S_NT) {
        const int m = e / S_BN, cl = e % S_BN;
        if (n0 + cl >= N)
            continue;
        float v = 0.0f;
        for (int p = 0; p < nparts; p++)
            v += red[(p * 16 + m) * S_SR + cl];
        if (nsplit == 1)
            C[(r0 + m) * N + n0 + cl] = ak_from_acc (v);
        else
            s_ws[((tile * nsplit + split) * 16 + m) * S_BN + cl] = v;
    }
    if (nsplit == 1 || !ak_last_arrival (&s_cnt[tile], (unsigned int) nsplit, last))
        return;
    for (int e = threadIdx.x; e < rows * S_BN; e += S_NT) {
        const int m = e / S_BN, cl = e % S_BN;
        if (n0 + cl >= N)
            continue;
        float v = 0.0f;
        for (ak_i64 sp = 0; sp < nsplit; sp++)
            v += __ldcg (&s_ws[((tile * nsplit + sp) * 16 + m) * S_BN + cl]);
        C[(r0 + m) * N + n0 + cl] = ak_from_acc (v);
    }
}

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)

/*  The TMA path needs sm_90 (older devices run the direct path) or the
    CPU emulation, which copies a box at once and keeps a barrier's phase
    in its 8 bytes. */
#if defined(AK_CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define S_TMA 1
#else
#define S_TMA 0
#endif

#define S_BK 64                        /* rows of K a stage */
#define S_BSTAGE (CW * S_BK * 128)     /* B: CW panels of [64 rows][64 columns], 128-byte swizzled */
#define S_STAGE (S_BSTAGE + 16 * 128)  /* and A: [16 rows][64 k], 128-byte swizzled */
#define S_U 2                          /* the direct path: k16 steps a warp loads before it computes them */

typedef union {
    uint4    v;
    unsigned w[4];
    ak_t     e[8];
} s_u4_t;

/*  acc[j][i] += the A fragment af times the B rows of a k16 step held as
    q[j][0..3] (rows 2t, 2t+1, 2t+8, 2t+9; 8 columns from 8g of group j):
    prmt pairs the two rows' element i into n8 tile i's fragment. */
__device__ __forceinline__ void s_mma_step (float (&acc)[CW][8][4], const unsigned (&af)[4], const s_u4_t (&q)[CW][4])
{
#pragma unroll
    for (int j = 0; j < CW; j++)
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const unsigned sel = i & 1 ? 0x7632u : 0x5410u;
            const unsigned b0 = __byte_perm (q[j][0].w[i >> 1], q[j][1].w[i >> 1], sel);
            const unsigned b1 = __byte_perm (q[j][2].w[i >> 1], q[j][3].w[i >> 1], sel);
            ak_mma_16816 (acc[j][i], af, b0, b1);
        }
}

#if S_TMA
/*  Where byte off of a 1024-byte aligned region of 128-byte rows lands
    under the 128-byte swizzle: its 16-byte chunk XOR the row's index
    mod 8. */
__device__ __forceinline__ unsigned s_swz (unsigned off)
{
    return off ^ (((off >> 7) & 7) << 4);
}

/*  Lane 0's copies of the 64-row chunk from row k0 into a stage: CW
    panels of B and the row tile of A, the bytes told to the stage's
    mbarrier first. */
__device__ __forceinline__ void s_issue (unsigned char *stage, ak_u64 *bar, const ak_tensor_map_t *tm_a,
                                         const ak_tensor_map_t *tm_b, ak_i64 r0, ak_i64 n0, ak_i64 k0)
{
    ak_mbar_expect (bar, S_STAGE);
#pragma unroll
    for (int j = 0; j < CW; j++)
        ak_tma_into_2d (stage + j * S_BK * 128, tm_b, (int) n0 + 64 * j, (int) k0, bar);
    ak_tma_into_2d (stage + S_BSTAGE, tm_a, (int) k0, (int) r0, bar);
}

/*  The TMA path: each warp a ring of STG stages of its own, a stage 64
    rows of K (CW boxes of tm_b, 64 rows x 64 columns, and one of tm_a, 16
    rows x 64 k; the TMA unit zero-fills what lies outside the matrices),
    lane 0 issuing the copies and the stage's mbarrier counting the bytes
    in; STG - 1 stages in flight a warp.  The warp takes the block's
    64-row chunks warp, warp + WARPS, ... */
__device__ __forceinline__ void s_run_tma (float (&acc)[CW][8][4], unsigned char *ring, ak_u64 *bars,
                                           const ak_tensor_map_t *tm_a, const ak_tensor_map_t *tm_b, ak_i64 r0,
                                           ak_i64 n0, ak_i64 c_lo, ak_i64 c_hi, int warp, int lane)
{
    const int g = lane >> 2, t = lane & 3;
    unsigned char *mine = ring + warp * STG * S_STAGE;
    ak_u64 *bar = bars + warp * STG;
    const ak_i64 first = c_lo + warp, n = first < c_hi ? (c_hi - first + WARPS - 1) / WARPS : 0;
#pragma unroll
    for (int i = 0; i < STG - 1; i++)
        if (i < n && lane == 0)
            s_issue (mine + i * S_STAGE, &bar[i], tm_a, tm_b, r0, n0, (first + (ak_i64) i * WARPS) * S_BK);
    for (ak_i64 i = 0; i < n; i++) {
        __syncwarp ();                                 /* every lane is done with the stage refilled next */
        const ak_i64 nx = i + STG - 1;
        if (nx < n && lane == 0)
            s_issue (mine + (nx % STG) * S_STAGE, &bar[nx % STG], tm_a, tm_b, r0, n0, (first + nx * WARPS) * S_BK);
        const int slot = (int) (i % STG);
        ak_mbar_wait (&bar[slot], (unsigned) ((i / STG) & 1));
        const unsigned char *st = mine + slot * S_STAGE, *sa = st + S_BSTAGE;
#pragma unroll
        for (int kk = 0; kk < S_BK / 16; kk++) {
            unsigned af[4];
            af[0] = *(const unsigned *) (sa + s_swz (g * 128 + 32 * kk + 4 * t));
            af[1] = *(const unsigned *) (sa + s_swz ((g + 8) * 128 + 32 * kk + 4 * t));
            af[2] = *(const unsigned *) (sa + s_swz (g * 128 + 32 * kk + 16 + 4 * t));
            af[3] = *(const unsigned *) (sa + s_swz ((g + 8) * 128 + 32 * kk + 16 + 4 * t));
            s_u4_t q[CW][4];
#pragma unroll
            for (int j = 0; j < CW; j++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    q[j][r].v = *(const uint4 *) (st + j * S_BK * 128
                                                  + s_swz ((16 * kk + 2 * t + (r & 1) + 8 * (r >> 1)) * 128 + 16 * g));
            s_mma_step (acc, af, q);
        }
    }
}
#endif

/*  Row k of B, the 8 columns from c: one 16-byte load where fast (k < K,
    c + 8 <= N, aligned), else element by element with zeros outside. */
__device__ __forceinline__ uint4 s_ldb (const ak_t *B, ak_i64 k, ak_i64 c, ak_i64 K, ak_i64 N, bool fast)
{
    if (fast)
        return __ldg ((const uint4 *) (B + k * N + c));
    s_u4_t r;
#pragma unroll
    for (int i = 0; i < 8; i++)
        r.e[i] = k < K && c + i < N ? B[k * N + c + i] : ak_from_acc (0.0f);
    return r.v;
}

/*  A[row][k], A[row][k+1] as a packed pair, zeros outside. */
__device__ __forceinline__ unsigned s_lda (const ak_t *A, ak_i64 row, ak_i64 k, ak_i64 M, ak_i64 K, bool al)
{
    if (row >= M)
        return 0u;
    const ak_t *p = A + row * K;
    if (al && k + 2 <= K)
        return __ldg ((const unsigned *) (p + k));
    union {
        unsigned w;
        ak_t     e[2];
    } r;
    r.e[0] = k < K ? p[k] : ak_from_acc (0.0f);
    r.e[1] = k + 1 < K ? p[k + 1] : ak_from_acc (0.0f);
    return r.w;
}

/*  The direct path (before sm_90, or a B or A the bulk copies cannot
    take): each lane loads its fragment rows straight into registers, S_U
    k16 steps before it computes them; the warp takes groups of S_U steps
    warp, warp + WARPS, ... of the block's slice. */
__device__ __forceinline__ void s_run_direct (float (&acc)[CW][8][4], const ak_t *A, const ak_t *B, ak_i64 M,
                                              ak_i64 N, ak_i64 K, ak_i64 r0, ak_i64 n0, ak_i64 s_lo, ak_i64 s_hi,
                                              int warp, int lane)
{
    const int g = lane >> 2, t = lane & 3;
    const bool b_al = N % 8 == 0 && ((unsigned long long) B & 15) == 0;
    const bool a_al = K % 2 == 0 && ((unsigned long long) A & 3) == 0;
    bool colok[CW];
#pragma unroll
    for (int j = 0; j < CW; j++)
        colok[j] = b_al && n0 + 64 * j + 8 * g + 8 <= N;
    for (ak_i64 sb = s_lo + (ak_i64) warp * S_U; sb < s_hi; sb += (ak_i64) WARPS * S_U) {
        s_u4_t q[S_U][CW][4];
        unsigned af[S_U][4];
#pragma unroll
        for (int u = 0; u < S_U; u++) {
            const ak_i64 k = (sb + u) * 16;
            const bool valid = sb + u < s_hi, rows_in = k + 16 <= K;
#pragma unroll
            for (int j = 0; j < CW; j++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const ak_i64 kr = k + 2 * t + (r & 1) + 8 * (r >> 1);
                    q[u][j][r].v = valid ? s_ldb (B, kr, n0 + 64 * j + 8 * g, K, N, rows_in && colok[j])
                                         : make_uint4 (0u, 0u, 0u, 0u);
                }
            const ak_i64 ka = k + 2 * t;
            af[u][0] = valid ? s_lda (A, r0 + g, ka, M, K, a_al) : 0u;
            af[u][1] = valid ? s_lda (A, r0 + g + 8, ka, M, K, a_al) : 0u;
            af[u][2] = valid ? s_lda (A, r0 + g, ka + 8, M, K, a_al) : 0u;
            af[u][3] = valid ? s_lda (A, r0 + g + 8, ka + 8, M, K, a_al) : 0u;
        }
#pragma unroll
        for (int u = 0; u < S_U; u++)
            s_mma_step (acc, af[u], q[u]);
    }
}

__device__ __forceinline__ void s_kernel (const ak_cuda_args_t &a, const ak_tensor_map_t *tm_a,
                                          const ak_tensor_map_t *tm_b)
{
    AK_DYNAMIC_SHARED (unsigned char, ring);           /* WARPS x STG stages (from 1024 bytes in); then the partials */
    __shared__ int s_last;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const ak_i64 n0 = (ak_i64) blockIdx.x * S_BN, r0 = (ak_i64) blockIdx.z * 16;

    float acc[CW][8][4];
#pragma unroll
    for (int j = 0; j < CW; j++)
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[j][i][e] = 0.0f;

    const ak_i64 split = blockIdx.y;
    ak_i64 lo, hi, nsplit;
#if S_TMA
    __shared__ __align__ (8) ak_u64 s_bars[WARPS * STG];
    /* the maps exist (cuTensorMapEncodeTiled's rules: 16-byte aligned base
       and row strides) and the tiles fit them */
    const bool tma = ak_tensor_map_present (tm_a) && ak_tensor_map_present (tm_b) && N % 8 == 0 && K % 8 == 0
                     && (((unsigned long long) A | (unsigned long long) B) & 15) == 0 && K <= 0x7fffffff
                     && N <= 0x7fffffff && M <= 0x7fffffff;
    if (tma) {
        if (!s_slice (K, S_BK, split, &lo, &hi, &nsplit))
            return;
        if (lane < STG)
            ak_mbar_init (&s_bars[warp * STG + lane], 1);
        ak_mbar_fence_init ();
        __syncthreads ();
        unsigned char *aligned = ring + ((1024 - (ak_smem (ring) & 1023)) & 1023);
        s_run_tma (acc, aligned, s_bars, tm_a, tm_b, r0, n0, lo, hi, warp, lane);
    } else
#endif
    {
        (void) tm_a;
        (void) tm_b;
        if (!s_slice (K, 16, split, &lo, &hi, &nsplit))
            return;
        s_run_direct (acc, A, B, M, N, K, r0, n0, lo, hi, warp, lane);
    }
    __syncthreads ();                                  /* the ring becomes the partials */

    /* c0, c1: row g, mma columns 2t, 2t+1 of n8 tile i = memory columns
       8*(2t) + i and 8*(2t+1) + i of the 64-column group; c2, c3: row g+8 */
    float *red = (float *) ring, *mine = red + warp * 16 * S_SR;
#pragma unroll
    for (int j = 0; j < CW; j++)
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int c0 = 64 * j + 16 * t + i, c1 = c0 + 8;
            mine[g * S_SR + c0] = acc[j][i][0];
            mine[g * S_SR + c1] = acc[j][i][1];
            mine[(g + 8) * S_SR + c0] = acc[j][i][2];
            mine[(g + 8) * S_SR + c1] = acc[j][i][3];
        }
    __syncthreads ();
    s_finish (red, WARPS, C, M, N, r0, n0, split, nsplit, &s_last);
}

extern "C" __global__ void __launch_bounds__ (S_NT)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a, const __grid_constant__ ak_tensor_map_t tm_b)
{
    s_kernel (a, &tm_a, &tm_b);
}

#else   /* float32: an FMA loop in the same launch */

#define S_KL (S_NT / S_BN)             /* lanes of K a block */

/*  The maps are absent here (a float row of 64 elements is wider than the
    swizzle) and unused. */
extern "C" __global__ void __launch_bounds__ (S_NT)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a, const __grid_constant__ ak_tensor_map_t tm_b)
{
    (void) tm_a;
    (void) tm_b;
    AK_DYNAMIC_SHARED (float, red);                    /* S_KL x 16 x S_SR of it */
    __shared__ int s_last;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tid = threadIdx.x, cl = tid % S_BN, kl = tid / S_BN;
    const ak_i64 n0 = (ak_i64) blockIdx.x * S_BN, r0 = (ak_i64) blockIdx.z * 16, col = n0 + cl;
    const int rows = M - r0 < 16 ? (int) (M - r0) : 16;

    const ak_i64 split = blockIdx.y;
    ak_i64 s_lo, s_hi, nsplit;
    if (!s_slice (K, 16, split, &s_lo, &s_hi, &nsplit))
        return;
    const ak_i64 k_lo = s_lo * 16, k_hi = s_hi * 16 < K ? s_hi * 16 : K;

    float acc[16];
#pragma unroll
    for (int m = 0; m < 16; m++)
        acc[m] = 0.0f;
    if (kl < S_KL && col < N)
        for (ak_i64 k = k_lo + kl; k < k_hi; k += S_KL) {
            const float b = __ldg (B + k * N + col);
#pragma unroll
            for (int m = 0; m < 16; m++)
                if (m < rows)
                    acc[m] += __ldg (A + (r0 + m) * K + k) * b;
        }
    if (kl < S_KL)
#pragma unroll
        for (int m = 0; m < 16; m++)
            red[(kl * 16 + m) * S_SR + cl] = acc[m];
    __syncthreads ();
    s_finish (red, S_KL, C, M, N, r0, n0, split, nsplit, &s_last);
}

#endif
