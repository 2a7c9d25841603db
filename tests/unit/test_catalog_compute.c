/*  tests/unit/test_catalog_compute.c: the compute-bound operators of the
    catalog (matmul, fused_mlp, flash_attention) on the host backend.

    - each spec loads with its keys, dtypes, sizes (GPU-only ones marked
      cuda), edge sizes off the powers of two, and candidate spaces;
    - each float64 oracle (ref.c) against values worked out by hand on
      tiny inputs: a 2x2 product, SwiGLU of one element and its
      float32-range saturation, attention with S = 2 whose softmax
      weights are exact (equal scores, or scores ln 3 apart) with and
      without the causal mask;
    - the host baselines of the three through the five gates (the new
      edge sizes included), and the attention baseline with its causal mask removed
      failing them (the gates see the mask). */
#include "space.h"
#include "support.h"
#include "unit.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/gates.h"
#include "spec.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* |a - b| <= tol, both printed when not (this cmocka has no assert_double_equal) */
#define S_NEAR(a, b, tol)                                                                   \
    do {                                                                                    \
        double a_ = (a), b_ = (b);                                                          \
        if (!(fabs (a_ - b_) <= (tol)))                                                     \
            fail_msg ("%s = %.17g, want %.17g (within %g)", #a, a_, b_, (double) (tol));    \
    } while (0)

static ak_cat_host_t S;

static int s_group_setup (void **state)
{
    (void) state;
    return ak_cat_host_open (&S, "catcomp");
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_cat_host_close (&S);
    return 0;
}

static ak_spec_t *s_spec (const char *op)
{
    return ak_cat_spec (op);
}

/*  Builds text with the host compiler and loads symbol from it. */
static ak_kernel_t *s_build (const char *text, bool reference)
{
    return ak_cat_build (&S, text, reference, NULL, NULL, 0);
}

/*  Runs op's float64 oracle on dims and the given inputs (counts from the
    spec); outputs into out[k] (caller's arrays of the spec's counts). */
static void s_oracle (const char *op, const int64_t *dims, double *const *in, double **out)
{
    ak_spec_t *spec = s_spec (op);
    ak_kernel_t *ref = s_build (spec->reference.text, true);
    ak_err_t err = { 0 };
    size_t nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
    int64_t v;
    for (int j = 0; j < spec->ninputs; j++) {
        assert_int_equal (ak_spec_eval (spec, spec->inputs[j].count, dims, AK_DT_FLOAT32, &v, &err), 0);
        nin[j] = (size_t) v;
    }
    for (int k = 0; k < spec->noutputs; k++) {
        assert_int_equal (ak_spec_eval (spec, spec->outputs[k].count, dims, AK_DT_FLOAT32, &v, &err), 0);
        nout[k] = (size_t) v;
    }
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.ndims = spec->nkeys;
    for (int d = 0; d < spec->nkeys; d++)
        l.dims[d] = dims[d];
    l.nin = spec->ninputs;
    l.nout = spec->noutputs;
    l.dtype = AK_DT_FLOAT32;
    for (int j = 0; j < spec->ninputs; j++) {
        assert_int_equal (S.be->alloc (S.dev, nin[j] * sizeof (double), &l.in[j], &err), 0);
        assert_int_equal (S.be->upload (S.dev, l.in[j], in[j], nin[j] * sizeof (double), &err), 0);
    }
    for (int k = 0; k < spec->noutputs; k++) {
        assert_int_equal (S.be->alloc (S.dev, nout[k] * sizeof (double), &l.out[k], &err), 0);
        assert_int_equal (S.be->fill (S.dev, l.out[k], 0xFF, nout[k] * sizeof (double), &err), 0);
    }
    assert_int_equal (S.be->launch (S.dev, ref, &l, &err), 0);
    for (int k = 0; k < spec->noutputs; k++) {
        assert_int_equal (S.be->download (S.dev, out[k], l.out[k], nout[k] * sizeof (double), &err), 0);
        S.be->release (S.dev, &l.out[k]);
    }
    for (int j = 0; j < spec->ninputs; j++)
        S.be->release (S.dev, &l.in[j]);
    S.be->unload (S.dev, &ref);
    ak_spec_destroy (&spec);
}

/* ------------------------------------------------------------------ specs */

static size_t s_space (const ak_spec_t *spec, const char *cand)
{
    const ak_candidate_t *c = ak_spec_candidate (spec, cand);
    assert_non_null (c);
    assert_string_equal (c->backend, "cuda");
    assert_non_null (c->launch);
    size_t n = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_space_walk (c, NULL, NULL, &n, &err), 0);
    return n;
}

static void s_common (const ak_spec_t *spec, int nkeys, const char *const *keys)
{
    assert_int_equal (spec->nkeys, nkeys);
    for (int k = 0; k < nkeys; k++)
        assert_string_equal (spec->keys[k], keys[k]);
    assert_int_equal (spec->ndtypes, 3);
    assert_int_equal (spec->dtypes[0], AK_DT_FLOAT32);
    assert_true (ak_spec_has_dtype (spec, AK_DT_FLOAT16) && ak_spec_has_dtype (spec, AK_DT_BFLOAT16));
    /* tolerances widen with narrower types */
    assert_true (ak_spec_tol (spec, AK_DT_FLOAT32)->rtol < ak_spec_tol (spec, AK_DT_FLOAT16)->rtol);
    assert_true (ak_spec_tol (spec, AK_DT_FLOAT16)->rtol <= ak_spec_tol (spec, AK_DT_BFLOAT16)->rtol);
    assert_non_null (ak_spec_baseline (spec, "host"));
    assert_non_null (ak_spec_baseline (spec, "cuda"));
    assert_non_null (spec->reference_cuda.text);
    assert_non_null (spec->reference_cuda_launch);
    /* host sizes first, GPU-only ones last (tests/gpu/test_gpu_catalog.c drops them from the end) */
    size_t gpu = 0;
    for (size_t i = 0; i < spec->nsizes; i++) {
        if (spec->sizes[i].backends) {
            assert_int_equal (spec->sizes[i].backends, AK_BACKEND_CUDA);
            gpu++;
        }
        else
            assert_int_equal (gpu, 0);
    }
    assert_true (gpu >= 2);
    assert_true (spec->nsizes - gpu >= 4);
    /* an edge size that is no power of two and no multiple of 8 */
    bool odd = false;
    for (size_t e = 0; e < spec->nedge; e++)
        for (int k = 0; k < spec->nkeys; k++)
            odd |= spec->edge_sizes[e].dims[k] % 8 != 0 && spec->edge_sizes[e].dims[k] > 1;
    assert_true (odd);
}

static void test_specs_load (void **state)
{
    (void) state;
    ak_spec_t *spec = s_spec ("matmul");
    s_common (spec, 3, (const char *[]) { "M", "N", "K" });
    assert_int_equal (s_space (spec, "mma"), 36);
    assert_non_null (ak_spec_size (spec, "gpu_4k"));
    assert_int_equal (ak_spec_size (spec, "gpu_4k")->dims[2], 4096);
    ak_spec_destroy (&spec);

    spec = s_spec ("fused_mlp");
    s_common (spec, 3, (const char *[]) { "batch", "dim", "hidden" });
    assert_int_equal (spec->ninputs, 4);
    assert_int_equal (spec->noutputs, 2);
    assert_string_equal (spec->outputs[1].name, "h");
    assert_int_equal (s_space (spec, "tc"), 20);
    const ak_size_t *z = ak_spec_size (spec, "gpu_llama7b");
    assert_non_null (z);
    assert_true (z->dims[0] == 2048 && z->dims[1] == 4096 && z->dims[2] == 11008);
    ak_spec_destroy (&spec);

    spec = s_spec ("flash_attention");
    s_common (spec, 5, (const char *[]) { "B", "H", "S", "D", "mask" });
    assert_int_equal (s_space (spec, "fa2"), 10);
    /* both masks among the host sizes and the GPU sizes */
    unsigned masks_host = 0, masks_gpu = 0;
    for (size_t i = 0; i < spec->nsizes; i++) {
        int64_t m = spec->sizes[i].dims[4];
        assert_true (m == 1 || m == 2);
        if (spec->sizes[i].backends)
            masks_gpu |= 1u << m;
        else
            masks_host |= 1u << m;
    }
    assert_int_equal (masks_host, 6);
    assert_int_equal (masks_gpu, 6);
    ak_err_t err = { 0 };
    int64_t flops = 0;
    const int64_t causal[5] = { 1, 1, 4, 8, 2 }, full[5] = { 1, 1, 4, 8, 1 };
    assert_int_equal (ak_spec_eval (spec, spec->flops, full, AK_DT_FLOAT32, &flops, &err), 0);
    assert_int_equal (flops, 4 * 4 * 4 * 8);
    assert_int_equal (ak_spec_eval (spec, spec->flops, causal, AK_DT_FLOAT32, &flops, &err), 0);
    assert_int_equal (flops, 4 * 4 * 4 * 8 / 2);
    ak_spec_destroy (&spec);
}

/* ---------------------------------------------------------------- oracles */

static void test_matmul_oracle (void **state)
{
    (void) state;
    /* [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50], and a 2x3 by 3x1 */
    double a[] = { 1, 2, 3, 4 }, b[] = { 5, 6, 7, 8 }, c[4];
    s_oracle ("matmul", (const int64_t[]) { 2, 2, 2 }, (double *[]) { a, b }, (double *[]) { c });
    assert_true (c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50);
    double a2[] = { 1, -1, 2, 0.5, 0.25, -4 }, b2[] = { 2, 3, -1 }, c2[2];
    s_oracle ("matmul", (const int64_t[]) { 2, 1, 3 }, (double *[]) { a2, b2 }, (double *[]) { c2 });
    assert_true (c2[0] == 2 - 3 - 2 && c2[1] == 1 + 0.75 + 4);
}

static void test_fused_mlp_oracle (void **state)
{
    (void) state;
    /* batch 1, dim 1, hidden 1: g = 2, u = 6, silu(2) = 2 / (1 + e^-2) */
    double x[] = { 2 }, wg[] = { 1 }, wu[] = { 3 }, wd[] = { 0.5 }, y[1], h[1];
    s_oracle ("fused_mlp", (const int64_t[]) { 1, 1, 1 }, (double *[]) { x, wg, wu, wd }, (double *[]) { y, h });
    S_NEAR (h[0], 1.7615941559557649 * 6, 1e-14);
    S_NEAR (y[0], 1.7615941559557649 * 3, 1e-14);

    /* batch 2, dim 2, hidden 2, Wg = I: g = x; Wu = [1 1; 0 1]: u = (x0, x0 + x1);
       Wd swaps the two columns.
       Row 0 x = (0, 1): g = (0, 1), u = (0, 1), h = (0, silu(1)), y = (silu(1), 0).
       Row 1 x = (-1, 0): g = (-1, 0), u = (-1, -1), h = (-silu(-1), 0), y = (0, -silu(-1)). */
    const double s1 = 1.0 / (1.0 + exp (-1.0)), sm1 = -1.0 / (1.0 + exp (1.0));
    double x2[] = { 0, 1, -1, 0 }, wg2[] = { 1, 0, 0, 1 }, wu2[] = { 1, 1, 0, 1 }, wd2[] = { 0, 1, 1, 0 };
    double y2[4], h2[4];
    s_oracle ("fused_mlp", (const int64_t[]) { 2, 2, 2 }, (double *[]) { x2, wg2, wu2, wd2 },
              (double *[]) { y2, h2 });
    S_NEAR (h2[0], 0, 0);
    S_NEAR (h2[1], s1, 1e-15);
    S_NEAR (h2[2], -sm1, 1e-15);
    S_NEAR (h2[3], 0, 0);
    S_NEAR (y2[0], s1, 1e-15);
    S_NEAR (y2[1], 0, 0);
    S_NEAR (y2[2], 0, 0);
    S_NEAR (y2[3], -sm1, 1e-15);

    /* Beyond float32: g = u = 1e60 (silu(g) = g): h = 1e120 is +inf, y = -inf;
       g = u = -1e60: silu(g) is -0, h = -0 * -1e60 = 0, y = 0. */
    double x3[] = { 1e30, -1e30 }, wg3[] = { 1e30 }, wu3[] = { 1e30 }, wd3[] = { -1 }, y3[2], h3[2];
    s_oracle ("fused_mlp", (const int64_t[]) { 2, 1, 1 }, (double *[]) { x3, wg3, wu3, wd3 },
              (double *[]) { y3, h3 });
    assert_true (isinf (h3[0]) && h3[0] > 0);
    assert_true (isinf (y3[0]) && y3[0] < 0);
    assert_true (h3[1] == 0 && y3[1] == 0);
}

static void test_attention_oracle (void **state)
{
    (void) state;
    /* B 1, H 1, S 2, D 4: scale 1/2.  q0 = 0: equal scores, o0 = (v0 + v1) / 2.
       q1 = 2 ln3 e0, k0 = e0, k1 = 0: scores ln3 and 0, weights 3/4 and 1/4. */
    const double l3 = log (3.0);
    double q[] = { 0, 0, 0, 0, 2 * l3, 0, 0, 0 };
    double k[] = { 1, 0, 0, 0, 0, 0, 0, 0 };
    double v[] = { 1, 2, 3, 4, -4, 8, 0, 1 };
    double o[8];
    s_oracle ("flash_attention", (const int64_t[]) { 1, 1, 2, 4, 1 }, (double *[]) { q, k, v }, (double *[]) { o });
    const double want[8] = { -1.5, 5, 1.5, 2.5, 0.75 * 1 + 0.25 * -4, 0.75 * 2 + 0.25 * 8, 0.75 * 3, 0.75 * 4 + 0.25 };
    for (int i = 0; i < 8; i++)
        S_NEAR (o[i], want[i], 1e-14);

    /* Causal (mask 2): row 0 sees key 0 alone (o0 = v0 whatever the scores),
       row 1 both keys as before. */
    double oc[8];
    s_oracle ("flash_attention", (const int64_t[]) { 1, 1, 2, 4, 2 }, (double *[]) { q, k, v }, (double *[]) { oc });
    for (int i = 0; i < 4; i++)
        S_NEAR (oc[i], v[i], 0);
    for (int i = 4; i < 8; i++)
        S_NEAR (oc[i], want[i], 1e-14);

    /* Heads are independent: B 1, H 2 with the second head a copy of the first. */
    double q2[16], k2[16], v2[16], o2[16];
    for (int i = 0; i < 16; i++) {
        q2[i] = q[i % 8];
        k2[i] = k[i % 8];
        v2[i] = v[i % 8];
    }
    s_oracle ("flash_attention", (const int64_t[]) { 1, 2, 2, 4, 1 }, (double *[]) { q2, k2, v2 }, (double *[]) { o2 });
    for (int i = 0; i < 16; i++)
        S_NEAR (o2[i], want[i % 8], 1e-14);
}

/* ------------------------------------------------------------------ gates */

static void s_print (const ak_gate_report_t *rep)
{
    for (int i = 0; i < rep->nstages; i++)
        fprintf (stderr, "  %-12s %s\n", rep->stages[i].stage, rep->stages[i].detail);
    if (rep->reason[0])
        fprintf (stderr, "  reason: %s\n", rep->reason);
}

/*  The host gates of op over a kernel source (the host baseline when NULL). */
static ak_gate_status_t s_gates (const char *op, const char *text, ak_gate_report_t *rep)
{
    ak_spec_t *spec = s_spec (op);
    const ak_baseline_t *bl = ak_spec_baseline (spec, "host");
    assert_non_null (bl);
    ak_kernel_t *ref = s_build (spec->reference.text, true);
    ak_kernel_t *k = s_build (text ? text : bl->source.text, false);
    ak_gate_ctx_t ctx;
    memset (&ctx, 0, sizeof ctx);
    ctx.spec = spec;
    ctx.be = S.be;
    ctx.dev = S.dev;
    ctx.kernel[AK_DT_FLOAT32] = k;
    ctx.ref_be = S.be;
    ctx.ref_dev = S.dev;
    ctx.ref = ref;
    ctx.seed = 42;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, rep, &err), 0);
    S.be->unload (S.dev, &k);
    S.be->unload (S.dev, &ref);
    ak_spec_destroy (&spec);
    return rep->status;
}

static void s_baseline_passes (const char *op)
{
    ak_gate_report_t rep;
    ak_gate_status_t st = s_gates (op, NULL, &rep);
    if (st != AK_GATE_OK)
        s_print (&rep);
    assert_int_equal (st, AK_GATE_OK);
    assert_int_equal (rep.nstages, 5);
    for (int i = 0; i < rep.nstages; i++)
        assert_true (rep.stages[i].passed);
    /* the host runs float32 only and says so; the GPU-only sizes are not its */
    assert_non_null (strstr (rep.stages[1].detail, "skipped dtypes"));
    assert_true (rep.stages[4].configs >= 4);
}

static void test_matmul_baseline_gates (void **state)
{
    (void) state;
    s_baseline_passes ("matmul");
}

static void test_fused_mlp_baseline_gates (void **state)
{
    (void) state;
    s_baseline_passes ("fused_mlp");
}

static void test_attention_baseline_gates (void **state)
{
    (void) state;
    s_baseline_passes ("flash_attention");
}

/*  The attention baseline with the causal mask dropped computes the
    non-causal result everywhere: the causal sizes must fail. */
static void test_attention_without_mask_fails (void **state)
{
    (void) state;
    char *path = ak_test_src ("kernels/flash_attention/host/baseline.c");
    char *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_read (path, 1 << 20, &text, &len, &err), 0);
    char *at = strstr (text, "mask == 2 ? i + 1 : S");
    assert_non_null (at);
    memcpy (at, "mask == 9 ? i + 1 : S", 21);
    ak_gate_report_t rep;
    assert_int_equal (s_gates ("flash_attention", text, &rep), AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "beyond tolerance"));
    free (text);
    free (path);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_specs_load),
        cmocka_unit_test (test_matmul_oracle),
        cmocka_unit_test (test_fused_mlp_oracle),
        cmocka_unit_test (test_attention_oracle),
        cmocka_unit_test (test_matmul_baseline_gates),
        cmocka_unit_test (test_fused_mlp_baseline_gates),
        cmocka_unit_test (test_attention_baseline_gates),
        cmocka_unit_test (test_attention_without_mask_fails),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
