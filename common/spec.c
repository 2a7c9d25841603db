/*  common/spec.c: operator specs and batch manifests (spec.h, docs/formats.md).

    Everything read here was written by a person, so nothing is trusted: every
    rejected field is named by file and JSON path, unknown fields are errors,
    sizes and counts are bounded, expressions are checked before they are ever
    evaluated, and file paths a spec names cannot leave its directory.  Even a
    JSON syntax error is reported with the path of the value being read.

    Never here: evaluating anything with an unchecked expression, reading a
    file while parsing a bundle, or keeping a pointer into a json_t past the
    parse (every string is copied). */
#include "spec.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "digest.h"
#include "expr.h"
#include "util.h"

#define S_MAX_FILE_BYTES  (16u << 20)         /* a spec or manifest file */
#define S_MAX_DIM         (INT64_C (1) << 31) /* one shape dimension */
#define S_MAX_SIZES       256                 /* sizes (and edge sizes) per spec */
#define S_MAX_CANDIDATES  256
#define S_MAX_VALUES      1024                /* values of one parameter */
#define S_MAX_SPACE       (1u << 16)          /* configurations before constraints */
#define S_MAX_CONSTRAINTS 32
#define S_MAX_WALK_CHARS  (1u << 22)          /* configurations x constraint characters:
                                                 bounds the walk done on every parse (the
                                                 coordinator parses on its event loop) */
#define S_MAX_OPS         256
#define S_MAX_TARGETS     256
#define S_MAX_WORKLOADS   4096
#define S_MAX_EXPR        1024                /* characters of one expression */
#define S_MAX_SRC_NAME    255
#define S_PATH            256                 /* a JSON path in a message */

static bool s_streq (const char *a, const char *b)
{
    return a && b && strcmp (a, b) == 0;
}

/* ================================================================= errors */

/*  Copies untrusted text for a message: printable ASCII only, cut at 64
    characters, so a hostile field name cannot forge or flood a log line. */
static const char *s_show (const char *text, char buf[72])
{
    size_t n = 0;
    if (!text)
        text = "(null)";
    for (; text[n] && n < 64; n++) {
        unsigned char c = (unsigned char) text[n];
        buf[n] = c >= 0x20 && c < 0x7f ? (char) c : '?';
    }
    if (text[n]) {
        memcpy (buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

__attribute__ ((format (printf, 5, 0)))
static int s_vfail (ak_err_t *err, int code, const char *label, const char *path,
                    const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf (msg, sizeof msg, fmt, ap);
    if (path && *path)
        return ak_err_set (err, code, "%s: %s: %s", label, path, msg);
    return ak_err_set (err, code, "%s: %s", label, msg);
}

/*  `LABEL: PATH: message` with AK_EINVAL (s_bad) or another code (s_fail). */
__attribute__ ((format (printf, 4, 5)))
static int s_bad (ak_err_t *err, const char *label, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int rc = s_vfail (err, AK_EINVAL, label, path, fmt, ap);
    va_end (ap);
    return rc;
}

__attribute__ ((format (printf, 5, 6)))
static int s_fail (ak_err_t *err, int code, const char *label, const char *path,
                   const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int rc = s_vfail (err, code, label, path, fmt, ap);
    va_end (ap);
    return rc;
}

/* ------------------------------------------------------------ JSON paths */

/*  parent.key into buf (S_PATH bytes); key alone at the top level. */
static const char *s_field (char *buf, const char *parent, const char *key)
{
    char safe[72];
    s_show (key, safe);
    if (parent && *parent)
        snprintf (buf, S_PATH, "%.180s.%s", parent, safe);
    else
        snprintf (buf, S_PATH, "%s", safe);
    return buf;
}

/*  parent[i] into buf (S_PATH bytes). */
static const char *s_index (char *buf, const char *parent, size_t i)
{
    snprintf (buf, S_PATH, "%.200s[%zu]", parent ? parent : "", i);
    return buf;
}

/*  The JSON path ("ops[2].tolerances.float16.atol") of the value being read
    at byte offset pos of text.  Only used to place a syntax error, so it is a
    forgiving scanner, not a parser: it tracks containers, keys and indexes. */
static void s_path_at (const char *text, size_t len, size_t pos, char *out, size_t outsz)
{
    enum { DEPTH = 32 };
    struct { bool obj, in_value; size_t index; char key[72]; } st[DEPTH];
    int depth = 0, over = 0;
    size_t i = 0;

    if (pos > len)
        pos = len;
    while (i < pos) {
        char c = text[i];
        if (c == '"') {
            size_t start = ++i;
            while (i < pos && text[i] != '"')
                i += text[i] == '\\' ? 2 : 1;
            if (depth > 0 && !over && st[depth - 1].obj && !st[depth - 1].in_value) {
                size_t n = (i < pos ? i : pos) - start, k;
                if (n > 64)
                    n = 64;
                for (k = 0; k < n; k++) {
                    unsigned char ch = (unsigned char) text[start + k];
                    st[depth - 1].key[k] = ch >= 0x20 && ch < 0x7f ? (char) ch : '?';
                }
                st[depth - 1].key[k] = '\0';
            }
            i++;
            continue;
        }
        if (c == '{' || c == '[') {
            if (!over && depth < DEPTH) {
                st[depth].obj = c == '{';
                st[depth].in_value = false;
                st[depth].index = 0;
                st[depth].key[0] = '\0';
                depth++;
            }
            else
                over++;
        }
        else if (c == '}' || c == ']') {
            if (over)
                over--;
            else if (depth > 0)
                depth--;
        }
        else if (c == ':' && !over && depth > 0 && st[depth - 1].obj)
            st[depth - 1].in_value = true;
        else if (c == ',' && !over && depth > 0) {
            if (st[depth - 1].obj) {
                st[depth - 1].in_value = false;
                st[depth - 1].key[0] = '\0';
            }
            else
                st[depth - 1].index++;
        }
        i++;
    }
    size_t n = 0;
    out[0] = '\0';
    for (int d = 0; d < depth && n < outsz; d++) {
        int w;
        if (st[d].obj) {
            if (!st[d].key[0])
                break;
            w = snprintf (out + n, outsz - n, "%s%s", n ? "." : "", st[d].key);
        }
        else
            w = snprintf (out + n, outsz - n, "[%zu]", st[d].index);
        if (w < 0)
            break;
        n += (size_t) w;
    }
    if (n >= outsz)
        out[outsz - 1] = '\0';
}

/*  Parses JSON text (duplicate keys rejected).  A syntax error is reported
    with the path of the value it is in and the line and column. */
static int s_json_load (const char *text, size_t len, const char *label, json_t **root_p,
                        ak_err_t *err)
{
    json_error_t jerr;
    json_t *root = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        char path[S_PATH];
        s_path_at (text, len, (size_t) (jerr.position > 0 ? jerr.position : 0), path, sizeof path);
        const char *what = json_error_code (&jerr) == json_error_numeric_overflow
                           && strstr (jerr.text, "real") ? "must be finite" : "invalid JSON";
        return s_bad (err, label, path, "%s: %s (line %d column %d)",
                      what, jerr.text, jerr.line, jerr.column);
    }
    *root_p = root;
    return 0;
}

/* ------------------------------------------------------ typed JSON access */

/*  Rejects any member of obj not in allowed (NULL-terminated). */
static int s_only (json_t *obj, const char *const *allowed, const char *label,
                   const char *path, ak_err_t *err)
{
    const char *key;
    json_t *v;
    json_object_foreach (obj, key, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp (key, *a) == 0;
        if (!ok) {
            char p[S_PATH];
            return s_bad (err, label, s_field (p, path, key), "unknown field");
        }
    }
    return 0;
}

static const char *s_type_word (json_type t)
{
    switch (t) {
        case JSON_OBJECT: return "an object";
        case JSON_ARRAY:  return "an array";
        case JSON_STRING: return "a string";
        case JSON_INTEGER: return "an integer";
        case JSON_REAL:   return "a number";
        case JSON_TRUE:
        case JSON_FALSE:  return "true or false";
        default:          return "a value";
    }
}

/*  obj[key] of the given JSON type into *out; NULL when absent and not
    required.  (JSON_REAL accepts integers too.) */
static int s_get (json_t *obj, const char *key, json_type type, bool required, const char *label,
                  const char *parent, json_t **out, ak_err_t *err)
{
    char p[S_PATH];
    json_t *v = json_object_get (obj, key);
    *out = NULL;
    if (!v) {
        if (required)
            return s_bad (err, label, s_field (p, parent, key), "missing");
        return 0;
    }
    bool ok = type == JSON_REAL ? json_is_number (v)
            : type == JSON_TRUE ? json_is_boolean (v)
            : json_typeof (v) == type;
    if (!ok)
        return s_bad (err, label, s_field (p, parent, key), "must be %s", s_type_word (type));
    *out = v;
    return 0;
}

/*  A JSON string value without embedded NUL bytes. */
static int s_str_value (json_t *v, const char *label, const char *path, const char **out,
                        ak_err_t *err)
{
    if (!json_is_string (v))
        return s_bad (err, label, path, "must be a string");
    const char *s = json_string_value (v);
    if (strlen (s) != json_string_length (v))
        return s_bad (err, label, path, "must not contain NUL characters");
    *out = s;
    return 0;
}

static int s_get_str (json_t *obj, const char *key, bool required, const char *label,
                      const char *parent, const char **out, ak_err_t *err)
{
    json_t *v;
    char p[S_PATH];
    *out = NULL;
    int rc = s_get (obj, key, JSON_STRING, required, label, parent, &v, err);
    if (rc || !v)
        return rc;
    return s_str_value (v, label, s_field (p, parent, key), out, err);
}

/* ------------------------------------------------------------------ names */

static bool s_name_ok (const char *s)                /* [a-z0-9_]+ */
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return false;
    return n > 0 && n < AK_MAX_NAME;
}

static bool s_param_name_ok (const char *s)          /* [A-Z][A-Z0-9_]* */
{
    if (!(s[0] >= 'A' && s[0] <= 'Z'))
        return false;
    size_t n = 1;
    for (; s[n]; n++)
        if (!((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return false;
    return n < AK_MAX_NAME;
}

static bool s_ident_ok (const char *s)               /* [A-Za-z_][A-Za-z0-9_]* */
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!(alpha || (n > 0 && c >= '0' && c <= '9')))
            return false;
    }
    return n > 0 && n < AK_MAX_NAME;
}

static bool s_label_ok (const char *s, bool upper)  /* [a-z0-9_-]+, [A-Za-z0-9_.-]+ */
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'
               || (upper && ((c >= 'A' && c <= 'Z') || c == '.'));
        if (!ok)
            return false;
    }
    return n > 0 && n < AK_MAX_NAME;
}

static bool s_class_ok (const char *s)              /* [A-Za-z0-9_.-/]+ */
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
               || c == '_' || c == '-' || c == '.' || c == '/';
        if (!ok)
            return false;
    }
    return n > 0 && n < AK_MAX_NAME;
}

static bool s_backend_ok (const char *s)
{
    return s_streq (s, "host") || s_streq (s, "cuda");
}

static unsigned s_backend_bit (const char *s)
{
    return s_streq (s, "host") ? AK_BACKEND_HOST : s_streq (s, "cuda") ? AK_BACKEND_CUDA : 0;
}

bool ak_size_for_backend (const ak_size_t *size, const char *backend)
{
    return size && (size->backends == 0 || (size->backends & s_backend_bit (backend)) != 0);
}

/* ================================================================= dtypes */

static const char *const s_dtype_names[AK_DT_COUNT] = { "float16", "bfloat16", "float32" };
static const size_t s_dtype_sizes[AK_DT_COUNT] = { 2, 2, 4 };

const char *ak_dtype_name (ak_dtype_t dt)
{
    if ((int) dt < 0 || dt >= AK_DT_COUNT)
        return "invalid";
    return s_dtype_names[dt];
}

int ak_dtype_parse (const char *name, ak_dtype_t *out)
{
    for (int i = 0; i < AK_DT_COUNT; i++)
        if (s_streq (name, s_dtype_names[i])) {
            if (out)
                *out = (ak_dtype_t) i;
            return 0;
        }
    return AK_EINVAL;
}

size_t ak_dtype_size (ak_dtype_t dt)
{
    if ((int) dt < 0 || dt >= AK_DT_COUNT)
        return 0;
    return s_dtype_sizes[dt];
}

const char *ak_class_backend (const char *device_class)
{
    return s_streq (device_class, "host") ? "host" : "cuda";
}

void ak_policy_defaults (ak_policy_t *policy)
{
    if (!policy)
        return;
    memset (policy, 0, sizeof *policy);     /* padding too: the struct may be hashed */
    policy->max_attempts = 3;
    policy->compile_timeout_ms = 60000;
    policy->run_timeout_ms = 60000;
    policy->lease_ms = 120000;
    policy->warmup = 3;
    policy->min_samples = 10;
    policy->max_samples = 200;
    policy->rsd_target = 0.005;
    policy->max_time_ms = 2000;
    policy->threshold = 0.03;
    policy->max_regression = 0.05;
    policy->seed = 42;
    policy->search_budget = 64;
    policy->search_keep = 4;
    policy->search_rounds = 2;
    policy->short_max_time_ms = 200;
    policy->confirm = true;
    policy->implausible = 10.0;
}

/* ============================================================ destructors */

static void s_source_free (ak_source_t *src)
{
    free (src->name);
    free (src->text);
    src->name = src->text = NULL;
}

static void s_launch_free (ak_launch_rule_t **rule_p)
{
    if (rule_p && *rule_p) {
        ak_launch_rule_t *rule = *rule_p;
        for (int i = 0; i < rule->ngrid; i++)
            free (rule->grid[i]);
        for (int i = 0; i < rule->nblock; i++)
            free (rule->block[i]);
        free (rule->shared);
        free (rule);
        *rule_p = NULL;
    }
}

static void s_candidate_free (ak_candidate_t *cand)
{
    free (cand->name);
    s_launch_free (&cand->launch);
    free (cand->backend);
    s_source_free (&cand->source);
    for (size_t i = 0; i < cand->nparams; i++) {
        free (cand->params[i].name);
        free (cand->params[i].values);
    }
    free (cand->params);
    for (size_t i = 0; i < cand->nconstraints; i++)
        free (cand->constraints[i]);
    free (cand->constraints);
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
        s_source_free (&self->reference);
        s_source_free (&self->reference_cuda);
        s_launch_free (&self->reference_cuda_launch);
        for (size_t i = 0; i < self->nbaselines; i++) {
            free (self->baselines[i].backend);
            s_source_free (&self->baselines[i].source);
            s_launch_free (&self->baselines[i].launch);
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
        if (s_streq (spec->keys[i], key))
            return i;
    return -1;
}

static const ak_size_t *s_find_size (const ak_size_t *sizes, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (s_streq (sizes[i].name, name))
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
        if (s_streq (spec->baselines[i].backend, backend))
            return &spec->baselines[i];
    return NULL;
}

const ak_candidate_t *ak_spec_candidate (const ak_spec_t *spec, const char *name)
{
    if (!spec || !name)
        return NULL;
    for (size_t i = 0; i < spec->ncandidates; i++)
        if (s_streq (spec->candidates[i].name, name))
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

/* ============================================================ expressions */

/*  Variables for an expression over the shape: the keys, then b. */
static int s_shape_vars (const ak_spec_t *spec, const int64_t *dims, ak_dtype_t dt,
                         ak_var_t vars[AK_MAX_DIMS + 1])
{
    int n = 0;
    for (; n < spec->nkeys && n < AK_MAX_DIMS; n++)
        vars[n] = (ak_var_t) { spec->keys[n], dims[n] };
    vars[n++] = (ak_var_t) { "b", (int64_t) ak_dtype_size (dt) };
    return n;
}

int ak_spec_eval (const ak_spec_t *spec, const char *expr, const int64_t *dims, ak_dtype_t dt,
                  int64_t *out, ak_err_t *err)
{
    if (!spec || !expr || !dims || !out)
        return ak_err_set (err, AK_EINVAL, "ak_spec_eval: missing argument");
    if (ak_dtype_size (dt) == 0)
        return ak_err_set (err, AK_EINVAL, "ak_spec_eval: invalid dtype %d", (int) dt);
    ak_var_t vars[AK_MAX_DIMS + 1];
    int nvars = s_shape_vars (spec, dims, dt, vars);
    int rc = ak_expr_eval (expr, vars, nvars, out, err);
    if (rc)
        ak_err_prefix (err, "%s", spec->name ? spec->name : "spec");
    return rc;
}

/*  Variables of a launch rule: the keys, b, then the parameters. */
#define S_LAUNCH_VARS (AK_MAX_DIMS + 1 + AK_MAX_PARAMS)
#define S_LAUNCH_MAX  INT64_C (2147483647)

/*  One launch expression evaluated into lo..S_LAUNCH_MAX; where names the
    field ("launch.grid[1]") in the error. */
static int s_launch_value (const char *text, const ak_var_t *vars, int nvars, const char *where,
                           int64_t lo, uint32_t *out, ak_err_t *err)
{
    int64_t v = 0;
    ak_err_t sub = { 0 };
    if (ak_expr_eval (text, vars, nvars, &v, &sub))
        return ak_err_set (err, AK_EINVAL, "%s '%.200s': %s", where, text, sub.msg);
    if (v < lo || v > S_LAUNCH_MAX)
        return ak_err_set (err, AK_EINVAL, "%s '%.200s' = %lld: must be %lld..%lld", where, text,
                           (long long) v, (long long) lo, (long long) S_LAUNCH_MAX);
    *out = (uint32_t) v;
    return 0;
}

int ak_launch_eval (const ak_spec_t *spec, const ak_launch_rule_t *rule, const int64_t *dims,
                    ak_dtype_t dt, const char *const *names, const int64_t *values, int nparams,
                    ak_launch_cfg_t *out, ak_err_t *err)
{
    if (!spec || !rule || !dims || !out || (nparams > 0 && (!names || !values)))
        return ak_err_set (err, AK_EINVAL, "ak_launch_eval: missing argument");
    if (nparams < 0 || nparams > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "launch: %d parameters (limit %d)", nparams, AK_MAX_PARAMS);
    if (ak_dtype_size (dt) == 0)
        return ak_err_set (err, AK_EINVAL, "ak_launch_eval: invalid dtype %d", (int) dt);
    if (rule->ngrid < 1 || rule->ngrid > 3 || rule->nblock < 1 || rule->nblock > 3 || !rule->shared)
        return ak_err_set (err, AK_EINVAL, "launch: incomplete rule");
    ak_var_t vars[S_LAUNCH_VARS];
    int nvars = s_shape_vars (spec, dims, dt, vars);
    for (int i = 0; i < nparams; i++)
        vars[nvars++] = (ak_var_t) { names[i], values[i] };

    ak_launch_cfg_t cfg = { { 1, 1, 1 }, { 1, 1, 1 }, 0 };
    char where[32];
    int rc = 0;
    for (int i = 0; i < rule->ngrid && !rc; i++) {
        snprintf (where, sizeof where, "launch.grid[%d]", i);
        rc = s_launch_value (rule->grid[i], vars, nvars, where, 1, &cfg.grid[i], err);
    }
    for (int i = 0; i < rule->nblock && !rc; i++) {
        snprintf (where, sizeof where, "launch.block[%d]", i);
        rc = s_launch_value (rule->block[i], vars, nvars, where, 1, &cfg.block[i], err);
    }
    if (!rc)
        rc = s_launch_value (rule->shared, vars, nvars, "launch.shared", 0, &cfg.shared_bytes, err);
    if (!rc)
        *out = cfg;
    return rc;
}

/*  Checks that text is an expression over names only. */
static int s_check_expr (const char *text, const char *const *names, int nnames,
                         const char *label, const char *path, ak_err_t *err)
{
    if (strlen (text) > S_MAX_EXPR)
        return s_bad (err, label, path, "expression longer than %d characters", S_MAX_EXPR);
    ak_err_t sub = { 0 };
    if (ak_expr_check (text, names, nnames, &sub))
        return s_bad (err, label, path, "invalid expression: %s", sub.msg);
    return 0;
}

/* ========================================================= parameter space */

/*  Walks the cartesian product (last parameter fastest), evaluating the
    constraints of each configuration.  On an evaluation error, *bad gets the
    index of the failing constraint and err its message with the config. */
static int s_walk (const ak_candidate_t *cand, ak_space_fn *fn, void *arg, size_t *count,
                   size_t *bad, ak_err_t *err)
{
    size_t idx[AK_MAX_PARAMS] = { 0 };
    int64_t values[AK_MAX_PARAMS] = { 0 };
    ak_var_t vars[AK_MAX_PARAMS];
    size_t np = cand->nparams, valid = 0;
    int rc = 0;

    if (count)
        *count = 0;
    if (np > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "more than %d parameters", AK_MAX_PARAMS);
    for (size_t i = 0; i < np; i++)
        if (cand->params[i].nvalues == 0 || !cand->params[i].values)
            return ak_err_set (err, AK_EINVAL, "params.%s: no values", cand->params[i].name);
    for (;;) {
        for (size_t i = 0; i < np; i++) {
            values[i] = cand->params[i].values[idx[i]];
            vars[i] = (ak_var_t) { cand->params[i].name, values[i] };
        }
        bool ok = true;
        for (size_t c = 0; c < cand->nconstraints && ok; c++) {
            int64_t v = 0;
            ak_err_t sub = { 0 };
            if (ak_expr_eval (cand->constraints[c], vars, (int) np, &v, &sub)) {
                char at[256];
                size_t n = 0;
                at[0] = '\0';
                for (size_t i = 0; i < np && n < sizeof at; i++) {
                    int w = snprintf (at + n, sizeof at - n, "%s%s=%lld", i ? ", " : "",
                                      cand->params[i].name, (long long) values[i]);
                    if (w < 0)
                        break;
                    n += (size_t) w;
                }
                if (bad)
                    *bad = c;
                return ak_err_set (err, AK_EINVAL, "%s (at %s)", sub.msg, at);
            }
            ok = v != 0;
        }
        if (ok) {
            valid++;
            if (count)
                *count = valid;
            if (fn && (rc = fn (cand, values, arg)) != 0)
                return rc;
        }
        /* Odometer: the last parameter turns fastest. */
        size_t i = np;
        while (i > 0) {
            i--;
            if (++idx[i] < cand->params[i].nvalues)
                break;
            idx[i] = 0;
            if (i == 0)
                return 0;
        }
        if (np == 0)
            return 0;
    }
}

int ak_space_walk (const ak_candidate_t *cand, ak_space_fn *fn, void *arg, size_t *count,
                   ak_err_t *err)
{
    if (!cand)
        return ak_err_set (err, AK_EINVAL, "ak_space_walk: no candidate");
    size_t bad = 0;
    ak_err_t sub = { 0 };
    int rc = s_walk (cand, fn, arg, count, &bad, &sub);
    if (rc && sub.msg[0]) {
        char name[72];
        return ak_err_set (err, rc, "candidate %s: constraints[%zu]: %s",
                           s_show (cand->name, name), bad, sub.msg);
    }
    return rc;
}

/* ================================================================ sources */

/*  Relative, no ".." component: a spec's sources stay inside its directory. */
static int s_confined_path (const char *rel, const char *label, const char *path, ak_err_t *err)
{
    if (rel[0] == '/')
        return s_bad (err, label, path, "must be a path relative to the spec's directory, "
                      "not an absolute path");
    for (const char *p = rel; *p; ) {
        const char *slash = strchr (p, '/');
        size_t n = slash ? (size_t) (slash - p) : strlen (p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return s_bad (err, label, path, "must stay inside the spec's directory "
                          "(no '..' component)");
        p += n;
        if (*p == '/')
            p++;
    }
    return 0;
}

/*  A confined path must also stay inside base_dir once symbolic links are
    followed: "kernel.c -> ~/.ssh/id_rsa" would otherwise ship that file to
    every worker of the fleet.  full is base_dir/rel. */
static int s_confined_real (const char *base_dir, const char *full, const char *rel, const char *label,
                            const char *path, ak_err_t *err)
{
    char *base = realpath (base_dir, NULL), *real = realpath (full, NULL);
    int rc = 0;
    if (base && real) {
        size_t n = strlen (base);
        bool inside = strncmp (real, base, n) == 0 && (real[n] == '/' || (n == 1 && base[0] == '/'));
        if (!inside)
            rc = s_bad (err, label, path, "'%.200s' leaves the spec's directory through a symbolic link "
                        "(it resolves to %.300s)", rel, real);
    }
    /* a path that does not resolve is left to the read, which names it */
    free (base);
    free (real);
    return rc;
}

/*  Source text must be non-empty, NUL-free UTF-8 (it travels in JSON). */
static int s_text_ok (const char *text, size_t len, const char *label, const char *path,
                      ak_err_t *err)
{
    if (len == 0)
        return s_bad (err, label, path, "source is empty");
    if (len > AK_MAX_SOURCE_BYTES)
        return s_fail (err, AK_ETOOBIG, label, path, "source is %zu bytes, limit %u",
                       len, AK_MAX_SOURCE_BYTES);
    if (strlen (text) != len)
        return s_bad (err, label, path, "source contains a NUL byte");
    json_t *probe = json_stringn (text, len);
    if (!probe)
        return s_bad (err, label, path, "source is not valid UTF-8");
    json_decref (probe);
    return 0;
}

/*  A source: a file path (read relative to base_dir; confined: inside it) or
    an inline object {"name", "text"} or {"name", "digest"} (the form without
    sources that workers receive: text stays NULL).  base_dir NULL: inline
    only (bundles name no files). */
static int s_parse_source (json_t *v, const char *label, const char *path, const char *base_dir,
                           bool confined, ak_source_t *src, ak_err_t *err)
{
    static const char *const fields[] = { "name", "text", "digest", NULL };
    char p[S_PATH];
    int rc;

    if (json_is_string (v)) {
        const char *rel;
        rc = s_str_value (v, label, path, &rel, err);
        if (rc)
            return rc;
        if (!base_dir)
            return s_bad (err, label, path, "must be an inline source {\"name\", \"text\"}: "
                          "a bundle names no files");
        if (!*rel || strlen (rel) > 4095)
            return s_bad (err, label, path, "must be a file path");
        if (confined && (rc = s_confined_path (rel, label, path, err)) != 0)
            return rc;
        char *full = ak_path_join (base_dir, rel);
        if (confined && (rc = s_confined_real (base_dir, full, rel, label, path, err)) != 0) {
            free (full);
            return rc;
        }
        char *text = NULL;
        size_t len = 0;
        ak_err_t sub = { 0 };
        rc = ak_file_read (full, AK_MAX_SOURCE_BYTES, &text, &len, &sub);
        free (full);
        if (rc)
            return s_fail (err, rc, label, path, "cannot read source: %s", sub.msg);
        rc = s_text_ok (text, len, label, path, err);
        if (rc) {
            free (text);
            return rc;
        }
        /* A confined path is the source's name; one that may leave the
           directory (a manifest's extra candidate) is named by its last
           component, so no path of the submitting host travels on. */
        const char *base = strrchr (rel, '/');
        src->name = ak_strdup (confined || !base ? rel : base + 1);
        src->text = text;
        return ak_sha256_hex (text, len, src->digest);
    }
    if (!json_is_object (v))
        return s_bad (err, label, path, "must be a file path or an inline source object");
    rc = s_only (v, fields, label, path, err);
    if (rc)
        return rc;
    const char *name, *text, *digest;
    if ((rc = s_get_str (v, "name", true, label, path, &name, err)) != 0
     || (rc = s_get_str (v, "text", false, label, path, &text, err)) != 0
     || (rc = s_get_str (v, "digest", false, label, path, &digest, err)) != 0)
        return rc;
    if (!*name || strlen (name) > S_MAX_SRC_NAME)
        return s_bad (err, label, s_field (p, path, "name"),
                      "must be 1 to %d characters", S_MAX_SRC_NAME);
    for (const char *c = name; *c; c++)
        if ((unsigned char) *c < 0x20 || *c == 0x7f)
            return s_bad (err, label, s_field (p, path, "name"),
                          "must not contain control characters");
    if (digest && !ak_digest_valid (digest))
        return s_bad (err, label, s_field (p, path, "digest"),
                      "must be 64 lower-case hex characters (sha256)");
    if (text) {
        size_t len = strlen (text);
        rc = s_text_ok (text, len, label, s_field (p, path, "text"), err);
        if (rc)
            return rc;
        rc = ak_sha256_hex (text, len, src->digest);
        if (rc)
            return ak_err_set (err, rc, "%s: %s: sha256 failed", label, path);
        if (digest && strcmp (digest, src->digest) != 0)
            return s_bad (err, label, s_field (p, path, "digest"),
                          "does not match the text (its sha256 is %s)", src->digest);
        src->text = ak_strdup (text);
    }
    else if (digest)
        memcpy (src->digest, digest, AK_DIGEST_HEX_LEN + 1);
    else
        return s_bad (err, label, s_field (p, path, "text"), "missing");
    src->name = ak_strdup (name);
    return 0;
}

/* ========================================================== launch rules */

/*  An array of 1 to 3 expressions ("grid", "block") over names. */
static int s_parse_dim_exprs (json_t *obj, const char *key, const char *const *names, int nnames,
                              const char *label, const char *path, char **exprs, int *n,
                              ak_err_t *err)
{
    char p[S_PATH], q[S_PATH];
    json_t *arr, *e;
    size_t i;
    int rc = s_get (obj, key, JSON_ARRAY, true, label, path, &arr, err);
    if (rc)
        return rc;
    s_field (p, path, key);
    if (json_array_size (arr) < 1 || json_array_size (arr) > 3)
        return s_bad (err, label, p, "must list 1 to 3 expressions (x, y, z)");
    json_array_foreach (arr, i, e) {
        const char *text;
        s_index (q, p, i);
        if ((rc = s_str_value (e, label, q, &text, err)) != 0
         || (rc = s_check_expr (text, names, nnames, label, q, err)) != 0)
            return rc;
        exprs[(*n)++] = ak_strdup (text);
    }
    return 0;
}

/*  A launch rule {"grid": [x, y?, z?], "block": [x, y?, z?], "shared"?}:
    expressions over the spec's keys, b and the kernel's parameters (params
    NULL for a baseline).  A parameter named like a key would make the rule
    ambiguous and is rejected. */
static int s_parse_launch (json_t *v, const ak_spec_t *spec, const ak_param_t *params,
                           size_t nparams, const char *label, const char *path,
                           ak_launch_rule_t **rule_p, ak_err_t *err)
{
    static const char *const fields[] = { "grid", "block", "shared", NULL };
    const char *names[AK_MAX_DIMS + 1 + AK_MAX_PARAMS];
    char p[S_PATH];
    int n = 0, rc;

    if (!json_is_object (v))
        return s_bad (err, label, path, "must be an object {\"grid\", \"block\", \"shared\"?}");
    if ((rc = s_only (v, fields, label, path, err)) != 0)
        return rc;
    for (int k = 0; k < spec->nkeys; k++)
        names[n++] = spec->keys[k];
    names[n++] = "b";
    for (size_t i = 0; i < nparams && i < AK_MAX_PARAMS; i++) {
        if (ak_spec_key_index (spec, params[i].name) >= 0)
            return s_bad (err, label, path, "parameter %s has the name of a shape key of %s: "
                          "ambiguous in the launch rule", params[i].name, spec->name);
        names[n++] = params[i].name;
    }
    ak_launch_rule_t *rule = ak_calloc (1, sizeof *rule);
    *rule_p = rule;
    if ((rc = s_parse_dim_exprs (v, "grid", names, n, label, path, rule->grid, &rule->ngrid, err)) != 0
     || (rc = s_parse_dim_exprs (v, "block", names, n, label, path, rule->block, &rule->nblock, err)) != 0)
        return rc;
    const char *shared;
    if ((rc = s_get_str (v, "shared", false, label, path, &shared, err)) != 0)
        return rc;
    if (shared && (rc = s_check_expr (shared, names, n, label, s_field (p, path, "shared"), err)) != 0)
        return rc;
    rule->shared = ak_strdup (shared ? shared : "0");
    return 0;
}

/*  The "launch" member of a candidate or baseline object: required for the
    cuda backend, refused for host. */
static int s_parse_launch_of (json_t *obj, const char *backend, const ak_spec_t *spec,
                              const ak_param_t *params, size_t nparams, const char *label,
                              const char *path, ak_launch_rule_t **rule_p, ak_err_t *err)
{
    char p[S_PATH];
    json_t *v = json_object_get (obj, "launch");
    s_field (p, path, "launch");
    if (s_streq (backend, "cuda")) {
        if (!v)
            return s_bad (err, label, p, "missing (a cuda kernel needs {\"grid\", \"block\"})");
        return s_parse_launch (v, spec, params, nparams, label, p, rule_p, err);
    }
    if (v)
        return s_bad (err, label, p, "only cuda kernels have a launch rule (backend is '%s')", backend);
    return 0;
}

/* ============================================================= candidates */

/*  One candidate object: {name, backend, source, params?, constraints?}.
    Checks the parameter space: bounded, every constraint evaluates, and at
    least one configuration satisfies them all. */
static int s_parse_candidate (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                              const char *base_dir, bool confined, ak_candidate_t *cand, ak_err_t *err)
{
    static const char *const fields[] = {
        "name", "backend", "source", "params", "constraints", "launch", NULL };
    char p[S_PATH], q[S_PATH];
    json_t *params, *constraints, *src;
    const char *name, *backend;
    int rc;

    if (!json_is_object (v))
        return s_bad (err, label, path, "must be an object");
    if ((rc = s_only (v, fields, label, path, err)) != 0
     || (rc = s_get_str (v, "name", true, label, path, &name, err)) != 0
     || (rc = s_get_str (v, "backend", true, label, path, &backend, err)) != 0)
        return rc;
    if (!s_name_ok (name))
        return s_bad (err, label, s_field (p, path, "name"),
                      "must match [a-z0-9_]+ (at most %d characters)", AK_MAX_NAME - 1);
    if (!s_backend_ok (backend))
        return s_bad (err, label, s_field (p, path, "backend"),
                      "unknown backend (host, cuda)");
    cand->name = ak_strdup (name);
    cand->backend = ak_strdup (backend);
    if (!(src = json_object_get (v, "source")))
        return s_bad (err, label, s_field (p, path, "source"), "missing");
    rc = s_parse_source (src, label, s_field (p, path, "source"), base_dir, confined,
                         &cand->source, err);
    if (rc)
        return rc;

    /* params: {"NAME": [values...]} in declaration order. */
    if ((rc = s_get (v, "params", JSON_OBJECT, false, label, path, &params, err)) != 0)
        return rc;
    s_field (p, path, "params");
    size_t np = params ? json_object_size (params) : 0;
    if (np > AK_MAX_PARAMS)
        return s_bad (err, label, p, "at most %d parameters", AK_MAX_PARAMS);
    cand->params = ak_calloc (np ? np : 1, sizeof *cand->params);
    const char *pname;
    json_t *vals;
    size_t space = 1;
    if (params)
        json_object_foreach (params, pname, vals) {
            s_field (q, p, pname);
            if (!s_param_name_ok (pname))
                return s_bad (err, label, q, "parameter names must match [A-Z][A-Z0-9_]* "
                              "(at most %d characters)", AK_MAX_NAME - 1);
            if (!json_is_array (vals) || json_array_size (vals) == 0)
                return s_bad (err, label, q, "must be a non-empty array of integers");
            size_t nv = json_array_size (vals);
            if (nv > S_MAX_VALUES)
                return s_bad (err, label, q, "at most %d values", S_MAX_VALUES);
            ak_param_t *param = &cand->params[cand->nparams++];
            param->name = ak_strdup (pname);
            param->values = ak_calloc (nv, sizeof *param->values);
            for (size_t i = 0; i < nv; i++) {
                json_t *e = json_array_get (vals, i);
                char r[S_PATH];
                if (!json_is_integer (e))
                    return s_bad (err, label, s_index (r, q, i), "must be an integer");
                int64_t x = (int64_t) json_integer_value (e);
                for (size_t j = 0; j < i; j++)
                    if (param->values[j] == x)
                        return s_bad (err, label, s_index (r, q, i),
                                      "duplicate value %lld", (long long) x);
                param->values[i] = x;
                param->nvalues++;
            }
            if (space > S_MAX_SPACE / nv)
                return s_bad (err, label, p, "the parameter space has more than %u "
                              "configurations", S_MAX_SPACE);
            space *= nv;
        }

    /* constraints: expressions over the parameter names. */
    if ((rc = s_get (v, "constraints", JSON_ARRAY, false, label, path, &constraints, err)) != 0)
        return rc;
    s_field (p, path, "constraints");
    size_t nc = constraints ? json_array_size (constraints) : 0;
    if (nc > S_MAX_CONSTRAINTS)
        return s_bad (err, label, p, "at most %d constraints", S_MAX_CONSTRAINTS);
    const char *names[AK_MAX_PARAMS];
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    cand->constraints = ak_calloc (nc ? nc : 1, sizeof *cand->constraints);
    for (size_t i = 0; i < nc; i++) {
        const char *text;
        s_index (q, p, i);
        if ((rc = s_str_value (json_array_get (constraints, i), label, q, &text, err)) != 0
         || (rc = s_check_expr (text, names, (int) cand->nparams, label, q, err)) != 0)
            return rc;
        cand->constraints[cand->nconstraints++] = ak_strdup (text);
    }
    size_t chars = 0;
    for (size_t i = 0; i < cand->nconstraints; i++)
        chars += strlen (cand->constraints[i]) + 1;
    if (chars && space > S_MAX_WALK_CHARS / chars)
        return s_bad (err, label, p, "too much to check: %zu configurations x %zu characters "
                      "of constraints (limit %u)", space, chars, S_MAX_WALK_CHARS);
    size_t valid = 0, bad = 0;
    ak_err_t sub = { 0 };
    if (s_walk (cand, NULL, NULL, &valid, &bad, &sub))
        return s_bad (err, label, s_index (q, p, bad), "%s", sub.msg);
    if (valid == 0)
        return s_bad (err, label, p, "no configuration of the parameter space satisfies them");
    return s_parse_launch_of (v, cand->backend, spec, cand->params, cand->nparams, label, path,
                              &cand->launch, err);
}

/* ================================================================== specs */

/*  A `size` object: every key of the spec, each a positive integer <= 2^31. */
static int s_parse_dims (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                         int64_t dims[AK_MAX_DIMS], ak_err_t *err)
{
    char p[S_PATH];
    const char *key;
    json_t *d;
    if (!json_is_object (v))
        return s_bad (err, label, path, "must be an object with a value for each key");
    json_object_foreach (v, key, d)
        if (ak_spec_key_index (spec, key) < 0)
            return s_bad (err, label, s_field (p, path, key), "unknown field (not a key of %s)",
                          spec->name);
    memset (dims, 0, sizeof (int64_t) * AK_MAX_DIMS);
    for (int k = 0; k < spec->nkeys; k++) {
        s_field (p, path, spec->keys[k]);
        d = json_object_get (v, spec->keys[k]);
        if (!d)
            return s_bad (err, label, p, "missing");
        if (!json_is_integer (d) || json_integer_value (d) < 1
         || json_integer_value (d) > S_MAX_DIM)
            return s_bad (err, label, p, "must be a positive integer (at most %lld)",
                          (long long) S_MAX_DIM);
        dims[k] = (int64_t) json_integer_value (d);
    }
    return 0;
}

/*  Every count, flops and bytes expression evaluates for dims with every
    declared dtype; counts are positive and small enough for a float64
    buffer; in-place outputs match their inputs. */
static int s_check_dims (const ak_spec_t *spec, const int64_t *dims, const char *label,
                         const char *path, ak_err_t *err)
{
    for (int t = 0; t < spec->ndtypes; t++) {
        ak_var_t vars[AK_MAX_DIMS + 1];
        int nvars = s_shape_vars (spec, dims, spec->dtypes[t], vars);
        int64_t v, in_counts[AK_MAX_BUFS] = { 0 };
        ak_err_t sub = { 0 };
        for (int io = 0; io < 2; io++) {
            const ak_buf_t *bufs = io ? spec->outputs : spec->inputs;
            int n = io ? spec->noutputs : spec->ninputs;
            for (int i = 0; i < n; i++) {
                const char *what = io ? "outputs" : "inputs";
                if (ak_expr_eval (bufs[i].count, vars, nvars, &v, &sub))
                    return s_bad (err, label, path, "%s[%d].count: %s", what, i, sub.msg);
                if (v < 1 || (uint64_t) v > AK_SPEC_MAX_ELEMS)
                    return s_bad (err, label, path, "%s[%d].count '%s' is %lld "
                                  "(must be 1 to %llu elements, what a worker allocates per buffer)",
                                  what, i, bufs[i].count, (long long) v,
                                  (unsigned long long) AK_SPEC_MAX_ELEMS);
                if (!io)
                    in_counts[i] = v;
                else if (spec->inplace && v != in_counts[i])
                    return s_bad (err, label, path, "outputs[%d].count is %lld but inplace "
                                  "inputs[%d].count is %lld", i, (long long) v, i,
                                  (long long) in_counts[i]);
            }
        }
        const char *exprs[2] = { spec->flops, spec->bytes };
        for (int e = 0; e < 2; e++) {
            if (ak_expr_eval (exprs[e], vars, nvars, &v, &sub))
                return s_bad (err, label, path, "%s (%s): %s", e ? "bytes" : "flops",
                              ak_dtype_name (spec->dtypes[t]), sub.msg);
            if (v < 0)
                return s_bad (err, label, path, "%s is negative (%lld)", e ? "bytes" : "flops",
                              (long long) v);
        }
    }
    return 0;
}

static int s_parse_size_list (json_t *root, const char *key, bool required, ak_spec_t *spec,
                              const char *label, ak_size_t **sizes_p, size_t *n_p, ak_err_t *err)
{
    static const char *const fields[] = { "name", "size", "backends", NULL };
    char p[S_PATH], q[S_PATH];
    json_t *arr, *v;
    size_t i;
    int rc = s_get (root, key, JSON_ARRAY, required, label, "", &arr, err);
    if (rc || !arr)
        return rc;
    size_t n = json_array_size (arr);
    if (required && n == 0)
        return s_bad (err, label, key, "must list at least one size");
    if (n > S_MAX_SIZES)
        return s_bad (err, label, key, "at most %d sizes", S_MAX_SIZES);
    *sizes_p = ak_calloc (n ? n : 1, sizeof **sizes_p);
    json_array_foreach (arr, i, v) {
        const char *name;
        json_t *size;
        s_index (p, key, i);
        if (!json_is_object (v))
            return s_bad (err, label, p, "must be an object {\"name\", \"size\"}");
        if ((rc = s_only (v, fields, label, p, err)) != 0
         || (rc = s_get_str (v, "name", true, label, p, &name, err)) != 0
         || (rc = s_get (v, "size", JSON_OBJECT, true, label, p, &size, err)) != 0)
            return rc;
        if (!s_name_ok (name))
            return s_bad (err, label, s_field (q, p, "name"),
                          "must match [a-z0-9_]+ (at most %d characters)", AK_MAX_NAME - 1);
        ak_size_t *sz = &(*sizes_p)[*n_p];
        rc = s_parse_dims (size, spec, label, s_field (q, p, "size"), sz->dims, err);
        if (rc)
            return rc;
        sz->name = ak_strdup (name);
        (*n_p)++;
        /* "backends": the backends the size is for (GPU-sized shapes the
           host backend and its float64 oracle should never be given). */
        json_t *bs = json_object_get (v, "backends"), *b;
        char bp[S_PATH];
        size_t k;
        if (bs && (!json_is_array (bs) || json_array_size (bs) == 0))
            return s_bad (err, label, s_field (q, p, "backends"),
                          "must be a non-empty array of backends (host, cuda)");
        json_array_foreach (bs, k, b) {
            unsigned bit = json_is_string (b) ? s_backend_bit (json_string_value (b)) : 0;
            if (!bit)
                return s_bad (err, label, s_index (q, s_field (bp, p, "backends"), k),
                              "unknown backend (host, cuda)");
            if (sz->backends & bit)
                return s_bad (err, label, s_index (q, s_field (bp, p, "backends"), k),
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
    char p[S_PATH], q[S_PATH], f[S_PATH];
    for (size_t i = 0; i < total; i++) {
        bool ei = i >= spec->nsizes;
        const ak_size_t *a = ei ? &spec->edge_sizes[i - spec->nsizes] : &spec->sizes[i];
        s_index (p, ei ? "edge_sizes" : "sizes", ei ? i - spec->nsizes : i);
        for (size_t j = 0; j < i; j++) {
            bool ej = j >= spec->nsizes;
            const ak_size_t *b = ej ? &spec->edge_sizes[j - spec->nsizes] : &spec->sizes[j];
            s_index (q, ej ? "edge_sizes" : "sizes", ej ? j - spec->nsizes : j);
            if (s_streq (a->name, b->name))
                return s_bad (err, label, s_field (f, p, "name"),
                              "duplicate size name '%s' (also %s)", a->name, q);
            if (memcmp (a->dims, b->dims, sizeof a->dims) == 0)
                return s_bad (err, label, s_field (f, p, "size"),
                              "duplicate size: same shape as %s ('%s')", q, b->name);
        }
        if (!ei && i > 0 && s_volume (spec, a->dims) < s_volume (spec, spec->sizes[i - 1].dims))
            return s_bad (err, label, p, "smaller than sizes[%zu] (list sizes smallest first: "
                          "sizes[0] is the smoke size)", i - 1);
        int rc = s_check_dims (spec, a->dims, label, p, err);
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
    char p[S_PATH], q[S_PATH];
    json_t *arr, *v;
    size_t i;
    int rc = s_get (root, key, JSON_ARRAY, true, label, "", &arr, err);
    if (rc)
        return rc;
    size_t n = json_array_size (arr);
    if ((!inputs && n == 0) || n > AK_MAX_BUFS)
        return s_bad (err, label, key, "must list %d to %d buffers", inputs ? 0 : 1, AK_MAX_BUFS);
    json_array_foreach (arr, i, v) {
        const char *name, *count;
        s_index (p, key, i);
        if (!json_is_object (v))
            return s_bad (err, label, p, "must be an object");
        if ((rc = s_only (v, inputs ? in_fields : out_fields, label, p, err)) != 0
         || (rc = s_get_str (v, "name", true, label, p, &name, err)) != 0
         || (rc = s_get_str (v, "count", true, label, p, &count, err)) != 0)
            return rc;
        if (!s_name_ok (name))
            return s_bad (err, label, s_field (q, p, "name"),
                          "must match [a-z0-9_]+ (at most %d characters)", AK_MAX_NAME - 1);
        for (int j = 0; j < spec->ninputs; j++)
            if (s_streq (spec->inputs[j].name, name))
                return s_bad (err, label, s_field (q, p, "name"),
                              "duplicate buffer name '%s'", name);
        for (int j = 0; j < spec->noutputs; j++)
            if (s_streq (spec->outputs[j].name, name))
                return s_bad (err, label, s_field (q, p, "name"),
                              "duplicate buffer name '%s'", name);
        rc = s_check_expr (count, (const char *const *) spec->keys, spec->nkeys, label,
                           s_field (q, p, "count"), err);
        if (rc)
            return rc;
        ak_buf_t *buf = inputs ? &spec->inputs[spec->ninputs] : &spec->outputs[spec->noutputs];
        if (inputs) {
            json_t *range;
            rc = s_get (v, "range", JSON_ARRAY, true, label, p, &range, err);
            if (rc)
                return rc;
            s_field (q, p, "range");
            json_t *lo = json_array_get (range, 0), *hi = json_array_get (range, 1);
            if (json_array_size (range) != 2 || !json_is_number (lo) || !json_is_number (hi))
                return s_bad (err, label, q, "must be [lo, hi]");
            buf->lo = json_number_value (lo);
            buf->hi = json_number_value (hi);
            if (!isfinite (buf->lo) || !isfinite (buf->hi))
                return s_bad (err, label, q, "must be finite");
            if (!(buf->lo < buf->hi))
                return s_bad (err, label, q, "lo must be less than hi");
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
    char p[S_PATH];
    if (!json_is_object (v))
        return s_bad (err, label, path, "must be an object {\"atol\", \"rtol\"}");
    int rc = s_only (v, fields, label, path, err);
    if (rc)
        return rc;
    for (int i = 0; i < 2; i++) {
        const char *key = i ? "rtol" : "atol";
        json_t *x;
        rc = s_get (v, key, JSON_REAL, true, label, path, &x, err);
        if (rc)
            return rc;
        double d = json_number_value (x);
        s_field (p, path, key);
        if (!isfinite (d))
            return s_bad (err, label, p, "must be finite");
        if (d < 0)
            return s_bad (err, label, p, "must be >= 0");
        if (i)
            tol->rtol = d;
        else
            tol->atol = d;
    }
    return 0;
}

/*  A tolerances object {dtype: {atol, rtol}} over declared dtypes; seen[i]
    is set for each spec->dtypes[i] it gives. */
static int s_parse_tols (json_t *obj, ak_spec_t *spec, const char *label, const char *path,
                         ak_tol_t tol[AK_DT_COUNT], bool seen[AK_DT_COUNT], ak_err_t *err)
{
    char p[S_PATH];
    const char *key;
    json_t *v;
    json_object_foreach (obj, key, v) {
        ak_dtype_t dt;
        s_field (p, path, key);
        if (ak_dtype_parse (key, &dt))
            return s_bad (err, label, p, "unknown dtype (float16, bfloat16, float32)");
        int pos = s_dtype_pos (spec, dt);
        if (pos < 0)
            return s_bad (err, label, p, "dtype not declared in %s's dtypes", spec->name);
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
        "stability_size", "flops", "bytes", "inputs", "outputs", "inplace", "reference",
        "reference_cuda", "baselines", "candidates", NULL };
    char p[S_PATH], q[S_PATH];
    json_t *v, *e;
    const char *s;
    size_t i;
    int rc;

    if (!json_is_object (root))
        return s_bad (err, label, "", "a spec must be a JSON object");
    if ((rc = s_only (root, fields, label, "", err)) != 0
     || (rc = s_get (root, "schema_version", JSON_INTEGER, true, label, "", &v, err)) != 0)
        return rc;
    if (json_integer_value (v) != AK_SPEC_SCHEMA_VERSION)
        return s_fail (err, AK_EVERSION, label, "schema_version", "unsupported version %lld "
                       "(this build reads %d)", (long long) json_integer_value (v),
                       AK_SPEC_SCHEMA_VERSION);

    if ((rc = s_get_str (root, "name", true, label, "", &s, err)) != 0)
        return rc;
    if (!s_name_ok (s))
        return s_bad (err, label, "name", "must match [a-z0-9_]+ (at most %d characters)",
                      AK_MAX_NAME - 1);
    spec->name = ak_strdup (s);

    /* keys */
    if ((rc = s_get (root, "keys", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > AK_MAX_DIMS)
        return s_bad (err, label, "keys", "must list 1 to %d shape keys", AK_MAX_DIMS);
    json_array_foreach (v, i, e) {
        s_index (p, "keys", i);
        if ((rc = s_str_value (e, label, p, &s, err)) != 0)
            return rc;
        if (!s_ident_ok (s))
            return s_bad (err, label, p, "must be an identifier [A-Za-z_][A-Za-z0-9_]* "
                          "(at most %d characters)", AK_MAX_NAME - 1);
        if (s_streq (s, "b"))
            return s_bad (err, label, p, "'b' is reserved (bytes per element)");
        if (ak_spec_key_index (spec, s) >= 0)
            return s_bad (err, label, p, "duplicate key '%s'", s);
        spec->keys[spec->nkeys++] = ak_strdup (s);
    }

    /* dtypes, tolerances */
    if ((rc = s_get (root, "dtypes", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > AK_DT_COUNT)
        return s_bad (err, label, "dtypes", "must list 1 to %d dtypes", AK_DT_COUNT);
    json_array_foreach (v, i, e) {
        ak_dtype_t dt;
        s_index (p, "dtypes", i);
        if ((rc = s_str_value (e, label, p, &s, err)) != 0)
            return rc;
        if (ak_dtype_parse (s, &dt))
            return s_bad (err, label, p, "unknown dtype (float16, bfloat16, float32)");
        if (s_dtype_pos (spec, dt) >= 0)
            return s_bad (err, label, p, "duplicate dtype '%s'", s);
        spec->dtypes[spec->ndtypes++] = dt;
    }
    if ((rc = s_get (root, "tolerances", JSON_OBJECT, true, label, "", &v, err)) != 0)
        return rc;
    bool seen[AK_DT_COUNT] = { false };
    if ((rc = s_parse_tols (v, spec, label, "tolerances", spec->tol, seen, err)) != 0)
        return rc;
    for (int t = 0; t < spec->ndtypes; t++)
        if (!seen[t])
            return s_bad (err, label, s_field (p, "tolerances", ak_dtype_name (spec->dtypes[t])),
                          "missing (every declared dtype needs a tolerance)");

    /* sizes */
    if ((rc = s_parse_size_list (root, "sizes", true, spec, label, &spec->sizes,
                                 &spec->nsizes, err)) != 0
     || (rc = s_parse_size_list (root, "edge_sizes", false, spec, label, &spec->edge_sizes,
                                 &spec->nedge, err)) != 0
     || (rc = s_get_str (root, "stability_size", true, label, "", &s, err)) != 0)
        return rc;
    if (!s_find_size (spec->sizes, spec->nsizes, s))
        return s_bad (err, label, "stability_size", "'%s' is not one of the sizes",
                      s_show (s, p));
    spec->stability_size = ak_strdup (s);

    /* flops, bytes, buffers */
    const char *names[AK_MAX_DIMS + 1];
    for (int k = 0; k < spec->nkeys; k++)
        names[k] = spec->keys[k];
    names[spec->nkeys] = "b";
    if ((rc = s_get_str (root, "flops", true, label, "", &s, err)) != 0
     || (rc = s_check_expr (s, names, spec->nkeys, label, "flops", err)) != 0)
        return rc;
    spec->flops = ak_strdup (s);
    if ((rc = s_get_str (root, "bytes", true, label, "", &s, err)) != 0
     || (rc = s_check_expr (s, names, spec->nkeys + 1, label, "bytes", err)) != 0)
        return rc;
    spec->bytes = ak_strdup (s);
    if ((rc = s_parse_bufs (root, true, spec, label, err)) != 0
     || (rc = s_parse_bufs (root, false, spec, label, err)) != 0
     || (rc = s_get (root, "inplace", JSON_TRUE, false, label, "", &v, err)) != 0)
        return rc;
    spec->inplace = v && json_is_true (v);
    if (spec->inplace && spec->noutputs > spec->ninputs)
        return s_bad (err, label, "inplace", "an in-place spec needs an input for each output");
    if ((rc = s_check_sizes (spec, label, err)) != 0)
        return rc;

    /* reference, baselines */
    if (!(v = json_object_get (root, "reference")))
        return s_bad (err, label, "reference", "missing");
    if ((rc = s_parse_source (v, label, "reference", base_dir, true, &spec->reference, err)) != 0)
        return rc;
    if ((v = json_object_get (root, "reference_cuda"))) {
        static const char *const rfields[] = { "source", "launch", NULL };
        if (!json_is_object (v))
            return s_bad (err, label, "reference_cuda", "must be an object {\"source\", \"launch\"}");
        if ((rc = s_only (v, rfields, label, "reference_cuda", err)) != 0)
            return rc;
        if (!(e = json_object_get (v, "source")))
            return s_bad (err, label, "reference_cuda.source", "missing");
        rc = s_parse_source (e, label, "reference_cuda.source", base_dir, true, &spec->reference_cuda, err);
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
        return s_bad (err, label, "sizes[0].backends", "the smoke size runs on every backend");
    if (stab && stab->backends)
        return s_bad (err, label, "stability_size", "'%s' names backends; the stability size "
                      "runs on every backend", stab->name);
    if ((rc = s_get (root, "baselines", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > 8)
        return s_bad (err, label, "baselines", "must list 1 to 8 baselines (one per backend)");
    spec->baselines = ak_calloc (json_array_size (v), sizeof *spec->baselines);
    json_array_foreach (v, i, e) {
        static const char *const bfields[] = { "backend", "source", "launch", NULL };
        json_t *src;
        s_index (p, "baselines", i);
        if (!json_is_object (e))
            return s_bad (err, label, p, "must be an object {\"backend\", \"source\"}");
        if ((rc = s_only (e, bfields, label, p, err)) != 0
         || (rc = s_get_str (e, "backend", true, label, p, &s, err)) != 0)
            return rc;
        if (!s_backend_ok (s))
            return s_bad (err, label, s_field (q, p, "backend"), "unknown backend (host, cuda)");
        if (ak_spec_baseline (spec, s))
            return s_bad (err, label, s_field (q, p, "backend"),
                          "duplicate baseline for backend '%s'", s);
        if (!(src = json_object_get (e, "source")))
            return s_bad (err, label, s_field (q, p, "source"), "missing");
        ak_baseline_t *bl = &spec->baselines[spec->nbaselines++];
        bl->backend = ak_strdup (s);
        rc = s_parse_source (src, label, s_field (q, p, "source"), base_dir, true, &bl->source, err);
        if (rc)
            return rc;
        rc = s_parse_launch_of (e, bl->backend, spec, NULL, 0, label, p, &bl->launch, err);
        if (rc)
            return rc;
    }

    /* candidates */
    if ((rc = s_get (root, "candidates", JSON_ARRAY, false, label, "", &v, err)) != 0)
        return rc;
    size_t nc = v ? json_array_size (v) : 0;
    if (nc > S_MAX_CANDIDATES)
        return s_bad (err, label, "candidates", "at most %d candidates", S_MAX_CANDIDATES);
    spec->candidates = ak_calloc (nc ? nc : 1, sizeof *spec->candidates);
    for (i = 0; i < nc; i++) {
        s_index (p, "candidates", i);
        ak_candidate_t *cand = &spec->candidates[spec->ncandidates++];
        rc = s_parse_candidate (json_array_get (v, i), spec, label, p, base_dir, true, cand, err);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (s_streq (spec->candidates[j].name, cand->name))
                return s_bad (err, label, s_field (q, p, "name"),
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
    int rc = s_json_load (text, len, label, &root, err);
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
    int rc = ak_file_read (path, S_MAX_FILE_BYTES, &text, &len, err);
    if (rc)
        goto fail;
    rc = s_json_load (text, len, path, &root, err);
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

/* ---------------------------------------------------------- spec to JSON */

static json_t *s_dims_json (const ak_spec_t *spec, const int64_t *dims)
{
    json_t *o = json_object ();
    for (int k = 0; k < spec->nkeys; k++)
        json_object_set_new (o, spec->keys[k], json_integer ((json_int_t) dims[k]));
    return o;
}

static json_t *s_sizes_json (const ak_spec_t *spec, const ak_size_t *sizes, size_t n)
{
    json_t *a = json_array ();
    for (size_t i = 0; i < n; i++)
    {
        json_t *o = json_pack ("{s:s, s:o}", "name", sizes[i].name,
                               "size", s_dims_json (spec, sizes[i].dims));
        if (o && sizes[i].backends) {
            json_t *bs = json_array ();
            if (sizes[i].backends & AK_BACKEND_HOST)
                json_array_append_new (bs, json_string ("host"));
            if (sizes[i].backends & AK_BACKEND_CUDA)
                json_array_append_new (bs, json_string ("cuda"));
            json_object_set_new (o, "backends", bs);
        }
        json_array_append_new (a, o);
    }
    return a;
}

static json_t *s_tol_json (const ak_tol_t *tol)
{
    return json_pack ("{s:f, s:f}", "atol", tol->atol, "rtol", tol->rtol);
}

static json_t *s_source_json (const ak_source_t *src, bool with_text)
{
    json_t *o = json_object ();
    json_object_set_new (o, "name", json_string (src->name ? src->name : ""));
    if (with_text && src->text)
        json_object_set_new (o, "text", json_stringn (src->text, strlen (src->text)));
    else
        json_object_set_new (o, "digest", json_string (src->digest));
    return o;
}

static json_t *s_launch_json (const ak_launch_rule_t *rule)
{
    json_t *grid = json_array (), *block = json_array ();
    for (int i = 0; i < rule->ngrid; i++)
        json_array_append_new (grid, json_string (rule->grid[i]));
    for (int i = 0; i < rule->nblock; i++)
        json_array_append_new (block, json_string (rule->block[i]));
    return json_pack ("{s:o, s:o, s:s}", "grid", grid, "block", block,
                      "shared", rule->shared ? rule->shared : "0");
}

static json_t *s_candidate_json (const ak_candidate_t *cand, bool with_text)
{
    json_t *params = json_object (), *constraints = json_array ();
    for (size_t i = 0; i < cand->nparams; i++) {
        json_t *vals = json_array ();
        for (size_t j = 0; j < cand->params[i].nvalues; j++)
            json_array_append_new (vals, json_integer ((json_int_t) cand->params[i].values[j]));
        json_object_set_new (params, cand->params[i].name, vals);
    }
    for (size_t i = 0; i < cand->nconstraints; i++)
        json_array_append_new (constraints, json_string (cand->constraints[i]));
    json_t *o = json_pack ("{s:s, s:s, s:o, s:o, s:o}", "name", cand->name, "backend", cand->backend,
                           "source", s_source_json (&cand->source, with_text),
                           "params", params, "constraints", constraints);
    if (o && cand->launch)
        json_object_set_new (o, "launch", s_launch_json (cand->launch));
    return o;
}

static json_t *s_bufs_json (const ak_buf_t *bufs, int n, bool inputs)
{
    json_t *a = json_array ();
    for (int i = 0; i < n; i++) {
        json_t *o = json_pack ("{s:s, s:s}", "name", bufs[i].name, "count", bufs[i].count);
        if (inputs)
            json_object_set_new (o, "range", json_pack ("[f, f]", bufs[i].lo, bufs[i].hi));
        json_array_append_new (a, o);
    }
    return a;
}

json_t *ak_spec_to_json (const ak_spec_t *spec, bool with_sources)
{
    if (!spec)
        return NULL;
    json_t *o = json_object (), *keys = json_array (), *dtypes = json_array ();
    json_t *tols = json_object (), *baselines = json_array (), *cands = json_array ();
    for (int k = 0; k < spec->nkeys; k++)
        json_array_append_new (keys, json_string (spec->keys[k]));
    for (int t = 0; t < spec->ndtypes; t++) {
        json_array_append_new (dtypes, json_string (ak_dtype_name (spec->dtypes[t])));
        json_object_set_new (tols, ak_dtype_name (spec->dtypes[t]), s_tol_json (&spec->tol[t]));
    }
    json_object_set_new (o, "schema_version", json_integer (AK_SPEC_SCHEMA_VERSION));
    json_object_set_new (o, "name", json_string (spec->name));
    json_object_set_new (o, "keys", keys);
    json_object_set_new (o, "dtypes", dtypes);
    json_object_set_new (o, "tolerances", tols);
    json_object_set_new (o, "sizes", s_sizes_json (spec, spec->sizes, spec->nsizes));
    if (spec->nedge)
        json_object_set_new (o, "edge_sizes", s_sizes_json (spec, spec->edge_sizes, spec->nedge));
    json_object_set_new (o, "stability_size", json_string (spec->stability_size));
    json_object_set_new (o, "flops", json_string (spec->flops));
    json_object_set_new (o, "bytes", json_string (spec->bytes));
    json_object_set_new (o, "inputs", s_bufs_json (spec->inputs, spec->ninputs, true));
    json_object_set_new (o, "outputs", s_bufs_json (spec->outputs, spec->noutputs, false));
    json_object_set_new (o, "inplace", json_boolean (spec->inplace));
    json_object_set_new (o, "reference", s_source_json (&spec->reference, with_sources));
    if (spec->reference_cuda.name && spec->reference_cuda_launch) {
        /* Always with its text where there is one: no task field carries it. */
        json_t *r = json_pack ("{s:o, s:o}", "source",
                               s_source_json (&spec->reference_cuda, with_sources || spec->reference_cuda.text),
                               "launch", s_launch_json (spec->reference_cuda_launch));
        json_object_set_new (o, "reference_cuda", r);
    }
    for (size_t i = 0; i < spec->nbaselines; i++) {
        const ak_baseline_t *bl = &spec->baselines[i];
        json_t *b = json_pack ("{s:s, s:o}", "backend", bl->backend,
                               "source", s_source_json (&bl->source, with_sources));
        if (b && bl->launch)
            json_object_set_new (b, "launch", s_launch_json (bl->launch));
        json_array_append_new (baselines, b);
    }
    json_object_set_new (o, "baselines", baselines);
    for (size_t i = 0; i < spec->ncandidates; i++)
        json_array_append_new (cands, s_candidate_json (&spec->candidates[i], with_sources));
    json_object_set_new (o, "candidates", cands);
    return o;
}

char *ak_spec_to_text (const ak_spec_t *spec, bool with_sources)
{
    json_t *o = ak_spec_to_json (spec, with_sources);
    if (!o)
        return NULL;
    char *text = json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref (o);
    return text;
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

/* ----------------------------------------------------------------- policy */

/*  policy.search {strategy, budget, keep, rounds, short_max_time_ms},
    policy.confirm and policy.implausible: over the defaults, range-checked. */
static int s_parse_search (json_t *obj, const char *label, ak_policy_t *pol, ak_err_t *err)
{
    static const struct { const char *name; size_t off; uint32_t min; uint32_t max; } u32[] = {
        { "budget",            offsetof (ak_policy_t, search_budget),     1, 100000 },
        { "keep",              offsetof (ak_policy_t, search_keep),       1, 100000 },
        { "rounds",            offsetof (ak_policy_t, search_rounds),     2, 16 },
        { "short_max_time_ms", offsetof (ak_policy_t, short_max_time_ms), 1, UINT32_MAX },
    };
    static const char *const fields[] = { "strategy", "budget", "keep", "rounds", "short_max_time_ms", NULL };
    json_t *search = NULL, *v;
    const char *strategy = NULL;
    char p[S_PATH];
    int rc;
    if ((rc = s_get (obj, "confirm", JSON_TRUE, false, label, "policy", &v, err)) != 0)
        return rc;
    if (v)
        pol->confirm = json_is_true (v);
    if ((rc = s_get (obj, "implausible", JSON_REAL, false, label, "policy", &v, err)) != 0)
        return rc;
    if (v) {
        double x = json_number_value (v);
        if (!isfinite (x) || x <= 1.0 || x > 1e6)
            return s_bad (err, label, "policy.implausible", "must be in (1, 1e6]");
        pol->implausible = x;
    }
    if ((rc = s_get (obj, "search", JSON_OBJECT, false, label, "policy", &search, err)) != 0)
        return rc;
    if (!search)
        return 0;
    if ((rc = s_only (search, fields, label, "policy.search", err)) != 0)
        return rc;
    if ((rc = s_get_str (search, "strategy", false, label, "policy.search", &strategy, err)) != 0)
        return rc;
    if (strategy) {
        if (strcmp (strategy, "exhaustive") != 0 && strcmp (strategy, "halving") != 0)
            return s_bad (err, label, "policy.search.strategy", "must be \"exhaustive\" or \"halving\"");
        snprintf (pol->search_strategy, sizeof pol->search_strategy, "%s", strategy);
    }
    for (size_t i = 0; i < sizeof u32 / sizeof u32[0]; i++) {
        if ((rc = s_get (search, u32[i].name, JSON_INTEGER, false, label, "policy.search", &v, err)) != 0)
            return rc;
        if (!v)
            continue;
        json_int_t x = json_integer_value (v);
        if (x < (json_int_t) u32[i].min || x > (json_int_t) u32[i].max)
            return s_bad (err, label, s_field (p, "policy.search", u32[i].name),
                          "must be an integer in [%u, %u]", u32[i].min, u32[i].max);
        *(uint32_t *) ((char *) pol + u32[i].off) = (uint32_t) x;
    }
    if (pol->search_keep > pol->search_budget)
        return s_bad (err, label, "policy.search.keep", "must not exceed policy.search.budget "
                      "(%u > %u)", pol->search_keep, pol->search_budget);
    return 0;
}

/*  policy: every field optional over ak_policy_defaults, each range-checked. */
static int s_parse_policy (json_t *obj, const char *label, ak_policy_t *pol, ak_err_t *err)
{
    static const struct { const char *name; size_t off; uint32_t min; } u32[] = {
        { "max_attempts",       offsetof (ak_policy_t, max_attempts),       1 },
        { "compile_timeout_ms", offsetof (ak_policy_t, compile_timeout_ms), 1 },
        { "run_timeout_ms",     offsetof (ak_policy_t, run_timeout_ms),     1 },
        { "lease_ms",           offsetof (ak_policy_t, lease_ms),           1 },
        { "warmup",             offsetof (ak_policy_t, warmup),             0 },
        { "min_samples",        offsetof (ak_policy_t, min_samples),        2 },
        { "max_samples",        offsetof (ak_policy_t, max_samples),        2 },
        { "max_time_ms",        offsetof (ak_policy_t, max_time_ms),        1 },
    };
    static const struct { const char *name; size_t off; double lo; bool lo_open; double hi; } dbl[] = {
        { "rsd_target",     offsetof (ak_policy_t, rsd_target),     0, true,  1 },
        { "threshold",      offsetof (ak_policy_t, threshold),      0, false, 1 },
        { "max_regression", offsetof (ak_policy_t, max_regression), 0, false, 1 },
    };
    static const char *const fields[] = {
        "max_attempts", "compile_timeout_ms", "run_timeout_ms", "lease_ms", "warmup",
        "min_samples", "max_samples", "rsd_target", "max_time_ms", "threshold",
        "max_regression", "seed", "search", "confirm", "implausible", NULL };
    char p[S_PATH];
    json_t *v;
    int rc;

    ak_policy_defaults (pol);
    if (!obj)
        return 0;
    if ((rc = s_only (obj, fields, label, "policy", err)) != 0)
        return rc;
    for (size_t i = 0; i < sizeof u32 / sizeof u32[0]; i++) {
        if ((rc = s_get (obj, u32[i].name, JSON_INTEGER, false, label, "policy", &v, err)) != 0)
            return rc;
        if (!v)
            continue;
        json_int_t x = json_integer_value (v);
        if (x < (json_int_t) u32[i].min || x > (json_int_t) UINT32_MAX)
            return s_bad (err, label, s_field (p, "policy", u32[i].name),
                          "must be an integer in [%u, %u]", u32[i].min, UINT32_MAX);
        *(uint32_t *) ((char *) pol + u32[i].off) = (uint32_t) x;
    }
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++) {
        if ((rc = s_get (obj, dbl[i].name, JSON_REAL, false, label, "policy", &v, err)) != 0)
            return rc;
        if (!v)
            continue;
        double x = json_number_value (v);
        if (!isfinite (x) || (dbl[i].lo_open ? x <= dbl[i].lo : x < dbl[i].lo) || x >= dbl[i].hi)
            return s_bad (err, label, s_field (p, "policy", dbl[i].name),
                          "must be in %s%g, %g)", dbl[i].lo_open ? "(" : "[", dbl[i].lo, dbl[i].hi);
        *(double *) ((char *) pol + dbl[i].off) = x;
    }
    if ((rc = s_get (obj, "seed", JSON_INTEGER, false, label, "policy", &v, err)) != 0)
        return rc;
    if (v) {
        if (json_integer_value (v) < 0)
            return s_bad (err, label, "policy.seed", "must be a non-negative integer");
        pol->seed = (uint64_t) json_integer_value (v);
    }
    if (pol->min_samples > pol->max_samples)
        return s_bad (err, label, "policy.min_samples", "must not exceed policy.max_samples "
                      "(%u > %u)", pol->min_samples, pol->max_samples);
    return s_parse_search (obj, label, pol, err);
}

/* -------------------------------------------------------------- workloads */

/*  One workload: a size name, or {name?, size?, dtype?, weight?}. */
static int s_parse_workload (json_t *v, ak_manifest_op_t *op, size_t index, const char *label,
                             const char *path, ak_workload_t *wl, ak_err_t *err)
{
    static const char *const fields[] = { "name", "size", "dtype", "weight", NULL };
    const ak_spec_t *spec = op->spec;
    char p[S_PATH], shown[72];
    const char *name = NULL, *dtype = NULL;
    json_t *size = NULL, *weight = NULL;
    int rc;

    wl->dtype = spec->dtypes[0];
    wl->weight = 1;
    if (json_is_string (v)) {
        if ((rc = s_str_value (v, label, path, &name, err)) != 0)
            return rc;
    }
    else if (json_is_object (v)) {
        if ((rc = s_only (v, fields, label, path, err)) != 0
         || (rc = s_get_str (v, "name", false, label, path, &name, err)) != 0
         || (rc = s_get (v, "size", JSON_OBJECT, false, label, path, &size, err)) != 0
         || (rc = s_get_str (v, "dtype", false, label, path, &dtype, err)) != 0
         || (rc = s_get (v, "weight", JSON_REAL, false, label, path, &weight, err)) != 0)
            return rc;
    }
    else
        return s_bad (err, label, path, "must be a size name or an object");

    const ak_size_t *named = name ? ak_spec_size (spec, name) : NULL;
    if (size) {
        if (name && !s_label_ok (name, false))
            return s_bad (err, label, s_field (p, path, "name"),
                          "must match [a-z0-9_-]+ (at most %d characters)", AK_MAX_NAME - 1);
        rc = s_parse_dims (size, spec, label, s_field (p, path, "size"), wl->dims, err);
        if (rc)
            return rc;
        if (named && memcmp (named->dims, wl->dims, sizeof wl->dims) != 0)
            return s_bad (err, label, s_field (p, path, "name"),
                          "'%s' is a size of %s with a different shape", name, spec->name);
        wl->name = name ? ak_strdup (name) : ak_sprintf ("custom-%zu", index);
    }
    else {
        const char *where = json_is_string (v) ? path : s_field (p, path, "name");
        if (!name)
            return s_bad (err, label, where, "missing (a workload names a size or gives one)");
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
            return s_bad (err, label, where, "unknown size '%s' (%s has: %s)",
                          s_show (name, shown), spec->name, have);
        }
        memcpy (wl->dims, named->dims, sizeof wl->dims);
        wl->name = ak_strdup (name);
    }
    if (dtype) {
        s_field (p, path, "dtype");
        if (ak_dtype_parse (dtype, &wl->dtype))
            return s_bad (err, label, p, "unknown dtype (float16, bfloat16, float32)");
        if (!ak_spec_has_dtype (spec, wl->dtype))
            return s_bad (err, label, p, "dtype not declared in %s's dtypes", spec->name);
    }
    if (weight) {
        wl->weight = json_number_value (weight);
        if (!isfinite (wl->weight) || wl->weight <= 0)
            return s_bad (err, label, s_field (p, path, "weight"), "must be a finite number > 0");
    }
    return s_check_dims (spec, wl->dims, label, path, err);
}

static int s_parse_workloads (json_t *opj, ak_manifest_op_t *op, const char *label,
                              const char *path, ak_err_t *err)
{
    char p[S_PATH], q[S_PATH];
    json_t *arr;
    int rc = s_get (opj, "workloads", JSON_ARRAY, false, label, path, &arr, err);
    if (rc)
        return rc;
    const ak_spec_t *spec = op->spec;
    s_field (p, path, "workloads");
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
        return s_bad (err, label, p, "must list 1 to %d workloads", S_MAX_WORKLOADS);
    op->workloads = ak_calloc (n, sizeof *op->workloads);
    for (size_t i = 0; i < n; i++) {
        ak_workload_t *wl = &op->workloads[op->nworkloads++];
        s_index (q, p, i);
        rc = s_parse_workload (json_array_get (arr, i), op, i, label, q, wl, err);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++) {
            const ak_workload_t *o = &op->workloads[j];
            if (o->dtype != wl->dtype)
                continue;
            if (s_streq (o->name, wl->name))
                return s_bad (err, label, q, "duplicate workload '%s' %s (also workloads[%zu])",
                              wl->name, ak_dtype_name (wl->dtype), j);
            if (memcmp (o->dims, wl->dims, sizeof wl->dims) == 0)
                return s_bad (err, label, q, "same shape and dtype as workloads[%zu] ('%s')",
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
    char p[S_PATH], shown[72];
    const char *rel;
    int rc = s_get_str (opj, "corpus", false, label, path, &rel, err);
    if (rc || !rel)
        return rc;
    s_field (p, path, "corpus");
    if (!base_dir)
        return s_bad (err, label, p, "a bundle carries workloads, not a corpus file ('%s')",
                      s_show (rel, shown));
    if (!*rel)
        return s_bad (err, label, p, "must be a file path");
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
        return s_bad (err, label, p, "more than %d workloads in all", S_MAX_WORKLOADS);
    }
    op->workloads = ak_realloc (op->workloads, (op->nworkloads + corpus->ncases)
                                               * sizeof *op->workloads);
    for (size_t i = 0; i < corpus->ncases && rc == 0; i++) {
        const ak_corpus_case_t *c = &corpus->cases[i];
        char where[S_PATH * 2];
        snprintf (where, sizeof where, "%s (%s: cases[%zu])", p, s_show (op->corpus_path, shown), i);
        for (size_t j = 0; j < op->nworkloads && rc == 0; j++) {
            const ak_workload_t *o = &op->workloads[j];
            if (o->dtype == c->dtype && (s_streq (o->name, c->name)
                                         || memcmp (o->dims, c->dims, sizeof c->dims) == 0))
                rc = s_bad (err, label, where, "case '%s' %s is workloads[%zu] ('%s') again",
                            c->name, ak_dtype_name (c->dtype), j, o->name);
        }
        if (rc == 0)
            rc = s_check_dims (op->spec, c->dims, label, where, err);
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
        if (s_streq (ak_class_backend (m->targets[i]), backend))
            return true;
    return false;
}

static bool s_selected (const ak_manifest_op_t *op, const char *name)
{
    for (size_t i = 0; i < op->ncandidates; i++)
        if (s_streq (op->candidates[i], name))
            return true;
    return false;
}

/*  Every source of the spec carries its text (a manifest or bundle must be
    complete; only worker-side specs omit sources). */
static int s_spec_complete (const ak_spec_t *spec, const char *label, const char *path,
                            ak_err_t *err)
{
    char p[S_PATH];
    if (!spec->reference.text)
        return s_bad (err, label, path, "reference: source text missing");
    if (spec->reference_cuda.name && !spec->reference_cuda.text)
        return s_bad (err, label, path, "reference_cuda.source: source text missing");
    for (size_t i = 0; i < spec->nbaselines; i++)
        if (!spec->baselines[i].source.text)
            return s_bad (err, label, path, "%s.source: source text missing",
                          s_index (p, "baselines", i));
    for (size_t i = 0; i < spec->ncandidates; i++)
        if (!spec->candidates[i].source.text)
            return s_bad (err, label, path, "%s.source: source text missing",
                          s_index (p, "candidates", i));
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
    char path[S_PATH], p[S_PATH], q[S_PATH], shown[72];
    json_t *v;
    int rc;

    s_index (path, "ops", index);
    if (!json_is_object (opj))
        return s_bad (err, label, path, "must be an object");
    if ((rc = s_only (opj, fields, label, path, err)) != 0)
        return rc;

    /* spec */
    s_field (p, path, "spec");
    v = json_object_get (opj, "spec");
    if (!v)
        return s_bad (err, label, p, "missing");
    if (json_is_string (v)) {
        const char *rel;
        if ((rc = s_str_value (v, label, p, &rel, err)) != 0)
            return rc;
        if (!base_dir)
            return s_bad (err, label, p, "a bundle must carry the spec inline, "
                          "not a file path ('%s')", s_show (rel, shown));
        if (!*rel)
            return s_bad (err, label, p, "must be a file path or an inline spec");
        op->spec_path = ak_path_join (base_dir, rel);
        rc = ak_spec_load (op->spec_path, &op->spec, err);
        if (rc)
            return ak_err_prefix (err, "%s: %s", label, p);
    }
    else if (json_is_object (v)) {
        char sublabel[S_PATH * 2];
        snprintf (sublabel, sizeof sublabel, "%s: %s", label, p);
        rc = ak_spec_parse (v, sublabel, base_dir, &op->spec, err);
        if (rc)
            return rc;
    }
    else
        return s_bad (err, label, p, "must be a file path or an inline spec object");
    ak_spec_t *spec = op->spec;
    if ((rc = s_spec_complete (spec, label, p, err)) != 0)
        return rc;
    for (size_t i = 0; i < index; i++)
        if (s_streq (m->ops[i].spec->name, spec->name))
            return s_bad (err, label, p, "operator '%s' is already in ops[%zu]", spec->name, i);
    for (size_t t = 0; t < m->ntargets; t++) {
        const char *backend = ak_class_backend (m->targets[t]);
        if (!ak_spec_baseline (spec, backend))
            return s_bad (err, label, p, "%s has no baseline for backend '%s' "
                          "(needed by target '%s')", spec->name, backend, m->targets[t]);
    }

    /* extra_candidates: appended to the spec, always selected. */
    size_t nspec = spec->ncandidates;
    if ((rc = s_get (opj, "extra_candidates", JSON_ARRAY, false, label, path, &v, err)) != 0)
        return rc;
    size_t nextra = v ? json_array_size (v) : 0;
    s_field (p, path, "extra_candidates");
    if (nspec + nextra > S_MAX_CANDIDATES)
        return s_bad (err, label, p, "more than %d candidates in all", S_MAX_CANDIDATES);
    if (nextra) {
        spec->candidates = ak_realloc (spec->candidates, (nspec + nextra) * sizeof *spec->candidates);
        memset (spec->candidates + nspec, 0, nextra * sizeof *spec->candidates);
    }
    for (size_t i = 0; i < nextra; i++) {
        ak_candidate_t *cand = &spec->candidates[spec->ncandidates++];
        s_index (q, p, i);
        rc = s_parse_candidate (json_array_get (v, i), spec, label, q, base_dir, false, cand, err);
        if (rc)
            return rc;
        for (size_t j = 0; j + 1 < spec->ncandidates; j++)
            if (s_streq (spec->candidates[j].name, cand->name))
                return s_bad (err, label, s_field (p, q, "name"), "'%s' is already a candidate "
                              "of %s", cand->name, spec->name);
    }

    /* candidates: a subset by name; default all whose backend a target runs. */
    if ((rc = s_get (opj, "candidates", JSON_ARRAY, false, label, path, &v, err)) != 0)
        return rc;
    s_field (p, path, "candidates");
    op->candidates = ak_calloc (spec->ncandidates ? spec->ncandidates : 1, sizeof *op->candidates);
    if (v) {
        size_t i;
        json_t *e;
        if (json_array_size (v) > spec->ncandidates)
            return s_bad (err, label, p, "more names than %s has candidates", spec->name);
        json_array_foreach (v, i, e) {
            const char *name;
            s_index (q, p, i);
            if ((rc = s_str_value (e, label, q, &name, err)) != 0)
                return rc;
            const ak_candidate_t *cand = ak_spec_candidate (spec, name);
            if (!cand)
                return s_bad (err, label, q, "unknown candidate '%s' of %s",
                              s_show (name, shown), spec->name);
            if (s_selected (op, name))
                return s_bad (err, label, q, "duplicate candidate '%s'", name);
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
            return s_bad (err, label, p, "candidate '%s' is for backend '%s', which no target "
                          "runs", cand->name, cand->backend);
    }

    /* tolerances: overrides per declared dtype. */
    if ((rc = s_get (opj, "tolerances", JSON_OBJECT, false, label, path, &v, err)) != 0)
        return rc;
    if (v) {
        bool seen[AK_DT_COUNT] = { false };
        ak_tol_t tol[AK_DT_COUNT];
        memcpy (tol, spec->tol, sizeof tol);
        rc = s_parse_tols (v, spec, label, s_field (p, path, "tolerances"), tol, seen, err);
        if (rc)
            return rc;
        memcpy (spec->tol, tol, sizeof tol);
    }
    /* profile: CUPTI range-profiler tasks for the baseline and every
       selected configuration, on cuda targets (docs/formats.md). */
    v = json_object_get (opj, "profile");
    if (v && !json_is_boolean (v))
        return s_bad (err, label, s_field (p, path, "profile"), "must be true or false");
    op->profile = v && json_is_true (v);
    /* override_builtin: recorded; whether it overrides anything is for
       the catalog check (ak_catalog_check), which knows the catalog. */
    v = json_object_get (opj, "override_builtin");
    if (v && !json_is_boolean (v))
        return s_bad (err, label, s_field (p, path, "override_builtin"), "must be true or false");
    op->override_builtin = v && json_is_true (v);
    if ((rc = s_parse_workloads (opj, op, label, path, err)) != 0
     || (rc = s_parse_corpus (opj, op, label, path, base_dir, err)) != 0)
        return rc;
    /* A size meant for some backends is not timed on the others. */
    char wp[S_PATH], wq[S_PATH];
    for (size_t w = 0; w < op->nworkloads; w++) {
        const ak_size_t *z = ak_spec_size (spec, op->workloads[w].name);
        if (!z || !z->backends)
            continue;
        for (size_t t = 0; t < m->ntargets; t++)
            if (!ak_size_for_backend (z, ak_class_backend (m->targets[t])))
                return s_bad (err, label, s_index (wq, s_field (wp, path, "workloads"), w),
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
    char p[S_PATH];
    json_t *v, *e;
    const char *s;
    size_t i;
    int rc;

    if (!json_is_object (root))
        return s_bad (err, label, "", "a manifest must be a JSON object");
    if ((rc = s_only (root, fields, label, "", err)) != 0
     || (rc = s_get (root, "schema_version", JSON_INTEGER, true, label, "", &v, err)) != 0)
        return rc;
    if (json_integer_value (v) != AK_MANIFEST_SCHEMA_VERSION)
        return s_fail (err, AK_EVERSION, label, "schema_version", "unsupported version %lld "
                       "(this build reads %d)", (long long) json_integer_value (v),
                       AK_MANIFEST_SCHEMA_VERSION);
    if ((rc = s_get_str (root, "name", true, label, "", &s, err)) != 0)
        return rc;
    if (!s_label_ok (s, true))
        return s_bad (err, label, "name", "must match [A-Za-z0-9_.-]+ (at most %d characters)",
                      AK_MAX_NAME - 1);
    m->name = ak_strdup (s);

    if ((rc = s_get (root, "targets", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > S_MAX_TARGETS)
        return s_bad (err, label, "targets", "must list 1 to %d device classes", S_MAX_TARGETS);
    m->targets = ak_calloc (json_array_size (v), sizeof *m->targets);
    json_array_foreach (v, i, e) {
        s_index (p, "targets", i);
        if ((rc = s_str_value (e, label, p, &s, err)) != 0)
            return rc;
        if (!s_class_ok (s))
            return s_bad (err, label, p, "a device class must match [A-Za-z0-9_./-]+ "
                          "(at most %d characters)", AK_MAX_NAME - 1);
        for (size_t j = 0; j < m->ntargets; j++)
            if (s_streq (m->targets[j], s))
                return s_bad (err, label, p, "duplicate target '%s'", s);
        m->targets[m->ntargets++] = ak_strdup (s);
    }

    if ((rc = s_get (root, "policy", JSON_OBJECT, false, label, "", &v, err)) != 0
     || (rc = s_parse_policy (v, label, &m->policy, err)) != 0)
        return rc;

    if ((rc = s_get (root, "ops", JSON_ARRAY, true, label, "", &v, err)) != 0)
        return rc;
    if (json_array_size (v) == 0 || json_array_size (v) > S_MAX_OPS)
        return s_bad (err, label, "ops", "must list 1 to %d operators", S_MAX_OPS);
    m->ops = ak_calloc (json_array_size (v), sizeof *m->ops);
    json_array_foreach (v, i, e) {
        rc = s_parse_op (e, m, i, label, base_dir, &m->ops[m->nops++], err);
        if (rc)
            return rc;
    }
    return 0;
}

static int s_manifest_from_text (const char *text, size_t len, const char *label,
                                 const char *base_dir, ak_manifest_t **manifest_p, ak_err_t *err)
{
    json_t *root = NULL;
    int rc = s_json_load (text, len, label, &root, err);
    if (rc)
        return rc;
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
    if (!path || !manifest_p)
        return ak_err_set (err, AK_EINVAL, "ak_manifest_load: missing argument");
    *manifest_p = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = ak_file_read (path, S_MAX_FILE_BYTES, &text, &len, err);
    if (rc)
        return rc;
    char *dir = ak_dirname (path);
    rc = s_manifest_from_text (text, len, path, dir, manifest_p, err);
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
    return s_manifest_from_text (text, len, label ? label : "bundle", NULL, manifest_p, err);
}

/*  Same shape as a manifest, self-contained: inline specs with sources (extra
    candidates merged, overrides applied), every workload an inline object,
    the selected candidates listed, the policy in full. */
char *ak_manifest_to_bundle (const ak_manifest_t *m)
{
    if (!m)
        return NULL;
    const ak_policy_t *pol = &m->policy;
    json_t *targets = json_array (), *ops = json_array ();
    for (size_t i = 0; i < m->ntargets; i++)
        json_array_append_new (targets, json_string (m->targets[i]));
    json_t *policy = json_pack ("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:f, s:f, s:I}",
        "max_attempts", (json_int_t) pol->max_attempts,
        "compile_timeout_ms", (json_int_t) pol->compile_timeout_ms,
        "run_timeout_ms", (json_int_t) pol->run_timeout_ms,
        "lease_ms", (json_int_t) pol->lease_ms,
        "warmup", (json_int_t) pol->warmup,
        "min_samples", (json_int_t) pol->min_samples,
        "max_samples", (json_int_t) pol->max_samples,
        "rsd_target", pol->rsd_target,
        "max_time_ms", (json_int_t) pol->max_time_ms,
        "threshold", pol->threshold,
        "max_regression", pol->max_regression,
        "seed", (json_int_t) (pol->seed > (uint64_t) INT64_MAX ? INT64_MAX : pol->seed));
    json_t *search = json_pack ("{s:I, s:I, s:I, s:I}",
        "budget", (json_int_t) pol->search_budget, "keep", (json_int_t) pol->search_keep,
        "rounds", (json_int_t) pol->search_rounds, "short_max_time_ms", (json_int_t) pol->short_max_time_ms);
    if (pol->search_strategy[0])
        json_object_set_new (search, "strategy", json_string (pol->search_strategy));
    json_object_set_new (policy, "search", search);
    json_object_set_new (policy, "confirm", json_boolean (pol->confirm));
    json_object_set_new (policy, "implausible", json_real (pol->implausible));
    for (size_t i = 0; i < m->nops; i++) {
        const ak_manifest_op_t *op = &m->ops[i];
        json_t *wls = json_array (), *cands = json_array ();
        for (size_t w = 0; w < op->nworkloads; w++) {
            const ak_workload_t *wl = &op->workloads[w];
            json_array_append_new (wls, json_pack ("{s:s, s:o, s:s, s:f}", "name", wl->name,
                                   "size", s_dims_json (op->spec, wl->dims),
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
