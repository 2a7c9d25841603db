/*  tests/integration/test_refused.c: a refused peer is told why (issue 14,
    items 4 and 5), against the real akcoord with CURVE on loopback.

    - akctl with a key the coordinator does not accept (unknown, a worker
      key on the clients endpoint, no certificate, a wrong server key) says
      "the coordinator refused this key" or what else failed in the
      handshake, and exits 5, not "no answer" (3), which stays for a
      coordinator that is not there.
    - The coordinator's DISCONNECT says whether it refuses (INVALID_HELLO,
      ID_TAKEN, KEY_REVOKED) or asks for a new HELLO (REREGISTER).
    - akworker refused (an unknown key, a worker id held by another key, a
      key revoked while it runs) logs the reason at ERROR and exits 3 after
      --max-refusals refusals in a row; the worker holding the id stays.
    - akworker does not count a handshake that has not finished against the
      coordinator's liveness (issue 14, item 10): it waits on its one
      connection instead of reconnecting every few seconds. */
#include "integration.h"

#include <czmq.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "envelope.h"
#include "util.h"

/* integration.h's fixture, and a third worker key, w3 */
typedef struct {
    ak_it_fx_t *it;
    char       *w3;
} fx_t;

static ak_it_fx_t *s_fx;
static char *s_w3;

/* `akctl --coordinator CLIENTS ARGS 2>&1`: exit code, output in *out_p. */
static int s_akctl (char **out_p, const char *args)
{
    return ak_test_runf (out_p, "'%s' --coordinator %s --timeout 5000 %s 2>&1", s_fx->akctl, s_fx->clients, args);
}

static int s_setup (void **state)
{
    fx_t *fx = ak_calloc (1, sizeof *fx);
    fx->it = s_fx = ak_it_fx_new ("refused", AK_ROLE_WORKER);
    fx->w3 = s_w3 = ak_it_key (s_fx->keys, "w3", AK_ROLE_WORKER);
    ak_it_fx_start (s_fx, NULL);
    *state = fx;
    return 0;
}

static int s_teardown (void **state)
{
    fx_t *fx = *state;
    ak_it_fx_destroy (&fx->it);
    free (fx->w3);
    free (fx);
    s_fx = NULL;
    s_w3 = NULL;
    return 0;
}

/* Starts akworker --id id with the certificate cert (and extra arguments,
   NULL-terminated) logging to DIR/ID.log; the log's path in *log_p. */
static pid_t s_worker (const char *id, const char *cert, const char *const *extra, char **log_p)
{
    char *cache = ak_sprintf ("%s/cache-%s", s_fx->dir, id);
    *log_p = ak_sprintf ("%s/%s.log", s_fx->dir, id);
    char *argv[32] = { s_fx->akworker, "--coordinator", s_fx->workers, "--id", (char *) id,
                       "--backend", "host", "--cache", cache, "--heartbeat-ms", "500",
                       "--cert", (char *) cert, "--server-key", s_fx->server_pub };
    int n = 15;
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = (char *) extra[i];
    argv[n] = NULL;
    pid_t pid = ak_test_spawn (argv, *log_p);
    free (cache);
    assert_true (pid > 0);
    return pid;
}

/* The worker's exit status once it exits on its own within timeout_ms
   (else it is killed and the test fails, showing its log). */
static int s_exit_code (pid_t pid, int timeout_ms, const char *log)
{
    int status = ak_test_stop (pid, 0, timeout_ms);
    if (!WIFEXITED (status)) {
        char *out = NULL;
        ak_test_runf (&out, "tail -20 '%s'", log);
        free (out);
        fail_msg ("akworker did not exit by itself within %d ms (log: %s)", timeout_ms, log);
    }
    return WEXITSTATUS (status);
}

/* True when the file holds a line with both needles. */
static bool s_log_has (const char *log, const char *a, const char *b)
{
    char *out = NULL;
    int code = ak_test_runf (&out, "grep -F -- '%s' '%s' | grep -c -F -- '%s'", a, log, b);
    free (out);
    return code == 0;
}

static const char *s_state_of (const char *id)
{
    static char state[16];
    char *args = ak_sprintf ("--json --cert '%s' --server-key '%s' workers", s_fx->op, s_fx->server_pub);
    char *out = NULL;
    assert_int_equal (s_akctl (&out, args), 0);
    json_t *j = json_loads (out, 0, NULL);
    assert_non_null (j);
    snprintf (state, sizeof state, "absent");
    size_t i;
    json_t *w;
    json_array_foreach (json_object_get (j, "workers"), i, w)
        if (strcmp (json_string_value (json_object_get (w, "worker_id")), id) == 0)
            snprintf (state, sizeof state, "%s", json_string_value (json_object_get (w, "state")));
    json_decref (j);
    free (out);
    free (args);
    return state;
}

static bool s_alive (void *id)
{
    return strcmp (s_state_of (id), "alive") == 0;
}

// ==================================================================== akctl

/* Each way of not being let in is named, exit 5; a coordinator that is not
   there is still "no answer", exit 3. */
static void test_akctl_refused_key (void **state)
{
    (void) state;
    struct { const char *what, *cert, *server, *needle; } cases[] = {
        { "unknown key", s_fx->stranger, s_fx->server_pub, "the coordinator refused this key (ZAP status 400" },
        { "worker key on the clients endpoint", s_fx->w1, s_fx->server_pub, "the coordinator refused this key" },
        /* the mechanism mismatch, or the coordinator's close before the
           client read its greeting, whichever the race gives */
        { "no certificate", NULL, NULL, "CURVE" },
        { "wrong server key", s_fx->op, s_fx->w2, "--server-key is not the coordinator's public key" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *args = cases[i].cert ? ak_sprintf ("--cert '%s' --server-key '%s' stats", cases[i].cert,
                                                 cases[i].server)
                                   : ak_sprintf ("stats");
        char *out = NULL;
        int code = s_akctl (&out, args);
        if (code != 5 || !strstr (out, cases[i].needle) || !strstr (out, s_fx->clients))
            fail_msg ("%s: exit %d, expected 5 and '%s': %s", cases[i].what, code, cases[i].needle, out);
        assert_null (strstr (out, "is akcoord running there"));
        free (out);
        free (args);
    }
    /* A refusal that comes before the request went out (the refused
       connection is gone, and the socket takes nothing) is still a
       refusal: the race was lost a few times in a hundred (each try is
       an akctl process: 16 of them, about 5 s). */
    for (int i = 0; i < 16; i++) {
        char *out = NULL;
        int code = s_akctl (&out, "stats");
        if (code != 5 || !strstr (out, "CURVE"))
            fail_msg ("no certificate, try %d: exit %d, expected 5 and 'CURVE': %s", i, code, out);
        free (out);
    }
    /* the right key works; nobody listening is still exit 3 */
    char *out = NULL, *args = ak_sprintf ("--cert '%s' --server-key '%s' stats", s_fx->op, s_fx->server_pub);
    assert_int_equal (s_akctl (&out, args), 0);
    free (out);
    int port[1];
    ak_test_free_ports (port, 1);
    int code = ak_test_runf (&out, "'%s' --coordinator tcp://127.0.0.1:%d --timeout 500 %s 2>&1", s_fx->akctl,
                             port[0], args);
    assert_int_equal (code, 3);
    assert_non_null (strstr (out, "no answer"));
    free (out);
    free (args);
}

// ================================================================= protocol


static void s_send_heartbeat (zsock_t *s)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    assert_int_equal (ak_envelope_send (s, NULL, 0, &env), 0);
}

/* The first DISCONNECT within 10 s (other messages skipped): its code, its
   reason into why; -1 when none came.  beat: a HEARTBEAT every 100 ms
   meanwhile, so that a registration stays alive. */
static int s_disconnect_code (zsock_t *s, bool beat, char *why, size_t len)
{
    int64_t until = zclock_mono () + 10000;
    while (zclock_mono () < until) {
        if (beat)
            s_send_heartbeat (s);
        zmq_pollitem_t item = { zsock_resolve (s), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 100) <= 0)
            continue;
        zframe_t *f = zframe_recv (s);
        assert_non_null (f);
        Ak__Envelope *env = NULL;
        ak_err_t err = { 0 };
        int rc = ak_envelope_unpack (zframe_data (f), zframe_size (f), 0, &env, &err);
        zframe_destroy (&f);
        assert_int_equal (rc, 0);
        int code = -1;
        if (env->body_case == AK__ENVELOPE__BODY_DISCONNECT) {
            code = (int) env->disconnect->code;
            snprintf (why, len, "%s", env->disconnect->reason);
        }
        ak_envelope_free (&env);
        if (code >= 0)
            return code;
    }
    return -1;
}

/* The codes on the wire: a refusal is marked as one, a plain "say HELLO"
   is not (older workers read every DISCONNECT as the latter). */
static void test_disconnect_codes (void **state)
{
    (void) state;
    char why[256];
    zsock_t *a = ak_it_dealer (s_fx->workers, s_fx->w1, s_fx->server_pub);
    ak_it_hello (a, "bad id");                   /* a space: invalid */
    assert_int_equal (s_disconnect_code (a, false, why, sizeof why), AK__DISCONNECT_CODE__DISCONNECT_INVALID_HELLO);
    assert_non_null (strstr (why, "invalid HELLO"));

    s_send_heartbeat (a);                           /* before any HELLO */
    assert_int_equal (s_disconnect_code (a, false, why, sizeof why), AK__DISCONNECT_CODE__DISCONNECT_REREGISTER);
    assert_string_equal (why, "not registered: say HELLO");

    ak_it_hello (a, "held");
    zsock_t *b = ak_it_dealer (s_fx->workers, s_fx->w2, s_fx->server_pub);
    ak_it_hello (b, "held");                     /* another key, the same id */
    assert_int_equal (s_disconnect_code (b, false, why, sizeof why), AK__DISCONNECT_CODE__DISCONNECT_ID_TAKEN);
    assert_string_equal (why, "worker id held is registered with another key");
    zsock_destroy (&b);

    char *pub = ak_it_public (s_fx->w1);
    assert_int_equal (unlink (pub), 0);
    free (pub);
    assert_int_equal (s_disconnect_code (a, true, why, sizeof why), AK__DISCONNECT_CODE__DISCONNECT_KEY_REVOKED);
    assert_string_equal (why, "your key was revoked");
    zsock_destroy (&a);
}

// ================================================================= akworker

static const char *const s_two[] = { "--max-refusals", "2", NULL };

/* A key the coordinator does not know: ERROR with the reason, exit 3. */
static void test_worker_unknown_key_exits (void **state)
{
    (void) state;
    char *log = NULL;
    pid_t pid = s_worker ("stranger", s_fx->stranger, s_two, &log);
    assert_int_equal (s_exit_code (pid, 60000, log), 3);
    assert_true (s_log_has (log, " ERROR ", "the coordinator refused this key (ZAP status 400"));
    assert_true (s_log_has (log, " ERROR ", "refused this worker 2 times in a row"));
    assert_false (s_log_has (log, "silent for", "reconnecting"));
    free (log);
}

/* A second worker with the id of a live one and another key: told why,
   exits 3; the first keeps its registration. */
static void test_worker_duplicate_id_exits (void **state)
{
    (void) state;
    char *log1 = NULL, *log2 = NULL;
    pid_t first = s_worker ("dup", s_fx->w1, NULL, &log1);
    if (!ak_test_wait (s_alive, "dup", 20000))
        fail_msg ("the first worker did not register (log: %s)", log1);
    pid_t second = s_worker ("dup", s_fx->w2, s_two, &log2);
    assert_int_equal (s_exit_code (second, 60000, log2), 3);
    assert_true (s_log_has (log2, " ERROR ", "worker id dup is registered with another key (DISCONNECT_ID_TAKEN)"));
    assert_false (s_log_has (log2, "asks to re-register", "registered with another key"));
    assert_string_equal (s_state_of ("dup"), "alive");
    assert_int_equal (ak_test_stop (first, SIGTERM, 10000), 0);
    free (log1);
    free (log2);
}

/* A key revoked while the worker runs: DISCONNECT KEY_REVOKED at ERROR,
   then the handshake refused, exit 3. */
static void test_worker_revoked_exits (void **state)
{
    (void) state;
    char *log = NULL;
    pid_t pid = s_worker ("rev", s_w3, s_two, &log);
    if (!ak_test_wait (s_alive, "rev", 20000))
        fail_msg ("the worker did not register (log: %s)", log);
    char *pub = ak_it_public (s_w3);
    assert_int_equal (unlink (pub), 0);
    free (pub);
    assert_int_equal (s_exit_code (pid, 60000, log), 3);
    assert_true (s_log_has (log, " ERROR ", "your key was revoked (DISCONNECT_KEY_REVOKED)"));
    assert_true (s_log_has (log, " ERROR ", "refused this worker 2 times in a row"));
    free (log);
}

/* A "coordinator" that takes TCP connections and never answers the
   handshake (a coordinator busy with a thousand others looks like this to
   one worker): the worker keeps its one connection and says so at WARN; a
   liveness counted from the connect would reconnect again and again. */
static void test_worker_waits_for_handshake (void **state)
{
    (void) state;
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (bind (fd, (struct sockaddr *) &a, sizeof a), 0);
    assert_int_equal (listen (fd, 64), 0);          /* the kernel completes connects; nobody speaks */
    socklen_t alen = sizeof a;
    assert_int_equal (getsockname (fd, (struct sockaddr *) &a, &alen), 0);
    char *ep = ak_sprintf ("tcp://127.0.0.1:%d", ntohs (a.sin_port));
    char *cache = ak_sprintf ("%s/cache-mute", s_fx->dir), *log = ak_sprintf ("%s/mute.log", s_fx->dir);
    char *argv[] = { s_fx->akworker, "--coordinator", ep, "--id", "mute", "--backend", "host", "--cache", cache,
                     "--heartbeat-ms", "100", "--liveness", "2", NULL };
    pid_t pid = ak_test_spawn (argv, log);
    assert_true (pid > 0);
    sleep (5);                  /* 25 liveness windows; the old rule reconnected at 0.2 s, 1.4 s, 3.6 s */
    assert_int_equal (ak_test_stop (pid, SIGTERM, 10000), 0);
    assert_int_equal (fcntl (fd, F_SETFL, O_NONBLOCK), 0);
    int connections = 0, c;
    while ((c = accept (fd, NULL, NULL)) >= 0) {
        connections++;
        close (c);
    }
    close (fd);
    /* the worker's one connection, and maybe the start-up check of the
       endpoint (a throw-away socket whose connect may complete); the old
       rule made a new one after every 200 ms of silence plus backoff */
    if (connections < 1 || connections > 2 || !s_log_has (log, " WARN ", "no handshake yet")
        || s_log_has (log, "silent for", "ms"))
        fail_msg ("%d connections (expected 1 or 2), log %s", connections, log);
    free (ep);
    free (cache);
    free (log);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_akctl_refused_key, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_disconnect_codes, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_worker_unknown_key_exits, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_worker_duplicate_id_exits, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_worker_revoked_exits, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_worker_waits_for_handshake, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
