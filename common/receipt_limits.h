/*  common/receipt_limits.h: how large a receipt may be (docs/protocol.md,
    "Receipt limits").

    The envelope's limits (envelope.h: 16 MiB a message, 4 MiB a string,
    65,536 elements a repeated field) let one receipt carry 60,000 gate
    entries with long details: stored whole, shown whole, such records
    stalled the coordinator's loop for seconds.  These bounds fit what a
    worker really sends, with a margin: akworker's gates (worker/gates.h)
    are at most 6 stages with 1 KiB details, its compile log is cut at
    64 KiB, a task has at most 4,096 workloads (one timing and profile each,
    two kernel records).  The coordinator refuses a receipt past any of
    them (counted in stats.security.receipts_too_big, logged with the
    peer); the worker's executor keeps only the verdict of one past
    AK_RECEIPT_MAX_BYTES, so its own receipts never are.

    Never: decodes the receipt (it walks the bytes, bounded by their end),
    trusts a length it has not checked against the end. */
#ifndef AK_RECEIPT_LIMITS_H
#define AK_RECEIPT_LIMITS_H
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"

#define AK_RECEIPT_MAX_BYTES    (4u << 20)      /* the receipt as sent (a real one: under 3 MiB) */
#define AK_RECEIPT_MAX_GATES    16              /* gate entries (akworker: 6 stages at most) */
#define AK_RECEIPT_MAX_DETAIL   4096            /* a gate's detail (akworker: under 1 KiB) */
#define AK_RECEIPT_MAX_GATE_STR 256             /* a gate's stage and worst_at (akworker: 16, 128) */
#define AK_RECEIPT_MAX_REASON   4096            /* the receipt's reason (akworker: under 1 KiB) */
#define AK_RECEIPT_MAX_LOG      (256u << 10)    /* compile_log (akworker: 64 KiB) */
#define AK_RECEIPT_MAX_TIMINGS  8192            /* one per workload: 4,096 at most */
#define AK_RECEIPT_MAX_KERNELS  16384           /* two per workload */
#define AK_RECEIPT_MAX_PROFILES 8192            /* one per workload */
#define AK_RECEIPT_MAX_BUDGETS  64              /* KernelBudget: one per role and dtype (6 at most) */

/* Whether the len bytes at raw (a packed Receipt) keep every limit above.
   0 when they do; AK_ETOOBIG with why ("receipt for task T: 60000 gate
   entries (at most 16)") when not, AK_EPROTO when they do not parse. */
int ak_receipt_check (const uint8_t *raw, size_t len, const char *task_id, char *why, size_t whylen);

/* The same for a decoded receipt (packed to be measured). */
int ak_receipt_check_msg (const Ak__Receipt *r, char *why, size_t whylen);

#endif
