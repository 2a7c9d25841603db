/*  flash_attention baseline (host): per query row, the scores into a
    stack buffer of S floats (at most 4096 keys here: larger S is beyond
    the host sizes), the row maximum subtracted, then the weighted sum of
    V.  q, k, v, o are [B][H][S][D]; mask 2 is causal (keys j <= i). */
#define S_MAX_KEYS 4096

void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], H = a->dims[1], S = a->dims[2], D = a->dims[3], mask = a->dims[4];
    const float *Q = AK_IN (a, 0), *K = AK_IN (a, 1), *V = AK_IN (a, 2);
    float *O = AK_OUT (a, 0);
    const float scale = 1.0f / sqrtf ((float) D);
    float p[S_MAX_KEYS];

    if (S > S_MAX_KEYS)
        return;                  /* outputs stay unwritten: the gates say so */
    for (int64_t bh = 0; bh < B * H; bh++) {
        const float *q = Q + bh * S * D, *k = K + bh * S * D, *v = V + bh * S * D;
        for (int64_t i = 0; i < S; i++) {
            const int64_t nkeys = mask == 2 ? i + 1 : S;
            float *o = O + (bh * S + i) * D;
            float m = -INFINITY, l = 0.0f;
            for (int64_t j = 0; j < nkeys; j++) {
                float s = 0.0f;
                for (int64_t d = 0; d < D; d++)
                    s += q[i * D + d] * k[j * D + d];
                p[j] = s * scale;
                if (p[j] > m)
                    m = p[j];
            }
            for (int64_t d = 0; d < D; d++)
                o[d] = 0.0f;
            for (int64_t j = 0; j < nkeys; j++) {
                p[j] = expf (p[j] - m);
                l += p[j];
                for (int64_t d = 0; d < D; d++)
                    o[d] += p[j] * v[j * D + d];
            }
            for (int64_t d = 0; d < D; d++)
                o[d] /= l;
        }
    }
}
