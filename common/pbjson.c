/*  common/pbjson.c: protobuf-c message -> jansson, by descriptor. */
#include "pbjson.h"

#include <math.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The schema has no recursive messages; this bounds a future one. */
#define AK_PBJSON_MAX_DEPTH 32

static json_t *s_message (const ProtobufCMessage *msg, int depth);

/*  Length of the valid UTF-8 sequence at s[0..len), or 0 if it is not one
    (overlong forms, surrogates and code points past U+10FFFF are invalid). */
static size_t s_utf8_seq (const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) { n = 2; cp = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { n = 3; cp = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { n = 4; cp = c & 0x07; min = 0x10000; }
    else
        return 0;
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/*  A JSON string for s; invalid UTF-8 bytes become U+FFFD so what comes
    from a peer or a damaged store never makes the conversion fail. */
static json_t *s_string (const char *s, size_t len)
{
    json_t *j = json_stringn (s, len);
    if (j)
        return j;
    char *clean = malloc (len * 3 + 1);
    if (!clean)
        return NULL;
    size_t o = 0;
    const unsigned char *u = (const unsigned char *) s;
    for (size_t i = 0; i < len;) {
        size_t n = u[i] ? s_utf8_seq (u + i, len - i) : 0;
        if (n) {
            memcpy (clean + o, u + i, n);
            o += n;
            i += n;
        }
        else {
            memcpy (clean + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    j = json_stringn (clean, o);
    free (clean);
    return j;
}

static json_t *s_bytes (const ProtobufCBinaryData *b)
{
    if (!b->len)
        return json_string ("");
    size_t cap = sodium_base64_ENCODED_LEN (b->len, sodium_base64_VARIANT_ORIGINAL);
    char *text = malloc (cap);
    if (!text)
        return NULL;
    sodium_bin2base64 (text, cap, b->data, b->len, sodium_base64_VARIANT_ORIGINAL);
    json_t *j = json_string (text);
    free (text);
    return j;
}

static json_t *s_u64 (uint64_t v)
{
    if (v <= (uint64_t) INT64_MAX)
        return json_integer ((json_int_t) v);
    char text[24];
    snprintf (text, sizeof text, "%llu", (unsigned long long) v);
    return json_string (text);
}

static json_t *s_double (double v)
{
    return isfinite (v) ? json_real (v) : json_null ();
}

/*  One value of field f stored at p (an element for repeated fields). */
static json_t *s_value (const ProtobufCFieldDescriptor *f, const void *p, int depth)
{
    switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
            return json_integer (*(const int32_t *) p);
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
            return json_integer (*(const uint32_t *) p);
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
            return json_integer (*(const int64_t *) p);
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
            return s_u64 (*(const uint64_t *) p);
        case PROTOBUF_C_TYPE_FLOAT:
            return s_double (*(const float *) p);
        case PROTOBUF_C_TYPE_DOUBLE:
            return s_double (*(const double *) p);
        case PROTOBUF_C_TYPE_BOOL:
            return json_boolean (*(const protobuf_c_boolean *) p);
        case PROTOBUF_C_TYPE_ENUM: {
            int v = *(const int *) p;
            const ProtobufCEnumValue *ev = f->descriptor
                ? protobuf_c_enum_descriptor_get_value (f->descriptor, v) : NULL;
            return ev ? json_string (ev->name) : json_integer (v);
        }
        case PROTOBUF_C_TYPE_STRING: {
            const char *s = *(const char *const *) p;
            return s ? s_string (s, strlen (s)) : json_null ();
        }
        case PROTOBUF_C_TYPE_BYTES:
            return s_bytes ((const ProtobufCBinaryData *) p);
        case PROTOBUF_C_TYPE_MESSAGE: {
            const ProtobufCMessage *sub = *(const ProtobufCMessage *const *) p;
            return sub ? s_message (sub, depth + 1) : json_null ();
        }
    }
    return json_null ();
}

static size_t s_elem_size (ProtobufCType type)
{
    switch (type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
        case PROTOBUF_C_TYPE_FLOAT:
            return 4;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
            return 8;
        case PROTOBUF_C_TYPE_BOOL:
            return sizeof (protobuf_c_boolean);
        case PROTOBUF_C_TYPE_ENUM:
            return sizeof (int);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
            return sizeof (void *);
        case PROTOBUF_C_TYPE_BYTES:
            return sizeof (ProtobufCBinaryData);
    }
    return 0;
}

/*  Builds the object for msg; a failed allocation anywhere drops the whole
    object (returns NULL) rather than handing back a partial one. */
static json_t *s_message (const ProtobufCMessage *msg, int depth)
{
    if (depth > AK_PBJSON_MAX_DEPTH)
        return json_null ();
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    json_t *obj = json_object ();
    if (!obj)
        return NULL;
    const char *base = (const char *) msg;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        const void *member = base + f->offset;
        json_t *val = NULL;

        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *) (base + f->quantifier_offset) != f->id)
                continue;
            val = s_value (f, member, depth);
        }
        else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *) (base + f->quantifier_offset);
            const char *arr = *(const char *const *) member;
            size_t es = s_elem_size (f->type);
            val = json_array ();
            for (size_t k = 0; val && arr && k < n; k++) {
                json_t *e = s_value (f, arr + k * es, depth);
                if (!e || json_array_append_new (val, e) != 0) {
                    json_decref (val);
                    val = NULL;
                }
            }
        }
        else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
                 f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE &&
                 !*(const protobuf_c_boolean *) (base + f->quantifier_offset))
            val = json_null ();     /* proto2 / proto3-optional scalar not set */
        else
            val = s_value (f, member, depth);

        if (!val || json_object_set_new (obj, f->name, val) != 0) {
            json_decref (obj);
            return NULL;
        }
    }
    return obj;
}

json_t *ak_pb_to_json (const ProtobufCMessage *msg)
{
    if (!msg || !msg->descriptor)
        return NULL;
    return s_message (msg, 0);
}
