/*  cross_entropy baseline (cuda): the textbook kernel, softmax's baseline
    without the output pass.  One block of 128 threads per row; the row
    maximum, then the sum of exp(x - max), are reduced through shared
    memory by halving (fixed order: deterministic); float arithmetic.
    loss[r] = (max - x[r][t_r]) + log(sum), t_r = (uint32) (r * 2654435761) % vocab.
    Launch: grid [batch], block [128]. */
#define S_THREADS 128

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[S_THREADS];
    const ak_i64 V = a.dims[1];
    const ak_i64 r = blockIdx.x;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * V;

    float m = __int_as_float (0xff800000);          /* -inf */
    for (ak_i64 v = t; v < V; v += S_THREADS)
        m = fmaxf (m, ak_to_acc (x[v]));
    red[t] = m;
    __syncthreads ();
    for (int h = S_THREADS / 2; h > 0; h >>= 1) {
        if (t < h)
            red[t] = fmaxf (red[t], red[t + h]);
        __syncthreads ();
    }
    m = red[0];
    __syncthreads ();

    float s = 0.0f;
    for (ak_i64 v = t; v < V; v += S_THREADS)
        s += expf (ak_to_acc (x[v]) - m);
    red[t] = s;
    __syncthreads ();
    for (int h = S_THREADS / 2; h > 0; h >>= 1) {
        if (t < h)
            red[t] += red[t + h];
        __syncthreads ();
    }
    if (t == 0) {
        const ak_u32 target = ((ak_u32) r * 2654435761u) % (ak_u32) V;
        AK_OUT (a, 0)[r] = ak_from_acc ((m - ak_to_acc (x[target])) + logf (red[0]));
    }
}
