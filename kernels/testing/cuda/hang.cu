/*  Planted for tests (cuda, softmax ABI): never returns.  The loop reads a
    volatile global, so it is a real infinite loop (a loop without side
    effects may be removed by the compiler).
    Launch: grid [(rows+127)/128], block [128]. */
__device__ volatile int s_release = 0;

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    (void) a;
    while (!s_release)
        ;
}
