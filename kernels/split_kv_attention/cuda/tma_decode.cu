/*  split_kv_attention for the one-token decode step on Hopper (cuda,
    sm_90a): the KV cache streamed by TMA into a block-wide ring, the
    products on tensor cores with stream_decode's operand roles.  Masks,
    grouped-query rule and layout as ref.c (q, o [B][HQ][Q][D], k_cache,
    v_cache [B][HK][L][D]; 1 none, 2 causal, 3 ragged causal; a query that
    sees no key has the output 0).

    Why: a 7B-class decode step reads its whole cache once (llm7b_b1_32k:
    128 MiB, 31 us at the H200's copy bandwidth), and stream_decode, whose
    warps copy their own 16-key steps with per-lane 16-byte cp.async,
    reached 44 us there against cuDNN's 37.  A TMA box is one instruction
    for a 64 x 64 panel, where the lanes' copies are 512 (issue 17's
    skinny GEMM went from 0.82 to 0.97 of cuBLASLt on that change); here
    llm7b_b1_32k took 38.4-39.3 us (docs/benchmarks.md, session 28).  So:
      loads  one producer thread (the block's last warp) issues the
             slice's key tiles of BN keys, K and V (tm_k, tm_v: dims
             {D, L, B*HK}, box {64, BN, 1}, 128-byte swizzle, 128-byte L2
             promotion (256 was 9% slower on llm7b_b8_32k), so a panel's
             row r holds its 16-byte chunk c at c ^ (r & 7) and ldmatrix
             reads it without bank conflicts) into a ring of STAGES stages,
             a full barrier (expect_tx) and an empty barrier a stage;
      math   every consumer warp waits for every tile and takes its
             steps i of 16*KW keys (counted over the slice) with
             i % NC = w; per 16 keys, S = Q K^T (Q the A operand from
             registers, rows g real or zero, rows g+8 zero; K the B
             operand by ldmatrix), the mask and the online softmax in
             the exp2 domain, and
             O^T += V^T P^T (V^T by ldmatrix.trans, P^T straight from S's
             accumulators), as stream_decode's s_warp_tc; then the warp's
             lane 0 arrives on the stage's empty barrier (NC arrivals free
             it).  Every warp waits for every stage in order, so a wait's
             parity is never a phase behind or ahead.
    A row tile is 8 query rows of one KV head's group ((HQ/HK) heads x Q
    tokens, head-major: contiguous in q and o); more rows take more tiles,
    each streaming the keys again (this kernel is for a few rows a KV
    head).  The warps' partials are merged through shared memory (the ring
    is free once every tile is consumed: a tile's bytes have landed when
    its full barrier completes), and the block's partial is the output
    (one slice) or goes to a module-scope workspace, the tile's last block
    merging the slices in order (ak_last_arrival, ak_split_merge).

    Every sum in a fixed order (the blocks' shares are the launch's, not
    the run's): bitwise deterministic.  Launches of one loaded module
    must not run concurrently (the workers run one at a time).

    Under AK_CUDA_EMU (test_cuda_cand_emu) the mbarriers and the TMA
    copies are the prelude's emulated ones (ak_mbar_*, ak_tma_into_3d).

    float16 / bfloat16, D 64, 128 or (DMAX 256) 256, both maps present
    and every buffer 16-byte aligned: the path above.  Anything else: a plain path
    in the same grid (a warp a query row over all its keys, the first
    slice's blocks): correct, not fast.

    NC      consumer warps (the block has NC + 1)
    BN      keys a tile (the box's rows)
    STAGES  ring stages; fewer when the launch's dynamic shared memory
            holds fewer (the launch rule caps the ring at 200 KiB)
    KW      16-key parts of a warp's step (1 or 2): at 2 the two parts'
            products are independent chains and the softmax's shuffles
            and rescale run once for 32 keys (S's k-steps go to two sums,
            even and odd, at either)
    DMAX    the largest D of the tensor-core path, 128 or 256: the
            kernel's registers are those of its largest path, so DMAX 128
            sends D 256 to the plain path
    WAVES   used by the launch rule only: about WAVES x 132 blocks, at
            least one tile a slice
    FLAT    0 only: a block a slice of one row tile (FLAT 1, a flat layout
            of every row tile's key tiles over one row of blocks, was
            slower on every shape on the H200 and was removed in session
            32: docs/benchmarks.md; the parameter stays, of one value, so
            that configurations recorded with FLAT=0 name one of the space)
    Launch: grid [(((HQ+HK-1)/HK)*Q+7)/8, min(max(floor(132*WAVES/C), 1),
    ceil(L/BN)) (1 when L < 1), B*HK] with C = B*HK*row tiles, shared
    max(min(STAGES*2*BN*D*b, 204800), NC*8*(D+8)*4) + 1024 bytes; block
    [32*(NC+1)]. */
#ifndef NC
#define NC 4
#endif
#ifndef BN
#define BN 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef WAVES
#define WAVES 1
#endif
#ifndef DMAX
#define DMAX 128
#endif
#ifndef KW
#define KW 2
#endif
#ifndef FLAT
#define FLAT 0
#endif

#define B_ROWS 8                                      /* query rows a tile */
#define B_SK (16 * KW)                                /* keys a warp's step */
#define B_NT (32 * (NC + 1))
#define B_WS_FLOATS (1 << 23)
#define B_WS_GROUPS (1 << 16)
#define B_MAXST 8
#define B_LOG2E 1.4426950408889634f
#define B_NEG_INF __int_as_float (0xff800000)
#if defined(AK_DTYPE_BFLOAT16) || defined(AK_DTYPE_FLOAT16)
#define B_TC 1
#else
#define B_TC 0
#endif

static_assert (NC >= 1 && NC <= 8, "NC must be 1..8");
static_assert (BN == 32 || BN == 64 || BN == 128, "BN must be 32, 64 or 128");
static_assert (STAGES >= 1 && STAGES <= B_MAXST, "STAGES must be 1..8");
static_assert (DMAX == 128 || DMAX == 256, "DMAX must be 128 or 256");
static_assert (FLAT == 0, "FLAT is 0 (the flat layout was removed)");
static_assert ((KW == 1 || KW == 2) && BN % (16 * KW) == 0, "KW is 1 or 2, BN a multiple of 16*KW");

__device__ __align__ (16) float b_ws[B_WS_FLOATS];
__device__ unsigned int b_cnt[B_WS_GROUPS];

/*  A segment: a row tile's keys [k0, k1) (those every real row sees
    below kfull), its real rows nr (0: a tile past its group's rows), its
    KV head bk, its first query and output row, and the keys ng that the
    calling lane's row (lane / 4, as the consumers hold it) sees. */
typedef struct {
    ak_i64 k0, k1, kfull;
    int nr, bk, ng;
    const ak_t *q;
    ak_t *o;
} b_seg_t;

/*  Row tile rt of group g over keys [k0, k1), cut to the keys its rows see. */
__device__ __forceinline__ b_seg_t b_seg (const ak_decode_group_t &g, ak_i64 rt, ak_i64 k0, ak_i64 k1)
{
    b_seg_t S;
    const ak_i64 r0 = rt * B_ROWS;
    S.nr = (int) max ((ak_i64) 0, min ((ak_i64) B_ROWS, g.G - r0));
    ak_i64 nmin, nmax;
    ak_decode_key_range (g, r0, r0 + S.nr, &nmin, &nmax);
    S.k0 = k0;
    S.k1 = max (k0, min (nmax, k1));
    S.kfull = min (S.k1, nmin);
    S.bk = (int) g.bk;
    const int row = (threadIdx.x & 31) >> 2;
    S.ng = row < S.nr ? (int) ak_decode_nkeys (g, r0 + row) : 0;
    S.q = g.q + r0 * g.D;
    S.o = g.o + r0 * g.D;
    return S;
}

#if B_TC

/*  The producer's part of a segment: its key tiles into the ring, t
    counting the block's tiles (a stage's phase follows it). */
template <int D>
__device__ __forceinline__ void b_produce (const b_seg_t &S, unsigned char *base, int nst, int &t, ak_u64 *full,
                                           ak_u64 *empty, const ak_tensor_map_t *tm_k, const ak_tensor_map_t *tm_v)
{
    constexpr int PANELS = D / 64;
    constexpr int PB = BN * 128;                      /* a panel's bytes */
    constexpr int SB = 2 * PANELS * PB;               /* a stage: K's panels, then V's */
    for (ak_i64 j = S.k0; j < S.k1; j += BN, t++) {
        const int s = t % nst;
        const unsigned ph = (unsigned) (t / nst) & 1u;
        unsigned char *dst = base + s * SB;
        ak_mbar_wait (empty + s, ph ^ 1u);
        ak_mbar_expect (full + s, SB);
#pragma unroll
        for (int p = 0; p < PANELS; p++) {
            ak_tma_into_3d (dst + p * PB, tm_k, p * 64, (int) j, S.bk, full + s);
            ak_tma_into_3d (dst + (PANELS + p) * PB, tm_v, p * 64, (int) j, S.bk, full + s);
        }
    }
}

/*  A consumer warp's part of a segment: its steps of the segment's tiles
    (t counting the block's tiles, as the producer does) into o, m, l. */
template <int D>
__device__ __forceinline__ void b_consume (const b_seg_t &S, const unsigned char *base, int nst, int &t,
                                           ak_u64 *full, ak_u64 *empty, float (&o)[D / 16][4], float &m, float &l,
                                           int warp, int lane)
{
    constexpr int KS = D / 16;                        /* k-steps of S; m-tiles of O^T */
    constexpr int PANELS = D / 64;
    constexpr int PB = BN * 128;
    constexpr int SB = 2 * PANELS * PB;
    const int g = lane >> 2, t4 = lane & 3;
    m = B_NEG_INF;
    l = 0.0f;
#pragma unroll
    for (int i = 0; i < KS; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    if (S.k1 <= S.k0)
        return;
    /* Q's A fragments, row g (zero past the tile's real rows): dims 16ks+2t, +1 and +8, +9 */
    unsigned qa[KS][2];
    const bool real = g < S.nr;
    const ak_t *qr = S.q + (real ? g * D : 0);
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        qa[ks][0] = real ? __ldg ((const unsigned *) (qr + 16 * ks + 2 * t4)) : 0u;
        qa[ks][1] = real ? __ldg ((const unsigned *) (qr + 16 * ks + 2 * t4 + 8)) : 0u;
    }
    const float qscale = B_LOG2E / sqrtf ((float) D);
    /* ldmatrix rows: key (or value) 8(l/16) + l%8 of a 16-key step, chunk 2ks + (l/8)%2 */
    const int lr = 8 * (lane >> 4) + (lane & 7), lc = (lane >> 3) & 1;

    for (int tl = 0; S.k0 + (ak_i64) tl * BN < S.k1; tl++, t++) {
        const int s = t % nst;
        ak_mbar_wait (full + s, (unsigned) (t / nst) & 1u);
        const unsigned char *ks_ = base + s * SB, *vs_ = ks_ + PANELS * PB;
#pragma unroll
        for (int u = 0; u < BN / B_SK; u++) {
            const ak_i64 c0 = S.k0 + (ak_i64) tl * BN + B_SK * u;
            if (c0 >= S.k1)
                break;                                /* past the segment: nothing left of the tile */
            if ((tl * (BN / B_SK) + u) % NC != warp)
                continue;                             /* another warp's step */

            /* S = Q K^T: n-tile j keys c0 + 8j .. +7 (16-key part w: n-tiles 2w, 2w+1, stage rows
               B_SK*u + 16w + lr); the even and the odd k-steps in two sums (shorter chains) */
            float sc[2 * KW][4], sd[2 * KW][4];
#pragma unroll
            for (int j = 0; j < 2 * KW; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sc[j][e] = sd[j][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const int c = 2 * ks + lc;
                const unsigned a[4] = { qa[ks][0], 0u, qa[ks][1], 0u };
#pragma unroll
                for (int w = 0; w < KW; w++) {
                    const int kr = B_SK * u + 16 * w + lr;
                    unsigned b[4];
                    ak_ldmatrix_x4 (b, ks_ + (c >> 3) * PB + kr * 128 + (((c & 7) ^ (kr & 7)) << 4));
                    ak_mma_16816 ((ks & 1) ? sd[2 * w] : sc[2 * w], a, b[0], b[1]);
                    ak_mma_16816 ((ks & 1) ? sd[2 * w + 1] : sc[2 * w + 1], a, b[2], b[3]);
                }
            }

            /* row g: sc[j][e], keys c0 + 8j + 2t + e; masked past the segment or the row's count */
            const bool whole = c0 + B_SK <= S.kfull;
            float mx = B_NEG_INF;
#pragma unroll
            for (int j = 0; j < 2 * KW; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float v = (sc[j][e] + sd[j][e]) * qscale;
                    if (!whole) {
                        const ak_i64 key = c0 + 8 * j + 2 * t4 + e;
                        v = key < S.k1 && key < S.ng ? v : B_NEG_INF;
                    }
                    sc[j][e] = v;
                    mx = fmaxf (mx, v);
                }
            mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, 1));
            mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, 2));
            const float mn = fmaxf (m, mx);
            const float cr = mn != B_NEG_INF ? exp2f (m - mn) : 1.0f;
            float ps = 0.0f;
#pragma unroll
            for (int j = 0; j < 2 * KW; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float p = mn != B_NEG_INF ? exp2f (sc[j][e] - mn) : 0.0f;
                    sc[j][e] = p;
                    ps += p;
                }
            l = l * cr + ps;
            /* O^T's columns are rows 2t, 2t + 1: their factors from lanes 8t and 8t+4 */
            const float c_lo = __shfl_sync (0xffffffffu, cr, 8 * t4);
            const float c_hi = __shfl_sync (0xffffffffu, cr, 8 * t4 + 4);
            if (__any_sync (0xffffffffu, mn != m)) {
#pragma unroll
                for (int i = 0; i < KS; i++) {
                    o[i][0] *= c_lo;
                    o[i][1] *= c_hi;
                    o[i][2] *= c_lo;
                    o[i][3] *= c_hi;
                }
            }
            m = mn;

            /* O^T += V^T P^T: m-tile i dims 16i .. 16i+15, part w's keys */
#pragma unroll
            for (int w = 0; w < KW; w++) {
                const int kr = B_SK * u + 16 * w + lr;
                const unsigned pb0 = ak_pack2 (sc[2 * w][0], sc[2 * w][1]);
                const unsigned pb1 = ak_pack2 (sc[2 * w + 1][0], sc[2 * w + 1][1]);
#pragma unroll
                for (int i = 0; i < KS; i++) {
                    const int c = 2 * i + lc;
                    unsigned va[4];
                    ak_ldmatrix_x4_trans (va, vs_ + (c >> 3) * PB + kr * 128 + (((c & 7) ^ (kr & 7)) << 4));
                    ak_mma_16816 (o[i], va, pb0, pb1);
                }
            }
        }
        __syncwarp ();                                /* every lane done with the stage */
        if (lane == 0)
            ak_mbar_arrive (empty + s);
    }
}

/*  The consumer warps' partials of a segment merged (part: [NC][8][D+8]
    floats, free when this is called) into the segment's output rows
    (direct) or its partial at wp (rows, then each row's maximum and
    sum).  The block's threads, tid their index (the warps below NC the
    consumers), meet once: then a thread a group of four columns of a
    real row, the row's weights from the warps' maxima computed by each
    of its threads (the same values: one barrier, no second round through
    shared memory; at b1_32k on the H100 the merge had cost 1.3 us with
    a thread a row computing them between two barriers).  The warps in
    order: deterministic. */
template <int D>
__device__ __forceinline__ void b_merge_warps (const b_seg_t &S, float *part, const float (&o)[D / 16][4], float m,
                                               float l, bool direct, float *wp, int tid)
{
    constexpr int KS = D / 16;
    constexpr int WD = D + 8;                         /* floats a partial row: the row, m, l */
    constexpr int D4 = D / 4;                         /* groups of four columns a row */
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
    if (warp < NC) {
        float lq = l;
        lq += __shfl_xor_sync (0xffffffffu, lq, 1);
        lq += __shfl_xor_sync (0xffffffffu, lq, 2);
        /* o[i][0]: dim 16i+g, row 2t; [1] row 2t+1; [2], [3]: dim 16i+g+8 */
        float *pw = part + warp * B_ROWS * WD;
#pragma unroll
        for (int i = 0; i < KS; i++) {
            pw[(2 * t4) * WD + 16 * i + g] = o[i][0];
            pw[(2 * t4 + 1) * WD + 16 * i + g] = o[i][1];
            pw[(2 * t4) * WD + 16 * i + g + 8] = o[i][2];
            pw[(2 * t4 + 1) * WD + 16 * i + g + 8] = o[i][3];
        }
        if (t4 == 0) {
            pw[g * WD + D] = m;
            pw[g * WD + D + 1] = lq;
        }
    }
    __syncthreads ();

    for (int u = tid; u < S.nr * D4; u += B_NT) {
        const int r = u / D4, d = 4 * (u - r * D4);
        float M = B_NEG_INF;
#pragma unroll
        for (int w = 0; w < NC; w++)
            M = fmaxf (M, part[(w * B_ROWS + r) * WD + D]);
        float ls = 0.0f;
        float4 O = make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < NC; w++) {
            const float *pw = part + (w * B_ROWS + r) * WD;
            const float e = M != B_NEG_INF ? exp2f (pw[D] - M) : 0.0f;
            const float4 v = *(const float4 *) (pw + d);
            ls += e * pw[D + 1];
            O.x += e * v.x;
            O.y += e * v.y;
            O.z += e * v.z;
            O.w += e * v.w;
        }
        if (direct) {
            const bool any = ls > 0.0f;
            *(uint2 *) (S.o + (ak_i64) r * D + d) =
                make_uint2 (ak_pack2 (any ? O.x / ls : 0.0f, any ? O.y / ls : 0.0f),
                            ak_pack2 (any ? O.z / ls : 0.0f, any ? O.w / ls : 0.0f));
        }
        else {
            *(float4 *) (wp + r * WD + d) = O;
            if (d == 0) {
                wp[r * WD + D] = M;
                wp[r * WD + D + 1] = ls;
            }
        }
    }
}

/*  The barriers set up, the maps prefetched; then the whole block meets. */
__device__ __forceinline__ void b_begin (ak_u64 *full, ak_u64 *empty, int nst,
                                         const ak_tensor_map_t *tm_k, const ak_tensor_map_t *tm_v)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < nst; s++) {
            ak_mbar_init (full + s, 1);
            ak_mbar_init (empty + s, NC);
        }
        ak_mbar_fence_init ();
        ak_tma_prefetch (tm_k);
        ak_tma_prefetch (tm_v);
    }
    __syncthreads ();
}

/*  The block's slice on tensor cores: the producer's loads, the
    consumers' tiles, their partials merged through the ring once every
    tile is consumed (so landed) into the output rows (direct) or the
    slice's partial at wp. */
template <int D>
__device__ void b_tc (const b_seg_t &S, unsigned char *base, int nst, bool direct, float *wp,
                      const ak_tensor_map_t *tm_k, const ak_tensor_map_t *tm_v)
{
    __shared__ __align__ (8) ak_u64 bars[2 * B_MAXST];          /* full, empty a stage */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    ak_u64 *full = bars, *empty = bars + B_MAXST;
    b_begin (full, empty, nst, tm_k, tm_v);
    float o[D / 16][4], m = B_NEG_INF, l = 0.0f;
    int t = 0;
    if (warp == NC) {
        for (int i = 0; i < D / 16; i++)
            o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
        if (lane == 0)
            b_produce<D> (S, base, nst, t, full, empty, tm_k, tm_v);
    }
    else
        b_consume<D> (S, base, nst, t, full, empty, o, m, l, warp, lane);
    __syncthreads ();                                 /* every tile consumed (so landed): the ring is free */
    b_merge_warps<D> (S, (float *) base, o, m, l, direct, wp, tid);
}
#endif

extern "C" __global__ void __launch_bounds__ (B_NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_k, const __grid_constant__ ak_tensor_map_t tm_v)
{
    AK_DYNAMIC_SHARED (unsigned char, b_raw);
    const int tid = threadIdx.x;
    const ak_i64 D = a.dims[5];
    if (D < 1 || D > 32 * AK_ATTN_MAXC)
        return;                                                    /* uniform over the block */
    bool tc = false;
#if B_TC
    const unsigned dyn = ak_dynamic_smem_size ();
    const int WD = (int) D + 8;
    const int sb = 4 * BN * (int) D;                                /* a stage's bytes (16-bit elements) */
    const int pb = NC * B_ROWS * WD * 4;                            /* the consumers' partials */
    const int room = (int) dyn - 1024;                              /* past the 1024-byte alignment */
    unsigned char *base = b_raw + ((1024u - (ak_smem (b_raw) & 1023u)) & 1023u);
    tc = (D == 64 || D == 128 || (D == 256 && DMAX == 256)) && ak_tensor_map_present (&tm_k)
         && ak_tensor_map_present (&tm_v)
         && ((ak_u64) AK_IN (a, 0) | (ak_u64) AK_OUT (a, 0) | (ak_u64) AK_IN (a, 1) | (ak_u64) AK_IN (a, 2)) % 16 == 0;
#endif
    const ak_decode_group_t g = ak_decode_group (a);
    const ak_i64 r0 = (ak_i64) blockIdx.x * B_ROWS;
    if (r0 >= g.G)
        return;
    const int nr = (int) min ((ak_i64) B_ROWS, g.G - r0);
    ak_i64 nmin, nmax;                                              /* the keys the tile's rows see */
    ak_decode_key_range (g, r0, r0 + nr, &nmin, &nmax);
#if B_TC
    const int nst = room > 0 ? min (STAGES, room / sb) : 0;
    tc = tc && nst >= 1 && room >= pb;
    if (tc) {
        const ak_i64 tg = (ak_i64) g.bk * gridDim.x + blockIdx.x;   /* the split tile */
        const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
        const bool ws_ok = ngroups <= B_WS_GROUPS && ngroups * (ak_i64) gridDim.y * B_ROWS * WD <= B_WS_FLOATS;
        ak_i64 per, nsplit;                                          /* tiles a slice, slices */
        ak_split_slices ((nmax + BN - 1) / BN, gridDim.y, ws_ok, &per, &nsplit);
        const ak_i64 split = blockIdx.y;
        if (split >= nsplit)
            return;
        const b_seg_t S = b_seg (g, blockIdx.x, split * per * BN, (split + 1) * per * BN);
        float *w0 = b_ws + tg * gridDim.y * B_ROWS * WD;             /* the tile's partials */
#if DMAX == 256
        if (D == 256)
            b_tc<256> (S, base, nst, nsplit == 1, w0 + split * B_ROWS * WD, &tm_k, &tm_v);
        else
#endif
        if (D == 128)
            b_tc<128> (S, base, nst, nsplit == 1, w0 + split * B_ROWS * WD, &tm_k, &tm_v);
        else
            b_tc<64> (S, base, nst, nsplit == 1, w0 + split * B_ROWS * WD, &tm_k, &tm_v);
        if (nsplit == 1)
            return;
        /* the split merge: the partial is out, the last block of the tile merges slices 0 .. n-1 */
        __shared__ int s_last;
        if (!ak_last_arrival (&b_cnt[tg], (unsigned int) nsplit, &s_last))
            return;
        ak_split_merge<B_ROWS, B_NT, 0, true> (w0, nsplit, (ak_i64) B_ROWS * WD, WD, (int) D, nr, S.o, D, tid);
        return;
    }
#endif
    (void) tm_k;
    (void) tm_v;
    (void) nmin;
    (void) tc;
    /* the plain path: the first slice's blocks take every key */
    if (blockIdx.y == 0)
        ak_decode_plain (g, r0, nr, tid >> 5, NC + 1, tid & 31);
}
