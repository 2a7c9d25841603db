/*  rotate_qk device reference (reference_cuda): the float64 oracle on the
    GPU, one thread per row (token, head): the q heads of a token, then its
    k heads, ref.c's steps (half split or interleaved pairs, angles
    p * theta^(-2i/D), p = floor(clamp(pos, 0, 2^20 - 1)); odd D: the last
    element passes through).  Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(B*S*(HQ+HK)+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], S = a.dims[1], HQ = a.dims[2], HK = a.dims[3], D = a.dims[4];
    const ak_i64 layout = a.dims[5];
    const double theta = (double) a.dims[6];
    const ak_i64 row = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= B * S * (HQ + HK))
        return;
    const ak_i64 t = row / (HQ + HK), h = row % (HQ + HK);
    const double *x = h < HQ ? AK_IN (a, 0) + (t * HQ + h) * D : AK_IN (a, 1) + (t * HK + h - HQ) * D;
    double *y = h < HQ ? AK_OUT (a, 0) + (t * HQ + h) * D : AK_OUT (a, 1) + (t * HK + h - HQ) * D;
    const double p = floor (fmin (fmax (AK_IN (a, 2)[t], 0.0), 1048575.0));
    const ak_i64 half = D / 2;
    for (ak_i64 i = 0; i < half; i++) {
        const ak_i64 ia = layout == 2 ? 2 * i : i, ib = layout == 2 ? 2 * i + 1 : i + half;
        const double ang = p * pow (theta, -2.0 * (double) i / (double) D);
        const double c = cos (ang), s = sin (ang);
        const double xa = x[ia], xb = x[ib];
        y[ia] = xa * c - xb * s;
        y[ib] = xb * c + xa * s;
    }
    if (D % 2)
        y[D - 1] = x[D - 1];
}
