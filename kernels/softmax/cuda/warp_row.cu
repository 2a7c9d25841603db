/*  softmax, one warp per row, ROWS rows per block (cuda): for short rows,
    where a whole block per row would leave most threads idle.  Each lane
    walks the row VEC contiguous elements at a time; maximum and sum are
    reduced with warp shuffles only (fixed order: deterministic).
    Launch: grid [(rows+ROWS-1)/ROWS], block [32, ROWS]. */
#ifndef ROWS
#define ROWS 4
#endif
#ifndef VEC
#define VEC 1
#endif

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 rows = a.dims[0], cols = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * ROWS + threadIdx.y;
    if (r >= rows)
        return;                /* whole warps leave together: the shuffles stay full */
    const int lane = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * cols;
    ak_t *y = AK_OUT (a, 0) + r * cols;
    const ak_i64 step = (ak_i64) 32 * VEC;

    float m = __int_as_float (0xff800000);
    for (ak_i64 c0 = (ak_i64) lane * VEC; c0 < cols; c0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (c0 + v < cols)
                m = fmaxf (m, ak_to_acc (x[c0 + v]));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf (m, __shfl_xor_sync (0xffffffffu, m, o));

    float sum = 0.0f;
    for (ak_i64 c0 = (ak_i64) lane * VEC; c0 < cols; c0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (c0 + v < cols)
                sum += expf (ak_to_acc (x[c0 + v]) - m);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync (0xffffffffu, sum, o);

    for (ak_i64 c0 = (ak_i64) lane * VEC; c0 < cols; c0 += step) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            if (c0 + v < cols)
                y[c0 + v] = ak_from_acc (expf (ak_to_acc (x[c0 + v]) - m) / sum);
    }
}
