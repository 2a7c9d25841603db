/*  matmul for few rows (cuda): C[M][N] = A[M][K] * B[K][N], row-major,
    float accumulation, built for the decode step of a language model
    (M = 1 .. 16 tokens against a weight matrix B of many megabytes), where
    the time is reading B once and a GEMM's tiles leave most of the device
    idle.

    float16 / bfloat16: `mma.sync.m16n8k16` with the 16 rows of a row tile
    as the MMA's M (rows past M are zeros) and B read once, in fragment
    order: lane (g, t) of a warp copies 16 bytes (8 columns, 8g .. 8g+7 of
    a 64-column group) from each of the rows 2t, 2t+1, 2t+8, 2t+9 of a k16
    step, and `prmt` pairs the two rows' element i into the B fragment of
    n8 tile i, whose column g then stands for memory column 8g + i (the MMA
    does not care which columns its eight are; the accumulators are put
    back in memory order through shared memory at the end).  Every 16-byte
    chunk is used whole and a warp's copies are whole 128-byte lines.
    The copies go by `cp.async` into a ring of STG stages that belongs to
    the thread alone (each thread reads back only what it copied, so no
    barrier: the thread's own cp.async.wait_group is the handshake), with
    A's fragment pairs (4-byte copies; the row tile of A is small and read
    by every block) beside them: STG - 1 steps of CW 64-column groups in
    flight a warp, (STG - 1) * CW * 2 KiB, without the registers to hold
    them.  The WARPS warps of a block take alternate k16 steps of the
    block's slice of K.

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
    STG    stages of the thread's cp.async ring (STG - 1 steps in flight)
    WAVES  about WAVES x 132 blocks over the split K
    Launch: grid [(N+64*CW-1)/(64*CW), splits, (M+15)/16], block
    [WARPS*32], shared STG*WARPS*32*(64*CW+16) bytes (the ring; the warps'
    partials, WARPS*16*(64*CW+4) floats, reuse it). */
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

#define S_SLOT (CW * 64 + 16)          /* bytes a thread a stage: 4 CW B chunks, 4 A pairs */
#define S_ABASE (CW * 4 * S_NT * 16)   /* where a stage's A pairs start */

typedef union {
    uint4    v;
    unsigned w[4];
    ak_t     e[8];
} s_u4_t;

/*  4 bytes global -> shared asynchronously (cp.async.ca). */
__device__ __forceinline__ void s_cp_async4 (void *dst, const void *src)
{
#ifdef AK_CUDA_EMU
    memcpy (dst, src, 4);
#else
    asm volatile ("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r" (ak_smem (dst)), "l" (src));
#endif
}

/*  Starts the copies of k16 step `step` into the thread's part of a ring
    stage: B rows 2t, 2t+1, 2t+8, 2t+9 (8 columns from 8g of each
    64-column group) and the A pairs of rows g, g+8 at columns 2t, 2t+8.
    Whole aligned chunks go by cp.async; chunks at the matrix's edges, or
    of a B or A that is not aligned, element by element (zeros outside)
    with plain shared stores, which the same thread reads back after the
    wait like the others.  A rows past M are not copied (the fragment
    takes 0 for them). */
__device__ __forceinline__ void s_issue (unsigned char *stage, const ak_t *A, const ak_t *B, ak_i64 M, ak_i64 N,
                                         ak_i64 K, ak_i64 r0, ak_i64 n0, ak_i64 step, const bool (&colok)[CW],
                                         bool a_al, int tid, int g, int t)
{
    const ak_i64 k = step * 16;
    const bool rows_in = k + 16 <= K;
#pragma unroll
    for (int j = 0; j < CW; j++) {
        const ak_i64 c = n0 + 64 * j + 8 * g;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const ak_i64 kr = k + 2 * t + (q & 1) + 8 * (q >> 1);
            s_u4_t *dst = (s_u4_t *) (stage + ((j * 4 + q) * S_NT + tid) * 16);
            if (rows_in && colok[j])
                ak_cp_async16 (dst, B + kr * N + c, true);
            else
#pragma unroll
                for (int i = 0; i < 8; i++)
                    dst->e[i] = kr < K && c + i < N ? B[kr * N + c + i] : ak_from_acc (0.0f);
        }
    }
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const ak_i64 row = r0 + g + 8 * (p & 1), ka = k + 2 * t + 8 * (p >> 1);
        ak_t *dst = (ak_t *) (stage + S_ABASE + (p * S_NT + tid) * 4);
        if (row >= M)
            continue;
        const ak_t *src = A + row * K + ka;
        if (a_al && ka + 2 <= K)
            s_cp_async4 (dst, src);
        else {
            dst[0] = ka < K ? src[0] : ak_from_acc (0.0f);
            dst[1] = ka + 1 < K ? src[1] : ak_from_acc (0.0f);
        }
    }
}

extern "C" __global__ void __launch_bounds__ (S_NT) ak_kernel (ak_cuda_args_t a)
{
    AK_DYNAMIC_SHARED (unsigned char, ring);           /* STG stages of S_NT x S_SLOT; then the partials */
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

    const bool b_al = N % 8 == 0 && ((unsigned long long) B & 15) == 0;
    const bool a_al = K % 2 == 0 && ((unsigned long long) A & 3) == 0;
    bool colok[CW], rowok[4];
#pragma unroll
    for (int j = 0; j < CW; j++)
        colok[j] = b_al && n0 + 64 * j + 8 * g + 8 <= N;
#pragma unroll
    for (int p = 0; p < 4; p++)
        rowok[p] = r0 + g + 8 * (p & 1) < M;

    float acc[CW][8][4];
#pragma unroll
    for (int j = 0; j < CW; j++)
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[j][i][e] = 0.0f;

    /* the warp's steps: s_lo + warp, + WARPS, ...; STG - 1 of them in
       flight while one is computed */
    const ak_i64 first = s_lo + warp, n = first < s_hi ? (s_hi - first + WARPS - 1) / WARPS : 0;
#pragma unroll
    for (int i = 0; i < STG - 1; i++) {
        if (i < n)
            s_issue (ring + i * S_NT * S_SLOT, A, B, M, N, K, r0, n0, first + (ak_i64) i * WARPS, colok, a_al,
                     tid, g, t);
        ak_cp_commit ();
    }
    for (ak_i64 i = 0; i < n; i++) {
        const ak_i64 nx = i + STG - 1;
        if (nx < n)
            s_issue (ring + (nx % STG) * S_NT * S_SLOT, A, B, M, N, K, r0, n0, first + nx * WARPS, colok, a_al,
                     tid, g, t);
        ak_cp_commit ();
        ak_cp_wait<STG - 1> ();
        const unsigned char *stage = ring + (i % STG) * S_NT * S_SLOT;
        unsigned af[4];
#pragma unroll
        for (int p = 0; p < 4; p++)
            af[p] = rowok[p] ? *(const unsigned *) (stage + S_ABASE + (p * S_NT + tid) * 4) : 0u;
#pragma unroll
        for (int j = 0; j < CW; j++) {
            s_u4_t q0, q1, q2, q3;
            q0.v = *(const uint4 *) (stage + ((j * 4 + 0) * S_NT + tid) * 16);
            q1.v = *(const uint4 *) (stage + ((j * 4 + 1) * S_NT + tid) * 16);
            q2.v = *(const uint4 *) (stage + ((j * 4 + 2) * S_NT + tid) * 16);
            q3.v = *(const uint4 *) (stage + ((j * 4 + 3) * S_NT + tid) * 16);
#pragma unroll
            for (int i8 = 0; i8 < 8; i8++) {
                /* element i8 of rows 2t and 2t+1 (low, high half), of 2t+8 and 2t+9 */
                const unsigned sel = i8 & 1 ? 0x7632u : 0x5410u;
                const unsigned b0 = __byte_perm (q0.w[i8 >> 1], q1.w[i8 >> 1], sel);
                const unsigned b1 = __byte_perm (q2.w[i8 >> 1], q3.w[i8 >> 1], sel);
                ak_mma_16816 (acc[j][i8], af, b0, b1);
            }
        }
    }
    ak_cp_wait<0> ();
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
