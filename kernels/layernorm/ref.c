/*  layernorm reference: the float64 oracle, two passes over each row (the
    mean, then the mean of squared deviations: no cancellation).
    y[r][n] = (x[r][n] - mean_r) / sqrt(var_r + 1e-5) * gamma[n] + beta[n],
    var_r the biased (population) variance, eps = 1e-5 as torch's default. */
void ak_reference (const ak_args_t *a)
{
    const int64_t B = a->dims[0], N = a->dims[1];
    const ak_t *x = AK_IN (a, 0), *gamma = AK_IN (a, 1), *beta = AK_IN (a, 2);
    ak_t *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < B; r++) {
        const ak_t *xr = x + r * N;
        ak_t *yr = y + r * N;
        ak_t sum = 0, sq = 0;
        for (int64_t n = 0; n < N; n++)
            sum += xr[n];
        const ak_t mean = sum / (ak_t) N;
        for (int64_t n = 0; n < N; n++)
            sq += (xr[n] - mean) * (xr[n] - mean);
        const ak_t rstd = 1.0 / sqrt (sq / (ak_t) N + 1e-5);
        for (int64_t n = 0; n < N; n++)
            yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
    }
}
