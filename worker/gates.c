/*  worker/gates.c: correctness gates over the backend table: the stages.

    A configuration (its inputs, reference, buffers and runs) is
    gates_ref.c's, its comparison gates_cmp.c's.  The five stages (smoke, shape sweep, numerical stability, determinism,
    edge cases: docs/measurement.md, "The gate stages") follow autokernel's
    bench.py; the first failing stage decides the status and the reason. */
#include "gates_impl.h"
#include "clock.h"
#include "data.h"
#include "log.h"
#include "rng.h"
#include "space.h"
#include "util.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ak_gate_status_name (ak_gate_status_t status)
{
    switch (status) {
        case AK_GATE_OK:     return "ok";
        case AK_GATE_WRONG:  return "wrong_answer";
        case AK_GATE_NAN:    return "nan";
        case AK_GATE_LAUNCH: return "launch_error";
        case AK_GATE_INVALID: return "invalid_config";
        case AK_GATE_CRASH:  return "crashed";
        default:             return "error";
    }
}

ak_gate_status_t ak_gate_status_for (int rc, const ak_err_t *err)
{
    if (rc == AK_ECRASH)
        return AK_GATE_CRASH;
    if (rc == AK_EBOUNDS)
        return AK_GATE_WRONG;
    if (rc == AK_EINTERNAL)             /* the gates' own machinery (a reference changed): no verdict */
        return AK_GATE_ERROR;
    if (err && strstr (err->msg, "invalid_config"))
        return AK_GATE_INVALID;
    return AK_GATE_LAUNCH;
}

/* ---------------------------------------------------------------- stages */

typedef struct {
    ak_grun_t        *run;
    ak_gate_report_t *rep;
    ak_gate_result_t *g;
    char  first[384];          /* why the first failing config failed */
    ak_gate_status_t first_status;
    char  notes[256];          /* skipped dtypes and the like */
    uint32_t on_device;        /* configurations judged by the device reference alone */
    uint32_t on_device_cmp;    /* of those, compared on the device too */
} s_stage_t;

static void s_stage_begin (s_stage_t *s, ak_grun_t *run, ak_gate_report_t *rep, const char *stage)
{
    memset (s, 0, sizeof *s);
    s->run = run;
    s->rep = rep;
    s->g = &rep->stages[rep->nstages++];
    memset (s->g, 0, sizeof *s->g);
    snprintf (s->g->stage, sizeof s->g->stage, "%s", stage);
}

static void s_note (s_stage_t *s, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static void s_note (s_stage_t *s, const char *fmt, ...)
{
    size_t off = strlen (s->notes);
    if (off >= sizeof s->notes - 1)
        return;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (s->notes + off, sizeof s->notes - off, fmt, ap);
    va_end (ap);
}

/*  Records one failed configuration; the first one's text is kept. */
static void s_stage_fail (s_stage_t *s, ak_gate_status_t status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void s_stage_fail (s_stage_t *s, ak_gate_status_t status, const char *fmt, ...)
{
    s->g->failed++;
    /* The first failure explains the stage, except that a crash outranks
       everything: the device is lost and that is what the receipt says. */
    if (s->first[0] && !(status == AK_GATE_CRASH && s->first_status != AK_GATE_CRASH))
        return;
    s->first_status = status;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (s->first, sizeof s->first, fmt, ap);
    va_end (ap);
}

static void s_stage_worst (s_stage_t *s, const ak_gcfg_t *c, double worst)
{
    if (worst > s->g->worst_err || !s->g->worst_at[0]) {
        s->g->worst_err = worst;
        snprintf (s->g->worst_at, sizeof s->g->worst_at, "%s", c->label);
    }
}

static void s_stage_end (s_stage_t *s)
{
    if (s->on_device)
        s_note (s, "%s%u configs on device inputs, judged by the device reference%s", s->notes[0] ? "; " : "",
                s->on_device, s->on_device_cmp == s->on_device ? " on the device"
                              : s->on_device_cmp ? " (some on the device)" : "");
    ak_gate_result_t *g = s->g;
    if (g->configs == 0 && g->failed == 0) {
        g->skipped = true;
        g->passed = false;
        snprintf (g->detail, sizeof g->detail, "SKIPPED (nothing to run)%s%s",
                  s->notes[0] ? "; " : "", s->notes);
        return;
    }
    g->passed = g->failed == 0;
    if (g->passed)
        snprintf (g->detail, sizeof g->detail, "PASS (%u configs, worst_err=%.3g at %s)%s%s",
                  g->configs, g->worst_err, g->worst_at[0] ? g->worst_at : "-",
                  s->notes[0] ? "; " : "", s->notes);
    else {
        snprintf (g->detail, sizeof g->detail, "FAIL (%u/%u failed): %s%s%s",
                  g->failed, g->configs, s->first, s->notes[0] ? "; " : "", s->notes);
        if (s->rep->status == AK_GATE_OK
            || (s->first_status == AK_GATE_CRASH && s->rep->status != AK_GATE_CRASH)) {
            s->rep->status = s->first_status;
            snprintf (s->rep->reason, sizeof s->rep->reason, "%s: %s", g->stage, s->first);
        }
    }
}

/*  Prepares a configuration for a stage; a failure to prepare is an error
    of the spec or the oracle, recorded as status "error" so it is never
    mistaken for a passing candidate.  Returns false when not prepared. */
static bool s_stage_prepare (s_stage_t *s, const char *name, const int64_t *dims, ak_dtype_t dt,
                             uint64_t seed, ak_gxform_t x, ak_gcfg_t *c)
{
    ak_err_t err = { 0 };
    int rc = ak_gcfg_prepare (s->run, name, dims, dt, seed, x, c, &err);
    if (rc != 0) {
        s->g->configs++;
        /* A lost device context fails every buffer call after the crash. */
        s_stage_fail (s, rc == AK_ECRASH ? AK_GATE_CRASH : AK_GATE_ERROR, "%s", err.msg);
        return false;
    }
    return true;
}

/*  True once the stage saw the device context die: nothing more can run. */
static bool s_stage_dead (const s_stage_t *s)
{
    return s->first[0] && s->first_status == AK_GATE_CRASH;
}

/*  One configuration through the tolerance check (smoke, sweep, edges,
    recheck).  Returns false when it failed. */
static bool s_check_config (s_stage_t *s, const char *name, const int64_t *dims, ak_dtype_t dt,
                            uint64_t seed)
{
    ak_gcfg_t c;
    if (s_stage_dead (s) || !s_stage_prepare (s, name, dims, dt, seed, AK_GX_NONE, &c))
        return false;
    bool ok = false;
    ak_err_t err = { 0 };
    s->g->configs++;
    s->on_device += c.on_device;
    s->on_device_cmp += c.dcmp;
    int rc = ak_gcfg_run (&c, &err);
    ak_gcmp_t r;
    if (rc == 0)
        rc = ak_gcfg_compare (&c, 1.0, &r, &err);
    if (rc != 0)
        s_stage_fail (s, ak_gate_status_for (rc, &err), "%s", err.msg);
    else {
        s_stage_worst (s, &c, r.worst);
        ak_gate_status_t st = ak_gcmp_status (&r);
        if (st != AK_GATE_OK) {
            char text[384];
            ak_gcmp_text (&c, &r, text, sizeof text);
            s_stage_fail (s, st, "%s", text);
        }
        else
            ok = true;
    }
    ak_gcfg_free (&c);
    return ok;
}

/*  The dtype the single-dtype stages use: the spec's primary dtype when the
    backend supports it, else the first supported one in spec order (noted
    in the detail).  -1 when the backend supports none. */
static int s_gate_dtype (const ak_gate_ctx_t *ctx)
{
    const ak_spec_t *spec = ctx->spec;
    for (int i = 0; i < spec->ndtypes; i++) {
        ak_dtype_t dt = spec->dtypes[i];
        if (ctx->kernel[dt] && (!ctx->be->supports_dtype || ctx->be->supports_dtype (ctx->device, dt)))
            return (int) dt;
    }
    return -1;
}

static bool s_dtype_usable (const ak_gate_ctx_t *ctx, ak_dtype_t dt)
{
    return ctx->kernel[dt] && (!ctx->be->supports_dtype || ctx->be->supports_dtype (ctx->device, dt));
}

static void s_note_primary (s_stage_t *s, const ak_gate_ctx_t *ctx, ak_dtype_t dt)
{
    if (ctx->spec->dtypes[0] != dt)
        s_note (s, "primary dtype %s not supported by backend %s; ran %s",
                ak_dtype_name (ctx->spec->dtypes[0]), ctx->be->name, ak_dtype_name (dt));
}

static void s_stage_smoke (ak_grun_t *run, ak_dtype_t dt, ak_gate_report_t *rep)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    s_stage_t s;
    s_stage_begin (&s, run, rep, "smoke");
    s_note_primary (&s, ctx, dt);
    const ak_size_t *z = &ctx->spec->sizes[0];
    s_check_config (&s, z->name, z->dims, dt, ctx->seed);
    s_stage_end (&s);
}

static bool s_same_dims (const ak_spec_t *spec, const int64_t *a, const int64_t *b)
{
    for (int d = 0; d < spec->nkeys; d++)
        if (a[d] != b[d])
            return false;
    return true;
}

/*  True when some workload of the task has these dims and dtype. */
static bool s_is_workload (const ak_gate_ctx_t *ctx, const int64_t *dims, ak_dtype_t dt)
{
    for (size_t w = 0; w < ctx->nworkloads; w++)
        if (ctx->workloads[w].dtype == dt && s_same_dims (ctx->spec, ctx->workloads[w].dims, dims))
            return true;
    return false;
}

/*  Every size x every spec dtype the backend runs (backend-restricted
    sizes only at the task's workloads, see ak_gate_ctx_t.sweep_all_sizes),
    plus the corpus cases not already among them.  Unsupported dtypes are
    named in the detail. */
static void s_stage_sweep (ak_grun_t *run, ak_dtype_t gate_dt, ak_gate_report_t *rep)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    (void) gate_dt;             /* every dtype: same signature as the other stages */
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, run, rep, "shape_sweep");
    char skipped[128] = "";
    size_t restricted = 0;
    for (int i = 0; i < spec->ndtypes; i++) {
        ak_dtype_t dt = spec->dtypes[i];
        if (!s_dtype_usable (ctx, dt)) {
            size_t off = strlen (skipped);
            snprintf (skipped + off, sizeof skipped - off, "%s%s", off ? ", " : "", ak_dtype_name (dt));
            continue;
        }
        for (size_t z = 0; z < spec->nsizes; z++) {
            const ak_size_t *size = &spec->sizes[z];
            if (!ak_size_for_backend (size, ctx->be->name))
                continue;
            if (size->backends && !ctx->sweep_all_sizes && !s_is_workload (ctx, size->dims, dt)) {
                restricted++;
                continue;
            }
            s_check_config (&s, size->name, size->dims, dt, ctx->seed);
        }
    }
    size_t corpus = 0, corpus_skipped = 0;
    for (size_t w = 0; w < ctx->nworkloads; w++) {
        const ak_workload_t *wl = &ctx->workloads[w];
        bool seen = false;
        for (size_t z = 0; z < spec->nsizes && !seen; z++)
            seen = s_same_dims (spec, spec->sizes[z].dims, wl->dims) && ak_spec_has_dtype (spec, wl->dtype);
        for (size_t v = 0; v < w && !seen; v++)
            seen = s_same_dims (spec, ctx->workloads[v].dims, wl->dims) && ctx->workloads[v].dtype == wl->dtype;
        if (seen)
            continue;
        if (!s_dtype_usable (ctx, wl->dtype)) {
            corpus_skipped++;
            continue;
        }
        corpus++;
        s_check_config (&s, wl->name, wl->dims, wl->dtype, ctx->seed);
    }
    if (skipped[0])
        s_note (&s, "skipped dtypes %s (backend %s does not support them)", skipped, ctx->be->name);
    if (corpus)
        s_note (&s, "%s%zu corpus cases", skipped[0] ? "; " : "", corpus);
    if (corpus_skipped)
        s_note (&s, "; %zu corpus cases skipped (dtype unsupported)", corpus_skipped);
    if (restricted)
        s_note (&s, "%s%zu large size x dtype pairs not among the workloads not swept",
                skipped[0] || corpus || corpus_skipped ? "; " : "", restricted);
    s_stage_end (&s);
}

/*  Transformed inputs at the stability size; tolerances x10.  Only NaN/Inf
    where the reference is finite (or an unwritten element) fails; values
    beyond the widened tolerance are counted in the detail. */
static void s_stage_stability (ak_grun_t *run, ak_dtype_t dt, ak_gate_report_t *rep)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, run, rep, "stability");
    s_note_primary (&s, ctx, dt);
    const ak_size_t *z = ak_spec_size (spec, spec->stability_size);
    if (!z)
        z = &spec->sizes[0];
    size_t beyond_total = 0, overflowed_total = 0;
    for (ak_gxform_t x = AK_GX_NEAR_MAX; x <= AK_GX_SAME && !s_stage_dead (&s); x++) {
        ak_gcfg_t c;
        if (!s_stage_prepare (&s, z->name, z->dims, dt, ctx->seed, x, &c))
            continue;
        ak_err_t err = { 0 };
        s.g->configs++;
        int rc = ak_gcfg_run (&c, &err);
        ak_gcmp_t r;
        if (rc == 0)
            rc = ak_gcfg_compare (&c, 10.0, &r, &err);
        if (rc != 0)
            s_stage_fail (&s, ak_gate_status_for (rc, &err), "%s", err.msg);
        else {
            s_stage_worst (&s, &c, r.worst);
            beyond_total += r.beyond;
            overflowed_total += r.overflowed;
            if (r.unwritten || r.nonfinite) {
                char text[384];
                ak_gcmp_text (&c, &r, text, sizeof text);
                s_stage_fail (&s, r.unwritten ? AK_GATE_WRONG : AK_GATE_NAN, "%s", text);
            }
        }
        ak_gcfg_free (&c);
    }
    if (beyond_total)
        s_note (&s, "%s%zu elements beyond 10x tolerance (reported, not failed)",
                s.notes[0] ? "; " : "", beyond_total);
    if (overflowed_total)
        s_note (&s, "%s%zu elements Inf where the answer is beyond %s's range (correct)",
                s.notes[0] ? "; " : "", overflowed_total, ak_dtype_name (dt));
    s_stage_end (&s);
}

/*  Three runs on the same input; runs 2 and 3 must be bitwise equal to 1. */
static void s_stage_determinism (ak_grun_t *run, ak_dtype_t dt, ak_gate_report_t *rep)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, run, rep, "determinism");
    s_note_primary (&s, ctx, dt);
    const ak_size_t *z = ak_spec_size (spec, spec->stability_size);
    if (!z)
        z = &spec->sizes[0];
    ak_gcfg_t c;
    uint8_t *first[AK_MAX_BUFS] = { 0 };
    if (!s_stage_prepare (&s, z->name, z->dims, dt, ctx->seed, AK_GX_NONE, &c)) {
        s_stage_end (&s);
        return;
    }
    s.g->configs++;
    c.keep_got = true;                 /* runs 2 and 3 are compared with run 1 here */
    for (int n = 1; n <= 3; n++) {
        ak_err_t err = { 0 };
        ak_gcmp_t r;
        int rc = ak_gcfg_run (&c, &err);
        if (rc == 0 && n == 1)
            rc = ak_gcfg_compare (&c, 1.0, &r, &err);
        if (rc != 0) {
            s_stage_fail (&s, ak_gate_status_for (rc, &err), "run %d: %s", n, err.msg);
            break;
        }
        if (n == 1) {
            s_stage_worst (&s, &c, r.worst);
            for (int k = 0; k < spec->noutputs; k++) {
                first[k] = ak_malloc (c.nout[k] * c.esz);
                memcpy (first[k], c.got[k], c.nout[k] * c.esz);
            }
            continue;
        }
        uint64_t t0 = ak_clock_mono_ns ();
        size_t differ = 0, at = 0;
        int at_out = -1;
        for (int k = 0; k < spec->noutputs; k++)
            for (size_t i = 0; i < c.nout[k]; i++)
                if (memcmp (first[k] + i * c.esz, c.got[k] + i * c.esz, c.esz) != 0) {
                    if (at_out < 0) {
                        at_out = k;
                        at = i;
                    }
                    differ++;
                }
        run->cost->compare_ms += ak_gate_ms_since (t0);
        if (differ) {
            s_stage_fail (&s, AK_GATE_WRONG,
                          "run %d differs bitwise from run 1 in %zu elements at %s, first %s[%zu]: %.9g vs %.9g",
                          n, differ, c.label, spec->outputs[at_out].name, at,
                          ak_elem_load (c.dt, c.got[at_out], at), ak_elem_load (c.dt, first[at_out], at));
            break;
        }
    }
    for (int k = 0; k < AK_MAX_BUFS; k++)
        free (first[k]);
    ak_gcfg_free (&c);
    s_stage_end (&s);
}

static void s_stage_edges (ak_grun_t *run, ak_dtype_t dt, ak_gate_report_t *rep)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    const ak_spec_t *spec = ctx->spec;
    s_stage_t s;
    s_stage_begin (&s, run, rep, "edge_cases");
    s_note_primary (&s, ctx, dt);
    for (size_t e = 0; e < spec->nedge; e++)
        if (ak_size_for_backend (&spec->edge_sizes[e], ctx->be->name))
            s_check_config (&s, spec->edge_sizes[e].name, spec->edge_sizes[e].dims, dt,
                        ctx->seed + 1000 + e);
    s_stage_end (&s);
}

static void s_stage_not_run (ak_gate_report_t *rep, const char *stage, const char *why)
{
    ak_gate_result_t *g = &rep->stages[rep->nstages++];
    memset (g, 0, sizeof *g);
    snprintf (g->stage, sizeof g->stage, "%s", stage);
    g->skipped = true;
    snprintf (g->detail, sizeof g->detail, "not run: %s", why);
}

static int s_check_ctx (const ak_gate_ctx_t *ctx, ak_gate_report_t *rep, ak_err_t *err)
{
    if (!ctx || !rep || !ctx->spec || !ctx->be || !ctx->ref_be || !ctx->ref)
        return ak_err_set (err, AK_EINVAL, "gates: incomplete context");
    if (ctx->spec->nsizes == 0 || ctx->spec->ndtypes == 0)
        return ak_err_set (err, AK_EINVAL, "gates: spec %s has no sizes or dtypes", ctx->spec->name);
    return 0;
}

/*  The stages, on run's buffers. */
static void s_gates (ak_grun_t *run, ak_gate_report_t *rep)
{
    const ak_gate_ctx_t *ctx = run->ctx;
    int dt = s_gate_dtype (ctx);
    if (dt < 0) {
        s_stage_t s;
        s_stage_begin (&s, run, rep, "smoke");
        s.g->configs = 1;
        s_stage_fail (&s, AK_GATE_ERROR, "backend %s supports none of the spec's dtypes (primary %s)",
                      ctx->be->name, ak_dtype_name (ctx->spec->dtypes[0]));
        s_stage_end (&s);
    }
    else
        s_stage_smoke (run, (ak_dtype_t) dt, rep);
    if (!rep->stages[0].passed) {
        static const char *rest[] = { "shape_sweep", "stability", "determinism", "edge_cases" };
        for (int i = 0; i < 4; i++)
            s_stage_not_run (rep, rest[i], "smoke failed");
        return;
    }
    /* The stages after smoke; a crash (device context lost) ends the gates. */
    static void (*const rest[]) (ak_grun_t *, ak_dtype_t, ak_gate_report_t *) = {
        s_stage_sweep, s_stage_stability, s_stage_determinism, s_stage_edges };
    static const char *const names[] = { "shape_sweep", "stability", "determinism", "edge_cases" };
    for (int i = 0; i < 4; i++) {
        if (rep->status == AK_GATE_CRASH)
            s_stage_not_run (rep, names[i], "the device context was lost");
        else
            rest[i] (run, (ak_dtype_t) dt, rep);
    }
}

int ak_gates_run (const ak_gate_ctx_t *ctx, ak_gate_report_t *rep, ak_err_t *err)
{
    int rc = s_check_ctx (ctx, rep, err);
    if (rc)
        return rc;
    memset (rep, 0, sizeof *rep);
    ak_grun_t run;
    ak_grun_init (&run, ctx, &rep->cost);
    s_gates (&run, rep);
    ak_grun_done (&run);
    return 0;
}

int ak_gates_recheck (const ak_gate_ctx_t *ctx, uint64_t seed, ak_gate_report_t *rep, ak_err_t *err)
{
    int rc = s_check_ctx (ctx, rep, err);
    if (rc)
        return rc;
    if (rep->nstages >= AK_GATE_MAX_STAGES)
        return ak_err_set (err, AK_EINVAL, "gates: report full");
    ak_grun_t run_, *run = &run_;
    ak_grun_init (run, ctx, &rep->cost);
    s_stage_t s;
    s_stage_begin (&s, run, rep, "recheck");
    size_t skipped = 0;
    for (size_t w = 0; w < ctx->nworkloads; w++) {
        const ak_workload_t *wl = &ctx->workloads[w];
        if (!s_dtype_usable (ctx, wl->dtype)) {
            skipped++;
            continue;
        }
        s_check_config (&s, wl->name, wl->dims, wl->dtype, seed);
    }
    if (ctx->nworkloads == 0 || skipped == ctx->nworkloads) {
        int dt = s_gate_dtype (ctx);
        if (dt >= 0)
            s_check_config (&s, ctx->spec->sizes[0].name, ctx->spec->sizes[0].dims,
                            (ak_dtype_t) dt, seed);
    }
    s_note (&s, "fresh inputs, seed %" PRIu64, seed);
    if (skipped)
        s_note (&s, "; %zu workloads skipped (dtype unsupported)", skipped);
    s_stage_end (&s);
    ak_grun_done (run);
    return 0;
}

void ak_gate_cost_text (const ak_gate_cost_t *c, char *buf, size_t len)
{
    snprintf (buf, len, "inputs %.1f ms, reference %.1f ms (%u cached, %u computed), device buffers "
              "%.1f ms (%u allocated, %u reused), copies %.1f ms, launches %.1f ms, compare %.1f ms",
              c->inputs_ms, c->reference_ms, c->ref_hits, c->ref_misses, c->alloc_ms, c->allocs,
              c->reused, c->copy_ms, c->launch_ms, c->compare_ms);
}
