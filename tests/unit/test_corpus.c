/*  tests/unit/test_corpus.c: shape corpora, corpora and external operators
    in manifests, the built-in name check, and the weighted aggregates
    (common/corpus.c, coordinator/results.c).

    Each rejected corpus field has its own test: a known-good corpus is
    written with one change next to a toy spec, loaded, and the error must
    name the corpus file and the field by its JSON path.  The aggregate
    tests check the formula on numbers worked by hand, that the promotion
    rule gets the same speedup from the same receipt, and the per-dtype rows
    of the report. */
#include "manifest.h"
#include "stats.h"
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "corpus.h"
#include "coordinator/expand.h"
#include "coordinator/promote.h"
#include "coordinator/results.h"
#include "spec.h"
#include "util.h"

/* ============================================================== fixtures */

static const char *s_spec_text =
    "{\"schema_version\": 1, \"name\": \"toy\", \"keys\": [\"rows\", \"cols\"],"
    " \"dtypes\": [\"float32\", \"bfloat16\"],"
    " \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5},"
    "                 \"bfloat16\": {\"atol\": 1e-2, \"rtol\": 1e-2}},"
    " \"sizes\": [{\"name\": \"tiny\", \"size\": {\"rows\": 4, \"cols\": 8}},"
    "            {\"name\": \"small\", \"size\": {\"rows\": 32, \"cols\": 128}}],"
    " \"stability_size\": \"small\","
    " \"flops\": \"rows*cols\", \"bytes\": \"2*rows*cols*b\","
    " \"inputs\": [{\"name\": \"x\", \"count\": \"rows*cols\", \"range\": [-1, 1]}],"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"rows*cols\"}],"
    " \"reference\": \"ref.c\","
    " \"baselines\": [{\"backend\": \"host\", \"source\": \"base.c\"}],"
    " \"candidates\": [{\"name\": \"fast\", \"backend\": \"host\", \"source\": \"fast.c\","
    "                   \"params\": {\"B\": [1, 2]}}]}";

static const char *s_corpus_text =
    "{\"schema_version\": 1, \"operation\": \"toy\","
    " \"cases\": ["
    "  {\"name\": \"llm_decode\", \"sizes\": {\"rows\": 16, \"cols\": 1000},"
    "   \"dtype\": \"bfloat16\", \"weight\": 2.5, \"tags\": [\"llm\", \"decode\"]},"
    "  {\"name\": \"odd_rows\", \"sizes\": {\"rows\": 7, \"cols\": 33}, \"weight\": 1},"
    "  {\"name\": \"tiny\", \"sizes\": {\"rows\": 4, \"cols\": 8}, \"dtype\": \"bfloat16\"}]}";

typedef struct {
    char      *dir;
    char      *spec_path;
    ak_spec_t *spec;
    json_t    *corpus;              /* the good corpus, changed by each test */
} fixture_t;

static void s_write_op (const char *dir, const char *spec_text)
{
    free (ak_test_write (dir, "ref.c", "void ak_reference (const ak_args_t *a) { (void) a; }\n"));
    free (ak_test_write (dir, "base.c", "void ak_kernel (const ak_args_t *a) { (void) a; }\n"));
    free (ak_test_write (dir, "fast.c", "void ak_kernel (const ak_args_t *a) { (void) a; } /* B */\n"));
    free (ak_test_write (dir, "spec.json", spec_text));
}

static int s_setup (void **state)
{
    fixture_t *fx = calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("corpus");
    assert_non_null (fx->dir);
    s_write_op (fx->dir, s_spec_text);
    fx->spec_path = ak_path_join (fx->dir, "spec.json");
    ak_err_t err = { 0, "" };
    if (ak_spec_load (fx->spec_path, &fx->spec, &err) != 0)
        fail_msg ("toy spec: %s", err.msg);
    json_error_t jerr;
    fx->corpus = json_loads (s_corpus_text, 0, &jerr);
    if (!fx->corpus)
        fail_msg ("corpus fixture: %s", jerr.text);
    *state = fx;
    return 0;
}

static int s_teardown (void **state)
{
    fixture_t *fx = *state;
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    free (fx->spec_path);
    ak_spec_destroy (&fx->spec);
    json_decref (fx->corpus);
    free (fx);
    return 0;
}

/*  Writes the fixture's corpus to DIR/corpus.json and loads it; returns rc,
    the message in err, the file's path in *path_p (caller frees). */
static int s_load (fixture_t *fx, ak_corpus_t **corpus_p, ak_err_t *err, char **path_p)
{
    char *text = json_dumps (fx->corpus, JSON_COMPACT);
    char *path = ak_test_write (fx->dir, "corpus.json", text);
    free (text);
    int rc = ak_corpus_load (path, fx->spec, corpus_p, err);
    if (path_p)
        *path_p = path;
    else
        free (path);
    return rc;
}

/*  The corpus, changed at `field` (value NULL: deleted), must be rejected
    with code and a message naming the file and `named`. */
static void s_expect_reject (fixture_t *fx, const char *field, json_t *value, int code,
                             const char *named)
{
    ak_test_json_set (fx->corpus, field, value);
    ak_corpus_t *corpus = NULL;
    ak_err_t err = { 0, "" };
    char *path = NULL;
    int rc = s_load (fx, &corpus, &err, &path);
    if (rc != code)
        fail_msg ("%s: expected code %d, got %d (%s)", field, code, rc, err.msg);
    assert_null (corpus);
    if (strncmp (err.msg, path, strlen (path)) != 0)
        fail_msg ("%s: the error does not start with the file %s: %s", field, path, err.msg);
    if (!strstr (err.msg, named))
        fail_msg ("%s: the error does not name '%s': %s", field, named, err.msg);
    free (path);
}

/* ========================================================== good corpus */

static void test_corpus_accepted (void **state)
{
    fixture_t *fx = *state;
    ak_corpus_t *corpus = NULL;
    ak_err_t err = { 0, "" };
    if (s_load (fx, &corpus, &err, NULL) != 0)
        fail_msg ("good corpus rejected: %s", err.msg);
    assert_string_equal (corpus->operation, "toy");
    assert_int_equal (corpus->ncases, 3);
    const ak_corpus_case_t *c = &corpus->cases[0];
    assert_string_equal (c->name, "llm_decode");
    assert_int_equal (c->dims[0], 16);
    assert_int_equal (c->dims[1], 1000);
    assert_int_equal (c->dtype, AK_DT_BFLOAT16);
    assert_true (c->weight == 2.5);
    assert_int_equal (c->ntags, 2);
    assert_string_equal (c->tags[1], "decode");
    /* dtype and weight default to the spec's first dtype and 1 */
    assert_int_equal (corpus->cases[1].dtype, AK_DT_FLOAT32);
    assert_true (corpus->cases[1].weight == 1.0);
    assert_int_equal (corpus->cases[1].ntags, 0);
    /* a case may carry a size's name with that size's shape */
    assert_string_equal (corpus->cases[2].name, "tiny");
    ak_corpus_destroy (&corpus);
    ak_corpus_destroy (&corpus);        /* twice is harmless */
}

/* ==================================================== one test per field */

static void test_reject_unknown_field (void **state)
{
    s_expect_reject (*state, "comment", json_string ("x"), AK_EINVAL, "comment: unknown field");
}

static void test_reject_unknown_case_field (void **state)
{
    s_expect_reject (*state, "cases[1].shape", json_string ("x"), AK_EINVAL,
                     "cases[1].shape: unknown field");
}

static void test_reject_schema_version (void **state)
{
    s_expect_reject (*state, "schema_version", json_integer (2), AK_EVERSION, "schema_version");
}

static void test_reject_missing_schema_version (void **state)
{
    s_expect_reject (*state, "schema_version", NULL, AK_EINVAL, "schema_version: missing");
}

static void test_reject_operation (void **state)
{
    s_expect_reject (*state, "operation", json_string ("softmax"), AK_EINVAL, "operation: 'softmax'");
}

static void test_reject_cases_empty (void **state)
{
    s_expect_reject (*state, "cases", json_array (), AK_EINVAL, "cases: must be an array");
}

static void test_reject_duplicate_name (void **state)
{
    s_expect_reject (*state, "cases[1].name", json_string ("llm_decode"), AK_EINVAL,
                     "cases[1].name: duplicate case name 'llm_decode'");
}

static void test_reject_duplicate_resolved (void **state)
{
    fixture_t *fx = *state;
    /* same sizes and dtype as cases[0] under another name */
    ak_test_json_set (fx->corpus, "cases[1].sizes.rows", json_integer (16));
    ak_test_json_set (fx->corpus, "cases[1].sizes.cols", json_integer (1000));
    s_expect_reject (fx, "cases[1].dtype", json_string ("bfloat16"), AK_EINVAL,
                     "cases[1].sizes: same sizes and dtype as cases[0]");
}

static void test_same_sizes_other_dtype_accepted (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->corpus, "cases[1].sizes.rows", json_integer (16));
    ak_test_json_set (fx->corpus, "cases[1].sizes.cols", json_integer (1000));
    ak_corpus_t *corpus = NULL;
    ak_err_t err = { 0, "" };
    if (s_load (fx, &corpus, &err, NULL) != 0)
        fail_msg ("float32 and bfloat16 of one shape are two cases: %s", err.msg);
    ak_corpus_destroy (&corpus);
}

static void test_reject_size_zero (void **state)
{
    s_expect_reject (*state, "cases[0].sizes.rows", json_integer (0), AK_EINVAL,
                     "cases[0].sizes.rows: must be a positive integer");
}

static void test_reject_size_negative (void **state)
{
    s_expect_reject (*state, "cases[2].sizes.cols", json_integer (-8), AK_EINVAL,
                     "cases[2].sizes.cols: must be a positive integer");
}

static void test_reject_size_fraction (void **state)
{
    s_expect_reject (*state, "cases[0].sizes.cols", json_real (10.5), AK_EINVAL,
                     "cases[0].sizes.cols: must be a positive integer");
}

static void test_reject_size_string (void **state)
{
    s_expect_reject (*state, "cases[0].sizes.cols", json_string ("1000"), AK_EINVAL,
                     "cases[0].sizes.cols: must be a positive integer");
}

static void test_reject_size_too_big (void **state)
{
    s_expect_reject (*state, "cases[0].sizes.cols", json_integer (INT64_C (1) << 40), AK_EINVAL,
                     "cases[0].sizes.cols: must be a positive integer");
}

static void test_reject_size_key_missing (void **state)
{
    s_expect_reject (*state, "cases[1].sizes.cols", NULL, AK_EINVAL,
                     "cases[1].sizes.cols: missing");
}

static void test_reject_size_key_undeclared (void **state)
{
    s_expect_reject (*state, "cases[1].sizes.depth", json_integer (3), AK_EINVAL,
                     "cases[1].sizes.depth: not a key of toy");
}

static void test_reject_dtype_undeclared (void **state)
{
    s_expect_reject (*state, "cases[0].dtype", json_string ("float16"), AK_EINVAL,
                     "cases[0].dtype: float16 is not one of toy's dtypes");
}

static void test_reject_dtype_unknown (void **state)
{
    s_expect_reject (*state, "cases[0].dtype", json_string ("int8"), AK_EINVAL,
                     "cases[0].dtype: must be float16, bfloat16 or float32");
}

static void test_reject_weight_zero (void **state)
{
    s_expect_reject (*state, "cases[0].weight", json_integer (0), AK_EINVAL,
                     "cases[0].weight: must be a finite number > 0");
}

static void test_reject_weight_negative (void **state)
{
    s_expect_reject (*state, "cases[1].weight", json_real (-0.5), AK_EINVAL,
                     "cases[1].weight: must be a finite number > 0");
}

static void test_reject_weight_string (void **state)
{
    s_expect_reject (*state, "cases[1].weight", json_string ("2"), AK_EINVAL,
                     "cases[1].weight: must be a finite number > 0");
}

static void test_reject_tag_not_string (void **state)
{
    s_expect_reject (*state, "cases[0].tags[1]", json_integer (7), AK_EINVAL,
                     "cases[0].tags[1]: must be a string");
}

static void test_reject_tags_not_array (void **state)
{
    s_expect_reject (*state, "cases[0].tags", json_string ("llm"), AK_EINVAL,
                     "cases[0].tags: must be an array");
}

static void test_reject_name_missing (void **state)
{
    s_expect_reject (*state, "cases[1].name", NULL, AK_EINVAL, "cases[1].name: missing");
}

static void test_reject_name_bad (void **state)
{
    s_expect_reject (*state, "cases[1].name", json_string ("Odd Rows"), AK_EINVAL,
                     "cases[1].name: must match [a-z0-9_-]+");
}

static void test_reject_size_name_other_shape (void **state)
{
    s_expect_reject (*state, "cases[2].sizes.rows", json_integer (5), AK_EINVAL,
                     "cases[2]: name 'tiny' is a size of toy with a different shape");
}

static void test_reject_bad_json (void **state)
{
    fixture_t *fx = *state;
    char *path = ak_test_write (fx->dir, "corpus.json", "{\"schema_version\": 1,");
    ak_corpus_t *corpus = NULL;
    ak_err_t err = { 0, "" };
    assert_int_equal (ak_corpus_load (path, fx->spec, &corpus, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, path));
    assert_null (corpus);
    free (path);
}

/* ============================================================ manifests */

/*  Writes DIR/batch.json (ops given as JSON text) and loads it. */
static int s_manifest (fixture_t *fx, const char *ops, ak_manifest_t **m_p, ak_err_t *err)
{
    char *text = json_dumps (fx->corpus, JSON_COMPACT);
    free (ak_test_write (fx->dir, "corpus.json", text));
    free (text);
    text = ak_sprintf ("{\"schema_version\": 1, \"name\": \"c\", \"targets\": [\"host\"],"
                       " \"ops\": %s}", ops);
    char *path = ak_test_write (fx->dir, "batch.json", text);
    free (text);
    int rc = ak_manifest_load (path, m_p, err);
    free (path);
    return rc;
}

static void test_manifest_corpus_workloads (void **state)
{
    fixture_t *fx = *state;
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0, "" };
    if (s_manifest (fx, "[{\"spec\": \"spec.json\", \"corpus\": \"corpus.json\"}]", &m, &err))
        fail_msg ("manifest with a corpus: %s", err.msg);
    /* the cases replace the spec's sizes, with their names and weights */
    const ak_manifest_op_t *op = &m->ops[0];
    assert_int_equal (op->nworkloads, 3);
    assert_string_equal (op->workloads[0].name, "llm_decode");
    assert_int_equal (op->workloads[0].dims[1], 1000);
    assert_int_equal (op->workloads[0].dtype, AK_DT_BFLOAT16);
    assert_true (op->workloads[0].weight == 2.5);
    assert_string_equal (op->workloads[1].name, "odd_rows");
    assert_non_null (strstr (op->corpus_path, "corpus.json"));

    /* the bundle carries them as inline workloads: the coordinator's parse
       gets the same names, shapes, dtypes and weights, and no file */
    char *bundle = ak_manifest_to_bundle (m);
    assert_null (strstr (bundle, "corpus"));
    ak_manifest_t *b = NULL;
    if (ak_manifest_parse_bundle (bundle, strlen (bundle), "bundle", &b, &err))
        fail_msg ("bundle of a corpus batch: %s", err.msg);
    assert_int_equal (b->ops[0].nworkloads, 3);
    for (size_t w = 0; w < 3; w++) {
        assert_string_equal (b->ops[0].workloads[w].name, op->workloads[w].name);
        assert_memory_equal (b->ops[0].workloads[w].dims, op->workloads[w].dims,
                             sizeof op->workloads[w].dims);
        assert_int_equal (b->ops[0].workloads[w].dtype, op->workloads[w].dtype);
        assert_true (b->ops[0].workloads[w].weight == op->workloads[w].weight);
    }
    ak_manifest_destroy (&b);
    free (bundle);
    ak_manifest_destroy (&m);

    /* with "workloads" too: those first, then the cases */
    if (s_manifest (fx, "[{\"spec\": \"spec.json\", \"workloads\": [\"small\"],"
                        " \"corpus\": \"corpus.json\"}]", &m, &err))
        fail_msg ("workloads + corpus: %s", err.msg);
    assert_int_equal (m->ops[0].nworkloads, 4);
    assert_string_equal (m->ops[0].workloads[0].name, "small");
    assert_string_equal (m->ops[0].workloads[3].name, "tiny");
    ak_manifest_destroy (&m);
}

static void test_manifest_corpus_rejects (void **state)
{
    fixture_t *fx = *state;
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0, "" };
    /* a workload listed and in the corpus: the same float32 shape twice */
    ak_test_json_set (fx->corpus, "cases[2].dtype", json_string ("float32"));
    assert_int_equal (s_manifest (fx, "[{\"spec\": \"spec.json\", \"workloads\": [\"tiny\"],"
                                      " \"corpus\": \"corpus.json\"}]", &m, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "ops[0].corpus"));
    assert_non_null (strstr (err.msg, "cases[2]"));
    assert_non_null (strstr (err.msg, "workloads[0]"));
    /* a bad field in the corpus: the manifest's error names both files */
    ak_test_json_set (fx->corpus, "cases[1].dtype", json_string ("float16"));
    assert_int_equal (s_manifest (fx, "[{\"spec\": \"spec.json\", \"corpus\": \"corpus.json\"}]",
                                  &m, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "batch.json: ops[0].corpus"));
    assert_non_null (strstr (err.msg, "corpus.json: cases[1].dtype"));
    /* a corpus for another operator */
    ak_test_json_set (fx->corpus, "cases[1].dtype", json_string ("float32"));
    ak_test_json_set (fx->corpus, "operation", json_string ("other"));
    assert_int_equal (s_manifest (fx, "[{\"spec\": \"spec.json\", \"corpus\": \"corpus.json\"}]",
                                  &m, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "operation"));
    /* override_builtin must be a boolean */
    assert_int_equal (s_manifest (fx, "[{\"spec\": \"spec.json\", \"override_builtin\": 1}]",
                                  &m, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "ops[0].override_builtin: must be true or false"));
    assert_null (m);

    /* a bundle never names a corpus file */
    char *text = ak_sprintf ("{\"schema_version\": 1, \"name\": \"c\", \"targets\": [\"host\"],"
                             " \"ops\": [{\"spec\": %s, \"corpus\": \"corpus.json\"}]}",
                             "{}");
    assert_int_equal (ak_manifest_parse_bundle (text, strlen (text), "bundle", &m, &err), AK_EINVAL);
    free (text);
}

/*  An external operator directory, not in the catalog, with the name of a
    built-in one: refused, unless overridden; the override reaches the
    batch record through the bundle. */
static void test_external_collision (void **state)
{
    fixture_t *fx = *state;
    char *catalog = ak_path_join (fx->dir, "kernels");
    char *builtin = ak_path_join (catalog, "toy");
    assert_int_equal (ak_mkdir_p (builtin, 0755, NULL), 0);
    s_write_op (builtin, s_spec_text);
    char *other = ak_path_join (catalog, "../ext");
    assert_int_equal (ak_mkdir_p (other, 0755, NULL), 0);
    s_write_op (other, s_spec_text);
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0, "" };

    /* the external toy: refused, the message names both files and the way out */
    char *ops = ak_sprintf ("[{\"spec\": \"%s/spec.json\"}]", other);
    assert_int_equal (s_manifest (fx, ops, &m, &err), 0);
    assert_int_equal (ak_catalog_check (m, "batch.json", catalog, &err), AK_EEXIST);
    assert_non_null (strstr (err.msg, "batch.json: ops[0].spec: operator 'toy'"));
    assert_non_null (strstr (err.msg, "ext/spec.json"));
    assert_non_null (strstr (err.msg, "kernels/toy/spec.json"));
    assert_non_null (strstr (err.msg, "override_builtin"));
    /* no catalog found: nothing to compare against */
    assert_int_equal (ak_catalog_check (m, "batch.json", NULL, &err), 0);
    ak_manifest_destroy (&m);
    free (ops);

    /* the built-in itself, by a path with "..": accepted, no override recorded */
    ops = ak_sprintf ("[{\"spec\": \"%s/../kernels/toy/spec.json\", \"override_builtin\": true}]",
                      other);
    assert_int_equal (s_manifest (fx, ops, &m, &err), 0);
    assert_true (m->ops[0].override_builtin);
    assert_int_equal (ak_catalog_check (m, "batch.json", catalog, &err), 0);
    assert_false (m->ops[0].override_builtin);
    ak_manifest_destroy (&m);
    free (ops);

    /* overridden: accepted, carried in the bundle, recorded in the batch */
    ops = ak_sprintf ("[{\"spec\": \"%s/spec.json\", \"override_builtin\": true}]", other);
    assert_int_equal (s_manifest (fx, ops, &m, &err), 0);
    assert_int_equal (ak_catalog_check (m, "batch.json", catalog, &err), 0);
    assert_true (m->ops[0].override_builtin);
    char *bundle = ak_manifest_to_bundle (m);
    ak_manifest_t *b = NULL;
    if (ak_manifest_parse_bundle (bundle, strlen (bundle), "bundle", &b, &err))
        fail_msg ("bundle with an override: %s", err.msg);
    assert_true (b->ops[0].override_builtin);
    ak_expansion_t *exp = NULL;
    if (ak_expand (b, "B000001", "0000", 1, &exp, &err))
        fail_msg ("expand: %s", err.msg);
    assert_int_equal (exp->batch->n_overrides, 1);
    assert_string_equal (exp->batch->overrides[0], "toy");
    ak_expansion_destroy (&exp);
    ak_manifest_destroy (&b);
    free (bundle);
    ak_manifest_destroy (&m);
    free (ops);

    /* a name no built-in has: the flag overrides nothing and is dropped */
    char *renamed = ak_strdup (s_spec_text);
    memcpy (strstr (renamed, "\"toy\""), "\"ext\"", 5);
    s_write_op (other, renamed);
    free (renamed);
    ops = ak_sprintf ("[{\"spec\": \"%s/spec.json\", \"override_builtin\": true}]", other);
    assert_int_equal (s_manifest (fx, ops, &m, &err), 0);
    assert_int_equal (ak_catalog_check (m, "batch.json", catalog, &err), 0);
    assert_false (m->ops[0].override_builtin);
    ak_manifest_destroy (&m);
    free (ops);

    /* the example operator of ops/examples loads as an external op */
    char *example = ak_test_src ("ops/examples/scale_bias/spec.json");
    char *source_catalog = ak_test_src ("kernels");
    ops = ak_sprintf ("[{\"spec\": \"%s\", \"workloads\": [\"tiny\"]}]", example);
    if (s_manifest (fx, ops, &m, &err))
        fail_msg ("ops/examples/scale_bias: %s", err.msg);
    assert_string_equal (m->ops[0].spec->name, "scale_bias");
    assert_int_equal (ak_catalog_check (m, "batch.json", source_catalog, &err), 0);
    ak_manifest_destroy (&m);
    free (ops);
    free (example);
    free (source_catalog);
    free (other);
    free (builtin);
    free (catalog);
}

/* The shipped corpora load against their specs. */
static void test_shipped_corpora (void **state)
{
    (void) state;
    const char *pairs[][2] = {
        { "kernels/softmax/spec.json", "kernels/softmax/corpus.json" },
        { "ops/examples/scale_bias/spec.json", "ops/examples/scale_bias/corpus.json" },
    };
    for (size_t i = 0; i < 2; i++) {
        char *sp = ak_test_src (pairs[i][0]), *cp = ak_test_src (pairs[i][1]);
        ak_spec_t *spec = NULL;
        ak_corpus_t *corpus = NULL;
        ak_err_t err = { 0, "" };
        if (ak_spec_load (sp, &spec, &err) || ak_corpus_load (cp, spec, &corpus, &err))
            fail_msg ("%s: %s", pairs[i][1], err.msg);
        assert_true (corpus->ncases >= 2);
        /* none of them is a named size of the spec: the point of a corpus */
        for (size_t c = 0; c < corpus->ncases; c++)
            assert_null (ak_spec_size (spec, corpus->cases[c].name));
        ak_corpus_destroy (&corpus);
        ak_spec_destroy (&spec);
        free (sp);
        free (cp);
    }
}

/* =========================================================== aggregates */

static void test_aggregate_math (void **state)
{
    (void) state;
    /* worked by hand: base = (1*10 + 3*2) / 4 = 4, cand = (1*5 + 3*4) / 4 = 4.25 */
    ak_wpoint_t pts[2] = { { 1, 10, 5 }, { 3, 2, 4 } };
    ak_aggregate_t agg;
    assert_int_equal (ak_aggregate (pts, 2, &agg), 0);
    assert_int_equal (agg.n, 2);
    assert_true (fabs (agg.weight - 4) < 1e-12);
    assert_true (fabs (agg.base_us - 4) < 1e-12);
    assert_true (fabs (agg.cand_us - 4.25) < 1e-12);
    assert_true (fabs (agg.speedup - 4 / 4.25) < 1e-12);
    /* weights matter: the 2x faster workload dominates when it weighs more */
    pts[0].weight = 100;
    assert_int_equal (ak_aggregate (pts, 2, &agg), 0);
    assert_true (agg.speedup > 1.8);
    /* scaling every weight changes nothing */
    ak_wpoint_t scaled[2] = { { 200, 10, 5 }, { 6, 2, 4 } };
    ak_aggregate_t agg2;
    assert_int_equal (ak_aggregate (scaled, 2, &agg2), 0);
    assert_true (fabs (agg2.speedup - agg.speedup) < 1e-12);
    /* untrusted numbers: rejected, never NaN out */
    ak_wpoint_t bad[][1] = { { { 0, 1, 1 } }, { { 1, -1, 1 } }, { { 1, 1, 0 } },
                             { { NAN, 1, 1 } }, { { 1, INFINITY, 1 } } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal (ak_aggregate (bad[i], 1, &agg), AK_EINVAL);
        assert_true (agg.speedup == 0);
    }
    assert_int_equal (ak_aggregate (pts, 0, &agg), AK_EINVAL);
}

/* A receipt's timing (static storage owned by the caller's arrays). */
typedef struct {
    Ak__Workload       wl;
    Ak__Stats          base, cand;
    Ak__WorkloadTiming t;
} s_timing_t;

static void s_timing (s_timing_t *x, const char *name, const char *dtype, double w,
                      double base, double cand)
{
    ak__workload__init (&x->wl);
    x->wl.name = (char *) name;
    x->wl.dtype = (char *) dtype;
    x->wl.weight = w;
    ak__stats__init (&x->base);
    ak__stats__init (&x->cand);
    x->base.median_us = base;
    x->cand.median_us = cand;
    ak__workload_timing__init (&x->t);
    x->t.workload = &x->wl;
    x->t.baseline = &x->base;
    x->t.candidate = &x->cand;
    x->t.speedup = base / cand;
    x->t.speedup_noise = 0.01;
}

static double s_row (json_t *rows, const char *dtype, const char *field)
{
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (strcmp (json_string_value (json_object_get (r, "dtype")), dtype) == 0)
            return json_number_value (json_object_get (r, field));
    fail_msg ("no aggregate row for %s", dtype);
    return 0;
}

/*  The report's rows for a promoted winner: per dtype and over all, and the
    "all" speedup is the promotion rule's, on the same receipt. */
static void test_aggregate_report_matches_promotion (void **state)
{
    (void) state;
    s_timing_t tm[3];
    s_timing (&tm[0], "a", "float32", 1, 10, 5);
    s_timing (&tm[1], "b", "float32", 3, 2, 4);
    s_timing (&tm[2], "c", "bfloat16", 2.5, 8, 2);
    Ak__WorkloadTiming *timings[3] = { &tm[0].t, &tm[1].t, &tm[2].t };
    Ak__Receipt receipt;
    ak__receipt__init (&receipt);
    receipt.status = (char *) "ok";
    receipt.receipt_id = (char *) "R1";
    receipt.timings = timings;
    receipt.n_timings = 3;

    Ak__TaskRecord task;
    ak__task_record__init (&task);
    task.task_id = (char *) "B000001.0002";
    task.candidate_name = (char *) "fast";
    ak_promote_cand_t cand = { task.task_id, "fast", NULL, 0, "done", NULL, &receipt };
    ak_promote_rule_t rule = { 0.03, 10.0, false, 0 };
    ak_promote_eval_t ev;
    ak_promote_eval (&rule, &cand, &ev);
    assert_true (ev.ok);

    ak_result_pair_t pair;
    memset (&pair, 0, sizeof pair);
    ak_result_task_t tune = { &task, &receipt };
    pair.tunes = &tune;
    pair.ntunes = 1;
    pair.evals = &ev;
    Ak__Winner winner;
    ak__winner__init (&winner);
    winner.promoted = true;
    winner.task_id = task.task_id;
    json_t *agg = ak_results_aggregates (&pair, &winner);
    assert_string_equal (json_string_value (json_object_get (agg, "source")), "winner");
    assert_string_equal (json_string_value (json_object_get (agg, "candidate")), "fast");
    json_t *rows = json_object_get (agg, "rows");
    assert_int_equal (json_array_size (rows), 3);      /* bfloat16, float32, all */
    assert_string_equal (json_string_value (json_object_get (json_array_get (rows, 0), "dtype")),
                         "bfloat16");
    assert_true (fabs (s_row (rows, "float32", "baseline_us") - 4) < 1e-9);
    assert_true (fabs (s_row (rows, "float32", "candidate_us") - 4.25) < 1e-9);
    assert_true (fabs (s_row (rows, "bfloat16", "speedup") - 4) < 1e-9);
    assert_true (fabs (s_row (rows, "float32", "weight") - 4) < 1e-9);
    /* all: (10 + 6 + 20) / 6.5 over (5 + 12 + 5) / 6.5 */
    assert_true (fabs (s_row (rows, "all", "speedup") - 36.0 / 22.0) < 1e-9);
    assert_true (fabs (s_row (rows, "all", "speedup") - ev.speedup) < 1e-12);
    assert_true (fabs (s_row (rows, "all", "baseline_us") - ev.weighted_base_us) < 1e-12);
    assert_true (fabs (s_row (rows, "all", "candidate_us") - ev.weighted_cand_us) < 1e-12);
    json_decref (agg);

    /* not promoted: the best candidate that ran, said so */
    winner.promoted = false;
    agg = ak_results_aggregates (&pair, &winner);
    assert_string_equal (json_string_value (json_object_get (agg, "source")), "best");
    json_decref (agg);

    /* no candidate ran: the preflight's baseline times alone */
    ev.ok = false;
    Ak__TaskRecord pre_task;
    ak__task_record__init (&pre_task);
    pre_task.task_id = (char *) "B000001.0001";
    pair.preflight.task = &pre_task;
    pair.preflight.receipt = &receipt;      /* its "candidate" is the baseline */
    agg = ak_results_aggregates (&pair, &winner);
    assert_string_equal (json_string_value (json_object_get (agg, "source")), "preflight");
    rows = json_object_get (agg, "rows");
    assert_true (fabs (s_row (rows, "float32", "baseline_us") - 4.25) < 1e-9);
    assert_true (s_row (rows, "float32", "speedup") == 0);
    json_decref (agg);

    /* a hostile receipt (NaN median): the row is left out, nothing crashes */
    ev.ok = true;
    winner.promoted = true;
    tm[2].cand.median_us = NAN;
    agg = ak_results_aggregates (&pair, &winner);
    rows = json_object_get (agg, "rows");
    assert_int_equal (json_array_size (rows), 1);      /* float32 only: "all" has the NaN */
    json_decref (agg);
}

int main (void)
{
#define T(fn) cmocka_unit_test_setup_teardown (fn, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        T (test_corpus_accepted),
        T (test_reject_unknown_field),
        T (test_reject_unknown_case_field),
        T (test_reject_schema_version),
        T (test_reject_missing_schema_version),
        T (test_reject_operation),
        T (test_reject_cases_empty),
        T (test_reject_duplicate_name),
        T (test_reject_duplicate_resolved),
        T (test_same_sizes_other_dtype_accepted),
        T (test_reject_size_zero),
        T (test_reject_size_negative),
        T (test_reject_size_fraction),
        T (test_reject_size_string),
        T (test_reject_size_too_big),
        T (test_reject_size_key_missing),
        T (test_reject_size_key_undeclared),
        T (test_reject_dtype_undeclared),
        T (test_reject_dtype_unknown),
        T (test_reject_weight_zero),
        T (test_reject_weight_negative),
        T (test_reject_weight_string),
        T (test_reject_tag_not_string),
        T (test_reject_tags_not_array),
        T (test_reject_name_missing),
        T (test_reject_name_bad),
        T (test_reject_size_name_other_shape),
        T (test_reject_bad_json),
        T (test_manifest_corpus_workloads),
        T (test_manifest_corpus_rejects),
        T (test_external_collision),
        cmocka_unit_test (test_shipped_corpora),
        cmocka_unit_test (test_aggregate_math),
        cmocka_unit_test (test_aggregate_report_matches_promotion),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
