/*  tests/gpu/test_gpu_catalog.c: every CUDA kernel of the catalog through
    the correctness gates on a real GPU, in process (worker/gates.c over the
    CUDA backend, the float64 host oracle beside it).

    For every operator of the catalog (each kernels/<op>/spec.json, or only
    those named in AK_CATALOG_OPS="op1,op2"): the cuda baseline and, of
    every cuda candidate, a sample of its configurations that holds every
    value of every parameter (tests/support.c, ak_test_space_sample; every
    configuration with AK_CATALOG_CONFIGS=all: the memory-bound spaces
    hold hundreds each, hours of gates), built with NVRTC for each
    declared dtype (float32, float16, bfloat16; compiles spread over a few
    threads), launched by the spec's launch rules, must pass all five
    stages.  Then two configurations the device cannot take come out as
    invalid_config before anything runs: a block of 2048 threads, and
    dynamic shared memory beyond the opt-in limit; a rule that evaluates to
    0 threads is invalid_config too.

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
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_THREADS 8

static ak_gpu_fixture_t S;

static int s_group_setup (void **state)
{
    (void) state;
    return ak_gpu_fixture_open (&S, "gpucat");
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_gpu_fixture_close (&S);
    return 0;
}

/* --------------------------------------------------------- compile plan */

/*  One kernel to build: a source, its defines and a dtype. */
typedef struct {
    const ak_spec_t *spec;
    const char *what;                    /* "baseline", candidate name */
    const ak_launch_rule_t *launch;
    const char *source;
    const char *names[AK_MAX_PARAMS];
    int64_t values[AK_MAX_PARAMS];
    int nparams;
    ak_dtype_t dt;
    const char *arch;                    /* the spec's "arch", NULL none */
    bool library;                        /* a library baseline (cuBLASLt) */
    char *path;                          /* the CUBIN, once built */
    char error[2200];
} s_build_t;

typedef struct {
    s_build_t *items;
    size_t n, cap;
    atomic_size_t next;
} s_plan_t;

static s_build_t *s_plan_add (s_plan_t *p)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->items = ak_realloc (p->items, p->cap * sizeof *p->items);
    }
    s_build_t *b = &p->items[p->n++];
    memset (b, 0, sizeof *b);
    return b;
}

static void *s_compile_worker (void *arg)
{
    s_plan_t *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add (&p->next, 1);
        if (i >= p->n)
            return NULL;
        s_build_t *b = &p->items[i];
        ak_compile_req_t req;
        ak_compile_out_t out = { 0 };
        ak_err_t err = { 0 };
        memset (&req, 0, sizeof req);
        req.source = b->source;
        req.source_len = strlen (b->source);
        req.dtype = b->dt;
        for (int k = 0; k < b->nparams; k++) {
            req.define_names[k] = b->names[k];
            req.define_values[k] = b->values[k];
        }
        req.ndefines = b->nparams;
        req.cache_dir = S.cache;
        req.timeout_ms = 120000;
        req.device = S.devs[0];
        req.arch = b->arch;
        req.library = b->library;
        if (S.be->compile (&req, &out, &err) == 0)
            b->path = out.artifact_path;
        else {
            snprintf (b->error, sizeof b->error, "%s\n%.900s", err.msg, out.log ? out.log : "");
            free (out.artifact_path);
        }
        free (out.log);
    }
}

typedef struct {
    s_plan_t *plan;
    const ak_spec_t *spec;
    const ak_candidate_t *cand;
} s_add_t;

static void s_add_kernel (s_plan_t *plan, const ak_spec_t *spec, const char *what,
                          const ak_launch_rule_t *launch, const char *source,
                          const char *const *names, const int64_t *values, int n, const char *arch,
                          bool library)
{
    for (int t = 0; t < spec->ndtypes; t++) {
        s_build_t *b = s_plan_add (plan);
        b->arch = arch;
        b->library = library;
        b->spec = spec;
        b->what = what;
        b->launch = launch;
        b->source = source;
        for (int k = 0; k < n; k++) {
            b->names[k] = names[k];
            b->values[k] = values[k];
        }
        b->nparams = n;
        b->dt = spec->dtypes[t];
    }
}

static int s_add_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_add_t *a = arg;
    const char *names[AK_MAX_PARAMS];
    if (ak_arch_check (cand->arch, (int) S.devs[0]->cc_major, (int) S.devs[0]->cc_minor, NULL) != 0) {
        print_message ("%s %s: built for %s, not run on sm_%u%u\n", a->spec->name, cand->name, cand->arch,
                       S.devs[0]->cc_major, S.devs[0]->cc_minor);
        return 1;                  /* stops the walk: no configuration of it runs here */
    }
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    s_add_kernel (a->plan, a->spec, cand->name, cand->launch, cand->source.text, names, values,
                  (int) cand->nparams, cand->arch, false);
    return 0;
}

/* ---------------------------------------------------------------- gates */

/*  Runs the gates over the kernels plan->items[from .. from+ndt) (one per
    dtype of the same configuration); returns the report's status. */
static ak_gate_status_t s_gate (s_build_t *group, int ndt, ak_kernel_t *ref, const ak_launch_rule_t *launch,
                                ak_gate_report_t *rep)
{
    ak_gate_ctx_t g = {
        .spec = group[0].spec, .be = S.be, .dev = S.dev, .device = S.devs[0],
        .ref_be = S.host, .ref_dev = S.host_dev, .ref = ref, .seed = 42,
        .params = group[0].values, .param_names = group[0].names, .nparams = group[0].nparams,
        .launch = launch,
    };
    ak_err_t err = { 0 };
    for (int t = 0; t < ndt; t++) {
        if (!group[t].path)
            fail_msg ("%s %s (%s): compile failed: %s", group[t].spec->name, group[t].what,
                      ak_dtype_name (group[t].dt), group[t].error);
        if (S.be->load (S.dev, group[t].path, "ak_kernel", &g.kernel[group[t].dt], &err) != 0)
            fail_msg ("load %s: %s", group[t].path, err.msg);
    }
    assert_int_equal (ak_gates_run (&g, rep, &err), 0);
    for (int t = 0; t < AK_DT_COUNT; t++)
        if (g.kernel[t])
            S.be->unload (S.dev, &g.kernel[t]);
    return rep->status;
}

static void s_config_text (const s_build_t *b, char *buf, size_t len)
{
    size_t n = (size_t) snprintf (buf, len, "%s", b->what);
    for (int k = 0; k < b->nparams && n < len; k++)
        n += (size_t) snprintf (buf + n, len - n, " %s=%lld", b->names[k], (long long) b->values[k]);
}

static void test_catalog_gates (void **state)
{
    (void) state;
    if (S.skip)
        skip ();
    char *ops[AK_TEST_MAX_OPS];
    int nops = ak_test_catalog_ops (ops, AK_TEST_MAX_OPS);
    ak_spec_t *specs[AK_TEST_MAX_OPS] = { NULL };
    ak_kernel_t *refs[AK_TEST_MAX_OPS] = { NULL };
    s_plan_t plan = { 0 };
    ak_err_t err = { 0 };
    const char *which = getenv ("AK_CATALOG_CONFIGS");
    const bool every = which && strcmp (which, "all") == 0;
    print_message ("configurations: %s\n", every ? "all (AK_CATALOG_CONFIGS=all)"
                                                  : "a sample covering every parameter value of each candidate");
    for (int o = 0; o < nops; o++) {
        char *rel = ak_sprintf ("kernels/%s/spec.json", ops[o]);
        char *path = ak_test_src (rel);
        if (ak_spec_load (path, &specs[o], &err) != 0)
            fail_msg ("%s", err.msg);
        free (path);
        free (rel);
        ak_spec_t *spec = specs[o];
        /* GPU-only sizes need the device reference: tests/gpu/test_gpu_reference.c
           gates them; here every configuration runs the host oracle's sizes. */
        while (spec->nsizes > 1 && spec->sizes[spec->nsizes - 1].backends)
            free (spec->sizes[--spec->nsizes].name);
        /* the float64 oracle, on the host */
        ak_compile_req_t req;
        ak_compile_out_t out = { 0 };
        memset (&req, 0, sizeof req);
        req.source = spec->reference.text;
        req.source_len = strlen (spec->reference.text);
        req.reference = true;
        req.dtype = AK_DT_FLOAT32;
        req.cache_dir = S.cache;
        req.timeout_ms = 60000;
        if (S.host->compile (&req, &out, &err) != 0)
            fail_msg ("%s reference: %s\n%s", spec->name, err.msg, out.log ? out.log : "");
        if (S.host->load (S.host_dev, out.artifact_path, "ak_reference", &refs[o], &err) != 0)
            fail_msg ("%s", err.msg);
        free (out.artifact_path);
        free (out.log);

        const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
        assert_non_null (bl);
        s_add_kernel (&plan, spec, "baseline", bl->launch, bl->source.text, NULL, NULL, 0, bl->arch,
                      bl->library != NULL);
        for (size_t c = 0; c < spec->ncandidates; c++) {
            const ak_candidate_t *cand = &spec->candidates[c];
            if (strcmp (cand->backend, "cuda") != 0)
                continue;
            s_add_t a = { .plan = &plan, .spec = spec, .cand = cand };
            if (every) {
                int wrc = ak_space_walk (cand, s_add_config, &a, NULL, &err);
                assert_true (wrc == 0 || wrc == 1);
                continue;
            }
            /* the tuning spaces hold hundreds of configurations: a sample
               that covers every value of every parameter */
            int64_t sample[64][AK_MAX_PARAMS];
            size_t ns = ak_test_space_sample (cand, sample, 64);
            for (size_t i = 0; i < ns; i++)
                if (s_add_config (cand, sample[i], &a) != 0)
                    break;
        }
    }

    /* Compile everything on a few threads (NVRTC runs in child processes). */
    uint64_t t0 = ak_clock_mono_ms ();
    pthread_t th[S_THREADS];
    for (int i = 0; i < S_THREADS; i++)
        assert_int_equal (pthread_create (&th[i], NULL, s_compile_worker, &plan), 0);
    for (int i = 0; i < S_THREADS; i++)
        pthread_join (th[i], NULL);
    print_message ("%zu kernels compiled in %.1f s\n", plan.n, (double) (ak_clock_mono_ms () - t0) / 1000);

    /* Gates, one configuration (all its dtypes) at a time. */
    t0 = ak_clock_mono_ms ();
    size_t configs = 0;
    for (size_t i = 0; i < plan.n; ) {
        s_build_t *group = &plan.items[i];
        int ndt = group->spec->ndtypes, o = 0;
        while (specs[o] != group->spec)
            o++;
        ak_gate_report_t rep;
        char text[256];
        s_config_text (group, text, sizeof text);
        if (s_gate (group, ndt, refs[o], group->launch, &rep) != AK_GATE_OK)
            fail_msg ("%s %s: %s: %s", group->spec->name, text, ak_gate_status_name (rep.status), rep.reason);
        const ak_gate_result_t *sweep = &rep.stages[1];
        if (strstr (sweep->detail, "skipped"))
            fail_msg ("%s %s: shape_sweep skipped dtypes: %s", group->spec->name, text, sweep->detail);
        bool last = i + (size_t) ndt >= plan.n || plan.items[i + ndt].what != group->what
                    || plan.items[i + ndt].spec != group->spec;
        if (last)
            print_message ("%s %s ... PASS; last: %s\n", group->spec->name, group->what, sweep->detail);
        configs++;
        i += (size_t) ndt;
    }
    print_message ("%zu configurations through the gates in %.1f s\n", configs,
                   (double) (ak_clock_mono_ms () - t0) / 1000);

    /* Configurations the device cannot take: invalid_config, before launch. */
    s_build_t *base = NULL;                            /* softmax baseline, float32 first */
    int soft = 0;
    for (size_t i = 0; i < plan.n && !base; i++)
        if (strcmp (plan.items[i].spec->name, "softmax") == 0)
            base = &plan.items[i];
    if (!base) {
        print_message ("softmax not in AK_CATALOG_OPS: invalid_config cases not run\n");
        goto done;
    }
    while (specs[soft] != base->spec)
        soft++;
    assert_string_equal (base->what, "baseline");
    static const struct { const char *block, *shared, *needle; } bad[] = {
        { "2048", "0", "block" },
        { "128", "1048576", "shared memory" },
        { "rows - rows", "0", "launch.block[0]" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ak_launch_rule_t rule = { .grid = { "rows" }, .ngrid = 1, .block = { (char *) bad[k].block },
                                  .nblock = 1, .shared = (char *) bad[k].shared };
        ak_gate_report_t rep;
        ak_gate_status_t st = s_gate (base, base->spec->ndtypes, refs[soft], &rule, &rep);
        print_message ("block %s shared %s: %s: %s\n", bad[k].block, bad[k].shared,
                       ak_gate_status_name (st), rep.reason);
        assert_int_equal (st, AK_GATE_INVALID);
        assert_non_null (strstr (rep.reason, bad[k].needle));
    }

done:
    for (size_t i = 0; i < plan.n; i++)
        free (plan.items[i].path);
    free (plan.items);
    for (int o = 0; o < nops; o++) {
        S.host->unload (S.host_dev, &refs[o]);
        ak_spec_destroy (&specs[o]);
        free (ops[o]);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_catalog_gates),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
