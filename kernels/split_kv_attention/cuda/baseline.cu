/*  split_kv_attention baseline (cuda): the plain decode kernel, a warp per
    query row (b, h, t) over all the keys it sees, no split: online softmax
    in float, one key at a time (the dot product reduced across the warp
    with shuffles), lane l holding dimensions l, l+32, ... (D <= 256):
    ak_attn_row (kernels/ak_blocks_cuda.h).
    Query head h reads KV head h * HK / HQ; masks as ref.c (1 none,
    2 causal, 3 ragged causal).  A row that sees no key is 0.
    Launch: grid [(B*HQ*Q+7)/8], block [256]. */
extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], Q = a.dims[1], HQ = a.dims[2], HK = a.dims[3];
    const ak_i64 L = a.dims[4], D = a.dims[5], mask = a.dims[6];
    const ak_i64 row = (ak_i64) blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= B * HQ * Q || D > 32 * AK_ATTN_MAXC)
        return;
    const ak_i64 t = row % Q, h = (row / Q) % HQ, b = row / (Q * HQ), kvh = h * HK / HQ;
    const ak_i64 len = mask == 3 ? L - (ak_i64) ((ak_u32) ((ak_u32) b * 2654435761u) % (ak_u32) (L + 1)) : L;
    const ak_i64 n = mask == 2 || mask == 3 ? len - Q + 1 + t : L;
    ak_attn_row (AK_IN (a, 0) + row * D, AK_IN (a, 1) + (b * HK + kvh) * L * D, AK_IN (a, 2) + (b * HK + kvh) * L * D,
                 AK_OUT (a, 0) + row * D, n, D, threadIdx.x & 31);
}
