/*  coordinator/loopstat.h: what the coordinator's loop spends its time on
    (issue 24).

    The loop (coord.c) fills one ak_wake_t per wake-up, from zmq_poll's
    return to the log flush before the next poll, with counts and phase
    times, and hands it here.  Every wake-up goes into a histogram of
    durations; one that took at least the threshold (akcoord
    --slow-wakeup-ms, default 5) is copied, whole, into a ring of the last
    AK_LOOPSTAT_RING slow ones, so that a stall says what the loop did
    during it.  The group commit's duration and size go into histograms of
    their own, and so does each ACK's wait since its receipt was staged.
    Exported by `akctl stats --json` ("loop") and the metrics
    endpoint (akcoord_loop_*, akcoord_commit_*).

    Cost: a record is a copy of ~150 bytes and a short bucket scan; the
    loop adds a clock read per phase (docs/benchmarks.md measures it).

    Never: allocate or take a lock per wake-up; hold a pointer into the
    ring past the next record. */
#ifndef AK_LOOPSTAT_H
#define AK_LOOPSTAT_H
#include <jansson.h>
#include <stdint.h>
#include "counters.h"
#include "metrics.h"

#define AK_LOOPSTAT_RING        64
#define AK_LOOPSTAT_SLOW_MS     5

/* One wake-up: counts and the time of each phase (µs). */
typedef struct {
    uint64_t wall_ms;                   /* when it began (wall clock) */
    uint32_t total_us;                  /* poll return to the end of the log flush */
    uint32_t msgs[AK_EP_COUNT];         /* frames read per socket (messages, incl. rejected) */
    uint32_t recv_us[AK_EP_COUNT];      /* reading and handling them */
    uint32_t monitor_events;            /* socket monitor events drained */
    uint32_t clients_served;            /* client requests answered */
    uint32_t clients_us;
    uint32_t tick;                      /* 1 when the tick ran */
    uint32_t tick_us;                   /* the tick (heartbeats, reaping, settling ...) */
    uint32_t heartbeats;                /* heartbeats sent */
    uint32_t reaped;                    /* workers declared dead */
    uint32_t expired;                   /* leases expired and re-queued */
    uint32_t settled;                   /* batches settled (rounds, verdicts, winners) */
    uint32_t settle_us;
    uint32_t round_checks;              /* accepted tasks whose search round was checked */
    uint32_t commits;                   /* group commits that wrote */
    uint32_t commit_receipts;           /* receipts they stored */
    uint32_t commit_us;                 /* the loop's time in them: parked while the writer
                                           thread fills, the outcome; a synchronous one whole */
    uint32_t assigns;                   /* ASSIGNs sent */
    uint32_t dispatch_us;
    uint32_t acks;                      /* ACKs sent */
    uint32_t log_flushes;               /* held log lines written */
    uint32_t log_bytes;
    uint32_t log_us;
    uint32_t metrics_us;                /* rendering the metrics snapshot */
} ak_wake_t;

typedef struct ak_loopstat ak_loopstat_t;

/* slow_ms: the threshold of the ring (0: no ring, the histogram only). */
ak_loopstat_t *ak_loopstat_new (uint32_t slow_ms);
void ak_loopstat_destroy (ak_loopstat_t **self_p);

/* Counts wake-up w (copied). */
void ak_loopstat_record (ak_loopstat_t *self, const ak_wake_t *w);
/* Counts a group commit that wrote: its duration and receipts. */
void ak_loopstat_commit (ak_loopstat_t *self, uint64_t us, size_t receipts);
/* Counts an ACK sent us after the loop staged its receipt: the
   coordinator's share of a receipt's wait for its ACK (the time the frame
   waited in the socket before the loop read it is not in it). */
void ak_loopstat_ack (ak_loopstat_t *self, uint64_t us);

uint64_t ak_loopstat_wakeups (const ak_loopstat_t *self);
uint64_t ak_loopstat_slow (const ak_loopstat_t *self);
/* The i-th newest slow wake-up kept (0: the newest), NULL past the
   ring's content. */
const ak_wake_t *ak_loopstat_slow_at (const ak_loopstat_t *self, size_t i);

/* {"slow_threshold_ms", "wakeups", "slow_wakeups", "max_us",
   "wakeup_ms": histogram, "commit_ms": histogram, "commit_receipts":
   histogram, "receipt_ack_ms": histogram, "slow": [newest first: each
   wake-up's fields]}. */
json_t *ak_loopstat_json (const ak_loopstat_t *self);
/* The akcoord_loop_* and akcoord_commit_* families. */
void ak_loopstat_render (const ak_loopstat_t *self, ak_mtext_t *t);

#endif
