/*  worker/backend_cuda.h: what the CUDA backend offers beyond the table of
    worker/backend.h (ak_backend_find ("cuda") returns the table).

    Everything here exists in every build: without CUDA headers at build
    time the functions answer AK_EUNAVAIL, so callers need no #if. */
#ifndef AK_BACKEND_CUDA_H
#define AK_BACKEND_CUDA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "backend.h"

/*  The table, or NULL when this build has no CUDA headers.  On a host
    without a driver or GPU the table is still returned: its probe answers
    AK_EUNAVAIL with the reason ("CUDA driver: libcuda.so.1: cannot open
    shared object file: No such file or directory"), which the daemon logs. */
const ak_backend_t *ak_backend_cuda (void);

/* ------------------------------------------------------------- CUPTI */

/*  What CUPTI recorded for one kernel launch. */
typedef struct {
    double   us;                       /* device duration: (end - start) / 1000 */
    uint64_t start_ns, end_ns;         /* CUPTI timestamps */
    uint32_t correlation_id;
    uint32_t registers;                /* per thread */
    uint32_t static_shared, dynamic_shared;   /* bytes per block */
    uint32_t grid[3], block[3];
    char     name[128];                /* kernel name CUPTI gives ("ak_kernel"); "" when none */
} ak_cuda_kernel_record_t;

/*  The record of the last kernel launched on dev by launch() or time(),
    matched by CUPTI correlation id (an external correlation id pushed
    around each launch).  AK_EUNAVAIL when CUPTI is not in use on dev (err
    says why: library missing, activity API refused ...), AK_ENOTFOUND when
    no record came for that launch, AK_EINVAL without a launch yet. */
int ak_cuda_last_kernel (ak_dev_t *dev, ak_cuda_kernel_record_t *rec, ak_err_t *err);
/*  The same, only the device duration in microseconds. */
int ak_cuda_last_kernel_us (ak_dev_t *dev, double *us, ak_err_t *err);

/*  Whether dev records kernels with CUPTI; when not, *why_p (borrowed)
    says why.  Timing then uses CUDA events alone. */
bool ak_cuda_cupti_active (ak_dev_t *dev, const char **why_p);

/* ------------------------------------------------------------ timing */

/*  How dev takes timing samples (worker/backend_cuda_timing.c). */
typedef struct {
    bool        blocker;               /* launches wait behind a blocking kernel */
    const char *blocker_why;           /* borrowed: why not, when not */
    bool        clock_check;           /* the SM clock is measured over each sample */
    uint64_t    timer_tick_ns;         /* %globaltimer update step measured at open */
    uint32_t    default_clock_mhz;     /* the device's default SM clock (0: unknown) */
    bool        cupti;                 /* CUPTI kernel records (ak_cuda_cupti_active) */
} ak_cuda_timing_info_t;

/*  Fills info for dev.  AK_EINVAL without a device. */
int ak_cuda_timing_info (ak_dev_t *dev, ak_cuda_timing_info_t *info, ak_err_t *err);

/*  Kernel records (CUPTI CONCURRENT_KERNEL activity) off (on = false) or
    back on for dev: the backend's kernel_trace().  Off, sample() reads no
    CUPTI figure and the kernel runs without the tracer's cost.
    AK_EUNAVAIL when dev records no kernels. */
int ak_cuda_kernel_trace (ak_dev_t *dev, bool on, ak_err_t *err);

/*  dev's event floor in microseconds (the backend's event_floor()):
    median events around an empty kernel (one block of 32 threads, cold,
    behind the blocker, untraced) minus the median CUPTI duration of the
    same kernel in a traced pass, 50 samples each, calibrated on the first
    call and logged (ak_info).  AK_EUNAVAIL without kernel records. */
int ak_cuda_event_floor (ak_dev_t *dev, double *us, ak_err_t *err);

/*  The device's measured peaks, taken once per device (the first call,
    then cached for the device's life): copy bandwidth of a
    device-to-device cuMemcpyDtoDAsync between two buffers well beyond L2
    (1 GiB each, or 4x L2 and at least 512 MiB where free memory is
    short), counting read + write bytes, best of 5 event-timed copies; and
    the CUDA-core FP32 FMA peak (not tensor cores) of a PTX kernel of 8
    independent FMA chains per thread, 8 blocks of 256 threads per SM,
    2 FLOPs per FMA, best of 5.  AK_EUNAVAIL where memory is short; a
    failure is cached like the figures. */
typedef struct {
    double copy_gbps;                  /* 1e9 bytes/s, read + write */
    double copy_bytes;                 /* size of one buffer */
    double copy_ms;                    /* best copy */
    double fp32_gflops;                /* 1e9 FLOP/s */
    double fma_flops;                  /* per launch */
    double fma_ms;                     /* best launch */
} ak_cuda_peaks_t;
int ak_cuda_device_peaks (ak_dev_t *dev, ak_cuda_peaks_t *peaks, ak_err_t *err);

/* For bench_compute_ops alone: the cuBLASLt baselines planned from now on
   take the heuristic's algorithm index (0 to 15; 0, its best, is what
   every baseline runs) instead of its best, so a bench can time what
   timing the heuristic's candidates (as PyTorch's TunableOp does) would
   find.  A plan whose heuristic offers fewer fails with AK_EUNSUPPORTED. */
void ak_cuda_lib_bench_pick (int index);

/*  The ways others time a kernel, for comparison (tests/bench): no
    blocking kernel, no CUPTI correlation; when cold the L2 flush is
    queued first.  reps == 1: two events around one launch (what a plain
    event timer or Triton's do_bench sees per iteration, launch latency
    included); reps > 1: two events around reps back-to-back launches,
    divided by reps (warm after the first).  *us in microseconds. */
int ak_cuda_time_plain (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                        uint32_t reps, double *us, ak_err_t *err);

/*  The blocking kernel's bound, checked: launches it with the flag down
    and never releases it, then waits for the device.  *waited_ms is how
    long that took (about the blocker's 100 ms limit), *timed_out whether
    the kernel says it gave up.  AK_EUNAVAIL when dev has no blocker. */
int ak_cuda_blocker_selftest (ak_dev_t *dev, double *waited_ms, bool *timed_out, ak_err_t *err);

/* ------------------------------------------------- device-side inputs */

/*  Element type codes of the ak_fill_uniform kernel: ak_dtype_t's values,
    plus float64 (reference inputs). */
#define AK_CUDA_FILL_FLOAT64 3
/*  AK_CUDA_FILL_AS_F64 + dt: rounded to dt, stored as float64 (what the
    device reference is given). */
#define AK_CUDA_FILL_AS_F64  4

/*  Runs ak_fill_uniform (in every module the backend compiles; load it
    with symbol "ak_fill_uniform"): buf[i] = ak_rng_range (seed, stream, i,
    lo, hi) rounded to dtype as worker/data.c rounds, for i < n.  Finished
    when it returns. */
int ak_cuda_fill_uniform (ak_dev_t *dev, ak_kernel_t *fill, void *buf, uint64_t n,
                          uint64_t seed, uint64_t stream, double lo, double hi,
                          int dtype, ak_err_t *err);

/*  Runs ak_compare (in device references' modules; load it with symbol
    "ak_compare"): the n elements of got (code: an ak_dtype_t, or
    AK_CUDA_FILL_FLOAT64) against the float64 want, classified as
    worker/gates_cmp.c classifies them, counts into *out (backend.h's
    compare).  Finished when it returns. */
int ak_cuda_compare (ak_dev_t *dev, ak_kernel_t *cmp, const void *got, int code, const void *want,
                     uint64_t n, double atol, double rtol, double dmax, bool poison, uint64_t key,
                     ak_dcmp_t *out,
                     ak_err_t *err);

/* ---------------------------------------- compile plan (tests, tools) */

/*  The NVRTC options for req on a device of compute capability cc_major.
    cc_minor, one per line ("--gpu-architecture=sm_90\n--std=c++17\n..."),
    exactly what compile passes.  include_dir is the toolkit include folder
    for cuda_fp16.h (NULL: none; float16/bfloat16 then AK_EUNSUPPORTED).
    Caller frees *options_p.  AK_EINVAL for a bad define name. */
int ak_cuda_options (const ak_compile_req_t *req, int cc_major, int cc_minor,
                     const char *include_dir, char **options_p, ak_err_t *err);

/*  The content-addressed cache key: sha256 over the prelude, the source,
    the options, the architecture ("sm_90"), the NVRTC version ("13.0")
    and the digest of the toolkit half-precision headers ("" when none). */
void ak_cuda_cache_key (const char *source, size_t source_len, const char *options,
                        const char *arch, const char *nvrtc_version,
                        const char *headers_digest, char key[65]);

/*  The toolkit include folder holding cuda_fp16.h and cuda_bf16.h that
    compile passes to NVRTC ($CUDA_HOME/include, the toolkit CMake found,
    /usr/local/cuda/include), or NULL. */
const char *ak_cuda_include_dir (void);

#endif
