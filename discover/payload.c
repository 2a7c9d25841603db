/*  discover/payload.c: reading NVTX range texts (payload.h). */
#include "payload.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One top-level field of the text: [start, end). */
typedef struct {
    const char *start, *end;
} s_span_t;

/*  Splits text at the commas outside brackets and quotes.  Returns the
    number of fields (at most max) and whether the brackets were still
    open at the end (a cut-off text). */
static int s_fields (const char *text, s_span_t *f, int max, bool *open)
{
    int n = 0, depth = 0;
    char quote = 0;
    const char *start = text;
    const char *p = text;
    for (; *p; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
            continue;
        }
        if (*p == '\'' || *p == '"')
            quote = *p;
        else
        if (*p == '[' || *p == '(' || *p == '{')
            depth++;
        else
        if ((*p == ']' || *p == ')' || *p == '}') && depth > 0)
            depth--;
        else
        if (*p == ',' && depth == 0) {
            if (n < max)
                f[n++] = (s_span_t) { start, p };
            start = p + 1;
        }
    }
    if (n < max)
        f[n++] = (s_span_t) { start, p };
    *open = depth > 0 || quote;
    return n;
}

static void s_trim (s_span_t *s)
{
    while (s->start < s->end && isspace ((unsigned char) *s->start))
        s->start++;
    while (s->end > s->start && isspace ((unsigned char) s->end[-1]))
        s->end--;
}

static void s_copy (char *out, size_t cap, s_span_t s)
{
    size_t n = (size_t) (s.end - s.start);
    if (n >= cap)
        n = cap - 1;
    memcpy (out, s.start, n);
    out[n] = '\0';
}

/*  Splits a field "KEY = VALUE" (the key a C identifier).  False when the
    field has no such shape. */
static bool s_key_value (s_span_t f, s_span_t *key, s_span_t *value)
{
    const char *eq = memchr (f.start, '=', (size_t) (f.end - f.start));
    if (!eq)
        return false;
    *key = (s_span_t) { f.start, eq };
    *value = (s_span_t) { eq + 1, f.end };
    s_trim (key);
    s_trim (value);
    if (key->start == key->end || !(isalpha ((unsigned char) *key->start) || *key->start == '_'))
        return false;
    for (const char *c = key->start; c < key->end; c++)
        if (!(isalnum ((unsigned char) *c) || *c == '_'))
            return false;
    return true;
}

static bool s_key_is (s_span_t key, const char *name)
{
    size_t n = strlen (name);
    return (size_t) (key.end - key.start) == n && memcmp (key.start, name, n) == 0;
}

/*  An integer (or True/False) filling the whole span. */
static bool s_int (s_span_t v, int64_t *out)
{
    if (v.end - v.start == 4 && memcmp (v.start, "True", 4) == 0) {
        *out = 1;
        return true;
    }
    if (v.end - v.start == 5 && memcmp (v.start, "False", 5) == 0) {
        *out = 0;
        return true;
    }
    char buf[32];
    if (v.end - v.start <= 0 || v.end - v.start >= (long) sizeof buf)
        return false;
    s_copy (buf, sizeof buf, v);
    char *end = NULL;
    long long n = strtoll (buf, &end, 10);
    if (!end || *end || end == buf)
        return false;
    *out = (int64_t) n;
    return true;
}

/*  The elements of "[a, b, [c]]" (brackets stripped when balanced).
    Returns how many (at most max); *cut when the list did not close. */
static int s_list (s_span_t v, s_span_t *el, int max, bool *cut)
{
    *cut = false;
    if (v.start >= v.end || *v.start != '[') {
        *cut = true;
        return 0;
    }
    s_span_t inner = { v.start + 1, v.end };
    if (inner.end > inner.start && inner.end[-1] == ']')
        inner.end--;
    else
        *cut = true;
    /* s_fields wants a NUL-terminated text: copy the inner part */
    size_t n = (size_t) (inner.end - inner.start);
    char *tmp = malloc (n + 1);
    if (!tmp)
        return 0;
    memcpy (tmp, inner.start, n);
    tmp[n] = '\0';
    bool open = false;
    s_span_t local[64];
    int cnt = s_fields (tmp, local, 64, &open);
    *cut = *cut || open;
    int out = 0;
    for (int i = 0; i < cnt && out < max; i++) {
        s_span_t s = { inner.start + (local[i].start - tmp), inner.start + (local[i].end - tmp) };
        s_trim (&s);
        if (s.start == s.end && cnt == 1)
            break;                                     /* "[]" has no element */
        el[out++] = s;
    }
    free (tmp);
    return out;
}

static void s_sizes (s_span_t v, akd_payload_t *p)
{
    s_span_t args[AKD_MAX_ARGS];
    bool cut = false;
    int n = s_list (v, args, AKD_MAX_ARGS, &cut);
    p->has_sizes = true;
    p->truncated = p->truncated || cut;
    for (int i = 0; i < n; i++) {
        akd_shape_t *s = &p->sizes[p->nsizes++];
        memset (s, 0, sizeof *s);
        s_span_t dims[AKD_MAX_DIMS + 1];
        bool dcut = false;
        int nd = s_list (args[i], dims, AKD_MAX_DIMS + 1, &dcut);
        if (dcut) {
            p->truncated = true;
            continue;                                  /* not a tensor we can trust */
        }
        bool ok = nd > 0 && nd <= AKD_MAX_DIMS;
        for (int d = 0; ok && d < nd; d++)
            ok = s_int (dims[d], &s->dims[d]) && s->dims[d] >= 0;
        if (ok) {
            s->tensor = true;
            s->ndims = nd;
        }
    }
}

static void s_dtypes (s_span_t v, akd_payload_t *p)
{
    s_span_t el[AKD_MAX_ARGS];
    bool cut = false;
    int n = s_list (v, el, AKD_MAX_ARGS, &cut);
    p->truncated = p->truncated || cut;
    for (int i = 0; i < n; i++) {
        s_span_t s = el[i];
        if (s.end - s.start >= 2 && (*s.start == '\'' || *s.start == '"') && s.end[-1] == *s.start) {
            s.start++;
            s.end--;
        }
        s_copy (p->dtypes[p->ndtypes++], sizeof p->dtypes[0], s);
    }
}

bool akd_payload_parse (const char *text, akd_payload_t *p)
{
    memset (p, 0, sizeof *p);
    p->seq = -1;
    if (!text)
        text = "";
    s_span_t f[64];
    bool open = false;
    int n = s_fields (text, f, 64, &open);
    p->truncated = open;
    bool fields = false;
    for (int i = 1; i < n; i++) {
        s_span_t key, value;
        if (!s_key_value (f[i], &key, &value))
            continue;
        fields = true;
        int64_t iv;
        if (s_key_is (key, "sizes"))
            s_sizes (value, p);
        else
        if (s_key_is (key, "dtypes") || s_key_is (key, "input_type") || s_key_is (key, "input_dtypes"))
            s_dtypes (value, p);
        else
        if (s_key_is (key, "seq")) {
            if (s_int (value, &iv))
                p->seq = iv;
        }
        else
        if (s_int (value, &iv) && p->nints < AKD_MAX_INTS) {
            s_copy (p->ints[p->nints].key, sizeof p->ints[0].key, key);
            p->ints[p->nints++].value = iv;
        }
    }
    s_span_t name = fields ? f[0] : (s_span_t) { text, text + strlen (text) };
    s_trim (&name);
    s_copy (p->name, sizeof p->name, name);
    return fields;
}

int64_t akd_payload_int (const akd_payload_t *p, const char *key, int64_t dflt)
{
    for (int i = 0; i < p->nints; i++)
        if (strcmp (p->ints[i].key, key) == 0)
            return p->ints[i].value;
    return dflt;
}

const char *akd_dtype_catalog (const char *t)
{
    if (!t)
        return NULL;
    if (strncmp (t, "torch.", 6) == 0)
        t += 6;
    else
    if (strncmp (t, "c10::", 5) == 0)
        t += 5;
    static const struct { const char *torch, *catalog; } map[] = {
        { "bfloat16", "bfloat16" }, { "BFloat16", "bfloat16" }, { "bf16", "bfloat16" },
        { "float16", "float16" }, { "half", "float16" }, { "Half", "float16" }, { "fp16", "float16" },
        { "float32", "float32" }, { "float", "float32" }, { "Float", "float32" }, { "fp32", "float32" },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp (t, map[i].torch) == 0)
            return map[i].catalog;
    return NULL;
}

void akd_payload_key (const char *text, char *out, int cap)
{
    if (cap <= 0)
        return;
    out[0] = '\0';
    if (!text)
        return;
    s_span_t f[64];
    bool open = false;
    int n = s_fields (text, f, 64, &open);
    int o = 0;
    for (int i = 0; i < n; i++) {
        s_span_t key, value, fld = f[i];
        s_trim (&fld);
        if (i > 0 && s_key_value (fld, &key, &value)
            && (s_key_is (key, "seq") || s_key_is (key, "op_id") || s_key_is (key, "input_op_ids")))
            continue;
        int len = (int) (fld.end - fld.start);
        int w = snprintf (out + o, (size_t) (cap - o), "%s%.*s", o ? ", " : "", len, fld.start);
        if (w < 0 || w >= cap - o) {
            out[cap - 1] = '\0';
            return;
        }
        o += w;
    }
}
