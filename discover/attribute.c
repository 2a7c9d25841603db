/*  discover/attribute.c: kernels to ranges (attribute.h). */
#include "attribute.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "payload.h"
#include "util.h"

#define S_MAX_GRAPH_HOPS 16
#define S_NOT_STEP       3          /* a sampled run's range that is no step (past AKD_PLACE_*) */

typedef struct {
    int64_t tid;
    int    *stack;
    int     depth, cap;
} s_thread_t;

typedef struct {
    uint32_t corr;
    uint64_t seq;
    int      range;
    int64_t  tid;
} s_launch_t;

static int s_by_seq (const void *a, const void *b)
{
    const akd_event_t *x = *(const akd_event_t *const *) a, *y = *(const akd_event_t *const *) b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x < y ? -1 : x > y;              /* stable: file order */
}

static int s_by_corr (const void *a, const void *b)
{
    const s_launch_t *x = a, *y = b;
    if (x->corr != y->corr)
        return x->corr < y->corr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int s_corr_only (const void *a, const void *b)
{
    const s_launch_t *x = a, *y = b;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

static s_thread_t *s_thread (s_thread_t **th, size_t *n, int64_t tid)
{
    for (size_t i = 0; i < *n; i++)
        if ((*th)[i].tid == tid)
            return &(*th)[i];
    *th = ak_realloc (*th, (*n + 1) * sizeof **th);
    s_thread_t *t = &(*th)[(*n)++];
    memset (t, 0, sizeof *t);
    t->tid = tid;
    return t;
}

static int s_new_range (akd_attr_t *a, size_t *cap, const char *name, int parent, int64_t tid)
{
    if (a->nranges == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        a->ranges = ak_realloc (a->ranges, *cap * sizeof *a->ranges);
    }
    akd_range_t *r = &a->ranges[a->nranges];
    memset (r, 0, sizeof *r);
    r->name = ak_strdup (name);
    char key[1024];
    akd_payload_key (name, key, sizeof key);
    r->key = ak_strdup (key);
    r->parent = parent;
    r->tid = tid;
    return (int) a->nranges++;
}

static const akd_gnode_t *s_gnode (const akd_trace_t *t, uint64_t node)
{
    for (size_t i = t->ngnodes; i-- > 0;)
        if (t->gnodes[i].node == node)
            return &t->gnodes[i];
    return NULL;
}

/*  The range a replayed kernel belongs to: copies of its node's capture
    stack (or "[graph replay G]") under `under`, the range open at the
    graph launch.  Copies are made once per (node, under) pair. */
typedef struct {
    uint64_t node;
    int      under, range;
} s_gcache_t;

static int s_graph_range (const akd_trace_t *t, akd_attr_t *a, size_t *cap, const akd_kernel_t *k, int under,
                          int64_t tid, s_gcache_t **cache, size_t *ncache)
{
    for (size_t i = 0; i < *ncache; i++)
        if ((*cache)[i].node == k->gnode && (*cache)[i].under == under)
            return (*cache)[i].range;
    const akd_gnode_t *g = s_gnode (t, k->gnode);
    for (int hop = 0; g && g->orig != 0 && hop < S_MAX_GRAPH_HOPS; hop++)
        g = s_gnode (t, g->orig);
    int range;
    if (g && g->orig == 0 && g->nstack > 0) {
        range = under;
        for (int i = 0; i < g->nstack; i++) {
            range = s_new_range (a, cap, g->stack[i], range, tid);
            akd_range_t *r = &a->ranges[range];
            r->graph = true;
            r->closed = true;
            char *key = ak_sprintf ("%s [graph]", r->key);
            free (r->key);
            r->key = key;
        }
    }
    else {
        char name[64];
        snprintf (name, sizeof name, "[graph replay %u]", k->graph);
        range = s_new_range (a, cap, name, under, tid);
        a->ranges[range].synthetic = true;
        a->ranges[range].closed = true;
    }
    *cache = ak_realloc (*cache, (*ncache + 1) * sizeof **cache);
    (*cache)[(*ncache)++] = (s_gcache_t) { k->gnode, under, range };
    return range;
}

/*  Whether range r is one of the trace's steps (an outermost range of the
    step range's name, pushed inside the window). */
static bool s_is_step (const akd_trace_t *t, const akd_range_t *r)
{
    return t->step_range && *t->step_range && r->parent == -1 && !r->pre && !r->graph && !r->synthetic
           && strcmp (r->name, t->step_range) == 0;
}

static int s_by_dev_start (const void *x, const void *y)
{
    const akd_kernel_t *a = *(const akd_kernel_t *const *) x, *b = *(const akd_kernel_t *const *) y;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

/*  a->overlap: for each device, the kept kernels' summed time over the
    length of the union of their intervals (the mean number running while
    any runs), the most of these, and its device. */
static void s_overlap (akd_attr_t *a)
{
    if (a->nkernels == 0)
        return;
    const akd_kernel_t **ks = ak_calloc (a->nkernels, sizeof *ks);
    for (size_t i = 0; i < a->nkernels; i++)
        ks[i] = a->kernels[i].k;
    qsort (ks, a->nkernels, sizeof *ks, s_by_dev_start);
    for (size_t i = 0; i < a->nkernels; ) {
        const uint32_t dev = ks[i]->dev;
        double sum = 0, busy = 0;
        uint64_t lo = ks[i]->start, hi = ks[i]->end;
        for (; i < a->nkernels && ks[i]->dev == dev; i++) {
            sum += (double) (ks[i]->end - ks[i]->start);
            if (ks[i]->start > hi) {
                busy += (double) (hi - lo);
                lo = ks[i]->start;
                hi = ks[i]->end;
            }
            else
            if (ks[i]->end > hi)
                hi = ks[i]->end;
        }
        busy += (double) (hi - lo);
        const double ratio = busy > 0 ? sum / busy : 0;
        if (ratio > a->overlap) {
            a->overlap = ratio;
            a->overlap_dev = dev;
        }
    }
    free (ks);
}

int akd_attribute (const akd_trace_t *t, akd_attr_t **attr_p, ak_err_t *err)
{
    (void) err;
    akd_attr_t *a = ak_calloc (1, sizeof *a);
    size_t rcap = 0, nth = 0, nl = 0, ncache = 0;
    s_thread_t *th = NULL;
    s_gcache_t *cache = NULL;
    s_launch_t *launches = ak_calloc (t->nevents + 1, sizeof *launches);
    const akd_event_t **ev = ak_calloc (t->nevents + 1, sizeof *ev);
    for (size_t i = 0; i < t->nevents; i++)
        ev[i] = &t->events[i];
    qsort (ev, t->nevents, sizeof *ev, s_by_seq);

    /* ---- replay the host events */
    for (size_t i = 0; i < t->nevents; i++) {
        const akd_event_t *e = ev[i];
        s_thread_t *ts = s_thread (&th, &nth, e->tid);
        int top = ts->depth > 0 ? ts->stack[ts->depth - 1] : -1;
        if (e->kind == AKD_EV_PUSH) {
            int r = s_new_range (a, &rcap, e->name, top, e->tid);
            a->ranges[r].start_ts = e->ts;
            a->ranges[r].pre = e->pre;
            if (ts->depth == ts->cap) {
                ts->cap = ts->cap ? ts->cap * 2 : 16;
                ts->stack = ak_realloc (ts->stack, (size_t) ts->cap * sizeof *ts->stack);
            }
            ts->stack[ts->depth++] = r;
        }
        else
        if (e->kind == AKD_EV_POP) {
            if (top < 0) {
                a->unmatched_pops++;
                continue;
            }
            a->ranges[top].end_ts = e->ts;
            a->ranges[top].closed = true;
            ts->depth--;
        }
        else
            launches[nl++] = (s_launch_t) { e->corr, e->seq, top, e->tid };
    }
    qsort (launches, nl, sizeof *launches, s_by_corr);

    /* ---- sampling: step j of the window (by time: seq) was traced when j %
       sample == 0; only the kernels launched inside a traced step count */
    a->sample = t->sample > 1 && t->step_range && *t->step_range ? t->sample : 1;
    const size_t nr0 = a->nranges;
    /* place[i]: range i's place in the cycle (attribute.h), S_NOT_STEP
       for a range that is no step; NULL when not sampled */
    char *place = NULL;
    if (a->sample > 1) {
        place = ak_malloc (nr0 + 1);
        memset (place, S_NOT_STEP, nr0 + 1);
        for (size_t i = 0; i < nr0; i++)
            if (s_is_step (t, &a->ranges[i])) {
                const long j = a->steps_seen++ % a->sample;
                place[i] = j == 0 ? AKD_PLACE_TRACED : j == 1 ? AKD_PLACE_AFTER : AKD_PLACE_REST;
            }
    }
    /* CUPTI's correlation ids grow with every API call: a kernel whose
       launch is missing but whose id lies outside the window's launches
       was launched before it opened (still running when it did) or after
       it closed. */
    uint32_t min_corr = nl ? launches[0].corr : 0;
    uint32_t max_corr = nl && t->window_closed ? launches[nl - 1].corr : UINT32_MAX;

    /* ---- kernels */
    a->kernels = ak_calloc (t->nkernels + 1, sizeof *a->kernels);
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t i = 0; i < t->nkernels; i++) {
        const akd_kernel_t *k = &t->kernels[i];
        /* CUPTI stamps 0 where it has no time for a kernel (start and
           end: the reader keeps end >= start; seen on the H100 in a CUDA
           graph's replays, session 36): no duration, and a start of 0
           would stretch the kernels' span to the epoch */
        if (k->end == 0) {
            a->untimed++;
            continue;
        }
        s_launch_t key = { k->corr, 0, 0, 0 };
        s_launch_t *l = nl ? bsearch (&key, launches, nl, sizeof *launches, s_corr_only) : NULL;
        /* bsearch may land on any launch of that corr: take the first */
        while (l && l > launches && l[-1].corr == k->corr)
            l--;
        akd_kattr_t *ka = &a->kernels[a->nkernels];
        ka->k = k;
        ka->range = l ? l->range : -1;
        ka->tid = l ? l->tid : -1;
        ka->launched = l != NULL;
        if (place) {
            int root = ka->range;
            while (root >= 0 && a->ranges[root].parent >= 0)
                root = a->ranges[root].parent;
            if (root < 0 || (size_t) root >= nr0 || place[root] != AKD_PLACE_TRACED) {
                a->unsampled++;
                continue;
            }
        }
        if (!l) {
            bool inside = (t->window_open_ts == 0
                           || (k->start >= t->window_open_ts
                               && (!t->window_closed || t->window_close_ts == 0 || k->start <= t->window_close_ts)))
                       && k->corr >= min_corr && k->corr <= max_corr;
            if (!inside) {
                a->outside++;
                continue;
            }
            a->no_launch++;
        }
        if (k->graph != 0)
            ka->range = s_graph_range (t, a, &rcap, k, ka->range, ka->tid, &cache, &ncache);
        a->nkernels++;
        a->gpu_ns += k->end - k->start;
        if (k->start < first)
            first = k->start;
        if (k->end > last)
            last = k->end;
    }

    /* ---- steps (sampled: the traced ones count, and the step time is
       that of the untraced ones, which ran without kernel records, where
       there are any: of those not right after a traced step, where there
       are such, since the step after pays for the records' switch and
       flush, on the H100 (session 37) 15% of a CUDA-graph replay; and the
       means by place, from which the run's own cost of sampling is
       estimated, hotspots.h) */
    double sum = 0, sum_p[3] = { 0, 0, 0 };
    int timed = 0;
    for (size_t i = 0; i < nr0; i++) {
        const akd_range_t *r = &a->ranges[i];
        if (!s_is_step (t, r))
            continue;
        a->steps += !place || place[i] == AKD_PLACE_TRACED;
        if (r->closed && r->start_ts && r->end_ts > r->start_ts) {
            const double d = (double) (r->end_ts - r->start_ts);
            if (place) {
                sum_p[(int) place[i]] += d;
                a->place_n[(int) place[i]]++;
            }
            else {
                sum += d;
                timed++;
            }
        }
    }
    for (int p = 0; p < 3; p++)
        a->place_ns[p] = a->place_n[p] ? sum_p[p] / a->place_n[p] : 0;
    /* sampled: the rest's time, else the untraced steps' (with no rest,
       those right after a traced one), else the traced ones' */
    static const int order[3] = { AKD_PLACE_REST, AKD_PLACE_AFTER, AKD_PLACE_TRACED };
    for (int o = 0; place && o < 3 && timed == 0; o++) {
        sum = sum_p[order[o]];
        timed = a->place_n[order[o]];
    }
    /* steps that ran at once (several threads): the records are switched
       for the whole process, so a sampled run cannot keep one step's
       kernels from another's */
    uint64_t last_end = 0;
    for (size_t i = 0; place && i < nr0; i++) {         /* ranges are made in time order (seq) */
        const akd_range_t *r = &a->ranges[i];
        if (!s_is_step (t, r) || !r->start_ts)
            continue;
        if (last_end && r->start_ts < last_end)
            a->steps_overlap = true;
        const uint64_t end = r->closed ? r->end_ts : UINT64_MAX;
        if (end > last_end)
            last_end = end;
    }
    if (!place)
        a->steps_seen = a->steps;
    if (a->steps == 0)
        a->steps = 1;
    if (timed > 0) {
        a->step_ns = sum / timed;
        a->step_from_ranges = true;
    }
    else
        a->step_ns = last > first ? (double) (last - first) / a->steps : 0;

    s_overlap (a);

    for (size_t i = 0; i < nth; i++)
        free (th[i].stack);
    free (th);
    free (place);
    free (cache);
    free (launches);
    free (ev);
    *attr_p = a;
    return 0;
}

void akd_attr_destroy (akd_attr_t **self_p)
{
    if (self_p && *self_p) {
        akd_attr_t *a = *self_p;
        for (size_t i = 0; i < a->nranges; i++) {
            free (a->ranges[i].name);
            free (a->ranges[i].key);
        }
        free (a->ranges);
        free (a->kernels);
        free (a);
        *self_p = NULL;
    }
}
