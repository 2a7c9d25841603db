/*  Planted for tests (cuda, softmax ABI): does not compile (an undeclared
    identifier), so the task must end as compile_error with NVRTC's log.
    Launch: grid [(rows+127)/128], block [128]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    AK_OUT (a, 0)[threadIdx.x] = not_declared_anywhere (a.dims[0]);
}
