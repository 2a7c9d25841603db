/*  worker/backend.h: the table of functions a backend implements.

    Two backends implement it: the host backend (backend_host.h: C kernels
    built with the system compiler, run on the CPU: the whole pipeline works
    without a GPU) and the CUDA backend (backend_cuda.h: NVRTC, libcuda,
    CUPTI through dlopen).  Gates and timing (worker/gates.c,
    worker/timing.c) are written once over this table; backends.h finds a
    backend by name.  This header names neither implementation.

    Two sides:
    - daemon side (probe, compile) runs in the worker daemon; compile must be
      thread-safe (it runs on the compile pool);
    - executor side (open ... time) runs only inside an executor child process
      that owns the device, so a crash or hang there never takes the daemon.

    Buffers are opaque "device pointers": host memory for the host backend,
    CUdeviceptr (cast) for CUDA.  Every function returns 0 or a negative
    AK_E... code with err filled (the failing call named). */
#ifndef AK_BACKEND_H
#define AK_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdatomic.h>
#include "akfleet.pb-c.h"
#include "digest.h"
#include "error.h"
#include "space.h"
#include "spec.h"

typedef struct ak_dev ak_dev_t;        /* executor-side device context */
typedef struct ak_kernel ak_kernel_t;  /* a loaded kernel */

typedef struct {
    uint32_t registers, local_bytes, static_shared, max_threads;
    bool     library;
} ak_kernel_budget_t;

/* What compare() found (see there): counts as worker/gates_cmp.c counts. */
typedef struct {
    uint64_t unwritten, overflowed, nonfinite, beyond;
    uint64_t want_nonfinite;           /* reference elements that are NaN/Inf */
    uint64_t first;                    /* least unwritten/nonfinite/beyond index; UINT64_MAX none */
    double   worst;                    /* largest |got - want| where both are finite */
    uint64_t want_sum;                 /* keyed sum of want's bits (the key compare was given) */
} ak_dcmp_t;

typedef struct {
    const char     *source;            /* kernel source as given (no prelude) */
    size_t          source_len;
    bool            reference;         /* the float64 oracle: -DAK_REFERENCE, double buffers */
    ak_dtype_t      dtype;             /* element type for kernels */
    const char     *define_names[AK_MAX_PARAMS];
    int64_t         define_values[AK_MAX_PARAMS];
    int             ndefines;
    const char     *cache_dir;         /* content-addressed artifact cache */
    uint32_t        timeout_ms;        /* compile limit; AK_ETIMEOUT past it */
    const Ak__Device *device;          /* compile target (architecture for CUDA) */
    /* CUDA: the spec entry's "arch" ("sm_90a"): built for it, refused
       (AK_EUNSUPPORTED, before any compile) on a device it does not run
       on (ak_arch_check).  NULL: the device's own sm_XY. */
    const char     *arch;
    /* CUDA: the source is a library baseline's marker (spec_cuda.h): no
       compile; the artifact is the marker, which load opens as a library
       call.  Only a baseline the spec declares a library sets it. */
    bool            library;
    /* Optional: when non-NULL and it becomes non-zero, a running compile is
       abandoned (compiler killed, nothing cached) with AK_ETIMEOUT and err
       saying "cancelled".  Lets a daemon shut down without waiting for a
       slow compiler. */
    const atomic_int *cancel;
    /* Optional: what the kernel is called in errors ("candidate
       row_warp"); NULL: "kernel". */
    const char     *name;
} ak_compile_req_t;

typedef struct {
    char   *artifact_path;             /* in cache_dir; caller frees */
    char   *log;                       /* compiler output, may be ""; caller frees */
    char    key[65];                   /* cache key: source, options, target, compiler version */
    char    options_digest[65];        /* sha256 of the options alone */
    bool    cached;                    /* true: no compile happened */
    double  ms;                        /* compile wall time */
} ak_compile_out_t;

typedef struct {
    int64_t     dims[AK_MAX_DIMS];
    int         ndims;
    void       *in[AK_MAX_BUFS];
    int         nin;
    void       *out[AK_MAX_BUFS];
    int         nout;
    ak_dtype_t  dtype;
    const int64_t *params;             /* candidate parameter values, for the record: the kernel got
                                          them as defines when it was built, and its launch rule
                                          was evaluated from them before the launch */
    const char *const *param_names;
    int         nparams;
    /* Launch configuration (the CUDA backend; the host backend ignores it).
       Zero means "backend default"; the CUDA backend has none and answers
       AK_EINVAL "launch configuration missing" until spec launch rules
       fill these in. */
    uint32_t    grid[3], block[3], shared_bytes;
    /* Thread-block cluster (0 or 1 each: none) and the kernel's tensor
       maps, evaluated and checked (borrowed from the ak_launch_cfg_t they
       came from, which must outlive the launch).  The CUDA backend encodes
       the maps over in[] / out[] and passes them after the argument block. */
    uint32_t    cluster[3];
    const ak_tmap_cfg_t *tmaps;
    int         ntmaps;
} ak_launch_t;

/*  Copies an evaluated launch configuration into l (grid, block, shared,
    cluster; tmaps borrowed from lc). */
void ak_launch_apply (const ak_launch_cfg_t *lc, ak_launch_t *l);

/*  What the backend knows about one launch of a kernel beyond its time:
    the CUDA backend fills it from the CUPTI activity record of the launch. */
typedef struct {
    char     name[128];                /* kernel symbol as the device saw it ("ak_kernel") */
    uint32_t registers;                /* per thread */
    uint32_t static_shared, dynamic_shared;   /* bytes per block */
    uint32_t grid[3], block[3];
    double   duration_us;              /* device duration of that launch */
} ak_kernel_info_t;

/*  One timing sample with every figure the backend can give (sample()).
    event_us is always there: CUDA events around the launch (cuda), the
    monotonic clock around the call (host).  cupti_us >= 0 only when a
    device-side record of the same launch exists.  clock_ok false means
    the sample must not be used: the SM clock over the measured region was
    under 75% of the device's default clock (throttled). */
typedef struct {
    double   event_us;
    double   cupti_us;                 /* < 0: none */
    bool     clock_ok;
    double   sm_clock_mhz;             /* measured over the sample; 0: not measured */
    bool     blocked;                  /* the launch waited behind a blocking kernel, so
                                          event_us carries no submission latency */
    bool     has_info;                 /* info holds the launch's record */
    ak_kernel_info_t info;
} ak_sample_t;

typedef struct ak_backend {
    const char *name;                  /* "host" | "cuda" */

    /* ---- daemon side ---- */
    /* Enumerates devices: *devices_p is a malloc'ed array of *n_p devices,
       each freed with ak__device__free_unpacked (d, NULL), strings malloc'ed.
       A backend without devices here returns AK_EUNAVAIL with err saying why. */
    int  (*probe) (Ak__Device ***devices_p, size_t *n_p, ak_err_t *err);
    /* Compiles into the cache (atomic: temp file then rename); a hit does no
       work.  AK_ECOMPILE with out->log on a compiler error. */
    int  (*compile) (const ak_compile_req_t *req, ak_compile_out_t *out, ak_err_t *err);

    /* ---- executor side ---- */
    int  (*open) (const Ak__Device *device, ak_dev_t **dev_p, ak_err_t *err);
    void (*close) (ak_dev_t **dev_p);
    int  (*load) (ak_dev_t *dev, const char *artifact_path, const char *symbol,
                  ak_kernel_t **kernel_p, ak_err_t *err);
    void (*unload) (ak_dev_t *dev, ak_kernel_t **kernel_p);
    int  (*alloc) (ak_dev_t *dev, size_t bytes, void **buf_p, ak_err_t *err);
    void (*release) (ak_dev_t *dev, void **buf_p);
    int  (*upload) (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err);
    int  (*download) (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err);
    int  (*fill) (ak_dev_t *dev, void *dst, int byte, size_t bytes, ak_err_t *err);
    /* Runs the kernel once; it has finished when this returns. */
    int  (*launch) (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, ak_err_t *err);
    /* One timing sample in microseconds of device time: caches made cold
       (when cold is set) before the clock starts, only the launch inside it. */
    int  (*time) (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                  double *us, ak_err_t *err);
    /* Optional (NULL: worker/timing.c uses time() and names the figure
       after the backend).  One sample like time(), with every figure the
       backend has (ak_sample_t): the CUDA backend hides the submission
       latency behind a blocking kernel, reads the launch's CUPTI record
       and the SM clock over the measured region. */
    int  (*sample) (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                    ak_sample_t *out, ak_err_t *err);

    /* ---- both sides ---- */
    /* True when kernels for element type dt can be built and run on device
       (the host backend: float32 only).  Gates report the others as skipped. */
    bool (*supports_dtype) (const Ak__Device *device, ak_dtype_t dt);

    /* ---- executor side, optional ---- */
    /* NULL: inputs are generated on the host and uploaded.  Else fills buf
       on the device with ak_rng_range (seed, stream, i, lo, hi) for i < n,
       rounded and stored exactly as worker/data.c does, by the generator
       kernel `gen` (the CUDA backend: symbol ak_fill_uniform of any module).
       code: an ak_dtype_t, 3 for float64, or AK_GEN_AS_F64 + an ak_dtype_t
       (that type's value stored as a double: the device reference's input). */
    int  (*generate) (ak_dev_t *dev, ak_kernel_t *gen, void *buf, uint64_t n, uint64_t seed,
                      uint64_t stream, double lo, double hi, int code, ak_err_t *err);
    /* NULL: outputs are compared on the host.  Else judges the n elements
       of got (on the device; code an ak_dtype_t, or 3 for float64) against
       the float64 reference want (on the device) by the compare kernel
       `cmp` (the CUDA backend: symbol ak_compare of a device reference's
       module), classifying each as worker/gates_cmp.c does (poison: an
       element of all-0xFF bytes is unwritten), into *out, with a sum of
       want keyed by key (a secret: a kernel that writes to want cannot
       keep it).  Nothing but the counts crosses to the host. */
    int  (*compare) (ak_dev_t *dev, ak_kernel_t *cmp, const void *got, int code, const void *want,
                     uint64_t n, double atol, double rtol, double dmax, bool poison, uint64_t key,
                     ak_dcmp_t *out, ak_err_t *err);

    /* ---- executor side, optional: untraced timing (NULL: not offered) ---- */
    /* Turns the device-side kernel records that sample() reads (CUPTI's
       CONCURRENT_KERNEL activity) off or on.  Off, samples carry no
       cupti_us and the kernel runs without the tracer's cost (on an H200
       a 200 us copy ran 9% slower traced).  AK_EUNAVAIL when the backend
       records no kernels on dev. */
    int  (*kernel_trace) (ak_dev_t *dev, bool on, ak_err_t *err);
    /* The device's event floor in microseconds: what sample()'s event_us
       reads above the kernel's device duration (events around an empty
       kernel, untraced, minus its traced device duration; medians),
       calibrated once per device on first call.  AK_EUNAVAIL when it
       cannot be calibrated (no kernel records). */
    int  (*event_floor) (ak_dev_t *dev, double *us, ak_err_t *err);

    /* ---- executor side, optional: a loaded kernel's resources ---- */
    /* Registers and local memory per thread, static shared memory per
       block, the most threads per block; library true (and the rest 0)
       for a library call.  NULL: the backend has no such figures. */
    int  (*kernel_budget) (ak_kernel_t *kernel, ak_kernel_budget_t *out, ak_err_t *err);
} ak_backend_t;

/* Element type codes of generate() and compare() beside ak_dtype_t's. */
#define AK_GEN_F64    3
#define AK_GEN_AS_F64 4

/* For backends: the checks every compile starts with.  req and out given
   (out zeroed), a source of at most AK_MAX_SOURCE_BYTES without NUL bytes,
   a cache directory, and no include of a file outside the compiler's
   include paths (ak_sandbox_check_includes: absolute, '..', computed,
   .incbin); else AK_EINVAL or AK_ETOOBIG with err saying "WHO compile:
   ..." (who: the backend's name). */
int ak_compile_req_check (const ak_compile_req_t *req, ak_compile_out_t *out, const char *who,
                          ak_err_t *err);
/* For backends: a define name a compile accepts (an identifier of at most
   AK_MAX_NAME characters), and one length-prefixed part of a cache key
   ("LEN:" then the bytes, so no two lists of parts hash alike). */
bool ak_compile_define_ok (const char *s);
void ak_compile_key_part (ak_sha256_t *ctx, const void *data, size_t len);

/* The element type the daemon builds kernels for on this backend and
   device (one artifact per source): float32 where supported, else the
   first of bfloat16, float16 that is.  be NULL: float32. */
ak_dtype_t ak_backend_build_dtype (const ak_backend_t *be, const Ak__Device *device);

#endif
