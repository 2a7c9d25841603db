/*  tests/gpu/test_cuda_timing.c: device-true timing on the CUDA backend
    (worker/backend_cuda.c "timing", worker/timing.c over it).

    Where the backend cannot run, every test is skipped after one line
    "SKIP: no GPU: <reason>" and the binary exits 77 ("Not Run" in CTest;
    tests/skip.h: any other probe error fails).  On a GPU: the
    blocking kernel is there, bounded (a blocker nobody releases gives up
    by itself) and never deadlocks a freshly loaded module; CUPTI's figure
    is at most the events' and, behind the blocker, the events of an empty
    kernel come close to CUPTI's; ak_timing_measure reports both figures,
    CUPTI as the headline, and ak_timing_to_pb puts them (and the kernel
    record) into a WorkloadTiming and a Receipt.  A ~200 us copy is timed
    untraced (timer "events-floor") within 3% of plain untraced events
    minus the event floor, and an empty kernel keeps CUPTI. */
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/backend_cuda.h"
#include "worker/timing.h"
#include "clock.h"
#include "spec.h"
#include "stats.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_empty =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "}\n";

static const char *s_copy =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "    long long n = a.dims[0];\n"
    "    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        AK_OUT (a, 0)[i] = AK_IN (a, 0)[i];\n"
    "}\n";

/* A copy of n floats; the baseline is a host one so the spec needs no
   CUDA launch rules (the test gives the launch configuration itself). */
static const char *s_spec =
    "{\"schema_version\": 1, \"name\": \"copy\", \"keys\": [\"n\"], \"dtypes\": [\"float32\"],"
    " \"tolerances\": {\"float32\": {\"atol\": 0, \"rtol\": 0}},"
    " \"sizes\": [{\"name\": \"small\", \"size\": {\"n\": 1024}}], \"stability_size\": \"small\","
    " \"flops\": \"0\", \"bytes\": \"2*n*b\","
    " \"inputs\": [{\"name\": \"x\", \"count\": \"n\", \"range\": [-1, 1]}],"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"n\"}],"
    " \"reference\": {\"name\": \"ref.c\", \"text\": \"void ak_reference (void) {}\\n\"},"
    " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"x\"}}]}";

static struct {
    bool skip;
    char why[1100];
    const ak_backend_t *be;
    Ak__Device **devs;
    size_t ndevs;
    char *cache;
    ak_dev_t *dev;
    char *empty_path, *copy_path;
    ak_spec_t *spec;
} S;

static char *s_build (const char *source)
{
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    memset (&req, 0, sizeof req);
    req.source = source;
    req.source_len = strlen (source);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = S.cache;
    req.timeout_ms = 60000;
    req.device = S.devs[0];
    int rc = S.be->compile (&req, &out, &err);
    if (rc) {
        fprintf (stderr, "compile: %s\n%s\n", err.msg, out.log ? out.log : "");
        free (out.log);
        free (out.artifact_path);
        return NULL;
    }
    free (out.log);
    return out.artifact_path;
}

static int s_group_setup (void **state)
{
    ak_err_t err = { 0 };
    S.be = ak_backend_find ("cuda");
    ak_test_verdict_t v = ak_test_need_cuda (true, &S.devs, &S.ndevs, S.why, sizeof S.why);
    if (v == AK_TEST_FAIL)
        return -1;          /* a probe error other than "no GPU": every test fails */
    if (v == AK_TEST_SKIP) {
        S.skip = true;
        return 0;
    }
    S.cache = ak_test_tmpdir ("cudatiming");
    if (S.be->open (S.devs[0], &S.dev, &err) != 0) {
        fprintf (stderr, "cuda open: %s\n", err.msg);
        return -1;
    }
    S.empty_path = s_build (s_empty);
    S.copy_path = s_build (s_copy);
    if (!S.empty_path || !S.copy_path)
        return -1;
    if (ak_spec_parse_text (s_spec, strlen (s_spec), "copy spec", &S.spec, &err) != 0) {
        fprintf (stderr, "spec: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int s_group_teardown (void **state)
{
    if (S.be && S.dev)
        S.be->close (&S.dev);
    for (size_t i = 0; i < S.ndevs; i++)
        ak__device__free_unpacked (S.devs[i], NULL);
    free (S.devs);
    if (S.cache) {
        ak_test_rmtree (S.cache);
        free (S.cache);
    }
    free (S.empty_path);
    free (S.copy_path);
    ak_spec_destroy (&S.spec);
    return 0;
}

#define S_NEED_GPU() do { if (S.skip) skip (); } while (0)

static ak_kernel_t *s_load (const char *path)
{
    ak_kernel_t *k = NULL;
    ak_err_t err = { 0 };
    if (S.be->load (S.dev, path, "ak_kernel", &k, &err) != 0)
        fail_msg ("load %s: %s", path, err.msg);
    return k;
}

static void s_empty_launch (ak_launch_t *l)
{
    memset (l, 0, sizeof *l);
    l->grid[0] = l->grid[1] = l->grid[2] = 1;
    l->block[0] = 32;
    l->block[1] = l->block[2] = 1;
}

static double s_median (double *x, size_t n)
{
    ak_stats_t st;
    ak_stats_compute (x, n, &st);
    return st.median;
}

/* ------------------------------------------------------------- blocker */

static void test_info (void **state)
{
    S_NEED_GPU ();
    ak_cuda_timing_info_t info;
    ak_err_t err = { 0 };
    assert_int_equal (ak_cuda_timing_info (S.dev, &info, &err), 0);
    print_message ("blocker %s%s%s; clock check %s; %%globaltimer step %llu ns; default SM clock %u MHz; "
                   "CUPTI %s\n", info.blocker ? "on" : "off", info.blocker ? "" : ": ",
                   info.blocker ? "" : info.blocker_why, info.clock_check ? "on" : "off",
                   (unsigned long long) info.timer_tick_ns, info.default_clock_mhz, info.cupti ? "on" : "off");
    const char *env = getenv ("AK_CUDA_BLOCKER");
    if (!env || strcmp (env, "0") != 0)
        assert_true (info.blocker);
    assert_true (info.default_clock_mhz > 0);
}

/*  A blocker nobody releases gives up by itself, about its 100 ms limit
    later, and the stream runs on afterwards. */
static void test_blocker_bounded (void **state)
{
    S_NEED_GPU ();
    double waited = 0;
    bool timed_out = false;
    ak_err_t err = { 0 };
    int rc = ak_cuda_blocker_selftest (S.dev, &waited, &timed_out, &err);
    if (rc == AK_EUNAVAIL)
        ak_test_skip_gpu ("this device has no blocking kernel: %s", err.msg);
    assert_int_equal (rc, 0);
    print_message ("unreleased blocker: the device was free again after %.1f ms (timed out: %s)\n",
                   waited, timed_out ? "yes" : "no");
    assert_true (timed_out);
    assert_true (waited >= 90 && waited < 2000);
    /* The device works normally afterwards. */
    ak_kernel_t *k = s_load (S.empty_path);
    ak_launch_t l;
    s_empty_launch (&l);
    ak_sample_t smp;
    assert_int_equal (S.be->sample (S.dev, k, &l, true, &smp, &err), 0);
    assert_true (smp.blocked);
    S.be->unload (S.dev, &k);
}

/*  A module loaded just now is sampled behind the blocker at once:
    no deadlock (each sample far under the blocker's limit), and every
    sample really was blocked. */
static void test_fresh_module_no_deadlock (void **state)
{
    S_NEED_GPU ();
    ak_cuda_timing_info_t info;
    ak_err_t err = { 0 };
    assert_int_equal (ak_cuda_timing_info (S.dev, &info, &err), 0);
    if (!info.blocker)
        ak_test_skip_gpu ("this device has no blocking kernel: %s", info.blocker_why ? info.blocker_why : "?");
    for (int rep = 0; rep < 3; rep++) {
        ak_kernel_t *k = s_load (rep == 1 ? S.copy_path : S.empty_path);
        ak_launch_t l;
        s_empty_launch (&l);
        void *buf[2] = { NULL, NULL };
        if (rep == 1) {
            assert_int_equal (S.be->alloc (S.dev, 4096 * 4, &buf[0], &err), 0);
            assert_int_equal (S.be->alloc (S.dev, 4096 * 4, &buf[1], &err), 0);
            l.ndims = 1;
            l.dims[0] = 4096;
            l.nin = l.nout = 1;
            l.in[0] = buf[0];
            l.out[0] = buf[1];
            l.grid[0] = 16;
            l.block[0] = 256;
        }
        for (int i = 0; i < 5; i++) {
            ak_sample_t smp;
            uint64_t t0 = ak_clock_mono_ns ();
            assert_int_equal (S.be->sample (S.dev, k, &l, true, &smp, &err), 0);
            double ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
            if (ms > 50)
                fail_msg ("sample %d of a fresh module took %.1f ms (deadlock behind the blocker?)", i, ms);
            assert_true (smp.blocked);
            if (i == 4)
                print_message ("fresh module %d: sample in %.2f ms, events %.2f us, CUPTI %.2f us, "
                               "SM clock %.0f MHz%s\n", rep, ms, smp.event_us, smp.cupti_us,
                               smp.sm_clock_mhz, smp.clock_ok ? "" : " (throttled)");
        }
        S.be->release (S.dev, &buf[0]);
        S.be->release (S.dev, &buf[1]);
        S.be->unload (S.dev, &k);
    }
}

/* --------------------------------------------------- CUPTI and events */

static void test_empty_kernel_figures (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    ak_kernel_t *k = s_load (S.empty_path);
    ak_launch_t l;
    s_empty_launch (&l);
    enum { N = 200 };
    double ev[N], cu[N], plain[N], mhz[N];
    size_t ncu = 0, nmhz = 0, above = 0;
    double worst = 0;
    bool cupti = ak_cuda_cupti_active (S.dev, NULL);
    for (int i = 0; i < 5; i++) {
        ak_sample_t smp;
        assert_int_equal (S.be->sample (S.dev, k, &l, true, &smp, &err), 0);
    }
    for (int i = 0; i < N; i++) {
        ak_sample_t smp;
        assert_int_equal (S.be->sample (S.dev, k, &l, true, &smp, &err), 0);
        ev[i] = smp.event_us;
        if (smp.cupti_us >= 0) {
            cu[ncu++] = smp.cupti_us;
            /* cuEventElapsedTime resolves about 0.5 us: beyond that, CUPTI
               above the events is wrong; a rare sample is let through. */
            if (smp.cupti_us > smp.event_us + 0.5)
                above++;
            if (smp.cupti_us - smp.event_us > worst)
                worst = smp.cupti_us - smp.event_us;
            assert_true (smp.has_info);
            assert_string_equal (smp.info.name, "ak_kernel");
            assert_int_equal (smp.info.grid[0], 1);
            assert_int_equal (smp.info.block[0], 32);
        }
        if (smp.sm_clock_mhz > 0)
            mhz[nmhz++] = smp.sm_clock_mhz;
        assert_int_equal (ak_cuda_time_plain (S.dev, k, &l, true, 1, &plain[i], &err), 0);
    }
    double loop = 0;
    assert_int_equal (ak_cuda_time_plain (S.dev, k, &l, false, 1000, &loop, &err), 0);
    double m_ev = s_median (ev, N), m_plain = s_median (plain, N);
    double m_cu = ncu ? s_median (cu, ncu) : -1, m_mhz = nmhz ? s_median (mhz, nmhz) : 0;
    print_message ("empty kernel, medians of %d cold samples: CUPTI %.3f us, events behind the blocker "
                   "%.3f us, events around one plain launch %.3f us, loop of 1000 / 1000 %.3f us; "
                   "SM clock %.0f MHz (%zu samples measured it)\n", N, m_cu, m_ev, m_plain, loop, m_mhz, nmhz);
    if (cupti) {
        print_message ("CUPTI above the events by more than 0.5 us in %zu of %d samples (most: %.3f us)\n",
                       above, N, worst);
        assert_int_equal (ncu, N);
        assert_true (above <= N / 100);
        assert_true (m_cu <= m_ev);
    }
    /* The blocker must never make the event figure worse.  It does not
       remove the events' own floor: on one H200 host events read 3.1 us
       behind it (3.3 us plain), on another 4.6 us either way, against 0.6 us
       by CUPTI; that floor is why CUPTI is the headline for short kernels
       (docs/benchmarks.md).  One %globaltimer step (32 ns) of slack each. */
    if (m_ev > m_plain + 0.064)
        fail_msg ("events behind the blocker %.3f us > plain events %.3f us", m_ev, m_plain);
    S.be->unload (S.dev, &k);
}

/* ------------------------------------------------- ak_timing_measure */

static void s_measure (bool with_base, ak_timing_result_t *tr)
{
    ak_err_t err = { 0 };
    ak_kernel_t *kc = s_load (S.copy_path);
    ak_kernel_t *kb = with_base ? s_load (S.copy_path) : NULL;
    int64_t n = 1 << 20;
    ak_launch_cfg_t lc = { .grid = { (uint32_t) (n / 256), 1, 1 }, .block = { 256, 1, 1 } };
    ak_timing_ctx_t tc = {
        .spec = S.spec, .be = S.be, .dev = S.dev, .cand = kc, .base = kb,
        .warmup = 3, .min_samples = 10, .max_samples = 200, .rsd_target = 0.005,
        .max_time_ms = 2000, .cold = true, .seed = 42,
        .cand_launch = &lc, .base_launch = with_base ? &lc : NULL,
    };
    int rc = ak_timing_measure (&tc, &n, AK_DT_FLOAT32, tr, &err);
    if (rc)
        fail_msg ("ak_timing_measure: %s", err.msg);
    S.be->unload (S.dev, &kc);
    if (kb)
        S.be->unload (S.dev, &kb);
}

static void test_measure_both_figures (void **state)
{
    S_NEED_GPU ();
    ak_timing_result_t tr;
    s_measure (true, &tr);
    bool cupti = ak_cuda_cupti_active (S.dev, NULL);
    print_message ("copy of 1 Mi floats, %zu rounds: timer %s, candidate %.3f us (events %.3f us, CUPTI "
                   "%.3f us), baseline %.3f us, speedup %.4f +- %.4f, SM clock %.0f MHz, %u + %u discarded\n",
                   tr.cand.n, tr.timer, tr.cand.median, tr.detail[0].events.median,
                   tr.detail[0].cupti.median, tr.base.median, tr.speedup, tr.speedup_noise,
                   tr.detail[0].sm_clock_mhz, tr.detail[0].discarded, tr.detail[1].discarded);
    assert_string_equal (tr.timer, cupti ? "cupti" : "events");
    assert_true (tr.cand.n >= 10);
    assert_int_equal (tr.detail[0].events.n, tr.cand.n);
    assert_int_equal (tr.base.n, tr.cand.n);
    if (cupti) {
        assert_int_equal (tr.detail[0].cupti.n, tr.cand.n);
        assert_true (tr.cand.median == tr.detail[0].cupti.median);
        assert_true (tr.detail[0].cupti.median <= tr.detail[0].events.median + 0.5);
        assert_true (tr.detail[0].has_info && tr.detail[1].has_info);
        assert_int_equal (tr.detail[0].info.grid[0], (1 << 20) / 256);
    }
    /* The same kernel against itself. */
    assert_true (fabs (tr.speedup - 1.0) < 0.05);

    /* Into a receipt. */
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
    ak__workload_timing__init (t);
    t->candidate = ak_malloc (sizeof *t->candidate);
    ak__stats__init (t->candidate);
    t->candidate->n = (uint32_t) tr.cand.n;
    t->candidate->median_us = tr.cand.median;
    ak_timing_to_pb (&tr, "w1", t, r);
    assert_string_equal (t->timer, tr.timer);
    assert_non_null (t->candidate_events);
    assert_non_null (t->baseline_events);
    assert_int_equal (t->candidate_events->n, tr.cand.n);
    if (cupti) {
        assert_non_null (t->candidate_cupti);
        assert_non_null (t->baseline_cupti);
        assert_true (t->candidate_cupti->median_us == t->candidate->median_us);
        assert_int_equal (r->n_kernels, 2);
        assert_string_equal (r->kernels[0]->name, "ak_kernel");
        assert_string_equal (r->kernels[0]->role, "candidate");
        assert_string_equal (r->kernels[0]->workload, "w1");
        assert_int_equal (r->kernels[0]->n_grid, 3);
        assert_int_equal (r->kernels[0]->grid[0], (1 << 20) / 256);
        assert_int_equal (r->kernels[0]->block[0], 256);
        assert_true (r->kernels[0]->duration_us > 0);
    }
    /* It packs and unpacks. */
    r->timings = ak_malloc (sizeof *r->timings);
    r->timings[0] = t;
    r->n_timings = 1;
    size_t len = ak__receipt__get_packed_size (r);
    uint8_t *buf = ak_malloc (len);
    ak__receipt__pack (r, buf);
    Ak__Receipt *back = ak__receipt__unpack (NULL, len, buf);
    assert_non_null (back);
    assert_string_equal (back->timings[0]->timer, tr.timer);
    assert_int_equal (back->n_kernels, r->n_kernels);
    ak__receipt__free_unpacked (back, NULL);
    free (buf);
    ak__receipt__free_unpacked (r, NULL);
}

/*  Untraced mode on a long kernel: a ~200 us copy (60 M floats, cold)
    gets timer "events-floor", its headline within 3% of a reference taken
    by hand (kernel tracing off, the backend's samples, median events minus
    the event floor), CUPTI stats from the traced probes only, and kernel
    tracing on again afterwards.  An empty kernel through the same call
    keeps CUPTI as the headline, at <= 1.0 us. */
static void test_untraced_long_kernel (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    const char *no_cupti = NULL;
    if (!ak_cuda_cupti_active (S.dev, &no_cupti))
        ak_test_skip_gpu ("no CUPTI kernel records on this device: %s", no_cupti ? no_cupti : "?");
    int64_t n = 60000000;
    ak_kernel_t *kc = s_load (S.copy_path);
    ak_kernel_t *kb = s_load (S.copy_path);
    ak_launch_cfg_t lc = { .grid = { (uint32_t) ((n + 255) / 256), 1, 1 }, .block = { 256, 1, 1 } };
    ak_timing_ctx_t tc = {
        .spec = S.spec, .be = S.be, .dev = S.dev, .cand = kc, .base = kb,
        .warmup = 3, .min_samples = 10, .max_samples = 40, .rsd_target = 0.005,
        .max_time_ms = 3000, .cold = true, .seed = 42,
        .cand_launch = &lc, .base_launch = &lc,
    };
    ak_timing_result_t tr;
    uint64_t t0 = ak_clock_mono_ns ();
    if (ak_timing_measure (&tc, &n, AK_DT_FLOAT32, &tr, &err) != 0)
        fail_msg ("ak_timing_measure: %s", err.msg);
    double floor_us = -1;
    assert_int_equal (ak_cuda_event_floor (S.dev, &floor_us, &err), 0);

    /* Reference, by hand: tracing off, the backend's own samples. */
    void *in = NULL, *out = NULL;
    assert_int_equal (S.be->alloc (S.dev, (size_t) n * 4, &in, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, (size_t) n * 4, &out, &err), 0);
    assert_int_equal (S.be->fill (S.dev, in, 0, (size_t) n * 4, &err), 0);
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.ndims = 1;
    l.dims[0] = n;
    l.nin = l.nout = 1;
    l.in[0] = in;
    l.out[0] = out;
    l.dtype = AK_DT_FLOAT32;
    memcpy (l.grid, lc.grid, sizeof l.grid);
    memcpy (l.block, lc.block, sizeof l.block);
    enum { N = 20 };
    double ev_off[N], ev_on[N], cu_on[N];
    size_t ncu = 0;
    assert_int_equal (ak_cuda_kernel_trace (S.dev, false, &err), 0);
    for (int i = 0; i < N; i++) {
        ak_sample_t smp;
        assert_int_equal (S.be->sample (S.dev, kc, &l, true, &smp, &err), 0);
        assert_true (smp.cupti_us < 0);
        ev_off[i] = smp.event_us;
    }
    assert_int_equal (ak_cuda_kernel_trace (S.dev, true, &err), 0);
    for (int i = 0; i < N; i++) {
        ak_sample_t smp;
        assert_int_equal (S.be->sample (S.dev, kc, &l, true, &smp, &err), 0);
        ev_on[i] = smp.event_us;
        if (smp.cupti_us >= 0)
            cu_on[ncu++] = smp.cupti_us;
    }
    S.be->release (S.dev, &in);
    S.be->release (S.dev, &out);
    double ref = s_median (ev_off, N) - floor_us;
    print_message ("copy of %lld floats (%.0f ms): timer %s, headline %.3f us (baseline %.3f, speedup %.4f), "
                   "events %.3f us, probes' CUPTI %.3f us (n %zu), floor %.3f us, mode from %.3f us; by hand: "
                   "untraced events %.3f - floor = %.3f us, traced events %.3f us, traced CUPTI %.3f us\n",
                   (long long) n, (double) (ak_clock_mono_ns () - t0) / 1e6, tr.timer, tr.cand.median,
                   tr.base.median, tr.speedup, tr.detail[0].events.median, tr.detail[0].cupti.median,
                   tr.detail[0].cupti.n, floor_us, tr.mode_cupti_us, s_median (ev_off, N), ref,
                   s_median (ev_on, N), ncu ? s_median (cu_on, ncu) : -1);
    assert_string_equal (tr.timer, "events-floor");
    assert_true (tr.event_floor_us == floor_us);
    assert_true (floor_us > 0 && floor_us < 20);
    assert_true (tr.mode_cupti_us >= AK_TIMING_TRACE_MAX_US);
    assert_int_equal (tr.detail[0].cupti.n, AK_TIMING_MODE_ROUNDS);
    assert_int_equal (tr.detail[0].events.n, tr.cand.n);
    assert_true (fabs (tr.cand.median / ref - 1) <= 0.03);
    assert_true (fabs (tr.speedup - 1.0) < 0.03);
    /* Tracing is back on after ak_timing_measure. */
    assert_int_equal (ncu, N);
    S.be->unload (S.dev, &kc);
    S.be->unload (S.dev, &kb);

    /* An empty kernel keeps CUPTI. */
    ak_kernel_t *ke = s_load (S.empty_path);
    ak_launch_cfg_t le = { .grid = { 1, 1, 1 }, .block = { 32, 1, 1 } };
    int64_t one = 1;
    ak_timing_ctx_t te = tc;
    te.cand = ke;
    te.base = NULL;
    te.cand_launch = &le;
    te.base_launch = NULL;
    te.max_samples = 200;
    if (ak_timing_measure (&te, &one, AK_DT_FLOAT32, &tr, &err) != 0)
        fail_msg ("ak_timing_measure (empty): %s", err.msg);
    print_message ("empty kernel: timer %s, %.3f us over %zu samples\n", tr.timer, tr.cand.median, tr.cand.n);
    assert_string_equal (tr.timer, "cupti");
    assert_true (tr.cand.median <= 1.0);
    assert_true (tr.event_floor_us == 0);
    S.be->unload (S.dev, &ke);
}

/*  With CUPTI off the events are the headline. */
static void test_measure_without_cupti (void **state)
{
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    S.be->close (&S.dev);
    setenv ("AK_CUDA_CUPTI", "0", 1);
    int rc = S.be->open (S.devs[0], &S.dev, &err);
    unsetenv ("AK_CUDA_CUPTI");
    if (rc)
        fail_msg ("reopen without CUPTI: %s", err.msg);
    ak_timing_result_t tr;
    s_measure (false, &tr);
    print_message ("without CUPTI: timer %s, %.3f us over %zu samples\n", tr.timer, tr.cand.median, tr.cand.n);
    assert_string_equal (tr.timer, "events");
    assert_int_equal (tr.detail[0].cupti.n, 0);
    assert_false (tr.detail[0].has_info);
    S.be->close (&S.dev);
    assert_int_equal (S.be->open (S.devs[0], &S.dev, &err), 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_info),
        cmocka_unit_test (test_blocker_bounded),
        cmocka_unit_test (test_fresh_module_no_deadlock),
        cmocka_unit_test (test_empty_kernel_figures),
        cmocka_unit_test (test_measure_both_figures),
        cmocka_unit_test (test_untraced_long_kernel),
        cmocka_unit_test (test_measure_without_cupti),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
