/*  coordinator/client.c: the client verbs (see client.h, docs/client-api.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "client.h"
#include "access.h"
#include "client_paging.h"
#include "client_profiles.h"
#include "client_verify.h"
#include "clock.h"
#include "cpb.h"
#include "envelope.h"
#include "expand.h"
#include "log.h"
#include "loopstat.h"
#include "metrics.h"
#include "pbjson.h"
#include "profiles.h"
#include "results.h"
#include "spec.h"
#include "util.h"

#define S_WORKERS_PAGE        500          /* workers per answer, at most */
#define S_WORKERS_BYTES       AK_PAGE_BYTES    /* JSON per answer, near enough: far below the 4 MiB a reply's JSON may be */
#define S_WORKER_LEASES_MAX   64           /* leases listed per worker ("outstanding" counts them all) */

// ------------------------------------------------------------------ helpers

static json_t *s_pb (const void *msg)
{
    json_t *j = msg ? ak_pb_to_json ((const ProtobufCMessage *) msg) : NULL;
    return j ? j : json_null ();
}

json_t *ak_client_params_json (Ak__Param *const *params, size_t n)
{
    json_t *arr = json_array ();
    for (size_t i = 0; i < n; i++)
        json_array_append_new (arr, json_pack ("{s:s, s:I}", "name", params[i]->name,
                                               "value", (json_int_t) params[i]->value));
    return arr;
}

/* BATCHSUM from the index (always current). */
json_t *ak_client_batchsum (const ak_batch_t *b)
{
    json_t *targets = json_array ();
    for (size_t i = 0; i < b->ntargets; i++)
        json_array_append_new (targets, json_string (b->targets[i]));
    json_t *counts = json_object ();
    for (int s = 0; s < AK_TS_COUNT; s++)
        json_object_set_new (counts, ak_tstate_name ((ak_tstate_t) s), json_integer ((json_int_t) b->counts[s]));
    json_t *winners = json_array ();
    for (size_t i = 0; i < b->nwinners; i++)
        json_array_append_new (winners, s_pb (b->winners[i]));
    return json_pack ("{s:s, s:s, s:s, s:I, s:I, s:o, s:I, s:o, s:o}",
                      "batch_id", b->batch_id, "name", b->name ? b->name : "",
                      "state", ak_bstate_name (b->state),
                      "created_ms", (json_int_t) b->created_ms,
                      "finished_ms", (json_int_t) b->finished_ms,
                      "targets", targets, "total", (json_int_t) b->total,
                      "counts", counts, "winners", winners);
}

static int s_find_batch (ak_client_env_t *env, const char *id, ak_batch_t **batch_p, ak_err_t *err)
{
    *batch_p = ak_sched_batch (env->sched, id);
    if (!*batch_p)
        return ak_err_set (err, AK_ENOTFOUND, "no batch '%.64s'", id);
    return 0;
}

// -------------------------------------------------------------------- verbs

typedef int (s_verb_fn) (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                         json_t **out, ak_err_t *err);

static int s_submit_once (ak_client_env_t *env, const ak_manifest_t *m, const char *body,
                          ak_expansion_t **exp_p, ak_err_t *err)
{
    ak_txn_t *txn = NULL;
    char digest[65], batch_id[32];
    uint64_t n = 0;
    int rc = ak_store_begin (env->store, true, &txn, err);
    if (rc)
        return rc;
    rc = ak_store_put_blob (txn, body, strlen (body), digest, err);
    if (rc == 0)
        rc = ak_store_next_id (txn, "batch", &n, err);
    /* policy.search.installed: the installed entries' configurations as
       seeds (ak_expand_with) */
    Ak__ProfileClass **classes = NULL;
    size_t nclasses = 0, ninst = 0;
    ak_installed_t *inst = NULL;
    if (rc == 0 && m->policy.search_installed && (rc = ak_profiles_load_all (txn, &classes, &nclasses, err)) == 0) {
        for (size_t c = 0; c < nclasses; c++)
            for (size_t e = 0; e < classes[c]->n_entries; e++) {
                const Ak__ProfileEntry *pe = classes[c]->entries[e];
                if (!pe->candidate_name || !*pe->candidate_name || pe->n_params == 0)
                    continue;                  /* a vendor entry: no configuration */
                inst = ak_realloc (inst, (ninst + 1) * sizeof *inst);
                inst[ninst++] = (ak_installed_t) { pe->op, classes[c]->device_class, pe->candidate_name,
                                                   pe->params, pe->n_params };
            }
    }
    if (rc == 0) {
        ak_batch_id_format (n, batch_id);
        rc = ak_expand_with (m, inst, ninst, batch_id, digest, ak_clock_wall_ms (), exp_p, err);
    }
    free (inst);
    ak_profiles_free (&classes, nclasses);
    if (rc == 0)
        rc = ak_expand_store (*exp_p, txn, err);
    if (rc == 0)
        rc = ak_store_commit (&txn, err);
    if (rc) {
        ak_store_abort (&txn);
        ak_expansion_destroy (exp_p);
    }
    return rc;
}

/* The targets of m that no known worker, alive or dead, has announced:
   a JSON array of their names, and "'a', 'b'" into names. */
static json_t *s_unserved (ak_client_env_t *env, const ak_manifest_t *m, char *names, size_t len)
{
    json_t *arr = json_array ();
    names[0] = '\0';
    for (size_t i = 0; i < m->ntargets; i++) {
        if (ak_waiting_announced (env->registry, m->targets[i]))
            continue;
        json_array_append_new (arr, json_string (m->targets[i]));
        size_t used = strlen (names);
        snprintf (names + used, len - used, "%s'%.64s' (targets[%zu])", used ? ", " : "", m->targets[i], i);
    }
    return arr;
}

/* submit [allow-unserved]: a batch naming a class that no worker has ever
   announced is refused unless allow-unserved says to queue it anyway
   (docs/operations.md, "A batch for a class nobody serves"). */
static int s_submit (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                     json_t **out, ak_err_t *err)
{
    ak_manifest_t *m = NULL;
    ak_expansion_t *exp = NULL;
    bool allow_unserved = req->n_args == 1 && strcmp (req->args[0], "allow-unserved") == 0;
    if (req->n_args == 1 && !allow_unserved)
        return ak_err_set (err, AK_EINVAL, "submit: '%.64s' is not an option of submit (allow-unserved is)",
                           req->args[0]);
    if (!req->body || !*req->body)
        return ak_err_set (err, AK_EINVAL, "submit: the request body must hold the manifest bundle");
    int rc = ak_manifest_parse_bundle (req->body, strlen (req->body), "bundle", &m, err);
    if (rc) {
        err->code = AK_EINVAL;          /* the parser's words, verbatim */
        return AK_EINVAL;
    }
    char names[600];
    json_t *unserved = s_unserved (env, m, names, sizeof names);
    if (json_array_size (unserved) && !allow_unserved) {
        rc = ak_err_set (err, AK_EINVAL, "submit: no worker has ever announced %s %s to this coordinator, "
                         "so the batch would wait until one registers: check the spelling against "
                         "`akctl workers`, start a worker of that class, or submit with --allow-unserved "
                         "to queue it anyway", json_array_size (unserved) == 1 ? "the target class"
                                                                               : "the target classes", names);
        ak_info ("submit refused: %s", err->msg);
        json_decref (unserved);
        ak_manifest_destroy (&m);
        return rc;
    }
    while ((rc = s_submit_once (env, m, req->body, &exp, err)) == AK_ESTOREFULL) {
        ak_error ("submit: %s; growing the map", err->msg);
        rc = ak_intake_grow (env->intake, err);
        if (rc)
            break;
    }
    if (rc == AK_ENOSPACE || rc == AK_ESTOREFULL || rc == AK_ESTORE) {
        ak_error ("submit failed: %s", err->msg);
        ak_intake_failed (env->intake, rc, err->msg);
    }
    if (rc == 0) {
        ak_intake_healthy (env->intake);
        ak_sched_add (env->sched, exp);
        env->work_added = true;
        ak_info ("batch %s '%s' submitted: %zu tasks over %zu ops x %zu targets%s%s%s",
                 exp->batch->batch_id, exp->batch->name, exp->ntasks, m->nops, m->ntargets,
                 json_array_size (unserved) ? " (--allow-unserved: no worker has announced " : "",
                 json_array_size (unserved) ? names : "", json_array_size (unserved) ? ")" : "");
        if (env->waiting)       /* the WARN now, not at the next heartbeat */
            ak_waiting_log_check (env->waiting, env->sched, env->registry);
        *out = json_pack ("{s:s, s:I, s:O}", "batch_id", exp->batch->batch_id,
                          "tasks", (json_int_t) exp->ntasks, "unserved", unserved);
    }
    json_decref (unserved);
    ak_expansion_destroy (&exp);
    ak_manifest_destroy (&m);
    return rc;
}

/* The store's trouble, when its commits fail: {"error", "since_ms",
   "failures"} with the error in words that do not name the server's paths
   (status is a viewer's verb; `stats` has the full message), else NULL. */
static json_t *s_store_error_json (ak_client_env_t *env)
{
    const ak_intake_stats_t *is = ak_intake_stats (env->intake);
    if (!is->failing_since_ms)
        return NULL;
    char text[300];
    if (is->last_code == AK_ENOSPACE || is->last_code == AK_ESTOREFULL) {
        /* "store full: WHY at PATH (...)" (store.c) or the map's limit (intake.c) */
        const char *at = is->last_code == AK_ENOSPACE ? strstr (is->last_error, " at ") : NULL;
        int n = at ? (int) (at - is->last_error) : (int) strlen (is->last_error);
        snprintf (text, sizeof text, "%.*s: commits fail, nothing new is stored until there is space", n,
                  is->last_error);
    }
    else
        snprintf (text, sizeof text, "store error (%s): commits fail, nothing new is stored "
                  "(akctl stats: last_commit_error)", ak_strerror (is->last_code));
    return json_pack ("{s:s, s:I, s:I}", "error", text, "since_ms", (json_int_t) is->failing_since_ms,
                      "failures", (json_int_t) is->failing);
}

/* "waiting": the classes of b's queued tasks that no live worker serves
   (waiting.h), [{"device_class","queued","workers_seen","why"}...]. */
static json_t *s_waiting_json (ak_client_env_t *env, const ak_batch_t *b)
{
    ak_waiting_t *list = NULL;
    size_t n = ak_waiting_batch (env->registry, b, &list);
    json_t *arr = json_array ();
    for (size_t i = 0; i < n; i++) {
        char why[320];
        ak_waiting_text (&list[i], why, sizeof why);
        json_array_append_new (arr, json_pack ("{s:s, s:I, s:I, s:s}", "device_class", list[i].device_class,
                                               "queued", (json_int_t) list[i].queued,
                                               "workers_seen", (json_int_t) list[i].seen, "why", why));
    }
    ak_waiting_free (&list, n);
    return arr;
}

static int s_list (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                   json_t **out, ak_err_t *err)
{
    /* in pages (client_paging.h): `status` without a batch is page one */
    ak_page_t page = { AK_PAGE_MAX, NULL };
    int rc = strcmp (req->verb, "list") == 0 ? ak_page_args (req, 0, &page, err) : 0;
    if (rc)
        return rc;
    json_t *arr = json_array (), *next = json_null ();
    size_t bytes = 0;
    bool past = !page.after;
    const char *last = NULL;
    for (ak_batch_t *b = ak_sched_batch_first (env->sched); b; b = ak_sched_batch_next (env->sched)) {
        if (!past) {
            past = strcmp (b->batch_id, page.after) == 0;
            continue;
        }
        if (json_array_size (arr) >= page.limit || bytes >= AK_PAGE_BYTES) {
            json_decref (next);
            next = json_string (last);
            break;
        }
        json_t *sum = ak_client_batchsum (b);
        json_t *waiting = s_waiting_json (env, b);
        if (json_array_size (waiting))
            json_object_set_new (sum, "waiting", waiting);
        else
            json_decref (waiting);
        bytes += json_dumpb (sum, NULL, 0, JSON_COMPACT);
        json_array_append_new (arr, sum);
        last = b->batch_id;
    }
    *out = json_pack ("{s:o, s:o}", "batches", arr, "next", next);
    json_t *se = s_store_error_json (env);
    if (se)
        json_object_set_new (*out, "store_error", se);
    return 0;
}

/* "search": how each candidate's configurations were chosen (the batch
   record), "rounds": tasks per (op, class, kind, stage), finished of
   total (coordinator/rounds.h). */
static void s_search_json (ak_client_env_t *env, const ak_batch_t *b, json_t *sum)
{
    ak_txn_t *txn = NULL;
    Ak__BatchRecord *rec = NULL;
    ak_err_t err = { 0 };
    json_t *search = json_array (), *rounds = json_array ();
    if (ak_store_begin (env->store, false, &txn, &err) == 0
        && ak_store_get_batch (txn, b->batch_id, &rec, &err) == 0)
        for (size_t i = 0; i < rec->n_search; i++)
            json_array_append_new (search, s_pb (rec->search[i]));
    ak_store_abort (&txn);
    if (rec)
        ak__batch_record__free_unpacked (rec, NULL);
    for (size_t i = 0; i < b->ntasks; i++) {
        const ak_task_t *t = b->tasks[i];
        if (strcmp (t->kind, "tune") != 0 && strcmp (t->kind, "confirm") != 0)
            continue;
        json_t *row = NULL, *r;
        size_t j;
        json_array_foreach (rounds, j, r)
            if (strcmp (json_string_value (json_object_get (r, "op")), t->op) == 0
                && strcmp (json_string_value (json_object_get (r, "device_class")), t->device_class) == 0
                && strcmp (json_string_value (json_object_get (r, "kind")), t->kind) == 0
                && json_integer_value (json_object_get (r, "stage")) == (json_int_t) t->stage)
                row = r;
        if (!row) {
            row = json_pack ("{s:s, s:s, s:s, s:I, s:I, s:I}", "op", t->op, "device_class", t->device_class,
                             "kind", t->kind, "stage", (json_int_t) t->stage, "total", (json_int_t) 0,
                             "finished", (json_int_t) 0);
            json_array_append_new (rounds, row);
        }
        json_object_set_new (row, "total", json_integer (json_integer_value (json_object_get (row, "total")) + 1));
        if (ak_tstate_terminal (t->state))
            json_object_set_new (row, "finished",
                                 json_integer (json_integer_value (json_object_get (row, "finished")) + 1));
    }
    json_object_set_new (sum, "search", search);
    json_object_set_new (sum, "rounds", rounds);
}

static int s_status (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                     json_t **out, ak_err_t *err)
{
    if (req->n_args == 0)
        return s_list (env, req, now, out, err);
    ak_batch_t *b;
    int rc = s_find_batch (env, req->args[0], &b, err);
    if (rc == 0) {
        *out = ak_client_batchsum (b);
        s_search_json (env, b, *out);
        json_object_set_new (*out, "waiting", s_waiting_json (env, b));
        json_t *se = s_store_error_json (env);
        if (se)
            json_object_set_new (*out, "store_error", se);
    }
    return rc;
}

static int s_show (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                   json_t **out, ak_err_t *err)
{
    const char *id = req->args[0];
    if (!ak_sched_task (env->sched, id))
        return ak_err_set (err, AK_ENOTFOUND, "no task '%.64s'", id);
    int rc = env->commit_now (env->arg, err);
    if (rc)
        return rc;
    ak_page_t page;
    rc = ak_page_args (req, 1, &page, err);
    if (rc)
        return rc;
    ak_txn_t *txn = NULL;
    Ak__TaskRecord *task = NULL;
    json_t *receipts = NULL, *next = NULL;
    char prefix[600];
    rc = ak_store_begin (env->store, false, &txn, err);
    if (rc)
        return rc;
    rc = ak_store_get_task (txn, id, &task, err);
    if (rc == 0) {
        snprintf (prefix, sizeof prefix, "%s#", id);
        json_t *tj = s_pb (task);          /* the page holds the record too */
        rc = ak_page_receipts (txn, prefix, &page, json_dumpb (tj, NULL, 0, JSON_COMPACT), &receipts, &next,
                               err);
        if (rc == 0)
            *out = json_pack ("{s:o, s:o, s:o}", "task", tj, "receipts", receipts, "next", next);
        else
            json_decref (tj);
    }
    /* An operator whose external spec replaced the built-in one says so. */
    Ak__BatchRecord *brec = NULL;
    if (rc == 0 && ak_store_get_batch (txn, task->batch_id, &brec, NULL) == 0) {
        for (size_t i = 0; i < brec->n_overrides; i++)
            if (strcmp (brec->overrides[i], task->op) == 0)
                json_object_set_new (*out, "override_builtin", json_true ());
        ak__batch_record__free_unpacked (brec, NULL);
    }
    if (task)
        ak__task_record__free_unpacked (task, NULL);
    ak_store_abort (&txn);
    return rc;
}

static int s_receipts (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                       json_t **out, ak_err_t *err)
{
    ak_batch_t *b;
    int rc = s_find_batch (env, req->args[0], &b, err);
    if (rc == 0)
        rc = env->commit_now (env->arg, err);
    if (rc)
        return rc;
    ak_page_t page;
    rc = ak_page_args (req, 1, &page, err);
    if (rc)
        return rc;
    ak_txn_t *txn = NULL;
    json_t *receipts = NULL, *next = NULL;
    char prefix[64];
    rc = ak_store_begin (env->store, false, &txn, err);
    if (rc)
        return rc;
    snprintf (prefix, sizeof prefix, "%s.", b->batch_id);
    rc = ak_page_receipts (txn, prefix, &page, 0, &receipts, &next, err);
    if (rc == 0)
        *out = json_pack ("{s:s, s:o, s:o}", "batch_id", b->batch_id, "receipts", receipts, "next", next);
    ak_store_abort (&txn);
    return rc;
}

static int s_worker_cmp (const void *a, const void *b)
{
    return strcmp ((*(ak_worker_t *const *) a)->worker_id, (*(ak_worker_t *const *) b)->worker_id);
}

/*  A worker's (or the fleet's) GPU timing share from its heartbeats'
    figures (docs/measurement.md, "GPU timing share"); null when none came. */
static json_t *s_timing_json (bool has, double sampled, double busy, double device_busy, double exec,
                              uint64_t tasks)
{
    if (!has)
        return json_null ();
    json_t *j = json_pack ("{s:f, s:f, s:f, s:f, s:I}", "sampled_ms", sampled, "busy_ms", busy,
                           "device_busy_ms", device_busy, "exec_ms", exec, "tasks", (json_int_t) tasks);
    json_object_set_new (j, "gpu_timing_share", device_busy > 0 ? json_real (sampled / device_busy) : json_null ());
    json_object_set_new (j, "share_of_task_time", exec > 0 ? json_real (sampled / exec) : json_null ());
    return j;
}

static json_t *s_worker_json (ak_client_env_t *env, ak_worker_t *w, uint64_t now)
{
    uint64_t wall = ak_clock_wall_ms ();
    json_t *classes = json_array ();
    for (size_t i = 0; i < w->nclasses; i++)
        json_array_append_new (classes, json_string (w->classes[i]));
    json_t *leases = json_array ();
    size_t nleases = 0;
    for (void *v = zhashx_first (w->outstanding); v; v = zhashx_next (w->outstanding)) {
        if (nleases++ >= S_WORKER_LEASES_MAX)
            continue;               /* counted in "outstanding" */
        const char *task_id = zhashx_cursor (w->outstanding);
        ak_task_t *t = ak_sched_task (env->sched, task_id);
        json_t *lease = json_pack ("{s:s, s:I, s:b}", "task_id", task_id,
                                   "attempt", (json_int_t) (uintptr_t) v,
                                   "started", t && t->started);
        if (t && t->deadline && t->worker_id && strcmp (t->worker_id, w->worker_id) == 0)
            json_object_set_new (lease, "expires_in_ms",
                                 json_integer (t->deadline > now ? (json_int_t) (t->deadline - now) : 0));
        else
            json_object_set_new (lease, "expires_in_ms", json_null ());
        json_array_append_new (leases, lease);
    }
    const Ak__Hello *h = w->hello;
    json_t *wj = json_pack ("{s:s, s:s, s:i, s:s, s:I, s:I, s:o, s:i, s:i, s:I, s:o, s:I, s:i, s:s}",
                      "worker_id", w->worker_id, "host", h ? h->host : "", "pid", h ? (int) h->pid : 0,
                      "state", w->alive ? "alive" : "dead",
                      "last_seen_ms", (json_int_t) w->last_seen_ms,
                      "ago_ms", (json_int_t) (wall > w->last_seen_ms ? wall - w->last_seen_ms : 0),
                      "device_classes", classes,
                      "slots", h ? (int) h->slots : 0, "prefetch", h ? (int) h->prefetch : 0,
                      "outstanding", (json_int_t) zhashx_size (w->outstanding), "leases", leases,
                      "tasks_done", (json_int_t) w->tasks_done, "registrations", (int) w->registrations,
                      "software_version", h ? h->software_version : "");
    if (wj)
        json_object_set_new (wj, "timing", s_timing_json (w->has_timing, w->sampled_ms, w->busy_ms,
                                                          w->busy_ms * w->timing_devices, w->exec_ms,
                                                          w->timing_tasks));
    return wj;
}

/* workers [LIMIT [AFTER]]: the workers whose ids sort after AFTER (all
   without it), at most LIMIT (default and most S_WORKERS_PAGE) and at
   most S_WORKERS_BYTES of JSON, whatever the registry holds; "next" is the
   AFTER of the next page (null: this was the last). */
static int s_workers (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                      json_t **out, ak_err_t *err)
{
    const char *after = req->n_args > 1 ? req->args[1] : NULL;
    size_t limit = S_WORKERS_PAGE;
    if (req->n_args > 0) {
        char *end = NULL;
        unsigned long v = strtoul (req->args[0], &end, 10);
        if (!*req->args[0] || *end || v < 1 || v > S_WORKERS_PAGE)
            return ak_err_set (err, AK_EINVAL, "workers: LIMIT '%.32s' must be 1..%d", req->args[0],
                               S_WORKERS_PAGE);
        limit = v;
    }
    size_t n = 0, cap = 16;
    ak_worker_t **all = ak_malloc (cap * sizeof *all);
    for (ak_worker_t *w = ak_registry_first (env->registry); w; w = ak_registry_next (env->registry)) {
        if (after && strcmp (w->worker_id, after) <= 0)
            continue;
        if (n == cap)
            all = ak_realloc (all, (cap *= 2) * sizeof *all);
        all[n++] = w;
    }
    qsort (all, n, sizeof *all, s_worker_cmp);
    json_t *arr = json_array ();
    size_t bytes = 0, i = 0;
    for (; i < n && i < limit && bytes < S_WORKERS_BYTES; i++) {
        json_t *wj = s_worker_json (env, all[i], now);
        bytes += json_dumpb (wj, NULL, 0, JSON_COMPACT);
        json_array_append_new (arr, wj);
    }
    json_t *next = i < n ? json_string (all[i - 1]->worker_id) : json_null ();
    free (all);
    *out = json_pack ("{s:o, s:o, s:I}", "workers", arr, "next", next,
                      "known", (json_int_t) ak_registry_size (env->registry));
    return 0;
}

/* worker-forget ID: removes a dead worker's record (registry and store),
   so `workers` stops listing a host that is gone for good.  A live worker
   is refused: it would register again at its next message anyway.  Leases
   that still name it are left for `resume` or their deadline. */
static int s_worker_forget (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                            json_t **out, ak_err_t *err)
{
    const char *id = req->args[0];
    ak_worker_t *w = ak_registry_get (env->registry, id);
    if (!w)
        return ak_err_set (err, AK_ENOTFOUND, "no worker '%.64s'", id);
    if (w->alive)
        return ak_err_set (err, AK_ESTATE, "worker %s is alive (heard %llu ms ago): only a dead worker "
                           "can be forgotten; stop it first", w->worker_id,
                           (unsigned long long) (now > w->last_seen ? now - w->last_seen : 0));
    /* what is pending is written first, so no later flush writes it back */
    int rc = env->commit_now (env->arg, err);
    ak_txn_t *txn = NULL;
    if (rc == 0)
        rc = ak_store_begin (env->store, true, &txn, err);
    if (rc == 0) {
        rc = ak_store_del (txn, AK_DB_WORKERS, w->worker_id, err);
        if (rc == AK_ENOTFOUND)
            rc = 0;                     /* never stored: nothing to delete */
    }
    if (rc == 0)
        rc = ak_store_commit (&txn, err);
    ak_store_abort (&txn);
    if (rc)
        return ak_err_prefix (err, "worker %s not forgotten", id);
    *out = json_pack ("{s:s, s:I}", "forgotten", w->worker_id, "tasks_done", (json_int_t) w->tasks_done);
    ak_info ("worker %s forgotten (a client asked)", w->worker_id);
    ak_registry_forget (env->registry, w);
    return 0;
}

static int s_cancel (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                     json_t **out, ak_err_t *err)
{
    ak_batch_t *b;
    int rc = s_find_batch (env, req->args[0], &b, err);
    if (rc)
        return rc;
    ak_sched_cancel (env->sched, b, now);
    rc = env->commit_now (env->arg, err);
    if (rc)
        return ak_err_prefix (err, "batch %s cancelled but not yet stored (will retry)", b->batch_id);
    *out = ak_client_batchsum (b);
    return 0;
}

/* The holder of a leased task when it is alive and still counts the task
   as its own; NULL when nobody runs it (unclaimed after a restart, holder
   dead or re-registered without it). */
static ak_worker_t *s_live_holder (ak_client_env_t *env, const ak_task_t *task)
{
    ak_worker_t *w = task->worker_id ? ak_registry_get (env->registry, task->worker_id) : NULL;
    return w && w->alive && ak_worker_holds (w, task->task_id) ? w : NULL;
}

/* resume BATCH: every leased task that no live worker runs goes back to
   its queue (attempt + 1, or poisoned past the budget) instead of waiting
   for its lease to run out; queued tasks are dispatched; tasks running on
   live workers are left alone.  Idempotent: a second call finds nothing
   to re-queue.  Replies after the changes are committed. */
static int s_resume (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                     json_t **out, ak_err_t *err)
{
    ak_batch_t *b;
    int rc = s_find_batch (env, req->args[0], &b, err);
    if (rc)
        return rc;
    /* receipts waiting for their commit already freed their worker's slot:
       committed first, their tasks are finished, not taken back */
    rc = env->commit_now (env->arg, err);
    if (rc)
        return rc;
    json_t *requeued = json_array (), *poisoned = json_array ();
    size_t running = 0;
    for (size_t i = 0; i < b->ntasks; i++) {
        ak_task_t *t = b->tasks[i];
        if (t->state != AK_TS_LEASED)
            continue;
        if (s_live_holder (env, t)) {
            running++;
            continue;
        }
        char reason[200];
        snprintf (reason, sizeof reason, "resumed: lease %s nobody runs", t->worker_id ? "of a gone worker"
                                                                                 : "left unclaimed");
        if (t->worker_id) {
            ak_worker_t *w = ak_registry_get (env->registry, t->worker_id);
            if (w)
                ak_worker_drop (w, t->task_id);
        }
        uint32_t was = t->attempt;
        ak_sched_requeue (env->sched, t, reason, now);
        json_array_append_new (t->state == AK_TS_POISONED ? poisoned : requeued,
                               json_pack ("{s:s, s:I, s:I}", "task_id", t->task_id,
                                          "from_attempt", (json_int_t) was,
                                          "attempt", (json_int_t) t->attempt));
    }
    size_t n = json_array_size (requeued) + json_array_size (poisoned);
    if (n || b->counts[AK_TS_QUEUED])
        env->work_added = true;
    ak_info ("batch %s resumed: %zu leases nobody ran re-queued (%zu poisoned), %zu running, %zu queued",
             b->batch_id, json_array_size (requeued), json_array_size (poisoned), running,
             b->counts[AK_TS_QUEUED]);
    rc = env->commit_now (env->arg, err);
    if (rc) {
        json_decref (requeued);
        json_decref (poisoned);
        return ak_err_prefix (err, "batch %s resumed but not yet stored (will retry)", b->batch_id);
    }
    *out = json_pack ("{s:s, s:o, s:o, s:I, s:I, s:o}", "batch_id", b->batch_id,
                      "requeued", requeued, "poisoned", poisoned,
                      "running", (json_int_t) running,
                      "queued", (json_int_t) b->counts[AK_TS_QUEUED], "batch", ak_client_batchsum (b));
    return 0;
}

/* retry BATCH [failed]: every failed (any status: wrong_answer, timeout,
   crashed ...) or poisoned task gets a new attempt with a fresh budget;
   a complete batch opens again.  Idempotent: the tasks it re-queued are
   no longer failed, so a second call does nothing until one fails again.
   A cancelled batch is refused. */
static int s_retry (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                    json_t **out, ak_err_t *err)
{
    ak_batch_t *b;
    int rc = s_find_batch (env, req->args[0], &b, err);
    if (rc)
        return rc;
    if (req->n_args > 1 && strcmp (req->args[1], "failed") != 0)
        return ak_err_set (err, AK_EINVAL, "retry: '%.64s' is not something to retry (failed is)",
                           req->args[1]);
    if (b->state == AK_BS_CANCELLED)
        return ak_err_set (err, AK_ESTATE, "batch %s is cancelled: its tasks are not retried",
                           b->batch_id);
    bool was_complete = b->state == AK_BS_COMPLETE;
    json_t *retried = json_array ();
    for (size_t i = 0; i < b->ntasks; i++) {
        ak_task_t *t = b->tasks[i];
        const char *was = ak_tstate_name (t->state);
        uint32_t from = t->attempt;
        if (ak_sched_reopen (env->sched, t, now))
            json_array_append_new (retried, json_pack ("{s:s, s:s, s:I, s:I}", "task_id", t->task_id,
                                                       "was", was, "from_attempt", (json_int_t) from,
                                                       "attempt", (json_int_t) t->attempt));
    }
    if (json_array_size (retried))
        env->work_added = true;
    ak_info ("batch %s: retry re-queued %zu failed or poisoned tasks%s", b->batch_id,
             json_array_size (retried), was_complete && b->state == AK_BS_OPEN ? " (open again)" : "");
    rc = env->commit_now (env->arg, err);
    if (rc) {
        json_decref (retried);
        return ak_err_prefix (err, "batch %s retried but not yet stored (will retry)", b->batch_id);
    }
    *out = json_pack ("{s:s, s:o, s:b, s:o}", "batch_id", b->batch_id, "retried", retried,
                      "reopened", was_complete && b->state == AK_BS_OPEN, "batch", ak_client_batchsum (b));
    return 0;
}

/* Accepted receipts by status (metrics.h's names, "other" for the rest). */
static json_t *s_by_status (const ak_intake_stats_t *is)
{
    json_t *j = json_object ();
    for (int i = 0; i < AK_STATUS_COUNT; i++)
        json_object_set_new (j, ak_metrics_statuses[i], json_integer ((json_int_t) is->by_status[i]));
    return j;
}

static int s_stats (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                    json_t **out, ak_err_t *err)
{
    const ak_counters_t *c = env->counters;
    const ak_intake_stats_t *is = ak_intake_stats (env->intake);
    json_t *j = json_object ();
    size_t known = 0;
    for (ak_worker_t *w = ak_registry_first (env->registry); w; w = ak_registry_next (env->registry))
        known++;
#define S_SET(name, value) json_object_set_new (j, name, json_integer ((json_int_t) (value)))
    S_SET ("workers_alive", ak_registry_alive (env->registry));
    S_SET ("workers_known", known);
    S_SET ("batches_open", ak_sched_open_batches (env->sched));
    S_SET ("tasks_queued", ak_sched_count (env->sched, AK_TS_QUEUED));
    S_SET ("tasks_leased", ak_sched_count (env->sched, AK_TS_LEASED));
    S_SET ("tasks_done", ak_sched_count (env->sched, AK_TS_DONE));
    S_SET ("tasks_failed", ak_sched_count (env->sched, AK_TS_FAILED));
    S_SET ("tasks_poisoned", ak_sched_count (env->sched, AK_TS_POISONED));
    S_SET ("tasks_cancelled", ak_sched_count (env->sched, AK_TS_CANCELLED));
    S_SET ("receipts_accepted", is->accepted);
    S_SET ("receipts_duplicate", is->duplicate);
    S_SET ("receipts_staged", ak_intake_staged (env->intake));
    S_SET ("receipts_dropped", is->dropped);
    S_SET ("commits", is->commits);
    S_SET ("commit_failures", is->commit_failures);
    S_SET ("map_grows", is->map_grows);
    S_SET ("map_size", ak_store_map_size (env->store));
    S_SET ("map_max", is->map_max);
    S_SET ("store_full", is->store_full);
    S_SET ("commits_failing", is->failing);                 /* failed commits in a row, now */
    S_SET ("commits_failing_since_ms", is->failing_since_ms);
    S_SET ("assigns", c->assigns);
    S_SET ("acks", c->acks);
    S_SET ("disconnects_sent", c->disconnects_sent);
    S_SET ("requeued", c->requeued);
    S_SET ("leases_expired", c->leases_expired);
    S_SET ("workers_died", c->workers_died);
    S_SET ("send_failures", c->send_failures);
    S_SET ("uptime_ms", now > env->start_ms ? now - env->start_ms : 0);
#undef S_SET
    json_object_set_new (j, "last_commit_error", json_string (is->last_error));
    json_object_set_new (j, "messages", json_pack ("{s:I, s:I}",
        "workers", (json_int_t) c->messages[AK_EP_WORKERS], "clients", (json_int_t) c->messages[AK_EP_CLIENTS]));
    json_object_set_new (j, "rejected", json_pack ("{s:I, s:I}",
        "workers", (json_int_t) c->rejected[AK_EP_WORKERS], "clients", (json_int_t) c->rejected[AK_EP_CLIENTS]));
    json_object_set_new (j, "connections", json_pack ("{s:{s:I, s:I}, s:{s:I, s:I}}",
        "workers", "accepted", (json_int_t) c->connected[AK_EP_WORKERS],
                   "closed", (json_int_t) c->disconnected[AK_EP_WORKERS],
        "clients", "accepted", (json_int_t) c->connected[AK_EP_CLIENTS],
                   "closed", (json_int_t) c->disconnected[AK_EP_CLIENTS]));
    json_object_set_new (j, "security", ak_access_stats (c));
    /* The fleet's GPU timing share: the workers' heartbeat figures summed
       (alive and dead ones the registry still knows). */
    double sampled = 0, busy = 0, device_busy = 0, exec = 0;
    uint64_t tasks = 0;
    bool any = false;
    for (ak_worker_t *w = ak_registry_first (env->registry); w; w = ak_registry_next (env->registry))
        if (w->has_timing) {
            any = true;
            sampled += w->sampled_ms;
            busy += w->busy_ms;
            device_busy += w->busy_ms * w->timing_devices;
            exec += w->exec_ms;
            tasks += w->timing_tasks;
        }
    json_object_set_new (j, "timing", s_timing_json (any, sampled, busy, device_busy, exec, tasks));
    json_object_set_new (j, "map_used", json_integer ((json_int_t) ak_store_map_used (env->store)));
    json_object_set_new (j, "receipts_by_status", s_by_status (is));
    if (env->loop)
        json_object_set_new (j, "loop", ak_loopstat_json (env->loop));
    *out = j;
    return 0;
}

static int s_shutdown (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                       json_t **out, ak_err_t *err)
{
    env->shutdown = true;
    ak_info ("shutdown requested by a client");
    *out = json_object ();
    return 0;
}

// ----------------------------------------------------------------- dispatch

typedef struct {
    const char *verb;
    size_t      min_args, max_args;
    const char *usage;          /* what the args are */
    s_verb_fn  *fn;
} s_verb_t;

static const s_verb_t s_verbs[] = {
    { "submit",   0, 1, "[allow-unserved] (the bundle is the body)", s_submit },
    { "list",     0, 2, "[LIMIT [AFTER]]", s_list },
    { "status",   0, 1, "[BATCH]", s_status },
    { "show",     1, 3, "TASK [LIMIT [AFTER]]", s_show },
    { "receipts", 1, 3, "BATCH [LIMIT [AFTER]]", s_receipts },
    { "report",   1, 3, "BATCH [LIMIT [AFTER]]", ak_client_report },
    { "workers",  0, 2, "[LIMIT [AFTER]]", s_workers },
    { "worker-forget", 1, 1, "WORKER_ID", s_worker_forget },
    { "cancel",   1, 1, "BATCH", s_cancel },
    { "resume",   1, 1, "BATCH", s_resume },
    { "retry",    1, 2, "BATCH [failed]", s_retry },
    { "stats",    0, 0, "no arguments", s_stats },
    { "shutdown", 0, 0, "no arguments", s_shutdown },
    { "profile-install", 2, 4, "BATCH NAME [replace] [unconfirmed]", ak_client_profile_install },
    { "profile-list",    0, 0, "no arguments", ak_client_profile_list },
    { "profile-show",    1, 1, "NAME", ak_client_profile_show },
    { "profile-export",  1, 1, "NAME", ak_client_profile_export },
    { "profile-import",  1, 2, "NAME|- [replace] (the package is the body)", ak_client_profile_import },
    { "profile-gate",    1, 1, "NAME (the gate JSON is the body)", ak_client_profile_gate },
    { "verify",          1, 3, "NAME [K FLOOR]", ak_client_verify },
    { "verify-status",   1, 1, "BATCH", ak_client_verify_status },
};

_Static_assert (sizeof s_verbs / sizeof s_verbs[0] < AK_CLIENT_VERB_SLOTS, "AK_CLIENT_VERB_SLOTS too small");

int ak_client_verb_id (const char *verb)
{
    for (size_t i = 0; verb && i < sizeof s_verbs / sizeof s_verbs[0]; i++)
        if (strcmp (verb, s_verbs[i].verb) == 0)
            return (int) i;
    return AK_CLIENT_VERB_SLOTS - 1;
}

const char *ak_client_verb_name (int id)
{
    if (id == AK_CLIENT_VERB_SLOTS - 1)
        return "unknown";
    if (id < 0 || (size_t) id >= sizeof s_verbs / sizeof s_verbs[0])
        return NULL;
    return s_verbs[id].verb;
}

int ak_client_handle (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                      char **json_p, ak_err_t *err)
{
    *json_p = NULL;
    const s_verb_t *v = NULL;
    for (size_t i = 0; i < sizeof s_verbs / sizeof s_verbs[0]; i++)
        if (strcmp (req->verb, s_verbs[i].verb) == 0)
            v = &s_verbs[i];
    if (!v)
        return ak_err_set (err, AK_EINVAL, "unknown verb '%.64s'", req->verb);
    if (req->n_args < v->min_args || req->n_args > v->max_args)
        return ak_err_set (err, AK_EINVAL, "%s takes %s, got %zu argument%s", v->verb, v->usage,
                           req->n_args, req->n_args == 1 ? "" : "s");
    for (size_t i = 0; i < req->n_args; i++)
        if (!*req->args[i] || strlen (req->args[i]) > 128)
            return ak_err_set (err, AK_EINVAL, "%s: argument %zu must be 1..128 characters", v->verb, i + 1);
    if (req->body && *req->body && v->fn != s_submit && v->fn != ak_client_profile_import
        && v->fn != ak_client_profile_gate)
        return ak_err_set (err, AK_EINVAL, "%s takes no body", v->verb);

    json_t *out = NULL;
    int rc = v->fn (env, req, now, &out, err);
    if (rc) {
        json_decref (out);
        return rc;
    }
    *json_p = json_dumps (out, JSON_COMPACT);
    json_decref (out);
    if (!*json_p)
        return ak_err_set (err, AK_ENOMEM, "%s: reply could not be serialised", v->verb);
    if (strlen (*json_p) > AK_MAX_STRING) {     /* a client would refuse the reply */
        size_t n = strlen (*json_p);
        free (*json_p);
        *json_p = NULL;
        return ak_err_set (err, AK_ETOOBIG, "%s: the answer's JSON of %zu bytes is over the %u MiB a reply "
                           "holds", v->verb, n, AK_MAX_STRING >> 20);
    }
    return 0;
}
