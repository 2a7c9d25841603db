/*  tests/unit/test_cuda_sm90a.c: the catalog's sm_90a kernels (wgmma, TMA,
    setmaxnreg: matmul's and fused_mlp's wgmma.cu, flash_attention's
    wgmma.cu, split_kv_attention's wg_decode.cu and tma_decode.cu) compiled
    without a GPU.

    NVRTC builds a few configurations of each for --gpu-architecture=sm_90a
    with the prelude, as the worker does, plus --ptxas-options=-v, and the
    ptxas report must show:
      - no spill stores or loads in any function;
      - ak_kernel within its register budget (the count the block starts
        with, which the kernel's setmaxnreg arithmetic assumes: 168 with
        two consumer warpgroups, 240 with one, 128 with three);
      - no warning, no serialised wgmma ("Potential Performance Loss") and
        no injected warpgroup.arrive (C7519): either says the accumulators
        were touched between wgmma.
    The configurations are checked against the spec: each a member of the
    candidate's parameter lists and satisfying its constraints, the first
    one the candidate's first configuration.  The report parser is a pure
    function tested on planted reports, so the check can fail.

    Each compile runs in the worker's compile helper ak-nvrtc, as the
    worker's do (worker/nvrtc_run.h: NVRTC cannot be interrupted, and the
    helper keeps its allocations out of the leak checker), all at once, one
    thread waiting on each; under ASan the CTest entry runs the helper
    built without sanitizers (tests/CMakeLists.txt, ak_compile_env), as the
    catalog's compile entries do.  Where the build has no CUDA backend or
    NVRTC does not load, the test skips with a message (tests/skip.h). */
#include "support.h"
#include "util.h"
#include "expr.h"
#include "worker/backend_cuda.h"
#include "worker/cuda_api.h"
#include "worker/nvrtc_run.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern const char ak_prelude_cuda[];

#define S_MAX_DEFS 12

typedef struct {
    const char *name;
    int64_t value;
} s_def_t;

typedef struct {
    const char *op, *cand;         /* kernels/<op>/spec.json, candidate name */
    const char *dtype;             /* AK_DTYPE_<dtype> */
    int budget;                    /* registers ak_kernel may use */
    s_def_t defs[S_MAX_DEFS];      /* every parameter, spec order */
} s_case_t;

/*  The first of each candidate is its first (default) configuration; the
    others cover one consumer warpgroup with two m64 slices, BK = 128,
    BN = 128, the other raster order, a cluster of two (TMA multicast),
    split K (SPLIT 4: the workspace and the ordered sum), float16 and
    float32; wg_decode with one consumer (256 threads: 255
    registers) and three stages; tma_decode with 8 consumer warps,
    BN 128 and KW 1, and its D 256 path at KW 2.  Few,
    since each wgmma build takes ptxas 5-10 s of CPU; every configuration of both
    spaces was built once by hand (docs/cuda-backend.md). */
static const s_case_t s_cases[] = {
    { "matmul", "wgmma", "BFLOAT16", 168,
      { {"BM", 128}, {"BN", 256}, {"BK", 64}, {"STAGES", 4}, {"CONSUMERS", 2}, {"CLUSTER", 1},
        {"RASTER", 0}, {"GROUP", 8}, {"GRID", 132}, {"SPLIT", 1} } },
    { "matmul", "wgmma", "FLOAT16", 240,
      { {"BM", 128}, {"BN", 128}, {"BK", 128}, {"STAGES", 3}, {"CONSUMERS", 1}, {"CLUSTER", 2},
        {"RASTER", 1}, {"GROUP", 8}, {"GRID", 132}, {"SPLIT", 1} } },
    { "matmul", "wgmma", "BFLOAT16", 168,
      { {"BM", 128}, {"BN", 128}, {"BK", 64}, {"STAGES", 5}, {"CONSUMERS", 2}, {"CLUSTER", 1},
        {"RASTER", 0}, {"GROUP", 8}, {"GRID", 132}, {"SPLIT", 4} } },
    { "matmul", "wgmma", "FLOAT32", 168,
      { {"BM", 128}, {"BN", 256}, {"BK", 64}, {"STAGES", 4}, {"CONSUMERS", 2}, {"CLUSTER", 1},
        {"RASTER", 0}, {"GROUP", 8}, {"GRID", 132}, {"SPLIT", 1} } },
    { "fused_mlp", "wgmma", "BFLOAT16", 168,
      { {"BM", 128}, {"BN", 128}, {"BK", 64}, {"STAGES", 4}, {"CONSUMERS", 2}, {"GRID", 132} } },
    { "flash_attention", "wgmma", "BFLOAT16", 168, { {"BN", 128}, {"STAGES", 2}, {"CONSUMERS", 2}, {"PINGPONG", 1} } },
    { "flash_attention", "wgmma", "FLOAT16", 128, { {"BN", 64}, {"STAGES", 3}, {"CONSUMERS", 3}, {"PINGPONG", 0} } },
    { "split_kv_attention", "wg_decode", "BFLOAT16", 168,
      { {"STAGES", 2}, {"CONSUMERS", 2}, {"PINGPONG", 1}, {"WAVES", 1} } },
    { "split_kv_attention", "wg_decode", "FLOAT16", 255,
      { {"STAGES", 3}, {"CONSUMERS", 1}, {"PINGPONG", 0}, {"WAVES", 4} } },
    { "split_kv_attention", "tma_decode", "BFLOAT16", 255,
      { {"NC", 4}, {"BN", 64}, {"STAGES", 4}, {"KW", 2}, {"DMAX", 128}, {"WAVES", 1}, {"FLAT", 0} } },
    { "split_kv_attention", "tma_decode", "FLOAT16", 227,
      { {"NC", 8}, {"BN", 128}, {"STAGES", 2}, {"KW", 1}, {"DMAX", 128}, {"WAVES", 2}, {"FLAT", 0} } },
    { "split_kv_attention", "tma_decode", "BFLOAT16", 255,
      { {"NC", 4}, {"BN", 32}, {"STAGES", 2}, {"KW", 2}, {"DMAX", 256}, {"WAVES", 1}, {"FLAT", 0} } },
};
#define S_NCASES (sizeof s_cases / sizeof s_cases[0])

static int s_ndefs (const s_case_t *c)
{
    int n = 0;
    while (n < S_MAX_DEFS && c->defs[n].name)
        n++;
    return n;
}

/* ------------------------------------------------------- ptxas report */

/*  Judges NVRTC's log of a build with --ptxas-options=-v: 0, or -1 with
    the first problem in why.  budget: the registers ak_kernel may use. */
static int s_ptxas_check (const char *log, int budget, char *why, size_t len)
{
    bool in_kernel = false;
    int regs = -1;
    const char *line = log;
    while (line && *line) {
        const char *end = strchr (line, '\n');
        size_t n = end ? (size_t) (end - line) : strlen (line);
        char buf[512];
        snprintf (buf, sizeof buf, "%.*s", (int) (n < sizeof buf - 1 ? n : sizeof buf - 1), line);
        const char *p;
        int frame, st, ld, r;
        if (strstr (buf, "warning") || strstr (buf, "Potential Performance Loss")
            || strstr (buf, "is injected")) {
            snprintf (why, len, "ptxas: %.400s", buf);
            return -1;
        }
        if (strstr (buf, "Compiling entry function"))
            in_kernel = strstr (buf, "'ak_kernel'") != NULL;
        if ((p = strstr (buf, "bytes stack frame")) != NULL) {
            while (p > buf && p[-1] == ' ')
                p--;
            while (p > buf && p[-1] >= '0' && p[-1] <= '9')
                p--;
            if (sscanf (p, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
                        &frame, &st, &ld) != 3) {
                snprintf (why, len, "unreadable ptxas line: %.400s", buf);
                return -1;
            }
            if (st || ld) {
                snprintf (why, len, "spills: %.400s", p);
                return -1;
            }
        }
        if (in_kernel && (p = strstr (buf, "Used ")) != NULL && sscanf (p, "Used %d registers", &r) == 1)
            regs = r;
        line = end ? end + 1 : NULL;
    }
    if (regs < 0) {
        snprintf (why, len, "no register count for ak_kernel in the ptxas report");
        return -1;
    }
    if (regs > budget) {
        snprintf (why, len, "ak_kernel uses %d registers, budget %d", regs, budget);
        return -1;
    }
    return 0;
}

static void test_ptxas_check (void **state)
{
    (void) state;
    char why[256];
    const char *clean =
        "ptxas info    : Compiling entry function 'ak_kernel' for 'sm_90a'\n"
        "ptxas info    : Function properties for ak_kernel\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 2 barriers, 64 bytes smem\n"
        "ptxas info    : Compiling entry function 'ak_fill_uniform' for 'sm_90a'\n"
        "ptxas info    : Used 24 registers, used 0 barriers\n";
    assert_int_equal (s_ptxas_check (clean, 168, why, sizeof why), 0);
    assert_int_equal (s_ptxas_check (clean, 160, why, sizeof why), -1);
    assert_non_null (strstr (why, "168 registers, budget 160"));

    const char *spill =
        "ptxas info    : Compiling entry function 'ak_kernel' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z4s_fnv\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 2 barriers, 64 bytes smem\n";
    assert_int_equal (s_ptxas_check (spill, 168, why, sizeof why), -1);
    assert_non_null (strstr (why, "8 bytes spill stores"));

    const char *serial =
        "ptxas info    : Compiling entry function 'ak_kernel' for 'sm_90a'\n"
        "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized\n"
        "ptxas info    : Used 168 registers, used 2 barriers, 64 bytes smem\n";
    assert_int_equal (s_ptxas_check (serial, 168, why, sizeof why), -1);
    assert_non_null (strstr (why, "serialized"));

    const char *inject =
        "ptxas info    : Compiling entry function 'ak_kernel' for 'sm_90a'\n"
        "ptxas info    : (C7519) warpgroup.arrive is injected in around line 910 by compiler to allow use of "
        "registers in GMMA in function 'ak_kernel'\n"
        "ptxas info    : Used 168 registers, used 4 barriers, 80 bytes smem\n";
    assert_int_equal (s_ptxas_check (inject, 168, why, sizeof why), -1);
    assert_non_null (strstr (why, "C7519"));

    /* the fill kernel's count is not ak_kernel's */
    const char *other =
        "ptxas info    : Compiling entry function 'ak_fill_uniform' for 'sm_90a'\n"
        "ptxas info    : Used 24 registers, used 0 barriers\n";
    assert_int_equal (s_ptxas_check (other, 168, why, sizeof why), -1);
    assert_non_null (strstr (why, "no register count"));
}

/* ---------------------------------------------------- the spec's space */

/*  Checks that c is a configuration of its candidate in the catalog spec:
    arch sm_90a, the same parameters in the same order, each value listed,
    every constraint true; first: every value the first of its list. */
static void s_check_in_spec (const s_case_t *c, bool first)
{
    char *rel = ak_sprintf ("kernels/%s/spec.json", c->op);
    char *path = ak_test_src (rel);
    json_error_t jerr;
    json_t *root = json_load_file (path, 0, &jerr);
    if (!root)
        fail_msg ("%s: %s", path, jerr.text);
    json_t *cands = json_object_get (root, "candidates"), *cand = NULL, *v;
    size_t i;
    json_array_foreach (cands, i, v)
        if (ak_streq (json_string_value (json_object_get (v, "name")), c->cand))
            cand = v;
    if (!cand)
        fail_msg ("%s: no candidate '%s'", path, c->cand);
    assert_string_equal (json_string_value (json_object_get (cand, "arch")), "sm_90a");
    json_t *params = json_object_get (cand, "params");
    int n = s_ndefs (c);
    assert_int_equal ((int) json_object_size (params), n);
    ak_var_t vars[S_MAX_DEFS];
    const char *key;
    int k = 0;
    json_object_foreach (params, key, v) {
        assert_string_equal (key, c->defs[k].name);
        bool listed = false;
        size_t j;
        json_t *x;
        json_array_foreach (v, j, x)
            listed = listed || json_integer_value (x) == c->defs[k].value;
        if (!listed || (first && json_integer_value (json_array_get (v, 0)) != c->defs[k].value))
            fail_msg ("%s %s: %s=%lld is not %s", c->op, c->cand, key, (long long) c->defs[k].value,
                      listed ? "the first value" : "listed");
        vars[k].name = c->defs[k].name;
        vars[k].value = c->defs[k].value;
        k++;
    }
    json_array_foreach (json_object_get (cand, "constraints"), i, v) {
        int64_t ok = 0;
        ak_err_t err = { 0 };
        if (ak_expr_eval (json_string_value (v), vars, n, &ok, &err) != 0 || !ok)
            fail_msg ("%s %s: constraint '%s' fails (%s)", c->op, c->cand, json_string_value (v), err.msg);
    }
    json_decref (root);
    free (path);
    free (rel);
}

/* ------------------------------------------------------------ compiles */

#if AK_HAVE_CUDA
/*  One build: the helper's job, and what came back. */
typedef struct {
    ak_nvrtc_job_t job;
    char *scratch, *cubin;
    char *opts[4 + S_MAX_DEFS + 3];
    int nopts;
    int rc;
    char *log;
    ak_err_t err;
} s_build_t;

static void *s_build (void *arg)
{
    s_build_t *b = arg;
    b->rc = ak_nvrtc_run (&b->job, &b->log, &b->err);
    return NULL;
}
#endif

static void test_compile_sm90a (void **state)
{
    (void) state;
    for (size_t c = 0; c < S_NCASES; c++)
        s_check_in_spec (&s_cases[c], c == 0 || !ak_streq (s_cases[c].op, s_cases[c - 1].op));
    ak_test_cuda_or_skip (false, NULL, NULL);
#if AK_HAVE_CUDA
    const ak_cuda_nvrtc_t *nv = NULL;
    ak_err_t err = { 0 };
    if (ak_cuda_nvrtc (&nv, &err) != 0)
        fail_msg ("%s", err.msg);
    bool has90a = false;
    for (int i = 0; i < nv->narchs; i++)
        has90a = has90a || nv->archs[i] == 90;
    if (!has90a)
        fail_msg ("NVRTC %s cannot build sm_90", ak_cuda_nvrtc_version_text ());
    const char *inc = ak_cuda_include_dir ();
    if (!inc)
        fail_msg ("no cuda_fp16.h / cuda_bf16.h for NVRTC (see ak_cuda_include_dir)");
    const char *reads[] = { inc, NULL };
    char *dir = ak_test_tmpdir ("sm90a");
    assert_non_null (dir);

    s_build_t builds[S_NCASES];
    pthread_t threads[S_NCASES];
    memset (builds, 0, sizeof builds);
    for (size_t c = 0; c < S_NCASES; c++) {
        const s_case_t *k = &s_cases[c];
        s_build_t *b = &builds[c];
        char *rel = ak_sprintf ("kernels/%s/cuda/%s.cu", k->op, k->cand);
        char *path = ak_test_src (rel);
        char *src = NULL;
        if (ak_file_read (path, 1u << 20, &src, NULL, &err) != 0)
            fail_msg ("%s", err.msg);
        char *text = ak_sprintf ("#line 1 \"ak_kernel_cuda.h\"\n%s\n#line 1 \"kernel.cu\"\n%s",
                                 ak_prelude_cuda, src);
        free (src);
        free (path);
        free (rel);
        b->scratch = ak_sprintf ("%s/case%zu", dir, c);
        assert_int_equal (mkdir (b->scratch, 0700), 0);
        b->cubin = ak_sprintf ("%s/kernel.cubin", b->scratch);

        int n = 0;
        b->opts[n++] = ak_strdup ("--gpu-architecture=sm_90a");
        b->opts[n++] = ak_strdup ("--std=c++17");
        b->opts[n++] = ak_sprintf ("--include-path=%s", inc);
        b->opts[n++] = ak_strdup ("-DAK_CUDA_HALF=1");
        b->opts[n++] = ak_sprintf ("-DAK_DTYPE_%s=1", k->dtype);
        b->opts[n++] = ak_strdup ("--ptxas-options=-v");
        for (int d = 0; d < s_ndefs (k); d++)
            b->opts[n++] = ak_sprintf ("-D%s=%lld", k->defs[d].name, (long long) k->defs[d].value);
        b->nopts = n;
        /* what is asserted is the ptxas report, not how fast it comes:
           the wall limit of one build, within the entry's 300 s (the four
           take 3 s of CPU through the plain helper, 10 s under ASan) */
        b->job = (ak_nvrtc_job_t) { .name = k->cand, .nvrtc_path = ak_test_nvrtc_file (), .text = text,
                                    .text_len = strlen (text), .opts = (const char *const *) b->opts,
                                    .nopts = n, .scratch_dir = b->scratch, .cubin_path = b->cubin,
                                    .read_dirs = reads, .timeout_ms = 280000 };
        assert_int_equal (pthread_create (&threads[c], NULL, s_build, b), 0);
    }
    int bad = 0;
    for (size_t c = 0; c < S_NCASES; c++) {
        const s_case_t *k = &s_cases[c];
        s_build_t *b = &builds[c];
        assert_int_equal (pthread_join (threads[c], NULL), 0);
        const char *log = b->log ? b->log : "";
        char why[512] = "";
        if (b->rc == AK_ECOMPILE)
            snprintf (why, sizeof why, "NVRTC compile error: %.400s", b->err.msg);
        else if (b->rc)
            snprintf (why, sizeof why, "NVRTC failed: %.400s", b->err.msg);
        else
            s_ptxas_check (log, k->budget, why, sizeof why);
        char params[256] = "";
        for (int d = 0, at = 0; d < s_ndefs (k) && at < (int) sizeof params; d++)
            at += snprintf (params + at, sizeof params - at, " %s=%lld", k->defs[d].name, (long long) k->defs[d].value);
        print_message ("%s %s %s%s: %s\n", k->op, k->cand, k->dtype, params, *why ? why : "ok");
        if (*why) {
            print_error ("%s\n", log);
            bad++;
        }
        free (b->log);
        free ((char *) b->job.text);
        for (int i = 0; i < b->nopts; i++)
            free (b->opts[i]);
        free (b->cubin);
        free (b->scratch);
    }
    ak_test_rmtree (dir);
    free (dir);
    assert_int_equal (bad, 0);
#endif
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_ptxas_check),
        cmocka_unit_test (test_compile_sm90a),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
