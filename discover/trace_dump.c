/*  discover/trace_dump.c: a trace as JSON lines of version 1 (trace.h,
    docs/formats.md "Discover trace"), for `akctl discover --dump-trace`:
    a binary trace read by a person or a script, or kept as a fixture that
    diffs.  Reading the output back gives the same attribution: the events
    keep the order the reader gave them (seq), their threads and stamps. */
#include "trace.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static int s_line (FILE *f, json_t *o)
{
    if (!o)
        return -1;
    char *text = json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref (o);
    if (!text)
        return -1;
    int rc = fprintf (f, "%s\n", text) < 0 ? -1 : 0;
    free (text);
    return rc;
}

static json_t *s_triple (const int32_t v[3])
{
    return json_pack ("[i,i,i]", (json_int_t) v[0], (json_int_t) v[1], (json_int_t) v[2]);
}

int akd_trace_write_jsonl (const akd_trace_t *t, FILE *f, ak_err_t *err)
{
    int rc = s_line (f, json_pack ("{s:s, s:s, s:i, s:i, s:s, s:I, s:I, s:I, s:I, s:s, s:s}", "t", "header", "format",
                                   "akdiscover-trace", "version", 1, "pid", 0, "step_range",
                                   t->step_range ? t->step_range : "", "warmup_steps", (json_int_t) t->warmup_steps,
                                   "steps", (json_int_t) t->steps, "skip_ms", (json_int_t) t->skip_ms, "sample",
                                   (json_int_t) (t->sample > 1 ? t->sample : 1), "driver",
                                   t->driver ? t->driver : "", "nvrtc", t->nvrtc ? t->nvrtc : ""));
    if (!rc && t->cupti_version)
        rc = s_line (f, json_pack ("{s:s, s:I, s:s}", "t", "cupti", "version", (json_int_t) t->cupti_version,
                                   "path", ""));
    for (size_t i = 0; !rc && i < t->ndevices; i++) {
        const akd_device_t *d = &t->devices[i];
        rc = s_line (f, json_pack ("{s:s, s:I, s:s, s:[i,i], s:i}", "t", "device", "id", (json_int_t) d->id, "name",
                                   d->name, "cc", d->cc_major, d->cc_minor, "sms", d->sms));
    }
    if (!rc && t->window_opened)
        rc = s_line (f, json_pack ("{s:s, s:s, s:I, s:I, s:I}", "t", "window", "state", "open", "seq", (json_int_t) 0,
                                   "ts", (json_int_t) t->window_open_ts, "tid", (json_int_t) 0));
    for (size_t i = 0; !rc && i < t->ngnodes; i++) {
        const akd_gnode_t *g = &t->gnodes[i];
        json_t *stack = json_array ();
        for (int j = 0; j < g->nstack; j++)
            json_array_append_new (stack, json_string (g->stack[j]));
        rc = s_line (f, json_pack ("{s:s, s:I, s:I, s:I, s:I, s:I, s:o}", "t", "gnode", "seq", (json_int_t) 0,
                                   "tid", (json_int_t) 0, "graph", (json_int_t) g->graph, "node", (json_int_t) g->node,
                                   "orig", (json_int_t) g->orig, "stack", stack));
    }
    for (size_t i = 0; !rc && i < t->nevents; i++) {
        const akd_event_t *e = &t->events[i];
        /* seq from 1: the window line holds 0 */
        json_int_t seq = (json_int_t) e->seq + 1, tid = (json_int_t) e->tid, ts = (json_int_t) e->ts;
        if (e->kind == AKD_EV_PUSH) {
            json_t *o = json_pack ("{s:s, s:I, s:I, s:I, s:I, s:s}", "t", "push", "seq", seq, "tid", tid, "ts", ts,
                                   "id", (json_int_t) e->id, "name", e->name ? e->name : "");
            if (o && e->pre)
                json_object_set_new (o, "pre", json_true ());
            rc = s_line (f, o);
        }
        else
        if (e->kind == AKD_EV_POP)
            rc = s_line (f, json_pack ("{s:s, s:I, s:I, s:I}", "t", "pop", "seq", seq, "tid", tid, "ts", ts));
        else
            rc = s_line (f, json_pack ("{s:s, s:I, s:I, s:I, s:I, s:s}", "t", "launch", "seq", seq, "tid", tid, "ts",
                                       ts, "corr", (json_int_t) e->corr, "api", e->name ? e->name : ""));
    }
    for (size_t i = 0; !rc && i < t->nkernels; i++) {
        const akd_kernel_t *k = &t->kernels[i];
        int32_t cluster[3] = { (int32_t) k->cluster[0], (int32_t) k->cluster[1], (int32_t) k->cluster[2] };
        rc = s_line (f, json_pack ("{s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:i, s:i, s:I, s:I, s:I, s:s}",
                                   "t", "kernel", "corr", (json_int_t) k->corr, "start", (json_int_t) k->start, "end",
                                   (json_int_t) k->end, "dev", (json_int_t) k->dev, "stream", (json_int_t) k->stream,
                                   "grid", s_triple (k->grid), "block", s_triple (k->block), "cluster",
                                   s_triple (cluster), "smem_static", k->smem_static, "smem_dynamic",
                                   k->smem_dynamic, "regs", (json_int_t) k->regs, "graph", (json_int_t) k->graph,
                                   "gnode", (json_int_t) k->gnode, "name", k->name ? k->name : ""));
    }
    if (!rc && t->window_closed)
        rc = s_line (f, json_pack ("{s:s, s:s, s:I, s:I, s:I}", "t", "window", "state", "closed", "seq",
                                   (json_int_t) t->nevents + 1, "ts", (json_int_t) t->window_close_ts, "tid",
                                   (json_int_t) 0));
    if (!rc && t->dropped)
        rc = s_line (f, json_pack ("{s:s, s:I}", "t", "dropped", "n", (json_int_t) t->dropped));
    if (!rc && t->error)
        rc = s_line (f, json_pack ("{s:s, s:s, s:s}", "t", "error", "code", t->error_code, "what", t->error));
    if (!rc && t->signal)
        rc = s_line (f, json_pack ("{s:s, s:i}", "t", "signal", "signal", t->signal));
    if (!rc && t->ended)
        rc = s_line (f, json_pack ("{s:s, s:s, s:i, s:i}", "t", "end", "reason", "exit", "steps_begun", 0,
                                   "steps_ended", 0));
    if (rc)
        return ak_err_set (err, AK_EIO, "writing the trace as JSON lines failed");
    return 0;
}
