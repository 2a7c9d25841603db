/*  rotary_embedding, position-major (cuda).  Rotate-half RoPE over
    x[B][H][S][D], theta base 10000 (see ref.c).

    A thread owns one position s and a few pair indices i, and walks the
    heads: the cosine and sine of a_i = s * 10000^(-2i/D) depend on (s, i)
    only, so they are made once and used for H / HSPLIT rows.  The angle
    is formed and reduced to [-pi, pi] in double (in float it would be off
    by up to s * 2^-24 radians), then __sincosf on the reduced float.
    Each access moves VECB bytes (VECB 16: 128-bit loads and stores of 4
    floats or 8 halves) from both halves of the row; HU heads are loaded
    at once (2*HU loads in flight a thread) before any is rotated, with
    the cache hint HINT (kernels/ak_kernel_cuda.h: 0 plain nc, 1
    L1::no_allocate + streaming stores, 2 and L2 evict_first, 3 and L2
    256-byte prefetch).

    TX      threads along the pair index (the row's D/2 pairs in accesses
            of VECB bytes; threads beyond them idle)
    SPB     positions per block (threadIdx.y)
    HSPLIT  blocks sharing a position's heads (gridDim.z): more blocks for
            short sequences, at the price of computing the angles again
    VECB    bytes per access: 4, 8 or 16
    HU      heads loaded at once (loads in flight: 2*HU a thread)
    HINT    cache hint of the loads of x and the stores of y

    Rows whose half is not a multiple of the access, or buffers not aligned
    to it, take a scalar path; an odd D's last element passes through.
    No reductions: results do not depend on the configuration's order.
    Launch: grid [(S+SPB-1)/SPB, B, HSPLIT], block [TX, SPB]. */
#ifndef TX
#define TX 32
#endif
#ifndef SPB
#define SPB 2
#endif
#ifndef HSPLIT
#define HSPLIT 1
#endif
#ifndef VECB
#define VECB 16
#endif

#ifndef HU
#define HU 4
#endif
#ifndef HINT
#define HINT 0
#endif

typedef ak_vec_acc<VECB, HINT> s_acc;
typedef s_acc::raw_t s_raw_t;
typedef s_acc::u s_vec_t;
#define S_VEC ((int) s_acc::N)                   /* elements per access */
static_assert (HU >= 1 && HU <= 16, "HU must be 1..16");

/*  cos and sin of s * inv: the product and its reduction by 2 pi in
    double, the reduced angle (|r| <= pi) in float. */
__device__ __forceinline__ void s_sincos (ak_i64 s, double inv, float *sn, float *c)
{
    const double ang = (double) s * inv;
    const double k = rint (ang * 0.15915494309189535);          /* 1 / (2 pi) */
    const float r = (float) fma (-k, 6.283185307179586, ang);
    __sincosf (r, sn, c);
}

/*  10000^(-2i/D) as exp2 (cheaper than pow; within an ulp or two of the
    oracle's pow in double, far below what float arithmetic resolves). */
__device__ __forceinline__ double s_inv_freq (ak_i64 i, ak_i64 D)
{
    return exp2 (-2.0 * (double) i / (double) D * 13.287712379549449);    /* log2(10000) */
}

/*  Both halves of HU heads from h0 on (stride HSPLIT) at x (the
    position's row of head 0, offset to the thread's pairs). */
__device__ __forceinline__ void s_load (s_vec_t (&u)[HU], s_vec_t (&v)[HU], const ak_t *x, ak_i64 h0, ak_i64 H,
                                        ak_i64 head, ak_i64 half, ak_u64 pol)
{
#pragma unroll
    for (int q = 0; q < HU; q++) {
        const ak_i64 h = h0 + (ak_i64) q * HSPLIT;
        if (h < H) {
            const ak_t *xr = x + h * head;
            u[q].raw = s_acc::ld ((const s_raw_t *) xr, pol);
            v[q].raw = s_acc::ld ((const s_raw_t *) (xr + half), pol);
        }
    }
}

extern "C" __global__ void __launch_bounds__ (TX * SPB) ak_kernel (ak_cuda_args_t a)
{
    const ak_i64 H = a.dims[1], S = a.dims[2], D = a.dims[3];
    const ak_i64 s = (ak_i64) blockIdx.x * SPB + threadIdx.y;
    if (s >= S)
        return;                        /* no barriers below */
    const ak_i64 b = blockIdx.y, half = D / 2, head = S * D;
    const ak_t *x0 = AK_IN (a, 0) + (b * H * S + s) * D;
    ak_t *y0 = AK_OUT (a, 0) + (b * H * S + s) * D;
    const ak_u64 pol = ak_hint_policy<HINT> ();

    if (D % (2 * S_VEC) == 0 && ((ak_u64) AK_IN (a, 0)) % VECB == 0
        && ((ak_u64) AK_OUT (a, 0)) % VECB == 0) {
        for (ak_i64 p0 = (ak_i64) threadIdx.x * S_VEC; p0 < half; p0 += (ak_i64) TX * S_VEC) {
            /* the first heads' loads go out before the angles are made:
               their latency hides the double-precision work */
            ak_i64 h0 = blockIdx.z;
            s_vec_t u[HU], v[HU];
            s_load (u, v, x0 + p0, h0, H, head, half, pol);
            float c[S_VEC], sn[S_VEC];
#pragma unroll
            for (int k = 0; k < S_VEC; k++)
                s_sincos (s, s_inv_freq (p0 + k, D), &sn[k], &c[k]);
            for (;;) {
#pragma unroll
                for (int q = 0; q < HU; q++) {
                    const ak_i64 h = h0 + (ak_i64) q * HSPLIT;
                    if (h < H) {
                        ak_t *yr = y0 + h * head;
                        s_vec_t o1, o2;
                        float x1[S_VEC], x2[S_VEC], f1[S_VEC], f2[S_VEC];
                        ak_unpack (u[q], x1);
                        ak_unpack (v[q], x2);
#pragma unroll
                        for (int k = 0; k < S_VEC; k++) {
                            f1[k] = x1[k] * c[k] - x2[k] * sn[k];
                            f2[k] = x2[k] * c[k] + x1[k] * sn[k];
                        }
                        ak_pack (o1, f1);
                        ak_pack (o2, f2);
                        s_acc::st ((s_raw_t *) (yr + p0), o1.raw, pol);
                        s_acc::st ((s_raw_t *) (yr + half + p0), o2.raw, pol);
                    }
                }
                h0 += (ak_i64) HSPLIT * HU;
                if (h0 >= H)
                    break;
                s_load (u, v, x0 + p0, h0, H, head, half, pol);
            }
        }
    } else {
        for (ak_i64 i = threadIdx.x; i < half; i += TX) {
            float c, sn;
            s_sincos (s, s_inv_freq (i, D), &sn, &c);
            for (ak_i64 h = blockIdx.z; h < H; h += HSPLIT) {
                const ak_t *xr = x0 + h * head;
                ak_t *yr = y0 + h * head;
                const float x1 = ak_to_acc (xr[i]), x2 = ak_to_acc (xr[i + half]);
                yr[i] = ak_from_acc (x1 * c - x2 * sn);
                yr[i + half] = ak_from_acc (x2 * c + x1 * sn);
            }
        }
        if (D % 2 && threadIdx.x == 0)
            for (ak_i64 h = blockIdx.z; h < H; h += HSPLIT)
                y0[h * head + D - 1] = x0[h * head + D - 1];
    }
}
