/*  common/stats.h: sample statistics for timing. */
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

#endif
