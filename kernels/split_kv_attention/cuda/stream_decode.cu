/*  split_kv_attention for the decode step (cuda): the KV cache streamed
    through a per-warp cp.async pipeline, both products on tensor cores
    with the query rows as the MMA's N (8), not its M (16).  Masks,
    grouped-query rule and layout as ref.c (q, o [B][HQ][Q][D], k_cache,
    v_cache [B][HK][L][D]; 1 none, 2 causal, 3 ragged causal; a query that
    sees no key has the output 0).

    Why another decode kernel: mma_decode puts 16 query rows in the MMA's
    M, so on a decode step (one token, 4 query heads a KV head: 4 real
    rows) three quarters of its output registers are padding, and it keeps
    the next step's keys and values in registers: 236 registers at D 128,
    8 warps an SM, too few loads in flight to reach the copy bandwidth on
    a long cache.  Here:
      S      S = Q K^T with Q the A operand, rows g (0..7) real or zero, rows
             g+8 zero at ROWS 8 (constant registers) and rows 8..15 of the
             tile at ROWS 16; K the B operand from shared memory
             (ldmatrix: keys 8j+g of n-tile j)
      O^T += V^T P^T: V^T the A operand (ldmatrix.trans of the value rows:
             16 dims x 16 keys an m-tile), P^T the B operand, straight from
             S's accumulators (lane (g, t) holds P[row g][keys 2t, 2t+1]
             and [8+2t, 8+2t+1]: exactly the B fragment of rows g; rows
             g+8 likewise, a second set of O^T accumulators on the same
             V^T fragments at ROWS 16); lane (g, t) then holds dims 16i+g
             and 16i+g+8 of rows 2t and 2t+1 (D/4 floats a lane and a half
             at D 128: 32, against 64)
      loads  each warp copies its steps of 16 keys (keys and values,
             32*D*sizeof(T) bytes) into its own STG-stage ring in shared
             memory with cp.async (16-byte chunks, chunk c of key row r at
             c ^ (r & 7): ldmatrix without bank conflicts), STG-1 steps in
             flight while it computes one; no block barrier in the loop
    A query tile is ROWS (8 or 16) rows of one KV head's group ((HQ/HK)
    heads x Q tokens, head-major); more rows take more tiles, each
    streaming the keys again (pi0.5's 400 rows a KV head: 50 tiles of 8,
    25 of 16).  Warp w takes
    the slice's steps w, w+NW, ... with its own online softmax; then the
    warps' partials (m, l, unnormalised O) are merged through shared
    memory (it reuses the rings), and the block's partial is the output
    (one split) or goes to the split merge: a module-scope workspace, an
    atomic count a tile, the last block merges splits 0 .. n-1 in order (a
    warp a row for the maxima and sums, then a thread an element, 8 loads
    in flight).  Every sum in a fixed order: no atomics on data, bitwise
    deterministic.  Launches of one loaded module must not run
    concurrently (the workers run one at a time).

    The tensor-core path takes float16 and bfloat16 with D 64, 128 or 256
    and 16-byte aligned buffers; anything else (float32, another D up to
    256) runs a plain path in the same grid and partition (lane d%32 owns
    dims d, a row at a time): correct, not fast.

    NW     warps a block
    ROWS   query rows a tile, 8 or 16 (16: twice the output registers)
    STG    ring stages a warp (STG-1 steps in flight); fewer when the
           launch's dynamic shared memory holds fewer (the launch rule caps
           it at 200 KiB), at least one
    DMAX   the largest D of the tensor-core path, 128 or 256: a kernel's
           registers are those of its largest path (127 at D 128, 221 at
           D 256, ptxas for sm_90), so DMAX 128 leaves D 128 twice the warps
           an SM and sends D 256 to the plain path
    WAVES  used by the launch rule only: splits so that the grid holds
           at most WAVES x 132 blocks (an H200's SMs; at least one split),
           capped so that each warp of a block has a step of 16 keys: a
           block of 8 warps with a 3-stage ring fills an SM, and 136
           blocks would run in two rounds where 128 run in one
    Launch: grid [(((HQ+HK-1)/HK)*Q+ROWS-1)/ROWS, min(max(floor(132*WAVES/C), 1),
    ceil(L/(16*NW))) (1 when L < 1), B*HK] with C = B*HK*row tiles, block
    [32*NW], shared min(NW*STG*32*D*sizeof(T), 204800) bytes; a D over 256
    or a shared size below the partials' (NW*ROWS*(D+8 rounded up to 8)*4)
    leaves the output unwritten: the gates say so.  Under AK_CUDA_EMU
    (test_cuda_cand_emu) ak_blocks_cuda.h's blocks go through the CPU
    emulation. */
#ifndef NW
#define NW 4
#endif
#ifndef STG
#define STG 3
#endif
#ifndef WAVES
#define WAVES 2
#endif
#ifndef DMAX
#define DMAX 128
#endif

#ifndef ROWS
#define ROWS 8
#endif
#define S_ROWS ROWS                                   /* query rows a tile: the MMA's N, once or twice */
#define S_DMAX 256
#define S_WS_FLOATS (1 << 23)
#define S_WS_GROUPS (1 << 16)
#define S_MB 8                                        /* splits a batch of the split merge's loads */
#define S_NEG_INF __int_as_float (0xff800000)
#if defined(AK_DTYPE_BFLOAT16) || defined(AK_DTYPE_FLOAT16)
#define S_TC 1
#else
#define S_TC 0
#endif

static_assert (NW >= 1 && NW <= 16, "NW must be 1..16");
static_assert (STG >= 1 && STG <= 4, "STG must be 1..4");
static_assert (DMAX == 128 || DMAX == 256, "DMAX must be 128 or 256");
static_assert (ROWS == 8 || ROWS == 16, "ROWS must be 8 or 16");

__device__ __align__ (16) float s_ws[S_WS_FLOATS];
__device__ unsigned int s_cnt[S_WS_GROUPS];

/* What a block knows of its tile and slice (the same in every thread). */
struct s_tile {
    ak_i64 b, h_lo, Q, HQ, D, nrows, r0, k0, k1, kfull;
    int n[S_ROWS];                                    /* keys each row sees (0: a padding row) */
    const ak_t *q, *kb, *vb;
    float qscale;                                     /* log2(e)/sqrt(D) */
};

/* Row r of the tile: its query row in q (and o). */
__device__ __forceinline__ ak_i64 s_row_off (const s_tile &T, int r)
{
    const ak_i64 gr = T.r0 + r, h = T.h_lo + (ak_u32) gr / (ak_u32) T.Q, tq = (ak_u32) gr % (ak_u32) T.Q;
    return ((T.b * T.HQ + h) * T.Q + tq) * T.D;
}

#if S_TC
/* cp.async.wait_group n for a count known only at run time (0 .. STG-1) */
__device__ __forceinline__ void s_wait (int n)
{
    if (n <= 0)
        ak_cp_wait<0> ();
    else if (n == 1)
        ak_cp_wait<1> ();
    else if (n == 2)
        ak_cp_wait<2> ();
    else
        ak_cp_wait<3> ();
}

/*  Step c0's 16 key rows and 16 value rows into a stage (keys, then
    values; D/8 chunks a row, chunk c of row r at c ^ (r & 7)); rows at or
    past k1 zero-filled. */
template <int D>
__device__ __forceinline__ void s_issue (const s_tile &T, ak_t *st, ak_i64 c0, int lane)
{
    constexpr int CH = D / 8;                         /* 16-byte chunks a row */
#pragma unroll
    for (int i = 0; i < 16 * CH / 32; i++) {
        const int u = lane + 32 * i, r = u / CH, c = u % CH;
        const bool ok = c0 + r < T.k1;
        const ak_i64 src = ok ? (c0 + r) * D + 8 * c : 0;
        const int dst = r * D + 8 * (c ^ (r & 7));
        ak_cp_async16 (st + dst, T.kb + src, ok);
        ak_cp_async16 (st + 16 * D + dst, T.vb + src, ok);
    }
}

/*  One warp's steps over the slice on tensor cores; its partial (m, l and
    the unnormalised rows, WD floats a row, S_ROWS rows) into part.  Row
    half h (rows 8h .. 8h+7; one half at ROWS 8, two at 16) is the MMA's
    rows g + 8h for S, and its own O^T accumulators, which take the same
    V^T fragments. */
template <int D>
__device__ void s_warp_tc (const s_tile &T, ak_t *ring, int nst, float *part, int WD, int warp, int lane)
{
    constexpr int KS = D / 16;                        /* k-steps of S; m-tiles of O^T */
    constexpr int H = S_ROWS / 8;                     /* row halves */
    const int g = lane >> 2, t = lane & 3;

    const ak_i64 steps = (T.k1 - T.k0 + 15) / 16;
    const int nsw = steps > warp ? (int) ((steps - warp + NW - 1) / NW) : 0;    /* this warp's steps */
    const int SE = 32 * D;                            /* elements a stage */
    /* the ring's first STG-1 steps (before the query's loads: the cache is the long wait); a
       group committed for every step, empty or not, so that the wait below counts the same in
       every warp */
    for (int i = 0; i < nst - 1; i++) {
        if (i < nsw)
            s_issue<D> (T, ring + i * SE, T.k0 + 16 * ((ak_i64) warp + (ak_i64) i * NW), lane);
        ak_cp_commit ();
    }
    /* Q's A fragments, rows g + 8h (zero past the tile's real rows, and rows g+8 at ROWS 8):
       dims 16ks+2t, +1 and 16ks+2t+8, +9 */
    unsigned qa[KS][2][H];
    int ng[H];
#pragma unroll
    for (int h = 0; h < H; h++) {
        const bool real = T.r0 + g + 8 * h < T.nrows;
        ng[h] = T.n[g + 8 * h];
        const ak_t *qr = T.q + (real ? s_row_off (T, g + 8 * h) : 0);
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            qa[ks][0][h] = real ? __ldg ((const unsigned *) (qr + 16 * ks + 2 * t)) : 0u;
            qa[ks][1][h] = real ? __ldg ((const unsigned *) (qr + 16 * ks + 2 * t + 8)) : 0u;
        }
    }
    float o[H][KS][4], m[H], l[H];
#pragma unroll
    for (int h = 0; h < H; h++) {
#pragma unroll
        for (int i = 0; i < KS; i++)
            o[h][i][0] = o[h][i][1] = o[h][i][2] = o[h][i][3] = 0.0f;
        m[h] = S_NEG_INF;
        l[h] = 0.0f;
    }

    for (int i = 0; i < nsw; i++) {
        const int in = i + nst - 1;
        if (in < nsw)
            s_issue<D> (T, ring + (in % nst) * SE, T.k0 + 16 * ((ak_i64) warp + (ak_i64) in * NW), lane);
        ak_cp_commit ();
        s_wait (nst - 1);                             /* step i's group is in */
        __syncwarp ();                                /* and every lane's chunks of it */
        const ak_t *ks_ = ring + (i % nst) * SE, *vs_ = ks_ + 16 * D;
        const ak_i64 c0 = T.k0 + 16 * ((ak_i64) warp + (ak_i64) i * NW);

        /* S = Q K^T: n-tile j keys c0 + 8j .. +7; ldmatrix x4: keys 8(l/16) + l%8, chunk 2ks + (l/8)%2 */
        float sc[2][4];
        sc[0][0] = sc[0][1] = sc[0][2] = sc[0][3] = sc[1][0] = sc[1][1] = sc[1][2] = sc[1][3] = 0.0f;
        {
            const int kr = 8 * (lane >> 4) + (lane & 7), kc = (lane >> 3) & 1;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                unsigned b[4];
                ak_ldmatrix_x4 (b, ks_ + kr * D + 8 * ((2 * ks + kc) ^ (kr & 7)));
                const unsigned a[4] = { qa[ks][0][0], H > 1 ? qa[ks][0][H - 1] : 0u, qa[ks][1][0],
                                        H > 1 ? qa[ks][1][H - 1] : 0u };
                ak_mma_16816 (sc[0], a, b[0], b[1]);
                ak_mma_16816 (sc[1], a, b[2], b[3]);
            }
        }

        /* soft, row g + 8h: sc[j][2h + e], keys c0 + 8j + 2t + e; masked past the slice or the
           row's count */
        const bool full = c0 + 16 <= T.kfull;
        unsigned pb[H][2];
#pragma unroll
        for (int h = 0; h < H; h++) {
            float mx = S_NEG_INF;
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float v = sc[j][2 * h + e] * T.qscale;
                    if (!full) {
                        const ak_i64 key = c0 + 8 * j + 2 * t + e;
                        v = key < T.k1 && key < ng[h] ? v : S_NEG_INF;
                    }
                    sc[j][2 * h + e] = v;
                    mx = fmaxf (mx, v);
                }
            mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, 1));
            mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, 2));
            const float mn = fmaxf (m[h], mx);
            const float cr = mn != S_NEG_INF ? exp2f (m[h] - mn) : 1.0f;
            float ps = 0.0f;
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float p = mn != S_NEG_INF ? exp2f (sc[j][2 * h + e] - mn) : 0.0f;
                    sc[j][2 * h + e] = p;
                    ps += p;
                }
            l[h] = l[h] * cr + ps;
            /* O^T's columns are rows 8h + 2t, 8h + 2t + 1: their factors from lanes 8t and 8t+4 */
            const float c_lo = __shfl_sync (0xffffffffu, cr, 8 * t), c_hi = __shfl_sync (0xffffffffu, cr, 8 * t + 4);
            if (__any_sync (0xffffffffu, mn != m[h])) {
#pragma unroll
                for (int i2 = 0; i2 < KS; i2++) {
                    o[h][i2][0] *= c_lo;
                    o[h][i2][1] *= c_hi;
                    o[h][i2][2] *= c_lo;
                    o[h][i2][3] *= c_hi;
                }
            }
            m[h] = mn;
            pb[h][0] = ak_pack2 (sc[0][2 * h], sc[0][2 * h + 1]);
            pb[h][1] = ak_pack2 (sc[1][2 * h], sc[1][2 * h + 1]);
        }

        /* O^T += V^T P^T: m-tile i dims 16i .. 16i+15; ldmatrix x4 .trans: value rows
           8(l/16) + l%8, chunk 2i + (l/8)%2; one V^T fragment for every half */
        {
            const int vr = 8 * (lane >> 4) + (lane & 7), vc = (lane >> 3) & 1;
#pragma unroll
            for (int i2 = 0; i2 < KS; i2++) {
                unsigned va[4];
                ak_ldmatrix_x4_trans (va, vs_ + vr * D + 8 * ((2 * i2 + vc) ^ (vr & 7)));
#pragma unroll
                for (int h = 0; h < H; h++)
                    ak_mma_16816 (o[h][i2], va, pb[h][0], pb[h][1]);
            }
        }
        __syncwarp ();                                /* every lane done with the stage before it is refilled */
    }
    ak_cp_wait<0> ();

    __syncthreads ();                                 /* every warp off its ring: the partials take its place */
#pragma unroll
    for (int h = 0; h < H; h++) {
        /* the sum over the quad; m is the same in its four lanes */
        float lq = l[h];
        lq += __shfl_xor_sync (0xffffffffu, lq, 1);
        lq += __shfl_xor_sync (0xffffffffu, lq, 2);
        /* o[h][i][0]: dim 16i+g, row 8h+2t; [1] row 8h+2t+1; [2], [3]: dim 16i+g+8 */
        float *ph = part + 8 * h * WD;
#pragma unroll
        for (int i = 0; i < KS; i++) {
            ph[(2 * t) * WD + 16 * i + g] = o[h][i][0];
            ph[(2 * t + 1) * WD + 16 * i + g] = o[h][i][1];
            ph[(2 * t) * WD + 16 * i + g + 8] = o[h][i][2];
            ph[(2 * t + 1) * WD + 16 * i + g + 8] = o[h][i][3];
        }
        if (t == 0) {
            ph[g * WD + WD - 8] = m[h];
            ph[g * WD + WD - 7] = lq;
        }
    }
}
#endif

/*  The plain path, in the tensor-core path's partition (warp w: steps w,
    w+NW, ... of the slice), a row at a time, lane d%32 owning dims d; its
    rows' partials into part. */
__device__ void s_warp_plain (const s_tile &T, float *part, int WD, int warp, int lane)
{
    const ak_i64 steps = (T.k1 - T.k0 + 15) / 16;
    for (int r = 0; r < S_ROWS; r++) {
        float qv[S_DMAX / 32], o[S_DMAX / 32];
        const bool real = T.r0 + r < T.nrows;
        const ak_t *qr = T.q + (real ? s_row_off (T, r) : 0);
#pragma unroll
        for (int i = 0; i < S_DMAX / 32; i++) {
            const ak_i64 d = lane + 32 * i;
            qv[i] = real && d < T.D ? ak_to_acc (qr[d]) * T.qscale : 0.0f;
            o[i] = 0.0f;
        }
        float m = S_NEG_INF, l = 0.0f;
        const ak_i64 kend = min (T.k1, (ak_i64) T.n[r]);
        for (ak_i64 st = warp; st < steps; st += NW)
            for (ak_i64 key = T.k0 + 16 * st; key < min (kend, T.k0 + 16 * st + 16); key++) {
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < S_DMAX / 32; i++)
                    if (lane + 32 * i < T.D)
                        s += qv[i] * ak_to_acc (T.kb[key * T.D + lane + 32 * i]);
#pragma unroll
                for (int off = 16; off >= 1; off >>= 1)
                    s += __shfl_xor_sync (0xffffffffu, s, off);
                const float mn = fmaxf (m, s), cr = exp2f (m - mn), p = exp2f (s - mn);
                l = l * cr + p;
                m = mn;
#pragma unroll
                for (int i = 0; i < S_DMAX / 32; i++)
                    if (lane + 32 * i < T.D)
                        o[i] = o[i] * cr + p * ak_to_acc (T.vb[key * T.D + lane + 32 * i]);
            }
#pragma unroll
        for (int i = 0; i < S_DMAX / 32; i++)
            if (lane + 32 * i < T.D)
                part[r * WD + lane + 32 * i] = o[i];
        if (lane == 0) {
            part[r * WD + WD - 8] = m;
            part[r * WD + WD - 7] = l;
        }
    }
}

extern "C" __global__ void __launch_bounds__ (32 * NW, 1) ak_kernel (ak_cuda_args_t a)
{
    AK_DYNAMIC_SHARED (float, s_dyn);                           /* the rings, then [NW][8][WD] partials */
    __shared__ s_tile T;
    __shared__ int s_last;
    __shared__ float s_rm[S_ROWS], s_rl[S_ROWS], s_ew[NW][S_ROWS];

    const ak_decode_group_t g = ak_decode_group (a);
    const ak_i64 Q = g.Q, HQ = g.HQ, D = g.D, bk = g.bk, b = g.b, h_lo = g.h_lo;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nth = 32 * NW;
    const int WD = (int) ((D + 7) / 8 * 8 + 8);                    /* floats a partial row */

    const unsigned dyn = ak_dynamic_smem_size ();
    /* every early return below is uniform over the block (before any barrier) */
    if (D > S_DMAX || D < 1 || (ak_i64) dyn < (ak_i64) NW * S_ROWS * WD * 4)
        return;

    /* rows and steps fit in 32 bits (ak_decode_group) */
    const ak_i64 nrows = g.G, r0 = (ak_i64) blockIdx.x * S_ROWS;
    if (r0 >= nrows)
        return;
    const int nr = (int) min ((ak_i64) S_ROWS, nrows - r0);        /* the tile's real rows */

    ak_i64 nmin, nmax;                                             /* the keys the tile's real rows see */
    ak_decode_key_range (g, r0, r0 + nr, &nmin, &nmax);
    const ak_i64 tg = bk * gridDim.x + blockIdx.x;                 /* the split tile */
    const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
    const bool ws_ok = ngroups <= S_WS_GROUPS && ngroups * (ak_i64) gridDim.y * S_ROWS * WD <= S_WS_FLOATS;
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
        T.k1 = max (T.k0, min (nmax, T.k0 + per * 16));
        T.kfull = min (T.k1, nmin);
        T.q = AK_IN (a, 0);
        T.kb = g.kb;
        T.vb = g.vb;
        T.qscale = 1.4426950408889634f / sqrtf ((float) D);
    }
    if (tid < S_ROWS)
        T.n[tid] = tid < nr ? (int) ak_decode_nkeys (g, r0 + tid) : 0;
    __syncthreads ();

    float *part = s_dyn;                                           /* [NW][8][WD] */
    float *wpart = part + (ak_i64) warp * S_ROWS * WD;
    bool tc = false;
#if S_TC
    const int sb = 32 * (int) D * (int) sizeof (ak_t);            /* a stage's bytes */
    const int nst = min (STG, (int) (dyn / (unsigned) (NW * sb)));
    tc = (D == 64 || D == 128 || (D == 256 && DMAX == 256)) && nst >= 1 && ((ak_u64) T.kb) % 16 == 0 && ((ak_u64) T.vb) % 16 == 0
         && ((ak_u64) T.q) % 4 == 0;
    if (tc) {
        ak_t *ring = (ak_t *) s_dyn + (ak_i64) warp * nst * (sb / (int) sizeof (ak_t));
#if DMAX == 256
        if (D == 256)
            s_warp_tc<256> (T, ring, nst, wpart, WD, warp, lane);
        else
#endif
        if (D == 128)
            s_warp_tc<128> (T, ring, nst, wpart, WD, warp, lane);
        else
            s_warp_tc<64> (T, ring, nst, wpart, WD, warp, lane);
    }
#endif
    if (!tc)
        s_warp_plain (T, wpart, WD, warp, lane);
    __syncthreads ();

    /* the warps in order, real rows only: each one's weight a row (a thread a row), then
       element (r, d) is one thread's */
    float *wp = s_ws + (tg * gridDim.y + split) * S_ROWS * WD;    /* this split's partial (nsplit > 1) */
    ak_t *out = AK_OUT (a, 0);
    if (tid < nr) {
        float M = S_NEG_INF;
        for (int w = 0; w < NW; w++)
            M = fmaxf (M, part[(w * S_ROWS + tid) * WD + WD - 8]);
        float l = 0.0f;
        for (int w = 0; w < NW; w++) {
            const float *pw = part + (w * S_ROWS + tid) * WD;
            const float e = M != S_NEG_INF ? exp2f (pw[WD - 8] - M) : 0.0f;
            s_ew[w][tid] = e;
            l += e * pw[WD - 7];
        }
        s_rm[tid] = M;
        s_rl[tid] = l;
        if (nsplit > 1) {
            wp[tid * WD + WD - 8] = M;
            wp[tid * WD + WD - 7] = l;
        }
    }
    __syncthreads ();
    for (int u = tid; u < nr * (int) D; u += nth) {
        const int r = u / (int) D, d = u - r * (int) D;
        float O = 0.0f;
        for (int w = 0; w < NW; w++)
            O += s_ew[w][r] * part[(w * S_ROWS + r) * WD + d];
        if (nsplit == 1) {
            const float ls = s_rl[r];
            out[s_row_off (T, r) + d] = ak_from_acc (ls > 0.0f ? O / ls : 0.0f);
        } else
            wp[r * WD + d] = O;
    }
    if (nsplit == 1)
        return;

    /* the split merge: the partial is out, the last block of the tile merges */
    if (!ak_last_arrival (&s_cnt[tg], (unsigned int) nsplit, &s_last))
        return;
    /* a warp a row: the maximum over the splits, then the weighted sum of their sums (lanes over
       the splits, the lanes in a fixed tree) */
    const float *w0 = s_ws + tg * gridDim.y * S_ROWS * WD;
    const ak_i64 ss = (ak_i64) S_ROWS * WD;            /* from one split to the next */
    const int nsp = (int) nsplit;
    for (int r = warp; r < nr; r += NW) {
        float M = S_NEG_INF;
        for (int s = lane; s < nsp; s += 32)
            M = fmaxf (M, __ldcg (w0 + s * ss + r * WD + WD - 8));
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1)
            M = fmaxf (M, __shfl_xor_sync (0xffffffffu, M, off));
        float ls = 0.0f;
        for (int s = lane; s < nsp; s += 32) {
            const float2 ml = __ldcg ((const float2 *) (w0 + s * ss + r * WD + WD - 8));
            ls += M != S_NEG_INF ? exp2f (ml.x - M) * ml.y : 0.0f;
        }
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1)
            ls += __shfl_xor_sync (0xffffffffu, ls, off);
        if (lane == 0) {
            s_rm[r] = M;
            s_rl[r] = ls;
        }
    }
    __syncthreads ();
    for (int u = tid; u < nr * (int) D; u += nth) {
        const int r = u / (int) D, d = u - r * (int) D;
        const float M = s_rm[r];
        const float *wr = w0 + r * WD;
        float O = 0.0f;
        for (int s = 0; s < nsp; s += S_MB) {
            float v[S_MB], e[S_MB];
#pragma unroll
            for (int j = 0; j < S_MB; j++) {
                const int sj = min (s + j, nsp - 1);    /* every load unconditional: a batch in flight */
                v[j] = __ldcg (wr + sj * ss + d);
                e[j] = __ldcg (wr + sj * ss + WD - 8);
            }
#pragma unroll
            for (int j = 0; j < S_MB; j++)
                if (s + j < nsp && M != S_NEG_INF)
                    O += exp2f (e[j] - M) * v[j];
        }
        const float ls = s_rl[r];
        out[s_row_off (T, r) + d] = ak_from_acc (ls > 0.0f ? O / ls : 0.0f);
    }
}
