/*  Planted for tests: a correct softmax that scribbles over its input
    afterwards (the last element set to 0), as a kernel using its input
    for scratch would.  Its outputs match; only the read-back of the
    inputs can catch it. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t rows = a->dims[0], cols = a->dims[1];
    float *x = (float *) AK_IN (a, 0);
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
    x[rows * cols - 1] = x[rows * cols - 1] == 0.0f ? 1.0f : 0.0f;
}
