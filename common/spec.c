/*  common/spec.c: operator specs (spec.h, docs/formats.md).

    Everything read here was written by a person, so nothing is trusted: every
    rejected field is named by file and JSON path (jpath.h), unknown fields
    are errors, sizes and counts are bounded, and expressions are checked
    before they are ever evaluated (space.h evaluates them).  Sources are
    read and confined by source.c.

    Never here: evaluating anything with an unchecked expression, reading a
    file while parsing a bundle, or keeping a pointer into a json_t past the
    parse (every string is copied). */
#include "spec.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpath.h"
#include "space.h"
#include "spec_cuda.h"
#include "util.h"

#define S_MAX_SIZES       256                 /* sizes (and edge sizes) per spec */

/* =============================================================== backends */

static bool s_backend_ok (const char *s)
{
    return ak_streq (s, "host") || ak_streq (s, "cuda");
}

static unsigned s_backend_bit (const char *s)
{
    return ak_streq (s, "host") ? AK_BACKEND_HOST : ak_streq (s, "cuda") ? AK_BACKEND_CUDA : 0;
}

bool ak_size_for_backend (const ak_size_t *size, const char *backend)
{
    return size && (size->backends == 0 || (size->backends & s_backend_bit (backend)) != 0);
}

/* ============================================================ destructors */

static void s_launch_free (ak_launch_rule_t **rule_p)
{
    if (rule_p && *rule_p) {
        ak_launch_rule_t *rule = *rule_p;
        for (int i = 0; i < rule->ngrid; i++)
            free (rule->grid[i]);
        for (int i = 0; i < rule->nblock; i++)
            free (rule->block[i]);
        free (rule->shared);
        ak_spec_cuda_rule_clear (rule);
        free (rule);
        *rule_p = NULL;
    }
}

static void s_candidate_free (ak_candidate_t *cand)
{
    free (cand->name);
    s_launch_free (&cand->launch);
    free (cand->backend);
    ak_source_clear (&cand->source);
    for (size_t i = 0; i < cand->nparams; i++) {
        free (cand->params[i].name);
        free (cand->params[i].values);
    }
    free (cand->params);
    for (size_t i = 0; i < cand->nconstraints; i++)
        free (cand->constraints[i]);
    free (cand->constraints);
    free (cand->arch);
    free (cand->seeds);
    memset (cand, 0, sizeof *cand);
}

static void s_sizes_free (ak_size_t *sizes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free (sizes[i].name);
    free (sizes);
}

void ak_spec_destroy (ak_spec_t **self_p)
{
    if (self_p && *self_p) {
        ak_spec_t *self = *self_p;
        free (self->name);
        for (int i = 0; i < self->nkeys; i++)
            free (self->keys[i]);
        s_sizes_free (self->sizes, self->nsizes);
        s_sizes_free (self->edge_sizes, self->nedge);
        free (self->stability_size);
        free (self->flops);
        free (self->bytes);
        for (int i = 0; i < self->ninputs; i++) {
            free (self->inputs[i].name);
            free (self->inputs[i].count);
        }
        for (int i = 0; i < self->noutputs; i++) {
            free (self->outputs[i].name);
            free (self->outputs[i].count);
        }
        ak_source_clear (&self->reference);
        ak_source_clear (&self->reference_cuda);
        s_launch_free (&self->reference_cuda_launch);
        for (size_t i = 0; i < self->nbaselines; i++) {
            free (self->baselines[i].backend);
            ak_source_clear (&self->baselines[i].source);
            s_launch_free (&self->baselines[i].launch);
            free (self->baselines[i].arch);
            free (self->baselines[i].library);
            free (self->baselines[i].lib_op);
        }
        free (self->baselines);
        for (size_t i = 0; i < self->ncandidates; i++)
            s_candidate_free (&self->candidates[i]);
        free (self->candidates);
        free (self);
        *self_p = NULL;
    }
}

/* ================================================================ lookups */

int ak_spec_key_index (const ak_spec_t *spec, const char *key)
{
    if (!spec || !key)
        return -1;
    for (int i = 0; i < spec->nkeys; i++)
        if (ak_streq (spec->keys[i], key))
            return i;
    return -1;
}

static const ak_size_t *s_find_size (const ak_size_t *sizes, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (ak_streq (sizes[i].name, name))
            return &sizes[i];
    return NULL;
}

const ak_size_t *ak_spec_size (const ak_spec_t *spec, const char *name)
{
    if (!spec || !name)
        return NULL;
    const ak_size_t *size = s_find_size (spec->sizes, spec->nsizes, name);
    return size ? size : s_find_size (spec->edge_sizes, spec->nedge, name);
}

const ak_baseline_t *ak_spec_baseline (const ak_spec_t *spec, const char *backend)
{
    if (!spec || !backend)
        return NULL;
    for (size_t i = 0; i < spec->nbaselines; i++)
        if (ak_streq (spec->baselines[i].backend, backend))
            return &spec->baselines[i];
    return NULL;
}

const ak_candidate_t *ak_spec_candidate (const ak_spec_t *spec, const char *name)
{
    if (!spec || !name)
        return NULL;
    for (size_t i = 0; i < spec->ncandidates; i++)
        if (ak_streq (spec->candidates[i].name, name))
            return &spec->candidates[i];
    return NULL;
}

static int s_dtype_pos (const ak_spec_t *spec, ak_dtype_t dt)
{
    for (int i = 0; i < spec->ndtypes; i++)
        if (spec->dtypes[i] == dt)
            return i;
    return -1;
}

bool ak_spec_has_dtype (const ak_spec_t *spec, ak_dtype_t dt)
{
    return spec && s_dtype_pos (spec, dt) >= 0;
}

const ak_tol_t *ak_spec_tol (const ak_spec_t *spec, ak_dtype_t dt)
{
    if (!spec)
        return NULL;
    int pos = s_dtype_pos (spec, dt);
    return pos < 0 ? NULL : &spec->tol[pos];
}

/* ========================================================== launch rules */

/*  An array of 1 to 3 expressions ("grid", "block") over names. */
static int s_parse_dim_exprs (json_t *obj, const char *key, const char *const *names, int nnames,
                              const char *label, const char *path, char **exprs, int *n,
                              ak_err_t *err)
{
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *arr, *e;
    size_t i;
    int rc = ak_jpath_get (obj, key, JSON_ARRAY, true, label, path, &arr, err);
    if (rc)
        return rc;
    ak_jpath_field (p, path, key);
    if (json_array_size (arr) < 1 || json_array_size (arr) > 3)
        return ak_jpath_bad (err, label, p, "must list 1 to 3 expressions (x, y, z)");
    json_array_foreach (arr, i, e) {
        const char *text;
        ak_jpath_index (q, p, i);
        if ((rc = ak_jpath_str (e, label, q, &text, err)) != 0
         || (rc = ak_space_check_expr (text, names, nnames, label, q, err)) != 0)
            return rc;
        exprs[(*n)++] = ak_strdup (text);
    }
    return 0;
}

/*  The variables of a launch rule and tensor maps: the spec's keys, b and
    the kernel's parameters, into names; their count, or -1 with err set
    when a parameter has the name of a key (the rule would be ambiguous). */
#define S_LAUNCH_NAMES (AK_MAX_DIMS + 1 + AK_MAX_PARAMS)
static int s_launch_names (const ak_spec_t *spec, const ak_param_t *params, size_t nparams,
                           const char *label, const char *path, const char *names[S_LAUNCH_NAMES],
                           ak_err_t *err)
{
    int n = 0;
    for (int k = 0; k < spec->nkeys; k++)
        names[n++] = spec->keys[k];
    names[n++] = "b";
    for (size_t i = 0; i < nparams && i < AK_MAX_PARAMS; i++) {
        if (ak_spec_key_index (spec, params[i].name) >= 0) {
            ak_jpath_bad (err, label, path, "parameter %s has the name of a shape key of %s: "
                          "ambiguous in the launch rule", params[i].name, spec->name);
            return -1;
        }
        names[n++] = params[i].name;
    }
    return n;
}

/*  A launch rule {"grid": [x, y?, z?], "block": [x, y?, z?], "shared"?,
    "cluster"?}: expressions over the spec's keys, b and the kernel's
    parameters (params NULL for a baseline).  A parameter named like a key
    would make the rule ambiguous and is rejected. */
static int s_parse_launch (json_t *v, const ak_spec_t *spec, const ak_param_t *params,
                           size_t nparams, const char *label, const char *path,
                           ak_launch_rule_t **rule_p, ak_err_t *err)
{
    static const char *const fields[] = { "grid", "block", "shared", "cluster", NULL };
    const char *names[S_LAUNCH_NAMES];
    char p[AK_JPATH_MAX];
    int n, rc;

    if (!json_is_object (v))
        return ak_jpath_bad (err, label, path, "must be an object {\"grid\", \"block\", \"shared\"?}");
    if ((rc = ak_jpath_only (v, fields, label, path, err)) != 0)
        return rc;
    if ((n = s_launch_names (spec, params, nparams, label, path, names, err)) < 0)
        return AK_EINVAL;
    ak_launch_rule_t *rule = ak_calloc (1, sizeof *rule);
    *rule_p = rule;
    if ((rc = s_parse_dim_exprs (v, "grid", names, n, label, path, rule->grid, &rule->ngrid, err)) != 0
     || (rc = s_parse_dim_exprs (v, "block", names, n, label, path, rule->block, &rule->nblock, err)) != 0)
        return rc;
    const char *shared;
    if ((rc = ak_jpath_get_str (v, "shared", false, label, path, &shared, err)) != 0)
        return rc;
    if (shared && (rc = ak_space_check_expr (shared, names, n, label,
                                             ak_jpath_field (p, path, "shared"), err)) != 0)
        return rc;
    rule->shared = ak_strdup (shared ? shared : "0");
    return ak_spec_parse_cluster (v, names, n, label, path, rule, err);
}

/*  The "launch" member of a candidate or baseline object: required for the
    cuda backend, refused for host; and the object's "tensor_maps", kept
    with the rule (only cuda kernels have them). */
static int s_parse_launch_of (json_t *obj, const char *backend, const ak_spec_t *spec,
                              const ak_param_t *params, size_t nparams, const char *label,
                              const char *path, ak_launch_rule_t **rule_p, ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    const char *names[S_LAUNCH_NAMES];
    json_t *v = json_object_get (obj, "launch");
    ak_jpath_field (p, path, "launch");
    if (ak_streq (backend, "cuda")) {
        if (!v)
            return ak_jpath_bad (err, label, p, "missing (a cuda kernel needs {\"grid\", \"block\"})");
        int rc = s_parse_launch (v, spec, params, nparams, label, p, rule_p, err);
        int n = rc ? -1 : s_launch_names (spec, params, nparams, label, path, names, err);
        if (rc || n < 0)
            return rc ? rc : AK_EINVAL;
        return ak_spec_parse_tmaps (obj, spec, names, n, backend, label, path, *rule_p, err);
    }
    if (v)
        return ak_jpath_bad (err, label, p, "only cuda kernels have a launch rule (backend is '%s')",
                             backend);
    return ak_spec_parse_tmaps (obj, spec, names, 0, backend, label, path, NULL, err);
}

/* ============================================================= candidates */

/*  One candidate object: {name, backend, source, params?, constraints?, seeds?}.
    Checks the parameter space: bounded, every constraint evaluates, and at
    least one configuration satisfies them all. */
int ak_spec_parse_candidate (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                             const char *base_dir, bool confined, ak_candidate_t *cand, ak_err_t *err)
{
    static const char *const fields[] = {
        "name", "backend", "source", "params", "constraints", "seeds", "launch", "arch", "tensor_maps", NULL };
    char p[AK_JPATH_MAX];
    json_t *src;
    const char *name, *backend;
    int rc;

    if (!json_is_object (v))
        return ak_jpath_bad (err, label, path, "must be an object");
    if ((rc = ak_jpath_only (v, fields, label, path, err)) != 0
     || (rc = ak_jpath_get_str (v, "name", true, label, path, &name, err)) != 0
     || (rc = ak_jpath_get_str (v, "backend", true, label, path, &backend, err)) != 0)
        return rc;
    if (!ak_name_ok (name))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "name"),
                             "must match [a-z0-9_]+ (at most %d characters)", AK_MAX_NAME - 1);
    if (!s_backend_ok (backend))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "backend"),
                             "unknown backend (host, cuda)");
    cand->name = ak_strdup (name);
    cand->backend = ak_strdup (backend);
    if (!(src = json_object_get (v, "source")))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "source"), "missing");
    rc = ak_source_parse (src, label, ak_jpath_field (p, path, "source"), base_dir, confined,
                          &cand->source, err);
    if (rc)
        return rc;

    if ((rc = ak_space_parse (v, label, path, cand, err)) != 0
     || (rc = ak_spec_parse_arch (v, cand->backend, label, path, &cand->arch, err)) != 0)
        return rc;
    return s_parse_launch_of (v, cand->backend, spec, cand->params, cand->nparams, label, path,
                              &cand->launch, err);
}

/* ================================================================== specs */

/*  A `size` object: every key of the spec, each a positive integer <= 2^31. */
int ak_spec_parse_shape (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                         int64_t dims[AK_MAX_DIMS], ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    const char *key;
    json_t *d;
    if (!json_is_object (v))
        return ak_jpath_bad (err, label, path, "must be an object with a value for each key");
    json_object_foreach (v, key, d)
        if (ak_spec_key_index (spec, key) < 0)
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, key),
                                 "unknown field (not a key of %s)", spec->name);
    memset (dims, 0, sizeof (int64_t) * AK_MAX_DIMS);
    for (int k = 0; k < spec->nkeys; k++) {
        ak_jpath_field (p, path, spec->keys[k]);
        d = json_object_get (v, spec->keys[k]);
        if (!d)
            return ak_jpath_bad (err, label, p, "missing");
        if (!json_is_integer (d) || json_integer_value (d) < 1
         || json_integer_value (d) > AK_SPEC_MAX_DIM)
            return ak_jpath_bad (err, label, p, "must be a positive integer (at most %lld)",
                                 (long long) AK_SPEC_MAX_DIM);
        dims[k] = (int64_t) json_integer_value (d);
    }
    return 0;
}

static int s_parse_size_list (json_t *root, const char *key, bool required, ak_spec_t *spec,
                              const char *label, ak_size_t **sizes_p, size_t *n_p, ak_err_t *err)
{
    static const char *const fields[] = { "name", "size", "backends", NULL };
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *arr, *v;
    size_t i;
    int rc = ak_jpath_get (root, key, JSON_ARRAY, required, label, "", &arr, err);
    if (rc || !arr)
        return rc;
    size_t n = json_array_size (arr);
    if (required && n == 0)
        return ak_jpath_bad (err, label, key, "must list at least one size");
    if (n > S_MAX_SIZES)
        return ak_jpath_bad (err, label, key, "at most %d sizes", S_MAX_SIZES);
    *sizes_p = ak_calloc (n ? n : 1, sizeof **sizes_p);
    json_array_foreach (arr, i, v) {
        const char *name;
        json_t *size;
        ak_jpath_index (p, key, i);
        if (!json_is_object (v))
            return ak_jpath_bad (err, label, p, "must be an object {\"name\", \"size\"}");
        if ((rc = ak_jpath_only (v, fields, label, p, err)) != 0
         || (rc = ak_jpath_get_str (v, "name", true, label, p, &name, err)) != 0
         || (rc = ak_jpath_get (v, "size", JSON_OBJECT, true, label, p, &size, err)) != 0)
            return rc;
        if (!ak_name_ok (name))
            return ak_jpath_bad (err, label, ak_jpath_field (q, p, "name"),
                                 "must match [a-z0-9_]+ (at most %d characters)", AK_MAX_NAME - 1);
        ak_size_t *sz = &(*sizes_p)[*n_p];
        rc = ak_spec_parse_shape (size, spec, label, ak_jpath_field (q, p, "size"), sz->dims, err);
        if (rc)
            return rc;
        sz->name = ak_strdup (name);
        (*n_p)++;
        /* "backends": the backends the size is for (GPU-sized shapes the
           host backend and its float64 oracle should never be given). */
        json_t *bs = json_object_get (v, "backends"), *b;
        char bp[AK_JPATH_MAX];
        size_t k;
        if (bs && (!json_is_array (bs) || json_array_size (bs) == 0))
            return ak_jpath_bad (err, label, ak_jpath_field (q, p, "backends"),
                                 "must be a non-empty array of backends (host, cuda)");
        json_array_foreach (bs, k, b) {
            unsigned bit = json_is_string (b) ? s_backend_bit (json_string_value (b)) : 0;
            if (!bit)
                return ak_jpath_bad (err, label, ak_jpath_index (q, ak_jpath_field (bp, p, "backends"), k),
                                     "unknown backend (host, cuda)");
            if (sz->backends & bit)
                return ak_jpath_bad (err, label, ak_jpath_index (q, ak_jpath_field (bp, p, "backends"), k),
                                     "duplicate backend '%s'", json_string_value (b));
            sz->backends |= bit;
        }
    }
    return 0;
}

static double s_volume (const ak_spec_t *spec, const int64_t *dims)
{
    double v = 1;
    for (int k = 0; k < spec->nkeys; k++)
        v *= (double) dims[k];
    return v;
}

/*  Names and shapes unique across sizes and edge sizes; sizes smallest
    first; every size evaluates. */
static int s_check_sizes (const ak_spec_t *spec, const char *label, ak_err_t *err)
{
    size_t total = spec->nsizes + spec->nedge;
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX], f[AK_JPATH_MAX];
    for (size_t i = 0; i < total; i++) {
        bool ei = i >= spec->nsizes;
        const ak_size_t *a = ei ? &spec->edge_sizes[i - spec->nsizes] : &spec->sizes[i];
        ak_jpath_index (p, ei ? "edge_sizes" : "sizes", ei ? i - spec->nsizes : i);
        for (size_t j = 0; j < i; j++) {
            bool ej = j >= spec->nsizes;
            const ak_size_t *b = ej ? &spec->edge_sizes[j - spec->nsizes] : &spec->sizes[j];
            ak_jpath_index (q, ej ? "edge_sizes" : "sizes", ej ? j - spec->nsizes : j);
            if (ak_streq (a->name, b->name))
                return ak_jpath_bad (err, label, ak_jpath_field (f, p, "name"),
                                     "duplicate size name '%s' (also %s)", a->name, q);
            if (memcmp (a->dims, b->dims, sizeof a->dims) == 0)
                return ak_jpath_bad (err, label, ak_jpath_field (f, p, "size"),
                                     "duplicate size: same shape as %s ('%s')", q, b->name);
        }
        if (!ei && i > 0 && s_volume (spec, a->dims) < s_volume (spec, spec->sizes[i - 1].dims))
            return ak_jpath_bad (err, label, p, "smaller than sizes[%zu] (list sizes smallest first: "
                                 "sizes[0] is the smoke size)", i - 1);
        int rc = ak_spec_check_shape (spec, a->dims, label, p, err);
        if (rc)
            return rc;
    }
    return 0;
}

/*  inputs / outputs: [{name, count, range (inputs only)}]. */
static int s_parse_bufs (json_t *root, bool inputs, ak_spec_t *spec, const char *label,
                         ak_err_t *err)
{
    static const char *const in_fields[] = { "name", "count", "range", NULL };
    static const char *const out_fields[] = { "name", "count", NULL };
    const char *key = inputs ? "inputs" : "outputs";
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *arr, *v;
    size_t i;
    int rc = ak_jpath_get (root, key, JSON_ARRAY, true, label, "", &arr, err);
    if (rc)
        return rc;
    size_t n = json_array_size (arr);
    if ((!inputs && n == 0) || n > AK_MAX_BUFS)
        return ak_jpath_bad (err, label, key, "must list %d to %d buffers", inputs ? 0 : 1, AK_MAX_BUFS);
    json_array_foreach (arr, i, v) {
        const char *name, *count;
        ak_jpath_index (p, key, i);
        if (!json_is_object (v))
            return ak_jpath_bad (err, label, p, "must be an object");
        if ((rc = ak_jpath_only (v, inputs ? in_fields : out_fields, label, p, err)) != 0
         || (rc = ak_jpath_get_str (v, "name", true, label, p, &name, err)) != 0
         || (rc = ak_jpath_get_str (v, "count", true, label, p, &count, err)) != 0)
            return rc;
        if (!ak_name_ok (name))
            return ak_jpath_bad (err, label, ak_jpath_field (q, p, "name"),
                                 "must match [a-z0-9_]+ (at most %d characters)", AK_MAX_NAME - 1);
        for (int j = 0; j < spec->ninputs; j++)
            if (ak_streq (spec->inputs[j].name, name))
                return ak_jpath_bad (err, label, ak_jpath_field (q, p, "name"),
                                     "duplicate buffer name '%s'", name);
        for (int j = 0; j < spec->noutputs; j++)
            if (ak_streq (spec->outputs[j].name, name))
                return ak_jpath_bad (err, label, ak_jpath_field (q, p, "name"),
                                     "duplicate buffer name '%s'", name);
        rc = ak_space_check_expr (count, (const char *const *) spec->keys, spec->nkeys, label,
                           ak_jpath_field (q, p, "count"), err);
        if (rc)
            return rc;
        ak_buf_t *buf = inputs ? &spec->inputs[spec->ninputs] : &spec->outputs[spec->noutputs];
        if (inputs) {
            json_t *range;
            rc = ak_jpath_get (v, "range", JSON_ARRAY, true, label, p, &range, err);
            if (rc)
                return rc;
            ak_jpath_field (q, p, "range");
            json_t *lo = json_array_get (range, 0), *hi = json_array_get (range, 1);
            if (json_array_size (range) != 2 || !json_is_number (lo) || !json_is_number (hi))
                return ak_jpath_bad (err, label, q, "must be [lo, hi]");
            buf->lo = json_number_value (lo);
            buf->hi = json_number_value (hi);
            if (!isfinite (buf->lo) || !isfinite (buf->hi))
                return ak_jpath_bad (err, label, q, "must be finite");
            if (!(buf->lo < buf->hi))
                return ak_jpath_bad (err, label, q, "lo must be less than hi");
        }
        buf->name = ak_strdup (name);
        buf->count = ak_strdup (count);
        if (inputs)
            spec->ninputs++;
        else
            spec->noutputs++;
    }
    return 0;
}

/*  One tolerance object {"atol", "rtol"}: both finite and >= 0. */
static int s_parse_tol (json_t *v, const char *label, const char *path, ak_tol_t *tol,
                        ak_err_t *err)
{
    static const char *const fields[] = { "atol", "rtol", NULL };
    char p[AK_JPATH_MAX];
    if (!json_is_object (v))
        return ak_jpath_bad (err, label, path, "must be an object {\"atol\", \"rtol\"}");
    int rc = ak_jpath_only (v, fields, label, path, err);
    if (rc)
        return rc;
    for (int i = 0; i < 2; i++) {
        const char *key = i ? "rtol" : "atol";
        json_t *x;
        rc = ak_jpath_get (v, key, JSON_REAL, true, label, path, &x, err);
        if (rc)
            return rc;
        double d = json_number_value (x);
        ak_jpath_field (p, path, key);
        if (!isfinite (d))
            return ak_jpath_bad (err, label, p, "must be finite");
        if (d < 0)
            return ak_jpath_bad (err, label, p, "must be >= 0");
        if (i)
            tol->rtol = d;
        else
            tol->atol = d;
    }
    return 0;
}

/*  A tolerances object {dtype: {atol, rtol}} over declared dtypes; seen[i]
    is set for each spec->dtypes[i] it gives. */
int ak_spec_parse_tols (json_t *obj, const ak_spec_t *spec, const char *label, const char *path,
                        ak_tol_t tol[AK_DT_COUNT], bool seen[AK_DT_COUNT], ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    const char *key;
    json_t *v;
    json_object_foreach (obj, key, v) {
        ak_dtype_t dt;
        ak_jpath_field (p, path, key);
        if (ak_dtype_parse (key, &dt))
            return ak_jpath_bad (err, label, p, "unknown dtype (float16, bfloat16, float32)");
        int pos = s_dtype_pos (spec, dt);
        if (pos < 0)
            return ak_jpath_bad (err, label, p, "dtype not declared in %s's dtypes", spec->name);
        int rc = s_parse_tol (v, label, p, &tol[pos], err);
        if (rc)
            return rc;
        seen[pos] = true;
    }
    return 0;
}

/*  The whole spec object into spec (which the caller destroys on failure). */
static int s_spec_parse (json_t *root, const char *label, const char *base_dir, ak_spec_t *spec,
                         ak_err_t *err)
{
    static const char *const fields[] = {
        "schema_version", "name", "keys", "dtypes", "tolerances", "sizes", "edge_sizes",
        "stability_size", "near_max_scale", "flops", "bytes", "inputs", "outputs", "inplace", "reference",
        "reference_cuda", "baselines", "candidates", NULL };
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *v, *e;
    const char *s;
    size_t i;
    int rc;

    rc = ak_jpath_document (root, "spec", fields, AK_SPEC_SCHEMA_VERSION, label, err);
    if (rc)
        return rc;

    if ((rc = ak_jpath_get_str (root, "name", true, label, "", &s, err)) != 0)
        return rc;
    if (!ak_name_ok (s))
        return ak_jpath_bad (err, label, "name", "must match [a-z0-9_]+ (at most %d characters)",
                             AK_MAX_NAME - 1);
    spec->name = ak_strdup (s);

    /* keys */
    if ((rc = ak_jpath_get (root, "keys", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > AK_MAX_DIMS)
        return ak_jpath_bad (err, label, "keys", "must list 1 to %d shape keys", AK_MAX_DIMS);
    json_array_foreach (v, i, e) {
        ak_jpath_index (p, "keys", i);
        if ((rc = ak_jpath_str (e, label, p, &s, err)) != 0)
            return rc;
        if (!ak_name_ident_ok (s))
            return ak_jpath_bad (err, label, p, "must be an identifier [A-Za-z_][A-Za-z0-9_]* "
                                 "(at most %d characters)", AK_MAX_NAME - 1);
        if (ak_streq (s, "b"))
            return ak_jpath_bad (err, label, p, "'b' is reserved (bytes per element)");
        if (ak_spec_key_index (spec, s) >= 0)
            return ak_jpath_bad (err, label, p, "duplicate key '%s'", s);
        spec->keys[spec->nkeys++] = ak_strdup (s);
    }

    /* dtypes, tolerances */
    if ((rc = ak_jpath_get (root, "dtypes", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > AK_DT_COUNT)
        return ak_jpath_bad (err, label, "dtypes", "must list 1 to %d dtypes", AK_DT_COUNT);
    json_array_foreach (v, i, e) {
        ak_dtype_t dt;
        ak_jpath_index (p, "dtypes", i);
        if ((rc = ak_jpath_str (e, label, p, &s, err)) != 0)
            return rc;
        if (ak_dtype_parse (s, &dt))
            return ak_jpath_bad (err, label, p, "unknown dtype (float16, bfloat16, float32)");
        if (s_dtype_pos (spec, dt) >= 0)
            return ak_jpath_bad (err, label, p, "duplicate dtype '%s'", s);
        spec->dtypes[spec->ndtypes++] = dt;
    }
    if ((rc = ak_jpath_get (root, "tolerances", JSON_OBJECT, true, label, "", &v, err)) != 0)
        return rc;
    bool seen[AK_DT_COUNT] = { false };
    if ((rc = ak_spec_parse_tols (v, spec, label, "tolerances", spec->tol, seen, err)) != 0)
        return rc;
    for (int t = 0; t < spec->ndtypes; t++)
        if (!seen[t])
            return ak_jpath_bad (err, label,
                                 ak_jpath_field (p, "tolerances", ak_dtype_name (spec->dtypes[t])),
                                 "missing (every declared dtype needs a tolerance)");

    /* sizes */
    if ((rc = s_parse_size_list (root, "sizes", true, spec, label, &spec->sizes,
                                 &spec->nsizes, err)) != 0
     || (rc = s_parse_size_list (root, "edge_sizes", false, spec, label, &spec->edge_sizes,
                                 &spec->nedge, err)) != 0
     || (rc = ak_jpath_get_str (root, "stability_size", true, label, "", &s, err)) != 0)
        return rc;
    if (!s_find_size (spec->sizes, spec->nsizes, s))
        return ak_jpath_bad (err, label, "stability_size", "'%s' is not one of the sizes",
                             ak_jpath_show (s, p));
    spec->stability_size = ak_strdup (s);
    if ((rc = ak_spec_parse_near_max (root, spec, label, err)) != 0)
        return rc;

    /* flops, bytes, buffers */
    const char *names[AK_MAX_DIMS + 1];
    for (int k = 0; k < spec->nkeys; k++)
        names[k] = spec->keys[k];
    names[spec->nkeys] = "b";
    if ((rc = ak_jpath_get_str (root, "flops", true, label, "", &s, err)) != 0
     || (rc = ak_space_check_expr (s, names, spec->nkeys, label, "flops", err)) != 0)
        return rc;
    spec->flops = ak_strdup (s);
    if ((rc = ak_jpath_get_str (root, "bytes", true, label, "", &s, err)) != 0
     || (rc = ak_space_check_expr (s, names, spec->nkeys + 1, label, "bytes", err)) != 0)
        return rc;
    spec->bytes = ak_strdup (s);
    if ((rc = s_parse_bufs (root, true, spec, label, err)) != 0
     || (rc = s_parse_bufs (root, false, spec, label, err)) != 0
     || (rc = ak_jpath_get (root, "inplace", JSON_TRUE, false, label, "", &v, err)) != 0)
        return rc;
    spec->inplace = v && json_is_true (v);
    if (spec->inplace && spec->noutputs > spec->ninputs)
        return ak_jpath_bad (err, label, "inplace", "an in-place spec needs an input for each output");
    if ((rc = s_check_sizes (spec, label, err)) != 0)
        return rc;

    /* reference, baselines */
    if (!(v = json_object_get (root, "reference")))
        return ak_jpath_bad (err, label, "reference", "missing");
    if ((rc = ak_source_parse (v, label, "reference", base_dir, true, &spec->reference, err)) != 0)
        return rc;
    if ((v = json_object_get (root, "reference_cuda"))) {
        static const char *const rfields[] = { "source", "launch", NULL };
        if (!json_is_object (v))
            return ak_jpath_bad (err, label, "reference_cuda",
                                 "must be an object {\"source\", \"launch\"}");
        if ((rc = ak_jpath_only (v, rfields, label, "reference_cuda", err)) != 0)
            return rc;
        if (!(e = json_object_get (v, "source")))
            return ak_jpath_bad (err, label, "reference_cuda.source", "missing");
        rc = ak_source_parse (e, label, "reference_cuda.source", base_dir, true, &spec->reference_cuda,
                              err);
        if (rc)
            return rc;
        rc = s_parse_launch_of (v, "cuda", spec, NULL, 0, label, "reference_cuda",
                                &spec->reference_cuda_launch, err);
        if (rc)
            return rc;
    }
    /* The smoke and stability sizes run on every backend: they are where
       a device reference is checked against the host oracle. */
    const ak_size_t *stab = ak_spec_size (spec, spec->stability_size);
    if (spec->sizes[0].backends)
        return ak_jpath_bad (err, label, "sizes[0].backends", "the smoke size runs on every backend");
    if (stab && stab->backends)
        return ak_jpath_bad (err, label, "stability_size", "'%s' names backends; the stability size "
                             "runs on every backend", stab->name);
    if ((rc = ak_jpath_get (root, "baselines", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > 8)
        return ak_jpath_bad (err, label, "baselines", "must list 1 to 8 baselines (one per backend)");
    spec->baselines = ak_calloc (json_array_size (v), sizeof *spec->baselines);
    json_array_foreach (v, i, e) {
        static const char *const bfields[] = { "backend", "source", "launch", "arch", "tensor_maps",
                                               "library", "op", NULL };
        json_t *src;
        ak_jpath_index (p, "baselines", i);
        if (!json_is_object (e))
            return ak_jpath_bad (err, label, p, "must be an object {\"backend\", \"source\"}");
        if ((rc = ak_jpath_only (e, bfields, label, p, err)) != 0
         || (rc = ak_jpath_get_str (e, "backend", true, label, p, &s, err)) != 0)
            return rc;
        if (!s_backend_ok (s))
            return ak_jpath_bad (err, label, ak_jpath_field (q, p, "backend"),
                                 "unknown backend (host, cuda)");
        if (ak_spec_baseline (spec, s))
            return ak_jpath_bad (err, label, ak_jpath_field (q, p, "backend"),
                                 "duplicate baseline for backend '%s'", s);
        ak_baseline_t *bl = &spec->baselines[spec->nbaselines++];
        bl->backend = ak_strdup (s);
        if ((rc = ak_spec_parse_arch (e, bl->backend, label, p, &bl->arch, err)) != 0)
            return rc;
        if (json_object_get (e, "library")) {
            if ((rc = ak_spec_parse_library (e, spec, label, p, bl, err)) != 0)
                return rc;
            continue;
        }
        if (json_object_get (e, "op"))
            return ak_jpath_bad (err, label, ak_jpath_field (q, p, "op"), "only a library baseline has an op");
        if (!(src = json_object_get (e, "source")))
            return ak_jpath_bad (err, label, ak_jpath_field (q, p, "source"), "missing");
        rc = ak_source_parse (src, label, ak_jpath_field (q, p, "source"), base_dir, true, &bl->source,
                              err);
        if (rc)
            return rc;
        rc = s_parse_launch_of (e, bl->backend, spec, NULL, 0, label, p, &bl->launch, err);
        if (rc)
            return rc;
    }

    /* candidates */
    if ((rc = ak_jpath_get (root, "candidates", JSON_ARRAY, false, label, "", &v, err)) != 0)
        return rc;
    size_t nc = v ? json_array_size (v) : 0;
    if (nc > AK_SPEC_MAX_CANDIDATES)
        return ak_jpath_bad (err, label, "candidates", "at most %d candidates", AK_SPEC_MAX_CANDIDATES);
    spec->candidates = ak_calloc (nc ? nc : 1, sizeof *spec->candidates);
    for (i = 0; i < nc; i++) {
        ak_jpath_index (p, "candidates", i);
        ak_candidate_t *cand = &spec->candidates[spec->ncandidates++];
        rc = ak_spec_parse_candidate (json_array_get (v, i), spec, label, p, base_dir, true, cand, err);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (ak_streq (spec->candidates[j].name, cand->name))
                return ak_jpath_bad (err, label, ak_jpath_field (q, p, "name"),
                                     "duplicate candidate name '%s'", cand->name);
    }
    return 0;
}

int ak_spec_parse (json_t *json, const char *label, const char *base_dir, ak_spec_t **spec_p,
                   ak_err_t *err)
{
    if (!json || !spec_p)
        return ak_err_set (err, AK_EINVAL, "ak_spec_parse: missing argument");
    *spec_p = NULL;
    ak_spec_t *spec = ak_calloc (1, sizeof *spec);
    int rc = s_spec_parse (json, label ? label : "spec", base_dir, spec, err);
    if (rc) {
        ak_spec_destroy (&spec);
        return rc;
    }
    *spec_p = spec;
    return 0;
}

int ak_spec_parse_text (const char *text, size_t len, const char *label, ak_spec_t **spec_p,
                        ak_err_t *err)
{
    if (!text || !spec_p)
        return ak_err_set (err, AK_EINVAL, "ak_spec_parse_text: missing argument");
    *spec_p = NULL;
    if (!label)
        label = "spec";
    json_t *root = NULL;
    int rc = ak_jpath_load (text, len, label, &root, err);
    if (rc)
        return rc;
    rc = ak_spec_parse (root, label, NULL, spec_p, err);
    json_decref (root);
    return rc;
}

int ak_spec_load (const char *path, ak_spec_t **spec_p, ak_err_t *err)
{
    if (!path || !spec_p)
        return ak_err_set (err, AK_EINVAL, "ak_spec_load: missing argument");
    *spec_p = NULL;
    char *text = NULL, *dir = NULL;
    size_t len = 0;
    json_t *root = NULL;
    int rc = ak_file_read (path, AK_JPATH_MAX_FILE, &text, &len, err);
    if (rc)
        goto fail;
    rc = ak_jpath_load (text, len, path, &root, err);
    if (rc)
        goto fail;
    dir = ak_dirname (path);
    rc = ak_spec_parse (root, path, dir, spec_p, err);
fail:
    json_decref (root);
    free (text);
    free (dir);
    return rc;
}
