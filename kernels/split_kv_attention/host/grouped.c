/*  split_kv_attention candidate (host): the query rows of a KV head's group
    together, over tiles of TK keys, so each key and value row is read from
    memory once for all of them (the baseline reads the cache once a query
    row).  Masks, grouped-query rule and layout as ref.c.

    Per KV head of a sequence: its group's rows (the heads h with
    h*HK/HQ = kv, x Q tokens) in chunks of up to 64; per tile of keys and
    per row of the chunk: the TK scores (dot products over D in VEC
    partial sums), the tile's maximum, the running maximum m and sum l
    (rescaled once a tile, not once a key), then o = o*corr + sum p_j v_j
    (the output row is the accumulator).  A row that sees no key is 0.

    TK   keys a tile (scores kept on the stack)
    VEC  partial sums of a dot product: 1, or 4 (one 16-byte register
         once the compiler vectorises them; kernels are built without
         -march) */
#ifndef TK
#define TK 32
#endif
#ifndef VEC
#define VEC 4
#endif
#define S_RB 64                                     /* rows a chunk */

/* q . k over D in VEC independent partial sums (lane i adds elements
   i, i + VEC, ...: no reassociation needed to vectorise), added in lane
   order, then the tail */
static inline float s_dot (const float *q, const float *k, int64_t D)
{
    const int64_t body = D - D % VEC;
    float acc[VEC] = { 0 }, s = 0.0f;
    for (int64_t d = 0; d < body; d += VEC)
        for (int i = 0; i < VEC; i++)
            acc[i] += q[d + i] * k[d + i];
    for (int i = 0; i < VEC; i++)
        s += acc[i];
    for (int64_t d = body; d < D; d++)
        s += q[d] * k[d];
    return s;
}

void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], Q = a->dims[1], HQ = a->dims[2], HK = a->dims[3];
    const int64_t L = a->dims[4], D = a->dims[5], mask = a->dims[6];
    const float *q = AK_IN (a, 0), *K = AK_IN (a, 1), *V = AK_IN (a, 2);
    float *O = AK_OUT (a, 0);
    const float scale = 1.0f / sqrtf ((float) D);
    const int causal = mask == 2 || mask == 3;

    for (int64_t b = 0; b < B; b++) {
        const int64_t len = mask == 3
            ? L - (int64_t) ((uint32_t) ((uint32_t) b * 2654435761u) % (uint32_t) (L + 1)) : L;
        for (int64_t kv = 0; kv < HK; kv++) {
            const int64_t h_lo = (kv * HQ + HK - 1) / HK, h_hi = ((kv + 1) * HQ + HK - 1) / HK;
            const int64_t nrows = (h_hi - h_lo) * Q;
            const float *k = K + (b * HK + kv) * L * D, *v = V + (b * HK + kv) * L * D;
            for (int64_t r0 = 0; r0 < nrows; r0 += S_RB) {
                const int rb = (int) (nrows - r0 < S_RB ? nrows - r0 : S_RB);
                float m[S_RB], l[S_RB];
                int64_t n[S_RB], nmax = 0;
                const float *qr[S_RB];
                float *orow[S_RB];
                for (int r = 0; r < rb; r++) {
                    const int64_t h = h_lo + (r0 + r) / Q, t = (r0 + r) % Q;
                    qr[r] = q + ((b * HQ + h) * Q + t) * D;
                    orow[r] = O + ((b * HQ + h) * Q + t) * D;
                    n[r] = causal ? len - Q + 1 + t : L;
                    if (n[r] < 0)
                        n[r] = 0;
                    nmax = n[r] > nmax ? n[r] : nmax;
                    m[r] = -INFINITY;
                    l[r] = 0.0f;
                    memset (orow[r], 0, (size_t) D * sizeof (float));
                }
                for (int64_t j0 = 0; j0 < nmax; j0 += TK) {
                    for (int r = 0; r < rb; r++) {
                        const int64_t jn = n[r] - j0 < TK ? n[r] - j0 : TK;   /* keys of the tile it sees */
                        if (jn <= 0)
                            continue;
                        float s[TK], mx = -INFINITY;
                        for (int64_t j = 0; j < jn; j++) {
                            s[j] = s_dot (qr[r], k + (j0 + j) * D, D) * scale;
                            mx = s[j] > mx ? s[j] : mx;
                        }
                        const float mn = mx > m[r] ? mx : m[r];
                        const float corr = expf (m[r] - mn);     /* 0 while the row had no key */
                        float sum = 0.0f;
                        for (int64_t j = 0; j < jn; j++) {
                            s[j] = expf (s[j] - mn);
                            sum += s[j];
                        }
                        l[r] = l[r] * corr + sum;
                        m[r] = mn;
                        float *o = orow[r];
                        for (int64_t d = 0; d < D; d++)
                            o[d] *= corr;
                        for (int64_t j = 0; j < jn; j++) {
                            const float p = s[j], *vr = v + (j0 + j) * D;
                            for (int64_t d = 0; d < D; d++)
                                o[d] += p * vr[d];
                        }
                    }
                }
                for (int r = 0; r < rb; r++)
                    if (l[r] > 0.0f)
                        for (int64_t d = 0; d < D; d++)
                            orow[r][d] /= l[r];
            }
        }
    }
}
