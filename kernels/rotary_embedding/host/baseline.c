/*  rotary_embedding baseline (host): the definition row by row, the angle
    s * 10000^(-2i/D) and its cosine and sine in double (in float the
    angle alone would be off by up to s * 2^-24 radians), the rotation in
    float.  Odd D: the last element passes through (see ref.c). */
void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], H = a->dims[1], S = a->dims[2], D = a->dims[3];
    const int64_t half = D / 2;
    const float *x = AK_IN (a, 0);
    float *y = AK_OUT (a, 0);

    for (int64_t row = 0; row < B * H * S; row++) {
        const int64_t s = row % S;
        const float *xr = x + row * D;
        float *yr = y + row * D;
        for (int64_t i = 0; i < half; i++) {
            const double ang = (double) s * pow (10000.0, -2.0 * (double) i / (double) D);
            const float c = (float) cos (ang), sn = (float) sin (ang);
            yr[i] = xr[i] * c - xr[i + half] * sn;
            yr[i + half] = xr[i + half] * c + xr[i] * sn;
        }
        if (D % 2)
            yr[D - 1] = xr[D - 1];
    }
}
