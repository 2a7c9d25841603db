/*  gated_residual baseline (cuda): the textbook elementwise kernel, one
    thread per element, scalar loads, float arithmetic.
    y = x + g * h, g = gate[b][n] (G = 1) or gate[b][t][n] (G = 2).
    Launch: grid [(B*T*N+255)/256], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 T = a.dims[1], N = a.dims[2], G = a.dims[3];
    const ak_i64 total = a.dims[0] * T * N;
    const ak_i64 i = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    const ak_i64 r = i / N, n = i % N;
    const ak_t *x = AK_IN (a, 0), *gate = AK_IN (a, 1), *h = AK_IN (a, 2);
    const float g = ak_to_acc (gate[(G == 1 ? r / T : r) * N + n]);
    AK_OUT (a, 0)[i] = ak_from_acc (ak_to_acc (x[i]) + g * ak_to_acc (h[i]));
}
