/*  flash_attention device reference (reference_cuda): the float64 oracle
    on the GPU.  A block takes 32 query rows of one (b, h) and makes ref.c's
    two passes over the keys, 64 keys at a time: the scores (dot products
    in d order, Q and K read through shared memory 16 d at a time), first
    for the row maximum, then again for the exp-weighted sums, which each
    thread of a row adds in key order, as ref.c does, into its share of
    the output row (columns c, c + 8, ...; V through shared memory 8 keys
    at a time).  q, k, v, o [B][H][S][D]; mask 2 is causal; D <= 256 (a
    larger D, or another block size, writes nothing: the gates then report
    the output unwritten).  Built with -DAK_REFERENCE.
    Launch: grid [(S+31)/32, B*H], block [256]. */
#define S_BM 32                           /* query rows a block */
#define S_BN 64                           /* keys a step */
#define S_DK 16                           /* d a step of the scores */
#define S_VK 8                            /* keys of V in shared memory at a time */
#define S_MAXD 256

__shared__ double s_q[S_BM][S_DK + 1];
__shared__ double s_k[S_BN][S_DK + 1];
__shared__ double s_p[S_BM][S_BN + 1];
__shared__ double s_v[S_VK][S_MAXD];

/*  The scores q_i . k_j (unscaled) of the block's rows i0.. against keys
    j0..j0+63: thread t gets those of row i0 + t/8 and keys
    j0 + t%8 + 8jj in s[jj].  Every thread of the block calls it. */
__device__ __forceinline__ void s_scores (const double *q, const double *k, ak_i64 S, ak_i64 D, ak_i64 i0,
                                          ak_i64 j0, double (&s)[8])
{
    const int t = threadIdx.x, r = t >> 3, c = t & 7;
#pragma unroll
    for (int jj = 0; jj < 8; jj++)
        s[jj] = 0.0;
    for (ak_i64 d0 = 0; d0 < D; d0 += S_DK) {
        const int dn = D - d0 < S_DK ? (int) (D - d0) : S_DK;
        for (int e = t; e < S_BM * S_DK; e += 256) {
            const int rr = e / S_DK, cc = e % S_DK;
            s_q[rr][cc] = i0 + rr < S && cc < dn ? q[(i0 + rr) * D + d0 + cc] : 0.0;
        }
        for (int e = t; e < S_BN * S_DK; e += 256) {
            const int rr = e / S_DK, cc = e % S_DK;
            s_k[rr][cc] = j0 + rr < S && cc < dn ? k[(j0 + rr) * D + d0 + cc] : 0.0;
        }
        __syncthreads ();
        for (int dd = 0; dd < dn; dd++) {
            const double qv = s_q[r][dd];
#pragma unroll
            for (int jj = 0; jj < 8; jj++)
                s[jj] += qv * s_k[c + 8 * jj][dd];
        }
        __syncthreads ();
    }
}

extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 S = a.dims[2], D = a.dims[3], mask = a.dims[4];
    const ak_i64 i0 = (ak_i64) blockIdx.x * S_BM, bh = blockIdx.y;
    if (D > S_MAXD || i0 >= S || blockDim.x != 256 || blockDim.y != 1 || blockDim.z != 1)
        return;
    const double *q = AK_IN (a, 0) + bh * S * D, *k = AK_IN (a, 1) + bh * S * D, *v = AK_IN (a, 2) + bh * S * D;
    double *o = AK_OUT (a, 0) + bh * S * D;
    const double scale = 1.0 / sqrt ((double) D);
    const int t = threadIdx.x, r = t >> 3, c = t & 7;
    const ak_i64 i = i0 + r;                                  /* this thread's row */
    const ak_i64 nkeys = mask == 2 ? i + 1 : S;               /* its keys */
    const ak_i64 last = i0 + S_BM < S ? i0 + S_BM - 1 : S - 1;
    const ak_i64 bkeys = mask == 2 ? last + 1 : S;            /* the block's */

    double m = __longlong_as_double (0xfff0000000000000ull);   /* -inf */
    for (ak_i64 j0 = 0; j0 < bkeys; j0 += S_BN) {
        double s[8];
        s_scores (q, k, S, D, i0, j0, s);
#pragma unroll
        for (int jj = 0; jj < 8; jj++) {
            const double x = s[jj] * scale;
            if (j0 + c + 8 * jj < nkeys && x > m)
                m = x;
        }
    }
#pragma unroll
    for (int w = 1; w < 8; w <<= 1) {                         /* the 8 threads of a row: lanes 8c..8c+7 */
        const double y = __shfl_xor_sync (0xffffffffu, m, w);
        m = y > m ? y : m;
    }

    double acc[S_MAXD / 8], l = 0.0;
#pragma unroll
    for (int dd = 0; dd < S_MAXD / 8; dd++)
        acc[dd] = 0.0;
    for (ak_i64 j0 = 0; j0 < bkeys; j0 += S_BN) {
        double s[8];
        s_scores (q, k, S, D, i0, j0, s);
#pragma unroll
        for (int jj = 0; jj < 8; jj++)
            s_p[r][c + 8 * jj] = j0 + c + 8 * jj < nkeys ? exp (s[jj] * scale - m) : 0.0;
        const int kn = bkeys - j0 < S_BN ? (int) (bkeys - j0) : S_BN;
        for (int v0 = 0; v0 < kn; v0 += S_VK) {
            const int vn = kn - v0 < S_VK ? kn - v0 : S_VK;
            __syncthreads ();                 /* s_p written; the last s_v read */
            for (int e = t; e < S_VK * S_MAXD; e += 256) {
                const int rr = e / S_MAXD, cc = e % S_MAXD;
                s_v[rr][cc] = rr < vn && cc < D ? v[(j0 + v0 + rr) * D + cc] : 0.0;
            }
            __syncthreads ();
            for (int kk = 0; kk < vn; kk++) {
                if (j0 + v0 + kk >= nkeys)
                    break;
                const double p = s_p[r][v0 + kk];
                l += p;
#pragma unroll
                for (int dd = 0; dd < S_MAXD / 8; dd++)
                    if (c + 8 * dd < D)
                        acc[dd] += p * s_v[kk][c + 8 * dd];
            }
        }
        __syncthreads ();                     /* s_p and s_v read before the next step writes them */
    }
    if (i < S)
#pragma unroll
        for (int dd = 0; dd < S_MAXD / 8; dd++)
            if (c + 8 * dd < D)
                o[i * D + c + 8 * dd] = acc[dd] / l;
}
