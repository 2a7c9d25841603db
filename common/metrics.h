/*  common/metrics.h: Prometheus text exposition (format 0.0.4) and a
    fixed-bucket histogram, for the metrics endpoints of akcoord and
    akworker (common/metrics_http.h serves what is built here).

    A program's loop renders its counters into an ak_mtext_t now and then
    and hands the text to the HTTP server; nothing here locks, allocates
    per observation or touches the network, so a histogram can sit on a
    hot path (ak_hist_observe is a short linear scan).

    Label values are escaped (backslash, double quote, newline), so a
    device class or a verb that came over the network cannot break the
    exposition.  Metric and label names are the caller's constants.

    Never: emit a sample without its family's HELP and TYPE lines before
    it; take a lock or block. */
#ifndef AK_METRICS_H
#define AK_METRICS_H
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"

// ================================================================ histogram

#define AK_HIST_MAX_BUCKETS 24

typedef struct {
    const double *le;                       /* upper bounds, ascending (borrowed, static) */
    size_t        nle;                      /* at most AK_HIST_MAX_BUCKETS */
    uint64_t      counts[AK_HIST_MAX_BUCKETS + 1];  /* per bucket, not cumulative; [nle]: +Inf */
    uint64_t      count;
    double        sum;
} ak_hist_t;

/* An empty histogram over the bounds le[0..nle) (nle clamped to
   AK_HIST_MAX_BUCKETS); le must outlive it. */
void ak_hist_init (ak_hist_t *h, const double *le, size_t nle);
/* Counts v in the first bucket whose bound is >= v (+Inf past the last). */
void ak_hist_observe (ak_hist_t *h, double v);
/* Bucket counts, cumulative as Prometheus has them: {"le":[...],
   "counts":[...], "count":N, "sum":S}; the last bound is "+Inf". */
json_t *ak_hist_json (const ak_hist_t *h);

// ============================================================== exposition

typedef struct {
    char   *data;
    size_t  len, cap;
} ak_mtext_t;

void ak_mtext_init (ak_mtext_t *t);
void ak_mtext_free (ak_mtext_t *t);
/* The text built so far (NUL-terminated; caller frees) and its length;
   t is empty again. */
char *ak_mtext_take (ak_mtext_t *t, size_t *len_p);

/* "# HELP name help" and "# TYPE name type" (type: counter, gauge,
   histogram, untyped). */
void ak_mtext_family (ak_mtext_t *t, const char *name, const char *type, const char *help);
/* One sample: name{k1="v1",...} value.  The labels are pairs of const
   char * (name, value) ending with NULL; a NULL value is written "". */
void ak_mtext_u64 (ak_mtext_t *t, const char *name, uint64_t value, ...);
void ak_mtext_dbl (ak_mtext_t *t, const char *name, double value, ...);
/* A histogram's samples (name_bucket{...,le="..."} cumulative, name_sum,
   name_count), each bound and the sum multiplied by scale (observations
   in ms exported in seconds: scale 0.001).  Labels as above. */
void ak_mtext_hist (ak_mtext_t *t, const char *name, const ak_hist_t *h, double scale, ...);
/* Appends formatted text as it is (no escaping). */
void ak_mtext_printf (ak_mtext_t *t, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

// ================================================================= parsing

/* One sample as parsed: its labels as written between the braces, the
   values unescaped again ("" for none). */
typedef struct {
    char   *name;
    char   *labels;                     /* k="v",k2="v2" */
    double  value;
} ak_msample_t;

typedef struct {
    ak_msample_t *v;
    size_t        n;
} ak_mparsed_t;

/* Parses and checks exposition text (metrics_parse.c): every sample
   belongs to a family whose HELP and TYPE came before it, one TYPE per
   family, names and labels well-formed, values numbers (NaN, +Inf, -Inf
   allowed), each histogram's buckets ascending in le and non-decreasing
   in count, ending with le="+Inf" equal to its _count.  AK_EPROTO with
   err naming the line.  Clear *out with ak_mparsed_clear (also on error). */
int ak_metrics_parse (const char *text, ak_mparsed_t *out, ak_err_t *err);
void ak_mparsed_clear (ak_mparsed_t *p);
/* The value of sample name{labels} (labels exactly as written; "" for
   none); NAN when there is none. */
double ak_mparsed_get (const ak_mparsed_t *p, const char *name, const char *labels);
/* The sum of the samples named name whose labels contain match (NULL:
   every one), and how many there were (*n_p; may be NULL). */
double ak_mparsed_sum (const ak_mparsed_t *p, const char *name, const char *match, size_t *n_p);

/* Debug builds: parses text and aborts, logging why, when it is not
   valid exposition (a renderer's bug). */
void ak_metrics_check_or_abort (const char *who, const char *text);

/* The bounds shared by the programs' duration histograms, in ms:
   0.05 ms to 10 s. */
extern const double ak_metrics_ms_buckets[];
extern const size_t ak_metrics_ms_nbuckets;

/* Receipt statuses as labels: the known ones (docs/measurement.md) keep
   their name, anything else counts as "other", so that a worker cannot
   make the label set grow. */
#define AK_STATUS_COUNT 10
extern const char *const ak_metrics_statuses[AK_STATUS_COUNT];    /* [AK_STATUS_COUNT-1]: "other" */
int ak_metrics_status_index (const char *status);

#endif
