/*  tests/unit/test_catalog_mem.c: the memory-bound operators of the catalog
    (kernels/layernorm, reduce, cross_entropy, rotary_embedding) on the host.

    - each spec loads with the keys, dtypes, sizes (GPU-only ones last,
      edge sizes that are not powers of two), baselines, device reference
      and candidate spaces it is documented with;
    - each float64 oracle (ref.c) against values worked out by hand on
      tiny inputs, through the host backend as the gates run it;
    - each host baseline and every configuration of each host candidate
      through the five gates (worker/gates.c), as tests/unit/test_gates.c
      does for softmax;
    - a kernel that gets the operator subtly wrong (the cross-entropy target
      taken as row % vocab, layernorm without beta, rotary with the pair
      halves swapped, a row sum that drops the last element) is
      wrong_answer: the gates above can fail. */
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

static ak_cat_host_t S;

static int s_group_setup (void **state)
{
    (void) state;
    return ak_cat_host_open (&S, "catmem");
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

/*  Compiles text with the host backend (float32, or the float64 oracle)
    and loads symbol. */
static ak_kernel_t *s_build (const char *text, bool reference, const char *const *names,
                             const int64_t *values, int n)
{
    return ak_cat_build (&S, text, reference, names, values, n);
}

/* ------------------------------------------------------------- the specs */

typedef struct {
    const char *name;
    const char *keys[4];
    int         nkeys;
    int         ndtypes;            /* float32 first; float16 left out where said */
    bool        has_f16;
    const char *gpu_size;           /* one GPU-only size and its element count */
    int64_t     gpu_elems;
    const char *host_cand;          /* NULL: none */
    size_t      host_configs;
    const char *cuda_cand;
    size_t      cuda_configs;
} s_op_t;

static const s_op_t s_ops[] = {
    { "layernorm",        { "batch", "dim" },       2, 3, true,  "llm_4k",   8192LL * 4096,
      "vectorized", 7, "row_cached", 528 },
    { "reduce",           { "M", "N" },             2, 2, false, "gpu_64m",  8192LL * 8192,
      "vectorized", 7, "row_stream", 528 },
    { "cross_entropy",    { "batch", "vocab" },     2, 3, true,  "llm_128k", 2048LL * 128256,
      NULL, 0, "row_online", 528 },
    { "rotary_embedding", { "B", "H", "S", "D" },   4, 3, true,  "llm_4k",   32LL * 4096 * 128,
      NULL, 0, "pos_major", 400 },
};
#define S_NOPS (sizeof s_ops / sizeof s_ops[0])

static int64_t s_elems (const ak_spec_t *spec, const ak_size_t *z)
{
    int64_t n = 1;
    for (int k = 0; k < spec->nkeys; k++)
        n *= z->dims[k];
    return n;
}

static void test_specs_load (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++) {
        const s_op_t *op = &s_ops[o];
        ak_spec_t *spec = s_spec (op->name);
        assert_string_equal (spec->name, op->name);
        assert_int_equal (spec->nkeys, op->nkeys);
        for (int k = 0; k < op->nkeys; k++)
            assert_string_equal (spec->keys[k], op->keys[k]);
        assert_int_equal (spec->ndtypes, op->ndtypes);
        assert_int_equal (spec->dtypes[0], AK_DT_FLOAT32);
        assert_true (ak_spec_has_dtype (spec, AK_DT_BFLOAT16));
        assert_true (ak_spec_has_dtype (spec, AK_DT_FLOAT16) == op->has_f16);
        /* tolerances widen as the element type narrows */
        assert_true (ak_spec_tol (spec, AK_DT_BFLOAT16)->atol > ak_spec_tol (spec, AK_DT_FLOAT32)->atol);

        /* host sizes tiny .. xlarge within the host oracle, then GPU-only ones */
        assert_true (spec->nsizes >= 7);
        assert_string_equal (spec->sizes[0].name, "tiny");
        bool gpu_seen = false;
        for (size_t z = 0; z < spec->nsizes; z++) {
            bool host = ak_size_for_backend (&spec->sizes[z], "host");
            if (host) {
                assert_false (gpu_seen);            /* GPU-only sizes come last */
                assert_true ((uint64_t) s_elems (spec, &spec->sizes[z]) <= AK_GATE_ORACLE_MAX_ELEMS);
            }
            else {
                gpu_seen = true;
                assert_true (ak_size_for_backend (&spec->sizes[z], "cuda"));
            }
        }
        const ak_size_t *big = ak_spec_size (spec, op->gpu_size);
        assert_non_null (big);
        assert_false (ak_size_for_backend (big, "host"));
        assert_int_equal (s_elems (spec, big), op->gpu_elems);
        assert_non_null (ak_spec_size (spec, spec->stability_size));

        /* edge sizes: some key is odd and none is a power of two beyond 1 */
        assert_true (spec->nedge >= 3);
        bool odd = false;
        for (size_t e = 0; e < spec->nedge; e++)
            for (int k = 0; k < spec->nkeys; k++)
                odd |= spec->edge_sizes[e].dims[k] % 2 == 1 && spec->edge_sizes[e].dims[k] > 1;
        assert_true (odd);

        assert_non_null (spec->reference.text);
        assert_non_null (spec->reference_cuda.text);
        assert_non_null (spec->reference_cuda_launch);
        assert_non_null (ak_spec_baseline (spec, "host"));
        assert_non_null (ak_spec_baseline (spec, "cuda"));
        assert_non_null (ak_spec_baseline (spec, "cuda")->launch);

        ak_err_t err = { 0 };
        size_t count = 0;
        if (op->host_cand) {
            const ak_candidate_t *c = ak_spec_candidate (spec, op->host_cand);
            assert_non_null (c);
            assert_string_equal (c->backend, "host");
            assert_int_equal (ak_space_walk (c, NULL, NULL, &count, &err), 0);
            assert_int_equal (count, op->host_configs);
        }
        const ak_candidate_t *c = ak_spec_candidate (spec, op->cuda_cand);
        assert_non_null (c);
        assert_string_equal (c->backend, "cuda");
        assert_non_null (c->launch);
        assert_int_equal (ak_space_walk (c, NULL, NULL, &count, &err), 0);
        assert_int_equal (count, op->cuda_configs);

        /* bytes: every element of every buffer once (what "% of copy
           bandwidth" is measured against) */
        int64_t bytes = 0, want = 0, v = 0;
        assert_int_equal (ak_spec_eval (spec, spec->bytes, big->dims, AK_DT_BFLOAT16, &bytes, &err), 0);
        for (int j = 0; j < spec->ninputs; j++) {
            assert_int_equal (ak_spec_eval (spec, spec->inputs[j].count, big->dims, AK_DT_BFLOAT16, &v, &err), 0);
            want += 2 * v;
        }
        for (int j = 0; j < spec->noutputs; j++) {
            assert_int_equal (ak_spec_eval (spec, spec->outputs[j].count, big->dims, AK_DT_BFLOAT16, &v, &err), 0);
            want += 2 * v;
        }
        assert_true (bytes == want);
        ak_spec_destroy (&spec);
    }
}

/* --------------------------------------------------- oracles, by hand */

/*  op's oracle on dims against want (outputs concatenated) to 1e-12. */
static void s_oracle (const char *op, const int64_t *dims, const double *const *in, const double *want)
{
    ak_cat_oracle (&S, op, dims, in, want, 1e-12);
}

static void test_oracle_layernorm (void **state)
{
    (void) state;
    /* row 0: mean 2.5, var (2.25+0.25+0.25+2.25)/4 = 1.25, r = 1/sqrt(1.25 + 1e-5);
       y = (x - 2.5) r gamma + beta = {-1.5r, 1 - r, 0.25r, 1.5r - 1}.
       row 1: constant, var 0: y = beta. */
    const int64_t dims[] = { 2, 4 };
    const double x[] = { 1, 2, 3, 4, 5, 5, 5, 5 };
    const double gamma[] = { 1, 2, 0.5, 1 }, beta[] = { 0, 1, 0, -1 };
    const double *in[] = { x, gamma, beta };
    const double want[] = { -1.3416354199689269, 0.105576386687382, 0.2236059033281545, 0.3416354199689269,
                            0, 1, 0, -1 };
    s_oracle ("layernorm", dims, in, want);
}

static void test_oracle_reduce (void **state)
{
    (void) state;
    const int64_t dims[] = { 3, 3 };
    const double x[] = { 1, 2, 3, -1, 0.5, 0.25, 1e10, 1, -1e10 };
    const double *in[] = { x };
    const double want[] = { 6, -0.25, 1 };
    s_oracle ("reduce", dims, in, want);
}

static void test_oracle_cross_entropy (void **state)
{
    (void) state;
    /* vocab 4: targets (r * 2654435761 mod 2^32) % 4 = 0, 1, 2.
       row 0 zeros: log 4.  row 1 {0, ln 2, 0, 0}, target 1: log 5 - ln 2.
       row 2 {1000, 0, 1000, 0}, target 2: 1000 + log(2 + 2e-1000) - 1000 = log 2
       (exp(1000) overflows: the maximum must be taken out first). */
    const int64_t d4[] = { 3, 4 };
    const double x4[] = { 0, 0, 0, 0, 0, 0.69314718055994531, 0, 0, 1000, 0, 1000, 0 };
    const double *in4[] = { x4 };
    const double want4[] = { 1.3862943611198906, 0.9162907318741551, 0.6931471805599453 };
    s_oracle ("cross_entropy", d4, in4, want4);

    /* vocab 5, x[r][v] = v: loss = log(sum_v e^v) - t_r with t_r = 0, 1, 1, 2
       (row % vocab would give 0, 1, 2, 3). */
    const int64_t d5[] = { 4, 5 };
    double x5[20];
    for (int i = 0; i < 20; i++)
        x5[i] = i % 5;
    const double *in5[] = { x5 };
    const double want5[] = { 4.451914395937593, 3.4519143959375933, 3.4519143959375933, 2.4519143959375933 };
    s_oracle ("cross_entropy", d5, in5, want5);
}

static void test_oracle_rotary (void **state)
{
    (void) state;
    /* B=H=1, S=2, D=4: half 2, angles s * 10000^(-2i/4) = s * {1, 0.01}.
       s = 0: identity.  s = 1, x = {1, 2, 3, 4}:
       {1 cos 1 - 3 sin 1, 2 cos .01 - 4 sin .01, 3 cos 1 + 1 sin 1, 4 cos .01 + 2 sin .01}. */
    const int64_t dims[] = { 1, 1, 2, 4 };
    const double x[] = { 0.5, -0.25, 2, 8, 1, 2, 3, 4 };
    const double *in[] = { x };
    const double want[] = { 0.5, -0.25, 2, 8,
                            -1.9841106485555495, 1.959900667496664, 2.4623779024123156, 4.019799668334994 };
    s_oracle ("rotary_embedding", dims, in, want);

    /* odd D = 3: one pair (0, 1) at angle s, the last element passes through;
       two heads at position 2 rotate alike. */
    const int64_t d3[] = { 1, 2, 3, 3 };
    double x3[18];
    memset (x3, 0, sizeof x3);
    x3[3] = 1, x3[4] = 2, x3[5] = 3;                      /* head 0, s = 1 */
    x3[15] = 1, x3[17] = 7;                               /* head 1, s = 2 */
    const double *in3[] = { x3 };
    const double want3[] = { 0, 0, 0, -1.1426396637476532, 1.922075596544176, 3, 0, 0, 0,
                             0, 0, 0, 0, 0, 0, -0.4161468365471424, 0.9092974268256817, 7 };
    s_oracle ("rotary_embedding", d3, in3, want3);
}

/* ----------------------------------------------------------- the gates */

static ak_gate_status_t s_gate (const ak_spec_t *spec, ak_kernel_t *ref, const char *text,
                                const char *const *names, const int64_t *values, int n,
                                ak_gate_report_t *rep)
{
    return ak_cat_gate (&S, spec, ref, text, names, values, n, rep);
}

typedef struct {
    const ak_spec_t *spec;
    ak_kernel_t     *ref;
    size_t           passed;
} s_walk_t;

static void s_expect_ok (const ak_spec_t *spec, const char *what, const ak_gate_report_t *rep)
{
    if (rep->status != AK_GATE_OK) {
        fail_msg ("%s %s: %s: %s", spec->name, what, ak_gate_status_name (rep->status), rep->reason);
    }
    assert_int_equal (rep->nstages, 5);
    for (int i = 0; i < 5; i++) {
        assert_true (rep->stages[i].passed);
        assert_false (rep->stages[i].skipped);
    }
    /* every host size ran (none of the GPU-only ones) and every edge size */
    uint32_t host_sizes = 0;
    for (size_t z = 0; z < spec->nsizes; z++)
        host_sizes += ak_size_for_backend (&spec->sizes[z], "host");
    assert_int_equal (rep->stages[1].configs, host_sizes);
    assert_int_equal (rep->stages[4].configs, spec->nedge);
}

static int s_gate_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_walk_t *w = arg;
    const char *names[AK_MAX_PARAMS];
    char what[128];
    size_t n = (size_t) snprintf (what, sizeof what, "%s", cand->name);
    for (size_t i = 0; i < cand->nparams; i++) {
        names[i] = cand->params[i].name;
        n += (size_t) snprintf (what + n, sizeof what - n, " %s=%lld", names[i], (long long) values[i]);
    }
    ak_gate_report_t rep;
    s_gate (w->spec, w->ref, cand->source.text, names, values, (int) cand->nparams, &rep);
    s_expect_ok (w->spec, what, &rep);
    w->passed++;
    return 0;
}

static void test_host_kernels_pass_gates (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++) {
        ak_spec_t *spec = s_spec (s_ops[o].name);
        s_walk_t w = { .spec = spec, .ref = s_build (spec->reference.text, true, NULL, NULL, 0) };
        ak_gate_report_t rep;
        s_gate (spec, w.ref, ak_spec_baseline (spec, "host")->source.text, NULL, NULL, 0, &rep);
        s_expect_ok (spec, "baseline", &rep);
        w.passed++;
        size_t host_configs = 0;
        for (size_t c = 0; c < spec->ncandidates; c++) {
            if (strcmp (spec->candidates[c].backend, "host") != 0)
                continue;            /* cuda kernels: tests/gpu/test_gpu_catalog.c */
            ak_err_t err = { 0 };
            size_t count = 0;
            assert_int_equal (ak_space_walk (&spec->candidates[c], s_gate_config, &w, &count, &err), 0);
            host_configs += count;
        }
        assert_int_equal (host_configs, s_ops[o].host_configs);
        print_message ("%s: host baseline and %zu candidate configurations pass the gates\n",
                       spec->name, host_configs);
        assert_int_equal (w.passed, 1 + host_configs);
        S.be->unload (S.dev, &w.ref);
        ak_spec_destroy (&spec);
    }
}

/*  The baseline with one substring replaced: must be wrong_answer. */
static void s_expect_wrong (const char *op, const char *from, const char *to)
{
    ak_cat_expect_wrong (&S, op, from, to);
}

static void test_wrong_kernels_fail (void **state)
{
    (void) state;
    s_expect_wrong ("cross_entropy", "((uint32_t) r * 2654435761u) % (uint32_t) V", "(uint32_t) (r % V)");
    s_expect_wrong ("layernorm", " + beta[n];", ";");
    s_expect_wrong ("reduce", "n < N; n++)", "n < N - (N > 8); n++)");
    s_expect_wrong ("rotary_embedding", "xr[i] * c - xr[i + half] * sn", "xr[i] * c + xr[i + half] * sn");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_specs_load),
        cmocka_unit_test (test_oracle_layernorm),
        cmocka_unit_test (test_oracle_reduce),
        cmocka_unit_test (test_oracle_cross_entropy),
        cmocka_unit_test (test_oracle_rotary),
        cmocka_unit_test (test_host_kernels_pass_gates),
        cmocka_unit_test (test_wrong_kernels_fail),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
