/*  discover/hotspots.c: ranking, Amdahl ceilings and the catalog workloads
    of an attributed trace (hotspots.h).  The writers are in
    hotspots_write.c. */
#include "hotspots.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "payload.h"
#include "util.h"

#define S_MAX_DEPTH 256

/* ================================================================ tables */

/* A growable table of rows with a key -> index map. */
typedef struct {
    akd_row_t *rows;
    size_t     n, cap;
    json_t    *index;                /* key -> integer */
} s_table_t;

static akd_row_t *s_row (s_table_t *t, const char *key)
{
    json_t *i = json_object_get (t->index, key);
    if (i)
        return &t->rows[json_integer_value (i)];
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->rows = ak_realloc (t->rows, t->cap * sizeof *t->rows);
    }
    akd_row_t *r = &t->rows[t->n];
    memset (r, 0, sizeof *r);
    r->key = ak_strdup (key);
    json_object_set_new (t->index, key, json_integer ((json_int_t) t->n));
    t->n++;
    return r;
}

static void s_count (akd_row_t *r, double ns)
{
    r->gpu_ns += ns;
    r->launches++;
    if (ns < AKD_SHORT_NS)
        r->short_launches++;
}

static int s_by_time (const void *a, const void *b)
{
    const akd_row_t *x = a, *y = b;
    if (x->gpu_ns != y->gpu_ns)
        return x->gpu_ns > y->gpu_ns ? -1 : 1;
    return strcmp (x->key, y->key);
}

static int s_wl_by_time (const void *a, const void *b)
{
    const akd_workload_t *x = a, *y = b;
    if (x->gpu_ns != y->gpu_ns)
        return x->gpu_ns > y->gpu_ns ? -1 : 1;
    return strcmp (x->name, y->name);
}

static akd_row_t *s_finish (s_table_t *t, size_t *n)
{
    if (t->n > 1)
        qsort (t->rows, t->n, sizeof *t->rows, s_by_time);
    json_decref (t->index);
    *n = t->n;
    return t->rows;
}

/* ============================================================= demangle */

char *akd_demangle (const char *name)
{
    typedef char *(s_demangle_fn) (const char *, char *, size_t *, int *);
    static s_demangle_fn *fn = NULL;
    static bool tried = false;
    if (!tried) {
        tried = true;
        void *h = dlopen ("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h)
            fn = (s_demangle_fn *) dlsym (h, "__cxa_demangle");
    }
    if (fn && name && strncmp (name, "_Z", 2) == 0) {
        int status = 0;
        char *out = fn (name, NULL, NULL, &status);
        if (out && status == 0)
            return out;
        free (out);
    }
    return ak_strdup (name ? name : "");
}

/* ============================================================ workloads */

static const char *s_dtype_short (const char *dtype)
{
    return strcmp (dtype, "bfloat16") == 0 ? "bf16" : strcmp (dtype, "float16") == 0 ? "fp16" : "fp32";
}

static char *s_workload_name (const akd_map_t *m)
{
    char name[64];
    int o = snprintf (name, sizeof name, "%s", m->op);
    for (int i = 0; i < m->nkeys && o < (int) sizeof name; i++)
        o += snprintf (name + o, sizeof name - (size_t) o, "%s%lld", i ? "x" : "_", (long long) m->values[i]);
    if (o < (int) sizeof name)
        snprintf (name + o, sizeof name - (size_t) o, "_%s", s_dtype_short (m->dtype));
    return ak_strdup (name);
}

static bool s_same_workload (const akd_map_t *a, const akd_map_t *b)
{
    if (strcmp (a->op, b->op) != 0 || strcmp (a->dtype, b->dtype) != 0 || a->nkeys != b->nkeys)
        return false;
    for (int i = 0; i < a->nkeys; i++)
        if (a->values[i] != b->values[i])
            return false;
    return true;
}

typedef struct {
    int      result;                 /* akd_map_payload's answer */
    akd_map_t map;
    const char *dtype;               /* the range's own dtype */
} s_mapped_t;

/*  The workload or the unmapped row of one kernel, by its chain of ranges
    (chain[0] innermost). */
static void s_catalog (const akd_attr_t *a, const int *chain, int depth, s_mapped_t *cache,
                       akd_workload_t **wl, size_t *nwl, size_t *wlcap, s_table_t *unmapped,
                       double ns, double *catalog_ns)
{
    int at = -1;
    for (int i = depth - 1; i >= 0 && at < 0; i--)      /* outermost first */
        if (cache[chain[i]].result != 0)
            at = i;
    akd_row_t *u = NULL;
    if (at < 0) {
        const char *key = depth > 0 ? a->ranges[chain[0]].key : "[no range]";
        u = s_row (unmapped, key);
        if (!u->detail)
            u->detail = ak_strdup (depth > 0 ? "no catalog operator" : "launched outside every range");
        s_count (u, ns);
        return;
    }
    const s_mapped_t *m = &cache[chain[at]];
    const char *dtype = m->dtype;
    for (int i = at + 1; i < depth && !dtype; i++)        /* else from an enclosing range */
        dtype = cache[chain[i]].dtype;
    for (int i = at - 1; i >= 0 && !dtype; i--)           /* else from an inner one */
        dtype = cache[chain[i]].dtype;
    if (m->result < 0 || !dtype) {
        char label[1200];
        snprintf (label, sizeof label, "%s", a->ranges[chain[at]].key);
        u = s_row (unmapped, label);
        if (!u->detail)
            u->detail = m->result < 0 ? ak_sprintf ("%s: %s", m->map.op, m->map.why)
                                      : ak_sprintf ("%s: no dtype in this range or around it (run a PyTorch "
                                                    "program under ops/discover/torch_nvtx.py)", m->map.op);
        s_count (u, ns);
        return;
    }
    akd_map_t key = m->map;
    key.dtype = dtype;
    for (size_t i = 0; i < *nwl; i++)
        if (s_same_workload (&(*wl)[i].map, &key)) {
            (*wl)[i].gpu_ns += ns;
            (*wl)[i].launches++;
            *catalog_ns += ns;
            return;
        }
    if (*nwl == *wlcap) {
        *wlcap = *wlcap ? *wlcap * 2 : 16;
        *wl = ak_realloc (*wl, *wlcap * sizeof **wl);
    }
    akd_workload_t *w = &(*wl)[(*nwl)++];
    memset (w, 0, sizeof *w);
    w->map = key;
    w->name = s_workload_name (&key);
    w->example = ak_strdup (a->ranges[chain[at]].key);
    w->gpu_ns = ns;
    w->launches = 1;
    *catalog_ns += ns;
}

/* =============================================================== build */

akd_hotspots_t *akd_hotspots_build (const akd_attr_t *a)
{
    akd_hotspots_t *h = ak_calloc (1, sizeof *h);
    s_table_t ranges = { .index = json_object () }, kernels = { .index = json_object () },
              unmapped = { .index = json_object () };
    size_t wlcap = 0;
    h->steps = a->steps;
    h->step_ns = a->step_ns;
    h->step_from_ranges = a->step_from_ranges;
    h->sample = a->sample;
    h->steps_seen = a->steps_seen;
    h->unsampled = a->unsampled;
    h->untimed = a->untimed;
    h->steps_overlap = a->steps_overlap;
    memcpy (h->place_n, a->place_n, sizeof h->place_n);
    memcpy (h->place_ns, a->place_ns, sizeof h->place_ns);

    /* each range's mapping, once */
    s_mapped_t *cache = ak_calloc (a->nranges + 1, sizeof *cache);
    for (size_t i = 0; i < a->nranges; i++) {
        akd_payload_t p;
        akd_payload_parse (a->ranges[i].name, &p);
        cache[i].result = a->ranges[i].synthetic ? 0 : akd_map_payload (&p, &cache[i].map);
        cache[i].dtype = akd_map_dtype (&p);
    }

    for (size_t i = 0; i < a->nkernels; i++) {
        const akd_kernel_t *k = a->kernels[i].k;
        double ns = (double) (k->end - k->start);
        h->gpu_ns += ns;
        int chain[S_MAX_DEPTH], depth = 0;
        for (int r = a->kernels[i].range; r >= 0 && r < (int) a->nranges && depth < S_MAX_DEPTH;
             r = a->ranges[r].parent)
            chain[depth++] = r;
        if (depth > 0 && !a->ranges[chain[0]].synthetic)
            h->named_ns += ns;
        /* inclusive: each distinct key once */
        for (int d = 0; d < depth; d++) {
            const char *key = a->ranges[chain[d]].key;
            bool seen = false;
            for (int e = 0; e < d && !seen; e++)
                seen = strcmp (a->ranges[chain[e]].key, key) == 0;
            if (seen)
                continue;
            akd_row_t *r = s_row (&ranges, key);
            s_count (r, ns);
            if (d == 0)
                r->self_ns += ns;
        }
        char kkey[1100];
        snprintf (kkey, sizeof kkey, "%s%s", k->name, k->graph ? " [graph]" : "");
        akd_row_t *kr = s_row (&kernels, kkey);
        if (!kr->detail) {
            kr->detail = akd_demangle (k->name);
            kr->graph = k->graph != 0;
            kr->first = k;
        }
        s_count (kr, ns);
        s_catalog (a, chain, depth, cache, &h->workloads, &h->nworkloads, &wlcap, &unmapped, ns,
                   &h->catalog_ns);
    }
    free (cache);
    h->ranges = s_finish (&ranges, &h->nranges);
    h->kernels = s_finish (&kernels, &h->nkernels);
    h->unmapped = s_finish (&unmapped, &h->nunmapped);
    if (h->nworkloads)
        qsort (h->workloads, h->nworkloads, sizeof *h->workloads, s_wl_by_time);
    return h;
}

static void s_rows_free (akd_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free (rows[i].key);
        free (rows[i].detail);
    }
    free (rows);
}

void akd_hotspots_destroy (akd_hotspots_t **self_p)
{
    if (self_p && *self_p) {
        akd_hotspots_t *h = *self_p;
        s_rows_free (h->ranges, h->nranges);
        s_rows_free (h->kernels, h->nkernels);
        s_rows_free (h->unmapped, h->nunmapped);
        for (size_t i = 0; i < h->nworkloads; i++) {
            free (h->workloads[i].name);
            free (h->workloads[i].example);
        }
        free (h->workloads);
        free (h);
        *self_p = NULL;
    }
}

double akd_sample_cost_pct (const akd_hotspots_t *h)
{
    if (h->sample < 3)
        return NAN;
    for (int p = 0; p < 3; p++)
        if (h->place_n[p] == 0 || !(h->place_ns[p] > 0))
            return NAN;
    const double rest = h->place_ns[AKD_PLACE_REST];
    const double added = (h->place_ns[AKD_PLACE_TRACED] - rest) + (h->place_ns[AKD_PLACE_AFTER] - rest);
    return 100.0 * added / ((double) h->sample * rest);
}

double akd_amdahl (double step_ns, double range_ns, double speedup)
{
    if (!(step_ns > 0) || !(range_ns >= 0))
        return step_ns > 0 ? step_ns : 0;
    double saved = speedup > 0 && isfinite (speedup) ? range_ns - range_ns / speedup : range_ns;
    double t = step_ns - saved;
    return t > 0 ? t : 0;
}

char *akd_device_class (const akd_trace_t *t, ak_err_t *err)
{
    if (t->ndevices == 0) {
        ak_err_set (err, AK_ENOTFOUND, "the trace names no device");
        return NULL;
    }
    if (!t->driver || !*t->driver || !t->nvrtc || !*t->nvrtc) {
        ak_err_set (err, AK_ENOTFOUND, "the trace lacks the %s version (the class is NAME/sm_XY/drvNNN/nvrtcX.Y)",
                    !t->driver || !*t->driver ? "driver" : "NVRTC");
        return NULL;
    }
    /* the device the kernels ran on, else the first */
    const akd_device_t *d = &t->devices[0];
    for (size_t i = 0; t->nkernels && i < t->ndevices; i++)
        if (t->devices[i].id == t->kernels[0].dev) {
            d = &t->devices[i];
            break;
        }
    char *c = ak_sprintf ("%s/sm_%d%d/drv%.*s/nvrtc%s", d->name, d->cc_major, d->cc_minor,
                          (int) strcspn (t->driver, "."), t->driver, t->nvrtc);
    /* as the worker announces it: [A-Za-z0-9_./-], others '_' */
    for (char *p = c; *p; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
               || *p == '_' || *p == '.' || *p == '-' || *p == '/';
        if (!ok)
            *p = '_';
    }
    return c;
}
