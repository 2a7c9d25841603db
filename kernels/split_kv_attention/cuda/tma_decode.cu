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
    merging the slices in order (ak_last_arrival, ak_split_merge).  Every
    sum in a fixed order: bitwise deterministic.  Launches of one loaded
    module must not run concurrently (the workers run one at a time).

    Under AK_CUDA_EMU (test_cuda_cand_emu) the mbarriers and the TMA
    copies go through this file's hooks into the CPU emulation (emu.h).

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
    Launch: grid [(((HQ+HK-1)/HK)*Q+7)/8, min(max(floor(132*WAVES/C), 1),
    ceil(L/BN)) (1 when L < 1), B*HK] with C = B*HK*row tiles, block
    [32*(NC+1)], shared max(min(STAGES*2*BN*D*b, 204800), NC*8*(D+8)*4)
    + 1024 bytes. */
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
static_assert ((KW == 1 || KW == 2) && BN % (16 * KW) == 0, "KW is 1 or 2, BN a multiple of 16*KW");

__device__ __align__ (16) float b_ws[B_WS_FLOATS];
__device__ unsigned int b_cnt[B_WS_GROUPS];

/* What a block knows of its row tile and slice (the same in every thread). */
typedef struct {
    ak_i64 k0, k1, kfull;                             /* the slice's keys; those every real row sees */
    int nr;                                           /* the tile's real rows */
    int n[B_ROWS];                                    /* keys each row sees (0: a padding row) */
    const ak_t *q, *kb, *vb;                          /* q: the tile's first row; kb, vb: its KV head */
    ak_t *o;                                          /* the tile's first output row */
} b_tile_t;

#if B_TC
/*  The mbarriers and TMA copies through hooks of this file, so that the
    CPU emulation (test_cuda_cand_emu) can run them: there, a barrier's 8
    bytes hold its pending arrivals (bits 0-15), its count (16-31) and the
    parity of the phases completed (32); one thread runs at a time, a wait
    spins (__nanosleep: the other threads run), and a copy is done when
    issued, so expect_tx is a plain arrival after which the copies follow
    with no thread switch between. */
#ifdef AK_CUDA_EMU
__device__ __forceinline__ void b_bar_init (ak_u64 *bar, unsigned n)
{
    *bar = (ak_u64) n | (ak_u64) n << 16;
}

__device__ __forceinline__ void b_bar_arrive (ak_u64 *bar)
{
    const ak_u64 n = (*bar >> 16) & 0xffffu, pending = (*bar & 0xffffu) - 1, par = (*bar >> 32) & 1u;
    *bar = pending ? (par << 32 | n << 16 | pending) : ((par ^ 1u) << 32 | n << 16 | n);
}

__device__ __forceinline__ void b_bar_wait (ak_u64 *bar, unsigned parity)
{
    while (((*bar >> 32) & 1u) == parity)
        __nanosleep (32);
}

__device__ __forceinline__ void b_bar_expect (ak_u64 *bar, unsigned bytes)
{
    (void) bytes;
    b_bar_arrive (bar);
}

__device__ __forceinline__ void b_tma_load (unsigned char *dst, const ak_tensor_map_t *map, int c0, int c1, int c2,
                                            ak_u64 *bar)
{
    (void) bar;
    ak_emu_tma_load_3d (dst, map, c0, c1, c2);
}

__device__ __forceinline__ void b_tma_begin (const ak_tensor_map_t *tm_k, const ak_tensor_map_t *tm_v)
{
    (void) tm_k;
    (void) tm_v;
}
#else
__device__ __forceinline__ void b_bar_init (ak_u64 *bar, unsigned n)
{
    ak_bar_init (ak_smem (bar), n);
}

__device__ __forceinline__ void b_bar_arrive (ak_u64 *bar)
{
    ak_bar_arrive (ak_smem (bar));
}

__device__ __forceinline__ void b_bar_wait (ak_u64 *bar, unsigned parity)
{
    ak_bar_wait (ak_smem (bar), parity);
}

__device__ __forceinline__ void b_bar_expect (ak_u64 *bar, unsigned bytes)
{
    ak_bar_expect (ak_smem (bar), bytes);
}

__device__ __forceinline__ void b_tma_load (unsigned char *dst, const ak_tensor_map_t *map, int c0, int c1, int c2,
                                            ak_u64 *bar)
{
    ak_tma_load_3d (ak_smem (dst), map, c0, c1, c2, ak_smem (bar));
}

/*  The barriers' initialisation made visible to the async proxy, the maps prefetched. */
__device__ __forceinline__ void b_tma_begin (const ak_tensor_map_t *tm_k, const ak_tensor_map_t *tm_v)
{
    asm volatile ("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile ("prefetch.tensormap [%0];\n" :: "l" ((ak_u64) tm_k) : "memory");
    asm volatile ("prefetch.tensormap [%0];\n" :: "l" ((ak_u64) tm_v) : "memory");
}
#endif

/*  The block's slice on tensor cores: the producer's loads, the
    consumers' tiles, their partials merged into the block's (into wp
    with several slices, else the output rows). */
template <int D>
__device__ void b_tc (const b_tile_t &T, unsigned char *base, int nst, ak_i64 nsplit, float *wp,
                      const ak_tensor_map_t *tm_k, const ak_tensor_map_t *tm_v, int bk)
{
    constexpr int KS = D / 16;                        /* k-steps of S; m-tiles of O^T */
    constexpr int PANELS = D / 64;
    constexpr int PB = BN * 128;                      /* a panel's bytes */
    constexpr int SB = 2 * PANELS * PB;               /* a stage: K's panels, then V's */
    constexpr int WD = D + 8;                         /* floats a partial row: the row, m, l */
    __shared__ __align__ (8) ak_u64 bars[2 * B_MAXST];          /* full, empty a stage */
    __shared__ float s_rl[B_ROWS], s_ew[NC][B_ROWS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    ak_u64 *full = bars, *empty = bars + B_MAXST;
    const int ntiles = (int) ((T.k1 - T.k0 + BN - 1) / BN);

    if (tid == 0) {
        for (int s = 0; s < nst; s++) {
            b_bar_init (full + s, 1);
            b_bar_init (empty + s, NC);
        }
        b_tma_begin (tm_k, tm_v);
    }
    __syncthreads ();

    float o[KS][4], m = B_NEG_INF, l = 0.0f;
    const int g = lane >> 2, t4 = lane & 3;
    if (warp == NC) {
        /* ---------------------------------------------------- producer */
        if (lane == 0)
            for (int t = 0; t < ntiles; t++) {
                const int s = t % nst;
                const unsigned ph = (unsigned) (t / nst) & 1u;
                unsigned char *dst = base + s * SB;
                const int j0 = (int) (T.k0 + (ak_i64) t * BN);
                b_bar_wait (empty + s, ph ^ 1u);
                b_bar_expect (full + s, SB);
#pragma unroll
                for (int p = 0; p < PANELS; p++) {
                    b_tma_load (dst + p * PB, tm_k, p * 64, j0, bk, full + s);
                    b_tma_load (dst + (PANELS + p) * PB, tm_v, p * 64, j0, bk, full + s);
                }
            }
    }
    else {
        /* -------------------------------------------------- a consumer */
        /* Q's A fragments, row g (zero past the tile's real rows): dims 16ks+2t, +1 and +8, +9 */
        unsigned qa[KS][2];
        const bool real = g < T.nr;
        const int ng = T.n[g];
        const ak_t *qr = T.q + (real ? g * D : 0);
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            qa[ks][0] = real ? __ldg ((const unsigned *) (qr + 16 * ks + 2 * t4)) : 0u;
            qa[ks][1] = real ? __ldg ((const unsigned *) (qr + 16 * ks + 2 * t4 + 8)) : 0u;
        }
#pragma unroll
        for (int i = 0; i < KS; i++)
            o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
        const float qscale = B_LOG2E / sqrtf ((float) D);
        /* ldmatrix rows: key (or value) 8(l/16) + l%8 of a 16-key step, chunk 2ks + (l/8)%2 */
        const int lr = 8 * (lane >> 4) + (lane & 7), lc = (lane >> 3) & 1;

        for (int t = 0; t < ntiles; t++) {
            const int s = t % nst;
            b_bar_wait (full + s, (unsigned) (t / nst) & 1u);
            const unsigned char *ks_ = base + s * SB, *vs_ = ks_ + PANELS * PB;
#pragma unroll
            for (int u = 0; u < BN / B_SK; u++) {
                const ak_i64 c0 = T.k0 + (ak_i64) t * BN + B_SK * u;
                if (c0 >= T.k1)
                    break;                            /* past the slice: nothing left of the tile */
                if ((t * (BN / B_SK) + u) % NC != warp)
                    continue;                         /* another warp's step */

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

                /* row g: sc[j][e], keys c0 + 8j + 2t + e; masked past the slice or the row's count */
                const bool full = c0 + B_SK <= T.kfull;
                float mx = B_NEG_INF;
#pragma unroll
                for (int j = 0; j < 2 * KW; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float v = (sc[j][e] + sd[j][e]) * qscale;
                        if (!full) {
                            const ak_i64 key = c0 + 8 * j + 2 * t4 + e;
                            v = key < T.k1 && key < ng ? v : B_NEG_INF;
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
            __syncwarp ();                            /* every lane done with the stage */
            if (lane == 0)
                b_bar_arrive (empty + s);
        }
    }
    __syncthreads ();                                 /* every tile consumed (so landed): the ring is free */

    float *part = (float *) base;                     /* [NC][8][WD] */
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

    /* the warps in order, real rows only: each one's weight a row, then element (r, d) a thread's */
    if (tid < T.nr) {
        float M = B_NEG_INF;
        for (int w = 0; w < NC; w++)
            M = fmaxf (M, part[(w * B_ROWS + tid) * WD + D]);
        float ls = 0.0f;
        for (int w = 0; w < NC; w++) {
            const float *pw = part + (w * B_ROWS + tid) * WD;
            const float e = M != B_NEG_INF ? exp2f (pw[D] - M) : 0.0f;
            s_ew[w][tid] = e;
            ls += e * pw[D + 1];
        }
        s_rl[tid] = ls;
        if (nsplit > 1) {
            wp[tid * WD + D] = M;
            wp[tid * WD + D + 1] = ls;
        }
    }
    __syncthreads ();
    for (int u = tid; u < T.nr * D; u += B_NT) {
        const int r = u / D, d = u - r * D;
        float O = 0.0f;
#pragma unroll
        for (int w = 0; w < NC; w++)
            O += s_ew[w][r] * part[(w * B_ROWS + r) * WD + d];
        if (nsplit == 1) {
            const float ls = s_rl[r];
            T.o[(ak_i64) r * D + d] = ak_from_acc (ls > 0.0f ? O / ls : 0.0f);
        }
        else
            wp[r * WD + d] = O;
    }
}
#endif

extern "C" __global__ void __launch_bounds__ (B_NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_k, const __grid_constant__ ak_tensor_map_t tm_v)
{
    AK_DYNAMIC_SHARED (unsigned char, b_raw);
    __shared__ b_tile_t T;
    __shared__ int s_last;

    const ak_decode_group_t g = ak_decode_group (a);
    const ak_i64 D = g.D, bk = g.bk;
    const int tid = threadIdx.x;
    if (D < 1 || D > 32 * AK_ATTN_MAXC)
        return;                                                    /* uniform over the block */
    const ak_i64 r0 = (ak_i64) blockIdx.x * B_ROWS;
    if (r0 >= g.G)
        return;
    const int nr = (int) min ((ak_i64) B_ROWS, g.G - r0);
    const ak_t *q = g.q + r0 * D;
    ak_t *o = g.o + r0 * D;

    ak_i64 nmin, nmax;                                              /* the keys the tile's rows see */
    ak_decode_key_range (g, r0, r0 + nr, &nmin, &nmax);

    bool tc = false;
#if B_TC
    const unsigned dyn = ak_dynamic_smem_size ();
    const int WD = (int) D + 8;
    const int sb = 4 * BN * (int) D;                                /* a stage's bytes (16-bit elements) */
    const int room = (int) dyn - 1024;                              /* past the 1024-byte alignment */
    const int nst = room > 0 ? min (STAGES, room / sb) : 0;
    tc = (D == 64 || D == 128 || (D == 256 && DMAX == 256)) && nst >= 1 && room >= NC * B_ROWS * WD * 4
         && ak_tensor_map_present (&tm_k) && ak_tensor_map_present (&tm_v)
         && ((ak_u64) q | (ak_u64) o | (ak_u64) g.kb | (ak_u64) g.vb) % 16 == 0;
    if (tc) {
        const ak_i64 tg = bk * gridDim.x + blockIdx.x;              /* the split tile */
        const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
        const bool ws_ok = ngroups <= B_WS_GROUPS && ngroups * (ak_i64) gridDim.y * B_ROWS * WD <= B_WS_FLOATS;
        ak_i64 per, nsplit;                                          /* tiles a slice, slices */
        ak_split_slices ((nmax + BN - 1) / BN, gridDim.y, ws_ok, &per, &nsplit);
        const ak_i64 split = blockIdx.y;
        if (split >= nsplit)
            return;
        if (tid == 0) {
            T.k0 = split * per * BN;
            T.k1 = max (T.k0, min (nmax, T.k0 + per * BN));
            T.kfull = min (T.k1, nmin);
            T.nr = nr;
            T.q = q;
            T.o = o;
            T.kb = g.kb;
            T.vb = g.vb;
        }
        if (tid < B_ROWS)
            T.n[tid] = tid < nr ? (int) ak_decode_nkeys (g, r0 + tid) : 0;
        __syncthreads ();
        unsigned char *base = b_raw + ((1024u - (ak_smem (b_raw) & 1023u)) & 1023u);
        float *wp = b_ws + (tg * gridDim.y + split) * B_ROWS * WD;  /* this slice's partial */
#if DMAX == 256
        if (D == 256)
            b_tc<256> (T, base, nst, nsplit, wp, &tm_k, &tm_v, (int) bk);
        else
#endif
        if (D == 128)
            b_tc<128> (T, base, nst, nsplit, wp, &tm_k, &tm_v, (int) bk);
        else
            b_tc<64> (T, base, nst, nsplit, wp, &tm_k, &tm_v, (int) bk);
        if (nsplit == 1)
            return;
        /* the split merge: the partial is out, the last block of the tile merges slices 0 .. n-1 */
        if (!ak_last_arrival (&b_cnt[tg], (unsigned int) nsplit, &s_last))
            return;
        ak_split_merge<B_ROWS, B_NT, 0, true> (b_ws + tg * gridDim.y * B_ROWS * WD, nsplit, (ak_i64) B_ROWS * WD, WD,
                                         (int) D, nr, o, D, tid);
        return;
    }
#endif
    (void) tm_k;
    (void) tm_v;
    (void) nmin;
    /* the plain path: the first slice's blocks take every key */
    if (blockIdx.y == 0)
        ak_decode_plain (g, r0, nr, tid >> 5, NC + 1, tid & 31);
}
