/*  coordinator/coord_private.h: what the coordinator's files share.

    The coordinator is one object (ak_coord_t, coord.h) whose code is split
    by concern; this header is theirs alone, included by coord.c and the
    files below only:
      coord.c         the loop and its tick, receiving, the client queue,
                      construction and destruction (it owns every field);
      send.c          packing and sending, replies, rate-limited rejections
                      and refusals (sock, seq, sendbuf, warn_at ...);
      dispatch.c      assigning queued tasks to workers' credit, the blob
                      cache (blobs, blob_bytes), re-queueing;
      worker_proto.c  HELLO and reconciliation, STARTED, RECEIPT, worker
                      DISCONNECT, dead workers and pinned tasks;
      settle.c        the group commit's outcome (ACKs, lost receipts) and
                      settling batches whose tasks are all terminal;
      peers.c         peers: malformed-frame counts and drops, CURVE
                      authorisation of each message, ZAP, key reloads;
      instrument.c    watching the loop: each wake-up's record
                      (loopstat.h) and the metrics snapshot it publishes
                      to the --metrics endpoint (wake, loopstat ...).
    Functions shared between these files are prefixed coord_; what one file
    alone uses stays static (s_).  Every function here runs on the loop's
    thread; none blocks.

    Ownership: ak_coord_t owns every object its fields point at (coord.c
    creates and destroys them), except peer and frame, borrowed for the
    message being handled (NULL between messages).

    Never: include this header outside the coordinator's loop files; keep
    state in a file's statics (it belongs in ak_coord_t). */
#ifndef AK_COORD_PRIVATE_H
#define AK_COORD_PRIVATE_H
#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "coord.h"
#include "admit.h"
#include "auth.h"
#include "client.h"
#include "counters.h"
#include "intake.h"
#include "loopstat.h"
#include "registry.h"
#include "sched.h"
#include "store.h"

#define AK_COORD_DRAIN_MAX      256     /* messages per socket per wake-up, for fairness */
#define AK_COORD_WARN_EVERY_MS  1000    /* rate limit of "rejected" warnings */

/*  Fields by the file that changes them; any file reads what it needs.
    opts.stop_flag and opts.reload_flag are the signal handlers'. */
struct ak_coord {
    /* coord.c: the loop, what it owns and the message being handled */
    ak_coord_opts_t  opts;
    char            *endpoints[AK_EP_COUNT];
    ak_store_t      *store;
    ak_sched_t      *sched;
    ak_registry_t   *registry;
    ak_intake_t     *intake;
    ak_committer_t  *committer;         /* the group commit's writer thread; NULL: --commit-sync */
    uint64_t         commit_avg_us;     /* running average of a commit, begin to durable (settle.c) */
    zsock_t         *sock[AK_EP_COUNT];
    zsock_t         *mon[AK_EP_COUNT];  /* socket monitors: connections */
    ak_counters_t    counters;          /* every file counts here */
    ak_client_env_t  client;
    uint64_t         start;
    uint64_t         next_tick;
    uint64_t         next_heartbeat;
    uint32_t         tick_ms;
    bool             stop;
    bool             dispatch_due;      /* any file: dispatch after this wake-up */
    zlistx_t        *queue;             /* s_request_t: client requests waiting */
    const ak_key_t  *peer;              /* key of the message being handled (or NULL) */
    const uint8_t   *frame;             /* its envelope frame as received (or NULL) */
    size_t           frame_len;
    bool             frame_slim;        /* its receipt is slim (envelope.h) */
    /* send.c */
    uint64_t         seq;
    uint8_t         *sendbuf;           /* the reusable send buffer */
    size_t           sendcap;
    uint64_t         warn_at[AK_EP_COUNT];
    uint64_t         suppressed[AK_EP_COUNT];
    uint64_t         refuse_warn_at;
    uint64_t         refuse_suppressed;
    /* dispatch.c */
    zhashx_t        *blobs;             /* digest -> verified blob text */
    size_t           blob_bytes;
    /* worker_proto.c */
    ak_admit_t      *admit;             /* what a worker may do (admit.h) */
    /* peers.c; NULL ring and zap in plain mode */
    ak_keyring_t    *ring;
    zsock_t         *zap;               /* REP on S_ZAP_ENDPOINT: the ZAP handler */
    zhashx_t        *malformed;         /* peer routing id (hex) -> malformed frames */
    zhashx_t        *dropped;           /* peers dropped: their frames are ignored */
    uint64_t         auth_warn_at;
    uint64_t         auth_suppressed;
    /* instrument.c; any file counts its work in wake */
    ak_loopstat_t   *loopstat;
    ak_wake_t        wake;              /* the wake-up in progress */
    bool             wake_open;
    uint64_t         wake_ns;           /* its start (monotonic ns) */
    uint64_t         wake_base[8];      /* counters at its start (instrument.c) */
    uint64_t         next_metrics;      /* monotonic ms of the next snapshot */
    uint64_t         rate_ms;           /* receipts/s: the last snapshot's time and count */
    uint64_t         rate_accepted;
    double           receipt_rate;
};

/* "workers", "clients": endpoint names for messages. */
extern const char *const coord_ep_names[AK_EP_COUNT];

// ================================================================== send.c

/* Hex of a routing id into buf (size bytes), for logs; returns buf. */
const char *coord_hex (const void *data, size_t len, char *buf, size_t size);
/* A buffer of size bytes to pack a message into, the reusable one when it
   fits; give it back with coord_buf_done (which frees a one-off). */
uint8_t *coord_buf (ak_coord_t *self, size_t size);
void coord_buf_done (ak_coord_t *self, uint8_t *buf);
/* Sends route + the packed envelope buf.  0, AK_EUNAVAIL or AK_EIO. */
int coord_send_frame (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, const uint8_t *buf,
                      size_t size);
/* Sends env (its version and seq set here) to route on endpoint ep without
   blocking.  0, AK_EINVAL (no body), AK_ETOOBIG, AK_EUNAVAIL or AK_EIO;
   failures are counted and logged at debug, never fatal. */
int coord_send (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, Ak__Envelope *env);
/* DISCONNECT to a worker's route: with code, or REREGISTER (say HELLO
   again) for coord_send_disconnect. */
void coord_send_disconnect_code (ak_coord_t *self, const void *route, size_t len, Ak__DisconnectCode code,
                                 const char *reason);
void coord_send_disconnect (ak_coord_t *self, const void *route, size_t len, const char *reason);
/* A HEARTBEAT to w with its credit and unacked receipts; w->last_sent = now. */
void coord_send_heartbeat (ak_coord_t *self, ak_worker_t *w, uint64_t now);
/* A client's reply (error and json may be NULL); an answer over the
   message limit becomes an AK_ETOOBIG error reply. */
void coord_reply (ak_coord_t *self, const void *route, size_t len, int code, const char *error,
                  const char *json);
/* Counts a rejected message of endpoint ep and warns, at most once a second. */
void coord_reject (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, const char *why);
/* Counts in *counter what a worker may not do and warns, at most once a
   second, naming its routing id and key. */
void coord_refuse (ak_coord_t *self, uint64_t *counter, const void *route, size_t len, const char *why);

// ============================================================== dispatch.c

/* Fills w's credit from the queues of its device classes (pinned tasks
   first), one ASSIGN per task, in one read transaction. */
void coord_dispatch_worker (ak_coord_t *self, ak_worker_t *w, uint64_t now);
/* The same for every live worker with credit, while there is work. */
void coord_dispatch_all (ak_coord_t *self, uint64_t now);
/* Re-queues task (attempt + 1, or poisoned), taking it from its holder;
   a dispatch is due. */
void coord_requeue (ak_coord_t *self, ak_task_t *task, const char *reason, uint64_t now);
/* The destructor of the blob cache's texts (ak_coord_t.blobs). */
void coord_blob_free (void **item);

// ================================================================ settle.c

/* Runs the group commit on the loop's thread and sends its outcome (ACKs;
   for receipts not stored, re-queues and DISCONNECT), after finishing the
   one in flight, if any.  0 or the commit's error. */
int coord_commit (ak_coord_t *self, ak_err_t *err);
/* The group commit when it is due: started on the writer thread (the loop
   parked while the participants write into its transaction), or nothing
   when one is in flight; synchronously without a writer thread or when
   the start failed. */
void coord_commit_start (ak_coord_t *self);
/* The commit in flight, if finished (wait: blocks until it is): its
   outcome sent as coord_commit sends it.  0 or the commit's error. */
int coord_commit_finish (ak_coord_t *self, bool wait, ak_err_t *err);
/* Settles every batch whose tasks are all terminal: its next search round,
   its verify verdicts or its winners; a step that fails is logged and
   tried again at the next tick. */
void coord_settle (ak_coord_t *self, uint64_t now);

// ========================================================== worker_proto.c

/* Handles a message from the workers endpoint (env is the caller's; the
   handler may take its body): HELLO, HEARTBEAT, STARTED, RECEIPT and
   DISCONNECT; anything else, or a message of a peer that is not
   registered, is rejected or answered with DISCONNECT. */
void coord_on_worker (ak_coord_t *self, const void *route, size_t len, Ak__Envelope *env, uint64_t now);
/* Declares w dead (why): its pinned tasks fail, the others it held go
   back to their queues unless their receipts wait for a commit. */
void coord_worker_dead (ak_coord_t *self, ak_worker_t *w, const char *why, uint64_t now);
/* Drops a live worker w for good (DISCONNECT with code, then as
   coord_worker_dead); NULL or a dead one: nothing. */
void coord_drop_worker (ak_coord_t *self, ak_worker_t *w, Ak__DisconnectCode code, const char *why);
/* Fails the queued tasks pinned to workers not alive once the
   registration grace after a start has passed. */
void coord_reap_pinned (ak_coord_t *self, uint64_t now);

// ============================================================ instrument.c

/* A wake-up begins (after zmq_poll returned) / ends (after the log flush
   before the next poll): its record goes to the loop statistics. */
void coord_wake_begin (ak_coord_t *self);
void coord_wake_end (ak_coord_t *self);
/* Microseconds since t0 (monotonic ns), for the phases of a wake-up. */
uint32_t coord_us_since (uint64_t t0);
/* A group commit that wrote: the loop spent loop_ns on it (a synchronous
   one whole; an asynchronous one's finish), it took commit_ns from begin
   to durable, and stored receipts. */
void coord_wake_commit (ak_coord_t *self, uint64_t loop_ns, uint64_t commit_ns, size_t receipts);
/* Renders and publishes the metrics snapshot when one is due (the tick). */
void coord_metrics_tick (ak_coord_t *self, uint64_t now);

// ================================================================= peers.c

/* Counts a malformed frame of the peer at route; at opts.malformed_max the
   peer is dropped (a registered worker declared dead) and its later frames
   ignored. */
void coord_malformed (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len);
/* True when the peer at route was dropped: its frames are ignored. */
bool coord_peer_dropped (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len);
/* Sets self->peer to the key the message body came with (CURVE; always
   true in plain mode).  False for a key no longer in the ring with a role
   for ep: counted, warned, and its worker dropped. */
bool coord_authorised (ak_coord_t *self, ak_ep_t ep, zmq_msg_t *body, const void *route, size_t len);
/* Answers the ZAP requests waiting (CURVE handshakes). */
void coord_zap_drain (ak_coord_t *self);
/* Re-reads the key ring when forced (SIGHUP) or when it changed, and drops
   every worker whose key is no longer a worker's. */
void coord_keys_reload (ak_coord_t *self, bool forced);

#endif
