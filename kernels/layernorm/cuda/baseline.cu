/*  layernorm baseline (cuda): the textbook kernel.  One block of 128
    threads per row; each thread strides over the row; the sum, then the
    sum of squared deviations from the mean, are reduced through shared
    memory by halving (fixed order: deterministic); float arithmetic.
    y = (x - mean) / sqrt(var + 1e-5) * gamma + beta.
    Launch: grid [batch], block [128]. */
#define S_THREADS 128

__device__ float s_block_sum (float v, float *red)
{
    const int t = threadIdx.x;
    red[t] = v;
    __syncthreads ();
    for (int s = S_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads ();
    }
    v = red[0];
    __syncthreads ();          /* red is reused by the next reduction */
    return v;
}

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[S_THREADS];
    const ak_i64 N = a.dims[1];
    const ak_i64 r = blockIdx.x;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * N, *gamma = AK_IN (a, 1), *beta = AK_IN (a, 2);
    ak_t *y = AK_OUT (a, 0) + r * N;

    float sum = 0.0f;
    for (ak_i64 n = t; n < N; n += S_THREADS)
        sum += ak_to_acc (x[n]);
    const float mean = s_block_sum (sum, red) / (float) N;
    float sq = 0.0f;
    for (ak_i64 n = t; n < N; n += S_THREADS) {
        const float d = ak_to_acc (x[n]) - mean;
        sq += d * d;
    }
    const float rstd = 1.0f / sqrtf (s_block_sum (sq, red) / (float) N + 1e-5f);
    for (ak_i64 n = t; n < N; n += S_THREADS)
        y[n] = ak_from_acc ((ak_to_acc (x[n]) - mean) * rstd * ak_to_acc (gamma[n]) + ak_to_acc (beta[n]));
}
