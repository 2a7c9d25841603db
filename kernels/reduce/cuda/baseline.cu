/*  reduce baseline (cuda): the textbook kernel.  One block of 128 threads
    per row; each thread strides over the row, the partial sums are reduced
    through shared memory by halving (fixed order: deterministic); float
    arithmetic.  sum[m] = sum_n x[m][n].
    Launch: grid [M], block [128]. */
#define S_THREADS 128

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[S_THREADS];
    const ak_i64 N = a.dims[1];
    const ak_i64 m = blockIdx.x;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + m * N;

    float s = 0.0f;
    for (ak_i64 n = t; n < N; n += S_THREADS)
        s += ak_to_acc (x[n]);
    red[t] = s;
    __syncthreads ();
    for (int h = S_THREADS / 2; h > 0; h >>= 1) {
        if (t < h)
            red[t] += red[t + h];
        __syncthreads ();
    }
    if (t == 0)
        AK_OUT (a, 0)[m] = ak_from_acc (red[0]);
}
