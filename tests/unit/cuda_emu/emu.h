/*  tests/unit/cuda_emu/emu.h: enough of CUDA to run a catalog operator's
    float64 device reference (kernels/<op>/cuda/ref.cu) on the CPU, for
    test_cuda_ref_emu.  C++ (g++), single translation unit (main.cpp).

    Every thread of the grid is a coroutine (ucontext).  Blocks run one at
    a time: a block's threads take turns until each is done, waits at
    __syncthreads (all of the block's live threads there: all go on),
    waits in a warp shuffle (all live lanes of the warp there: the values
    are exchanged) or spins in __nanosleep.  A block whose live threads
    are all waiting and at least one spinning waits for the others (a
    grid-wide barrier of atomics and spins, as fused_mlp's reference
    has): it is set aside with its shared memory (every __shared__
    variable is placed in the section ak_emu_shared, copied out and back
    in) and the next block runs.  A grid that stops moving is a deadlock:
    the run aborts with a message.  Atomics are plain (one thread runs at
    a time); __threadfence is nothing.  Not emulated (a build error, or
    the test refuses the source): inline PTX, textures, other warp
    intrinsics. */
#ifndef AK_CUDA_EMU_H
#define AK_CUDA_EMU_H
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef AK_REFERENCE
#define AK_REFERENCE 1                 /* ak_blocks_cuda.h: the float64 references' blocks */
#endif
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static __attribute__ ((section ("ak_emu_shared")))

/* The argument block: the host ABI's struct (kernels/ak_kernel.h), which
   kernels/ak_kernel_cuda.h mirrors field for field, taken by value. */
#include "ak_kernel.h"
typedef long long ak_i64;
typedef unsigned long long ak_u64;
typedef unsigned int ak_u32;
typedef double ak_acc_t;
typedef ak_args_t ak_cuda_args_t;
#undef AK_IN
#undef AK_OUT
#define AK_IN(a, i)  ((const ak_t *) (a).in[i])
#define AK_OUT(a, i) ((ak_t *) (a).out[i])

struct ak_emu_dim3 { unsigned x, y, z; };
static ak_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

/* How a thread left the CPU (main.cpp's scheduler reads it). */
enum { AK_EMU_RUN, AK_EMU_BLOCK_WAIT, AK_EMU_WARP_WAIT, AK_EMU_SPIN, AK_EMU_DONE };
void ak_emu_yield (int why);
/* The value each lane offered in the current warp exchange. */
double *ak_emu_lane_slot (void);
double ak_emu_lane_get (unsigned lane);

static inline void __syncthreads () { ak_emu_yield (AK_EMU_BLOCK_WAIT); }
static inline void __threadfence () {}
static inline void __nanosleep (unsigned) { ak_emu_yield (AK_EMU_SPIN); }

template <typename T> static inline T ak_emu_shfl_xor (T v, int mask)
{
    double d;
    static_assert (sizeof (T) <= sizeof d, "a shuffled value of at most 8 bytes");
    memcpy (&d, &v, sizeof v);
    *ak_emu_lane_slot () = d;
    ak_emu_yield (AK_EMU_WARP_WAIT);           /* every lane has offered */
    unsigned lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
    double got = ak_emu_lane_get (lane ^ (unsigned) mask);
    ak_emu_yield (AK_EMU_WARP_WAIT);           /* every lane has read */
    T r;
    memcpy (&r, &got, sizeof r);
    return r;
}
static inline double __shfl_xor_sync (unsigned, double v, int m) { return ak_emu_shfl_xor (v, m); }
static inline float __shfl_xor_sync (unsigned, float v, int m) { return ak_emu_shfl_xor (v, m); }
static inline int __shfl_xor_sync (unsigned, int v, int m) { return ak_emu_shfl_xor (v, m); }
static inline unsigned __shfl_xor_sync (unsigned, unsigned v, int m) { return ak_emu_shfl_xor (v, m); }

template <typename T> static inline T atomicAdd (T *p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> static inline T atomicMax (T *p, T v) { T o = *p; *p = o > v ? o : v; return o; }

static inline double __longlong_as_double (long long v) { double d; memcpy (&d, &v, 8); return d; }
static inline double __longlong_as_double (unsigned long long v) { double d; memcpy (&d, &v, 8); return d; }
static inline long long __double_as_longlong (double v) { long long r; memcpy (&r, &v, 8); return r; }
static inline float __int_as_float (int v) { float f; memcpy (&f, &v, 4); return f; }
static inline int __float_as_int (float v) { int r; memcpy (&r, &v, 4); return r; }

#endif
