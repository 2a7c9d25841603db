/*  coordinator/client_verify.c: the verify verbs (see client_verify.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "client_verify.h"
#include "clock.h"
#include "log.h"
#include "pbjson.h"
#include "profiles.h"
#include "verify.h"

/* A number argument in [lo, hi]. */
static int s_num_arg (const char *s, const char *what, double lo, double hi, double *v, ak_err_t *err)
{
    char *end = NULL;
    double x = strtod (s, &end);
    if (!end || end == s || *end || !isfinite (x) || x < lo || x > hi)
        return ak_err_set (err, AK_EINVAL, "verify: %s must be a number from %g to %g, not '%.32s'",
                           what, lo, hi, s);
    *v = x;
    return 0;
}

static int s_create_once (ak_client_env_t *env, const char *name, const ak_verify_rule_t *rule,
                          ak_expansion_t **exp_p, ak_err_t *err)
{
    ak_txn_t *txn = NULL;
    char batch_id[32];
    uint64_t n = 0;
    int rc = ak_store_begin (env->store, true, &txn, err);
    if (rc)
        return rc;
    rc = ak_store_next_id (txn, "batch", &n, err);
    if (rc == 0) {
        ak_batch_id_format (n, batch_id);
        rc = ak_verify_create (txn, env->registry, name, rule, batch_id, ak_clock_wall_ms (), exp_p, err);
    }
    if (rc == 0)
        rc = ak_store_commit (&txn, err);
    if (rc) {
        ak_store_abort (&txn);
        ak_expansion_destroy (exp_p);
    }
    return rc;
}

int ak_client_verify (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                      json_t **out, ak_err_t *err)
{
    const char *name = req->args[0];
    ak_verify_rule_t rule = { AK_VERIFY_DEFAULT_K, AK_VERIFY_DEFAULT_FLOOR };
    if (!ak_profile_name_valid (name))
        return ak_err_set (err, AK_EINVAL, "verify: profile name '%.64s' must be 1..64 of [A-Za-z0-9_.-]", name);
    if (req->n_args == 2)
        return ak_err_set (err, AK_EINVAL, "verify: give both K and FLOOR, or neither");
    int rc = 0;
    if (req->n_args == 3) {
        rc = s_num_arg (req->args[1], "K", 0, 100, &rule.k, err);
        if (rc == 0)
            rc = s_num_arg (req->args[2], "FLOOR", 0, 10, &rule.floor, err);
        if (rc)
            return rc;
    }
    rc = env->commit_now (env->arg, err);
    if (rc)
        return rc;
    ak_expansion_t *exp = NULL;
    while ((rc = s_create_once (env, name, &rule, &exp, err)) == AK_ESTOREFULL) {
        ak_error ("verify: %s; growing the map", err->msg);
        rc = ak_intake_grow (env->intake, err);
        if (rc)
            return rc;
    }
    if (rc)
        return rc;
    ak_sched_add (env->sched, exp);
    env->work_added = true;
    /* the verdicts made at creation: unverified ones, and vendor entries */
    size_t vendor = exp->batch->verify ? exp->batch->verify->entries_vendor : 0;
    size_t unverified = exp->batch->verify ? exp->batch->verify->n_verdicts - vendor : 0;
    ak_info ("batch %s: verify of profile %s: %zu tasks, %zu entries without a live worker, %zu vendor entries",
             exp->batch->batch_id, name, exp->ntasks, unverified, vendor);
    *out = json_pack ("{s:s, s:s, s:I, s:I, s:I}", "batch_id", exp->batch->batch_id, "profile", name,
                      "tasks", (json_int_t) exp->ntasks, "unverified", (json_int_t) unverified,
                      "vendor", (json_int_t) vendor);
    ak_expansion_destroy (&exp);
    return 0;
}

int ak_client_verify_status (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                             json_t **out, ak_err_t *err)
{
    ak_batch_t *b = ak_sched_batch (env->sched, req->args[0]);
    if (!b)
        return ak_err_set (err, AK_ENOTFOUND, "no batch '%.64s'", req->args[0]);
    int rc = env->commit_now (env->arg, err);
    if (rc)
        return rc;
    ak_txn_t *txn = NULL;
    Ak__BatchRecord *rec = NULL;
    rc = ak_store_begin (env->store, false, &txn, err);
    if (rc == 0)
        rc = ak_store_get_batch (txn, b->batch_id, &rec, err);
    ak_store_abort (&txn);
    if (rc)
        return rc;
    if (strcmp (rec->kind, AK_VERIFY_KIND) != 0 || !rec->verify) {
        ak__batch_record__free_unpacked (rec, NULL);
        return ak_err_set (err, AK_EINVAL, "batch %s is not a verify batch", b->batch_id);
    }
    json_t *counts = json_object ();
    for (int s = 0; s < AK_TS_COUNT; s++)
        json_object_set_new (counts, ak_tstate_name ((ak_tstate_t) s), json_integer ((json_int_t) b->counts[s]));
    json_t *report = ak_pb_to_json (&rec->verify->base);
    /* The index is current, the record's batch state may wait for the next
       commit; an open batch (again, after a retry) is not judged yet. */
    const char *state = b->state == AK_BS_COMPLETE && !*rec->verify->state ? "open" : ak_bstate_name (b->state);
    if (report && b->state == AK_BS_OPEN)
        json_object_set_new (report, "state", json_string (""));
    *out = json_pack ("{s:{s:s, s:s, s:s, s:I, s:I, s:I, s:o}, s:o}",
                      "batch", "batch_id", b->batch_id, "name", b->name ? b->name : "", "state", state,
                      "created_ms", (json_int_t) b->created_ms, "finished_ms", (json_int_t) b->finished_ms,
                      "total", (json_int_t) b->total, "counts", counts,
                      "report", report ? report : json_null ());
    ak__batch_record__free_unpacked (rec, NULL);
    return 0;
}
