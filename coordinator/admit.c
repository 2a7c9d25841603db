/*  coordinator/admit.c: what a worker may do (see admit.h). */
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "admit.h"
#include "util.h"

/* A key's registrations: a token bucket (tokens in thousandths). */
typedef struct {
    uint64_t tokens;
    uint64_t at;                /* monotonic ms of the last refill */
} s_bucket_t;

struct ak_admit {
    zhashx_t *buckets;          /* key (Z85) -> s_bucket_t; keys of the ring only */
};

static void s_bucket_free (void **item)
{
    free (*item);
    *item = NULL;
}

ak_admit_t *ak_admit_new (void)
{
    ak_admit_t *self = ak_calloc (1, sizeof *self);
    self->buckets = zhashx_new ();
    if (!self->buckets)
        abort ();
    zhashx_set_destructor (self->buckets, s_bucket_free);
    return self;
}

void ak_admit_destroy (ak_admit_t **self_p)
{
    if (self_p && *self_p) {
        ak_admit_t *self = *self_p;
        zhashx_destroy (&self->buckets);
        free (self);
        *self_p = NULL;
    }
}

bool ak_admit_hello_valid (const Ak__Hello *h, char *why, size_t len)
{
    if (!ak_str_token (h->worker_id, AK_WORKER_ID_MAX)) {
        snprintf (why, len, "worker_id must be 1..%d printable characters without spaces", AK_WORKER_ID_MAX);
        return false;
    }
    if (h->n_devices == 0 || h->n_devices > AK_HELLO_MAX_DEVICES) {
        snprintf (why, len, "worker %s: %zu devices (must be 1..%d)", h->worker_id, h->n_devices,
                  AK_HELLO_MAX_DEVICES);
        return false;
    }
    for (size_t i = 0; i < h->n_devices; i++)
        if (!ak_str_token (h->devices[i]->device_class, AK_DEVICE_CLASS_MAX)) {
            snprintf (why, len, "worker %s: devices[%zu].device_class must be 1..%d printable characters",
                      h->worker_id, i, AK_DEVICE_CLASS_MAX);
            return false;
        }
    if (h->slots > AK_HELLO_MAX_SLOTS || h->prefetch > AK_HELLO_MAX_SLOTS) {
        snprintf (why, len, "worker %s: slots and prefetch must be at most %d", h->worker_id, AK_HELLO_MAX_SLOTS);
        return false;
    }
    if (h->n_running > AK_HELLO_MAX_RUNNING) {
        snprintf (why, len, "worker %s: %zu tasks listed as running (at most %d)", h->worker_id, h->n_running,
                  AK_HELLO_MAX_RUNNING);
        return false;
    }
    /* what is stored and shown of a worker: its HELLO without the running list */
    Ak__Hello copy = *h;
    copy.n_running = 0;
    size_t size = ak__hello__get_packed_size (&copy);
    if (size > AK_HELLO_MAX_BYTES) {
        snprintf (why, len, "worker %s: HELLO of %zu bytes without its running list (at most %d)",
                  h->worker_id, size, AK_HELLO_MAX_BYTES);
        return false;
    }
    return true;
}

/* One registration from key's bucket (allowed ids x AK_HELLO_BURST deep,
   refilled by allowed ids each AK_HELLO_REFILL_MS); false when empty. */
static bool s_take (ak_admit_t *self, const ak_key_t *key, uint64_t now)
{
    uint64_t ids = key->max_workers ? key->max_workers : 1;
    uint64_t cap = ids * AK_HELLO_BURST * 1000;
    s_bucket_t *b = zhashx_lookup (self->buckets, key->key);
    if (!b) {
        b = ak_calloc (1, sizeof *b);
        b->tokens = cap;
        b->at = now;
        zhashx_insert (self->buckets, key->key, b);
    }
    if (now > b->at) {
        uint64_t add = (now - b->at) * ids * 1000 / AK_HELLO_REFILL_MS;
        b->tokens = b->tokens + add > cap ? cap : b->tokens + add;
        b->at = now;
    }
    if (b->tokens < 1000)
        return false;
    b->tokens -= 1000;
    return true;
}

/* Whether two HELLOs come from one process: the same host and pid (a
   worker that reconnects on a new socket says HELLO again). */
static bool s_same_process (const Ak__Hello *a, const Ak__Hello *b)
{
    return a->pid == b->pid && strcmp (a->host ? a->host : "", b->host ? b->host : "") == 0;
}

/*  Whether w, alive, holds its id against hello from another process: on
    another host always; on its own host while it still heartbeats (heard
    within AK_ADMIT_HELD_BEATS of its intervals), since a newer process
    there after a silence is most likely its replacement after a crash
    (systemd restarts it), which need not wait for the liveness scan. */
static bool s_held (const ak_worker_t *w, const Ak__Hello *hello, uint64_t now)
{
    if (!w->alive || !w->hello || s_same_process (w->hello, hello))
        return false;
    if (strcmp (w->hello->host ? w->hello->host : "", hello->host ? hello->host : "") != 0)
        return true;
    return now <= w->last_seen + ak_worker_timeout (w, 1000, AK_ADMIT_HELD_BEATS);
}

bool ak_admit_hello (ak_admit_t *self, ak_registry_t *registry, const ak_keyring_t *ring,
                     const Ak__Hello *hello, const ak_key_t *peer, uint64_t now, bool *retry, char *why, size_t len)
{
    *retry = true;
    ak_worker_t *w = ak_registry_get (registry, hello->worker_id);
    if (!w && ak_registry_size (registry) >= AK_WORKERS_MAX) {
        snprintf (why, len, "worker %.128s: %d workers are known already: forget dead ones first",
                  hello->worker_id, AK_WORKERS_MAX);
        return false;
    }
    /* an id stays with the key it registered with while that key is in
       the ring, alive or dead: another key taking it over would inherit
       its leases (after a restart, every worker is dead) */
    if (peer && w && w->key && strcmp (w->key, peer->key) != 0) {
        const ak_key_t *bound = ring ? ak_keyring_find (ring, w->key) : NULL;
        if (bound && bound->role == AK_ROLE_WORKER) {
            snprintf (why, len, "worker id %.128s is registered with another key", hello->worker_id);
            *retry = false;
            return false;
        }
    }
    /* one process per id: two workers started with one --id would take
       the id (and its leases) from each other at every message */
    if (w && s_held (w, hello, now)) {
        snprintf (why, len, "worker id %.128s is held by a live worker (host %.64s, pid %u, heard %llu ms ago): "
                  "start this one (host %.64s, pid %u) with another --id, or stop that one; the id is free "
                  "once the coordinator declares it dead", hello->worker_id, w->hello->host, w->hello->pid,
                  (unsigned long long) (now > w->last_seen ? now - w->last_seen : 0), hello->host, hello->pid);
        *retry = false;
        return false;
    }
    if (!peer)
        return true;
    if (!w || !w->key || strcmp (w->key, peer->key) != 0) {
        size_t have = ak_registry_key_ids (registry, peer->key, hello->worker_id);
        uint32_t may = peer->max_workers ? peer->max_workers : 1;
        if (have >= may) {
            snprintf (why, len, "worker key %s may register %u worker id%s and has %zu already: "
                      "not %.128s (docs/operations.md)", peer->name, may, may == 1 ? "" : "s", have,
                      hello->worker_id);
            *retry = false;
            return false;
        }
    }
    if (!s_take (self, peer, now)) {
        snprintf (why, len, "worker key %s: too many registrations (at most %u at once, then %u a second)",
                  peer->name, (peer->max_workers ? peer->max_workers : 1) * AK_HELLO_BURST,
                  (peer->max_workers ? peer->max_workers : 1) * 1000 / AK_HELLO_REFILL_MS);
        return false;
    }
    return true;
}

bool ak_admit_receipt (const ak_task_t *task, uint32_t attempt, const ak_worker_t *w, const ak_key_t *peer,
                       char *why, size_t len)
{
    if (peer && (!w->key || strcmp (w->key, peer->key) != 0)) {
        snprintf (why, len, "receipt for task %s from %s: its connection's key %s is not the worker's",
                  task->task_id, w->worker_id, peer->name);
        return false;
    }
    if (attempt != task->attempt) {
        snprintf (why, len, "receipt for task %s attempt %u from %s: the task is at attempt %u",
                  task->task_id, attempt, w->worker_id, task->attempt);
        return false;
    }
    if (!task->attempt_holder || strcmp (task->attempt_holder, w->worker_id) != 0) {
        snprintf (why, len, "receipt for task %s attempt %u from %s: %s%s", task->task_id, attempt,
                  w->worker_id, task->attempt_holder ? "that attempt is held by " : "that attempt was never assigned",
                  task->attempt_holder ? task->attempt_holder : "");
        return false;
    }
    return true;
}

bool ak_admit_claim (const ak_task_t *task, uint32_t attempt, const ak_worker_t *w)
{
    return task->state == AK_TS_LEASED && attempt == task->attempt && task->worker_id
        && strcmp (task->worker_id, w->worker_id) == 0;
}
