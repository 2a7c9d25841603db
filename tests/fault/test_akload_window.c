/*  tests/fault/test_akload_window.c: akload's measurement window as
    ops/bench/coord_scale.sh uses it (issue 24): --warmup-from registered,
    --cooldown-s, --ready-file and --samples, against a real akcoord.

    Proves: the window opens --warmup-s after the last simulated worker
    registered (the ready file's time) and lasts --duration-s less
    --warmup-s, the load going on --cooldown-s after it; every
    credit->assign sample lies in the window and the samples file holds
    exactly the samples the statistics summarize (count and maximum); a
    window that never opens (nobody to register with) fails with exit 1
    and says so; bad values are refused with exit 2, naming the flag. */
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static ak_fault_coord_t *s_c;

static int s_teardown (void **state)
{
    (void) state;
    ak_fault_coord_destroy (&s_c, 60);
    return 0;
}

static double s_num (json_t *o, const char *key)
{
    json_t *v = json_object_get (o, key);
    if (!json_is_number (v))
        fail_msg ("akload stats: no number '%s'", key);
    return json_number_value (v);
}

/* The status of akload run with argv (its output to log), waited for up
   to timeout_ms. */
static int s_akload (char *const argv[], const char *log, int timeout_ms)
{
    pid_t pid = ak_test_spawn (argv, log);
    assert_true (pid > 0);
    uint64_t until = ak_fault_now_ms () + (uint64_t) timeout_ms;
    int status = 0;
    pid_t r;
    while ((r = waitpid (pid, &status, WNOHANG)) == 0 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (50);
    if (r == 0) {
        ak_test_stop (pid, SIGKILL, 5000);
        fail_msg ("akload still ran after %d ms (log %s)", timeout_ms, log);
    }
    assert_int_equal (r, pid);
    assert_true (WIFEXITED (status));
    return WEXITSTATUS (status);
}

static void test_window_from_registration (void **state)
{
    (void) state;
    const char *flags[] = { "--heartbeat-ms", "200", "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new ("fault-akload-window", NULL, flags);
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "window", 1000, NULL);
    char *batch = ak_fault_submit (c, bundle);

    char *akload = ak_test_bin ("akload");
    char *stats = ak_path_join (c->dir, "akload.json");
    char *ready = ak_path_join (c->dir, "ready");
    char *samples = ak_path_join (c->dir, "samples.txt");
    char *log = ak_path_join (c->dir, "akload.log");
    char *argv[] = { akload, "--coordinator", c->workers, "--workers", "4", "--prefix", "win",
                     "--prefetch", "0", "--task-ms", "20", "--heartbeat-ms", "200",
                     "--duration-s", "3", "--warmup-s", "1", "--warmup-from", "registered",
                     "--cooldown-s", "1", "--ready-file", ready, "--samples", samples,
                     "--stats-json", stats, "--log-level", "warn", NULL };
    uint64_t t0 = ak_fault_now_ms ();
    assert_int_equal (s_akload (argv, log, 30000), 0);
    uint64_t took = ak_fault_now_ms () - t0;

    /* the ready file: seconds from the start to the last registration */
    size_t len = 0;
    char *text = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_read (ready, 64, &text, &len, &err), 0);
    double ready_s = strtod (text, NULL);
    free (text);

    json_error_t jerr;
    json_t *st = json_load_file (stats, 0, &jerr);
    if (!st)
        fail_msg ("%s: %s", stats, jerr.text);
    assert_string_equal (json_string_value (json_object_get (st, "warmup_from")), "registered");
    double reg = s_num (st, "all_registered_s"), start = s_num (st, "window_start_s");
    double window = s_num (st, "window_s"), elapsed = s_num (st, "elapsed_s");
    fprintf (stderr, "registered at %.3f s (ready file %.3f), window %.3f s from %.3f s, run %.3f s (%llu ms "
             "as seen here)\n", reg, ready_s, window, start, elapsed, (unsigned long long) took);
    assert_true (ready_s > 0 && ready_s - reg < 0.002 && reg - ready_s < 0.002);
    assert_true (start - reg > 0.999 && start - reg < 1.001);             /* --warmup-s 1 after it */
    assert_true (window > 1.95 && window < 2.05);                          /* 3 - 1 */
    assert_true (elapsed > start + window + 0.95);                          /* the cooldown ran */
    assert_true (elapsed < start + window + 5.0);                           /* and stopped (a loaded box may starve it a while) */

    /* the samples: as many as summarized, the same maximum, all in the window */
    json_t *lat = json_object_get (st, "credit_to_assign_latency");
    size_t n = (size_t) s_num (lat, "n");
    double max_ms = s_num (lat, "max_ms");
    assert_true (n > 20);           /* 4 workers, 20 ms tasks, 2 s */
    FILE *f = fopen (samples, "r");
    assert_non_null (f);
    unsigned long at, us, max_us = 0;
    size_t lines = 0;
    while (fscanf (f, "%lu %lu", &at, &us) == 2) {
        assert_true (at < (unsigned long) (window * 1e6) + 1000);
        if (us > max_us)
            max_us = us;
        lines++;
    }
    assert_true (feof (f));
    fclose (f);
    assert_int_equal (lines, n);
    assert_true (max_us / 1000.0 > max_ms - 0.001 && max_us / 1000.0 < max_ms + 0.001);
    json_decref (st);
    free (batch);
    free (bundle);
    free (akload);
    free (stats);
    free (ready);
    free (samples);
    free (log);
}

/* Nobody to register with: the window never opens, exit 1 and why. */
static void test_window_never_opens (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("fault-akload-never");
    char *akload = ak_test_bin ("akload");
    char *log = ak_path_join (dir, "akload.log");
    char *ready = ak_path_join (dir, "ready");
    char ep[64];
    int port;
    ak_test_free_ports (&port, 1);
    snprintf (ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    char *argv[] = { akload, "--coordinator", ep, "--workers", "2", "--duration-s", "1",
                     "--warmup-from", "registered", "--ready-file", ready, "--log-level", "warn", NULL };
    assert_int_equal (s_akload (argv, log, 20000), 1);
    assert_true (ak_fault_occurrences (log, "0 of 2 simulated workers registered within --duration-s 1") >= 1);
    assert_true (access (ready, F_OK) != 0);

    /* bad values: exit 2, the flag named */
    char *bad1[] = { akload, "--coordinator", ep, "--workers", "1", "--warmup-from", "later", NULL };
    assert_int_equal (s_akload (bad1, log, 20000), 2);
    assert_true (ak_fault_occurrences (log, "--warmup-from: 'later'") >= 1);
    char *bad2[] = { akload, "--coordinator", ep, "--workers", "1", "--cooldown-s", "2", NULL };
    assert_int_equal (s_akload (bad2, log, 20000), 2);
    assert_true (ak_fault_occurrences (log, "--cooldown-s needs --duration-s") >= 1);
    ak_test_rmtree (dir);
    free (dir);
    free (akload);
    free (log);
    free (ready);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_window_from_registration, s_teardown),
        cmocka_unit_test (test_window_never_opens),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
