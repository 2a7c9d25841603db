/*  tests/unit/test_cuda_catalog.c: the CUDA kernels of the catalog
    (kernels/<op>/cuda/ of every operator, or those in $AK_CATALOG_OPS;
    kernels/testing/cuda/) without a GPU.

    - Every launch rule evaluates, for every configuration of every cuda
      candidate (and the baseline), every size and edge size and every
      declared dtype, to a configuration an sm_90 device takes: at most 1024
      threads a block, block.z <= 64, grid.y/z <= 65535, dynamic shared
      memory <= 227 KiB (sm_90's opt-in limit; the backend opts in above
      48 KiB, as the tensor-core matmul's pipeline stages need).
    - NVRTC compiles (sm_90, where libnvrtc loads; no driver needed) the
      device reference (float64, -DAK_REFERENCE) where the spec has one, the
      baseline for every declared dtype, the first configuration of every
      candidate for every declared dtype, and its last configuration for
      the spec's pivot dtype (float16 where declared) and for a dtype of
      another element size where the source reads the element size
      (s_last_wanted says why that builds every dtype branch and every
      configuration-dependent one; $AK_CATALOG_CONFIGS=all, the CTest
      entry exhaustive_cuda_catalog, builds the last for every dtype);
      the first only of an sm_90a candidate, whose others test_cuda_sm90a
      compiles; and the planted kernels: broken.cu fails with its log
      naming the error, the others build.
    Where the build has no CUDA backend, or neither NVRTC nor a driver is
    here, the compile tests skip with a message (exit 77: "Not Run" in
    CTest); NVRTC too old, or missing beside a driver, fails them
    (tests/skip.h).  tests/CMakeLists.txt runs this binary as several CTest
    entries, one per operator, so none runs for minutes. */
#include "space.h"
#include "support.h"
#include "unit.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/cuda_api.h"
#include "spec.h"
#include "spec_cuda.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static ak_spec_t *s_builtin (const char *op)
{
    return ak_cat_spec (op);
}

/* --------------------------------------------------------- launch rules */

typedef struct {
    const ak_spec_t *spec;
    const ak_launch_rule_t *rule;
    const char *what;
    size_t checked;
} s_rules_t;

static void s_check_launch (s_rules_t *r, const char *const *names, const int64_t *values, int n)
{
    const ak_spec_t *spec = r->spec;
    for (size_t z = 0; z < spec->nsizes + spec->nedge; z++) {
        const ak_size_t *size = z < spec->nsizes ? &spec->sizes[z] : &spec->edge_sizes[z - spec->nsizes];
        for (int t = 0; t < spec->ndtypes; t++) {
            ak_launch_cfg_t lc;
            ak_err_t err = { 0 };
            if (ak_launch_eval (spec, r->rule, size->dims, spec->dtypes[t], names, values, n, &lc, &err))
                fail_msg ("%s %s at %s: %s", spec->name, r->what, size->name, err.msg);
            uint64_t threads = (uint64_t) lc.block[0] * lc.block[1] * lc.block[2];
            if (threads > 1024 || lc.block[2] > 64 || lc.grid[1] > 65535 || lc.grid[2] > 65535
                || lc.shared_bytes > 227 * 1024)
                fail_msg ("%s %s at %s/%s: grid %ux%ux%u block %ux%ux%u shared %u is beyond an sm_90 device",
                          spec->name, r->what, size->name, ak_dtype_name (spec->dtypes[t]),
                          lc.grid[0], lc.grid[1], lc.grid[2], lc.block[0], lc.block[1], lc.block[2],
                          lc.shared_bytes);
            r->checked++;
        }
    }
}

static int s_check_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    const char *names[AK_MAX_PARAMS];
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    s_check_launch (arg, names, values, (int) cand->nparams);
    return 0;
}

static void test_launch_rules (void **state)
{
    (void) state;
    char *ops[AK_TEST_MAX_OPS];
    int nops = ak_test_catalog_ops (ops, AK_TEST_MAX_OPS);
    for (int o = 0; o < nops; o++) {
        ak_spec_t *spec = s_builtin (ops[o]);
        free (ops[o]);
        const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
        assert_non_null (bl);
        s_rules_t r = { .spec = spec, .rule = bl->launch, .what = "cuda baseline" };
        if (bl->library)           /* a library call: no launch rule, a marker source */
            assert_true (bl->launch == NULL && strncmp (bl->source.text, AK_LIBRARY_MARKER,
                                                        strlen (AK_LIBRARY_MARKER)) == 0);
        else {
            assert_non_null (bl->launch);
            s_check_launch (&r, NULL, NULL, 0);
        }
        size_t ncuda = 0;
        for (size_t c = 0; c < spec->ncandidates; c++) {
            const ak_candidate_t *cand = &spec->candidates[c];
            if (strcmp (cand->backend, "cuda") != 0)
                continue;
            ncuda++;
            r.rule = cand->launch;
            r.what = cand->name;
            ak_err_t err = { 0 };
            assert_int_equal (ak_space_walk (cand, s_check_config, &r, NULL, &err), 0);
        }
        assert_true (ncuda >= 1);
        /* every operator's CUDA kernels run bfloat16 too (reduce leaves
           float16 out: its sums overflow the stability gate's inputs) */
        assert_true (ak_spec_has_dtype (spec, AK_DT_BFLOAT16));
        print_message ("%s: %zu cuda candidates, %zu launch configurations checked\n", spec->name,
                       ncuda, r.checked);
        ak_spec_destroy (&spec);
    }
}

/* -------------------------------------------------------------- NVRTC */

typedef struct {
    const ak_backend_t *be;
    Ak__Device dev;
    char *dir;
    int compiled;
    bool reference;                    /* the next builds are device references (-DAK_REFERENCE) */
} s_nv_t;

/*  Compiles text for dt with the given defines; returns the code, the
    log in *log_p when asked (caller frees). */
static int s_compile (s_nv_t *nv, const char *text, ak_dtype_t dt, const char *const *names,
                      const int64_t *values, int n, const char *arch, char **log_p)
{
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    memset (&req, 0, sizeof req);
    req.source = text;
    req.source_len = strlen (text);
    req.dtype = dt;
    req.reference = nv->reference;
    req.cache_dir = nv->dir;
    /* what is asserted is that every kernel compiles, not how fast: a
       tensor-core kernel took over 60 s under ASan on a 2-core box loaded
       by other builds, and a compile killed for that is a false failure */
    req.timeout_ms = 300000;
    req.device = &nv->dev;
    req.arch = arch;                   /* the spec's "arch" ("sm_90a"); NULL: the device's */
    for (int i = 0; i < n; i++) {
        req.define_names[i] = names[i];
        req.define_values[i] = values[i];
    }
    req.ndefines = n;
    int rc = nv->be->compile (&req, &out, &err);
    if (rc && !log_p)
        fail_msg ("NVRTC (%s): %s\n%s", ak_dtype_name (dt), err.msg, out.log ? out.log : "");
    if (log_p)
        *log_p = out.log;
    else
        free (out.log);
    free (out.artifact_path);
    nv->compiled += rc == 0;
    return rc;
}

typedef struct {
    s_nv_t *nv;
    const ak_spec_t *spec;
    size_t index, last;
} s_walk_t;

/*  Whether dt is compiled here: every dtype, or those in $AK_CATALOG_DTYPES
    ("float16,bfloat16"; tests/CMakeLists.txt splits the slow operators so). */
static bool s_dtype_wanted (ak_dtype_t dt)
{
    const char *only = getenv ("AK_CATALOG_DTYPES");
    return !only || !*only || ak_test_listed (only, ak_dtype_name (dt));
}

/*  Whether every dtype compiles the whole sample ($AK_CATALOG_CONFIGS=all,
    the CTest entry exhaustive_cuda_catalog) rather than the default split
    below. */
static bool s_all_configs (void)
{
    const char *c = getenv ("AK_CATALOG_CONFIGS");
    return c && strcmp (c, "all") == 0;
}

/*  The dtype that compiles a candidate's whole sample: float16 where the
    spec declares it, else bfloat16, else its first dtype.  The 16-bit
    paths are where the catalog's configuration-dependent code is (the
    tensor-core fragments and warp tiles, the packed vector accesses);
    float32 is the FMA and scalar fallback of the same kernels. */
static ak_dtype_t s_pivot (const ak_spec_t *spec)
{
    if (ak_spec_has_dtype (spec, AK_DT_FLOAT16))
        return AK_DT_FLOAT16;
    if (ak_spec_has_dtype (spec, AK_DT_BFLOAT16))
        return AK_DT_BFLOAT16;
    return spec->dtypes[0];
}

/*  Whether the last configuration of cand's sample compiles for dt (the
    first compiles for every dtype: each dtype's own branches, the
    `#if AK_DTYPE_...` of the kernel and the prelude, are built once).
    By default the last compiles for the pivot dtype, and for a dtype of
    another element size when the source reads the element size
    (sizeof, or the prelude's VECB vector accesses, whose element count is
    VECB / sizeof (ak_t)): there a configuration that builds in one size
    can fail a static_assert in the other.  A dtype of the pivot's size
    differs from it only in the element type and its conversions (float16
    and bfloat16: `#ifdef AK_DTYPE_FLOAT16 ... #else`), which the first
    configuration builds.  $AK_CATALOG_CONFIGS=all: every dtype. */
static bool s_last_wanted (const ak_spec_t *spec, const ak_candidate_t *cand, ak_dtype_t dt)
{
    ak_dtype_t pivot = s_pivot (spec);
    if (s_all_configs () || dt == pivot)
        return true;
    if (ak_dtype_size (dt) == ak_dtype_size (pivot))
        return false;
    return strstr (cand->source.text, "sizeof") || strstr (cand->source.text, "VECB");
}

/*  The first and the last configuration of a candidate (the last for the
    dtypes s_last_wanted names); of an architecture-specific one (sm_90a:
    seconds a compile) the first only: test_cuda_sm90a compiles more of
    its configurations, with ptxas's register and spill report checked. */
static int s_compile_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_walk_t *w = arg;
    bool first = w->index == 0, last = w->index == w->last && !first && !cand->arch;
    if (first || last) {
        const char *names[AK_MAX_PARAMS];
        for (size_t i = 0; i < cand->nparams; i++)
            names[i] = cand->params[i].name;
        for (int t = 0; t < w->spec->ndtypes; t++) {
            ak_dtype_t dt = w->spec->dtypes[t];
            if (s_dtype_wanted (dt) && (first || s_last_wanted (w->spec, cand, dt)))
                s_compile (w->nv, cand->source.text, dt, names, values, (int) cand->nparams, cand->arch, NULL);
        }
    }
    w->index++;
    return 0;
}

/*  NVRTC here, or the test skips (no CUDA backend, no NVRTC on a host
    without a driver) or fails (tests/skip.h). */
static void s_nv_open (s_nv_t *nv, const char *tag)
{
    ak_test_cuda_or_skip (false, NULL, NULL);
    memset (nv, 0, sizeof *nv);
    nv->be = ak_backend_find ("cuda");
    ak__device__init (&nv->dev);
    nv->dev.cc_major = 9;
    nv->dev.cc_minor = 0;
    nv->dir = ak_test_tmpdir (tag);
    assert_non_null (nv->dir);
}

static void s_nv_close (s_nv_t *nv)
{
    ak_test_rmtree (nv->dir);
    free (nv->dir);
    nv->dir = NULL;
}

static void test_compile_catalog (void **state)
{
    (void) state;
    s_nv_t nv;
    ak_err_t err = { 0 };
    s_nv_open (&nv, "cudacat");
    char *ops[AK_TEST_MAX_OPS];
    int nops = ak_test_catalog_ops (ops, AK_TEST_MAX_OPS);
    for (int o = 0; o < nops; o++) {
        ak_spec_t *spec = s_builtin (ops[o]);
        int before = nv.compiled;
        const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
        /* float64 whatever the dtype: built once, by the CTest entry of
           the spec's first dtype */
        if (spec->reference_cuda.text && s_dtype_wanted (spec->dtypes[0])) {
            nv.reference = true;
            s_compile (&nv, spec->reference_cuda.text, spec->dtypes[0], NULL, NULL, 0, NULL, NULL);
            nv.reference = false;
        }
        for (int t = 0; t < spec->ndtypes && !bl->library; t++)
            if (s_dtype_wanted (spec->dtypes[t]))
                s_compile (&nv, bl->source.text, spec->dtypes[t], NULL, NULL, 0, bl->arch, NULL);
        for (size_t c = 0; c < spec->ncandidates; c++) {
            const ak_candidate_t *cand = &spec->candidates[c];
            if (strcmp (cand->backend, "cuda") != 0)
                continue;
            s_walk_t w = { .nv = &nv, .spec = spec };
            assert_int_equal (ak_space_walk (cand, NULL, NULL, &w.last, &err), 0);
            w.last--;
            assert_int_equal (ak_space_walk (cand, s_compile_config, &w, NULL, &err), 0);
        }
        print_message ("%s: %d CUDA kernels compiled for sm_90\n", ops[o], nv.compiled - before);
        if (nv.compiled == before)      /* a dtype filter that matched nothing checks nothing */
            fail_msg ("%s: no CUDA kernel compiled (AK_CATALOG_DTYPES=%s)", ops[o],
                      getenv ("AK_CATALOG_DTYPES") ? getenv ("AK_CATALOG_DTYPES") : "");
        free (ops[o]);
        ak_spec_destroy (&spec);
    }
    s_nv_close (&nv);
}

/*  The planted kernels: all build but broken.cu, whose log says why. */
static void test_compile_planted (void **state)
{
    (void) state;
    s_nv_t nv;
    s_nv_open (&nv, "cudaplant");
    static const char *const planted[] = { "wrong", "oob", "hang", "broken", "scribble" };
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
        char *text = ak_test_testing_kernel (planted[i]);
        char *log = NULL;
        int rc = s_compile (&nv, text, AK_DT_FLOAT32, NULL, NULL, 0, NULL, &log);
        if (strcmp (planted[i], "broken") == 0) {
            assert_int_equal (rc, AK_ECOMPILE);
            assert_non_null (log);
            assert_non_null (strstr (log, "not_declared_anywhere"));
        }
        else if (rc != 0)
            fail_msg ("%s.cu: %d\n%s", planted[i], rc, log ? log : "");
        free (log);
        free (text);
    }
    assert_int_equal (nv.compiled, 4);
    s_nv_close (&nv);
}

/*  The prelude's paired conversions under test (kernels/testing/cuda/
    pairs.cu, run by tests/gpu/test_gpu_prelude.c) build for both 16-bit
    types, plain and planted; a float32 build is refused by its
    static_assert (it needs two elements a word). */
static void test_compile_pairs (void **state)
{
    (void) state;
    s_nv_t nv;
    s_nv_open (&nv, "cudapairs");
    char *text = ak_test_testing_kernel ("pairs");
    static const char *const names[] = { "PLANT" };
    for (int plant = 0; plant <= 1; plant++)
        for (int dt = AK_DT_FLOAT16; dt <= AK_DT_BFLOAT16; dt++) {
            const int64_t values[] = { plant };
            char *log = NULL;
            int rc = s_compile (&nv, text, (ak_dtype_t) dt, names, values, 1, NULL, &log);
            if (rc != 0)
                fail_msg ("pairs.cu (%s, PLANT=%d): %d\n%s", ak_dtype_name ((ak_dtype_t) dt), plant, rc,
                          log ? log : "");
            free (log);
        }
    char *log = NULL;
    assert_int_equal (s_compile (&nv, text, AK_DT_FLOAT32, NULL, NULL, 0, NULL, &log), AK_ECOMPILE);
    assert_non_null (log);
    assert_non_null (strstr (log, "a 16-bit build"));
    free (log);
    assert_int_equal (nv.compiled, 4);
    free (text);
    s_nv_close (&nv);
}

/*  The Hopper testing kernels (TMA copy, cluster rank) build for sm_90a;
    the same request for an sm_80 device is refused before NVRTC runs (no
    artifact, nothing in the cache); a library baseline's marker becomes
    its own artifact without NVRTC, and a request that says library with
    any other source is refused. */
static void test_compile_hopper (void **state)
{
    (void) state;
    s_nv_t nv;
    ak_err_t err = { 0 };
    s_nv_open (&nv, "cudahopper");
    static const char *const names[] = { "tma_copy", "cluster_rank" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *text = ak_test_testing_kernel (names[i]);
        char *log = NULL;
        int rc = s_compile (&nv, text, AK_DT_FLOAT32, NULL, NULL, 0, "sm_90a", &log);
        if (rc != 0)
            fail_msg ("%s.cu for sm_90a: %d\n%s", names[i], rc, log ? log : "");
        free (log);
        free (text);
    }
    assert_int_equal (nv.compiled, 2);

    /* sm_90a on an sm_80 device: refused, nothing compiled or cached */
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    memset (&req, 0, sizeof req);
    req.source = "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) {}\n";
    req.source_len = strlen (req.source);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = nv.dir;
    req.arch = "sm_90a";
    Ak__Device a100 = AK__DEVICE__INIT;
    a100.cc_major = 8;
    a100.cc_minor = 0;
    req.device = &a100;
    assert_int_equal (nv.be->compile (&req, &out, &err), AK_EUNSUPPORTED);
    assert_non_null (strstr (err.msg, "refused before compile"));
    assert_non_null (strstr (err.msg, "built for sm_90a"));
    assert_null (out.artifact_path);
    assert_true (out.ms < 1000);           /* no NVRTC child ran */
    free (out.log);

    /* a library baseline: the marker is the artifact */
    ak_spec_t *spec = s_builtin ("matmul");
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_non_null (bl->library);
    memset (&out, 0, sizeof out);
    req.source = bl->source.text;
    req.source_len = strlen (bl->source.text);
    req.arch = NULL;
    req.library = true;
    req.device = &nv.dev;
    if (nv.be->compile (&req, &out, &err) != 0)
        fail_msg ("%s", err.msg);
    assert_non_null (strstr (out.artifact_path, ".lib"));
    char *art = NULL;
    assert_int_equal (ak_file_read (out.artifact_path, 4096, &art, NULL, &err), 0);
    assert_string_equal (art, bl->source.text);
    free (art);
    free (out.artifact_path);
    free (out.log);

    /* fused_mlp's swiglu_mlp: the marker line, then its helper kernel's
       CUBIN (built by NVRTC for the device and dtype) */
    ak_spec_t *mlp = s_builtin ("fused_mlp");
    const ak_baseline_t *mbl = ak_spec_baseline (mlp, "cuda");
    assert_string_equal (mbl->lib_op, "swiglu_mlp");
    memset (&out, 0, sizeof out);
    req.source = mbl->source.text;
    req.source_len = strlen (mbl->source.text);
    req.dtype = AK_DT_BFLOAT16;
    if (nv.be->compile (&req, &out, &err) != 0)
        fail_msg ("%s\n%s", err.msg, out.log ? out.log : "");
    size_t alen = 0;
    assert_int_equal (ak_file_read (out.artifact_path, 64u << 20, &art, &alen, &err), 0);
    size_t mlen = strlen (mbl->source.text);
    assert_true (alen > mlen + 4);
    assert_memory_equal (art, mbl->source.text, mlen);
    assert_memory_equal (art + mlen, "\177ELF", 4);
    free (art);
    char key[65];
    memcpy (key, out.key, sizeof key);
    free (out.artifact_path);
    free (out.log);
    /* float32: another helper build, so another artifact */
    memset (&out, 0, sizeof out);
    req.dtype = AK_DT_FLOAT32;
    assert_int_equal (nv.be->compile (&req, &out, &err), 0);
    assert_string_not_equal (out.key, key);
    free (out.artifact_path);
    free (out.log);
    ak_spec_destroy (&mlp);
    req.dtype = AK_DT_FLOAT32;

    memset (&out, 0, sizeof out);
    req.source = "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) {}\n";
    req.source_len = strlen (req.source);
    assert_int_equal (nv.be->compile (&req, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "marker"));
    free (out.log);
    ak_spec_destroy (&spec);
    s_nv_close (&nv);
}

/*  test_cuda_catalog [--only TEST | --skip TEST]: runs only TEST, or all
    but TEST (a cmocka test name or glob).  tests/CMakeLists.txt runs it as
    one CTest entry for the launch rules and the planted kernels (--skip
    test_compile_catalog) and one per operator (--only test_compile_catalog,
    AK_CATALOG_OPS=op; the slow ones once per dtype, AK_CATALOG_DTYPES=dt),
    so no entry runs for minutes. */
int main (int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_launch_rules),
        cmocka_unit_test (test_compile_catalog),
        cmocka_unit_test (test_compile_planted),
        cmocka_unit_test (test_compile_hopper),
        cmocka_unit_test (test_compile_pairs),
    };
    if (argc == 3 && strcmp (argv[1], "--skip") == 0)
        cmocka_set_skip_filter (argv[2]);
    else if (argc == 3 && strcmp (argv[1], "--only") == 0)
        cmocka_set_test_filter (argv[2]);
    else if (argc != 1) {
        fprintf (stderr, "usage: %s [--only TEST | --skip TEST]\n", argv[0]);
        return 2;
    }
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
