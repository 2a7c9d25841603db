/*  split_kv_attention with the KV tiles shared by a block's warps (cuda):
    FlashAttention-2's tiling over the grouped query rows.  Masks,
    grouped-query rule and layout as ref.c (q, o [B][HQ][Q][D], k_cache,
    v_cache [B][HK][L][D]; 1 none, 2 causal, 3 ragged causal; a query that
    sees no key has the output 0).

    For the shapes where a KV head has many query rows (pi0.5's denoise
    step: 50 action tokens x 8 query heads over one KV head, 400 rows):
    mma_decode and stream_decode give a block 16 (or 8) rows, so every
    block streams the whole slice of keys and values again (on
    pi05_denoise_b8, 25 times a sequence).  Here a block owns BM rows of
    one KV head's group ((HQ/HK) heads x Q tokens, head-major: rows r0 ..
    r0+BM-1 are contiguous in q and o), a warp 16 of them, and the key
    tiles of BN keys stream once a block through two shared-memory stages
    (`cp.async`, the next tile loading while this one is computed), read
    by every warp: S = Q K^T with `mma.sync.m16n8k16` (K rows by
    `ldmatrix`), the mask (each row's count, the slice's end), the online
    softmax in the exp2 domain, P rounded to the element type and fed
    from registers as the A operand of O += P V (V by `ldmatrix.trans`).
    Q's fragments are held in registers at D 64 and 128 and read from
    shared memory at each k-step at D 256 (a warp holds 16 x 256 float
    outputs: 128 registers a lane).  A warp whose rows are all padding,
    or whose rows see none of a tile's keys (causal), skips its math but
    not the block's loads and barriers.

    A row tile's output columns can be split over DS blocks (gridDim.x =
    row tiles x DS, a tile's DS blocks adjacent): each computes the whole
    of S (Q and K at full D) and only its D/DS columns of P V, loading
    only those columns of V.  S is computed DS times, but with no merge
    to pay for it: on pi0.5's step (400 rows over one KV head, D 256, 866
    keys) DS 4 gives 4x the blocks of DS 1 and a warp 16 x 64 outputs
    instead of 16 x 256 (185 registers instead of 255).  On the
    bandwidth-bound shapes (a few rows a KV head) it reads K DS times and
    loses.

    The keys are split over gridDim.y slices of whole tiles (the launch
    rule: about WAVES x 132 blocks, at least one tile a slice): with one
    slice the block writes its rows; else each writes its partial (the
    row maxima and sums, the unnormalised rows, in float) to a
    module-scope workspace and the block of a tile that arrives last
    merges the slices in order (ak_last_arrival, ak_split_merge).  Every
    sum runs in a fixed order: bitwise deterministic.  Launches of one
    loaded module must not run concurrently (the workers run one at a
    time).

    float16 and bfloat16 with D 64, 128 or 256 and 16-byte aligned
    buffers; anything else (float32, other D up to 256) runs a plain path
    in the same grid, on the blocks of the first slice and columns (a
    warp a query row over all its keys: correct, not fast).  Under
    AK_CUDA_EMU (test_cuda_cand_emu) the MMA, ldmatrix and cp.async go
    through the CPU emulation.

    BM     query rows a block (BM/16 warps; 32, 64 or 128 in the spec)
    BN     keys a tile
    WAVES  used by the launch rule only
    DS     blocks a row tile's output columns are split over (1, 2, 4)
    Launch: grid [DS*row tiles, min(max(floor(132*WAVES/C), 1),
    ceil(L/BN)), B*HK] with C = B*HK*DS*row tiles, block [2*BM], shared
    ((BM+2*BN)*(D+8)+2*BN*(D/DS+8))*2 bytes. */
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef WAVES
#define WAVES 1
#endif
#ifndef DS
#define DS 1
#endif

#define T_NW (BM / 16)                                 /* warps */
#define T_WS_FLOATS (1 << 23)
#define T_WS_GROUPS (1 << 16)
#define T_LOG2E 1.4426950408889634f
#define T_NEG_INF __int_as_float (0xff800000)
#if defined(AK_DTYPE_BFLOAT16) || defined(AK_DTYPE_FLOAT16)
#define T_TC 1
#else
#define T_TC 0
#endif

static_assert (BM % 16 == 0 && BM >= 16 && BM <= 256 && BN % 16 == 0 && BN >= 16 && BN <= 128,
               "BM and BN are multiples of 16 (BM <= 256, BN <= 128)");
static_assert (DS == 1 || DS == 2 || DS == 4, "DS is 1, 2 or 4");

__device__ __align__ (16) float t_ws[T_WS_FLOATS];
__device__ unsigned int t_cnt[T_WS_GROUPS];

/* What a block knows of its tile and slice (the same in every thread). */
struct t_tile {
    ak_decode_group_t g;                              /* its KV head and query group */
    ak_i64 nr, r0, k0, k1;                            /* nr: the tile's real rows, r0 its first */
    int c0;                                           /* the block's first output column */
    const ak_t *q;                                    /* the tile's first row */
    ak_t *o;                                          /* the tile's first output row (its column 0) */
};

/* The keys row r of the tile sees (0 for a padding row). */
__device__ __forceinline__ ak_i64 t_nkeys (const t_tile &T, ak_i64 r)
{
    return r < T.nr ? ak_decode_nkeys (T.g, T.r0 + r) : 0;
}

#if T_TC
/*  The block's slice on tensor cores: the tile's rows' partial (m, l in
    the exp2 domain, unnormalised rows) or, with one slice, its output. */
template <int HD>
__device__ void t_tc (const t_tile &T, unsigned char *raw, bool single, float *wp)
{
    constexpr int HC = HD / DS;                        /* the block's output columns */
    constexpr int SD = HD + 8;                         /* Q and K smem row stride, elements */
    constexpr int SV = HC + 8;                         /* V's */
    constexpr int NJ = BN / 8;                         /* n8 tiles of S */
    constexpr int ND = HC / 8;                         /* n8 tiles of O */
    constexpr bool QREG = HD <= 128;                   /* Q fragments in registers */
    constexpr ak_i64 WD = HC + 8;                      /* floats a partial row */
    ak_t *Qs = (ak_t *) raw;
    ak_t *Ks = Qs + BM * SD;                           /* 2 stages */
    ak_t *Vs = Ks + 2 * BN * SD;                       /* 2 stages of BN x SV */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wrow = warp * 16;                        /* the warp's first row in the tile */
    const float sc = T_LOG2E / sqrtf ((float) HD);

    /* the keys this lane's two rows see, and the most any row of the warp sees */
    ak_i64 n[2] = { t_nkeys (T, wrow + (lane >> 2)), t_nkeys (T, wrow + (lane >> 2) + 8) };
    ak_i64 wmax = max (n[0], n[1]), wmin = min (n[0], n[1]);
#pragma unroll
    for (int off = 4; off <= 16; off <<= 1) {
        wmax = max (wmax, __shfl_xor_sync (0xffffffffu, wmax, off));
        wmin = min (wmin, __shfl_xor_sync (0xffffffffu, wmin, off));
    }
    if (wrow + 16 > T.nr)
        wmin = 0;                                      /* padding rows: the masked path */
    const ak_i64 kfull = min (T.k1, wmin);             /* keys every row of the warp sees */
    const int ntiles = (int) ((T.k1 - T.k0 + BN - 1) / BN);

    ak_cp_rows<HD> (Qs, T.q, 0, BM, T.nr, T_NW * 32);
    ak_cp_rows<HD> (Ks, T.g.kb, T.k0, BN, T.k1, T_NW * 32);
    ak_cp_cols<HD, HC> (Vs, T.g.vb, T.c0, T.k0, BN, T.k1, T_NW * 32);
    ak_cp_commit ();

    unsigned qf[QREG ? HD / 16 : 1][4];
    float o[1][ND][4], m[2], l[2];
#pragma unroll
    for (int d = 0; d < ND; d++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            o[0][d][e] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        m[h] = T_NEG_INF;
        l[h] = 0.0f;
    }

    for (int t = 0; t < ntiles; t++) {
        ak_cp_wait<0> ();
        __syncthreads ();
        if (QREG && t == 0) {
#pragma unroll
            for (int kk = 0; kk < (QREG ? HD / 16 : 1); kk++)
                ak_ldmatrix_x4 (qf[kk], Qs + (wrow + (lane & 15)) * SD + kk * 16 + (lane >> 4) * 8);
        }
        if (t + 1 < ntiles) {
            const int st = (t + 1) & 1;
            const ak_i64 j1 = T.k0 + (ak_i64) (t + 1) * BN;
            ak_cp_rows<HD> (Ks + st * BN * SD, T.g.kb, j1, BN, T.k1, T_NW * 32);
            ak_cp_cols<HD, HC> (Vs + st * BN * SV, T.g.vb, T.c0, j1, BN, T.k1, T_NW * 32);
        }
        ak_cp_commit ();
        const ak_i64 j0 = T.k0 + (ak_i64) t * BN;
        if (j0 >= wmax)
            continue;                                  /* no row of the warp sees these keys (or none is real) */
        const ak_t *ks = Ks + (t & 1) * BN * SD, *vs = Vs + (t & 1) * BN * SV;

        /* S = Q K^T: 16 x BN */
        float s[1][NJ][4];
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[0][j][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            unsigned qa[1][4];
            if (QREG) {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    qa[0][e] = qf[QREG ? kk : 0][e];
            }
            else
                ak_ldmatrix_x4 (qa[0], Qs + (wrow + (lane & 15)) * SD + kk * 16 + (lane >> 4) * 8);
            ak_fa_scores<1, NJ> (s, qa, ks, SD, kk, lane);
        }

        /* mask (the slice's end, each row's count), exp2 domain, row max over the quad */
        const bool edge = j0 + BN > kfull;
        float mx[2] = { T_NEG_INF, T_NEG_INF };
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = s[0][j][e] * sc;
                if (edge) {
                    const ak_i64 col = j0 + j * 8 + (lane & 3) * 2 + (e & 1);
                    if (col >= T.k1 || col >= n[e >> 1])
                        x = T_NEG_INF;
                }
                s[0][j][e] = x;
                mx[e >> 1] = fmaxf (mx[e >> 1], x);
            }
        float mu[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 1));
            mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 2));
            const float mn = fmaxf (m[h], mx[h]);
            mu[h] = mn == T_NEG_INF ? 0.0f : mn;       /* a row with no key yet */
            const float corr = exp2f (m[h] - mu[h]);
            m[h] = mn;
            l[h] *= corr;
#pragma unroll
            for (int d = 0; d < ND; d++) {
                o[0][d][2 * h] *= corr;
                o[0][d][2 * h + 1] *= corr;
            }
        }

        /* P = exp2 (x - m) in the element type, O += P V */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            float p[2][4];
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    p[u][e] = exp2f (s[0][2 * kk + u][e] - mu[e >> 1]);
                    l[e >> 1] += p[u][e];
                }
            const unsigned pa[1][4] = { { ak_pack2 (p[0][0], p[0][1]), ak_pack2 (p[0][2], p[0][3]),
                                          ak_pack2 (p[1][0], p[1][1]), ak_pack2 (p[1][2], p[1][3]) } };
            ak_fa_pv<1, ND> (o, pa, vs, SV, kk, lane);
        }
    }
    ak_cp_wait<0> ();

    /* the row sums live spread over the quad; padding rows are not written */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float lh = l[h];
        lh += __shfl_xor_sync (0xffffffffu, lh, 1);
        lh += __shfl_xor_sync (0xffffffffu, lh, 2);
        const int r = wrow + (lane >> 2) + 8 * h;
        if (r >= T.nr)
            continue;
        const int c = (lane & 3) * 2;
        if (single) {
            const float inv = lh > 0.0f ? 1.0f / lh : 0.0f;
            ak_t *out = T.o + (ak_i64) r * HD + T.c0 + c;
#pragma unroll
            for (int d = 0; d < ND; d++)
                *(unsigned *) (out + d * 8) = ak_pack2 (o[0][d][2 * h] * inv, o[0][d][2 * h + 1] * inv);
        }
        else {
            float *pr = wp + r * WD;
#pragma unroll
            for (int d = 0; d < ND; d++)
                *(float2 *) (pr + d * 8 + c) = make_float2 (o[0][d][2 * h], o[0][d][2 * h + 1]);
            if ((lane & 3) == 0) {
                pr[HC] = m[h];
                pr[HC + 1] = lh;
            }
        }
    }
}
#endif


extern "C" __global__ void __launch_bounds__ (T_NW * 32, 1) ak_kernel (ak_cuda_args_t a)
{
    AK_DYNAMIC_SHARED (unsigned char, t_raw);
    __shared__ int s_last;

    t_tile T;
    T.g = ak_decode_group (a);
    const ak_i64 D = T.g.D, bk = T.g.bk;
    if (D < 1 || D > 32 * AK_ATTN_MAXC)
        return;                                        /* uniform over the block */

    T.r0 = (ak_i64) ((unsigned) blockIdx.x / DS) * BM;
    if (T.r0 >= T.g.G)
        return;
    T.c0 = (int) (blockIdx.x % DS) * (int) (D / DS);  /* used by the tensor-core path only */
    T.nr = min ((ak_i64) BM, T.g.G - T.r0);
    T.q = T.g.q + T.r0 * D;
    T.o = T.g.o + T.r0 * D;

    ak_i64 nmin, nmax;                                 /* the fewest and the most keys a real row sees */
    ak_decode_key_range (T.g, T.r0, T.r0 + T.nr, &nmin, &nmax);
    const ak_i64 tg = bk * gridDim.x + blockIdx.x;     /* the split tile */
    const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
    const ak_i64 WD = D / DS + 8;
    const bool ws_ok = ngroups <= T_WS_GROUPS && ngroups * (ak_i64) gridDim.y * BM * WD <= T_WS_FLOATS;
    ak_i64 per, nsplit;                                /* tiles a slice, slices */
    ak_split_slices ((nmax + BN - 1) / BN, gridDim.y, ws_ok, &per, &nsplit);
    const ak_i64 split = blockIdx.y;
    if (split >= nsplit)
        return;
    T.k0 = split * per * BN;
    T.k1 = min (nmax, T.k0 + per * BN);

    bool tc = false;
#if T_TC
    float *wp = t_ws + (tg * gridDim.y + split) * BM * WD;          /* this slice's partial */
    const unsigned need = ((unsigned) (BM + 2 * BN) * (unsigned) (D + 8) + 2u * BN * (unsigned) WD) * 2u;
    tc = (D == 64 || D == 128 || D == 256) && ak_dynamic_smem_size () >= need
         && ((ak_u64) T.q | (ak_u64) T.g.kb | (ak_u64) T.g.vb | (ak_u64) T.o) % 16 == 0;
    if (tc) {
        if (D == 256)
            t_tc<256> (T, t_raw, nsplit == 1, wp);
        else if (D == 128)
            t_tc<128> (T, t_raw, nsplit == 1, wp);
        else
            t_tc<64> (T, t_raw, nsplit == 1, wp);
    }
#endif
    if (!tc) {
        /* the plain path: the first slice's blocks of the first columns take every key */
        if (split == 0 && blockIdx.x % DS == 0)
            ak_decode_plain (T.g, T.r0, T.nr, threadIdx.x >> 5, T_NW, threadIdx.x & 31);
        return;
    }
    if (nsplit == 1)
        return;

    /* the split merge: the partial is out, the last block of the tile merges slices
       0 .. nsplit-1 in order */
    if (!ak_last_arrival (&t_cnt[tg], (unsigned int) nsplit, &s_last))
        return;
#if T_TC
    ak_split_merge<BM, T_NW * 32, 0> (t_ws + tg * gridDim.y * BM * WD, nsplit, BM * WD, (int) WD, (int) (D / DS),
                                      (int) T.nr, T.o + T.c0, D, threadIdx.x);
#endif
}
