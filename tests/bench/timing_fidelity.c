/*  tests/bench/timing_fidelity.c: how true are the CUDA backend's timings?

    One run on a GPU measures, and prints as a table (docs/benchmarks.md
    holds the results):
    (a) an empty kernel as the system reports it (ak_timing_measure: the
        headline, CUPTI where it records), against two CUDA events around
        one plain launch, and against a do_bench-style loop (events around
        N back-to-back launches, divided by N);
    (b) the same kernel timed by 10 independent ak_timing_measure calls at
        about 2, 20 and 200 us of work (a copy of a calibrated size, cold
        L2): spread = max/min - 1 of the 10 medians;
    (c) where `ncu` runs: the same kernels under
        `ncu --clock-control none --metrics gpu__time_duration.sum`,
        beside the system's figure (headline, its timer: cupti or
        events-floor, the raw events and CUPTI figures, the event floor);
    (d) compile throughput: N distinct configurations through the
        backend's compile, 8 threads against one at a time, each into a
        fresh cache, and the cost of a cache hit.

        bench_timing_fidelity [--configs N] [--threads T] [--runs R]
                              [--no-ncu] [--ncu PATH] [--out FILE]

    Not a test: it asserts nothing, it reports (with the targets
    beside each figure).  Exit status 0 when it ran, 2 when there is no
    GPU, 1 on an error.  `--ncu-child` is the mode ncu runs it in. */
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/backend_cuda.h"
#include "worker/cuda_api.h"
#include "worker/data.h"
#include "worker/timing.h"
#include "clock.h"
#include "policy.h"
#include "spec.h"
#include "stats.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *s_empty_src =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "}\n";

/* VARIANT only makes configurations distinct for the compile benchmark. */
static const char *s_copy_src =
    "#ifndef VARIANT\n"
    "#define VARIANT 0\n"
    "#endif\n"
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "    long long n = a.dims[0] - (VARIANT - VARIANT);\n"
    "    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        AK_OUT (a, 0)[i] = AK_IN (a, 0)[i];\n"
    "}\n";

/* Spins for dims[0] microseconds of %globaltimer: a kernel whose true
   duration is known, to check a timer's time base. */
static const char *s_spin_src =
    "extern \"C\" __global__ void ak_kernel (ak_cuda_args_t a)\n"
    "{\n"
    "    unsigned long long t0, t;\n"
    "    asm volatile (\"mov.u64 %0, %%globaltimer;\" : \"=l\" (t0));\n"
    "    do\n"
    "        asm volatile (\"mov.u64 %0, %%globaltimer;\" : \"=l\" (t));\n"
    "    while (t - t0 < (unsigned long long) a.dims[0] * 1000ull);\n"
    "}\n";

static const char *s_spec_text =
    "{\"schema_version\": 1, \"name\": \"copy\", \"keys\": [\"n\"], \"dtypes\": [\"float32\"],"
    " \"tolerances\": {\"float32\": {\"atol\": 0, \"rtol\": 0}},"
    " \"sizes\": [{\"name\": \"small\", \"size\": {\"n\": 1024}}], \"stability_size\": \"small\","
    " \"flops\": \"0\", \"bytes\": \"2*n*b\","
    " \"inputs\": [{\"name\": \"x\", \"count\": \"n\", \"range\": [-1, 1]}],"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"n\"}],"
    " \"reference\": {\"name\": \"ref.c\", \"text\": \"void ak_reference (void) {}\\n\"},"
    " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"x\"}}]}";

/* The same copy with every input element 0.5 (the range rounds to it). */
static const char *s_spec_const_text =
    "{\"schema_version\": 1, \"name\": \"copyconst\", \"keys\": [\"n\"], \"dtypes\": [\"float32\"],"
    " \"tolerances\": {\"float32\": {\"atol\": 0, \"rtol\": 0}},"
    " \"sizes\": [{\"name\": \"small\", \"size\": {\"n\": 1024}}], \"stability_size\": \"small\","
    " \"flops\": \"0\", \"bytes\": \"2*n*b\","
    " \"inputs\": [{\"name\": \"x\", \"count\": \"n\", \"range\": [0.5, 0.500000001]}],"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"n\"}],"
    " \"reference\": {\"name\": \"ref.c\", \"text\": \"void ak_reference (void) {}\\n\"},"
    " \"baselines\": [{\"backend\": \"host\", \"source\": {\"name\": \"b.c\", \"text\": \"x\"}}]}";

#define S_BLOCK 256
#define S_NCU_REPS 20

static const ak_backend_t *s_be;
static Ak__Device *s_device;
static ak_dev_t *s_dev;
static FILE *s_out;                     /* --out, or NULL */

static void s_say (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static void s_say (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vprintf (fmt, ap);
    va_end (ap);
    fflush (stdout);
    if (s_out) {
        va_start (ap, fmt);
        vfprintf (s_out, fmt, ap);
        va_end (ap);
        fflush (s_out);
    }
}

static char *s_tmpdir (const char *tag)
{
    const char *base = getenv ("TMPDIR");
    char *path = ak_sprintf ("%s/ak-bench-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp (path)) {
        fprintf (stderr, "mkdtemp %s: %s\n", path, strerror (errno));
        exit (1);
    }
    return path;
}

static double s_median (const double *x, size_t n)
{
    ak_stats_t st;
    ak_stats_compute (x, n, &st);
    return st.median;
}

/* ------------------------------------------------------------ compile */

static int s_compile (const char *src, const char *cache, int variant, ak_compile_out_t *out, ak_err_t *err)
{
    ak_compile_req_t req;
    memset (&req, 0, sizeof req);
    req.source = src;
    req.source_len = strlen (src);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = cache;
    req.timeout_ms = 120000;
    req.device = s_device;
    if (variant >= 0) {
        req.define_names[0] = "VARIANT";
        req.define_values[0] = variant;
        req.ndefines = 1;
    }
    return s_be->compile (&req, out, err);
}

static char *s_build (const char *src, const char *cache)
{
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    if (s_compile (src, cache, -1, &out, &err) != 0) {
        fprintf (stderr, "compile: %s\n%s\n", err.msg, out.log ? out.log : "");
        exit (1);
    }
    free (out.log);
    return out.artifact_path;
}

typedef struct {
    const char *cache;
    int         base, n;
    atomic_int  next;
    atomic_int  failed;
} s_pool_t;

static void *s_pool_worker (void *arg)
{
    s_pool_t *p = arg;
    for (;;) {
        int i = atomic_fetch_add (&p->next, 1);
        if (i >= p->n)
            return NULL;
        ak_compile_out_t out = { 0 };
        ak_err_t err = { 0 };
        if (s_compile (s_copy_src, p->cache, p->base + i, &out, &err) != 0 || out.cached) {
            fprintf (stderr, "compile %d: %s\n", p->base + i, out.cached ? "unexpected cache hit" : err.msg);
            atomic_fetch_add (&p->failed, 1);
        }
        free (out.log);
        free (out.artifact_path);
    }
}

/*  n distinct configurations on `threads` threads into a fresh cache:
    configurations per second. */
static double s_compile_rate (int base, int n, int threads, double *wall_s)
{
    char *cache = s_tmpdir ("cc");
    s_pool_t p = { .cache = cache, .base = base, .n = n };
    atomic_init (&p.next, 0);
    atomic_init (&p.failed, 0);
    pthread_t tid[64];
    int started = 0;
    uint64_t t0 = ak_clock_mono_ns ();
    for (int t = 1; t < threads && t < 64; t++)
        if (pthread_create (&tid[started], NULL, s_pool_worker, &p) == 0)
            started++;
    s_pool_worker (&p);
    for (int t = 0; t < started; t++)
        pthread_join (tid[t], NULL);
    *wall_s = (double) (ak_clock_mono_ns () - t0) / 1e9;
    ak_rm_tree (cache, false);
    free (cache);
    if (atomic_load (&p.failed)) {
        fprintf (stderr, "%d compiles failed\n", atomic_load (&p.failed));
        exit (1);
    }
    return (double) n / *wall_s;
}

/* ------------------------------------------------------------- timing */

static ak_kernel_t *s_load (const char *path)
{
    ak_kernel_t *k = NULL;
    ak_err_t err = { 0 };
    if (s_be->load (s_dev, path, "ak_kernel", &k, &err) != 0) {
        fprintf (stderr, "load %s: %s\n", path, err.msg);
        exit (1);
    }
    return k;
}

/*  The copy's launch: one thread per element, S_BLOCK a block; the empty
    kernel (empty set): one block of 32 threads. */
static void s_cfg (int64_t n, bool empty, ak_launch_cfg_t *lc)
{
    memset (lc, 0, sizeof *lc);
    int64_t blocks = (n + S_BLOCK - 1) / S_BLOCK;
    lc->grid[0] = empty ? 1 : (uint32_t) (blocks > 0 ? blocks : 1);
    lc->grid[1] = lc->grid[2] = 1;
    lc->block[0] = empty ? 32 : S_BLOCK;
    lc->block[1] = lc->block[2] = 1;
}

/*  One independent timing run, as a task would do it (job.c's policy
    defaults, cold caches). */
static void s_measure (const ak_spec_t *spec, ak_kernel_t *k, int64_t n, bool empty, uint32_t max_samples,
                       ak_timing_result_t *tr)
{
    ak_launch_cfg_t lc;
    s_cfg (n, empty, &lc);
    ak_policy_t pol;
    ak_policy_defaults (&pol);
    ak_timing_ctx_t tc = {
        .spec = spec, .be = s_be, .dev = s_dev, .cand = k,
        .warmup = pol.warmup, .min_samples = pol.min_samples,
        .max_samples = max_samples ? max_samples : pol.max_samples, .rsd_target = pol.rsd_target,
        .max_time_ms = pol.max_time_ms, .cold = true, .seed = pol.seed, .cand_launch = &lc,
    };
    ak_err_t err = { 0 };
    if (ak_timing_measure (&tc, &n, AK_DT_FLOAT32, tr, &err) != 0) {
        fprintf (stderr, "ak_timing_measure n=%lld: %s\n", (long long) n, err.msg);
        exit (1);
    }
}

typedef struct {
    const char *label;
    double      target_us;              /* 0: the empty kernel */
    int64_t     n;
    double      med[16], ev[16];        /* per run: headline, events */
    size_t      samples[16];
    uint32_t    discarded;
    double      mhz;
    double      sys, sys_ev, spread, spread_ev;
    double      ncu;                    /* median gpu__time_duration, us; 0 none */
    const char *timer;                  /* the first run's headline clock */
    double      cu[16], cupti;          /* per run / median: CUPTI (traced samples only) */
    double      floor;                  /* event floor subtracted ("events-floor"); 0 none */
} s_row_t;

/*  A copy size whose system figure is near target_us: a few quick
    measurements, scaling n by the ratio of what was wanted to what came. */
static int64_t s_calibrate (const ak_spec_t *spec, ak_kernel_t *k, double target_us)
{
    int64_t n = (int64_t) (target_us * 400000.0);
    if (n < 1024)
        n = 1024;
    for (int it = 0; it < 5; it++) {
        ak_timing_result_t tr;
        s_measure (spec, k, n, false, 40, &tr);
        double got = tr.cand.median;
        if (got <= 0)
            break;
        double ratio = target_us / got;
        if (fabs (ratio - 1.0) < 0.08)
            break;
        /* Near the launch floor the time hardly moves with n: limit steps. */
        if (ratio > 8)
            ratio = 8;
        if (ratio < 0.125)
            ratio = 0.125;
        int64_t next = (int64_t) ((double) n * ratio);
        if (next < 256)
            next = 256;
        if (next > (int64_t) AK_DATA_MAX_ELEMS / 2)
            next = (int64_t) AK_DATA_MAX_ELEMS / 2;
        if (next == n)
            break;
        n = next;
    }
    return n;
}

static void s_runs (const ak_spec_t *spec, ak_kernel_t *k, s_row_t *row, int runs)
{
    for (int r = 0; r < runs; r++) {
        ak_timing_result_t tr;
        s_measure (spec, k, row->n, row->target_us == 0, 0, &tr);
        row->med[r] = tr.cand.median;
        row->ev[r] = tr.detail[0].events.median;
        row->cu[r] = tr.detail[0].cupti.n > 0 ? tr.detail[0].cupti.median : 0;
        if (r == 0) {
            row->timer = tr.timer;
            row->floor = tr.event_floor_us;
        }
        row->samples[r] = tr.cand.n;
        row->discarded += tr.detail[0].discarded;
        if (r == 0)
            row->mhz = tr.detail[0].sm_clock_mhz;
        if (r == 0 && strcmp (row->label, "empty") == 0)
            s_say ("  timer: %s\n", tr.timer);
    }
    double lo = INFINITY, hi = 0, lo_e = INFINITY, hi_e = 0;
    for (int r = 0; r < runs; r++) {
        lo = fmin (lo, row->med[r]);
        hi = fmax (hi, row->med[r]);
        lo_e = fmin (lo_e, row->ev[r]);
        hi_e = fmax (hi_e, row->ev[r]);
    }
    row->sys = s_median (row->med, (size_t) runs);
    row->sys_ev = s_median (row->ev, (size_t) runs);
    row->cupti = s_median (row->cu, (size_t) runs);
    row->spread = lo > 0 ? hi / lo - 1 : 0;
    row->spread_ev = lo_e > 0 ? hi_e / lo_e - 1 : 0;
}

/* ---------------------------------------------------------------- ncu */

static char *s_find_ncu (void)
{
    const char *path = getenv ("PATH");
    char *dirs = ak_strdup (path ? path : "");
    char *save = NULL, *found = NULL;
    for (char *d = strtok_r (dirs, ":", &save); d && !found; d = strtok_r (NULL, ":", &save)) {
        char *p = ak_path_join (d, "ncu");
        if (access (p, X_OK) == 0)
            found = p;
        else
            free (p);
    }
    free (dirs);
    const char *fixed[] = { "/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu" };
    for (size_t i = 0; !found && i < sizeof fixed / sizeof fixed[0]; i++)
        if (access (fixed[i], X_OK) == 0)
            found = ak_strdup (fixed[i]);
    return found;
}

/*  The mode ncu runs: each kernel S_NCU_REPS times, plain launches (no
    blocker: ncu serialises launches), CUPTI off (ncu owns the profiler).
    argv: --ncu-child empty.cubin copy.cubin spin.cubin n1 n2 n3 s1 s2:
    the empty kernel first, then the copy at each n, then the spin kernel
    for s1 and s2 microseconds. */
static int s_ncu_child (int argc, char **argv)
{
    ak_err_t err = { 0 };
    Ak__Device **devs = NULL;
    size_t ndevs = 0;
    s_be = ak_backend_find ("cuda");
    if (!s_be || s_be->probe (&devs, &ndevs, &err) != 0 || s_be->open (devs[0], &s_dev, &err) != 0) {
        fprintf (stderr, "ncu child: %s\n", err.msg);
        return 1;
    }
    ak_kernel_t *ke = s_load (argv[1]), *kc = s_load (argv[2]), *ks = s_load (argv[3]);
    int64_t nmax = 1;
    for (int i = 4; i < argc; i++)
        if (atoll (argv[i]) > nmax)
            nmax = atoll (argv[i]);
    void *x = NULL, *y = NULL;
    /* The input: the values ak_timing_measure generates for the copy
       spec (seed 42, stream 0, [-1, 1)), or with AK_BENCH_CONST=1 every
       byte 0x3c. */
    bool constant = getenv ("AK_BENCH_CONST") && strcmp (getenv ("AK_BENCH_CONST"), "1") == 0;
    ak_kernel_t *kf = NULL;
    if (s_be->alloc (s_dev, (size_t) nmax * 4, &x, &err) || s_be->alloc (s_dev, (size_t) nmax * 4, &y, &err)
        || (constant ? s_be->fill (s_dev, x, 0x3c, (size_t) nmax * 4, &err)
                     : (s_be->load (s_dev, argv[2], "ak_fill_uniform", &kf, &err)
                        || ak_cuda_fill_uniform (s_dev, kf, x, (uint64_t) nmax, 42, 0, -1.0, 1.0,
                                                 AK_DT_FLOAT32, &err)))) {
        fprintf (stderr, "ncu child: %s\n", err.msg);
        return 1;
    }
    for (int c = 3; c < argc; c++) {
        bool spin = c >= argc - 2;
        int64_t n = c == 3 ? 1 : atoll (argv[c]);
        ak_launch_cfg_t lc;
        s_cfg (n, c == 3 || spin, &lc);
        ak_launch_t l;
        memset (&l, 0, sizeof l);
        l.ndims = 1;
        l.dims[0] = n;
        l.nin = l.nout = 1;
        l.in[0] = x;
        l.out[0] = y;
        memcpy (l.grid, lc.grid, sizeof l.grid);
        memcpy (l.block, lc.block, sizeof l.block);
        for (int r = 0; r < S_NCU_REPS; r++)
            if (s_be->launch (s_dev, c == 3 ? ke : spin ? ks : kc, &l, &err) != 0) {
                fprintf (stderr, "ncu child: %s\n", err.msg);
                return 1;
            }
    }
    return 0;
}

/*  A CSV field of ncu's output (fields quoted, "1,234.5" style numbers). */
static void s_csv_fields (char *line, char **f, int max, int *nf)
{
    *nf = 0;
    char *p = line;
    while (*p && *nf < max) {
        if (*p == '"') {
            char *start = ++p;
            while (*p && *p != '"')
                p++;
            if (*p)
                *p++ = '\0';
            f[(*nf)++] = start;
            if (*p == ',')
                p++;
        }
        else {
            char *start = p;
            while (*p && *p != ',' && *p != '\n')
                p++;
            if (*p)
                *p++ = '\0';
            f[(*nf)++] = start;
        }
    }
}

/*  Runs ncu on the child mode and fills rows[i].ncu (us).  0, or -1 with
    why (not run, refused ...). */
static int s_ncu (const char *ncu, const char *self, const char *empty, const char *copy, const char *spin,
                  bool constant, s_row_t *rows, int nrows, double *out_us, char *why, size_t whylen)
{
    char *log = s_tmpdir ("ncu");
    char *csv = ak_path_join (log, "ncu.csv");
    char *errlog = ak_path_join (log, "ncu.err");
    char sizes[256] = "";
    for (int i = 1; i < nrows; i++) {
        size_t len = strlen (sizes);
        snprintf (sizes + len, sizeof sizes - len, " %lld", (long long) rows[i].n);
    }
    char *cmd = ak_sprintf ("AK_BENCH_CONST=%d AK_CUDA_CUPTI=0 AK_CUDA_BLOCKER=0 timeout 300 '%s' --clock-control none "
                            "--metrics gpu__time_duration.sum --csv --log-file '%s' "
                            "-k regex:^ak_kernel$ '%s' --ncu-child '%s' '%s' '%s'%s >'%s' 2>&1",
                            constant ? 1 : 0, ncu, csv, self, empty, copy, spin, sizes, errlog);
    s_say ("  %s\n", cmd);
    uint64_t t0 = ak_clock_mono_ns ();
    int st = system (cmd);
    double secs = (double) (ak_clock_mono_ns () - t0) / 1e9;
    free (cmd);
    int rc = -1;
    char *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    if (st != 0) {
        char *etext = NULL;
        size_t elen = 0;
        ak_file_read (errlog, 1 << 20, &etext, &elen, NULL);
        char *ctext = NULL;
        size_t clen = 0;
        ak_file_read (csv, 1 << 20, &ctext, &clen, NULL);
        snprintf (why, whylen, "ncu exited with status %d after %.1f s: %.300s %.300s", st, secs,
                  etext ? etext : "", ctext ? ctext : "");
        free (etext);
        free (ctext);
        goto done;
    }
    if (ak_file_read (csv, 16 << 20, &text, &len, &err) != 0) {
        snprintf (why, whylen, "%.500s", err.msg);
        goto done;
    }
    /* Rows in launch order, S_NCU_REPS per configuration. */
    double vals[64 * S_NCU_REPS];
    int nv = 0, name_col = -1, unit_col = -1, value_col = -1;
    char *save = NULL;
    for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        char *f[64];
        int nf = 0;
        if (line[0] != '"')
            continue;                   /* ==PROF== lines */
        s_csv_fields (line, f, 64, &nf);
        if (name_col < 0) {
            for (int i = 0; i < nf; i++) {
                if (strcmp (f[i], "Metric Name") == 0) name_col = i;
                if (strcmp (f[i], "Metric Unit") == 0) unit_col = i;
                if (strcmp (f[i], "Metric Value") == 0) value_col = i;
            }
            continue;
        }
        if (value_col < 0 || value_col >= nf || unit_col >= nf || strcmp (f[name_col], "gpu__time_duration.sum") != 0)
            continue;
        char num[64];
        size_t k = 0;
        for (const char *c = f[value_col]; *c && k + 1 < sizeof num; c++)
            if (*c != ',')
                num[k++] = *c;
        num[k] = '\0';
        double v = atof (num);
        const char *unit = f[unit_col];
        if (strcmp (unit, "nsecond") == 0 || strcmp (unit, "ns") == 0)
            v /= 1000.0;
        else if (strcmp (unit, "msecond") == 0 || strcmp (unit, "ms") == 0)
            v *= 1000.0;
        else if (strcmp (unit, "second") == 0 || strcmp (unit, "s") == 0)
            v *= 1e6;
        if (nv < (int) (sizeof vals / sizeof vals[0]))
            vals[nv++] = v;
    }
    if (nv != nrows * S_NCU_REPS) {
        snprintf (why, whylen, "ncu reported %d kernels, expected %d (see its CSV)", nv, nrows * S_NCU_REPS);
        goto done;
    }
    for (int i = 0; i < nrows; i++)
        out_us[i] = s_median (vals + i * S_NCU_REPS, S_NCU_REPS);
    s_say ("  ncu ran %.1f s\n", secs);
    rc = 0;

done:
    free (text);
    ak_rm_tree (log, false);
    free (log);
    free (csv);
    free (errlog);
    return rc;
}

/*  rows[4], rows[5]: the spin kernel for 20 and 200 us of %globaltimer,
    timed by the system (its true duration is known: a check of the
    time base of whatever times it).  Always 0. */
static int s_spin_rows (const ak_spec_t *spec, const char *spin_path, s_row_t *rows)
{
    ak_kernel_t *ks = s_load (spin_path);
    rows[4] = (s_row_t) { .label = "spin 20 us", .target_us = 0, .n = 20 };
    rows[5] = (s_row_t) { .label = "spin 200 us", .target_us = 0, .n = 200 };
    s_runs (spec, ks, &rows[4], 3);
    s_runs (spec, ks, &rows[5], 3);
    s_be->unload (s_dev, &ks);
    return 0;
}

/* ------------------------------------------------------- plain timers */

#define S_NPLAIN 200
#define S_NLOOP  20
#define S_LOOP_N 100

/*  The empty kernel k (one block of 32) timed as others do: median of
    S_NPLAIN cold samples of two events around one launch, and median of
    S_NLOOP loops of S_LOOP_N back-to-back launches between two events. */
static int s_plain (ak_kernel_t *k, double *plain_us, double *loop_us)
{
    double plain[S_NPLAIN], loop[S_NLOOP], junk = 0;
    ak_err_t err = { 0 };
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.grid[0] = l.grid[1] = l.grid[2] = 1;
    l.block[0] = 32;
    l.block[1] = l.block[2] = 1;
    for (int i = 0; i < 10; i++)
        if (ak_cuda_time_plain (s_dev, k, &l, true, 1, &junk, &err) != 0)
            goto fail;
    for (int i = 0; i < S_NPLAIN; i++)
        if (ak_cuda_time_plain (s_dev, k, &l, true, 1, &plain[i], &err) != 0)
            goto fail;
    for (int i = 0; i < S_NLOOP; i++)
        if (ak_cuda_time_plain (s_dev, k, &l, false, S_LOOP_N, &loop[i], &err) != 0)
            goto fail;
    *plain_us = s_median (plain, S_NPLAIN);
    *loop_us = s_median (loop, S_NLOOP);
    return 0;
fail:
    fprintf (stderr, "plain timing: %s\n", err.msg);
    return -1;
}

/*  Closes and opens the device again with AK_CUDA_CUPTI set to cupti (or
    unset), and loads path into *k again. */
static int s_reopen (ak_kernel_t **k, const char *path, const char *cupti)
{
    ak_err_t err = { 0 };
    s_be->unload (s_dev, k);
    s_be->close (&s_dev);
    if (cupti)
        setenv ("AK_CUDA_CUPTI", cupti, 1);
    else
        unsetenv ("AK_CUDA_CUPTI");
    if (s_be->open (s_device, &s_dev, &err) != 0) {
        fprintf (stderr, "open: %s\n", err.msg);
        return -1;
    }
    *k = s_load (path);
    return 0;
}

/*  What CUPTI's tracing costs the kernel: the copies of rows[2] and
    rows[3] by their events (behind the blocker) with CUPTI off, and with
    each set of activity kinds on (AK_CUDA_CUPTI_KINDS). */
static int s_tracing_cost (const ak_spec_t *spec, ak_kernel_t **kc, const char *copy_path, s_row_t *rows)
{
    static const char *const sets[] = { NULL, "kernel", "driver,extcorr", "kernel,driver,extcorr" };
    s_say ("  what tracing costs (events behind the blocker, median of 3 runs; CUPTI where recorded):\n");
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        if (sets[i])
            setenv ("AK_CUDA_CUPTI_KINDS", sets[i], 1);
        if (s_reopen (kc, copy_path, sets[i] ? NULL : "0") != 0)
            return -1;
        s_say ("    CUPTI %-22s", sets[i] ? sets[i] : "off");
        for (int r = 2; r <= 3; r++) {
            s_row_t row = { .label = "cost", .target_us = rows[r].target_us, .n = rows[r].n };
            s_runs (spec, *kc, &row, 3);
            s_say ("  %s: events %8.3f us, headline %8.3f us", rows[r].label, row.sys_ev, row.sys);
        }
        s_say ("\n");
    }
    unsetenv ("AK_CUDA_CUPTI_KINDS");
    return s_reopen (kc, copy_path, NULL);
}

/* --------------------------------------------------------------- main */

static const char *s_ok (bool ok)
{
    return ok ? "ok" : "MISS";
}

int main (int argc, char **argv)
{
    if (argc >= 2 && strcmp (argv[1], "--ncu-child") == 0)
        return s_ncu_child (argc - 1, argv + 1);
    int nconfigs = 24, threads = 8, runs = 10;
    bool want_ncu = true;
    const char *ncu_path = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--configs") == 0 && i + 1 < argc)
            nconfigs = atoi (argv[++i]);
        else if (strcmp (argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi (argv[++i]);
        else if (strcmp (argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi (argv[++i]);
        else if (strcmp (argv[i], "--no-ncu") == 0)
            want_ncu = false;
        else if (strcmp (argv[i], "--ncu") == 0 && i + 1 < argc)
            ncu_path = argv[++i];
        else if (strcmp (argv[i], "--out") == 0 && i + 1 < argc)
            out_path = argv[++i];
        else {
            fprintf (stderr, "usage: %s [--configs N] [--threads T] [--runs R] [--no-ncu] [--ncu PATH] "
                     "[--out FILE]\n", argv[0]);
            return 1;
        }
    }
    if (runs < 2 || runs > 16 || nconfigs < 1 || nconfigs > 1000 || threads < 1 || threads > 64) {
        fprintf (stderr, "runs 2..16, configs 1..1000, threads 1..64\n");
        return 1;
    }
    if (out_path && !(s_out = fopen (out_path, "w"))) {
        fprintf (stderr, "%s: %s\n", out_path, strerror (errno));
        return 1;
    }

    ak_err_t err = { 0 };
    Ak__Device **devs = NULL;
    size_t ndevs = 0;
    s_be = ak_backend_find ("cuda");
    if (!s_be || s_be->probe (&devs, &ndevs, &err) != 0) {
        printf ("no GPU: %s\n", s_be ? err.msg : "this build has no CUDA backend");
        return 2;
    }
    s_device = devs[0];
    if (s_be->open (s_device, &s_dev, &err) != 0) {
        fprintf (stderr, "open: %s\n", err.msg);
        return 1;
    }
    ak_cuda_timing_info_t ti;
    ak_cuda_timing_info (s_dev, &ti, &err);
    long cpus = sysconf (_SC_NPROCESSORS_ONLN);
    s_say ("timing fidelity: %s (%s, %u SMs, L2 %.0f MiB), driver %s, CUDA %s, NVRTC %s, CUPTI %s, %ld CPUs\n",
           s_device->name, s_device->uuid, s_device->sm_count, (double) s_device->l2_bytes / (1 << 20),
           s_device->driver_version, ak_cuda_driver_version_text (), s_device->nvrtc_version,
           s_device->cupti_version, cpus);
    s_say ("  blocker %s%s; clock check %s (%%globaltimer step %llu ns, default SM clock %u MHz); CUPTI %s\n",
           ti.blocker ? "on" : "off: ", ti.blocker ? "" : ti.blocker_why, ti.clock_check ? "on" : "off",
           (unsigned long long) ti.timer_tick_ns, ti.default_clock_mhz, ti.cupti ? "on" : "off");

    ak_spec_t *spec = NULL;
    if (ak_spec_parse_text (s_spec_text, strlen (s_spec_text), "copy spec", &spec, &err) != 0) {
        fprintf (stderr, "spec: %s\n", err.msg);
        return 1;
    }
    char *cache = s_tmpdir ("cache");
    char *empty_path = s_build (s_empty_src, cache), *copy_path = s_build (s_copy_src, cache);
    char *spin_path = s_build (s_spin_src, cache);
    ak_kernel_t *ke = s_load (empty_path), *kc = NULL;

    /* ---- (a) the empty kernel, three ways */
    s_say ("\n(a) empty kernel (1 block of 32 threads), cold L2\n");
    s_row_t rows[6];
    memset (rows, 0, sizeof rows);
    rows[0] = (s_row_t) { .label = "empty", .target_us = 0, .n = 1 };
    s_runs (spec, ke, &rows[0], runs);
    /* The others' ways, first in this process (CUPTI on), then with
       CUPTI off, as a process that does not trace would see them. */
    double m_plain[2], m_loop[2];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && s_reopen (&ke, empty_path, "0") != 0)
            return 1;
        if (s_plain (ke, &m_plain[pass], &m_loop[pass]) != 0)
            return 1;
    }
    if (s_reopen (&ke, empty_path, NULL) != 0)
        return 1;
    kc = s_load (copy_path);
    s_say ("  %-50s %9s %9s\n", "method", "median us", "x system");
    s_say ("  %-50s %9.3f %9.2f   target <= 1.0 us: %s\n", "system (headline, median of the runs)",
           rows[0].sys, 1.0, s_ok (rows[0].sys <= 1.0));
    s_say ("  %-50s %9.3f %9.2f\n", "system, its events (behind the blocker)", rows[0].sys_ev,
           rows[0].sys_ev / rows[0].sys);
    for (int pass = 0; pass < 2; pass++) {
        char label[96];
        snprintf (label, sizeof label, "two events around one launch (CUPTI %s)", pass ? "off" : "on");
        s_say ("  %-50s %9.3f %9.2f\n", label, m_plain[pass], m_plain[pass] / rows[0].sys);
        snprintf (label, sizeof label, "do_bench-style: events around %d launches / %d (CUPTI %s)", S_LOOP_N,
                  S_LOOP_N, pass ? "off" : "on");
        s_say ("  %-50s %9.3f %9.2f\n", label, m_loop[pass], m_loop[pass] / rows[0].sys);
    }

    /* ---- (b) spreads */
    s_say ("\n(b) %d independent timing runs (ak_timing_measure, policy defaults, cold L2) per size\n", runs);
    const double targets[3] = { 2, 20, 200 };
    const char *labels[3] = { "copy ~2 us", "copy ~20 us", "copy ~200 us" };
    for (int i = 0; i < 3; i++) {
        rows[i + 1] = (s_row_t) { .label = labels[i], .target_us = targets[i] };
        rows[i + 1].n = s_calibrate (spec, kc, targets[i]);
        s_runs (spec, kc, &rows[i + 1], runs);
    }
    s_say ("  %-13s %10s %9s %9s %9s %9s %9s %8s %6s  %s\n", "kernel", "n", "median", "min", "max",
           "spread", "ev.spread", "samples", "MHz", "target");
    for (int i = 0; i < 4; i++) {
        s_row_t *r = &rows[i];
        double lo = INFINITY, hi = 0;
        size_t smp = 0;
        for (int k = 0; k < runs; k++) {
            lo = fmin (lo, r->med[k]);
            hi = fmax (hi, r->med[k]);
            smp += r->samples[k];
        }
        double target = r->target_us >= 20 ? 0.01 : 0.03;
        char verdict[64];
        if (r->target_us == 0)
            snprintf (verdict, sizeof verdict, "none (one %llu ns timer step is %.0f%%)",
                      (unsigned long long) ti.timer_tick_ns, r->sys > 0 ? 0.1 * ti.timer_tick_ns / r->sys : 0);
        else
            snprintf (verdict, sizeof verdict, "<= %.0f%%: %s", 100 * target, s_ok (r->spread <= target));
        s_say ("  %-13s %10lld %9.3f %9.3f %9.3f %8.2f%% %8.2f%% %8zu %6.0f  %s%s\n", r->label,
               (long long) r->n, r->sys, lo, hi, 100 * r->spread, 100 * r->spread_ev, smp / (size_t) runs,
               r->mhz, verdict, r->discarded ? " (samples discarded for throttling)" : "");
    }
    s_say ("  medians of each run (us):\n");
    for (int i = 0; i < 4; i++) {
        s_say ("    %-13s", rows[i].label);
        for (int k = 0; k < runs; k++)
            s_say (" %.3f", rows[i].med[k]);
        s_say ("\n");
    }

    /* ---- (c) ncu */
    s_say ("\n(c) Nsight Compute: ncu --clock-control none --metrics gpu__time_duration.sum (%d launches each)\n",
           S_NCU_REPS);
    char *ncu = !want_ncu ? NULL : ncu_path ? ak_strdup (ncu_path) : s_find_ncu ();
    char why[800] = "";
    double ncu_us[6] = { 0 };
    char self[4096];
    ssize_t sl = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (sl > 0)
        self[sl] = '\0';
    else
        snprintf (self, sizeof self, "%s", argv[0]);
    if (!want_ncu)
        s_say ("  skipped (--no-ncu)\n");
    else if (!ncu)
        s_say ("  skipped: ncu not found on PATH, /usr/local/cuda/bin or /opt/nvidia/nsight-compute\n");
    else if (s_spin_rows (spec, spin_path, rows) != 0
             || s_ncu (ncu, self, empty_path, copy_path, spin_path, false, rows, 6, ncu_us, why, sizeof why) != 0)
        s_say ("  skipped: %s\n", why);
    else {
        for (int i = 0; i < 6; i++)
            rows[i].ncu = ncu_us[i];
        s_say ("  %-13s %11s %-12s %11s %9s %11s %11s %11s %7s  %s\n", "kernel", "system us", "timer",
               "ncu us", "sys/ncu", "sys-ncu us", "events us", "CUPTI us", "floor", "within 3% (>= 20 us)");
        for (int i = 0; i < 6; i++) {
            double ratio = rows[i].ncu > 0 ? rows[i].sys / rows[i].ncu : 0;
            s_say ("  %-13s %11.3f %-12s %11.3f %9.3f %11.3f %11.3f %11.3f %7.3f  %s\n", rows[i].label,
                   rows[i].sys, rows[i].timer ? rows[i].timer : "?", rows[i].ncu, ratio,
                   rows[i].sys - rows[i].ncu, rows[i].sys_ev, rows[i].cupti, rows[i].floor,
                   rows[i].target_us < 20 && i < 4 ? "(short)" : s_ok (fabs (ratio - 1) <= 0.03));
        }
        {
            double fl = 0;
            ak_err_t fe = { 0 };
            if (ak_cuda_event_floor (s_dev, &fl, &fe) == 0)
                s_say ("  event floor of this device: %.3f us (kernels of >= %.0f us by CUPTI are timed "
                       "untraced, events - floor)\n", fl, AK_TIMING_TRACE_MAX_US);
            else
                s_say ("  event floor: %s\n", fe.msg);
        }
        /* Does the data matter?  ncu on a constant input, and the system
           on one, for the largest copy. */
        double const_ncu[6] = { 0 };
        if (s_ncu (ncu, self, empty_path, copy_path, spin_path, true, rows, 6, const_ncu, why, sizeof why) != 0)
            s_say ("  constant input under ncu: %s\n", why);
        ak_spec_t *cspec = NULL;
        if (ak_spec_parse_text (s_spec_const_text, strlen (s_spec_const_text), "const spec", &cspec, &err) != 0) {
            fprintf (stderr, "spec: %s\n", err.msg);
            return 1;
        }
        s_row_t crow = { .label = "const", .target_us = 200, .n = rows[3].n };
        s_runs (cspec, kc, &crow, 3);
        ak_spec_destroy (&cspec);
        s_say ("  %s, constant input (0.5 system, 0x3c3c3c3c ncu): system %.3f us, ncu %.3f us, sys/ncu %.3f\n",
               rows[3].label, crow.sys, const_ncu[3], const_ncu[3] > 0 ? crow.sys / const_ncu[3] : 0);
        for (int i = 1; i < 3; i++)
            s_say ("  %s, constant input under ncu: %.3f us (random: %.3f)\n", rows[i].label, const_ncu[i],
                   rows[i].ncu);
        /* Does tracing slow the kernel? */
        if (s_tracing_cost (spec, &kc, copy_path, rows) != 0)
            return 1;
    }
    free (ncu);

    /* ---- (d) compile throughput, with the device closed: the daemon
       compiles, and it holds no CUDA context (a process with one forks
       more slowly). */
    s_be->unload (s_dev, &ke);
    s_be->unload (s_dev, &kc);
    s_be->close (&s_dev);
    s_say ("\n(d) compile throughput: %d distinct configurations, NVRTC to sm_%u%u CUBIN, fresh caches\n",
           nconfigs, s_device->cc_major, s_device->cc_minor);
    double serial_s = 0, pool_s = 0;
    double serial = s_compile_rate (1000, nconfigs, 1, &serial_s);
    double pool = s_compile_rate (2000, nconfigs, threads, &pool_s);
    /* Cache hits: the same request again. */
    enum { NHIT = 200 };
    double hit[NHIT];
    for (int i = 0; i < NHIT; i++) {
        ak_compile_out_t out = { 0 };
        uint64_t t0 = ak_clock_mono_ns ();
        if (s_compile (s_copy_src, cache, -1, &out, &err) != 0 || !out.cached) {
            fprintf (stderr, "cache hit expected: %s\n", err.msg);
            return 1;
        }
        hit[i] = (double) (ak_clock_mono_ns () - t0) / 1e3;
        free (out.log);
        free (out.artifact_path);
    }
    s_say ("  one at a time: %6.2f configs/s (%.2f s, %.0f ms each)\n", serial, serial_s,
           1000 * serial_s / nconfigs);
    s_say ("  %d threads:     %6.2f configs/s (%.2f s)   pool/serial %.2fx   target >= 6x on 16 cores: %s%s\n",
           threads, pool, pool_s, pool / serial, s_ok (pool / serial >= 6),
           cpus < 16 ? " (fewer than 16 CPUs here)" : "");
    s_say ("  cache hit: median %.1f us (%d hits)\n", s_median (hit, NHIT), NHIT);

    ak_rm_tree (cache, false);
    free (cache);
    free (empty_path);
    free (copy_path);
    free (spin_path);
    ak_spec_destroy (&spec);
    for (size_t i = 0; i < ndevs; i++)
        ak__device__free_unpacked (devs[i], NULL);
    free (devs);
    if (s_out)
        fclose (s_out);
    return 0;
}
