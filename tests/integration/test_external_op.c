/*  tests/integration/test_external_op.c: an operator from outside kernels/
    (ops/examples/scale_bias) through the whole system, on loopback.

    Starts akcoord and two host akworkers, then only through akctl:
    - `akctl submit --op ops/examples/scale_bias --workloads tiny` runs to
      completion, and `akctl report` shows the operator's winner line and
      its weighted aggregate;
    - a manifest naming the same spec with "corpus": the worker gates and
      times the corpus shapes (none of them a named size of the spec), the
      preflight receipt has them by name, dims and weight, and the report's
      aggregate weighs them;
    - a copy of the example renamed to a built-in's name ("softmax") is
      refused (exit 2, the message names the built-in and the way out), and
      accepted with --override-builtin, which `akctl show` then reports.
    Everything it starts is stopped at the end, whatever happened. */
#include "support.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define S_START_MS   30000
#define S_BATCH_MS   120000

static ak_test_cluster_t s_c;

/* ------------------------------------------------------------- helpers */

static const char *s_str (const json_t *obj, const char *key)
{
    const json_t *v = json_object_get (obj, key);
    return json_is_string (v) ? json_string_value (v) : "";
}

/*  Waits for batch id and checks it completed with every task done. */
static void s_wait_done (const char *id)
{
    json_t *sum = ak_test_batch_wait (&s_c, id, S_BATCH_MS);
    assert_string_equal (s_str (sum, "state"), "complete");
    json_t *counts = json_object_get (sum, "counts");
    json_int_t done = json_integer_value (json_object_get (counts, "done"));
    if (done != json_integer_value (json_object_get (sum, "total"))) {
        ak_test_akctl (&s_c, NULL, "receipts %s >&2", id);
        fail_msg ("batch %s: %lld of %lld tasks done", id, (long long) done,
                  (long long) json_integer_value (json_object_get (sum, "total")));
    }
    json_decref (sum);
}

/*  The aggregate row of dtype in REPORT's op ops[0]; fails when absent. */
static json_t *s_agg_row (json_t *report, const char *dtype)
{
    json_t *op = json_array_get (json_object_get (report, "ops"), 0);
    json_t *rows = json_object_get (json_object_get (op, "aggregates"), "rows");
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (strcmp (s_str (r, "dtype"), dtype) == 0)
            return r;
    fail_msg ("report has no '%s' aggregate row: %s", dtype,
              json_dumps (json_object_get (op, "aggregates"), JSON_COMPACT));
    return NULL;
}

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

/* ---------------------------------------------------------------- test */

static void test_external_operator (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "extop", true);
    ak_test_cluster_coord (&s_c, NULL, NULL, NULL, S_START_MS);
    ak_test_cluster_workers (&s_c, "ext-w", 2, NULL, S_START_MS);
    char *example = ak_test_src ("ops/examples/scale_bias");
    char *out = NULL;

    /* 1. submit --op: the example by its directory, on the host */
    char *id = ak_test_submit (&s_c, "submit --op '%s' --workloads tiny", example);
    s_wait_done (id);
    int code = ak_test_akctl (&s_c, &out, "report %s", id);
    if (code != 0 || !strstr (out, "scale_bias on host") || !strstr (out, "winner: ")
        || !strstr (out, "weighted aggregate") || !strstr (out, "float32"))
        fail_msg ("akctl report: exit %d, no winner or weighted aggregate for scale_bias:\n%s",
                  code, out);
    print_message ("%s", out);
    free (out);
    json_t *report = ak_test_akctl_json (&s_c, "report %s", id);
    assert_non_null (report);
    json_t *all = s_agg_row (report, "all");
    assert_int_equal (json_integer_value (json_object_get (all, "workloads")), 1);
    assert_true (json_number_value (json_object_get (all, "baseline_us")) > 0);
    /* a promoted winner's aggregate speedup is the one the batch recorded */
    json_t *op = json_array_get (json_object_get (report, "ops"), 0);
    json_t *winner = json_object_get (op, "winner");
    if (json_is_true (json_object_get (winner, "promoted")))
        assert_true (fabs (json_number_value (json_object_get (all, "speedup"))
                           - json_number_value (json_object_get (winner, "speedup"))) < 1e-9);
    json_decref (report);
    /* the same table in Markdown and in the HTML page of --out */
    code = ak_test_akctl (&s_c, &out, "report --markdown %s", id);
    if (code != 0 || !strstr (out, "### weighted aggregate") || !strstr (out, "| all "))
        fail_msg ("akctl report --markdown: exit %d, no weighted aggregate table:\n%s", code, out);
    free (out);
    char *outdir = ak_sprintf ("%s/report", s_c.dir);
    code = ak_test_akctl (&s_c, NULL, "report %s --out '%s' > /dev/null", id, outdir);
    assert_true (code == 0 || code == 1);           /* 1: no winner promoted (verdict) */
    char *html_path = ak_sprintf ("%s/report.html", outdir), *html = NULL;
    assert_int_equal (ak_file_read (html_path, 1u << 22, &html, NULL, NULL), 0);
    assert_non_null (strstr (html, "id=\"aggregates\""));
    assert_non_null (strstr (html, "<td>scale_bias</td>"));
    free (html);
    free (html_path);
    free (outdir);
    free (id);

    /* 2. the same spec with a corpus: shapes the spec does not name */
    char *text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"corpus\", \"targets\": [\"host\"],\n"
        " \"policy\": {\"warmup\": 1, \"min_samples\": 3, \"max_samples\": 20,\n"
        "            \"max_time_ms\": 200, \"rsd_target\": 0.05},\n"
        " \"ops\": [{\"spec\": \"%s/spec.json\", \"corpus\": \"%s/corpus.json\",\n"
        "          \"candidates\": [\"unrolled\"]}]}\n", example, example);
    char *manifest = ak_test_write (s_c.dir, "corpus.json", text);
    free (text);
    id = ak_test_submit (&s_c, "submit '%s'", manifest);
    free (manifest);
    s_wait_done (id);
    report = ak_test_akctl_json (&s_c, "report %s", id);
    assert_non_null (report);
    op = json_array_get (json_object_get (report, "ops"), 0);
    json_t *pre = json_object_get (op, "preflight");
    assert_string_equal (s_str (pre, "status"), "ok");
    json_t *timings = json_object_get (pre, "timings");
    assert_int_equal (json_array_size (timings), 2);
    const char *names[2] = { "narrow_rows", "wide_row" };
    const json_int_t dims[2][2] = { { 33, 96 }, { 2, 1500 } };
    const double weights[2] = { 3, 1 };
    for (size_t i = 0; i < 2; i++) {
        json_t *t = json_array_get (timings, i);
        json_t *wl = json_object_get (t, "workload");
        assert_string_equal (s_str (wl, "name"), names[i]);
        json_t *d = json_object_get (wl, "dims");
        /* 64-bit fields may come as strings in proto3 JSON */
        for (size_t k = 0; k < 2; k++) {
            json_t *v = json_array_get (d, k);
            json_int_t x = json_is_integer (v) ? json_integer_value (v)
                         : json_is_string (v) ? strtoll (json_string_value (v), NULL, 10) : -1;
            assert_int_equal (x, dims[i][k]);
        }
        assert_true (json_number_value (json_object_get (wl, "weight")) == weights[i]);
        assert_true (json_number_value (json_object_get (json_object_get (t, "candidate"),
                                                         "median_us")) > 0);
    }
    all = s_agg_row (report, "all");
    assert_int_equal (json_integer_value (json_object_get (all, "workloads")), 2);
    assert_true (json_number_value (json_object_get (all, "weight")) == 4);
    json_decref (report);
    free (id);

    /* 3. a built-in's name: refused, then overridden and shown as such */
    char *copy = ak_sprintf ("%s/softmax_like", s_c.dir);
    char *cmd = ak_sprintf ("cp -r '%s' '%s' && sed -i 's/\"scale_bias\"/\"softmax\"/' '%s/spec.json'",
                            example, copy, copy);
    assert_int_equal (ak_test_run (cmd, NULL), 0);
    free (cmd);
    code = ak_test_akctl (&s_c, &out, "submit --op '%s' --workloads tiny 2>&1", copy);
    if (code != 2 || !strstr (out, "built-in operator") || !strstr (out, "kernels/softmax/spec.json")
        || !strstr (out, "--override-builtin"))
        fail_msg ("a copy named softmax: exit %d (want 2 naming the built-in): %s", code, out);
    free (out);
    id = ak_test_submit (&s_c, "submit --op '%s' --workloads tiny --override-builtin", copy);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "cancel %s > /dev/null", id), 0);
    report = ak_test_akctl_json (&s_c, "report %s", id);
    assert_non_null (report);
    json_t *ov = json_object_get (report, "overrides");
    assert_int_equal (json_array_size (ov), 1);
    assert_string_equal (json_string_value (json_array_get (ov, 0)), "softmax");
    json_decref (report);
    code = ak_test_akctl (&s_c, &out, "show %s.0001", id);
    if (code != 0 || !strstr (out, "overriding the built-in"))
        fail_msg ("akctl show of an overriding op: exit %d: %s", code, out);
    free (out);
    free (id);
    free (copy);
    free (example);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_external_operator, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
