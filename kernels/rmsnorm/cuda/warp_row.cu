/*  rmsnorm, one warp per row, ROWS rows per block (cuda): for short rows.
    Each lane walks the row VEC contiguous elements at a time; the sum of
    squares is reduced with warp shuffles (fixed order: deterministic).
    y = x / sqrt(mean(x^2) + 1e-6) * w.
    Launch: grid [(M+ROWS-1)/ROWS], block [32, ROWS]. */
#ifndef ROWS
#define ROWS 4
#endif
#ifndef VEC
#define VEC 1
#endif

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1];
    const ak_i64 m = (ak_i64) blockIdx.x * ROWS + threadIdx.y;
    if (m >= M)
        return;                /* whole warps leave together: the shuffles stay full */
    const int lane = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + m * N, *w = AK_IN (a, 1);
    ak_t *y = AK_OUT (a, 0) + m * N;
    const ak_i64 step = (ak_i64) 32 * VEC;

    float ss = 0.0f;
    for (ak_i64 n0 = (ak_i64) lane * VEC; n0 < N; n0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (n0 + v < N) {
                const float e = ak_to_acc (x[n0 + v]);
                ss += e * e;
            }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        ss += __shfl_xor_sync (0xffffffffu, ss, o);

    const float inv = 1.0f / sqrtf (ss / (float) N + 1e-6f);
    for (ak_i64 n0 = (ak_i64) lane * VEC; n0 < N; n0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (n0 + v < N)
                y[n0 + v] = ak_from_acc (ak_to_acc (x[n0 + v]) * inv * ak_to_acc (w[n0 + v]));
    }
}
