/*  tests/gpu/test_cuda_profiler.c: the `profile` task's CUPTI range profiler
    (worker/profiler_cuda.c) on a real GPU.

    test_figures needs no GPU (the receipt record and its derived rates).
    The others skip after one line "SKIP: no GPU: <reason>" where there is
    no GPU (the binary exits 77, "Not Run" in CTest; any other probe error
    fails: tests/skip.h).  On a GPU: a copy kernel over 64 MiB profiled twice
    (DRAM bytes within 10% of what it moves, a duration, the % of peak in
    range), timing still working after the profiler is gone, and
    ak_profile_run over the catalog's softmax baseline (a profile and a
    kernel record per workload). */
#include "support.h"
#include "gpu.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/backend_cuda.h"
#include "worker/profiler_cuda.h"
#include "clock.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_copy =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "    long long n = a.dims[0];\n"
    "    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long) gridDim.x * blockDim.x)\n"
    "        AK_OUT (a, 0)[i] = AK_IN (a, 0)[i];\n"
    "}\n";

static ak_gpu_fixture_t S;          /* the first CUDA device (gpu.h) */

static int s_group_setup (void **state)
{
    (void) state;
    return ak_gpu_fixture_open (&S, "cudaprof");
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_gpu_fixture_close (&S);
    return 0;
}

#define S_NEED_GPU() do { if (S.skip) skip (); } while (0)

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
    if (rc)
        fail_msg ("compile: %s\n%s", err.msg, out.log ? out.log : "");
    char *path = out.artifact_path;
    free (out.log);
    return path;
}

/* ------------------------------------------------------------ no GPU */

static void test_figures (void **state)
{
    (void) state;
    Ak__Workload w = AK__WORKLOAD__INIT;
    int64_t dims[1] = { 1024 };
    w.name = (char *) "small";
    w.dtype = (char *) "float32";
    w.dims = dims;
    w.n_dims = 1;
    double v[AK_PROFILE_NMETRICS] = { 2000.0, 6e6, 2e6, 40.0, 75.0 };
    Ak__WorkloadProfile *p = ak_profile_to_pb (&w, v, 4e6, 8e6, 3);
    assert_int_equal (p->n_metrics, AK_PROFILE_NMETRICS);
    assert_string_equal (p->metrics[0]->name, "gpu__time_duration.sum");
    assert_string_equal (p->metrics[0]->unit, "nsecond");
    assert_string_equal (p->metrics[1]->name, "dram__bytes_read.sum");
    assert_string_equal (p->metrics[2]->name, "dram__bytes_write.sum");
    assert_string_equal (p->metrics[3]->name, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
    assert_string_equal (p->metrics[3]->unit, "%");
    assert_true (p->metrics[1]->value == 6e6);
    assert_string_equal (p->workload->name, "small");
    assert_true (fabs (p->duration_us - 2.0) < 1e-12);
    assert_true (fabs (p->achieved_gbps - 4000.0) < 1e-9);     /* 8e6 B / 2 us */
    assert_true (fabs (p->achieved_gflops - 2000.0) < 1e-9);
    assert_true (fabs (p->dram_gbps - 4000.0) < 1e-9);         /* (6e6 + 2e6) / 2 us */
    assert_int_equal (p->passes, 3);
    ak__workload_profile__free_unpacked (p, NULL);

    /* No duration (a metric CUPTI did not give): no rates, never Inf. */
    double z[AK_PROFILE_NMETRICS] = { 0, 1e6, 1e6, 0, 0 };
    p = ak_profile_to_pb (NULL, z, 1e6, 1e6, 1);
    assert_null (p->workload);
    assert_true (p->duration_us == 0 && p->achieved_gbps == 0 && p->achieved_gflops == 0 && p->dram_gbps == 0);
    ak__workload_profile__free_unpacked (p, NULL);
    double nan_v[AK_PROFILE_NMETRICS] = { NAN, NAN, NAN, NAN, NAN };
    p = ak_profile_to_pb (NULL, nan_v, 1e6, 1e6, 1);
    assert_true (p->duration_us == 0 && p->achieved_gbps == 0);
    ak__workload_profile__free_unpacked (p, NULL);
}

/* Percentages of the measured peaks (no GPU). */
static void test_pct (void **state)
{
    (void) state;
    assert_true (fabs (ak_profile_pct (50, 200) - 25.0) < 1e-12);
    assert_true (fabs (ak_profile_pct (4800, 4000) - 120.0) < 1e-12);
    assert_true (ak_profile_pct (10, 0) == 0);
    assert_true (ak_profile_pct (10, -1) == 0);
    assert_true (ak_profile_pct (10, NAN) == 0);
    assert_true (ak_profile_pct (10, INFINITY) == 0);
    assert_true (ak_profile_pct (NAN, 100) == 0);
    assert_true (ak_profile_pct (-1, 100) == 0);
    double v[AK_PROFILE_NMETRICS] = { 2000, 0, 0, 0, 0 };    /* 2 us */
    Ak__WorkloadProfile *p = ak_profile_to_pb (NULL, v, 4e6, 8e6, 1);   /* 4000 GB/s, 2000 GFLOP/s */
    ak_profile_apply_peaks (p, 3200, 50000);
    assert_true (fabs (p->measured_copy_gbps - 3200) < 1e-9 && fabs (p->measured_fp32_gflops - 50000) < 1e-9);
    assert_true (fabs (p->pct_of_copy_bw - 125.0) < 1e-9);
    assert_true (fabs (p->pct_of_fp32_peak - 4.0) < 1e-9);
    ak_profile_apply_peaks (p, 0, NAN);                        /* not measured */
    assert_true (p->measured_copy_gbps == 0 && p->measured_fp32_gflops == 0);
    assert_true (p->pct_of_copy_bw == 0 && p->pct_of_fp32_peak == 0);
    ak__workload_profile__free_unpacked (p, NULL);
}

/* ----------------------------------------------------------------- GPU */

/*  The device's peaks: positive, plausible, cached.  Copy counts read +
    write bytes (2 x buffer size per copy). */
static void test_peaks (void **state)
{
    (void) state;
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    ak_cuda_peaks_t pk, again;
    int rc = ak_cuda_device_peaks (S.dev, &pk, &err);
    if (rc)
        fail_msg ("ak_cuda_device_peaks: %s (%s)", err.msg, ak_strerror (rc));
    print_message ("peaks on %s: copy %.1f GB/s (read+write; 2 x %.0f MiB in %.3f ms, best of 5), "
                   "FP32 FMA (CUDA cores) %.1f GFLOP/s (%.4g FLOP in %.3f ms, best of 5)\n",
                   S.devs[0]->name, pk.copy_gbps, pk.copy_bytes / 1048576.0, pk.copy_ms,
                   pk.fp32_gflops, pk.fma_flops, pk.fma_ms);
    assert_true (pk.copy_gbps > 50 && pk.copy_gbps < 20000);
    assert_true (pk.fp32_gflops > 500 && pk.fp32_gflops < 1000000);
    assert_true (pk.copy_bytes >= 512.0 * 1048576.0);
    if (strstr (S.devs[0]->name, "H200")) {
        assert_true (pk.copy_gbps > 2000 && pk.copy_gbps < 4800);
        assert_true (pk.fp32_gflops > 10000 && pk.fp32_gflops < 100000);
    }
    uint64_t t0 = ak_clock_mono_ns ();
    assert_int_equal (ak_cuda_device_peaks (S.dev, &again, &err), 0);    /* cached */
    assert_true (ak_clock_mono_ns () - t0 < 1000000);
    assert_true (again.copy_gbps == pk.copy_gbps && again.fp32_gflops == pk.fp32_gflops);
}

static void test_copy (void **state)
{
    (void) state;
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    const size_t n = 16u << 20;                  /* 64 MiB each way */
    char *path = s_build (s_copy);
    ak_kernel_t *k = NULL;
    void *x = NULL, *y = NULL;
    assert_int_equal (S.be->load (S.dev, path, "ak_kernel", &k, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * 4, &x, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * 4, &y, &err), 0);
    assert_int_equal (S.be->fill (S.dev, x, 0x3F, n * 4, &err), 0);
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.dims[0] = (int64_t) n;
    l.ndims = 1;
    l.in[0] = x;
    l.nin = 1;
    l.out[0] = y;
    l.nout = 1;
    l.dtype = AK_DT_FLOAT32;
    l.grid[0] = 4 * S.devs[0]->sm_count; l.grid[1] = l.grid[2] = 1;
    l.block[0] = 256; l.block[1] = l.block[2] = 1;
    assert_int_equal (S.be->launch (S.dev, k, &l, &err), 0);

    ak_profiler_t *prof = NULL;
    int rc = ak_profiler_new ((int) S.devs[0]->index, &prof, &err);
    if (rc)
        fail_msg ("ak_profiler_new: %s (%s)", err.msg, ak_strerror (rc));
    print_message ("range profiler: %u passes\n", ak_profiler_passes (prof));
    for (int rep = 0; rep < 2; rep++) {
        double v[AK_PROFILE_NMETRICS];
        rc = ak_profiler_measure (prof, S.be, S.dev, k, &l, v, &err);
        if (rc)
            fail_msg ("ak_profiler_measure: %s", err.msg);
        for (int i = 0; i < AK_PROFILE_NMETRICS; i++)
            print_message ("  %-52s %14.1f %s\n", ak_profile_metric_names[i], v[i], ak_profile_metric_units[i]);
        double moved = (double) n * 4;
        assert_true (v[AK_PM_TIME] > 1000);      /* 128 MiB take tens of microseconds */
        assert_true (v[AK_PM_DRAM_READ] > 0.9 * moved && v[AK_PM_DRAM_READ] < 1.1 * moved);
        assert_true (v[AK_PM_DRAM_WRITE] > 0.9 * moved && v[AK_PM_DRAM_WRITE] < 1.1 * moved);
        assert_true (v[AK_PM_SM_PCT] >= 0 && v[AK_PM_SM_PCT] <= 100);
        assert_true (v[AK_PM_DRAM_PCT] > 10 && v[AK_PM_DRAM_PCT] <= 100);
        print_message ("  => %.1f GB/s by the accounting (%.1f us)\n", 2 * moved / v[AK_PM_TIME],
                       v[AK_PM_TIME] / 1000);
        ak_cuda_peaks_t pk;
        assert_int_equal (ak_cuda_device_peaks (S.dev, &pk, &err), 0);
        Ak__WorkloadProfile *p = ak_profile_to_pb (NULL, v, 0, 2 * moved, 1);
        ak_profile_apply_peaks (p, pk.copy_gbps, pk.fp32_gflops);
        print_message ("  => %.1f%% of the measured copy bandwidth (%.1f GB/s)\n", p->pct_of_copy_bw,
                       p->measured_copy_gbps);
        assert_true (p->pct_of_copy_bw > 0 && p->pct_of_copy_bw <= 150);
        ak__workload_profile__free_unpacked (p, NULL);
    }
    ak_profiler_destroy (&prof);
    ak_profiler_destroy (&prof);
    assert_null (prof);

    /* Tracing and timing go on once the profiler is gone. */
    if (S.be->sample) {
        ak_sample_t smp;
        assert_int_equal (S.be->sample (S.dev, k, &l, true, &smp, &err), 0);
        print_message ("after profiling: events %.2f us, CUPTI %.2f us\n", smp.event_us, smp.cupti_us);
        assert_true (smp.event_us > 0);
    }
    S.be->release (S.dev, &x);
    S.be->release (S.dev, &y);
    S.be->unload (S.dev, &k);
    free (path);
}

static void test_run_softmax (void **state)
{
    (void) state;
    S_NEED_GPU ();
    ak_err_t err = { 0 };
    ak_spec_t *spec = NULL;
    char *sp = ak_test_src ("kernels/softmax/spec.json");
    if (ak_spec_load (sp, &spec, &err) != 0)
        fail_msg ("%s", err.msg);
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_non_null (bl);
    char *path = s_build (bl->source.text);
    ak_kernel_t *kernel[AK_DT_COUNT] = { NULL };
    assert_int_equal (S.be->load (S.dev, path, "ak_kernel", &kernel[AK_DT_FLOAT32], &err), 0);
    const ak_size_t *big = &spec->sizes[spec->nsizes - 1];
    ak_workload_t w[2];
    memset (w, 0, sizeof w);
    w[0].name = big->name;
    memcpy (w[0].dims, big->dims, sizeof w[0].dims);
    w[0].dtype = AK_DT_FLOAT32;
    w[0].weight = 1;
    w[1] = w[0];
    w[1].dtype = AK_DT_FLOAT16;                  /* no kernel built: skipped */
    ak_profile_ctx_t pc = {
        .spec = spec, .be = S.be, .dev = S.dev, .device = S.devs[0], .kernel = kernel,
        .rule = bl->launch, .workloads = w, .nworkloads = 2, .seed = 42, .role = "baseline",
    };
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    size_t skipped = 0;
    int rc = ak_profile_run (&pc, r, &skipped, &err);
    if (rc)
        fail_msg ("ak_profile_run: %s", err.msg);
    assert_int_equal (skipped, 1);
    assert_int_equal (r->n_profiles, 1);
    const Ak__WorkloadProfile *p = r->profiles[0];
    print_message ("softmax %s: %.2f us, spec %.0f bytes -> %.1f GB/s, %.2f GFLOP/s, DRAM %.1f GB/s, "
                   "%u passes\n", big->name, p->duration_us, p->bytes, p->achieved_gbps,
                   p->achieved_gflops, p->dram_gbps, p->passes);
    assert_true (p->duration_us > 0);
    assert_true (p->bytes > 0 && p->achieved_gbps > 0 && p->achieved_gflops > 0);
    assert_int_equal (p->n_metrics, AK_PROFILE_NMETRICS);
    print_message ("softmax: %.1f%% of copy bandwidth (%.1f GB/s), %.2f%% of FP32 FMA peak (%.1f GFLOP/s)\n",
                   p->pct_of_copy_bw, p->measured_copy_gbps, p->pct_of_fp32_peak, p->measured_fp32_gflops);
    assert_true (p->measured_copy_gbps > 0 && p->measured_fp32_gflops > 0);
    assert_true (p->pct_of_copy_bw > 0 && p->pct_of_copy_bw <= 150);
    assert_true (p->pct_of_fp32_peak > 0 && p->pct_of_fp32_peak <= 100);
    if (r->n_kernels) {
        assert_string_equal (r->kernels[0]->role, "baseline");
        print_message ("kernel record: %s, %u registers, grid %u block %u\n", r->kernels[0]->name,
                       r->kernels[0]->registers, r->kernels[0]->grid[0], r->kernels[0]->block[0]);
    }
    ak__receipt__free_unpacked (r, NULL);
    S.be->unload (S.dev, &kernel[AK_DT_FLOAT32]);
    ak_spec_destroy (&spec);
    free (path);
    free (sp);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_figures),
        cmocka_unit_test (test_pct),
        cmocka_unit_test (test_peaks),
        cmocka_unit_test (test_copy),
        cmocka_unit_test (test_run_softmax),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
