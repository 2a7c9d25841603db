/*  common/policy.c: a batch's policy (policy.h). */
#include "policy.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "jpath.h"

void ak_policy_defaults (ak_policy_t *policy)
{
    if (!policy)
        return;
    memset (policy, 0, sizeof *policy);     /* padding too: the struct may be hashed */
    policy->max_attempts = 3;
    policy->compile_timeout_ms = 60000;
    policy->run_timeout_ms = 60000;
    policy->lease_ms = 120000;
    policy->warmup = 3;
    policy->min_samples = 10;
    policy->max_samples = 200;
    policy->rsd_target = 0.005;
    policy->max_time_ms = 2000;
    policy->threshold = 0.03;
    policy->max_regression = 0.05;
    policy->seed = 42;
    policy->search_budget = 64;
    policy->search_keep = 4;
    policy->search_rounds = 2;
    policy->short_max_time_ms = 200;
    policy->confirm = true;
    policy->implausible = 10.0;
}

/*  One range-checked uint32 member of a policy object. */
typedef struct {
    const char *name;
    size_t      off;                    /* in ak_policy_t */
    uint32_t    min, max;
} s_u32_t;

/*  The members of obj (at path parent) that t names, each an integer in
    [min, max], into pol; absent ones keep their value. */
static int s_parse_u32s (json_t *obj, const s_u32_t *t, size_t n, const char *label,
                         const char *parent, ak_policy_t *pol, ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    for (size_t i = 0; i < n; i++) {
        json_t *v;
        int rc = ak_jpath_get (obj, t[i].name, JSON_INTEGER, false, label, parent, &v, err);
        if (rc)
            return rc;
        if (!v)
            continue;
        json_int_t x = json_integer_value (v);
        if (x < (json_int_t) t[i].min || x > (json_int_t) t[i].max)
            return ak_jpath_bad (err, label, ak_jpath_field (p, parent, t[i].name),
                                 "must be an integer in [%u, %u]", t[i].min, t[i].max);
        *(uint32_t *) ((char *) pol + t[i].off) = (uint32_t) x;
    }
    return 0;
}

/*  policy.search {strategy, budget, keep, rounds, short_max_time_ms, refine, installed},
    policy.confirm and policy.implausible: over the defaults, range-checked. */
static int s_parse_search (json_t *obj, const char *label, ak_policy_t *pol, ak_err_t *err)
{
    static const s_u32_t u32[] = {
        { "budget",            offsetof (ak_policy_t, search_budget),     1, 100000 },
        { "keep",              offsetof (ak_policy_t, search_keep),       1, 100000 },
        { "rounds",            offsetof (ak_policy_t, search_rounds),     2, 16 },
        { "short_max_time_ms", offsetof (ak_policy_t, short_max_time_ms), 1, UINT32_MAX },
        { "refine",            offsetof (ak_policy_t, search_refine),     0, 1024 },
    };
    static const char *const fields[] = { "strategy", "budget", "keep", "rounds", "short_max_time_ms", "refine",
                                          "installed", NULL };
    json_t *search = NULL, *v;
    const char *strategy = NULL;
    int rc;
    if ((rc = ak_jpath_get (obj, "confirm", JSON_TRUE, false, label, "policy", &v, err)) != 0)
        return rc;
    if (v)
        pol->confirm = json_is_true (v);
    if ((rc = ak_jpath_get (obj, "implausible", JSON_REAL, false, label, "policy", &v, err)) != 0)
        return rc;
    if (v) {
        double x = json_number_value (v);
        if (!isfinite (x) || x <= 1.0 || x > 1e6)
            return ak_jpath_bad (err, label, "policy.implausible", "must be in (1, 1e6]");
        pol->implausible = x;
    }
    if ((rc = ak_jpath_get (obj, "search", JSON_OBJECT, false, label, "policy", &search, err)) != 0)
        return rc;
    if (!search)
        return 0;
    if ((rc = ak_jpath_only (search, fields, label, "policy.search", err)) != 0)
        return rc;
    if ((rc = ak_jpath_get_str (search, "strategy", false, label, "policy.search", &strategy, err)) != 0)
        return rc;
    if (strategy) {
        if (strcmp (strategy, "exhaustive") != 0 && strcmp (strategy, "halving") != 0)
            return ak_jpath_bad (err, label, "policy.search.strategy",
                                 "must be \"exhaustive\" or \"halving\"");
        snprintf (pol->search_strategy, sizeof pol->search_strategy, "%s", strategy);
    }
    rc = s_parse_u32s (search, u32, sizeof u32 / sizeof u32[0], label, "policy.search", pol, err);
    if (rc)
        return rc;
    if ((rc = ak_jpath_get (search, "installed", JSON_TRUE, false, label, "policy.search", &v, err)) != 0)
        return rc;
    if (v)
        pol->search_installed = json_is_true (v);
    if (pol->search_keep > pol->search_budget)
        return ak_jpath_bad (err, label, "policy.search.keep", "must not exceed policy.search.budget "
                             "(%u > %u)", pol->search_keep, pol->search_budget);
    return 0;
}

/*  policy: every field optional over ak_policy_defaults, each range-checked. */
int ak_policy_parse (json_t *obj, const char *label, ak_policy_t *pol, ak_err_t *err)
{
    static const s_u32_t u32[] = {
        { "max_attempts",       offsetof (ak_policy_t, max_attempts),       1, UINT32_MAX },
        { "compile_timeout_ms", offsetof (ak_policy_t, compile_timeout_ms), 1, UINT32_MAX },
        { "run_timeout_ms",     offsetof (ak_policy_t, run_timeout_ms),     1, UINT32_MAX },
        { "lease_ms",           offsetof (ak_policy_t, lease_ms),           1, UINT32_MAX },
        { "warmup",             offsetof (ak_policy_t, warmup),             0, UINT32_MAX },
        { "min_samples",        offsetof (ak_policy_t, min_samples),        2, UINT32_MAX },
        { "max_samples",        offsetof (ak_policy_t, max_samples),        2, UINT32_MAX },
        { "max_time_ms",        offsetof (ak_policy_t, max_time_ms),        1, UINT32_MAX },
    };
    static const struct { const char *name; size_t off; double lo; bool lo_open; double hi; } dbl[] = {
        { "rsd_target",     offsetof (ak_policy_t, rsd_target),     0, true,  1 },
        { "threshold",      offsetof (ak_policy_t, threshold),      0, false, 1 },
        { "max_regression", offsetof (ak_policy_t, max_regression), 0, false, 1 },
    };
    static const char *const fields[] = {
        "max_attempts", "compile_timeout_ms", "run_timeout_ms", "lease_ms", "warmup",
        "min_samples", "max_samples", "rsd_target", "max_time_ms", "threshold",
        "max_regression", "seed", "search", "confirm", "implausible", NULL };
    char p[AK_JPATH_MAX];
    json_t *v;
    int rc;

    ak_policy_defaults (pol);
    if (!obj)
        return 0;
    if ((rc = ak_jpath_only (obj, fields, label, "policy", err)) != 0)
        return rc;
    if ((rc = s_parse_u32s (obj, u32, sizeof u32 / sizeof u32[0], label, "policy", pol, err)) != 0)
        return rc;
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++) {
        if ((rc = ak_jpath_get (obj, dbl[i].name, JSON_REAL, false, label, "policy", &v, err)) != 0)
            return rc;
        if (!v)
            continue;
        double x = json_number_value (v);
        if (!isfinite (x) || (dbl[i].lo_open ? x <= dbl[i].lo : x < dbl[i].lo) || x >= dbl[i].hi)
            return ak_jpath_bad (err, label, ak_jpath_field (p, "policy", dbl[i].name),
                                 "must be in %s%g, %g)", dbl[i].lo_open ? "(" : "[", dbl[i].lo, dbl[i].hi);
        *(double *) ((char *) pol + dbl[i].off) = x;
    }
    if ((rc = ak_jpath_get (obj, "seed", JSON_INTEGER, false, label, "policy", &v, err)) != 0)
        return rc;
    if (v) {
        if (json_integer_value (v) < 0)
            return ak_jpath_bad (err, label, "policy.seed", "must be a non-negative integer");
        pol->seed = (uint64_t) json_integer_value (v);
    }
    if (pol->min_samples > pol->max_samples)
        return ak_jpath_bad (err, label, "policy.min_samples", "must not exceed policy.max_samples "
                             "(%u > %u)", pol->min_samples, pol->max_samples);
    return s_parse_search (obj, label, pol, err);
}

json_t *ak_policy_to_json (const ak_policy_t *pol)
{
    json_t *policy = json_pack ("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:f, s:f, s:I}",
        "max_attempts", (json_int_t) pol->max_attempts,
        "compile_timeout_ms", (json_int_t) pol->compile_timeout_ms,
        "run_timeout_ms", (json_int_t) pol->run_timeout_ms,
        "lease_ms", (json_int_t) pol->lease_ms,
        "warmup", (json_int_t) pol->warmup,
        "min_samples", (json_int_t) pol->min_samples,
        "max_samples", (json_int_t) pol->max_samples,
        "rsd_target", pol->rsd_target,
        "max_time_ms", (json_int_t) pol->max_time_ms,
        "threshold", pol->threshold,
        "max_regression", pol->max_regression,
        "seed", (json_int_t) (pol->seed > (uint64_t) INT64_MAX ? INT64_MAX : pol->seed));
    json_t *search = json_pack ("{s:I, s:I, s:I, s:I}",
        "budget", (json_int_t) pol->search_budget, "keep", (json_int_t) pol->search_keep,
        "rounds", (json_int_t) pol->search_rounds, "short_max_time_ms", (json_int_t) pol->short_max_time_ms);
    if (pol->search_strategy[0])
        json_object_set_new (search, "strategy", json_string (pol->search_strategy));
    if (pol->search_refine)
        json_object_set_new (search, "refine", json_integer ((json_int_t) pol->search_refine));
    if (pol->search_installed)
        json_object_set_new (search, "installed", json_true ());
    json_object_set_new (policy, "search", search);
    json_object_set_new (policy, "confirm", json_boolean (pol->confirm));
    json_object_set_new (policy, "implausible", json_real (pol->implausible));
    return policy;
}
