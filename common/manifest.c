/*  common/manifest.c: batch manifests and bundles (manifest.h,
    docs/formats.md).

    A manifest is read like a spec (spec.c): unknown fields are errors,
    every count is bounded, every message names the file and the JSON path.
    Its op entries reuse the spec grammar (candidates, tolerances, shapes)
    through spec.h; corpora are read by corpus.c, the policy by policy.c.

    Never here: reading a file while parsing a bundle, or keeping a pointer
    into a json_t past the parse. */
#include "manifest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "jpath.h"
#include "space.h"
#include "spec_cuda.h"
#include "util.h"

#define S_MAX_OPS         256
#define S_MAX_TARGETS     256
#define S_MAX_WORKLOADS   4096

const char *ak_class_backend (const char *device_class)
{
    return ak_streq (device_class, "host") ? "host" : "cuda";
}

/* ============================================================== manifests */

void ak_manifest_destroy (ak_manifest_t **self_p)
{
    if (self_p && *self_p) {
        ak_manifest_t *self = *self_p;
        free (self->name);
        for (size_t i = 0; i < self->ntargets; i++)
            free (self->targets[i]);
        free (self->targets);
        for (size_t i = 0; i < self->nops; i++) {
            ak_manifest_op_t *op = &self->ops[i];
            ak_spec_destroy (&op->spec);
            for (size_t w = 0; w < op->nworkloads; w++)
                free (op->workloads[w].name);
            free (op->workloads);
            for (size_t c = 0; c < op->ncandidates; c++)
                free (op->candidates[c]);
            free (op->candidates);
            free (op->spec_path);
            free (op->corpus_path);
        }
        free (self->ops);
        free (self);
        *self_p = NULL;
    }
}

/* -------------------------------------------------------------- workloads */

/*  One workload: a size name, or {name?, size?, dtype?, weight?}. */
static int s_parse_workload (json_t *v, ak_manifest_op_t *op, size_t index, const char *label,
                             const char *path, ak_workload_t *wl, ak_err_t *err)
{
    static const char *const fields[] = { "name", "size", "dtype", "weight", NULL };
    const ak_spec_t *spec = op->spec;
    char p[AK_JPATH_MAX], shown[72];
    const char *name = NULL, *dtype = NULL;
    json_t *size = NULL, *weight = NULL;
    int rc;

    wl->dtype = spec->dtypes[0];
    wl->weight = 1;
    if (json_is_string (v)) {
        if ((rc = ak_jpath_str (v, label, path, &name, err)) != 0)
            return rc;
    }
    else if (json_is_object (v)) {
        if ((rc = ak_jpath_only (v, fields, label, path, err)) != 0
         || (rc = ak_jpath_get_str (v, "name", false, label, path, &name, err)) != 0
         || (rc = ak_jpath_get (v, "size", JSON_OBJECT, false, label, path, &size, err)) != 0
         || (rc = ak_jpath_get_str (v, "dtype", false, label, path, &dtype, err)) != 0
         || (rc = ak_jpath_get (v, "weight", JSON_REAL, false, label, path, &weight, err)) != 0)
            return rc;
    }
    else
        return ak_jpath_bad (err, label, path, "must be a size name or an object");

    const ak_size_t *named = name ? ak_spec_size (spec, name) : NULL;
    if (size) {
        if (name && !ak_name_label_ok (name, false))
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, "name"),
                                 "must match [a-z0-9_-]+ (at most %d characters)", AK_MAX_NAME - 1);
        rc = ak_spec_parse_shape (size, spec, label, ak_jpath_field (p, path, "size"), wl->dims, err);
        if (rc)
            return rc;
        if (named && memcmp (named->dims, wl->dims, sizeof wl->dims) != 0)
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, "name"),
                                 "'%s' is a size of %s with a different shape", name, spec->name);
        wl->name = name ? ak_strdup (name) : ak_sprintf ("custom-%zu", index);
    }
    else {
        const char *where = json_is_string (v) ? path : ak_jpath_field (p, path, "name");
        if (!name)
            return ak_jpath_bad (err, label, where, "missing (a workload names a size or gives one)");
        if (!named) {
            char have[512];
            size_t n = 0;
            have[0] = '\0';
            for (size_t i = 0; i < spec->nsizes + spec->nedge && n < sizeof have; i++) {
                const ak_size_t *sz = i < spec->nsizes ? &spec->sizes[i]
                                                       : &spec->edge_sizes[i - spec->nsizes];
                int w = snprintf (have + n, sizeof have - n, "%s%s", i ? ", " : "", sz->name);
                if (w < 0)
                    break;
                n += (size_t) w;
            }
            return ak_jpath_bad (err, label, where, "unknown size '%s' (%s has: %s)",
                                 ak_jpath_show (name, shown), spec->name, have);
        }
        memcpy (wl->dims, named->dims, sizeof wl->dims);
        wl->name = ak_strdup (name);
    }
    if (dtype) {
        ak_jpath_field (p, path, "dtype");
        if (ak_dtype_parse (dtype, &wl->dtype))
            return ak_jpath_bad (err, label, p, "unknown dtype (float16, bfloat16, float32)");
        if (!ak_spec_has_dtype (spec, wl->dtype))
            return ak_jpath_bad (err, label, p, "dtype not declared in %s's dtypes", spec->name);
    }
    if (weight) {
        wl->weight = json_number_value (weight);
        if (!isfinite (wl->weight) || wl->weight <= 0)
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, "weight"),
                                 "must be a finite number > 0");
    }
    return ak_spec_check_shape (spec, wl->dims, label, path, err);
}

static int s_parse_workloads (json_t *opj, ak_manifest_op_t *op, const char *label,
                              const char *path, ak_err_t *err)
{
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *arr;
    int rc = ak_jpath_get (opj, "workloads", JSON_ARRAY, false, label, path, &arr, err);
    if (rc)
        return rc;
    const ak_spec_t *spec = op->spec;
    ak_jpath_field (p, path, "workloads");
    if (!arr) {
        op->workloads = ak_calloc (spec->nsizes, sizeof *op->workloads);
        for (size_t i = 0; i < spec->nsizes; i++) {
            if (spec->sizes[i].backends)      /* backend-only sizes are named on purpose */
                continue;
            ak_workload_t *wl = &op->workloads[op->nworkloads++];
            wl->name = ak_strdup (spec->sizes[i].name);
            memcpy (wl->dims, spec->sizes[i].dims, sizeof wl->dims);
            wl->dtype = spec->dtypes[0];
            wl->weight = 1;
        }
        return 0;
    }
    size_t n = json_array_size (arr);
    if (n == 0 || n > S_MAX_WORKLOADS)
        return ak_jpath_bad (err, label, p, "must list 1 to %d workloads", S_MAX_WORKLOADS);
    op->workloads = ak_calloc (n, sizeof *op->workloads);
    for (size_t i = 0; i < n; i++) {
        ak_workload_t *wl = &op->workloads[op->nworkloads++];
        ak_jpath_index (q, p, i);
        rc = s_parse_workload (json_array_get (arr, i), op, i, label, q, wl, err);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++) {
            const ak_workload_t *o = &op->workloads[j];
            if (o->dtype != wl->dtype)
                continue;
            if (ak_streq (o->name, wl->name))
                return ak_jpath_bad (err, label, q, "duplicate workload '%s' %s (also workloads[%zu])",
                                     wl->name, ak_dtype_name (wl->dtype), j);
            if (memcmp (o->dims, wl->dims, sizeof wl->dims) == 0)
                return ak_jpath_bad (err, label, q, "same shape and dtype as workloads[%zu] ('%s')",
                                     j, o->name);
        }
    }
    return 0;
}

/*  "corpus": a shape corpus file (relative to the manifest) whose cases
    become workloads after the listed ones, or instead of the spec's sizes
    when the op lists none.  Not in a bundle: there its cases are inline
    workloads already. */
static int s_parse_corpus (json_t *opj, ak_manifest_op_t *op, const char *label,
                           const char *path, const char *base_dir, ak_err_t *err)
{
    char p[AK_JPATH_MAX], shown[72];
    const char *rel;
    int rc = ak_jpath_get_str (opj, "corpus", false, label, path, &rel, err);
    if (rc || !rel)
        return rc;
    ak_jpath_field (p, path, "corpus");
    if (!base_dir)
        return ak_jpath_bad (err, label, p, "a bundle carries workloads, not a corpus file ('%s')",
                             ak_jpath_show (rel, shown));
    if (!*rel)
        return ak_jpath_bad (err, label, p, "must be a file path");
    op->corpus_path = ak_path_join (base_dir, rel);
    ak_corpus_t *corpus = NULL;
    if ((rc = ak_corpus_load (op->corpus_path, op->spec, &corpus, err)) != 0)
        return ak_err_prefix (err, "%s: %s", label, p);
    if (!json_object_get (opj, "workloads")) {
        for (size_t w = 0; w < op->nworkloads; w++)
            free (op->workloads[w].name);
        op->nworkloads = 0;
    }
    if (op->nworkloads + corpus->ncases > S_MAX_WORKLOADS) {
        ak_corpus_destroy (&corpus);
        return ak_jpath_bad (err, label, p, "more than %d workloads in all", S_MAX_WORKLOADS);
    }
    op->workloads = ak_realloc (op->workloads, (op->nworkloads + corpus->ncases)
                                               * sizeof *op->workloads);
    for (size_t i = 0; i < corpus->ncases && rc == 0; i++) {
        const ak_corpus_case_t *c = &corpus->cases[i];
        char where[AK_JPATH_MAX * 2];
        snprintf (where, sizeof where, "%s (%s: cases[%zu])", p,
                  ak_jpath_show (op->corpus_path, shown), i);
        for (size_t j = 0; j < op->nworkloads && rc == 0; j++) {
            const ak_workload_t *o = &op->workloads[j];
            if (o->dtype == c->dtype && (ak_streq (o->name, c->name)
                                         || memcmp (o->dims, c->dims, sizeof c->dims) == 0))
                rc = ak_jpath_bad (err, label, where, "case '%s' %s is workloads[%zu] ('%s') again",
                                   c->name, ak_dtype_name (c->dtype), j, o->name);
        }
        if (rc == 0)
            rc = ak_spec_check_shape (op->spec, c->dims, label, where, err);
        if (rc == 0) {
            ak_workload_t *wl = &op->workloads[op->nworkloads++];
            wl->name = ak_strdup (c->name);
            memcpy (wl->dims, c->dims, sizeof wl->dims);
            wl->dtype = c->dtype;
            wl->weight = c->weight;
        }
    }
    ak_corpus_destroy (&corpus);
    return rc;
}

/* -------------------------------------------------------------------- ops */

static bool s_targets_backend (const ak_manifest_t *m, const char *backend)
{
    for (size_t i = 0; i < m->ntargets; i++)
        if (ak_streq (ak_class_backend (m->targets[i]), backend))
            return true;
    return false;
}

static bool s_selected (const ak_manifest_op_t *op, const char *name)
{
    for (size_t i = 0; i < op->ncandidates; i++)
        if (ak_streq (op->candidates[i], name))
            return true;
    return false;
}

/*  Every source of the spec carries its text (a manifest or bundle must be
    complete; only worker-side specs omit sources). */
static int s_spec_complete (const ak_spec_t *spec, const char *label, const char *path,
                            ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    if (!spec->reference.text)
        return ak_jpath_bad (err, label, path, "reference: source text missing");
    if (spec->reference_cuda.name && !spec->reference_cuda.text)
        return ak_jpath_bad (err, label, path, "reference_cuda.source: source text missing");
    for (size_t i = 0; i < spec->nbaselines; i++)
        if (!spec->baselines[i].source.text)
            return ak_jpath_bad (err, label, path, "%s.source: source text missing",
                                 ak_jpath_index (p, "baselines", i));
    for (size_t i = 0; i < spec->ncandidates; i++)
        if (!spec->candidates[i].source.text)
            return ak_jpath_bad (err, label, path, "%s.source: source text missing",
                                 ak_jpath_index (p, "candidates", i));
    return 0;
}

/*  One op: its spec (file path when base_dir is set, else inline), extra
    candidates, selected candidates, tolerance overrides and workloads. */
static int s_parse_op (json_t *opj, ak_manifest_t *m, size_t index, const char *label,
                       const char *base_dir, ak_manifest_op_t *op, ak_err_t *err)
{
    static const char *const fields[] = {
        "spec", "workloads", "candidates", "extra_candidates", "tolerances", "profile",
        "corpus", "override_builtin", NULL };
    char path[AK_JPATH_MAX], p[AK_JPATH_MAX], q[AK_JPATH_MAX], shown[72];
    json_t *v;
    int rc;

    ak_jpath_index (path, "ops", index);
    if (!json_is_object (opj))
        return ak_jpath_bad (err, label, path, "must be an object");
    if ((rc = ak_jpath_only (opj, fields, label, path, err)) != 0)
        return rc;

    /* spec */
    ak_jpath_field (p, path, "spec");
    v = json_object_get (opj, "spec");
    if (!v)
        return ak_jpath_bad (err, label, p, "missing");
    if (json_is_string (v)) {
        const char *rel;
        if ((rc = ak_jpath_str (v, label, p, &rel, err)) != 0)
            return rc;
        if (!base_dir)
            return ak_jpath_bad (err, label, p, "a bundle must carry the spec inline, "
                                 "not a file path ('%s')", ak_jpath_show (rel, shown));
        if (!*rel)
            return ak_jpath_bad (err, label, p, "must be a file path or an inline spec");
        op->spec_path = ak_path_join (base_dir, rel);
        rc = ak_spec_load (op->spec_path, &op->spec, err);
        if (rc)
            return ak_err_prefix (err, "%s: %s", label, p);
    }
    else if (json_is_object (v)) {
        char sublabel[AK_JPATH_MAX * 2];
        snprintf (sublabel, sizeof sublabel, "%s: %s", label, p);
        rc = ak_spec_parse (v, sublabel, base_dir, &op->spec, err);
        if (rc)
            return rc;
    }
    else
        return ak_jpath_bad (err, label, p, "must be a file path or an inline spec object");
    ak_spec_t *spec = op->spec;
    if ((rc = s_spec_complete (spec, label, p, err)) != 0)
        return rc;
    for (size_t i = 0; i < index; i++)
        if (ak_streq (m->ops[i].spec->name, spec->name))
            return ak_jpath_bad (err, label, p, "operator '%s' is already in ops[%zu]", spec->name, i);
    for (size_t t = 0; t < m->ntargets; t++) {
        const char *backend = ak_class_backend (m->targets[t]);
        const ak_baseline_t *bl = ak_spec_baseline (spec, backend);
        int major, minor;
        if (!bl)
            return ak_jpath_bad (err, label, p, "%s has no baseline for backend '%s' "
                                 "(needed by target '%s')", spec->name, backend, m->targets[t]);
        ak_err_t sub = { 0 };
        if (bl->arch && ak_class_cc (m->targets[t], &major, &minor)
            && ak_arch_check (bl->arch, major, minor, &sub) != 0)
            return ak_jpath_bad (err, label, p, "%s's baseline cannot run on target '%s': %s", spec->name,
                                 m->targets[t], sub.msg);
    }

    /* extra_candidates: appended to the spec, always selected. */
    size_t nspec = spec->ncandidates;
    if ((rc = ak_jpath_get (opj, "extra_candidates", JSON_ARRAY, false, label, path, &v, err)) != 0)
        return rc;
    size_t nextra = v ? json_array_size (v) : 0;
    ak_jpath_field (p, path, "extra_candidates");
    if (nspec + nextra > AK_SPEC_MAX_CANDIDATES)
        return ak_jpath_bad (err, label, p, "more than %d candidates in all", AK_SPEC_MAX_CANDIDATES);
    if (nextra) {
        spec->candidates = ak_realloc (spec->candidates, (nspec + nextra) * sizeof *spec->candidates);
        memset (spec->candidates + nspec, 0, nextra * sizeof *spec->candidates);
    }
    for (size_t i = 0; i < nextra; i++) {
        ak_candidate_t *cand = &spec->candidates[spec->ncandidates++];
        ak_jpath_index (q, p, i);
        rc = ak_spec_parse_candidate (json_array_get (v, i), spec, label, q, base_dir, false, cand, err);
        if (rc)
            return rc;
        for (size_t j = 0; j + 1 < spec->ncandidates; j++)
            if (ak_streq (spec->candidates[j].name, cand->name))
                return ak_jpath_bad (err, label, ak_jpath_field (p, q, "name"),
                                     "'%s' is already a candidate of %s", cand->name, spec->name);
    }

    /* candidates: a subset by name; default all whose backend a target runs. */
    if ((rc = ak_jpath_get (opj, "candidates", JSON_ARRAY, false, label, path, &v, err)) != 0)
        return rc;
    ak_jpath_field (p, path, "candidates");
    op->candidates = ak_calloc (spec->ncandidates ? spec->ncandidates : 1, sizeof *op->candidates);
    if (v) {
        size_t i;
        json_t *e;
        if (json_array_size (v) > spec->ncandidates)
            return ak_jpath_bad (err, label, p, "more names than %s has candidates", spec->name);
        json_array_foreach (v, i, e) {
            const char *name;
            ak_jpath_index (q, p, i);
            if ((rc = ak_jpath_str (e, label, q, &name, err)) != 0)
                return rc;
            const ak_candidate_t *cand = ak_spec_candidate (spec, name);
            if (!cand)
                return ak_jpath_bad (err, label, q, "unknown candidate '%s' of %s",
                                     ak_jpath_show (name, shown), spec->name);
            if (s_selected (op, name))
                return ak_jpath_bad (err, label, q, "duplicate candidate '%s'", name);
            op->candidates[op->ncandidates++] = ak_strdup (name);
        }
    }
    for (size_t i = v ? nspec : 0; i < spec->ncandidates; i++) {
        const ak_candidate_t *cand = &spec->candidates[i];
        bool extra = i >= nspec;
        if (!s_targets_backend (m, cand->backend) && !extra)
            continue;
        if (!s_selected (op, cand->name))
            op->candidates[op->ncandidates++] = ak_strdup (cand->name);
    }
    for (size_t i = 0; i < op->ncandidates; i++) {
        const ak_candidate_t *cand = ak_spec_candidate (spec, op->candidates[i]);
        if (!s_targets_backend (m, cand->backend))
            return ak_jpath_bad (err, label, p, "candidate '%s' is for backend '%s', which no target "
                                 "runs", cand->name, cand->backend);
    }

    /* tolerances: overrides per declared dtype. */
    if ((rc = ak_jpath_get (opj, "tolerances", JSON_OBJECT, false, label, path, &v, err)) != 0)
        return rc;
    if (v) {
        bool seen[AK_DT_COUNT] = { false };
        ak_tol_t tol[AK_DT_COUNT];
        memcpy (tol, spec->tol, sizeof tol);
        rc = ak_spec_parse_tols (v, spec, label, ak_jpath_field (p, path, "tolerances"), tol, seen, err);
        if (rc)
            return rc;
        memcpy (spec->tol, tol, sizeof tol);
    }
    /* profile: CUPTI range-profiler tasks for the baseline and every
       selected configuration, on cuda targets (docs/formats.md). */
    v = json_object_get (opj, "profile");
    if (v && !json_is_boolean (v))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "profile"), "must be true or false");
    op->profile = v && json_is_true (v);
    /* override_builtin: recorded; whether it overrides anything is for
       the catalog check (ak_catalog_check), which knows the catalog. */
    v = json_object_get (opj, "override_builtin");
    if (v && !json_is_boolean (v))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "override_builtin"),
                             "must be true or false");
    op->override_builtin = v && json_is_true (v);
    if ((rc = s_parse_workloads (opj, op, label, path, err)) != 0
     || (rc = s_parse_corpus (opj, op, label, path, base_dir, err)) != 0)
        return rc;
    /* A size meant for some backends is not timed on the others. */
    char wp[AK_JPATH_MAX], wq[AK_JPATH_MAX];
    for (size_t w = 0; w < op->nworkloads; w++) {
        const ak_size_t *z = ak_spec_size (spec, op->workloads[w].name);
        if (!z || !z->backends)
            continue;
        for (size_t t = 0; t < m->ntargets; t++)
            if (!ak_size_for_backend (z, ak_class_backend (m->targets[t])))
                return ak_jpath_bad (err, label, ak_jpath_index (wq, ak_jpath_field (wp, path, "workloads"), w),
                                     "size '%s' is not for backend %s (target '%s')", z->name,
                                     ak_class_backend (m->targets[t]), m->targets[t]);
    }
    return 0;
}

/*  The manifest object into m (which the caller destroys on failure);
    base_dir NULL for a bundle. */
static int s_manifest_parse (json_t *root, const char *label, const char *base_dir,
                             ak_manifest_t *m, ak_err_t *err)
{
    static const char *const fields[] = {
        "schema_version", "name", "targets", "policy", "ops", NULL };
    char p[AK_JPATH_MAX];
    json_t *v, *e;
    const char *s;
    size_t i;
    int rc;

    rc = ak_jpath_document (root, "manifest", fields, AK_MANIFEST_SCHEMA_VERSION, label, err);
    if (rc)
        return rc;
    if ((rc = ak_jpath_get_str (root, "name", true, label, "", &s, err)) != 0)
        return rc;
    if (!ak_name_label_ok (s, true))
        return ak_jpath_bad (err, label, "name", "must match [A-Za-z0-9_.-]+ (at most %d characters)",
                             AK_MAX_NAME - 1);
    m->name = ak_strdup (s);

    if ((rc = ak_jpath_get (root, "targets", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > S_MAX_TARGETS)
        return ak_jpath_bad (err, label, "targets", "must list 1 to %d device classes", S_MAX_TARGETS);
    m->targets = ak_calloc (json_array_size (v), sizeof *m->targets);
    json_array_foreach (v, i, e) {
        ak_jpath_index (p, "targets", i);
        if ((rc = ak_jpath_str (e, label, p, &s, err)) != 0)
            return rc;
        if (!ak_name_class_ok (s))
            return ak_jpath_bad (err, label, p, "a device class must match [A-Za-z0-9_./-]+ "
                                 "(at most %d characters)", AK_MAX_NAME - 1);
        for (size_t j = 0; j < m->ntargets; j++)
            if (ak_streq (m->targets[j], s))
                return ak_jpath_bad (err, label, p, "duplicate target '%s'", s);
        m->targets[m->ntargets++] = ak_strdup (s);
    }

    if ((rc = ak_jpath_get (root, "policy", JSON_OBJECT, false, label, "", &v, err)) != 0
     || (rc = ak_policy_parse (v, label, &m->policy, err)) != 0)
        return rc;

    if ((rc = ak_jpath_get (root, "ops", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > S_MAX_OPS)
        return ak_jpath_bad (err, label, "ops", "must list 1 to %d operators", S_MAX_OPS);
    m->ops = ak_calloc (json_array_size (v), sizeof *m->ops);
    json_array_foreach (v, i, e) {
        rc = s_parse_op (e, m, i, label, base_dir, &m->ops[m->nops++], err);
        if (rc)
            return rc;
    }
    return 0;
}

/*  target: NULL, or the one device class that replaces the text's
    "targets" before anything is checked against them (ak_manifest_load_for). */
static int s_manifest_from_text (const char *text, size_t len, const char *label, const char *base_dir,
                                 const char *target, ak_manifest_t **manifest_p, ak_err_t *err)
{
    json_t *root = NULL;
    int rc = ak_jpath_load (text, len, label, &root, err);
    if (rc)
        return rc;
    if (target && json_is_object (root))
        json_object_set_new (root, "targets", json_pack ("[s]", target));
    ak_manifest_t *m = ak_calloc (1, sizeof *m);
    rc = s_manifest_parse (root, label, base_dir, m, err);
    json_decref (root);
    if (rc) {
        ak_manifest_destroy (&m);
        return rc;
    }
    *manifest_p = m;
    return 0;
}

int ak_manifest_load (const char *path, ak_manifest_t **manifest_p, ak_err_t *err)
{
    return ak_manifest_load_for (path, NULL, manifest_p, err);
}

int ak_manifest_load_for (const char *path, const char *target, ak_manifest_t **manifest_p, ak_err_t *err)
{
    if (!path || !manifest_p)
        return ak_err_set (err, AK_EINVAL, "ak_manifest_load: missing argument");
    *manifest_p = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = ak_file_read (path, AK_JPATH_MAX_FILE, &text, &len, err);
    if (rc)
        return rc;
    char *dir = ak_dirname (path);
    rc = s_manifest_from_text (text, len, path, dir, target, manifest_p, err);
    free (dir);
    free (text);
    return rc;
}

int ak_manifest_parse_bundle (const char *text, size_t len, const char *label,
                              ak_manifest_t **manifest_p, ak_err_t *err)
{
    if (!text || !manifest_p)
        return ak_err_set (err, AK_EINVAL, "ak_manifest_parse_bundle: missing argument");
    *manifest_p = NULL;
    return s_manifest_from_text (text, len, label ? label : "bundle", NULL, NULL, manifest_p, err);
}

/*  Same shape as a manifest, self-contained: inline specs with sources (extra
    candidates merged, overrides applied), every workload an inline object,
    the selected candidates listed, the policy in full. */
char *ak_manifest_to_bundle (const ak_manifest_t *m)
{
    if (!m)
        return NULL;
    json_t *targets = json_array (), *ops = json_array ();
    for (size_t i = 0; i < m->ntargets; i++)
        json_array_append_new (targets, json_string (m->targets[i]));
    json_t *policy = ak_policy_to_json (&m->policy);
    for (size_t i = 0; i < m->nops; i++) {
        const ak_manifest_op_t *op = &m->ops[i];
        json_t *wls = json_array (), *cands = json_array ();
        for (size_t w = 0; w < op->nworkloads; w++) {
            const ak_workload_t *wl = &op->workloads[w];
            json_array_append_new (wls, json_pack ("{s:s, s:o, s:s, s:f}", "name", wl->name,
                                   "size", ak_spec_shape_json (op->spec, wl->dims),
                                   "dtype", ak_dtype_name (wl->dtype), "weight", wl->weight));
        }
        for (size_t c = 0; c < op->ncandidates; c++)
            json_array_append_new (cands, json_string (op->candidates[c]));
        json_t *oj = json_pack ("{s:o, s:o, s:o}", "spec", ak_spec_to_json (op->spec, true),
                                "workloads", wls, "candidates", cands);
        if (oj && op->profile)          /* written only when asked: older bundles stay byte-identical */
            json_object_set_new (oj, "profile", json_true ());
        if (oj && op->override_builtin) /* the same: only when it overrides something */
            json_object_set_new (oj, "override_builtin", json_true ());
        json_array_append_new (ops, oj);
    }
    json_t *root = json_pack ("{s:i, s:s, s:o, s:o, s:o}",
                              "schema_version", AK_MANIFEST_SCHEMA_VERSION, "name", m->name,
                              "targets", targets, "policy", policy, "ops", ops);
    char *text = root ? json_dumps (root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref (root);
    return text;
}

/* ================================================================ catalog */

char *ak_catalog_builtin (const char *catalog_dir, const char *name)
{
    if (!catalog_dir || !*catalog_dir || !name || !*name || strchr (name, '/')
        || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
        return NULL;
    char *path = ak_sprintf ("%s/%s/spec.json", catalog_dir, name);
    if (access (path, R_OK) != 0) {
        free (path);
        return NULL;
    }
    return path;
}

/*  Both paths name the same file (after links and ".."). */
static bool s_same_file (const char *a, const char *b)
{
    char *ra = realpath (a, NULL), *rb = realpath (b, NULL);
    bool same = ra && rb && strcmp (ra, rb) == 0;
    free (ra);
    free (rb);
    return same;
}

int ak_catalog_check (ak_manifest_t *m, const char *label, const char *catalog_dir,
                      ak_err_t *err)
{
    if (!m)
        return ak_err_set (err, AK_EINVAL, "ak_catalog_check: missing argument");
    for (size_t i = 0; catalog_dir && i < m->nops; i++) {
        ak_manifest_op_t *op = &m->ops[i];
        char *builtin = ak_catalog_builtin (catalog_dir, op->spec->name);
        bool collides = builtin && !(op->spec_path && s_same_file (op->spec_path, builtin));
        if (collides && !op->override_builtin) {
            ak_err_set (err, AK_EEXIST, "%s: ops[%zu].spec: operator '%s' (%s) has the name of "
                        "the built-in operator %s; rename it, or replace the built-in for "
                        "this batch with \"override_builtin\": true (akctl submit "
                        "--override-builtin)", label ? label : "manifest", i, op->spec->name,
                        op->spec_path ? op->spec_path : "inline spec", builtin);
            free (builtin);
            return AK_EEXIST;
        }
        /* Record an override only where one happens. */
        if (!collides)
            op->override_builtin = false;
        free (builtin);
    }
    return 0;
}
