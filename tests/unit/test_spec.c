/*  tests/unit/test_spec.c: operator specs (common/spec.c) and the kernel catalog.

    Each rejected field has its own test: a known-good spec is written to a
    temporary directory with one change, loaded, and the error must name the
    field by its JSON path.  The catalog tests load every built-in spec and
    build every kernel the way the host backend does (prelude + source, the
    system compiler, params as -D defines) to check it against the reference. */
#include "manifest.h"
#include "space.h"
#include "support.h"
#include "digest.h"
#include "spec.h"
#include "util.h"
#include "ak_kernel.h"     /* the host kernel ABI: ak_args_t */

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ============================================================== fixtures */

static const char *s_base_spec =
    "{\"schema_version\": 1, \"name\": \"toy\", \"keys\": [\"rows\", \"cols\"],"
    " \"dtypes\": [\"float32\"],"
    " \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5}},"
    " \"sizes\": [{\"name\": \"tiny\", \"size\": {\"rows\": 4, \"cols\": 8}},"
    "            {\"name\": \"small\", \"size\": {\"rows\": 32, \"cols\": 128}},"
    "            {\"name\": \"big\", \"size\": {\"rows\": 64, \"cols\": 256}}],"
    " \"edge_sizes\": [{\"name\": \"odd\", \"size\": {\"rows\": 7, \"cols\": 13}}],"
    " \"stability_size\": \"small\","
    " \"flops\": \"5*rows*cols\", \"bytes\": \"2*rows*cols*b\","
    " \"inputs\": [{\"name\": \"x\", \"count\": \"rows*cols\", \"range\": [-4, 4]}],"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"rows*cols\"}],"
    " \"reference\": \"ref.c\","
    " \"baselines\": [{\"backend\": \"host\", \"source\": \"host/base.c\"}],"
    " \"candidates\": [{\"name\": \"blocked\", \"backend\": \"host\","
    "                   \"source\": \"host/blocked.c\","
    "                   \"params\": {\"BLOCK\": [1, 2, 4, 8], \"UNROLL\": [1, 2, 4]},"
    "                   \"constraints\": [\"BLOCK*UNROLL <= 16\"]}]}";

typedef struct {
    char   *dir;
    json_t *json;
} fixture_t;

static int s_setup (void **state)
{
    fixture_t *fx = calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("spec");
    assert_non_null (fx->dir);
    for (int i = 0; i < 2; i++) {
        char *sub = ak_path_join (fx->dir, i ? "cuda" : "host");
        assert_int_equal (ak_mkdir_p (sub, 0755, NULL), 0);
        free (sub);
    }
    const char *files[][2] = {
        { "ref.c", "void ak_reference (const ak_args_t *a) { (void) a; }\n" },
        { "host/base.c", "void ak_kernel (const ak_args_t *a) { (void) a; }\n" },
        { "host/blocked.c", "void ak_kernel (const ak_args_t *a) { (void) a; } /* BLOCK */\n" },
        { "cuda/base.cu", "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) {}\n" },
        { "cuda/rows.cu", "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) {} /* THREADS */\n" },
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        free (ak_test_write (fx->dir, files[i][0], files[i][1]));
    json_error_t jerr;
    fx->json = json_loads (s_base_spec, 0, &jerr);
    if (!fx->json)
        fail_msg ("base spec: %s", jerr.text);
    *state = fx;
    return 0;
}

static int s_teardown (void **state)
{
    fixture_t *fx = *state;
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    json_decref (fx->json);
    free (fx);
    return 0;
}


/*  Writes the fixture's spec (with `from` replaced by `to` in the text when
    given) and loads it; returns the code, spec or err filled. */
static int s_load_text (fixture_t *fx, const char *from, const char *to, ak_spec_t **spec,
                        ak_err_t *err)
{
    char *path = ak_test_write_json (fx->dir, "spec.json", fx->json, from, to);
    memset (err, 0, sizeof *err);
    *spec = NULL;
    int rc = ak_spec_load (path, spec, err);
    free (path);
    return rc;
}

static int s_load (fixture_t *fx, ak_spec_t **spec, ak_err_t *err)
{
    return s_load_text (fx, NULL, NULL, spec, err);
}

/*  Loading must fail with code and a message holding every needle. */
static void s_expect (fixture_t *fx, const char *from, const char *to, int code,
                      const char *needle1, const char *needle2)
{
    ak_spec_t *spec = NULL;
    ak_err_t err;
    int rc = s_load_text (fx, from, to, &spec, &err);
    ak_test_expect_refused (rc, code, spec, err.msg, "spec.json", needle1, needle2);
}

/*  Sets path to value (NULL: deletes it), expects AK_EINVAL naming the
    needles, then puts the fixture back as it was. */
static void s_reject (fixture_t *fx, const char *path, json_t *value, const char *needle1,
                      const char *needle2)
{
    json_t *old = ak_test_json_swap (fx->json, path, value);
    s_expect (fx, NULL, NULL, AK_EINVAL, needle1, needle2);
    ak_test_json_restore (fx->json, path, old);
}

/* ============================================================= the base */

static void test_base_loads (void **state)
{
    fixture_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    assert_string_equal (spec->name, "toy");
    assert_int_equal (spec->nkeys, 2);
    assert_int_equal (spec->ndtypes, 1);
    assert_int_equal (spec->dtypes[0], AK_DT_FLOAT32);
    assert_int_equal (spec->nsizes, 3);
    assert_int_equal (spec->nedge, 1);
    assert_int_equal (spec->sizes[1].dims[0], 32);
    assert_int_equal (spec->sizes[1].dims[1], 128);
    assert_int_equal (spec->ninputs, 1);
    assert_int_equal (spec->noutputs, 1);
    assert_true (spec->inputs[0].lo == -4 && spec->inputs[0].hi == 4);
    assert_false (spec->inplace);
    assert_int_equal (spec->nbaselines, 1);
    assert_int_equal (spec->ncandidates, 1);
    const ak_candidate_t *cand = ak_spec_candidate (spec, "blocked");
    assert_non_null (cand);
    assert_int_equal (cand->nparams, 2);
    assert_string_equal (cand->params[0].name, "BLOCK");     /* declaration order */
    assert_string_equal (cand->params[1].name, "UNROLL");
    assert_int_equal (cand->params[0].nvalues, 4);
    assert_int_equal (cand->nconstraints, 1);
    assert_string_equal (cand->source.name, "host/blocked.c");

    /* sources carry their text and its sha256 */
    char hex[65];
    assert_int_equal (ak_sha256_hex (cand->source.text, strlen (cand->source.text), hex), 0);
    assert_string_equal (hex, cand->source.digest);
    assert_true (ak_digest_valid (spec->reference.digest));
    assert_non_null (strstr (spec->reference.text, "ak_reference"));

    /* lookups */
    assert_int_equal (ak_spec_key_index (spec, "cols"), 1);
    assert_int_equal (ak_spec_key_index (spec, "depth"), -1);
    assert_non_null (ak_spec_size (spec, "small"));
    assert_non_null (ak_spec_size (spec, "odd"));              /* edge sizes too */
    assert_null (ak_spec_size (spec, "huge"));
    assert_non_null (ak_spec_baseline (spec, "host"));
    assert_null (ak_spec_baseline (spec, "cuda"));
    assert_null (ak_spec_candidate (spec, "nope"));
    assert_true (ak_spec_has_dtype (spec, AK_DT_FLOAT32));
    assert_false (ak_spec_has_dtype (spec, AK_DT_FLOAT16));
    assert_non_null (ak_spec_tol (spec, AK_DT_FLOAT32));
    assert_true (ak_spec_tol (spec, AK_DT_FLOAT32)->atol == 1e-5);
    assert_null (ak_spec_tol (spec, AK_DT_BFLOAT16));
    ak_spec_destroy (&spec);
    assert_null (spec);
    ak_spec_destroy (&spec);
}

static void test_dtypes_and_helpers (void **state)
{
    (void) state;
    ak_dtype_t dt;
    assert_int_equal (ak_dtype_parse ("bfloat16", &dt), 0);
    assert_int_equal (dt, AK_DT_BFLOAT16);
    assert_int_equal (ak_dtype_parse ("float64", &dt), AK_EINVAL);
    assert_int_equal (ak_dtype_parse (NULL, &dt), AK_EINVAL);
    assert_string_equal (ak_dtype_name (AK_DT_FLOAT16), "float16");
    assert_string_equal (ak_dtype_name (AK_DT_FLOAT32), "float32");
    assert_int_equal (ak_dtype_size (AK_DT_FLOAT16), 2);
    assert_int_equal (ak_dtype_size (AK_DT_BFLOAT16), 2);
    assert_int_equal (ak_dtype_size (AK_DT_FLOAT32), 4);
    assert_int_equal (ak_dtype_size ((ak_dtype_t) 17), 0);
    assert_string_equal (ak_class_backend ("host"), "host");
    assert_string_equal (ak_class_backend ("H100"), "cuda");
    assert_string_equal (ak_class_backend (NULL), "cuda");

    ak_policy_t pol;
    ak_policy_defaults (&pol);
    assert_int_equal (pol.max_attempts, 3);
    assert_int_equal (pol.compile_timeout_ms, 60000);
    assert_int_equal (pol.run_timeout_ms, 60000);
    assert_int_equal (pol.lease_ms, 120000);
    assert_int_equal (pol.warmup, 3);
    assert_int_equal (pol.min_samples, 10);
    assert_int_equal (pol.max_samples, 200);
    assert_true (pol.rsd_target == 0.005);
    assert_int_equal (pol.max_time_ms, 2000);
    assert_true (pol.threshold == 0.03);
    assert_true (pol.max_regression == 0.05);
    assert_int_equal (pol.seed, 42);
}

/* ======================================================== space and eval */

typedef struct {
    size_t  n;
    int64_t first[2], last[2];
    size_t  stop_at;
} walk_t;

static int s_visit (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    walk_t *w = arg;
    assert_int_equal (cand->nparams, 2);
    assert_true (values[0] * values[1] <= 16);
    if (w->n == 0)
        memcpy (w->first, values, sizeof w->first);
    memcpy (w->last, values, sizeof w->last);
    w->n++;
    return w->stop_at && w->n == w->stop_at ? 77 : 0;
}

static void test_space_walk (void **state)
{
    fixture_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const ak_candidate_t *cand = ak_spec_candidate (spec, "blocked");

    /* BLOCK in {1,2,4,8} x UNROLL in {1,2,4} with BLOCK*UNROLL <= 16: 3+3+3+2 */
    size_t count = 0;
    walk_t w = { 0 };
    assert_int_equal (ak_space_walk (cand, s_visit, &w, &count, &err), 0);
    assert_int_equal (count, 11);
    assert_int_equal (w.n, 11);
    assert_int_equal (w.first[0], 1);       /* the last parameter turns fastest */
    assert_int_equal (w.first[1], 1);
    assert_int_equal (w.last[0], 8);
    assert_int_equal (w.last[1], 2);

    assert_int_equal (ak_space_walk (cand, NULL, NULL, &count, &err), 0);
    assert_int_equal (count, 11);

    walk_t stop = { .stop_at = 4 };
    assert_int_equal (ak_space_walk (cand, s_visit, &stop, &count, &err), 77);
    assert_int_equal (stop.n, 4);
    assert_int_equal (count, 4);
    ak_spec_destroy (&spec);

    /* more constraints, no constraints, no params */
    ak_test_json_set (fx->json, "candidates[0].constraints",
           json_pack ("[s, s]", "BLOCK*UNROLL <= 16", "BLOCK % UNROLL == 0 || UNROLL == 1"));
    assert_int_equal (s_load (fx, &spec, &err), 0);
    assert_int_equal (ak_space_walk (ak_spec_candidate (spec, "blocked"), NULL, NULL, &count,
                                     &err), 0);
    assert_int_equal (count, 8);            /* drops (1,2) (1,4) (2,4) */
    ak_spec_destroy (&spec);

    ak_test_json_set (fx->json, "candidates[0].constraints", NULL);
    assert_int_equal (s_load (fx, &spec, &err), 0);
    assert_int_equal (ak_space_walk (ak_spec_candidate (spec, "blocked"), NULL, NULL, &count,
                                     &err), 0);
    assert_int_equal (count, 12);
    ak_spec_destroy (&spec);

    ak_test_json_set (fx->json, "candidates[0].params", NULL);
    assert_int_equal (s_load (fx, &spec, &err), 0);
    assert_int_equal (ak_space_walk (ak_spec_candidate (spec, "blocked"), NULL, NULL, &count,
                                     &err), 0);
    assert_int_equal (count, 1);
    ak_spec_destroy (&spec);

    assert_int_equal (ak_space_walk (NULL, NULL, NULL, &count, &err), AK_EINVAL);
}

static void test_spec_eval (void **state)
{
    fixture_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const int64_t *dims = ak_spec_size (spec, "small")->dims;
    int64_t v = 0;
    assert_int_equal (ak_spec_eval (spec, spec->flops, dims, AK_DT_FLOAT32, &v, &err), 0);
    assert_int_equal (v, 5 * 32 * 128);
    assert_int_equal (ak_spec_eval (spec, spec->bytes, dims, AK_DT_FLOAT32, &v, &err), 0);
    assert_int_equal (v, 2 * 32 * 128 * 4);
    assert_int_equal (ak_spec_eval (spec, spec->bytes, dims, AK_DT_FLOAT16, &v, &err), 0);
    assert_int_equal (v, 2 * 32 * 128 * 2);
    assert_int_equal (ak_spec_eval (spec, spec->inputs[0].count, dims, AK_DT_FLOAT32, &v, &err), 0);
    assert_int_equal (v, 32 * 128);
    assert_int_equal (ak_spec_eval (spec, "rows*depth", dims, AK_DT_FLOAT32, &v, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "depth"));
    assert_int_equal (ak_spec_eval (spec, "rows/(cols-128)", dims, AK_DT_FLOAT32, &v, &err),
                      AK_EINVAL);
    assert_int_equal (ak_spec_eval (spec, "rows", dims, (ak_dtype_t) 9, &v, &err), AK_EINVAL);
    ak_spec_destroy (&spec);
}

/* ===================================================== JSON and sources */

static void test_to_json_round_trip (void **state)
{
    fixture_t *fx = *state;
    ak_spec_t *spec = NULL, *again = NULL, *bare = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);

    /* with sources: self-contained, parses back to the same text */
    char *text = ak_spec_to_text (spec, true);
    assert_non_null (text);
    if (ak_spec_parse_text (text, strlen (text), "inline", &again, &err))
        fail_msg ("%s", err.msg);
    char *text2 = ak_spec_to_text (again, true);
    assert_string_equal (text, text2);
    assert_string_equal (again->candidates[0].source.digest, spec->candidates[0].source.digest);
    assert_string_equal (again->candidates[0].source.text, spec->candidates[0].source.text);

    /* without sources: names and digests only (the form workers get) */
    char *thin = ak_spec_to_text (spec, false);
    assert_null (strstr (thin, "ak_kernel"));
    assert_non_null (strstr (thin, spec->reference.digest));
    if (ak_spec_parse_text (thin, strlen (thin), "Assign.spec_json", &bare, &err))
        fail_msg ("%s", err.msg);
    assert_null (bare->reference.text);
    assert_string_equal (bare->reference.digest, spec->reference.digest);
    assert_string_equal (bare->baselines[0].source.digest, spec->baselines[0].source.digest);
    assert_int_equal (bare->nsizes, spec->nsizes);
    char *thin2 = ak_spec_to_text (bare, false);
    assert_string_equal (thin, thin2);

    free (text);
    free (text2);
    free (thin);
    free (thin2);
    ak_spec_destroy (&spec);
    ak_spec_destroy (&again);
    ak_spec_destroy (&bare);
}

static void test_parse_text_rejects_file_paths (void **state)
{
    fixture_t *fx = *state;
    char *text = json_dumps (fx->json, 0);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_spec_parse_text (text, strlen (text), "bundle: ops[0].spec", &spec,
                                          &err), AK_EINVAL);
    assert_null (spec);
    assert_non_null (strstr (err.msg, "bundle: ops[0].spec: reference: must be an inline source"));
    free (text);
}

static void test_inline_digest_mismatch (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "reference", json_pack ("{s:s, s:s, s:s}", "name", "ref.c", "text", "int x;\n",
              "digest", "0000000000000000000000000000000000000000000000000000000000000000"),
              "reference.digest: does not match", NULL);
}

static void test_inline_source_ok (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "reference", json_pack ("{s:s, s:s}", "name", "ref.c", "text", "int x;\n"));
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    assert_string_equal (spec->reference.text, "int x;\n");
    ak_spec_destroy (&spec);
}

static void test_json_syntax_error_names_path (void **state)
{
    fixture_t *fx = *state;
    s_expect (fx, "\"cols\": 128", "\"cols\": 128,,", AK_EINVAL, "sizes[1].size", "invalid JSON");
}

static void test_duplicate_json_key (void **state)
{
    fixture_t *fx = *state;
    s_expect (fx, "\"rows\": 32,", "\"rows\": 32, \"rows\": 33,", AK_EINVAL,
              "sizes[1].size.rows", "duplicate");
}

static void test_missing_file (void **state)
{
    (void) state;
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_spec_load ("/nonexistent/spec.json", &spec, &err), AK_ENOTFOUND);
    assert_non_null (strstr (err.msg, "/nonexistent/spec.json"));
    assert_null (spec);
}

/* ========================================================== rejections */

static void test_reject_missing_keys (void **state)
{
    s_reject (*state, "keys", NULL, "spec.json: keys: missing", NULL);
}

static void test_reject_bad_keys (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "keys", json_pack ("[s, s]", "rows", "rows"), "keys[1]: duplicate key", NULL);
    s_reject (fx, "keys", json_pack ("[s, s]", "rows", "b"), "keys[1]: 'b' is reserved", NULL);
    s_reject (fx, "keys", json_pack ("[s, s]", "rows", "2cols"), "keys[1]: must be an identifier",
              NULL);
    s_reject (fx, "keys", json_pack ("[]"), "keys: must list 1 to 8", NULL);
}

static void test_reject_unknown_field (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "colour", json_string ("blue"), "spec.json: colour: unknown field", NULL);
}

static void test_reject_unknown_nested_field (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "candidates[0].lanch", json_string ("1"), "candidates[0].lanch: unknown field",
              NULL);
}

static void test_reject_unknown_size_key (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "sizes[1].size.depth", json_integer (3), "sizes[1].size.depth: unknown field",
              NULL);
}

static void test_reject_wrong_schema_version (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "schema_version", json_integer (2));
    s_expect (fx, NULL, NULL, AK_EVERSION, "schema_version: unsupported version 2", NULL);
}

static void test_reject_bad_name (void **state)
{
    s_reject (*state, "name", json_string ("Soft-Max"), "spec.json: name: must match [a-z0-9_]+",
              NULL);
}

static void test_reject_duplicate_size_name (void **state)
{
    s_reject (*state, "sizes[2].name", json_string ("tiny"),
              "sizes[2].name: duplicate size name 'tiny'", NULL);
}

static void test_reject_duplicate_edge_size_name (void **state)
{
    s_reject (*state, "edge_sizes[0].name", json_string ("small"),
              "edge_sizes[0].name: duplicate size name", NULL);
}

static void test_reject_duplicate_size_shape (void **state)
{
    s_reject (*state, "sizes[2].size", json_pack ("{s:i, s:i}", "rows", 32, "cols", 128),
              "sizes[2].size: duplicate size", "sizes[1]");
}

static void test_reject_non_positive_size (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "sizes[2].size.cols", json_integer (0),
              "spec.json: sizes[2].size.cols: must be a positive integer", NULL);
    s_reject (fx, "sizes[2].size.cols", json_integer (-8),
              "sizes[2].size.cols: must be a positive integer", NULL);
    s_reject (fx, "sizes[2].size.cols", json_real (256.5),
              "sizes[2].size.cols: must be a positive integer", NULL);
    s_reject (fx, "sizes[2].size.cols", json_string ("256"),
              "sizes[2].size.cols: must be a positive integer", NULL);
    s_reject (fx, "sizes[2].size.cols", json_integer ((json_int_t) 1 << 32),
              "sizes[2].size.cols: must be a positive integer", NULL);
}

static void test_reject_size_missing_key (void **state)
{
    s_reject (*state, "sizes[1].size.cols", NULL, "sizes[1].size.cols: missing", NULL);
}

static void test_reject_sizes_out_of_order (void **state)
{
    s_reject (*state, "sizes[0].size", json_pack ("{s:i, s:i}", "rows", 40, "cols", 128),
              "sizes[1]: smaller than sizes[0]", NULL);
}

static void test_reject_no_sizes (void **state)
{
    s_reject (*state, "sizes", json_array (), "sizes: must list at least one size", NULL);
}

/*  sizes[].backends and reference_cuda: parsed, looked up, written out
    (reference_cuda with its text even in the form without sources) and
    read back; the bad forms rejected with the field named. */
static void test_size_backends_and_reference_cuda (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "sizes[2].backends", json_pack ("[s]", "cuda"));
    ak_test_json_set (fx->json, "reference_cuda", json_pack ("{s:s, s:{s:[s], s:[s]}}", "source", "cuda/base.cu",
                                                  "launch", "grid", "rows", "block", "128"));
    ak_spec_t *spec = NULL, *back = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err) != 0)
        fail_msg ("%s", err.msg);
    assert_int_equal (spec->sizes[2].backends, AK_BACKEND_CUDA);
    assert_int_equal (spec->sizes[0].backends, 0);
    assert_false (ak_size_for_backend (&spec->sizes[2], "host"));
    assert_true (ak_size_for_backend (&spec->sizes[2], "cuda"));
    assert_true (ak_size_for_backend (&spec->sizes[0], "host"));
    assert_true (ak_size_for_backend (&spec->sizes[0], "cuda"));
    assert_non_null (spec->reference_cuda.text);
    assert_string_equal (spec->reference_cuda.name, "cuda/base.cu");
    assert_int_equal (spec->reference_cuda_launch->ngrid, 1);
    assert_string_equal (spec->reference_cuda_launch->block[0], "128");
    char *text = ak_spec_to_text (spec, false);
    assert_non_null (strstr (text, "\"backends\":[\"cuda\"]"));
    assert_non_null (strstr (text, "__global__ void ak_kernel"));      /* the device reference's text */
    assert_null (strstr (text, "void ak_reference (const ak_args_t"));  /* the host oracle's is not */
    if (ak_spec_parse_text (text, strlen (text), "worker", &back, &err) != 0)
        fail_msg ("%s", err.msg);
    assert_int_equal (back->sizes[2].backends, AK_BACKEND_CUDA);
    assert_string_equal (back->reference_cuda.text, spec->reference_cuda.text);
    assert_string_equal (back->reference_cuda.digest, spec->reference_cuda.digest);
    assert_string_equal (back->reference_cuda_launch->grid[0], "rows");
    char *again = ak_spec_to_text (back, false);
    assert_string_equal (again, text);
    free (again);
    free (text);
    ak_spec_destroy (&back);
    ak_spec_destroy (&spec);

    s_reject (fx, "sizes[2].backends", json_pack ("[s]", "gpu"), "sizes[2].backends[0]: unknown backend", NULL);
    s_reject (fx, "sizes[2].backends", json_array (), "sizes[2].backends: must be a non-empty array", NULL);
    s_reject (fx, "sizes[2].backends", json_pack ("[s, s]", "cuda", "cuda"),
              "sizes[2].backends[1]: duplicate backend 'cuda'", NULL);
    s_reject (fx, "sizes[0].backends", json_pack ("[s]", "cuda"),
              "sizes[0].backends: the smoke size runs on every backend", NULL);
    s_reject (fx, "sizes[1].backends", json_pack ("[s]", "cuda"),
              "stability_size: 'small' names backends", NULL);
    s_reject (fx, "reference_cuda.launch", NULL, "reference_cuda.launch: missing", NULL);
    s_reject (fx, "reference_cuda.source", NULL, "reference_cuda.source: missing", NULL);
    s_reject (fx, "reference_cuda.extra", json_true (), "reference_cuda.extra", NULL);
    s_reject (fx, "reference_cuda", json_string ("cuda/base.cu"), "reference_cuda: must be an object", NULL);
}

static void test_reject_unknown_stability_size (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "stability_size", json_string ("medium"), "stability_size: 'medium' is not", NULL);
    s_reject (fx, "stability_size", json_string ("odd"), "stability_size: 'odd' is not", NULL);
}

static void test_near_max_scale (void **state)
{
    fixture_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    /* absent: the defaults */
    assert_int_equal (s_load (fx, &spec, &err), 0);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_FLOAT32) == 1e18);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_BFLOAT16) == 1e30);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_FLOAT16) == 6e4);
    ak_spec_destroy (&spec);
    /* given: used, and kept by ak_spec_to_json */
    ak_test_json_set (fx->json, "near_max_scale", json_pack ("{s:f}", "float32", 1e6));
    assert_int_equal (s_load (fx, &spec, &err), 0);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_FLOAT32) == 1e6);
    json_t *j = ak_spec_to_json (spec, false);
    assert_true (json_real_value (json_object_get (json_object_get (j, "near_max_scale"), "float32")) == 1e6);
    json_decref (j);
    ak_spec_destroy (&spec);
    s_reject (fx, "near_max_scale", json_pack ("{s:f}", "float32", 0.5),
              "near_max_scale.float32: must be a finite number >= 1", NULL);
    s_reject (fx, "near_max_scale", json_pack ("{s:s}", "float32", "big"),
              "near_max_scale.float32: must be a finite number >= 1", NULL);
    s_reject (fx, "near_max_scale", json_pack ("{s:f}", "bfloat16", 10.0),
              "near_max_scale.bfloat16: dtype not declared", NULL);
    s_reject (fx, "near_max_scale", json_pack ("{s:f}", "float64", 10.0),
              "near_max_scale.float64: unknown dtype", NULL);
    s_reject (fx, "near_max_scale", json_string ("x"), "near_max_scale", NULL);
    ak_test_json_set (fx->json, "near_max_scale", NULL);
}

static void test_reject_unknown_dtype (void **state)
{
    s_reject (*state, "dtypes[0]", json_string ("float64"), "dtypes[0]: unknown dtype", NULL);
}

static void test_reject_duplicate_dtype (void **state)
{
    s_reject (*state, "dtypes", json_pack ("[s, s]", "float32", "float32"),
              "dtypes[1]: duplicate dtype", NULL);
}

static void test_reject_tolerance_not_finite (void **state)
{
    fixture_t *fx = *state;
    /* JSON cannot say inf: an overflowing number is how a file gets one. */
    ak_test_json_set (fx->json, "tolerances.float32.atol", json_real (12345.0));
    s_expect (fx, "12345.0", "1e999", AK_EINVAL, "spec.json: tolerances.float32.atol: "
              "must be finite", NULL);
    ak_test_json_set (fx->json, "tolerances.float32.atol", json_real (1e-5));
    ak_test_json_set (fx->json, "tolerances.float32.rtol", json_real (12345.0));
    s_expect (fx, "12345.0", "-1e400", AK_EINVAL, "tolerances.float32.rtol: must be finite", NULL);
}

static void test_reject_tolerance_negative (void **state)
{
    s_reject (*state, "tolerances.float32.atol", json_real (-1e-5),
              "tolerances.float32.atol: must be >= 0", NULL);
}

static void test_reject_tolerance_not_number (void **state)
{
    s_reject (*state, "tolerances.float32.rtol", json_string ("1e-5"),
              "tolerances.float32.rtol: must be a number", NULL);
}

static void test_reject_tolerance_missing_for_dtype (void **state)
{
    s_reject (*state, "dtypes", json_pack ("[s, s]", "float32", "float16"),
              "tolerances.float16: missing", NULL);
}

static void test_reject_tolerance_missing_atol (void **state)
{
    s_reject (*state, "tolerances.float32.atol", NULL, "tolerances.float32.atol: missing", NULL);
}

static void test_reject_tolerance_undeclared_dtype (void **state)
{
    s_reject (*state, "tolerances.bfloat16", json_pack ("{s:f, s:f}", "atol", 1e-2, "rtol", 1e-2),
              "tolerances.bfloat16: dtype not declared", NULL);
}

static void test_reject_bad_expression (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "flops", json_string ("5*rows*"), "spec.json: flops: invalid expression", NULL);
    s_reject (fx, "flops", json_string ("5*rows)"), "flops: invalid expression", NULL);
    s_reject (fx, "outputs[0].count", json_string (""), "outputs[0].count: invalid expression",
              NULL);
}

static void test_reject_unknown_name_in_expression (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "bytes", json_string ("2*rows*depth*b"), "bytes: invalid expression", "depth");
    /* b is only known to the bytes expression */
    s_reject (fx, "flops", json_string ("5*rows*cols*b"), "flops: invalid expression", NULL);
    s_reject (fx, "inputs[0].count", json_string ("rows*cols*b"),
              "inputs[0].count: invalid expression", NULL);
}

static void test_reject_count_overflow (void **state)
{
    s_reject (*state, "inputs[0].count", json_string ("rows*cols*4611686018427387904"),
              "sizes[0]: inputs[0].count", NULL);
    /* a size whose buffer a worker would refuse to allocate (more than
       AK_SPEC_MAX_ELEMS = 2^28 elements): named when the spec is read */
    s_reject (*state, "sizes[2].size.cols", json_integer (1 << 30),
              "sizes[2]: inputs[0].count 'rows*cols' is", "must be 1 to 268435456 elements");
}

static void test_reject_bad_range (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "inputs[0].range", json_pack ("[i, i]", 4, -4), "inputs[0].range: lo must be",
              NULL);
    s_reject (fx, "inputs[0].range", json_pack ("[i]", 4), "inputs[0].range: must be [lo, hi]",
              NULL);
    s_reject (fx, "inputs[0].range", NULL, "inputs[0].range: missing", NULL);
}

static void test_reject_duplicate_buffer (void **state)
{
    s_reject (*state, "outputs[0].name", json_string ("x"), "outputs[0].name: duplicate buffer",
              NULL);
}

static void test_reject_no_outputs (void **state)
{
    s_reject (*state, "outputs", json_array (), "outputs: must list 1 to 8", NULL);
}

static void test_reject_inplace_without_input (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "outputs", json_pack ("[{s:s, s:s}, {s:s, s:s}]", "name", "y", "count",
           "rows*cols", "name", "z", "count", "rows"));
    s_reject (fx, "inplace", json_true (), "inplace: an in-place spec needs", NULL);
}

static void test_reject_path_escaping_spec_dir (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "reference", json_string ("../ref.c"),
              "spec.json: reference: must stay inside the spec's directory", NULL);
    s_reject (fx, "baselines[0].source", json_string ("host/../../etc/passwd"),
              "baselines[0].source: must stay inside", NULL);
    s_reject (fx, "candidates[0].source", json_string ("/etc/passwd"),
              "candidates[0].source: must be a path relative", NULL);
}

static void test_reject_missing_source_file (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "candidates[0].source", json_string ("host/missing.c"));
    s_expect (fx, NULL, NULL, AK_ENOTFOUND, "candidates[0].source: cannot read source",
              "host/missing.c");
}

static void test_reject_empty_source_file (void **state)
{
    fixture_t *fx = *state;
    free (ak_test_write (fx->dir, "host/empty.c", ""));
    s_reject (fx, "candidates[0].source", json_string ("host/empty.c"),
              "candidates[0].source: source is empty", NULL);
}

static void test_reject_source_too_big (void **state)
{
    fixture_t *fx = *state;
    size_t n = AK_MAX_SOURCE_BYTES + 1;
    char *big = malloc (n + 1);
    memset (big, ' ', n);
    big[n] = '\0';
    free (ak_test_write (fx->dir, "host/big.c", big));
    free (big);
    ak_test_json_set (fx->json, "candidates[0].source", json_string ("host/big.c"));
    s_expect (fx, NULL, NULL, AK_ETOOBIG, "candidates[0].source: cannot read source", NULL);
}

static void test_reject_unknown_backend (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "candidates[0].backend", json_string ("opencl"),
              "candidates[0].backend: unknown backend", NULL);
    s_reject (fx, "baselines[0].backend", json_string ("tpu"),
              "baselines[0].backend: unknown backend", NULL);
}

static void test_reject_no_baseline (void **state)
{
    s_reject (*state, "baselines", json_array (), "baselines: must list 1 to 8", NULL);
}

static void test_reject_duplicate_candidate (void **state)
{
    fixture_t *fx = *state;
    json_t *copy = json_deep_copy (json_array_get (json_object_get (fx->json, "candidates"), 0));
    json_array_append_new (json_object_get (fx->json, "candidates"), copy);
    s_expect (fx, NULL, NULL, AK_EINVAL, "candidates[1].name: duplicate candidate name", NULL);
}

static void test_reject_bad_param_name (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "candidates[0].params.block", json_pack ("[i, i]", 1, 2),
              "candidates[0].params.block: parameter names must match", NULL);
    s_reject (fx, "candidates[0].params.2X", json_pack ("[i]", 1),
              "candidates[0].params.2X: parameter names must match", NULL);
}

static void test_reject_empty_param_values (void **state)
{
    s_reject (*state, "candidates[0].params.UNROLL", json_array (),
              "candidates[0].params.UNROLL: must be a non-empty array of integers", NULL);
}

static void test_reject_non_integer_param_values (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "candidates[0].params.UNROLL", json_pack ("[i, f]", 1, 2.5),
              "candidates[0].params.UNROLL[1]: must be an integer", NULL);
    s_reject (fx, "candidates[0].params.UNROLL", json_pack ("[i, i]", 2, 2),
              "candidates[0].params.UNROLL[1]: duplicate value 2", NULL);
    s_reject (fx, "candidates[0].params.UNROLL", json_integer (2),
              "candidates[0].params.UNROLL: must be a non-empty array", NULL);
}

static void test_reject_space_too_big (void **state)
{
    fixture_t *fx = *state;
    json_t *params = json_object ();
    const char *names[] = { "A", "B", "C" };
    for (int p = 0; p < 3; p++) {
        json_t *vals = json_array ();
        for (int v = 0; v < 1000; v++)
            json_array_append_new (vals, json_integer (v));
        json_object_set_new (params, names[p], vals);
    }
    ak_test_json_set (fx->json, "candidates[0].constraints", NULL);
    s_reject (fx, "candidates[0].params", params, "candidates[0].params: the parameter space has "
              "more than", NULL);
}

static void test_reject_space_too_slow_to_check (void **state)
{
    fixture_t *fx = *state;
    json_t *params = json_object ();
    const char *names[] = { "A", "B", "C", "D" };
    for (int p = 0; p < 4; p++) {
        json_t *vals = json_array ();
        for (int v = 1; v <= 16; v++)
            json_array_append_new (vals, json_integer (v));
        json_object_set_new (params, names[p], vals);
    }
    ak_test_json_set (fx->json, "candidates[0].params", params);
    s_reject (fx, "candidates[0].constraints",
              json_pack ("[s]", "A*B*C*D + (A+B)*(C+D) + A*A*A + B*B*B + C*C*C + D*D*D <= 1000000"),
              "candidates[0].constraints: too much to check: 65536 configurations", NULL);
    /* the same space with a short constraint is fine */
    ak_test_json_set (fx->json, "candidates[0].constraints", json_pack ("[s]", "A <= B"));
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    size_t count = 0;
    assert_int_equal (ak_space_walk (&spec->candidates[0], NULL, NULL, &count, &err), 0);
    assert_int_equal (count, 136 * 256);
    ak_spec_destroy (&spec);
}

static void test_reject_bad_constraint (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "candidates[0].constraints", json_pack ("[s, s]", "BLOCK <= 8", "BLOCK*WIDTH <= 4"),
              "candidates[0].constraints[1]: invalid expression", "WIDTH");
    s_reject (fx, "candidates[0].constraints", json_pack ("[s]", "BLOCK <="),
              "candidates[0].constraints[0]: invalid expression", NULL);
    /* constraints are over the parameters, not the shape */
    s_reject (fx, "candidates[0].constraints", json_pack ("[s]", "cols % BLOCK == 0"),
              "candidates[0].constraints[0]: invalid expression", "cols");
    s_reject (fx, "candidates[0].constraints", json_pack ("[i]", 1),
              "candidates[0].constraints[0]: must be a string", NULL);
}

static void test_reject_constraint_failing_to_evaluate (void **state)
{
    s_reject (*state, "candidates[0].constraints", json_pack ("[s]", "BLOCK % (UNROLL - 1) == 0"),
              "candidates[0].constraints[0]:", "BLOCK=1, UNROLL=1");
}

static void test_reject_unsatisfiable_constraints (void **state)
{
    s_reject (*state, "candidates[0].constraints", json_pack ("[s]", "BLOCK > 100"),
              "candidates[0].constraints: no configuration", NULL);
}

static void test_reject_wrong_types (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "sizes", json_object (), "spec.json: sizes: must be an array", NULL);
    s_reject (fx, "inplace", json_integer (1), "inplace: must be true or false", NULL);
    s_reject (fx, "name", json_integer (1), "name: must be a string", NULL);
}

static void test_reject_not_an_object (void **state)
{
    fixture_t *fx = *state;
    char *path = ak_test_write (fx->dir, "spec.json", "[1, 2, 3]");
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_spec_load (path, &spec, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "must be a JSON object"));
    free (path);
}

/* ================================================ the built-in catalog */

static ak_spec_t *s_builtin (const char *name)
{
    char *rel = ak_sprintf ("kernels/%s/spec.json", name);
    char *path = ak_test_src (rel);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_load (path, &spec, &err))
        fail_msg ("%s", err.msg);
    free (rel);
    free (path);
    return spec;
}

static void test_builtin_specs_load (void **state)
{
    (void) state;
    static const struct { const char *name; int nkeys; size_t configs; double tol; } ops[] = {
        { "softmax", 2, 7, 1e-5 }, { "rmsnorm", 2, 9, 1e-4 }, { "matmul", 3, 11, 2e-3 },
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ak_spec_t *spec = s_builtin (ops[i].name);
        assert_string_equal (spec->name, ops[i].name);
        assert_int_equal (spec->nkeys, ops[i].nkeys);
        assert_int_equal (spec->dtypes[0], AK_DT_FLOAT32);
        assert_true (ak_spec_tol (spec, AK_DT_FLOAT32)->atol == ops[i].tol);
        assert_true (spec->nsizes >= 4);
        assert_true (spec->nedge >= 2);
        assert_non_null (ak_spec_size (spec, spec->stability_size));
        assert_non_null (ak_spec_baseline (spec, "host"));
        assert_non_null (spec->reference.text);
        assert_true (spec->ncandidates >= 1);
        size_t count = 0;
        ak_err_t err;
        assert_int_equal (ak_space_walk (&spec->candidates[0], NULL, NULL, &count, &err), 0);
        assert_int_equal (count, ops[i].configs);
        /* an edge size that is not a multiple of any tile or vector width */
        bool odd = false;
        for (size_t e = 0; e < spec->nedge; e++)
            for (int k = 0; k < spec->nkeys; k++)
                odd |= spec->edge_sizes[e].dims[k] % 4 != 0;
        assert_true (odd);
        ak_spec_destroy (&spec);
    }
}

/* ========================================================= launch rules */

/*  Adds a cuda baseline (baselines[1]) and a cuda candidate (candidates[1])
    with launch rules to the fixture. */
static void s_add_cuda (fixture_t *fx)
{
    json_t *bl = json_pack ("{s:s, s:s, s:{s:[s], s:[s]}}", "backend", "cuda", "source", "cuda/base.cu",
                            "launch", "grid", "(rows+127)/128", "block", "128");
    json_t *cand = json_pack ("{s:s, s:s, s:s, s:{s:[i, i, i], s:[i, i]}, s:[s],"
                              " s:{s:[s, s], s:[s], s:s}}",
                              "name", "rows", "backend", "cuda", "source", "cuda/rows.cu",
                              "params", "THREADS", 64, 128, 256, "VEC", 1, 4,
                              "constraints", "THREADS % 32 == 0",
                              "launch", "grid", "(rows+THREADS/32-1)/(THREADS/32)", "cols/cols",
                              "block", "THREADS", "shared", "THREADS/32*VEC*b");
    assert_non_null (bl);
    assert_non_null (cand);
    assert_int_equal (json_array_append_new (json_object_get (fx->json, "baselines"), bl), 0);
    assert_int_equal (json_array_append_new (json_object_get (fx->json, "candidates"), cand), 0);
}

static void test_launch_rules_load (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_non_null (bl->launch);
    assert_int_equal (bl->launch->ngrid, 1);
    assert_int_equal (bl->launch->nblock, 1);
    assert_string_equal (bl->launch->shared, "0");          /* not given: 0 */
    assert_null (ak_spec_baseline (spec, "host")->launch);
    const ak_candidate_t *cand = ak_spec_candidate (spec, "rows");
    assert_non_null (cand->launch);
    assert_int_equal (cand->launch->ngrid, 2);
    assert_string_equal (cand->launch->grid[1], "cols/cols");
    assert_string_equal (cand->launch->block[0], "THREADS");
    assert_string_equal (cand->launch->shared, "THREADS/32*VEC*b");
    assert_null (ak_spec_candidate (spec, "blocked")->launch);

    /* Both JSON forms carry the rules and read back to the same text. */
    for (int with = 0; with < 2; with++) {
        char *text = ak_spec_to_text (spec, with);
        ak_spec_t *again = NULL;
        if (ak_spec_parse_text (text, strlen (text), "again", &again, &err))
            fail_msg ("%s", err.msg);
        char *text2 = ak_spec_to_text (again, with);
        assert_string_equal (text, text2);
        assert_non_null (strstr (text, "\"launch\":{\"grid\":[\"(rows+127)/128\"],\"block\":[\"128\"],"
                                       "\"shared\":\"0\"}"));
        free (text);
        free (text2);
        ak_spec_destroy (&again);
    }
    ak_spec_destroy (&spec);
}

static void test_launch_eval (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const ak_candidate_t *cand = ak_spec_candidate (spec, "rows");
    const char *names[] = { "THREADS", "VEC" };
    int64_t values[] = { 128, 4 };
    int64_t dims[AK_MAX_DIMS] = { 33, 100 };
    ak_launch_cfg_t lc;
    memset (&lc, 0xAB, sizeof lc);
    assert_int_equal (ak_launch_eval (spec, cand->launch, dims, AK_DT_FLOAT32, names, values, 2, &lc, &err), 0);
    assert_int_equal (lc.grid[0], 9);           /* 33 rows, 4 per block */
    assert_int_equal (lc.grid[1], 1);
    assert_int_equal (lc.grid[2], 1);           /* not given: 1 */
    assert_int_equal (lc.block[0], 128);
    assert_int_equal (lc.block[1], 1);
    assert_int_equal (lc.block[2], 1);
    assert_int_equal (lc.shared_bytes, 4 * 4 * 4);
    assert_int_equal (ak_launch_eval (spec, cand->launch, dims, AK_DT_FLOAT16, names, values, 2, &lc, &err), 0);
    assert_int_equal (lc.shared_bytes, 4 * 4 * 2);   /* b follows the dtype */
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_int_equal (ak_launch_eval (spec, bl->launch, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), 0);
    assert_int_equal (lc.grid[0], 1);
    assert_int_equal (lc.block[0], 128);
    assert_int_equal (lc.shared_bytes, 0);

    /* Out of range values and failing expressions name the field. */
    values[0] = 0;                                      /* block 0, and /0 in the grid */
    assert_int_equal (ak_launch_eval (spec, cand->launch, dims, AK_DT_FLOAT32, names, values, 2, &lc, &err),
                      AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.grid[0]"));
    assert_non_null (strstr (err.msg, "division by zero"));
    ak_launch_rule_t rule = { .grid = { "rows - 40" }, .ngrid = 1, .block = { "32" }, .nblock = 1,
                              .shared = "0" };
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.grid[0] 'rows - 40' = -7: must be 1..2147483647"));
    rule.grid[0] = "1";
    rule.block[0] = "rows * 100000000";
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.block[0]"));
    rule.block[0] = "32";
    rule.shared = "0 - 1";
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.shared '0 - 1' = -1: must be 0..2147483647"));
    rule.shared = "THREADS";                            /* a baseline has no parameters */
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "unknown name"));
    /* Bad arguments are refused, never dereferenced. */
    assert_int_equal (ak_launch_eval (spec, NULL, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 3, &lc, &err), AK_EINVAL);
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_COUNT, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    rule.ngrid = 0;
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    ak_spec_destroy (&spec);
}

static void test_reject_launch_on_host (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "candidates[0].launch", json_pack ("{s:[s], s:[s]}", "grid", "1", "block", "1"),
              "candidates[0].launch: only cuda kernels have a launch rule", NULL);
    s_reject (fx, "baselines[0].launch", json_pack ("{s:[s], s:[s]}", "grid", "1", "block", "1"),
              "baselines[0].launch: only cuda kernels have a launch rule", NULL);
}

static void test_reject_launch_missing (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    s_reject (fx, "candidates[1].launch", NULL, "candidates[1].launch: missing", NULL);
    s_reject (fx, "baselines[1].launch", NULL, "baselines[1].launch: missing", NULL);
}

static void test_reject_launch_not_object (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    s_reject (fx, "candidates[1].launch", json_string ("128"), "candidates[1].launch: must be an object",
              NULL);
}

static void test_reject_launch_unknown_field (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    s_reject (fx, "candidates[1].launch.threads", json_integer (128),
              "candidates[1].launch.threads: unknown field", NULL);
}

static void test_reject_launch_grid (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    s_reject (fx, "candidates[1].launch.grid", NULL, "candidates[1].launch.grid: missing", NULL);
    s_reject (fx, "candidates[1].launch.grid", json_array (), "candidates[1].launch.grid: must list 1 to 3",
              NULL);
    s_reject (fx, "candidates[1].launch.grid", json_pack ("[s, s, s, s]", "1", "1", "1", "1"),
              "candidates[1].launch.grid: must list 1 to 3", NULL);
    s_reject (fx, "candidates[1].launch.grid", json_string ("rows"),
              "candidates[1].launch.grid: must be an array", NULL);
    s_reject (fx, "candidates[1].launch.grid", json_pack ("[i]", 4),
              "candidates[1].launch.grid[0]: must be a string", NULL);
    s_reject (fx, "candidates[1].launch.grid", json_pack ("[s]", "rows +"),
              "candidates[1].launch.grid[0]: invalid expression", NULL);
    s_reject (fx, "candidates[1].launch.grid", json_pack ("[s]", "cdiv(rows, THREADS)"),
              "candidates[1].launch.grid[0]: invalid expression", NULL);
    s_reject (fx, "candidates[1].launch.grid", json_pack ("[s]", "rows/TILE"),
              "candidates[1].launch.grid[0]: invalid expression", "TILE");
}

static void test_reject_launch_block (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    s_reject (fx, "candidates[1].launch.block", NULL, "candidates[1].launch.block: missing", NULL);
    s_reject (fx, "candidates[1].launch.block", json_array (),
              "candidates[1].launch.block: must list 1 to 3", NULL);
    s_reject (fx, "candidates[1].launch.block", json_pack ("[s, n]", "32", NULL),
              "candidates[1].launch.block[1]: must be a string", NULL);
    s_reject (fx, "candidates[1].launch.block", json_pack ("[s]", "WARPS*32"),
              "candidates[1].launch.block[0]: invalid expression", "WARPS");
    /* a baseline's rule sees no parameters */
    s_reject (fx, "baselines[1].launch.block", json_pack ("[s]", "THREADS"),
              "baselines[1].launch.block[0]: invalid expression", "THREADS");
}

static void test_reject_launch_shared (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    s_reject (fx, "candidates[1].launch.shared", json_integer (1024),
              "candidates[1].launch.shared: must be a string", NULL);
    s_reject (fx, "candidates[1].launch.shared", json_string ("THREADS*"),
              "candidates[1].launch.shared: invalid expression", NULL);
    s_reject (fx, "candidates[1].launch.shared", json_string ("TILE*4"),
              "candidates[1].launch.shared: invalid expression", "TILE");
}

static void test_reject_launch_param_named_like_key (void **state)
{
    fixture_t *fx = *state;
    s_add_cuda (fx);
    /* keys "rows", "COLS": the parameter COLS would shadow a key in the rule */
    char *text = json_dumps (fx->json, JSON_COMPACT);
    char *from = text, *out = ak_strdup ("");
    for (char *at; (at = strstr (from, "\"cols")) != NULL; from = at + 5) {
        char *joined = ak_sprintf ("%s%.*s\"COLS", out, (int) (at - from), from);
        free (out);
        out = joined;
    }
    char *all = ak_sprintf ("%s%s", out, from);
    free (out);
    free (text);
    json_decref (fx->json);
    fx->json = json_loads (all, 0, NULL);
    free (all);
    assert_non_null (fx->json);
    ak_test_json_set (fx->json, "candidates[1].launch.grid", json_pack ("[s]", "rows"));
    ak_test_json_set (fx->json, "flops", json_string ("5*rows*COLS"));
    ak_test_json_set (fx->json, "bytes", json_string ("2*rows*COLS*b"));
    ak_test_json_set (fx->json, "inputs[0].count", json_string ("rows*COLS"));
    ak_test_json_set (fx->json, "outputs[0].count", json_string ("rows*COLS"));
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (s_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    ak_spec_destroy (&spec);
    s_reject (fx, "candidates[1].params.COLS", json_pack ("[i]", 4),
              "candidates[1].launch: parameter COLS has the name of a shape key", NULL);
}

/* ---------------------------------------------- building and running kernels */

typedef void (kernel_fn) (const void *args);

typedef struct {
    char *dir;          /* scratch for sources and shared objects */
    int   nbuilt;
} builder_t;

/*  Builds source as the host backend does: prelude + source, cc -O2 -fPIC
    -shared -Wall -Werror, params as -D; returns the dlopen handle. */
static void *s_build (builder_t *b, const char *source, const char *defines)
{
    char *prelude = ak_test_src ("kernels/ak_kernel.h");
    char *head = NULL;
    size_t hlen = 0;
    ak_err_t err;
    if (ak_file_read (prelude, 1 << 20, &head, &hlen, &err))
        fail_msg ("%s", err.msg);
    char *name = ak_sprintf ("k%d", b->nbuilt++);
    char *cname = ak_sprintf ("%s.c", name);
    char *text = ak_sprintf ("%s\n%s", head, source);
    char *cpath = ak_test_write (b->dir, cname, text);
    char *so = ak_sprintf ("%s/%s.so", b->dir, name);
    char *cmd = ak_sprintf ("cc -O2 -fPIC -shared -Wall -Werror %s -o %s %s -lm 2>&1",
                            defines ? defines : "", so, cpath);
    char *out = NULL;
    int rc = ak_test_run (cmd, &out);
    if (rc != 0)
        fail_msg ("%s\n%s", cmd, out ? out : "");
    void *handle = dlopen (so, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
        fail_msg ("dlopen %s: %s", so, dlerror ());
    free (out);
    free (cmd);
    free (so);
    free (cpath);
    free (text);
    free (cname);
    free (name);
    free (head);
    free (prelude);
    return handle;
}

typedef struct {
    const ak_spec_t *spec;
    const int64_t   *dims;
    float  *in[AK_MAX_BUFS], *out[AK_MAX_BUFS];
    double *din[AK_MAX_BUFS], *dout[AK_MAX_BUFS];
    int64_t nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
} io_t;

static void s_io_init (io_t *io, const ak_spec_t *spec, const int64_t *dims, uint64_t seed)
{
    memset (io, 0, sizeof *io);
    io->spec = spec;
    io->dims = dims;
    ak_err_t err;
    for (int i = 0; i < spec->ninputs; i++) {
        assert_int_equal (ak_spec_eval (spec, spec->inputs[i].count, dims, AK_DT_FLOAT32,
                                        &io->nin[i], &err), 0);
        io->in[i] = malloc ((size_t) io->nin[i] * sizeof (float));
        io->din[i] = malloc ((size_t) io->nin[i] * sizeof (double));
        for (int64_t j = 0; j < io->nin[i]; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            double u = (double) (seed >> 11) / 9007199254740992.0;
            io->in[i][j] = (float) (spec->inputs[i].lo + u * (spec->inputs[i].hi - spec->inputs[i].lo));
            io->din[i][j] = io->in[i][j];
        }
    }
    for (int i = 0; i < spec->noutputs; i++) {
        assert_int_equal (ak_spec_eval (spec, spec->outputs[i].count, dims, AK_DT_FLOAT32,
                                        &io->nout[i], &err), 0);
        io->out[i] = malloc ((size_t) io->nout[i] * sizeof (float));
        io->dout[i] = malloc ((size_t) io->nout[i] * sizeof (double));
    }
}

static void s_io_free (io_t *io)
{
    for (int i = 0; i < AK_MAX_BUFS; i++) {
        free (io->in[i]);
        free (io->din[i]);
        free (io->out[i]);
        free (io->dout[i]);
    }
}

static void s_call (void *handle, const char *symbol, io_t *io, bool reference)
{
    const ak_spec_t *spec = io->spec;
    ak_args_t args = { .ndims = spec->nkeys, .nin = spec->ninputs, .nout = spec->noutputs };
    memcpy (args.dims, io->dims, sizeof (int64_t) * (size_t) spec->nkeys);
    for (int i = 0; i < spec->ninputs; i++)
        args.in[i] = reference ? (const void *) io->din[i] : (const void *) io->in[i];
    for (int i = 0; i < spec->noutputs; i++) {
        if (reference)
            args.out[i] = io->dout[i];
        else {
            memset (io->out[i], 0xff, (size_t) io->nout[i] * sizeof (float));   /* poison: NaN */
            args.out[i] = io->out[i];
        }
    }
    kernel_fn *fn;
    *(void **) &fn = dlsym (handle, symbol);
    if (!fn)
        fail_msg ("no %s: %s", symbol, dlerror ());
    fn (&args);
}

/*  Number of output elements outside the tolerance (NaN counts). */
static int64_t s_mismatches (const io_t *io, const ak_tol_t *tol)
{
    int64_t bad = 0;
    for (int i = 0; i < io->spec->noutputs; i++)
        for (int64_t j = 0; j < io->nout[i]; j++) {
            double ref = io->dout[i][j], got = io->out[i][j];
            if (!(fabs (got - ref) <= tol->atol + tol->rtol * fabs (ref)))
                bad++;
        }
    return bad;
}

typedef struct {
    builder_t       *b;
    const ak_spec_t *spec;
    void            *ref;
    const char      *text;
    int              checked;
} config_run_t;

static int s_check_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    config_run_t *run = arg;
    char defines[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < cand->nparams; i++)
        n += (size_t) snprintf (defines + n, sizeof defines - n, " -D%s=%lld",
                                cand->params[i].name, (long long) values[i]);
    void *k = s_build (run->b, run->text, defines);
    const ak_spec_t *spec = run->spec;
    const ak_size_t *sizes[] = { &spec->sizes[0], ak_spec_size (spec, spec->stability_size),
                                 &spec->edge_sizes[0], &spec->edge_sizes[1] };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        io_t io;
        s_io_init (&io, spec, sizes[s]->dims, 42 + s);
        s_call (run->ref, "ak_reference", &io, true);
        s_call (k, "ak_kernel", &io, false);
        int64_t bad = s_mismatches (&io, ak_spec_tol (spec, AK_DT_FLOAT32));
        if (bad)
            fail_msg ("%s %s%s at %s: %lld outputs out of tolerance", spec->name, cand->name,
                      defines, sizes[s]->name, (long long) bad);
        s_io_free (&io);
    }
    dlclose (k);
    run->checked++;
    return 0;
}

static void test_builtin_kernels_match_reference (void **state)
{
    (void) state;
    builder_t b = { .dir = ak_test_tmpdir ("kernels") };
    const char *ops[] = { "softmax", "rmsnorm", "matmul" };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ak_spec_t *spec = s_builtin (ops[i]);
        config_run_t run = { .b = &b, .spec = spec };
        run.ref = s_build (&b, spec->reference.text, "-DAK_REFERENCE");
        assert_string_equal (spec->baselines[0].backend, "host");
        ak_candidate_t base = { .name = "baseline",
                                .source = spec->baselines[0].source };
        run.text = base.source.text;
        s_check_config (&base, NULL, &run);
        for (size_t c = 0; c < spec->ncandidates; c++) {
            size_t count = 0;
            ak_err_t err;
            if (strcmp (spec->candidates[c].backend, "host") != 0)
                continue;          /* cuda kernels: tests/unit/test_cuda_catalog.c */
            run.text = spec->candidates[c].source.text;
            assert_int_equal (ak_space_walk (&spec->candidates[c], s_check_config, &run, &count,
                                             &err), 0);
        }
        dlclose (run.ref);
        ak_spec_destroy (&spec);
    }
    ak_test_rmtree (b.dir);
    free (b.dir);
}

/*  The planted kernels under kernels/testing fail the way their names say
    (crash and hang are only built: running them is the fault tests' job). */
static void test_planted_kernels (void **state)
{
    (void) state;
    builder_t b = { .dir = ak_test_tmpdir ("planted") };
    ak_spec_t *spec = s_builtin ("softmax");
    void *ref = s_build (&b, spec->reference.text, "-DAK_REFERENCE");
    const ak_tol_t *tol = ak_spec_tol (spec, AK_DT_FLOAT32);
    const char *names[] = { "wrong", "nan", "unwritten", "nondeterministic", "crash", "hang" };
    void *handles[6];
    for (int i = 0; i < 6; i++) {
        char *rel = ak_sprintf ("kernels/testing/%s.c", names[i]);
        char *path = ak_test_src (rel);
        char *text = NULL;
        ak_err_t err;
        if (ak_file_read (path, AK_MAX_SOURCE_BYTES, &text, NULL, &err))
            fail_msg ("%s", err.msg);
        handles[i] = s_build (&b, text, "");
        free (text);
        free (path);
        free (rel);
    }
    for (size_t s = 0; s < spec->nsizes; s++) {
        if (!ak_size_for_backend (&spec->sizes[s], "host"))
            continue;               /* GPU-only sizes: host kernels never get them */
        io_t io;
        s_io_init (&io, spec, spec->sizes[s].dims, 7);
        s_call (ref, "ak_reference", &io, true);
        int64_t total = io.nout[0];

        s_call (handles[0], "ak_kernel", &io, false);                  /* wrong */
        assert_true (s_mismatches (&io, tol) > 0);
        for (int64_t j = 0; j < total; j++)
            assert_true (isfinite (io.out[0][j]));

        s_call (handles[1], "ak_kernel", &io, false);                  /* nan */
        int64_t nans = 0;
        for (int64_t j = 0; j < total; j++)
            nans += isnan (io.out[0][j]);
        assert_true (nans > 0 && nans < total);

        s_call (handles[2], "ak_kernel", &io, false);                  /* unwritten */
        assert_true (s_mismatches (&io, tol) > 0);
        assert_true (isnan (io.out[0][total - 1]));                    /* still the poison */
        assert_false (isnan (io.out[0][0]) && spec->sizes[s].dims[0] > 1);

        float first[4];
        for (int run = 0; run < 3; run++) {                            /* nondeterministic */
            s_call (handles[3], "ak_kernel", &io, false);
            assert_int_equal (s_mismatches (&io, tol), 0);
            first[run] = io.out[0][total - 1];
        }
        assert_true (memcmp (&first[0], &first[1], sizeof (float)) != 0
                     || memcmp (&first[1], &first[2], sizeof (float)) != 0);
        s_io_free (&io);
    }
    for (int i = 0; i < 6; i++)
        dlclose (handles[i]);
    dlclose (ref);
    ak_spec_destroy (&spec);
    ak_test_rmtree (b.dir);
    free (b.dir);
}

int main (void)
{
#define T(fn) cmocka_unit_test_setup_teardown (fn, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        T (test_base_loads),
        cmocka_unit_test (test_dtypes_and_helpers),
        T (test_space_walk),
        T (test_spec_eval),
        T (test_to_json_round_trip),
        T (test_parse_text_rejects_file_paths),
        T (test_inline_digest_mismatch),
        T (test_inline_source_ok),
        T (test_json_syntax_error_names_path),
        T (test_duplicate_json_key),
        cmocka_unit_test (test_missing_file),
        T (test_reject_missing_keys),
        T (test_reject_bad_keys),
        T (test_reject_unknown_field),
        T (test_reject_unknown_nested_field),
        T (test_reject_unknown_size_key),
        T (test_reject_wrong_schema_version),
        T (test_reject_bad_name),
        T (test_reject_duplicate_size_name),
        T (test_reject_duplicate_edge_size_name),
        T (test_reject_duplicate_size_shape),
        T (test_reject_non_positive_size),
        T (test_reject_size_missing_key),
        T (test_reject_sizes_out_of_order),
        T (test_reject_no_sizes),
        T (test_size_backends_and_reference_cuda),
        T (test_reject_unknown_stability_size),
        T (test_near_max_scale),
        T (test_reject_unknown_dtype),
        T (test_reject_duplicate_dtype),
        T (test_reject_tolerance_not_finite),
        T (test_reject_tolerance_negative),
        T (test_reject_tolerance_not_number),
        T (test_reject_tolerance_missing_for_dtype),
        T (test_reject_tolerance_missing_atol),
        T (test_reject_tolerance_undeclared_dtype),
        T (test_reject_bad_expression),
        T (test_reject_unknown_name_in_expression),
        T (test_reject_count_overflow),
        T (test_reject_bad_range),
        T (test_reject_duplicate_buffer),
        T (test_reject_no_outputs),
        T (test_reject_inplace_without_input),
        T (test_reject_path_escaping_spec_dir),
        T (test_reject_missing_source_file),
        T (test_reject_empty_source_file),
        T (test_reject_source_too_big),
        T (test_reject_unknown_backend),
        T (test_reject_no_baseline),
        T (test_reject_duplicate_candidate),
        T (test_reject_bad_param_name),
        T (test_reject_empty_param_values),
        T (test_reject_non_integer_param_values),
        T (test_reject_space_too_big),
        T (test_reject_space_too_slow_to_check),
        T (test_reject_bad_constraint),
        T (test_reject_constraint_failing_to_evaluate),
        T (test_reject_unsatisfiable_constraints),
        T (test_reject_wrong_types),
        T (test_reject_not_an_object),
        T (test_launch_rules_load),
        T (test_launch_eval),
        T (test_reject_launch_on_host),
        T (test_reject_launch_missing),
        T (test_reject_launch_not_object),
        T (test_reject_launch_unknown_field),
        T (test_reject_launch_grid),
        T (test_reject_launch_block),
        T (test_reject_launch_shared),
        T (test_reject_launch_param_named_like_key),
        cmocka_unit_test (test_builtin_specs_load),
        cmocka_unit_test (test_builtin_kernels_match_reference),
        cmocka_unit_test (test_planted_kernels),
    };
#undef T
    return cmocka_run_group_tests (tests, NULL, NULL);
}
