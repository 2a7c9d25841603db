/*  Planted for tests: a correct softmax that also stores one float three
    elements before the start of its output (a negative index that is not
    clamped).  Its outputs match; only the guard regions can catch it. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t rows = a->dims[0], cols = a->dims[1];
    const float *x = AK_IN (a, 0);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = xr[0];
        for (int64_t c = 1; c < cols; c++)
            if (xr[c] > m)
                m = xr[c];
        float sum = 0.0f;
        for (int64_t c = 0; c < cols; c++) {
            yr[c] = expf (xr[c] - m);
            sum += yr[c];
        }
        for (int64_t c = 0; c < cols; c++)
            yr[c] /= sum;
    }
    y[-3] = 0.5f;
}
