/*  tests/unit/test_catalog_fused.c: the fused operators of VLA and LLM
    serving in the catalog (kernels/gated_residual, ada_rms_norm,
    gated_gelu) on the host.

    - each spec loads with the keys, dtypes, sizes (the 7B-decode and
      pi0.5 shapes GPU-only where the host oracle should not see them, GPU
      sizes last), edge sizes, baselines, device reference and candidate
      spaces it is documented with; bytes count every element of every
      buffer once; a mode key out of range (gated_residual's G,
      gated_gelu's act) is refused as a shape, so no kernel ever sees it;
    - each float64 oracle (ref.c) against values worked out by hand:
      the gate broadcast over a batch row's tokens and per element, the
      conditioning of each batch row, both activations over the packed
      [M][2N] layout;
    - each host baseline and every configuration of each host candidate
      through the five gates (worker/gates.c);
    - kernels that get the operator subtly wrong (one gate row for every
      batch row, scale and shift taken per token instead of per batch row,
      erf GELU instead of the tanh approximation, the packed halves
      swapped) are wrong_answer: the gates above can fail. */
#include "space.h"
#include "support.h"
#include "manifest.h"
#include "unit.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- the specs */

typedef struct {
    const char *name;
    const int64_t dims[4];
} s_named_t;

typedef struct {
    const char *name;
    const char *keys[4];
    int         nkeys;
    s_named_t   host[2];            /* sizes the host gates run */
    s_named_t   gpu[2];             /* GPU-only sizes */
    const char *cuda_cand;
    size_t      cuda_configs;
    size_t      host_configs;       /* of the host candidate "vectorized" */
    int         mode_key;           /* index of a mode key (1 or 2 only), -1 none */
    int         width_key;          /* index of the row width N */
} s_op_t;

static const s_op_t s_ops[] = {
    { "gated_residual", { "B", "T", "N", "G" }, 4,
      { { "pi05_step", { 1, 50, 1024, 1 } }, { "small", { 2, 16, 256, 2 } } },
      { { "pi05_b64", { 64, 50, 1024, 1 } }, { "llm_4k", { 1, 4096, 4096, 2 } } },
      "row_tile", 48, 4, 3, 2 },
    { "ada_rms_norm", { "B", "T", "N" }, 3,
      { { "pi05_step", { 1, 50, 1024 } }, { "large", { 4, 50, 2048 } } },
      { { "pi05_b64", { 64, 50, 1024 } }, { "llm_4k", { 1, 4096, 4096 } } },
      "row_cached", 30, 6, -1, 2 },
    { "gated_gelu", { "M", "N", "act" }, 3,
      { { "pi05_expert", { 50, 4096, 1 } }, { "large", { 64, 2048, 2 } } },
      { { "llm_decode", { 64, 11008, 2 } }, { "llm_4k_14336", { 4096, 14336, 2 } } },
      "row_tile", 48, 4, 2, 1 },
};
#define S_NOPS (sizeof s_ops / sizeof s_ops[0])

static ak_cat_host_t S;

static int s_setup (void **state)
{
    (void) state;
    return ak_cat_host_open (&S, "catfused");
}

static int s_teardown (void **state)
{
    (void) state;
    ak_cat_host_close (&S);
    return 0;
}

static void s_expect_size (const ak_spec_t *spec, const s_named_t *want, bool host)
{
    const ak_size_t *z = ak_spec_size (spec, want->name);
    if (!z)
        fail_msg ("%s: no size %s", spec->name, want->name);
    for (int k = 0; k < spec->nkeys; k++)
        if (z->dims[k] != want->dims[k])
            fail_msg ("%s %s: %s = %lld, want %lld", spec->name, want->name, spec->keys[k],
                      (long long) z->dims[k], (long long) want->dims[k]);
    assert_true (ak_size_for_backend (z, "host") == host);
    assert_true (ak_size_for_backend (z, "cuda"));
}

static void test_specs_load (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++) {
        const s_op_t *op = &s_ops[o];
        ak_spec_t *spec = ak_cat_spec (op->name);
        ak_err_t err = { 0 };
        assert_string_equal (spec->name, op->name);
        assert_int_equal (spec->nkeys, op->nkeys);
        for (int k = 0; k < op->nkeys; k++)
            assert_string_equal (spec->keys[k], op->keys[k]);
        assert_int_equal (spec->ndtypes, 3);
        assert_int_equal (spec->dtypes[0], AK_DT_FLOAT32);
        assert_true (ak_spec_has_dtype (spec, AK_DT_FLOAT16) && ak_spec_has_dtype (spec, AK_DT_BFLOAT16));
        assert_true (ak_spec_tol (spec, AK_DT_BFLOAT16)->atol > ak_spec_tol (spec, AK_DT_FLOAT32)->atol);
        assert_true (ak_spec_tol (spec, AK_DT_FLOAT16)->atol > ak_spec_tol (spec, AK_DT_FLOAT32)->atol);

        for (int i = 0; i < 2; i++) {
            s_expect_size (spec, &op->host[i], true);
            s_expect_size (spec, &op->gpu[i], false);
        }
        assert_string_equal (spec->sizes[0].name, "tiny");
        bool gpu_seen = false;
        for (size_t z = 0; z < spec->nsizes; z++) {
            const ak_size_t *sz = &spec->sizes[z];
            int64_t elems = 0;
            for (int j = 0; j < spec->ninputs + spec->noutputs; j++) {
                const char *count = j < spec->ninputs ? spec->inputs[j].count
                                                      : spec->outputs[j - spec->ninputs].count;
                int64_t v = 0;
                assert_int_equal (ak_spec_eval (spec, count, sz->dims, AK_DT_FLOAT32, &v, &err), 0);
                if (v > elems)
                    elems = v;
            }
            if (ak_size_for_backend (sz, "host")) {
                assert_false (gpu_seen);            /* GPU-only sizes come last */
                assert_true ((uint64_t) elems <= AK_GATE_ORACLE_MAX_ELEMS);
            }
            else
                gpu_seen = true;
        }
        assert_true (gpu_seen);

        /* edge sizes: an odd width, and a width of 1 */
        bool odd = false, one = false;
        for (size_t e = 0; e < spec->nedge; e++) {
            int64_t width = spec->edge_sizes[e].dims[op->width_key];
            odd |= width % 2 == 1 && width > 1;
            one |= width == 1;
        }
        assert_true (odd && one);

        assert_non_null (spec->reference_cuda.text);
        assert_non_null (spec->reference_cuda_launch);
        assert_non_null (ak_spec_baseline (spec, "host"));
        assert_non_null (ak_spec_baseline (spec, "cuda")->launch);
        size_t count = 0;
        const ak_candidate_t *c = ak_spec_candidate (spec, op->cuda_cand);
        assert_non_null (c);
        assert_string_equal (c->backend, "cuda");
        assert_int_equal (ak_space_walk (c, NULL, NULL, &count, &err), 0);
        assert_int_equal (count, op->cuda_configs);
        c = ak_spec_candidate (spec, "vectorized");
        assert_non_null (c);
        assert_string_equal (c->backend, "host");
        assert_int_equal (ak_space_walk (c, NULL, NULL, &count, &err), 0);
        assert_int_equal (count, op->host_configs);

        /* bytes: every element of every buffer once, at every size and
           dtype (what "% of copy bandwidth" is measured against) */
        for (size_t z = 0; z < spec->nsizes + spec->nedge; z++) {
            const ak_size_t *sz = z < spec->nsizes ? &spec->sizes[z] : &spec->edge_sizes[z - spec->nsizes];
            for (int t = 0; t < spec->ndtypes; t++) {
                int64_t bytes = 0, want = 0, v = 0, esz = spec->dtypes[t] == AK_DT_FLOAT32 ? 4 : 2;
                assert_int_equal (ak_spec_eval (spec, spec->bytes, sz->dims, spec->dtypes[t], &bytes, &err), 0);
                for (int j = 0; j < spec->ninputs + spec->noutputs; j++) {
                    const char *cnt = j < spec->ninputs ? spec->inputs[j].count
                                                        : spec->outputs[j - spec->ninputs].count;
                    assert_int_equal (ak_spec_eval (spec, cnt, sz->dims, spec->dtypes[t], &v, &err), 0);
                    want += esz * v;
                }
                if (bytes != want)
                    fail_msg ("%s %s: bytes %lld, buffers hold %lld", spec->name, sz->name,
                              (long long) bytes, (long long) want);
            }
        }

        /* a mode key other than 1 or 2 is no shape of the operator */
        if (op->mode_key >= 0) {
            int64_t dims[AK_MAX_DIMS];
            memcpy (dims, spec->sizes[0].dims, sizeof dims);
            for (int64_t m = 1; m <= 3; m++) {
                dims[op->mode_key] = m;
                int rc = ak_spec_check_shape (spec, dims, "test", "size", &err);
                if (m <= 2)
                    assert_int_equal (rc, 0);
                else {
                    assert_int_equal (rc, AK_EINVAL);
                    print_message ("%s with %s = 3: %s\n", spec->name, op->keys[op->mode_key], err.msg);
                }
            }
        }
        ak_spec_destroy (&spec);
    }
}

/*  kernels/batches/nightly.json tunes the three on the H200 class: each
    with a pi0.5 shape and a GPU-sized one in bfloat16, every candidate. */
static void test_nightly_batch (void **state)
{
    (void) state;
    char *path = ak_test_src ("kernels/batches/nightly.json");
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_load (path, &m, &err))
        fail_msg ("%s", err.msg);
    static const char *const pi05[] = { "pi05_step", "pi05_step", "pi05_expert" };
    for (size_t o = 0; o < S_NOPS; o++) {
        const ak_manifest_op_t *op = NULL;
        for (size_t i = 0; i < m->nops; i++)
            if (strcmp (m->ops[i].spec->name, s_ops[o].name) == 0)
                op = &m->ops[i];
        if (!op)
            fail_msg ("nightly.json has no %s", s_ops[o].name);
        bool vla = false, gpu = false;
        for (size_t w = 0; w < op->nworkloads; w++) {
            const ak_workload_t *wl = &op->workloads[w];
            vla |= strcmp (wl->name, pi05[o]) == 0 && wl->dtype == AK_DT_BFLOAT16;
            gpu |= strcmp (wl->name, s_ops[o].gpu[1].name) == 0 && wl->dtype == AK_DT_BFLOAT16;
        }
        assert_true (vla && gpu);
        assert_true (op->ncandidates >= 1);
    }
    ak_manifest_destroy (&m);
    free (path);
}

/* --------------------------------------------------- oracles, by hand */

static void test_oracle_gated_residual (void **state)
{
    (void) state;
    /* G = 1: gate [B][N] shared by the T tokens of its batch row */
    const int64_t d1[] = { 2, 2, 2, 1 };
    const double x[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    const double g1[] = { 0.5, -1, 2, 0 };
    const double h[] = { 10, 20, 30, 40, 50, 60, 70, 80 };
    const double *in1[] = { x, g1, h };
    const double want1[] = { 6, -18, 18, -36, 105, 6, 147, 8 };
    ak_cat_oracle (&S, "gated_residual", d1, in1, want1, 1e-12);

    /* G = 2: a gate per element */
    const int64_t d2[] = { 1, 2, 2, 2 };
    const double x2[] = { 1, 1, 1, 1 }, g2[] = { 1, 2, 3, 4 }, h2[] = { 1, -1, 0.5, 2 };
    const double *in2[] = { x2, g2, h2 };
    const double want2[] = { 2, -1, 2.5, 9 };
    ak_cat_oracle (&S, "gated_residual", d2, in2, want2, 1e-12);
}

static void test_oracle_ada_rms_norm (void **state)
{
    (void) state;
    /* B = 2, T = 2, N = 2.  Tokens {3, 4} (mean square 12.5) and {1, 1}
       (1) in both batch rows; row 0 scale {0, 1} shift {0.5, -1}, row 1
       scale {-0.5, 0.5} shift 0: y = x / sqrt(ms + 1e-6) (1 + scale) + shift. */
    const int64_t dims[] = { 2, 2, 2 };
    const double x[] = { 3, 4, 1, 1, 3, 4, 1, 1 };
    const double scale[] = { 0, 1, -0.5, 0.5 }, shift[] = { 0.5, -1, 0, 0 };
    const double *in[] = { x, scale, shift };
    const double want[] = { 1.3485281034827337, 1.2627416092872896, 1.499999500000375, 0.9999990000007499,
                            0.42426405174136683, 1.6970562069654673, 0.4999997500001875, 1.4999992500005623 };
    ak_cat_oracle (&S, "ada_rms_norm", dims, in, want, 1e-12);
}

static void test_oracle_gated_gelu (void **state)
{
    (void) state;
    /* one row, N = 3: gate {0, 1, -2}, up {2, 3, 0.5}.
       gelu_tanh(1) = 0.841191990607..., gelu_tanh(-2) = -0.045402305912...;
       silu(1) = 0.731058578630..., silu(-2) = -0.238405844044... */
    const int64_t g3[] = { 1, 3, 1 }, s3[] = { 1, 3, 2 };
    const double x[] = { 0, 1, -2, 2, 3, 0.5 };
    const double *in[] = { x };
    const double want_g[] = { 0, 2.5235759718248305, -0.02270115295611247 };
    const double want_s[] = { 0, 2.193175735890015, -0.11920292202211755 };
    ak_cat_oracle (&S, "gated_gelu", g3, in, want_g, 1e-12);
    ak_cat_oracle (&S, "gated_gelu", s3, in, want_s, 1e-12);

    /* two rows of N = 1: the row stride is 2N (gate, up, gate, up) */
    const int64_t g1[] = { 2, 1, 1 }, s1[] = { 2, 1, 2 };
    const double x2[] = { 0.5, -1, 4, 0.25 };
    const double *in2[] = { x2 };
    const double want_g2[] = { -0.34571400982514394, 0.9999824385129519 };
    const double want_s2[] = { -0.3112296656009273, 0.9820137900379085 };
    ak_cat_oracle (&S, "gated_gelu", g1, in2, want_g2, 1e-12);
    ak_cat_oracle (&S, "gated_gelu", s1, in2, want_s2, 1e-12);
}

/* ----------------------------------------------------------- the gates */

static void test_host_kernels_pass_gates (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++)
        assert_int_equal (ak_cat_host_gates (&S, s_ops[o].name), s_ops[o].host_configs);
}

static void test_wrong_kernels_fail (void **state)
{
    (void) state;
    ak_cat_expect_wrong (&S, "gated_residual", "(G == 1 ? r / T : r)", "(G == 1 ? 0 : r)");
    ak_cat_expect_wrong (&S, "ada_rms_norm", "sc = scale + (r / T) * N", "sc = scale + (r % B) * N");
    ak_cat_expect_wrong (&S, "gated_gelu", "tanhf (0.797884561f * (g + 0.044715f * g * g * g))",
                         "erff (0.707106781f * g)");
    ak_cat_expect_wrong (&S, "gated_gelu", "g = x[m * 2 * N + n], u = x[m * 2 * N + N + n]",
                         "g = x[m * 2 * N + N + n], u = x[m * 2 * N + n]");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_specs_load),
        cmocka_unit_test (test_nightly_batch),
        cmocka_unit_test (test_oracle_gated_residual),
        cmocka_unit_test (test_oracle_ada_rms_norm),
        cmocka_unit_test (test_oracle_gated_gelu),
        cmocka_unit_test (test_host_kernels_pass_gates),
        cmocka_unit_test (test_wrong_kernels_fail),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
