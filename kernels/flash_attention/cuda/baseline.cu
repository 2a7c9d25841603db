/*  flash_attention baseline (cuda): a warp per query row, online softmax
    in float over the keys one at a time (the dot product reduced across
    the warp with shuffles), lane l holding dimensions l, l+32, ...
    (D <= 256): ak_attn_row (kernels/ak_blocks_cuda.h).  No shared
    memory, no tensor cores.
    q, k, v, o [B][H][S][D]; mask 2 is causal (keys j <= i).
    Launch: grid [(S+7)/8, B*H], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 S = a.dims[2], D = a.dims[3], mask = a.dims[4];
    const ak_i64 i = (ak_i64) blockIdx.x * 8 + (threadIdx.x >> 5), bh = blockIdx.y;
    if (i >= S || D > 32 * AK_ATTN_MAXC)
        return;
    ak_attn_row (AK_IN (a, 0) + (bh * S + i) * D, AK_IN (a, 1) + bh * S * D, AK_IN (a, 2) + bh * S * D,
                 AK_OUT (a, 0) + (bh * S + i) * D, mask == 2 ? i + 1 : S, D, threadIdx.x & 31);
}
