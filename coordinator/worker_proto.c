/*  coordinator/worker_proto.c: the worker protocol (docs/protocol.md, see
    coord_private.h): HELLO and the reconciliation of what a worker says it
    runs with what it holds, STARTED, RECEIPT (staged for the group commit),
    heartbeats and DISCONNECT; workers declared dead, and the tasks pinned
    to a worker that is gone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord_private.h"
#include "clock.h"
#include "envelope.h"
#include "log.h"
#include "receipt_limits.h"
#include "util.h"

// ============================================================ dead workers

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
void coord_reap_pinned (ak_coord_t *self, uint64_t now)
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
void coord_worker_dead (ak_coord_t *self, ak_worker_t *w, const char *why, uint64_t now)
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
           commit fails, coord_commit re-queues it (the worker is gone) */
        if (task && task->state == AK_TS_LEASED && task->worker_id
            && strcmp (task->worker_id, w->worker_id) == 0 && !ak_intake_pending (self->intake, id, w->worker_id))
            coord_requeue (self, task, reason, now);
    }
    zlistx_destroy (&ids);
    zhashx_purge (w->outstanding);
}

/* Drops worker w for good reason why: DISCONNECT with code, its tasks go back. */
void coord_drop_worker (ak_coord_t *self, ak_worker_t *w, Ak__DisconnectCode code, const char *why)
{
    if (!w || !w->alive)
        return;
    coord_send_disconnect_code (self, w->route, w->route_len, code, why);
    coord_worker_dead (self, w, why, ak_clock_mono_ms ());
}

// ================================================================ messages

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
            continue;               /* decided by its commit (coord_commit) */
        ak_worker_drop (w, id);
        if (task && task->state == AK_TS_LEASED && task->worker_id && strcmp (task->worker_id, w->worker_id) == 0) {
            char reason[200];
            snprintf (reason, sizeof reason, "worker %.128s registered again without it", w->worker_id);
            coord_requeue (self, task, reason, now);
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
        coord_refuse (self, &self->counters.claims_refused, route, len, why);
    }
    return kept;
}

static void s_on_hello (ak_coord_t *self, const void *route, size_t len, Ak__Envelope *env, uint64_t now)
{
    char why[512], reason[600];
    if (!ak_admit_hello_valid (env->hello, why, sizeof why)) {
        snprintf (reason, sizeof reason, "invalid HELLO: %s", why);
        coord_reject (self, AK_EP_WORKERS, route, len, reason);
        coord_send_disconnect_code (self, route, len, AK__DISCONNECT_CODE__DISCONNECT_INVALID_HELLO, reason);
        return;
    }
    bool retry = true;
    if (!ak_admit_hello (self->admit, self->registry, self->ring, env->hello, self->peer, now, &retry, why,
                         sizeof why)) {
        /* a refusal the same HELLO would meet again tells the worker to stop
           (DISCONNECT_ID_TAKEN); a rate limit or a full registry asks it to
           come back later */
        coord_refuse (self, &self->counters.hellos_refused, route, len, why);
        coord_send_disconnect_code (self, route, len,
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
    coord_send_heartbeat (self, w, now);        /* the welcome */
    coord_dispatch_worker (self, w, now);
}

static void s_on_started (ak_coord_t *self, ak_worker_t *w, const Ak__TaskStarted *st, uint64_t now)
{
    char why[400];
    ak_task_t *task = ak_sched_task (self->sched, st->task_id);
    if (!task) {
        snprintf (why, sizeof why, "STARTED from %s for unknown task '%.64s'", w->worker_id, st->task_id);
        coord_reject (self, AK_EP_WORKERS, w->route, w->route_len, why);
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
        coord_refuse (self, &self->counters.claims_refused, w->route, w->route_len, why);
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
    if (coord_send (self, AK_EP_WORKERS, w->route, w->route_len, &env) == 0)
        w->last_sent = ak_clock_mono_ms ();
}

static void s_on_receipt (ak_coord_t *self, ak_worker_t *w, Ak__Envelope *env, uint64_t now)
{
    ak_err_t err = { 0 };
    Ak__Receipt *r = env->receipt;
    env->receipt = NULL;
    env->body_case = AK__ENVELOPE__BODY__NOT_SET;
    /* only the holder of the task's current attempt delivers its receipt
       (unknown tasks and impossible attempts are the intake's to reject) */
    ak_task_t *task = ak_sched_task (self->sched, r->task_id);
    const uint32_t attempt = r->attempt;
    char why[512];
    if (task && r->attempt >= 1 && r->attempt <= task->attempt
        && !ak_admit_receipt (task, r->attempt, w, self->peer, why, sizeof why)) {
        coord_refuse (self, &self->counters.receipts_refused, w->route, w->route_len, why);
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
    else if ((raw ? ak_receipt_check (raw, rawlen, r->task_id, why, sizeof why)
                  : ak_receipt_check_msg (r, why, sizeof why)) != 0) {
        /* past the receipt limits: refused, and its holder's lease ends */
        coord_refuse (self, &self->counters.receipts_too_big, w->route, w->route_len, why);
        s_send_refused (self, w, r->task_id, r->attempt, why);
        if (task && task->state == AK_TS_LEASED && ak_worker_holds (w, task->task_id))
            coord_requeue (self, task, why, now);
        ak__receipt__free_unpacked (r, NULL);
        return;
    }
    else
        rc = ak_intake_stage_raw (self->intake, w->worker_id, &r, raw, rawlen, now, &err);
    if (rc)
        coord_reject (self, AK_EP_WORKERS, w->route, w->route_len, err.msg);
    /* its slot (only w may deliver the current attempt's receipt:
       ak_admit_receipt above; ak_worker_drop frees nothing w no longer
       holds): free at once while the store takes what is staged (the
       worker's next task then does not wait for the commit), else when
       the commit holding the receipt holds; a commit that fails holds it
       again (s_commit_outcome) */
    else if (task && task->attempt == attempt && ak_intake_room (self->intake))
        ak_worker_drop (w, task->task_id);
    if (ak_intake_full (self->intake))
        coord_commit_start (self);      /* nothing while one is in flight: the next takes them */
    coord_dispatch_worker (self, w, now);
}

/*  A heartbeat's timing figures (untrusted: a figure that is not a finite
    non-negative number leaves the last one in place). */
static void s_on_heartbeat (ak_worker_t *w, const Ak__Heartbeat *hb)
{
    const Ak__WorkerTiming *t = hb ? hb->timing : NULL;
    if (!t)
        return;
    double v[3] = { t->sampled_ms, t->busy_ms, t->exec_ms };
    for (int i = 0; i < 3; i++)
        if (!isfinite (v[i]) || v[i] < 0)
            return;
    w->sampled_ms = v[0];
    w->busy_ms = v[1];
    w->exec_ms = v[2];
    w->timing_tasks = t->tasks;
    w->timing_devices = t->devices ? t->devices : 1;
    w->has_timing = true;
}

void coord_on_worker (ak_coord_t *self, const void *route, size_t len, Ak__Envelope *env, uint64_t now)
{
    char why[160];
    Ak__Envelope__BodyCase body = env->body_case;
    bool worker_body = body == AK__ENVELOPE__BODY_HELLO || body == AK__ENVELOPE__BODY_HEARTBEAT
                    || body == AK__ENVELOPE__BODY_STARTED || body == AK__ENVELOPE__BODY_RECEIPT
                    || body == AK__ENVELOPE__BODY_DISCONNECT;
    if (!worker_body) {
        snprintf (why, sizeof why, "a %s is not a worker message", ak_envelope_kind (env));
        coord_reject (self, AK_EP_WORKERS, route, len, why);
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
                      coord_hex (route, len, hex, sizeof hex));
            coord_send_disconnect (self, route, len, "not registered: say HELLO");
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
            coord_worker_dead (self, w, why, now);
            break;
        default:                    /* HEARTBEAT: the touch, and its timing figures */
            s_on_heartbeat (w, env->heartbeat);
            break;
    }
}
