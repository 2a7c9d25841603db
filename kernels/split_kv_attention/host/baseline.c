/*  split_kv_attention baseline (host): per query row, an online softmax
    in float over the keys it sees (ref.c: masks 1 none, 2 causal, 3
    ragged causal with len_b = L - (uint32) (b * 2654435761) % (L + 1)),
    the running output rescaled when the maximum grows.  A row that sees
    no key is 0. */
void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], Q = a->dims[1], HQ = a->dims[2], HK = a->dims[3];
    const int64_t L = a->dims[4], D = a->dims[5], mask = a->dims[6];
    const float *q = AK_IN (a, 0), *K = AK_IN (a, 1), *V = AK_IN (a, 2);
    float *O = AK_OUT (a, 0);
    const float scale = 1.0f / sqrtf ((float) D);

    for (int64_t b = 0; b < B; b++) {
        const int64_t len = mask == 3
            ? L - (int64_t) ((uint32_t) ((uint32_t) b * 2654435761u) % (uint32_t) (L + 1)) : L;
        for (int64_t h = 0; h < HQ; h++) {
            const int64_t kvh = h * HK / HQ;
            const float *k = K + (b * HK + kvh) * L * D, *v = V + (b * HK + kvh) * L * D;
            for (int64_t t = 0; t < Q; t++) {
                const float *qr = q + ((b * HQ + h) * Q + t) * D;
                float *o = O + ((b * HQ + h) * Q + t) * D;
                const int64_t n = mask == 2 || mask == 3 ? len - Q + 1 + t : L;
                float m = -INFINITY, l = 0.0f;
                for (int64_t d = 0; d < D; d++)
                    o[d] = 0.0f;
                for (int64_t j = 0; j < n; j++) {
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++)
                        s += qr[d] * k[j * D + d];
                    s *= scale;
                    const float mn = s > m ? s : m;
                    const float corr = expf (m - mn), p = expf (s - mn);
                    l = l * corr + p;
                    for (int64_t d = 0; d < D; d++)
                        o[d] = o[d] * corr + p * v[j * D + d];
                    m = mn;
                }
                if (l > 0.0f)
                    for (int64_t d = 0; d < D; d++)
                        o[d] /= l;
            }
        }
    }
}
