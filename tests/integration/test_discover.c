/*  tests/integration/test_discover.c: `akctl discover` as a user runs it
    (ops/akctl/discover.c), and libakdiscover.so's NVTX side in a real
    process (discover/inject.c, through bin/akd-nvtx-probe, which speaks
    NVTX and never touches CUDA, so this runs on hosts without a GPU).

    - the batch written from the recorded fixture is accepted by
      `akctl submit` on a private coordinator, as it is;
    - bad input: a command that does not exist (exit 2, named), usage
      errors, a program with no GPU work (exit 1, no batch), a program that
      fails or crashes (its status said, the partial trace kept), CUPTI
      taken by another tool (exit 1, said);
    - the window: --warmup-steps / --steps count outermost "step" ranges;
    - the CUPTI side with a stand-in libcupti.so.13 (launches, kernel and
      device records, the busy subscriber). */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define S_START_MS 20000

static ak_test_cluster_t s_c;

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

/* `akctl discover ARGS` with stderr folded into *out_p; the exit code. */
static int s_discover (char **out_p, const char *args)
{
    char *akctl = ak_test_bin ("akctl");
    int code = ak_test_runf (out_p, "'%s' discover %s 2>&1", akctl, args);
    free (akctl);
    return code;
}

static void s_contains (const char *out, const char *needle)
{
    if (!out || !strstr (out, needle))
        fail_msg ("output lacks '%s':\n%s", needle, out ? out : "(none)");
}

static bool s_exists (const char *dir, const char *name)
{
    char *p = ak_path_join (dir, name);
    bool ok = access (p, F_OK) == 0;
    free (p);
    return ok;
}

static void test_submit_from_trace (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "discover", false);
    char *trace = ak_test_src ("tests/data/discover/two_steps.jsonl");
    char *out = NULL, *args = ak_sprintf ("--from-trace '%s' --out '%s/d'", trace, s_c.dir);
    assert_int_equal (s_discover (&out, args), 0);
    s_contains (out, "77.8% mapped to catalog operators");
    s_contains (out, "matmul_512x6144x2048_bf16");
    free (out);
    ak_test_cluster_coord (&s_c, NULL, NULL, NULL, S_START_MS);
    /* no worker of the trace's GPU class here: a plain submit is refused
       naming the class; the batch itself is valid and queues with
       --allow-unserved */
    int rc = ak_test_akctl (&s_c, &out, "submit '%s/d/batch.json' 2>&1", s_c.dir);
    assert_int_equal (rc, 2);
    s_contains (out, "no worker has ever announced the target class");
    free (out);
    char *id = ak_test_submit (&s_c, "submit --allow-unserved '%s/d/batch.json'", s_c.dir);
    json_t *st = ak_test_akctl_json (&s_c, "status %s", id);
    assert_non_null (st);
    json_decref (st);
    free (id);
    free (args);
    free (trace);
}

static void test_usage (void **state)
{
    (void) state;
    char *out = NULL;
    assert_int_equal (s_discover (&out, "--help"), 0);
    s_contains (out, "Exit codes");
    s_contains (out, "aten::scaled_dot_product_attention");
    free (out);
    assert_int_equal (s_discover (&out, "-- true"), 2);
    s_contains (out, "--out DIR is required");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --steps 3 -- true"), 2);
    s_contains (out, "give --step-range");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --steps -1 --step-range s -- true"), 2);
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --bogus -- true"), 2);
    s_contains (out, "unknown option '--bogus'");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x"), 2);
    s_contains (out, "no command to run");
    free (out);
    /* the verb is listed, and points at its own help */
    char *akctl = ak_test_bin ("akctl");
    assert_int_equal (ak_test_runf (&out, "'%s' help discover", akctl), 0);
    s_contains (out, "akctl discover --help");
    free (out);
    free (akctl);
}

static void test_command_not_found (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("discover-nf");
    char *out = NULL, *args = ak_sprintf ("--out '%s' -- no-such-program-akd --flag", dir);
    assert_int_equal (s_discover (&out, args), 2);
    s_contains (out, "no-such-program-akd: command not found");
    free (out);
    free (args);
    args = ak_sprintf ("--out '%s' -- /nonexistent/prog", dir);
    assert_int_equal (s_discover (&out, args), 2);
    s_contains (out, "/nonexistent/prog: command not found");
    free (out);
    free (args);
    ak_test_rmtree (dir);
    free (dir);
}

static void test_cupti_busy (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("discover-busy");
    char *trace = ak_test_src ("tests/data/discover/cupti_busy.jsonl");
    char *out = NULL, *args = ak_sprintf ("--from-trace '%s' --out '%s'", trace, dir);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "CUPTI is taken by another tool");
    s_contains (out, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
    assert_false (s_exists (dir, "batch.json"));
    free (out);
    free (args);
    free (trace);
    /* a file that is not a trace is bad input */
    char *bad = ak_test_write (dir, "bad.jsonl", "hello\n");
    args = ak_sprintf ("--from-trace '%s' --out '%s'", bad, dir);
    assert_int_equal (s_discover (&out, args), 2);
    s_contains (out, "not a discover trace");
    free (out);
    free (args);
    free (bad);
    ak_test_rmtree (dir);
    free (dir);
}

/* The injection's NVTX side, in a real process: needs the library. */
static char *s_probe (void)
{
    char *lib = ak_test_bin ("lib/libakdiscover.so"), *probe = ak_test_bin ("akd-nvtx-probe");
    bool ok = access (lib, R_OK) == 0 && access (probe, X_OK) == 0;
    free (lib);
    if (!ok) {
        ak_test_skip_note ("libakdiscover.so is not built here (no CUDA headers with cupti.h and nvtx3/)");
        free (probe);
        return NULL;
    }
    return probe;
}

static char *s_read (const char *dir, const char *name)
{
    char *p = ak_path_join (dir, name), *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    if (ak_file_read (p, 1 << 24, &text, &len, &err) != 0)
        fail_msg ("%s", err.msg);
    free (p);
    return text;
}

static int s_count (const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr (p, needle)); p += strlen (needle))
        n++;
    return n;
}

static void test_window_and_no_gpu_work (void **state)
{
    (void) state;
    char *probe = s_probe ();
    if (!probe)
        skip ();
    char *dir = ak_test_tmpdir ("discover-probe");
    char *out = NULL;
    char *args = ak_sprintf ("--step-range step --warmup-steps 2 --steps 3 --out '%s' -- '%s' 8", dir, probe);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "no GPU work observed");
    assert_false (s_exists (dir, "batch.json"));
    assert_false (s_exists (dir, "hotspots.json"));
    free (out);
    /* the trace: steps 3 to 5 of 8, each with its ranges (pushA and a
       registered string through a domain), then the window closed */
    char *trace = s_read (dir, "trace.jsonl");
    assert_int_equal (s_count (trace, "\"name\":\"step\""), 3);
    s_contains (trace, "aten::mm, seq = 2, sizes");
    s_contains (trace, "aten::mm, seq = 4, sizes");
    assert_null (strstr (trace, "aten::mm, seq = 1,"));
    assert_null (strstr (trace, "aten::mm, seq = 5,"));
    assert_int_equal (s_count (trace, "\"name\":\"registered range\""), 3);
    s_contains (trace, "\"state\":\"closed\"");
    s_contains (trace, "\"t\":\"end\"");
    assert_int_equal (s_count (trace, "\"t\":\"push\""), s_count (trace, "\"t\":\"pop\""));
    free (trace);
    free (args);
    /* a program that never starts CUDA or NVTX leaves no trace at all */
    args = ak_sprintf ("--out '%s/none' -- true", dir);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "no GPU work observed");
    free (out);
    free (args);
    ak_test_rmtree (dir);
    free (dir);
    free (probe);
}

static void test_failing_and_crashing_programs (void **state)
{
    (void) state;
    char *probe = s_probe ();
    if (!probe)
        skip ();
    char *dir = ak_test_tmpdir ("discover-fail");
    char *out = NULL, *args = ak_sprintf ("--step-range step --out '%s' -- '%s' 2 fail", dir, probe);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "exited with status 3");
    free (out);
    free (args);
    args = ak_sprintf ("--step-range step --out '%s' -- '%s' 2 crash", dir, probe);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "killed by signal 6");
    free (out);
    /* what was buffered reached the file, with the signal and no end */
    char *trace = s_read (dir, "trace.jsonl");
    s_contains (trace, "{\"t\":\"signal\",\"signal\":6}");
    assert_null (strstr (trace, "\"t\":\"end\""));
    assert_int_equal (s_count (trace, "\"name\":\"step\""), 2);
    free (trace);
    free (args);
    ak_test_rmtree (dir);
    free (dir);
    free (probe);
}

/* The CUPTI side, through the stand-in libcupti.so.13 (discover/testing/
   fake_cupti.c): launches in the window become kernels attributed to the
   probe's ranges, a workload and a batch; a CUPTI held by another tool is
   a clear exit 1. */
static void test_cupti_side (void **state)
{
    (void) state;
    char *probe = s_probe ();
    if (!probe)
        skip ();
    char *fake = ak_test_bin ("../tests/fakecupti");
    char *dir = ak_test_tmpdir ("discover-cupti");
    char *out = NULL;
    char *args = ak_sprintf ("--class FAKE/sm_90/drv0/nvrtc13.0 --step-range step --warmup-steps 1 --steps 2 "
                             "--out '%s' -- '%s' 4 cupti", dir, probe);
    char *akctl = ak_test_bin ("akctl");
    int code = ak_test_runf (&out, "LD_LIBRARY_PATH='%s' '%s' discover %s 2>&1", fake, akctl, args);
    if (code != 0)
        fail_msg ("exit %d:\n%s", code, out ? out : "");
    s_contains (out, "matmul_8x32x16_fp32");
    free (out);
    char *trace = s_read (dir, "trace.jsonl");
    s_contains (trace, "{\"t\":\"cupti\",\"version\":130001");
    s_contains (trace, "\"name\":\"Fake GPU\"");
    free (trace);
    json_error_t je;
    char *hp = ak_path_join (dir, "hotspots.json");
    json_t *hot = json_load_file (hp, 0, &je);
    assert_non_null (hot);
    json_t *totals = json_object_get (hot, "totals");
    assert_int_equal (json_integer_value (json_object_get (totals, "steps")), 2);
    /* two steps of 20 + 3 us in ranges, one 1 us kernel between them: the
       loose kernel after the last step was launched after the window */
    assert_true (json_real_value (json_object_get (totals, "gpu_us_per_step")) == 23.5);
    json_t *w = json_array_get (json_object_get (hot, "workloads"), 0);
    assert_string_equal (json_string_value (json_object_get (w, "name")), "matmul_8x32x16_fp32");
    assert_int_equal (json_integer_value (json_object_get (w, "launches")), 2);
    json_decref (hot);
    free (hp);
    assert_true (s_exists (dir, "batch.json"));
    assert_true (s_exists (dir, "matmul.corpus.json"));
    free (args);

    args = ak_sprintf ("--out '%s/busy' -- '%s' 2 cupti", dir, probe);
    code = ak_test_runf (&out, "AKD_FAKE_CUPTI=busy LD_LIBRARY_PATH='%s' '%s' discover %s 2>&1", fake, akctl, args);
    assert_int_equal (code, 1);
    s_contains (out, "CUPTI is taken by another tool");
    s_contains (out, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
    free (out);
    free (args);
    free (akctl);
    ak_test_rmtree (dir);
    free (dir);
    free (fake);
    free (probe);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_submit_from_trace, s_teardown),
        cmocka_unit_test (test_usage),
        cmocka_unit_test (test_command_not_found),
        cmocka_unit_test (test_cupti_busy),
        cmocka_unit_test (test_window_and_no_gpu_work),
        cmocka_unit_test (test_failing_and_crashing_programs),
        cmocka_unit_test (test_cupti_side),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
