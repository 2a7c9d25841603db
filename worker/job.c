/*  worker/job.c: running one task inside an executor (see job.h). */
#include "job.h"
#include "clock.h"
#include "digest.h"
#include "gates.h"
#include "log.h"
#include "pbutil.h"
#include "timing.h"
#include "util.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Beyond this a speedup is reported as implausible (KernelBench's rule). */
#define AK_IMPLAUSIBLE_SPEEDUP 10.0
/* The recheck's inputs come from another stream of seeds. */
#define AK_RECHECK_SEED_SALT   0x9E3779B97F4A7C15ull

void ak_job_policy (const Ak__Policy *p, ak_policy_t *out)
{
    ak_policy_defaults (out);
    if (!p)
        return;
    if (p->max_attempts)       out->max_attempts = p->max_attempts;
    if (p->compile_timeout_ms) out->compile_timeout_ms = p->compile_timeout_ms;
    if (p->run_timeout_ms)     out->run_timeout_ms = p->run_timeout_ms;
    if (p->lease_ms)           out->lease_ms = p->lease_ms;
    if (p->warmup)             out->warmup = p->warmup;
    if (p->min_samples)        out->min_samples = p->min_samples;
    if (p->max_samples)        out->max_samples = p->max_samples;
    if (p->rsd_target > 0 && isfinite (p->rsd_target))
        out->rsd_target = p->rsd_target;
    if (p->max_time_ms)        out->max_time_ms = p->max_time_ms;
    if (p->threshold > 0 && isfinite (p->threshold))
        out->threshold = p->threshold;
    if (p->max_regression > 0 && isfinite (p->max_regression))
        out->max_regression = p->max_regression;
    if (p->seed)               out->seed = p->seed;
    /* Bounds that keep an absurd policy from exhausting the executor. */
    if (out->warmup > 1000)
        out->warmup = 1000;
    if (out->max_samples > 100000)
        out->max_samples = 100000;
    if (out->min_samples > out->max_samples)
        out->min_samples = out->max_samples;
}

ak_dtype_t ak_job_build_dtype (const ak_backend_t *be, const Ak__Device *device)
{
    static const ak_dtype_t order[] = { AK_DT_FLOAT32, AK_DT_BFLOAT16, AK_DT_FLOAT16 };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (!be || !be->supports_dtype || be->supports_dtype (device, order[i]))
            return order[i];
    return AK_DT_FLOAT32;
}

/* ------------------------------------------------------------- the run */

typedef struct {
    const ak_backend_t *be;
    ak_dev_t           *dev;
    const Ak__Device   *device;
    const Ak__ExecJob  *job;
    const Ak__Assign   *a;
    Ak__Receipt        *r;
    ak_spec_t          *spec;
    ak_policy_t         policy;
    ak_workload_t      *workloads;
    size_t              nworkloads;
    const ak_backend_t *ref_be;
    ak_dev_t           *ref_dev;          /* owned when ref_be != be */
    ak_kernel_t        *ref, *kernel, *base;
    const char         *names[AK_MAX_PARAMS];
    int64_t             values[AK_MAX_PARAMS];
    int                 nparams;
} s_job_t;

static void s_finish (s_job_t *j, const char *status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void s_finish (s_job_t *j, const char *status, const char *fmt, ...)
{
    char reason[1024];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (reason, sizeof reason, fmt, ap);
    va_end (ap);
    ak_pb_set_str (&j->r->status, status);
    ak_pb_set_str (&j->r->reason, reason);
}

/*  Workloads of the assign, checked against the spec. */
static int s_workloads (s_job_t *j, ak_err_t *err)
{
    const Ak__Assign *a = j->a;
    if (a->n_workloads == 0)
        return 0;
    j->workloads = ak_calloc (a->n_workloads, sizeof *j->workloads);
    for (size_t i = 0; i < a->n_workloads; i++) {
        const Ak__Workload *w = a->workloads[i];
        ak_workload_t *out = &j->workloads[i];
        if (!w)
            return ak_err_set (err, AK_EINVAL, "workloads[%zu]: missing", i);
        if (w->n_dims != (size_t) j->spec->nkeys)
            return ak_err_set (err, AK_EINVAL, "workloads[%zu] '%s': %zu dims, spec %s has %d keys",
                               i, w->name, w->n_dims, j->spec->name, j->spec->nkeys);
        for (size_t d = 0; d < w->n_dims; d++) {
            if (w->dims[d] < 1)
                return ak_err_set (err, AK_EINVAL, "workloads[%zu] '%s': dims[%zu] = %" PRId64,
                                   i, w->name, d, w->dims[d]);
            out->dims[d] = w->dims[d];
        }
        if (ak_dtype_parse (w->dtype, &out->dtype) != 0)
            return ak_err_set (err, AK_EINVAL, "workloads[%zu] '%s': unknown dtype '%.32s'",
                               i, w->name, w->dtype);
        out->name = w->name;      /* borrowed from the assign */
        out->weight = w->weight > 0 ? w->weight : 1.0;
        j->nworkloads++;
    }
    return 0;
}

static void s_add_gates (s_job_t *j, const ak_gate_report_t *rep, int from)
{
    for (int i = from; i < rep->nstages; i++) {
        const ak_gate_result_t *g = &rep->stages[i];
        Ak__GateResult pb = AK__GATE_RESULT__INIT;
        pb.stage = (char *) g->stage;
        pb.passed = g->passed;
        pb.skipped = g->skipped;
        pb.configs = g->configs;
        pb.failed = g->failed;
        pb.worst_err = g->worst_err;
        pb.worst_at = (char *) g->worst_at;
        pb.detail = (char *) g->detail;
        ak_pb_receipt_add_gate (j->r, &pb);
    }
}

static Ak__Stats *s_stats (const ak_stats_t *s)
{
    Ak__Stats *p = ak_malloc (sizeof *p);
    ak__stats__init (p);
    p->n = (uint32_t) s->n;
    p->median_us = s->median;
    p->min_us = s->min;
    p->mean_us = s->mean;
    p->stddev_us = s->stddev;
    p->p10_us = s->p10;
    p->p90_us = s->p90;
    return p;
}

static int s_load (s_job_t *j, const char *path, const char *what, ak_kernel_t **k, ak_err_t *err)
{
    if (!path || !*path)
        return ak_err_set (err, AK_EINVAL, "no compiled %s in the job", what);
    int rc = j->be->load (j->dev, path, "ak_kernel", k, err);
    if (rc)
        ak_err_prefix (err, "loading the %s", what);
    return rc;
}

/*  Source digest of what is under test, recomputed from the text shipped
    (the assign's own digest is only a claim). */
static void s_source_digest (s_job_t *j)
{
    const Ak__Source *src = strcmp (j->a->kind, "tune") == 0 ? j->a->candidate : j->a->baseline;
    if (!src)
        return;
    char hex[65];
    if (ak_sha256_hex (src->text, strlen (src->text), hex) == 0)
        ak_pb_set_str (&j->r->source_digest, hex);
}

/*  Short human text for an ok receipt: how many workloads, the speedup
    range (tune) or median range (preflight), and any implausible figure. */
static void s_ok_reason (s_job_t *j, bool tune, size_t skipped)
{
    Ak__Receipt *r = j->r;
    double lo = INFINITY, hi = -INFINITY;
    size_t met = 0;
    for (size_t i = 0; i < r->n_timings; i++) {
        const Ak__WorkloadTiming *t = r->timings[i];
        double v = tune ? t->speedup : (t->candidate ? t->candidate->median_us : 0);
        if (v < lo)
            lo = v;
        if (v > hi)
            hi = v;
        met += t->rsd_met;
    }
    char extra[160] = "";
    if (skipped)
        snprintf (extra, sizeof extra, "; %zu workloads skipped (dtype not supported by backend %s)",
                  skipped, j->be->name);
    if (r->n_timings == 0)
        s_finish (j, "ok", "gates passed; no workload timed%s", extra);
    else {
        char range[64];
        if (lo == hi)
            snprintf (range, sizeof range, tune ? "%.3gx" : "%.3g us", lo);
        else
            snprintf (range, sizeof range, tune ? "%.3gx..%.3gx" : "%.3g..%.3g us", lo, hi);
        s_finish (j, "ok", "gates passed; %zu workload%s, %s %s, noise target met on %zu%s%s",
                  r->n_timings, r->n_timings == 1 ? "" : "s", tune ? "speedup" : "median", range, met,
                  tune && hi > AK_IMPLAUSIBLE_SPEEDUP ? "; speedup above 10x is implausible: review" : "",
                  extra);
    }
}

static void s_run (s_job_t *j)
{
    const Ak__Assign *a = j->a;
    const Ak__ExecJob *job = j->job;
    ak_err_t err = { 0 };
    int rc = 0;
    bool tune = strcmp (a->kind, "tune") == 0;

    if (!tune && strcmp (a->kind, "preflight") != 0) {
        s_finish (j, "error", "task kind '%.32s' is not run by this worker (preflight and tune are)", a->kind);
        return;
    }
    s_source_digest (j);
    if (!a->spec_json || !*a->spec_json) {
        s_finish (j, "error", "task has no spec");
        return;
    }
    rc = ak_spec_parse_text (a->spec_json, strlen (a->spec_json), "assign.spec_json", &j->spec, &err);
    if (rc) {
        s_finish (j, "error", "spec: %s", err.msg);
        return;
    }
    ak_job_policy (a->policy, &j->policy);
    rc = s_workloads (j, &err);
    if (rc) {
        s_finish (j, "error", "%s", err.msg);
        return;
    }
    if (a->n_params > AK_MAX_PARAMS) {
        s_finish (j, "invalid_config", "%zu parameters, limit %d", a->n_params, AK_MAX_PARAMS);
        return;
    }
    for (size_t i = 0; i < a->n_params; i++) {
        j->names[i] = a->params[i]->name;
        j->values[i] = a->params[i]->value;
    }
    j->nparams = (int) a->n_params;

    /* The oracle always runs on the host backend. */
    j->ref_be = ak_backend_host ();
    if (j->ref_be == j->be)
        j->ref_dev = j->dev;
    else {
        rc = j->ref_be->open (NULL, &j->ref_dev, &err);
        if (rc) {
            s_finish (j, "error", "host backend for the reference: %s", err.msg);
            return;
        }
    }
    if (!job->reference_path || !*job->reference_path) {
        s_finish (j, "error", "no compiled reference in the job");
        return;
    }
    rc = j->ref_be->load (j->ref_dev, job->reference_path, "ak_reference", &j->ref, &err);
    if (rc) {
        s_finish (j, "error", "loading the reference: %s", err.msg);
        return;
    }
    rc = s_load (j, tune ? job->candidate_path : job->baseline_path, tune ? "candidate" : "baseline",
                 &j->kernel, &err);
    if (rc) {
        s_finish (j, "launch_error", "%s", err.msg);
        return;
    }
    if (tune) {
        rc = s_load (j, job->baseline_path, "baseline", &j->base, &err);
        if (rc) {
            s_finish (j, "error", "%s", err.msg);
            return;
        }
    }

    /* Gates. */
    ak_dtype_t dt = ak_job_build_dtype (j->be, j->device);
    ak_gate_ctx_t g = {
        .spec = j->spec, .be = j->be, .dev = j->dev, .device = j->device,
        .ref_be = j->ref_be, .ref_dev = j->ref_dev, .ref = j->ref,
        .workloads = j->workloads, .nworkloads = j->nworkloads,
        .seed = j->policy.seed,
        .params = j->values, .param_names = j->names, .nparams = j->nparams,
    };
    g.kernel[dt] = j->kernel;
    ak_gate_report_t rep;
    uint64_t t0 = ak_clock_mono_ns ();
    rc = ak_gates_run (&g, &rep, &err);
    j->r->gate_ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    if (rc) {
        s_finish (j, "error", "gates: %s", err.msg);
        return;
    }
    s_add_gates (j, &rep, 0);
    if (rep.status != AK_GATE_OK) {
        s_finish (j, ak_gate_status_name (rep.status), "%s", rep.reason);
        return;
    }

    /* Timing, one workload at a time. */
    ak_timing_ctx_t tc = {
        .spec = j->spec, .be = j->be, .dev = j->dev,
        .cand = j->kernel, .base = tune ? j->base : NULL,
        .warmup = j->policy.warmup, .min_samples = j->policy.min_samples,
        .max_samples = j->policy.max_samples, .rsd_target = j->policy.rsd_target,
        .max_time_ms = j->policy.max_time_ms, .cold = true, .seed = j->policy.seed,
        .params = j->values, .param_names = j->names, .nparams = j->nparams,
    };
    size_t skipped = 0;
    t0 = ak_clock_mono_ns ();
    for (size_t i = 0; i < j->nworkloads; i++) {
        const ak_workload_t *w = &j->workloads[i];
        if (w->dtype != dt) {
            skipped++;
            continue;
        }
        ak_timing_result_t tr;
        rc = ak_timing_measure (&tc, w->dims, w->dtype, &tr, &err);
        if (rc) {
            j->r->timing_ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
            s_finish (j, "launch_error", "timing %s/%s: %s", w->name, ak_dtype_name (w->dtype), err.msg);
            return;
        }
        Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
        ak__workload_timing__init (t);
        t->workload = ak_pb_dup (a->workloads[i]);
        t->candidate = s_stats (&tr.cand);
        if (tune)
            t->baseline = s_stats (&tr.base);
        t->speedup = tr.speedup;
        t->speedup_noise = tr.speedup_noise;
        t->rsd_met = tr.rsd_met;
        t->flops = tr.flops;
        t->bytes = tr.bytes;
        ak_pb_receipt_add_timing (j->r, t);
    }
    j->r->timing_ms = (double) (ak_clock_mono_ns () - t0) / 1e6;

    /* Recheck on fresh inputs: a kernel that replays a remembered answer
       or special-cases the gate inputs fails here. */
    int before = rep.nstages;
    t0 = ak_clock_mono_ns ();
    rc = ak_gates_recheck (&g, j->policy.seed ^ AK_RECHECK_SEED_SALT, &rep, &err);
    j->r->gate_ms += (double) (ak_clock_mono_ns () - t0) / 1e6;
    if (rc) {
        s_finish (j, "error", "recheck: %s", err.msg);
        return;
    }
    s_add_gates (j, &rep, before);
    if (rep.status != AK_GATE_OK) {
        s_finish (j, ak_gate_status_name (rep.status), "%s", rep.reason);
        return;
    }
    s_ok_reason (j, tune, skipped);
}

Ak__Receipt *ak_job_run (const ak_backend_t *be, ak_dev_t *dev, const Ak__Device *device,
                         const Ak__ExecJob *job)
{
    s_job_t j;
    memset (&j, 0, sizeof j);
    j.be = be;
    j.dev = dev;
    j.device = device;
    j.job = job;
    j.a = job ? job->assign : NULL;
    j.r = ak_pb_receipt_for (j.a, "error", "");
    j.r->started_at_ms = ak_clock_wall_ms ();
    if (!be || !dev)
        s_finish (&j, "error", "executor has no open device");
    else if (!j.a)
        s_finish (&j, "error", "job without a task");
    else
        s_run (&j);
    j.r->finished_at_ms = ak_clock_wall_ms ();

    if (j.base)
        be->unload (dev, &j.base);
    if (j.kernel)
        be->unload (dev, &j.kernel);
    if (j.ref)
        j.ref_be->unload (j.ref_dev, &j.ref);
    if (j.ref_dev && j.ref_dev != dev)
        j.ref_be->close (&j.ref_dev);
    free (j.workloads);
    ak_spec_destroy (&j.spec);
    return j.r;
}
