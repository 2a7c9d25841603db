/*  fused_mlp baseline (host): per row, the gate and up dot products in
    float, h = silu(g) * u, then y = h Wd.  x [batch][dim], Wg and Wu
    [dim][hidden], Wd [hidden][dim]; outputs y [batch][dim], h [batch][hidden]. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t batch = a->dims[0], dim = a->dims[1], hidden = a->dims[2];
    const float *X = AK_IN (a, 0), *Wg = AK_IN (a, 1), *Wu = AK_IN (a, 2), *Wd = AK_IN (a, 3);
    float *Y = AK_OUT (a, 0), *Hh = AK_OUT (a, 1);

    for (int64_t r = 0; r < batch; r++) {
        float *h = Hh + r * hidden, *y = Y + r * dim;
        for (int64_t j = 0; j < hidden; j++) {
            float g = 0.0f, u = 0.0f;
            for (int64_t k = 0; k < dim; k++) {
                g += X[r * dim + k] * Wg[k * hidden + j];
                u += X[r * dim + k] * Wu[k * hidden + j];
            }
            h[j] = g / (1.0f + expf (-g)) * u;
        }
        for (int64_t d = 0; d < dim; d++)
            y[d] = 0.0f;
        for (int64_t j = 0; j < hidden; j++)
            for (int64_t d = 0; d < dim; d++)
                y[d] += h[j] * Wd[j * dim + d];
    }
}
