/*  ada_rms_norm baseline (cuda): the textbook kernel.  One block of 128
    threads per row (token); each thread strides over the row, the sum of
    squares is reduced through shared memory by halving (fixed order:
    deterministic); float arithmetic.
    y = x / sqrt(mean(x^2) + 1e-6) * (1 + scale[b]) + shift[b].
    Launch: grid [B*T], block [128]. */
#define S_THREADS 128

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[S_THREADS];
    const ak_i64 T = a.dims[1], N = a.dims[2];
    const ak_i64 r = blockIdx.x;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * N;
    const ak_t *sc = AK_IN (a, 1) + (r / T) * N, *sh = AK_IN (a, 2) + (r / T) * N;
    ak_t *y = AK_OUT (a, 0) + r * N;

    float ss = 0.0f;
    for (ak_i64 n = t; n < N; n += S_THREADS) {
        const float v = ak_to_acc (x[n]);
        ss += v * v;
    }
    red[t] = ss;
    __syncthreads ();
    for (int s = S_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads ();
    }
    const float inv = 1.0f / sqrtf (red[0] / (float) N + 1e-6f);
    for (ak_i64 n = t; n < N; n += S_THREADS)
        y[n] = ak_from_acc (ak_to_acc (x[n]) * inv * (1.0f + ak_to_acc (sc[n])) + ak_to_acc (sh[n]));
}
