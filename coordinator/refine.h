/*  coordinator/refine.h: the neighbours of a halving search's first-stage
    leaders (policy.search.refine; docs/measurement.md "Search").

    A first stage samples policy.search.budget configurations of a space of
    hundreds at random; the best of a space often sits one or two steps
    from a sampled leader, where a constraint ties two parameters (more
    threads a row for fewer loads a thread).  Once every first-stage task
    of an (op, class) is terminal, rounds.c plans here up to `refine`
    configurations around its leaders (the best by the aggregate, then
    each workload's own) and adds them to the first stage with the same
    short timing; the next stage then ranks the sample and the neighbours
    together.  Pure: no store, no clock. */
#ifndef AK_REFINE_H
#define AK_REFINE_H
#include <stddef.h>
#include <stdint.h>
#include "error.h"
#include "promote.h"
#include "spec.h"

/* One planned configuration: a neighbour of seeds[seed]. */
typedef struct {
    size_t  seed;                       /* index into the seeds: the task it copies */
    const ak_candidate_t *cand;         /* in the spec given */
    int64_t values[AK_MAX_PARAMS];      /* values[i] for cand->params[i] */
} ak_refine_new_t;

/*  Plans at most cap new configurations around seeds (in their order of
    precedence) into *out_p (*n_p of them, NULL for none; free() it): the neighbours of
    each seed (ak_space_neighbors: one parameter a step, then two in
    opposite directions), taken round-robin over the seeds (the first
    neighbour of each, then the second ...) so every leader gets some,
    none that `have` (the configurations the stage measured) or an earlier
    pick already holds.  A seed whose candidate the spec lacks, or whose
    params do not name each of the candidate's parameters with one of its
    values, contributes none (a record from an older spec).  AK_EINVAL
    only when a constraint fails to evaluate. */
int ak_refine_plan (const ak_spec_t *spec, const ak_promote_cand_t *seeds, size_t nseeds,
                    const ak_promote_cand_t *have, size_t nhave, size_t cap, ak_refine_new_t **out_p,
                    size_t *n_p, ak_err_t *err);

/* The params (a task's, a profile entry's; in any order) as values in
   cand's declaration order: false when one is missing. */
bool ak_refine_values (const ak_candidate_t *cand, Ak__Param *const *params, size_t nparams, int64_t *values);

#endif
