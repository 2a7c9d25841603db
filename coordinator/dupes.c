/*  coordinator/dupes.c: duplicates kept as a digest (see dupes.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dupes.h"
#include "cpb.h"
#include "digest.h"
#include "pbwire.h"
#include "util.h"

/* SHA-256 of what the worker sent: raw, or r without the coordinator's fields. */
static int s_digest (const Ak__Receipt *r, const void *raw, size_t rawlen, char hex[65], uint64_t *size)
{
    if (raw) {
        *size = rawlen;
        return ak_sha256_hex (raw, rawlen, hex);
    }
    Ak__Receipt bare = *r;
    bare.receipt_id = bare.batch_id = bare.worker_id = (char *) "";
    bare.received_at_ms = 0;
    bare.duplicate = false;
    size_t len = ak__receipt__get_packed_size (&bare);
    uint8_t *buf = ak_malloc (len ? len : 1);
    ak__receipt__pack (&bare, buf);
    *size = len;
    int rc = ak_sha256_hex (buf, len, hex);
    free (buf);
    return rc;
}

/* Of the receipt's bytes, only what a digest record keeps; NULL when they
   do not parse. */
static Ak__Receipt *s_summary (const void *raw, size_t len)
{
    static const char *names[] = { "host", "kind", "op", "candidate_name", "reason", "started_at_ms",
                                   "finished_at_ms" };
    ak_pbw_set_t keep = { 0 };
    uint32_t high[8];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name (&ak__receipt__descriptor, names[i]);
        if (!f || !ak_pbw_set_add (&keep, f->id, high, sizeof high / sizeof high[0]))
            abort ();               /* the schema lost a field this module names */
    }
    return (Ak__Receipt *) ak_pbw_unpack_only (&ak__receipt__descriptor, raw, len, &keep);
}

/* Packs rec and writes it over receipt_id (a digest record changes). */
static int s_rewrite (ak_txn_t *txn, const Ak__Receipt *rec, ak_err_t *err)
{
    size_t len = ak__receipt__get_packed_size (rec);
    uint8_t *buf = ak_malloc (len ? len : 1);
    ak__receipt__pack (rec, buf);
    int rc = ak_store_put (txn, AK_DB_RECEIPTS, rec->receipt_id, buf, len, err);
    free (buf);
    return rc;
}

int ak_dupes_store (ak_txn_t *txn, const Ak__Receipt *r, const void *raw, size_t rawlen, char rid[24],
                    bool *folded, ak_err_t *err)
{
    *folded = false;
    char hex[65], key[512];
    uint64_t size = 0;
    if (s_digest (r, raw, rawlen, hex, &size) != 0)
        return ak_err_set (err, AK_EINTERNAL, "receipt for task %s: sha256 failed", r->task_id);
    snprintf (key, sizeof key, "%.128s#digest#%s", r->task_id, hex);
    void *val = NULL;
    size_t len = 0;
    int rc = ak_store_get (txn, AK_DB_ATTEMPTS, key, &val, &len, err);
    if (rc == 0 && len > 0 && len < 24) {
        /* the same bytes again: from the same worker, one more copy */
        Ak__Receipt *old = NULL;
        char id[24];
        memcpy (id, val, len);
        id[len] = '\0';
        if (ak_store_get_receipt (txn, id, &old, NULL) == 0 && old->attempt == r->attempt
            && strcmp (old->worker_id, r->worker_id) == 0 && strcmp (old->digest, hex) == 0) {
            old->copies++;
            old->last_at_ms = r->received_at_ms;
            rc = s_rewrite (txn, old, err);
            if (rc == 0) {
                *folded = true;
                memcpy (rid, id, len + 1);
            }
            ak__receipt__free_unpacked (old, NULL);
            free (val);
            return rc;
        }
        if (old)
            ak__receipt__free_unpacked (old, NULL);
    }
    free (val);
    if (rc && rc != AK_ENOTFOUND)
        return rc;

    /* a receipt staged from its bytes is slim (envelope.h): what a digest
       record says of it comes from those bytes */
    Ak__Receipt *full = raw ? s_summary (raw, rawlen) : NULL;
    const Ak__Receipt *src = full ? full : r;
    Ak__Receipt d = AK__RECEIPT__INIT;
    d.receipt_id = r->receipt_id;
    d.task_id = r->task_id;
    d.batch_id = r->batch_id;
    d.attempt = r->attempt;
    d.worker_id = r->worker_id;
    d.host = src->host;
    d.kind = src->kind;
    d.op = src->op;
    d.candidate_name = src->candidate_name;
    d.status = r->status;
    char reason[AK_DUP_REASON_MAX + 1];
    snprintf (reason, sizeof reason, "%s", src->reason ? src->reason : "");
    d.reason = reason;
    d.started_at_ms = src->started_at_ms;
    d.finished_at_ms = src->finished_at_ms;
    d.received_at_ms = r->received_at_ms;
    d.duplicate = true;
    d.digest = hex;
    d.size = size;
    d.copies = 1;
    d.last_at_ms = r->received_at_ms;
    rc = ak_store_put_receipt (txn, &d, err);
    if (rc == 0)
        rc = ak_store_put (txn, AK_DB_ATTEMPTS, key, r->receipt_id, strlen (r->receipt_id), err);
    if (full)
        ak__receipt__free_unpacked (full, NULL);
    return rc;
}
