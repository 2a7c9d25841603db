/*  flash_attention device reference (reference_cuda): the float64 oracle
    on the GPU.  A block takes 32 query rows of one (b, h) and makes one
    pass over the keys, 64 at a time, with the running maximum and sum of
    the online softmax (ref.c makes two passes: the same sums up to
    rounding, far inside the gates' 1e-9): thread (ty, tx) = (t/16, t%16)
    owns rows ty and ty+16 of the block and, of each step, keys tx + 16j
    (j < 4) of the scores (dot products in d order, Q and K through shared
    memory 16 d at a time: 6 loads for 8 products, where a row a thread
    took 9 for 8) and output columns tx + 16c of its two rows (V through
    shared memory 8 keys at a time: the probabilities of the step in
    shared memory, p = exp(s/sqrt(D) - m), the output and the thread's
    part of each row's sum rescaled by exp(m_old - m) when the maximum
    moves; the 16 threads of a row add their sums at the end).  Every sum
    runs in a fixed order.  q, k, v, o [B][H][S][D]; mask 2 is causal;
    D <= 256 (a larger D, or another block size, writes nothing: the
    gates then report the output unwritten).  Built with -DAK_REFERENCE.
    Launch: grid [(S+31)/32, B*H], block [256]. */
#define S_BM 32                           /* query rows a block */
#define S_BN 64                           /* keys a step */
#define S_DK 16                           /* d a step of the scores */
#define S_VK 8                            /* keys of V in shared memory at a time */
#define S_MAXD 256
#define S_NC (S_MAXD / 16)                /* output columns a thread a row */

__shared__ double s_q[S_BM][S_DK + 1];
__shared__ double s_k[S_BN][S_DK + 1];
__shared__ double s_p[S_BM][S_BN + 1];
__shared__ double s_v[S_VK][S_MAXD];

extern "C" __global__ void ak_reference (ak_cuda_args_t a)
{
    const ak_i64 S = a.dims[2], D = a.dims[3], mask = a.dims[4];
    const ak_i64 i0 = (ak_i64) blockIdx.x * S_BM, bh = blockIdx.y;
    if (D > S_MAXD || i0 >= S || blockDim.x != 256 || blockDim.y != 1 || blockDim.z != 1)
        return;
    const double *q = AK_IN (a, 0) + bh * S * D, *k = AK_IN (a, 1) + bh * S * D, *v = AK_IN (a, 2) + bh * S * D;
    double *o = AK_OUT (a, 0) + bh * S * D;
    const double scale = 1.0 / sqrt ((double) D);
    const double ninf = __longlong_as_double (0xfff0000000000000ull);
    const int t = threadIdx.x, ty = t >> 4, tx = t & 15;
    const ak_i64 last = i0 + S_BM < S ? i0 + S_BM - 1 : S - 1;
    const ak_i64 bkeys = mask == 2 ? last + 1 : S;            /* the block's keys */
    ak_i64 nk[2];                                             /* the keys each of the two rows sees */
    for (int i = 0; i < 2; i++) {
        const ak_i64 row = i0 + ty + 16 * i;
        nk[i] = row >= S ? 0 : mask == 2 ? row + 1 : S;
    }

    double m[2] = { ninf, ninf }, l[2] = { 0.0, 0.0 }, acc[2][S_NC];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int c = 0; c < S_NC; c++)
            acc[i][c] = 0.0;

    for (ak_i64 j0 = 0; j0 < bkeys; j0 += S_BN) {
        /* the scores of rows ty, ty+16 against keys j0 + tx + 16j */
        double s[2][4];
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                s[i][j] = 0.0;
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
                const double q0 = s_q[ty][dd], q1 = s_q[ty + 16][dd];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const double kv = s_k[tx + 16 * j][dd];
                    s[0][j] += q0 * kv;
                    s[1][j] += q1 * kv;
                }
            }
            __syncthreads ();
        }

        /* the online softmax of the step: each row's maximum over its 16 threads */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            double mx = ninf;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] *= scale;
                if (j0 + tx + 16 * j < nk[i] && s[i][j] > mx)
                    mx = s[i][j];
            }
#pragma unroll
            for (int w = 1; w < 16; w <<= 1) {                /* lanes of one ty: xor below 16 */
                const double y = __shfl_xor_sync (0xffffffffu, mx, w);
                mx = y > mx ? y : mx;
            }
            const double mn = mx > m[i] ? mx : m[i];
            const double corr = mn == ninf ? 1.0 : exp (m[i] - mn);   /* m -inf: exp(-inf) = 0 */
            m[i] = mn;
            l[i] *= corr;
#pragma unroll
            for (int c = 0; c < S_NC; c++)
                acc[i][c] *= corr;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const double p = j0 + tx + 16 * j < nk[i] ? exp (s[i][j] - mn) : 0.0;
                s_p[ty + 16 * i][tx + 16 * j] = p;
                l[i] += p;
            }
        }

        /* O += P V, 8 keys of V at a time */
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
                const double p0 = s_p[ty][v0 + kk], p1 = s_p[ty + 16][v0 + kk];
#pragma unroll
                for (int c = 0; c < S_NC; c++) {
                    const double vv = s_v[kk][tx + 16 * c];
                    acc[0][c] += p0 * vv;
                    acc[1][c] += p1 * vv;
                }
            }
        }
        __syncthreads ();                     /* s_p and s_v read before the next step writes them */
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        double ls = l[i];
#pragma unroll
        for (int w = 1; w < 16; w <<= 1)
            ls += __shfl_xor_sync (0xffffffffu, ls, w);
        const ak_i64 row = i0 + ty + 16 * i;
        if (row < S)
#pragma unroll
            for (int c = 0; c < S_NC; c++)
                if (tx + 16 * c < D)
                    o[row * D + tx + 16 * c] = acc[i][c] / ls;
    }
}
