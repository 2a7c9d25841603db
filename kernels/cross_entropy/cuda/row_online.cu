/*  cross_entropy, one pass over the logits (cuda).
    loss[r] = logsumexp(x[r]) - x[r][t_r],  t_r = (r * 2654435761u mod 2^32) % vocab

    A row belongs to 32*WPR threads (WPR warps: 1 is a warp per row, 32 a
    whole 1024-thread block per row), ROWS rows per block.  Each thread
    walks its share of the row in chunks of 32 elements (up to 32/(VECB /
    element size) independent VECB-byte loads in flight; VECB 16: 128-bit
    loads) and keeps an online (max, sum of exp(x - max)) pair: a chunk
    rescales the sum once when it raises the maximum, so the logits are
    read exactly once.  The pairs are merged across the row (warp
    shuffles, then shared memory in warp order: deterministic).  Rows whose
    length is not a multiple of the access, or a buffer not aligned to it,
    take a scalar path.
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

/*  (m, s) += (m2, s2): the sum of exponentials of two parts, rescaled to
    the larger maximum.  Symmetric, so the butterfly gives every lane the
    same bits; two empty parts (m = -inf) stay empty. */
__device__ __forceinline__ void s_merge (float &m, float &s, float m2, float s2)
{
    const float nm = fmaxf (m, m2);
    if (nm == __int_as_float (0xff800000))
        return;
    s = s * __expf (m - nm) + s2 * __expf (m2 - nm);
    m = nm;
}

extern "C" __global__ void __launch_bounds__ (S_TPR * ROWS) ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], V = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * ROWS + threadIdx.y;
    const bool live = r < B;           /* a dead row's threads still join the barriers */
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + (live ? r : 0) * V;
    const float ninf = __int_as_float (0xff800000);

    float m = ninf, s = 0.0f;
    if (V % S_VEC == 0 && s_aligned (AK_IN (a, 0))) {
        const ak_i64 nv = live ? V / S_VEC : 0;
        const s_raw_t *xv = (const s_raw_t *) x;
        for (ak_i64 j0 = t; j0 < nv; j0 += (ak_i64) S_CACHE * S_TPR) {
            s_vec_t c[S_CACHE];
#pragma unroll
            for (int i = 0; i < S_CACHE; i++)
                if (j0 + (ak_i64) i * S_TPR < nv)
                    c[i].raw = __ldg (xv + j0 + (ak_i64) i * S_TPR);
            float cm = m;
#pragma unroll
            for (int i = 0; i < S_CACHE; i++)
                if (j0 + (ak_i64) i * S_TPR < nv)
#pragma unroll
                    for (int k = 0; k < S_VEC; k++)
                        cm = fmaxf (cm, ak_to_acc (c[i].e[k]));
            s *= __expf (m - cm);          /* m = -inf: s is 0 and stays 0 */
            m = cm;
#pragma unroll
            for (int i = 0; i < S_CACHE; i++)
                if (j0 + (ak_i64) i * S_TPR < nv)
#pragma unroll
                    for (int k = 0; k < S_VEC; k++)
                        s += __expf (ak_to_acc (c[i].e[k]) - m);
        }
    } else {
        const ak_i64 n_end = live ? V : 0;
        for (ak_i64 n = t; n < n_end; n += S_TPR) {
            const float v = ak_to_acc (x[n]);
            if (v > m) {
                s *= __expf (m - v);
                m = v;
            }
            s += __expf (v - m);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        s_merge (m, s, __shfl_xor_sync (0xffffffffu, m, o), __shfl_xor_sync (0xffffffffu, s, o));
#if WPR > 1
    __shared__ float red_m[ROWS][WPR], red_s[ROWS][WPR];
    if ((t & 31) == 0) {
        red_m[threadIdx.y][t >> 5] = m;
        red_s[threadIdx.y][t >> 5] = s;
    }
    __syncthreads ();
    if (t == 0) {
        m = red_m[threadIdx.y][0];
        s = red_s[threadIdx.y][0];
        for (int w = 1; w < WPR; w++)
            s_merge (m, s, red_m[threadIdx.y][w], red_s[threadIdx.y][w]);
    }
#endif
    if (live && t == 0) {
        const ak_u32 target = ((ak_u32) r * 2654435761u) % (ak_u32) V;
        AK_OUT (a, 0)[r] = ak_from_acc ((m - ak_to_acc (x[target])) + logf (s));
    }
}
