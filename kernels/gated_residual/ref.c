/*  gated_residual reference: the float64 oracle.
    y[b][t][n] = x[b][t][n] + g * h[b][t][n], with
      G = 1: g = gate[b][n]      (one gate vector per batch row, shared by
                                  its T tokens: adaLN-Zero, pi0.5's action
                                  expert)
      G = 2: g = gate[b][t][n]   (a gate per element).
    The spec's gate count is 0 for any other G, so no other value loads. */
void ak_reference (const ak_args_t *a)
{
    const int64_t B = a->dims[0], T = a->dims[1], N = a->dims[2], G = a->dims[3];
    const ak_t *x = AK_IN (a, 0), *gate = AK_IN (a, 1), *h = AK_IN (a, 2);
    ak_t *y = AK_OUT (a, 0);

    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t r = b * T + t;
            const ak_t *g = gate + (G == 1 ? b : r) * N;
            for (int64_t n = 0; n < N; n++)
                y[r * N + n] = x[r * N + n] + g[n] * h[r * N + n];
        }
}
