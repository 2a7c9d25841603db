/*  rmsnorm device reference (reference_cuda): the float64 oracle on the
    GPU, one thread per row, as ref.c:
    y[m][n] = x[m][n] * (1 / sqrt(mean_n(x^2) + 1e-6)) * w[n].
    Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(M+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1];
    const ak_i64 m = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M)
        return;
    const double *xr = AK_IN (a, 0) + m * N, *w = AK_IN (a, 1);
    double *yr = AK_OUT (a, 0) + m * N;
    double ss = 0;
    for (ak_i64 n = 0; n < N; n++)
        ss += xr[n] * xr[n];
    double inv = 1.0 / sqrt (ss / (double) N + 1e-6);
    for (ak_i64 n = 0; n < N; n++)
        yr[n] = xr[n] * inv * w[n];
}
