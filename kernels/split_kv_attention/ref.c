/*  split_kv_attention reference: the float64 oracle.  Decode-time
    attention of Q new query tokens per sequence over a KV cache, grouped-
    query aware:

        q[B][HQ][Q][D], k_cache, v_cache [B][HK][L][D], o[B][HQ][Q][D]
        (torch scaled_dot_product_attention's layout, enable_gqa)
        query head h reads KV head h * HK / HQ (h / (HQ/HK) when HK divides HQ)
        o[b][h][t] = sum_{j < n} softmax_j (q[b][h][t] . k[b][kv][j] / sqrt(D)) v[b][kv][j]

    The cache already holds the new tokens' keys and values (the caller
    appended them, as vLLM and FlashInfer do): sequence b has len_b valid
    entries, the Q new tokens being the last Q of them.  n, the keys query
    t sees, by mask:
        1  none: len_b = L, n = L (every query sees the whole cache; the
           pi0.5 action tokens over prefix + suffix)
        2  causal: len_b = L, n = L - Q + 1 + t (query t at position
           L - Q + t; the diagonal is bottom-right aligned)
        3  ragged causal: n = len_b - Q + 1 + t with a valid length per
           sequence, len_b = L - ((uint32) (b * 2654435761) % (L + 1))
           (the data path makes only floating inputs, so the lengths are a
           function of b, as cross_entropy's targets are; they range over
           0 .. L: b = 0 has the full cache)
        other values as 1.
    A query that sees no key (n <= 0: an empty cache, or fewer valid
    entries than new tokens) has the output 0.  A prefix call with an empty
    cache is len_b = Q: the new tokens attend causally to each other only.
    Two passes over the keys (the row maximum, then exp-weighted sums into
    the output row), so no scratch is needed. */
static int64_t s_len (int64_t b, int64_t L, int64_t mask)
{
    if (mask != 3)
        return L;
    return L - (int64_t) ((uint32_t) ((uint32_t) b * 2654435761u) % (uint32_t) (L + 1));
}

void ak_reference (const ak_args_t *a)
{
    const int64_t B = a->dims[0], Q = a->dims[1], HQ = a->dims[2], HK = a->dims[3];
    const int64_t L = a->dims[4], D = a->dims[5], mask = a->dims[6];
    const ak_t *q = AK_IN (a, 0), *K = AK_IN (a, 1), *V = AK_IN (a, 2);
    ak_t *O = AK_OUT (a, 0);
    const double scale = 1.0 / sqrt ((double) D);

    for (int64_t b = 0; b < B; b++) {
        const int64_t len = s_len (b, L, mask);
        for (int64_t h = 0; h < HQ; h++) {
            const int64_t kvh = h * HK / HQ;
            const ak_t *k = K + (b * HK + kvh) * L * D, *v = V + (b * HK + kvh) * L * D;
            for (int64_t t = 0; t < Q; t++) {
                const ak_t *qr = q + ((b * HQ + h) * Q + t) * D;
                ak_t *o = O + ((b * HQ + h) * Q + t) * D;
                const int64_t n = mask == 2 || mask == 3 ? len - Q + 1 + t : L;
                for (int64_t d = 0; d < D; d++)
                    o[d] = 0;
                if (n <= 0)
                    continue;
                double m = -INFINITY;
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += qr[d] * k[j * D + d];
                    if (s * scale > m)
                        m = s * scale;
                }
                double l = 0;
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += qr[d] * k[j * D + d];
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
}
