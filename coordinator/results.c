/*  coordinator/results.c: batch results grouped per (op, class) (see results.h). */
#include <stdio.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>
#include "results.h"
#include "corpus.h"
#include "log.h"
#include "rounds.h"
#include "promote.h"
#include "pbwire.h"
#include "cpb.h"
#include "stats.h"
#include "util.h"

typedef struct {
    Ak__TaskRecord   **tasks;
    size_t             n;
    size_t             cap;
    ProtobufCAllocator *alloc;
    bool               slim;        /* only the fields deciding reads (promote.h) */
} s_collect_t;

static int s_collect (const char *key, const void *val, size_t len, void *arg)
{
    s_collect_t *c = arg;
    Ak__TaskRecord *rec = c->slim ? (Ak__TaskRecord *) ak_pbw_unpack_only_with (
                                        &ak__task_record__descriptor, c->alloc, val, len, ak_promote_task_fields ())
                                  : ak__task_record__unpack (c->alloc, len, val);
    if (!rec) {
        ak_error ("store: tasks/%s: undecodable task record, skipped", key);
        return 0;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 32;
        c->tasks = ak_realloc (c->tasks, c->cap * sizeof *c->tasks);
    }
    c->tasks[c->n++] = rec;
    return 0;
}

static ak_result_pair_t *s_pair (ak_results_t *res, const char *op, const char *cls)
{
    for (size_t i = 0; i < res->npairs; i++)
        if (strcmp (res->pairs[i].op, op) == 0 && strcmp (res->pairs[i].device_class, cls) == 0)
            return &res->pairs[i];
    res->pairs = ak_realloc (res->pairs, (res->npairs + 1) * sizeof *res->pairs);
    ak_result_pair_t *p = &res->pairs[res->npairs++];
    memset (p, 0, sizeof *p);
    p->op = ak_strdup (op);
    p->device_class = ak_strdup (cls);
    return p;
}

/* Promotion over the final receipts of a pair (exhaustive configs and the
   last halving stage), then the confirmation round (rounds.h). */
static void s_decide (ak_result_pair_t *p, const ak_promote_rule_t *rule, uint32_t rounds,
                      double implausible)
{
    size_t n = p->ntunes;
    ak_promote_cand_t *cands = ak_calloc (n ? n : 1, sizeof *cands);
    ak_promote_eval_t *evals = ak_calloc (n ? n : 1, sizeof *evals);
    ak_confirm_t *confirms = ak_calloc (n ? n : 1, sizeof *confirms);
    size_t *at = ak_calloc (n ? n : 1, sizeof *at);
    size_t nf = 0;
    p->evals = ak_calloc (n ? n : 1, sizeof *p->evals);
    for (size_t j = 0; j < n; j++) {
        const Ak__TaskRecord *t = p->tunes[j].task;
        ak_promote_cand_t c = { t->task_id, t->candidate_name, t->params, t->n_params, t->state,
                                t->last_error, p->tunes[j].receipt };
        if (t->stage != 0 && t->stage != rounds) {
            /* a short-timed stage: ranked the configs, never promoted */
            ak_promote_eval (rule, &c, &p->evals[j]);
            if (p->evals[j].ok) {
                p->evals[j].promotable = false;
                snprintf (p->evals[j].reason, sizeof p->evals[j].reason,
                          "halving stage %u of %u (short timing): %.2fx +- %.2f, not a promotion candidate",
                          t->stage, rounds, p->evals[j].speedup, p->evals[j].noise);
            }
            continue;
        }
        at[nf] = j;
        cands[nf] = c;
        for (size_t k = 0; k < p->nconfirms; k++) {
            const Ak__TaskRecord *ct = p->confirms[k].task;
            if (strcmp (ct->confirm_of, t->task_id) == 0) {
                confirms[nf] = (ak_confirm_t) { ct->task_id, ct->state, ct->last_error, ct->avoid_worker,
                                                p->confirms[k].receipt };
                break;
            }
        }
        nf++;
    }
    ak_promote (p->op, p->device_class, rule, cands, nf, evals, &p->winner);
    ak_rounds_confirm_decide (rule, implausible, cands, evals, confirms, nf, p->winner);
    ak_promote_picks (rule, cands, evals, nf, p->winner);   /* against the winner as confirmed */
    ak_rounds_picks_confirm (rule->threshold, cands, confirms, nf, p->winner);
    for (size_t k = 0; k < nf; k++)
        p->evals[at[k]] = evals[k];
    free (at);
    free (confirms);
    free (evals);
    free (cands);
}

/* Reads the accepted receipt of each collected task and files both under
   their (op, class). */
static int s_sort_tasks (ak_txn_t *txn, ak_results_t *res, s_collect_t *c, ak_err_t *err)
{
    for (size_t i = 0; i < c->n; i++) {
        Ak__TaskRecord *t = c->tasks[i];
        c->tasks[i] = NULL;
        Ak__Receipt *r = NULL;
        int rc = ak_promote_receipt_of (txn, t, !c->slim, &r, err);
        if (rc)
            return rc;
        ak_result_pair_t *p = s_pair (res, t->op, t->device_class);
        if (strcmp (t->kind, "preflight") == 0 && !p->preflight.task) {
            p->preflight.task = t;
            p->preflight.receipt = r;
        }
        else if (strcmp (t->kind, "tune") == 0) {
            p->tunes = ak_realloc (p->tunes, (p->ntunes + 1) * sizeof *p->tunes);
            p->tunes[p->ntunes].task = t;
            p->tunes[p->ntunes].receipt = r;
            p->ntunes++;
        }
        else if (strcmp (t->kind, "confirm") == 0) {
            p->confirms = ak_realloc (p->confirms, (p->nconfirms + 1) * sizeof *p->confirms);
            p->confirms[p->nconfirms].task = t;
            p->confirms[p->nconfirms].receipt = r;
            p->nconfirms++;
        }
        else if (strcmp (t->kind, "profile") == 0) {
            p->profiles = ak_realloc (p->profiles, (p->nprofiles + 1) * sizeof *p->profiles);
            p->profiles[p->nprofiles].task = t;
            p->profiles[p->nprofiles].receipt = r;
            p->nprofiles++;
        }
        /* any other kind: left in the arena */
    }
    return 0;
}

/* Collects the task records of ids (NULL: every task of the batch, by
   a walk of prefix). */
static int s_collect_tasks (ak_txn_t *txn, const char *prefix, const char *const *ids, size_t nids,
                            s_collect_t *c, ak_err_t *err)
{
    if (!ids)
        return ak_store_walk (txn, AK_DB_TASKS, prefix, s_collect, c, err);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nids; i++) {
        void *val = NULL;
        size_t len = 0;
        rc = ak_store_get (txn, AK_DB_TASKS, ids[i], &val, &len, err);
        if (rc == 0)
            rc = s_collect (ids[i], val, len, c);
        else if (rc == AK_ENOTFOUND) {
            ak_error ("store: tasks/%s: indexed but not stored, skipped", ids[i]);
            rc = 0;
        }
        free (val);
    }
    return rc;
}

static int s_load (ak_txn_t *txn, const char *batch_id, const char *const *ids, size_t nids, bool slim,
                   ak_results_t **results_p, ak_err_t *err)
{
    *results_p = NULL;
    ak_results_t *res = ak_calloc (1, sizeof *res);
    s_collect_t c = { .slim = slim };
    char prefix[128];
    int rc = ak_store_get_batch (txn, batch_id, &res->batch, err);
    if (rc == AK_ENOTFOUND)         /* the client's words, not the store's path and key */
        rc = ak_err_set (err, AK_ENOTFOUND, "no batch '%.64s'", batch_id);
    if (rc)
        goto fail;
    snprintf (prefix, sizeof prefix, "%s.", batch_id);
    /* a batch's worth of records and receipts, freed together (arena.h) */
    res->arena = ak_arena_new ();
    c.alloc = ak_arena_pb (res->arena);
    ProtobufCAllocator *was = ak_store_decode_with (txn, c.alloc);
    rc = s_collect_tasks (txn, prefix, ids, nids, &c, err);
    if (rc == 0)
        rc = s_sort_tasks (txn, res, &c, err);
    ak_store_decode_with (txn, was);
    if (rc)
        goto fail;

    ak_promote_rule_t rule = {
        .threshold = res->batch->policy ? res->batch->policy->threshold : 0.03,
        .max_regression = res->batch->policy ? res->batch->policy->max_regression : 0.05,
    };
    const Ak__Policy *pol = res->batch->policy;
    uint32_t rounds = pol && pol->search_rounds >= 2 ? pol->search_rounds : 2;
    double implausible = pol && pol->implausible > 1 ? pol->implausible : 10;
    for (size_t i = 0; i < res->npairs; i++)
        s_decide (&res->pairs[i], &rule, rounds, implausible);
    free (c.tasks);
    *results_p = res;
    return 0;

fail:
    free (c.tasks);                 /* the records are in res->arena */
    ak_results_destroy (&res);
    return rc;
}

bool ak_results_same_winners (const ak_results_t *res, Ak__Winner *const *winners, size_t n)
{
    bool same = res->npairs == n;
    for (size_t i = 0; same && i < n; i++)
        same = ak_cpb_same (&res->pairs[i].winner->base, &winners[i]->base);
    return same;
}

int ak_results_load (ak_txn_t *txn, const char *batch_id, ak_results_t **results_p, ak_err_t *err)
{
    return s_load (txn, batch_id, NULL, 0, false, results_p, err);
}

int ak_results_load_tasks (ak_txn_t *txn, const char *batch_id, const char *const *task_ids, size_t n,
                           ak_results_t **results_p, ak_err_t *err)
{
    return s_load (txn, batch_id, task_ids, n, false, results_p, err);
}

int ak_results_decide (ak_txn_t *txn, const char *batch_id, ak_results_t **results_p, ak_err_t *err)
{
    int rc = s_load (txn, batch_id, NULL, 0, true, results_p, err);
#ifndef NDEBUG
    /* debug builds: full records decide the same */
    ak_results_t *full = NULL;
    if (rc == 0 && s_load (txn, batch_id, NULL, 0, false, &full, err) == 0) {
        const ak_results_t *slim = *results_p;
        Ak__Winner **winners = ak_calloc (slim->npairs ? slim->npairs : 1, sizeof *winners);
        for (size_t i = 0; i < slim->npairs; i++)
            winners[i] = slim->pairs[i].winner;
        bool same = ak_results_same_winners (full, winners, slim->npairs);
        free (winners);
        if (!same) {
            ak_error ("debug: batch %s: winners decided from slim records differ from full ones", batch_id);
            abort ();
        }
    }
    ak_results_destroy (&full);
#endif
    return rc;
}

void ak_results_destroy (ak_results_t **self_p)
{
    if (self_p && *self_p) {
        ak_results_t *self = *self_p;
        for (size_t i = 0; i < self->npairs; i++) {
            ak_result_pair_t *p = &self->pairs[i];
            free (p->op);
            free (p->device_class);
            free (p->tunes);                /* their records: in the arena */
            free (p->profiles);
            free (p->confirms);
            free (p->evals);
            if (p->winner)
                ak__winner__free_unpacked (p->winner, NULL);
        }
        free (self->pairs);
        if (self->batch)
            ak__batch_record__free_unpacked (self->batch, NULL);
        ak_arena_destroy (&self->arena);
        free (self);
        *self_p = NULL;
    }
}

/* ------------------------------------------------------------ aggregates */

/*  Rows of one receipt's timings: per declared dtype, then "all".  With
    baseline_only the preflight's own times (its "candidate" is the
    baseline) give baseline_us, and candidate_us and speedup are 0.
    Timings that are not finite positive numbers leave their row out. */
static json_t *s_aggregate_rows (const Ak__Receipt *r, bool baseline_only)
{
    json_t *rows = json_array ();
    size_t n = r ? r->n_timings : 0;
    ak_wpoint_t *pts = ak_calloc (n ? n : 1, sizeof *pts);
    for (int d = 0; d <= AK_DT_COUNT; d++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const Ak__WorkloadTiming *t = r->timings[i];
            ak_dtype_t dt;
            if (!t->workload || ak_dtype_parse (t->workload->dtype, &dt) != 0)
                continue;
            if (d < AK_DT_COUNT && (int) dt != d)
                continue;
            double base = baseline_only ? (t->candidate ? t->candidate->median_us : 0)
                                        : (t->baseline ? t->baseline->median_us : 0);
            double cand = baseline_only ? base : (t->candidate ? t->candidate->median_us : 0);
            pts[k++] = (ak_wpoint_t) { t->workload->weight, base, cand };
        }
        ak_aggregate_t agg;
        if (k == 0 || ak_aggregate (pts, k, &agg) != 0)
            continue;
        json_array_append_new (rows, json_pack ("{s:s, s:I, s:f, s:f, s:f, s:f}",
            "dtype", d < AK_DT_COUNT ? ak_dtype_name ((ak_dtype_t) d) : "all",
            "workloads", (json_int_t) agg.n, "weight", agg.weight, "baseline_us", agg.base_us,
            "candidate_us", baseline_only ? 0.0 : agg.cand_us,
            "speedup", baseline_only ? 0.0 : agg.speedup));
    }
    free (pts);
    return rows;
}

ssize_t ak_results_best (const ak_result_pair_t *p)
{
    ssize_t best = -1;
    for (size_t j = 0; j < p->ntunes; j++)
        if (p->evals[j].ok && p->tunes[j].receipt
            && (best < 0 || p->evals[j].speedup > p->evals[best].speedup))
            best = (ssize_t) j;
    return best;
}

json_t *ak_results_aggregates (const ak_result_pair_t *p, const Ak__Winner *winner)
{
    ssize_t pick = -1;
    const char *source = "none";
    for (size_t j = 0; winner && winner->promoted && j < p->ntunes; j++)
        if (p->tunes[j].receipt && strcmp (p->tunes[j].task->task_id, winner->task_id) == 0) {
            pick = (ssize_t) j;
            source = "winner";
        }
    if (pick < 0 && (pick = ak_results_best (p)) >= 0)
        source = "best";
    json_t *out;
    if (pick >= 0) {
        const Ak__TaskRecord *t = p->tunes[pick].task;
        /* a winner whose figures are its confirmation's (rounds.h) */
        const Ak__Receipt *rows_from = p->tunes[pick].receipt;
        for (size_t k = 0; strcmp (source, "winner") == 0 && *winner->figures_receipt_id && k < p->nconfirms; k++)
            if (p->confirms[k].receipt
                && strcmp (p->confirms[k].receipt->receipt_id, winner->figures_receipt_id) == 0)
                rows_from = p->confirms[k].receipt;
        json_t *params = json_array ();
        for (size_t i = 0; i < t->n_params; i++)
            json_array_append_new (params, json_pack ("{s:s, s:I}", "name", t->params[i]->name,
                                                      "value", (json_int_t) t->params[i]->value));
        out = json_pack ("{s:s, s:s, s:s, s:o, s:o}", "source", source, "task_id", t->task_id,
                         "candidate", t->candidate_name, "params", params,
                         "rows", s_aggregate_rows (rows_from, false));
        json_object_set_new (out, "receipt_id", json_string (rows_from->receipt_id));
    }
    else
    if (p->preflight.receipt)
        out = json_pack ("{s:s, s:s, s:s, s:[], s:o}", "source", "preflight", "task_id",
                         p->preflight.task->task_id, "candidate", "", "params",
                         "rows", s_aggregate_rows (p->preflight.receipt, true));
    else
        out = json_pack ("{s:s, s:s, s:s, s:[], s:[]}", "source", "none", "task_id", "",
                         "candidate", "", "params", "rows");
    return out;
}
