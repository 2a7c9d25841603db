/*  layernorm baseline (host): the three loops of the definition, in float.
    y = (x - mean) / sqrt(var + 1e-5) * gamma + beta */
void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], N = a->dims[1];
    const float *x = AK_IN (a, 0), *gamma = AK_IN (a, 1), *beta = AK_IN (a, 2);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < B; r++) {
        const float *xr = x + r * N;
        float *yr = y + r * N;
        float sum = 0.0f, sq = 0.0f;
        for (int64_t n = 0; n < N; n++)
            sum += xr[n];
        const float mean = sum / (float) N;
        for (int64_t n = 0; n < N; n++)
            sq += (xr[n] - mean) * (xr[n] - mean);
        const float rstd = 1.0f / sqrtf (sq / (float) N + 1e-5f);
        for (int64_t n = 0; n < N; n++)
            yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
    }
}
