/*  scale_bias candidate (cuda): one block of THREADS threads per row, each
    thread handling VEC neighbouring columns per step, so there is no
    division per element and scale/bias loads are shared by the row.
    Launch: grid [rows], block [THREADS]. */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 1
#endif

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 cols = a.dims[1];
    const ak_i64 r = blockIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * cols;
    const ak_t *scale = AK_IN (a, 1), *bias = AK_IN (a, 2);
    ak_t *y = AK_OUT (a, 0) + r * cols;
    for (ak_i64 c0 = (ak_i64) threadIdx.x * VEC; c0 < cols; c0 += (ak_i64) THREADS * VEC) {
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            const ak_i64 c = c0 + k;
            if (c < cols)
                y[c] = ak_from_acc (ak_to_acc (x[c]) * ak_to_acc (scale[c]) + ak_to_acc (bias[c]));
        }
    }
}
