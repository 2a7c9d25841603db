/*  scale_bias baseline (cuda): one thread per element, arithmetic in the
    accumulator type.  Launch: grid [(rows*cols+255)/256], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 rows = a.dims[0], cols = a.dims[1];
    const ak_i64 i = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols)
        return;
    const ak_i64 c = i % cols;
    AK_OUT (a, 0)[i] = ak_from_acc (ak_to_acc (AK_IN (a, 0)[i]) * ak_to_acc (AK_IN (a, 1)[c])
                                    + ak_to_acc (AK_IN (a, 2)[c]));
}
