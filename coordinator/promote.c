/*  coordinator/promote.c: the promotion rule (see promote.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include "promote.h"
#include "cpb.h"
#include "log.h"
#include "util.h"

static bool s_finite_pos (double x)
{
    return isfinite (x) && x > 0;
}

/* "blocked BLOCK=8" (or just the name) into buf. */
static const char *s_label (const ak_promote_cand_t *cand, char *buf, size_t len)
{
    char params[128];
    ak_cpb_params_text (cand->params, cand->nparams, params, sizeof params);
    /* a label cut short is still a label */
    if (snprintf (buf, len, "%.64s%s%s", cand->candidate_name ? cand->candidate_name : "?",
                  params[0] ? " " : "", params) < 0)
        buf[0] = '\0';
    return buf;
}

/* Percent text without trailing zeros: 0.03 -> "3", 0.025 -> "2.5". */
static const char *s_pct (double fraction, char *buf, size_t len)
{
    snprintf (buf, len, "%g", fraction * 100.0);
    return buf;
}

// ---------------------------------------------------------------- evaluation

void ak_promote_eval (const ak_promote_rule_t *rule, const ak_promote_cand_t *cand,
                      ak_promote_eval_t *ev)
{
    char label[160], pct[32], pct2[32];
    const Ak__Receipt *r = cand->receipt;
    memset (ev, 0, sizeof *ev);
    s_label (cand, label, sizeof label);

    if (!r) {
        snprintf (ev->status, sizeof ev->status, "%s", cand->state ? cand->state : "unknown");
        snprintf (ev->reason, sizeof ev->reason, "no accepted receipt (task %s%s%s)",
                  ev->status, cand->last_error && *cand->last_error ? ": " : "",
                  cand->last_error ? cand->last_error : "");
        return;
    }
    snprintf (ev->status, sizeof ev->status, "%s", r->status && *r->status ? r->status : "error");
    if (strcmp (ev->status, "ok") != 0) {
        snprintf (ev->reason, sizeof ev->reason, "%s%s%s", ev->status,
                  r->reason && *r->reason ? ": " : "", r->reason ? r->reason : "");
        return;
    }
    for (size_t g = 0; g < r->n_gates; g++) {
        const Ak__GateResult *gate = r->gates[g];
        if (!gate->passed && !gate->skipped) {
            snprintf (ev->status, sizeof ev->status, "gate_failed");
            snprintf (ev->reason, sizeof ev->reason, "gate %s failed%s%s", gate->stage,
                      gate->detail && *gate->detail ? ": " : "", gate->detail ? gate->detail : "");
            return;
        }
    }
    if (r->n_timings == 0) {
        snprintf (ev->status, sizeof ev->status, "invalid");
        snprintf (ev->reason, sizeof ev->reason, "receipt has no timings");
        return;
    }

    double wsum = 0, wbase = 0, wcand = 0, wrel = 0, worst = 0;
    const char *worst_name = NULL;
    for (size_t i = 0; i < r->n_timings; i++) {
        const Ak__WorkloadTiming *t = r->timings[i];
        const char *wname = t->workload && t->workload->name ? t->workload->name : "?";
        double w = t->workload ? t->workload->weight : 0;
        double base = t->baseline ? t->baseline->median_us : 0;
        double cnd = t->candidate ? t->candidate->median_us : 0;
        double noise = t->speedup_noise;
        if (!s_finite_pos (w) || !s_finite_pos (base) || !s_finite_pos (cnd)
            || !isfinite (noise) || noise < 0) {
            snprintf (ev->status, sizeof ev->status, "invalid");
            snprintf (ev->reason, sizeof ev->reason,
                      "invalid timing for workload '%s' (weight, medians must be positive)", wname);
            return;
        }
        /* the noise is the band of the speedup the worker measured (the
           median of paired rounds); relative to it, it carries over to the
           ratio of weighted medians */
        double s = s_finite_pos (t->speedup) ? t->speedup : base / cnd;
        wsum += w;
        wbase += w * base;
        wcand += w * cnd;
        wrel += w * (noise / s);
        double slower = cnd / base - 1.0;
        if (slower > worst) {
            worst = slower;
            worst_name = wname;
        }
    }
    if (!s_finite_pos (wsum) || !s_finite_pos (wbase) || !s_finite_pos (wcand)) {
        snprintf (ev->status, sizeof ev->status, "invalid");
        snprintf (ev->reason, sizeof ev->reason, "weighted timings out of range");
        return;
    }
    ev->ok = true;
    ev->weighted_base_us = wbase / wsum;
    ev->weighted_cand_us = wcand / wsum;
    ev->speedup = ev->weighted_base_us / ev->weighted_cand_us;
    double rel = wrel / wsum;
    ev->noise = ev->speedup * rel;

    double need = 1.0 + rule->threshold;
    if (worst_name && worst > rule->max_regression) {
        snprintf (ev->reason, sizeof ev->reason,
                  "%s: %.2fx +- %.2f, but workload '%s' is %.1f%% slower than the baseline (limit %s%%)",
                  label, ev->speedup, ev->noise, worst_name, worst * 100.0,
                  s_pct (rule->max_regression, pct, sizeof pct));
        return;
    }
    if (ev->speedup < need) {
        snprintf (ev->reason, sizeof ev->reason, "%s: %.2fx +- %.2f, below the %s%% threshold",
                  label, ev->speedup, ev->noise, s_pct (rule->threshold, pct, sizeof pct));
        return;
    }
    if (ev->speedup < need + ev->noise) {
        snprintf (ev->reason, sizeof ev->reason,
                  "%s: %.2fx +- %.2f, not beyond the %s%% threshold by more than its noise",
                  label, ev->speedup, ev->noise, s_pct (rule->threshold, pct, sizeof pct));
        return;
    }
    if (rule->has_incumbent) {
        double vs = s_finite_pos (rule->incumbent_us) ? rule->incumbent_us / ev->weighted_cand_us : 0;
        if (vs < need + vs * rel) {
            snprintf (ev->reason, sizeof ev->reason,
                      "%s: %.2fx over the baseline but %.2fx +- %.2f over the incumbent (needs %s%% beyond noise)",
                      label, ev->speedup, vs, vs * rel, s_pct (rule->threshold, pct2, sizeof pct2));
            return;
        }
    }
    ev->promotable = true;
}

// ------------------------------------------------------------------ decision

int ak_promote_tiebreak (const ak_promote_cand_t *a, const ak_promote_cand_t *b)
{
    int c = strcmp (a->candidate_name ? a->candidate_name : "", b->candidate_name ? b->candidate_name : "");
    if (c)
        return c;
    c = ak_cpb_params_cmp (a->params, a->nparams, b->params, b->nparams);
    if (c)
        return c;
    return strcmp (a->task_id ? a->task_id : "", b->task_id ? b->task_id : "");
}

/* "wrong_answer x2, compile_error x1" over the failed evaluations, in
   order of first appearance.  One pass: statuses are a small set (receipt
   statuses and task states), and a batch may hold 100,000 candidates of one
   operator, so a pair-wise count would take minutes in the group commit. */
static void s_failure_summary (const ak_promote_eval_t *ev, size_t n, char *buf, size_t len)
{
    enum { S_KINDS = 32 };
    const char *kinds[S_KINDS];
    size_t counts[S_KINDS], nkinds = 0, other = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < nkinds && strcmp (kinds[k], ev[i].status) != 0)
            k++;
        if (k < nkinds)
            counts[k]++;
        else if (nkinds < S_KINDS) {
            kinds[nkinds] = ev[i].status;
            counts[nkinds++] = 1;
        }
        else
            other++;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k <= nkinds; k++) {
        if (k == nkinds && !other)
            break;
        int w = k < nkinds ? snprintf (buf + used, len - used, "%s%s x%zu", used ? ", " : "", kinds[k], counts[k])
                           : snprintf (buf + used, len - used, "%sother x%zu", used ? ", " : "", other);
        if (w < 0 || (size_t) w >= len - used)
            break;
        used += (size_t) w;
    }
}

int ak_promote (const char *op, const char *device_class, const ak_promote_rule_t *rule,
                const ak_promote_cand_t *cands, size_t n,
                ak_promote_eval_t *evals, Ak__Winner **winner_p)
{
    ak_promote_eval_t *ev = evals ? evals : ak_calloc (n ? n : 1, sizeof *ev);
    Ak__Winner *win = ak_malloc (sizeof *win);
    ak__winner__init (win);
    ak_cpb_set (&win->op, op);
    ak_cpb_set (&win->device_class, device_class);

    size_t nok = 0;
    ssize_t best = -1, best_ok = -1;
    for (size_t i = 0; i < n; i++) {
        ak_promote_eval (rule, &cands[i], &ev[i]);
        if (!ev[i].ok)
            continue;
        nok++;
        if (best_ok < 0 || ev[i].speedup > ev[best_ok].speedup)
            best_ok = (ssize_t) i;
        if (ev[i].promotable && (best < 0 || ev[i].speedup > ev[best].speedup))
            best = (ssize_t) i;
    }

    if (best < 0) {
        win->promoted = false;
        if (n == 0)
            ak_cpb_set (&win->reason, "no candidates for this operator and device class");
        else if (nok == 0) {
            char summary[256];
            s_failure_summary (ev, n, summary, sizeof summary);
            ak_cpb_setf (&win->reason, "no candidate passed: all %zu failed (%s)", n, summary);
        }
        else
            ak_cpb_setf (&win->reason, "best candidate %s", ev[best_ok].reason);
    }
    else {
        size_t chosen = (size_t) best, tied = 0;
        for (size_t i = 0; i < n; i++) {
            if (!ev[i].promotable)
                continue;
            double band = fmax (ev[best].noise, ev[i].noise);
            if (ev[i].speedup < ev[best].speedup - band)
                continue;
            tied++;
            if (ak_promote_tiebreak (&cands[i], &cands[chosen]) < 0)
                chosen = i;
        }
        const ak_promote_cand_t *c = &cands[chosen];
        win->promoted = true;
        ak_cpb_set (&win->task_id, c->task_id);
        ak_cpb_set (&win->receipt_id, c->receipt->receipt_id);
        ak_cpb_set (&win->candidate_name, c->candidate_name);
        win->params = ak_cpb_params_dup (c->params, c->nparams);
        win->n_params = c->nparams;
        win->speedup = ev[chosen].speedup;
        win->noise = ev[chosen].noise;
        win->tied = (uint32_t) tied;
        if (tied > 1)
            ak_cpb_setf (&win->reason,
                         "%zu candidates within noise of the best (%.2fx); chosen by name, params, task id",
                         tied, ev[best].speedup);
    }
    ak_promote_picks (rule, cands, ev, n, win);
    if (!evals)
        free (ev);
    *winner_p = win;
    return 0;
}

// ------------------------------------------------------------ workload picks

bool ak_promote_at (const Ak__Receipt *r, const char *workload, const char *dtype, double *speedup,
                    double *noise)
{
    for (size_t i = 0; r && i < r->n_timings; i++) {
        const Ak__WorkloadTiming *t = r->timings[i];
        if (!t->workload || !t->workload->name || !t->workload->dtype || strcmp (t->workload->name, workload) != 0
            || strcmp (t->workload->dtype, dtype) != 0)
            continue;
        double base = t->baseline ? t->baseline->median_us : 0;
        double cnd = t->candidate ? t->candidate->median_us : 0;
        if (!s_finite_pos (base) || !s_finite_pos (cnd) || !isfinite (t->speedup_noise) || t->speedup_noise < 0)
            return false;
        *speedup = s_finite_pos (t->speedup) ? t->speedup : base / cnd;
        *noise = t->speedup_noise;
        return true;
    }
    return false;
}

const Ak__Workload **ak_promote_workloads (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                                          size_t *nw_p)
{
    const Ak__Workload **wls = NULL;
    size_t nw = 0, cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (!evals[i].ok || !cands[i].receipt)
            continue;
        const Ak__Receipt *r = cands[i].receipt;
        for (size_t k = 0; k < r->n_timings; k++) {
            const Ak__Workload *w = r->timings[k]->workload;
            if (!w || !w->name || !w->dtype)
                continue;
            size_t j = 0;
            while (j < nw && !(strcmp (wls[j]->name, w->name) == 0 && strcmp (wls[j]->dtype, w->dtype) == 0))
                j++;
            if (j < nw)
                continue;
            if (nw == cap) {
                cap = cap ? cap * 2 : 16;
                wls = ak_realloc (wls, cap * sizeof *wls);
            }
            wls[nw++] = w;
        }
    }
    *nw_p = nw;
    return wls;
}

static void s_picks_free (Ak__Winner *win)
{
    for (size_t i = 0; i < win->n_picks; i++)
        ak__workload_pick__free_unpacked (win->picks[i], NULL);
    free (win->picks);
    win->picks = NULL;
    win->n_picks = 0;
}

/* Whether cands[i] is eligible at workload (name, dtype) against the
   reference s_ref with relative noise r_ref (promote.h); its figures
   there into *s, *ns. */
static bool s_pick_ok (const ak_promote_rule_t *rule, const ak_promote_cand_t *c, const ak_promote_eval_t *ev,
                       const char *name, const char *dtype, double s_ref, double r_ref, double *s, double *ns)
{
    return ev->ok && ak_promote_at (c->receipt, name, dtype, s, ns) && *s >= 1.0 + rule->threshold + *ns
           && *s / s_ref >= 1.0 + rule->threshold + *ns / *s + r_ref;
}

size_t ak_promote_picks (const ak_promote_rule_t *rule, const ak_promote_cand_t *cands,
                         const ak_promote_eval_t *evals, size_t n, Ak__Winner *win)
{
    s_picks_free (win);
    /* the winner among cands, when one was promoted */
    const ak_promote_cand_t *wc = NULL;
    for (size_t i = 0; win->promoted && win->task_id && i < n; i++)
        if (cands[i].task_id && strcmp (cands[i].task_id, win->task_id) == 0)
            wc = &cands[i];
    if (win->promoted && !wc)
        return 0;                       /* decided elsewhere: no figures to compare with */
    size_t nw = 0;
    const Ak__Workload **wls = ak_promote_workloads (cands, evals, n, &nw);
    for (size_t j = 0; j < nw; j++) {
        const char *name = wls[j]->name, *dtype = wls[j]->dtype;
        double s_ref = 1, n_ref = 0;
        if (wc && !ak_promote_at (wc->receipt, name, dtype, &s_ref, &n_ref))
            continue;                   /* the winner was not measured there */
        double r_ref = n_ref / s_ref;
        ssize_t best = -1;
        double sb = 0, nb = 0;
        for (size_t i = 0; i < n; i++) {
            double s, ns;
            if (&cands[i] == wc || !s_pick_ok (rule, &cands[i], &evals[i], name, dtype, s_ref, r_ref, &s, &ns))
                continue;
            if (best < 0 || s > sb) {
                best = (ssize_t) i;
                sb = s;
                nb = ns;
            }
        }
        if (best < 0)
            continue;
        /* the tie band, as for the winner */
        size_t chosen = (size_t) best;
        for (size_t i = 0; i < n; i++) {
            double s, ns;
            if (&cands[i] == wc || !s_pick_ok (rule, &cands[i], &evals[i], name, dtype, s_ref, r_ref, &s, &ns))
                continue;
            if (s >= sb - fmax (nb, ns) && ak_promote_tiebreak (&cands[i], &cands[chosen]) < 0)
                chosen = i;
        }
        const ak_promote_cand_t *c = &cands[chosen];
        double s = 0, ns = 0;
        ak_promote_at (c->receipt, name, dtype, &s, &ns);
        Ak__WorkloadPick *pk = ak_malloc (sizeof *pk);
        ak__workload_pick__init (pk);
        ak_cpb_set (&pk->workload, name);
        ak_cpb_set (&pk->dtype, dtype);
        ak_cpb_set (&pk->task_id, c->task_id);
        ak_cpb_set (&pk->receipt_id, c->receipt->receipt_id);
        ak_cpb_set (&pk->candidate_name, c->candidate_name);
        pk->params = ak_cpb_params_dup (c->params, c->nparams);
        pk->n_params = c->nparams;
        pk->speedup = s;
        pk->noise = ns;
        ak_cpb_set (&pk->replaces, wc ? "winner" : "baseline");
        pk->over = s / s_ref;
        win->picks = ak_realloc (win->picks, (win->n_picks + 1) * sizeof *win->picks);
        win->picks[win->n_picks++] = pk;
    }
    free (wls);
    return win->n_picks;
}

/* TaskRecord: task_id 1, batch_id 2, state 3, attempt 4, kind 5, op 6,
   device_class 7, candidate_name 9, params 10, receipt_id 20, status 21,
   worker_id 22, last_error 27, stage 32, avoid_worker 33, confirm_of 34 */
static const ak_pbw_set_t s_task_fields = {
    (1ull << 1) | (1ull << 2) | (1ull << 3) | (1ull << 4) | (1ull << 5) | (1ull << 6) | (1ull << 7)
        | (1ull << 9) | (1ull << 10) | (1ull << 20) | (1ull << 21) | (1ull << 22) | (1ull << 27)
        | (1ull << 32) | (1ull << 33) | (1ull << 34),
    NULL, 0
};
/* Receipt: receipt_id 1, task_id 2, attempt 4, worker_id 5, status 12,
   reason 13, gates 16, timings 17 */
static const ak_pbw_set_t s_receipt_fields = {
    (1ull << 1) | (1ull << 2) | (1ull << 4) | (1ull << 5) | (1ull << 12) | (1ull << 13) | (1ull << 16)
        | (1ull << 17),
    NULL, 0
};

const ak_pbw_set_t *ak_promote_task_fields (void)
{
    return &s_task_fields;
}

const ak_pbw_set_t *ak_promote_receipt_fields (void)
{
    return &s_receipt_fields;
}

int ak_promote_receipt_of (ak_txn_t *txn, const Ak__TaskRecord *task, bool full, Ak__Receipt **r_p,
                           ak_err_t *err)
{
    *r_p = NULL;
    if (!*task->receipt_id)
        return 0;
    int rc = full ? ak_store_get_receipt (txn, task->receipt_id, r_p, err)
                  : ak_store_get_only (txn, AK_DB_RECEIPTS, task->receipt_id, &ak__receipt__descriptor,
                                       &s_receipt_fields, (ProtobufCMessage **) r_p, err);
    if (rc == AK_ENOTFOUND || rc == AK_ESTORE) {
        ak_error ("task %s: accepted receipt %s unreadable: %s", task->task_id, task->receipt_id,
                  err ? err->msg : "");
        *r_p = NULL;
        return 0;
    }
    return rc;
}
