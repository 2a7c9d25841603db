/*  lib/akprofile/akp_launch.c: launching an entry's kernel the way akfleet's
    worker does (the ak_cuda_args_t block of kernels/ak_kernel_cuda.h, by
    value, then the entry's TMA tensor maps (kernel ABI 2), each encoded
    with cuTensorMapEncodeTiled over the buffer it names; the entry's grid,
    block and dynamic shared memory), through libcuda opened with dlopen.
    The block's layout lives here once for every binding (the Python one
    packs nothing itself).

    Never: allocates device memory, synchronizes, or loads modules: the
    caller owns the function, the stream and the buffers. */
#include "akprofile.h"
#include "akp_private.h"

#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* kernels/ak_kernel_cuda.h: ak_cuda_args_t (static_assert there: 216). */
typedef struct {
    long long   dims[AKP_MAX_DIMS];
    int         ndims;
    const void *in[AKP_MAX_BUFS];
    int         nin;
    void       *out[AKP_MAX_BUFS];
    int         nout;
} s_args_t;
_Static_assert (sizeof (s_args_t) == AKP_ARGS_BYTES, "ak_cuda_args_t layout");

#define S_SHARED_DEFAULT  (48u << 10)  /* above this a kernel must opt in */
#define S_ATTR_MAX_DYN_SHARED 8         /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */

int akp_launch_args (const akp_kernel_t *k, const uint64_t *in, size_t nin, const uint64_t *out,
                     size_t nout, void *block, size_t len, char *err, size_t errlen)
{
    if (!k || !block || len < AKP_ARGS_BYTES || (nin && !in) || (nout && !out))
        return akp_errf (err, errlen, AKP_EINVAL, "akp_launch_args: missing argument or block under %d bytes",
                       AKP_ARGS_BYTES);
    if (nin != k->ninputs || nout != k->noutputs)
        return akp_errf (err, errlen, AKP_EINVAL, "%s (%s): %zu inputs and %zu outputs given, the entry has %zu and %zu",
                       k->op, k->candidate, nin, nout, k->ninputs, k->noutputs);
    s_args_t a;
    memset (&a, 0, sizeof a);
    for (size_t i = 0; i < k->ndims; i++)
        a.dims[i] = k->dims[i];
    a.ndims = (int) k->ndims;
    for (size_t i = 0; i < nin; i++) {
        if (!in[i])
            return akp_errf (err, errlen, AKP_EINVAL, "%s: input %zu (%s) is a null pointer", k->op, i,
                           k->input_names[i]);
        a.in[i] = (const void *) (uintptr_t) in[i];
    }
    for (size_t i = 0; i < nout; i++) {
        if (!out[i])
            return akp_errf (err, errlen, AKP_EINVAL, "%s: output %zu (%s) is a null pointer", k->op, i,
                           k->output_names[i]);
        a.out[i] = (void *) (uintptr_t) out[i];
    }
    a.nin = (int) nin;
    a.nout = (int) nout;
    memcpy (block, &a, sizeof a);
    return AKP_OK;
}

// ------------------------------------------------------------------ libcuda

typedef int (s_launch_fn) (void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           void *, void **, void **);
/* cuTensorMapEncodeTiled with the driver API's plain C types */
typedef int (s_encode_fn) (void *, int, unsigned, void *, const uint64_t *, const uint64_t *, const unsigned *,
                           const unsigned *, int, int, int, int);
static struct {
    void        *lib;
    s_launch_fn *launch;
    s_encode_fn *encode;                /* NULL before CUDA 12: entries with tensor maps then fail */
    int        (*set_attr) (void *, int, int);
    int        (*error_name) (int, const char **);
    char         why[256];
} s_cu;
static pthread_once_t s_cu_once = PTHREAD_ONCE_INIT;

static void s_cu_open (void)
{
    s_cu.lib = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!s_cu.lib) {
        snprintf (s_cu.why, sizeof s_cu.why, "no CUDA driver: %s", dlerror ());
        return;
    }
    *(void **) &s_cu.launch = dlsym (s_cu.lib, "cuLaunchKernel");
    *(void **) &s_cu.set_attr = dlsym (s_cu.lib, "cuFuncSetAttribute");
    *(void **) &s_cu.error_name = dlsym (s_cu.lib, "cuGetErrorName");
    *(void **) &s_cu.encode = dlsym (s_cu.lib, "cuTensorMapEncodeTiled");
    if (!s_cu.launch || !s_cu.set_attr)
        snprintf (s_cu.why, sizeof s_cu.why, "libcuda.so.1 lacks cuLaunchKernel or cuFuncSetAttribute");
}

static int s_cuda_fail (int rc, const char *call, const akp_kernel_t *k, int *cuda_rc, char *err, size_t errlen)
{
    const char *name = NULL;
    if (!s_cu.error_name || s_cu.error_name (rc, &name) != 0 || !name)
        name = "CUDA_ERROR_UNKNOWN";
    if (cuda_rc)
        *cuda_rc = rc;
    return akp_errf (err, errlen, AKP_ELAUNCH, "%s: %s (%d) for %s %s (%s)", call, name, rc, k->op, k->key,
                   k->candidate);
}

// ------------------------------------------------------------ tensor maps

#define S_CUDA_INVALID_VALUE 1          /* CUDA_ERROR_INVALID_VALUE */
/* CUtensorMapDataType: FLOAT16 6, FLOAT32 7, BFLOAT16 9 */
#define S_TMAP_F16  6
#define S_TMAP_F32  7
#define S_TMAP_BF16 9

typedef struct {
    _Alignas (64) unsigned char b[128];  /* a CUtensorMap */
} s_map_t;

/*  The kernel's parameters: params[0] the argument block, then k's tensor
    maps encoded into maps over the block's buffers (absent ones 128 zero
    bytes, as the worker passes them; cuTensorMapEncodeTiled at every
    launch, a few microseconds of host time a map); 0, the driver's
    refusal, or -1 for a buffer not 16-byte aligned (*bad: the map). */
static int s_params (const akp_kernel_t *k, void *block, s_map_t *maps, void **params, size_t *bad)
{
    params[0] = block;
    if (!k->ntmaps)
        return 0;                       /* kernel ABI 1: nothing more on the hot path */
    /* the pointers, copied out of the block (a caller's block need not be
       aligned for s_args_t) */
    const void *in[AKP_MAX_BUFS], *out[AKP_MAX_BUFS];
    memcpy (in, (const char *) block + offsetof (s_args_t, in), sizeof in);
    memcpy (out, (const char *) block + offsetof (s_args_t, out), sizeof out);
    int dt = k->tmaps[0].elem_bytes == 4 ? S_TMAP_F32 : strcmp (k->dtype, "bfloat16") == 0 ? S_TMAP_BF16 : S_TMAP_F16;
    for (size_t i = 0; i < k->ntmaps; i++) {
        const akp_tmap_t *m = &k->tmaps[i];
        *bad = i;
        memset (maps[i].b, 0, sizeof maps[i].b);
        params[1 + i] = maps[i].b;
        if (m->absent)
            continue;
        const void *addr = m->output ? out[m->index] : in[m->index];
        if (!addr || (uintptr_t) addr % 16 != 0)
            return -1;
        unsigned estr[AKP_MAX_RANK] = { 1, 1, 1, 1, 1 };
        int r = s_cu.encode (maps[i].b, dt, m->rank, (void *) addr, m->dims, m->strides, m->box, estr, 0,
                             (int) m->swizzle, (int) m->l2, (int) m->oob);
        if (r)
            return r;
    }
    return 0;
}

//  A CUDA entry, libcuda opened, function opted in to k's shared memory.
static int s_ready (const char *who, const akp_kernel_t *k, void *function, int *cuda_rc, char *err,
                    size_t errlen)
{
    if (cuda_rc)
        *cuda_rc = 0;
    if (!k || !function)
        return akp_errf (err, errlen, AKP_EINVAL, "%s: no entry or no function", who);
    if (strcmp (k->backend, "cuda") != 0 || !k->has_launch)
        return akp_errf (err, errlen, AKP_EINVAL, "%s: %s (%s) is a %s entry, not a CUDA one", who, k->op,
                       k->candidate, k->backend);
    pthread_once (&s_cu_once, s_cu_open);
    if (s_cu.why[0])
        return akp_errf (err, errlen, AKP_EUNAVAIL, "%s", s_cu.why);
    if (k->ntmaps && !s_cu.encode)
        return akp_errf (err, errlen, AKP_EUNAVAIL, "%s: %s (%s) takes TMA tensor maps and this libcuda has no "
                         "cuTensorMapEncodeTiled (CUDA 12 or newer)", who, k->op, k->candidate);
    if (k->shared_bytes > S_SHARED_DEFAULT) {
        int r = s_cu.set_attr (function, S_ATTR_MAX_DYN_SHARED, (int) k->shared_bytes);
        if (r)
            return s_cuda_fail (r, "cuFuncSetAttribute (MAX_DYNAMIC_SHARED_SIZE_BYTES)", k, cuda_rc, err, errlen);
    }
    return AKP_OK;
}

int akp_launch_prepare (const akp_kernel_t *k, void *function, size_t *in_offset, size_t *out_offset,
                        int *cuda_rc, char *err, size_t errlen)
{
    if (in_offset)                      /* the layout, also where no driver is (a binding's test) */
        *in_offset = offsetof (s_args_t, in);
    if (out_offset)
        *out_offset = offsetof (s_args_t, out);
    return s_ready ("akp_launch_prepare", k, function, cuda_rc, err, errlen);
}

int akp_launch_block (const akp_kernel_t *k, void *function, void *stream, void *block)
{
    if (!s_cu.launch)
        return 999;                     /* CUDA_ERROR_UNKNOWN: akp_launch_prepare never succeeded */
    void *params[1 + AKP_MAX_TMAPS];
    s_map_t maps[AKP_MAX_TMAPS];
    size_t bad = 0;
    int r = s_params (k, block, maps, params, &bad);
    if (r)
        return r < 0 ? S_CUDA_INVALID_VALUE : r;
    return s_cu.launch (function, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
                        k->shared_bytes, stream, params, NULL);
}

int akp_launch (const akp_kernel_t *k, void *function, void *stream, const uint64_t *in, size_t nin,
                const uint64_t *out, size_t nout, int *cuda_rc, char *err, size_t errlen)
{
    int rc = s_ready ("akp_launch", k, function, cuda_rc, err, errlen);
    if (rc)
        return rc;
    unsigned char block[AKP_ARGS_BYTES];
    rc = akp_launch_args (k, in, nin, out, nout, block, sizeof block, err, errlen);
    if (rc)
        return rc;
    void *params[1 + AKP_MAX_TMAPS];
    s_map_t maps[AKP_MAX_TMAPS];
    size_t bad = 0;
    int r = s_params (k, block, maps, params, &bad);
    if (r < 0)
        return akp_errf (err, errlen, AKP_EINVAL, "%s (%s): tensor map %s: its %s %u is not 16-byte aligned",
                         k->op, k->candidate, k->tmaps[bad].name, k->tmaps[bad].output ? "output" : "input",
                         k->tmaps[bad].index);
    if (r)
        return s_cuda_fail (r, "cuTensorMapEncodeTiled", k, cuda_rc, err, errlen);
    r = s_cu.launch (function, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
                         k->shared_bytes, stream, params, NULL);
    if (r)
        return s_cuda_fail (r, "cuLaunchKernel", k, cuda_rc, err, errlen);
    return AKP_OK;
}

size_t akp_kernel_size (void)
{
    return sizeof (akp_kernel_t);
}
