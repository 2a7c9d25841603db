/*  rmsnorm reference: the float64 oracle.
    y[m][n] = x[m][n] / sqrt(mean_n(x[m][n]^2) + eps) * w[n], eps = 1e-6. */
void ak_reference (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1];
    const ak_t *x = AK_IN (a, 0), *w = AK_IN (a, 1);
    ak_t *y = AK_OUT (a, 0);

    for (int64_t m = 0; m < M; m++) {
        const ak_t *xr = x + m * N;
        ak_t *yr = y + m * N;
        ak_t ss = 0;
        for (int64_t n = 0; n < N; n++)
            ss += xr[n] * xr[n];
        ak_t inv = 1.0 / sqrt (ss / (ak_t) N + 1e-6);
        for (int64_t n = 0; n < N; n++)
            yr[n] = xr[n] * inv * w[n];
    }
}
