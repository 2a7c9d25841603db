/*  matmul device reference (reference_cuda): the float64 oracle on the
    GPU, one thread per output, the dot product in k order as ref.c.
    C[M][N] = A[M][K] * B[K][N], row-major.  Built with -DAK_REFERENCE:
    ak_t is double.
    Launch: grid [(N+15)/16, (M+15)/16], block [16, 16]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_i64 j = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    const ak_i64 i = (ak_i64) blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N)
        return;
    const double *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    double sum = 0;
    for (ak_i64 k = 0; k < K; k++)
        sum += A[i * K + k] * B[k * N + j];
    AK_OUT (a, 0)[i * N + j] = sum;
}
