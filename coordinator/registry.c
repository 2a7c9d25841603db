/*  coordinator/registry.c: workers by application id (see registry.h). */
#include <stdlib.h>
#include <string.h>
#include "registry.h"
#include "clock.h"
#include "cpb.h"
#include "log.h"
#include "util.h"

struct ak_registry {
    zhashx_t *workers;          /* worker_id -> ak_worker_t (owned) */
    zhashx_t *routes;           /* hex(route) -> ak_worker_t */
    ak_dirty_t dirty;           /* dirty.h */
};

static void s_route_key (const void *route, size_t len, char *key)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *r = route;
    for (size_t i = 0; i < len; i++) {
        key[2 * i] = hex[r[i] >> 4];
        key[2 * i + 1] = hex[r[i] & 15];
    }
    key[2 * len] = '\0';
}

static void s_classes_free (ak_worker_t *w)
{
    for (size_t i = 0; i < w->nclasses; i++)
        free (w->classes[i]);
    free (w->classes);
    w->classes = NULL;
    w->nclasses = 0;
    w->next_class = 0;
}

/* Distinct device classes of the worker's devices, in device order. */
static void s_classes_set (ak_worker_t *w)
{
    s_classes_free (w);
    if (!w->hello || w->hello->n_devices == 0)
        return;
    w->classes = ak_calloc (w->hello->n_devices, sizeof *w->classes);
    for (size_t d = 0; d < w->hello->n_devices; d++) {
        const char *cls = w->hello->devices[d]->device_class;
        bool seen = false;
        for (size_t i = 0; i < w->nclasses; i++)
            if (strcmp (w->classes[i], cls) == 0)
                seen = true;
        if (!seen && *cls)
            w->classes[w->nclasses++] = ak_strdup (cls);
    }
}

static void s_worker_free (void **item)
{
    ak_worker_t *w = *item;
    if (w) {
        free (w->worker_id);
        free (w->key);
        if (w->hello)
            ak__hello__free_unpacked (w->hello, NULL);
        free (w->hello_bytes);
        zhashx_destroy (&w->outstanding);
        s_classes_free (w);
        ak_blobcache_destroy (&w->blobs);
        free (w);
        *item = NULL;
    }
}

static ak_worker_t *s_worker_new (ak_registry_t *self, const char *worker_id)
{
    ak_worker_t *w = ak_calloc (1, sizeof *w);
    w->worker_id = ak_strdup (worker_id);
    w->outstanding = zhashx_new ();
    if (!w->outstanding)
        abort ();
    zhashx_insert (self->workers, w->worker_id, w);
    return w;
}

static void s_mark (ak_registry_t *self, ak_worker_t *w, uint64_t now)
{
    ak_dirty_mark (&self->dirty, w, now);
}

static void s_unroute (ak_registry_t *self, ak_worker_t *w)
{
    if (w->route_len) {
        char key[2 * AK_ROUTE_MAX + 1];
        s_route_key (w->route, w->route_len, key);
        if (zhashx_lookup (self->routes, key) == w)
            zhashx_delete (self->routes, key);
        w->route_len = 0;
    }
}

ak_registry_t *ak_registry_new (void)
{
    ak_registry_t *self = ak_calloc (1, sizeof *self);
    self->workers = zhashx_new ();
    self->routes = zhashx_new ();
    ak_dirty_init (&self->dirty, offsetof (ak_worker_t, dirty));
    if (!self->workers || !self->routes)
        abort ();
    zhashx_set_destructor (self->workers, s_worker_free);
    return self;
}

void ak_registry_destroy (ak_registry_t **self_p)
{
    if (self_p && *self_p) {
        ak_registry_t *self = *self_p;
        ak_dirty_destroy (&self->dirty);
        zhashx_destroy (&self->routes);
        zhashx_destroy (&self->workers);
        free (self);
        *self_p = NULL;
    }
}

// ------------------------------------------------------------------ loading

static int s_load_worker (const char *key, const void *val, size_t len, void *arg)
{
    ak_registry_t *self = arg;
    Ak__WorkerRecord *rec = ak__worker_record__unpack (NULL, len, val);
    if (!rec || !rec->hello || !*rec->hello->worker_id
        || zhashx_lookup (self->workers, rec->hello->worker_id)) {
        ak_error ("store: workers/%s: undecodable worker record, skipped", key);
    }
    else {
        ak_worker_t *w = s_worker_new (self, rec->hello->worker_id);
        w->hello = rec->hello;
        rec->hello = NULL;
        free (w->hello_bytes);
        w->hello_bytes = NULL;
        w->first_seen_ms = rec->first_seen_ms;
        w->last_seen_ms = rec->last_seen_ms;
        w->tasks_done = rec->tasks_done;
        w->registrations = rec->registrations;
        if (rec->key && *rec->key)
            w->key = ak_strdup (rec->key);
        s_classes_set (w);
        if (strcmp (rec->state, "dead") != 0)
            s_mark (self, w, ak_clock_mono_ms ());     /* say it is dead until it says HELLO */
    }
    if (rec)
        ak__worker_record__free_unpacked (rec, NULL);
    return 0;
}

int ak_registry_load (ak_registry_t *self, ak_txn_t *txn, ak_err_t *err)
{
    return ak_store_walk (txn, AK_DB_WORKERS, "", s_load_worker, self, err);
}

// ------------------------------------------------------------- registration

ak_worker_t *ak_registry_hello (ak_registry_t *self, const void *route, size_t route_len,
                                Ak__Hello **hello_p, uint64_t now, bool *was_alive)
{
    Ak__Hello *hello = *hello_p;
    *hello_p = NULL;
    ak_worker_t *w = zhashx_lookup (self->workers, hello->worker_id);
    if (!w)
        w = s_worker_new (self, hello->worker_id);
    *was_alive = w->alive;

    /* a route belongs to one worker: whoever held it before loses it */
    char key[2 * AK_ROUTE_MAX + 1];
    if (route_len > AK_ROUTE_MAX)
        route_len = AK_ROUTE_MAX;
    s_route_key (route, route_len, key);
    ak_worker_t *other = zhashx_lookup (self->routes, key);
    if (other && other != w) {
        zhashx_delete (self->routes, key);
        other->route_len = 0;
    }
    s_unroute (self, w);
    memcpy (w->route, route, route_len);
    w->route_len = route_len;
    zhashx_update (self->routes, key, w);

    if (w->hello)
        ak__hello__free_unpacked (w->hello, NULL);
    w->hello = hello;
    free (w->hello_bytes);              /* packed again at the next flush */
    w->hello_bytes = NULL;
    if (!w->blobs)
        w->blobs = ak_blobcache_new (false);
    ak_blobcache_reset (w->blobs, hello->blob_epoch, hello->blob_cache_bytes);
    s_classes_set (w);
    w->alive = true;
    w->registrations++;
    w->last_seen = now;
    w->last_seen_ms = ak_clock_wall_ms ();
    if (!w->first_seen_ms)
        w->first_seen_ms = w->last_seen_ms;
    s_mark (self, w, now);
    return w;
}

ak_worker_t *ak_registry_get (ak_registry_t *self, const char *worker_id)
{
    return worker_id ? zhashx_lookup (self->workers, worker_id) : NULL;
}

ak_worker_t *ak_registry_by_route (ak_registry_t *self, const void *route, size_t route_len)
{
    if (route_len == 0 || route_len > AK_ROUTE_MAX)
        return NULL;
    char key[2 * AK_ROUTE_MAX + 1];
    s_route_key (route, route_len, key);
    ak_worker_t *w = zhashx_lookup (self->routes, key);
    return w && w->alive ? w : NULL;
}

void ak_registry_touch (ak_registry_t *self, ak_worker_t *worker, uint64_t now)
{
    worker->last_seen = now;
    worker->last_seen_ms = ak_clock_wall_ms ();
}

void ak_registry_kill (ak_registry_t *self, ak_worker_t *worker, const char *why, uint64_t now)
{
    if (!worker->alive)
        return;
    worker->alive = false;
    s_unroute (self, worker);
    s_mark (self, worker, now);
    ak_info ("worker %s dead: %s (%zu tasks outstanding)", worker->worker_id, why,
             zhashx_size (worker->outstanding));
}

uint64_t ak_worker_timeout (const ak_worker_t *worker, uint32_t heartbeat_ms, uint32_t liveness)
{
    uint32_t interval = heartbeat_ms;
    if (worker->hello && worker->hello->heartbeat_ms > interval)
        interval = worker->hello->heartbeat_ms < AK_HEARTBEAT_MAX_MS ? worker->hello->heartbeat_ms
                                                                     : AK_HEARTBEAT_MAX_MS;
    return (uint64_t) interval * (liveness ? liveness : 1);
}

size_t ak_registry_reap (ak_registry_t *self, uint64_t now, uint32_t heartbeat_ms, uint32_t liveness,
                         ak_worker_t ***dead_p)
{
    size_t n = 0, cap = 0;
    ak_worker_t **list = NULL;
    for (ak_worker_t *w = zhashx_first (self->workers); w; w = zhashx_next (self->workers)) {
        if (w->alive && now > w->last_seen + ak_worker_timeout (w, heartbeat_ms, liveness)) {
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                list = ak_realloc (list, cap * sizeof *list);
            }
            list[n++] = w;
        }
    }
    *dead_p = list;
    return n;
}

ak_worker_t *ak_registry_first (ak_registry_t *self)
{
    return zhashx_first (self->workers);
}

ak_worker_t *ak_registry_next (ak_registry_t *self)
{
    return zhashx_next (self->workers);
}

bool ak_registry_other_live (ak_registry_t *self, const char *device_class, const char *not_worker)
{
    /* Called while the caller walks the table with ak_registry_first/next
       (dispatch): zhashx_lookup would move that cursor, so the workers are
       taken as a list of values (borrowed: the list must not destroy them) */
    zlistx_t *workers = zhashx_values (self->workers);
    if (!workers)
        abort ();
    zlistx_set_destructor (workers, NULL);
    bool found = false;
    for (const ak_worker_t *w = zlistx_first (workers); w && !found; w = zlistx_next (workers)) {
        if (!w->alive || (not_worker && strcmp (w->worker_id, not_worker) == 0))
            continue;
        for (size_t c = 0; c < w->nclasses && !found; c++)
            found = strcmp (w->classes[c], device_class) == 0;
    }
    zlistx_destroy (&workers);
    return found;
}

void ak_registry_set_key (ak_registry_t *self, ak_worker_t *worker, const char *key, uint64_t now)
{
    if ((!key && !worker->key) || (key && worker->key && strcmp (key, worker->key) == 0))
        return;
    free (worker->key);
    worker->key = key ? ak_strdup (key) : NULL;
    free (worker->hello_bytes);         /* the record changes */
    worker->hello_bytes = NULL;
    s_mark (self, worker, now);
}

size_t ak_registry_key_ids (ak_registry_t *self, const char *key, const char *except_id)
{
    /* a walk over every worker: only a registration of an id new to its
       key comes here, and those are bounded (coord.c) */
    zlistx_t *workers = zhashx_values (self->workers);
    if (!workers)
        abort ();
    zlistx_set_destructor (workers, NULL);
    size_t n = 0;
    for (const ak_worker_t *w = zlistx_first (workers); w; w = zlistx_next (workers))
        n += w->key && strcmp (w->key, key) == 0 && (!except_id || strcmp (w->worker_id, except_id) != 0);
    zlistx_destroy (&workers);
    return n;
}

size_t ak_registry_size (ak_registry_t *self)
{
    return zhashx_size (self->workers);
}

size_t ak_registry_alive (ak_registry_t *self)
{
    size_t n = 0;
    for (ak_worker_t *w = zhashx_first (self->workers); w; w = zhashx_next (self->workers))
        n += w->alive;
    return n;
}

void ak_registry_forget (ak_registry_t *self, ak_worker_t *worker)
{
    s_unroute (self, worker);
    ak_dirty_forget (&self->dirty, worker);
    zhashx_delete (self->workers, worker->worker_id);    /* frees it */
}

// ------------------------------------------------------------------- credit

void ak_worker_hold (ak_worker_t *worker, const char *task_id, uint32_t attempt)
{
    zhashx_update (worker->outstanding, task_id, (void *) (uintptr_t) (attempt ? attempt : 1));
}

bool ak_worker_drop (ak_worker_t *worker, const char *task_id)
{
    if (!zhashx_lookup (worker->outstanding, task_id))
        return false;
    zhashx_delete (worker->outstanding, task_id);
    return true;
}

bool ak_worker_holds (ak_worker_t *worker, const char *task_id)
{
    return zhashx_lookup (worker->outstanding, task_id) != NULL;
}

int64_t ak_worker_credit (const ak_worker_t *worker)
{
    if (!worker->alive || !worker->hello)
        return 0;
    int64_t cap = (int64_t) worker->hello->slots + (int64_t) worker->hello->prefetch;
    return cap - (int64_t) zhashx_size (worker->outstanding);
}

void ak_registry_count_done (ak_registry_t *self, ak_worker_t *worker, uint64_t now)
{
    worker->pending_done++;
    s_mark (self, worker, now);
}

void ak_registry_rollback (ak_registry_t *self)
{
    for (ak_worker_t *w = ak_dirty_first (&self->dirty); w; w = ak_dirty_next (&self->dirty))
        w->pending_done = 0;
}

// ------------------------------------------------------------- group commit

uint64_t ak_registry_dirty_since (ak_registry_t *self)
{
    return self->dirty.since;
}

int ak_registry_flush (ak_registry_t *self, ak_txn_t *txn, ak_err_t *err)
{
    ak_dirty_begin_flush (&self->dirty);
    for (ak_worker_t *w = ak_dirty_first (&self->dirty); w; w = ak_dirty_next (&self->dirty)) {
        if (!w->hello)
            continue;
        Ak__WorkerRecord rec = AK__WORKER_RECORD__INIT;
        rec.hello = w->hello;                   /* borrowed while written */
        rec.state = (char *) (w->alive ? "alive" : "dead");
        rec.first_seen_ms = w->first_seen_ms;
        rec.last_seen_ms = w->last_seen_ms;
        rec.tasks_done = w->tasks_done + w->pending_done;
        rec.registrations = w->registrations;
        rec.key = w->key ? w->key : (char *) "";
        /* its HELLO packed once per registration, not at every commit
           that counts one of its tasks (store.h); without the tasks it
           held then, which are the scheduler's to record */
        size_t n_running = w->hello->n_running;
        w->hello->n_running = 0;
        if (!w->hello_bytes) {
            w->hello_len = ak__hello__get_packed_size (w->hello);
            w->hello_bytes = ak_malloc (w->hello_len ? w->hello_len : 1);
            if (ak__hello__pack (w->hello, w->hello_bytes) != w->hello_len)
                abort ();                       /* protobuf-c contradicts itself */
        }
        int rc = ak_store_put_worker_hello (txn, &rec, w->hello_bytes, w->hello_len, err);
        w->hello->n_running = n_running;
        if (rc)
            return rc;
    }
    return 0;
}

/* The tasks counted in the commit are done in the store now (a worker
   marked again since stays dirty with nothing pending). */
static void s_worker_flushed (void *record, bool still, void *arg)
{
    (void) still;
    (void) arg;
    ak_worker_t *w = record;
    w->tasks_done += w->pending_done;
    w->pending_done = 0;
}

void ak_registry_flushed (ak_registry_t *self)
{
    ak_dirty_flushed (&self->dirty, s_worker_flushed, NULL);
}

static void s_commit_rollback (void *self)
{
    ak_registry_rollback (self);
}

static void s_commit_abort (void *arg)
{
    ak_registry_t *self = arg;
    ak_registry_rollback (self);
    ak_dirty_rollback (&self->dirty);
}

static int s_commit_flush (void *self, ak_txn_t *txn, ak_err_t *err)
{
    return ak_registry_flush (self, txn, err);
}

static void s_commit_flushed (void *self)
{
    ak_registry_flushed (self);
}

const ak_commit_ops_t ak_registry_commit_ops = {
    .name = "registry", .clear = s_commit_rollback, .flush = s_commit_flush, .rollback = s_commit_abort,
    .flushed = s_commit_flushed,
};
