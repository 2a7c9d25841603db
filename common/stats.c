/*  common/stats.c: sample statistics, weighted aggregates (stats.h). */
#include "stats.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* NaN sorts last so the order is total and qsort stays well-defined. */
static int s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    if (isnan (x))
        return isnan (y) ? 0 : 1;
    if (isnan (y))
        return -1;
    return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks (position p * (n - 1)). */
static double s_percentile (const double *sorted, size_t n, double p)
{
    double pos = p * (double) (n - 1);
    size_t lo = (size_t) floor (pos);
    if (lo >= n - 1)
        return sorted[n - 1];
    double frac = pos - (double) lo;
    return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

/*  Sorts a private copy of x for the order statistics; mean and stddev use
    a two-pass sum for accuracy. */
void ak_stats_compute (const double *x, size_t n, ak_stats_t *out)
{
    memset (out, 0, sizeof *out);
    if (n == 0 || !x)
        return;
    double *s = ak_malloc (n * sizeof (double));
    memcpy (s, x, n * sizeof (double));
    qsort (s, n, sizeof (double), s_cmp);

    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    double mean = sum / (double) n;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (s[i] - mean) * (s[i] - mean);

    out->n = n;
    out->min = s[0];
    out->mean = mean;
    out->stddev = n > 1 ? sqrt (ss / (double) (n - 1)) : 0.0;
    out->median = s_percentile (s, n, 0.5);
    out->p10 = s_percentile (s, n, 0.1);
    out->p90 = s_percentile (s, n, 0.9);
    free (s);
}

double ak_stats_rsd (const ak_stats_t *s)
{
    if (!s || s->mean == 0)
        return 0.0;
    return s->stddev / fabs (s->mean);
}

/* ============================================================= aggregates */

int ak_aggregate (const ak_wpoint_t *points, size_t n, ak_aggregate_t *out)
{
    memset (out, 0, sizeof *out);
    if (!points || n == 0)
        return AK_EINVAL;
    double wsum = 0, wbase = 0, wcand = 0;
    for (size_t i = 0; i < n; i++) {
        const ak_wpoint_t *p = &points[i];
        if (!isfinite (p->weight) || p->weight <= 0 || !isfinite (p->base_us) || p->base_us <= 0
            || !isfinite (p->cand_us) || p->cand_us <= 0)
            return AK_EINVAL;
        wsum += p->weight;
        wbase += p->weight * p->base_us;
        wcand += p->weight * p->cand_us;
    }
    if (!isfinite (wsum) || !isfinite (wbase) || !isfinite (wcand) || wcand <= 0)
        return AK_EINVAL;
    out->n = n;
    out->weight = wsum;
    out->base_us = wbase / wsum;
    out->cand_us = wcand / wsum;
    out->speedup = out->base_us / out->cand_us;
    return 0;
}
