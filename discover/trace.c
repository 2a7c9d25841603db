/*  discover/trace.c: reading a discover trace (trace.h). */
#include "trace.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "akd_format.h"
#include "util.h"

#define S_TRACE_MAX ((size_t) 4 << 30)      /* a trace bigger than this is refused */

static void s_grow (void **arr, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return;
    *cap = *cap ? *cap * 2 : 256;
    *arr = ak_realloc (*arr, *cap * size);
}

static bool s_u64 (json_t *o, const char *key, uint64_t *out)
{
    json_t *v = json_object_get (o, key);
    if (!json_is_integer (v) || json_integer_value (v) < 0)
        return false;
    *out = (uint64_t) json_integer_value (v);
    return true;
}

static bool s_i64 (json_t *o, const char *key, int64_t *out)
{
    json_t *v = json_object_get (o, key);
    if (!json_is_integer (v))
        return false;
    *out = (int64_t) json_integer_value (v);
    return true;
}

static uint64_t s_u64_or (json_t *o, const char *key, uint64_t dflt)
{
    uint64_t v;
    return s_u64 (o, key, &v) ? v : dflt;
}

static char *s_str_or (json_t *o, const char *key, const char *dflt)
{
    json_t *v = json_object_get (o, key);
    return ak_strdup (json_is_string (v) ? json_string_value (v) : dflt);
}

static bool s_triple (json_t *o, const char *key, int64_t out[3])
{
    json_t *a = json_object_get (o, key);
    if (!json_is_array (a) || json_array_size (a) != 3)
        return false;
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_array_get (a, i);
        if (!json_is_integer (v))
            return false;
        out[i] = json_integer_value (v);
    }
    return true;
}

typedef struct {
    size_t ev, k, g, d;
} s_caps_t;

/*  One line; false when it is not a record this reader knows. */
static bool s_line (akd_trace_t *t, s_caps_t *caps, json_t *o, bool first)
{
    const char *type = json_string_value (json_object_get (o, "t"));
    if (!type)
        return false;
    if (first != (strcmp (type, "header") == 0))
        return false;
    if (strcmp (type, "header") == 0) {
        int64_t v = 0;
        if (!s_i64 (o, "version", &v))
            return false;
        t->version = (int) v;
        t->step_range = s_str_or (o, "step_range", "");
        t->warmup_steps = (long) s_u64_or (o, "warmup_steps", 0);
        t->steps = (long) s_u64_or (o, "steps", 0);
        t->skip_ms = (long) s_u64_or (o, "skip_ms", 0);
        t->sample = (long) s_u64_or (o, "sample", 1);
        if (t->sample < 1)
            t->sample = 1;
        t->driver = s_str_or (o, "driver", "");
        t->nvrtc = s_str_or (o, "nvrtc", "");
        return true;
    }
    if (strcmp (type, "push") == 0 || strcmp (type, "pop") == 0 || strcmp (type, "launch") == 0) {
        akd_event_t e;
        memset (&e, 0, sizeof e);
        e.kind = type[1] == 'u' ? AKD_EV_PUSH : type[1] == 'o' ? AKD_EV_POP : AKD_EV_LAUNCH;
        uint64_t corr = 0;
        if (!s_u64 (o, "seq", &e.seq) || !s_i64 (o, "tid", &e.tid))
            return false;
        e.ts = s_u64_or (o, "ts", 0);
        if (e.kind == AKD_EV_PUSH) {
            if (!s_u64 (o, "id", &e.id) || !json_is_string (json_object_get (o, "name")))
                return false;
            e.pre = json_is_true (json_object_get (o, "pre"));
            e.name = s_str_or (o, "name", "");
        }
        else
        if (e.kind == AKD_EV_LAUNCH) {
            if (!s_u64 (o, "corr", &corr) || corr > UINT32_MAX)
                return false;
            e.corr = (uint32_t) corr;
            e.name = s_str_or (o, "api", "");
        }
        s_grow ((void **) &t->events, t->nevents, &caps->ev, sizeof *t->events);
        t->events[t->nevents++] = e;
        return true;
    }
    if (strcmp (type, "kernel") == 0) {
        akd_kernel_t k;
        memset (&k, 0, sizeof k);
        uint64_t corr = 0, graph = 0;
        int64_t grid[3], block[3], cluster[3] = { 0, 0, 0 };
        if (!s_u64 (o, "corr", &corr) || corr > UINT32_MAX || !s_u64 (o, "start", &k.start)
            || !s_u64 (o, "end", &k.end) || k.end < k.start || !s_triple (o, "grid", grid)
            || !s_triple (o, "block", block) || !json_is_string (json_object_get (o, "name")))
            return false;
        s_triple (o, "cluster", cluster);
        k.corr = (uint32_t) corr;
        for (int i = 0; i < 3; i++) {
            k.grid[i] = (int32_t) grid[i];
            k.block[i] = (int32_t) block[i];
            k.cluster[i] = (uint32_t) cluster[i];
        }
        k.dev = (uint32_t) s_u64_or (o, "dev", 0);
        k.stream = (uint32_t) s_u64_or (o, "stream", 0);
        k.smem_static = (int32_t) s_u64_or (o, "smem_static", 0);
        k.smem_dynamic = (int32_t) s_u64_or (o, "smem_dynamic", 0);
        k.regs = (uint32_t) s_u64_or (o, "regs", 0);
        graph = s_u64_or (o, "graph", 0);
        k.graph = graph > UINT32_MAX ? 0 : (uint32_t) graph;
        k.gnode = s_u64_or (o, "gnode", 0);
        k.name = s_str_or (o, "name", "");
        s_grow ((void **) &t->kernels, t->nkernels, &caps->k, sizeof *t->kernels);
        t->kernels[t->nkernels++] = k;
        return true;
    }
    if (strcmp (type, "gnode") == 0) {
        akd_gnode_t g;
        memset (&g, 0, sizeof g);
        uint64_t graph = 0;
        if (!s_u64 (o, "graph", &graph) || graph > UINT32_MAX || !s_u64 (o, "node", &g.node))
            return false;
        g.graph = (uint32_t) graph;
        g.orig = s_u64_or (o, "orig", 0);
        json_t *st = json_object_get (o, "stack");
        size_t n = json_is_array (st) ? json_array_size (st) : 0;
        g.stack = n ? ak_calloc (n, sizeof *g.stack) : NULL;
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_array_get (st, i);
            if (json_is_string (s))
                g.stack[g.nstack++] = ak_strdup (json_string_value (s));
        }
        s_grow ((void **) &t->gnodes, t->ngnodes, &caps->g, sizeof *t->gnodes);
        t->gnodes[t->ngnodes++] = g;
        return true;
    }
    if (strcmp (type, "device") == 0) {
        akd_device_t d;
        memset (&d, 0, sizeof d);
        int64_t cc[3] = { 0, 0, 0 };
        json_t *a = json_object_get (o, "cc");
        if (json_is_array (a) && json_array_size (a) == 2) {
            cc[0] = json_integer_value (json_array_get (a, 0));
            cc[1] = json_integer_value (json_array_get (a, 1));
        }
        if (!json_is_string (json_object_get (o, "name")))
            return false;
        d.id = (uint32_t) s_u64_or (o, "id", 0);
        d.name = s_str_or (o, "name", "");
        d.cc_major = (int) (cc[0] >= 0 && cc[0] < 100 ? cc[0] : 0);
        d.cc_minor = (int) (cc[1] >= 0 && cc[1] < 100 ? cc[1] : 0);
        d.sms = (int) s_u64_or (o, "sms", 0);
        s_grow ((void **) &t->devices, t->ndevices, &caps->d, sizeof *t->devices);
        t->devices[t->ndevices++] = d;
        return true;
    }
    if (strcmp (type, "window") == 0) {
        const char *state = json_string_value (json_object_get (o, "state"));
        if (!state)
            return false;
        if (strcmp (state, "open") == 0) {
            t->window_opened = true;
            t->window_open_ts = s_u64_or (o, "ts", 0);
        }
        else
        if (strcmp (state, "closed") == 0) {
            t->window_closed = true;
            t->window_close_ts = s_u64_or (o, "ts", 0);
        }
        else
            return false;
        return true;
    }
    if (strcmp (type, "cupti") == 0) {
        t->cupti_version = (uint32_t) s_u64_or (o, "version", 0);
        return true;
    }
    if (strcmp (type, "dropped") == 0) {
        t->dropped += s_u64_or (o, "n", 0);
        return true;
    }
    if (strcmp (type, "error") == 0) {
        if (!t->error) {
            t->error_code = s_str_or (o, "code", "error");
            t->error = s_str_or (o, "what", "");
        }
        return true;
    }
    if (strcmp (type, "signal") == 0) {
        t->signal = (int) s_u64_or (o, "signal", 0);
        return true;
    }
    if (strcmp (type, "end") == 0) {
        t->ended = true;
        return true;
    }
    return false;
}

int akd_trace_parse (const char *text, size_t len, const char *label, akd_trace_t **trace_p, ak_err_t *err)
{
    *trace_p = NULL;
    if (len >= 8 && memcmp (text, AKD_BIN_MAGIC, 8) == 0)
        return akd_trace_parse_bin (text, len, label, trace_p, err);
    akd_trace_t *t = ak_calloc (1, sizeof *t);
    s_caps_t caps = { 0, 0, 0, 0 };
    size_t off = 0;
    bool first = true;
    while (off < len) {
        const char *nl = memchr (text + off, '\n', len - off);
        size_t n = nl ? (size_t) (nl - (text + off)) : len - off;
        const char *line = text + off;
        off += n + (nl ? 1 : 0);
        if (n == 0)
            continue;
        if (!nl) {
            t->bad_lines++;                 /* a write cut off mid-line */
            break;
        }
        json_error_t je;
        json_t *o = json_loadb (line, n, JSON_REJECT_DUPLICATES, &je);
        bool ok = json_is_object (o) && s_line (t, &caps, o, first);
        json_decref (o);
        if (first) {
            if (!ok) {
                akd_trace_destroy (&t);
                return ak_err_set (err, AK_EINVAL, "%s: line 1: not a discover trace "
                                   "(wants a header line {\"t\":\"header\",\"format\":\"akdiscover-trace\",...})",
                                   label);
            }
            if (t->version != AKD_TRACE_VERSION) {
                int v = t->version;
                akd_trace_destroy (&t);
                return ak_err_set (err, AK_EINVAL, "%s: trace format version %d; this akctl reads version %d",
                                   label, v, AKD_TRACE_VERSION);
            }
            first = false;
            continue;
        }
        if (!ok)
            t->bad_lines++;
    }
    if (first) {
        akd_trace_destroy (&t);
        return ak_err_set (err, AK_EINVAL, "%s: empty: not a discover trace (the program never "
                           "loaded libakdiscover.so, or wrote nothing)", label);
    }
    *trace_p = t;
    return 0;
}

int akd_trace_load (const char *path, akd_trace_t **trace_p, ak_err_t *err)
{
    char *text = NULL;
    size_t len = 0;
    *trace_p = NULL;
    int rc = ak_file_read (path, S_TRACE_MAX, &text, &len, err);
    if (rc)
        return rc;
    rc = akd_trace_parse (text, len, path, trace_p, err);
    free (text);
    return rc;
}

void akd_trace_destroy (akd_trace_t **self_p)
{
    if (self_p && *self_p) {
        akd_trace_t *t = *self_p;
        for (size_t i = 0; i < t->nevents; i++)
            free (t->events[i].name);
        for (size_t i = 0; i < t->nkernels; i++)
            free (t->kernels[i].name);
        for (size_t i = 0; i < t->ngnodes; i++) {
            for (int j = 0; j < t->gnodes[i].nstack; j++)
                free (t->gnodes[i].stack[j]);
            free (t->gnodes[i].stack);
        }
        for (size_t i = 0; i < t->ndevices; i++)
            free (t->devices[i].name);
        free (t->events);
        free (t->kernels);
        free (t->gnodes);
        free (t->devices);
        free (t->step_range);
        free (t->driver);
        free (t->nvrtc);
        free (t->error_code);
        free (t->error);
        free (t);
        *self_p = NULL;
    }
}

bool akd_trace_partial (const akd_trace_t *t)
{
    return !t->ended || t->signal != 0 || t->dropped > 0 || t->truncated_at != 0;
}
