/*  Planted for tests: a softmax that is subtly wrong.  It forgets the last
    column when it sums a row, so every output is a little too large (by
    about 1/cols) but finite, written and deterministic: only the accuracy
    gates can catch it. */
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
            if (c + 1 < cols || cols == 1)
                sum += yr[c];
        }
        for (int64_t c = 0; c < cols; c++)
            yr[c] /= sum;
    }
}
