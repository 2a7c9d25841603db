/*  split_kv_attention, split over the KV length (cuda): flash-decoding.
    Q new query tokens per sequence over a KV cache of L entries, grouped-
    query aware; masks and layout as ref.c (q, o [B][HQ][Q][D], k_cache,
    v_cache [B][HK][L][D]; 1 none, 2 causal, 3 ragged causal).

    A block owns one KV head of one sequence (blockIdx.y = b*HK + kv), a
    tile of ROWS query rows among that head's group ((HQ/HK) heads x Q
    tokens, blockIdx.z), and one of up to SPLITS slices of the keys the
    tile can see (blockIdx.x): every key and value row is read once for all
    the query rows of its group.  In the block, each warp takes KPW keys a
    step, 32/KPW lanes a key, VECB bytes a lane an access; each lane group
    keeps an online softmax (exp2 domain, running max, sum and unnormalised
    output) per query row.  Then three merges, each in a fixed order:
      1. the lane groups of a warp (shuffles),
      2. the warps of the block (shared memory),
      3. the splits: every block of a split tile writes its partial
         (output row relative to its maximum, the maximum, the sum) to a
         module-scope workspace, fences, and counts itself in on an atomic
         counter per tile; the block that arrives last (it resets the
         counter for the next launch) merges the partials of splits
         0 .. n-1 in that order and writes the output.  No block waits for
         another, so no grid-wide barrier and no co-residency is assumed;
         the result does not depend on which block arrives last (bitwise
         deterministic).
    The kernel format launches one kernel a candidate, with no scratch
    buffer: the workspace and counters are __device__ arrays of the module
    (32 MiB, 2^16 tiles).  A workload whose partials would not fit runs
    unsplit (each block covers all keys), as does a slice count above the
    steps of keys a sequence has.  Launches of one loaded module must not
    run concurrently (the workers run one launch at a time).

    SPLITS  slices of the KV length (gridDim.x): more blocks for one
            sequence; 1 is a plain one-pass kernel
    WARPS   warps a block
    KPW     keys a warp takes a step (32/KPW lanes a key): the tile over
            the KV length a warp has in flight
    ROWS    query rows a block (heads of the group x new tokens)
    VECB    bytes a lane loads an access: 8 or 16
    Buffers not aligned to VECB, or D not a multiple of the access, take
    scalar loads.  D <= 256 (a larger D leaves the output unwritten: the
    gates say so).
    Launch: grid [SPLITS, B*HK, (((HQ+HK-1)/HK)*Q+ROWS-1)/ROWS],
    block [WARPS*32], shared WARPS*ROWS*(D+2)*4 bytes. */
#ifndef SPLITS
#define SPLITS 16
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef KPW
#define KPW 2
#endif
#ifndef ROWS
#define ROWS 4
#endif
#ifndef VECB
#define VECB 16
#endif

#define S_NT (WARPS * 32)
#define S_LPK (32 / KPW)                          /* lanes a key */
#define S_VEC (VECB / (int) sizeof (ak_t))        /* elements a lane an access */
#define S_DMAX 256
#define S_CH (S_LPK * S_VEC)                      /* dimensions a lane group covers an access */
#define S_NCH ((S_DMAX + S_CH - 1) / S_CH)        /* accesses a lane a row, at most */
#define S_KSTEP (WARPS * KPW)                     /* keys a block a step */
#define S_WS_FLOATS (1 << 23)
#define S_WS_GROUPS (1 << 16)

static_assert (KPW == 1 || KPW == 2 || KPW == 4, "KPW must be 1, 2 or 4");
static_assert (S_VEC >= 1 && S_NCH * S_CH == S_DMAX, "VECB must be 8 or 16");

#if VECB == 16
typedef uint4 s_raw_t;
#elif VECB == 8
typedef uint2 s_raw_t;
#else
#error "VECB must be 8 or 16"
#endif

typedef union {
    s_raw_t raw;
    ak_t    e[S_VEC];
} s_vec_t;

/* The split partials: per tile and split, ROWS x (D output sums, max, sum). */
__device__ float s_ws[S_WS_FLOATS];
__device__ unsigned int s_cnt[S_WS_GROUPS];

#define S_NEG_INF __int_as_float (0xff800000)

/*  S_VEC elements of row from d0 as floats, zeros beyond D. */
__device__ __forceinline__ void s_load (const ak_t *row, ak_i64 d0, ak_i64 D, bool vec, float *out)
{
    if (vec) {
        if (d0 < D) {
            s_vec_t u;
            u.raw = __ldg ((const s_raw_t *) (row + d0));
#pragma unroll
            for (int e = 0; e < S_VEC; e++)
                out[e] = ak_to_acc (u.e[e]);
        } else {
#pragma unroll
            for (int e = 0; e < S_VEC; e++)
                out[e] = 0.0f;
        }
    } else {
#pragma unroll
        for (int e = 0; e < S_VEC; e++)
            out[e] = d0 + e < D ? ak_to_acc (row[d0 + e]) : 0.0f;
    }
}

extern "C" __global__ void __launch_bounds__ (S_NT) ak_kernel (ak_cuda_args_t a)
{
    extern __shared__ float s_smem[];                 /* WARPS x ROWS x (D + 2) */
    __shared__ __align__ (16) float sq[ROWS][S_DMAX];
    __shared__ int s_last;

    const ak_i64 Q = a.dims[1], HQ = a.dims[2], HK = a.dims[3];      /* B: gridDim.y / HK */
    const ak_i64 L = a.dims[4], D = a.dims[5], mask = a.dims[6];
    /* every early return below is uniform over the block (before any barrier) */
    if (D > S_DMAX)
        return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int grp = lane / S_LPK, lig = lane % S_LPK;
    const ak_i64 bk = blockIdx.y, b = bk / HK, kvh = bk % HK;
    const ak_i64 h_lo = (kvh * HQ + HK - 1) / HK, h_hi = ((kvh + 1) * HQ + HK - 1) / HK;
    const ak_i64 nrows = (h_hi - h_lo) * Q, r0 = (ak_i64) blockIdx.z * ROWS;
    if (r0 >= nrows)
        return;
    const bool causal = mask == 2 || mask == 3;
    const ak_i64 len = mask == 3 ? L - (ak_i64) ((ak_u32) ((ak_u32) b * 2654435761u) % (ak_u32) (L + 1)) : L;

    /* the slices: at most one a step of keys, none when the partials do not fit */
    const ak_i64 tg = bk * gridDim.z + blockIdx.z;
    const ak_i64 ngroups = (ak_i64) gridDim.y * gridDim.z;
    const bool ws_ok = ngroups <= S_WS_GROUPS
                       && ngroups * (ak_i64) gridDim.x * ROWS * (D + 2) <= S_WS_FLOATS;
    ak_i64 nsplit = ws_ok ? min ((ak_i64) gridDim.x, (len + S_KSTEP - 1) / S_KSTEP) : 1;
    if (nsplit < 1)
        nsplit = 1;
    const ak_i64 split = blockIdx.x;
    if (split >= nsplit)
        return;
    const ak_i64 chunk = (len + nsplit - 1) / nsplit;
    const ak_i64 k0 = min (len, split * chunk), k1 = min (len, k0 + chunk);

    /* the tile's query rows, scaled by log2(e) / sqrt(D), zero beyond D */
    const float qscale = 1.4426950408889634f / sqrtf ((float) D);
    for (int i = tid; i < ROWS * S_DMAX; i += S_NT) {
        const int r = i / S_DMAX, d = i % S_DMAX;
        const ak_i64 gr = r0 + r;
        float v = 0.0f;
        if (gr < nrows && d < D) {
            const ak_i64 h = h_lo + gr / Q, t = gr % Q;
            v = ak_to_acc (AK_IN (a, 0)[((b * HQ + h) * Q + t) * D + d]) * qscale;
        }
        sq[r][d] = v;
    }
    ak_i64 nk[ROWS];                                  /* keys each row sees */
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const ak_i64 gr = r0 + r;
        nk[r] = gr >= nrows ? 0 : causal ? len - Q + 1 + gr % Q : L;
    }
    __syncthreads ();

    const ak_t *kb = AK_IN (a, 1) + bk * L * D, *vb = AK_IN (a, 2) + bk * L * D;
    const bool vec = D % S_VEC == 0 && ((ak_u64) AK_IN (a, 1)) % VECB == 0
                     && ((ak_u64) AK_IN (a, 2)) % VECB == 0;
    float m[ROWS], l[ROWS], acc[ROWS][S_NCH * S_VEC];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        m[r] = S_NEG_INF;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < S_NCH * S_VEC; i++)
            acc[r][i] = 0.0f;
    }

    /* the slice, S_KSTEP keys a step: the trip count is the same for the
       whole warp (shuffles below need every lane) */
    const ak_i64 steps = (k1 - k0 + S_KSTEP - 1) / S_KSTEP;
    for (ak_i64 st = 0; st < steps; st++) {
        const ak_i64 j = k0 + st * S_KSTEP + warp * KPW + grp;
        const bool valid = j < k1;
        float kf[S_NCH][S_VEC], vf[S_NCH][S_VEC];
#pragma unroll
        for (int c = 0; c < S_NCH; c++) {
            const ak_i64 d0 = (ak_i64) c * S_CH + lig * S_VEC;
            s_load (kb + (valid ? j : 0) * D, valid ? d0 : D, D, vec, kf[c]);
            s_load (vb + (valid ? j : 0) * D, valid ? d0 : D, D, vec, vf[c]);
        }
        float s[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            float part = 0.0f;
#pragma unroll
            for (int c = 0; c < S_NCH; c++)
                if (c * S_CH < D)                     /* uniform: D <= 128 skips half of D = 256's work */
#pragma unroll
                    for (int e = 0; e < S_VEC; e++)
                        part += sq[r][c * S_CH + lig * S_VEC + e] * kf[c][e];
            s[r] = part;
        }
#pragma unroll
        for (int off = S_LPK / 2; off >= 1; off >>= 1)
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                s[r] += __shfl_xor_sync (0xffffffffu, s[r], off);
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            if (valid && j < nk[r]) {
                const float mn = fmaxf (m[r], s[r]);
                const float corr = exp2f (m[r] - mn), p = exp2f (s[r] - mn);
                l[r] = l[r] * corr + p;
#pragma unroll
                for (int c = 0; c < S_NCH; c++)
                    if (c * S_CH < D)
#pragma unroll
                        for (int e = 0; e < S_VEC; e++)
                            acc[r][c * S_VEC + e] = acc[r][c * S_VEC + e] * corr + p * vf[c][e];
                m[r] = mn;
            }
        }
    }

    /* 1. the lane groups of the warp (partners hold the same dimensions) */
#pragma unroll
    for (int off = S_LPK; off < 32; off <<= 1) {
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const float mo = __shfl_xor_sync (0xffffffffu, m[r], off);
            const float lo = __shfl_xor_sync (0xffffffffu, l[r], off);
            const float mn = fmaxf (m[r], mo);
            const float fa = mn == S_NEG_INF ? 0.0f : exp2f (m[r] - mn);
            const float fb = mn == S_NEG_INF ? 0.0f : exp2f (mo - mn);
            l[r] = l[r] * fa + lo * fb;
#pragma unroll
            for (int i = 0; i < S_NCH * S_VEC; i++) {
                const float ao = __shfl_xor_sync (0xffffffffu, acc[r][i], off);
                acc[r][i] = acc[r][i] * fa + ao * fb;
            }
            m[r] = mn;
        }
    }

    /* 2. the warps of the block */
    float *sacc = s_smem, *sml = s_smem + (ak_i64) WARPS * ROWS * D;
    if (grp == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int c = 0; c < S_NCH; c++)
#pragma unroll
                for (int e = 0; e < S_VEC; e++) {
                    const ak_i64 d = (ak_i64) c * S_CH + lig * S_VEC + e;
                    if (d < D)
                        sacc[(warp * ROWS + r) * D + d] = acc[r][c * S_VEC + e];
                }
    }
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            sml[2 * (warp * ROWS + r)] = m[r];
            sml[2 * (warp * ROWS + r) + 1] = l[r];
        }
    }
    __syncthreads ();

    ak_t *out = AK_OUT (a, 0);
    for (ak_i64 i = tid; i < ROWS * D; i += S_NT) {
        const int r = (int) (i / D);
        const ak_i64 d = i % D, gr = r0 + r;
        float M = S_NEG_INF, O = 0.0f, Ls = 0.0f;
        for (int w = 0; w < WARPS; w++)
            M = fmaxf (M, sml[2 * (w * ROWS + r)]);
        if (M != S_NEG_INF)
            for (int w = 0; w < WARPS; w++) {
                const float f = exp2f (sml[2 * (w * ROWS + r)] - M);
                O += f * sacc[(w * ROWS + r) * D + d];
                Ls += f * sml[2 * (w * ROWS + r) + 1];
            }
        if (nsplit == 1) {
            if (gr < nrows) {
                const ak_i64 h = h_lo + gr / Q, t = gr % Q;
                out[((b * HQ + h) * Q + t) * D + d] = ak_from_acc (Ls > 0.0f ? O / Ls : 0.0f);
            }
        } else {
            float *ws = s_ws + ((tg * gridDim.x + split) * ROWS + r) * (D + 2);
            ws[d] = O;
            if (d == 0) {
                ws[D] = M;
                ws[D + 1] = Ls;
            }
        }
    }
    if (nsplit == 1)
        return;

    /* 3. the splits: the last block of the tile to arrive merges them */
    if (!ak_last_arrival (&s_cnt[tg], (unsigned int) nsplit, &s_last))
        return;
    for (ak_i64 i = tid; i < ROWS * D; i += S_NT) {
        const int r = (int) (i / D);
        const ak_i64 d = i % D, gr = r0 + r;
        if (gr >= nrows)
            continue;
        const float *ws0 = s_ws + (tg * gridDim.x * ROWS + r) * (D + 2);
        const ak_i64 stride = (ak_i64) ROWS * (D + 2);   /* from one split to the next */
        float M = S_NEG_INF, O = 0.0f, Ls = 0.0f;
        for (ak_i64 sp = 0; sp < nsplit; sp++)
            M = fmaxf (M, __ldcg (ws0 + sp * stride + D));
        if (M != S_NEG_INF)
            for (ak_i64 sp = 0; sp < nsplit; sp++) {
                const float f = exp2f (__ldcg (ws0 + sp * stride + D) - M);
                O += f * __ldcg (ws0 + sp * stride + d);
                Ls += f * __ldcg (ws0 + sp * stride + D + 1);
            }
        const ak_i64 h = h_lo + gr / Q, t = gr % Q;
        out[((b * HQ + h) * Q + t) * D + d] = ak_from_acc (Ls > 0.0f ? O / Ls : 0.0f);
    }
}
