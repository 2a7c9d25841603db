/*  worker/daemon_metrics.c: what the akworker daemon counts per device,
    and the metrics snapshot its loop publishes (daemon_impl.h).

    Counted from each receipt as it leaves the daemon (ak_daemon_task_finish):
    tasks by kind and status, the compile, gate and timing seconds the
    receipt reports, the timing samples thrown away because the SM clock
    was throttled, and how long the executor held the job.  The tick
    renders them every cfg.metrics_ms and hands the text to the endpoint
    (metrics_http.h), which never makes the loop wait.

    GPU timing share: akworker_gpu_timing_share (the daemon's own figures,
    as its heartbeats carry them: time inside timed samples over the wall
    time with a task held, times the devices); rate() of
    akworker_sampled_seconds_total over akworker_task_held_seconds_total
    gives it over a window. */
#include "daemon_impl.h"
#include "clock.h"
#include "metrics.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AK_DSTATS_KINDS 16              /* distinct task kinds kept by name */

static void s_dev_label (const ak_daemon_t *d, size_t dev, char *buf, size_t size)
{
    snprintf (buf, size, "%s:%u", d->devices[dev]->backend, d->devices[dev]->index);
}

// ================================================================ counting

static ak_dtask_count_t *s_tcount (ak_daemon_t *d, uint32_t dev, const char *kind, int status)
{
    size_t kinds = 0;
    for (size_t i = 0; i < d->ntcounts; i++) {
        ak_dtask_count_t *c = &d->tcounts[i];
        if (c->dev == dev && c->status == status && strncmp (c->kind, kind, sizeof c->kind - 1) == 0)
            return c;
    }
    for (size_t i = 0; i < d->ntcounts; i++) {      /* distinct kinds so far */
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp (d->tcounts[j].kind, d->tcounts[i].kind) == 0;
        kinds += !seen;
    }
    if (kinds >= AK_DSTATS_KINDS && strcmp (kind, "other") != 0)
        return s_tcount (d, dev, "other", status);
    d->tcounts = ak_realloc (d->tcounts, (d->ntcounts + 1) * sizeof *d->tcounts);
    ak_dtask_count_t *c = &d->tcounts[d->ntcounts++];
    memset (c, 0, sizeof *c);
    c->dev = dev;
    snprintf (c->kind, sizeof c->kind, "%s", kind);
    c->status = status;
    return c;
}

void ak_daemon_count_receipt (ak_daemon_t *d, int dev, const ak_dtask_t *t, const Ak__Receipt *r)
{
    if (dev < 0 || (size_t) dev >= d->ndevices || !d->dstats)
        return;
    s_tcount (d, (uint32_t) dev, r->kind && r->kind[0] ? r->kind : "unknown", ak_metrics_status_index (r->status))->n++;
    ak_ddev_stats_t *s = &d->dstats[dev];
    s->compile_s += r->compile_ms > 0 ? r->compile_ms / 1000.0 : 0;
    s->gate_s += r->gate_ms > 0 ? r->gate_ms / 1000.0 : 0;
    s->timing_s += r->timing_ms > 0 ? r->timing_ms / 1000.0 : 0;
    if (t->started_wall_ms && r->finished_at_ms > t->started_wall_ms)
        s->busy_s += (double) (r->finished_at_ms - t->started_wall_ms) / 1000.0;
    for (size_t i = 0; i < r->n_timings; i++) {
        const Ak__WorkloadTiming *w = r->timings[i];
        if (w->candidate)
            s->discarded += w->candidate->discarded;
        if (w->baseline)
            s->discarded += w->baseline->discarded;
    }
}

// =============================================================== rendering

typedef enum { S_COMPILE, S_GATE, S_TIMING, S_BUSY, S_DISCARDED, S_RESTARTS } s_field_t;

static double s_field (const ak_ddev_stats_t *s, s_field_t f)
{
    switch (f) {
        case S_COMPILE:   return s->compile_s;
        case S_GATE:      return s->gate_s;
        case S_TIMING:    return s->timing_s;
        case S_BUSY:      return s->busy_s;
        case S_DISCARDED: return (double) s->discarded;
        case S_RESTARTS:  return (double) s->restarts;
    }
    return 0;
}

static void s_per_device (ak_daemon_t *d, ak_mtext_t *t, const char *name, const char *help, s_field_t f)
{
    ak_mtext_family (t, name, "counter", help);
    for (size_t i = 0; i < d->ndevices; i++) {
        char dev[48];
        s_dev_label (d, i, dev, sizeof dev);
        ak_mtext_dbl (t, name, s_field (&d->dstats[i], f), "device", dev, NULL);
    }
}

static void s_render (ak_daemon_t *d, uint64_t now, ak_mtext_t *t)
{
    ak_mtext_family (t, "akworker_build_info", "gauge", "The akworker version and id (always 1).");
    ak_mtext_u64 (t, "akworker_build_info", 1, "version", AK_VERSION, "worker", d->worker_id, NULL);
    ak_mtext_family (t, "akworker_uptime_seconds", "gauge", "Seconds since the daemon started.");
    ak_mtext_dbl (t, "akworker_uptime_seconds", (now - d->start_ms) / 1000.0, NULL);
    ak_mtext_family (t, "akworker_device_info", "gauge", "The devices this worker runs (always 1).");
    for (size_t i = 0; i < d->ndevices; i++) {
        char dev[48];
        s_dev_label (d, i, dev, sizeof dev);
        const Ak__Device *v = d->devices[i];
        ak_mtext_u64 (t, "akworker_device_info", 1, "device", dev, "name", v->name, "class", v->device_class,
                      "uuid", v->uuid, NULL);
    }
    ak_mtext_family (t, "akworker_coordinator_up", "gauge", "1 while the link to the coordinator is up.");
    ak_mtext_u64 (t, "akworker_coordinator_up", d->link && ak_uplink_up (d->link), NULL);

    ak_mtext_family (t, "akworker_tasks_total", "counter", "Tasks finished (receipts made), by device, kind "
                     "and status (unknown statuses count as other).");
    for (size_t i = 0; i < d->ntcounts; i++) {
        const ak_dtask_count_t *c = &d->tcounts[i];
        char dev[48];
        s_dev_label (d, c->dev, dev, sizeof dev);
        ak_mtext_u64 (t, "akworker_tasks_total", c->n, "device", dev, "kind", c->kind,
                      "status", ak_metrics_statuses[c->status], NULL);
    }
    s_per_device (d, t, "akworker_compile_seconds_total", "Compile time the receipts report.", S_COMPILE);
    s_per_device (d, t, "akworker_gates_seconds_total", "Correctness-gate time the receipts report.", S_GATE);
    s_per_device (d, t, "akworker_timing_seconds_total", "Timing time the receipts report; its rate is "
                  "the device's timing share of wall time.", S_TIMING);
    s_per_device (d, t, "akworker_busy_seconds_total", "Time an executor of the device held a job.", S_BUSY);
    /* The GPU timing share of issue 20 (the heartbeat's WorkerTiming): time
       inside timed samples over the wall time with a task held, summed over
       the devices. */
    double held_ms = d->busy_ms + (d->busy_since_ms ? (double) (ak_clock_mono_ms () - d->busy_since_ms) : 0);
    ak_mtext_family (t, "akworker_sampled_seconds_total", "counter", "Time inside timed samples (both kernels "
                     "of each pair), all devices.");
    ak_mtext_dbl (t, "akworker_sampled_seconds_total", d->sampled_ms / 1000.0, NULL);
    ak_mtext_family (t, "akworker_task_held_seconds_total", "counter", "Wall time with at least one task held.");
    ak_mtext_dbl (t, "akworker_task_held_seconds_total", held_ms / 1000.0, NULL);
    ak_mtext_family (t, "akworker_gpu_timing_share", "gauge", "Sampled time over task-held wall time times the "
                     "devices, since start (0 before the first task).");
    ak_mtext_dbl (t, "akworker_gpu_timing_share",
                  held_ms > 0 && d->ndevices ? d->sampled_ms / (held_ms * (double) d->ndevices) : 0.0, NULL);
    s_per_device (d, t, "akworker_throttled_samples_discarded_total", "Timing samples thrown away: the SM "
                  "clock was throttled.", S_DISCARDED);
    s_per_device (d, t, "akworker_executor_restarts_total", "Executors started again (crash, timeout, "
                  "lost device context).", S_RESTARTS);

    size_t held[AK_DTASK_RUNNING + 1] = { 0 };
    for (const ak_dtask_t *x = d->tasks; x; x = x->next)
        if (x->state <= AK_DTASK_RUNNING)
            held[x->state]++;
    static const char *const states[] = { "queued", "compiling", "ready", "running" };
    ak_mtext_family (t, "akworker_tasks_held", "gauge", "Tasks assigned and not finished, by state.");
    for (int s = 0; s <= AK_DTASK_RUNNING; s++)
        ak_mtext_u64 (t, "akworker_tasks_held", held[s], "state", states[s], NULL);
    ak_mtext_family (t, "akworker_spool_receipts", "gauge", "Receipts kept until the coordinator acknowledges "
                     "them (memory and spool).");
    ak_mtext_u64 (t, "akworker_spool_receipts", d->npending, NULL);
    ak_mtext_family (t, "akworker_rejected_total", "counter", "Messages from the coordinator refused.");
    ak_mtext_u64 (t, "akworker_rejected_total", d->rejected, NULL);
    ak_mtext_family (t, "akworker_metrics_scrapes_total", "counter", "Scrapes of this endpoint answered.");
    ak_mtext_u64 (t, "akworker_metrics_scrapes_total", ak_metrics_srv_scrapes (d->cfg.metrics), NULL);
}

void ak_daemon_metrics_tick (ak_daemon_t *d, uint64_t now)
{
    if (!d->cfg.metrics || now < d->next_metrics)
        return;
    d->next_metrics = now + (d->cfg.metrics_ms ? d->cfg.metrics_ms : 1000);
    ak_mtext_t t;
    ak_mtext_init (&t);
    s_render (d, now, &t);
    size_t len = 0;
    char *text = ak_mtext_take (&t, &len);
#ifndef NDEBUG
    ak_metrics_check_or_abort ("akworker", text);
#endif
    ak_metrics_srv_publish (d->cfg.metrics, &text, len);
}
