/*  coordinator/client_paging.c: answers in pages (see client_paging.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "client_paging.h"
#include "envelope.h"
#include "log.h"
#include "pbjson.h"
#include "pbwire.h"
#include "receipt_limits.h"
#include "util.h"

int ak_page_args (const Ak__ClientRequest *req, size_t first, ak_page_t *page, ak_err_t *err)
{
    page->limit = AK_PAGE_MAX;
    page->after = req->n_args > first + 1 ? req->args[first + 1] : NULL;
    if (req->n_args > first) {
        char *end = NULL;
        unsigned long v = strtoul (req->args[first], &end, 10);
        if (!*req->args[first] || *end || v < 1 || v > AK_PAGE_MAX)
            return ak_err_set (err, AK_EINVAL, "%.32s: LIMIT '%.32s' must be 1..%d", req->verb,
                               req->args[first], AK_PAGE_MAX);
        page->limit = v;
    }
    return 0;
}

/* A stored receipt, found by a walk of its exact id: its bytes as they lie
   in the map (no copy), for the length to be judged before decoding. */
typedef struct {
    const char *id;
    const void *val;
    size_t      len;
    bool        found;
} s_raw_t;

static int s_raw_one (const char *key, const void *val, size_t len, void *arg)
{
    s_raw_t *raw = arg;
    if (strcmp (key, raw->id) == 0) {
        raw->val = val;
        raw->len = len;
        raw->found = true;
    }
    return 1;                       /* the first key at or after the id is all */
}

/* The receipt fields that make its bulk: never decoded for a receipt
   shown without it. */
static bool s_bulk (uint32_t number)
{
    static const char *bulk[] = { "timings", "kernels", "profiles", "compile_log" };
    for (size_t i = 0; i < sizeof bulk / sizeof bulk[0]; i++) {
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name (&ak__receipt__descriptor, bulk[i]);
        if (f && f->id == number)
            return true;
    }
    return false;
}

/* A receipt too large to be shown whole (len bytes as stored, JSON of
   json_len bytes when known, else 0): every field but its bulk (gates,
   status, reason ... stay), decoded without touching the bulk, and
   "truncated" saying what was left out and why; NULL when the bytes do
   not parse. */
static json_t *s_without_bulk (const void *val, size_t len, size_t json_len)
{
    ak_pbw_set_t keep = { 0 };
    uint32_t high[64];
    const ProtobufCMessageDescriptor *d = &ak__receipt__descriptor;
    for (unsigned i = 0; i < d->n_fields; i++)
        if (!s_bulk (d->fields[i].id) && !ak_pbw_set_add (&keep, d->fields[i].id, high, 64))
            return NULL;
    Ak__Receipt *r = (Ak__Receipt *) ak_pbw_unpack_only (d, val, len, &keep);
    if (!r)
        return NULL;
    json_t *j = ak_pb_to_json (&r->base);
    ak__receipt__free_unpacked (r, NULL);
    if (!j)
        return NULL;
    /* what was left out, counted on the bytes */
    size_t timings = 0, kernels = 0, profiles = 0, log = 0;
    const uint8_t *p = val, *end = p + len;
    ak_pbw_field_t f;
    while (ak_pbw_next (&p, end, &f) == 1) {
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field (d, f.number);
        if (!fd || !s_bulk (f.number))
            continue;
        if (strcmp (fd->name, "timings") == 0)
            timings++;
        else if (strcmp (fd->name, "kernels") == 0)
            kernels++;
        else if (strcmp (fd->name, "profiles") == 0)
            profiles++;
        else
            log = f.len;
    }
    char why[400], size[80];
    if (json_len)
        snprintf (size, sizeof size, "its JSON of %zu bytes is over the %u MiB one answer holds", json_len,
                  AK_PAGE_ONE_MAX >> 20);
    else
        snprintf (size, sizeof size, "%zu bytes as stored, over the %u KiB shown whole", len,
                  AK_PAGE_WHOLE_MAX >> 10);
    snprintf (why, sizeof why, "not shown whole (%s): left out %zu timings, %zu kernels, %zu profiles and "
              "%zu bytes of compile_log", size, timings, kernels, profiles, log);
    json_object_set_new (j, "truncated", json_string (why));
    return j;
}

/* What is shown of a stored receipt past the receipt limits (stored before
   they held): the fields that say whose and which it is, and why. */
static json_t *s_stub (const char *id, const void *val, size_t len)
{
    Ak__Receipt *slim = ak_envelope_slim_receipt (val, len);
    json_t *j = json_pack ("{s:s, s:s, s:s, s:I, s:s, s:s, s:b, s:I, s:I}", "receipt_id", id,
                           "task_id", slim ? slim->task_id : "", "batch_id", slim ? slim->batch_id : "",
                           "attempt", (json_int_t) (slim ? slim->attempt : 0),
                           "worker_id", slim ? slim->worker_id : "", "status", slim ? slim->status : "",
                           "duplicate", slim && slim->duplicate,
                           "received_at_ms", (json_int_t) (slim ? slim->received_at_ms : 0),
                           "size", (json_int_t) len);
    char why[200];
    snprintf (why, sizeof why, "not shown: %zu bytes, stored before the receipt limits (at most %u)",
              len, (unsigned) AK_RECEIPT_MAX_BYTES);
    json_object_set_new (j, "truncated", json_string (why));
    if (slim)
        ak__receipt__free_unpacked (slim, NULL);
    return j;
}

/* What showing a stored receipt of len bytes decodes: its bulk only up
   to AK_PAGE_WHOLE_MAX, one past the receipt limits not at all. */
static size_t s_cost (size_t len)
{
    return len > AK_PAGE_WHOLE_MAX ? 4096 : len;
}

/* The receipt raw (found) as JSON, *bytes the JSON's size; NULL when it
   does not decode. */
static json_t *s_receipt_json (const s_raw_t *raw, size_t *bytes)
{
    json_t *j = NULL;
    if (raw->len > AK_RECEIPT_MAX_BYTES)
        j = s_stub (raw->id, raw->val, raw->len);
    else if (raw->len > AK_PAGE_WHOLE_MAX)
        j = s_without_bulk (raw->val, raw->len, 0);
    else {
        Ak__Receipt *r = ak__receipt__unpack (NULL, raw->len, raw->val);
        j = r ? ak_pb_to_json (&r->base) : NULL;
        if (r)
            ak__receipt__free_unpacked (r, NULL);
        /* a few bytes can make much JSON (every field of an empty
           sub-message is shown): measured, never assumed */
        size_t n = j ? json_dumpb (j, NULL, 0, JSON_COMPACT) : 0;
        if (n > AK_PAGE_ONE_MAX) {
            json_decref (j);
            j = s_without_bulk (raw->val, raw->len, n);
        }
        else if (j) {
            *bytes = n;
            return j;
        }
    }
    if (!j) {
        ak_error ("store: receipts/%s: undecodable receipt, skipped", raw->id);
        return NULL;
    }
    *bytes = json_dumpb (j, NULL, 0, JSON_COMPACT);
    return j;
}

typedef struct {
    ak_txn_t        *txn;
    const ak_page_t *page;
    json_t          *arr;
    size_t           bytes;         /* JSON of the page so far */
    size_t           cost;          /* stored bytes decoded for it (s_cost) */
    char             last[512];     /* the key of the last receipt listed */
    bool             more;          /* a receipt is left for the next page */
    int              rc;
    ak_err_t        *err;
} s_pager_t;

/* The receipt id of a listing key "TASK#ATTEMPT#RID" (the first-receipt
   keys "TASK#ATTEMPT" and the digest index "TASK#digest#HEX" are not
   listings): NULL for any other key. */
static const char *s_listing (const char *key)
{
    const char *rid = strrchr (key, '#');
    if (!rid || rid[1] != 'R' || rid == key)
        return NULL;
    const char *p = rid - 1;
    while (p > key && *p >= '0' && *p <= '9')
        p--;
    return *p == '#' && p < rid - 1 ? rid + 1 : NULL;
}

static int s_page_one (const char *key, const void *val, size_t len, void *arg)
{
    s_pager_t *pg = arg;
    const char *rid = s_listing (key);
    if (!rid)
        return 0;
    s_raw_t raw = { .id = rid };
    int rc = ak_store_walk (pg->txn, AK_DB_RECEIPTS, rid, s_raw_one, &raw, pg->err);
    if (rc < 0) {
        pg->rc = rc;
        return 1;
    }
    size_t n = json_array_size (pg->arr);
    if (n >= pg->page->limit || (n && (pg->bytes >= AK_PAGE_BYTES
                                       || pg->cost + (raw.found ? s_cost (raw.len) : 0) > AK_PAGE_COST))) {
        pg->more = true;
        return 1;
    }
    size_t bytes = 0;
    json_t *j = raw.found ? s_receipt_json (&raw, &bytes) : NULL;
    if (j) {
        json_array_append_new (pg->arr, j);
        pg->bytes += bytes;
        pg->cost += s_cost (raw.len);
    }
    snprintf (pg->last, sizeof pg->last, "%s", key);
    return 0;
}

int ak_page_receipts (ak_txn_t *txn, const char *prefix, const ak_page_t *page, size_t used, json_t **arr_p,
                      json_t **next_p, ak_err_t *err)
{
    s_pager_t pg = { .txn = txn, .page = page, .arr = json_array (), .bytes = used, .err = err };
    int rc = ak_store_walk_after (txn, AK_DB_ATTEMPTS, prefix, page->after, s_page_one, &pg, err);
    if (rc == 1)
        rc = pg.rc;
    if (rc) {
        json_decref (pg.arr);
        return rc;
    }
    *arr_p = pg.arr;
    *next_p = pg.more ? json_string (pg.last) : json_null ();
    return 0;
}
