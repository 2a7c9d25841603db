/*  coordinator/rounds.c: successive halving and the confirmation round
    (see rounds.h). */
#include <czmq.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rounds.h"
#include "search.h"
#include "promote.h"
#include "arena.h"
#include "cpb.h"
#include "log.h"
#include "util.h"

// ------------------------------------------------------------------ helpers

/* Tie-break order of promote.c: candidate name, params ascending, task id. */
static int s_tiebreak (const ak_promote_cand_t *a, const ak_promote_cand_t *b)
{
    int c = strcmp (a->candidate_name ? a->candidate_name : "", b->candidate_name ? b->candidate_name : "");
    if (c)
        return c;
    c = ak_cpb_params_cmp (a->params, a->nparams, b->params, b->nparams);
    if (c)
        return c;
    return strcmp (a->task_id ? a->task_id : "", b->task_id ? b->task_id : "");
}

static const char *s_label (const ak_promote_cand_t *cand, char *buf, size_t len)
{
    char params[128];
    ak_cpb_params_text (cand->params, cand->nparams, params, sizeof params);
    if (snprintf (buf, len, "%.64s%s%s", cand->candidate_name ? cand->candidate_name : "?",
                  params[0] ? " " : "", params) < 0)
        buf[0] = '\0';
    return buf;
}

// ------------------------------------------------------------ pure decisions

typedef struct {
    const ak_promote_cand_t *cands;
    const ak_promote_eval_t *evals;
} s_order_t;

/* Faster first, then the tie-break order. */
static int s_cmp_speed (const s_order_t *o, size_t a, size_t b)
{
    if (o->evals[a].speedup != o->evals[b].speedup)
        return o->evals[a].speedup > o->evals[b].speedup ? -1 : 1;
    return s_tiebreak (&o->cands[a], &o->cands[b]);
}

size_t ak_rounds_best (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                       size_t keep, size_t *out)
{
    s_order_t o = { cands, evals };
    size_t m = 0;
    /* insertion into the sorted prefix out[0..m), kept at most `keep` long */
    for (size_t i = 0; i < n; i++) {
        if (!evals[i].ok)
            continue;
        size_t pos = m;
        while (pos > 0 && s_cmp_speed (&o, i, out[pos - 1]) < 0)
            pos--;
        if (pos >= keep)
            continue;
        size_t end = m < keep ? m : keep - 1;
        memmove (out + pos + 1, out + pos, (end - pos) * sizeof *out);
        out[pos] = i;
        if (m < keep)
            m++;
    }
    return m;
}

static bool s_among (const size_t *v, size_t n, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (v[k] == i)
            return true;
    return false;
}

size_t ak_rounds_leaders (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                          double threshold, const size_t *kept, size_t nkept, size_t *out, size_t cap)
{
    size_t nw = 0, m = 0;
    const Ak__Workload **wls = ak_promote_workloads (cands, evals, n, &nw);
    for (size_t j = 0; j < nw && m < cap; j++) {
        const char *name = wls[j]->name, *dtype = wls[j]->dtype;
        ssize_t lead = -1;
        double sl = 0, nl = 0;
        for (size_t i = 0; i < n; i++) {
            double s, ns;
            if (!evals[i].ok || !ak_promote_at (cands[i].receipt, name, dtype, &s, &ns))
                continue;
            if (lead < 0 || s > sl || (s == sl && s_tiebreak (&cands[i], &cands[lead]) < 0)) {
                lead = (ssize_t) i;
                sl = s;
                nl = ns;
            }
        }
        if (lead < 0 || s_among (kept, nkept, (size_t) lead) || s_among (out, m, (size_t) lead)
            || sl < 1.0 + threshold + nl)
            continue;
        bool ahead = true;
        for (size_t k = 0; k < nkept && ahead; k++) {
            double s, ns;
            if (ak_promote_at (cands[kept[k]].receipt, name, dtype, &s, &ns))
                ahead = sl / s >= 1.0 + nl / sl + ns / s;
        }
        if (ahead)
            out[m++] = (size_t) lead;
    }
    free (wls);
    return m;
}

size_t ak_rounds_finalists (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                            size_t out[AK_ROUNDS_MAX_FINALISTS])
{
    ssize_t best = -1;
    for (size_t i = 0; i < n; i++)
        if (evals[i].promotable && (best < 0 || evals[i].speedup > evals[best].speedup))
            best = (ssize_t) i;
    if (best < 0)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!evals[i].promotable)
            continue;
        double band = fmax (evals[best].noise, evals[i].noise);
        if (evals[i].speedup < evals[best].speedup - band)
            continue;
        size_t pos = m;
        while (pos > 0 && s_tiebreak (&cands[i], &cands[out[pos - 1]]) < 0)
            pos--;
        if (pos >= AK_ROUNDS_MAX_FINALISTS)
            continue;
        size_t end = m < AK_ROUNDS_MAX_FINALISTS ? m : AK_ROUNDS_MAX_FINALISTS - 1;
        memmove (out + pos + 1, out + pos, (end - pos) * sizeof *out);
        out[pos] = i;
        if (m < AK_ROUNDS_MAX_FINALISTS)
            m++;
    }
    return m;
}

static double s_half_width (double noise)
{
    return isfinite (noise) && noise > 0 ? noise : 0;
}

bool ak_rounds_confirm_agrees (double measured, double measured_noise, double confirmed,
                               double confirmed_noise, double threshold, double *tolerance_p)
{
    if (!isfinite (threshold) || threshold < 0)
        threshold = 0;
    double tol = s_half_width (measured_noise) + s_half_width (confirmed_noise);
    bool valid = isfinite (measured) && measured > 0 && isfinite (confirmed) && confirmed > 0;
    if (valid)
        tol += threshold * fmin (measured, confirmed);
    if (tolerance_p)
        *tolerance_p = tol;
    return valid && fabs (measured - confirmed) <= tol;
}

/* Appends "; text" (or text) to buf, cutting rather than overflowing. */
static void s_append (char *buf, size_t len, const char *text)
{
    size_t used = strlen (buf);
    if (used + 1 < len)
        snprintf (buf + used, len - used, "%s%s", used ? "; " : "", text);
}

void ak_rounds_confirm_decide (const ak_promote_rule_t *rule, double implausible,
                               const ak_promote_cand_t *cands, const ak_promote_eval_t *evals,
                               const ak_confirm_t *confirms, size_t n, Ak__Winner *win)
{
    size_t fin[AK_ROUNDS_MAX_FINALISTS];
    size_t nf = win->promoted ? ak_rounds_finalists (cands, evals, n, fin) : 0;
    bool any = false;
    for (size_t k = 0; k < nf; k++)
        any |= confirms[fin[k]].task_id != NULL;
    if (!any)
        return;
    if (!(implausible > 1))
        implausible = 10;
    char notes[768] = "", line[1024], label[160];
    const char *tie = win->tied > 1 && win->reason ? win->reason : "";
    char tie_text[256];
    snprintf (tie_text, sizeof tie_text, "%s", tie);
    for (size_t k = 0; k < nf; k++) {
        size_t i = fin[k];
        const ak_confirm_t *c = &confirms[i];
        s_label (&cands[i], label, sizeof label);
        char flag[96] = "";
        if (evals[i].speedup > implausible)
            snprintf (flag, sizeof flag, "implausible speedup %.2fx (> %gx), re-checked on fresh inputs: ",
                      evals[i].speedup, implausible);
        if (!c->task_id) {
            if (snprintf (line, sizeof line, "%s%s: no confirm task", flag, label) < 0)
                line[0] = '\0';
            s_append (notes, sizeof notes, line);
            continue;
        }
        if (!c->receipt) {
            if (snprintf (line, sizeof line, "%s%s not confirmed: confirm task %s %s%s%.160s", flag, label,
                          c->task_id, c->state ? c->state : "?", c->last_error && *c->last_error ? ": " : "",
                          c->last_error ? c->last_error : "") < 0)
                line[0] = '\0';
            s_append (notes, sizeof notes, line);
            continue;
        }
        ak_promote_cand_t cc = cands[i];
        cc.receipt = c->receipt;
        cc.task_id = c->task_id;
        ak_promote_rule_t r = *rule;
        r.has_incumbent = false;
        ak_promote_eval_t ev;
        ak_promote_eval (&r, &cc, &ev);
        const char *on = c->receipt->worker_id && *c->receipt->worker_id ? c->receipt->worker_id : "?";
        bool same = c->avoid_worker && *c->avoid_worker && strcmp (on, c->avoid_worker) == 0;
        if (!ev.promotable) {
            if (snprintf (line, sizeof line, "%s%s not confirmed on %s%s: %.300s", flag, label, on,
                          same ? " (the same worker: no other live worker of the class)" : "",
                          ev.reason[0] ? ev.reason : ev.status) < 0)
                line[0] = '\0';
            s_append (notes, sizeof notes, line);
            continue;
        }
        /* promotable on its confirmation: this finalist is the winner,
           with the lower of its two measurements (never the higher as
           confirmed); a confirmation outside the noise bands says so */
        const ak_promote_cand_t *w = &cands[i];
        double tol = 0;
        bool agrees = ak_rounds_confirm_agrees (evals[i].speedup, evals[i].noise, ev.speedup, ev.noise,
                                                rule->threshold, &tol);
        bool conf_lower = ev.speedup <= evals[i].speedup;
        ak_cpb_set (&win->task_id, w->task_id);
        ak_cpb_set (&win->receipt_id, w->receipt ? w->receipt->receipt_id : "");
        ak_cpb_set (&win->candidate_name, w->candidate_name);
        ak_cpb_params_free (win->params, win->n_params);
        win->params = ak_cpb_params_dup (w->params, w->nparams);
        win->n_params = w->nparams;
        win->speedup = conf_lower ? ev.speedup : evals[i].speedup;
        win->noise = conf_lower ? ev.noise : evals[i].noise;
        ak_cpb_set (&win->confirmation, agrees ? "confirmed" : "disagrees");
        ak_cpb_set (&win->figures_receipt_id, conf_lower ? c->receipt->receipt_id
                                                         : w->receipt ? w->receipt->receipt_id : "");
        char reason[1400], verdict[200];
        if (agrees)
            snprintf (verdict, sizeof verdict, "confirmed on %s", on);
        else
            snprintf (verdict, sizeof verdict, "confirmation disagrees: %.2fx on %s is %.2f off the "
                      "measured figure, outside the noise bands (+- %.2f); the lower figure is reported", ev.speedup,
                      on, fabs (ev.speedup - evals[i].speedup), tol);
        if (snprintf (reason, sizeof reason, "%s%s%s (task %s: %.2fx +- %.2f on fresh inputs; "
                  "measured %.2fx +- %.2f on %s)%s%.700s%s%s", flag, verdict,
                  same ? " (the same worker: no other live worker of the class)" : "",
                  c->task_id, ev.speedup, ev.noise, evals[i].speedup, evals[i].noise,
                  c->avoid_worker && *c->avoid_worker ? c->avoid_worker : "?",
                  notes[0] ? "; before it: " : "", notes, tie_text[0] ? "; " : "", tie_text) < 0)
            reason[0] = '\0';
        ak_cpb_set (&win->reason, reason);
        return;
    }
    win->promoted = false;
    ak_cpb_set (&win->task_id, "");
    ak_cpb_set (&win->receipt_id, "");
    ak_cpb_set (&win->candidate_name, "");
    ak_cpb_params_free (win->params, win->n_params);
    win->params = NULL;
    win->n_params = 0;
    win->speedup = 0;
    win->noise = 0;
    ak_cpb_setf (&win->reason, "not confirmed: %.900s; the baseline stays", notes);
}

void ak_rounds_picks_confirm (double threshold, const ak_promote_cand_t *cands, const ak_confirm_t *confirms,
                              size_t n, Ak__Winner *win)
{
    for (size_t j = 0; j < win->n_picks; j++) {
        Ak__WorkloadPick *pk = win->picks[j];
        ak_cpb_set (&pk->confirmation, "");
        ak_cpb_set (&pk->confirmed_on, "");
        size_t i = 0;
        while (i < n && strcmp (cands[i].task_id, pk->task_id) != 0)
            i++;
        const Ak__Receipt *cr = i < n ? confirms[i].receipt : NULL;
        double s = 0, ns = 0;
        if (!cr || !cr->status || strcmp (cr->status, "ok") != 0
            || !ak_promote_at (cr, pk->workload, pk->dtype, &s, &ns))
            continue;
        ak_cpb_set (&pk->confirmation,
                    ak_rounds_confirm_agrees (pk->speedup, pk->noise, s, ns, threshold, NULL) ? "confirmed"
                                                                                               : "disagrees");
        ak_cpb_set (&pk->confirmed_on, cr->worker_id ? cr->worker_id : "");
    }
}

// ------------------------------------------------------- store and index side

void ak_rounds_new_clear (ak_rounds_new_t *out)
{
    for (size_t i = 0; i < out->n; i++)
        ak__task_record__free_unpacked (out->tasks[i], NULL);
    free (out->tasks);
    for (size_t i = 0; i < out->nchecked; i++)
        if (out->checked[i].winner)
            ak__winner__free_unpacked (out->checked[i].winner, NULL);
    free (out->checked);
    memset (out, 0, sizeof *out);
}

static void s_out_add (ak_rounds_new_t *out, Ak__TaskRecord *rec)
{
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 8;
        out->tasks = ak_realloc (out->tasks, out->cap * sizeof *out->tasks);
    }
    out->tasks[out->n++] = rec;
}

/* One (op, class) of a batch and what the round logic read of it. */
typedef struct {
    ak_txn_t         *txn;
    ak_sched_t       *sched;
    ak_batch_t       *batch;
    const char       *op;
    const char       *cls;
    zhashx_t         *finishing;        /* task ids turning terminal in txn; may be NULL */
    uint64_t          now;
    ak_rounds_new_t  *out;
    Ak__BatchRecord  *brec;             /* loaded on first need */
    /* loaded tasks */
    Ak__TaskRecord  **recs;
    Ak__Receipt     **receipts;
    ak_promote_cand_t *cands;
    ak_promote_eval_t *evals;
    size_t            n;
    ak_arena_t       *arena;            /* recs and receipts live here */
} s_pair_t;

static bool s_terminal (const s_pair_t *p, const ak_task_t *t)
{
    return ak_tstate_terminal (t->state) || (p->finishing && zhashx_lookup (p->finishing, t->task_id));
}

static void s_pair_unload (s_pair_t *p)
{
    ak_arena_destroy (&p->arena);       /* every record and receipt */
    free (p->recs);
    free (p->receipts);
    free (p->cands);
    free (p->evals);
    p->recs = NULL;
    p->receipts = NULL;
    p->cands = NULL;
    p->evals = NULL;
    p->n = 0;
}

/* Reads the tune tasks of the pair that `want` selects, with their
   accepted receipts, into p->recs / p->receipts: only the fields the
   decisions read (promote.h), or with full every field. */
static int s_pair_read (s_pair_t *p, bool (*want) (const ak_task_t *t, uint32_t arg), uint32_t arg,
                        bool full, ak_err_t *err)
{
    ak_batch_t *b = p->batch;
    for (size_t i = 0; i < b->ntasks; i++) {
        const ak_task_t *t = b->tasks[i];
        if (strcmp (t->kind, "tune") != 0 || strcmp (t->op, p->op) != 0
            || strcmp (t->device_class, p->cls) != 0 || !want (t, arg))
            continue;
        Ak__TaskRecord *rec = NULL;
        int rc = full ? ak_store_get_task (p->txn, t->task_id, &rec, err)
                      : ak_store_get_only (p->txn, AK_DB_TASKS, t->task_id, &ak__task_record__descriptor,
                                           ak_promote_task_fields (), (ProtobufCMessage **) &rec, err);
        if (rc)
            return rc;
        Ak__Receipt *r = NULL;
        rc = ak_promote_receipt_of (p->txn, rec, full, &r, err);
        if (rc)
            return rc;
        p->recs[p->n] = rec;
        p->receipts[p->n] = r;
        p->n++;
    }
    return 0;
}

#ifndef NDEBUG
/* Debug builds: the same pass from full records must evaluate every
   candidate the same (a decision reading a field ak_promote_task_fields or
   ak_promote_receipt_fields leaves out would not). */
static void s_pair_check (s_pair_t *p, bool (*want) (const ak_task_t *t, uint32_t arg), uint32_t arg,
                          const ak_promote_rule_t *rule)
{
    s_pair_t full = *p;
    full.recs = ak_calloc (p->batch->ntasks ? p->batch->ntasks : 1, sizeof *full.recs);
    full.receipts = ak_calloc (p->batch->ntasks ? p->batch->ntasks : 1, sizeof *full.receipts);
    full.n = 0;
    full.arena = ak_arena_new ();
    ak_err_t err = { 0 };
    ProtobufCAllocator *was = ak_store_decode_with (p->txn, ak_arena_pb (full.arena));
    int rc = s_pair_read (&full, want, arg, true, &err);
    ak_store_decode_with (p->txn, was);
    if (rc || full.n != p->n) {
        ak_error ("debug: full read of %s/%s: %s (%zu records, slim %zu)", p->op, p->cls, err.msg, full.n, p->n);
        abort ();
    }
    for (size_t i = 0; i < p->n; i++) {
        const Ak__TaskRecord *t = full.recs[i];
        ak_promote_cand_t c = { t->task_id, t->candidate_name, t->params, t->n_params, t->state,
                                t->last_error, full.receipts[i] };
        ak_promote_eval_t ev;
        ak_promote_eval (rule, &c, &ev);
        const ak_promote_eval_t *sl = &p->evals[i];
        if (ev.ok != sl->ok || ev.promotable != sl->promotable || ev.speedup != sl->speedup
            || ev.noise != sl->noise || strcmp (ev.status, sl->status) != 0 || strcmp (ev.reason, sl->reason) != 0
            || t->stage != p->recs[i]->stage || strcmp (t->task_id, p->recs[i]->task_id) != 0) {
            ak_error ("debug: task %s evaluates differently from its slim record: %s / %s", t->task_id,
                      ev.reason, sl->reason);
            abort ();
        }
    }
    ak_arena_destroy (&full.arena);
    free (full.recs);
    free (full.receipts);
}
#endif

/* Loads the tune tasks of the pair that `want` selects, with receipts and
   evaluations under the batch policy's rule. */
static int s_pair_load (s_pair_t *p, bool (*want) (const ak_task_t *t, uint32_t arg), uint32_t arg,
                        ak_err_t *err)
{
    ak_batch_t *b = p->batch;
    p->recs = ak_calloc (b->ntasks ? b->ntasks : 1, sizeof *p->recs);
    p->receipts = ak_calloc (b->ntasks ? b->ntasks : 1, sizeof *p->receipts);
    /* up to a batch's worth of records, decoded together and freed
       together: into an arena (arena.h) */
    p->arena = ak_arena_new ();
    ProtobufCAllocator *was = ak_store_decode_with (p->txn, ak_arena_pb (p->arena));
    int rc = s_pair_read (p, want, arg, false, err);
    ak_store_decode_with (p->txn, was);
    if (rc)
        return rc;
    p->cands = ak_calloc (p->n ? p->n : 1, sizeof *p->cands);
    p->evals = ak_calloc (p->n ? p->n : 1, sizeof *p->evals);
    const Ak__Policy *pol = p->brec->policy;
    ak_promote_rule_t rule = { .threshold = pol ? pol->threshold : 0.03,
                               .max_regression = pol ? pol->max_regression : 0.05 };
    for (size_t i = 0; i < p->n; i++) {
        const Ak__TaskRecord *t = p->recs[i];
        p->cands[i] = (ak_promote_cand_t) { t->task_id, t->candidate_name, t->params, t->n_params,
                                            t->state, t->last_error, p->receipts[i] };
        ak_promote_eval (&rule, &p->cands[i], &p->evals[i]);
    }
#ifndef NDEBUG
    s_pair_check (p, want, arg, &rule);
#endif
    return 0;
}

static bool s_want_stage (const ak_task_t *t, uint32_t stage)
{
    return t->stage == stage;
}

/* stage 0 and the last stage `rounds` (the line of halving may have ended
   earlier: then only stage 0) */
static bool s_want_final (const ak_task_t *t, uint32_t rounds)
{
    return t->stage == 0 || t->stage == rounds;
}

/* Stores a new task copied from src in txn and hands it to out. */
static int s_create (s_pair_t *p, const Ak__TaskRecord *src, const char *kind, uint32_t stage,
                     ak_err_t *err)
{
    size_t made = 0;
    for (size_t i = 0; i < p->out->n; i++)
        made += strcmp (p->out->tasks[i]->batch_id, p->batch->batch_id) == 0;
    /* src holds only what the decisions read (s_pair_read): the copy
       starts from the stored record */
    Ak__TaskRecord *rec = NULL;
    int grc = ak_store_get_task (p->txn, src->task_id, &rec, err);
    if (grc)
        return grc;
    /* ids continue the batch's sequence; one taken by a record the index
       skipped is passed over */
    for (size_t seq = p->batch->ntasks + made + 1; ; seq++) {
        ak_cpb_setf (&rec->task_id, "%s.%04zu", p->batch->batch_id, seq);
        Ak__TaskRecord *old = NULL;
        int rc = ak_store_get_task (p->txn, rec->task_id, &old, err);
        if (rc == AK_ENOTFOUND)
            break;
        if (old)
            ak__task_record__free_unpacked (old, NULL);
        if (rc && rc != AK_ESTORE) {
            ak__task_record__free_unpacked (rec, NULL);
            return rc;
        }
    }
    ak_cpb_set (&rec->kind, kind);
    ak_cpb_set (&rec->state, "queued");
    rec->attempt = 1;
    rec->attempt_base = 0;
    ak_cpb_set (&rec->receipt_id, "");
    ak_cpb_set (&rec->status, "");
    ak_cpb_set (&rec->worker_id, "");
    ak_cpb_set (&rec->last_error, "");
    ak_cpb_set (&rec->avoid_worker, "");
    ak_cpb_set (&rec->confirm_of, "");
    rec->queued_ms = p->now;
    rec->leased_ms = 0;
    rec->finished_ms = 0;
    rec->duplicates = 0;
    rec->stage = stage;
    /* the full policy is the batch's; stages shorten it */
    if (p->brec->policy) {
        if (rec->policy)
            ak__policy__free_unpacked (rec->policy, NULL);
        rec->policy = (Ak__Policy *) ak_cpb_dup (&p->brec->policy->base);
        if (!rec->policy) {
            ak__task_record__free_unpacked (rec, NULL);
            return ak_err_set (err, AK_EINTERNAL, "copying the policy of batch %s failed",
                               p->batch->batch_id);
        }
    }
    if (strcmp (kind, "confirm") == 0) {
        ak_cpb_set (&rec->avoid_worker, src->worker_id);
        ak_cpb_set (&rec->confirm_of, src->task_id);
        if (rec->policy) {
            /* fresh inputs: a seed of its own, never 0 (the worker's default) */
            uint64_t st = ak_search_rng_seed (rec->policy->seed, src->task_id);
            uint64_t seed = ak_search_rng_next (&st);
            rec->policy->seed = seed && seed != rec->policy->seed ? seed : rec->policy->seed + 1;
        }
    }
    else if (rec->policy)
        ak_search_stage_policy (rec->policy, stage);
    int rc = ak_store_put_task (p->txn, rec, err);
    if (rc) {
        ak__task_record__free_unpacked (rec, NULL);
        return rc;
    }
    s_out_add (p->out, rec);
    p->brec->ntasks = (uint32_t) (p->batch->ntasks + made + 1);
    return ak_store_put_batch (p->txn, p->brec, err);
}

static int s_brec (s_pair_t *p, ak_err_t *err)
{
    if (p->brec)
        return 0;
    return ak_store_get_batch (p->txn, p->batch->batch_id, &p->brec, err);
}

/* The next halving stage; *made gets how many tasks it has. */
static int s_next_stage (s_pair_t *p, uint32_t smax, uint32_t n1, bool *made, ak_err_t *err)
{
    *made = false;
    int rc = s_pair_load (p, s_want_stage, smax, err);
    if (rc)
        return rc;
    const Ak__Policy *pol = p->brec->policy;
    uint32_t rounds = pol && pol->search_rounds >= 2 ? pol->search_rounds : 2;
    uint32_t keep = ak_search_stage_size (n1, pol && pol->search_keep ? pol->search_keep : 4, rounds,
                                          smax + 1);
    size_t *best = ak_calloc ((keep ? keep : 1) + p->n, sizeof *best);
    size_t nb = ak_rounds_best (p->cands, p->evals, p->n, keep, best);
    /* and each workload's own leader (rounds.h): workload picks need it
       measured with full timing */
    size_t nl = ak_rounds_leaders (p->cands, p->evals, p->n, pol ? pol->threshold : 0.03, best, nb, best + nb,
                                   p->n);
    for (size_t k = 0; k < nb + nl && rc == 0; k++)
        rc = s_create (p, p->recs[best[k]], "tune", smax + 1, err);
    if (rc == 0) {
        *made = nb + nl > 0;
        ak_info ("batch %s: %s on %s: halving stage %u done (%zu tasks), %zu of them to stage %u%s, "
                 "%zu more as workload leaders", p->batch->batch_id, p->op, p->cls, smax, p->n, nb, smax + 1,
                 smax + 1 == rounds ? " (full timing)" : "", nl);
    }
    free (best);
    s_pair_unload (p);
    return rc;
}

/* Confirm tasks for the finalists of a provisional winner. */
static int s_confirm (s_pair_t *p, uint32_t rounds, Ak__Winner **decided, ak_err_t *err)
{
    int rc = s_pair_load (p, s_want_final, rounds, err);
    if (rc)
        return rc;
    const Ak__Policy *pol = p->brec->policy;
    ak_promote_rule_t rule = { .threshold = pol ? pol->threshold : 0.03,
                               .max_regression = pol ? pol->max_regression : 0.05 };
    Ak__Winner *win = NULL;
    ak_promote_eval_t *ev = ak_calloc (p->n ? p->n : 1, sizeof *ev);
    ak_promote (p->op, p->cls, &rule, p->cands, p->n, ev, &win);
    double implausible = pol && pol->implausible > 1 ? pol->implausible : 10;
    bool confirm = pol && pol->confirm;
    bool round = (win->promoted && (confirm || win->speedup > implausible)) || (confirm && win->n_picks > 0);
    if (round) {
        size_t fin[AK_ROUNDS_MAX_FINALISTS];
        size_t nf = win->promoted ? ak_rounds_finalists (p->cands, ev, p->n, fin) : 0;
        for (size_t k = 0; k < nf && rc == 0; k++)
            rc = s_create (p, p->recs[fin[k]], "confirm", p->recs[fin[k]]->stage, err);
        /* the tasks of workload picks too (promote.h): a profile installs
           a pick only on another worker's agreeing measurement */
        size_t npk = 0;
        for (size_t j = 0; confirm && j < win->n_picks && rc == 0; j++) {
            size_t i = 0;
            while (i < p->n && strcmp (p->cands[i].task_id, win->picks[j]->task_id) != 0)
                i++;
            bool done = i == p->n;
            for (size_t k = 0; !done && k < nf; k++)
                done = fin[k] == i;
            for (size_t k = 0; !done && k < j; k++)
                done = strcmp (win->picks[k]->task_id, win->picks[j]->task_id) == 0;
            if (!done) {
                rc = s_create (p, p->recs[i], "confirm", p->recs[i]->stage, err);
                npk++;
            }
        }
        if (rc == 0 && win->promoted)
            ak_info ("batch %s: %s on %s: provisional winner %s %.3fx; %zu finalist(s) and %zu workload pick(s) "
                     "to confirm%s", p->batch->batch_id, p->op, p->cls, win->candidate_name, win->speedup, nf, npk,
                     win->speedup > implausible ? " (implausible speedup)" : "");
        else if (rc == 0)
            ak_info ("batch %s: %s on %s: the baseline stays; %zu workload pick(s) to confirm", p->batch->batch_id,
                     p->op, p->cls, npk);
    }
    if (!round && rc == 0) {
        *decided = win;             /* no confirmation round: this is the pair's winner */
        win = NULL;
    }
    if (win)
        ak__winner__free_unpacked (win, NULL);
    free (ev);
    s_pair_unload (p);
    return rc;
}

/*  What s_advance_pair needs to know of an (op, class)'s tasks besides
    their states: how many confirm tasks, the highest halving stage, the
    tune tasks of stage 1.  Tasks are only ever appended to a batch and
    their kind and stage never change, so this holds until ntasks grows;
    without it every group commit scanned the whole batch (100,000 tasks)
    with string compares, the coordinator's largest cost per receipt. */
typedef struct {
    size_t   ntasks;                /* batch->ntasks when counted */
    size_t   nconfirm;
    uint32_t smax, n1;
    size_t   hint;                  /* where the last open task was found */
    bool     checked;               /* the final check found nothing to create, */
    uint64_t checked_reopens;       /* with the batch's reopens at this count, */
    Ak__Winner *winner;             /* and this winner (ak_rounds_winners) */
} s_memo_t;

static uint64_t s_final_checks;

uint64_t ak_rounds_final_checks (void)
{
    return s_final_checks;
}

void ak_rounds_committed (ak_rounds_new_t *out, ak_sched_t *sched)
{
    ak_sched_extend (sched, out->tasks, out->n);
    for (size_t i = 0; i < out->nchecked; i++) {
        s_memo_t *m = out->checked[i].memo;
        m->checked = true;
        m->checked_reopens = out->checked[i].reopens;
        if (m->winner)
            ak__winner__free_unpacked (m->winner, NULL);
        m->winner = out->checked[i].winner;
        out->checked[i].winner = NULL;
    }
    ak_rounds_new_clear (out);
}

static void s_memo_free (void **item)
{
    s_memo_t *m = *item;
    if (m && m->winner)
        ak__winner__free_unpacked (m->winner, NULL);
    free (m);
    *item = NULL;
}

static s_memo_t *s_memo (ak_batch_t *b, const char *op, const char *cls)
{
    zhashx_t *memos = b->rounds_memo;
    if (!memos) {
        memos = zhashx_new ();
        if (!memos)
            abort ();
        zhashx_set_destructor (memos, s_memo_free);
        b->rounds_memo = memos;
    }
    char key[512];
    snprintf (key, sizeof key, "%s/%s", op, cls);
    s_memo_t *m = zhashx_lookup (memos, key);
    if (!m) {
        m = ak_calloc (1, sizeof *m);
        zhashx_insert (memos, key, m);
    }
    if (m->ntasks != b->ntasks) {
        if (m->winner)
            ak__winner__free_unpacked (m->winner, NULL);
        *m = (s_memo_t) { .ntasks = b->ntasks, .hint = m->hint };
        for (size_t i = 0; i < b->ntasks; i++) {
            const ak_task_t *t = b->tasks[i];
            if (strcmp (t->op, op) != 0 || strcmp (t->device_class, cls) != 0)
                continue;
            if (strcmp (t->kind, "confirm") == 0)
                m->nconfirm++;
            else if (strcmp (t->kind, "tune") == 0) {
                if (t->stage > m->smax)
                    m->smax = t->stage;
                m->n1 += t->stage == 1;
            }
        }
    }
    return m;
}

/* True when t is an open tune task of the pair (at stage smax when
   any_stage is false). */
static bool s_open_tune (const s_pair_t *p, const ak_task_t *t, uint32_t smax, bool any_stage)
{
    return (any_stage || t->stage == smax) && strcmp (t->kind, "tune") == 0 && strcmp (t->op, p->op) == 0
        && strcmp (t->device_class, p->cls) == 0 && !s_terminal (p, t);
}

static int s_advance_pair (s_pair_t *p, ak_err_t *err)
{
    ak_batch_t *b = p->batch;
    if (b->state != AK_BS_OPEN)
        return 0;
    s_memo_t *memo = s_memo (b, p->op, p->cls);
    uint32_t smax = memo->smax, n1 = memo->n1;
    if (memo->nconfirm)
        return 0;                       /* the last round is out already */
    /* one open task at the current stage (exhaustive: any) is enough to
       wait; the search starts where the last one was found, which is
       nearly always still open, so a commit costs a few compares */
    size_t open_tunes = 0;
    size_t n = b->ntasks, start = memo->hint < n ? memo->hint : 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        if (s_open_tune (p, b->tasks[i], smax, smax == 0)) {
            memo->hint = i;
            return 0;                   /* the current halving stage (exhaustive: the tasks) runs */
        }
    }
    /* no open task at the current stage: count the open ones left over */
    if (smax >= 1)
        for (size_t i = 0; i < n; i++)
            open_tunes += s_open_tune (p, b->tasks[i], smax, true);
    int rc = s_brec (p, err);
    if (rc)
        return rc;
    const Ak__Policy *pol = p->brec->policy;
    uint32_t rounds = pol && pol->search_rounds >= 2 ? pol->search_rounds : 2;
    if (smax >= 1 && smax < rounds) {
        bool made = false;
        rc = s_next_stage (p, smax, n1, &made, err);
        if (rc || made)
            return rc;
    }
    if (open_tunes)
        return 0;
    /* decided already on these very tasks (ak_rounds_committed) */
    if (memo->checked && memo->checked_reopens == b->reopens)
        return 0;
    size_t made = p->out->n;
    s_final_checks++;
    Ak__Winner *decided = NULL;
    rc = s_confirm (p, rounds, &decided, err);
    if (rc == 0 && p->out->n == made) {
        ak_rounds_new_t *out = p->out;
        if (out->nchecked == out->cap_checked) {
            out->cap_checked = out->cap_checked ? out->cap_checked * 2 : 4;
            out->checked = ak_realloc (out->checked, out->cap_checked * sizeof *out->checked);
        }
        out->checked[out->nchecked++] = (ak_rounds_checked_t) { memo, b->reopens, decided };
        decided = NULL;
    }
    if (decided)
        ak__winner__free_unpacked (decided, NULL);
    return rc;
}

/* Runs the round logic once for each distinct (batch, op, class) of the
   tune tasks in tasks. */
static int s_advance (ak_txn_t *txn, ak_sched_t *sched, ak_task_t *const *tasks, size_t n,
                      zhashx_t *finishing, uint64_t now, ak_rounds_new_t *out, ak_err_t *err)
{
    int rc = 0;
    zhashx_t *seen = zhashx_new ();
    if (!seen)
        abort ();
    for (size_t i = 0; i < n && rc == 0; i++) {
        const ak_task_t *t = tasks[i];
        if (!t || !t->op || strcmp (t->kind, "tune") != 0)
            continue;
        char key[512];
        snprintf (key, sizeof key, "%s/%s/%s", t->batch->batch_id, t->op, t->device_class);
        if (zhashx_lookup (seen, key))
            continue;
        zhashx_insert (seen, key, (void *) t);
        s_pair_t p = { .txn = txn, .sched = sched, .batch = t->batch, .op = t->op,
                       .cls = t->device_class, .finishing = finishing, .now = now, .out = out };
        rc = s_advance_pair (&p, err);
        s_pair_unload (&p);
        if (p.brec)
            ak__batch_record__free_unpacked (p.brec, NULL);
    }
    zhashx_destroy (&seen);
    return rc;
}

int ak_rounds_advance (ak_txn_t *txn, ak_sched_t *sched, ak_task_t *const *touched, size_t n,
                       uint64_t now_wall_ms, ak_rounds_new_t *out, ak_err_t *err)
{
    if (n == 0)
        return 0;
    zhashx_t *finishing = zhashx_new ();
    if (!finishing)
        abort ();
    for (size_t i = 0; i < n; i++)
        if (touched[i])
            zhashx_insert (finishing, touched[i]->task_id, (void *) touched[i]);
    int rc = s_advance (txn, sched, touched, n, finishing, now_wall_ms, out, err);
    zhashx_destroy (&finishing);
    return rc;
}

int ak_rounds_advance_batch (ak_txn_t *txn, ak_sched_t *sched, ak_batch_t *batch,
                             uint64_t now_wall_ms, ak_rounds_new_t *out, ak_err_t *err)
{
    /* one representative tune task per (op, class) */
    size_t n = batch->ntasks;
    ak_task_t **reps = ak_calloc (n ? n : 1, sizeof *reps);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp (batch->tasks[i]->kind, "tune") == 0)
            reps[m++] = batch->tasks[i];
    int rc = s_advance (txn, sched, reps, m, NULL, now_wall_ms, out, err);
    free (reps);
    return rc;
}

/* One (op, class) of a settling batch: its memo, and its first task id
   in the store's (byte) order, which orders ak_results_decide's pairs. */
typedef struct {
    const s_memo_t *memo;
    const char     *first;
} s_pair_first_t;

static int s_cmp_first (const void *a, const void *b)
{
    return strcmp (((const s_pair_first_t *) a)->first, ((const s_pair_first_t *) b)->first);
}

bool ak_rounds_winners (ak_batch_t *batch, Ak__Winner ***winners_p, size_t *n_p)
{
    *winners_p = NULL;
    *n_p = 0;
    zhashx_t *memos = batch->rounds_memo;
    if (!memos)
        return false;
    s_pair_first_t *pairs = NULL;
    size_t n = 0, cur = 0;
    const ak_task_t *prev = NULL;
    for (size_t i = 0; i < batch->ntasks; i++) {
        const ak_task_t *t = batch->tasks[i];
        if (!prev || strcmp (t->op, prev->op) != 0 || strcmp (t->device_class, prev->device_class) != 0) {
            char key[512];
            snprintf (key, sizeof key, "%s/%s", t->op, t->device_class);
            const s_memo_t *m = zhashx_lookup (memos, key);
            /* the final check of this (op, class) found its winner on the
               tasks as they are now, and no confirmation round followed */
            if (!m || !m->checked || !m->winner || m->ntasks != batch->ntasks || m->nconfirm
                || m->checked_reopens != batch->reopens) {
                free (pairs);
                return false;
            }
            for (cur = 0; cur < n && pairs[cur].memo != m; cur++)
                ;
            if (cur == n) {
                pairs = ak_realloc (pairs, (n + 1) * sizeof *pairs);
                pairs[n++] = (s_pair_first_t) { m, t->task_id };
            }
            prev = t;
        }
        if (strcmp (t->task_id, pairs[cur].first) < 0)
            pairs[cur].first = t->task_id;
    }
    if (n == 0) {
        free (pairs);
        return false;
    }
    qsort (pairs, n, sizeof *pairs, s_cmp_first);
    Ak__Winner **list = ak_calloc (n, sizeof *list);
    for (size_t k = 0; k < n; k++)
        list[k] = (Ak__Winner *) ak_cpb_dup (&pairs[k].memo->winner->base);
    free (pairs);
    *winners_p = list;
    *n_p = n;
    return true;
}
