/*  tests/unit/test_cuda_loader.c: the CUDA backend's parts that need no GPU
    (worker/cuda_api.c, worker/backend_cuda.c): loading libcuda / NVRTC /
    CUPTI with dlopen and failing cleanly, ak_backend_find ("cuda"), NVRTC
    options and the compile cache key; and, where NVRTC loads (it needs no
    driver), real compiles into the cache. */
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/backend_cuda.h"
#include "worker/cuda_api.h"
#include "digest.h"
#include "util.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *s_axpy =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "    long long n = a.dims[0];\n"
    "    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        AK_OUT (a, 0)[i] = ak_from_acc (ALPHA * ak_to_acc (AK_IN (a, 0)[i]) + ak_to_acc (AK_IN (a, 1)[i]));\n"
    "}\n";

/* ---------------------------------------------------------------- loader */

static void *s_load_driver_thread (void *arg)
{
    ak_err_t err = { 0 };
    int *rc = arg;
    *rc = ak_cuda_load_driver (&err);
    return NULL;
}

/*  Without a driver (this machine) the loader answers AK_EUNAVAIL naming
    libcuda; with one, it loaded a new enough one.  Many threads asking at
    once all get the same answer (one load). */
static void test_driver_loader (void **state)
{
    ak_err_t err = { 0 };
    int rc = ak_cuda_load_driver (&err);
    if (rc) {
        assert_int_equal (rc, AK_EUNAVAIL);
#if AK_HAVE_CUDA
        if (!strstr (err.msg, "libcuda") && !strstr (err.msg, "CUDA driver"))
            fail_msg ("reason does not name the driver: %s", err.msg);
#else
        assert_non_null (strstr (err.msg, "without CUDA headers"));
#endif
        print_message ("driver: %s\n", err.msg);
        assert_string_equal (ak_cuda_driver_version_text (), "");
    }
    else {
        assert_true (strlen (ak_cuda_driver_version_text ()) >= 4);
        print_message ("driver: CUDA %s\n", ak_cuda_driver_version_text ());
    }
    pthread_t t[8];
    int rcs[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal (pthread_create (&t[i], NULL, s_load_driver_thread, &rcs[i]), 0);
    for (int i = 0; i < 8; i++) {
        pthread_join (t[i], NULL);
        assert_int_equal (rcs[i], rc);
    }
    char *what = ak_cuda_describe ();
    assert_non_null (what);
    print_message ("%s\n", what);
    free (what);
}

static void test_nvrtc_cupti_loader (void **state)
{
    ak_err_t err = { 0 };
    int rc = ak_cuda_load_nvrtc (&err);
    if (rc) {
        assert_int_equal (rc, AK_EUNAVAIL);
        assert_non_null (strstr (err.msg, "NVRTC"));
        assert_string_equal (ak_cuda_nvrtc_version_text (), "");
    }
    else
        assert_non_null (strchr (ak_cuda_nvrtc_version_text (), '.'));
    memset (&err, 0, sizeof err);
    rc = ak_cuda_load_cupti (&err);
    if (rc) {
        assert_int_equal (rc, AK_EUNAVAIL);
        assert_non_null (strstr (err.msg, "CUPTI"));
    }
    else
        assert_true (strlen (ak_cuda_cupti_version_text ()) > 0);
}

/* ---------------------------------------------------------- the backend */

/*  Documented choice (backend.c, backend_cuda.h): "cuda" is NULL only in a
    build without CUDA headers; otherwise the table is returned and its
    probe says why it cannot run here. */
static void test_backend_find (void **state)
{
    const ak_backend_t *be = ak_backend_find ("cuda");
#if AK_HAVE_CUDA
    assert_non_null (be);
    assert_string_equal (be->name, "cuda");
    assert_non_null (be->probe);
    assert_non_null (be->compile);
    assert_non_null (be->open);
    assert_non_null (be->time);
    assert_true (be->supports_dtype (NULL, AK_DT_FLOAT32));
    Ak__Device **devs = NULL;
    size_t n = 0;
    ak_err_t err = { 0 };
    int rc = be->probe (&devs, &n, &err);
    ak_err_t derr = { 0 };
    if (ak_cuda_load_driver (&derr) != 0) {
        assert_int_equal (rc, AK_EUNAVAIL);
        assert_string_equal (err.msg, derr.msg);
        assert_null (devs);
        assert_int_equal (n, 0);
        print_message ("cuda probe: %s\n", err.msg);
    }
    else if (rc == 0) {
        assert_true (n >= 1);
        for (size_t i = 0; i < n; i++)
            ak__device__free_unpacked (devs[i], NULL);
        free (devs);
    }
    else
        assert_int_equal (rc, AK_EUNAVAIL);   /* a driver but no device / NVRTC */
    /* The extras refuse cleanly without a device. */
    double us = 0;
    assert_int_not_equal (ak_cuda_last_kernel_us (NULL, &us, &err), 0);
#else
    assert_null (be);
    double us = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_cuda_last_kernel_us (NULL, &us, &err), AK_EUNAVAIL);
#endif
    assert_null (ak_backend_find ("opencl"));
    assert_non_null (ak_backend_find ("host"));
}

/* ------------------------------------------------- options and the key */

static void s_req (ak_compile_req_t *req, const char *dir, const char *source, Ak__Device *dev)
{
    memset (req, 0, sizeof *req);
    req->source = source;
    req->source_len = strlen (source);
    req->dtype = AK_DT_FLOAT32;
    req->cache_dir = dir;
    req->timeout_ms = 60000;
    req->device = dev;
}

static void test_options (void **state)
{
    ak_compile_req_t req;
    s_req (&req, "/nonexistent", s_axpy, NULL);
    req.define_names[0] = "ALPHA";
    req.define_values[0] = 2;
    req.define_names[1] = "BLOCK";
    req.define_values[1] = -64;
    req.ndefines = 2;
    char *opts = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_cuda_options (&req, 9, 0, NULL, &opts, &err), 0);
    assert_string_equal (opts, "--gpu-architecture=sm_90\n--std=c++17\n-DAK_DTYPE_FLOAT32=1\n"
                               "-DALPHA=2\n-DBLOCK=-64");
    free (opts);
    assert_int_equal (ak_cuda_options (&req, 10, 0, "/opt/cuda/include", &opts, &err), 0);
    assert_non_null (strstr (opts, "--gpu-architecture=sm_100\n"));
    assert_non_null (strstr (opts, "--include-path=/opt/cuda/include\n-DAK_CUDA_HALF=1\n"));
    free (opts);

    /* float16 / bfloat16 need the toolkit headers. */
    req.dtype = AK_DT_FLOAT16;
    assert_int_equal (ak_cuda_options (&req, 9, 0, NULL, &opts, &err), AK_EUNSUPPORTED);
    assert_null (opts);
    assert_non_null (strstr (err.msg, "cuda_fp16.h"));
    assert_int_equal (ak_cuda_options (&req, 9, 0, "/x", &opts, &err), 0);
    assert_non_null (strstr (opts, "-DAK_DTYPE_FLOAT16=1"));
    free (opts);
    req.dtype = AK_DT_BFLOAT16;
    assert_int_equal (ak_cuda_options (&req, 9, 0, "/x", &opts, &err), 0);
    assert_non_null (strstr (opts, "-DAK_DTYPE_BFLOAT16=1"));
    free (opts);
    req.reference = true;
    assert_int_equal (ak_cuda_options (&req, 9, 0, NULL, &opts, &err), 0);
    assert_non_null (strstr (opts, "-DAK_REFERENCE=1"));
    assert_null (strstr (opts, "AK_DTYPE"));
    free (opts);
    req.reference = false;
    req.dtype = AK_DT_FLOAT32;

    /* Define names are checked, and ours are reserved. */
    const char *bad[] = { "AK_DTYPE_FLOAT16", "ak_t", "__CUDA_ARCH__", "1X", "A-B", "A B", "" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        req.define_names[1] = bad[i];
        assert_int_equal (ak_cuda_options (&req, 9, 0, NULL, &opts, &err), AK_EINVAL);
        assert_null (opts);
    }
    req.define_names[1] = "BLOCK";
    assert_int_equal (ak_cuda_options (&req, 0, 0, NULL, &opts, &err), AK_EINVAL);
}

static void test_cache_key (void **state)
{
    const char *src = s_axpy;
    size_t len = strlen (src);
    const char *opts = "--gpu-architecture=sm_90\n--std=c++17\n-DALPHA=2";
    char base[65], again[65], k[65];
    ak_cuda_cache_key (src, len, opts, "sm_90", "13.0", "", base);
    assert_true (ak_digest_valid (base));
    ak_cuda_cache_key (src, len, opts, "sm_90", "13.0", "", again);
    assert_string_equal (base, again);

    ak_cuda_cache_key (src, len - 1, opts, "sm_90", "13.0", "", k);          /* source */
    assert_string_not_equal (base, k);
    ak_cuda_cache_key (src, len, "--gpu-architecture=sm_90\n--std=c++17\n-DALPHA=3", "sm_90", "13.0", "", k);
    assert_string_not_equal (base, k);                                         /* options */
    ak_cuda_cache_key (src, len, opts, "sm_100", "13.0", "", k);              /* arch */
    assert_string_not_equal (base, k);
    ak_cuda_cache_key (src, len, opts, "sm_90", "13.1", "", k);               /* NVRTC */
    assert_string_not_equal (base, k);
    ak_cuda_cache_key (src, len, opts, "sm_90", "13.0", "ab", k);             /* headers */
    assert_string_not_equal (base, k);
    /* Parts are length-prefixed: moving a byte between parts changes it. */
    ak_cuda_cache_key (src, len, opts, "sm_9", "013.0", "", k);
    assert_string_not_equal (base, k);
}

/* --------------------------------------------------- compiles (NVRTC) */

typedef struct {
    char *dir;
    Ak__Device dev;
    const ak_backend_t *be;
} s_fix_t;

static int s_setup (void **state)
{
    s_fix_t *f = ak_calloc (1, sizeof *f);
    f->dir = ak_test_tmpdir ("cudaload");
    ak__device__init (&f->dev);
    f->dev.cc_major = 9;
    f->dev.cc_minor = 0;
    f->be = ak_backend_find ("cuda");
    *state = f;
    return 0;
}

static int s_teardown (void **state)
{
    s_fix_t *f = *state;
    ak_test_rmtree (f->dir);
    free (f->dir);
    free (f);
    return 0;
}

static void s_out_free (ak_compile_out_t *out)
{
    free (out->artifact_path);
    free (out->log);
    memset (out, 0, sizeof *out);
}

static int s_count_entries (const char *dir, const char *prefix)
{
    int n = 0;
    DIR *d = opendir (dir);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir (d)) != NULL)
        if (strncmp (de->d_name, prefix, strlen (prefix)) == 0)
            n++;
    closedir (d);
    return n;
}

static bool s_file_has (const char *path, const char *needle)
{
    char *data = NULL;
    size_t len = 0;
    if (ak_file_read (path, 64u << 20, &data, &len, NULL) != 0)
        return false;
    bool found = memmem (data, len, needle, strlen (needle)) != NULL;
    free (data);
    return found;
}

/*  NVRTC needs no driver: where it loads (this development machine has
    it), compile for an H200 (sm_90) for real. */
static void test_compile (void **state)
{
    s_fix_t *f = *state;
    ak_err_t err = { 0 };
    ak_test_cuda_or_skip (false, NULL, NULL);
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    s_req (&req, f->dir, s_axpy, &f->dev);
    req.define_names[0] = "ALPHA";
    req.define_values[0] = 2;
    req.ndefines = 1;

    assert_int_equal (f->be->compile (&req, &out, &err), 0);
    assert_false (out.cached);
    assert_true (ak_digest_valid (out.key));
    assert_true (ak_digest_valid (out.options_digest));
    assert_non_null (strstr (out.artifact_path, ".cubin"));
    assert_true (s_file_has (out.artifact_path, "\177ELF"));
    assert_true (s_file_has (out.artifact_path, "ak_kernel"));
    assert_true (s_file_has (out.artifact_path, "ak_fill_uniform"));
    print_message ("compiled in %.1f ms: %s\n", out.ms, out.artifact_path);
    char key[65];
    memcpy (key, out.key, sizeof key);
    s_out_free (&out);

    assert_int_equal (f->be->compile (&req, &out, &err), 0);   /* a hit */
    assert_true (out.cached);
    assert_string_equal (out.key, key);
    s_out_free (&out);

    /* Another arch or define is another artifact. */
    f->dev.cc_minor = 0;
    f->dev.cc_major = 8;
    assert_int_equal (f->be->compile (&req, &out, &err), 0);
    assert_false (out.cached);
    assert_string_not_equal (out.key, key);
    s_out_free (&out);
    f->dev.cc_major = 9;

    /* A compile error: AK_ECOMPILE with NVRTC's log, nothing cached. */
    ak_compile_req_t bad;
    s_req (&bad, f->dir, "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) { undefined_thing (); }\n",
           &f->dev);
    assert_int_equal (f->be->compile (&bad, &out, &err), AK_ECOMPILE);
    assert_non_null (out.log);
    assert_non_null (strstr (out.log, "undefined_thing"));
    assert_non_null (strstr (out.log, "kernel.cu"));
    assert_null (out.artifact_path);
    print_message ("broken source: %s\n%s", err.msg, out.log);
    s_out_free (&out);

    /* The compile limit kills the child; cancel does the same. */
    ak_compile_req_t slow;
    s_req (&slow, f->dir, "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) { }\n// slow\n", &f->dev);
    slow.timeout_ms = 1;
    assert_int_equal (f->be->compile (&slow, &out, &err), AK_ETIMEOUT);
    assert_non_null (strstr (err.msg, "killed"));
    s_out_free (&out);
    atomic_int cancel = 1;
    slow.timeout_ms = 60000;
    slow.cancel = &cancel;
    assert_int_equal (f->be->compile (&slow, &out, &err), AK_ETIMEOUT);
    assert_non_null (strstr (err.msg, "cancelled"));
    s_out_free (&out);
    assert_int_equal (s_count_entries (f->dir, ".build-"), 0);
    assert_int_equal (s_count_entries (f->dir, "."), 2);     /* "." and ".." only */

    /* An architecture NVRTC 13 does not build, and no target at all. */
    f->dev.cc_major = 3;
    assert_int_equal (f->be->compile (&req, &out, &err), AK_EUNSUPPORTED);
    s_out_free (&out);
    f->dev.cc_major = 9;
    req.device = NULL;
    assert_int_equal (f->be->compile (&req, &out, &err), AK_EINVAL);
    s_out_free (&out);
    req.device = &f->dev;

    /* Half precision and the float64 reference, where the headers are. */
    if (ak_cuda_include_dir ()) {
        ak_dtype_t dts[] = { AK_DT_FLOAT16, AK_DT_BFLOAT16 };
        for (int i = 0; i < 2; i++) {
            req.dtype = dts[i];
            assert_int_equal (f->be->compile (&req, &out, &err), 0);
            assert_false (out.cached);
            s_out_free (&out);
        }
        req.dtype = AK_DT_FLOAT32;
    }
    else
        print_message ("no cuda_fp16.h: float16/bfloat16 compiles not tried\n");
    req.reference = true;
    assert_int_equal (f->be->compile (&req, &out, &err), 0);
    s_out_free (&out);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_driver_loader),
        cmocka_unit_test (test_nvrtc_cupti_loader),
        cmocka_unit_test (test_backend_find),
        cmocka_unit_test (test_options),
        cmocka_unit_test (test_cache_key),
        cmocka_unit_test_setup_teardown (test_compile, s_setup, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
