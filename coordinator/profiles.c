/*  coordinator/profiles.c: installed profiles (see profiles.h,
    docs/profiles.md): their records, the JSON they show as, listing,
    export, verification status, the merge of new entries, and install
    from a batch's winners.  Import of a package is profile_import.c. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profiles.h"
#include "profile_gates.h"
#include "profiles_impl.h"
#include "cpb.h"
#include "digest.h"
#include "log.h"
#include "results.h"
#include "space.h"
#include "spec.h"
#include "util.h"

/* The ABI headers prepended to every kernel (generated from kernels/). */
extern const char ak_prelude[];
extern const size_t ak_prelude_len;
extern const char ak_profile_prelude_cuda[];
extern const size_t ak_profile_prelude_cuda_len;

// ------------------------------------------------------------------ helpers

bool ak_profile_name_valid (const char *name)
{
    size_t n = name ? strlen (name) : 0;
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum ((unsigned char) name[i]) && !strchr ("_.-", name[i]))
            return false;
    return true;
}

bool profiles_class_valid (const char *cls)
{
    size_t n = cls ? strlen (cls) : 0;
    if (n == 0 || n > 256)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum ((unsigned char) cls[i]) && !strchr ("_./-", cls[i]))
            return false;
    return true;
}

/* "softmax/rows=32,cols=128/float32"; caller frees. */
char *profiles_entry_key (const char *op, char *const *keys, const int64_t *dims, size_t n,
                         const char *dtype)
{
    size_t cap = 256 + n * 96, len = 0;
    char *buf = ak_malloc (cap);
    len += (size_t) snprintf (buf + len, cap - len, "%s/", op);
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t) snprintf (buf + len, cap - len, "%s%s=%" PRId64, i ? "," : "", keys[i], dims[i]);
    if (len < cap)
        snprintf (buf + len, cap - len, "/%s", dtype);
    return buf;
}

static char *s_db_key (const char *name, const char *cls)
{
    return ak_sprintf ("%s#%s", name, cls);
}

/* The stored class record, or NULL in *pc_p when there is none. */
static int s_get_class (ak_txn_t *txn, const char *name, const char *cls, Ak__ProfileClass **pc_p,
                        ak_err_t *err)
{
    *pc_p = NULL;
    char *key = s_db_key (name, cls);
    void *val = NULL;
    size_t len = 0;
    int rc = ak_store_get (txn, AK_DB_PROFILES, key, &val, &len, err);
    if (rc == AK_ENOTFOUND)
        rc = 0;
    else
    if (rc == 0) {
        *pc_p = ak__profile_class__unpack (NULL, len, val);
        if (!*pc_p)
            rc = ak_err_set (err, AK_ESTORE, "profiles: record '%s' does not decode", key);
    }
    free (val);
    free (key);
    return rc;
}

static int s_put_class (ak_txn_t *txn, const Ak__ProfileClass *pc, ak_err_t *err)
{
    size_t len = ak__profile_class__get_packed_size (pc);
    uint8_t *buf = ak_malloc (len ? len : 1);
    ak__profile_class__pack (pc, buf);
    char *key = s_db_key (pc->profile, pc->device_class);
    int rc = ak_store_put (txn, AK_DB_PROFILES, key, buf, len, err);
    free (key);
    free (buf);
    return rc;
}

static json_t *s_status_json (ak_txn_t *txn, const char *name);

static unsigned s_major (const char *version)
{
    unsigned v = 0;
    for (const char *p = version; p && *p; p++) {
        if (isdigit ((unsigned char) *p)) {
            while (isdigit ((unsigned char) *p) && v < 100000)
                v = v * 10 + (unsigned) (*p++ - '0');
            break;
        }
    }
    return v;
}

// -------------------------------------------------------------------- JSON

static json_t *s_u32_array (const uint32_t *v, size_t n)
{
    json_t *a = json_array ();
    for (size_t i = 0; i < n; i++)
        json_array_append_new (a, json_integer ((json_int_t) v[i]));
    return a;
}

static json_t *s_buffers_json (Ak__ProfileBuffer *const *b, size_t n)
{
    json_t *a = json_array ();
    for (size_t i = 0; i < n; i++)
        json_array_append_new (a, json_pack ("{s:s, s:I}", "name", b[i]->name,
                                             "count", (json_int_t) b[i]->count));
    return a;
}

static const char *s_src_ext (const char *backend)
{
    return strcmp (backend, "cuda") == 0 ? ".cu" : ".c";
}

bool profiles_entry_is_vendor (const Ak__ProfileEntry *e)
{
    return e->kind && strcmp (e->kind, AK_PROFILE_KIND_VENDOR) == 0;
}

/* What the entry applies, for messages: "candidate tiled" or "the vendor
   library cublaslt". */
static const char *s_entry_what (const Ak__ProfileEntry *e, char *buf, size_t len)
{
    if (profiles_entry_is_vendor (e))
        snprintf (buf, len, "the vendor library %.64s", e->vendor);
    else
        snprintf (buf, len, "candidate %.64s", e->candidate_name);
    return buf;
}

/* The fields every kind of entry has; then a kernel's (entry, source,
   prelude, launch, buffers, arch) or a vendor entry's (vendor, vendor_op,
   reason). */
static json_t *s_entry_json (const Ak__ProfileEntry *e)
{
    bool vendor = profiles_entry_is_vendor (e);
    json_t *keys = json_array (), *dims = json_array (), *params = json_array (), *ev = json_array ();
    for (size_t i = 0; i < e->n_keys; i++)
        json_array_append_new (keys, json_string (e->keys[i]));
    for (size_t i = 0; i < e->n_dims; i++)
        json_array_append_new (dims, json_integer ((json_int_t) e->dims[i]));
    for (size_t i = 0; i < e->n_params; i++)
        json_array_append_new (params, json_pack ("{s:s, s:I}", "name", e->params[i]->name,
                                                  "value", (json_int_t) e->params[i]->value));
    for (size_t i = 0; i < e->n_evidence; i++)
        json_array_append_new (ev, json_string (e->evidence[i]));
    json_t *j = json_pack ("{s:s, s:s, s:s, s:o, s:o, s:s, s:s, s:s, s:o, s:s,"
                           " s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:s, s:s, s:I}",
        "kind", vendor ? AK_PROFILE_KIND_VENDOR : AK_PROFILE_KIND_KERNEL,
        "op", e->op, "key", e->key, "keys", keys, "dims", dims, "dtype", e->dtype,
        "workload", e->workload_name, "candidate", e->candidate_name, "params", params,
        "backend", e->backend,
        "speedup", e->speedup, "noise", e->noise, "op_speedup", e->op_speedup,
        "op_noise", e->op_noise, "baseline_us", e->baseline_us, "candidate_us", e->candidate_us,
        "evidence", ev, "batch_id", e->batch_id, "task_id", e->task_id,
        "installed_ms", (json_int_t) e->installed_ms);
    if (!j)
        return NULL;
    json_object_set_new (j, "confirmed_on", e->confirmed_on && e->confirmed_on[0]
                             ? json_string (e->confirmed_on) : json_null ());
    if (vendor) {
        json_object_set_new (j, "vendor", json_string (e->vendor));
        json_object_set_new (j, "vendor_op", json_string (e->vendor_op));
        json_object_set_new (j, "reason", json_string (e->reason));
        return j;
    }
    json_t *launch = json_null ();
    if (e->launch)
        launch = json_pack ("{s:o, s:o, s:I}", "grid", s_u32_array (e->launch->grid, e->launch->n_grid),
                            "block", s_u32_array (e->launch->block, e->launch->n_block),
                            "shared_bytes", (json_int_t) e->launch->shared_bytes);
    /* ABI 2 launch features, only where used (libakprofile falls back on them) */
    if (e->launch && e->launch->n_cluster)
        json_object_set_new (launch, "cluster", s_u32_array (e->launch->cluster, e->launch->n_cluster));
    if (e->launch && e->launch->tensor_maps)
        json_object_set_new (launch, "tensor_maps", json_integer (e->launch->tensor_maps));
    if (e->launch && e->launch->n_maps) {
        char *ins[AK_MAX_BUFS], *outs[AK_MAX_BUFS];
        size_t ni = e->n_inputs < AK_MAX_BUFS ? e->n_inputs : AK_MAX_BUFS;
        size_t no = e->n_outputs < AK_MAX_BUFS ? e->n_outputs : AK_MAX_BUFS;
        for (size_t i = 0; i < ni; i++)
            ins[i] = e->inputs[i]->name;
        for (size_t i = 0; i < no; i++)
            outs[i] = e->outputs[i]->name;
        json_object_set_new (launch, "maps", profiles_tmaps_json (e->launch, ins, ni, outs, no));
    }
    char *src_file = ak_sprintf ("sources/%s%s", e->source_digest, s_src_ext (e->backend));
    char *pre_file = ak_sprintf ("sources/%s.h", e->prelude_digest);
    json_object_set_new (j, "entry", json_string (e->entry));
    json_object_set_new (j, "source", json_pack ("{s:s, s:s, s:s}", "name", e->source_name,
                                                 "digest", e->source_digest, "file", src_file));
    json_object_set_new (j, "prelude", json_pack ("{s:s, s:s}", "digest", e->prelude_digest, "file", pre_file));
    json_object_set_new (j, "launch", launch);
    json_object_set_new (j, "inputs", s_buffers_json (e->inputs, e->n_inputs));
    json_object_set_new (j, "outputs", s_buffers_json (e->outputs, e->n_outputs));
    if (e->arch && e->arch[0])
        json_object_set_new (j, "arch", json_string (e->arch));
    free (src_file);
    free (pre_file);
    return j;
}

json_t *ak_profile_class_json (const Ak__ProfileClass *pc)
{
    json_t *entries = json_array ();
    for (size_t i = 0; i < pc->n_entries; i++)
        json_array_append_new (entries, s_entry_json (pc->entries[i]));
    return json_pack ("{s:s, s:s, s:{s:s, s:I, s:I, s:I, s:s, s:s}, s:I, s:o}",
                      "device_class", pc->device_class, "backend", pc->backend,
                      "device", "name", pc->device_name, "cc_major", (json_int_t) pc->cc_major,
                      "cc_minor", (json_int_t) pc->cc_minor,
                      "driver_major", (json_int_t) pc->driver_major,
                      "driver_version", pc->driver_version, "nvrtc_version", pc->nvrtc_version,
                      "updated_ms", (json_int_t) pc->updated_ms, "entries", entries);
}

// ------------------------------------------------------------------- walks

typedef struct {
    Ak__ProfileClass **recs;
    size_t             n, cap;
    const char        *only;        /* profile name, or NULL for all */
    int                bad;
} s_recs_t;

static int s_collect (const char *key, const void *val, size_t len, void *arg)
{
    s_recs_t *r = arg;
    if (!strchr (key, '#') || ak_profile_gates_is_key (key))
        return 0;                   /* "NAME!verify", "NAME!gate!CLASS": a status */
    Ak__ProfileClass *pc = ak__profile_class__unpack (NULL, len, val);
    if (!pc) {
        ak_error ("profiles: record '%s' does not decode; skipped", key);
        r->bad++;
        return 0;
    }
    if (r->only && strcmp (pc->profile, r->only) != 0) {
        ak__profile_class__free_unpacked (pc, NULL);
        return 0;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 8;
        r->recs = ak_realloc (r->recs, r->cap * sizeof *r->recs);
    }
    r->recs[r->n++] = pc;
    return 0;
}

static void s_recs_free (s_recs_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        ak__profile_class__free_unpacked (r->recs[i], NULL);
    free (r->recs);
    memset (r, 0, sizeof *r);
}

/* Every class record of profile name (prefix "NAME#"). */
static int s_load_profile (ak_txn_t *txn, const char *name, s_recs_t *r, ak_err_t *err)
{
    char *prefix = ak_sprintf ("%s#", name);
    r->only = name;
    int rc = ak_store_walk (txn, AK_DB_PROFILES, prefix, s_collect, r, err);
    free (prefix);
    return rc;
}

int ak_profiles_list (ak_txn_t *txn, json_t **out, ak_err_t *err)
{
    s_recs_t r = { 0 };
    int rc = ak_store_walk (txn, AK_DB_PROFILES, "", s_collect, &r, err);
    if (rc) {
        s_recs_free (&r);
        return rc;
    }
    json_t *arr = json_array (), *cur = NULL;
    const char *cur_name = NULL;
    for (size_t i = 0; i < r.n; i++) {
        const Ak__ProfileClass *pc = r.recs[i];
        if (!cur_name || strcmp (cur_name, pc->profile) != 0) {
            cur = json_pack ("{s:s, s:[], s:I, s:o}", "profile", pc->profile, "classes", "entries", (json_int_t) 0,
                             "verification", s_status_json (txn, pc->profile));
            json_array_append_new (arr, cur);
            cur_name = pc->profile;
        }
        json_array_append_new (json_object_get (cur, "classes"),
                               json_pack ("{s:s, s:s, s:I, s:I, s:o}", "device_class", pc->device_class,
                                          "backend", pc->backend, "entries", (json_int_t) pc->n_entries,
                                          "updated_ms", (json_int_t) pc->updated_ms,
                                          "gate", ak_profile_gates_json (txn, pc->profile, pc->device_class)));
        json_object_set_new (cur, "entries", json_integer (json_integer_value (json_object_get (cur, "entries"))
                                                           + (json_int_t) pc->n_entries));
    }
    *out = json_pack ("{s:o}", "profiles", arr);
    s_recs_free (&r);
    return 0;
}

/* show and export share the walk; only show reports the verification
   (it is the store's judgement, not part of a package). */
static int s_show (ak_txn_t *txn, const char *name, bool with_status, json_t **out, ak_err_t *err)
{
    s_recs_t r = { 0 };
    int rc = s_load_profile (txn, name, &r, err);
    if (rc == 0 && r.n == 0)
        rc = ak_err_set (err, AK_ENOTFOUND, "no profile '%.64s'", name);
    if (rc == 0) {
        json_t *classes = json_array ();
        for (size_t i = 0; i < r.n; i++) {
            json_t *cj = ak_profile_class_json (r.recs[i]);
            if (with_status)
                json_object_set_new (cj, "gate", ak_profile_gates_json (txn, name, r.recs[i]->device_class));
            json_array_append_new (classes, cj);
        }
        *out = json_pack ("{s:i, s:s, s:s, s:o}", "schema_version", 1, "format", AK_PROFILE_FORMAT,
                          "profile", name, "classes", classes);
        if (with_status)
            json_object_set_new (*out, "verification", s_status_json (txn, name));
    }
    s_recs_free (&r);
    return rc;
}

int ak_profiles_show (ak_txn_t *txn, const char *name, json_t **out, ak_err_t *err)
{
    return s_show (txn, name, true, out, err);
}

int ak_profiles_load (ak_txn_t *txn, const char *name, Ak__ProfileClass ***classes_p, size_t *n_p,
                      ak_err_t *err)
{
    s_recs_t r = { 0 };
    int rc = s_load_profile (txn, name, &r, err);
    if (rc == 0 && r.n == 0)
        rc = ak_err_set (err, AK_ENOTFOUND, "no profile '%.64s'", name);
    if (rc) {
        s_recs_free (&r);
        return rc;
    }
    *classes_p = r.recs;
    *n_p = r.n;
    return 0;
}

int ak_profiles_load_all (ak_txn_t *txn, Ak__ProfileClass ***classes_p, size_t *n_p, ak_err_t *err)
{
    s_recs_t r = { 0 };
    int rc = ak_store_walk (txn, AK_DB_PROFILES, "", s_collect, &r, err);
    if (rc) {
        s_recs_free (&r);
        return rc;
    }
    *classes_p = r.recs;
    *n_p = r.n;
    return 0;
}

void ak_profiles_free (Ak__ProfileClass ***classes_p, size_t n)
{
    if (classes_p && *classes_p) {
        for (size_t i = 0; i < n; i++)
            ak__profile_class__free_unpacked ((*classes_p)[i], NULL);
        free (*classes_p);
        *classes_p = NULL;
    }
}

int ak_profiles_export (ak_txn_t *txn, const char *name, json_t **out, ak_err_t *err)
{
    json_t *profile = NULL;
    int rc = s_show (txn, name, false, &profile, err);
    if (rc)
        return rc;
    json_t *sources = json_object ();
    size_t ci;
    json_t *cls;
    json_array_foreach (json_object_get (profile, "classes"), ci, cls) {
        size_t ei;
        json_t *e;
        json_array_foreach (json_object_get (cls, "entries"), ei, e) {
            const char *digests[2] = {
                json_string_value (json_object_get (json_object_get (e, "source"), "digest")),
                json_string_value (json_object_get (json_object_get (e, "prelude"), "digest"))
            };
            for (int k = 0; k < 2 && rc == 0; k++) {
                if (!digests[k] || json_object_get (sources, digests[k]))
                    continue;
                char *text = NULL;
                size_t len = 0;
                rc = ak_store_get_blob (txn, digests[k], &text, &len, err);
                if (rc) {
                    ak_err_prefix (err, "profile %s: %s: source %s", name,
                                   json_string_value (json_object_get (e, "key")), digests[k]);
                    break;
                }
                json_object_set_new (sources, digests[k], json_stringn (text, len));
                free (text);
            }
            if (rc)
                break;
        }
        if (rc)
            break;
    }
    if (rc) {
        json_decref (profile);
        json_decref (sources);
        return rc;
    }
    *out = json_pack ("{s:o, s:o}", "profile", profile, "sources", sources);
    return 0;
}

// ------------------------------------------------------------ verification

static char *s_status_key (const char *name)
{
    return ak_sprintf ("%s!verify", name);
}

static int s_del_status (ak_txn_t *txn, const char *name, ak_err_t *err)
{
    char *key = s_status_key (name);
    int rc = ak_store_del (txn, AK_DB_PROFILES, key, err);
    free (key);
    return rc == AK_ENOTFOUND ? 0 : rc;
}

int ak_profiles_put_status (ak_txn_t *txn, const Ak__VerifyReport *rep, ak_err_t *err)
{
    size_t len = ak__verify_report__get_packed_size (rep);
    uint8_t *buf = ak_malloc (len ? len : 1);
    ak__verify_report__pack (rep, buf);
    char *key = s_status_key (rep->profile);
    int rc = ak_store_put (txn, AK_DB_PROFILES, key, buf, len, err);
    free (key);
    free (buf);
    return rc;
}

int ak_profiles_get_status (ak_txn_t *txn, const char *name, Ak__VerifyReport **rep_p, ak_err_t *err)
{
    *rep_p = NULL;
    char *key = s_status_key (name);
    void *val = NULL;
    size_t len = 0;
    int rc = ak_store_get (txn, AK_DB_PROFILES, key, &val, &len, err);
    if (rc == 0) {
        *rep_p = ak__verify_report__unpack (NULL, len, val);
        if (!*rep_p)
            rc = ak_err_set (err, AK_ESTORE, "profiles: record '%s' does not decode", key);
    }
    free (val);
    free (key);
    return rc;
}

/* {"state","batch_id","finished_ms","reasons",...} of the last completed
   verification, or {"state":"never"}; a status that does not decode is
   reported, not fatal. */
static json_t *s_status_json (ak_txn_t *txn, const char *name)
{
    Ak__VerifyReport *rep = NULL;
    ak_err_t e = { 0 };
    int rc = ak_profiles_get_status (txn, name, &rep, &e);
    if (rc == AK_ENOTFOUND)
        return json_pack ("{s:s}", "state", "never");
    if (rc)
        return json_pack ("{s:s, s:s}", "state", "unknown", "error", e.msg);
    json_t *reasons = json_array ();
    for (size_t i = 0; i < rep->n_reasons; i++)
        json_array_append_new (reasons, json_string (rep->reasons[i]));
    json_t *j = json_pack ("{s:s, s:s, s:I, s:I, s:I, s:I, s:o}", "state", rep->state,
                           "batch_id", rep->batch_id, "finished_ms", (json_int_t) rep->finished_ms,
                           "entries", (json_int_t) rep->entries,
                           "entries_failed", (json_int_t) rep->entries_failed,
                           "entries_unverified", (json_int_t) rep->entries_unverified, "reasons", reasons);
    if (j)
        json_object_set_new (j, "entries_vendor", json_integer ((json_int_t) rep->entries_vendor));
    ak__verify_report__free_unpacked (rep, NULL);
    return j;
}

// ------------------------------------------------------------------- merge

/* Writes the entries of each record in news into profile name: an entry
   with the key of an existing one replaces it only with replace (else
   AK_EEXIST and the caller aborts); other entries of the class stay; other
   classes are not read.  Appends to installed.  news stay the caller's. */
int profiles_merge (ak_txn_t *txn, Ak__ProfileClass *const *news, size_t nnews, bool replace,
                    uint64_t now_ms, json_t *installed, ak_err_t *err)
{
    int rc = 0;
    for (size_t c = 0; c < nnews && rc == 0; c++) {
        Ak__ProfileClass *nw = news[c];
        Ak__ProfileClass *old = NULL;
        rc = s_get_class (txn, nw->profile, nw->device_class, &old, err);
        if (rc)
            break;
        size_t nold = old ? old->n_entries : 0;
        Ak__ProfileEntry **merged = ak_calloc (nold + nw->n_entries + 1, sizeof *merged);
        size_t n = 0;
        for (size_t i = 0; i < nold; i++)
            merged[n++] = old->entries[i];
        for (size_t j = 0; j < nw->n_entries && rc == 0; j++) {
            Ak__ProfileEntry *e = nw->entries[j];
            bool replaced = false;
            for (size_t i = 0; i < n; i++) {
                if (strcmp (merged[i]->key, e->key) != 0)
                    continue;
                if (!replace) {
                    char what[96];
                    rc = ak_err_set (err, AK_EEXIST,
                        "profile %s already has %s on %s (%s from batch %s, task %s): "
                        "install with --replace to overwrite it; nothing was installed",
                        nw->profile, e->key, nw->device_class, s_entry_what (merged[i], what, sizeof what),
                        merged[i]->batch_id, merged[i]->task_id);
                    break;
                }
                merged[i] = e;
                replaced = true;
                break;
            }
            if (rc)
                break;
            if (!replaced)
                merged[n++] = e;
            json_array_append_new (installed, json_pack ("{s:s, s:s, s:s, s:s, s:s, s:o, s:b}",
                "device_class", nw->device_class, "op", e->op, "key", e->key,
                "kind", profiles_entry_is_vendor (e) ? AK_PROFILE_KIND_VENDOR : AK_PROFILE_KIND_KERNEL,
                "candidate", e->candidate_name,
                "params", json_pack ("[]"), "replaced", replaced));
            if (profiles_entry_is_vendor (e))
                json_object_set_new (json_array_get (installed, json_array_size (installed) - 1), "vendor",
                                     json_string (e->vendor));
            json_t *params = json_object_get (json_array_get (installed, json_array_size (installed) - 1), "params");
            for (size_t p = 0; p < e->n_params; p++)
                json_array_append_new (params, json_pack ("{s:s, s:I}", "name", e->params[p]->name,
                                                          "value", (json_int_t) e->params[p]->value));
        }
        if (rc == 0 && n > PROFILES_MAX_ENTRIES)
            rc = ak_err_set (err, AK_ETOOBIG, "profile %s on %s would have more than %d entries",
                             nw->profile, nw->device_class, PROFILES_MAX_ENTRIES);
        if (rc == 0) {
            /* the record borrows entries from old and nw; packed, not freed */
            Ak__ProfileClass rec = *nw;
            rec.entries = merged;
            rec.n_entries = n;
            rec.updated_ms = now_ms;
            rc = s_put_class (txn, &rec, err);
        }
        /* the profile changed: an earlier verification no longer holds,
           nor the class's end-to-end gate */
        if (rc == 0)
            rc = s_del_status (txn, nw->profile, err);
        if (rc == 0)
            rc = ak_profile_gates_forget (txn, nw->profile, nw->device_class, err);
        free (merged);
        if (old)
            ak__profile_class__free_unpacked (old, NULL);
    }
    return rc;
}

// ----------------------------------------------------------------- install

Ak__ProfileClass *profiles_class_new (const char *name, const char *cls, const Ak__Device *dev,
                                     const char *backend)
{
    Ak__ProfileClass *pc = ak_malloc (sizeof *pc);
    ak__profile_class__init (pc);
    ak_cpb_set (&pc->profile, name);
    ak_cpb_set (&pc->device_class, cls);
    ak_cpb_set (&pc->backend, backend);
    if (dev) {
        ak_cpb_set (&pc->device_name, dev->name);
        pc->cc_major = dev->cc_major;
        pc->cc_minor = dev->cc_minor;
        pc->driver_major = s_major (dev->driver_version);
        ak_cpb_set (&pc->driver_version, dev->driver_version);
        ak_cpb_set (&pc->nvrtc_version, dev->nvrtc_version);
    }
    return pc;
}

void profiles_class_add (Ak__ProfileClass *pc, Ak__ProfileEntry *e)
{
    pc->entries = ak_realloc (pc->entries, (pc->n_entries + 1) * sizeof *pc->entries);
    pc->entries[pc->n_entries++] = e;
}

void profiles_class_drop (Ak__ProfileClass *pc, const char *key)
{
    size_t k = 0;
    for (size_t i = 0; i < pc->n_entries; i++) {
        if (strcmp (pc->entries[i]->key, key) == 0)
            ak__profile_entry__free_unpacked (pc->entries[i], NULL);
        else
            pc->entries[k++] = pc->entries[i];
    }
    pc->n_entries = k;
}

void profiles_classes_free (Ak__ProfileClass **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ak__profile_class__free_unpacked (v[i], NULL);
    free (v);
}

static Ak__ProfileBuffer **s_buffers (const ak_spec_t *spec, const ak_buf_t *bufs, int n,
                                      const int64_t *dims, ak_dtype_t dt, size_t *n_out)
{
    Ak__ProfileBuffer **v = ak_calloc ((size_t) n + 1, sizeof *v);
    for (int i = 0; i < n; i++) {
        ak_err_t e = { 0 };
        int64_t count = 0;
        if (ak_spec_eval (spec, bufs[i].count, dims, dt, &count, &e) != 0)
            count = 0;
        v[i] = ak_malloc (sizeof *v[i]);
        ak__profile_buffer__init (v[i]);
        ak_cpb_set (&v[i]->name, bufs[i].name);
        v[i]->count = count;
    }
    *n_out = (size_t) n;
    return v;
}

/* A new entry in pc for workload wl of task t (dtype dt): what every kind
   of entry has, its figures from fig's timing of wl.  Evidence, launch,
   sources and the kind are the caller's to add. */
Ak__ProfileEntry *profiles_entry_base (Ak__ProfileClass *pc, const ak_spec_t *spec, const Ak__TaskRecord *t,
                                       const Ak__Workload *wl, const Ak__Receipt *fig, uint64_t now_ms)
{
    Ak__ProfileEntry *e = ak_malloc (sizeof *e);
    ak__profile_entry__init (e);
    profiles_class_add (pc, e);
    ak_cpb_set (&e->op, t->op);
    char *key = profiles_entry_key (t->op, spec->keys, wl->dims, wl->n_dims, wl->dtype);
    ak_cpb_set (&e->key, key);
    free (key);
    e->keys = ak_calloc ((size_t) spec->nkeys + 1, sizeof *e->keys);
    e->dims = ak_calloc ((size_t) spec->nkeys + 1, sizeof *e->dims);
    e->n_keys = e->n_dims = (size_t) spec->nkeys;
    for (int i = 0; i < spec->nkeys; i++) {
        e->keys[i] = ak_strdup (spec->keys[i]);
        e->dims[i] = wl->dims[i];
    }
    ak_cpb_set (&e->dtype, wl->dtype);
    ak_cpb_set (&e->workload_name, wl->name);
    ak_cpb_set (&e->candidate_name, t->candidate_name);
    e->params = ak_cpb_params_dup (t->params, t->n_params);
    e->n_params = t->n_params;
    ak_cpb_set (&e->backend, t->backend);
    for (size_t i = 0; i < fig->n_timings; i++) {
        const Ak__WorkloadTiming *wt = fig->timings[i];
        if (!wt->workload || strcmp (wt->workload->name, wl->name) != 0
            || strcmp (wt->workload->dtype, wl->dtype) != 0)
            continue;
        e->speedup = isfinite (wt->speedup) ? wt->speedup : 0;
        e->noise = isfinite (wt->speedup_noise) ? wt->speedup_noise : 0;
        e->baseline_us = wt->baseline ? wt->baseline->median_us : 0;
        e->candidate_us = wt->candidate ? wt->candidate->median_us : 0;
        if (e->speedup <= 0 && e->candidate_us > 0)
            e->speedup = e->baseline_us / e->candidate_us;
    }
    e->evidence = ak_calloc (3, sizeof *e->evidence);
    ak_cpb_set (&e->batch_id, t->batch_id);
    ak_cpb_set (&e->task_id, t->task_id);
    ak_cpb_set (&e->confirmed_on, "");
    e->installed_ms = now_ms;
    return e;
}

int profiles_entries_for (const ak_spec_t *spec, const ak_candidate_t *cand, const Ak__TaskRecord *t,
                          const Ak__Receipt *r, const Ak__Receipt *fig, double op_speedup, double op_noise,
                          const char *only, const char *only_dtype, const char *pre_receipt,
                          const char *prelude_digest, const char *confirmed_on, uint64_t now_ms,
                          Ak__ProfileClass *pc, ak_err_t *err)
{
    const char *names[AK_MAX_PARAMS + 1];
    int64_t values[AK_MAX_PARAMS + 1];
    size_t np = t->n_params < AK_MAX_PARAMS ? t->n_params : AK_MAX_PARAMS;
    for (size_t i = 0; i < np; i++) {
        names[i] = t->params[i]->name;
        values[i] = t->params[i]->value;
    }
    for (size_t k = 0; k < t->n_workloads; k++) {
        const Ak__Workload *wl = t->workloads[k];
        if (only && (strcmp (wl->name, only) != 0 || strcmp (wl->dtype, only_dtype) != 0))
            continue;
        ak_dtype_t dt;
        if (ak_dtype_parse (wl->dtype, &dt) != 0 || wl->n_dims != (size_t) spec->nkeys)
            return ak_err_set (err, AK_EINVAL, "task %s: workload %s: bad dtype or shape", t->task_id, wl->name);
        Ak__ProfileEntry *e = profiles_entry_base (pc, spec, t, wl, fig, now_ms);
        ak_cpb_set (&e->entry, "ak_kernel");
        ak_cpb_set (&e->source_name, t->candidate_source_name);
        ak_cpb_set (&e->source_digest, t->candidate_digest);
        ak_cpb_set (&e->prelude_digest, prelude_digest);
        if (cand->arch)
            ak_cpb_set (&e->arch, cand->arch);
        if (cand->launch) {
            ak_launch_cfg_t cfg;
            int rc = ak_launch_eval (spec, cand->launch, wl->dims, dt, names, values, (int) np, &cfg, err);
            if (rc)
                return ak_err_prefix (err, "task %s: workload %s", t->task_id, wl->name);
            e->launch = ak_malloc (sizeof *e->launch);
            ak__launch_config__init (e->launch);
            e->launch->grid = ak_malloc (3 * sizeof (uint32_t));
            e->launch->block = ak_malloc (3 * sizeof (uint32_t));
            memcpy (e->launch->grid, cfg.grid, sizeof cfg.grid);
            memcpy (e->launch->block, cfg.block, sizeof cfg.block);
            e->launch->n_grid = e->launch->n_block = 3;
            e->launch->shared_bytes = cfg.shared_bytes;
            if (cfg.cluster[0] * cfg.cluster[1] * cfg.cluster[2] > 1) {
                e->launch->cluster = ak_malloc (3 * sizeof (uint32_t));
                memcpy (e->launch->cluster, cfg.cluster, sizeof cfg.cluster);
                e->launch->n_cluster = 3;
            }
            profiles_tmaps_set (e->launch, cfg.tmaps, cfg.ntmaps);
        }
        e->inputs = s_buffers (spec, spec->inputs, spec->ninputs, wl->dims, dt, &e->n_inputs);
        e->outputs = s_buffers (spec, spec->outputs, spec->noutputs, wl->dims, dt, &e->n_outputs);
        e->op_speedup = op_speedup;
        e->op_noise = op_noise;
        e->evidence[e->n_evidence++] = ak_strdup (r->receipt_id);
        if (fig != r)
            e->evidence[e->n_evidence++] = ak_strdup (fig->receipt_id);
        if (pre_receipt && *pre_receipt)
            e->evidence[e->n_evidence++] = ak_strdup (pre_receipt);
        ak_cpb_set (&e->confirmed_on, confirmed_on ? confirmed_on : "");
    }
    return 0;
}

Ak__ProfileClass *profiles_news_class (Ak__ProfileClass ***news, size_t *nnews, const char *name, const char *cls,
                                      const Ak__Device *dev, const char *backend)
{
    for (size_t c = 0; c < *nnews; c++)
        if (strcmp ((*news)[c]->device_class, cls) == 0)
            return (*news)[c];
    Ak__ProfileClass *pc = profiles_class_new (name, cls, dev, backend);
    *news = ak_realloc (*news, (*nnews + 1) * sizeof **news);
    (*news)[(*nnews)++] = pc;
    return pc;
}

const char *profiles_tune_why (const ak_result_pair_t *pair, const char *task_id, const char *receipt_id,
                               const char *device_class, const ak_result_task_t **rt_p)
{
    *rt_p = NULL;
    for (size_t j = 0; pair && j < pair->ntunes && !*rt_p; j++)
        if (strcmp (pair->tunes[j].task->task_id, task_id) == 0)
            *rt_p = &pair->tunes[j];
    if (!*rt_p || !(*rt_p)->receipt)
        return "the task or its receipt is missing from the store";
    if (strcmp ((*rt_p)->receipt->receipt_id, receipt_id) != 0)
        return "its receipt is no longer the task's accepted one (retried?)";
    if (!profiles_class_valid (device_class))
        return "device class is not a valid name";
    return NULL;
}

const char *profiles_task_load (ak_txn_t *txn, const Ak__TaskRecord *t, ak_spec_t **spec_p,
                                const ak_candidate_t **cand_p, ak_err_t *err)
{
    char *text = NULL, *probe = NULL;
    size_t len = 0, plen = 0;
    const char *why = NULL;
    *spec_p = NULL;
    *cand_p = NULL;
    if (ak_store_get_blob (txn, t->spec_digest, &text, &len, err) != 0)
        why = "the operator spec is missing from the store";
    else
    if (ak_spec_parse_text (text, len, "spec", spec_p, err) != 0)
        why = "the stored operator spec does not parse";
    else
    if (!(*cand_p = ak_spec_candidate (*spec_p, t->candidate_name)))
        why = "the candidate is not in the stored spec";
    else
    if (ak_store_get_blob (txn, t->candidate_digest, &probe, &plen, err) != 0)
        why = "the candidate source is missing from the store";
    free (text);
    free (probe);
    return why;
}

/*  The worker other than the one that measured winner w (its tune receipt
    r) whose confirm task re-measured it and found it promotable (the
    confirmation round decided w: Winner.confirmation set), or NULL; why
    says what is missing when NULL. */
static const char *s_confirmed_on (const ak_result_pair_t *pair, const Ak__Winner *w, const Ak__Receipt *r,
                                   char *why, size_t len)
{
    const char *measured = r->worker_id ? r->worker_id : "";
    if (!w->confirmation || !*w->confirmation) {
        snprintf (why, len, "no confirmation round decided it (policy.confirm off, speedup not above "
                  "policy.implausible)");
        return NULL;
    }
    bool same = false;
    for (size_t k = 0; k < pair->nconfirms; k++) {
        const Ak__TaskRecord *ct = pair->confirms[k].task;
        const Ak__Receipt *cr = pair->confirms[k].receipt;
        if (!ct || !cr || !ct->confirm_of || strcmp (ct->confirm_of, w->task_id) != 0
            || !cr->status || strcmp (cr->status, "ok") != 0 || !cr->worker_id || !*cr->worker_id)
            continue;
        if (strcmp (cr->worker_id, measured) != 0)
            return cr->worker_id;
        same = true;
    }
    if (same)
        snprintf (why, len, "confirmed on %.64s, the worker that measured it (no other live worker of the "
                  "class)", measured);
    else
        snprintf (why, len, "no confirm receipt of task %.64s in the store", w->task_id);
    return NULL;
}

int ak_profiles_install (ak_txn_t *txn, const char *batch_id, const char *name, bool replace,
                         bool unconfirmed, uint64_t now_ms, json_t **out, ak_err_t *err)
{
    if (!ak_profile_name_valid (name))
        return ak_err_set (err, AK_EINVAL, "profile name '%.64s' must be 1..64 of [A-Za-z0-9_.-]", name);
    ak_results_t *res = NULL;
    int rc = ak_results_load (txn, batch_id, &res, err);
    if (rc)
        return rc;
    const Ak__BatchRecord *b = res->batch;
    if (strcmp (b->state, "complete") != 0) {
        rc = ak_err_set (err, AK_ESTATE, "batch %s is %s: winners are installed once it is complete",
                         b->batch_id, b->state);
        ak_results_destroy (&res);
        return rc;
    }
    char prelude_host[65], prelude_cuda[65];
    rc = ak_store_put_blob (txn, ak_prelude, ak_prelude_len, prelude_host, err);
    if (rc == 0)
        rc = ak_store_put_blob (txn, ak_profile_prelude_cuda, ak_profile_prelude_cuda_len, prelude_cuda, err);

    json_t *skipped = json_array ();
    Ak__ProfileClass **news = NULL;
    size_t nnews = 0;
    for (size_t i = 0; rc == 0 && i < b->n_winners; i++) {
        const Ak__Winner *w = b->winners[i];
        const ak_result_pair_t *pair = NULL;
        for (size_t p = 0; p < res->npairs; p++)
            if (strcmp (res->pairs[p].op, w->op) == 0 && strcmp (res->pairs[p].device_class, w->device_class) == 0)
                pair = &res->pairs[p];
        if (!w->promoted) {
            /* the baseline stays: where it is a vendor library, the profile
               says so (profile_vendor.c); a kernel baseline is skipped */
            if (!profiles_vendor_add (txn, pair, w, name, now_ms, &news, &nnews))
                json_array_append_new (skipped, json_pack ("{s:s, s:s, s:s}", "op", w->op,
                    "device_class", w->device_class, "reason",
                    *w->reason ? w->reason : "not promoted: the baseline stays"));
            rc = profiles_picks_add (txn, pair, w, name, unconfirmed, prelude_host, prelude_cuda, now_ms, &news,
                                     &nnews, skipped, err);
            continue;
        }
        const ak_result_task_t *win = NULL;
        const char *why = profiles_tune_why (pair, w->task_id, w->receipt_id, w->device_class, &win);
        const Ak__Receipt *fig = win ? win->receipt : NULL;
        if (win && fig && *w->figures_receipt_id && strcmp (w->figures_receipt_id, w->receipt_id) != 0) {
            fig = NULL;
            for (size_t k = 0; pair && k < pair->nconfirms; k++)
                if (pair->confirms[k].receipt
                    && strcmp (pair->confirms[k].receipt->receipt_id, w->figures_receipt_id) == 0)
                    fig = pair->confirms[k].receipt;
        }
        if (!why && !fig)
            why = "the confirm receipt whose figures the winner reports is missing from the store";
        ak_spec_t *spec = NULL;
        const ak_candidate_t *cand = NULL;
        ak_err_t e2 = { 0 };
        /* one worker's word is not enough for a profile (docs/operations.md,
           "What a worker key may do"): a winner goes in when another worker
           confirmed it, or when the operator says --unconfirmed */
        const char *confirmed_on = NULL;
        char unconf[448], unconf_why[200];
        if (!why && !(confirmed_on = s_confirmed_on (pair, w, win->receipt, unconf_why, sizeof unconf_why))
            && !unconfirmed) {
            snprintf (unconf, sizeof unconf, "not confirmed on another worker: %s; run a second worker of "
                      "the class (the confirmation round re-measures the winner there), or install with "
                      "--unconfirmed", unconf_why);
            why = unconf;
        }
        if (!why)
            why = profiles_task_load (txn, win->task, &spec, &cand, &e2);
        if (why) {
            json_array_append_new (skipped, json_pack ("{s:s, s:s, s:s}", "op", w->op,
                "device_class", w->device_class, "reason", why));
            ak_warn ("profile %s: %s on %s skipped: %s%s%s", name, w->op, w->device_class, why,
                     e2.msg[0] ? ": " : "", e2.msg);
        }
        else {
            const Ak__TaskRecord *t = win->task;
            Ak__ProfileClass *pc = profiles_news_class (&news, &nnews, name, w->device_class, win->receipt->device,
                                                        t->backend);
            const char *pre = pair->preflight.receipt ? pair->preflight.receipt->receipt_id : NULL;
            size_t from = pc->n_entries;
            rc = profiles_entries_for (spec, cand, t, win->receipt, fig, w->speedup, w->noise, NULL, NULL, pre,
                                       strcmp (t->backend, "cuda") == 0 ? prelude_cuda : prelude_host,
                                       confirmed_on, now_ms, pc, err);
            if (rc == 0)
                profiles_winner_trim (pc, from, w, b->policy ? b->policy->threshold : 0.03, name, skipped);
            if (rc == 0 && !confirmed_on)
                ak_warn ("profile %s: %s on %s installed unconfirmed (--unconfirmed): %s", name, w->op,
                         w->device_class, unconf_why);
        }
        ak_spec_destroy (&spec);
        if (rc == 0)
            rc = profiles_picks_add (txn, pair, w, name, unconfirmed, prelude_host, prelude_cuda, now_ms, &news,
                                     &nnews, skipped, err);
    }
    json_t *installed = json_array ();
    if (rc == 0 && nnews == 0) {
        /* say why, with the first skipped winner's reason */
        const json_t *first = json_array_get (skipped, 0);
        const char *op = json_string_value (json_object_get (first, "op"));
        const char *why = json_string_value (json_object_get (first, "reason"));
        rc = ak_err_set (err, AK_EINVAL, "batch %s has no promoted winner to install (%zu skipped%s%.64s%s%.300s)",
                         b->batch_id, json_array_size (skipped), op ? "; " : "", op ? op : "", why ? ": " : "",
                         why ? why : "");
    }
    if (rc == 0)
        rc = profiles_merge (txn, news, nnews, replace, now_ms, installed, err);
    if (rc == 0)
        *out = json_pack ("{s:s, s:s, s:O, s:O}", "profile", name, "batch_id", b->batch_id,
                          "installed", installed, "skipped", skipped);
    json_decref (installed);
    json_decref (skipped);
    profiles_classes_free (news, nnews);
    ak_results_destroy (&res);
    return rc;
}

