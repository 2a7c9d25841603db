/*  tests/integration/integration.c: see integration.h. */
#include "integration.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "envelope.h"
#include "util.h"

char *ak_it_key (const char *dir, const char *name, ak_role_t role)
{
    ak_err_t err = { 0 };
    char *pub = NULL;
    if (ak_keys_new (dir, name, role, &pub, &err))
        fail_msg ("ak_keys_new %s: %s", name, err.msg);
    char *secret = ak_sprintf ("%s_secret", pub);
    free (pub);
    return secret;
}

char *ak_it_public (const char *secret)
{
    char *pub = ak_strdup (secret);
    size_t n = strlen (pub), tail = strlen ("_secret");
    assert_true (n > tail && strcmp (pub + n - tail, "_secret") == 0);
    pub[n - tail] = '\0';
    return pub;
}

zsock_t *ak_it_dealer (const char *endpoint, const char *cert, const char *server_pub)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    assert_non_null (s);
    zsock_set_linger (s, 0);
    zsock_set_maxmsgsize (s, (int) AK_MAX_MSG_SIZE);
    if (cert) {
        ak_err_t err = { 0 };
        if (ak_auth_client_setup (s, cert, server_pub, &err))
            fail_msg ("client setup: %s", err.msg);
    }
    assert_int_equal (zsock_connect (s, "%s", endpoint), 0);
    return s;
}

void ak_it_hello (zsock_t *s, const char *id)
{
    /* a send that finds no peer yet (AK_EUNAVAIL: the connection, its CURVE
       handshake, still under way; seen on a loaded box) is tried again, for
       up to 10 s: the HELLO must go, whenever the connection is there */
    int rc;
    uint64_t until = ak_clock_mono_ms () + 10000;
    while ((rc = ak_it_hello_rc (s, id)) == AK_EUNAVAIL && ak_clock_mono_ms () < until)
        ak_test_sleep_ms (20);
    assert_int_equal (rc, 0);
}

int ak_it_hello_rc (zsock_t *s, const char *id)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dv = AK__DEVICE__INIT, *dvs[1] = { &dv };
    dv.backend = "host";
    dv.device_class = "host";
    h.worker_id = (char *) id;
    h.host = "test";
    h.devices = dvs;
    h.n_devices = 1;
    h.slots = 1;
    h.prefetch = 1;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    return ak_envelope_send (s, NULL, 0, &env);
}

ak_it_fx_t *ak_it_fx_new (const char *tag, ak_role_t stranger_role)
{
    ak_it_fx_t *fx = ak_calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir (tag);
    fx->keys = ak_path_join (fx->dir, "keys");
    fx->store = ak_path_join (fx->dir, "store");
    fx->log = ak_path_join (fx->dir, "akcoord.log");
    fx->akctl = ak_test_bin ("akctl");
    fx->akworker = ak_test_bin ("akworker");
    int ports[2];
    ak_test_free_ports (ports, 2);
    snprintf (fx->workers, sizeof fx->workers, "tcp://127.0.0.1:%d", ports[0]);
    snprintf (fx->clients, sizeof fx->clients, "tcp://127.0.0.1:%d", ports[1]);
    char *server_dir = ak_path_join (fx->dir, "server"), *other = ak_path_join (fx->dir, "other");
    fx->server_secret = ak_it_key (server_dir, "akcoord", AK_ROLE_SERVER);
    fx->server_pub = ak_it_public (fx->server_secret);
    fx->op = ak_it_key (fx->keys, "alice", AK_ROLE_OPERATOR);
    fx->viewer = ak_it_key (fx->keys, "bob", AK_ROLE_VIEWER);
    fx->w1 = ak_it_key (fx->keys, "w1", AK_ROLE_WORKER);
    fx->w2 = ak_it_key (fx->keys, "w2", AK_ROLE_WORKER);
    fx->stranger = ak_it_key (other, "mallory", stranger_role);
    free (server_dir);
    free (other);
    return fx;
}

/* Whether the coordinator of fx answers the operator's `stats` within 300 ms. */
static bool s_answers (void *arg)
{
    ak_it_fx_t *fx = arg;
    zsock_t *s = ak_it_dealer (fx->clients, fx->op, fx->server_pub);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    req.verb = "stats";
    req.body = "";
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;
    bool ok = false;
    zmq_pollitem_t item = { zsock_resolve (s), 0, ZMQ_POLLIN, 0 };
    if (ak_envelope_send (s, NULL, 0, &env) == 0 && zmq_poll (&item, 1, 300) > 0) {
        zframe_t *f = zframe_recv (s);
        Ak__Envelope *r = NULL;
        ak_err_t err = { 0 };
        ok = f && ak_envelope_unpack (zframe_data (f), zframe_size (f), 0, &r, &err) == 0
          && r->body_case == AK__ENVELOPE__BODY_REPLY && r->reply->code == 0;
        ak_envelope_free (&r);
        zframe_destroy (&f);
    }
    zsock_destroy (&s);
    return ok;
}

void ak_it_fx_start (ak_it_fx_t *fx, const char *const *extra)
{
    char *bin = ak_test_bin ("akcoord");
    char *argv[32] = { bin, "--store", fx->store, "--workers", fx->workers, "--clients", fx->clients,
                       "--cert", fx->server_secret, "--keys", fx->keys, "--heartbeat-ms", "500",
                       "--log-level", "debug" };
    int n = 15;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = (char *) extra[i];
    argv[n] = NULL;
    fx->pid = ak_test_spawn (argv, fx->log);
    free (bin);
    assert_true (fx->pid > 0);
    if (!ak_test_wait (s_answers, fx, 15000))
        fail_msg ("akcoord does not answer on %s (log: %s)", fx->clients, fx->log);
}

void ak_it_fx_destroy (ak_it_fx_t **fx_p)
{
    if (fx_p && *fx_p) {
        ak_it_fx_t *fx = *fx_p;
        if (fx->pid > 0)
            ak_test_stop (fx->pid, SIGTERM, 10000);
        if (getenv ("AK_TEST_KEEP") == NULL)
            ak_test_rmtree (fx->dir);
        free (fx->dir); free (fx->keys); free (fx->store); free (fx->log);
        free (fx->server_pub); free (fx->server_secret);
        free (fx->op); free (fx->viewer); free (fx->w1); free (fx->w2); free (fx->stranger);
        free (fx->akctl); free (fx->akworker);
        free (fx);
        *fx_p = NULL;
    }
}
