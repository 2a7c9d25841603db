/*  worker/timing.h: timing one workload, over the backend table.

    Warm-up runs, then samples until there are at least min_samples and the
    relative spread meets rsd_target, or max_samples, or max_time_ms of wall
    time.  With a baseline, baseline and candidate are sampled in interleaved
    rounds in the same process (the order alternating each round), so drift
    of clocks and caches hits both alike.  docs/measurement.md says which
    figure means what.  Never owns the kernels or the device. */
#ifndef AK_WORKER_TIMING_H
#define AK_WORKER_TIMING_H
#include <stdbool.h>
#include <stdint.h>
#include "backend.h"
#include "error.h"
#include "spec.h"
#include "stats.h"

typedef struct {
    const ak_spec_t    *spec;
    const ak_backend_t *be;
    ak_dev_t           *dev;
    ak_kernel_t        *cand;          /* measured kernel (preflight: the baseline) */
    ak_kernel_t        *base;          /* interleaved baseline; NULL for preflight */
    uint32_t            warmup;        /* runs of each before sampling */
    uint32_t            min_samples;
    uint32_t            max_samples;
    double              rsd_target;    /* on ak_timing_rsd */
    uint32_t            max_time_ms;   /* wall budget of one workload */
    bool                cold;          /* caches made cold before each sample */
    uint64_t            seed;          /* input generator seed */
    const int64_t      *params;
    const char *const  *param_names;
    int                 nparams;
} ak_timing_ctx_t;

typedef struct {
    ak_stats_t cand, base;             /* microseconds; base.n == 0 without a baseline */
    double     rsd_cand, rsd_base;     /* ak_timing_rsd of each */
    double     speedup;                /* median of paired base/cand ratios; 0 without a baseline */
    double     speedup_noise;          /* half-width of a ~95% CI of that median */
    bool       rsd_met;                /* every measured kernel met rsd_target */
    double     flops, bytes;           /* from the spec expressions */
    double     ms;                     /* wall time spent, warm-up included */
} ak_timing_result_t;

/* Robust relative spread of a sample: (p90 - p10) / (2 * 1.2816 * median),
   the standard deviation a normal distribution with that inter-decile range
   would have, relative to the median.  One preempted sample cannot inflate
   it the way it inflates stddev/mean.  0 when the median is 0. */
double ak_timing_rsd (const ak_stats_t *s);

/* Measures workload w (dims in spec key order, dtype) into out.  Returns 0,
   or a negative code when a launch or buffer operation failed, err naming it. */
int ak_timing_measure (const ak_timing_ctx_t *ctx, const int64_t *dims, ak_dtype_t dt,
                       ak_timing_result_t *out, ak_err_t *err);

#endif
