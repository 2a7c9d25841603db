/*  matmul baseline (cuda): one thread per output element, the dot product
    straight from global memory.  C[M][N] = A[M][K] * B[K][N], row-major,
    float accumulation.
    Launch: grid [(N+15)/16, (M+15)/16], block [16, 16]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_i64 j = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    const ak_i64 i = (ak_i64) blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N)
        return;
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    ak_acc_t sum = 0.0f;
    for (ak_i64 k = 0; k < K; k++)
        sum += ak_to_acc (A[i * K + k]) * ak_to_acc (B[k * N + j]);
    C[i * N + j] = ak_from_acc (sum);
}
