/*  tests/unit/test_discover_payload.c: NVTX range texts (discover/payload.c)
    and their mapping to catalog operators (discover/catalog_map.c).

    PyTorch's emit_nvtx texts with and without shapes and dtypes, the
    launcher's module and attention ranges, and texts that are not payloads
    at all: odd, truncated at every byte, nested beyond the limits.  None
    may crash (ASan/UBSan watch) and each must read as documented. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_map.h"
#include "payload.h"

static void test_emit_nvtx_text (void **state)
{
    (void) state;
    akd_payload_t p;
    assert_true (akd_payload_parse ("aten::softmax, seq = 12, op_id = 3, sizes = [[4096, 32000], []]", &p));
    assert_string_equal (p.name, "aten::softmax");
    assert_int_equal (p.seq, 12);
    assert_true (p.has_sizes);
    assert_int_equal (p.nsizes, 2);
    assert_true (p.sizes[0].tensor);
    assert_int_equal (p.sizes[0].ndims, 2);
    assert_int_equal (p.sizes[0].dims[0], 4096);
    assert_int_equal (p.sizes[0].dims[1], 32000);
    assert_false (p.sizes[1].tensor);          /* the dim argument: [] */
    assert_int_equal (akd_payload_int (&p, "op_id", -1), 3);
    assert_int_equal (p.ndtypes, 0);
    assert_false (p.truncated);
}

static void test_dtypes_and_input_type (void **state)
{
    (void) state;
    akd_payload_t p;
    assert_true (akd_payload_parse ("aten::mm, seq = 4, sizes = [[512, 2048], [2048, 6144]], "
                                    "input_type = ['c10::BFloat16', \"c10::BFloat16\"]", &p));
    assert_int_equal (p.ndtypes, 2);
    assert_string_equal (p.dtypes[0], "c10::BFloat16");
    assert_string_equal (akd_dtype_catalog (p.dtypes[1]), "bfloat16");
    assert_true (akd_payload_parse ("module::LlamaRMSNorm, sizes = [[1, 512, 2048]], dtypes = [bfloat16]", &p));
    assert_string_equal (p.name, "module::LlamaRMSNorm");
    assert_string_equal (akd_map_dtype (&p), "bfloat16");
    assert_string_equal (akd_dtype_catalog ("torch.float16"), "float16");
    assert_string_equal (akd_dtype_catalog ("Float"), "float32");
    assert_null (akd_dtype_catalog ("torch.int64"));
    assert_null (akd_dtype_catalog ("double"));
    /* flags of the launcher's attention range */
    assert_true (akd_payload_parse ("torch_nvtx::sdpa, sizes = [[1, 16, 512, 128], [1, 16, 512, 128], "
                                    "[1, 16, 512, 128]], dtypes = [bfloat16], is_causal = True, has_mask = 0", &p));
    assert_int_equal (akd_payload_int (&p, "is_causal", -1), 1);
    assert_int_equal (akd_payload_int (&p, "has_mask", -1), 0);
    assert_int_equal (akd_payload_int (&p, "absent", 77), 77);
}

static void test_not_a_payload (void **state)
{
    (void) state;
    akd_payload_t p;
    assert_false (akd_payload_parse ("step", &p));
    assert_string_equal (p.name, "step");
    assert_false (p.has_sizes);
    assert_false (akd_payload_parse (NULL, &p));
    assert_string_equal (p.name, "");
    assert_false (akd_payload_parse ("", &p));
    /* commas without fields: the whole text is the name */
    assert_false (akd_payload_parse ("forward, layer 3, (attention)", &p));
    assert_string_equal (p.name, "forward, layer 3, (attention)");
    /* a name longer than the field is cut, not overrun */
    char longname[600];
    memset (longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    akd_payload_parse (longname, &p);
    assert_int_equal (strlen (p.name), sizeof p.name - 1);
}

static void test_odd_values (void **state)
{
    (void) state;
    akd_payload_t p;
    /* negative and non-numeric dims, deeper nesting (a TensorList), too
       many dims, a key that is not an identifier: none is a tensor, none crashes */
    akd_payload_parse ("aten::cat, seq = x, sizes = [[[1, 2], [3, 4]], [-1, 5], [a, b], "
                       "[1, 2, 3, 4, 5, 6, 7, 8, 9]], 3d = 1, = 4", &p);
    assert_string_equal (p.name, "aten::cat");
    assert_int_equal (p.seq, -1);
    assert_int_equal (p.nsizes, 4);
    for (int i = 0; i < 4; i++)
        assert_false (p.sizes[i].tensor);
    assert_int_equal (p.nints, 0);
    /* more arguments than kept: the first AKD_MAX_ARGS are read */
    char many[2048] = "aten::foo, sizes = [";
    for (int i = 0; i < 40; i++)
        snprintf (many + strlen (many), sizeof many - strlen (many), "%s[%d]", i ? ", " : "", i + 1);
    strcat (many, "]");
    akd_payload_parse (many, &p);
    assert_int_equal (p.nsizes, AKD_MAX_ARGS);
    assert_int_equal (p.sizes[AKD_MAX_ARGS - 1].dims[0], AKD_MAX_ARGS);
    /* unbalanced closers and quotes */
    akd_payload_parse ("aten::x, sizes = ]]], dtypes = ['float", &p);
    assert_true (p.truncated);
}

/* Every prefix of real payloads: the parse never crashes, never reports a
   tensor it did not read in full, and flags what it cut. */
static void test_truncated_everywhere (void **state)
{
    (void) state;
    const char *texts[] = {
        "aten::softmax, seq = 12, op_id = 3, sizes = [[4096, 32000], []], input_op_ids = [(1, 0)]",
        "torch_nvtx::sdpa, sizes = [[1, 16, 512, 128], [1, 16, 512, 128]], dtypes = ['bfloat16'], is_causal = 1",
    };
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        size_t n = strlen (texts[t]);
        for (size_t cut = 0; cut <= n; cut++) {
            char *prefix = strndup (texts[t], cut);
            akd_payload_t p;
            akd_payload_parse (prefix, &p);
            for (int i = 0; i < p.nsizes; i++)
                if (p.sizes[i].tensor)
                    for (int d = 0; d < p.sizes[i].ndims; d++)
                        assert_true (p.sizes[i].dims[d] > 0);
            /* a prefix cut inside the sizes list never yields the full first shape as closed */
            const char *open = strstr (prefix, "sizes = [");
            if (open && !strstr (open, "]]") && p.nsizes > 0 && p.sizes[0].tensor)
                assert_true (p.truncated);
            akd_map_t m;
            akd_map_payload (&p, &m);
            free (prefix);
        }
    }
}

static void test_key_drops_call_fields (void **state)
{
    (void) state;
    char key[256];
    akd_payload_key ("aten::softmax, seq = 12, op_id = 3, sizes = [[4096, 32000], []], input_op_ids = [(1, 0)]",
                     key, sizeof key);
    assert_string_equal (key, "aten::softmax, sizes = [[4096, 32000], []]");
    akd_payload_key ("step", key, sizeof key);
    assert_string_equal (key, "step");
    char small[8];
    akd_payload_key ("aten::softmax, sizes = [[1]]", small, sizeof small);
    assert_int_equal (strlen (small), 7);
}

/* ------------------------------------------------------------- mapping */

static void s_expect (const char *text, const char *op, int n, const int64_t *values, const char *dtype)
{
    akd_payload_t p;
    akd_map_t m;
    akd_payload_parse (text, &p);
    int r = akd_map_payload (&p, &m);
    if (r != 1)
        fail_msg ("%s: mapped %d (%s %s)", text, r, m.op ? m.op : "-", m.why);
    assert_string_equal (m.op, op);
    assert_int_equal (m.nkeys, n);
    for (int i = 0; i < n; i++)
        if (m.values[i] != values[i])
            fail_msg ("%s: %s = %lld, want %lld", text, m.keys[i], (long long) m.values[i], (long long) values[i]);
    if (dtype)
        assert_string_equal (m.dtype, dtype);
    else
        assert_null (m.dtype);
}

static void test_map_table (void **state)
{
    (void) state;
    s_expect ("aten::softmax, seq = 1, sizes = [[4096, 32000], []]", "softmax", 2, (int64_t[]) { 4096, 32000 }, NULL);
    s_expect ("aten::_softmax, sizes = [[2, 16, 512, 512], [], []], dtypes = [float16]", "softmax", 2,
              (int64_t[]) { 2 * 16 * 512, 512 }, "float16");
    s_expect ("aten::rms_norm, sizes = [[1, 512, 2048], [], [2048], []]", "rmsnorm", 2, (int64_t[]) { 512, 2048 }, NULL);
    s_expect ("aten::_fused_rms_norm, sizes = [[8, 4096], [], [4096], []]", "rmsnorm", 2, (int64_t[]) { 8, 4096 }, NULL);
    s_expect ("module::LlamaRMSNorm, sizes = [[1, 512, 2048]], dtypes = [bfloat16]", "rmsnorm", 2,
              (int64_t[]) { 512, 2048 }, "bfloat16");
    s_expect ("aten::native_layer_norm, sizes = [[64, 768], [], [768], [768], []]", "layernorm", 2,
              (int64_t[]) { 64, 768 }, NULL);
    s_expect ("aten::mm, sizes = [[512, 2048], [2048, 6144]]", "matmul", 3, (int64_t[]) { 512, 6144, 2048 }, NULL);
    /* the texts of torch_nvtx.py --ranges catalog: scalars given as
       keywords are not listed, dtypes are */
    s_expect ("aten::linear, sizes = [[1, 512, 2048], [6144, 2048]], dtypes = [bfloat16, bfloat16]", "matmul", 3,
              (int64_t[]) { 512, 6144, 2048 }, "bfloat16");
    s_expect ("aten::softmax, sizes = [[4, 4096]], dtypes = [float16]", "softmax", 2, (int64_t[]) { 4, 4096 },
              "float16");
    s_expect ("aten::rms_norm, sizes = [[1, 512, 2048], [], [2048]], dtypes = [bfloat16, bfloat16]", "rmsnorm", 2,
              (int64_t[]) { 512, 2048 }, "bfloat16");
    s_expect ("aten::addmm, sizes = [[6144], [512, 2048], [2048, 6144], [], []]", "matmul", 3,
              (int64_t[]) { 512, 6144, 2048 }, NULL);
    s_expect ("aten::linear, sizes = [[1, 512, 2048], [32000, 2048], []]", "matmul", 3,
              (int64_t[]) { 512, 32000, 2048 }, NULL);
    s_expect ("module::Linear, sizes = [[1, 1, 2048], [6144, 2048]], dtypes = [bfloat16]", "matmul", 3,
              (int64_t[]) { 1, 6144, 2048 }, "bfloat16");
    s_expect ("aten::matmul, sizes = [[4, 128, 64], [64, 256]]", "matmul", 3, (int64_t[]) { 512, 256, 64 }, NULL);
    s_expect ("aten::bmm, sizes = [[1, 128, 64], [1, 64, 32]]", "matmul", 3, (int64_t[]) { 128, 32, 64 }, NULL);
    s_expect ("aten::_scaled_dot_product_flash_attention, sizes = [[1, 16, 512, 128], [1, 16, 512, 128], "
              "[1, 16, 512, 128], [], [], []]", "flash_attention", 5, (int64_t[]) { 1, 16, 512, 128, 1 }, NULL);
    s_expect ("torch_nvtx::sdpa, sizes = [[2, 8, 256, 64], [2, 8, 256, 64], [2, 8, 256, 64]], dtypes = [bfloat16], "
              "is_causal = 1, has_mask = 0", "flash_attention", 5, (int64_t[]) { 2, 8, 256, 64, 2 }, "bfloat16");
    s_expect ("aten::cross_entropy_loss, sizes = [[4096, 32000], [4096], [], [], [], []]", "cross_entropy", 2,
              (int64_t[]) { 4096, 32000 }, NULL);
    s_expect ("vllm::rotary_embedding, sizes = [[1, 32, 2048, 128]]", "rotary_embedding", 4,
              (int64_t[]) { 1, 32, 2048, 128 }, NULL);
    /* decode over a KV cache (query length 1), grouped-query (32 query
       heads over 8 key heads), pi0.5's 50 action tokens over prefix +
       suffix (not causal), grouped-query prefill (causal, Q = L) */
    s_expect ("aten::scaled_dot_product_attention, sizes = [[1, 16, 1, 128], [1, 16, 520, 128], [1, 16, 520, 128]]",
              "split_kv_attention", 7, (int64_t[]) { 1, 1, 16, 16, 520, 128, 1 }, NULL);
    s_expect ("aten::scaled_dot_product_attention, sizes = [[4, 32, 1, 128], [4, 8, 4096, 128], [4, 8, 4096, 128]]",
              "split_kv_attention", 7, (int64_t[]) { 4, 1, 32, 8, 4096, 128, 1 }, NULL);
    s_expect ("torch_nvtx::sdpa, sizes = [[1, 8, 50, 256], [1, 1, 866, 256], [1, 1, 866, 256]], dtypes = [bfloat16], "
              "is_causal = 0, has_mask = 0", "split_kv_attention", 7, (int64_t[]) { 1, 50, 8, 1, 866, 256, 1 },
              "bfloat16");
    s_expect ("torch_nvtx::sdpa, sizes = [[1, 32, 64, 128], [1, 8, 64, 128], [1, 8, 64, 128]], "
              "is_causal = 1, has_mask = 0", "split_kv_attention", 7, (int64_t[]) { 1, 64, 32, 8, 64, 128, 2 }, NULL);
    /* the fused operators of VLA and LLM serving */
    s_expect ("aten::addcmul, sizes = [[4, 50, 1024], [4, 1, 1024], [4, 50, 1024], []]", "gated_residual", 4,
              (int64_t[]) { 4, 50, 1024, 1 }, NULL);
    s_expect ("aten::addcmul, sizes = [[4, 50, 1024], [4, 50, 1024], [4, 1, 1024]]", "gated_residual", 4,
              (int64_t[]) { 4, 50, 1024, 1 }, NULL);
    s_expect ("aten::addcmul, sizes = [[512, 4096], [512, 4096], [512, 4096], []], dtypes = [bfloat16]",
              "gated_residual", 4, (int64_t[]) { 1, 512, 4096, 2 }, "bfloat16");
    s_expect ("module::GemmaRMSNorm, sizes = [[1, 50, 1024], [1, 1024]], dtypes = [bfloat16]", "ada_rms_norm", 3,
              (int64_t[]) { 1, 50, 1024 }, "bfloat16");
    s_expect ("module::DiTAdaRMSNorm, sizes = [[8, 1024], [8, 256]]", "ada_rms_norm", 3,
              (int64_t[]) { 8, 1, 1024 }, NULL);
    s_expect ("_C::silu_and_mul, sizes = [[64, 11008], [64, 22016]]", "gated_gelu", 3,
              (int64_t[]) { 64, 11008, 2 }, NULL);
    s_expect ("_C::gelu_tanh_and_mul, sizes = [[1, 50, 4096], [1, 50, 8192]]", "gated_gelu", 3,
              (int64_t[]) { 50, 4096, 1 }, NULL);
    s_expect ("module::SiluAndMul, sizes = [[4096, 28672]], dtypes = [bfloat16]", "gated_gelu", 3,
              (int64_t[]) { 4096, 14336, 2 }, "bfloat16");
    /* a plain RMSNorm module (one tensor) stays rmsnorm */
    s_expect ("module::GemmaRMSNorm, sizes = [[1, 50, 1024], []]", "rmsnorm", 2, (int64_t[]) { 50, 1024 }, NULL);
}

static void s_refused (const char *text, const char *op, const char *why)
{
    akd_payload_t p;
    akd_map_t m;
    akd_payload_parse (text, &p);
    assert_int_equal (akd_map_payload (&p, &m), -1);
    assert_string_equal (m.op, op);
    if (!strstr (m.why, why))
        fail_msg ("%s: why '%s' lacks '%s'", text, m.why, why);
}

static void test_map_refusals (void **state)
{
    (void) state;
    s_refused ("aten::bmm, sizes = [[16, 512, 128], [16, 128, 512]]", "matmul", "batched");
    s_refused ("aten::mm, sizes = [[512, 2048], [1024, 6144]]", "matmul", "inner dimensions");
    s_refused ("aten::mm, seq = 3", "matmul", "no sizes");
    s_refused ("aten::softmax, seq = 3, sizes = [[], []]", "softmax", "no tensor");
    s_refused ("aten::scaled_dot_product_attention, sizes = [[1, 32, 1, 128], [1, 12, 520, 128], [1, 12, 520, 128]]",
               "split_kv_attention", "not a multiple");
    s_refused ("aten::scaled_dot_product_attention, sizes = [[1, 8, 1, 128], [1, 0, 520, 128], [1, 0, 520, 128]]",
               "split_kv_attention", "not a multiple");
    s_refused ("torch_nvtx::sdpa, sizes = [[1, 8, 4, 64], [1, 8, 520, 64], [1, 8, 520, 64]], is_causal = 1, has_mask = 0",
               "split_kv_attention", "top-left");
    s_refused ("torch_nvtx::sdpa, sizes = [[1, 8, 1, 64], [1, 8, 520, 64], [1, 8, 520, 64]], has_mask = 1",
               "split_kv_attention", "explicit attention mask");
    s_refused ("aten::scaled_dot_product_attention, sizes = [[1, 8, 1, 64], [1, 8, 520, 128], [1, 8, 520, 128]]",
               "split_kv_attention", "widths differ");
    s_refused ("torch_nvtx::sdpa, sizes = [[1, 2, 8, 8], [1, 2, 8, 8], [1, 2, 8, 8]], has_mask = 1",
               "flash_attention", "explicit attention mask");
    s_refused ("aten::softmax, sizes = [[4294967296, 2]]", "softmax", "not a size");
    s_refused ("aten::addcmul, sizes = [[4, 50, 1024], [1024], [4, 50, 1024]]", "gated_residual", "the gate is neither");
    s_refused ("aten::addcmul, sizes = [[4, 50, 1024], [4, 1, 1024], [4, 1, 1024]]", "gated_residual",
               "neither factor");
    s_refused ("module::GemmaRMSNorm, sizes = [[2, 50, 1024], [1, 1024]]", "ada_rms_norm", "condition [B, C]");
    s_refused ("_C::silu_and_mul, sizes = [[64, 11008], [64, 22017]]", "gated_gelu", "not 2N");
    s_refused ("_C::gelu_and_mul, sizes = [[64, 11008], [64, 22016]]", "gated_gelu", "tanh");
    s_refused ("module::GeluAndMul, sizes = [[64, 22016]]", "gated_gelu", "tanh");
    /* not catalog operators at all */
    akd_payload_t p;
    akd_map_t m;
    const char *none[] = { "aten::gelu, sizes = [[1, 2]]", "step", "aten::mul, sizes = [[4, 50, 1024], [4, 1, 1024]]", "module::LlamaRotaryEmbedding, sizes = [[1]]",
                           "aten::log_softmax, sizes = [[4, 8], [], []]", "" };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        akd_payload_parse (none[i], &p);
        assert_int_equal (akd_map_payload (&p, &m), 0);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_emit_nvtx_text),
        cmocka_unit_test (test_dtypes_and_input_type),
        cmocka_unit_test (test_not_a_payload),
        cmocka_unit_test (test_odd_values),
        cmocka_unit_test (test_truncated_everywhere),
        cmocka_unit_test (test_key_drops_call_fields),
        cmocka_unit_test (test_map_table),
        cmocka_unit_test (test_map_refusals),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
