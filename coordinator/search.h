/*  coordinator/search.h: what a budgeted search draws and how its stages
    shrink (rounds.h says what the search is).

    The expansion (expand.c) samples the configurations a halving search
    starts from and sizes its last stage; the rounds (rounds.c) size and
    time each later stage and seed confirm tasks from the same generator.
    Everything here is a pure function of its arguments: the same seed,
    salt and space give the same sample on every coordinator.

    Never: touch the store, the scheduler or the clock; include expand.h,
    rounds.h or sched.h (this module sits below them). */
#ifndef AK_SEARCH_H
#define AK_SEARCH_H
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "spec.h"

// ---------------------------------------------------------------- generator

/* The state of a generator seeded from seed and salt (a string that
   tells one use from another: "op/class/candidate", a task id). */
uint64_t ak_search_rng_seed (uint64_t seed, const char *salt);
/* The next 64 bits of the generator (splitmix64) at *state. */
uint64_t ak_search_rng_next (uint64_t *state);

// ------------------------------------------------------------------ sampling

typedef struct {
    size_t    nparams;
    size_t    valid;            /* valid configurations in the space */
    size_t    n;                /* sampled: min(budget, valid) */
    size_t    seeded;           /* the first `seeded` of them are seeds: the candidate's, then extra */
    size_t    extra;            /* of seeded, the extra ones (ak_search_sample_with) */
    int64_t  *values;           /* n * nparams: the seeds, then the others in walk order */
} ak_search_sample_t;

/* Samples min(budget, valid) configurations of cand without replacement:
   the candidate's seeds first (its "seeds", in their order, at most
   budget of them), then the rest of the budget drawn uniformly from the
   other configurations (reservoir sampling over ak_space_walk with a
   generator seeded from seed and salt), in walk order.  Clear with
   ak_search_sample_clear.  Errors of ak_space_walk come back as they are. */
int ak_search_sample (const ak_candidate_t *cand, uint64_t seed, const char *salt, size_t budget,
                      ak_search_sample_t *out, ak_err_t *err);
/* The same with nextra more seeds after the candidate's own (extra:
   nextra * nparams values, each a valid configuration, none equal to a
   seed before it: ak_expand's installed winners); out->seeded counts
   both, out->extra those of extra that were taken. */
int ak_search_sample_with (const ak_candidate_t *cand, const int64_t *extra, size_t nextra, uint64_t seed,
                           const char *salt, size_t budget, ak_search_sample_t *out, ak_err_t *err);
void ak_search_sample_clear (ak_search_sample_t *sample);

// ------------------------------------------------------------ stage sizing

/* Size of stage `stage` (1..rounds) when stage 1 has n1 tasks: geometric
   from n1 down to min(keep, n1) at stage `rounds`. */
uint32_t ak_search_stage_size (uint32_t n1, uint32_t keep, uint32_t rounds, uint32_t stage);

/* Turns a full timing policy into the one of `stage` (1..rounds-1: short
   timing, max_time_ms = short_max_time_ms doubled per stage and at most
   max_time_ms, max_samples a quarter; rounds: unchanged). */
void ak_search_stage_policy (Ak__Policy *policy, uint32_t stage);

#endif
