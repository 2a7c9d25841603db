/*  tests/gpu/test_gpu_spaces.c: the tuning spaces of the memory-bound
    operators (softmax, rmsnorm, layernorm, reduce, cross_entropy,
    rotary_embedding) through the correctness gates on a GPU, at every size
    of their specs: the host sizes and edge sizes against the float64 host
    oracle, the GPU-only LLM sizes (8192 rows and more: where a persistent
    grid strides, a cluster splits long rows) against the device reference
    on device inputs (sweep_all_sizes, as test_gpu_reference does for the
    baselines).

    Of every cuda candidate a sample of its configurations spread over the
    space (tests/support.c, ak_test_space_sample: the first, the last, then
    those that add parameter values not yet held, AK_SPACES_SAMPLE of them,
    default 4: a gate run at every size takes seconds; 12 or more hold
    every value of every parameter; every configuration with
    AK_SPACES_ALL=1: hours), each built with NVRTC for
    every declared dtype on a few threads; a candidate built for an
    architecture the device cannot run (row_cluster: sm_90) is named and
    left out.  AK_CATALOG_OPS="op1,op2" narrows the operators.

    Where there is no GPU, prints "SKIP: no GPU: <reason>" and exits 77
    ("Not Run" in CTest); any other probe error fails (tests/skip.h). */
#include "space.h"
#include "support.h"
#include "gpu.h"
#include "worker/backend.h"
#include "worker/gates.h"
#include "clock.h"
#include "spec.h"
#include "spec_cuda.h"
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_THREADS 12

static ak_gpu_fixture_t S;

static const char *const s_ops[] = { "softmax", "rmsnorm", "layernorm", "reduce", "cross_entropy",
                                     "rotary_embedding" };
#define S_NOPS (sizeof s_ops / sizeof s_ops[0])

static int s_group_setup (void **state)
{
    (void) state;
    return ak_gpu_fixture_open (&S, "gpuspaces");
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_gpu_fixture_close (&S);
    return 0;
}

/*  One configuration of one candidate: a kernel per dtype. */
typedef struct {
    const ak_spec_t *spec;
    const ak_candidate_t *cand;
    int64_t values[AK_MAX_PARAMS];
    char *path[AK_DT_COUNT];
    char error[2048];
} s_cfg_t;

typedef struct {
    s_cfg_t *items;
    size_t n, cap;
    atomic_size_t next;
} s_plan_t;

static void *s_compile_worker (void *arg)
{
    s_plan_t *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add (&p->next, 1);
        if (i >= p->n)
            return NULL;
        s_cfg_t *c = &p->items[i];
        for (int t = 0; t < c->spec->ndtypes && !c->error[0]; t++) {
            ak_compile_req_t req;
            ak_compile_out_t out = { 0 };
            ak_err_t err = { 0 };
            memset (&req, 0, sizeof req);
            req.source = c->cand->source.text;
            req.source_len = strlen (c->cand->source.text);
            req.dtype = c->spec->dtypes[t];
            for (size_t k = 0; k < c->cand->nparams; k++) {
                req.define_names[k] = c->cand->params[k].name;
                req.define_values[k] = c->values[k];
            }
            req.ndefines = (int) c->cand->nparams;
            req.cache_dir = S.cache;
            req.timeout_ms = 120000;
            req.device = S.devs[0];
            req.arch = c->cand->arch;
            if (S.be->compile (&req, &out, &err) == 0)
                c->path[c->spec->dtypes[t]] = out.artifact_path;
            else {
                snprintf (c->error, sizeof c->error, "%s: %.600s\n%.1200s", ak_dtype_name (req.dtype), err.msg,
                          out.log ? out.log : "");
                free (out.artifact_path);
            }
            free (out.log);
        }
    }
}

static void s_plan_add (s_plan_t *p, const ak_spec_t *spec, const ak_candidate_t *cand, const int64_t *values)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->items = ak_realloc (p->items, p->cap * sizeof *p->items);
    }
    s_cfg_t *c = &p->items[p->n++];
    memset (c, 0, sizeof *c);
    c->spec = spec;
    c->cand = cand;
    memcpy (c->values, values, cand->nparams * sizeof *values);
}

typedef struct {
    s_plan_t *plan;
    const ak_spec_t *spec;
} s_all_t;

static int s_add_all (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_all_t *a = arg;
    s_plan_add (a->plan, a->spec, cand, values);
    return 0;
}

static ak_kernel_t *s_build_ref (const ak_backend_t *be, ak_dev_t *dev, const char *source, const char *symbol)
{
    return ak_gpu_build (&S, be, dev, source, true, AK_DT_FLOAT32, symbol);
}

static void s_config_text (const s_cfg_t *c, char *buf, size_t len)
{
    size_t n = (size_t) snprintf (buf, len, "%s %s", c->spec->name, c->cand->name);
    for (size_t k = 0; k < c->cand->nparams && n < len; k++)
        n += (size_t) snprintf (buf + n, len - n, " %s=%lld", c->cand->params[k].name, (long long) c->values[k]);
}

static void test_spaces_gates (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    const char *only = getenv ("AK_CATALOG_OPS"), *all_env = getenv ("AK_SPACES_ALL");
    const bool all = all_env && strcmp (all_env, "1") == 0;
    /* each gate run at every size takes seconds (a 2048 x 128256 row set
       judged by a float64 device reference): 4 a candidate by default */
    const char *per_env = getenv ("AK_SPACES_SAMPLE");
    size_t per = per_env && atoi (per_env) > 0 ? (size_t) atoi (per_env) : 4;
    if (per > 64)
        per = 64;
    print_message ("configurations: %s\n", all ? "all (AK_SPACES_ALL=1)" : "a sample a candidate");
    ak_spec_t *specs[S_NOPS] = { NULL };
    s_plan_t plan = { 0 };
    for (size_t o = 0; o < S_NOPS; o++) {
        if (only && *only && !ak_test_listed (only, s_ops[o]))
            continue;
        char *rel = ak_sprintf ("kernels/%s/spec.json", s_ops[o]);
        char *path = ak_test_src (rel);
        ak_err_t err = { 0 };
        if (ak_spec_load (path, &specs[o], &err) != 0)
            fail_msg ("%s", err.msg);
        free (path);
        free (rel);
        const ak_spec_t *spec = specs[o];
        assert_non_null (spec->reference_cuda.text);
        for (size_t c = 0; c < spec->ncandidates; c++) {
            const ak_candidate_t *cand = &spec->candidates[c];
            if (strcmp (cand->backend, "cuda") != 0)
                continue;
            if (ak_arch_check (cand->arch, (int) S.devs[0]->cc_major, (int) S.devs[0]->cc_minor, NULL) != 0) {
                print_message ("%s %s: built for %s, not run on sm_%u%u\n", spec->name, cand->name, cand->arch,
                               S.devs[0]->cc_major, S.devs[0]->cc_minor);
                continue;
            }
            if (all) {
                s_all_t a = { .plan = &plan, .spec = spec };
                assert_int_equal (ak_space_walk (cand, s_add_all, &a, NULL, &err), 0);
                continue;
            }
            int64_t sample[64][AK_MAX_PARAMS];
            size_t n = ak_test_space_sample (cand, sample, per);
            for (size_t i = 0; i < n; i++)
                s_plan_add (&plan, spec, cand, sample[i]);
        }
    }
    uint64_t t0 = ak_clock_mono_ms ();
    pthread_t th[S_THREADS];
    for (int i = 0; i < S_THREADS; i++)
        assert_int_equal (pthread_create (&th[i], NULL, s_compile_worker, &plan), 0);
    for (int i = 0; i < S_THREADS; i++)
        pthread_join (th[i], NULL);
    print_message ("%zu configurations compiled (every dtype) in %.1f s\n", plan.n,
                   (double) (ak_clock_mono_ms () - t0) / 1000);

    t0 = ak_clock_mono_ms ();
    size_t failed = 0;
    for (size_t o = 0; o < S_NOPS; o++) {
        const ak_spec_t *spec = specs[o];
        if (!spec)
            continue;
        ak_gate_ctx_t g = {
            .spec = spec, .be = S.be, .dev = S.dev, .device = S.devs[0],
            .ref_be = S.host, .ref_dev = S.host_dev, .seed = 42,
            .dref_launch = spec->reference_cuda_launch, .sweep_all_sizes = true,
        };
        g.ref = s_build_ref (S.host, S.host_dev, spec->reference.text, "ak_reference");
        g.dref = s_build_ref (S.be, S.dev, spec->reference_cuda.text, "ak_reference");
        g.gen = s_build_ref (S.be, S.dev, spec->reference_cuda.text, "ak_fill_uniform");
        for (size_t i = 0; i < plan.n; i++) {
            s_cfg_t *c = &plan.items[i];
            if (c->spec != spec)
                continue;
            char text[512];
            s_config_text (c, text, sizeof text);
            if (c->error[0]) {
                print_error ("%s: compile failed: %s\n", text, c->error);
                failed++;
                continue;
            }
            const char *names[AK_MAX_PARAMS];
            for (size_t k = 0; k < c->cand->nparams; k++)
                names[k] = c->cand->params[k].name;
            g.params = c->values;
            g.param_names = names;
            g.nparams = (int) c->cand->nparams;
            g.launch = c->cand->launch;
            ak_err_t err = { 0 };
            for (int t = 0; t < spec->ndtypes; t++) {
                ak_dtype_t dt = spec->dtypes[t];
                if (S.be->load (S.dev, c->path[dt], "ak_kernel", &g.kernel[dt], &err) != 0)
                    fail_msg ("load %s: %s", c->path[dt], err.msg);
            }
            ak_gate_report_t rep;
            assert_int_equal (ak_gates_run (&g, &rep, &err), 0);
            for (int t = 0; t < AK_DT_COUNT; t++)
                if (g.kernel[t])
                    S.be->unload (S.dev, &g.kernel[t]);
            if (rep.status != AK_GATE_OK) {
                print_error ("%s: %s: %s\n", text, ak_gate_status_name (rep.status), rep.reason);
                failed++;
            }
            else if (!strstr (rep.stages[1].detail, "judged by the device reference")) {
                print_error ("%s: the GPU-only sizes were not judged: %s\n", text, rep.stages[1].detail);
                failed++;
            }
            else
                print_message ("%s ... PASS\n", text);
        }
        S.be->unload (S.dev, &g.gen);
        S.be->unload (S.dev, &g.dref);
        S.host->unload (S.host_dev, &g.ref);
    }
    print_message ("%zu configurations through the gates at every size in %.1f s, %zu failed\n", plan.n,
                   (double) (ak_clock_mono_ms () - t0) / 1000, failed);
    for (size_t i = 0; i < plan.n; i++)
        for (int t = 0; t < AK_DT_COUNT; t++)
            free (plan.items[i].path[t]);
    free (plan.items);
    for (size_t o = 0; o < S_NOPS; o++)
        ak_spec_destroy (&specs[o]);
    assert_int_equal (failed, 0);
    assert_true (plan.n > 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_spaces_gates),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
