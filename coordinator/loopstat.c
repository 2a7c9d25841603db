/*  coordinator/loopstat.c: the loop's wake-up histogram and the ring of
    slow wake-ups (see loopstat.h). */
#include "loopstat.h"
#include <stdlib.h>
#include <string.h>
#include "util.h"

/* receipts per group commit */
static const double s_size_buckets[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096 };

struct ak_loopstat {
    uint32_t  slow_us;                  /* 0: no ring */
    ak_hist_t wake;                     /* ms */
    ak_hist_t commit;                   /* ms */
    ak_hist_t commit_size;              /* receipts */
    ak_hist_t ack;                      /* ms, receipt staged -> its ACK sent */
    uint64_t  slow;
    uint32_t  max_us;
    ak_wake_t ring[AK_LOOPSTAT_RING];
    size_t    next;                     /* the slot the next slow one takes */
    size_t    kept;                     /* slots filled, at most AK_LOOPSTAT_RING */
};

ak_loopstat_t *ak_loopstat_new (uint32_t slow_ms)
{
    ak_loopstat_t *self = ak_calloc (1, sizeof *self);
    self->slow_us = slow_ms > UINT32_MAX / 1000 ? UINT32_MAX : slow_ms * 1000;
    ak_hist_init (&self->wake, ak_metrics_ms_buckets, ak_metrics_ms_nbuckets);
    ak_hist_init (&self->commit, ak_metrics_ms_buckets, ak_metrics_ms_nbuckets);
    ak_hist_init (&self->commit_size, s_size_buckets, sizeof s_size_buckets / sizeof s_size_buckets[0]);
    ak_hist_init (&self->ack, ak_metrics_ms_buckets, ak_metrics_ms_nbuckets);
    return self;
}

void ak_loopstat_destroy (ak_loopstat_t **self_p)
{
    if (self_p && *self_p) {
        free (*self_p);
        *self_p = NULL;
    }
}

void ak_loopstat_record (ak_loopstat_t *self, const ak_wake_t *w)
{
    ak_hist_observe (&self->wake, w->total_us / 1000.0);
    if (w->total_us > self->max_us)
        self->max_us = w->total_us;
    if (self->slow_us && w->total_us >= self->slow_us) {
        self->slow++;
        self->ring[self->next] = *w;
        self->next = (self->next + 1) % AK_LOOPSTAT_RING;
        if (self->kept < AK_LOOPSTAT_RING)
            self->kept++;
    }
}

void ak_loopstat_commit (ak_loopstat_t *self, uint64_t us, size_t receipts)
{
    ak_hist_observe (&self->commit, (double) us / 1000.0);
    ak_hist_observe (&self->commit_size, (double) receipts);
}

void ak_loopstat_ack (ak_loopstat_t *self, uint64_t us)
{
    ak_hist_observe (&self->ack, (double) us / 1000.0);
}

uint64_t ak_loopstat_wakeups (const ak_loopstat_t *self)
{
    return self->wake.count;
}

uint64_t ak_loopstat_slow (const ak_loopstat_t *self)
{
    return self->slow;
}

const ak_wake_t *ak_loopstat_slow_at (const ak_loopstat_t *self, size_t i)
{
    if (i >= self->kept)
        return NULL;
    return &self->ring[(self->next + AK_LOOPSTAT_RING - 1 - i) % AK_LOOPSTAT_RING];
}

static json_t *s_wake_json (const ak_wake_t *w)
{
    json_t *j = json_object ();
#define S_SET(name, value) json_object_set_new (j, name, json_integer ((json_int_t) (value)))
    S_SET ("wall_ms", w->wall_ms);
    S_SET ("total_us", w->total_us);
    S_SET ("worker_msgs", w->msgs[AK_EP_WORKERS]);
    S_SET ("worker_us", w->recv_us[AK_EP_WORKERS]);
    S_SET ("client_msgs", w->msgs[AK_EP_CLIENTS]);
    S_SET ("client_recv_us", w->recv_us[AK_EP_CLIENTS]);
    S_SET ("monitor_events", w->monitor_events);
    S_SET ("clients_served", w->clients_served);
    S_SET ("clients_us", w->clients_us);
    S_SET ("tick", w->tick);
    S_SET ("tick_us", w->tick_us);
    S_SET ("heartbeats", w->heartbeats);
    S_SET ("reaped", w->reaped);
    S_SET ("expired", w->expired);
    S_SET ("settled", w->settled);
    S_SET ("settle_us", w->settle_us);
    S_SET ("round_checks", w->round_checks);
    S_SET ("commits", w->commits);
    S_SET ("commit_receipts", w->commit_receipts);
    S_SET ("commit_us", w->commit_us);
    S_SET ("assigns", w->assigns);
    S_SET ("dispatch_us", w->dispatch_us);
    S_SET ("acks", w->acks);
    S_SET ("log_flushes", w->log_flushes);
    S_SET ("log_bytes", w->log_bytes);
    S_SET ("log_us", w->log_us);
    S_SET ("metrics_us", w->metrics_us);
#undef S_SET
    return j;
}

json_t *ak_loopstat_json (const ak_loopstat_t *self)
{
    json_t *slow = json_array ();
    for (size_t i = 0; i < self->kept; i++)
        json_array_append_new (slow, s_wake_json (ak_loopstat_slow_at (self, i)));
    return json_pack ("{s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o}",
                      "slow_threshold_ms", (json_int_t) (self->slow_us / 1000),
                      "wakeups", (json_int_t) self->wake.count, "slow_wakeups", (json_int_t) self->slow,
                      "max_us", (json_int_t) self->max_us,
                      "wakeup_ms", ak_hist_json (&self->wake), "commit_ms", ak_hist_json (&self->commit),
                      "commit_receipts", ak_hist_json (&self->commit_size),
                      "receipt_ack_ms", ak_hist_json (&self->ack), "slow", slow);
}

void ak_loopstat_render (const ak_loopstat_t *self, ak_mtext_t *t)
{
    ak_mtext_family (t, "akcoord_loop_wakeup_seconds", "histogram",
                     "Duration of the coordinator loop's wake-ups (poll return to the next poll).");
    ak_mtext_hist (t, "akcoord_loop_wakeup_seconds", &self->wake, 0.001, NULL);
    ak_mtext_family (t, "akcoord_loop_slow_wakeups_total", "counter",
                     "Wake-ups over the slow threshold (akctl stats --json: loop.slow lists the last ones).");
    ak_mtext_u64 (t, "akcoord_loop_slow_wakeups_total", self->slow, NULL);
    ak_mtext_family (t, "akcoord_loop_slow_threshold_seconds", "gauge", "The slow wake-up threshold "
                     "(--slow-wakeup-ms; 0: no ring).");
    ak_mtext_dbl (t, "akcoord_loop_slow_threshold_seconds", self->slow_us / 1e6, NULL);
    ak_mtext_family (t, "akcoord_loop_wakeup_max_seconds", "gauge", "The longest wake-up since the start.");
    ak_mtext_dbl (t, "akcoord_loop_wakeup_max_seconds", self->max_us / 1e6, NULL);
    ak_mtext_family (t, "akcoord_commit_seconds", "histogram",
                     "Latency of the group commits that wrote (one LMDB write transaction each).");
    ak_mtext_hist (t, "akcoord_commit_seconds", &self->commit, 0.001, NULL);
    ak_mtext_family (t, "akcoord_commit_receipts", "histogram", "Receipts per group commit that wrote.");
    ak_mtext_hist (t, "akcoord_commit_receipts", &self->commit_size, 1.0, NULL);
    ak_mtext_family (t, "akcoord_receipt_ack_seconds", "histogram",
                     "From the loop staging a receipt to its ACK sent (after its commit held).");
    ak_mtext_hist (t, "akcoord_receipt_ack_seconds", &self->ack, 0.001, NULL);
}
