/*  tests/unit/test_spec.c: operator specs (common/spec.c): parsing, helpers, space walks.

    Each rejected field has its own test: a known-good spec is written to a
    temporary directory with one change, loaded, and the error must name the
    field by its JSON path (the fixture: tests/unit/unit.c).  Launch rules:
    test_spec_launch.c; the built-in catalog's specs and host kernels:
    test_spec_catalog.c. */
#include "manifest.h"
#include "space.h"
#include "support.h"
#include "unit.h"
#include "digest.h"
#include "spec.h"
#include "util.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ============================================================= the base */

static void test_base_loads (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
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
    ak_spec_fx_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
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
    assert_int_equal (ak_spec_fx_load (fx, &spec, &err), 0);
    assert_int_equal (ak_space_walk (ak_spec_candidate (spec, "blocked"), NULL, NULL, &count,
                                     &err), 0);
    assert_int_equal (count, 8);            /* drops (1,2) (1,4) (2,4) */
    ak_spec_destroy (&spec);

    ak_test_json_set (fx->json, "candidates[0].constraints", NULL);
    assert_int_equal (ak_spec_fx_load (fx, &spec, &err), 0);
    assert_int_equal (ak_space_walk (ak_spec_candidate (spec, "blocked"), NULL, NULL, &count,
                                     &err), 0);
    assert_int_equal (count, 12);
    ak_spec_destroy (&spec);

    ak_test_json_set (fx->json, "candidates[0].params", NULL);
    assert_int_equal (ak_spec_fx_load (fx, &spec, &err), 0);
    assert_int_equal (ak_space_walk (ak_spec_candidate (spec, "blocked"), NULL, NULL, &count,
                                     &err), 0);
    assert_int_equal (count, 1);
    ak_spec_destroy (&spec);

    assert_int_equal (ak_space_walk (NULL, NULL, NULL, &count, &err), AK_EINVAL);
}

typedef struct {
    size_t  n;
    int64_t got[16][2];
    size_t  stop_at;
} near_t;

static int s_near (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    near_t *w = arg;
    assert_int_equal (cand->nparams, 2);
    assert_true (w->n < 16);
    memcpy (w->got[w->n++], values, sizeof w->got[0]);
    return w->stop_at && w->n == w->stop_at ? 77 : 0;
}

static void s_near_is (const near_t *w, const int64_t (*want)[2], size_t n)
{
    assert_int_equal (w->n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal (w->got[i][0], want[i][0]);
        assert_int_equal (w->got[i][1], want[i][1]);
    }
}

/* BLOCK in {1,2,4,8} x UNROLL in {1,2,4}, BLOCK*UNROLL <= 16: each
   parameter a step down then up, then both a step in opposite directions;
   never outside the value lists or the constraints. */
static void test_space_neighbors (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const ak_candidate_t *cand = ak_spec_candidate (spec, "blocked");

    near_t w = { 0 };
    const int64_t mid[2] = { 4, 2 };
    assert_int_equal (ak_space_neighbors (cand, mid, s_near, &w, &err), 0);
    static const int64_t want[][2] = { { 2, 2 }, { 8, 2 }, { 4, 1 }, { 4, 4 }, { 2, 4 }, { 8, 1 } };
    s_near_is (&w, want, 6);

    /* the constraint drops (8,4); nothing above BLOCK 8 */
    near_t e = { 0 };
    const int64_t edge[2] = { 8, 2 };
    assert_int_equal (ak_space_neighbors (cand, edge, s_near, &e, &err), 0);
    static const int64_t want_e[][2] = { { 4, 2 }, { 8, 1 }, { 4, 4 } };
    s_near_is (&e, want_e, 3);

    /* a corner: nothing below the first values */
    near_t c = { 0 };
    const int64_t corner[2] = { 1, 1 };
    assert_int_equal (ak_space_neighbors (cand, corner, s_near, &c, &err), 0);
    assert_int_equal (c.n, 2);                                  /* (2,1) (1,2); no trade stays inside */
    assert_int_equal (c.got[0][0], 2);
    assert_int_equal (c.got[1][1], 2);

    /* fn's non-zero stops the walk and comes back */
    near_t stop = { .stop_at = 2 };
    assert_int_equal (ak_space_neighbors (cand, mid, s_near, &stop, &err), 77);
    assert_int_equal (stop.n, 2);

    /* a value not in the list is an error naming it */
    const int64_t off[2] = { 3, 2 };
    assert_true (ak_space_in_lists (cand, mid));
    assert_false (ak_space_in_lists (cand, off));
    near_t none = { 0 };
    assert_int_equal (ak_space_neighbors (cand, off, s_near, &none, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "BLOCK=3"));
    assert_int_equal (none.n, 0);
    assert_int_equal (ak_space_neighbors (NULL, mid, s_near, &none, &err), AK_EINVAL);
    ak_spec_destroy (&spec);
}

static void test_spec_eval (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
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
    ak_spec_fx_t *fx = *state;
    ak_spec_t *spec = NULL, *again = NULL, *bare = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
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
    ak_spec_fx_t *fx = *state;
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
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "reference", json_pack ("{s:s, s:s, s:s}", "name", "ref.c", "text", "int x;\n",
                       "digest", "0000000000000000000000000000000000000000000000000000000000000000"),
                       "reference.digest: does not match", NULL);
}

static void test_inline_source_ok (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_test_json_set (fx->json, "reference", json_pack ("{s:s, s:s}", "name", "ref.c", "text", "int x;\n"));
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    assert_string_equal (spec->reference.text, "int x;\n");
    ak_spec_destroy (&spec);
}

static void test_json_syntax_error_names_path (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_expect (fx, "\"cols\": 128", "\"cols\": 128,,", AK_EINVAL, "sizes[1].size", "invalid JSON");
}

static void test_duplicate_json_key (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_expect (fx, "\"rows\": 32,", "\"rows\": 32, \"rows\": 33,", AK_EINVAL,
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
    ak_spec_fx_reject (*state, "keys", NULL, "spec.json: keys: missing", NULL);
}

static void test_reject_bad_keys (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "keys", json_pack ("[s, s]", "rows", "rows"), "keys[1]: duplicate key", NULL);
    ak_spec_fx_reject (fx, "keys", json_pack ("[s, s]", "rows", "b"), "keys[1]: 'b' is reserved", NULL);
    ak_spec_fx_reject (fx, "keys", json_pack ("[s, s]", "rows", "2cols"), "keys[1]: must be an identifier",
                       NULL);
    ak_spec_fx_reject (fx, "keys", json_pack ("[]"), "keys: must list 1 to 8", NULL);
}

static void test_reject_unknown_field (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "colour", json_string ("blue"), "spec.json: colour: unknown field", NULL);
}

static void test_reject_unknown_nested_field (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "candidates[0].lanch", json_string ("1"), "candidates[0].lanch: unknown field",
                       NULL);
}

static void test_reject_unknown_size_key (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "sizes[1].size.depth", json_integer (3), "sizes[1].size.depth: unknown field",
                       NULL);
}

static void test_reject_wrong_schema_version (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_test_json_set (fx->json, "schema_version", json_integer (2));
    ak_spec_fx_expect (fx, NULL, NULL, AK_EVERSION, "schema_version: unsupported version 2", NULL);
}

static void test_reject_bad_name (void **state)
{
    ak_spec_fx_reject (*state, "name", json_string ("Soft-Max"), "spec.json: name: must match [a-z0-9_]+",
                       NULL);
}

static void test_reject_duplicate_size_name (void **state)
{
    ak_spec_fx_reject (*state, "sizes[2].name", json_string ("tiny"),
                       "sizes[2].name: duplicate size name 'tiny'", NULL);
}

static void test_reject_duplicate_edge_size_name (void **state)
{
    ak_spec_fx_reject (*state, "edge_sizes[0].name", json_string ("small"),
                       "edge_sizes[0].name: duplicate size name", NULL);
}

static void test_reject_duplicate_size_shape (void **state)
{
    ak_spec_fx_reject (*state, "sizes[2].size", json_pack ("{s:i, s:i}", "rows", 32, "cols", 128),
                       "sizes[2].size: duplicate size", "sizes[1]");
}

static void test_reject_non_positive_size (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "sizes[2].size.cols", json_integer (0),
                       "spec.json: sizes[2].size.cols: must be a positive integer", NULL);
    ak_spec_fx_reject (fx, "sizes[2].size.cols", json_integer (-8),
                       "sizes[2].size.cols: must be a positive integer", NULL);
    ak_spec_fx_reject (fx, "sizes[2].size.cols", json_real (256.5),
                       "sizes[2].size.cols: must be a positive integer", NULL);
    ak_spec_fx_reject (fx, "sizes[2].size.cols", json_string ("256"),
                       "sizes[2].size.cols: must be a positive integer", NULL);
    ak_spec_fx_reject (fx, "sizes[2].size.cols", json_integer ((json_int_t) 1 << 32),
                       "sizes[2].size.cols: must be a positive integer", NULL);
}

static void test_reject_size_missing_key (void **state)
{
    ak_spec_fx_reject (*state, "sizes[1].size.cols", NULL, "sizes[1].size.cols: missing", NULL);
}

static void test_reject_sizes_out_of_order (void **state)
{
    ak_spec_fx_reject (*state, "sizes[0].size", json_pack ("{s:i, s:i}", "rows", 40, "cols", 128),
                       "sizes[1]: smaller than sizes[0]", NULL);
}

static void test_reject_no_sizes (void **state)
{
    ak_spec_fx_reject (*state, "sizes", json_array (), "sizes: must list at least one size", NULL);
}

/*  sizes[].backends and reference_cuda: parsed, looked up, written out
    (reference_cuda with its text even in the form without sources) and
    read back; the bad forms rejected with the field named. */
static void test_size_backends_and_reference_cuda (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_test_json_set (fx->json, "sizes[2].backends", json_pack ("[s]", "cuda"));
    ak_test_json_set (fx->json, "reference_cuda", json_pack ("{s:s, s:{s:[s], s:[s]}}", "source", "cuda/base.cu",
                                                  "launch", "grid", "rows", "block", "128"));
    ak_spec_t *spec = NULL, *back = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err) != 0)
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

    ak_spec_fx_reject (fx, "sizes[2].backends", json_pack ("[s]", "gpu"), "sizes[2].backends[0]: unknown backend", NULL);
    ak_spec_fx_reject (fx, "sizes[2].backends", json_array (), "sizes[2].backends: must be a non-empty array", NULL);
    ak_spec_fx_reject (fx, "sizes[2].backends", json_pack ("[s, s]", "cuda", "cuda"),
                       "sizes[2].backends[1]: duplicate backend 'cuda'", NULL);
    ak_spec_fx_reject (fx, "sizes[0].backends", json_pack ("[s]", "cuda"),
                       "sizes[0].backends: the smoke size runs on every backend", NULL);
    ak_spec_fx_reject (fx, "sizes[1].backends", json_pack ("[s]", "cuda"),
                       "stability_size: 'small' names backends", NULL);
    ak_spec_fx_reject (fx, "reference_cuda.launch", NULL, "reference_cuda.launch: missing", NULL);
    ak_spec_fx_reject (fx, "reference_cuda.source", NULL, "reference_cuda.source: missing", NULL);
    ak_spec_fx_reject (fx, "reference_cuda.extra", json_true (), "reference_cuda.extra", NULL);
    ak_spec_fx_reject (fx, "reference_cuda", json_string ("cuda/base.cu"), "reference_cuda: must be an object", NULL);
}

static void test_reject_unknown_stability_size (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "stability_size", json_string ("medium"), "stability_size: 'medium' is not", NULL);
    ak_spec_fx_reject (fx, "stability_size", json_string ("odd"), "stability_size: 'odd' is not", NULL);
}

static void test_near_max_scale (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    /* absent: the defaults */
    assert_int_equal (ak_spec_fx_load (fx, &spec, &err), 0);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_FLOAT32) == 1e18);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_BFLOAT16) == 1e30);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_FLOAT16) == 6e4);
    ak_spec_destroy (&spec);
    /* given: used, and kept by ak_spec_to_json */
    ak_test_json_set (fx->json, "near_max_scale", json_pack ("{s:f}", "float32", 1e6));
    assert_int_equal (ak_spec_fx_load (fx, &spec, &err), 0);
    assert_true (ak_spec_near_max_scale (spec, AK_DT_FLOAT32) == 1e6);
    json_t *j = ak_spec_to_json (spec, false);
    assert_true (json_real_value (json_object_get (json_object_get (j, "near_max_scale"), "float32")) == 1e6);
    json_decref (j);
    ak_spec_destroy (&spec);
    ak_spec_fx_reject (fx, "near_max_scale", json_pack ("{s:f}", "float32", 0.5),
                       "near_max_scale.float32: must be a finite number >= 1", NULL);
    ak_spec_fx_reject (fx, "near_max_scale", json_pack ("{s:s}", "float32", "big"),
                       "near_max_scale.float32: must be a finite number >= 1", NULL);
    ak_spec_fx_reject (fx, "near_max_scale", json_pack ("{s:f}", "bfloat16", 10.0),
                       "near_max_scale.bfloat16: dtype not declared", NULL);
    ak_spec_fx_reject (fx, "near_max_scale", json_pack ("{s:f}", "float64", 10.0),
                       "near_max_scale.float64: unknown dtype", NULL);
    ak_spec_fx_reject (fx, "near_max_scale", json_string ("x"), "near_max_scale", NULL);
    ak_test_json_set (fx->json, "near_max_scale", NULL);
}

static void test_reject_unknown_dtype (void **state)
{
    ak_spec_fx_reject (*state, "dtypes[0]", json_string ("float64"), "dtypes[0]: unknown dtype", NULL);
}

static void test_reject_duplicate_dtype (void **state)
{
    ak_spec_fx_reject (*state, "dtypes", json_pack ("[s, s]", "float32", "float32"),
                       "dtypes[1]: duplicate dtype", NULL);
}

static void test_reject_tolerance_not_finite (void **state)
{
    ak_spec_fx_t *fx = *state;
    /* JSON cannot say inf: an overflowing number is how a file gets one. */
    ak_test_json_set (fx->json, "tolerances.float32.atol", json_real (12345.0));
    ak_spec_fx_expect (fx, "12345.0", "1e999", AK_EINVAL, "spec.json: tolerances.float32.atol: "
                       "must be finite", NULL);
    ak_test_json_set (fx->json, "tolerances.float32.atol", json_real (1e-5));
    ak_test_json_set (fx->json, "tolerances.float32.rtol", json_real (12345.0));
    ak_spec_fx_expect (fx, "12345.0", "-1e400", AK_EINVAL, "tolerances.float32.rtol: must be finite", NULL);
}

static void test_reject_tolerance_negative (void **state)
{
    ak_spec_fx_reject (*state, "tolerances.float32.atol", json_real (-1e-5),
                       "tolerances.float32.atol: must be >= 0", NULL);
}

static void test_reject_tolerance_not_number (void **state)
{
    ak_spec_fx_reject (*state, "tolerances.float32.rtol", json_string ("1e-5"),
                       "tolerances.float32.rtol: must be a number", NULL);
}

static void test_reject_tolerance_missing_for_dtype (void **state)
{
    ak_spec_fx_reject (*state, "dtypes", json_pack ("[s, s]", "float32", "float16"),
                       "tolerances.float16: missing", NULL);
}

static void test_reject_tolerance_missing_atol (void **state)
{
    ak_spec_fx_reject (*state, "tolerances.float32.atol", NULL, "tolerances.float32.atol: missing", NULL);
}

static void test_reject_tolerance_undeclared_dtype (void **state)
{
    ak_spec_fx_reject (*state, "tolerances.bfloat16", json_pack ("{s:f, s:f}", "atol", 1e-2, "rtol", 1e-2),
                       "tolerances.bfloat16: dtype not declared", NULL);
}

static void test_reject_bad_expression (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "flops", json_string ("5*rows*"), "spec.json: flops: invalid expression", NULL);
    ak_spec_fx_reject (fx, "flops", json_string ("5*rows)"), "flops: invalid expression", NULL);
    ak_spec_fx_reject (fx, "outputs[0].count", json_string (""), "outputs[0].count: invalid expression",
                       NULL);
}

static void test_reject_unknown_name_in_expression (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "bytes", json_string ("2*rows*depth*b"), "bytes: invalid expression", "depth");
    /* b is only known to the bytes expression */
    ak_spec_fx_reject (fx, "flops", json_string ("5*rows*cols*b"), "flops: invalid expression", NULL);
    ak_spec_fx_reject (fx, "inputs[0].count", json_string ("rows*cols*b"),
                       "inputs[0].count: invalid expression", NULL);
}

static void test_reject_count_overflow (void **state)
{
    ak_spec_fx_reject (*state, "inputs[0].count", json_string ("rows*cols*4611686018427387904"),
                       "sizes[0]: inputs[0].count", NULL);
    /* a size whose buffer a worker would refuse to allocate (more than
       AK_SPEC_MAX_ELEMS = 2^28 elements): named when the spec is read */
    ak_spec_fx_reject (*state, "sizes[2].size.cols", json_integer (1 << 30),
                       "sizes[2]: inputs[0].count 'rows*cols' is", "must be 1 to 268435456 elements");
}

static void test_reject_bad_range (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "inputs[0].range", json_pack ("[i, i]", 4, -4), "inputs[0].range: lo must be",
                       NULL);
    ak_spec_fx_reject (fx, "inputs[0].range", json_pack ("[i]", 4), "inputs[0].range: must be [lo, hi]",
                       NULL);
    ak_spec_fx_reject (fx, "inputs[0].range", NULL, "inputs[0].range: missing", NULL);
}

static void test_reject_duplicate_buffer (void **state)
{
    ak_spec_fx_reject (*state, "outputs[0].name", json_string ("x"), "outputs[0].name: duplicate buffer",
                       NULL);
}

static void test_reject_no_outputs (void **state)
{
    ak_spec_fx_reject (*state, "outputs", json_array (), "outputs: must list 1 to 8", NULL);
}

static void test_reject_inplace_without_input (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_test_json_set (fx->json, "outputs", json_pack ("[{s:s, s:s}, {s:s, s:s}]", "name", "y", "count",
           "rows*cols", "name", "z", "count", "rows"));
    ak_spec_fx_reject (fx, "inplace", json_true (), "inplace: an in-place spec needs", NULL);
}

static void test_reject_path_escaping_spec_dir (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "reference", json_string ("../ref.c"),
                       "spec.json: reference: must stay inside the spec's directory", NULL);
    ak_spec_fx_reject (fx, "baselines[0].source", json_string ("host/../../etc/passwd"),
                       "baselines[0].source: must stay inside", NULL);
    ak_spec_fx_reject (fx, "candidates[0].source", json_string ("/etc/passwd"),
                       "candidates[0].source: must be a path relative", NULL);
}

static void test_reject_missing_source_file (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_test_json_set (fx->json, "candidates[0].source", json_string ("host/missing.c"));
    ak_spec_fx_expect (fx, NULL, NULL, AK_ENOTFOUND, "candidates[0].source: cannot read source",
                       "host/missing.c");
}

static void test_reject_empty_source_file (void **state)
{
    ak_spec_fx_t *fx = *state;
    free (ak_test_write (fx->dir, "host/empty.c", ""));
    ak_spec_fx_reject (fx, "candidates[0].source", json_string ("host/empty.c"),
                       "candidates[0].source: source is empty", NULL);
}

static void test_reject_source_too_big (void **state)
{
    ak_spec_fx_t *fx = *state;
    size_t n = AK_MAX_SOURCE_BYTES + 1;
    char *big = malloc (n + 1);
    memset (big, ' ', n);
    big[n] = '\0';
    free (ak_test_write (fx->dir, "host/big.c", big));
    free (big);
    ak_test_json_set (fx->json, "candidates[0].source", json_string ("host/big.c"));
    ak_spec_fx_expect (fx, NULL, NULL, AK_ETOOBIG, "candidates[0].source: cannot read source", NULL);
}

static void test_reject_unknown_backend (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "candidates[0].backend", json_string ("opencl"),
                       "candidates[0].backend: unknown backend", NULL);
    ak_spec_fx_reject (fx, "baselines[0].backend", json_string ("tpu"),
                       "baselines[0].backend: unknown backend", NULL);
}

static void test_reject_no_baseline (void **state)
{
    ak_spec_fx_reject (*state, "baselines", json_array (), "baselines: must list 1 to 8", NULL);
}

static void test_reject_duplicate_candidate (void **state)
{
    ak_spec_fx_t *fx = *state;
    json_t *copy = json_deep_copy (json_array_get (json_object_get (fx->json, "candidates"), 0));
    json_array_append_new (json_object_get (fx->json, "candidates"), copy);
    ak_spec_fx_expect (fx, NULL, NULL, AK_EINVAL, "candidates[1].name: duplicate candidate name", NULL);
}

static void test_reject_bad_param_name (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "candidates[0].params.block", json_pack ("[i, i]", 1, 2),
                       "candidates[0].params.block: parameter names must match", NULL);
    ak_spec_fx_reject (fx, "candidates[0].params.2X", json_pack ("[i]", 1),
                       "candidates[0].params.2X: parameter names must match", NULL);
}

static void test_reject_empty_param_values (void **state)
{
    ak_spec_fx_reject (*state, "candidates[0].params.UNROLL", json_array (),
                       "candidates[0].params.UNROLL: must be a non-empty array of integers", NULL);
}

static void test_reject_non_integer_param_values (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "candidates[0].params.UNROLL", json_pack ("[i, f]", 1, 2.5),
                       "candidates[0].params.UNROLL[1]: must be an integer", NULL);
    ak_spec_fx_reject (fx, "candidates[0].params.UNROLL", json_pack ("[i, i]", 2, 2),
                       "candidates[0].params.UNROLL[1]: duplicate value 2", NULL);
    ak_spec_fx_reject (fx, "candidates[0].params.UNROLL", json_integer (2),
                       "candidates[0].params.UNROLL: must be a non-empty array", NULL);
}

static void test_reject_space_too_big (void **state)
{
    ak_spec_fx_t *fx = *state;
    json_t *params = json_object ();
    const char *names[] = { "A", "B", "C" };
    for (int p = 0; p < 3; p++) {
        json_t *vals = json_array ();
        for (int v = 0; v < 1000; v++)
            json_array_append_new (vals, json_integer (v));
        json_object_set_new (params, names[p], vals);
    }
    ak_test_json_set (fx->json, "candidates[0].constraints", NULL);
    ak_spec_fx_reject (fx, "candidates[0].params", params, "candidates[0].params: the parameter space has "
                       "more than", NULL);
}

static void test_reject_space_too_slow_to_check (void **state)
{
    ak_spec_fx_t *fx = *state;
    json_t *params = json_object ();
    const char *names[] = { "A", "B", "C", "D" };
    for (int p = 0; p < 4; p++) {
        json_t *vals = json_array ();
        for (int v = 1; v <= 16; v++)
            json_array_append_new (vals, json_integer (v));
        json_object_set_new (params, names[p], vals);
    }
    ak_test_json_set (fx->json, "candidates[0].params", params);
    ak_spec_fx_reject (fx, "candidates[0].constraints",
                       json_pack ("[s]", "A*B*C*D + (A+B)*(C+D) + A*A*A + B*B*B + C*C*C + D*D*D <= 1000000"),
                       "candidates[0].constraints: too much to check: 65536 configurations", NULL);
    /* the same space with a short constraint is fine */
    ak_test_json_set (fx->json, "candidates[0].constraints", json_pack ("[s]", "A <= B"));
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    size_t count = 0;
    assert_int_equal (ak_space_walk (&spec->candidates[0], NULL, NULL, &count, &err), 0);
    assert_int_equal (count, 136 * 256);
    ak_spec_destroy (&spec);
}

static void test_reject_bad_constraint (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "candidates[0].constraints", json_pack ("[s, s]", "BLOCK <= 8", "BLOCK*WIDTH <= 4"),
                       "candidates[0].constraints[1]: invalid expression", "WIDTH");
    ak_spec_fx_reject (fx, "candidates[0].constraints", json_pack ("[s]", "BLOCK <="),
                       "candidates[0].constraints[0]: invalid expression", NULL);
    /* constraints are over the parameters, not the shape */
    ak_spec_fx_reject (fx, "candidates[0].constraints", json_pack ("[s]", "cols % BLOCK == 0"),
                       "candidates[0].constraints[0]: invalid expression", "cols");
    ak_spec_fx_reject (fx, "candidates[0].constraints", json_pack ("[i]", 1),
                       "candidates[0].constraints[0]: must be a string", NULL);
}

static void test_reject_constraint_failing_to_evaluate (void **state)
{
    ak_spec_fx_reject (*state, "candidates[0].constraints", json_pack ("[s]", "BLOCK % (UNROLL - 1) == 0"),
                       "candidates[0].constraints[0]:", "BLOCK=1, UNROLL=1");
}

static void test_reject_unsatisfiable_constraints (void **state)
{
    ak_spec_fx_reject (*state, "candidates[0].constraints", json_pack ("[s]", "BLOCK > 100"),
                       "candidates[0].constraints: no configuration", NULL);
}

/* "seeds": whole configurations of the space, kept in params' order and
   by ak_spec_to_json; each way one can be wrong is refused by name. */
static void test_seeds (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_t *spec = NULL;
    ak_err_t err;
    ak_test_json_set (fx->json, "candidates[0].seeds",
                      json_pack ("[{s:i, s:i}, {s:i, s:i}]", "UNROLL", 4, "BLOCK", 2, "BLOCK", 8, "UNROLL", 1));
    if (ak_spec_fx_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const ak_candidate_t *c = &spec->candidates[0];
    assert_int_equal (c->nseeds, 2);
    assert_int_equal (c->seeds[0], 2);          /* BLOCK, UNROLL: params' order, not the object's */
    assert_int_equal (c->seeds[1], 4);
    assert_int_equal (c->seeds[2], 8);
    assert_int_equal (c->seeds[3], 1);
    json_t *j = ak_spec_to_json (spec, false);
    json_t *js = json_object_get (json_array_get (json_object_get (j, "candidates"), 0), "seeds");
    assert_int_equal (json_array_size (js), 2);
    assert_int_equal (json_integer_value (json_object_get (json_array_get (js, 1), "BLOCK")), 8);
    json_decref (j);
    ak_spec_destroy (&spec);
    ak_test_json_set (fx->json, "candidates[0].seeds", NULL);

    const char *sp = "candidates[0].seeds";
    ak_spec_fx_reject (fx, sp, json_pack ("[]"), "candidates[0].seeds: must hold 1 to 16", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("{s:i}", "BLOCK", 1), "candidates[0].seeds: must be an array", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("[i]", 1), "candidates[0].seeds[0]: must be an object", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("[{s:i}]", "BLOCK", 2), "candidates[0].seeds[0].UNROLL: missing", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("[{s:i, s:i, s:i}]", "BLOCK", 2, "UNROLL", 1, "WIDTH", 3),
                       "candidates[0].seeds[0].WIDTH: not a parameter", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("[{s:i, s:i}]", "BLOCK", 3, "UNROLL", 1),
                       "candidates[0].seeds[0].BLOCK: 3 is not one of its values", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("[{s:s, s:i}]", "BLOCK", "2", "UNROLL", 1),
                       "candidates[0].seeds[0].BLOCK: must be an integer", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("[{s:i, s:i}]", "BLOCK", 8, "UNROLL", 4),
                       "candidates[0].seeds[0]: outside the space: constraints[0] (BLOCK*UNROLL <= 16)", NULL);
    ak_spec_fx_reject (fx, sp, json_pack ("[{s:i, s:i}, {s:i, s:i}]", "BLOCK", 2, "UNROLL", 1, "UNROLL", 1, "BLOCK", 2),
                       "candidates[0].seeds[1]: the same configuration as seeds[0]", NULL);
}

static void test_reject_wrong_types (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "sizes", json_object (), "spec.json: sizes: must be an array", NULL);
    ak_spec_fx_reject (fx, "inplace", json_integer (1), "inplace: must be true or false", NULL);
    ak_spec_fx_reject (fx, "name", json_integer (1), "name: must be a string", NULL);
}

static void test_reject_not_an_object (void **state)
{
    ak_spec_fx_t *fx = *state;
    char *path = ak_test_write (fx->dir, "spec.json", "[1, 2, 3]");
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_spec_load (path, &spec, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "must be a JSON object"));
    free (path);
}

int main (void)
{
#define T(fn) cmocka_unit_test_setup_teardown (fn, ak_spec_fx_setup, ak_spec_fx_teardown)
    const struct CMUnitTest tests[] = {
        T (test_base_loads),
        cmocka_unit_test (test_dtypes_and_helpers),
        T (test_space_walk),
        T (test_space_neighbors),
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
        T (test_seeds),
        T (test_reject_wrong_types),
        T (test_reject_not_an_object),
    };
#undef T
    return cmocka_run_group_tests (tests, NULL, NULL);
}
