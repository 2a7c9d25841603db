/*  gated_gelu, a tile of rows x columns a block (cuda).
    y[m][n] = act(x[m][n]) * x[m][N + n] over the packed [M][2N] input,
    act 1 gelu_tanh, 2 silu.

    A block covers ROWS rows and THREADS*UNROLL accesses of VECB bytes of
    each half of them (VECB 16: one 128-bit load of 4 floats or 8 halves);
    the grid is (column tiles) x (row tiles) in one dimension.  Every thread
    first issues all its loads (2*UNROLL*ROWS accesses), then computes and
    stores.  Rows whose N is not a multiple of the access, or buffers not
    aligned to it, take a scalar path with the same tiling.

    Both activations are g * sigmoid(z), gelu_tanh's 0.5 (1 + tanh(v)) being
    1 / (1 + exp(-2v)), v = sqrt(2/pi) (g + 0.044715 g^3); z = 2v or g.  The
    quotient g / (1 + exp(-z)) comes before the product with the up value:
    where exp(-z) is +inf it is -0 and stays finite.  float32 uses expf and
    an IEEE division (the float32 tolerance is 1e-5); float16 / bfloat16
    the fast __expf and a rounded reciprocal, far inside their tolerance.
    Launch: grid [ceil(N / (THREADS*UNROLL*VECB/b)) * ceil(M / ROWS)],
    block [THREADS]. */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VECB
#define VECB 16
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef ROWS
#define ROWS 2
#endif

typedef ak_vec_t<VECB> s_vec_t;                        /* one access */
#define S_VEC  ((int) s_vec_t::count)                    /* elements per access */
#define S_COLS ((ak_i64) THREADS * UNROLL * S_VEC)       /* columns per block */
typedef s_vec_t::raw_t s_raw_t;

__device__ __forceinline__ float s_gated (float g, float u, bool gelu)
{
    const float z = gelu ? 1.5957691216f * (g + 0.044715f * g * g * g) : g;
#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)
    return g * __frcp_rn (1.0f + __expf (-z)) * u;
#else
    return g / (1.0f + expf (-z)) * u;
#endif
}

extern "C" __global__ void __launch_bounds__ (THREADS) ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1];
    const bool gelu = a.dims[2] == 1;
    const ak_i64 ncb = (N + S_COLS - 1) / S_COLS;
    const ak_i64 cb = blockIdx.x % ncb, r0 = (ak_i64) (blockIdx.x / ncb) * ROWS;
    const ak_t *x = AK_IN (a, 0);
    ak_t *y = AK_OUT (a, 0);

    if (N % S_VEC == 0 && ak_aligned (x, VECB) && ak_aligned (y, VECB)) {
        const ak_i64 nv = N / S_VEC;                  /* accesses per half row */
        const s_raw_t *xv = (const s_raw_t *) x;
        s_raw_t *yv = (s_raw_t *) y;
        const ak_i64 j0 = cb * THREADS * UNROLL + threadIdx.x;
        s_vec_t vg[ROWS][UNROLL], vu[ROWS][UNROLL];
#pragma unroll
        for (int i = 0; i < ROWS; i++)
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const ak_i64 j = j0 + (ak_i64) u * THREADS;
                if (r0 + i < M && j < nv) {
                    vg[i][u].raw = __ldg (xv + (r0 + i) * 2 * nv + j);
                    vu[i][u].raw = __ldg (xv + (r0 + i) * 2 * nv + nv + j);
                }
            }
#pragma unroll
        for (int i = 0; i < ROWS; i++)
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const ak_i64 j = j0 + (ak_i64) u * THREADS;
                if (r0 + i < M && j < nv) {
                    s_vec_t o;
#pragma unroll
                    for (int k = 0; k < S_VEC; k++)
                        o.e[k] = ak_from_acc (s_gated (ak_to_acc (vg[i][u].e[k]), ak_to_acc (vu[i][u].e[k]), gelu));
                    yv[(r0 + i) * nv + j] = o.raw;
                }
            }
    } else {
        const ak_i64 n0 = cb * S_COLS + threadIdx.x;
#pragma unroll
        for (int i = 0; i < ROWS; i++) {
            if (r0 + i >= M)
                break;
            const ak_t *gr = x + (r0 + i) * 2 * N, *ur = gr + N;
            ak_t *yr = y + (r0 + i) * N;
#pragma unroll
            for (int e = 0; e < UNROLL * S_VEC; e++) {
                const ak_i64 n = n0 + (ak_i64) e * THREADS;
                if (n < N)
                    yr[n] = ak_from_acc (s_gated (ak_to_acc (gr[n]), ak_to_acc (ur[n]), gelu));
            }
        }
    }
}
