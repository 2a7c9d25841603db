#line 2 "ak_blocks_cuda.h"
/*  kernels/ak_blocks_cuda.h: the second prelude, building blocks that
    several catalog kernels share.

    The worker prepends it to every CUDA kernel source right after
    kernels/ak_kernel_cuda.h and before kernels/ak_hopper_cuda.h (the
    Hopper blocks; the three are embedded as one text, so the prelude
    digest, which is part of every compile cache key and recorded with
    every installed profile entry, covers all of them).  A profile entry
    carries the prelude text it was built with, so changing a block here
    changes no installed kernel: new compilations get new keys, old entries
    keep compiling from their own copy.  AK_BLOCKS_VERSION counts changes
    to what a block does (not to its comments); a kernel may test it.

    Everything here is __forceinline__: a kernel that does not call a block
    emits none of its code, so the sm_90a-only instructions below cost
    nothing to kernels built for other architectures.

    Blocks, all for float16 / bfloat16 modules:
      tensor cores with mma.sync (sm_80 and newer): ak_cp_async16 /
      ak_cp_commit / ak_cp_wait (cp.async), ak_cp_rows (a tile of rows
      into padded shared memory: fa2, tile_decode; ak_cp_cols, some of
      their columns: tile_decode), ak_ldmatrix_x4[_trans],
      ak_mma_16816 (m16n8k16, f32 accumulators) and ak_pack2; used by
      matmul's mma, fused_mlp's tc and flash_attention's fa2 candidates;
      a flash-attention key tile's two products on them (ak_fa_scores,
      ak_fa_pv), used by fa2 and split_kv_attention's tile_decode; the
      decode kernels' split merge (ak_split_merge: tile_decode,
      wg_decode, tma_decode);
      shared-memory addresses (ak_smem), for them and the Hopper blocks
      (sm_90a: wgmma, FlashAttention-3's key-tile step) of
      kernels/ak_hopper_cuda.h; named barriers (ak_bar_sync_n,
      ak_bar_sync_id, ak_bar_arrive_id: the split merge's and the Hopper
      kernels');
      shared-memory mbarriers and TMA loads (sm_90): by 32-bit address
      (ak_bar_*, ak_tma_load_2d / _3d: the Hopper kit's pipelines), and
      by pointer (ak_mbar_*, ak_tma_into_2d / _3d, ak_mbar_fence_init,
      ak_tma_prefetch: matmul's skinny, split_kv_attention's tma_decode);
    and, for any kernel: AK_DYNAMIC_SHARED (the launch's dynamic shared
    memory as an array), ak_dynamic_smem_size, ak_nsmid (the SM count),
    and ak_split_slices and
    ak_last_arrival (a split tile's slices and the split merge's
    handshake; used by split_kv_attention's decode kernels), ak_warp_sum,
    ak_attn_row and ak_attn_plain (attention rows a warp each: the two
    attention baselines, and the fallback path of fa2 and wgmma);
    and, for device references (-DAK_REFERENCE, float64):
      ak_ref_gemm64, a 64x64 tile of one or two float64 products sharing
      their left operand, through shared memory, and ak_ref_store64; used
      by matmul's and fused_mlp's references. */
#ifndef AK_BLOCKS_CUDA_H
#define AK_BLOCKS_CUDA_H

#define AK_BLOCKS_VERSION 11

/*  Under AK_CUDA_EMU (tests/unit/cuda_emu/emu.h: a kernel run on the CPU
    by test_cuda_cand_emu) the mma.sync blocks, the pointer forms of the
    mbarriers and TMA loads, AK_DYNAMIC_SHARED and
    ak_dynamic_smem_size go through the emulation instead of PTX: the same
    results (cp.async copies at once; its groups and waits are nothing),
    no speed.  So do the address forms and the named barriers, on emu.h's
    window onto the block's shared memory, and kernels/ak_hopper_cuda.h's
    blocks (wgmma among them). */

/*  The launch's dynamic shared memory as an array T name[] (16-byte
    aligned), and its size in bytes. */
#ifdef AK_CUDA_EMU
#define AK_DYNAMIC_SHARED(T, name) T *name = (T *) ak_emu_dynamic_smem ()
__device__ __forceinline__ unsigned ak_dynamic_smem_size (void)
{
    return ak_emu_dynamic_smem_size ();
}
#else
#define AK_DYNAMIC_SHARED(T, name) extern __shared__ __align__ (16) T name[]
__device__ __forceinline__ unsigned ak_dynamic_smem_size (void)
{
    unsigned r;
    asm ("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}
#endif

/*  The device's SM count (%nsmid; the emulation's is 132, an H200's). */
__device__ __forceinline__ unsigned ak_nsmid (void)
{
#ifdef AK_CUDA_EMU
    return 132;
#else
    unsigned r;
    asm ("mov.u32 %0, %%nsmid;" : "=r" (r));
    return r;
#endif
}

/*  A split_kv_attention decode block's KV head and query group (ref.c's
    grouped-query rule: KV head kvh serves query heads h_lo .. h_hi-1),
    from the argument block (dims B, Q, HQ, HK, L, D, mask) and
    blockIdx.z = b*HK + kvh: the group's rows G = (h_hi - h_lo)*Q,
    head-major, so contiguous in q and o from q and o below; the keys the
    sequence holds (len: mask 3's ragged length, else L); its KV head's
    keys and values.  The buffers' counts are below 2^28 elements (the
    spec's limit): 32-bit divisions.  ak_decode_group is blockIdx.z's
    group, ak_decode_group_at group bk's.  Used by tile_decode, stream_decode,
    wg_decode and tma_decode, with ak_decode_nkeys and ak_decode_key_range
    (the keys a row, and a range of rows, sees) and ak_decode_plain (their
    plain path). */
typedef struct {
    ak_i64 Q, HQ, HK, L, D, mask, bk, b, h_lo, G, len;
    bool causal;                                      /* mask 2 or 3 */
    const ak_t *q, *kb, *vb;                          /* q: the group's first row */
    ak_t *o;                                          /* the group's first output row */
} ak_decode_group_t;

__device__ __forceinline__ ak_decode_group_t ak_decode_group_at (const ak_cuda_args_t &a, ak_i64 bk)
{
    ak_decode_group_t g;
    g.Q = a.dims[1];
    g.HQ = a.dims[2];
    g.HK = a.dims[3];
    g.L = a.dims[4];
    g.D = a.dims[5];
    g.mask = a.dims[6];
    g.bk = bk;
    g.b = (ak_u32) g.bk / (ak_u32) g.HK;
    const ak_i64 kvh = (ak_u32) g.bk % (ak_u32) g.HK;
    g.h_lo = (ak_u32) (kvh * g.HQ + g.HK - 1) / (ak_u32) g.HK;
    const ak_i64 h_hi = (ak_u32) ((kvh + 1) * g.HQ + g.HK - 1) / (ak_u32) g.HK;
    g.G = (h_hi - g.h_lo) * g.Q;
    g.causal = g.mask == 2 || g.mask == 3;
    g.len = g.mask == 3 ? g.L - (ak_i64) ((ak_u32) ((ak_u32) g.b * 2654435761u) % (ak_u32) (g.L + 1)) : g.L;
    g.q = AK_IN (a, 0) + (g.b * g.HQ + g.h_lo) * g.Q * g.D;
    g.o = AK_OUT (a, 0) + (g.b * g.HQ + g.h_lo) * g.Q * g.D;
    g.kb = AK_IN (a, 1) + g.bk * g.L * g.D;
    g.vb = AK_IN (a, 2) + g.bk * g.L * g.D;
    return g;
}

__device__ __forceinline__ ak_decode_group_t ak_decode_group (const ak_cuda_args_t &a)
{
    return ak_decode_group_at (a, blockIdx.z);
}

/*  The keys row r of a decode group sees (its token is r % Q: causal, the
    last len - Q + 1 + token keys; else all L; never below 0). */
__device__ __forceinline__ ak_i64 ak_decode_nkeys (const ak_decode_group_t &g, ak_i64 r)
{
    const ak_i64 n = g.causal ? g.len - g.Q + 1 + (ak_i64) ((ak_u32) r % (ak_u32) g.Q) : g.L;
    return n > 0 ? n : 0;
}

/*  The fewest and the most keys rows [lo, hi) of a decode group see (0
    for an empty range). */
__device__ __forceinline__ void ak_decode_key_range (const ak_decode_group_t &g, ak_i64 lo, ak_i64 hi, ak_i64 *kmin,
                                                     ak_i64 *kmax)
{
    *kmin = *kmax = 0;
    if (hi <= lo)
        return;
    if (!g.causal) {
        *kmin = *kmax = g.L;
        return;
    }
    const ak_i64 Q = g.Q, t0 = (ak_u32) lo % (ak_u32) Q, t1 = (ak_u32) (hi - 1) % (ak_u32) Q;
    const bool wrap = hi - lo >= Q || t1 < t0;
    const ak_i64 lo_n = g.len - Q + 1 + (wrap ? 0 : t0), hi_n = g.len - Q + 1 + (wrap ? Q - 1 : t1);
    *kmin = lo_n > 0 ? lo_n : 0;
    *kmax = hi_n > 0 ? hi_n : 0;
}

/*  The slices of a split tile: steps (of keys, of key tiles; none when
    negative) over at most gridy blocks, or one slice when ok is false
    (the partials would not fit): per steps a slice, nsplit slices, none
    empty (blocks at or past nsplit have nothing to do). */
__device__ __forceinline__ void ak_split_slices (ak_i64 steps, ak_i64 gridy, bool ok, ak_i64 *per, ak_i64 *nsplit)
{
    if (steps < 0)
        steps = 0;
    ak_i64 ns = !ok ? 1 : gridy < steps ? gridy : steps;
    if (ns < 1)
        ns = 1;
    *per = (ak_u32) (steps + ns - 1) / (ak_u32) ns;
    *nsplit = *per > 0 ? (ak_u32) (steps + *per - 1) / (ak_u32) *per : 1;
}

/*  The handshake of a split merge: every block of a group (the splits of
    one tile) calls it with all its threads (a 1-D block) once its partial
    is written, last pointing to an int in the block's shared memory; true
    in the block that arrived last of n, which then sees every other
    block's partial, with the group's counter set back to 0 for the next
    launch.  One group a counter; launches of one module must not overlap.
    One atomic at gpu scope with release and acquire semantics, by thread
    0: the block's barrier orders its threads' writes before the release
    (cumulativity), and the acquire before the last block's reads after
    the barrier that follows; no thread waits on a fence of its own (the
    form with a fence by every thread: tma_decode's split merge, handshake
    and all, cost 2.5 of b1_32k's 50.6 us on the H100, docs/benchmarks.md
    session 40). */
__device__ __forceinline__ bool ak_last_arrival (unsigned int *cnt, unsigned int n, int *last)
{
    __syncthreads ();
    if (threadIdx.x == 0) {
        unsigned int done;
#ifdef AK_CUDA_EMU
        done = atomicAdd (cnt, 1u);
#else
        asm volatile ("atom.acq_rel.gpu.add.u32 %0, [%1], 1;\n" : "=r" (done) : "l" (cnt) : "memory");
#endif
        *last = done == n - 1;
        if (*last)
            *cnt = 0;
    }
    __syncthreads ();
    return *last != 0;
}

/*  Attention the plain way, a warp a query row, the online softmax in
    float over one key at a time (the dot product reduced across the warp
    with shuffles), lane l holding dimensions l, l+32, ... (D <= 256):
    ak_attn_row computes row q (D values) over keys k[0..n) and values
    v[0..n) (rows of D) into o, 0 where the row sees no key (n < 1);
    ak_attn_plain takes flash_attention's q, k, v, o [B][H][S][D] (dims B,
    H, S, D, mask; mask 2 causal), rows [blockIdx.x * ROWS_, + ROWS_) of
    head blockIdx.y with NW_ warps.  Used by flash_attention's and
    split_kv_attention's baselines and by fa2's and wgmma's fallback path;
    not in references (ak_to_acc is the kernels'). */
#ifndef AK_REFERENCE
#define AK_ATTN_MAXC 8                                  /* D <= 32 * AK_ATTN_MAXC */

__device__ __forceinline__ float ak_warp_sum (float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync (0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ void ak_attn_row (const ak_t *q, const ak_t *k, const ak_t *v, ak_t *o, ak_i64 n,
                                             ak_i64 D, int lane)
{
    const float scale = 1.0f / sqrtf ((float) D);
    float qr[AK_ATTN_MAXC], acc[AK_ATTN_MAXC];
#pragma unroll
    for (int c = 0; c < AK_ATTN_MAXC; c++) {
        qr[c] = lane + 32 * c < D ? ak_to_acc (q[lane + 32 * c]) * scale : 0.0f;
        acc[c] = 0.0f;
    }
    float m = __int_as_float (0xff800000), l = 0.0f;    /* -inf */
    for (ak_i64 j = 0; j < n; j++) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < AK_ATTN_MAXC; c++)
            if (lane + 32 * c < D)
                s += qr[c] * ak_to_acc (k[j * D + lane + 32 * c]);
        s = ak_warp_sum (s);
        const float mn = fmaxf (m, s);
        const float corr = expf (m - mn), p = expf (s - mn);
        m = mn;
        l = l * corr + p;
#pragma unroll
        for (int c = 0; c < AK_ATTN_MAXC; c++)
            if (lane + 32 * c < D)
                acc[c] = acc[c] * corr + p * ak_to_acc (v[j * D + lane + 32 * c]);
    }
#pragma unroll
    for (int c = 0; c < AK_ATTN_MAXC; c++)
        if (lane + 32 * c < D)
            o[lane + 32 * c] = ak_from_acc (l > 0.0f ? acc[c] / l : 0.0f);
}

/*  The plain path of a decode kernel: rows r0 .. r0+nr-1 of group g, a
    warp a row (this warp of nw), each over all the keys it sees. */
__device__ __forceinline__ void ak_decode_plain (const ak_decode_group_t &g, ak_i64 r0, ak_i64 nr, int warp, int nw,
                                                 int lane)
{
    for (ak_i64 r = r0 + warp; r < r0 + nr; r += nw)
        ak_attn_row (g.q + r * g.D, g.kb, g.vb, g.o + r * g.D, ak_decode_nkeys (g, r), g.D, lane);
}

template <int ROWS_, int NW_>
__device__ void ak_attn_plain (const ak_cuda_args_t &a)
{
    const ak_i64 S = a.dims[2], D = a.dims[3], mask = a.dims[4];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const ak_i64 bh = blockIdx.y;
    if (D > 32 * AK_ATTN_MAXC)
        return;
    for (int r = warp; r < ROWS_; r += NW_) {
        const ak_i64 i = (ak_i64) blockIdx.x * ROWS_ + r;
        if (i >= S)
            return;
        ak_attn_row (AK_IN (a, 0) + (bh * S + i) * D, AK_IN (a, 1) + bh * S * D, AK_IN (a, 2) + bh * S * D,
                     AK_OUT (a, 0) + (bh * S + i) * D, mask == 2 ? i + 1 : S, D, lane);
    }
}
#endif

#if !defined(AK_REFERENCE) && (defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16))

#ifdef AK_DTYPE_FLOAT16
#define AK_WGMMA_T "f16"
#else
#define AK_WGMMA_T "bf16"
#endif

/* ------------------------------------------------------------ common */

/*  The shared-memory address of p, as PTX's .shared operands take it. */
__device__ __forceinline__ unsigned ak_smem (const void *p)
{
#ifdef AK_CUDA_EMU
    return ak_emu_smem_addr (p);                       /* emu.h's window onto the block's shared memory */
#else
    return (unsigned) __cvta_generic_to_shared (p);
#endif
}

/*  Named barriers: N_ threads meet at barrier ID_ (immediates, so ptxas
    reserves only the barriers used), or at barrier id (a register);
    ak_bar_arrive_id counts this thread's warp towards id's N_ without
    waiting. */
template <int ID_, int N_>
__device__ __forceinline__ void ak_bar_sync_n (void)
{
#ifdef AK_CUDA_EMU
    ak_emu_named_bar (ID_, N_, true);
#else
    asm volatile ("bar.sync %0, %1;\n" :: "n" (ID_), "n" (N_) : "memory");
#endif
}

template <int N_>
__device__ __forceinline__ void ak_bar_sync_id (unsigned id)
{
#ifdef AK_CUDA_EMU
    ak_emu_named_bar (id, N_, true);
#else
    asm volatile ("bar.sync %0, %1;\n" :: "r" (id), "n" (N_) : "memory");
#endif
}

template <int N_>
__device__ __forceinline__ void ak_bar_arrive_id (unsigned id)
{
#ifdef AK_CUDA_EMU
    ak_emu_named_bar (id, N_, false);
#else
    asm volatile ("bar.arrive %0, %1;\n" :: "r" (id), "n" (N_) : "memory");
#endif
}

/* ------------------------------------ mbarriers and TMA loads (sm_90) */

/*  Shared-memory mbarriers and TMA loads: by address (ak_bar_*,
    ak_tma_load_2d / _3d: the Hopper kit's pipelines in
    kernels/ak_hopper_cuda.h) and by pointer (ak_mbar_*, ak_tma_into_2d /
    _3d, ak_mbar_fence_init, ak_tma_prefetch: matmul's skinny and
    split_kv_attention's tma_decode, which also run under the CPU
    emulation).  A TMA load's c0 is the innermost coordinate; its bytes
    complete on bar.  Under AK_CUDA_EMU the pointer forms are emulated: a
    barrier's 8 bytes hold its pending arrivals, its count, the parity of
    the phases completed and the transaction bytes still expected (emu.h's
    ak_emu_mbar_update: a phase completes when neither arrivals nor bytes
    are pending); one thread runs at a time, a wait spins (__nanosleep:
    the other threads run), a copy is done when issued (emu.h's
    ak_emu_tma_load_2d / _3d) and takes its box's bytes off the barrier;
    the fence and the prefetch are nothing. */
#ifndef AK_CUDA_EMU
__device__ __forceinline__ void ak_bar_init (unsigned bar, unsigned count)
{
    asm volatile ("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r" (bar), "r" (count) : "memory");
}

__device__ __forceinline__ void ak_bar_wait (unsigned bar, unsigned parity)
{
    unsigned done;
    do {
        asm volatile ("{\n.reg .pred p;\n"
                      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                      "selp.u32 %0, 1, 0, p;\n}\n"
                      : "=r" (done) : "r" (bar), "r" (parity) : "memory");
    } while (!done);
}

__device__ __forceinline__ void ak_bar_arrive (unsigned bar)
{
    asm volatile ("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r" (bar) : "memory");
}

__device__ __forceinline__ void ak_bar_expect (unsigned bar, unsigned bytes)
{
    asm volatile ("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r" (bar), "r" (bytes) : "memory");
}

/*  One box of a 2-D tensor map into shared memory; c0 the innermost
    coordinate.  Completes bytes on bar. */
__device__ __forceinline__ void ak_tma_load_2d (unsigned dst, const ak_tensor_map_t *map, int c0, int c1, unsigned bar)
{
    asm volatile ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                  " [%0], [%1, {%2, %3}], [%4];\n"
                  :: "r" (dst), "l" ((ak_u64) map), "r" (c0), "r" (c1), "r" (bar) : "memory");
}

/*  One box of a 3-D tensor map into shared memory; c0 the innermost
    coordinate.  Completes its bytes on bar. */
__device__ __forceinline__ void ak_tma_load_3d (unsigned dst, const ak_tensor_map_t *map, int c0, int c1, int c2,
                                                unsigned bar)
{
    asm volatile ("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                  " [%0], [%1, {%2, %3, %4}], [%5];\n"
                  :: "r" (dst), "l" ((ak_u64) map), "r" (c0), "r" (c1), "r" (c2), "r" (bar) : "memory");
}
#endif

__device__ __forceinline__ void ak_mbar_init (ak_u64 *bar, unsigned count)
{
#ifdef AK_CUDA_EMU
    ak_emu_mbar_set (bar, count, count, 0, 0);
#else
    ak_bar_init (ak_smem (bar), count);
#endif
}

__device__ __forceinline__ void ak_mbar_arrive (ak_u64 *bar)
{
#ifdef AK_CUDA_EMU
    ak_emu_mbar_update (bar, 1, 0);
#else
    ak_bar_arrive (ak_smem (bar));
#endif
}

/*  Returns once the phase of the given parity has completed. */
__device__ __forceinline__ void ak_mbar_wait (ak_u64 *bar, unsigned parity)
{
#ifdef AK_CUDA_EMU
    while (((*bar >> 32) & 1u) == parity)
        __nanosleep (32);
#else
    ak_bar_wait (ak_smem (bar), parity);
#endif
}

/*  An arrival that also tells bar to expect bytes of copies. */
__device__ __forceinline__ void ak_mbar_expect (ak_u64 *bar, unsigned bytes)
{
#ifdef AK_CUDA_EMU
    ak_emu_mbar_update (bar, 1, (long) bytes);
#else
    ak_bar_expect (ak_smem (bar), bytes);
#endif
}

/*  The barriers' initialisation made visible to the async proxy (the TMA
    unit), between their init and the block's barrier. */
__device__ __forceinline__ void ak_mbar_fence_init (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void ak_tma_prefetch (const ak_tensor_map_t *map)
{
#ifdef AK_CUDA_EMU
    (void) map;
#else
    asm volatile ("prefetch.tensormap [%0];\n" :: "l" ((ak_u64) map) : "memory");
#endif
}

__device__ __forceinline__ void ak_tma_into_2d (void *dst, const ak_tensor_map_t *map, int c0, int c1, ak_u64 *bar)
{
#ifdef AK_CUDA_EMU
    ak_emu_mbar_update (bar, 0, -ak_emu_tma_load_2d (dst, map, c0, c1));
#else
    ak_tma_load_2d (ak_smem (dst), map, c0, c1, ak_smem (bar));
#endif
}

__device__ __forceinline__ void ak_tma_into_3d (void *dst, const ak_tensor_map_t *map, int c0, int c1, int c2,
                                                ak_u64 *bar)
{
#ifdef AK_CUDA_EMU
    ak_emu_mbar_update (bar, 0, -ak_emu_tma_load_3d (dst, map, c0, c1, c2));
#else
    ak_tma_load_3d (ak_smem (dst), map, c0, c1, c2, ak_smem (bar));
#endif
}

#ifdef AK_CUDA_EMU
/*  The address forms under the emulation: the pointer forms on emu.h's
    window (an address outside the block's shared memory, or a swizzled
    box not 1024-byte aligned, ends the run with a message). */
__device__ __forceinline__ ak_u64 *ak_emu_bar (unsigned bar)
{
    return (ak_u64 *) ak_emu_smem_ptr (bar, 8);
}

__device__ __forceinline__ void ak_bar_init (unsigned bar, unsigned count)
{
    ak_mbar_init (ak_emu_bar (bar), count);
}

__device__ __forceinline__ void ak_bar_wait (unsigned bar, unsigned parity)
{
    ak_mbar_wait (ak_emu_bar (bar), parity);
}

__device__ __forceinline__ void ak_bar_arrive (unsigned bar)
{
    ak_mbar_arrive (ak_emu_bar (bar));
}

__device__ __forceinline__ void ak_bar_expect (unsigned bar, unsigned bytes)
{
    ak_mbar_expect (ak_emu_bar (bar), bytes);
}

__device__ __forceinline__ void ak_tma_load_2d (unsigned dst, const ak_tensor_map_t *map, int c0, int c1, unsigned bar)
{
    ak_tma_into_2d (ak_emu_tma_dst (dst, map), map, c0, c1, ak_emu_bar (bar));
}

__device__ __forceinline__ void ak_tma_load_3d (unsigned dst, const ak_tensor_map_t *map, int c0, int c1, int c2,
                                                unsigned bar)
{
    ak_tma_into_3d (ak_emu_tma_dst (dst, map), map, c0, c1, c2, ak_emu_bar (bar));
}
#endif

/* ---------------------------------------- tensor cores, mma.sync (sm_80) */

#ifdef AK_DTYPE_FLOAT16
#define AK_MMA_T "f16"
#else
#define AK_MMA_T "bf16"
#endif

/*  Two floats as a packed pair of ak_t (round to nearest even): the
    register an mma.sync A fragment or a paired store takes. */
__device__ __forceinline__ unsigned ak_pack2 (float x, float y)
{
#ifdef AK_DTYPE_FLOAT16
    __half2 h = __floats2half2_rn (x, y);
#else
    __nv_bfloat162 h = __floats2bfloat162_rn (x, y);
#endif
    return *(unsigned *) &h;
}

/*  16 bytes global -> shared, asynchronously (cp.async.cg: L2 only); valid
    false zero-fills the 16 bytes (src-size 0: src must still be a valid
    address). */
__device__ __forceinline__ void ak_cp_async16 (void *dst, const void *src, bool valid)
{
#ifdef AK_CUDA_EMU
    if (valid)
        memcpy (dst, src, 16);
    else
        memset (dst, 0, 16);
#else
    asm volatile ("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                  :: "r" (ak_smem (dst)), "l" (src), "r" (valid ? 16 : 0));
#endif
}

__device__ __forceinline__ void ak_cp_commit (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("cp.async.commit_group;\n" ::);
#endif
}

/*  Waits until at most N_ committed groups are still in flight. */
template <int N_>
__device__ __forceinline__ void ak_cp_wait (void)
{
#ifndef AK_CUDA_EMU
    asm volatile ("cp.async.wait_group %0;\n" :: "n" (N_));
#endif
}

/*  Rows [row0, row0+nrows) of a matrix of HD_-element rows at src into
    shared memory at dst (rows HD_+8 elements apart: the ldmatrix reads
    are conflict-free), zero from row end on, the 16-byte copies spread
    over the block's nthr threads (the caller commits the group).  A zero
    row names src itself, which must be a valid address.  ak_cp_cols:
    the same for columns c0 .. c0+C_-1 of each row only (rows C_+8 apart
    in shared memory: tile_decode's share of V's columns). */
template <int HD_, int C_>
__device__ __forceinline__ void ak_cp_cols (ak_t *dst, const ak_t *src, int c0, ak_i64 row0, int nrows, ak_i64 end,
                                            int nthr)
{
    constexpr int CPR = C_ / 8;                         /* 16-byte chunks a row */
    for (int c = threadIdx.x; c < nrows * CPR; c += nthr) {
        const int r = c / CPR, col = (c % CPR) * 8;
        const bool ok = row0 + r < end;
        ak_cp_async16 (dst + r * (C_ + 8) + col, src + (ok ? (row0 + r) * HD_ + c0 + col : 0), ok);
    }
}

template <int HD_>
__device__ __forceinline__ void ak_cp_rows (ak_t *dst, const ak_t *src, ak_i64 row0, int nrows, ak_i64 end, int nthr)
{
    ak_cp_cols<HD_, HD_> (dst, src, 0, row0, nrows, end, nthr);
}

/*  Four 8x8 b16 matrices from shared memory (lane l gives the row address
    of matrix l/8), as mma.sync fragments; _trans transposes each. */
__device__ __forceinline__ void ak_ldmatrix_x4 (unsigned r[4], const void *p)
{
#ifdef AK_CUDA_EMU
    ak_emu_ldmatrix_x4 (r, p, false);
#else
    asm volatile ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                  : "=r" (r[0]), "=r" (r[1]), "=r" (r[2]), "=r" (r[3]) : "r" (ak_smem (p)));
#endif
}

__device__ __forceinline__ void ak_ldmatrix_x4_trans (unsigned r[4], const void *p)
{
#ifdef AK_CUDA_EMU
    ak_emu_ldmatrix_x4 (r, p, true);
#else
    asm volatile ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                  : "=r" (r[0]), "=r" (r[1]), "=r" (r[2]), "=r" (r[3]) : "r" (ak_smem (p)));
#endif
}

/*  c[16x8] += a[16x16] * b[16x8] (row.col, f32 accumulators). */
__device__ __forceinline__ void ak_mma_16816 (float c[4], const unsigned a[4], unsigned b0, unsigned b1)
{
#ifdef AK_CUDA_EMU
    ak_emu_mma_16816 (c, a[0], a[1], a[2], a[3], b0, b1);
#else
    /* not volatile: a pure register operation the compiler may schedule
       among the (volatile, ordered) ldmatrix loads */
    asm ("mma.sync.aligned.m16n8k16.row.col.f32." AK_MMA_T "." AK_MMA_T ".f32 "
                  "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                  : "+f" (c[0]), "+f" (c[1]), "+f" (c[2]), "+f" (c[3])
                  : "r" (a[0]), "r" (a[1]), "r" (a[2]), "r" (a[3]), "r" (b0), "r" (b1));
#endif
}

/*  The two products of a flash-attention key tile in shared memory (rows
    of sd elements), for a warp of MT_ row tiles of 16 query rows.
    ak_fa_scores: s[mt] (16 x 8*NJ_ scores) += qa[mt] (the A fragment of
    k-step kk) times the tile's keys' dims kk*16 .. +15, K rows read by
    ldmatrix (K is already the "col" operand); each K fragment serves the
    MT_ row tiles.  ak_fa_pv: o[mt] (16 x 8*ND_) += pa[mt] (P's A
    fragment of keys kk*16 .. +15, in the element type) times those keys'
    values, read by ldmatrix.trans; each V fragment serves the MT_ row
    tiles.  NJ_ and ND_ even. */
template <int MT_, int NJ_>
__device__ __forceinline__ void ak_fa_scores (float (&s)[MT_][NJ_][4], const unsigned (&qa)[MT_][4],
                                              const ak_t *ks, int sd, int kk, int lane)
{
    const int mat = lane >> 3;
#pragma unroll
    for (int j = 0; j < NJ_; j += 2) {
        unsigned r[4];
        ak_ldmatrix_x4 (r, ks + (j * 8 + (lane & 7) + (mat >> 1) * 8) * sd + kk * 16 + (mat & 1) * 8);
#pragma unroll
        for (int mt = 0; mt < MT_; mt++) {
            ak_mma_16816 (s[mt][j], qa[mt], r[0], r[1]);
            ak_mma_16816 (s[mt][j + 1], qa[mt], r[2], r[3]);
        }
    }
}

template <int MT_, int ND_>
__device__ __forceinline__ void ak_fa_pv (float (&o)[MT_][ND_][4], const unsigned (&pa)[MT_][4], const ak_t *vs,
                                          int sd, int kk, int lane)
{
    const int mat = lane >> 3;
#pragma unroll
    for (int d = 0; d < ND_; d += 2) {
        unsigned r[4];
        ak_ldmatrix_x4_trans (r, vs + (kk * 16 + (lane & 7) + (mat & 1) * 8) * sd + d * 8 + (mat >> 1) * 8);
#pragma unroll
        for (int mt = 0; mt < MT_; mt++) {
            ak_mma_16816 (o[mt][d], pa[mt], r[0], r[1]);
            ak_mma_16816 (o[mt][d + 1], pa[mt], r[2], r[3]);
        }
    }
}

/*  Phase 2 of ak_split_merge: the nu groups of four columns (D4 a row)
    into out, UI_ = 4 groups a thread (NTH_ threads) and SB_ = 4 slices'
    loads at a time (up to 32 loads in flight a thread), each slice
    weighted by 2^(its maximum - the row's, s_m) and the sum by 1 / the
    row's sum (s_l), the slices in order. */
template <int NTH_>
__device__ __forceinline__ void ak_split_merge_cols (const float *w0, ak_i64 nsplit, ak_i64 sst, int wd, int C, int nu,
                                                     int D4, const float *s_m, const float *s_l, ak_t *out,
                                                     ak_i64 ostride, int tid)
{
    constexpr int UI_ = 4, SB_ = 4;
    const float ninf = __int_as_float (0xff800000);
    for (int u0 = tid; u0 < nu; u0 += UI_ * NTH_) {
        int row[UI_], col[UI_], off[UI_];
        float M[UI_];
        float4 acc[UI_];
#pragma unroll
        for (int i = 0; i < UI_; i++) {
            const int u = u0 + i * NTH_;
            row[i] = u < nu ? (int) ((unsigned) u / (unsigned) D4) : -1;
            col[i] = row[i] < 0 ? 0 : (u - row[i] * D4) * 4;
            off[i] = row[i] < 0 ? 0 : row[i] * wd + col[i];
            M[i] = row[i] < 0 ? 0.0f : s_m[row[i]];
            acc[i] = make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
        }
        for (ak_i64 s0 = 0; s0 < nsplit; s0 += SB_) {
            float4 x[SB_][UI_];
            float ms[SB_][UI_];
#pragma unroll
            for (int j = 0; j < SB_; j++) {
                const float *ps = w0 + (s0 + j) * sst;
#pragma unroll
                for (int i = 0; i < UI_; i++) {
                    if (s0 + j < nsplit && row[i] >= 0) {
                        x[j][i] = __ldcg ((const float4 *) (ps + off[i]));
                        ms[j][i] = __ldcg (ps + row[i] * wd + C);
                    }
                    else {
                        x[j][i] = make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
                        ms[j][i] = ninf;
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < SB_; j++)
#pragma unroll
                for (int i = 0; i < UI_; i++) {
                    const float w = exp2f (ms[j][i] - M[i]);
                    acc[i].x += w * x[j][i].x;
                    acc[i].y += w * x[j][i].y;
                    acc[i].z += w * x[j][i].z;
                    acc[i].w += w * x[j][i].w;
                }
        }
#pragma unroll
        for (int i = 0; i < UI_; i++) {
            if (row[i] < 0)
                continue;
            const float inv = s_l[row[i]];
            *(uint2 *) (out + (ak_i64) row[i] * ostride + col[i]) =
                make_uint2 (ak_pack2 (acc[i].x * inv, acc[i].y * inv), ak_pack2 (acc[i].z * inv, acc[i].w * inv));
        }
    }
}

/*  ak_split_merge's batched path (WIDE_, at most NTH_ groups of four
    columns): thread tid < nu takes one group and loads NS_ slices' four
    values and its row's maximum and sum at once (2 NS_ loads in flight;
    one round up to NS_ slices), each batch weighted by 2^(m_s - M) over
    the running maximum M (the sums so far rescaled when it grows), every
    sum in slice order. */
template <int NS_>
__device__ __forceinline__ void ak_split_merge_one (const float *w0, ak_i64 nsplit, ak_i64 sst, int wd, int C, int nu,
                                                    int D4, ak_t *out, ak_i64 ostride, int tid)
{
    const float ninf = __int_as_float (0xff800000);
    if (tid >= nu)
        return;
    const int row = (int) ((unsigned) tid / (unsigned) D4), col = (tid - row * D4) * 4;
    const float *p = w0 + row * wd;
    float M = ninf, l = 0.0f;
    float4 acc = make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
    for (ak_i64 s0 = 0; s0 < nsplit; s0 += NS_) {
        float4 x[NS_];
        float2 ml[NS_];
#pragma unroll
        for (int s = 0; s < NS_; s++)
            if (s0 + s < nsplit) {
                x[s] = __ldcg ((const float4 *) (p + (s0 + s) * sst + col));
                ml[s] = __ldcg ((const float2 *) (p + (s0 + s) * sst + C));
            }
            else {
                x[s] = make_float4 (0.0f, 0.0f, 0.0f, 0.0f);
                ml[s] = make_float2 (ninf, 0.0f);
            }
        float Mn = M;
#pragma unroll
        for (int s = 0; s < NS_; s++)
            Mn = fmaxf (Mn, ml[s].x);
        if (Mn == ninf)
            continue;                                 /* no slice so far saw keys for the row */
        const float r = exp2f (M - Mn);               /* 0 while M is -inf (nothing summed yet) */
        l *= r;
        acc.x *= r;
        acc.y *= r;
        acc.z *= r;
        acc.w *= r;
#pragma unroll
        for (int s = 0; s < NS_; s++) {
            const float w = exp2f (ml[s].x - Mn);
            l += w * ml[s].y;
            acc.x += w * x[s].x;
            acc.y += w * x[s].y;
            acc.z += w * x[s].z;
            acc.w += w * x[s].w;
        }
        M = Mn;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    *(uint2 *) (out + (ak_i64) row * ostride + col) =
        make_uint2 (ak_pack2 (acc.x * inv, acc.y * inv), ak_pack2 (acc.z * inv, acc.w * inv));
}

/*  The split merge of the decode kernels (split_kv_attention's
    tile_decode, wg_decode and tma_decode), in the block of a tile that
    arrived last: slice s's partial row r at w0 + s*sst + r*wd holds C
    unnormalised outputs, then the row's maximum and sum in the exp2
    domain (at C and C+1).  A one-block merge is bound by its loads'
    latency, so each phase is one round of loads where it can be:
      1. each row's maximum and sum over the slices: with at most a row
         a warp, the warp's lanes over the slices (one load a lane up to
         32 slices), combined lane by lane and then over the warp by a
         fixed xor tree; else a thread a row, the slices in order, four
         loads at a time;
      2. the rows into out + r*ostride (C columns, nr rows), four columns
         a thread (ak_split_merge_cols).
    With WIDE_ and at most NTH_ groups of four columns (the one-token
    tiles of a few rows), the two phases are one (ak_split_merge_one: a
    thread's group over the slices with its row's maxima and sums, 16
    slices a round of loads, no barrier).  WIDE_ costs registers:
    tile_decode's 255-register configuration would spill.
    NTH_ (a multiple of 32) threads with index tid take part; BAR_ 0: they
    are the block (__syncthreads), else they meet at named barrier BAR_.
    Every sum runs in a fixed order: deterministic. */
template <int BM_, int NTH_, int BAR_, bool WIDE_ = false>
__device__ void ak_split_merge (const float *w0, ak_i64 nsplit, ak_i64 sst, int wd, int C, int nr, ak_t *out,
                                ak_i64 ostride, int tid)
{
    static_assert (NTH_ % 32 == 0, "whole warps");
    __shared__ float s_m[BM_], s_l[BM_];              /* a row's maximum and 1 / sum */
    const float ninf = __int_as_float (0xff800000);
    if (WIDE_ && nr * (C >> 2) <= NTH_) {
        ak_split_merge_one<16> (w0, nsplit, sst, wd, C, nr * (C >> 2), C >> 2, out, ostride, tid);
        return;
    }
    if (nr <= NTH_ / 32) {
        const int lane = tid & 31, r = tid >> 5;
        float m = ninf, l = 0.0f;
        for (ak_i64 s = lane; r < nr && s < nsplit; s += 32) {
            const float2 ml = __ldcg ((const float2 *) (w0 + s * sst + r * wd + C));
            const float mn = fmaxf (m, ml.x);
            if (mn != ninf) {
                l = l * exp2f (m - mn) + ml.y * exp2f (ml.x - mn);
                m = mn;
            }
        }
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1) {
            const float mo = __shfl_xor_sync (0xffffffffu, m, off), lo = __shfl_xor_sync (0xffffffffu, l, off);
            const float mn = fmaxf (m, mo);
            if (mn != ninf) {
                l = l * exp2f (m - mn) + lo * exp2f (mo - mn);
                m = mn;
            }
        }
        if (lane == 0 && r < nr) {
            s_m[r] = m == ninf ? 0.0f : m;            /* a row no slice saw keys for: weights 0 */
            s_l[r] = l > 0.0f ? 1.0f / l : 0.0f;
        }
    }
    else
        for (int r = tid; r < nr; r += NTH_) {
            float M = ninf;
#pragma unroll 4
            for (ak_i64 s = 0; s < nsplit; s++)
                M = fmaxf (M, __ldcg (w0 + s * sst + r * wd + C));
            const float Mz = M == ninf ? 0.0f : M;
            float ls = 0.0f;
#pragma unroll 4
            for (ak_i64 s = 0; s < nsplit; s++) {
                const float2 ml = __ldcg ((const float2 *) (w0 + s * sst + r * wd + C));
                ls += exp2f (ml.x - Mz) * ml.y;
            }
            s_m[r] = Mz;
            s_l[r] = ls > 0.0f ? 1.0f / ls : 0.0f;
        }
    if constexpr (BAR_ == 0)
        __syncthreads ();
    else
        ak_bar_sync_n<BAR_, NTH_> ();
    const int D4 = C >> 2, nu = nr * D4;
    ak_split_merge_cols<NTH_> (w0, nsplit, sst, wd, C, nu, D4, s_m, s_l, out, ostride, tid);
}

#endif /* float16 / bfloat16, not a reference */
#if defined(AK_REFERENCE)
/* -------------------------------------------- float64 references */

/*  ak_ref_gemm64<NB>: the 64x64 tile at rows r0.., columns c0.. of the NB
    (1 or 2) products C_b = A B_b, A [M][K] (row stride lda), B_b [K][N]
    (row stride ldb), in float64 registers: thread t of the block's 256
    holds acc[b][i][j] = C_b[r0 + t/16 + 16i][c0 + t%16 + 16j].  Each
    element's dot product runs in k order, one `acc += a * b` a step, as
    a thread an element would sum it (ref.c's order), with A and B read
    through shared memory 16 k at a time.  Elements outside M x N hold
    sums of zeros: the caller stores only those inside.  Every thread of
    the block calls it for the same tile (it synchronises the block);
    blockDim.x must be 256. */
template <int NB>
__device__ __forceinline__ void ak_ref_gemm64 (const double *A, ak_i64 lda, const double *const (&B)[NB],
                                               ak_i64 ldb, ak_i64 M, ak_i64 N, ak_i64 K, ak_i64 r0, ak_i64 c0,
                                               double (&acc)[NB][4][4])
{
    __shared__ double s_a[64][17];                 /* padded: rows t/16 and t/16 + 1 in other banks */
    __shared__ double s_b[NB][16][64];
    const int t = threadIdx.x, tr = t >> 4, tc = t & 15;
#pragma unroll
    for (int b = 0; b < NB; b++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[b][i][j] = 0.0;
    for (ak_i64 k0 = 0; k0 < K; k0 += 16) {
        const int kn = K - k0 < 16 ? (int) (K - k0) : 16;
        for (int e = t; e < 64 * 16; e += 256) {
            const int r = e >> 4, c = e & 15;
            s_a[r][c] = r0 + r < M && c < kn ? A[(r0 + r) * lda + k0 + c] : 0.0;
        }
#pragma unroll
        for (int b = 0; b < NB; b++)
            for (int e = t; e < 16 * 64; e += 256) {
                const int r = e >> 6, c = e & 63;
                s_b[b][r][c] = r < kn && c0 + c < N ? B[b][(k0 + r) * ldb + c0 + c] : 0.0;
            }
        __syncthreads ();
        for (int kk = 0; kk < kn; kk++) {
            double av[4], bv[NB][4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                av[i] = s_a[tr + 16 * i][kk];
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    bv[b][j] = s_b[b][kk][tc + 16 * j];
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        acc[b][i][j] += av[i] * bv[b][j];
        }
        __syncthreads ();
    }
}

/*  Stores the tile ak_ref_gemm64 left in acc (one product's) into C [M][N]
    (row stride ldc), the elements inside M x N only. */
__device__ __forceinline__ void ak_ref_store64 (double *C, ak_i64 ldc, ak_i64 M, ak_i64 N, ak_i64 r0, ak_i64 c0,
                                                const double (&acc)[4][4])
{
    const int tr = threadIdx.x >> 4, tc = threadIdx.x & 15;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const ak_i64 r = r0 + tr + 16 * i, c = c0 + tc + 16 * j;
            if (r < M && c < N)
                C[r * ldc + c] = acc[i][j];
        }
}
#endif /* AK_REFERENCE */
#endif
