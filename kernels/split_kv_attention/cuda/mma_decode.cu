/*  split_kv_attention on tensor cores (cuda): mma.sync m16n8k16 for both
    products.  Masks, grouped-query rule and layout as ref.c (q, o
    [B][HQ][Q][D], k_cache, v_cache [B][HK][L][D]; 1 none, 2 causal, 3
    ragged causal; a query that sees no key has the output 0).

    Grid [row tiles of 16, splits, B*HK]: a block owns one KV head of one
    sequence, 16 query rows of that head's group ((HQ/HK) heads x Q
    tokens, head-major; rows past the group are padding) and one slice of
    the keys they see, in steps of 16 keys; warp w takes the slice's steps
    w, w+NW, ... and runs its own online softmax (no block barrier in the
    key loop).  Lane (g, t) = (lane/4, lane%4) holds, as the fragments of
    m16n8k16 say, rows g and g+8.  Per step of 16 keys, in one warp:
      S = Q K^T  two n-tiles of 8 keys, D/16 k-steps.  The reduction index
                 is permuted (a dot product does not care, as long as Q and
                 K agree): k-steps 2s and 2s+1 take the dims 32s .. 32s+31,
                 lane t the 8 dims 32s+8t .. 32s+8t+7 of its key (key g of
                 the n-tile) and of its two query rows: one 16-byte load a
                 row, 64-byte runs a key row across a quad
      soft       scaled into the exp2 domain, masked keys -inf; each row's
                 maximum over the quad (two shuffles), p = exp2(s - m), the
                 running sum kept per lane (added over the quad at the end)
      O += P V   P is the A operand straight from S's accumulators (rounded
                 to the element type), V the B operand: output n-tile j,
                 column g is dim g*(D/8) + j (a permutation of the output
                 dims), so lane (g, t) reads D/8 contiguous elements of
                 each of its four value rows (keys 2t, 2t+1, 2t+8, 2t+9)
                 and, at the end, holds dims t*D/4 .. t*D/4 + D/4 - 1
    Then the warps' partials (m, l, unnormalised O) are merged in warp
    order through shared memory, and the block's partial is the output (one
    split) or goes to the split merge: a module-scope workspace, an atomic
    count a tile, the last block merges splits 0 .. n-1 in order
    (flash_decode's scheme).  Every sum runs in a fixed order: no atomics
    on data, bitwise deterministic.  Launches of one loaded module must not
    run concurrently (the workers run one at a time).

    The tensor-core path takes float16 and bfloat16 with D 64 or 128 and
    16-byte aligned caches; anything else (float32, other D up to 256)
    runs a plain path in the same grid (a warp a query row, keys in order):
    correct, not fast.

    NW     warps a block
    WAVES  used by the launch rule only: splits so that the grid holds
           about WAVES x 132 blocks (an H200's SMs), capped so that each
           warp of a block has a step of 16 keys
    D <= 256 (a larger D, or a dynamic shared size below the partials',
    leaves the output unwritten: the gates say so).  Launch: grid
    [(((HQ+HK-1)/HK)*Q+15)/16, min(ceil(132*WAVES/C), ceil(L/(16*NW))),
    B*HK] with C = B*HK*row tiles, block [32*NW], shared
    (NW+1)*16*((D+7)/8*8+8)*4 bytes. */
#ifndef NW
#define NW 4
#endif
#ifndef WAVES
#define WAVES 2
#endif

#define M_ROWS 16                                     /* query rows a block: the MMA's M */
#define M_DMAX 256
#define M_MB 8                                        /* splits a batch of the merge's loads */
#define M_WS_FLOATS (1 << 23)
#define M_WS_GROUPS (1 << 16)
#define M_NEG_INF __int_as_float (0xff800000)
#if defined(AK_DTYPE_BFLOAT16) || defined(AK_DTYPE_FLOAT16)
#define M_TC 1
#else
#define M_TC 0
#endif

static_assert (NW >= 1 && NW <= 16, "NW must be 1..16");

__device__ __align__ (16) float m_ws[M_WS_FLOATS];
__device__ unsigned int m_cnt[M_WS_GROUPS];

/* What a block knows of its tile and slice. */
struct m_tile {
    ak_i64 b, h_lo, Q, HQ, D, nrows, r0, k0, k1;
    ak_i64 n[M_ROWS];                                 /* keys each row sees (0: a padding row) */
    const ak_t *q, *kb, *vb;
    float qscale;                                     /* log2(e)/sqrt(D) */
};

#if M_TC
/* c += a b on tensor cores: m16n8k16, f32 accumulators. */
__device__ __forceinline__ void m_mma (float *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                       unsigned b1)
{
#if defined(AK_DTYPE_BFLOAT16)
    asm volatile ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                  "{%0,%1,%2,%3};\n"
                  : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                  : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    asm volatile ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                  "{%0,%1,%2,%3};\n"
                  : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                  : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/* Two floats as a packed pair of the element type (lo in the low half). */
__device__ __forceinline__ unsigned m_pack (float lo, float hi)
{
#if defined(AK_DTYPE_BFLOAT16)
    __nv_bfloat162 v = __floats2bfloat162_rn (lo, hi);
#else
    __half2 v = __floats2half2_rn (lo, hi);
#endif
    return *(unsigned *) &v;
}

/* 16 bytes of row p at element e, zero when !ok. */
__device__ __forceinline__ uint4 m_ld16 (const ak_t *p, ak_i64 e, bool ok)
{
    return ok ? __ldg ((const uint4 *) (p + e)) : make_uint4 (0u, 0u, 0u, 0u);
}

__device__ __forceinline__ unsigned m_word (const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/*  One warp's steps over the slice on tensor cores; its partial (m, l and
    the unnormalised rows, WD floats a row) into part (16 rows). */
template <int D>
__device__ __forceinline__ void m_warp_tc (const m_tile &T, float *part, ak_i64 WD, int warp, int lane)
{
    constexpr int S = D / 32;                         /* k-step pairs */
    constexpr int NO = D / 8;                         /* output n-tiles */
    constexpr int VW = D / 64;                        /* 16-byte loads of a lane's part of a value row */
    const int g = lane >> 2, t = lane & 3;
    const ak_i64 rlo = g, rhi = g + 8;

    uint4 qa[S][2];                                   /* rows g, g+8: dims 32s+8t .. +7 */
#pragma unroll
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const ak_i64 gr = T.r0 + (h ? rhi : rlo);
            const bool ok = gr < T.nrows;
            const ak_i64 hh = T.h_lo + (ok ? gr / T.Q : 0), tt = ok ? gr % T.Q : 0;
            qa[s][h] = m_ld16 (T.q + ((T.b * T.HQ + hh) * T.Q + tt) * D, 32 * s + 8 * t, ok);
        }
    const ak_i64 nlo = T.n[rlo], nhi = T.n[rhi];

    float o[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++)
        o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = M_NEG_INF, m1 = M_NEG_INF, l0 = 0.0f, l1 = 0.0f;

    for (ak_i64 c0 = T.k0 + 16 * (ak_i64) warp; c0 < T.k1; c0 += 16 * (ak_i64) NW) {
        /* loads: K rows c0 + 8j + g, V rows c0 + {2t, 2t+1, 2t+8, 2t+9} */
        uint4 kr[2][S], vr[4][VW];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const ak_i64 key = c0 + 8 * j + g;
#pragma unroll
            for (int s = 0; s < S; s++)
                kr[j][s] = m_ld16 (T.kb + key * D, 32 * s + 8 * t, key < T.k1);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const ak_i64 key = c0 + 2 * t + (i & 1) + 8 * (i >> 1);
#pragma unroll
            for (int w = 0; w < VW; w++)
                vr[i][w] = m_ld16 (T.vb + key * D, g * NO + 8 * w, key < T.k1);
        }

        /* S = Q K^T */
        float sc[2][4];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
            for (int s = 0; s < S; s++) {
                m_mma (sc[j], qa[s][0].x, qa[s][1].x, qa[s][0].y, qa[s][1].y, kr[j][s].x, kr[j][s].y);
                m_mma (sc[j], qa[s][0].z, qa[s][1].z, qa[s][0].w, qa[s][1].w, kr[j][s].z, kr[j][s].w);
            }
        }

        /* soft: e 0, 1 row g; e 2, 3 row g+8; key c0 + 8j + 2t + (e & 1) */
        float mx0 = M_NEG_INF, mx1 = M_NEG_INF;
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const ak_i64 key = c0 + 8 * j + 2 * t + (e & 1);
                const ak_i64 n = e < 2 ? nlo : nhi;
                const float v = key < T.k1 && key < n ? sc[j][e] * T.qscale : M_NEG_INF;
                sc[j][e] = v;
                if (e < 2)
                    mx0 = fmaxf (mx0, v);
                else
                    mx1 = fmaxf (mx1, v);
            }
#pragma unroll
        for (int off = 1; off <= 2; off <<= 1) {
            mx0 = fmaxf (mx0, __shfl_xor_sync (0xffffffffu, mx0, off));
            mx1 = fmaxf (mx1, __shfl_xor_sync (0xffffffffu, mx1, off));
        }
        const float mn0 = fmaxf (m0, mx0), mn1 = fmaxf (m1, mx1);
        const float cr0 = mn0 == M_NEG_INF ? 1.0f : exp2f (m0 - mn0);
        const float cr1 = mn1 == M_NEG_INF ? 1.0f : exp2f (m1 - mn1);
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float mn = e < 2 ? mn0 : mn1;
                const float p = mn == M_NEG_INF ? 0.0f : exp2f (sc[j][e] - mn);
                sc[j][e] = p;
                if (e < 2)
                    ps0 += p;
                else
                    ps1 += p;
            }
        l0 = l0 * cr0 + ps0;
        l1 = l1 * cr1 + ps1;
        m0 = mn0;
        m1 = mn1;

        /* O = O*corr + P V */
        const unsigned pa0 = m_pack (sc[0][0], sc[0][1]), pa1 = m_pack (sc[0][2], sc[0][3]);
        const unsigned pa2 = m_pack (sc[1][0], sc[1][1]), pa3 = m_pack (sc[1][2], sc[1][3]);
#pragma unroll
        for (int j = 0; j < NO; j++) {
            o[j][0] *= cr0;
            o[j][1] *= cr0;
            o[j][2] *= cr1;
            o[j][3] *= cr1;
            /* element j of this lane's part of each value row: word j/2, half j%2 */
            const unsigned sel = (j & 1) ? 0x7632u : 0x5410u;
            const int w = (j / 2) / 4, wi = (j / 2) % 4;
            const unsigned b0 = __byte_perm (m_word (vr[0][w], wi), m_word (vr[1][w], wi), sel);
            const unsigned b1 = __byte_perm (m_word (vr[2][w], wi), m_word (vr[3][w], wi), sel);
            m_mma (o[j], pa0, pa1, pa2, pa3, b0, b1);
        }
    }

    /* the running sums over the quad; m is the same in its four lanes */
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
        l0 += __shfl_xor_sync (0xffffffffu, l0, off);
        l1 += __shfl_xor_sync (0xffffffffu, l1, off);
    }
    /* o[j][0], o[j][2]: dim (2t)*NO + j; o[j][1], o[j][3]: dim (2t+1)*NO + j */
#pragma unroll
    for (int j = 0; j < NO; j++) {
        part[rlo * WD + 2 * t * NO + j] = o[j][0];
        part[rlo * WD + (2 * t + 1) * NO + j] = o[j][1];
        part[rhi * WD + 2 * t * NO + j] = o[j][2];
        part[rhi * WD + (2 * t + 1) * NO + j] = o[j][3];
    }
    if (t == 0) {
        part[rlo * WD + WD - 8] = m0;
        part[rlo * WD + WD - 7] = l0;
        part[rhi * WD + WD - 8] = m1;
        part[rhi * WD + WD - 7] = l1;
    }
}
#endif

/*  The plain path: warp w takes rows w, w+NW, ... of the tile, keys in
    order, lane d%32 owning dims d; its rows' partials straight into part. */
__device__ void m_warp_plain (const m_tile &T, float *part, ak_i64 WD, int warp, int lane)
{
    for (int r = warp; r < M_ROWS; r += NW) {
        const ak_i64 gr = T.r0 + r;
        float qv[M_DMAX / 32], o[M_DMAX / 32];
        const ak_t *qr = T.q;
        if (gr < T.nrows)
            qr = T.q + ((T.b * T.HQ + T.h_lo + gr / T.Q) * T.Q + gr % T.Q) * T.D;
#pragma unroll
        for (int i = 0; i < M_DMAX / 32; i++) {
            const ak_i64 d = lane + 32 * i;
            qv[i] = gr < T.nrows && d < T.D ? ak_to_acc (qr[d]) * T.qscale : 0.0f;
            o[i] = 0.0f;
        }
        float m = M_NEG_INF, l = 0.0f;
        const ak_i64 kend = min (T.k1, T.n[r]);
        for (ak_i64 key = T.k0; key < kend; key++) {
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < M_DMAX / 32; i++) {
                const ak_i64 d = lane + 32 * i;
                if (d < T.D)
                    s += qv[i] * ak_to_acc (T.kb[key * T.D + d]);
            }
#pragma unroll
            for (int off = 16; off >= 1; off >>= 1)
                s += __shfl_xor_sync (0xffffffffu, s, off);
            const float mn = fmaxf (m, s), corr = exp2f (m - mn), p = exp2f (s - mn);
            l = l * corr + p;
            m = mn;
#pragma unroll
            for (int i = 0; i < M_DMAX / 32; i++) {
                const ak_i64 d = lane + 32 * i;
                o[i] = o[i] * corr + (d < T.D ? p * ak_to_acc (T.vb[key * T.D + d]) : 0.0f);
            }
        }
#pragma unroll
        for (int i = 0; i < M_DMAX / 32; i++) {
            const ak_i64 d = lane + 32 * i;
            if (d < T.D)
                part[r * WD + d] = o[i];
        }
        if (lane == 0) {
            part[r * WD + WD - 8] = m;
            part[r * WD + WD - 7] = l;
        }
    }
}

extern "C" __global__ void __launch_bounds__ (32 * NW, 1) ak_kernel (ak_cuda_args_t a)
{
    extern __shared__ __align__ (16) float m_part[];            /* [NW+1][16][WD]: the warps', the block's */
    __shared__ m_tile T;
    __shared__ int s_last;

    const ak_i64 Q = a.dims[1], HQ = a.dims[2], HK = a.dims[3];    /* B: gridDim.z / HK */
    const ak_i64 L = a.dims[4], D = a.dims[5], mask = a.dims[6];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const ak_i64 WD = (D + 7) / 8 * 8 + 8;                         /* floats a partial row */

    unsigned dyn;
    asm ("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    /* every early return below is uniform over the block (before any barrier) */
    if (D > M_DMAX || D < 1 || (ak_i64) dyn < (ak_i64) (NW + 1) * M_ROWS * WD * 4)
        return;

    const ak_i64 bk = blockIdx.z, b = bk / HK, kvh = bk % HK;
    const ak_i64 h_lo = (kvh * HQ + HK - 1) / HK, h_hi = ((kvh + 1) * HQ + HK - 1) / HK;
    const ak_i64 nrows = (h_hi - h_lo) * Q, r0 = (ak_i64) blockIdx.x * M_ROWS;
    if (r0 >= nrows)
        return;
    const bool causal = mask == 2 || mask == 3;
    const ak_i64 len = mask == 3 ? L - (ak_i64) ((ak_u32) ((ak_u32) b * 2654435761u) % (ak_u32) (L + 1)) : L;

    /* the keys the tile's rows see: the slices cover the most any row sees */
    ak_i64 nmax = 0;
    for (int r = 0; r < M_ROWS && r0 + r < nrows; r++) {
        const ak_i64 n = causal ? len - Q + 1 + (r0 + r) % Q : L;
        nmax = n > nmax ? n : nmax;
    }
    const ak_i64 tg = bk * gridDim.x + blockIdx.x;                 /* the split tile */
    const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
    const bool ws_ok = ngroups <= M_WS_GROUPS && ngroups * (ak_i64) gridDim.y * M_ROWS * WD <= M_WS_FLOATS;
    const ak_i64 steps = (nmax + 15) / 16;
    ak_i64 ns = ws_ok ? min ((ak_i64) gridDim.y, steps) : 1;
    if (ns < 1)
        ns = 1;
    const ak_i64 per = (steps + ns - 1) / ns;                      /* steps a slice */
    const ak_i64 nsplit = per > 0 ? (steps + per - 1) / per : 1;    /* none empty */
    const ak_i64 split = blockIdx.y;
    if (split >= nsplit)
        return;

    if (tid == 0) {
        T.b = b;
        T.h_lo = h_lo;
        T.Q = Q;
        T.HQ = HQ;
        T.D = D;
        T.nrows = nrows;
        T.r0 = r0;
        T.k0 = split * per * 16;
        T.k1 = min (nmax, T.k0 + per * 16);
        T.q = AK_IN (a, 0);
        T.kb = AK_IN (a, 1) + bk * L * D;
        T.vb = AK_IN (a, 2) + bk * L * D;
        T.qscale = 1.4426950408889634f / sqrtf ((float) D);
    }
    if (tid < M_ROWS) {
        const ak_i64 gr = r0 + tid;
        ak_i64 n = gr >= nrows ? 0 : causal ? len - Q + 1 + gr % Q : L;
        T.n[tid] = n < 0 ? 0 : n;
    }
    __syncthreads ();

    float *bpart = m_part + (ak_i64) NW * M_ROWS * WD;            /* the block's partial */
    bool tc = false;
#if M_TC
    tc = (D == 64 || D == 128) && ((ak_u64) T.kb) % 16 == 0 && ((ak_u64) T.vb) % 16 == 0
         && ((ak_u64) T.q) % 16 == 0;
    if (tc) {
        float *wpart = m_part + (ak_i64) warp * M_ROWS * WD;
        if (D == 128)
            m_warp_tc<128> (T, wpart, WD, warp, lane);
        else
            m_warp_tc<64> (T, wpart, WD, warp, lane);
        __syncthreads ();
        /* the warps in order (element (r, d) is one thread's) */
        for (int u = tid; u < M_ROWS * WD; u += 32 * NW) {
            const int r = u / (int) WD, d = u % (int) WD;
            if (d >= D && d != WD - 8 && d != WD - 7)
                continue;
            float M = M_NEG_INF;
            for (int w = 0; w < NW; w++)
                M = fmaxf (M, m_part[((ak_i64) w * M_ROWS + r) * WD + WD - 8]);
            float O = 0.0f;
            if (d == WD - 8)
                O = M;
            else if (M != M_NEG_INF)
                for (int w = 0; w < NW; w++) {
                    const float *pw = m_part + ((ak_i64) w * M_ROWS + r) * WD;
                    O += exp2f (pw[WD - 8] - M) * pw[d];
                }
            bpart[r * WD + d] = O;
        }
    }
#endif
    if (!tc)
        m_warp_plain (T, bpart, WD, warp, lane);
    __syncthreads ();

    ak_t *out = AK_OUT (a, 0);
    if (nsplit == 1) {
        for (int u = tid; u < M_ROWS * D; u += 32 * NW) {
            const int r = u / (int) D, d = u % (int) D;
            const ak_i64 gr = r0 + r;
            if (gr >= nrows)
                continue;
            const float lsum = bpart[r * WD + WD - 7];
            const ak_i64 h = h_lo + gr / Q, t = gr % Q;
            out[((b * HQ + h) * Q + t) * D + d] = ak_from_acc (lsum > 0.0f ? bpart[r * WD + d] / lsum : 0.0f);
        }
        return;
    }

    /* the split merge: the partial out, then the last block of the tile merges */
    float *wp = m_ws + (tg * gridDim.y + split) * M_ROWS * WD;
    for (int u = tid; u < M_ROWS * WD; u += 32 * NW)
        wp[u] = bpart[u];
    __threadfence ();
    __syncthreads ();
    if (tid == 0) {
        const unsigned int done = atomicAdd (&m_cnt[tg], 1u);
        s_last = done == (unsigned int) nsplit - 1;
        if (s_last)
            m_cnt[tg] = 0;                             /* every slice is in: ready for the next launch */
    }
    __syncthreads ();
    if (!s_last)
        return;
    __threadfence ();
    const float *w0 = m_ws + tg * gridDim.y * M_ROWS * WD;
    const ak_i64 sstride = (ak_i64) M_ROWS * WD;       /* from one split to the next */
    for (int u = tid; u < M_ROWS * D; u += 32 * NW) {
        const int r = u / (int) D, d = u % (int) D;
        const ak_i64 gr = r0 + r;
        if (gr >= nrows)
            continue;
        const float *wr = w0 + r * WD;
        /* the maximum, then the splits in order, M_MB loads in flight */
        const int nsp = (int) nsplit;
        float M = M_NEG_INF;
        for (int s = 0; s < nsp; s++)
            M = fmaxf (M, __ldcg (wr + s * sstride + WD - 8));
        float O = 0.0f, Ls = 0.0f;
        for (int s0 = 0; M != M_NEG_INF && s0 < nsp; s0 += M_MB) {
            float mv[M_MB], lv[M_MB], ov[M_MB];
#pragma unroll
            for (int i = 0; i < M_MB; i++) {
                const bool ok = s0 + i < nsp;
                const float *ws = wr + (ok ? s0 + i : 0) * sstride;
                mv[i] = ok ? __ldcg (ws + WD - 8) : M_NEG_INF;
                lv[i] = ok ? __ldcg (ws + WD - 7) : 0.0f;
                ov[i] = ok ? __ldcg (ws + d) : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < M_MB; i++) {
                const float f = exp2f (mv[i] - M);     /* 0 for a split that saw no key */
                O += f * ov[i];
                Ls += f * lv[i];
            }
        }
        const ak_i64 h = h_lo + gr / Q, t = gr % Q;
        out[((b * HQ + h) * Q + t) * D + d] = ak_from_acc (Ls > 0.0f ? O / Ls : 0.0f);
    }
}
