/*  cluster_rank (testing, sm_90a): each block writes its rank in its
    thread-block cluster and the cluster's size, after a cluster-wide
    barrier (which only a real cluster launch gets past with more than one
    block): y[2*b] = %cluster_ctarank, y[2*b+1] = %cluster_nctarank for
    block b = blockIdx.x + blockIdx.y * gridDim.x.  Launched with a
    "cluster" in its rule (cuLaunchKernelEx); without one every rank is 0
    of 1.  y holds 2 * blocks float32 values. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    unsigned rank, n;
    asm volatile ("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile ("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    asm volatile ("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
    if (threadIdx.x == 0) {
        const ak_i64 b = blockIdx.x + (ak_i64) blockIdx.y * gridDim.x;
        AK_OUT (a, 0)[2 * b] = ak_from_acc ((ak_acc_t) rank);
        AK_OUT (a, 0)[2 * b + 1] = ak_from_acc ((ak_acc_t) n);
    }
}
