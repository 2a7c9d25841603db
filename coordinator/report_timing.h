/*  coordinator/report_timing.h: what a report page's receipts add up to:
    time per phase, and the GPU timing share (docs/measurement.md, "GPU
    timing share"): time inside timed samples against the wall time of each
    device from its first task's start to its last one's end, counted per
    run of the worker that held it (a device: worker id and device index;
    a run: Receipt.worker_started_ms), so that a batch carried across calls
    does not count the hours between them as the device's. */
#ifndef AK_REPORT_TIMING_H
#define AK_REPORT_TIMING_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "akfleet.pb-c.h"

typedef struct {
    char    *device;                    /* "worker_id/index" */
    uint64_t run;                       /* Receipt.worker_started_ms */
    uint64_t first_ms, last_ms;
} ak_rtiming_span_t;

typedef struct {
    double             phases[3];       /* compile, gates, timing (ms) */
    double             sampled_ms, task_ms;
    ak_rtiming_span_t *spans;
    size_t             nspans, cap;
} ak_rtiming_t;                         /* zeroed to start */

/* Adds a receipt (NULL: nothing); durations that are not sane numbers
   count 0, a receipt without a sane start and end adds no wall time. */
void ak_rtiming_add (ak_rtiming_t *a, const Ak__Receipt *r);

/* The page's "gpu_timing" object: sampled_ms, device_wall_ms, task_ms,
   devices, device_runs, share and share_of_task_time (null without wall or
   task time).  Frees a's spans. */
json_t *ak_rtiming_json (ak_rtiming_t *a);
#endif
