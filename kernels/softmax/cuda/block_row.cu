/*  softmax, one block per row (cuda).  THREADS threads walk the row VEC
    contiguous elements at a time; the row maximum and the sum of
    exponentials are reduced across the block (warp shuffles, then one
    value per warp through shared memory).  The reduction order depends
    only on THREADS and VEC, so results are deterministic.
    Launch: grid [rows], block [THREADS]; THREADS a multiple of 32. */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 1
#endif

__device__ __forceinline__ float s_warp_max (float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float s_warp_sum (float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
    return v;
}

/*  Block-wide maximum (is_max) or sum of v; every thread gets it. */
__device__ float s_block_reduce (float v, bool is_max, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = THREADS / 32;
    const float identity = is_max ? __int_as_float (0xff800000) : 0.0f;   /* -inf or 0 */
    v = is_max ? s_warp_max (v) : s_warp_sum (v);
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads ();
    v = lane < nwarps ? scratch[lane] : identity;
    v = is_max ? s_warp_max (v) : s_warp_sum (v);
    __syncthreads ();          /* scratch is reused by the next reduction */
    return v;
}

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float scratch[32];
    const ak_i64 cols = a.dims[1];
    const ak_i64 r = blockIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * cols;
    ak_t *y = AK_OUT (a, 0) + r * cols;
    const ak_i64 step = (ak_i64) THREADS * VEC;

    float m = __int_as_float (0xff800000);
    for (ak_i64 c0 = (ak_i64) threadIdx.x * VEC; c0 < cols; c0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (c0 + v < cols)
                m = fmaxf (m, ak_to_acc (x[c0 + v]));
    }
    m = s_block_reduce (m, true, scratch);

    float sum = 0.0f;
    for (ak_i64 c0 = (ak_i64) threadIdx.x * VEC; c0 < cols; c0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (c0 + v < cols)
                sum += expf (ak_to_acc (x[c0 + v]) - m);
    }
    sum = s_block_reduce (sum, false, scratch);

    for (ak_i64 c0 = (ak_i64) threadIdx.x * VEC; c0 < cols; c0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (c0 + v < cols)
                y[c0 + v] = ak_from_acc (expf (ak_to_acc (x[c0 + v]) - m) / sum);
    }
}
