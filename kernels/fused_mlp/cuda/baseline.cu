/*  fused_mlp baseline (cuda): a block per row.  Its threads compute the
    row of h (gate and up dot products in float, h = silu(g) * u, stored in
    the element type), then, after __syncthreads, the row of y from that
    stored h.  Every block reads all three weight matrices: plain and slow.
    Launch: grid [batch], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 dim = a.dims[1], hidden = a.dims[2];
    const ak_i64 r = blockIdx.x;
    const ak_t *X = AK_IN (a, 0) + r * dim, *Wg = AK_IN (a, 1), *Wu = AK_IN (a, 2), *Wd = AK_IN (a, 3);
    ak_t *y = AK_OUT (a, 0) + r * dim, *h = AK_OUT (a, 1) + r * hidden;

    for (ak_i64 j = threadIdx.x; j < hidden; j += blockDim.x) {
        float g = 0.0f, u = 0.0f;
        for (ak_i64 k = 0; k < dim; k++) {
            const float xk = ak_to_acc (X[k]);
            g += xk * ak_to_acc (Wg[k * hidden + j]);
            u += xk * ak_to_acc (Wu[k * hidden + j]);
        }
        h[j] = ak_from_acc (g / (1.0f + expf (-g)) * u);
    }
    __syncthreads ();
    for (ak_i64 d = threadIdx.x; d < dim; d += blockDim.x) {
        float acc = 0.0f;
        for (ak_i64 j = 0; j < hidden; j++)
            acc += ak_to_acc (h[j]) * ak_to_acc (Wd[j * dim + d]);
        y[d] = ak_from_acc (acc);
    }
}
