/*  coordinator/promote.h: the promotion rule, as a pure function.

    Given every tune task of one (operator, device class) with its accepted
    receipt, decide the winner.  Over the op's workloads with their weights w:
        weighted_base = sum(w * baseline median) / sum(w)
        weighted_cand = sum(w * candidate median) / sum(w)
        speedup       = weighted_base / weighted_cand
        noise         = speedup * sum(w * speedup_noise_i / speedup_i) / sum(w)
    where baseline and candidate medians are the interleaved pair of the tune
    receipt (same executor), never the preflight's, and speedup_i,
    speedup_noise_i are the workload's measured speedup and its absolute
    noise band (docs/measurement.md; baseline / candidate median when the
    receipt has no usable speedup).  A candidate (status ok,
    every gate passed or skipped, valid timings) is promotable iff
        speedup >= 1 + threshold + noise,
        no workload has candidate median > (1 + max_regression) * baseline, and,
        when an incumbent weighted time is given, incumbent / weighted_cand
        >= 1 + threshold + (its noise, same relative noise).
    Among the promotable, every candidate whose speedup is within
    max(noise_best, noise_i) of the best one is in the tie band; the band is
    ordered by candidate name, then params (values ascending), then task id,
    and the first wins.  Winner.tied is the size of the band (1: a clear win).

    Workload picks (Winner.picks, ak_promote_picks).  One configuration
    rarely suits every workload (a 4096-element row and a 32000-element
    one, float32 and bfloat16), so after the winner is decided each
    workload (name, dtype) may get its own: with s the speedup a candidate
    measured at that workload alone over the baseline (interleaved, in its
    own task) and r = noise / s, an ok candidate other than the winner is
    eligible at the workload iff
        s >= 1 + threshold + noise                   (beats the baseline), and
        s / s_ref >= 1 + threshold + r + r_ref       (beats what serves it now),
    where s_ref, r_ref are the winner's figures at the workload, or 1 and
    0 (the baseline) when nothing was promoted.  The fastest eligible one
    is the pick; candidates within max(noise) of it tie, broken as above.
    A workload nobody beats that way has no pick.  The candidates are the
    ones the winner was chosen among (full timing), so a pick was measured
    as carefully as the winner; a profile installs it for that workload
    only (docs/profiles.md), and, like the winner, only when another
    worker's confirm receipt agrees or with --unconfirmed.

    Receipts are untrusted: NaN, zero or negative timings make a candidate
    not ok with a reason, never a crash.  No allocation escapes except the
    Winner, and nothing here touches the store or the network. */
#ifndef AK_PROMOTE_H
#define AK_PROMOTE_H
#include <stdbool.h>
#include <stddef.h>
#include "akfleet.pb-c.h"
#include "pbwire.h"
#include "store.h"

typedef struct {
    const char        *task_id;
    const char        *candidate_name;  /* from the task record */
    Ak__Param *const  *params;          /* from the task record */
    size_t             nparams;
    const char        *state;           /* task state: done | failed | poisoned | cancelled | ... */
    const char        *last_error;      /* task's last error, for reasons; may be NULL */
    const Ak__Receipt *receipt;         /* accepted receipt, NULL when none */
} ak_promote_cand_t;

typedef struct {
    double threshold;                   /* 0.03 */
    double max_regression;              /* 0.05 */
    bool   has_incumbent;               /* none yet: false */
    double incumbent_us;                /* incumbent's weighted time on the same workloads */
} ak_promote_rule_t;

typedef struct {
    bool   ok;                          /* ran, passed the gates, timings valid */
    bool   promotable;
    double speedup;                     /* 0 when not ok */
    double noise;
    double weighted_base_us;
    double weighted_cand_us;
    char   status[32];                  /* receipt status, or the task state without one */
    char   reason[320];                 /* why not ok / not promotable; "" when promotable */
} ak_promote_eval_t;

/* Decides the Winner of (op, device_class) over cands[0..n).  evals (may be
   NULL) gets one evaluation per candidate, in the same order.  *winner_p is
   the caller's (ak__winner__free_unpacked).  Returns 0. */
int ak_promote (const char *op, const char *device_class, const ak_promote_rule_t *rule,
                const ak_promote_cand_t *cands, size_t n,
                ak_promote_eval_t *evals, Ak__Winner **winner_p);

/* (Re)decides win->picks over the same cands and their evals (ak_promote
   calls it; call it again after anything that changes the winner, such as
   ak_rounds_confirm_decide).  Returns the number of picks. */
size_t ak_promote_picks (const ak_promote_rule_t *rule, const ak_promote_cand_t *cands,
                         const ak_promote_eval_t *evals, size_t n, Ak__Winner *win);

/* The speedup and its noise candidate receipt r measured at workload
   (name, dtype); false when r has no valid timing there. */
bool ak_promote_at (const Ak__Receipt *r, const char *workload, const char *dtype, double *speedup,
                    double *noise);

/* The workloads (name, dtype) the ok candidates' receipts measured, in
   order of first sight, pointing into those receipts; *nw_p gets how many.
   The array is the caller's (free); NULL when there are none. */
const Ak__Workload **ak_promote_workloads (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                                          size_t *nw_p);
/* The tie-break order of candidates (negative: a first): candidate name,
   params ascending, task id. */
int ak_promote_tiebreak (const ak_promote_cand_t *a, const ak_promote_cand_t *b);

/* Evaluates one candidate (the first half of ak_promote). */
void ak_promote_eval (const ak_promote_rule_t *rule, const ak_promote_cand_t *cand,
                      ak_promote_eval_t *eval);

/* The top-level fields of a TaskRecord and of a Receipt that deciding a
   pair reads (ak_promote, the confirmation round, rounds.h, results.h);
   the passes over a whole batch decode only these (ak_store_get_only).
   A decision that reads another field must add it here: debug builds
   decide every such pass from full records too and compare. */
const ak_pbw_set_t *ak_promote_task_fields (void);
const ak_pbw_set_t *ak_promote_receipt_fields (void);

/* The accepted receipt of task into *r_p (NULL when it has none), with
   only the fields above unless full; one that is missing or undecodable is
   logged and taken as none.  0, or the store's other errors. */
int ak_promote_receipt_of (ak_txn_t *txn, const Ak__TaskRecord *task, bool full, Ak__Receipt **r_p,
                           ak_err_t *err);

#endif
