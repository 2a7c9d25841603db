/*  scale_bias baseline (host): the plain double loop in float. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t rows = a->dims[0], cols = a->dims[1];
    const float *x = AK_IN (a, 0), *scale = AK_IN (a, 1), *bias = AK_IN (a, 2);
    float *y = AK_OUT (a, 0);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = x[r * cols + c] * scale[c] + bias[c];
}
