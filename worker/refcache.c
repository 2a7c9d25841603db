/*  worker/refcache.c: the executor's cache of gate references (see
    refcache.h).  A list in recency order (most recent first): lookups
    scan it, which costs nothing beside what a hit saves (entries number
    in the hundreds at most: the bound is in megabytes, a small
    configuration's entry is kilobytes). */
#include "refcache.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct s_node {
    struct s_node *prev, *next;
    uint8_t        key[AK_REFCACHE_KEY_LEN];
    ak_refentry_t  e;
    uint64_t       bytes;
    uint32_t       pins;
    bool           doomed;             /* forgotten: dropped once unpinned */
} s_node_t;

struct ak_refcache {
    s_node_t           *head, *tail;
    ak_refcache_stats_t st;
    ak_refcache_release_fn *release;   /* device buffers: how to free them; NULL: host memory */
    void               *release_arg;
};

/*  Frees an entry's buffers the way this cache holds them. */
static void s_clear (const ak_refcache_t *self, ak_refentry_t *e)
{
    if (self && self->release) {
        for (int j = 0; j < AK_MAX_BUFS; j++)
            if (e->ref[j])
                self->release (self->release_arg, e->ref[j]);
        memset (e, 0, sizeof *e);
    }
    else
        ak_refentry_clear (e);
}

uint64_t ak_refentry_bytes (const ak_refentry_t *e)
{
    uint64_t n = 0;
    for (int j = 0; j < AK_MAX_BUFS; j++)
        n += (e->in[j] ? e->in_bytes[j] : 0) + (e->ref[j] ? e->nref[j] * sizeof (double) : 0);
    return n;
}

void ak_refentry_clear (ak_refentry_t *e)
{
    if (!e)
        return;
    for (int j = 0; j < AK_MAX_BUFS; j++) {
        free (e->in[j]);
        free (e->ref[j]);
    }
    memset (e, 0, sizeof *e);
}

ak_refcache_t *ak_refcache_new (uint64_t max_bytes)
{
    ak_refcache_t *self = ak_calloc (1, sizeof *self);
    self->st.max_bytes = max_bytes;
    return self;
}

ak_refcache_t *ak_refcache_new_device (uint64_t max_bytes, ak_refcache_release_fn *release, void *arg)
{
    if (!release)
        return NULL;
    ak_refcache_t *self = ak_refcache_new (max_bytes);
    self->release = release;
    self->release_arg = arg;
    return self;
}

static void s_unlink (ak_refcache_t *self, s_node_t *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        self->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        self->tail = n->prev;
    n->prev = n->next = NULL;
}

static void s_push_front (ak_refcache_t *self, s_node_t *n)
{
    n->prev = NULL;
    n->next = self->head;
    if (self->head)
        self->head->prev = n;
    self->head = n;
    if (!self->tail)
        self->tail = n;
}

static void s_drop (ak_refcache_t *self, s_node_t *n)
{
    s_unlink (self, n);
    self->st.bytes -= n->bytes;
    self->st.entries--;
    s_clear (self, &n->e);
    free (n);
}

void ak_refcache_destroy (ak_refcache_t **self_p)
{
    if (self_p && *self_p) {
        ak_refcache_t *self = *self_p;
        while (self->head)
            s_drop (self, self->head);
        free (self);
        *self_p = NULL;
    }
}

static uint64_t s_env_mb (const char *name, uint64_t dflt)
{
    const char *v = getenv (name);
    if (v && *v) {
        char *end = NULL;
        errno = 0;
        unsigned long long mb = strtoull (v, &end, 10);
        if (errno == 0 && end && *end == '\0' && v[0] != '-' && mb <= (1ull << 30))
            return (uint64_t) mb << 20;
    }
    return dflt << 20;
}

uint64_t ak_refcache_env_bytes (void)
{
    return s_env_mb ("AK_REF_CACHE_MB", AK_REFCACHE_DEFAULT_MB);
}

uint64_t ak_refcache_env_dev_bytes (void)
{
    return s_env_mb ("AK_DREF_CACHE_MB", AK_DREFCACHE_DEFAULT_MB);
}

static s_node_t *s_find (ak_refcache_t *self, const uint8_t *key)
{
    for (s_node_t *n = self->head; n; n = n->next)
        if (!n->doomed && memcmp (n->key, key, AK_REFCACHE_KEY_LEN) == 0)
            return n;
    return NULL;
}

const ak_refentry_t *ak_refcache_get (ak_refcache_t *self, const uint8_t key[AK_REFCACHE_KEY_LEN])
{
    if (!self || !key)
        return NULL;
    s_node_t *n = s_find (self, key);
    if (!n) {
        self->st.misses++;
        return NULL;
    }
    self->st.hits++;
    n->pins++;
    s_unlink (self, n);
    s_push_front (self, n);
    return &n->e;
}

void ak_refcache_release (ak_refcache_t *self, const ak_refentry_t *entry)
{
    if (!self || !entry)
        return;
    for (s_node_t *n = self->head; n; n = n->next)
        if (&n->e == entry) {
            if (n->pins)
                n->pins--;
            if (n->doomed && n->pins == 0)
                s_drop (self, n);
            return;
        }
}

void ak_refcache_forget (ak_refcache_t *self, const ak_refentry_t *entry)
{
    if (!self || !entry)
        return;
    for (s_node_t *n = self->head; n; n = n->next)
        if (&n->e == entry) {
            n->doomed = true;
            if (n->pins == 0)
                s_drop (self, n);
            return;
        }
}

bool ak_refcache_put (ak_refcache_t *self, const uint8_t key[AK_REFCACHE_KEY_LEN], ak_refentry_t *entry)
{
    if (!entry)
        return false;
    if (!self || !key) {
        s_clear (self, entry);
        return false;
    }
    uint64_t bytes = ak_refentry_bytes (entry);
    if (bytes > self->st.max_bytes) {
        self->st.too_big++;
        s_clear (self, entry);
        return false;
    }
    if (s_find (self, key)) {
        s_clear (self, entry);
        return false;
    }
    /* Least recently used first; pinned entries stay. */
    for (s_node_t *n = self->tail, *prev; n && self->st.bytes + bytes > self->st.max_bytes; n = prev) {
        prev = n->prev;
        if (n->pins)
            continue;
        s_drop (self, n);
        self->st.evictions++;
    }
    if (self->st.bytes + bytes > self->st.max_bytes) {
        /* Only pinned entries left and still no room. */
        self->st.too_big++;
        s_clear (self, entry);
        return false;
    }
    s_node_t *n = ak_calloc (1, sizeof *n);
    memcpy (n->key, key, AK_REFCACHE_KEY_LEN);
    n->e = *entry;
    n->bytes = bytes;
    memset (entry, 0, sizeof *entry);
    s_push_front (self, n);
    self->st.bytes += bytes;
    self->st.entries++;
    self->st.puts++;
    return true;
}

void ak_refcache_stats (const ak_refcache_t *self, ak_refcache_stats_t *out)
{
    if (!out)
        return;
    if (!self) {
        memset (out, 0, sizeof *out);
        return;
    }
    *out = self->st;
}
