/*  reduce baseline (host): one running float sum per row.
    sum[m] = sum_n x[m][n] */
void ak_kernel (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1];
    const float *x = AK_IN (a, 0);
    float *sum = AK_OUT (a, 0);

    for (int64_t m = 0; m < M; m++) {
        float s = 0.0f;
        for (int64_t n = 0; n < N; n++)
            s += x[m * N + n];
        sum[m] = s;
    }
}
