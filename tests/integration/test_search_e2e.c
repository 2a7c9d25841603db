/*  tests/integration/test_search_e2e.c: successive halving and the
    confirmation round through the real system (akcoord, two akworker
    processes on loopback, akctl).

    The batch samples 4 of the 7 valid configurations of softmax's host
    candidate; the test checks, only through `akctl --json`, that the batch
    completes with 4 stage-1 and 2 stage-2 tune tasks (the two stage-2
    configurations among the stage-1 ones, timed with the full policy),
    that the finalists were re-measured in confirm tasks on the other
    worker than the one that measured them, and that the winner says
    where it was confirmed (on a box so loaded that the timings are too
    noisy for a provisional winner there is no confirm task, and the
    winner must say why); then, the winner installed (`profile install
    --unconfirmed`), the same batch with policy.search.installed takes
    its configuration as a seed ("1 of them seeds, 1 from installed
    profiles"); where the first winner was not promoted (so cannot be
    installed), the batch runs again, up to twice, for one that is.  The
    workers get --cache as a relative path (a user's `--cache cache`,
    which failed every task until the worker made it absolute: its jobs
    run in scratch directories of their own).
    Everything it starts is stopped at the end. */
#include "support.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spec.h"
#include "util.h"

#define S_START_MS   30000         /* coordinator answering, workers registered */
#define S_BATCH_MS   240000        /* the batch finishing (sanitizer builds are slow: the test took 280 s at load 17) */

static ak_test_cluster_t s_c;
static char *s_batch_id;
/* heartbeats every 500 ms (1 s by default): after the coordinator is
   killed the workers give it up and register with the new one after 3 of
   them, not after 3 s */
static const char *const s_debug[] = { "--log-level", "debug", "--heartbeat-ms", "500", NULL };

/* ------------------------------------------------------------- helpers */

static const char *s_str (const json_t *obj, const char *key)
{
    const json_t *v = json_object_get (obj, key);
    return json_is_string (v) ? json_string_value (v) : "";
}

static bool s_bool (const json_t *obj, const char *key)
{
    return json_is_true (json_object_get (obj, key));
}

/* --------------------------------------------------------------- setup */

/*  softmax on host, one small size, the vectorized host candidate (7
    valid configurations) with a budget of 4: halving, 4 short-timed stage-1
    tasks, the best 2 timed in full, then the confirmation round. */
static char *s_write_manifest (bool installed)
{
    char *spec_path = ak_test_src ("kernels/softmax/spec.json");
    char *text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"search\", \"targets\": [\"host\"],\n"
        " \"policy\": {\"max_attempts\": 2, \"warmup\": 1, \"min_samples\": 3, \"max_samples\": 20,\n"
        "            \"max_time_ms\": 150, \"rsd_target\": 0.05, \"lease_ms\": 120000,\n"
        "            \"search\": {\"budget\": 4, \"keep\": 2, \"short_max_time_ms\": 40%s}},\n"
        " \"ops\": [{\"spec\": \"%s\", \"workloads\": [\"small\"], \"candidates\": [\"vectorized\"]}]}\n",
        installed ? ", \"installed\": true" : "", spec_path);
    char *path = ak_test_write (s_c.dir, installed ? "search-installed.json" : "search.json", text);
    assert_non_null (path);
    free (text);
    free (spec_path);
    return path;
}

/*  Starts the coordinator and the workers, waits for them and submits
    the batch.  Runs inside the test (not as a cmocka setup) so that the
    teardown, which stops whatever did start, runs even when starting fails. */
static void s_start_and_submit (void)
{
    ak_test_cluster_init (&s_c, "search-e2e", true);
    s_c.relative_cache = true;          /* a user's `--cache cache`: it once failed every task */
    ak_test_cluster_coord (&s_c, NULL, NULL, s_debug, S_START_MS);
    ak_test_cluster_workers (&s_c, "sr-w", 2, s_debug, S_START_MS);
    char *manifest = s_write_manifest (false);
    s_batch_id = ak_test_submit (&s_c, "submit '%s'", manifest);
    free (manifest);
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

static int64_t s_int (const json_t *obj, const char *key)
{
    const json_t *v = json_object_get (obj, key);
    if (json_is_integer (v))
        return json_integer_value (v);
    if (json_is_string (v))
        return strtoll (json_string_value (v), NULL, 10);
    return 0;
}

static char *s_params (const json_t *task)
{
    char buf[256] = "";
    size_t i, used = 0;
    json_t *p;
    json_array_foreach (json_object_get (task, "params"), i, p)
        used += (size_t) snprintf (buf + used, sizeof buf - used, "%s=%lld ", s_str (p, "name"),
                                   (long long) s_int (p, "value"));
    return ak_strdup (buf);
}

static void test_halving_and_confirm (void **state)
{
    (void) state;
    s_start_and_submit ();
    json_t *sum = ak_test_batch_wait (&s_c, s_batch_id, S_BATCH_MS);
    assert_string_equal (s_str (sum, "state"), "complete");
    json_t *search = json_array_get (json_object_get (sum, "search"), 0);
    assert_string_equal (s_str (search, "strategy"), "halving");
    assert_int_equal (s_int (search, "valid"), 7);
    assert_int_equal (s_int (search, "sampled"), 4);
    assert_int_equal (s_int (search, "keep"), 2);
    int64_t total = s_int (sum, "total");

    /* every task through `show`: stages, policies, confirm placement */
    json_t *tasks = json_object ();
    int stage1 = 0, stage2 = 0, confirms = 0, other_worker = 0;
    for (int64_t i = 1; i <= total; i++) {
        json_t *shown = ak_test_akctl_json (&s_c, "show %s.%04lld", s_batch_id, (long long) i);
        assert_non_null (shown);
        json_t *t = json_object_get (shown, "task");
        assert_string_equal (s_str (t, "state"), "done");
        json_object_set (tasks, s_str (t, "task_id"), t);
        json_decref (shown);
    }
    const char *id;
    json_t *t;
    char *kept[2] = { NULL, NULL };
    json_object_foreach (tasks, id, t) {
        const json_t *pol = json_object_get (t, "policy");
        if (strcmp (s_str (t, "kind"), "tune") == 0 && s_int (t, "stage") == 1) {
            stage1++;
            assert_int_equal (s_int (pol, "max_time_ms"), 40);
        }
        else if (strcmp (s_str (t, "kind"), "tune") == 0) {
            assert_int_equal (s_int (t, "stage"), 2);
            assert_int_equal (s_int (pol, "max_time_ms"), 150);
            assert_true (stage2 < 2);
            kept[stage2++] = s_params (t);
        }
        else if (strcmp (s_str (t, "kind"), "confirm") == 0) {
            confirms++;
            const json_t *orig = json_object_get (tasks, s_str (t, "confirm_of"));
            assert_non_null (orig);
            assert_string_equal (s_str (t, "avoid_worker"), s_str (orig, "worker_id"));
            char *a = s_params (t), *b = s_params (orig);
            assert_string_equal (a, b);                 /* the same configuration */
            free (a);
            free (b);
            assert_true (s_int (pol, "seed") != s_int (json_object_get (orig, "policy"), "seed"));
            print_message ("confirm %s of %s: measured on %s, confirmed on %s\n", id,
                           s_str (t, "confirm_of"), s_str (orig, "worker_id"), s_str (t, "worker_id"));
            other_worker += strcmp (s_str (t, "worker_id"), s_str (orig, "worker_id")) != 0;
        }
    }
    assert_int_equal (stage1, 4);
    assert_int_equal (stage2, 2);
    /* the kept configurations are among the sampled ones */
    for (int k = 0; k < 2; k++) {
        bool found = false;
        json_object_foreach (tasks, id, t)
            if (s_int (t, "stage") == 1) {
                char *p = s_params (t);
                found |= strcmp (p, kept[k]) == 0;
                free (p);
            }
        assert_true (found);
        free (kept[k]);
    }
    /* the vectorized candidate beats the libm baseline by far: a
       provisional winner, so at least one confirm task, each on the
       worker that did not measure it (both were live); none only when
       the timings were too noisy for a provisional winner (a box loaded
       by other builds), which the winner then says */
    json_t *win = json_array_get (json_object_get (sum, "winners"), 0);
    print_message ("winner: promoted %d, %s\n", s_bool (win, "promoted"), s_str (win, "reason"));
    assert_int_equal (other_worker, confirms);
    if (confirms == 0) {
        print_message ("NOTE: no confirm task (too noisy for a provisional winner): "
                       "confirm placement not checked in this run\n");
        assert_false (s_bool (win, "promoted"));
        assert_non_null (strstr (s_str (win, "reason"), "by more than its noise"));
    }
    /* promoted: the reason names the worker that confirmed it, also when
       its figure disagreed (a loaded box: "confirmation disagrees: 2.54x
       on sr-w1 is 0.66 off the measured figure ..."; the lower is kept) */
    else if (s_bool (win, "promoted") && strstr (s_str (win, "reason"), "confirmation disagrees: "))
        assert_non_null (strstr (s_str (win, "reason"), " on sr-w"));
    else if (s_bool (win, "promoted"))
        assert_non_null (strstr (s_str (win, "reason"), "confirmed on sr-w"));
    else
        assert_non_null (strstr (s_str (win, "reason"), "not confirmed"));
    assert_int_equal (total, 1 + 4 + 2 + confirms);
    json_decref (tasks);

    /* the human status names the search and its rounds */
    char *out = NULL;
    assert_int_equal (ak_test_akctl (&s_c, &out, "status %s", s_batch_id), 0);
    assert_non_null (strstr (out, "vectorized halving, 4 of 7 valid sampled, keep 2 in 2 stages"));
    assert_non_null (strstr (out, "tune stage 2 2/2 finished"));
    free (out);

    /* policy.search.installed: the winner installed, the same batch again
       takes its configuration as a seed (the expansion at submit says so).
       Only a promoted winner can be installed: where the first batch's was
       not (a box too noisy; 1 run in 9 seen), the same batch runs again, up
       to twice, for one that is */
    char *inst = ak_strdup (s_batch_id);
    bool promoted = s_bool (win, "promoted");
    for (int round = 1; !promoted && round <= 2; round++) {
        char *manifest = s_write_manifest (false);
        free (inst);
        inst = ak_test_submit (&s_c, "submit '%s'", manifest);
        free (manifest);
        json_t *s3 = ak_test_batch_wait (&s_c, inst, S_BATCH_MS);
        assert_string_equal (s_str (s3, "state"), "complete");
        const json_t *w3 = json_array_get (json_object_get (s3, "winners"), 0);
        promoted = s_bool (w3, "promoted");
        print_message ("the batch again (%d of 2) for a winner to install: promoted %d, %s\n", round, promoted,
                       s_str (w3, "reason"));
        json_decref (s3);
    }
    if (!promoted)
        print_message ("NOTE: no promoted winner in three batches: policy.search.installed not checked in this "
                       "run\n");
    else {
        assert_int_equal (ak_test_akctl (&s_c, &out, "profile install %s --profile sp --unconfirmed 2>&1",
                                         inst), 0);
        free (out);
        char *again = s_write_manifest (true);
        char *b2 = ak_test_submit (&s_c, "submit '%s'", again);
        json_t *s2 = ak_test_akctl_json (&s_c, "status %s", b2);
        json_t *search2 = json_array_get (json_object_get (s2, "search"), 0);
        assert_int_equal (s_int (search2, "sampled"), 4);
        assert_int_equal (s_int (search2, "seeded"), 1);
        assert_int_equal (s_int (search2, "installed"), 1);
        json_decref (s2);
        assert_int_equal (ak_test_akctl (&s_c, &out, "status %s", b2), 0);
        assert_non_null (strstr (out, "4 of 7 valid sampled (1 of them seeds, 1 from installed profiles)"));
        free (out);
        free (again);
        free (b2);
    }
    free (inst);
    json_decref (sum);
}

/* True once `status` shows a stage-2 tune task (the stage-1 receipts
   are committed and stage 2 was created with the last of them). */
static bool s_stage2_exists (void *arg)
{
    (void) arg;
    json_t *sum = ak_test_akctl_json (&s_c, "status %s", s_batch_id);
    bool found = false;
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get (sum, "rounds"), i, r)
        found |= strcmp (s_str (r, "kind"), "tune") == 0 && s_int (r, "stage") == 2;
    json_decref (sum);
    return found;
}

/*  The coordinator is killed (SIGKILL) as soon as stage 2 exists and
    started again on the same store: the batch completes with exactly the
    2 stage-2 tasks created before the kill (none made twice), every task
    with one accepted receipt. */
static void test_restart_between_stages (void **state)
{
    (void) state;
    s_start_and_submit ();
    if (!ak_test_wait (s_stage2_exists, NULL, S_BATCH_MS)) {
        ak_test_cluster_dump (&s_c, "akcoord.log");
        fail_msg ("batch %s never reached stage 2", s_batch_id);
    }
    int status = ak_test_stop (s_c.coord, SIGKILL, 10000);
    s_c.coord = 0;
    assert_true (WIFSIGNALED (status));
    /* the same store and endpoints; the batch must finish after it */
    ak_test_cluster_coord (&s_c, NULL, "akcoord-2.log", s_debug, S_START_MS);
    json_t *sum = ak_test_batch_wait (&s_c, s_batch_id, S_BATCH_MS);
    assert_string_equal (s_str (sum, "state"), "complete");
    int stage[3] = { 0, 0, 0 };
    int64_t confirms = 0;
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get (sum, "rounds"), i, r) {
        assert_int_equal (s_int (r, "finished"), s_int (r, "total"));
        if (strcmp (s_str (r, "kind"), "confirm") == 0)
            confirms += s_int (r, "total");
        else if (s_int (r, "stage") >= 0 && s_int (r, "stage") < 3)
            stage[s_int (r, "stage")] += (int) s_int (r, "total");
    }
    if (stage[0] != 0 || stage[1] != 4 || stage[2] != 2 || confirms > 2) {
        char *text = json_dumps (sum, JSON_INDENT (1));
        print_message ("status of %s after the restart:\n%s\n", s_batch_id, text ? text : "");
        free (text);
        ak_test_cluster_dump (&s_c, "akcoord-2.log");
    }
    assert_int_equal (stage[0], 0);
    assert_int_equal (stage[1], 4);
    assert_int_equal (stage[2], 2);
    /* at most one confirm task per finalist, none made twice; none at all
       only when the timings were too noisy for a provisional winner (a
       box loaded by other builds: "2.47x +- 1.51, not beyond the 3%
       threshold by more than its noise"), which the winner then says */
    assert_true (confirms <= 2);
    if (confirms == 0) {
        const char *why = s_str (json_array_get (json_object_get (sum, "winners"), 0), "reason");
        print_message ("no confirm task after the restart: %s\n", why);
        assert_non_null (strstr (why, "by more than its noise"));
    }
    assert_int_equal (s_int (sum, "total"), 1 + 4 + 2 + confirms);
    /* one accepted receipt per task, whatever the kill cut short */
    json_t *answer = ak_test_akctl_json (&s_c, "receipts %s", s_batch_id);
    json_t *accepted = json_object ();
    json_array_foreach (json_object_get (answer, "receipts"), i, r) {
        if (s_bool (r, "duplicate"))
            continue;
        if (json_object_get (accepted, s_str (r, "task_id")))
            fail_msg ("task %s has two accepted receipts", s_str (r, "task_id"));
        json_object_set_new (accepted, s_str (r, "task_id"), json_true ());
    }
    assert_int_equal ((int64_t) json_object_size (accepted), s_int (sum, "total"));
    json_decref (accepted);
    json_decref (answer);
    json_decref (sum);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_halving_and_confirm, s_teardown),
        cmocka_unit_test_teardown (test_restart_between_stages, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
