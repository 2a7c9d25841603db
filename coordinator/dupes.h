/*  coordinator/dupes.h: duplicates kept as a digest (docs/protocol.md,
    "Receipt limits").

    The first AK_DUP_KEEP_WHOLE duplicates of a task are stored whole, as
    every receipt is.  Each later one is kept as a digest record: a Receipt
    with only who sent what and when (task, attempt, worker, host, kind,
    status, a reason cut to AK_DUP_REASON_MAX, its times), `digest` (SHA-256
    of its bytes as sent), `size`, `copies` and `last_at_ms`; its body is
    dropped.  A copy with the same bytes from the same worker as an earlier
    digest record of the task is folded into that record (copies + 1,
    last_at_ms), so a worker that re-sends one receipt forever adds
    nothing; the index key "TASK#digest#HEX" (attempts database) finds it.

    Never: stores a duplicate's body past the cap, counts a duplicate as a
    result, writes outside the caller's transaction. */
#ifndef AK_DUPES_H
#define AK_DUPES_H
#include <stdbool.h>
#include <stddef.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "store.h"

#define AK_DUP_KEEP_WHOLE   2       /* duplicates of a task stored whole */
#define AK_DUP_REASON_MAX   256     /* bytes of reason a digest record keeps */

/* Stores duplicate r (its coordinator fields set: receipt_id, batch_id,
   worker_id, received_at_ms, duplicate) as a digest record in txn, the
   digest over raw (rawlen bytes as the worker sent them) or, raw NULL,
   over r packed without the coordinator's fields.  *folded says it went
   into an earlier record, whose id is then copied into rid (24 bytes);
   else the record is rid's (r->receipt_id).  0 or the store's error. */
int ak_dupes_store (ak_txn_t *txn, const Ak__Receipt *r, const void *raw, size_t rawlen, char rid[24],
                    bool *folded, ak_err_t *err);

#endif
