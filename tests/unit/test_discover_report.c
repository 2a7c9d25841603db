/*  tests/unit/test_discover_report.c: ranking, the Amdahl arithmetic, the
    catalog workloads and the writers of akctl discover
    (discover/hotspots.c, discover/hotspots_write.c).

    Every figure is worked by hand from tests/data/discover/two_steps.jsonl
    (see test_discover_trace.c for its story): 81 us of GPU time over two
    steps of 100 us; matmul 512x6144x2048 bf16 gets the eager mm under
    module::Linear (20 us), the bare mm (20 us) and the graph-replayed addmm
    (4 us); rmsnorm the pow+mul under module::LlamaRMSNorm (4 us); two
    softmax shapes (10 and 5 us); the batched bmm (8 us), gelu (6 us), the
    uncaptured graph node (2 us) and two kernels outside any range (2 us)
    are unmapped.  The batch written must load as a manifest whose corpora
    hold exactly those workloads with their shares as weights. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "hotspots.h"
#include "manifest.h"
#include "spec.h"
#include "trace.h"
#include "util.h"

typedef struct {
    akd_trace_t    *t;
    akd_attr_t     *a;
    akd_hotspots_t *h;
} s_fx_t;

static int s_setup (void **state)
{
    s_fx_t *f = ak_calloc (1, sizeof *f);
    char *path = ak_test_src ("tests/data/discover/two_steps.jsonl");
    ak_err_t err = { 0 };
    if (akd_trace_load (path, &f->t, &err) != 0)
        fail_msg ("%s", err.msg);
    free (path);
    assert_int_equal (akd_attribute (f->t, &f->a, &err), 0);
    f->h = akd_hotspots_build (f->a);
    *state = f;
    return 0;
}

static int s_teardown (void **state)
{
    s_fx_t *f = *state;
    akd_hotspots_destroy (&f->h);
    akd_attr_destroy (&f->a);
    akd_trace_destroy (&f->t);
    free (f);
    return 0;
}

static const akd_row_t *s_find (const akd_row_t *rows, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp (rows[i].key, key) == 0)
            return &rows[i];
    fail_msg ("no row '%s'", key);
    return NULL;
}

static const akd_workload_t *s_workload (const akd_hotspots_t *h, const char *name)
{
    for (size_t i = 0; i < h->nworkloads; i++)
        if (strcmp (h->workloads[i].name, name) == 0)
            return &h->workloads[i];
    fail_msg ("no workload '%s'", name);
    return NULL;
}

static void test_amdahl (void **state)
{
    (void) state;
    assert_true (akd_amdahl (100, 30, 0) == 70);
    assert_true (akd_amdahl (100, 30, 2) == 85);
    assert_true (akd_amdahl (100, 30, 1) == 100);
    assert_true (akd_amdahl (100, 150, 0) == 0);         /* never below zero */
    assert_true (akd_amdahl (100, 30, INFINITY) == 70);
    assert_true (akd_amdahl (0, 30, 2) == 0);
    assert_true (akd_amdahl (100, NAN, 2) == 100);
}

static void test_totals (void **state)
{
    s_fx_t *f = *state;
    const akd_hotspots_t *h = f->h;
    assert_int_equal (h->steps, 2);
    assert_true (h->step_ns == 100000);
    assert_true (h->gpu_ns == 81000);
    assert_true (h->catalog_ns == 63000);
    assert_true (h->named_ns == 77000);
    /* nothing dropped: workloads + unmapped = all */
    double sum = 0;
    for (size_t i = 0; i < h->nworkloads; i++)
        sum += h->workloads[i].gpu_ns;
    for (size_t i = 0; i < h->nunmapped; i++)
        sum += h->unmapped[i].gpu_ns;
    assert_true (sum == h->gpu_ns);
}

static void test_ranking (void **state)
{
    s_fx_t *f = *state;
    const akd_hotspots_t *h = f->h;
    /* ranked by time, descending */
    for (size_t i = 1; i < h->nranges; i++)
        assert_true (h->ranges[i - 1].gpu_ns >= h->ranges[i].gpu_ns);
    for (size_t i = 1; i < h->nkernels; i++)
        assert_true (h->kernels[i - 1].gpu_ns >= h->kernels[i].gpu_ns);
    /* the step range, inclusive: thread 100's nine launches, 74 us,
       four of them under 5 us */
    const akd_row_t *step = s_find (h->ranges, h->nranges, "step");
    assert_true (step->gpu_ns == 74000);
    assert_int_equal (step->launches, 9);
    assert_int_equal (step->short_launches, 4);
    assert_true (step->self_ns == 0);
    assert_ptr_equal (step, &h->ranges[0]);
    /* a nested range counts its inner kernels; its self time is its own */
    const akd_row_t *rms = s_find (h->ranges, h->nranges,
                                   "module::LlamaRMSNorm, sizes = [[1, 512, 2048]], dtypes = [bfloat16]");
    assert_true (rms->gpu_ns == 4000 && rms->self_ns == 0 && rms->launches == 2);
    const akd_row_t *pow = s_find (h->ranges, h->nranges, "aten::pow, sizes = [[1, 512, 2048], []]");
    assert_true (pow->self_ns == 1000);
    /* graph-replayed ranges are their own rows */
    const akd_row_t *g = s_find (h->ranges, h->nranges, "capture [graph]");
    assert_true (g->gpu_ns == 4000);
    s_find (h->ranges, h->nranges, "[graph replay 8]");
    /* kernels: the eager GEMM and its graph replay are separate rows */
    const akd_row_t *gemm = s_find (h->kernels, h->nkernels, "sm90_xmma_gemm_bf16bf16_bf16f32");
    assert_true (gemm->gpu_ns == 40000 && gemm->launches == 2 && !gemm->graph);
    const akd_row_t *ggemm = s_find (h->kernels, h->nkernels, "sm90_xmma_gemm_bf16bf16_bf16f32 [graph]");
    assert_true (ggemm->gpu_ns == 4000 && ggemm->graph);
    const akd_row_t *pk = s_find (h->kernels, h->nkernels, "_Z10pow_kernelPfi");
    /* demangled where the C++ runtime is there */
    assert_true (strcmp (pk->detail, "pow_kernel(float*, int)") == 0 || strcmp (pk->detail, "_Z10pow_kernelPfi") == 0);
}

static void test_workloads (void **state)
{
    s_fx_t *f = *state;
    const akd_hotspots_t *h = f->h;
    assert_int_equal (h->nworkloads, 4);
    const akd_workload_t *mm = s_workload (h, "matmul_512x6144x2048_bf16");
    assert_ptr_equal (mm, &h->workloads[0]);
    assert_true (mm->gpu_ns == 44000);
    assert_int_equal (mm->launches, 3);
    assert_string_equal (mm->map.dtype, "bfloat16");
    const akd_workload_t *rms = s_workload (h, "rmsnorm_512x2048_bf16");
    assert_true (rms->gpu_ns == 4000);
    assert_string_equal (rms->map.keys[0], "M");
    assert_true (s_workload (h, "softmax_4096x32000_bf16")->gpu_ns == 10000);
    assert_true (s_workload (h, "softmax_64x32000_fp16")->gpu_ns == 5000);
    /* unmapped, with reasons */
    const akd_row_t *bmm = s_find (h->unmapped, h->nunmapped,
                                   "aten::bmm, sizes = [[16, 512, 128], [16, 128, 512]], dtypes = [bfloat16, bfloat16]");
    assert_true (bmm->gpu_ns == 8000);
    assert_non_null (strstr (bmm->detail, "batched"));
    const akd_row_t *gelu = s_find (h->unmapped, h->nunmapped, "aten::gelu, sizes = [[1, 512, 8192]], dtypes = [bfloat16]");
    assert_string_equal (gelu->detail, "no catalog operator");
    assert_true (s_find (h->unmapped, h->nunmapped, "[graph replay 8]")->gpu_ns == 2000);
    const akd_row_t *none = s_find (h->unmapped, h->nunmapped, "[no range]");
    assert_true (none->gpu_ns == 2000 && none->launches == 2);
}

/* text (JSON lines) read as the trace `name` into *t_p (the test fails if
   it is not one), and attributed. */
static akd_attr_t *s_attr_of (const char *text, const char *name, akd_trace_t **t_p)
{
    akd_attr_t *a = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_trace_parse (text, strlen (text), name, t_p, &err), 0);
    assert_int_equal (akd_attribute (*t_p, &a, &err), 0);
    return a;
}

/* A mapped range with no dtype anywhere on its stack is unmapped, saying so. */
static void test_dtype_unknown (void **state)
{
    (void) state;
    const char *text =
        "{\"t\":\"header\",\"version\":1}\n"
        "{\"t\":\"push\",\"seq\":1,\"tid\":1,\"id\":1,\"name\":\"aten::mm, seq = 1, sizes = [[8, 16], [16, 32]]\"}\n"
        "{\"t\":\"launch\",\"seq\":2,\"tid\":1,\"corr\":1}\n"
        "{\"t\":\"pop\",\"seq\":3,\"tid\":1}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"start\":10,\"end\":20,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"end\"}\n";
    akd_trace_t *t = NULL;
    akd_attr_t *a = s_attr_of (text, "d.jsonl", &t);
    ak_err_t err = { 0 };
    akd_hotspots_t *h = akd_hotspots_build (a);
    assert_int_equal (h->nworkloads, 0);
    assert_int_equal (h->nunmapped, 1);
    assert_non_null (strstr (h->unmapped[0].detail, "no dtype"));
    /* no device, driver or NVRTC in the trace: no class */
    assert_null (akd_device_class (t, &err));
    akd_hotspots_destroy (&h);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

/* The mean number of kernels running at once, per device, worked by hand:
   device 0 runs four kernels over [10, 20] and one over [30, 40] (50 ns of
   kernels in 20 ns of time: 2.5); device 1 [0, 100], [50, 150] and [200,
   210] (210 in 160: 1.3125).  The most is device 0's. */
static void test_kernels_at_once (void **state)
{
    (void) state;
    const char *text =
        "{\"t\":\"header\",\"version\":1}\n"
        "{\"t\":\"launch\",\"seq\":1,\"tid\":1,\"corr\":1}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":1,\"start\":200,\"end\":210,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":0,\"start\":10,\"end\":20,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":0,\"start\":30,\"end\":40,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":0,\"start\":10,\"end\":20,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":1,\"start\":0,\"end\":100,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":0,\"start\":10,\"end\":20,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":1,\"start\":50,\"end\":150,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"dev\":0,\"start\":10,\"end\":20,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k\"}\n"
        "{\"t\":\"end\"}\n";
    akd_trace_t *t = NULL;
    akd_attr_t *a = s_attr_of (text, "o.jsonl", &t);
    assert_int_equal (a->nkernels, 8);
    assert_true (fabs (a->overlap - 2.5) < 1e-12);
    assert_int_equal (a->overlap_dev, 0);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

static void test_device_class (void **state)
{
    s_fx_t *f = *state;
    ak_err_t err = { 0 };
    char *cls = akd_device_class (f->t, &err);
    assert_string_equal (cls, "NVIDIA_H200/sm_90/drv580/nvrtc13.0");
    free (cls);
}

/* On a host with several GPUs, the class is that of the GPU the kernels ran on. */
static void test_device_class_of_kernels (void **state)
{
    (void) state;
    const char *text =
        "{\"t\":\"header\",\"version\":1,\"driver\":\"580.65.06\",\"nvrtc\":\"13.0\"}\n"
        "{\"t\":\"device\",\"id\":0,\"name\":\"NVIDIA A100-SXM4-80GB\",\"cc\":[8,0],\"sms\":108}\n"
        "{\"t\":\"device\",\"id\":1,\"name\":\"NVIDIA H200\",\"cc\":[9,0],\"sms\":132}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"start\":10,\"end\":20,\"dev\":1,\"grid\":[1,1,1],\"block\":[1,1,1],"
        "\"name\":\"k\"}\n";
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (akd_trace_parse (text, strlen (text), "m.jsonl", &t, &err), 0);
    char *cls = akd_device_class (t, &err);
    assert_string_equal (cls, "NVIDIA_H200/sm_90/drv580/nvrtc13.0");
    free (cls);
    akd_trace_destroy (&t);
}

static json_t *s_read_json (const char *dir, const char *name)
{
    char *path = ak_path_join (dir, name);
    json_error_t je;
    json_t *j = json_load_file (path, 0, &je);
    if (!j)
        fail_msg ("%s: %s", path, je.text);
    free (path);
    return j;
}

static void test_writer (void **state)
{
    s_fx_t *f = *state;
    char *dir = ak_test_tmpdir ("discover-write");
    char *catalog = ak_test_src ("kernels");
    ak_err_t err = { 0 };
    const char *cls = "NVIDIA_H200/sm_90/drv580/nvrtc13.0";
    if (akd_hotspots_write (f->h, f->t, dir, cls, catalog, &err) != 0)
        fail_msg ("%s", err.msg);

    /* the batch loads as a manifest, with the corpora's cases as workloads */
    char *batch = ak_path_join (dir, "batch.json");
    ak_manifest_t *m = NULL;
    if (ak_manifest_load (batch, &m, &err) != 0)
        fail_msg ("%s", err.msg);
    assert_int_equal (m->ntargets, 1);
    assert_string_equal (m->targets[0], cls);
    assert_int_equal (m->nops, 3);
    double total = 0;
    int seen = 0;
    for (size_t i = 0; i < m->nops; i++) {
        const ak_manifest_op_t *op = &m->ops[i];
        for (size_t w = 0; w < op->nworkloads; w++) {
            const ak_workload_t *wl = &op->workloads[w];
            total += wl->weight;
            seen++;
            if (strcmp (wl->name, "matmul_512x6144x2048_bf16") == 0) {
                assert_string_equal (op->spec->name, "matmul");
                assert_int_equal (wl->dims[0], 512);
                assert_int_equal (wl->dims[1], 6144);
                assert_int_equal (wl->dims[2], 2048);
                assert_int_equal (wl->dtype, AK_DT_BFLOAT16);
                assert_true (fabs (wl->weight - 100.0 * 44000 / 81000) < 1e-3);
            }
            if (strcmp (wl->name, "softmax_64x32000_fp16") == 0)
                assert_int_equal (wl->dtype, AK_DT_FLOAT16);
        }
    }
    assert_int_equal (seen, 4);
    assert_true (fabs (total - 100.0 * 63000 / 81000) < 1e-2);
    ak_manifest_destroy (&m);

    /* hotspots.json carries the same figures */
    json_t *j = s_read_json (dir, "hotspots.json");
    assert_false (json_is_true (json_object_get (j, "partial")));
    json_t *totals = json_object_get (j, "totals");
    assert_true (json_real_value (json_object_get (totals, "gpu_us_per_step")) == 40.5);
    assert_true (fabs (json_real_value (json_object_get (totals, "pct_gpu_time_mapped_to_catalog")) - 77.78) < 1e-9);
    /* a kernel row carries its first launch's configuration */
    json_t *k0 = json_array_get (json_object_get (j, "kernels"), 0);
    assert_string_equal (json_string_value (json_object_get (k0, "name")), "sm90_xmma_gemm_bf16bf16_bf16f32");
    json_t *fl = json_object_get (k0, "first_launch");
    assert_int_equal (json_integer_value (json_array_get (json_object_get (fl, "grid"), 0)), 128);
    assert_int_equal (json_integer_value (json_array_get (json_object_get (fl, "block"), 0)), 256);
    assert_int_equal (json_integer_value (json_object_get (fl, "registers")), 32);
    assert_int_equal (json_integer_value (json_object_get (fl, "smem_dynamic")), 4096);
    json_t *step = json_array_get (json_object_get (j, "ranges"), 0);
    assert_string_equal (json_string_value (json_object_get (step, "name")), "step");
    assert_true (json_real_value (json_object_get (step, "gpu_us_per_step")) == 37.0);
    assert_true (json_real_value (json_object_get (step, "step_us_if_zero")) == 63.0);
    assert_true (json_real_value (json_object_get (step, "step_us_if_2x")) == 81.5);
    assert_int_equal (json_array_size (json_object_get (j, "unmapped")), 4);
    json_decref (j);
    char *md = ak_path_join (dir, "hotspots.md");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal (ak_file_read (md, 1 << 20, &text, &len, &err), 0);
    assert_non_null (strstr (text, "| matmul | matmul_512x6144x2048_bf16 | bfloat16 | 22.0 | 54.3% | 3 |"));
    assert_non_null (strstr (text, "batched GEMM"));
    free (text);
    free (md);
    free (batch);
    ak_test_rmtree (dir);
    free (dir);
    free (catalog);
}

/* Nothing maps: hotspots but no batch, never an empty one. */
static void test_no_empty_batch (void **state)
{
    (void) state;
    const char *text =
        "{\"t\":\"header\",\"version\":1}\n"
        "{\"t\":\"push\",\"seq\":1,\"tid\":1,\"id\":1,\"name\":\"my_kernel_range\"}\n"
        "{\"t\":\"launch\",\"seq\":2,\"tid\":1,\"corr\":1}\n"
        "{\"t\":\"pop\",\"seq\":3,\"tid\":1}\n"
        "{\"t\":\"kernel\",\"corr\":1,\"start\":10,\"end\":20,\"grid\":[1,1,1],\"block\":[1,1,1],\"name\":\"k|x\"}\n";
    akd_trace_t *t = NULL;
    akd_attr_t *a = s_attr_of (text, "n.jsonl", &t);
    ak_err_t err = { 0 };
    assert_true (akd_trace_partial (t));          /* no end line */
    akd_hotspots_t *h = akd_hotspots_build (a);
    char *dir = ak_test_tmpdir ("discover-nobatch");
    assert_int_equal (akd_hotspots_write (h, t, dir, NULL, "/nonexistent", &err), 0);
    char *batch = ak_path_join (dir, "batch.json");
    assert_int_not_equal (access (batch, F_OK), 0);
    json_t *j = s_read_json (dir, "hotspots.json");
    assert_true (json_is_true (json_object_get (j, "partial")));
    json_decref (j);
    free (batch);
    ak_test_rmtree (dir);
    free (dir);
    akd_hotspots_destroy (&h);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
}

/* Every trace in tests/data/discover/ (hand-made, and the ones recorded on a
   GPU: AKD_SAVE_TRACE of test_gpu_discover; .jsonl of version 1, .akd of
   version 2) holds the invariants: it reads,
   every kernel of the window is accounted for once (workloads + unmapped =
   all), and a batch written from it loads. */
static void test_every_fixture (void **state)
{
    (void) state;
    char *dir = ak_test_src ("tests/data/discover");
    char *catalog = ak_test_src ("kernels");
    DIR *d = opendir (dir);
    assert_non_null (d);
    int checked = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        size_t n = strlen (e->d_name);
        bool jsonl = n >= 7 && strcmp (e->d_name + n - 6, ".jsonl") == 0;
        bool akd = n >= 5 && strcmp (e->d_name + n - 4, ".akd") == 0;     /* binary, version 2 */
        if (!jsonl && !akd)
            continue;
        char *path = ak_path_join (dir, e->d_name);
        akd_trace_t *t = NULL;
        akd_attr_t *a = NULL;
        ak_err_t err = { 0 };
        if (akd_trace_load (path, &t, &err) != 0)
            fail_msg ("%s", err.msg);
        assert_int_equal (akd_attribute (t, &a, &err), 0);
        akd_hotspots_t *h = akd_hotspots_build (a);
        double sum = 0;
        long launches = 0;
        for (size_t i = 0; i < h->nworkloads; i++) {
            sum += h->workloads[i].gpu_ns;
            launches += h->workloads[i].launches;
        }
        for (size_t i = 0; i < h->nunmapped; i++) {
            sum += h->unmapped[i].gpu_ns;
            launches += h->unmapped[i].launches;
        }
        if (sum != h->gpu_ns || launches != (long) a->nkernels)
            fail_msg ("%s: workloads + unmapped = %.0f ns in %ld launches, total %.0f ns in %zu", path, sum,
                      launches, h->gpu_ns, a->nkernels);
        if (h->nworkloads) {
            char *out = ak_test_tmpdir ("discover-fixture");
            if (akd_hotspots_write (h, t, out, "NVIDIA_H200/sm_90/drv580/nvrtc13.0", catalog, &err) != 0)
                fail_msg ("%s: %s", path, err.msg);
            char *batch = ak_path_join (out, "batch.json");
            ak_manifest_t *m = NULL;
            if (ak_manifest_load (batch, &m, &err) != 0)
                fail_msg ("%s: %s", path, err.msg);
            ak_manifest_destroy (&m);
            free (batch);
            ak_test_rmtree (out);
            free (out);
        }
        /* every fixture, the one recorded on the H200 included, has kernel
           records that can be true */
        if (!(a->overlap <= AKD_MAX_CONCURRENT_KERNELS))
            fail_msg ("%s: %.1f kernels at once on device %u", path, a->overlap, a->overlap_dev);
        print_message ("%s: %zu kernels, %zu workloads, %zu unmapped rows, %.2f kernels at once at most\n",
                       e->d_name, a->nkernels, h->nworkloads, h->nunmapped, a->overlap);
        akd_hotspots_destroy (&h);
        akd_attr_destroy (&a);
        akd_trace_destroy (&t);
        free (path);
        checked++;
    }
    closedir (d);
    assert_true (checked >= 3);
    free (dir);
    free (catalog);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_amdahl),
        cmocka_unit_test_setup_teardown (test_totals, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_ranking, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_workloads, s_setup, s_teardown),
        cmocka_unit_test (test_dtype_unknown),
        cmocka_unit_test (test_kernels_at_once),
        cmocka_unit_test_setup_teardown (test_device_class, s_setup, s_teardown),
        cmocka_unit_test (test_device_class_of_kernels),
        cmocka_unit_test_setup_teardown (test_writer, s_setup, s_teardown),
        cmocka_unit_test (test_no_empty_batch),
        cmocka_unit_test (test_every_fixture),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
