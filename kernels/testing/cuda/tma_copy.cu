/*  tma_copy (testing, sm_90a): y = x through one TMA tensor map (ABI 2).
    Each block loads one BOX_R x BOX_C tile of x (rows x cols, row-major)
    with cp.async.bulk.tensor.2d into shared memory, waits on an mbarrier
    for its bytes, and stores the part inside the matrix to y.  Tiles past
    the edge read the tensor map's out-of-bounds fill (zero), which the
    stores leave out, so an edge size checks the map's dims and strides.
    Where the map is absent (an "optional" map the rules refused for the
    shape: rows of cols*4 bytes not a multiple of 16) the block copies its
    tile with plain loads instead.
    Spec entry: "arch": "sm_90a", tensor_maps [{"name": "tm_x", "buffer":
    "x", "dims": ["cols", "rows"], "box": ["BOX_C", "BOX_R"]}];
    launch grid [(cols+BOX_C-1)/BOX_C, (rows+BOX_R-1)/BOX_R], block [128]. */
#ifndef BOX_C
#define BOX_C 32
#endif
#ifndef BOX_R
#define BOX_R 8
#endif

extern "C" __global__ void ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_x)
{
    __shared__ __align__(128) ak_t tile[BOX_R][BOX_C];
    __shared__ __align__(8) ak_u64 bar;
    const ak_i64 rows = a.dims[0], cols = a.dims[1];
    const int c0 = blockIdx.x * BOX_C, r0 = blockIdx.y * BOX_R;
    ak_t *y = AK_OUT (a, 0);
    if (!ak_tensor_map_present (&tm_x)) {
        const ak_t *x = AK_IN (a, 0);
        for (int i = threadIdx.x; i < BOX_R * BOX_C; i += blockDim.x) {
            const ak_i64 r = r0 + i / BOX_C, c = c0 + i % BOX_C;
            if (r < rows && c < cols)
                y[r * cols + c] = x[r * cols + c];
        }
        return;
    }
    const unsigned bar_s = (unsigned) __cvta_generic_to_shared (&bar);
    const unsigned tile_s = (unsigned) __cvta_generic_to_shared (&tile[0][0]);

    if (threadIdx.x == 0) {
        asm volatile ("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_s) : "memory");
        asm volatile ("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads ();
    if (threadIdx.x == 0) {
        asm volatile ("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                      :: "r"(bar_s), "r"((unsigned) sizeof tile) : "memory");
        asm volatile ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                      " [%0], [%1, {%2, %3}], [%4];"
                      :: "r"(tile_s), "l"((ak_u64) &tm_x), "r"(c0), "r"(r0), "r"(bar_s) : "memory");
    }
    unsigned done = 0;
    while (!done)
        asm volatile ("{\n\t.reg .pred p;\n\t"
                      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                      "selp.u32 %0, 1, 0, p;\n\t}"
                      : "=r"(done) : "r"(bar_s) : "memory");
    for (int i = threadIdx.x; i < BOX_R * BOX_C; i += blockDim.x) {
        const ak_i64 r = r0 + i / BOX_C, c = c0 + i % BOX_C;
        if (r < rows && c < cols)
            y[r * cols + c] = tile[i / BOX_C][i % BOX_C];
    }
}
