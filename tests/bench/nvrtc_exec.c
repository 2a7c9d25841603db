/*  tests/bench/nvrtc_exec.c: what running NVRTC in the exec'd helper
    ak-nvrtc costs per compile, against the fork without exec it replaced.

        bench_nvrtc_exec [N [FILE.cu]]

    Compiles FILE (default: a small kernel) N times (default 10) for
    sm_90 three ways: in this process; in a child forked without exec (the
    old path; safe here only because this program has one thread); through
    ak_nvrtc_run (fork, exec ak-nvrtc, confinement, dlopen NVRTC).  Prints
    the median wall time of each, the children's CPU time (user + system,
    which load does not inflate) and the helper's extra cost, and compares
    the three CUBINs byte for byte.  Needs NVRTC and ak-nvrtc ($AK_BIN_DIR
    or this program's folder), no GPU.  Not a test: it reports; exit
    status 0 when it ran and the CUBINs agree, 1 otherwise, 2 without
    NVRTC. */
#include "worker/cuda_api.h"
#include "worker/nvrtc_run.h"
#include "clock.h"
#include "util.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if AK_HAVE_CUDA

static const char *const s_opts[] = { "--gpu-architecture=sm_90", "--std=c++17" };

static const char s_default[] =
    "extern \"C\" __global__ void k (const float *x, float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    float s = 0.f;\n"
    "    for (int j = 0; j < 16 && i + j < n; j++)\n"
    "        s += x[i + j] * x[i + j];\n"
    "    if (i < n)\n"
    "        y[i] = s;\n"
    "}\n";

/*  In-process NVRTC on text; the CUBIN into *cubin_p (caller frees). */
static int s_compile (const ak_cuda_nvrtc_t *nv, const char *text, char **cubin_p, size_t *len_p)
{
    nvrtcProgram prog = NULL;
    if (nv->nvrtcCreateProgram (&prog, text, "kernel.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return -1;
    int rc = -1;
    if (nv->nvrtcCompileProgram (prog, 2, s_opts) == NVRTC_SUCCESS
        && nv->nvrtcGetCUBINSize (prog, len_p) == NVRTC_SUCCESS) {
        *cubin_p = ak_malloc (*len_p ? *len_p : 1);
        rc = nv->nvrtcGetCUBIN (prog, *cubin_p) == NVRTC_SUCCESS ? 0 : -1;
    }
    nv->nvrtcDestroyProgram (&prog);
    return rc;
}

/*  CPU seconds (user + system) of the reaped children so far, in ms: on a
    loaded box the figure that wall time hides. */
static double s_children_cpu_ms (void)
{
    struct rusage ru;
    getrusage (RUSAGE_CHILDREN, &ru);
    return (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3
         + (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static int s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double s_median (double *v, int n)
{
    qsort (v, (size_t) n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool s_same (const char *what, const char *a, size_t alen, const char *b, size_t blen)
{
    bool same = alen == blen && memcmp (a, b, alen) == 0;
    printf ("CUBIN %-28s %s (%zu and %zu bytes)\n", what, same ? "identical" : "DIFFERENT", alen, blen);
    return same;
}

int main (int argc, char **argv)
{
    int n = argc > 1 ? atoi (argv[1]) : 10;
    if (n < 1 || n > 1000)
        n = 10;
    char *text = NULL;
    size_t tlen = 0;
    ak_err_t err = { 0 };
    if (argc > 2 && ak_file_read (argv[2], 16u << 20, &text, &tlen, &err) != 0) {
        fprintf (stderr, "bench_nvrtc_exec: %s\n", err.msg);
        return 1;
    }
    if (!text)
        text = ak_strdup (s_default);
    const ak_cuda_nvrtc_t *nv = NULL;
    if (ak_cuda_nvrtc (&nv, &err) != 0) {
        fprintf (stderr, "bench_nvrtc_exec: %s\n", err.msg);
        return 2;
    }
    Dl_info info;
    void *sym = NULL;
    memcpy (&sym, &nv->nvrtcVersion, sizeof sym);
    if (!dladdr (sym, &info) || !info.dli_fname || info.dli_fname[0] != '/') {
        fprintf (stderr, "bench_nvrtc_exec: where NVRTC was loaded from is unknown\n");
        return 1;
    }
    char nvpath[4096];
    snprintf (nvpath, sizeof nvpath, "%s", info.dli_fname);
    char tmpl[] = "/tmp/ak-bench-nvrtc-XXXXXX";
    char *dir = mkdtemp (tmpl);
    if (!dir)
        return 1;
    double *t_in = ak_calloc ((size_t) n, sizeof *t_in), *t_fork = ak_calloc ((size_t) n, sizeof *t_fork),
           *t_exec = ak_calloc ((size_t) n, sizeof *t_exec), *u_fork = ak_calloc ((size_t) n, sizeof *u_fork),
           *u_exec = ak_calloc ((size_t) n, sizeof *u_exec);
    char *c_in = NULL, *c_fork = NULL, *c_exec = NULL;
    size_t l_in = 0, l_fork = 0, l_exec = 0;
    int bad = 0;

    for (int i = 0; i < n && !bad; i++) {
        /* in this process */
        free (c_in);
        c_in = NULL;
        uint64_t t0 = ak_clock_mono_ns ();
        bad |= s_compile (nv, text, &c_in, &l_in) != 0;
        t_in[i] = (double) (ak_clock_mono_ns () - t0) / 1e6;

        /* forked without exec: the child compiles, writes the CUBIN, _exits */
        char *fpath = ak_sprintf ("%s/fork-%d.cubin", dir, i);
        double u0 = s_children_cpu_ms ();
        t0 = ak_clock_mono_ns ();
        pid_t pid = fork ();
        if (pid == 0) {
            char *c = NULL;
            size_t l = 0;
            if (s_compile (nv, text, &c, &l) != 0)
                _exit (1);
            int fd = open (fpath, O_WRONLY | O_CREAT | O_EXCL, 0644);
            _exit (fd >= 0 && ak_write_all (fd, c, l) == 0 && close (fd) == 0 ? 0 : 1);
        }
        int status = 0;
        bad |= pid < 0 || waitpid (pid, &status, 0) != pid || !WIFEXITED (status) || WEXITSTATUS (status);
        t_fork[i] = (double) (ak_clock_mono_ns () - t0) / 1e6;
        u_fork[i] = s_children_cpu_ms () - u0;
        free (c_fork);
        c_fork = NULL;
        bad |= ak_file_read (fpath, 64u << 20, &c_fork, &l_fork, &err) != 0;
        free (fpath);

        /* the helper: fork, exec, confinement, dlopen, compile */
        char *scratch = ak_sprintf ("%s/exec-%d", dir, i);
        char *epath = ak_sprintf ("%s/kernel.cubin", scratch);
        char *log = NULL;
        mkdir (scratch, 0700);
        ak_nvrtc_job_t job = { .name = "bench", .nvrtc_path = nvpath, .text = text, .text_len = strlen (text),
                               .opts = s_opts, .nopts = 2, .scratch_dir = scratch, .cubin_path = epath,
                               .timeout_ms = 120000 };
        u0 = s_children_cpu_ms ();
        t0 = ak_clock_mono_ns ();
        if (ak_nvrtc_run (&job, &log, &err) != 0) {
            fprintf (stderr, "bench_nvrtc_exec: %s\n%s\n", err.msg, log);
            bad = 1;
        }
        t_exec[i] = (double) (ak_clock_mono_ns () - t0) / 1e6;
        u_exec[i] = s_children_cpu_ms () - u0;
        free (c_exec);
        c_exec = NULL;
        bad |= !bad && ak_file_read (epath, 64u << 20, &c_exec, &l_exec, &err) != 0;
        free (log);
        free (epath);
        free (scratch);
    }
    char *rm = ak_sprintf ("rm -rf '%s'", dir);
    if (system (rm) != 0)
        fprintf (stderr, "bench_nvrtc_exec: could not remove %s\n", dir);
    free (rm);
    if (!bad) {
        double in = s_median (t_in, n), fk = s_median (t_fork, n), ex = s_median (t_exec, n);
        double uf = s_median (u_fork, n), ue = s_median (u_exec, n);
        printf ("NVRTC %s, %d compiles of %zu bytes of CUDA C for sm_90 (medians, ms)\n",
                ak_cuda_nvrtc_version_text (), n, strlen (text));
        printf ("                          wall      child CPU\n");
        printf ("in this process          %8.1f\n", in);
        printf ("fork without exec (old)  %8.1f   %8.1f\n", fk, uf);
        printf ("exec ak-nvrtc (now)      %8.1f   %8.1f   (%+.1f ms wall, %+.1f ms CPU a compile)\n", ex, ue,
                ex - fk, ue - uf);
        bad |= !s_same ("in-process vs helper", c_in, l_in, c_exec, l_exec);
        bad |= !s_same ("fork vs helper", c_fork, l_fork, c_exec, l_exec);
    }
    free (c_in);
    free (c_fork);
    free (c_exec);
    free (t_in);
    free (t_fork);
    free (t_exec);
    free (u_fork);
    free (u_exec);
    free (text);
    return bad ? 1 : 0;
}

#else

int main (void)
{
    fprintf (stderr, "bench_nvrtc_exec: built without the CUDA backend\n");
    return 2;
}

#endif
