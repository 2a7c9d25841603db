/*  reduce (row sum), streaming (cuda): out[m] = sum_n x[m][n].

    A row belongs to 32*WPR threads (WPR warps: 1 is a warp per row, 32 a
    whole 1024-thread block per row), ROWS rows per block.  Each thread
    walks its share of the row in chunks of 32 elements: up to 32/(VECB /
    element size) independent VECB-byte loads in flight (VECB 16: 128-bit
    loads of 4 floats or 8 halves), then adds them in a fixed order.
    Rows whose length is not a multiple of the access, or a buffer not
    aligned to it, take a scalar path.  The partial sums go through warp
    shuffles and shared memory in an order fixed by WPR: deterministic.
    Launch: grid [(M+ROWS-1)/ROWS], block [32*WPR, ROWS]. */
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
    const ak_i64 M = a.dims[0], N = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * ROWS + threadIdx.y;
    const bool live = r < M;           /* a dead row's threads still join the barriers */
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + (live ? r : 0) * N;

    float sum = 0.0f;
    if (N % S_VEC == 0 && s_aligned (AK_IN (a, 0))) {
        const ak_i64 nv = live ? N / S_VEC : 0;
        const s_raw_t *xv = (const s_raw_t *) x;
        for (ak_i64 j0 = t; j0 < nv; j0 += (ak_i64) S_CACHE * S_TPR) {
            s_vec_t c[S_CACHE];
#pragma unroll
            for (int i = 0; i < S_CACHE; i++)
                if (j0 + (ak_i64) i * S_TPR < nv)
                    c[i].raw = __ldg (xv + j0 + (ak_i64) i * S_TPR);
#pragma unroll
            for (int i = 0; i < S_CACHE; i++)
                if (j0 + (ak_i64) i * S_TPR < nv)
#pragma unroll
                    for (int k = 0; k < S_VEC; k++)
                        sum += ak_to_acc (c[i].e[k]);
        }
    } else {
        const ak_i64 n_end = live ? N : 0;
        for (ak_i64 n = t; n < n_end; n += S_TPR)
            sum += ak_to_acc (x[n]);
    }
    sum = s_row_sum (sum, red);
    if (live && t == 0)
        AK_OUT (a, 0)[r] = ak_from_acc (sum);
}
