/*  tests/unit/test_cuda_spaces.c: the tuning spaces of the memory-bound
    operators' CUDA candidates (issue 20: "spaces worth a night").

    - Each of softmax, rmsnorm, layernorm, reduce, cross_entropy and
      rotary_embedding keeps at least AK_SPACE_MIN valid configurations
      over its cuda candidates.
    - The constraints drop what must not reach the compiler, checked on
      explicit configurations (kept and dropped), and the launch rules of
      the persistent grid and the cluster split come out as designed.
    - NVRTC (sm_90, no driver needed) compiles a deterministic sample of
      each new space (the candidates with a HINT parameter): one
      configuration inside it (test_cuda_catalog builds the first of every
      candidate in every dtype and its last in the dtypes that can differ),
      and (not row_cluster: the
      same source) the first with HINT 1 and with HINT 2 at a VECB
      alternating over the operators, each for one dtype in turn so every
      dtype is built: 23 kernels, well under a minute of CPU on a 2-core
      box, within the
      suite's budget (tests/gpu/test_gpu_spaces.c gates a sample covering
      every value of every parameter on a GPU).  With AK_SPACES_ALL=1 it
      compiles every configuration of every candidate for every dtype
      instead (hours on a 2-core box: the CTest entry
      exhaustive_cuda_spaces, label "exhaustive", which ops/test.sh
      leaves out; docs/operations.md says how to run it), on
      $AK_SPACES_JOBS threads (default 2), the operators in
      $AK_CATALOG_OPS and the dtypes in $AK_CATALOG_DTYPES when set.
    Without NVRTC the compile test skips (tests/skip.h). */
#include "space.h"
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "clock.h"
#include "spec.h"
#include "spec_cuda.h"
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fewest valid configurations an operator's cuda candidates keep. */
#define AK_SPACE_MIN 300

static const char *const s_ops[] = { "softmax", "rmsnorm", "layernorm", "reduce", "cross_entropy",
                                     "rotary_embedding" };
#define S_NOPS (sizeof s_ops / sizeof s_ops[0])

static ak_spec_t *s_builtin (const char *op)
{
    char *rel = ak_sprintf ("kernels/%s/spec.json", op);
    char *path = ak_test_src (rel);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_load (path, &spec, &err) != 0)
        fail_msg ("%s", err.msg);
    free (path);
    free (rel);
    return spec;
}

static const ak_candidate_t *s_cand (const ak_spec_t *spec, const char *name)
{
    for (size_t c = 0; c < spec->ncandidates; c++)
        if (strcmp (spec->candidates[c].name, name) == 0)
            return &spec->candidates[c];
    fail_msg ("%s: no candidate %s", spec->name, name);
    return NULL;
}

/* ------------------------------------------------------------ counts */

static void test_space_sizes (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++) {
        ak_spec_t *spec = s_builtin (s_ops[o]);
        size_t total = 0;
        for (size_t c = 0; c < spec->ncandidates; c++) {
            const ak_candidate_t *cand = &spec->candidates[c];
            if (strcmp (cand->backend, "cuda") != 0)
                continue;
            size_t n = 0, raw = 1;
            ak_err_t err = { 0 };
            assert_int_equal (ak_space_walk (cand, NULL, NULL, &n, &err), 0);
            for (size_t p = 0; p < cand->nparams; p++)
                raw *= cand->params[p].nvalues;
            print_message ("%s %s: %zu of %zu configurations valid\n", spec->name, cand->name, n, raw);
            total += n;
        }
        print_message ("%s: %zu valid cuda configurations\n", spec->name, total);
        if (total < AK_SPACE_MIN)
            fail_msg ("%s: %zu valid cuda configurations, fewer than %d", spec->name, total, AK_SPACE_MIN);
        ak_spec_destroy (&spec);
    }
}

/* ------------------------------------------------------- constraints */

typedef struct {
    const int64_t *want;
    bool found;
} s_find_t;

static int s_find (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_find_t *f = arg;
    if (memcmp (values, f->want, cand->nparams * sizeof *values) == 0) {
        f->found = true;
        return 1;
    }
    return 0;
}

/*  Whether the walk keeps the configuration "NAME=V NAME=V ..." (every
    parameter named, in any order). */
static bool s_kept (const ak_candidate_t *cand, const char *text)
{
    int64_t want[AK_MAX_PARAMS];
    size_t named = 0;
    char *copy = ak_strdup (text), *save = NULL;
    for (char *tok = strtok_r (copy, " ", &save); tok; tok = strtok_r (NULL, " ", &save)) {
        char *eq = strchr (tok, '=');
        assert_non_null (eq);
        *eq = '\0';
        size_t p = 0;
        while (p < cand->nparams && strcmp (cand->params[p].name, tok) != 0)
            p++;
        if (p == cand->nparams)
            fail_msg ("%s: no parameter %s", cand->name, tok);
        want[p] = strtoll (eq + 1, NULL, 10);
        named++;
    }
    free (copy);
    assert_int_equal (named, cand->nparams);
    s_find_t f = { .want = want };
    ak_err_t err = { 0 };
    int rc = ak_space_walk (cand, s_find, &f, NULL, &err);
    assert_true (rc == 0 || rc == 1);
    return f.found;
}

static void test_constraints (void **state)
{
    (void) state;
    static const char *const rows[] = { "softmax", "rmsnorm", "layernorm", "reduce", "cross_entropy" };
    static const char *const main_name[] = { "row_cached", "row_cached", "row_cached", "row_stream",
                                             "row_online" };
    for (size_t o = 0; o < sizeof rows / sizeof rows[0]; o++) {
        ak_spec_t *spec = s_builtin (rows[o]);
        const ak_candidate_t *c = s_cand (spec, main_name[o]);
        /* kept: a warp-per-row block of 4 rows, 128-bit loads, 4 in flight */
        assert_true (s_kept (c, "WPR=1 ROWS=4 VECB=16 LOADS=4 HINT=0 BPS=0"));
        assert_true (s_kept (c, "WPR=8 ROWS=1 VECB=4 LOADS=16 HINT=2 BPS=4"));
        assert_true (s_kept (c, "WPR=32 ROWS=1 VECB=16 LOADS=4 HINT=3 BPS=0"));
        /* dropped: 2048 threads a block */
        assert_false (s_kept (c, "WPR=32 ROWS=2 VECB=16 LOADS=2 HINT=0 BPS=0"));
        /* dropped: 16 bytes a thread (too few in flight), 256 (registers) */
        assert_false (s_kept (c, "WPR=4 ROWS=1 VECB=16 LOADS=1 HINT=0 BPS=0"));
        assert_false (s_kept (c, "WPR=4 ROWS=1 VECB=16 LOADS=16 HINT=0 BPS=0"));
        assert_false (s_kept (c, "WPR=1 ROWS=1 VECB=4 LOADS=4 HINT=1 BPS=0"));
        /* dropped: 1024 threads holding 128 bytes each (128 KiB of registers) */
        assert_false (s_kept (c, "WPR=32 ROWS=1 VECB=16 LOADS=8 HINT=0 BPS=0"));
        /* dropped: a persistent grid whose 4 blocks of 1024 threads cannot
           all be resident on an SM (2048 threads) */
        assert_false (s_kept (c, "WPR=32 ROWS=1 VECB=16 LOADS=2 HINT=0 BPS=4"));
        assert_true (s_kept (c, "WPR=16 ROWS=2 VECB=16 LOADS=2 HINT=0 BPS=0"));
        assert_false (s_kept (c, "WPR=16 ROWS=2 VECB=16 LOADS=2 HINT=0 BPS=4"));
        assert_true (s_kept (c, "WPR=16 ROWS=1 VECB=16 LOADS=2 HINT=0 BPS=4"));

        /* the cluster split: sm_90, CL blocks a row, one row a cluster */
        const ak_candidate_t *k = s_cand (spec, "row_cluster");
        assert_non_null (k->arch);
        assert_string_equal (k->arch, "sm_90");
        assert_true (s_kept (k, "WPR=32 VECB=16 LOADS=4 HINT=1 CL=8"));
        assert_false (s_kept (k, "WPR=32 VECB=16 LOADS=8 HINT=1 CL=8"));
        assert_false (s_kept (k, "WPR=8 VECB=16 LOADS=16 HINT=0 CL=2"));

        /* launch rules: one block a row group, or a persistent grid of
           132*BPS blocks when there are more groups; CL blocks a row */
        const char *names[AK_MAX_PARAMS];
        for (size_t p = 0; p < c->nparams; p++)
            names[p] = c->params[p].name;
        int64_t vals[6] = { 1, 4, 16, 4, 0, 0 };                 /* WPR ROWS VECB LOADS HINT BPS */
        static const struct { int64_t rows, bps; unsigned grid; } g[] = {
            { 8192, 0, 2048 }, { 8192, 4, 528 }, { 130, 4, 33 }, { 3, 0, 1 }, { 3, 4, 1 },
        };
        for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
            int64_t dims[AK_MAX_DIMS] = { g[i].rows, 4096 };
            vals[5] = g[i].bps;
            ak_launch_cfg_t lc;
            ak_err_t err = { 0 };
            if (ak_launch_eval (spec, c->launch, dims, AK_DT_FLOAT32, names, vals, 6, &lc, &err))
                fail_msg ("%s: %s", spec->name, err.msg);
            assert_int_equal (lc.grid[0], g[i].grid);
            assert_int_equal (lc.block[0], 32);
            assert_int_equal (lc.block[1], 4);
        }
        const char *knames[AK_MAX_PARAMS];
        for (size_t p = 0; p < k->nparams; p++)
            knames[p] = k->params[p].name;
        int64_t kv[5] = { 16, 16, 4, 0, 4 };                       /* WPR VECB LOADS HINT CL */
        int64_t dims[AK_MAX_DIMS] = { 5, 50257 };
        ak_launch_cfg_t lc;
        ak_err_t err = { 0 };
        if (ak_launch_eval (spec, k->launch, dims, AK_DT_BFLOAT16, knames, kv, 5, &lc, &err))
            fail_msg ("%s: %s", spec->name, err.msg);
        assert_int_equal (lc.grid[0], 20);
        assert_int_equal (lc.block[0], 512);
        assert_int_equal (lc.cluster[0], 4);
        ak_spec_destroy (&spec);
    }

    ak_spec_t *spec = s_builtin ("rotary_embedding");
    const ak_candidate_t *c = s_cand (spec, "pos_major");
    assert_true (s_kept (c, "TX=32 SPB=4 HSPLIT=1 VECB=16 HU=4 HINT=2"));
    assert_false (s_kept (c, "TX=64 SPB=8 HSPLIT=1 VECB=16 HU=2 HINT=0"));   /* 512 threads */
    assert_false (s_kept (c, "TX=16 SPB=1 HSPLIT=1 VECB=16 HU=2 HINT=0"));   /* 16 threads */
    assert_false (s_kept (c, "TX=32 SPB=4 HSPLIT=1 VECB=16 HU=8 HINT=0"));   /* 256 bytes held */
    assert_false (s_kept (c, "TX=32 SPB=4 HSPLIT=1 VECB=4 HU=2 HINT=0"));    /* 8 bytes in flight */
    ak_spec_destroy (&spec);
}

/* -------------------------------------------------------------- NVRTC */

typedef struct {
    const ak_spec_t *spec;
    const ak_candidate_t *cand;
    int64_t values[AK_MAX_PARAMS];
    ak_dtype_t dt;
    int rc;
    char error[2048];
} s_job_t;

typedef struct {
    const ak_backend_t *be;
    Ak__Device dev;
    char *dir;
    s_job_t *jobs;
    size_t n, cap;
    atomic_size_t next, done;
    size_t total;
} s_plan_t;

static void s_add (s_plan_t *p, const ak_spec_t *spec, const ak_candidate_t *cand, const int64_t *values,
                   ak_dtype_t dt)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 256;
        p->jobs = ak_realloc (p->jobs, p->cap * sizeof *p->jobs);
    }
    s_job_t *j = &p->jobs[p->n++];
    memset (j, 0, sizeof *j);
    j->spec = spec;
    j->cand = cand;
    memcpy (j->values, values, cand->nparams * sizeof *values);
    j->dt = dt;
}

static void s_config_text (const s_job_t *j, char *buf, size_t len)
{
    size_t n = (size_t) snprintf (buf, len, "%s %s %s", j->spec->name, j->cand->name, ak_dtype_name (j->dt));
    for (size_t k = 0; k < j->cand->nparams && n < len; k++)
        n += (size_t) snprintf (buf + n, len - n, " %s=%lld", j->cand->params[k].name, (long long) j->values[k]);
}

static void *s_compile_worker (void *arg)
{
    s_plan_t *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add (&p->next, 1);
        if (i >= p->n)
            return NULL;
        s_job_t *j = &p->jobs[i];
        ak_compile_req_t req;
        ak_compile_out_t out = { 0 };
        ak_err_t err = { 0 };
        memset (&req, 0, sizeof req);
        req.source = j->cand->source.text;
        req.source_len = strlen (j->cand->source.text);
        req.dtype = j->dt;
        req.cache_dir = p->dir;
        req.timeout_ms = 300000;   /* what is asserted is that it compiles, not how fast */
        req.device = &p->dev;
        req.arch = j->cand->arch;
        for (size_t k = 0; k < j->cand->nparams; k++) {
            req.define_names[k] = j->cand->params[k].name;
            req.define_values[k] = j->values[k];
        }
        req.ndefines = (int) j->cand->nparams;
        j->rc = p->be->compile (&req, &out, &err);
        if (j->rc)
            snprintf (j->error, sizeof j->error, "%.600s\n%.1200s", err.msg, out.log ? out.log : "");
        free (out.artifact_path);
        free (out.log);
        size_t d = atomic_fetch_add (&p->done, 1) + 1;
        if (p->total > 64 && d % 50 == 0)
            fprintf (stderr, "test_cuda_spaces: %zu of %zu compiled\n", d, p->total);
    }
}

typedef struct {
    s_plan_t *plan;
    const ak_spec_t *spec;
} s_all_t;

/* Every dtype of the spec, or those in $AK_CATALOG_DTYPES ("bfloat16"). */
static int s_add_all (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_all_t *a = arg;
    const char *only = getenv ("AK_CATALOG_DTYPES");
    for (int t = 0; t < a->spec->ndtypes; t++)
        if (!only || !*only || ak_test_listed (only, ak_dtype_name (a->spec->dtypes[t])))
            s_add (a->plan, a->spec, cand, values, a->spec->dtypes[t]);
    return 0;
}

static bool s_has_param (const ak_candidate_t *cand, const char *name)
{
    for (size_t p = 0; p < cand->nparams; p++)
        if (strcmp (cand->params[p].name, name) == 0)
            return true;
    return false;
}

typedef struct {
    size_t p1, p2;
    int64_t v1, v2;
    int64_t *out;
    bool found;
} s_where_t;

static int s_where (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_where_t *w = arg;
    if (values[w->p1] == w->v1 && values[w->p2] == w->v2) {
        memcpy (w->out, values, cand->nparams * sizeof *values);
        w->found = true;
        return 1;
    }
    return 0;
}

/*  The first valid configuration (walk order) with n1 = v1 and n2 = v2
    into out; false when the candidate has no such parameters or none. */
static bool s_first_where (const ak_candidate_t *cand, const char *n1, int64_t v1, const char *n2, int64_t v2,
                           int64_t *out)
{
    s_where_t w = { .p1 = cand->nparams, .p2 = cand->nparams, .v1 = v1, .v2 = v2, .out = out };
    for (size_t p = 0; p < cand->nparams; p++) {
        if (strcmp (cand->params[p].name, n1) == 0)
            w.p1 = p;
        if (strcmp (cand->params[p].name, n2) == 0)
            w.p2 = p;
    }
    if (w.p1 == cand->nparams || w.p2 == cand->nparams)
        return false;
    ak_err_t err = { 0 };
    int rc = ak_space_walk (cand, s_where, &w, NULL, &err);
    assert_true (rc == 0 || rc == 1);
    return w.found;
}

static void test_compile_spaces (void **state)
{
    (void) state;
    ak_test_cuda_or_skip (false, NULL, NULL);
    const char *all_env = getenv ("AK_SPACES_ALL");
    const bool all = all_env && strcmp (all_env, "1") == 0;
    const char *jobs_env = getenv ("AK_SPACES_JOBS");
    int nthreads = jobs_env && atoi (jobs_env) > 0 ? atoi (jobs_env) : 2;
    if (nthreads > 64)
        nthreads = 64;
    s_plan_t plan;
    memset (&plan, 0, sizeof plan);
    plan.be = ak_backend_find ("cuda");
    ak__device__init (&plan.dev);
    plan.dev.cc_major = 9;
    plan.dev.cc_minor = 0;
    plan.dir = ak_test_tmpdir ("cudaspaces");
    assert_non_null (plan.dir);
    const char *only = getenv ("AK_CATALOG_OPS");

    ak_spec_t *specs[S_NOPS] = { NULL };
    for (size_t o = 0; o < S_NOPS; o++) {
        if (only && *only && !ak_test_listed (only, s_ops[o]))
            continue;
        ak_spec_t *spec = specs[o] = s_builtin (s_ops[o]);
        size_t turn = 0;                 /* the sample's dtypes rotate over the op's candidates */
        for (size_t c = 0; c < spec->ncandidates; c++) {
            const ak_candidate_t *cand = &spec->candidates[c];
            if (strcmp (cand->backend, "cuda") != 0 || !s_has_param (cand, "HINT"))
                continue;          /* block_row, warp_row: test_cuda_catalog builds them */
            if (all) {
                s_all_t a = { .plan = &plan, .spec = spec };
                ak_err_t err = { 0 };
                assert_int_equal (ak_space_walk (cand, s_add_all, &a, NULL, &err), 0);
                continue;
            }
            /* one configuration inside the space (test_cuda_catalog builds
               the first and the last of every candidate in every dtype);
               of the main candidate (not row_cluster: the same source and
               hints) also the first with HINT 1 and with HINT 2, at a VECB
               that alternates over the operators, so every hint's PTX goes
               through ptxas for 4- and 16-byte accesses somewhere */
            int64_t pick[4][AK_MAX_PARAMS];
            size_t n = 0;
            if (ak_test_space_sample (cand, pick, 3) == 3)
                memcpy (pick[n++], pick[2], sizeof pick[0]);
            for (int64_t h = 1; h <= 2 && !s_has_param (cand, "CL"); h++) {
                int64_t vecb = (int64_t) ((o + (size_t) h) % 2 ? 4 : 16);
                if (s_first_where (cand, "HINT", h, "VECB", vecb, pick[n]))
                    n++;
            }
            for (size_t i = 0; i < n; i++)
                s_add (&plan, spec, cand, pick[i], spec->dtypes[turn++ % (size_t) spec->ndtypes]);
        }
    }
    plan.total = plan.n;
    print_message ("%zu kernels to compile (%s) on %d threads\n", plan.n,
                   all ? "every configuration, every dtype" : "a sample, one dtype each", nthreads);
    uint64_t t0 = ak_clock_mono_ms ();
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++)
        assert_int_equal (pthread_create (&th[i], NULL, s_compile_worker, &plan), 0);
    for (int i = 0; i < nthreads; i++)
        pthread_join (th[i], NULL);
    size_t failed = 0;
    for (size_t i = 0; i < plan.n; i++)
        if (plan.jobs[i].rc) {
            char text[512];
            s_config_text (&plan.jobs[i], text, sizeof text);
            print_error ("compile failed: %s: %s\n", text, plan.jobs[i].error);
            failed++;
        }
    print_message ("%zu kernels compiled for sm_90 in %.1f s, %zu failed\n", plan.n - failed,
                   (double) (ak_clock_mono_ms () - t0) / 1000, failed);
    ak_test_rmtree (plan.dir);
    free (plan.dir);
    free (plan.jobs);
    for (size_t o = 0; o < S_NOPS; o++)
        ak_spec_destroy (&specs[o]);
    assert_int_equal (failed, 0);
    assert_true (plan.n > 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_space_sizes),
        cmocka_unit_test (test_constraints),
        cmocka_unit_test (test_compile_spaces),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
