/*  scale_bias candidate (host): the column loop unrolled UNROLL times
    with the row pointers hoisted, so the compiler keeps UNROLL independent
    multiply-adds in flight.  No fused multiply-add is asked for: the
    result must round like the baseline's x * s + b. */
#ifndef UNROLL
#define UNROLL 4
#endif

void ak_kernel (const ak_args_t *a)
{
    const int64_t rows = a->dims[0], cols = a->dims[1];
    const int64_t body = cols - cols % UNROLL;
    const float *scale = AK_IN (a, 1), *bias = AK_IN (a, 2);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = AK_IN (a, 0) + r * cols;
        float *y = AK_OUT (a, 0) + r * cols;
        int64_t c = 0;
        for (; c < body; c += UNROLL)
            for (int k = 0; k < UNROLL; k++)
                y[c + k] = x[c + k] * scale[c + k] + bias[c + k];
        for (; c < cols; c++)
            y[c] = x[c] * scale[c] + bias[c];
    }
}
