/*  discover/inject_rec.c: libakdiscover.so's records (inject_int.h).

    Each thread that pushes NVTX ranges owns a state: a 4 MiB ring of
    binary records (akd_format.h) that only it writes and only the writer
    (the flusher thread, the exit, a fatal signal) reads, and a table of
    the texts it has already written as STRING records (its interning).
    A push is: hash and look up the text (write it once when new), then
    one 32-byte PUSH record; a pop is one 24-byte POP record.  No lock, no
    allocation, no formatting: the ring's head is published with a release
    store after the record is complete, so a reader never sees half of one.
    A full ring wakes the flusher and waits for it (a bounded wait: 1000
    yields, then 100 us sleeps up to 2 s of wall time); a
    record that still does not fit is counted as dropped (the trace is then
    partial) rather than blocking the program.

    States live as long as the process: a thread that exits marks its
    state dead, the writer drains it and frees it for the next new thread.

    The writer routes each ring's pushes and pops by time: stamped before
    the window opened, they only move the thread's shadow stack; when the
    window opens, that stack is written as "pre" pushes (ts 0) ahead of
    the thread's first record in the window; stamped after it closed, they
    are dropped.  STRING, THREAD and GNODE records are always written.
    Everything else (CUPTI's kernels and API calls, devices, the window,
    errors) goes through one buffer under a mutex, off the hot path. */
#include "inject_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define S_RING      (4u << 20)          /* per-thread ring, a power of two */
#define S_OUT_CAP   (4u << 20)          /* the shared buffer */
#define S_SLOTS     4096u               /* per-thread interning: slots (a power of two) */
#define S_ARENA     (256u << 10)        /* and the bytes of their texts */
#define S_PROBE     8
#define S_STACK     256                 /* range depth kept per thread */
#define S_SPIN      1000                /* yields waiting for room in a full ring, then short sleeps */
#define S_FULL_MS   2000                /* the longest a thread waits for room before a record is dropped */
#define S_GSLOTS    (1u << 14)          /* the shared interning (kernel and API names ...) */

akd_shared_t akd_g;

enum { S_FREE, S_LIVE, S_DEAD };

typedef struct {
    uint64_t hash;
    uint32_t id, off, len;
} s_slot_t;

typedef struct s_tstate {
    struct s_tstate *next;
    atomic_int       state;
    /* the owning thread */
    int64_t          tid;
    uint64_t         pthread;
    uint8_t         *ring;
    _Atomic uint64_t head, tail;        /* head: the owner's; tail: the writer's */
    uint64_t         tail_seen;
    atomic_bool      woke;
    atomic_uint_fast64_t dropped;
    uint32_t         stack[S_STACK];    /* string ids of the open ranges */
    int              depth;
    s_slot_t        *slots;
    char            *arena;
    uint32_t         arena_used, slots_used;
    /* the writer's */
    uint32_t         shadow[S_STACK];
    int              shadow_depth;
    bool             pre_done;
    uint64_t         dropped_written;
} s_tstate_t;

static struct {
    bool             on;
    int              fd;
    int64_t          pid;
    pthread_mutex_t  flush_mu;          /* one writer at a time; before out_mu */
    pthread_mutex_t  out_mu;            /* buf, len, the shared interning */
    uint8_t         *buf;
    size_t           len;
    sem_t            wake;
    s_tstate_t *_Atomic list;
    pthread_key_t    key;
    struct { uint64_t hash; uint32_t id; char *text; } *gslots;
    uint32_t         gused;
} R = { .fd = -1, .flush_mu = PTHREAD_MUTEX_INITIALIZER, .out_mu = PTHREAD_MUTEX_INITIALIZER };

static __thread s_tstate_t *T;
static const uint8_t s_zeros[8];

static uint64_t s_hash (const char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy (&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    w = 0;
    memcpy (&w, p, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

/* =========================================================== the output */

/* Writes the shared buffer to the file; caller holds out_mu.  A failed
   write loses the bytes (the trace then lacks its END and reads partial). */
static void s_write_locked (void)
{
    size_t off = 0;
    while (off < R.len) {
        ssize_t n = write (R.fd, R.buf + off, R.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t) n;
    }
    R.len = 0;
}

static void s_out_locked (const void *rec, size_t n)
{
    if (R.len + n > S_OUT_CAP)
        s_write_locked ();
    memcpy (R.buf + R.len, rec, n);
    R.len += n;
}

void akd_rec_out (const void *rec, size_t n)
{
    if (!R.on)
        return;
    pthread_mutex_lock (&R.out_mu);
    s_out_locked (rec, n);
    pthread_mutex_unlock (&R.out_mu);
}

/* A STRING record of text (cut to AKD_STRING_MAX) with a new id into the
   shared buffer; caller holds out_mu. */
static uint32_t s_gstring_locked (const char *text, size_t len)
{
    uint32_t id = atomic_fetch_add (&akd_g.string_ids, 1) + 1;
    akd_rec_string_t r = { { AKD_REC_STRING, 0, (uint32_t) (sizeof r + AKD_PAD8 (len)) }, id, (uint32_t) len };
    s_out_locked (&r, sizeof r);
    s_out_locked (text, len);
    s_out_locked (s_zeros, AKD_PAD8 (len) - len);
    return id;
}

uint32_t akd_rec_string (const char *text)
{
    if (!R.on)
        return 0;
    text = text ? text : "";
    size_t len = strnlen (text, AKD_STRING_MAX);
    uint64_t h = s_hash (text, len);
    pthread_mutex_lock (&R.out_mu);
    if (R.gused >= S_GSLOTS / 2) {                       /* full: start over */
        for (uint32_t i = 0; i < S_GSLOTS; i++) {
            free (R.gslots[i].text);
            R.gslots[i].text = NULL;
            R.gslots[i].id = 0;
        }
        R.gused = 0;
    }
    uint32_t p = (uint32_t) h & (S_GSLOTS - 1), id = 0;
    for (;; p = (p + 1) & (S_GSLOTS - 1)) {
        if (R.gslots[p].id == 0) {
            id = s_gstring_locked (text, len);
            char *copy = malloc (len + 1);
            if (copy) {
                memcpy (copy, text, len);
                copy[len] = '\0';
                R.gslots[p].hash = h;
                R.gslots[p].id = id;
                R.gslots[p].text = copy;
                R.gused++;
            }
            break;
        }
        if (R.gslots[p].hash == h && strlen (R.gslots[p].text) == len && memcmp (R.gslots[p].text, text, len) == 0) {
            id = R.gslots[p].id;
            break;
        }
    }
    pthread_mutex_unlock (&R.out_mu);
    return id;
}

/* ========================================================= the hot path */

static void s_ring_copy_in (s_tstate_t *t, uint64_t pos, const void *src, size_t n)
{
    size_t off = (size_t) (pos & (S_RING - 1)), first = n < S_RING - off ? n : S_RING - off;
    memcpy (t->ring + off, src, first);
    memcpy (t->ring, (const uint8_t *) src + first, n - first);
}

static void s_ring_copy_out (const s_tstate_t *t, uint64_t pos, void *dst, size_t n)
{
    size_t off = (size_t) (pos & (S_RING - 1)), first = n < S_RING - off ? n : S_RING - off;
    memcpy (dst, t->ring + off, first);
    memcpy ((uint8_t *) dst + first, t->ring, n - first);
}

/*  One record (a, then b, then zeros up to size) into this thread's ring.
    False when it did not fit within the bounded wait (counted). */
static bool s_put (s_tstate_t *t, const void *a, size_t na, const void *b, size_t nb, size_t size)
{
    uint64_t head = atomic_load_explicit (&t->head, memory_order_relaxed);
    if (S_RING - (head - t->tail_seen) < size) {
        t->tail_seen = atomic_load_explicit (&t->tail, memory_order_acquire);
        /* Yields first; then, on a box too busy for the flusher to run
           between them, 100 us sleeps up to S_FULL_MS of wall time (a
           count of yields alone is over in microseconds under load). */
        struct timespec t0 = { 0, 0 };
        for (int i = 0; S_RING - (head - t->tail_seen) < size; i++) {
            if (!atomic_exchange (&t->woke, true))
                sem_post (&R.wake);
            if (i < S_SPIN)
                sched_yield ();
            else {
                struct timespec now, nap = { 0, 100000 };
                clock_gettime (CLOCK_MONOTONIC, &now);
                if (i == S_SPIN)
                    t0 = now;
                else
                if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= S_FULL_MS) {
                    atomic_fetch_add (&t->dropped, 1);
                    return false;
                }
                nanosleep (&nap, NULL);
            }
            t->tail_seen = atomic_load_explicit (&t->tail, memory_order_acquire);
        }
    }
    s_ring_copy_in (t, head, a, na);
    if (nb)
        s_ring_copy_in (t, head + na, b, nb);
    if (size > na + nb)
        s_ring_copy_in (t, head + na + nb, s_zeros, size - na - nb);
    atomic_store_explicit (&t->head, head + size, memory_order_release);
    /* Half full (by a fresh look at the tail, so that a stale one does not
       wake the writer for nothing): wake it once until it has drained. */
    if (head + size - t->tail_seen > S_RING / 2) {
        t->tail_seen = atomic_load_explicit (&t->tail, memory_order_acquire);
        if (head + size - t->tail_seen > S_RING / 2 && !atomic_load_explicit (&t->woke, memory_order_relaxed)
            && !atomic_exchange (&t->woke, true))
            sem_post (&R.wake);
    }
    return true;
}

static void s_thread_gone (void *p)
{
    T = NULL;
    atomic_store ((atomic_int *) &((s_tstate_t *) p)->state, S_DEAD);
}

/*  This thread's state: claimed from the dead ones the writer freed, else
    made (the only allocation, once per thread).  NULL when memory is short. */
static s_tstate_t *s_self (void)
{
    if (T)
        return T;
    if (!R.on)
        return NULL;
    s_tstate_t *p;
    for (p = atomic_load (&R.list); p; p = p->next) {
        int free_state = S_FREE;
        if (atomic_compare_exchange_strong (&p->state, &free_state, S_LIVE))
            break;
    }
    if (!p) {
        p = calloc (1, sizeof *p);
        if (!p)
            return NULL;
        p->ring = malloc (S_RING);
        p->slots = calloc (S_SLOTS, sizeof *p->slots);
        p->arena = malloc (S_ARENA);
        if (!p->ring || !p->slots || !p->arena) {
            free (p->ring);
            free (p->slots);
            free (p->arena);
            free (p);
            return NULL;
        }
        atomic_store (&p->state, S_LIVE);
        p->next = atomic_load (&R.list);
        while (!atomic_compare_exchange_weak (&R.list, &p->next, p))
            ;
    }
    else
        memset (p->slots, 0, S_SLOTS * sizeof *p->slots);
    p->tid = (int64_t) syscall (SYS_gettid);
    p->pthread = (uint64_t) pthread_self ();
    p->depth = 0;
    p->arena_used = p->slots_used = 0;
    p->tail_seen = atomic_load (&p->tail);
    T = p;
    pthread_setspecific (R.key, p);
    akd_rec_thread_t r = { { AKD_REC_THREAD, 0, sizeof r }, p->tid, p->pthread };
    s_put (p, &r, sizeof r, NULL, 0, sizeof r);
    return p;
}

static uint32_t s_new_string (s_tstate_t *t, const char *text, size_t len)
{
    uint32_t id = atomic_fetch_add_explicit (&akd_g.string_ids, 1, memory_order_relaxed) + 1;
    akd_rec_string_t r = { { AKD_REC_STRING, 0, (uint32_t) (sizeof r + AKD_PAD8 (len)) }, id, (uint32_t) len };
    return s_put (t, &r, sizeof r, text, len, r.h.size) ? id : 0;
}

/*  The id of text for this thread: its earlier STRING when the thread has
    written the same text since its table was last cleared, else a new
    one.  0 when the record could not be written (the PUSH still is: the
    reader names it as lost, and the trace is partial). */
static uint32_t s_intern (s_tstate_t *t, const char *text)
{
    size_t len = strnlen (text, AKD_STRING_MAX);
    uint64_t h = s_hash (text, len);
    uint32_t p = (uint32_t) h & (S_SLOTS - 1);
    for (int i = 0; i < S_PROBE; i++, p = (p + 1) & (S_SLOTS - 1)) {
        s_slot_t *s = &t->slots[p];
        if (s->id == 0)
            break;
        if (s->hash == h && s->len == len && memcmp (t->arena + s->off, text, len) == 0)
            return s->id;
    }
    uint32_t id = s_new_string (t, text, len);
    if (!id)
        return 0;
    if (t->slots_used >= S_SLOTS / 2 || t->arena_used + len > S_ARENA) {
        memset (t->slots, 0, S_SLOTS * sizeof *t->slots);   /* full: start over */
        t->slots_used = t->arena_used = 0;
    }
    p = (uint32_t) h & (S_SLOTS - 1);
    for (int i = 0; i < S_PROBE; i++, p = (p + 1) & (S_SLOTS - 1))
        if (t->slots[p].id == 0) {
            memcpy (t->arena + t->arena_used, text, len);
            t->slots[p] = (s_slot_t) { h, id, t->arena_used, (uint32_t) len };
            t->arena_used += (uint32_t) len;
            t->slots_used++;
            break;
        }
    return id;
}

void akd_rec_push (const char *text, uint64_t ts)
{
    s_tstate_t *t = s_self ();
    if (!t)
        return;
    uint32_t id = s_intern (t, text ? text : "");
    akd_rec_push_t r = { { AKD_REC_PUSH, 0, sizeof r }, t->tid, ts, id, 0 };
    s_put (t, &r, sizeof r, NULL, 0, sizeof r);
    if (t->depth < S_STACK)
        t->stack[t->depth] = id;
    t->depth++;
}

void akd_rec_pop (uint64_t ts)
{
    s_tstate_t *t = s_self ();
    if (!t)
        return;
    akd_rec_pop_t r = { { AKD_REC_POP, 0, sizeof r }, t->tid, ts };
    s_put (t, &r, sizeof r, NULL, 0, sizeof r);
    if (t->depth > 0)
        t->depth--;
}

void akd_rec_launch (uint32_t corr, uint32_t cbid, uint32_t domain, uint32_t name, uint64_t ts)
{
    s_tstate_t *t = s_self ();
    if (!t)
        return;
    akd_rec_api_t r = { { AKD_REC_API, 0, sizeof r }, corr, cbid, (uint32_t) t->tid, domain, ts, ts, name, 0 };
    s_put (t, &r, sizeof r, NULL, 0, sizeof r);
}

void akd_rec_gnode (uint32_t graph, uint64_t node, uint64_t orig, bool with_stack)
{
    s_tstate_t *t = s_self ();
    if (!t)
        return;
    uint32_t n = with_stack ? (uint32_t) (t->depth < S_STACK ? t->depth : S_STACK) : 0;
    akd_rec_gnode_t r = { { AKD_REC_GNODE, 0, (uint32_t) (sizeof r + AKD_PAD8 (4 * n)) }, t->tid, node, orig,
                          graph, n };
    s_put (t, &r, sizeof r, t->stack, 4 * n, r.h.size);
}

/* ============================================================ the writer */

static void s_pre_locked (s_tstate_t *t)
{
    t->pre_done = true;
    int kept = t->shadow_depth < S_STACK ? t->shadow_depth : S_STACK;
    for (int i = 0; i < kept; i++) {
        akd_rec_push_t r = { { AKD_REC_PUSH, AKD_PUSH_PRE, sizeof r }, t->tid, 0, t->shadow[i], 0 };
        s_out_locked (&r, sizeof r);
    }
}

static void s_route_locked (s_tstate_t *t, const uint8_t *rec, const akd_rec_head_t *h, uint64_t open, uint64_t close)
{
    if (h->type != AKD_REC_PUSH && h->type != AKD_REC_POP) {
        s_out_locked (rec, h->size);
        return;
    }
    uint64_t ts;
    memcpy (&ts, rec + 16, sizeof ts);           /* PUSH and POP: head, tid, ts */
    if (!t->pre_done && (open == 0 || ts < open)) {
        if (h->type == AKD_REC_PUSH) {
            if (t->shadow_depth < S_STACK)
                memcpy (&t->shadow[t->shadow_depth], rec + 24, sizeof (uint32_t));
            t->shadow_depth++;
        }
        else
        if (t->shadow_depth > 0)
            t->shadow_depth--;
        return;
    }
    if (close != 0 && ts > close)
        return;
    if (!t->pre_done)
        s_pre_locked (t);
    s_out_locked (rec, h->size);
}

/* Caller holds flush_mu and out_mu. */
static void s_drain_locked (void)
{
    static uint8_t rec[AKD_REC_MAX + 64] __attribute__ ((aligned (8)));
    uint64_t open = atomic_load (&akd_g.open_ts), close = atomic_load (&akd_g.close_ts);
    for (s_tstate_t *t = atomic_load (&R.list); t; t = t->next) {
        int state = atomic_load (&t->state);
        if (state == S_FREE)
            continue;
        uint64_t head = atomic_load_explicit (&t->head, memory_order_acquire);
        uint64_t tail = atomic_load_explicit (&t->tail, memory_order_relaxed);
        while (head - tail >= sizeof (akd_rec_head_t)) {
            akd_rec_head_t h;
            s_ring_copy_out (t, tail, &h, sizeof h);
            if (h.size < sizeof h || h.size > sizeof rec || h.size > head - tail) {
                tail = head;                    /* cannot happen: the owner writes whole records */
                break;
            }
            s_ring_copy_out (t, tail, rec, h.size);
            s_route_locked (t, rec, &h, open, close);
            tail += h.size;
        }
        atomic_store_explicit (&t->tail, tail, memory_order_release);
        atomic_store (&t->woke, false);
        if (open != 0 && !t->pre_done)
            s_pre_locked (t);
        uint64_t dropped = atomic_load (&t->dropped);
        if (dropped != t->dropped_written) {
            akd_rec_dropped_t d = { { AKD_REC_DROPPED, 0, sizeof d }, dropped - t->dropped_written, t->tid };
            s_out_locked (&d, sizeof d);
            t->dropped_written = dropped;
        }
        if (state == S_DEAD) {
            t->shadow_depth = 0;
            t->pre_done = false;
            atomic_store (&t->dropped, 0);
            t->dropped_written = 0;
            atomic_store (&t->state, S_FREE);
        }
    }
}

void akd_rec_flush (void)
{
    if (!R.on)
        return;
    pthread_mutex_lock (&R.flush_mu);
    pthread_mutex_lock (&R.out_mu);
    s_drain_locked ();
    s_write_locked ();
    pthread_mutex_unlock (&R.out_mu);
    pthread_mutex_unlock (&R.flush_mu);
}

void akd_rec_wait (long ms)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (sem_timedwait (&R.wake, &ts) != 0 && errno == EINTR)
        ;
}

void akd_rec_kick (void)
{
    if (R.on)
        sem_post (&R.wake);
}

static bool s_trylock_bounded (pthread_mutex_t *mu)
{
    for (int i = 0; i < 50; i++) {
        if (pthread_mutex_trylock (mu) == 0)
            return true;
        struct timespec ts = { 0, 2000000L };
        nanosleep (&ts, NULL);
    }
    return false;
}

void akd_rec_flush_signal (const void *rec, size_t n)
{
    if (!R.on || !s_trylock_bounded (&R.flush_mu))
        return;
    if (s_trylock_bounded (&R.out_mu)) {
        s_drain_locked ();
        s_out_locked (rec, n);
        s_write_locked ();
        pthread_mutex_unlock (&R.out_mu);
    }
    pthread_mutex_unlock (&R.flush_mu);
}

void akd_rec_forget (void)
{
    R.on = false;
    R.len = 0;
    if (R.fd >= 0)
        close (R.fd);
    R.fd = -1;
    T = NULL;
    pthread_mutex_init (&R.flush_mu, NULL);
    pthread_mutex_init (&R.out_mu, NULL);
}

int akd_rec_init (int fd, int64_t pid)
{
    R.buf = malloc (S_OUT_CAP);
    R.gslots = calloc (S_GSLOTS, sizeof *R.gslots);
    if (!R.buf || !R.gslots || sem_init (&R.wake, 0, 0) != 0 || pthread_key_create (&R.key, s_thread_gone) != 0) {
        free (R.buf);
        free (R.gslots);
        R.buf = NULL;
        R.gslots = NULL;
        return -1;
    }
    R.fd = fd;
    R.pid = pid;
    R.on = true;
    akd_bin_header_t hdr;
    memset (&hdr, 0, sizeof hdr);
    memcpy (hdr.magic, AKD_BIN_MAGIC, 8);
    hdr.version = AKD_BIN_VERSION;
    hdr.header_size = sizeof hdr;
    hdr.pid = pid;
    akd_rec_out (&hdr, sizeof hdr);
    return 0;
}
