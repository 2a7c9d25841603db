/*  worker/job.c: running one task inside an executor (see job.h). */
#include "job.h"
#include "backends.h"
#include "clock.h"
#include "digest.h"
#include "gates.h"
#include "log.h"
#include "pbutil.h"
#include "profiler_cuda.h"
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

const char *ak_job_artifact (const Ak__ExecJob *job, const char *role, ak_dtype_t dt,
                             ak_dtype_t build_dt)
{
    if (!job || !role)
        return NULL;
    bool listed = false;
    for (size_t i = 0; i < job->n_artifacts; i++) {
        const Ak__Artifact *art = job->artifacts[i];
        ak_dtype_t adt;
        if (!art || !art->role || strcmp (art->role, role) != 0)
            continue;
        listed = true;
        if (ak_dtype_parse (art->dtype, &adt) == 0 && adt == dt && art->path && art->path[0])
            return art->path;
    }
    if (listed || dt != build_dt)
        return NULL;
    const char *old = strcmp (role, "candidate") == 0 ? job->candidate_path
                    : strcmp (role, "baseline") == 0 ? job->baseline_path : NULL;
    return old && old[0] ? old : NULL;
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
    ak_kernel_t        *ref;
    ak_kernel_t        *dref, *gen;       /* device reference and generator (reference_cuda) */
    ak_kernel_t        *dcmp;             /* the device comparison of its module; NULL: on the host */
    ak_kernel_t        *kernel[AK_DT_COUNT];   /* under test, per element type */
    ak_kernel_t        *base[AK_DT_COUNT];     /* tune: the interleaved baseline */
    const ak_launch_rule_t *kernel_rule;  /* launch rules (CUDA); NULL on the host */
    const ak_launch_rule_t *base_rule;
    const char         *names[AK_MAX_PARAMS];
    int64_t             values[AK_MAX_PARAMS];
    int                 nparams;
    ak_refcache_t      *refcache;         /* the executor's; NULL: none */
    ak_refcache_t      *drefcache;        /* the executor's on the device; NULL: none */
    char                ref_digest[AK_DIGEST_HEX_LEN + 1];   /* of the loaded artifacts; "" unknown */
    char                dref_digest[AK_DIGEST_HEX_LEN + 1];
} s_job_t;

/*  Max size of a compiled reference hashed for the cache's key. */
#define AK_JOB_REF_MAX_BYTES (64u << 20)

/*  sha256 hex of the file at path into hex; "" when it cannot be read
    (the cache is then not used for that reference). */
static void s_file_digest (const char *path, char hex[AK_DIGEST_HEX_LEN + 1])
{
    char *data = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    hex[0] = '\0';
    if (path && ak_file_read (path, AK_JOB_REF_MAX_BYTES, &data, &len, &err) == 0
        && ak_sha256_hex (data, len, hex) != 0)
        hex[0] = '\0';
    free (data);
}

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

/*  The gates' cost so far into the receipt (replacing what was there:
    the report accumulates over the gates and the recheck). */
static void s_gate_cost (s_job_t *j, const ak_gate_cost_t *c)
{
    Ak__GateCost *p = j->r->gate_cost;
    if (!p) {
        p = ak_malloc (sizeof *p);
        ak__gate_cost__init (p);
        j->r->gate_cost = p;
    }
    p->inputs_ms = c->inputs_ms;
    p->reference_ms = c->reference_ms;
    p->alloc_ms = c->alloc_ms;
    p->copy_ms = c->copy_ms;
    p->launch_ms = c->launch_ms;
    p->compare_ms = c->compare_ms;
    p->ref_hits = c->ref_hits;
    p->ref_misses = c->ref_misses;
    p->allocs = c->allocs;
    p->reused = c->reused;
    char text[400];
    ak_gate_cost_text (c, text, sizeof text);
    ak_debug ("task %s: gates: %s", j->a->task_id, text);
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

/*  Loads the artifacts of role for every element type the backend runs
    into k[] (an artifact for another type is never opened); the build the
    daemon made for the backend's default dtype stands in when the job
    lists none per dtype.  0 with *loaded the number of kernels, or the
    first load's error. */
static int s_load_role (s_job_t *j, const char *role, ak_kernel_t *k[AK_DT_COUNT], int *loaded,
                        ak_err_t *err)
{
    ak_dtype_t build_dt = ak_backend_build_dtype (j->be, j->device);
    *loaded = 0;
    for (int dt = 0; dt < AK_DT_COUNT; dt++) {
        const char *path = ak_job_artifact (j->job, role, (ak_dtype_t) dt, build_dt);
        if (!path || (j->be->supports_dtype && !j->be->supports_dtype (j->device, (ak_dtype_t) dt)))
            continue;
        int rc = j->be->load (j->dev, path, "ak_kernel", &k[dt], err);
        if (rc)
            return ak_err_prefix (err, "loading the %s (%s)", role, ak_dtype_name ((ak_dtype_t) dt));
        (*loaded)++;
    }
    return 0;
}

/*  The register budget of the kernels of role (k[] per dtype) into the
    receipt (Receipt.budgets), where the backend has the figures, with the
    architecture each was built for. */
static void s_budgets (s_job_t *j, const char *role, ak_kernel_t *k[AK_DT_COUNT])
{
    if (!j->be->kernel_budget)
        return;
    const char *arch = NULL;
    if (strcmp (role, "candidate") == 0) {
        const ak_candidate_t *c = j->a->candidate_name ? ak_spec_candidate (j->spec, j->a->candidate_name) : NULL;
        arch = c ? c->arch : NULL;
    }
    else {
        const ak_baseline_t *b = ak_spec_baseline (j->spec, j->be->name);
        arch = b ? b->arch : NULL;
    }
    for (int dt = 0; dt < AK_DT_COUNT; dt++) {
        ak_kernel_budget_t kb;
        ak_err_t err = { 0 };
        if (!k[dt] || j->be->kernel_budget (k[dt], &kb, &err) != 0)
            continue;
        Ak__KernelBudget *b = ak_malloc (sizeof *b);
        ak__kernel_budget__init (b);
        b->role = ak_strdup (role);
        b->dtype = ak_strdup (ak_dtype_name ((ak_dtype_t) dt));
        b->registers = kb.registers;
        b->local_bytes = kb.local_bytes;
        b->static_shared = kb.static_shared;
        b->max_threads = kb.max_threads;
        b->arch = kb.library ? ak_strdup ("library:cublaslt")
                : arch ? ak_strdup (arch)
                : ak_sprintf ("sm_%u%u", j->device ? j->device->cc_major : 0, j->device ? j->device->cc_minor : 0);
        j->r->budgets = ak_realloc (j->r->budgets, (j->r->n_budgets + 1) * sizeof *j->r->budgets);
        j->r->budgets[j->r->n_budgets++] = b;
    }
}

/*  The device reference the daemon built from the spec's reference_cuda
    (artifact role "reference_cuda"), and the generator kernel of the same
    module, on backends that generate inputs on the device.  Without the
    artifact both stay NULL: the host oracle for every size. */
static int s_load_dref (s_job_t *j, ak_err_t *err)
{
    const char *path = NULL;
    for (size_t i = 0; i < j->job->n_artifacts && !path; i++) {
        const Ak__Artifact *art = j->job->artifacts[i];
        if (art && art->role && strcmp (art->role, "reference_cuda") == 0 && art->path && art->path[0])
            path = art->path;
    }
    if (!path || !j->be->generate || !j->spec->reference_cuda_launch)
        return 0;
    if (j->refcache)
        s_file_digest (path, j->dref_digest);
    int rc = j->be->load (j->dev, path, "ak_reference", &j->dref, err);
    if (rc == 0)
        rc = j->be->load (j->dev, path, "ak_fill_uniform", &j->gen, err);
    /* The comparison kernel of the same module: outputs of configurations
       the device reference judges alone are compared where they are.  A
       module without it (none built from this prelude lacks it) leaves
       the comparison on the host, the slow way, and says so. */
    if (rc == 0 && j->be->compare) {
        ak_err_t e = { 0 };
        if (j->be->load (j->dev, path, "ak_compare", &j->dcmp, &e) != 0)
            ak_warn ("job %s: no ak_compare in the device reference (%s): large outputs are compared "
                     "on the host", j->a->task_id, e.msg);
    }
    return rc;
}

/*  The launch rules of the kernel under test and of the baseline, from
    the spec, for this backend (none on the host).  0, or the reason the
    task cannot run. */
static int s_rules (s_job_t *j, bool tune, ak_err_t *err)
{
    const ak_baseline_t *bl = ak_spec_baseline (j->spec, j->be->name);
    j->base_rule = bl ? bl->launch : NULL;
    if (!tune) {
        j->kernel_rule = j->base_rule;
        return 0;
    }
    /* Where this backend launches by rule, the candidate must be the
       spec's (its rule is there); elsewhere any source may be tuned. */
    const ak_candidate_t *cand = ak_spec_candidate (j->spec, j->a->candidate_name);
    if (!cand && j->base_rule)
        return ak_err_set (err, AK_ENOTFOUND, "candidate '%.64s' is not in spec %s",
                           j->a->candidate_name, j->spec->name);
    j->kernel_rule = cand ? cand->launch : NULL;
    return 0;
}

/*  verify: whether the launch configuration evaluated here is not the one
    the profile entry recorded (a missing dimension counts as 1). */
static bool s_launch_differs (const ak_launch_cfg_t *lc, const Ak__LaunchConfig *rec)
{
    for (size_t i = 0; i < 3; i++) {
        uint32_t g = i < rec->n_grid ? rec->grid[i] : 1, b = i < rec->n_block ? rec->block[i] : 1;
        if (lc->grid[i] != g || lc->block[i] != b)
            return true;
    }
    return lc->shared_bytes != rec->shared_bytes;
}

/*  Source digest of what is under test, recomputed from the text shipped
    (the assign's own digest is only a claim). */
static void s_source_digest (s_job_t *j)
{
    const Ak__Source *src = ak_assign_tests_candidate (j->a) ? j->a->candidate : j->a->baseline;
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

/*  Times every workload whose dtype has kernels, each with the launch
    configurations its rules give for it.  0 when all were timed (skipped
    counts the others); otherwise the receipt is finished here. */
static int s_time_all (s_job_t *j, bool tune, size_t *skipped)
{
    ak_err_t err = { 0 };
    ak_timing_ctx_t tc = {
        .spec = j->spec, .be = j->be, .dev = j->dev,
        .warmup = j->policy.warmup, .min_samples = j->policy.min_samples,
        .max_samples = j->policy.max_samples, .rsd_target = j->policy.rsd_target,
        .max_time_ms = j->policy.max_time_ms, .cold = true, .seed = j->policy.seed,
        .params = j->values, .param_names = j->names, .nparams = j->nparams,
        .gen = j->gen,
    };
    *skipped = 0;
    for (size_t i = 0; i < j->nworkloads; i++) {
        const ak_workload_t *w = &j->workloads[i];
        ak_kernel_t *kc = j->kernel[w->dtype], *kb = tune ? j->base[w->dtype] : NULL;
        bool supported = !j->be->supports_dtype || j->be->supports_dtype (j->device, w->dtype);
        if (!kc || (tune && !kb) || !supported) {
            (*skipped)++;
            continue;
        }
        ak_launch_cfg_t lc_cand, lc_base;
        if (j->kernel_rule && ak_launch_eval (j->spec, j->kernel_rule, w->dims, w->dtype, j->names,
                                              j->values, j->nparams, &lc_cand, &err) != 0) {
            s_finish (j, "invalid_config", "timing %s/%s: %s", w->name, ak_dtype_name (w->dtype), err.msg);
            return -1;
        }
        if (j->kernel_rule && j->a->launch && s_launch_differs (&lc_cand, j->a->launch)) {
            s_finish (j, "invalid_config", "verify %s/%s: the spec's launch rule gives grid %ux%ux%u block "
                      "%ux%ux%u shared %u, not the launch configuration the profile recorded",
                      w->name, ak_dtype_name (w->dtype), lc_cand.grid[0], lc_cand.grid[1], lc_cand.grid[2],
                      lc_cand.block[0], lc_cand.block[1], lc_cand.block[2], lc_cand.shared_bytes);
            return -1;
        }
        if (tune && j->base_rule && ak_launch_eval (j->spec, j->base_rule, w->dims, w->dtype, NULL,
                                                    NULL, 0, &lc_base, &err) != 0) {
            s_finish (j, "error", "timing %s/%s: the baseline's %s", w->name, ak_dtype_name (w->dtype),
                      err.msg);
            return -1;
        }
        tc.cand = kc;
        tc.base = kb;
        tc.cand_launch = j->kernel_rule ? &lc_cand : NULL;
        tc.base_launch = tune && j->base_rule ? &lc_base : NULL;
        ak_timing_result_t tr;
        int rc = ak_timing_measure (&tc, w->dims, w->dtype, &tr, &err);
        if (rc) {
            s_finish (j, ak_gate_status_name (ak_gate_status_for (rc, &err)), "timing %s/%s: %s",
                      w->name, ak_dtype_name (w->dtype), err.msg);
            return -1;
        }
        Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
        ak__workload_timing__init (t);
        t->workload = ak_pb_dup (j->a->workloads[i]);
        t->candidate = s_stats (&tr.cand);
        if (tune)
            t->baseline = s_stats (&tr.base);
        t->speedup = tr.speedup;
        t->speedup_noise = tr.speedup_noise;
        t->rsd_met = tr.rsd_met;
        t->flops = tr.flops;
        t->bytes = tr.bytes;
        j->r->sampled_ms += tr.sampled_us / 1e3;
        ak_timing_to_pb (&tr, w->name, t, j->r);   /* timer, events / CUPTI figures, kernel records */
        ak_pb_receipt_add_timing (j->r, t);
    }
    return 0;
}

/*  A `profile` task: no gates, no timing; the CUPTI range profiler's
    metrics of one launch per workload (worker/profiler_cuda.h). */
static void s_profile (s_job_t *j, const char *role)
{
    ak_err_t err = { 0 };
    size_t skipped = 0;
    ak_profile_ctx_t pc = {
        .spec = j->spec, .be = j->be, .dev = j->dev, .device = j->device, .kernel = j->kernel,
        .rule = j->kernel_rule, .param_names = j->names, .params = j->values, .nparams = j->nparams,
        .assign = j->a, .workloads = j->workloads, .nworkloads = j->nworkloads,
        .seed = j->policy.seed, .role = role,
    };
    uint64_t t0 = ak_clock_mono_ns ();
    int rc = ak_profile_run (&pc, j->r, &skipped, &err);
    j->r->timing_ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    if (rc) {
        const char *status = rc == AK_EUNAVAIL || rc == AK_EUNSUPPORTED || rc == AK_EDENIED ? "error"
                           : ak_gate_status_name (ak_gate_status_for (rc, &err));
        s_finish (j, status, "%s", err.msg);
        return;
    }
    double lo = INFINITY, hi = 0, plo = INFINITY, phi = 0;
    for (size_t i = 0; i < j->r->n_profiles; i++) {
        double g = j->r->profiles[i]->achieved_gbps;
        lo = g < lo ? g : lo;
        hi = g > hi ? g : hi;
        double pc = j->r->profiles[i]->pct_of_copy_bw;
        plo = pc < plo ? pc : plo;
        phi = pc > phi ? pc : phi;
    }
    char pct[96] = "";
    if (j->r->n_profiles && j->r->profiles[0]->measured_copy_gbps > 0)
        snprintf (pct, sizeof pct, " (%.3g..%.3g%% of the measured %.4g GB/s copy bandwidth)", plo, phi,
                  j->r->profiles[0]->measured_copy_gbps);
    if (j->r->n_profiles == 0)
        s_finish (j, "ok", "no workload profiled (%zu skipped: dtype not supported by backend %s)",
                  skipped, j->be->name);
    else
        s_finish (j, "ok", "profiled %zu workload%s (CUPTI range profiler, kernel replay); "
                  "achieved %.4g..%.4g GB/s by the spec's bytes%s%s", j->r->n_profiles,
                  j->r->n_profiles == 1 ? "" : "s", lo, hi, pct, skipped ? "; some workloads skipped" : "");
}

static void s_run (s_job_t *j)
{
    const Ak__Assign *a = j->a;
    const Ak__ExecJob *job = j->job;
    ak_err_t err = { 0 };
    int rc = 0;
    bool tune = ak_assign_is_tune (a);              /* tune, verify */
    bool profile = strcmp (a->kind, "profile") == 0;
    bool cand = ak_assign_tests_candidate (a);     /* tune; profile of a candidate */

    if (!tune && !profile && strcmp (a->kind, "preflight") != 0) {
        s_finish (j, "error", "task kind '%.32s' is not run by this worker (preflight, tune, verify and profile are)",
                  a->kind);
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
    ak_assign_policy (a->policy, &j->policy);
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
    if ((rc = s_rules (j, cand, &err)) != 0) {
        s_finish (j, "error", "%s", err.msg);
        return;
    }

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
    if (j->refcache)
        s_file_digest (job->reference_path, j->ref_digest);
    rc = j->ref_be->load (j->ref_dev, job->reference_path, "ak_reference", &j->ref, &err);
    if (rc) {
        s_finish (j, "error", "loading the reference: %s", err.msg);
        return;
    }
    if ((rc = s_load_dref (j, &err)) != 0) {
        s_finish (j, rc == AK_ECRASH ? "crashed" : "error", "loading the device reference: %s", err.msg);
        return;
    }
    int loaded = 0;
    const char *role = cand ? "candidate" : "baseline";
    rc = s_load_role (j, role, j->kernel, &loaded, &err);
    if (rc || loaded == 0) {
        if (!rc)
            ak_err_set (&err, AK_EINVAL, "no compiled %s in the job", role);
        s_finish (j, rc == AK_ECRASH ? "crashed" : rc == AK_EUNAVAIL ? "error" : "launch_error", "%s", err.msg);
        return;
    }
    s_budgets (j, role, j->kernel);
    if (tune) {
        rc = s_load_role (j, "baseline", j->base, &loaded, &err);
        if (rc || loaded == 0) {
            if (!rc)
                ak_err_set (&err, AK_EINVAL, "no compiled baseline in the job");
            s_finish (j, rc == AK_ECRASH ? "crashed" : "error", "%s", err.msg);
            return;
        }
        s_budgets (j, "baseline", j->base);
    }

    if (profile) {
        s_profile (j, role);
        return;
    }

    /* Gates. */
    ak_gate_ctx_t g = {
        .spec = j->spec, .be = j->be, .dev = j->dev, .device = j->device,
        .ref_be = j->ref_be, .ref_dev = j->ref_dev, .ref = j->ref,
        .workloads = j->workloads, .nworkloads = j->nworkloads,
        .seed = j->policy.seed,
        .params = j->values, .param_names = j->names, .nparams = j->nparams,
        .launch = j->kernel_rule,
        .dref = j->dref, .dref_launch = j->spec->reference_cuda_launch, .gen = j->gen,
        .dcmp = j->dcmp,
        .refcache = j->refcache, .drefcache = j->drefcache, .ref_digest = j->ref_digest, .dref_digest = j->dref_digest,
    };
    memcpy (g.kernel, j->kernel, sizeof g.kernel);
    ak_gate_report_t rep;
    uint64_t t0 = ak_clock_mono_ns ();
    rc = ak_gates_run (&g, &rep, &err);
    j->r->gate_ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    s_gate_cost (j, &rep.cost);
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
    size_t skipped = 0;
    t0 = ak_clock_mono_ns ();
    rc = s_time_all (j, tune, &skipped);
    j->r->timing_ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    if (rc)
        return;

    /* Recheck on fresh inputs: a kernel that replays a remembered answer
       or special-cases the gate inputs fails here. */
    int before = rep.nstages;
    t0 = ak_clock_mono_ns ();
    rc = ak_gates_recheck (&g, j->policy.seed ^ AK_RECHECK_SEED_SALT, &rep, &err);
    j->r->gate_ms += (double) (ak_clock_mono_ns () - t0) / 1e6;
    s_gate_cost (j, &rep.cost);
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

/*  After a job: a device whose context died (a sticky error surfaced by
    any call, not necessarily one the receipt reports) makes the receipt
    "crashed", so the executor is replaced. */
static void s_check_device (s_job_t *j)
{
    if (!j->be || !j->dev || strcmp (j->r->status, "crashed") == 0)
        return;
    void *probe = NULL;
    ak_err_t err = { 0 };
    int rc = j->be->alloc (j->dev, 64, &probe, &err);
    if (rc == 0)
        j->be->release (j->dev, &probe);
    else if (rc == AK_ECRASH)
        s_finish (j, "crashed", "%s (after: %s: %.400s)", err.msg, j->r->status, j->r->reason);
}

Ak__Receipt *ak_job_run (const ak_backend_t *be, ak_dev_t *dev, const Ak__Device *device,
                         const Ak__ExecJob *job, ak_refcache_t *refcache, ak_refcache_t *drefcache)
{
    s_job_t j;
    memset (&j, 0, sizeof j);
    j.refcache = refcache;
    j.drefcache = drefcache;
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
    else {
        s_run (&j);
        s_check_device (&j);
    }
    j.r->finished_at_ms = ak_clock_wall_ms ();

    for (int dt = 0; dt < AK_DT_COUNT; dt++) {
        if (j.base[dt])
            be->unload (dev, &j.base[dt]);
        if (j.kernel[dt])
            be->unload (dev, &j.kernel[dt]);
    }
    if (j.gen)
        be->unload (dev, &j.gen);
    if (j.dcmp)
        be->unload (dev, &j.dcmp);
    if (j.dref)
        be->unload (dev, &j.dref);
    if (j.ref)
        j.ref_be->unload (j.ref_dev, &j.ref);
    if (j.ref_dev && j.ref_dev != dev)
        j.ref_be->close (&j.ref_dev);
    free (j.workloads);
    ak_spec_destroy (&j.spec);
    return j.r;
}
