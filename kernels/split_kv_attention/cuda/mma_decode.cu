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
                 running sum kept per lane (added over the quad at the end);
                 O rescaled only when some row's maximum moved
      O += P V   P is the A operand straight from S's accumulators (rounded
                 to the element type), V the B operand: output n-tile j,
                 column g is dim g*(D/8) + j (a permutation of the output
                 dims), so lane (g, t) reads D/8 contiguous elements of
                 each of its four value rows (keys 2t, 2t+1, 2t+8, 2t+9)
                 and, at the end, holds dims t*D/4 .. t*D/4 + D/4 - 1
    A step whose 16 keys are all in the slice and seen by every real row
    of the tile (all but the slice's last and a causal tile's diagonal)
    runs without masks or load checks.  The query tile sits in shared
    memory (loaded while the first keys are on their way), which leaves
    the registers for the next step's keys and values: those loads are
    issued as the step frees registers (keys first, values after S), so
    one step's memory traffic overlaps the step before's math.
    Then the warps' partials (m, l, unnormalised O) are merged in warp
    order through shared memory, and the block's partial is the output (one
    split) or goes to the split merge: a module-scope workspace, an atomic
    count a tile, the last block merges splits 0 .. n-1 in order
    (flash_decode's scheme; here the maxima a warp a row, the splits'
    weights into shared memory, then a thread a row's 4 dims and a group of
    splits, every load unconditional so that a batch of them is in flight
    at once: on one sequence this merge is the kernel's tail, one block a
    KV head with the GPU otherwise idle).  Only the tile's real rows are
    merged and written.  Every sum runs in a fixed order: no atomics
    on data, bitwise deterministic.  Launches of one loaded module must not
    run concurrently (the workers run one at a time).

    The tensor-core path takes float16 and bfloat16 with D 64, 128 or 256
    and 16-byte aligned caches; anything else (float32, other D up to 256)
    runs a plain path in the same grid (a warp a query row, keys in order):
    correct, not fast.  At D 256 (pi0.5's attention) a warp cannot hold
    all of a row's output fragments and two steps of keys and values: the
    warps go in pairs, both of a pair take the same steps and make the
    same scores (so the same maxima and sums, bit for bit), and each owns
    half of the output dims (output n-tile j, column g is dim
    128h + 16g + j for the pair's warp h) and loads only that half of the
    values; the next step's keys are loaded after this step's P V instead
    of before its scores (254-255 registers, no spills, ptxas for sm_90).
    Under AK_CUDA_EMU (tests/unit/cuda_emu, test_cuda_cand_emu) its MMA
    goes through the CPU emulation (m_mma's hook).

    NW     warps a block (at D 256: NW/2 pairs)
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
#ifndef M_MB
#define M_MB 16                                       /* splits a batch of the split merge's loads */
#endif
#define M_MK 4                                        /* maxima a lane loads at once in the split merge */
#define M_WS_FLOATS (1 << 23)
#define M_WS_GROUPS (1 << 16)
#define M_QPAD 32                                     /* elements a query row in shared memory: D + M_QPAD,
                                                         rows g and g+1 16 banks apart (D 64, 128), the
                                                         16-byte loads conflict-free */
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
    ak_i64 nmin;                                      /* the fewest any real row sees */
    const ak_t *q, *kb, *vb;
    float qscale;                                     /* log2(e)/sqrt(D) */
};

#if M_TC
/* c += a b on tensor cores: m16n8k16, f32 accumulators.  Its own asm volatile, not
   ak_blocks_cuda.h's ak_mma_16816 (not volatile): the order of this kernel's build measured on
   the H200; the block changes its schedule (another cubin). */
__device__ __forceinline__ void m_mma (float *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                       unsigned b1)
{
#if defined(AK_CUDA_EMU)
    ak_emu_mma_16816 (c, a0, a1, a2, a3, b0, b1);     /* tests/unit/cuda_emu/emu.h */
#elif defined(AK_DTYPE_BFLOAT16)
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

/* 16 bytes of row p at element e, zero when !ok. */
__device__ __forceinline__ uint4 m_ld16 (const ak_t *p, ak_i64 e, bool ok)
{
    return ok ? __ldg ((const uint4 *) (p + e)) : make_uint4 (0u, 0u, 0u, 0u);
}

__device__ __forceinline__ unsigned m_word (const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/*  The loads of one step of 16 keys from c0: K rows c0 + 8j + g (m_k_load),
    V rows c0 + {2t, 2t+1, 2t+8, 2t+9} (m_v_load), at offsets fixed at
    compile time from one pointer each; zeros past the slice (checked only
    when ALL is false: ALL says every key of the step is in it). */
template <int D, bool ALL>
__device__ __forceinline__ void m_k_load (const ak_t *kb, ak_i64 c0, ak_i64 k1, int g, int t, uint4 (&kr)[2][D / 32])
{
    const ak_t *kp = kb + (c0 + g) * D + 8 * t;
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int s = 0; s < D / 32; s++)
            kr[j][s] = m_ld16 (kp, j * 8 * D + 32 * s, ALL || c0 + 8 * j + g < k1);
}

template <int D, int DO, bool ALL>
__device__ __forceinline__ void m_v_load (const ak_t *vb, ak_i64 c0, ak_i64 k1, int g, int t, int ho,
                                          uint4 (&vr)[4][DO / 64])
{
    const ak_t *vp = vb + (c0 + 2 * t) * D + ho + g * (DO / 8);
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int w = 0; w < DO / 64; w++)
            vr[i][w] = m_ld16 (vp, ((i & 1) + 8 * (i >> 1)) * D + 8 * w,
                                ALL || c0 + 2 * t + (i & 1) + 8 * (i >> 1) < k1);
}

template <int D>
__device__ __forceinline__ void m_k_load_any (const m_tile &T, ak_i64 c0, int g, int t, uint4 (&kr)[2][D / 32])
{
    if (c0 + 16 <= T.k1)
        m_k_load<D, true> (T.kb, c0, T.k1, g, t, kr);
    else if (c0 < T.k1)
        m_k_load<D, false> (T.kb, c0, T.k1, g, t, kr);
}

template <int D, int DO>
__device__ __forceinline__ void m_v_load_any (const m_tile &T, ak_i64 c0, int g, int t, int ho,
                                              uint4 (&vr)[4][DO / 64])
{
    if (c0 + 16 <= T.k1)
        m_v_load<D, DO, true> (T.vb, c0, T.k1, g, t, ho, vr);
    else if (c0 < T.k1)
        m_v_load<D, DO, false> (T.vb, c0, T.k1, g, t, ho, vr);
}

/*  What a warp carries from one step to the next (DO: the output dims it owns). */
template <int DO>
struct m_acc {
    float o[DO / 8][4];                               /* rows g, g+8: the unnormalised output fragments */
    float m0, m1, l0, l1;                             /* running maximum and sum (this lane's keys) */
};

/*  One step of 16 keys from c0 (kr, vr loaded), the next step's loads
    (from cn, into kn, vn) issued as this step frees registers: the keys
    first, the values once the scores are made.  FULL: every key of the step is
    in the slice and seen by every real row of the tile (no masks); else
    each score is checked against the slice's end and its row's count. */
template <int D, int DO, bool FULL>
__device__ __forceinline__ void m_step (const m_tile &T, const ak_t *qs, m_acc<DO> &A, ak_i64 c0, ak_i64 cn,
                                        ak_i64 nlo, ak_i64 nhi, int g, int t, int ho, uint4 (&kr)[2][D / 32],
                                        uint4 (&vr)[4][DO / 64], uint4 (&kn)[2][D / 32], uint4 (&vn)[4][DO / 64])
{
    constexpr int S = D / 32;                         /* k-step pairs */
    constexpr int NO = DO / 8;                        /* output n-tiles */
    constexpr int QS = D + M_QPAD;
    constexpr bool KEARLY = DO == D;                  /* the next keys' loads before this step's math */
    if (KEARLY)
        m_k_load_any<D> (T, cn, g, t, kn);

    /* S = Q K^T; the query rows g, g+8: dims 32s+8t .. +7 (the permuted reduction index) */
    float sc[2][4];
#pragma unroll
    for (int j = 0; j < 2; j++)
        sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < S; s++) {
        const uint4 qlo = *(const uint4 *) (qs + g * QS + 32 * s + 8 * t);
        const uint4 qhi = *(const uint4 *) (qs + (g + 8) * QS + 32 * s + 8 * t);
#pragma unroll
        for (int j = 0; j < 2; j++) {
            m_mma (sc[j], qlo.x, qhi.x, qlo.y, qhi.y, kr[j][s].x, kr[j][s].y);
            m_mma (sc[j], qlo.z, qhi.z, qlo.w, qhi.w, kr[j][s].z, kr[j][s].w);
        }
    }

    /* the next step's values now that this step's keys are spent: fewer registers live */
    m_v_load_any<D, DO> (T, cn, g, t, ho, vn);

    /* soft: e 0, 1 row g; e 2, 3 row g+8; key c0 + 8j + 2t + (e & 1) */
    float mx0 = M_NEG_INF, mx1 = M_NEG_INF;
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float v = sc[j][e] * T.qscale;
            if (!FULL) {
                const ak_i64 key = c0 + 8 * j + 2 * t + (e & 1);
                v = key < T.k1 && key < (e < 2 ? nlo : nhi) ? v : M_NEG_INF;
            }
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
    const float mn0 = fmaxf (A.m0, mx0), mn1 = fmaxf (A.m1, mx1);
    /* a full step makes both maxima finite; a masked one may leave a row at -inf */
    const float cr0 = FULL || mn0 != M_NEG_INF ? exp2f (A.m0 - mn0) : 1.0f;
    const float cr1 = FULL || mn1 != M_NEG_INF ? exp2f (A.m1 - mn1) : 1.0f;
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float mn = e < 2 ? mn0 : mn1;
            const float p = FULL || mn != M_NEG_INF ? exp2f (sc[j][e] - mn) : 0.0f;
            sc[j][e] = p;
            if (e < 2)
                ps0 += p;
            else
                ps1 += p;
        }
    A.l0 = A.l0 * cr0 + ps0;
    A.l1 = A.l1 * cr1 + ps1;
    /* O *= corr only where some row's maximum moved (corr is exactly 1 elsewhere) */
    if (__any_sync (0xffffffffu, mn0 != A.m0 || mn1 != A.m1)) {
#pragma unroll
        for (int j = 0; j < NO; j++) {
            A.o[j][0] *= cr0;
            A.o[j][1] *= cr0;
            A.o[j][2] *= cr1;
            A.o[j][3] *= cr1;
        }
    }
    A.m0 = mn0;
    A.m1 = mn1;

    /* O += P V */
    const unsigned pa0 = ak_pack2 (sc[0][0], sc[0][1]), pa1 = ak_pack2 (sc[0][2], sc[0][3]);
    const unsigned pa2 = ak_pack2 (sc[1][0], sc[1][1]), pa3 = ak_pack2 (sc[1][2], sc[1][3]);
#pragma unroll
    for (int j = 0; j < NO; j++) {
        /* element j of this lane's part of each value row: word j/2, half j%2 */
        const unsigned sel = (j & 1) ? 0x7632u : 0x5410u;
        const int w = (j / 2) / 4, wi = (j / 2) % 4;
        const unsigned b0 = __byte_perm (m_word (vr[0][w], wi), m_word (vr[1][w], wi), sel);
        const unsigned b1 = __byte_perm (m_word (vr[2][w], wi), m_word (vr[3][w], wi), sel);
        m_mma (A.o[j], pa0, pa1, pa2, pa3, b0, b1);
    }
    if (!KEARLY)
        m_k_load_any<D> (T, cn, g, t, kn);
}

/*  One step, full or masked as the warp's position says (uniform over the warp). */
template <int D, int DO>
__device__ __forceinline__ void m_step_any (const m_tile &T, const ak_t *qs, m_acc<DO> &A, ak_i64 c0,
                                            ak_i64 kfull, ak_i64 nlo, ak_i64 nhi, int g, int t, int ho, int nkw,
                                            uint4 (&kr)[2][D / 32], uint4 (&vr)[4][DO / 64],
                                            uint4 (&kn)[2][D / 32], uint4 (&vn)[4][DO / 64])
{
    const ak_i64 cn = c0 + 16 * (ak_i64) nkw;
    if (c0 + 16 <= kfull)
        m_step<D, DO, true> (T, qs, A, c0, cn, nlo, nhi, g, t, ho, kr, vr, kn, vn);
    else
        m_step<D, DO, false> (T, qs, A, c0, cn, nlo, nhi, g, t, ho, kr, vr, kn, vn);
}

/*  One warp's steps over the slice on tensor cores; its partial (m, l and
    the unnormalised rows, WD floats a row) into part (16 rows).  The
    query tile comes from shared memory (qs, D + M_QPAD elements a row;
    filled here by the whole block, which must call this together) at
    each step, which leaves the registers for the next step's loads: a
    step's keys and values are in flight while the one before is
    computed (the next set is copied into the current one after each
    step: a loop of two steps with the sets taking turns spills). */
template <int D, int DO>
__device__ __forceinline__ void m_warp_tc (const m_tile &T, ak_t *qs, float *part, ak_i64 WD, int kw, int nkw,
                                           int ho, int warp, int lane)
{
    constexpr int NO = DO / 8;
    constexpr int QS = D + M_QPAD;
    const int g = lane >> 2, t = lane & 3;
    const ak_i64 rlo = g, rhi = g + 8;
    const ak_i64 nlo = T.n[rlo], nhi = T.n[rhi];
    const ak_i64 kfull = min (T.k1, T.nmin);           /* keys every real row sees */

    m_acc<DO> A;
#pragma unroll
    for (int j = 0; j < NO; j++)
        A.o[j][0] = A.o[j][1] = A.o[j][2] = A.o[j][3] = 0.0f;
    A.m0 = A.m1 = M_NEG_INF;
    A.l0 = A.l1 = 0.0f;

    uint4 ka[2][D / 32], va[4][DO / 64], kb[2][D / 32], vb[4][DO / 64];
    ak_i64 c0 = T.k0 + 16 * (ak_i64) kw;
    m_k_load_any<D> (T, c0, g, t, ka);
    m_v_load_any<D, DO> (T, c0, g, t, ho, va);
    /* the query tile into shared memory (padding rows zero) while the first keys are on their way */
    for (int u = warp * 32 + lane; u < M_ROWS * D / 8; u += 32 * NW) {
        const int r = u / (D / 8), e = u % (D / 8) * 8;
        const ak_i64 gr = T.r0 + r;
        const bool ok = gr < T.nrows;
        const ak_i64 hh = T.h_lo + (ok ? (ak_u32) gr / (ak_u32) T.Q : 0), tt = ok ? (ak_u32) gr % (ak_u32) T.Q : 0;
        *(uint4 *) (qs + r * QS + e) = m_ld16 (T.q + ((T.b * T.HQ + hh) * T.Q + tt) * D, e, ok);
    }
    __syncthreads ();

    for (; c0 < T.k1; c0 += 16 * (ak_i64) nkw) {
        m_step_any<D, DO> (T, qs, A, c0, kfull, nlo, nhi, g, t, ho, nkw, ka, va, kb, vb);
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int s = 0; s < D / 32; s++)
                ka[j][s] = kb[j][s];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int w = 0; w < DO / 64; w++)
                va[i][w] = vb[i][w];
    }

    /* the running sums over the quad; m is the same in its four lanes */
    float l0 = A.l0, l1 = A.l1;
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
        l0 += __shfl_xor_sync (0xffffffffu, l0, off);
        l1 += __shfl_xor_sync (0xffffffffu, l1, off);
    }
    /* o[j][0], o[j][2]: dim ho + (2t)*NO + j; o[j][1], o[j][3]: dim ho + (2t+1)*NO + j */
    float *pl = part + rlo * WD + ho, *ph = part + rhi * WD + ho;
#pragma unroll
    for (int j = 0; j < NO; j++) {
        pl[2 * t * NO + j] = A.o[j][0];
        pl[(2 * t + 1) * NO + j] = A.o[j][1];
        ph[2 * t * NO + j] = A.o[j][2];
        ph[(2 * t + 1) * NO + j] = A.o[j][3];
    }
    if (t == 0) {
        part[rlo * WD + WD - 8] = A.m0;
        part[rlo * WD + WD - 7] = l0;
        part[rhi * WD + WD - 8] = A.m1;
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

/* a / b for 0 <= a, 1 <= b: in 32 bits when both fit (the 64-bit division is a long subroutine) */
__device__ __forceinline__ ak_i64 m_div (ak_i64 a, ak_i64 b)
{
    return ((ak_u64) a | (ak_u64) b) >> 32 ? a / b : (ak_i64) ((ak_u32) a / (ak_u32) b);
}

extern "C" __global__ void __launch_bounds__ (32 * NW, 1) ak_kernel (ak_cuda_args_t a)
{
    AK_DYNAMIC_SHARED (float, m_part);                          /* [NW+1][16][WD]: the warps', the block's */
    __shared__ m_tile T;
    __shared__ int s_last;
    __shared__ float m_rm[M_ROWS], m_rl[M_ROWS];                /* the block's maximum and sum a row */
#if M_TC
    __shared__ float m_ew[NW][M_ROWS];                          /* each warp's weight in a row's merge */
    __shared__ __align__ (16) ak_t m_qs[M_ROWS * (256 + M_QPAD)];
#endif

    const ak_i64 Q = a.dims[1], HQ = a.dims[2], HK = a.dims[3];    /* B: gridDim.z / HK */
    const ak_i64 L = a.dims[4], D = a.dims[5], mask = a.dims[6];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nth = 32 * NW;
    const ak_i64 WD = (D + 7) / 8 * 8 + 8;                         /* floats a partial row */

    const unsigned dyn = ak_dynamic_smem_size ();
    /* every early return below is uniform over the block (before any barrier) */
    if (D > M_DMAX || D < 1 || (ak_i64) dyn < (ak_i64) (NW + 1) * M_ROWS * WD * 4)
        return;

    /* the buffers' counts are below 2^28 elements (the spec's limit): a row index, Q and a
       step count fit in 32 bits */
    const ak_i64 bk = blockIdx.z, b = (ak_u32) bk / (ak_u32) HK, kvh = (ak_u32) bk % (ak_u32) HK;
    const ak_i64 h_lo = m_div (kvh * HQ + HK - 1, HK), h_hi = m_div ((kvh + 1) * HQ + HK - 1, HK);
    const ak_i64 nrows = (h_hi - h_lo) * Q, r0 = (ak_i64) blockIdx.x * M_ROWS;
    if (r0 >= nrows)
        return;
    const int nr = (int) min ((ak_i64) M_ROWS, nrows - r0);       /* the tile's real rows */
    const bool causal = mask == 2 || mask == 3;
    const ak_i64 len = mask == 3 ? L - (ak_i64) ((ak_u32) ((ak_u32) b * 2654435761u) % (ak_u32) (L + 1)) : L;

    /* the keys the tile's rows see (lane l: row l % 16), the most and the fewest over its real
       rows: the slices cover the most any row sees */
    const ak_i64 grl = r0 + (lane & 15);
    const bool rreal = grl < nrows;
    const ak_i64 nl = causal ? len - Q + 1 + (ak_i64) ((ak_u32) grl % (ak_u32) Q) : L;
    ak_i64 nmax = rreal ? nl : 0, nmin = rreal ? nl : L;
#pragma unroll
    for (int off = 8; off >= 1; off >>= 1) {
        nmax = max (nmax, __shfl_xor_sync (0xffffffffu, nmax, off));
        nmin = min (nmin, __shfl_xor_sync (0xffffffffu, nmin, off));
    }
    const ak_i64 tg = bk * gridDim.x + blockIdx.x;                 /* the split tile */
    const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
    const bool ws_ok = ngroups <= M_WS_GROUPS && ngroups * (ak_i64) gridDim.y * M_ROWS * WD <= M_WS_FLOATS;
    ak_i64 per, nsplit;                                            /* steps a slice, slices */
    ak_split_slices (nmax > 0 ? (nmax + 15) / 16 : 0, gridDim.y, ws_ok, &per, &nsplit);
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
        T.nmin = nmin < 0 ? 0 : nmin;
    }
    if (tid < M_ROWS)
        T.n[tid] = rreal && nl > 0 ? nl : 0;
    __syncthreads ();

    float *bpart = m_part + (ak_i64) NW * M_ROWS * WD;            /* the block's partial (plain path) */
    ak_t *out = AK_OUT (a, 0);
    float *wp = m_ws + (tg * gridDim.y + split) * M_ROWS * WD;    /* this split's partial (nsplit > 1) */
    bool tc = false;
#if M_TC
    tc = (D == 64 || D == 128 || (D == 256 && NW % 2 == 0)) && ((ak_u64) T.kb) % 16 == 0
         && ((ak_u64) T.vb) % 16 == 0 && ((ak_u64) T.q) % 16 == 0;
    if (tc) {
        /* D 256: warps 2k and 2k+1 take the same keys (step k of the slice's, of NW/2 at a
           time), each makes the scores and owns half of the output dims */
        const int H = D == 256 ? 2 : 1, nkw = NW / H;
        float *wpart = m_part + (ak_i64) warp * M_ROWS * WD;
        if (D == 256)
            m_warp_tc<256, 128> (T, m_qs, wpart, WD, warp >> 1, nkw, (warp & 1) * 128, warp, lane);
        else if (D == 128)
            m_warp_tc<128, 128> (T, m_qs, wpart, WD, warp, nkw, 0, warp, lane);
        else
            m_warp_tc<64, 64> (T, m_qs, wpart, WD, warp, nkw, 0, warp, lane);
        __syncthreads ();
        /* the key warps in order, real rows only: each one's weight a row first (a thread a
           row; the two warps of a pair hold the same maximum and sum), then element (r, d) is
           one thread's */
        if (tid < nr) {
            float M = M_NEG_INF;
            for (int w = 0; w < nkw; w++)
                M = fmaxf (M, m_part[((ak_i64) w * H * M_ROWS + tid) * WD + WD - 8]);
            float l = 0.0f;
            for (int w = 0; w < nkw; w++) {
                const float *pw = m_part + ((ak_i64) w * H * M_ROWS + tid) * WD;
                const float e = M != M_NEG_INF ? exp2f (pw[WD - 8] - M) : 0.0f;
                m_ew[w][tid] = e;
                l += e * pw[WD - 7];
            }
            m_rm[tid] = M;
            m_rl[tid] = l;
        }
        __syncthreads ();
        for (int u = tid; u < nr * (int) D; u += nth) {
            const int r = u / (int) D, d = u - r * (int) D;
            const int hw = H == 2 ? d >> 7 : 0;       /* the warp of a pair that owns dim d */
            float O = 0.0f;
            for (int w = 0; w < nkw; w++)
                O += m_ew[w][r] * m_part[((ak_i64) (w * H + hw) * M_ROWS + r) * WD + d];
            if (nsplit == 1) {
                const ak_i64 gr = r0 + r, h = h_lo + (ak_u32) gr / (ak_u32) Q, t = (ak_u32) gr % (ak_u32) Q;
                const float lsum = m_rl[r];
                out[((b * HQ + h) * Q + t) * D + d] = ak_from_acc (lsum > 0.0f ? O / lsum : 0.0f);
            } else
                wp[r * WD + d] = O;
        }
        if (nsplit == 1)
            return;
        if (tid < nr) {
            wp[tid * WD + WD - 8] = m_rm[tid];
            wp[tid * WD + WD - 7] = m_rl[tid];
        }
    }
#endif
    if (!tc) {
        m_warp_plain (T, bpart, WD, warp, lane);
        __syncthreads ();
        if (nsplit == 1) {
            for (int u = tid; u < nr * (int) D; u += nth) {
                const int r = u / (int) D, d = u - r * (int) D;
                const ak_i64 gr = r0 + r, h = h_lo + (ak_u32) gr / (ak_u32) Q, t = (ak_u32) gr % (ak_u32) Q;
                const float lsum = bpart[r * WD + WD - 7];
                out[((b * HQ + h) * Q + t) * D + d] = ak_from_acc (lsum > 0.0f ? bpart[r * WD + d] / lsum : 0.0f);
            }
            return;
        }
        for (int u = tid; u < nr * (int) WD; u += nth)
            wp[u] = bpart[u];
    }

    /* the split merge: the partial is out, the last block of the tile merges */
    if (!ak_last_arrival (&m_cnt[tg], (unsigned int) nsplit, &s_last))
        return;
    /*  Real rows only, splits 0 .. nsplit-1 in chunks of SC: a warp a row finds the maximum
        (every split's at once), then per chunk the splits' weights (into shared memory, the
        sums a lane in split order, the lanes in a fixed tree), then item (row, 4 dims) x
        group g of the chunk's splits is one thread's: M_MB 16-byte loads in flight, none
        conditional (a load past the group's end repeats its last split, weight 0); the groups'
        sums added in group order.  No register holds more than one chunk. */
    const float *w0 = m_ws + tg * gridDim.y * M_ROWS * WD;
    const ak_i64 sstride = (ak_i64) M_ROWS * WD;       /* from one split to the next */
    const int nsp = (int) nsplit;
    const int q4 = (int) (D + 3) / 4, E = nr * q4;    /* items: 4 dims of a row */
    float *acc = m_part;                               /* [E][4] (E*4 < 16*WD) */
    float *pp = m_part + M_ROWS * WD;                  /* [nth][4]: the groups' sums */
    float *wt = pp + 4 * nth;                          /* [16][SC]: the weights */
    const int SC = (int) ((NW * M_ROWS * WD - 4 * nth) / M_ROWS);
    for (int r = warp; r < nr; r += NW) {
        const float *wm = w0 + r * WD + WD - 8;
        float M = M_NEG_INF;
        for (int s0 = 0; s0 < nsp; s0 += 32 * M_MK) {
            float mv[M_MK];
#pragma unroll
            for (int k = 0; k < M_MK; k++)
                mv[k] = __ldcg (wm + (ak_i64) min (s0 + 32 * k + lane, nsp - 1) * sstride);
#pragma unroll
            for (int k = 0; k < M_MK; k++)
                M = fmaxf (M, mv[k]);
        }
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1)
            M = fmaxf (M, __shfl_xor_sync (0xffffffffu, M, off));
        if (lane == 0) {
            m_rm[r] = M;
            m_rl[r] = 0.0f;
        }
    }
    for (int u = tid; u < 4 * E; u += nth)
        acc[u] = 0.0f;
    const int G = E >= nth ? 1 : nth / E;             /* split groups a chunk */
    for (int c0 = 0; c0 < nsp; c0 += SC) {
        const int cn = min (SC, nsp - c0);
        __syncthreads ();                              /* m_rm, acc ready; the last chunk's weights read */
        for (int r = warp; r < nr; r += NW) {
            const float M = m_rm[r];
            const float *wm = w0 + r * WD + WD - 8 + (ak_i64) c0 * sstride;
            float ls = 0.0f;
#pragma unroll 4
            for (int s = lane; s < cn; s += 32) {
                const float2 ml = __ldcg ((const float2 *) (wm + (ak_i64) s * sstride));
                const float f = M != M_NEG_INF ? exp2f (ml.x - M) : 0.0f;    /* 0 for a split that saw no key */
                wt[r * SC + s] = f;
                ls += f * ml.y;
            }
#pragma unroll
            for (int off = 16; off >= 1; off >>= 1)
                ls += __shfl_xor_sync (0xffffffffu, ls, off);
            if (lane == 0)
                m_rl[r] += ls;
        }
        __syncthreads ();
        const int Gc = min (G, cn), P = (cn + Gc - 1) / Gc;
        for (int u = tid; u < Gc * E; u += nth) {
            const int it = u % E, g = u / E;
            const int r = it / q4;
            const float *wo = w0 + r * WD + (it - r * q4) * 4 + (ak_i64) c0 * sstride;
            const float *wr = wt + r * SC;
            const int sa = g * P, sb = min (cn, sa + P);
            float4 o = make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
            for (int s = sa; s < sb; s += M_MB) {
                float4 v[M_MB];
#pragma unroll
                for (int j = 0; j < M_MB; j++)
                    v[j] = __ldcg ((const float4 *) (wo + (ak_i64) min (s + j, sb - 1) * sstride));
#pragma unroll
                for (int j = 0; j < M_MB; j++) {
                    const float f = s + j < sb ? wr[s + j] : 0.0f;
                    o.x += f * v[j].x;
                    o.y += f * v[j].y;
                    o.z += f * v[j].z;
                    o.w += f * v[j].w;
                }
            }
            float4 *dst = (float4 *) (Gc == 1 ? acc + 4 * it : pp + 4 * u);
            if (Gc == 1)
                o = make_float4 (dst->x + o.x, dst->y + o.y, dst->z + o.z, dst->w + o.w);
            *dst = o;
        }
        if (Gc > 1) {
            __syncthreads ();
            for (int it = tid; it < E; it += nth) {
                float4 s = *(float4 *) (acc + 4 * it);
                for (int g = 0; g < Gc; g++) {
                    const float4 x = *(const float4 *) (pp + 4 * (g * E + it));
                    s.x += x.x;
                    s.y += x.y;
                    s.z += x.z;
                    s.w += x.w;
                }
                *(float4 *) (acc + 4 * it) = s;
            }
        }
    }
    __syncthreads ();
    for (int u = tid; u < nr * (int) D; u += nth) {
        const int r = u / (int) D, d = u - r * (int) D;
        const ak_i64 gr = r0 + r, h = h_lo + (ak_u32) gr / (ak_u32) Q, t = (ak_u32) gr % (ak_u32) Q;
        const float ls = m_rl[r];
        out[((b * HQ + h) * Q + t) * D + d] = ak_from_acc (ls > 0.0f ? acc[r * q4 * 4 + d] / ls : 0.0f);
    }
}
