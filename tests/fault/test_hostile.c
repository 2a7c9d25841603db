/*  tests/fault/test_hostile.c: hostile frames at both endpoints of a live
    coordinator while akload's workers run a batch.

    Every few hundred milliseconds, on the worker and on the client
    endpoint: garbage, an empty frame, a truncated envelope, envelopes of
    protocol versions 0 and 2, a two-frame message, a body meant for the
    other endpoint, a frame over the 16 MiB limit; on the worker endpoint
    also an invalid HELLO and, from a registered worker, receipts for an
    unknown task and an impossible attempt and a STARTED for an unknown
    task.  Proves: each is rejected and counted exactly (the oversized ones
    as closed connections), clients get an error reply for each, warnings
    are rate-limited, and the batch is unaffected: it completes, every task
    accepted once. */
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "envelope.h"
#include "util.h"

#define S_ROUNDS         6
#define S_WORKER_REJECTS 11     /* per round, see s_worker_round */
#define S_CLIENT_REJECTS 8      /* per round, see s_client_round */
/* between rounds: the rounds must span more than the coordinator's warning
   interval (AK_COORD_WARN_EVERY_MS, 1 s) so that a later warning reports
   the ones suppressed (6 x 150 ms fit inside it on a fast box) */
#define S_ROUND_MS       300

static ak_fault_coord_t *s_c;

static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 60);
    return 0;
}

static zsock_t *s_dealer (const char *endpoint)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    assert_non_null (s);
    zsock_set_linger (s, 0);
    assert_int_equal (zsock_connect (s, "%s", endpoint), 0);
    return s;
}

/*  Closes a hostile socket once what it queued has gone out: with the
    linger of 0 it was made with, frames not yet sent are dropped, and a
    fixed 20 ms before the close lost whole rounds on a loaded box (50 of
    66 worker rejects counted at load 17). */
static void s_flush_destroy (zsock_t **s_p)
{
    zsock_set_linger (*s_p, 10000);
    zsock_destroy (s_p);
}

static void s_raw (zsock_t *s, const void *data, size_t len, int flags)
{
    assert_true (zmq_send (zsock_resolve (s), data, len, flags) == (int) len);
}

/* An envelope packed with whatever version (the packer stamps the right one). */
static void s_versioned (zsock_t *s, uint32_t version)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    env.version = version;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    size_t size = ak__envelope__get_packed_size (&env);
    uint8_t *data = ak_malloc (size);
    ak__envelope__pack (&env, data);
    s_raw (s, data, size, 0);
    free (data);
}

/* Seven malformed messages any endpoint must reject. */
static void s_malformed (zsock_t *s)
{
    uint8_t garbage[64];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (uint8_t) (0xf7 ^ (i * 37));
    s_raw (s, garbage, sizeof garbage, 0);                      /* does not parse */
    s_raw (s, "", 0, 0);                                        /* empty */
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = "truncated-worker-with-a-long-name";
    hello.host = "somewhere-far-away";
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    uint8_t *data = NULL;
    size_t size = 0;
    assert_int_equal (ak_envelope_pack (&env, &data, &size), 0);
    s_raw (s, data, size - 7, 0);                               /* truncated */
    free (data);
    s_versioned (s, AK_PROTOCOL_VERSION + 1);                   /* a later version */
    s_versioned (s, 0);                                         /* no version */
    s_raw (s, "a", 1, ZMQ_SNDMORE);                             /* two frames */
    s_raw (s, "b", 1, 0);
}

static void s_oversized (const char *endpoint)
{
    static char *big;
    size_t n = AK_MAX_MSG_SIZE + 1;
    if (!big)
        big = ak_calloc (1, n);
    zsock_t *s = s_dealer (endpoint);
    s_raw (s, big, n, 0);
    s_flush_destroy (&s);
}

static void s_send (zsock_t *s, Ak__Envelope *env)
{
    assert_int_equal (ak_envelope_send (s, NULL, 0, env), 0);
}

/* Eleven rejects on the worker endpoint. */
static void s_worker_round (ak_fault_coord_t *c, zsock_t *reg, const char *task_id)
{
    zsock_t *s = s_dealer (c->workers);
    s_malformed (s);                                            /* 6 */
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    req.verb = "cancel";
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;
    s_send (s, &env);                                           /* 7: not a worker body */
    Ak__Envelope henv = AK__ENVELOPE__INIT;
    Ak__Hello bad = AK__HELLO__INIT;
    bad.worker_id = "bad id";
    henv.body_case = AK__ENVELOPE__BODY_HELLO;
    henv.hello = &bad;
    s_send (s, &henv);                                          /* 8: invalid HELLO */

    /* from a registered worker (of a class nothing runs on) */
    Ak__Receipt r = AK__RECEIPT__INIT;
    r.task_id = "B000001.9999";
    r.attempt = 1;
    r.status = "ok";
    Ak__Envelope renv = AK__ENVELOPE__INIT;
    renv.body_case = AK__ENVELOPE__BODY_RECEIPT;
    renv.receipt = &r;
    s_send (reg, &renv);                                        /* 9: unknown task */
    r.task_id = (char *) task_id;
    r.attempt = 99;
    s_send (reg, &renv);                                        /* 10: impossible attempt */
    Ak__TaskStarted st = AK__TASK_STARTED__INIT;
    st.task_id = "B000001.8888";
    st.attempt = 1;
    Ak__Envelope senv = AK__ENVELOPE__INIT;
    senv.body_case = AK__ENVELOPE__BODY_STARTED;
    senv.started = &st;
    s_send (reg, &senv);                                        /* 11: STARTED, unknown task */
    s_flush_destroy (&s);
}

/* Eight rejects on the client endpoint, each answered with an error. */
static void s_client_round (ak_fault_coord_t *c)
{
    zsock_t *s = s_dealer (c->clients);
    s_malformed (s);                                            /* 6 */
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    s_send (s, &env);                                           /* 7: not a request */
    Ak__Envelope henv = AK__ENVELOPE__INIT;
    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = "lost";
    henv.body_case = AK__ENVELOPE__BODY_HELLO;
    henv.hello = &hello;
    s_send (s, &henv);                                          /* 8: a worker body */
    for (int i = 0; i < S_CLIENT_REJECTS; i++) {
        zmq_pollitem_t item = { zsock_resolve (s), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 10000) <= 0)
            fail_msg ("client endpoint: no error reply %d of %d", i + 1, S_CLIENT_REJECTS);
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        assert_true (zmq_msg_recv (&msg, zsock_resolve (s), 0) >= 0);
        Ak__Envelope *e = NULL;
        ak_err_t err = { 0 };
        assert_int_equal (ak_envelope_unpack (zmq_msg_data (&msg), zmq_msg_size (&msg), AK_MAX_MSG_SIZE,
                                              &e, &err), 0);
        zmq_msg_close (&msg);
        assert_int_equal (e->body_case, AK__ENVELOPE__BODY_REPLY);
        assert_true (e->reply->code < 0);
        assert_true (strlen (e->reply->error) > 0);
        ak_envelope_free (&e);
    }
    zsock_destroy (&s);
}

static int s_count_lines (const char *path, const char *needle)
{
    char *data = NULL;
    size_t len = 0;
    if (ak_file_read (path, 64u << 20, &data, &len, NULL) != 0)
        return -1;
    int n = 0;
    for (const char *p = data; (p = strstr (p, needle)); p++)
        n++;
    free (data);
    return n;
}

static void test_hostile_frames_while_a_batch_runs (void **state)
{
    const char *flags[] = { "--heartbeat-ms", "250", "--commit-ms", "5", "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new ("fault-hostile", NULL, flags);
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "hostile", 400, "\"lease_ms\": 10000");
    char *batch = ak_fault_submit (c, bundle);
    assert_string_equal (batch, "B000001");

    /* a registered worker that will never be given work */
    zsock_t *reg = s_dealer (c->workers);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dev = AK__DEVICE__INIT, *devs[1] = { &dev };
    dev.backend = "host";
    dev.device_class = "nothing-runs-here";
    h.worker_id = "hostile-1";
    h.host = "test";
    h.devices = devs;
    h.n_devices = 1;
    h.slots = 1;
    h.heartbeat_ms = 60000;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    s_send (reg, &env);

    int64_t rw0 = ak_fault_stat (c, "rejected", "workers");
    int64_t rc0 = ak_fault_stat (c, "rejected", "clients");
    json_t *st = ak_fault_json (c, "stats", NULL, NULL);
    int64_t closed_w0 = json_integer_value (json_object_get (
        json_object_get (json_object_get (st, "connections"), "workers"), "closed"));
    int64_t closed_c0 = json_integer_value (json_object_get (
        json_object_get (json_object_get (st, "connections"), "clients"), "closed"));
    json_decref (st);

    char *akload = ak_test_bin ("akload");
    char *stats = ak_path_join (c->dir, "akload.json");
    char *load_log = ak_path_join (c->dir, "akload.log");
    char *argv[] = { akload, "--coordinator", c->workers, "--workers", "4", "--prefix", "ok",
                     "--task-ms", "60", "--heartbeat-ms", "250", "--stats-json", stats,
                     "--log-level", "warn", NULL };
    pid_t load = ak_fault_spawn (argv, load_log);
    assert_true (load > 0);

    int rounds = 0;
    char state_buf[32] = "";
    int64_t done_during = 0;
    while (rounds < S_ROUNDS) {
        ak_test_sleep_ms (S_ROUND_MS);
        s_worker_round (c, reg, "B000001.0002");
        s_client_round (c);
        s_oversized (c->workers);
        s_oversized (c->clients);
        if (rounds++ == 0) {
            /* the attack overlapped the batch: it was still open after the
               first round (how many rounds overlap depends on the box's load) */
            ak_fault_batch_state (c, batch, state_buf, sizeof state_buf);
            done_during = ak_fault_count (c, batch, "done");
        }
    }
    fprintf (stderr, "%d hostile rounds sent; after the first the batch was %s (%lld of 401 done)\n", rounds,
             state_buf, (long long) done_during);
    assert_string_equal (state_buf, "open");

    ak_fault_wait_complete (c, batch, 60000);
    /* the last round's worker frames: counted once the coordinator has read them */
    int64_t rw = 0, rc = 0;
    for (int waited = 0; waited < 20000; waited += 50) {
        rw = ak_fault_stat (c, "rejected", "workers") - rw0;
        rc = ak_fault_stat (c, "rejected", "clients") - rc0;
        if (rw >= S_ROUNDS * S_WORKER_REJECTS && rc >= S_ROUNDS * S_CLIENT_REJECTS)
            break;
        ak_test_sleep_ms (50);
    }
    st = ak_fault_json (c, "stats", NULL, NULL);
    int64_t closed_w = json_integer_value (json_object_get (
        json_object_get (json_object_get (st, "connections"), "workers"), "closed")) - closed_w0;
    int64_t closed_c = json_integer_value (json_object_get (
        json_object_get (json_object_get (st, "connections"), "clients"), "closed")) - closed_c0;
    json_decref (st);
    fprintf (stderr, "rejected: workers %lld, clients %lld; closed connections: workers %lld, clients %lld\n",
             (long long) rw, (long long) rc, (long long) closed_w, (long long) closed_c);
    assert_int_equal (rw, S_ROUNDS * S_WORKER_REJECTS);
    assert_int_equal (rc, S_ROUNDS * S_CLIENT_REJECTS);
    assert_true (closed_w >= S_ROUNDS);     /* the oversized frames (and the hostile sockets) */
    assert_true (closed_c >= S_ROUNDS);

    /* warnings are rate-limited: far fewer lines than rejects */
    int warned = s_count_lines (c->log, "rejected a message from peer");
    fprintf (stderr, "%d 'rejected' warnings logged for %lld rejects\n", warned, (long long) (rw + rc));
    assert_true (warned > 0 && warned < (rw + rc) / 2);
    assert_true (s_count_lines (c->log, "more rejected since the last warning") > 0);

    /* the batch did not notice */
    assert_int_equal (ak_fault_check_receipts (c, batch, NULL), 401);
    int status = ak_fault_stop (load, SIGTERM, 10000);
    assert_true (WIFEXITED (status));
    /* (a coordinator stalled past the liveness window by a loaded machine
       would make a worker register again: reported, not asserted) */
    fprintf (stderr, "akload: %lld HELLOs for 4 workers, %lld duplicate acks\n",
             (long long) ak_fault_akload_count (stats, "hellos"),
             (long long) ak_fault_akload_count (stats, "duplicates_acked"));
    zsock_destroy (&reg);
    status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.accepted, 401);

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
        cmocka_unit_test_teardown (test_hostile_frames_while_a_batch_runs, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
