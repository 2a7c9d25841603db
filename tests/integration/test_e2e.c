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
#include "space.h"
#include "support.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spec.h"
#include "util.h"

#define S_START_MS   30000         /* coordinator answering, workers registered */
#define S_BATCH_MS   200000        /* the batch finishing (sanitizer builds are slow) */

static ak_test_cluster_t s_c;
static char *s_batch_id;

/* ------------------------------------------------------------- helpers */

static const char *s_str (const json_t *obj, const char *key)
{
    const json_t *v = json_object_get (obj, key);
    return json_is_string (v) ? json_string_value (v) : "";
}

/*  True once `stats` counts at least *arg ms inside timed samples over
    the workers' heartbeats, with a share in (0, 1]. */
static bool s_stats_timing (void *arg)
{
    double want = *(const double *) arg;
    json_t *st = ak_test_akctl_json (&s_c, "stats");
    json_t *t = json_object_get (st, "timing");
    double sampled = json_number_value (json_object_get (t, "sampled_ms"));
    double busy = json_number_value (json_object_get (t, "busy_ms"));
    double share = json_number_value (json_object_get (t, "gpu_timing_share"));
    double device_busy = json_number_value (json_object_get (t, "device_busy_ms"));
    bool ok = sampled >= want * (1 - 1e-9) && busy > 0 && device_busy >= sampled && share > 0 && share <= 1;
    json_decref (st);
    return ok;
}

static bool s_bool (const json_t *obj, const char *key)
{
    return json_is_true (json_object_get (obj, key));
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
    char *path = ak_test_write (s_c.dir, "e2e.json", text);
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
    const char *const debug[] = { "--log-level", "debug", NULL };
    ak_test_cluster_init (&s_c, "e2e", true);
    ak_test_cluster_coord (&s_c, NULL, NULL, debug, S_START_MS);
    ak_test_cluster_workers (&s_c, "e2e-w", 2, debug, S_START_MS);
}

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    free (s_batch_id);
    s_batch_id = NULL;
    return 0;
}

/* ---------------------------------------------------------------- test */

/*  Every task of the batch: exactly one accepted receipt, and `show`
    agrees (state terminal, receipt_id that receipt, one non-duplicate
    among its receipts).  Returns how many tasks of candidate "wrong" were
    seen failing with wrong_answer. */
static int s_check_receipts (int64_t total)
{
    json_t *answer = ak_test_akctl_json (&s_c, "receipts %s", s_batch_id);
    assert_non_null (answer);
    json_t *receipts = json_object_get (answer, "receipts");
    assert_true (json_is_array (receipts));

    json_t *accepted = json_object ();         /* task_id -> receipt */
    size_t i;
    json_t *r;
    json_array_foreach (receipts, i, r) {
        assert_string_equal (s_str (r, "batch_id"), s_batch_id);
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
        json_t *shown = ak_test_akctl_json (&s_c, "show %s", task);
        assert_non_null (shown);
        json_t *rec = json_object_get (shown, "task");
        const char *state = s_str (rec, "state");
        if (strcmp (state, "done") != 0 && strcmp (state, "failed") != 0)
            fail_msg ("task %s is %s, expected done or failed", task, state);
        assert_string_equal (s_str (rec, "receipt_id"), s_str (r, "receipt_id"));
        /* which run of its worker made it (the report's device wall time
           is counted per run): that run began before the task did */
        json_int_t run = json_integer_value (json_object_get (r, "worker_started_ms"));
        json_int_t began = json_integer_value (json_object_get (r, "started_at_ms"));
        if (run <= 0 || run > began)
            fail_msg ("receipt %s: worker_started_ms %lld, started_at_ms %lld", s_str (r, "receipt_id"),
                      (long long) run, (long long) began);
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
    s_batch_id = ak_test_submit (&s_c, "submit '%s'", manifest);
    free (manifest);

    json_t *sum = ak_test_batch_wait (&s_c, s_batch_id, S_BATCH_MS);
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
    char *out = NULL;
    int code = ak_test_akctl (&s_c, &out, "report %s", s_batch_id);
    if (code != 0 || !strstr (out, "softmax on host") || !strstr (out, "winner: "))
        fail_msg ("akctl report: exit %d, no winner line for softmax:\n%s", code, out);
    assert_non_null (strstr (out, "wrong_answer"));
    /* The GPU timing share of the batch: time inside timed samples
       against each device's wall time, from the receipts. */
    assert_non_null (strstr (out, "GPU timing share: "));
    json_t *rep = ak_test_akctl_json (&s_c, "report %s", s_batch_id);
    json_t *gt = json_object_get (rep, "gpu_timing");
    assert_non_null (gt);
    double share = json_number_value (json_object_get (gt, "share"));
    double sampled = json_number_value (json_object_get (gt, "sampled_ms"));
    double wall = json_number_value (json_object_get (gt, "device_wall_ms"));
    double task = json_number_value (json_object_get (gt, "task_ms"));
    double devices = json_number_value (json_object_get (gt, "devices"));
    if (!(sampled > 0 && wall >= sampled && task >= sampled && share > 0 && share <= 1 && devices >= 1))
        fail_msg ("gpu_timing: sampled %g ms, device wall %g ms, task %g ms, share %g, devices %g",
                  sampled, wall, task, share, devices);
    assert_true (fabs (share - sampled / wall) < 1e-9);
    /* Each worker ran once: a run per device (report_timing.h). */
    assert_true (json_number_value (json_object_get (gt, "device_runs")) == devices);
    /* The executors' wait between tasks, where the tasks did not overlap
       on a device (one slot): device wall time less task time. */
    print_message ("report: task time %.0f ms of %.0f ms device wall time over %g devices\n", task, wall, devices);
    if (task < wall)
        assert_non_null (strstr (out, "Executors idle between tasks: "));
    else
        assert_null (strstr (out, "Executors idle between tasks: "));
    free (out);
    json_decref (rep);
    /* The workers' own account (heartbeats): time inside timed samples
       against wall time with a task held, per worker and for the fleet;
       a heartbeat after the last receipt carries every sample. */
    assert_true (ak_test_wait (s_stats_timing, &sampled, 30000));
    code = ak_test_akctl (&s_c, &out, "workers");
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "GPU TIMING"));
    assert_non_null (strstr (out, "%"));
    free (out);
    code = ak_test_akctl (&s_c, &out, "report --markdown %s", s_batch_id);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "## softmax on host"));
    assert_non_null (strstr (out, "**Winner:**"));
    free (out);

    /* Both workers are still there and alive. */
    assert_true (ak_test_cluster_alive (&s_c));

    /* watch on a finished batch returns at once with 0. */
    code = ak_test_akctl (&s_c, &out, "watch %s", s_batch_id);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "complete"));
    free (out);

    /* Unknown ids are exit code 4. */
    assert_int_equal (ak_test_akctl (&s_c, NULL, "status B999999 2>/dev/null"), 4);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "show B999999.T9999 2>/dev/null"), 4);

    /* A clean stop: workers on SIGTERM, the coordinator on `akctl shutdown`,
       each exits 0. */
    ak_test_cluster_shutdown (&s_c, 10000);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_e2e_batch, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
