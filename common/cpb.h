/*  common/cpb.h: small helpers for protobuf-c messages a program
    builds or edits by hand.

    Convention: every message a program builds owns all of its memory
    through malloc (strings, arrays, sub-messages), so it is freed with the
    generated ak__*__free_unpacked (rec, NULL) exactly like an unpacked one.
    A string field is either malloc'ed or protobuf-c's shared empty string,
    which free_unpacked knows to leave alone. */
#ifndef AK_CPB_H
#define AK_CPB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>
#include "akfleet.pb-c.h"

/* Replaces *field with a copy of value (NULL or "" gives the shared empty
   string), freeing the previous value unless it was the shared empty one. */
void ak_cpb_set (char **field, const char *value);

/* Same, with printf formatting. */
void ak_cpb_setf (char **field, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Deep copy through pack + unpack; the copy is the caller's (free_unpacked).
   Returns NULL only when the message cannot be unpacked again (a bug). */
ProtobufCMessage *ak_cpb_dup (const ProtobufCMessage *msg);

/* True when a and b pack to the same bytes (both NULL counts as the same;
   protobuf-c packs fields in number order, so equal messages do).  For
   the debug checks of bytes passed on without packing (store.c, dispatch.c). */
bool ak_cpb_same (const ProtobufCMessage *a, const ProtobufCMessage *b);

/* A new Param array of n entries (names[i], values[i]); caller owns it. */
Ak__Param **ak_cpb_params_new (const char *const *names, const int64_t *values, size_t n);

/* A deep copy of n params. */
Ak__Param **ak_cpb_params_dup (Ak__Param *const *src, size_t n);

/* Frees n params and the array. */
void ak_cpb_params_free (Ak__Param **params, size_t n);

/* "BLOCK=8 UNROLL=2" into buf (empty for no params); returns buf. */
const char *ak_cpb_params_text (Ak__Param *const *params, size_t n, char *buf, size_t len);

/* Lexicographic order of two param lists by value (then by length), for
   deterministic tie-breaks. */
int ak_cpb_params_cmp (Ak__Param *const *a, size_t na, Ak__Param *const *b, size_t nb);

#endif
