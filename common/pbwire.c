/*  common/pbwire.c: the protobuf wire format by hand (see pbwire.h). */
#include "pbwire.h"

static int s_varint_read (const uint8_t **pos, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
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
    if (s_varint_read (&p, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return -1;
    f->start = *pos;
    f->number = (uint32_t) (tag >> 3);
    f->wire = (int) (tag & 7);
    f->varint = 0;
    switch (f->wire) {
        case AK_PBW_VARINT:
            f->data = p;
            if (s_varint_read (&p, end, &f->varint))
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
            if (s_varint_read (&p, end, &n) || n > (uint64_t) (end - p))
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
