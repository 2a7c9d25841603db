/*  worker/pbutil.h: building protobuf-c messages by hand.

    Every message the worker builds follows one ownership rule: it is laid out
    exactly like one returned by ak__X__unpack (NULL, ...): strings are
    malloc'ed or protobuf_c_empty_string, arrays and sub-messages malloc'ed.
    So ak__X__free_unpacked (msg, NULL) frees it whichever way it was made,
    and fields of an unpacked message can be replaced with these helpers. */
#ifndef AK_WORKER_PBUTIL_H
#define AK_WORKER_PBUTIL_H
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"

/* Replaces *field with a copy of value (NULL means ""), freeing the old one. */
void ak_pb_set_str (char **field, const char *value);
/* Same with at most max bytes of value; a cut text ends with "\n[truncated]". */
void ak_pb_set_str_max (char **field, const char *value, size_t max);

/* A deep copy of msg through pack + unpack; the caller frees it with the
   matching free_unpacked.  NULL when msg is NULL or does not round-trip. */
void *ak_pb_dup (const void *msg);

/* A new receipt naming the task of assign (task, batch, attempt, kind, op,
   candidate and params copied) with status and reason set; never NULL. */
Ak__Receipt *ak_pb_receipt_for (const Ak__Assign *assign, const char *status, const char *reason);

/* Appends a heap-owned copy of gate to receipt->gates. */
void ak_pb_receipt_add_gate (Ak__Receipt *receipt, const Ak__GateResult *gate);
/* Appends timing (ownership passes to the receipt). */
void ak_pb_receipt_add_timing (Ak__Receipt *receipt, Ak__WorkloadTiming *timing);

/* Packs msg into a malloc'ed buffer the caller frees. */
int ak_pb_pack (const void *msg, uint8_t **data_p, size_t *len_p);

#endif
