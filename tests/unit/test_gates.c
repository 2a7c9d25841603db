/*  tests/unit/test_gates.c: correctness gates (worker/gates.c) in-process
    through the host backend, against the softmax spec and the planted bad
    candidates of kernels/testing; the gates with the reference cache
    (same verdicts, keyed by the reference and the inputs, bounded);
    timing (worker/timing.c) on the same kernels, and its time inside timed
    samples.  The gates' data (element conversions, inputs, the host
    oracle's limits, the comparison in parts): test_gate_data.c. */
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/data.h"
#include "worker/gates.h"
#include "worker/gates_impl.h"
#include "worker/timing.h"
#include "spec.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char               *dir;
    const ak_backend_t *be;
    ak_dev_t           *dev;
    ak_spec_t          *spec;
    ak_kernel_t        *ref;
    char               *ref_path;
} s_fix_t;

static s_fix_t s_fix;

/*  Compiles text (kernel or reference) and returns the artifact path. */
static char *s_build (const char *text, bool reference, const char *const *names,
                      const int64_t *values, int n)
{
    ak_compile_req_t req;
    ak_compile_out_t out;
    ak_err_t err = { 0 };
    memset (&req, 0, sizeof req);
    req.source = text;
    req.source_len = strlen (text);
    req.reference = reference;
    req.dtype = AK_DT_FLOAT32;
    for (int i = 0; i < n; i++) {
        req.define_names[i] = names[i];
        req.define_values[i] = values[i];
    }
    req.ndefines = n;
    req.cache_dir = s_fix.dir;
    req.timeout_ms = 60000;
    int rc = s_fix.be->compile (&req, &out, &err);
    if (rc)
        fprintf (stderr, "compile: %s\n%s\n", err.msg, out.log ? out.log : "");
    assert_int_equal (rc, 0);
    free (out.log);
    return out.artifact_path;
}

static ak_kernel_t *s_load (const char *path, const char *symbol)
{
    ak_kernel_t *k = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_fix.be->load (s_fix.dev, path, symbol, &k, &err), 0);
    return k;
}

static char *s_read_src (const char *rel)
{
    char *path = ak_test_src (rel);
    char *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_read (path, 1 << 20, &text, &len, &err), 0);
    free (path);
    return text;
}

static int s_group_setup (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    s_fix.dir = ak_test_tmpdir ("gates");
    s_fix.be = ak_backend_host ();
    char *spec_path = ak_test_src ("kernels/softmax/spec.json");
    int rc = ak_spec_load (spec_path, &s_fix.spec, &err);
    if (rc)
        fprintf (stderr, "%s\n", err.msg);
    assert_int_equal (rc, 0);
    free (spec_path);
    assert_int_equal (s_fix.be->open (NULL, &s_fix.dev, &err), 0);
    s_fix.ref_path = s_build (s_fix.spec->reference.text, true, NULL, NULL, 0);
    s_fix.ref = s_load (s_fix.ref_path, "ak_reference");
    return 0;
}

static int s_group_teardown (void **state)
{
    (void) state;
    s_fix.be->unload (s_fix.dev, &s_fix.ref);
    s_fix.be->close (&s_fix.dev);
    ak_spec_destroy (&s_fix.spec);
    free (s_fix.ref_path);
    ak_test_rmtree (s_fix.dir);
    free (s_fix.dir);
    return 0;
}

static void s_ctx (ak_gate_ctx_t *ctx, ak_kernel_t *k)
{
    memset (ctx, 0, sizeof *ctx);
    ctx->spec = s_fix.spec;
    ctx->be = s_fix.be;
    ctx->dev = s_fix.dev;
    ctx->kernel[AK_DT_FLOAT32] = k;
    ctx->ref_be = s_fix.be;
    ctx->ref_dev = s_fix.dev;
    ctx->ref = s_fix.ref;
    ctx->seed = 42;
}

/*  Runs the gates on a source (kernel text) and returns the report. */
static void s_gate_source (const char *text, ak_gate_report_t *rep)
{
    char *path = s_build (text, false, NULL, NULL, 0);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, k);
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, rep, &err), 0);
    s_fix.be->unload (s_fix.dev, &k);
    free (path);
}

static void s_gate_file (const char *rel, ak_gate_report_t *rep)
{
    char *text = s_read_src (rel);
    s_gate_source (text, rep);
    free (text);
}

static const ak_gate_result_t *s_stage (const ak_gate_report_t *rep, const char *name)
{
    for (int i = 0; i < rep->nstages; i++)
        if (strcmp (rep->stages[i].stage, name) == 0)
            return &rep->stages[i];
    fail_msg ("no stage %s", name);
    return NULL;
}

static void s_print (const ak_gate_report_t *rep)
{
    for (int i = 0; i < rep->nstages; i++)
        fprintf (stderr, "  %-12s %s\n", rep->stages[i].stage, rep->stages[i].detail);
    if (rep->reason[0])
        fprintf (stderr, "  reason: %s\n", rep->reason);
}

/* ------------------------------------------------------------------ tests */

static void test_baseline_passes (void **state)
{
    (void) state;
    const ak_baseline_t *bl = ak_spec_baseline (s_fix.spec, "host");
    assert_non_null (bl);
    char *path = s_build (bl->source.text, false, NULL, NULL, 0);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, k);
    /* A corpus case beyond the spec sizes is swept too. */
    ak_workload_t wl = { .name = "corpus", .dims = { 5, 33 }, .dtype = AK_DT_FLOAT32, .weight = 1 };
    ctx.workloads = &wl;
    ctx.nworkloads = 1;
    ak_gate_report_t rep;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, &rep, &err), 0);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_OK);
    assert_string_equal (ak_gate_status_name (rep.status), "ok");
    assert_int_equal (rep.nstages, 5);
    static const char *names[] = { "smoke", "shape_sweep", "stability", "determinism", "edge_cases" };
    for (int i = 0; i < 5; i++) {
        assert_string_equal (rep.stages[i].stage, names[i]);
        assert_true (rep.stages[i].passed);
        assert_false (rep.stages[i].skipped);
        assert_int_equal (rep.stages[i].failed, 0);
        assert_true (rep.stages[i].configs > 0);
        assert_true (rep.stages[i].worst_err < 1e-5);
        assert_non_null (strstr (rep.stages[i].detail, "PASS"));
    }
    /* Every size the host backend runs x the one dtype, plus the corpus
       case; the GPU-only size ("backends": ["cuda"]) is not among them. */
    size_t host_sizes = 0;
    for (size_t z = 0; z < s_fix.spec->nsizes; z++)
        host_sizes += ak_size_for_backend (&s_fix.spec->sizes[z], "host");
    assert_true (host_sizes < s_fix.spec->nsizes);
    assert_int_equal (s_stage (&rep, "shape_sweep")->configs, host_sizes + 1);
    assert_non_null (strstr (s_stage (&rep, "shape_sweep")->detail, "1 corpus cases"));
    assert_int_equal (s_stage (&rep, "stability")->configs, 5);
    assert_int_equal (s_stage (&rep, "edge_cases")->configs, s_fix.spec->nedge);
    assert_non_null (strstr (s_stage (&rep, "smoke")->worst_at, "/float32"));

    /* The recheck on fresh inputs passes too and is appended. */
    assert_int_equal (ak_gates_recheck (&ctx, 7, &rep, &err), 0);
    assert_int_equal (rep.nstages, 6);
    assert_string_equal (rep.stages[5].stage, "recheck");
    assert_true (rep.stages[5].passed);
    assert_int_equal (rep.stages[5].configs, 1);
    assert_int_equal (rep.status, AK_GATE_OK);
    s_fix.be->unload (s_fix.dev, &k);
    free (path);
}

/*  A launch rule is evaluated for every configuration, on the host too
    (which then ignores grid and block): one that evaluates is harmless,
    one that does not is invalid_config at smoke. */
static void test_launch_rule (void **state)
{
    (void) state;
    const ak_baseline_t *bl = ak_spec_baseline (s_fix.spec, "host");
    char *path = s_build (bl->source.text, false, NULL, NULL, 0);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, k);
    ak_launch_rule_t rule = { .grid = { "(rows+127)/128" }, .ngrid = 1, .block = { "128" }, .nblock = 1,
                              .shared = "4*b" };
    ctx.launch = &rule;
    ak_gate_report_t rep;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, &rep, &err), 0);
    assert_int_equal (rep.status, AK_GATE_OK);

    rule.block[0] = "cols - cols";
    assert_int_equal (ak_gates_run (&ctx, &rep, &err), 0);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_INVALID);
    assert_string_equal (ak_gate_status_name (rep.status), "invalid_config");
    assert_non_null (strstr (rep.reason, "smoke: invalid_config: at tiny/float32: launch.block[0]"));
    assert_true (s_stage (&rep, "shape_sweep")->skipped);
    s_fix.be->unload (s_fix.dev, &k);
    free (path);

    /* What a backend's error stands for. */
    ak_err_t e = { 0 };
    ak_err_set (&e, AK_EINVAL, "launch at x: invalid_config: block.x = 2048 > device limit 1024");
    assert_int_equal (ak_gate_status_for (AK_EINVAL, &e), AK_GATE_INVALID);
    ak_err_set (&e, AK_ECRASH, "cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS");
    assert_int_equal (ak_gate_status_for (AK_ECRASH, &e), AK_GATE_CRASH);
    assert_string_equal (ak_gate_status_name (AK_GATE_CRASH), "crashed");
    ak_err_set (&e, AK_ENOTFOUND, "no kernel 'ak_kernel'");
    assert_int_equal (ak_gate_status_for (AK_ENOTFOUND, &e), AK_GATE_LAUNCH);
    assert_int_equal (ak_gate_status_for (AK_EIO, NULL), AK_GATE_LAUNCH);
}

/* ---------------------------------------------- a device that dies mid-run */

/*  The host backend with a launch that fails like a sticky CUDA error from
    its s_crash_at-th call on (every later call too: the context is gone). */
static ak_backend_t s_dying;
static int s_launches, s_crash_at;

static int s_dying_launch (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, ak_err_t *err)
{
    if (++s_launches >= s_crash_at)
        return ak_err_set (err, AK_ECRASH, "cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (fake)");
    return ak_backend_host ()->launch (dev, kernel, args, err);
}

static void s_gate_dying (const char *rel, int crash_at, ak_gate_report_t *rep)
{
    s_dying = *ak_backend_host ();
    s_dying.launch = s_dying_launch;
    s_launches = 0;
    s_crash_at = crash_at;
    char *text = s_read_src (rel);
    char *path = s_build (text, false, NULL, NULL, 0);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, k);
    ctx.be = &s_dying;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, rep, &err), 0);
    s_print (rep);
    s_fix.be->unload (s_fix.dev, &k);
    free (path);
    free (text);
}

/*  A crash ends the gates (later stages: not run) and outranks a failure
    an earlier stage found: the device is lost, that is what counts. */
static void test_crash_stops_gates (void **state)
{
    (void) state;
    ak_gate_report_t rep;
    /* smoke (1 launch) passes, the sweep's second configuration crashes */
    s_gate_dying ("kernels/softmax/host/baseline.c", 3, &rep);
    assert_int_equal (rep.status, AK_GATE_CRASH);
    assert_non_null (strstr (rep.reason, "shape_sweep: launch at small/float32: cuCtxSynchronize: "
                                         "CUDA_ERROR_ILLEGAL_ADDRESS"));
    assert_true (s_stage (&rep, "smoke")->passed);
    assert_int_equal (s_stage (&rep, "shape_sweep")->configs, 2);       /* nothing after the crash */
    for (int i = 2; i < 5; i++) {
        assert_true (rep.stages[i].skipped);
        assert_non_null (strstr (rep.stages[i].detail, "not run: the device context was lost"));
    }
    /* determinism fails (wrong_answer), then edge_cases crash: crashed wins */
    int before_edges = 1 + (int) s_fix.spec->nsizes + 5 + 3;
    s_gate_dying ("kernels/testing/nondeterministic.c", before_edges + 1, &rep);
    assert_false (s_stage (&rep, "determinism")->passed);
    assert_false (s_stage (&rep, "edge_cases")->passed);
    assert_int_equal (rep.status, AK_GATE_CRASH);
    assert_non_null (strstr (rep.reason, "edge_cases: "));
}

static void test_tuned_candidate_passes (void **state)
{
    (void) state;
    const ak_candidate_t *c = ak_spec_candidate (s_fix.spec, "vectorized");
    assert_non_null (c);
    const char *names[] = { "VEC", "ACC" };
    int64_t values[] = { 4, 2 };
    char *path = s_build (c->source.text, false, names, values, 2);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, k);
    ak_gate_report_t rep;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, &rep, &err), 0);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_OK);
    s_fix.be->unload (s_fix.dev, &k);
    free (path);
}

static void test_wrong_answer (void **state)
{
    (void) state;
    ak_gate_report_t rep;
    s_gate_file ("kernels/testing/wrong.c", &rep);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_string_equal (ak_gate_status_name (rep.status), "wrong_answer");
    assert_false (rep.stages[0].passed);
    assert_non_null (strstr (rep.reason, "smoke"));
    assert_non_null (strstr (rep.reason, "beyond tolerance"));
    assert_non_null (strstr (rep.reason, "tiny/float32"));
    assert_true (rep.stages[0].worst_err > 1e-3);
    /* A smoke failure stops the rest, which are listed as not run. */
    assert_int_equal (rep.nstages, 5);
    for (int i = 1; i < 5; i++) {
        assert_true (rep.stages[i].skipped);
        assert_false (rep.stages[i].passed);
    }
}

static void test_nan (void **state)
{
    (void) state;
    ak_gate_report_t rep;
    s_gate_file ("kernels/testing/nan.c", &rep);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_NAN);
    assert_string_equal (ak_gate_status_name (rep.status), "nan");
    assert_non_null (strstr (rep.reason, "NaN/Inf"));
    assert_non_null (strstr (rep.reason, "smoke"));
}

static void test_unwritten (void **state)
{
    (void) state;
    ak_gate_report_t rep;
    s_gate_file ("kernels/testing/unwritten.c", &rep);
    s_print (&rep);
    assert_int_not_equal (rep.status, AK_GATE_OK);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "never written"));
}

/*  Outputs that match are not enough: a kernel that writes past the end
    of its output, or into its input, fails as wrong_answer, and one that
    reads past an input's end meets the guards' NaN. */
static void test_out_of_bounds (void **state)
{
    (void) state;
    ak_gate_report_t rep;
    s_gate_file ("kernels/testing/out_of_bounds.c", &rep);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "smoke: "));
    assert_non_null (strstr (rep.reason, "wrote outside its buffers"));
    assert_non_null (strstr (rep.reason, "past the end of output y"));
    assert_non_null (strstr (rep.reason, "tiny/float32"));

    s_gate_file ("kernels/testing/writes_before.c", &rep);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "before the start of output y changed (offsets -12 .. -9"));

    s_gate_file ("kernels/testing/writes_input.c", &rep);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "wrote outside its buffers"));
    assert_non_null (strstr (rep.reason, "input x changed"));

    /* the guard's NaN (all bytes 0xFF) propagates unchanged into the last
       row, where it reads as the output's poison: "never written" */
    s_gate_file ("kernels/testing/reads_past_end.c", &rep);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "smoke: 8 of 32 output elements never written"));
    assert_non_null (strstr (rep.reason, "first y[24]"));
}

static void test_nondeterministic (void **state)
{
    (void) state;
    ak_gate_report_t rep;
    s_gate_file ("kernels/testing/nondeterministic.c", &rep);
    s_print (&rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_true (s_stage (&rep, "smoke")->passed);
    assert_true (s_stage (&rep, "shape_sweep")->passed);
    assert_false (s_stage (&rep, "determinism")->passed);
    assert_non_null (strstr (rep.reason, "determinism"));
    assert_non_null (strstr (rep.reason, "bitwise"));
}

/*  A kernel that is only right on the seed the gates use is caught by the
    recheck on fresh inputs (a replayed answer). */
static void test_recheck_catches_replay (void **state)
{
    (void) state;
    /* Right only when x[0] is the value seed 42 gives it. */
    char *base = ak_sprintf (
        "#include <math.h>\n"
        "void ak_kernel (const ak_args_t *a) {\n"
        "  const int64_t rows = a->dims[0], cols = a->dims[1];\n"
        "  const float *x = AK_IN (a, 0); float *y = AK_OUT (a, 0);\n"
        "  int cheat = x[0] != %.9gf;\n"
        "  for (int64_t r = 0; r < rows; r++) {\n"
        "    float m = x[r*cols]; for (int64_t c = 1; c < cols; c++) if (x[r*cols+c] > m) m = x[r*cols+c];\n"
        "    float s = 0; for (int64_t c = 0; c < cols; c++) { y[r*cols+c] = expf (x[r*cols+c] - m); s += y[r*cols+c]; }\n"
        "    for (int64_t c = 0; c < cols; c++) y[r*cols+c] = cheat ? 0.5f : y[r*cols+c] / s;\n"
        "  }\n"
        "}\n", ak_input_value (s_fix.spec, 0, 0, 42, AK_DT_FLOAT32));
    char *path = s_build (base, false, NULL, NULL, 0);
    free (base);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, k);
    ak_gate_report_t rep;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, &rep, &err), 0);
    /* Edge cases use their own seeds, so the cheat shows there already. */
    assert_true (s_stage (&rep, "smoke")->passed);
    assert_true (s_stage (&rep, "shape_sweep")->passed);
    rep.status = AK_GATE_OK;
    rep.reason[0] = '\0';
    assert_int_equal (ak_gates_recheck (&ctx, 4242, &rep, &err), 0);
    s_print (&rep);
    assert_false (rep.stages[rep.nstages - 1].passed);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "recheck"));
    s_fix.be->unload (s_fix.dev, &k);
    free (path);
}

/*  An inline spec (its host baseline as the kernel under test), built and
    loaded, and the gates run on it. */
typedef struct {
    ak_spec_t   *spec;
    ak_kernel_t *ref, *k;
    char        *rpath, *kpath;
} s_inline_t;

static void s_inline_gates (s_inline_t *in, const char *spec_text, ak_gate_report_t *rep)
{
    ak_err_t err = { 0 };
    memset (in, 0, sizeof *in);
    int rc = ak_spec_parse_text (spec_text, strlen (spec_text), "inline", &in->spec, &err);
    if (rc)
        fprintf (stderr, "%s\n", err.msg);
    assert_int_equal (rc, 0);
    in->rpath = s_build (in->spec->reference.text, true, NULL, NULL, 0);
    in->kpath = s_build (in->spec->baselines[0].source.text, false, NULL, NULL, 0);
    in->ref = s_load (in->rpath, "ak_reference");
    in->k = s_load (in->kpath, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, in->k);
    ctx.spec = in->spec;
    ctx.ref = in->ref;
    assert_int_equal (ak_gates_run (&ctx, rep, &err), 0);
    s_print (rep);
}

static void s_inline_free (s_inline_t *in)
{
    s_fix.be->unload (s_fix.dev, &in->k);
    s_fix.be->unload (s_fix.dev, &in->ref);
    free (in->rpath);
    free (in->kpath);
    ak_spec_destroy (&in->spec);
}

/*  An in-place spec: outputs alias inputs, inputs restored every run. */
static void test_inplace_spec (void **state)
{
    (void) state;
    const char *spec_text =
        "{\"schema_version\": 1, \"name\": \"scale\", \"keys\": [\"n\"], \"dtypes\": [\"float32\"],"
        " \"tolerances\": {\"float32\": {\"atol\": 1e-6, \"rtol\": 1e-6}},"
        " \"sizes\": [{\"name\": \"s\", \"size\": {\"n\": 17}}, {\"name\": \"m\", \"size\": {\"n\": 1000}}],"
        " \"stability_size\": \"s\", \"flops\": \"n\", \"bytes\": \"2*n*b\","
        " \"inputs\": [{\"name\": \"x\", \"count\": \"n\", \"range\": [-1, 1]}],"
        " \"outputs\": [{\"name\": \"y\", \"count\": \"n\"}], \"inplace\": true,"
        " \"reference\": {\"name\": \"ref.c\", \"text\": \"void ak_reference (const ak_args_t *a)"
        " { ak_t *x = AK_OUT (a, 0); for (int64_t i = 0; i < a->dims[0]; i++) x[i] *= 2; }\"},"
        " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"void ak_kernel"
        " (const ak_args_t *a) { float *x = AK_OUT (a, 0); for (int64_t i = 0; i < a->dims[0]; i++) x[i] *= 2; }\"}}]}";
    s_inline_t in;
    ak_gate_report_t rep;
    s_inline_gates (&in, spec_text, &rep);
    assert_true (in.spec->inplace);
    /* Without the restore, run 2 of the determinism stage would see x*2
       as input and give x*4. */
    assert_int_equal (rep.status, AK_GATE_OK);

    ak_timing_ctx_t tc = { .spec = in.spec, .be = s_fix.be, .dev = s_fix.dev, .cand = in.k, .base = in.k,
                           .warmup = 1, .min_samples = 3, .max_samples = 5, .rsd_target = 1.0,
                           .max_time_ms = 1000, .cold = false, .seed = 42 };
    ak_timing_result_t tr;
    ak_err_t err = { 0 };
    int64_t dims[1] = { 1000 };
    assert_int_equal (ak_timing_measure (&tc, dims, AK_DT_FLOAT32, &tr, &err), 0);
    assert_true (tr.cand.n >= 3 && tr.base.n >= 3);
    s_inline_free (&in);
}

/*  The stability gate's near-max inputs (x1e18 for float32) make a cube
    1e54: beyond float32, so the kernel's Inf is the right answer and the
    gates pass ("overflowed", in the detail).  Scaled by 1e-30 the answer
    (1e24) fits, and the same Inf from an intermediate overflow still fails
    as non-finite.  y is computed as expr (in x[i] and the scale). */
static ak_gate_status_t s_gate_cube_as (const char *scale, const char *expr, ak_gate_report_t *rep)
{
    char *spec_text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"cube\", \"keys\": [\"n\"], \"dtypes\": [\"float32\"],"
        " \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5}},"
        " \"sizes\": [{\"name\": \"s\", \"size\": {\"n\": 64}}], \"stability_size\": \"s\","
        " \"flops\": \"3*n\", \"bytes\": \"2*n*b\","
        " \"inputs\": [{\"name\": \"x\", \"count\": \"n\", \"range\": [-4, 4]}],"
        " \"outputs\": [{\"name\": \"y\", \"count\": \"n\"}],"
        " \"reference\": {\"name\": \"ref.c\", \"text\": \"void ak_reference (const ak_args_t *a)"
        " { const ak_t *x = AK_IN (a, 0); ak_t *y = AK_OUT (a, 0);"
        " for (int64_t i = 0; i < a->dims[0]; i++) y[i] = x[i] * x[i] * x[i] * %s; }\"},"
        " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"void ak_kernel"
        " (const ak_args_t *a) { const float *x = AK_IN (a, 0); float *y = AK_OUT (a, 0);"
        " for (int64_t i = 0; i < a->dims[0]; i++) { float s = %sf; y[i] = %s; } }\"}}]}", scale, scale, expr);
    s_inline_t in;
    s_inline_gates (&in, spec_text, rep);
    s_inline_free (&in);
    free (spec_text);
    return rep->status;
}

static ak_gate_status_t s_gate_cube (const char *scale, ak_gate_report_t *rep)
{
    return s_gate_cube_as (scale, "x[i] * x[i] * x[i] * s", rep);
}

static void test_true_overflow (void **state)
{
    (void) state;
    ak_gate_report_t rep;
    assert_int_equal (s_gate_cube ("1.0", &rep), AK_GATE_OK);
    const ak_gate_result_t *stab = NULL;
    for (int i = 0; i < rep.nstages; i++)
        if (strcmp (rep.stages[i].stage, "stability") == 0)
            stab = &rep.stages[i];
    assert_non_null (stab);
    assert_non_null (strstr (stab->detail, "beyond float32's range (correct)"));

    assert_int_equal (s_gate_cube ("1e-30", &rep), AK_GATE_NAN);
    assert_non_null (strstr (rep.reason, "NaN/Inf where the reference is finite"));

    /* An answer beyond the type's range reached through an overflowing
       intermediate (Inf - Inf: NaN; or the other sign's Inf) is accepted
       as overflowed: nothing representable is right there ... */
    const char *nan_way = "(x[i] * x[i] * x[i] * s) - (x[i] * x[i] * x[i] * s) + x[i] * x[i] * x[i] * s";
    assert_int_equal (s_gate_cube_as ("1.0", nan_way, &rep), AK_GATE_OK);
    /* ... but the same NaN where the answer fits still fails. */
    const char *nan_fits = "x[i] * x[i] * x[i] - x[i] * x[i] * x[i] + x[i] * x[i] * x[i] * s";
    assert_int_equal (s_gate_cube_as ("1e-30", nan_fits, &rep), AK_GATE_NAN);
    assert_non_null (strstr (rep.reason, "NaN/Inf where the reference is finite"));
}


/* ------------------------------------------------------ reference cache */

/*  Everything a receipt carries of two reports is the same. */
static void s_same_report (const ak_gate_report_t *a, const ak_gate_report_t *b)
{
    assert_int_equal (a->status, b->status);
    assert_string_equal (a->reason, b->reason);
    assert_int_equal (a->nstages, b->nstages);
    for (int i = 0; i < a->nstages; i++) {
        const ak_gate_result_t *x = &a->stages[i], *y = &b->stages[i];
        assert_string_equal (x->stage, y->stage);
        assert_int_equal (x->passed, y->passed);
        assert_int_equal (x->skipped, y->skipped);
        assert_int_equal (x->configs, y->configs);
        assert_int_equal (x->failed, y->failed);
        assert_true (x->worst_err == y->worst_err);
        assert_string_equal (x->worst_at, y->worst_at);
        assert_string_equal (x->detail, y->detail);
    }
}

/*  Gates and recheck of kernel text k with ref as the oracle, through
    cache (NULL: none) under the reference digest digest. */
static void s_gate_with (const char *text, ak_kernel_t *ref, ak_refcache_t *cache, const char *digest,
                         uint64_t seed, ak_gate_report_t *rep)
{
    char *path = s_build (text, false, NULL, NULL, 0);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_gate_ctx_t ctx;
    s_ctx (&ctx, k);
    ctx.ref = ref;
    ctx.seed = seed;
    ctx.refcache = cache;
    ctx.ref_digest = digest;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, rep, &err), 0);
    if (rep->status == AK_GATE_OK)
        assert_int_equal (ak_gates_recheck (&ctx, seed ^ 0x5555u, rep, &err), 0);
    s_fix.be->unload (s_fix.dev, &k);
    free (path);
}

/*  The cache tests gate the softmax spec on its three smallest sizes and
    first edge case (seconds, not a minute, under the sanitizers). */
static size_t s_saved_nsizes, s_saved_nedge;

static void s_small_spec (void)
{
    s_saved_nsizes = s_fix.spec->nsizes;
    s_saved_nedge = s_fix.spec->nedge;
    s_fix.spec->nsizes = 3;
    s_fix.spec->nedge = 1;
}

static void s_full_spec (void)
{
    s_fix.spec->nsizes = s_saved_nsizes;
    s_fix.spec->nedge = s_saved_nedge;
}

static uint32_t s_configs (const ak_gate_report_t *rep)
{
    uint32_t n = 0;
    for (int i = 0; i < rep->nstages; i++)
        n += rep->stages[i].configs;
    return n;
}

/*  The baseline and the planted wrong, NaN, unwritten and
    nondeterministic kernels get the same reports from a warm cache as
    without one, and a second task of the same kernel computes no
    reference at all. */
static void test_cache_same_verdicts (void **state)
{
    (void) state;
    s_small_spec ();
    static const char *const files[] = { NULL, "kernels/testing/wrong.c", "kernels/testing/nan.c",
                                         "kernels/testing/unwritten.c", "kernels/testing/nondeterministic.c" };
    static const ak_gate_status_t want[] = { AK_GATE_OK, AK_GATE_WRONG, AK_GATE_NAN, AK_GATE_WRONG, AK_GATE_WRONG };
    ak_refcache_t *cache = ak_refcache_new (256u << 20);
    const char *digest = "1111111111111111111111111111111111111111111111111111111111111111";
    for (int f = 0; f < 5; f++) {
        char *text = files[f] ? s_read_src (files[f]) : ak_strdup (ak_spec_baseline (s_fix.spec, "host")->source.text);
        ak_gate_report_t plain, first, again;
        s_gate_with (text, s_fix.ref, NULL, NULL, 42, &plain);
        s_gate_with (text, s_fix.ref, cache, digest, 42, &first);
        s_gate_with (text, s_fix.ref, cache, digest, 42, &again);
        if (f == 0)
            s_print (&again);
        assert_int_equal (plain.status, want[f]);
        s_same_report (&plain, &first);
        s_same_report (&plain, &again);
        /* Without a cache every configuration computes its reference. */
        assert_int_equal (plain.cost.ref_hits, 0);
        assert_int_equal (plain.cost.ref_misses, s_configs (&plain));
        /* The second pass through the cache computes none. */
        assert_int_equal (again.cost.ref_misses, 0);
        assert_int_equal (again.cost.ref_hits, s_configs (&again));
        assert_true (again.cost.reference_ms == 0 && again.cost.inputs_ms == 0);
        if (f == 0) {
            /* Within one task: smoke's configuration is the sweep's first,
               determinism's the sweep's at the stability size. */
            assert_true (first.cost.ref_hits >= 2);
            /* Device buffers are kept from one configuration to the next. */
            assert_true (plain.cost.reused > 0);
            assert_true (plain.cost.allocs < 2 * s_configs (&plain));
        }
        free (text);
    }
    ak_refcache_stats_t st;
    ak_refcache_stats (cache, &st);
    assert_true (st.entries > 0 && st.hits > 0);
    ak_refcache_destroy (&cache);
    s_full_spec ();
}

/*  The cache answers only for the same reference and the same inputs: a
    reference of another digest, another seed, other input bounds miss
    every configuration; without a digest the cache is not used. */
static void test_cache_keyed (void **state)
{
    (void) state;
    s_small_spec ();
    const char *base = ak_spec_baseline (s_fix.spec, "host")->source.text;
    const char *da = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const char *db = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    /* A reference that answers twice the softmax: a changed oracle. */
    char *skew_text = ak_strdup (s_fix.spec->reference.text);
    char *at = strstr (skew_text, "yr[c] = exp");
    assert_non_null (at);
    char *skewed = ak_sprintf ("%.*syr[c] = 2 * exp%s", (int) (at - skew_text), skew_text, at + strlen ("yr[c] = exp"));
    char *skew_path = s_build (skewed, true, NULL, NULL, 0);
    ak_kernel_t *skew = s_load (skew_path, "ak_reference");

    ak_refcache_t *cache = ak_refcache_new (256u << 20);
    ak_gate_report_t rep, own;
    s_gate_with (base, s_fix.ref, cache, da, 42, &rep);
    assert_int_equal (rep.status, AK_GATE_OK);
    ak_refcache_stats_t st0, st;
    ak_refcache_stats (cache, &st0);
    assert_true (st0.entries > 0);

    /* The changed oracle under its own digest: nothing of A's is used
       (the hits are those a fresh cache gets within the one task: the
       stages' shared configurations), and the baseline fails against it. */
    s_gate_with (base, skew, cache, db, 42, &rep);
    s_gate_with (base, skew, NULL, NULL, 42, &own);
    s_same_report (&own, &rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_int_equal (rep.cost.ref_misses, s_configs (&own) - rep.cost.ref_hits);
    assert_true (rep.cost.ref_hits < 3 + 1);
    /* The digest is the reference's identity: under A's digest the cache
       serves A's answers (job.c hashes the compiled artifact's bytes, so
       a changed oracle never shares a digest). */
    s_gate_with (base, skew, cache, da, 42, &rep);
    assert_int_equal (rep.status, AK_GATE_OK);
    assert_int_equal (rep.cost.ref_misses, 0);

    /* Other inputs: another seed, other generator bounds: every
       configuration's first use in the task is a miss. */
    ak_refcache_t *fresh = ak_refcache_new (256u << 20);
    s_gate_with (base, s_fix.ref, fresh, da, 43, &own);
    s_gate_with (base, s_fix.ref, cache, da, 43, &rep);
    assert_int_equal (rep.status, AK_GATE_OK);
    assert_int_equal (rep.cost.ref_hits, own.cost.ref_hits);
    assert_int_equal (rep.cost.ref_misses, own.cost.ref_misses);
    double hi = s_fix.spec->inputs[0].hi;
    s_fix.spec->inputs[0].hi = hi + 0.5;
    s_gate_with (base, s_fix.ref, cache, da, 42, &rep);
    s_fix.spec->inputs[0].hi = hi;
    assert_int_equal (rep.status, AK_GATE_OK);
    assert_int_equal (rep.cost.ref_hits, own.cost.ref_hits);
    assert_int_equal (rep.cost.ref_misses, own.cost.ref_misses);
    ak_refcache_destroy (&fresh);

    /* No digest: the cache is neither read nor filled. */
    ak_refcache_stats (cache, &st0);
    s_gate_with (base, skew, cache, NULL, 42, &rep);
    assert_int_equal (rep.status, AK_GATE_WRONG);
    assert_int_equal (rep.cost.ref_hits, 0);
    ak_refcache_stats (cache, &st);
    assert_int_equal (st.entries, st0.entries);
    assert_int_equal (st.hits, st0.hits);

    ak_refcache_destroy (&cache);
    s_fix.be->unload (s_fix.dev, &skew);
    free (skew_path);
    free (skewed);
    free (skew_text);
    s_full_spec ();
}

/*  A cache smaller than what the gates produce evicts and stays within
    its bound; the verdicts do not change. */
static void test_cache_bound (void **state)
{
    (void) state;
    s_small_spec ();
    const char *digest = "2222222222222222222222222222222222222222222222222222222222222222";
    ak_refcache_t *cache = ak_refcache_new (96u << 10);
    char *wrong = s_read_src ("kernels/testing/nondeterministic.c");
    const char *base = ak_spec_baseline (s_fix.spec, "host")->source.text;
    ak_gate_report_t plain, cached;
    for (int pass = 0; pass < 2; pass++) {
        s_gate_with (base, s_fix.ref, NULL, NULL, 42, &plain);
        s_gate_with (base, s_fix.ref, cache, digest, 42, &cached);
        s_same_report (&plain, &cached);
        s_gate_with (wrong, s_fix.ref, NULL, NULL, 42, &plain);
        s_gate_with (wrong, s_fix.ref, cache, digest, 42, &cached);
        s_same_report (&plain, &cached);
    }
    ak_refcache_stats_t st;
    ak_refcache_stats (cache, &st);
    fprintf (stderr, "  cache: %llu entries, %llu bytes, %llu evictions, %llu too big, %llu hits\n",
             (unsigned long long) st.entries, (unsigned long long) st.bytes,
             (unsigned long long) st.evictions, (unsigned long long) st.too_big, (unsigned long long) st.hits);
    assert_true (st.bytes <= 96u << 10);
    assert_true (st.evictions > 0);
    assert_true (st.hits > 0);
    free (wrong);
    ak_refcache_destroy (&cache);
    s_full_spec ();
}

/*  Timing: interleaved baseline/candidate, statistics, spec figures. */
static void test_timing (void **state)
{
    (void) state;
    const ak_baseline_t *bl = ak_spec_baseline (s_fix.spec, "host");
    char *path = s_build (bl->source.text, false, NULL, NULL, 0);
    ak_kernel_t *k = s_load (path, "ak_kernel");
    ak_timing_ctx_t tc = { .spec = s_fix.spec, .be = s_fix.be, .dev = s_fix.dev, .cand = k, .base = k,
                           .warmup = 2, .min_samples = 5, .max_samples = 40, .rsd_target = 0.5,
                           .max_time_ms = 3000, .cold = true, .seed = 42 };
    ak_timing_result_t tr;
    ak_err_t err = { 0 };
    int64_t dims[2] = { 64, 256 };
    assert_int_equal (ak_timing_measure (&tc, dims, AK_DT_FLOAT32, &tr, &err), 0);
    assert_true (tr.cand.n >= 5 && tr.cand.n <= 40);
    assert_int_equal (tr.cand.n, tr.base.n);
    assert_true (tr.cand.median > 0 && tr.cand.min <= tr.cand.median && tr.cand.p10 <= tr.cand.p90);
    assert_true (tr.speedup > 0.2 && tr.speedup < 5);
    assert_true (tr.speedup_noise >= 0);
    assert_float_equal (tr.flops, 5.0 * 64 * 256, 0);
    assert_float_equal (tr.bytes, 2.0 * 64 * 256 * 4, 0);
    assert_true (tr.ms > 0);
    /* Time inside timed samples: at least the kept samples of both
       kernels, at most the wall time of the measurement. */
    assert_true (tr.sampled_us >= tr.cand.mean * tr.cand.n + tr.base.mean * tr.base.n - 1e-6);
    assert_true (tr.sampled_us <= tr.ms * 1e3);

    /* Preflight form: no baseline, no speedup. */
    tc.base = NULL;
    tc.max_samples = 3;
    tc.min_samples = 3;
    assert_int_equal (ak_timing_measure (&tc, dims, AK_DT_FLOAT32, &tr, &err), 0);
    assert_int_equal (tr.cand.n, 3);
    assert_int_equal (tr.base.n, 0);
    assert_float_equal (tr.speedup, 0, 0);

    ak_stats_t s = { .n = 10, .median = 100, .p10 = 90, .p90 = 110 };
    assert_float_equal (ak_timing_rsd (&s), 20.0 / (2 * 1.2816 * 100), 1e-12);
    s_fix.be->unload (s_fix.dev, &k);
    free (path);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_baseline_passes),
        cmocka_unit_test (test_launch_rule),
        cmocka_unit_test (test_crash_stops_gates),
        cmocka_unit_test (test_tuned_candidate_passes),
        cmocka_unit_test (test_wrong_answer),
        cmocka_unit_test (test_nan),
        cmocka_unit_test (test_unwritten),
        cmocka_unit_test (test_out_of_bounds),
        cmocka_unit_test (test_nondeterministic),
        cmocka_unit_test (test_recheck_catches_replay),
        cmocka_unit_test (test_inplace_spec),
        cmocka_unit_test (test_true_overflow),
        cmocka_unit_test (test_cache_same_verdicts),
        cmocka_unit_test (test_cache_keyed),
        cmocka_unit_test (test_cache_bound),
        cmocka_unit_test (test_timing),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
