/*  common/corpus.c: shape corpora (corpus.h, docs/formats.md).

    A corpus file is written by a person (or exported from a trace), so it
    is read like a spec: unknown fields are errors, every value is checked
    against the spec it is for, and every message names the file and the
    JSON path.  Never here: keeping a pointer into the json_t past the parse. */
#include "corpus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpath.h"
#include "util.h"

#define S_PATH 160

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
    char shown[AK_JPATH_SHOW];
    const char *key;
    json_t *d;
    if (!json_is_object (v))
        return ak_jpath_bad (err, label, path, "must be an object with a value for each key of %s",
                             spec->name);
    json_object_foreach (v, key, d)
        if (ak_spec_key_index (spec, key) < 0)
            return ak_err_set (err, AK_EINVAL, "%s: %s.%s: not a key of %s", label, path,
                               ak_jpath_show (key, shown), spec->name);
    memset (dims, 0, sizeof (int64_t) * AK_MAX_DIMS);
    for (int k = 0; k < spec->nkeys; k++) {
        d = json_object_get (v, spec->keys[k]);
        if (!d)
            return ak_err_set (err, AK_EINVAL, "%s: %s.%s: missing (%s needs every key)", label,
                               path, spec->keys[k], spec->name);
        if (!json_is_integer (d) || json_integer_value (d) < 1
            || json_integer_value (d) > AK_SPEC_MAX_DIM)
            return ak_err_set (err, AK_EINVAL, "%s: %s.%s: must be a positive integer (at most %lld)",
                               label, path, spec->keys[k], (long long) AK_SPEC_MAX_DIM);
        dims[k] = (int64_t) json_integer_value (d);
    }
    return 0;
}

/*  One case into c; path is "cases[i]". */
static int s_parse_case (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                         ak_corpus_case_t *c, ak_err_t *err)
{
    static const char *const fields[] = { "name", "sizes", "dtype", "weight", "tags", NULL };
    char p[S_PATH], shown[AK_JPATH_SHOW];
    int rc;
    if (!json_is_object (v))
        return ak_jpath_bad (err, label, path, "must be an object");
    if ((rc = ak_jpath_only (v, fields, label, path, err)) != 0)
        return rc;

    json_t *name = json_object_get (v, "name");
    snprintf (p, sizeof p, "%.120s.name", path);
    if (!name)
        return ak_jpath_bad (err, label, p, "missing");
    if (!s_string_ok (name) || !ak_name_label_ok (json_string_value (name), false))
        return ak_jpath_bad (err, label, p, "must match [a-z0-9_-]+ (at most %d characters)",
                             AK_MAX_NAME - 1);
    c->name = ak_strdup (json_string_value (name));

    json_t *sizes = json_object_get (v, "sizes");
    snprintf (p, sizeof p, "%.120s.sizes", path);
    if (!sizes)
        return ak_jpath_bad (err, label, p, "missing");
    if ((rc = s_parse_sizes (sizes, spec, label, p, c->dims, err)) != 0)
        return rc;
    /* A case may take a size's name only for that size's shape: the name
       alone identifies a named size elsewhere (backend-only sizes). */
    const ak_size_t *named = ak_spec_size (spec, c->name);
    if (named && memcmp (named->dims, c->dims, sizeof c->dims) != 0)
        return ak_jpath_bad (err, label, ak_jpath_show (path, shown), "name '%s' is a size of %s with a "
                             "different shape", c->name, spec->name);

    json_t *dtype = json_object_get (v, "dtype");
    snprintf (p, sizeof p, "%.120s.dtype", path);
    c->dtype = spec->dtypes[0];
    if (dtype) {
        if (!s_string_ok (dtype) || ak_dtype_parse (json_string_value (dtype), &c->dtype))
            return ak_jpath_bad (err, label, p, "must be float16, bfloat16 or float32");
        if (!ak_spec_has_dtype (spec, c->dtype))
            return ak_jpath_bad (err, label, p, "%s is not one of %s's dtypes", ak_dtype_name (c->dtype),
                                 spec->name);
    }

    json_t *weight = json_object_get (v, "weight");
    snprintf (p, sizeof p, "%.120s.weight", path);
    c->weight = 1;
    if (weight) {
        c->weight = json_is_number (weight) ? json_number_value (weight) : NAN;
        if (!isfinite (c->weight) || c->weight <= 0)
            return ak_jpath_bad (err, label, p, "must be a finite number > 0");
    }

    json_t *tags = json_object_get (v, "tags");
    snprintf (p, sizeof p, "%.120s.tags", path);
    if (tags) {
        if (!json_is_array (tags) || json_array_size (tags) > AK_CORPUS_MAX_TAGS)
            return ak_jpath_bad (err, label, p, "must be an array of at most %d strings",
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
    char p[S_PATH], shown[AK_JPATH_SHOW];
    int rc;
    if (!json_is_object (root))
        return ak_jpath_bad (err, label, "", "a corpus must be a JSON object");
    if ((rc = ak_jpath_only (root, fields, label, "", err)) != 0)
        return rc;

    json_t *v = json_object_get (root, "schema_version");
    if (!v)
        return ak_jpath_bad (err, label, "schema_version", "missing");
    if (!json_is_integer (v) || json_integer_value (v) != AK_CORPUS_SCHEMA_VERSION)
        return ak_err_set (err, AK_EVERSION, "%s: schema_version: unsupported version "
                           "(this build reads %d)", label, AK_CORPUS_SCHEMA_VERSION);

    v = json_object_get (root, "operation");
    if (!v)
        return ak_jpath_bad (err, label, "operation", "missing");
    if (!s_string_ok (v))
        return ak_jpath_bad (err, label, "operation", "must be a string");
    if (strcmp (json_string_value (v), spec->name) != 0)
        return ak_jpath_bad (err, label, "operation", "'%s' is not the operator of the spec it is "
                             "used with ('%s')", ak_jpath_show (json_string_value (v), shown), spec->name);
    corpus->operation = ak_strdup (spec->name);

    v = json_object_get (root, "description");
    if (v && !s_string_ok (v))
        return ak_jpath_bad (err, label, "description", "must be a string");

    json_t *cases = json_object_get (root, "cases");
    if (!cases)
        return ak_jpath_bad (err, label, "cases", "missing");
    if (!json_is_array (cases) || json_array_size (cases) == 0
        || json_array_size (cases) > AK_CORPUS_MAX_CASES)
        return ak_jpath_bad (err, label, "cases", "must be an array of 1 to %d cases",
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
    int rc = ak_file_read (path, AK_JPATH_MAX_FILE, &text, &len, err);
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
