/*  tests/unit/test_timing.c: worker/timing.c's handling of the figures a
    backend's sample() gives (the CUDA backend's contract), without a GPU:
    the host backend's table with a scripted sample() in place.  Which
    figure is the headline (CUPTI when every kept sample had one, else the
    events), throttled rounds thrown away and counted (and kept after the
    limit), the kernel record, ak_timing_to_pb into a WorkloadTiming and a
    Receipt, inputs generated on several threads equal to the serial
    generator, and the untraced mode (a backend with kernel_trace() and
    event_floor(): long kernels timed by events minus the floor, the mode
    chosen from the slower kernel of the pair, tracing on again after). */
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/data.h"
#include "worker/timing.h"
#include "spec.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *s_spec_text =
    "{\"schema_version\": 1, \"name\": \"copy\", \"keys\": [\"n\"], \"dtypes\": [\"float32\"],"
    " \"tolerances\": {\"float32\": {\"atol\": 0, \"rtol\": 0}},"
    " \"sizes\": [{\"name\": \"s\", \"size\": {\"n\": 16}}], \"stability_size\": \"s\","
    " \"flops\": \"0\", \"bytes\": \"2*n*b\","
    " \"inputs\": [{\"name\": \"x\", \"count\": \"n\", \"range\": [-1, 1]}],"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"n\"}],"
    " \"reference\": {\"name\": \"ref.c\", \"text\": \"void ak_reference (const ak_args_t *a) {}\"},"
    " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"void ak_kernel"
    " (const ak_args_t *a) { const float *x = AK_IN (a, 0); float *y = AK_OUT (a, 0);"
    " for (int64_t i = 0; i < a->dims[0]; i++) y[i] = x[i]; }\"}}]}";

static struct {
    char        *dir;
    ak_backend_t be;                   /* the host table, sample() scripted */
    ak_dev_t    *dev;
    ak_spec_t   *spec;
    ak_kernel_t *k1, *k2;
    char        *path;
    /* the script */
    int          calls;
    int          throttle_every;       /* every k-th call is throttled; 0 never; 1 always */
    int          no_cupti_at;          /* this call has no CUPTI figure; -1 none */
    bool         check_inputs;
    int          bad_inputs;
    /* untraced mode (s_trace, s_floor) */
    double       true_us[2];           /* k1, k2 device time; 0: the fixed 10 / 20 script */
    bool         trace_on;
    int          trace_offs, trace_ons;
    int          floor_rc;
    int          floor_calls;
    int          sleep_ms;             /* each sample takes this long (wall clock) */
} S;

/*  The tracer makes a kernel 9% slower; events read 2.5 us over it. */
#define S_TRACE_COST 1.09
#define S_FLOOR      2.5

static int s_trace (ak_dev_t *dev, bool on, ak_err_t *err)
{
    (void) dev;
    (void) err;
    if (on)
        S.trace_ons++;
    else
        S.trace_offs++;
    S.trace_on = on;
    return 0;
}

static int s_floor (ak_dev_t *dev, double *us, ak_err_t *err)
{
    (void) dev;
    S.floor_calls++;
    *us = S.floor_rc ? 0 : S_FLOOR;
    return S.floor_rc ? ak_err_set (err, S.floor_rc, "no floor (scripted)") : 0;
}

static int s_scripted (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                       ak_sample_t *out, ak_err_t *err)
{
    int call = S.calls++;
    memset (out, 0, sizeof *out);
    if (S.sleep_ms)
        usleep ((useconds_t) S.sleep_ms * 1000);
    if (S.check_inputs) {
        const float *x = args->in[0];
        size_t n = (size_t) args->dims[0];
        for (size_t i = 0; i < n; i += n / 97 + 1)
            if (x[i] != (float) ak_input_value (S.spec, 0, i, 42, AK_DT_FLOAT32))
                S.bad_inputs++;
        if (x[n - 1] != (float) ak_input_value (S.spec, 0, n - 1, 42, AK_DT_FLOAT32))
            S.bad_inputs++;
    }
    /* The candidate (k1) takes 10 us by events and 8 by CUPTI, the
       baseline 20 and 16: the speedup is 2 by either clock. */
    double base = kernel == S.k1 ? 10.0 : 20.0;
    out->event_us = base + 0.001 * (call % 7);
    out->cupti_us = call == S.no_cupti_at ? -1 : base * 0.8;
    if (S.true_us[0] > 0) {
        double t = S.true_us[kernel == S.k1 ? 0 : 1] * (S.trace_on ? S_TRACE_COST : 1.0);
        out->event_us = t + S_FLOOR + 0.001 * (call % 7);
        out->cupti_us = S.trace_on ? t : -1;
    }
    out->clock_ok = !(S.throttle_every && call % S.throttle_every == 0);
    out->sm_clock_mhz = out->clock_ok ? 1980 : 900;
    out->blocked = true;
    if (out->cupti_us >= 0) {
        out->has_info = true;
        snprintf (out->info.name, sizeof out->info.name, "ak_kernel");
        out->info.registers = kernel == S.k1 ? 32 : 40;
        out->info.grid[0] = 7;
        out->info.grid[1] = out->info.grid[2] = 1;
        out->info.block[0] = 256;
        out->info.block[1] = out->info.block[2] = 1;
        out->info.duration_us = out->cupti_us;
    }
    return 0;
}

static int s_setup (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    S.dir = ak_test_tmpdir ("timing");
    S.be = *ak_backend_host ();
    assert_null (S.be.sample);
    S.be.sample = s_scripted;
    S.be.name = "scripted";          /* its event clock is then "events", not "host" */
    if (ak_spec_parse_text (s_spec_text, strlen (s_spec_text), "inline", &S.spec, &err) != 0) {
        fprintf (stderr, "%s\n", err.msg);
        return -1;
    }
    if (S.be.open (NULL, &S.dev, &err) != 0)
        return -1;
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    memset (&req, 0, sizeof req);
    req.source = S.spec->baselines[0].source.text;
    req.source_len = strlen (req.source);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = S.dir;
    req.timeout_ms = 60000;
    if (S.be.compile (&req, &out, &err) != 0) {
        fprintf (stderr, "compile: %s\n%s\n", err.msg, out.log ? out.log : "");
        return -1;
    }
    free (out.log);
    S.path = out.artifact_path;
    if (S.be.load (S.dev, S.path, "ak_kernel", &S.k1, &err) != 0
        || S.be.load (S.dev, S.path, "ak_kernel", &S.k2, &err) != 0)
        return -1;
    return 0;
}

static int s_teardown (void **state)
{
    (void) state;
    S.be.unload (S.dev, &S.k1);
    S.be.unload (S.dev, &S.k2);
    S.be.close (&S.dev);
    ak_spec_destroy (&S.spec);
    free (S.path);
    ak_test_rmtree (S.dir);
    free (S.dir);
    return 0;
}

static void s_script (int throttle_every, int no_cupti_at)
{
    S.calls = 0;
    S.throttle_every = throttle_every;
    S.no_cupti_at = no_cupti_at;
    S.check_inputs = false;
    S.bad_inputs = 0;
    S.true_us[0] = S.true_us[1] = 0;
    S.trace_on = true;
    S.trace_offs = S.trace_ons = 0;
    S.floor_rc = 0;
    S.floor_calls = 0;
    S.sleep_ms = 0;
}

static void s_measure (const ak_backend_t *be, bool base, uint32_t samples, int64_t n, ak_timing_result_t *tr)
{
    ak_timing_ctx_t tc = { .spec = S.spec, .be = be, .dev = S.dev, .cand = S.k1, .base = base ? S.k2 : NULL,
                           .warmup = 2, .min_samples = samples, .max_samples = samples, .rsd_target = 0.5,
                           .max_time_ms = 5000, .cold = false, .seed = 42 };
    ak_err_t err = { 0 };
    int rc = ak_timing_measure (&tc, &n, AK_DT_FLOAT32, tr, &err);
    if (rc)
        fail_msg ("ak_timing_measure: %s", err.msg);
}

/*  Every sample with CUPTI: CUPTI is the headline, both figures kept. */
static void test_cupti_headline (void **state)
{
    (void) state;
    ak_timing_result_t tr;
    s_script (0, -1);
    s_measure (&S.be, true, 20, 64, &tr);
    assert_string_equal (tr.timer, "cupti");
    assert_int_equal (tr.cand.n, 20);
    assert_float_equal (tr.cand.median, 8.0, 1e-12);
    assert_float_equal (tr.base.median, 16.0, 1e-12);
    assert_float_equal (tr.detail[0].cupti.median, 8.0, 1e-12);
    assert_true (tr.detail[0].events.median >= 10.0 && tr.detail[0].events.median < 10.01);
    assert_true (tr.detail[1].events.median >= 20.0 && tr.detail[1].events.median < 20.01);
    assert_float_equal (tr.speedup, 2.0, 1e-12);
    assert_int_equal (tr.detail[0].discarded, 0);
    assert_float_equal (tr.detail[0].sm_clock_mhz, 1980, 0);
    assert_true (tr.detail[0].has_info && tr.detail[1].has_info);
    assert_int_equal (tr.detail[0].info.registers, 32);
    assert_int_equal (tr.detail[1].info.registers, 40);

    /* Into a receipt, and through pack / unpack. */
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
    ak__workload_timing__init (t);
    t->candidate = ak_malloc (sizeof *t->candidate);
    ak__stats__init (t->candidate);
    t->candidate->median_us = tr.cand.median;
    t->baseline = ak_malloc (sizeof *t->baseline);
    ak__stats__init (t->baseline);
    t->baseline->median_us = tr.base.median;
    ak_timing_to_pb (&tr, "big", t, r);
    r->timings = ak_malloc (sizeof *r->timings);
    r->timings[0] = t;
    r->n_timings = 1;
    size_t len = ak__receipt__get_packed_size (r);
    uint8_t *buf = ak_malloc (len);
    ak__receipt__pack (r, buf);
    ak__receipt__free_unpacked (r, NULL);
    Ak__Receipt *back = ak__receipt__unpack (NULL, len, buf);
    free (buf);
    assert_non_null (back);
    const Ak__WorkloadTiming *bt = back->timings[0];
    assert_string_equal (bt->timer, "cupti");
    assert_non_null (bt->candidate_events);
    assert_non_null (bt->baseline_events);
    assert_non_null (bt->candidate_cupti);
    assert_non_null (bt->baseline_cupti);
    assert_int_equal (bt->candidate_events->n, 20);
    assert_float_equal (bt->candidate_cupti->median_us, 8.0, 1e-12);
    assert_float_equal (bt->candidate->sm_clock_mhz, 1980, 0);
    assert_int_equal (back->n_kernels, 2);
    assert_string_equal (back->kernels[0]->role, "candidate");
    assert_string_equal (back->kernels[1]->role, "baseline");
    assert_string_equal (back->kernels[0]->workload, "big");
    assert_string_equal (back->kernels[0]->name, "ak_kernel");
    assert_int_equal (back->kernels[0]->registers, 32);
    assert_int_equal (back->kernels[0]->n_grid, 3);
    assert_int_equal (back->kernels[0]->grid[0], 7);
    assert_int_equal (back->kernels[0]->block[0], 256);
    assert_float_equal (back->kernels[0]->duration_us, 8.0, 1e-12);
    ak__receipt__free_unpacked (back, NULL);
}

/*  A time budget smaller than one round still keeps AK_TIMING_MIN_ROUNDS
    paired rounds (and no more), so the speedup has an interval. */
static void test_time_budget_min_rounds (void **state)
{
    (void) state;
    ak_timing_result_t tr;
    s_script (0, -1);
    S.sleep_ms = 3;
    int64_t n = 64;
    ak_timing_ctx_t tc = { .spec = S.spec, .be = &S.be, .dev = S.dev, .cand = S.k1, .base = S.k2,
                           .warmup = 1, .min_samples = 20, .max_samples = 50, .rsd_target = 0.5,
                           .max_time_ms = 1, .cold = false, .seed = 42 };
    ak_err_t err = { 0 };
    if (ak_timing_measure (&tc, &n, AK_DT_FLOAT32, &tr, &err))
        fail_msg ("ak_timing_measure: %s", err.msg);
    assert_int_equal (tr.cand.n, AK_TIMING_MIN_ROUNDS);
    assert_int_equal (tr.base.n, AK_TIMING_MIN_ROUNDS);
    assert_false (tr.rsd_met);                   /* min_samples 20 not reached */
    assert_float_equal (tr.speedup, 2.0, 0.01);
    assert_true (tr.speedup_noise >= 0 && tr.speedup_noise < 0.01);
    S.sleep_ms = 0;
}

/*  One sample without CUPTI: the events are the headline, no CUPTI stats. */
static void test_events_headline (void **state)
{
    (void) state;
    ak_timing_result_t tr;
    s_script (0, 9);
    s_measure (&S.be, true, 20, 64, &tr);
    assert_string_equal (tr.timer, "events");
    assert_true (tr.cand.median >= 10.0 && tr.cand.median < 10.01);
    assert_int_equal (tr.detail[0].cupti.n + tr.detail[1].cupti.n, 20);
    assert_true (tr.detail[0].cupti.n == 0 || tr.detail[1].cupti.n == 0);
    assert_true (fabs (tr.speedup - 2.0) < 0.01);
}

/*  Throttled rounds are thrown away whole, counted, and taken again. */
static void test_throttled_discarded (void **state)
{
    (void) state;
    ak_timing_result_t tr;
    s_script (5, -1);
    s_measure (&S.be, true, 20, 64, &tr);
    assert_int_equal (tr.cand.n, 20);
    assert_int_equal (tr.base.n, 20);
    uint32_t d = tr.detail[0].discarded + tr.detail[1].discarded;
    print_message ("%d samples taken, %u discarded\n", S.calls, d);
    assert_true (d > 0);
    /* Warm-up (4 calls) is never counted; each discarded round costs 2 calls. */
    assert_int_equal (S.calls, 4 + 2 * 20 + 2 * (int) d);
    assert_float_equal (tr.detail[0].sm_clock_mhz, 1980, 0);

    /* Always throttled: kept after AK_TIMING_MAX_DISCARDS rounds. */
    s_script (1, -1);
    s_measure (&S.be, false, 10, 64, &tr);
    assert_int_equal (tr.cand.n, 10);
    assert_int_equal (tr.detail[0].discarded, AK_TIMING_MAX_DISCARDS);
    assert_float_equal (tr.detail[0].sm_clock_mhz, 900, 0);
}

/*  The host backend (no sample()): its clock is "host", no CUPTI. */
static void test_host_clock (void **state)
{
    (void) state;
    ak_timing_result_t tr;
    s_measure (ak_backend_host (), false, 5, 64, &tr);
    assert_string_equal (tr.timer, "host");
    assert_int_equal (tr.detail[0].events.n, 5);
    assert_true (tr.detail[0].events.median == tr.cand.median);
    assert_int_equal (tr.detail[0].cupti.n, 0);
    assert_false (tr.detail[0].has_info);
    Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
    ak__workload_timing__init (t);
    ak_timing_to_pb (&tr, "w", t, NULL);
    assert_string_equal (t->timer, "host");
    assert_non_null (t->candidate_events);
    assert_null (t->candidate_cupti);
    assert_null (t->baseline_events);
    ak__workload_timing__free_unpacked (t, NULL);
}

/*  The mode rule itself. */
static void test_mode_rule (void **state)
{
    (void) state;
    assert_false (ak_timing_untraced (0.6, true));
    assert_false (ak_timing_untraced (AK_TIMING_TRACE_MAX_US - 0.01, true));
    assert_true (ak_timing_untraced (AK_TIMING_TRACE_MAX_US, true));
    assert_true (ak_timing_untraced (200, true));
    assert_false (ak_timing_untraced (200, false));
}

/*  A pair of kernels taking cand_us and base_us (traced: S_TRACE_COST
    times that) through a backend with kernel_trace() and event_floor(). */
static void s_measure_pair (double cand_us, double base_us, uint32_t samples, ak_timing_result_t *tr)
{
    ak_backend_t be = S.be;
    be.kernel_trace = s_trace;
    be.event_floor = s_floor;
    s_script (0, -1);
    S.true_us[0] = cand_us;
    S.true_us[1] = base_us;
    s_measure (&be, true, samples, 64, tr);
}

/*  A long kernel pair: probes traced, then tracing off for the rest, the
    headline events - floor (the true time), tracing on again after; both
    raw figures kept, CUPTI's from the traced probes alone.  The mode is
    the slower kernel's: a short candidate beside a long baseline is
    measured untraced too, a short pair stays traced, and where no floor
    can be had the long pair stays traced. */
static void test_untraced_mode (void **state)
{
    (void) state;
    ak_backend_t be = S.be;
    be.kernel_trace = s_trace;
    be.event_floor = s_floor;
    ak_timing_result_t tr;

    s_script (0, -1);
    S.true_us[0] = 100;
    S.true_us[1] = 200;
    s_measure (&be, true, 20, 64, &tr);
    assert_string_equal (tr.timer, "events-floor");
    assert_int_equal (S.trace_offs, 1);
    assert_int_equal (S.trace_ons, 1);
    assert_true (S.trace_on);
    assert_float_equal (tr.event_floor_us, S_FLOOR, 1e-12);
    assert_float_equal (tr.mode_cupti_us, 200 * S_TRACE_COST, 1e-9);
    assert_int_equal (tr.cand.n, 20);
    assert_true (fabs (tr.cand.median - 100) < 0.01);
    assert_true (fabs (tr.base.median - 200) < 0.01);
    assert_true (fabs (tr.speedup - 2.0) < 0.001);
    assert_int_equal (tr.detail[0].events.n, 20);
    assert_true (fabs (tr.detail[0].events.median - 102.5) < 0.01);
    assert_int_equal (tr.detail[0].cupti.n, AK_TIMING_MODE_ROUNDS);
    assert_float_equal (tr.detail[0].cupti.median, 100 * S_TRACE_COST, 1e-9);
    /* warm-up 2 x 2, probes, samples */
    assert_int_equal (S.calls, 4 + 2 * AK_TIMING_MODE_ROUNDS + 2 * 20);
    Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
    ak__workload_timing__init (t);
    ak_timing_to_pb (&tr, "w", t, NULL);
    assert_string_equal (t->timer, "events-floor");
    assert_non_null (t->candidate_cupti);
    assert_int_equal (t->candidate_cupti->n, AK_TIMING_MODE_ROUNDS);
    assert_int_equal (t->candidate_events->n, 20);
    ak__workload_timing__free_unpacked (t, NULL);

    /* The slower kernel decides: 4 us candidate, 40 us baseline. */
    s_script (0, -1);
    S.true_us[0] = 4;
    S.true_us[1] = 40;
    s_measure (&be, true, 10, 64, &tr);
    assert_string_equal (tr.timer, "events-floor");
    assert_true (fabs (tr.cand.median - 4) < 0.01);
    assert_true (fabs (tr.speedup - 10.0) < 0.05);

    /* A short pair stays traced: CUPTI headline, no floor asked for. */
    s_script (0, -1);
    S.true_us[0] = 2;
    S.true_us[1] = 8;
    s_measure (&be, true, 10, 64, &tr);
    assert_string_equal (tr.timer, "cupti");
    assert_int_equal (S.trace_offs, 0);
    assert_int_equal (S.floor_calls, 0);
    assert_float_equal (tr.event_floor_us, 0, 0);
    assert_true (fabs (tr.cand.median - 2 * S_TRACE_COST) < 1e-9);

    /* No floor: the long pair stays traced. */
    s_script (0, -1);
    S.true_us[0] = 100;
    S.true_us[1] = 200;
    S.floor_rc = AK_EUNAVAIL;
    s_measure (&be, true, 10, 64, &tr);
    assert_string_equal (tr.timer, "cupti");
    assert_int_equal (S.trace_offs, 0);
    assert_int_equal (S.floor_calls, 1);
}

/*  A long baseline costs fewer runs outside the samples: probing stops
    once a kernel's every probe took AK_TIMING_PROBE_DECISIVE_US or more
    (one round here), and the warm-up stops after a round that kept the
    device AK_TIMING_WARM_BUSY_US busy; the figures are those of the full
    procedure.  Just under the bounds, everything runs as before. */
static void test_long_baseline_runs (void **state)
{
    (void) state;
    ak_timing_result_t tr;

    /* 30 ms baseline: both warm-up rounds (30 ms < 50 ms busy), one probe */
    s_measure_pair (100, 30000, 10, &tr);
    assert_string_equal (tr.timer, "events-floor");
    assert_int_equal (S.calls, 2 * 2 + 2 * 1 + 2 * 10);
    assert_int_equal (tr.detail[1].cupti.n, 1);
    assert_float_equal (tr.mode_cupti_us, 30000 * S_TRACE_COST, 1e-6);
    assert_true (fabs (tr.cand.median - 100) < 0.01);
    assert_true (fabs (tr.speedup - 300) < 0.1);

    /* 60 ms baseline: one warm-up round, one probe */
    s_measure_pair (100, 60000, 10, &tr);
    assert_string_equal (tr.timer, "events-floor");
    assert_int_equal (S.calls, 2 * 1 + 2 * 1 + 2 * 10);
    assert_true (fabs (tr.speedup - 600) < 0.1);

    /* just under the probe bound (traced 1.09 x 900 us): every probe */
    s_measure_pair (100, 900, 10, &tr);
    assert_int_equal (S.calls, 2 * 2 + 2 * AK_TIMING_MODE_ROUNDS + 2 * 10);
    assert_int_equal (tr.detail[1].cupti.n, AK_TIMING_MODE_ROUNDS);

    /* a short pair: every warm-up round and probe, as before */
    s_measure_pair (2, 8, 10, &tr);
    assert_string_equal (tr.timer, "cupti");
    assert_int_equal (S.calls, 2 * 2 + 2 * AK_TIMING_MODE_ROUNDS + 2 * 10);
}

/*  Inputs large enough to be generated on several threads hold exactly
    the serial generator's values (the scripted sample checks them). */
static void test_parallel_inputs (void **state)
{
    (void) state;
    ak_timing_result_t tr;
    s_script (0, -1);
    S.check_inputs = true;
    s_measure (&S.be, false, 2, (1 << 20) + 12345, &tr);
    assert_int_equal (S.bad_inputs, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_cupti_headline),
        cmocka_unit_test (test_events_headline),
        cmocka_unit_test (test_time_budget_min_rounds),
        cmocka_unit_test (test_throttled_discarded),
        cmocka_unit_test (test_host_clock),
        cmocka_unit_test (test_parallel_inputs),
        cmocka_unit_test (test_mode_rule),
        cmocka_unit_test (test_untraced_mode),
        cmocka_unit_test (test_long_baseline_runs),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
