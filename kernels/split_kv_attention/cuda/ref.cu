/*  split_kv_attention device reference (reference_cuda): the float64
    oracle on the GPU, a warp per query row (b, h, t), lane l holding
    dimensions l, l+32, ... (D <= 256).  Two passes over the keys the row
    sees, as ref.c (masks 1 none, 2 causal, 3 ragged causal with
    len_b = L - (uint32) (b * 2654435761) % (L + 1)); dot products are
    reduced across the warp (another order than ref.c: the gates allow
    float64 rounding differences).  A row that sees no key is 0.
    Built with -DAK_REFERENCE.
    Launch: grid [(B*HQ*Q+7)/8], block [256]. */
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
    const ak_i64 B = a.dims[0], Q = a.dims[1], HQ = a.dims[2], HK = a.dims[3];
    const ak_i64 L = a.dims[4], D = a.dims[5], mask = a.dims[6];
    const int lane = threadIdx.x & 31;
    const ak_i64 row = (ak_i64) blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= B * HQ * Q || D > 32 * S_MAXC)
        return;
    const ak_i64 t = row % Q, h = (row / Q) % HQ, b = row / (Q * HQ), kvh = h * HK / HQ;
    const ak_i64 len = mask == 3 ? L - (ak_i64) ((ak_u32) ((ak_u32) b * 2654435761u) % (ak_u32) (L + 1)) : L;
    const ak_i64 n = mask == 2 || mask == 3 ? len - Q + 1 + t : L;
    const double *q = AK_IN (a, 0) + row * D;
    const double *k = AK_IN (a, 1) + (b * HK + kvh) * L * D, *v = AK_IN (a, 2) + (b * HK + kvh) * L * D;
    double *o = AK_OUT (a, 0) + row * D;
    const double scale = 1.0 / sqrt ((double) D);

    double qr[S_MAXC], acc[S_MAXC];
#pragma unroll
    for (int c = 0; c < S_MAXC; c++) {
        qr[c] = lane + 32 * c < D ? q[lane + 32 * c] : 0.0;
        acc[c] = 0.0;
    }
    double m = __longlong_as_double (0xfff0000000000000ull);   /* -inf */
    for (ak_i64 j = 0; j < n; j++) {
        double s = 0;
#pragma unroll
        for (int c = 0; c < S_MAXC; c++)
            if (lane + 32 * c < D)
                s += qr[c] * k[j * D + lane + 32 * c];
        s = s_warp_sum (s) * scale;
        m = s > m ? s : m;
    }
    double l = 0;
    for (ak_i64 j = 0; j < n; j++) {
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
            o[lane + 32 * c] = n > 0 ? acc[c] / l : 0.0;
}
