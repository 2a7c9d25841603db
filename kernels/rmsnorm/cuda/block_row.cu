/*  rmsnorm, one block per row (cuda).  THREADS threads walk the row VEC
    contiguous elements at a time; the sum of squares is reduced across the
    block (warp shuffles, then one value per warp through shared memory) in
    an order fixed by THREADS and VEC, so results are deterministic.
    y = x / sqrt(mean(x^2) + 1e-6) * w.
    Launch: grid [M], block [THREADS]; THREADS a multiple of 32. */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 1
#endif

__device__ __forceinline__ float s_warp_sum (float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float scratch[32];
    const ak_i64 N = a.dims[1];
    const ak_i64 m = blockIdx.x;
    const ak_t *x = AK_IN (a, 0) + m * N, *w = AK_IN (a, 1);
    ak_t *y = AK_OUT (a, 0) + m * N;
    const ak_i64 step = (ak_i64) THREADS * VEC;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    float ss = 0.0f;
    for (ak_i64 n0 = (ak_i64) threadIdx.x * VEC; n0 < N; n0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (n0 + v < N) {
                const float e = ak_to_acc (x[n0 + v]);
                ss += e * e;
            }
    }
    ss = s_warp_sum (ss);
    if (lane == 0)
        scratch[warp] = ss;
    __syncthreads ();
    ss = lane < THREADS / 32 ? scratch[lane] : 0.0f;
    ss = s_warp_sum (ss);

    const float inv = 1.0f / sqrtf (ss / (float) N + 1e-6f);
    for (ak_i64 n0 = (ak_i64) threadIdx.x * VEC; n0 < N; n0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (n0 + v < N)
                y[n0 + v] = ak_from_acc (ak_to_acc (x[n0 + v]) * inv * ak_to_acc (w[n0 + v]));
    }
}
