/*  ops/akload/sim.c: one simulated worker of akload (akload.h): its
    socket and handshake monitor, HELLO and heartbeats, ASSIGN -> STARTED
    -> RECEIPT, receipts kept until ACKed, reconnects with backoff. */
#include "akload.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "auth.h"
#include "clock.h"
#include "endpoint.h"
#include "log.h"
#include "util.h"

static uint32_t s_us (uint64_t ns);

// ================================================================= sending

void akl_mark_ready (akl_load_t *self, akl_sim_t *sim)
{
    if (!sim->ready && sim->sock) {
        sim->ready = true;
        self->ready[self->nready++] = (uint32_t) (sim - self->sims);
    }
}

/* After an operation other than a read to EAGAIN: ZMQ_EVENTS says whether
   a message waits (its signal may have been consumed), and asking re-arms
   the descriptor for the next one. */
static void s_check_ready (akl_load_t *self, akl_sim_t *sim)
{
    int events = 0;
    size_t len = sizeof events;
    if (sim->ready || !sim->sock)
        return;
    if (zmq_getsockopt (sim->sock, ZMQ_EVENTS, &events, &len) != 0) {
        ak_error ("%s: zmq_getsockopt (ZMQ_EVENTS): %s", sim->id, zmq_strerror (zmq_errno ()));
        akl_mark_ready (self, sim);
    }
    else if (events & ZMQ_POLLIN)
        akl_mark_ready (self, sim);
}

/* Sends a packed envelope without blocking.  0 or AK_EUNAVAIL / AK_EIO. */
static int s_send_raw (akl_load_t *self, akl_sim_t *sim, const void *data, size_t size)
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

int akl_send (akl_load_t *self, akl_sim_t *sim, Ak__Envelope *env)
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
static void s_credit_push (akl_sim_t *sim, uint64_t now_ns)
{
    if (sim->ncredits == sim->cap_credits) {
        sim->cap_credits = sim->cap_credits ? sim->cap_credits * 2 : 4;
        sim->credit_ns = ak_realloc (sim->credit_ns, sim->cap_credits * sizeof *sim->credit_ns);
    }
    sim->credit_ns[sim->ncredits++] = now_ns;
}

static void s_send_hello (akl_load_t *self, akl_sim_t *sim)
{
    Ak__Device dev = AK__DEVICE__INIT;
    Ak__Device *devs[1] = { &dev };
    char *backends[1] = { (char *) AKL_BACKEND };
    dev.index = 0;
    dev.backend = (char *) AKL_BACKEND;
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
    if (akl_send (self, sim, &env) == 0)
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
        akl_pending_t *p = &sim->pending[i];
        if (p->resends >= AKL_MAX_RESENDS) {
            /* never acked over that many registrations: the coordinator
               rejects it (unknown task, impossible attempt); give it up */
            ak_warn ("%s: receipt for task %s attempt %u given up after %u re-sends", sim->id,
                     p->task_id, p->attempt, p->resends);
            self->c.abandoned++;
            akl_pending_free (p);
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

static void s_send_heartbeat (akl_load_t *self, akl_sim_t *sim)
{
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    uint64_t cap = (uint64_t) self->opts.slots + self->opts.prefetch;
    hb.credits = sim->ntasks < cap ? (uint32_t) (cap - sim->ntasks) : 0;
    hb.unacked = (uint32_t) sim->npending;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    if (akl_send (self, sim, &env) == 0)
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
static void s_epoll_del (akl_load_t *self, akl_sim_t *sim, void *handle)
{
    int fd = -1;
    size_t fdlen = sizeof fd;
    if (zmq_getsockopt (handle, ZMQ_FD, &fd, &fdlen) != 0)
        ak_error ("%s: zmq_getsockopt (ZMQ_FD): %s", sim->id, zmq_strerror (zmq_errno ()));
    else if (epoll_ctl (self->epoll, EPOLL_CTL_DEL, fd, NULL) != 0)
        ak_error ("%s: epoll_ctl (DEL): %s", sim->id, strerror (errno));
}

void akl_close (akl_load_t *self, akl_sim_t *sim, int linger_ms)
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
static uint32_t s_reconnect_later (akl_load_t *self, akl_sim_t *sim, uint64_t now)
{
    akl_close (self, sim, 0);
    uint32_t wait = ak_backoff_jitter (sim->backoff_ms, randombytes_random ());
    sim->next_connect = now + wait;
    if (sim->next_connect < self->next_wake)
        self->next_wake = sim->next_connect;
    sim->backoff_ms = ak_backoff_next (sim->backoff_ms, self->opts.backoff_ms, self->opts.max_backoff_ms);
    return wait;
}

/* Watches the ZMQ_FD of handle, edge-triggered, tagged with data. */
static int s_epoll_add (akl_load_t *self, akl_sim_t *sim, void *handle, uint32_t data)
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
void akl_handshakes (akl_load_t *self, akl_sim_t *sim, uint64_t now)
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
static void s_connect (akl_load_t *self, akl_sim_t *sim, uint64_t now)
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
        rc = s_sockopt (sock, ZMQ_SNDHWM, AKL_HWM, "ZMQ_SNDHWM", sim->id);
    if (rc == 0)
        rc = s_sockopt (sock, ZMQ_RCVHWM, AKL_HWM, "ZMQ_RCVHWM", sim->id);
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
    if (rc == 0 && (rc = s_epoll_add (self, sim, ak_hsmon_handle (sim->mon), index | AKL_MON_BIT)) != 0)
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
    akl_handshakes (self, sim, now);
}

// =================================================================== tasks

static char *s_dup_or_empty (const char *s)
{
    return ak_strdup (s ? s : "");
}

/* Turns an ASSIGN (taken) into the receipt the task will send: identity,
   params and workloads move over, each workload with zero timings. */
static Ak__Receipt *s_receipt_from (akl_load_t *self, akl_sim_t *sim, Ak__Assign **assign_p)
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
    r->reason = ak_strdup (AKL_REASON);

    Ak__Device *dev = ak_malloc (sizeof *dev);
    ak__device__init (dev);
    dev->backend = ak_strdup (AKL_BACKEND);
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

void akl_task_free (akl_task_t *t)
{
    if (t->receipt)
        ak__receipt__free_unpacked (t->receipt, NULL);
    t->receipt = NULL;
}

void akl_pending_free (akl_pending_t *p)
{
    free (p->task_id);
    free (p->data);
    p->task_id = NULL;
    p->data = NULL;
}

/* The task at index i finished: its receipt is packed, kept until acked
   and sent; the task is gone. */
static void s_finish (akl_load_t *self, akl_sim_t *sim, size_t i)
{
    akl_task_t t = sim->tasks[i];
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
        akl_task_free (&t);
        return;
    }
    if (sim->npending == sim->cap_pending) {
        sim->cap_pending = sim->cap_pending ? sim->cap_pending * 2 : 4;
        sim->pending = ak_realloc (sim->pending, sim->cap_pending * sizeof *sim->pending);
    }
    akl_pending_t *p = &sim->pending[sim->npending++];
    memset (p, 0, sizeof *p);
    p->task_id = r->task_id;
    r->task_id = NULL;
    p->attempt = r->attempt;
    p->assigned_ns = t.assigned_ns;
    p->finished_ns = ak_clock_mono_ns ();
    s_credit_push (sim, p->finished_ns);    /* the RECEIPT frees its slot: ask for more */
    p->data = data;
    p->size = size;
    akl_task_free (&t);
    self->c.receipts++;
    if (s_send_raw (self, sim, p->data, p->size) == 0)
        p->sent = true;
}

/* The due-time heap: a task entry may outlive its task (a re-registration
   dropped it); waking for it is harmless. */
static void s_due_push (akl_load_t *self, uint64_t due_ms, uint32_t sim)
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
    self->due[i] = (akl_due_t) { due_ms, sim };
}

static akl_due_t s_due_pop (akl_load_t *self)
{
    akl_due_t top = self->due[0];
    akl_due_t last = self->due[--self->ndue];
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
static void s_run_tasks (akl_load_t *self, akl_sim_t *sim, uint64_t now)
{
    size_t running = 0;
    for (size_t i = 0; i < sim->ntasks; i++)
        running += sim->tasks[i].running;
    for (size_t i = 0; i < sim->ntasks && running < self->opts.slots; i++) {
        akl_task_t *t = &sim->tasks[i];
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
        if (akl_send (self, sim, &env) == 0)
            self->c.started++;
    }
    bool again = false;
    for (size_t i = 0; i < sim->ntasks;) {
        akl_task_t *t = &sim->tasks[i];
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

static void s_on_assign (akl_load_t *self, akl_sim_t *sim, Ak__Envelope *env, uint64_t now_ns, uint64_t now)
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
        if (akl_in_window (self, freed)) {
            if (self->ncredit == self->cap_credit) {
                self->cap_credit = self->cap_credit ? self->cap_credit * 2 : 65536;
                self->credit_us = ak_realloc (self->credit_us, self->cap_credit * sizeof *self->credit_us);
                self->credit_at_us = ak_realloc (self->credit_at_us, self->cap_credit * sizeof *self->credit_at_us);
            }
            self->credit_at_us[self->ncredit] = s_us (freed - self->window_ns);
            self->credit_us[self->ncredit++] = s_us (now_ns - freed);
        }
    }
    /* a task given again (a new attempt after a re-registration) replaces
       the copy held */
    for (size_t i = 0; i < sim->ntasks; i++)
        if (strcmp (sim->tasks[i].receipt->task_id, a->task_id) == 0) {
            akl_task_free (&sim->tasks[i]);
            sim->tasks[i] = sim->tasks[--sim->ntasks];
            break;
        }
    if (sim->ntasks == sim->cap_tasks) {
        sim->cap_tasks = sim->cap_tasks ? sim->cap_tasks * 2 : 4;
        sim->tasks = ak_realloc (sim->tasks, sim->cap_tasks * sizeof *sim->tasks);
    }
    akl_task_t *t = &sim->tasks[sim->ntasks++];
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

static void s_lat_add (akl_load_t *self, uint64_t dispatch_ns, uint64_t commit_ns)
{
    if (self->nlat == self->cap_lat) {
        self->cap_lat = self->cap_lat ? self->cap_lat * 2 : 65536;
        self->lat_us = ak_realloc (self->lat_us, self->cap_lat * sizeof *self->lat_us);
        self->commit_us = ak_realloc (self->commit_us, self->cap_lat * sizeof *self->commit_us);
    }
    self->lat_us[self->nlat] = s_us (dispatch_ns);
    self->commit_us[self->nlat++] = s_us (commit_ns);
}

static void s_on_ack (akl_load_t *self, akl_sim_t *sim, const Ak__Ack *ack, uint64_t now_ns)
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
        akl_pending_t *p = &sim->pending[i];
        if (p->attempt != ack->attempt || strcmp (p->task_id, ack->task_id) != 0)
            continue;
        if (!refused && akl_in_window (self, now_ns)) {
            if (!self->c.window_acks)
                self->first_ack_ns = now_ns;
            self->last_ack_ns = now_ns;
            self->c.window_acks++;
            s_lat_add (self, now_ns - p->assigned_ns, now_ns - p->finished_ns);
        }
        akl_pending_free (p);
        sim->pending[i] = sim->pending[--sim->npending];
        return;
    }
    self->c.acks_unknown++;
}

static void s_on_frame (akl_load_t *self, akl_sim_t *sim, const void *data, size_t size)
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
                akl_all_registered (self, now_ns);
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

/* Reads what waits on sim's socket, at most AKL_DRAIN_MAX messages; a socket
   not read down to EAGAIN stays ready. */
static void s_drain (akl_load_t *self, akl_sim_t *sim)
{
    for (int i = 0; sim->sock; i++) {
        if (i == AKL_DRAIN_MAX) {
            akl_mark_ready (self, sim);
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
static void s_timers (akl_load_t *self, akl_sim_t *sim, uint64_t now)
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
                akl_pending_t *p = &sim->pending[i];
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

/* The scan over every worker: at most every AKL_SCAN_MIN_MS, since with
   staggered heartbeats some worker always has one due within a
   millisecond; a heartbeat a few ms late is well inside any liveness
   window.  Due tasks have their own heap. */
void akl_all_timers (akl_load_t *self, uint64_t now)
{
    self->next_wake = now + AKL_POLL_MAX_MS;
    for (uint32_t i = 0; i < self->opts.workers; i++)
        s_timers (self, &self->sims[i], now);
    if (self->next_wake < now + AKL_SCAN_MIN_MS)
        self->next_wake = now + AKL_SCAN_MIN_MS;
}

/* Finishes (and starts) the tasks whose time came. */
void akl_due_tasks (akl_load_t *self, uint64_t now)
{
    while (self->ndue && self->due[0].due_ms <= now) {
        akl_due_t d = s_due_pop (self);
        s_run_tasks (self, &self->sims[d.sim], now);
    }
}

/* Reads every socket of the ready list (which may fill again meanwhile). */
void akl_read_ready (akl_load_t *self)
{
    size_t n = self->nready;
    memcpy (self->batch, self->ready, n * sizeof *self->ready);
    self->nready = 0;
    for (size_t i = 0; i < n; i++) {
        akl_sim_t *sim = &self->sims[self->batch[i]];
        sim->ready = false;
        s_drain (self, sim);
    }
}
