/*  common/stats.h: sample statistics for timing, and the weighted
    aggregate over workloads (docs/measurement.md "Weighted aggregates").

    ak_aggregate is the one definition of a weighted aggregate over
    workloads: the promotion rule (coordinator/promote.c) and the reports
    use the same formula, so a report's speedup is the promoted one.

    Never: a second formula for an aggregate speedup elsewhere, or an
    aggregate over a point whose weight or median is not finite and > 0. */
#ifndef AK_STATS_H
#define AK_STATS_H
#include <stddef.h>

typedef struct {
    size_t n;
    double median, min, mean, stddev, p10, p90;
} ak_stats_t;

/* Computes statistics of x[0..n) (x is not modified).  n == 0 gives zeros.
   stddev is the sample standard deviation (n-1); percentiles interpolate linearly. */
void ak_stats_compute (const double *x, size_t n, ak_stats_t *out);

/* Relative standard deviation stddev/mean (0 when mean is 0). */
double ak_stats_rsd (const ak_stats_t *s);

/* ------------------------------------------------------------- aggregates */
typedef struct {
    double weight;                      /* > 0 */
    double base_us;                     /* baseline median, > 0 */
    double cand_us;                     /* candidate median, > 0 */
} ak_wpoint_t;

typedef struct {
    size_t n;                           /* workloads aggregated */
    double weight;                      /* sum of weights */
    double base_us;                     /* sum(w * base) / sum(w) */
    double cand_us;                     /* sum(w * cand) / sum(w) */
    double speedup;                     /* base_us / cand_us */
} ak_aggregate_t;

/* The weighted aggregate of n points (n >= 1).  AK_EINVAL (out zeroed)
   when a weight or median is not a finite positive number. */
int ak_aggregate (const ak_wpoint_t *points, size_t n, ak_aggregate_t *out);

#endif
