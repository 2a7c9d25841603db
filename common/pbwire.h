/*  common/pbwire.h: the protobuf wire format, read and written by hand.
    For the few places where bytes are passed on as they are instead of
    being decoded and packed again (store.c, envelope.c, coordinator
    assign.c): every reader is bounded by its end pointer and never trusts
    a length. */
#ifndef AK_PBWIRE_H
#define AK_PBWIRE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

enum { AK_PBW_VARINT = 0, AK_PBW_I64 = 1, AK_PBW_LEN = 2, AK_PBW_I32 = 5 };

typedef struct {
    uint32_t       number;
    int            wire;            /* AK_PBW_* */
    uint64_t       varint;          /* AK_PBW_VARINT: the value */
    const uint8_t *data;            /* the value's bytes (AK_PBW_LEN: the payload) */
    size_t         len;
    const uint8_t *start;           /* the whole field, tag included */
    size_t         size;
} ak_pbw_field_t;

/* Reads the field at *pos (before end) into f and moves *pos past it:
   1 when it read one, 0 at end, -1 when the bytes do not parse (a
   truncated field, an overlong varint, a group or an unknown wire type). */
int ak_pbw_next (const uint8_t **pos, const uint8_t *end, ak_pbw_field_t *f);

/* Writes v as a varint at p (NULL: only counts); returns its size. */
size_t ak_pbw_varint (uint8_t *p, uint64_t v);

/* Writes the tag of field number with wire type at p (NULL: counts). */
size_t ak_pbw_tag (uint8_t *p, uint32_t number, int wire);

/* A set of field numbers: those below 64 as bits, the rest listed. */
typedef struct {
    uint64_t        low;
    const uint32_t *high;
    size_t          nhigh;
} ak_pbw_set_t;

/* Adds number to set (high numbers: into the caller's array high of room
   cap; false when it is full). */
bool ak_pbw_set_add (ak_pbw_set_t *set, uint32_t number, uint32_t *high, size_t cap);

/* Decodes, as a message of type desc, only the top-level fields of the len
   bytes at data whose numbers are in keep (the others are skipped without
   being read further).  NULL when the bytes do not parse. */
ProtobufCMessage *ak_pbw_unpack_only (const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                                      const ak_pbw_set_t *keep);
/* The same, allocated with alloc (NULL: malloc). */
ProtobufCMessage *ak_pbw_unpack_only_with (const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                                           const uint8_t *data, size_t len, const ak_pbw_set_t *keep);

/* Checks that the len bytes at data parse as a message of type desc as
   protobuf-c's unpack parses them, without building it: every field of
   desc has a wire type protobuf-c takes for it (repeated numbers packed or
   not), every sub-message parses the same way, nested at most max_depth
   deep, no string or bytes field is longer than max_string and no
   repeated field has more than max_repeated elements.  Fields desc does
   not know are counted in *unknown (at any depth) and skipped.  0 when
   the bytes pass, -1 when not. */
int ak_pbw_validate (const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                     int max_depth, size_t max_string, size_t max_repeated, size_t *unknown);

#endif
