/*  tests/bench/gate_cost.c: where the correctness gates spend their time,
    with and without the reference cache (worker/refcache.h).

        bench_gate_cost OP [BACKEND [SIZE DTYPE [TASKS]]]

    Gates OP's baseline for BACKEND (cuda, the default, or host) as TASKS
    tasks (default 4) of one executor would: the five stages and the
    recheck, with SIZE/DTYPE (a spec size; default: none) as the task's
    workload; first TASKS times without a cache, then TASKS times through
    one cache (the first of them fills it).  Prints each task's gate wall
    time and its cost (inputs, reference, device buffers, copies, launches,
    comparison, cache hits), then the mean of the tasks after the first of
    each kind.  The spec comes from $AK_SOURCE_DIR/kernels/OP/spec.json
    (default: the current directory).  Not a test: it reports; exit status
    0 when it ran, 2 without the backend's device, 1 on an error. */
#include "worker/backend.h"
#include "worker/backend_host.h"
#include "worker/backends.h"
#include "worker/gates.h"
#include "worker/refcache.h"
#include "clock.h"
#include "spec.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *s_cache_dir;

/*  Builds source on be for dt (reference: the float64 build) and loads
    symbol; NULL with a message on failure. */
static ak_kernel_t *s_build (const ak_backend_t *be, ak_dev_t *dev, const Ak__Device *device,
                             const char *source, bool reference, ak_dtype_t dt, const char *symbol)
{
    ak_compile_req_t req;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    memset (&req, 0, sizeof req);
    req.source = source;
    req.source_len = strlen (source);
    req.reference = reference;
    req.dtype = dt;
    req.cache_dir = s_cache_dir;
    req.timeout_ms = 300000;
    req.device = device;
    ak_kernel_t *k = NULL;
    if (be->compile (&req, &out, &err) != 0 || be->load (dev, out.artifact_path, symbol, &k, &err) != 0) {
        fprintf (stderr, "%s %s: %s\n%.2000s\n", be->name, symbol, err.msg, out.log ? out.log : "");
        k = NULL;
    }
    free (out.artifact_path);
    free (out.log);
    return k;
}

/*  One task's gates and recheck; its gate wall time in ms. */
static double s_task (const ak_gate_ctx_t *g, int n, const char *what)
{
    ak_gate_report_t rep;
    ak_err_t err = { 0 };
    uint64_t t0 = ak_clock_mono_ns ();
    int rc = ak_gates_run (g, &rep, &err);
    if (rc == 0 && rep.status == AK_GATE_OK)
        rc = ak_gates_recheck (g, g->seed ^ 0x9E3779B97F4A7C15ull, &rep, &err);
    double ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    char cost[400];
    ak_gate_cost_text (&rep.cost, cost, sizeof cost);
    printf ("%-9s task %d: %s, gates %.1f ms: %s\n", what, n, rc ? err.msg : ak_gate_status_name (rep.status),
            ms, cost);
    return ms;
}

int main (int argc, char **argv)
{
    if (argc < 2) {
        fprintf (stderr, "usage: bench_gate_cost OP [BACKEND [SIZE DTYPE [TASKS]]]\n");
        return 1;
    }
    const char *op = argv[1], *backend = argc > 2 ? argv[2] : "cuda";
    int tasks = argc > 5 ? atoi (argv[5]) : 4;
    if (tasks < 2)
        tasks = 2;
    ak_err_t err = { 0 };
    const char *src = getenv ("AK_SOURCE_DIR");
    char *spec_path = ak_sprintf ("%s/kernels/%s/spec.json", src ? src : ".", op);
    ak_spec_t *spec = NULL;
    if (ak_spec_load (spec_path, &spec, &err) != 0) {
        fprintf (stderr, "%s\n", err.msg);
        return 1;
    }
    ak_workload_t wl = { .name = "workload", .weight = 1 };
    bool have_wl = argc > 4;
    if (have_wl) {
        const ak_size_t *z = ak_spec_size (spec, argv[3]);
        if (!z || ak_dtype_parse (argv[4], &wl.dtype) != 0) {
            fprintf (stderr, "no size %s or dtype %s in %s\n", argv[3], argv[4], spec_path);
            return 1;
        }
        memcpy (wl.dims, z->dims, sizeof wl.dims);
        wl.name = z->name;
    }
    const ak_backend_t *be = ak_backend_find (backend), *host = ak_backend_host ();
    Ak__Device **devs = NULL;
    size_t ndevs = 0;
    if (!be || be->probe (&devs, &ndevs, &err) != 0 || ndevs == 0) {
        printf ("SKIP: no %s device: %s\n", backend, err.msg);
        return 2;
    }
    ak_dev_t *dev = NULL, *host_dev = NULL;
    if (be->open (devs[0], &dev, &err) != 0 || host->open (NULL, &host_dev, &err) != 0) {
        fprintf (stderr, "open: %s\n", err.msg);
        return 1;
    }
    s_cache_dir = ak_sprintf ("/tmp/bench_gate_cost.%d", (int) getpid ());
    const ak_baseline_t *bl = ak_spec_baseline (spec, be->name);
    if (!bl) {
        fprintf (stderr, "%s has no %s baseline\n", op, be->name);
        return 1;
    }
    bool cuda = strcmp (be->name, "cuda") == 0;
    ak_gate_ctx_t g = {
        .spec = spec, .be = be, .dev = dev, .device = devs[0], .ref_be = host, .ref_dev = host_dev,
        .seed = 42, .launch = bl->launch, .workloads = have_wl ? &wl : NULL, .nworkloads = have_wl,
        .ref_digest = "bench-host-oracle", .dref_digest = "bench-device-reference",
    };
    g.ref = s_build (host, host_dev, NULL, spec->reference.text, true, AK_DT_FLOAT32, "ak_reference");
    if (cuda && spec->reference_cuda.text && be->generate) {
        g.dref = s_build (be, dev, devs[0], spec->reference_cuda.text, true, AK_DT_FLOAT32, "ak_reference");
        g.gen = s_build (be, dev, devs[0], spec->reference_cuda.text, true, AK_DT_FLOAT32, "ak_fill_uniform");
        g.dref_launch = spec->reference_cuda_launch;
    }
    for (int t = 0; t < spec->ndtypes; t++)
        if (!be->supports_dtype || be->supports_dtype (devs[0], spec->dtypes[t]))
            g.kernel[spec->dtypes[t]] = s_build (be, dev, devs[0], bl->source.text, false, spec->dtypes[t],
                                                 "ak_kernel");
    if (!g.ref) {
        fprintf (stderr, "no reference\n");
        return 1;
    }
    double plain = 0, cached = 0;
    for (int i = 0; i < tasks; i++) {
        double ms = s_task (&g, i + 1, "no cache");
        plain += i ? ms : 0;
    }
    g.refcache = ak_refcache_new (ak_refcache_env_bytes ());
    for (int i = 0; i < tasks; i++) {
        double ms = s_task (&g, i + 1, "cache");
        cached += i ? ms : 0;
    }
    ak_refcache_stats_t st;
    ak_refcache_stats (g.refcache, &st);
    printf ("%s on %s: gates per task after the first: %.1f ms without the cache, %.1f ms with it "
            "(%.2fx); cache %llu entries, %.1f MiB, %llu hits, %llu misses, %llu evictions, %llu too big\n",
            op, be->name, plain / (tasks - 1), cached / (tasks - 1), cached > 0 ? plain / cached : 0,
            (unsigned long long) st.entries, (double) st.bytes / (1 << 20), (unsigned long long) st.hits,
            (unsigned long long) st.misses, (unsigned long long) st.evictions, (unsigned long long) st.too_big);
    ak_refcache_destroy (&g.refcache);
    for (int t = 0; t < AK_DT_COUNT; t++)
        if (g.kernel[t])
            be->unload (dev, &g.kernel[t]);
    if (g.gen)
        be->unload (dev, &g.gen);
    if (g.dref)
        be->unload (dev, &g.dref);
    host->unload (host_dev, &g.ref);
    host->close (&host_dev);
    be->close (&dev);
    for (size_t i = 0; i < ndevs; i++)
        ak__device__free_unpacked (devs[i], NULL);
    free (devs);
    char *rm = ak_sprintf ("rm -rf '%s'", s_cache_dir);
    if (system (rm) != 0)
        fprintf (stderr, "could not remove %s\n", s_cache_dir);
    free (rm);
    free (s_cache_dir);
    free (spec_path);
    ak_spec_destroy (&spec);
    return 0;
}
