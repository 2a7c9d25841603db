/*  tests/unit/test_examples.c: the example external operators of
    ops/examples/<op>/ without a GPU.

    - Each loads as an external operator (the spec and its sources from its
      own directory) and names no built-in operator of kernels/.
    - Its CUDA launch rules evaluate, for every configuration, size, edge
      size and dtype, to a configuration an sm_90 device takes.
    - NVRTC compiles (sm_90, where libnvrtc loads) its CUDA baseline and
      the first and last configuration of every CUDA candidate, for every
      declared dtype.
    The host kernels are run through the gates end to end by
    tests/integration/test_external_op.c. */
#include "manifest.h"
#include "space.h"
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/cuda_api.h"
#include "corpus.h"
#include "spec.h"
#include "util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*  The example operators: every ops/examples/<op>/spec.json, loaded (the
    test fails on one that does not load).  *n_p gets the count. */
static ak_spec_t **s_examples (size_t *n_p)
{
    char *root = ak_test_src ("ops/examples");
    DIR *d = opendir (root);
    if (!d)
        fail_msg ("cannot open %s", root);
    ak_spec_t **specs = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir (d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *path = ak_sprintf ("%s/%s/spec.json", root, e->d_name);
        if (access (path, R_OK) == 0) {
            ak_err_t err = { 0, "" };
            specs = ak_realloc (specs, (n + 1) * sizeof *specs);
            if (ak_spec_load (path, &specs[n], &err) != 0)
                fail_msg ("%s", err.msg);
            n++;
        }
        free (path);
    }
    closedir (d);
    free (root);
    *n_p = n;
    return specs;
}

static void s_free_examples (ak_spec_t **specs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ak_spec_destroy (&specs[i]);
    free (specs);
}

static void test_examples_are_external (void **state)
{
    (void) state;
    size_t n = 0;
    ak_spec_t **specs = s_examples (&n);
    assert_true (n >= 1);
    char *catalog = ak_test_src ("kernels");
    for (size_t i = 0; i < n; i++) {
        char *builtin = ak_catalog_builtin (catalog, specs[i]->name);
        if (builtin)
            fail_msg ("example %s has the name of the built-in %s", specs[i]->name, builtin);
        /* every example runs on the host and on a GPU */
        assert_non_null (ak_spec_baseline (specs[i], "host"));
        assert_non_null (ak_spec_baseline (specs[i], "cuda"));
    }
    free (catalog);
    s_free_examples (specs, n);
}

/* --------------------------------------------------------- launch rules */

typedef struct {
    const ak_spec_t *spec;
    const ak_launch_rule_t *rule;
    size_t checked;
} s_rules_t;

static void s_check_launch (s_rules_t *r, const char *const *names, const int64_t *values, int n)
{
    const ak_spec_t *spec = r->spec;
    for (size_t z = 0; z < spec->nsizes + spec->nedge; z++) {
        const ak_size_t *size = z < spec->nsizes ? &spec->sizes[z] : &spec->edge_sizes[z - spec->nsizes];
        for (int t = 0; t < spec->ndtypes; t++) {
            ak_launch_cfg_t lc;
            ak_err_t err = { 0, "" };
            if (ak_launch_eval (spec, r->rule, size->dims, spec->dtypes[t], names, values, n, &lc, &err))
                fail_msg ("%s at %s: %s", spec->name, size->name, err.msg);
            uint64_t threads = (uint64_t) lc.block[0] * lc.block[1] * lc.block[2];
            if (threads > 1024 || lc.block[2] > 64 || lc.grid[1] > 65535 || lc.grid[2] > 65535
                || lc.shared_bytes > 48 * 1024)
                fail_msg ("%s at %s: grid %u block %u shared %u is beyond an sm_90 device",
                          spec->name, size->name, lc.grid[0], lc.block[0], lc.shared_bytes);
            r->checked++;
        }
    }
}

static int s_check_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    const char *names[AK_MAX_PARAMS];
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    s_check_launch (arg, names, values, (int) cand->nparams);
    return 0;
}

static void test_examples_launch_rules (void **state)
{
    (void) state;
    size_t n = 0;
    ak_spec_t **specs = s_examples (&n);
    for (size_t i = 0; i < n; i++) {
        const ak_spec_t *spec = specs[i];
        s_rules_t r = { .spec = spec, .rule = ak_spec_baseline (spec, "cuda")->launch };
        s_check_launch (&r, NULL, NULL, 0);
        for (size_t c = 0; c < spec->ncandidates; c++) {
            if (strcmp (spec->candidates[c].backend, "cuda") != 0)
                continue;
            r.rule = spec->candidates[c].launch;
            ak_err_t err = { 0, "" };
            assert_int_equal (ak_space_walk (&spec->candidates[c], s_check_config, &r, NULL, &err), 0);
        }
        print_message ("%s: %zu launch configurations checked\n", spec->name, r.checked);
    }
    s_free_examples (specs, n);
}

/* -------------------------------------------------------------- NVRTC */

typedef struct {
    const ak_backend_t *be;
    Ak__Device          dev;
    char               *dir;
    const ak_spec_t    *spec;
    size_t              index, last;    /* of the configuration being walked */
    int                 compiled;
} s_nv_t;

static void s_compile (s_nv_t *nv, const char *text, ak_dtype_t dt, const char *const *names,
                       const int64_t *values, int n)
{
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0, "" };
    memset (&req, 0, sizeof req);
    req.source = text;
    req.source_len = strlen (text);
    req.dtype = dt;
    req.cache_dir = nv->dir;
    req.timeout_ms = 60000;
    req.device = &nv->dev;
    for (int i = 0; i < n; i++) {
        req.define_names[i] = names[i];
        req.define_values[i] = values[i];
    }
    req.ndefines = n;
    if (nv->be->compile (&req, &out, &err) != 0)
        fail_msg ("%s: NVRTC (%s): %s\n%s", nv->spec->name, ak_dtype_name (dt), err.msg,
                  out.log ? out.log : "");
    free (out.log);
    free (out.artifact_path);
    nv->compiled++;
}

/*  The first and the last configuration of a candidate (the extremes of
    its space; NVRTC takes a second a build), every dtype. */
static int s_compile_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_nv_t *nv = arg;
    bool extreme = nv->index == 0 || nv->index == nv->last;
    nv->index++;
    if (!extreme)
        return 0;
    const char *names[AK_MAX_PARAMS];
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    for (int t = 0; t < nv->spec->ndtypes; t++)
        s_compile (nv, cand->source.text, nv->spec->dtypes[t], names, values, (int) cand->nparams);
    return 0;
}

static void test_examples_compile (void **state)
{
    (void) state;
    s_nv_t nv = { .be = ak_backend_find ("cuda") };
    ak_err_t err = { 0, "" };
    ak_test_cuda_or_skip (false, NULL, NULL);
    ak__device__init (&nv.dev);
    nv.dev.cc_major = 9;
    nv.dev.cc_minor = 0;
    nv.dir = ak_test_tmpdir ("examples");
    size_t n = 0;
    ak_spec_t **specs = s_examples (&n);
    for (size_t i = 0; i < n; i++) {
        nv.spec = specs[i];
        const ak_baseline_t *bl = ak_spec_baseline (specs[i], "cuda");
        for (int t = 0; t < specs[i]->ndtypes; t++)
            s_compile (&nv, bl->source.text, specs[i]->dtypes[t], NULL, NULL, 0);
        for (size_t c = 0; c < specs[i]->ncandidates; c++) {
            const ak_candidate_t *cand = &specs[i]->candidates[c];
            if (strcmp (cand->backend, "cuda") != 0)
                continue;
            nv.index = 0;
            assert_int_equal (ak_space_walk (cand, NULL, NULL, &nv.last, &err), 0);
            nv.last--;
            assert_int_equal (ak_space_walk (cand, s_compile_config, &nv, NULL, &err), 0);
        }
    }
    print_message ("%d example CUDA kernels compiled for sm_90\n", nv.compiled);
    assert_true (nv.compiled > 0);
    s_free_examples (specs, n);
    ak_test_rmtree (nv.dir);
    free (nv.dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_examples_are_external),
        cmocka_unit_test (test_examples_launch_rules),
        cmocka_unit_test (test_examples_compile),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
