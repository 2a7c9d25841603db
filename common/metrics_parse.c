/*  common/metrics_parse.c: reading Prometheus text exposition back and
    checking it (see metrics.h): the tests scrape the endpoints with it,
    and debug builds of the daemons check every snapshot before they
    publish it. */
#include "metrics.h"
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "util.h"

#define S_FAMILIES_MAX 512

typedef struct {
    char name[128];
    char type[16];
    bool help;
} s_family_t;

typedef struct {
    s_family_t *f;
    size_t      n;
} s_families_t;

static bool s_name_ok (const char *s, size_t len)
{
    if (len == 0 || !(isalpha ((unsigned char) s[0]) || s[0] == '_' || s[0] == ':'))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!(isalnum ((unsigned char) s[i]) || s[i] == '_' || s[i] == ':'))
            return false;
    return true;
}

static s_family_t *s_family (s_families_t *fs, const char *name, size_t len, bool add)
{
    for (size_t i = 0; i < fs->n; i++)
        if (strlen (fs->f[i].name) == len && strncmp (fs->f[i].name, name, len) == 0)
            return &fs->f[i];
    if (!add || fs->n == S_FAMILIES_MAX || len >= sizeof fs->f[0].name)
        return NULL;
    s_family_t *f = &fs->f[fs->n++];
    memset (f, 0, sizeof *f);
    memcpy (f->name, name, len);
    return f;
}

/* The family a sample name belongs to: itself, or a histogram's (or
   summary's) for the _bucket, _sum and _count suffixes. */
static s_family_t *s_owner (s_families_t *fs, const char *name, bool *bucket, bool *count)
{
    size_t len = strlen (name);
    *bucket = *count = false;
    static const char *const sfx[] = { "_bucket", "_sum", "_count" };
    for (int i = 0; i < 3; i++) {
        size_t sl = strlen (sfx[i]);
        if (len > sl && strcmp (name + len - sl, sfx[i]) == 0) {
            s_family_t *f = s_family (fs, name, len - sl, false);
            if (f && (strcmp (f->type, "histogram") == 0 || strcmp (f->type, "summary") == 0)) {
                *bucket = i == 0;
                *count = i == 2;
                return f;
            }
        }
    }
    return s_family (fs, name, len, false);
}

/* Parses {k="v",...} at *p into labels (as written) and, when there is
   one, the le value (unescaped) into le.  Advances *p past '}'. */
static int s_labels (const char **p, char *labels, size_t lsize, char *le, size_t lesize)
{
    const char *s = *p;
    size_t n = 0;
    le[0] = '\0';
    labels[0] = '\0';
    if (*s != '{')
        return 0;
    s++;
    while (*s != '}') {
        const char *k = s;
        while (isalnum ((unsigned char) *s) || *s == '_')
            s++;
        size_t klen = (size_t) (s - k);
        if (!s_name_ok (k, klen) || s[0] != '=' || s[1] != '"')
            return -1;
        s += 2;
        char val[512];
        size_t vn = 0;
        while (*s && *s != '"' && *s != '\n') {
            char c = *s++;
            if (c == '\\') {
                c = *s++;
                if (c == 'n')
                    c = '\n';
                else if (c != '\\' && c != '"')
                    return -1;
            }
            if (vn + 1 < sizeof val)
                val[vn++] = c;
        }
        val[vn] = '\0';
        if (*s != '"')
            return -1;
        size_t raw = (size_t) (s - k) + 1;      /* k="v" as written */
        s++;
        if (klen == 2 && strncmp (k, "le", 2) == 0) {
            if (vn >= lesize)                   /* no bucket bound is that long */
                return -1;
            memcpy (le, val, vn + 1);
        }
        else {
            if (n + raw + 2 >= lsize)
                return -1;
            if (n)
                labels[n++] = ',';
            memcpy (labels + n, k, raw);
            n += raw;
            labels[n] = '\0';
        }
        if (*s == ',')
            s++;
        else if (*s != '}')
            return -1;
    }
    *p = s + 1;
    return 0;
}

static void s_add (ak_mparsed_t *out, const char *name, const char *labels, double v)
{
    out->v = ak_realloc (out->v, (out->n + 1) * sizeof *out->v);
    out->v[out->n++] = (ak_msample_t) { ak_strdup (name), ak_strdup (labels), v };
}

/* The bucket series in progress: its family and other labels, the last
   bound and count. */
typedef struct {
    const s_family_t *f;
    char   labels[512];
    double le, count;
    bool   open, inf;
} s_series_t;

static int s_line (s_families_t *fs, s_series_t *sr, ak_mparsed_t *out, const char *line, size_t lineno,
                   ak_err_t *err)
{
    if (line[0] == '#') {
        char kw[8], name[160], rest[32];
        if (sscanf (line, "# %7s %159s %31s", kw, name, rest) < 2 || (strcmp (kw, "HELP") && strcmp (kw, "TYPE")))
            return 0;                   /* a comment */
        if (!s_name_ok (name, strlen (name)))
            return ak_err_set (err, AK_EPROTO, "line %zu: bad metric name '%s'", lineno, name);
        s_family_t *f = s_family (fs, name, strlen (name), true);
        if (!f)
            return ak_err_set (err, AK_EPROTO, "line %zu: too many families", lineno);
        if (strcmp (kw, "HELP") == 0) {
            if (f->help)
                return ak_err_set (err, AK_EPROTO, "line %zu: second HELP for %s", lineno, name);
            f->help = true;
            return 0;
        }
        if (f->type[0])
            return ak_err_set (err, AK_EPROTO, "line %zu: second TYPE for %s", lineno, name);
        if (strcmp (rest, "counter") && strcmp (rest, "gauge") && strcmp (rest, "histogram")
            && strcmp (rest, "summary") && strcmp (rest, "untyped"))
            return ak_err_set (err, AK_EPROTO, "line %zu: %s: unknown type '%s'", lineno, name, rest);
        snprintf (f->type, sizeof f->type, "%.15s", rest);
        return 0;
    }
    const char *p = line;
    while (isalnum ((unsigned char) *p) || *p == '_' || *p == ':')
        p++;
    char name[160];
    size_t nlen = (size_t) (p - line);
    if (!s_name_ok (line, nlen) || nlen >= sizeof name)
        return ak_err_set (err, AK_EPROTO, "line %zu: no metric name: %.80s", lineno, line);
    memcpy (name, line, nlen);
    name[nlen] = '\0';
    char labels[512], le[64];
    if (s_labels (&p, labels, sizeof labels, le, sizeof le))
        return ak_err_set (err, AK_EPROTO, "line %zu: %s: malformed labels", lineno, name);
    if (*p != ' ')
        return ak_err_set (err, AK_EPROTO, "line %zu: %s: no value", lineno, name);
    char *end = NULL;
    double v = strtod (p + 1, &end);
    if (end == p + 1 || (*end && *end != ' '))
        return ak_err_set (err, AK_EPROTO, "line %zu: %s: value '%.40s' is not a number", lineno, name, p + 1);
    bool bucket, count;
    const s_family_t *f = s_owner (fs, name, &bucket, &count);
    if (!f || !f->help || !f->type[0])
        return ak_err_set (err, AK_EPROTO, "line %zu: %s: no HELP and TYPE before its samples", lineno, name);
    if (bucket) {
        if (!le[0])
            return ak_err_set (err, AK_EPROTO, "line %zu: %s: a bucket without le", lineno, name);
        double bound = strcmp (le, "+Inf") == 0 ? INFINITY : strtod (le, NULL);
        bool same = sr->open && sr->f == f && strcmp (sr->labels, labels) == 0 && !sr->inf;
        if (same && (bound <= sr->le || v < sr->count))
            return ak_err_set (err, AK_EPROTO, "line %zu: %s{%s}: bucket le=%s after le=%g (count %g after %g): "
                               "not ascending and cumulative", lineno, name, labels, le, sr->le, v, sr->count);
        *sr = (s_series_t) { .f = f, .le = bound, .count = v, .open = true, .inf = isinf (bound) };
        snprintf (sr->labels, sizeof sr->labels, "%s", labels);
    }
    else if (count && strcmp (f->type, "histogram") == 0) {
        if (!sr->open || sr->f != f || strcmp (sr->labels, labels) != 0 || !sr->inf || sr->count != v)
            return ak_err_set (err, AK_EPROTO, "line %zu: %s{%s}: _count %g without an equal le=\"+Inf\" bucket "
                               "before it", lineno, name, labels, v);
        sr->open = false;
    }
    if (le[0]) {                        /* keep le in what the caller looks up */
        size_t n = strlen (labels);
        snprintf (labels + n, sizeof labels - n, "%sle=\"%s\"", n ? "," : "", le);
    }
    s_add (out, name, labels, v);
    return 0;
}

int ak_metrics_parse (const char *text, ak_mparsed_t *out, ak_err_t *err)
{
    memset (out, 0, sizeof *out);
    s_families_t fs = { ak_calloc (S_FAMILIES_MAX, sizeof *fs.f), 0 };
    s_series_t sr = { 0 };
    int rc = 0;
    size_t lineno = 0;
    for (const char *p = text; p && *p && rc == 0; ) {
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);
        lineno++;
        char *line = ak_malloc (len + 1);
        memcpy (line, p, len);
        line[len] = '\0';
        if (len)
            rc = s_line (&fs, &sr, out, line, lineno, err);
        free (line);
        p = nl ? nl + 1 : NULL;
    }
    if (rc == 0 && sr.open && sr.f && strcmp (sr.f->type, "histogram") == 0)
        rc = ak_err_set (err, AK_EPROTO, "%s: histogram without its _count", sr.f->name);
    free (fs.f);
    return rc;
}

void ak_mparsed_clear (ak_mparsed_t *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free (p->v[i].name);
        free (p->v[i].labels);
    }
    free (p->v);
    memset (p, 0, sizeof *p);
}

double ak_mparsed_get (const ak_mparsed_t *p, const char *name, const char *labels)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp (p->v[i].name, name) == 0 && strcmp (p->v[i].labels, labels ? labels : "") == 0)
            return p->v[i].value;
    return NAN;
}

double ak_mparsed_sum (const ak_mparsed_t *p, const char *name, const char *match, size_t *n_p)
{
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (strcmp (p->v[i].name, name) == 0 && (!match || strstr (p->v[i].labels, match))) {
            sum += p->v[i].value;
            n++;
        }
    if (n_p)
        *n_p = n;
    return sum;
}

void ak_metrics_check_or_abort (const char *who, const char *text)
{
    ak_mparsed_t p;
    ak_err_t err = { 0 };
    int rc = ak_metrics_parse (text, &p, &err);
    ak_mparsed_clear (&p);
    if (rc) {
        ak_error ("debug: %s rendered metrics that do not parse: %s", who, err.msg);
        abort ();
    }
}
