/*  ada_rms_norm baseline (host): one running sum of squares per row, in
    float.  y = x / sqrt(mean(x^2) + 1e-6) * (1 + scale[b]) + shift[b]. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], T = a->dims[1], N = a->dims[2];
    const float *x = AK_IN (a, 0), *scale = AK_IN (a, 1), *shift = AK_IN (a, 2);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < B * T; r++) {
        const float *xr = x + r * N, *sc = scale + (r / T) * N, *sh = shift + (r / T) * N;
        float *yr = y + r * N;
        float ss = 0.0f;
        for (int64_t n = 0; n < N; n++)
            ss += xr[n] * xr[n];
        float inv = 1.0f / sqrtf (ss / (float) N + 1e-6f);
        for (int64_t n = 0; n < N; n++)
            yr[n] = xr[n] * inv * (1.0f + sc[n]) + sh[n];
    }
}
