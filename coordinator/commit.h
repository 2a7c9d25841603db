/*  coordinator/commit.h: the participant protocol of the group commit.

    The group commit (intake.c) writes in ONE LMDB write transaction what
    several modules changed in memory since the last commit.  Each of them
    is a participant: an object and a table of four steps, any of which may
    be NULL (nothing to do).  An attempt runs them over an ordered list:
      clear     (list order) before the attempt: forget what an earlier
                attempt of the same commit built in memory (a retry after
                the map grew);
      flush     (list order) write the participant's changes into txn; the
                first failure stops the attempt, later ones are not flushed;
      rollback  (reverse order) the attempt failed, in a flush or in the
                commit itself: drop what it built and every cached copy of
                its writes.  The changes themselves stay dirty: the next
                attempt flushes them again;
      flushed   (list order) the commit returned 0: what was written is
                now the committed state (dirty marks go).
    Every participant gets rollback or flushed after every attempt, also
    the ones a failed flush never reached; each step is therefore safe to
    call when its flush did not run.

    An attempt may commit on the writer thread (committer.h): clear and
    flush then run there while the loop is parked, and rollback / flushed
    back on the loop's thread, after the loop went on for the commit's
    fsyncs.  What the loop changed meanwhile is newer than what the flush
    wrote: flushed must keep it for the next commit (dirty.h), never
    forget it.

    The group commit's list, in order (intake.c): the scheduler (dirty tasks
    and batches: sched.h), the staged receipts (which decide their tasks as
    the index left them), the search rounds (the stages and confirm tasks
    those receipts complete: rounds.h), the registry (dirty workers, with
    the tasks done in this commit counted: registry.h).

    Never: begin, commit or abort the transaction here (the owner of the
    list does, between ak_commit_flush and ak_commit_rollback / _flushed);
    touch the network. */
#ifndef AK_COMMIT_H
#define AK_COMMIT_H
#include <stddef.h>
#include "error.h"
#include "store.h"

typedef struct {
    const char *name;                                   /* for messages: "scheduler" */
    void (*clear) (void *self);
    int  (*flush) (void *self, ak_txn_t *txn, ak_err_t *err);
    void (*rollback) (void *self);
    void (*flushed) (void *self);
} ak_commit_ops_t;

/* One participant: its steps and the object they act on (borrowed). */
typedef struct {
    const ak_commit_ops_t *ops;
    void                  *self;
} ak_commit_part_t;

/* Clears every participant, then flushes them in order into txn.  0, or
   the first flush's error, with err as that flush set it.  The caller then
   commits or aborts txn and calls ak_commit_flushed or ak_commit_rollback. */
int ak_commit_flush (const ak_commit_part_t *parts, size_t n, ak_txn_t *txn, ak_err_t *err);
/* After the attempt failed (txn aborted): every participant's rollback,
   last to first. */
void ak_commit_rollback (const ak_commit_part_t *parts, size_t n);
/* After the commit returned 0: every participant's flushed, in order. */
void ak_commit_flushed (const ak_commit_part_t *parts, size_t n);

#endif
