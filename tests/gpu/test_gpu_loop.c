/*  tests/gpu/test_gpu_loop.c: the model loop on a real GPU, end to end
    (issue 19): ops/bench/loop_gpu.sh on a 2-layer Llama-style decoder
    (transformers config, random weights, bf16):

        akctl discover -> its batch through akcoord and one CUDA akworker
        -> akctl profile install + export -> akctl gate --cuda-graph
        --ops rms_norm -> akctl profile record-gate -> profile show

    Asserts what the loop must deliver whatever the H200's verdict on
    speed: entries installed, the gate ran with the profile applied (hits,
    no launch error, no "no entry applied"), the outputs within the frozen
    tolerance (no "outputs differ": a tuned kernel that changes the model
    must never pass the kernel gates), and the verdict kept with the
    profile.  Faster or not is recorded in the verdict and printed; the
    figures belong in docs/benchmarks.md, not in an assertion.
    Needs python3 with PyTorch and transformers; without a GPU: skip. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static bool s_has_reason (const json_t *doc, const char *reason)
{
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get (doc, "reasons"), i, r)
        if (json_string_value (r) && strcmp (json_string_value (r), reason) == 0)
            return true;
    return false;
}

static void test_model_loop (void **state)
{
    (void) state;
    ak_test_cuda_or_skip (true, NULL, NULL);
    char *dir = ak_test_tmpdir ("loop"), *script = ak_test_src ("ops/bench/loop_gpu.sh");
    char *akctl = ak_test_bin ("akctl"), *bindir = ak_dirname (akctl), *out = NULL;
    char asan[1024] = "";
    ak_test_asan_runtime (asan, sizeof asan);
    int rc = ak_test_runf (&out,
                           "%s%s%s ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 "
                           "AK_LOOP_DEMO_ARGS='--repeats 2 --layers 2' AK_LOOP_GATE_ARGS='--layers 2' "
                           "AK_LOOP_GATE_OPS=rms_norm AK_LOOP_GATE_MODES=cuda_graph sh '%s' '%s' '%s/out' 2>&1",
                           asan[0] ? "LD_PRELOAD='" : "", asan, asan[0] ? "'" : "", script, bindir, dir);
    print_message ("%s", out ? out : "");
    if (rc != 0)
        fail_msg ("loop_gpu.sh exited %d", rc);
    if (!out || !strstr (out, "installed ") || strstr (out, "installed 0 entries"))
        fail_msg ("no entry was installed from the discovered batch");

    char *path = ak_sprintf ("%s/out/gate.rms_norm.cuda_graph.json", dir);
    json_error_t jerr;
    json_t *doc = json_load_file (path, 0, &jerr);
    if (!doc)
        fail_msg ("%s: no verdict JSON: %s", path, jerr.text);
    json_t *checks = json_object_get (doc, "checks");
    json_int_t hits = json_integer_value (json_object_get (json_object_get (checks, "applied"), "hits"));
    print_message ("gate: %s, speedup %.3f +- %.3f, hits %lld, hit share %.2f, mode %s\n",
                   json_string_value (json_object_get (doc, "verdict")),
                   json_number_value (json_object_get (doc, "speedup")),
                   json_number_value (json_object_get (doc, "speedup_noise")), (long long) hits,
                   json_number_value (json_object_get (doc, "hit_share")),
                   json_string_value (json_object_get (doc, "mode")));
    if (hits <= 0)
        fail_msg ("the gate never ran a tuned kernel (hits %lld)", (long long) hits);
    assert_string_equal (json_string_value (json_object_get (doc, "mode")), "cuda_graph");
    assert_false (s_has_reason (doc, "outputs differ"));
    assert_false (s_has_reason (doc, "launch failed"));
    assert_false (s_has_reason (doc, "no entry applied"));
    json_int_t violations = json_integer_value (
        json_object_get (json_object_get (json_object_get (doc, "outputs"), "vs_off"), "violations"));
    assert_int_equal (violations, 0);
    /* the verdict is kept with the profile */
    if (!strstr (out, "end-to-end gate: "))
        fail_msg ("akctl profile show does not list the recorded gate");
    json_decref (doc);
    free (path);
    free (out);
    ak_test_rmtree (dir);
    free (dir);
    free (script);
    free (bindir);
    free (akctl);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_model_loop),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
