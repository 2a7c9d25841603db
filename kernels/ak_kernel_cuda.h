/*  kernels/ak_kernel_cuda.h: the ABI of CUDA-backend kernels.

    The worker prepends this file to every CUDA kernel source before NVRTC
    compiles it (CUBIN for the device's exact sm_XY, C++17), so a source is
    self-contained on the wire.  A kernel defines

        extern "C" __global__ void ak_kernel (ak_cuda_args_t a);

    taking the argument block BY VALUE as its first parameter (the backend
    launches it with a kernel parameter of exactly this layout).

    ABI 2 (AK_CUDA_ABI): a kernel whose spec entry declares "tensor_maps"
    takes them as further parameters, in the order the spec lists them,
    each a TMA descriptor the worker encoded with cuTensorMapEncodeTiled
    over the named buffer for this launch:

        extern "C" __global__ void ak_kernel (ak_cuda_args_t a,
            const __grid_constant__ ak_tensor_map_t tm_a,
            const __grid_constant__ ak_tensor_map_t tm_b);

    Use the address of the parameter (&tm_a) as the tensor map operand of
    cp.async.bulk.tensor / prefetch.tensormap.  Kernels without tensor maps
    are as in ABI 1.  "arch": "sm_90a" in the spec builds the kernel with
    --gpu-architecture=sm_90a (wgmma, setmaxnreg ...); "cluster" in its
    launch rule launches thread-block clusters (cuLaunchKernelEx).
    a.dims holds the shape in the spec's key order; a.in / a.out the device
    buffers in the order the spec lists its inputs and outputs.  Elements
    are `ak_t`: float, __half, __nv_bfloat16 as the workload's dtype says
    (-DAK_DTYPE_FLOAT32 / _FLOAT16 / _BFLOAT16), double under -DAK_REFERENCE.
    Tunable parameters arrive as -D defines (e.g. -DBLOCK=256); grid, block
    and dynamic shared memory come from the launch configuration.

    Also here, for every module: a Philox4x32-10 that matches common/rng.c
    bit for bit, and the generator kernel ak_fill_uniform, so inputs can be
    made on the device with exactly the values the host would make.

    The backend defines AK_CUDA_HALF when it found the toolkit's
    cuda_fp16.h / cuda_bf16.h (NVRTC 13.0 has no built-in copies); without
    it float16 and bfloat16 kernels are refused before they get here. */
#ifndef AK_KERNEL_CUDA_H
#define AK_KERNEL_CUDA_H

/* The kernel ABI this header describes; 2 added tensor maps. */
#define AK_CUDA_ABI 2

typedef unsigned int       ak_u32;
typedef unsigned long long ak_u64;
typedef long long          ak_i64;

/* A TMA descriptor: 128 bytes, 64-byte aligned, as CUtensorMap (opaque:
   read only by the TMA unit). */
typedef struct __align__(64) { ak_u64 opaque[16]; } ak_tensor_map_t;
static_assert (sizeof (ak_tensor_map_t) == 128, "ak_tensor_map_t is a CUtensorMap: 128 bytes");

/* False for an optional map ("optional": true in the spec) that the
   tensor-map rules refused for this workload (a row of 127 bf16 elements
   is not a multiple of 16 bytes): the worker then passes 128 zero bytes,
   and the kernel must take a path without it.  An encoded map is never
   all zero (it holds the buffer's address). */
__device__ __forceinline__ bool ak_tensor_map_present (const ak_tensor_map_t *m)
{
    ak_u64 any = 0;
#pragma unroll
    for (int i = 0; i < 16; i++)
        any |= m->opaque[i];
    return any != 0;
}

#ifndef AK_MAX_DIMS
#define AK_MAX_DIMS 8
#endif
#ifndef AK_MAX_BUFS
#define AK_MAX_BUFS 8
#endif

#ifdef AK_CUDA_HALF
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

/* Mirrored on the host (worker/backend_cuda.c); both check the layout. */
typedef struct {
    ak_i64      dims[AK_MAX_DIMS];
    int         ndims;
    const void *in[AK_MAX_BUFS];
    int         nin;
    void       *out[AK_MAX_BUFS];
    int         nout;
} ak_cuda_args_t;
static_assert (sizeof (ak_cuda_args_t) == 216, "ak_cuda_args_t layout changed: fix backend_cuda.c too");

/* ak_t: the element type; ak_acc_t: what arithmetic should be done in. */
#if defined(AK_REFERENCE)
typedef double ak_t;
typedef double ak_acc_t;
#elif defined(AK_DTYPE_FLOAT16)
typedef __half ak_t;
typedef float ak_acc_t;
#elif defined(AK_DTYPE_BFLOAT16)
typedef __nv_bfloat16 ak_t;
typedef float ak_acc_t;
#else
typedef float ak_t;
typedef float ak_acc_t;
#endif

#define AK_IN(a, i)  ((const ak_t *) (a).in[i])
#define AK_OUT(a, i) ((ak_t *) (a).out[i])

/* Element <-> accumulator conversions, round to nearest even. */
__device__ __forceinline__ ak_acc_t ak_to_acc (ak_t v)
{
#if defined(AK_DTYPE_FLOAT16) && !defined(AK_REFERENCE)
    return __half2float (v);
#elif defined(AK_DTYPE_BFLOAT16) && !defined(AK_REFERENCE)
    /* the same value as __bfloat162float (a bfloat16 is the top half of
       its float), as a 16-bit shift: the library's conversion made a
       softmax over 4096x32000 bfloat16 18% slower than float16 on an
       H200, the shift 3% (docs/benchmarks.md, 2026-12-03) */
    return __uint_as_float (((unsigned int) __bfloat16_as_ushort (v)) << 16);
#else
    return v;
#endif
}

__device__ __forceinline__ ak_t ak_from_acc (ak_acc_t v)
{
#if defined(AK_DTYPE_FLOAT16) && !defined(AK_REFERENCE)
    return __float2half_rn (v);
#elif defined(AK_DTYPE_BFLOAT16) && !defined(AK_REFERENCE)
    return __float2bfloat16_rn (v);
#else
    return v;
#endif
}

/* ------------------------------------------------ Philox4x32-10 (rng.c) */
/*  Layout as common/rng.c says:
      key     = { seed & 0xffffffff, seed >> 32 }
      counter = { ctr_lo & 0xffffffff, ctr_lo >> 32, ctr_hi & 0xffffffff, ctr_hi >> 32 }
    Every floating step below is a single correctly rounded operation
    (__dmul_rn / __dadd_rn: no FMA contraction), as on the host. */
#define AK_PHILOX_M0 0xD2511F53u
#define AK_PHILOX_M1 0xCD9E8D57u
#define AK_PHILOX_W0 0x9E3779B9u
#define AK_PHILOX_W1 0xBB67AE85u

__device__ __forceinline__ void ak_philox4x32 (ak_u64 seed, ak_u64 ctr_hi, ak_u64 ctr_lo,
                                                      ak_u32 out[4])
{
    ak_u32 k0 = (ak_u32) seed, k1 = (ak_u32) (seed >> 32);
    ak_u32 c0 = (ak_u32) ctr_lo, c1 = (ak_u32) (ctr_lo >> 32);
    ak_u32 c2 = (ak_u32) ctr_hi, c3 = (ak_u32) (ctr_hi >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += AK_PHILOX_W0;
            k1 += AK_PHILOX_W1;
        }
        ak_u32 hi0 = __umulhi (AK_PHILOX_M0, c0), lo0 = AK_PHILOX_M0 * c0;
        ak_u32 hi1 = __umulhi (AK_PHILOX_M1, c2), lo1 = AK_PHILOX_M1 * c2;
        ak_u32 n0 = hi1 ^ c1 ^ k0;
        ak_u32 n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Uniform double in [0, 1) for element i of stream: 53 random bits. */
__device__ __forceinline__ double ak_rng_uniform (ak_u64 seed, ak_u64 stream, ak_u64 i)
{
    ak_u32 w[4];
    ak_philox4x32 (seed, stream, i, w);
    ak_u64 u = (ak_u64) w[0] | ((ak_u64) w[1] << 32);
    return __dmul_rn ((double) (u >> 11), 1.0 / 9007199254740992.0);   /* 2^-53, exact */
}

/* Uniform in [lo, hi); the rounding that lands on hi maps back to lo. */
__device__ __forceinline__ double ak_rng_range (ak_u64 seed, ak_u64 stream, ak_u64 i,
                                                       double lo, double hi)
{
    double u = ak_rng_uniform (seed, stream, i);
    double r = __dadd_rn (lo, __dmul_rn (hi - lo, u));
    if (r >= hi && hi > lo)
        r = lo;
    return r;
}

/* ---------------------------------------------------- input generation */
/*  ak_fill_uniform: out[i] = ak_rng_range (seed, stream, i, lo, hi) for
    i < n, stored as dtype with the host's rounding (worker/data.c:
    nearest even, clipped to the largest finite value).  dtype codes are
    ak_dtype_t's (0 float16, 1 bfloat16, 2 float32) plus 3 for float64,
    and 4 + a kernel type for that type's value stored as float64.
    Any grid: a grid-stride loop.  float16/bfloat16 need AK_CUDA_HALF;
    without it those dtypes write nothing. */
#define AK_FILL_FLOAT16  0
#define AK_FILL_BFLOAT16 1
#define AK_FILL_FLOAT32  2
#define AK_FILL_FLOAT64  3
#define AK_FILL_AS_F64   4     /* + a kernel type (0..2): rounded to it, stored as float64 */

extern "C" __global__ void ak_fill_uniform (ak_u64 seed, ak_u64 stream, ak_u64 n,
                                            double lo, double hi, int dtype, void *out)
{
    ak_u64 step = (ak_u64) gridDim.x * blockDim.x;
    for (ak_u64 i = (ak_u64) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        double v = ak_rng_range (seed, stream, i, lo, hi);
        switch (dtype) {
#ifdef AK_CUDA_HALF
            case AK_FILL_FLOAT16:
                v = fmin (fmax (v, -65504.0), 65504.0);
                ((__half *) out)[i] = __double2half (v);
                break;
            case AK_FILL_BFLOAT16:
                v = fmin (fmax (v, -0x1.fep127), 0x1.fep127);
                ((__nv_bfloat16 *) out)[i] = __double2bfloat16 (v);
                break;
#endif
            case AK_FILL_FLOAT32:
                v = fmin (fmax (v, -3.4028234663852886e38), 3.4028234663852886e38);
                ((float *) out)[i] = __double2float_rn (v);
                break;
            case AK_FILL_FLOAT64:
                ((double *) out)[i] = v;
                break;
            /* Rounded to a kernel type, stored as float64: the device
               reference's inputs, exactly the values the kernel gets. */
#ifdef AK_CUDA_HALF
            case AK_FILL_AS_F64 + AK_FILL_FLOAT16:
                v = fmin (fmax (v, -65504.0), 65504.0);
                ((double *) out)[i] = (double) __half2float (__double2half (v));
                break;
            case AK_FILL_AS_F64 + AK_FILL_BFLOAT16:
                v = fmin (fmax (v, -0x1.fep127), 0x1.fep127);
                ((double *) out)[i] = (double) __bfloat162float (__double2bfloat16 (v));
                break;
#endif
            case AK_FILL_AS_F64 + AK_FILL_FLOAT32:
                v = fmin (fmax (v, -3.4028234663852886e38), 3.4028234663852886e38);
                ((double *) out)[i] = (double) __double2float_rn (v);
                break;
            default:
                break;
        }
    }
}

/* ------------------------------------------------- output comparison */
/*  ak_compare (device references only: -DAK_REFERENCE): the n elements
    of got (dtype code 0..3 as ak_fill_uniform's) against the float64
    reference want, each classified exactly as worker/gates_cmp.c does on
    the host, so that an output the size of a real workload is judged
    where it is instead of crossing to the host:

      unwritten   every byte of got[i] is 0xFF (the poison), when poison
      overflowed  got[i] not finite, want[i] finite and |want[i]| > dmax
      nonfinite   got[i] not finite, want[i] finite
      beyond      want[i] not finite and got[i] not the same special value,
                  or |got[i] - want[i]| > atol + rtol * |want[i]|

    out (8 words, zeroed by the caller): [0] unwritten, [1] overflowed,
    [2] nonfinite, [3] beyond, [4] elements where want is not finite,
    [5] the least index that is unwritten, nonfinite or beyond (left at
    ~0 by the caller when none), [6] the largest |got - want| over the
    elements where both are finite, as the bits of a double (non-negative
    doubles order as their bits do), [7] a keyed sum of want's bits: the
    wrapping sum over i of a 64-bit mix of (bits of want[i]) ^ (key + i *
    the golden ratio), which a kernel that does not know key cannot keep
    unchanged while it changes want (the gates check the reference was
    not written to while a candidate ran).  The tolerance is computed without a
    fused multiply-add, as the host computes it.  Any grid of blocks whose
    size is a multiple of 32 (warp shuffles over full warps). */
#if defined(AK_REFERENCE)
__device__ __forceinline__ bool ak_cmp_poison (const void *got, int dtype, ak_u64 i)
{
    switch (dtype) {
        case AK_FILL_FLOAT16:
        case AK_FILL_BFLOAT16: return ((const unsigned short *) got)[i] == 0xFFFFu;
        case AK_FILL_FLOAT32:  return ((const ak_u32 *) got)[i] == 0xFFFFFFFFu;
        default:               return ((const ak_u64 *) got)[i] == ~0ull;
    }
}

__device__ __forceinline__ double ak_cmp_load (const void *got, int dtype, ak_u64 i)
{
    switch (dtype) {
#ifdef AK_CUDA_HALF
        case AK_FILL_FLOAT16:  return (double) __half2float (((const __half *) got)[i]);
        case AK_FILL_BFLOAT16: return (double) __bfloat162float (((const __nv_bfloat16 *) got)[i]);
#endif
        case AK_FILL_FLOAT32:  return (double) ((const float *) got)[i];
        default:               return ((const double *) got)[i];
    }
}

__device__ __forceinline__ ak_u64 ak_cmp_mix (ak_u64 z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

extern "C" __global__ void ak_compare (const void *got, int dtype, const double *want, ak_u64 n,
                                       double atol, double rtol, double dmax, int poison, ak_u64 key,
                                       ak_u64 *out)
{
    ak_u64 c_unwritten = 0, c_overflowed = 0, c_nonfinite = 0, c_beyond = 0, c_want = 0, sum = 0;
    ak_u64 first = ~0ull, worst = 0;
    ak_u64 step = (ak_u64) gridDim.x * blockDim.x;
    for (ak_u64 i = (ak_u64) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        double w = want[i];
        sum += ak_cmp_mix ((ak_u64) __double_as_longlong (w) ^ (key + i * 0x9E3779B97F4A7C15ull));
        bool wfin = isfinite (w);
        c_want += !wfin;
        bool bad = false;
        if (poison && ak_cmp_poison (got, dtype, i)) {
            c_unwritten++;
            bad = true;
        }
        else {
            double g = ak_cmp_load (got, dtype, i);
            bool gfin = isfinite (g);
            if (!gfin && wfin && fabs (w) > dmax)
                c_overflowed++;
            else if (!gfin && wfin) {
                c_nonfinite++;
                bad = true;
            }
            else if (!wfin) {
                bool same = (isnan (w) && isnan (g)) || w == g;
                if (!same) {
                    c_beyond++;
                    bad = true;
                }
            }
            else {
                double e = fabs (__dsub_rn (g, w));
                ak_u64 eb = (ak_u64) __double_as_longlong (e);
                worst = eb > worst ? eb : worst;
                if (!(e <= __dadd_rn (atol, __dmul_rn (rtol, fabs (w))))) {
                    c_beyond++;
                    bad = true;
                }
            }
        }
        if (bad && i < first)
            first = i;
    }
    for (int o = 16; o > 0; o >>= 1) {
        c_unwritten += __shfl_down_sync (0xFFFFFFFFu, c_unwritten, o);
        c_overflowed += __shfl_down_sync (0xFFFFFFFFu, c_overflowed, o);
        c_nonfinite += __shfl_down_sync (0xFFFFFFFFu, c_nonfinite, o);
        c_beyond += __shfl_down_sync (0xFFFFFFFFu, c_beyond, o);
        c_want += __shfl_down_sync (0xFFFFFFFFu, c_want, o);
        sum += __shfl_down_sync (0xFFFFFFFFu, sum, o);
        ak_u64 f = __shfl_down_sync (0xFFFFFFFFu, first, o);
        ak_u64 m = __shfl_down_sync (0xFFFFFFFFu, worst, o);
        first = f < first ? f : first;
        worst = m > worst ? m : worst;
    }
    if ((threadIdx.x & 31) == 0) {
        if (c_unwritten)  atomicAdd (&out[0], c_unwritten);
        if (c_overflowed) atomicAdd (&out[1], c_overflowed);
        if (c_nonfinite)  atomicAdd (&out[2], c_nonfinite);
        if (c_beyond)     atomicAdd (&out[3], c_beyond);
        if (c_want)       atomicAdd (&out[4], c_want);
        if (first != ~0ull) atomicMin (&out[5], first);
        if (worst)        atomicMax (&out[6], worst);
        atomicAdd (&out[7], sum);
    }
}
#endif

/* ------------------------------------------------- memory-bound kit */
/*  Loads and stores with cache hints for the streamed data of memory-bound
    kernels (the catalog's row kernels take a HINT parameter in 0..3):

      0  ld.global.nc (__ldg); plain stores
      1  ld.global.nc.L1::no_allocate; st.global.cs (streaming stores)
      2  as 1, and an L2 evict_first policy on every load and store
         (createpolicy.fractional.L2::evict_first, .L2::cache_hint):
         streamed bytes leave L2 first, what is reused (gamma, weights)
         stays
      3  as 1, with .L2::256B prefetch on loads

    For accesses of 4, 8 and 16 bytes (unsigned, uint2, uint4).  Data
    read by every row (weights) should use plain __ldg.  Below sm_80 every
    hint degrades to 0 (createpolicy and the L2 qualifiers need sm_80).
    The cluster helpers (sm_90: thread-block clusters) read a float in
    the shared memory of another block of the cluster (DSMEM) and hold a
    cluster-wide barrier; every thread of every block of the cluster must
    reach ak_cluster_sync, and a block must not exit while another may
    still read its shared memory (end with ak_cluster_sync). */
#if !defined(AK_REFERENCE)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define AK_L2_HINTS 1
#else
#define AK_L2_HINTS 0
#endif

/* The evict_first policy of HINT 2 (0 for other hints: unused). */
template <int H>
__device__ __forceinline__ ak_u64 ak_hint_policy (void)
{
    ak_u64 p = 0;
#if AK_L2_HINTS
    if constexpr (H == 2)
        asm ("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
#endif
    return p;
}

/*  One hinted load: Q the vector qualifier (".v4", ".v2", ""), D the
    destination list, A and P the operand numbers of the address and the
    policy, OUTS the output constraints. */
#define AK_LD_HINTED(H, Q, D, A, P, OUTS, ptr, pol)                                                     \
    do {                                                                                              \
        if constexpr (H == 1)                                                                         \
            asm ("ld.global.nc.L1::no_allocate" Q ".u32 " D ", [%" A "];" : OUTS : "l"(ptr));          \
        else if constexpr (H == 2)                                                                    \
            asm ("ld.global.nc.L1::no_allocate.L2::cache_hint" Q ".u32 " D ", [%" A "], %" P ";"        \
                 : OUTS : "l"(ptr), "l"(pol));                                                        \
        else                                                                                          \
            asm ("ld.global.nc.L1::no_allocate.L2::256B" Q ".u32 " D ", [%" A "];" : OUTS : "l"(ptr)); \
    } while (0)
#define AK_COMMA ,

template <int H>
__device__ __forceinline__ uint4 ak_ld_hint (const uint4 *p, ak_u64 pol)
{
    uint4 v;
#if AK_L2_HINTS
    if constexpr (H >= 1 && H <= 3) {
        AK_LD_HINTED (H, ".v4", "{%0,%1,%2,%3}", "4", "5",
                      "=r"(v.x) AK_COMMA "=r"(v.y) AK_COMMA "=r"(v.z) AK_COMMA "=r"(v.w), p, pol);
        return v;
    }
#endif
    (void) pol;
    v = __ldg (p);
    return v;
}

template <int H>
__device__ __forceinline__ uint2 ak_ld_hint (const uint2 *p, ak_u64 pol)
{
    uint2 v;
#if AK_L2_HINTS
    if constexpr (H >= 1 && H <= 3) {
        AK_LD_HINTED (H, ".v2", "{%0,%1}", "2", "3", "=r"(v.x) AK_COMMA "=r"(v.y), p, pol);
        return v;
    }
#endif
    (void) pol;
    v = __ldg (p);
    return v;
}

template <int H>
__device__ __forceinline__ unsigned int ak_ld_hint (const unsigned int *p, ak_u64 pol)
{
    unsigned int v;
#if AK_L2_HINTS
    if constexpr (H >= 1 && H <= 3) {
        AK_LD_HINTED (H, "", "%0", "1", "2", "=r"(v), p, pol);
        return v;
    }
#endif
    (void) pol;
    v = __ldg (p);
    return v;
}

template <int H>
__device__ __forceinline__ void ak_st_hint (uint4 *p, uint4 v, ak_u64 pol)
{
#if AK_L2_HINTS
    if constexpr (H == 2) {
        asm volatile ("st.global.L1::no_allocate.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;"
                      :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol) : "memory");
        return;
    }
#endif
    (void) pol;
    if constexpr (H == 1 || H == 2 || H == 3)
        __stcs (p, v);
    else
        *p = v;
}

template <int H>
__device__ __forceinline__ void ak_st_hint (uint2 *p, uint2 v, ak_u64 pol)
{
#if AK_L2_HINTS
    if constexpr (H == 2) {
        asm volatile ("st.global.L1::no_allocate.L2::cache_hint.v2.u32 [%0], {%1,%2}, %3;"
                      :: "l"(p), "r"(v.x), "r"(v.y), "l"(pol) : "memory");
        return;
    }
#endif
    (void) pol;
    if constexpr (H == 1 || H == 2 || H == 3)
        __stcs (p, v);
    else
        *p = v;
}

template <int H>
__device__ __forceinline__ void ak_st_hint (unsigned int *p, unsigned int v, ak_u64 pol)
{
#if AK_L2_HINTS
    if constexpr (H == 2) {
        asm volatile ("st.global.L1::no_allocate.L2::cache_hint.u32 [%0], %1, %2;"
                      :: "l"(p), "r"(v), "l"(pol) : "memory");
        return;
    }
#endif
    (void) pol;
    if constexpr (H == 1 || H == 2 || H == 3)
        __stcs (p, v);
    else
        *p = v;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* This block's rank in its cluster (0 outside a cluster launch). */
__device__ __forceinline__ unsigned ak_cluster_rank (void)
{
    unsigned r;
    asm volatile ("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* A barrier of every thread of the cluster; shared-memory writes before it
   are visible to every block of the cluster after it. */
__device__ __forceinline__ void ak_cluster_sync (void)
{
    asm volatile ("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

/* The float at p (this block's shared memory) in the block of rank `rank`. */
__device__ __forceinline__ float ak_cluster_ld (const float *p, unsigned rank)
{
    unsigned a = (unsigned) __cvta_generic_to_shared (p), d;
    float v;
    asm volatile ("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(rank));
    asm volatile ("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(d) : "memory");
    return v;
}
#elif defined(AK_CUDA_EMU)
/* The same under the CPU emulation (tests/unit/cuda_emu/emu.h: the
   cluster's blocks run interleaved, the peers' shared memory addressed
   where it is kept); the row kit's cluster reductions below use them
   there too. */
__device__ __forceinline__ unsigned ak_cluster_rank (void)
{
    return ak_emu_cluster_rank ();
}

__device__ __forceinline__ void ak_cluster_sync (void)
{
    ak_emu_cluster_sync ();
}

__device__ __forceinline__ float ak_cluster_ld (const float *p, unsigned rank)
{
    float v;
    memcpy (&v, ak_emu_peer_smem (rank, ak_emu_smem_addr (p), sizeof v), sizeof v);
    return v;
}
#endif
/* ---------------------------------------------------- row kernel kit */
/*  What the catalog's row kernels (one row of a matrix per 32*WPR threads
    of each of CL blocks, ROWS rows a block) share.

    ak_vec_acc<VECB, HINT>: a VECB-byte access (4, 8, 16) as raw word and
    elements, loaded and stored with the cache hint HINT (ld / st, for the
    streamed data) or plainly (ld_keep: data every row reads again).
    ak_one_acc: one element, plain loads (the path of rows not a multiple
    of the access, or unaligned buffers).

    ak_row_reduce<OP, WPR, ROWS, CL>: OP (AK_RED_SUM or AK_RED_MAX) of v
    over the row's threads; every thread gets the same bits.  Warp
    shuffles (a butterfly), one value a warp through shared memory
    red[ROWS][WPR] combined in warp order, then with CL > 1 one value a
    block through the cluster (cred[2][ROWS], double-buffered by *k: a
    block writes the buffer of reduction k+2 only after every block passed
    the barrier of reduction k+1, so after reading k) combined in rank
    order.  The order depends on WPR and CL only: deterministic.  Every
    thread of the block (and cluster) calls it, threadIdx.y is the row. */
template <int BYTES> struct ak_raw_of { typedef unsigned int type; };
template <> struct ak_raw_of<8> { typedef uint2 type; };
template <> struct ak_raw_of<16> { typedef uint4 type; };

template <int VECB_, int HINT_>
struct ak_vec_acc {
    static_assert (VECB_ == 4 || VECB_ == 8 || VECB_ == 16, "VECB must be 4, 8 or 16");
    static_assert (VECB_ % sizeof (ak_t) == 0, "VECB must hold whole elements");
    enum { N = VECB_ / (int) sizeof (ak_t) };
    typedef typename ak_raw_of<VECB_>::type raw_t;
    union u {
        typedef typename ak_raw_of<VECB_>::type raw_t;
        enum { count = N };
        raw_t raw;
        ak_t  e[N];
    };
    static __device__ __forceinline__ raw_t ld (const raw_t *p, ak_u64 pol) { return ak_ld_hint<HINT_> (p, pol); }
    static __device__ __forceinline__ raw_t ld_keep (const raw_t *p) { return __ldg (p); }
    static __device__ __forceinline__ void st (raw_t *p, raw_t v, ak_u64 pol) { ak_st_hint<HINT_> (p, v, pol); }
};

struct ak_one_acc {
    enum { N = 1 };
    typedef ak_t raw_t;
    union u { enum { count = 1 }; ak_t raw; ak_t e[1]; };
    static __device__ __forceinline__ ak_t ld (const ak_t *p, ak_u64) { return *p; }
    static __device__ __forceinline__ ak_t ld_keep (const ak_t *p) { return *p; }
    static __device__ __forceinline__ void st (ak_t *p, ak_t v, ak_u64) { *p = v; }
};

/*  ak_unpack (v, f) / ak_pack (v, f): an access's elements as accumulators
    and back, the same values as ak_to_acc / ak_from_acc element by element
    (round to nearest even), but a 32-bit word of two 16-bit elements at a
    time: bfloat16 words open with a shift and a mask, and both 16-bit
    types round pairs with one cvt.rn.{bf16x2,f16x2}.f32, where one
    conversion an element plus the packing cost up to three instructions
    a pair (row kernels over 16-bit data are close to the issue limit).
    AK_NO_PAIRS keeps the element-wise path (ops/bench/row_variants
    compares the two). */
#if (defined(AK_DTYPE_FLOAT16) || defined(AK_DTYPE_BFLOAT16)) && !defined(AK_NO_PAIRS) \
    && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
#define AK_PAIRS 1
#else
#define AK_PAIRS 0
#endif

/*  exp(x - m) as 2^(x log2 e - m2) with m2 = m log2 e: one FMA before the
    ex2 of __expf instead of a subtraction and a product (row kernels that
    take an exponential of every element are close to the issue limit).
    m2 is m log2 e rounded to float: its error e (ak_exp_fold_err) makes
    every exponential of a row 2^-e too large or small, a common factor
    that a normalisation (softmax) cancels and a sum of exponentials used
    on its own (cross_entropy's log-sum) must take back.  While |m| <=
    2^24 (ak_exp_foldable) |e| <= 1, so the factor makes nothing overflow
    or underflow; beyond, __expf (x - m). */
#define AK_LOG2E 1.4426950408889634f

__device__ __forceinline__ bool ak_exp_foldable (float m)
{
    return fabsf (m) <= 16777216.0f;
}

__device__ __forceinline__ float ak_exp_fold (float x, float m2)
{
    float r;
    asm ("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(fmaf (x, AK_LOG2E, -m2)));
    return r;
}

/* e = m log2 e - m2 (the FMA's exact product, rounded once) */
__device__ __forceinline__ float ak_exp_fold_err (float m, float m2)
{
    return fmaf (m, AK_LOG2E, -m2);
}

template <typename V>
__device__ __forceinline__ void ak_unpack (const V &v, ak_acc_t (&f)[V::count])
{
#if AK_PAIRS && defined(AK_DTYPE_BFLOAT16)
    constexpr bool pairs = V::count % 2 == 0;
#else
    constexpr bool pairs = false;
#endif
    if constexpr (pairs) {
        const unsigned int *w = (const unsigned int *) &v.raw;
#pragma unroll
        for (int e = 0; e < V::count; e += 2) {
            f[e] = __uint_as_float (w[e / 2] << 16);
            f[e + 1] = __uint_as_float (w[e / 2] & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int e = 0; e < V::count; e++)
            f[e] = ak_to_acc (v.e[e]);
    }
}

template <typename V>
__device__ __forceinline__ void ak_pack (V &v, const ak_acc_t (&f)[V::count])
{
    constexpr bool pairs = AK_PAIRS && V::count % 2 == 0;
    if constexpr (pairs) {
        unsigned int *w = (unsigned int *) &v.raw;
#pragma unroll
        for (int e = 0; e < V::count; e += 2)   /* the first operand goes to the upper half */
#if defined(AK_DTYPE_BFLOAT16)
            asm ("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[e / 2]) : "f"(f[e + 1]), "f"(f[e]));
#else
            asm ("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w[e / 2]) : "f"(f[e + 1]), "f"(f[e]));
#endif
    } else {
#pragma unroll
        for (int e = 0; e < V::count; e++)
            v.e[e] = ak_from_acc (f[e]);
    }
}

#define AK_RED_SUM 0
#define AK_RED_MAX 1

template <int OP>
__device__ __forceinline__ float ak_red_op (float a, float b)
{
    if constexpr (OP == AK_RED_MAX)
        return fmaxf (a, b);
    else
        return a + b;
}

template <int OP, int WPR_, int ROWS_, int CL_>
__device__ __forceinline__ float ak_row_reduce (float v, float (*red)[WPR_], float (*cred)[ROWS_], int *k)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = ak_red_op<OP> (v, __shfl_xor_sync (0xffffffffu, v, o));
    if constexpr (WPR_ > 1) {
        if ((threadIdx.x & 31) == 0)
            red[threadIdx.y][threadIdx.x >> 5] = v;
        __syncthreads ();
        v = red[threadIdx.y][0];
#pragma unroll
        for (int w = 1; w < WPR_; w++)
            v = ak_red_op<OP> (v, red[threadIdx.y][w]);
        __syncthreads ();      /* red is reused by the next reduction */
    }
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(AK_CUDA_EMU)
    if constexpr (CL_ > 1) {
        float *buf = cred[*k & 1];
        *k += 1;
        if (threadIdx.x == 0)
            buf[threadIdx.y] = v;
        ak_cluster_sync ();
        v = ak_cluster_ld (&buf[threadIdx.y], 0);
#pragma unroll
        for (unsigned q = 1; q < CL_; q++)
            v = ak_red_op<OP> (v, ak_cluster_ld (&buf[threadIdx.y], q));
    }
#endif
    (void) cred;
    (void) k;
    return v;
}

/*  The part [*lo, *hi) of a row of `units` accesses that this block takes:
    the whole row when CL_ is 1, else contiguous parts by cluster rank (the
    last parts empty when the row has fewer accesses than blocks). */
template <int CL_>
__device__ __forceinline__ void ak_row_part (ak_i64 units, ak_i64 *lo, ak_i64 *hi)
{
    ak_i64 part = 0;
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(AK_CUDA_EMU)
    if constexpr (CL_ > 1)
        part = ak_cluster_rank ();
#endif
    const ak_i64 per = (units + CL_ - 1) / CL_;
    *lo = part * per < units ? part * per : units;
    *hi = *lo + per < units ? *lo + per : units;
}

/* True when p is aligned for n-byte accesses. */
__device__ __forceinline__ bool ak_aligned (const void *p, int n)
{
    return ((ak_u64) p) % (ak_u64) n == 0;
}
/* ------------------------------------- helpers of memory-bound kernels */
/*  ak_vec_t<bytes>: one access of 4, 8 or 16 bytes (16: one 128-bit load
    of 4 floats or 8 halves) as raw bits for the load or store (.raw, of
    type ::raw_t) and as ak_t elements (.e, ::count of them): the union of
    ak_vec_acc above, for kernels that load and store plainly.  A kernel's
    tunable access width (VECB) picks bytes; ak_aligned (p, bytes) says
    whether a buffer takes it. */
template <int bytes> using ak_vec_t = typename ak_vec_acc<bytes, 0>::u;

/*  Sum of v over the 32*wpr threads (x) of the block's row threadIdx.y,
    every one of them gets it: ak_row_reduce's sum within one block. */
template <int wpr> __device__ __forceinline__ float ak_row_sum (float v, float (*red)[wpr])
{
    return ak_row_reduce<AK_RED_SUM, wpr, 1, 1> (v, red, nullptr, nullptr);
}
#endif /* !AK_REFERENCE */


#endif
