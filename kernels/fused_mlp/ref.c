/*  fused_mlp reference: the float64 oracle of a gated (SwiGLU) MLP.
      h[r][j] = silu (x[r] . Wg[:, j]) * (x[r] . Wu[:, j])      silu(g) = g / (1 + e^-g)
      y[r][d] = h[r] . Wd[:, d]
    x [batch][dim], Wg and Wu [dim][hidden], Wd [hidden][dim], h [batch][hidden],
    y [batch][dim], all row-major.  h is an output too: the kernels keep the
    activation in device memory between the two products.

    The activation is defined in float32's range: an |h| beyond the largest
    float32 is +-infinity, as every kernel (which holds h in float32 or
    narrower) makes it.  Only the stability gate's near_max inputs get
    there (x1e18: h ~ 1e72, y ~ 1e90, beyond every kernel type); there the
    kernels and the oracle then agree on the infinities and NaNs instead of
    the oracle reporting finite values no kernel type can hold. */
#define S_FLT_MAX 3.4028234663852886e38

void ak_reference (const ak_args_t *a)
{
    const int64_t batch = a->dims[0], dim = a->dims[1], hidden = a->dims[2];
    const ak_t *X = AK_IN (a, 0), *Wg = AK_IN (a, 1), *Wu = AK_IN (a, 2), *Wd = AK_IN (a, 3);
    ak_t *Y = AK_OUT (a, 0), *Hh = AK_OUT (a, 1);

    for (int64_t r = 0; r < batch; r++) {
        ak_t *h = Hh + r * hidden, *y = Y + r * dim;
        for (int64_t j = 0; j < hidden; j++) {
            double g = 0, u = 0;
            for (int64_t k = 0; k < dim; k++) {
                g += X[r * dim + k] * Wg[k * hidden + j];
                u += X[r * dim + k] * Wu[k * hidden + j];
            }
            double v = g / (1.0 + exp (-g)) * u;
            if (v > S_FLT_MAX)
                v = INFINITY;
            else if (v < -S_FLT_MAX)
                v = -INFINITY;
            h[j] = v;
        }
        for (int64_t d = 0; d < dim; d++)
            y[d] = 0;
        for (int64_t j = 0; j < hidden; j++) {
            const ak_t hj = h[j];
            for (int64_t d = 0; d < dim; d++)
                y[d] += hj * Wd[j * dim + d];
        }
    }
}
