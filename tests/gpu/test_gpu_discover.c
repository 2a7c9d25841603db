/*  tests/gpu/test_gpu_discover.c: `akctl discover` on a real PyTorch
    program on the GPU (issue 18): ops/discover/llama_demo.py, a randomly
    initialised Llama-style decoder (hidden 2048, 8 layers, 16 heads, vocab
    32000, bf16), prefill of 1x512 tokens and 8 decode steps per repeat,
    under ops/discover/torch_nvtx.py, the first repeat skipped as warm-up.

    It must find the shapes the model really ran: the q/k/v/o projections
    as matmul 512x2048x2048 bf16 (prefill) and 1x2048x2048 (decode), the
    RMSNorms as rmsnorm 512x2048 bf16, causal attention 1x16x512x128 at
    prefill; most GPU time under a named range.  Then the emitted batch's
    target must be the class the CUDA worker of this GPU announces, and the
    batch (its ops and corpora as emitted, a short timing policy so the
    test ends in minutes) must complete on that worker.

    Where there is no GPU (no CUDA backend, driver or device) the test
    prints "SKIP: no GPU: <reason>"; a GPU without python3, torch (CUDA) or
    transformers is a failure, not a skip.  AKD_SAVE_TRACE=PATH copies the
    recorded trace there (a fixture for tests/data/discover/, as NAME.akd).

    The trace is the binary one, complete (not partial, nothing dropped),
    and its kernels were placed by their launch records (CUPTI's API
    activity, matched to the launching thread by time).  The launcher's
    --ranges catalog mode must find the same shapes. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "akd_format.h"
#include "attribute.h"
#include "gpu.h"
#include "trace.h"
#include "util.h"

#define S_START_MS 60000
#define S_BATCH_MS 1500000

static ak_test_cluster_t s_c;

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

static const json_t *s_workload (const json_t *hot, const char *op, const char *dtype, const char *const keys[],
                                 const int64_t values[], int n)
{
    size_t i;
    json_t *w;
    json_array_foreach (json_object_get (hot, "workloads"), i, w) {
        if (strcmp (json_string_value (json_object_get (w, "op")), op) != 0
            || strcmp (json_string_value (json_object_get (w, "dtype")), dtype) != 0)
            continue;
        json_t *size = json_object_get (w, "size");
        bool same = true;
        for (int k = 0; k < n && same; k++)
            same = json_integer_value (json_object_get (size, keys[k])) == values[k];
        if (same)
            return w;
    }
    return NULL;
}

static void s_must_find (const json_t *hot, const char *op, const char *const keys[], const int64_t values[], int n)
{
    if (!s_workload (hot, op, "bfloat16", keys, values, n)) {
        char *text = json_dumps (json_object_get (hot, "workloads"), JSON_INDENT (1));
        fail_msg ("no %s workload with the model's shape (%lld, %lld, ...) in:\n%s", op, (long long) values[0],
                  (long long) values[1], text);
    }
}

static void test_discover_llama (void **state)
{
    (void) state;
    ak_gpu_fixture_t f;
    memset (&f, 0, sizeof f);
    assert_int_equal (ak_gpu_fixture_open (&f, "discover"), 0);
    bool skip_it = f.skip;
    ak_gpu_fixture_close (&f);
    if (skip_it)
        skip ();

    char *out = NULL;
    int code = ak_test_run ("python3 -c 'import torch, transformers; assert torch.cuda.is_available(), "
                            "\"torch has no CUDA\"; print(torch.__version__, transformers.__version__)' 2>&1", &out);
    if (code != 0)
        fail_msg ("a GPU is here but python3 with torch (CUDA) and transformers is not: %s", out ? out : "");
    print_message ("torch, transformers: %s", out);
    free (out);

    ak_test_cluster_init (&s_c, "gpu-discover", true);
    char *akctl = ak_test_bin ("akctl"), *launcher = ak_test_src ("ops/discover/torch_nvtx.py"),
         *demo = ak_test_src ("ops/discover/llama_demo.py");
    code = ak_test_runf (&out, "'%s' discover --out '%s/d' --step-range step --warmup-steps 9 --steps 9 -- "
                         "python3 '%s' '%s' --repeats 2 2>&1", akctl, s_c.dir, launcher, demo);
    if (code != 0)
        fail_msg ("akctl discover: exit %d:\n%s", code, out ? out : "");
    free (out);
    const char *save = getenv ("AKD_SAVE_TRACE");
    if (save && *save) {
        ak_test_runf (NULL, "cp '%s/d/trace.akd' '%s'", s_c.dir, save);
        print_message ("trace saved as %s\n", save);
    }

    char *hot_path = ak_sprintf ("%s/d/hotspots.json", s_c.dir);
    json_error_t je;
    json_t *hot = json_load_file (hot_path, 0, &je);
    if (!hot)
        fail_msg ("%s: %s", hot_path, je.text);
    json_t *totals = json_object_get (hot, "totals");
    assert_int_equal (json_integer_value (json_object_get (totals, "steps")), 9);
    double named = json_real_value (json_object_get (totals, "pct_gpu_time_in_named_range"));
    double mapped = json_real_value (json_object_get (totals, "pct_gpu_time_mapped_to_catalog"));
    print_message ("GPU us/step %.1f, named %.1f%%, catalog %.1f%%\n",
                   json_real_value (json_object_get (totals, "gpu_us_per_step")), named, mapped);
    assert_true (named >= 90.0);
    assert_true (mapped > 0.0);
    static const char *const mnk[] = { "M", "N", "K" };
    s_must_find (hot, "matmul", mnk, (int64_t[]) { 512, 2048, 2048 }, 3);
    s_must_find (hot, "matmul", mnk, (int64_t[]) { 1, 2048, 2048 }, 3);
    static const char *const rms[] = { "M", "N" };
    s_must_find (hot, "rmsnorm", rms, (int64_t[]) { 512, 2048 }, 2);
    /* causal (mask 2) when the launcher's sdpa range saw is_causal; the
       plain aten range carries no flag (mask 1): the shape must be there */
    static const char *const att[] = { "B", "H", "S", "D", "mask" };
    if (!s_workload (hot, "flash_attention", "bfloat16", att, (int64_t[]) { 1, 16, 512, 128, 2 }, 5)) {
        print_message ("NOTE: attention 1x16x512x128 not seen as causal (is_causal did not reach torch_nvtx::sdpa)\n");
        s_must_find (hot, "flash_attention", att, (int64_t[]) { 1, 16, 512, 128, 1 }, 5);
    }

    /* the binary trace: complete, and every kernel of the window found its
       launch (CUPTI's API record, its thread's ranges by time) */
    char *trace_path = ak_sprintf ("%s/d/trace.akd", s_c.dir);
    akd_trace_t *trace = NULL;
    akd_attr_t *attr = NULL;
    ak_err_t err = { 0 };
    if (akd_trace_load (trace_path, &trace, &err) != 0)
        fail_msg ("%s", err.msg);
    assert_int_equal (trace->version, AKD_BIN_VERSION);     /* what the library writes now */
    assert_int_equal (trace->dropped, 0);
    assert_false (akd_trace_partial (trace));
    assert_int_equal (akd_attribute (trace, &attr, &err), 0);
    print_message ("trace: %zu events, %zu kernels in the window, %zu without a launch record\n", trace->nevents,
                   attr->nkernels, attr->no_launch);
    assert_true (attr->nkernels > 0 && attr->no_launch * 100 <= attr->nkernels);
    akd_attr_destroy (&attr);
    akd_trace_destroy (&trace);
    free (trace_path);

    /* --ranges catalog: no emit_nvtx, the same shapes */
    code = ak_test_runf (&out, "'%s' discover --out '%s/c' --step-range step --warmup-steps 9 --steps 9 -- "
                         "python3 '%s' --ranges catalog '%s' --repeats 2 2>&1", akctl, s_c.dir, launcher, demo);
    if (code != 0)
        fail_msg ("akctl discover (--ranges catalog): exit %d:\n%s", code, out ? out : "");
    free (out);
    char *cat_path = ak_sprintf ("%s/c/hotspots.json", s_c.dir);
    json_t *cat = json_load_file (cat_path, 0, &je);
    if (!cat)
        fail_msg ("%s: %s", cat_path, je.text);
    s_must_find (cat, "matmul", mnk, (int64_t[]) { 512, 2048, 2048 }, 3);
    s_must_find (cat, "matmul", mnk, (int64_t[]) { 1, 2048, 2048 }, 3);
    s_must_find (cat, "rmsnorm", rms, (int64_t[]) { 512, 2048 }, 2);
    if (!s_workload (cat, "flash_attention", "bfloat16", att, (int64_t[]) { 1, 16, 512, 128, 2 }, 5))
        s_must_find (cat, "flash_attention", att, (int64_t[]) { 1, 16, 512, 128, 1 }, 5);
    json_decref (cat);
    free (cat_path);

    /* the batch's target is the class the worker announces */
    const char *wargs[] = { "--backend", "cuda", NULL };
    ak_test_cluster_coord (&s_c, NULL, NULL, NULL, S_START_MS);
    ak_test_cluster_workers (&s_c, "gpu-d", 1, wargs, S_START_MS);
    json_t *workers = ak_test_akctl_json (&s_c, "workers");
    char *batch_path = ak_sprintf ("%s/d/batch.json", s_c.dir);
    json_t *batch = json_load_file (batch_path, 0, &je);
    if (!batch)
        fail_msg ("%s: %s", batch_path, je.text);
    const char *target = json_string_value (json_array_get (json_object_get (batch, "targets"), 0));
    char *announced = json_dumps (workers, 0);
    if (!target || !strstr (announced, target))
        fail_msg ("batch target %s is not a class the worker announces: %s", target ? target : "(none)", announced);
    free (announced);
    json_decref (workers);

    /* ops and corpora as emitted; a short policy so the test ends */
    json_object_set_new (batch, "policy", json_pack ("{s:i, s:i, s:i, s:i, s:b, s:{s:i, s:i}}", "warmup", 1,
                                                     "min_samples", 3, "max_samples", 5, "max_time_ms", 50,
                                                     "confirm", 0, "search", "budget", 4, "keep", 2));
    char *quick = ak_sprintf ("%s/d/quick.json", s_c.dir);
    assert_int_equal (json_dump_file (batch, quick, JSON_INDENT (2)), 0);
    char *id = ak_test_submit (&s_c, "submit '%s'", quick);
    json_t *st = ak_test_batch_wait (&s_c, id, S_BATCH_MS);
    assert_string_equal (json_string_value (json_object_get (st, "state")), "complete");
    json_decref (st);
    json_decref (batch);
    json_decref (hot);
    free (id);
    free (quick);
    free (batch_path);
    free (hot_path);
    free (akctl);
    free (launcher);
    free (demo);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_discover_llama, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
