/*  coordinator/instrument.c: watching the loop (see coord_private.h).

    Each wake-up's record (loopstat.h): coord.c marks the phases, the other
    files count their work in self->wake, and what the existing counters
    already count (assigns, acks, heartbeats, round checks, log flushes) is
    taken as the difference between the wake-up's start and end.

    The metrics snapshot: every opts.metrics_ms the tick renders the
    coordinator's state as Prometheus text (docs/operations.md lists the
    families) and publishes it to the endpoint, which never makes the loop
    wait (metrics_http.h).  Rendering is bounded by what is open: workers
    by class, queued tasks of open batches by class, fixed counter sets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord_private.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"
#include "util.h"

enum { S_ASSIGNS = 0, S_ACKS, S_HEARTBEATS, S_ROUNDS, S_FLUSHES, S_FLUSH_BYTES, S_FLUSH_NS };

// ================================================================ wake-ups

uint32_t coord_us_since (uint64_t t0)
{
    uint64_t us = (ak_clock_mono_ns () - t0) / 1000;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t) us;
}

static void s_base (ak_coord_t *self, uint64_t b[8])
{
    b[S_ASSIGNS] = self->counters.assigns;
    b[S_ACKS] = self->counters.acks;
    b[S_HEARTBEATS] = self->counters.heartbeats;
    b[S_ROUNDS] = ak_intake_stats (self->intake)->round_checks;
    ak_log_flush_stats (&b[S_FLUSHES], &b[S_FLUSH_BYTES], &b[S_FLUSH_NS]);
}

static uint32_t s_delta (const uint64_t now[8], const uint64_t base[8], int i)
{
    uint64_t d = now[i] - base[i];
    return d > UINT32_MAX ? UINT32_MAX : (uint32_t) d;
}

void coord_wake_begin (ak_coord_t *self)
{
    memset (&self->wake, 0, sizeof self->wake);
    self->wake.wall_ms = ak_clock_wall_ms ();
    self->wake_ns = ak_clock_mono_ns ();
    s_base (self, self->wake_base);
    self->wake_open = true;
}

void coord_wake_end (ak_coord_t *self)
{
    if (!self->wake_open)
        return;
    uint64_t now[8];
    s_base (self, now);
    ak_wake_t *w = &self->wake;
    w->assigns = s_delta (now, self->wake_base, S_ASSIGNS);
    w->acks = s_delta (now, self->wake_base, S_ACKS);
    w->heartbeats = s_delta (now, self->wake_base, S_HEARTBEATS);
    w->round_checks = s_delta (now, self->wake_base, S_ROUNDS);
    w->log_flushes = s_delta (now, self->wake_base, S_FLUSHES);
    w->log_bytes = s_delta (now, self->wake_base, S_FLUSH_BYTES);
    w->log_us = s_delta (now, self->wake_base, S_FLUSH_NS) / 1000;
    w->total_us = coord_us_since (self->wake_ns);
    ak_loopstat_record (self->loopstat, w);
    self->wake_open = false;
}

void coord_wake_commit (ak_coord_t *self, uint64_t loop_ns, uint64_t commit_ns, size_t receipts)
{
    self->wake.commits++;
    self->wake.commit_receipts += (uint32_t) receipts;
    self->wake.commit_us += (uint32_t) (loop_ns / 1000);
    ak_loopstat_commit (self->loopstat, commit_ns / 1000, receipts);
    /* an exponential average over about 8 commits: where they go (settle.c) */
    uint64_t us = commit_ns / 1000;
    self->commit_avg_us = self->commit_avg_us ? (self->commit_avg_us * 7 + us) / 8 : us;
}

// ================================================================= metrics

/* Counts per (class, state) or (class, batch): a short list, looked up
   by name (a handful of classes). */
typedef struct {
    const char *a, *b;
    uint64_t    n;
} s_pair_t;

typedef struct {
    s_pair_t *v;
    size_t    n, cap;
} s_pairs_t;

static void s_count (s_pairs_t *p, const char *a, const char *b, uint64_t n)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp (p->v[i].a, a) == 0 && strcmp (p->v[i].b, b) == 0) {
            p->v[i].n += n;
            return;
        }
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        p->v = ak_realloc (p->v, p->cap * sizeof *p->v);
    }
    p->v[p->n++] = (s_pair_t) { a, b, n };
}

static void s_workers (ak_coord_t *self, ak_mtext_t *t)
{
    s_pairs_t p = { 0 };
    for (ak_worker_t *w = ak_registry_first (self->registry); w; w = ak_registry_next (self->registry)) {
        const char *state = w->alive ? "alive" : "dead";
        if (!w->nclasses)
            s_count (&p, "none", state, 1);
        for (size_t i = 0; i < w->nclasses; i++)
            s_count (&p, w->classes[i], state, 1);
    }
    ak_mtext_family (t, "akcoord_workers", "gauge", "Workers known, by device class and liveness "
                     "(a worker with devices of two classes counts in both).");
    for (size_t i = 0; i < p.n; i++)
        ak_mtext_u64 (t, "akcoord_workers", p.v[i].n, "class", p.v[i].a, "state", p.v[i].b, NULL);
    free (p.v);
}

/* A batch of one target class has its queued count at hand; only one of
   several classes costs a pass over its tasks. */
static void s_queues (ak_coord_t *self, ak_mtext_t *t)
{
    s_pairs_t p = { 0 };
    for (ak_batch_t *b = ak_sched_batch_first (self->sched); b; b = ak_sched_batch_next (self->sched)) {
        if (b->state != AK_BS_OPEN || b->counts[AK_TS_QUEUED] == 0)
            continue;
        if (b->ntargets == 1) {
            s_count (&p, b->targets[0], b->batch_id, b->counts[AK_TS_QUEUED]);
            continue;
        }
        for (size_t i = 0; i < b->ntasks; i++)
            if (b->tasks[i]->state == AK_TS_QUEUED)
                s_count (&p, b->tasks[i]->device_class, b->batch_id, 1);
    }
    ak_mtext_family (t, "akcoord_queue_depth", "gauge", "Queued tasks by device class and batch (open "
                     "batches with queued tasks only).");
    for (size_t i = 0; i < p.n; i++)
        ak_mtext_u64 (t, "akcoord_queue_depth", p.v[i].n, "class", p.v[i].a, "batch", p.v[i].b, NULL);
    free (p.v);
}

static void s_counter (ak_mtext_t *t, const char *name, const char *help, uint64_t v)
{
    ak_mtext_family (t, name, "counter", help);
    ak_mtext_u64 (t, name, v, NULL);
}

static void s_gauge (ak_mtext_t *t, const char *name, const char *help, double v)
{
    ak_mtext_family (t, name, "gauge", help);
    ak_mtext_dbl (t, name, v, NULL);
}

static void s_per_ep (ak_mtext_t *t, const char *name, const char *help, const uint64_t v[AK_EP_COUNT])
{
    ak_mtext_family (t, name, "counter", help);
    for (int ep = 0; ep < AK_EP_COUNT; ep++)
        ak_mtext_u64 (t, name, v[ep], "endpoint", coord_ep_names[ep], NULL);
}

static void s_render (ak_coord_t *self, uint64_t now, ak_mtext_t *t)
{
    const ak_counters_t *c = &self->counters;
    const ak_intake_stats_t *is = ak_intake_stats (self->intake);
    ak_mtext_family (t, "akcoord_build_info", "gauge", "The akcoord version (always 1).");
    ak_mtext_u64 (t, "akcoord_build_info", 1, "version", AK_VERSION, NULL);
    s_gauge (t, "akcoord_uptime_seconds", "Seconds since akcoord started.", (now - self->start) / 1000.0);
    s_workers (self, t);
    s_queues (self, t);
    ak_mtext_family (t, "akcoord_tasks", "gauge", "Tasks of every batch by state.");
    for (int s = 0; s < AK_TS_COUNT; s++)
        ak_mtext_u64 (t, "akcoord_tasks", ak_sched_count (self->sched, (ak_tstate_t) s),
                      "state", ak_tstate_name ((ak_tstate_t) s), NULL);
    s_gauge (t, "akcoord_batches_open", "Batches not complete nor cancelled.",
             (double) ak_sched_open_batches (self->sched));

    ak_mtext_family (t, "akcoord_receipts_accepted_total", "counter", "Receipts accepted (one per task "
                     "attempt), by status (unknown statuses count as other).");
    for (int s = 0; s < AK_STATUS_COUNT; s++)
        ak_mtext_u64 (t, "akcoord_receipts_accepted_total", is->by_status[s], "status", ak_metrics_statuses[s],
                      NULL);
    s_counter (t, "akcoord_receipts_duplicate_total", "Receipts stored as duplicates.", is->duplicate);
    s_counter (t, "akcoord_receipts_dropped_total", "Receipts not stored after a failed commit (re-sent).",
               is->dropped);
    s_gauge (t, "akcoord_receipts_staged", "Receipts waiting for their group commit.",
             (double) ak_intake_staged (self->intake));
    if (self->rate_ms && now > self->rate_ms)
        self->receipt_rate = (double) (is->accepted - self->rate_accepted) * 1000.0 / (double) (now - self->rate_ms);
    self->rate_ms = now;
    self->rate_accepted = is->accepted;
    s_gauge (t, "akcoord_receipts_per_second", "Receipts accepted per second since the previous snapshot.",
             self->receipt_rate);
    s_counter (t, "akcoord_commits_total", "Group commits that wrote.", is->commits);
    s_counter (t, "akcoord_commit_failures_total", "Commits that failed.", is->commit_failures);
    s_gauge (t, "akcoord_commits_failing", "Commits failed in a row now (0: healthy).", (double) is->failing);
    s_counter (t, "akcoord_store_full_total", "Commits that failed for space.", is->store_full);
    s_counter (t, "akcoord_store_map_grows_total", "Times the LMDB map was doubled.", is->map_grows);
    s_gauge (t, "akcoord_store_map_size_bytes", "The LMDB map's size.", (double) ak_store_map_size (self->store));
    s_gauge (t, "akcoord_store_map_used_bytes", "Bytes of the map in use (up to the last page written).",
             (double) ak_store_map_used (self->store));
    s_gauge (t, "akcoord_store_map_max_bytes", "The map's growth limit (--map-max).", (double) is->map_max);

    ak_mtext_family (t, "akcoord_client_requests_total", "counter", "Client requests by verb and result "
                     "(ok, error, refused: not the key's role, busy: the queue was full).");
    static const char *const results[AK_CR_COUNT] = { "ok", "error", "refused", "busy" };
    for (int v = 0; v < AK_CLIENT_VERB_SLOTS; v++)
        for (int r = 0; r < AK_CR_COUNT; r++)
            if (c->client_requests[v][r] && ak_client_verb_name (v))
                ak_mtext_u64 (t, "akcoord_client_requests_total", c->client_requests[v][r],
                              "verb", ak_client_verb_name (v), "result", results[r], NULL);
    s_per_ep (t, "akcoord_messages_total", "Well-formed messages handled, by endpoint.", c->messages);
    s_per_ep (t, "akcoord_rejected_total", "Messages rejected (malformed, wrong version or body ...).",
              c->rejected);
    s_per_ep (t, "akcoord_connections_accepted_total", "Transport connections accepted.", c->connected);
    s_per_ep (t, "akcoord_connections_closed_total", "Transport connections closed.", c->disconnected);
    s_counter (t, "akcoord_peers_dropped_total", "Peers dropped after too many malformed frames "
               "(--malformed-max).", c->peers_dropped);
    s_per_ep (t, "akcoord_auth_refused_total", "CURVE handshakes refused, by endpoint.", c->auth_refused);
    s_counter (t, "akcoord_auth_accepted_total", "CURVE handshakes accepted.", c->auth_accepted);
    s_counter (t, "akcoord_unauthorised_total", "Messages on a connection whose key was revoked.",
               c->unauthorised);
    s_counter (t, "akcoord_workers_revoked_total", "Workers dropped: their key was revoked.", c->workers_revoked);
    s_counter (t, "akcoord_hellos_refused_total", "Worker registrations refused.", c->hellos_refused);
    s_counter (t, "akcoord_receipts_refused_total", "Receipts refused: not from the task's holder.",
               c->receipts_refused);
    s_counter (t, "akcoord_claims_refused_total", "Task claims refused (HELLO.running, STARTED).",
               c->claims_refused);
    s_counter (t, "akcoord_receipts_too_big_total", "Receipts past the size limits.", c->receipts_too_big);
    s_counter (t, "akcoord_assigns_total", "ASSIGNs sent.", c->assigns);
    s_counter (t, "akcoord_acks_total", "ACKs sent.", c->acks);
    s_counter (t, "akcoord_heartbeats_total", "HEARTBEATs sent.", c->heartbeats);
    s_counter (t, "akcoord_requeued_total", "Tasks re-queued.", c->requeued);
    s_counter (t, "akcoord_leases_expired_total", "Leases that expired.", c->leases_expired);
    s_counter (t, "akcoord_workers_died_total", "Workers declared dead.", c->workers_died);
    s_counter (t, "akcoord_send_failures_total", "Sends that failed.", c->send_failures);
    s_counter (t, "akcoord_metrics_scrapes_total", "Scrapes of this endpoint answered.",
               ak_metrics_srv_scrapes (self->opts.metrics));
    ak_loopstat_render (self->loopstat, t);
}

void coord_metrics_tick (ak_coord_t *self, uint64_t now)
{
    if (!self->opts.metrics || now < self->next_metrics)
        return;
    self->next_metrics = now + (self->opts.metrics_ms ? self->opts.metrics_ms : 1000);
    uint64_t t0 = ak_clock_mono_ns ();
    ak_mtext_t t;
    ak_mtext_init (&t);
    s_render (self, now, &t);
    uint32_t us = coord_us_since (t0);
    ak_mtext_family (&t, "akcoord_metrics_render_seconds", "gauge", "Time the loop took to render this snapshot.");
    ak_mtext_dbl (&t, "akcoord_metrics_render_seconds", us / 1e6, NULL);
    size_t len = 0;
    char *text = ak_mtext_take (&t, &len);
#ifndef NDEBUG
    ak_metrics_check_or_abort ("akcoord", text);
#endif
    ak_metrics_srv_publish (self->opts.metrics, &text, len);
    self->wake.metrics_us += coord_us_since (t0);
}
