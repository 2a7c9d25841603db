/*  Planted for tests (cuda, softmax ABI): subtly wrong.  It forgets the
    last column when it sums a row, so every output is a little too large
    (by about 1/cols) but finite, written and deterministic: only the
    accuracy gates can catch it.
    Launch: grid [(rows+127)/128], block [128]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 rows = a.dims[0], cols = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    const ak_t *x = AK_IN (a, 0) + r * cols;
    ak_t *y = AK_OUT (a, 0) + r * cols;
    ak_acc_t m = ak_to_acc (x[0]);
    for (ak_i64 c = 1; c < cols; c++)
        m = fmaxf (m, ak_to_acc (x[c]));
    ak_acc_t sum = 0.0f;
    for (ak_i64 c = 0; c < cols; c++)
        if (c + 1 < cols || cols == 1)
            sum += expf (ak_to_acc (x[c]) - m);
    for (ak_i64 c = 0; c < cols; c++)
        y[c] = ak_from_acc (expf (ak_to_acc (x[c]) - m) / sum);
}
