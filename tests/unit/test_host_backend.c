/*  tests/unit/test_host_backend.c: the host backend (worker/backend_host.c). */
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "clock.h"
#include "util.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *dir;
    const ak_backend_t *be;
} s_fix_t;

static int s_setup (void **state)
{
    s_fix_t *f = ak_calloc (1, sizeof *f);
    f->dir = ak_test_tmpdir ("hostbe");
    f->be = ak_backend_find ("host");
    assert_non_null (f->dir);
    assert_non_null (f->be);
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

static void s_req (ak_compile_req_t *req, const char *dir, const char *source)
{
    memset (req, 0, sizeof *req);
    req->source = source;
    req->source_len = strlen (source);
    req->dtype = AK_DT_FLOAT32;
    req->cache_dir = dir;
    req->timeout_ms = 60000;
}

static void s_out_free (ak_compile_out_t *out)
{
    free (out->artifact_path);
    free (out->log);
    memset (out, 0, sizeof *out);
}

/*  Number of entries in dir whose name starts with prefix. */
static int s_count_entries (const char *dir, const char *prefix)
{
    int n = 0;
    DIR *d = opendir (dir);
    assert_non_null (d);
    struct dirent *de;
    while ((de = readdir (d)) != NULL)
        if (strncmp (de->d_name, prefix, strlen (prefix)) == 0)
            n++;
    closedir (d);
    return n;
}

/*  Loads path and runs its ak_kernel on one float output, returns out[0]. */
static double s_run_one (const ak_backend_t *be, const char *path, bool reference)
{
    ak_dev_t *dev = NULL;
    ak_kernel_t *k = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (be->open (NULL, &dev, &err), 0);
    assert_int_equal (be->load (dev, path, "ak_kernel", &k, &err), 0);
    double out[4] = { 0 };
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.ndims = 1;
    l.dims[0] = 1;
    l.nout = 1;
    l.out[0] = out;
    assert_int_equal (be->launch (dev, k, &l, &err), 0);
    double us = -1;
    assert_int_equal (be->time (dev, k, &l, true, &us, &err), 0);
    assert_true (us >= 0);
    be->unload (dev, &k);
    assert_null (k);
    be->close (&dev);
    assert_null (dev);
    if (reference)
        return out[0];
    float f;
    memcpy (&f, out, sizeof f);
    return (double) f;
}

static const char *s_scale_src =
    "void ak_kernel (const ak_args_t *a) { AK_OUT (a, 0)[0] = (ak_t) SCALE; }\n";

static void test_find (void **state)
{
    (void) state;
    assert_ptr_equal (ak_backend_find ("host"), ak_backend_host ());
#if AK_HAVE_CUDA
    assert_non_null (ak_backend_find ("cuda"));
#else
    assert_null (ak_backend_find ("cuda"));
#endif
    assert_null (ak_backend_find (NULL));
    assert_null (ak_backend_find ("bogus"));
    const ak_backend_t *be = ak_backend_host ();
    assert_true (be->supports_dtype (NULL, AK_DT_FLOAT32));
    assert_false (be->supports_dtype (NULL, AK_DT_FLOAT16));
    assert_false (be->supports_dtype (NULL, AK_DT_BFLOAT16));
}

static void test_probe (void **state)
{
    s_fix_t *f = *state;
    Ak__Device **devs = NULL;
    size_t n = 0;
    ak_err_t err = { 0 };
    assert_int_equal (f->be->probe (&devs, &n, &err), 0);
    assert_int_equal (n, 1);
    assert_string_equal (devs[0]->backend, "host");
    assert_string_equal (devs[0]->device_class, "host");
    assert_true (strlen (devs[0]->name) > 0);
    assert_int_equal (devs[0]->index, 0);
    assert_true (devs[0]->l2_bytes >= 64 * 1024);
    ak__device__free_unpacked (devs[0], NULL);
    free (devs);
}

/*  First compile builds and renames into cache/<key>.so; the second is a
    cache hit with the same key and path; no build directory is left. */
static void test_compile_and_cache (void **state)
{
    s_fix_t *f = *state;
    ak_compile_req_t req;
    ak_compile_out_t out, again;
    ak_err_t err = { 0 };
    s_req (&req, f->dir, s_scale_src);
    const char *names[] = { "SCALE" };
    req.define_names[0] = names[0];
    req.define_values[0] = 2;
    req.ndefines = 1;

    assert_int_equal (f->be->compile (&req, &out, &err), 0);
    assert_false (out.cached);
    assert_int_equal (strlen (out.key), 64);
    assert_int_equal (strlen (out.options_digest), 64);
    char *expect = ak_sprintf ("%s/%s.so", f->dir, out.key);
    assert_string_equal (out.artifact_path, expect);
    free (expect);
    struct stat st;
    assert_int_equal (stat (out.artifact_path, &st), 0);
    assert_true (S_ISREG (st.st_mode) && st.st_size > 0);
    assert_int_equal (s_count_entries (f->dir, ".build-"), 0);
    assert_non_null (out.log);
    assert_true (out.ms > 0);

    assert_int_equal (f->be->compile (&req, &again, &err), 0);
    assert_true (again.cached);
    assert_string_equal (again.key, out.key);
    assert_string_equal (again.artifact_path, out.artifact_path);
    assert_string_equal (again.options_digest, out.options_digest);
    assert_float_equal (s_run_one (f->be, out.artifact_path, false), 2.0, 0);
    s_out_free (&out);
    s_out_free (&again);
}

/*  The same source with another define value is another artifact that
    behaves differently; the reference flag switches ak_t to double. */
static void test_params_change_behaviour (void **state)
{
    s_fix_t *f = *state;
    ak_compile_req_t req;
    ak_compile_out_t a, b, r;
    ak_err_t err = { 0 };
    s_req (&req, f->dir, s_scale_src);
    req.define_names[0] = "SCALE";
    req.define_values[0] = 3;
    req.ndefines = 1;
    assert_int_equal (f->be->compile (&req, &a, &err), 0);
    req.define_values[0] = 5;
    assert_int_equal (f->be->compile (&req, &b, &err), 0);
    assert_string_not_equal (a.key, b.key);
    assert_string_not_equal (a.options_digest, b.options_digest);
    assert_float_equal (s_run_one (f->be, a.artifact_path, false), 3.0, 0);
    assert_float_equal (s_run_one (f->be, b.artifact_path, false), 5.0, 0);

    const char *size_src =
        "void ak_kernel (const ak_args_t *a) { AK_OUT (a, 0)[0] = (ak_t) sizeof (ak_t); }\n";
    s_req (&req, f->dir, size_src);
    req.reference = true;
    assert_int_equal (f->be->compile (&req, &r, &err), 0);
    assert_float_equal (s_run_one (f->be, r.artifact_path, true), 8.0, 0);
    s_out_free (&r);
    req.reference = false;
    assert_int_equal (f->be->compile (&req, &r, &err), 0);
    assert_float_equal (s_run_one (f->be, r.artifact_path, false), 4.0, 0);
    s_out_free (&a);
    s_out_free (&b);
    s_out_free (&r);
}

static void test_compile_error (void **state)
{
    s_fix_t *f = *state;
    ak_compile_req_t req;
    ak_compile_out_t out;
    ak_err_t err = { 0 };
    s_req (&req, f->dir, "void ak_kernel (const ak_args_t *a) { this is not C; }\n");
    assert_int_equal (f->be->compile (&req, &out, &err), AK_ECOMPILE);
    assert_int_equal (err.code, AK_ECOMPILE);
    assert_null (out.artifact_path);
    assert_non_null (out.log);
    assert_non_null (strstr (out.log, "error"));
    /* The prelude is hidden: line numbers are those of the source. */
    assert_non_null (strstr (out.log, "kernel.c:1:"));
    assert_int_equal (s_count_entries (f->dir, ".build-"), 0);
    char *so = ak_sprintf ("%s/%s.so", f->dir, out.key);
    assert_int_not_equal (access (so, F_OK), 0);
    free (so);
    s_out_free (&out);
}

static void test_bad_requests (void **state)
{
    s_fix_t *f = *state;
    ak_compile_req_t req;
    ak_compile_out_t out;
    ak_err_t err = { 0 };
    s_req (&req, f->dir, s_scale_src);
    req.define_names[0] = "SCALE=1 -o /tmp/x";
    req.define_values[0] = 1;
    req.ndefines = 1;
    assert_int_equal (f->be->compile (&req, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "identifier"));
    s_out_free (&out);
    req.define_names[0] = "AK_MAX_DIMS";
    assert_int_equal (f->be->compile (&req, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "reserved"));
    s_out_free (&out);
    req.ndefines = 0;
    req.dtype = AK_DT_FLOAT16;
    assert_int_equal (f->be->compile (&req, &out, &err), AK_EUNSUPPORTED);
    s_out_free (&out);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = NULL;
    assert_int_equal (f->be->compile (&req, &out, &err), AK_EINVAL);
    s_out_free (&out);

    /* A missing symbol and a missing file are load errors, not crashes. */
    ak_dev_t *dev = NULL;
    ak_kernel_t *k = NULL;
    assert_int_equal (f->be->open (NULL, &dev, &err), 0);
    assert_int_not_equal (f->be->load (dev, "/nonexistent/x.so", "ak_kernel", &k, &err), 0);
    s_req (&req, f->dir, s_scale_src);
    req.define_names[0] = "SCALE";
    req.define_values[0] = 1;
    req.ndefines = 1;
    assert_int_equal (f->be->compile (&req, &out, &err), 0);
    assert_int_equal (f->be->load (dev, out.artifact_path, "ak_reference", &k, &err), AK_ENOTFOUND);
    assert_null (k);
    f->be->close (&dev);
    s_out_free (&out);
}

/*  A source whose preprocessing explodes is killed at the limit, and a
    raised cancel flag stops a compile at once; nothing lands in the cache. */
static void test_compile_timeout (void **state)
{
    s_fix_t *f = *state;
    const char *slow =
        "#define X1 x = x * 3 + 1;\n"
        "#define X2 X1 X1 X1 X1 X1 X1 X1 X1 X1 X1\n"
        "#define X3 X2 X2 X2 X2 X2 X2 X2 X2 X2 X2\n"
        "#define X4 X3 X3 X3 X3 X3 X3 X3 X3 X3 X3\n"
        "#define X5 X4 X4 X4 X4 X4 X4 X4 X4 X4 X4\n"
        "#define X6 X5 X5 X5 X5 X5 X5 X5 X5 X5 X5\n"
        "#define X7 X6 X6 X6 X6 X6 X6 X6 X6 X6 X6\n"
        "#define X8 X7 X7 X7 X7 X7 X7 X7 X7 X7 X7\n"
        "void ak_kernel (const ak_args_t *a) { volatile int x = 0; X8 X8 X8 (void) a; }\n";
    ak_compile_req_t req;
    ak_compile_out_t out;
    ak_err_t err = { 0 };
    s_req (&req, f->dir, slow);
    req.timeout_ms = 400;
    uint64_t t0 = ak_clock_mono_ms ();
    assert_int_equal (f->be->compile (&req, &out, &err), AK_ETIMEOUT);
    uint64_t took = ak_clock_mono_ms () - t0;
    assert_true (took < 5000);
    assert_null (out.artifact_path);
    assert_int_equal (s_count_entries (f->dir, ".build-"), 0);
    s_out_free (&out);

    atomic_int cancel;
    atomic_init (&cancel, 1);
    req.timeout_ms = 60000;
    req.cancel = &cancel;
    t0 = ak_clock_mono_ms ();
    assert_int_equal (f->be->compile (&req, &out, &err), AK_ETIMEOUT);
    assert_non_null (strstr (err.msg, "cancelled"));
    assert_true (ak_clock_mono_ms () - t0 < 5000);
    s_out_free (&out);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_find),
        cmocka_unit_test_setup_teardown (test_probe, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_compile_and_cache, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_params_change_behaviour, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_compile_error, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_bad_requests, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_compile_timeout, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
