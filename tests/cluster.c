/*  tests/cluster.c: a private cluster for a test (support.h): akcoord,
    akworker processes and the akctl command line that talks to them. */
#include "support.h"

#include "clock.h"
#include "util.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void ak_test_cluster_init (ak_test_cluster_t *c, const char *tag, bool tcp)
{
    memset (c, 0, sizeof *c);
    c->dir = ak_test_tmpdir (tag);
    assert_non_null (c->dir);
    c->store = ak_sprintf ("%s/store", c->dir);
    if (tcp) {
        int ports[2];
        ak_test_free_ports (ports, 2);
        c->workers_ep = ak_sprintf ("tcp://127.0.0.1:%d", ports[0]);
        c->clients_ep = ak_sprintf ("tcp://127.0.0.1:%d", ports[1]);
    }
    else {
        c->workers_ep = ak_sprintf ("ipc://%s/w.ipc", c->dir);
        c->clients_ep = ak_sprintf ("ipc://%s/c.ipc", c->dir);
    }
    char *akctl = ak_test_bin ("akctl");
    c->akctl = ak_sprintf ("'%s' --coordinator %s --timeout 10000", akctl, c->clients_ep);
    free (akctl);
}

/*  argv = fixed (NULL-terminated) then extra (NULL-terminated, may be NULL);
    the strings are not copied. */
static char **s_argv (char *const fixed[], const char *const extra[])
{
    size_t n = 0, m = 0;
    while (fixed[n])
        n++;
    while (extra && extra[m])
        m++;
    char **argv = ak_calloc (n + m + 1, sizeof *argv);
    memcpy (argv, fixed, n * sizeof *argv);
    for (size_t i = 0; i < m; i++)
        argv[n + i] = (char *) extra[i];
    return argv;
}

static bool s_coord_answers (void *arg)
{
    ak_test_cluster_t *c = arg;
    char *cmd = ak_sprintf ("%s --timeout 500 stats > /dev/null 2>&1", c->akctl);
    int code = ak_test_run (cmd, NULL);
    free (cmd);
    return code == 0;
}

void ak_test_cluster_coord (ak_test_cluster_t *c, const char *store, const char *log,
                            const char *const args[], int timeout_ms)
{
    assert_true (c->coord <= 0);
    free (c->coord_log);
    c->coord_log = ak_strdup (log ? log : "akcoord.log");
    char *coord = ak_test_bin ("akcoord");
    char *log_path = ak_path_join (c->dir, c->coord_log);
    char *fixed[] = { coord, "--store", (char *) (store ? store : c->store), "--workers",
                      c->workers_ep, "--clients", c->clients_ep, NULL };
    char **argv = s_argv (fixed, args);
    c->coord = ak_test_spawn_coord (argv, log_path);
    free (argv);
    free (log_path);
    free (coord);
    assert_true (c->coord > 0);
    if (!ak_test_wait (s_coord_answers, c, timeout_ms)) {
        ak_test_cluster_dump (c, c->coord_log);
        fail_msg ("akcoord did not answer on %s within %d ms", c->clients_ep, timeout_ms);
    }
}

static const char *s_str (const json_t *obj, const char *key)
{
    const json_t *v = json_object_get (obj, key);
    return json_is_string (v) ? json_string_value (v) : "";
}

/*  Without the echo: it is polled. */
bool ak_test_cluster_alive (void *arg)
{
    ak_test_cluster_t *c = arg;
    char *cmd = ak_sprintf ("%s --json workers", c->akctl), *out = NULL;
    int code = ak_test_run (cmd, &out);
    json_t *answer = code == 0 ? json_loads (out ? out : "", 0, NULL) : NULL;
    int alive = 0, expected = 0;
    for (int k = 0; k < c->nworkers; k++) {
        if (c->workers[k] <= 0)
            continue;
        expected++;
        size_t i;
        json_t *w;
        json_array_foreach (json_object_get (answer, "workers"), i, w)
            if (strcmp (s_str (w, "worker_id"), c->ids[k]) == 0
                && strcmp (s_str (w, "state"), "alive") == 0) {
                alive++;
                break;
            }
    }
    json_decref (answer);
    free (out);
    free (cmd);
    return answer && alive == expected;
}

void ak_test_cluster_workers (ak_test_cluster_t *c, const char *id_prefix, int n,
                              const char *const args[], int timeout_ms)
{
    assert_true (c->nworkers + n <= AK_TEST_CLUSTER_MAX);
    char *worker = ak_test_bin ("akworker");
    for (int i = 0; i < n; i++) {
        int k = c->nworkers++;
        snprintf (c->ids[k], sizeof c->ids[k], "%s%d", id_prefix, i + 1);
        char *cache = ak_sprintf ("%s/cache-%s", c->dir, c->ids[k]);
        /* a relative --cache (a user's `--cache cache`): the worker starts
           in dir and must resolve it before its jobs change directory */
        char *here = NULL;
        if (c->relative_cache) {
            free (cache);
            cache = ak_sprintf ("cache-%s", c->ids[k]);
            here = getcwd (NULL, 0);
            assert_non_null (here);
            assert_int_equal (chdir (c->dir), 0);
        }
        char *log = ak_sprintf ("%s/%s.log", c->dir, c->ids[k]);
        char *fixed[] = { worker, "--coordinator", c->workers_ep, "--id", c->ids[k],
                          "--cache", cache, NULL };
        char **argv = s_argv (fixed, args);
        c->workers[k] = ak_test_spawn (argv, log);
        if (here) {
            assert_int_equal (chdir (here), 0);
            free (here);
        }
        free (argv);
        free (log);
        free (cache);
        assert_true (c->workers[k] > 0);
    }
    free (worker);
    if (!ak_test_wait (ak_test_cluster_alive, c, timeout_ms)) {
        ak_test_cluster_dump (c, NULL);
        fail_msg ("the %d workers %s* did not all register within %d ms", n, id_prefix, timeout_ms);
    }
}

static int s_vakctl (ak_test_cluster_t *c, char **out_p, const char *fmt, va_list ap)
{
    char *args = ak_test_vsprintf (fmt, ap);
    char *cmd = ak_sprintf ("%s %s", c->akctl, args);
    int code = ak_test_run_echo (cmd, out_p, c->echo);
    free (cmd);
    free (args);
    return code;
}

int ak_test_akctl (ak_test_cluster_t *c, char **out_p, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int code = s_vakctl (c, out_p, fmt, ap);
    va_end (ap);
    return code;
}

json_t *ak_test_akctl_json (ak_test_cluster_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *args = ak_test_vsprintf (fmt, ap);
    va_end (ap);
    char *out = NULL;
    int code = ak_test_akctl (c, &out, "--json %s", args);
    json_t *json = code == 0 ? json_loads (out ? out : "", 0, NULL) : NULL;
    if (!json)
        print_message ("akctl --json %s: exit %d, output: %s\n", args, code, out ? out : "");
    free (out);
    free (args);
    return json;
}

char *ak_test_submit (ak_test_cluster_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *args = ak_test_vsprintf (fmt, ap);
    va_end (ap);
    char *out = NULL;
    int code = ak_test_akctl (c, &out, "%s", args);
    if (code != 0)
        fail_msg ("akctl %s: exit %d: %s", args, code, out ? out : "");
    out[strcspn (out, "\n")] = '\0';
    if (out[0] != 'B')
        fail_msg ("akctl %s printed no batch id: '%s'", args, out);
    free (args);
    return out;
}

static bool s_batch_finished (void *arg)
{
    void **pair = arg;
    ak_test_cluster_t *c = pair[0];
    char *cmd = ak_sprintf ("%s --json status %s", c->akctl, (const char *) pair[1]), *out = NULL;
    int code = ak_test_run (cmd, &out);
    json_t *sum = code == 0 ? json_loads (out ? out : "", 0, NULL) : NULL;
    bool done = sum && strcmp (s_str (sum, "state"), "open") != 0;
    json_decref (sum);
    free (out);
    free (cmd);
    return done;
}

/*  `akctl watch` until the batch is finished (exit 0 complete, 1 finished
    otherwise) or the deadline; where it ends early (3: three polls
    unanswered, a coordinator being restarted) it starts again after a
    pause.  Its polls (every 250 ms, AKCTL_WATCH_INTERVAL) are one
    process's, not a process each; they, too, without the leak scan. */
static void s_watch (ak_test_cluster_t *c, const char *id, int timeout_ms)
{
    uint64_t until = ak_clock_mono_ms () + (uint64_t) timeout_ms;
    for (;;) {
        uint64_t now = ak_clock_mono_ms ();
        if (now >= until)
            return;
        char *cmd = ak_sprintf ("timeout -k 5 %.3f %s watch %s > /dev/null 2>&1",
                                (double) (until - now) / 1000.0, c->akctl, id);
        char *saved = ak_test_leak_scan_off ();
        int code = ak_test_run (cmd, NULL);
        ak_test_leak_scan_on (saved);
        free (cmd);
        if (code == 0 || code == 1 || code == 124 || code == 137)
            return;
        ak_test_sleep_ms (250);
    }
}

json_t *ak_test_batch_wait (ak_test_cluster_t *c, const char *id, int timeout_ms)
{
    void *pair[2] = { c, (void *) id };
    s_watch (c, id, timeout_ms);
    if (!ak_test_wait (s_batch_finished, pair, 0)) {
        ak_test_cluster_dump (c, NULL);
        fail_msg ("batch %s did not finish within %d ms", id, timeout_ms);
    }
    json_t *sum = ak_test_akctl_json (c, "status %s", id);
    assert_non_null (sum);
    return sum;
}

void ak_test_cluster_dump (ak_test_cluster_t *c, const char *name)
{
    if (!name) {
        for (int k = 0; k < c->nworkers; k++) {
            char *log = ak_sprintf ("%s.log", c->ids[k]);
            ak_test_cluster_dump (c, log);
            free (log);
        }
        if (c->coord_log)
            ak_test_cluster_dump (c, c->coord_log);
        return;
    }
    char *path = ak_path_join (c->dir, name), *text = NULL;
    size_t len = 0, tail = c->dump_bytes ? c->dump_bytes : 4000;
    if (ak_file_read (path, 4u << 20, &text, &len, NULL) == 0) {
        size_t from = len > tail ? len - tail : 0;
        print_message ("---- %s (last %zu bytes)\n%s\n----\n", name, len - from, text + from);
    }
    free (text);
    free (path);
}

int ak_test_cluster_stop_worker (ak_test_cluster_t *c, int i, int sig, int timeout_ms)
{
    assert_true (i >= 0 && i < c->nworkers && c->workers[i] > 0);
    int status = ak_test_stop (c->workers[i], sig, timeout_ms);
    c->workers[i] = 0;
    return status;
}

void ak_test_cluster_shutdown (ak_test_cluster_t *c, int timeout_ms)
{
    for (int k = 0; k < c->nworkers; k++) {
        if (c->workers[k] <= 0)
            continue;
        int status = ak_test_cluster_stop_worker (c, k, SIGTERM, timeout_ms);
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            char *log = ak_sprintf ("%s.log", c->ids[k]);
            ak_test_cluster_dump (c, log);
            free (log);
            fail_msg ("%s ended with status 0x%x after SIGTERM", c->ids[k], status);
        }
    }
    assert_int_equal (ak_test_akctl (c, NULL, "shutdown > /dev/null"), 0);
    int status = ak_test_stop (c->coord, 0, timeout_ms);
    c->coord = 0;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        ak_test_cluster_dump (c, c->coord_log);
        fail_msg ("akcoord ended with status 0x%x after shutdown", status);
    }
}

void ak_test_cluster_teardown (ak_test_cluster_t *c)
{
    for (int k = 0; k < c->nworkers; k++)
        if (c->workers[k] > 0) {
            int status = ak_test_stop (c->workers[k], SIGTERM, 15000);
            if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
                print_message ("%s ended with status 0x%x\n", c->ids[k], status);
        }
    if (c->coord > 0) {
        int status = ak_test_stop (c->coord, SIGTERM, 10000);
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            print_message ("akcoord ended with status 0x%x\n", status);
            ak_test_cluster_dump (c, c->coord_log);
        }
    }
    if (c->dir && !getenv ("AK_TEST_KEEP"))
        ak_test_rmtree (c->dir);
    free (c->dir);
    free (c->store);
    free (c->workers_ep);
    free (c->clients_ep);
    free (c->akctl);
    free (c->coord_log);
    memset (c, 0, sizeof *c);
}
