/*  worker/refcache.h: the executor's cache of gate references.

    The float64 reference outputs of one gate configuration (operator,
    dims, dtype, seed, input transform) are the same for every candidate
    gated on it, so an executor keeps them across tasks: the gates ask the
    cache before generating inputs and running the host oracle or the
    device reference (worker/gates_ref.c).  An entry holds the inputs as
    the kernels see them (raw, in the dtype; none when they are made on the
    device) and the reference's outputs.

    The key is a SHA-256 the caller computes over everything that decides
    those bytes (gates_ref.c, "The key"): the digests of the compiled host
    oracle and device reference, which of the two made the outputs, the
    spec's buffers and bounds, dims, dtype, seed, transform, the generator.
    A key never seen, or an entry evicted, is a miss; the cache never
    answers for a key it was not given.

    Memory is bounded: putting an entry evicts the least recently used
    ones until the total fits; an entry larger than the bound alone is not
    kept.  Entries in use (pinned by get, until release) are never evicted
    or freed.  One thread (the executor's).

    Never: answer a key with another key's entry; free or evict a pinned
    entry; exceed the bound with unpinned entries. */
#ifndef AK_WORKER_REFCACHE_H
#define AK_WORKER_REFCACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"
#include "spec.h"

#define AK_REFCACHE_KEY_LEN 32

/* Default bound of an executor's cache (MiB); akworker --ref-cache-mb
   (environment AK_REF_CACHE_MB in the executor) sets another, 0 none. */
#define AK_REFCACHE_DEFAULT_MB 2048
/* The same for the device cache of the float64 outputs of device
   references (gates.h, drefcache): akworker --dref-cache-mb (environment
   AK_DREF_CACHE_MB in the executor), 0 none. */
#define AK_DREFCACHE_DEFAULT_MB 8192

typedef struct ak_refcache ak_refcache_t;

/* One cached configuration.  Buffers are malloc'ed; after a put they are
   the cache's. */
typedef struct {
    int      nin, nout;
    uint8_t *in[AK_MAX_BUFS];          /* inputs in the dtype; NULL: made on the device */
    size_t   in_bytes[AK_MAX_BUFS];
    double  *ref[AK_MAX_BUFS];         /* reference outputs */
    size_t   nref[AK_MAX_BUFS];        /* elements of ref[k] */
    size_t   ref_nonfinite;            /* elements the reference made NaN/Inf */
    uint64_t dsum[AK_MAX_BUFS];        /* a device cache's: ref[k]'s keyed sum (ak_dcmp_t.want_sum) */
} ak_refentry_t;

typedef struct {
    uint64_t hits, misses, puts, evictions;
    uint64_t too_big;                  /* entries not kept: larger than the bound */
    uint64_t bytes, entries;           /* held now */
    uint64_t max_bytes;
} ak_refcache_stats_t;

/* A cache holding at most max_bytes of entries (0: keeps nothing; every
   get misses). */
ak_refcache_t *ak_refcache_new (uint64_t max_bytes);

/* A cache of entries on a device: ref[k] are device buffers (in[] unused),
   freed by release (arg, buffer) when evicted, refused or destroyed; the
   bound counts their bytes as for host entries.  NULL without release. */
typedef void ak_refcache_release_fn (void *arg, void *buf);
ak_refcache_t *ak_refcache_new_device (uint64_t max_bytes, ak_refcache_release_fn *release, void *arg);
void ak_refcache_destroy (ak_refcache_t **self_p);

/* The bound an executor uses: AK_REF_CACHE_MB from the environment (MiB,
   0 none) when it is a number, else AK_REFCACHE_DEFAULT_MB. */
uint64_t ak_refcache_env_bytes (void);
/* AK_DREF_CACHE_MB the same way, else AK_DREFCACHE_DEFAULT_MB. */
uint64_t ak_refcache_env_dev_bytes (void);

/* The entry of key, pinned (release it with ak_refcache_release) and made
   the most recently used; NULL on a miss.  Counts the hit or miss. */
const ak_refentry_t *ak_refcache_get (ak_refcache_t *self, const uint8_t key[AK_REFCACHE_KEY_LEN]);
void ak_refcache_release (ak_refcache_t *self, const ak_refentry_t *entry);
/* Drops entry (found corrupt): no get answers with it again; freed once
   its last pin is released. */
void ak_refcache_forget (ak_refcache_t *self, const ak_refentry_t *entry);

/* Takes *entry's buffers (entry is zeroed) under key: kept, or freed (a
   device cache: released) when it does not fit the bound (too_big) or key
   is already there.  Evicts
   least recently used unpinned entries to make room.  Returns true when
   the entry was kept. */
bool ak_refcache_put (ak_refcache_t *self, const uint8_t key[AK_REFCACHE_KEY_LEN], ak_refentry_t *entry);

/* Bytes an entry holds (inputs and outputs). */
uint64_t ak_refentry_bytes (const ak_refentry_t *e);
/* Frees an entry's buffers (one not handed to the cache). */
void ak_refentry_clear (ak_refentry_t *e);

void ak_refcache_stats (const ak_refcache_t *self, ak_refcache_stats_t *out);

#endif
