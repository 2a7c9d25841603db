/*  coordinator/profile_import.c: ak_profiles_import (profiles.h): a
    package akctl verified ({"profile": profile.json, "sources"}) into
    profile records.  Everything in the package is untrusted: each field is
    checked and a failure names it ("profile.json: classes[0].entries[3].
    launch.grid[1]: ..."); every source must hash to its digest; the
    entries are then merged like an install's (profiles_merge). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profiles.h"
#include "profiles_impl.h"
#include "cpb.h"
#include "digest.h"
#include "dtype.h"
#include "spec.h"
#include "util.h"

static const char *s_jstr (const json_t *o, const char *k)
{
    const char *s = json_string_value (json_object_get (o, k));
    return s ? s : NULL;
}

static int s_u32s (const json_t *arr, uint32_t **v, size_t *n, const char *what, ak_err_t *err)
{
    if (!json_is_array (arr) || json_array_size (arr) < 1 || json_array_size (arr) > 3)
        return ak_err_set (err, AK_EINVAL, "%s: must be 1 to 3 integers", what);
    *v = ak_calloc (3, sizeof **v);
    *n = json_array_size (arr);
    for (size_t i = 0; i < *n; i++) {
        json_t *x = json_array_get (arr, i);
        if (!json_is_integer (x) || json_integer_value (x) < 1 || json_integer_value (x) > 2147483647)
            return ak_err_set (err, AK_EINVAL, "%s[%zu]: must be 1..2147483647", what, i);
        (*v)[i] = (uint32_t) json_integer_value (x);
    }
    return 0;
}

static int s_buffers_from (const json_t *arr, Ak__ProfileBuffer ***v, size_t *n, const char *what, ak_err_t *err)
{
    if (!json_is_array (arr) || json_array_size (arr) > AK_MAX_BUFS)
        return ak_err_set (err, AK_EINVAL, "%s: must be an array of at most %d buffers", what, AK_MAX_BUFS);
    *v = ak_calloc (json_array_size (arr) + 1, sizeof **v);
    for (size_t i = 0; i < json_array_size (arr); i++) {
        json_t *b = json_array_get (arr, i);
        json_t *c = json_object_get (b, "count");
        if (!s_jstr (b, "name") || !json_is_integer (c) || json_integer_value (c) < 1)
            return ak_err_set (err, AK_EINVAL, "%s[%zu]: needs a name and a positive count", what, i);
        Ak__ProfileBuffer *pb = ak_malloc (sizeof *pb);
        ak__profile_buffer__init (pb);
        ak_cpb_set (&pb->name, s_jstr (b, "name"));
        pb->count = json_integer_value (c);
        (*v)[(*n)++] = pb;
    }
    return 0;
}

/* The kernel of entry j (source, prelude, launch, buffers) into e. */
static int s_kernel_from (const json_t *j, const json_t *sources, Ak__ProfileEntry *e, const char *at,
                          ak_err_t *err);

/* One entry of profile.json into e (already in its class record, so the
   caller frees it whatever happens).  "kind" absent is a kernel (profiles
   made before kinds); a vendor entry has no kernel (profile_vendor.c). */
static int s_entry_from (const json_t *j, const json_t *sources, Ak__ProfileEntry *e,
                         const char *at, ak_err_t *err)
{
    const json_t *kind = json_object_get (j, "kind");
    const char *ks = json_string_value (kind);
    if (kind && (!ks || (strcmp (ks, AK_PROFILE_KIND_KERNEL) != 0 && strcmp (ks, AK_PROFILE_KIND_VENDOR) != 0)))
        return ak_err_set (err, AK_EINVAL, "%s.kind: unknown kind '%.32s' (kernel or vendor)", at,
                           ks ? ks : "(not a string)");
    bool vendor = ks && strcmp (ks, AK_PROFILE_KIND_VENDOR) == 0;
    /* a vendor entry's candidate is the best one that did not win: optional */
    static const char *const strs[] = { "op", "dtype", "backend", "candidate", "entry" };
    for (size_t i = 0; i < (vendor ? 3 : sizeof strs / sizeof strs[0]); i++)
        if (!s_jstr (j, strs[i]) || !*s_jstr (j, strs[i]))
            return ak_err_set (err, AK_EINVAL, "%s.%s: must be a non-empty string", at, strs[i]);
    if (vendor && json_object_get (j, "candidate") && !json_is_string (json_object_get (j, "candidate")))
        return ak_err_set (err, AK_EINVAL, "%s.candidate: must be a string", at);
    const char *backend = s_jstr (j, "backend");
    if (strcmp (backend, "cuda") != 0 && strcmp (backend, "host") != 0)
        return ak_err_set (err, AK_EINVAL, "%s.backend: must be cuda or host", at);
    ak_dtype_t dt;
    if (ak_dtype_parse (s_jstr (j, "dtype"), &dt) != 0)
        return ak_err_set (err, AK_EINVAL, "%s.dtype: unknown dtype", at);
    ak_cpb_set (&e->op, s_jstr (j, "op"));
    ak_cpb_set (&e->dtype, s_jstr (j, "dtype"));
    ak_cpb_set (&e->candidate_name, s_jstr (j, "candidate"));
    ak_cpb_set (&e->backend, backend);
    ak_cpb_set (&e->workload_name, s_jstr (j, "workload"));
    const json_t *keys = json_object_get (j, "keys"), *dims = json_object_get (j, "dims");
    size_t nk = json_array_size (keys);
    if (!json_is_array (keys) || !json_is_array (dims) || nk < 1 || nk > AK_MAX_DIMS
        || json_array_size (dims) != nk)
        return ak_err_set (err, AK_EINVAL, "%s: keys and dims must be arrays of the same length, 1..%d",
                           at, AK_MAX_DIMS);
    e->keys = ak_calloc (nk + 1, sizeof *e->keys);
    e->dims = ak_calloc (nk + 1, sizeof *e->dims);
    for (size_t i = 0; i < nk; i++) {
        const char *k = json_string_value (json_array_get (keys, i));
        json_t *d = json_array_get (dims, i);
        if (!k || !json_is_integer (d) || json_integer_value (d) < 1)
            return ak_err_set (err, AK_EINVAL, "%s: keys[%zu]/dims[%zu]: need a name and a positive size", at, i, i);
        e->keys[e->n_keys++] = ak_strdup (k);
        e->dims[e->n_dims++] = json_integer_value (d);
    }
    char *key = profiles_entry_key (e->op, e->keys, e->dims, nk, e->dtype);
    const char *given = s_jstr (j, "key");
    if (!given || strcmp (given, key) != 0) {
        int rc = ak_err_set (err, AK_EINVAL, "%s.key: '%.200s' does not match its op, shape and dtype ('%.200s')",
                             at, given ? given : "", key);
        free (key);
        return rc;
    }
    ak_cpb_set (&e->key, key);
    free (key);
    const json_t *params = json_object_get (j, "params");
    if (!json_is_array (params) || json_array_size (params) > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "%s.params: must be an array", at);
    e->params = ak_calloc (json_array_size (params) + 1, sizeof *e->params);
    for (size_t i = 0; i < json_array_size (params); i++) {
        json_t *p = json_array_get (params, i);
        if (!s_jstr (p, "name") || !json_is_integer (json_object_get (p, "value")))
            return ak_err_set (err, AK_EINVAL, "%s.params[%zu]: needs name and integer value", at, i);
        Ak__Param *pp = ak_malloc (sizeof *pp);
        ak__param__init (pp);
        ak_cpb_set (&pp->name, s_jstr (p, "name"));
        pp->value = json_integer_value (json_object_get (p, "value"));
        e->params[e->n_params++] = pp;
    }
    if (s_jstr (j, "confirmed_on"))
        ak_cpb_set (&e->confirmed_on, s_jstr (j, "confirmed_on"));
    int rc = vendor ? profiles_vendor_from (j, e, at, err) : s_kernel_from (j, sources, e, at, err);
    if (rc)
        return rc;
    e->speedup = json_number_value (json_object_get (j, "speedup"));
    e->noise = json_number_value (json_object_get (j, "noise"));
    e->op_speedup = json_number_value (json_object_get (j, "op_speedup"));
    e->op_noise = json_number_value (json_object_get (j, "op_noise"));
    e->baseline_us = json_number_value (json_object_get (j, "baseline_us"));
    e->candidate_us = json_number_value (json_object_get (j, "candidate_us"));
    const json_t *ev = json_object_get (j, "evidence");
    e->evidence = ak_calloc (json_array_size (ev) + 1, sizeof *e->evidence);
    for (size_t i = 0; i < json_array_size (ev); i++)
        if (json_string_value (json_array_get (ev, i)))
            e->evidence[e->n_evidence++] = ak_strdup (json_string_value (json_array_get (ev, i)));
    ak_cpb_set (&e->batch_id, s_jstr (j, "batch_id"));
    ak_cpb_set (&e->task_id, s_jstr (j, "task_id"));
    json_t *im = json_object_get (j, "installed_ms");
    e->installed_ms = json_is_integer (im) && json_integer_value (im) > 0 ? (uint64_t) json_integer_value (im) : 0;
    return 0;
}

static int s_kernel_from (const json_t *j, const json_t *sources, Ak__ProfileEntry *e, const char *at,
                          ak_err_t *err)
{
    const char *backend = e->backend;
    ak_cpb_set (&e->entry, s_jstr (j, "entry"));
    const char *src = s_jstr (json_object_get (j, "source"), "digest");
    const char *pre = s_jstr (json_object_get (j, "prelude"), "digest");
    if (!src || !ak_digest_valid (src) || !json_is_string (json_object_get (sources, src)))
        return ak_err_set (err, AK_EINVAL, "%s.source.digest: missing or not among the package's sources", at);
    if (!pre || !ak_digest_valid (pre) || !json_is_string (json_object_get (sources, pre)))
        return ak_err_set (err, AK_EINVAL, "%s.prelude.digest: missing or not among the package's sources", at);
    ak_cpb_set (&e->source_digest, src);
    ak_cpb_set (&e->prelude_digest, pre);
    ak_cpb_set (&e->source_name, s_jstr (json_object_get (j, "source"), "name"));
    if (s_jstr (j, "arch"))
        ak_cpb_set (&e->arch, s_jstr (j, "arch"));
    const json_t *launch = json_object_get (j, "launch");
    int rc = 0;
    if (strcmp (backend, "cuda") == 0) {
        if (!json_is_object (launch))
            return ak_err_set (err, AK_EINVAL, "%s.launch: a cuda entry needs its launch configuration", at);
        e->launch = ak_malloc (sizeof *e->launch);
        ak__launch_config__init (e->launch);
        char what[300];
        snprintf (what, sizeof what, "%s.launch.grid", at);
        rc = s_u32s (json_object_get (launch, "grid"), &e->launch->grid, &e->launch->n_grid, what, err);
        snprintf (what, sizeof what, "%s.launch.block", at);
        if (rc == 0)
            rc = s_u32s (json_object_get (launch, "block"), &e->launch->block, &e->launch->n_block, what, err);
        json_t *sh = json_object_get (launch, "shared_bytes");
        if (rc == 0 && (!json_is_integer (sh) || json_integer_value (sh) < 0 || json_integer_value (sh) > 2147483647))
            rc = ak_err_set (err, AK_EINVAL, "%s.launch.shared_bytes: must be 0..2147483647", at);
        if (rc == 0)
            e->launch->shared_bytes = (uint32_t) json_integer_value (sh);
        json_t *cl = json_object_get (launch, "cluster"), *tm = json_object_get (launch, "tensor_maps");
        snprintf (what, sizeof what, "%s.launch.cluster", at);
        if (rc == 0 && cl)
            rc = s_u32s (cl, &e->launch->cluster, &e->launch->n_cluster, what, err);
        if (rc == 0 && tm && (!json_is_integer (tm) || json_integer_value (tm) < 0 || json_integer_value (tm) > 8))
            rc = ak_err_set (err, AK_EINVAL, "%s.launch.tensor_maps: must be 0..8", at);
        if (rc == 0 && tm)
            e->launch->tensor_maps = (uint32_t) json_integer_value (tm);
    }
    else
    if (launch && !json_is_null (launch))
        return ak_err_set (err, AK_EINVAL, "%s.launch: only cuda entries have one", at);
    char what[300];
    snprintf (what, sizeof what, "%s.inputs", at);
    if (rc == 0)
        rc = s_buffers_from (json_object_get (j, "inputs"), &e->inputs, &e->n_inputs, what, err);
    snprintf (what, sizeof what, "%s.outputs", at);
    if (rc == 0)
        rc = s_buffers_from (json_object_get (j, "outputs"), &e->outputs, &e->n_outputs, what, err);
    if (rc == 0 && e->launch) {
        int64_t in_counts[AK_MAX_BUFS], out_counts[AK_MAX_BUFS];
        for (size_t i = 0; i < e->n_inputs; i++)
            in_counts[i] = e->inputs[i]->count;
        for (size_t i = 0; i < e->n_outputs; i++)
            out_counts[i] = e->outputs[i]->count;
        snprintf (what, sizeof what, "%s.launch", at);
        rc = profiles_tmaps_from_json (json_object_get (launch, "maps"), e->launch, in_counts, e->n_inputs,
                                       out_counts, e->n_outputs, what, err);
    }
    return rc;
}

int ak_profiles_import (ak_txn_t *txn, const json_t *package, const char *name, bool replace,
                        uint64_t now_ms, json_t **out, ak_err_t *err)
{
    const json_t *prof = json_object_get (package, "profile");
    const json_t *sources = json_object_get (package, "sources");
    if (!json_is_object (prof) || !json_is_object (sources))
        return ak_err_set (err, AK_EINVAL, "import: the body must be {\"profile\": {...}, \"sources\": {...}}");
    json_t *sv = json_object_get (prof, "schema_version");
    if (!json_is_integer (sv) || json_integer_value (sv) != 1)
        return ak_err_set (err, AK_EVERSION, "profile.json: schema_version: must be 1");
    if (!s_jstr (prof, "format") || strcmp (s_jstr (prof, "format"), AK_PROFILE_FORMAT) != 0)
        return ak_err_set (err, AK_EINVAL, "profile.json: format: must be \"%s\"", AK_PROFILE_FORMAT);
    if (!name)
        name = s_jstr (prof, "profile");
    if (!ak_profile_name_valid (name))
        return ak_err_set (err, AK_EINVAL, "profile name '%.64s' must be 1..64 of [A-Za-z0-9_.-]",
                           name ? name : "");
    /* every source must be what its digest says */
    const char *digest;
    json_t *text;
    int rc = 0;
    json_object_foreach ((json_t *) sources, digest, text) {
        char hex[65], stored[65];
        if (!json_is_string (text) || !ak_digest_valid (digest))
            return ak_err_set (err, AK_EINVAL, "import: sources.%.70s: must be text under its sha256", digest);
        ak_sha256_hex (json_string_value (text), json_string_length (text), hex);
        if (strcmp (hex, digest) != 0)
            return ak_err_set (err, AK_EINVAL, "import: sources.%.70s: the text's sha256 is %s", digest, hex);
        rc = ak_store_put_blob (txn, json_string_value (text), json_string_length (text), stored, err);
        if (rc)
            return rc;
    }
    const json_t *classes = json_object_get (prof, "classes");
    if (!json_is_array (classes) || json_array_size (classes) == 0)
        return ak_err_set (err, AK_EINVAL, "profile.json: classes: must be a non-empty array");
    Ak__ProfileClass **news = ak_calloc (json_array_size (classes) + 1, sizeof *news);
    size_t nnews = 0;
    for (size_t c = 0; rc == 0 && c < json_array_size (classes); c++) {
        const json_t *cj = json_array_get (classes, c);
        const json_t *dev = json_object_get (cj, "device");
        const char *cls = s_jstr (cj, "device_class");
        if (!profiles_class_valid (cls)) {
            rc = ak_err_set (err, AK_EINVAL, "profile.json: classes[%zu].device_class: must be [A-Za-z0-9_./-]+", c);
            break;
        }
        for (size_t k = 0; k < nnews; k++)
            if (strcmp (news[k]->device_class, cls) == 0)
                rc = ak_err_set (err, AK_EINVAL, "profile.json: classes[%zu]: class %s listed twice", c, cls);
        if (rc)
            break;
        Ak__ProfileClass *pc = profiles_class_new (name, cls, NULL, s_jstr (cj, "backend"));
        news[nnews++] = pc;
        ak_cpb_set (&pc->device_name, s_jstr (dev, "name"));
        pc->cc_major = (uint32_t) json_integer_value (json_object_get (dev, "cc_major"));
        pc->cc_minor = (uint32_t) json_integer_value (json_object_get (dev, "cc_minor"));
        pc->driver_major = (uint32_t) json_integer_value (json_object_get (dev, "driver_major"));
        ak_cpb_set (&pc->driver_version, s_jstr (dev, "driver_version"));
        ak_cpb_set (&pc->nvrtc_version, s_jstr (dev, "nvrtc_version"));
        const json_t *entries = json_object_get (cj, "entries");
        if (!json_is_array (entries) || json_array_size (entries) > PROFILES_MAX_ENTRIES) {
            rc = ak_err_set (err, AK_EINVAL, "profile.json: classes[%zu].entries: must be an array", c);
            break;
        }
        for (size_t i = 0; rc == 0 && i < json_array_size (entries); i++) {
            char at[96];
            snprintf (at, sizeof at, "profile.json: classes[%zu].entries[%zu]", c, i);
            Ak__ProfileEntry *e = ak_malloc (sizeof *e);
            ak__profile_entry__init (e);
            profiles_class_add (pc, e);
            rc = s_entry_from (json_array_get (entries, i), sources, e, at, err);
            for (size_t k = 0; rc == 0 && k + 1 < pc->n_entries; k++)
                if (strcmp (pc->entries[k]->key, e->key) == 0)
                    rc = ak_err_set (err, AK_EINVAL, "%s: key %s appears twice", at, e->key);
        }
    }
    json_t *installed = json_array ();
    if (rc == 0)
        rc = profiles_merge (txn, news, nnews, replace, now_ms, installed, err);
    if (rc == 0)
        *out = json_pack ("{s:s, s:O, s:[]}", "profile", name, "installed", installed, "skipped");
    json_decref (installed);
    profiles_classes_free (news, nnews);
    return rc;
}
