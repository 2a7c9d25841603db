/*  gated_gelu baseline (host): the definition in float with libm.
    y[m][n] = act(x[m][n]) * x[m][N + n], act 1 gelu_tanh, 2 silu. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1], act = a->dims[2];
    const float *x = AK_IN (a, 0);
    float *y = AK_OUT (a, 0);

    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const float g = x[m * 2 * N + n], u = x[m * 2 * N + N + n];
            const float v = act == 1
                ? 0.5f * g * (1.0f + tanhf (0.797884561f * (g + 0.044715f * g * g * g)))
                : g / (1.0f + expf (-g));
            y[m * N + n] = v * u;
        }
}
