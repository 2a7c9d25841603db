/*  matmul device reference (reference_cuda): the float64 oracle on the
    GPU, a block a 64x64 tile of C (ak_ref_gemm64, kernels/ak_blocks_cuda.h:
    each element's dot product in k order as ref.c, through shared memory).
    C[M][N] = A[M][K] * B[K][N], row-major.  Built with -DAK_REFERENCE:
    ak_t is double.  A launch with another block size writes nothing (the
    gates then report the output unwritten).
    Launch: grid [(N+63)/64, (M+63)/64], block [256]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    if (blockDim.x != 256 || blockDim.y != 1 || blockDim.z != 1)
        return;
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_i64 r0 = (ak_i64) blockIdx.y * 64, c0 = (ak_i64) blockIdx.x * 64;
    const double *const B[1] = { AK_IN (a, 1) };
    double acc[1][4][4];
    ak_ref_gemm64<1> (AK_IN (a, 0), K, B, N, M, N, K, r0, c0, acc);
    ak_ref_store64 (AK_OUT (a, 0), N, M, N, r0, c0, acc[0]);
}
