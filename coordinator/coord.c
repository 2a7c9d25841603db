/*  coordinator/coord.c: the event loop and its tick, receiving, the client
    queue, construction (see coord.h and docs/protocol.md).  The worker
    protocol, dispatch, settling, peers and sending live beside it
    (coord_private.h says which file holds what). */
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord.h"
#include "coord_private.h"
#include "access.h"
#include "clock.h"
#include "envelope.h"
#include "log.h"
#include "sdnotify.h"
#include "util.h"
#include "waiting.h"

#define S_LINGER_MS        500          /* bounded linger on close */
#define S_CLIENT_QUEUE     1024         /* default bound on waiting client requests */
#define S_MALFORMED_MAX    16           /* default malformed frames before a peer is dropped */
#define S_ZAP_ENDPOINT     "inproc://zeromq.zap.01"

/* A client request read and waiting for its turn (ak_coord.queue). */
typedef struct {
    uint8_t       route[AK_ROUTE_MAX];
    size_t        route_len;
    Ak__Envelope *env;
    ak_role_t     role;                 /* AK_ROLE_OPERATOR in plain mode */
    char          name[AK_KEY_NAME_MAX + 1];
} s_request_t;

const char *const coord_ep_names[AK_EP_COUNT] = { "workers", "clients" };

// ================================================================== clients

static void s_on_client (ak_coord_t *self, const s_request_t *req, uint64_t now)
{
    char why[160];
    const void *route = req->route;
    size_t len = req->route_len;
    Ak__Envelope *env = req->env;
    if (env->body_case != AK__ENVELOPE__BODY_REQUEST) {
        snprintf (why, sizeof why, "a %s is not a client request", ak_envelope_kind (env));
        coord_reject (self, AK_EP_CLIENTS, route, len, why);
        coord_reply (self, route, len, AK_EPROTO, why, NULL);
        return;
    }
    self->counters.messages[AK_EP_CLIENTS]++;
    self->client.shutdown = false;
    self->client.work_added = false;
    ak_err_t err = { 0 };
    uint64_t *by_result = self->counters.client_requests[ak_client_verb_id (env->request->verb)];
    if (ak_access_check (req->role, req->name, env->request->verb, &err)) {
        self->counters.verbs_refused++;
        by_result[AK_CR_REFUSED]++;
        ak_info ("client: %s", err.msg);
        coord_reply (self, route, len, err.code, err.msg, NULL);
        return;
    }
    char *json = NULL;
    int rc = ak_client_handle (&self->client, env->request, now, &json, &err);
    by_result[rc ? AK_CR_ERROR : AK_CR_OK]++;
    if (rc)
        ak_debug ("client %s: %s", env->request->verb, err.msg);
    coord_reply (self, route, len, rc, rc ? err.msg : "", json);
    free (json);
    if (self->client.shutdown)
        self->stop = true;
    if (self->client.work_added)
        self->dispatch_due = true;
}

// ================================================================ receiving

/* zmq_msg_move / zmq_msg_close only fail on a corrupt message (a bug). */
static void s_msg_move (zmq_msg_t *dest, zmq_msg_t *src)
{
    if (zmq_msg_move (dest, src) != 0)
        ak_error ("zmq_msg_move: %s", zmq_strerror (zmq_errno ()));
}

static void s_msg_close (zmq_msg_t *msg)
{
    if (zmq_msg_close (msg) != 0)
        ak_error ("zmq_msg_close: %s", zmq_strerror (zmq_errno ()));
}

static void s_request_free (void **item)
{
    s_request_t *r = *item;
    if (r) {
        ak_envelope_free (&r->env);
        free (r);
        *item = NULL;
    }
}

/*  Queues a client request (takes *env_p); beyond opts.client_queue_max
    waiting requests the answer is "busy" at once, so a flood of requests
    costs the coordinator a reply each, not unbounded memory or a worker
    endpoint starved of turns. */
static void s_enqueue (ak_coord_t *self, const void *route, size_t len, Ak__Envelope **env_p)
{
    if (zlistx_size (self->queue) >= self->opts.client_queue_max) {
        char why[128];
        self->counters.busy_refused++;
        const Ak__Envelope *env = *env_p;
        self->counters.client_requests[ak_client_verb_id (env->body_case == AK__ENVELOPE__BODY_REQUEST
                                                          ? env->request->verb : NULL)][AK_CR_BUSY]++;
        snprintf (why, sizeof why, "busy: %zu client requests are waiting; try again later",
                  zlistx_size (self->queue));
        coord_reply (self, route, len, AK_EUNAVAIL, why, NULL);
        ak_envelope_free (env_p);
        return;
    }
    s_request_t *r = ak_calloc (1, sizeof *r);
    memcpy (r->route, route, len);
    r->route_len = len;
    r->env = *env_p;
    *env_p = NULL;
    r->role = self->peer ? self->peer->role : AK_ROLE_OPERATOR;
    snprintf (r->name, sizeof r->name, "%s", self->peer ? self->peer->name : "plain");
    if (!zlistx_add_end (self->queue, r))
        abort ();
}

/* Answers up to AK_COORD_DRAIN_MAX waiting client requests, oldest first. */
static void s_serve_clients (ak_coord_t *self, uint64_t now)
{
    /* a client sees the store and the index agree: no commit in flight
       (a client's writes begin their own transactions; its reads must
       find what was acknowledged) */
    ak_err_t err = { 0 };
    coord_commit_finish (self, true, &err);
    for (int i = 0; i < AK_COORD_DRAIN_MAX && !self->stop && zlistx_size (self->queue); i++) {
        s_request_t *r = zlistx_detach (self->queue, NULL);
        s_on_client (self, r, now);
        s_request_free ((void **) &r);
        self->wake.clients_served++;
    }
}

/* Reads one whole message from endpoint ep and handles it.  Returns false
   when there was none waiting. */
static bool s_recv_one (ak_coord_t *self, ak_ep_t ep)
{
    void *handle = zsock_resolve (self->sock[ep]);
    zmq_msg_t route, body, part;
    int frames = 0;
    zmq_msg_init (&route);
    zmq_msg_init (&body);
    for (;;) {
        zmq_msg_init (&part);
        if (zmq_msg_recv (&part, handle, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno ();
            s_msg_close (&part);
            if (frames == 0) {
                if (e != EAGAIN && e != EINTR)
                    ak_error ("%s endpoint: zmq_msg_recv: %s", coord_ep_names[ep], zmq_strerror (e));
                s_msg_close (&route);
                s_msg_close (&body);
                return false;
            }
            break;
        }
        bool more = zmq_msg_more (&part);
        frames++;
        if (frames == 1)
            s_msg_move (&route, &part);
        else if (frames == 2)
            s_msg_move (&body, &part);
        s_msg_close (&part);
        if (!more)
            break;
    }

    uint64_t now = ak_clock_mono_ms ();
    const void *rid = zmq_msg_data (&route);
    size_t rlen = zmq_msg_size (&route);
    if (rlen == 0 || rlen > AK_ROUTE_MAX) {
        coord_reject (self, ep, rid, 0, "routing id out of range");
    }
    else if (coord_peer_dropped (self, ep, rid, rlen)) {
        self->counters.rejected[ep]++;          /* no answer, no log: it was told */
    }
    else if (!coord_authorised (self, ep, &body, rid, rlen)) {
        /* counted and logged: no application data for a key not accepted */
    }
    else if (frames != 2) {
        char why[96];
        snprintf (why, sizeof why, "%d frames (one envelope frame expected)", frames - 1);
        coord_reject (self, ep, rid, rlen, why);
        if (ep == AK_EP_CLIENTS)
            coord_reply (self, rid, rlen, AK_EPROTO, why, NULL);
        coord_malformed (self, ep, rid, rlen);
    }
    else {
        Ak__Envelope *env = NULL;
        ak_err_t err = { 0 };
        size_t unknown = 0;
        bool slim = false;
        int rc = ak_envelope_unpack_counted (zmq_msg_data (&body), zmq_msg_size (&body), AK_MAX_MSG_SIZE,
                                             ep == AK_EP_WORKERS ? AK_ENVELOPE_SLIM_RECEIPT : 0,
                                             &env, &unknown, &slim, &err);
        if (rc) {
            coord_reject (self, ep, rid, rlen, err.msg);
            if (ep == AK_EP_CLIENTS)
                coord_reply (self, rid, rlen, rc, err.msg, NULL);
            coord_malformed (self, ep, rid, rlen);
        }
        else if (ep == AK_EP_WORKERS) {
            /* its bytes may be stored as they came only when they hold
               nothing this build does not know (envelope.c) */
            self->frame = unknown ? NULL : zmq_msg_data (&body);
            self->frame_len = unknown ? 0 : zmq_msg_size (&body);
            self->frame_slim = slim;
            coord_on_worker (self, rid, rlen, env, now);
            self->frame = NULL;
            self->frame_len = 0;
            self->frame_slim = false;
        }
        else
            s_enqueue (self, rid, rlen, &env);
        ak_envelope_free (&env);
    }
    self->peer = NULL;
    s_msg_close (&route);
    s_msg_close (&body);
    return true;
}

/* Counts connection events from a socket monitor. */
static void s_drain_monitor (ak_coord_t *self, ak_ep_t ep)
{
    void *handle = zsock_resolve (self->mon[ep]);
    for (int i = 0; i < AK_COORD_DRAIN_MAX; i++) {
        zmq_msg_t frame;
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, handle, ZMQ_DONTWAIT) < 0) {
            s_msg_close (&frame);
            return;
        }
        self->wake.monitor_events++;
        if (zmq_msg_size (&frame) >= 2) {
            uint16_t event;
            memcpy (&event, zmq_msg_data (&frame), sizeof event);
            if (event == ZMQ_EVENT_ACCEPTED)
                self->counters.connected[ep]++;
            else if (event == ZMQ_EVENT_DISCONNECTED)
                self->counters.disconnected[ep]++;
        }
        bool more = zmq_msg_more (&frame);
        s_msg_close (&frame);
        while (more) {                  /* the endpoint frame */
            zmq_msg_init (&frame);
            if (zmq_msg_recv (&frame, handle, ZMQ_DONTWAIT) < 0) {
                s_msg_close (&frame);
                return;
            }
            more = zmq_msg_more (&frame);
            s_msg_close (&frame);
        }
    }
}

// ==================================================================== tick

static int s_commit_cb (void *arg, ak_err_t *err)
{
    return coord_commit (arg, err);
}

static void s_tick (ak_coord_t *self, uint64_t now)
{
    ak_sdnotify_watchdog (now);         /* systemd's WatchdogSec=: this loop still turns */
    bool forced = self->opts.reload_flag && *self->opts.reload_flag;
    if (forced)
        *self->opts.reload_flag = 0;
    coord_keys_reload (self, forced);

    /* Any message is a heartbeat (Paranoid Pirate): a worker hears one
       only after a heartbeat interval in which it was sent nothing else, so
       busy workers get none, and idle ones each on their own schedule
       rather than all in one burst that stalls the loop. */
    for (ak_worker_t *w = ak_registry_first (self->registry); w; w = ak_registry_next (self->registry))
        if (w->alive && w->last_sent + self->opts.heartbeat_ms <= now + self->tick_ms)
            coord_send_heartbeat (self, w, now);
    if (now >= self->next_heartbeat) {
        self->next_heartbeat = now + self->opts.heartbeat_ms;
        coord_reap_pinned (self, now);
        ak_waiting_log_check (self->client.waiting, self->sched, self->registry);
    }

    ak_worker_t **dead = NULL;
    size_t ndead = ak_registry_reap (self->registry, now, self->opts.heartbeat_ms, self->opts.liveness, &dead);
    self->wake.reaped += (uint32_t) ndead;
    for (size_t i = 0; i < ndead; i++) {
        char why[96];
        snprintf (why, sizeof why, "silent for %llu ms",
                  (unsigned long long) (now - dead[i]->last_seen));
        coord_send_disconnect (self, dead[i]->route, dead[i]->route_len, "declared dead after silence");
        coord_worker_dead (self, dead[i], why, now);
    }
    free (dead);

    ak_task_t **expired = NULL;
    size_t nexp = ak_sched_expired (self->sched, now, &expired);
    for (size_t i = 0; i < nexp; i++) {
        char why[200];
        if (expired[i]->worker_id && ak_intake_pending (self->intake, expired[i]->task_id, expired[i]->worker_id))
            continue;           /* its receipt came in time: the commit decides */
        snprintf (why, sizeof why, "lease expired (%s)",
                  expired[i]->worker_id ? expired[i]->worker_id : "unclaimed");
        self->counters.leases_expired++;
        self->wake.expired++;
        coord_requeue (self, expired[i], why, now);
    }
    free (expired);

    uint64_t t0 = ak_clock_mono_ns ();
    coord_settle (self, now);
    self->wake.settle_us += coord_us_since (t0);
    if (ak_sched_has_work (self->sched))
        self->dispatch_due = true;
    coord_metrics_tick (self, now);
}

// ============================================================ construction

static int s_setopt (void *handle, int option, int value, const char *name, ak_err_t *err)
{
    if (zmq_setsockopt (handle, option, &value, sizeof value) != 0)
        return ak_err_set (err, AK_EIO, "zmq_setsockopt (%s): %s", name, zmq_strerror (zmq_errno ()));
    return 0;
}

static int s_bind (ak_coord_t *self, ak_ep_t ep, ak_err_t *err)
{
    const char *endpoint = self->endpoints[ep];
    if (strncmp (endpoint, "tcp://", 6) != 0 && strncmp (endpoint, "ipc://", 6) != 0)
        return ak_err_set (err, AK_EINVAL, "%s endpoint '%s': must be tcp://HOST:PORT or ipc://PATH",
                           coord_ep_names[ep], endpoint);
    self->sock[ep] = zsock_new (ZMQ_ROUTER);
    if (!self->sock[ep])
        return ak_err_set (err, AK_EIO, "%s endpoint: cannot create a ROUTER socket", coord_ep_names[ep]);
    void *h = zsock_resolve (self->sock[ep]);
    int64_t max = AK_MAX_MSG_SIZE;
    int rc = s_setopt (h, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY", err);
    if (rc == 0)
        rc = s_setopt (h, ZMQ_LINGER, S_LINGER_MS, "ZMQ_LINGER", err);
    if (rc == 0 && zmq_setsockopt (h, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0)
        rc = ak_err_set (err, AK_EIO, "zmq_setsockopt (ZMQ_MAXMSGSIZE): %s", zmq_strerror (zmq_errno ()));
    if (rc == 0 && !self->opts.plain)
        rc = ak_auth_server_setup (h, self->opts.cert_file, coord_ep_names[ep], err);
    if (rc)
        return ak_err_prefix (err, "%s endpoint", coord_ep_names[ep]);
    if (zmq_bind (h, endpoint) != 0)
        return ak_err_set (err, AK_EIO, "cannot bind the %s endpoint %s: %s", coord_ep_names[ep], endpoint,
                           zmq_strerror (zmq_errno ()));

    char addr[96];
    snprintf (addr, sizeof addr, "inproc://akcoord-monitor-%p-%d", (void *) self, (int) ep);
    if (zmq_socket_monitor (h, addr, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0)
        return ak_err_set (err, AK_EIO, "%s endpoint: zmq_socket_monitor: %s", coord_ep_names[ep],
                           zmq_strerror (zmq_errno ()));
    self->mon[ep] = zsock_new (ZMQ_PAIR);
    if (!self->mon[ep] || zmq_connect (zsock_resolve (self->mon[ep]), addr) != 0)
        return ak_err_set (err, AK_EIO, "%s endpoint: cannot connect its monitor", coord_ep_names[ep]);
    return 0;
}

/* After a start: each leased task counts in its holder's outstanding set,
   so that the holder's HELLO keeps what it lists and gives back the rest
   (s_reconcile), and its credit is right. */
static void s_hold_loaded (ak_coord_t *self)
{
    for (ak_batch_t *b = ak_sched_batch_first (self->sched); b; b = ak_sched_batch_next (self->sched))
        for (size_t i = 0; b->state == AK_BS_OPEN && i < b->ntasks; i++) {
            ak_task_t *t = b->tasks[i];
            ak_worker_t *w = t->state == AK_TS_LEASED ? ak_registry_get (self->registry, t->worker_id) : NULL;
            if (w)
                ak_worker_hold (w, t->task_id, t->attempt);
        }
}

int ak_coord_new (const ak_coord_opts_t *opts, ak_coord_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    ak_coord_t *self = ak_calloc (1, sizeof *self);
    self->opts = *opts;
    if (!self->opts.heartbeat_ms)
        self->opts.heartbeat_ms = 1000;
    if (!self->opts.liveness)
        self->opts.liveness = 3;
    if (!self->opts.commit_max)
        self->opts.commit_max = 256;
    self->endpoints[AK_EP_WORKERS] = ak_strdup (opts->workers_endpoint ? opts->workers_endpoint
                                                                       : "tcp://127.0.0.1:5555");
    self->endpoints[AK_EP_CLIENTS] = ak_strdup (opts->clients_endpoint ? opts->clients_endpoint
                                                                       : "tcp://127.0.0.1:5556");
    self->start = ak_clock_mono_ms ();
    self->tick_ms = self->opts.heartbeat_ms / 4;
    if (self->tick_ms < 10)
        self->tick_ms = 10;
    if (self->tick_ms > 250)
        self->tick_ms = 250;

    ak_txn_t *txn = NULL;
    ak_store_opts_t sopts = { .map_size = opts->map_size, .commit_delay_ms = opts->commit_delay_ms };
    if (opts->commit_delay_ms)
        ak_warn ("AKCOORD_SLOW_COMMIT_MS=%u: every commit waits %u ms first (slow storage, simulated)",
                 opts->commit_delay_ms, opts->commit_delay_ms);
    int rc = ak_store_open (opts->store_dir, &sopts, &self->store, err);
    if (rc)
        goto fail;
    self->blobs = zhashx_new ();
    if (!self->blobs)
        abort ();
    zhashx_set_destructor (self->blobs, coord_blob_free);
    self->sched = ak_sched_new ();
    self->registry = ak_registry_new ();
    self->loopstat = ak_loopstat_new (self->opts.slow_wakeup_ms ? self->opts.slow_wakeup_ms : AK_LOOPSTAT_SLOW_MS);
    ak_intake_opts_t iopts = { self->opts.commit_ms, self->opts.commit_max, self->opts.map_max };
    self->intake = ak_intake_new (self->store, self->sched, self->registry, &iopts);
    if (!self->opts.commit_sync && !(self->committer = ak_committer_new (self->store, err))) {
        rc = err ? err->code : AK_EIO;
        goto fail;
    }
    rc = ak_store_begin (self->store, false, &txn, err);
    if (rc == 0)
        rc = ak_registry_load (self->registry, txn, err);
    /* a task assigned but not started waits this long for its holder to
       register again after a restart (sched.h) */
    if (rc == 0)
        rc = ak_sched_load (self->sched, txn, self->start,
                            (uint64_t) self->opts.heartbeat_ms * self->opts.liveness, err);
    ak_store_abort (&txn);
    if (rc)
        goto fail;
    s_hold_loaded (self);

    self->admit = ak_admit_new ();
    self->malformed = zhashx_new ();
    self->dropped = zhashx_new ();
    self->queue = zlistx_new ();
    if (!self->malformed || !self->dropped || !self->queue)
        abort ();
    zlistx_set_destructor (self->queue, s_request_free);
    if (!self->opts.client_queue_max)
        self->opts.client_queue_max = S_CLIENT_QUEUE;
    if (!self->opts.malformed_max)
        self->opts.malformed_max = S_MALFORMED_MAX;
    /* The ZAP handler is bound before any CURVE socket: libzmq lets every
       key in while no handler is there. */
    if (!self->opts.plain) {
        if (!self->opts.cert_file || !self->opts.keys_dir) {
            rc = ak_err_set (err, AK_EINVAL, "no server certificate and key directory "
                             "(--cert FILE --keys DIR), and plain mode was not asked for (--plain)");
            goto fail;
        }
        rc = ak_keyring_load (self->opts.keys_dir, &self->ring, err);
        if (rc)
            goto fail;
        self->zap = zsock_new (ZMQ_REP);
        if (!self->zap || zmq_bind (zsock_resolve (self->zap), S_ZAP_ENDPOINT) != 0) {
            rc = ak_err_set (err, AK_EIO, "cannot bind the ZAP handler on %s: %s", S_ZAP_ENDPOINT,
                             zmq_strerror (zmq_errno ()));
            goto fail;
        }
    }

    self->client = (ak_client_env_t) {
        .store = self->store, .sched = self->sched, .registry = self->registry,
        .intake = self->intake, .counters = &self->counters, .start_ms = self->start,
        .commit_now = s_commit_cb, .arg = self, .waiting = ak_waiting_log_new (),
        .loop = self->loopstat,
    };
    rc = s_bind (self, AK_EP_WORKERS, err);
    if (rc == 0)
        rc = s_bind (self, AK_EP_CLIENTS, err);
    if (rc)
        goto fail;
    ak_info ("akcoord %s: store %s, workers on %s, clients on %s (heartbeat %u ms x %u, commit %u ms / %u)",
             AK_VERSION, opts->store_dir, self->endpoints[AK_EP_WORKERS], self->endpoints[AK_EP_CLIENTS],
             self->opts.heartbeat_ms, self->opts.liveness, self->opts.commit_ms, self->opts.commit_max);
    if (self->opts.plain)
        ak_warn ("WARNING: plain mode: no authentication, no encryption: anyone who can reach %s and %s "
                 "may register workers, submit kernels and change profiles",
                 self->endpoints[AK_EP_WORKERS], self->endpoints[AK_EP_CLIENTS]);
    else
        ak_info ("CURVE on both endpoints: server certificate %s, %zu keys from %s", self->opts.cert_file,
                 ak_keyring_size (self->ring), self->opts.keys_dir);
    *self_p = self;
    return 0;

fail:
    ak_coord_destroy (&self);
    return rc;
}

void ak_coord_destroy (ak_coord_t **self_p)
{
    if (self_p && *self_p) {
        ak_coord_t *self = *self_p;
        for (int ep = 0; ep < AK_EP_COUNT; ep++) {
            if (self->sock[ep] && self->mon[ep]
                && zmq_socket_monitor (zsock_resolve (self->sock[ep]), NULL, 0) != 0)
                ak_debug ("%s endpoint: stopping its monitor: %s", coord_ep_names[ep],
                          zmq_strerror (zmq_errno ()));
            zsock_destroy (&self->mon[ep]);
            zsock_destroy (&self->sock[ep]);
            free (self->endpoints[ep]);
        }
        zhashx_destroy (&self->blobs);
        zlistx_destroy (&self->queue);
        ak_admit_destroy (&self->admit);
        zhashx_destroy (&self->malformed);
        zhashx_destroy (&self->dropped);
        ak_waiting_log_destroy (&self->client.waiting);
        zsock_destroy (&self->zap);
        ak_keyring_destroy (&self->ring);
        free (self->sendbuf);
        ak_committer_destroy (&self->committer);
        ak_intake_destroy (&self->intake);
        ak_registry_destroy (&self->registry);
        ak_sched_destroy (&self->sched);
        ak_loopstat_destroy (&self->loopstat);
        ak_store_destroy (&self->store);
        free (self);
        *self_p = NULL;
    }
}

// ==================================================================== loop

int ak_coord_run (ak_coord_t *self, ak_err_t *err)
{
    uint64_t now = ak_clock_mono_ms ();
    self->next_tick = now;
    self->next_heartbeat = now + self->opts.heartbeat_ms;
    /* the info lines of a wake-up (three per task) go out in one write */
    ak_log_hold (true);
    while (!self->stop && !(self->opts.stop_flag && *self->opts.stop_flag)) {
        now = ak_clock_mono_ms ();
        uint64_t wake = self->next_tick;
        uint64_t due = ak_intake_deadline (self->intake);
        if (due && due < wake)
            wake = due;
        long timeout = wake > now && !zlistx_size (self->queue) ? (long) (wake - now) : 0;
        zmq_pollitem_t items[6] = {
            { zsock_resolve (self->sock[AK_EP_WORKERS]), 0, ZMQ_POLLIN, 0 },
            { zsock_resolve (self->sock[AK_EP_CLIENTS]), 0, ZMQ_POLLIN, 0 },
            { zsock_resolve (self->mon[AK_EP_WORKERS]), 0, ZMQ_POLLIN, 0 },
            { zsock_resolve (self->mon[AK_EP_CLIENTS]), 0, ZMQ_POLLIN, 0 },
        };
        int nitems = 4, zap_at = -1, commit_at = -1;
        if (self->zap) {
            items[nitems] = (zmq_pollitem_t) { zsock_resolve (self->zap), 0, ZMQ_POLLIN, 0 };
            zap_at = nitems++;
        }
        if (self->committer && ak_intake_busy (self->intake)) {
            /* the commit in flight wakes the loop when it holds */
            items[nitems] = (zmq_pollitem_t) { NULL, ak_committer_fd (self->committer), ZMQ_POLLIN, 0 };
            commit_at = nitems++;
        }
        ak_log_flush ();
        coord_wake_end (self);          /* the wake-up before this poll, its log flush included */
        if (zmq_poll (items, nitems, timeout) < 0) {
            if (zmq_errno () == EINTR)
                continue;
            ak_error ("zmq_poll: %s; stopping", zmq_strerror (zmq_errno ()));
            break;
        }
        coord_wake_begin (self);
        uint64_t t0 = self->wake_ns;
        if (commit_at >= 0 && (items[commit_at].revents & ZMQ_POLLIN)) {
            /* first: its ACKs free slots the frames below may fill */
            ak_err_t cerr = { 0 };
            coord_commit_finish (self, false, &cerr);
            t0 = ak_clock_mono_ns ();
        }
        for (int ep = 0; ep < AK_EP_COUNT; ep++) {
            if (items[ep].revents & ZMQ_POLLIN) {
                uint32_t n = 0;
                while (n < AK_COORD_DRAIN_MAX && !self->stop && s_recv_one (self, (ak_ep_t) ep))
                    n++;
                self->wake.msgs[ep] += n;
                self->wake.recv_us[ep] += coord_us_since (t0);
                t0 = ak_clock_mono_ns ();
            }
            if (items[2 + ep].revents & ZMQ_POLLIN)
                s_drain_monitor (self, (ak_ep_t) ep);
        }
        if (zap_at >= 0 && (items[zap_at].revents & ZMQ_POLLIN))
            coord_zap_drain (self);
        if (zlistx_size (self->queue)) {
            t0 = ak_clock_mono_ns ();
            s_serve_clients (self, ak_clock_mono_ms ());
            self->wake.clients_us += coord_us_since (t0);
        }
        now = ak_clock_mono_ms ();
        if (now >= self->next_tick) {
            t0 = ak_clock_mono_ns ();
            s_tick (self, now);
            self->next_tick = now + self->tick_ms;
            self->wake.tick = 1;
            self->wake.tick_us += coord_us_since (t0);
        }
        due = ak_intake_deadline (self->intake);
        if (due && now >= due)
            coord_commit_start (self);
        if (self->dispatch_due) {
            self->dispatch_due = false;
            t0 = ak_clock_mono_ns ();
            coord_dispatch_all (self, now);
            self->wake.dispatch_us += coord_us_since (t0);
        }
    }
    coord_wake_end (self);
    ak_info ("stopping: committing what is pending");
    int rc = coord_commit (self, err);
    if (rc == 0) {
        coord_settle (self, ak_clock_mono_ms ());
        rc = coord_commit (self, err);
    }
    ak_log_hold (false);
    return rc;
}
