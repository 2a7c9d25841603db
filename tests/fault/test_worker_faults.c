/*  tests/fault/test_worker_faults.c: real akworker daemons (host backend)
    running the planted kernel kernels/testing/hang.c, which never returns,
    so a task is reliably "mid-run" when the fault strikes.

    1. kill -9 a worker mid-task: the coordinator declares it dead, the
       task runs again (attempt 2) on another worker, exactly one receipt
       is accepted (the other worker's timeout), its executor died with it.
    2. A worker finishes a task while the coordinator is down, then is
       killed -9 itself: the receipt it could not deliver waits in its
       spool (CACHE/receipts/ID) and is delivered and accepted once both
       are back; the spool is empty after the ACK.
    3. SIGSTOP a worker mid-task for longer than the liveness window: it is
       declared dead and its task runs elsewhere; after SIGCONT it registers
       again (registrations 2, alive) and, of the two receipts of that task,
       the current attempt's is accepted and the other refused (it is
       no longer that worker's to deliver), never stored. */
#include "fault.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "util.h"

#define S_HANG "B000001.0002"       /* 0001 is the preflight */

static ak_fault_coord_t *s_c;

static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 80);
    return 0;
}

static const char *s_policy =
    "\"max_attempts\": 3, \"compile_timeout_ms\": 60000, \"run_timeout_ms\": 2500,"
    " \"lease_ms\": 60000, \"warmup\": 1, \"min_samples\": 3, \"max_samples\": 5,"
    " \"rsd_target\": 0.5, \"max_time_ms\": 50, \"seed\": 42";

static ak_fault_coord_t *s_coord (const char *tag)
{
    const char *flags[] = { "--heartbeat-ms", "200", "--liveness", "3", "--commit-ms", "5",
                            "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new (tag, NULL, flags);
    ak_fault_coord_start (c);
    const char *planted[] = { "hang", NULL };
    char *bundle = ak_fault_real_bundle (c->dir, "hang", planted, s_policy);
    char *batch = ak_fault_submit (c, bundle);
    assert_string_equal (batch, "B000001");
    free (batch);
    free (bundle);
    return c;
}

static pid_t s_worker (ak_fault_coord_t *c, const char *id)
{
    char *bin = ak_test_bin ("akworker");
    char *cache = ak_path_join (c->dir, "cache");
    char *log = ak_sprintf ("%s/%s.log", c->dir, id);
    char *argv[] = { bin, "--coordinator", c->workers, "--id", (char *) id, "--backend", "host",
                     "--cache", cache, "--heartbeat-ms", "200", "--liveness", "3", "--slots", "1",
                     "--prefetch", "1", "--max-backoff-ms", "1000", "--log-level", "info", NULL };
    pid_t pid = ak_fault_spawn (argv, log);
    assert_true (pid > 0);
    free (log);
    free (cache);
    free (bin);
    return pid;
}

/* The worker's entry in `workers`, or NULL (caller decrefs *all_p). */
static json_t *s_worker_json (ak_fault_coord_t *c, const char *id, json_t **all_p)
{
    json_t *all = ak_fault_json (c, "workers", NULL, NULL);
    *all_p = all;
    size_t i;
    json_t *w;
    json_array_foreach (json_object_get (all, "workers"), i, w)
        if (strcmp (json_string_value (json_object_get (w, "worker_id")), id) == 0)
            return w;
    return NULL;
}

/* Waits until worker id has started task (a lease with started true). */
static void s_wait_started (ak_fault_coord_t *c, const char *id, const char *task, int timeout_ms)
{
    uint64_t until = ak_fault_now_ms () + (uint64_t) timeout_ms;
    while (ak_fault_now_ms () < until) {
        json_t *all = NULL;
        json_t *w = s_worker_json (c, id, &all);
        size_t i;
        json_t *l;
        bool started = false;
        json_array_foreach (w ? json_object_get (w, "leases") : NULL, i, l)
            if (strcmp (json_string_value (json_object_get (l, "task_id")), task) == 0
                && json_is_true (json_object_get (l, "started")))
                started = true;
        json_decref (all);
        if (started)
            return;
        ak_test_sleep_ms (50);
    }
    fail_msg ("worker %s did not start %s within %d ms (see %s/%s.log)", id, task, timeout_ms, c->dir, id);
}

/* Waits until worker id is alive (with registrations registrations where
   that is not 0); fails with what after timeout_ms. */
static void s_wait_alive (ak_fault_coord_t *c, const char *id, int64_t registrations, int timeout_ms,
                          const char *what)
{
    uint64_t until = ak_fault_now_ms () + (uint64_t) timeout_ms;
    while (ak_fault_now_ms () < until) {
        json_t *all = NULL;
        json_t *w = s_worker_json (c, id, &all);
        bool alive = w && strcmp (json_string_value (json_object_get (w, "state")), "alive") == 0
                  && (!registrations || json_integer_value (json_object_get (w, "registrations")) == registrations);
        json_decref (all);
        if (alive)
            return;
        ak_test_sleep_ms (50);
    }
    fail_msg ("%s (see %s/%s.log)", what, c->dir, id);
}

static void s_wait_terminal (ak_fault_coord_t *c, const char *task, int timeout_ms)
{
    uint64_t until = ak_fault_now_ms () + (uint64_t) timeout_ms;
    while (ak_fault_now_ms () < until) {
        json_t *j = ak_fault_json (c, "show", task, NULL);
        const char *state = json_string_value (json_object_get (json_object_get (j, "task"), "state"));
        bool terminal = strcmp (state, "done") == 0 || strcmp (state, "failed") == 0
                     || strcmp (state, "poisoned") == 0;
        json_decref (j);
        if (terminal)
            return;
        ak_test_sleep_ms (100);
    }
    fail_msg ("task %s not finished within %d ms", task, timeout_ms);
}

/* The accepted receipt of task (exactly one, else the test fails) and how
   many duplicates it has; caller decrefs *show_p. */
static json_t *s_accepted (ak_fault_coord_t *c, const char *task, size_t *dups, json_t **show_p)
{
    json_t *show = ak_fault_json (c, "show", task, NULL);
    *show_p = show;
    json_t *acc = NULL, *r;
    size_t i;
    *dups = 0;
    json_array_foreach (json_object_get (show, "receipts"), i, r) {
        if (json_is_true (json_object_get (r, "duplicate"))) {
            (*dups)++;
            continue;
        }
        if (acc)
            fail_msg ("task %s has two accepted receipts", task);
        acc = r;
    }
    if (!acc)
        fail_msg ("task %s has no accepted receipt", task);
    const char *rid = json_string_value (json_object_get (json_object_get (show, "task"), "receipt_id"));
    assert_string_equal (rid, json_string_value (json_object_get (acc, "receipt_id")));
    return acc;
}

static bool s_log_has (const char *path, const char *needle)
{
    char *text = NULL;
    size_t len = 0;
    if (ak_file_read (path, 64u << 20, &text, &len, NULL) != 0)
        return false;
    bool found = strstr (text, needle) != NULL;
    free (text);
    return found;
}

static size_t s_files (const char *dir)
{
    DIR *d = opendir (dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir (d)))
        n += e->d_name[0] != '.';
    closedir (d);
    return n;
}

/* A clean stop: SIGTERM, exit 0 (and, in a sanitizer build, no leak). */
static void s_stop_clean (pid_t pid)
{
    int status = ak_fault_stop (pid, SIGTERM, 15000);
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        fail_msg ("akworker %d did not stop cleanly (status 0x%x)", (int) pid, status);
}

// ------------------------------------------------------------------ tests

static void test_kill_worker_mid_task (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-worker-kill");
    pid_t a = s_worker (c, "wa");
    s_wait_started (c, "wa", S_HANG, 60000);
    /* wa's executor, spinning in the kernel */
    char *out = NULL;
    char *cmd = ak_sprintf ("pgrep -P %d", (int) a);
    ak_test_run (cmd, &out);
    free (cmd);
    int exec_pid = out ? atoi (out) : 0;
    free (out);
    assert_true (exec_pid > 0);
    /* the job runs in a scratch directory in wa's (CACHE/scratch/wa) */
    char *scr_a = ak_sprintf ("%s/cache/scratch/wa", c->dir), *scr_b = ak_sprintf ("%s/cache/scratch/wb", c->dir);
    uint64_t until = ak_fault_now_ms () + 10000;
    while (s_files (scr_a) != 1 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (20);
    assert_int_equal (s_files (scr_a), 1);
    uint64_t t0 = ak_fault_now_ms ();
    int status = ak_fault_stop (a, SIGKILL, 5000);
    assert_true (WIFSIGNALED (status));
    pid_t b = s_worker (c, "wb");

    /* wa is declared dead (3 x 200 ms); the task goes to wb as attempt 2 */
    s_wait_started (c, "wb", S_HANG, 30000);
    uint64_t moved = ak_fault_now_ms () - t0;
    s_wait_terminal (c, S_HANG, 30000);
    json_t *show = NULL;
    size_t dups = 0;
    json_t *acc = s_accepted (c, S_HANG, &dups, &show);
    json_t *task = json_object_get (show, "task");
    assert_string_equal (json_string_value (json_object_get (acc, "worker_id")), "wb");
    assert_int_equal (json_integer_value (json_object_get (acc, "attempt")), 2);
    assert_string_equal (json_string_value (json_object_get (acc, "status")), "timeout");
    assert_string_equal (json_string_value (json_object_get (task, "state")), "failed");
    assert_int_equal (dups, 0);
    assert_non_null (strstr (json_string_value (json_object_get (task, "last_error")), "worker wa died"));
    json_decref (show);
    assert_true (ak_fault_stat (c, "workers_died", NULL) >= 1);
    json_t *all = NULL;
    json_t *w = s_worker_json (c, "wa", &all);
    assert_non_null (w);
    assert_string_equal (json_string_value (json_object_get (w, "state")), "dead");
    assert_int_equal (json_array_size (json_object_get (w, "leases")), 0);
    json_decref (all);

    /* wa's executor died with it (PR_SET_PDEATHSIG): nothing of wa is left
       spinning in the kernel */
    until = ak_fault_now_ms () + 5000;
    while (kill (exec_pid, 0) == 0 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (20);
    if (kill (exec_pid, 0) == 0)
        fail_msg ("wa's executor %d outlived its daemon's kill -9", exec_pid);
    fprintf (stderr, "kill -9 of wa: its executor %d gone, the task moved to wb after %llu ms\n",
             exec_pid, (unsigned long long) moved);

    ak_fault_wait_complete (c, "B000001", 30000);
    /* wb's executor was killed at the hang's timeout: wb removed what its
       job left; wa's kill -9 left its job's scratch directory, which wa's
       next start (same --id and --cache) removes */
    assert_int_equal (s_files (scr_b), 0);
    s_stop_clean (b);
    assert_int_equal (s_files (scr_a), 1);
    a = s_worker (c, "wa");
    s_wait_alive (c, "wa", 0, 30000, "wa did not come back after its restart");
    assert_int_equal (s_files (scr_a), 0);
    s_stop_clean (a);
    free (scr_a);
    free (scr_b);
    status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, "B000001", true, &tally);
    assert_int_equal (tally.accepted, 2);
    ak_fault_coord_destroy (&s_c, 0);
}

static void test_receipt_survives_worker_restart (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-worker-spool");
    pid_t a = s_worker (c, "wc");
    s_wait_started (c, "wc", S_HANG, 60000);
    /* the coordinator goes away while wc's watchdog runs out; wc finishes
       both its tasks (the preflight before or after the hang) */
    int status = ak_fault_coord_kill (c, SIGKILL);
    assert_true (WIFSIGNALED (status));
    char *spool = ak_sprintf ("%s/cache/receipts/wc", c->dir);
    char *log = ak_sprintf ("%s/wc.log", c->dir);
    uint64_t until = ak_fault_now_ms () + 30000;
    while (!(s_log_has (log, "task B000001.0001#1: ok") && s_log_has (log, "task " S_HANG "#1: timeout"))
           && ak_fault_now_ms () < until)
        ak_test_sleep_ms (50);
    ak_test_sleep_ms (100);
    size_t spooled = s_files (spool);
    if (spooled < 1 || spooled > 2)
        fail_msg ("%s holds %zu receipts, expected the timed-out task's (and maybe the preflight's)",
                  spool, spooled);
    status = ak_fault_stop (a, SIGKILL, 5000);
    assert_true (WIFSIGNALED (status));

    /* both come back: the spooled receipt is sent after HELLO */
    ak_fault_coord_start (c);
    a = s_worker (c, "wc");
    s_wait_terminal (c, S_HANG, 30000);
    json_t *show = NULL;
    size_t dups = 0;
    json_t *acc = s_accepted (c, S_HANG, &dups, &show);
    assert_string_equal (json_string_value (json_object_get (acc, "worker_id")), "wc");
    assert_int_equal (json_integer_value (json_object_get (acc, "attempt")), 1);
    assert_string_equal (json_string_value (json_object_get (acc, "status")), "timeout");
    json_decref (show);
    until = ak_fault_now_ms () + 10000;
    while (s_files (spool) != 0 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (50);
    assert_int_equal (s_files (spool), 0);
    assert_true (s_log_has (log, "unacknowledged receipt(s) of an earlier run loaded"));
    free (log);
    fprintf (stderr, "%zu receipt(s) spooled by wc before its kill -9, accepted after its restart\n",
             spooled);

    ak_fault_wait_complete (c, "B000001", 30000);
    s_stop_clean (a);
    status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, "B000001", true, &tally);
    assert_int_equal (tally.accepted, 2);
    free (spool);
    ak_fault_coord_destroy (&s_c, 0);
}

static void test_sigstop_worker (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-worker-stop");
    pid_t d = s_worker (c, "wd");
    s_wait_started (c, "wd", S_HANG, 60000);
    assert_int_equal (kill (d, SIGSTOP), 0);
    pid_t e = s_worker (c, "we");

    /* wd is silent for 3 x 200 ms: dead; the task runs on we */
    s_wait_started (c, "we", S_HANG, 30000);
    json_t *all = NULL;
    json_t *w = s_worker_json (c, "wd", &all);
    assert_string_equal (json_string_value (json_object_get (w, "state")), "dead");
    assert_int_equal (json_integer_value (json_object_get (w, "registrations")), 1);
    json_decref (all);
    ak_test_sleep_ms (500);
    assert_int_equal (kill (d, SIGCONT), 0);

    /* wd registers again on its own and is alive */
    s_wait_alive (c, "wd", 2, 15000, "wd did not register again after SIGCONT");

    /* both attempts end with a timeout receipt: we's, of the current
       attempt, is accepted; wd's, of the attempt taken from it, is refused
       (never stored) */
    s_wait_terminal (c, S_HANG, 30000);
    uint64_t until = ak_fault_now_ms () + 15000;
    while (ak_fault_stat (c, "security", "receipts_refused") < 1 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (100);
    size_t dups = 0;
    json_t *show = NULL;
    json_t *acc = s_accepted (c, S_HANG, &dups, &show);
    fprintf (stderr, "SIGSTOP/SIGCONT: accepted attempt %lld from %s, %zu duplicate, %lld refused\n",
             (long long) json_integer_value (json_object_get (acc, "attempt")),
             json_string_value (json_object_get (acc, "worker_id")), dups,
             (long long) ak_fault_stat (c, "security", "receipts_refused"));
    assert_true (ak_fault_stat (c, "security", "receipts_refused") >= 1);
    assert_int_equal (dups, 0);
    assert_string_equal (json_string_value (json_object_get (acc, "worker_id")), "we");
    json_decref (show);
    w = s_worker_json (c, "wd", &all);
    assert_string_equal (json_string_value (json_object_get (w, "state")), "alive");
    json_decref (all);

    ak_fault_wait_complete (c, "B000001", 30000);
    s_stop_clean (d);
    s_stop_clean (e);
    int status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, "B000001", true, &tally);
    assert_int_equal (tally.accepted, 2);
    ak_fault_coord_destroy (&s_c, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_kill_worker_mid_task, s_teardown),
        cmocka_unit_test_teardown (test_receipt_survives_worker_restart, s_teardown),
        cmocka_unit_test_teardown (test_sigstop_worker, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
