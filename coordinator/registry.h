/*  coordinator/registry.h: the worker registry.

    Keyed by the application worker_id from HELLO, never by the ROUTER
    identity: a HELLO from a known id on a new socket replaces the route.
    Liveness is the caller's clock (monotonic ms): any message refreshes it,
    and ak_registry_reap lists the workers silent for longer than the
    timeout.  Each worker has an outstanding set (tasks assigned to it whose
    receipt has not come yet) from which its credit is computed:
        credit = hello.slots + hello.prefetch - outstanding.
    Workers are persisted as WorkerRecords through the same dirty / flush /
    flushed protocol as the scheduler (intake.c commits them). */
#ifndef AK_REGISTRY_H
#define AK_REGISTRY_H
#include "dirty.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <czmq.h>
#include "akfleet.pb-c.h"
#include "blobcache.h"
#include "commit.h"
#include "error.h"
#include "store.h"

#define AK_ROUTE_MAX 256

typedef struct {
    char        *worker_id;
    char        *key;               /* CURVE public key (Z85) it is bound to; NULL: plain */
    Ak__Hello   *hello;             /* latest HELLO (owned) */
    uint8_t     *hello_bytes;       /* hello packed, for the worker record (or NULL) */
    size_t       hello_len;
    uint8_t      route[AK_ROUTE_MAX];
    size_t       route_len;         /* 0: no route (dead) */
    bool         alive;
    uint64_t     last_seen;         /* monotonic ms */
    uint64_t     last_seen_ms;      /* wall clock */
    uint64_t     last_sent;         /* monotonic ms: the last message sent to it,
                                       which is a heartbeat too (coord.c s_tick) */
    uint64_t     first_seen_ms;
    uint64_t     tasks_done;
    uint64_t     pending_done;      /* counted in the commit being built */
    uint32_t     registrations;
    zhashx_t    *outstanding;       /* task_id -> attempt (as uintptr_t) */
    char       **classes;           /* distinct device classes of its devices */
    size_t       nclasses;
    size_t       next_class;        /* round-robin cursor for dispatch */
    ak_dmark_t   dirty;             /* dirty.h */
    ak_blobcache_t *blobs;          /* what this registration's blob cache holds (digests) */
    /* Its last Heartbeat.timing (cumulative since its process started;
       has_timing false until one came): the GPU timing share. */
    bool         has_timing;
    double       sampled_ms, busy_ms, exec_ms;
    uint64_t     timing_tasks;
    uint32_t     timing_devices;     /* at least 1 */
} ak_worker_t;

typedef struct ak_registry ak_registry_t;

ak_registry_t *ak_registry_new (void);
void ak_registry_destroy (ak_registry_t **self_p);

/* Loads every stored worker as dead (they come back with HELLO). */
int ak_registry_load (ak_registry_t *self, ak_txn_t *txn, ak_err_t *err);

/* Registers (or re-registers) the worker of *hello_p, which the registry
   takes, on route.  *was_alive tells whether it was registered and alive
   already (a re-HELLO), so the caller can reconcile its tasks.  The worker's
   outstanding set is left as it was: the caller reconciles it. */
ak_worker_t *ak_registry_hello (ak_registry_t *self, const void *route, size_t route_len,
                                Ak__Hello **hello_p, uint64_t now, bool *was_alive);

ak_worker_t *ak_registry_get (ak_registry_t *self, const char *worker_id);
/* The live worker on that route, or NULL. */
ak_worker_t *ak_registry_by_route (ak_registry_t *self, const void *route, size_t route_len);

void ak_registry_touch (ak_registry_t *self, ak_worker_t *worker, uint64_t now);
/* Marks the worker dead and forgets its route; its outstanding set is left
   for the caller to drain (re-queue). */
void ak_registry_kill (ak_registry_t *self, ak_worker_t *worker, const char *why, uint64_t now);
/* Removes a dead worker (alive false) from the registry and frees it
   (`akctl workers forget`); the caller deletes its stored record in the
   same step.  Its pointer is invalid afterwards. */
void ak_registry_forget (ak_registry_t *self, ak_worker_t *worker);
/* Live workers silent for more than liveness intervals, into a malloc'ed
   array.  A worker's interval is the larger of heartbeat_ms and the one it
   announced in HELLO (capped at AK_HEARTBEAT_MAX_MS). */
#define AK_HEARTBEAT_MAX_MS 60000
size_t ak_registry_reap (ak_registry_t *self, uint64_t now, uint32_t heartbeat_ms, uint32_t liveness,
                         ak_worker_t ***dead_p);
/* That worker's silence limit in ms. */
uint64_t ak_worker_timeout (const ak_worker_t *worker, uint32_t heartbeat_ms, uint32_t liveness);

/* Iteration over every known worker (any order); not while modifying. */
ak_worker_t *ak_registry_first (ak_registry_t *self);
ak_worker_t *ak_registry_next (ak_registry_t *self);
size_t ak_registry_alive (ak_registry_t *self);
/* Every known worker, alive or dead. */
size_t ak_registry_size (ak_registry_t *self);

/* Worker keys (docs/operations.md, "What a worker key may do"): a worker
   id is bound to the CURVE key it first registered with, the binding is
   stored with the worker and survives restarts.  set_key binds worker to
   key (NULL: none) and marks it for the next commit; key_ids counts the
   worker ids bound to key, other than except_id (may be NULL). */
void   ak_registry_set_key (ak_registry_t *self, ak_worker_t *worker, const char *key, uint64_t now);
size_t ak_registry_key_ids (ak_registry_t *self, const char *key, const char *except_id);
/* True when a live worker other than not_worker serves device_class.  It
   leaves the iteration cursor of ak_registry_first/next alone. */
bool ak_registry_other_live (ak_registry_t *self, const char *device_class, const char *not_worker);

/* Outstanding set and credit. */
void ak_worker_hold (ak_worker_t *worker, const char *task_id, uint32_t attempt);
bool ak_worker_drop (ak_worker_t *worker, const char *task_id);
bool ak_worker_holds (ak_worker_t *worker, const char *task_id);
int64_t ak_worker_credit (const ak_worker_t *worker);

/* Counts a task done by this worker inside the commit being built: it is
   written by the flush of that same commit and becomes part of tasks_done
   once it committed (ak_registry_flushed); ak_registry_rollback forgets the
   counts of a commit that failed. */
void ak_registry_count_done (ak_registry_t *self, ak_worker_t *worker, uint64_t now);
void ak_registry_rollback (ak_registry_t *self);

/* Group commit support, as in sched.h. */
uint64_t ak_registry_dirty_since (ak_registry_t *self);
int  ak_registry_flush (ak_registry_t *self, ak_txn_t *txn, ak_err_t *err);
void ak_registry_flushed (ak_registry_t *self);
/* The registry as a participant of the group commit (commit.h): clear and
   rollback ak_registry_rollback, flush ak_registry_flush, flushed
   ak_registry_flushed. */
extern const ak_commit_ops_t ak_registry_commit_ops;

#endif
