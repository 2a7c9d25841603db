/*  ops/akctl/format.c: reading the coordinator's JSON and laying out text.

    The readers are tolerant on purpose: proto3 JSON leaves out fields that
    hold their zero value and may write 64-bit integers as strings, and a
    newer coordinator may add fields.  akctl renders what is there and never
    fails on what is not. */
#include "akctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "util.h"

/* ------------------------------------------------------------ accessors */

const char *akj_str (const json_t *obj, const char *key)
{
    const json_t *v = json_is_object (obj) ? json_object_get (obj, key) : NULL;
    return json_is_string (v) ? json_string_value (v) : "";
}

double akj_value_num (const json_t *v)
{
    if (json_is_number (v))
        return json_number_value (v);
    if (json_is_string (v)) {
        double d;
        if (ak_parse_double (json_string_value (v), &d) == 0)
            return d;
    }
    if (json_is_true (v))
        return 1;
    return 0;
}

double akj_num (const json_t *obj, const char *key)
{
    return akj_value_num (json_is_object (obj) ? json_object_get (obj, key) : NULL);
}

int64_t akj_int (const json_t *obj, const char *key)
{
    const json_t *v = json_is_object (obj) ? json_object_get (obj, key) : NULL;
    if (json_is_integer (v))
        return (int64_t) json_integer_value (v);
    if (json_is_string (v)) {
        int64_t i;
        if (ak_parse_i64 (json_string_value (v), &i) == 0)
            return i;
    }
    return (int64_t) akj_value_num (v);
}

bool akj_bool (const json_t *obj, const char *key)
{
    const json_t *v = json_is_object (obj) ? json_object_get (obj, key) : NULL;
    if (json_is_boolean (v))
        return json_is_true (v);
    return akj_value_num (v) != 0;
}

json_t *akj_arr (const json_t *obj, const char *key)
{
    json_t *v = json_is_object (obj) ? json_object_get (obj, key) : NULL;
    return json_is_array (v) ? v : NULL;
}

json_t *akj_obj (const json_t *obj, const char *key)
{
    json_t *v = json_is_object (obj) ? json_object_get (obj, key) : NULL;
    return json_is_object (v) ? v : NULL;
}

/* ----------------------------------------------------------- formatting */

/*  Appends text to a growing buffer (*buf, *len used, *cap allocated). */
static void s_append (char **buf, size_t *len, size_t *cap, const char *text)
{
    size_t n = strlen (text);
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = ak_realloc (*buf, *cap);
    }
    memcpy (*buf + *len, text, n + 1);
    *len += n;
}

char *akctl_params_text (const json_t *params)
{
    if (!json_is_array (params) || json_array_size (params) == 0)
        return ak_strdup ("-");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    size_t i;
    json_t *p;
    json_array_foreach (params, i, p) {
        char item[128];
        snprintf (item, sizeof item, "%s%s=%" PRId64, i ? " " : "", akj_str (p, "name"),
                  akj_int (p, "value"));
        s_append (&buf, &len, &cap, item);
    }
    return buf;
}

char *akctl_dims_text (const json_t *dims)
{
    if (!json_is_array (dims) || json_array_size (dims) == 0)
        return ak_strdup ("-");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    size_t i;
    json_t *d;
    json_array_foreach (dims, i, d) {
        char item[32];
        snprintf (item, sizeof item, "%s%.0f", i ? "x" : "", akj_value_num (d));
        s_append (&buf, &len, &cap, item);
    }
    return buf;
}

const char *akctl_duration (double ms, char *buf, size_t len)
{
    if (ms < 0)
        ms = 0;
    if (ms < 1000)
        snprintf (buf, len, "%.0f ms", ms);
    else
    if (ms < 60000)
        snprintf (buf, len, "%.1f s", ms / 1000);
    else
    if (ms < 3600000) {
        uint64_t s = (uint64_t) (ms / 1000);
        snprintf (buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    }
    else {
        uint64_t m = (uint64_t) (ms / 60000);
        snprintf (buf, len, "%" PRIu64 "h%02" PRIu64 "m", m / 60, m % 60);
    }
    return buf;
}

const char *akctl_clock (uint64_t ms, char *buf, size_t len)
{
    uint64_t s = ms / 1000;
    if (s >= 3600)
        snprintf (buf, len, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, s / 3600, s / 60 % 60, s % 60);
    else
        snprintf (buf, len, "%02" PRIu64 ":%02" PRIu64, s / 60, s % 60);
    return buf;
}

const char *akctl_when (uint64_t wall_ms, char *buf, size_t len)
{
    if (wall_ms == 0) {
        snprintf (buf, len, "-");
        return buf;
    }
    return ak_clock_iso (wall_ms, buf, (int) len);
}

const char *akctl_speedup (double speedup, double noise, char *buf, size_t len)
{
    if (speedup <= 0)
        snprintf (buf, len, "-");
    else
        snprintf (buf, len, "%.2fx +- %.2f", speedup, noise);
    return buf;
}

const char *akctl_micros (double us, char *buf, size_t len)
{
    if (us <= 0)
        snprintf (buf, len, "-");
    else
    if (us < 1000)
        snprintf (buf, len, "%.2f us", us);
    else
    if (us < 1000000)
        snprintf (buf, len, "%.3f ms", us / 1000);
    else
        snprintf (buf, len, "%.3f s", us / 1000000);
    return buf;
}

/* ---------------------------------------------------------------- table */

struct akctl_table {
    int     ncols;
    char  **headers;
    char ***rows;
    int     nrows;
    int     cap;
};

akctl_table_t *akctl_table_new (int ncols, const char *const *headers)
{
    akctl_table_t *self = ak_calloc (1, sizeof *self);
    self->ncols = ncols;
    self->headers = ak_calloc ((size_t) ncols, sizeof (char *));
    for (int c = 0; c < ncols; c++)
        self->headers[c] = ak_strdup (headers[c]);
    return self;
}

void akctl_table_destroy (akctl_table_t **self_p)
{
    if (self_p && *self_p) {
        akctl_table_t *self = *self_p;
        for (int r = 0; r < self->nrows; r++) {
            for (int c = 0; c < self->ncols; c++)
                free (self->rows[r][c]);
            free (self->rows[r]);
        }
        for (int c = 0; c < self->ncols; c++)
            free (self->headers[c]);
        free (self->headers);
        free (self->rows);
        free (self);
        *self_p = NULL;
    }
}

void akctl_table_add (akctl_table_t *self, const char *const *cells)
{
    if (self->nrows == self->cap) {
        self->cap = self->cap ? self->cap * 2 : 16;
        self->rows = ak_realloc (self->rows, (size_t) self->cap * sizeof (char **));
    }
    char **row = ak_calloc ((size_t) self->ncols, sizeof (char *));
    for (int c = 0; c < self->ncols; c++)
        row[c] = ak_strdup (cells[c] && *cells[c] ? cells[c] : "-");
    self->rows[self->nrows++] = row;
}

int akctl_table_rows (akctl_table_t *self)
{
    return self->nrows;
}

/*  Markdown cells must not break the table: '|' is escaped and newlines
    become spaces. */
static void s_markdown_cell (FILE *out, const char *text)
{
    for (const char *p = text; *p; p++) {
        if (*p == '|')
            fputs ("\\|", out);
        else
        if (*p == '\n' || *p == '\r')
            fputc (' ', out);
        else
            fputc (*p, out);
    }
}

/*  Plain text cells are cut at the first newline so one row stays one line. */
static int s_cell_width (const char *text)
{
    const char *nl = strchr (text, '\n');
    return (int) (nl ? (size_t) (nl - text) : strlen (text));
}

void akctl_table_print (akctl_table_t *self, FILE *out, const char *indent, bool markdown)
{
    if (markdown) {
        fputs ("|", out);
        for (int c = 0; c < self->ncols; c++) {
            fputc (' ', out);
            s_markdown_cell (out, self->headers[c]);
            fputs (" |", out);
        }
        fputs ("\n|", out);
        for (int c = 0; c < self->ncols; c++)
            fputs ("---|", out);
        fputc ('\n', out);
        for (int r = 0; r < self->nrows; r++) {
            fputs ("|", out);
            for (int c = 0; c < self->ncols; c++) {
                fputc (' ', out);
                s_markdown_cell (out, self->rows[r][c]);
                fputs (" |", out);
            }
            fputc ('\n', out);
        }
        return;
    }
    int *width = ak_calloc ((size_t) self->ncols, sizeof (int));
    for (int c = 0; c < self->ncols; c++) {
        width[c] = s_cell_width (self->headers[c]);
        for (int r = 0; r < self->nrows; r++) {
            int w = s_cell_width (self->rows[r][c]);
            if (w > width[c])
                width[c] = w;
        }
    }
    for (int r = -1; r < self->nrows; r++) {
        char **cells = r < 0 ? self->headers : self->rows[r];
        fputs (indent ? indent : "", out);
        for (int c = 0; c < self->ncols; c++) {
            int w = s_cell_width (cells[c]);
            if (c == self->ncols - 1)
                fprintf (out, "%.*s", w, cells[c]);
            else
                fprintf (out, "%.*s%*s  ", w, cells[c], width[c] - w, "");
        }
        fputc ('\n', out);
    }
    free (width);
}
