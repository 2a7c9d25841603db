/*  reduce device reference (reference_cuda): the float64 oracle on the
    GPU, one thread per row, added left to right as ref.c does.
    Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(M+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1];
    const ak_i64 m = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M)
        return;
    const double *xr = AK_IN (a, 0) + m * N;
    double s = 0;
    for (ak_i64 n = 0; n < N; n++)
        s += xr[n];
    AK_OUT (a, 0)[m] = s;
}
