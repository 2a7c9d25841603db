/*  gated_gelu baseline (cuda): the textbook elementwise kernel, one
    thread per output, scalar loads, the definition in float with the
    accurate tanhf / expf.
    y[m][n] = act(x[m][n]) * x[m][N + n], act 1 gelu_tanh, 2 silu.
    Launch: grid [(M*N+255)/256], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1], act = a.dims[2];
    const ak_i64 i = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * N)
        return;
    const ak_i64 m = i / N, n = i % N;
    const ak_t *x = AK_IN (a, 0) + m * 2 * N;
    const float g = ak_to_acc (x[n]), u = ak_to_acc (x[N + n]);
    const float v = act == 1 ? 0.5f * g * (1.0f + tanhf (0.797884561f * (g + 0.044715f * g * g * g)))
                             : g / (1.0f + expf (-g));
    AK_OUT (a, 0)[i] = ak_from_acc (v * u);
}
