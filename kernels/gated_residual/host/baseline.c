/*  gated_residual baseline (host): the definition, row by row, in float.
    y = x + gate * h; gate [B][N] (G = 1) or [B][T][N] (G = 2). */
void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], T = a->dims[1], N = a->dims[2], G = a->dims[3];
    const float *x = AK_IN (a, 0), *gate = AK_IN (a, 1), *h = AK_IN (a, 2);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < B * T; r++) {
        const float *g = gate + (G == 1 ? r / T : r) * N;
        for (int64_t n = 0; n < N; n++)
            y[r * N + n] = x[r * N + n] + g[n] * h[r * N + n];
    }
}
