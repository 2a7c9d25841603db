/*  coordinator/results.h: a batch's tasks and accepted receipts, grouped by
    (operator, device class), with the promotion rule applied.

    Reads only, inside the caller's transaction: used to decide the winners
    when a batch completes and to build `report`.  Records are untrusted
    (they came from disk): an undecodable one is skipped with an error log. */
#ifndef AK_RESULTS_H
#define AK_RESULTS_H
#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>
#include "akfleet.pb-c.h"
#include "arena.h"
#include "error.h"
#include "store.h"
#include "promote.h"

typedef struct {
    Ak__TaskRecord *task;               /* owned */
    Ak__Receipt    *receipt;            /* the accepted receipt, NULL when none */
} ak_result_task_t;

typedef struct {
    char               *op;
    char               *device_class;
    ak_result_task_t    preflight;      /* task NULL when the batch has none */
    ak_result_task_t   *tunes;
    size_t              ntunes;
    ak_promote_eval_t  *evals;          /* one per tune; a halving stage before the last is
                                           evaluated but never promotable */
    ak_result_task_t   *profiles;       /* profile tasks (op "profile": true), never promoted */
    size_t              nprofiles;
    ak_result_task_t   *confirms;       /* confirm tasks (rounds.h) */
    size_t              nconfirms;
    Ak__Winner         *winner;         /* owned */
} ak_result_pair_t;

typedef struct {
    Ak__BatchRecord  *batch;            /* owned */
    ak_result_pair_t *pairs;            /* in the order their first task appears */
    size_t            npairs;
    ak_arena_t       *arena;            /* the pairs' task records and receipts (arena.h) */
} ak_results_t;

/* The weighted aggregates of a pair for `report` (docs/measurement.md,
   "Weighted aggregates"): over the accepted tune receipt of the winner when
   one was promoted (its confirm receipt when the winner reports that one's
   figures, Winner.figures_receipt_id; "receipt_id" says which), else of the best candidate that ran ok, else over the
   preflight (baseline only).  {"source": "winner"|"best"|"preflight"|"none",
   "task_id", "candidate", "params", "rows": [{"dtype", "workloads", "weight",
   "baseline_us", "candidate_us", "speedup"}]}, one row per dtype in
   float16, bfloat16, float32 order and a last one with dtype "all" whose
   speedup is the promotion rule's (ak_aggregate).  Caller decrefs. */
json_t *ak_results_aggregates (const ak_result_pair_t *p, const Ak__Winner *winner);

/* The tune of p that ran ok (promote.h: passed its gates, valid timings)
   with the highest weighted speedup, first of equals, whether promotable
   or not; -1 when none did. */
ssize_t ak_results_best (const ak_result_pair_t *p);

/* Loads batch_id's results; AK_ENOTFOUND when there is no such batch. */
int ak_results_load (ak_txn_t *txn, const char *batch_id, ak_results_t **results_p, ak_err_t *err);
/* The same over the tasks task_ids[0..n) of the batch alone (those of
   one (op, class), for a page of `report`). */
int ak_results_load_tasks (ak_txn_t *txn, const char *batch_id, const char *const *task_ids, size_t n,
                           ak_results_t **results_p, ak_err_t *err);
/* The same with only the fields deciding reads (promote.h): for the
   winners alone (settling a batch); report and profiles need the rest. */
int ak_results_decide (ak_txn_t *txn, const char *batch_id, ak_results_t **results_p, ak_err_t *err);
/* True when res's pairs have exactly winners[0..n), in order (debug
   cross-checks of the ways a batch's winners are decided). */
bool ak_results_same_winners (const ak_results_t *res, Ak__Winner *const *winners, size_t n);
void ak_results_destroy (ak_results_t **self_p);

#endif
