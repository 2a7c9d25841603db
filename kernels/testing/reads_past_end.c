/*  Planted for tests: a softmax whose row maximum also reads the element
    one past the end of each row, the last row's past the end of the
    input (an unmasked vector tail).  The gates' guard bytes are NaN, so
    the last row comes out NaN (the guard's own bytes, all 0xFF, which the
    gates read as the output's poison: never written). */
void ak_kernel (const ak_args_t *a)
{
    const int64_t rows = a->dims[0], cols = a->dims[1];
    const float *x = AK_IN (a, 0);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = xr[0];
        for (int64_t c = 1; c <= cols; c++)
            m = xr[c] > m || xr[c] != xr[c] ? xr[c] : m;
        float sum = 0.0f;
        for (int64_t c = 0; c < cols; c++) {
            yr[c] = expf (xr[c] - m);
            sum += yr[c];
        }
        for (int64_t c = 0; c < cols; c++)
            yr[c] /= sum;
    }
}
