/*  gated_residual device reference (reference_cuda): the float64 oracle
    on the GPU, one thread per element, as ref.c:
    y[r][n] = x[r][n] + g[n] * h[r][n], r = b*T + t, g = gate[b] (G = 1) or
    gate[r] (G = 2).  Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(B*T*N+255)/256], block [256]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 T = a.dims[1], N = a.dims[2], G = a.dims[3];
    const ak_i64 total = a.dims[0] * T * N;
    const ak_i64 i = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    const ak_i64 r = i / N, n = i % N;
    const double *x = AK_IN (a, 0), *gate = AK_IN (a, 1), *h = AK_IN (a, 2);
    const double g = gate[(G == 1 ? r / T : r) * N + n];
    AK_OUT (a, 0)[i] = x[i] + g * h[i];
}
