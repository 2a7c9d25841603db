/*  coordinator/verify.c: verify batches of installed profiles (see verify.h,
    docs/profiles.md "Verify"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "verify.h"
#include "cpb.h"
#include "log.h"
#include "profiles.h"
#include "util.h"

// --------------------------------------------------------------------- rule

static double s_nonneg (double v)
{
    return isfinite (v) && v > 0 ? v : 0;
}

bool ak_verify_judge (const ak_verify_rule_t *rule, double recorded, double recorded_noise,
                      double measured, double measured_noise, double threshold,
                      char *reason, size_t len)
{
    double k = rule && isfinite (rule->k) && rule->k >= 0 ? rule->k : AK_VERIFY_DEFAULT_K;
    double floor = rule && isfinite (rule->floor) && rule->floor >= 0 ? rule->floor : AK_VERIFY_DEFAULT_FLOOR;
    if (!isfinite (threshold) || threshold <= 0)
        threshold = AK_VERIFY_DEFAULT_THRESHOLD;
    double nm = s_nonneg (measured_noise), nr = s_nonneg (recorded_noise);
    if (!isfinite (measured) || measured <= 0) {
        snprintf (reason, len, "no valid speedup measured");
        return false;
    }
    if (measured < 1 + threshold) {
        snprintf (reason, len, "speedup %.3g +- %.2g is below %.3g (the %g%% threshold)",
                  measured, nm, 1 + threshold, threshold * 100);
        return false;
    }
    if (!isfinite (recorded) || recorded <= 0) {
        snprintf (reason, len, "speedup %.3g +- %.2g, but the recorded speedup is not a valid number",
                  measured, nm);
        return false;
    }
    double band = k * (nm + nr) + floor * recorded;
    double cap = fmax (AK_VERIFY_MAX_BAND, floor) * recorded;
    bool capped = band > cap;
    if (capped)
        band = cap;
    if (fabs (measured - recorded) > band) {
        char why_cap[80] = "";
        if (capped)
            snprintf (why_cap, sizeof why_cap, " (the band is capped at %g%% of the recorded speedup)",
                      fmax (AK_VERIFY_MAX_BAND, floor) * 100);
        snprintf (reason, len, "speedup %.3g +- %.2g vs recorded %.3g +- %.2g: outside +- %.2g%s",
                  measured, nm, recorded, nr, band, why_cap);
        return false;
    }
    /* a pass all the same: the rule judges the point figures; the reason
       says when the measurement alone could not tell a speedup from none */
    snprintf (reason, len, "speedup %.3g +- %.2g vs recorded %.3g +- %.2g: within +- %.2g%s",
              measured, nm, recorded, nr, band,
              measured - nm < 1 + threshold ? " (noisy: this measurement alone does not exclude no speedup)" : "");
    return true;
}

// ------------------------------------------------------------------ create

static Ak__VerifyVerdict *s_verdict_new (const char *cls, const char *key, const char *verdict,
                                         const char *reason)
{
    Ak__VerifyVerdict *v = ak_malloc (sizeof *v);
    ak__verify_verdict__init (v);
    ak_cpb_set (&v->device_class, cls);
    ak_cpb_set (&v->key, key);
    ak_cpb_set (&v->verdict, verdict);
    ak_cpb_set (&v->reason, reason);
    return v;
}

static void s_report_add (Ak__VerifyReport *rep, Ak__VerifyVerdict *v)
{
    rep->verdicts = ak_realloc (rep->verdicts, (rep->n_verdicts + 1) * sizeof *rep->verdicts);
    rep->verdicts[rep->n_verdicts++] = v;
}

static int s_worker_cmp (const void *a, const void *b)
{
    return strcmp ((*(ak_worker_t *const *) a)->worker_id, (*(ak_worker_t *const *) b)->worker_id);
}

/* Live workers with a device of class cls, by id (a malloc'ed array). */
static size_t s_live_of (ak_registry_t *reg, const char *cls, ak_worker_t ***out)
{
    size_t n = 0;
    ak_worker_t **v = NULL;
    for (ak_worker_t *w = ak_registry_first (reg); w; w = ak_registry_next (reg)) {
        if (!w->alive)
            continue;
        for (size_t c = 0; c < w->nclasses; c++)
            if (strcmp (w->classes[c], cls) == 0) {
                v = ak_realloc (v, (n + 1) * sizeof *v);
                v[n++] = w;
                break;
            }
    }
    if (n > 1)
        qsort (v, n, sizeof *v, s_worker_cmp);
    *out = v;
    return n;
}

static void s_add_task (ak_expansion_t *exp, Ak__TaskRecord *t)
{
    exp->tasks = ak_realloc (exp->tasks, (exp->ntasks + 1) * sizeof *exp->tasks);
    exp->tasks[exp->ntasks++] = t;
}

/* The verify task of entry e on worker w, from the entry's tuning task
   (spec, reference, baseline, policy). */
static Ak__TaskRecord *s_task (const char *batch_id, size_t seq, const char *name,
                               const Ak__ProfileClass *pc, const Ak__ProfileEntry *e,
                               const Ak__TaskRecord *orig, const ak_worker_t *w, uint64_t now_ms)
{
    Ak__TaskRecord *t = ak_malloc (sizeof *t);
    ak__task_record__init (t);
    ak_cpb_setf (&t->task_id, "%s.%04zu", batch_id, seq);
    ak_cpb_set (&t->batch_id, batch_id);
    ak_cpb_set (&t->state, "queued");
    t->attempt = 1;
    ak_cpb_set (&t->kind, AK_VERIFY_KIND);
    ak_cpb_set (&t->op, e->op);
    ak_cpb_set (&t->device_class, pc->device_class);
    ak_cpb_set (&t->backend, e->backend);
    ak_cpb_set (&t->candidate_name, e->candidate_name);
    t->params = ak_cpb_params_dup (e->params, e->n_params);
    t->n_params = e->n_params;
    ak_cpb_set (&t->spec_digest, orig->spec_digest);
    ak_cpb_set (&t->reference_digest, orig->reference_digest);
    ak_cpb_set (&t->baseline_digest, orig->baseline_digest);
    ak_cpb_set (&t->candidate_digest, e->source_digest);
    ak_cpb_set (&t->reference_name, orig->reference_name);
    ak_cpb_set (&t->baseline_name, orig->baseline_name);
    ak_cpb_set (&t->candidate_source_name, e->source_name);
    Ak__Workload *wl = ak_malloc (sizeof *wl);
    ak__workload__init (wl);
    ak_cpb_set (&wl->name, e->workload_name);
    wl->dims = ak_calloc (e->n_dims + 1, sizeof *wl->dims);
    memcpy (wl->dims, e->dims, e->n_dims * sizeof *wl->dims);
    wl->n_dims = e->n_dims;
    ak_cpb_set (&wl->dtype, e->dtype);
    wl->weight = 1;
    t->workloads = ak_calloc (1, sizeof *t->workloads);
    t->workloads[0] = wl;
    t->n_workloads = 1;
    if (orig->policy)
        t->policy = (Ak__Policy *) ak_cpb_dup (&orig->policy->base);
    t->queued_ms = now_ms;
    ak_cpb_set (&t->pin_worker, w->worker_id);
    Ak__VerifyRef *ref = ak_malloc (sizeof *ref);
    ak__verify_ref__init (ref);
    ak_cpb_set (&ref->profile, name);
    ak_cpb_set (&ref->device_class, pc->device_class);
    ak_cpb_set (&ref->key, e->key);
    ref->speedup = e->speedup;
    ref->noise = e->noise;
    ref->threshold = orig->policy && orig->policy->threshold > 0 ? orig->policy->threshold
                                                                 : AK_VERIFY_DEFAULT_THRESHOLD;
    ak_cpb_set (&ref->host, w->hello ? w->hello->host : "");
    if (e->launch)
        ref->launch = (Ak__LaunchConfig *) ak_cpb_dup (&e->launch->base);
    t->verify = ref;
    return t;
}

int ak_verify_create (ak_txn_t *txn, ak_registry_t *reg, const char *name, const ak_verify_rule_t *rule,
                      const char *batch_id, uint64_t now_ms, ak_expansion_t **exp_p, ak_err_t *err)
{
    *exp_p = NULL;
    Ak__ProfileClass **classes = NULL;
    size_t ncls = 0;
    int rc = ak_profiles_load (txn, name, &classes, &ncls, err);
    if (rc)
        return rc;
    ak_expansion_t *exp = ak_calloc (1, sizeof *exp);
    Ak__BatchRecord *b = ak_malloc (sizeof *b);
    ak__batch_record__init (b);
    exp->batch = b;
    ak_cpb_set (&b->batch_id, batch_id);
    ak_cpb_setf (&b->name, "verify %s", name);
    ak_cpb_set (&b->state, "open");
    ak_cpb_set (&b->kind, AK_VERIFY_KIND);
    b->created_ms = now_ms;
    b->targets = ak_calloc (ncls + 1, sizeof *b->targets);
    Ak__VerifyReport *rep = ak_malloc (sizeof *rep);
    ak__verify_report__init (rep);
    b->verify = rep;
    ak_cpb_set (&rep->profile, name);
    ak_cpb_set (&rep->batch_id, batch_id);
    rep->k = rule->k;
    rep->floor = rule->floor;

    size_t seq = 0;
    for (size_t c = 0; c < ncls && rc == 0; c++) {
        const Ak__ProfileClass *pc = classes[c];
        b->targets[b->n_targets] = (char *) protobuf_c_empty_string;
        ak_cpb_set (&b->targets[b->n_targets++], pc->device_class);
        ak_worker_t **live = NULL;
        size_t nlive = s_live_of (reg, pc->device_class, &live);
        for (size_t i = 0; i < pc->n_entries && rc == 0; i++) {
            const Ak__ProfileEntry *e = pc->entries[i];
            if (strcmp (e->kind, AK_PROFILE_KIND_VENDOR) == 0) {
                /* the library stays: nothing of the profile's runs here */
                char why[1024];
                snprintf (why, sizeof why, "vendor entry: no kernel to verify (the vendor library %.32s stays: "
                          "%.900s)", e->vendor, e->reason);
                s_report_add (rep, s_verdict_new (pc->device_class, e->key, AK_VERIFY_VENDOR, why));
                rep->entries_vendor++;
                continue;
            }
            if (nlive == 0) {
                char why[160];
                snprintf (why, sizeof why, "no live worker of class %.100s", pc->device_class);
                Ak__VerifyVerdict *v = s_verdict_new (pc->device_class, e->key, "unverified", why);
                v->recorded = e->speedup;
                v->recorded_noise = e->noise;
                s_report_add (rep, v);
                continue;
            }
            Ak__TaskRecord *orig = NULL;
            char *probe = NULL;
            size_t plen = 0;
            ak_err_t e2 = { 0 };
            const char *why = NULL;
            int grc = *e->task_id ? ak_store_get_task (txn, e->task_id, &orig, &e2) : AK_ENOTFOUND;
            if (grc == AK_ENOTFOUND)
                why = "its tuning task is not in this store (imported?): spec, reference and baseline unknown";
            else
            if (grc == 0 && ak_store_get_blob (txn, e->source_digest, &probe, &plen, &e2) != 0)
                why = "its kernel source is missing from the store";
            else
            if (grc == 0 && (!*orig->spec_digest || !*orig->baseline_digest || !*orig->reference_digest))
                why = "its tuning task names no spec, reference or baseline";
            free (probe);
            if (grc && grc != AK_ENOTFOUND) {
                rc = ak_err_prefix (&e2, "profile %s: %s on %s: task %s", name, e->key, pc->device_class,
                                    e->task_id);
                *err = e2;
            }
            else
            if (why) {
                Ak__VerifyVerdict *v = s_verdict_new (pc->device_class, e->key, "unverified", why);
                v->recorded = e->speedup;
                v->recorded_noise = e->noise;
                s_report_add (rep, v);
            }
            else
                for (size_t k = 0; k < nlive; k++)
                    s_add_task (exp, s_task (batch_id, ++seq, name, pc, e, orig, live[k], now_ms));
            if (orig)
                ak__task_record__free_unpacked (orig, NULL);
        }
        free (live);
    }
    ak_profiles_free (&classes, ncls);
    if (rc == 0 && exp->ntasks > AK_EXPAND_MAX_TASKS)
        rc = ak_err_set (err, AK_ETOOBIG, "verify of profile %s would have more than %d tasks",
                         name, AK_EXPAND_MAX_TASKS);
    if (rc == 0) {
        b->ntasks = (uint32_t) exp->ntasks;
        if (exp->ntasks && exp->tasks[0]->policy)
            b->policy = (Ak__Policy *) ak_cpb_dup (&exp->tasks[0]->policy->base);
        rc = ak_expand_store (exp, txn, err);
    }
    if (rc)
        ak_expansion_destroy (&exp);
    *exp_p = exp;
    return rc;
}

// ------------------------------------------------------------------ settle

typedef struct {
    Ak__TaskRecord **tasks;
    size_t           n;
    const char      *batch_id;
    int              bad;
} s_tasks_t;

static int s_collect_task (const char *key, const void *val, size_t len, void *arg)
{
    s_tasks_t *ts = arg;
    Ak__TaskRecord *t = ak__task_record__unpack (NULL, len, val);
    if (!t || strcmp (t->batch_id, ts->batch_id) != 0) {
        if (!t) {
            ak_error ("verify: tasks/%s does not decode; skipped", key);
            ts->bad++;
        }
        else
            ak__task_record__free_unpacked (t, NULL);
        return 0;
    }
    ts->tasks = ak_realloc (ts->tasks, (ts->n + 1) * sizeof *ts->tasks);
    ts->tasks[ts->n++] = t;
    return 0;
}

/* The first gate that failed, as "gate STAGE failed: DETAIL". */
static bool s_failed_gate (const Ak__Receipt *r, char *buf, size_t len)
{
    for (size_t i = 0; i < r->n_gates; i++) {
        const Ak__GateResult *g = r->gates[i];
        if (!g->passed && !g->skipped) {
            snprintf (buf, len, "gate %.32s failed (%.32s): %.300s", g->stage, r->status,
                      *g->detail ? g->detail : r->reason);
            return true;
        }
    }
    return false;
}

/* The verdict of one verify task from its record and receipt. */
static Ak__VerifyVerdict *s_judge_task (ak_txn_t *txn, const Ak__VerifyReport *rep, const Ak__TaskRecord *t)
{
    const Ak__VerifyRef *ref = t->verify;
    Ak__VerifyVerdict *v = s_verdict_new (ref->device_class, ref->key, "fail", "");
    ak_cpb_set (&v->worker_id, t->pin_worker);
    ak_cpb_set (&v->host, ref->host);
    ak_cpb_set (&v->task_id, t->task_id);
    v->recorded = ref->speedup;
    v->recorded_noise = ref->noise;
    char why[512] = "";
    Ak__Receipt *r = NULL;
    ak_err_t e = { 0 };
    if (strcmp (t->state, "cancelled") == 0) {
        ak_cpb_set (&v->verdict, "unverified");
        snprintf (why, sizeof why, "cancelled");
    }
    else
    if (!*t->receipt_id) {
        /* failed without a receipt: its worker went away (or poisoned) */
        snprintf (why, sizeof why, "%s%.400s", strcmp (t->state, "poisoned") == 0 ? "no result: " : "",
                  *t->last_error ? t->last_error : t->state);
    }
    else
    if (ak_store_get_receipt (txn, t->receipt_id, &r, &e) != 0)
        snprintf (why, sizeof why, "receipt %.64s unreadable: %.300s", t->receipt_id, e.msg);
    else {
        ak_cpb_set (&v->receipt_id, r->receipt_id);
        if (*r->host)
            ak_cpb_set (&v->host, r->host);
        const Ak__Workload *wl = t->n_workloads ? t->workloads[0] : NULL;
        const Ak__WorkloadTiming *wt = NULL;
        for (size_t i = 0; wl && i < r->n_timings; i++)
            if (r->timings[i]->workload && strcmp (r->timings[i]->workload->name, wl->name) == 0
                && strcmp (r->timings[i]->workload->dtype, wl->dtype) == 0)
                wt = r->timings[i];
        if (strcmp (r->status, "ok") != 0) {
            if (!s_failed_gate (r, why, sizeof why))
                snprintf (why, sizeof why, "%.32s: %.400s", r->status, r->reason);
        }
        else
        if (!wt)
            snprintf (why, sizeof why, "no timing for workload %.64s in receipt %.64s",
                      wl ? wl->name : "?", r->receipt_id);
        else {
            ak_verify_rule_t rule = { rep->k, rep->floor };
            v->measured = wt->speedup;
            v->measured_noise = wt->speedup_noise;
            if (ak_verify_judge (&rule, ref->speedup, ref->noise, wt->speedup, wt->speedup_noise,
                                 ref->threshold, why, sizeof why))
                ak_cpb_set (&v->verdict, "pass");
        }
        ak__receipt__free_unpacked (r, NULL);
    }
    ak_cpb_set (&v->reason, why);
    return v;
}

typedef struct {
    const char *cls, *key;
    int         state;              /* 0 pass, 1 unverified, 2 fail */
} s_entry_t;

/* Whether profile name still holds what the batch made at since_ms
   verified: no class written after it (an install, replace or import). */
static int s_profile_unchanged (ak_txn_t *txn, const char *name, uint64_t since_ms, bool *unchanged,
                                ak_err_t *err)
{
    Ak__ProfileClass **classes = NULL;
    size_t n = 0;
    *unchanged = false;
    int rc = ak_profiles_load (txn, name, &classes, &n, err);
    if (rc == AK_ENOTFOUND)
        return 0;
    if (rc)
        return rc;
    *unchanged = true;
    for (size_t i = 0; i < n; i++)
        if (classes[i]->updated_ms > since_ms)
            *unchanged = false;
    ak_profiles_free (&classes, n);
    return 0;
}

int ak_verify_settle (ak_txn_t *txn, const char *batch_id, uint64_t now_ms, bool *is_verify,
                      ak_err_t *err)
{
    *is_verify = false;
    Ak__BatchRecord *b = NULL;
    int rc = ak_store_get_batch (txn, batch_id, &b, err);
    if (rc)
        return rc;
    if (strcmp (b->kind, AK_VERIFY_KIND) != 0) {
        ak__batch_record__free_unpacked (b, NULL);
        return 0;
    }
    *is_verify = true;
    if (!b->verify) {
        b->verify = ak_malloc (sizeof *b->verify);
        ak__verify_report__init (b->verify);
    }
    Ak__VerifyReport *rep = b->verify;
    ak_cpb_set (&rep->batch_id, batch_id);
    /* judged afresh (a `retry` may settle the batch again): keep only the
       verdicts made at creation, those with no task */
    size_t kept = 0;
    for (size_t i = 0; i < rep->n_verdicts; i++) {
        if (!*rep->verdicts[i]->task_id)
            rep->verdicts[kept++] = rep->verdicts[i];
        else
            ak__verify_verdict__free_unpacked (rep->verdicts[i], NULL);
    }
    rep->n_verdicts = kept;
    for (size_t i = 0; i < rep->n_reasons; i++)
        if (rep->reasons[i] != protobuf_c_empty_string)
            free (rep->reasons[i]);
    free (rep->reasons);
    rep->reasons = NULL;
    rep->n_reasons = 0;
    char *prefix = ak_sprintf ("%s.", batch_id);
    s_tasks_t ts = { NULL, 0, batch_id, 0 };
    rc = ak_store_walk (txn, AK_DB_TASKS, prefix, s_collect_task, &ts, err);
    free (prefix);
    for (size_t i = 0; rc == 0 && i < ts.n; i++) {
        const Ak__TaskRecord *t = ts.tasks[i];
        if (strcmp (t->kind, AK_VERIFY_KIND) != 0 || !t->verify)
            continue;
        s_report_add (rep, s_judge_task (txn, rep, t));
    }
    for (size_t i = 0; i < ts.n; i++)
        ak__task_record__free_unpacked (ts.tasks[i], NULL);
    free (ts.tasks);
    if (rc) {
        ak__batch_record__free_unpacked (b, NULL);
        return rc;
    }

    /* per entry: failing if any host failed, else unverified if any was
       not checked, else passed */
    s_entry_t *es = ak_calloc (rep->n_verdicts + 1, sizeof *es);
    size_t nes = 0;
    for (size_t i = 0; i < rep->n_verdicts; i++) {
        const Ak__VerifyVerdict *v = rep->verdicts[i];
        if (strcmp (v->verdict, AK_VERIFY_VENDOR) == 0)
            continue;                   /* no kernel: neither checked nor failing */
        int st = strcmp (v->verdict, "pass") == 0 ? 0 : strcmp (v->verdict, "fail") == 0 ? 2 : 1;
        size_t j = 0;
        while (j < nes && !(strcmp (es[j].cls, v->device_class) == 0 && strcmp (es[j].key, v->key) == 0))
            j++;
        if (j == nes)
            es[nes++] = (s_entry_t) { v->device_class, v->key, st };
        else
        if (st > es[j].state)
            es[j].state = st;
        if (st) {
            rep->reasons = ak_realloc (rep->reasons, (rep->n_reasons + 1) * sizeof *rep->reasons);
            rep->reasons[rep->n_reasons++] = ak_sprintf ("%s %s on %s (%s): %s: %s", v->device_class, v->key,
                                                         *v->host ? v->host : "-",
                                                         *v->worker_id ? v->worker_id : "-",
                                                         v->verdict, v->reason);
        }
    }
    rep->entries = (uint32_t) nes;
    rep->entries_failed = rep->entries_unverified = 0;
    for (size_t j = 0; j < nes; j++) {
        rep->entries_failed += es[j].state == 2;
        rep->entries_unverified += es[j].state == 1;
    }
    free (es);
    ak_cpb_set (&rep->state, rep->entries_failed ? "failing"
                             : rep->entries_unverified || nes == 0 ? "unverified" : "verified");
    rep->finished_ms = now_ms;
    rc = ak_store_put_batch (txn, b, err);
    bool current = false;
    if (rc == 0)
        rc = s_profile_unchanged (txn, rep->profile, b->created_ms, &current, err);
    if (rc == 0 && current)
        rc = ak_profiles_put_status (txn, rep, err);
    else
    if (rc == 0)
        ak_warn ("verify %s: profile %s was installed into (or is gone) since the batch began: "
                 "its verdicts are in the batch, not recorded as the profile's status", batch_id, rep->profile);
    if (rc == 0)
        ak_info ("verify %s: profile %s: %s (%u of %u entries failed, %u unverified)", batch_id,
                 rep->profile, rep->state, rep->entries_failed, rep->entries, rep->entries_unverified);
    ak__batch_record__free_unpacked (b, NULL);
    return rc;
}
