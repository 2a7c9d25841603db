/*  gated_gelu device reference (reference_cuda): the float64 oracle on
    the GPU, one thread per output, as ref.c:
    y[m][n] = act(x[m][n]) * x[m][N + n], act 1 gelu_tanh, 2 silu.
    Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(M*N+255)/256], block [256]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1], act = a.dims[2];
    const ak_i64 i = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * N)
        return;
    const ak_i64 m = i / N, n = i % N;
    const double *x = AK_IN (a, 0) + m * 2 * N;
    const double v = x[n];
    const double g = act == 1 ? 0.5 * v * (1.0 + tanh (0.7978845608028654 * (v + 0.044715 * v * v * v)))
                              : v / (1.0 + exp (-v));
    AK_OUT (a, 0)[i] = g * x[N + n];
}
