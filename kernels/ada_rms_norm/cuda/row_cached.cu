/*  ada_rms_norm, each row read from memory once (cuda).
    y = x / sqrt(mean(x^2) + 1e-6) * (1 + scale[b]) + shift[b], a row being
    one token of batch row b (scale and shift are shared by its T tokens,
    so they come from L2 after the first token reads them).

    A row belongs to 32*WPR threads (WPR warps: 1 is a warp per row, 32 a
    whole 1024-thread block per row), ROWS rows per block.  Each thread
    loads its share of the row with VECB-byte accesses (VECB 16: one
    128-bit load of 4 floats or 8 halves) and keeps up to 32 elements in
    registers for the output pass, so x is read from memory once; a row
    longer than 32*32*WPR elements re-reads the rest (from L1/L2).  Rows
    whose length is not a multiple of the access, or buffers not aligned to
    it, take a scalar path.  The sum of squares goes through warp shuffles
    and shared memory in an order fixed by WPR: deterministic.
    Launch: grid [(B*T+ROWS-1)/ROWS], block [32*WPR, ROWS]. */
#ifndef WPR
#define WPR 4
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef VECB
#define VECB 16
#endif

typedef ak_vec_t<VECB> s_vec_t;                   /* one access */
typedef s_vec_t::raw_t s_raw_t;
#define S_TPR   (32 * WPR)                          /* threads per row */
#define S_VEC   ((int) s_vec_t::count)              /* elements per access */
#define S_CACHE (32 / S_VEC)                        /* accesses a thread keeps: 32 elements */
static_assert (32 % S_VEC == 0, "VECB must divide 32 elements");

/* One access of output: x * inv * (1 + scale) + shift, element-wise. */
__device__ __forceinline__ s_raw_t s_out (const s_vec_t &v, float inv, const s_raw_t *sc, const s_raw_t *sh,
                                          ak_i64 j)
{
    s_vec_t s, b, o;
    s.raw = __ldg (sc + j);
    b.raw = __ldg (sh + j);
#pragma unroll
    for (int k = 0; k < S_VEC; k++)
        o.e[k] = ak_from_acc (ak_to_acc (v.e[k]) * inv * (1.0f + ak_to_acc (s.e[k])) + ak_to_acc (b.e[k]));
    return o.raw;
}

extern "C" __global__ void __launch_bounds__ (S_TPR * ROWS) ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[ROWS][WPR];
    const ak_i64 T = a.dims[1], N = a.dims[2];
    const ak_i64 M = a.dims[0] * T;
    const ak_i64 r = (ak_i64) blockIdx.x * ROWS + threadIdx.y;
    const bool live = r < M;           /* a dead row's threads still join the barriers */
    const ak_i64 rr = live ? r : 0;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + rr * N;
    const ak_t *sc = AK_IN (a, 1) + (rr / T) * N, *sh = AK_IN (a, 2) + (rr / T) * N;
    ak_t *y = AK_OUT (a, 0) + rr * N;

    if (N % S_VEC == 0 && ak_aligned (AK_IN (a, 0), VECB) && ak_aligned (AK_IN (a, 1), VECB)
        && ak_aligned (AK_IN (a, 2), VECB) && ak_aligned (AK_OUT (a, 0), VECB)) {
        const ak_i64 nv = live ? N / S_VEC : 0;
        const s_raw_t *xv = (const s_raw_t *) x, *scv = (const s_raw_t *) sc, *shv = (const s_raw_t *) sh;
        s_raw_t *yv = (s_raw_t *) y;
        s_vec_t c[S_CACHE];
#pragma unroll
        for (int i = 0; i < S_CACHE; i++) {
            const ak_i64 j = t + (ak_i64) i * S_TPR;
            if (j < nv)
                c[i].raw = __ldg (xv + j);
        }
        float ss = 0.0f;
#pragma unroll
        for (int i = 0; i < S_CACHE; i++)
            if (t + (ak_i64) i * S_TPR < nv)
#pragma unroll
                for (int k = 0; k < S_VEC; k++) {
                    const float e = ak_to_acc (c[i].e[k]);
                    ss += e * e;
                }
        for (ak_i64 j = t + (ak_i64) S_CACHE * S_TPR; j < nv; j += S_TPR) {
            s_vec_t v;
            v.raw = __ldg (xv + j);
#pragma unroll
            for (int k = 0; k < S_VEC; k++) {
                const float e = ak_to_acc (v.e[k]);
                ss += e * e;
            }
        }
        const float inv = rsqrtf (ak_row_sum<WPR> (ss, red) / (float) N + 1e-6f);

#pragma unroll
        for (int i = 0; i < S_CACHE; i++) {
            const ak_i64 j = t + (ak_i64) i * S_TPR;
            if (j < nv)
                yv[j] = s_out (c[i], inv, scv, shv, j);
        }
        for (ak_i64 j = t + (ak_i64) S_CACHE * S_TPR; j < nv; j += S_TPR) {
            s_vec_t v;
            v.raw = __ldg (xv + j);
            yv[j] = s_out (v, inv, scv, shv, j);
        }
    } else {
        const ak_i64 n_end = live ? N : 0;
        float ss = 0.0f;
        for (ak_i64 n = t; n < n_end; n += S_TPR) {
            const float e = ak_to_acc (x[n]);
            ss += e * e;
        }
        const float inv = rsqrtf (ak_row_sum<WPR> (ss, red) / (float) N + 1e-6f);
        for (ak_i64 n = t; n < n_end; n += S_TPR)
            y[n] = ak_from_acc (ak_to_acc (x[n]) * inv * (1.0f + ak_to_acc (sc[n])) + ak_to_acc (sh[n]));
    }
}
