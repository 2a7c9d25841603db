/*  coordinator/client_profiles.c: the profile verbs (see client_profiles.h). */
#include <stdlib.h>
#include <string.h>
#include "client_profiles.h"
#include "clock.h"
#include "log.h"
#include "profiles.h"
#include "profile_gates.h"

typedef int (s_txn_fn) (ak_txn_t *txn, ak_client_env_t *env, const Ak__ClientRequest *req,
                        void *arg, json_t **out, ak_err_t *err);

/* Runs fn in one transaction after committing what is pending; a write
   transaction is committed (growing the map when it is full) before
   returning, a read one aborted. */
static int s_in_txn (ak_client_env_t *env, const Ak__ClientRequest *req, bool write, s_txn_fn *fn,
                     void *arg, json_t **out, ak_err_t *err)
{
    int rc = env->commit_now (env->arg, err);
    if (rc)
        return rc;
    for (;;) {
        ak_txn_t *txn = NULL;
        json_t *res = NULL;
        rc = ak_store_begin (env->store, write, &txn, err);
        if (rc)
            return rc;
        rc = fn (txn, env, req, arg, &res, err);
        if (rc == 0 && write)
            rc = ak_store_commit (&txn, err);
        ak_store_abort (&txn);
        if (rc == 0) {
            *out = res;
            return 0;
        }
        json_decref (res);
        if (rc != AK_ESTOREFULL)
            return rc;
        ak_error ("%s: %s; growing the map", req->verb, err->msg);
        rc = ak_intake_grow (env->intake, err);
        if (rc)
            return rc;
    }
}

/* The flags after a verb's names, from args[from] on: "replace", and for
   install "unconfirmed"; anything else is refused, naming what may be there. */
typedef struct {
    bool replace, unconfirmed;
} s_flags_t;

static int s_flags (const Ak__ClientRequest *req, size_t from, bool unconfirmed_ok, s_flags_t *f, ak_err_t *err)
{
    memset (f, 0, sizeof *f);
    for (size_t i = from; i < req->n_args; i++) {
        if (strcmp (req->args[i], "replace") == 0)
            f->replace = true;
        else if (unconfirmed_ok && strcmp (req->args[i], "unconfirmed") == 0)
            f->unconfirmed = true;
        else
            return ak_err_set (err, AK_EINVAL, "%s: argument %zu must be %s, not '%.64s'", req->verb, i + 1,
                               unconfirmed_ok ? "'replace' or 'unconfirmed'" : "'replace'", req->args[i]);
    }
    return 0;
}

static int s_install (ak_txn_t *txn, ak_client_env_t *env, const Ak__ClientRequest *req, void *arg,
                      json_t **out, ak_err_t *err)
{
    const s_flags_t *f = arg;
    return ak_profiles_install (txn, req->args[0], req->args[1], f->replace, f->unconfirmed,
                                ak_clock_wall_ms (), out, err);
}

int ak_client_profile_install (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                               json_t **out, ak_err_t *err)
{
    s_flags_t f;
    int rc = s_flags (req, 2, true, &f, err);
    if (rc)
        return rc;
    rc = s_in_txn (env, req, true, s_install, &f, out, err);
    if (rc == 0)
        ak_info ("profile %s: installed %zu entries from batch %s (%zu skipped)%s%s", req->args[1],
                 json_array_size (json_object_get (*out, "installed")), req->args[0],
                 json_array_size (json_object_get (*out, "skipped")), f.replace ? " with replace" : "",
                 f.unconfirmed ? " (unconfirmed allowed)" : "");
    return rc;
}

static int s_list (ak_txn_t *txn, ak_client_env_t *env, const Ak__ClientRequest *req, void *arg,
                   json_t **out, ak_err_t *err)
{
    return ak_profiles_list (txn, out, err);
}

int ak_client_profile_list (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                            json_t **out, ak_err_t *err)
{
    return s_in_txn (env, req, false, s_list, NULL, out, err);
}

static int s_show (ak_txn_t *txn, ak_client_env_t *env, const Ak__ClientRequest *req, void *arg,
                   json_t **out, ak_err_t *err)
{
    return ak_profiles_show (txn, req->args[0], out, err);
}

int ak_client_profile_show (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                            json_t **out, ak_err_t *err)
{
    return s_in_txn (env, req, false, s_show, NULL, out, err);
}

static int s_export (ak_txn_t *txn, ak_client_env_t *env, const Ak__ClientRequest *req, void *arg,
                     json_t **out, ak_err_t *err)
{
    return ak_profiles_export (txn, req->args[0], out, err);
}

int ak_client_profile_export (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                              json_t **out, ak_err_t *err)
{
    return s_in_txn (env, req, false, s_export, NULL, out, err);
}

typedef struct {
    json_t *package;
    bool    replace;
} s_import_t;

static int s_import (ak_txn_t *txn, ak_client_env_t *env, const Ak__ClientRequest *req, void *arg,
                     json_t **out, ak_err_t *err)
{
    s_import_t *im = arg;
    const char *name = strcmp (req->args[0], "-") == 0 ? NULL : req->args[0];
    return ak_profiles_import (txn, im->package, name, im->replace, ak_clock_wall_ms (), out, err);
}

int ak_client_profile_import (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                              json_t **out, ak_err_t *err)
{
    s_flags_t f;
    int rc = s_flags (req, 1, false, &f, err);
    if (rc)
        return rc;
    s_import_t im = { NULL, f.replace };
    if (!req->body || !*req->body)
        return ak_err_set (err, AK_EINVAL, "profile-import: the request body must hold the package");
    json_error_t jerr;
    im.package = json_loads (req->body, JSON_REJECT_DUPLICATES, &jerr);
    if (!im.package)
        return ak_err_set (err, AK_EINVAL, "profile-import: body: invalid JSON: %s (line %d column %d)",
                           jerr.text, jerr.line, jerr.column);
    rc = s_in_txn (env, req, true, s_import, &im, out, err);
    json_decref (im.package);
    if (rc == 0)
        ak_info ("profile %s: imported %zu entries", json_string_value (json_object_get (*out, "profile")),
                 json_array_size (json_object_get (*out, "installed")));
    return rc;
}

static int s_gate (ak_txn_t *txn, ak_client_env_t *env, const Ak__ClientRequest *req, void *arg,
                   json_t **out, ak_err_t *err)
{
    return ak_profile_gates_record (txn, req->args[0], arg, ak_clock_wall_ms (), out, err);
}

int ak_client_profile_gate (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                            json_t **out, ak_err_t *err)
{
    if (!ak_profile_name_valid (req->args[0]))
        return ak_err_set (err, AK_EINVAL, "profile-gate: '%.64s' is not a profile name ([A-Za-z0-9_.-], 1..64)",
                           req->args[0]);
    if (!req->body || !*req->body)
        return ak_err_set (err, AK_EINVAL, "profile-gate: the request body must hold the gate JSON");
    json_error_t jerr;
    json_t *gate = json_loads (req->body, JSON_REJECT_DUPLICATES, &jerr);
    if (!gate)
        return ak_err_set (err, AK_EINVAL, "profile-gate: body: invalid JSON: %s (line %d column %d)",
                           jerr.text, jerr.line, jerr.column);
    int rc = s_in_txn (env, req, true, s_gate, gate, out, err);
    json_decref (gate);
    if (rc == 0)
        ak_info ("profile %s: end-to-end gate on %s recorded: %s", req->args[0],
                 json_string_value (json_object_get (*out, "device_class")),
                 json_string_value (json_object_get (*out, "verdict")));
    return rc;
}
