/*  tests/gpu/test_cuda_hopper.c: the Hopper launch features of the CUDA
    backend on a real GPU: a TMA tensor map from a spec end to end
    (kernels/testing/cuda/tma_copy.cu), planted TMA misconfigurations
    refused as invalid_config before any launch, a thread-block cluster
    launch (kernels/testing/cuda/cluster_rank.cu), the register budget of
    a loaded kernel, and the cuBLASLt baseline (its preflight: a clear
    "cuBLASLt not found: tried ..." or a matmul that matches the float64
    product).

    Without a GPU every test skips after "SKIP: no GPU: <reason>" (exit 77,
    "Not Run"); on a device other than compute capability 9.0 the sm_90a
    tests skip with "SKIP: needs sm_90 ...". */
#include "support.h"
#include "gpu.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/backend_cuda.h"
#include "worker/gates.h"
#include "space.h"
#include "spec.h"
#include "spec_cuda.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ak_gpu_fixture_t S;          /* the first CUDA device (gpu.h) */
static bool s_hopper;               /* ... is sm_90 */

static int s_group_setup (void **state)
{
    (void) state;
    int rc = ak_gpu_fixture_open (&S, "cudahopper");
    if (rc || S.skip)
        return rc;
    s_hopper = ak_gpu_fixture_needs (&S, S.devs[0]->cc_major == 9 && S.devs[0]->cc_minor == 0,
                                     "sm_90 for the TMA and cluster tests");
    return 0;
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_gpu_fixture_close (&S);
    return 0;
}

#define S_NEED_GPU() do { if (S.skip) skip (); } while (0)
#define S_NEED_HOPPER() do { if (S.skip || !s_hopper) skip (); } while (0)

/* ------------------------------------------------------------ TMA copy */

/*  The tma_copy entry of a spec, parsed: its tensor map over x, box
    BOX_C x BOX_R as the spec's parameters say. */
static ak_spec_t *s_copy_spec_opt (const char *box_c, bool optional);
static ak_spec_t *s_copy_spec (const char *box_c)
{
    return s_copy_spec_opt (box_c, false);
}

static ak_spec_t *s_copy_spec_opt (const char *box_c, bool optional)
{
    char *text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"copy\", \"keys\": [\"rows\", \"cols\"],"
        " \"dtypes\": [\"float32\"], \"tolerances\": {\"float32\": {\"atol\": 0, \"rtol\": 0}},"
        " \"sizes\": [{\"name\": \"small\", \"size\": {\"rows\": 8, \"cols\": 32}}],"
        " \"stability_size\": \"small\", \"flops\": \"0\", \"bytes\": \"2*rows*cols*b\","
        " \"inputs\": [{\"name\": \"x\", \"count\": \"rows*cols\", \"range\": [-1, 1]}],"
        " \"outputs\": [{\"name\": \"y\", \"count\": \"rows*cols\"}],"
        " \"reference\": {\"name\": \"ref.c\", \"text\": \"/* */\\n\"},"
        " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"/* */\\n\"}}],"
        " \"candidates\": [{\"name\": \"tma\", \"backend\": \"cuda\", \"arch\": \"sm_90a\","
        "   \"source\": {\"name\": \"tma_copy.cu\", \"text\": \"/* */\\n\"},"
        "   \"params\": {\"BOX_C\": [%s], \"BOX_R\": [8]},"
        "   \"launch\": {\"grid\": [\"(cols+BOX_C-1)/BOX_C\", \"(rows+BOX_R-1)/BOX_R\"], \"block\": [\"128\"]},"
        "   \"tensor_maps\": [{\"name\": \"tm_x\", \"buffer\": \"x\", \"dims\": [\"cols\", \"rows\"],"
        "                      \"box\": [\"BOX_C\", \"BOX_R\"]%s}]}]}", box_c,
        optional ? ", \"optional\": true" : "");
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_parse_text (text, strlen (text), "copy.json", &spec, &err) != 0)
        fail_msg ("%s", err.msg);
    free (text);
    return spec;
}

typedef struct {
    int64_t rows, cols;
    float *host;
    void *x, *y;
} s_bufs_t;

static void s_bufs (s_bufs_t *b, int64_t rows, int64_t cols)
{
    ak_err_t err = { 0 };
    b->rows = rows;
    b->cols = cols;
    size_t n = (size_t) (rows * cols);
    b->host = ak_malloc (n * sizeof (float));
    for (size_t i = 0; i < n; i++)
        b->host[i] = (float) i * 0.5f - 7.0f;
    /* 64 bytes more than x needs: room for a misaligned view of it */
    assert_int_equal (S.be->alloc (S.dev, n * sizeof (float) + 64, &b->x, &err), 0);
    assert_int_equal (S.be->alloc (S.dev, n * sizeof (float), &b->y, &err), 0);
    assert_int_equal (S.be->upload (S.dev, b->x, b->host, n * sizeof (float), &err), 0);
    assert_int_equal (S.be->fill (S.dev, b->y, 0xff, n * sizeof (float), &err), 0);   /* NaN poison */
}

static void s_bufs_free (s_bufs_t *b)
{
    S.be->release (S.dev, &b->x);
    S.be->release (S.dev, &b->y);
    free (b->host);
}

static void s_launch_of (const ak_spec_t *spec, const s_bufs_t *b, const int64_t *values, ak_launch_cfg_t *cfg,
                         ak_launch_t *l)
{
    const char *names[] = { "BOX_C", "BOX_R" };
    int64_t dims[AK_MAX_DIMS] = { b->rows, b->cols };
    ak_err_t err = { 0 };
    if (ak_launch_eval (spec, spec->candidates[0].launch, dims, AK_DT_FLOAT32, names, values, 2, cfg, &err))
        fail_msg ("%s", err.msg);
    memset (l, 0, sizeof *l);
    l->dims[0] = b->rows;
    l->dims[1] = b->cols;
    l->ndims = 2;
    l->in[0] = b->x;
    l->nin = 1;
    l->out[0] = b->y;
    l->nout = 1;
    l->dtype = AK_DT_FLOAT32;
    ak_launch_apply (cfg, l);
}

static void test_tma_copy (void **state)
{
    (void) state;
    S_NEED_HOPPER ();
    const char *names[] = { "BOX_C", "BOX_R" };
    int64_t values[] = { 32, 8 };
    ak_kernel_t *k = ak_gpu_load_testing (&S, "tma_copy", "sm_90a", AK_DT_FLOAT32, names, values, 2);
    ak_spec_t *spec = s_copy_spec ("32");
    /* 37 x 68: neither a multiple of the box (edge tiles read the OOB
       fill), rows of 272 bytes (a multiple of 16, as the stride rule asks) */
    s_bufs_t b;
    s_bufs (&b, 37, 68);
    ak_launch_cfg_t cfg;
    ak_launch_t l;
    s_launch_of (spec, &b, values, &cfg, &l);
    assert_int_equal (cfg.ntmaps, 1);
    assert_int_equal (cfg.tmaps[0].strides[0], 68 * 4);
    ak_err_t err = { 0 };
    if (S.be->launch (S.dev, k, &l, &err) != 0)
        fail_msg ("tma_copy: %s", err.msg);
    size_t n = (size_t) (b.rows * b.cols);
    float *got = ak_malloc (n * sizeof (float));
    assert_int_equal (S.be->download (S.dev, got, b.y, n * sizeof (float), &err), 0);
    for (size_t i = 0; i < n; i++)
        if (memcmp (&got[i], &b.host[i], sizeof (float)) != 0)
            fail_msg ("y[%zu] = %g, x = %g", i, got[i], b.host[i]);
    free (got);

    /* the budget of a loaded kernel: registers and shared memory known */
    ak_kernel_budget_t kb;
    assert_non_null (S.be->kernel_budget);
    assert_int_equal (S.be->kernel_budget (k, &kb, &err), 0);
    assert_false (kb.library);
    assert_true (kb.registers > 0);
    assert_true (kb.static_shared >= 8 * 32 * 4);
    assert_true (kb.max_threads >= 128);
    print_message ("tma_copy: %u registers, %u local bytes, %u static shared bytes\n", kb.registers,
                   kb.local_bytes, kb.static_shared);
    s_bufs_free (&b);
    ak_spec_destroy (&spec);
    S.be->unload (S.dev, &k);
}

/*  An optional map on 70 columns (280-byte rows: not a multiple of 16) is
    absent: the kernel's plain path copies, and the result is the same;
    the same map not optional is invalid_config (rule strides). */
static void test_tma_optional_absent (void **state)
{
    (void) state;
    S_NEED_HOPPER ();
    const char *names[] = { "BOX_C", "BOX_R" };
    int64_t values[] = { 32, 8 };
    ak_kernel_t *k = ak_gpu_load_testing (&S, "tma_copy", "sm_90a", AK_DT_FLOAT32, names, values, 2);
    ak_spec_t *strict = s_copy_spec ("32"), *spec = s_copy_spec_opt ("32", true);
    s_bufs_t b;
    s_bufs (&b, 21, 70);
    ak_launch_cfg_t cfg;
    ak_launch_t l;
    int64_t dims[AK_MAX_DIMS] = { 21, 70 };
    ak_err_t err = { 0 };
    assert_int_equal (ak_launch_eval (strict, strict->candidates[0].launch, dims, AK_DT_FLOAT32, names, values, 2,
                                      &cfg, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "rule strides"));
    s_launch_of (spec, &b, values, &cfg, &l);
    assert_true (cfg.tmaps[0].absent);
    if (S.be->launch (S.dev, k, &l, &err) != 0)
        fail_msg ("tma_copy without its map: %s", err.msg);
    size_t n = (size_t) (b.rows * b.cols);
    float *got = ak_malloc (n * sizeof (float));
    assert_int_equal (S.be->download (S.dev, got, b.y, n * sizeof (float), &err), 0);
    assert_memory_equal (got, b.host, n * sizeof (float));
    free (got);
    s_bufs_free (&b);
    ak_spec_destroy (&spec);
    ak_spec_destroy (&strict);
    S.be->unload (S.dev, &k);
}

/*  Planted misconfigurations: each is invalid_config naming its rule, and
    the context still runs the good map afterwards (nothing reached the
    TMA unit). */
static void test_tma_misconfig (void **state)
{
    (void) state;
    S_NEED_HOPPER ();
    const char *names[] = { "BOX_C", "BOX_R" };
    int64_t values[] = { 32, 8 };
    ak_kernel_t *k = ak_gpu_load_testing (&S, "tma_copy", "sm_90a", AK_DT_FLOAT32, names, values, 2);
    s_bufs_t b;
    s_bufs (&b, 16, 64);
    ak_err_t err = { 0 };

    /* a box of 6 floats: 24 bytes, not a multiple of 16 (the launch rule) */
    ak_spec_t *bad = s_copy_spec ("6");
    const char *pn[] = { "BOX_C", "BOX_R" };
    int64_t pv[] = { 6, 8 };
    int64_t dims[AK_MAX_DIMS] = { 16, 64 };
    ak_launch_cfg_t cfg;
    int rc = ak_launch_eval (bad, bad->candidates[0].launch, dims, AK_DT_FLOAT32, pn, pv, 2, &cfg, &err);
    assert_int_equal (rc, AK_EINVAL);
    assert_non_null (strstr (err.msg, "rule box_bytes"));
    ak_spec_destroy (&bad);

    ak_spec_t *spec = s_copy_spec ("32");
    ak_launch_t l;
    s_launch_of (spec, &b, values, &cfg, &l);
    /* a misaligned buffer: x + 4 bytes */
    l.in[0] = (char *) b.x + 4;
    rc = S.be->launch (S.dev, k, &l, &err);
    assert_int_equal (rc, AK_EINVAL);
    assert_non_null (strstr (err.msg, "invalid_config"));
    assert_non_null (strstr (err.msg, "rule align"));
    assert_int_equal (ak_gate_status_for (rc, &err), AK_GATE_INVALID);
    /* a box past 256 rows, planted after the evaluation */
    l.in[0] = b.x;
    cfg.tmaps[0].box[1] = 300;
    rc = S.be->launch (S.dev, k, &l, &err);
    assert_int_equal (rc, AK_EINVAL);
    assert_non_null (strstr (err.msg, "rule box"));
    /* a map reaching past its buffer */
    cfg.tmaps[0].box[1] = 8;
    cfg.tmaps[0].dims[1] = 4096;
    rc = S.be->launch (S.dev, k, &l, &err);
    assert_int_equal (rc, AK_EINVAL);
    assert_non_null (strstr (err.msg, "rule extent"));
    /* the good map still runs */
    cfg.tmaps[0].dims[1] = 16;
    if (S.be->launch (S.dev, k, &l, &err) != 0)
        fail_msg ("after the refusals: %s", err.msg);
    s_bufs_free (&b);
    ak_spec_destroy (&spec);
    S.be->unload (S.dev, &k);
}

/* ------------------------------------------------------------- cluster */

static void test_cluster_launch (void **state)
{
    (void) state;
    S_NEED_HOPPER ();
    ak_kernel_t *k = ak_gpu_load_testing (&S, "cluster_rank", "sm_90a", AK_DT_FLOAT32, NULL, NULL, 0);
    ak_err_t err = { 0 };
    void *y = NULL;
    const int blocks = 8;
    assert_int_equal (S.be->alloc (S.dev, 2 * blocks * sizeof (float), &y, &err), 0);
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.out[0] = y;
    l.nout = 1;
    l.ndims = 1;
    l.dims[0] = 1;
    l.dtype = AK_DT_FLOAT32;
    l.grid[0] = 4;
    l.grid[1] = 2;
    l.grid[2] = 1;
    l.block[0] = 32;
    l.block[1] = l.block[2] = 1;
    l.cluster[0] = 2;
    l.cluster[1] = l.cluster[2] = 1;
    if (S.be->launch (S.dev, k, &l, &err) != 0)
        fail_msg ("cluster launch: %s", err.msg);
    float got[16];
    assert_int_equal (S.be->download (S.dev, got, y, sizeof got, &err), 0);
    for (int b = 0; b < blocks; b++) {
        int bx = b % 4;
        if (got[2 * b] != (float) (bx % 2) || got[2 * b + 1] != 2.0f)
            fail_msg ("block %d: rank %g of %g (want %d of 2)", b, got[2 * b], got[2 * b + 1], bx % 2);
    }
    /* the same kernel without a cluster: every block alone */
    l.cluster[0] = 1;
    if (S.be->launch (S.dev, k, &l, &err) != 0)
        fail_msg ("plain launch: %s", err.msg);
    assert_int_equal (S.be->download (S.dev, got, y, sizeof got, &err), 0);
    for (int b = 0; b < blocks; b++)
        assert_true (got[2 * b] == 0.0f && got[2 * b + 1] == 1.0f);
    S.be->release (S.dev, &y);
    S.be->unload (S.dev, &k);
}

/* ------------------------------------------------------------ cuBLASLt */

/*  The matmul spec's cuBLASLt baseline: built (its marker), loaded (the
    preflight: where cuBLASLt is missing, the one clear error), and run on
    an edge shape and a tile-sized one against the float64 product. */
static void test_cublaslt_baseline (void **state)
{
    (void) state;
    S_NEED_GPU ();
    char *path = ak_test_src ("kernels/matmul/spec.json");
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_load (path, &spec, &err) != 0)
        fail_msg ("%s", err.msg);
    free (path);
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_non_null (bl->library);
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    memset (&req, 0, sizeof req);
    req.source = bl->source.text;
    req.source_len = strlen (bl->source.text);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = S.cache;
    req.device = S.devs[0];
    req.library = true;
    if (S.be->compile (&req, &out, &err) != 0)
        fail_msg ("%s", err.msg);
    ak_kernel_t *k = NULL;
    int rc = S.be->load (S.dev, out.artifact_path, "ak_kernel", &k, &err);
    free (out.artifact_path);
    free (out.log);
    if (rc == AK_EUNAVAIL) {
        /* the preflight failure a user sees: what was tried, no crash */
        assert_non_null (strstr (err.msg, "cuBLASLt not found: tried libcublasLt.so.13"));
        printf ("SKIP: %s\n", err.msg);
        ak_spec_destroy (&spec);
        skip ();
    }
    if (rc)
        fail_msg ("cuBLASLt: %s", err.msg);
    ak_kernel_budget_t kb;
    assert_int_equal (S.be->kernel_budget (k, &kb, &err), 0);
    assert_true (kb.library);

    static const int64_t shapes[][3] = { { 65, 33, 17 }, { 128, 96, 64 } };
    for (size_t s = 0; s < 2; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = ak_malloc ((size_t) (M * K) * sizeof (float)), *b = ak_malloc ((size_t) (K * N) * sizeof (float));
        float *c = ak_malloc ((size_t) (M * N) * sizeof (float));
        for (int64_t i = 0; i < M * K; i++)
            a[i] = (float) ((i * 7) % 13) / 8.0f - 0.75f;
        for (int64_t i = 0; i < K * N; i++)
            b[i] = (float) ((i * 5) % 11) / 8.0f - 0.6f;
        void *da = NULL, *db = NULL, *dc = NULL;
        assert_int_equal (S.be->alloc (S.dev, (size_t) (M * K) * sizeof (float), &da, &err), 0);
        assert_int_equal (S.be->alloc (S.dev, (size_t) (K * N) * sizeof (float), &db, &err), 0);
        assert_int_equal (S.be->alloc (S.dev, (size_t) (M * N) * sizeof (float), &dc, &err), 0);
        assert_int_equal (S.be->upload (S.dev, da, a, (size_t) (M * K) * sizeof (float), &err), 0);
        assert_int_equal (S.be->upload (S.dev, db, b, (size_t) (K * N) * sizeof (float), &err), 0);
        assert_int_equal (S.be->fill (S.dev, dc, 0xff, (size_t) (M * N) * sizeof (float), &err), 0);
        ak_launch_t l;
        memset (&l, 0, sizeof l);
        l.dims[0] = M;
        l.dims[1] = N;
        l.dims[2] = K;
        l.ndims = 3;
        l.in[0] = da;
        l.in[1] = db;
        l.nin = 2;
        l.out[0] = dc;
        l.nout = 1;
        l.dtype = AK_DT_FLOAT32;
        if (S.be->launch (S.dev, k, &l, &err) != 0)
            fail_msg ("cuBLASLt %lld x %lld x %lld: %s", (long long) M, (long long) N, (long long) K, err.msg);
        assert_int_equal (S.be->download (S.dev, c, dc, (size_t) (M * N) * sizeof (float), &err), 0);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double want = 0;
                for (int64_t q = 0; q < K; q++)
                    want += (double) a[i * K + q] * (double) b[q * N + j];
                double got = c[i * N + j];
                if (!(fabs (got - want) <= 1e-4 + 1e-5 * fabs (want)))
                    fail_msg ("C[%lld][%lld] = %.9g, want %.9g (%lld x %lld x %lld)", (long long) i, (long long) j,
                              got, want, (long long) M, (long long) N, (long long) K);
            }
        /* timed by the same sample path as a kernel: events only */
        ak_sample_t smp;
        if (S.be->sample (S.dev, k, &l, true, &smp, &err) != 0)
            fail_msg ("sample: %s", err.msg);
        assert_true (smp.event_us > 0);
        assert_true (smp.cupti_us < 0);
        S.be->release (S.dev, &da);
        S.be->release (S.dev, &db);
        S.be->release (S.dev, &dc);
        free (a);
        free (b);
        free (c);
    }
    S.be->unload (S.dev, &k);
    ak_spec_destroy (&spec);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_tma_copy),
        cmocka_unit_test (test_tma_optional_absent),
        cmocka_unit_test (test_tma_misconfig),
        cmocka_unit_test (test_cluster_launch),
        cmocka_unit_test (test_cublaslt_baseline),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
