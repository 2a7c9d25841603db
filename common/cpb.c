/*  common/cpb.c: protobuf-c helpers (see cpb.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpb.h"
#include "util.h"

void ak_cpb_set (char **field, const char *value)
{
    if (*field && *field != protobuf_c_empty_string)
        free (*field);
    *field = (value && *value) ? ak_strdup (value) : (char *) protobuf_c_empty_string;
}

void ak_cpb_setf (char **field, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *text = NULL;
    if (vasprintf (&text, fmt, ap) < 0)
        abort ();
    va_end (ap);
    ak_cpb_set (field, text);
    free (text);
}

ProtobufCMessage *ak_cpb_dup (const ProtobufCMessage *msg)
{
    size_t size = protobuf_c_message_get_packed_size (msg);
    uint8_t *buf = ak_malloc (size ? size : 1);
    protobuf_c_message_pack (msg, buf);
    ProtobufCMessage *copy = protobuf_c_message_unpack (msg->descriptor, NULL, size, buf);
    free (buf);
    return copy;
}

bool ak_cpb_same (const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    if (!a || !b)
        return !a && !b;
    size_t alen = protobuf_c_message_get_packed_size (a);
    size_t blen = protobuf_c_message_get_packed_size (b);
    if (alen != blen)
        return false;
    uint8_t *x = ak_malloc (alen ? alen : 1), *y = ak_malloc (blen ? blen : 1);
    bool same = protobuf_c_message_pack (a, x) == alen && protobuf_c_message_pack (b, y) == blen
             && memcmp (x, y, alen) == 0;
    free (x);
    free (y);
    return same;
}

static Ak__Param *s_param_new (const char *name, int64_t value)
{
    Ak__Param *p = ak_malloc (sizeof *p);
    ak__param__init (p);
    ak_cpb_set (&p->name, name);
    p->value = value;
    return p;
}

Ak__Param **ak_cpb_params_new (const char *const *names, const int64_t *values, size_t n)
{
    if (n == 0)
        return NULL;
    Ak__Param **params = ak_calloc (n, sizeof *params);
    for (size_t i = 0; i < n; i++)
        params[i] = s_param_new (names[i], values[i]);
    return params;
}

Ak__Param **ak_cpb_params_dup (Ak__Param *const *src, size_t n)
{
    if (n == 0)
        return NULL;
    Ak__Param **params = ak_calloc (n, sizeof *params);
    for (size_t i = 0; i < n; i++)
        params[i] = s_param_new (src[i]->name, src[i]->value);
    return params;
}

void ak_cpb_params_free (Ak__Param **params, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ak__param__free_unpacked (params[i], NULL);
    free (params);
}

const char *ak_cpb_params_text (Ak__Param *const *params, size_t n, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        int w = snprintf (buf + used, len - used, "%s%s=%lld", i ? " " : "",
                          params[i]->name, (long long) params[i]->value);
        if (w < 0)
            break;
        used += (size_t) w;
    }
    return buf;
}

int ak_cpb_params_cmp (Ak__Param *const *a, size_t na, Ak__Param *const *b, size_t nb)
{
    for (size_t i = 0; i < na && i < nb; i++) {
        if (a[i]->value != b[i]->value)
            return a[i]->value < b[i]->value ? -1 : 1;
    }
    return na == nb ? 0 : (na < nb ? -1 : 1);
}
