/*  matmul, tensor cores (cuda).  C[M][N] = A[M][K] * B[K][N], row-major,
    float accumulation.

    float16 / bfloat16: `mma.sync.m16n8k16` (plain sm_80+ PTX, no sm_90a
    features), a block computes a BM x BN tile of C with WARPS_M x WARPS_N
    warps, each warp a (BM/WARPS_M) x (BN/WARPS_N) piece.  Tiles of A
    (BM x BK) and B (BK x BN) go through STAGES shared-memory buffers filled
    by `cp.async` (16 bytes a thread; rows padded by 8 elements so that
    `ldmatrix` reads hit distinct banks), so the loads of tile k+STAGES-1
    overlap the math of tile k; tiles inside the matrix are loaded without
    bound checks.  Fragments come from `ldmatrix` (`.trans` for B, which is
    k-major in memory), those of the next k16 step while the `mma` of this
    one run.  Rows or columns past the matrix are zero-filled; where K (A)
    or N (B) is not a multiple of 8 the rows are not 16-byte aligned and
    those chunks are loaded element by element.

    float32: tensor cores would need TF32, which cannot meet the float32
    tolerance (1e-4), so the same launch (grid, threads, shared bytes)
    runs a plain shared-memory FMA tiling instead: every configuration is
    correct for every dtype, and the tuner simply finds this candidate
    slow in float32.

    Every output is reduced in the same k order on every run: deterministic.

    Launch: grid [(N+BN-1)/BN, (M+BM-1)/BM], block [WARPS_M*WARPS_N*32],
    shared STAGES*(BM*(BK+8)+BK*(BN+8))*2. */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef STAGES
#define STAGES 3
#endif

#define NT    (WARPS_M * WARPS_N * 32)
#define WM    (BM / WARPS_M)            /* warp tile rows */
#define WN    (BN / WARPS_N)            /* warp tile columns */
#define MI    (WM / 16)                 /* m16 tiles per warp */
#define NI    (WN / 8)                  /* n8 tiles per warp */
#define SA    (BK + 8)                  /* A row stride in smem, elements */
#define SB    (BN + 8)                  /* B row stride in smem, elements */
#define STAGE_ELEMS (BM * SA + BK * SB)

static_assert (WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16 x 16");
static_assert (BK % 16 == 0, "BK must be a multiple of 16");

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)

/*  One row chunk of 8 elements into shared memory: cp.async when the
    source is 16-byte aligned and inside the row, else element by element
    (zero past the end). */
__device__ __forceinline__ void s_load_chunk (ak_t *dst, const ak_t *src_row, ak_i64 col, ak_i64 ncols,
                                              bool row_ok, bool aligned)
{
    if (aligned && (!row_ok || col + 8 <= ncols)) {
        ak_cp_async16 (dst, row_ok ? (const void *) (src_row + col) : (const void *) src_row, row_ok);
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
        dst[e] = row_ok && col + e < ncols ? src_row[col + e] : ak_from_acc (0.0f);
}

__device__ __forceinline__ void s_load_tile (ak_t *sa, ak_t *sb, const ak_t *A, const ak_t *B,
                                             ak_i64 M, ak_i64 N, ak_i64 K, ak_i64 m0, ak_i64 n0,
                                             ak_i64 k0, int tid, bool a_al, bool b_al)
{
    /* A: BM rows x BK columns, BK/8 chunks a row; inside the matrix and
       16-byte aligned (the common case) without a bound check */
    if (a_al && m0 + BM <= M && k0 + BK <= K) {
        const ak_t *src = A + m0 * K + k0;
#pragma unroll
        for (int i = 0; i < (BM * (BK / 8) + NT - 1) / NT; i++) {
            const int c = tid + i * NT, r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            if ((BM * (BK / 8)) % NT == 0 || c < BM * (BK / 8))
                ak_cp_async16 (sa + r * SA + kc, src + r * K + kc, true);
        }
    }
    else
        for (int c = tid; c < BM * (BK / 8); c += NT) {
            const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            const ak_i64 gr = m0 + r;
            const bool ok = gr < M;
            s_load_chunk (sa + r * SA + kc, A + (ok ? gr : 0) * K, k0 + kc, K, ok && k0 + kc < K, a_al);
        }
    /* B: BK rows x BN columns, BN/8 chunks a row */
    if (b_al && n0 + BN <= N && k0 + BK <= K) {
        const ak_t *src = B + k0 * N + n0;
#pragma unroll
        for (int i = 0; i < (BK * (BN / 8) + NT - 1) / NT; i++) {
            const int c = tid + i * NT, r = c / (BN / 8), nc = (c % (BN / 8)) * 8;
            if ((BK * (BN / 8)) % NT == 0 || c < BK * (BN / 8))
                ak_cp_async16 (sb + r * SB + nc, src + r * N + nc, true);
        }
    }
    else
        for (int c = tid; c < BK * (BN / 8); c += NT) {
            const int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;
            const ak_i64 gk = k0 + r;
            const bool ok = gk < K;
            s_load_chunk (sb + r * SB + nc, B + (ok ? gk : 0) * N, n0 + nc, N, ok && n0 + nc < N, b_al);
        }
}

/*  The A and B fragments of the warp for the k16 step at kk of a stage. */
__device__ __forceinline__ void s_frags (unsigned (&af)[MI][4], unsigned (&bf)[NI][2], const ak_t *sa,
                                         const ak_t *sb, int kk, int wm, int wn, int lane)
{
#pragma unroll
    for (int i = 0; i < MI; i++)
        ak_ldmatrix_x4 (af[i], sa + (wm * WM + i * 16 + (lane & 15)) * SA + kk + (lane >> 4) * 8);
#pragma unroll
    for (int j = 0; j < NI; j += 2) {
        unsigned r[4];
        const int mat = lane >> 3;
        ak_ldmatrix_x4_trans (r, sb + (kk + (lane & 7) + (mat & 1) * 8) * SB + wn * WN + j * 8 + (mat >> 1) * 8);
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
    }
}

extern "C" __global__ void __launch_bounds__ (NT) ak_kernel (ak_cuda_args_t a)
{
    extern __shared__ __align__ (16) unsigned char s_raw[];
    ak_t *smem = (ak_t *) s_raw;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const ak_i64 m0 = (ak_i64) blockIdx.y * BM, n0 = (ak_i64) blockIdx.x * BN;
    const bool a_al = K % 8 == 0, b_al = N % 8 == 0;
    const int KT = (int) ((K + BK - 1) / BK);

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < KT)
            s_load_tile (smem + s * STAGE_ELEMS, smem + s * STAGE_ELEMS + BM * SA, A, B, M, N, K, m0, n0,
                         (ak_i64) s * BK, tid, a_al, b_al);
        ak_cp_commit ();
    }

    for (int kt = 0; kt < KT; kt++) {
        ak_cp_wait<STAGES - 2> ();
        __syncthreads ();
        {   /* refill the stage computed last iteration */
            const int nk = kt + STAGES - 1;
            if (nk < KT) {
                ak_t *st = smem + (nk % STAGES) * STAGE_ELEMS;
                s_load_tile (st, st + BM * SA, A, B, M, N, K, m0, n0, (ak_i64) nk * BK, tid, a_al, b_al);
            }
            ak_cp_commit ();
        }
        const ak_t *sa = smem + (kt % STAGES) * STAGE_ELEMS;
        const ak_t *sb = sa + BM * SA;
        /* fragments of step ks+1 load while the mma of step ks run */
        unsigned af[2][MI][4], bf[2][NI][2];
        s_frags (af[0], bf[0], sa, sb, 0, wm, wn, lane);
#pragma unroll
        for (int ks = 0; ks < BK / 16; ks++) {
            if (ks + 1 < BK / 16)
                s_frags (af[(ks + 1) & 1], bf[(ks + 1) & 1], sa, sb, (ks + 1) * 16, wm, wn, lane);
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++)
                    ak_mma_16816 (acc[i][j], af[ks & 1][i], bf[ks & 1][j][0], bf[ks & 1][j][1]);
        }
    }
    ak_cp_wait<0> ();

    /* c0,c1: row lane/4, columns 2*(lane%4) +0/+1; c2,c3: row + 8 */
    const bool pairs = N % 2 == 0;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const ak_i64 r = m0 + wm * WM + i * 16 + (lane >> 2) + h * 8;
                const ak_i64 col = n0 + wn * WN + j * 8 + (lane & 3) * 2;
                if (r >= M)
                    continue;
                ak_t *out = C + r * N + col;
                if (pairs && col + 1 < N) {
                    ak_t v[2] = { ak_from_acc (acc[i][j][2 * h]), ak_from_acc (acc[i][j][2 * h + 1]) };
                    *(unsigned *) out = *(const unsigned *) v;
                }
                else {
                    if (col < N)
                        out[0] = ak_from_acc (acc[i][j][2 * h]);
                    if (col + 1 < N)
                        out[1] = ak_from_acc (acc[i][j][2 * h + 1]);
                }
            }
}

#else   /* float32: shared-memory FMA tiling inside the same launch */

#define FK 8                             /* k per shared tile; (BM+BN)*FK*4 bytes fit the launch's shared */
#define PER (BM * BN / NT)               /* outputs per thread */

extern "C" __global__ void __launch_bounds__ (NT) ak_kernel (ak_cuda_args_t a)
{
    extern __shared__ __align__ (16) unsigned char s_raw[];
    float *As = (float *) s_raw, *Bs = As + BM * FK;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tid = threadIdx.x;
    const ak_i64 m0 = (ak_i64) blockIdx.y * BM, n0 = (ak_i64) blockIdx.x * BN;

    /* thread tid owns outputs tid + e*NT: row (tid + e*NT) / BN, column % BN */
    float acc[PER];
#pragma unroll
    for (int e = 0; e < PER; e++)
        acc[e] = 0.0f;
    for (ak_i64 k0 = 0; k0 < K; k0 += FK) {
        for (int c = tid; c < BM * FK; c += NT) {
            const int r = c / FK, kk = c % FK;
            As[c] = m0 + r < M && k0 + kk < K ? ak_to_acc (A[(m0 + r) * K + k0 + kk]) : 0.0f;
        }
        for (int c = tid; c < FK * BN; c += NT) {
            const int kk = c / BN, n = c % BN;
            Bs[c] = k0 + kk < K && n0 + n < N ? ak_to_acc (B[(k0 + kk) * N + n0 + n]) : 0.0f;
        }
        __syncthreads ();
#pragma unroll
        for (int e = 0; e < PER; e++) {
            const int idx = tid + e * NT, r = idx / BN, n = idx % BN;
#pragma unroll
            for (int kk = 0; kk < FK; kk++)
                acc[e] += As[r * FK + kk] * Bs[kk * BN + n];
        }
        __syncthreads ();
    }
#pragma unroll
    for (int e = 0; e < PER; e++) {
        const int idx = tid + e * NT;
        const ak_i64 r = m0 + idx / BN, n = n0 + idx % BN;
        if (r < M && n < N)
            C[r * N + n] = ak_from_acc (acc[e]);
    }
}

#endif
