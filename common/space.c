/*  common/space.c: shape, launch and parameter-space evaluation (space.h). */
#include "space.h"

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "expr.h"
#include "jpath.h"
#include "util.h"

#define S_MAX_VALUES      1024                /* values of one parameter */
#define S_MAX_SPACE       (1u << 16)          /* configurations before constraints */
#define S_MAX_CONSTRAINTS 32
#define S_MAX_SEEDS       16                  /* configurations a search always tries */
#define S_MAX_WALK_CHARS  (1u << 22)          /* configurations x constraint characters:
                                                 bounds the walk done on every parse (the
                                                 coordinator parses on its event loop) */
#define S_MAX_EXPR        1024                /* characters of one expression */

/*  Checks that text is an expression over names only. */
int ak_space_check_expr (const char *text, const char *const *names, int nnames,
                         const char *label, const char *path, ak_err_t *err)
{
    if (strlen (text) > S_MAX_EXPR)
        return ak_jpath_bad (err, label, path, "expression longer than %d characters", S_MAX_EXPR);
    ak_err_t sub = { 0 };
    if (ak_expr_check (text, names, nnames, &sub))
        return ak_jpath_bad (err, label, path, "invalid expression: %s", sub.msg);
    return 0;
}

/*  Variables for an expression over the shape: the keys, then b. */
static int s_shape_vars (const ak_spec_t *spec, const int64_t *dims, ak_dtype_t dt,
                         ak_var_t vars[AK_MAX_DIMS + 1])
{
    int n = 0;
    for (; n < spec->nkeys && n < AK_MAX_DIMS; n++)
        vars[n] = (ak_var_t) { spec->keys[n], dims[n] };
    vars[n++] = (ak_var_t) { "b", (int64_t) ak_dtype_size (dt) };
    return n;
}

int ak_spec_eval (const ak_spec_t *spec, const char *expr, const int64_t *dims, ak_dtype_t dt,
                  int64_t *out, ak_err_t *err)
{
    if (!spec || !expr || !dims || !out)
        return ak_err_set (err, AK_EINVAL, "ak_spec_eval: missing argument");
    if (ak_dtype_size (dt) == 0)
        return ak_err_set (err, AK_EINVAL, "ak_spec_eval: invalid dtype %d", (int) dt);
    ak_var_t vars[AK_MAX_DIMS + 1];
    int nvars = s_shape_vars (spec, dims, dt, vars);
    int rc = ak_expr_eval (expr, vars, nvars, out, err);
    if (rc)
        ak_err_prefix (err, "%s", spec->name ? spec->name : "spec");
    return rc;
}

/*  Counts stop at AK_SPEC_MAX_ELEMS, what a worker allocates per buffer
    (and small enough for the float64 buffers of the oracle). */
int ak_spec_check_shape (const ak_spec_t *spec, const int64_t *dims, const char *label,
                         const char *path, ak_err_t *err)
{
    for (int t = 0; t < spec->ndtypes; t++) {
        ak_var_t vars[AK_MAX_DIMS + 1];
        int nvars = s_shape_vars (spec, dims, spec->dtypes[t], vars);
        int64_t v, in_counts[AK_MAX_BUFS] = { 0 };
        ak_err_t sub = { 0 };
        for (int io = 0; io < 2; io++) {
            const ak_buf_t *bufs = io ? spec->outputs : spec->inputs;
            int n = io ? spec->noutputs : spec->ninputs;
            for (int i = 0; i < n; i++) {
                const char *what = io ? "outputs" : "inputs";
                if (ak_expr_eval (bufs[i].count, vars, nvars, &v, &sub))
                    return ak_jpath_bad (err, label, path, "%s[%d].count: %s", what, i, sub.msg);
                if (v < 1 || (uint64_t) v > AK_SPEC_MAX_ELEMS)
                    return ak_jpath_bad (err, label, path, "%s[%d].count '%s' is %lld (must be "
                                         "1 to %llu elements, what a worker allocates per buffer)",
                                         what, i, bufs[i].count, (long long) v,
                                         (unsigned long long) AK_SPEC_MAX_ELEMS);
                if (!io)
                    in_counts[i] = v;
                else if (spec->inplace && v != in_counts[i])
                    return ak_jpath_bad (err, label, path, "outputs[%d].count is %lld but inplace "
                                         "inputs[%d].count is %lld", i, (long long) v, i,
                                         (long long) in_counts[i]);
            }
        }
        const char *exprs[2] = { spec->flops, spec->bytes };
        for (int e = 0; e < 2; e++) {
            if (ak_expr_eval (exprs[e], vars, nvars, &v, &sub))
                return ak_jpath_bad (err, label, path, "%s (%s): %s", e ? "bytes" : "flops",
                                     ak_dtype_name (spec->dtypes[t]), sub.msg);
            if (v < 0)
                return ak_jpath_bad (err, label, path, "%s is negative (%lld)", e ? "bytes" : "flops",
                                     (long long) v);
        }
    }
    return 0;
}

/*  Variables of a launch rule: the keys, b, then the parameters. */
#define S_LAUNCH_VARS (AK_MAX_DIMS + 1 + AK_MAX_PARAMS)
#define S_LAUNCH_MAX  INT64_C (2147483647)

/*  One launch expression evaluated into lo..S_LAUNCH_MAX; where names the
    field ("launch.grid[1]") in the error. */
static int s_launch_value (const char *text, const ak_var_t *vars, int nvars, const char *where,
                           int64_t lo, uint32_t *out, ak_err_t *err)
{
    int64_t v = 0;
    ak_err_t sub = { 0 };
    if (ak_expr_eval (text, vars, nvars, &v, &sub))
        return ak_err_set (err, AK_EINVAL, "%s '%.200s': %s", where, text, sub.msg);
    if (v < lo || v > S_LAUNCH_MAX)
        return ak_err_set (err, AK_EINVAL, "%s '%.200s' = %lld: must be %lld..%lld", where, text,
                           (long long) v, (long long) lo, (long long) S_LAUNCH_MAX);
    *out = (uint32_t) v;
    return 0;
}

/*  The cluster dims of rule into cfg: each divides the grid's, at most 8
    blocks in all (the portable limit of a cluster). */
static int s_cluster (const ak_launch_rule_t *rule, const ak_var_t *vars, int nvars, ak_launch_cfg_t *cfg,
                      ak_err_t *err)
{
    char where[32];
    for (int i = 0; i < rule->ncluster; i++) {
        snprintf (where, sizeof where, "launch.cluster[%d]", i);
        int rc = s_launch_value (rule->cluster[i], vars, nvars, where, 1, &cfg->cluster[i], err);
        if (rc)
            return rc;
        if (cfg->grid[i] % cfg->cluster[i] != 0)
            return ak_err_set (err, AK_EINVAL, "launch.cluster: rule grid_multiple: grid.%c = %u is not a "
                               "multiple of cluster.%c = %u (the grid must be whole clusters)", "xyz"[i],
                               cfg->grid[i], "xyz"[i], cfg->cluster[i]);
    }
    uint64_t n = (uint64_t) cfg->cluster[0] * cfg->cluster[1] * cfg->cluster[2];
    if (n > 8)
        return ak_err_set (err, AK_EINVAL, "launch.cluster: rule cluster_size: %u x %u x %u = %llu blocks > 8 "
                           "(the portable cluster size)", cfg->cluster[0], cfg->cluster[1], cfg->cluster[2],
                           (unsigned long long) n);
    return 0;
}

/*  One expression of a tensor map into 1..2^40 (the check applies the
    rules' own bounds). */
static int s_tmap_value (const char *text, const ak_var_t *vars, int nvars, const char *name, const char *what,
                         int i, uint64_t *out, ak_err_t *err)
{
    int64_t v = 0;
    ak_err_t sub = { 0 };
    if (ak_expr_eval (text, vars, nvars, &v, &sub))
        return ak_err_set (err, AK_EINVAL, "tensor map %s: %s[%d] '%.200s': %s", name, what, i, text, sub.msg);
    if (v < 1 || v > (INT64_C (1) << 40))
        return ak_err_set (err, AK_EINVAL, "tensor map %s: rule %s: %s[%d] '%.200s' = %lld: must be 1..2^40",
                           name, what, what, i, text, (long long) v);
    *out = (uint64_t) v;
    return 0;
}

/*  Tensor map t evaluated for dims and dt into m, then checked. */
static int s_tmap (const ak_spec_t *spec, const ak_tmap_rule_t *t, const int64_t *dims, ak_dtype_t dt,
                   const ak_var_t *vars, int nvars, ak_tmap_cfg_t *m, ak_err_t *err)
{
    memset (m, 0, sizeof *m);
    snprintf (m->name, sizeof m->name, "%s", t->name);
    const char *count = NULL;
    for (int i = 0; i < spec->ninputs && !count; i++)
        if (ak_streq (spec->inputs[i].name, t->buffer)) {
            count = spec->inputs[i].count;
            m->buf = i;
        }
    for (int i = 0; i < spec->noutputs && !count; i++)
        if (ak_streq (spec->outputs[i].name, t->buffer)) {
            count = spec->outputs[i].count;
            m->buf = i;
            m->output = true;
        }
    if (!count || t->rank < 1 || t->rank > AK_TMAP_MAX_RANK
        || (t->nstrides != 0 && t->nstrides != t->rank - 1))
        return ak_err_set (err, AK_EINVAL, "tensor map %s: buffer '%s' unknown or rank %d", t->name,
                           t->buffer, t->rank);
    int64_t elems = 0;
    int rc = ak_spec_eval (spec, count, dims, dt, &elems, err);
    if (rc)
        return rc;
    m->rank = (uint32_t) t->rank;
    m->elem_bytes = (uint32_t) ak_dtype_size (dt);
    m->buf_bytes = (uint64_t) (elems > 0 ? elems : 0) * m->elem_bytes;
    m->swizzle = t->swizzle;
    m->l2 = t->l2;
    m->oob = t->oob;
    for (int i = 0; i < t->rank; i++) {
        uint64_t box = 0;
        if ((rc = s_tmap_value (t->dims[i], vars, nvars, t->name, "dims", i, &m->dims[i], err)) != 0
         || (rc = s_tmap_value (t->box[i], vars, nvars, t->name, "box", i, &box, err)) != 0)
            return rc;
        m->box[i] = box > UINT32_MAX ? UINT32_MAX : (uint32_t) box;
    }
    /* Strides as given, or contiguous (each the product of the dims inside
       it); a contiguous stride past 2^40 is left for the check to name. */
    for (int i = 0; i + 1 < t->rank; i++) {
        if (t->nstrides) {
            if ((rc = s_tmap_value (t->strides[i], vars, nvars, t->name, "strides", i, &m->strides[i], err)) != 0)
                return rc;
            continue;
        }
        uint64_t inner = i == 0 ? m->elem_bytes : m->strides[i - 1];
        m->strides[i] = inner > (UINT64_C (1) << 40) / m->dims[i] ? (UINT64_C (1) << 40) : inner * m->dims[i];
    }
    ak_err_t sub = { 0 };
    if (ak_tmap_check (m, t->optional ? &sub : err) == 0)
        return 0;
    if (!t->optional)
        return AK_EINVAL;
    m->absent = true;            /* the kernel takes its other path for this workload */
    return 0;
}

int ak_launch_eval (const ak_spec_t *spec, const ak_launch_rule_t *rule, const int64_t *dims,
                    ak_dtype_t dt, const char *const *names, const int64_t *values, int nparams,
                    ak_launch_cfg_t *out, ak_err_t *err)
{
    if (!spec || !rule || !dims || !out || (nparams > 0 && (!names || !values)))
        return ak_err_set (err, AK_EINVAL, "ak_launch_eval: missing argument");
    if (nparams < 0 || nparams > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "launch: %d parameters (limit %d)", nparams, AK_MAX_PARAMS);
    if (ak_dtype_size (dt) == 0)
        return ak_err_set (err, AK_EINVAL, "ak_launch_eval: invalid dtype %d", (int) dt);
    if (rule->ngrid < 1 || rule->ngrid > 3 || rule->nblock < 1 || rule->nblock > 3 || !rule->shared)
        return ak_err_set (err, AK_EINVAL, "launch: incomplete rule");
    ak_var_t vars[S_LAUNCH_VARS];
    int nvars = s_shape_vars (spec, dims, dt, vars);
    for (int i = 0; i < nparams; i++)
        vars[nvars++] = (ak_var_t) { names[i], values[i] };

    if (rule->ntmaps < 0 || rule->ntmaps > AK_MAX_TMAPS || rule->ncluster < 0 || rule->ncluster > 3)
        return ak_err_set (err, AK_EINVAL, "launch: %d tensor maps (limit %d), %d cluster dims", rule->ntmaps,
                           AK_MAX_TMAPS, rule->ncluster);
    ak_launch_cfg_t cfg = { .grid = { 1, 1, 1 }, .block = { 1, 1, 1 }, .cluster = { 1, 1, 1 } };
    char where[32];
    int rc = 0;
    for (int i = 0; i < rule->ngrid && !rc; i++) {
        snprintf (where, sizeof where, "launch.grid[%d]", i);
        rc = s_launch_value (rule->grid[i], vars, nvars, where, 1, &cfg.grid[i], err);
    }
    for (int i = 0; i < rule->nblock && !rc; i++) {
        snprintf (where, sizeof where, "launch.block[%d]", i);
        rc = s_launch_value (rule->block[i], vars, nvars, where, 1, &cfg.block[i], err);
    }
    if (!rc)
        rc = s_launch_value (rule->shared, vars, nvars, "launch.shared", 0, &cfg.shared_bytes, err);
    if (!rc)
        rc = s_cluster (rule, vars, nvars, &cfg, err);
    for (int i = 0; i < rule->ntmaps && !rc; i++)
        rc = s_tmap (spec, &rule->tmaps[i], dims, dt, vars, nvars, &cfg.tmaps[cfg.ntmaps++], err);
    if (!rc)
        *out = cfg;
    return rc;
}

/* ========================================================= parameter space */

/*  Whether values (values[i] for params[i]) satisfies every constraint:
    *ok.  On an evaluation error, *bad gets the index of the failing
    constraint and err its message with the configuration. */
static int s_valid (const ak_candidate_t *cand, const int64_t *values, bool *ok, size_t *bad, ak_err_t *err)
{
    ak_var_t vars[AK_MAX_PARAMS];
    size_t np = cand->nparams;
    for (size_t i = 0; i < np; i++)
        vars[i] = (ak_var_t) { cand->params[i].name, values[i] };
    *ok = true;
    for (size_t c = 0; c < cand->nconstraints && *ok; c++) {
        int64_t v = 0;
        ak_err_t sub = { 0 };
        if (ak_expr_eval (cand->constraints[c], vars, (int) np, &v, &sub)) {
            char at[256];
            size_t n = 0;
            at[0] = '\0';
            for (size_t i = 0; i < np && n < sizeof at; i++) {
                int w = snprintf (at + n, sizeof at - n, "%s%s=%lld", i ? ", " : "",
                                  cand->params[i].name, (long long) values[i]);
                if (w < 0)
                    break;
                n += (size_t) w;
            }
            if (bad)
                *bad = c;
            return ak_err_set (err, AK_EINVAL, "%s (at %s)", sub.msg, at);
        }
        *ok = v != 0;
        if (!*ok && bad)
            *bad = c;                   /* the constraint that is false */
    }
    return 0;
}

/*  Walks the cartesian product (last parameter fastest), evaluating the
    constraints of each configuration.  On an evaluation error, *bad gets the
    index of the failing constraint and err its message with the config. */
static int s_walk (const ak_candidate_t *cand, ak_space_fn *fn, void *arg, size_t *count,
                   size_t *bad, ak_err_t *err)
{
    size_t idx[AK_MAX_PARAMS] = { 0 };
    int64_t values[AK_MAX_PARAMS] = { 0 };
    size_t np = cand->nparams, valid = 0;
    int rc = 0;

    if (count)
        *count = 0;
    if (np > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "more than %d parameters", AK_MAX_PARAMS);
    for (size_t i = 0; i < np; i++)
        if (cand->params[i].nvalues == 0 || !cand->params[i].values)
            return ak_err_set (err, AK_EINVAL, "params.%s: no values", cand->params[i].name);
    for (;;) {
        for (size_t i = 0; i < np; i++)
            values[i] = cand->params[i].values[idx[i]];
        bool ok = true;
        if ((rc = s_valid (cand, values, &ok, bad, err)) != 0)
            return rc;
        if (ok) {
            valid++;
            if (count)
                *count = valid;
            if (fn && (rc = fn (cand, values, arg)) != 0)
                return rc;
        }
        /* Odometer: the last parameter turns fastest. */
        size_t i = np;
        while (i > 0) {
            i--;
            if (++idx[i] < cand->params[i].nvalues)
                break;
            idx[i] = 0;
            if (i == 0)
                return 0;
        }
        if (np == 0)
            return 0;
    }
}

int ak_space_walk (const ak_candidate_t *cand, ak_space_fn *fn, void *arg, size_t *count,
                   ak_err_t *err)
{
    if (!cand)
        return ak_err_set (err, AK_EINVAL, "ak_space_walk: no candidate");
    size_t bad = 0;
    ak_err_t sub = { 0 };
    int rc = s_walk (cand, fn, arg, count, &bad, &sub);
    if (rc && sub.msg[0]) {
        char name[AK_JPATH_SHOW];
        return ak_err_set (err, rc, "candidate %s: constraints[%zu]: %s",
                           ak_jpath_show (cand->name, name), bad, sub.msg);
    }
    return rc;
}

/* The index of v among param p's values, or -1. */
static ssize_t s_value_index (const ak_param_t *p, int64_t v)
{
    for (size_t k = 0; k < p->nvalues; k++)
        if (p->values[k] == v)
            return (ssize_t) k;
    return -1;
}

/* fn for the configuration center with param i moved by di steps and
   param j (j != i, or none: SIZE_MAX) by dj, where that stays in the
   value lists and satisfies the constraints. */
static int s_moved (const ak_candidate_t *cand, const int64_t *center, const ssize_t *at, size_t i, int di,
                    size_t j, int dj, ak_space_fn *fn, void *arg, size_t *bad, ak_err_t *err)
{
    ssize_t ki = at[i] + di, kj = j == SIZE_MAX ? 0 : at[j] + dj;
    if (ki < 0 || ki >= (ssize_t) cand->params[i].nvalues
        || (j != SIZE_MAX && (kj < 0 || kj >= (ssize_t) cand->params[j].nvalues)))
        return 0;
    int64_t values[AK_MAX_PARAMS];
    memcpy (values, center, cand->nparams * sizeof *values);
    values[i] = cand->params[i].values[ki];
    if (j != SIZE_MAX)
        values[j] = cand->params[j].values[kj];
    bool ok = false;
    int rc = s_valid (cand, values, &ok, bad, err);
    if (rc || !ok)
        return rc;
    return fn (cand, values, arg);
}

bool ak_space_in_lists (const ak_candidate_t *cand, const int64_t *values)
{
    if (!cand || !values || cand->nparams > AK_MAX_PARAMS)
        return false;
    for (size_t i = 0; i < cand->nparams; i++)
        if (s_value_index (&cand->params[i], values[i]) < 0)
            return false;
    return true;
}

bool ak_space_valid (const ak_candidate_t *cand, const int64_t *values)
{
    bool ok = false;
    ak_err_t sub = { 0 };
    return ak_space_in_lists (cand, values) && s_valid (cand, values, &ok, NULL, &sub) == 0 && ok;
}

int ak_space_neighbors (const ak_candidate_t *cand, const int64_t *center, ak_space_fn *fn, void *arg,
                        ak_err_t *err)
{
    if (!cand || !center || !fn)
        return ak_err_set (err, AK_EINVAL, "ak_space_neighbors: no candidate, configuration or callback");
    size_t np = cand->nparams;
    if (np > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "more than %d parameters", AK_MAX_PARAMS);
    char name[AK_JPATH_SHOW];
    ssize_t at[AK_MAX_PARAMS];
    for (size_t i = 0; i < np; i++)
        if ((at[i] = s_value_index (&cand->params[i], center[i])) < 0)
            return ak_err_set (err, AK_EINVAL, "candidate %s: %s=%lld is not one of its values",
                               ak_jpath_show (cand->name, name), cand->params[i].name, (long long) center[i]);
    size_t bad = 0;
    ak_err_t sub = { 0 };
    int rc = 0;
    /* one parameter a step down, then up */
    for (size_t i = 0; i < np && rc == 0; i++)
        for (int d = -1; d <= 1 && rc == 0; d += 2)
            rc = s_moved (cand, center, at, i, d, SIZE_MAX, 0, fn, arg, &bad, &sub);
    /* two parameters a step each, in opposite directions: the trades
       (more threads a row and fewer loads a thread ...) */
    for (size_t i = 0; i < np && rc == 0; i++)
        for (size_t j = i + 1; j < np && rc == 0; j++)
            for (int d = -1; d <= 1 && rc == 0; d += 2)
                rc = s_moved (cand, center, at, i, d, j, -d, fn, arg, &bad, &sub);
    if (rc && sub.msg[0])
        return ak_err_set (err, rc, "candidate %s: constraints[%zu]: %s", ak_jpath_show (cand->name, name), bad,
                           sub.msg);
    return rc;
}

/*  seeds: [{"NAME": value, ...}, ...], each a whole configuration of the
    space (every parameter named once, each value one of its list, every
    constraint true), no two alike: the configurations a halving search
    always takes into its first stage (ak_search_sample). */
static int s_seeds_parse (json_t *v, const char *label, const char *path, ak_candidate_t *cand, ak_err_t *err)
{
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX], r[AK_JPATH_MAX];
    json_t *seeds;
    int rc;
    if ((rc = ak_jpath_get (v, "seeds", JSON_ARRAY, false, label, path, &seeds, err)) != 0 || !seeds)
        return rc;
    ak_jpath_field (p, path, "seeds");
    size_t ns = json_array_size (seeds), np = cand->nparams;
    if (ns == 0 || ns > S_MAX_SEEDS)
        return ak_jpath_bad (err, label, p, "must hold 1 to %d configurations", S_MAX_SEEDS);
    if (np == 0)
        return ak_jpath_bad (err, label, p, "a candidate without parameters has no configurations to seed");
    cand->seeds = ak_calloc (ns * np, sizeof *cand->seeds);
    for (size_t k = 0; k < ns; k++) {
        json_t *o = json_array_get (seeds, k);
        int64_t *values = cand->seeds + k * np;
        ak_jpath_index (q, p, k);
        if (!json_is_object (o))
            return ak_jpath_bad (err, label, q, "must be an object of parameter values");
        const char *key;
        json_t *x;
        json_object_foreach (o, key, x) {
            size_t i = 0;
            while (i < np && strcmp (cand->params[i].name, key) != 0)
                i++;
            if (i == np)
                return ak_jpath_bad (err, label, ak_jpath_field (r, q, key), "not a parameter of the candidate");
            if (!json_is_integer (x))
                return ak_jpath_bad (err, label, ak_jpath_field (r, q, key), "must be an integer");
            values[i] = (int64_t) json_integer_value (x);
            if (s_value_index (&cand->params[i], values[i]) < 0)
                return ak_jpath_bad (err, label, ak_jpath_field (r, q, key), "%lld is not one of its values",
                                     (long long) values[i]);
        }
        for (size_t i = 0; i < np; i++)
            if (!json_object_get (o, cand->params[i].name))
                return ak_jpath_bad (err, label, ak_jpath_field (r, q, cand->params[i].name), "missing");
        bool ok = false;
        size_t bad = 0;
        ak_err_t sub = { 0 };
        if (s_valid (cand, values, &ok, &bad, &sub))
            return ak_jpath_bad (err, label, q, "%s", sub.msg);
        if (!ok)
            return ak_jpath_bad (err, label, q, "outside the space: constraints[%zu] (%s) is false", bad,
                                 cand->constraints[bad]);
        for (size_t j = 0; j < k; j++)
            if (memcmp (cand->seeds + j * np, values, np * sizeof *values) == 0)
                return ak_jpath_bad (err, label, q, "the same configuration as seeds[%zu]", j);
        cand->nseeds++;
    }
    return 0;
}

/*  params: {"NAME": [values...]} in declaration order; constraints:
    expressions over the parameter names. */
int ak_space_parse (json_t *v, const char *label, const char *path, ak_candidate_t *cand,
                    ak_err_t *err)
{
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *params, *constraints;
    int rc;

    if ((rc = ak_jpath_get (v, "params", JSON_OBJECT, false, label, path, &params, err)) != 0)
        return rc;
    ak_jpath_field (p, path, "params");
    size_t np = params ? json_object_size (params) : 0;
    if (np > AK_MAX_PARAMS)
        return ak_jpath_bad (err, label, p, "at most %d parameters", AK_MAX_PARAMS);
    cand->params = ak_calloc (np ? np : 1, sizeof *cand->params);
    const char *pname;
    json_t *vals;
    size_t space = 1;
    if (params)
        json_object_foreach (params, pname, vals) {
            ak_jpath_field (q, p, pname);
            if (!ak_name_param_ok (pname))
                return ak_jpath_bad (err, label, q, "parameter names must match [A-Z][A-Z0-9_]* "
                                     "(at most %d characters)", AK_MAX_NAME - 1);
            if (!json_is_array (vals) || json_array_size (vals) == 0)
                return ak_jpath_bad (err, label, q, "must be a non-empty array of integers");
            size_t nv = json_array_size (vals);
            if (nv > S_MAX_VALUES)
                return ak_jpath_bad (err, label, q, "at most %d values", S_MAX_VALUES);
            ak_param_t *param = &cand->params[cand->nparams++];
            param->name = ak_strdup (pname);
            param->values = ak_calloc (nv, sizeof *param->values);
            for (size_t i = 0; i < nv; i++) {
                json_t *e = json_array_get (vals, i);
                char r[AK_JPATH_MAX];
                if (!json_is_integer (e))
                    return ak_jpath_bad (err, label, ak_jpath_index (r, q, i), "must be an integer");
                int64_t x = (int64_t) json_integer_value (e);
                for (size_t j = 0; j < i; j++)
                    if (param->values[j] == x)
                        return ak_jpath_bad (err, label, ak_jpath_index (r, q, i),
                                             "duplicate value %lld", (long long) x);
                param->values[i] = x;
                param->nvalues++;
            }
            if (space > S_MAX_SPACE / nv)
                return ak_jpath_bad (err, label, p, "the parameter space has more than %u "
                                     "configurations", S_MAX_SPACE);
            space *= nv;
        }

    if ((rc = ak_jpath_get (v, "constraints", JSON_ARRAY, false, label, path, &constraints, err)) != 0)
        return rc;
    ak_jpath_field (p, path, "constraints");
    size_t nc = constraints ? json_array_size (constraints) : 0;
    if (nc > S_MAX_CONSTRAINTS)
        return ak_jpath_bad (err, label, p, "at most %d constraints", S_MAX_CONSTRAINTS);
    const char *names[AK_MAX_PARAMS];
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    cand->constraints = ak_calloc (nc ? nc : 1, sizeof *cand->constraints);
    for (size_t i = 0; i < nc; i++) {
        const char *text;
        ak_jpath_index (q, p, i);
        if ((rc = ak_jpath_str (json_array_get (constraints, i), label, q, &text, err)) != 0
         || (rc = ak_space_check_expr (text, names, (int) cand->nparams, label, q, err)) != 0)
            return rc;
        cand->constraints[cand->nconstraints++] = ak_strdup (text);
    }
    size_t chars = 0;
    for (size_t i = 0; i < cand->nconstraints; i++)
        chars += strlen (cand->constraints[i]) + 1;
    if (chars && space > S_MAX_WALK_CHARS / chars)
        return ak_jpath_bad (err, label, p, "too much to check: %zu configurations x %zu characters "
                             "of constraints (limit %u)", space, chars, S_MAX_WALK_CHARS);
    size_t valid = 0, bad = 0;
    ak_err_t sub = { 0 };
    if (s_walk (cand, NULL, NULL, &valid, &bad, &sub))
        return ak_jpath_bad (err, label, ak_jpath_index (q, p, bad), "%s", sub.msg);
    if (valid == 0)
        return ak_jpath_bad (err, label, p, "no configuration of the parameter space satisfies them");
    return s_seeds_parse (v, label, path, cand, err);
}
