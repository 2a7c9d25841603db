/*  tests/gpu/test_gpu_wgmma.c: the sm_90a candidates (`wgmma` of matmul
    and fused_mlp) through the five gates with float16 and bfloat16 as the
    gate dtype.

    test_gpu_catalog runs every configuration too, but its gate dtype is
    the specs' primary one, float32, where these kernels run their FMA
    fallback: the edge sizes (K or N not a multiple of 8: the producer's
    fill without TMA; ragged tiles: TMA's zero fill and the guarded
    stores) would never meet the wgmma path.  Here each spec's dtypes are
    reordered so that float16, then bfloat16, is primary: smoke,
    stability, determinism and every edge size run in that dtype, the
    shape sweep in all three.  Configurations: the first of each
    candidate (the default) and its last, and for matmul the first with
    split K at its largest SPLIT (the partials, the counters and the
    ordered sum through every gate: with a 16-bit gate dtype, unlike
    test_gpu_catalog's float32, where the FMA path takes no SPLIT).

    Where there is no GPU: "SKIP: no GPU: <reason>" (exit 77); a device
    that is not compute capability 9.0 skips too, saying so.

    Built like test_gpu_catalog (compile requests and gate contexts by
    hand): whatever the sm_90a ABI adds there (the architecture of the
    build, the tensor maps of the launch) applies here the same way. */
#include "space.h"
#include "support.h"
#include "gpu.h"
#include "worker/backend.h"
#include "worker/gates.h"
#include "spec.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ak_gpu_fixture_t S;

static int s_group_setup (void **state)
{
    (void) state;
    return ak_gpu_fixture_open (&S, "gpuwgmma");
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_gpu_fixture_close (&S);
    return 0;
}

/*  Makes dt the spec's primary dtype (its tolerance moves with it). */
static void s_make_primary (ak_spec_t *spec, ak_dtype_t dt)
{
    for (int i = 0; i < spec->ndtypes; i++)
        if (spec->dtypes[i] == dt) {
            ak_dtype_t d = spec->dtypes[0];
            ak_tol_t t = spec->tol[0];
            spec->dtypes[0] = spec->dtypes[i];
            spec->tol[0] = spec->tol[i];
            spec->dtypes[i] = d;
            spec->tol[i] = t;
            return;
        }
    fail_msg ("%s does not declare %s", spec->name, ak_dtype_name (dt));
}

typedef struct {
    size_t index, first, last;
    int split;                          /* the SPLIT parameter's index, -1: none */
    int64_t split_max;
    bool have_split;
    int64_t values[3][AK_MAX_PARAMS];   /* first, last, first at the largest SPLIT */
} s_pick_t;

static int s_pick (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_pick_t *p = arg;
    for (int w = 0; w < 2; w++)
        if (p->index == (w ? p->last : p->first))
            memcpy (p->values[w], values, cand->nparams * sizeof *values);
    if (p->split >= 0 && !p->have_split && values[p->split] == p->split_max) {
        memcpy (p->values[2], values, cand->nparams * sizeof *values);
        p->have_split = true;
    }
    p->index++;
    return 0;
}

/*  One configuration of cand, every dtype built, through the gates. */
static void s_run (const ak_spec_t *spec, const ak_candidate_t *cand, const int64_t *values, ak_kernel_t *ref)
{
    const char *names[AK_MAX_PARAMS];
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    ak_gate_ctx_t g = {
        .spec = spec, .be = S.be, .dev = S.dev, .device = S.devs[0],
        .ref_be = S.host, .ref_dev = S.host_dev, .ref = ref, .seed = 42,
        .params = values, .param_names = names, .nparams = (int) cand->nparams,
        .launch = cand->launch,
    };
    ak_err_t err = { 0 };
    char text[256];
    size_t n = (size_t) snprintf (text, sizeof text, "%s %s gate dtype %s:", spec->name, cand->name,
                                  ak_dtype_name (spec->dtypes[0]));
    for (size_t k = 0; k < cand->nparams && n < sizeof text; k++)
        n += (size_t) snprintf (text + n, sizeof text - n, " %s=%lld", names[k], (long long) values[k]);
    for (int t = 0; t < spec->ndtypes; t++) {
        ak_compile_req_t req;
        ak_compile_out_t out = { 0 };
        memset (&req, 0, sizeof req);
        req.source = cand->source.text;
        req.source_len = strlen (cand->source.text);
        req.dtype = spec->dtypes[t];
        for (size_t k = 0; k < cand->nparams; k++) {
            req.define_names[k] = names[k];
            req.define_values[k] = values[k];
        }
        req.ndefines = (int) cand->nparams;
        req.cache_dir = S.cache;
        req.timeout_ms = 300000;
        req.device = S.devs[0];
        req.arch = cand->arch;      /* "sm_90a": wgmma and setmaxnreg need it */
        if (S.be->compile (&req, &out, &err) != 0)
            fail_msg ("%s (%s): compile: %s\n%.2000s", text, ak_dtype_name (spec->dtypes[t]), err.msg,
                      out.log ? out.log : "");
        if (S.be->load (S.dev, out.artifact_path, "ak_kernel", &g.kernel[spec->dtypes[t]], &err) != 0)
            fail_msg ("load %s: %s", out.artifact_path, err.msg);
        free (out.artifact_path);
        free (out.log);
    }
    ak_gate_report_t rep;
    assert_int_equal (ak_gates_run (&g, &rep, &err), 0);
    for (int t = 0; t < AK_DT_COUNT; t++)
        if (g.kernel[t])
            S.be->unload (S.dev, &g.kernel[t]);
    if (rep.status != AK_GATE_OK)
        fail_msg ("%s: %s: %s", text, ak_gate_status_name (rep.status), rep.reason);
    /* the edge stage ran, in the 16-bit dtype */
    const ak_gate_result_t *edge = NULL;
    for (int k = 0; k < rep.nstages; k++)
        if (ak_streq (rep.stages[k].stage, "edge_cases"))
            edge = &rep.stages[k];
    assert_non_null (edge);
    assert_true (edge->passed && !edge->skipped && edge->configs >= spec->nedge);
    print_message ("%s ... PASS; edge_cases: %s\n", text, edge->detail);
}

static void test_wgmma_gates (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    if (S.devs[0]->cc_major != 9 || S.devs[0]->cc_minor != 0)
        ak_test_skip ("sm_90a kernels: device 0 is sm_%u%u, not sm_90", S.devs[0]->cc_major, S.devs[0]->cc_minor);
    static const char *const ops[] = { "matmul", "fused_mlp" };
    static const ak_dtype_t gate_dts[] = { AK_DT_FLOAT16, AK_DT_BFLOAT16 };
    ak_err_t err = { 0 };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        char *rel = ak_sprintf ("kernels/%s/spec.json", ops[o]);
        char *path = ak_test_src (rel);
        ak_spec_t *spec = NULL;
        if (ak_spec_load (path, &spec, &err) != 0)
            fail_msg ("%s", err.msg);
        free (path);
        free (rel);
        /* GPU-only sizes need the device reference (test_gpu_reference) */
        while (spec->nsizes > 1 && spec->sizes[spec->nsizes - 1].backends)
            free (spec->sizes[--spec->nsizes].name);
        assert_true (spec->nedge > 0);

        ak_compile_req_t req;
        ak_compile_out_t out = { 0 };
        ak_kernel_t *ref = NULL;
        memset (&req, 0, sizeof req);
        req.source = spec->reference.text;
        req.source_len = strlen (spec->reference.text);
        req.reference = true;
        req.dtype = AK_DT_FLOAT32;
        req.cache_dir = S.cache;
        req.timeout_ms = 60000;
        if (S.host->compile (&req, &out, &err) != 0)
            fail_msg ("%s reference: %s\n%s", spec->name, err.msg, out.log ? out.log : "");
        if (S.host->load (S.host_dev, out.artifact_path, "ak_reference", &ref, &err) != 0)
            fail_msg ("%s", err.msg);
        free (out.artifact_path);
        free (out.log);

        const ak_candidate_t *cand = NULL;
        for (size_t c = 0; c < spec->ncandidates; c++)
            if (ak_streq (spec->candidates[c].name, "wgmma"))
                cand = &spec->candidates[c];
        assert_non_null (cand);
        s_pick_t pick = { .split = -1 };
        for (size_t i = 0; i < cand->nparams; i++)
            if (ak_streq (cand->params[i].name, "SPLIT")) {
                pick.split = (int) i;
                for (size_t k = 0; k < cand->params[i].nvalues; k++)
                    if (cand->params[i].values[k] > pick.split_max)
                        pick.split_max = cand->params[i].values[k];
            }
        assert_true (pick.split >= 0 || !ak_streq (ops[o], "matmul"));
        assert_int_equal (ak_space_walk (cand, NULL, NULL, &pick.last, &err), 0);
        pick.last--;
        assert_int_equal (ak_space_walk (cand, s_pick, &pick, NULL, &err), 0);
        assert_true (pick.split < 0 || (pick.have_split && pick.split_max > 1));
        for (size_t d = 0; d < sizeof gate_dts / sizeof gate_dts[0]; d++) {
            s_make_primary (spec, gate_dts[d]);
            for (int w = 0; w < (pick.have_split ? 3 : 2); w++)
                s_run (spec, cand, pick.values[w], ref);
        }
        S.host->unload (S.host_dev, &ref);
        ak_spec_destroy (&spec);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_wgmma_gates),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
