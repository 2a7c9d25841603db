/*  ada_rms_norm device reference (reference_cuda): the float64 oracle on
    the GPU, one thread per row (token), as ref.c:
    y = x * (1 / sqrt(mean(x^2) + 1e-6)) * (1 + scale[b]) + shift[b].
    Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(B*T+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], T = a.dims[1], N = a.dims[2];
    const ak_i64 r = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B * T)
        return;
    const double *xr = AK_IN (a, 0) + r * N;
    const double *sc = AK_IN (a, 1) + (r / T) * N, *sh = AK_IN (a, 2) + (r / T) * N;
    double *yr = AK_OUT (a, 0) + r * N;
    double ss = 0;
    for (ak_i64 n = 0; n < N; n++)
        ss += xr[n] * xr[n];
    double inv = 1.0 / sqrt (ss / (double) N + 1e-6);
    for (ak_i64 n = 0; n < N; n++)
        yr[n] = xr[n] * inv * (1.0 + sc[n]) + sh[n];
}
