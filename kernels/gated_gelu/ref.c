/*  gated_gelu reference: the float64 oracle.  A gated MLP's activation on
    the packed output of its fused gate/up projection, x[M][2N] (vLLM's
    gelu_tanh_and_mul / silu_and_mul layout: the first N columns are the
    gate, the last N the up projection):
      y[m][n] = act(x[m][n]) * x[m][N + n]
      act = 1: gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
               (GeGLU: Gemma, the pi0.5 VLM and action expert)
      act = 2: silu(a) = a / (1 + exp(-a))   (SwiGLU: Llama, Mistral)
    The spec's x count is 0 for any other act, so no other value loads. */
static double s_act (double v, int64_t act)
{
    if (act == 1)
        return 0.5 * v * (1.0 + tanh (0.7978845608028654 * (v + 0.044715 * v * v * v)));
    return v / (1.0 + exp (-v));
}

void ak_reference (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1], act = a->dims[2];
    const ak_t *x = AK_IN (a, 0);
    ak_t *y = AK_OUT (a, 0);

    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++)
            y[m * N + n] = s_act (x[m * 2 * N + n], act) * x[m * 2 * N + N + n];
}
