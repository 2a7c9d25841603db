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

#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define S_START_MS   30000
#define S_BATCH_MS   120000

typedef struct {
    char  *dir;
    char  *akctl;
    pid_t  coord;
    pid_t  workers[2];
} s_ctx_t;

static s_ctx_t s_ctx;

/* ------------------------------------------------------------- helpers */

static void s_free_ports (int ports[2])
{
    int fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i] = socket (AF_INET, SOCK_STREAM, 0);
        assert_true (fds[i] >= 0);
        struct sockaddr_in sa;
        memset (&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
        assert_int_equal (bind (fds[i], (struct sockaddr *) &sa, sizeof sa), 0);
        socklen_t len = sizeof sa;
        assert_int_equal (getsockname (fds[i], (struct sockaddr *) &sa, &len), 0);
        ports[i] = ntohs (sa.sin_port);
    }
    close (fds[0]);
    close (fds[1]);
}

static int s_akctl (const char *args, char **out_p)
{
    char *cmd = ak_sprintf ("%s %s", s_ctx.akctl, args);
    int code = ak_test_run (cmd, out_p);
    free (cmd);
    return code;
}

static json_t *s_akctl_json (const char *args)
{
    char *full = ak_sprintf ("--json %s", args);
    char *out = NULL;
    int code = s_akctl (full, &out);
    json_t *json = code == 0 ? json_loads (out ? out : "", 0, NULL) : NULL;
    if (!json)
        print_message ("akctl %s: exit %d, output: %s\n", full, code, out ? out : "");
    free (out);
    free (full);
    return json;
}

static const char *s_str (const json_t *obj, const char *key)
{
    const json_t *v = json_object_get (obj, key);
    return json_is_string (v) ? json_string_value (v) : "";
}

static void s_dump_log (const char *name)
{
    char *path = ak_sprintf ("%s/%s", s_ctx.dir, name);
    char *text = NULL;
    size_t len = 0;
    if (ak_file_read (path, 1u << 20, &text, &len, NULL) == 0) {
        size_t from = len > 4000 ? len - 4000 : 0;
        print_message ("---- %s (last %zu bytes)\n%s\n----\n", name, len - from, text + from);
    }
    free (text);
    free (path);
}

static bool s_coordinator_answers (void *arg)
{
    (void) arg;
    return s_akctl ("--timeout 500 stats > /dev/null 2>&1", NULL) == 0;
}

static bool s_workers_alive (void *arg)
{
    (void) arg;
    json_t *answer = s_akctl_json ("workers");
    int alive = 0;
    size_t i;
    json_t *w;
    json_array_foreach (json_object_get (answer, "workers"), i, w)
        alive += strcmp (s_str (w, "state"), "alive") == 0;
    json_decref (answer);
    return alive == 2;
}

static bool s_batch_finished (void *arg)
{
    char *args = ak_sprintf ("status %s", (const char *) arg);
    json_t *sum = s_akctl_json (args);
    bool done = sum && strcmp (s_str (sum, "state"), "open") != 0;
    json_decref (sum);
    free (args);
    return done;
}

/*  `akctl ARGS` must print a batch id; returns it (caller frees). */
static char *s_submit (const char *args)
{
    char *out = NULL;
    int code = s_akctl (args, &out);
    if (code != 0)
        fail_msg ("akctl %s: exit %d: %s", args, code, out ? out : "");
    out[strcspn (out, "\n")] = '\0';
    assert_true (*out == 'B');
    return out;
}

/*  Waits for batch id and checks it completed with every task done. */
static void s_wait_done (const char *id)
{
    if (!ak_test_wait (s_batch_finished, (void *) id, S_BATCH_MS)) {
        s_dump_log ("akcoord.log");
        fail_msg ("batch %s did not finish within %d ms", id, S_BATCH_MS);
    }
    char *args = ak_sprintf ("status %s", id);
    json_t *sum = s_akctl_json (args);
    free (args);
    assert_non_null (sum);
    assert_string_equal (s_str (sum, "state"), "complete");
    json_t *counts = json_object_get (sum, "counts");
    json_int_t done = json_integer_value (json_object_get (counts, "done"));
    if (done != json_integer_value (json_object_get (sum, "total"))) {
        char *r = ak_sprintf ("receipts %s >&2", id);
        s_akctl (r, NULL);
        free (r);
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

/* --------------------------------------------------------------- setup */

static void s_start (void)
{
    s_ctx.dir = ak_test_tmpdir ("extop");
    assert_non_null (s_ctx.dir);
    int ports[2];
    s_free_ports (ports);
    char *workers_ep = ak_sprintf ("tcp://127.0.0.1:%d", ports[0]);
    char *clients_ep = ak_sprintf ("tcp://127.0.0.1:%d", ports[1]);
    char *akctl = ak_test_bin ("akctl");
    s_ctx.akctl = ak_sprintf ("'%s' --coordinator %s --timeout 10000", akctl, clients_ep);

    char *coord = ak_test_bin ("akcoord");
    char *store = ak_sprintf ("%s/store", s_ctx.dir);
    char *log = ak_sprintf ("%s/akcoord.log", s_ctx.dir);
    char *cargv[] = { coord, "--store", store, "--workers", workers_ep, "--clients", clients_ep,
                      NULL };
    s_ctx.coord = ak_test_spawn_coord (cargv, log);
    assert_true (s_ctx.coord > 0);
    free (log);
    if (!ak_test_wait (s_coordinator_answers, NULL, S_START_MS)) {
        s_dump_log ("akcoord.log");
        fail_msg ("akcoord did not answer on %s", clients_ep);
    }
    char *worker = ak_test_bin ("akworker");
    for (int i = 0; i < 2; i++) {
        char id[16];
        snprintf (id, sizeof id, "ext-w%d", i + 1);
        char *cache = ak_sprintf ("%s/cache-%s", s_ctx.dir, id);
        char *wlog = ak_sprintf ("%s/%s.log", s_ctx.dir, id);
        char *wargv[] = { worker, "--coordinator", workers_ep, "--id", id, "--cache", cache, NULL };
        s_ctx.workers[i] = ak_test_spawn (wargv, wlog);
        assert_true (s_ctx.workers[i] > 0);
        free (cache);
        free (wlog);
    }
    if (!ak_test_wait (s_workers_alive, NULL, S_START_MS)) {
        s_dump_log ("ext-w1.log");
        s_dump_log ("akcoord.log");
        fail_msg ("the workers did not both register");
    }
    free (worker);
    free (coord);
    free (store);
    free (akctl);
    free (workers_ep);
    free (clients_ep);
}

static int s_teardown (void **state)
{
    (void) state;
    for (int i = 0; i < 2; i++)
        if (s_ctx.workers[i] > 0)
            ak_test_stop (s_ctx.workers[i], SIGTERM, 10000);
    if (s_ctx.coord > 0)
        ak_test_stop (s_ctx.coord, SIGTERM, 10000);
    if (s_ctx.dir)
        ak_test_rmtree (s_ctx.dir);
    free (s_ctx.dir);
    free (s_ctx.akctl);
    memset (&s_ctx, 0, sizeof s_ctx);
    return 0;
}

/* ---------------------------------------------------------------- test */

static void test_external_operator (void **state)
{
    (void) state;
    s_start ();
    char *example = ak_test_src ("ops/examples/scale_bias");
    char *out = NULL;

    /* 1. submit --op: the example by its directory, on the host */
    char *args = ak_sprintf ("submit --op '%s' --workloads tiny", example);
    char *id = s_submit (args);
    free (args);
    s_wait_done (id);
    args = ak_sprintf ("report %s", id);
    int code = s_akctl (args, &out);
    free (args);
    if (code != 0 || !strstr (out, "scale_bias on host") || !strstr (out, "winner: ")
        || !strstr (out, "weighted aggregate") || !strstr (out, "float32"))
        fail_msg ("akctl report: exit %d, no winner or weighted aggregate for scale_bias:\n%s",
                  code, out);
    print_message ("%s", out);
    free (out);
    args = ak_sprintf ("report %s", id);
    json_t *report = s_akctl_json (args);
    free (args);
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
    args = ak_sprintf ("report --markdown %s", id);
    code = s_akctl (args, &out);
    free (args);
    if (code != 0 || !strstr (out, "### weighted aggregate") || !strstr (out, "| all "))
        fail_msg ("akctl report --markdown: exit %d, no weighted aggregate table:\n%s", code, out);
    free (out);
    char *outdir = ak_sprintf ("%s/report", s_ctx.dir);
    args = ak_sprintf ("report %s --out '%s' > /dev/null", id, outdir);
    code = s_akctl (args, NULL);
    free (args);
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
    char *manifest = ak_test_write (s_ctx.dir, "corpus.json", text);
    free (text);
    args = ak_sprintf ("submit '%s'", manifest);
    id = s_submit (args);
    free (args);
    free (manifest);
    s_wait_done (id);
    args = ak_sprintf ("report %s", id);
    report = s_akctl_json (args);
    free (args);
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
    char *copy = ak_sprintf ("%s/softmax_like", s_ctx.dir);
    char *cmd = ak_sprintf ("cp -r '%s' '%s' && sed -i 's/\"scale_bias\"/\"softmax\"/' '%s/spec.json'",
                            example, copy, copy);
    assert_int_equal (ak_test_run (cmd, NULL), 0);
    free (cmd);
    args = ak_sprintf ("submit --op '%s' --workloads tiny 2>&1", copy);
    code = s_akctl (args, &out);
    free (args);
    if (code != 2 || !strstr (out, "built-in operator") || !strstr (out, "kernels/softmax/spec.json")
        || !strstr (out, "--override-builtin"))
        fail_msg ("a copy named softmax: exit %d (want 2 naming the built-in): %s", code, out);
    free (out);
    args = ak_sprintf ("submit --op '%s' --workloads tiny --override-builtin", copy);
    id = s_submit (args);
    free (args);
    args = ak_sprintf ("cancel %s > /dev/null", id);
    assert_int_equal (s_akctl (args, NULL), 0);
    free (args);
    args = ak_sprintf ("report %s", id);
    report = s_akctl_json (args);
    free (args);
    assert_non_null (report);
    json_t *ov = json_object_get (report, "overrides");
    assert_int_equal (json_array_size (ov), 1);
    assert_string_equal (json_string_value (json_array_get (ov, 0)), "softmax");
    json_decref (report);
    args = ak_sprintf ("show %s.0001", id);
    code = s_akctl (args, &out);
    free (args);
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
