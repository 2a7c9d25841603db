/*  softmax candidate (host): explicit SIMD with GCC/Clang vector extensions.

    VEC  lanes per vector: 1 (plain float) or 4 (one 16-byte SSE/NEON
         register; wider vectors would change the calling convention
         without AVX, and kernels are built without -march)
    ACC  vectors in flight per step, each its own accumulator in the max and
         sum reductions, to break the dependency chain of one running
         max / sum (VEC * ACC lanes must fit the register file)

    exp is computed inline (Cody-Waite range reduction, degree-6 polynomial,
    relative error about 2e-7) so that it vectorizes; libm's expf does not.
    Its argument is x - rowmax <= 0, clamped at -87.3 so 2^n stays normal. */
#ifndef VEC
#define VEC 4
#endif
#ifndef ACC
#define ACC 2
#endif

#if VEC == 1
typedef float    vf_t;
typedef uint32_t vu_t;
static inline vf_t s_max (vf_t a, vf_t b) { return a < b ? b : a; }
#else
typedef float    vf_t __attribute__ ((vector_size (VEC * sizeof (float))));
typedef uint32_t vu_t __attribute__ ((vector_size (VEC * sizeof (uint32_t))));
static inline vf_t s_max (vf_t a, vf_t b)
{
    vu_t m = (vu_t) (a < b);
    return (vf_t) (((vu_t) a & ~m) | ((vu_t) b & m));
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

static inline vu_t s_bits (vf_t x)
{
    vu_t u;
    memcpy (&u, &x, sizeof u);
    return u;
}

static inline vf_t s_float (vu_t u)
{
    vf_t x;
    memcpy (&x, &u, sizeof x);
    return x;
}

static inline vf_t s_exp (vf_t x)
{
    const vf_t magic = (vf_t) {0} + 12582912.0f;        /* 1.5 * 2^23: rounds */
    x = s_max (x, (vf_t) {0} - 87.3f);
    vf_t t = x * 1.44269504f + magic;
    vf_t n = t - magic;
    vu_t e = s_bits (t) - s_bits (magic);               /* n, two's complement */
    vf_t r = x - n * 0.693145752f;
    r = r - n * 1.42860677e-6f;
    vf_t p = r * (1.0f / 720) + (1.0f / 120);
    p = p * r + (1.0f / 24);
    p = p * r + (1.0f / 6);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * s_float ((e + 127u) << 23);
}

/* Sum or max of every lane of the ACC accumulators. */
static inline float s_reduce (const vf_t *acc, int is_max)
{
    float lanes[ACC * VEC];
    memcpy (lanes, acc, sizeof lanes);
    float r = lanes[0];
    for (int i = 1; i < ACC * VEC; i++)
        r = is_max ? (lanes[i] > r ? lanes[i] : r) : r + lanes[i];
    return r;
}

void ak_kernel (const ak_args_t *a)
{
    const int64_t rows = a->dims[0], cols = a->dims[1];
    const int64_t step = VEC * ACC, body = cols - cols % step;
    const float *x = AK_IN (a, 0);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        vf_t acc[ACC];
        int64_t c;

        for (int k = 0; k < ACC; k++)
            acc[k] = (vf_t) {0} - INFINITY;
        for (c = 0; c < body; c += step)
            for (int k = 0; k < ACC; k++)
                acc[k] = s_max (acc[k], s_load (xr + c + k * VEC));
        float m = s_reduce (acc, 1);
        for (c = body; c < cols; c++)
            m = xr[c] > m ? xr[c] : m;

        for (int k = 0; k < ACC; k++)
            acc[k] = (vf_t) {0};
        for (c = 0; c < body; c += step)
            for (int k = 0; k < ACC; k++) {
                vf_t e = s_exp (s_load (xr + c + k * VEC) - m);
                s_store (yr + c + k * VEC, e);
                acc[k] += e;
            }
        float sum = s_reduce (acc, 0);
        /* The tail in padded vectors, so it uses the same exp. */
        for (c = body; c < cols; c += VEC) {
            int64_t n = cols - c < VEC ? cols - c : VEC;
            float in[VEC], out[VEC];
            for (int l = 0; l < VEC; l++)
                in[l] = l < n ? xr[c + l] : m;
            s_store (out, s_exp (s_load (in) - m));
            for (int64_t l = 0; l < n; l++) {
                yr[c + l] = out[l];
                sum += out[l];
            }
        }

        const float inv = 1.0f / sum;
        for (c = 0; c + VEC <= cols; c += VEC)
            s_store (yr + c, s_load (yr + c) * inv);
        for (; c < cols; c++)
            yr[c] *= inv;
    }
}
