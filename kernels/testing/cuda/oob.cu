/*  Planted for tests (cuda, softmax ABI): writes far out of bounds.  The
    first thread stores 2^36 elements (256 GiB) past the end of the output,
    an address no allocation covers: the launch ends with the sticky error
    CUDA_ERROR_ILLEGAL_ADDRESS, which leaves the device context unusable.
    Launch: grid [(rows+127)/128], block [128]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 rows = a.dims[0], cols = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (r == 0)
        AK_OUT (a, 0)[rows * cols + ((ak_i64) 1 << 36)] = ak_from_acc (1.0f);
}
