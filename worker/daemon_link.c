/*  worker/daemon_link.c: the daemon's side of the protocol (daemon_impl.h,
    docs/protocol.md): what it sends to the coordinator and what it does
    with what it hears.  The socket, the handshake, liveness and reconnects
    are worker/uplink.c's. */
#include "daemon_impl.h"
#include "assign.h"
#include "clock.h"
#include "log.h"
#include "pbutil.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AK_RECV_BATCH           256        /* messages per loop turn */
#define AK_REHELLO_GAP_MS       200        /* a burst of out-of-step ASSIGNs gets one HELLO */

/* ============================================================== sending */

/* The socket to the coordinator; NULL while there is none (uplink.h). */
zsock_t *ak_daemon_sock (ak_daemon_t *d)
{
    return d->link ? ak_uplink_socket (d->link) : NULL;
}

static int s_send (ak_daemon_t *d, Ak__Envelope *env)
{
    zsock_t *sock = ak_daemon_sock (d);
    if (!sock)
        return AK_EUNAVAIL;
    env->seq = ++d->seq;
    int rc = ak_envelope_send (sock, NULL, 0, env);
    if (rc && rc != AK_EUNAVAIL)
        ak_warn ("sending %s: %s", ak_envelope_kind (env), ak_strerror (rc));
    if (rc == 0)        /* any message is a heartbeat: the next one is due later */
        d->next_hb_ms = ak_clock_mono_ms () + d->cfg.heartbeat_ms;
    return rc;
}

static uint32_t s_total_slots (ak_daemon_t *d)
{
    return (uint32_t) d->nslots;
}

static void s_send_hello (ak_daemon_t *d)
{
    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = d->worker_id;
    hello.host = d->host;
    hello.pid = (uint32_t) getpid ();
    hello.n_backends = d->nbackends;
    hello.backends = (char **) d->backends;
    hello.n_devices = d->ndevices;
    hello.devices = d->devices;
    hello.slots = s_total_slots (d);
    hello.prefetch = d->cfg.prefetch;
    hello.software_version = (char *) AK_VERSION;
    hello.heartbeat_ms = d->cfg.heartbeat_ms;
    /* a registration starts a new blob cache: ASSIGNs sent before the
       coordinator sees this HELLO are of the old epoch */
    hello.blob_epoch = ++d->blob_epoch;
    hello.blob_cache_bytes = (uint64_t) d->cfg.blob_cache_mb << 20;
    ak_blobcache_reset (d->blobs, hello.blob_epoch, hello.blob_cache_bytes);

    /* what it holds: the tasks it runs and those whose receipt waits for
       an ACK (re-sent right after), so that the coordinator keeps them
       with this worker instead of re-queueing them (docs/protocol.md) */
    size_t cap = d->ntasks + d->npending;
    Ak__TaskRef *refs = cap ? ak_calloc (cap, sizeof *refs) : NULL;
    Ak__TaskRef **ptrs = cap ? ak_calloc (cap, sizeof *ptrs) : NULL;
    size_t n = 0;
    for (ak_dtask_t *t = d->tasks; t && n < cap; t = t->next, n++) {
        ak__task_ref__init (&refs[n]);
        refs[n].task_id = t->a->task_id;
        refs[n].attempt = t->a->attempt;
        ptrs[n] = &refs[n];
    }
    for (ak_dpending_t *p = d->pending; p && n < cap; p = p->next, n++) {
        ak__task_ref__init (&refs[n]);
        refs[n].task_id = p->task_id;
        refs[n].attempt = p->attempt;
        ptrs[n] = &refs[n];
    }
    hello.n_running = n;
    hello.running = ptrs;

    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    if (s_send (d, &env) == 0)
        ak_info ("HELLO to %s as %s (%u slots, prefetch %u, %zu tasks held)", d->coordinator,
                 d->worker_id, hello.slots, hello.prefetch, n);
    d->last_hello_ms = ak_clock_mono_ms ();
    d->hello_unread = true;
    free (refs);
    free (ptrs);
}

void ak_daemon_send_heartbeat (ak_daemon_t *d)
{
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    uint32_t cap = s_total_slots (d) + d->cfg.prefetch;
    hb.credits = d->ntasks >= cap ? 0 : cap - (uint32_t) d->ntasks;
    hb.unacked = (uint32_t) d->npending;
    Ak__WorkerTiming timing = AK__WORKER_TIMING__INIT;
    timing.sampled_ms = d->sampled_ms;
    timing.busy_ms = d->busy_ms + (d->busy_since_ms ? (double) (ak_clock_mono_ms () - d->busy_since_ms) : 0);
    timing.exec_ms = d->exec_ms;
    timing.tasks = d->receipts_made;
    timing.devices = (uint32_t) d->ndevices;
    hb.timing = &timing;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    s_send (d, &env);
}

void ak_daemon_send_started (ak_daemon_t *d, ak_dtask_t *t, uint32_t device)
{
    Ak__TaskStarted st = AK__TASK_STARTED__INIT;
    st.task_id = t->a->task_id;
    st.attempt = t->a->attempt;
    st.device = device;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_STARTED;
    env.started = &st;
    s_send (d, &env);
}

/*  Hands one pending receipt to ZeroMQ.  One that cannot fit a message
    loses its bulk (gates detail, timings, log) but keeps its verdict. */
void ak_daemon_send_receipt (ak_daemon_t *d, ak_dpending_t *p)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = p->r;
    int rc = s_send (d, &env);
    if (rc == AK_ETOOBIG) {
        Ak__Receipt *r = p->r;
        for (size_t i = 0; i < r->n_timings; i++)
            ak__workload_timing__free_unpacked (r->timings[i], NULL);
        free (r->timings);
        r->timings = NULL;
        r->n_timings = 0;
        for (size_t i = 0; i < r->n_gates; i++)
            ak_pb_set_str (&r->gates[i]->detail, "");
        ak_pb_set_str (&r->compile_log, "");
        ak_warn ("receipt %s#%u too large: timings and details dropped", p->task_id, p->attempt);
        rc = s_send (d, &env);
    }
    p->sent = rc == 0;
}

/*  all: re-send every unacked receipt (after a registration); else only
    those not handed over yet. */
void ak_daemon_flush_pending (ak_daemon_t *d, bool all)
{
    for (ak_dpending_t *p = d->pending; p && ak_daemon_sock (d); p = p->next)
        if (all || !p->sent)
            ak_daemon_send_receipt (d, p);
}

/* ============================================================ connection */

/*  What the uplink said (uplink.h): a new socket registers and re-sends
    every unacked receipt; a closed one leaves them to be sent again; too
    many refusals stop the daemon (ak_daemon_run returns AK_EDENIED). */
void ak_daemon_link_event (ak_daemon_t *d, ak_uplink_event_t ev, const ak_err_t *err)
{
    switch (ev) {
        case AK_UPLINK_CONNECTED:
            d->next_hb_ms = ak_clock_mono_ms () + d->cfg.heartbeat_ms;
            s_send_hello (d);
            ak_daemon_flush_pending (d, true);
            break;
        case AK_UPLINK_REFUSED:
            d->refused = *err;
            ak_daemon_stop (d);
            /* fall through */
        case AK_UPLINK_LOST:
            for (ak_dpending_t *p = d->pending; p; p = p->next)
                p->sent = false;
            break;
        default:
            break;
    }
}

/* ============================================================== incoming */

static void s_on_assign (ak_daemon_t *d, Ak__Envelope **env_p)
{
    Ak__Envelope *env = *env_p;
    const Ak__Assign *a = env->assign;
    if (!a->task_id[0]) {
        d->rejected++;
        ak_warn ("ASSIGN without a task id refused");
        return;
    }
    if (ak_daemon_task_find (d, a->task_id, a->attempt)) {
        ak_debug ("ASSIGN %s#%u: already held", a->task_id, a->attempt);
        return;
    }
    ak_err_t berr = { 0 };
    int brc = ak_blobcache_resolve (d->blobs, env->assign, &berr);
    if (brc == AK_ESTATE) {
        /* sent before the coordinator saw our last HELLO, which released it */
        ak_info ("ASSIGN %s#%u dropped: %s", a->task_id, a->attempt, berr.msg);
        return;
    }
    if (brc) {
        /* out of step with the coordinator's mirror (messages lost in a
           reconnect): a new registration starts both afresh */
        d->rejected++;
        ak_warn ("ASSIGN %s#%u dropped: %s; registering again", a->task_id, a->attempt, berr.msg);
        if (ak_clock_mono_ms () - d->last_hello_ms >= AK_REHELLO_GAP_MS) {
            s_send_hello (d);
            ak_daemon_flush_pending (d, true);
        }
        return;
    }
    ak_dpending_t *p = ak_daemon_pending_find (d, a->task_id, a->attempt);
    if (p) {
        /* Finished already: the coordinator lacks the receipt. */
        ak_daemon_send_receipt (d, p);
        return;
    }
    size_t cap = (s_total_slots (d) + d->cfg.prefetch) * 2 + 8;
    if (d->ntasks >= cap) {
        d->rejected++;
        ak_warn ("ASSIGN %s#%u refused: %zu tasks held already (credit ignored)",
                 a->task_id, a->attempt, d->ntasks);
        return;
    }
    ak_dtask_t *t = ak_calloc (1, sizeof *t);
    t->env = env;
    *env_p = NULL;
    t->a = a;
    t->slot = -1;
    ak_assign_policy (a->policy, &t->policy);
    ak_dtask_t **tail = &d->tasks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = t;
    if (d->ntasks++ == 0)
        d->busy_since_ms = ak_clock_mono_ms ();
    ak_info ("task %s#%u assigned: %s %s%s%s", a->task_id, a->attempt, a->kind, a->op,
             a->candidate_name[0] ? " " : "", a->candidate_name);
    t->state = AK_DTASK_COMPILING;
    ak_pool_push (d->pool, t);
}

static void s_on_ack (ak_daemon_t *d, const Ak__Ack *ack)
{
    for (ak_dpending_t **pp = &d->pending; *pp; pp = &(*pp)->next) {
        ak_dpending_t *p = *pp;
        if (p->attempt == ack->attempt && strcmp (p->task_id, ack->task_id) == 0) {
            *pp = p->next;
            d->npending--;
            if (ack->refused && *ack->refused)
                ak_warn ("receipt %s#%u refused by the coordinator, dropped: %s", p->task_id, p->attempt,
                         ack->refused);
            else
                ak_debug ("receipt %s#%u acked as %s%s", p->task_id, p->attempt, ack->receipt_id,
                          ack->duplicate ? " (duplicate)" : "");
            ak_daemon_spool_remove (d, p);
            ak__receipt__free_unpacked (p->r, NULL);
            free (p->task_id);
            free (p);
            return;
        }
    }
    ak_debug ("ACK for unknown receipt %s#%u", ack->task_id, ack->attempt);
}

/*  A DISCONNECT that refuses this worker (docs/protocol.md, "Refusals"):
    the same HELLO would be refused again, so no HELLO now; the uplink logs
    it at ERROR, reconnects after its backoff, and stops the daemon after
    too many. */
static void s_refused (ak_daemon_t *d, const Ak__Disconnect *dc, uint64_t now)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value (&ak__disconnect_code__descriptor,
                                                                       (int) dc->code);
    char why[512];
    snprintf (why, sizeof why, "the coordinator refused this worker: %.300s (%s)",
              dc->reason && *dc->reason ? dc->reason : "no reason given", v ? v->name : "unknown code");
    ak_err_t err = { 0 };
    ak_daemon_link_event (d, ak_uplink_refused (d->link, why, now, &err), &err);
}

static void s_on_frame (ak_daemon_t *d, const void *data, size_t size)
{
    Ak__Envelope *env = NULL;
    ak_err_t err = { 0 };
    uint64_t now = ak_clock_mono_ms ();
    if (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &env, &err) != 0) {
        d->rejected++;
        ak_warn ("message from the coordinator refused (%" PRIu64 " so far): %s", d->rejected, err.msg);
        return;
    }
    /* Any message proves the coordinator alive; any but a DISCONNECT
       that this worker is registered and that it read our HELLO
       (s_send_hello). */
    ak_uplink_heard (d->link, now, env->body_case != AK__ENVELOPE__BODY_DISCONNECT);
    if (env->body_case != AK__ENVELOPE__BODY_DISCONNECT)
        d->hello_unread = false;
    switch (env->body_case) {
        case AK__ENVELOPE__BODY_HEARTBEAT:
            break;
        case AK__ENVELOPE__BODY_ASSIGN:
            s_on_assign (d, &env);
            break;
        case AK__ENVELOPE__BODY_ACK:
            s_on_ack (d, env->ack);
            break;
        case AK__ENVELOPE__BODY_DISCONNECT:
            if (env->disconnect->code != AK__DISCONNECT_CODE__DISCONNECT_REREGISTER) {
                s_refused (d, env->disconnect, now);
                break;
            }
            /* One sent before the coordinator read our last HELLO answers
               what we sent before it, and all of that (every unacked
               receipt) went again after that HELLO: a burst of them gets
               one HELLO.  The coordinator's first word after reading a
               HELLO is its welcome, so once anything else arrived every
               DISCONNECT is new and gets a HELLO and the receipts again. */
            if (d->hello_unread && now - d->last_hello_ms < (uint64_t) d->cfg.heartbeat_ms * d->cfg.liveness) {
                ak_debug ("DISCONNECT (%s) ignored: sent before our HELLO was read", env->disconnect->reason);
                break;
            }
            ak_info ("coordinator asks to re-register (%s)", env->disconnect->reason);
            s_send_hello (d);
            ak_daemon_flush_pending (d, true);
            break;
        default:
            d->rejected++;
            ak_warn ("unexpected %s from the coordinator ignored", ak_envelope_kind (env));
            break;
    }
    ak_envelope_free (&env);
}

/*  Drops the rest of a multi-frame message (one frame per message is the
    protocol on this socket). */
static void s_drop_rest (void *h, zmq_msg_t *msg)
{
    while (zmq_msg_more (msg)) {
        if (zmq_msg_close (msg) != 0 || zmq_msg_init (msg) != 0)
            return;
        if (zmq_msg_recv (msg, h, ZMQ_DONTWAIT) < 0)
            break;
    }
}

void ak_daemon_recv_all (ak_daemon_t *d)
{
    for (int i = 0; i < AK_RECV_BATCH && ak_daemon_sock (d); i++) {
        void *h = zsock_resolve (ak_daemon_sock (d));
        zmq_msg_t msg;
        if (zmq_msg_init (&msg) != 0) {
            ak_error ("zmq_msg_init: %s", zmq_strerror (zmq_errno ()));
            return;
        }
        if (zmq_msg_recv (&msg, h, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno ();
            if (zmq_msg_close (&msg) != 0)
                ak_error ("zmq_msg_close: %s", zmq_strerror (zmq_errno ()));
            if (e != EAGAIN && e != EINTR)
                ak_warn ("receive: %s", zmq_strerror (e));
            return;
        }
        if (zmq_msg_more (&msg)) {
            s_drop_rest (h, &msg);
            d->rejected++;
            ak_warn ("multi-frame message from the coordinator refused (%" PRIu64 " so far)", d->rejected);
        }
        else
            s_on_frame (d, zmq_msg_data (&msg), zmq_msg_size (&msg));
        if (zmq_msg_close (&msg) != 0)
            ak_error ("zmq_msg_close: %s", zmq_strerror (zmq_errno ()));
    }
}
