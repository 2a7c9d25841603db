/*  gated_gelu candidate (host): explicit SIMD with GCC/Clang vector
    extensions.  y[m][n] = act(g) * u, g = x[m][n], u = x[m][N + n].

    Both activations are g * sigmoid(z): gelu_tanh's
    0.5 (1 + tanh(v)) is 1 / (1 + exp(-2v)), v = sqrt(2/pi) (g + 0.044715 g^3),
    so z = 2v (act 1) or z = g (act 2, silu).  exp is computed inline (a
    kernel source carries no library: Cody-Waite range reduction and a
    degree-6 polynomial, relative error about 2e-7) so that it vectorizes;
    its argument is clamped to [-87.3, 89] (below: 2^n stays normal, and
    exp(-87.3) vanishes beside 1; above: +inf, as exp is).

    VEC     lanes per vector: 1 (plain float) or 4 (one 16-byte SSE/NEON
            register; kernels are built without -march)
    UNROLL  vectors per step */
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

#if VEC == 1
typedef float    vf_t;
typedef uint32_t vu_t;
static inline vf_t s_clamp (vf_t x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }
#else
typedef float    vf_t __attribute__ ((vector_size (VEC * sizeof (float))));
typedef uint32_t vu_t __attribute__ ((vector_size (VEC * sizeof (uint32_t))));
static inline vf_t s_clamp (vf_t x, float lo, float hi)
{
    vu_t m = (vu_t) (x < lo);
    x = (vf_t) (((vu_t) x & ~m) | ((vu_t) ((vf_t) {0} + lo) & m));
    m = (vu_t) (x > hi);
    return (vf_t) (((vu_t) x & ~m) | ((vu_t) ((vf_t) {0} + hi) & m));
}
#endif

static inline vf_t s_load (const float *p)
{
    vf_t v;
    memcpy (&v, p, sizeof v);
    return v;
}

static inline void s_store (float *p, vf_t v)
{
    memcpy (p, &v, sizeof v);
}

/*  exp(x), x clamped to [-87.3, 89]: 2^n p(r), x = n ln2 + r.  n runs from
    -126 (2^n still normal) to 128, whose exponent field is all ones: 2^128
    is +inf, so from x = 88.37 on (a little before float's exp overflows at
    88.72) the result is +inf; the caller's 1 / (1 + exp) is below 4e-39
    there either way. */
static inline vf_t s_exp (vf_t x)
{
    const vf_t magic = (vf_t) {0} + 12582912.0f;        /* 1.5 * 2^23: rounds */
    x = s_clamp (x, -87.3f, 89.0f);
    vf_t t = x * 1.44269504f + magic;
    vf_t k = t - magic;
    vu_t e, m;
    memcpy (&e, &t, sizeof e);
    memcpy (&m, &magic, sizeof m);
    e = ((e - m) + 127u) << 23;                         /* the bits of 2^n */
    vf_t r = x - k * 0.693145752f;
    r = r - k * 1.42860677e-6f;
    vf_t p = r * (1.0f / 720) + (1.0f / 120);
    p = p * r + (1.0f / 24);
    p = p * r + (1.0f / 6);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    vf_t two_n;
    memcpy (&two_n, &e, sizeof two_n);
    return p * two_n;
}

/*  g / (1 + exp(-z)) first, then times u: where exp(-z) is +inf (g very
    negative) the quotient is -0 and stays finite times any u; g * u first
    could be -inf there, and -inf / inf is NaN. */
static inline vf_t s_gated (vf_t g, vf_t u, int64_t act)
{
    vf_t z = act == 1 ? 1.59576912f * (g + 0.044715f * g * g * g) : g;
    return g / (1.0f + s_exp (-z)) * u;
}

void ak_kernel (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1], act = a->dims[2];
    const int64_t step = VEC * UNROLL, body = N - N % step;
    const float *x = AK_IN (a, 0);
    float *y = AK_OUT (a, 0);

    for (int64_t m = 0; m < M; m++) {
        const float *gr = x + m * 2 * N, *ur = gr + N;
        float *yr = y + m * N;
        int64_t n;
        for (n = 0; n < body; n += step)
            for (int u = 0; u < UNROLL; u++)
                s_store (yr + n + u * VEC, s_gated (s_load (gr + n + u * VEC), s_load (ur + n + u * VEC), act));
        for (; n < N; n++) {
            const float g = gr[n];
            const float z = act == 1 ? 1.59576912f * (g + 0.044715f * g * g * g) : g;
            yr[n] = g / (1.0f + expf (-z)) * ur[n];
        }
    }
}
