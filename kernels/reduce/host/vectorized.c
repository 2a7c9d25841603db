/*  reduce candidate (host): row sums with GCC/Clang vector extensions.
    sum[m] = sum_n x[m][n]

    VEC  lanes per vector: 1 (plain float) or 4 (one 16-byte SSE/NEON
         register; kernels are built without -march)
    ACC  vectors in flight per step, each its own partial sum, to break the
         add-latency chain of one running sum */
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

void ak_kernel (const ak_args_t *a)
{
    const int64_t M = a->dims[0], N = a->dims[1];
    const int64_t step = VEC * ACC, body = N - N % step;
    const float *x = AK_IN (a, 0);
    float *sum = AK_OUT (a, 0);

    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        vf_t acc[ACC];
        int64_t n;
        for (int k = 0; k < ACC; k++)
            acc[k] = (vf_t) {0};
        for (n = 0; n < body; n += step)
            for (int k = 0; k < ACC; k++)
                acc[k] += s_load (xr + n + k * VEC);
        for (int k = 1; k < ACC; k++)
            acc[0] += acc[k];
        float lanes[VEC], s = 0.0f;
        memcpy (lanes, &acc[0], sizeof lanes);
        for (int l = 0; l < VEC; l++)
            s += lanes[l];
        for (n = body; n < N; n++)
            s += xr[n];
        sum[m] = s;
    }
}
