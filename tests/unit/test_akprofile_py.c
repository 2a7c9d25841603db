/*  tests/unit/test_akprofile_py.c: the Python binding of libakprofile
    (lib/akprofile/python) without a GPU and without PyTorch.

    Computes the worker's NVRTC options and compile-cache key for softmax's
    warp_row (ROWS=2 VEC=4, float32, sm_90, NVRTC 13.0) with ak_cuda_options
    and ak_cuda_cache_key, hands them to `python3 -m unittest` over
    lib/akprofile/python/tests (AKPROFILE_TEST_WORKER_OPTIONS / _KEY: the
    binding must build the same text and the same key), with AKPROFILE_LIB
    naming this build's libakprofile.so (under ASan its runtime is
    preloaded: python3 is not instrumented).  Every Python test must pass
    and none may be skipped.  Then `akctl gate`: usage errors, a tampered
    package refused before any Python runs, and a good one reaching the
    driver, which cannot run here (no PyTorch or no GPU): exit 2. */
#include "support.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/backend_cuda.h"
#include "util.h"

static char *s_read_src (const char *rel)
{
    char *path = ak_test_src (rel), *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    if (ak_file_read (path, 1 << 20, &text, &len, &err) != 0)
        fail_msg ("%s", err.msg);
    free (path);
    return text;
}

/*  The environment every Python run here gets. */
static char *s_env (void)
{
    char *bin = ak_test_bin ("akctl");
    char *bindir = ak_dirname (bin);
    char *lib = ak_test_akprofile_lib ();
    char *src = ak_test_src ("lib/akprofile/python");
    char asan[1024] = "";
    ak_test_asan_runtime (asan, sizeof asan);
    char *env = ak_sprintf ("AKPROFILE_LIB='%s' PYTHONPATH='%s' AKPROFILE_CACHE='%s/akp-cache' %s%s%s "
                            "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0",
                            lib, src, bindir, asan[0] ? "LD_PRELOAD='" : "", asan, asan[0] ? "'" : "");
    free (src);
    free (lib);
    free (bindir);
    free (bin);
    return env;
}

static void test_python_suite (void **state)
{
    (void) state;
    char *source = s_read_src ("kernels/softmax/cuda/warp_row.cu");
    ak_compile_req_t req;
    memset (&req, 0, sizeof req);
    req.source = source;
    req.source_len = strlen (source);
    req.dtype = AK_DT_FLOAT32;
    req.define_names[0] = "ROWS";
    req.define_values[0] = 2;
    req.define_names[1] = "VEC";
    req.define_values[1] = 4;
    req.ndefines = 2;
    char *options = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_cuda_options (&req, 9, 0, NULL, &options, &err), 0);
    char key[65];
    ak_cuda_cache_key (source, strlen (source), options, "sm_90", "13.0", "", key);

    char *env = s_env ();
    char *tests = ak_test_src ("lib/akprofile/python/tests");
    char *src = ak_test_src ("");
    char *out = NULL;
    /* the options hold newlines: printf %q-free quoting through $'...' is not POSIX sh, so export them */
    char *opts_file = ak_sprintf ("%s/akp-opts.txt", getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    assert_int_equal (ak_file_write_atomic (opts_file, options, strlen (options), &err), 0);
    int rc = ak_test_runf (&out, "cd '%s' && AKPROFILE_TEST_WORKER_OPTIONS=\"$(cat '%s')\" "
                                 "AKPROFILE_TEST_WORKER_KEY=%s AK_SOURCE_DIR='%s' %s "
                                 "python3 -m unittest discover -v -s '%s' 2>&1",
                           tests, opts_file, key, src, env, tests);
    print_message ("%s\n", out);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "\nOK"));
    assert_null (strstr (out, "skipped"));
    assert_non_null (strstr (out, "test_source_text_and_key"));
    assert_non_null (strstr (out, "test_tampered_profile_json"));
    unlink (opts_file);
    free (opts_file);
    free (out);
    free (src);
    free (tests);
    free (env);
    free (options);
    free (source);
}

/*  A package made by the Python tests' own builder. */
static char *s_package (const char *env)
{
    char *dir = ak_test_tmpdir ("akgate");
    char *tests = ak_test_src ("lib/akprofile/python/tests");
    char *src = ak_test_src ("");
    char *out = NULL;
    int rc = ak_test_runf (&out, "cd '%s' && AK_SOURCE_DIR='%s' %s python3 -c "
                                 "'import sys, pkg; pkg.build(sys.argv[1])' '%s/pkg' 2>&1", tests, src, env, dir);
    assert_int_equal (rc, 0);
    free (out);
    free (src);
    free (tests);
    return dir;
}

static void test_akctl_gate (void **state)
{
    (void) state;
    char *env = s_env ();
    char *dir = s_package (env);
    char *akctl = ak_test_bin ("akctl");
    char *script = ak_sprintf ("%s/step.py", dir);
    ak_err_t err = { 0 };
    const char *text = "def make_step(dtype):\n    return lambda: None\n";
    assert_int_equal (ak_file_write_atomic (script, text, strlen (text), &err), 0);
    char *out = NULL;

    /* usage: no --profile, too few steps, no program */
    assert_int_equal (ak_test_runf (&out, "%s '%s' gate -- python3 '%s' 2>&1", env, akctl, script), 2);
    assert_non_null (strstr (out, "--profile DIR is required"));
    free (out);
    assert_int_equal (ak_test_runf (&out, "%s '%s' gate --profile '%s/pkg' --steps 5 -- python3 '%s' 2>&1",
                                    env, akctl, dir, script), 2);
    assert_non_null (strstr (out, "--steps wants a number >= 10"));
    free (out);
    assert_int_equal (ak_test_runf (&out, "%s '%s' gate --profile '%s/pkg' 2>&1", env, akctl, dir), 2);
    assert_non_null (strstr (out, "no program after --"));
    free (out);
    assert_int_equal (ak_test_runf (&out, "'%s' gate --help", akctl), 0);
    assert_non_null (strstr (out, "accepted | rejected"));
    free (out);

    /* a good package reaches the driver; here it cannot run (no PyTorch or no GPU) */
    int rc = ak_test_runf (&out, "%s '%s' gate --profile '%s/pkg' -- python3 '%s' 2>&1", env, akctl, dir, script);
    assert_int_equal (rc, 2);
    assert_non_null (strstr (out, "akprofile.gate: error:"));
    assert_non_null (strstr (out, "the gate could not run"));
    free (out);
    /* --cuda-graph is taken and reaches the driver, which takes it too (its
       own usage error would say "unrecognized arguments") */
    rc = ak_test_runf (&out, "%s '%s' gate --cuda-graph --profile '%s/pkg' -- python3 '%s' 2>&1", env, akctl, dir,
                       script);
    assert_int_equal (rc, 2);
    assert_non_null (strstr (out, "akprofile.gate: error:"));
    assert_null (strstr (out, "unrecognized arguments"));
    free (out);
    char *verdict = ak_sprintf ("%s/pkg.gate.json", dir);
    assert_int_not_equal (access (verdict, F_OK), 0);

    /* tampered: refused before Python starts */
    char *pj = ak_sprintf ("%s/pkg/profile.json", dir);
    FILE *f = fopen (pj, "a");
    assert_non_null (f);
    fputs (" ", f);
    fclose (f);
    rc = ak_test_runf (&out, "%s '%s' gate --profile '%s/pkg' -- python3 '%s' 2>&1", env, akctl, dir, script);
    assert_int_equal (rc, 2);
    assert_non_null (strstr (out, "package refused: profile.json: modified"));
    assert_null (strstr (out, "akprofile.gate"));
    free (out);
    free (pj);
    free (verdict);
    free (script);
    free (akctl);
    ak_test_rmtree (dir);
    free (dir);
    free (env);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_python_suite),
        cmocka_unit_test (test_akctl_gate),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
