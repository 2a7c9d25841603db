/*  tests/integration/test_auth.c: the real akcoord with CURVE (--cert,
    --keys) over loopback: unknown keys get no application data, a viewer
    reads but changes nothing, an operator may, a worker key only works on
    the workers endpoint, a revoked worker is dropped and cannot come back,
    and the limits: malformed frames drop a peer, a full client queue says
    "busy", akcoord will not start without --cert/--keys or --plain. */
#include "integration.h"

#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "envelope.h"
#include "util.h"

typedef ak_it_fx_t fx_t;                  /* integration.h: the keys and akcoord with CURVE */

static fx_t *s_fx;

/* A DEALER with the certificate cert (NULL: plain) to endpoint. */
static zsock_t *s_dealer (const char *endpoint, const char *cert)
{
    return ak_it_dealer (endpoint, cert, s_fx->server_pub);
}

static Ak__Envelope *s_recv (zsock_t *s, int timeout_ms)
{
    zmq_pollitem_t item = { zsock_resolve (s), 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, timeout_ms) <= 0)
        return NULL;
    zmq_msg_t m;
    zmq_msg_init (&m);
    if (zmq_msg_recv (&m, zsock_resolve (s), 0) < 0) {
        zmq_msg_close (&m);
        return NULL;
    }
    Ak__Envelope *env = NULL;
    ak_err_t err = { 0 };
    ak_envelope_unpack (zmq_msg_data (&m), zmq_msg_size (&m), 0, &env, &err);
    zmq_msg_close (&m);
    return env;
}

static void s_request (zsock_t *s, const char *verb, const char *arg, const char *body)
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
    assert_int_equal (ak_envelope_send (s, NULL, 0, &env), 0);
}

/* The reply to one request, or NULL when none came within timeout_ms. */
static Ak__ClientReply *s_call (zsock_t *s, const char *verb, const char *arg, const char *body,
                                int timeout_ms)
{
    s_request (s, verb, arg, body);
    Ak__Envelope *r = s_recv (s, timeout_ms);
    if (!r)
        return NULL;
    assert_int_equal (r->body_case, AK__ENVELOPE__BODY_REPLY);
    Ak__ClientReply *reply = r->reply;
    r->reply = NULL;
    r->body_case = AK__ENVELOPE__BODY__NOT_SET;
    ak_envelope_free (&r);
    return reply;
}

/* A counter of the operator's `stats`: key, then sub (may be NULL). */
static json_int_t s_stat (const char *key, const char *sub, const char *sub2)
{
    zsock_t *s = s_dealer (s_fx->clients, s_fx->op);
    Ak__ClientReply *r = s_call (s, "stats", NULL, NULL, 10000);
    if (!r || r->code)
        fail_msg ("operator stats: %s", r ? r->error : "no answer");
    json_t *j = json_loads (r->json, 0, NULL);
    assert_non_null (j);
    json_t *v = json_object_get (j, key);
    if (sub)
        v = json_object_get (v, sub);
    if (sub2)
        v = json_object_get (v, sub2);
    json_int_t n = json_integer_value (v);
    json_decref (j);
    ak__client_reply__free_unpacked (r, NULL);
    zsock_destroy (&s);
    return n;
}

static bool s_answers (void *arg)
{
    (void) arg;
    zsock_t *s = s_dealer (s_fx->clients, s_fx->op);
    Ak__ClientReply *r = s_call (s, "stats", NULL, NULL, 300);
    bool ok = r && r->code == 0;
    if (r)
        ak__client_reply__free_unpacked (r, NULL);
    zsock_destroy (&s);
    return ok;
}

static int s_setup_with (void **state, const char *const *extra)
{
    fx_t *fx = s_fx = ak_it_fx_new ("auth", AK_ROLE_OPERATOR);
    ak_it_fx_start (fx, extra);
    *state = fx;
    return 0;
}

static int s_setup (void **state)
{
    return s_setup_with (state, NULL);
}

static int s_setup_limits (void **state)
{
    static const char *const extra[] = { "--malformed-max", "3", "--client-queue", "2", NULL };
    return s_setup_with (state, extra);
}

static int s_teardown (void **state)
{
    fx_t *fx = *state;
    ak_it_fx_destroy (&fx);
    s_fx = NULL;
    return 0;
}

/* The first message of kind within timeout_ms (others skipped), or NULL. */
static Ak__Envelope *s_recv_kind (zsock_t *s, Ak__Envelope__BodyCase kind, int timeout_ms)
{
    int64_t until = zclock_mono () + timeout_ms;
    while (zclock_mono () < until) {
        Ak__Envelope *env = s_recv (s, (int) (until - zclock_mono ()));
        if (env && env->body_case == kind)
            return env;
        ak_envelope_free (&env);
    }
    return NULL;
}

/* True when a DISCONNECT with reason comes within timeout_ms (other
   messages, and DISCONNECTs for silence, skipped: the test workers send no
   heartbeats). */
static bool s_disconnected (zsock_t *s, const char *reason, int timeout_ms)
{
    int64_t until = zclock_mono () + timeout_ms;
    while (zclock_mono () < until) {
        Ak__Envelope *env = s_recv_kind (s, AK__ENVELOPE__BODY_DISCONNECT, (int) (until - zclock_mono ()));
        bool match = env && strcmp (env->disconnect->reason, reason) == 0;
        ak_envelope_free (&env);
        if (match)
            return true;
    }
    return false;
}

static const char *s_worker_state (const char *id)
{
    static char state[16];
    zsock_t *s = s_dealer (s_fx->clients, s_fx->viewer);
    Ak__ClientReply *r = s_call (s, "workers", NULL, NULL, 10000);
    assert_non_null (r);
    assert_int_equal (r->code, 0);
    json_t *j = json_loads (r->json, 0, NULL);
    snprintf (state, sizeof state, "absent");
    size_t i;
    json_t *w;
    json_array_foreach (json_object_get (j, "workers"), i, w)
        if (strcmp (json_string_value (json_object_get (w, "worker_id")), id) == 0)
            snprintf (state, sizeof state, "%s", json_string_value (json_object_get (w, "state")));
    json_decref (j);
    ak__client_reply__free_unpacked (r, NULL);
    zsock_destroy (&s);
    return state;
}

// ==================================================================== tests

/* Unknown keys and plain peers never get a byte back; each refused
   handshake is counted per endpoint. */
/* A HELLO from a peer whose handshake is refused: sent, or no connection left to send it on. */
static void s_hello_refused (zsock_t *w, const char *id)
{
    const int rc = ak_it_hello_rc (w, id);
    if (rc != 0 && rc != AK_EUNAVAIL)
        fail_msg ("HELLO as %s: %s", id, ak_strerror (rc));
}

static void test_unknown_keys_refused (void **state)
{
    (void) state;
    json_int_t before_c = s_stat ("security", "handshakes_refused", "clients");
    json_int_t before_w = s_stat ("security", "handshakes_refused", "workers");

    zsock_t *c = s_dealer (s_fx->clients, s_fx->stranger);
    assert_null (s_call (c, "stats", NULL, NULL, 1000));
    zsock_destroy (&c);
    zsock_t *p = s_dealer (s_fx->clients, NULL);          /* no CURVE at all */
    assert_null (s_call (p, "stats", NULL, NULL, 500));
    zsock_destroy (&p);

    /* the HELLO goes out, or finds no connection: a refused handshake may
       have torn it down already (AK_EUNAVAIL); refused either way */
    zsock_t *w = s_dealer (s_fx->workers, s_fx->stranger);
    s_hello_refused (w, "intruder");
    assert_null (s_recv (w, 1000));
    zsock_destroy (&w);
    /* a client key on the workers endpoint, a worker key on the clients one */
    w = s_dealer (s_fx->workers, s_fx->op);
    s_hello_refused (w, "operator-as-worker");
    assert_null (s_recv (w, 1000));
    zsock_destroy (&w);
    c = s_dealer (s_fx->clients, s_fx->w1);
    assert_null (s_call (c, "stats", NULL, NULL, 1000));
    zsock_destroy (&c);

    assert_true (s_stat ("security", "handshakes_refused", "clients") >= before_c + 2);
    assert_true (s_stat ("security", "handshakes_refused", "workers") >= before_w + 2);
    assert_string_equal (s_worker_state ("intruder"), "absent");
    assert_string_equal (s_worker_state ("operator-as-worker"), "absent");
}

/* A viewer reads; every verb that changes something is refused, by name. */
static void test_viewer_reads_only (void **state)
{
    (void) state;
    zsock_t *v = s_dealer (s_fx->clients, s_fx->viewer);
    const char *reads[] = { "stats", "list", "workers", "profile-list" };
    for (size_t i = 0; i < 4; i++) {
        Ak__ClientReply *r = s_call (v, reads[i], NULL, NULL, 10000);
        assert_non_null (r);
        if (r->code)
            fail_msg ("viewer %s: %s", reads[i], r->error);
        ak__client_reply__free_unpacked (r, NULL);
    }
    json_int_t refused = s_stat ("security", "verbs_refused", NULL);
    struct { const char *verb, *arg, *body; } writes[] = {
        { "submit", NULL, "{}" }, { "cancel", "B000001", NULL }, { "resume", "B000001", NULL },
        { "retry", "B000001", NULL }, { "profile-install", "B000001", NULL },
        { "profile-import", "x", "{}" }, { "shutdown", NULL, NULL }, { "verify", "B000001", NULL },
        { "profile-gate", "x", "{}" },
    };
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
        Ak__ClientReply *r = s_call (v, writes[i].verb, writes[i].arg, writes[i].body, 10000);
        assert_non_null (r);
        assert_int_equal (r->code, AK_EDENIED);
        char *want = ak_sprintf ("refused: viewer key bob may not %s", writes[i].verb);
        assert_string_equal (r->error, want);
        free (want);
        ak__client_reply__free_unpacked (r, NULL);
    }
    zsock_destroy (&v);
    assert_int_equal (s_stat ("security", "verbs_refused", NULL), refused + (json_int_t) (sizeof writes / sizeof writes[0]));
    assert_true (ak_test_wait (s_answers, NULL, 2000));     /* shutdown did nothing */
}

/* The operator's writes reach the verbs (which then judge the arguments). */
static void test_operator_may_write (void **state)
{
    (void) state;
    zsock_t *o = s_dealer (s_fx->clients, s_fx->op);
    Ak__ClientReply *r = s_call (o, "cancel", "B999999", NULL, 10000);
    assert_non_null (r);
    assert_int_equal (r->code, AK_ENOTFOUND);
    ak__client_reply__free_unpacked (r, NULL);
    r = s_call (o, "submit", NULL, "{\"not\": \"a bundle\"}", 10000);
    assert_non_null (r);
    assert_int_equal (r->code, AK_EINVAL);
    assert_null (strstr (r->error, "refused"));
    ak__client_reply__free_unpacked (r, NULL);
    zsock_destroy (&o);
}

/* A worker whose key is removed is dropped (DISCONNECT, dead), its
   connection gets nothing more and a new one fails the handshake; the
   other worker stays.  The first removal is seen by the directory watch,
   the second by SIGHUP. */
static void test_revoked_worker_dropped (void **state)
{
    (void) state;
    zsock_t *w1 = s_dealer (s_fx->workers, s_fx->w1);
    zsock_t *w2 = s_dealer (s_fx->workers, s_fx->w2);
    ak_it_hello (w1, "w1");
    ak_it_hello (w2, "w2");
    Ak__Envelope *e = s_recv_kind (w1, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    e = s_recv_kind (w2, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    assert_string_equal (s_worker_state ("w1"), "alive");

    char *pub = ak_strdup (s_fx->w1);
    pub[strlen (pub) - strlen ("_secret")] = '\0';
    assert_int_equal (unlink (pub), 0);
    if (!s_disconnected (w1, "your key was revoked", 5000))
        fail_msg ("no DISCONNECT for the revoked worker (log: %s)", s_fx->log);
    assert_string_equal (s_worker_state ("w1"), "dead");
    assert_int_equal (s_stat ("security", "workers_revoked", NULL), 1);

    /* the old connection: nothing (the HELLO may not even be queued: once
       the coordinator has dropped the connection the socket may have no
       peer, AK_EUNAVAIL, seen on a loaded box); a new one: refused at the
       handshake */
    json_int_t refused = s_stat ("security", "handshakes_refused", "workers");
    int hrc = ak_it_hello_rc (w1, "w1");
    if (hrc != 0 && hrc != AK_EUNAVAIL)
        fail_msg ("HELLO on the revoked connection: %d", hrc);
    assert_null (s_recv_kind (w1, AK__ENVELOPE__BODY_HEARTBEAT, 1000));
    zsock_destroy (&w1);
    w1 = s_dealer (s_fx->workers, s_fx->w1);
    ak_it_hello (w1, "w1");
    assert_null (s_recv (w1, 1000));
    assert_string_equal (s_worker_state ("w1"), "dead");
    assert_true (s_stat ("security", "handshakes_refused", "workers") > refused);
    assert_true (s_stat ("security", "unauthorised_messages", NULL) >= 1);
    zsock_destroy (&w1);

    /* w2 is untouched (silent, so maybe dead for silence: it says HELLO
       again); SIGHUP re-reads at once */
    while ((e = s_recv (w2, 50)))
        ak_envelope_free (&e);
    ak_it_hello (w2, "w2");
    e = s_recv_kind (w2, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    char *pub2 = ak_strdup (s_fx->w2);
    pub2[strlen (pub2) - strlen ("_secret")] = '\0';
    assert_int_equal (unlink (pub2), 0);
    assert_int_equal (kill (s_fx->pid, SIGHUP), 0);
    if (!s_disconnected (w2, "your key was revoked", 5000))
        fail_msg ("no DISCONNECT after SIGHUP (log: %s)", s_fx->log);
    assert_int_equal (s_stat ("security", "workers_revoked", NULL), 2);
    zsock_destroy (&w2);
    free (pub);
    free (pub2);
}

/* A worker key cannot take over the live registration of another key. */
static void test_worker_id_bound_to_key (void **state)
{
    (void) state;
    zsock_t *w1 = s_dealer (s_fx->workers, s_fx->w1);
    ak_it_hello (w1, "w1");
    Ak__Envelope *e = s_recv_kind (w1, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    zsock_t *w2 = s_dealer (s_fx->workers, s_fx->w2);
    ak_it_hello (w2, "w1");
    assert_true (s_disconnected (w2, "worker id w1 is registered with another key", 5000));
    assert_string_equal (s_worker_state ("w1"), "alive");
    zsock_destroy (&w2);
    zsock_destroy (&w1);
}

/* A worker key registers one worker id unless its certificate says more
   (metadata workers = "N"): a second id of the same key is refused and
   counted, the first stays alive. */
/* Lines of file that contain needle (0 when it cannot be read). */
static int s_log_count (const char *file, const char *needle)
{
    FILE *f = fopen (file, "r");
    char line[4096];
    int n = 0;
    while (f && fgets (line, sizeof line, f))
        n += strstr (line, needle) != NULL;
    if (f)
        fclose (f);
    return n;
}

static void test_one_key_one_worker_id (void **state)
{
    (void) state;
    zsock_t *w1 = s_dealer (s_fx->workers, s_fx->w1);
    ak_it_hello (w1, "w1");
    Ak__Envelope *e = s_recv_kind (w1, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    json_int_t before = s_stat ("security", "registrations_refused", NULL);
    zsock_t *again = s_dealer (s_fx->workers, s_fx->w1);
    ak_it_hello (again, "w1-second");
    assert_true (s_disconnected (again, "worker key w1 may register 1 worker id and has 1 already: "
                                 "not w1-second (docs/operations.md)", 5000));
    assert_int_equal (s_stat ("security", "registrations_refused", NULL) - before, 1);
    assert_string_equal (s_worker_state ("w1"), "alive");
    assert_string_equal (s_worker_state ("w1-second"), "absent");

    /* a key whose certificate allows two: two ids, not a third (the
       certificate is made aside, then moved in: one change to the ring) */
    char *aside = ak_path_join (s_fx->dir, "aside");
    char *secret = ak_it_key (aside, "w3", AK_ROLE_WORKER);
    char *pub = ak_path_join (aside, "worker/w3.key");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal (ak_file_read (pub, 1 << 20, &text, &len, NULL), 0);
    char *meta = strstr (text, "metadata\n");
    assert_non_null (meta);
    meta += strlen ("metadata\n");
    char *edited = ak_sprintf ("%.*s    workers = \"2\"\n%s", (int) (meta - text), text, meta);
    assert_int_equal (ak_file_write_atomic (pub, edited, strlen (edited), NULL), 0);
    char *into = ak_path_join (s_fx->keys, "worker/w3.key");
    int rereads = s_log_count (s_fx->log, "keys: re-read");
    assert_int_equal (rename (pub, into), 0);
    free (into);
    free (edited);
    free (text);
    free (pub);
    free (aside);
    /* the ring is read again on a later tick: wait for it, however busy the box */
    uint64_t until = ak_clock_mono_ms () + 20000;
    while (s_log_count (s_fx->log, "keys: re-read") == rereads && ak_clock_mono_ms () < until)
        usleep (20 * 1000);
    assert_true (s_log_count (s_fx->log, "keys: re-read") > rereads);
    zsock_t *a = s_dealer (s_fx->workers, secret), *b = s_dealer (s_fx->workers, secret);
    zsock_t *third = s_dealer (s_fx->workers, secret);
    ak_it_hello (a, "w3-a");
    e = s_recv_kind (a, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    ak_it_hello (b, "w3-b");
    e = s_recv_kind (b, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    ak_it_hello (third, "w3-c");
    assert_true (s_disconnected (third, "worker key w3 may register 2 worker ids and has 2 already: "
                                 "not w3-c (docs/operations.md)", 5000));
    assert_string_not_equal (s_worker_state ("w3-a"), "absent");         /* (silent since: maybe dead) */
    assert_string_not_equal (s_worker_state ("w3-b"), "absent");
    assert_string_equal (s_worker_state ("w3-c"), "absent");
    zsock_destroy (&third);
    zsock_destroy (&b);
    zsock_destroy (&a);
    free (secret);
    zsock_destroy (&again);
    zsock_destroy (&w1);
}

/* akctl keys: new and list. */
static void test_akctl_keys (void **state)
{
    (void) state;
    char *akctl = ak_test_bin ("akctl"), *out = NULL;
    char *cmd = ak_sprintf ("'%s' keys new carol --role viewer --dir '%s' >/dev/null && "
                            "'%s' --json keys list --dir '%s'", akctl, s_fx->keys, akctl, s_fx->keys);
    assert_int_equal (ak_test_run (cmd, &out), 0);
    json_t *j = json_loads (out, 0, NULL);
    assert_non_null (j);
    json_t *keys = json_object_get (j, "keys");
    assert_int_equal (json_array_size (keys), 5);     /* alice, bob, carol, w1, w2 */
    size_t i;
    json_t *k;
    int viewers = 0;
    json_array_foreach (keys, i, k) {
        assert_int_equal (strlen (json_string_value (json_object_get (k, "key"))), 40);
        viewers += strcmp (json_string_value (json_object_get (k, "role")), "viewer") == 0;
    }
    assert_int_equal (viewers, 2);
    json_decref (j);
    free (out);
    free (cmd);
    /* the same name again: refused, exit 1 */
    cmd = ak_sprintf ("'%s' keys new carol --role viewer --dir '%s' 2>&1", akctl, s_fx->keys);
    assert_int_equal (ak_test_run (cmd, &out), 1);
    assert_non_null (strstr (out, "exists already"));
    free (out);
    free (cmd);
    free (akctl);
}

static bool s_w1_alive (void *arg)
{
    (void) arg;
    return strcmp (s_worker_state ("real-w1"), "alive") == 0;
}

static bool s_w1_dead (void *arg)
{
    (void) arg;
    return strcmp (s_worker_state ("real-w1"), "dead") == 0;
}

/* A log file and a text it must come to hold (s_log_says). */
typedef struct {
    const char *path;
    const char *text;
} s_log_text_t;

/* True once the log holds the text: a process says it started only after
   its signal handlers are in place, so a SIGTERM before that kills it
   (what a fixed sleep on a loaded machine ran into). */
static bool s_log_says (void *arg)
{
    const s_log_text_t *lt = arg;
    return s_log_count (lt->path, lt->text) > 0;
}

/* The real akworker over CURVE: registers with its key, and is dropped
   when the key is removed; a wrong server key never registers. */
static void test_real_worker (void **state)
{
    (void) state;
    char *bin = ak_test_bin ("akworker");
    char *cache = ak_path_join (s_fx->dir, "cache"), *log = ak_path_join (s_fx->dir, "worker.log");
    char *argv[] = { bin, "--coordinator", s_fx->workers, "--id", "real-w1", "--backend", "host",
                     "--cache", cache, "--heartbeat-ms", "500", "--cert", s_fx->w1,
                     "--server-key", s_fx->server_pub, NULL };
    pid_t pid = ak_test_spawn (argv, log);
    assert_true (pid > 0);
    if (!ak_test_wait (s_w1_alive, NULL, 15000))
        fail_msg ("akworker with a worker key did not register (log: %s)", log);
    char *pub = ak_strdup (s_fx->w1);
    pub[strlen (pub) - strlen ("_secret")] = '\0';
    assert_int_equal (unlink (pub), 0);
    if (!ak_test_wait (s_w1_dead, NULL, 10000))
        fail_msg ("the revoked akworker is not dead (log: %s)", s_fx->log);
    usleep (1500 * 1000);       /* it keeps trying: still dead */
    assert_string_equal (s_worker_state ("real-w1"), "dead");
    assert_int_equal (ak_test_stop (pid, SIGTERM, 10000), 0);
    char *cmd = ak_sprintf ("grep -c 'worker real-w1: its key .* was revoked: dropped' '%s'", s_fx->log), *out = NULL;
    assert_int_equal (ak_test_run (cmd, &out), 0);
    free (out);
    free (cmd);

    /* a worker that trusts another server key never gets in */
    char *argv2[] = { bin, "--coordinator", s_fx->workers, "--id", "real-w2", "--backend", "host",
                      "--cache", cache, "--cert", s_fx->w2, "--server-key", s_fx->op, NULL };
    pid = ak_test_spawn (argv2, log);
    assert_true (pid > 0);
    s_log_text_t running = { log, "id real-w2" };
    if (!ak_test_wait (s_log_says, &running, 30000))
        fail_msg ("akworker real-w2 did not start (log: %s)", log);
    usleep (1500 * 1000);       /* the time it would need to register */
    assert_string_equal (s_worker_state ("real-w2"), "absent");
    assert_int_equal (ak_test_stop (pid, SIGTERM, 10000), 0);
    /* and a bad certificate is a usage error at start */
    char *bad = ak_sprintf ("'%s' --coordinator %s --id x --cert /nonexistent --server-key '%s' 2>&1",
                            bin, s_fx->workers, s_fx->server_pub);
    assert_int_equal (ak_test_run (bad, &out), 2);
    assert_non_null (strstr (out, "/nonexistent"));
    free (out);
    free (bad);
    free (pub);
    free (cache);
    free (log);
    free (bin);
}

/* Garbage frames: answered with an error up to --malformed-max, then the
   peer is dropped (a registered worker dies) and gets nothing more. */
static void test_malformed_peer_dropped (void **state)
{
    (void) state;
    zsock_t *c = s_dealer (s_fx->clients, s_fx->op);
    for (int i = 0; i < 3; i++) {
        assert_true (zmq_send (zsock_resolve (c), "\xff\xff garbage", 10, 0) == 10);
        Ak__Envelope *r = s_recv (c, 5000);
        assert_non_null (r);
        assert_int_equal (r->reply->code, AK_EPROTO);
        ak_envelope_free (&r);
    }
    assert_null (s_call (c, "stats", NULL, NULL, 1000));
    zsock_destroy (&c);
    assert_int_equal (s_stat ("security", "peers_dropped", NULL), 1);

    zsock_t *w = s_dealer (s_fx->workers, s_fx->w1);
    ak_it_hello (w, "w1");
    Ak__Envelope *e = s_recv_kind (w, AK__ENVELOPE__BODY_HEARTBEAT, 5000);
    assert_non_null (e);
    ak_envelope_free (&e);
    for (int i = 0; i < 3; i++)
        assert_true (zmq_send (zsock_resolve (w), "", 0, 0) == 0);
    assert_true (s_disconnected (w, "dropped: too many malformed frames", 5000));
    assert_string_equal (s_worker_state ("w1"), "dead");
    ak_it_hello (w, "w1");
    assert_null (s_recv (w, 1000));
    assert_int_equal (s_stat ("security", "peers_dropped", NULL), 2);
    zsock_destroy (&w);
}

/* More requests than --client-queue at once: each gets one answer, some
   of them "busy". */
static void test_client_queue_busy (void **state)
{
    (void) state;
    enum { N = 200 };
    zsock_t *c = s_dealer (s_fx->clients, s_fx->op);
    /* let the handshake finish first, so that the burst arrives together */
    Ak__ClientReply *r = s_call (c, "stats", NULL, NULL, 10000);
    assert_non_null (r);
    ak__client_reply__free_unpacked (r, NULL);
    for (int i = 0; i < N; i++)
        s_request (c, "list", NULL, NULL);
    int ok = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        Ak__Envelope *e = s_recv (c, 10000);
        assert_non_null (e);
        if (e->reply->code == 0)
            ok++;
        else if (e->reply->code == AK_EUNAVAIL && strncmp (e->reply->error, "busy: ", 6) == 0)
            busy++;
        else
            fail_msg ("unexpected answer %d %s", e->reply->code, e->reply->error);
        ak_envelope_free (&e);
    }
    assert_null (s_recv (c, 300));
    zsock_destroy (&c);
    assert_int_equal (ok + busy, N);
    assert_true (ok >= 2);
    assert_true (busy >= 1);
    assert_int_equal (s_stat ("security", "busy_refused", NULL), busy);
}

/* arg: a log file; true once it holds the plain-mode warning. */
static bool s_plain_warned (void *arg)
{
    return s_log_count (arg, "WARNING: plain mode: no authentication") > 0;
}

/* Without --cert/--keys and without --plain akcoord refuses to start;
   --plain says so loudly. */
static void test_start_needs_auth_or_plain (void **state)
{
    (void) state;
    char *bin = ak_test_bin ("akcoord");
    char *dir = ak_test_tmpdir ("auth-start");
    char *out = NULL;
    char *cmd = ak_sprintf ("'%s' --store '%s/s' --workers ipc://%s/w --clients ipc://%s/c 2>&1", bin, dir,
                            dir, dir);
    assert_int_equal (ak_test_run (cmd, &out), 2);
    assert_non_null (strstr (out, "no authentication configured"));
    free (out);
    free (cmd);
    cmd = ak_sprintf ("'%s' --store '%s/s' --cert '%s' --keys '%s/none' --workers ipc://%s/w "
                      "--clients ipc://%s/c 2>&1", bin, dir, s_fx->server_secret, dir, dir, dir);
    assert_int_equal (ak_test_run (cmd, &out), 2);        /* a configuration error (issue 14) */
    assert_non_null (strstr (out, "key directory"));
    free (out);
    free (cmd);
    /* plain: the warning, then a clean stop */
    char *log = ak_sprintf ("%s/plain.log", dir);
    char *w = ak_sprintf ("ipc://%s/w", dir), *c = ak_sprintf ("ipc://%s/c", dir), *st = ak_sprintf ("%s/s", dir);
    char *argv[] = { bin, "--store", st, "--workers", w, "--clients", c, NULL };
    pid_t pid = ak_test_spawn_coord (argv, log);
    assert_true (pid > 0);
    /* the warning comes after its signal handlers are set: a SIGTERM
       before them (a fixed sleep on a loaded box) would kill it */
    if (!ak_test_wait (s_plain_warned, log, 20000))
        fail_msg ("akcoord --plain did not warn within 20 s (log: %s)", log);
    assert_int_equal (ak_test_stop (pid, SIGTERM, 10000), 0);
    cmd = ak_sprintf ("cat '%s'", log);
    assert_int_equal (ak_test_run (cmd, &out), 0);
    assert_non_null (strstr (out, "WARNING: plain mode: no authentication"));
    free (out);
    free (cmd);
    free (log); free (w); free (c); free (st);
    ak_test_rmtree (dir);
    free (dir);
    free (bin);
}

/* Key files: 0600, directories 0700; a second key of the same name is refused. */
static void test_key_files (void **state)
{
    (void) state;
    struct stat st;
    assert_int_equal (stat (s_fx->op, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0600);
    char *pub = ak_strdup (s_fx->op);
    pub[strlen (pub) - strlen ("_secret")] = '\0';
    assert_int_equal (stat (pub, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0600);
    free (pub);
    assert_int_equal (stat (s_fx->keys, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0700);
    assert_int_equal (stat (s_fx->store, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0700);
    ak_err_t err = { 0 };
    assert_int_equal (ak_keys_new (s_fx->keys, "alice", AK_ROLE_OPERATOR, NULL, &err), AK_EEXIST);
    assert_int_equal (ak_keys_new (s_fx->keys, "../evil", AK_ROLE_OPERATOR, NULL, &err), AK_EINVAL);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_unknown_keys_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_viewer_reads_only, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_operator_may_write, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_revoked_worker_dropped, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_worker_id_bound_to_key, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_one_key_one_worker_id, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_real_worker, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_akctl_keys, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_malformed_peer_dropped, s_setup_limits, s_teardown),
        cmocka_unit_test_setup_teardown (test_client_queue_busy, s_setup_limits, s_teardown),
        cmocka_unit_test_setup_teardown (test_start_needs_auth_or_plain, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_key_files, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
