/*  tests/fault/fault_workers.c: the fault tests' workers (see fault.h):
    simulated ones inside the test process (ak_fault_sim_*) and raw
    DEALER sockets speaking the worker protocol frame by frame
    (ak_fault_raw_*). */
#include "fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "error.h"
#include "util.h"

// ========================================================= in-test workers

typedef struct {
    char     *task_id;
    uint32_t  attempt;
    uint8_t  *data;             /* the packed RECEIPT envelope; NULL: held silently (no receipt) */
    size_t    size;
} s_held_t;

typedef struct {
    char       id[64];
    uint32_t   heartbeat_ms;
    zsock_t   *sock;
    s_held_t  *held;
    size_t     nheld, cap;
    uint64_t   next_hb;
} s_simw_t;

struct ak_fault_sim {
    char           *endpoint;
    ak_fault_status_fn *status_fn;
    void           *status_arg;
    s_simw_t       *w;
    int             n;
    ak_fault_ack_t *acks;
    size_t          nacks, cap;
    size_t          refused;    /* ACKs saying a receipt was refused */
};

static void s_sim_send (s_simw_t *w, Ak__Envelope *env)
{
    /* a full pipe or a gone peer is what the fault tests provoke: the
       receipt stays held and goes again after the next HELLO */
    ak_envelope_send (w->sock, NULL, 0, env);
}

static void s_sim_hello (s_simw_t *w)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dev = AK__DEVICE__INIT, *devs[1] = { &dev };
    dev.backend = "host";
    dev.device_class = "host";
    dev.slots = 1;
    h.worker_id = w->id;
    h.host = "fault-test";
    h.pid = (uint32_t) getpid ();
    h.devices = devs;
    h.n_devices = 1;
    h.slots = 1;
    h.prefetch = 1;
    h.heartbeat_ms = w->heartbeat_ms;
    /* it holds the tasks it sits on and those whose receipts wait for an
       ACK, as akworker says */
    Ak__TaskRef *refs = ak_calloc (w->nheld + 1, sizeof *refs);
    Ak__TaskRef **ptrs = ak_calloc (w->nheld + 1, sizeof *ptrs);
    for (size_t i = 0; i < w->nheld; i++) {
        ak__task_ref__init (&refs[i]);
        refs[i].task_id = w->held[i].task_id;
        refs[i].attempt = w->held[i].attempt;
        ptrs[h.n_running++] = &refs[i];
    }
    h.running = ptrs;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    s_sim_send (w, &env);
    free (refs);
    free (ptrs);
    for (size_t i = 0; i < w->nheld; i++)
        if (w->held[i].data && zmq_send (zsock_resolve (w->sock), w->held[i].data, w->held[i].size,
                                         ZMQ_DONTWAIT) < 0)
            break;
}

static s_held_t *s_sim_hold (s_simw_t *w, const char *task_id, uint32_t attempt)
{
    if (w->nheld == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 8;
        w->held = ak_realloc (w->held, w->cap * sizeof *w->held);
    }
    s_held_t *h = &w->held[w->nheld++];
    memset (h, 0, sizeof *h);
    h->task_id = ak_strdup (task_id);
    h->attempt = attempt;
    return h;
}

ak_fault_sim_t *ak_fault_sim_new (const char *endpoint, int workers, const char *prefix,
                                  uint32_t heartbeat_ms)
{
    ak_fault_sim_t *self = ak_calloc (1, sizeof *self);
    self->endpoint = ak_strdup (endpoint);
    self->n = workers;
    self->w = ak_calloc ((size_t) workers, sizeof *self->w);
    for (int i = 0; i < workers; i++) {
        s_simw_t *w = &self->w[i];
        snprintf (w->id, sizeof w->id, "%s-%d", prefix, i + 1);
        w->heartbeat_ms = heartbeat_ms;
        w->sock = ak_fault_dealer (endpoint);
        s_sim_hello (w);
        w->next_hb = ak_fault_now_ms () + 200;
    }
    return self;
}

static void s_sim_assign (ak_fault_sim_t *self, s_simw_t *w, const Ak__Assign *a)
{
    for (size_t i = 0; i < w->nheld; i++)
        if (w->held[i].attempt == a->attempt && strcmp (w->held[i].task_id, a->task_id) == 0)
            return;
    const char *status = self->status_fn ? self->status_fn (a, self->status_arg) : "ok";
    if (!status) {
        s_sim_hold (w, a->task_id, a->attempt);     /* held silently, listed in HELLO */
        return;
    }
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__TaskStarted st = AK__TASK_STARTED__INIT;
    st.task_id = a->task_id;
    st.attempt = a->attempt;
    env.body_case = AK__ENVELOPE__BODY_STARTED;
    env.started = &st;
    s_sim_send (w, &env);

    Ak__Receipt r = AK__RECEIPT__INIT;
    r.task_id = a->task_id;
    r.attempt = a->attempt;
    r.kind = a->kind;
    r.op = a->op;
    r.candidate_name = a->candidate_name;
    r.status = (char *) status;
    r.reason = "fault test: simulated receipt";
    Ak__Envelope renv = AK__ENVELOPE__INIT;
    renv.body_case = AK__ENVELOPE__BODY_RECEIPT;
    renv.receipt = &r;
    s_held_t *h = s_sim_hold (w, a->task_id, a->attempt);
    assert_int_equal (ak_envelope_pack (&renv, &h->data, &h->size), 0);
    zmq_send (zsock_resolve (w->sock), h->data, h->size, ZMQ_DONTWAIT);
}

static void s_sim_ack (ak_fault_sim_t *self, s_simw_t *w, const Ak__Ack *ack)
{
    if (ack->refused && *ack->refused)
        self->refused++;
    else if (self->nacks == self->cap) {
        self->cap = self->cap ? self->cap * 2 : 256;
        self->acks = ak_realloc (self->acks, self->cap * sizeof *self->acks);
    }
    if (!ack->refused || !*ack->refused) {
        ak_fault_ack_t *a = &self->acks[self->nacks++];
        snprintf (a->task_id, sizeof a->task_id, "%s", ack->task_id);
        snprintf (a->receipt_id, sizeof a->receipt_id, "%s", ack->receipt_id);
        a->attempt = ack->attempt;
        a->duplicate = ack->duplicate;
    }
    for (size_t i = 0; i < w->nheld; i++)
        if (w->held[i].attempt == ack->attempt && strcmp (w->held[i].task_id, ack->task_id) == 0) {
            free (w->held[i].task_id);
            free (w->held[i].data);
            w->held[i] = w->held[--w->nheld];
            return;
        }
}

static void s_sim_recv (ak_fault_sim_t *self, s_simw_t *w)
{
    for (int k = 0; k < 256; k++) {
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        if (zmq_msg_recv (&msg, zsock_resolve (w->sock), ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&msg);
            return;
        }
        Ak__Envelope *env = NULL;
        ak_err_t err = { 0 };
        int rc = ak_envelope_unpack (zmq_msg_data (&msg), zmq_msg_size (&msg), AK_MAX_MSG_SIZE, &env, &err);
        zmq_msg_close (&msg);
        if (rc)
            fail_msg ("%s: the coordinator sent what does not decode: %s", w->id, err.msg);
        if (env->body_case == AK__ENVELOPE__BODY_ASSIGN)
            s_sim_assign (self, w, env->assign);
        else if (env->body_case == AK__ENVELOPE__BODY_ACK)
            s_sim_ack (self, w, env->ack);
        else if (env->body_case == AK__ENVELOPE__BODY_DISCONNECT) {
            s_sim_hello (w);
        }
        ak_envelope_free (&env);
    }
}

void ak_fault_sim_run (ak_fault_sim_t *self, int ms, bool (*until) (void *arg), void *arg)
{
    uint64_t end = ak_fault_now_ms () + (uint64_t) ms;
    zmq_pollitem_t *items = ak_calloc ((size_t) self->n, sizeof *items);
    while (ak_fault_now_ms () < end && !(until && until (arg))) {
        for (int i = 0; i < self->n; i++)
            items[i] = (zmq_pollitem_t) { zsock_resolve (self->w[i].sock), 0, ZMQ_POLLIN, 0 };
        zmq_poll (items, self->n, 20);
        uint64_t now = ak_fault_now_ms ();
        for (int i = 0; i < self->n; i++) {
            s_simw_t *w = &self->w[i];
            if (items[i].revents & ZMQ_POLLIN)
                s_sim_recv (self, w);
            if (now >= w->next_hb) {
                Ak__Envelope env = AK__ENVELOPE__INIT;
                Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
                env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
                env.heartbeat = &hb;
                s_sim_send (w, &env);
                w->next_hb = now + 200;
            }
        }
    }
    free (items);
}

void ak_fault_sim_set_status (ak_fault_sim_t *self, ak_fault_status_fn *fn, void *arg)
{
    self->status_fn = fn;
    self->status_arg = arg;
}

void ak_fault_sim_rehello (ak_fault_sim_t *self)
{
    for (int i = 0; i < self->n; i++) {
        s_simw_t *w = &self->w[i];
        /* it lost the tasks it sat on (its receipts it still has) */
        for (size_t j = 0; j < w->nheld;)
            if (!w->held[j].data) {
                free (w->held[j].task_id);
                w->held[j] = w->held[--w->nheld];
            }
            else
                j++;
        s_sim_hello (w);
    }
}

size_t ak_fault_sim_refused (ak_fault_sim_t *self)
{
    return self->refused;
}

size_t ak_fault_sim_acks (ak_fault_sim_t *self, const ak_fault_ack_t **acks_p)
{
    *acks_p = self->acks;
    return self->nacks;
}

void ak_fault_sim_destroy (ak_fault_sim_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ak_fault_sim_t *self = *self_p;
    for (int i = 0; i < self->n; i++) {
        s_simw_t *w = &self->w[i];
        zsock_destroy (&w->sock);
        for (size_t j = 0; j < w->nheld; j++) {
            free (w->held[j].task_id);
            free (w->held[j].data);
        }
        free (w->held);
    }
    free (self->w);
    free (self->acks);
    free (self->endpoint);
    free (self);
    *self_p = NULL;
}

// ============================================================ raw workers

zsock_t *ak_fault_raw_new (const char *endpoint)
{
    return ak_fault_dealer (endpoint);
}

static void s_raw_send (zsock_t *s, Ak__Envelope *env)
{
    assert_int_equal (ak_envelope_send (s, NULL, 0, env), 0);
}

void ak_fault_raw_send (zsock_t *s, Ak__Envelope *env)
{
    s_raw_send (s, env);
}

void ak_fault_raw_hello (zsock_t *s, const char *worker_id, const char *device_class, uint32_t slots,
                         uint32_t prefetch, Ak__TaskRef **refs, size_t n)
{
    ak_fault_raw_hello_from (s, "fault-test", (uint32_t) getpid (), worker_id, device_class, slots, prefetch,
                             refs, n);
}

void ak_fault_raw_hello_from (zsock_t *s, const char *host, uint32_t pid, const char *worker_id,
                              const char *device_class, uint32_t slots, uint32_t prefetch, Ak__TaskRef **refs,
                              size_t n)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dev = AK__DEVICE__INIT, *devs[1] = { &dev };
    dev.backend = "host";
    dev.device_class = (char *) device_class;
    dev.slots = slots;
    h.worker_id = (char *) worker_id;
    h.host = (char *) host;
    h.pid = pid;
    h.devices = devs;
    h.n_devices = 1;
    h.slots = slots;
    h.prefetch = prefetch;
    h.heartbeat_ms = 60000;         /* it speaks when told: never dead for silence in a test */
    h.running = refs;
    h.n_running = n;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    s_raw_send (s, &env);
}

/*  The next message on s before until (monotonic ms) whose kind is kind,
    or (kind 0) that is not a HEARTBEAT; others are skipped.  NULL when
    none came in time. */
static Ak__Envelope *s_raw_until (zsock_t *s, Ak__Envelope__BodyCase kind, uint64_t until)
{
    while (ak_fault_now_ms () < until) {
        zmq_pollitem_t item = { zsock_resolve (s), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 50) <= 0)
            continue;
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        assert_true (zmq_msg_recv (&msg, zsock_resolve (s), 0) >= 0);
        Ak__Envelope *env = NULL;
        ak_err_t err = { 0 };
        int rc = ak_envelope_unpack (zmq_msg_data (&msg), zmq_msg_size (&msg), AK_MAX_MSG_SIZE, &env, &err);
        zmq_msg_close (&msg);
        if (rc)
            fail_msg ("the coordinator sent what does not decode: %s", err.msg);
        if (kind ? env->body_case == kind : env->body_case != AK__ENVELOPE__BODY_HEARTBEAT)
            return env;
        ak_envelope_free (&env);
    }
    return NULL;
}

Ak__Envelope *ak_fault_raw_expect (zsock_t *s, Ak__Envelope__BodyCase kind, int timeout_ms)
{
    return s_raw_until (s, kind, ak_fault_now_ms () + (uint64_t) timeout_ms);
}

Ak__Envelope *ak_fault_raw_next (zsock_t *s, int timeout_ms)
{
    return s_raw_until (s, AK__ENVELOPE__BODY__NOT_SET, ak_fault_now_ms () + (uint64_t) timeout_ms);
}

void ak_fault_raw_started (zsock_t *s, const char *task_id, uint32_t attempt)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__TaskStarted st = AK__TASK_STARTED__INIT;
    st.task_id = (char *) task_id;
    st.attempt = attempt;
    env.body_case = AK__ENVELOPE__BODY_STARTED;
    env.started = &st;
    s_raw_send (s, &env);
}

void ak_fault_raw_receipt (zsock_t *s, const Ak__Assign *a, uint32_t attempt, double speedup, size_t extra_log)
{
    Ak__Receipt r = AK__RECEIPT__INIT;
    r.task_id = a->task_id;
    r.attempt = attempt;
    r.kind = a->kind;
    r.op = a->op;
    r.candidate_name = a->candidate_name;
    r.status = "ok";
    char *log = ak_calloc (1, extra_log + 1);
    memset (log, 'x', extra_log);
    r.compile_log = log;
    Ak__WorkloadTiming *t = ak_calloc (a->n_workloads + 1, sizeof *t);
    Ak__WorkloadTiming **tp = ak_calloc (a->n_workloads + 1, sizeof *tp);
    Ak__Stats base = AK__STATS__INIT, cand = AK__STATS__INIT;
    base.median_us = 100.0;
    cand.median_us = 100.0 / speedup;
    for (size_t i = 0; i < a->n_workloads; i++) {
        ak__workload_timing__init (&t[i]);
        t[i].workload = a->workloads[i];
        t[i].baseline = &base;
        t[i].candidate = &cand;
        t[i].speedup = speedup;
        t[i].speedup_noise = 0.01;
        tp[i] = &t[i];
    }
    r.timings = tp;
    r.n_timings = a->n_workloads;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = &r;
    s_raw_send (s, &env);
    free (t);
    free (tp);
    free (log);
}

int ak_fault_occurrences (const char *path, const char *needle)
{
    char *data = NULL;
    size_t len = 0;
    if (ak_file_read (path, 64u << 20, &data, &len, NULL) != 0)
        return -1;
    int n = 0;
    for (const char *p = data; (p = strstr (p, needle)); p += strlen (needle))
        n++;
    free (data);
    return n;
}
