/*  tests/fault/test_store_faults.c: the store under pressure.

    1. The LMDB map fills up (a coordinator started with a tiny --map-size
       and --map-max) while akload's workers deliver receipts: commits fail
       with a clear "store full" error (stats, log), nothing is acked or
       counted meanwhile, the coordinator keeps answering, the store stays
       consistent, and after a restart with a larger --map-max the batch
       completes with exactly one accepted receipt per task.
    1b. The disk fills up (a file size limit put on the running coordinator:
       LMDB's writes fail as on a full disk): `stats` counts it (store_full,
       commits_failing) with the store named, `status` and `watch` show
       "STORE ERROR: store full ..." without the server's paths, a submit
       says "store full: ... at STORE"; once space is freed the commits go
       through and the batch completes, each task accepted once.
    2. The coordinator is killed (SIGKILL, by the fault-injection hook)
       inside a group commit, after its writes and before the commit: every
       ACK the workers saw names a receipt that is in the store afterwards,
       with the task, attempt and duplicate flag the ACK said; the rest is
       re-sent or re-run and the batch completes, each task accepted once. */
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store.h"
#include "util.h"

static ak_fault_coord_t *s_c;

static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 60);
    return 0;
}

static bool s_grep (const char *path, const char *needle)
{
    return ak_fault_occurrences (path, needle) > 0;
}

static pid_t s_akload (ak_fault_coord_t *c, const char *prefix, const char *workers, const char *task_ms,
                       const char *stats)
{
    char *bin = ak_test_bin ("akload");
    char *log = ak_path_join (c->dir, "akload.log");
    char *argv[] = { bin, "--coordinator", c->workers, "--workers", (char *) workers, "--prefix",
                     (char *) prefix, "--task-ms", (char *) task_ms, "--heartbeat-ms", "200",
                     "--backoff-ms", "100", "--stats-json", (char *) stats, "--log-level", "warn", NULL };
    pid_t pid = ak_fault_spawn (argv, log);
    assert_true (pid > 0);
    free (log);
    free (bin);
    return pid;
}

// --------------------------------------------------------------- map full

static void test_map_full_then_grown (void **state)
{
    const char *flags[] = { "--heartbeat-ms", "200", "--commit-ms", "5", "--map-size", "1M",
                            "--map-max", "1M", "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new ("fault-map-full", NULL, flags);
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "full", 1000, "\"lease_ms\": 4000, \"max_attempts\": 20");
    char *batch = ak_fault_submit (c, bundle);
    int64_t total = 1001;
    char *stats = ak_path_join (c->dir, "akload.json");
    pid_t load = s_akload (c, "full", "4", "2", stats);

    /* the map runs full: commits fail, counted, with a clear reason */
    uint64_t until = ak_fault_now_ms () + 60000;
    while (ak_fault_stat (c, "store_full", NULL) == 0 && ak_fault_now_ms () < until) {
        if (ak_fault_count (c, batch, "done") == total)
            fail_msg ("the batch completed in a 1M map: the test needs a smaller one");
        ak_test_sleep_ms (50);
    }
    json_t *st = ak_fault_json (c, "stats", NULL, NULL);
    const char *why = json_string_value (json_object_get (st, "last_commit_error"));
    fprintf (stderr, "map full after %lld commits: %s\n",
             (long long) json_integer_value (json_object_get (st, "commits")), why);
    assert_non_null (strstr (why, "store full"));
    assert_non_null (strstr (why, "--map-max"));
    assert_int_equal (json_integer_value (json_object_get (st, "map_max")), 1 << 20);
    assert_true (json_integer_value (json_object_get (st, "commit_failures")) > 0);
    json_decref (st);
    assert_true (s_grep (c->log, "store full: the map is at its limit"));

    /* it keeps answering, retries, and counts nothing without a commit */
    int64_t commits = ak_fault_stat (c, "commits", NULL);
    int64_t done = ak_fault_count (c, batch, "done");
    assert_true (done >= 0 && done < total);
    /* a retry of the commit, polled (it used to be a fixed 1.5 s) */
    until = ak_fault_now_ms () + 30000;
    while (ak_fault_stat (c, "store_full", NULL) < 2 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (50);
    assert_true (ak_fault_stat (c, "store_full", NULL) >= 2);
    if (ak_fault_stat (c, "commits", NULL) == commits)
        assert_int_equal (ak_fault_count (c, batch, "done"), done);
    done = ak_fault_count (c, batch, "done");

    /* a stop that cannot commit either exits 1, the reason in its last
       lines.  LMDB reuses the pages freed by earlier transactions once no
       reader holds them, so the stop's commit can also find room (seen
       once in three runs on a loaded box): then it exits 0 and the log says
       commits succeed again; never 0 without that line, never 1 without
       the reason */
    int status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status));
    if (WEXITSTATUS (status) == 0) {
        fprintf (stderr, "the stop's commit found room in the full map (pages reused): exit 0\n");
        assert_true (s_grep (c->log, "store commits succeed again"));
        assert_false (s_grep (c->log, "final commit failed"));
    }
    else {
        assert_int_equal (WEXITSTATUS (status), 1);
        assert_true (s_grep (c->log, "final commit failed: store full"));
    }

    /* the store is intact: LMDB's own tool (lmdb-utils, where installed)
       reads it, and every record checks */
    char *out = NULL;
    char *cmd = ak_sprintf ("command -v mdb_stat >/dev/null || exit 0; "
                            "mdb_stat -a %s >/dev/null 2>&1 || echo BROKEN", c->store);
    int rc = ak_test_run (cmd, &out);
    free (cmd);
    if (rc == 0 && out && strstr (out, "BROKEN"))
        fail_msg ("mdb_stat cannot read the store after the map filled up");
    free (out);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, false, &tally);
    fprintf (stderr, "store at the limit: %zu of %zu tasks terminal, %zu receipts\n", tally.terminal,
             tally.tasks, tally.receipts);
    assert_int_equal (tally.tasks, (size_t) total);
    assert_true (tally.accepted >= (size_t) done);      /* all it counted is stored */

    /* grown: the same store with a larger limit, and the workers re-send */
    for (int i = 0; i < c->nargs; i++)
        if (strcmp (c->args[i], "--map-max") == 0) {
            free (c->args[i + 1]);
            c->args[i + 1] = ak_strdup ("64M");
        }
    ak_fault_coord_start (c);
    ak_fault_wait_complete (c, batch, 60000);
    assert_true (ak_fault_stat (c, "map_grows", NULL) >= 1);
    assert_int_equal (ak_fault_stat (c, "store_full", NULL), 0);
    assert_int_equal (ak_fault_check_receipts (c, batch, NULL), (size_t) total);
    status = ak_fault_stop (load, SIGTERM, 10000);
    assert_true (WIFEXITED (status));
    status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.accepted, (size_t) total);
    assert_true ((size_t) ak_fault_akload_count (stats, "acks_received") <= tally.receipts);
    fprintf (stderr, "after growing: complete, %zu receipts (%zu duplicates)\n", tally.receipts,
             tally.duplicates);

    free (stats);
    free (batch);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
}

// --------------------------------------------------------------- disk full

/* Puts a file size limit (RLIMIT_FSIZE: what `ulimit -f` and systemd's
   LimitFSIZE= set) on a running coordinator: the store's writes past it
   fail as on a full disk (LMDB's short write, EIO), with no root and no
   small file system needed.  RLIM_INFINITY lifts it ("space freed"). */
static void s_fsize_limit (pid_t pid, rlim_t bytes)
{
    struct rlimit now;
    assert_int_equal (prlimit (pid, RLIMIT_FSIZE, NULL, &now), 0);
    struct rlimit rl = { bytes, now.rlim_max };
    assert_int_equal (prlimit (pid, RLIMIT_FSIZE, &rl, NULL), 0);
}

static void test_disk_full_then_freed (void **state)
{
    /* warn: the log stays smaller than the store, so it is still written */
    const char *flags[] = { "--heartbeat-ms", "200", "--commit-ms", "5", "--map-size", "64M",
                            "--log-level", "warn", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new ("fault-disk-full", NULL, flags);
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "disk", 1000, "\"lease_ms\": 4000, \"max_attempts\": 20");
    char *batch = ak_fault_submit (c, bundle);
    int64_t total = 1001;
    char *stats = ak_path_join (c->dir, "akload.json");
    pid_t load = s_akload (c, "disk", "4", "2", stats);
    uint64_t until = ak_fault_now_ms () + 60000;
    while (ak_fault_count (c, batch, "done") < 50 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (20);

    /* the disk fills up: the store cannot grow past its size now */
    char *data = ak_path_join (c->store, "data.mdb");
    struct stat st;
    assert_int_equal (stat (data, &st), 0);
    s_fsize_limit (c->pid, (rlim_t) st.st_size);
    until = ak_fault_now_ms () + 60000;
    while (ak_fault_stat (c, "store_full", NULL) == 0 && ak_fault_now_ms () < until) {
        if (ak_fault_count (c, batch, "done") == total)
            fail_msg ("the batch completed without growing its store");
        ak_test_sleep_ms (50);
    }

    /* counted, with the reason and the store in stats (an operator's) */
    json_t *j = ak_fault_json (c, "stats", NULL, NULL);
    const char *why = json_string_value (json_object_get (j, "last_commit_error"));
    fprintf (stderr, "disk full: %s\n", why);
    assert_non_null (strstr (why, "store full: "));
    assert_non_null (strstr (why, c->store));
    assert_true (json_integer_value (json_object_get (j, "store_full")) >= 1);
    assert_true (json_integer_value (json_object_get (j, "commits_failing")) >= 1);
    assert_true (json_integer_value (json_object_get (j, "commits_failing_since_ms")) > 0);
    json_decref (j);
    /* status (a viewer's too) says it, without the server's paths */
    j = ak_fault_json (c, "status", batch, NULL);
    json_t *se = json_object_get (j, "store_error");
    assert_non_null (se);
    const char *said = json_string_value (json_object_get (se, "error"));
    assert_non_null (strstr (said, "store full: "));
    assert_non_null (strstr (said, "commits fail"));
    assert_null (strstr (said, c->dir));
    assert_true (json_integer_value (json_object_get (se, "since_ms")) > 0);
    assert_true (json_integer_value (json_object_get (se, "failures")) >= 1);
    json_decref (j);
    char *out = NULL;
    char *args = ak_sprintf ("status %s", batch);
    assert_int_equal (ak_fault_akctl (c, args, &out), 0);
    assert_non_null (strstr (out, "STORE ERROR: store full"));
    free (out);
    free (args);
    args = ak_sprintf ("watch %s & p=$!; sleep 1; kill $p; wait $p", batch);
    ak_fault_akctl (c, args, &out);
    assert_non_null (out);
    assert_non_null (strstr (out, "STORE ERROR: store full"));
    free (out);
    free (args);
    /* a submit on the full disk says so, naming the store */
    json_t *none = NULL;
    char *error = NULL;
    int rc = ak_fault_call (c, 20000, "submit", "allow-unserved", NULL, bundle, &none, &error);
    assert_int_equal (rc, AK_ENOSPACE);
    fprintf (stderr, "submit on a full disk: %s\n", error);
    assert_int_equal (strncmp (error, "store full: ", 12), 0);     /* not "mdb_txn_commit: ..." */
    assert_non_null (strstr (error, c->store));
    free (error);
    json_decref (none);

    /* space freed: the commits go through, the batch completes, the error
       is gone and the count stays */
    s_fsize_limit (c->pid, RLIM_INFINITY);
    ak_fault_wait_complete (c, batch, 120000);
    j = ak_fault_json (c, "status", batch, NULL);
    assert_null (json_object_get (j, "store_error"));
    json_decref (j);
    assert_true (ak_fault_stat (c, "store_full", NULL) >= 1);
    assert_int_equal (ak_fault_stat (c, "commits_failing", NULL), 0);
    assert_int_equal (ak_fault_check_receipts (c, batch, NULL), (size_t) total);
    int status = ak_fault_stop (load, SIGTERM, 10000);
    assert_true (WIFEXITED (status));
    status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.accepted, (size_t) total);
    fprintf (stderr, "after freeing space: complete, %zu receipts (%zu duplicates)\n", tally.receipts,
             tally.duplicates);

    free (data);
    free (stats);
    free (batch);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
}

// ------------------------------------------------------- crash in a commit

typedef struct {
    ak_fault_coord_t *c;
} s_dead_t;

static bool s_coord_dead (void *arg)
{
    s_dead_t *d = arg;
    return !ak_fault_alive (d->c->pid);
}

/* The receipt ack names, as the store has it now. */
static void s_check_ack (ak_txn_t *txn, const ak_fault_ack_t *a)
{
    Ak__Receipt *r = NULL;
    ak_err_t err = { 0 };
    if (ak_store_get_receipt (txn, a->receipt_id, &r, &err) != 0)
        fail_msg ("%s#%u was acked as %s, which the store does not have: %s", a->task_id, a->attempt,
                  a->receipt_id, err.msg);
    if (strcmp (r->task_id, a->task_id) != 0 || r->attempt != a->attempt || r->duplicate != a->duplicate)
        fail_msg ("ack %s said %s#%u%s; the store says %s#%u%s", a->receipt_id, a->task_id, a->attempt,
                  a->duplicate ? " (duplicate)" : "", r->task_id, r->attempt,
                  r->duplicate ? " (duplicate)" : "");
    ak__receipt__free_unpacked (r, NULL);
}

static void test_kill_inside_group_commit (void **state)
{
    /* group commits of up to 32 receipts, at most 30 ms apart: 301 tasks
       take ten or more */
    const char *flags[] = { "--heartbeat-ms", "200", "--commit-ms", "30", "--commit-max", "32",
                            "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new ("fault-commit-kill", NULL, flags);
    c->env = ak_strdup ("AKCOORD_FAULT_KILL_IN_COMMIT=4");
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "commit", 300, "\"lease_ms\": 3000, \"max_attempts\": 20");
    char *batch = ak_fault_submit (c, bundle);

    ak_fault_sim_t *sim = ak_fault_sim_new (c->workers, 8, "sim", 1000);
    s_dead_t d = { c };
    ak_fault_sim_run (sim, 30000, s_coord_dead, &d);
    if (ak_fault_alive (c->pid))
        fail_msg ("the coordinator did not kill itself inside commit 4");
    c->pid = 0;
    assert_true (s_grep (c->log, "fault injection: SIGKILL inside commit 4"));
    const ak_fault_ack_t *acks = NULL;
    size_t nacks = ak_fault_sim_acks (sim, &acks);
    assert_true (nacks > 0);

    /* with the coordinator dead: every ack names a stored receipt */
    ak_store_t *store = NULL;
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_open (c->store, NULL, &store, &err), 0);
    assert_int_equal (ak_store_begin (store, false, &txn, &err), 0);
    uint64_t stored = 0;
    assert_int_equal (ak_store_count (txn, AK_DB_RECEIPTS, &stored, &err), 0);
    for (size_t i = 0; i < nacks; i++)
        s_check_ack (txn, &acks[i]);
    ak_store_abort (&txn);
    ak_store_destroy (&store);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, false, &tally);
    fprintf (stderr, "killed inside commit 4: the workers saw %zu acks, the store holds %llu receipts "
             "(%zu accepted)\n", nacks, (unsigned long long) stored, tally.accepted);
    assert_true (nacks <= stored);

    /* restarted (no hook): the same workers re-send, the batch completes */
    ak_fault_coord_start (c);
    json_t *r = ak_fault_json (c, "resume", batch, NULL);
    json_decref (r);
    char bstate[32];
    uint64_t until = ak_fault_now_ms () + 60000;
    while (strcmp (ak_fault_batch_state (c, batch, bstate, sizeof bstate), "complete") != 0) {
        if (ak_fault_now_ms () > until)
            fail_msg ("batch %s not complete 60 s after the restart (%s)", batch, bstate);
        ak_fault_sim_run (sim, 200, NULL, NULL);
    }
    nacks = ak_fault_sim_acks (sim, &acks);
    assert_int_equal (ak_fault_check_receipts (c, batch, NULL), 301);
    int status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.accepted, 301);
    assert_int_equal (ak_store_open (c->store, NULL, &store, &err), 0);
    assert_int_equal (ak_store_begin (store, false, &txn, &err), 0);
    for (size_t i = 0; i < nacks; i++)
        s_check_ack (txn, &acks[i]);
    ak_store_abort (&txn);
    ak_store_destroy (&store);
    fprintf (stderr, "after the restart: complete; all %zu acks match the store (%zu receipts, %zu duplicates)\n",
             nacks, tally.receipts, tally.duplicates);
    ak_fault_sim_destroy (&sim);
    free (batch);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_map_full_then_grown, s_teardown),
        cmocka_unit_test_teardown (test_disk_full_then_freed, s_teardown),
        cmocka_unit_test_teardown (test_kill_inside_group_commit, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
