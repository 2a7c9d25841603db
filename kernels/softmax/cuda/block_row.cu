/*  softmax, one block per row, the row read from memory once (cuda).
    y = exp(x - max) / sum(exp(x - max)).

    THREADS threads own a row; each loads its share with accesses of VEC
    contiguous elements (VEC 4 of float: one 128-bit load) and keeps up to
    CACHE elements (32 or 64) in registers, so the maximum, the sum of
    exponentials and the output all come from one read of x (1024 threads
    x 32 or 512 x 64 hold a whole 32768-element row: a 32000-token
    vocabulary).  A longer row re-reads the rest (from L1/L2).  Rows whose
    length is not a multiple of VEC, or buffers not aligned to the access,
    take a scalar path.  The maximum and the sum are reduced across the
    block (warp shuffles, then one value per warp through shared memory) in
    an order fixed by THREADS and VEC (CACHE only changes where elements
    come from), so results are deterministic.
    Launch: grid [rows], block [THREADS]; THREADS a multiple of 32. */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 1
#endif

#ifndef CACHE
#define CACHE 32
#endif

#define S_CACHE (CACHE / VEC)          /* accesses a thread keeps: CACHE elements */
static_assert (CACHE % VEC == 0, "VEC must divide CACHE");

/* The raw word one access moves: VEC elements. */
template <int BYTES> struct s_raw_of;
template <> struct s_raw_of<2>  { typedef unsigned short t; };
template <> struct s_raw_of<4>  { typedef unsigned int t; };
template <> struct s_raw_of<8>  { typedef uint2 t; };
template <> struct s_raw_of<16> { typedef uint4 t; };
typedef s_raw_of<VEC * sizeof (ak_t)>::t s_raw_t;

typedef union {
    enum { count = VEC };
    s_raw_t raw;
    ak_t    e[VEC];
} s_vec_t;

/*  op on each element of the cached accesses c (those of the row), then on
    each of the accesses beyond them, from memory. */
template <typename F>
__device__ __forceinline__ void s_each (const s_vec_t (&c)[S_CACHE], const s_raw_t *xv, ak_i64 nv, int t, F op)
{
#pragma unroll
    for (int i = 0; i < S_CACHE; i++)
        if (t + (ak_i64) i * THREADS < nv) {
            float f[VEC];
            ak_unpack (c[i], f);
#pragma unroll
            for (int k = 0; k < VEC; k++)
                op (f[k]);
        }
    for (ak_i64 j = t + (ak_i64) S_CACHE * THREADS; j < nv; j += THREADS) {
        s_vec_t v;
        float f[VEC];
        v.raw = __ldg (xv + j);
        ak_unpack (v, f);
#pragma unroll
        for (int k = 0; k < VEC; k++)
            op (f[k]);
    }
}

__device__ __forceinline__ float s_warp_max (float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float s_warp_sum (float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
    return v;
}

/*  Block-wide maximum (is_max) or sum of v; every thread gets it. */
__device__ __forceinline__ float s_block_reduce (float v, bool is_max, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = THREADS / 32;
    const float identity = is_max ? __int_as_float (0xff800000) : 0.0f;   /* -inf or 0 */
    v = is_max ? s_warp_max (v) : s_warp_sum (v);
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads ();
    v = lane < nwarps ? scratch[lane] : identity;
    v = is_max ? s_warp_max (v) : s_warp_sum (v);
    __syncthreads ();          /* scratch is reused by the next reduction */
    return v;
}

/*  The sum of exponentials and the output of a row whose maximum is m,
    from the cached accesses c and (beyond them) the row in memory. */
__device__ __forceinline__ void s_vec_rest (const s_vec_t (&c)[S_CACHE], const s_raw_t *xv, s_raw_t *yv, ak_i64 nv,
                                            int t, float m, float *scratch)
{
    const float m2 = m * AK_LOG2E;
    float sum = 0.0f;
    s_each (c, xv, nv, t, [&] (float v) { sum += ak_exp_fold (v, m2); });
    const float inv = 1.0f / s_block_reduce (sum, false, scratch);

#pragma unroll
    for (int i = 0; i < S_CACHE; i++) {
        const ak_i64 j = t + (ak_i64) i * THREADS;
        if (j < nv) {
            s_vec_t o;
            float f[VEC];
            ak_unpack (c[i], f);
#pragma unroll
            for (int k = 0; k < VEC; k++)
                f[k] = ak_exp_fold (f[k], m2) * inv;
            ak_pack (o, f);
            yv[j] = o.raw;
        }
    }
    for (ak_i64 j = t + (ak_i64) S_CACHE * THREADS; j < nv; j += THREADS) {
        s_vec_t v, o;
        float f[VEC];
        v.raw = __ldg (xv + j);
        ak_unpack (v, f);
#pragma unroll
        for (int k = 0; k < VEC; k++)
            f[k] = ak_exp_fold (f[k], m2) * inv;
        ak_pack (o, f);
        yv[j] = o.raw;
    }
}

/*  The same from memory, element by element, with __expf (x - m): rows
    not a multiple of the access or unaligned, and rows whose maximum is
    too large for ak_exp_fold. */
__device__ __forceinline__ void s_scalar_rest (const ak_t *x, ak_t *y, ak_i64 cols, int t, float m, float *scratch)
{
    float sum = 0.0f;
    for (ak_i64 c = t; c < cols; c += THREADS)
        sum += __expf (ak_to_acc (x[c]) - m);
    const float inv = 1.0f / s_block_reduce (sum, false, scratch);
    for (ak_i64 c = t; c < cols; c += THREADS)
        y[c] = ak_from_acc (__expf (ak_to_acc (x[c]) - m) * inv);
}

extern "C" __global__ void __launch_bounds__ (THREADS) ak_kernel (ak_cuda_args_t a)
{
    __shared__ float scratch[32];
    const ak_i64 cols = a.dims[1];
    const ak_i64 r = blockIdx.x;
    const int t = threadIdx.x;
    const ak_t *x = AK_IN (a, 0) + r * cols;
    ak_t *y = AK_OUT (a, 0) + r * cols;
    const float ninf = __int_as_float (0xff800000);

    if (cols % VEC == 0 && ((ak_u64) AK_IN (a, 0)) % sizeof (s_raw_t) == 0
        && ((ak_u64) AK_OUT (a, 0)) % sizeof (s_raw_t) == 0) {
        const ak_i64 nv = cols / VEC;
        const s_raw_t *xv = (const s_raw_t *) x;
        s_raw_t *yv = (s_raw_t *) y;
        s_vec_t c[S_CACHE];
#pragma unroll
        for (int i = 0; i < S_CACHE; i++) {
            const ak_i64 j = t + (ak_i64) i * THREADS;
            if (j < nv)
                c[i].raw = __ldg (xv + j);
        }
        float m = ninf;
        s_each (c, xv, nv, t, [&] (float v) { m = fmaxf (m, v); });
        m = s_block_reduce (m, true, scratch);
        if (ak_exp_foldable (m))
            s_vec_rest (c, xv, yv, nv, t, m, scratch);
        else                           /* a maximum beyond 2^24: rare, from memory */
            s_scalar_rest (x, y, cols, t, m, scratch);
    } else {
        float m = ninf;
        for (ak_i64 c = t; c < cols; c += THREADS)
            m = fmaxf (m, ak_to_acc (x[c]));
        m = s_block_reduce (m, true, scratch);
        s_scalar_rest (x, y, cols, t, m, scratch);
    }
}
