/*  matmul for few rows (cuda): C[M][N] = A[M][K] * B[K][N], row-major,
    float accumulation, built for the decode step of a language model
    (M = 1 .. 16 tokens against a weight matrix B of many megabytes), where
    the time is reading B once and a GEMM's tiles leave most of the device
    idle.

    float16 / bfloat16: `mma.sync.m16n8k16` with the 16 rows of a row tile
    as the MMA's M (rows past M are zeros) and B read once, in whole rows:
    on sm_90 each warp has a ring of STG stages of its own in shared
    memory, a stage one k16 step (16 rows of B over the block's 64*CW
    columns, 16 bytes of padding a row so the reads below hit distinct
    banks, and the 16 x 16 of A beside them), filled by bulk copies (lane r
    copies row r, lanes 16.. A's rows; the stage's mbarrier counts the
    bytes in): STG - 1 steps in flight a warp without a register or a
    thread waiting on them.  The WARPS warps of a block take alternate k16
    steps of the block's slice of K.  From a stage, lane (g, t) reads 16
    bytes (8 columns, 8g .. 8g+7 of a 64-column group) of each of the rows
    2t, 2t+1, 2t+8, 2t+9, and `prmt` pairs the two rows' element i into
    the B fragment of n8 tile i, whose column g then stands for memory
    column 8g + i (the MMA does not care which columns its eight are; the
    accumulators are put back in memory order through shared memory at
    the end).  Before sm_90, or where N or K is not a multiple of 8 or A
    or B not 16-byte aligned (what bulk copies need), the same lanes load
    the same chunks straight into registers, 2 steps ahead (bound-checked
    at the edges).

    The split over K: grid.y slices of K for each (column tile, row tile),
    about WAVES x 132 blocks (an H200's SMs) in all; the warps' partials
    are added in warp order in shared memory, then each block writes its
    tile's partial to a module-scope workspace and counts itself in on a
    per-tile counter; the last block to arrive adds the slices in index
    order and writes C (ak_last_arrival: no block waits for another;
    bitwise deterministic).  A launch whose partials do not fit the
    workspace (32 MiB, 2^16 tiles) runs unsplit.  Launches of one loaded
    module must not overlap (the workers run one launch at a time).

    Rows or columns past the matrix, K not a multiple of 16, N not a
    multiple of 8 or a B not 16-byte aligned take bound-checked loads.
    M above 16 runs (M+15)/16 row tiles (grid.z), each reading B again:
    correct for any M, fast only for few rows.

    float32: no tensor-core path meets its tolerance (TF32), so the same
    launch runs an FMA loop, a thread a column and one of the block's
    WARPS*32/(64*CW) lanes of K, the 16 rows in registers.

    WARPS  warps a block
    CW     64-column groups a block (and a warp): BN = 64*CW
    STG    stages of a warp's ring (STG - 1 steps in flight)
    WAVES  about WAVES x 132 blocks over the split K
    Launch: grid [(N+64*CW-1)/(64*CW), splits, (M+15)/16], block
    [WARPS*32], shared WARPS*STG*(2048*CW+1024) bytes (the rings; the
    warps' partials, WARPS*16*(64*CW+4) floats, reuse them). */
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

/*  The k16 steps [lo, hi) of K that slice split of the launch takes, and
    the slices there are (nsplit: 1 where the partials would not fit the
    workspace); false for a block past the last slice (nothing to do). */
__device__ __forceinline__ bool s_slice (ak_i64 K, ak_i64 split, ak_i64 *lo, ak_i64 *hi, ak_i64 *nsplit)
{
    const ak_i64 steps = (K + 15) / 16, tiles = (ak_i64) gridDim.x * gridDim.z;
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

/*  The bulk path needs sm_90's bulk copies and mbarrier waits (the CPU
    emulation copies at once and waits at the warp's barrier). */
#if defined(AK_CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define S_BULK 1
#else
#define S_BULK 0
#endif

#define S_BROW (128 * CW + 16)         /* a B row of a stage, bytes (16 of padding: no bank conflicts) */
#define S_AROW 48                      /* an A row of a stage: 16 elements and 16 bytes of padding */
#define S_STAGE (16 * S_BROW + 16 * S_AROW)
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

#if S_BULK
/*  mbarriers and bulk copies (global -> shared, completing bytes on an
    mbarrier), or their emulation. */
__device__ __forceinline__ void s_bar_init (unsigned long long *bar)
{
#ifndef AK_CUDA_EMU
    ak_bar_init (ak_smem (bar), 1);
#endif
}

__device__ __forceinline__ void s_bar_expect (unsigned long long *bar, unsigned bytes)
{
#ifndef AK_CUDA_EMU
    ak_bar_expect (ak_smem (bar), bytes);
#endif
}

__device__ __forceinline__ void s_bar_wait (unsigned long long *bar, unsigned parity)
{
#ifdef AK_CUDA_EMU
    __syncwarp ();
#else
    ak_bar_wait (ak_smem (bar), parity);
#endif
}

__device__ __forceinline__ void s_bulk (void *dst, const void *src, unsigned bytes, unsigned long long *bar)
{
#ifdef AK_CUDA_EMU
    memcpy (dst, src, bytes);
#else
    asm volatile ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                  :: "r" (ak_smem (dst)), "l" (src), "r" (bytes), "r" (ak_smem (bar)) : "memory");
#endif
}

/*  Starts the copies of k16 step `step` into a stage of the warp: lane r
    < 16 copies B row k+r (the block's columns: 128*CW bytes, fewer at
    N's edge), lane 16+m A row r0+m (32 bytes, fewer at K's edge); what
    lies outside the matrices is zeroed with plain stores (the warp's
    barrier before the stage is read makes them visible).  Lane 0 tells
    the stage's mbarrier how many bytes will land. */
__device__ __forceinline__ void s_issue (unsigned char *stage, unsigned long long *bar, const ak_t *A, const ak_t *B,
                                         ak_i64 M, ak_i64 N, ak_i64 K, ak_i64 r0, ak_i64 n0, ak_i64 step, int lane)
{
    const ak_i64 k = step * 16;
    const int rows_b = K - k < 16 ? (int) (K - k) : 16, rows_a = M - r0 < 16 ? (int) (M - r0) : 16;
    const int cb = N - n0 < 64 * CW ? (int) (N - n0) * 2 : 128 * CW;       /* B bytes a row */
    const int ab = rows_b * 2;                                              /* A bytes a row */
    if (lane == 0)
        s_bar_expect (bar, (unsigned) (rows_b * cb + rows_a * ab));
    __syncwarp ();
    if (lane < 16) {
        unsigned char *dst = stage + lane * S_BROW;
        if (lane < rows_b && cb > 0)
            s_bulk (dst, B + (k + lane) * N + n0, (unsigned) cb, bar);
        for (int b = lane < rows_b ? cb : 0; b < 128 * CW; b += 16)
            *(uint4 *) (dst + b) = make_uint4 (0u, 0u, 0u, 0u);
    } else {
        const int m = lane - 16;
        unsigned char *dst = stage + 16 * S_BROW + m * S_AROW;
        if (m < rows_a)
            s_bulk (dst, A + (r0 + m) * K + k, (unsigned) ab, bar);
        if (m < rows_a && ab < 32)
            *(uint4 *) (dst + 16) = make_uint4 (0u, 0u, 0u, 0u);
    }
}

/*  The bulk path: each warp a ring of STG stages of its own, filled by
    bulk copies (whole rows of the block's columns: the DMA engine moves
    them, no thread waits on a load), STG - 1 steps in flight; the warp
    takes the block's k16 steps warp, warp + WARPS, ... */
__device__ __forceinline__ void s_run_bulk (float (&acc)[CW][8][4], unsigned char *ring, unsigned long long *bars,
                                            const ak_t *A, const ak_t *B, ak_i64 M, ak_i64 N, ak_i64 K, ak_i64 r0,
                                            ak_i64 n0, ak_i64 s_lo, ak_i64 s_hi, int warp, int lane)
{
    const int g = lane >> 2, t = lane & 3;
    unsigned char *mine = ring + warp * STG * S_STAGE;
    unsigned long long *bar = bars + warp * STG;
    const ak_i64 first = s_lo + warp, n = first < s_hi ? (s_hi - first + WARPS - 1) / WARPS : 0;
#pragma unroll
    for (int i = 0; i < STG - 1; i++)
        if (i < n)
            s_issue (mine + i * S_STAGE, &bar[i], A, B, M, N, K, r0, n0, first + (ak_i64) i * WARPS, lane);
    const bool rowok0 = r0 + g < M, rowok1 = r0 + g + 8 < M;
    for (ak_i64 i = 0; i < n; i++) {
        __syncwarp ();                                 /* every lane is done with the stage refilled next */
        const ak_i64 nx = i + STG - 1;
        if (nx < n)
            s_issue (mine + (nx % STG) * S_STAGE, &bar[nx % STG], A, B, M, N, K, r0, n0, first + nx * WARPS, lane);
        const int slot = (int) (i % STG);
        s_bar_wait (&bar[slot], (unsigned) ((i / STG) & 1));
        const unsigned char *st = mine + slot * S_STAGE, *sa = st + 16 * S_BROW;
        unsigned af[4];
        af[0] = rowok0 ? *(const unsigned *) (sa + g * S_AROW + 4 * t) : 0u;
        af[1] = rowok1 ? *(const unsigned *) (sa + (g + 8) * S_AROW + 4 * t) : 0u;
        af[2] = rowok0 ? *(const unsigned *) (sa + g * S_AROW + 16 + 4 * t) : 0u;
        af[3] = rowok1 ? *(const unsigned *) (sa + (g + 8) * S_AROW + 16 + 4 * t) : 0u;
        s_u4_t q[CW][4];
#pragma unroll
        for (int j = 0; j < CW; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                q[j][r].v = *(const uint4 *) (st + (2 * t + (r & 1) + 8 * (r >> 1)) * S_BROW + (64 * j + 8 * g) * 2);
        s_mma_step (acc, af, q);
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

extern "C" __global__ void __launch_bounds__ (S_NT) ak_kernel (ak_cuda_args_t a)
{
    AK_DYNAMIC_SHARED (unsigned char, ring);           /* WARPS x STG stages; then the partials */
    __shared__ int s_last;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const ak_i64 n0 = (ak_i64) blockIdx.x * S_BN, r0 = (ak_i64) blockIdx.z * 16;

    const ak_i64 split = blockIdx.y;
    ak_i64 s_lo, s_hi, nsplit;
    if (!s_slice (K, split, &s_lo, &s_hi, &nsplit))
        return;

    float acc[CW][8][4];
#pragma unroll
    for (int j = 0; j < CW; j++)
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[j][i][e] = 0.0f;

#if S_BULK
    __shared__ __align__ (8) unsigned long long s_bars[WARPS * STG];
    /* bulk copies move 16-byte multiples between 16-byte aligned addresses */
    if (N % 8 == 0 && K % 8 == 0 && (((unsigned long long) A | (unsigned long long) B) & 15) == 0) {
        if (lane < STG)
            s_bar_init (&s_bars[warp * STG + lane]);
        __syncthreads ();
        s_run_bulk (acc, ring, s_bars, A, B, M, N, K, r0, n0, s_lo, s_hi, warp, lane);
    } else
#endif
        s_run_direct (acc, A, B, M, N, K, r0, n0, s_lo, s_hi, warp, lane);
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

#else   /* float32: an FMA loop in the same launch */

#define S_KL (S_NT / S_BN)             /* lanes of K a block */

extern "C" __global__ void __launch_bounds__ (S_NT) ak_kernel (ak_cuda_args_t a)
{
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
    if (!s_slice (K, split, &s_lo, &s_hi, &nsplit))
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
