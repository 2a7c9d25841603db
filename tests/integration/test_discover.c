/*  tests/integration/test_discover.c: `akctl discover` as a user runs it
    (ops/akctl/discover.c), and libakdiscover.so's NVTX side in a real
    process (discover/inject.c, through bin/akd-nvtx-probe, which speaks
    NVTX and never touches CUDA, so this runs on hosts without a GPU).

    - the batch written from the recorded fixture is accepted by
      `akctl submit` on a private coordinator, as it is;
    - bad input: a command that does not exist (exit 2, named), usage
      errors, a program with no GPU work (exit 1, no batch), a program that
      fails or crashes (its status said, the partial trace kept), CUPTI
      taken by another tool (exit 1, said);
    - the window: --warmup-steps / --steps count outermost "step" ranges;
    - the CUPTI side with a stand-in libcupti.so.13 (launches, kernel and
      device records, the busy subscriber). */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "akd_format.h"
#include "trace.h"
#include "util.h"

#define S_START_MS 20000

static ak_test_cluster_t s_c;

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

/* `akctl discover ARGS` with stderr folded into *out_p; the exit code. */
static int s_discover (char **out_p, const char *args)
{
    char *akctl = ak_test_bin ("akctl");
    int code = ak_test_runf (out_p, "'%s' discover %s 2>&1", akctl, args);
    free (akctl);
    return code;
}

static void s_contains (const char *out, const char *needle)
{
    if (!out || !strstr (out, needle))
        fail_msg ("output lacks '%s':\n%s", needle, out ? out : "(none)");
}

static bool s_exists (const char *dir, const char *name)
{
    char *p = ak_path_join (dir, name);
    bool ok = access (p, F_OK) == 0;
    free (p);
    return ok;
}

static void test_submit_from_trace (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "discover", false);
    char *trace = ak_test_src ("tests/data/discover/two_steps.jsonl");
    char *out = NULL, *args = ak_sprintf ("--from-trace '%s' --out '%s/d'", trace, s_c.dir);
    assert_int_equal (s_discover (&out, args), 0);
    s_contains (out, "77.8% mapped to catalog operators");
    s_contains (out, "matmul_512x6144x2048_bf16");
    free (out);
    ak_test_cluster_coord (&s_c, NULL, NULL, NULL, S_START_MS);
    /* no worker of the trace's GPU class here: a plain submit is refused
       naming the class; the batch itself is valid and queues with
       --allow-unserved */
    int rc = ak_test_akctl (&s_c, &out, "submit '%s/d/batch.json' 2>&1", s_c.dir);
    assert_int_equal (rc, 2);
    s_contains (out, "no worker has ever announced the target class");
    free (out);
    char *id = ak_test_submit (&s_c, "submit --allow-unserved '%s/d/batch.json'", s_c.dir);
    json_t *st = ak_test_akctl_json (&s_c, "status %s", id);
    assert_non_null (st);
    json_decref (st);
    free (id);
    free (args);
    free (trace);
}

static void test_usage (void **state)
{
    (void) state;
    char *out = NULL;
    assert_int_equal (s_discover (&out, "--help"), 0);
    s_contains (out, "Exit codes");
    s_contains (out, "aten::scaled_dot_product_attention");
    free (out);
    assert_int_equal (s_discover (&out, "-- true"), 2);
    s_contains (out, "--out DIR is required");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --steps 3 -- true"), 2);
    s_contains (out, "give --step-range");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --steps -1 --step-range s -- true"), 2);
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --sample 2 -- true"), 2);
    s_contains (out, "--sample counts steps: give --step-range");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --sample 0 --step-range s -- true"), 2);
    s_contains (out, "K at least 1");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x --bogus -- true"), 2);
    s_contains (out, "unknown option '--bogus'");
    free (out);
    assert_int_equal (s_discover (&out, "--out /tmp/x"), 2);
    s_contains (out, "no command to run");
    free (out);
    /* the verb is listed, and points at its own help */
    char *akctl = ak_test_bin ("akctl");
    assert_int_equal (ak_test_runf (&out, "'%s' help discover", akctl), 0);
    s_contains (out, "akctl discover --help");
    free (out);
    free (akctl);
}

static void test_command_not_found (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("discover-nf");
    char *out = NULL, *args = ak_sprintf ("--out '%s' -- no-such-program-akd --flag", dir);
    assert_int_equal (s_discover (&out, args), 2);
    s_contains (out, "no-such-program-akd: command not found");
    free (out);
    free (args);
    args = ak_sprintf ("--out '%s' -- /nonexistent/prog", dir);
    assert_int_equal (s_discover (&out, args), 2);
    s_contains (out, "/nonexistent/prog: command not found");
    free (out);
    free (args);
    ak_test_rmtree (dir);
    free (dir);
}

static void test_cupti_busy (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("discover-busy");
    char *trace = ak_test_src ("tests/data/discover/cupti_busy.jsonl");
    char *out = NULL, *args = ak_sprintf ("--from-trace '%s' --out '%s'", trace, dir);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "CUPTI is taken by another tool");
    s_contains (out, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
    assert_false (s_exists (dir, "batch.json"));
    free (out);
    free (args);
    free (trace);
    /* a binary trace with a garbled record is refused, naming the offset */
    akd_bin_header_t hdr = { .version = AKD_BIN_VERSION, .header_size = sizeof hdr };
    memcpy (hdr.magic, AKD_BIN_MAGIC, 8);
    akd_rec_head_t bad_rec = { 99, 0, 16 };
    unsigned char garbled[48] = { 0 };
    memcpy (garbled, &hdr, sizeof hdr);
    memcpy (garbled + sizeof hdr, &bad_rec, sizeof bad_rec);
    char *gp = ak_path_join (dir, "garbled.akd");
    FILE *f = fopen (gp, "wb");
    assert_non_null (f);
    assert_int_equal (fwrite (garbled, 1, 48, f), 48);
    fclose (f);
    args = ak_sprintf ("--from-trace '%s' --out '%s'", gp, dir);
    assert_int_equal (s_discover (&out, args), 2);
    s_contains (out, "garbled.akd: offset 32: record type 99");
    free (out);
    free (args);
    free (gp);
    /* a file that is not a trace is bad input */
    char *bad = ak_test_write (dir, "bad.jsonl", "hello\n");
    args = ak_sprintf ("--from-trace '%s' --out '%s'", bad, dir);
    assert_int_equal (s_discover (&out, args), 2);
    s_contains (out, "not a discover trace");
    free (out);
    free (args);
    free (bad);
    ak_test_rmtree (dir);
    free (dir);
}

/* Kernel records that cannot be true (docs/discover.md): a step whose 200
   kernels each last 30 ms, all started within 2 us, as session 35's
   sampled CUDA-graph trace looked (its records summed to 109 s in a
   10 ms replay).  akctl discover says so, writes nothing from them and
   exits 1; the same kernels one after the other are reported. */
static void test_impossible_records (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("discover-impossible");
    for (int serial = 0; serial < 2; serial++) {
        size_t cap = 64 * 1024, len = 0;
        char *text = ak_calloc (1, cap);
        len += (size_t) snprintf (text + len, cap - len,
                                  "{\"t\":\"header\",\"version\":1}\n"
                                  "{\"t\":\"push\",\"seq\":1,\"tid\":1,\"id\":1,\"ts\":1000,\"name\":\"step\"}\n");
        for (int i = 0; i < 200; i++)
            len += (size_t) snprintf (text + len, cap - len, "{\"t\":\"launch\",\"seq\":%d,\"tid\":1,\"corr\":%d}\n",
                                      i + 2, i + 1);
        len += (size_t) snprintf (text + len, cap - len, "{\"t\":\"pop\",\"seq\":300,\"tid\":1,\"ts\":2000}\n");
        for (int i = 0; i < 200; i++) {
            const long start = serial ? 2000 + i * 30000000L : 2000 + i * 10L;
            len += (size_t) snprintf (text + len, cap - len,
                                      "{\"t\":\"kernel\",\"corr\":%d,\"dev\":0,\"start\":%ld,\"end\":%ld,"
                                      "\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k%d\"}\n",
                                      i + 1, start, start + 30000000L, i % 3);
        }
        len += (size_t) snprintf (text + len, cap - len, "{\"t\":\"end\"}\n");
        assert_true (len < cap);
        char *trace = ak_test_write (dir, serial ? "serial.jsonl" : "overlapping.jsonl", text);
        char *outdir = ak_path_join (dir, serial ? "serial" : "overlapping");
        char *out = NULL, *args = ak_sprintf ("--from-trace '%s' --out '%s'", trace, outdir);
        if (serial) {
            assert_int_equal (s_discover (&out, args), 0);
            assert_true (s_exists (outdir, "hotspots.md"));
        }
        else {
            assert_int_equal (s_discover (&out, args), 1);
            s_contains (out, "the kernel records' times cannot be true: on device 0 the 200 kernels kept add up "
                             "to 200 times the time in which any of them ran");
            s_contains (out, "overlapping.jsonl");
            assert_false (s_exists (outdir, "hotspots.md"));
            assert_false (s_exists (outdir, "hotspots.json"));
        }
        free (out);
        free (args);
        free (outdir);
        free (trace);
        free (text);
    }
    ak_test_rmtree (dir);
    free (dir);
}

/* The injection's NVTX side, in a real process: needs the library. */
static char *s_probe (void)
{
    char *lib = ak_test_bin ("lib/libakdiscover.so"), *probe = ak_test_bin ("akd-nvtx-probe");
    bool ok = access (lib, R_OK) == 0 && access (probe, X_OK) == 0;
    free (lib);
    if (!ok) {
        ak_test_skip_note ("libakdiscover.so is not built here (no CUDA headers with cupti.h and nvtx3/)");
        free (probe);
        return NULL;
    }
    return probe;
}

/* The binary trace the library wrote into dir, decoded. */
static akd_trace_t *s_trace (const char *dir)
{
    char *p = ak_path_join (dir, "trace.akd");
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    if (akd_trace_load (p, &t, &err) != 0)
        fail_msg ("%s", err.msg);
    free (p);
    return t;
}

/* Host events of kind k (pre pushes left out) whose name holds needle
   (exact: is needle; NULL: all of them). */
static int s_events_m (const akd_trace_t *t, akd_ev_kind_t k, const char *needle, bool exact)
{
    int n = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const char *name = t->events[i].name ? t->events[i].name : "";
        n += t->events[i].kind == k && !t->events[i].pre
             && (!needle || (exact ? strcmp (name, needle) == 0 : strstr (name, needle) != NULL));
    }
    return n;
}
#define s_events(t, k, needle) s_events_m (t, k, needle, false)
#define s_pushes_named(t, name) s_events_m (t, AKD_EV_PUSH, name, true)

static void test_window_and_no_gpu_work (void **state)
{
    (void) state;
    char *probe = s_probe ();
    if (!probe)
        skip ();
    char *dir = ak_test_tmpdir ("discover-probe");
    char *out = NULL;
    char *args = ak_sprintf ("--step-range step --warmup-steps 2 --steps 3 --out '%s' -- '%s' 8", dir, probe);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "no GPU work observed");
    assert_false (s_exists (dir, "batch.json"));
    assert_false (s_exists (dir, "hotspots.json"));
    free (out);
    /* the trace: steps 3 to 5 of 8, each with its ranges (pushA and a
       registered string through a domain), then the window closed */
    akd_trace_t *trace = s_trace (dir);
    assert_int_equal (trace->version, AKD_BIN_VERSION);
    assert_int_equal (s_pushes_named (trace, "step"), 3);
    assert_int_equal (s_events (trace, AKD_EV_PUSH, "aten::mm, seq = 2, sizes"), 1);
    assert_int_equal (s_events (trace, AKD_EV_PUSH, "aten::mm, seq = 4, sizes"), 1);
    assert_int_equal (s_events (trace, AKD_EV_PUSH, "aten::mm, seq = 1,"), 0);
    assert_int_equal (s_events (trace, AKD_EV_PUSH, "aten::mm, seq = 5,"), 0);
    assert_int_equal (s_pushes_named (trace, "registered range"), 3);
    assert_true (trace->window_opened && trace->window_closed);
    assert_true (trace->ended);
    assert_false (akd_trace_partial (trace));
    assert_int_equal (s_events (trace, AKD_EV_PUSH, NULL), s_events (trace, AKD_EV_POP, NULL));
    akd_trace_destroy (&trace);
    free (args);
    /* a program that never starts CUDA or NVTX leaves no trace at all */
    args = ak_sprintf ("--out '%s/none' -- true", dir);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "no GPU work observed");
    free (out);
    free (args);
    ak_test_rmtree (dir);
    free (dir);
    free (probe);
}

static void test_failing_and_crashing_programs (void **state)
{
    (void) state;
    char *probe = s_probe ();
    if (!probe)
        skip ();
    char *dir = ak_test_tmpdir ("discover-fail");
    char *out = NULL, *args = ak_sprintf ("--step-range step --out '%s' -- '%s' 2 fail", dir, probe);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "exited with status 3");
    free (out);
    free (args);
    args = ak_sprintf ("--step-range step --out '%s' -- '%s' 2 crash", dir, probe);
    assert_int_equal (s_discover (&out, args), 1);
    s_contains (out, "killed by signal 6");
    free (out);
    /* what was buffered reached the file, with the signal and no end */
    akd_trace_t *trace = s_trace (dir);
    assert_int_equal (trace->signal, 6);
    assert_false (trace->ended);
    assert_true (akd_trace_partial (trace));
    assert_int_equal (s_pushes_named (trace, "step"), 2);
    akd_trace_destroy (&trace);
    free (args);
    ak_test_rmtree (dir);
    free (dir);
    free (probe);
}

/* Two threads pushing and popping 20,000 steps each (5 MB of records per
   thread, more than its 4 MiB ring holds: the ring wraps, fills and waits
   for the writer): every range of both threads is in the trace, in pairs,
   nothing dropped. */
static void test_threads_and_full_rings (void **state)
{
    (void) state;
    char *probe = s_probe ();
    if (!probe)
        skip ();
    char *dir = ak_test_tmpdir ("discover-threads");
    char *out = NULL, *args = ak_sprintf ("--out '%s' -- '%s' 20000 threads", dir, probe);
    assert_int_equal (s_discover (&out, args), 1);          /* no GPU work: the trace is kept */
    s_contains (out, "no GPU work observed");
    free (out);
    akd_trace_t *trace = s_trace (dir);
    assert_int_equal (trace->dropped, 0);
    assert_true (trace->ended);
    assert_int_equal (s_pushes_named (trace, "step"), 40000);
    assert_int_equal (s_pushes_named (trace, "registered range"), 40000);
    assert_int_equal (s_events (trace, AKD_EV_PUSH, "aten::mm, seq = 19999,"), 2);
    assert_int_equal (s_events (trace, AKD_EV_PUSH, NULL), s_events (trace, AKD_EV_POP, NULL));
    int64_t tids[2] = { -1, -1 };
    for (size_t i = 0; i < trace->nevents; i++) {
        int64_t tid = trace->events[i].tid;
        if (tids[0] == -1 || tids[0] == tid)
            tids[0] = tid;
        else
        if (tids[1] == -1 || tids[1] == tid)
            tids[1] = tid;
        else
            fail_msg ("a third thread %lld", (long long) tid);
    }
    assert_true (tids[1] != -1);
    akd_trace_destroy (&trace);
    free (args);
    ak_test_rmtree (dir);
    free (dir);
    free (probe);
}

/* The CUPTI side, through the stand-in libcupti.so.13 (discover/testing/
   fake_cupti.c): launches in the window become kernels attributed to the
   probe's ranges, a workload and a batch; a CUPTI held by another tool is
   a clear exit 1. */
static void test_cupti_side (void **state)
{
    (void) state;
    char *probe = s_probe ();
    if (!probe)
        skip ();
    char *fake = ak_test_bin ("../tests/fakecupti");
    char *dir = ak_test_tmpdir ("discover-cupti");
    char *out = NULL;
    char *args = ak_sprintf ("--class FAKE/sm_90/drv0/nvrtc13.0 --step-range step --warmup-steps 1 --steps 2 "
                             "--out '%s' -- '%s' 4 cupti", dir, probe);
    char *akctl = ak_test_bin ("akctl");
    int code = ak_test_runf (&out, "LD_LIBRARY_PATH='%s' '%s' discover %s 2>&1", fake, akctl, args);
    if (code != 0)
        fail_msg ("exit %d:\n%s", code, out ? out : "");
    s_contains (out, "matmul_8x32x16_fp32");
    free (out);
    akd_trace_t *trace = s_trace (dir);
    assert_int_equal (trace->cupti_version, 130001);
    assert_true (trace->ndevices >= 1);
    assert_string_equal (trace->devices[0].name, "Fake GPU");
    /* launches come from CUPTI's API records, placed among the probe's
       pushes and pops by time: 3 in the first step of the window and the
       loose one after it, 2 in the second (its loose one is after the
       window closed) */
    assert_int_equal (s_events (trace, AKD_EV_LAUNCH, "cudaLaunchKernel"), 5);
    akd_trace_destroy (&trace);
    /* the same trace as JSON lines, for a person or a script */
    char *dump = NULL;
    assert_int_equal (ak_test_runf (&dump, "'%s' discover --dump-trace '%s/trace.akd'", akctl, dir), 0);
    s_contains (dump, "{\"t\":\"header\",\"format\":\"akdiscover-trace\",\"version\":1");
    s_contains (dump, "\"name\":\"Fake GPU\"");
    s_contains (dump, "\"t\":\"launch\"");
    s_contains (dump, "\"name\":\"gemm_kernel\"");
    free (dump);
    json_error_t je;
    char *hp = ak_path_join (dir, "hotspots.json");
    json_t *hot = json_load_file (hp, 0, &je);
    assert_non_null (hot);
    json_t *totals = json_object_get (hot, "totals");
    assert_int_equal (json_integer_value (json_object_get (totals, "steps")), 2);
    /* two steps of 20 + 3 us in ranges, one 1 us kernel between them: the
       loose kernel after the last step was launched after the window */
    assert_true (json_real_value (json_object_get (totals, "gpu_us_per_step")) == 23.5);
    json_t *w = json_array_get (json_object_get (hot, "workloads"), 0);
    assert_string_equal (json_string_value (json_object_get (w, "name")), "matmul_8x32x16_fp32");
    assert_int_equal (json_integer_value (json_object_get (w, "launches")), 2);
    json_decref (hot);
    free (hp);
    assert_true (s_exists (dir, "batch.json"));
    assert_true (s_exists (dir, "matmul.corpus.json"));

    /* The gate: the warm-up step's 3 launches made no kernel record, the
       window's 5 did, so did those after it until the window's kernels
       were read (the next step's, two flushes of 200 ms later: up to 4
       more, fewer on a box slow enough to pause the probe that long), and
       a launch 2 s after the window makes none (the records are off
       again).  AKD_GATE=0: every launch makes its kernel record.  The
       launch-API records are on from the start either way (the stand-in,
       as CUPTI 13, makes none when they are enabled later).  The trace
       says the same either way. */
    char *count = ak_path_join (dir, "count.txt");
    for (int gate = 1; gate >= 0; gate--) {
        char *gdir = ak_sprintf ("%s/gate%d", dir, gate);
        char *gargs = ak_sprintf ("--class FAKE/sm_90/drv0/nvrtc13.0 --step-range step --warmup-steps 1 "
                                  "--steps 2 --out '%s' -- '%s' 4 cupti", gdir, probe);
        code = ak_test_runf (&out, "AKD_GATE=%d AKD_PROBE_AFTER_MS=2000 AKD_FAKE_CUPTI_COUNT='%s' "
                             "LD_LIBRARY_PATH='%s' '%s' discover %s 2>&1", gate, count, fake, akctl, gargs);
        if (code != 0)
            fail_msg ("AKD_GATE=%d: exit %d:\n%s", gate, code, out ? out : "");
        free (out);
        char *counts = NULL;
        assert_int_equal (ak_test_runf (&counts, "cat '%s'", count), 0);
        int launches = -1, kernels = -1, apis = -1;
        if (sscanf (counts, "launches %d kernel_records %d api_records %d", &launches, &kernels, &apis) != 3
            || launches != 13 || apis != 13 || (gate ? kernels < 5 || kernels > 9 : kernels != 13))
            fail_msg ("AKD_GATE=%d: the stand-in CUPTI counted '%s', expected 13 launches, 13 API records and %s",
                      gate, counts, gate ? "5 to 9 kernel records" : "13 kernel records");
        free (counts);
        akd_trace_t *gt = s_trace (gdir);
        assert_int_equal (s_events (gt, AKD_EV_LAUNCH, "cudaLaunchKernel"), 5);
        akd_trace_destroy (&gt);
        free (gargs);
        free (gdir);
    }
    free (count);

    /* CUPTI's threadId as pthread_self rather than the kernel's thread id:
       the THREAD records map it, the kernels still land in their ranges */
    code = ak_test_runf (&out, "AKD_FAKE_CUPTI_TID=pthread LD_LIBRARY_PATH='%s' '%s' discover %s 2>&1", fake, akctl,
                         args);
    if (code != 0)
        fail_msg ("exit %d:\n%s", code, out ? out : "");
    s_contains (out, "matmul_8x32x16_fp32");
    free (out);
    free (args);

    args = ak_sprintf ("--out '%s/busy' -- '%s' 2 cupti", dir, probe);
    code = ak_test_runf (&out, "AKD_FAKE_CUPTI=busy LD_LIBRARY_PATH='%s' '%s' discover %s 2>&1", fake, akctl, args);
    assert_int_equal (code, 1);
    s_contains (out, "CUPTI is taken by another tool");
    s_contains (out, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
    free (out);
    free (args);
    free (akctl);
    ak_test_rmtree (dir);
    free (dir);
    free (fake);
    free (probe);
}

/* The stand-in CUPTI's runs: akd-nvtx-probe, the fake libcupti's folder,
   a scratch folder, its count file and akctl. */
typedef struct {
    char *probe, *fake, *dir, *count, *akctl;
} s_fake_t;

/* false (the test skips) without the probe */
static bool s_fake_open (s_fake_t *f, const char *tag)
{
    memset (f, 0, sizeof *f);
    if (!(f->probe = s_probe ()))
        return false;
    f->fake = ak_test_bin ("../tests/fakecupti");
    f->dir = ak_test_tmpdir (tag);
    f->count = ak_path_join (f->dir, "count.txt");
    f->akctl = ak_test_bin ("akctl");
    return true;
}

static void s_fake_close (s_fake_t *f)
{
    ak_test_rmtree (f->dir);
    free (f->akctl);
    free (f->count);
    free (f->dir);
    free (f->fake);
    free (f->probe);
}

/* What the stand-in CUPTI counted in the run that wrote path: 21 launches
   and 6 kernel records (the probe's 7 steps, 2 of them traced), apis API
   records, cbs launch callbacks and flush_offs flushes right before the
   kernel records went off; else the test fails naming how (what). */
static void s_fake_counts (const char *path, const char *how, int apis, int cbs, int flush_offs)
{
    char *counts = NULL;
    assert_int_equal (ak_test_runf (&counts, "cat '%s'", path), 0);
    int launches = -1, kernels = -1, a = -1, c = -1, f = -1;
    if (sscanf (counts, "launches %d kernel_records %d api_records %d callbacks %d flush_offs %d", &launches,
                &kernels, &a, &c, &f) != 5
        || launches != 21 || kernels != 6 || a != apis || c != cbs || f != flush_offs)
        fail_msg ("%s: the stand-in CUPTI counted '%s', expected 21 launches, 6 kernel records, %d API records, "
                  "%d callbacks and %d flushes just before the kernel records went off", how, counts, apis, cbs,
                  flush_offs);
    free (counts);
}

/*  --sample 2 through the stand-in CUPTI: 7 steps of the probe (each a
    20 us and a 3 us kernel in ranges, a 1 us one after the step), warm-up
    1, 2 traced steps: the window is steps 2 to 5 and steps 2 and 4 are
    traced.  The kernel records are on from step 2's push to step 3's and
    from step 4's to step 5's: 6 of the 21 launches make one (so the
    library did turn them off and on again).  By default the launches
    come from the launch API's callbacks, switched with the kernel
    records: 6 callbacks, no activity record of the API; with
    AKD_LAUNCH_CB=0 from its activity records, on from the start (21, of
    which the 11 inside the window are in the trace).  Either way the 2
    loose kernels after the traced steps are left out and the figures are
    the traced steps': 23 us a step over 2 steps, the step time from the
    untraced steps.  Each time the records go off for an untraced step
    (steps 3 and 5) CUPTI's completed records were flushed just before, on
    the same thread: 2 such flushes; with $AKD_SAMPLE_FLUSH=0 none, and
    the same records.  Also with the callbacks of one launch API only
    ($AKD_LAUNCH_CB_DOMAINS). */
static void test_sampled_steps (void **state)
{
    (void) state;
    s_fake_t f;
    if (!s_fake_open (&f, "discover-sample"))
        skip ();
    char *probe = f.probe, *fake = f.fake, *dir = f.dir, *count = f.count, *akctl = f.akctl;
    /* mode 2: callbacks, without the flush before the records go off
       ($AKD_SAMPLE_FLUSH=0): the same records */
    for (int mode = 2; mode >= 0; mode--) {
        const int cb = mode >= 1;
        char *out = NULL;
        int code = ak_test_runf (&out, "%s AKD_FAKE_CUPTI_COUNT='%s' LD_LIBRARY_PATH='%s' '%s' discover --class "
                                 "FAKE/sm_90/drv0/nvrtc13.0 --step-range step --warmup-steps 1 --steps 2 --sample 2 "
                                 "--out '%s/out%d' -- '%s' 7 cupti 2>&1",
                                 mode == 2 ? "AKD_SAMPLE_FLUSH=0" : cb ? "" : "AKD_LAUNCH_CB=0", count, fake,
                                 akctl, dir, mode, probe);
        if (code != 0)
            fail_msg ("exit %d:\n%s", code, out ? out : "");
        s_contains (out, "matmul_8x32x16_fp32");
        s_contains (out, "sampled, 1 step in 2 traced (2 of 4); 2 kernels outside a traced step left out");
        free (out);
        s_fake_counts (count, mode == 2 ? "AKD_SAMPLE_FLUSH=0" : cb ? "AKD_LAUNCH_CB=1" : "AKD_LAUNCH_CB=0",
                       cb ? 0 : 21, cb ? 6 : 0, mode == 2 ? 0 : 2);
        char *odir = ak_sprintf ("%s/out%d", dir, mode);
        akd_trace_t *trace = s_trace (odir);
        assert_int_equal (trace->sample, 2);
        assert_int_equal (s_events (trace, AKD_EV_LAUNCH, "cudaLaunchKernel"), cb ? 6 : 11);
        akd_trace_destroy (&trace);
        json_error_t je;
        char *hp = ak_path_join (odir, "hotspots.json");
        json_t *hot = json_load_file (hp, 0, &je);
        assert_non_null (hot);
        json_t *totals = json_object_get (hot, "totals");
        assert_int_equal (json_integer_value (json_object_get (totals, "steps")), 2);
        assert_int_equal (json_integer_value (json_object_get (totals, "steps_seen")), 4);
        assert_int_equal (json_integer_value (json_object_get (totals, "sample")), 2);
        assert_int_equal (json_integer_value (json_object_get (totals, "kernels_unsampled")), 2);
        assert_true (json_real_value (json_object_get (totals, "gpu_us_per_step")) == 23.0);
        assert_string_equal (json_string_value (json_object_get (totals, "step_time_from")), "step ranges");
        /* 1 in 2: the traced steps and the steps after them, no rest, so
           no estimate of what sampling added */
        json_t *ps = json_object_get (totals, "sample_steps");
        assert_int_equal (json_integer_value (json_object_get (json_object_get (ps, "traced"), "steps")), 2);
        assert_int_equal (json_integer_value (json_object_get (json_object_get (ps, "after_traced"), "steps")), 2);
        assert_int_equal (json_integer_value (json_object_get (json_object_get (ps, "rest"), "steps")), 0);
        assert_true (json_is_null (json_object_get (ps, "added_pct")));
        json_decref (hot);
        free (hp);
        char *md = NULL;
        assert_int_equal (ak_test_runf (&md, "cat '%s/hotspots.md'", odir), 0);
        s_contains (md, "**Sampled**: 1 step in 2 was traced (2 of the window's 4 steps)");
        s_contains (md, "2 kernels launched outside a traced step left out");
        s_contains (md, "Step times by place in the sampling cycle: traced ");
        free (md);
        /* read back from its JSON lines, the trace attributes the same */
        assert_int_equal (ak_test_runf (&out, "'%s' discover --dump-trace '%s/trace.akd' > '%s/t.jsonl'", akctl,
                                        odir, dir), 0);
        free (out);
        assert_int_equal (ak_test_runf (&out, "'%s' discover --class FAKE/sm_90/drv0/nvrtc13.0 --from-trace "
                                        "'%s/t.jsonl' --out '%s/again%d' 2>&1", akctl, dir, dir, mode), 0);
        free (out);
        hp = ak_sprintf ("%s/again%d/hotspots.json", dir, mode);
        hot = json_load_file (hp, 0, &je);
        assert_non_null (hot);
        totals = json_object_get (hot, "totals");
        assert_int_equal (json_integer_value (json_object_get (totals, "steps")), 2);
        assert_int_equal (json_integer_value (json_object_get (totals, "kernels_unsampled")), 2);
        assert_true (json_real_value (json_object_get (totals, "gpu_us_per_step")) == 23.0);
        json_decref (hot);
        free (hp);
        free (odir);
    }
    /* the callbacks of one API only ($AKD_LAUNCH_CB_DOMAINS): the stand-in
       CUPTI launches through the runtime, so "runtime" records its 6 traced
       launches and "driver" none of them */
    for (int drv = 0; drv < 2; drv++) {
        char *out = NULL;
        ak_test_runf (&out, "AKD_LAUNCH_CB_DOMAINS=%s AKD_FAKE_CUPTI_COUNT='%s' LD_LIBRARY_PATH='%s' '%s' discover "
                      "--class FAKE/sm_90/drv0/nvrtc13.0 --step-range step --warmup-steps 1 --steps 2 --sample 2 "
                      "--out '%s/dom%d' -- '%s' 7 cupti 2>&1", drv ? "driver" : "runtime", count, fake, akctl,
                      dir, drv, probe);
        free (out);
        s_fake_counts (count, drv ? "AKD_LAUNCH_CB_DOMAINS=driver" : "AKD_LAUNCH_CB_DOMAINS=runtime", 0, drv ? 0 : 6,
                       2);
    }
    /* 1 in 3 over the probe's 6 window steps: two of each place, so the
       run estimates what sampling added (its value is the host's timing:
       only that it is there) */
    char *out = NULL;
    int code = ak_test_runf (&out, "AKD_FAKE_CUPTI_COUNT='%s' LD_LIBRARY_PATH='%s' '%s' discover --class "
                             "FAKE/sm_90/drv0/nvrtc13.0 --step-range step --warmup-steps 1 --steps 2 --sample 3 "
                             "--out '%s/k3' -- '%s' 7 cupti 2>&1", count, fake, akctl, dir, probe);
    if (code != 0)
        fail_msg ("exit %d:\n%s", code, out ? out : "");
    s_contains (out, "sampled, 1 step in 3 traced (2 of 6)");
    s_contains (out, "discover: step times: traced ");
    free (out);
    char *hp = ak_sprintf ("%s/k3/hotspots.json", dir);
    json_error_t je;
    json_t *hot = json_load_file (hp, 0, &je);
    assert_non_null (hot);
    json_t *ps = json_object_get (json_object_get (hot, "totals"), "sample_steps");
    for (int p = 0; p < 3; p++) {
        static const char *const places[3] = { "traced", "after_traced", "rest" };
        assert_int_equal (json_integer_value (json_object_get (json_object_get (ps, places[p]), "steps")), 2);
    }
    assert_true (json_is_number (json_object_get (ps, "added_pct")));
    json_decref (hot);
    free (hp);
    s_fake_close (&f);
}

/*  CUPTI's buffer attributes from akctl discover's environment
    (AKD_CUPTI_PINNED, _BUFFER_MB, _PREALLOC) reach CUPTI with their values
    and only when given; one CUPTI refuses (a buffer of 0 bytes) stops the
    run with the attribute named.  AKD_BUFFER_POOL=0 (no host buffer kept
    for reuse) runs as well. */
static void test_cupti_attrs (void **state)
{
    (void) state;
    s_fake_t f;
    if (!s_fake_open (&f, "discover-attrs"))
        skip ();
    static const struct {
        const char *env, *attrs;
    } cases[] = {
        { "AKD_CUPTI_PINNED=1 AKD_CUPTI_BUFFER_MB=8 AKD_CUPTI_PREALLOC=5",
          "attrs pinned 1 buffer 8388608 prealloc 5" },
        { "AKD_CUPTI_PREALLOC=0", "attrs pinned -1 buffer -1 prealloc 0" },
        { "", "attrs pinned -1 buffer -1 prealloc -1" },
        /* host buffers freed as CUPTI hands them back, not kept */
        { "AKD_BUFFER_POOL=0", "attrs pinned -1 buffer -1 prealloc -1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL, *counts = NULL;
        int code = ak_test_runf (&out, "%s AKD_FAKE_CUPTI_COUNT='%s' LD_LIBRARY_PATH='%s' '%s' discover --class "
                                 "FAKE/sm_90/drv0/nvrtc13.0 --out '%s/out%zu' -- '%s' 2 cupti 2>&1", cases[i].env,
                                 f.count, f.fake, f.akctl, f.dir, i, f.probe);
        if (code != 0)
            fail_msg ("%s: exit %d:\n%s", cases[i].env, code, out ? out : "");
        assert_int_equal (ak_test_runf (&counts, "cat '%s'", f.count), 0);
        if (!strstr (counts, cases[i].attrs))
            fail_msg ("%s: the stand-in CUPTI counted '%s', expected '%s'", cases[i].env, counts, cases[i].attrs);
        free (counts);
        free (out);
    }
    char *out = NULL;
    int code = ak_test_runf (&out, "AKD_CUPTI_BUFFER_MB=0 LD_LIBRARY_PATH='%s' '%s' discover --class "
                             "FAKE/sm_90/drv0/nvrtc13.0 --out '%s/refused' -- '%s' 2 cupti 2>&1", f.fake, f.akctl,
                             f.dir, f.probe);
    assert_int_equal (code, 1);
    s_contains (out, "cuptiActivitySetAttribute (DEVICE_BUFFER_SIZE, 0 from the environment): "
                     "CUPTI_ERROR_INVALID_PARAMETER");
    free (out);
    s_fake_close (&f);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_submit_from_trace, s_teardown),
        cmocka_unit_test (test_usage),
        cmocka_unit_test (test_command_not_found),
        cmocka_unit_test (test_cupti_busy),
        cmocka_unit_test (test_impossible_records),
        cmocka_unit_test (test_window_and_no_gpu_work),
        cmocka_unit_test (test_failing_and_crashing_programs),
        cmocka_unit_test (test_threads_and_full_rings),
        cmocka_unit_test (test_cupti_side),
        cmocka_unit_test (test_sampled_steps),
        cmocka_unit_test (test_cupti_attrs),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
