/*  flash_attention baseline (cuda): a warp per query row, online softmax
    in float over the keys one at a time (the dot product reduced across
    the warp with shuffles), lane l holding dimensions l, l+32, ...
    (D <= 256).  No shared memory, no tensor cores.
    q, k, v, o [B][H][S][D]; mask 2 is causal (keys j <= i).
    Launch: grid [(S+7)/8, B*H], block [256]. */
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
    const ak_i64 S = a.dims[2], D = a.dims[3], mask = a.dims[4];
    const int lane = threadIdx.x & 31;
    const ak_i64 i = (ak_i64) blockIdx.x * 8 + (threadIdx.x >> 5), bh = blockIdx.y;
    if (i >= S || D > 32 * S_MAXC)
        return;
    const ak_t *q = AK_IN (a, 0) + (bh * S + i) * D;
    const ak_t *k = AK_IN (a, 1) + bh * S * D, *v = AK_IN (a, 2) + bh * S * D;
    ak_t *o = AK_OUT (a, 0) + (bh * S + i) * D;
    const float scale = 1.0f / sqrtf ((float) D);
    const ak_i64 nkeys = mask == 2 ? i + 1 : S;

    float qr[S_MAXC], acc[S_MAXC];
#pragma unroll
    for (int c = 0; c < S_MAXC; c++) {
        qr[c] = lane + 32 * c < D ? ak_to_acc (q[lane + 32 * c]) * scale : 0.0f;
        acc[c] = 0.0f;
    }
    float m = __int_as_float (0xff800000), l = 0.0f;        /* -inf */
    for (ak_i64 j = 0; j < nkeys; j++) {
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
            o[lane + 32 * c] = ak_from_acc (acc[c] / l);
}
