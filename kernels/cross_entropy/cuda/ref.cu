/*  cross_entropy device reference (reference_cuda): the float64 oracle on
    the GPU, one thread per row, ref.c's steps in the same order:
    loss[r] = (max_r - x[r][t_r]) + log(sum exp(x - max_r)),
    t_r = (uint32) (r * 2654435761) % vocab.
    Built with -DAK_REFERENCE: ak_t is double.
    Launch: grid [(batch+127)/128], block [128]. */
extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], V = a.dims[1];
    const ak_i64 r = (ak_i64) blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B)
        return;
    const double *xr = AK_IN (a, 0) + r * V;
    const ak_u32 target = ((ak_u32) r * 2654435761u) % (ak_u32) V;
    double m = xr[0];
    for (ak_i64 v = 1; v < V; v++)
        if (xr[v] > m)
            m = xr[v];
    double s = 0;
    for (ak_i64 v = 0; v < V; v++)
        s += exp (xr[v] - m);
    AK_OUT (a, 0)[r] = (m - xr[target]) + log (s);
}
