/*  fused_mlp, tensor cores, one persistent launch (cuda).
      h = silu (x Wg) * (x Wu)     [batch][hidden], an output
      y = h Wd                     [batch][dim]

    A fused MLP is two dependent GEMMs: every element of y needs a whole
    row of h.  Computing h tiles and accumulating their share of y with
    atomics would make y depend on the order blocks finish (not
    deterministic); a block per row-block that keeps its whole h rows and
    then does the down projection streams every weight once per
    row-block (arithmetic intensity BM FLOPs a byte: bandwidth-bound).
    So this kernel runs both GEMMs at full tile size in one launch of a
    persistent grid (GRID blocks, every one resident: at most the SM count)
    with a grid-wide barrier between them:

      phase 1  tiles of h: x (BM rows) times the Wg and Wu column panels
               (BN columns) together, SiLU and the product in the
               epilogue, h stored in the element type;
      barrier  (an arrival counter in device memory, release/acquire
               fences around it);
      phase 2  tiles of y = h Wd.

    Tiles are handed out column panel by column panel (consecutive blocks
    share a weight panel: it is read from HBM about once).  The GEMM core
    is kernels/matmul/cuda/mma.cu's: `mma.sync.m16n8k16` over WARPS_M x
    WARPS_N warps, STAGES `cp.async` stages, `ldmatrix`, zero-filled and
    element-by-element loads at ragged edges; phase 1 carries two
    accumulator sets (gate and up), hence the smaller warp tiles.

    float32 runs the same two phases with a shared-memory FMA tiling
    (TF32 could not meet the float32 tolerance).

    The barrier needs every block resident: a grid larger than the SM
    count returns at once without writing (the gates then report unwritten
    outputs rather than a hang).  Every output is reduced in a fixed
    order: deterministic.

    Launch: grid [GRID], block [WARPS_M*WARPS_N*32],
    shared STAGES*(BM*(BK+8)+2*BK*(BN+8))*2. */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 64
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
#define WM    (BM / WARPS_M)
#define WN    (BN / WARPS_N)
#define MI    (WM / 16)
#define NI    (WN / 8)
#define SA    (BK + 8)
#define SB    (BN + 8)
#define STAGE_ELEMS (BM * SA + 2 * BK * SB)

static_assert (WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16 x 16");
static_assert (BK % 16 == 0, "BK must be a multiple of 16");

/* ------------------------------------------------------ the grid barrier */

__device__ unsigned long long s_barrier;          /* arrivals, over every launch of the module */

/*  Every launch adds exactly gridDim.x arrivals per barrier, and launches
    of a module are ordered on the stream, so the target is the next
    multiple of the grid size. */
__device__ __forceinline__ void s_grid_sync (void)
{
    __syncthreads ();
    if (threadIdx.x == 0) {
        const unsigned long long g = gridDim.x;
        __threadfence ();
        const unsigned long long target = (atomicAdd (&s_barrier, 1ull) / g + 1) * g;
        while (*(volatile unsigned long long *) &s_barrier < target)
            __nanosleep (32);
        __threadfence ();
    }
    __syncthreads ();
}

__device__ __forceinline__ float s_silu_mul (float g, float u)
{
    return g / (1.0f + __expf (-g)) * u;
}

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)
/* ------------------------------------------------------ tensor-core path */

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

/*  A: BM x BK of a [M][K] matrix; Bs: BK x BN of NB [K][N] matrices. */
template <int NB>
__device__ __forceinline__ void s_load_tile (ak_t *st, const ak_t *A, const ak_t *B0, const ak_t *B1,
                                             ak_i64 M, ak_i64 N, ak_i64 K, ak_i64 m0, ak_i64 n0,
                                             ak_i64 k0, bool a_al, bool b_al)
{
    const int tid = threadIdx.x;
    if (a_al && m0 + BM <= M && k0 + BK <= K) {          /* inside and aligned: no checks */
        const ak_t *src = A + m0 * K + k0;
#pragma unroll
        for (int i = 0; i < (BM * (BK / 8) + NT - 1) / NT; i++) {
            const int c = tid + i * NT, r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            if ((BM * (BK / 8)) % NT == 0 || c < BM * (BK / 8))
                ak_cp_async16 (st + r * SA + kc, src + r * K + kc, true);
        }
    }
    else
        for (int c = tid; c < BM * (BK / 8); c += NT) {
            const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
            const ak_i64 gr = m0 + r;
            const bool ok = gr < M;
            s_load_chunk (st + r * SA + kc, A + (ok ? gr : 0) * K, k0 + kc, K, ok && k0 + kc < K, a_al);
        }
    const bool fast = b_al && n0 + BN <= N && k0 + BK <= K;
#pragma unroll
    for (int b = 0; b < NB; b++) {
        const ak_t *B = b ? B1 : B0;
        ak_t *sb = st + BM * SA + b * BK * SB;
        if (fast) {
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
}

/*  The A fragments and the NB B fragments of the warp for the k16 step at
    kk of a stage. */
template <int NB>
__device__ __forceinline__ void s_frags (unsigned (&af)[MI][4], unsigned (&bf)[NB][NI][2], const ak_t *sa,
                                         int kk, int wm, int wn, int lane)
{
#pragma unroll
    for (int i = 0; i < MI; i++)
        ak_ldmatrix_x4 (af[i], sa + (wm * WM + i * 16 + (lane & 15)) * SA + kk + (lane >> 4) * 8);
#pragma unroll
    for (int b = 0; b < NB; b++) {
        const ak_t *sb = sa + BM * SA + b * BK * SB;
#pragma unroll
        for (int j = 0; j < NI; j += 2) {
            unsigned r[4];
            const int mat = lane >> 3;
            ak_ldmatrix_x4_trans (r, sb + (kk + (lane & 7) + (mat & 1) * 8) * SB + wn * WN + j * 8 + (mat >> 1) * 8);
            bf[b][j][0] = r[0];
            bf[b][j][1] = r[1];
            bf[b][j + 1][0] = r[2];
            bf[b][j + 1][1] = r[3];
        }
    }
}

/*  One BM x BN tile of A B0 (and A B1) into acc, K streamed through the
    stages.  Leaves shared memory free for the next tile. */
template <int NB>
__device__ __forceinline__ void s_gemm_tile (ak_t *smem, const ak_t *A, const ak_t *B0, const ak_t *B1,
                                             ak_i64 M, ak_i64 N, ak_i64 K, ak_i64 m0, ak_i64 n0,
                                             float (&acc)[NB][MI][NI][4])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const bool a_al = K % 8 == 0, b_al = N % 8 == 0;
    const int KT = (int) ((K + BK - 1) / BK);
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NI; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[b][i][j][e] = 0.0f;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < KT)
            s_load_tile<NB> (smem + s * STAGE_ELEMS, A, B0, B1, M, N, K, m0, n0, (ak_i64) s * BK, a_al, b_al);
        ak_cp_commit ();
    }
    for (int kt = 0; kt < KT; kt++) {
        ak_cp_wait<STAGES - 2> ();
        __syncthreads ();
        const int nk = kt + STAGES - 1;
        if (nk < KT)
            s_load_tile<NB> (smem + (nk % STAGES) * STAGE_ELEMS, A, B0, B1, M, N, K, m0, n0,
                             (ak_i64) nk * BK, a_al, b_al);
        ak_cp_commit ();
        const ak_t *sa = smem + (kt % STAGES) * STAGE_ELEMS;
        /* fragments of step ks+1 load while the mma of step ks run */
        unsigned af[2][MI][4], bf[2][NB][NI][2];
        s_frags<NB> (af[0], bf[0], sa, 0, wm, wn, lane);
#pragma unroll
        for (int ks = 0; ks < BK / 16; ks++) {
            if (ks + 1 < BK / 16)
                s_frags<NB> (af[(ks + 1) & 1], bf[(ks + 1) & 1], sa, (ks + 1) * 16, wm, wn, lane);
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int i = 0; i < MI; i++)
#pragma unroll
                    for (int j = 0; j < NI; j++)
                        ak_mma_16816 (acc[b][i][j], af[ks & 1][i], bf[ks & 1][b][j][0], bf[ks & 1][b][j][1]);
        }
    }
    ak_cp_wait<0> ();
    __syncthreads ();
}

/*  Stores v(acc element) for the warp's outputs of the tile at (m0, n0)
    of a [M][N] matrix. */
template <int NB, typename F>
__device__ __forceinline__ void s_store_tile (ak_t *C, ak_i64 M, ak_i64 N, ak_i64 m0, ak_i64 n0,
                                              const float (&acc)[NB][MI][NI][4], F f)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
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
                const ak_t v0 = ak_from_acc (f (acc, i, j, 2 * h)), v1 = ak_from_acc (f (acc, i, j, 2 * h + 1));
                ak_t *out = C + r * N + col;
                if (pairs && col + 1 < N) {
                    ak_t v[2] = { v0, v1 };
                    *(unsigned *) out = *(const unsigned *) v;
                }
                else {
                    if (col < N)
                        out[0] = v0;
                    if (col + 1 < N)
                        out[1] = v1;
                }
            }
}

extern "C" __global__ void __launch_bounds__ (NT) ak_kernel (ak_cuda_args_t a)
{
    unsigned nsm;
    asm ("mov.u32 %0, %%nsmid;" : "=r" (nsm));
    if (gridDim.x > nsm)
        return;
    extern __shared__ __align__ (16) unsigned char s_raw[];
    ak_t *smem = (ak_t *) s_raw;
    const ak_i64 batch = a.dims[0], dim = a.dims[1], hidden = a.dims[2];
    const ak_t *X = AK_IN (a, 0), *Wg = AK_IN (a, 1), *Wu = AK_IN (a, 2), *Wd = AK_IN (a, 3);
    ak_t *Y = AK_OUT (a, 0), *Hh = AK_OUT (a, 1);
    const ak_i64 tm = (batch + BM - 1) / BM;

    {   /* phase 1: h = silu(x Wg) * (x Wu) */
        const ak_i64 tiles = tm * ((hidden + BN - 1) / BN);
        for (ak_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
            const ak_i64 m0 = (t % tm) * BM, n0 = (t / tm) * BN;
            float acc[2][MI][NI][4];
            s_gemm_tile<2> (smem, X, Wg, Wu, batch, hidden, dim, m0, n0, acc);
            s_store_tile<2> (Hh, batch, hidden, m0, n0, acc,
                             [] (const float (&c)[2][MI][NI][4], int i, int j, int e) {
                                 return s_silu_mul (c[0][i][j][e], c[1][i][j][e]);
                             });
        }
    }
    s_grid_sync ();
    {   /* phase 2: y = h Wd */
        const ak_i64 tiles = tm * ((dim + BN - 1) / BN);
        for (ak_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
            const ak_i64 m0 = (t % tm) * BM, n0 = (t / tm) * BN;
            float acc[1][MI][NI][4];
            s_gemm_tile<1> (smem, Hh, Wd, Wd, batch, dim, hidden, m0, n0, acc);
            s_store_tile<1> (Y, batch, dim, m0, n0, acc,
                             [] (const float (&c)[1][MI][NI][4], int i, int j, int e) { return c[0][i][j][e]; });
        }
    }
}

#else   /* float32: the same two phases, shared-memory FMA tiles */

#define FK 8
#define PER (BM * BN / NT)

/*  One BM x BN tile of A B0 (and A B1): thread tid owns outputs tid + e*NT
    (row idx / BN, column idx % BN). */
template <int NB>
__device__ __forceinline__ void s_fma_tile (float *As, const ak_t *A, const ak_t *B0, const ak_t *B1,
                                            ak_i64 M, ak_i64 N, ak_i64 K, ak_i64 m0, ak_i64 n0,
                                            float (&acc)[NB][PER])
{
    float *Bs = As + BM * FK;
    const int tid = threadIdx.x;
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int e = 0; e < PER; e++)
            acc[b][e] = 0.0f;
    for (ak_i64 k0 = 0; k0 < K; k0 += FK) {
        for (int c = tid; c < BM * FK; c += NT) {
            const int r = c / FK, kk = c % FK;
            As[c] = m0 + r < M && k0 + kk < K ? ak_to_acc (A[(m0 + r) * K + k0 + kk]) : 0.0f;
        }
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const ak_t *B = b ? B1 : B0;
            for (int c = tid; c < FK * BN; c += NT) {
                const int kk = c / BN, n = c % BN;
                Bs[b * FK * BN + c] = k0 + kk < K && n0 + n < N ? ak_to_acc (B[(k0 + kk) * N + n0 + n]) : 0.0f;
            }
        }
        __syncthreads ();
#pragma unroll
        for (int e = 0; e < PER; e++) {
            const int idx = tid + e * NT, r = idx / BN, n = idx % BN;
#pragma unroll
            for (int kk = 0; kk < FK; kk++)
#pragma unroll
                for (int b = 0; b < NB; b++)
                    acc[b][e] += As[r * FK + kk] * Bs[b * FK * BN + kk * BN + n];
        }
        __syncthreads ();
    }
}

extern "C" __global__ void __launch_bounds__ (NT) ak_kernel (ak_cuda_args_t a)
{
    unsigned nsm;
    asm ("mov.u32 %0, %%nsmid;" : "=r" (nsm));
    if (gridDim.x > nsm)
        return;
    extern __shared__ __align__ (16) unsigned char s_raw[];
    float *smem = (float *) s_raw;
    const ak_i64 batch = a.dims[0], dim = a.dims[1], hidden = a.dims[2];
    const ak_t *X = AK_IN (a, 0), *Wg = AK_IN (a, 1), *Wu = AK_IN (a, 2), *Wd = AK_IN (a, 3);
    ak_t *Y = AK_OUT (a, 0), *Hh = AK_OUT (a, 1);
    const ak_i64 tm = (batch + BM - 1) / BM;
    const int tid = threadIdx.x;

    {
        const ak_i64 tiles = tm * ((hidden + BN - 1) / BN);
        for (ak_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
            const ak_i64 m0 = (t % tm) * BM, n0 = (t / tm) * BN;
            float acc[2][PER];
            s_fma_tile<2> (smem, X, Wg, Wu, batch, hidden, dim, m0, n0, acc);
#pragma unroll
            for (int e = 0; e < PER; e++) {
                const int idx = tid + e * NT;
                const ak_i64 r = m0 + idx / BN, n = n0 + idx % BN;
                if (r < batch && n < hidden)
                    Hh[r * hidden + n] = ak_from_acc (s_silu_mul (acc[0][e], acc[1][e]));
            }
        }
    }
    s_grid_sync ();
    {
        const ak_i64 tiles = tm * ((dim + BN - 1) / BN);
        for (ak_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
            const ak_i64 m0 = (t % tm) * BM, n0 = (t / tm) * BN;
            float acc[1][PER];
            s_fma_tile<1> (smem, Hh, Wd, Wd, batch, dim, hidden, m0, n0, acc);
#pragma unroll
            for (int e = 0; e < PER; e++) {
                const int idx = tid + e * NT;
                const ak_i64 r = m0 + idx / BN, n = n0 + idx % BN;
                if (r < batch && n < dim)
                    Y[r * dim + n] = ak_from_acc (acc[0][e]);
            }
        }
    }
}

#endif
