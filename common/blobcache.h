/*  common/blobcache.h: the blob cache of one worker registration.

    A spec or kernel source is the same text in thousands of ASSIGNs of a
    batch.  A worker that offers a cache in its HELLO (blob_cache_bytes,
    blob_epoch) keeps every text an ASSIGN of that registration carries
    inline, and the coordinator then sends only the digest of one it has
    sent before (Source.cached, Assign.spec_cached).  Both sides keep a
    blob cache for the registration and apply the same rule to the blobs of
    each ASSIGN, in message order (spec, reference, baseline, candidate):
    a text sent inline is admitted if it is not there yet and the total
    stays within the limit.  The coordinator keeps digests only and admits
    after the ASSIGN is sent; the worker keeps the texts, checked against
    their digests.  A new HELLO starts both afresh with a new epoch; an
    ASSIGN of an older epoch is stale (sent before the coordinator saw the
    HELLO, which released its task).  A cached blob the worker lacks in the
    current epoch means the two fell out of step (messages lost in a
    reconnect): the worker registers again.  docs/protocol.md. */
#ifndef AK_BLOBCACHE_H
#define AK_BLOBCACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"

typedef struct ak_blobcache ak_blobcache_t;

/* keep_text: a worker's cache (texts) rather than the coordinator's
   mirror (digests). */
ak_blobcache_t *ak_blobcache_new (bool keep_text);
void ak_blobcache_destroy (ak_blobcache_t **self_p);

/* Empties it for a new registration: epoch and limit in bytes (0: none). */
void ak_blobcache_reset (ak_blobcache_t *self, uint32_t epoch, uint64_t limit);
uint32_t ak_blobcache_epoch (const ak_blobcache_t *self);
uint64_t ak_blobcache_limit (const ak_blobcache_t *self);
size_t ak_blobcache_count (const ak_blobcache_t *self);
uint64_t ak_blobcache_bytes (const ak_blobcache_t *self);

/* The coordinator: whether the worker holds digest (send it cached). */
bool ak_blobcache_has (const ak_blobcache_t *self, const char *digest);
/* Admits a blob sent inline (text: NULL in the coordinator's mirror, len
   its length either way) if absent and within the limit; true if it did. */
bool ak_blobcache_admit (ak_blobcache_t *self, const char *digest, const char *text, size_t len);

/* The coordinator: marks the blobs of the ASSIGN a (spec and sources)
   cached where the worker holds them, leaving their text out (a's strings
   are borrowed: text is only cleared).  After the ASSIGN is sent, call
   ak_blobcache_sent with it.  Both do nothing for a NULL cache or one of
   limit 0 (a worker that offered none). */
void ak_blobcache_mark (const ak_blobcache_t *self, Ak__Assign *a);
void ak_blobcache_sent (ak_blobcache_t *self, const Ak__Assign *a);

/* The worker: completes a received ASSIGN in place (a was unpacked with
   the default allocator): admits its inline blobs whose text matches the
   digest, fills in the cached ones.  0; AK_ESTATE when a is stale (another
   epoch) and names a cached blob, which the caller drops; AK_ENOTFOUND
   when a cached blob is missing in this epoch (register again).  err says
   which. */
int ak_blobcache_resolve (ak_blobcache_t *self, Ak__Assign *a, ak_err_t *err);
/* The same checks and admissions, without copying the cached texts into
   a (its cached blobs stay marked cached): for akload, which reads none. */
int ak_blobcache_check (ak_blobcache_t *self, Ak__Assign *a, ak_err_t *err);

#endif
