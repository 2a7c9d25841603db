/*  tests/gpu/test_akprofile_launch.c: libakprofile on a real GPU.

    Forms this device's class with akp_device_from_cuda, writes a package
    for it the way `akctl profile export` does (softmax's warp_row CUDA
    candidate with ROWS=2 VEC=1 on 32x128 float32, the CUDA prelude), then
    runs lib/akprofile/example.c (akprofile-example): it must look the
    kernel up, compile it with NVRTC and launch it through the driver API,
    and every output it reads back must be written.  A lookup for another
    shape must fall back.  Then the same for a kernel of ABI 2
    (flash_attention's sm_90a wgmma with its three tensor maps).  Without a GPU: "SKIP: no GPU: <reason>", exit 77
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

/*  A package directory: sources/ with the kernel source and the prelude
    (their digests and paths into sd / rel and pd / prel), their lines in
    sums. */
typedef struct {
    char *dir;
    char  sd[65], pd[65], rel[128], prel[128], sums[4096];
} s_pkg_t;

static void s_pkg_sources (s_pkg_t *pk, const char *tag, const char *src, const char *pre)
{
    memset (pk, 0, sizeof *pk);
    pk->dir = ak_test_tmpdir (tag);
    char *srcdir = ak_path_join (pk->dir, "sources");
    ak_err_t err = { 0 };
    assert_int_equal (ak_mkdir_p (srcdir, 0755, &err), 0);
    free (srcdir);
    ak_sha256_hex (src, strlen (src), pk->sd);
    ak_sha256_hex (pre, strlen (pre), pk->pd);
    snprintf (pk->rel, sizeof pk->rel, "sources/%s.cu", pk->sd);
    snprintf (pk->prel, sizeof pk->prel, "sources/%s.h", pk->pd);
    s_put (pk->dir, pk->rel, src, pk->sums, sizeof pk->sums);
    s_put (pk->dir, pk->prel, pre, pk->sums, sizeof pk->sums);
}

/*  profile.json and SHA256SUMS into the package. */
static void s_pkg_write (s_pkg_t *pk, const char *json)
{
    s_put (pk->dir, "profile.json", json, pk->sums, sizeof pk->sums);
    char *sums_path = ak_path_join (pk->dir, "SHA256SUMS");
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_write_atomic (sums_path, pk->sums, strlen (pk->sums), &err), 0);
    free (sums_path);
}

/*  akprofile-example on the package with args: its output (caller
    frees), the exit status in *rc. */
static char *s_pkg_example (s_pkg_t *pk, const char *args, int *rc)
{
    char *example = ak_test_bin ("akprofile-example");
    char *cmd = ak_sprintf ("'%s' '%s' %s 2>&1", example, pk->dir, args);
    char *out = NULL;
    *rc = ak_test_run (cmd, &out);
    print_message ("%s", out);
    free (cmd);
    free (example);
    return out;
}

static void s_pkg_done (s_pkg_t *pk)
{
    ak_test_rmtree (pk->dir);
    free (pk->dir);
}

/*  This GPU as libakprofile sees it; skips (exit 77) where there is none. */
typedef struct {
    akp_device_t dev;
    char name[256], nvrtc[32], cls[512];
} s_gpu_t;

static void s_gpu (s_gpu_t *g)
{
    char why[1024];
    ak_test_cuda_or_skip (true, NULL, NULL);
    /* there is a GPU: the runtime library must find it too */
    if (akp_device_from_cuda (0, &g->dev, g->name, sizeof g->name, g->nvrtc, sizeof g->nvrtc, g->cls,
                              sizeof g->cls, why, sizeof why) != AKP_OK)
        fail_msg ("akp_device_from_cuda: %s", why);
    print_message ("device class %s\n", g->cls);
}

/*  profile.json of one class, g's, with the one entry (a JSON object,
    its source and prelude from pk's digests where it says %s: source
    digest, file, prelude digest, file); caller frees. */
static char *s_profile (const s_gpu_t *g, const s_pkg_t *pk, const char *entry_fmt)
{
    char *entry = ak_sprintf (entry_fmt, pk->sd, pk->rel, pk->pd, pk->prel);
    char *json = ak_sprintf (
        "{\"schema_version\":1,\"format\":\"akfleet-profile\",\"profile\":\"gpu\",\"classes\":[{"
        "\"device_class\":\"%s\",\"backend\":\"cuda\",\"device\":{\"name\":\"%s\",\"cc_major\":%d,"
        "\"cc_minor\":%d,\"driver_major\":%d,\"driver_version\":\"\",\"nvrtc_version\":\"%s\"},"
        "\"updated_ms\":1,\"entries\":[%s]}]}\n",
        g->cls, g->dev.name, g->dev.cc_major, g->dev.cc_minor, g->dev.driver_major, g->dev.nvrtc_version, entry);
    free (entry);
    return json;
}

static void test_launch_through_profile (void **state)
{
    (void) state;
    s_gpu_t g;
    s_gpu (&g);
    char *src = s_source ("kernels/softmax/cuda/warp_row.cu");
    char *pre = s_source ("kernels/ak_kernel_cuda.h");
    s_pkg_t pk;
    s_pkg_sources (&pk, "akp-gpu", src, pre);
    char *json = s_profile (&g, &pk,
        "{\"op\":\"softmax\",\"key\":\"softmax/rows=32,cols=128/float32\","
        "\"keys\":[\"rows\",\"cols\"],\"dims\":[32,128],\"dtype\":\"float32\",\"workload\":\"small\","
        "\"candidate\":\"warp_row\",\"params\":[{\"name\":\"ROWS\",\"value\":2},{\"name\":\"VEC\",\"value\":1}],"
        "\"backend\":\"cuda\",\"entry\":\"ak_kernel\",\"source\":{\"name\":\"warp_row.cu\",\"digest\":\"%s\","
        "\"file\":\"%s\"},\"prelude\":{\"digest\":\"%s\",\"file\":\"%s\"},\"launch\":{\"grid\":[16,1,1],"
        "\"block\":[32,2,1],\"shared_bytes\":0},\"inputs\":[{\"name\":\"x\",\"count\":4096}],"
        "\"outputs\":[{\"name\":\"y\",\"count\":4096}],\"speedup\":1.5,\"noise\":0.01,\"op_speedup\":1.5,"
        "\"op_noise\":0.01,\"baseline_us\":3,\"candidate_us\":2,\"evidence\":[\"R00000001\"],"
        "\"batch_id\":\"B000001\",\"task_id\":\"B000001.0002\",\"installed_ms\":1}");
    s_pkg_write (&pk, json);
    int rc = 0;
    char *out = s_pkg_example (&pk, "softmax float32 32 128", &rc);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "kernel: warp_row ROWS=2 VEC=1"));
    assert_non_null (strstr (out, "launched: ak_kernel"));
    assert_non_null (strstr (out, "(written)"));
    free (out);
    out = s_pkg_example (&pk, "softmax float32 32 129", &rc);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "fallback: no entry for softmax 32x129 float32"));
    free (out);
    free (json);
    free (src);
    free (pre);
    s_pkg_done (&pk);
}

/*  Kernel ABI 2 through libakprofile: flash_attention's sm_90a `wgmma`
    candidate (three TMA tensor maps, 164,864 bytes of dynamic shared
    memory) on 1x2x128x128 causal bfloat16, its maps as the coordinator
    records them (common/tmap.h, evaluated by hand here: dims {D, S, B*H},
    row strides D*2 and S*D*2 bytes, boxes {64, 128, 1}).  The example
    builds it for the entry's arch and launches it with akp_launch, which
    encodes the maps over its buffers: every output it reads back must be
    written (the outputs start as NaN).  Only an sm_90 device can run it. */
static void test_launch_abi2_flash (void **state)
{
    (void) state;
    s_gpu_t g;
    s_gpu (&g);
    if (g.dev.cc_major != 9 || g.dev.cc_minor != 0)
        skip ();                        /* an sm_90a kernel: compute capability 9.0 only */
    char *src = s_source ("kernels/flash_attention/cuda/wgmma.cu");
    char *p1 = s_source ("kernels/ak_kernel_cuda.h"), *p2 = s_source ("kernels/ak_blocks_cuda.h");
    char *p3 = s_source ("kernels/ak_hopper_cuda.h");
    char *pre = ak_sprintf ("%s\n%s\n%s", p1, p2, p3);  /* the three preludes, as the worker's text */
    s_pkg_t pk;
    s_pkg_sources (&pk, "akp-abi2", src, pre);
    /* the maps as the coordinator records them (dims {D, S, B*H}, row
       strides D*2 and S*D*2 bytes, boxes {64, 128, 1}), and the entry's
       buffer counts (1*2*128*128) */
    const char *map = "{\"name\":\"tm_%c\",\"buffer\":\"%c\",\"output\":false,\"index\":%d,"
                      "\"dims\":[128,128,2],\"strides\":[256,32768],\"box\":[64,128,1],\"elem_bytes\":2,"
                      "\"swizzle\":\"128B\",\"l2_promotion\":\"256B\",\"oob_fill\":\"zero\",\"absent\":false}";
    char *mq = ak_sprintf (map, 'q', 'q', 0), *mk = ak_sprintf (map, 'k', 'k', 1), *mv = ak_sprintf (map, 'v', 'v', 2);
    char *fmt = ak_sprintf (
        "{\"op\":\"flash_attention\",\"key\":\"flash_attention/B=1,H=2,S=128,D=128,mask=2/bfloat16\","
        "\"keys\":[\"B\",\"H\",\"S\",\"D\",\"mask\"],\"dims\":[1,2,128,128,2],\"dtype\":\"bfloat16\","
        "\"workload\":\"medium_causal\",\"candidate\":\"wgmma\",\"params\":[{\"name\":\"BN\",\"value\":128},"
        "{\"name\":\"STAGES\",\"value\":2},{\"name\":\"CONSUMERS\",\"value\":2},{\"name\":\"PINGPONG\",\"value\":1}],"
        "\"backend\":\"cuda\",\"entry\":\"ak_kernel\",\"arch\":\"sm_90a\",\"source\":{\"name\":\"wgmma.cu\","
        "\"digest\":\"%%s\",\"file\":\"%%s\"},\"prelude\":{\"digest\":\"%%s\",\"file\":\"%%s\"},"
        "\"launch\":{\"grid\":[1,2,1],\"block\":[384,1,1],\"shared_bytes\":164864,\"tensor_maps\":3,"
        "\"maps\":[%s,%s,%s]},\"inputs\":[{\"name\":\"q\",\"count\":32768},{\"name\":\"k\",\"count\":32768},"
        "{\"name\":\"v\",\"count\":32768}],\"outputs\":[{\"name\":\"o\",\"count\":32768}],\"speedup\":100,"
        "\"noise\":0.01,\"op_speedup\":100,\"op_noise\":0.01,\"baseline_us\":300,\"candidate_us\":3,"
        "\"evidence\":[\"R00000001\"],\"batch_id\":\"B000001\",\"task_id\":\"B000001.0002\",\"installed_ms\":1}",
        mq, mk, mv);
    char *json = s_profile (&g, &pk, fmt);
    free (fmt);
    free (mq);
    free (mk);
    free (mv);
    s_pkg_write (&pk, json);
    int rc = 0;
    char *out = s_pkg_example (&pk, "flash_attention bfloat16 1 2 128 128 2", &rc);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "launched: ak_kernel (wgmma)"));
    assert_non_null (strstr (out, "3 tensor maps"));
    assert_non_null (strstr (out, "(written)"));
    free (out);
    free (json);
    free (src);
    free (pre);
    free (p1);
    free (p2);
    free (p3);
    s_pkg_done (&pk);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_launch_through_profile),
        cmocka_unit_test (test_launch_abi2_flash),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
