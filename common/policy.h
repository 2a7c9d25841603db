/*  common/policy.h: a batch's policy (docs/formats.md "Manifest",
    "policy"): attempts, timeouts and leases, the timing budget, the
    promotion thresholds, the seed and the search.

    Read from the "policy" object of a manifest (every field optional over
    the defaults, each range-checked) and written in full into the bundle;
    the coordinator copies it into every task (Ak__Policy), where the
    worker reads it over the same defaults (worker/assign.c).

    Never: a field without a default, or a parsed value outside the ranges
    checked here. */
#ifndef AK_POLICY_H
#define AK_POLICY_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "error.h"

typedef struct {
    uint32_t max_attempts;        /* 3 */
    uint32_t compile_timeout_ms;  /* 60000 */
    uint32_t run_timeout_ms;      /* 60000 */
    uint32_t lease_ms;            /* 120000 */
    uint32_t warmup;              /* 3 */
    uint32_t min_samples;         /* 10 */
    uint32_t max_samples;         /* 200 */
    double   rsd_target;          /* 0.005 */
    uint32_t max_time_ms;         /* 2000 */
    double   threshold;           /* 0.03 */
    double   max_regression;      /* 0.05 */
    uint64_t seed;                /* 42 */
    /* search (coordinator/rounds.h, docs/measurement.md "Search") */
    char     search_strategy[16]; /* "" auto (exhaustive when the valid space fits the budget) | exhaustive | halving */
    uint32_t search_budget;       /* 64 configurations sampled per (candidate, op, class) */
    uint32_t search_keep;         /* 4 finalists timed in full */
    uint32_t search_rounds;       /* 2 stages of successive halving */
    uint32_t search_refine;       /* 0: neighbours of the first stage's leaders added to it, at most */
    bool     search_installed;    /* false: installed profile entries of the (op, class, candidate) seeded too */
    uint32_t short_max_time_ms;   /* 200: timing budget per workload in the short stages */
    bool     confirm;             /* true: finalists re-measured on another worker */
    double   implausible;         /* 10: speedups above are flagged and always confirmed */
} ak_policy_t;

/* The defaults (the comments above), every byte of *policy set. */
void ak_policy_defaults (ak_policy_t *policy);

/* obj (the manifest's "policy", NULL: absent) over the defaults into
   *policy.  AK_EINVAL with err naming label and "policy.FIELD". */
int ak_policy_parse (json_t *obj, const char *label, ak_policy_t *policy, ak_err_t *err);

/* Every field of policy as the "policy" object of a bundle (the search
   strategy only when set); caller decrefs. */
json_t *ak_policy_to_json (const ak_policy_t *policy);

#endif
