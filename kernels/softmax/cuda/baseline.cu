/*  softmax baseline (cuda): the textbook kernel.  One block of 128 threads
    per row; each thread strides over the row, then the row maximum and the
    sum of exponentials are reduced through shared memory by halving (fixed
    order: deterministic); float arithmetic.
    Launch: grid [rows], block [128]. */
#define S_THREADS 128

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[S_THREADS];
    const ak_i64 cols = a.dims[1];
    const ak_i64 r = blockIdx.x;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * cols;
    ak_t *y = AK_OUT (a, 0) + r * cols;

    float m = __int_as_float (0xff800000);          /* -inf */
    for (ak_i64 c = t; c < cols; c += S_THREADS)
        m = fmaxf (m, ak_to_acc (x[c]));
    red[t] = m;
    __syncthreads ();
    for (int s = S_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] = fmaxf (red[t], red[t + s]);
        __syncthreads ();
    }
    m = red[0];
    __syncthreads ();

    float sum = 0.0f;
    for (ak_i64 c = t; c < cols; c += S_THREADS)
        sum += expf (ak_to_acc (x[c]) - m);
    red[t] = sum;
    __syncthreads ();
    for (int s = S_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads ();
    }
    sum = red[0];

    for (ak_i64 c = t; c < cols; c += S_THREADS)
        y[c] = ak_from_acc (expf (ak_to_acc (x[c]) - m) / sum);
}
