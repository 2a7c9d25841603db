/*  lib/akprofile/akprofile.h: libakprofile, the runtime side of akfleet.

    An inference runtime links this library to apply an installed profile:
    it loads a package written by `akctl profile export` (profile.json,
    content-addressed kernel sources, SHA256SUMS), verifies it, matches the
    current device to one of the profile's device classes and answers
    "which kernel, with which parameters and launch configuration, for this
    (operator, shape, dtype)".

    Rules:
    - a package that fails verification (a changed, missing or extra file,
      a path that would leave the directory, a link) is refused as a whole;
    - a lookup answers an exact match of device class, operator, every
      dimension and dtype, or AKP_FALLBACK with the reason: never a near
      match (a kernel tuned for 4096 columns is not applied to 4097);
    - nothing here needs ZeroMQ, LMDB or a GPU: libcuda is opened with
      dlopen only by akp_device_from_cuda and akp_launch.

    Thread safety: a loaded profile is read-only; lookups from many threads
    are safe.  Every string a profile hands out lives as long as it. */
#ifndef AKPROFILE_H
#define AKPROFILE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    AKP_OK        =  0,
    AKP_FALLBACK  =  1,     /* lookup: nothing applies; run your default kernel */
    AKP_EINVAL    = -1,     /* bad argument or malformed profile.json */
    AKP_EIO       = -3,     /* a file could not be read */
    AKP_ENOTFOUND = -4,
    AKP_ETAMPERED = -20,    /* the package does not match its checksums */
    AKP_EUNAVAIL  = -17,    /* no GPU / no libcuda (akp_device_from_cuda, akp_launch) */
    AKP_ELAUNCH   = -30,    /* a CUDA call of akp_launch failed: err names the CUDA error */
};

#define AKP_MAX_DIMS   8
#define AKP_MAX_BUFS   8
#define AKP_MAX_PARAMS 16

#define AKP_MAX_TMAPS  8
#define AKP_MAX_RANK   5

typedef struct akp_profile akp_profile_t;

/* One TMA tensor map of an entry (kernel ABI 2), evaluated for its shape:
   what cuTensorMapEncodeTiled takes besides the buffer's address and the
   data type (the entry's dtype).  Owned by the profile. */
typedef struct {
    const char *name;               /* "tm_q" */
    bool        output;             /* over output buffer index (else input) */
    unsigned    index;
    unsigned    rank;               /* 1..5 */
    uint64_t    dims[AKP_MAX_RANK];         /* elements, innermost first */
    uint64_t    strides[AKP_MAX_RANK - 1];  /* bytes of dims 1..rank-1 */
    unsigned    box[AKP_MAX_RANK];
    unsigned    elem_bytes;
    unsigned    swizzle, l2, oob;   /* the driver's enum values */
    bool        absent;             /* passed as 128 zero bytes (the kernel's other path) */
} akp_tmap_t;

/* What identifies a device class: the fields the profile recorded. */
typedef struct {
    const char *name;               /* "NVIDIA H200" (spaces allowed) */
    int         cc_major, cc_minor; /* 9, 0 */
    int         driver_major;       /* 580 (kernel driver release major) */
    const char *nvrtc_version;      /* "13.0" */
} akp_device_t;

/* One installed entry: the answer of a lookup.  Owned by the profile. */
typedef struct {
    const char    *op, *key, *dtype, *workload;
    const char    *candidate;       /* "blocked" */
    const char    *backend;         /* "cuda" | "host" */
    const char    *entry;           /* kernel symbol: "ak_kernel" */
    size_t         ndims;
    const char    *keys[AKP_MAX_DIMS];
    int64_t        dims[AKP_MAX_DIMS];
    size_t         nparams;
    const char    *param_names[AKP_MAX_PARAMS];   /* become -DNAME=VALUE */
    int64_t        param_values[AKP_MAX_PARAMS];
    bool           has_launch;      /* cuda entries */
    unsigned       grid[3], block[3], shared_bytes;
    size_t         ninputs, noutputs;
    const char    *input_names[AKP_MAX_BUFS], *output_names[AKP_MAX_BUFS];
    int64_t        input_counts[AKP_MAX_BUFS], output_counts[AKP_MAX_BUFS];
    const char    *source;          /* kernel source (without the prelude) */
    size_t         source_len;
    const char    *source_name, *source_digest;
    const char    *prelude;         /* the ABI header to prepend (kernels/ak_kernel_cuda.h) */
    size_t         prelude_len;
    double         speedup, noise;  /* measured for this workload */
    const char    *batch_id, *task_id;
    size_t         nevidence;
    const char    *evidence[4];     /* receipt ids */
    /* The entry's kind: "kernel", or "vendor" where no candidate beat the
       spec's vendor-library baseline (cuBLASLt) beyond the noise and the
       library call stays.  A vendor entry has no kernel (entry "", source
       and prelude NULL, no launch): akp_lookup answers AKP_FALLBACK with
       its reason; candidate, params, speedup and noise are then the best
       candidate's, which did not win.  "" in the strings below for a
       kernel.  (Appended: the fields above keep their offsets.) */
    const char    *kind;
    const char    *vendor;          /* "cublaslt" */
    const char    *vendor_op;       /* "matmul" */
    const char    *reason;          /* why the library stays */
    double         baseline_us;     /* the baseline's (the library's) median time */
    /* Kernel ABI 2 (appended): the architecture the kernel must be built
       for ("sm_90a"; "" for the device's own sm_XY) and its TMA tensor
       maps, which akp_launch encodes over the buffers it is given and
       passes after the argument block (ntmaps 0: ABI 1). */
    const char    *arch;
    size_t         ntmaps;
    akp_tmap_t     tmaps[AKP_MAX_TMAPS];
} akp_kernel_t;

/* Checks dir against its SHA256SUMS: every regular file under dir (but
   SHA256SUMS) listed, every listed file present with that SHA-256, paths
   relative and inside dir, no links or other file types.  AKP_OK or
   AKP_ETAMPERED / AKP_EIO / AKP_EINVAL with err (may be NULL) saying which
   file and what is wrong. */
int akp_verify (const char *dir, char *err, size_t errlen);

/* Verifies and loads the package in dir.  *p is the caller's
   (akp_destroy). */
int akp_load (const char *dir, akp_profile_t **p, char *err, size_t errlen);
void akp_destroy (akp_profile_t **p);

const char *akp_name (const akp_profile_t *p);
size_t      akp_class_count (const akp_profile_t *p);
const char *akp_class_name (const akp_profile_t *p, size_t i);
size_t      akp_entry_count (const akp_profile_t *p, size_t class_index);
const akp_kernel_t *akp_entry (const akp_profile_t *p, size_t class_index, size_t i);

/* The class string akfleet's CUDA worker forms for a device:
   "NAME/sm_XY/drvN/nvrtcA.B" with every character outside [A-Za-z0-9_./-]
   (the spaces of the name) replaced by '_'.  AKP_EINVAL when buf is too
   small or fields are missing. */
int akp_device_class (const akp_device_t *dev, char *buf, size_t len);

/* Fills dev (strings in the caller's name_buf / nvrtc_buf) and class_buf
   for CUDA device ordinal, through libcuda (and libnvrtc for its version)
   opened with dlopen.  AKP_EUNAVAIL with err when there is no driver, no
   device, or no NVRTC: the caller then runs its defaults. */
int akp_device_from_cuda (int ordinal, akp_device_t *dev, char *name_buf, size_t name_len,
                          char *nvrtc_buf, size_t nvrtc_len, char *class_buf, size_t class_len,
                          char *err, size_t errlen);

/* Which of the profile's classes this device is: the class string must be
   equal and, when dev is not NULL, the recorded name, compute capability,
   driver major and NVRTC version too.  AKP_OK with *index, or
   AKP_FALLBACK with why (naming the closest class and what differs, so
   an operator sees why; it is never used). */
int akp_match (const akp_profile_t *p, const char *device_class, const akp_device_t *dev,
               size_t *index, char *why, size_t whylen);

/* The kernel for (op, dims in the operator's key order, dtype) on
   device_class: AKP_OK with *k, AKP_FALLBACK with why ("no entry for
   softmax rows=32,cols=129 float32 on CLASS: run the default kernel"),
   AKP_EINVAL for bad arguments.  An entry this library does not apply (a
   vendor entry, a thread-block cluster, tensor maps a package of before
   their configurations were recorded) is AKP_FALLBACK too, why carrying the
   entry's reason ("entry for matmul 64x64x64 float16 on CLASS: vendor
   entry: no candidate beat cuBLASLt beyond the noise: ...: run the
   default kernel (the vendor library cublaslt)"). */
int akp_lookup (const akp_profile_t *p, const char *device_class, const char *op,
                const int64_t *dims, size_t ndims, const char *dtype,
                const akp_kernel_t **k, char *why, size_t whylen);

/* NVRTC options for k as akfleet's worker compiles it (without the
   architecture, the language standard and the half-precision include
   folder): "-DAK_DTYPE_FLOAT32=1", "-DNAME=VALUE" ... (the worker's text,
   so a binding's cache key is the worker's: ak_cuda_options), written into
   opts[0..*n) pointing into buf.  AKP_EINVAL when buf or opts are too small. */
int akp_compile_options (const akp_kernel_t *k, char *buf, size_t len, const char **opts,
                         size_t max_opts, size_t *n);

/* sizeof (akp_kernel_t) as this library was built: a binding that mirrors
   the struct (lib/akprofile/python) refuses a library it does not fit. */
size_t akp_kernel_size (void);

/* The argument block every akfleet CUDA kernel takes by value
   (kernels/ak_kernel_cuda.h: ak_cuda_args_t): k's dims, then the device
   pointers in[0..nin) and out[0..nout) in the entry's input and output
   order.  nin and nout must be k's counts, no pointer 0.  Writes
   AKP_ARGS_BYTES into block; AKP_OK or AKP_EINVAL with err. */
#define AKP_ARGS_BYTES 216
int akp_launch_args (const akp_kernel_t *k, const uint64_t *in, size_t nin, const uint64_t *out,
                     size_t nout, void *block, size_t len, char *err, size_t errlen);

/* Launches k on stream (a CUstream; NULL the legacy default stream) as the
   worker does: function is the CUfunction k->entry of the module built
   from k's source with its compile options (for k->arch where it names
   one), the grid, block and dynamic shared memory are k's (opting in
   above 48 KiB), the parameters the akp_launch_args block and then k's
   tensor maps, each encoded with cuTensorMapEncodeTiled over the buffer
   it names (an in or out pointer: 16-byte aligned, or AKP_EINVAL).  Asynchronous, like cuLaunchKernel; libcuda is
   opened with dlopen, the caller's context must be current.  AKP_OK;
   AKP_EINVAL (not a CUDA entry, counts or pointers wrong); AKP_EUNAVAIL
   (no libcuda); AKP_ELAUNCH with *cuda_rc (may be NULL) and err naming the
   call and the CUDA error ("cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1) for
   ..."). */
int akp_launch (const akp_kernel_t *k, void *function, void *stream, const uint64_t *in, size_t nin,
                const uint64_t *out, size_t nout, int *cuda_rc, char *err, size_t errlen);

/* The hot path of a binding that launches one entry many times (a model's
   step): akp_launch_prepare checks k once (a CUDA entry, libcuda there),
   opts function in to k's dynamic shared memory above 48 KiB, and tells
   where the block's pointers lie: the byte offset of in[0] and of out[0]
   in the AKP_ARGS_BYTES block (each pointer 8 bytes after the previous;
   written even when the answer is an error).
   The caller then fills a block once with akp_launch_args, overwrites only
   the pointers per call, and calls akp_launch_block: cuLaunchKernel with
   k's grid, block and shared memory and that block (k's tensor maps
   encoded over the block's pointers at each call), nothing else checked,
   the CUDA result returned as it is (0 = CUDA_SUCCESS; name it with
   cuGetErrorName; a map the driver refuses is its error).  A block is the caller's: one per thread.
   akp_launch_prepare: AKP_OK, AKP_EINVAL, AKP_EUNAVAIL or AKP_ELAUNCH
   with *cuda_rc and err as akp_launch. */
int akp_launch_prepare (const akp_kernel_t *k, void *function, size_t *in_offset, size_t *out_offset,
                        int *cuda_rc, char *err, size_t errlen);
int akp_launch_block (const akp_kernel_t *k, void *function, void *stream, void *block);

#ifdef __cplusplus
}
#endif
#endif
