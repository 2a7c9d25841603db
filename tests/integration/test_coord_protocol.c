/*  tests/integration/test_coord_protocol.c: the real akcoord ($AK_BIN_DIR)
    on loopback TCP ports, spoken to with raw ZeroMQ: hostile frames on both
    endpoints are rejected and counted while the coordinator keeps serving;
    a fake worker (a DEALER in this test) registers, is assigned work,
    starts it, delivers receipts and gets acks (duplicates flagged); the
    batch completes with a winner; SIGTERM and a restart keep the state. */
#include "clock.h"
#include "manifest.h"
#include "support.h"
#include <czmq.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cpb.h"
#include "digest.h"
#include "envelope.h"
#include "error.h"
#include "spec.h"
#include "util.h"

typedef struct {
    char    *dir;
    char    *store;
    char    *log;
    char     workers[64];
    char     clients[64];
    pid_t    pid;
    zsock_t *client;
    char    *bundle;
} fx_t;

static fx_t *s_fx;

// ------------------------------------------------------------------ helpers

static zsock_t *s_dealer (const char *endpoint)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    assert_non_null (s);
    zsock_set_linger (s, 0);
    assert_int_equal (zsock_connect (s, "%s", endpoint), 0);
    return s;
}

/* The next envelope on s within timeout_ms, or NULL. */
static Ak__Envelope *s_recv (zsock_t *s, int timeout_ms)
{
    zmq_pollitem_t item = { zsock_resolve (s), 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, timeout_ms) <= 0)
        return NULL;
    zmq_msg_t msg;
    zmq_msg_init (&msg);
    if (zmq_msg_recv (&msg, zsock_resolve (s), 0) < 0) {
        zmq_msg_close (&msg);
        return NULL;
    }
    Ak__Envelope *env = NULL;
    ak_err_t err = { 0 };
    int rc = ak_envelope_unpack (zmq_msg_data (&msg), zmq_msg_size (&msg), AK_MAX_MSG_SIZE, &env, &err);
    zmq_msg_close (&msg);
    if (rc)
        fail_msg ("reply does not decode: %s", err.msg);
    return env;
}

/* The next envelope of a given kind, skipping heartbeats; anything else is
   skipped too unless strict. */
static Ak__Envelope *s_recv_kind_x (zsock_t *s, Ak__Envelope__BodyCase kind, int timeout_ms, bool strict)
{
    for (int waited = 0; waited < timeout_ms; waited += 100) {
        Ak__Envelope *env = s_recv (s, 100);
        if (!env)
            continue;
        if (env->body_case == kind)
            return env;
        if (strict && env->body_case != AK__ENVELOPE__BODY_HEARTBEAT)
            fail_msg ("expected %d, got a %s", (int) kind, ak_envelope_kind (env));
        ak_envelope_free (&env);
    }
    return NULL;
}

static Ak__Envelope *s_recv_kind (zsock_t *s, Ak__Envelope__BodyCase kind, int timeout_ms)
{
    return s_recv_kind_x (s, kind, timeout_ms, true);
}

static void s_send (zsock_t *s, Ak__Envelope *env)
{
    assert_int_equal (ak_envelope_send (s, NULL, 0, env), 0);
}

static void s_send_raw (zsock_t *s, const void *data, size_t len)
{
    assert_true (zmq_send (zsock_resolve (s), data, len, 0) == (int) len);
}

/* One client call on a fresh or the shared DEALER; the reply is the caller's. */
static Ak__ClientReply *s_call (zsock_t *client, const char *verb, const char *arg, const char *body)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    char *args[1] = { (char *) arg };
    req.verb = (char *) verb;
    req.args = arg ? args : NULL;
    req.n_args = arg ? 1 : 0;
    req.body = (char *) (body ? body : "");
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;
    s_send (client, &env);
    Ak__Envelope *r = s_recv (client, 10000);
    if (!r)
        fail_msg ("no reply to '%s'", verb);
    assert_int_equal (r->body_case, AK__ENVELOPE__BODY_REPLY);
    Ak__ClientReply *reply = r->reply;
    r->reply = NULL;
    r->body_case = AK__ENVELOPE__BODY__NOT_SET;
    ak_envelope_free (&r);
    return reply;
}

/* A successful call's JSON answer (the caller json_decref's it). */
static json_t *s_json (const char *verb, const char *arg, const char *body)
{
    Ak__ClientReply *reply = s_call (s_fx->client, verb, arg, body);
    if (reply->code)
        fail_msg ("%s: %d %s", verb, reply->code, reply->error);
    json_error_t jerr;
    json_t *j = json_loads (reply->json, 0, &jerr);
    if (!j)
        fail_msg ("%s: bad JSON: %s", verb, jerr.text);
    ak__client_reply__free_unpacked (reply, NULL);
    return j;
}

static json_int_t s_stat (const char *key, const char *sub)
{
    json_t *j = s_json ("stats", NULL, NULL);
    json_t *v = json_object_get (j, key);
    if (sub)
        v = json_object_get (v, sub);
    json_int_t n = json_integer_value (v);
    json_decref (j);
    return n;
}

/* A counter of `stats`' security section. */
static json_int_t s_stat_sec (const char *key)
{
    json_t *j = s_json ("stats", NULL, NULL);
    json_int_t n = json_integer_value (json_object_get (json_object_get (j, "security"), key));
    json_decref (j);
    return n;
}

static json_int_t s_closed (const char *ep)
{
    json_t *j = s_json ("stats", NULL, NULL);
    json_int_t n = json_integer_value (json_object_get (
        json_object_get (json_object_get (j, "connections"), ep), "closed"));
    json_decref (j);
    return n;
}

static bool s_answers (void *arg)
{
    zsock_t *c = s_dealer (s_fx->clients);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    req.verb = "stats";
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;
    bool ok = ak_envelope_send (c, NULL, 0, &env) == 0;
    Ak__Envelope *r = ok ? s_recv (c, 200) : NULL;
    ok = r != NULL;
    ak_envelope_free (&r);
    zsock_destroy (&c);
    return ok;
}

static void s_start (fx_t *fx)
{
    char *bin = ak_test_bin ("akcoord");
    char *argv[] = { bin, "--store", fx->store, "--workers", fx->workers, "--clients", fx->clients,
                     "--heartbeat-ms", "1000", "--commit-ms", "2", "--log-level", "debug", NULL };
    fx->pid = ak_test_spawn_coord (argv, fx->log);
    free (bin);
    assert_true (fx->pid > 0);
    if (!ak_test_wait (s_answers, NULL, 10000))
        fail_msg ("akcoord does not answer on %s (log: %s)", fx->clients, fx->log);
}

// ----------------------------------------------------------------- fixture

static void s_write_op (const char *dir)
{
    char *sub = ak_path_join (dir, "opa");
    assert_int_equal (ak_mkdir_p (sub, 0700, NULL), 0);
    free (ak_test_write (sub, "spec.json",
        "{\"schema_version\": 1, \"name\": \"opa\", \"keys\": [\"rows\", \"cols\"],"
        " \"dtypes\": [\"float32\"], \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5}},"
        " \"sizes\": [{\"name\": \"small\", \"size\": {\"rows\": 4, \"cols\": 8}},"
        "             {\"name\": \"medium\", \"size\": {\"rows\": 64, \"cols\": 128}}],"
        " \"stability_size\": \"small\", \"flops\": \"rows*cols\", \"bytes\": \"2*rows*cols*b\","
        " \"inputs\": [{\"name\": \"x\", \"count\": \"rows*cols\", \"range\": [-1, 1]}],"
        " \"outputs\": [{\"name\": \"y\", \"count\": \"rows*cols\"}],"
        " \"reference\": \"ref.c\", \"baselines\": [{\"backend\": \"host\", \"source\": \"base.c\"}],"
        " \"candidates\": [{\"name\": \"blocked\", \"backend\": \"host\", \"source\": \"blocked.c\","
        "                   \"params\": {\"BLOCK\": [8, 16]}}]}"));
    free (ak_test_write (sub, "ref.c", "/* reference */\n"));
    free (ak_test_write (sub, "base.c", "/* baseline */\n"));
    free (ak_test_write (sub, "blocked.c", "/* blocked */\n"));
    free (sub);
    char *m = ak_test_write (dir, "batch.json",
        "{\"schema_version\": 1, \"name\": \"proto\", \"targets\": [\"host\"],"
        " \"policy\": {\"lease_ms\": 60000, \"confirm\": false}, \"ops\": [{\"spec\": \"opa/spec.json\"}]}");
    ak_manifest_t *manifest = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_load (m, &manifest, &err))
        fail_msg ("manifest: %s", err.msg);
    s_fx->bundle = ak_manifest_to_bundle (manifest);
    assert_non_null (s_fx->bundle);
    ak_manifest_destroy (&manifest);
    free (m);
}

static int s_setup (void **state)
{
    s_fx = ak_calloc (1, sizeof *s_fx);
    s_fx->dir = ak_test_tmpdir ("coord-protocol");
    s_fx->store = ak_path_join (s_fx->dir, "store");
    s_fx->log = ak_path_join (s_fx->dir, "akcoord.log");
    int ports[2];
    ak_test_free_ports (ports, 2);                /* both at once: apart they can be one port */
    snprintf (s_fx->workers, sizeof s_fx->workers, "tcp://127.0.0.1:%d", ports[0]);
    snprintf (s_fx->clients, sizeof s_fx->clients, "tcp://127.0.0.1:%d", ports[1]);
    s_write_op (s_fx->dir);
    s_start (s_fx);
    s_fx->client = s_dealer (s_fx->clients);
    return 0;
}

static int s_teardown (void **state)
{
    zsock_destroy (&s_fx->client);
    if (s_fx->pid > 0)
        ak_test_stop (s_fx->pid, SIGKILL, 1000);
    char *out = NULL;
    char *cmd = ak_sprintf ("tail -n 40 %s", s_fx->log);
    ak_test_run (cmd, &out);
    fprintf (stderr, "---- last lines of akcoord.log ----\n%s", out ? out : "");
    free (out);
    free (cmd);
    ak_test_rmtree (s_fx->dir);
    free (s_fx->dir);
    free (s_fx->store);
    free (s_fx->log);
    free (s_fx->bundle);
    free (s_fx);
    return 0;
}

// ------------------------------------------------------------------- tests

/* Sends every kind of hostile frame to one endpoint. */
static void s_hostile (zsock_t *s)
{
    uint8_t garbage[32];
    memset (garbage, 0xff, sizeof garbage);
    s_send_raw (s, garbage, sizeof garbage);                    /* does not parse */
    s_send_raw (s, "", 0);                                      /* empty frame */

    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = "truncated-worker";
    hello.host = "somewhere";
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    uint8_t *data = NULL;
    size_t size = 0;
    assert_int_equal (ak_envelope_pack (&env, &data, &size), 0);
    s_send_raw (s, data, size / 2);                             /* truncated */
    free (data);

    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    Ak__Envelope v2 = AK__ENVELOPE__INIT;
    v2.version = AK_PROTOCOL_VERSION + 1;                       /* wrong version */
    v2.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    v2.heartbeat = &hb;
    size = ak__envelope__get_packed_size (&v2);
    data = ak_malloc (size);
    ak__envelope__pack (&v2, data);
    s_send_raw (s, data, size);
    free (data);

    assert_true (zmq_send (zsock_resolve (s), "a", 1, ZMQ_SNDMORE) == 1);   /* two frames */
    assert_true (zmq_send (zsock_resolve (s), "b", 1, 0) == 1);
}

static void test_hostile_frames_counted (void **state)
{
    json_int_t rw0 = s_stat ("rejected", "workers"), rc0 = s_stat ("rejected", "clients");

    /* worker endpoint: five hostile frames, a request (not a worker body) */
    zsock_t *w = s_dealer (s_fx->workers);
    s_hostile (w);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    req.verb = "stats";
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;
    s_send (w, &env);
    /* a non-HELLO from an unknown worker gets DISCONNECT (and is not a reject) */
    Ak__Envelope hb = AK__ENVELOPE__INIT;
    Ak__Heartbeat beat = AK__HEARTBEAT__INIT;
    hb.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    hb.heartbeat = &beat;
    s_send (w, &hb);
    Ak__Envelope *d = s_recv (w, 5000);
    assert_non_null (d);
    assert_int_equal (d->body_case, AK__ENVELOPE__BODY_DISCONNECT);
    assert_non_null (strstr (d->disconnect->reason, "HELLO"));
    ak_envelope_free (&d);
    assert_null (s_recv (w, 200));          /* nothing answers the rejected ones */
    zsock_destroy (&w);

    /* client endpoint: the same five, and a heartbeat; every one gets an error */
    zsock_t *c = s_dealer (s_fx->clients);
    s_hostile (c);
    s_send (c, &hb);
    int expected[] = { AK_EPROTO, AK_EPROTO, AK_EPROTO, AK_EVERSION, AK_EPROTO, AK_EPROTO };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        Ak__Envelope *r = s_recv (c, 5000);
        if (!r)
            fail_msg ("no error reply %zu", i);
        assert_int_equal (r->body_case, AK__ENVELOPE__BODY_REPLY);
        assert_int_equal (r->reply->code, expected[i]);
        assert_true (strlen (r->reply->error) > 0);
        ak_envelope_free (&r);
    }
    zsock_destroy (&c);

    assert_int_equal (s_stat ("rejected", "workers") - rw0, 6);
    assert_int_equal (s_stat ("rejected", "clients") - rc0, 6);
    assert_true (s_stat ("disconnects_sent", NULL) >= 1);
}

typedef struct {
    const char *ep;
    json_int_t  before;
} closed_t;

static bool s_closed_more (void *arg)
{
    closed_t *c = arg;
    return s_closed (c->ep) > c->before;
}

static void test_oversized_frames_dropped (void **state)
{
    size_t n = AK_MAX_MSG_SIZE + 1;
    char *big = ak_calloc (1, n);
    const char *eps[] = { s_fx->workers, s_fx->clients };
    const char *names[] = { "workers", "clients" };
    for (int i = 0; i < 2; i++) {
        zsock_t *s = s_dealer (eps[i]);
        /* let the connection be accepted and settle first */
        Ak__Envelope hb = AK__ENVELOPE__INIT;
        Ak__Heartbeat beat = AK__HEARTBEAT__INIT;
        hb.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
        hb.heartbeat = &beat;
        s_send (s, &hb);
        Ak__Envelope *r = s_recv (s, 5000);
        assert_non_null (r);
        ak_envelope_free (&r);
        closed_t c = { names[i], s_closed (names[i]) };
        s_send_raw (s, big, n);
        if (!ak_test_wait (s_closed_more, &c, 10000))
            fail_msg ("%s endpoint did not drop the connection of an oversized frame", names[i]);
        zsock_destroy (&s);
    }
    free (big);
    /* and it still serves */
    json_t *j = s_json ("stats", NULL, NULL);
    assert_non_null (json_object_get (j, "uptime_ms"));
    json_decref (j);
}

static void test_client_errors (void **state)
{
    Ak__ClientReply *r = s_call (s_fx->client, "frobnicate", NULL, NULL);
    assert_int_equal (r->code, AK_EINVAL);
    assert_string_equal (r->error, "unknown verb 'frobnicate'");
    ak__client_reply__free_unpacked (r, NULL);
    r = s_call (s_fx->client, "show", NULL, NULL);
    assert_int_equal (r->code, AK_EINVAL);
    assert_string_equal (r->error, "show takes TASK [LIMIT [AFTER]], got 0 arguments");
    ak__client_reply__free_unpacked (r, NULL);
    r = s_call (s_fx->client, "status", "B999999", NULL);
    assert_int_equal (r->code, AK_ENOTFOUND);
    assert_string_equal (r->error, "no batch 'B999999'");
    ak__client_reply__free_unpacked (r, NULL);
    r = s_call (s_fx->client, "submit", NULL, "{\"schema_version\": 1}");
    assert_int_equal (r->code, AK_EINVAL);
    assert_non_null (strstr (r->error, "bundle"));
    ak__client_reply__free_unpacked (r, NULL);
    r = s_call (s_fx->client, "submit", NULL, NULL);
    assert_int_equal (r->code, AK_EINVAL);
    ak__client_reply__free_unpacked (r, NULL);
}

static Ak__Envelope s_hello_env (Ak__Hello *h, Ak__Device *dev, Ak__Device **devs)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    ak__hello__init (h);
    ak__device__init (dev);
    dev->backend = "host";
    dev->device_class = "host";
    dev->slots = 1;
    devs[0] = dev;
    h->worker_id = "fake-1";
    h->host = "testhost";
    h->pid = (uint32_t) getpid ();
    h->devices = devs;
    h->n_devices = 1;
    h->slots = 1;
    h->prefetch = 0;
    h->heartbeat_ms = 1000;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = h;
    return env;
}

/* A receipt for a; tune ones time `speedup` against the baseline. */
static Ak__Receipt *s_receipt (const Ak__Assign *a, double speedup)
{
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    ak_cpb_set (&r->task_id, a->task_id);
    r->attempt = a->attempt;
    ak_cpb_set (&r->kind, a->kind);
    ak_cpb_set (&r->op, a->op);
    ak_cpb_set (&r->candidate_name, a->candidate_name);
    ak_cpb_set (&r->status, "ok");
    r->timings = ak_calloc (a->n_workloads, sizeof *r->timings);
    for (size_t i = 0; i < a->n_workloads; i++) {
        Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
        ak__workload_timing__init (t);
        t->workload = (Ak__Workload *) ak_cpb_dup (&a->workloads[i]->base);
        t->baseline = ak_malloc (sizeof *t->baseline);
        ak__stats__init (t->baseline);
        t->baseline->median_us = 100.0;
        t->candidate = ak_malloc (sizeof *t->candidate);
        ak__stats__init (t->candidate);
        t->candidate->median_us = 100.0 / speedup;
        t->speedup = speedup;
        t->speedup_noise = 0.01;
        r->timings[i] = t;
    }
    r->n_timings = a->n_workloads;
    return r;
}

static void s_send_receipt (zsock_t *w, Ak__Receipt *r)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = r;
    s_send (w, &env);
}

static void s_send_started (zsock_t *w, const Ak__Assign *a)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__TaskStarted st = AK__TASK_STARTED__INIT;
    st.task_id = a->task_id;
    st.attempt = a->attempt;
    env.body_case = AK__ENVELOPE__BODY_STARTED;
    env.started = &st;
    s_send (w, &env);
}

static bool s_batch_complete (void *arg)
{
    json_t *j = s_json ("status", "B000001", NULL);
    bool done = strcmp (json_string_value (json_object_get (j, "state")), "complete") == 0;
    json_decref (j);
    return done;
}

static void test_worker_flow (void **state)
{
    /* submit first: the fake worker's HELLO finds work waiting */
    json_t *sub = s_json ("submit", "allow-unserved", s_fx->bundle);
    assert_string_equal (json_string_value (json_object_get (sub, "batch_id")), "B000001");
    assert_int_equal (json_integer_value (json_object_get (sub, "tasks")), 3);
    json_decref (sub);

    zsock_t *w = s_dealer (s_fx->workers);
    Ak__Hello hello;
    Ak__Device dev, *devs[1];
    Ak__Envelope env = s_hello_env (&hello, &dev, devs);
    s_send (w, &env);
    Ak__Envelope *welcome = s_recv (w, 5000);
    assert_non_null (welcome);
    assert_int_equal (welcome->body_case, AK__ENVELOPE__BODY_HEARTBEAT);
    ak_envelope_free (&welcome);

    Ak__Envelope *e = s_recv_kind (w, AK__ENVELOPE__BODY_ASSIGN, 5000);
    assert_non_null (e);
    Ak__Assign *a = e->assign;
    assert_string_equal (a->task_id, "B000001.0001");
    assert_string_equal (a->batch_id, "B000001");
    assert_int_equal (a->attempt, 1);
    assert_int_equal (a->lease_ms, 60000);
    assert_string_equal (a->kind, "preflight");
    assert_string_equal (a->op, "opa");
    assert_string_equal (a->device_class, "host");
    assert_string_equal (a->backend, "host");
    assert_non_null (strstr (a->spec_json, "\"opa\""));
    assert_non_null (a->reference);
    assert_string_equal (a->reference->text, "/* reference */\n");
    assert_true (ak_digest_valid (a->reference->digest));
    assert_non_null (a->baseline);
    assert_string_equal (a->baseline->text, "/* baseline */\n");
    assert_null (a->candidate);
    assert_int_equal (a->n_workloads, 2);
    assert_non_null (a->policy);
    /* credit 1 (slots 1 + prefetch 0): no second assignment yet */
    assert_null (s_recv_kind (w, AK__ENVELOPE__BODY_ASSIGN, 400));

    s_send_started (w, a);
    Ak__Receipt *r = s_receipt (a, 1.0);
    s_send_receipt (w, r);
    Ak__Envelope *ack = NULL, *next = NULL;
    for (int i = 0; i < 2; i++) {
        Ak__Envelope *m = s_recv (w, 5000);
        assert_non_null (m);
        if (m->body_case == AK__ENVELOPE__BODY_HEARTBEAT) {
            ak_envelope_free (&m);
            i--;
            continue;
        }
        if (m->body_case == AK__ENVELOPE__BODY_ACK)
            ack = m;
        else if (m->body_case == AK__ENVELOPE__BODY_ASSIGN)
            next = m;
        else
            fail_msg ("unexpected %s", ak_envelope_kind (m));
    }
    assert_non_null (ack);
    assert_non_null (next);                 /* the receipt's commit freed the slot */
    assert_string_equal (ack->ack->task_id, "B000001.0001");
    assert_int_equal (ack->ack->attempt, 1);
    assert_string_equal (ack->ack->receipt_id, "R00000001");
    assert_false (ack->ack->duplicate);
    ak_envelope_free (&ack);

    /* a second copy: stored, flagged, never counted */
    s_send_receipt (w, r);
    ack = s_recv_kind (w, AK__ENVELOPE__BODY_ACK, 5000);
    assert_non_null (ack);
    assert_string_equal (ack->ack->task_id, "B000001.0001");
    assert_string_equal (ack->ack->receipt_id, "R00000002");
    assert_true (ack->ack->duplicate);
    ak_envelope_free (&ack);
    ak__receipt__free_unpacked (r, NULL);
    assert_int_equal (s_stat ("receipts_accepted", NULL), 1);
    assert_int_equal (s_stat ("receipts_duplicate", NULL), 1);

    /* a receipt for a task that does not exist is rejected, never acked */
    json_int_t rw0 = s_stat ("rejected", "workers");
    Ak__Assign ghost = *next->assign;
    ghost.task_id = "B000001.9999";
    r = s_receipt (&ghost, 1.0);
    s_send_receipt (w, r);
    ak__receipt__free_unpacked (r, NULL);
    assert_null (s_recv_kind (w, AK__ENVELOPE__BODY_ACK, 300));
    assert_int_equal (s_stat ("rejected", "workers") - rw0, 1);

    /* show: both receipts, in arrival order, the copy flagged */
    json_t *show = s_json ("show", "B000001.0001", NULL);
    json_t *task = json_object_get (show, "task");
    assert_string_equal (json_string_value (json_object_get (task, "state")), "done");
    assert_string_equal (json_string_value (json_object_get (task, "receipt_id")), "R00000001");
    assert_int_equal (json_integer_value (json_object_get (task, "duplicates")), 1);
    json_t *rs = json_object_get (show, "receipts");
    assert_int_equal (json_array_size (rs), 2);
    assert_string_equal (json_string_value (json_object_get (json_array_get (rs, 0), "receipt_id")), "R00000001");
    assert_false (json_is_true (json_object_get (json_array_get (rs, 0), "duplicate")));
    assert_true (json_is_true (json_object_get (json_array_get (rs, 1), "duplicate")));
    json_decref (show);

    /* the two tune tasks: BLOCK=8 at 2x, BLOCK=16 at 1.5x */
    a = next->assign;
    assert_string_equal (a->kind, "tune");
    assert_non_null (a->candidate);
    assert_string_equal (a->candidate->text, "/* blocked */\n");
    assert_int_equal (a->n_params, 1);
    s_send_started (w, a);
    r = s_receipt (a, a->params[0]->value == 8 ? 2.0 : 1.5);
    s_send_receipt (w, r);
    ak__receipt__free_unpacked (r, NULL);
    /* the slot is free once the receipt's commit holds: the ACK first */
    Ak__Envelope *third = s_recv_kind_x (w, AK__ENVELOPE__BODY_ASSIGN, 5000, false);
    assert_non_null (third);
    a = third->assign;
    s_send_started (w, a);
    r = s_receipt (a, a->params[0]->value == 8 ? 2.0 : 1.5);
    s_send_receipt (w, r);
    ak__receipt__free_unpacked (r, NULL);
    ak_envelope_free (&third);
    ak_envelope_free (&next);
    ak_envelope_free (&e);

    if (!ak_test_wait (s_batch_complete, NULL, 10000))
        fail_msg ("batch B000001 did not complete");
    json_t *st = s_json ("status", "B000001", NULL);
    json_t *winners = json_object_get (st, "winners");
    assert_int_equal (json_array_size (winners), 1);
    json_t *win = json_array_get (winners, 0);
    assert_true (json_is_true (json_object_get (win, "promoted")));
    assert_string_equal (json_string_value (json_object_get (win, "task_id")), "B000001.0002");
    assert_true (json_real_value (json_object_get (win, "speedup")) > 1.99);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (st, "counts"), "done")), 3);
    json_decref (st);

    json_t *rep = s_json ("report", "B000001", NULL);
    json_t *op = json_array_get (json_object_get (rep, "ops"), 0);
    assert_string_equal (json_string_value (json_object_get (op, "op")), "opa");
    assert_int_equal (json_array_size (json_object_get (op, "candidates")), 2);
    assert_int_equal (json_array_size (json_object_get (op, "failures")), 0);
    json_decref (rep);

    json_t *ws = s_json ("workers", NULL, NULL);
    json_t *w0 = json_array_get (json_object_get (ws, "workers"), 0);
    assert_string_equal (json_string_value (json_object_get (w0, "worker_id")), "fake-1");
    assert_string_equal (json_string_value (json_object_get (w0, "state")), "alive");
    assert_int_equal (json_integer_value (json_object_get (w0, "tasks_done")), 3);
    json_decref (ws);
    /* say goodbye: a fake-1 still alive (for 3 heartbeats) when the next
       test submits would be sent that batch's first task over a closing
       connection, whenever libzmq has not yet noticed it close */
    Ak__Envelope bye = AK__ENVELOPE__INIT;
    Ak__Disconnect dis = AK__DISCONNECT__INIT;
    dis.reason = "test over";
    bye.body_case = AK__ENVELOPE__BODY_DISCONNECT;
    bye.disconnect = &dis;
    s_send (w, &bye);
    json_t *after = NULL;
    for (int i = 0; i < 100; i++) {
        json_decref (after);
        after = s_json ("workers", NULL, NULL);
        json_t *a0 = json_array_get (json_object_get (after, "workers"), 0);
        if (strcmp (json_string_value (json_object_get (a0, "state")), "dead") == 0)
            break;
        usleep (20 * 1000);
    }
    assert_string_equal (json_string_value (json_object_get (
        json_array_get (json_object_get (after, "workers"), 0), "state")), "dead");
    json_decref (after);
    zsock_destroy (&w);
}


static void s_hello_as (zsock_t *w, const char *id, Ak__TaskRef **running, size_t nrunning)
{
    Ak__Hello hello;
    Ak__Device dev, *devs[1];
    Ak__Envelope env = s_hello_env (&hello, &dev, devs);
    hello.worker_id = (char *) id;
    hello.running = running;
    hello.n_running = nrunning;
    s_send (w, &env);
}

static void test_worker_death_requeues (void **state)
{
    json_t *sub = s_json ("submit", "allow-unserved", s_fx->bundle);
    assert_string_equal (json_string_value (json_object_get (sub, "batch_id")), "B000002");
    json_decref (sub);

    /* fake-2 takes the first task and goes silent */
    zsock_t *w2 = s_dealer (s_fx->workers);
    s_hello_as (w2, "fake-2", NULL, 0);
    Ak__Envelope *e2 = s_recv_kind (w2, AK__ENVELOPE__BODY_ASSIGN, 5000);
    assert_non_null (e2);
    assert_string_equal (e2->assign->task_id, "B000002.0001");
    assert_int_equal (e2->assign->attempt, 1);
    s_send_started (w2, e2->assign);

    /* after 3 silent heartbeat intervals it is dead: DISCONNECT, and the
       task goes back to the queue at attempt 2, to fake-3 */
    Ak__Envelope *d = s_recv_kind (w2, AK__ENVELOPE__BODY_DISCONNECT, 8000);
    assert_non_null (d);
    ak_envelope_free (&d);
    assert_true (s_stat ("workers_died", NULL) >= 1);
    zsock_t *w3 = s_dealer (s_fx->workers);
    s_hello_as (w3, "fake-3", NULL, 0);
    Ak__Envelope *e3 = s_recv_kind (w3, AK__ENVELOPE__BODY_ASSIGN, 5000);
    assert_non_null (e3);
    assert_string_equal (e3->assign->task_id, "B000002.0001");
    assert_int_equal (e3->assign->attempt, 2);
    json_t *show = s_json ("show", "B000002.0001", NULL);
    json_t *task = json_object_get (show, "task");
    assert_int_equal (json_integer_value (json_object_get (task, "attempt")), 2);
    assert_string_equal (json_string_value (json_object_get (task, "state")), "leased");
    assert_string_equal (json_string_value (json_object_get (task, "worker_id")), "fake-3");
    assert_non_null (strstr (json_string_value (json_object_get (task, "last_error")), "worker fake-2 died"));
    json_decref (show);

    /* fake-2 comes back still holding attempt 1 and delivers first: the
       current attempt is fake-3's, so its HELLO keeps nothing and its
       receipt is refused (an ACK saying so, nothing stored) ... */
    json_int_t claims0 = s_stat_sec ("claims_refused"), refused0 = s_stat_sec ("receipts_refused");
    Ak__TaskRef ref = AK__TASK_REF__INIT, *refs[1] = { &ref };
    ref.task_id = "B000002.0001";
    ref.attempt = 1;
    s_hello_as (w2, "fake-2", refs, 1);
    Ak__Receipt *r = s_receipt (e2->assign, 1.0);
    s_send_receipt (w2, r);
    ak__receipt__free_unpacked (r, NULL);
    Ak__Envelope *ack = s_recv_kind_x (w2, AK__ENVELOPE__BODY_ACK, 5000, false);
    assert_non_null (ack);
    assert_int_equal (ack->ack->attempt, 1);
    assert_non_null (strstr (ack->ack->refused, "the task is at attempt 2"));
    assert_string_equal (ack->ack->receipt_id, "");
    ak_envelope_free (&ack);
    assert_int_equal (s_stat_sec ("claims_refused") - claims0, 1);
    assert_int_equal (s_stat_sec ("receipts_refused") - refused0, 1);
    /* ... and attempt 2's is the one accepted */
    s_send_started (w3, e3->assign);
    r = s_receipt (e3->assign, 1.0);
    s_send_receipt (w3, r);
    ak__receipt__free_unpacked (r, NULL);
    ack = s_recv_kind_x (w3, AK__ENVELOPE__BODY_ACK, 5000, false);
    assert_non_null (ack);
    assert_int_equal (ack->ack->attempt, 2);
    assert_false (ack->ack->duplicate);
    assert_string_equal (ack->ack->refused, "");
    ak_envelope_free (&ack);

    /* cancel the rest: idempotent, the batch and its open tasks cancelled */
    json_t *c = s_json ("cancel", "B000002", NULL);
    assert_string_equal (json_string_value (json_object_get (c, "state")), "cancelled");
    json_t *counts = json_object_get (c, "counts");
    assert_int_equal (json_integer_value (json_object_get (counts, "done")), 1);
    assert_int_equal (json_integer_value (json_object_get (counts, "cancelled")), 2);
    json_decref (c);
    c = s_json ("cancel", "B000002", NULL);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (c, "counts"), "cancelled")), 2);
    json_decref (c);

    ak_envelope_free (&e2);
    ak_envelope_free (&e3);
    zsock_destroy (&w2);
    zsock_destroy (&w3);
}

/* Waits until the coordinator has recorded STARTED for TASK_ID on WORKER_ID:
   a started message still in flight when the coordinator stops is lost, and
   its lease then has no deadline to survive the restart. */
static void s_wait_started (const char *worker_id, const char *task_id)
{
    uint64_t until = ak_clock_mono_ms () + 10000;
    while (ak_clock_mono_ms () < until) {
        json_t *ws = s_json ("workers", NULL, NULL);
        bool started = false;
        json_t *arr = json_object_get (ws, "workers");
        for (size_t i = 0; i < json_array_size (arr); i++) {
            json_t *x = json_array_get (arr, i);
            if (strcmp (json_string_value (json_object_get (x, "worker_id")), worker_id))
                continue;
            json_t *leases = json_object_get (x, "leases");
            for (size_t k = 0; k < json_array_size (leases); k++) {
                json_t *l = json_array_get (leases, k);
                if (strcmp (json_string_value (json_object_get (l, "task_id")), task_id) == 0
                    && json_is_true (json_object_get (l, "started")))
                    started = true;
            }
        }
        json_decref (ws);
        if (started)
            return;
        zclock_sleep (20);
    }
    fail_msg ("the coordinator never recorded %s started on %s", task_id, worker_id);
}

static void test_sigterm_and_restart (void **state)
{
    /* a batch with a task leased and started when the coordinator stops */
    json_t *sub = s_json ("submit", "allow-unserved", s_fx->bundle);
    assert_string_equal (json_string_value (json_object_get (sub, "batch_id")), "B000003");
    json_decref (sub);
    zsock_t *w4 = s_dealer (s_fx->workers);
    s_hello_as (w4, "fake-4", NULL, 0);
    Ak__Envelope *e4 = s_recv_kind_x (w4, AK__ENVELOPE__BODY_ASSIGN, 5000, false);
    assert_non_null (e4);
    assert_string_equal (e4->assign->task_id, "B000003.0001");
    uint64_t started_ms = ak_clock_mono_ms ();
    s_send_started (w4, e4->assign);
    s_wait_started ("fake-4", "B000003.0001");
    zsock_destroy (&w4);

    int status = ak_test_stop (s_fx->pid, SIGTERM, 10000);
    s_fx->pid = 0;
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    zsock_destroy (&s_fx->client);

    s_start (s_fx);
    s_fx->client = s_dealer (s_fx->clients);
    json_t *list = s_json ("list", NULL, NULL);
    assert_int_equal (json_array_size (json_object_get (list, "batches")), 3);
    json_t *b2 = json_array_get (json_object_get (list, "batches"), 1);
    assert_string_equal (json_string_value (json_object_get (b2, "state")), "cancelled");
    json_t *b = json_array_get (json_object_get (list, "batches"), 0);
    assert_string_equal (json_string_value (json_object_get (b, "batch_id")), "B000001");
    assert_string_equal (json_string_value (json_object_get (b, "state")), "complete");
    assert_int_equal (json_array_size (json_object_get (b, "winners")), 1);
    json_decref (list);
    json_t *ws = s_json ("workers", NULL, NULL);
    json_t *w0 = json_array_get (json_object_get (ws, "workers"), 0);
    assert_int_equal (json_array_size (json_object_get (ws, "workers")), 4);
    assert_string_equal (json_string_value (json_object_get (w0, "worker_id")), "fake-1");
    assert_string_equal (json_string_value (json_object_get (w0, "state")), "dead");
    assert_int_equal (json_integer_value (json_object_get (w0, "tasks_done")), 3);
    json_decref (ws);

    /* the lease survived the restart: fake-4 claims it and delivers */
    json_t *show = s_json ("show", "B000003.0001", NULL);
    assert_string_equal (json_string_value (json_object_get (json_object_get (show, "task"), "state")), "leased");
    json_decref (show);
    w4 = s_dealer (s_fx->workers);
    Ak__TaskRef ref = AK__TASK_REF__INIT, *refs[1] = { &ref };
    ref.task_id = "B000003.0001";
    ref.attempt = 1;
    s_hello_as (w4, "fake-4", refs, 1);
    Ak__Envelope *hb = s_recv_kind (w4, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (hb);
    /* it holds one task with one slot: no new assignment */
    assert_int_equal (hb->heartbeat->credits, 0);
    ak_envelope_free (&hb);
    ws = s_json ("workers", NULL, NULL);
    json_t *w = NULL;
    for (size_t i = 0; i < json_array_size (json_object_get (ws, "workers")); i++) {
        json_t *x = json_array_get (json_object_get (ws, "workers"), i);
        if (strcmp (json_string_value (json_object_get (x, "worker_id")), "fake-4") == 0)
            w = x;
    }
    assert_non_null (w);
    json_t *lease = json_array_get (json_object_get (w, "leases"), 0);
    assert_string_equal (json_string_value (json_object_get (lease, "task_id")), "B000003.0001");
    /* its deadline is the one set when it started (60 s lease), not a fresh
       one from the restart: however long the restart took on a busy box */
    json_int_t left = json_integer_value (json_object_get (lease, "expires_in_ms"));
    json_int_t since = (json_int_t) (ak_clock_mono_ms () - started_ms);
    assert_true (left > 0);
    assert_true (left <= 60000 - since + 1000);
    json_decref (ws);
    Ak__Receipt *r = s_receipt (e4->assign, 1.0);
    s_send_receipt (w4, r);
    ak__receipt__free_unpacked (r, NULL);
    Ak__Envelope *ack = s_recv_kind_x (w4, AK__ENVELOPE__BODY_ACK, 5000, false);
    assert_non_null (ack);
    assert_string_equal (ack->ack->task_id, "B000003.0001");
    assert_false (ack->ack->duplicate);
    ak_envelope_free (&ack);
    ak_envelope_free (&e4);
    zsock_destroy (&w4);

    /* shutdown: replies {}, then exits 0 */
    json_t *j = s_json ("shutdown", NULL, NULL);
    assert_int_equal (json_object_size (j), 0);
    json_decref (j);
    status = ak_test_stop (s_fx->pid, 0, 10000);
    s_fx->pid = 0;
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_hostile_frames_counted),
        cmocka_unit_test (test_oversized_frames_dropped),
        cmocka_unit_test (test_client_errors),
        cmocka_unit_test (test_worker_flow),
        cmocka_unit_test (test_worker_death_requeues),
        cmocka_unit_test (test_sigterm_and_restart),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
