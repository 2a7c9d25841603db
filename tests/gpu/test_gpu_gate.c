/*  tests/gpu/test_gpu_gate.c: `akctl gate` on a real GPU with planted
    profile entries (issue 19).

    tests/gpu/data/gate_planted.py writes, for this device's class, a package
    whose one entry (rmsnorm 512x2048 bfloat16, the catalog's warp_row) is
      wrong: the normalisation replaced by a constant -> the gate must reject
             it with "outputs differ";
      slow:  correct, each row's warp sleeping ~200 us -> "slower";
      good:  the catalog kernel -> applied (hits), no "outputs differ", no
             "launch failed" (faster or not is the H200's to say).
    Every run must have hit the profile: a gate that never ran the planted
    kernel would prove nothing.  Needs python3 with PyTorch on the GPU host;
    without a GPU: "SKIP: no GPU: <reason>", exit 77. */
#include "support.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* AKPROFILE_LIB for the package builder (akctl gate finds its own), and
   libasan preloaded into python3 under an ASan build. */
static char *s_env (void)
{
    char *lib = ak_test_akprofile_lib ();
    char asan[1024] = "";
    ak_test_asan_runtime (asan, sizeof asan);
    char *env = ak_sprintf ("AKPROFILE_LIB='%s' %s%s%s ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0", lib,
                            asan[0] ? "LD_PRELOAD='" : "", asan, asan[0] ? "'" : "");
    free (lib);
    return env;
}

/* Runs the gate on a MODE package (eagerly, or replaying CUDA graphs);
   its exit code, the verdict JSON in *doc. */
static int s_gate_in (const char *mode, bool graph, json_t **doc)
{
    char *env = s_env (), *dir = ak_test_tmpdir (mode), *out = NULL;
    char *builder = ak_test_src ("tests/gpu/data/gate_planted.py"), *akctl = ak_test_bin ("akctl");
    if (ak_test_runf (&out, "%s python3 '%s' %s '%s' 2>&1", env, builder, mode, dir) != 0)
        fail_msg ("gate_planted.py %s failed:\n%s", mode, out ? out : "");
    free (out);
    int rc = ak_test_runf (&out, "%s '%s' gate --profile '%s/pkg' --steps 12 --warmup 2 %s--out '%s/gate.json' "
                                 "-- python3 '%s/step.py' 2>&1", env, akctl, dir, graph ? "--cuda-graph " : "", dir,
                           dir);
    print_message ("%s", out ? out : "");
    free (out);
    char *path = ak_sprintf ("%s/gate.json", dir);
    json_error_t jerr;
    *doc = json_load_file (path, 0, &jerr);
    if (!*doc)
        fail_msg ("%s gate: no verdict JSON (exit %d): %s", mode, rc, jerr.text);
    free (path);
    free (akctl);
    free (builder);
    free (dir);
    free (env);
    return rc;
}

static int s_gate (const char *mode, json_t **doc)
{
    return s_gate_in (mode, false, doc);
}

static bool s_has_reason (const json_t *doc, const char *reason)
{
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get (doc, "reasons"), i, r)
        if (json_string_value (r) && strcmp (json_string_value (r), reason) == 0)
            return true;
    return false;
}

/* The planted entry ran on every step: hits, and no launch error. */
static void s_applied (const json_t *doc, const char *mode)
{
    json_t *checks = json_object_get (doc, "checks");
    json_int_t hits = json_integer_value (json_object_get (json_object_get (checks, "applied"), "hits"));
    print_message ("%s: verdict %s, speedup %.3f +- %.3f, hits %lld, hit share %.2f\n", mode,
                   json_string_value (json_object_get (doc, "verdict")),
                   json_number_value (json_object_get (doc, "speedup")),
                   json_number_value (json_object_get (doc, "speedup_noise")), (long long) hits,
                   json_number_value (json_object_get (doc, "hit_share")));
    if (hits <= 0)
        fail_msg ("%s: the planted entry never ran (hits %lld): the gate proved nothing", mode, (long long) hits);
    assert_false (s_has_reason (doc, "launch failed"));
    assert_false (s_has_reason (doc, "no entry applied"));
}

static void test_planted_wrong_rejected (void **state)
{
    (void) state;
    ak_test_cuda_or_skip (true, NULL, NULL);
    json_t *doc = NULL;
    assert_int_equal (s_gate ("wrong", &doc), 1);
    s_applied (doc, "wrong");
    assert_true (s_has_reason (doc, "outputs differ"));
    assert_false (json_is_true (json_object_get (doc, "accepted")));
    json_decref (doc);
}

/* The planted entry captured into a CUDA graph is replayed, and the
   numerical gate still sees it. */
static void test_planted_wrong_rejected_in_graph (void **state)
{
    (void) state;
    ak_test_cuda_or_skip (true, NULL, NULL);
    json_t *doc = NULL;
    assert_int_equal (s_gate_in ("wrong", true, &doc), 1);
    s_applied (doc, "wrong (CUDA graph)");
    assert_string_equal (json_string_value (json_object_get (doc, "mode")), "cuda_graph");
    assert_true (s_has_reason (doc, "outputs differ"));
    json_decref (doc);
}

static void test_planted_slow_rejected (void **state)
{
    (void) state;
    ak_test_cuda_or_skip (true, NULL, NULL);
    json_t *doc = NULL;
    assert_int_equal (s_gate ("slow", &doc), 1);
    s_applied (doc, "slow");
    assert_true (s_has_reason (doc, "slower"));
    assert_false (s_has_reason (doc, "outputs differ"));
    assert_true (json_number_value (json_object_get (doc, "speedup")) < 0.9);
    json_decref (doc);
}

static void test_catalog_kernel_applied (void **state)
{
    (void) state;
    ak_test_cuda_or_skip (true, NULL, NULL);
    json_t *doc = NULL;
    int rc = s_gate ("good", &doc);
    assert_true (rc == 0 || rc == 1);
    s_applied (doc, "good");
    assert_false (s_has_reason (doc, "outputs differ"));
    json_decref (doc);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_planted_wrong_rejected),
        cmocka_unit_test (test_planted_wrong_rejected_in_graph),
        cmocka_unit_test (test_planted_slow_rejected),
        cmocka_unit_test (test_catalog_kernel_applied),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
