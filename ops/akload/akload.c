/*  ops/akload/akload.c: akload, a LOAD-TEST tool for akcoord.

    One process that simulates many workers.  Each simulated worker is its
    own DEALER socket speaking the real worker protocol (docs/protocol.md):
    HELLO, heartbeats both ways with liveness, STARTED and RECEIPT for every
    ASSIGN, receipts kept until ACKed and re-sent after every registration,
    a new socket with backoff on DISCONNECT or coordinator silence, with
    akworker's link rules (common/linkwatch.h): liveness counted from the
    handshake's success (each socket has a handshake monitor), reconnect
    delays doubling and drawn at random from [delay/2, delay].

    No kernel is ever compiled or run.  Every receipt says status "ok" with
    the reason "akload: load-test receipt, no kernel ran" and zero timings,
    and every simulated device has the backend "loadtest", so that its
    receipts can never be mistaken for measurements.  Point it only at a
    coordinator whose batches exist for load tests.

    One thread, one epoll over every socket's ZMQ_FD, timers from one clock.
    (zmq_poll over 1000 sockets costs a getsockopt per socket and a poll(2)
    over every descriptor on each call, most of this tool's CPU at 10k
    messages/s; with epoll only the sockets that signalled are looked at,
    following the edge-triggered rules of ZMQ_FD in zmq_getsockopt(3): a
    socket is read until EAGAIN after its descriptor fires and after every
    send on it, since a send may consume the signal.)  On
    SIGTERM / SIGINT (or after --duration-s) it says DISCONNECT on every
    socket, prints its statistics, writes them to --stats-json and exits 0. */
#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>
#include "auth.h"
#include "blobcache.h"
#include "clock.h"
#include "endpoint.h"
#include "envelope.h"
#include "error.h"
#include "linkwatch.h"
#include "log.h"
#include "util.h"
#include "version.h"

#define S_REASON          "akload: load-test receipt, no kernel ran"
#define S_BACKEND         "loadtest"
#define S_MAX_ID          128           /* worker_id limit of the protocol */
#define S_MAX_CLASS       64
#define S_MAX_WORKERS     100000
#define S_DRAIN_MAX       64            /* messages per socket per wake-up */
#define S_POLL_MAX_MS     100
#define S_SCAN_MIN_MS     10            /* the heartbeat/liveness scan runs at most this often */
#define S_EVENTS          256           /* epoll events per wait */
#define S_HWM             10000
#define S_LINGER_MS       200
#define S_MAX_RESENDS     20            /* registrations a never-acked receipt is re-sent for */
#define S_PROGRESS_MS     10000
#define S_MON_BIT         0x80000000u   /* epoll data: a handshake monitor, not a socket */

static volatile sig_atomic_t s_stop = 0;

static void s_on_signal (int sig)
{
    (void) sig;
    s_stop = 1;
}

// ================================================================ the model

typedef struct {
    char     *endpoint;
    uint32_t  workers;
    char     *prefix;
    char     *device_class;
    uint32_t  slots;
    uint32_t  prefetch;
    uint32_t  task_ms;
    uint32_t  duration_s;
    uint32_t  warmup_s;
    char     *stats_json;
    char     *cert_file;        /* CURVE: one worker certificate for every simulated worker */
    char     *server_key;
    uint32_t  heartbeat_ms;
    uint32_t  blob_cache_mb;    /* each simulated worker's blob cache, as akworker's */
    uint32_t  liveness;
    uint32_t  backoff_ms;
    uint32_t  max_backoff_ms;
} s_opts_t;

/* A task the worker holds: assigned, its receipt not built yet. */
typedef struct {
    Ak__Receipt *receipt;           /* built from the ASSIGN, times set when it finishes */
    uint64_t     assigned_ns;       /* monotonic: ASSIGN received */
    uint64_t     due_ms;            /* monotonic: receipt due (running) */
    uint64_t     started_wall;
    bool         running;
} s_task_t;

/* A receipt kept until acked. */
typedef struct {
    char     *task_id;
    uint32_t  attempt;
    uint64_t  assigned_ns;
    uint64_t  finished_ns;          /* the receipt was built (and first sent) */
    uint8_t  *data;                 /* the packed RECEIPT envelope */
    size_t    size;
    bool      sent;                 /* handed to the current socket */
    uint32_t  resends;
} s_pending_t;

typedef struct {
    char         id[S_MAX_ID + 1];
    void        *sock;              /* NULL: waiting to reconnect */
    ak_hsmon_t  *mon;               /* handshakes of sock */
    ak_liveness_t live;             /* the coordinator's, from the handshake on (link.h) */
    bool         registered;        /* heard once (anything but a DISCONNECT) */
    uint64_t     last_recv;         /* monotonic ms */
    uint64_t     last_send;
    uint64_t     next_connect;
    uint32_t     backoff_ms;
    s_task_t    *tasks;
    size_t       ntasks, cap_tasks;
    s_pending_t *pending;
    size_t       npending, cap_pending;
    uint64_t     seq;
    bool         ready;             /* in the ready list: read it until EAGAIN */
    /* when each credit the coordinator owes this worker was freed (HELLO
       sent, or a RECEIPT sent: its slot is free), oldest first; an ASSIGN
       uses up the oldest (credit->assign latency) */
    uint64_t    *credit_ns;
    size_t       ncredits, cap_credits;
    ak_blobcache_t *blobs;          /* as akworker keeps them (blobcache.h) */
    uint32_t     blob_epoch;
} s_sim_t;

/* A running task's due time, in the min-heap that wakes the loop for it. */
typedef struct {
    uint64_t  due_ms;
    uint32_t  sim;
} s_due_t;

typedef struct {
    uint64_t assigns, started, receipts, resent, acks, acks_duplicate, acks_unknown, acks_refused;
    uint64_t hellos, reconnects, disconnects, silences, heartbeats_sent, heartbeats_recv;
    uint64_t handshakes, handshake_failures, refusals;
    uint64_t send_failures, rejected, abandoned, stale_assigns, blob_misses;
    uint64_t assign_bytes;          /* ASSIGN envelopes as received (with those refused as stale) */
    uint64_t window_acks;           /* acks after the warm-up */
} s_counters_t;

typedef struct {
    s_opts_t       opts;
    void          *ctx;
    s_sim_t       *sims;
    char           host[256];
    uint32_t       pid;
    s_counters_t   c;
    uint32_t      *lat_us;          /* dispatch -> ack latencies after the warm-up */
    uint32_t      *commit_us;       /* receipt -> ack (the coordinator's commit) */
    size_t         nlat, cap_lat;
    uint32_t      *credit_us;       /* credit freed -> ASSIGN received, after the warm-up */
    size_t         ncredit, cap_credit;
    uint64_t       start_ns, window_ns, end_ns;
    uint64_t       first_ack_ns, last_ack_ns;   /* in the window */
    uint32_t       nregistered;     /* simulated workers heard at least once */
    uint64_t       all_registered_ns;           /* when the last of them was */
    int            epoll;
    uint32_t      *ready;           /* sims to read, in the order they became ready */
    size_t         nready;
    uint32_t      *batch;           /* the ready list being worked through */
    uint64_t       next_wake;       /* monotonic ms of the next heartbeat/liveness scan */
    s_due_t       *due;             /* min-heap of running tasks' due times */
    size_t         ndue, cap_due;
} s_load_t;

static void s_pending_free (s_pending_t *p);
static uint32_t s_us (uint64_t ns);

// ================================================================= sending

static void s_mark_ready (s_load_t *self, s_sim_t *sim)
{
    if (!sim->ready && sim->sock) {
        sim->ready = true;
        self->ready[self->nready++] = (uint32_t) (sim - self->sims);
    }
}

/* After an operation other than a read to EAGAIN: ZMQ_EVENTS says whether
   a message waits (its signal may have been consumed), and asking re-arms
   the descriptor for the next one. */
static void s_check_ready (s_load_t *self, s_sim_t *sim)
{
    int events = 0;
    size_t len = sizeof events;
    if (sim->ready || !sim->sock)
        return;
    if (zmq_getsockopt (sim->sock, ZMQ_EVENTS, &events, &len) != 0) {
        ak_error ("%s: zmq_getsockopt (ZMQ_EVENTS): %s", sim->id, zmq_strerror (zmq_errno ()));
        s_mark_ready (self, sim);
    }
    else if (events & ZMQ_POLLIN)
        s_mark_ready (self, sim);
}

/* Sends a packed envelope without blocking.  0 or AK_EUNAVAIL / AK_EIO. */
static int s_send_raw (s_load_t *self, s_sim_t *sim, const void *data, size_t size)
{
    if (!sim->sock)
        return AK_EUNAVAIL;
    if (zmq_send (sim->sock, data, size, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno ();
        self->c.send_failures++;
        ak_debug ("%s: send: %s", sim->id, zmq_strerror (e));
        return e == EAGAIN ? AK_EUNAVAIL : AK_EIO;
    }
    sim->last_send = ak_clock_mono_ms ();
    s_check_ready (self, sim);      /* the send may have consumed the read signal */
    return 0;
}

static int s_send (s_load_t *self, s_sim_t *sim, Ak__Envelope *env)
{
    uint8_t *data = NULL;
    size_t size = 0;
    env->seq = ++sim->seq;
    int rc = ak_envelope_pack (env, &data, &size);
    if (rc) {
        self->c.send_failures++;
        ak_error ("%s: cannot pack a %s: %s", sim->id, ak_envelope_kind (env), ak_strerror (rc));
        return rc;
    }
    rc = s_send_raw (self, sim, data, size);
    free (data);
    return rc;
}

/* HELLO listing every task held without a receipt (they count against the
   worker's credit and are claimed again), then every unacked receipt. */
/* A credit of sim is free as of now_ns: the coordinator may assign. */
static void s_credit_push (s_sim_t *sim, uint64_t now_ns)
{
    if (sim->ncredits == sim->cap_credits) {
        sim->cap_credits = sim->cap_credits ? sim->cap_credits * 2 : 4;
        sim->credit_ns = ak_realloc (sim->credit_ns, sim->cap_credits * sizeof *sim->credit_ns);
    }
    sim->credit_ns[sim->ncredits++] = now_ns;
}

static void s_send_hello (s_load_t *self, s_sim_t *sim)
{
    Ak__Device dev = AK__DEVICE__INIT;
    Ak__Device *devs[1] = { &dev };
    char *backends[1] = { (char *) S_BACKEND };
    dev.index = 0;
    dev.backend = (char *) S_BACKEND;
    dev.device_class = self->opts.device_class;
    dev.name = (char *) "akload simulated device (load test, no kernels run)";
    dev.slots = self->opts.slots;

    /* held: the tasks it runs and those whose receipt waits for an ACK,
       as akworker lists them (the coordinator re-queues what is not) */
    size_t nheld = sim->ntasks + sim->npending;
    Ak__TaskRef *refs = ak_calloc (nheld ? nheld : 1, sizeof *refs);
    Ak__TaskRef **ptrs = ak_calloc (nheld ? nheld : 1, sizeof *ptrs);
    for (size_t i = 0; i < nheld; i++) {
        ak__task_ref__init (&refs[i]);
        refs[i].task_id = i < sim->ntasks ? sim->tasks[i].receipt->task_id : sim->pending[i - sim->ntasks].task_id;
        refs[i].attempt = i < sim->ntasks ? sim->tasks[i].receipt->attempt : sim->pending[i - sim->ntasks].attempt;
        ptrs[i] = &refs[i];
    }
    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = sim->id;
    hello.host = self->host;
    hello.pid = self->pid;
    hello.n_backends = 1;
    hello.backends = backends;
    hello.n_devices = 1;
    hello.devices = devs;
    hello.slots = self->opts.slots;
    hello.prefetch = self->opts.prefetch;
    hello.software_version = (char *) AK_VERSION "-akload";
    hello.n_running = nheld;
    hello.running = ptrs;
    hello.heartbeat_ms = self->opts.heartbeat_ms;
    hello.blob_epoch = ++sim->blob_epoch;
    hello.blob_cache_bytes = (uint64_t) self->opts.blob_cache_mb << 20;
    if (!sim->blobs)
        sim->blobs = ak_blobcache_new (true);
    ak_blobcache_reset (sim->blobs, hello.blob_epoch, hello.blob_cache_bytes);

    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    if (s_send (self, sim, &env) == 0)
        self->c.hellos++;
    /* the coordinator starts this registration owing slots + prefetch
       credits, less the tasks still held (it counts them as claimed) */
    sim->ncredits = 0;
    uint64_t now_ns = ak_clock_mono_ns ();
    for (size_t k = sim->ntasks; k < (size_t) self->opts.slots + self->opts.prefetch; k++)
        s_credit_push (sim, now_ns);
    free (ptrs);
    free (refs);

    for (size_t i = 0; i < sim->npending;) {
        s_pending_t *p = &sim->pending[i];
        if (p->resends >= S_MAX_RESENDS) {
            /* never acked over that many registrations: the coordinator
               rejects it (unknown task, impossible attempt); give it up */
            ak_warn ("%s: receipt for task %s attempt %u given up after %u re-sends", sim->id,
                     p->task_id, p->attempt, p->resends);
            self->c.abandoned++;
            s_pending_free (p);
            sim->pending[i] = sim->pending[--sim->npending];
            continue;
        }
        if (s_send_raw (self, sim, p->data, p->size) == 0) {
            p->sent = true;
            p->resends++;
            self->c.resent++;
        }
        i++;
    }
}

static void s_send_heartbeat (s_load_t *self, s_sim_t *sim)
{
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    uint64_t cap = (uint64_t) self->opts.slots + self->opts.prefetch;
    hb.credits = sim->ntasks < cap ? (uint32_t) (cap - sim->ntasks) : 0;
    hb.unacked = (uint32_t) sim->npending;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    if (s_send (self, sim, &env) == 0)
        self->c.heartbeats_sent++;
}

// ============================================================= connection

static int s_sockopt (void *sock, int opt, int value, const char *name, const char *id)
{
    if (zmq_setsockopt (sock, opt, &value, sizeof value) != 0) {
        ak_error ("%s: zmq_setsockopt (%s): %s", id, name, zmq_strerror (zmq_errno ()));
        return AK_EIO;
    }
    return 0;
}

/* Closes the socket (linger bounded); unacked receipts stay, to be re-sent
   on the next socket. */
/* Stops watching the ZMQ_FD of handle (a socket or a monitor). */
static void s_epoll_del (s_load_t *self, s_sim_t *sim, void *handle)
{
    int fd = -1;
    size_t fdlen = sizeof fd;
    if (zmq_getsockopt (handle, ZMQ_FD, &fd, &fdlen) != 0)
        ak_error ("%s: zmq_getsockopt (ZMQ_FD): %s", sim->id, zmq_strerror (zmq_errno ()));
    else if (epoll_ctl (self->epoll, EPOLL_CTL_DEL, fd, NULL) != 0)
        ak_error ("%s: epoll_ctl (DEL): %s", sim->id, strerror (errno));
}

static void s_close (s_load_t *self, s_sim_t *sim, int linger_ms)
{
    if (sim->mon) {
        s_epoll_del (self, sim, ak_hsmon_handle (sim->mon));
        ak_hsmon_destroy (&sim->mon);
    }
    ak_liveness_reset (&sim->live);
    if (sim->sock) {
        int fd = -1;
        size_t fdlen = sizeof fd;
        if (zmq_getsockopt (sim->sock, ZMQ_FD, &fd, &fdlen) != 0)
            ak_error ("%s: zmq_getsockopt (ZMQ_FD): %s", sim->id, zmq_strerror (zmq_errno ()));
        else if (epoll_ctl (self->epoll, EPOLL_CTL_DEL, fd, NULL) != 0)
            ak_error ("%s: epoll_ctl (DEL): %s", sim->id, strerror (errno));
        s_sockopt (sim->sock, ZMQ_LINGER, linger_ms, "ZMQ_LINGER", sim->id);
        if (zmq_close (sim->sock) != 0)
            ak_error ("%s: zmq_close: %s", sim->id, zmq_strerror (zmq_errno ()));
        sim->sock = NULL;
    }
    for (size_t i = 0; i < sim->npending; i++)
        sim->pending[i].sent = false;
}

/* Schedules a new socket after the backoff with jitter (link.h), which
   then doubles; returns the wait. */
static uint32_t s_reconnect_later (s_load_t *self, s_sim_t *sim, uint64_t now)
{
    s_close (self, sim, 0);
    uint32_t wait = ak_backoff_jitter (sim->backoff_ms, randombytes_random ());
    sim->next_connect = now + wait;
    if (sim->next_connect < self->next_wake)
        self->next_wake = sim->next_connect;
    sim->backoff_ms = ak_backoff_next (sim->backoff_ms, self->opts.backoff_ms, self->opts.max_backoff_ms);
    return wait;
}

/* Watches the ZMQ_FD of handle, edge-triggered, tagged with data. */
static int s_epoll_add (s_load_t *self, s_sim_t *sim, void *handle, uint32_t data)
{
    int fd = -1;
    size_t fdlen = sizeof fd;
    if (zmq_getsockopt (handle, ZMQ_FD, &fd, &fdlen) != 0) {
        ak_error ("%s: zmq_getsockopt (ZMQ_FD): %s", sim->id, zmq_strerror (zmq_errno ()));
        return AK_EIO;
    }
    struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = data };
    if (epoll_ctl (self->epoll, EPOLL_CTL_ADD, fd, &ev) != 0) {
        ak_error ("%s: epoll_ctl (ADD): %s", sim->id, strerror (errno));
        return AK_EIO;
    }
    return 0;
}

/*  Reads sim's handshake events to EAGAIN: a success starts the liveness
    clock; a failure closes the socket and schedules a new one (libzmq
    does not retry a refused handshake). */
static void s_handshakes (s_load_t *self, s_sim_t *sim, uint64_t now)
{
    ak_hs_event_t ev;
    int n;
    while (sim->mon && (n = ak_hsmon_next (sim->mon, &ev)) != 0) {
        char why[512];
        if (n > 0 && ev.kind == AK_HS_OK) {
            self->c.handshakes++;
            ak_liveness_heard (&sim->live, now);
            continue;
        }
        self->c.handshake_failures++;
        if (n > 0)
            ak_hs_describe (&ev, self->opts.cert_file != NULL, why, sizeof why);
        else
            snprintf (why, sizeof why, "the handshake monitor broke");
        uint32_t wait = s_reconnect_later (self, sim, now);
        ak_warn ("%s: %s: new socket in %u ms", sim->id, why, wait);
    }
}

/* A new DEALER, connected, then HELLO and the unacked receipts. */
static void s_connect (s_load_t *self, s_sim_t *sim, uint64_t now)
{
    void *sock = zmq_socket (self->ctx, ZMQ_DEALER);
    if (!sock) {
        ak_error ("%s: cannot create a DEALER socket: %s", sim->id, zmq_strerror (zmq_errno ()));
        s_reconnect_later (self, sim, now);
        return;
    }
    int64_t max = AK_MAX_MSG_SIZE;
    int rc = s_sockopt (sock, ZMQ_LINGER, 0, "ZMQ_LINGER", sim->id);
    if (rc == 0)
        rc = s_sockopt (sock, ZMQ_SNDHWM, S_HWM, "ZMQ_SNDHWM", sim->id);
    if (rc == 0)
        rc = s_sockopt (sock, ZMQ_RCVHWM, S_HWM, "ZMQ_RCVHWM", sim->id);
    if (rc == 0)
        rc = s_sockopt (sock, ZMQ_RECONNECT_IVL, (int) self->opts.backoff_ms, "ZMQ_RECONNECT_IVL", sim->id);
    if (rc == 0)
        rc = s_sockopt (sock, ZMQ_RECONNECT_IVL_MAX, (int) self->opts.max_backoff_ms, "ZMQ_RECONNECT_IVL_MAX",
                        sim->id);
    if (rc == 0 && zmq_setsockopt (sock, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0) {
        ak_error ("%s: zmq_setsockopt (ZMQ_MAXMSGSIZE): %s", sim->id, zmq_strerror (zmq_errno ()));
        rc = AK_EIO;
    }
    ak_err_t aerr = { 0 };
    if (rc == 0 && ak_auth_client_setup (sock, self->opts.cert_file, self->opts.server_key, &aerr) != 0) {
        ak_error ("%s: CURVE: %s", sim->id, aerr.msg);
        rc = AK_EINVAL;
    }
    uint32_t index = (uint32_t) (sim - self->sims);
    if (rc == 0 && (rc = ak_hsmon_new (self->ctx, sock, &sim->mon, &aerr)) != 0)
        ak_error ("%s: %s", sim->id, aerr.msg);
    if (rc == 0 && (rc = s_epoll_add (self, sim, ak_hsmon_handle (sim->mon), index | S_MON_BIT)) != 0)
        ak_hsmon_destroy (&sim->mon);
    if (rc == 0 && zmq_connect (sock, self->opts.endpoint) != 0) {
        ak_error ("%s: connect %s: %s", sim->id, self->opts.endpoint, zmq_strerror (zmq_errno ()));
        rc = AK_EIO;
    }
    if (rc == 0)
        rc = s_epoll_add (self, sim, sock, index);
    if (rc) {
        if (sim->mon) {
            s_epoll_del (self, sim, ak_hsmon_handle (sim->mon));
            ak_hsmon_destroy (&sim->mon);
        }
        if (zmq_close (sock) != 0)
            ak_error ("%s: zmq_close: %s", sim->id, zmq_strerror (zmq_errno ()));
        s_reconnect_later (self, sim, now);
        return;
    }
    if (sim->last_recv)
        self->c.reconnects++;
    sim->sock = sock;
    sim->last_recv = now;
    s_send_hello (self, sim);
    s_check_ready (self, sim);
    /* a first read arms the monitor's descriptor: libzmq signals a reader
       only once it has found its pipe empty */
    s_handshakes (self, sim, now);
}

// =================================================================== tasks

static char *s_dup_or_empty (const char *s)
{
    return ak_strdup (s ? s : "");
}

/* Turns an ASSIGN (taken) into the receipt the task will send: identity,
   params and workloads move over, each workload with zero timings. */
static Ak__Receipt *s_receipt_from (s_load_t *self, s_sim_t *sim, Ak__Assign **assign_p)
{
    Ak__Assign *a = *assign_p;
    *assign_p = NULL;
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    r->task_id = a->task_id;
    a->task_id = NULL;
    r->batch_id = a->batch_id;
    a->batch_id = NULL;
    r->attempt = a->attempt;
    r->kind = a->kind;
    a->kind = NULL;
    r->op = a->op;
    a->op = NULL;
    r->candidate_name = a->candidate_name;
    a->candidate_name = NULL;
    r->params = a->params;
    r->n_params = a->n_params;
    a->params = NULL;
    a->n_params = 0;
    r->worker_id = ak_strdup (sim->id);
    r->host = ak_strdup (self->host);
    r->status = ak_strdup ("ok");
    r->reason = ak_strdup (S_REASON);

    Ak__Device *dev = ak_malloc (sizeof *dev);
    ak__device__init (dev);
    dev->backend = ak_strdup (S_BACKEND);
    dev->device_class = s_dup_or_empty (a->device_class);
    dev->name = ak_strdup ("akload simulated device (load test, no kernels run)");
    dev->slots = self->opts.slots;
    r->device = dev;

    if (a->n_workloads) {
        r->timings = ak_calloc (a->n_workloads, sizeof *r->timings);
        for (size_t i = 0; i < a->n_workloads; i++) {
            Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
            ak__workload_timing__init (t);
            t->workload = a->workloads[i];
            a->workloads[i] = NULL;
            t->candidate = ak_malloc (sizeof *t->candidate);
            ak__stats__init (t->candidate);
            t->baseline = ak_malloc (sizeof *t->baseline);
            ak__stats__init (t->baseline);
            r->timings[i] = t;
        }
        r->n_timings = a->n_workloads;
        a->n_workloads = 0;         /* the array goes, its moved elements stay */
    }
    /* the strings moved out were NULLed; free_unpacked skips NULL strings */
    ak__assign__free_unpacked (a, NULL);
    return r;
}

static void s_task_free (s_task_t *t)
{
    if (t->receipt)
        ak__receipt__free_unpacked (t->receipt, NULL);
    t->receipt = NULL;
}

static void s_pending_free (s_pending_t *p)
{
    free (p->task_id);
    free (p->data);
    p->task_id = NULL;
    p->data = NULL;
}

/* The task at index i finished: its receipt is packed, kept until acked
   and sent; the task is gone. */
static void s_finish (s_load_t *self, s_sim_t *sim, size_t i)
{
    s_task_t t = sim->tasks[i];
    sim->tasks[i] = sim->tasks[--sim->ntasks];
    Ak__Receipt *r = t.receipt;
    r->started_at_ms = t.started_wall;
    r->finished_at_ms = ak_clock_wall_ms ();
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = r;
    env.seq = ++sim->seq;
    uint8_t *data = NULL;
    size_t size = 0;
    int rc = ak_envelope_pack (&env, &data, &size);
    if (rc) {
        ak_error ("%s: receipt for task %s cannot be packed: %s", sim->id, r->task_id, ak_strerror (rc));
        s_task_free (&t);
        return;
    }
    if (sim->npending == sim->cap_pending) {
        sim->cap_pending = sim->cap_pending ? sim->cap_pending * 2 : 4;
        sim->pending = ak_realloc (sim->pending, sim->cap_pending * sizeof *sim->pending);
    }
    s_pending_t *p = &sim->pending[sim->npending++];
    memset (p, 0, sizeof *p);
    p->task_id = r->task_id;
    r->task_id = NULL;
    p->attempt = r->attempt;
    p->assigned_ns = t.assigned_ns;
    p->finished_ns = ak_clock_mono_ns ();
    s_credit_push (sim, p->finished_ns);    /* the RECEIPT frees its slot: ask for more */
    p->data = data;
    p->size = size;
    s_task_free (&t);
    self->c.receipts++;
    if (s_send_raw (self, sim, p->data, p->size) == 0)
        p->sent = true;
}

/* The due-time heap: a task entry may outlive its task (a re-registration
   dropped it); waking for it is harmless. */
static void s_due_push (s_load_t *self, uint64_t due_ms, uint32_t sim)
{
    if (self->ndue == self->cap_due) {
        self->cap_due = self->cap_due ? self->cap_due * 2 : 1024;
        self->due = ak_realloc (self->due, self->cap_due * sizeof *self->due);
    }
    size_t i = self->ndue++;
    while (i > 0 && self->due[(i - 1) / 2].due_ms > due_ms) {
        self->due[i] = self->due[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    self->due[i] = (s_due_t) { due_ms, sim };
}

static s_due_t s_due_pop (s_load_t *self)
{
    s_due_t top = self->due[0];
    s_due_t last = self->due[--self->ndue];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= self->ndue)
            break;
        if (c + 1 < self->ndue && self->due[c + 1].due_ms < self->due[c].due_ms)
            c++;
        if (self->due[c].due_ms >= last.due_ms)
            break;
        self->due[i] = self->due[c];
        i = c;
    }
    if (self->ndue)
        self->due[i] = last;
    return top;
}

/* Starts waiting tasks while a slot is free (STARTED goes out at once) and
   finishes those that are due. */
static void s_run_tasks (s_load_t *self, s_sim_t *sim, uint64_t now)
{
    size_t running = 0;
    for (size_t i = 0; i < sim->ntasks; i++)
        running += sim->tasks[i].running;
    for (size_t i = 0; i < sim->ntasks && running < self->opts.slots; i++) {
        s_task_t *t = &sim->tasks[i];
        if (t->running)
            continue;
        t->running = true;
        t->due_ms = now + self->opts.task_ms;
        t->started_wall = ak_clock_wall_ms ();
        running++;
        if (self->opts.task_ms)
            s_due_push (self, t->due_ms, (uint32_t) (sim - self->sims));
        Ak__TaskStarted st = AK__TASK_STARTED__INIT;
        st.task_id = t->receipt->task_id;
        st.attempt = t->receipt->attempt;
        st.device = 0;
        Ak__Envelope env = AK__ENVELOPE__INIT;
        env.body_case = AK__ENVELOPE__BODY_STARTED;
        env.started = &st;
        if (s_send (self, sim, &env) == 0)
            self->c.started++;
    }
    bool again = false;
    for (size_t i = 0; i < sim->ntasks;) {
        s_task_t *t = &sim->tasks[i];
        if (t->running && t->due_ms <= now) {
            s_finish (self, sim, i);
            again = true;
            continue;                       /* index i now holds another task */
        }
        i++;
    }
    if (again && sim->ntasks)
        s_run_tasks (self, sim, now);
}

// ================================================================ receiving

static void s_on_assign (s_load_t *self, s_sim_t *sim, Ak__Envelope *env, uint64_t now_ns, uint64_t now)
{
    /* the blob cache's checks, as akworker makes them (blobcache.h); the
       cached texts are not copied in, since no kernel runs here */
    ak_err_t berr = { 0 };
    int brc = ak_blobcache_check (sim->blobs, env->assign, &berr);
    if (brc == AK_ESTATE) {
        self->c.stale_assigns++;    /* from before our last HELLO, which released it */
        return;
    }
    if (brc) {
        self->c.blob_misses++;
        ak_warn ("%s: ASSIGN %s dropped: %s; registering again", sim->id, env->assign->task_id, berr.msg);
        s_send_hello (self, sim);
        return;
    }
    Ak__Assign *a = env->assign;
    env->assign = NULL;
    env->body_case = AK__ENVELOPE__BODY__NOT_SET;
    self->c.assigns++;
    if (sim->ncredits) {
        uint64_t freed = sim->credit_ns[0];
        memmove (sim->credit_ns, sim->credit_ns + 1, --sim->ncredits * sizeof *sim->credit_ns);
        /* a credit freed in the warm-up (a HELLO of a slow start: 1000
           connections can take seconds) is not a sample of the window */
        if (freed >= self->window_ns) {
            if (self->ncredit == self->cap_credit) {
                self->cap_credit = self->cap_credit ? self->cap_credit * 2 : 65536;
                self->credit_us = ak_realloc (self->credit_us, self->cap_credit * sizeof *self->credit_us);
            }
            self->credit_us[self->ncredit++] = s_us (now_ns - freed);
        }
    }
    /* a task given again (a new attempt after a re-registration) replaces
       the copy held */
    for (size_t i = 0; i < sim->ntasks; i++)
        if (strcmp (sim->tasks[i].receipt->task_id, a->task_id) == 0) {
            s_task_free (&sim->tasks[i]);
            sim->tasks[i] = sim->tasks[--sim->ntasks];
            break;
        }
    if (sim->ntasks == sim->cap_tasks) {
        sim->cap_tasks = sim->cap_tasks ? sim->cap_tasks * 2 : 4;
        sim->tasks = ak_realloc (sim->tasks, sim->cap_tasks * sizeof *sim->tasks);
    }
    s_task_t *t = &sim->tasks[sim->ntasks++];
    memset (t, 0, sizeof *t);
    t->receipt = s_receipt_from (self, sim, &a);
    t->assigned_ns = now_ns;
    s_run_tasks (self, sim, now);
}

static uint32_t s_us (uint64_t ns)
{
    uint64_t us = ns / 1000;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t) us;
}

static void s_lat_add (s_load_t *self, uint64_t dispatch_ns, uint64_t commit_ns)
{
    if (self->nlat == self->cap_lat) {
        self->cap_lat = self->cap_lat ? self->cap_lat * 2 : 65536;
        self->lat_us = ak_realloc (self->lat_us, self->cap_lat * sizeof *self->lat_us);
        self->commit_us = ak_realloc (self->commit_us, self->cap_lat * sizeof *self->commit_us);
    }
    self->lat_us[self->nlat] = s_us (dispatch_ns);
    self->commit_us[self->nlat++] = s_us (commit_ns);
}

static void s_on_ack (s_load_t *self, s_sim_t *sim, const Ak__Ack *ack, uint64_t now_ns)
{
    bool refused = ack->refused && *ack->refused;
    self->c.acks += !refused;
    self->c.acks_refused += refused;
    if (ack->duplicate)
        self->c.acks_duplicate++;
    if (refused)
        ak_warn ("%s: receipt for task %s attempt %u refused: %s", sim->id, ack->task_id, ack->attempt,
                 ack->refused);
    for (size_t i = 0; i < sim->npending; i++) {
        s_pending_t *p = &sim->pending[i];
        if (p->attempt != ack->attempt || strcmp (p->task_id, ack->task_id) != 0)
            continue;
        if (!refused && now_ns >= self->window_ns) {
            if (!self->c.window_acks)
                self->first_ack_ns = now_ns;
            self->last_ack_ns = now_ns;
            self->c.window_acks++;
            s_lat_add (self, now_ns - p->assigned_ns, now_ns - p->finished_ns);
        }
        s_pending_free (p);
        sim->pending[i] = sim->pending[--sim->npending];
        return;
    }
    self->c.acks_unknown++;
}

static void s_on_frame (s_load_t *self, s_sim_t *sim, const void *data, size_t size)
{
    Ak__Envelope *env = NULL;
    ak_err_t err = { 0 };
    uint64_t now_ns = ak_clock_mono_ns ();
    uint64_t now = now_ns / 1000000;
    if (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &env, &err) != 0) {
        self->c.rejected++;
        ak_warn ("%s: message from the coordinator refused: %s", sim->id, err.msg);
        return;
    }
    sim->last_recv = now;
    ak_liveness_heard (&sim->live, now);
    if (env->body_case != AK__ENVELOPE__BODY_DISCONNECT) {
        sim->backoff_ms = self->opts.backoff_ms;        /* registered and heard */
        if (!sim->registered) {
            sim->registered = true;
            if (++self->nregistered == self->opts.workers)
                self->all_registered_ns = now_ns;
        }
    }
    switch (env->body_case) {
        case AK__ENVELOPE__BODY_HEARTBEAT:
            self->c.heartbeats_recv++;
            break;
        case AK__ENVELOPE__BODY_ASSIGN:
            self->c.assign_bytes += size;
            s_on_assign (self, sim, env, now_ns, now);
            break;
        case AK__ENVELOPE__BODY_ACK:
            s_on_ack (self, sim, env->ack, now_ns);
            break;
        case AK__ENVELOPE__BODY_DISCONNECT: {
            self->c.disconnects++;
            bool refused = env->disconnect->code != AK__DISCONNECT_CODE__DISCONNECT_REREGISTER;
            self->c.refusals += refused;
            uint32_t wait = s_reconnect_later (self, sim, now);
            if (refused)
                ak_error ("%s: the coordinator refused this worker: %s (code %d): new socket in %u ms",
                          sim->id, env->disconnect->reason, (int) env->disconnect->code, wait);
            else
                ak_info ("%s: coordinator says DISCONNECT (%s): new socket in %u ms", sim->id,
                         env->disconnect->reason, wait);
            break;
        }
        default:
            self->c.rejected++;
            ak_warn ("%s: unexpected %s from the coordinator ignored", sim->id, ak_envelope_kind (env));
            break;
    }
    ak_envelope_free (&env);
}

/* Reads what waits on sim's socket, at most S_DRAIN_MAX messages; a socket
   not read down to EAGAIN stays ready. */
static void s_drain (s_load_t *self, s_sim_t *sim)
{
    for (int i = 0; sim->sock; i++) {
        if (i == S_DRAIN_MAX) {
            s_mark_ready (self, sim);
            return;
        }
        zmq_msg_t msg;
        if (zmq_msg_init (&msg) != 0) {
            ak_error ("%s: zmq_msg_init: %s", sim->id, zmq_strerror (zmq_errno ()));
            return;
        }
        if (zmq_msg_recv (&msg, sim->sock, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno ();
            if (zmq_msg_close (&msg) != 0)
                ak_error ("%s: zmq_msg_close: %s", sim->id, zmq_strerror (zmq_errno ()));
            if (e != EAGAIN && e != EINTR)
                ak_warn ("%s: receive: %s", sim->id, zmq_strerror (e));
            return;
        }
        bool more = zmq_msg_more (&msg);
        if (more) {
            self->c.rejected++;
            ak_warn ("%s: multi-frame message from the coordinator refused", sim->id);
            while (more) {
                if (zmq_msg_close (&msg) != 0 || zmq_msg_init (&msg) != 0
                    || zmq_msg_recv (&msg, sim->sock, ZMQ_DONTWAIT) < 0)
                    break;
                more = zmq_msg_more (&msg);
            }
        }
        else
            s_on_frame (self, sim, zmq_msg_data (&msg), zmq_msg_size (&msg));
        if (zmq_msg_close (&msg) != 0)
            ak_error ("%s: zmq_msg_close: %s", sim->id, zmq_strerror (zmq_errno ()));
    }
}

// ==================================================================== timers

/* Heartbeats, coordinator liveness, reconnects, due tasks, receipts not
   handed over yet; lowers self->next_wake to sim's next timer. */
static void s_timers (s_load_t *self, s_sim_t *sim, uint64_t now)
{
    uint64_t hb = self->opts.heartbeat_ms;
    uint64_t dead_after = (uint64_t) self->opts.liveness * hb;
    uint64_t wake;
    if (sim->sock) {
        if (ak_liveness_dead (&sim->live, now, self->opts.heartbeat_ms, self->opts.liveness)) {
            self->c.silences++;
            uint64_t silent = now - sim->live.since_ms;
            uint32_t wait = s_reconnect_later (self, sim, now);
            ak_info ("%s: coordinator silent for %" PRIu64 " ms: new socket in %u ms", sim->id, silent, wait);
            wake = sim->next_connect;
        }
        else {
            if (now - sim->last_send >= hb && sim->live.up)     /* none queued behind the HELLO */
                s_send_heartbeat (self, sim);
            for (size_t i = 0; i < sim->npending; i++) {
                s_pending_t *p = &sim->pending[i];
                if (!p->sent && s_send_raw (self, sim, p->data, p->size) == 0)
                    p->sent = true;
            }
            wake = sim->last_send + hb;
            uint64_t silent = sim->live.since_ms + dead_after + 1;
            if (sim->live.up && silent < wake)
                wake = silent;
        }
    }
    else {
        if (now >= sim->next_connect)
            s_connect (self, sim, now);
        wake = sim->sock ? now + hb : sim->next_connect;
    }
    if (wake < self->next_wake)
        self->next_wake = wake;
    if (sim->ntasks)
        s_run_tasks (self, sim, now);
}

/* The scan over every worker: at most every S_SCAN_MIN_MS, since with
   staggered heartbeats some worker always has one due within a
   millisecond; a heartbeat a few ms late is well inside any liveness
   window.  Due tasks have their own heap. */
static void s_all_timers (s_load_t *self, uint64_t now)
{
    self->next_wake = now + S_POLL_MAX_MS;
    for (uint32_t i = 0; i < self->opts.workers; i++)
        s_timers (self, &self->sims[i], now);
    if (self->next_wake < now + S_SCAN_MIN_MS)
        self->next_wake = now + S_SCAN_MIN_MS;
}

/* Finishes (and starts) the tasks whose time came. */
static void s_due_tasks (s_load_t *self, uint64_t now)
{
    while (self->ndue && self->due[0].due_ms <= now) {
        s_due_t d = s_due_pop (self);
        s_run_tasks (self, &self->sims[d.sim], now);
    }
}

/* Reads every socket of the ready list (which may fill again meanwhile). */
static void s_read_ready (s_load_t *self)
{
    size_t n = self->nready;
    memcpy (self->batch, self->ready, n * sizeof *self->ready);
    self->nready = 0;
    for (size_t i = 0; i < n; i++) {
        s_sim_t *sim = &self->sims[self->batch[i]];
        sim->ready = false;
        s_drain (self, sim);
    }
}

// ================================================================ statistics

static int s_cmp_u32 (const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted latencies, in ms. */
static double s_pct (const uint32_t *lat_us, size_t n, double q)
{
    if (!n)
        return 0;
    size_t k = (size_t) (q * (double) n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return lat_us[k - 1] / 1000.0;
}

/* Sorts the latencies and summarizes them as JSON. */
static json_t *s_lat_json (uint32_t *lat_us, size_t n)
{
    double sum = 0;
    if (n)
        qsort (lat_us, n, sizeof *lat_us, s_cmp_u32);
    for (size_t i = 0; i < n; i++)
        sum += lat_us[i];
    json_t *lat = json_pack ("{s:I, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t) n,
                             "p50_ms", s_pct (lat_us, n, 0.50), "p99_ms", s_pct (lat_us, n, 0.99),
                             "p999_ms", s_pct (lat_us, n, 0.999), "max_ms", s_pct (lat_us, n, 1.0),
                             "mean_ms", n ? sum / (double) n / 1000.0 : 0.0);
    if (!lat)
        abort ();
    return lat;
}

/* The statistics as a JSON object (the caller's). */
static json_t *s_stats_json (s_load_t *self)
{
    double window_s = self->end_ns > self->window_ns ? (double) (self->end_ns - self->window_ns) / 1e9 : 0;
    double total_s = (double) (self->end_ns - self->start_ns) / 1e9;
    size_t unacked = 0, held = 0;
    uint32_t connected = 0;
    for (uint32_t i = 0; i < self->opts.workers; i++) {
        unacked += self->sims[i].npending;
        held += self->sims[i].ntasks;
        connected += self->sims[i].sock != NULL;
    }
    const s_counters_t *c = &self->c;
    json_t *o = json_pack ("{s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:f, s:f}",
                           "tool", "akload (load test: no kernel ran)", "coordinator", self->opts.endpoint,
                           "workers", (json_int_t) self->opts.workers, "device_class", self->opts.device_class,
                           "slots", (json_int_t) self->opts.slots, "prefetch", (json_int_t) self->opts.prefetch,
                           "task_ms", (json_int_t) self->opts.task_ms, "elapsed_s", total_s,
                           "window_s", window_s);
    json_t *counts = json_pack ("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                                "assigns", (json_int_t) c->assigns, "started", (json_int_t) c->started,
                                "receipts_sent", (json_int_t) c->receipts, "receipts_resent", (json_int_t) c->resent,
                                "acks_received", (json_int_t) c->acks,
                                "duplicates_acked", (json_int_t) c->acks_duplicate,
                                "acks_unknown", (json_int_t) c->acks_unknown,
                                "acks_refused", (json_int_t) c->acks_refused, "hellos", (json_int_t) c->hellos,
                                "reconnects", (json_int_t) c->reconnects,
                                "disconnects_received", (json_int_t) c->disconnects,
                                "coordinator_silences", (json_int_t) c->silences,
                                "send_failures", (json_int_t) c->send_failures,
                                "rejected", (json_int_t) c->rejected,
                                "unacked_at_exit", (json_int_t) unacked, "held_at_exit", (json_int_t) held,
                                "receipts_abandoned", (json_int_t) c->abandoned,
                                "stale_assigns", (json_int_t) c->stale_assigns,
                                "blob_misses", (json_int_t) c->blob_misses,
                                "assign_bytes", (json_int_t) c->assign_bytes);
    if (!o || !counts)
        abort ();
    /* the link (common/linkwatch.h): handshakes done and failed, refusals */
    json_object_set_new (counts, "handshakes", json_integer ((json_int_t) c->handshakes));
    json_object_set_new (counts, "handshake_failures", json_integer ((json_int_t) c->handshake_failures));
    json_object_set_new (counts, "refusals", json_integer ((json_int_t) c->refusals));
    json_object_set_new (o, "counts", counts);
    /* a cold start: when every simulated worker had been heard once (null: not all were) */
    json_object_set_new (o, "registered", json_integer ((json_int_t) self->nregistered));
    json_object_set_new (o, "all_registered_s", self->all_registered_ns
                         ? json_real ((double) (self->all_registered_ns - self->start_ns) / 1e9) : json_null ());
    /* ASSIGN received -> ACK received: what a task waits for beyond its run */
    json_object_set_new (o, "dispatch_to_ack_latency", s_lat_json (self->lat_us, self->nlat));
    /* RECEIPT sent -> ACK received: the coordinator's intake and group commit */
    json_object_set_new (o, "receipt_to_ack_latency", s_lat_json (self->commit_us, self->nlat));
    /* credit freed (HELLO or RECEIPT sent) -> the ASSIGN that uses it: how
       long a worker asking for work waits for it, the dispatch latency
       that queueing in front of saturated workers does not stretch */
    json_object_set_new (o, "credit_to_assign_latency", s_lat_json (self->credit_us, self->ncredit));
    json_object_set_new (o, "round_trips", json_integer ((json_int_t) c->window_acks));
    json_object_set_new (o, "round_trips_per_s",
                         json_real (window_s > 0 ? (double) c->window_acks / window_s : 0.0));
    /* the rate while acks were coming, for runs whose queue ran dry */
    double busy_s = (double) (self->last_ack_ns - self->first_ack_ns) / 1e9;
    json_object_set_new (o, "busy_round_trips_per_s",
                         json_real (busy_s > 0 ? (double) (c->window_acks - 1) / busy_s : 0.0));
    json_object_set_new (o, "connected_at_exit", json_integer (connected));
    return o;
}

static void s_print_stats (s_load_t *self, json_t *o)
{
    json_t *counts = json_object_get (o, "counts");
    json_t *lat = json_object_get (o, "dispatch_to_ack_latency");
    printf ("akload (load test, no kernel ran): %u workers on %s for %.1f s (window %.1f s after %u s warm-up)\n",
            self->opts.workers, self->opts.endpoint, json_real_value (json_object_get (o, "elapsed_s")),
            json_real_value (json_object_get (o, "window_s")), self->opts.warmup_s);
    printf ("  receipts sent %" JSON_INTEGER_FORMAT " (re-sent %" JSON_INTEGER_FORMAT "), acks received %"
            JSON_INTEGER_FORMAT ", duplicates acked %" JSON_INTEGER_FORMAT ", unacked at exit %" JSON_INTEGER_FORMAT "\n",
            json_integer_value (json_object_get (counts, "receipts_sent")),
            json_integer_value (json_object_get (counts, "receipts_resent")),
            json_integer_value (json_object_get (counts, "acks_received")),
            json_integer_value (json_object_get (counts, "duplicates_acked")),
            json_integer_value (json_object_get (counts, "unacked_at_exit")));
    json_t *commit = json_object_get (o, "receipt_to_ack_latency");
    printf ("  round trips %" JSON_INTEGER_FORMAT " = %.0f/s; dispatch->ack latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
            json_integer_value (json_object_get (o, "round_trips")),
            json_real_value (json_object_get (o, "round_trips_per_s")),
            json_real_value (json_object_get (lat, "p50_ms")), json_real_value (json_object_get (lat, "p99_ms")),
            json_real_value (json_object_get (lat, "max_ms")));
    printf ("  receipt->ack (intake + group commit) p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
            json_real_value (json_object_get (commit, "p50_ms")), json_real_value (json_object_get (commit, "p99_ms")),
            json_real_value (json_object_get (commit, "max_ms")));
    json_t *credit = json_object_get (o, "credit_to_assign_latency");
    printf ("  credit->assign (worker asks for work -> ASSIGN received) p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
            json_real_value (json_object_get (credit, "p50_ms")), json_real_value (json_object_get (credit, "p99_ms")),
            json_real_value (json_object_get (credit, "max_ms")));
    printf ("  hellos %" JSON_INTEGER_FORMAT ", reconnects %" JSON_INTEGER_FORMAT ", disconnects received %"
            JSON_INTEGER_FORMAT ", send failures %" JSON_INTEGER_FORMAT "\n",
            json_integer_value (json_object_get (counts, "hellos")),
            json_integer_value (json_object_get (counts, "reconnects")),
            json_integer_value (json_object_get (counts, "disconnects_received")),
            json_integer_value (json_object_get (counts, "send_failures")));
    json_t *all = json_object_get (o, "all_registered_s");
    printf ("  handshakes %" JSON_INTEGER_FORMAT " (failed %" JSON_INTEGER_FORMAT "), coordinator silences %"
            JSON_INTEGER_FORMAT ", refusals %" JSON_INTEGER_FORMAT "; registered %" JSON_INTEGER_FORMAT " of %u",
            json_integer_value (json_object_get (counts, "handshakes")),
            json_integer_value (json_object_get (counts, "handshake_failures")),
            json_integer_value (json_object_get (counts, "coordinator_silences")),
            json_integer_value (json_object_get (counts, "refusals")),
            json_integer_value (json_object_get (o, "registered")), self->opts.workers);
    if (json_is_real (all))
        printf (", all within %.2f s of the start\n", json_real_value (all));
    else
        printf ("\n");
    fflush (stdout);
}

// ================================================================ lifecycle

/* Raises the open-file limit to what n sockets need (each DEALER holds a
   mailbox descriptor and a TCP connection, its handshake monitor two more
   sockets with a mailbox each). */
static int s_raise_fd_limit (uint32_t workers, ak_err_t *err)
{
    struct rlimit rl;
    rlim_t need = (rlim_t) workers * 5 + 256;
    if (getrlimit (RLIMIT_NOFILE, &rl) != 0)
        return ak_err_set (err, AK_EIO, "getrlimit (RLIMIT_NOFILE): %s", strerror (errno));
    if (rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        return ak_err_set (err, AK_EINVAL, "%u workers need about %llu open files, the hard limit is %llu "
                           "(raise it with ulimit -Hn)", workers, (unsigned long long) need,
                           (unsigned long long) rl.rlim_max);
    rl.rlim_cur = need;
    if (setrlimit (RLIMIT_NOFILE, &rl) != 0)
        return ak_err_set (err, AK_EIO, "setrlimit (RLIMIT_NOFILE, %llu): %s", (unsigned long long) need,
                           strerror (errno));
    return 0;
}

static int s_load_new (const s_opts_t *opts, s_load_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    int rc = s_raise_fd_limit (opts->workers, err);
    if (rc)
        return rc;
    s_load_t *self = ak_calloc (1, sizeof *self);
    self->opts = *opts;
    if (gethostname (self->host, sizeof self->host - 1) != 0)
        snprintf (self->host, sizeof self->host, "localhost");
    self->pid = (uint32_t) getpid ();
    self->ctx = zmq_ctx_new ();
    if (!self->ctx) {
        free (self);
        return ak_err_set (err, AK_EIO, "zmq_ctx_new: %s", zmq_strerror (zmq_errno ()));
    }
    if (zmq_ctx_set (self->ctx, ZMQ_MAX_SOCKETS, (int) opts->workers * 3 + 64) != 0) {
        rc = ak_err_set (err, AK_EIO, "zmq_ctx_set (ZMQ_MAX_SOCKETS, %u): %s", opts->workers * 3 + 64,
                         zmq_strerror (zmq_errno ()));
        if (zmq_ctx_term (self->ctx) != 0)
            ak_error ("zmq_ctx_term: %s", zmq_strerror (zmq_errno ()));
        free (self);
        return rc;
    }
    self->epoll = epoll_create1 (EPOLL_CLOEXEC);
    if (self->epoll < 0) {
        rc = ak_err_set (err, AK_EIO, "epoll_create1: %s", strerror (errno));
        if (zmq_ctx_term (self->ctx) != 0)
            ak_error ("zmq_ctx_term: %s", zmq_strerror (zmq_errno ()));
        free (self);
        return rc;
    }
    self->sims = ak_calloc (opts->workers, sizeof *self->sims);
    self->ready = ak_calloc (opts->workers, sizeof *self->ready);
    self->batch = ak_calloc (opts->workers, sizeof *self->batch);
    for (uint32_t i = 0; i < opts->workers; i++) {
        s_sim_t *sim = &self->sims[i];
        snprintf (sim->id, sizeof sim->id, "%s-%u", opts->prefix, i + 1);
        sim->backoff_ms = opts->backoff_ms;
    }
    *self_p = self;
    return 0;
}

static void s_load_destroy (s_load_t **self_p)
{
    if (self_p && *self_p) {
        s_load_t *self = *self_p;
        for (uint32_t i = 0; i < self->opts.workers; i++) {
            s_sim_t *sim = &self->sims[i];
            s_close (self, sim, S_LINGER_MS);
            for (size_t k = 0; k < sim->ntasks; k++)
                s_task_free (&sim->tasks[k]);
            free (sim->tasks);
            for (size_t k = 0; k < sim->npending; k++)
                s_pending_free (&sim->pending[k]);
            free (sim->pending);
            free (sim->credit_ns);
            ak_blobcache_destroy (&sim->blobs);
        }
        if (zmq_ctx_term (self->ctx) != 0)
            ak_error ("zmq_ctx_term: %s", zmq_strerror (zmq_errno ()));
        if (close (self->epoll) != 0)
            ak_error ("close (epoll): %s", strerror (errno));
        free (self->sims);
        free (self->ready);
        free (self->batch);
        free (self->lat_us);
        free (self->commit_us);
        free (self->credit_us);
        free (self->due);
        free (self);
        *self_p = NULL;
    }
}

/* Runs until a signal or the duration; 0, or an error from epoll_wait. */
static int s_load_run (s_load_t *self, ak_err_t *err)
{
    uint64_t now = ak_clock_mono_ms ();
    self->start_ns = ak_clock_mono_ns ();
    self->window_ns = self->start_ns + (uint64_t) self->opts.warmup_s * 1000000000ull;
    uint64_t end = self->opts.duration_s ? now + (uint64_t) self->opts.duration_s * 1000 : 0;
    uint64_t next_progress = now + S_PROGRESS_MS;
    uint64_t last_acks = 0;
    int rc = 0;
    ak_info ("%u simulated workers (%s-1 .. %s-%u, class %s, slots %u, prefetch %u, task %u ms) "
             "against %s: a load test, no kernel runs", self->opts.workers, self->opts.prefix,
             self->opts.prefix, self->opts.workers, self->opts.device_class, self->opts.slots,
             self->opts.prefetch, self->opts.task_ms, self->opts.endpoint);
    s_all_timers (self, now);
    while (!s_stop) {
        now = ak_clock_mono_ms ();
        if (end && now >= end)
            break;
        uint64_t wake = self->next_wake;
        if (self->ndue && self->due[0].due_ms < wake)
            wake = self->due[0].due_ms;
        if (end && end < wake)
            wake = end;
        int timeout = self->nready || wake <= now ? 0 : (int) (wake - now);
        struct epoll_event evs[S_EVENTS];
        int n = epoll_wait (self->epoll, evs, S_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = ak_err_set (err, AK_EIO, "epoll_wait: %s", strerror (errno));
            break;
        }
        now = ak_clock_mono_ms ();
        for (int i = 0; i < n; i++) {
            uint32_t data = evs[i].data.u32, index = data & ~S_MON_BIT;
            if (index >= self->opts.workers)
                continue;
            if (data & S_MON_BIT)
                s_handshakes (self, &self->sims[index], now);
            else
                s_mark_ready (self, &self->sims[index]);
        }
        s_read_ready (self);
        now = ak_clock_mono_ms ();
        s_due_tasks (self, now);
        if (now >= self->next_wake)
            s_all_timers (self, now);
        if (now >= next_progress) {
            size_t unacked = 0;
            for (uint32_t i = 0; i < self->opts.workers; i++)
                unacked += self->sims[i].npending;
            ak_info ("progress: %" PRIu64 " acks (%.0f/s over the last %d s), %zu receipts unacked, "
                     "%" PRIu64 " reconnects", self->c.acks,
                     (double) (self->c.acks - last_acks) * 1000.0 / S_PROGRESS_MS, S_PROGRESS_MS / 1000,
                     unacked, self->c.reconnects);
            last_acks = self->c.acks;
            next_progress = now + S_PROGRESS_MS;
        }
    }
    self->end_ns = ak_clock_mono_ns ();
    /* leaving: the coordinator re-queues what we held at once */
    for (uint32_t i = 0; i < self->opts.workers; i++) {
        s_sim_t *sim = &self->sims[i];
        if (!sim->sock)
            continue;
        Ak__Disconnect d = AK__DISCONNECT__INIT;
        d.reason = (char *) "akload stopping";
        Ak__Envelope env = AK__ENVELOPE__INIT;
        env.body_case = AK__ENVELOPE__BODY_DISCONNECT;
        env.disconnect = &d;
        s_send (self, sim, &env);
    }
    return rc;
}

// ==================================================================== main

static void s_usage (FILE *out)
{
    fprintf (out,
        "usage: akload --coordinator EP --workers N [options]\n"
        "\n"
        "A LOAD-TEST tool: simulates N workers against akcoord, each its own DEALER\n"
        "socket speaking the real worker protocol, none running a kernel.  Every\n"
        "ASSIGN gets STARTED and, --task-ms later, a receipt with status \"ok\",\n"
        "reason \"" S_REASON "\" and zero timings.\n"
        "Point it only at a coordinator whose batches exist for load tests.\n"
        "\n"
        "  --coordinator EP     the coordinator's worker endpoint, tcp:// or ipc:// (required)\n"
        "  --workers N          simulated workers, 1..%d (required)\n"
        "  --prefix P           worker ids are P-1 .. P-N (default load)\n"
        "  --class C            device class of every simulated device (default host)\n"
        "  --slots S            slots per worker (default 1)\n"
        "  --prefetch P         prefetch per worker (default 1)\n"
        "  --task-ms MS         time from STARTED to RECEIPT (default 0)\n"
        "  --duration-s S       stop after S seconds (default 0: until SIGTERM/SIGINT)\n"
        "  --warmup-s S         leave the first S seconds out of the round-trip rate and\n"
        "                       the latencies (default 0)\n"
        "  --stats-json FILE    write the statistics there as JSON on exit\n"
        "  --heartbeat-ms N     heartbeat interval, 10..60000 (default 1000)\n"
        "  --blob-cache-mb N    each worker's blob cache, as akworker's; 0: off (default 64)\n"
        "  --liveness N         silent intervals after the handshake before the coordinator\n"
        "                       is dead (default 3)\n"
        "  --backoff-ms N       first reconnect delay, doubling up to 32x, each wait drawn at\n"
        "                       random from [delay/2, delay] (default 1000)\n"
        "  --cert FILE          a worker's secret certificate, used by every simulated worker\n"
        "                       (CURVE; default $AK_CERT)\n"
        "  --server-key KEY     the coordinator's public key, Z85 or its certificate file\n"
        "                       (default $AK_SERVER_KEY); without both: plain\n"
        "  --log-level LEVEL    debug | info | warn | error | quiet (default $AK_LOG_LEVEL,\n"
        "                       else info)\n"
        "  --version            print the version and exit\n"
        "  -h, --help           this text\n"
        "\n"
        "Statistics (stdout, and --stats-json): receipts sent, acks received, duplicates\n"
        "acked, round trips per second (acks after the warm-up / window), the\n"
        "dispatch->ack latency from ASSIGN received to ACK received and the\n"
        "receipt->ack latency from RECEIPT sent to ACK received, and the\n"
        "credit->assign latency from a credit freed (HELLO sent, or a RECEIPT sent,\n"
        "which frees its slot) to the ASSIGN that uses it (p50, p99, max), for credits\n"
        "freed after the warm-up.  Latencies are counted for ACKs and ASSIGNs after it.\n"
        "Exit status: 0 after SIGTERM/SIGINT or the duration, 1 on a failure, 2 for bad flags.\n",
        S_MAX_WORKERS);
}

static int s_bad (const char *fmt, const char *a)
{
    fprintf (stderr, "akload: ");
    fprintf (stderr, fmt, a);
    fprintf (stderr, "\nTry 'akload --help'.\n");
    return 2;
}

static int s_uint (const char *flag, const char *text, int64_t lo, int64_t hi, uint32_t *out)
{
    int64_t v;
    if (ak_parse_i64 (text, &v) || v < lo || v > hi) {
        fprintf (stderr, "akload: %s: '%s' is not an integer in %lld..%lld\nTry 'akload --help'.\n",
                 flag, text, (long long) lo, (long long) hi);
        return 2;
    }
    *out = (uint32_t) v;
    return 0;
}

int main (int argc, char **argv)
{
    enum { O_COORD = 1, O_WORKERS, O_PREFIX, O_CLASS, O_SLOTS, O_PREFETCH, O_TASK, O_DUR, O_WARM,
           O_JSON, O_HB, O_BLOBS, O_LIVE, O_BACKOFF, O_LOG, O_HELP, O_CERT, O_SKEY, O_VERSION };
    static const struct option longopts[] = {
        { "coordinator", required_argument, NULL, O_COORD },
        { "workers", required_argument, NULL, O_WORKERS },
        { "prefix", required_argument, NULL, O_PREFIX },
        { "class", required_argument, NULL, O_CLASS },
        { "slots", required_argument, NULL, O_SLOTS },
        { "prefetch", required_argument, NULL, O_PREFETCH },
        { "task-ms", required_argument, NULL, O_TASK },
        { "duration-s", required_argument, NULL, O_DUR },
        { "warmup-s", required_argument, NULL, O_WARM },
        { "stats-json", required_argument, NULL, O_JSON },
        { "heartbeat-ms", required_argument, NULL, O_HB },
        { "blob-cache-mb", required_argument, NULL, O_BLOBS },
        { "liveness", required_argument, NULL, O_LIVE },
        { "backoff-ms", required_argument, NULL, O_BACKOFF },
        { "log-level", required_argument, NULL, O_LOG },
        { "help", no_argument, NULL, O_HELP },
        { "version", no_argument, NULL, O_VERSION },
        { "cert", required_argument, NULL, O_CERT },
        { "server-key", required_argument, NULL, O_SKEY },
        { NULL, 0, NULL, 0 },
    };
    ak_malloc_tune (argv);      /* before getopt permutes argv */
    s_opts_t opts = {
        .prefix = "load", .device_class = "host", .slots = 1, .prefetch = 1,
        .heartbeat_ms = 1000, .blob_cache_mb = 64, .liveness = 3, .backoff_ms = 1000,
    };
    int level = -1;             /* none given: $AK_LOG_LEVEL, else info (log.h) */
    int opt;
    opterr = 0;
    while ((opt = getopt_long (argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = 0;
        switch (opt) {
            case O_COORD:    opts.endpoint = optarg; break;
            case O_WORKERS:  rc = s_uint ("--workers", optarg, 1, S_MAX_WORKERS, &opts.workers); break;
            case O_PREFIX:   opts.prefix = optarg; break;
            case O_CLASS:    opts.device_class = optarg; break;
            case O_SLOTS:    rc = s_uint ("--slots", optarg, 1, 65536, &opts.slots); break;
            case O_PREFETCH: rc = s_uint ("--prefetch", optarg, 0, 65536, &opts.prefetch); break;
            case O_TASK:     rc = s_uint ("--task-ms", optarg, 0, 3600000, &opts.task_ms); break;
            case O_DUR:      rc = s_uint ("--duration-s", optarg, 0, 86400 * 7, &opts.duration_s); break;
            case O_WARM:     rc = s_uint ("--warmup-s", optarg, 0, 86400, &opts.warmup_s); break;
            case O_JSON:     opts.stats_json = optarg; break;
            case O_CERT:     opts.cert_file = optarg; break;
            case O_SKEY:     opts.server_key = optarg; break;
            case O_HB:       rc = s_uint ("--heartbeat-ms", optarg, 10, 60000, &opts.heartbeat_ms); break;
            case O_BLOBS:    rc = s_uint ("--blob-cache-mb", optarg, 0, 65536, &opts.blob_cache_mb); break;
            case O_LIVE:     rc = s_uint ("--liveness", optarg, 1, 100, &opts.liveness); break;
            case O_BACKOFF:  rc = s_uint ("--backoff-ms", optarg, 1, 32000, &opts.backoff_ms); break;
            case O_LOG:
                level = ak_log_parse_level (optarg);
                if (level < 0)
                    return s_bad ("--log-level: '%s' is not one of debug, info, warn, error, quiet", optarg);
                break;
            case O_HELP:
            case 'h':
                s_usage (stdout);
                return 0;
            case O_VERSION:
                return ak_version_print ("akload");
            case ':':
                return s_bad ("%s needs a value", argv[optind - 1]);
            default:
                return s_bad ("unknown option '%s'", argv[optind - 1]);
        }
        if (rc)
            return rc;
    }
    if (optind < argc)
        return s_bad ("unexpected argument '%s'", argv[optind]);
    if (!opts.endpoint)
        return s_bad ("--coordinator EP is required%s", "");
    ak_err_t eerr = { 0 };
    if (ak_endpoint_check (opts.endpoint, false, &eerr))
        return s_bad ("--coordinator: %s", eerr.msg);
    if (!opts.workers)
        return s_bad ("--workers N is required%s", "");
    char longest[S_MAX_ID + 64];
    snprintf (longest, sizeof longest, "%s-%u", opts.prefix, opts.workers);
    if (!*opts.prefix || !ak_str_token (longest, S_MAX_ID))
        return s_bad ("--prefix: '%s' must make worker ids of 1..128 printable characters without spaces",
                      opts.prefix);
    if (!ak_str_token (opts.device_class, S_MAX_CLASS))
        return s_bad ("--class: '%s' must be 1..64 printable characters without spaces", opts.device_class);
    if (opts.warmup_s && opts.duration_s && opts.warmup_s >= opts.duration_s)
        return s_bad ("--warmup-s must be shorter than --duration-s%s", "");
    opts.max_backoff_ms = opts.backoff_ms * 32;     /* 1 s doubling to 32 s by default */
    if (!opts.cert_file && getenv ("AK_CERT") && *getenv ("AK_CERT"))
        opts.cert_file = getenv ("AK_CERT");
    if (!opts.server_key && getenv ("AK_SERVER_KEY") && *getenv ("AK_SERVER_KEY"))
        opts.server_key = getenv ("AK_SERVER_KEY");
    if (opts.cert_file || opts.server_key) {
        ak_err_t aerr = { 0 };
        void *ctx = zmq_ctx_new ();
        void *probe = ctx ? zmq_socket (ctx, ZMQ_DEALER) : NULL;
        int arc = probe ? ak_auth_client_setup (probe, opts.cert_file, opts.server_key, &aerr) : AK_EIO;
        if (probe)
            zmq_close (probe);
        if (ctx)
            zmq_ctx_term (ctx);
        if (arc)
            return s_bad ("%s", aerr.msg[0] ? aerr.msg : "cannot create a ZeroMQ socket");
    }

    ak_log_set_ident ("akload");
    if (level >= 0)
        ak_log_set_level ((ak_log_level_t) level);
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset (&sa.sa_mask);
    if (sigaction (SIGINT, &sa, NULL) != 0 || sigaction (SIGTERM, &sa, NULL) != 0) {
        perror ("akload: sigaction");
        return 1;
    }
    signal (SIGPIPE, SIG_IGN);

    ak_err_t err = { 0 };
    s_load_t *load = NULL;
    int rc = s_load_new (&opts, &load, &err);
    if (rc) {
        ak_error ("cannot start: %s", err.msg);
        return 1;
    }
    rc = s_load_run (load, &err);
    if (rc)
        ak_error ("%s", err.msg);
    json_t *stats = s_stats_json (load);
    s_print_stats (load, stats);
    if (opts.stats_json) {
        char *text = json_dumps (stats, JSON_INDENT (2) | JSON_SORT_KEYS);
        ak_err_t werr = { 0 };
        if (!text || ak_file_write_atomic (opts.stats_json, text, strlen (text), &werr) != 0) {
            ak_error ("--stats-json: %s", text ? werr.msg : "cannot encode the statistics");
            rc = rc ? rc : AK_EIO;
        }
        free (text);
    }
    json_decref (stats);
    s_load_destroy (&load);
    return rc ? 1 : 0;
}
