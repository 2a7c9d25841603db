/*  ops/akctl/client.c: one request, one reply, with a bound on the wait.

    A DEALER connected to the coordinator's client ROUTER.  Each call sends
    one Envelope{request} and waits for one Envelope{reply}.  ZeroMQ queues
    the request while the connection is being made, so an absent coordinator
    shows up as silence: the poll runs out and the call says so.  After any
    failed call the socket is thrown away, so a reply that arrives late is
    never read as the answer to the next request.

    A handshake monitor (common/linkwatch.h) tells a refused key from a dead
    coordinator: a handshake refused by the coordinator's key check, or
    one side CURVE and the other not, fails the call at once (AK_EDENIED,
    exit 5); a handshake the coordinator closes S_NO_DETAIL_MAX times in a
    row (it cannot read it: a wrong server key) fails it as well. */
#include "akctl.h"

#include <czmq.h>
#include <string.h>

#include "auth.h"
#include "clock.h"
#include "envelope.h"
#include "linkwatch.h"
#include "util.h"

#define S_NO_DETAIL_MAX 3

/* akctl_client_set_auth: one user, one identity for every client */
static const char *s_cert_file;
static const char *s_server_key;

void akctl_client_set_auth (const char *cert_file, const char *server_key)
{
    s_cert_file = cert_file && *cert_file ? cert_file : NULL;
    s_server_key = server_key && *server_key ? server_key : NULL;
}

struct akctl_client {
    char    *endpoint;
    int      timeout_ms;
    zsock_t *sock;
    ak_hsmon_t *mon;            /* handshakes of sock */
    uint64_t seq;
};

static void s_close (akctl_client_t *self)
{
    ak_hsmon_destroy (&self->mon);
    zsock_destroy (&self->sock);
}

/*  A fresh DEALER connected to self->endpoint: linger 0 (a request nobody
    took must not keep akctl alive), message size bounded like every other
    socket of the system.  AK_EINVAL when the endpoint does not parse. */
static int s_connect (akctl_client_t *self, ak_err_t *err)
{
    s_close (self);
    self->sock = zsock_new (ZMQ_DEALER);
    if (!self->sock)
        return ak_err_set (err, AK_EIO, "cannot create a ZeroMQ socket: %s", zmq_strerror (zmq_errno ()));
    zsock_set_linger (self->sock, 0);
    zsock_set_maxmsgsize (self->sock, (int) AK_MAX_MSG_SIZE);
    zsock_set_sndtimeo (self->sock, self->timeout_ms);
    if (ak_auth_client_setup (self->sock, s_cert_file, s_server_key, err) != 0) {
        s_close (self);
        return AK_EINVAL;
    }
    int rc = ak_hsmon_new (NULL, zsock_resolve (self->sock), &self->mon, err);
    if (rc) {
        s_close (self);
        return rc;
    }
    if (zsock_connect (self->sock, "%s", self->endpoint) != 0) {
        int e = zmq_errno ();
        s_close (self);
        return ak_err_set (err, AK_EINVAL, "bad coordinator endpoint '%s': %s "
                           "(expected tcp://HOST:PORT or ipc:///PATH)",
                           self->endpoint, zmq_strerror (e));
    }
    return 0;
}

akctl_client_t *akctl_client_new (const char *endpoint, int timeout_ms, ak_err_t *err)
{
    akctl_client_t *self = ak_calloc (1, sizeof *self);
    self->endpoint = ak_strdup (endpoint);
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : AKCTL_DEFAULT_TIMEOUT;
    if (s_connect (self, err) != 0)
        akctl_client_destroy (&self);
    return self;
}

akctl_client_t *akctl_client_for (const akctl_opts_t *o, int *code)
{
    ak_err_t err = { 0, "" };
    akctl_client_t *client = akctl_client_new (o->endpoint, o->timeout_ms, &err);
    if (!client) {
        fprintf (stderr, "akctl: %s\n", err.msg);
        *code = err.code == AK_EINVAL ? AKCTL_EXIT_USAGE : AKCTL_EXIT_NEGATIVE;
    }
    return client;
}

void akctl_client_destroy (akctl_client_t **self_p)
{
    if (self_p && *self_p) {
        akctl_client_t *self = *self_p;
        s_close (self);
        free (self->endpoint);
        free (self);
        *self_p = NULL;
    }
}

const char *akctl_client_endpoint (akctl_client_t *self)
{
    return self->endpoint;
}

void akctl_reply_free (akctl_reply_t *reply)
{
    if (reply) {
        free (reply->error);
        free (reply->json);
        reply->error = NULL;
        reply->json = NULL;
        reply->code = 0;
    }
}

/*  Reads the handshake events that wait: AK_EDENIED (err: what the
    coordinator refused) for a refusal or the S_NO_DETAIL_MAX-th failure
    without detail in a row, else 0. */
static int s_handshakes (akctl_client_t *self, int *no_detail, ak_err_t *err)
{
    ak_hs_event_t ev;
    int n;
    while ((n = ak_hsmon_next (self->mon, &ev)) > 0) {
        char why[512];
        if (ev.kind == AK_HS_OK) {
            *no_detail = 0;
            continue;
        }
        if (ev.kind == AK_HS_NO_DETAIL && ++*no_detail < S_NO_DETAIL_MAX)
            continue;
        ak_hs_describe (&ev, s_cert_file != NULL, why, sizeof why);
        if (ev.kind == AK_HS_NO_DETAIL)
            return ak_err_set (err, AK_EDENIED, "%s: %s (%d handshakes in a row)", self->endpoint, why,
                               *no_detail);
        char pub[AK_KEY_Z85_LEN + 1];
        ak_err_t kerr = { 0 };
        if (ev.kind == AK_HS_AUTH && s_cert_file && ak_auth_public_key (s_cert_file, pub, &kerr) == 0)
            /* the public key to add to the coordinator's key directory */
            return ak_err_set (err, AK_EDENIED, "%s: %s; this key is %s (%s)", self->endpoint, why, pub,
                               s_cert_file);
        return ak_err_set (err, AK_EDENIED, "%s: %s", self->endpoint, why);
    }
    return n < 0 ? ak_err_set (err, AK_EIO, "%s: the handshake monitor broke", self->endpoint) : 0;
}

/*  Sends env once the socket takes it, until deadline (monotonic ms).  A
    handshake refused before the request went out (the coordinator's
    refusal ends the connection, and a DEALER without one takes nothing)
    is told as a refusal, not as silence.  0, AK_EUNAVAIL when the deadline
    passed, AK_EDENIED, AK_ETOOBIG or AK_EIO. */
static int s_send (akctl_client_t *self, uint64_t deadline, Ak__Envelope *env, int *no_detail,
                   ak_err_t *err)
{
    void *handle = zsock_resolve (self->sock);
    for (;;) {
        int rc = ak_envelope_send (self->sock, NULL, 0, env);
        if (rc != AK_EUNAVAIL)
            return rc;
        rc = s_handshakes (self, no_detail, err);
        if (rc)
            return rc;
        uint64_t now = ak_clock_mono_ms ();
        if (now >= deadline)
            return AK_EUNAVAIL;
        zmq_pollitem_t items[2] = { { handle, 0, ZMQ_POLLOUT, 0 },
                                    { ak_hsmon_handle (self->mon), 0, ZMQ_POLLIN, 0 } };
        if (zmq_poll (items, 2, (long) (deadline - now)) < 0 && zmq_errno () != EINTR)
            return ak_err_set (err, AK_EIO, "zmq_poll: %s", zmq_strerror (zmq_errno ()));
    }
}

/*  Waits for one message on the socket until deadline (monotonic ms) and
    unpacks it.  0 with *env_p (caller frees), AK_EUNAVAIL on silence,
    AK_EDENIED when the coordinator refused the handshake, AK_EPROTO when
    what came is not one well-formed envelope. */
static int s_receive (akctl_client_t *self, uint64_t deadline, Ak__Envelope **env_p, int *no_detail,
                      ak_err_t *err)
{
    void *handle = zsock_resolve (self->sock);
    for (;;) {
        int hrc = s_handshakes (self, no_detail, err);
        if (hrc)
            return hrc;
        uint64_t now = ak_clock_mono_ms ();
        if (now >= deadline)
            return AK_EUNAVAIL;
        zmq_pollitem_t items[2] = { { handle, 0, ZMQ_POLLIN, 0 },
                                    { ak_hsmon_handle (self->mon), 0, ZMQ_POLLIN, 0 } };
        int n = zmq_poll (items, 2, (long) (deadline - now));
        if (n < 0) {
            if (zmq_errno () == EINTR)
                continue;       /* a signal: the caller looks at its flag after the call */
            return ak_err_set (err, AK_EIO, "zmq_poll: %s", zmq_strerror (zmq_errno ()));
        }
        if (n == 0 || !(items[0].revents & ZMQ_POLLIN))
            continue;
        zmsg_t *msg = zmsg_recv (self->sock);
        if (!msg)
            return ak_err_set (err, AK_EIO, "receive from %s: %s", self->endpoint,
                               zmq_strerror (zmq_errno ()));
        if (zmsg_size (msg) != 1) {
            size_t frames = zmsg_size (msg);
            zmsg_destroy (&msg);
            return ak_err_set (err, AK_EPROTO, "malformed reply from %s: %zu frames, expected 1",
                               self->endpoint, frames);
        }
        zframe_t *frame = zmsg_first (msg);
        int rc = ak_envelope_unpack (zframe_data (frame), zframe_size (frame), AK_MAX_MSG_SIZE,
                                     env_p, err);
        zmsg_destroy (&msg);
        if (rc != 0)
            return ak_err_prefix (err, "malformed reply from %s", self->endpoint);
        return 0;
    }
}

static int s_call_one (akctl_client_t *self, int timeout_ms, const char *verb,
                       char *const *args, int nargs, const char *body,
                       akctl_reply_t *reply, ak_err_t *err)
{
    memset (reply, 0, sizeof *reply);
    if (timeout_ms <= 0)
        timeout_ms = self->timeout_ms;
    if (!self->sock) {
        int rc = s_connect (self, err);
        if (rc != 0)
            return rc;
    }
    uint64_t deadline = ak_clock_mono_ms () + (uint64_t) timeout_ms;

    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    req.verb = (char *) verb;
    req.args = (char **) args;
    req.n_args = (size_t) nargs;
    if (body)
        req.body = (char *) body;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.seq = ++self->seq;
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;

    int no_detail = 0;
    int rc = s_send (self, deadline, &env, &no_detail, err);
    if (rc == AK_ETOOBIG) {
        ak_err_set (err, AK_EINVAL, "%s request is over the %u MiB message limit",
                    verb, AK_MAX_MSG_SIZE >> 20);
        return AK_EINVAL;
    }
    Ak__Envelope *answer = NULL;
    if (rc == 0)
        rc = s_receive (self, deadline, &answer, &no_detail, err);
    if (rc == AK_EDENIED)
        ;                       /* err says what the coordinator refused */
    else
    if (rc == AK_EUNAVAIL || (rc != 0 && rc != AK_EPROTO)) {
        /* The send itself can run into the bound when nothing ever connected. */
        ak_err_set (err, AK_EUNAVAIL, "no answer from %s within %d ms (is akcoord running there?)",
                    self->endpoint, timeout_ms);
        rc = AK_EUNAVAIL;
    }
    else
    if (rc == 0 && answer->body_case != AK__ENVELOPE__BODY_REPLY) {
        rc = ak_err_set (err, AK_EPROTO, "malformed reply from %s: got '%s', expected 'reply'",
                         self->endpoint, ak_envelope_kind (answer));
    }
    if (rc == 0) {
        reply->code = answer->reply->code;
        reply->error = ak_strdup (answer->reply->error ? answer->reply->error : "");
        reply->json = ak_strdup (answer->reply->json ? answer->reply->json : "");
    }
    else
        s_close (self);
    ak_envelope_free (&answer);
    return rc;
}

/* ------------------------------------------------------------------ pages */

/*  The verbs that answer in pages (docs/client-api.md, "Pages") when
    called without LIMIT and AFTER: the array each page adds to, and the
    verb that asks for the next page ("status" without a batch is "list"). */
static bool s_paged (const char *verb, int nargs, const char **key, const char **next_verb)
{
    static const struct {
        const char *verb, *key, *next_verb;
        int         nargs;
    } paged[] = {
        { "show", "receipts", "show", 1 },
        { "receipts", "receipts", "receipts", 1 },
        { "report", "ops", "report", 1 },
        { "list", "batches", "list", 0 },
        { "status", "batches", "list", 0 },
    };
    for (size_t i = 0; i < sizeof paged / sizeof paged[0]; i++)
        if (strcmp (verb, paged[i].verb) == 0 && nargs == paged[i].nargs) {
            *key = paged[i].key;
            *next_verb = paged[i].next_verb;
            return true;
        }
    return false;
}

/*  Adds page to all: its array `key` after all's; a report's phases_ms
    and gpu_timing summed (the shares computed again from the sums).  A
    pair (op, device_class) never spans two pages. */
static void s_merge_page (json_t *all, json_t *page, const char *key)
{
    json_t *arr = json_object_get (all, key), *more = json_object_get (page, key);
    if (json_is_array (arr) && json_is_array (more))
        json_array_extend (arr, more);
    json_t *sum = json_object_get (all, "phases_ms"), *add = json_object_get (page, "phases_ms");
    const char *name;
    json_t *v;
    if (json_is_object (sum) && json_is_object (add))
        json_object_foreach (add, name, v)
            json_object_set_new (sum, name, json_real (json_number_value (json_object_get (sum, name))
                                                       + json_number_value (v)));
    json_t *gt = json_object_get (all, "gpu_timing"), *gadd = json_object_get (page, "gpu_timing");
    if (json_is_object (gt) && json_is_object (gadd)) {
        static const char *const keys[] = { "sampled_ms", "device_wall_ms", "task_ms", "devices", "device_runs" };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            json_object_set_new (gt, keys[i], json_real (json_number_value (json_object_get (gt, keys[i]))
                                                         + json_number_value (json_object_get (gadd, keys[i]))));
        double sampled = json_number_value (json_object_get (gt, "sampled_ms"));
        double wall = json_number_value (json_object_get (gt, "device_wall_ms"));
        double task = json_number_value (json_object_get (gt, "task_ms"));
        json_object_set_new (gt, "share", wall > 0 ? json_real (sampled / wall) : json_null ());
        json_object_set_new (gt, "share_of_task_time", task > 0 ? json_real (sampled / task) : json_null ());
    }
}

/*  Asks for every page after the first (whose answer is in reply) and
    puts them together in reply->json, with "next" null: the answer as one
    request would have had it.  0, or a failed page's outcome in reply. */
static int s_follow (akctl_client_t *self, int timeout_ms, const char *key, const char *next_verb,
                     char *const *args, int nargs, akctl_reply_t *reply, ak_err_t *err)
{
    json_t *all = json_loads (reply->json, 0, NULL);
    const char *next = all ? json_string_value (json_object_get (all, "next")) : NULL;
    int rc = 0;
    while (next) {
        char *pargs[3];
        int n = 0;
        for (int i = 0; i < nargs && n < 1; i++)
            pargs[n++] = args[i];
        char limit[16];
        snprintf (limit, sizeof limit, "%d", 1000);
        pargs[n++] = limit;
        char *after = ak_strdup (next);
        pargs[n++] = after;
        akctl_reply_t page;
        rc = s_call_one (self, timeout_ms, next_verb, pargs, n, NULL, &page, err);
        free (after);
        if (rc || page.code) {
            akctl_reply_free (reply);
            *reply = page;
            break;
        }
        json_t *pj = json_loads (page.json, 0, NULL);
        akctl_reply_free (&page);
        if (!pj) {
            rc = ak_err_set (err, AK_EPROTO, "malformed reply from %s: a page of %s is not JSON",
                             self->endpoint, next_verb);
            break;
        }
        s_merge_page (all, pj, key);
        json_object_set (all, "next", json_object_get (pj, "next"));
        json_decref (pj);
        next = json_string_value (json_object_get (all, "next"));
    }
    if (rc == 0 && reply->code == 0 && all) {
        json_object_set_new (all, "next", json_null ());
        char *text = json_dumps (all, JSON_COMPACT);
        if (text) {
            free (reply->json);
            reply->json = text;
        }
    }
    json_decref (all);
    return rc;
}

int akctl_client_call_within (akctl_client_t *self, int timeout_ms, const char *verb,
                              char *const *args, int nargs, const char *body,
                              akctl_reply_t *reply, ak_err_t *err)
{
    int rc = s_call_one (self, timeout_ms, verb, args, nargs, body, reply, err);
    const char *key, *next_verb;
    if (rc == 0 && reply->code == 0 && s_paged (verb, nargs, &key, &next_verb))
        rc = s_follow (self, timeout_ms, key, next_verb, args, nargs, reply, err);
    return rc;
}

int akctl_client_call (akctl_client_t *self, const char *verb, char *const *args, int nargs,
                       const char *body, akctl_reply_t *reply, ak_err_t *err)
{
    return akctl_client_call_within (self, self->timeout_ms, verb, args, nargs, body, reply, err);
}

int akctl_call_exit (int rc, const akctl_reply_t *reply, const ak_err_t *err)
{
    if (rc == AK_EUNAVAIL) {
        fprintf (stderr, "akctl: %s\n", err->msg);
        return AKCTL_EXIT_UNREACHABLE;
    }
    if (rc == AK_EDENIED) {
        fprintf (stderr, "akctl: %s\n", err->msg);
        return AKCTL_EXIT_REFUSED;
    }
    if (rc == AK_EINVAL) {
        fprintf (stderr, "akctl: %s\n", err->msg);
        return AKCTL_EXIT_USAGE;
    }
    if (rc != 0) {
        fprintf (stderr, "akctl: %s\n", err->msg);
        return AKCTL_EXIT_NEGATIVE;
    }
    if (reply->code == 0)
        return AKCTL_EXIT_OK;
    fprintf (stderr, "akctl: %s\n", reply->error && *reply->error ? reply->error
                                                                    : ak_strerror (reply->code));
    if (reply->code == AK_ENOTFOUND)
        return AKCTL_EXIT_NOTFOUND;
    if (reply->code == AK_EINVAL)
        return AKCTL_EXIT_USAGE;
    return AKCTL_EXIT_NEGATIVE;
}

json_t *akctl_parse_json (const char *text, const char *verb)
{
    json_error_t jerr;
    json_t *json = json_loads (text ? text : "", JSON_DECODE_ANY, &jerr);
    if (!json)
        fprintf (stderr, "akctl: %s: the coordinator's answer is not JSON: %s (line %d)\n",
                 verb, jerr.text, jerr.line);
    return json;
}
