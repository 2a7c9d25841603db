/*  flash_attention, Hopper-native (cuda, sm_90a), in the FlashAttention-3
    manner.  O = softmax (Q K^T / sqrt(D) [causal mask]) V per (b, h);
    q, k, v, o [B][H][S][D] row-major; mask 2 is causal (keys j <= i).

    float16 / bfloat16 with D <= 128 and the three tensor maps present: a
    warp-specialised kernel.  Block: 1 + CONSUMERS warpgroups (128 threads
    each); the block owns BM = 64*CONSUMERS query rows of one (b, h).
    Warpgroup 0 is the producer: it gives registers back
    (`setmaxnreg.dec`) and one thread loads the block's Q tile once and
    then the K and V tiles of BN keys into rings of STAGES stages with TMA
    (`cp.async.bulk.tensor.3d` over maps of dims {D, S, B*H}, box {64,
    rows, 1}: a tile past the end of a head's rows reads zeros, never the
    next head's, and so do the columns past D: every D up to 128 runs as
    D = 128, one instantiation; a second one for D = 64 in the same kernel
    made ptxas serialise every wgmma).  Each consumer warpgroup owns 64
    query rows and computes, for every key tile:
      S = Q K^T   `wgmma.m64nBNk16`, both operands from shared memory,
                  K-major (K's rows are already the N x K operand);
      the causal / length mask (edge tiles only: the tiles every key of
                  which every row sees run a loop compiled without it,
                  which took 25% off gpu_llm), the online softmax in the
                  exp2 domain (row max and sum per thread, the max reduced
                  over the 4 threads of a row; one MUFU.EX2 an element),
                  P rounded to the 16-bit type in registers;
      O += P V    `wgmma.m64nDk16` with P straight from registers as the A
                  operand (a thread's S accumulators are its A fragment,
                  as with mma.sync) and V from shared memory, N-major
                  (the transpose bit).
    Software pipelined inside a warpgroup: S of tile t and P V of tile
    t-1 are issued together; the softmax of tile t runs while P V of t-1
    is still on the tensor cores, then O is rescaled.  PINGPONG 1: the
    consumer warpgroups take turns to issue their products (named
    barriers), so one's softmax runs while the other's products do.

    Pipeline barriers per stage: full_k / full_v (count 1: the producer's
    arrive.expect_tx, completed by the TMA bytes) and empty_k / empty_v
    (count CONSUMERS: each consumer warpgroup arrives when its wgmma that
    read the stage finished); waits on the phase bit (t / STAGES) & 1, the
    producer on the opposite parity (a fresh barrier passes at once).  K
    and V have barriers of their own, so S = Q K^T starts before V lands.

    Shared memory (1024-byte aligned, TMA SWIZZLE_128B, 64-element panels
    of 128-byte rows; chunk c of row r at c ^ (r & 7)):
      Q  2 panels of [BM rows][64]   wgmma A: SBO 1024, +32 bytes a k16
      K  STAGES x 2 panels of [BN][64]  wgmma B, K-major: the same
      V  STAGES x 2 panels of [BN][64]  wgmma B, N-major: LBO = one
         panel (BN*128 bytes), SBO 1024, +2048 bytes (16 keys) a k16.
    Accumulators of m64nNk16: thread t of a warpgroup holds d[N/2];
    d[4j+e] is row 16*(t/32) + (t%32)/4 + 8*(e/2), column 8j + 2*(t%4) +
    (e%2) of its 64 rows.

    Causal: a block loads key tiles up to its last row; a warpgroup
    computes those up to its own last row and only passes the rest
    (waits, releases); blocks are scheduled heaviest first.  Rows past S
    are computed on zeros and not stored.

    float32 (tensor cores would need TF32, too coarse for the float32
    tolerance), D > 128, or a map the worker could not encode (a row of D
    elements not a multiple of 16 bytes): a plain path inside the same
    launch (a warp per query row, online softmax in float).

    Deterministic: every reduction has one fixed order.

    Launch: grid [(S+BM-1)/BM, B*H], block [128*(CONSUMERS+1)], shared
    (64*CONSUMERS + 2*STAGES*BN)*256 + 1024 (Q and the stages at D = 128
    and the slack to align them; the barriers are static). */
#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif

#ifndef AK_CUDA_ABI
/* The tensor-map parameter (CUtensorMap's size and alignment) until the
   prelude defines it. */
typedef struct __align__ (64) { ak_u64 opaque[16]; } ak_tensor_map_t;
#endif

#define BM  (64 * CONSUMERS)                /* query rows a block */
#define NT  (128 * (CONSUMERS + 1))
#define NW  (NT / 32)
#define S_LOG2E 1.4426950408889634f
#define S_PANELS 2                          /* 64-column panels of a row of D <= 128 */

static_assert (CONSUMERS == 2 || CONSUMERS == 3, "2 or 3 consumer warpgroups");
static_assert (BN == 64 || BN == 128, "BN: 64 or 128 keys a tile");
static_assert (STAGES >= 2 && STAGES <= 4, "2 to 4 stages");
static_assert (PINGPONG == 0 || PINGPONG == 1, "PINGPONG: 0 or 1");

/*  Register budgets (see matmul's wgmma.cu): the block starts with
    65536 / NT (168 or 128); the producer gives all but R_PROD back, the
    consumers take R_CONS. */
#if CONSUMERS == 2
#define R_PROD 24
#define R_CONS 240
#define R_START 168
#else
#define R_PROD 32
#define R_CONS 160
#define R_START 128
#endif
static_assert (R_PROD + CONSUMERS * R_CONS <= (CONSUMERS + 1) * R_START, "register budget");

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)
/* The Hopper building blocks (ak_bar_*, ak_tma_load_3d, ak_wgmma_ss /
   _rs, descriptors, fences) and the pipeline's pieces (ak_fa3_*: the
   barriers' set-up, the producer's loads, the consumers' key-tile step
   with its turns, their start and drain; shared with
   split_kv_attention's wg_decode) are in the prelude's third part,
   kernels/ak_hopper_cuda.h (ak_smem in kernels/ak_blocks_cuda.h). */

/* ------------------------------------------------------------ the kernel */

__device__ void s_flash (const ak_cuda_args_t &a, const ak_tensor_map_t *tm_q, const ak_tensor_map_t *tm_k,
                         const ak_tensor_map_t *tm_v, unsigned char *raw)
{
    constexpr int HD = 64 * S_PANELS, PANELS = S_PANELS;           /* D <= 128, zero-padded by TMA */
    constexpr int Q_BYTES = BM * HD * 2, T_BYTES = BN * HD * 2;     /* Q tile, one K or V stage */
    constexpr int NK = BN / 16;
    __shared__ __align__ (8) ak_u64 bars[1 + 4 * STAGES];
    const unsigned raw_s = ak_smem (raw), base_s = (raw_s + 1023u) & ~1023u;
    const unsigned q_s = base_s, k_s = q_s + Q_BYTES, v_s = k_s + STAGES * T_BYTES;
    const unsigned qbar = ak_smem (bars);

    const ak_i64 S = a.dims[2], mask = a.dims[4];
    const bool causal = mask == 2;
    const int bh = (int) blockIdx.y;
    const int qt = causal ? (int) (gridDim.x - 1 - blockIdx.x) : (int) blockIdx.x;
    const ak_i64 qb = (ak_i64) qt * BM;
    const ak_i64 kend = causal && qb + BM < S ? qb + BM : S;
    const int ntiles = (int) ((kend + BN - 1) / BN);
    const int wg = threadIdx.x / 128;

    ak_fa3_init<STAGES, CONSUMERS> (qbar, tm_q, tm_k, tm_v);

    if (wg == 0) {
        /* ---------------------------------------------------- producer */
        ak_setmaxnreg_dec<R_PROD> ();
        if (threadIdx.x != 0)
            return;
        ak_fa3_produce<PANELS, BN, BM, STAGES> (q_s, k_s, v_s, qbar, tm_q, tm_k, tm_v, (int) qb, 0, bh, ntiles);
        return;
    }

    /* -------------------------------------------------------- consumers */
    ak_setmaxnreg_inc<R_CONS> ();
    const int tid = threadIdx.x % 128, cw = wg - 1, lane = tid & 31, warp = tid >> 5;
    const ak_i64 w0 = qb + cw * 64;                       /* the warpgroup's first row */
    const ak_i64 wlast = w0 + 63 < S - 1 ? w0 + 63 : S - 1;
    const int nt = w0 >= S ? 0 : (int) (((causal ? wlast + 1 : S) + BN - 1) / BN);
    ak_i64 row[2];
    row[0] = w0 + warp * 16 + (lane >> 2);
    row[1] = row[0] + 8;
    const ak_i64 D = a.dims[3];
    const float sc = S_LOG2E / sqrtf ((float) D);
    const unsigned qa = q_s + cw * 64 * 128;

    float o[HD / 2], sacc[BN / 2], m[2], l[2];
    unsigned pa[NK][4];
    ak_fa3_begin<HD, NK, PINGPONG, CONSUMERS> (cw, qbar, o, pa, m, l);

    /* tiles every key of which every row of the warpgroup sees, then the
       edge tiles (past S, or past a row under the causal mask): the mask
       is compiled into the second loop only */
    ak_fa3_ctx_t c = ak_fa3_rings<STAGES> (qbar, k_s, v_s);
    c.qa = qa;
    c.tid = tid;
    c.cw = cw;
    c.sc = sc;
    int ntfull = (int) (S / BN);
    if (causal && (w0 + 1) / BN < ntfull)
        ntfull = (int) ((w0 + 1) / BN);
    if (ntfull > nt)
        ntfull = nt;
    int t = 0;
    for (; t < ntfull; t++)
        ak_fa3_tile<false, HD, BN, BM, STAGES, PINGPONG, CONSUMERS, NK> (c, t, o, sacc, pa, m, l, 0, 0);
    for (; t < nt; t++) {
        /* a column c of the tile (0..BN-1) is a key of row h where c < lim[h] */
        const ak_i64 j0 = (ak_i64) t * BN;
        int lim[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            ak_i64 n = S - j0;
            if (causal && row[h] + 1 - j0 < n)
                n = row[h] + 1 - j0;
            lim[h] = n < 0 ? 0 : n > BN ? BN : (int) n;
        }
        ak_fa3_tile<true, HD, BN, BM, STAGES, PINGPONG, CONSUMERS, NK> (c, t, o, sacc, pa, m, l, lim[0], lim[1]);
    }
    /* the last tile's P V, then the block's tiles past this warpgroup's
       last row passed on, and the turns with them */
    ak_fa3_drain<HD, BN, STAGES, PINGPONG, CONSUMERS, NK> (c, nt, ntiles, o, sacc, pa);
    if (nt == 0)
        return;

    /* the row sums live spread over the quad */
    ak_t *O = AK_OUT (a, 0) + (ak_i64) bh * S * D;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float lh = l[h];
        lh += __shfl_xor_sync (0xffffffffu, lh, 1);
        lh += __shfl_xor_sync (0xffffffffu, lh, 2);
        if (row[h] >= S)
            continue;
        const float inv = 1.0f / lh;
        ak_t *out = O + row[h] * D + (lane & 3) * 2;
#pragma unroll
        for (int j = 0; j < HD / 8; j++)
            if (j * 8 < D)
                *(unsigned *) (out + j * 8) = ak_pack2 (o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
    }
}

extern "C" __global__ void __launch_bounds__ (NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_q,
           const __grid_constant__ ak_tensor_map_t tm_k, const __grid_constant__ ak_tensor_map_t tm_v)
{
    AK_DYNAMIC_SHARED (unsigned char, s_raw);
    const ak_i64 D = a.dims[3];
    const bool maps = ak_tensor_map_present (&tm_q) && ak_tensor_map_present (&tm_k)
                      && ak_tensor_map_present (&tm_v);
    /* one tile width, 128: a second instantiation (D 64) in the same
       kernel makes ptxas serialise every wgmma */
    if (maps && D <= 128)
        s_flash (a, &tm_q, &tm_k, &tm_v, s_raw);
    else
        ak_attn_plain<BM, NW> (a);
}

#else

extern "C" __global__ void __launch_bounds__ (NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_q,
           const __grid_constant__ ak_tensor_map_t tm_k, const __grid_constant__ ak_tensor_map_t tm_v)
{
    (void) tm_q;
    (void) tm_k;
    (void) tm_v;
    ak_attn_plain<BM, NW> (a);
}

#endif
