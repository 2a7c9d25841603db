/*  rotate_qk, token-major (cuda).  Rotary embedding of q[B][S][HQ][D] and
    k[B][S][HK][D] at positions pos[B][S], half-split (layout 1) or
    interleaved (layout 2) pairs, base theta (see ref.c).

    A thread owns one token and a few pair indices, and walks the token's
    heads, q then k: the cosine and sine of a_i = p * theta^(-2i/D) depend
    on (p, i) only, so they are made once for (HQ + HK) / HSPLIT rows, and
    the position is read once per token.  The angle is formed and reduced
    to [-pi, pi] in double (in float it would be off by up to p * 2^-24
    radians), then __sincosf on the reduced float.  Each access moves VECB
    bytes (VECB 16: 128-bit loads and stores of 4 floats or 8 halves): from
    both halves of the row (layout 1), or a run of whole pairs (layout 2).

    TX      threads along the pair index (threads beyond the row's pairs
            idle)
    TPB     tokens per block (threadIdx.y)
    HSPLIT  blocks sharing a token's heads (gridDim.z): more blocks for
            decode steps (one token a sequence), at the price of computing
            the angles again
    VECB    bytes per access: 4, 8 or 16

    Rows that are not a multiple of two accesses, buffers not aligned to
    the access, and interleaved pairs with one element an access take a
    scalar path; an odd D's last element passes through.  No reductions:
    results do not depend on the configuration.
    Launch: grid [(B*S+TPB-1)/TPB, 1, HSPLIT], block [TX, TPB]. */
#ifndef TX
#define TX 32
#endif
#ifndef TPB
#define TPB 2
#endif
#ifndef HSPLIT
#define HSPLIT 1
#endif
#ifndef VECB
#define VECB 16
#endif

#define S_VEC (VECB / (int) sizeof (ak_t))       /* elements per access */
#define S_PAIRS ((S_VEC + 1) / 2)                /* interleaved pairs per access (arrays >= 1) */

#if VECB == 16
typedef uint4 s_raw_t;
#elif VECB == 8
typedef uint2 s_raw_t;
#elif VECB == 4
typedef unsigned int s_raw_t;
#else
#error "VECB must be 4, 8 or 16"
#endif
static_assert (S_VEC >= 1, "VECB must hold a whole element");

typedef union {
    s_raw_t raw;
    ak_t    e[S_VEC];
} s_vec_t;

/*  cos and sin of p * inv: the product and its reduction by 2 pi in
    double, the reduced angle (|r| <= pi) in float. */
__device__ __forceinline__ void s_sincos (ak_i64 p, double inv, float *sn, float *c)
{
    const double ang = (double) p * inv;
    const double k = rint (ang * 0.15915494309189535);          /* 1 / (2 pi) */
    const float r = (float) fma (-k, 6.283185307179586, ang);
    __sincosf (r, sn, c);
}

/*  theta^(-2i/D) as exp2 of the exponent times log2(theta) (within an ulp
    or two of the oracle's pow in double). */
__device__ __forceinline__ double s_inv_freq (ak_i64 i, ak_i64 D, double log2_theta)
{
    return exp2 (-2.0 * (double) i / (double) D * log2_theta);
}

/*  Row h of token t: the q heads first, then the k heads. */
__device__ __forceinline__ const ak_t *s_src (const ak_cuda_args_t &a, ak_i64 t, ak_i64 h,
                                              ak_i64 HQ, ak_i64 HK, ak_i64 D)
{
    return h < HQ ? AK_IN (a, 0) + (t * HQ + h) * D : AK_IN (a, 1) + (t * HK + h - HQ) * D;
}

__device__ __forceinline__ ak_t *s_dst (const ak_cuda_args_t &a, ak_i64 t, ak_i64 h,
                                        ak_i64 HQ, ak_i64 HK, ak_i64 D)
{
    return h < HQ ? AK_OUT (a, 0) + (t * HQ + h) * D : AK_OUT (a, 1) + (t * HK + h - HQ) * D;
}

extern "C" __global__ void __launch_bounds__ (TX * TPB) ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 B = a.dims[0], S = a.dims[1], HQ = a.dims[2], HK = a.dims[3], D = a.dims[4];
    const bool il = a.dims[5] == 2;
    const ak_i64 t = (ak_i64) blockIdx.x * TPB + threadIdx.y;
    if (t >= B * S)
        return;                        /* no barriers below */
    const float pf = fminf (fmaxf (ak_to_acc (AK_IN (a, 2)[t]), 0.0f), 1048575.0f);
    const ak_i64 p = (ak_i64) floorf (pf);
    const double lt = log2 ((double) a.dims[6]);
    const ak_i64 H = HQ + HK, half = D / 2;
    const bool aligned = ((ak_u64) AK_IN (a, 0)) % VECB == 0 && ((ak_u64) AK_IN (a, 1)) % VECB == 0
                         && ((ak_u64) AK_OUT (a, 0)) % VECB == 0 && ((ak_u64) AK_OUT (a, 1)) % VECB == 0;

    if (aligned && D % (2 * S_VEC) == 0 && !il) {
        for (ak_i64 p0 = (ak_i64) threadIdx.x * S_VEC; p0 < half; p0 += (ak_i64) TX * S_VEC) {
            float c[S_VEC], sn[S_VEC];
#pragma unroll
            for (int k = 0; k < S_VEC; k++)
                s_sincos (p, s_inv_freq (p0 + k, D, lt), &sn[k], &c[k]);
#pragma unroll 4
            for (ak_i64 h = blockIdx.z; h < H; h += HSPLIT) {
                const ak_t *x = s_src (a, t, h, HQ, HK, D);
                ak_t *y = s_dst (a, t, h, HQ, HK, D);
                s_vec_t u, v, o1, o2;
                u.raw = __ldg ((const s_raw_t *) (x + p0));
                v.raw = __ldg ((const s_raw_t *) (x + half + p0));
#pragma unroll
                for (int k = 0; k < S_VEC; k++) {
                    const float x1 = ak_to_acc (u.e[k]), x2 = ak_to_acc (v.e[k]);
                    o1.e[k] = ak_from_acc (x1 * c[k] - x2 * sn[k]);
                    o2.e[k] = ak_from_acc (x2 * c[k] + x1 * sn[k]);
                }
                *(s_raw_t *) (y + p0) = o1.raw;
                *(s_raw_t *) (y + half + p0) = o2.raw;
            }
        }
    } else if (aligned && D % (2 * S_VEC) == 0 && il && S_VEC % 2 == 0) {
        for (ak_i64 e0 = (ak_i64) threadIdx.x * S_VEC; e0 < D; e0 += (ak_i64) TX * S_VEC) {
            float c[S_PAIRS], sn[S_PAIRS];
#pragma unroll
            for (int k = 0; k < S_VEC / 2; k++)
                s_sincos (p, s_inv_freq (e0 / 2 + k, D, lt), &sn[k], &c[k]);
#pragma unroll 4
            for (ak_i64 h = blockIdx.z; h < H; h += HSPLIT) {
                const ak_t *x = s_src (a, t, h, HQ, HK, D);
                ak_t *y = s_dst (a, t, h, HQ, HK, D);
                s_vec_t u, o;
                u.raw = __ldg ((const s_raw_t *) (x + e0));
#pragma unroll
                for (int k = 0; k < S_VEC / 2; k++) {
                    const float x1 = ak_to_acc (u.e[2 * k]), x2 = ak_to_acc (u.e[2 * k + 1]);
                    o.e[2 * k] = ak_from_acc (x1 * c[k] - x2 * sn[k]);
                    o.e[2 * k + 1] = ak_from_acc (x2 * c[k] + x1 * sn[k]);
                }
                *(s_raw_t *) (y + e0) = o.raw;
            }
        }
    } else {
        for (ak_i64 i = threadIdx.x; i < half; i += TX) {
            float c, sn;
            s_sincos (p, s_inv_freq (i, D, lt), &sn, &c);
            const ak_i64 ia = il ? 2 * i : i, ib = il ? 2 * i + 1 : i + half;
            for (ak_i64 h = blockIdx.z; h < H; h += HSPLIT) {
                const ak_t *x = s_src (a, t, h, HQ, HK, D);
                ak_t *y = s_dst (a, t, h, HQ, HK, D);
                const float x1 = ak_to_acc (x[ia]), x2 = ak_to_acc (x[ib]);
                y[ia] = ak_from_acc (x1 * c - x2 * sn);
                y[ib] = ak_from_acc (x2 * c + x1 * sn);
            }
        }
        if (D % 2 && threadIdx.x == 0)
            for (ak_i64 h = blockIdx.z; h < H; h += HSPLIT)
                s_dst (a, t, h, HQ, HK, D)[D - 1] = s_src (a, t, h, HQ, HK, D)[D - 1];
    }
}
