/*  tests/unit/test_akprofile.c: libakprofile on packages written here the
    way `akctl profile export` writes them: loading, exact lookups and the
    fallbacks (never a near match), device matching, and tamper detection
    (changed, missing, extra files, links, paths leaving the package). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "akprofile.h"
#include "digest.h"
#include "util.h"

#define S_CLASS "NVIDIA_H200/sm_90/drv580/nvrtc13.0"
static const char s_src[] = "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) { }\n";
static const char s_prelude[] = "/* prelude */\n";

typedef struct {
    char *dir;
    char  sums[8192];
    char *json;                 /* profile.json as s_setup wrote it */
} s_pkg_t;

static void s_file (s_pkg_t *p, const char *rel, const char *text)
{
    char *path = ak_path_join (p->dir, rel);
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_write_atomic (path, text, strlen (text), &err), 0);
    free (path);
    char hex[65];
    ak_sha256_hex (text, strlen (text), hex);
    size_t len = strlen (p->sums);
    snprintf (p->sums + len, sizeof p->sums - len, "%s  %s\n", hex, rel);
}

static void s_sums (s_pkg_t *p)
{
    char *path = ak_path_join (p->dir, "SHA256SUMS");
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_write_atomic (path, p->sums, strlen (p->sums), &err), 0);
    free (path);
}

static int s_setup (void **state)
{
    s_pkg_t *p = calloc (1, sizeof *p);
    p->dir = ak_test_tmpdir ("akprofile");
    char *src = ak_path_join (p->dir, "sources");
    ak_err_t err = { 0 };
    assert_int_equal (ak_mkdir_p (src, 0755, &err), 0);
    free (src);
    char sd[65], pd[65], rel[128], prel[128];
    ak_sha256_hex (s_src, strlen (s_src), sd);
    ak_sha256_hex (s_prelude, strlen (s_prelude), pd);
    snprintf (rel, sizeof rel, "sources/%s.cu", sd);
    snprintf (prel, sizeof prel, "sources/%s.h", pd);
    s_file (p, rel, s_src);
    s_file (p, prel, s_prelude);
    char *json = ak_sprintf (
        "{\"schema_version\":1,\"format\":\"akfleet-profile\",\"profile\":\"prod\",\"classes\":[{"
        "\"device_class\":\"%s\",\"backend\":\"cuda\",\"device\":{\"name\":\"NVIDIA H200\",\"cc_major\":9,"
        "\"cc_minor\":0,\"driver_major\":580,\"driver_version\":\"580.65\",\"nvrtc_version\":\"13.0\"},"
        "\"updated_ms\":1,\"entries\":[{\"op\":\"softmax\",\"key\":\"softmax/rows=32,cols=128/float32\","
        "\"keys\":[\"rows\",\"cols\"],\"dims\":[32,128],\"dtype\":\"float32\",\"workload\":\"small\","
        "\"candidate\":\"warp_row\",\"params\":[{\"name\":\"ROWS\",\"value\":2},{\"name\":\"VEC\",\"value\":4}],"
        "\"backend\":\"cuda\",\"entry\":\"ak_kernel\",\"source\":{\"name\":\"warp_row.cu\",\"digest\":\"%s\","
        "\"file\":\"%s\"},\"prelude\":{\"digest\":\"%s\",\"file\":\"%s\"},\"launch\":{\"grid\":[16,1,1],"
        "\"block\":[32,2,1],\"shared_bytes\":0},\"inputs\":[{\"name\":\"x\",\"count\":4096}],"
        "\"outputs\":[{\"name\":\"y\",\"count\":4096}],\"speedup\":1.8,\"noise\":0.02,\"op_speedup\":1.7,"
        "\"op_noise\":0.02,\"baseline_us\":10,\"candidate_us\":5.5,\"evidence\":[\"R00000007\",\"R00000001\"],"
        "\"batch_id\":\"B000001\",\"task_id\":\"B000001.0007\",\"installed_ms\":1}]}]}\n",
        S_CLASS, sd, rel, pd, prel);
    s_file (p, "profile.json", json);
    p->json = json;
    s_sums (p);
    *state = p;
    return 0;
}

static int s_teardown (void **state)
{
    s_pkg_t *p = *state;
    ak_test_rmtree (p->dir);
    free (p->dir);
    free (p->json);
    free (p);
    return 0;
}

static void test_lookup_exact_and_fallbacks (void **state)
{
    s_pkg_t *pk = *state;
    char err[1024];
    akp_profile_t *p = NULL;
    assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_OK);
    assert_string_equal (akp_name (p), "prod");
    assert_int_equal (akp_class_count (p), 1);

    const akp_kernel_t *k = NULL;
    int64_t dims[2] = { 32, 128 };
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", dims, 2, "float32", &k, err, sizeof err), AKP_OK);
    assert_string_equal (k->candidate, "warp_row");
    assert_string_equal (k->entry, "ak_kernel");
    assert_int_equal (k->nparams, 2);
    assert_string_equal (k->param_names[0], "ROWS");
    assert_int_equal (k->param_values[1], 4);
    assert_true (k->has_launch);
    assert_int_equal (k->grid[0], 16);
    assert_int_equal (k->block[1], 2);
    assert_int_equal (k->input_counts[0], 4096);
    assert_memory_equal (k->source, s_src, strlen (s_src));
    assert_memory_equal (k->prelude, s_prelude, strlen (s_prelude));
    assert_string_equal (k->evidence[0], "R00000007");

    char buf[256];
    const char *opts[8];
    size_t n = 0;
    assert_int_equal (akp_compile_options (k, buf, sizeof buf, opts, 8, &n), AKP_OK);
    assert_int_equal (n, 3);
    assert_string_equal (opts[0], "-DAK_DTYPE_FLOAT32=1");   /* the worker's text (ak_cuda_options) */
    assert_string_equal (opts[1], "-DROWS=2");

    /* never a near match */
    int64_t near[2] = { 32, 129 };
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", near, 2, "float32", &k, err, sizeof err), AKP_FALLBACK);
    assert_null (k);
    assert_non_null (strstr (err, "no entry for softmax 32x129 float32"));
    assert_non_null (strstr (err, "default kernel"));
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", dims, 2, "float16", &k, err, sizeof err), AKP_FALLBACK);
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", dims, 1, "float32", &k, err, sizeof err), AKP_FALLBACK);
    assert_int_equal (akp_lookup (p, S_CLASS, "matmul", dims, 2, "float32", &k, err, sizeof err), AKP_FALLBACK);
    assert_non_null (strstr (err, "no entry for this operator"));
    assert_int_equal (akp_lookup (p, "NVIDIA_H200/sm_90/drv570/nvrtc13.0", "softmax", dims, 2, "float32", &k,
                                  err, sizeof err), AKP_FALLBACK);
    assert_non_null (strstr (err, "not applied"));
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", NULL, 2, "float32", &k, err, sizeof err), AKP_EINVAL);
    akp_destroy (&p);
    akp_destroy (&p);
}

/*  The package again, the text `at` of s_setup's profile.json (which must
    be there) replaced by `with`, checksummed anew as an export would. */
static void s_repackage (s_pkg_t *pk, const char *at, const char *with)
{
    char *text = ak_strdup (pk->json);
    char *a = strstr (text, at);
    assert_non_null (a);
    *a = '\0';
    char *mod = ak_sprintf ("%s%s%s", text, with, a + strlen (at));
    char sd[65], pd[65], rel[128], prel[128];
    ak_sha256_hex (s_src, strlen (s_src), sd);
    ak_sha256_hex (s_prelude, strlen (s_prelude), pd);
    snprintf (rel, sizeof rel, "sources/%s.cu", sd);
    snprintf (prel, sizeof prel, "sources/%s.h", pd);
    pk->sums[0] = '\0';
    s_file (pk, rel, s_src);
    s_file (pk, prel, s_prelude);
    s_file (pk, "profile.json", mod);
    s_sums (pk);
    free (mod);
    free (text);
}

/*  An entry of kernel ABI 2 this library cannot launch (tensor maps
    without their configurations, as packages exported before they were
    recorded have them; a thread-block cluster): the lookup falls back and
    says why, instead of launching a kernel without the parameters it
    reads. */
static void test_abi2_entry_falls_back (void **state)
{
    s_pkg_t *pk = *state;
    char err[1024];
    s_repackage (pk, "\"shared_bytes\":0}", "\"shared_bytes\":0,\"tensor_maps\":2,\"cluster\":[2,1,1]}");
    akp_profile_t *p = NULL;
    assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_OK);
    const akp_kernel_t *k = NULL;
    int64_t dims[2] = { 32, 128 };
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", dims, 2, "float32", &k, err, sizeof err), AKP_FALLBACK);
    assert_null (k);
    assert_non_null (strstr (err, "kernel ABI 2 (TMA tensor maps without their configurations: a package exported "
                                  "before they were recorded, a thread-block cluster)"));
    assert_non_null (strstr (err, "run the default kernel"));
    akp_destroy (&p);
}

/* A tensor map over x (4096 float32 as 32 rows of 128), %s for its
   fields to change: the tests' way to break it. */
#define S_MAP "{\"name\":\"tm_x\",\"buffer\":\"x\",\"output\":false,\"index\":%d,\"dims\":[128,%d]," \
    "\"strides\":[%d],\"box\":[32,%d],\"elem_bytes\":%d,\"swizzle\":\"128B\",\"l2_promotion\":\"256B\"," \
    "\"oob_fill\":\"zero\",\"absent\":false}"

/*  An entry with its tensor maps recorded and an arch-specific build is
    applied: the lookup answers it with the map (what akp_launch encodes)
    and the architecture a binding builds it for. */
static void test_abi2_maps_applied (void **state)
{
    s_pkg_t *pk = *state;
    char err[1024], *map = ak_sprintf (S_MAP, 0, 32, 512, 8, 4);
    char *with = ak_sprintf ("\"shared_bytes\":0,\"tensor_maps\":1,\"maps\":[%s]},\"arch\":\"sm_90a\",", map);
    s_repackage (pk, "\"shared_bytes\":0},", with);
    akp_profile_t *p = NULL;
    assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_OK);
    const akp_kernel_t *k = NULL;
    int64_t dims[2] = { 32, 128 };
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", dims, 2, "float32", &k, err, sizeof err), AKP_OK);
    assert_string_equal (k->arch, "sm_90a");
    assert_int_equal (k->ntmaps, 1);
    const akp_tmap_t *m = &k->tmaps[0];
    assert_string_equal (m->name, "tm_x");
    assert_false (m->output);
    assert_int_equal (m->index, 0);
    assert_int_equal (m->rank, 2);
    assert_int_equal (m->dims[0], 128);
    assert_int_equal (m->dims[1], 32);
    assert_int_equal (m->strides[0], 512);
    assert_int_equal (m->box[0], 32);
    assert_int_equal (m->box[1], 8);
    assert_int_equal (m->elem_bytes, 4);
    assert_int_equal (m->swizzle, 3);
    assert_int_equal (m->l2, 3);
    assert_int_equal (m->oob, 0);
    assert_false (m->absent);
    akp_destroy (&p);
    free (with);
    free (map);
}

/*  A map that would let the TMA unit read past the entry's buffer, or that
    breaks cuTensorMapEncodeTiled's rules, refuses the package at load,
    naming the rule of common/tmap.h it breaks: libakprofile encodes what
    the package says over the caller's buffers. */
static void test_abi2_maps_refused (void **state)
{
    s_pkg_t *pk = *state;
    struct {
        int index, rows, stride, boxr, elem;
        const char *why;
    } cases[] = {
        { 0, 64, 512, 8, 4, "rule extent: 64 x 512 bytes reach past the buffer's 16384 bytes" },
        { 1, 32, 512, 8, 4, "index (of the entry's buffers)" },
        { 0, 32, 512, 300, 4, "rule box: box[1] = 300: must be 1..256" },
        { 0, 32, 520, 8, 4, "rule strides: strides[0] = 520 bytes: must be a multiple of 16" },
        { 0, 32, 256, 8, 4, "(dimension 1 would overlap dimension 0)" },
        { 0, 32, 512, 8, 2, "elem_bytes (the dtype's)" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char err[1024], *map = ak_sprintf (S_MAP, cases[c].index, cases[c].rows, cases[c].stride, cases[c].boxr,
                                           cases[c].elem);
        char *with = ak_sprintf ("\"shared_bytes\":0,\"tensor_maps\":1,\"maps\":[%s]}", map);
        s_repackage (pk, "\"shared_bytes\":0}", with);
        akp_profile_t *p = NULL;
        assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_EINVAL);
        assert_null (p);
        if (!strstr (err, cases[c].why))
            fail_msg ("case %zu: '%s' does not say '%s'", c, err, cases[c].why);
        free (with);
        free (map);
    }
}

/* A vendor entry as the coordinator writes it (matmul 64x64x32 float16,
   cuBLASLt kept), %s before its first field and %s after its last: the
   tests' way to break it. */
#define S_VENDOR "{%s\"kind\":\"vendor\",\"op\":\"matmul\",\"key\":\"matmul/M=64,N=64,K=32/float16\"," \
    "\"keys\":[\"M\",\"N\",\"K\"],\"dims\":[64,64,32],\"dtype\":\"float16\",\"workload\":\"small\"," \
    "\"candidate\":\"mma\",\"params\":[{\"name\":\"BM\",\"value\":64}],\"backend\":\"cuda\"," \
    "\"speedup\":1.01,\"noise\":0.02,\"op_speedup\":1.01,\"op_noise\":0.02,\"baseline_us\":10," \
    "\"candidate_us\":9.9,\"evidence\":[\"R00000009\"],\"batch_id\":\"B000002\",\"task_id\":\"B000002.0001\"," \
    "\"installed_ms\":1,\"confirmed_on\":null,\"vendor\":\"cublaslt\",\"vendor_op\":\"matmul\"," \
    "\"reason\":\"no candidate beat cuBLASLt beyond the noise at small/float16: the best there, mma BM=64, " \
    "ran 1.01x +- 0.02; over the operator's workloads: best candidate mma BM=64: 1.01x +- 0.02, " \
    "not beyond the 3%% threshold by more than its noise\"%s}"

/*  Where the profile kept the vendor library, the lookup falls back with
    the entry's reason and names the library; the entry is listed with its
    kind, library, reason and time, and has no kernel.  The kernel entry
    beside it (without "kind", as before kinds) is applied as before. */
static void test_vendor_entry_falls_back (void **state)
{
    s_pkg_t *pk = *state;
    char err[1024], *vendor = ak_sprintf (S_VENDOR, "", "");
    char *with = ak_sprintf ("\"installed_ms\":1},%s]", vendor);
    s_repackage (pk, "\"installed_ms\":1}]", with);
    akp_profile_t *p = NULL;
    assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_OK);
    const akp_kernel_t *k = NULL;
    int64_t mm[3] = { 64, 64, 32 }, sm[2] = { 32, 128 };
    assert_int_equal (akp_lookup (p, S_CLASS, "matmul", mm, 3, "float16", &k, err, sizeof err), AKP_FALLBACK);
    assert_null (k);
    assert_string_equal (err, "entry for matmul 64x64x32 float16 on " S_CLASS ": vendor entry: no candidate beat "
                              "cuBLASLt beyond the noise at small/float16: the best there, mma BM=64, ran 1.01x "
                              "+- 0.02; over the operator's workloads: best candidate mma BM=64: 1.01x +- 0.02, not "
                              "beyond the 3% threshold by more than its noise: run the default kernel (the vendor "
                              "library cublaslt)");
    assert_int_equal (akp_entry_count (p, 0), 2);
    const akp_kernel_t *v = akp_entry (p, 0, 1);
    assert_string_equal (v->kind, "vendor");
    assert_string_equal (v->vendor, "cublaslt");
    assert_string_equal (v->vendor_op, "matmul");
    assert_non_null (strstr (v->reason, "no candidate beat cuBLASLt"));
    assert_true (v->baseline_us == 10);
    assert_null (v->source);
    assert_false (v->has_launch);
    assert_string_equal (v->entry, "");
    assert_int_equal (akp_lookup (p, S_CLASS, "softmax", sm, 2, "float32", &k, err, sizeof err), AKP_OK);
    assert_string_equal (k->kind, "kernel");
    assert_string_equal (k->reason, "");
    akp_destroy (&p);
    free (with);
    free (vendor);
}

/*  A malformed vendor entry (no reason, a reason of another type, an
    unknown kind, a kernel's fields, a time that is not a number) refuses
    the package, naming the entry and the field; never a crash. */
static void test_vendor_entry_malformed (void **state)
{
    s_pkg_t *pk = *state;
    static const struct {
        const char *field, *value, *msg;   /* value NULL: the field removed */
    } edits[] = {
        { "\"reason\":", NULL, "classes[0].entries[1].reason: a vendor entry needs a non-empty string" },
        { "\"reason\":", "42", "classes[0].entries[1].reason: a vendor entry needs a non-empty string" },
        { "\"kind\":", "\"magic\"", "classes[0].entries[1].kind: unknown kind 'magic' (kernel or vendor)" },
        { "\"kind\":", "[1]", "classes[0].entries[1].kind: unknown kind '(not a string)'" },
        { "\"vendor\":", "\"\"", "classes[0].entries[1].vendor: a vendor entry needs a non-empty string" },
        { "\"baseline_us\":", "\"10\"", "classes[0].entries[1].baseline_us: must be a non-negative number" },
        { "\"backend\":", "\"host\"", "classes[0].entries[1].backend: a vendor entry is a cuda library call" },
        { "\"op\":", NULL, "classes[0].entries[1]: op, dtype, entry, candidate and backend are required (a vendor" },
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        /* the entry with the field's value replaced (or the field gone) */
        char *vendor = ak_sprintf (S_VENDOR, "", "");
        char *f = strstr (vendor, edits[i].field);
        assert_non_null (f);
        char *end = f + strlen (edits[i].field);
        if (*end == '"') {
            end = strchr (end + 1, '"') + 1;
        }
        else
            end += strcspn (end, ",}");
        char *rest = end + (*end == ',' && !edits[i].value ? 1 : 0);
        if (*end != ',' && !edits[i].value && f[-1] == ',')
            f--;                    /* the last field: its comma goes */
        *f = '\0';
        char *broken = edits[i].value ? ak_sprintf ("%s%s%s%s", vendor, edits[i].field, edits[i].value, rest)
                                      : ak_sprintf ("%s%s", vendor, rest);
        char *with = ak_sprintf ("\"installed_ms\":1},%s]", broken);
        s_repackage (pk, "\"installed_ms\":1}]", with);
        char err[1024];
        akp_profile_t *p = NULL;
        assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_EINVAL);
        assert_null (p);
        if (!strstr (err, edits[i].msg))
            fail_msg ("edit %zu: '%s' does not say '%s'", i, err, edits[i].msg);
        free (with);
        free (broken);
        free (vendor);
    }
}

static void test_device_match (void **state)
{
    s_pkg_t *pk = *state;
    char err[1024], cls[256];
    akp_profile_t *p = NULL;
    assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_OK);
    akp_device_t dev = { "NVIDIA H200", 9, 0, 580, "13.0" };
    assert_int_equal (akp_device_class (&dev, cls, sizeof cls), AKP_OK);
    assert_string_equal (cls, S_CLASS);
    size_t idx = 99;
    assert_int_equal (akp_match (p, cls, &dev, &idx, err, sizeof err), AKP_OK);
    assert_int_equal (idx, 0);
    akp_device_t other = dev;
    other.nvrtc_version = "12.8";
    assert_int_equal (akp_match (p, cls, &other, &idx, err, sizeof err), AKP_FALLBACK);
    assert_non_null (strstr (err, "NVRTC"));
    assert_int_equal (akp_device_class (&dev, cls, 8), AKP_EINVAL);
    akp_destroy (&p);
}

static char *s_path (s_pkg_t *pk, const char *rel)
{
    return ak_path_join (pk->dir, rel);
}

static void s_expect_refused (s_pkg_t *pk, const char *what)
{
    char err[1024];
    akp_profile_t *p = NULL;
    assert_int_equal (akp_verify (pk->dir, err, sizeof err), AKP_ETAMPERED);
    assert_int_equal (akp_load (pk->dir, &p, err, sizeof err), AKP_ETAMPERED);
    assert_null (p);
    if (!strstr (err, what))
        fail_msg ("expected '%s' in '%s'", what, err);
}

static void test_tamper_modified (void **state)
{
    s_pkg_t *pk = *state;
    char *path = s_path (pk, "profile.json");
    FILE *f = fopen (path, "a");
    fputs (" ", f);
    fclose (f);
    free (path);
    s_expect_refused (pk, "profile.json: modified");
}

static void test_tamper_source_changed (void **state)
{
    s_pkg_t *pk = *state;
    char sd[65], rel[128];
    ak_sha256_hex (s_src, strlen (s_src), sd);
    snprintf (rel, sizeof rel, "sources/%s.cu", sd);
    char *path = s_path (pk, rel);
    ak_err_t e = { 0 };
    assert_int_equal (ak_file_write_atomic (path, "evil", 4, &e), 0);
    free (path);
    s_expect_refused (pk, "modified");
}

static void test_tamper_missing_extra_link (void **state)
{
    s_pkg_t *pk = *state;
    char *extra = s_path (pk, "sources/extra.cu");
    ak_err_t e = { 0 };
    assert_int_equal (ak_file_write_atomic (extra, "x", 1, &e), 0);
    s_expect_refused (pk, "extra file");
    unlink (extra);
    char *link = s_path (pk, "link");
    assert_int_equal (symlink ("/etc/passwd", link), 0);
    s_expect_refused (pk, "not a regular file");
    unlink (link);
    free (link);
    free (extra);
    char err[256];
    assert_int_equal (akp_verify (pk->dir, err, sizeof err), AKP_OK);
    char sd[65], rel[128];
    ak_sha256_hex (s_prelude, strlen (s_prelude), sd);
    snprintf (rel, sizeof rel, "sources/%s.h", sd);
    char *gone = s_path (pk, rel);
    unlink (gone);
    free (gone);
    s_expect_refused (pk, "missing");
}

static void test_tamper_paths (void **state)
{
    s_pkg_t *pk = *state;
    const char *bad[] = {
        "0000000000000000000000000000000000000000000000000000000000000000  ../outside\n",
        "0000000000000000000000000000000000000000000000000000000000000000  /etc/passwd\n",
        "0000000000000000000000000000000000000000000000000000000000000000  sources/./x\n",
        "not a sums line\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *sums = ak_sprintf ("%s%s", pk->sums, bad[i]);
        char *path = s_path (pk, "SHA256SUMS");
        ak_err_t e = { 0 };
        assert_int_equal (ak_file_write_atomic (path, sums, strlen (sums), &e), 0);
        s_expect_refused (pk, "SHA256SUMS");
        free (path);
        free (sums);
    }
    char *path = s_path (pk, "SHA256SUMS");
    unlink (path);
    free (path);
    s_expect_refused (pk, "not a profile package");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_lookup_exact_and_fallbacks, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_device_match, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_abi2_entry_falls_back, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_abi2_maps_applied, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_abi2_maps_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_vendor_entry_falls_back, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_vendor_entry_malformed, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_tamper_modified, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_tamper_source_changed, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_tamper_missing_extra_link, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_tamper_paths, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
