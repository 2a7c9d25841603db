/*  gated_residual candidate (host): explicit SIMD with GCC/Clang vector
    extensions.  y = x + gate * h; gate [B][N] (G = 1) or [B][T][N] (G = 2).

    VEC     lanes per vector: 1 (plain float) or 4 (one 16-byte SSE/NEON
            register; kernels are built without -march)
    UNROLL  vectors per step, independent loads in flight */
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 2
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

void ak_kernel (const ak_args_t *a)
{
    const int64_t B = a->dims[0], T = a->dims[1], N = a->dims[2], G = a->dims[3];
    const int64_t step = VEC * UNROLL, body = N - N % step;
    const float *x = AK_IN (a, 0), *gate = AK_IN (a, 1), *h = AK_IN (a, 2);
    float *y = AK_OUT (a, 0);

    for (int64_t r = 0; r < B * T; r++) {
        const float *xr = x + r * N, *hr = h + r * N;
        const float *g = gate + (G == 1 ? r / T : r) * N;
        float *yr = y + r * N;
        int64_t n;
        for (n = 0; n < body; n += step) {
            vf_t vx[UNROLL], vg[UNROLL], vh[UNROLL];
            for (int u = 0; u < UNROLL; u++) {
                vx[u] = s_load (xr + n + u * VEC);
                vg[u] = s_load (g + n + u * VEC);
                vh[u] = s_load (hr + n + u * VEC);
            }
            for (int u = 0; u < UNROLL; u++)
                s_store (yr + n + u * VEC, vx[u] + vg[u] * vh[u]);
        }
        for (; n < N; n++)
            yr[n] = xr[n] + g[n] * hr[n];
    }
}
