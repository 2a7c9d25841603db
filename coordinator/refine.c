/*  coordinator/refine.c: the neighbours of the first-stage leaders (refine.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "refine.h"
#include "space.h"
#include "util.h"

bool ak_refine_values (const ak_candidate_t *cand, Ak__Param *const *params, size_t nparams, int64_t *values)
{
    if (cand->nparams > AK_MAX_PARAMS)
        return false;
    for (size_t i = 0; i < cand->nparams; i++) {
        bool found = false;
        for (size_t k = 0; k < nparams && !found; k++)
            if (params[k] && params[k]->name && strcmp (params[k]->name, cand->params[i].name) == 0) {
                values[i] = params[k]->value;
                found = true;
            }
        if (!found)
            return false;
    }
    return true;
}

/* One seed's neighbours, in ak_space_neighbors' order. */
typedef struct {
    int64_t (*v)[AK_MAX_PARAMS];
    size_t  n, cap;
} s_list_t;

static int s_collect (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_list_t *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = ak_realloc (l->v, l->cap * sizeof *l->v);
    }
    memcpy (l->v[l->n++], values, cand->nparams * sizeof *values);
    return 0;
}

static bool s_same (const ak_candidate_t *cand, const int64_t *a, const int64_t *b)
{
    return memcmp (a, b, cand->nparams * sizeof *a) == 0;
}

/* A configuration the stage measured, in its candidate's order. */
typedef struct {
    const ak_candidate_t *cand;         /* NULL: not of this spec's candidates */
    int64_t values[AK_MAX_PARAMS];
} s_have_t;

/* Whether the stage or an earlier pick already holds values of cand. */
static bool s_held (const ak_candidate_t *cand, const int64_t *values, const s_have_t *have, size_t nhave,
                    const ak_refine_new_t *made, size_t nmade)
{
    for (size_t i = 0; i < nhave; i++)
        if (have[i].cand == cand && s_same (cand, have[i].values, values))
            return true;
    for (size_t i = 0; i < nmade; i++)
        if (made[i].cand == cand && s_same (cand, made[i].values, values))
            return true;
    return false;
}

int ak_refine_plan (const ak_spec_t *spec, const ak_promote_cand_t *seeds, size_t nseeds,
                    const ak_promote_cand_t *have, size_t nhave, size_t cap, ak_refine_new_t **out_p,
                    size_t *n_p, ak_err_t *err)
{
    *out_p = NULL;
    *n_p = 0;
    if (cap == 0 || nseeds == 0)
        return 0;
    s_list_t *lists = ak_calloc (nseeds, sizeof *lists);
    const ak_candidate_t **cands = ak_calloc (nseeds, sizeof *cands);
    int rc = 0;
    for (size_t s = 0; s < nseeds && rc == 0; s++) {
        const ak_candidate_t *cand = seeds[s].candidate_name ? ak_spec_candidate (spec, seeds[s].candidate_name)
                                                             : NULL;
        int64_t center[AK_MAX_PARAMS];
        if (!cand || cand->nparams == 0 || !ak_refine_values (cand, seeds[s].params, seeds[s].nparams, center)
            || !ak_space_in_lists (cand, center))
            continue;                   /* a configuration of an older spec: no neighbours */
        rc = ak_space_neighbors (cand, center, s_collect, &lists[s], err);
        cands[s] = cand;
    }
    ak_refine_new_t *out = NULL;
    size_t n = 0;
    s_have_t *hv = NULL;
    if (rc == 0) {
        /* what the stage holds, read once (not for every neighbour) */
        hv = ak_calloc (nhave ? nhave : 1, sizeof *hv);
        for (size_t i = 0; i < nhave; i++) {
            const ak_candidate_t *hc = have[i].candidate_name ? ak_spec_candidate (spec, have[i].candidate_name)
                                                              : NULL;
            if (hc && ak_refine_values (hc, have[i].params, have[i].nparams, hv[i].values))
                hv[i].cand = hc;
        }
        out = ak_calloc (cap, sizeof *out);
        bool more = true;
        for (size_t round = 0; more && n < cap; round++) {
            more = false;
            for (size_t s = 0; s < nseeds && n < cap; s++) {
                if (!cands[s] || round >= lists[s].n)
                    continue;
                more = true;
                const int64_t *v = lists[s].v[round];
                if (s_held (cands[s], v, hv, nhave, out, n))
                    continue;
                out[n].seed = s;
                out[n].cand = cands[s];
                memcpy (out[n].values, v, cands[s]->nparams * sizeof *v);
                n++;
            }
        }
    }
    for (size_t s = 0; s < nseeds; s++)
        free (lists[s].v);
    free (lists);
    free (hv);
    free (cands);
    if (rc || n == 0) {
        free (out);
        return rc;
    }
    *out_p = out;
    *n_p = n;
    return 0;
}
