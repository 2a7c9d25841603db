/*  common/envelope.h: the versioned message envelope.

    Every ZeroMQ message the system sends is one frame holding a packed
    Ak__Envelope (proto/akfleet.proto); on a ROUTER the identity frame comes
    first.  Decoding is the one door untrusted bytes come through: it checks
    size, parses, checks the protocol version and that a body is present, and
    bounds every string and repeated field, so callers can trust what they get.
    It must never crash on any input. */
#ifndef AK_ENVELOPE_H
#define AK_ENVELOPE_H
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"

#define AK_PROTOCOL_VERSION   1
#define AK_MAX_MSG_SIZE       (16u * 1024 * 1024)   /* also ZMQ_MAXMSGSIZE */
#define AK_MAX_STRING         (4u * 1024 * 1024)    /* any one string field */
#define AK_MAX_REPEATED       65536                 /* any one repeated field */

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
   were dropped from the message and its sub-messages. */
int ak_envelope_unpack_counted (const void *data, size_t size, size_t max_size,
                                Ak__Envelope **env_p, size_t *unknown_p, ak_err_t *err);

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
