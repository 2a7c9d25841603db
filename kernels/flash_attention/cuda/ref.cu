/*  flash_attention device reference (reference_cuda): the float64 oracle
    on the GPU, a warp per query row, lane l holding dimensions l, l+32, ...
    (D <= 256).  Two passes over the keys as ref.c: the row maximum, then
    exp-weighted sums; dot products are reduced across the warp (another
    order than ref.c: the gates allow float64 rounding differences).
    q, k, v, o [B][H][S][D]; mask 2 is causal.  Built with -DAK_REFERENCE.
    Launch: grid [(S+7)/8, B*H], block [256]. */
#define S_MAXC 8                          /* D / 32, at most */

__device__ __forceinline__ double s_warp_sum (double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 S = a.dims[2], D = a.dims[3], mask = a.dims[4];
    const int lane = threadIdx.x & 31;
    const ak_i64 i = (ak_i64) blockIdx.x * 8 + (threadIdx.x >> 5), bh = blockIdx.y;
    if (i >= S || D > 32 * S_MAXC)
        return;
    const double *q = AK_IN (a, 0) + (bh * S + i) * D;
    const double *k = AK_IN (a, 1) + bh * S * D, *v = AK_IN (a, 2) + bh * S * D;
    double *o = AK_OUT (a, 0) + (bh * S + i) * D;
    const double scale = 1.0 / sqrt ((double) D);
    const ak_i64 nkeys = mask == 2 ? i + 1 : S;

    double qr[S_MAXC], acc[S_MAXC];
#pragma unroll
    for (int c = 0; c < S_MAXC; c++) {
        qr[c] = lane + 32 * c < D ? q[lane + 32 * c] : 0.0;
        acc[c] = 0.0;
    }
    double m = __longlong_as_double (0xfff0000000000000ull);   /* -inf */
    for (ak_i64 j = 0; j < nkeys; j++) {
        double s = 0;
#pragma unroll
        for (int c = 0; c < S_MAXC; c++)
            if (lane + 32 * c < D)
                s += qr[c] * k[j * D + lane + 32 * c];
        s = s_warp_sum (s) * scale;
        m = s > m ? s : m;
    }
    double l = 0;
    for (ak_i64 j = 0; j < nkeys; j++) {
        double s = 0;
#pragma unroll
        for (int c = 0; c < S_MAXC; c++)
            if (lane + 32 * c < D)
                s += qr[c] * k[j * D + lane + 32 * c];
        const double p = exp (s_warp_sum (s) * scale - m);
        l += p;
#pragma unroll
        for (int c = 0; c < S_MAXC; c++)
            if (lane + 32 * c < D)
                acc[c] += p * v[j * D + lane + 32 * c];
    }
#pragma unroll
    for (int c = 0; c < S_MAXC; c++)
        if (lane + 32 * c < D)
            o[lane + 32 * c] = acc[c] / l;
}
