/*  common/envelope.h: the versioned message envelope.

    Every ZeroMQ message the system sends is one frame holding a packed
    Ak__Envelope (proto/akfleet.proto); on a ROUTER the identity frame comes
    first.  Decoding is the one door untrusted bytes come through: it checks
    size, parses, checks the protocol version and that a body is present, and
    bounds every string and repeated field, so callers can trust what they get.
    It must never crash on any input. */
#ifndef AK_ENVELOPE_H
#define AK_ENVELOPE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"

#define AK_PROTOCOL_VERSION   1
#define AK_MAX_MSG_SIZE       (16u * 1024 * 1024)   /* also ZMQ_MAXMSGSIZE */
#define AK_MAX_STRING         (4u * 1024 * 1024)    /* any one string field */
#define AK_MAX_REPEATED       65536                 /* any one repeated field */

/* The packed size of env, stamped with AK_PROTOCOL_VERSION, in *size_p:
   what a sender checks before packing it into a buffer of its own.
   AK_EINVAL for an envelope without a body, AK_ETOOBIG over
   AK_MAX_MSG_SIZE. */
int ak_envelope_size (Ak__Envelope *env, size_t *size_p);

/* Packs env into a malloc'ed buffer the caller frees.  Sets env->version to
   AK_PROTOCOL_VERSION.  AK_ETOOBIG if it would exceed AK_MAX_MSG_SIZE. */
int ak_envelope_pack (Ak__Envelope *env, uint8_t **data_p, size_t *size_p);

/* Unpacks and validates: size in (0, max_size], parses, version ==
   AK_PROTOCOL_VERSION (else AK_EVERSION), a body is set, limits hold.
   On success *env_p is the caller's, to free with ak_envelope_free.
   On failure returns AK_EPROTO / AK_EVERSION / AK_ETOOBIG with err saying why. */
int ak_envelope_unpack (const void *data, size_t size, size_t max_size,
                        Ak__Envelope **env_p, ak_err_t *err);

/* The same; *unknown_p (when given) is the number of unknown fields that
   were dropped from the message and its sub-messages.  With
   AK_ENVELOPE_SLIM_RECEIPT in flags, a frame holding only version, seq
   and one RECEIPT with no field this build does not know comes back with
   a slim receipt (ak_envelope_slim_receipt): its bytes are checked to
   parse as protobuf-c parses them and to keep every limit
   (ak_pbw_validate), without building the rest, for a caller that stores
   the receipt's bytes as they came (the coordinator's intake).  Debug
   builds check every such frame against protobuf-c.  *slim_p (when
   given) says whether the receipt is slim. */
#define AK_ENVELOPE_SLIM_RECEIPT 1u
int ak_envelope_unpack_counted (const void *data, size_t size, size_t max_size, unsigned flags,
                                Ak__Envelope **env_p, size_t *unknown_p, bool *slim_p, ak_err_t *err);

/* The receipt of the Receipt bytes data with only the fields the
   coordinator reads or sets decoded: task_id, attempt, status and
   receipt_id, batch_id, worker_id, received_at_ms, duplicate.  NULL when
   they do not parse. */
Ak__Receipt *ak_envelope_slim_receipt (const uint8_t *data, size_t len);

void ak_envelope_free (Ak__Envelope **env_p);

/* The bytes of the length-delimited field `field` of the packed message at
   data (a body of an Envelope, say): 0 with *p, *n when the field occurs
   exactly once at the top level; AK_ENOTFOUND when it is absent or repeated
   (a parser merges repeats, so no single slice is the message); AK_EPROTO
   when the bytes do not parse as far as needed. */
int ak_envelope_field_bytes (const void *data, size_t size, uint32_t field,
                             const uint8_t **p, size_t *n);

/* Name of the body case ("hello", "receipt" ...), for logs. */
const char *ak_envelope_kind (const Ak__Envelope *env);

/* Sends env as one frame on a CZMQ socket (DEALER side; for a ROUTER pass
   the peer identity as routing_id, else NULL).  0, AK_ETOOBIG or AK_EIO. */
int ak_envelope_send (void *zsock, const void *routing_id, size_t routing_len,
                      Ak__Envelope *env);

#endif
