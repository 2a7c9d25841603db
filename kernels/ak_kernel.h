/*  kernels/ak_kernel.h: the ABI of host-backend kernels.

    The worker prepends this file to every host kernel source before it runs
    the system compiler, so a kernel source is self-contained on the wire and
    needs no include path.  A kernel defines

        void ak_kernel (const ak_args_t *a);      candidates and baselines
        void ak_reference (const ak_args_t *a);   the float64 oracle (ref.c)

    a->dims holds the shape in the spec's key order; a->in / a->out the
    buffers in the order the spec lists its inputs and outputs.  Kernels see
    `ak_t` elements (float for float32 workloads); the reference sees double.
    Tunable parameters arrive as -D defines (e.g. -DBLOCK=64). */
#ifndef AK_KERNEL_H
#define AK_KERNEL_H
#include <stdint.h>
#include <stddef.h>
#include <math.h>
#include <string.h>

#ifndef AK_MAX_DIMS
#define AK_MAX_DIMS 8
#endif
#ifndef AK_MAX_BUFS
#define AK_MAX_BUFS 8
#endif

typedef struct {
    int64_t     dims[AK_MAX_DIMS];
    int         ndims;
    const void *in[AK_MAX_BUFS];
    int         nin;
    void       *out[AK_MAX_BUFS];
    int         nout;
} ak_args_t;

#ifdef AK_REFERENCE
typedef double ak_t;
#else
typedef float ak_t;
#endif

#define AK_IN(a, i)  ((const ak_t *) (a)->in[i])
#define AK_OUT(a, i) ((ak_t *) (a)->out[i])

#endif
