/*  tests/unit/test_spec_cuda.c: the Hopper parts of specs and their rules:
    tensor-map rules one by one (common/tmap.c), spec fields arch /
    tensor_maps / cluster / library with a rejected-field test each
    (common/spec_cuda.c), their evaluation (ak_launch_eval), and where an
    sm_90a kernel may go (ak_arch_check, ak_class_cc, ak_expand_arch_fits,
    the CUDA compile plan). */
#include "support.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coordinator/expand.h"
#include "space.h"
#include "spec.h"
#include "spec_cuda.h"
#include "tmap.h"
#include "util.h"
#include "worker/backend_cuda.h"

/* ============================================================ tensor maps */

/*  A valid map: a 64 x 128 bf16 matrix (row-major, 128 columns), box 64 x 64,
    128B swizzle: 64 x 2 = 128 bytes inner box. */
static ak_tmap_cfg_t s_map (void)
{
    ak_tmap_cfg_t m;
    memset (&m, 0, sizeof m);
    snprintf (m.name, sizeof m.name, "tm_a");
    m.rank = 2;
    m.dims[0] = 128;
    m.dims[1] = 64;
    m.strides[0] = 256;
    m.box[0] = 64;
    m.box[1] = 64;
    m.elem_bytes = 2;
    m.buf_bytes = 128 * 64 * 2;
    m.swizzle = AK_TMAP_SWIZZLE_128B;
    m.l2 = AK_TMAP_L2_256B;
    m.oob = AK_TMAP_OOB_ZERO;
    return m;
}

static void s_rule (const ak_tmap_cfg_t *m, const char *rule)
{
    ak_err_t err = { 0 };
    char want[64];
    snprintf (want, sizeof want, "rule %s:", rule);
    assert_int_equal (ak_tmap_check (m, &err), AK_EINVAL);
    if (!strstr (err.msg, want) || !strstr (err.msg, "tensor map tm_a"))
        fail_msg ("want '%s' in: %s", want, err.msg);
}

static void test_tmap_valid (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    ak_err_t err = { 0 };
    assert_int_equal (ak_tmap_check (&m, &err), 0);
    assert_int_equal (ak_tmap_check_address (&m, 0x7f0000000100ull, &err), 0);
    m.rank = 1;                    /* rank 1: the row alone */
    m.dims[0] = 8;
    m.box[0] = 8;
    assert_int_equal (ak_tmap_check (&m, &err), 0);
}

static void test_tmap_rule_rank (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.rank = 0;
    s_rule (&m, "rank");
    m.rank = 6;
    s_rule (&m, "rank");
}

static void test_tmap_rule_elem (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.elem_bytes = 3;
    s_rule (&m, "elem");
}

static void test_tmap_rule_dims (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.dims[1] = 0;
    s_rule (&m, "dims");
    m = s_map ();
    m.dims[0] = (1ull << 32) + 1;
    s_rule (&m, "dims");
}

static void test_tmap_rule_strides (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.strides[0] = 264;            /* not a multiple of 16 */
    s_rule (&m, "strides");
    m = s_map ();
    m.strides[0] = 1ull << 40;
    s_rule (&m, "strides");
    m = s_map ();
    m.strides[0] = 128;            /* < 128 columns x 2 bytes: rows would overlap */
    s_rule (&m, "strides");
    m = s_map ();                  /* rank 3: strides[1] >= strides[0] * dims[1] */
    m.rank = 3;
    m.dims[2] = 2;
    m.box[2] = 1;
    m.strides[1] = 256 * 32;
    m.buf_bytes = 1u << 20;
    s_rule (&m, "strides");
    m.strides[1] = 256 * 64;
    ak_err_t err = { 0 };
    assert_int_equal (ak_tmap_check (&m, &err), 0);
}

static void test_tmap_rule_box (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.box[1] = 0;
    s_rule (&m, "box");
    m.box[1] = 257;
    s_rule (&m, "box");
}

static void test_tmap_rule_box_bytes (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.swizzle = AK_TMAP_SWIZZLE_NONE;
    m.box[0] = 12;                 /* 24 bytes */
    s_rule (&m, "box_bytes");
}

static void test_tmap_rule_swizzle (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.swizzle = AK_TMAP_SWIZZLE_64B;     /* 128-byte inner box > 64 */
    s_rule (&m, "swizzle");
    m.swizzle = AK_TMAP_SWIZZLE_128B;
    m.box[0] = 128;                      /* 256 bytes > 128 */
    s_rule (&m, "swizzle");
    m.swizzle = AK_TMAP_SWIZZLE_NONE;    /* no span without a swizzle */
    ak_err_t err = { 0 };
    assert_int_equal (ak_tmap_check (&m, &err), 0);
}

static void test_tmap_rule_enums (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.l2 = (ak_tmap_l2_t) 7;
    s_rule (&m, "enums");
}

static void test_tmap_rule_extent (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    m.buf_bytes -= 2;              /* one element short */
    s_rule (&m, "extent");
    m = s_map ();
    m.strides[0] = 512;            /* padded rows: 64 x 512 bytes > the buffer */
    s_rule (&m, "extent");
}

static void test_tmap_rule_align (void **state)
{
    (void) state;
    ak_tmap_cfg_t m = s_map ();
    ak_err_t err = { 0 };
    assert_int_equal (ak_tmap_check_address (&m, 0x7f0000000108ull, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "rule align:"));
}

static void test_tmap_names (void **state)
{
    (void) state;
    assert_int_equal (ak_tmap_swizzle_parse ("128B"), AK_TMAP_SWIZZLE_128B);
    assert_int_equal (ak_tmap_swizzle_parse ("128b"), -1);
    assert_int_equal (ak_tmap_l2_parse ("256B"), AK_TMAP_L2_256B);
    assert_int_equal (ak_tmap_oob_parse ("nan"), AK_TMAP_OOB_NAN);
    assert_string_equal (ak_tmap_swizzle_name (AK_TMAP_SWIZZLE_32B), "32B");
    assert_int_equal (ak_tmap_swizzle_bytes (AK_TMAP_SWIZZLE_64B), 64);
}

/* ================================================================ specs */

/*  A matmul-shaped spec with inline sources; `cand` and `base` are the
    JSON of one cuda candidate and the cuda baseline. */
static const char *s_cand =
    "{\"name\": \"tma\", \"backend\": \"cuda\", \"arch\": \"sm_90a\","
    " \"source\": {\"name\": \"tma.cu\", \"text\": \"// tma\\n\"},"
    " \"params\": {\"BM\": [64, 128], \"BK\": [64]},"
    " \"launch\": {\"grid\": [\"(N+127)/128\", \"(M+BM-1)/BM\"], \"block\": [\"128\"], \"cluster\": [\"2\", \"1\"]},"
    " \"tensor_maps\": [{\"name\": \"tm_a\", \"buffer\": \"a\", \"dims\": [\"K\", \"M\"], \"box\": [\"BK\", \"BM\"],"
    "                    \"swizzle\": \"128B\", \"l2_promotion\": \"256B\", \"oob_fill\": \"zero\"},"
    "                   {\"name\": \"tm_c\", \"buffer\": \"c\", \"dims\": [\"N\", \"M\"], \"box\": [\"64\", \"BM\"]}]}";

static char *s_spec_text (const char *cand, const char *base)
{
    return ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"matmul\", \"keys\": [\"M\", \"N\", \"K\"],"
        " \"dtypes\": [\"bfloat16\", \"float32\"],"
        " \"tolerances\": {\"bfloat16\": {\"atol\": 1e-2, \"rtol\": 1e-2}, \"float32\": {\"atol\": 1e-4, \"rtol\": 1e-4}},"
        " \"sizes\": [{\"name\": \"small\", \"size\": {\"M\": 128, \"N\": 256, \"K\": 64}},"
        "             {\"name\": \"big\", \"size\": {\"M\": 256, \"N\": 256, \"K\": 128}}],"
        " \"stability_size\": \"small\", \"flops\": \"2*M*N*K\", \"bytes\": \"(M*K+K*N+M*N)*b\","
        " \"inputs\": [{\"name\": \"a\", \"count\": \"M*K\", \"range\": [-1, 1]},"
        "              {\"name\": \"b\", \"count\": \"K * N\", \"range\": [-1, 1]}],"
        " \"outputs\": [{\"name\": \"c\", \"count\": \"M*N\"}],"
        " \"reference\": {\"name\": \"ref.c\", \"text\": \"/* ref */\\n\"},"
        " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"/* b */\\n\"}}, %s],"
        " \"candidates\": [%s]}", base, cand);
}

static const char *s_lib_base = "{\"backend\": \"cuda\", \"library\": \"cublaslt\", \"op\": \"matmul\"}";

static ak_spec_t *s_parse_ok (const char *cand, const char *base)
{
    char *text = s_spec_text (cand, base);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_parse_text (text, strlen (text), "t.json", &spec, &err))
        fail_msg ("parse: %s", err.msg);
    free (text);
    return spec;
}

/*  The spec with the candidate's (or baseline's) member `key` set to the
    JSON `value` must be refused with needle in the message. */
static void s_reject (bool baseline, const char *key, const char *value, const char *needle)
{
    json_error_t je;
    json_t *c = json_loads (baseline ? s_lib_base : s_cand, 0, &je);
    assert_non_null (c);
    json_t *v = json_loads (value, JSON_DECODE_ANY, &je);
    assert_non_null (v);
    json_object_set_new (c, key, v);
    char *cj = json_dumps (c, JSON_COMPACT);
    char *text = baseline ? s_spec_text (s_cand, cj) : s_spec_text (cj, s_lib_base);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    int rc = ak_spec_parse_text (text, strlen (text), "t.json", &spec, &err);
    if (rc == 0 || !strstr (err.msg, needle))
        fail_msg ("%s = %s: want '%s', got rc %d: %s", key, value, needle, rc, err.msg);
    assert_null (spec);
    json_decref (c);
    free (cj);
    free (text);
}

static void test_spec_fields_parse (void **state)
{
    (void) state;
    ak_spec_t *spec = s_parse_ok (s_cand, s_lib_base);
    const ak_candidate_t *c = ak_spec_candidate (spec, "tma");
    assert_non_null (c);
    assert_string_equal (c->arch, "sm_90a");
    assert_int_equal (c->launch->ncluster, 2);
    assert_int_equal (c->launch->ntmaps, 2);
    assert_string_equal (c->launch->tmaps[0].buffer, "a");
    assert_int_equal (c->launch->tmaps[0].swizzle, AK_TMAP_SWIZZLE_128B);
    assert_int_equal (c->launch->tmaps[1].swizzle, AK_TMAP_SWIZZLE_NONE);   /* default */
    const ak_baseline_t *b = ak_spec_baseline (spec, "cuda");
    assert_string_equal (b->library, "cublaslt");
    assert_string_equal (b->lib_op, "matmul");
    assert_null (b->launch);
    assert_string_equal (b->source.text, AK_LIBRARY_MARKER "cublaslt matmul M=0 N=1 K=2\n");

    /* The form sent to workers parses back to the same fields. */
    char *t1 = ak_spec_to_text (spec, false);
    ak_spec_t *again = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_parse_text (t1, strlen (t1), "again", &again, &err) != 0) {
        /* without sources the candidate has only a digest: parse needs text */
        fail_msg ("%s", err.msg);
    }
    char *t2 = ak_spec_to_text (again, false);
    assert_string_equal (t1, t2);
    assert_string_equal (ak_spec_baseline (again, "cuda")->source.digest, b->source.digest);
    free (t1);
    free (t2);
    ak_spec_destroy (&again);
    ak_spec_destroy (&spec);
}

static void test_spec_reject_arch (void **state)
{
    (void) state;
    s_reject (false, "arch", "\"sm90a\"", "candidates[0].arch: must be sm_XY or sm_XYa");
    s_reject (false, "arch", "90", "candidates[0].arch");
}

static void test_spec_reject_tensor_maps (void **state)
{
    (void) state;
    s_reject (false, "tensor_maps", "[{\"name\": \"tm_a\", \"buffer\": \"q\", \"dims\": [\"K\"], \"box\": [\"64\"]}]",
              "tensor_maps[0].buffer: 'q' is not an input or output");
    s_reject (false, "tensor_maps", "[{\"name\": \"tm_a\", \"buffer\": \"a\", \"dims\": [\"K\", \"M\"], \"box\": [\"64\"]}]",
              "1 entries for 2 dims");
    s_reject (false, "tensor_maps", "[{\"name\": \"tm_a\", \"buffer\": \"a\", \"dims\": [\"K\"], \"box\": [\"64\"],"
              " \"swizzle\": \"256B\"}]", "tensor_maps[0].swizzle: must be one of");
    s_reject (false, "tensor_maps", "[{\"name\": \"tm_a\", \"buffer\": \"a\", \"dims\": [\"K\"], \"box\": [\"Q\"]}]",
              "tensor_maps[0].box[0]: invalid expression");
    s_reject (false, "tensor_maps", "[{\"name\": \"tm a\", \"buffer\": \"a\", \"dims\": [\"K\"], \"box\": [\"64\"]}]",
              "must be a C identifier");
    s_reject (false, "tensor_maps", "[{\"name\": \"tm_a\", \"buffer\": \"a\", \"dims\": [\"K\"], \"box\": [\"64\"],"
              " \"interleave\": \"none\"}]", "interleave");
    s_reject (false, "tensor_maps", "[{\"name\": \"tm_a\", \"buffer\": \"a\", \"dims\": [\"K\"], \"box\": [\"64\"],"
              " \"optional\": 1}]", "tensor_maps[0].optional");

    /* a host kernel with tensor maps (and nothing else cuda) */
    const char *host =
        "{\"name\": \"h\", \"backend\": \"host\", \"source\": {\"name\": \"h.c\", \"text\": \"x\"},"
        " \"tensor_maps\": [{\"name\": \"tm_a\", \"buffer\": \"a\", \"dims\": [\"K\"], \"box\": [\"64\"]}]}";
    char *text = s_spec_text (host, s_lib_base);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_spec_parse_text (text, strlen (text), "t.json", &spec, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "candidates[0].tensor_maps: only cuda kernels have tensor maps"));
    free (text);
}

static void test_spec_reject_cluster (void **state)
{
    (void) state;
    s_reject (false, "launch", "{\"grid\": [\"1\"], \"block\": [\"1\"], \"cluster\": [\"1\", \"1\", \"1\", \"1\"]}",
              "launch.cluster: must list 1 to 3 expressions");
    s_reject (false, "launch", "{\"grid\": [\"1\"], \"block\": [\"1\"], \"cluster\": [\"CL\"]}",
              "launch.cluster[0]: invalid expression");
}

static void test_spec_reject_library (void **state)
{
    (void) state;
    s_reject (true, "library", "\"cublas\"", "baselines[1].library: unknown library");
    s_reject (true, "op", "\"softmax\"", "baselines[1].op: cublaslt runs no op 'softmax'");
    s_reject (true, "op", "\"swiglu_mlp\"", "baselines[1].op: swiglu_mlp needs the key batch");
    /* (a host library baseline would first be a second host baseline) */
    ak_spec_t *spec = s_parse_ok (s_cand, s_lib_base);
    json_error_t je;
    json_t *o = json_loads (s_lib_base, 0, &je);
    ak_baseline_t bl;
    memset (&bl, 0, sizeof bl);
    bl.backend = "host";
    ak_err_t err = { 0 };
    assert_int_equal (ak_spec_parse_library (o, spec, "t.json", "baselines[0]", &bl, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "only cuda baselines can be a library call"));
    assert_null (bl.library);
    json_decref (o);
    ak_spec_destroy (&spec);
    s_reject (true, "source", "{\"name\": \"x.cu\", \"text\": \"x\"}", "a library baseline has no source");
    s_reject (true, "launch", "{\"grid\": [\"1\"], \"block\": [\"1\"]}", "a library baseline has no launch");
}

/* ============================================================ evaluation */

static void test_launch_eval_tmaps_cluster (void **state)
{
    (void) state;
    ak_spec_t *spec = s_parse_ok (s_cand, s_lib_base);
    const ak_candidate_t *c = ak_spec_candidate (spec, "tma");
    const char *names[] = { "BM", "BK" };
    int64_t values[] = { 128, 64 };
    int64_t dims[] = { 256, 256, 128, 0, 0, 0, 0, 0 };      /* M, N, K */
    ak_launch_cfg_t cfg;
    ak_err_t err = { 0 };
    if (ak_launch_eval (spec, c->launch, dims, AK_DT_BFLOAT16, names, values, 2, &cfg, &err))
        fail_msg ("%s", err.msg);
    assert_int_equal (cfg.cluster[0], 2);
    assert_int_equal (cfg.cluster[1], 1);
    assert_int_equal (cfg.cluster[2], 1);
    assert_int_equal (cfg.ntmaps, 2);
    assert_int_equal (cfg.tmaps[0].rank, 2);
    assert_int_equal (cfg.tmaps[0].dims[0], 128);       /* K */
    assert_int_equal (cfg.tmaps[0].dims[1], 256);       /* M */
    assert_int_equal (cfg.tmaps[0].strides[0], 256);    /* contiguous: K x 2 bytes */
    assert_int_equal (cfg.tmaps[0].box[1], 128);
    assert_int_equal (cfg.tmaps[0].elem_bytes, 2);
    assert_int_equal (cfg.tmaps[0].buf_bytes, 256 * 128 * 2);
    assert_false (cfg.tmaps[0].output);
    assert_true (cfg.tmaps[1].output);
    assert_int_equal (cfg.tmaps[1].buf, 0);

    /* float32: box[0] of 64 x 4 bytes = 256 > the 128B swizzle span */
    assert_int_equal (ak_launch_eval (spec, c->launch, dims, AK_DT_FLOAT32, names, values, 2, &cfg, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "tensor map tm_a: rule swizzle"));

    /* K = 100: rows of A are 200 bytes, not a multiple of 16 (rule strides) */
    int64_t k100[] = { 256, 256, 100, 0, 0, 0, 0, 0 };
    assert_int_equal (ak_launch_eval (spec, c->launch, k100, AK_DT_BFLOAT16, names, values, 2, &cfg, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "tensor map tm_a: rule strides"));
    /* ... unless the map is optional: then it is absent for that shape */
    c->launch->tmaps[0].optional = true;
    if (ak_launch_eval (spec, c->launch, k100, AK_DT_BFLOAT16, names, values, 2, &cfg, &err))
        fail_msg ("%s", err.msg);
    assert_true (cfg.tmaps[0].absent);
    assert_false (cfg.tmaps[1].absent);
    assert_int_equal (ak_launch_eval (spec, c->launch, dims, AK_DT_BFLOAT16, names, values, 2, &cfg, &err), 0);
    assert_false (cfg.tmaps[0].absent);
    c->launch->tmaps[0].optional = false;

    /* 3 blocks along x (N = 384): not whole clusters of 2 */
    int64_t odd[] = { 256, 384, 128, 0, 0, 0, 0, 0 };
    assert_int_equal (ak_launch_eval (spec, c->launch, odd, AK_DT_BFLOAT16, names, values, 2, &cfg, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "rule grid_multiple"));
    ak_spec_destroy (&spec);
}

/* ========================================================= architecture */

static void test_arch_rules (void **state)
{
    (void) state;
    int a, b;
    bool sp;
    assert_int_equal (ak_arch_parse ("sm_90a", &a, &b, &sp), 0);
    assert_true (a == 9 && b == 0 && sp);
    assert_int_equal (ak_arch_parse ("sm_100a", &a, &b, &sp), 0);
    assert_true (a == 10 && b == 0 && sp);
    assert_int_equal (ak_arch_parse ("sm_9", NULL, NULL, NULL), -1);
    assert_int_equal (ak_arch_parse ("compute_90", NULL, NULL, NULL), -1);
    ak_err_t err = { 0 };
    assert_int_equal (ak_arch_check ("sm_90a", 9, 0, &err), 0);
    assert_int_equal (ak_arch_check ("sm_90a", 8, 0, &err), AK_EUNSUPPORTED);
    assert_non_null (strstr (err.msg, "built for sm_90a"));
    assert_non_null (strstr (err.msg, "sm_80"));
    assert_int_equal (ak_arch_check ("sm_90a", 10, 0, &err), AK_EUNSUPPORTED);
    assert_int_equal (ak_arch_check ("sm_80", 8, 6, &err), 0);
    assert_int_equal (ak_arch_check ("sm_80", 9, 0, &err), AK_EUNSUPPORTED);
    assert_int_equal (ak_arch_check (NULL, 7, 5, &err), 0);
    assert_true (ak_class_cc ("NVIDIA_H200/sm_90/drv580/nvrtc13.0", &a, &b));
    assert_true (a == 9 && b == 0);
    assert_true (ak_class_cc ("NVIDIA_A100-SXM4-80GB/sm_80/drv580/nvrtc13.0", &a, &b));
    assert_true (a == 8 && b == 0);
    assert_false (ak_class_cc ("H100", &a, &b));
    assert_false (ak_class_cc ("host", &a, &b));
}

/*  An sm_90a candidate is never given to an sm_80 class: the coordinator
    leaves it out where the class names its compute capability, and the
    compile plan refuses it before NVRTC where it does not. */
static void test_arch_selection (void **state)
{
    (void) state;
    assert_true (ak_expand_arch_fits ("sm_90a", "NVIDIA_H200/sm_90/drv580/nvrtc13.0"));
    assert_false (ak_expand_arch_fits ("sm_90a", "NVIDIA_A100/sm_80/drv580/nvrtc13.0"));
    assert_true (ak_expand_arch_fits ("sm_90a", "H100"));          /* the worker decides */
    assert_true (ak_expand_arch_fits (NULL, "NVIDIA_A100/sm_80/drv580/nvrtc13.0"));

    ak_compile_req_t req;
    memset (&req, 0, sizeof req);
    req.source = "// k\n";
    req.source_len = 5;
    req.dtype = AK_DT_FLOAT32;
    req.arch = "sm_90a";
    char *opts = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_cuda_options (&req, 8, 0, NULL, &opts, &err), AK_EUNSUPPORTED);
    assert_null (opts);
    assert_non_null (strstr (err.msg, "refused before compile"));
    assert_int_equal (ak_cuda_options (&req, 9, 0, NULL, &opts, &err), 0);
    assert_non_null (strstr (opts, "--gpu-architecture=sm_90a\n"));
    free (opts);
    req.arch = NULL;
    assert_int_equal (ak_cuda_options (&req, 8, 0, NULL, &opts, &err), 0);
    assert_non_null (strstr (opts, "--gpu-architecture=sm_80\n"));
    free (opts);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_tmap_valid),
        cmocka_unit_test (test_tmap_rule_rank),
        cmocka_unit_test (test_tmap_rule_elem),
        cmocka_unit_test (test_tmap_rule_dims),
        cmocka_unit_test (test_tmap_rule_strides),
        cmocka_unit_test (test_tmap_rule_box),
        cmocka_unit_test (test_tmap_rule_box_bytes),
        cmocka_unit_test (test_tmap_rule_swizzle),
        cmocka_unit_test (test_tmap_rule_enums),
        cmocka_unit_test (test_tmap_rule_extent),
        cmocka_unit_test (test_tmap_rule_align),
        cmocka_unit_test (test_tmap_names),
        cmocka_unit_test (test_spec_fields_parse),
        cmocka_unit_test (test_spec_reject_arch),
        cmocka_unit_test (test_spec_reject_tensor_maps),
        cmocka_unit_test (test_spec_reject_cluster),
        cmocka_unit_test (test_spec_reject_library),
        cmocka_unit_test (test_launch_eval_tmaps_cluster),
        cmocka_unit_test (test_arch_rules),
        cmocka_unit_test (test_arch_selection),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
