/*  tests/unit/test_manifest.c: batch manifests and bundles (common/spec.c).

    A known-good manifest over a host-only, float32-only copy of the
    built-in softmax spec (sources inline, so the catalog can grow without
    moving these tests) is written to a temporary directory with one change
    per test; a rejected manifest must name the field by its JSON path.
    Bundles must round-trip exactly and must never name a file. */
#include "manifest.h"
#include "support.h"
#include "spec.h"
#include "util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================== fixtures */

typedef struct {
    char   *dir;
    char   *softmax;        /* the softmax copy: DIR/softmax.json */
    json_t *json;           /* the manifest under test */
} fixture_t;

/*  The built-in softmax spec with its sources inline, reduced to the host
    backend and float32, written as dir/softmax.json; returns the path. */
static char *s_softmax_copy (const char *dir)
{
    char *builtin = ak_test_src ("kernels/softmax/spec.json");
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_load (builtin, &spec, &err) != 0)
        fail_msg ("%s", err.msg);
    json_t *j = ak_spec_to_json (spec, true);
    json_object_set_new (j, "dtypes", json_pack ("[s]", "float32"));
    json_t *tols = json_object_get (j, "tolerances");
    json_object_set_new (j, "tolerances", json_pack ("{s:O}", "float32",
                                                     json_object_get (tols, "float32")));
    for (int k = 0; k < 2; k++) {
        json_t *list = json_object_get (j, k ? "candidates" : "baselines");
        for (size_t i = json_array_size (list); i-- > 0; )
            if (strcmp (json_string_value (json_object_get (json_array_get (list, i), "backend")),
                        "host") != 0)
                json_array_remove (list, i);
    }
    char *text = json_dumps (j, JSON_INDENT (1) | JSON_PRESERVE_ORDER);
    char *path = ak_test_write (dir, "softmax.json", text);
    assert_non_null (path);
    free (text);
    json_decref (j);
    ak_spec_destroy (&spec);
    free (builtin);
    return path;
}

static int s_setup (void **state)
{
    fixture_t *fx = calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("manifest");
    assert_non_null (fx->dir);
    fx->softmax = s_softmax_copy (fx->dir);
    fx->json = json_pack ("{s:i, s:s, s:[s], s:{s:i, s:f}, s:[{s:s, s:[s, {s:s, s:{s:i, s:i}, "
                          "s:s, s:i}]}]}",
                          "schema_version", 1, "name", "nightly", "targets", "host",
                          "policy", "warmup", 2, "threshold", 0.05,
                          "ops", "spec", fx->softmax, "workloads", "small",
                          "name", "wide", "size", "rows", 64, "cols", 4096,
                          "dtype", "float32", "weight", 2);
    assert_non_null (fx->json);
    *state = fx;
    return 0;
}

static int s_teardown (void **state)
{
    fixture_t *fx = *state;
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    free (fx->softmax);
    json_decref (fx->json);
    free (fx);
    return 0;
}


/*  Writes the manifest as batch.json (from replaced by to in the text when
    given) and loads it. */
static int s_load_text (fixture_t *fx, const char *from, const char *to, ak_manifest_t **m,
                        ak_err_t *err)
{
    char *path = ak_test_write_json (fx->dir, "batch.json", fx->json, from, to);
    memset (err, 0, sizeof *err);
    *m = NULL;
    int rc = ak_manifest_load (path, m, err);
    free (path);
    return rc;
}

static ak_manifest_t *s_load_ok (fixture_t *fx)
{
    ak_manifest_t *m = NULL;
    ak_err_t err;
    if (s_load_text (fx, NULL, NULL, &m, &err))
        fail_msg ("%s", err.msg);
    return m;
}

static void s_expect (fixture_t *fx, const char *from, const char *to, int code,
                      const char *needle1, const char *needle2)
{
    ak_manifest_t *m = NULL;
    ak_err_t err;
    int rc = s_load_text (fx, from, to, &m, &err);
    ak_test_expect_refused (rc, code, m, err.msg, "batch.json", needle1, needle2);
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

static void s_policy_equal (const ak_policy_t *a, const ak_policy_t *b)
{
    assert_int_equal (a->max_attempts, b->max_attempts);
    assert_int_equal (a->compile_timeout_ms, b->compile_timeout_ms);
    assert_int_equal (a->run_timeout_ms, b->run_timeout_ms);
    assert_int_equal (a->lease_ms, b->lease_ms);
    assert_int_equal (a->warmup, b->warmup);
    assert_int_equal (a->min_samples, b->min_samples);
    assert_int_equal (a->max_samples, b->max_samples);
    assert_true (a->rsd_target == b->rsd_target);
    assert_int_equal (a->max_time_ms, b->max_time_ms);
    assert_true (a->threshold == b->threshold);
    assert_true (a->max_regression == b->max_regression);
    assert_int_equal (a->seed, b->seed);
}

static char *s_planted (const char *name)
{
    char *rel = ak_sprintf ("kernels/testing/%s.c", name);
    char *path = ak_test_src (rel);
    free (rel);
    return path;
}

static json_t *s_extra (const char *name, const char *file)
{
    char *path = s_planted (file);
    json_t *cand = json_pack ("{s:s, s:s, s:s}", "name", name, "backend", "host", "source", path);
    free (path);
    return cand;
}

static ak_manifest_t *s_builtin (const char *rel)
{
    char *path = ak_test_src (rel);
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_load (path, &m, &err))
        fail_msg ("%s", err.msg);
    free (path);
    return m;
}

/* ========================================================== good input */

/*  Every shipped batch in kernels/batches loads (nightly.json, hopper.json
    ...: what docs/benchmarks.md's commands submit). */
static void test_shipped_batches_load (void **state)
{
    (void) state;
    char *dir = ak_test_src ("kernels/batches");
    DIR *d = opendir (dir);
    assert_non_null (d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        size_t len = strlen (e->d_name);
        if (len < 6 || strcmp (e->d_name + len - 5, ".json") != 0)
            continue;
        char *rel = ak_sprintf ("kernels/batches/%s", e->d_name);
        ak_manifest_t *m = s_builtin (rel);
        assert_true (m->nops > 0);
        ak_manifest_destroy (&m);
        free (rel);
        n++;
    }
    closedir (d);
    free (dir);
    assert_true (n >= 5);
}

static void test_demo_batch_loads (void **state)
{
    (void) state;
    ak_manifest_t *m = s_builtin ("kernels/batches/demo.json");
    assert_string_equal (m->name, "demo");
    assert_int_equal (m->ntargets, 1);
    assert_string_equal (m->targets[0], "host");
    assert_int_equal (m->policy.warmup, 2);
    assert_int_equal (m->policy.min_samples, 5);
    assert_int_equal (m->policy.max_samples, 30);
    assert_int_equal (m->policy.max_time_ms, 300);
    assert_true (m->policy.rsd_target == 0.02);
    assert_int_equal (m->policy.seed, 42);
    assert_int_equal (m->nops, 3);

    const char *names[] = { "softmax", "rmsnorm", "matmul" };
    const char *cands[] = { "vectorized", "vectorized", "tiled" };
    for (size_t i = 0; i < 3; i++) {
        const ak_manifest_op_t *op = &m->ops[i];
        assert_string_equal (op->spec->name, names[i]);
        assert_true (op->nworkloads >= 2 && op->nworkloads <= 3);
        assert_int_equal (op->ncandidates, 1);
        assert_string_equal (op->candidates[0], cands[i]);
        assert_non_null (ak_spec_baseline (op->spec, "host"));
        for (size_t w = 0; w < op->nworkloads; w++) {
            assert_int_equal (op->workloads[w].dtype, AK_DT_FLOAT32);
            assert_true (op->workloads[w].weight > 0);
        }
    }
    const ak_manifest_op_t *rms = &m->ops[1];
    assert_string_equal (rms->workloads[0].name, "medium");
    assert_string_equal (rms->workloads[2].name, "wide");
    assert_int_equal (rms->workloads[2].dims[0], 64);
    assert_int_equal (rms->workloads[2].dims[1], 4096);
    assert_true (rms->workloads[2].weight == 2);
    assert_true (rms->workloads[0].weight == 1);
    ak_manifest_destroy (&m);
    assert_null (m);
    ak_manifest_destroy (&m);
}

static void test_planted_batch_loads (void **state)
{
    (void) state;
    ak_manifest_t *m = s_builtin ("kernels/batches/planted.json");
    assert_int_equal (m->nops, 1);
    const ak_manifest_op_t *op = &m->ops[0];
    const char *want[] = { "vectorized", "wrong", "nan", "unwritten", "crash", "hang",
                           "nondeterministic" };
    assert_int_equal (op->ncandidates, 7);
    for (size_t i = 0; i < 7; i++) {
        assert_string_equal (op->candidates[i], want[i]);
        const ak_candidate_t *cand = ak_spec_candidate (op->spec, want[i]);
        assert_non_null (cand);
        assert_non_null (cand->source.text);
    }
    assert_int_equal (m->policy.run_timeout_ms, 5000);
    ak_manifest_destroy (&m);
}

static void test_fixture_loads (void **state)
{
    fixture_t *fx = *state;
    ak_manifest_t *m = s_load_ok (fx);
    assert_string_equal (m->name, "nightly");
    assert_int_equal (m->policy.warmup, 2);
    assert_true (m->policy.threshold == 0.05);
    assert_int_equal (m->policy.max_samples, 200);       /* default */
    const ak_manifest_op_t *op = &m->ops[0];
    assert_int_equal (op->nworkloads, 2);
    assert_string_equal (op->workloads[0].name, "small");
    assert_int_equal (op->workloads[0].dims[0], 32);
    assert_string_equal (op->workloads[1].name, "wide");
    assert_true (op->workloads[1].weight == 2);
    assert_int_equal (op->ncandidates, 1);
    assert_string_equal (op->candidates[0], "vectorized");
    ak_manifest_destroy (&m);
}

/*  A size meant for cuda only ("backends": ["cuda"]) cannot be a workload
    of a host target. */
static void test_backend_only_size (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].workloads", json_pack ("[s]", "gpu_8m"),
              "ops[0].workloads[0]: size 'gpu_8m' is not for backend host", NULL);
}

static void test_defaults (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "policy", NULL);
    ak_test_json_set (fx->json, "ops[0].workloads", NULL);
    ak_manifest_t *m = s_load_ok (fx);
    ak_policy_t def;
    ak_policy_defaults (&def);
    s_policy_equal (&m->policy, &def);
    const ak_manifest_op_t *op = &m->ops[0];
    /* every size without "backends" (the catalog's GPU-only size is left
       out: named workloads only), edge sizes not */
    size_t plain = 0;
    for (size_t i = 0; i < op->spec->nsizes; i++)
        plain += op->spec->sizes[i].backends == 0;
    assert_true (plain < op->spec->nsizes);
    assert_int_equal (op->nworkloads, plain);
    for (size_t i = 0; i < op->nworkloads; i++) {
        assert_string_equal (op->workloads[i].name, op->spec->sizes[i].name);
        assert_int_equal (op->workloads[i].dtype, op->spec->dtypes[0]);
        assert_true (op->workloads[i].weight == 1);
    }
    ak_manifest_destroy (&m);
}

static void test_workload_forms (void **state)
{
    fixture_t *fx = *state;
    json_t *wls = json_pack ("[s, {s:s, s:f}, {s:{s:i, s:i}}, {s:s, s:{s:i, s:i}}]",
                             "odd",                                  /* an edge size by name */
                             "name", "large", "weight", 0.5,         /* named, weighted */
                             "size", "rows", 3, "cols", 5,           /* anonymous */
                             "name", "small", "size", "rows", 32, "cols", 128);  /* same as spec */
    ak_test_json_set (fx->json, "ops[0].workloads", wls);
    ak_manifest_t *m = s_load_ok (fx);
    const ak_manifest_op_t *op = &m->ops[0];
    assert_int_equal (op->nworkloads, 4);
    assert_string_equal (op->workloads[0].name, "odd");
    assert_int_equal (op->workloads[0].dims[1], 1023);
    assert_true (op->workloads[1].weight == 0.5);
    assert_string_equal (op->workloads[2].name, "custom-2");
    assert_int_equal (op->workloads[2].dims[0], 3);
    assert_int_equal (op->workloads[2].dims[1], 5);
    assert_string_equal (op->workloads[3].name, "small");
    ak_manifest_destroy (&m);
}

static void test_extra_candidates (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "ops[0].extra_candidates",
           json_pack ("[o, o]", s_extra ("wrong", "wrong"), s_extra ("nan", "nan")));
    ak_manifest_t *m = s_load_ok (fx);
    const ak_manifest_op_t *op = &m->ops[0];
    assert_int_equal (op->spec->ncandidates, 3);
    assert_int_equal (op->ncandidates, 3);
    assert_string_equal (op->candidates[0], "vectorized");
    assert_string_equal (op->candidates[1], "wrong");
    assert_string_equal (op->candidates[2], "nan");
    assert_non_null (strstr (ak_spec_candidate (op->spec, "wrong")->source.text, "ak_kernel"));
    ak_manifest_destroy (&m);

    /* an explicit empty selection tunes only the extra candidates */
    ak_test_json_set (fx->json, "ops[0].candidates", json_array ());
    m = s_load_ok (fx);
    assert_int_equal (m->ops[0].ncandidates, 2);
    assert_string_equal (m->ops[0].candidates[0], "wrong");
    ak_manifest_destroy (&m);

    /* naming an extra candidate in the selection does not list it twice */
    ak_test_json_set (fx->json, "ops[0].candidates", json_pack ("[s, s]", "nan", "vectorized"));
    m = s_load_ok (fx);
    assert_int_equal (m->ops[0].ncandidates, 3);
    assert_string_equal (m->ops[0].candidates[0], "nan");
    assert_string_equal (m->ops[0].candidates[1], "vectorized");
    assert_string_equal (m->ops[0].candidates[2], "wrong");
    ak_manifest_destroy (&m);
}

static void test_extra_candidate_relative_path (void **state)
{
    fixture_t *fx = *state;
    /* relative to the manifest, and (unlike spec sources) free to use ".." */
    char *sub = ak_path_join (fx->dir, "batches");
    assert_int_equal (ak_mkdir_p (sub, 0755, NULL), 0);
    char *planted = ak_path_join (fx->dir, "planted.c");
    free (ak_test_write (fx->dir, "planted.c", "void ak_kernel (const ak_args_t *a) { }\n"));
    ak_test_json_set (fx->json, "ops[0].extra_candidates",
           json_pack ("[{s:s, s:s, s:s}]", "name", "mine", "backend", "host", "source",
                      "../planted.c"));
    char *text = json_dumps (fx->json, 0);
    char *path = ak_test_write (sub, "batch.json", text);
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_load (path, &m, &err))
        fail_msg ("%s", err.msg);
    assert_string_equal (ak_spec_candidate (m->ops[0].spec, "mine")->source.name, "planted.c");
    ak_manifest_destroy (&m);
    free (path);
    free (text);
    free (planted);
    free (sub);
}

static void test_tolerance_override (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "ops[0].tolerances",
           json_pack ("{s:{s:f, s:f}}", "float32", "atol", 2e-4, "rtol", 3e-4));
    ak_manifest_t *m = s_load_ok (fx);
    const ak_tol_t *tol = ak_spec_tol (m->ops[0].spec, AK_DT_FLOAT32);
    assert_true (tol->atol == 2e-4);
    assert_true (tol->rtol == 3e-4);
    ak_manifest_destroy (&m);
}

/*  "profile": true on an op survives the bundle (written only when set,
    so bundles without it are unchanged); anything but a boolean is
    refused naming the field. */
static void test_profile_flag (void **state)
{
    fixture_t *fx = *state;
    ak_manifest_t *m = s_load_ok (fx);
    assert_false (m->ops[0].profile);
    char *plain = ak_manifest_to_bundle (m);
    assert_null (strstr (plain, "\"profile\""));
    free (plain);
    ak_manifest_destroy (&m);

    ak_test_json_set (fx->json, "ops[0].profile", json_true ());
    m = s_load_ok (fx);
    assert_true (m->ops[0].profile);
    char *bundle = ak_manifest_to_bundle (m);
    assert_non_null (strstr (bundle, "\"profile\":true"));
    ak_manifest_t *again = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_parse_bundle (bundle, strlen (bundle), "bundle", &again, &err))
        fail_msg ("%s", err.msg);
    assert_true (again->ops[0].profile);
    char *bundle2 = ak_manifest_to_bundle (again);
    assert_string_equal (bundle, bundle2);
    free (bundle);
    free (bundle2);
    ak_manifest_destroy (&again);
    ak_manifest_destroy (&m);

    s_reject (fx, "ops[0].profile", json_integer (1), "ops[0].profile", "must be true or false");
    ak_test_json_set (fx->json, "ops[0].profile", json_false ());
    m = s_load_ok (fx);
    assert_false (m->ops[0].profile);
    ak_manifest_destroy (&m);
    ak_test_json_set (fx->json, "ops[0].profile", NULL);
}

/* =============================================================== bundles */

static void s_round_trip (ak_manifest_t *m)
{
    char *bundle = ak_manifest_to_bundle (m);
    assert_non_null (bundle);
    ak_manifest_t *again = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_parse_bundle (bundle, strlen (bundle), "bundle", &again, &err))
        fail_msg ("%s", err.msg);
    char *bundle2 = ak_manifest_to_bundle (again);
    assert_string_equal (bundle, bundle2);

    assert_string_equal (again->name, m->name);
    s_policy_equal (&again->policy, &m->policy);
    assert_int_equal (again->nops, m->nops);
    for (size_t i = 0; i < m->nops; i++) {
        const ak_manifest_op_t *a = &m->ops[i], *b = &again->ops[i];
        assert_string_equal (a->spec->name, b->spec->name);
        assert_string_equal (a->spec->reference.digest, b->spec->reference.digest);
        assert_int_equal (a->spec->ncandidates, b->spec->ncandidates);
        for (size_t c = 0; c < a->spec->ncandidates; c++)
            assert_string_equal (a->spec->candidates[c].source.digest,
                                 b->spec->candidates[c].source.digest);
        assert_int_equal (a->ncandidates, b->ncandidates);
        for (size_t c = 0; c < a->ncandidates; c++)
            assert_string_equal (a->candidates[c], b->candidates[c]);
        assert_int_equal (a->nworkloads, b->nworkloads);
        for (size_t w = 0; w < a->nworkloads; w++) {
            assert_string_equal (a->workloads[w].name, b->workloads[w].name);
            assert_memory_equal (a->workloads[w].dims, b->workloads[w].dims,
                                 sizeof a->workloads[w].dims);
            assert_int_equal (a->workloads[w].dtype, b->workloads[w].dtype);
            assert_true (a->workloads[w].weight == b->workloads[w].weight);
        }
        assert_memory_equal (a->spec->tol, b->spec->tol, sizeof a->spec->tol);
    }
    /* a bundle is a manifest too: loading it from a file gives the same */
    char *dir = ak_test_tmpdir ("bundle");
    char *path = ak_test_write (dir, "bundle.json", bundle);
    ak_manifest_t *loaded = NULL;
    if (ak_manifest_load (path, &loaded, &err))
        fail_msg ("%s", err.msg);
    char *bundle3 = ak_manifest_to_bundle (loaded);
    assert_string_equal (bundle, bundle3);
    ak_manifest_destroy (&loaded);
    ak_test_rmtree (dir);
    free (dir);
    free (path);
    free (bundle3);
    free (bundle);
    free (bundle2);
    ak_manifest_destroy (&again);
}

static void test_bundle_round_trip_demo (void **state)
{
    (void) state;
    ak_manifest_t *m = s_builtin ("kernels/batches/demo.json");
    s_round_trip (m);
    ak_manifest_destroy (&m);
}

/*  The CUDA example batch: launch rules (with "shared" written out even
    where the spec left it) survive the bundle exactly, and a GPU target
    selects the cuda candidates only. */
static void test_bundle_round_trip_cuda (void **state)
{
    (void) state;
    ak_manifest_t *m = s_builtin ("kernels/batches/cuda.json");
    s_round_trip (m);
    const ak_manifest_op_t *op = &m->ops[0];
    assert_int_equal (op->ncandidates, 4);   /* block_row, warp_row, row_cached, row_cluster: cuda only */
    assert_string_equal (op->candidates[0], "block_row");
    const ak_candidate_t *cand = ak_spec_candidate (op->spec, "block_row");
    assert_non_null (cand->launch);
    assert_string_equal (cand->launch->grid[0], "rows");
    assert_string_equal (cand->launch->shared, "0");
    assert_null (ak_spec_candidate (op->spec, "vectorized")->launch);
    assert_non_null (ak_spec_baseline (op->spec, "cuda")->launch);
    char *bundle = ak_manifest_to_bundle (m);
    assert_non_null (strstr (bundle, "\"launch\":{\"grid\":[\"rows\"],\"block\":[\"THREADS\"],"
                                     "\"shared\":\"0\"}"));
    free (bundle);
    ak_manifest_destroy (&m);
}

static void test_bundle_round_trip_extras (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "ops[0].extra_candidates", json_pack ("[o]", s_extra ("wrong", "wrong")));
    ak_test_json_set (fx->json, "ops[0].candidates", json_array ());
    ak_test_json_set (fx->json, "ops[0].tolerances",
           json_pack ("{s:{s:f, s:f}}", "float32", "atol", 1e-4, "rtol", 0.1 + 0.2));
    ak_test_json_set (fx->json, "policy.rsd_target", json_real (1.0 / 3));
    ak_test_json_set (fx->json, "policy.seed", json_integer (INT64_MAX));
    ak_manifest_t *m = s_load_ok (fx);
    s_round_trip (m);

    /* the bundle carries the spec inline, extra candidates merged in */
    char *bundle = ak_manifest_to_bundle (m);
    json_t *root = json_loads (bundle, 0, NULL);
    json_t *spec = json_object_get (json_array_get (json_object_get (root, "ops"), 0), "spec");
    assert_true (json_is_object (spec));
    assert_int_equal (json_array_size (json_object_get (spec, "candidates")), 2);
    assert_null (strstr (bundle, "extra_candidates"));
    assert_null (strstr (bundle, fx->dir));                  /* no file paths at all */
    assert_null (strstr (bundle, "kernels/testing"));
    json_decref (root);
    free (bundle);
    ak_manifest_destroy (&m);
}

/*  Parses the demo's bundle with one change; must fail naming the needle. */
static void s_bundle_reject (const char *path, json_t *value, const char *needle)
{
    ak_manifest_t *m = s_builtin ("kernels/batches/demo.json");
    char *text = ak_manifest_to_bundle (m);
    ak_manifest_destroy (&m);
    json_t *root = json_loads (text, 0, NULL);
    free (text);
    ak_test_json_set (root, path, value);
    text = json_dumps (root, JSON_COMPACT);
    json_decref (root);
    ak_err_t err = { 0 };
    int rc = ak_manifest_parse_bundle (text, strlen (text), "bundle", &m, &err);
    free (text);
    if (rc != AK_EINVAL)
        fail_msg ("parsed with %d: %s", rc, err.msg);
    assert_null (m);
    if (!strstr (err.msg, needle))
        fail_msg ("message lacks '%s': %s", needle, err.msg);
}

static void test_bundle_rejects_file_paths (void **state)
{
    (void) state;
    s_bundle_reject ("ops[1].spec", json_string ("../rmsnorm/spec.json"),
                     "bundle: ops[1].spec: a bundle must carry the spec inline");
    s_bundle_reject ("ops[0].spec.reference", json_string ("ref.c"),
                     "bundle: ops[0].spec: reference: must be an inline source");
    s_bundle_reject ("ops[2].spec.candidates[0].source", json_string ("host/tiled.c"),
                     "bundle: ops[2].spec: candidates[0].source: must be an inline source");
    s_bundle_reject ("ops[0].extra_candidates",
                     json_pack ("[{s:s, s:s, s:s}]", "name", "x", "backend", "host",
                                "source", "/etc/passwd"),
                     "bundle: ops[0].extra_candidates[0].source: must be an inline source");
}

static void test_bundle_rejects_missing_text (void **state)
{
    (void) state;
    s_bundle_reject ("ops[0].spec.reference", json_pack ("{s:s, s:s}", "name", "ref.c", "digest",
                     "0000000000000000000000000000000000000000000000000000000000000000"),
                     "bundle: ops[0].spec: reference: source text missing");
}

static void test_bundle_rejects_bad_json (void **state)
{
    (void) state;
    const char *text = "{\"schema_version\": 1, \"name\": \"x\", \"ops\": [{\"spec\": {]}";
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_manifest_parse_bundle (text, strlen (text), "bundle", &m, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "bundle: ops[0].spec: invalid JSON"));
    assert_int_equal (ak_manifest_parse_bundle (text, 0, "bundle", &m, &err), AK_EINVAL);
    assert_null (m);
}

/* ============================================================ rejections */

static void test_reject_unknown_policy_field (void **state)
{
    s_reject (*state, "policy.warmups", json_integer (3), "batch.json: policy.warmups: unknown field",
              NULL);
}

static void test_reject_bad_threshold (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "policy.threshold", json_real (1.5), "policy.threshold: must be in [0, 1)", NULL);
    s_reject (fx, "policy.threshold", json_real (-0.01), "policy.threshold: must be in [0, 1)",
              NULL);
    s_reject (fx, "policy.threshold", json_string ("3%"), "policy.threshold: must be a number",
              NULL);
}

static void test_reject_rsd_target_out_of_range (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "policy.rsd_target", json_integer (0), "policy.rsd_target: must be in (0, 1)",
              NULL);
    s_reject (fx, "policy.rsd_target", json_real (1.0), "policy.rsd_target: must be in (0, 1)",
              NULL);
}

static void test_reject_bad_policy_integers (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "policy.warmup", json_integer (-1), "policy.warmup: must be an integer in [0,",
              NULL);
    s_reject (fx, "policy.max_attempts", json_integer (0), "policy.max_attempts: must be an "
              "integer in [1,", NULL);
    s_reject (fx, "policy.lease_ms", json_real (1.5), "policy.lease_ms: must be an integer", NULL);
    s_reject (fx, "policy.run_timeout_ms", json_integer ((json_int_t) 1 << 33),
              "policy.run_timeout_ms: must be an integer in", NULL);
    s_reject (fx, "policy.seed", json_integer (-5), "policy.seed: must be a non-negative", NULL);
    s_reject (fx, "policy.max_regression", json_real (1.0), "policy.max_regression: must be in",
              NULL);
}

static void test_reject_min_samples_above_max (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "policy.max_samples", json_integer (5));
    s_reject (fx, "policy.min_samples", json_integer (6), "policy.min_samples: must not exceed "
              "policy.max_samples", NULL);
    s_reject (fx, "policy.min_samples", json_integer (1), "policy.min_samples: must be an integer "
              "in [2,", NULL);
}

static void test_reject_unknown_workload_size (void **state)
{
    s_reject (*state, "ops[0].workloads[0]", json_string ("huge"),
              "batch.json: ops[0].workloads[0]: unknown size 'huge'", "tiny, small");
}

static void test_reject_unknown_workload_size_object (void **state)
{
    s_reject (*state, "ops[0].workloads[0]", json_pack ("{s:s, s:s}", "name", "huge", "dtype",
              "float32"), "ops[0].workloads[0].name: unknown size 'huge'", NULL);
}

static void test_reject_workload_shape_clash (void **state)
{
    s_reject (*state, "ops[0].workloads[1].name", json_string ("small"),
              "ops[0].workloads[1].name: 'small' is a size of softmax with a different shape",
              NULL);
}

static void test_reject_duplicate_workload (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].workloads", json_pack ("[s, s]", "small", "small"),
              "ops[0].workloads[1]: duplicate workload 'small'", NULL);
    s_reject (fx, "ops[0].workloads", json_pack ("[s, {s:{s:i, s:i}}]", "small", "size",
              "rows", 32, "cols", 128), "ops[0].workloads[1]: same shape and dtype", NULL);
}

static void test_reject_workload_bad_size (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].workloads[1].size.cols", json_integer (0),
              "ops[0].workloads[1].size.cols: must be a positive integer", NULL);
    s_reject (fx, "ops[0].workloads[1].size.depth", json_integer (2),
              "ops[0].workloads[1].size.depth: unknown field", NULL);
    s_reject (fx, "ops[0].workloads[1].size.rows", NULL,
              "ops[0].workloads[1].size.rows: missing", NULL);
}

static void test_reject_workload_undeclared_dtype (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].workloads[1].dtype", json_string ("float16"),
              "ops[0].workloads[1].dtype: dtype not declared", NULL);
    s_reject (fx, "ops[0].workloads[1].dtype", json_string ("int8"),
              "ops[0].workloads[1].dtype: unknown dtype", NULL);
}

static void test_reject_zero_weight (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].workloads[1].weight", json_integer (0),
              "ops[0].workloads[1].weight: must be a finite number > 0", NULL);
    s_reject (fx, "ops[0].workloads[1].weight", json_real (-2),
              "ops[0].workloads[1].weight: must be a finite number > 0", NULL);
}

static void test_reject_empty_workloads (void **state)
{
    s_reject (*state, "ops[0].workloads", json_array (), "ops[0].workloads: must list 1 to", NULL);
}

static void test_reject_unknown_candidate (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].candidates", json_pack ("[s]", "blocked"),
              "batch.json: ops[0].candidates[0]: unknown candidate 'blocked' of softmax", NULL);
    s_reject (fx, "ops[0].candidates", json_pack ("[s, s]", "vectorized", "vectorized"),
              "ops[0].candidates", NULL);
}

static void test_reject_extra_candidate_name_clash (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].extra_candidates", json_pack ("[o]", s_extra ("vectorized", "wrong")),
              "ops[0].extra_candidates[0].name: 'vectorized' is already a candidate of softmax",
              NULL);
    s_reject (fx, "ops[0].extra_candidates", json_pack ("[o, o]", s_extra ("x", "wrong"),
              s_extra ("x", "nan")), "ops[0].extra_candidates[1].name: 'x' is already", NULL);
}

static void test_reject_extra_candidate_bad (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].extra_candidates", json_pack ("[{s:s, s:s}]", "name", "x", "backend",
              "host"), "ops[0].extra_candidates[0].source: missing", NULL);
}

static void test_reject_extra_candidate_missing_file (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "ops[0].extra_candidates", json_pack ("[{s:s, s:s, s:s}]", "name", "x",
           "backend", "host", "source", "missing.c"));
    s_expect (fx, NULL, NULL, AK_ENOTFOUND, "ops[0].extra_candidates[0].source: cannot read "
              "source", "missing.c");
}

static void test_reject_extra_candidate_untargeted_backend (void **state)
{
    fixture_t *fx = *state;
    json_t *cand = s_extra ("gpu", "wrong");
    json_object_set_new (cand, "backend", json_string ("cuda"));
    json_object_set_new (cand, "launch", json_pack ("{s:[s], s:[s]}", "grid", "rows", "block", "32"));
    s_reject (fx, "ops[0].extra_candidates", json_pack ("[o]", cand),
              "ops[0].candidates: candidate 'gpu' is for backend 'cuda', which no target runs",
              NULL);
}

static void test_reject_tolerance_undeclared_dtype (void **state)
{
    s_reject (*state, "ops[0].tolerances", json_pack ("{s:{s:f, s:f}}", "float16", "atol", 1e-3,
              "rtol", 1e-3), "batch.json: ops[0].tolerances.float16: dtype not declared", NULL);
}

static void test_reject_tolerance_non_finite (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "ops[0].tolerances", json_pack ("{s:{s:f, s:f}}", "float32", "atol", 12345.0,
           "rtol", 1e-3));
    s_expect (fx, "12345.0", "1e999", AK_EINVAL,
              "batch.json: ops[0].tolerances.float32.atol: must be finite", NULL);
}

static void test_reject_tolerance_negative (void **state)
{
    s_reject (*state, "ops[0].tolerances", json_pack ("{s:{s:f, s:f}}", "float32", "atol", 1e-3,
              "rtol", -1e-3), "ops[0].tolerances.float32.rtol: must be >= 0", NULL);
}

static void test_reject_wrong_schema_version (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "schema_version", json_integer (2));
    s_expect (fx, NULL, NULL, AK_EVERSION, "batch.json: schema_version: unsupported version 2",
              NULL);
    ak_test_json_set (fx->json, "schema_version", NULL);
    s_expect (fx, NULL, NULL, AK_EINVAL, "batch.json: schema_version: missing", NULL);
}

static void test_reject_unknown_fields (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "colour", json_string ("blue"), "batch.json: colour: unknown field", NULL);
    s_reject (fx, "ops[0].workload", json_array (), "ops[0].workload: unknown field", NULL);
    s_reject (fx, "ops[0].workloads[1].tags", json_array (), "ops[0].workloads[1].tags: unknown "
              "field", NULL);
}

static void test_reject_bad_targets (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "targets", json_array (), "targets: must list 1 to", NULL);
    s_reject (fx, "targets", json_pack ("[s, s]", "host", "host"), "targets[1]: duplicate target",
              NULL);
    s_reject (fx, "targets", json_pack ("[s]", "h 100"), "targets[0]: a device class must match",
              NULL);
    s_reject (fx, "targets", NULL, "targets: missing", NULL);
}

static void test_reject_target_without_baseline (void **state)
{
    s_reject (*state, "targets", json_pack ("[s, s]", "host", "H100"),
              "ops[0].spec: softmax has no baseline for backend 'cuda' (needed by target 'H100')",
              NULL);
}

static void test_reject_bad_name (void **state)
{
    s_reject (*state, "name", json_string ("night ly"), "batch.json: name: must match", NULL);
}

static void test_reject_no_ops (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops", json_array (), "ops: must list 1 to", NULL);
    s_reject (fx, "ops[0]", json_string ("softmax"), "ops[0]: must be an object", NULL);
}

static void test_reject_duplicate_op (void **state)
{
    fixture_t *fx = *state;
    json_array_append_new (json_object_get (fx->json, "ops"),
                           json_pack ("{s:s}", "spec", fx->softmax));
    s_expect (fx, NULL, NULL, AK_EINVAL, "ops[1].spec: operator 'softmax' is already in ops[0]",
              NULL);
}

static void test_reject_missing_spec_file (void **state)
{
    fixture_t *fx = *state;
    ak_test_json_set (fx->json, "ops[0].spec", json_string ("nope/spec.json"));
    s_expect (fx, NULL, NULL, AK_ENOTFOUND, "batch.json: ops[0].spec: ", "nope/spec.json");
}

static void test_reject_bad_spec_names_both_files (void **state)
{
    fixture_t *fx = *state;
    /* a copy of softmax with one bad size, next to the manifest */
    char *text = NULL;
    ak_err_t err;
    if (ak_file_read (fx->softmax, 1 << 20, &text, NULL, &err))
        fail_msg ("%s", err.msg);
    json_t *spec = json_loads (text, 0, NULL);
    free (text);
    ak_test_json_set (spec, "sizes[2].size.cols", json_integer (-512));
    ak_test_json_set (spec, "reference", json_pack ("{s:s, s:s}", "name", "ref.c", "text", "int x;\n"));
    ak_test_json_set (spec, "baselines[0].source", json_pack ("{s:s, s:s}", "name", "b.c", "text", "int x;\n"));
    ak_test_json_set (spec, "candidates", json_array ());
    text = json_dumps (spec, JSON_INDENT (2));
    json_decref (spec);
    free (ak_test_write (fx->dir, "broken.json", text));
    free (text);
    ak_test_json_set (fx->json, "ops[0].spec", json_string ("broken.json"));
    s_expect (fx, NULL, NULL, AK_EINVAL, "batch.json: ops[0].spec: ",
              "broken.json: sizes[2].size.cols: must be a positive integer");
}

static void test_reject_inline_spec_error (void **state)
{
    fixture_t *fx = *state;
    s_reject (fx, "ops[0].spec", json_pack ("{s:i}", "schema_version", 1),
              "batch.json: ops[0].spec: name: missing", NULL);
}

/*  The static fixtures under tests/data/bad stay bad for their reason. */
static void test_bad_fixtures (void **state)
{
    (void) state;
    static const struct { const char *file, *needle; } cases[] = {
        { "unknown_policy_field.json", "policy.warmups: unknown field" },
        { "bad_threshold.json", "policy.threshold: must be in [0, 1)" },
        { "unknown_size.json", "ops[0].workloads[1]: unknown size 'huge'" },
        { "non_finite_tolerance.json", "ops[0].tolerances.float32.atol: must be finite" },
        { "escaping_source.json", "ops[0].spec: reference: must stay inside" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *rel = ak_sprintf ("tests/data/bad/%s", cases[i].file);
        char *path = ak_test_src (rel);
        ak_manifest_t *m = NULL;
        ak_err_t err = { 0 };
        if (ak_manifest_load (path, &m, &err) == 0)
            fail_msg ("%s loaded", cases[i].file);
        if (!strstr (err.msg, cases[i].needle) || !strstr (err.msg, cases[i].file))
            fail_msg ("%s: message lacks '%s': %s", cases[i].file, cases[i].needle, err.msg);
        free (path);
        free (rel);
    }
}

static void test_bad_arguments (void **state)
{
    (void) state;
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_manifest_load (NULL, &m, &err), AK_EINVAL);
    assert_int_equal (ak_manifest_parse_bundle (NULL, 0, "b", &m, &err), AK_EINVAL);
    assert_int_equal (ak_manifest_load ("/nonexistent/batch.json", &m, &err), AK_ENOTFOUND);
    assert_null (ak_manifest_to_bundle (NULL));
    assert_null (m);
}

int main (void)
{
#define T(fn) cmocka_unit_test_setup_teardown (fn, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_demo_batch_loads),
        cmocka_unit_test (test_planted_batch_loads),
        T (test_fixture_loads),
        T (test_defaults),
        T (test_backend_only_size),
        T (test_workload_forms),
        T (test_extra_candidates),
        T (test_extra_candidate_relative_path),
        T (test_tolerance_override),
        T (test_profile_flag),
        cmocka_unit_test (test_bundle_round_trip_demo),
        cmocka_unit_test (test_bundle_round_trip_cuda),
        T (test_bundle_round_trip_extras),
        cmocka_unit_test (test_bundle_rejects_file_paths),
        cmocka_unit_test (test_bundle_rejects_missing_text),
        cmocka_unit_test (test_bundle_rejects_bad_json),
        T (test_reject_unknown_policy_field),
        T (test_reject_bad_threshold),
        T (test_reject_rsd_target_out_of_range),
        T (test_reject_bad_policy_integers),
        T (test_reject_min_samples_above_max),
        T (test_reject_unknown_workload_size),
        T (test_reject_unknown_workload_size_object),
        T (test_reject_workload_shape_clash),
        T (test_reject_duplicate_workload),
        T (test_reject_workload_bad_size),
        T (test_reject_workload_undeclared_dtype),
        T (test_reject_zero_weight),
        T (test_reject_empty_workloads),
        T (test_reject_unknown_candidate),
        T (test_reject_extra_candidate_name_clash),
        T (test_reject_extra_candidate_bad),
        T (test_reject_extra_candidate_missing_file),
        T (test_reject_extra_candidate_untargeted_backend),
        T (test_reject_tolerance_undeclared_dtype),
        T (test_reject_tolerance_non_finite),
        T (test_reject_tolerance_negative),
        T (test_reject_wrong_schema_version),
        T (test_reject_unknown_fields),
        T (test_reject_bad_targets),
        T (test_reject_target_without_baseline),
        T (test_reject_bad_name),
        T (test_reject_no_ops),
        T (test_reject_duplicate_op),
        T (test_reject_missing_spec_file),
        T (test_reject_bad_spec_names_both_files),
        T (test_reject_inline_spec_error),
        cmocka_unit_test (test_shipped_batches_load),
        cmocka_unit_test (test_bad_fixtures),
        cmocka_unit_test (test_bad_arguments),
    };
#undef T
    return cmocka_run_group_tests (tests, NULL, NULL);
}
