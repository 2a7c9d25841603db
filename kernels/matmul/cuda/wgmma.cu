/*  matmul, Hopper-native (cuda, sm_90a).  C[M][N] = A[M][K] * B[K][N],
    row-major, float accumulation, C in the input dtype.

    float16 / bfloat16: a persistent, warp-specialised kernel.

    Block: 1 + CONSUMERS warpgroups (128 threads each).  Warpgroup 0 is the
    producer: it gives registers back (`setmaxnreg.dec` to 40) and one of
    its threads fills a ring of STAGES shared-memory stages with TMA
    (`cp.async.bulk.tensor.2d`, the tensor maps tm_a / tm_b the worker
    encodes, 128-byte swizzle, zero fill out of bounds so ragged M / N / K
    edges load as zeros).  Warpgroups 1..CONSUMERS take registers
    (`setmaxnreg.inc`) and each computes BM/CONSUMERS rows x BN columns of
    the block's tile with `wgmma.mma_async.m64nBNk16` straight from shared
    memory, fp32 accumulators in registers.

    Pipeline, per stage s: full[s] (count 1: the producer's
    arrive.expect_tx of the stage's bytes, completed by the TMA
    transactions) and empty[s] (count CONSUMERS: one arrive per consumer
    warpgroup once the wgmma that read the stage finished).  Waits are
    `mbarrier.try_wait.parity` on the phase bit (it / STAGES) & 1; the
    producer waits on empty with the opposite parity, which a fresh
    barrier passes at once.  A consumer issues the BK/16 k-steps of a
    stage, commits them as one wgmma group and waits until only that group
    is in flight (`wgmma.wait_group 1`): the previous stage is then free.

    Shared memory layouts (1024-byte aligned stages, TMA SWIZZLE_128B:
    16-byte chunk c of a 128-byte row r sits at chunk c ^ (r & 7)):
      A stage: BK/64 panels of [BM rows][64 k] (box {64, BM} of tm_a, dims
               {K, M}): K-major.  wgmma descriptor: SBO = 1024 bytes (one
               8-row swizzle atom to the next), LBO unused for swizzled
               K-major (1), swizzle mode 1 (128B) in bits 62-63; a k16
               step inside a panel advances the start address by 32 bytes.
      B stage: BN/64 panels of [BK rows][64 n] (box {64, BK} of tm_b,
               dims {N, K}).  B is row-major [K][N], so in shared memory it
               is N-major ("MN-major"): wgmma takes it with the transpose
               bit imm-trans-b = 1.  Descriptor for MN-major swizzled:
               LBO = bytes from one 64-column panel to the next (BK*128),
               SBO = bytes from 8 k rows to the next 8 (1024); a k16 step
               advances the start address by 16 rows (2048 bytes).
    Accumulators of m64nNk16 (f32): thread t of a warpgroup holds d[N/2];
    d[4j+e] is row 16*(t/32) + (t%32)/4 + 8*(e/2), column 8j + 2*(t%4) +
    (e%2) of its 64-row slice.

    Tiles: ceil(M/BM) x ceil(N/BN), walked by every block from blockIdx.x
    in steps of gridDim.x (persistent: launch min(tiles, GRID) blocks).
    RASTER 0: bands of GROUP tile rows, each walked column by column (down
    the band first), so blocks running together share B column panels and
    the band's A rows stay in L2; RASTER 1: bands of GROUP tile columns,
    walked row by row.  The producer runs ahead into the next tile while
    the consumers store the last one.

    Epilogue: guarded stores straight from the accumulators (pairs of
    elements where N is even), so every edge is exact.

    Where TMA cannot be used (a row stride K*2 or N*2 not a multiple of 16
    bytes, a base not 16-byte aligned, or a tensor map the worker left
    zero), the producer warpgroup fills the same swizzled stages itself
    (bounds-checked element loads, zero past the edges, then
    `fence.proxy.async` so wgmma sees them, a named barrier, one arrive):
    the consumers do not change.  Slow, but only the ragged edge shapes
    take it.

    float32: wgmma on float32 is TF32, which cannot meet the float32
    tolerance, so the same launch runs a plain shared-memory FMA tiling
    (the tensor maps unused); the tuner finds this candidate slow there.

    Deterministic: every output sums its k products in one fixed order.

    Launch: grid [min(tiles, GRID)], block [128*(CONSUMERS+1)],
    shared STAGES*(BM+BN)*BK*2 + 1024 (the stages and the slack to align
    them to 1024 bytes; the barriers are static). */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef RASTER
#define RASTER 0
#endif
#ifndef GROUP
#define GROUP 8
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif

#ifndef AK_CUDA_ABI
/* The tensor-map parameter (CUtensorMap's size and alignment) until the
   prelude defines it. */
typedef struct __align__ (64) { ak_u64 opaque[16]; } ak_tensor_map_t;
#endif

#define NT          (128 * (CONSUMERS + 1))
#define WGM         (BM / CONSUMERS)              /* rows per consumer warpgroup */
#define MI          (WGM / 64)                    /* m64 wgmma per k16 step */
#define A_BYTES     (BM * BK * 2)
#define B_BYTES     (BN * BK * 2)
#define STAGE_BYTES (A_BYTES + B_BYTES)

static_assert (CLUSTER == 1, "clusters are not implemented yet");
static_assert (CONSUMERS == 1 || CONSUMERS == 2, "1 or 2 consumer warpgroups");
static_assert (BM % (64 * CONSUMERS) == 0, "BM must be a multiple of 64 per consumer warpgroup");
static_assert (BN == 64 || BN == 128 || BN == 256, "BN: 64, 128 or 256");
static_assert (BK % 64 == 0 && BK <= 256, "BK: 64-element (128-byte) panels");
static_assert (MI * BN / 2 <= 128, "at most 128 accumulator registers a thread");
static_assert (STAGES >= 2, "at least 2 stages");
static_assert (RASTER == 0 || RASTER == 1, "RASTER: 0 or 1");
static_assert (GROUP >= 1, "GROUP >= 1");

/*  Register budgets.  ptxas compiles the whole kernel within one register
    count, the launch bound's cap or the largest setmaxnreg, whichever is
    less, and the block starts with it.  CONSUMERS 2: 65536/384 -> 168; the
    producer gives all but 40 back and the consumers take them (40 + 2*232
    == 3*168; an increase beyond what was given back would block forever).
    CONSUMERS 1: the cap is 255, so the block starts at 240 and the
    consumer's increase is a no-op; the producer's decrease still frees
    registers for nothing else, but keeps one code path. */
#if CONSUMERS == 2
#define R_START 168
#define R_CONS  232
#else
#define R_START 240
#define R_CONS  240
#endif
#define R_PROD 40
static_assert (R_PROD + CONSUMERS * R_CONS <= (CONSUMERS + 1) * R_START, "register budget");

/*  Tile t of the walk -> its first row and column. */
__device__ __forceinline__ void s_tile (int t, int tiles_m, int tiles_n, ak_i64 *m0, ak_i64 *n0)
{
#if RASTER == 0
    const int per_group = GROUP * tiles_n, g = t / per_group, first = g * GROUP;
    const int rows = min (tiles_m - first, GROUP), r = t - g * per_group;
    *m0 = (ak_i64) (first + r % rows) * BM;
    *n0 = (ak_i64) (r / rows) * BN;
#else
    const int per_group = GROUP * tiles_m, g = t / per_group, first = g * GROUP;
    const int cols = min (tiles_n - first, GROUP), r = t - g * per_group;
    *n0 = (ak_i64) (first + r % cols) * BN;
    *m0 = (ak_i64) (r / cols) * BM;
#endif
}

#if defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)

#ifdef AK_DTYPE_FLOAT16
#define S_WT "f16"
#else
#define S_WT "bf16"
#endif

/* ------------------------------------------------------------ PTX helpers */

__device__ __forceinline__ unsigned s_smem (const void *p)
{
    return (unsigned) __cvta_generic_to_shared (p);
}

__device__ __forceinline__ void s_bar_init (unsigned bar, unsigned count)
{
    asm volatile ("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r" (bar), "r" (count) : "memory");
}

__device__ __forceinline__ void s_bar_wait (unsigned bar, unsigned parity)
{
    unsigned done;
    do {
        asm volatile ("{\n.reg .pred p;\n"
                      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                      "selp.u32 %0, 1, 0, p;\n}\n"
                      : "=r" (done) : "r" (bar), "r" (parity) : "memory");
    } while (!done);
}

__device__ __forceinline__ void s_bar_arrive (unsigned bar)
{
    asm volatile ("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r" (bar) : "memory");
}

__device__ __forceinline__ void s_bar_expect (unsigned bar, unsigned bytes)
{
    asm volatile ("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r" (bar), "r" (bytes) : "memory");
}

/*  One box of a 2-D tensor map into shared memory; c0 the innermost
    coordinate.  Completes bytes on bar. */
__device__ __forceinline__ void s_tma_load (unsigned dst, const ak_tensor_map_t *map, int c0, int c1, unsigned bar)
{
    asm volatile ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                  " [%0], [%1, {%2, %3}], [%4];\n"
                  :: "r" (dst), "l" ((ak_u64) map), "r" (c0), "r" (c1), "r" (bar) : "memory");
}

__device__ __forceinline__ void s_wgmma_fence (void)
{
    asm volatile ("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void s_wgmma_commit (void)
{
    asm volatile ("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N_>
__device__ __forceinline__ void s_wgmma_wait (void)
{
    asm volatile ("wgmma.wait_group.sync.aligned %0;\n" :: "n" (N_) : "memory");
}

/*  Tells the compiler a register may have changed (the wgmma wrote it
    asynchronously): no read of it moves above the wait. */
__device__ __forceinline__ void s_reg_fence (float &r)
{
    asm volatile ("" : "+f" (r) :: "memory");
}

/*  Shared-memory matrix descriptor, 128-byte swizzle: start address >> 4
    (bits 0-13), LBO >> 4 (16-29), SBO >> 4 (32-45), base offset 0 (the
    stages are 1024-byte aligned), swizzle mode 1 = 128B (62-63). */
__device__ __forceinline__ ak_u64 s_desc (unsigned addr, unsigned lbo, unsigned sbo)
{
    return (ak_u64) ((addr & 0x3FFFF) >> 4) | (ak_u64) ((lbo >> 4) & 0x3FFF) << 16
           | (ak_u64) ((sbo >> 4) & 0x3FFF) << 32 | 1ull << 62;
}

/*  D[64 x N] (+)= A[64 x 16] * B[16 x N]: A K-major (imm-trans-a 0), B
    N-major (imm-trans-b 1), scales +1; acc 0 overwrites D. */
template <int N_>
__device__ __forceinline__ void s_wgmma (float (&d)[N_ / 2], ak_u64 da, ak_u64 db, int acc);

template <> __device__ __forceinline__ void s_wgmma<64> (float (&d)[32], ak_u64 da, ak_u64 db, int acc)
{
    asm volatile ("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                  "wgmma.mma_async.sync.aligned.m64n64k16.f32." S_WT "." S_WT " {"
                  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,"
                  "%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
                  "}, %32, %33, p, 1, 1, 0, 1;\n}\n"
                  : "+f" (d[0]), "+f" (d[1]), "+f" (d[2]), "+f" (d[3]), "+f" (d[4]), "+f" (d[5]), "+f" (d[6]), "+f" (d[7]),
                    "+f" (d[8]), "+f" (d[9]), "+f" (d[10]), "+f" (d[11]), "+f" (d[12]), "+f" (d[13]), "+f" (d[14]), "+f" (d[15]),
                    "+f" (d[16]), "+f" (d[17]), "+f" (d[18]), "+f" (d[19]), "+f" (d[20]), "+f" (d[21]), "+f" (d[22]), "+f" (d[23]),
                    "+f" (d[24]), "+f" (d[25]), "+f" (d[26]), "+f" (d[27]), "+f" (d[28]), "+f" (d[29]), "+f" (d[30]), "+f" (d[31])
                  : "l" (da), "l" (db), "r" (acc));
}

template <> __device__ __forceinline__ void s_wgmma<128> (float (&d)[64], ak_u64 da, ak_u64 db, int acc)
{
    asm volatile ("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                  "wgmma.mma_async.sync.aligned.m64n128k16.f32." S_WT "." S_WT " {"
                  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,"
                  "%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,"
                  "%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,"
                  "%60,%61,%62,%63"
                  "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
                  : "+f" (d[0]), "+f" (d[1]), "+f" (d[2]), "+f" (d[3]), "+f" (d[4]), "+f" (d[5]), "+f" (d[6]), "+f" (d[7]),
                    "+f" (d[8]), "+f" (d[9]), "+f" (d[10]), "+f" (d[11]), "+f" (d[12]), "+f" (d[13]), "+f" (d[14]), "+f" (d[15]),
                    "+f" (d[16]), "+f" (d[17]), "+f" (d[18]), "+f" (d[19]), "+f" (d[20]), "+f" (d[21]), "+f" (d[22]), "+f" (d[23]),
                    "+f" (d[24]), "+f" (d[25]), "+f" (d[26]), "+f" (d[27]), "+f" (d[28]), "+f" (d[29]), "+f" (d[30]), "+f" (d[31]),
                    "+f" (d[32]), "+f" (d[33]), "+f" (d[34]), "+f" (d[35]), "+f" (d[36]), "+f" (d[37]), "+f" (d[38]), "+f" (d[39]),
                    "+f" (d[40]), "+f" (d[41]), "+f" (d[42]), "+f" (d[43]), "+f" (d[44]), "+f" (d[45]), "+f" (d[46]), "+f" (d[47]),
                    "+f" (d[48]), "+f" (d[49]), "+f" (d[50]), "+f" (d[51]), "+f" (d[52]), "+f" (d[53]), "+f" (d[54]), "+f" (d[55]),
                    "+f" (d[56]), "+f" (d[57]), "+f" (d[58]), "+f" (d[59]), "+f" (d[60]), "+f" (d[61]), "+f" (d[62]), "+f" (d[63])
                  : "l" (da), "l" (db), "r" (acc));
}

template <> __device__ __forceinline__ void s_wgmma<256> (float (&d)[128], ak_u64 da, ak_u64 db, int acc)
{
    asm volatile ("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                  "wgmma.mma_async.sync.aligned.m64n256k16.f32." S_WT "." S_WT " {"
                  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,"
                  "%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,"
                  "%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,"
                  "%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,"
                  "%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,"
                  "%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,"
                  "%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
                  "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
                  : "+f" (d[0]), "+f" (d[1]), "+f" (d[2]), "+f" (d[3]), "+f" (d[4]), "+f" (d[5]), "+f" (d[6]), "+f" (d[7]),
                    "+f" (d[8]), "+f" (d[9]), "+f" (d[10]), "+f" (d[11]), "+f" (d[12]), "+f" (d[13]), "+f" (d[14]), "+f" (d[15]),
                    "+f" (d[16]), "+f" (d[17]), "+f" (d[18]), "+f" (d[19]), "+f" (d[20]), "+f" (d[21]), "+f" (d[22]), "+f" (d[23]),
                    "+f" (d[24]), "+f" (d[25]), "+f" (d[26]), "+f" (d[27]), "+f" (d[28]), "+f" (d[29]), "+f" (d[30]), "+f" (d[31]),
                    "+f" (d[32]), "+f" (d[33]), "+f" (d[34]), "+f" (d[35]), "+f" (d[36]), "+f" (d[37]), "+f" (d[38]), "+f" (d[39]),
                    "+f" (d[40]), "+f" (d[41]), "+f" (d[42]), "+f" (d[43]), "+f" (d[44]), "+f" (d[45]), "+f" (d[46]), "+f" (d[47]),
                    "+f" (d[48]), "+f" (d[49]), "+f" (d[50]), "+f" (d[51]), "+f" (d[52]), "+f" (d[53]), "+f" (d[54]), "+f" (d[55]),
                    "+f" (d[56]), "+f" (d[57]), "+f" (d[58]), "+f" (d[59]), "+f" (d[60]), "+f" (d[61]), "+f" (d[62]), "+f" (d[63]),
                    "+f" (d[64]), "+f" (d[65]), "+f" (d[66]), "+f" (d[67]), "+f" (d[68]), "+f" (d[69]), "+f" (d[70]), "+f" (d[71]),
                    "+f" (d[72]), "+f" (d[73]), "+f" (d[74]), "+f" (d[75]), "+f" (d[76]), "+f" (d[77]), "+f" (d[78]), "+f" (d[79]),
                    "+f" (d[80]), "+f" (d[81]), "+f" (d[82]), "+f" (d[83]), "+f" (d[84]), "+f" (d[85]), "+f" (d[86]), "+f" (d[87]),
                    "+f" (d[88]), "+f" (d[89]), "+f" (d[90]), "+f" (d[91]), "+f" (d[92]), "+f" (d[93]), "+f" (d[94]), "+f" (d[95]),
                    "+f" (d[96]), "+f" (d[97]), "+f" (d[98]), "+f" (d[99]), "+f" (d[100]), "+f" (d[101]), "+f" (d[102]), "+f" (d[103]),
                    "+f" (d[104]), "+f" (d[105]), "+f" (d[106]), "+f" (d[107]), "+f" (d[108]), "+f" (d[109]), "+f" (d[110]), "+f" (d[111]),
                    "+f" (d[112]), "+f" (d[113]), "+f" (d[114]), "+f" (d[115]), "+f" (d[116]), "+f" (d[117]), "+f" (d[118]), "+f" (d[119]),
                    "+f" (d[120]), "+f" (d[121]), "+f" (d[122]), "+f" (d[123]), "+f" (d[124]), "+f" (d[125]), "+f" (d[126]), "+f" (d[127])
                  : "l" (da), "l" (db), "r" (acc));
}

/* ------------------------------------------------------------ the stages */

/*  Whether the worker encoded the map (a zero map: it could not). */
__device__ __forceinline__ bool s_map_set (const ak_tensor_map_t *map)
{
    ak_u64 x = 0;
#pragma unroll
    for (int i = 0; i < 16; i++)
        x |= map->opaque[i];
    return x != 0;
}

/*  16-byte chunk ch (8 elements) of 128-byte row r of a panel, where
    TMA's 128-byte swizzle puts it. */
__device__ __forceinline__ unsigned s_swz (int r, int ch)
{
    return (unsigned) (r * 128 + ((ch ^ (r & 7)) << 4));
}

/*  8 elements from row[col..col+8) as raw bits, zero past n or when the
    row is outside the matrix. */
__device__ __forceinline__ uint4 s_load8 (const unsigned short *row, ak_i64 col, ak_i64 n, bool row_ok)
{
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const ak_i64 c = col + 2 * e;
        const unsigned lo = row_ok && c < n ? row[c] : 0u;
        const unsigned hi = row_ok && c + 1 < n ? row[c + 1] : 0u;
        w[e] = lo | hi << 16;
    }
    return make_uint4 (w[0], w[1], w[2], w[3]);
}

/*  Part of a stage without TMA, by the 128 producer threads (ptid): the
    tile of rows r0.. and columns c0.. of a row-major rows x cols matrix as
    TMA would place it, P panels of R rows x 64 columns, swizzled, zero
    out of bounds. */
__device__ __forceinline__ void s_fill (unsigned char *dst, const unsigned short *src, ak_i64 rows, ak_i64 cols,
                                     ak_i64 r0, ak_i64 c0, int R, int P, int ptid)
{
    for (int c = ptid; c < P * R * 8; c += 128) {
        const int p = c / (R * 8), r = (c / 8) % R, ch = c % 8;
        const ak_i64 gr = r0 + r;
        const bool ok = gr < rows;
        *(uint4 *) (dst + p * R * 128 + s_swz (r, ch)) = s_load8 (src + (ok ? gr : 0) * cols, c0 + p * 64 + ch * 8,
                                                                 cols, ok);
    }
}

/* ------------------------------------------------------------ the kernel */

extern "C" __global__ void __launch_bounds__ (NT, 1)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a,
           const __grid_constant__ ak_tensor_map_t tm_b)
{
    extern __shared__ __align__ (16) unsigned char s_raw[];
    __shared__ __align__ (8) ak_u64 full[STAGES], empty[STAGES];
    const unsigned raw_s = s_smem (s_raw), base_s = (raw_s + 1023u) & ~1023u;
    unsigned char *smem = s_raw + (base_s - raw_s);
    const unsigned full_s = s_smem (full), empty_s = s_smem (empty);

    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const int tiles_m = (int) ((M + BM - 1) / BM), tiles_n = (int) ((N + BN - 1) / BN);
    const int tiles = tiles_m * tiles_n, KT = (int) ((K + BK - 1) / BK);
    const int wg = threadIdx.x / 128;
    /* cuTensorMapEncodeTiled's rules: 16-byte aligned base and row strides */
    const bool tma = K % 8 == 0 && N % 8 == 0 && ((ak_u64) A & 15) == 0 && ((ak_u64) B & 15) == 0
                     && s_map_set (&tm_a) && s_map_set (&tm_b);

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            s_bar_init (full_s + 8 * s, 1);
            s_bar_init (empty_s + 8 * s, CONSUMERS);
        }
        asm volatile ("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        if (tma) {
            asm volatile ("prefetch.tensormap [%0];\n" :: "l" ((ak_u64) &tm_a) : "memory");
            asm volatile ("prefetch.tensormap [%0];\n" :: "l" ((ak_u64) &tm_b) : "memory");
        }
    }
    __syncthreads ();

    if (wg == 0) {
        /* ---------------------------------------------------- producer */
        asm volatile ("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n" (R_PROD));
        const int ptid = threadIdx.x;
        if (tma && ptid != 0)
            return;
        int s = 0;
        unsigned ph = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            ak_i64 m0, n0;
            s_tile (t, tiles_m, tiles_n, &m0, &n0);
            for (int kt = 0; kt < KT; kt++) {
                const unsigned fb = full_s + 8 * s, st = base_s + s * STAGE_BYTES;
                s_bar_wait (empty_s + 8 * s, ph ^ 1);
                if (tma) {
                    s_bar_expect (fb, STAGE_BYTES);
#pragma unroll
                    for (int p = 0; p < BK / 64; p++)
                        s_tma_load (st + p * BM * 128, &tm_a, kt * BK + p * 64, (int) m0, fb);
#pragma unroll
                    for (int p = 0; p < BN / 64; p++)
                        s_tma_load (st + A_BYTES + p * BK * 128, &tm_b, (int) n0 + p * 64, kt * BK, fb);
                }
                else {
                    unsigned char *sp = smem + s * STAGE_BYTES;
                    s_fill (sp, (const unsigned short *) A, M, K, m0, (ak_i64) kt * BK, BM, BK / 64, ptid);
                    s_fill (sp + A_BYTES, (const unsigned short *) B, K, N, (ak_i64) kt * BK, n0, BK, BN / 64, ptid);
                    /* the generic-proxy stores, visible to wgmma's async proxy */
                    asm volatile ("fence.proxy.async.shared::cta;\n" ::: "memory");
                    asm volatile ("bar.sync 1, 128;\n" ::: "memory");
                    if (ptid == 0)
                        s_bar_arrive (fb);
                }
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1;
                }
            }
        }
        return;
    }

    /* -------------------------------------------------------- consumers */
    asm volatile ("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n" (R_CONS));
    const int tid = threadIdx.x % 128, cw = wg - 1;
    float acc[MI][BN / 2];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < BN / 2; j++)
            acc[i][j] = 0.0f;

    int s = 0;
    unsigned ph = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        ak_i64 m0, n0;
        s_tile (t, tiles_m, tiles_n, &m0, &n0);
        int prev = 0;
        for (int kt = 0; kt < KT; kt++) {
            s_bar_wait (full_s + 8 * s, ph);
            const unsigned sa = base_s + s * STAGE_BYTES + cw * WGM * 128, sb = base_s + s * STAGE_BYTES + A_BYTES;
            s_wgmma_fence ();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                const ak_u64 db = s_desc (sb + kk * 16 * 128, BK * 128, 1024);
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const ak_u64 da = s_desc (sa + (kk / 4) * BM * 128 + i * 64 * 128 + (kk % 4) * 32, 16, 1024);
                    s_wgmma<BN> (acc[i], da, db, kt > 0 || kk > 0);
                }
            }
            s_wgmma_commit ();
            if (kt > 0) {
                /* the previous stage's group is done: hand it back */
                s_wgmma_wait<1> ();
                if (tid == 0)
                    s_bar_arrive (empty_s + 8 * prev);
            }
            prev = s;
            if (++s == STAGES) {
                s = 0;
                ph ^= 1;
            }
        }
        s_wgmma_wait<0> ();
        if (tid == 0)
            s_bar_arrive (empty_s + 8 * prev);
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < BN / 2; j++)
                s_reg_fence (acc[i][j]);

        /* d[4j+e]: row warp*16 + lane/4 + 8*(e/2), column 8j + 2*(lane%4) + e%2 */
        const bool pairs = N % 2 == 0;
        const ak_i64 row0 = m0 + cw * WGM + (tid / 32) * 16 + (tid % 32) / 4;
        const ak_i64 col0 = n0 + 2 * (tid % 4);
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const ak_i64 r = row0 + i * 64 + h * 8, col = col0 + j * 8;
                    if (r >= M)
                        continue;
                    ak_t *out = C + r * N + col;
                    const float v0 = acc[i][4 * j + 2 * h], v1 = acc[i][4 * j + 2 * h + 1];
                    if (pairs && col + 1 < N) {
                        ak_t v[2] = { ak_from_acc (v0), ak_from_acc (v1) };
                        *(unsigned *) out = *(const unsigned *) v;
                    }
                    else {
                        if (col < N)
                            out[0] = ak_from_acc (v0);
                        if (col + 1 < N)
                            out[1] = ak_from_acc (v1);
                    }
                }
    }
}

#else   /* float32: shared-memory FMA tiling inside the same launch */

#define FT  32                            /* a 32 x 32 tile of C per step */
#define FPER ((FT * FT + NT - 1) / NT)    /* outputs per thread */

extern "C" __global__ void __launch_bounds__ (NT)
ak_kernel (ak_cuda_args_t a, const __grid_constant__ ak_tensor_map_t tm_a,
           const __grid_constant__ ak_tensor_map_t tm_b)
{
    (void) tm_a;
    (void) tm_b;
    __shared__ float As[FT][FT + 1], Bs[FT][FT + 1];
    const ak_i64 M = a.dims[0], N = a.dims[1], K = a.dims[2];
    const ak_t *A = AK_IN (a, 0), *B = AK_IN (a, 1);
    ak_t *C = AK_OUT (a, 0);
    const ak_i64 tiles_n = (N + FT - 1) / FT, tiles = (M + FT - 1) / FT * tiles_n;
    const int tid = threadIdx.x;
    for (ak_i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const ak_i64 m0 = t / tiles_n * FT, n0 = t % tiles_n * FT;
        float acc[FPER];
#pragma unroll
        for (int e = 0; e < FPER; e++)
            acc[e] = 0.0f;
        for (ak_i64 k0 = 0; k0 < K; k0 += FT) {
            for (int c = tid; c < FT * FT; c += NT) {
                const int r = c / FT, q = c % FT;
                As[r][q] = m0 + r < M && k0 + q < K ? A[(m0 + r) * K + k0 + q] : 0.0f;
                Bs[r][q] = k0 + r < K && n0 + q < N ? B[(k0 + r) * N + n0 + q] : 0.0f;
            }
            __syncthreads ();
#pragma unroll
            for (int e = 0; e < FPER; e++) {
                const int idx = tid + e * NT;
                if (idx < FT * FT)
                    for (int kk = 0; kk < FT; kk++)
                        acc[e] += As[idx / FT][kk] * Bs[kk][idx % FT];
            }
            __syncthreads ();
        }
#pragma unroll
        for (int e = 0; e < FPER; e++) {
            const int idx = tid + e * NT;
            const ak_i64 r = m0 + idx / FT, n = n0 + idx % FT;
            if (idx < FT * FT && r < M && n < N)
                C[r * N + n] = acc[e];
        }
    }
}

#endif
