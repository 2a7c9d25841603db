/*  split_kv_attention, flash-decoding with key tiles in flight (cuda).
    Masks, grouped-query rule and layout as ref.c (q, o [B][HQ][Q][D],
    k_cache, v_cache [B][HK][L][D]; 1 none, 2 causal, 3 ragged causal; a
    query that sees no key has the output 0).  Built to be bandwidth-
    bound where split_kv is latency-bound: a block moves whole tiles of
    keys through shared memory, the next tile loading while this one is
    computed, and the grid holds enough blocks to fill the device.

    Grid [row tiles, splits, B*HK].  A block owns one KV head of one
    sequence (blockIdx.z = b*HK + kv), a tile of ROWS query rows of that
    head's group ((HQ/HK) heads x Q tokens, head-major; blockIdx.x) and one
    slice of the keys those rows see (blockIdx.y).  Every key and value
    row is read once for all the rows of the tile.  Per tile of TK keys:
      load   K and V rows [TK][D] into one of two shared stages with
             16-byte cp.async (zero-filled past the slice), issued one tile
             ahead; plain loads when D*sizeof(elt) is not a multiple of 16
             or a cache is not 16-byte aligned
      score  thread t takes key t % TK and the rows t/TK, t/TK + NT/TK, ...:
             a dot product over D (the key's 16-byte chunks from shared
             memory, the query rows from shared memory as floats, scaled
             by log2(e)/sqrt(D)); masked keys get -inf
      soft   a warp a row: the tile's maximum, the running maximum m and
             sum l (exp2 domain), p = exp2(s - m) back into shared memory
             and the correction exp2(m_old - m)
      P.V    thread t owns a 16-byte chunk of PR output rows and one of KP
             key partitions (units t, t+NT, ... of KP partitions x ROWS/PR
             row groups x D/chunk), rescales them by the corrections and
             adds p_j v_j over the tile's keys j = kp, kp + KP, ... in
             order, each V chunk read from shared memory once for PR rows;
             the KP partitions are added in order once, after the last
             tile (through the free stages)
    Every sum runs in a fixed order (the dot product over D, the warp
    butterflies, the keys of a tile): no atomics on data.
    The split merge, as split_kv: the launch format has one kernel a
    candidate and no scratch buffer, so each block of a split tile writes
    its partial (unnormalised output row, m, l) to a module-scope
    __device__ workspace (32 MiB, 2^16 tiles), fences, and counts itself
    in on an atomic counter per tile; the block that arrives last resets
    the counter for the next launch and merges splits 0 .. n-1 in that
    order (16-byte loads through L2).  No block waits for another: no
    grid-wide barrier, no co-residency assumed, and the result does not
    depend on which block is last (bitwise deterministic).  A workload
    whose partials would not fit runs unsplit.  Launches of one loaded
    module must not run concurrently (the workers run one at a time).

    The slices: the keys a row tile sees (the largest n of its rows) in
    tiles, at most gridDim.y slices of whole tiles, none empty; blocks
    past the last slice (short ragged sequences) return at once.

    TK     keys a tile (32, 64, 128); a tile whose two stages of K and V
           would pass 144 KiB (D*sizeof large) holds TK/2 or TK/4 keys:
           the launch rule's shared size says the same
    NT     threads a block (a multiple of TK)
    ROWS   query rows a block (heads of the group x new tokens)
    PR     rows a thread accumulates in P.V (divides ROWS): more reuse of
           each V chunk, fewer busy threads
    KP     key partitions of P.V (1, 2, 4): KP times the busy threads, for
           tiles with few output chunks (ROWS/PR x D/chunk below NT; the
           spec keeps KP*ROWS*16 <= NT, with PR 1)
    WAVES  used by the launch rule only: splits so that the grid holds
           about WAVES x 132 blocks (an H200's SMs), capped by the tiles of L
    D <= 256 (a larger D leaves the output unwritten: the gates say so;
    so does a dynamic shared size below the stages').  Registers: the
    launch bounds ask for 3 blocks of 128 threads or 2 of 256 an SM
    (ptxas spilled under the plain bound); no configuration spills.
    Launch: grid [(((HQ+HK-1)/HK)*Q+ROWS-1)/ROWS, min(ceil(L/TK),
    ceil(132*WAVES/G)), B*HK] with G = B*HK*row tiles, block [NT], shared
    4 * TKr * SDB bytes (TKr the keys a tile holds, SDB the bytes of a
    stage row: the row rounded up to 16 bytes, an odd number of 16-byte
    chunks so 8 consecutive rows hit 8 different bank groups). */
#ifndef TK
#define TK 64
#endif
#ifndef NT
#define NT 128
#endif
#ifndef ROWS
#define ROWS 4
#endif
#ifndef PR
#define PR 1
#endif

#define F_VEC (16 / (int) sizeof (ak_t))              /* elements of a 16-byte chunk */
#define F_DMAX 256
#define F_NCHMAX (F_DMAX / F_VEC)                     /* chunks of the widest row */
#define F_RG (NT / TK)                                /* row groups of the score step */
#define F_RPT ((ROWS + F_RG - 1) / F_RG)              /* rows a thread scores */
#define F_PG (ROWS / PR)                              /* row groups of the P.V step */
#ifndef KP
#define KP 1
#endif
#define F_UPT ((KP * F_PG * F_NCHMAX + NT - 1) / NT)  /* output chunks (x PR rows) a thread owns */
#define F_NW (NT / 32)
#define F_KPL (TK / 32)                               /* keys a lane in the softmax */
#define F_STAGE_ROWS_MAX 36864                        /* bytes of TKr stage rows (x4: 144 KiB) */
#define F_MINB (NT >= 256 ? 2 : 3)                    /* blocks an SM, for the register budget */
#define F_MB 8                                       /* splits a batch of the merge's loads */
#define F_WS_FLOATS (1 << 23)
#define F_WS_GROUPS (1 << 16)
#define F_NEG_INF __int_as_float (0xff800000)

static_assert (TK == 32 || TK == 64 || TK == 128, "TK must be 32, 64 or 128");
static_assert (NT % TK == 0 && NT % 32 == 0 && NT <= 1024, "NT must be a multiple of TK");
static_assert (ROWS >= 1 && ROWS <= 32, "ROWS must be 1..32");
static_assert (PR >= 1 && ROWS % PR == 0, "PR must divide ROWS");
static_assert (KP == 1 || KP == 2 || KP == 4, "KP must be 1, 2 or 4");
static_assert (F_VEC * (int) sizeof (ak_t) == 16, "a chunk holds whole elements");

typedef union {
    uint4 raw;
    ak_t  e[F_VEC];
} f_chunk_t;

/* The split partials: per tile and split, ROWS rows of WD floats (the
   unnormalised output, then m and l at WD-8 and WD-7). */
__device__ __align__ (16) float f_ws[F_WS_FLOATS];
__device__ unsigned int f_cnt[F_WS_GROUPS];

/* The 16-byte chunk of a stage row at p (shared memory) as floats. */
__device__ __forceinline__ void f_chunk_ld (const unsigned char *p, float *out)
{
    f_chunk_t u;
    u.raw = *(const uint4 *) p;
#pragma unroll
    for (int e = 0; e < F_VEC; e++)
        out[e] = ak_to_acc (u.e[e]);
}

/* 16 bytes global -> shared, asynchronously on sm_80+; zeros when !valid
   (src must still be a mapped address). */
__device__ __forceinline__ void f_cp16 (unsigned char *dst, const ak_t *src, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned) __cvta_generic_to_shared (dst);
    asm volatile ("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                  :: "r"(s), "l"(src), "r"(valid ? 16 : 0) : "memory");
#else
    *(uint4 *) dst = valid ? __ldg ((const uint4 *) src) : make_uint4 (0, 0, 0, 0);
#endif
}

__device__ __forceinline__ void f_commit (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile ("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* Waits until at most n of this thread's committed groups are pending. */
template <int n> __device__ __forceinline__ void f_wait (void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile ("cp.async.wait_group %0;\n" :: "n"(n) : "memory");
#endif
}

/*  Keys [base, base + nk) of kb and vb into the stage rows 0 .. tkr-1
    (row stride sdb bytes): rows past nk and elements past D zero, the
    16-byte chunks of a row up to nch. */
__device__ __forceinline__ void f_load_tile (unsigned char *ks, unsigned char *vs, const ak_t *kb,
                                             const ak_t *vb, ak_i64 base, int nk, int tkr, ak_i64 D,
                                             int nch, int sdb, bool vec)
{
    if (vec) {                                        /* D is a whole number of chunks */
        for (int i = threadIdx.x; i < tkr * nch; i += NT) {
            const int row = i / nch, c = i % nch;
            const bool ok = row < nk;
            const ak_i64 off = (base + (ok ? row : 0)) * D + (ak_i64) c * F_VEC;
            f_cp16 (ks + row * sdb + c * 16, kb + off, ok);
            f_cp16 (vs + row * sdb + c * 16, vb + off, ok);
        }
    } else {
        const int epr = nch * F_VEC;                  /* elements a stage row, D rounded up */
        for (int i = threadIdx.x; i < tkr * epr; i += NT) {
            const int row = i / epr, d = i % epr;
            const bool ok = row < nk && d < D;
            const ak_i64 off = (base + row) * D + d;
            ((ak_t *) (ks + row * sdb))[d] = ok ? kb[off] : ak_from_acc (0.0f);
            ((ak_t *) (vs + row * sdb))[d] = ok ? vb[off] : ak_from_acc (0.0f);
        }
    }
}

extern "C" __global__ void __launch_bounds__ (NT, F_MINB) ak_kernel (ak_cuda_args_t a)
{
    extern __shared__ __align__ (16) unsigned char f_stage[];   /* [2][K, V][TKr][SDB bytes] */
    __shared__ __align__ (16) float sq[ROWS][F_DMAX];          /* query rows, scaled */
    __shared__ float ss[ROWS][TK];                              /* scores, then p */
    __shared__ float sm[ROWS], sl[ROWS], sc[ROWS];              /* running max, sum, correction */
    __shared__ ak_i64 sn[ROWS];                                 /* keys each row sees */
    __shared__ int s_last;

    const ak_i64 Q = a.dims[1], HQ = a.dims[2], HK = a.dims[3];    /* B: gridDim.z / HK */
    const ak_i64 L = a.dims[4], D = a.dims[5], mask = a.dims[6];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    /* the stage geometry, as the launch rule computes it */
    const int nch = (int) ((D + F_VEC - 1) / F_VEC);              /* 16-byte chunks a row */
    const int sdb = 16 * (nch | 1);                                /* odd chunks: no bank conflicts */
    int tkr = TK;
    while (tkr > 32 && tkr * sdb > F_STAGE_ROWS_MAX)
        tkr /= 2;
    unsigned dyn;
    asm ("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    /* every early return below is uniform over the block (before any barrier) */
    if (D > F_DMAX || D < 1 || (ak_i64) dyn < 4ll * tkr * sdb)
        return;

    const ak_i64 bk = blockIdx.z, b = bk / HK, kvh = bk % HK;
    const ak_i64 h_lo = (kvh * HQ + HK - 1) / HK, h_hi = ((kvh + 1) * HQ + HK - 1) / HK;
    const ak_i64 nrows = (h_hi - h_lo) * Q, r0 = (ak_i64) blockIdx.x * ROWS;
    if (r0 >= nrows)
        return;
    const bool causal = mask == 2 || mask == 3;
    const ak_i64 len = mask == 3 ? L - (ak_i64) ((ak_u32) ((ak_u32) b * 2654435761u) % (ak_u32) (L + 1)) : L;

    /* the keys the tile's rows see: the slices cover the most any row sees */
    ak_i64 nmax = 0;
    for (int r = 0; r < ROWS && r0 + r < nrows; r++) {
        const ak_i64 n = causal ? len - Q + 1 + (r0 + r) % Q : L;
        nmax = n > nmax ? n : nmax;
    }
    const ak_i64 tg = bk * gridDim.x + blockIdx.x;                 /* the split tile */
    const ak_i64 ngroups = (ak_i64) gridDim.x * gridDim.z;
    const ak_i64 WD = (D + 7) / 8 * 8 + 8;                         /* floats a partial row */
    const bool ws_ok = ngroups <= F_WS_GROUPS && ngroups * (ak_i64) gridDim.y * ROWS * WD <= F_WS_FLOATS;
    ak_i64 per, nsplit;                                            /* tiles a slice, slices */
    ak_split_slices ((nmax + tkr - 1) / tkr, gridDim.y, ws_ok, &per, &nsplit);
    const ak_i64 split = blockIdx.y;
    if (split >= nsplit)
        return;
    const ak_i64 k0 = split * per * tkr, k1 = min (nmax, k0 + per * tkr);

    /* the query rows, scaled by log2(e)/sqrt(D), zero past D and nrows */
    const float qscale = 1.4426950408889634f / sqrtf ((float) D);
    for (int i = tid; i < ROWS * F_DMAX; i += NT) {
        const int r = i / F_DMAX, d = i % F_DMAX;
        const ak_i64 gr = r0 + r;
        float v = 0.0f;
        if (gr < nrows && d < D) {
            const ak_i64 h = h_lo + gr / Q, t = gr % Q;
            v = ak_to_acc (AK_IN (a, 0)[((b * HQ + h) * Q + t) * D + d]) * qscale;
        }
        sq[r][d] = v;
    }
    if (tid < ROWS) {
        const ak_i64 gr = r0 + tid;
        sn[tid] = gr >= nrows ? 0 : causal ? len - Q + 1 + gr % Q : L;
        sm[tid] = F_NEG_INF;
        sl[tid] = 0.0f;
        sc[tid] = 1.0f;
    }

    const ak_t *kb = AK_IN (a, 1) + bk * L * D, *vb = AK_IN (a, 2) + bk * L * D;
    const bool vec = D % F_VEC == 0 && ((ak_u64) kb) % 16 == 0 && ((ak_u64) vb) % 16 == 0;
    const int sbytes = 2 * tkr * sdb;                 /* a stage: K rows, then V rows */

    float acc[F_UPT][PR][F_VEC];                      /* this thread's output chunks */
#pragma unroll
    for (int u = 0; u < F_UPT; u++)
#pragma unroll
        for (int i = 0; i < PR; i++)
#pragma unroll
            for (int e = 0; e < F_VEC; e++)
                acc[u][i][e] = 0.0f;

    const ak_i64 ntile = k1 > k0 ? (k1 - k0 + tkr - 1) / tkr : 0;
    if (ntile > 0)
        f_load_tile (f_stage, f_stage + tkr * sdb, kb, vb, k0, (int) min ((ak_i64) tkr, k1 - k0), tkr,
                     D, nch, sdb, vec);
    f_commit ();
    __syncthreads ();                                 /* sq, sn, sm, sl, sc */

    for (ak_i64 it = 0; it < ntile; it++) {
        const ak_i64 base = k0 + it * tkr;
        const int jn = (int) min ((ak_i64) tkr, k1 - base);       /* keys of this tile */
        if (it + 1 < ntile) {                          /* the other stage: free since the last barrier */
            unsigned char *nx = f_stage + ((it + 1) & 1) * sbytes;
            f_load_tile (nx, nx + tkr * sdb, kb, vb, base + tkr, (int) min ((ak_i64) tkr, k1 - base - tkr),
                         tkr, D, nch, sdb, vec);
        }
        f_commit ();
        f_wait<1> ();                                  /* this tile's group is in */
        __syncthreads ();
        const unsigned char *ks = f_stage + (it & 1) * sbytes, *vs = ks + tkr * sdb;

        /* score: key j, rows rg, rg + F_RG, ... */
        {
            const int j = tid % TK, rg = tid / TK;
            float s[F_RPT], s2[F_RPT];                /* two sums: shorter dependency chains */
#pragma unroll
            for (int q = 0; q < F_RPT; q++)
                s[q] = s2[q] = 0.0f;
            if (j < jn) {
#pragma unroll 2
                for (int c = 0; c < nch; c++) {
                    float kf[F_VEC];
                    f_chunk_ld (ks + j * sdb + c * 16, kf);
#pragma unroll
                    for (int q = 0; q < F_RPT; q++) {
                        const int r = rg + q * F_RG;
                        if (r < ROWS) {
                            const float4 *qp = (const float4 *) &sq[r][c * F_VEC];
#pragma unroll
                            for (int v = 0; v < F_VEC / 4; v++) {
                                const float4 q4 = qp[v];
                                const float d4 = q4.x * kf[4 * v] + q4.y * kf[4 * v + 1]
                                                 + q4.z * kf[4 * v + 2] + q4.w * kf[4 * v + 3];
                                if (v & 1)
                                    s2[q] += d4;
                                else
                                    s[q] += d4;
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < F_RPT; q++) {
                const int r = rg + q * F_RG;
                if (r < ROWS)
                    ss[r][j] = j < jn && base + j < sn[r] ? s[q] + s2[q] : F_NEG_INF;
            }
        }
        __syncthreads ();

        /* softmax over the tile: a warp a row */
        for (int r = warp; r < ROWS; r += F_NW) {
            float s[F_KPL], mx = F_NEG_INF;
#pragma unroll
            for (int k = 0; k < F_KPL; k++) {
                s[k] = ss[r][lane + 32 * k];
                mx = fmaxf (mx, s[k]);
            }
#pragma unroll
            for (int off = 16; off >= 1; off >>= 1)
                mx = fmaxf (mx, __shfl_xor_sync (0xffffffffu, mx, off));
            const float mo = sm[r], mn = fmaxf (mo, mx);
            float corr = 1.0f, sum = 0.0f;
#pragma unroll
            for (int k = 0; k < F_KPL; k++) {
                const float p = mn == F_NEG_INF ? 0.0f : exp2f (s[k] - mn);
                ss[r][lane + 32 * k] = p;
                sum += p;
            }
            if (mn != F_NEG_INF)
                corr = exp2f (mo - mn);                /* 0 while the row had no key */
#pragma unroll
            for (int off = 16; off >= 1; off >>= 1)
                sum += __shfl_xor_sync (0xffffffffu, sum, off);
            __syncwarp ();                             /* every lane read sm[r] */
            if (lane == 0) {
                sl[r] = sl[r] * corr + sum;
                sm[r] = mn;
                sc[r] = corr;
            }
        }
        __syncthreads ();

        /* P.V: units u = tid + k*NT of KP partitions x (ROWS/PR row groups) x nch chunks */
#pragma unroll
        for (int k = 0; k < F_UPT; k++) {
            const int u = tid + k * NT;
            if (u < KP * F_PG * nch) {
                const int kp = u / (F_PG * nch), g = u % (F_PG * nch) / nch, c = u % nch;
#pragma unroll
                for (int i = 0; i < PR; i++) {
                    const float corr = sc[g * PR + i];
#pragma unroll
                    for (int e = 0; e < F_VEC; e++)
                        acc[k][i][e] *= corr;
                }
                const unsigned char *vp = vs + c * 16;
#pragma unroll 4
                for (int j = kp; j < jn; j += KP) {
                    float vf[F_VEC];
                    f_chunk_ld (vp + j * sdb, vf);
#pragma unroll
                    for (int i = 0; i < PR; i++) {
                        const float p = ss[g * PR + i][j];
#pragma unroll
                        for (int e = 0; e < F_VEC; e++)
                            acc[k][i][e] += p * vf[e];
                    }
                }
            }
        }
        __syncthreads ();                              /* the stage and ss are free again */
    }
    f_wait<0> ();
#if KP > 1
    /* the key partitions, added in order into partition 0's units through
       the stages (free: every tile's P.V passed the loop's last barrier;
       (KP-1) x ROWS x nch chunks of floats fit 4 x TKr x SDB bytes) */
    {
        float *red = (float *) f_stage;
        const int pu = F_PG * nch;
        __syncthreads ();                              /* no cp.async of an empty group is pending */
#pragma unroll
        for (int k = 0; k < F_UPT; k++) {
            const int u = tid + k * NT;
            if (u >= pu && u < KP * pu)
#pragma unroll
                for (int i = 0; i < PR; i++)
#pragma unroll
                    for (int e = 0; e < F_VEC; e++)
                        red[((ak_i64) (u - pu) * PR + i) * F_VEC + e] = acc[k][i][e];
        }
        __syncthreads ();
#pragma unroll
        for (int k = 0; k < F_UPT; k++) {
            const int u = tid + k * NT;
            if (u < pu)
                for (int p = 1; p < KP; p++)
#pragma unroll
                    for (int i = 0; i < PR; i++)
#pragma unroll
                        for (int e = 0; e < F_VEC; e++)
                            acc[k][i][e] += red[((ak_i64) ((p - 1) * pu + u) * PR + i) * F_VEC + e];
        }
    }
#endif

    ak_t *out = AK_OUT (a, 0);
    if (nsplit == 1) {
#pragma unroll
        for (int k = 0; k < F_UPT; k++) {
            const int u = tid + k * NT;
            if (u >= F_PG * nch)
                continue;
            const int g = u / nch, c = u % nch;
#pragma unroll
            for (int i = 0; i < PR; i++) {
                const int r = g * PR + i;
                const ak_i64 gr = r0 + r;
                if (gr >= nrows)
                    continue;
                const float l = sl[r];
                const ak_i64 h = h_lo + gr / Q, t = gr % Q;
                ak_t *o = out + ((b * HQ + h) * Q + t) * D;
#pragma unroll
                for (int e = 0; e < F_VEC; e++) {
                    const ak_i64 d = (ak_i64) c * F_VEC + e;
                    if (d < D)
                        o[d] = ak_from_acc (l > 0.0f ? acc[k][i][e] / l : 0.0f);
                }
            }
        }
        return;
    }

    /* the split merge: the partial out, then the last block of the tile merges */
    float *wp = f_ws + (tg * gridDim.y + split) * ROWS * WD;
#pragma unroll
    for (int k = 0; k < F_UPT; k++) {
        const int u = tid + k * NT;
        if (u < F_PG * nch) {
            const int g = u / nch, c = u % nch;
#pragma unroll
            for (int i = 0; i < PR; i++)
#pragma unroll
                for (int e = 0; e < F_VEC; e++)
                    wp[(g * PR + i) * WD + c * F_VEC + e] = acc[k][i][e];     /* c*F_VEC + e < WD - 8 */
        }
    }
    if (tid < ROWS) {
        wp[tid * WD + WD - 8] = sm[tid];
        wp[tid * WD + WD - 7] = sl[tid];
    }
    if (!ak_last_arrival (&f_cnt[tg], (unsigned int) nsplit, &s_last))
        return;
    const float *w0 = f_ws + tg * gridDim.y * ROWS * WD;
    const ak_i64 sstride = (ak_i64) ROWS * WD;        /* from one split to the next */
    const int d4 = (int) ((D + 3) / 4);
    for (int u = tid; u < ROWS * d4; u += NT) {
        const int r = u / d4, c4 = u % d4;
        const ak_i64 gr = r0 + r;
        if (gr >= nrows)
            continue;
        const float *wr = w0 + r * WD;
        /* in batches of F_MB splits, loads first (in flight together), then
           the arithmetic in split order */
        const int nsp = (int) nsplit;
        float M = F_NEG_INF;
        for (int s0 = 0; s0 < nsp; s0 += F_MB) {
            float mv[F_MB];
#pragma unroll
            for (int i = 0; i < F_MB; i++)
                mv[i] = s0 + i < nsp ? __ldcg (wr + (s0 + i) * sstride + WD - 8) : F_NEG_INF;
#pragma unroll
            for (int i = 0; i < F_MB; i++)
                M = fmaxf (M, mv[i]);
        }
        float4 O = make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
        float Ls = 0.0f;
        for (int s0 = 0; M != F_NEG_INF && s0 < nsp; s0 += F_MB) {
            float mv[F_MB], lv[F_MB];
            float4 ov[F_MB];
#pragma unroll
            for (int i = 0; i < F_MB; i++) {
                const bool ok = s0 + i < nsp;
                const float *ws = wr + (ok ? s0 + i : 0) * sstride;
                mv[i] = ok ? __ldcg (ws + WD - 8) : F_NEG_INF;
                lv[i] = ok ? __ldcg (ws + WD - 7) : 0.0f;
                ov[i] = ok ? __ldcg ((const float4 *) (ws + 4 * c4)) : make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int i = 0; i < F_MB; i++) {
                const float f = exp2f (mv[i] - M);     /* 0 for a split that saw no key */
                O.x += f * ov[i].x;
                O.y += f * ov[i].y;
                O.z += f * ov[i].z;
                O.w += f * ov[i].w;
                Ls += f * lv[i];
            }
        }
        const ak_i64 h = h_lo + gr / Q, t = gr % Q;
        ak_t *o = out + ((b * HQ + h) * Q + t) * D;
        const float ov[4] = { O.x, O.y, O.z, O.w };
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const ak_i64 d = 4 * (ak_i64) c4 + e;
            if (d < D)
                o[d] = ak_from_acc (Ls > 0.0f ? ov[e] / Ls : 0.0f);
        }
    }
}
