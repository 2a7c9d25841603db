/*  coordinator/assign.h: an ASSIGN's parts read from its task's stored bytes.

    Most of an ASSIGN is its task's definition as stored (TaskRecord): ids,
    op, class, backend, candidate, params, workloads and policy.  Decoding
    the record and packing those fields again was the largest cost of a
    dispatch.  Those fields are now passed on as the bytes they are stored
    in, each retagged with its number in Assign (the types are the same, so
    the bytes are too); the coordinator packs only the rest (attempt,
    lease, kind, spec, sources, launch, blob epoch) and the two encodings
    are concatenated, which a decoder reads as one message.  Repeated
    occurrences keep their meaning: a field stored twice is passed on twice
    (a decoder keeps the last value, or merges messages, as it would have
    on the record).  The stored bytes are checked to parse at the top
    level; what the copied fields hold is passed on unread, as stored.
    Debug builds check every ASSIGN against one built from the decoded
    record (dispatch.c). */
#ifndef AK_ASSIGN_H
#define AK_ASSIGN_H
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"

typedef struct {
    /* from the record: "" when absent, NUL-terminated, in strs */
    const char     *kind;
    const char     *spec_digest;
    const char     *reference_name;
    const char     *reference_digest;
    const char     *baseline_name;
    const char     *baseline_digest;
    const char     *candidate_digest;
    const char     *candidate_source_name;
    Ak__VerifyRef  *verify;         /* decoded when present (verify tasks), else NULL */
    uint8_t        *copied;         /* the fields passed on, as Assign fields */
    size_t          ncopied;
    char           *strs;
} ak_assign_src_t;

/* Reads the stored TaskRecord bytes rec into src (cleared with
   ak_assign_src_clear, also after a failure).  AK_ESTORE when they do not
   parse, err saying why. */
int ak_assign_src_read (const uint8_t *rec, size_t len, const char *task_id, ak_assign_src_t *src,
                        ak_err_t *err);
void ak_assign_src_clear (ak_assign_src_t *src);

#endif
