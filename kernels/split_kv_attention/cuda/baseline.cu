/*  split_kv_attention baseline (cuda): the plain decode kernel, a warp per
    query row (b, h, t) over all the keys it sees, no split: online softmax
    in float, one key at a time (the dot product reduced across the warp
    with shuffles), lane l holding dimensions l, l+32, ... (D <= 256).
    Query head h reads KV head h * HK / HQ; masks as ref.c (1 none,
    2 causal, 3 ragged causal).  A row that sees no key is 0.
    Launch: grid [(B*HQ*Q+7)/8], block [256]. */
#define S_MAXC 8

__device__ __forceinline__ float s_warp_sum (float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], Q = a.dims[1], HQ = a.dims[2], HK = a.dims[3];
    const ak_i64 L = a.dims[4], D = a.dims[5], mask = a.dims[6];
    const int lane = threadIdx.x & 31;
    const ak_i64 row = (ak_i64) blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= B * HQ * Q || D > 32 * S_MAXC)
        return;
    const ak_i64 t = row % Q, h = (row / Q) % HQ, b = row / (Q * HQ), kvh = h * HK / HQ;
    const ak_i64 len = mask == 3 ? L - (ak_i64) ((ak_u32) ((ak_u32) b * 2654435761u) % (ak_u32) (L + 1)) : L;
    const ak_i64 n = mask == 2 || mask == 3 ? len - Q + 1 + t : L;
    const ak_t *q = AK_IN (a, 0) + row * D;
    const ak_t *k = AK_IN (a, 1) + (b * HK + kvh) * L * D, *v = AK_IN (a, 2) + (b * HK + kvh) * L * D;
    ak_t *o = AK_OUT (a, 0) + row * D;
    const float scale = 1.0f / sqrtf ((float) D);

    float qr[S_MAXC], acc[S_MAXC];
#pragma unroll
    for (int c = 0; c < S_MAXC; c++) {
        qr[c] = lane + 32 * c < D ? ak_to_acc (q[lane + 32 * c]) * scale : 0.0f;
        acc[c] = 0.0f;
    }
    float m = __int_as_float (0xff800000), l = 0.0f;        /* -inf */
    for (ak_i64 j = 0; j < n; j++) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < S_MAXC; c++)
            if (lane + 32 * c < D)
                s += qr[c] * ak_to_acc (k[j * D + lane + 32 * c]);
        s = s_warp_sum (s);
        const float mn = fmaxf (m, s);
        const float corr = expf (m - mn), p = expf (s - mn);
        m = mn;
        l = l * corr + p;
#pragma unroll
        for (int c = 0; c < S_MAXC; c++)
            if (lane + 32 * c < D)
                acc[c] = acc[c] * corr + p * ak_to_acc (v[j * D + lane + 32 * c]);
    }
#pragma unroll
    for (int c = 0; c < S_MAXC; c++)
        if (lane + 32 * c < D)
            o[lane + 32 * c] = ak_from_acc (l > 0.0f ? acc[c] / l : 0.0f);
}
