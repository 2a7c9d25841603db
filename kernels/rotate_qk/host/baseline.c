/*  rotate_qk baseline (host): the definition token by token (see ref.c),
    the angle p * theta^(-2i/D) and its cosine and sine in double (in float
    the angle alone would be off by up to p * 2^-24 radians), the rotation
    in float.  Odd D: the last element passes through. */
static void s_rotate (const float *x, float *y, int64_t D, int64_t layout, int64_t p, double theta)
{
    const int64_t half = D / 2;
    for (int64_t i = 0; i < half; i++) {
        const int64_t ia = layout == 2 ? 2 * i : i, ib = layout == 2 ? 2 * i + 1 : i + half;
        const double ang = (double) p * pow (theta, -2.0 * (double) i / (double) D);
        const float c = (float) cos (ang), s = (float) sin (ang);
        const float xa = x[ia], xb = x[ib];
        y[ia] = xa * c - xb * s;
        y[ib] = xb * c + xa * s;
    }
    if (D % 2)
        y[D - 1] = x[D - 1];
}

void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], S = a->dims[1], HQ = a->dims[2], HK = a->dims[3], D = a->dims[4];
    const int64_t layout = a->dims[5];
    const double theta = (double) a->dims[6];
    const float *q = AK_IN (a, 0), *k = AK_IN (a, 1), *pos = AK_IN (a, 2);
    float *qo = AK_OUT (a, 0), *ko = AK_OUT (a, 1);

    for (int64_t t = 0; t < B * S; t++) {
        const int64_t p = (int64_t) floorf (fminf (fmaxf (pos[t], 0.0f), 1048575.0f));
        for (int64_t h = 0; h < HQ; h++)
            s_rotate (q + (t * HQ + h) * D, qo + (t * HQ + h) * D, D, layout, p, theta);
        for (int64_t h = 0; h < HK; h++)
            s_rotate (k + (t * HK + h) * D, ko + (t * HK + h) * D, D, layout, p, theta);
    }
}
