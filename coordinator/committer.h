/*  coordinator/committer.h: the group commit's writer thread (issue 24).

    LMDB makes a commit durable with fdatasync calls inside mdb_txn_commit,
    milliseconds each; on the loop's thread no frame is read while they
    run.  LMDB also wants a write transaction begun, used and committed by
    one thread (its write lock is a mutex).  So one thread here does all
    three for the group commit, in two phases:
      fill     the thread begins a write transaction, calls fill (the
               participants' flush: commit.h) and ak_store_prepare while
               the caller waits in ak_committer_start: the loop is parked,
               so fill may read and change everything the loop owns;
      commit   ak_committer_start has returned; the thread runs
               ak_store_commit (the fsyncs) while the loop goes on, then
               makes the fd readable.
    The caller then takes the outcome with ak_committer_done, and only then
    runs the participants' flushed or rollback and sends the ACKs: nothing
    a receipt frees is released before its commit holds.

    One commit is in flight at a time.  The commit phase touches only the
    LMDB transaction (prepare wrote every deferred record), never the
    caller's objects, and logs nothing.

    Never: call ak_committer_start while busy; begin a write transaction on
    the loop's thread while busy (it would wait for this one's commit:
    harmless, but a stall); destroy while busy without ak_committer_done. */
#ifndef AK_COMMITTER_H
#define AK_COMMITTER_H
#include <stdbool.h>
#include <stdint.h>
#include "error.h"
#include "store.h"


typedef struct ak_committer ak_committer_t;

/* Writes the commit's content into txn; 0 or the failure (err). */
typedef int ak_committer_fill_fn (void *arg, ak_txn_t *txn, ak_err_t *err);

/* Starts the thread for store (borrowed).  NULL with err set when the
   thread or its eventfd cannot be made. */
ak_committer_t *ak_committer_new (ak_store_t *store, ak_err_t *err);
/* Stops and joins the thread (waits for a commit in flight first). */
void ak_committer_destroy (ak_committer_t **self_p);

/* Readable while a finished commit waits for ak_committer_done. */
int ak_committer_fd (ak_committer_t *self);
bool ak_committer_busy (ak_committer_t *self);

/* The fill phase on the thread (the caller blocks until it ends).  0: the
   commit runs now (busy); else fill's, begin's or prepare's failure (err),
   the transaction aborted on the thread, nothing in flight.
   *parked_ns: how long the caller waited. */
int ak_committer_start (ak_committer_t *self, ak_committer_fill_fn *fill, void *arg, uint64_t *parked_ns,
                        ak_err_t *err);
/* The outcome of the commit in flight: *finished false (and 0) while it
   still runs and wait is false; else 0 (durable) or its failure (err; the
   transaction was aborted), *commit_ns from the begin to the end of the
   commit on the thread.  AK_ESTATE when none is in flight. */
int ak_committer_done (ak_committer_t *self, bool wait, bool *finished, uint64_t *commit_ns, ak_err_t *err);

#endif
