/*  coordinator/coord.c: the event loop, the worker protocol and dispatch
    (see coord.h and docs/protocol.md). */
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord.h"
#include "access.h"
#include "admit.h"
#include "assign.h"
#include "auth.h"
#include "client.h"
#include "clock.h"
#include "counters.h"
#include "cpb.h"
#include "envelope.h"
#include "intake.h"
#include "log.h"
#include "sdnotify.h"
#include "pbwire.h"
#include "registry.h"
#include "results.h"
#include "rounds.h"
#include "sched.h"
#include "store.h"
#include "util.h"
#include "verify.h"
#include "waiting.h"

#define S_LINGER_MS        500      /* bounded linger on close */
#define S_DRAIN_MAX        256      /* messages per socket per wake-up, for fairness */
#define S_WARN_EVERY_MS    1000     /* rate limit of "rejected" warnings */
#define S_BLOB_CACHE_MAX   (64u << 20)  /* bytes of cached blobs before the cache is emptied */
#define S_SENDBUF_KEEP     (1u << 20)   /* a larger send buffer is freed after use */
#define S_CLIENT_QUEUE     1024         /* default bound on waiting client requests */
#define S_MALFORMED_MAX    16           /* default malformed frames before a peer is dropped */
#define S_PEERS_MAX        65536        /* peers tracked for malformed frames / dropped */
#define S_ZAP_ENDPOINT     "inproc://zeromq.zap.01"

/* A client request read and waiting for its turn (ak_coord.queue). */
typedef struct {
    uint8_t       route[AK_ROUTE_MAX];
    size_t        route_len;
    Ak__Envelope *env;
    ak_role_t     role;                 /* AK_ROLE_OPERATOR in plain mode */
    char          name[AK_KEY_NAME_MAX + 1];
} s_request_t;

static const char *s_ep_names[AK_EP_COUNT] = { "workers", "clients" };

struct ak_coord {
    ak_coord_opts_t  opts;
    char            *endpoints[AK_EP_COUNT];
    ak_store_t      *store;
    ak_sched_t      *sched;
    ak_registry_t   *registry;
    ak_intake_t     *intake;
    zsock_t         *sock[AK_EP_COUNT];
    zsock_t         *mon[AK_EP_COUNT];     /* socket monitors: connections */
    ak_counters_t    counters;
    ak_client_env_t  client;
    uint64_t         start;
    uint64_t         next_tick;
    uint64_t         next_heartbeat;
    uint32_t         tick_ms;
    bool             stop;
    bool             dispatch_due;
    uint64_t         seq;
    uint64_t         warn_at[AK_EP_COUNT];
    uint64_t         suppressed[AK_EP_COUNT];
    zhashx_t        *blobs;             /* digest -> verified blob text (s_blob) */
    size_t           blob_bytes;
    uint8_t         *sendbuf;           /* s_send_packed */
    size_t           sendcap;
    /* security: NULL ring and zap in plain mode */
    ak_keyring_t    *ring;
    zsock_t         *zap;               /* REP on S_ZAP_ENDPOINT: the ZAP handler */
    ak_admit_t      *admit;             /* what a worker may do (admit.h) */
    uint64_t         refuse_warn_at;
    uint64_t         refuse_suppressed;
    zhashx_t        *malformed;         /* peer routing id (hex) -> malformed frames */
    zhashx_t        *dropped;           /* peers dropped: their frames are ignored */
    zlistx_t        *queue;             /* s_request_t: client requests waiting */
    const ak_key_t  *peer;              /* key of the message being handled (or NULL) */
    const uint8_t   *frame;             /* its envelope frame as received (or NULL) */
    size_t           frame_len;
    bool             frame_slim;        /* its receipt is slim (envelope.h) */
    uint64_t         auth_warn_at;
    uint64_t         auth_suppressed;
};

static int s_commit (ak_coord_t *self, ak_err_t *err);

// ================================================================== sending

/* Hex of a routing id, for logs. */
static const char *s_hex (const void *data, size_t len, char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *d = data;
    size_t n = 0;
    for (size_t i = 0; i < len && n + 3 <= size; i++) {
        buf[n++] = hex[d[i] >> 4];
        buf[n++] = hex[d[i] & 15];
    }
    buf[n] = '\0';
    return buf;
}

/* Sends env to route on endpoint ep without blocking.  0 or the
   ak_envelope_send code; failures are counted, never fatal. */
/* Packs env into the reusable send buffer (what ak_envelope_send does with
   a buffer per message: a malloc of an ASSIGN's size per dispatch, which
   showed in profiles) and sends route + envelope.  0, AK_ETOOBIG,
   AK_EUNAVAIL (peer gone or its queue full) or AK_EIO. */
/* A buffer of size bytes to pack a message into: the reusable one, grown
   up to S_SENDBUF_KEEP, or one for this message (s_buf_done frees it). */
static uint8_t *s_buf (ak_coord_t *self, size_t size)
{
    if (size <= self->sendcap)
        return self->sendbuf;
    uint8_t *buf = ak_malloc (size);
    if (size <= S_SENDBUF_KEEP) {
        free (self->sendbuf);
        self->sendbuf = buf;
        self->sendcap = size;
    }
    return buf;
}

static void s_buf_done (ak_coord_t *self, uint8_t *buf)
{
    if (buf != self->sendbuf)
        free (buf);
}

/* Sends route + the packed envelope buf.  0, AK_EUNAVAIL or AK_EIO. */
static int s_send_frame (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, const uint8_t *buf,
                         size_t size)
{
    void *h = zsock_resolve (self->sock[ep]);
    if (zmq_send (h, route, len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 || zmq_send (h, buf, size, ZMQ_DONTWAIT) < 0)
        return zmq_errno () == EAGAIN || zmq_errno () == EHOSTUNREACH ? AK_EUNAVAIL : AK_EIO;
    return 0;
}

static int s_send_packed (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, Ak__Envelope *env)
{
    if (env->body_case == AK__ENVELOPE__BODY__NOT_SET)
        return AK_EINVAL;
    env->version = AK_PROTOCOL_VERSION;
    size_t size = ak__envelope__get_packed_size (env);
    if (size > AK_MAX_MSG_SIZE)
        return AK_ETOOBIG;
    uint8_t *buf = s_buf (self, size);
    int rc = ak__envelope__pack (env, buf) != size ? AK_EINTERNAL : s_send_frame (self, ep, route, len, buf, size);
    s_buf_done (self, buf);
    return rc;
}

static int s_send (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, Ak__Envelope *env)
{
    env->seq = ++self->seq;
    int rc = s_send_packed (self, ep, route, len, env);
    if (rc) {
        char hex[64];
        self->counters.send_failures++;
        ak_debug ("%s endpoint: %s to peer %s not sent: %s", s_ep_names[ep], ak_envelope_kind (env),
                  s_hex (route, len, hex, sizeof hex), ak_strerror (rc));
    }
    return rc;
}

/* DISCONNECT with a code: REREGISTER asks the worker to say HELLO again,
   any other refuses it (docs/protocol.md, "Refusals"). */
static void s_send_disconnect_code (ak_coord_t *self, const void *route, size_t len, Ak__DisconnectCode code,
                                    const char *reason)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Disconnect d = AK__DISCONNECT__INIT;
    d.reason = (char *) reason;
    d.code = code;
    env.body_case = AK__ENVELOPE__BODY_DISCONNECT;
    env.disconnect = &d;
    if (s_send (self, AK_EP_WORKERS, route, len, &env) == 0)
        self->counters.disconnects_sent++;
}

static void s_send_disconnect (ak_coord_t *self, const void *route, size_t len, const char *reason)
{
    s_send_disconnect_code (self, route, len, AK__DISCONNECT_CODE__DISCONNECT_REREGISTER, reason);
}

static void s_send_heartbeat (ak_coord_t *self, ak_worker_t *w, uint64_t now)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    int64_t credit = ak_worker_credit (w);
    hb.credits = credit > 0 ? (uint32_t) credit : 0;
    hb.unacked = (uint32_t) ak_intake_staged_for (self->intake, w->worker_id);
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    if (s_send (self, AK_EP_WORKERS, w->route, w->route_len, &env) == 0)
        w->last_sent = now;
}

static void s_reply (ak_coord_t *self, const void *route, size_t len, int code, const char *error,
                     const char *json)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientReply reply = AK__CLIENT_REPLY__INIT;
    reply.code = code;
    reply.error = (char *) (error ? error : "");
    reply.json = (char *) (json ? json : "");
    env.body_case = AK__ENVELOPE__BODY_REPLY;
    env.reply = &reply;
    ak_log_flush ();                /* what a client can see is in the log */
    if (s_send (self, AK_EP_CLIENTS, route, len, &env) == AK_ETOOBIG) {
        reply.code = AK_ETOOBIG;
        reply.error = "the answer exceeds the 16 MiB message limit";
        reply.json = "";
        s_send (self, AK_EP_CLIENTS, route, len, &env);
    }
}

/* Counts a rejected message and warns, at most once a second per endpoint. */
static void s_reject (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, const char *why)
{
    uint64_t now = ak_clock_mono_ms ();
    self->counters.rejected[ep]++;
    if (self->warn_at[ep] && now < self->warn_at[ep] + S_WARN_EVERY_MS) {
        self->suppressed[ep]++;
        return;
    }
    char hex[64], more[64] = "";
    if (self->suppressed[ep])
        snprintf (more, sizeof more, " (%llu more rejected since the last warning)",
                  (unsigned long long) self->suppressed[ep]);
    ak_warn ("%s endpoint: rejected a message from peer %s: %s%s", s_ep_names[ep],
             s_hex (route, len, hex, sizeof hex), why, more);
    self->warn_at[ep] = now;
    self->suppressed[ep] = 0;
}

/*  Counts (in *counter) something a worker may not do and warns, at most
    once a second, naming the peer: its routing id and, with CURVE, its key. */
static void s_refuse (ak_coord_t *self, uint64_t *counter, const void *route, size_t len, const char *why)
{
    uint64_t now = ak_clock_mono_ms ();
    (*counter)++;
    if (self->refuse_warn_at && now < self->refuse_warn_at + S_WARN_EVERY_MS) {
        self->refuse_suppressed++;
        return;
    }
    char hex[64], more[64] = "";
    if (self->refuse_suppressed)
        snprintf (more, sizeof more, " (%llu more refused since the last warning)",
                  (unsigned long long) self->refuse_suppressed);
    ak_warn ("workers endpoint: refused from peer %s (key %s): %s%s", s_hex (route, len, hex, sizeof hex),
             self->peer ? self->peer->name : "none, plain mode", why, more);
    self->refuse_warn_at = now;
    self->refuse_suppressed = 0;
}

// ================================================================= dispatch

/*  Blobs (spec JSON, sources) are immutable and content-addressed: each is
    read and its digest checked once, then served from memory, so an ASSIGN
    costs no blob read, copy or hash.  Returns the cached text (borrowed:
    valid until s_blobs_trim) or the store's error. */
static int s_blob (ak_coord_t *self, ak_txn_t *txn, const char *digest, const char **text_p,
                   ak_err_t *err)
{
    char *text = zhashx_lookup (self->blobs, digest);
    if (!text) {
        size_t len = 0;
        int rc = ak_store_get_blob (txn, digest, &text, &len, err);
        if (rc)
            return rc;
        zhashx_insert (self->blobs, digest, text);
        self->blob_bytes += len + strlen (digest);
    }
    *text_p = text;
    return 0;
}

/* Empties the blob cache once it holds more than S_BLOB_CACHE_MAX bytes;
   only between assignments, never while one borrows from it. */
static void s_blobs_trim (ak_coord_t *self)
{
    if (self->blob_bytes > S_BLOB_CACHE_MAX) {
        zhashx_purge (self->blobs);
        self->blob_bytes = 0;
    }
}

static void s_blob_free (void **item)
{
    free (*item);
    *item = NULL;
}

/*  An ASSIGN built on the stack: its definition fields passed on from the
    task's stored bytes (assign.h), the rest in assign, with strings
    borrowed from parts and the blob cache. */
typedef struct {
    Ak__Assign      assign;
    Ak__Source      src[3];         /* reference, baseline, candidate */
    ak_assign_src_t parts;
    Ak__TaskRecord *rec;            /* slim (store.h), for the record cache */
    ak_task_def_t   def;            /* the stored bytes (store.h) */
} s_assign_msg_t;

static void s_assign_msg_clear (s_assign_msg_t *m)
{
    if (m->rec)
        ak__task_record__free_unpacked (m->rec, NULL);
    m->rec = NULL;
    ak_task_def_clear (&m->def);
    ak_assign_src_clear (&m->parts);
}

static int s_source (ak_coord_t *self, ak_txn_t *txn, const char *name, const char *digest,
                     Ak__Source *src, Ak__Source **src_p, ak_err_t *err)
{
    const char *text = NULL;
    int rc = s_blob (self, txn, digest, &text, err);
    if (rc)
        return rc;
    ak__source__init (src);
    src->name = (char *) name;
    src->digest = (char *) digest;
    src->text = (char *) text;
    *src_p = src;
    return 0;
}

/* Fills a with what the coordinator adds to a task's definition: attempt,
   lease, kind, spec, sources and launch, from p (the record's fields). */
static int s_assign_rest (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, const ak_assign_src_t *p,
                          Ak__Assign *a, Ak__Source src[3], ak_err_t *err)
{
    a->attempt = task->attempt;
    a->lease_ms = task->lease_ms;
    /* a confirm task is a tune measurement to the worker (rounds.h) */
    a->kind = (char *) (strcmp (p->kind, "confirm") == 0 ? "tune" : p->kind);
    const char *spec = NULL;
    int rc = s_blob (self, txn, p->spec_digest, &spec, err);
    a->spec_json = (char *) spec;
    a->spec_digest = (char *) p->spec_digest;
    if (rc == 0)
        rc = s_source (self, txn, p->reference_name, p->reference_digest, &src[0], &a->reference, err);
    if (rc == 0)
        rc = s_source (self, txn, p->baseline_name, p->baseline_digest, &src[1], &a->baseline, err);
    if (rc == 0 && *p->candidate_digest)
        rc = s_source (self, txn, p->candidate_source_name, p->candidate_digest, &src[2], &a->candidate, err);
    if (p->verify)
        a->launch = p->verify->launch;          /* verify: the launch the profile recorded */
    return rc;
}

/* Builds the ASSIGN of task from its stored bytes and blobs into m
   (cleared by the caller with s_assign_msg_clear, also after a failure). */
static int s_build_assign (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, s_assign_msg_t *m,
                           ak_err_t *err)
{
    memset (m, 0, sizeof *m);
    int rc = ak_store_get_task_slim (txn, task->task_id, &m->rec, &m->def, err);
    if (rc == 0)
        rc = ak_assign_src_read (m->def.data, m->def.len, task->task_id, &m->parts, err);
    if (rc == 0) {
        ak__assign__init (&m->assign);
        rc = s_assign_rest (self, txn, task, &m->parts, &m->assign, m->src, err);
    }
    if (rc)
        return ak_err_prefix (err, "task %s: cannot build its assignment", task->task_id);
    return 0;
}

#ifndef NDEBUG
/* Debug builds: the ASSIGN sent (buf) must decode to the one built from
   the decoded record, as before assign.h. */
static void s_assign_check (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, const ak_worker_t *w,
                            const uint8_t *buf, size_t size)
{
    ak_err_t err = { 0 };
    Ak__TaskRecord *rec = NULL;
    if (ak_store_get_task (txn, task->task_id, &rec, &err) != 0)
        abort ();
    Ak__Assign a = AK__ASSIGN__INIT;
    Ak__Source src[3];
    a.task_id = rec->task_id;
    a.batch_id = rec->batch_id;
    a.op = rec->op;
    a.device_class = rec->device_class;
    a.backend = rec->backend;
    a.candidate_name = rec->candidate_name;
    a.params = rec->params;
    a.n_params = rec->n_params;
    a.workloads = rec->workloads;
    a.n_workloads = rec->n_workloads;
    a.policy = rec->policy;
    ak_assign_src_t p = {
        .kind = rec->kind, .spec_digest = rec->spec_digest, .reference_name = rec->reference_name,
        .reference_digest = rec->reference_digest, .baseline_name = rec->baseline_name,
        .baseline_digest = rec->baseline_digest, .candidate_digest = rec->candidate_digest,
        .candidate_source_name = rec->candidate_source_name, .verify = rec->verify
    };
    if (s_assign_rest (self, txn, task, &p, &a, src, &err) != 0)
        abort ();
    ak_blobcache_mark (w->blobs, &a);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.version = AK_PROTOCOL_VERSION;
    env.seq = self->seq;
    env.body_case = AK__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    Ak__Envelope *got = ak__envelope__unpack (NULL, size, buf);
    if (!got || !ak_cpb_same (&env.base, &got->base)) {
        fprintf (stderr, "akcoord: the ASSIGN of task %s built from its stored bytes differs from "
                 "the one built from its record (assign.h)\n", task->task_id);
        abort ();
    }
    ak__envelope__free_unpacked (got, NULL);
    ak__task_record__free_unpacked (rec, NULL);
}
#endif

/* Sends the ASSIGN of m to w: an envelope holding m->assign packed,
   followed by the definition fields passed on (assign.h).  As s_send. */
static int s_send_assign (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, ak_worker_t *w,
                          s_assign_msg_t *m)
{
    (void) txn;
    (void) task;
    uint64_t seq = ++self->seq;
    size_t alen = ak__assign__get_packed_size (&m->assign);
    size_t body = alen + m->parts.ncopied;
    size_t size = ak_pbw_tag (NULL, 1, AK_PBW_VARINT) + ak_pbw_varint (NULL, AK_PROTOCOL_VERSION)
                + ak_pbw_tag (NULL, 2, AK_PBW_VARINT) + ak_pbw_varint (NULL, seq)
                + ak_pbw_tag (NULL, AK__ENVELOPE__BODY_ASSIGN, AK_PBW_LEN) + ak_pbw_varint (NULL, body) + body;
    int rc = 0;
    if (size > AK_MAX_MSG_SIZE)
        rc = AK_ETOOBIG;
    else {
        uint8_t *buf = s_buf (self, size);
        size_t n = ak_pbw_tag (buf, 1, AK_PBW_VARINT);
        n += ak_pbw_varint (buf + n, AK_PROTOCOL_VERSION);
        n += ak_pbw_tag (buf + n, 2, AK_PBW_VARINT);
        n += ak_pbw_varint (buf + n, seq);
        n += ak_pbw_tag (buf + n, AK__ENVELOPE__BODY_ASSIGN, AK_PBW_LEN);
        n += ak_pbw_varint (buf + n, body);
        if (ak__assign__pack (&m->assign, buf + n) != alen)
            rc = AK_EINTERNAL;
        n += alen;
        if (m->parts.ncopied)
            memcpy (buf + n, m->parts.copied, m->parts.ncopied);
#ifndef NDEBUG
        if (rc == 0)
            s_assign_check (self, txn, task, w, buf, size);
#endif
        if (rc == 0)
            rc = s_send_frame (self, AK_EP_WORKERS, w->route, w->route_len, buf, size);
        s_buf_done (self, buf);
    }
    if (rc) {
        char hex[64];
        self->counters.send_failures++;
        ak_debug ("workers endpoint: assign to peer %s not sent: %s",
                  s_hex (w->route, w->route_len, hex, sizeof hex), ak_strerror (rc));
    }
    return rc;
}

/* Re-queues task (attempt + 1, or poisoned), taking it from its holder. */
static void s_requeue (ak_coord_t *self, ak_task_t *task, const char *reason, uint64_t now)
{
    if (task->worker_id) {
        ak_worker_t *w = ak_registry_get (self->registry, task->worker_id);
        if (w)
            ak_worker_drop (w, task->task_id);
    }
    ak_sched_requeue (self->sched, task, reason, now);
    self->counters.requeued++;
    self->dispatch_due = true;
}

/* Sends one popped task to w.  0 to go on dispatching to w, else stop. */
static int s_assign (ak_coord_t *self, ak_txn_t *txn, ak_worker_t *w, ak_task_t *task, uint64_t now)
{
    ak_err_t err = { 0 };
    s_assign_msg_t m;
    s_blobs_trim (self);
    int rc = s_build_assign (self, txn, task, &m, &err);
    if (rc == AK_ENOTFOUND || rc == AK_ESTORE) {
        /* a missing or undecodable record will not heal: burn an attempt */
        s_assign_msg_clear (&m);
        ak_error ("%s", err.msg);
        ak_sched_requeue (self->sched, task, err.msg, now);
        return 0;
    }
    if (rc) {
        s_assign_msg_clear (&m);
        ak_error ("%s", err.msg);
        ak_sched_unpop (self->sched, task);
        return rc;
    }
    ak_blobcache_mark (w->blobs, &m.assign);        /* texts the worker holds go as digests */
    rc = s_send_assign (self, txn, task, w, &m);
    if (rc == 0)
        ak_blobcache_sent (w->blobs, &m.assign);
    if (rc)
        s_assign_msg_clear (&m);
    if (rc == AK_ETOOBIG) {
        ak_sched_requeue (self->sched, task, "its assignment exceeds the 16 MiB message limit", now);
        return 0;
    }
    if (rc) {
        ak_sched_unpop (self->sched, task);
        return rc;
    }
    w->last_sent = now;
    ak_sched_assign (self->sched, task, w->worker_id, now);
    ak_sched_cache (self->sched, task, &m.rec, &m.def);     /* the commits rewrite it from memory */
    s_assign_msg_clear (&m);                                /* what the cache did not take */
    ak_worker_hold (w, task->task_id, task->attempt);
    self->counters.assigns++;
    return 0;
}

/* True when a live worker other than task->avoid_worker serves the
   task's class (ak_sched_pop_for: confirm tasks measure elsewhere). */
static bool s_other_live (void *arg, const ak_task_t *task)
{
    ak_coord_t *self = arg;
    return ak_registry_other_live (self->registry, task->device_class, task->avoid_worker);
}

/* Fills w's credit from the queues of its device classes, round-robin. */
static void s_dispatch_worker (ak_coord_t *self, ak_worker_t *w, uint64_t now)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    if (!w->alive || !w->nclasses)
        return;
    while (ak_worker_credit (w) > 0) {
        ak_task_t *task = ak_sched_pop_pinned (self->sched, w->worker_id);
        for (size_t k = 0; k < w->nclasses && !task; k++) {
            size_t c = (w->next_class + k) % w->nclasses;
            task = ak_sched_pop_for (self->sched, w->classes[c], w->worker_id, s_other_live, self);
            if (task)
                w->next_class = (c + 1) % w->nclasses;
        }
        if (!task)
            break;
        if (!txn && ak_store_begin (self->store, false, &txn, &err)) {
            ak_error ("dispatch: %s", err.msg);
            ak_sched_unpop (self->sched, task);
            break;
        }
        if (s_assign (self, txn, w, task, now))
            break;
    }
    ak_store_abort (&txn);
}

static void s_dispatch_all (ak_coord_t *self, uint64_t now)
{
    for (ak_worker_t *w = ak_registry_first (self->registry); w && ak_sched_has_work (self->sched);
         w = ak_registry_next (self->registry))
        if (w->alive && ak_worker_credit (w) > 0)
            s_dispatch_worker (self, w, now);
}

// ========================================================== worker protocol

/* Tasks pinned to w (verify) never run elsewhere: they fail, "worker gone". */
static void s_fail_pinned (ak_coord_t *self, ak_worker_t *w, const char *why, uint64_t now)
{
    char reason[256];
    snprintf (reason, sizeof reason, "worker gone (%s: %s)", w->worker_id, why);
    zlistx_t *ids = zhashx_keys (w->outstanding);
    if (!ids)
        abort ();
    for (const char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        ak_task_t *task = ak_sched_task (self->sched, id);
        if (task && task->pin_worker && strcmp (task->pin_worker, w->worker_id) == 0)
            ak_worker_drop (w, id);
    }
    zlistx_destroy (&ids);
    if (ak_sched_fail_pinned (self->sched, w->worker_id, reason, now))
        self->dispatch_due = true;
}

/* Queued tasks pinned to a worker that is not alive once the registration
   grace after a start has passed fail too: nobody else may run them. */
static void s_reap_pinned (ak_coord_t *self, uint64_t now)
{
    uint64_t grace = (uint64_t) self->opts.heartbeat_ms * self->opts.liveness;
    if (now < self->start + grace)
        return;
    const char **ids = NULL;
    size_t n = ak_sched_pinned_workers (self->sched, &ids);
    char **gone = ak_calloc (n + 1, sizeof *gone);
    size_t ngone = 0;
    for (size_t i = 0; i < n; i++) {
        ak_worker_t *w = ak_registry_get (self->registry, ids[i]);
        if (!w || !w->alive)
            gone[ngone++] = ak_strdup (ids[i]);
    }
    free (ids);
    for (size_t i = 0; i < ngone; i++) {
        char reason[256];
        snprintf (reason, sizeof reason, "worker gone (%s is not registered)", gone[i]);
        ak_sched_fail_pinned (self->sched, gone[i], reason, now);
        free (gone[i]);
    }
    free (gone);
}

/* Every task held by a dead worker goes back to its queue. */
static void s_worker_dead (ak_coord_t *self, ak_worker_t *w, const char *why, uint64_t now)
{
    char reason[256];
    snprintf (reason, sizeof reason, "worker %s died: %s", w->worker_id, why);
    ak_registry_kill (self->registry, w, why, now);
    self->counters.workers_died++;
    s_fail_pinned (self, w, why, now);
    zlistx_t *ids = zhashx_keys (w->outstanding);
    if (!ids)
        abort ();
    for (const char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        ak_task_t *task = ak_sched_task (self->sched, id);
        /* a receipt waiting for its commit decides its task there: if the
           commit fails, s_commit re-queues it (the worker is gone) */
        if (task && task->state == AK_TS_LEASED && task->worker_id
            && strcmp (task->worker_id, w->worker_id) == 0 && !ak_intake_pending (self->intake, id, w->worker_id))
            s_requeue (self, task, reason, now);
    }
    zlistx_destroy (&ids);
    zhashx_purge (w->outstanding);
}

/*  Reconciles what w held with what its HELLO lists (h->running): a task
    leased to w and not listed goes back to its queue at once (the worker
    lost it), unless its receipt waits for a commit; a listed task leased
    to w stays (a started one keeps its deadline); anything else listed is
    not w's to take: refused and counted.  Returns how many stayed. */
static size_t s_reconcile (ak_coord_t *self, ak_worker_t *w, const void *route, size_t len, uint64_t now)
{
    const Ak__Hello *h = w->hello;
    zhashx_t *listed = zhashx_new ();
    zlistx_t *ids = zhashx_keys (w->outstanding);
    if (!listed || !ids)
        abort ();
    for (size_t i = 0; i < h->n_running; i++)
        zhashx_update (listed, h->running[i]->task_id, (void *) h->running[i]);
    for (const char *id = zlistx_first (ids); id; id = zlistx_next (ids)) {
        const Ak__TaskRef *ref = zhashx_lookup (listed, id);
        ak_task_t *task = ak_sched_task (self->sched, id);
        if (ref && task && ak_admit_claim (task, ref->attempt, w))
            continue;
        if (task && ak_intake_pending (self->intake, id, w->worker_id))
            continue;               /* decided by its commit (s_commit) */
        ak_worker_drop (w, id);
        if (task && task->state == AK_TS_LEASED && task->worker_id && strcmp (task->worker_id, w->worker_id) == 0) {
            char reason[200];
            snprintf (reason, sizeof reason, "worker %.128s registered again without it", w->worker_id);
            s_requeue (self, task, reason, now);
        }
    }
    zlistx_destroy (&ids);
    zhashx_destroy (&listed);

    size_t kept = 0;
    for (size_t i = 0; i < h->n_running; i++) {
        const Ak__TaskRef *ref = h->running[i];
        ak_task_t *task = ak_sched_task (self->sched, ref->task_id);
        if (task && ak_admit_claim (task, ref->attempt, w)) {
            ak_worker_hold (w, task->task_id, task->attempt);
            ak_sched_reclaim (self->sched, task, now);
            kept++;
            continue;
        }
        /* a finished task whose receipt it sends again is no claim */
        if (task && ak_tstate_terminal (task->state) && ref->attempt == task->attempt && task->attempt_holder
            && strcmp (task->attempt_holder, w->worker_id) == 0)
            continue;
        char why[400];
        snprintf (why, sizeof why, "worker %.128s lists task %.128s attempt %u as its own: %s", w->worker_id,
                  ref->task_id, ref->attempt, !task ? "no such task"
                  : task->state != AK_TS_LEASED ? "it is not leased"
                  : ref->attempt != task->attempt ? "another attempt is current"
                  : "it is leased to another worker");
        s_refuse (self, &self->counters.claims_refused, route, len, why);
    }
    return kept;
}

static void s_on_hello (ak_coord_t *self, const void *route, size_t len, Ak__Envelope *env, uint64_t now)
{
    char why[512], reason[600];
    if (!ak_admit_hello_valid (env->hello, why, sizeof why)) {
        snprintf (reason, sizeof reason, "invalid HELLO: %s", why);
        s_reject (self, AK_EP_WORKERS, route, len, reason);
        s_send_disconnect_code (self, route, len, AK__DISCONNECT_CODE__DISCONNECT_INVALID_HELLO, reason);
        return;
    }
    bool retry = true;
    if (!ak_admit_hello (self->admit, self->registry, self->ring, env->hello, self->peer, now, &retry, why,
                         sizeof why)) {
        /* a refusal the same HELLO would meet again tells the worker to stop
           (DISCONNECT_ID_TAKEN); a rate limit or a full registry asks it to
           come back later */
        s_refuse (self, &self->counters.hellos_refused, route, len, why);
        s_send_disconnect_code (self, route, len,
                                retry ? AK__DISCONNECT_CODE__DISCONNECT_REREGISTER
                                      : AK__DISCONNECT_CODE__DISCONNECT_ID_TAKEN, why);
        return;
    }
    Ak__Hello *hello = env->hello;
    env->hello = NULL;
    env->body_case = AK__ENVELOPE__BODY__NOT_SET;
    bool was_alive = false;
    ak_worker_t *w = ak_registry_hello (self->registry, route, len, &hello, now, &was_alive);
    ak_registry_set_key (self->registry, w, self->peer ? self->peer->key : NULL, now);
    const Ak__Hello *h = w->hello;
    size_t claimed = s_reconcile (self, w, route, len, now);
    char classes[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < w->nclasses && used < sizeof classes; i++) {
        int n = snprintf (classes + used, sizeof classes - used, "%s%s", i ? "," : "", w->classes[i]);
        if (n < 0)
            break;
        used += (size_t) n;
    }
    ak_info ("worker %s %s (host %.64s, pid %u, classes %s, slots %u, prefetch %u, running %zu, kept %zu%s)",
             w->worker_id, w->registrations > 1 ? "re-registered" : "registered", h->host, h->pid,
             classes, h->slots, h->prefetch, h->n_running, claimed, was_alive ? ", was alive" : "");
    s_send_heartbeat (self, w, now);        /* the welcome */
    s_dispatch_worker (self, w, now);
}

static void s_on_started (ak_coord_t *self, ak_worker_t *w, const Ak__TaskStarted *st, uint64_t now)
{
    char why[400];
    ak_task_t *task = ak_sched_task (self->sched, st->task_id);
    if (!task) {
        snprintf (why, sizeof why, "STARTED from %s for unknown task '%.64s'", w->worker_id, st->task_id);
        s_reject (self, AK_EP_WORKERS, w->route, w->route_len, why);
        return;
    }
    if (task->state != AK_TS_LEASED || st->attempt != task->attempt) {
        ak_debug ("STARTED from %s for task %s attempt %u ignored (task %s at attempt %u)",
                  w->worker_id, task->task_id, st->attempt, ak_tstate_name (task->state), task->attempt);
        return;
    }
    if (!ak_admit_claim (task, st->attempt, w)) {
        snprintf (why, sizeof why, "STARTED from %s for task %s ignored: %s", w->worker_id, task->task_id,
                  task->worker_id ? "leased to another worker" : "leased to nobody");
        s_refuse (self, &self->counters.claims_refused, w->route, w->route_len, why);
        return;
    }
    ak_sched_start (self->sched, task, now);
}

/* Tells w that its receipt (task_id, attempt) was refused, not stored,
   and why: an ACK with `refused` set, so that it drops the receipt. */
static void s_send_refused (ak_coord_t *self, ak_worker_t *w, const char *task_id, uint32_t attempt,
                            const char *why)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Ack ack = AK__ACK__INIT;
    ack.task_id = (char *) task_id;
    ack.attempt = attempt;
    ack.refused = (char *) why;
    env.body_case = AK__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    if (s_send (self, AK_EP_WORKERS, w->route, w->route_len, &env) == 0)
        w->last_sent = ak_clock_mono_ms ();
}

static void s_on_receipt (ak_coord_t *self, ak_worker_t *w, Ak__Envelope *env, uint64_t now)
{
    ak_err_t err = { 0 };
    Ak__Receipt *r = env->receipt;
    env->receipt = NULL;
    env->body_case = AK__ENVELOPE__BODY__NOT_SET;
    /* only the holder of the task's current attempt delivers its receipt
       (unknown tasks and impossible attempts are the intake's to reject);
       its slot stays taken until the commit holding the receipt (s_commit) */
    ak_task_t *task = ak_sched_task (self->sched, r->task_id);
    char why[512];
    if (task && r->attempt >= 1 && r->attempt <= task->attempt
        && !ak_admit_receipt (task, r->attempt, w, self->peer, why, sizeof why)) {
        s_refuse (self, &self->counters.receipts_refused, w->route, w->route_len, why);
        s_send_refused (self, w, r->task_id, r->attempt, why);
        ak__receipt__free_unpacked (r, NULL);
        return;
    }
    /* the receipt's bytes as they came, stored as they are (intake.h) */
    const uint8_t *raw = NULL;
    size_t rawlen = 0;
    if (!self->frame
        || ak_envelope_field_bytes (self->frame, self->frame_len, AK__ENVELOPE__BODY_RECEIPT, &raw, &rawlen))
        raw = NULL;
    int rc;
    if (!raw && self->frame_slim) {
        /* cannot happen (a slim receipt's frame holds it once): a slim
           receipt without its bytes would be stored cut short */
        ak__receipt__free_unpacked (r, NULL);
        rc = ak_err_set (&err, AK_EINTERNAL, "receipt from %s: its bytes were not found in its frame",
                         w->worker_id);
    }
    else
        rc = ak_intake_stage_raw (self->intake, w->worker_id, &r, raw, rawlen, now, &err);
    if (rc)
        s_reject (self, AK_EP_WORKERS, w->route, w->route_len, err.msg);
    if (ak_intake_full (self->intake))
        s_commit (self, &err);
    s_dispatch_worker (self, w, now);
}

static void s_on_worker (ak_coord_t *self, const void *route, size_t len, Ak__Envelope *env, uint64_t now)
{
    char why[160];
    Ak__Envelope__BodyCase body = env->body_case;
    bool worker_body = body == AK__ENVELOPE__BODY_HELLO || body == AK__ENVELOPE__BODY_HEARTBEAT
                    || body == AK__ENVELOPE__BODY_STARTED || body == AK__ENVELOPE__BODY_RECEIPT
                    || body == AK__ENVELOPE__BODY_DISCONNECT;
    if (!worker_body) {
        snprintf (why, sizeof why, "a %s is not a worker message", ak_envelope_kind (env));
        s_reject (self, AK_EP_WORKERS, route, len, why);
        return;
    }
    self->counters.messages[AK_EP_WORKERS]++;
    if (body == AK__ENVELOPE__BODY_HELLO) {
        s_on_hello (self, route, len, env, now);
        return;
    }
    ak_worker_t *w = ak_registry_by_route (self->registry, route, len);
    if (!w) {
        if (body != AK__ENVELOPE__BODY_DISCONNECT) {
            char hex[64];
            ak_debug ("%s from unregistered peer %s: DISCONNECT", ak_envelope_kind (env),
                      s_hex (route, len, hex, sizeof hex));
            s_send_disconnect (self, route, len, "not registered: say HELLO");
        }
        return;
    }
    ak_registry_touch (self->registry, w, now);
    switch (body) {
        case AK__ENVELOPE__BODY_STARTED:
            s_on_started (self, w, env->started, now);
            break;
        case AK__ENVELOPE__BODY_RECEIPT:
            s_on_receipt (self, w, env, now);
            break;
        case AK__ENVELOPE__BODY_DISCONNECT:
            snprintf (why, sizeof why, "said DISCONNECT (%.100s)", env->disconnect->reason);
            s_worker_dead (self, w, why, now);
            break;
        default:                    /* HEARTBEAT: the touch was all */
            break;
    }
}

// ================================================================== clients

static void s_on_client (ak_coord_t *self, const s_request_t *req, uint64_t now)
{
    char why[160];
    const void *route = req->route;
    size_t len = req->route_len;
    Ak__Envelope *env = req->env;
    if (env->body_case != AK__ENVELOPE__BODY_REQUEST) {
        snprintf (why, sizeof why, "a %s is not a client request", ak_envelope_kind (env));
        s_reject (self, AK_EP_CLIENTS, route, len, why);
        s_reply (self, route, len, AK_EPROTO, why, NULL);
        return;
    }
    self->counters.messages[AK_EP_CLIENTS]++;
    self->client.shutdown = false;
    self->client.work_added = false;
    ak_err_t err = { 0 };
    if (ak_access_check (req->role, req->name, env->request->verb, &err)) {
        self->counters.verbs_refused++;
        ak_info ("client: %s", err.msg);
        s_reply (self, route, len, err.code, err.msg, NULL);
        return;
    }
    char *json = NULL;
    int rc = ak_client_handle (&self->client, env->request, now, &json, &err);
    if (rc)
        ak_debug ("client %s: %s", env->request->verb, err.msg);
    s_reply (self, route, len, rc, rc ? err.msg : "", json);
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

/* The key a peer's routing id is tracked under: "w:HEX" or "c:HEX". */
static void s_peer_key (ak_ep_t ep, const void *route, size_t len, char *buf, size_t size)
{
    buf[0] = ep == AK_EP_WORKERS ? 'w' : 'c';
    buf[1] = ':';
    s_hex (route, len, buf + 2, size - 2);
}

/* Warns about a refused handshake or message, at most once a second. */
static void s_auth_warn (ak_coord_t *self, const char *fmt, const char *a, const char *b)
{
    uint64_t now = ak_clock_mono_ms ();
    if (self->auth_warn_at && now < self->auth_warn_at + S_WARN_EVERY_MS) {
        self->auth_suppressed++;
        return;
    }
    char msg[512];
    snprintf (msg, sizeof msg, fmt, a, b);
    if (self->auth_suppressed)
        ak_warn ("%s (%llu more refused since the last warning)", msg,
                 (unsigned long long) self->auth_suppressed);
    else
        ak_warn ("%s", msg);
    self->auth_warn_at = now;
    self->auth_suppressed = 0;
}

/* Drops worker w for good reason why: DISCONNECT with code, its tasks go back. */
static void s_drop_worker (ak_coord_t *self, ak_worker_t *w, Ak__DisconnectCode code, const char *why)
{
    if (!w || !w->alive)
        return;
    s_send_disconnect_code (self, w->route, w->route_len, code, why);
    s_worker_dead (self, w, why, ak_clock_mono_ms ());
}

/*  Counts one malformed frame from a peer; at opts.malformed_max the peer
    is dropped: a registered worker is declared dead and every later frame
    of that routing id is ignored (counted as rejected).  ZeroMQ cannot
    close one connection of a ROUTER; a peer that reconnects gets a new
    routing id and starts from zero. */
static void s_malformed (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len)
{
    char key[2 + 2 * AK_ROUTE_MAX + 1];
    s_peer_key (ep, route, len, key, sizeof key);
    uintptr_t n = (uintptr_t) zhashx_lookup (self->malformed, key) + 1;
    if (n < self->opts.malformed_max) {
        if (zhashx_size (self->malformed) >= S_PEERS_MAX)
            zhashx_purge (self->malformed);
        zhashx_update (self->malformed, key, (void *) n);
        return;
    }
    zhashx_delete (self->malformed, key);
    if (zhashx_size (self->dropped) >= S_PEERS_MAX)
        zhashx_purge (self->dropped);
    zhashx_update (self->dropped, key, (void *) 1);
    self->counters.peers_dropped++;
    char num[32];
    snprintf (num, sizeof num, "%u", self->opts.malformed_max);
    ak_warn ("%s endpoint: peer %s dropped after %s malformed frames", s_ep_names[ep], key + 2, num);
    if (ep == AK_EP_WORKERS)
        s_drop_worker (self, ak_registry_by_route (self->registry, route, len),
                       AK__DISCONNECT_CODE__DISCONNECT_REREGISTER, "dropped: too many malformed frames");
}

static bool s_peer_dropped (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len)
{
    if (zhashx_size (self->dropped) == 0)
        return false;
    char key[2 + 2 * AK_ROUTE_MAX + 1];
    s_peer_key (ep, route, len, key, sizeof key);
    return zhashx_lookup (self->dropped, key) != NULL;
}

/*  With CURVE: the key of the connection body came on (the ZAP handler
    made it the User-Id) must still be in the ring with a role for ep.  A
    key revoked since the handshake gets nothing; its worker is dropped. */
static bool s_authorised (ak_coord_t *self, ak_ep_t ep, zmq_msg_t *body, const void *route, size_t len)
{
    self->peer = NULL;
    if (!self->ring)
        return true;
    const char *uid = zmq_msg_gets (body, "User-Id");
    const ak_key_t *k = uid ? ak_keyring_find (self->ring, uid) : NULL;
    if (k && (ep == AK_EP_WORKERS) == (k->role == AK_ROLE_WORKER)) {
        self->peer = k;
        return true;
    }
    self->counters.unauthorised++;
    s_auth_warn (self, "%s endpoint: ignored a message: key %s is no longer accepted", s_ep_names[ep],
                 uid ? uid : "(none)");
    if (ep == AK_EP_WORKERS)
        s_drop_worker (self, ak_registry_by_route (self->registry, route, len),
                       AK__DISCONNECT_CODE__DISCONNECT_KEY_REVOKED, "your key was revoked");
    return false;
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
        snprintf (why, sizeof why, "busy: %zu client requests are waiting; try again later",
                  zlistx_size (self->queue));
        s_reply (self, route, len, AK_EUNAVAIL, why, NULL);
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

/* Answers up to S_DRAIN_MAX waiting client requests, oldest first. */
static void s_serve_clients (ak_coord_t *self, uint64_t now)
{
    for (int i = 0; i < S_DRAIN_MAX && !self->stop && zlistx_size (self->queue); i++) {
        s_request_t *r = zlistx_detach (self->queue, NULL);
        s_on_client (self, r, now);
        s_request_free ((void **) &r);
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
                    ak_error ("%s endpoint: zmq_msg_recv: %s", s_ep_names[ep], zmq_strerror (e));
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
        s_reject (self, ep, rid, 0, "routing id out of range");
    }
    else if (s_peer_dropped (self, ep, rid, rlen)) {
        self->counters.rejected[ep]++;          /* no answer, no log: it was told */
    }
    else if (!s_authorised (self, ep, &body, rid, rlen)) {
        /* counted and logged: no application data for a key not accepted */
    }
    else if (frames != 2) {
        char why[96];
        snprintf (why, sizeof why, "%d frames (one envelope frame expected)", frames - 1);
        s_reject (self, ep, rid, rlen, why);
        if (ep == AK_EP_CLIENTS)
            s_reply (self, rid, rlen, AK_EPROTO, why, NULL);
        s_malformed (self, ep, rid, rlen);
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
            s_reject (self, ep, rid, rlen, err.msg);
            if (ep == AK_EP_CLIENTS)
                s_reply (self, rid, rlen, rc, err.msg, NULL);
            s_malformed (self, ep, rid, rlen);
        }
        else if (ep == AK_EP_WORKERS) {
            /* its bytes may be stored as they came only when they hold
               nothing this build does not know (envelope.c) */
            self->frame = unknown ? NULL : zmq_msg_data (&body);
            self->frame_len = unknown ? 0 : zmq_msg_size (&body);
            self->frame_slim = slim;
            s_on_worker (self, rid, rlen, env, now);
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
    for (int i = 0; i < S_DRAIN_MAX; i++) {
        zmq_msg_t frame;
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, handle, ZMQ_DONTWAIT) < 0) {
            s_msg_close (&frame);
            return;
        }
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

// ============================================================ commit, tick

static int s_commit (ak_coord_t *self, ak_err_t *err)
{
    ak_commit_t c;
    uint64_t now = ak_clock_mono_ms ();
    int rc = ak_intake_commit (self->intake, now, &c, err);
    ak_log_flush ();                /* a task's "done" line before its ACK */
    for (size_t i = 0; i < c.nacks; i++) {
        const ak_ack_t *a = &c.acks[i];
        ak_worker_t *w = ak_registry_get (self->registry, a->worker_id);
        /* the receipt holds: its slot is free again */
        if (w && ak_worker_drop (w, a->task_id))
            self->dispatch_due = true;
        if (!w || !w->alive)
            continue;           /* it re-sends after registering again */
        Ak__Envelope env = AK__ENVELOPE__INIT;
        Ak__Ack ack = AK__ACK__INIT;
        ack.task_id = a->task_id;
        ack.attempt = a->attempt;
        ack.receipt_id = (char *) a->receipt_id;
        ack.duplicate = a->duplicate;
        env.body_case = AK__ENVELOPE__BODY_ACK;
        env.ack = &ack;
        if (s_send (self, AK_EP_WORKERS, w->route, w->route_len, &env) == 0) {
            self->counters.acks++;
            w->last_sent = now;
        }
    }
    /* A receipt not stored leaves its task with its worker: held (the
       slot stays taken) and bounded by the worker's liveness, which must
       register again and re-send; a task whose worker is gone meanwhile
       goes back to its queue now.  Nothing is left without a deadline. */
    for (size_t i = 0; i < c.nlost; i++) {
        const ak_ack_t *l = &c.lost[i];
        ak_worker_t *w = ak_registry_get (self->registry, l->worker_id);
        ak_task_t *task = ak_sched_task (self->sched, l->task_id);
        if (!task || task->state != AK_TS_LEASED || task->attempt != l->attempt || !task->worker_id
            || strcmp (task->worker_id, l->worker_id) != 0)
            continue;
        if (w && w->alive)
            ak_worker_hold (w, task->task_id, task->attempt);
        else
            s_requeue (self, task, "its receipt was not stored (commit failed) and its worker is gone", now);
    }
    for (size_t i = 0; i < c.ndropped; i++) {
        ak_worker_t *w = ak_registry_get (self->registry, c.dropped[i]);
        if (w && w->alive)
            s_send_disconnect (self, w->route, w->route_len,
                               "the coordinator could not store your receipts: register again and re-send");
    }
    ak_commit_clear (&c);
    return rc;
}

static int s_commit_cb (void *arg, ak_err_t *err)
{
    return s_commit (arg, err);
}

/* Next search stage / confirm tasks of a settling batch, in a write
   transaction of their own; *added says how many. */
static int s_settle_rounds (ak_coord_t *self, ak_batch_t *b, size_t *added, ak_err_t *err)
{
    ak_rounds_new_t created = { 0 };
    ak_txn_t *txn = NULL;
    *added = 0;
    int rc = ak_store_begin (self->store, true, &txn, err);
    if (rc == 0)
        rc = ak_rounds_advance_batch (txn, self->sched, b, ak_clock_wall_ms (), &created, err);
    if (rc == 0 && created.n)
        rc = ak_store_commit (&txn, err);
    ak_store_abort (&txn);
    if (rc == 0) {
        ak_sched_extend (self->sched, created.tasks, created.n);
        ak_rounds_committed (&created);
        *added = created.n;
    }
    ak_rounds_new_clear (&created);
    return rc;
}

/* A verify batch (verify.h) is judged instead of promoted: the verdicts
   and the profile's status in one write transaction (the map grows when
   full).  *is_verify false for any other batch, nothing written. */
static int s_settle_verify (ak_coord_t *self, ak_batch_t *b, bool *is_verify, ak_err_t *err)
{
    for (;;) {
        ak_txn_t *txn = NULL;
        int rc = ak_store_begin (self->store, true, &txn, err);
        if (rc == 0)
            rc = ak_verify_settle (txn, b->batch_id, ak_clock_wall_ms (), is_verify, err);
        if (rc == 0 && *is_verify)
            rc = ak_store_commit (&txn, err);
        ak_store_abort (&txn);
        if (rc != AK_ESTOREFULL)
            return rc;
        rc = ak_intake_grow (self->intake, err);
        if (rc)
            return rc;
    }
}

/* The winners of b: from the final checks when they decided every pair
   (ak_rounds_winners: no record read), else from the records
   (ak_results_decide).  Debug builds decide from the records as well and
   compare. */
static int s_decide_winners (ak_coord_t *self, ak_batch_t *b, Ak__Winner ***winners_p, size_t *n_p,
                             ak_err_t *err)
{
    bool memo = ak_rounds_winners (b, winners_p, n_p);
#ifdef NDEBUG
    if (memo)
        return 0;
#endif
    ak_txn_t *txn = NULL;
    ak_results_t *res = NULL;
    int rc = ak_store_begin (self->store, false, &txn, err);
    if (rc == 0)
        rc = ak_results_decide (txn, b->batch_id, &res, err);
    ak_store_abort (&txn);
    if (rc == 0 && memo) {
        if (!ak_results_same_winners (res, *winners_p, *n_p)) {
            ak_error ("debug: batch %s: the winners of the final checks differ from the records' decision",
                      b->batch_id);
            abort ();
        }
    }
    else if (rc == 0) {
        *winners_p = ak_calloc (res->npairs ? res->npairs : 1, sizeof **winners_p);
        for (size_t i = 0; i < res->npairs; i++) {
            (*winners_p)[i] = res->pairs[i].winner;
            res->pairs[i].winner = NULL;
        }
        *n_p = res->npairs;
    }
    ak_results_destroy (&res);
    return memo ? 0 : rc;
}

/* Decides the winners of batches whose tasks are all terminal. */
static void s_settle (ak_coord_t *self, uint64_t now)
{
    ak_batch_t *b;
    ak_err_t err = { 0 };
    while ((b = ak_sched_settling (self->sched))) {
        /* the records must say what the index says before they are read */
        if (s_commit (self, &err))
            return;
        /* a search stage or confirmation round that ended without a
           receipt (poisoned, cancelled tasks) is created now (rounds.h) */
        size_t added = 0;
        if (s_settle_rounds (self, b, &added, &err)) {
            ak_error ("batch %s: cannot create its next search round yet: %s", b->batch_id, err.msg);
            return;
        }
        if (added)
            continue;
        bool is_verify = false;
        if (s_settle_verify (self, b, &is_verify, &err)) {
            ak_error ("batch %s: cannot judge its verify tasks yet: %s", b->batch_id, err.msg);
            return;
        }
        if (is_verify) {
            ak_sched_complete (self->sched, b, NULL, 0, now);
            continue;
        }
        Ak__Winner **winners = NULL;
        size_t nwinners = 0;
        if (s_decide_winners (self, b, &winners, &nwinners, &err)) {
            ak_error ("batch %s: cannot decide its winners yet: %s", b->batch_id, err.msg);
            return;
        }
        for (size_t i = 0; i < nwinners; i++) {
            const Ak__Winner *wn = winners[i];
            if (wn->promoted)
                ak_info ("batch %s: %s on %s: winner %s (task %s) %.3fx +- %.3f%s", b->batch_id, wn->op,
                         wn->device_class, wn->candidate_name, wn->task_id, wn->speedup, wn->noise,
                         wn->tied > 1 ? " (tie-break)" : "");
            else
                ak_info ("batch %s: %s on %s: no winner: %s", b->batch_id, wn->op, wn->device_class,
                         wn->reason);
        }
        ak_sched_complete (self->sched, b, winners, nwinners, now);
    }
}

/*  Re-reads the key ring (on SIGHUP, or when a role directory changed) and
    drops every worker whose key is no longer a worker's: its connection
    gets nothing more and a reconnect fails the handshake.  A ring that does
    not load keeps the old one, loudly. */
static void s_keys_reload (ak_coord_t *self, bool forced)
{
    if (!self->ring || (!forced && !ak_keyring_changed (self->ring)))
        return;
    ak_err_t err = { 0 };
    ak_keyring_t *ring = NULL;
    if (ak_keyring_load (self->opts.keys_dir, &ring, &err)) {
        ak_error ("keys: cannot re-read %s (the old keys stay in force): %s", self->opts.keys_dir, err.msg);
        return;
    }
    ak_keyring_destroy (&self->ring);
    self->ring = ring;
    ak_info ("keys: re-read %s: %zu keys", self->opts.keys_dir, ak_keyring_size (ring));
    for (ak_worker_t *w = ak_registry_first (self->registry); w; w = ak_registry_next (self->registry)) {
        const char *key = w->key;
        const ak_key_t *k = key ? ak_keyring_find (ring, key) : NULL;
        if (!w->alive || (k && k->role == AK_ROLE_WORKER))
            continue;
        ak_warn ("keys: worker %s: its key %s was revoked: dropped", w->worker_id, key ? key : "?");
        self->counters.workers_revoked++;
        s_drop_worker (self, w, AK__DISCONNECT_CODE__DISCONNECT_KEY_REVOKED, "your key was revoked");
    }
}

static void s_tick (ak_coord_t *self, uint64_t now)
{
    ak_sdnotify_watchdog (now);         /* systemd's WatchdogSec=: this loop still turns */
    bool forced = self->opts.reload_flag && *self->opts.reload_flag;
    if (forced)
        *self->opts.reload_flag = 0;
    s_keys_reload (self, forced);

    /* Any message is a heartbeat (Paranoid Pirate): a worker hears one
       only after a heartbeat interval in which it was sent nothing else, so
       busy workers get none, and idle ones each on their own schedule
       rather than all in one burst that stalls the loop. */
    for (ak_worker_t *w = ak_registry_first (self->registry); w; w = ak_registry_next (self->registry))
        if (w->alive && w->last_sent + self->opts.heartbeat_ms <= now + self->tick_ms)
            s_send_heartbeat (self, w, now);
    if (now >= self->next_heartbeat) {
        self->next_heartbeat = now + self->opts.heartbeat_ms;
        s_reap_pinned (self, now);
        ak_waiting_log_check (self->client.waiting, self->sched, self->registry);
    }

    ak_worker_t **dead = NULL;
    size_t ndead = ak_registry_reap (self->registry, now, self->opts.heartbeat_ms, self->opts.liveness, &dead);
    for (size_t i = 0; i < ndead; i++) {
        char why[96];
        snprintf (why, sizeof why, "silent for %llu ms",
                  (unsigned long long) (now - dead[i]->last_seen));
        s_send_disconnect (self, dead[i]->route, dead[i]->route_len, "declared dead after silence");
        s_worker_dead (self, dead[i], why, now);
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
        s_requeue (self, expired[i], why, now);
    }
    free (expired);

    s_settle (self, now);
    if (ak_sched_has_work (self->sched))
        self->dispatch_due = true;
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
                           s_ep_names[ep], endpoint);
    self->sock[ep] = zsock_new (ZMQ_ROUTER);
    if (!self->sock[ep])
        return ak_err_set (err, AK_EIO, "%s endpoint: cannot create a ROUTER socket", s_ep_names[ep]);
    void *h = zsock_resolve (self->sock[ep]);
    int64_t max = AK_MAX_MSG_SIZE;
    int rc = s_setopt (h, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY", err);
    if (rc == 0)
        rc = s_setopt (h, ZMQ_LINGER, S_LINGER_MS, "ZMQ_LINGER", err);
    if (rc == 0 && zmq_setsockopt (h, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0)
        rc = ak_err_set (err, AK_EIO, "zmq_setsockopt (ZMQ_MAXMSGSIZE): %s", zmq_strerror (zmq_errno ()));
    if (rc == 0 && !self->opts.plain)
        rc = ak_auth_server_setup (h, self->opts.cert_file, s_ep_names[ep], err);
    if (rc)
        return ak_err_prefix (err, "%s endpoint", s_ep_names[ep]);
    if (zmq_bind (h, endpoint) != 0)
        return ak_err_set (err, AK_EIO, "cannot bind the %s endpoint %s: %s", s_ep_names[ep], endpoint,
                           zmq_strerror (zmq_errno ()));

    char addr[96];
    snprintf (addr, sizeof addr, "inproc://akcoord-monitor-%p-%d", (void *) self, (int) ep);
    if (zmq_socket_monitor (h, addr, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0)
        return ak_err_set (err, AK_EIO, "%s endpoint: zmq_socket_monitor: %s", s_ep_names[ep],
                           zmq_strerror (zmq_errno ()));
    self->mon[ep] = zsock_new (ZMQ_PAIR);
    if (!self->mon[ep] || zmq_connect (zsock_resolve (self->mon[ep]), addr) != 0)
        return ak_err_set (err, AK_EIO, "%s endpoint: cannot connect its monitor", s_ep_names[ep]);
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
    ak_store_opts_t sopts = { .map_size = opts->map_size };
    int rc = ak_store_open (opts->store_dir, &sopts, &self->store, err);
    if (rc)
        goto fail;
    self->blobs = zhashx_new ();
    if (!self->blobs)
        abort ();
    zhashx_set_destructor (self->blobs, s_blob_free);
    self->sched = ak_sched_new ();
    self->registry = ak_registry_new ();
    ak_intake_opts_t iopts = { self->opts.commit_ms, self->opts.commit_max, self->opts.map_max };
    self->intake = ak_intake_new (self->store, self->sched, self->registry, &iopts);
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
                ak_debug ("%s endpoint: stopping its monitor: %s", s_ep_names[ep],
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
        ak_intake_destroy (&self->intake);
        ak_registry_destroy (&self->registry);
        ak_sched_destroy (&self->sched);
        ak_store_destroy (&self->store);
        free (self);
        *self_p = NULL;
    }
}

// ==================================================================== loop

/* Answers the ZAP requests waiting: handshakes of keys not in the ring
   fail before any application data moves. */
static void s_zap_drain (ak_coord_t *self)
{
    ak_zap_result_t res;
    for (int i = 0; i < S_DRAIN_MAX && ak_zap_answer (self->zap, self->ring, &res); i++) {
        if (res.accepted) {
            self->counters.auth_accepted++;
            ak_debug ("%s endpoint: %s key %s (%s) connected from %s", res.endpoint == 0 ? "workers" : "clients",
                      ak_role_name (res.entry->role), res.entry->name, res.key, res.address);
            continue;
        }
        self->counters.auth_refused[res.endpoint == 0 ? AK_EP_WORKERS : AK_EP_CLIENTS]++;
        s_auth_warn (self, "refused a CURVE handshake from %s: %s", res.address, res.why);
    }
}

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
        zmq_pollitem_t items[] = {
            { zsock_resolve (self->sock[AK_EP_WORKERS]), 0, ZMQ_POLLIN, 0 },
            { zsock_resolve (self->sock[AK_EP_CLIENTS]), 0, ZMQ_POLLIN, 0 },
            { zsock_resolve (self->mon[AK_EP_WORKERS]), 0, ZMQ_POLLIN, 0 },
            { zsock_resolve (self->mon[AK_EP_CLIENTS]), 0, ZMQ_POLLIN, 0 },
            { self->zap ? zsock_resolve (self->zap) : NULL, 0, ZMQ_POLLIN, 0 },
        };
        ak_log_flush ();
        if (zmq_poll (items, self->zap ? 5 : 4, timeout) < 0) {
            if (zmq_errno () == EINTR)
                continue;
            ak_error ("zmq_poll: %s; stopping", zmq_strerror (zmq_errno ()));
            break;
        }
        for (int ep = 0; ep < AK_EP_COUNT; ep++) {
            if (items[ep].revents & ZMQ_POLLIN)
                for (int i = 0; i < S_DRAIN_MAX && !self->stop && s_recv_one (self, (ak_ep_t) ep); i++)
                    ;
            if (items[2 + ep].revents & ZMQ_POLLIN)
                s_drain_monitor (self, (ak_ep_t) ep);
        }
        if (self->zap && (items[4].revents & ZMQ_POLLIN))
            s_zap_drain (self);
        s_serve_clients (self, ak_clock_mono_ms ());
        now = ak_clock_mono_ms ();
        if (now >= self->next_tick) {
            s_tick (self, now);
            self->next_tick = now + self->tick_ms;
        }
        due = ak_intake_deadline (self->intake);
        if (due && now >= due) {
            ak_err_t cerr = { 0 };
            s_commit (self, &cerr);
        }
        if (self->dispatch_due) {
            self->dispatch_due = false;
            s_dispatch_all (self, now);
        }
    }
    ak_info ("stopping: committing what is pending");
    int rc = s_commit (self, err);
    if (rc == 0) {
        s_settle (self, ak_clock_mono_ms ());
        rc = s_commit (self, err);
    }
    ak_log_hold (false);
    return rc;
}
