/*  coordinator/report_timing.c: time per phase and the GPU timing share of
    a report page (report_timing.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "report_timing.h"
#include "util.h"

/* A receipt's duration, or 0 when it is not a sane number. */
static double s_ms (double ms)
{
    return isfinite (ms) && ms > 0 ? ms : 0;
}

void ak_rtiming_add (ak_rtiming_t *a, const Ak__Receipt *r)
{
    if (!r)
        return;
    a->phases[0] += s_ms (r->compile_ms);
    a->phases[1] += s_ms (r->gate_ms);
    a->phases[2] += s_ms (r->timing_ms);
    a->sampled_ms += s_ms (r->sampled_ms);
    if (!r->started_at_ms || r->finished_at_ms < r->started_at_ms)
        return;
    a->task_ms += (double) (r->finished_at_ms - r->started_at_ms);
    char *dev = ak_sprintf ("%s/%u", r->worker_id ? r->worker_id : "", r->device ? r->device->index : 0u);
    for (size_t i = 0; i < a->nspans; i++) {
        ak_rtiming_span_t *sp = &a->spans[i];
        if (sp->run == r->worker_started_ms && strcmp (sp->device, dev) == 0) {
            sp->first_ms = r->started_at_ms < sp->first_ms ? r->started_at_ms : sp->first_ms;
            sp->last_ms = r->finished_at_ms > sp->last_ms ? r->finished_at_ms : sp->last_ms;
            free (dev);
            return;
        }
    }
    if (a->nspans == a->cap)
        a->spans = ak_realloc (a->spans, (a->cap = a->cap ? 2 * a->cap : 8) * sizeof *a->spans);
    a->spans[a->nspans++] = (ak_rtiming_span_t) { dev, r->worker_started_ms, r->started_at_ms, r->finished_at_ms };
}

json_t *ak_rtiming_json (ak_rtiming_t *a)
{
    double wall = 0;
    size_t devices = 0;
    for (size_t i = 0; i < a->nspans; i++) {
        wall += (double) (a->spans[i].last_ms - a->spans[i].first_ms);
        size_t k = 0;
        while (k < i && strcmp (a->spans[k].device, a->spans[i].device) != 0)
            k++;
        devices += k == i;
    }
    for (size_t i = 0; i < a->nspans; i++)
        free (a->spans[i].device);
    free (a->spans);
    size_t runs = a->nspans;
    a->spans = NULL;
    a->nspans = a->cap = 0;
    json_t *j = json_pack ("{s:f, s:f, s:f, s:I, s:I}", "sampled_ms", a->sampled_ms, "device_wall_ms", wall,
                           "task_ms", a->task_ms, "devices", (json_int_t) devices, "device_runs",
                           (json_int_t) runs);
    json_object_set_new (j, "share", wall > 0 ? json_real (a->sampled_ms / wall) : json_null ());
    json_object_set_new (j, "share_of_task_time", a->task_ms > 0 ? json_real (a->sampled_ms / a->task_ms)
                                                                 : json_null ());
    return j;
}
