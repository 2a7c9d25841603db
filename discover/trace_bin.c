/*  discover/trace_bin.c: reading a binary discover trace (akd_format.h,
    trace.h) into the same akd_trace_t as the JSON-lines reader, and
    putting its host events in order.

    The injection writes each thread's pushes and pops in the order the
    thread made them, stamped with CUPTI's clock, and the launches as
    CUPTI's API records (thread, start, end, correlation id).  Here every
    launch is placed among its thread's pushes and pops: after the last
    one stamped at or before the launch's start (a push or pop on the same
    thread cannot fall inside the launch call, so this is exact when the
    clock is), and the events get one global order (seq) by time, each
    thread's own order kept as written.  attribute.c then replays them.

    Every record is checked before use: a size that is not its type's, an
    unknown type, a string named before it is defined, a kernel that ends
    before it starts, a number out of range: the trace is refused, naming
    the file and the record's offset.  A file that ends inside a record (a
    write cut off by a crash) is read up to that record and marked
    truncated (partial), with the offset. */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akd_format.h"
#include "util.h"

typedef struct {
    uint32_t id;
    uint32_t index;                    /* into strings[] + 1; 0: empty slot */
} s_sslot_t;

typedef struct {
    akd_trace_t *t;
    const char  *label;
    ak_err_t    *err;
    char       **strings;
    uint32_t    *ids;
    size_t       nstrings, cap;
    s_sslot_t   *slots;
    size_t       nslots;
    akd_event_t *host;   size_t nhost, caphost;
    akd_event_t *launch; size_t nlaunch, caplaunch;
    uint32_t    *lthread;              /* per launch: CUPTI's threadId */
    struct { uint32_t key; int64_t tid; } *tmap;
    size_t       ntmap;
    size_t       caps_k, caps_g, caps_d;
} s_rd_t;

static void s_grow (void **arr, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return;
    *cap = *cap ? *cap * 2 : 256;
    *arr = ak_realloc (*arr, *cap * size);
}

static int s_bad (s_rd_t *r, size_t off, const char *what, unsigned type)
{
    return ak_err_set (r->err, AK_EINVAL, "%s: offset %zu: record type %u: %s (a garbled trace)", r->label, off,
                       type, what);
}

static void s_slots_put (s_rd_t *r, uint32_t id, uint32_t index)
{
    size_t p = (id * 2654435761u) & (r->nslots - 1);
    while (r->slots[p].index)
        p = (p + 1) & (r->nslots - 1);
    r->slots[p] = (s_sslot_t) { id, index };
}

static const char *s_lookup (const s_rd_t *r, uint32_t id)
{
    if (!r->nslots)
        return NULL;
    for (size_t p = (id * 2654435761u) & (r->nslots - 1); r->slots[p].index; p = (p + 1) & (r->nslots - 1))
        if (r->slots[p].id == id)
            return r->strings[r->slots[p].index - 1];
    return NULL;
}

/*  The text of string id (0: ""); NULL, with err set, when the trace has
    not defined it before this record. */
static const char *s_str (s_rd_t *r, uint32_t id, size_t off, unsigned type)
{
    if (id == 0)
        return "";
    const char *s = s_lookup (r, id);
    if (!s) {
        char what[96];
        snprintf (what, sizeof what, "names string %u, which no record before it defines", id);
        s_bad (r, off, what, type);
    }
    return s;
}

static int s_string (s_rd_t *r, const uint8_t *rec, size_t off)
{
    akd_rec_string_t s;
    memcpy (&s, rec, sizeof s);
    if (s.id == 0 || s.len > AKD_STRING_MAX || s.h.size != sizeof s + AKD_PAD8 (s.len))
        return s_bad (r, off, "a string whose id is 0 or whose length is not its size", s.h.type);
    if (memchr (rec + sizeof s, '\0', s.len))
        return s_bad (r, off, "a string with a NUL byte inside", s.h.type);
    if (s_lookup (r, s.id))
        return s_bad (r, off, "a string id defined twice", s.h.type);
    size_t cap = r->cap;
    s_grow ((void **) &r->strings, r->nstrings, &r->cap, sizeof *r->strings);
    if (cap != r->cap)
        r->ids = ak_realloc (r->ids, r->cap * sizeof *r->ids);
    char *text = ak_calloc (1, (size_t) s.len + 1);
    memcpy (text, rec + sizeof s, s.len);
    r->ids[r->nstrings] = s.id;
    r->strings[r->nstrings++] = text;
    if (r->nstrings * 2 > r->nslots) {                  /* grow the table: put every id back */
        size_t n = r->nslots ? r->nslots * 2 : 1024;
        free (r->slots);
        r->slots = ak_calloc (n, sizeof *r->slots);
        r->nslots = n;
        for (size_t i = 0; i + 1 < r->nstrings; i++)
            s_slots_put (r, r->ids[i], (uint32_t) (i + 1));
    }
    s_slots_put (r, s.id, (uint32_t) r->nstrings);
    return 0;
}

static char *s_dup (s_rd_t *r, uint32_t id, size_t off, unsigned type, int *rc)
{
    const char *s = s_str (r, id, off, type);
    if (!s) {
        *rc = AK_EINVAL;
        return NULL;
    }
    return ak_strdup (s);
}

/* The fixed size of each type; 0: variable (checked by its reader). */
static const uint32_t s_sizes[AKD_REC_TYPES] = {
    [AKD_REC_STRING] = 0, [AKD_REC_META] = sizeof (akd_rec_meta_t), [AKD_REC_CUPTI] = sizeof (akd_rec_cupti_t),
    [AKD_REC_DEVICE] = sizeof (akd_rec_device_t), [AKD_REC_THREAD] = sizeof (akd_rec_thread_t),
    [AKD_REC_PUSH] = sizeof (akd_rec_push_t), [AKD_REC_POP] = sizeof (akd_rec_pop_t),
    [AKD_REC_API] = sizeof (akd_rec_api_t), [AKD_REC_KERNEL] = sizeof (akd_rec_kernel_t),
    [AKD_REC_GNODE] = 0, [AKD_REC_WINDOW] = sizeof (akd_rec_window_t), [AKD_REC_ERROR] = sizeof (akd_rec_error_t),
    [AKD_REC_DROPPED] = sizeof (akd_rec_dropped_t), [AKD_REC_SIGNAL] = sizeof (akd_rec_signal_t),
    [AKD_REC_END] = sizeof (akd_rec_end_t),
};

static int s_record (s_rd_t *r, const uint8_t *rec, const akd_rec_head_t *h, size_t off)
{
    akd_trace_t *t = r->t;
    int rc = 0;
    switch (h->type) {
    case AKD_REC_STRING:
        return s_string (r, rec, off);
    case AKD_REC_META: {
        akd_rec_meta_t m;
        memcpy (&m, rec, sizeof m);
        if (m.warmup < 0 || m.steps < 0 || m.skip_ms < 0)
            return s_bad (r, off, "a negative window parameter", h->type);
        if (t->step_range)
            return s_bad (r, off, "a second META record", h->type);
        t->warmup_steps = (long) m.warmup;
        t->steps = (long) m.steps;
        t->skip_ms = (long) m.skip_ms;
        /* version 2: the field was padding, 0 */
        t->sample = t->version >= 3 && m.sample > 1 ? (long) m.sample : 1;
        t->step_range = s_dup (r, m.step_range, off, h->type, &rc);
        if (!rc)
            t->driver = s_dup (r, m.driver, off, h->type, &rc);
        if (!rc)
            t->nvrtc = s_dup (r, m.nvrtc, off, h->type, &rc);
        return rc;
    }
    case AKD_REC_CUPTI: {
        akd_rec_cupti_t c;
        memcpy (&c, rec, sizeof c);
        t->cupti_version = c.version;
        return s_str (r, c.path, off, h->type) ? 0 : AK_EINVAL;
    }
    case AKD_REC_DEVICE: {
        akd_rec_device_t d;
        memcpy (&d, rec, sizeof d);
        if (d.cc_major < 0 || d.cc_major > 99 || d.cc_minor < 0 || d.cc_minor > 99 || d.sms < 0)
            return s_bad (r, off, "a compute capability or SM count out of range", h->type);
        akd_device_t dev = { d.id, s_dup (r, d.name, off, h->type, &rc), d.cc_major, d.cc_minor, d.sms };
        if (rc)
            return rc;
        s_grow ((void **) &t->devices, t->ndevices, &r->caps_d, sizeof *t->devices);
        t->devices[t->ndevices++] = dev;
        return 0;
    }
    case AKD_REC_THREAD: {
        akd_rec_thread_t th;
        memcpy (&th, rec, sizeof th);
        r->tmap = ak_realloc (r->tmap, (r->ntmap + 2) * sizeof *r->tmap);
        r->tmap[r->ntmap].key = (uint32_t) th.tid;
        r->tmap[r->ntmap++].tid = th.tid;
        r->tmap[r->ntmap].key = (uint32_t) th.pthread;
        r->tmap[r->ntmap++].tid = th.tid;
        return 0;
    }
    case AKD_REC_PUSH:
    case AKD_REC_POP: {
        akd_event_t e;
        memset (&e, 0, sizeof e);
        akd_rec_push_t p;
        memset (&p, 0, sizeof p);
        memcpy (&p, rec, h->size);
        if (h->type == AKD_REC_PUSH) {
            if (h->flags & ~AKD_PUSH_PRE)
                return s_bad (r, off, "unknown push flags", h->type);
            e.kind = AKD_EV_PUSH;
            e.pre = (h->flags & AKD_PUSH_PRE) != 0;
            e.name = p.name ? s_dup (r, p.name, off, h->type, &rc)
                            : ak_strdup ("(range text lost: the thread's buffer was full)");
            if (rc)
                return rc;
        }
        else
            e.kind = AKD_EV_POP;
        e.tid = p.tid;
        e.ts = p.ts;
        e.id = r->nhost;
        s_grow ((void **) &r->host, r->nhost, &r->caphost, sizeof *r->host);
        r->host[r->nhost++] = e;
        return 0;
    }
    case AKD_REC_API: {
        akd_rec_api_t a;
        memcpy (&a, rec, sizeof a);
        if (a.end < a.start)
            return s_bad (r, off, "a launch call that ends before it starts", h->type);
        akd_event_t e;
        memset (&e, 0, sizeof e);
        e.kind = AKD_EV_LAUNCH;
        e.ts = a.start;
        e.corr = a.corr;
        e.name = s_dup (r, a.name, off, h->type, &rc);
        if (rc)
            return rc;
        size_t cap = r->caplaunch;
        s_grow ((void **) &r->launch, r->nlaunch, &r->caplaunch, sizeof *r->launch);
        if (cap != r->caplaunch)
            r->lthread = ak_realloc (r->lthread, r->caplaunch * sizeof *r->lthread);
        r->lthread[r->nlaunch] = a.thread;
        r->launch[r->nlaunch++] = e;
        return 0;
    }
    case AKD_REC_KERNEL: {
        akd_rec_kernel_t k;
        memcpy (&k, rec, sizeof k);
        if (k.end < k.start)
            return s_bad (r, off, "a kernel that ends before it starts", h->type);
        akd_kernel_t o;
        memset (&o, 0, sizeof o);
        o.corr = k.corr;
        o.start = k.start;
        o.end = k.end;
        o.dev = k.dev;
        o.stream = k.stream;
        memcpy (o.grid, k.grid, sizeof o.grid);
        memcpy (o.block, k.block, sizeof o.block);
        memcpy (o.cluster, k.cluster, sizeof o.cluster);
        o.smem_static = k.smem_static;
        o.smem_dynamic = k.smem_dynamic;
        o.regs = k.regs;
        o.graph = k.graph;
        o.gnode = k.gnode;
        o.name = s_dup (r, k.name, off, h->type, &rc);
        if (rc)
            return rc;
        s_grow ((void **) &t->kernels, t->nkernels, &r->caps_k, sizeof *t->kernels);
        t->kernels[t->nkernels++] = o;
        return 0;
    }
    case AKD_REC_GNODE: {
        akd_rec_gnode_t g;
        memcpy (&g, rec, sizeof g);
        if (g.nstack > AKD_GNODE_STACK_MAX || h->size != sizeof g + AKD_PAD8 (4 * g.nstack))
            return s_bad (r, off, "a graph node whose stack is not its size", h->type);
        akd_gnode_t o;
        memset (&o, 0, sizeof o);
        o.graph = g.graph;
        o.node = g.node;
        o.orig = g.orig;
        o.stack = g.nstack ? ak_calloc (g.nstack, sizeof *o.stack) : NULL;
        for (uint32_t i = 0; i < g.nstack && !rc; i++) {
            uint32_t id;
            memcpy (&id, rec + sizeof g + 4 * i, sizeof id);
            o.stack[o.nstack] = s_dup (r, id, off, h->type, &rc);
            o.nstack += !rc;
        }
        s_grow ((void **) &t->gnodes, t->ngnodes, &r->caps_g, sizeof *t->gnodes);
        t->gnodes[t->ngnodes++] = o;
        return rc;
    }
    case AKD_REC_WINDOW: {
        akd_rec_window_t w;
        memcpy (&w, rec, sizeof w);
        if (w.open > 1)
            return s_bad (r, off, "a window state that is neither open nor closed", h->type);
        if (w.open) {
            t->window_opened = true;
            t->window_open_ts = w.ts;
        }
        else {
            t->window_closed = true;
            t->window_close_ts = w.ts;
        }
        return 0;
    }
    case AKD_REC_ERROR: {
        akd_rec_error_t e;
        memcpy (&e, rec, sizeof e);
        const char *code = s_str (r, e.code, off, h->type), *what = code ? s_str (r, e.what, off, h->type) : NULL;
        if (!code || !what)
            return AK_EINVAL;
        if (!t->error) {
            t->error_code = ak_strdup (*code ? code : "error");
            t->error = ak_strdup (what);
        }
        return 0;
    }
    case AKD_REC_DROPPED: {
        akd_rec_dropped_t d;
        memcpy (&d, rec, sizeof d);
        t->dropped += d.n;
        return 0;
    }
    case AKD_REC_SIGNAL: {
        akd_rec_signal_t s;
        memcpy (&s, rec, sizeof s);
        t->signal = s.signal;
        return 0;
    }
    case AKD_REC_END:
        t->ended = true;
        return 0;
    }
    return s_bad (r, off, "unknown record type", h->type);
}

/* ============================================================ ordering */

typedef struct {
    uint64_t key;
    int      cls;                      /* 0 host event, 1 launch */
    size_t   idx;
} s_item_t;

static int s_by_key (const void *a, const void *b)
{
    const s_item_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->cls != y->cls)
        return x->cls - y->cls;        /* at the same time, the push or pop came first */
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

typedef struct {
    int64_t tid;
    size_t  idx;
} s_tidx_t;

static int s_by_tid (const void *a, const void *b)
{
    const s_tidx_t *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*  Host events and launches into t->events, in one order: by time, each
    thread's pushes and pops in the order written (a thread's time is the
    latest stamp it has shown, so a clock that steps back never reorders
    a thread), a launch after the events stamped at or before its start. */
static void s_order (s_rd_t *r)
{
    akd_trace_t *t = r->t;
    for (size_t i = 0; i < r->nlaunch; i++) {
        int64_t tid = (int64_t) r->lthread[i];
        for (size_t j = 0; j < r->ntmap; j++)
            if (r->tmap[j].key == r->lthread[i]) {
                tid = r->tmap[j].tid;
                break;
            }
        r->launch[i].tid = tid;
    }
    size_t n = r->nhost + r->nlaunch;
    s_tidx_t *bytid = ak_calloc (r->nhost + 1, sizeof *bytid);
    for (size_t i = 0; i < r->nhost; i++)
        bytid[i] = (s_tidx_t) { r->host[i].tid, i };
    qsort (bytid, r->nhost, sizeof *bytid, s_by_tid);
    s_item_t *items = ak_calloc (n + 1, sizeof *items);
    uint64_t run = 0;
    for (size_t i = 0; i < r->nhost; i++) {
        if (i == 0 || bytid[i].tid != bytid[i - 1].tid)
            run = 0;
        const akd_event_t *e = &r->host[bytid[i].idx];
        run = e->ts > run ? e->ts : run;
        items[bytid[i].idx] = (s_item_t) { run, 0, bytid[i].idx };
    }
    for (size_t i = 0; i < r->nlaunch; i++)
        items[r->nhost + i] = (s_item_t) { r->launch[i].ts, 1, i };
    qsort (items, n, sizeof *items, s_by_key);
    t->events = ak_calloc (n + 1, sizeof *t->events);
    for (size_t i = 0; i < n; i++) {
        akd_event_t e = items[i].cls ? r->launch[items[i].idx] : r->host[items[i].idx];
        e.seq = i;
        e.id = items[i].cls ? 0 : items[i].idx + 1;
        t->events[t->nevents++] = e;
    }
    free (r->host);
    free (r->launch);
    r->host = r->launch = NULL;
    r->nhost = r->nlaunch = 0;
    free (bytid);
    free (items);
}

static void s_rd_free (s_rd_t *r)
{
    for (size_t i = 0; i < r->nhost; i++)
        free (r->host[i].name);
    for (size_t i = 0; i < r->nlaunch; i++)
        free (r->launch[i].name);
    for (size_t i = 0; i < r->nstrings; i++)
        free (r->strings[i]);
    free (r->host);
    free (r->launch);
    free (r->lthread);
    free (r->strings);
    free (r->ids);
    free (r->slots);
    free (r->tmap);
}

int akd_trace_parse_bin (const char *data, size_t len, const char *label, akd_trace_t **trace_p, ak_err_t *err)
{
    *trace_p = NULL;
    akd_bin_header_t hdr;
    if (len < sizeof hdr)
        return ak_err_set (err, AK_EINVAL, "%s: offset 0: the file ends inside its %zu-byte header "
                           "(%zu bytes): not a complete discover trace", label, sizeof hdr, len);
    memcpy (&hdr, data, sizeof hdr);
    if (memcmp (hdr.magic, AKD_BIN_MAGIC, 8) != 0)
        return ak_err_set (err, AK_EINVAL, "%s: offset 0: not a discover trace", label);
    if (hdr.version != 2 && hdr.version != AKD_BIN_VERSION)
        return ak_err_set (err, AK_EINVAL, "%s: offset 8: trace format version %u; this akctl reads versions 1 (JSON lines) "
                           "and 2 to %d (binary)", label, hdr.version, AKD_BIN_VERSION);
    if (hdr.header_size != sizeof hdr)
        return ak_err_set (err, AK_EINVAL, "%s: offset 8: header size %u, not %zu (a garbled trace)", label,
                           hdr.header_size, sizeof hdr);
    s_rd_t r;
    memset (&r, 0, sizeof r);
    r.t = ak_calloc (1, sizeof *r.t);
    r.t->version = (int) hdr.version;
    r.t->sample = 1;
    r.label = label;
    r.err = err;
    uint8_t *rec = ak_calloc (1, AKD_REC_MAX + 8);
    int rc = 0;
    size_t off = sizeof hdr;
    while (off < len) {
        akd_rec_head_t h;
        if (len - off < sizeof h) {
            r.t->truncated_at = off;
            break;
        }
        memcpy (&h, data + off, sizeof h);
        if (h.size < sizeof h || h.size % 8 != 0 || h.size > AKD_REC_MAX) {
            rc = s_bad (&r, off, "a record size that no record has", h.type);
            break;
        }
        if (h.size > len - off) {
            r.t->truncated_at = off;
            break;
        }
        if (h.type == 0 || h.type >= AKD_REC_TYPES) {
            rc = s_bad (&r, off, "unknown record type", h.type);
            break;
        }
        if (s_sizes[h.type] && h.size != s_sizes[h.type]) {
            rc = s_bad (&r, off, "a record whose size is not its type's", h.type);
            break;
        }
        if (h.type != AKD_REC_PUSH && h.flags != 0) {
            rc = s_bad (&r, off, "flags on a record that has none", h.type);
            break;
        }
        if ((h.type == AKD_REC_STRING && h.size < sizeof (akd_rec_string_t))
            || (h.type == AKD_REC_GNODE && h.size < sizeof (akd_rec_gnode_t))) {
            rc = s_bad (&r, off, "a record shorter than its type's head", h.type);
            break;
        }
        memcpy (rec, data + off, h.size);
        if ((rc = s_record (&r, rec, &h, off)) != 0)
            break;
        off += h.size;
    }
    free (rec);
    if (rc) {
        s_rd_free (&r);
        akd_trace_destroy (&r.t);
        return rc;
    }
    s_order (&r);
    s_rd_free (&r);
    akd_trace_t *t = r.t;
    if (!t->step_range)
        t->step_range = ak_strdup ("");
    if (!t->driver)
        t->driver = ak_strdup ("");
    if (!t->nvrtc)
        t->nvrtc = ak_strdup ("");
    *trace_p = t;
    return 0;
}
