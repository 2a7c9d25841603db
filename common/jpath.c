/*  common/jpath.c: untrusted JSON, errors that name the path (jpath.h). */
#include "jpath.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ================================================================= errors */

/*  Copies untrusted text for a message: printable ASCII only, cut at 64
    characters, so a hostile field name cannot forge or flood a log line. */
const char *ak_jpath_show (const char *text, char buf[AK_JPATH_SHOW])
{
    size_t n = 0;
    if (!text)
        text = "(null)";
    for (; text[n] && n < 64; n++) {
        unsigned char c = (unsigned char) text[n];
        buf[n] = c >= 0x20 && c < 0x7f ? (char) c : '?';
    }
    if (text[n]) {
        memcpy (buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

__attribute__ ((format (printf, 5, 0)))
static int s_vfail (ak_err_t *err, int code, const char *label, const char *path,
                    const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf (msg, sizeof msg, fmt, ap);
    if (path && *path)
        return ak_err_set (err, code, "%s: %s: %s", label, path, msg);
    return ak_err_set (err, code, "%s: %s", label, msg);
}

int ak_jpath_bad (ak_err_t *err, const char *label, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int rc = s_vfail (err, AK_EINVAL, label, path, fmt, ap);
    va_end (ap);
    return rc;
}

int ak_jpath_fail (ak_err_t *err, int code, const char *label, const char *path,
                   const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int rc = s_vfail (err, code, label, path, fmt, ap);
    va_end (ap);
    return rc;
}

/* ------------------------------------------------------------ JSON paths */

/*  parent.key into buf (AK_JPATH_MAX bytes); key alone at the top level. */
const char *ak_jpath_field (char *buf, const char *parent, const char *key)
{
    char safe[AK_JPATH_SHOW];
    ak_jpath_show (key, safe);
    if (parent && *parent)
        snprintf (buf, AK_JPATH_MAX, "%.180s.%s", parent, safe);
    else
        snprintf (buf, AK_JPATH_MAX, "%s", safe);
    return buf;
}

/*  parent[i] into buf (AK_JPATH_MAX bytes). */
const char *ak_jpath_index (char *buf, const char *parent, size_t i)
{
    snprintf (buf, AK_JPATH_MAX, "%.200s[%zu]", parent ? parent : "", i);
    return buf;
}

/*  The JSON path ("ops[2].tolerances.float16.atol") of the value being read
    at byte offset pos of text.  Only used to place a syntax error, so it is a
    forgiving scanner, not a parser: it tracks containers, keys and indexes. */
static void s_path_at (const char *text, size_t len, size_t pos, char *out, size_t outsz)
{
    enum { DEPTH = 32 };
    struct { bool obj, in_value; size_t index; char key[72]; } st[DEPTH];
    int depth = 0, over = 0;
    size_t i = 0;

    if (pos > len)
        pos = len;
    while (i < pos) {
        char c = text[i];
        if (c == '"') {
            size_t start = ++i;
            while (i < pos && text[i] != '"')
                i += text[i] == '\\' ? 2 : 1;
            if (depth > 0 && !over && st[depth - 1].obj && !st[depth - 1].in_value) {
                size_t n = (i < pos ? i : pos) - start, k;
                if (n > 64)
                    n = 64;
                for (k = 0; k < n; k++) {
                    unsigned char ch = (unsigned char) text[start + k];
                    st[depth - 1].key[k] = ch >= 0x20 && ch < 0x7f ? (char) ch : '?';
                }
                st[depth - 1].key[k] = '\0';
            }
            i++;
            continue;
        }
        if (c == '{' || c == '[') {
            if (!over && depth < DEPTH) {
                st[depth].obj = c == '{';
                st[depth].in_value = false;
                st[depth].index = 0;
                st[depth].key[0] = '\0';
                depth++;
            }
            else
                over++;
        }
        else if (c == '}' || c == ']') {
            if (over)
                over--;
            else if (depth > 0)
                depth--;
        }
        else if (c == ':' && !over && depth > 0 && st[depth - 1].obj)
            st[depth - 1].in_value = true;
        else if (c == ',' && !over && depth > 0) {
            if (st[depth - 1].obj) {
                st[depth - 1].in_value = false;
                st[depth - 1].key[0] = '\0';
            }
            else
                st[depth - 1].index++;
        }
        i++;
    }
    size_t n = 0;
    out[0] = '\0';
    for (int d = 0; d < depth && n < outsz; d++) {
        int w;
        if (st[d].obj) {
            if (!st[d].key[0])
                break;
            w = snprintf (out + n, outsz - n, "%s%s", n ? "." : "", st[d].key);
        }
        else
            w = snprintf (out + n, outsz - n, "[%zu]", st[d].index);
        if (w < 0)
            break;
        n += (size_t) w;
    }
    if (n >= outsz)
        out[outsz - 1] = '\0';
}

/*  Parses JSON text (duplicate keys rejected).  A syntax error is reported
    with the path of the value it is in and the line and column. */
int ak_jpath_load (const char *text, size_t len, const char *label, json_t **root_p,
                   ak_err_t *err)
{
    json_error_t jerr;
    json_t *root = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        char path[AK_JPATH_MAX];
        s_path_at (text, len, (size_t) (jerr.position > 0 ? jerr.position : 0), path, sizeof path);
        const char *what = json_error_code (&jerr) == json_error_numeric_overflow
                           && strstr (jerr.text, "real") ? "must be finite" : "invalid JSON";
        return ak_jpath_bad (err, label, path, "%s: %s (line %d column %d)",
                             what, jerr.text, jerr.line, jerr.column);
    }
    *root_p = root;
    return 0;
}

/* ------------------------------------------------------ typed JSON access */

int ak_jpath_document (json_t *root, const char *what, const char *const *allowed, int version,
                       const char *label, ak_err_t *err)
{
    json_t *v;
    int rc;
    if (!json_is_object (root))
        return ak_jpath_bad (err, label, "", "a %s must be a JSON object", what);
    if ((rc = ak_jpath_only (root, allowed, label, "", err)) != 0
     || (rc = ak_jpath_get (root, "schema_version", JSON_INTEGER, true, label, "", &v, err)) != 0)
        return rc;
    if (json_integer_value (v) != version)
        return ak_jpath_fail (err, AK_EVERSION, label, "schema_version", "unsupported version %lld "
                              "(this build reads %d)", (long long) json_integer_value (v), version);
    return 0;
}

/*  Rejects any member of obj not in allowed (NULL-terminated). */
int ak_jpath_only (json_t *obj, const char *const *allowed, const char *label,
                   const char *path, ak_err_t *err)
{
    const char *key;
    json_t *v;
    json_object_foreach (obj, key, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp (key, *a) == 0;
        if (!ok) {
            char p[AK_JPATH_MAX];
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, key), "unknown field");
        }
    }
    return 0;
}

static const char *s_type_word (json_type t)
{
    switch (t) {
        case JSON_OBJECT: return "an object";
        case JSON_ARRAY:  return "an array";
        case JSON_STRING: return "a string";
        case JSON_INTEGER: return "an integer";
        case JSON_REAL:   return "a number";
        case JSON_TRUE:
        case JSON_FALSE:  return "true or false";
        default:          return "a value";
    }
}

/*  obj[key] of the given JSON type into *out; NULL when absent and not
    required.  (JSON_REAL accepts integers too.) */
int ak_jpath_get (json_t *obj, const char *key, json_type type, bool required, const char *label,
                  const char *parent, json_t **out, ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    json_t *v = json_object_get (obj, key);
    *out = NULL;
    if (!v) {
        if (required)
            return ak_jpath_bad (err, label, ak_jpath_field (p, parent, key), "missing");
        return 0;
    }
    bool ok = type == JSON_REAL ? json_is_number (v)
            : type == JSON_TRUE ? json_is_boolean (v)
            : json_typeof (v) == type;
    if (!ok)
        return ak_jpath_bad (err, label, ak_jpath_field (p, parent, key), "must be %s",
                             s_type_word (type));
    *out = v;
    return 0;
}

/*  A JSON string value without embedded NUL bytes. */
int ak_jpath_str (json_t *v, const char *label, const char *path, const char **out,
                  ak_err_t *err)
{
    if (!json_is_string (v))
        return ak_jpath_bad (err, label, path, "must be a string");
    const char *s = json_string_value (v);
    if (strlen (s) != json_string_length (v))
        return ak_jpath_bad (err, label, path, "must not contain NUL characters");
    *out = s;
    return 0;
}

int ak_jpath_get_str (json_t *obj, const char *key, bool required, const char *label,
                      const char *parent, const char **out, ak_err_t *err)
{
    json_t *v;
    char p[AK_JPATH_MAX];
    *out = NULL;
    int rc = ak_jpath_get (obj, key, JSON_STRING, required, label, parent, &v, err);
    if (rc || !v)
        return rc;
    return ak_jpath_str (v, label, ak_jpath_field (p, parent, key), out, err);
}
