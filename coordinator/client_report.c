/*  coordinator/client_report.c: `report BATCH [LIMIT [AFTER]]`
    (docs/client-api.md, REPORT), in pages of (operator, class) pairs:
    each page loads the tasks and accepted receipts of its pairs alone
    (from the index's list of the batch's tasks), so that a page costs what
    its pairs hold, never the whole batch (client_paging.h). */
#include <czmq.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "client_paging.h"
#include "pbjson.h"
#include "report_timing.h"
#include "results.h"
#include "util.h"

static json_t *s_pb (const void *msg)
{
    json_t *j = msg ? ak_pb_to_json ((const ProtobufCMessage *) msg) : NULL;
    return j ? j : json_null ();
}

static json_t *s_report_pair (const ak_batch_t *b, const ak_result_pair_t *p, ak_rtiming_t *acc)
{
    json_t *pre = json_null ();
    if (p->preflight.task) {
        const Ak__TaskRecord *t = p->preflight.task;
        const Ak__Receipt *r = p->preflight.receipt;
        json_t *timings = json_array ();
        for (size_t i = 0; r && i < r->n_timings; i++)
            json_array_append_new (timings, s_pb (r->timings[i]));
        pre = json_pack ("{s:s, s:s, s:s, s:s, s:o}", "task_id", t->task_id, "state", t->state,
                         "status", r ? r->status : "", "reason", r ? r->reason : t->last_error,
                         "timings", timings);
    }
    /* A complete batch reports the winner it recorded; an open one the
       winner it would have now. */
    const Ak__Winner *winner = p->winner;
    for (size_t i = 0; b->state == AK_BS_COMPLETE && i < b->nwinners; i++)
        if (strcmp (b->winners[i]->op, p->op) == 0
            && strcmp (b->winners[i]->device_class, p->device_class) == 0)
            winner = b->winners[i];

    json_t *cands = json_array (), *fails = json_array ();
    size_t pending = 0;
    for (size_t j = 0; j < p->ntunes; j++) {
        const Ak__TaskRecord *t = p->tunes[j].task;
        const Ak__Receipt *r = p->tunes[j].receipt;
        const ak_promote_eval_t *ev = &p->evals[j];
        ak_tstate_t state = AK_TS_QUEUED;
        ak_tstate_parse (t->state, &state);
        if (!r && !ak_tstate_terminal (state)) {
            pending++;
            continue;
        }
        if (ev->ok) {
            json_t *cj = json_pack ("{s:s, s:s, s:o, s:s, s:f, s:f, s:b, s:s}",
                "task_id", t->task_id, "candidate", t->candidate_name,
                "params", ak_client_params_json (t->params, t->n_params), "status", ev->status,
                "speedup", ev->speedup, "noise", ev->noise, "promotable", ev->promotable,
                "reason", ev->reason);
            json_object_set_new (cj, "stage", json_integer ((json_int_t) t->stage));
            json_array_append_new (cands, cj);
        }
        else
            json_array_append_new (fails, json_pack ("{s:s, s:s, s:o, s:s, s:s}",
                "task_id", t->task_id, "candidate", t->candidate_name,
                "params", ak_client_params_json (t->params, t->n_params), "status", ev->status,
                "reason", ev->reason));
    }
    for (size_t j = 0; j <= p->ntunes; j++)
        ak_rtiming_add (acc, j < p->ntunes ? p->tunes[j].receipt : p->preflight.receipt);
    /* Profile tasks: the metrics of their receipts as they are. */
    json_t *profs = json_array ();
    for (size_t j = 0; j < p->nprofiles; j++) {
        const Ak__TaskRecord *t = p->profiles[j].task;
        const Ak__Receipt *r = p->profiles[j].receipt;
        json_t *wl = json_array ();
        for (size_t i = 0; r && i < r->n_profiles; i++)
            json_array_append_new (wl, s_pb (r->profiles[i]));
        json_array_append_new (profs, json_pack ("{s:s, s:s, s:o, s:s, s:s, s:o}",
            "task_id", t->task_id, "candidate", t->candidate_name,
            "params", ak_client_params_json (t->params, t->n_params), "status", r ? r->status : t->state,
            "reason", r ? r->reason : t->last_error, "workloads", wl));
    }
    /* Confirm tasks (coordinator/rounds.h): where each finalist was
       measured again. */
    json_t *confs = json_array ();
    for (size_t j = 0; j < p->nconfirms; j++) {
        const Ak__TaskRecord *t = p->confirms[j].task;
        const Ak__Receipt *r = p->confirms[j].receipt;
        json_array_append_new (confs, json_pack ("{s:s, s:s, s:s, s:s, s:s, s:s}",
            "task_id", t->task_id, "confirm_of", t->confirm_of, "avoid_worker", t->avoid_worker,
            "worker_id", t->worker_id, "status", r ? r->status : t->state,
            "reason", r ? r->reason : t->last_error));
        ak_rtiming_add (acc, r);
    }
    json_t *pair = json_pack ("{s:s, s:s, s:o, s:o, s:o, s:o, s:I}", "op", p->op,
                      "device_class", p->device_class, "preflight", pre, "winner", s_pb (winner),
                      "candidates", cands, "failures", fails, "pending", (json_int_t) pending);
    if (pair)   /* weighted aggregate latency and speedup per dtype */
        json_object_set_new (pair, "aggregates", ak_results_aggregates (p, winner));
    if (pair && p->nprofiles)
        json_object_set_new (pair, "profiles", profs);
    else
        json_decref (profs);
    if (pair && p->nconfirms)
        json_object_set_new (pair, "confirms", confs);
    else
        json_decref (confs);
    return pair;
}

/* The batch's (op, class) pairs in the order their first task comes:
   *pair_of (caller frees) gives each task's pair; returns how many. */
static size_t s_pairs (const ak_batch_t *b, size_t **pair_of)
{
    zhashx_t *seen = zhashx_new ();
    if (!seen)
        abort ();
    size_t n = 0;
    *pair_of = ak_calloc (b->ntasks ? b->ntasks : 1, sizeof **pair_of);
    for (size_t i = 0; i < b->ntasks; i++) {
        char *key = ak_sprintf ("%s\x1f%s", b->tasks[i]->op, b->tasks[i]->device_class);
        void *v = zhashx_lookup (seen, key);
        if (!v) {
            v = (void *) (uintptr_t) ++n;
            zhashx_insert (seen, key, v);
        }
        (*pair_of)[i] = (uintptr_t) v - 1;
        free (key);
    }
    zhashx_destroy (&seen);
    return n;
}

/* One pair's entry of "ops" (null when its tasks are not in the store). */
static int s_pair_json (ak_txn_t *txn, const ak_batch_t *b, const size_t *pair_of, size_t pair,
                        ak_rtiming_t *acc, json_t **pair_p, ak_err_t *err)
{
    const char **ids = ak_calloc (b->ntasks ? b->ntasks : 1, sizeof *ids);
    size_t n = 0;
    for (size_t i = 0; i < b->ntasks; i++)
        if (pair_of[i] == pair)
            ids[n++] = b->tasks[i]->task_id;
    ak_results_t *res = NULL;
    int rc = ak_results_load_tasks (txn, b->batch_id, ids, n, &res, err);
    free (ids);
    if (rc)
        return rc;
    *pair_p = res->npairs ? s_report_pair (b, &res->pairs[0], acc) : NULL;
    ak_results_destroy (&res);
    return 0;
}

int ak_client_report (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now, json_t **out,
                      ak_err_t *err)
{
    ak_batch_t *b = ak_sched_batch (env->sched, req->args[0]);
    if (!b)
        return ak_err_set (err, AK_ENOTFOUND, "no batch '%.64s'", req->args[0]);
    ak_page_t page;
    int rc = ak_page_args (req, 1, &page, err);
    if (rc == 0)
        rc = env->commit_now (env->arg, err);
    if (rc)
        return rc;
    size_t start = 0;
    if (page.after) {
        char *end = NULL;
        unsigned long long v = strtoull (page.after, &end, 10);
        if (!*page.after || *end || v >= SIZE_MAX - 1)
            return ak_err_set (err, AK_EINVAL, "report: AFTER '%.32s' is not a page of this answer", page.after);
        start = (size_t) v + 1;
    }
    ak_txn_t *txn = NULL;
    Ak__BatchRecord *rec = NULL;
    rc = ak_store_begin (env->store, false, &txn, err);
    if (rc)
        return rc;
    rc = ak_store_get_batch (txn, b->batch_id, &rec, err);
    if (rc == AK_ENOTFOUND)         /* the client's words, not the store's path and key */
        rc = ak_err_set (err, AK_ENOTFOUND, "no batch '%.64s'", b->batch_id);
    size_t *pair_of = NULL;
    size_t npairs = rc ? 0 : s_pairs (b, &pair_of);
    ak_rtiming_t acc;
    memset (&acc, 0, sizeof acc);
    json_t *ops = json_array (), *next = json_null ();
    size_t bytes = 0, shown = 0;
    for (size_t k = start; rc == 0 && k < npairs; k++) {
        if (shown >= page.limit || bytes >= AK_PAGE_BYTES) {
            json_decref (next);
            next = json_sprintf ("%zu", k - 1);
            break;
        }
        json_t *pair = NULL;
        rc = s_pair_json (txn, b, pair_of, k, &acc, &pair, err);
        if (rc == 0 && pair) {
            bytes += json_dumpb (pair, NULL, 0, JSON_COMPACT);
            json_array_append_new (ops, pair);
        }
        shown++;
    }
    ak_store_abort (&txn);
    free (pair_of);
    json_t *timing = ak_rtiming_json (&acc);
    if (rc) {
        json_decref (ops);
        json_decref (next);
        json_decref (timing);
        if (rec)
            ak__batch_record__free_unpacked (rec, NULL);
        return rc;
    }
    *out = json_pack ("{s:o, s:o, s:{s:f, s:f, s:f}, s:o, s:o}", "batch", ak_client_batchsum (b), "ops", ops,
                      "phases_ms", "compile", acc.phases[0], "gates", acc.phases[1], "timing", acc.phases[2],
                      "gpu_timing", timing, "next", next);
    /* Operators whose external spec replaced the built-in one. */
    json_t *overrides = json_array ();
    for (size_t i = 0; i < rec->n_overrides; i++)
        json_array_append_new (overrides, json_string (rec->overrides[i]));
    json_object_set_new (*out, "overrides", overrides);
    ak__batch_record__free_unpacked (rec, NULL);
    return 0;
}
