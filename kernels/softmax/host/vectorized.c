/*  softmax candidate (host): explicit SIMD with GCC/Clang vector extensions.

    VEC  lanes per vector: 1 (scalar code through the same path) or 4 (one
         16-byte SSE/NEON register; wider vectors would change the calling
         convention without AVX, and the kernels are built without -march)
    ACC  vectors in flight per step, each its own accumulator in the max
         and sum reductions, to break the dependency chain of one running
         max / sum (VEC * ACC lanes must fit the register file)

    exp is computed inline (Cody-Waite range reduction, degree-6 polynomial,
    relative error about 2e-7) so that it vectorizes; libm's expf does not.
    Inputs to exp are x - rowmax <= 0, clamped at -87.3 so 2^n stays normal. */
#ifndef VEC
#define VEC 4
#endif
#ifndef ACC
#define ACC 2
#endif

typedef float   vf_t __attribute__ ((vector_size (VEC * sizeof (float))));
typedef int32_t vi_t __attribute__ ((vector_size (VEC * sizeof (int32_t))));
typedef float   sf_t __attribute__ ((vector_size (sizeof (float))));
typedef int32_t si_t __attribute__ ((vector_size (sizeof (int32_t))));

/* exp for one vector type; generated twice: VEC lanes and one lane (tails). */
#define AK_DEFINE_EXP(fn, vf, vi)                                              \
static inline vf fn (vf x)                                                     \
{                                                                              \
    const vf lo = (vf) {0} + -87.3f;                                           \
    vi below = x < lo;                                                         \
    x = (vf) (((vi) x & ~below) | ((vi) lo & below));                          \
    const vf magic = (vf) {0} + 12582912.0f;       /* 1.5 * 2^23: rounds */     \
    vf t = x * 1.44269504f + magic;                                            \
    vf n = t - magic;                                                          \
    vi ni = (vi) t - (vi) magic;                                               \
    vf r = x - n * 0.693145752f;                                               \
    r = r - n * 1.42860677e-6f;                                                \
    vf p = r * (1.0f / 720) + (1.0f / 120);                                    \
    p = p * r + (1.0f / 24);                                                   \
    p = p * r + (1.0f / 6);                                                    \
    p = p * r + 0.5f;                                                          \
    p = p * r + 1.0f;                                                          \
    p = p * r + 1.0f;                                                          \
    vf scale = (vf) ((ni + 127) << 23);                                        \
    return p * scale;                                                          \
}
AK_DEFINE_EXP (s_expv, vf_t, vi_t)
AK_DEFINE_EXP (s_exp1, sf_t, si_t)

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

static inline vf_t s_max (vf_t a, vf_t b)
{
    vi_t m = a < b;
    return (vf_t) (((vi_t) a & ~m) | ((vi_t) b & m));
}

static inline float s_exp (float x)
{
    sf_t v = { x };
    return s_exp1 (v)[0];
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
        float m = -INFINITY;
        for (int k = 0; k < ACC; k++)
            for (int l = 0; l < VEC; l++)
                m = acc[k][l] > m ? acc[k][l] : m;
        for (c = body; c < cols; c++)
            m = xr[c] > m ? xr[c] : m;

        for (int k = 0; k < ACC; k++)
            acc[k] = (vf_t) {0};
        for (c = 0; c < body; c += step)
            for (int k = 0; k < ACC; k++) {
                vf_t e = s_expv (s_load (xr + c + k * VEC) - m);
                s_store (yr + c + k * VEC, e);
                acc[k] += e;
            }
        float sum = 0.0f;
        for (int k = 0; k < ACC; k++)
            for (int l = 0; l < VEC; l++)
                sum += acc[k][l];
        for (c = body; c < cols; c++) {
            yr[c] = s_exp (xr[c] - m);
            sum += yr[c];
        }

        const float inv = 1.0f / sum;
        for (c = 0; c + VEC <= cols; c += VEC)
            s_store (yr + c, s_load (yr + c) * inv);
        for (; c < cols; c++)
            yr[c] *= inv;
    }
}
