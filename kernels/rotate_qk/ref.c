/*  rotate_qk reference: the float64 oracle.  Rotary embedding of the
    queries and keys of one attention layer in one call, at positions read
    from a buffer:

        q[B][S][HQ][D], k[B][S][HK][D]    token-major, as a fused QKV
                                           projection leaves them
        pos[B][S]                          one position per token
        p = floor(min(max(pos, 0), 1048575))   (the buffer holds floats:
                                           the spec format has no integer
                                           buffers; every float up to 2^20
                                           that the dtype holds is exact)
        for i < D/2:  a_i = p * theta^(-2i/D), c = cos a_i, s = sin a_i
          layout 1 (half split, GPT-NeoX / HF Llama "rotate_half"):
                      the pair (i, i + D/2)
          layout 2 (interleaved, GPT-J / Meta Llama complex form):
                      the pair (2i, 2i + 1)
          y[a] = x[a] c - x[b] s,  y[b] = x[b] c + x[a] s   for the pair (a, b)

    q_out and k_out have q's and k's shapes.  Any layout other than 2 is
    the half split.  An odd D's last element passes through unchanged
    (every kernel does the same), so no shape reads out of bounds.  A NaN
    position is position 0 (fmax drops it). */
static int64_t s_pos (double v)
{
    return (int64_t) floor (fmin (fmax (v, 0.0), 1048575.0));
}

static void s_rotate (const ak_t *x, ak_t *y, int64_t D, int64_t layout, int64_t p, double theta)
{
    const int64_t half = D / 2;
    for (int64_t i = 0; i < half; i++) {
        const int64_t ia = layout == 2 ? 2 * i : i, ib = layout == 2 ? 2 * i + 1 : i + half;
        const double ang = (double) p * pow (theta, -2.0 * (double) i / (double) D);
        const double c = cos (ang), s = sin (ang);
        y[ia] = x[ia] * c - x[ib] * s;
        y[ib] = x[ib] * c + x[ia] * s;
    }
    if (D % 2)
        y[D - 1] = x[D - 1];
}

void ak_reference (const ak_args_t *a)
{
    const int64_t B = a->dims[0], S = a->dims[1], HQ = a->dims[2], HK = a->dims[3], D = a->dims[4];
    const int64_t layout = a->dims[5];
    const double theta = (double) a->dims[6];
    const ak_t *q = AK_IN (a, 0), *k = AK_IN (a, 1), *pos = AK_IN (a, 2);
    ak_t *qo = AK_OUT (a, 0), *ko = AK_OUT (a, 1);

    for (int64_t t = 0; t < B * S; t++) {
        const int64_t p = s_pos (pos[t]);
        for (int64_t h = 0; h < HQ; h++)
            s_rotate (q + (t * HQ + h) * D, qo + (t * HQ + h) * D, D, layout, p, theta);
        for (int64_t h = 0; h < HK; h++)
            s_rotate (k + (t * HK + h) * D, ko + (t * HK + h) * D, D, layout, p, theta);
    }
}
