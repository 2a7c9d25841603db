/*  worker/assign.h: what an ASSIGN asks of the worker.

    Predicates and derived values on an assignment (Ak__Assign) that the
    daemon (compile stage, receipts) and the executor (job.c) must answer
    the same way: which kernel is under test, which path a kind runs, and
    its policy with defaults and bounds.

    Never: read anything but the assignment; allocate. */
#ifndef AK_WORKER_ASSIGN_H
#define AK_WORKER_ASSIGN_H
#include <stdbool.h>
#include "akfleet.pb-c.h"
#include "policy.h"

/* Policy of an Assign with every zero field replaced by its default and
   warm-up / sample counts bounded (1000 / 100000) so that an absurd policy
   cannot exhaust the executor. */
void ak_assign_policy (const Ak__Policy *policy, ak_policy_t *out);

/*  Whether the kernel under test of the task is its candidate (tune, and
    profile when the assign carries a candidate source) rather than its
    baseline (preflight, profile of the baseline). */
bool ak_assign_tests_candidate (const Ak__Assign *a);

/*  Whether the task runs the tune path (candidate against the interleaved
    baseline, gates, timing, recheck): tune, and verify, which re-checks an
    installed profile entry the same way (docs/profiles.md "Verify"). */
bool ak_assign_is_tune (const Ak__Assign *a);

#endif
