/*  softmax device reference (reference_cuda): the float64 oracle on the
    GPU, one thread per row, the host oracle's steps in the same order
    (row maximum, sum of exp(x - max), then exp(x - max) / sum).  Built with
    -DAK_REFERENCE: ak_t is double.  Checked against ref.c on small sizes.
    Launch: grid [(rows+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 rows = a.dims[0], cols = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    const double *xr = AK_IN (a, 0) + r * cols;
    double *yr = AK_OUT (a, 0) + r * cols;
    double m = xr[0];
    for (ak_i64 c = 1; c < cols; c++)
        if (xr[c] > m)
            m = xr[c];
    double sum = 0;
    for (ak_i64 c = 0; c < cols; c++)
        sum += exp (xr[c] - m);
    for (ak_i64 c = 0; c < cols; c++)
        yr[c] = exp (xr[c] - m) / sum;
}
