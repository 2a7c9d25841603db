/*  layernorm, each row read from memory once (cuda).
    y = (x - mean) / sqrt(var + 1e-5) * gamma + beta.

    A row belongs to 32*WPR threads (WPR warps: 1 is a warp per row, for
    short rows; 32 is a whole 1024-thread block per row), ROWS rows per
    block.  Each thread loads its share of the row with VECB-byte accesses
    (VECB 16: one 128-bit load of 4 floats or 8 halves) and keeps up to 32
    elements of it in registers, so the mean, the variance around the mean
    (two passes: no cancellation) and the output all come from one read of
    x.  A row longer than 32*32*WPR elements re-reads the rest (from L1/L2).
    Rows whose length is not a multiple of the access, or buffers not
    aligned to it, take a scalar path with the same reductions.  Sums go
    through warp shuffles and shared memory in an order fixed by WPR:
    deterministic.
    Launch: grid [(batch+ROWS-1)/ROWS], block [32*WPR, ROWS]. */
#ifndef WPR
#define WPR 4
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef VECB
#define VECB 16
#endif

#define S_TPR   (32 * WPR)                        /* threads per row */
#define S_VEC   (VECB / (int) sizeof (ak_t))      /* elements per access */
#define S_CACHE (32 / S_VEC)                      /* accesses a thread keeps: 32 elements */

#if VECB == 16
typedef uint4 s_raw_t;
#elif VECB == 8
typedef uint2 s_raw_t;
#elif VECB == 4
typedef unsigned int s_raw_t;
#else
#error "VECB must be 4, 8 or 16"
#endif
static_assert (S_VEC >= 1 && 32 % S_VEC == 0, "VECB must hold whole elements");

/* One access: the raw word moved by one load or store, seen as elements. */
typedef union {
    s_raw_t raw;
    ak_t    e[S_VEC];
} s_vec_t;

/*  Sum of v over the row's 32*WPR threads, every thread gets it: warp
    shuffles (a butterfly: every lane ends with the same bits), then one
    value per warp through shared memory, added in warp order.  The order
    depends on WPR only: deterministic.  Every thread of the block calls it
    (it holds block barriers when WPR > 1). */
__device__ __forceinline__ float s_row_sum (float v, float (*red)[WPR])
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
#if WPR > 1
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.y][threadIdx.x >> 5] = v;
    __syncthreads ();
    v = red[threadIdx.y][0];
#pragma unroll
    for (int w = 1; w < WPR; w++)
        v += red[threadIdx.y][w];
    __syncthreads ();          /* red is reused by the next reduction */
#endif
    return v;
}

__device__ __forceinline__ float s_row_max (float v, float (*red)[WPR])
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
#if WPR > 1
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.y][threadIdx.x >> 5] = v;
    __syncthreads ();
    v = red[threadIdx.y][0];
#pragma unroll
    for (int w = 1; w < WPR; w++)
        v = fmaxf (v, red[threadIdx.y][w]);
    __syncthreads ();
#endif
    return v;
}

/* True when every pointer is aligned for VECB-byte accesses. */
__device__ __forceinline__ bool s_aligned (const void *p)
{
    return ((ak_u64) p) % VECB == 0;
}

extern "C" __global__ void __launch_bounds__ (S_TPR * ROWS) ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[ROWS][WPR];
    const ak_i64 B = a.dims[0], N = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * ROWS + threadIdx.y;
    const bool live = r < B;           /* a dead row's threads still join the barriers */
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + (live ? r : 0) * N;
    const ak_t *gamma = AK_IN (a, 1), *beta = AK_IN (a, 2);
    ak_t *y = AK_OUT (a, 0) + (live ? r : 0) * N;
    const float inv_n = 1.0f / (float) N;

    if (N % S_VEC == 0 && s_aligned (AK_IN (a, 0)) && s_aligned (gamma) && s_aligned (beta)
        && s_aligned (AK_OUT (a, 0))) {
        const ak_i64 nv = live ? N / S_VEC : 0;
        const s_raw_t *xv = (const s_raw_t *) x, *gv = (const s_raw_t *) gamma,
                      *bv = (const s_raw_t *) beta;
        s_raw_t *yv = (s_raw_t *) y;
        s_vec_t c[S_CACHE];
#pragma unroll
        for (int i = 0; i < S_CACHE; i++) {
            const ak_i64 j = t + (ak_i64) i * S_TPR;
            if (j < nv)
                c[i].raw = __ldg (xv + j);
        }
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < S_CACHE; i++)
            if (t + (ak_i64) i * S_TPR < nv)
#pragma unroll
                for (int k = 0; k < S_VEC; k++)
                    sum += ak_to_acc (c[i].e[k]);
        for (ak_i64 j = t + (ak_i64) S_CACHE * S_TPR; j < nv; j += S_TPR) {
            s_vec_t v;
            v.raw = __ldg (xv + j);
#pragma unroll
            for (int k = 0; k < S_VEC; k++)
                sum += ak_to_acc (v.e[k]);
        }
        const float mean = s_row_sum (sum, red) * inv_n;

        float sq = 0.0f;
#pragma unroll
        for (int i = 0; i < S_CACHE; i++)
            if (t + (ak_i64) i * S_TPR < nv)
#pragma unroll
                for (int k = 0; k < S_VEC; k++) {
                    const float d = ak_to_acc (c[i].e[k]) - mean;
                    sq += d * d;
                }
        for (ak_i64 j = t + (ak_i64) S_CACHE * S_TPR; j < nv; j += S_TPR) {
            s_vec_t v;
            v.raw = __ldg (xv + j);
#pragma unroll
            for (int k = 0; k < S_VEC; k++) {
                const float d = ak_to_acc (v.e[k]) - mean;
                sq += d * d;
            }
        }
        const float rstd = rsqrtf (s_row_sum (sq, red) * inv_n + 1e-5f);

#pragma unroll
        for (int i = 0; i < S_CACHE; i++) {
            const ak_i64 j = t + (ak_i64) i * S_TPR;
            if (j < nv) {
                s_vec_t g, b, o;
                g.raw = __ldg (gv + j);
                b.raw = __ldg (bv + j);
#pragma unroll
                for (int k = 0; k < S_VEC; k++)
                    o.e[k] = ak_from_acc ((ak_to_acc (c[i].e[k]) - mean) * rstd * ak_to_acc (g.e[k])
                                          + ak_to_acc (b.e[k]));
                yv[j] = o.raw;
            }
        }
        for (ak_i64 j = t + (ak_i64) S_CACHE * S_TPR; j < nv; j += S_TPR) {
            s_vec_t v, g, b, o;
            v.raw = __ldg (xv + j);
            g.raw = __ldg (gv + j);
            b.raw = __ldg (bv + j);
#pragma unroll
            for (int k = 0; k < S_VEC; k++)
                o.e[k] = ak_from_acc ((ak_to_acc (v.e[k]) - mean) * rstd * ak_to_acc (g.e[k])
                                      + ak_to_acc (b.e[k]));
            yv[j] = o.raw;
        }
    } else {
        const ak_i64 n_end = live ? N : 0;
        float sum = 0.0f;
        for (ak_i64 n = t; n < n_end; n += S_TPR)
            sum += ak_to_acc (x[n]);
        const float mean = s_row_sum (sum, red) * inv_n;
        float sq = 0.0f;
        for (ak_i64 n = t; n < n_end; n += S_TPR) {
            const float d = ak_to_acc (x[n]) - mean;
            sq += d * d;
        }
        const float rstd = rsqrtf (s_row_sum (sq, red) * inv_n + 1e-5f);
        for (ak_i64 n = t; n < n_end; n += S_TPR)
            y[n] = ak_from_acc ((ak_to_acc (x[n]) - mean) * rstd * ak_to_acc (gamma[n]) + ak_to_acc (beta[n]));
    }
}
