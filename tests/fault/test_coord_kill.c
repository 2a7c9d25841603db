/*  tests/fault/test_coord_kill.c: kill -9 the coordinator three times
    while akload's simulated workers run a batch of 601 tasks, starting it
    again each time on the same store.

    Proves: the batch completes; every task has exactly one accepted
    receipt (checked through `akctl receipts --json`, the client API and
    the LMDB store itself); nothing acknowledged to a worker is missing
    from the store; copies re-sent after the restarts are stored flagged
    duplicate and counted in their task, never as results; `resume` after
    a restart takes back only what nobody runs and is idempotent. */
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "util.h"

#define S_TUNE   600        /* + 1 preflight */
#define S_KILLS  3

static ak_fault_coord_t *s_c;

/* After a failure: the end of the coordinator's log, then clean up. */
static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 60);
    return 0;
}

static void test_kill_coordinator_three_times (void **state)
{
    const char *flags[] = { "--heartbeat-ms", "200", "--liveness", "3", "--commit-ms", "5",
                            "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new ("fault-coord-kill", NULL, flags);
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "kill", S_TUNE,
                                         "\"lease_ms\": 4000, \"max_attempts\": 20");
    char *batch = ak_fault_submit (c, bundle);
    int64_t total = S_TUNE + 1;

    char *akload = ak_test_bin ("akload");
    char *stats = ak_path_join (c->dir, "akload.json");
    char *load_log = ak_path_join (c->dir, "akload.log");
    char *argv[] = { akload, "--coordinator", c->workers, "--workers", "6", "--prefix", "sim",
                     "--slots", "1", "--prefetch", "1", "--task-ms", "50", "--heartbeat-ms", "200",
                     "--backoff-ms", "100", "--stats-json", stats, "--log-level", "warn", NULL };
    pid_t load = ak_fault_spawn (argv, load_log);
    assert_true (load > 0);

    uint64_t t0 = ak_fault_now_ms ();
    int64_t at_kill[S_KILLS];
    for (int k = 0; k < S_KILLS; k++) {
        /* kill while the batch is well under way and far from its end */
        int64_t target = total * (k + 1) / (S_KILLS + 2);
        uint64_t until = ak_fault_now_ms () + 60000;
        int64_t done = 0;
        while ((done = ak_fault_count (c, batch, "done")) < target && ak_fault_now_ms () < until)
            ak_test_sleep_ms (20);
        if (done < target)
            fail_msg ("kill %d: only %lld of %lld tasks done after 60 s", k + 1, (long long) done,
                      (long long) target);
        at_kill[k] = done;
        int status = ak_fault_coord_kill (c, SIGKILL);
        assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
        ak_fault_coord_start (c);
    }
    assert_true (at_kill[S_KILLS - 1] < total);

    /* resume right after the last restart: it takes back the leases nobody
       claims (yet), and a second call finds nothing more to take */
    char *out = NULL;
    char *args = ak_sprintf ("resume %s --json", batch);
    assert_int_equal (ak_fault_akctl (c, args, &out), 0);
    json_error_t jerr;
    json_t *r1 = json_loads (out, 0, &jerr);
    assert_non_null (r1);
    free (out);
    assert_int_equal (ak_fault_akctl (c, args, &out), 0);
    json_t *r2 = json_loads (out, 0, &jerr);
    assert_non_null (r2);
    free (out);
    free (args);
    fprintf (stderr, "resume after the last restart: %zu re-queued, %lld running; again: %zu re-queued\n",
             json_array_size (json_object_get (r1, "requeued")),
             (long long) json_integer_value (json_object_get (r1, "running")),
             json_array_size (json_object_get (r2, "requeued")));
    assert_int_equal (json_array_size (json_object_get (r2, "requeued")), 0);
    assert_int_equal (json_array_size (json_object_get (r2, "poisoned")), 0);
    json_decref (r1);
    json_decref (r2);

    ak_fault_wait_complete (c, batch, 60000);
    uint64_t took = ak_fault_now_ms () - t0;

    /* the simulated workers stop and say what they saw */
    int status = ak_fault_stop (load, SIGTERM, 10000);
    assert_true (WIFEXITED (status));
    int64_t acks = ak_fault_akload_count (stats, "acks_received");
    int64_t dup_acks = ak_fault_akload_count (stats, "duplicates_acked");

    /* through akctl: one accepted receipt per task */
    args = ak_sprintf ("receipts %s --json", batch);
    assert_int_equal (ak_fault_akctl (c, args, &out), 0);
    free (args);
    json_t *rs = json_loads (out, 0, &jerr);
    if (!rs)
        fail_msg ("akctl receipts --json: %s", jerr.text);
    free (out);
    size_t nrs = json_array_size (json_object_get (rs, "receipts"));
    json_decref (rs);
    size_t dups = 0;
    size_t accepted = ak_fault_check_receipts (c, batch, &dups);
    assert_int_equal (accepted, (size_t) total);
    assert_int_equal (nrs, accepted + dups);
    assert_int_equal (ak_fault_count (c, batch, "done"), total);

    /* the log (all four coordinators) says once per task that it is done;
       only a kill between a commit and its log lines can leave one out */
    char *log = NULL;
    size_t loglen = 0;
    int unlogged = 0;
    assert_int_equal (ak_file_read (c->log, 256u << 20, &log, &loglen, NULL), 0);
    for (int64_t i = 1; i <= total; i++) {
        char needle[64];
        snprintf (needle, sizeof needle, "task %s.%04lld done: receipt", batch, (long long) i);
        int n = 0;
        for (const char *p = log; (p = strstr (p, needle)); p++)
            n++;
        if (n > 1)
            fail_msg ("the coordinators logged '%s' %d times", needle, n);
        unlogged += n == 0;
    }
    free (log);
    assert_true (unlogged <= S_KILLS * 256);      /* at most the commits the kills cut short */

    /* the store itself, with the coordinator stopped cleanly */
    status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.tasks, (size_t) total);
    assert_int_equal (tally.accepted, (size_t) total);
    assert_int_equal (tally.duplicates, dups);
    /* every ack a worker got is for a stored receipt, and no worker was
       told twice that its result counted */
    assert_true ((size_t) acks <= tally.receipts);
    assert_true (acks - dup_acks <= total);
    fprintf (stderr, "%d kills at %lld/%lld/%lld done of %lld; complete in %llu ms; %zu receipts stored: "
             "%zu accepted, %zu duplicates; workers got %lld acks (%lld duplicate); %d tasks done "
             "in a commit a kill cut off before its log lines\n",
             S_KILLS, (long long) at_kill[0], (long long) at_kill[1], (long long) at_kill[2],
             (long long) total, (unsigned long long) took, tally.receipts, tally.accepted,
             tally.duplicates, (long long) acks, (long long) dup_acks, unlogged);

    free (load_log);
    free (stats);
    free (akload);
    free (batch);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_kill_coordinator_three_times, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
