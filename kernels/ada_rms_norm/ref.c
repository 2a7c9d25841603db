/*  ada_rms_norm reference: the float64 oracle.  Adaptive RMSNorm, as the
    action expert of pi0.5 conditions on the flow-matching time:
    y[b][t][n] = x[b][t][n] / sqrt(mean_n(x[b][t][n]^2) + eps)
                 * (1 + scale[b][n]) + shift[b][n],   eps = 1e-6,
    scale and shift one vector per batch row, shared by its T tokens. */
void ak_reference (const ak_args_t *a)
{
    const int64_t B = a->dims[0], T = a->dims[1], N = a->dims[2];
    const ak_t *x = AK_IN (a, 0), *scale = AK_IN (a, 1), *shift = AK_IN (a, 2);
    ak_t *y = AK_OUT (a, 0);

    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const ak_t *xr = x + (b * T + t) * N, *sc = scale + b * N, *sh = shift + b * N;
            ak_t *yr = y + (b * T + t) * N;
            ak_t ss = 0;
            for (int64_t n = 0; n < N; n++)
                ss += xr[n] * xr[n];
            ak_t inv = 1.0 / sqrt (ss / (ak_t) N + 1e-6);
            for (int64_t n = 0; n < N; n++)
                yr[n] = xr[n] * inv * (1.0 + sc[n]) + sh[n];
        }
}
