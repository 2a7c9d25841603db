/*  rmsnorm baseline (cuda): the textbook kernel.  One block of 128 threads
    per row; each thread strides over the row, the sum of squares is reduced
    through shared memory by halving (fixed order: deterministic); float
    arithmetic.  y = x / sqrt(mean(x^2) + 1e-6) * w.
    Launch: grid [M], block [128]. */
#define S_THREADS 128

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[S_THREADS];
    const ak_i64 N = a.dims[1];
    const ak_i64 m = blockIdx.x;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + m * N, *w = AK_IN (a, 1);
    ak_t *y = AK_OUT (a, 0) + m * N;

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
        y[n] = ak_from_acc (ak_to_acc (x[n]) * inv * ak_to_acc (w[n]));
}
