/*  tests/integration/test_e2e.c: the whole system, end to end, on loopback.

    Starts akcoord (temporary store, tcp on free loopback ports) and two
    akworker processes, submits a small softmax batch with one extra
    candidate that is known to be wrong (kernels/testing/wrong.c), waits
    for it through `akctl status --json`, and then checks, only through
    akctl, what an operator relies on:
    - the batch is complete;
    - every task has exactly one accepted (non-duplicate) receipt, and
      `akctl show` agrees with `akctl receipts`;
    - the wrong candidate's task failed with wrong_answer;
    - `akctl report` prints a winner line for softmax;
    - `akctl workers --json` lists both workers alive.
    Everything it starts is stopped at the end, whatever happened. */
#include "support.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spec.h"
#include "util.h"

#define S_START_MS   30000         /* coordinator answering, workers registered */
#define S_BATCH_MS   200000        /* the batch finishing (sanitizer builds are slow) */

typedef struct {
    char  *dir;
    char  *akctl;                  /* "'BIN/akctl' --coordinator EP --timeout MS" */
    pid_t  coord;
    pid_t  workers[2];
    char  *batch_id;
} s_ctx_t;

static s_ctx_t s_ctx;

/* ------------------------------------------------------------- helpers */

/*  Two distinct free loopback ports: both bound at once, then released. */
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

/*  Runs `akctl ARGS` against the test's coordinator; returns the exit code
    and, with out_p, stdout (stderr goes to the test's own stderr). */
static int s_akctl (const char *args, char **out_p)
{
    char *cmd = ak_sprintf ("%s %s", s_ctx.akctl, args);
    int code = ak_test_run (cmd, out_p);
    free (cmd);
    return code;
}

/*  `akctl --json ARGS`, parsed.  NULL unless it exited 0 with JSON. */
static json_t *s_akctl_json (const char *args)
{
    char *full = ak_sprintf ("--json %s", args);
    char *out = NULL;
    int code = s_akctl (full, &out);
    json_t *json = NULL;
    if (code == 0)
        json = json_loads (out ? out : "", 0, NULL);
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

static bool s_bool (const json_t *obj, const char *key)
{
    return json_is_true (json_object_get (obj, key));
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
        if ((strcmp (s_str (w, "worker_id"), "e2e-w1") == 0
             || strcmp (s_str (w, "worker_id"), "e2e-w2") == 0)
            && strcmp (s_str (w, "state"), "alive") == 0)
            alive++;
    json_decref (answer);
    return alive == 2;
}

static bool s_batch_finished (void *arg)
{
    (void) arg;
    char *args = ak_sprintf ("status %s", s_ctx.batch_id);
    json_t *sum = s_akctl_json (args);
    bool done = sum && strcmp (s_str (sum, "state"), "open") != 0;
    json_decref (sum);
    free (args);
    return done;
}

/* --------------------------------------------------------------- setup */

/*  The batch: softmax on host, its smallest size, the spec candidate with
    the fewest configurations, plus the wrong candidate.  A small policy
    keeps timing short; correctness gates run in full. */
static char *s_write_manifest (void)
{
    char *spec_path = ak_test_src ("kernels/softmax/spec.json");
    char *wrong_path = ak_test_src ("kernels/testing/wrong.c");
    if (access (wrong_path, R_OK) != 0)
        fail_msg ("%s is missing: the e2e batch needs a candidate that gives wrong answers", wrong_path);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0, "" };
    if (ak_spec_load (spec_path, &spec, &err) != 0)
        fail_msg ("cannot load %s: %s", spec_path, err.msg);

    const char *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; i < spec->ncandidates; i++) {
        const ak_candidate_t *c = &spec->candidates[i];
        size_t n = 0;
        if (strcmp (c->backend, "host") != 0 || ak_space_walk (c, NULL, NULL, &n, &err) != 0)
            continue;
        if (!best || n < best_n) {
            best = c->name;
            best_n = n;
        }
    }
    if (!best)
        fail_msg ("%s has no host candidate", spec_path);
    char *text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"e2e\", \"targets\": [\"host\"],\n"
        " \"policy\": {\"max_attempts\": 2, \"warmup\": 1, \"min_samples\": 3, \"max_samples\": 20,\n"
        "            \"max_time_ms\": 200, \"rsd_target\": 0.05, \"lease_ms\": 120000},\n"
        " \"ops\": [{\"spec\": \"%s\",\n"
        "          \"workloads\": [\"%s\"],\n"
        "          \"candidates\": [\"%s\"],\n"
        "          \"extra_candidates\": [{\"name\": \"wrong\", \"backend\": \"host\",\n"
        "                                \"source\": \"%s\"}]}]}\n",
        spec_path, spec->sizes[0].name, best, wrong_path);
    print_message ("e2e batch: softmax size %s, candidate %s (%zu configs) + wrong\n",
                   spec->sizes[0].name, best, best_n);
    char *path = ak_test_write (s_ctx.dir, "e2e.json", text);
    assert_non_null (path);
    free (text);
    ak_spec_destroy (&spec);
    free (spec_path);
    free (wrong_path);
    return path;
}

/*  Starts the coordinator and the workers and waits for them.  Runs inside
    the test (not as a cmocka setup) so that the teardown, which stops
    whatever did start, runs even when starting fails. */
static void s_start (void)
{
    s_ctx.dir = ak_test_tmpdir ("e2e");
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
                      "--log-level", "debug", NULL };
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
        snprintf (id, sizeof id, "e2e-w%d", i + 1);
        char *cache = ak_sprintf ("%s/cache-%s", s_ctx.dir, id);
        char *wlog = ak_sprintf ("%s/%s.log", s_ctx.dir, id);
        char *wargv[] = { worker, "--coordinator", workers_ep, "--id", id, "--cache", cache,
                          "--log-level", "debug", NULL };
        s_ctx.workers[i] = ak_test_spawn (wargv, wlog);
        assert_true (s_ctx.workers[i] > 0);
        free (cache);
        free (wlog);
    }
    if (!ak_test_wait (s_workers_alive, NULL, S_START_MS)) {
        s_dump_log ("e2e-w1.log");
        s_dump_log ("e2e-w2.log");
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
    int status;
    for (int i = 0; i < 2; i++)
        if (s_ctx.workers[i] > 0) {
            status = ak_test_stop (s_ctx.workers[i], SIGTERM, 10000);
            if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
                print_message ("e2e-w%d ended with status 0x%x\n", i + 1, status);
        }
    if (s_ctx.coord > 0) {
        status = ak_test_stop (s_ctx.coord, SIGTERM, 10000);
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            print_message ("akcoord ended with status 0x%x\n", status);
            s_dump_log ("akcoord.log");
        }
    }
    if (s_ctx.dir)
        ak_test_rmtree (s_ctx.dir);
    free (s_ctx.dir);
    free (s_ctx.akctl);
    free (s_ctx.batch_id);
    memset (&s_ctx, 0, sizeof s_ctx);
    return 0;
}

/* ---------------------------------------------------------------- test */

/*  Every task of the batch: exactly one accepted receipt, and `show`
    agrees (state terminal, receipt_id that receipt, one non-duplicate
    among its receipts).  Returns how many tasks of candidate "wrong" were
    seen failing with wrong_answer. */
static int s_check_receipts (int64_t total)
{
    char *args = ak_sprintf ("receipts %s", s_ctx.batch_id);
    json_t *answer = s_akctl_json (args);
    free (args);
    assert_non_null (answer);
    json_t *receipts = json_object_get (answer, "receipts");
    assert_true (json_is_array (receipts));

    json_t *accepted = json_object ();         /* task_id -> receipt */
    size_t i;
    json_t *r;
    json_array_foreach (receipts, i, r) {
        assert_string_equal (s_str (r, "batch_id"), s_ctx.batch_id);
        if (s_bool (r, "duplicate"))
            continue;
        const char *task = s_str (r, "task_id");
        if (json_object_get (accepted, task))
            fail_msg ("task %s has two accepted receipts (%s and %s)", task,
                      s_str (json_object_get (accepted, task), "receipt_id"), s_str (r, "receipt_id"));
        json_object_set (accepted, task, r);
    }
    if ((int64_t) json_object_size (accepted) != total)
        fail_msg ("%zu tasks have an accepted receipt, the batch has %lld",
                  json_object_size (accepted), (long long) total);

    int wrong = 0;
    const char *task;
    json_object_foreach (accepted, task, r) {
        args = ak_sprintf ("show %s", task);
        json_t *shown = s_akctl_json (args);
        free (args);
        assert_non_null (shown);
        json_t *rec = json_object_get (shown, "task");
        const char *state = s_str (rec, "state");
        if (strcmp (state, "done") != 0 && strcmp (state, "failed") != 0)
            fail_msg ("task %s is %s, expected done or failed", task, state);
        assert_string_equal (s_str (rec, "receipt_id"), s_str (r, "receipt_id"));
        size_t j, nonduplicate = 0;
        json_t *sr;
        json_array_foreach (json_object_get (shown, "receipts"), j, sr)
            nonduplicate += !s_bool (sr, "duplicate");
        if (nonduplicate != 1)
            fail_msg ("show %s lists %zu accepted receipts", task, nonduplicate);

        if (strcmp (s_str (r, "candidate_name"), "wrong") == 0) {
            if (strcmp (s_str (r, "status"), "wrong_answer") != 0 || strcmp (state, "failed") != 0)
                fail_msg ("the wrong candidate's task %s is %s with status %s (%s), expected "
                          "failed with wrong_answer", task, state, s_str (r, "status"),
                          s_str (r, "reason"));
            wrong++;
        }
        else
        if (strcmp (s_str (r, "kind"), "preflight") == 0 && strcmp (s_str (r, "status"), "ok") != 0)
            fail_msg ("preflight %s failed: %s (%s)", task, s_str (r, "status"), s_str (r, "reason"));
        json_decref (shown);
    }
    json_decref (accepted);
    json_decref (answer);
    return wrong;
}

static void test_e2e_batch (void **state)
{
    (void) state;
    s_start ();
    char *manifest = s_write_manifest ();
    char *args = ak_sprintf ("submit '%s'", manifest);
    char *out = NULL;
    int code = s_akctl (args, &out);
    if (code != 0)
        fail_msg ("akctl %s: exit %d: %s", args, code, out ? out : "");
    size_t n = strcspn (out, "\n");
    out[n] = '\0';
    s_ctx.batch_id = out;
    assert_true (n > 0);
    free (args);
    free (manifest);

    if (!ak_test_wait (s_batch_finished, NULL, S_BATCH_MS)) {
        s_akctl ("status", NULL);
        s_dump_log ("akcoord.log");
        fail_msg ("batch %s did not finish within %d ms", s_ctx.batch_id, S_BATCH_MS);
    }
    args = ak_sprintf ("status %s", s_ctx.batch_id);
    json_t *sum = s_akctl_json (args);
    free (args);
    assert_non_null (sum);
    assert_string_equal (s_str (sum, "state"), "complete");
    json_t *total = json_object_get (sum, "total");
    assert_true (json_is_integer (total) && json_integer_value (total) >= 3);
    json_t *counts = json_object_get (sum, "counts");
    assert_int_equal (json_integer_value (json_object_get (counts, "poisoned")), 0);
    assert_int_equal (json_integer_value (json_object_get (counts, "cancelled")), 0);
    assert_true (json_integer_value (json_object_get (counts, "failed")) >= 1);

    int wrong = s_check_receipts (json_integer_value (total));
    assert_int_equal (wrong, 1);
    json_decref (sum);

    /* The human report names a winner (or "baseline kept") for softmax. */
    args = ak_sprintf ("report %s", s_ctx.batch_id);
    code = s_akctl (args, &out);
    free (args);
    if (code != 0 || !strstr (out, "softmax on host") || !strstr (out, "winner: "))
        fail_msg ("akctl report: exit %d, no winner line for softmax:\n%s", code, out);
    assert_non_null (strstr (out, "wrong_answer"));
    free (out);
    args = ak_sprintf ("report --markdown %s", s_ctx.batch_id);
    code = s_akctl (args, &out);
    free (args);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "## softmax on host"));
    assert_non_null (strstr (out, "**Winner:**"));
    free (out);

    /* Both workers are still there and alive. */
    assert_true (s_workers_alive (NULL));

    /* watch on a finished batch returns at once with 0. */
    args = ak_sprintf ("watch %s", s_ctx.batch_id);
    code = s_akctl (args, &out);
    free (args);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "complete"));
    free (out);

    /* Unknown ids are exit code 4. */
    assert_int_equal (s_akctl ("status B999999 2>/dev/null", NULL), 4);
    assert_int_equal (s_akctl ("show B999999.T9999 2>/dev/null", NULL), 4);

    /* A clean stop: workers on SIGTERM, the coordinator on `akctl shutdown`,
       each exits 0. */
    for (int i = 0; i < 2; i++) {
        int status = ak_test_stop (s_ctx.workers[i], SIGTERM, 10000);
        s_ctx.workers[i] = 0;
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            s_dump_log (i ? "e2e-w2.log" : "e2e-w1.log");
            fail_msg ("e2e-w%d ended with status 0x%x after SIGTERM", i + 1, status);
        }
    }
    assert_int_equal (s_akctl ("shutdown > /dev/null", NULL), 0);
    int status = ak_test_stop (s_ctx.coord, 0, 10000);
    s_ctx.coord = 0;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        s_dump_log ("akcoord.log");
        fail_msg ("akcoord ended with status 0x%x after shutdown", status);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_e2e_batch, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
