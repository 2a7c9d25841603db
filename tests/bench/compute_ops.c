/*  tests/bench/compute_ops.c: times the compute-bound catalog kernels
    (matmul, fused_mlp, flash_attention) at one spec size and dtype on a
    GPU, outside the fleet, for kernel development.

        bench_compute_ops OP SIZE DTYPE [CANDIDATE [CHECK_TOP [NAME=V,V.. ...]]]

    Builds the cuda baseline (a cuBLASLt call where the spec names a
    library) and every configuration of CANDIDATE (NVRTC,
    8 threads; an sm_90a candidate for sm_90a, launched with its tensor
    maps), makes the inputs on the device (the spec's generator and
    ranges, seed 42), times each kernel cold (L2 flushed before every
    launch, two events around one launch; ak_cuda_time_plain) as the
    median of 7 samples after a warm-up, and prints microseconds and
    TFLOP/s (the spec's flops expression).  Then the CHECK_TOP (default 1)
    fastest configurations and the baseline are compared element by
    element with the spec's device reference (float64, on inputs rounded
    to DTYPE) under the spec's tolerance: every element counted, the worst
    error printed.  NAME=V,V.. after CHECK_TOP keeps the configurations
    whose parameter NAME is one of those values (each a value of the
    candidate's list; several such arguments: all must hold), e.g.
    `bench_compute_ops matmul gpu_b256_down bfloat16 wgmma 3 BM=64,128
    STAGES=5 CLUSTER=1 SPLIT=1,2`.  With $AK_BENCH_CUBLASLT_ALGOS=N a
    cuBLASLt baseline is timed again with each of its heuristic's
    algorithms 1 to N-1 (at most 15; "baseline (cublaslt), algorithm i"),
    not checked: what tuning among them, as PyTorch's TunableOp does,
    would find against the heuristic's best.  Not a test: it reports; exit status 0
    when it ran, 2 without a GPU, 1 on an error (a filter that names no
    parameter or value of the candidate among them, before the device
    opens). */
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/backend_cuda.h"
#include "worker/data.h"
#include "space.h"
#include "spec.h"
#include "util.h"
#include "clock.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_SAMPLES 7

typedef struct {
    const char *source;
    const ak_launch_rule_t *rule;
    const char *arch;                  /* the candidate's "arch" ("sm_90a"), NULL: the device's */
    ak_launch_cfg_t cfg;               /* the last evaluated launch (its tensor maps outlive the launch) */
    const char *names[AK_MAX_PARAMS];
    int64_t values[AK_MAX_PARAMS];
    int nparams;
    bool reference;
    bool library;                      /* a vendor-library baseline (cuBLASLt): no launch rule */
    char *path;
    char error[2048];
    double us;
    char text[256];
} s_item_t;

static struct {
    const ak_backend_t *be;
    Ak__Device **devs;
    ak_dev_t *dev;
    char *cache;
    ak_dtype_t dt;
    s_item_t *items;
    size_t n, cap;
    atomic_size_t next;
} S;

/*  NAME=V,V.. arguments: the configurations kept */
#define S_MAX_FILTERS 16
static struct {
    size_t param;                       /* its index among the candidate's parameters */
    int64_t values[32];
    int nvalues;
} s_filters[S_MAX_FILTERS];
static int s_nfilters;
static size_t s_walked;

/*  Parses "NAME=V,V.." against cand (a parameter of it, each value one
    of its list); 0, or -1 with the reason printed. */
static int s_filter_parse (const char *arg, const ak_candidate_t *cand)
{
    const char *eq = strchr (arg, '=');
    const size_t len = eq ? (size_t) (eq - arg) : 0;
    size_t i = 0;
    while (i < cand->nparams
           && !(strlen (cand->params[i].name) == len && strncmp (cand->params[i].name, arg, len) == 0))
        i++;
    const char *why = !eq ? "not NAME=V,V.." : i == cand->nparams ? "no such parameter of the candidate"
                    : s_nfilters == S_MAX_FILTERS ? "too many filters" : NULL;
    if (why) {
        fprintf (stderr, "%s: %s\n", arg, why);
        return -1;
    }
    const ak_param_t *prm = &cand->params[i];
    s_filters[s_nfilters].param = i;
    for (const char *p = eq + 1;; ) {
        char *end = NULL;
        long long v = strtoll (p, &end, 10);
        bool listed = false;
        for (size_t k = 0; k < prm->nvalues; k++)
            listed |= prm->values[k] == v;
        why = end == p || (*end && *end != ',') ? "values are whole numbers"
            : !listed ? "a value not in the candidate's list"
            : s_filters[s_nfilters].nvalues == 32 ? "too many values" : NULL;
        if (why) {
            fprintf (stderr, "%s: %s\n", arg, why);
            return -1;
        }
        s_filters[s_nfilters].values[s_filters[s_nfilters].nvalues++] = v;
        if (!*end)
            break;
        p = end + 1;
    }
    s_nfilters++;
    return 0;
}

static bool s_filter_keeps (const int64_t *values)
{
    for (int f = 0; f < s_nfilters; f++) {
        bool in = false;
        for (int k = 0; k < s_filters[f].nvalues; k++)
            in |= values[s_filters[f].param] == s_filters[f].values[k];
        if (!in)
            return false;
    }
    return true;
}

static s_item_t *s_add (void)
{
    if (S.n == S.cap) {
        S.cap = S.cap ? 2 * S.cap : 64;
        S.items = ak_realloc (S.items, S.cap * sizeof *S.items);
    }
    memset (&S.items[S.n], 0, sizeof S.items[0]);
    return &S.items[S.n++];
}

static int s_add_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    (void) arg;
    s_walked++;
    if (!s_filter_keeps (values))
        return 0;
    s_item_t *it = s_add ();
    it->source = cand->source.text;
    it->rule = cand->launch;
    it->arch = cand->arch;
    it->nparams = (int) cand->nparams;
    size_t n = (size_t) snprintf (it->text, sizeof it->text, "%s", cand->name);
    for (size_t i = 0; i < cand->nparams; i++) {
        it->names[i] = cand->params[i].name;
        it->values[i] = values[i];
        n += (size_t) snprintf (it->text + n, sizeof it->text - n, " %s=%lld", cand->params[i].name,
                                (long long) values[i]);
    }
    return 0;
}

static void *s_compile (void *arg)
{
    (void) arg;
    for (;;) {
        size_t i = atomic_fetch_add (&S.next, 1);
        if (i >= S.n)
            return NULL;
        s_item_t *it = &S.items[i];
        ak_compile_req_t req;
        ak_compile_out_t out = { 0 };
        ak_err_t err = { 0 };
        memset (&req, 0, sizeof req);
        req.source = it->source;
        req.source_len = strlen (it->source);
        req.reference = it->reference;
        req.dtype = it->reference ? AK_DT_FLOAT32 : S.dt;
        for (int k = 0; k < it->nparams; k++) {
            req.define_names[k] = it->names[k];
            req.define_values[k] = it->values[k];
        }
        req.ndefines = it->nparams;
        req.cache_dir = S.cache;
        req.timeout_ms = 120000;
        req.device = S.devs[0];
        req.arch = it->arch;
        req.library = it->library;
        if (S.be->compile (&req, &out, &err) == 0)
            it->path = out.artifact_path;
        else {
            snprintf (it->error, sizeof it->error, "%.300s %.700s", err.msg, out.log ? out.log : "");
            free (out.artifact_path);
        }
        free (out.log);
    }
}

static int s_cmp_dbl (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/*  Fills l for the item (launch rule evaluated); 0 or an error. */
static int s_launch (const ak_spec_t *spec, const int64_t *dims, s_item_t *it, void **in, void **out,
                     ak_dtype_t dt, ak_launch_t *l, ak_err_t *err)
{
    memset (l, 0, sizeof *l);
    l->ndims = spec->nkeys;
    for (int d = 0; d < spec->nkeys; d++)
        l->dims[d] = dims[d];
    l->nin = spec->ninputs;
    l->nout = spec->noutputs;
    for (int j = 0; j < spec->ninputs; j++)
        l->in[j] = in[j];
    for (int k = 0; k < spec->noutputs; k++)
        l->out[k] = out[k];
    l->dtype = dt;
    l->params = it->values;
    l->param_names = it->names;
    l->nparams = it->nparams;
    if (it->library)
        return 0;
    int rc = ak_launch_eval (spec, it->rule, dims, dt, it->names, it->values, it->nparams, &it->cfg, err);
    if (rc)
        return rc;
    ak_launch_apply (&it->cfg, l);       /* grid, block, shared, cluster, tensor maps */
    return 0;
}

/*  Item it, cold, as the median of S_SAMPLES launches (after one that
    loads it) on in and out into *us; 0, or the error ("timing: ..." where
    the launches ran but a sample failed). */
static int s_time (const ak_spec_t *spec, const int64_t *dims, s_item_t *it, void **in, void **out, double *us,
                   ak_err_t *err)
{
    ak_kernel_t *kern = NULL;
    ak_launch_t l;
    double t[S_SAMPLES];
    int rc = S.be->load (S.dev, it->path, "ak_kernel", &kern, err);
    if (rc == 0 && (rc = s_launch (spec, dims, it, in, out, S.dt, &l, err)) == 0
        && (rc = S.be->launch (S.dev, kern, &l, err)) == 0) {
        for (int s = 0; s < S_SAMPLES && rc == 0; s++)
            rc = ak_cuda_time_plain (S.dev, kern, &l, true, 1, &t[s], err);
        if (rc)
            ak_err_prefix (err, "timing");
    }
    if (kern)
        S.be->unload (S.dev, &kern);
    if (rc == 0) {
        qsort (t, S_SAMPLES, sizeof t[0], s_cmp_dbl);
        *us = t[S_SAMPLES / 2];
    }
    return rc;
}

/*  An error once the device is open: the device is closed before the
    exit, which waits for the backend's cuBLASLt preload (an exit while its
    initializers run crashed, status 139: worker/backend_cuda_impl.h). */
static int s_fail (void)
{
    if (S.dev)
        S.be->close (&S.dev);
    return 1;
}

int main (int argc, char **argv)
{
    if (argc < 4) {
        fprintf (stderr, "usage: bench_compute_ops OP SIZE DTYPE [CANDIDATE [CHECK_TOP [NAME=V,V.. ...]]]\n");
        return 1;
    }
    const char *op = argv[1], *size_name = argv[2], *cand_name = argc > 4 ? argv[4] : NULL;
    int check_top = argc > 5 ? atoi (argv[5]) : 1;
    ak_err_t err = { 0 };
    if (ak_dtype_parse (argv[3], &S.dt) != 0) {
        fprintf (stderr, "bad dtype %s\n", argv[3]);
        return 1;
    }
    const char *src = getenv ("AK_SOURCE_DIR");
    char *spec_path = ak_sprintf ("%s/kernels/%s/spec.json", src ? src : ".", op);
    ak_spec_t *spec = NULL;
    if (ak_spec_load (spec_path, &spec, &err) != 0) {
        fprintf (stderr, "%s\n", err.msg);
        return 1;
    }
    const ak_size_t *z = ak_spec_size (spec, size_name);
    if (!z) {
        fprintf (stderr, "no size %s\n", size_name);
        return 1;
    }
    /* the candidate and its filters, checked before the device opens */
    const ak_candidate_t *cand = cand_name ? ak_spec_candidate (spec, cand_name) : NULL;
    if (cand_name && !cand) {
        fprintf (stderr, "candidate %s: none in %s\n", cand_name, spec_path);
        return 1;
    }
    for (int a = 6; cand && a < argc; a++)
        if (s_filter_parse (argv[a], cand) != 0)
            return 1;
    S.be = ak_backend_find ("cuda");
    size_t ndevs = 0;
    if (!S.be || S.be->probe (&S.devs, &ndevs, &err) != 0 || ndevs == 0) {
        printf ("SKIP: no GPU: %s\n", err.msg);
        return 2;
    }
    if (S.be->open (S.devs[0], &S.dev, &err) != 0) {
        fprintf (stderr, "open: %s\n", err.msg);
        return 1;
    }
    S.cache = ak_sprintf ("/tmp/bench_compute_ops.%d", (int) getpid ());

    /* items[0]: device reference, [1]: baseline, then the configurations */
    s_item_t *it = s_add ();
    it->source = spec->reference_cuda.text;
    it->rule = spec->reference_cuda_launch;
    it->reference = true;
    snprintf (it->text, sizeof it->text, "reference");
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    it = s_add ();
    it->source = bl->source.text;
    it->rule = bl->launch;
    it->arch = bl->arch;
    it->library = bl->library != NULL;
    snprintf (it->text, sizeof it->text, bl->library ? "baseline (%s)" : "baseline", bl->library);
    if (cand_name) {
        if (ak_space_walk (cand, s_add_config, NULL, NULL, &err) != 0) {
            fprintf (stderr, "candidate %s: %s\n", cand_name, err.msg);
            return s_fail ();
        }
        if (s_nfilters)
            printf ("%s: %zu of its %zu configurations kept by the filters\n", cand_name, S.n - 2, s_walked);
    }
    double t0 = (double) ak_clock_mono_ms ();
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create (&th[i], NULL, s_compile, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join (th[i], NULL);
    printf ("%s %s %s: %zu kernels compiled in %.1f s\n", op, size_name, argv[3], S.n,
            ((double) ak_clock_mono_ms () - t0) / 1000);

    /* inputs on the device, in DTYPE and as float64 for the reference */
    size_t nin[AK_MAX_BUFS], nout[AK_MAX_BUFS], esz = ak_dtype_size (S.dt);
    if (ak_buf_counts (spec, z->dims, S.dt, nin, nout, &err) != 0) {
        fprintf (stderr, "%s\n", err.msg);
        return s_fail ();
    }
    ak_kernel_t *gen = NULL, *dref = NULL;
    if (!S.items[0].path || S.be->load (S.dev, S.items[0].path, "ak_fill_uniform", &gen, &err) != 0
        || S.be->load (S.dev, S.items[0].path, "ak_reference", &dref, &err) != 0) {
        fprintf (stderr, "reference: %s %s\n", S.items[0].error, err.msg);
        return s_fail ();
    }
    void *in[AK_MAX_BUFS] = { 0 }, *in64[AK_MAX_BUFS] = { 0 }, *out[AK_MAX_BUFS] = { 0 }, *out64[AK_MAX_BUFS] = { 0 };
    for (int j = 0; j < spec->ninputs; j++) {
        const ak_buf_t *b = &spec->inputs[j];
        if (S.be->alloc (S.dev, nin[j] * esz, &in[j], &err) || S.be->alloc (S.dev, nin[j] * 8, &in64[j], &err)
            || S.be->generate (S.dev, gen, in[j], nin[j], 42, (uint64_t) j, b->lo, b->hi, (int) S.dt, &err)
            || S.be->generate (S.dev, gen, in64[j], nin[j], 42, (uint64_t) j, b->lo, b->hi,
                               AK_GEN_AS_F64 + (int) S.dt, &err)) {
            fprintf (stderr, "inputs: %s\n", err.msg);
            return s_fail ();
        }
    }
    for (int k = 0; k < spec->noutputs; k++)
        if (S.be->alloc (S.dev, nout[k] * esz, &out[k], &err) || S.be->alloc (S.dev, nout[k] * 8, &out64[k], &err)) {
            fprintf (stderr, "outputs: %s\n", err.msg);
            return s_fail ();
        }
    int64_t flops = 0;
    ak_spec_eval (spec, spec->flops, z->dims, S.dt, &flops, &err);

    /* time every kernel */
    for (size_t i = 1; i < S.n; i++) {
        s_item_t *k = &S.items[i];
        k->us = -1;
        if (!k->path)
            printf ("  %-60s compile error: %.300s\n", k->text, k->error);
        else
        if (s_time (spec, z->dims, k, in, out, &k->us, &err) != 0) {
            k->us = -1;
            printf ("  %-60s %s\n", k->text, err.msg);
        }
        else
            printf ("  %-60s %10.1f us %8.1f TFLOP/s\n", k->text, k->us, (double) flops / k->us / 1e6);
    }

    /* $AK_BENCH_CUBLASLT_ALGOS=N: a cuBLASLt baseline again with each of the
       heuristic's algorithms 1 to N-1 (0, its best, is the baseline
       above): what timing them, as PyTorch's TunableOp does, would find */
    long nalgos = getenv ("AK_BENCH_CUBLASLT_ALGOS") ? strtol (getenv ("AK_BENCH_CUBLASLT_ALGOS"), NULL, 10) : 0;
    for (long a = 1; S.items[1].library && S.items[1].path && a < nalgos && a < 16; a++) {
        double us = 0;
        ak_cuda_lib_bench_pick ((int) a);
        int rc = s_time (spec, z->dims, &S.items[1], in, out, &us, &err);
        ak_cuda_lib_bench_pick (0);
        char text[320];
        snprintf (text, sizeof text, "%s, algorithm %ld", S.items[1].text, a);
        if (rc) {
            printf ("  %-60s %s\n", text, err.msg);
            break;                      /* the heuristic offers no more */
        }
        printf ("  %-60s %10.1f us %8.1f TFLOP/s\n", text, us, (double) flops / us / 1e6);
    }

    /* the reference, once */
    s_item_t *r = &S.items[0];
    ak_launch_t l;
    if (s_launch (spec, z->dims, r, in64, out64, AK_DT_FLOAT32, &l, &err) != 0
        || S.be->launch (S.dev, dref, &l, &err) != 0) {
        fprintf (stderr, "reference launch: %s\n", err.msg);
        return s_fail ();
    }
    double *want[AK_MAX_BUFS] = { 0 };
    uint8_t *got[AK_MAX_BUFS] = { 0 };
    for (int k = 0; k < spec->noutputs; k++) {
        want[k] = ak_malloc (nout[k] * 8);
        got[k] = ak_malloc (nout[k] * esz);
        S.be->download (S.dev, want[k], out64[k], nout[k] * 8, &err);
    }
    /* check the baseline and the fastest configurations */
    const ak_tol_t *tol = ak_spec_tol (spec, S.dt);
    for (int c = 0; c <= check_top; c++) {
        s_item_t *k = NULL;
        if (c == 0)
            k = &S.items[1];
        else {
            double best = 1e300;
            for (size_t i = 2; i < S.n; i++)
                if (S.items[i].us > 0 && S.items[i].us < best && S.items[i].text[0] != '*') {
                    best = S.items[i].us;
                    k = &S.items[i];
                }
            if (!k)
                break;
        }
        ak_kernel_t *kern = NULL;
        for (int o = 0; o < spec->noutputs; o++)
            S.be->fill (S.dev, out[o], 0xFF, nout[o] * esz, &err);
        if (!k->path || S.be->load (S.dev, k->path, "ak_kernel", &kern, &err) != 0
            || s_launch (spec, z->dims, k, in, out, S.dt, &l, &err) != 0 || S.be->launch (S.dev, kern, &l, &err) != 0) {
            printf ("  check %s: %s\n", k->text, err.msg);
            continue;
        }
        S.be->unload (S.dev, &kern);
        size_t bad = 0, total = 0;
        double worst = 0, worst_rel = 0;
        for (int o = 0; o < spec->noutputs; o++) {
            S.be->download (S.dev, got[o], out[o], nout[o] * esz, &err);
            for (size_t i = 0; i < nout[o]; i++) {
                double g = ak_elem_load (S.dt, got[o], i), w = want[o][i], e = fabs (g - w);
                total++;
                if (!(e <= tol->atol + tol->rtol * fabs (w)))
                    bad++;
                if (e > worst || e != e)
                    worst = e;
                double rel = e / (tol->atol + tol->rtol * fabs (w));
                if (rel > worst_rel || rel != rel)
                    worst_rel = rel;
            }
        }
        printf ("  check %-54s %zu/%zu beyond tolerance, worst |err| %.3g (%.3g of the tolerance)\n", k->text, bad,
                total, worst, worst_rel);
        if (c > 0)
            k->text[0] = '*';          /* next check takes the next fastest */
    }
    for (int k = 0; k < spec->noutputs; k++) {
        free (want[k]);
        free (got[k]);
        S.be->release (S.dev, &out[k]);
        S.be->release (S.dev, &out64[k]);
    }
    for (int j = 0; j < spec->ninputs; j++) {
        S.be->release (S.dev, &in[j]);
        S.be->release (S.dev, &in64[j]);
    }
    S.be->unload (S.dev, &gen);
    S.be->unload (S.dev, &dref);
    S.be->close (&S.dev);
    char *cmd = ak_sprintf ("rm -rf %s", S.cache);
    if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", S.cache);
    free (cmd);
    free (S.cache);
    for (size_t i = 0; i < S.n; i++)
        free (S.items[i].path);
    free (S.items);
    ak_spec_destroy (&spec);
    free (spec_path);
    return 0;
}
