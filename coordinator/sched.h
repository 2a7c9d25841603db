/*  coordinator/sched.h: the scheduler's in-memory index of batches and tasks.

    LMDB is the truth; this is an index rebuilt from it at start
    (ak_sched_load) and kept in step with it: every state change here marks
    the task (or batch) dirty, and the group commit (intake.c) writes dirty
    records with ak_sched_flush inside its transaction, then calls
    ak_sched_flushed once the commit returned 0.

    Queues are per device class, FIFO, O(1) pop; entries whose task became
    terminal while queued are skipped on pop.  A leased task has a holder
    (worker_id): the worker it was assigned to, which alone may list it in
    HELLO.running or deliver its receipt (docs/protocol.md).  A lease
    deadline (monotonic ms) exists once the task has started, and is stored
    (TaskRecord.lease_deadline_ms, wall clock) so that a restart keeps it;
    an assigned-but-not-started task has none and is bounded by its
    holder's liveness, or, after a restart, by a registration grace within
    which its holder must list it again.  A leased task without a holder
    (a record written before holders were stored) is nobody's: its lease
    runs out.

    This module never talks to the network and owns no worker state: the
    caller keeps the workers' outstanding sets in step (worker_proto.c,
    dispatch.c). */
#ifndef AK_SCHED_H
#define AK_SCHED_H
#include "dirty.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "store.h"
#include "commit.h"
#include "expand.h"

typedef enum {
    AK_TS_QUEUED = 0,
    AK_TS_LEASED,
    AK_TS_DONE,
    AK_TS_FAILED,
    AK_TS_POISONED,
    AK_TS_CANCELLED,
    AK_TS_COUNT
} ak_tstate_t;

typedef enum { AK_BS_OPEN = 0, AK_BS_COMPLETE, AK_BS_CANCELLED } ak_bstate_t;

const char *ak_tstate_name (ak_tstate_t state);          /* "queued" ... */
int  ak_tstate_parse (const char *name, ak_tstate_t *state);
bool ak_tstate_terminal (ak_tstate_t state);
const char *ak_bstate_name (ak_bstate_t state);          /* "open" ... */

typedef struct ak_batch ak_batch_t;

typedef struct {
    char        *task_id;
    ak_batch_t  *batch;
    char        *device_class;
    char        *kind;
    char        *op;
    uint32_t     stage;             /* TaskRecord.stage: halving stage of a tune task */
    char        *avoid_worker;      /* confirm: not this worker while another can take it */
    ak_tstate_t  state;
    uint32_t     attempt;           /* 1 for the first */
    uint32_t     attempt_base;      /* attempts before the last retry */
    uint32_t     max_attempts;      /* per retry round: attempt - attempt_base <= max_attempts */
    uint32_t     lease_ms;
    char        *worker_id;         /* holder while leased; NULL: nobody's */
    char        *attempt_holder;    /* the worker given the current attempt, kept once the
                                       task finished (a copy of its receipt is still its
                                       to send); NULL once the attempt changes */
    bool         started;
    uint64_t     deadline;          /* monotonic ms the lease ends; 0: none */
    uint64_t     lease_end_ms;      /* wall clock: the same for a started task, as stored */
    uint64_t     queued_ms;         /* wall clock */
    uint64_t     leased_ms;
    uint64_t     finished_ms;
    char        *last_error;
    char        *pin_worker;        /* only this worker runs it (verify); NULL: any of the class */
    /* index bookkeeping */
    bool         in_queue;
    ak_dmark_t   dirty;             /* dirty.h */
    bool         reopened;          /* retried: the flush clears the old verdict */
    void        *lease_handle;
    /* The stored TaskRecord, cached while the task is leased so that the
       group commit rewrites it without reading and decoding it again (the
       largest cost per task at fleet scale).  It always equals the record
       as committed, changed only by the writes of the commit being built
       (ak_sched_flush, intake.c); a commit that fails drops every cached
       record (ak_sched_uncache_all).  Any other writer of a leased task's
       record must drop its copy first.  NULL: read it from the store. */
    Ak__TaskRecord *rec;
    ak_task_def_t   rec_def;        /* rec's definition as bytes (store.h) */
} ak_task_t;

struct ak_batch {
    char        *batch_id;
    char        *name;
    ak_bstate_t  state;
    uint64_t     created_ms;
    uint64_t     finished_ms;
    char       **targets;
    size_t       ntargets;
    double       threshold;
    double       max_regression;
    size_t       total;
    size_t       counts[AK_TS_COUNT];
    Ak__Winner **winners;           /* set when complete */
    size_t       nwinners;
    ak_task_t  **tasks;             /* every task of the batch, in id order */
    size_t       ntasks;
    size_t       cap_tasks;
    ak_dmark_t   dirty;             /* dirty.h */
    bool         settling;          /* every task terminal, winners not decided yet */
    uint64_t     reopens;           /* times a task left a terminal state (retry) */
    void        *rounds_memo;       /* rounds.c's per (op, class) summary of tasks; freed here */
};

typedef struct ak_sched ak_sched_t;

ak_sched_t *ak_sched_new (void);
void ak_sched_destroy (ak_sched_t **self_p);

/* Rebuilds the index from the store: queued tasks into their class queue in
   task id order; leased tasks held by the worker their record names, a
   started one with the deadline it had (never a fresh lease: a coordinator
   restarted more often than lease_ms must still re-queue it), one not
   started with now + grace_ms for its holder to come back and list it.
   Undecodable records are logged and skipped.  0 or the store's error. */
int ak_sched_load (ak_sched_t *self, ak_txn_t *txn, uint64_t now, uint64_t grace_ms, ak_err_t *err);

/* Indexes a batch whose expansion was just committed (every task queued). */
void ak_sched_add (ak_sched_t *self, const ak_expansion_t *exp);

ak_task_t  *ak_sched_task (ak_sched_t *self, const char *task_id);
ak_batch_t *ak_sched_batch (ak_sched_t *self, const char *batch_id);
/* Batches in creation order: first, then next until NULL. */
ak_batch_t *ak_sched_batch_first (ak_sched_t *self);
ak_batch_t *ak_sched_batch_next (ak_sched_t *self);

/* Next queued task of device_class (NULL when none); it leaves the queue and
   must be assigned or handed back with ak_sched_unpop. */
ak_task_t *ak_sched_pop (ak_sched_t *self, const char *device_class);
void ak_sched_unpop (ak_sched_t *self, ak_task_t *task);
/* Like ak_sched_pop for worker_id, but passes over a task whose
   avoid_worker is worker_id while other_live(arg, task) says another live
   worker of its class could take it (the confirmation round must measure
   on a different worker; coordinator/rounds.h).  Passed-over tasks keep
   their place in the queue. */
typedef bool (ak_sched_other_fn) (void *arg, const ak_task_t *task);
ak_task_t *ak_sched_pop_for (ak_sched_t *self, const char *device_class, const char *worker_id,
                             ak_sched_other_fn *other_live, void *arg);
/* Indexes tasks added to an existing batch (later search stages and
   confirm tasks, committed by the caller), each queued at the end of its
   class queue.  Records of an unknown batch or an indexed id are skipped. */
void ak_sched_extend (ak_sched_t *self, Ak__TaskRecord *const *recs, size_t n);
/* Pinned tasks (TaskRecord.pin_worker, `verify`) wait in a queue of their
   worker, never in a class queue: ak_sched_pop does not see them.  The next
   queued task pinned to worker_id, or NULL; same contract as ak_sched_pop. */
ak_task_t *ak_sched_pop_pinned (ak_sched_t *self, const char *worker_id);
/* Fails every non-terminal task pinned to worker_id (queued or leased)
   with reason as last_error: a pinned task never runs elsewhere.  The
   caller drops leased ones from the worker's outstanding set.  Returns how
   many failed. */
size_t ak_sched_fail_pinned (ak_sched_t *self, const char *worker_id, const char *reason, uint64_t now);
/* The workers that have queued pinned tasks waiting, into a malloc'ed
   array of borrowed ids (valid until the next state change); the count. */
size_t ak_sched_pinned_workers (ak_sched_t *self, const char ***ids_p);
/* True when some queue holds a queued task. */
bool ak_sched_has_work (ak_sched_t *self);

/* State changes; each is logged once at info with the task id and marks the
   record dirty, with `now` the monotonic clock in ms. */
void ak_sched_assign (ak_sched_t *self, ak_task_t *task, const char *worker_id, uint64_t now);
/* The task started: its lease ends at now + lease_ms.  A task already
   started keeps its deadline (a repeated STARTED never extends a lease). */
void ak_sched_start (ak_sched_t *self, ak_task_t *task, uint64_t now);
/* Its holder registered again and listed it: a started task keeps its
   deadline, one not started is bounded by the holder's liveness again. */
void ak_sched_reclaim (ak_sched_t *self, ak_task_t *task, uint64_t now);
/* Back to the head of its queue with attempt + 1, or poisoned once attempt
   would pass max_attempts; reason becomes last_error. */
void ak_sched_requeue (ak_sched_t *self, ak_task_t *task, const char *reason, uint64_t now);
/* done / failed from an accepted receipt.  persisted: the record already
   says so (written by the commit that accepted the receipt), and the
   caller logs the change with the receipt (intake.c), so this does not. */
void ak_sched_finish (ak_sched_t *self, ak_task_t *task, bool ok, bool persisted, uint64_t now);
/* Opens a failed or poisoned task again (`retry`): attempt + 1 with a fresh
   budget of max_attempts, queued at the end of its queue; the record's old
   verdict (receipt_id, status) is cleared by the next flush, the receipts
   stay.  A complete batch becomes open again (its winners are decided anew
   when it settles).  false, doing nothing, for any other state. */
bool ak_sched_reopen (ak_sched_t *self, ak_task_t *task, uint64_t now);
/* Cancels every non-terminal task of the batch and the batch itself;
   returns how many tasks were cancelled.  Cancelling twice is a no-op. */
size_t ak_sched_cancel (ak_sched_t *self, ak_batch_t *batch, uint64_t now);

/* Leased tasks whose deadline passed, into a malloc'ed array (caller frees);
   returns the count. */
size_t ak_sched_expired (ak_sched_t *self, uint64_t now, ak_task_t ***tasks_p);

/* Next batch whose tasks are all terminal and whose winners are still to be
   decided, or NULL; ak_sched_complete then takes the winners (the array and
   every Winner) and closes it. */
ak_batch_t *ak_sched_settling (ak_sched_t *self);
void ak_sched_complete (ak_sched_t *self, ak_batch_t *batch, Ak__Winner **winners, size_t nwinners,
                        uint64_t now);

/* Record cache (see ak_task_t.rec): takes *rec_p, the record as stored,
   and *def, its stored bytes (or none), for a leased task (else it frees
   them); leaving `leased` drops them. */
void ak_sched_cache (ak_sched_t *self, ak_task_t *task, Ak__TaskRecord **rec_p, ak_task_def_t *def);
/* Drops every cached record: after a commit that failed, whose writes
   the cached copies may hold. */
void ak_sched_uncache_all (ak_sched_t *self);

/* Counters over every task / batch. */
size_t ak_sched_count (ak_sched_t *self, ak_tstate_t state);
size_t ak_sched_open_batches (ak_sched_t *self);

/* Group commit support: the monotonic ms of the oldest unflushed change (0
   when none), writing every dirty record into txn, and forgetting them
   after the commit that held them returned 0. */
uint64_t ak_sched_dirty_since (ak_sched_t *self);
/* The flush writes the records marked until it began; ak_sched_flushed
   forgets only those (a commit in flight: dirty.h). */
int  ak_sched_flush (ak_sched_t *self, ak_txn_t *txn, ak_err_t *err);
void ak_sched_flushed (ak_sched_t *self);
/* The scheduler as a participant of the group commit (commit.h): flush
   ak_sched_flush, rollback ak_sched_uncache_all, flushed ak_sched_flushed. */
extern const ak_commit_ops_t ak_sched_commit_ops;

#endif
