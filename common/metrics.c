/*  common/metrics.c: Prometheus text exposition and fixed-bucket
    histograms (see metrics.h). */
#include "metrics.h"
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

const double ak_metrics_ms_buckets[] = {
    0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 2500, 10000,
};
const size_t ak_metrics_ms_nbuckets = sizeof ak_metrics_ms_buckets / sizeof ak_metrics_ms_buckets[0];

const char *const ak_metrics_statuses[AK_STATUS_COUNT] = {
    "ok", "compile_error", "invalid_config", "launch_error", "wrong_answer", "nan", "timeout",
    "crashed", "error", "other",
};

int ak_metrics_status_index (const char *status)
{
    for (int i = 0; status && i < AK_STATUS_COUNT - 1; i++)
        if (strcmp (status, ak_metrics_statuses[i]) == 0)
            return i;
    return AK_STATUS_COUNT - 1;
}

// ================================================================ histogram

void ak_hist_init (ak_hist_t *h, const double *le, size_t nle)
{
    memset (h, 0, sizeof *h);
    h->le = le;
    h->nle = nle > AK_HIST_MAX_BUCKETS ? AK_HIST_MAX_BUCKETS : nle;
}

void ak_hist_observe (ak_hist_t *h, double v)
{
    size_t i = 0;
    while (i < h->nle && v > h->le[i])
        i++;
    h->counts[i]++;
    h->count++;
    if (isfinite (v))
        h->sum += v;
}

json_t *ak_hist_json (const ak_hist_t *h)
{
    json_t *le = json_array (), *counts = json_array ();
    uint64_t cum = 0;
    for (size_t i = 0; i <= h->nle; i++) {
        cum += h->counts[i];
        json_array_append_new (le, i < h->nle ? json_real (h->le[i]) : json_string ("+Inf"));
        json_array_append_new (counts, json_integer ((json_int_t) cum));
    }
    return json_pack ("{s:o, s:o, s:I, s:f}", "le", le, "counts", counts, "count", (json_int_t) h->count,
                      "sum", h->sum);
}

// ============================================================== exposition

void ak_mtext_init (ak_mtext_t *t)
{
    memset (t, 0, sizeof *t);
}

void ak_mtext_free (ak_mtext_t *t)
{
    free (t->data);
    memset (t, 0, sizeof *t);
}

char *ak_mtext_take (ak_mtext_t *t, size_t *len_p)
{
    if (!t->data)
        ak_mtext_printf (t, "%s", "");
    char *data = t->data;
    if (len_p)
        *len_p = t->len;
    memset (t, 0, sizeof *t);
    return data;
}

static void s_reserve (ak_mtext_t *t, size_t more)
{
    if (t->len + more + 1 <= t->cap)
        return;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more + 1)
        cap *= 2;
    t->data = ak_realloc (t->data, cap);
    t->cap = cap;
}

static void s_vprintf (ak_mtext_t *t, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy (copy, ap);
    int n = vsnprintf (NULL, 0, fmt, copy);
    va_end (copy);
    if (n < 0)
        return;
    s_reserve (t, (size_t) n);
    vsnprintf (t->data + t->len, t->cap - t->len, fmt, ap);
    t->len += (size_t) n;
}

void ak_mtext_printf (ak_mtext_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    s_vprintf (t, fmt, ap);
    va_end (ap);
}

/* Appends a label value with \\, \" and \n escaped. */
static void s_escaped (ak_mtext_t *t, const char *v)
{
    s_reserve (t, 2 * strlen (v));
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') {
            t->data[t->len++] = '\\';
            t->data[t->len++] = *v;
        }
        else if (*v == '\n') {
            t->data[t->len++] = '\\';
            t->data[t->len++] = 'n';
        }
        else
            t->data[t->len++] = *v;
    }
    t->data[t->len] = '\0';
}

static void s_label (ak_mtext_t *t, bool *any, const char *k, const char *v)
{
    ak_mtext_printf (t, "%s%s=\"", *any ? "," : "{", k);
    s_escaped (t, v ? v : "");
    ak_mtext_printf (t, "\"");
    *any = true;
}

/* name+suffix{the label pairs of ap[,extra_k="extra_v"]} */
static void s_head (ak_mtext_t *t, const char *name, const char *suffix, va_list ap, const char *extra_k,
                    const char *extra_v)
{
    ak_mtext_printf (t, "%s%s", name, suffix);
    bool any = false;
    for (const char *k; (k = va_arg (ap, const char *)) != NULL; ) {
        const char *v = va_arg (ap, const char *);
        s_label (t, &any, k, v);
    }
    if (extra_k)
        s_label (t, &any, extra_k, extra_v);
    if (any)
        ak_mtext_printf (t, "}");
}

void ak_mtext_family (ak_mtext_t *t, const char *name, const char *type, const char *help)
{
    ak_mtext_printf (t, "# HELP %s ", name);
    for (const char *c = help; *c; c++) {            /* HELP escapes \\ and \n only */
        if (*c == '\\')
            ak_mtext_printf (t, "\\\\");
        else if (*c == '\n')
            ak_mtext_printf (t, "\\n");
        else
            ak_mtext_printf (t, "%c", *c);
    }
    ak_mtext_printf (t, "\n# TYPE %s %s\n", name, type);
}

void ak_mtext_u64 (ak_mtext_t *t, const char *name, uint64_t value, ...)
{
    va_list ap;
    va_start (ap, value);
    s_head (t, name, "", ap, NULL, NULL);
    va_end (ap);
    ak_mtext_printf (t, " %llu\n", (unsigned long long) value);
}

static void s_value (ak_mtext_t *t, double v)
{
    if (isnan (v))
        ak_mtext_printf (t, " NaN\n");
    else if (isinf (v))
        ak_mtext_printf (t, " %sInf\n", v > 0 ? "+" : "-");
    else
        ak_mtext_printf (t, " %.10g\n", v);
}

void ak_mtext_dbl (ak_mtext_t *t, const char *name, double value, ...)
{
    va_list ap;
    va_start (ap, value);
    s_head (t, name, "", ap, NULL, NULL);
    va_end (ap);
    s_value (t, value);
}

void ak_mtext_hist (ak_mtext_t *t, const char *name, const ak_hist_t *h, double scale, ...)
{
    uint64_t cum = 0;
    for (size_t i = 0; i <= h->nle; i++) {
        char le[48];
        if (i < h->nle)
            snprintf (le, sizeof le, "%.10g", h->le[i] * scale);
        else
            snprintf (le, sizeof le, "+Inf");
        cum += h->counts[i];
        va_list ap;
        va_start (ap, scale);
        s_head (t, name, "_bucket", ap, "le", le);
        va_end (ap);
        ak_mtext_printf (t, " %llu\n", (unsigned long long) cum);
    }
    va_list ap;
    va_start (ap, scale);
    s_head (t, name, "_sum", ap, NULL, NULL);
    va_end (ap);
    s_value (t, h->sum * scale);
    va_start (ap, scale);
    s_head (t, name, "_count", ap, NULL, NULL);
    va_end (ap);
    ak_mtext_printf (t, " %llu\n", (unsigned long long) h->count);
}
