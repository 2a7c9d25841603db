/*  common/pbwire.c: the protobuf wire format by hand (see pbwire.h). */
#include "pbwire.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Reads a varint of at most max bytes (protobuf-c takes 10 for a value,
   5 for a tag or a length). */
static int s_varint_read (const uint8_t **pos, const uint8_t *end, uint64_t *v, int max)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 7 * max && *pos < end; shift += 7) {
        uint8_t b = *(*pos)++;
        x |= (uint64_t) (b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

int ak_pbw_next (const uint8_t **pos, const uint8_t *end, ak_pbw_field_t *f)
{
    const uint8_t *p = *pos;
    if (p >= end)
        return 0;
    uint64_t tag = 0;
    if (s_varint_read (&p, end, &tag, 5) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return -1;
    f->start = *pos;
    f->number = (uint32_t) (tag >> 3);
    f->wire = (int) (tag & 7);
    f->varint = 0;
    switch (f->wire) {
        case AK_PBW_VARINT:
            f->data = p;
            if (s_varint_read (&p, end, &f->varint, 10))
                return -1;
            f->len = (size_t) (p - f->data);
            break;
        case AK_PBW_I64:
            if (end - p < 8)
                return -1;
            f->data = p;
            f->len = 8;
            p += 8;
            break;
        case AK_PBW_LEN: {
            uint64_t n = 0;
            if (s_varint_read (&p, end, &n, 5) || n > (uint64_t) (end - p))
                return -1;
            f->data = p;
            f->len = (size_t) n;
            p += n;
            break;
        }
        case AK_PBW_I32:
            if (end - p < 4)
                return -1;
            f->data = p;
            f->len = 4;
            p += 4;
            break;
        default:                    /* groups (deprecated, not in proto3) and garbage */
            return -1;
    }
    f->size = (size_t) (p - f->start);
    *pos = p;
    return 1;
}

size_t ak_pbw_varint (uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        if (p)
            p[n] = (uint8_t) (v | 0x80);
        n++;
        v >>= 7;
    }
    if (p)
        p[n] = (uint8_t) v;
    return n + 1;
}

size_t ak_pbw_tag (uint8_t *p, uint32_t number, int wire)
{
    return ak_pbw_varint (p, (uint64_t) number << 3 | (uint64_t) wire);
}

/* Elements in a packed run of type t (len bytes), or -1 when the run does
   not split into whole elements. */
static long s_packed_count (ProtobufCType t, const uint8_t *data, size_t len)
{
    switch (t) {
        case PROTOBUF_C_TYPE_FIXED32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_FLOAT:
            return len % 4 ? -1 : (long) (len / 4);
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
            return len % 8 ? -1 : (long) (len / 8);
        case PROTOBUF_C_TYPE_BOOL:  /* one byte each, 0 or 1 */
            for (size_t i = 0; i < len; i++)
                if (data[i] > 1)
                    return -1;
            return (long) len;
        default: {                  /* varints: each ends in a byte below 0x80 */
            long n = 0;
            size_t run = 0;
            for (size_t i = 0; i < len; i++) {
                run++;
                if (!(data[i] & 0x80)) {
                    if (run > 10)
                        return -1;
                    n++;
                    run = 0;
                }
            }
            return run ? -1 : n;
        }
    }
}

/* The wire type protobuf-c reads a single value of type t from. */
static int s_wire_of (ProtobufCType t)
{
    switch (t) {
        case PROTOBUF_C_TYPE_FIXED32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_FLOAT:
            return AK_PBW_I32;
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
            return AK_PBW_I64;
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_BYTES:
        case PROTOBUF_C_TYPE_MESSAGE:
            return AK_PBW_LEN;
        default:
            return AK_PBW_VARINT;
    }
}

static bool s_packable (ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES && t != PROTOBUF_C_TYPE_MESSAGE;
}

int ak_pbw_validate (const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                     int max_depth, size_t max_string, size_t max_repeated, size_t *unknown)
{
    if (max_depth < 0)
        return -1;
    size_t counts[128];             /* elements per repeated field, by field index */
    if (desc->n_fields > sizeof counts / sizeof counts[0])
        return -1;                  /* not a schema of this project */
    memset (counts, 0, desc->n_fields * sizeof counts[0]);
    const uint8_t *pos = data, *end = data + len;
    ak_pbw_field_t f;
    int more;
    unsigned next = 0;              /* fields mostly come in descriptor order */
    while ((more = ak_pbw_next (&pos, end, &f)) == 1) {
        const ProtobufCFieldDescriptor *fd = next < desc->n_fields && desc->fields[next].id == f.number
                                           ? &desc->fields[next]
                                           : protobuf_c_message_descriptor_get_field (desc, f.number);
        if (fd)
            next = (unsigned) (fd - desc->fields) + 1;
        if (!fd) {
            (*unknown)++;
            continue;
        }
        size_t index = (size_t) (fd - desc->fields);
        long elements = 1;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED && f.wire == AK_PBW_LEN && s_packable (fd->type)) {
            elements = s_packed_count (fd->type, f.data, f.len);
            if (elements < 0)
                return -1;
        }
        else if (f.wire != s_wire_of (fd->type))
            return -1;
        else if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
            if (ak_pbw_validate (fd->descriptor, f.data, f.len, max_depth - 1, max_string, max_repeated,
                                 unknown))
                return -1;
        }
        else if ((fd->type == PROTOBUF_C_TYPE_STRING || fd->type == PROTOBUF_C_TYPE_BYTES)
                 && f.len > max_string)
            return -1;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            counts[index] += (size_t) elements;
            if (counts[index] > max_repeated)
                return -1;
        }
    }
    return more < 0 ? -1 : 0;
}

bool ak_pbw_set_add (ak_pbw_set_t *set, uint32_t number, uint32_t *high, size_t cap)
{
    if (number < 64) {
        set->low |= (uint64_t) 1 << number;
        return true;
    }
    if (set->nhigh >= cap)
        return false;
    high[set->nhigh++] = number;
    set->high = high;
    return true;
}

static bool s_in (const ak_pbw_set_t *set, uint32_t number)
{
    if (number < 64)
        return set->low >> number & 1;
    for (size_t i = 0; i < set->nhigh; i++)
        if (set->high[i] == number)
            return true;
    return false;
}

ProtobufCMessage *ak_pbw_unpack_only (const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                                      const ak_pbw_set_t *keep)
{
    return ak_pbw_unpack_only_with (desc, NULL, data, len, keep);
}

ProtobufCMessage *ak_pbw_unpack_only_with (const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                                           const uint8_t *data, size_t len, const ak_pbw_set_t *keep)
{
    uint8_t stack[1024];
    uint8_t *buf = len <= sizeof stack ? stack : malloc (len ? len : 1);
    if (!buf)
        return NULL;
    size_t n = 0;
    const uint8_t *pos = data, *end = data + len;
    ak_pbw_field_t f;
    int more;
    while ((more = ak_pbw_next (&pos, end, &f)) == 1)
        if (s_in (keep, f.number)) {
            memcpy (buf + n, f.start, f.size);
            n += f.size;
        }
    ProtobufCMessage *msg = more < 0 ? NULL : protobuf_c_message_unpack (desc, alloc, n, buf);
    if (buf != stack)
        free (buf);
    return msg;
}
