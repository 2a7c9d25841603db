/*  layernorm, each row read from memory once (cuda).
    y = (x - mean) / sqrt(var + 1e-5) * gamma + beta.

    A row belongs to 32*WPR threads of each of CL blocks (WPR warps: 1 is a
    warp per row, for short rows; 32 is a whole 1024-thread block), ROWS
    rows per block.  CL > 1 (candidate row_cluster, sm_90): the CL blocks of
    a thread-block cluster share a row, each a contiguous part of it, and
    combine their partial sums through distributed shared memory: long rows
    get CL times the threads and bytes in flight.  Each thread loads its
    share with VECB-byte accesses (VECB 16: one 128-bit load of 4 floats or
    8 halves), issues LOADS of them at once and keeps them in registers, so
    the mean, the variance around the mean (two passes: no cancellation)
    and the output all come from one read of x; what a part holds beyond
    32*WPR*LOADS accesses is re-read (from L1/L2).  x is loaded and y
    stored with the cache hint HINT (kernels/ak_kernel_cuda.h: 0 plain nc,
    1 L1::no_allocate + streaming stores, 2 and L2 evict_first, 3 and L2
    256-byte prefetch); gamma and beta, read by every row, plainly.  A grid
    smaller than the row groups (BPS > 0: a persistent grid of BPS blocks
    per SM) walks them with a stride.  Rows whose length is not a multiple
    of the access, or buffers not aligned to it, take an element-wise path
    with the same structure.  Sums go through warp shuffles, shared memory
    and the cluster in an order fixed by WPR and CL: deterministic.
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

/*  One row part: accesses [lo, hi) of the row (A::N elements each); an
    empty part (a dead row) still joins every reduction. */
template <typename A>
__device__ __forceinline__ void s_row (const ak_t *x, const ak_t *gamma, const ak_t *beta, ak_t *y,
                                       ak_i64 lo, ak_i64 hi, float inv_n, float (*red)[WPR],
                                       float (*cred)[ROWS], int *k, ak_u64 pol)
{
    typedef typename A::raw_t raw_t;
    typedef typename A::u vec_t;
    constexpr int C = LOADS;                     /* accesses a thread keeps */
    /* 32-bit indices from the part's start: one base register a stream,
       the cached accesses at constant offsets from it */
    const raw_t *xv = (const raw_t *) x + lo + threadIdx.x, *gv = (const raw_t *) gamma + lo + threadIdx.x,
                *bv = (const raw_t *) beta + lo + threadIdx.x;
    raw_t *yv = (raw_t *) y + lo + threadIdx.x;
    const int n = (int) (hi - lo) - (int) threadIdx.x;     /* this thread's accesses are i*S_TPR < n */
    vec_t c[C];
#pragma unroll
    for (int i = 0; i < C; i++)
        if (i * S_TPR < n)
            c[i].raw = A::ld (xv + i * S_TPR, pol);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < C; i++)
        if (i * S_TPR < n) {
            float f[A::N];
            ak_unpack (c[i], f);
#pragma unroll
            for (int e = 0; e < A::N; e++)
                sum += f[e];
        }
    for (int j = C * S_TPR; j < n; j += S_TPR) {
        vec_t v;
        float f[A::N];
        v.raw = A::ld (xv + j, pol);
        ak_unpack (v, f);
#pragma unroll
        for (int e = 0; e < A::N; e++)
            sum += f[e];
    }
    const float mean = s_row_sum (sum, red, cred, k) * inv_n;

    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < C; i++)
        if (i * S_TPR < n) {
            float f[A::N];
            ak_unpack (c[i], f);
#pragma unroll
            for (int e = 0; e < A::N; e++) {
                const float d = f[e] - mean;
                sq += d * d;
            }
        }
    for (int j = C * S_TPR; j < n; j += S_TPR) {
        vec_t v;
        float f[A::N];
        v.raw = A::ld (xv + j, pol);
        ak_unpack (v, f);
#pragma unroll
        for (int e = 0; e < A::N; e++) {
            const float d = f[e] - mean;
            sq += d * d;
        }
    }
    const float rstd = rsqrtf (s_row_sum (sq, red, cred, k) * inv_n + 1e-5f);

#pragma unroll
    for (int i = 0; i < C; i++)
        if (i * S_TPR < n) {
            vec_t g, b, o;
            float f[A::N], fg[A::N], fb[A::N];
            g.raw = A::ld_keep (gv + i * S_TPR);
            b.raw = A::ld_keep (bv + i * S_TPR);
            ak_unpack (c[i], f);
            ak_unpack (g, fg);
            ak_unpack (b, fb);
#pragma unroll
            for (int e = 0; e < A::N; e++)
                f[e] = (f[e] - mean) * rstd * fg[e] + fb[e];
            ak_pack (o, f);
            A::st (yv + i * S_TPR, o.raw, pol);
        }
    for (int j = C * S_TPR; j < n; j += S_TPR) {
        vec_t v, g, b, o;
        float f[A::N], fg[A::N], fb[A::N];
        v.raw = A::ld (xv + j, pol);
        g.raw = A::ld_keep (gv + j);
        b.raw = A::ld_keep (bv + j);
        ak_unpack (v, f);
        ak_unpack (g, fg);
        ak_unpack (b, fb);
#pragma unroll
        for (int e = 0; e < A::N; e++)
            f[e] = (f[e] - mean) * rstd * fg[e] + fb[e];
        ak_pack (o, f);
        A::st (yv + j, o.raw, pol);
    }
}

extern "C" __global__ void __launch_bounds__ (S_TPR * ROWS) ak_kernel (ak_cuda_args_t a)
{
    __shared__ float red[ROWS][WPR];
    __shared__ float cred[2][ROWS];
    const ak_i64 B = a.dims[0], N = a.dims[1];
    const ak_t *gamma = AK_IN (a, 1), *beta = AK_IN (a, 2);
    const float inv_n = 1.0f / (float) N;
    const ak_u64 pol = ak_hint_policy<HINT> ();
    const bool vec = N % S_VEC == 0 && ak_aligned (AK_IN (a, 0), VECB) && ak_aligned (gamma, VECB)
                     && ak_aligned (beta, VECB) && ak_aligned (AK_OUT (a, 0), VECB);
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
        ak_t *y = AK_OUT (a, 0) + (live ? r : 0) * N;
        const ak_i64 hi = live ? phi : plo;
        const ak_t *gm = gamma, *bt = beta;
        /* opaque per row: gamma and beta are not hoisted out of the loop
           into registers (that costs occupancy, and they come from L1/L2) */
        asm volatile ("" : "+l"(gm), "+l"(bt));
        if (vec)
            s_row<s_vec_acc> (x, gm, bt, y, plo, hi, inv_n, red, cred, &k, pol);
        else
            s_row<ak_one_acc> (x, gm, bt, y, plo, hi, inv_n, red, cred, &k, pol);
    }
#if CL > 1
    ak_cluster_sync ();                /* no block leaves while another reads its cred */
#endif
}
