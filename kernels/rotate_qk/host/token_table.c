/*  rotate_qk candidate (host): the cosines and sines of a token's angles
    once for all its heads (the baseline computes them again for every
    head of q and of k: HQ + HK times).  The same arithmetic as the
    baseline (the angle p * theta^(-2i/D) and its cosine and sine in
    double, the rotation in float), so the same bits.  Odd D: the last
    element passes through.

    CHUNK  rotation pairs whose cosines and sines are kept on the stack at
           a time (a row of D/2 pairs goes in CHUNK-pair pieces) */
#ifndef CHUNK
#define CHUNK 64
#endif

void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], S = a->dims[1], HQ = a->dims[2], HK = a->dims[3], D = a->dims[4];
    const int64_t layout = a->dims[5], half = D / 2;
    const double theta = (double) a->dims[6];
    const float *q = AK_IN (a, 0), *k = AK_IN (a, 1), *pos = AK_IN (a, 2);
    float *qo = AK_OUT (a, 0), *ko = AK_OUT (a, 1);

    for (int64_t t = 0; t < B * S; t++) {
        const int64_t p = (int64_t) floorf (fminf (fmaxf (pos[t], 0.0f), 1048575.0f));
        for (int64_t i0 = 0; i0 < half; i0 += CHUNK) {
            const int64_t n = half - i0 < CHUNK ? half - i0 : CHUNK;
            float c[CHUNK], s[CHUNK];
            for (int64_t i = 0; i < n; i++) {
                const double ang = (double) p * pow (theta, -2.0 * (double) (i0 + i) / (double) D);
                c[i] = (float) cos (ang);
                s[i] = (float) sin (ang);
            }
            for (int64_t h = 0; h < HQ + HK; h++) {
                const float *x = h < HQ ? q + (t * HQ + h) * D : k + (t * HK + h - HQ) * D;
                float *y = h < HQ ? qo + (t * HQ + h) * D : ko + (t * HK + h - HQ) * D;
                for (int64_t i = 0; i < n; i++) {
                    const int64_t ia = layout == 2 ? 2 * (i0 + i) : i0 + i;
                    const int64_t ib = layout == 2 ? 2 * (i0 + i) + 1 : i0 + i + half;
                    const float xa = x[ia], xb = x[ib];
                    y[ia] = xa * c[i] - xb * s[i];
                    y[ib] = xb * c[i] + xa * s[i];
                }
            }
        }
        if (D % 2) {
            for (int64_t h = 0; h < HQ; h++)
                qo[(t * HQ + h) * D + D - 1] = q[(t * HQ + h) * D + D - 1];
            for (int64_t h = 0; h < HK; h++)
                ko[(t * HK + h) * D + D - 1] = k[(t * HK + h) * D + D - 1];
        }
    }
}
