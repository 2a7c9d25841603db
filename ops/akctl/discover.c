/*  ops/akctl/discover.c: `akctl discover`: run a program under
    libakdiscover.so and turn its trace into hotspots, a batch and shape
    corpora (docs/discover.md).

    discover takes options of its own and a command after `--`: its entry
    in akctl's verb table says so (S_OWN_ARGV, main.c), and main hands it
    argv as it came (opts->argv) rather than its parsed options.

    Never: leave the child running when akctl is interrupted (SIGINT and
    SIGTERM are passed on), write a batch without a workload, or call a
    program's failure a success. */
#include "akctl.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attribute.h"
#include "datadir.h"
#include "hotspots.h"
#include "trace.h"
#include "util.h"

const char akctl_discover_help[] =
    "Runs CMD with libakdiscover.so injected (CUDA_INJECTION64_PATH and\n"
    "NVTX_INJECTION64_PATH), records every kernel (CUPTI) and NVTX range of the\n"
    "measurement window into DIR/trace.akd (binary), attributes each kernel to the\n"
    "innermost range open on its launching thread, and writes\n"
    "  DIR/hotspots.json, DIR/hotspots.md  ranges and kernels ranked by GPU time\n"
    "                   per step, with launches, mean duration, the share of\n"
    "                   launches < 5 us and the Amdahl ceiling of each;\n"
    "  DIR/batch.json, DIR/OP.corpus.json  a batch for the device class the\n"
    "                   program ran on, whose corpora hold the shapes and dtypes\n"
    "                   of the ranges that map to catalog operators, weighted by\n"
    "                   their share of GPU time (`akctl submit DIR/batch.json`);\n"
    "                   not written when nothing maps;\n"
    "and lists the GPU time that maps to no catalog operator.  For PyTorch, run\n"
    "the script under ops/discover/torch_nvtx.py (shapes and dtypes per op).\n"
    "\n"
    "  --out DIR           where the trace and the outputs go (created)\n"
    "  --step-range NAME   a step is an outermost NVTX range named NAME\n"
    "  --warmup-steps N    skip the first N steps (needs --step-range)\n"
    "  --steps N           then record N steps (needs --step-range; default:\n"
    "                      until the program exits)\n"
    "  --sample K          trace 1 step in K (the window's first and every\n"
    "                      K-th after it; --steps counts the traced ones): the\n"
    "                      others run without CUPTI's kernel records and give\n"
    "                      the step time (needs --step-range; default 1)\n"
    "  --skip-ms MS        record from MS milliseconds after CUDA starts\n"
    "  --class NAME        the device class of the batch (default: the one the\n"
    "                      worker of this GPU announces, from the trace)\n"
    "  --from-trace FILE   analyse a recorded trace instead of running CMD\n"
    "  --dump-trace FILE   print a trace as JSON lines (version 1) and exit\n"
    "\n"
    "Ranges map to catalog operators by name:\n"
    "%s"
    "\n"
    "Exit codes: 0 done; 1 no GPU work observed, CUPTI taken by another tool,\n"
    "kernel records whose times cannot be true (more kernels at once than a\n"
    "GPU runs: nothing written from them), or CMD failed (its status is\n"
    "printed; what was recorded is kept and analysed); 2 bad usage or CMD\n"
    "not found.\n";

typedef struct {
    const char *out, *step_range, *device_class, *from_trace, *dump_trace;
    long        steps, warmup, skip_ms, sample;
    char      **cmd;
    int         ncmd;
} s_opts_t;

static volatile sig_atomic_t s_child = 0;

static void s_forward (int sig)
{
    if (s_child > 0)
        kill ((pid_t) s_child, sig);
}

static void s_usage (void)
{
    fprintf (stderr, "usage: akctl discover --out DIR [--steps N] [--warmup-steps N] [--step-range NAME]\n"
                     "                      [--sample K] [--skip-ms MS] [--class NAME] -- CMD [ARGS...]\n"
                     "       akctl discover --from-trace FILE --out DIR [--class NAME]\n"
                     "       akctl discover --dump-trace FILE\n"
                     "(akctl discover --help says more)\n");
}

static int s_bad (const char *fmt, const char *arg)
{
    fprintf (stderr, "akctl: discover: ");
    fprintf (stderr, fmt, arg);
    fprintf (stderr, "\n");
    s_usage ();
    return AKCTL_EXIT_USAGE;
}

static int s_count (const char *name, const char *text, long *out)
{
    int64_t v;
    if (!text || ak_parse_i64 (text, &v) != 0 || v < 0 || v > 100000000) {
        fprintf (stderr, "akctl: discover: %s wants a whole number from 0 to 100000000, not '%s'\n", name,
                 text ? text : "");
        s_usage ();
        return AKCTL_EXIT_USAGE;
    }
    *out = (long) v;
    return 0;
}

/*  CMD as execvp would find it; NULL when it would not. */
static char *s_which (const char *cmd)
{
    if (strchr (cmd, '/'))
        return access (cmd, X_OK) == 0 ? ak_strdup (cmd) : NULL;
    const char *path = getenv ("PATH");
    char *copy = ak_strdup (path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    char *save = NULL, *found = NULL;
    for (char *dir = strtok_r (copy, ":", &save); dir && !found; dir = strtok_r (NULL, ":", &save)) {
        char *p = ak_sprintf ("%s/%s", *dir ? dir : ".", cmd);
        struct stat st;
        if (stat (p, &st) == 0 && S_ISREG (st.st_mode) && access (p, X_OK) == 0)
            found = p;
        else
            free (p);
    }
    free (copy);
    return found;
}

/*  $AKD_LIBRARY, else lib/libakdiscover.so beside akctl (build/bin/lib,
    the bundle's bin/lib), else ../lib/akfleet/libakdiscover.so (installed). */
static char *s_library (void)
{
    const char *env = getenv ("AKD_LIBRARY");
    if (env && *env)
        return access (env, R_OK) == 0 ? realpath (env, NULL) : NULL;
    char *dir = ak_datadir_bindir ();
    if (!dir)
        return NULL;
    char *libs[2] = { ak_sprintf ("%s/lib/libakdiscover.so", dir),
                      ak_sprintf ("%s/../lib/akfleet/libakdiscover.so", dir) };
    free (dir);
    char *found = NULL;
    for (int i = 0; i < 2 && !found; i++)
        if (access (libs[i], R_OK) == 0)
            found = realpath (libs[i], NULL);
    free (libs[0]);
    free (libs[1]);
    return found;
}

/*  Runs the command with the injection.  Returns its wait status in
    *status_p, or -1 when it could not be started. */
static int s_run (const s_opts_t *o, const char *lib, const char *trace, int *status_p)
{
    char num[32];
    pid_t pid = fork ();
    if (pid < 0) {
        fprintf (stderr, "akctl: discover: fork: %s\n", strerror (errno));
        return -1;
    }
    if (pid == 0) {
        setenv ("CUDA_INJECTION64_PATH", lib, 1);
        setenv ("NVTX_INJECTION64_PATH", lib, 1);
        setenv ("AKD_TRACE", trace, 1);
        if (o->step_range)
            setenv ("AKD_STEP_RANGE", o->step_range, 1);
        snprintf (num, sizeof num, "%ld", o->warmup);
        setenv ("AKD_WARMUP_STEPS", num, 1);
        snprintf (num, sizeof num, "%ld", o->steps);
        setenv ("AKD_STEPS", num, 1);
        snprintf (num, sizeof num, "%ld", o->skip_ms);
        setenv ("AKD_SKIP_MS", num, 1);
        snprintf (num, sizeof num, "%ld", o->sample);
        setenv ("AKD_SAMPLE", num, 1);
        execvp (o->cmd[0], o->cmd);
        fprintf (stderr, "akctl: discover: %s: %s\n", o->cmd[0], strerror (errno));
        _exit (127);
    }
    s_child = pid;
    struct sigaction sa, old_int, old_term;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_forward;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, &old_int);
    sigaction (SIGTERM, &sa, &old_term);
    int status = 0;
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    s_child = 0;
    sigaction (SIGINT, &old_int, NULL);
    sigaction (SIGTERM, &old_term, NULL);
    *status_p = status;
    return 0;
}

static void s_summary (const akd_hotspots_t *h, const char *dir, const char *cls)
{
    printf ("discover: %d step%s, %.1f us GPU time per step; %.1f%% under a named range, %.1f%% mapped to "
            "catalog operators\n", h->steps, h->steps == 1 ? "" : "s", h->gpu_ns / h->steps / 1e3,
            h->named_ns > 0 ? 100.0 * h->named_ns / h->gpu_ns : 0,
            h->catalog_ns > 0 ? 100.0 * h->catalog_ns / h->gpu_ns : 0);
    if (h->sample > 1) {
        printf ("discover: sampled, 1 step in %ld traced (%d of %d); %zu kernel%s outside a traced step left out\n",
                h->sample, h->steps, h->steps_seen, h->unsampled, h->unsampled == 1 ? "" : "s");
        const double cost = akd_sample_cost_pct (h);
        /* above 5%, say how to pay less: the switch's cost is per cycle
           (on a CUDA-graph step it is most of it: docs/discover.md) */
        if (!isnan (cost))
            printf ("discover: step times: traced %.1f us, the step after each %.1f us, the others %.1f us: "
                    "sampling added about %.1f%% a step (the injection's cost to every step not counted)%s\n",
                    h->place_ns[AKD_PLACE_TRACED] / 1e3, h->place_ns[AKD_PLACE_AFTER] / 1e3,
                    h->place_ns[AKD_PLACE_REST] / 1e3, cost,
                    cost > 5 ? "; a larger --sample spreads the records' switch over more steps" : "");
    }
    for (size_t i = 0; i < h->nworkloads && i < 10; i++)
        printf ("  %-16s %-40s %6.1f%%\n", h->workloads[i].map.op, h->workloads[i].name,
                100.0 * h->workloads[i].gpu_ns / h->gpu_ns);
    printf ("wrote %s/hotspots.json, %s/hotspots.md", dir, dir);
    if (h->nworkloads)
        printf (", %s/batch.json (target %s) and its corpora", dir, cls);
    printf ("\n");
}

/*  Reads the trace and writes the outputs.  Returns the exit code. */
static int s_analyse (const s_opts_t *o, const char *trace_path, bool program_failed)
{
    ak_err_t err = { 0 };
    akd_trace_t *t = NULL;
    akd_attr_t *a = NULL;
    akd_hotspots_t *h = NULL;
    char *cls = NULL, *catalog = NULL;
    int code = AKCTL_EXIT_NEGATIVE;
    if (akd_trace_load (trace_path, &t, &err) != 0) {
        if (err.code == AK_ENOTFOUND || (!o->from_trace && err.code == AK_EINVAL))
            fprintf (stderr, "akctl: discover: no GPU work observed: the program never initialised CUDA "
                             "(%s)\n", err.msg);
        else
            fprintf (stderr, "akctl: discover: %s\n", err.msg);
        return o->from_trace && err.code == AK_EINVAL ? AKCTL_EXIT_USAGE : AKCTL_EXIT_NEGATIVE;
    }
    if (t->error) {
        if (strcmp (t->error_code, "cupti_busy") == 0)
            fprintf (stderr, "akctl: discover: CUPTI is taken by another tool: %s\n", t->error);
        else
            fprintf (stderr, "akctl: discover: the injection could not start CUPTI: %s\n", t->error);
        goto done;
    }
    akd_attribute (t, &a, &err);
    if (a->nkernels == 0) {
        fprintf (stderr, "akctl: discover: no GPU work observed: no kernel in the window (%zu kernel%s outside "
                 "it%s%s)\n", a->outside, a->outside == 1 ? "" : "s",
                 a->untimed ? ", and records without timestamps" : "",
                 t->step_range && *t->step_range && a->steps <= 1 && !t->window_opened
                 ? "; the step range never opened the window: is the range name right?" : "");
        goto done;
    }
    if (a->overlap > AKD_MAX_CONCURRENT_KERNELS) {
        fprintf (stderr, "akctl: discover: the kernel records' times cannot be true: on device %u the %zu kernels "
                 "kept add up to %.0f times the time in which any of them ran, and a GPU runs at most %d at once "
                 "(CUPTI's records; docs/discover.md, \"Kernel records that cannot be true\"); nothing written "
                 "from them (the trace: %s)\n", a->overlap_dev, a->nkernels, a->overlap,
                 AKD_MAX_CONCURRENT_KERNELS, trace_path);
        goto done;
    }
    h = akd_hotspots_build (a);
    if (o->device_class)
        cls = ak_strdup (o->device_class);
    else
    if (!(cls = akd_device_class (t, &err)) && h->nworkloads) {
        fprintf (stderr, "akctl: discover: %s: give the batch's target with --class NAME "
                 "(as `akctl workers` lists it)\n", err.msg);
        goto done;
    }
    catalog = akctl_catalog_dir ();
    if (!catalog && h->nworkloads) {
        fprintf (stderr, "akctl: discover: the operator catalog (kernels/) is not found: set $AK_SOURCE_DIR\n");
        goto done;
    }
    if (akd_hotspots_write (h, t, o->out, cls, catalog ? catalog : "", &err) != 0) {
        fprintf (stderr, "akctl: discover: %s\n", err.msg);
        goto done;
    }
    s_summary (h, o->out, cls ? cls : "?");
    if (t->truncated_at)
        fprintf (stderr, "akctl: discover: %s: offset %zu: the file ends inside a record (a write cut off); "
                 "read up to it\n", trace_path, t->truncated_at);
    if (akd_trace_partial (t))
        fprintf (stderr, "akctl: discover: the trace is partial (%s): the figures cover what was recorded\n",
                 t->signal ? "the program was killed by a signal"
                 : !t->ended ? "the program did not exit normally"
                 : t->dropped ? "records were dropped (CUPTI's, or a thread's full buffer)" : "the file is cut");
    if (a->no_launch)
        fprintf (stderr, "akctl: discover: %zu kernel%s without a recorded launch (listed as \"[no range]\")\n",
                 a->no_launch, a->no_launch == 1 ? "" : "s");
    if (a->untimed)
        fprintf (stderr, "akctl: discover: %zu kernel record%s without timestamps (CUPTI's 0) left "
                 "out\n", a->untimed, a->untimed == 1 ? "" : "s");
    code = program_failed ? AKCTL_EXIT_NEGATIVE : AKCTL_EXIT_OK;
done:
    free (cls);
    free (catalog);
    akd_hotspots_destroy (&h);
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
    return code;
}

/*  --dump-trace: the trace at path on stdout as JSON lines; 2 when it is
    not a trace (or a garbled one, the offset named). */
static int s_dump (const char *path)
{
    ak_err_t err = { 0 };
    akd_trace_t *t = NULL;
    if (akd_trace_load (path, &t, &err) != 0) {
        fprintf (stderr, "akctl: discover: %s\n", err.msg);
        return err.code == AK_EINVAL ? AKCTL_EXIT_USAGE : AKCTL_EXIT_NEGATIVE;
    }
    int rc = akd_trace_write_jsonl (t, stdout, &err);
    if (t->truncated_at)
        fprintf (stderr, "akctl: discover: %s: offset %zu: the file ends inside a record (a write cut off); "
                 "read up to it\n", path, t->truncated_at);
    akd_trace_destroy (&t);
    if (rc || fflush (stdout) != 0) {
        fprintf (stderr, "akctl: discover: %s\n", rc ? err.msg : "writing stdout failed");
        return AKCTL_EXIT_NEGATIVE;
    }
    return AKCTL_EXIT_OK;
}

static int s_discover (int argc, char **argv)
{
    s_opts_t o;
    memset (&o, 0, sizeof o);
    o.sample = 1;
    bool steps_given = false, warmup_given = false, sample_given = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp (a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (strcmp (a, "-h") == 0 || strcmp (a, "--help") == 0) {
            printf ("usage: akctl discover --out DIR [OPTIONS] -- CMD [ARGS...]\n"
                    "       akctl discover --from-trace FILE --out DIR\n"
                    "       akctl discover --dump-trace FILE\n\n");
            printf (akctl_discover_help, akd_map_table_text);
            return AKCTL_EXIT_OK;
        }
        const char *eq = strchr (a, '=');
        char name[32];
        size_t nlen = eq ? (size_t) (eq - a) : strlen (a);
        if (nlen >= sizeof name)
            return s_bad ("unknown option '%s'", a);
        memcpy (name, a, nlen);
        name[nlen] = '\0';
        static const char *const valued[] = { "--out", "--steps", "--warmup-steps", "--step-range", "--skip-ms",
                                              "--sample", "--class", "--from-trace", "--dump-trace", NULL };
        bool known = false;
        for (int k = 0; valued[k]; k++)
            known = known || strcmp (name, valued[k]) == 0;
        if (!known)
            return s_bad ("unknown option '%s'", a);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v || !*v)
            return s_bad ("%s needs a value", name);
        int rc = 0;
        if (strcmp (name, "--out") == 0)
            o.out = v;
        else
        if (strcmp (name, "--step-range") == 0)
            o.step_range = v;
        else
        if (strcmp (name, "--class") == 0)
            o.device_class = v;
        else
        if (strcmp (name, "--from-trace") == 0)
            o.from_trace = v;
        else
        if (strcmp (name, "--dump-trace") == 0)
            o.dump_trace = v;
        else
        if (strcmp (name, "--steps") == 0) {
            rc = s_count (name, v, &o.steps);
            steps_given = true;
        }
        else
        if (strcmp (name, "--warmup-steps") == 0) {
            rc = s_count (name, v, &o.warmup);
            warmup_given = true;
        }
        else
        if (strcmp (name, "--sample") == 0) {
            rc = s_count (name, v, &o.sample);
            if (!rc && o.sample < 1)
                return s_bad ("--sample: trace 1 step in K, K at least 1 (got '%s')", v);
            sample_given = true;
        }
        else
            rc = s_count (name, v, &o.skip_ms);
        if (rc)
            return rc;
    }
    o.cmd = argv + i;
    o.ncmd = argc - i;
    if (o.dump_trace)
        return s_dump (o.dump_trace);
    if (!o.out)
        return s_bad ("--out DIR is required%s", "");
    if (o.from_trace && o.ncmd > 0)
        return s_bad ("--from-trace analyses a trace: no command with it (got '%s')", o.cmd[0]);
    if (!o.from_trace && o.ncmd == 0)
        return s_bad ("no command to run: akctl discover --out DIR -- CMD [ARGS...]%s", "");
    if ((steps_given || warmup_given || sample_given) && !o.step_range)
        return s_bad ("%s counts steps: give --step-range NAME too",
                      steps_given ? "--steps" : warmup_given ? "--warmup-steps" : "--sample");
    if (o.step_range && strlen (o.step_range) > 200)
        return s_bad ("--step-range: a range name of at most 200 characters%s", "");

    if (o.from_trace)
        return s_analyse (&o, o.from_trace, false);

    char *exe = s_which (o.cmd[0]);
    if (!exe) {
        fprintf (stderr, "akctl: discover: %s: command not found\n", o.cmd[0]);
        return AKCTL_EXIT_USAGE;
    }
    free (exe);
    char *lib = s_library ();
    if (!lib) {
        fprintf (stderr, "akctl: discover: libakdiscover.so not found beside akctl (lib/, ../lib/akfleet/) or in $AKD_LIBRARY: "
                         "this akctl was built without the CUDA headers\n");
        return AKCTL_EXIT_NEGATIVE;
    }
    const char *other = getenv ("CUDA_INJECTION64_PATH");
    if (other && *other && strcmp (other, lib) != 0) {
        fprintf (stderr, "akctl: discover: CUDA_INJECTION64_PATH is set (%s): another tool injects into CUDA; "
                         "unset it to run discover\n", other);
        free (lib);
        return AKCTL_EXIT_NEGATIVE;
    }
    ak_err_t err = { 0 };
    if (ak_mkdir_p (o.out, 0755, &err) != 0) {
        fprintf (stderr, "akctl: discover: %s\n", err.msg);
        free (lib);
        return AKCTL_EXIT_USAGE;
    }
    char *trace = ak_path_join (o.out, "trace.akd");
    unlink (trace);
    int status = 0;
    int code = AKCTL_EXIT_NEGATIVE;
    if (s_run (&o, lib, trace, &status) == 0) {
        bool failed = !(WIFEXITED (status) && WEXITSTATUS (status) == 0);
        if (WIFEXITED (status) && WEXITSTATUS (status) == 127 && access (trace, F_OK) != 0)
            code = AKCTL_EXIT_USAGE;                       /* exec failed: said above */
        else {
            if (WIFSIGNALED (status))
                fprintf (stderr, "akctl: discover: %s was killed by signal %d (%s); analysing what it recorded\n",
                         o.cmd[0], WTERMSIG (status), strsignal (WTERMSIG (status)));
            else
            if (failed)
                fprintf (stderr, "akctl: discover: %s exited with status %d; analysing what it recorded\n",
                         o.cmd[0], WEXITSTATUS (status));
            code = s_analyse (&o, trace, failed);
        }
    }
    free (trace);
    free (lib);
    return code;
}

int akctl_discover_verb (const akctl_opts_t *opts)
{
    if (opts->argv)
        return s_discover (opts->argc, opts->argv);
    fprintf (stderr, "akctl: discover takes options of its own: write it as `akctl discover --out DIR ... -- CMD`, "
                     "with no global option before it\n");
    return AKCTL_EXIT_USAGE;
}
