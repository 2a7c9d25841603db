#line 2 "ak_hopper_cuda.h"
/*  kernels/ak_hopper_cuda.h: the third part of the CUDA prelude, the
    Hopper (sm_90a) building blocks, after kernels/ak_kernel_cuda.h and
    kernels/ak_blocks_cuda.h (the worker embeds the three as one text; the
    prelude digest covers all of them, and AK_BLOCKS_VERSION counts
    changes to these blocks too).  Everything here is __forceinline__, for
    float16 / bfloat16 modules, and uses the common blocks of
    ak_blocks_cuda.h (ak_smem, ak_pack2, AK_WGMMA_T):
      wgmma fences, groups and descriptors (the mbarriers and TMA loads
      they use are ak_blocks_cuda.h's);
      for N = 64, 128, 256 (m64nNk16, f32 accumulators): ak_wgmma<N> (A
      K-major, B N-major), ak_wgmma_ss<N, TB> (B N-major or K-major) and
      ak_wgmma_rs<N> (A from registers); used by matmul's, fused_mlp's and
      flash_attention's wgmma candidates and split_kv_attention's
      wg_decode;
      FlashAttention-3's consumer key-tile step and the pipeline around
      it (ak_fa3_*): flash_attention's wgmma and wg_decode;
      a TMA epilogue for the GEMMs (ak_wg_store_tma over ak_tma_store_2d,
      ak_bulk_wait, ak_wg_sync; ak_swz128, where the 128-byte swizzle
      puts a chunk), used by matmul's (fused_mlp's was 3% slower with
      it), and the direct stores from the accumulators
      (ak_wg_store_direct), used by both;
      the Hopper kernels' other single instructions, so that no kernel
      needs inline PTX of its own: register budgets (ak_setmaxnreg_dec /
      _inc), async-proxy fences (ak_fence_proxy_async_shared / _global)
      and a 32-bit shared store (ak_st_shared_u32); the named barriers
      (ak_bar_sync_n, _id, ak_bar_arrive_id) are ak_blocks_cuda.h's.
    Under AK_CUDA_EMU (tests/unit/cuda_emu/emu.h, test_cuda_cand_emu)
    every block here runs on the CPU: a wgmma is computed at once from
    the shared memory its descriptors address (128-byte swizzle only; A
    from registers through the warp's lanes), so its fences, groups and
    waits are nothing, as are the register fences and budgets and the
    proxy fences; a TMA store is a copy when issued. */
#ifndef AK_HOPPER_CUDA_H
#define AK_HOPPER_CUDA_H
#if !defined(AK_REFERENCE) && (defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16))

/* ------------------------------------------------------------ Hopper (sm_90a) */
__device__ __forceinline__ void ak_wgmma_fence (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void ak_wgmma_commit (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N_>
__device__ __forceinline__ void ak_wgmma_wait (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("wgmma.wait_group.sync.aligned %0;\n" :: "n" (N_) : "memory");
#endif
}

/*  Tells the compiler a register may have changed (the wgmma wrote it
    asynchronously): no read of it moves above the wait.  ak_reg_fence_u
    likewise for a 32-bit integer register. */
__device__ __forceinline__ void ak_reg_fence (float &r)
{
#ifdef AK_CUDA_EMU
    (void) r;
#else
    asm volatile ("" : "+f" (r) :: "memory");
#endif
}

__device__ __forceinline__ void ak_reg_fence_u (unsigned &r)
{
#ifdef AK_CUDA_EMU
    (void) r;
#else
    asm volatile ("" : "+r" (r) :: "memory");
#endif
}

/*  The register budget of the calling warpgroup (every thread of it
    calls): given back down to R_, or taken up to R_. */
template <int R_>
__device__ __forceinline__ void ak_setmaxnreg_dec (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n" (R_));
#endif
}

template <int R_>
__device__ __forceinline__ void ak_setmaxnreg_inc (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n" (R_));
#endif
}

/*  The generic proxy's writes to shared (global) memory made visible to
    the async proxy (wgmma, TMA). */
__device__ __forceinline__ void ak_fence_proxy_async_shared (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void ak_fence_proxy_async_global (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("fence.proxy.async.global;\n" ::: "memory");
#endif
}

/*  Thread-block clusters (ak_kernel_cuda.h has the rank and the cluster
    barrier): one arrival on the mbarrier at the same shared address of
    the cluster's block peer (its default semantics: release at CTA
    scope); and one box of a 2-D tensor map into the same shared address
    of every block of mask (bit r: rank r), its bytes completed on the
    barrier at the same address of each. */
__device__ __forceinline__ void ak_bar_arrive_peer (unsigned bar, unsigned peer)
{
#ifdef AK_CUDA_EMU
    ak_emu_mbar_update ((ak_u64 *) ak_emu_peer_smem (peer, bar, 8), 1, 0);
#else
    asm volatile ("{\n.reg .b32 ra;\n"
                  "mapa.shared::cluster.u32 ra, %0, %1;\n"
                  "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
                  :: "r" (bar), "r" (peer) : "memory");
#endif
}

__device__ __forceinline__ void ak_tma_load_2d_multicast (unsigned dst, const ak_tensor_map_t *map, int c0, int c1,
                                                          unsigned bar, unsigned short mask)
{
#ifdef AK_CUDA_EMU
    (void) ak_emu_tma_dst (dst, map);                  /* the alignment rule, the box inside this block's memory */
    for (unsigned r = 0; r < 16; r++)
        if (mask >> r & 1u) {
            const long bytes = ak_emu_tma_load_2d (ak_emu_peer_smem (r, dst, 1), map, c0, c1);
            ak_emu_mbar_update ((ak_u64 *) ak_emu_peer_smem (r, bar, 8), 0, -bytes);
        }
#else
    asm volatile ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                  ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
                  :: "r" (dst), "l" ((ak_u64) map), "r" (c0), "r" (c1), "r" (bar), "h" (mask)
                  : "memory");
#endif
}

/*  32 bits into shared memory at a shared address. */
__device__ __forceinline__ void ak_st_shared_u32 (unsigned at, unsigned v)
{
#ifdef AK_CUDA_EMU
    memcpy (ak_emu_smem_ptr (at, 4), &v, 4);
#else
    asm volatile ("st.shared.b32 [%0], %1;\n" :: "r" (at), "r" (v) : "memory");
#endif
}

/*  Shared-memory matrix descriptor, 128-byte swizzle: start address >> 4
    (bits 0-13), LBO >> 4 (16-29), SBO >> 4 (32-45), base offset 0 (the
    stages are 1024-byte aligned), swizzle mode 1 = 128B (62-63). */
__device__ __forceinline__ ak_u64 ak_wgmma_desc (unsigned addr, unsigned lbo, unsigned sbo)
{
    return (ak_u64) ((addr & 0x3FFFF) >> 4) | (ak_u64) ((lbo >> 4) & 0x3FFF) << 16
           | (ak_u64) ((sbo >> 4) & 0x3FFF) << 32 | 1ull << 62;
}

/*  wgmma's f32 accumulators as asm operands (d[N/2] a thread) and their
    "%n" lists: AK_WG_D<n> / AK_WG_R<n> for the first n. */
#define AK_WG_D8(i) "+f" (d[i]), "+f" (d[i + 1]), "+f" (d[i + 2]), "+f" (d[i + 3]), \
                    "+f" (d[i + 4]), "+f" (d[i + 5]), "+f" (d[i + 6]), "+f" (d[i + 7])
#define AK_WG_D32  AK_WG_D8 (0), AK_WG_D8 (8), AK_WG_D8 (16), AK_WG_D8 (24)
#define AK_WG_D64  AK_WG_D32, AK_WG_D8 (32), AK_WG_D8 (40), AK_WG_D8 (48), AK_WG_D8 (56)
#define AK_WG_D128 AK_WG_D64, AK_WG_D8 (64), AK_WG_D8 (72), AK_WG_D8 (80), AK_WG_D8 (88), \
                   AK_WG_D8 (96), AK_WG_D8 (104), AK_WG_D8 (112), AK_WG_D8 (120)
#define AK_WG_R32  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15" \
                   ",%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define AK_WG_R64  AK_WG_R32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47" \
                   ",%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define AK_WG_R128 AK_WG_R64 ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79" \
                   ",%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95" \
                   ",%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111" \
                   ",%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"

/*  D[64 x N] (+)= A[64 x 16] * B[16 x N], both from shared memory: A
    K-major (imm-trans-a 0), B N-major (TB_ 1: imm-trans-b 1) or K-major
    (TB_ 0); scales +1; acc 0 overwrites D.  ak_wgmma<N> is N-major B. */
template <int N_, int TB_>
__device__ __forceinline__ void ak_wgmma_ss (float (&d)[N_ / 2], ak_u64 da, ak_u64 db, int acc);

/*  D[64 x N] += A[64 x 16] * B[16 x N], A from registers (a thread's four
    16-bit pairs: mma.sync's m16n8k16 A fragment for the warp's 16 rows), B
    N-major from shared memory; acc 0 overwrites D. */
template <int N_>
__device__ __forceinline__ void ak_wgmma_rs (float (&d)[N_ / 2], const unsigned (&a)[4], ak_u64 db, int acc);

#ifdef AK_CUDA_EMU
template <int N_, int TB_>
__device__ __forceinline__ void ak_wgmma_ss (float (&d)[N_ / 2], ak_u64 da, ak_u64 db, int acc)
{
    ak_emu_wgmma (d, N_, da, nullptr, db, TB_ != 0, acc != 0);
}

template <int N_>
__device__ __forceinline__ void ak_wgmma_rs (float (&d)[N_ / 2], const unsigned (&a)[4], ak_u64 db, int acc)
{
    ak_emu_wgmma (d, N_, 0, a, db, true, acc != 0);
}
#else
/*  N, then the operand numbers of da, db, acc (of a, b, acc for RS) */
#define AK_WGMMA_SS(N_, TB_, RL, DL, IA, IB, IC)                                                          \
    template <> __device__ __forceinline__ void ak_wgmma_ss<N_, TB_> (float (&d)[N_ / 2], ak_u64 da,     \
                                                                     ak_u64 db, int acc)                 \
    {                                                                                                    \
        asm volatile ("{\n.reg .pred p;\nsetp.ne.b32 p, " IC ", 0;\n"                                    \
                      "wgmma.mma_async.sync.aligned.m64n" #N_ "k16.f32." AK_WGMMA_T "." AK_WGMMA_T " {"   \
                      RL "}, " IA ", " IB ", p, 1, 1, 0, " #TB_ ";\n}\n"                                  \
                      : DL : "l" (da), "l" (db), "r" (acc));                                            \
    }
#define AK_WGMMA_RS(N_, RL, DL, A0, IB, IC)                                                                \
    template <> __device__ __forceinline__ void ak_wgmma_rs<N_> (float (&d)[N_ / 2], const unsigned (&a)[4], \
                                                                ak_u64 db, int acc)                       \
    {                                                                                                    \
        asm volatile ("{\n.reg .pred p;\nsetp.ne.b32 p, " IC ", 0;\n"                                    \
                      "wgmma.mma_async.sync.aligned.m64n" #N_ "k16.f32." AK_WGMMA_T "." AK_WGMMA_T " {"   \
                      RL "}, {" A0 "}, " IB ", p, 1, 1, 1;\n}\n"                                            \
                      : DL : "r" (a[0]), "r" (a[1]), "r" (a[2]), "r" (a[3]), "l" (db), "r" (acc));      \
    }
AK_WGMMA_SS (64, 1, AK_WG_R32, AK_WG_D32, "%32", "%33", "%34")
AK_WGMMA_SS (64, 0, AK_WG_R32, AK_WG_D32, "%32", "%33", "%34")
AK_WGMMA_SS (128, 1, AK_WG_R64, AK_WG_D64, "%64", "%65", "%66")
AK_WGMMA_SS (128, 0, AK_WG_R64, AK_WG_D64, "%64", "%65", "%66")
AK_WGMMA_SS (256, 1, AK_WG_R128, AK_WG_D128, "%128", "%129", "%130")
AK_WGMMA_SS (256, 0, AK_WG_R128, AK_WG_D128, "%128", "%129", "%130")
AK_WGMMA_RS (64, AK_WG_R32, AK_WG_D32, "%32,%33,%34,%35", "%36", "%37")
AK_WGMMA_RS (128, AK_WG_R64, AK_WG_D64, "%64,%65,%66,%67", "%68", "%69")
AK_WGMMA_RS (256, AK_WG_R128, AK_WG_D128, "%128,%129,%130,%131", "%132", "%133")
#undef AK_WGMMA_SS
#undef AK_WGMMA_RS
#endif

template <int N_>
__device__ __forceinline__ void ak_wgmma (float (&d)[N_ / 2], ak_u64 da, ak_u64 db, int acc)
{
    ak_wgmma_ss<N_, 1> (d, da, db, acc);
}

/* ------------------------- FlashAttention-3's consumer step (wgmma) */
/*  The key-tile step of a consumer warpgroup of FlashAttention-3's
    pipeline, shared by flash_attention's wgmma (D <= 128, run as 128) and
    split_kv_attention's wg_decode (D 256); the pipeline, its barriers and
    the turns are described in kernels/flash_attention/cuda/wgmma.cu.
    HD_ the head size the accumulators hold, BN_ keys a tile, BM_ rows of
    the block's Q tile (its panels' height), STAGES_ the rings, PP_ the
    turns of NC_ consumer warpgroups (named barriers 1 .. NC_, 256
    threads), NK_ = BN_ / 16.

    ak_fa3_ex2: 2^x in one MUFU.EX2, denormal results flushed to zero
    (exp2f adds a range check and two multiplies an element).
    ak_fa3_fence_regs: pins every write to the wgmma operands before this
    point, so no rescale or pack sinks past wgmma.fence (without it ptxas
    injected a warpgroup.arrive, C7519).
    ak_fa3_pv: O += P V over one V stage (shared address vs), committed
    as a group: P from registers, V N-major, HD_/64 panels BN_*128 bytes
    apart (LBO), 16 keys (2048 bytes) a k16 step.
    ak_fa3_tile: tile t: S = Q K^T of t and O += P V of t-1 issued
    together, the softmax of t (in the exp2 domain, the running maximum m
    in S's units) while P V runs, O rescaled, P of t packed into pa for
    the next step.  MASK: columns from lim0 (rows g) and lim1 (rows g + 8)
    on are no keys.
    ak_fa3_load_stage: the producer's load of one K or V stage (dst) of
    BN_ rows from row j0 of 3-D map coordinate z, once the consumers freed
    it (empty, the previous use's phase): PANELS_ 64-column boxes, their
    bytes expected on full. */
__device__ __forceinline__ float ak_fa3_ex2 (float x)
{
#ifdef AK_CUDA_EMU
    return ak_emu_ex2_ftz (x);
#else
    float y;
    asm ("ex2.approx.ftz.f32 %0, %1;" : "=f" (y) : "f" (x));
    return y;
#endif
}

template <int NO, int NS, int NK>
__device__ __forceinline__ void ak_fa3_fence_regs (float (&o)[NO], float (&sacc)[NS], unsigned (&pa)[NK][4])
{
#pragma unroll
    for (int i = 0; i < NO; i++)
        ak_reg_fence (o[i]);
#pragma unroll
    for (int i = 0; i < NS; i++)
        ak_reg_fence (sacc[i]);
#pragma unroll
    for (int k = 0; k < NK; k++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            ak_reg_fence_u (pa[k][e]);
}

template <int PP_>
__device__ __forceinline__ void ak_fa3_turn_wait (int cw)
{
    if (PP_)
        ak_bar_sync_id<256> (1 + cw);
}

template <int PP_, int NC_>
__device__ __forceinline__ void ak_fa3_turn_pass (int cw)
{
    if (PP_)
        ak_bar_arrive_id<256> (1 + (cw + 1) % NC_);
}

template <int HD_, int BN_, int NK_>
__device__ __forceinline__ void ak_fa3_pv (float (&o)[HD_ / 2], const unsigned (&pa)[NK_][4], unsigned vs)
{
#pragma unroll
    for (int kk = 0; kk < NK_; kk++)
        ak_wgmma_rs<HD_> (o, pa[kk], ak_wgmma_desc (vs + kk * 16 * 128, BN_ * 128, 1024), 1);
    ak_wgmma_commit ();
}

/*  What every tile step of a consumer warpgroup needs. */
typedef struct {
    unsigned qa, k_s, v_s;                 /* its Q rows, the K and V rings (shared addresses) */
    unsigned fullk, fullv, emptyk, emptyv; /* the rings' barriers */
    int tid, cw;                           /* thread in the warpgroup, consumer index */
    float sc;                              /* log2(e) / sqrt(D) */
} ak_fa3_ctx_t;

/*  A context with the K and V rings at k_s, v_s and their barriers
    derived from the block's first one, Q's, at qbar (the layout of
    ak_fa3_init below); the consumer's fields (qa, tid, cw, sc) zero. */
template <int STAGES_>
__device__ __forceinline__ ak_fa3_ctx_t ak_fa3_rings (unsigned qbar, unsigned k_s, unsigned v_s)
{
    ak_fa3_ctx_t c = {};
    c.k_s = k_s;
    c.v_s = v_s;
    c.fullk = qbar + 8;
    c.emptyk = c.fullk + 8 * STAGES_;
    c.fullv = c.emptyk + 8 * STAGES_;
    c.emptyv = c.fullv + 8 * STAGES_;
    return c;
}

template <bool MASK, int HD_, int BN_, int BM_, int STAGES_, int PP_, int NC_, int NK_>
__device__ __forceinline__ void ak_fa3_tile (const ak_fa3_ctx_t &c, int t, float (&o)[HD_ / 2],
                                             float (&sacc)[BN_ / 2], unsigned (&pa)[NK_][4], float (&m)[2],
                                             float (&l)[2], int lim0, int lim1)
{
    constexpr int T_BYTES = BN_ * HD_ * 2, NJ = BN_ / 8;
    const float ninf = __int_as_float (0xff800000);
    /* vt: the V tile of this step's P V, the previous one (at t = 0
       tile 0 with P = 0 and O = 0: one code path, no divergent wgmma) */
    const int vt = t > 0 ? t - 1 : 0, s = t % STAGES_, sv = vt % STAGES_;
    /* both waits before the fence: a wait loop between it and a
       wgmma makes ptxas inject a warpgroup.arrive (C7519); V of the
       previous tile has long landed */
    ak_bar_wait (c.fullk + 8 * s, (t / STAGES_) & 1);
    ak_bar_wait (c.fullv + 8 * sv, (vt / STAGES_) & 1);
    ak_fa3_fence_regs (o, sacc, pa);
    ak_fa3_turn_wait<PP_> (c.cw);
    ak_wgmma_fence ();
    /* S = Q K^T */
#pragma unroll
    for (int kk = 0; kk < HD_ / 16; kk++)
        ak_wgmma_ss<BN_, 0> (sacc, ak_wgmma_desc (c.qa + (kk / 4) * BM_ * 128 + (kk % 4) * 32, 16, 1024),
                             ak_wgmma_desc (c.k_s + s * T_BYTES + (kk / 4) * BN_ * 128 + (kk % 4) * 32, 16, 1024),
                             kk > 0);
    ak_wgmma_commit ();
    /* O += P V of the previous tile, beside it */
    ak_fa3_pv<HD_, BN_> (o, pa, c.v_s + sv * T_BYTES);
    ak_fa3_turn_pass<PP_, NC_> (c.cw);
    ak_wgmma_wait<1> ();
#pragma unroll
    for (int i = 0; i < BN_ / 2; i++)
        ak_reg_fence (sacc[i]);
    if (c.tid == 0)
        ak_bar_arrive (c.emptyk + 8 * s);
    /* mask (edge tiles), row max over the quad, the new running max */
    const int c0 = (c.tid & 3) * 2;
    float mx[2] = { ninf, ninf };
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float x = sacc[4 * j + e];
            if (MASK) {
                if (j * 8 + c0 + (e & 1) >= (e < 2 ? lim0 : lim1))
                    x = ninf;
                sacc[4 * j + e] = x;
            }
            mx[e >> 1] = fmaxf (mx[e >> 1], x);
        }
    float corr[2], msc[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 1));
        mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 2));
        const float mn = fmaxf (m[h], mx[h]);
        msc[h] = mn == ninf ? 0.0f : mn * c.sc;        /* a row with no key yet */
        corr[h] = ak_fa3_ex2 (m[h] * c.sc - msc[h]);
        m[h] = mn;
        l[h] *= corr[h];
    }
    /* P = exp2 (s sc - m sc), in place */
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float p = ak_fa3_ex2 (fmaf (sacc[4 * j + e], c.sc, -msc[e >> 1]));
            sacc[4 * j + e] = p;
            l[e >> 1] += p;
        }
    ak_wgmma_wait<0> ();
#pragma unroll
    for (int i = 0; i < HD_ / 2; i++)
        ak_reg_fence (o[i]);
    if (t > 0 && c.tid == 0)
        ak_bar_arrive (c.emptyv + 8 * sv);
#pragma unroll
    for (int i = 0; i < HD_ / 2; i++)
        o[i] *= corr[(i >> 1) & 1];
#pragma unroll
    for (int kk = 0; kk < NK_; kk++) {
        pa[kk][0] = ak_pack2 (sacc[8 * kk + 0], sacc[8 * kk + 1]);
        pa[kk][1] = ak_pack2 (sacc[8 * kk + 2], sacc[8 * kk + 3]);
        pa[kk][2] = ak_pack2 (sacc[8 * kk + 4], sacc[8 * kk + 5]);
        pa[kk][3] = ak_pack2 (sacc[8 * kk + 6], sacc[8 * kk + 7]);
    }
}

template <int PANELS_, int BN_>
__device__ __forceinline__ void ak_fa3_load_stage (unsigned dst, const ak_tensor_map_t *map, unsigned full,
                                                   unsigned empty, unsigned ph, int j0, int z)
{
    ak_bar_wait (empty, ph ^ 1);
    ak_bar_expect (full, PANELS_ * BN_ * 128);
#pragma unroll
    for (int p = 0; p < PANELS_; p++)
        ak_tma_load_3d (dst + p * BN_ * 128, map, p * 64, j0, z, full);
}

/*  The pipeline around ak_fa3_tile.  The block's barriers lie 8 bytes
    apart from qbar on: Q's, then STAGES_ each of full K, empty K, full V,
    empty V (full: count 1, the producer's expect_tx; empty: NC_, one
    arrival a consumer warpgroup).
    ak_fa3_init: thread 0 sets them up and prefetches the three maps;
    every thread of the block then meets at __syncthreads.
    ak_fa3_produce: the producer thread's loads: Q's PANELS_ boxes of BM_
    rows from row q_row of map coordinate z once, then ntiles K and V
    stages of BN_ keys from key j_base.
    ak_fa3_begin: a consumer warpgroup's accumulators and running maxima
    and sums zeroed, Q waited for, and (PP_) the first turn given to
    warpgroup 0.
    ak_fa3_drain: a consumer warpgroup after its nt key tiles: the last
    tile's P V, then the block's tiles nt .. ntiles-1 passed on (waited
    for and released, their turns taken: every warpgroup takes ntiles
    turns), and warpgroup 0 the last warpgroup's last pass. */
template <int STAGES_, int NC_>
__device__ __forceinline__ void ak_fa3_init (unsigned qbar, const ak_tensor_map_t *tm_q, const ak_tensor_map_t *tm_k,
                                             const ak_tensor_map_t *tm_v)
{
    if (threadIdx.x == 0) {
        const ak_fa3_ctx_t c = ak_fa3_rings<STAGES_> (qbar, 0, 0);
        ak_bar_init (qbar, 1);
        for (int s = 0; s < STAGES_; s++) {
            ak_bar_init (c.fullk + 8 * s, 1);
            ak_bar_init (c.emptyk + 8 * s, NC_);
            ak_bar_init (c.fullv + 8 * s, 1);
            ak_bar_init (c.emptyv + 8 * s, NC_);
        }
        ak_mbar_fence_init ();
        ak_tma_prefetch (tm_q);
        ak_tma_prefetch (tm_k);
        ak_tma_prefetch (tm_v);
    }
    __syncthreads ();
}

template <int PANELS_, int BN_, int BM_, int STAGES_>
__device__ __forceinline__ void ak_fa3_produce (unsigned q_s, unsigned k_s, unsigned v_s, unsigned qbar,
                                                const ak_tensor_map_t *tm_q, const ak_tensor_map_t *tm_k,
                                                const ak_tensor_map_t *tm_v, int q_row, int j_base, int z, int ntiles)
{
    constexpr int T_BYTES = BN_ * PANELS_ * 128;       /* one K or V stage */
    const ak_fa3_ctx_t c = ak_fa3_rings<STAGES_> (qbar, k_s, v_s);
    ak_bar_expect (qbar, BM_ * PANELS_ * 128);
#pragma unroll
    for (int p = 0; p < PANELS_; p++)
        ak_tma_load_3d (q_s + p * BM_ * 128, tm_q, p * 64, q_row, z, qbar);
    for (int t = 0; t < ntiles; t++) {
        const int s = t % STAGES_;
        const unsigned ph = (t / STAGES_) & 1;
        ak_fa3_load_stage<PANELS_, BN_> (c.k_s + s * T_BYTES, tm_k, c.fullk + 8 * s, c.emptyk + 8 * s, ph,
                                         j_base + t * BN_, z);
        ak_fa3_load_stage<PANELS_, BN_> (c.v_s + s * T_BYTES, tm_v, c.fullv + 8 * s, c.emptyv + 8 * s, ph,
                                         j_base + t * BN_, z);
    }
}

template <int HD_, int NK_, int PP_, int NC_>
__device__ __forceinline__ void ak_fa3_begin (int cw, unsigned qbar, float (&o)[HD_ / 2], unsigned (&pa)[NK_][4],
                                              float (&m)[2], float (&l)[2])
{
#pragma unroll
    for (int i = 0; i < HD_ / 2; i++)
        o[i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < NK_; kk++)
        pa[kk][0] = pa[kk][1] = pa[kk][2] = pa[kk][3] = 0u;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        m[h] = __int_as_float (0xff800000);
        l[h] = 0.0f;
    }
    ak_bar_wait (qbar, 0);
    if (cw == NC_ - 1)
        ak_fa3_turn_pass<PP_, NC_> (cw);                /* the first turn is warpgroup 0's */
}

template <int HD_, int BN_, int STAGES_, int PP_, int NC_, int NK_>
__device__ __forceinline__ void ak_fa3_drain (const ak_fa3_ctx_t &c, int nt, int ntiles, float (&o)[HD_ / 2],
                                              float (&sacc)[BN_ / 2], unsigned (&pa)[NK_][4])
{
    constexpr int T_BYTES = BN_ * HD_ * 2;
    if (nt > 0) {
        const int s = (nt - 1) % STAGES_;
        ak_bar_wait (c.fullv + 8 * s, ((nt - 1) / STAGES_) & 1);
        ak_fa3_fence_regs (o, sacc, pa);
        ak_wgmma_fence ();
        ak_fa3_pv<HD_, BN_> (o, pa, c.v_s + s * T_BYTES);
        ak_wgmma_wait<0> ();
#pragma unroll
        for (int i = 0; i < HD_ / 2; i++)
            ak_reg_fence (o[i]);
        if (c.tid == 0)
            ak_bar_arrive (c.emptyv + 8 * s);
    }
    for (int t = nt; t < ntiles; t++) {
        const int s = t % STAGES_;
        const unsigned ph = (t / STAGES_) & 1;
        ak_bar_wait (c.fullk + 8 * s, ph);
        if (c.tid == 0)
            ak_bar_arrive (c.emptyk + 8 * s);
        ak_bar_wait (c.fullv + 8 * s, ph);
        if (c.tid == 0)
            ak_bar_arrive (c.emptyv + 8 * s);
        ak_fa3_turn_wait<PP_> (c.cw);
        ak_fa3_turn_pass<PP_, NC_> (c.cw);
    }
    if (c.cw == 0)
        ak_fa3_turn_wait<PP_> (c.cw);                   /* the last warpgroup's last pass */
}

/* ------------------------------------------ the wgmma GEMMs' TMA epilogue */

/*  Where TMA's 128-byte swizzle puts 16-byte chunk ch (8 elements) of
    128-byte row r of a 1024-byte aligned panel: the byte offset. */
__device__ __forceinline__ unsigned ak_swz128 (int r, int ch)
{
    return (unsigned) (r * 128 + ((ch ^ (r & 7)) << 4));
}

/*  The 128 threads of consumer warpgroup cw (0 or 1) meet at named barrier
    2 + cw (1 is the producers'; immediates, so ptxas reserves only these). */
__device__ __forceinline__ void ak_wg_sync (int cw)
{
    if (cw == 0)
        ak_bar_sync_n<2, 128> ();
    else
        ak_bar_sync_n<3, 128> ();
}

/*  A 2-D box from shared memory at src into the tensor behind map at
    {c0, c1}, one bulk group (TMA leaves out what lies past the tensor). */
__device__ __forceinline__ void ak_tma_store_2d (const ak_tensor_map_t *map, int c0, int c1, unsigned src)
{
#ifdef AK_CUDA_EMU
    ak_emu_tma_store_2d (map, c0, c1, src);
#else
    asm volatile ("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                  "cp.async.bulk.commit_group;\n"
                  :: "l" ((ak_u64) map), "r" (c0), "r" (c1), "r" (src) : "memory");
#endif
}

/*  Until at most N_ of this thread's bulk groups still read shared memory
    (READ_ true), or are still in flight at all (false: their writes done). */
template <int N_, bool READ_>
__device__ __forceinline__ void ak_bulk_wait (void)
{
#ifndef AK_CUDA_EMU
    if (READ_)
        asm volatile ("cp.async.bulk.wait_group.read %0;\n" :: "n" (N_) : "memory");
    else
        asm volatile ("cp.async.bulk.wait_group %0;\n" :: "n" (N_) : "memory");
#endif
}

/*  Stores a consumer warpgroup's m64nNk16 accumulators (MI_ slices of 64
    rows, N_ columns) straight from registers into the rows x cols
    row-major C, its first row r0 and column c0: pairs of elements where
    cols is even, guarded at every edge.  value(i, e) gives element e of
    slice i (called only for rows inside C). */
template <int MI_, int N_, typename F>
__device__ __forceinline__ void ak_wg_store_direct (F value, ak_t *C, ak_i64 rows, ak_i64 cols, ak_i64 r0, ak_i64 c0,
                                                    int tid)
{
    /* d[4j+e]: row warp*16 + lane/4 + 8*(e/2), column 8j + 2*(lane%4) + e%2 */
    const bool pairs = cols % 2 == 0;
    const ak_i64 row0 = r0 + (tid / 32) * 16 + (tid % 32) / 4;
    const ak_i64 col0 = c0 + 2 * (tid % 4);
#pragma unroll
    for (int i = 0; i < MI_; i++)
#pragma unroll
        for (int j = 0; j < N_ / 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const ak_i64 r = row0 + i * 64 + h * 8, col = col0 + j * 8;
                if (r >= rows)
                    continue;
                const int e = 4 * j + 2 * h;
                const float v0 = value (i, e), v1 = value (i, e + 1);
                ak_t *out = C + r * cols + col;
                if (pairs && col + 1 < cols) {
                    ak_t v[2] = { ak_from_acc (v0), ak_from_acc (v1) };
                    *(unsigned *) out = *(const unsigned *) v;
                }
                else {
                    if (col < cols)
                        out[0] = ak_from_acc (v0);
                    if (col + 1 < cols)
                        out[1] = ak_from_acc (v1);
                }
            }
}

/*  Stores consumer warpgroup cw's m64nNk16 accumulators (MI_ slices of 64
    rows, N_ columns: the output's rows r0.., columns c0..) through shared
    memory: 64 x 64 chunks, each written into one of the warpgroup's two
    AK_WG_CHUNK-byte buffers at cbuf (128-byte swizzle, the layout of a
    {64, 64} box of map: conflict-free 4-byte stores), fenced for the
    async proxy and stored with TMA by thread 0, which first waits until
    the store that last used the buffer has read it.  value(i, e) gives
    element e of slice i's accumulators (a transform such as a gated
    product goes there); nc counts the warpgroup's chunks across calls
    (which buffer is next).  The stores stay in flight: wait for them
    (ak_bulk_wait) before the block exits or before their data is read. */
#define AK_WG_CHUNK (64 * 128)
template <int MI_, int N_, typename F>
__device__ __forceinline__ void ak_wg_store_tma (F value, const ak_tensor_map_t *map, int r0, int c0, unsigned cbuf,
                                                 int cw, int tid, int &nc)
{
    /* d[4j+e]: row warp*16 + lane/4 + 8*(e/2), column 8j + 2*(lane%4) + e%2 */
    const int rr = (tid / 32) * 16 + (tid % 32) / 4;
#pragma unroll
    for (int i = 0; i < MI_; i++)
#pragma unroll
        for (int c = 0; c < N_ / 64; c++, nc++) {
            const unsigned buf = cbuf + (nc & 1) * AK_WG_CHUNK;
            if (tid == 0)
                ak_bulk_wait<1, true> ();
            ak_wg_sync (cw);
#pragma unroll
            for (int jj = 0; jj < 8; jj++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = rr + 8 * h, e = 4 * (c * 8 + jj) + 2 * h;
                    const unsigned v = ak_pack2 (value (i, e), value (i, e + 1));
                    const unsigned at = buf + ak_swz128 (r, jj) + (tid % 4) * 4;
                    ak_st_shared_u32 (at, v);
                }
            ak_fence_proxy_async_shared ();
            ak_wg_sync (cw);
            if (tid == 0)
                ak_tma_store_2d (map, c0 + c * 64, r0 + i * 64, buf);
        }
}

#endif /* float16 / bfloat16, not a reference */
#endif
