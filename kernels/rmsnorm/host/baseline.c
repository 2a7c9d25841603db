/*  rmsnorm baseline (host): one running sum of squares per row, in float.
    y = x / sqrt(mean(x^2) + 1e-6) * w */
void ak_kernel (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1];
    const float *x = AK_IN (a, 0), *w = AK_IN (a, 1);
    float *y = AK_OUT (a, 0);

    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float ss = 0.0f;
        for (int64_t n = 0; n < N; n++)
            ss += xr[n] * xr[n];
        float inv = 1.0f / sqrtf (ss / (float) N + 1e-6f);
        for (int64_t n = 0; n < N; n++)
            yr[n] = xr[n] * inv * w[n];
    }
}
