/*  rotary_embedding baseline (cuda): one thread per rotated pair
    (row, i), the angle s * 10000^(-2i/D) and its cosine and sine in double
    (in float the angle alone would be off by up to s * 2^-24 radians), the
    rotation in float.  Thread i == D/2 of a row copies an odd D's last
    element (see ref.c).
    Launch: grid [(B*H*S*(D/2+1)+255)/256], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], H = a.dims[1], S = a.dims[2], D = a.dims[3];
    const ak_i64 half = D / 2, per_row = half + 1;
    const ak_i64 g = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= B * H * S * per_row)
        return;
    const ak_i64 row = g / per_row, i = g % per_row, s = row % S;
    const ak_t *xr = AK_IN (a, 0) + row * D;
    ak_t *yr = AK_OUT (a, 0) + row * D;
    if (i == half) {
        if (D % 2)
            yr[D - 1] = xr[D - 1];
        return;
    }
    const double ang = (double) s * pow (10000.0, -2.0 * (double) i / (double) D);
    const float c = (float) cos (ang), sn = (float) sin (ang);
    const float x1 = ak_to_acc (xr[i]), x2 = ak_to_acc (xr[i + half]);
    yr[i] = ak_from_acc (x1 * c - x2 * sn);
    yr[i + half] = ak_from_acc (x2 * c + x1 * sn);
}
