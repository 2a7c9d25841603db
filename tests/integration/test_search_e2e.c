/*  tests/integration/test_search_e2e.c: successive halving and the
    confirmation round through the real system (akcoord, two akworker
    processes on loopback, akctl).

    The batch samples 4 of the 7 valid configurations of softmax's host
    candidate; the test checks, only through `akctl --json`, that the batch
    completes with 4 stage-1 and 2 stage-2 tune tasks (the two stage-2
    configurations among the stage-1 ones, timed with the full policy),
    that the finalists were re-measured in confirm tasks on the other
    worker than the one that measured them, and that the winner says
    where it was confirmed.  Everything it starts is stopped at the end. */
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
#define S_BATCH_MS   120000        /* the batch finishing (sanitizer builds are slow) */

typedef struct {
    char  *dir;
    char  *akctl;                  /* "'BIN/akctl' --coordinator EP --timeout MS" */
    pid_t  coord;
    char  *cargs[3];               /* store, workers and clients endpoints, for a restart */
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
        if ((strcmp (s_str (w, "worker_id"), "sr-w1") == 0
             || strcmp (s_str (w, "worker_id"), "sr-w2") == 0)
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

/*  softmax on host, one small size, the vectorized host candidate (7
    valid configurations) with a budget of 4: halving, 4 short-timed stage-1
    tasks, the best 2 timed in full, then the confirmation round. */
static char *s_write_manifest (void)
{
    char *spec_path = ak_test_src ("kernels/softmax/spec.json");
    char *text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"search\", \"targets\": [\"host\"],\n"
        " \"policy\": {\"max_attempts\": 2, \"warmup\": 1, \"min_samples\": 3, \"max_samples\": 20,\n"
        "            \"max_time_ms\": 150, \"rsd_target\": 0.05, \"lease_ms\": 120000,\n"
        "            \"search\": {\"budget\": 4, \"keep\": 2, \"short_max_time_ms\": 40}},\n"
        " \"ops\": [{\"spec\": \"%s\", \"workloads\": [\"small\"], \"candidates\": [\"vectorized\"]}]}\n",
        spec_path);
    char *path = ak_test_write (s_ctx.dir, "search.json", text);
    assert_non_null (path);
    free (text);
    free (spec_path);
    return path;
}

/*  Starts the coordinator and the workers and waits for them.  Runs inside
    the test (not as a cmocka setup) so that the teardown, which stops
    whatever did start, runs even when starting fails. */
static void s_start (void)
{
    s_ctx.dir = ak_test_tmpdir ("search-e2e");
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
    s_ctx.cargs[0] = ak_strdup (store);
    s_ctx.cargs[1] = ak_strdup (workers_ep);
    s_ctx.cargs[2] = ak_strdup (clients_ep);
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
        snprintf (id, sizeof id, "sr-w%d", i + 1);
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
        s_dump_log ("sr-w1.log");
        s_dump_log ("sr-w2.log");
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
                print_message ("sr-w%d ended with status 0x%x\n", i + 1, status);
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
    for (int i = 0; i < 3; i++)
        free (s_ctx.cargs[i]);
    memset (&s_ctx, 0, sizeof s_ctx);
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
    s_start ();
    char *manifest = s_write_manifest ();
    char *args = ak_sprintf ("submit '%s'", manifest);
    char *out = NULL;
    int code = s_akctl (args, &out);
    if (code != 0)
        fail_msg ("akctl %s: exit %d: %s", args, code, out ? out : "");
    out[strcspn (out, "\n")] = '\0';
    s_ctx.batch_id = out;
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
        args = ak_sprintf ("show %s.%04lld", s_ctx.batch_id, (long long) i);
        json_t *shown = s_akctl_json (args);
        free (args);
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
       worker that did not measure it (both were live) */
    assert_true (confirms >= 1);
    assert_int_equal (other_worker, confirms);
    json_t *win = json_array_get (json_object_get (sum, "winners"), 0);
    print_message ("winner: promoted %d, %s\n", s_bool (win, "promoted"), s_str (win, "reason"));
    if (s_bool (win, "promoted"))
        assert_non_null (strstr (s_str (win, "reason"), "confirmed on sr-w"));
    else
        assert_non_null (strstr (s_str (win, "reason"), "not confirmed"));
    assert_int_equal (total, 1 + 4 + 2 + confirms);
    json_decref (tasks);

    /* the human status names the search and its rounds */
    args = ak_sprintf ("status %s", s_ctx.batch_id);
    code = s_akctl (args, &out);
    free (args);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "vectorized halving, 4 of 7 valid sampled, keep 2 in 2 stages"));
    assert_non_null (strstr (out, "tune stage 2 2/2 finished"));
    free (out);
    json_decref (sum);
}

/* True once `status` shows a stage-2 tune task (the stage-1 receipts
   are committed and stage 2 was created with the last of them). */
static bool s_stage2_exists (void *arg)
{
    (void) arg;
    char *args = ak_sprintf ("status %s", s_ctx.batch_id);
    json_t *sum = s_akctl_json (args);
    free (args);
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
    s_start ();
    char *manifest = s_write_manifest ();
    char *args = ak_sprintf ("submit '%s'", manifest);
    char *out = NULL;
    int code = s_akctl (args, &out);
    if (code != 0)
        fail_msg ("akctl %s: exit %d: %s", args, code, out ? out : "");
    out[strcspn (out, "\n")] = '\0';
    s_ctx.batch_id = out;
    free (args);
    free (manifest);

    if (!ak_test_wait (s_stage2_exists, NULL, S_BATCH_MS)) {
        s_dump_log ("akcoord.log");
        fail_msg ("batch %s never reached stage 2", s_ctx.batch_id);
    }
    int status = ak_test_stop (s_ctx.coord, SIGKILL, 10000);
    assert_true (WIFSIGNALED (status));
    char *coord = ak_test_bin ("akcoord");
    char *log = ak_sprintf ("%s/akcoord-2.log", s_ctx.dir);
    char *cargv[] = { coord, "--store", s_ctx.cargs[0], "--workers", s_ctx.cargs[1], "--clients",
                      s_ctx.cargs[2], "--log-level", "debug", NULL };
    s_ctx.coord = ak_test_spawn_coord (cargv, log);
    assert_true (s_ctx.coord > 0);
    free (log);
    free (coord);
    if (!ak_test_wait (s_coordinator_answers, NULL, S_START_MS))
        fail_msg ("akcoord did not answer after the restart");
    if (!ak_test_wait (s_batch_finished, NULL, S_BATCH_MS)) {
        s_akctl ("status", NULL);
        s_dump_log ("akcoord-2.log");
        fail_msg ("batch %s did not finish after the restart", s_ctx.batch_id);
    }
    args = ak_sprintf ("status %s", s_ctx.batch_id);
    json_t *sum = s_akctl_json (args);
    free (args);
    assert_non_null (sum);
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
    assert_int_equal (stage[0], 0);
    assert_int_equal (stage[1], 4);
    assert_int_equal (stage[2], 2);
    assert_true (confirms >= 1 && confirms <= 2);
    assert_int_equal (s_int (sum, "total"), 1 + 4 + 2 + confirms);
    /* one accepted receipt per task, whatever the kill cut short */
    args = ak_sprintf ("receipts %s", s_ctx.batch_id);
    json_t *answer = s_akctl_json (args);
    free (args);
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
