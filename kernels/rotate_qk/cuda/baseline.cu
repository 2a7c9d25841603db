/*  rotate_qk baseline (cuda): one thread per rotated pair (row, i), rows
    being each token's q heads then its k heads; the angle
    p * theta^(-2i/D) and its cosine and sine in double (in float the angle
    alone would be off by up to p * 2^-24 radians), the rotation in float.
    Thread i == D/2 of a row copies an odd D's last element (see ref.c).
    Launch: grid [(B*S*(HQ+HK)*(D/2+1)+255)/256], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], S = a.dims[1], HQ = a.dims[2], HK = a.dims[3], D = a.dims[4];
    const ak_i64 layout = a.dims[5];
    const double theta = (double) a.dims[6];
    const ak_i64 half = D / 2, per_row = half + 1, H = HQ + HK;
    const ak_i64 g = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= B * S * H * per_row)
        return;
    const ak_i64 row = g / per_row, i = g % per_row, t = row / H, h = row % H;
    const ak_t *x = h < HQ ? AK_IN (a, 0) + (t * HQ + h) * D : AK_IN (a, 1) + (t * HK + h - HQ) * D;
    ak_t *y = h < HQ ? AK_OUT (a, 0) + (t * HQ + h) * D : AK_OUT (a, 1) + (t * HK + h - HQ) * D;
    if (i == half) {
        if (D % 2)
            y[D - 1] = x[D - 1];
        return;
    }
    const float pf = fminf (fmaxf (ak_to_acc (AK_IN (a, 2)[t]), 0.0f), 1048575.0f);
    const double ang = (double) floorf (pf) * pow (theta, -2.0 * (double) i / (double) D);
    const float c = (float) cos (ang), sn = (float) sin (ang);
    const ak_i64 ia = layout == 2 ? 2 * i : i, ib = layout == 2 ? 2 * i + 1 : i + half;
    const float xa = ak_to_acc (x[ia]), xb = ak_to_acc (x[ib]);
    y[ia] = ak_from_acc (xa * c - xb * sn);
    y[ib] = ak_from_acc (xb * c + xa * sn);
}
