/*  coordinator/rounds.h: budgeted search (successive halving) and the
    confirmation round.

    Search.  Per (op, device class, candidate) the expansion (expand.c)
    picks a strategy from policy.search: `exhaustive` times every valid
    configuration in full (tune tasks at stage 0); `halving` samples
    search_budget configurations uniformly without replacement from the
    valid ones (constraints are evaluated by ak_space_walk before anything
    is compiled; the sample is a pure function of policy.seed, op, class and
    candidate) and times them as stage-1 tune tasks with the short timing
    policy.  The default ("" in the manifest) is exhaustive when the valid
    space has at most search_budget configurations, else halving.

    When every halving tune task of stage s < rounds of an (op, class) is
    terminal, the best ak_search_stage_size(s + 1) (search.h) of them that
    are ok (by their weighted speedup, ties by candidate name, params, task
    id; failed ones never go on) become stage s + 1 tune tasks; the last stage
    (`rounds`) keeps search_keep and runs the full timing policy.  Only
    stage-0 and last-stage receipts are candidates for promotion.

    Confirmation.  When every tune task of an (op, class) is terminal and
    no stage remains, the promotion rule (promote.h) is run over the final
    receipts; if it promotes, the finalists (the winner and the others in
    its tie band, in tie-break order, at most AK_ROUNDS_MAX_FINALISTS) get
    one `confirm` task each: the same configuration and workloads, the
    full timing policy with a fresh seed (fresh inputs), avoid_worker = the
    worker that measured it (the scheduler gives it to another live worker
    of the class when there is one, ak_sched_pop_for).  Confirm tasks are
    created when policy.confirm is set, and always when the provisional
    winner's speedup is above policy.implausible.  When the batch settles
    (results.c) the first finalist whose confirm receipt is still
    promotable wins, with the lower of its two measurements and
    Winner.confirmation saying whether they agree (ak_rounds_confirm_agrees);
    a refuted one passes to the next finalist, then to the baseline, with
    the reasons in Winner.reason.

    New tasks are created inside the write transaction of the group commit
    that accepted the receipt completing the stage (intake.c), so a crash
    either loses both (the worker re-sends the receipt) or keeps both;
    ak_rounds_advance with every pair of a batch (settle.c, when a batch
    settles) catches stages that ended without a receipt (a poisoned or
    cancelled task) and is idempotent: a stage that exists is never made
    again. */
#ifndef AK_ROUNDS_H
#define AK_ROUNDS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "promote.h"
#include "sched.h"
#include "store.h"

#define AK_ROUNDS_MAX_FINALISTS 3

// ------------------------------------------------------------ pure decisions

/* Indices of the best `keep` ok candidates (evals[i].ok) by speedup,
   ties by candidate name, params, task id; returns how many (<= keep). */
size_t ak_rounds_best (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                       size_t keep, size_t *out);

/* The workload leaders a halving stage carries on besides the best
   `keep` (kept[0..nkept)): for each workload (name, dtype) measured, the
   ok candidate fastest there alone (speedup s at that workload, ties as
   above), when it is not kept already, beats the baseline there
   (s >= 1 + threshold + its noise) and beats every kept candidate
   measured there outside both noise bands (s / s_k >= 1 + r + r_k, r the
   relative noises).  Without them the next stage (full timing, where
   workload picks are chosen) only sees configurations good on average,
   and the best one for a long row or for bfloat16 is lost at stage 1.
   Appended to out (distinct, at most cap); returns how many. */
size_t ak_rounds_leaders (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                          double threshold, const size_t *kept, size_t nkept, size_t *out, size_t cap);

/* The finalists of a promoted decision: every promotable candidate within
   the tie band of the best, in tie-break order (the winner first), at
   most AK_ROUNDS_MAX_FINALISTS.  0 when nothing is promotable. */
size_t ak_rounds_finalists (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                            size_t out[AK_ROUNDS_MAX_FINALISTS]);

/* One finalist's confirmation, for ak_rounds_confirm_decide. */
typedef struct {
    const char        *task_id;         /* the confirm task; NULL: none was made */
    const char        *state;
    const char        *last_error;
    const char        *avoid_worker;    /* the worker that measured the original */
    const Ak__Receipt *receipt;         /* its accepted receipt, NULL when none */
} ak_confirm_t;

/* Whether a confirmation agrees with the measurement it re-checks: their
   noise bands overlap, widened by threshold (the promotion threshold) of
   the lower figure:
       |measured - confirmed| <= measured_noise + confirmed_noise
                                 + threshold * min (measured, confirmed)
   A negative or non-finite noise or threshold counts as 0; a non-finite or
   non-positive figure never agrees.  *tolerance_p (may be NULL) gets the
   right-hand side. */
bool ak_rounds_confirm_agrees (double measured, double measured_noise, double confirmed,
                               double confirmed_noise, double threshold, double *tolerance_p);

/* Rewrites *winner (from ak_promote over cands/evals) after the
   confirmation round.  confirms[i] belongs to cands[i].  For each
   finalist in order: its confirm receipt promotable under rule -> it
   wins with the LOWER of its two measurements (speedup, noise and
   figures_receipt_id), confirmation "confirmed" (reason "confirmed on W
   ...") when ak_rounds_confirm_agrees, else "disagrees" (reason
   "confirmation disagrees: ..."); refuted -> the next one; none -> the
   baseline stays, reason "not confirmed: ...".  A winner without any
   confirm task is left as it is (confirmation off).
   Speedups above `implausible` are flagged in the reason; a confirm that
   ran on its avoid_worker says so ("the same worker: no other live
   worker of the class"). */
void ak_rounds_confirm_decide (const ak_promote_rule_t *rule, double implausible,
                               const ak_promote_cand_t *cands, const ak_promote_eval_t *evals,
                               const ak_confirm_t *confirms, size_t n, Ak__Winner *winner);

/* The confirmation of each workload pick of winner (promote.h) from the
   confirm task of its task in confirms (parallel to cands): "confirmed"
   when that receipt is ok and its speedup at the pick's workload agrees
   with the pick's (ak_rounds_confirm_agrees, threshold), "disagrees" when
   it does not, "" when there is none; confirmed_on the receipt's worker
   (the caller judges whether that is another worker). */
void ak_rounds_picks_confirm (double threshold, const ak_promote_cand_t *cands, const ak_confirm_t *confirms,
                              size_t n, Ak__Winner *winner);

// ------------------------------------------------------- store and index side

typedef struct {
    void            *memo;      /* rounds.c's summary of one (op, class) */
    uint64_t         reopens;   /* its batch's reopens when checked */
    Ak__Winner      *winner;    /* what the check decided; owned */
} ak_rounds_checked_t;

typedef struct {
    Ak__TaskRecord **tasks;     /* created, stored in the transaction; owned */
    size_t           n;
    size_t           cap;
    /* (op, class) pairs whose final check (confirm round or not) found
       nothing to create: ak_rounds_committed remembers them */
    ak_rounds_checked_t *checked;
    size_t           nchecked;
    size_t           cap_checked;
} ak_rounds_new_t;

/* Creates, in txn, the next stage or the confirm tasks of every (batch,
   op, class) of the tasks in `touched` (those whose receipts txn accepts;
   `finishing` says they count as terminal though the index still has them
   leased) whose stage is complete.  New records (ids after the batch's
   last, BatchRecord.ntasks updated) are appended to out; index them with
   ak_sched_extend only after txn committed. */
int ak_rounds_advance (ak_txn_t *txn, ak_sched_t *sched, ak_task_t *const *touched, size_t n,
                       uint64_t now_wall_ms, ak_rounds_new_t *out, ak_err_t *err);
/* Every (op, class) of batch, nothing `finishing` (settle.c, when settling). */
int ak_rounds_advance_batch (ak_txn_t *txn, ak_sched_t *sched, ak_batch_t *batch,
                             uint64_t now_wall_ms, ak_rounds_new_t *out, ak_err_t *err);
void ak_rounds_new_clear (ak_rounds_new_t *out);
/* After the transaction of ak_rounds_advance (or _batch) committed, or
   when nothing in it needed committing: the tasks created are indexed in
   sched (ak_sched_extend) and out is cleared; an (op, class) whose final check
   found nothing to create is not checked again (that check loads every
   task of the pair and its receipt: seconds for 100,000 tasks, which
   the settle-time pass repeated right after the commit that ended the
   batch) until its batch gains tasks or one of them leaves a terminal
   state (retry). */
void ak_rounds_committed (ak_rounds_new_t *out, ak_sched_t *sched);
/* Final checks run so far in this process (tests, diagnostics). */
uint64_t ak_rounds_final_checks (void);
/* The winners of batch, one per (op, class) in the order of the pair's
   first task id in the store (as ak_results_decide gives them: byte
   order, in which B000001.10000 comes before B000001.2000), copied from the final
   checks (the caller frees each and the array), when every pair of the
   batch had one on its tasks as they are and no confirmation round
   followed it.  False (nothing returned) otherwise: decide from the
   records then.  Settling a batch of 100,000 tasks this way reads none. */
bool ak_rounds_winners (ak_batch_t *batch, Ak__Winner ***winners_p, size_t *n_p);

#endif
