/*  ops/akload/akload.h: akload, a LOAD-TEST tool for akcoord.

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

    The files: main.c (options, the event loop, start and stop), sim.c (one
    simulated worker: its socket, link, protocol and tasks), stats.c (the
    statistics printed and written to --stats-json).

    Never: run or compile a kernel, send a receipt that could pass for a
    measurement (status ok, zero timings, the reason and backend above),
    block on one socket. */
#ifndef AKLOAD_H
#define AKLOAD_H
#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "blobcache.h"
#include "envelope.h"
#include "error.h"
#include "linkwatch.h"

#define AKL_REASON          "akload: load-test receipt, no kernel ran"
#define AKL_BACKEND         "loadtest"
#define AKL_MAX_ID          128           /* worker_id limit of the protocol */
#define AKL_MAX_CLASS       64
#define AKL_MAX_WORKERS     100000
#define AKL_DRAIN_MAX       64            /* messages per socket per wake-up */
#define AKL_POLL_MAX_MS     100
#define AKL_SCAN_MIN_MS     10            /* the heartbeat/liveness scan runs at most this often */
#define AKL_EVENTS          256           /* epoll events per wait */
#define AKL_HWM             10000
#define AKL_LINGER_MS       200
#define AKL_MAX_RESENDS     20            /* registrations a never-acked receipt is re-sent for */
#define AKL_PROGRESS_MS     10000
#define AKL_MON_BIT         0x80000000u   /* epoll data: a handshake monitor, not a socket */


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
    bool      warmup_from_registered;   /* --warmup-from registered */
    uint32_t  cooldown_s;
    char     *ready_file;
    char     *samples_file;
} akl_opts_t;

/* A task the worker holds: assigned, its receipt not built yet. */
typedef struct {
    Ak__Receipt *receipt;           /* built from the ASSIGN, times set when it finishes */
    uint64_t     assigned_ns;       /* monotonic: ASSIGN received */
    uint64_t     due_ms;            /* monotonic: receipt due (running) */
    uint64_t     started_wall;
    bool         running;
} akl_task_t;

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
} akl_pending_t;

typedef struct {
    char         id[AKL_MAX_ID + 1];
    void        *sock;              /* NULL: waiting to reconnect */
    ak_hsmon_t  *mon;               /* handshakes of sock */
    ak_liveness_t live;             /* the coordinator's, from the handshake on (link.h) */
    bool         registered;        /* heard once (anything but a DISCONNECT) */
    uint64_t     last_recv;         /* monotonic ms */
    uint64_t     last_send;
    uint64_t     next_connect;
    uint32_t     backoff_ms;
    akl_task_t    *tasks;
    size_t       ntasks, cap_tasks;
    akl_pending_t *pending;
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
} akl_sim_t;

/* A running task's due time, in the min-heap that wakes the loop for it. */
typedef struct {
    uint64_t  due_ms;
    uint32_t  sim;
} akl_due_t;

typedef struct {
    uint64_t assigns, started, receipts, resent, acks, acks_duplicate, acks_unknown, acks_refused;
    uint64_t hellos, reconnects, disconnects, silences, heartbeats_sent, heartbeats_recv;
    uint64_t handshakes, handshake_failures, refusals;
    uint64_t send_failures, rejected, abandoned, stale_assigns, blob_misses;
    uint64_t assign_bytes;          /* ASSIGN envelopes as received (with those refused as stale) */
    uint64_t window_acks;           /* acks after the warm-up */
} akl_counters_t;

typedef struct {
    akl_opts_t       opts;
    void          *ctx;
    akl_sim_t       *sims;
    char           host[256];
    uint32_t       pid;
    akl_counters_t   c;
    uint32_t      *lat_us;          /* dispatch -> ack latencies after the warm-up */
    uint32_t      *commit_us;       /* receipt -> ack (the coordinator's commit) */
    size_t         nlat, cap_lat;
    uint32_t      *credit_us;       /* credit freed -> ASSIGN received, after the warm-up */
    uint32_t      *credit_at_us;    /* when each was freed, us from the window's start */
    size_t         ncredit, cap_credit;
    /* the window: what is sampled happened in [window_ns, window_end_ns)
       (UINT64_MAX until known: --warmup-from registered); the run stops
       at stop_ms (0: at a signal), end_ns is when it did */
    uint64_t       start_ns, window_ns, window_end_ns, end_ns;
    uint64_t       stop_ms;
    uint64_t       first_ack_ns, last_ack_ns;   /* in the window */
    uint32_t       nregistered;     /* simulated workers heard at least once */
    uint64_t       all_registered_ns;           /* when the last of them was */
    bool           ready_failed;    /* --ready-file could not be written */
    int            epoll;
    uint32_t      *ready;           /* sims to read, in the order they became ready */
    size_t         nready;
    uint32_t      *batch;           /* the ready list being worked through */
    uint64_t       next_wake;       /* monotonic ms of the next heartbeat/liveness scan */
    akl_due_t       *due;             /* min-heap of running tasks' due times */
    size_t         ndue, cap_due;
} akl_load_t;

// ================================================ between the files

/* main.c: every simulated worker has been heard (now_ns): opens the
   window of --warmup-from registered, writes --ready-file. */
void akl_all_registered (akl_load_t *self, uint64_t now_ns);
/* The window holds t (monotonic ns). */
static inline bool akl_in_window (const akl_load_t *self, uint64_t t)
{
    return t >= self->window_ns && t < self->window_end_ns;
}

/* sim.c: one simulated worker */
/* Sends env on sim's socket (a failure is counted, never fatal). */
int  akl_send (akl_load_t *self, akl_sim_t *sim, Ak__Envelope *env);
/* Closes sim's socket and monitor (linger_ms bounded). */
void akl_close (akl_load_t *self, akl_sim_t *sim, int linger_ms);
/* What sim's handshake monitor reported (its descriptor fired). */
void akl_handshakes (akl_load_t *self, akl_sim_t *sim, uint64_t now);
/* sim's socket descriptor fired: read it (akl_read_ready) until EAGAIN. */
void akl_mark_ready (akl_load_t *self, akl_sim_t *sim);
/* Reads every socket of the ready list (which may fill again meanwhile). */
void akl_read_ready (akl_load_t *self);
/* Finishes the running tasks whose time has come. */
void akl_due_tasks (akl_load_t *self, uint64_t now);
/* Heartbeats, liveness and reconnects of every simulated worker. */
void akl_all_timers (akl_load_t *self, uint64_t now);
void akl_task_free (akl_task_t *t);
void akl_pending_free (akl_pending_t *p);

/* stats.c */
/* The statistics as a JSON object (the caller's). */
json_t *akl_stats_json (akl_load_t *self);
/* Their summary on stdout. */
void akl_print_stats (akl_load_t *self, json_t *o);

#endif
