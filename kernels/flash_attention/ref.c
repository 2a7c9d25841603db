/*  flash_attention reference: the float64 oracle.
    O[b][h][i] = sum_j softmax_j (Q[b][h][i] . K[b][h][j] / sqrt(D)) V[b][h][j]
    over keys j < S, or j <= i when mask == 2 (causal); q, k, v, o are
    [B][H][S][D] row-major.  Two passes over the keys (the row maximum,
    then exp-weighted sums into the output row), so no scratch is needed. */
void ak_reference (const ak_args_t *a)
{
    const int64_t B = a->dims[0], H = a->dims[1], S = a->dims[2], D = a->dims[3], mask = a->dims[4];
    const ak_t *Q = AK_IN (a, 0), *K = AK_IN (a, 1), *V = AK_IN (a, 2);
    ak_t *O = AK_OUT (a, 0);
    const double scale = 1.0 / sqrt ((double) D);

    for (int64_t bh = 0; bh < B * H; bh++) {
        const ak_t *q = Q + bh * S * D, *k = K + bh * S * D, *v = V + bh * S * D;
        for (int64_t i = 0; i < S; i++) {
            const int64_t nkeys = mask == 2 ? i + 1 : S;
            ak_t *o = O + (bh * S + i) * D;
            double m = -INFINITY;
            for (int64_t j = 0; j < nkeys; j++) {
                double s = 0;
                for (int64_t d = 0; d < D; d++)
                    s += q[i * D + d] * k[j * D + d];
                s *= scale;
                if (s > m)
                    m = s;
            }
            for (int64_t d = 0; d < D; d++)
                o[d] = 0;
            double l = 0;
            for (int64_t j = 0; j < nkeys; j++) {
                double s = 0;
                for (int64_t d = 0; d < D; d++)
                    s += q[i * D + d] * k[j * D + d];
                const double p = exp (s * scale - m);
                l += p;
                for (int64_t d = 0; d < D; d++)
                    o[d] += p * v[j * D + d];
            }
            for (int64_t d = 0; d < D; d++)
                o[d] /= l;
        }
    }
}
