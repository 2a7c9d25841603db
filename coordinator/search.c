/*  coordinator/search.c: sampling a parameter space and sizing the stages
    of a halving search (see search.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "search.h"
#include "space.h"
#include "util.h"

// ---------------------------------------------------------------- generator

uint64_t ak_search_rng_next (uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t s_fnv (const char *text)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *) (text ? text : ""); *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

uint64_t ak_search_rng_seed (uint64_t seed, const char *salt)
{
    return seed ^ s_fnv (salt);
}

// ------------------------------------------------------------------ sampling

typedef struct {
    size_t    budget;           /* drawn beside the seeds */
    size_t    np;
    size_t    seen;             /* configurations not a seed */
    size_t    valid;            /* every valid configuration */
    const int64_t *seeds;       /* taken already: not drawn again */
    size_t    nseeds;
    uint64_t  state;
    uint64_t *index;            /* walk position of each slot */
    int64_t  *values;
} s_reservoir_t;

/* Algorithm R: after i items every one is in the reservoir with
   probability budget / i, independently of the walk order's structure. */
static int s_on_sample (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    (void) cand;
    s_reservoir_t *r = arg;
    r->valid++;
    for (size_t k = 0; k < r->nseeds; k++)
        if (memcmp (r->seeds + k * r->np, values, r->np * sizeof *values) == 0)
            return 0;
    if (r->budget == 0)
        return 0;
    size_t i = r->seen++, slot = i;
    if (i >= r->budget) {
        uint64_t j = ak_search_rng_next (&r->state) % (uint64_t) (i + 1);
        if (j >= r->budget)
            return 0;
        slot = (size_t) j;
    }
    r->index[slot] = i;
    memcpy (r->values + slot * r->np, values, r->np * sizeof *values);
    return 0;
}

int ak_search_sample (const ak_candidate_t *cand, uint64_t seed, const char *salt, size_t budget,
                      ak_search_sample_t *out, ak_err_t *err)
{
    return ak_search_sample_with (cand, NULL, 0, seed, salt, budget, out, err);
}

int ak_search_sample_with (const ak_candidate_t *cand, const int64_t *extra, size_t nextra, uint64_t seed,
                           const char *salt, size_t budget, ak_search_sample_t *out, ak_err_t *err)
{
    memset (out, 0, sizeof *out);
    size_t np = cand->nparams < AK_MAX_PARAMS ? cand->nparams : AK_MAX_PARAMS;
    budget = budget ? budget : 1;
    /* the seeds, the candidate's (ak_space_parse checked them against
       this space) then extra, at most budget of them together */
    size_t nown = cand->seeds && np == cand->nparams ? cand->nseeds : 0;
    nown = nown < budget ? nown : budget;
    size_t nx = extra && np == cand->nparams ? nextra : 0;
    nx = nx < budget - nown ? nx : budget - nown;
    size_t nseeds = nown + nx;
    int64_t *values = ak_calloc (budget * (np ? np : 1), sizeof *values);
    if (nown)
        memcpy (values, cand->seeds, nown * np * sizeof *values);
    if (nx)
        memcpy (values + nown * np, extra, nx * np * sizeof *values);
    s_reservoir_t r = { .budget = budget - nseeds, .np = np, .seeds = values, .nseeds = nseeds };
    r.state = ak_search_rng_seed (seed, salt);
    r.index = ak_calloc (r.budget ? r.budget : 1, sizeof *r.index);
    r.values = values + nseeds * np;
    int rc = ak_space_walk (cand, s_on_sample, &r, NULL, err);
    if (rc) {
        free (r.index);
        free (values);
        return rc;
    }
    size_t n = r.seen < r.budget ? r.seen : r.budget;
    /* back into walk order (insertion sort on slots: n is a budget) */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && r.index[j - 1] > r.index[j]; j--) {
            uint64_t t = r.index[j];
            r.index[j] = r.index[j - 1];
            r.index[j - 1] = t;
            for (size_t k = 0; k < np; k++) {
                int64_t v = r.values[j * np + k];
                r.values[j * np + k] = r.values[(j - 1) * np + k];
                r.values[(j - 1) * np + k] = v;
            }
        }
    free (r.index);
    out->nparams = np;
    out->valid = r.valid;
    out->n = nseeds + n;
    out->seeded = nseeds;
    out->extra = nx;
    out->values = values;
    return 0;
}

void ak_search_sample_clear (ak_search_sample_t *sample)
{
    free (sample->values);
    memset (sample, 0, sizeof *sample);
}

// ------------------------------------------------------------ stage sizing

uint32_t ak_search_stage_size (uint32_t n1, uint32_t keep, uint32_t rounds, uint32_t stage)
{
    uint32_t k = keep < n1 ? keep : n1;
    if (k == 0)
        k = n1 ? 1 : 0;
    if (stage <= 1 || rounds < 2)
        return n1;
    if (stage >= rounds)
        return k;
    double f = pow ((double) k / (double) n1, (double) (stage - 1) / (double) (rounds - 1));
    uint32_t n = (uint32_t) ceil ((double) n1 * f - 1e-9);
    return n < k ? k : n > n1 ? n1 : n;
}

void ak_search_stage_policy (Ak__Policy *pol, uint32_t stage)
{
    uint32_t rounds = pol->search_rounds >= 2 ? pol->search_rounds : 2;
    if (stage == 0 || stage >= rounds)
        return;
    uint64_t t = pol->short_max_time_ms ? pol->short_max_time_ms : 200;
    t <<= (stage - 1 < 20 ? stage - 1 : 20);
    if (pol->max_time_ms && t > pol->max_time_ms)
        t = pol->max_time_ms;
    pol->max_time_ms = (uint32_t) t;
    uint32_t samples = pol->max_samples / 4;
    pol->max_samples = samples > pol->min_samples ? samples : pol->min_samples;
}
