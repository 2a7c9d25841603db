/*  Planted for tests (cuda, softmax ABI): a correct softmax (a thread a
    row) whose last row's thread also stores one element 4 past the end of
    the output, inside the gates' guard region: every output matches, so
    only the guards can fail it (wrong_answer, "wrote outside its
    buffers").  Launch: grid [(rows+127)/128], block [128]. */
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
        sum += expf (ak_to_acc (x[c]) - m);
    for (ak_i64 c = 0; c < cols; c++)
        y[c] = ak_from_acc (expf (ak_to_acc (x[c]) - m) / sum);
    if (r == rows - 1)
        y[cols + 4] = ak_from_acc (0.5f);
}
