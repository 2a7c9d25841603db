/*  tests/unit/test_discover_bin.c: the binary discover trace
    (discover/akd_format.h), read by discover/trace_bin.c, and attribution
    by time (discover/attribute.c over the events trace_bin.c orders).

    Traces are built here record by record with the format's own structs,
    as libakdiscover.so writes them: pushes and pops per thread stamped
    with CUPTI's clock, launches as CUPTI's API records (thread, start,
    end, correlation id), kernels with their correlation id.  Checked:
    the round trip of every record type; attribution on several threads
    with nested ranges (innermost at the launch's start, a push stamped at
    the launch's start counting as before it, launches written before the
    pushes in the file, a thread known by pthread_self, ranges open before
    the window as "pre" pushes); graph replays labelled; a file cut at
    every length and garbled at every byte never crashes the reader, and
    a garbled record is refused naming the file and its offset. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akd_format.h"
#include "attribute.h"
#include "hotspots.h"
#include "trace.h"
#include "util.h"

typedef struct {
    uint8_t *b;
    size_t   n, cap;
    uint32_t ids;
} s_w_t;

static void s_bytes (s_w_t *w, const void *p, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 256;
        w->b = realloc (w->b, w->cap);
        assert_non_null (w->b);
    }
    memcpy (w->b + w->n, p, n);
    w->n += n;
}

/* A record: its head filled in from type, flags and its struct's size. */
static void s_rec (s_w_t *w, uint16_t type, uint16_t flags, void *rec, size_t size)
{
    akd_rec_head_t h = { type, flags, (uint32_t) size };
    memcpy (rec, &h, sizeof h);
    s_bytes (w, rec, size);
}

static uint32_t s_str (s_w_t *w, const char *text)
{
    akd_rec_string_t s = { { AKD_REC_STRING, 0, 0 }, ++w->ids, (uint32_t) strlen (text) };
    s.h.size = (uint32_t) (sizeof s + AKD_PAD8 (s.len));
    static const uint8_t zeros[8];
    s_bytes (w, &s, sizeof s);
    s_bytes (w, text, s.len);
    s_bytes (w, zeros, AKD_PAD8 (s.len) - s.len);
    return s.id;
}

/* what s_header writes: the format version and META's sample (version
   2's padding) */
static uint32_t s_version = AKD_BIN_VERSION, s_sample_field = 0;

static void s_header (s_w_t *w)
{
    akd_bin_header_t h = { .version = s_version, .header_size = sizeof h, .pid = 42 };
    memcpy (h.magic, AKD_BIN_MAGIC, 8);
    s_bytes (w, &h, sizeof h);
    akd_rec_meta_t m = { .warmup = 1, .steps = 2, .skip_ms = 0, .sample = s_sample_field };
    m.step_range = s_str (w, "step");
    m.driver = s_str (w, "580.159.04");
    m.nvrtc = s_str (w, "13.0");
    s_rec (w, AKD_REC_META, 0, &m, sizeof m);
    akd_rec_cupti_t c = { .version = 130001, .path = s_str (w, "libcupti.so.13") };
    s_rec (w, AKD_REC_CUPTI, 0, &c, sizeof c);
    akd_rec_device_t d = { .id = 0, .name = s_str (w, "NVIDIA H200"), .cc_major = 9, .cc_minor = 0, .sms = 132 };
    s_rec (w, AKD_REC_DEVICE, 0, &d, sizeof d);
}

static void s_thread (s_w_t *w, int64_t tid, uint64_t pthread)
{
    akd_rec_thread_t t = { .tid = tid, .pthread = pthread };
    s_rec (w, AKD_REC_THREAD, 0, &t, sizeof t);
}

static void s_push (s_w_t *w, int64_t tid, uint64_t ts, const char *text, bool pre)
{
    akd_rec_push_t p = { .tid = tid, .ts = ts, .name = s_str (w, text) };
    s_rec (w, AKD_REC_PUSH, pre ? AKD_PUSH_PRE : 0, &p, sizeof p);
}

static void s_pop (s_w_t *w, int64_t tid, uint64_t ts)
{
    akd_rec_pop_t p = { .tid = tid, .ts = ts };
    s_rec (w, AKD_REC_POP, 0, &p, sizeof p);
}

static void s_api (s_w_t *w, uint32_t corr, uint32_t thread, uint64_t start, const char *name)
{
    akd_rec_api_t a = { .corr = corr, .cbid = 211, .thread = thread, .domain = 2, .start = start, .end = start + 4,
                        .name = s_str (w, name) };
    s_rec (w, AKD_REC_API, 0, &a, sizeof a);
}

static void s_kernel (s_w_t *w, uint32_t corr, uint64_t start, uint64_t dur, uint32_t graph, uint64_t gnode)
{
    akd_rec_kernel_t k = { .corr = corr, .name = s_str (w, "_Z6kernelPf"), .start = start, .end = start + dur,
                           .gnode = gnode, .dev = 0, .stream = 7, .grid = { 128, 2, 1 }, .block = { 256, 1, 1 },
                           .cluster = { 2, 1, 1 }, .smem_static = 1024, .smem_dynamic = 4096, .regs = 32,
                           .graph = graph };
    s_rec (w, AKD_REC_KERNEL, 0, &k, sizeof k);
}

static void s_window (s_w_t *w, bool open, uint64_t ts)
{
    akd_rec_window_t r = { .open = open, .ts = ts, .tid = 100 };
    s_rec (w, AKD_REC_WINDOW, 0, &r, sizeof r);
}

static void s_end (s_w_t *w)
{
    akd_rec_end_t e = { .steps_begun = 3, .steps_ended = 3 };
    s_rec (w, AKD_REC_END, 0, &e, sizeof e);
}

/*  The reference trace.  Thread 100 (CUPTI names it by its tid) runs the
    step; thread 200 is named by its pthread_self in CUPTI's records;
    thread 300 had "outer" open before the window and launches inside
    it without a push or pop of its own.  The API records come first in
    the file: the order is the clock's, not the file's. */
static s_w_t s_build (void)
{
    s_w_t w = { 0 };
    s_header (&w);
    s_window (&w, true, 1000);
    /* launches (the writer's CUPTI buffers may reach the file first) */
    s_api (&w, 11, 100, 1130, "cudaLaunchKernel");   /* in aten::mm */
    s_api (&w, 12, 100, 1150, "cudaLaunchKernel");   /* in module::Linear, after mm's pop */
    s_api (&w, 13, 0xCAFE1234u, 1128, "cuLaunchKernel");   /* thread 200, in softmax */
    s_api (&w, 14, 0xCAFE1234u, 1133, "cuLaunchKernel");   /* thread 200, after its pop */
    s_api (&w, 15, 100, 1190, "cudaLaunchKernel");   /* at the very stamp of its push: inside "late" */
    s_api (&w, 16, 300, 1400, "cudaLaunchKernel");   /* thread 300, in its pre range */
    s_api (&w, 17, 100, 1175, "cudaGraphLaunch");    /* a graph launched in the step */
    /* graph nodes: 80 captured in two ranges (before the window), cloned as 90 */
    uint32_t cap1 = s_str (&w, "capture"), cap2 = s_str (&w, "aten::addmm, seq = 99, sizes = [[6144], [512, 2048], "
                                                               "[2048, 6144]], dtypes = [bfloat16, bfloat16, bfloat16]");
    akd_rec_gnode_t g = { .tid = 100, .node = 80, .orig = 0, .graph = 5, .nstack = 2 };
    uint32_t ids[2] = { cap1, cap2 };
    akd_rec_head_t gh = { AKD_REC_GNODE, 0, (uint32_t) (sizeof g + 8) };
    g.h = gh;
    s_bytes (&w, &g, sizeof g);
    s_bytes (&w, ids, sizeof ids);
    akd_rec_gnode_t c = { .tid = 100, .node = 90, .orig = 80, .graph = 5, .nstack = 0 };
    s_rec (&w, AKD_REC_GNODE, 0, &c, sizeof c);
    /* thread 100 */
    s_thread (&w, 100, 0x7f00000001ull);
    s_push (&w, 100, 1100, "step", false);
    s_push (&w, 100, 1110, "module::Linear, sizes = [[1, 512, 2048], [6144, 2048]], dtypes = [bfloat16]", false);
    s_push (&w, 100, 1120, "aten::mm, seq = 4, sizes = [[512, 2048], [2048, 6144]]", false);
    s_pop (&w, 100, 1140);
    s_pop (&w, 100, 1160);
    s_push (&w, 100, 1190, "late", false);
    s_pop (&w, 100, 1195);
    s_pop (&w, 100, 1300);
    /* thread 200 */
    s_thread (&w, 200, 0x7f00CAFE1234ull);
    s_push (&w, 200, 1125, "aten::softmax, seq = 9, sizes = [[64, 32000], []]", false);
    s_pop (&w, 200, 1131);
    /* thread 300: its range from before the window */
    s_thread (&w, 300, 0x7f00000003ull);
    s_push (&w, 300, 0, "outer", true);
    /* kernels */
    s_kernel (&w, 11, 2000, 20000, 0, 0);
    s_kernel (&w, 12, 23000, 1000, 0, 0);
    s_kernel (&w, 13, 25000, 3000, 0, 0);
    s_kernel (&w, 14, 29000, 1000, 0, 0);
    s_kernel (&w, 15, 31000, 1000, 0, 0);
    s_kernel (&w, 16, 33000, 1000, 0, 0);
    s_kernel (&w, 17, 35000, 5000, 5, 90);         /* replayed from node 90 (cloned from 80) */
    s_kernel (&w, 17, 41000, 2000, 5, 91);         /* from a node the trace does not know */
    s_kernel (&w, 9, 500, 1000, 0, 0);             /* launched before the window: left out */
    s_window (&w, false, 1500);
    akd_rec_dropped_t d = { .n = 0, .tid = 0 };
    s_rec (&w, AKD_REC_DROPPED, 0, &d, sizeof d);
    s_end (&w);
    return w;
}

static akd_trace_t *s_parse (const s_w_t *w, size_t len, int want_rc, ak_err_t *err)
{
    akd_trace_t *t = NULL;
    int rc = akd_trace_parse ((const char *) w->b, len, "mem.akd", &t, err);
    if (rc != want_rc)
        fail_msg ("parse of %zu bytes: %d (%s), want %d", len, rc, err->msg, want_rc);
    return t;
}

static void test_round_trip (void **state)
{
    (void) state;
    s_w_t w = s_build ();
    ak_err_t err = { 0 };
    akd_trace_t *t = s_parse (&w, w.n, 0, &err);
    assert_int_equal (t->version, AKD_BIN_VERSION);
    assert_int_equal (t->sample, 1);
    assert_string_equal (t->step_range, "step");
    assert_int_equal (t->warmup_steps, 1);
    assert_int_equal (t->steps, 2);
    assert_string_equal (t->driver, "580.159.04");
    assert_string_equal (t->nvrtc, "13.0");
    assert_int_equal (t->cupti_version, 130001);
    assert_int_equal (t->ndevices, 1);
    assert_string_equal (t->devices[0].name, "NVIDIA H200");
    assert_int_equal (t->devices[0].cc_major, 9);
    assert_int_equal (t->devices[0].sms, 132);
    assert_int_equal (t->nkernels, 9);
    const akd_kernel_t *k = &t->kernels[0];
    assert_int_equal (k->corr, 11);
    assert_int_equal (k->end - k->start, 20000);
    assert_int_equal (k->grid[0], 128);
    assert_int_equal (k->grid[1], 2);
    assert_int_equal (k->block[0], 256);
    assert_int_equal (k->cluster[0], 2);
    assert_int_equal (k->smem_static, 1024);
    assert_int_equal (k->smem_dynamic, 4096);
    assert_int_equal (k->regs, 32);
    assert_int_equal (k->stream, 7);
    assert_string_equal (k->name, "_Z6kernelPf");
    assert_int_equal (t->ngnodes, 2);
    assert_int_equal (t->gnodes[0].nstack, 2);
    assert_string_equal (t->gnodes[0].stack[0], "capture");
    assert_int_equal (t->gnodes[1].orig, 80);
    assert_int_equal (t->nevents, 7 + 11);             /* launches + pushes and pops */
    assert_true (t->window_opened && t->window_closed);
    assert_int_equal (t->window_open_ts, 1000);
    assert_int_equal (t->window_close_ts, 1500);
    assert_true (t->ended);
    assert_int_equal (t->truncated_at, 0);
    assert_false (akd_trace_partial (t));
    /* one order: by time, thread 300's pre push first */
    for (size_t i = 1; i < t->nevents; i++)
        assert_true (t->events[i].seq > t->events[i - 1].seq);
    assert_true (t->events[0].pre);
    akd_trace_destroy (&t);
    akd_trace_destroy (&t);
    free (w.b);
}

static const akd_kattr_t *s_kernel_of (const akd_attr_t *a, uint32_t corr, uint64_t gnode)
{
    for (size_t i = 0; i < a->nkernels; i++)
        if (a->kernels[i].k->corr == corr && a->kernels[i].k->gnode == gnode)
            return &a->kernels[i];
    return NULL;
}

static char *s_chain_of (const akd_attr_t *a, const akd_kattr_t *k)
{
    char *got = ak_strdup ("");
    for (int r = k->range; r >= 0; r = a->ranges[r].parent) {
        char *n = ak_sprintf ("%s%s%s", got, *got ? " < " : "", a->ranges[r].name);
        free (got);
        got = n;
    }
    return got;
}

static void s_expect (const akd_attr_t *a, uint32_t corr, uint64_t gnode, const char *want)
{
    const akd_kattr_t *k = s_kernel_of (a, corr, gnode);
    if (!k)
        fail_msg ("kernel corr %u not kept", corr);
    char *got = s_chain_of (a, k);
    if (strcmp (got, want) != 0)
        fail_msg ("kernel corr %u: attributed to '%s', want '%s'", corr, got, want);
    free (got);
}

/*  META's sample: version 3 reads it (0 and 1: every step); version 2,
    whose writers left the field as padding, is still read, as every
    step whatever the field holds. */
static void test_sample_field (void **state)
{
    (void) state;
    static const struct { uint32_t version, field; long sample; } cases[] = {
        { AKD_BIN_VERSION, 4, 4 }, { AKD_BIN_VERSION, 0, 1 }, { AKD_BIN_VERSION, 1, 1 }, { 2, 0, 1 }, { 2, 4, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_version = cases[i].version;
        s_sample_field = cases[i].field;
        s_w_t w = s_build ();
        ak_err_t err = { 0 };
        akd_trace_t *t = s_parse (&w, w.n, 0, &err);
        assert_int_equal (t->version, (int) cases[i].version);
        assert_int_equal (t->sample, cases[i].sample);
        akd_trace_destroy (&t);
        free (w.b);
    }
    s_version = AKD_BIN_VERSION;
    s_sample_field = 0;
}

/*  A sampled trace (sample 2): thread 100's four steps and one of thread
    200, written after them (as a later ring drain would).  The steps are
    numbered by time, whatever thread or file order, as the injection
    counts them: with thread 200's step first (1020-1080), thread 200's,
    thread 100's second (1400-1500) and its fourth are traced; kernel 12,
    launched in thread 100's second step, is the only one kept (11 and 13
    in untraced steps, their records made anyway as when the records were
    still on, and 14 between steps are left out), and the step time is
    the untraced steps' (200 ns each).  With thread 200's step inside
    thread 100's second instead, the steps overlap and the attribution
    says so. */
/*  The start of a sampled trace: the header with META's sample, the
    window open at 1000, thread 100. */
static s_w_t s_sampled_head (uint32_t sample)
{
    s_sample_field = sample;
    s_w_t w = { 0 };
    s_header (&w);
    s_sample_field = 0;
    s_window (&w, true, 1000);
    s_thread (&w, 100, 0x7f00000001ull);
    return w;
}

static s_w_t s_sampled (bool overlap)
{
    s_w_t w = s_sampled_head (2);
    static const uint64_t at[4][2] = { { 1100, 1300 }, { 1400, 1500 }, { 1600, 1800 }, { 1900, 2000 } };
    for (int i = 0; i < 4; i++) {
        s_push (&w, 100, at[i][0], "step", false);
        s_pop (&w, 100, at[i][1]);
    }
    s_api (&w, 11, 100, 1150, "cudaLaunchKernel");
    s_api (&w, 12, 100, 1450, "cudaLaunchKernel");
    s_api (&w, 13, 100, 1650, "cudaLaunchKernel");
    s_api (&w, 14, 100, 1350, "cudaLaunchKernel");         /* between steps 0 and 1 */
    /* thread 200's step inside thread 100's second, or (written after
       thread 100's, as a later ring drain would) before all of them */
    s_thread (&w, 200, 0x7f00000002ull);
    s_push (&w, 200, overlap ? 1420 : 1020, "step", false);
    s_pop (&w, 200, overlap ? 1480 : 1080);
    s_kernel (&w, 11, 3000, 7000, 0, 0);
    s_kernel (&w, 12, 11000, 9000, 0, 0);
    s_kernel (&w, 13, 21000, 5000, 0, 0);
    s_kernel (&w, 14, 27000, 1000, 0, 0);
    s_window (&w, false, 2100);
    s_end (&w);
    return w;
}

static void test_sampled_attribution (void **state)
{
    (void) state;
    for (int overlap = 0; overlap < 2; overlap++) {
        s_w_t w = s_sampled (overlap);
        ak_err_t err = { 0 };
        akd_trace_t *t = s_parse (&w, w.n, 0, &err);
        assert_int_equal (t->sample, 2);
        akd_attr_t *a = NULL;
        assert_int_equal (akd_attribute (t, &a, &err), 0);
        assert_int_equal (a->sample, 2);
        assert_int_equal (a->steps_seen, 5);
        assert_int_equal (a->steps, 3);
        if (!overlap) {
            assert_int_equal (a->nkernels, 1);
            assert_int_equal (a->kernels[0].k->corr, 12);
            assert_int_equal (a->unsampled, 3);
            assert_int_equal (a->gpu_ns, 9000);
            assert_true (a->step_from_ranges && a->step_ns == 200.0);
            /* by place in the cycle of 2: traced (60, 100, 100), the step
               after each (200, 200), no rest */
            assert_int_equal (a->place_n[AKD_PLACE_TRACED], 3);
            assert_int_equal (a->place_n[AKD_PLACE_AFTER], 2);
            assert_int_equal (a->place_n[AKD_PLACE_REST], 0);
            assert_true (fabs (a->place_ns[AKD_PLACE_TRACED] - 260.0 / 3) < 1e-9);
            assert_true (a->place_ns[AKD_PLACE_AFTER] == 200.0 && a->place_ns[AKD_PLACE_REST] == 0);
        }
        assert_int_equal (a->steps_overlap, overlap);
        akd_attr_destroy (&a);
        akd_trace_destroy (&t);
        free (w.b);
    }
}

/*  Sampling 1 step in 4 over 8 steps of one thread, as a CUDA-graph
    replay under --sample pays (docs/discover.md, "Sampling"): the traced
    steps take 300 ns, the step after each 150 (the records' switch and
    flush), the rest 100, one of them left open by the window's end (no
    time).  The step time is the rest's, the places' means are kept, and
    the run's own estimate of what sampling added is ((300 - 100) + (150 -
    100)) / (4 * 100) = 62.5%; the hotspots say so in JSON and Markdown. */
static void test_sampled_places (void **state)
{
    (void) state;
    s_w_t w = s_sampled_head (4);
    static const uint64_t dur[8] = { 300, 150, 100, 100, 300, 150, 100, 100 };
    uint64_t at = 1100;
    for (int i = 0; i < 8; i++) {
        s_push (&w, 100, at, "step", false);
        if (i < 7)
            s_pop (&w, 100, at + dur[i]);
        at += dur[i] + 50;
    }
    s_api (&w, 11, 100, 1150, "cudaLaunchKernel");
    s_kernel (&w, 11, 3000, 7000, 0, 0);
    s_window (&w, false, at);
    s_end (&w);
    ak_err_t err = { 0 };
    akd_trace_t *t = s_parse (&w, w.n, 0, &err);
    akd_attr_t *a = NULL;
    assert_int_equal (akd_attribute (t, &a, &err), 0);
    assert_int_equal (a->sample, 4);
    assert_int_equal (a->steps_seen, 8);
    assert_int_equal (a->steps, 2);
    assert_int_equal (a->place_n[AKD_PLACE_TRACED], 2);
    assert_int_equal (a->place_n[AKD_PLACE_AFTER], 2);
    assert_int_equal (a->place_n[AKD_PLACE_REST], 3);
    assert_true (a->place_ns[AKD_PLACE_TRACED] == 300.0 && a->place_ns[AKD_PLACE_AFTER] == 150.0
                 && a->place_ns[AKD_PLACE_REST] == 100.0);
    assert_true (a->step_from_ranges && a->step_ns == 100.0);
    akd_hotspots_t *h = akd_hotspots_build (a);
    assert_true (fabs (akd_sample_cost_pct (h) - 62.5) < 1e-9);
    char *md = akd_hotspots_markdown (h, t, "FAKE/sm_90/drv0/nvrtc13.0");
    assert_non_null (strstr (md, "Step times by place in the sampling cycle: traced 0.3 us (2), the step after "
                                 "each 0.1 us (2), the others 0.1 us (3): sampling added about 62.5% a step"));
    free (md);
    json_t *j = akd_hotspots_json (h, t, "FAKE/sm_90/drv0/nvrtc13.0");
    json_t *ps = json_object_get (json_object_get (j, "totals"), "sample_steps");
    assert_true (json_real_value (json_object_get (ps, "added_pct")) == 62.5);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (ps, "rest"), "steps")), 3);
    assert_true (json_real_value (json_object_get (json_object_get (ps, "after_traced"), "mean_us")) == 0.15);
    json_decref (j);
    /* no estimate without a rest (K 2), a place without a time, or unsampled */
    h->sample = 2;
    assert_true (isnan (akd_sample_cost_pct (h)));
    h->sample = 4;
    h->place_n[AKD_PLACE_AFTER] = 0;
    assert_true (isnan (akd_sample_cost_pct (h)));
    h->sample = 1;
    assert_true (isnan (akd_sample_cost_pct (h)));
    akd_hotspots_destroy (&h);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
    free (w.b);
}

static void test_attribution_by_time (void **state)
{
    (void) state;
    s_w_t w = s_build ();
    ak_err_t err = { 0 };
    akd_trace_t *t = s_parse (&w, w.n, 0, &err);
    akd_attr_t *a = NULL;
    assert_int_equal (akd_attribute (t, &a, &err), 0);
    /* nested: the innermost range open at the launch's start */
    s_expect (a, 11, 0, "aten::mm, seq = 4, sizes = [[512, 2048], [2048, 6144]] < module::Linear, sizes = "
                        "[[1, 512, 2048], [6144, 2048]], dtypes = [bfloat16] < step");
    s_expect (a, 12, 0, "module::Linear, sizes = [[1, 512, 2048], [6144, 2048]], dtypes = [bfloat16] < step");
    /* another thread, known to CUPTI by its pthread_self: its own range,
       though thread 100 was inside aten::mm at the time */
    s_expect (a, 13, 0, "aten::softmax, seq = 9, sizes = [[64, 32000], []]");
    assert_int_equal (s_kernel_of (a, 13, 0)->tid, 200);
    assert_int_equal (s_kernel_of (a, 14, 0)->range, -1);
    /* a push stamped at the launch's very start came before it */
    s_expect (a, 15, 0, "late < step");
    /* a range open before the window, on a thread that launched without
       a push or pop inside it */
    s_expect (a, 16, 0, "outer");
    assert_true (a->ranges[s_kernel_of (a, 16, 0)->range].pre);
    /* graph replays: capture ranges under the launch's range, flagged;
       an unknown node is a labelled replay */
    s_expect (a, 17, 90, "aten::addmm, seq = 99, sizes = [[6144], [512, 2048], [2048, 6144]], dtypes = "
                         "[bfloat16, bfloat16, bfloat16] < capture < step");
    assert_true (a->ranges[s_kernel_of (a, 17, 90)->range].graph);
    s_expect (a, 17, 91, "[graph replay 5] < step");
    assert_true (a->ranges[s_kernel_of (a, 17, 91)->range].synthetic);
    /* before the window: left out, counted */
    assert_null (s_kernel_of (a, 9, 0));
    assert_int_equal (a->outside, 1);
    assert_int_equal (a->nkernels, 8);
    assert_int_equal (a->steps, 1);
    assert_true (a->step_from_ranges);
    assert_true (a->step_ns == 200.0);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
    free (w.b);
}

/* Every cut: read up to the last whole record, never a crash; a cut inside
   a record is named, and every cut trace is partial (no END). */
static void test_truncated_everywhere (void **state)
{
    (void) state;
    s_w_t w = s_build ();
    ak_err_t err = { 0 };
    for (size_t len = 0; len < w.n; len++) {
        akd_trace_t *t = NULL;
        memset (&err, 0, sizeof err);
        int rc = akd_trace_parse ((const char *) w.b, len, "cut.akd", &t, &err);
        if (len < sizeof (akd_bin_header_t)) {
            assert_int_not_equal (rc, 0);
            assert_non_null (strstr (err.msg, "cut.akd"));
            continue;
        }
        if (rc != 0)
            fail_msg ("cut at %zu: %s", len, err.msg);
        assert_true (akd_trace_partial (t));
        assert_false (t->ended);
        akd_attr_t *a = NULL;
        assert_int_equal (akd_attribute (t, &a, &err), 0);
        akd_attr_destroy (&a);
        akd_trace_destroy (&t);
    }
    /* a cut 5 bytes into the END record is named at END's offset */
    akd_trace_t *t = s_parse (&w, w.n - 19, 0, &err);
    assert_int_equal (t->truncated_at, w.n - sizeof (akd_rec_end_t));
    akd_trace_destroy (&t);
    free (w.b);
}

static void s_expect_refused (const s_w_t *w, const char *needle)
{
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    int rc = akd_trace_parse ((const char *) w->b, w->n, "bad.akd", &t, &err);
    if (rc != AK_EINVAL || !strstr (err.msg, needle) || !strstr (err.msg, "bad.akd"))
        fail_msg ("rc %d, '%s': want AK_EINVAL naming bad.akd and '%s'", rc, err.msg, needle);
    assert_null (t);
}

static void test_garbled_records (void **state)
{
    (void) state;
    s_w_t w = { 0 };
    s_header (&w);
    size_t off = w.n;
    uint32_t ids = w.ids;
    /* an unknown type */
    akd_rec_signal_t sig = { .signal = 11 };
    s_rec (&w, 77, 0, &sig, sizeof sig);
    char *want = ak_sprintf ("offset %zu: record type 77: unknown record type", off);
    s_expect_refused (&w, want);
    free (want);
    /* a size no record has, one not its type's, flags where none are */
    w.n = off;
    s_rec (&w, AKD_REC_SIGNAL, 0, &sig, sizeof sig);
    ((akd_rec_head_t *) (w.b + off))->size = 12;
    s_expect_refused (&w, "a record size that no record has");
    ((akd_rec_head_t *) (w.b + off))->size = 24;
    w.n = off;
    akd_rec_end_t big = { 0 };
    s_rec (&w, AKD_REC_SIGNAL, 0, &big, sizeof big);
    s_expect_refused (&w, "not its type's");
    ((akd_rec_head_t *) (w.b + off))->type = AKD_REC_END;
    ((akd_rec_head_t *) (w.b + off))->flags = 1;
    s_expect_refused (&w, "flags on a record");
    /* a string named before it is defined */
    w.n = off;
    akd_rec_push_t p = { .tid = 1, .ts = 5, .name = 999 };
    s_rec (&w, AKD_REC_PUSH, 0, &p, sizeof p);
    s_expect_refused (&w, "names string 999");
    /* a string whose length is not its size; one defined twice */
    w.n = off;
    s_str (&w, "hello");
    ((akd_rec_string_t *) (w.b + off))->len = 9;
    s_expect_refused (&w, "whose length is not its size");
    w.n = off;
    w.ids = 1;
    s_str (&w, "again");
    s_expect_refused (&w, "defined twice");
    /* a kernel that ends before it starts, a window neither open nor closed */
    w.n = off;
    w.ids = ids;
    s_kernel (&w, 1, 100, 0, 0, 0);
    akd_rec_kernel_t *k = (akd_rec_kernel_t *) (w.b + w.n - sizeof *k);
    k->end = 50;
    s_expect_refused (&w, "ends before it starts");
    w.n = off;
    s_window (&w, true, 5);
    ((akd_rec_window_t *) (w.b + off))->open = 7;
    s_expect_refused (&w, "neither open nor closed");
    /* a graph node whose stack runs past its record */
    w.n = off;
    akd_rec_gnode_t g = { .node = 1, .nstack = 3 };
    s_rec (&w, AKD_REC_GNODE, 0, &g, sizeof g);
    s_expect_refused (&w, "stack is not its size");
    /* another version, a short or foreign header */
    ((akd_bin_header_t *) w.b)->version = AKD_BIN_VERSION + 1;
    char vmsg[64];
    snprintf (vmsg, sizeof vmsg, "trace format version %d", AKD_BIN_VERSION + 1);
    s_expect_refused (&w, vmsg);
    ((akd_bin_header_t *) w.b)->version = AKD_BIN_VERSION;
    ((akd_bin_header_t *) w.b)->header_size = 64;
    s_expect_refused (&w, "header size 64");
    w.n = 20;
    s_expect_refused (&w, "ends inside its 32-byte header");
    free (w.b);
}

/* Fuzz-style: every byte of the reference trace flipped, then random
   bytes over random spans (a fixed seed): the reader answers 0 or
   AK_EINVAL naming the file and an offset, and never crashes (ASan). */
static void test_garbled_everywhere (void **state)
{
    (void) state;
    s_w_t w = s_build ();
    uint8_t *copy = malloc (w.n);
    assert_non_null (copy);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t round = 0; round < w.n + 3000; round++) {
        memcpy (copy, w.b, w.n);
        if (round < w.n)
            copy[round] ^= 0xFF;
        else
            for (int j = 0; j < 4; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t at = (size_t) (x % w.n), span = 1 + (size_t) ((x >> 32) % 16);
                for (size_t b = at; b < at + span && b < w.n; b++)
                    copy[b] = (uint8_t) (x >> (8 * (b % 8)));
            }
        akd_trace_t *t = NULL;
        ak_err_t err = { 0 };
        int rc = akd_trace_parse ((const char *) copy, w.n, "fuzz.akd", &t, &err);
        if (rc == 0) {
            akd_attr_t *a = NULL;
            assert_int_equal (akd_attribute (t, &a, &err), 0);
            akd_attr_destroy (&a);
            akd_trace_destroy (&t);
        }
        else {
            assert_int_equal (rc, AK_EINVAL);
            assert_non_null (strstr (err.msg, "fuzz.akd"));
            assert_null (t);
        }
    }
    free (copy);
    free (w.b);
}

/* A binary trace written as JSON lines (akctl discover --dump-trace) and
   read back attributes every kernel to the same chain of ranges. */
static void test_dump_as_jsonl (void **state)
{
    (void) state;
    s_w_t w = s_build ();
    ak_err_t err = { 0 };
    akd_trace_t *bin = s_parse (&w, w.n, 0, &err), *back = NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&text, &len);
    assert_non_null (f);
    assert_int_equal (akd_trace_write_jsonl (bin, f, &err), 0);
    fclose (f);
    if (akd_trace_parse (text, len, "dump.jsonl", &back, &err) != 0)
        fail_msg ("%s\n%s", err.msg, text);
    assert_int_equal (back->version, 1);
    assert_int_equal (back->bad_lines, 0);
    assert_int_equal (back->nevents, bin->nevents);
    assert_int_equal (back->nkernels, bin->nkernels);
    akd_attr_t *a1 = NULL, *a2 = NULL;
    assert_int_equal (akd_attribute (bin, &a1, &err), 0);
    assert_int_equal (akd_attribute (back, &a2, &err), 0);
    assert_int_equal (a1->nkernels, a2->nkernels);
    assert_int_equal (a1->outside, a2->outside);
    assert_true (a1->step_ns == a2->step_ns);
    for (size_t i = 0; i < a1->nkernels; i++) {
        char *c1 = s_chain_of (a1, &a1->kernels[i]), *c2 = s_chain_of (a2, &a2->kernels[i]);
        assert_string_equal (c1, c2);
        free (c1);
        free (c2);
    }
    akd_attr_destroy (&a1);
    akd_attr_destroy (&a2);
    akd_trace_destroy (&bin);
    akd_trace_destroy (&back);
    free (text);
    free (w.b);
}

/* The JSON-lines traces of version 1 are still read (the real-GPU fixture). */
static void test_jsonl_still_read (void **state)
{
    (void) state;
    char *path = ak_test_src ("tests/data/discover/h200_llama_2layers.jsonl");
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    if (akd_trace_load (path, &t, &err) != 0)
        fail_msg ("%s", err.msg);
    assert_int_equal (t->version, 1);
    assert_true (t->nkernels > 0);
    assert_true (t->nevents > 0);
    assert_int_equal (t->truncated_at, 0);
    akd_trace_destroy (&t);
    free (path);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_round_trip),
        cmocka_unit_test (test_sample_field),
        cmocka_unit_test (test_sampled_attribution),
        cmocka_unit_test (test_sampled_places),
        cmocka_unit_test (test_attribution_by_time),
        cmocka_unit_test (test_truncated_everywhere),
        cmocka_unit_test (test_garbled_records),
        cmocka_unit_test (test_garbled_everywhere),
        cmocka_unit_test (test_dump_as_jsonl),
        cmocka_unit_test (test_jsonl_still_read),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
