/*  rotary_embedding device reference (reference_cuda): the float64 oracle
    on the GPU, one thread per row (b, h, s), ref.c's steps:
    y[i] = x[i] cos a_i - x[i+D/2] sin a_i, y[i+D/2] = x[i+D/2] cos a_i + x[i] sin a_i,
    a_i = s * 10000^(-2i/D); odd D: the last element passes through.
    Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(B*H*S+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], H = a.dims[1], S = a.dims[2], D = a.dims[3];
    const ak_i64 row = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= B * H * S)
        return;
    const ak_i64 s = row % S, half = D / 2;
    const double *xr = AK_IN (a, 0) + row * D;
    double *yr = AK_OUT (a, 0) + row * D;
    for (ak_i64 i = 0; i < half; i++) {
        const double ang = (double) s * pow (10000.0, -2.0 * (double) i / (double) D);
        const double c = cos (ang), sn = sin (ang);
        yr[i] = xr[i] * c - xr[i + half] * sn;
        yr[i + half] = xr[i + half] * c + xr[i] * sn;
    }
    if (D % 2)
        yr[D - 1] = xr[D - 1];
}
