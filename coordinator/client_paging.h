/*  coordinator/client_paging.h: answers in pages (docs/client-api.md,
    "Pages").

    Whatever the store holds, one request builds at most one page: at most
    LIMIT records, about AK_PAGE_BYTES of JSON and AK_PAGE_COST stored
    bytes decoded (a record larger than
    that goes alone; one whose JSON would not fit a message, or a stored
    receipt past the receipt limits, is shown as a stub that says so), so
    the loop serves workers between the pages.  An answer names the AFTER
    of its next page in "next" (null: the last one); akctl follows them.

    Shared by the verbs of client.c and client_report.c; never writes. */
#ifndef AK_CLIENT_PAGING_H
#define AK_CLIENT_PAGING_H
#include <jansson.h>
#include "client.h"

/* An answer's JSON is one string of the reply: at most AK_MAX_STRING
   (4 MiB, envelope.h), which every page keeps with room to spare. */
#define AK_PAGE_MAX       1000              /* records per page, at most and by default */
#define AK_PAGE_BYTES     (1u << 20)        /* JSON per page, near enough */
#define AK_PAGE_COST      (256u << 10)      /* stored receipt bytes a page decodes, near enough */
#define AK_PAGE_ONE_MAX   (3u << 20)        /* one receipt's JSON, at most: else without its bulk */
#define AK_PAGE_WHOLE_MAX (256u << 10)      /* a receipt shown whole, as stored: else without its bulk */

typedef struct {
    size_t      limit;          /* records (report: operator pairs) */
    const char *after;          /* NULL: from the start */
} ak_page_t;

/* LIMIT and AFTER from req->args[first] and [first + 1] (absent: the
   defaults).  AK_EINVAL naming the verb when LIMIT is not 1..AK_PAGE_MAX. */
int ak_page_args (const Ak__ClientRequest *req, size_t first, ak_page_t *page, ak_err_t *err);

/* The receipts indexed under prefix ("TASK#" or "BATCH.") in key order
   (task, attempt, arrival), from after page->after, with used bytes of
   the page's JSON taken already: *arr_p the page, *next_p the AFTER of
   the next page (json null when none). */
int ak_page_receipts (ak_txn_t *txn, const char *prefix, const ak_page_t *page, size_t used, json_t **arr_p,
                      json_t **next_p, ak_err_t *err);

/* BATCHSUM of b, and [{"name","value"}...] of params (client.c). */
json_t *ak_client_batchsum (const ak_batch_t *b);
json_t *ak_client_params_json (Ak__Param *const *params, size_t n);

/* report BATCH [LIMIT [AFTER]] (client_report.c). */
int ak_client_report (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now, json_t **out,
                      ak_err_t *err);

#endif
