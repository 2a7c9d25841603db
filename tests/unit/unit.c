/*  tests/unit/unit.c: the host-catalog fixture (unit.h). */
#include "unit.h"
#include "cpb.h"
#include "space.h"
#include "support.h"
#include "worker/backends.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ak_cat_host_open (ak_cat_host_t *h, const char *tag)
{
    ak_err_t err = { 0 };
    memset (h, 0, sizeof *h);
    h->dir = ak_test_tmpdir (tag);
    h->be = ak_backend_host ();
    if (h->be->open (NULL, &h->dev, &err) != 0) {
        print_error ("host backend: %s\n", err.msg);
        return -1;
    }
    return 0;
}

void ak_cat_host_close (ak_cat_host_t *h)
{
    if (h->be && h->dev)
        h->be->close (&h->dev);
    if (h->dir) {
        ak_test_rmtree (h->dir);
        free (h->dir);
        h->dir = NULL;
    }
}

ak_spec_t *ak_cat_spec (const char *op)
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

ak_kernel_t *ak_cat_build (ak_cat_host_t *h, const char *text, bool reference,
                           const char *const *names, const int64_t *values, int n)
{
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    memset (&req, 0, sizeof req);
    req.source = text;
    req.source_len = strlen (text);
    req.reference = reference;
    req.dtype = AK_DT_FLOAT32;
    for (int i = 0; i < n; i++) {
        req.define_names[i] = names[i];
        req.define_values[i] = values[i];
    }
    req.ndefines = n;
    req.cache_dir = h->dir;
    req.timeout_ms = 60000;
    if (h->be->compile (&req, &out, &err) != 0)
        fail_msg ("compile: %s\n%s", err.msg, out.log ? out.log : "");
    ak_kernel_t *k = NULL;
    if (h->be->load (h->dev, out.artifact_path, reference ? "ak_reference" : "ak_kernel", &k, &err) != 0)
        fail_msg ("load: %s", err.msg);
    free (out.artifact_path);
    free (out.log);
    return k;
}

int64_t ak_cat_count (const ak_spec_t *spec, const char *expr, const int64_t *dims)
{
    ak_err_t err = { 0 };
    int64_t v = 0;
    if (ak_spec_eval (spec, expr, dims, AK_DT_FLOAT32, &v, &err) != 0)
        fail_msg ("%s: %s", expr, err.msg);
    return v;
}

void ak_cat_oracle (ak_cat_host_t *h, const char *op, const int64_t *dims, const double *const *in,
                    const double *want, double tol)
{
    ak_spec_t *spec = ak_cat_spec (op);
    ak_kernel_t *ref = ak_cat_build (h, spec->reference.text, true, NULL, NULL, 0);
    ak_launch_t args;
    memset (&args, 0, sizeof args);
    args.ndims = spec->nkeys;
    memcpy (args.dims, dims, sizeof (int64_t) * (size_t) spec->nkeys);
    args.nin = spec->ninputs;
    args.nout = spec->noutputs;
    args.dtype = AK_DT_FLOAT32;
    ak_err_t err = { 0 };
    for (int j = 0; j < spec->ninputs; j++) {
        size_t n = (size_t) ak_cat_count (spec, spec->inputs[j].count, dims) * 8;
        assert_int_equal (h->be->alloc (h->dev, n, &args.in[j], &err), 0);
        assert_int_equal (h->be->upload (h->dev, args.in[j], in[j], n, &err), 0);
    }
    for (int k = 0; k < spec->noutputs; k++)
        assert_int_equal (h->be->alloc (h->dev, (size_t) ak_cat_count (spec, spec->outputs[k].count, dims) * 8,
                                        &args.out[k], &err), 0);
    if (h->be->launch (h->dev, ref, &args, &err) != 0)
        fail_msg ("%s oracle: %s", op, err.msg);
    size_t at = 0;
    for (int k = 0; k < spec->noutputs; k++) {
        int64_t n = ak_cat_count (spec, spec->outputs[k].count, dims);
        double *got = ak_malloc ((size_t) n * 8);
        assert_int_equal (h->be->download (h->dev, got, args.out[k], (size_t) n * 8, &err), 0);
        for (int64_t i = 0; i < n; i++, at++)
            if (!(fabs (got[i] - want[at]) <= tol * (1 + fabs (want[at]))))
                fail_msg ("%s %s[%lld] = %.17g, want %.17g", op, spec->outputs[k].name, (long long) i,
                          got[i], want[at]);
        free (got);
        h->be->release (h->dev, &args.out[k]);
    }
    for (int j = 0; j < spec->ninputs; j++)
        h->be->release (h->dev, &args.in[j]);
    h->be->unload (h->dev, &ref);
    ak_spec_destroy (&spec);
}

ak_gate_status_t ak_cat_gate (ak_cat_host_t *h, const ak_spec_t *spec, ak_kernel_t *ref, const char *text,
                              const char *const *names, const int64_t *values, int n,
                              ak_gate_report_t *rep)
{
    ak_kernel_t *k = ak_cat_build (h, text, false, names, values, n);
    ak_gate_ctx_t ctx;
    memset (&ctx, 0, sizeof ctx);
    ctx.spec = spec;
    ctx.be = h->be;
    ctx.dev = h->dev;
    ctx.kernel[AK_DT_FLOAT32] = k;
    ctx.ref_be = h->be;
    ctx.ref_dev = h->dev;
    ctx.ref = ref;
    ctx.seed = 42;
    ak_err_t err = { 0 };
    assert_int_equal (ak_gates_run (&ctx, rep, &err), 0);
    h->be->unload (h->dev, &k);
    if (rep->status != AK_GATE_OK) {
        for (int i = 0; i < rep->nstages; i++)
            print_message ("  %s %-12s %s\n", spec->name, rep->stages[i].stage, rep->stages[i].detail);
        print_message ("  %s reason: %s\n", spec->name, rep->reason);
    }
    return rep->status;
}

void ak_cat_expect_wrong (ak_cat_host_t *h, const char *op, const char *from, const char *to)
{
    ak_spec_t *spec = ak_cat_spec (op);
    ak_kernel_t *ref = ak_cat_build (h, spec->reference.text, true, NULL, NULL, 0);
    const char *text = ak_spec_baseline (spec, "host")->source.text;
    const char *at = strstr (text, from);
    if (!at)
        fail_msg ("%s baseline has no '%s'", op, from);
    char *bad = ak_sprintf ("%.*s%s%s", (int) (at - text), text, to, at + strlen (from));
    ak_gate_report_t rep;
    ak_gate_status_t st = ak_cat_gate (h, spec, ref, bad, NULL, NULL, 0, &rep);
    print_message ("%s with '%s' -> '%s': %s: %s\n", op, from, to, ak_gate_status_name (st), rep.reason);
    assert_int_equal (st, AK_GATE_WRONG);
    assert_non_null (strstr (rep.reason, "beyond tolerance"));
    free (bad);
    h->be->unload (h->dev, &ref);
    ak_spec_destroy (&spec);
}

/* ------------------------------------------- every host configuration */

typedef struct {
    ak_cat_host_t   *h;
    const ak_spec_t *spec;
    ak_kernel_t     *ref;
    size_t           passed;
} s_walk_t;

/*  rep must be ok with all five stages run, every host size swept (none
    of the GPU-only ones) and every edge size run. */
static void s_expect_ok (const ak_spec_t *spec, const char *what, const ak_gate_report_t *rep)
{
    if (rep->status != AK_GATE_OK)
        fail_msg ("%s %s: %s: %s", spec->name, what, ak_gate_status_name (rep->status), rep->reason);
    assert_int_equal (rep->nstages, 5);
    for (int i = 0; i < 5; i++) {
        assert_true (rep->stages[i].passed);
        assert_false (rep->stages[i].skipped);
    }
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
    for (size_t i = 0; i < cand->nparams && n < sizeof what; i++) {
        names[i] = cand->params[i].name;
        n += (size_t) snprintf (what + n, sizeof what - n, " %s=%lld", names[i], (long long) values[i]);
    }
    ak_gate_report_t rep;
    ak_cat_gate (w->h, w->spec, w->ref, cand->source.text, names, values, (int) cand->nparams, &rep);
    s_expect_ok (w->spec, what, &rep);
    w->passed++;
    return 0;
}

size_t ak_cat_host_gates (ak_cat_host_t *h, const char *op)
{
    ak_spec_t *spec = ak_cat_spec (op);
    s_walk_t w = { .h = h, .spec = spec, .ref = ak_cat_build (h, spec->reference.text, true, NULL, NULL, 0) };
    ak_gate_report_t rep;
    ak_cat_gate (h, spec, w.ref, ak_spec_baseline (spec, "host")->source.text, NULL, NULL, 0, &rep);
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
    print_message ("%s: host baseline and %zu candidate configurations pass the gates\n", spec->name,
                   host_configs);
    assert_int_equal (w.passed, 1 + host_configs);
    h->be->unload (h->dev, &w.ref);
    ak_spec_destroy (&spec);
    return host_configs;
}

/* ====================================================== the spec fixture */

static const char *s_spec_fx_base =
    "{\"schema_version\": 1, \"name\": \"toy\", \"keys\": [\"rows\", \"cols\"],"
    " \"dtypes\": [\"float32\"],"
    " \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5}},"
    " \"sizes\": [{\"name\": \"tiny\", \"size\": {\"rows\": 4, \"cols\": 8}},"
    "            {\"name\": \"small\", \"size\": {\"rows\": 32, \"cols\": 128}},"
    "            {\"name\": \"big\", \"size\": {\"rows\": 64, \"cols\": 256}}],"
    " \"edge_sizes\": [{\"name\": \"odd\", \"size\": {\"rows\": 7, \"cols\": 13}}],"
    " \"stability_size\": \"small\","
    " \"flops\": \"5*rows*cols\", \"bytes\": \"2*rows*cols*b\","
    " \"inputs\": [{\"name\": \"x\", \"count\": \"rows*cols\", \"range\": [-4, 4]}],"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"rows*cols\"}],"
    " \"reference\": \"ref.c\","
    " \"baselines\": [{\"backend\": \"host\", \"source\": \"host/base.c\"}],"
    " \"candidates\": [{\"name\": \"blocked\", \"backend\": \"host\","
    "                   \"source\": \"host/blocked.c\","
    "                   \"params\": {\"BLOCK\": [1, 2, 4, 8], \"UNROLL\": [1, 2, 4]},"
    "                   \"constraints\": [\"BLOCK*UNROLL <= 16\"]}]}";

int ak_spec_fx_setup (void **state)
{
    ak_spec_fx_t *fx = calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("spec");
    assert_non_null (fx->dir);
    for (int i = 0; i < 2; i++) {
        char *sub = ak_path_join (fx->dir, i ? "cuda" : "host");
        assert_int_equal (ak_mkdir_p (sub, 0755, NULL), 0);
        free (sub);
    }
    const char *files[][2] = {
        { "ref.c", "void ak_reference (const ak_args_t *a) { (void) a; }\n" },
        { "host/base.c", "void ak_kernel (const ak_args_t *a) { (void) a; }\n" },
        { "host/blocked.c", "void ak_kernel (const ak_args_t *a) { (void) a; } /* BLOCK */\n" },
        { "cuda/base.cu", "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) {}\n" },
        { "cuda/rows.cu", "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a) {} /* THREADS */\n" },
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        free (ak_test_write (fx->dir, files[i][0], files[i][1]));
    json_error_t jerr;
    fx->json = json_loads (s_spec_fx_base, 0, &jerr);
    if (!fx->json)
        fail_msg ("base spec: %s", jerr.text);
    *state = fx;
    return 0;
}

int ak_spec_fx_teardown (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    json_decref (fx->json);
    free (fx);
    return 0;
}

int ak_spec_fx_load_text (ak_spec_fx_t *fx, const char *from, const char *to, ak_spec_t **spec, ak_err_t *err)
{
    char *path = ak_test_write_json (fx->dir, "spec.json", fx->json, from, to);
    memset (err, 0, sizeof *err);
    *spec = NULL;
    int rc = ak_spec_load (path, spec, err);
    free (path);
    return rc;
}

int ak_spec_fx_load (ak_spec_fx_t *fx, ak_spec_t **spec, ak_err_t *err)
{
    return ak_spec_fx_load_text (fx, NULL, NULL, spec, err);
}

void ak_spec_fx_expect (ak_spec_fx_t *fx, const char *from, const char *to, int code, const char *needle1,
                        const char *needle2)
{
    ak_spec_t *spec = NULL;
    ak_err_t err;
    int rc = ak_spec_fx_load_text (fx, from, to, &spec, &err);
    ak_test_expect_refused (rc, code, spec, err.msg, "spec.json", needle1, needle2);
}

void ak_spec_fx_reject (ak_spec_fx_t *fx, const char *path, json_t *value, const char *needle1,
                        const char *needle2)
{
    json_t *old = ak_test_json_swap (fx->json, path, value);
    ak_spec_fx_expect (fx, NULL, NULL, AK_EINVAL, needle1, needle2);
    ak_test_json_restore (fx->json, path, old);
}

// ------------------------------------------ the rounds fixture (test_rounds*)

/* BLOCK 1..8 x UNROLL 1..4 with BLOCK*UNROLL <= 16: 25 valid of 32 */
static const char *s_rounds_cands =
    "[{\"name\": \"blocked\", \"backend\": \"host\", \"source\": \"blocked.c\","
    "  \"params\": {\"BLOCK\": [1, 2, 3, 4, 5, 6, 7, 8], \"UNROLL\": [1, 2, 3, 4]},"
    "  \"constraints\": [\"BLOCK*UNROLL <= 16\"]}]";

void ak_rounds_fx_write_op (const char *dir)
{
    char *sub = ak_path_join (dir, "opa");
    assert_int_equal (ak_mkdir_p (sub, 0700, NULL), 0);
    char *spec = ak_test_stub_spec ("opa", s_rounds_cands);
    free (ak_test_write (sub, "spec.json", spec));
    free (ak_test_write (sub, "ref.c", "/* reference */\n"));
    free (ak_test_write (sub, "base.c", "/* baseline */\n"));
    free (ak_test_write (sub, "blocked.c", "/* blocked */\n"));
    free (spec);
    free (sub);
}

ak_manifest_t *ak_rounds_fx_manifest (const char *dir, const char *policy)
{
    ak_rounds_fx_write_op (dir);
    char *text = ak_sprintf ("{\"schema_version\": 1, \"name\": \"r\", \"targets\": [\"host\"],"
                             " \"policy\": {%s}, \"ops\": [{\"spec\": \"opa/spec.json\"}]}", policy);
    char *path = ak_test_write (dir, "batch.json", text);
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_load (path, &m, &err))
        fail_msg ("manifest: %s", err.msg);
    free (text);
    free (path);
    return m;
}

int64_t ak_rounds_fx_param (Ak__Param *const *params, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp (params[i]->name, name) == 0)
            return params[i]->value;
    fail_msg ("no param %s", name);
    return 0;
}

Ak__Hello *ak_unit_hello (const char *id, uint32_t slots, uint32_t prefetch)
{
    Ak__Hello *h = ak_malloc (sizeof *h);
    ak__hello__init (h);
    ak_cpb_set (&h->worker_id, id);
    ak_cpb_set (&h->host, "testhost");
    h->devices = ak_calloc (1, sizeof *h->devices);
    h->devices[0] = ak_malloc (sizeof *h->devices[0]);
    ak__device__init (h->devices[0]);
    ak_cpb_set (&h->devices[0]->device_class, "host");
    h->n_devices = 1;
    h->slots = slots;
    h->prefetch = prefetch;
    return h;
}

Ak__Receipt *ak_rounds_fx_receipt (const char *id, const char *worker, double speedup, double noise)
{
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    ak_cpb_set (&r->receipt_id, id);
    ak_cpb_set (&r->status, "ok");
    ak_cpb_set (&r->kind, "tune");
    ak_cpb_set (&r->worker_id, worker);
    r->timings = ak_calloc (1, sizeof *r->timings);
    Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
    ak__workload_timing__init (t);
    t->workload = ak_malloc (sizeof *t->workload);
    ak__workload__init (t->workload);
    ak_cpb_set (&t->workload->name, "small");
    t->workload->weight = 1;
    t->baseline = ak_malloc (sizeof *t->baseline);
    ak__stats__init (t->baseline);
    t->baseline->median_us = 100.0;
    t->candidate = ak_malloc (sizeof *t->candidate);
    ak__stats__init (t->candidate);
    t->candidate->median_us = 100.0 / speedup;
    t->speedup = speedup;
    t->speedup_noise = noise;
    r->timings[0] = t;
    r->n_timings = 1;
    return r;
}
