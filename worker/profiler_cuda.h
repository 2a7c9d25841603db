/*  worker/profiler_cuda.h: the `profile` task kind, with the CUPTI range
    profiler (CUDA 13 API: cupti_range_profiler.h + cupti_profiler_host.h).

    One launch of the kernel under test per workload is profiled in auto
    range mode with kernel replay (CUPTI replays the launch once per pass,
    saving and restoring device memory around it), and the receipt gets the
    metrics of that launch plus what they mean against the spec's
    accounting: achieved bandwidth (spec bytes / gpu__time_duration) and
    FLOP rate (spec flops / gpu__time_duration).  docs/measurement.md
    ("Profiling") says what each figure is.

    Runs only inside an executor (it launches kernels).  Never: profile
    anything but the one launch it asks for (the range profiler is enabled
    around that launch only), or report a metric CUPTI did not evaluate.
    Everything here exists in every build: without CUDA headers the
    profiler answers AK_EUNAVAIL. */
#ifndef AK_PROFILER_CUDA_H
#define AK_PROFILER_CUDA_H
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "backend.h"
#include "error.h"
#include "spec.h"

/*  The metrics collected, in this order (values[] below), with the unit
    CUPTI gives them in. */
#define AK_PROFILE_NMETRICS 5
enum {
    AK_PM_TIME = 0,         /* gpu__time_duration.sum, nanoseconds */
    AK_PM_DRAM_READ,        /* dram__bytes_read.sum, bytes */
    AK_PM_DRAM_WRITE,       /* dram__bytes_write.sum, bytes */
    AK_PM_SM_PCT,           /* sm__throughput.avg.pct_of_peak_sustained_elapsed, % */
    AK_PM_DRAM_PCT,         /* dram__throughput.avg.pct_of_peak_sustained_elapsed, % */
};
extern const char *const ak_profile_metric_names[AK_PROFILE_NMETRICS];
extern const char *const ak_profile_metric_units[AK_PROFILE_NMETRICS];

/* ------------------------------------------------------- the profiler */

typedef struct ak_profiler ak_profiler_t;

/*  Starts a range-profiler session on the CUDA context current in this
    thread (an executor's, after a launch made it current) of device
    device_index: the CUPTI profiler initialized, the device's support
    checked, the range profiler enabled on the context, the configuration
    image for the metrics above built for its chip, a counter data image
    for one range allocated.  AK_EUNAVAIL (CUPTI or its profiler entry
    points missing, no context), AK_EUNSUPPORTED (the device or its set-up
    refuses profiling: vGPU, confidential compute ..., named), or the
    failing CUPTI call.  Caller destroys. */
int  ak_profiler_new (int device_index, ak_profiler_t **self_p, ak_err_t *err);

/*  Profiles exactly one launch: be->launch (dev, kernel, args) between
    range-profiler start and stop, then decodes the counters and
    evaluates the metrics into values[] (AK_PROFILE_NMETRICS, in the
    order above).  The launch's own error (AK_ECRASH, AK_EINVAL
    invalid_config ...) is returned as it is. */
int  ak_profiler_measure (ak_profiler_t *self, const ak_backend_t *be, ak_dev_t *dev,
                          ak_kernel_t *kernel, const ak_launch_t *args,
                          double values[AK_PROFILE_NMETRICS], ak_err_t *err);

/*  Replay passes the metrics take on this chip (0 before new succeeded). */
uint32_t ak_profiler_passes (const ak_profiler_t *self);

/*  Disables the range profiler, frees the images.  NULL-safe, idempotent. */
void ak_profiler_destroy (ak_profiler_t **self_p);

/* -------------------------------------------------- figures (no GPU) */

/*  The receipt's record of one workload's profile: the metrics with
    their units, duration in microseconds, and achieved rates against the
    spec's flops and bytes (zero where the duration is not positive and
    finite).  w is copied.  Caller owns the result (freed with the
    receipt). */
Ak__WorkloadProfile *ak_profile_to_pb (const Ak__Workload *w, const double values[AK_PROFILE_NMETRICS],
                                       double flops, double bytes, uint32_t passes);

/*  100 * achieved / peak: the share of a measured device peak; 0 where
    the peak is not positive and finite (not measured) or achieved is not
    finite and non-negative. */
double ak_profile_pct (double achieved, double peak);

/*  Records the device's measured peaks (ak_cuda_device_peaks: copy GB/s
    counting read + write, CUDA-core FP32 FMA GFLOP/s) in p, and the
    achieved rates as percentages of them (ak_profile_pct). */
void ak_profile_apply_peaks (Ak__WorkloadProfile *p, double copy_gbps, double fp32_gflops);

/* -------------------------------------------------- the task (executor) */

typedef struct {
    const ak_spec_t     *spec;
    const ak_backend_t  *be;
    ak_dev_t            *dev;
    const Ak__Device    *device;               /* index: the device ordinal */
    ak_kernel_t *const  *kernel;               /* [AK_DT_COUNT]: under test, per element type */
    const ak_launch_rule_t *rule;              /* its launch rule (CUDA: required) */
    const char *const   *param_names;
    const int64_t       *params;
    int                  nparams;
    const Ak__Assign    *assign;               /* workloads (names, dims, dtype) */
    const ak_workload_t *workloads;            /* the same, checked against the spec */
    size_t               nworkloads;
    uint64_t             seed;                 /* input generator seed */
    const char          *role;                 /* "candidate" | "baseline": KernelRecord.role */
} ak_profile_ctx_t;

/*  Profiles every workload whose dtype has a kernel: inputs generated
    (seed), outputs poisoned, one plain launch (loads the module, gives
    CUPTI's activity record: a KernelRecord in r->kernels), inputs
    restored, then one profiled launch; appends a WorkloadProfile per
    workload to r->profiles.  *skipped counts workloads without a kernel.
    0, or the first failure (err names workload and call): AK_EINVAL from
    a launch rule or the device's limits is the candidate's
    (invalid_config); AK_EUNAVAIL / AK_EUNSUPPORTED mean this worker
    cannot profile. */
int  ak_profile_run (const ak_profile_ctx_t *ctx, Ak__Receipt *r, size_t *skipped, ak_err_t *err);

#endif
