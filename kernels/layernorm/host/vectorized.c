/*  layernorm candidate (host): explicit SIMD with GCC/Clang vector
    extensions, as rmsnorm's.  y = (x - mean) / sqrt(var + 1e-5) * gamma + beta

    VEC  lanes per vector: 1 (plain float) or 4 (one 16-byte SSE/NEON
         register; kernels are built without -march)
    ACC  vectors in flight per step, each its own partial sum, to break the
         add-latency chain of one running sum (VEC * ACC lanes must fit the
         register file) */
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

static inline float s_hsum (vf_t v)
{
    float lanes[VEC], s = 0.0f;
    s_store (lanes, v);
    for (int l = 0; l < VEC; l++)
        s += lanes[l];
    return s;
}

void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], N = a->dims[1];
    const int64_t step = VEC * ACC, body = N - N % step;
    const float *x = AK_IN (a, 0), *gamma = AK_IN (a, 1), *beta = AK_IN (a, 2);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < B; r++) {
        const float *xr = x + r * N;
        float *yr = y + r * N;
        vf_t acc[ACC];
        int64_t n;

        /* the mean */
        for (int k = 0; k < ACC; k++)
            acc[k] = (vf_t) {0};
        for (n = 0; n < body; n += step)
            for (int k = 0; k < ACC; k++)
                acc[k] += s_load (xr + n + k * VEC);
        for (int k = 1; k < ACC; k++)
            acc[0] += acc[k];
        float sum = s_hsum (acc[0]);
        for (n = body; n < N; n++)
            sum += xr[n];
        const float mean = sum / (float) N;

        /* the variance, around the mean (no cancellation) */
        const vf_t vmean = (vf_t) {0} + mean;
        for (int k = 0; k < ACC; k++)
            acc[k] = (vf_t) {0};
        for (n = 0; n < body; n += step)
            for (int k = 0; k < ACC; k++) {
                vf_t d = s_load (xr + n + k * VEC) - vmean;
                acc[k] += d * d;
            }
        for (int k = 1; k < ACC; k++)
            acc[0] += acc[k];
        float sq = s_hsum (acc[0]);
        for (n = body; n < N; n++)
            sq += (xr[n] - mean) * (xr[n] - mean);

        const float rstd = 1.0f / sqrtf (sq / (float) N + 1e-5f);
        for (n = 0; n + VEC <= N; n += VEC)
            s_store (yr + n, (s_load (xr + n) - vmean) * rstd * s_load (gamma + n) + s_load (beta + n));
        for (; n < N; n++)
            yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
    }
}
