/*  tests/gpu/test_gpu_reference.c: the device reference (a spec's
    reference_cuda) and inputs generated on the device.

    - ak_fill_uniform through the backend's generate(), for the spec ranges
      and every kernel type, and as float64 copies of those values (what
      the device reference is given): bit for bit the host's inputs
      (worker/data.c, ak_input_value).
    - every operator of the catalog (each kernels/<op>/spec.json, or only
      those named in AK_CATALOG_OPS="op1,op2"; each must have a device
      reference and a GPU-only size): the cuda baseline through the gates
      with the device reference, every declared dtype: on the host sizes
      the device reference is checked against the host float64 oracle
      (gates fail with "error" when they disagree), the GPU-only sizes are
      judged by the device reference alone on device inputs.
    - a wrong device reference is status error ("device reference
      disagrees ..."), never the candidate's fault.
    - the reference cache (worker/refcache.h): softmax's baseline and the
      planted wrong (kernels/testing/cuda/wrong.cu), NaN and
      nondeterministic kernels get the same reports with a cache (cold,
      then warm) as without, a GPU-only workload included (its reference
      from the device reference on device inputs), and a warm cache
      computes no reference.
    - the comparison on the device (ak_compare through the backend's
      compare()): planted unwritten, NaN, overflowed, beyond-tolerance and
      special-value elements in every kernel type counted as the host
      counts them; the gates give the same reports comparing a GPU-only
      workload on the device as on the host, for the baseline and the
      planted wrong, NaN and nondeterministic kernels.

    Where there is no GPU, prints "SKIP: no GPU: <reason>" and exits 77
    ("Not Run" in CTest); any other probe error fails (tests/skip.h). */
#include "support.h"
#include "gpu.h"
#include "worker/backend.h"
#include "worker/data.h"
#include "worker/gates.h"
#include "worker/refcache.h"
#include "spec.h"
#include "spec_cuda.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static ak_gpu_fixture_t S;

static int s_group_setup (void **state)
{
    (void) state;
    return ak_gpu_fixture_open (&S, "gpuref");
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_gpu_fixture_close (&S);
    return 0;
}

/*  Builds source with be (reference: float64) and loads symbol. */
static ak_kernel_t *s_build (const ak_backend_t *be, ak_dev_t *dev, const char *source, bool reference,
                             ak_dtype_t dt, const char *symbol)
{
    return ak_gpu_build (&S, be, dev, source, reference, dt, symbol);
}

static ak_spec_t *s_spec (const char *op)
{
    ak_err_t err = { 0 };
    ak_spec_t *spec = NULL;
    char *rel = ak_sprintf ("kernels/%s/spec.json", op);
    char *path = ak_test_src (rel);
    if (ak_spec_load (path, &spec, &err) != 0)
        fail_msg ("%s", err.msg);
    free (path);
    free (rel);
    return spec;
}

/* --------------------------------------------------- device inputs */

static void test_device_inputs (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    ak_spec_t *spec = s_spec ("rmsnorm");
    assert_non_null (spec->reference_cuda.text);
    ak_kernel_t *gen = s_build (S.be, S.dev, spec->reference_cuda.text, true, AK_DT_FLOAT32,
                                "ak_fill_uniform");
    assert_non_null (S.be->generate);
    const size_t n = 1 << 16;
    const uint64_t seeds[] = { 42, 42 ^ 0x9E3779B97F4A7C15ull };
    void *d = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (S.be->alloc (S.dev, n * 8, &d, &err), 0);
    unsigned char *got = ak_malloc (n * 8), *want = ak_malloc (n * 8);
    size_t checked = 0;
    for (int si = 0; si < 2; si++)
        for (int j = 0; j < spec->ninputs; j++)
            for (int t = 0; t < spec->ndtypes; t++) {
                ak_dtype_t dt = spec->dtypes[t];
                const ak_buf_t *b = &spec->inputs[j];
                if (!S.be->supports_dtype (S.devs[0], dt))
                    continue;
                size_t esz = ak_dtype_size (dt);
                /* the kernel's inputs */
                assert_int_equal (S.be->generate (S.dev, gen, d, n, seeds[si], (uint64_t) j, b->lo, b->hi,
                                                  (int) dt, &err), 0);
                assert_int_equal (S.be->download (S.dev, got, d, n * esz, &err), 0);
                for (size_t i = 0; i < n; i++)
                    ak_elem_store (dt, want, i, ak_input_value (spec, j, i, seeds[si], dt));
                if (memcmp (got, want, n * esz) != 0)
                    fail_msg ("%s input %d: device inputs differ from the host's", ak_dtype_name (dt), j);
                /* the device reference's copies of the same values */
                assert_int_equal (S.be->generate (S.dev, gen, d, n, seeds[si], (uint64_t) j, b->lo, b->hi,
                                                  AK_GEN_AS_F64 + (int) dt, &err), 0);
                assert_int_equal (S.be->download (S.dev, got, d, n * 8, &err), 0);
                for (size_t i = 0; i < n; i++) {
                    double w = ak_input_value (spec, j, i, seeds[si], dt);
                    if (memcmp (got + 8 * i, &w, 8) != 0)
                        fail_msg ("%s input %d element %zu as float64: device differs from %a",
                                  ak_dtype_name (dt), j, i, w);
                }
                checked++;
            }
    print_message ("device inputs bit-equal to the host's: %zu buffers x %zu elements\n", checked, n);
    free (got);
    free (want);
    S.be->release (S.dev, &d);
    S.be->unload (S.dev, &gen);
    ak_spec_destroy (&spec);
}

/* ------------------------------------------------ gates with the device reference */

/*  Gates (and, when they pass and recheck is set, the recheck) of source
    (launched by rule) on spec with the device reference dref_source,
    through cache (NULL: none) under fixed digests; wl (may be NULL) is the
    task's one workload. */
static bool s_dcmp;                    /* s_gates_with: compare on the device */
static ak_refcache_t *s_dcache;        /* s_gates_with: the device cache of references */

static ak_gate_status_t s_gates_with (const ak_spec_t *spec, const char *dref_source, const char *source,
                                      const ak_launch_rule_t *rule, ak_refcache_t *cache,
                                      const ak_workload_t *wl, bool recheck, ak_gate_report_t *rep)
{
    ak_err_t err = { 0 };
    ak_gate_ctx_t g = {
        .spec = spec, .be = S.be, .dev = S.dev, .device = S.devs[0],
        .ref_be = S.host, .ref_dev = S.host_dev, .seed = 42, .launch = rule,
        .dref_launch = spec->reference_cuda_launch, .sweep_all_sizes = wl == NULL,
        .workloads = wl, .nworkloads = wl ? 1 : 0,
        .refcache = cache, .drefcache = s_dcache, .ref_digest = "gpu-test-host-oracle", .dref_digest = "gpu-test-device-reference",
    };
    g.ref = s_build (S.host, S.host_dev, spec->reference.text, true, AK_DT_FLOAT32, "ak_reference");
    g.dref = s_build (S.be, S.dev, dref_source, true, AK_DT_FLOAT32, "ak_reference");
    g.gen = s_build (S.be, S.dev, dref_source, true, AK_DT_FLOAT32, "ak_fill_uniform");
    if (s_dcmp)
        g.dcmp = s_build (S.be, S.dev, dref_source, true, AK_DT_FLOAT32, "ak_compare");
    for (int t = 0; t < spec->ndtypes; t++)
        if (S.be->supports_dtype (S.devs[0], spec->dtypes[t]))
            g.kernel[spec->dtypes[t]] = s_build (S.be, S.dev, source, false, spec->dtypes[t], "ak_kernel");
    assert_int_equal (ak_gates_run (&g, rep, &err), 0);
    if (recheck && rep->status == AK_GATE_OK)
        assert_int_equal (ak_gates_recheck (&g, 42 ^ 0x9E3779B97F4A7C15ull, rep, &err), 0);
    for (int t = 0; t < AK_DT_COUNT; t++)
        if (g.kernel[t])
            S.be->unload (S.dev, &g.kernel[t]);
    S.be->unload (S.dev, &g.gen);
    if (g.dcmp)
        S.be->unload (S.dev, &g.dcmp);
    S.be->unload (S.dev, &g.dref);
    S.host->unload (S.host_dev, &g.ref);
    return rep->status;
}

static ak_gate_status_t s_gates (const ak_spec_t *spec, const char *dref_source, ak_gate_report_t *rep)
{
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_non_null (bl);
    return s_gates_with (spec, dref_source, bl->source.text, bl->launch, NULL, NULL, false, rep);
}

static void test_reference_catalog (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    char *ops[AK_TEST_MAX_OPS];
    int nops = ak_test_catalog_ops (ops, AK_TEST_MAX_OPS);
    for (int o = 0; o < nops; o++) {
        ak_spec_t *spec = s_spec (ops[o]);
        assert_non_null (spec->reference_cuda.text);
        assert_non_null (spec->reference_cuda_launch);
        bool gpu_size = false;
        for (size_t z = 0; z < spec->nsizes; z++)
            gpu_size |= !ak_size_for_backend (&spec->sizes[z], "host");
        assert_true (gpu_size);
        ak_gate_report_t rep;
        ak_gate_status_t st = s_gates (spec, spec->reference_cuda.text, &rep);
        for (int i = 0; i < rep.nstages; i++)
            print_message ("%s %s: %s\n", ops[o], rep.stages[i].stage, rep.stages[i].detail);
        if (st != AK_GATE_OK)
            fail_msg ("%s: %s: %s", ops[o], ak_gate_status_name (st), rep.reason);
        /* the GPU size(s) of every dtype went to the device reference alone */
        assert_non_null (strstr (rep.stages[1].detail, "judged by the device reference"));
        ak_spec_destroy (&spec);
        free (ops[o]);
    }
}

/*  A device reference off by one part in 1e6: the gates say error and why. */
static void test_reference_disagrees (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    ak_spec_t *spec = s_spec ("softmax");
    char *bad = ak_sprintf ("%s", spec->reference_cuda.text);
    char *at = strstr (bad, "/ sum;");
    assert_non_null (at);
    memcpy (at, "* 1e0;", 6);          /* y = exp(x - m): not normalised */
    ak_gate_report_t rep;
    ak_gate_status_t st = s_gates (spec, bad, &rep);
    print_message ("wrong device reference: %s: %s\n", ak_gate_status_name (st), rep.reason);
    assert_int_equal (st, AK_GATE_ERROR);
    assert_non_null (strstr (rep.reason, "device reference disagrees with the host float64 oracle"));
    free (bad);
    ak_spec_destroy (&spec);
}


/* ------------------------------------------------ the reference cache */

/*  The baseline with a NaN planted in row 0 after it wrote its outputs. */
static char *s_planted_nan (const char *base)
{
    const char *end = strrchr (base, '}');
    return ak_sprintf ("%.*s    __syncthreads ();\n    if (r == 0 && t == 0)\n"
                       "        y[cols / 2] = ak_from_acc (__int_as_float (0x7fc00000));\n}\n",
                       (int) (end - base), base);
}

/*  The baseline whose every second launch flips the last bit of y[0]:
    within tolerance, not bitwise deterministic. */
static char *s_planted_nondet (const char *base)
{
    const char *end = strrchr (base, '}');
    return ak_sprintf ("__device__ unsigned ak_planted_calls;\n%.*s    __syncthreads ();\n"
                       "    if (r == 0 && t == 0 && (atomicAdd (&ak_planted_calls, 1u) & 1u)) {\n"
                       "        if (sizeof (ak_t) == 4) ((unsigned *) y)[0] ^= 1u;\n"
                       "        else ((unsigned short *) y)[0] ^= (unsigned short) 1u;\n"
                       "    }\n}\n", (int) (end - base), base);
}

/*  softmax's baseline and the planted kernels, with the verdict each must
    get (s_planted_free releases them). */
typedef struct { const char *what, *source; const ak_launch_rule_t *rule; ak_gate_status_t want; } s_planted_t;
static ak_launch_rule_t s_row128 = { .grid = { (char *) "(rows+127)/128" }, .ngrid = 1,
                                     .block = { (char *) "128" }, .nblock = 1, .shared = (char *) "0" };

static void s_planted (const ak_spec_t *spec, s_planted_t k[4])
{
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_non_null (bl);
    char *wrong_path = ak_test_src ("kernels/testing/cuda/wrong.cu"), *wrong = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_read (wrong_path, 1 << 20, &wrong, &len, &err), 0);
    free (wrong_path);
    k[0] = (s_planted_t) { "baseline", bl->source.text, bl->launch, AK_GATE_OK };
    k[1] = (s_planted_t) { "wrong", wrong, &s_row128, AK_GATE_WRONG };
    k[2] = (s_planted_t) { "nan", s_planted_nan (bl->source.text), bl->launch, AK_GATE_NAN };
    k[3] = (s_planted_t) { "nondeterministic", s_planted_nondet (bl->source.text), bl->launch, AK_GATE_WRONG };
}

static void s_planted_free (s_planted_t k[4])
{
    for (int i = 1; i < 4; i++)
        free ((char *) k[i].source);
}

static void s_same (const char *what, const ak_gate_report_t *a, const ak_gate_report_t *b)
{
    bool same = a->status == b->status && strcmp (a->reason, b->reason) == 0 && a->nstages == b->nstages;
    for (int i = 0; same && i < a->nstages; i++)
        same = strcmp (a->stages[i].detail, b->stages[i].detail) == 0 && a->stages[i].passed == b->stages[i].passed
            && a->stages[i].worst_err == b->stages[i].worst_err;
    if (!same)
        fail_msg ("%s: reports differ with the cache:\n  %s: %s\n  %s: %s", what,
                  ak_gate_status_name (a->status), a->reason, ak_gate_status_name (b->status), b->reason);
}

static void test_cached_reference_verdicts (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    ak_spec_t *spec = s_spec ("softmax");
    /* A GPU-only size as the task's workload: judged by the device
       reference alone, on device inputs. */
    const ak_size_t *gpu = ak_spec_size (spec, "gpu_8m");
    assert_non_null (gpu);
    ak_workload_t wl = { .name = "gpu_8m", .dtype = AK_DT_BFLOAT16, .weight = 1 };
    memcpy (wl.dims, gpu->dims, sizeof wl.dims);
    s_planted_t k[4];
    s_planted (spec, k);
    ak_refcache_t *cache = ak_refcache_new (1ull << 30);
    for (size_t i = 0; i < 4; i++) {
        ak_gate_report_t plain, first, again;
        const char *dref = spec->reference_cuda.text;
        s_gates_with (spec, dref, k[i].source, k[i].rule, NULL, &wl, true, &plain);
        s_gates_with (spec, dref, k[i].source, k[i].rule, cache, &wl, true, &first);
        s_gates_with (spec, dref, k[i].source, k[i].rule, cache, &wl, true, &again);
        char cost[400];
        ak_gate_cost_text (&plain.cost, cost, sizeof cost);
        print_message ("%s without the cache: %s: %s\n  %s\n", k[i].what, ak_gate_status_name (plain.status),
                       plain.reason, cost);
        ak_gate_cost_text (&again.cost, cost, sizeof cost);
        print_message ("%s warm cache: %s\n", k[i].what, cost);
        if (plain.status != k[i].want)
            fail_msg ("%s: %s, expected %s: %s", k[i].what, ak_gate_status_name (plain.status),
                      ak_gate_status_name (k[i].want), plain.reason);
        s_same (k[i].what, &plain, &first);
        s_same (k[i].what, &plain, &again);
        assert_int_equal (plain.cost.ref_hits, 0);
        assert_int_equal (again.cost.ref_misses, 0);
        assert_true (again.cost.ref_hits > 0);
        if (k[i].want == AK_GATE_OK)
            assert_non_null (strstr (again.stages[1].detail, "judged by the device reference"));
    }
    ak_refcache_stats_t st;
    ak_refcache_stats (cache, &st);
    print_message ("cache: %llu entries, %llu MiB, %llu hits, %llu misses\n", (unsigned long long) st.entries,
                   (unsigned long long) (st.bytes >> 20), (unsigned long long) st.hits,
                   (unsigned long long) st.misses);
    ak_refcache_destroy (&cache);
    s_planted_free (k);
    ak_spec_destroy (&spec);
}

/* ------------------------------------------------ comparing on the device */

/*  got/want patterns by i % 8; what the host (worker/gates_cmp.c) makes
    of each: 0 poison (unwritten; with poison off an all-ones element is a
    NaN: non-finite), 1 NaN where want is finite (non-finite), 2 Inf where
    want is beyond the type (overflowed), 3 NaN where want is NaN (fine),
    4 a number where want is Inf (beyond), 5 off by 1 + 10% (beyond),
    6 and 7 want rounded to the type (fine). */
static void test_device_compare (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    ak_spec_t *spec = s_spec ("softmax");
    ak_kernel_t *cmp = s_build (S.be, S.dev, spec->reference_cuda.text, true, AK_DT_FLOAT32, "ak_compare");
    assert_non_null (S.be->compare);
    const size_t n = 100003;            /* not a multiple of the block */
    const double atol = 1e-3, rtol = 1e-2;
    double *want = ak_malloc (n * 8);
    unsigned char *got = ak_malloc (n * 8);
    void *dw = NULL, *dg = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (S.be->alloc (S.dev, n * 8, &dw, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * 8, &dg, &err), 0);
    const ak_dtype_t dts[] = { AK_DT_FLOAT32, AK_DT_FLOAT16, AK_DT_BFLOAT16 };
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        ak_dtype_t dt = dts[t];
        if (!S.be->supports_dtype (S.devs[0], dt))
            continue;
        size_t esz = ak_dtype_size (dt);
        for (int poison = 0; poison <= 1; poison++) {
            uint64_t unwritten = 0, nonfinite = 0, overflowed = 0, beyond = 0, want_nf = 0;
            double worst = 0;
            for (size_t i = 0; i < n; i++) {
                double v = 0.25 + (double) (i % 1000) / 333.0;
                switch (i % 8) {
                    case 0: want[i] = v; memset (got + i * esz, 0xFF, esz);
                            if (poison) unwritten++; else nonfinite++;
                            continue;
                    case 1: want[i] = v; ak_elem_store (dt, got, i, NAN); nonfinite++; continue;
                    case 2: want[i] = 1e300; ak_elem_store (dt, got, i, INFINITY); overflowed++; want_nf += 0; continue;
                    case 3: want[i] = NAN; ak_elem_store (dt, got, i, NAN); want_nf++; continue;
                    case 4: want[i] = INFINITY; ak_elem_store (dt, got, i, 1.0); want_nf++; beyond++; continue;
                    case 5: want[i] = v; ak_elem_store (dt, got, i, v * 1.1 + 1.0); beyond++; break;
                    default: want[i] = v; ak_elem_store (dt, got, i, v); break;
                }
                double e = fabs (ak_elem_load (dt, got, i) - want[i]);
                if (e > worst)
                    worst = e;
                if ((i % 8) >= 6 && !(e <= atol + rtol * fabs (want[i])))
                    fail_msg ("test data: element %zu is beyond tolerance in %s", i, ak_dtype_name (dt));
            }
            assert_int_equal (S.be->upload (S.dev, dw, want, n * 8, &err), 0);
            assert_int_equal (S.be->upload (S.dev, dg, got, n * esz, &err), 0);
            double dmax = dt == AK_DT_FLOAT16 ? 65504.0 : dt == AK_DT_BFLOAT16 ? 3.3895313892515355e38
                                                                             : 3.4028234663852886e38;
            ak_dcmp_t d;
            const uint64_t key = 0x5EC12E7ull + t;
            if (S.be->compare (S.dev, cmp, dg, (int) dt, dw, n, atol, rtol, dmax, poison, key, &d, &err) != 0)
                fail_msg ("compare %s: %s", ak_dtype_name (dt), err.msg);
            print_message ("device compare %s poison %d: unwritten %llu nonfinite %llu overflowed %llu beyond "
                           "%llu want NaN/Inf %llu first %llu worst %.6g\n", ak_dtype_name (dt), poison,
                           (unsigned long long) d.unwritten, (unsigned long long) d.nonfinite,
                           (unsigned long long) d.overflowed, (unsigned long long) d.beyond,
                           (unsigned long long) d.want_nonfinite, (unsigned long long) d.first, d.worst);
            assert_int_equal (d.unwritten, unwritten);
            assert_int_equal (d.nonfinite, nonfinite);
            assert_int_equal (d.overflowed, overflowed);
            assert_int_equal (d.beyond, beyond);
            assert_int_equal (d.want_nonfinite, want_nf);
            assert_int_equal (d.first, 0);
            assert_true (d.worst == worst);
            /* the keyed sum of want: the same again, another under another
               key, another when one element of want changed */
            ak_dcmp_t again, other, changed;
            assert_int_equal (S.be->compare (S.dev, cmp, dg, (int) dt, dw, n, atol, rtol, dmax, poison, key,
                                             &again, &err), 0);
            assert_int_equal (S.be->compare (S.dev, cmp, dg, (int) dt, dw, n, atol, rtol, dmax, poison, key + 1,
                                             &other, &err), 0);
            double nudged = nextafter (want[n / 2], 1e308);
            assert_int_equal (S.be->upload (S.dev, (double *) dw + n / 2, &nudged, 8, &err), 0);
            assert_int_equal (S.be->compare (S.dev, cmp, dg, (int) dt, dw, n, atol, rtol, dmax, poison, key,
                                             &changed, &err), 0);
            assert_true (again.want_sum == d.want_sum);
            assert_true (other.want_sum != d.want_sum);
            assert_true (changed.want_sum != d.want_sum);
            /* nothing wrong: no first index, and the counts of a clean array */
            for (size_t i = 0; i < n; i++)
                ak_elem_store (dt, got, i, want[i] = 0.5 + (double) (i % 7));
            assert_int_equal (S.be->upload (S.dev, dw, want, n * 8, &err), 0);
            assert_int_equal (S.be->upload (S.dev, dg, got, n * esz, &err), 0);
            assert_int_equal (S.be->compare (S.dev, cmp, dg, (int) dt, dw, n, atol, rtol, dmax, poison, key, &d,
                                             &err), 0);
            assert_int_equal (d.unwritten + d.nonfinite + d.overflowed + d.beyond + d.want_nonfinite, 0);
            assert_true (d.first == UINT64_MAX);
        }
    }
    S.be->release (S.dev, &dw);
    S.be->release (S.dev, &dg);
    S.be->unload (S.dev, &cmp);
    free (want);
    free (got);
    ak_spec_destroy (&spec);
}

static void s_dev_release (void *arg, void *buf)
{
    (void) arg;
    S.be->release (S.dev, &buf);
}

/*  The report with " on the device" taken out of its details (the one
    thing that differs when the comparison moved). */
static void s_strip_device (ak_gate_report_t *rep)
{
    for (int i = 0; i < rep->nstages; i++) {
        char *at = strstr (rep->stages[i].detail, " on the device");
        if (at)
            memmove (at, at + strlen (" on the device"), strlen (at + strlen (" on the device")) + 1);
    }
}

static void test_device_compare_verdicts (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    ak_spec_t *spec = s_spec ("softmax");
    const ak_size_t *gpu = ak_spec_size (spec, "gpu_8m");
    assert_non_null (gpu);
    s_planted_t k[4];
    s_planted (spec, k);
    const ak_dtype_t dts[] = { AK_DT_FLOAT32, AK_DT_BFLOAT16 };
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
        for (size_t i = 0; i < 4; i++) {
            ak_workload_t wl = { .name = "gpu_8m", .dtype = dts[t], .weight = 1 };
            memcpy (wl.dims, gpu->dims, sizeof wl.dims);
            ak_gate_report_t host, dev, cold, warm;
            s_dcmp = false;
            s_gates_with (spec, spec->reference_cuda.text, k[i].source, k[i].rule, NULL, &wl, true, &host);
            s_dcmp = true;
            s_gates_with (spec, spec->reference_cuda.text, k[i].source, k[i].rule, NULL, &wl, true, &dev);
            /* with the device cache of references: cold, then warm */
            ak_refcache_t *dc = ak_refcache_new_device (4ull << 30, s_dev_release, NULL);
            s_dcache = dc;
            s_gates_with (spec, spec->reference_cuda.text, k[i].source, k[i].rule, NULL, &wl, true, &cold);
            s_gates_with (spec, spec->reference_cuda.text, k[i].source, k[i].rule, NULL, &wl, true, &warm);
            s_dcache = NULL;
            ak_refcache_stats_t st;
            ak_refcache_stats (dc, &st);
            ak_refcache_destroy (&dc);
            s_dcmp = false;
            print_message ("  device cache: %llu entries, %llu MiB, %llu hits, %llu misses\n",
                           (unsigned long long) st.entries, (unsigned long long) (st.bytes >> 20),
                           (unsigned long long) st.hits, (unsigned long long) st.misses);
            if (k[i].want == AK_GATE_OK)
                assert_true (st.hits > 0 && warm.cost.ref_misses < cold.cost.ref_misses);
            s_strip_device (&cold);
            s_strip_device (&warm);
            s_same (k[i].what, &host, &cold);
            s_same (k[i].what, &host, &warm);
            char ch[400], cd[400];
            ak_gate_cost_text (&host.cost, ch, sizeof ch);
            ak_gate_cost_text (&dev.cost, cd, sizeof cd);
            print_message ("%s %s: %s: %s\n  host compare: %s\n  device compare: %s\n", k[i].what,
                           ak_dtype_name (dts[t]), ak_gate_status_name (dev.status), dev.reason, ch, cd);
            if (host.status != k[i].want)
                fail_msg ("%s: %s, expected %s: %s", k[i].what, ak_gate_status_name (host.status),
                          ak_gate_status_name (k[i].want), host.reason);
            if (k[i].want == AK_GATE_OK) {
                bool on_dev = false;
                for (int s = 0; s < dev.nstages; s++)
                    on_dev |= strstr (dev.stages[s].detail, "judged by the device reference on the device") != NULL;
                assert_true (on_dev);
            }
            s_strip_device (&dev);
            s_same (k[i].what, &host, &dev);
        }
    s_planted_free (k);
    ak_spec_destroy (&spec);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_device_inputs),
        cmocka_unit_test (test_reference_catalog),
        cmocka_unit_test (test_reference_disagrees),
        cmocka_unit_test (test_cached_reference_verdicts),
        cmocka_unit_test (test_device_compare),
        cmocka_unit_test (test_device_compare_verdicts),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
