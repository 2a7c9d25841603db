/*  worker/timing.h: timing one workload, over the backend table.

    Warm-up runs, then samples until there are at least min_samples and the
    relative spread meets rsd_target, or max_samples, or max_time_ms of wall
    time.  With a baseline, baseline and candidate are sampled in interleaved
    rounds in the same process (the order alternating each round), so drift
    of clocks and caches hits both alike.  docs/measurement.md says which
    figure means what.  Never owns the kernels or the device.

    Where the backend has sample() (CUDA), every sample carries the event
    time and, when CUPTI recorded the launch, its device duration; the
    headline figure (cand, base, speedup) is CUPTI's when every kept
    sample had one, else the events' (result.timer says which).  Rounds
    in which the SM clock was throttled are thrown away and counted. */
#ifndef AK_WORKER_TIMING_H
#define AK_WORKER_TIMING_H
#include <stdbool.h>
#include <stdint.h>
#include "backend.h"
#include "error.h"
#include "spec.h"
#include "stats.h"
#include "akfleet.pb-c.h"

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
    /* Launch configurations for the workload being measured (CUDA: from
       the spec's launch rules, ak_launch_eval); NULL: none (host). */
    const ak_launch_cfg_t *cand_launch;
    const ak_launch_cfg_t *base_launch;
    /* Optional: the backend's generator kernel (be->generate).  Set, the
       inputs are made on the device (the same values, never on the host);
       NULL: generated on the host and uploaded. */
    ak_kernel_t        *gen;
} ak_timing_ctx_t;

/*  Everything about one measured kernel beside its headline statistics. */
typedef struct {
    ak_stats_t       events;           /* event clock (host: monotonic clock) of the kept samples */
    ak_stats_t       cupti;            /* CUPTI device durations; n == 0 unless every kept sample had one */
    uint32_t         discarded;        /* samples thrown away: SM clock throttled */
    double           sm_clock_mhz;     /* median SM clock over the kept samples; 0 unknown */
    bool             has_info;
    ak_kernel_info_t info;             /* the last kept sample's launch record */
} ak_timing_detail_t;

/*  Rounds thrown away for throttling stop being thrown away after this
    many (or max_samples, when larger): a GPU that stays throttled still
    gets measured, and the receipt shows it (discarded, sm_clock_mhz). */
#define AK_TIMING_MAX_DISCARDS 50

typedef struct {
    ak_stats_t cand, base;             /* headline figure, microseconds; base.n == 0 without a baseline */
    double     rsd_cand, rsd_base;     /* ak_timing_rsd of each */
    double     speedup;                /* median of paired base/cand ratios; 0 without a baseline */
    double     speedup_noise;          /* half-width of a ~95% CI of that median */
    bool       rsd_met;                /* every measured kernel met rsd_target */
    double     flops, bytes;           /* from the spec expressions */
    double     ms;                     /* wall time spent, warm-up included */
    const char *timer;                 /* the headline's clock: "cupti" | "events" | "host" (static) */
    ak_timing_detail_t detail[2];      /* 0: candidate, 1: baseline */
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

/*  The figures of r beyond the headline into the receipt: t->timer, the
    events and CUPTI statistics of each kernel (t->candidate_events ...),
    discarded samples and SM clock on every Stats of t (t->candidate and
    t->baseline must already be set from r->cand / r->base, or be NULL),
    and, when receipt is not NULL, one KernelRecord per kernel with a
    launch record (role "candidate" / "baseline", the workload's name).
    Everything added is heap-owned by t and receipt, freed by
    ak__receipt__free_unpacked. */
void ak_timing_to_pb (const ak_timing_result_t *r, const char *workload, Ak__WorkloadTiming *t,
                      Ak__Receipt *receipt);

#endif
