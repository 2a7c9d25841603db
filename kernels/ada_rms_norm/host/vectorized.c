/*  ada_rms_norm candidate (host): explicit SIMD with GCC/Clang vector
    extensions.  y = x / sqrt(mean(x^2) + 1e-6) * (1 + scale[b]) + shift[b].

    VEC  lanes per vector: 1 (plain float) or 4 (one 16-byte SSE/NEON
         register; kernels are built without -march)
    ACC  vectors in flight per step, each its own partial sum of squares,
         to break the add-latency chain of one running sum */
#ifndef VEC
#define VEC 4
#endif
#ifndef ACC
#define ACC 2
#endif

#if VEC == 1
typedef float vf_t;
#else
typedef float vf_t __attribute__ ((vector_size (VEC * sizeof (float))));
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

/* Sum of squares of one row: ACC vector accumulators, then the tail. */
static float s_sumsq (const float *xr, int64_t N)
{
    const int64_t step = VEC * ACC, body = N - N % step;
    vf_t acc[ACC];
    int64_t n;
    for (int k = 0; k < ACC; k++)
        acc[k] = (vf_t) {0};
    for (n = 0; n < body; n += step)
        for (int k = 0; k < ACC; k++) {
            vf_t v = s_load (xr + n + k * VEC);
            acc[k] += v * v;
        }
    for (int k = 1; k < ACC; k++)
        acc[0] += acc[k];
    float lanes[VEC], ss = 0.0f;
    s_store (lanes, acc[0]);
    for (int l = 0; l < VEC; l++)
        ss += lanes[l];
    for (n = body; n < N; n++)
        ss += xr[n] * xr[n];
    return ss;
}

void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], T = a->dims[1], N = a->dims[2];
    const float *x = AK_IN (a, 0), *scale = AK_IN (a, 1), *shift = AK_IN (a, 2);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < B * T; r++) {
        const float *xr = x + r * N, *sc = scale + (r / T) * N, *sh = shift + (r / T) * N;
        float *yr = y + r * N;
        const float inv = 1.0f / sqrtf (s_sumsq (xr, N) / (float) N + 1e-6f);
        int64_t n;
        for (n = 0; n + VEC <= N; n += VEC)
            s_store (yr + n, s_load (xr + n) * inv * (s_load (sc + n) + 1.0f) + s_load (sh + n));
        for (; n < N; n++)
            yr[n] = xr[n] * inv * (1.0f + sc[n]) + sh[n];
    }
}
