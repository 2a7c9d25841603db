/*  flash_attention, FlashAttention-2 style (cuda).
    O = softmax (Q K^T / sqrt(D) [causal mask]) V per (b, h); q, k, v, o
    [B][H][S][D] row-major; mask 2 is causal (keys j <= i).

    float16 / bfloat16 with D = 64 or 128: a block owns BLOCK_M query rows
    of one (b, h), a warp WARP_ROWS of them (BLOCK_M/WARP_ROWS warps).
    With 16 rows a warp the Q tile is loaded once into registers as `mma`
    A fragments; with 32 every K and V fragment read from shared memory
    feeds two row tiles (half the shared-memory traffic per mma, which
    bounds the 16-row warps) and Q fragments are re-read from shared
    memory instead (registers).  K and V tiles of
    BLOCK_N keys stream through two shared-memory stages (`cp.async`, the
    next tile loading while this one is computed).  Per tile: S = Q K^T
    with `mma.sync.m16n8k16` (K rows read by `ldmatrix`, not transposed:
    K is already the "col" operand), the causal / length mask, the online
    softmax in the exp2 domain (row max and sum kept per thread, the max
    reduced over the 4 threads of a row), P rounded to the 16-bit type
    and fed straight from registers as the A operand of O += P V (V read
    with `ldmatrix.trans`).  Rows past S and keys past S are zero-filled
    and masked.  Causal blocks stop at their last row's tile and are
    scheduled heaviest first.

    float32 (tensor cores would need TF32, too coarse for the float32
    tolerance) and any other D (<= 256) take a plain path inside the same
    launch: a warp per query row, online softmax in float.

    The order of every reduction is fixed: deterministic.

    Launch: grid [(S+BLOCK_M-1)/BLOCK_M, B*H], block [BLOCK_M/WARP_ROWS*32],
    shared (BLOCK_M+4*BLOCK_N)*(D+8)*2. */
#ifndef BLOCK_M
#define BLOCK_M 64
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#ifndef WARP_ROWS
#define WARP_ROWS 16
#endif

#define NW (BLOCK_M / WARP_ROWS)           /* warps */
#define S_LOG2E 1.4426950408889634f

static_assert (BLOCK_M % WARP_ROWS == 0 && BLOCK_N % 16 == 0 && WARP_ROWS % 16 == 0,
               "tiles are multiples of 16, the block of the warps' rows");

__device__ __forceinline__ float s_neg_inf (void)
{
    return __int_as_float (0xff800000);
}

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)
/* ------------------------------------------------------ tensor-core path */

template <int HD, int MT>
__device__ void s_flash (const ak_cuda_args_t &a, unsigned char *raw)
{
    constexpr int SD = HD + 8;               /* smem row stride, elements */
    constexpr int NJ = BLOCK_N / 8;          /* n8 tiles of S per m16 tile */
    constexpr int ND = HD / 8;               /* n8 tiles of O per m16 tile */
    constexpr bool QREG = MT == 1;           /* Q fragments kept in registers (else re-read from smem) */
    ak_t *Qs = (ak_t *) raw;
    ak_t *Ks = Qs + BLOCK_M * SD;            /* 2 stages */
    ak_t *Vs = Ks + 2 * BLOCK_N * SD;        /* 2 stages */
    const ak_i64 S = a.dims[2], mask = a.dims[4];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const ak_i64 bh = blockIdx.y;
    const bool causal = mask == 2;
    /* causal: the last query tiles have the most keys; start them first */
    const ak_i64 qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const ak_i64 qb = qt * BLOCK_M;          /* first row of the block */
    const int wrow = warp * 16 * MT;         /* first row of the warp in the block */
    const ak_i64 q0 = qb + wrow;
    const ak_t *Q = AK_IN (a, 0) + bh * S * HD, *K = AK_IN (a, 1) + bh * S * HD,
               *V = AK_IN (a, 2) + bh * S * HD;
    ak_t *O = AK_OUT (a, 0) + bh * S * HD;
    const float sc = S_LOG2E / sqrtf ((float) HD);

    ak_i64 kend = S;
    if (causal && qb + BLOCK_M < kend)
        kend = qb + BLOCK_M;
    const int ntiles = (int) ((kend + BLOCK_N - 1) / BLOCK_N);

    ak_cp_rows<HD> (Qs, Q, qb, BLOCK_M, S, NW * 32);
    ak_cp_rows<HD> (Ks, K, 0, BLOCK_N, S, NW * 32);
    ak_cp_rows<HD> (Vs, V, 0, BLOCK_N, S, NW * 32);
    ak_cp_commit ();

    unsigned qf[QREG ? HD / 16 : 1][4];
    float o[MT][ND][4], m[MT][2], l[MT][2];
    ak_i64 row[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int d = 0; d < ND; d++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[mt][d][e] = 0.0f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            m[mt][h] = s_neg_inf ();
            l[mt][h] = 0.0f;
            row[mt][h] = q0 + mt * 16 + (lane >> 2) + h * 8;
        }
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
            ak_cp_rows<HD> (Ks + st * BLOCK_N * SD, K, (ak_i64) (t + 1) * BLOCK_N, BLOCK_N, S, NW * 32);
            ak_cp_rows<HD> (Vs + st * BLOCK_N * SD, V, (ak_i64) (t + 1) * BLOCK_N, BLOCK_N, S, NW * 32);
        }
        ak_cp_commit ();
        const ak_i64 j0 = (ak_i64) t * BLOCK_N;
        if (causal && j0 > q0 + 16 * MT - 1)
            continue;                        /* every key of the tile is after every row of the warp */
        const ak_t *ks = Ks + (t & 1) * BLOCK_N * SD, *vs = Vs + (t & 1) * BLOCK_N * SD;

        /* S = Q K^T: 16*MT x BLOCK_N a warp (ak_fa_scores: each K fragment serves the MT row tiles) */
        float s[MT][NJ][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[mt][j][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            unsigned qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (QREG) {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        qa[mt][e] = qf[QREG ? kk : 0][e];
                }
                else
                    ak_ldmatrix_x4 (qa[mt], Qs + (wrow + mt * 16 + (lane & 15)) * SD + kk * 16 + (lane >> 4) * 8);
            }
            ak_fa_scores<MT, NJ> (s, qa, ks, SD, kk, lane);
        }

        /* mask, scale to the exp2 domain, row max over the quad */
        const bool edge = j0 + BLOCK_N > S || (causal && j0 + BLOCK_N - 1 > q0);
        float mu[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float mx[2] = { s_neg_inf (), s_neg_inf () };
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = s[mt][j][e] * sc;
                    if (edge) {
                        const ak_i64 col = j0 + j * 8 + (lane & 3) * 2 + (e & 1);
                        if (col >= S || (causal && col > row[mt][e >> 1]))
                            x = s_neg_inf ();
                    }
                    s[mt][j][e] = x;
                    mx[e >> 1] = fmaxf (mx[e >> 1], x);
                }
            float corr[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 1));
                mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 2));
                const float mn = fmaxf (m[mt][h], mx[h]);
                mu[mt][h] = mn == s_neg_inf () ? 0.0f : mn;        /* a row with no key yet */
                corr[h] = exp2f (m[mt][h] - mu[mt][h]);
                m[mt][h] = mn;
                l[mt][h] *= corr[h];
            }
#pragma unroll
            for (int d = 0; d < ND; d++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    o[mt][d][e] *= corr[e >> 1];
        }

        /* P = exp2 (x - m), rounded to 16 bits, then O += P V (ak_fa_pv:
           each V fragment serves the MT row tiles) */
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++) {
            unsigned pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                float p[2][4];
#pragma unroll
                for (int u = 0; u < 2; u++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        p[u][e] = exp2f (s[mt][2 * kk + u][e] - mu[mt][e >> 1]);
                        l[mt][e >> 1] += p[u][e];
                    }
                pa[mt][0] = ak_pack2 (p[0][0], p[0][1]);
                pa[mt][1] = ak_pack2 (p[0][2], p[0][3]);
                pa[mt][2] = ak_pack2 (p[1][0], p[1][1]);
                pa[mt][3] = ak_pack2 (p[1][2], p[1][3]);
            }
            ak_fa_pv<MT, ND> (o, pa, vs, SD, kk, lane);
        }
    }
    ak_cp_wait<0> ();

    /* the row sums live spread over the quad */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float lh = l[mt][h];
            lh += __shfl_xor_sync (0xffffffffu, lh, 1);
            lh += __shfl_xor_sync (0xffffffffu, lh, 2);
            if (row[mt][h] >= S)
                continue;
            const float inv = 1.0f / lh;
            ak_t *out = O + row[mt][h] * HD + (lane & 3) * 2;
#pragma unroll
            for (int d = 0; d < ND; d++)
                *(unsigned *) (out + d * 8) = ak_pack2 (o[mt][d][2 * h] * inv, o[mt][d][2 * h + 1] * inv);
        }
}

extern "C" __global__ void __launch_bounds__ (NW * 32) ak_kernel (ak_cuda_args_t a)
{
    AK_DYNAMIC_SHARED (unsigned char, s_raw);
    const ak_i64 D = a.dims[3];
    if (D == 64)
        s_flash<64, WARP_ROWS / 16> (a, s_raw);
    else if (D == 128)
        s_flash<128, WARP_ROWS / 16> (a, s_raw);
    else
        ak_attn_plain<BLOCK_M, NW> (a);
}

#else

extern "C" __global__ void __launch_bounds__ (NW * 32) ak_kernel (ak_cuda_args_t a)
{
    ak_attn_plain<BLOCK_M, NW> (a);
}

#endif
