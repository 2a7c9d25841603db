/*  common/pbjson.h: any generated protobuf-c message as a jansson object.

    Walks the message descriptor, so every record and wire message gets the
    same JSON shape without hand-written converters: field names as in the
    .proto; scalars always present (zero included); unset sub-messages null;
    of a oneof only the set case; enums by name; repeated fields as arrays.
    Doubles that are not finite become null; uint64 values above INT64_MAX
    become decimal strings (JSON integers here are signed 64-bit); strings
    that are not valid UTF-8 get U+FFFD for each bad byte; bytes are base64. */
#ifndef AK_PBJSON_H
#define AK_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* A new JSON object for msg (caller json_decref's it); NULL for a NULL
   message or when out of memory. */
json_t *ak_pb_to_json (const ProtobufCMessage *msg);

#endif
