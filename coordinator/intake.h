/*  coordinator/intake.h: receipt intake and the group commit.

    Receipts are staged in memory and written, together with every dirty
    task, batch and worker record (sched.h, registry.h), in ONE LMDB write
    transaction when commit_max receipts are staged or commit_ms passed since
    the oldest pending change.  Each stored receipt gets an id "R%08llu" from
    the `receipt` counter, is indexed under "task#attempt" (its attempt's
    first receipt) and "task#attempt#R..." (every receipt, for `show`), and
    decides the task inside the same transaction:
      - the first receipt for a task that is not terminal, of an attempt
        that has none yet, is accepted: the task becomes done (status ok) or
        failed, TaskRecord.receipt_id and status are set;
      - any other (a copy of an attempt that has a receipt, even after
        `retry` opened the task again; an older attempt after another was
        accepted; a task already terminal) is stored with duplicate=true,
        TaskRecord.duplicates++, and never counted.
    Acks come out of ak_intake_commit only when the commit holding their
    receipts returned 0.  A full map is grown (doubling, up to map_max) and
    the commit retried; any other failure drops the staged receipts unacked
    (their workers still hold them and re-send) and keeps the dirty records
    for a retry after a pause.  The commit may run on the committer's
    thread (ak_intake_commit_start / _finish, committer.h): the
    participants then keep what changed while it was in flight dirty for
    the next one (commit.h).  Nothing here touches the network. */
#ifndef AK_INTAKE_H
#define AK_INTAKE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "committer.h"
#include "error.h"
#include "store.h"
#include "sched.h"
#include "registry.h"
#include "metrics.h"

#define AK_INTAKE_MAP_MAX     (64ull << 30)     /* default growth limit: 64 GiB */
#define AK_INTAKE_RETRY_MS    1000              /* pause after a failed commit */
#define AK_INTAKE_MAX_BYTES   (64u << 20)       /* staged receipt bytes that force a commit */
#define AK_INTAKE_ROOM_MARGIN (4u << 20)        /* ak_intake_room's margin, bytes */

typedef struct {
    uint32_t commit_ms;         /* bounded delay; default 2 */
    uint32_t commit_max;        /* receipts per commit; default 256 */
    size_t   map_max;           /* 0: AK_INTAKE_MAP_MAX */
} ak_intake_opts_t;

typedef struct {
    char     *worker_id;
    char     *task_id;
    uint32_t  attempt;
    char      receipt_id[24];
    bool      duplicate;
    bool      ok;               /* accepted with status ok */
    uint64_t  staged_ns;        /* monotonic: when the loop staged the receipt */
} ak_ack_t;

typedef struct {
    ak_ack_t *acks;             /* success: one per staged receipt, in arrival order */
    size_t    nacks;
    char    **dropped;          /* failure: workers whose receipts were not stored */
    size_t    ndropped;
    ak_ack_t *lost;             /* failure: each receipt not stored (worker, task, attempt) */
    size_t    nlost;
} ak_commit_t;

typedef struct {
    uint64_t accepted;
    uint64_t duplicate;
    uint64_t commits;
    uint64_t commit_failures;
    uint64_t map_grows;
    uint64_t dropped;           /* receipts not stored after a failed commit */
    uint64_t store_full;        /* commits that failed for space: the map at map_max
                                   (AK_ESTOREFULL) or the disk full (AK_ENOSPACE) */
    size_t   map_max;           /* the growth limit in force */
    char     last_error[256];   /* why the last commit failed; "" once one succeeded */
    int      last_code;         /* its AK_E code; 0 once one succeeded */
    uint64_t failing_since_ms;  /* wall clock of the first failure in a row; 0 once one succeeded */
    uint64_t failing;           /* failures in that row */
    uint64_t by_status[AK_STATUS_COUNT];    /* accepted receipts by status (metrics.h) */
    uint64_t round_checks;      /* accepted tasks whose search round was checked (rounds.h) */
} ak_intake_stats_t;

typedef struct ak_intake ak_intake_t;

/* The intake borrows store, sched and registry for its lifetime. */
ak_intake_t *ak_intake_new (ak_store_t *store, ak_sched_t *sched, ak_registry_t *registry,
                            const ak_intake_opts_t *opts);
void ak_intake_destroy (ak_intake_t **self_p);

/* Stages *receipt_p (taken in every case) from worker_id.  The receipt's
   worker_id and received_at_ms are set here; receipt_id and duplicate are
   the coordinator's to set.  AK_ENOTFOUND for an unknown task, AK_EINVAL for
   an attempt the task never had; err says which. */
int ak_intake_stage (ak_intake_t *self, const char *worker_id, Ak__Receipt **receipt_p,
                     uint64_t now, ak_err_t *err);
/* The same for a receipt decoded from raw (rawlen bytes, copied): the
   commit stores those bytes plus the fields set here and at commit
   (ak_store_put_receipt_raw) instead of packing the receipt again. */
int ak_intake_stage_raw (ak_intake_t *self, const char *worker_id, Ak__Receipt **receipt_p,
                         const void *raw, size_t rawlen, uint64_t now, ak_err_t *err);

size_t ak_intake_staged (ak_intake_t *self);
/* True when the staged receipts alone make a commit due now. */
bool ak_intake_full (ak_intake_t *self);
/* Whether the store may be trusted to take what is staged and in flight:
   its last commit did not fail, and the map's free part is at least four
   times those receipts' bytes plus AK_INTAKE_ROOM_MARGIN (LMDB's free
   pages inside the map count as used: near its end the answer errs on
   the side of no).  The coordinator frees a receipt's slot when it is
   staged only then (docs/architecture.md). */
bool ak_intake_room (ak_intake_t *self);
size_t ak_intake_staged_for (ak_intake_t *self, const char *worker_id);
/* True when a receipt of task_id from worker_id waits for its commit: its
   task must not be taken from that worker before the commit decided. */
bool ak_intake_pending (ak_intake_t *self, const char *task_id, const char *worker_id);

/* Monotonic ms at which a commit is due (0: nothing pending).  It is due at
   once when commit_max receipts, or AK_INTAKE_MAX_BYTES of them, are staged. */
uint64_t ak_intake_deadline (ak_intake_t *self);

/* Commits everything pending (a no-op when nothing is).  On 0, *out has the
   acks to send; on failure, the workers whose receipts were dropped.  Clear
   *out with ak_commit_clear. */
int ak_intake_commit (ak_intake_t *self, uint64_t now, ak_commit_t *out, ak_err_t *err);
void ak_commit_clear (ak_commit_t *commit);

/* The same commit in two steps, its fsyncs on committer's thread
   (committer.h) while the loop goes on.  start: when anything is pending
   and no commit is in flight, the staged receipts become the commit's and
   the participants write into the thread's transaction while this call
   waits (*parked_ns); *started then says it is in flight (busy).  A
   failure there (err) leaves nothing in flight and everything staged:
   commit synchronously (ak_intake_commit) instead.  Receipts staged while
   one is in flight wait for the next; ak_intake_pending, _staged and
   _staged_for count both; ak_intake_deadline is 0 while one is in flight.
   finish: the outcome (*finished false while it still runs and wait is
   false), as ak_intake_commit gives it: on 0 the acks; a commit that
   failed on the thread is tried again synchronously here (a full map
   grows), so a failure is ak_intake_commit's.  *commit_ns: the thread's
   time from begin to durable. */
int ak_intake_commit_start (ak_intake_t *self, ak_committer_t *committer, bool *started, uint64_t *parked_ns,
                            ak_err_t *err);
int ak_intake_commit_finish (ak_intake_t *self, ak_committer_t *committer, bool wait, uint64_t now,
                             ak_commit_t *out, bool *finished, uint64_t *commit_ns, ak_err_t *err);
/* True while a commit started with ak_intake_commit_start is in flight;
   ak_intake_commit refuses then (AK_ESTATE). */
bool ak_intake_busy (ak_intake_t *self);

/* Doubles the map (up to map_max); AK_ESTOREFULL when already there. */
int ak_intake_grow (ak_intake_t *self, ak_err_t *err);

const ak_intake_stats_t *ak_intake_stats (ak_intake_t *self);

/* Counts a failed commit of another writer (submit, profile install ...)
   in the stats as a group commit's failure is (commit_failures,
   store_full, last_error, failing_since_ms); rc is its AK_E code. */
void ak_intake_failed (ak_intake_t *self, int rc, const char *msg);
/* A commit of another writer succeeded: the store is healthy again. */
void ak_intake_healthy (ak_intake_t *self);

#endif
