/*  layernorm device reference (reference_cuda): the float64 oracle on the
    GPU, one thread per row, ref.c's steps in the same order:
    y = (x - mean) / sqrt(var + 1e-5) * gamma + beta.
    Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(batch+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], N = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B)
        return;
    const double *xr = AK_IN (a, 0) + r * N, *gamma = AK_IN (a, 1), *beta = AK_IN (a, 2);
    double *yr = AK_OUT (a, 0) + r * N;
    double sum = 0, sq = 0;
    for (ak_i64 n = 0; n < N; n++)
        sum += xr[n];
    const double mean = sum / (double) N;
    for (ak_i64 n = 0; n < N; n++)
        sq += (xr[n] - mean) * (xr[n] - mean);
    const double rstd = 1.0 / sqrt (sq / (double) N + 1e-5);
    for (ak_i64 n = 0; n < N; n++)
        yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
}
