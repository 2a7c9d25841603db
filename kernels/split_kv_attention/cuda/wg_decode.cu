/*  split_kv_attention on Hopper's wgmma (cuda, sm_90a), for the shapes
    with many query rows a KV head at head size 256: pi0.5's denoise step
    (50 action tokens x 8 query heads over one KV head, 400 rows, D 256).
    Masks, grouped-query rule and layout as ref.c (q, o [B][HQ][Q][D],
    k_cache, v_cache [B][HK][L][D]; 1 none, 2 causal, 3 ragged causal; a
    query that sees no key has the output 0).

    tile_decode computes these rows with mma.sync, a warp 16 rows x 256
    outputs (255 registers, one warp a scheduler); cuDNN's SDPA runs a
    wgmma kernel there.  Here the FlashAttention-3 shape of
    flash_attention's wgmma candidate (kernels/flash_attention/cuda/wgmma.cu:
    its pipeline, barriers and register budgets; the consumers' tile step
    and the producer's stage load are the prelude's ak_fa3_*) over the
    grouped rows:
    a KV head's (HQ/HK) x Q query rows are contiguous in q and o
    (head-major), so they are one matrix of rows G = (HQ/HK) Q for TMA:
    tm_q has dims {D, G, B*HK}, box {64, 64*CONSUMERS, 1} (rows past G
    read zeros, never the next group's); tm_k, tm_v dims {D, L, B*HK},
    box {64, BN, 1}.  Block: a producer warpgroup (one thread issues the
    TMA loads of the block's Q rows once and of the slice's K and V tiles
    into rings of STAGES) and CONSUMERS warpgroups of 64 rows each:
      S = Q K^T   `wgmma.m64n64k16` x 16 (D 256: four 64-column panels),
                  both operands from shared memory, K-major;
      the mask (edge tiles only: the slice's end, the row's count), the
                  online softmax in the exp2 domain, P in the 16-bit type;
      O += P V    `wgmma.m64n256k16` x 4, P from registers, V N-major;
    S of tile t and P V of t-1 issued together, the softmax of t while P V
    runs; PINGPONG 1 (CONSUMERS 2) alternates the warpgroups' turns.  O is
    64 x 256 floats a warpgroup: 128 registers a thread (240 with
    setmaxnreg at CONSUMERS 2).

    The keys are split over gridDim.y slices of whole tiles as in
    tile_decode (about WAVES x 132 blocks; one slice: the block writes its
    rows; else each writes its partial, the unnormalised rows and their
    maxima and sums in the exp2 domain, to a module-scope workspace and
    the block of a row tile that arrives last merges the slices in order:
    ak_split_merge on the consumer threads only, behind named barrier 3,
    as the producer has left).  Bitwise deterministic.  Launches of one
    loaded module must not run concurrently (the workers run one at a
    time).

    float16 / bfloat16, D 256, HQ a multiple of HK and the three maps
    present: the path above.  Anything else: a plain path in the same
    grid (a warp a query row over all its keys, the first slice's blocks):
    correct, not fast.

    BN 64 keys a tile (fixed: the registers), STAGES stages of the K and V
    rings, CONSUMERS warpgroups of 64 rows, PINGPONG their turns, WAVES the
    launch rule's.
    Launch: grid [(((HQ+HK-1)/HK)*Q+BM-1)/BM, slices, B*HK] with BM =
    64*CONSUMERS and slices = min(max(floor(132*WAVES/C), 1), ceil(L/BN)),
    C = B*HK*row tiles; block [128*(CONSUMERS+1)], shared
    (BM+2*STAGES*BN)*512 + 1024 bytes. */
#ifndef STAGES
#define STAGES 2
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif
#ifndef WAVES
#define WAVES 1
#endif

#define BN 64
#define W_BM (64 * CONSUMERS)               /* query rows a block */
#define W_NT (128 * (CONSUMERS + 1))
#define W_NW (W_NT / 32)
#define W_NC (128 * CONSUMERS)              /* consumer threads */
#define W_HD 256
#define W_PANELS 4                          /* 64-column panels of a row */
#define W_WD (W_HD + 8)                     /* floats a partial row: the row, m, l */
#define W_WS_FLOATS (1 << 23)
#define W_WS_GROUPS (1 << 16)
#define W_LOG2E 1.4426950408889634f
#define W_NEG_INF __int_as_float (0xff800000)

static_assert (CONSUMERS == 1 || CONSUMERS == 2, "1 or 2 consumer warpgroups");
static_assert (STAGES >= 2 && STAGES <= 3, "2 or 3 stages");
static_assert (PINGPONG == 0 || (PINGPONG == 1 && CONSUMERS == 2), "PINGPONG 1 takes two consumers");

/*  Register budgets: with two consumers the block starts with 168 a
    thread; the producer gives all but 24 back, the consumers take 240.
    One consumer: 256 threads, 255 each, nothing to move. */
#define R_PROD 24
#define R_CONS 240

__device__ __align__ (16) float w_ws[W_WS_FLOATS];
__device__ unsigned int w_cnt[W_WS_GROUPS];

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)

/*  The consumers' barrier (named barrier 3): the producer warpgroup has
    left, so no __syncthreads after the split. */
__device__ __forceinline__ void w_consumers_sync (void)
{
    ak_bar_sync_n<3, W_NC> ();
}

#endif

/*  What a block knows of its row tile (the same in every thread). */
typedef struct {
    ak_decode_group_t g;                   /* its KV head and query group */
    ak_i64 r0, nr;                         /* the tile's first row of the group, its real rows */
} w_tile_t;

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)
/*  The wgmma path of one block: slice split of nsplit, keys [k0, k1), for
    the tile's rows.  With one slice the rows are written; else the
    partial goes to slice split's place from w0 (the tile's part of the
    workspace), and the tile's last block (counter cnt) merges them. */
__device__ void w_decode (const w_tile_t &T, ak_i64 k0, ak_i64 k1, ak_i64 split,
                          ak_i64 nsplit, float *w0, unsigned int *cnt, const ak_tensor_map_t *tm_q,
                          const ak_tensor_map_t *tm_k, const ak_tensor_map_t *tm_v, unsigned char *raw)
{
    constexpr int Q_BYTES = W_BM * W_HD * 2, T_BYTES = BN * W_HD * 2, NK = BN / 16;
    __shared__ __align__ (8) ak_u64 bars[1 + 4 * STAGES];
    __shared__ int s_last;
    const unsigned raw_s = ak_smem (raw), base_s = (raw_s + 1023u) & ~1023u;
    const unsigned q_s = base_s, k_s = q_s + Q_BYTES, v_s = k_s + STAGES * T_BYTES;
    const unsigned qbar = ak_smem (bars);
    const int bk = (int) blockIdx.z;
    const int ntiles = (int) ((k1 - k0 + BN - 1) / BN);
    const int wg = threadIdx.x / 128;

    ak_fa3_init<STAGES, CONSUMERS> (qbar, tm_q, tm_k, tm_v);

    if (wg == 0) {
        /* ---------------------------------------------------- producer */
        if (CONSUMERS == 2)
            ak_setmaxnreg_dec<R_PROD> ();
        if (threadIdx.x != 0)
            return;
        ak_fa3_produce<W_PANELS, BN, W_BM, STAGES> (q_s, k_s, v_s, qbar, tm_q, tm_k, tm_v, (int) T.r0, (int) k0, bk,
                                                    ntiles);
        return;
    }

    /* -------------------------------------------------------- consumers */
    if (CONSUMERS == 2)
        ak_setmaxnreg_inc<R_CONS> ();
    const int tid = threadIdx.x % 128, cw = wg - 1, lane = tid & 31, warp = tid >> 5;
    const int wrow = cw * 64;                             /* the warpgroup's first row in the tile */
    int rl[2];                                            /* this thread's rows in the tile */
    rl[0] = wrow + warp * 16 + (lane >> 2);
    rl[1] = rl[0] + 8;
    ak_i64 n[2];
#pragma unroll
    for (int h = 0; h < 2; h++)
        n[h] = rl[h] < T.nr ? ak_decode_nkeys (T.g, T.r0 + rl[h]) : 0;
    ak_i64 wmin, wmax;
    const ak_i64 wend = wrow + 64 < T.nr ? wrow + 64 : T.nr;
    ak_decode_key_range (T.g, T.r0 + wrow, T.r0 + wend, &wmin, &wmax);
    if (wrow + 64 > T.nr)
        wmin = 0;                                         /* padding rows: the masked loop */
    const ak_i64 wm1 = wmax < k1 ? wmax : k1, wf1 = wmin < k1 ? wmin : k1;
    const int nt = wm1 > k0 ? (int) ((wm1 - k0 + BN - 1) / BN) : 0;
    int ntfull = wf1 > k0 ? (int) ((wf1 - k0) / BN) : 0;
    if (ntfull > nt)
        ntfull = nt;
    const ak_i64 D = T.g.D;
    const float sc = W_LOG2E / sqrtf ((float) D);

    float o[W_HD / 2], sacc[BN / 2], m[2], l[2];
    unsigned pa[NK][4];
    ak_fa3_begin<W_HD, NK, PINGPONG, CONSUMERS> (cw, qbar, o, pa, m, l);

    ak_fa3_ctx_t c = ak_fa3_rings<STAGES> (qbar, k_s, v_s);
    c.qa = q_s + cw * 64 * 128;
    c.tid = tid;
    c.cw = cw;
    c.sc = sc;
    int t = 0;
    for (; t < ntfull; t++)
        ak_fa3_tile<false, W_HD, BN, W_BM, STAGES, PINGPONG, CONSUMERS, NK> (c, t, o, sacc, pa, m, l, 0, 0);
    for (; t < nt; t++) {
        const ak_i64 j0 = k0 + (ak_i64) t * BN;
        int lim[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const ak_i64 e = (n[h] < k1 ? n[h] : k1) - j0;
            lim[h] = e < 0 ? 0 : e > BN ? BN : (int) e;
        }
        ak_fa3_tile<true, W_HD, BN, W_BM, STAGES, PINGPONG, CONSUMERS, NK> (c, t, o, sacc, pa, m, l, lim[0], lim[1]);
    }
    /* the last tile's P V, then the block's tiles past this warpgroup's
       keys passed on, and the turns with them */
    ak_fa3_drain<W_HD, BN, STAGES, PINGPONG, CONSUMERS, NK> (c, nt, ntiles, o, sacc, pa);

    /* the rows out (padding rows are not written), the row sums spread over the quad */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float lh = l[h];
        lh += __shfl_xor_sync (0xffffffffu, lh, 1);
        lh += __shfl_xor_sync (0xffffffffu, lh, 2);
        if (rl[h] >= T.nr)
            continue;
        const int cl = (lane & 3) * 2;
        if (nsplit == 1) {
            const float inv = lh > 0.0f ? 1.0f / lh : 0.0f;
            ak_t *out = T.g.o + (T.r0 + rl[h]) * D + cl;
#pragma unroll
            for (int j = 0; j < W_HD / 8; j++)
                *(unsigned *) (out + j * 8) = ak_pack2 (o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
        }
        else {
            float *pr = w0 + (split * W_BM + rl[h]) * W_WD;
#pragma unroll
            for (int j = 0; j < W_HD / 8; j++)
                *(float2 *) (pr + j * 8 + cl) = make_float2 (o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
            if ((lane & 3) == 0) {
                pr[W_HD] = m[h] == W_NEG_INF ? W_NEG_INF : m[h] * sc;   /* the exp2 domain */
                pr[W_HD + 1] = lh;
            }
        }
    }
    if (nsplit == 1)
        return;

    /* the split merge: the last block of the tile (ak_last_arrival's
       handshake on the consumers' barrier) */
    __threadfence ();
    w_consumers_sync ();
    if (threadIdx.x == 128) {
        const unsigned int done = atomicAdd (cnt, 1u);
        s_last = done == (unsigned int) nsplit - 1;
        if (s_last)
            *cnt = 0;
    }
    w_consumers_sync ();
    if (!s_last)
        return;
    __threadfence ();
    ak_split_merge<W_BM, W_NC, 3> (w0, nsplit, (ak_i64) W_BM * W_WD, W_WD, W_HD, (int) T.nr, T.g.o + T.r0 * D, D,
                                    threadIdx.x - 128);
}
#endif

extern "C" __global__ void __launch_bounds__ (W_NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_q,
           const __grid_constant__ ak_tensor_map_t tm_k, const __grid_constant__ ak_tensor_map_t tm_v)
{
    AK_DYNAMIC_SHARED (unsigned char, w_raw);
    w_tile_t T;
    T.g = ak_decode_group (a);
    const ak_i64 HQ = T.g.HQ, HK = T.g.HK, D = T.g.D, bk = T.g.bk;
    if (D < 1 || D > 32 * AK_ATTN_MAXC)
        return;                                           /* uniform over the block */
    T.r0 = (ak_i64) blockIdx.x * W_BM;
    if (T.r0 >= T.g.G)
        return;
    T.nr = min ((ak_i64) W_BM, T.g.G - T.r0);

    bool tc = false;
#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)
    tc = D == W_HD && HQ % HK == 0 && ak_tensor_map_present (&tm_q) && ak_tensor_map_present (&tm_k)
         && ak_tensor_map_present (&tm_v)
         && ak_dynamic_smem_size () >= (unsigned) ((W_BM + 2 * STAGES * BN) * W_HD * 2 + 1024);
    if (tc) {
        ak_i64 nmin, nmax;
        ak_decode_key_range (T.g, T.r0, T.r0 + T.nr, &nmin, &nmax);
        const ak_i64 tg = bk * gridDim.x + blockIdx.x;     /* the split tile */
        const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
        const bool ws_ok = ngroups <= W_WS_GROUPS && ngroups * (ak_i64) gridDim.y * W_BM * W_WD <= W_WS_FLOATS;
        ak_i64 per, nsplit;
        ak_split_slices ((nmax + BN - 1) / BN, gridDim.y, ws_ok, &per, &nsplit);
        const ak_i64 split = blockIdx.y;
        if (split >= nsplit)
            return;
        const ak_i64 k0 = split * per * BN, k1 = min (nmax, k0 + per * BN);
        w_decode (T, k0, k1, split, nsplit, w_ws + tg * gridDim.y * W_BM * W_WD, &w_cnt[tg], &tm_q, &tm_k,
                  &tm_v, w_raw);
        return;
    }
#endif
    (void) tm_q;
    (void) tm_k;
    (void) tm_v;
    /* the plain path: the first slice's blocks take every key */
    if (blockIdx.y == 0)
        ak_decode_plain (T.g, T.r0, T.nr, threadIdx.x >> 5, W_NW, threadIdx.x & 31);
}
