/*  coordinator/settle.c: what follows the receipts (see coord_private.h):
    the group commit run and its outcome sent to the workers (ACKs, receipts
    not stored, DISCONNECT), and the batches whose tasks are all terminal
    settled: their next search round created, their verify tasks judged, or
    their winners decided. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord_private.h"
#include "clock.h"
#include "log.h"
#include "results.h"
#include "rounds.h"
#include "util.h"
#include "verify.h"

// ================================================================== commit

/*  Tells the workers what came of a group commit (intake.h): an ACK for
    each stored receipt (its slot is free again, if its staging did not
    free it already: worker_proto.c); on failure, a task whose
    worker is gone goes back to its queue and every worker whose receipts
    were dropped is asked to register again and re-send.  Clears *c. */
static void s_commit_outcome (ak_coord_t *self, ak_commit_t *c, uint64_t now)
{
    ak_log_flush ();                /* a task's "done" line before its ACK */
    const uint64_t sent_ns = ak_clock_mono_ns ();   /* the ACKs' time (they go out within microseconds) */
    for (size_t i = 0; i < c->nacks; i++) {
        const ak_ack_t *a = &c->acks[i];
        ak_worker_t *w = ak_registry_get (self->registry, a->worker_id);
        /* the receipt holds: its slot is free again */
        if (w && ak_worker_drop (w, a->task_id))
            self->dispatch_due = true;
        if (!w || !w->alive)
            continue;           /* it re-sends after registering again */
        Ak__Envelope env = AK__ENVELOPE__INIT;
        Ak__Ack ack = AK__ACK__INIT;
        ack.task_id = a->task_id;
        ack.attempt = a->attempt;
        ack.receipt_id = (char *) a->receipt_id;
        ack.duplicate = a->duplicate;
        env.body_case = AK__ENVELOPE__BODY_ACK;
        env.ack = &ack;
        if (coord_send (self, AK_EP_WORKERS, w->route, w->route_len, &env) == 0) {
            self->counters.acks++;
            w->last_sent = now;
            if (a->staged_ns && sent_ns >= a->staged_ns)
                ak_loopstat_ack (self->loopstat, (sent_ns - a->staged_ns) / 1000);
        }
    }
    /* A receipt not stored leaves its task with its worker: held (the
       slot taken again, where its staging freed it) and bounded by the
       worker's liveness, which must register again and re-send; a task
       whose worker is gone meanwhile goes back to its queue now.  Nothing
       is left without a deadline. */
    for (size_t i = 0; i < c->nlost; i++) {
        const ak_ack_t *l = &c->lost[i];
        ak_worker_t *w = ak_registry_get (self->registry, l->worker_id);
        ak_task_t *task = ak_sched_task (self->sched, l->task_id);
        if (!task || task->state != AK_TS_LEASED || task->attempt != l->attempt || !task->worker_id
            || strcmp (task->worker_id, l->worker_id) != 0)
            continue;
        if (w && w->alive)
            ak_worker_hold (w, task->task_id, task->attempt);
        else
            coord_requeue (self, task, "its receipt was not stored (commit failed) and its worker is gone", now);
    }
    for (size_t i = 0; i < c->ndropped; i++) {
        ak_worker_t *w = ak_registry_get (self->registry, c->dropped[i]);
        if (w && w->alive)
            coord_send_disconnect (self, w->route, w->route_len,
                                   "the coordinator could not store your receipts: register again and re-send");
    }
    ak_commit_clear (c);
}

int coord_commit_finish (ak_coord_t *self, bool wait, ak_err_t *err)
{
    if (!self->committer || !ak_intake_busy (self->intake))
        return 0;
    ak_commit_t c;
    bool finished = false;
    uint64_t commits = ak_intake_stats (self->intake)->commits, t0 = ak_clock_mono_ns (), commit_ns = 0;
    uint64_t now = ak_clock_mono_ms ();
    int rc = ak_intake_commit_finish (self->intake, self->committer, wait, now, &c, &finished, &commit_ns, err);
    if (!finished)
        return rc;
    if (ak_intake_stats (self->intake)->commits != commits) {
        uint64_t loop_ns = ak_clock_mono_ns () - t0;
        coord_wake_commit (self, loop_ns, commit_ns > loop_ns ? commit_ns : loop_ns, c.nacks);
    }
    s_commit_outcome (self, &c, now);
    return rc;
}

/*  Runs the group commit on the loop's thread, the one in flight finished
    first (its failure ends here: the next is due after the pause). */
int coord_commit (ak_coord_t *self, ak_err_t *err)
{
    int rc = coord_commit_finish (self, true, err);
    if (rc)
        return rc;
    ak_commit_t c;
    uint64_t now = ak_clock_mono_ms ();
    uint64_t commits = ak_intake_stats (self->intake)->commits, t0 = ak_clock_mono_ns ();
    rc = ak_intake_commit (self->intake, now, &c, err);
    if (ak_intake_stats (self->intake)->commits != commits) {
        uint64_t ns = ak_clock_mono_ns () - t0;
        coord_wake_commit (self, ns, ns, c.nacks);
    }
    s_commit_outcome (self, &c, now);
    return rc;
}

void coord_commit_start (ak_coord_t *self)
{
    ak_err_t err = { 0 };
    if (ak_intake_busy (self->intake))
        return;
    /* quick commits stay on the loop's thread: handing one to the writer
       thread parks the loop until that thread is scheduled, which costs a
       busy machine more than a 1-2 ms fsync (docs/benchmarks.md) */
    if (!self->committer || self->commit_avg_us < (uint64_t) self->opts.commit_thread_ms * 1000) {
        coord_commit (self, &err);
        return;
    }
    bool started = false;
    uint64_t parked_ns = 0;
    int rc = ak_intake_commit_start (self->intake, self->committer, &started, &parked_ns, &err);
    self->wake.commit_us += (uint32_t) (parked_ns / 1000);
    if (rc) {
        ak_warn ("group commit on the writer thread could not start: %s; committing synchronously", err.msg);
        coord_commit (self, &err);
    }
}

// ================================================================== settle

/* Next search stage / confirm tasks of a settling batch, in a write
   transaction of their own; *added says how many. */
static int s_settle_rounds (ak_coord_t *self, ak_batch_t *b, size_t *added, ak_err_t *err)
{
    ak_rounds_new_t created = { 0 };
    ak_txn_t *txn = NULL;
    *added = 0;
    int rc = ak_store_begin (self->store, true, &txn, err);
    if (rc == 0)
        rc = ak_rounds_advance_batch (txn, self->sched, b, ak_clock_wall_ms (), &created, err);
    if (rc == 0 && created.n)
        rc = ak_store_commit (&txn, err);
    ak_store_abort (&txn);
    if (rc == 0) {
        *added = created.n;
        ak_rounds_committed (&created, self->sched);
    }
    ak_rounds_new_clear (&created);
    return rc;
}

/* A verify batch (verify.h) is judged instead of promoted: the verdicts
   and the profile's status in one write transaction (the map grows when
   full).  *is_verify false for any other batch, nothing written. */
static int s_settle_verify (ak_coord_t *self, ak_batch_t *b, bool *is_verify, ak_err_t *err)
{
    for (;;) {
        ak_txn_t *txn = NULL;
        int rc = ak_store_begin (self->store, true, &txn, err);
        if (rc == 0)
            rc = ak_verify_settle (txn, b->batch_id, ak_clock_wall_ms (), is_verify, err);
        if (rc == 0 && *is_verify)
            rc = ak_store_commit (&txn, err);
        ak_store_abort (&txn);
        if (rc != AK_ESTOREFULL)
            return rc;
        rc = ak_intake_grow (self->intake, err);
        if (rc)
            return rc;
    }
}

/* The winners of b: from the final checks when they decided every pair
   (ak_rounds_winners: no record read), else from the records
   (ak_results_decide).  Debug builds decide from the records as well and
   compare. */
static int s_decide_winners (ak_coord_t *self, ak_batch_t *b, Ak__Winner ***winners_p, size_t *n_p,
                             ak_err_t *err)
{
    bool memo = ak_rounds_winners (b, winners_p, n_p);
#ifdef NDEBUG
    if (memo)
        return 0;
#endif
    ak_txn_t *txn = NULL;
    ak_results_t *res = NULL;
    int rc = ak_store_begin (self->store, false, &txn, err);
    if (rc == 0)
        rc = ak_results_decide (txn, b->batch_id, &res, err);
    ak_store_abort (&txn);
    if (rc == 0 && memo) {
        if (!ak_results_same_winners (res, *winners_p, *n_p)) {
            ak_error ("debug: batch %s: the winners of the final checks differ from the records' decision",
                      b->batch_id);
            abort ();
        }
    }
    else if (rc == 0) {
        *winners_p = ak_calloc (res->npairs ? res->npairs : 1, sizeof **winners_p);
        for (size_t i = 0; i < res->npairs; i++) {
            (*winners_p)[i] = res->pairs[i].winner;
            res->pairs[i].winner = NULL;
        }
        *n_p = res->npairs;
    }
    ak_results_destroy (&res);
    return memo ? 0 : rc;
}

/* Decides the winners of batches whose tasks are all terminal. */
void coord_settle (ak_coord_t *self, uint64_t now)
{
    ak_batch_t *b;
    ak_err_t err = { 0 };
    while ((b = ak_sched_settling (self->sched))) {
        /* the records must say what the index says before they are read */
        if (coord_commit (self, &err))
            return;
        /* a search stage or confirmation round that ended without a
           receipt (poisoned, cancelled tasks) is created now (rounds.h) */
        size_t added = 0;
        if (s_settle_rounds (self, b, &added, &err)) {
            ak_error ("batch %s: cannot create its next search round yet: %s", b->batch_id, err.msg);
            return;
        }
        if (added) {
            self->wake.settled++;
            continue;
        }
        bool is_verify = false;
        if (s_settle_verify (self, b, &is_verify, &err)) {
            ak_error ("batch %s: cannot judge its verify tasks yet: %s", b->batch_id, err.msg);
            return;
        }
        if (is_verify) {
            ak_sched_complete (self->sched, b, NULL, 0, now);
            self->wake.settled++;
            continue;
        }
        Ak__Winner **winners = NULL;
        size_t nwinners = 0;
        if (s_decide_winners (self, b, &winners, &nwinners, &err)) {
            ak_error ("batch %s: cannot decide its winners yet: %s", b->batch_id, err.msg);
            return;
        }
        for (size_t i = 0; i < nwinners; i++) {
            const Ak__Winner *wn = winners[i];
            if (wn->promoted)
                ak_info ("batch %s: %s on %s: winner %s (task %s) %.3fx +- %.3f%s", b->batch_id, wn->op,
                         wn->device_class, wn->candidate_name, wn->task_id, wn->speedup, wn->noise,
                         wn->tied > 1 ? " (tie-break)" : "");
            else
                ak_info ("batch %s: %s on %s: no winner: %s", b->batch_id, wn->op, wn->device_class,
                         wn->reason);
        }
        ak_sched_complete (self->sched, b, winners, nwinners, now);
        self->wake.settled++;
    }
}
