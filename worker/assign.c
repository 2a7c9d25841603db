/*  worker/assign.c: what an ASSIGN asks of the worker (assign.h). */
#include "assign.h"

#include <math.h>
#include <string.h>

void ak_assign_policy (const Ak__Policy *p, ak_policy_t *out)
{
    ak_policy_defaults (out);
    if (!p)
        return;
    if (p->max_attempts)       out->max_attempts = p->max_attempts;
    if (p->compile_timeout_ms) out->compile_timeout_ms = p->compile_timeout_ms;
    if (p->run_timeout_ms)     out->run_timeout_ms = p->run_timeout_ms;
    if (p->lease_ms)           out->lease_ms = p->lease_ms;
    if (p->warmup)             out->warmup = p->warmup;
    if (p->min_samples)        out->min_samples = p->min_samples;
    if (p->max_samples)        out->max_samples = p->max_samples;
    if (p->rsd_target > 0 && isfinite (p->rsd_target))
        out->rsd_target = p->rsd_target;
    if (p->max_time_ms)        out->max_time_ms = p->max_time_ms;
    if (p->threshold > 0 && isfinite (p->threshold))
        out->threshold = p->threshold;
    if (p->max_regression > 0 && isfinite (p->max_regression))
        out->max_regression = p->max_regression;
    if (p->seed)               out->seed = p->seed;
    /* Bounds that keep an absurd policy from exhausting the executor. */
    if (out->warmup > 1000)
        out->warmup = 1000;
    if (out->max_samples > 100000)
        out->max_samples = 100000;
    if (out->min_samples > out->max_samples)
        out->min_samples = out->max_samples;
}

bool ak_assign_is_tune (const Ak__Assign *a)
{
    return a && a->kind && (strcmp (a->kind, "tune") == 0 || strcmp (a->kind, "verify") == 0);
}

bool ak_assign_tests_candidate (const Ak__Assign *a)
{
    if (!a || !a->kind)
        return false;
    if (ak_assign_is_tune (a))
        return true;
    return strcmp (a->kind, "profile") == 0 && a->candidate && a->candidate->text && a->candidate->text[0];
}
