/*  worker/timing.h: timing one workload, over the backend table.

    Warm-up runs (fewer when one round is long: AK_TIMING_WARM_BUSY_US),
    then samples until there are at least min_samples and the
    relative spread meets rsd_target, or max_samples, or max_time_ms of wall
    time.  With a baseline, baseline and candidate are sampled in interleaved
    rounds in the same process (the order alternating each round), so drift
    of clocks and caches hits both alike.  docs/measurement.md says which
    figure means what.  Never owns the kernels or the device.

    Where the backend has sample() (CUDA), every sample carries the event
    time and, when CUPTI recorded the launch, its device duration; the
    headline figure (cand, base, speedup) is CUPTI's when every kept
    sample had one, else the events' (result.timer says which).  Rounds
    in which the SM clock was throttled are thrown away and counted.

    Untraced mode: where the backend has kernel_trace() and event_floor(),
    the first AK_TIMING_MODE_ROUNDS rounds after warm-up are traced probes
    (not kept as samples; fewer for a kernel of a millisecond or more:
    AK_TIMING_PROBE_DECISIVE_US).  When the slower kernel's median CUPTI duration
    there is AK_TIMING_TRACE_MAX_US or more, kernel tracing is turned off
    for the rest of the workload (on again before returning) and the
    headline of both kernels is events minus the device's event floor
    (timer "events-floor"); detail.cupti then holds the probes' CUPTI
    figures.  Below it everything is as above. */
#ifndef AK_WORKER_TIMING_H
#define AK_WORKER_TIMING_H
#include <stdbool.h>
#include <stdint.h>
#include "backend.h"
#include "error.h"
#include "space.h"
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

/*  Kernels whose traced CUPTI duration is at least this (microseconds)
    are timed untraced, by events minus the event floor.  Measured on an
    H200 (docs/benchmarks.md, 2026-11-29 follow-up): CUPTI's kernel
    tracing makes a memory-bound copy ~8% slower at 20 us as at 200 us
    (events 22.5 against 20.8 us, 220.9 against 202.8 us), so a traced
    figure is ~8% high from a few us up, while the event floor (~2.0 -
    2.1 us there) wobbles by ~0.1 us between calibrations: 1% of 10 us.
    Below 10 us the floor is a fifth or more of the kernel and CUPTI's
    32 ns steps are the better clock (the 2 us spread target, the empty
    kernel's 0.6 us); from 10 us up events - floor is the truer figure. */
#define AK_TIMING_TRACE_MAX_US 10.0
/*  Traced probe rounds that decide the mode (their median), fewer when
    a kernel's every probe so far took AK_TIMING_PROBE_DECISIVE_US or more:
    its later probes would have to be a hundred times shorter to change
    the mode, and each probe of a long baseline costs what a sample does
    (flash_attention's 120 ms naive baseline, probed three times in each
    of its workloads: docs/benchmarks.md, session 18). */
#define AK_TIMING_MODE_ROUNDS 3
#define AK_TIMING_PROBE_DECISIVE_US (100 * AK_TIMING_TRACE_MAX_US)

/*  A warm-up round (policy.warmup of them at most) that kept the device
    busy this long, both kernels' event times together, ends the warm-up:
    one run has done what the warm-up is for (the first launch's one-off
    costs, caches, the clocks up on a device busy for 50 ms), and more
    rounds of a long baseline cost seconds a batch. */
#define AK_TIMING_WARM_BUSY_US 50000.0

/*  Kept rounds the time budget (policy.max_time_ms) cannot cut sampling
    below (max_samples still can): the range of 6 paired ratios is a 96.9%
    interval of their median (1 - 2^(1-n)), of 5 only 93.8%, of 1 nothing.
    The first H200 nightly batch stopped a 183 ms baseline after one round
    and reported its speedup with a noise of 0. */
#define AK_TIMING_MIN_ROUNDS 6

/*  The mode rule: true (untraced, events - floor) when the slower
    kernel's probe CUPTI duration slowest_cupti_us reaches
    AK_TIMING_TRACE_MAX_US and the backend can run untraced with a
    calibrated floor (can_untrace). */
bool ak_timing_untraced (double slowest_cupti_us, bool can_untrace);

/*  Everything about one measured kernel beside its headline statistics. */
typedef struct {
    ak_stats_t       events;           /* event clock (host: monotonic clock) of the kept samples */
    ak_stats_t       cupti;            /* CUPTI device durations; n == 0 unless every kept sample had one
                                          (untraced mode: of the traced probe samples) */
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
    double     sampled_us;             /* time inside timed samples: every sample's clock span
                                          (events; host: monotonic clock), both kernels, mode
                                          probes and throttled rounds included, warm-up not */
    const char *timer;                 /* the headline's clock: "cupti" | "events" | "events-floor" | "host" (static) */
    double     event_floor_us;         /* subtracted from the events ("events-floor"); else 0 */
    double     mode_cupti_us;          /* the slower kernel's probe CUPTI median that chose the mode; 0 none */
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
