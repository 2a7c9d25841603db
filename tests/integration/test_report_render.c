/*  tests/integration/test_report_render.c: report.html as a browser sees it.

    Writes a report.json (one operator whose winner's confirmation
    disagreed, with per-workload timings; one failed candidate), turns it
    into report.html with `akctl report B000001 --out DIR --from FILE` (no
    coordinator needed), renders that page headlessly with
    /usr/bin/chromium (--dump-dom) and checks that the three charts, their
    bars, the verdict and the disagreement are in the rendered DOM.

    Without /usr/bin/chromium the whole binary is a visible skip ("SKIP:
    <why>", exit 77: "Not Run" in CTest): it is only the render.  What does
    not need a browser (the files, the summary line, the marks in the HTML
    text) is checked by test_report_html and test_operator_ux, which
    therefore always show as passed or failed. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>

#include "util.h"

#define S_CHROMIUM "/usr/bin/chromium"

static char *s_dir;

/* A complete batch's report: softmax on host, a promoted winner whose
   confirmation disagreed (the lower figure reported), the timings of its
   two workloads, one candidate that failed its gates. */
static json_t *s_report (void)
{
    json_t *r = json_pack ("{s:{s:s, s:s, s:s, s:i, s:{s:i, s:i, s:i, s:i, s:i, s:i}},"
                           " s:{s:f, s:f, s:f}}",
        "batch", "batch_id", "B000001", "name", "render", "state", "complete", "total", 4,
            "counts", "queued", 0, "leased", 0, "done", 3, "failed", 1, "poisoned", 0, "cancelled", 0,
        "phases_ms", "compile", 1200.0, "gates", 3400.0, "timing", 2100.0);
    json_t *op = json_pack ("{s:s, s:s, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:[], s:s, s:s}]}",
        "op", "softmax", "device_class", "host",
        "preflight", "task_id", "B000001.0001", "state", "done", "status", "ok",
        "failures", "task_id", "B000001.0003", "candidate", "broken", "params", "status", "wrong_answer",
            "reason", "smoke: 12 elements off");
    json_object_set_new (op, "winner", json_pack ("{s:s, s:s, s:s, s:s, s:s, s:b, s:f, s:f, s:s, s:[], s:s}",
        "op", "softmax", "device_class", "host", "task_id", "B000001.0002", "receipt_id", "R00000002",
        "candidate_name", "vectorized", "promoted", 1, "speedup", 1.6, "noise", 0.1,
        "reason", "confirmation disagrees: 1.60x on w2 is 1.10 off the measured figure, outside the noise "
                  "bands (+- 0.40); the lower figure is reported", "params", "confirmation", "disagrees"));
    json_t *ops = json_array ();
    json_array_append_new (ops, op);
    json_object_set_new (r, "ops", ops);
    json_object_set_new (r, "winner_timings", json_pack ("{s:[{s:{s:s, s:s, s:[i,i]}, s:f, s:f},"
                                                         "   {s:{s:s, s:s, s:[i,i]}, s:f, s:f}]}",
        "B000001.0002",
        "workload", "name", "small", "dtype", "float32", "dims", 64, 256, "speedup", 1.5, "speedup_noise", 0.1,
        "workload", "name", "large", "dtype", "float32", "dims", 256, 1024, "speedup", 1.7, "speedup_noise", 0.2));
    assert_non_null (r);
    assert_non_null (op);
    return r;
}

static void test_render (void **state)
{
    (void) state;
    if (access (S_CHROMIUM, X_OK) != 0)
        ak_test_skip ("headless render of report.html: " S_CHROMIUM " is not installed "
                      "(AK_OPTIONAL_DEPS_INSTALL=1 ops/test.sh or ops/setup.sh installs it)");
    s_dir = ak_test_tmpdir ("render");
    json_t *report = s_report ();
    char *path = ak_test_write_json (s_dir, "in.json", report, NULL, NULL);
    json_decref (report);
    char *akctl = ak_test_bin ("akctl"), *out = NULL;
    int rc = ak_test_runf (&out, "'%s' report B000001 --out '%s/rep' --from '%s'", akctl, s_dir, path);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "verdict=PASS winners=1/1 failures=1"));
    free (out);

    char *dom = NULL;
    rc = ak_test_runf (&dom, "timeout 120 " S_CHROMIUM " --headless --no-sandbox --disable-gpu "
                       "--disable-background-networking --disable-component-update --disable-sync "
                       "--no-first-run --user-data-dir='%s/chromium' --dump-dom 'file://%s/rep/report.html' "
                       "2>/dev/null", s_dir, s_dir);
    assert_int_equal (rc, 0);
    const char *ids[] = { "chart-speedup", "chart-phases", "chart-failures" };
    for (int i = 0; i < 3; i++) {
        char *needle = ak_sprintf ("id=\"%s\"", ids[i]);
        if (!strstr (dom, needle))
            fail_msg ("the rendered DOM has no %s", needle);
        free (needle);
    }
    assert_non_null (strstr (dom, "<rect"));
    assert_non_null (strstr (dom, "verdict PASS"));
    assert_non_null (strstr (dom, "CONFIRMATION DISAGREES"));
    assert_non_null (strstr (dom, "bar win disagrees"));
    free (dom);
    free (akctl);
    free (path);
}

static int s_teardown (void **state)
{
    (void) state;
    if (s_dir)
        ak_test_rmtree (s_dir);
    free (s_dir);
    s_dir = NULL;
    return 0;
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_render, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
