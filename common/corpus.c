/*  common/corpus.c: shape corpora, the built-in name check, weighted
    aggregates (corpus.h, docs/formats.md).

    A corpus file is written by a person (or exported from a trace), so it
    is read like a spec: unknown fields are errors, every value is checked
    against the spec it is for, and every message names the file and the
    JSON path.  Never here: keeping a pointer into the json_t past the parse. */
#include "corpus.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define S_MAX_FILE_BYTES (16u << 20)
#define S_MAX_DIM        (INT64_C (1) << 31)
#define S_PATH           160

/* ================================================================= errors */

/*  Printable ASCII, at most 64 characters: a hostile name cannot forge a
    log line. */
static const char *s_show (const char *text, char buf[72])
{
    size_t n = 0;
    for (; text && text[n] && n < 64; n++) {
        unsigned char c = (unsigned char) text[n];
        buf[n] = c >= 0x20 && c < 0x7f ? (char) c : '?';
    }
    if (text && text[n]) {
        memcpy (buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/*  `LABEL: PATH: message`, AK_EINVAL. */
__attribute__ ((format (printf, 4, 5)))
static int s_bad (ak_err_t *err, const char *label, const char *path, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    if (path && *path)
        return ak_err_set (err, AK_EINVAL, "%s: %s: %s", label, path, msg);
    return ak_err_set (err, AK_EINVAL, "%s: %s", label, msg);
}

/*  Rejects members of obj not in allowed (NULL-terminated). */
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
            char shown[72];
            return ak_err_set (err, AK_EINVAL, "%s: %s%s%s: unknown field", label,
                               path && *path ? path : "", path && *path ? "." : "",
                               s_show (key, shown));
        }
    }
    return 0;
}

/*  [a-z0-9_-]{1,63}: the names workloads may have. */
static bool s_case_name_ok (const char *s)
{
    size_t n = strlen (s);
    if (n == 0 || n >= AK_MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'
              || s[i] == '-'))
            return false;
    return true;
}

/*  A JSON string without NUL bytes. */
static bool s_string_ok (json_t *v)
{
    return json_is_string (v) && strlen (json_string_value (v)) == json_string_length (v);
}

/* ================================================================= corpus */

void ak_corpus_destroy (ak_corpus_t **self_p)
{
    if (self_p && *self_p) {
        ak_corpus_t *self = *self_p;
        for (size_t i = 0; i < self->ncases; i++) {
            ak_corpus_case_t *c = &self->cases[i];
            free (c->name);
            for (size_t t = 0; t < c->ntags; t++)
                free (c->tags[t]);
            free (c->tags);
        }
        free (self->cases);
        free (self->operation);
        free (self);
        *self_p = NULL;
    }
}

/*  cases[i].sizes: every key of the spec, nothing else, each a positive
    integer (at most 2^31). */
static int s_parse_sizes (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                          int64_t dims[AK_MAX_DIMS], ak_err_t *err)
{
    char shown[72];
    const char *key;
    json_t *d;
    if (!json_is_object (v))
        return s_bad (err, label, path, "must be an object with a value for each key of %s",
                      spec->name);
    json_object_foreach (v, key, d)
        if (ak_spec_key_index (spec, key) < 0)
            return ak_err_set (err, AK_EINVAL, "%s: %s.%s: not a key of %s", label, path,
                               s_show (key, shown), spec->name);
    memset (dims, 0, sizeof (int64_t) * AK_MAX_DIMS);
    for (int k = 0; k < spec->nkeys; k++) {
        d = json_object_get (v, spec->keys[k]);
        if (!d)
            return ak_err_set (err, AK_EINVAL, "%s: %s.%s: missing (%s needs every key)", label,
                               path, spec->keys[k], spec->name);
        if (!json_is_integer (d) || json_integer_value (d) < 1 || json_integer_value (d) > S_MAX_DIM)
            return ak_err_set (err, AK_EINVAL, "%s: %s.%s: must be a positive integer "
                               "(at most %lld)", label, path, spec->keys[k], (long long) S_MAX_DIM);
        dims[k] = (int64_t) json_integer_value (d);
    }
    return 0;
}

/*  One case into c; path is "cases[i]". */
static int s_parse_case (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                         ak_corpus_case_t *c, ak_err_t *err)
{
    static const char *const fields[] = { "name", "sizes", "dtype", "weight", "tags", NULL };
    char p[S_PATH], shown[72];
    int rc;
    if (!json_is_object (v))
        return s_bad (err, label, path, "must be an object");
    if ((rc = s_only (v, fields, label, path, err)) != 0)
        return rc;

    json_t *name = json_object_get (v, "name");
    snprintf (p, sizeof p, "%.120s.name", path);
    if (!name)
        return s_bad (err, label, p, "missing");
    if (!s_string_ok (name) || !s_case_name_ok (json_string_value (name)))
        return s_bad (err, label, p, "must match [a-z0-9_-]+ (at most %d characters)",
                      AK_MAX_NAME - 1);
    c->name = ak_strdup (json_string_value (name));

    json_t *sizes = json_object_get (v, "sizes");
    snprintf (p, sizeof p, "%.120s.sizes", path);
    if (!sizes)
        return s_bad (err, label, p, "missing");
    if ((rc = s_parse_sizes (sizes, spec, label, p, c->dims, err)) != 0)
        return rc;
    /* A case may take a size's name only for that size's shape: the name
       alone identifies a named size elsewhere (backend-only sizes). */
    const ak_size_t *named = ak_spec_size (spec, c->name);
    if (named && memcmp (named->dims, c->dims, sizeof c->dims) != 0)
        return s_bad (err, label, s_show (path, shown), "name '%s' is a size of %s with a "
                      "different shape", c->name, spec->name);

    json_t *dtype = json_object_get (v, "dtype");
    snprintf (p, sizeof p, "%.120s.dtype", path);
    c->dtype = spec->dtypes[0];
    if (dtype) {
        if (!s_string_ok (dtype) || ak_dtype_parse (json_string_value (dtype), &c->dtype))
            return s_bad (err, label, p, "must be float16, bfloat16 or float32");
        if (!ak_spec_has_dtype (spec, c->dtype))
            return s_bad (err, label, p, "%s is not one of %s's dtypes", ak_dtype_name (c->dtype),
                          spec->name);
    }

    json_t *weight = json_object_get (v, "weight");
    snprintf (p, sizeof p, "%.120s.weight", path);
    c->weight = 1;
    if (weight) {
        c->weight = json_is_number (weight) ? json_number_value (weight) : NAN;
        if (!isfinite (c->weight) || c->weight <= 0)
            return s_bad (err, label, p, "must be a finite number > 0");
    }

    json_t *tags = json_object_get (v, "tags");
    snprintf (p, sizeof p, "%.120s.tags", path);
    if (tags) {
        if (!json_is_array (tags) || json_array_size (tags) > AK_CORPUS_MAX_TAGS)
            return s_bad (err, label, p, "must be an array of at most %d strings",
                          AK_CORPUS_MAX_TAGS);
        c->tags = ak_calloc (json_array_size (tags) + 1, sizeof *c->tags);
        size_t i;
        json_t *t;
        json_array_foreach (tags, i, t) {
            if (!s_string_ok (t) || json_string_length (t) == 0
                || json_string_length (t) >= AK_MAX_NAME)
                return ak_err_set (err, AK_EINVAL, "%s: %s[%zu]: must be a string of 1 to %d "
                                   "characters", label, p, i, AK_MAX_NAME - 1);
            c->tags[c->ntags++] = ak_strdup (json_string_value (t));
        }
    }
    return 0;
}

static int s_corpus_parse (json_t *root, const char *label, const ak_spec_t *spec,
                           ak_corpus_t *corpus, ak_err_t *err)
{
    static const char *const fields[] = {
        "schema_version", "operation", "description", "cases", NULL };
    char p[S_PATH], shown[72];
    int rc;
    if (!json_is_object (root))
        return s_bad (err, label, "", "a corpus must be a JSON object");
    if ((rc = s_only (root, fields, label, "", err)) != 0)
        return rc;

    json_t *v = json_object_get (root, "schema_version");
    if (!v)
        return s_bad (err, label, "schema_version", "missing");
    if (!json_is_integer (v) || json_integer_value (v) != AK_CORPUS_SCHEMA_VERSION)
        return ak_err_set (err, AK_EVERSION, "%s: schema_version: unsupported version "
                           "(this build reads %d)", label, AK_CORPUS_SCHEMA_VERSION);

    v = json_object_get (root, "operation");
    if (!v)
        return s_bad (err, label, "operation", "missing");
    if (!s_string_ok (v))
        return s_bad (err, label, "operation", "must be a string");
    if (strcmp (json_string_value (v), spec->name) != 0)
        return s_bad (err, label, "operation", "'%s' is not the operator of the spec it is "
                      "used with ('%s')", s_show (json_string_value (v), shown), spec->name);
    corpus->operation = ak_strdup (spec->name);

    v = json_object_get (root, "description");
    if (v && !s_string_ok (v))
        return s_bad (err, label, "description", "must be a string");

    json_t *cases = json_object_get (root, "cases");
    if (!cases)
        return s_bad (err, label, "cases", "missing");
    if (!json_is_array (cases) || json_array_size (cases) == 0
        || json_array_size (cases) > AK_CORPUS_MAX_CASES)
        return s_bad (err, label, "cases", "must be an array of 1 to %d cases",
                      AK_CORPUS_MAX_CASES);
    size_t n = json_array_size (cases);
    corpus->cases = ak_calloc (n, sizeof *corpus->cases);
    for (size_t i = 0; i < n; i++) {
        ak_corpus_case_t *c = &corpus->cases[corpus->ncases++];
        snprintf (p, sizeof p, "cases[%zu]", i);
        if ((rc = s_parse_case (json_array_get (cases, i), spec, label, p, c, err)) != 0)
            return rc;
        for (size_t j = 0; j < i; j++) {
            const ak_corpus_case_t *o = &corpus->cases[j];
            if (strcmp (o->name, c->name) == 0)
                return ak_err_set (err, AK_EINVAL, "%s: %s.name: duplicate case name '%s' "
                                   "(also cases[%zu])", label, p, c->name, j);
            if (o->dtype == c->dtype && memcmp (o->dims, c->dims, sizeof c->dims) == 0)
                return ak_err_set (err, AK_EINVAL, "%s: %s.sizes: same sizes and dtype as "
                                   "cases[%zu] ('%s')", label, p, j, o->name);
        }
    }
    return 0;
}

int ak_corpus_parse (json_t *json, const char *label, const ak_spec_t *spec,
                     ak_corpus_t **corpus_p, ak_err_t *err)
{
    if (!json || !spec || !corpus_p)
        return ak_err_set (err, AK_EINVAL, "ak_corpus_parse: missing argument");
    *corpus_p = NULL;
    ak_corpus_t *corpus = ak_calloc (1, sizeof *corpus);
    int rc = s_corpus_parse (json, label ? label : "corpus", spec, corpus, err);
    if (rc) {
        ak_corpus_destroy (&corpus);
        return rc;
    }
    *corpus_p = corpus;
    return 0;
}

int ak_corpus_load (const char *path, const ak_spec_t *spec, ak_corpus_t **corpus_p,
                    ak_err_t *err)
{
    if (!path || !spec || !corpus_p)
        return ak_err_set (err, AK_EINVAL, "ak_corpus_load: missing argument");
    *corpus_p = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = ak_file_read (path, S_MAX_FILE_BYTES, &text, &len, err);
    if (rc)
        return rc;
    json_error_t jerr;
    json_t *root = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr);
    free (text);
    if (!root)
        return ak_err_set (err, AK_EINVAL, "%s: invalid JSON: %s (line %d column %d)", path,
                           jerr.text, jerr.line, jerr.column);
    rc = ak_corpus_parse (root, path, spec, corpus_p, err);
    json_decref (root);
    return rc;
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

/* ============================================================= aggregates */

int ak_aggregate (const ak_wpoint_t *points, size_t n, ak_aggregate_t *out)
{
    memset (out, 0, sizeof *out);
    if (!points || n == 0)
        return AK_EINVAL;
    double wsum = 0, wbase = 0, wcand = 0;
    for (size_t i = 0; i < n; i++) {
        const ak_wpoint_t *p = &points[i];
        if (!isfinite (p->weight) || p->weight <= 0 || !isfinite (p->base_us) || p->base_us <= 0
            || !isfinite (p->cand_us) || p->cand_us <= 0)
            return AK_EINVAL;
        wsum += p->weight;
        wbase += p->weight * p->base_us;
        wcand += p->weight * p->cand_us;
    }
    if (!isfinite (wsum) || !isfinite (wbase) || !isfinite (wcand) || wcand <= 0)
        return AK_EINVAL;
    out->n = n;
    out->weight = wsum;
    out->base_us = wbase / wsum;
    out->cand_us = wcand / wsum;
    out->speedup = out->base_us / out->cand_us;
    return 0;
}
