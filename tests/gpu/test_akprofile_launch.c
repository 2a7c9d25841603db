/*  tests/gpu/test_akprofile_launch.c: libakprofile on a real GPU.

    Forms this device's class with akp_device_from_cuda, writes a package
    for it the way `akctl profile export` does (softmax's warp_row CUDA
    candidate with ROWS=2 VEC=1 on 32x128 float32, the CUDA prelude), then
    runs lib/akprofile/example.c (akprofile-example): it must look the
    kernel up, compile it with NVRTC and launch it through the driver API,
    and every output it reads back must be written.  A lookup for another
    shape must fall back.  Without a GPU: "SKIP: no GPU: <reason>", exit 77
    (tests/skip.h: CTest shows "Not Run"); any other probe error fails. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akprofile.h"
#include "digest.h"
#include "util.h"

static void s_put (const char *dir, const char *rel, const char *text, char *sums, size_t cap)
{
    char *path = ak_path_join (dir, rel);
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_write_atomic (path, text, strlen (text), &err), 0);
    free (path);
    char hex[65];
    ak_sha256_hex (text, strlen (text), hex);
    size_t len = strlen (sums);
    snprintf (sums + len, cap - len, "%s  %s\n", hex, rel);
}

static char *s_source (const char *rel)
{
    char *path = ak_test_src (rel), *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    if (ak_file_read (path, 1 << 20, &text, &len, &err) != 0)
        fail_msg ("%s", err.msg);
    free (path);
    return text;
}

static void test_launch_through_profile (void **state)
{
    akp_device_t dev;
    char name[256], nvrtc[32], cls[512], why[1024];
    ak_test_cuda_or_skip (true, NULL, NULL);
    /* there is a GPU: the runtime library must find it too */
    if (akp_device_from_cuda (0, &dev, name, sizeof name, nvrtc, sizeof nvrtc, cls, sizeof cls, why,
                              sizeof why) != AKP_OK)
        fail_msg ("akp_device_from_cuda: %s", why);
    print_message ("device class %s\n", cls);
    char *dir = ak_test_tmpdir ("akp-gpu");
    char *srcdir = ak_path_join (dir, "sources");
    ak_err_t err = { 0 };
    assert_int_equal (ak_mkdir_p (srcdir, 0755, &err), 0);
    char *src = s_source ("kernels/softmax/cuda/warp_row.cu");
    char *pre = s_source ("kernels/ak_kernel_cuda.h");
    char sd[65], pd[65], rel[128], prel[128], sums[4096] = "";
    ak_sha256_hex (src, strlen (src), sd);
    ak_sha256_hex (pre, strlen (pre), pd);
    snprintf (rel, sizeof rel, "sources/%s.cu", sd);
    snprintf (prel, sizeof prel, "sources/%s.h", pd);
    s_put (dir, rel, src, sums, sizeof sums);
    s_put (dir, prel, pre, sums, sizeof sums);
    char *json = ak_sprintf (
        "{\"schema_version\":1,\"format\":\"akfleet-profile\",\"profile\":\"gpu\",\"classes\":[{"
        "\"device_class\":\"%s\",\"backend\":\"cuda\",\"device\":{\"name\":\"%s\",\"cc_major\":%d,"
        "\"cc_minor\":%d,\"driver_major\":%d,\"driver_version\":\"\",\"nvrtc_version\":\"%s\"},"
        "\"updated_ms\":1,\"entries\":[{\"op\":\"softmax\",\"key\":\"softmax/rows=32,cols=128/float32\","
        "\"keys\":[\"rows\",\"cols\"],\"dims\":[32,128],\"dtype\":\"float32\",\"workload\":\"small\","
        "\"candidate\":\"warp_row\",\"params\":[{\"name\":\"ROWS\",\"value\":2},{\"name\":\"VEC\",\"value\":1}],"
        "\"backend\":\"cuda\",\"entry\":\"ak_kernel\",\"source\":{\"name\":\"warp_row.cu\",\"digest\":\"%s\","
        "\"file\":\"%s\"},\"prelude\":{\"digest\":\"%s\",\"file\":\"%s\"},\"launch\":{\"grid\":[16,1,1],"
        "\"block\":[32,2,1],\"shared_bytes\":0},\"inputs\":[{\"name\":\"x\",\"count\":4096}],"
        "\"outputs\":[{\"name\":\"y\",\"count\":4096}],\"speedup\":1.5,\"noise\":0.01,\"op_speedup\":1.5,"
        "\"op_noise\":0.01,\"baseline_us\":3,\"candidate_us\":2,\"evidence\":[\"R00000001\"],"
        "\"batch_id\":\"B000001\",\"task_id\":\"B000001.0002\",\"installed_ms\":1}]}]}\n",
        cls, dev.name, dev.cc_major, dev.cc_minor, dev.driver_major, dev.nvrtc_version, sd, rel, pd, prel);
    s_put (dir, "profile.json", json, sums, sizeof sums);
    char *sums_path = ak_path_join (dir, "SHA256SUMS");
    assert_int_equal (ak_file_write_atomic (sums_path, sums, strlen (sums), &err), 0);

    char *example = ak_test_bin ("akprofile-example");
    char *cmd = ak_sprintf ("'%s' '%s' softmax float32 32 128 2>&1", example, dir);
    char *out = NULL;
    int rc = ak_test_run (cmd, &out);
    print_message ("%s", out);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "kernel: warp_row ROWS=2 VEC=1"));
    assert_non_null (strstr (out, "launched: ak_kernel"));
    assert_non_null (strstr (out, "(written)"));
    free (out);
    free (cmd);
    cmd = ak_sprintf ("'%s' '%s' softmax float32 32 129 2>&1", example, dir);
    rc = ak_test_run (cmd, &out);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "fallback: no entry for softmax 32x129 float32"));
    free (out);
    free (cmd);
    free (example);
    free (sums_path);
    free (json);
    free (src);
    free (pre);
    free (srcdir);
    ak_test_rmtree (dir);
    free (dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_launch_through_profile),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
