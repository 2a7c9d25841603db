/*  cross_entropy, one pass over the logits (cuda).
    loss[r] = logsumexp(x[r]) - x[r][t_r],  t_r = (r * 2654435761u mod 2^32) % vocab

    A row belongs to 32*WPR threads of each of CL blocks (WPR warps: 1 is a
    warp per row, 32 a whole 1024-thread block; CL > 1, candidate
    row_cluster, sm_90: the blocks of a thread-block cluster share a row,
    each a contiguous part, combined through distributed shared memory),
    ROWS rows per block.  Each thread walks its part in steps of LOADS
    independent VECB-byte loads in flight (VECB 16: 128-bit loads) with the
    cache hint HINT (kernels/ak_kernel_cuda.h) and keeps an online (max,
    sum of exp(x - max)) pair: a step rescales the sum once when it raises
    the maximum, so the logits are read exactly once.  The row's maximum
    is then reduced, each thread's sum rescaled to it and the sums added
    (warp shuffles, shared memory, the cluster: an order fixed by WPR and
    CL, deterministic).  A grid smaller than the row groups (BPS > 0: a
    persistent grid of BPS blocks per SM) walks them with a stride.  Rows
    whose length is not a multiple of the access, or a buffer not aligned
    to it, take an element-wise path.
    Launch: grid [row groups or min(row groups, 132*BPS)] (times CL), block
    [32*WPR, ROWS], cluster [CL]. */
#ifndef WPR
#define WPR 4
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef VECB
#define VECB 16
#endif
#ifndef LOADS
#define LOADS 4
#endif
#ifndef HINT
#define HINT 0
#endif
#ifndef CL
#define CL 1
#endif

#define S_TPR (32 * WPR)                        /* threads per row and block */
#if CL > 1 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "CL > 1 needs thread-block clusters (sm_90 or newer)"
#endif
static_assert (LOADS >= 1 && LOADS <= 64, "LOADS must be 1..64");

typedef ak_vec_acc<VECB, HINT> s_vec_acc;
#define S_VEC ((int) s_vec_acc::N)              /* elements per access */

__device__ __forceinline__ float s_row_sum (float v, float (*red)[WPR], float (*cred)[ROWS], int *k)
{
    return ak_row_reduce<AK_RED_SUM, WPR, ROWS, CL> (v, red, cred, k);
}

__device__ __forceinline__ float s_row_max (float v, float (*red)[WPR], float (*cred)[ROWS], int *k)
{
    return ak_row_reduce<AK_RED_MAX, WPR, ROWS, CL> (v, red, cred, k);
}

/*  op on each element of the accesses c (loaded from access j0 on; those
    below n). */
template <typename A, typename F>
__device__ __forceinline__ void s_each (const typename A::u (&c)[LOADS], int j0, int n, F op)
{
#pragma unroll
    for (int i = 0; i < LOADS; i++)
        if (j0 + i * S_TPR < n) {
            float f[A::N];
            ak_unpack (c[i], f);
#pragma unroll
            for (int e = 0; e < A::N; e++)
                op (f[e]);
        }
}

/*  This thread's online (max, sum of exp(x - max)) over its accesses of
    [lo, hi) (A::N elements each); (-inf, 0) when it has none. */
template <typename A>
__device__ __forceinline__ void s_part (const ak_t *x, ak_i64 lo, ak_i64 hi, ak_u64 pol, float *m_p, float *s_p)
{
    typedef typename A::raw_t raw_t;
    typedef typename A::u vec_t;
    constexpr int C = LOADS;                     /* loads in flight */
    const raw_t *xv = (const raw_t *) x + lo + threadIdx.x;
    const int n = (int) (hi - lo) - (int) threadIdx.x;     /* this thread's accesses are j < n */
    float m = __int_as_float (0xff800000), s = 0.0f;
    for (int j0 = 0; j0 < n; j0 += C * S_TPR) {
        vec_t c[C];
#pragma unroll
        for (int i = 0; i < C; i++)
            if (j0 + i * S_TPR < n)
                c[i].raw = A::ld (xv + j0 + i * S_TPR, pol);
        float cm = m;
        s_each<A> (c, j0, n, [&] (float v) { cm = fmaxf (cm, v); });
        s *= __expf (m - cm);          /* m = -inf: s is 0 and stays 0 (cm is finite: i = 0 loaded) */
        m = cm;
        if (ak_exp_foldable (m)) {
            /* the chunk's sum against m2, times 2^-e: against m */
            const float m2 = m * AK_LOG2E;
            float p = 0.0f;
            s_each<A> (c, j0, n, [&] (float v) { p += ak_exp_fold (v, m2); });
            s = fmaf (p, exp2f (-ak_exp_fold_err (m, m2)), s);
        } else {
            s_each<A> (c, j0, n, [&] (float v) { s += __expf (v - m); });
        }
    }
    *m_p = m;
    *s_p = s;
}

extern "C" __global__ void __launch_bounds__ (S_TPR * ROWS) ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[ROWS][WPR];
    __shared__ float cred[2][ROWS];
    const ak_i64 B = a.dims[0], N = a.dims[1];
    ak_t *out = AK_OUT (a, 0);
    const ak_u64 pol = ak_hint_policy<HINT> ();
    const bool vec = N % S_VEC == 0 && ak_aligned (AK_IN (a, 0), VECB);
    const ak_i64 units = vec ? N / S_VEC : N;              /* accesses a row */
    ak_i64 plo, phi;                                       /* this block's part of a row */
    ak_row_part<CL> (units, &plo, &phi);
    const ak_i64 groups = (B + ROWS - 1) / ROWS;
    int k = 0;
    /* every block of a cluster walks the same groups: the loop and its
       barriers are uniform over the cluster */
    for (ak_i64 g = blockIdx.x / CL; g < groups; g += gridDim.x / CL) {
        const ak_i64 r = g * ROWS + threadIdx.y;
        const bool live = r < B;       /* a dead row's threads still join the barriers */
        const ak_t *x = AK_IN (a, 0) + (live ? r : 0) * N;
        const ak_i64 hi = live ? phi : plo;
        float m, s;
        if (vec)
            s_part<s_vec_acc> (x, plo, hi, pol, &m, &s);
        else
            s_part<ak_one_acc> (x, plo, hi, pol, &m, &s);
        const float rm = s_row_max (m, red, cred, &k);
        /* a thread without elements, or a dead row (rm = -inf), adds 0 */
        const float rs = s_row_sum (m == rm || s == 0.0f ? s : s * __expf (m - rm), red, cred, &k);
        if (live && plo == 0 && threadIdx.x == 0) {
            const ak_u32 target = ((ak_u32) r * 2654435761u) % (ak_u32) N;
            out[r] = ak_from_acc ((rm - ak_to_acc (x[target])) + logf (rs));
        }
    }
#if CL > 1
    ak_cluster_sync ();                /* no block leaves while another reads its cred */
#endif
}
