/*  softmax reference: the float64 oracle.  y[r][c] = exp(x[r][c] - max_r) / sum_r,
    subtracting the row maximum so that no input scale overflows. */
void ak_reference (const ak_args_t *a)
{
    const int64_t rows = a->dims[0], cols = a->dims[1];
    const ak_t *x = AK_IN (a, 0);
    ak_t *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < rows; r++) {
        const ak_t *xr = x + r * cols;
        ak_t *yr = y + r * cols;
        ak_t m = xr[0];
        for (int64_t c = 1; c < cols; c++)
            if (xr[c] > m)
                m = xr[c];
        ak_t sum = 0;
        for (int64_t c = 0; c < cols; c++)
            sum += exp (xr[c] - m);
        for (int64_t c = 0; c < cols; c++)
            yr[c] = exp (xr[c] - m) / sum;
    }
}
