/*  worker/nvrtc_run.c: one NVRTC compile in the confined helper ak-nvrtc
    (nvrtc_run.h). */
#include "nvrtc_run.h"
#include "child.h"
#include "datadir.h"
#include "sandbox.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AK_CUDA_ROOT_DIR
#define AK_CUDA_ROOT_DIR "/usr/local/cuda"
#endif

extern char **environ;

/* ============================================================ the helper */

static pthread_once_t s_helper_once = PTHREAD_ONCE_INIT;
static char *s_helper;
static char s_helper_why[1024];

static void s_helper_init (void)
{
    char *bindir = ak_datadir_bindir ();
    const char *env = getenv ("AK_BIN_DIR");
    char *tried[2] = { bindir ? ak_path_join (bindir, AK_NVRTC_HELPER) : NULL,
                       env && env[0] == '/' ? ak_path_join (env, AK_NVRTC_HELPER) : NULL };
    for (int i = 0; i < 2 && !s_helper; i++)
        if (tried[i] && access (tried[i], X_OK) == 0)
            s_helper = ak_strdup (tried[i]);
    if (!s_helper)
        snprintf (s_helper_why, sizeof s_helper_why, "%s not found in %s%s%s", AK_NVRTC_HELPER,
                  tried[0] ? tried[0] : "(this program's folder is unknown)", tried[1] ? " or " : "",
                  tried[1] ? tried[1] : "");
    free (tried[0]);
    free (tried[1]);
    free (bindir);
}

const char *ak_nvrtc_helper (const char **why)
{
    pthread_once (&s_helper_once, s_helper_init);
    if (why)
        *why = s_helper_why;
    return s_helper;
}

/* ============================================================ the limits */

static uint64_t s_limit_ms (uint64_t timeout_ms)
{
    return timeout_ms ? timeout_ms : AK_NVRTC_COMPILE_MS;
}

/*  The helper's rlimits for a wall limit of limit_ms: CPU past it (NVRTC
    is single-threaded, so the wall limit comes first; the CPU limit stops
    a helper whose parent stopped watching), 16 GiB of address space
    (none in ASan builds: their shadow needs terabytes). */
static void s_limits (uint64_t limit_ms, uint64_t cpu_s, ak_sandbox_limits_t *lim)
{
    memset (lim, 0, sizeof *lim);
    lim->cpu_s = cpu_s ? cpu_s : limit_ms / 1000 + 10;
    lim->as_bytes = ak_sandbox_asan_build () ? 0 : (uint64_t) 16 << 30;
    lim->fsize_bytes = 512u << 20;
    lim->nofile = 1024;
}

void ak_nvrtc_describe (uint64_t limit_ms, char *buf, size_t len)
{
    ak_sandbox_limits_t lim;
    s_limits (s_limit_ms (limit_ms), 0, &lim);
    char as[48], ll[240];
    if (lim.as_bytes)
        snprintf (as, sizeof as, "%llu MiB", (unsigned long long) (lim.as_bytes >> 20));
    else
        snprintf (as, sizeof as, "none (ASan build)");
    const char *why = NULL;
    int abi = ak_sandbox_landlock_abi (&why);
    if (abi > 0)
        snprintf (ll, sizeof ll, "landlock abi %d (read: system libraries, the CUDA toolkit, NVRTC's folder; "
                  "write: the build's scratch folder)", abi);
    else
        snprintf (ll, sizeof ll, "NO landlock (%s): files not confined", why && *why ? why : "unavailable");
    snprintf (buf, len, "%s (exec'd): rlimits (cpu %llu s, address space %s, file size %llu KiB, "
              "%llu files, no core), no_new_privs, own process group, killed with the worker, %s; "
              "no seccomp (NVRTC runs threads)", AK_NVRTC_HELPER, (unsigned long long) lim.cpu_s, as,
              (unsigned long long) (lim.fsize_bytes >> 10), (unsigned long long) lim.nofile, ll);
}

/* ============================================================== the run */

/*  A growing argv. */
typedef struct {
    char **v;
    size_t n, cap;
} s_argv_t;

static void s_arg (s_argv_t *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->v = ak_realloc (a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = ak_strdup (s);
    a->v[a->n] = NULL;
}

static void s_arg_u64 (s_argv_t *a, const char *flag, uint64_t v)
{
    char num[24];
    snprintf (num, sizeof num, "%" PRIu64, v);
    s_arg (a, flag);
    s_arg (a, num);
}

static void s_argv_free (s_argv_t *a)
{
    for (size_t i = 0; i < a->n; i++)
        free (a->v[i]);
    free (a->v);
}

/*  The helper's command line for job (nvrtc_run.h). */
static void s_build_argv (const ak_nvrtc_job_t *job, const char *helper, const ak_sandbox_limits_t *lim,
                          s_argv_t *a)
{
    s_arg (a, helper);
    s_arg (a, "--nvrtc");
    s_arg (a, job->nvrtc_path);
    s_arg (a, "--out");
    s_arg (a, job->cubin_path);
    s_arg_u64 (a, "--cpu", lim->cpu_s);
    if (lim->as_bytes)
        s_arg_u64 (a, "--as", lim->as_bytes);
    s_arg_u64 (a, "--fsize", lim->fsize_bytes);
    s_arg_u64 (a, "--nofile", lim->nofile);
    if (ak_sandbox_landlock_abi (NULL) <= 0)
        s_arg (a, "--no-landlock");
    else {
        /* NVRTC's folder: it loads its builtins library from there while
           compiling. */
        char *nvdir = ak_dirname (job->nvrtc_path);
        const char *home = getenv ("CUDA_HOME");
        const char *ro[] = { "/usr", "/lib", "/lib64", "/lib32", "/opt", "/etc/ld.so.cache",
                             "/etc/ld.so.conf", "/etc/ld.so.conf.d", AK_CUDA_ROOT_DIR, nvdir,
                             home && home[0] == '/' ? home : NULL };
        for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++)
            if (ro[i] && ro[i][0] == '/') {
                s_arg (a, "--ro");
                s_arg (a, ro[i]);
            }
        for (size_t i = 0; job->read_dirs && job->read_dirs[i]; i++)
            if (job->read_dirs[i][0] == '/') {
                s_arg (a, "--ro");
                s_arg (a, job->read_dirs[i]);
            }
        s_arg (a, "--rw");
        s_arg (a, job->scratch_dir);
        s_arg (a, "--rw");
        s_arg (a, "/dev/null");
        free (nvdir);
    }
    s_arg (a, "--");
    for (int i = 0; i < job->nopts; i++)
        s_arg (a, job->opts[i]);
}

/*  A memfd holding text, at offset 0: the helper's stdin, which nothing
    has to write while the helper runs.  -1 with err set. */
static int s_text_fd (const char *text, size_t len, ak_err_t *err)
{
    int fd = memfd_create ("ak-nvrtc-text", MFD_CLOEXEC);
    if (fd < 0) {
        ak_err_set (err, AK_EIO, "compile: memfd_create: %s", strerror (errno));
        return -1;
    }
    if (ak_write_all (fd, text, len) != 0 || lseek (fd, 0, SEEK_SET) != 0) {
        ak_err_set (err, AK_EIO, "compile: writing the program text to its memfd: %s", strerror (errno));
        close (fd);
        return -1;
    }
    return fd;
}

/*  In the forked child, before the exec: system calls only (the daemon
    has threads, and whatever lock one of them held at the fork stays held
    here).  Never returns. */
static void s_child (const char *helper, char *const argv[], int in, int out, pid_t parent)
{
    static const int dfl[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGXCPU, SIGXFSZ };
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigset_t none;
    sigemptyset (&none);
    setpgid (0, 0);
    /* SIGKILL when the forking thread ends: it waits for this process on
       every path, so that happens only when the daemon dies.  A daemon that
       died before the prctl is caught by the getppid check. */
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != parent)
        _exit (AK_NVRTC_EXEC);
    for (size_t i = 0; i < sizeof dfl / sizeof dfl[0]; i++)
        sigaction (dfl[i], &sa, NULL);
    sigprocmask (SIG_SETMASK, &none, NULL);
    if (dup2 (in, 0) < 0 || dup2 (out, 1) < 0 || dup2 (out, 2) < 0)
        _exit (AK_NVRTC_EXEC);
    /* Nothing of the daemon's but the three: not its sockets, not the
       output pipes of sibling compiles (those would keep a sibling's
       reader waiting for this process too). */
    close_range (3, ~0u, 0);
    execve (helper, argv, environ);
    static const char msg[] = AK_NVRTC_ERR_MARK "exec " AK_NVRTC_HELPER ": failed";
    ssize_t w = write (1, msg, sizeof msg - 1);
    (void) w;
    _exit (AK_NVRTC_EXEC);
}

/*  err for a helper that ended with status (and wrote the marked message
    msg, may be ""). */
static int s_status_error (const ak_nvrtc_job_t *job, int status, const ak_sandbox_limits_t *lim,
                           const char *msg, ak_err_t *err)
{
    const char *name = job->name && job->name[0] ? job->name : "kernel";
    if (WIFSIGNALED (status)) {
        int sig = WTERMSIG (status);
        if (sig == SIGXCPU)
            return ak_err_set (err, AK_ETIMEOUT, "compile of %s: NVRTC stopped at its CPU limit of %" PRIu64
                               " s (SIGXCPU)", name, lim->cpu_s);
        if (sig == SIGKILL)
            return ak_err_set (err, AK_ETIMEOUT, "compile of %s: NVRTC killed (SIGKILL: past its CPU limit of %"
                               PRIu64 " s, or by the system)", name, lim->cpu_s);
        if (sig == SIGXFSZ)
            return ak_err_set (err, AK_ECOMPILE, "compile of %s: NVRTC wrote past its file size limit of %"
                               PRIu64 " MiB (SIGXFSZ)", name, lim->fsize_bytes >> 20);
        return ak_err_set (err, AK_ECOMPILE, "compile of %s: NVRTC killed by signal %d (%s)", name, sig,
                           strsignal (sig));
    }
    if (!WIFEXITED (status))
        return ak_err_set (err, AK_EINTERNAL, "compile of %s: NVRTC helper status %d", name, status);
    switch (WEXITSTATUS (status)) {
        case AK_NVRTC_OK:
            return 0;
        case AK_NVRTC_COMPILE:
            return ak_err_set (err, AK_ECOMPILE, "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION");
        case AK_NVRTC_FAILED:
            return ak_err_set (err, AK_ECOMPILE, "compile of %s: %s", name, msg[0] ? msg : "NVRTC failed");
        case AK_NVRTC_NOMEM:
            return ak_err_set (err, AK_ENOMEM, "compile of %s: %s", name, msg[0] ? msg : "NVRTC out of memory");
        case AK_NVRTC_IO:
            return ak_err_set (err, AK_EIO, "compile of %s: %s", name, msg[0] ? msg : "writing the CUBIN failed");
        case AK_NVRTC_SANDBOX:
            return ak_err_set (err, AK_EIO, "compile of %s: the NVRTC helper could not confine itself: %s",
                               name, msg[0] ? msg : "(no message)");
        case AK_NVRTC_USAGE:
            return ak_err_set (err, AK_EIO, "compile of %s: the NVRTC helper refused to start: %s", name,
                               msg[0] ? msg : "(no message)");
        case AK_NVRTC_EXEC:
            return ak_err_set (err, AK_EUNAVAIL, "compile of %s: could not run %s: %s", name,
                               ak_nvrtc_helper (NULL), msg[0] ? msg : "exec failed");
        default:
            return ak_err_set (err, AK_EINTERNAL, "compile of %s: the NVRTC helper exited with %d", name,
                               WEXITSTATUS (status));
    }
}

int ak_nvrtc_run (const ak_nvrtc_job_t *job, char **log_p, ak_err_t *err)
{
    int rc = 0;
    int pfd[2] = { -1, -1 }, in = -1;
    pid_t pid = -1;
    s_argv_t argv = { 0 };
    ak_child_result_t out = { 0 };
    const char *why = NULL;
    const char *helper = ak_nvrtc_helper (&why);
    const char *name = job->name && job->name[0] ? job->name : "kernel";
    uint64_t limit = s_limit_ms (job->timeout_ms);
    ak_sandbox_limits_t lim;

    *log_p = NULL;
    if (!helper) {
        rc = ak_err_set (err, AK_EUNAVAIL, "compile of %s: NVRTC runs only in its confined helper: %s "
                         "(install %s beside akworker)", name, why, AK_NVRTC_HELPER);
        goto done;
    }
    if (!job->nvrtc_path || job->nvrtc_path[0] != '/' || !job->scratch_dir || !job->cubin_path) {
        rc = ak_err_set (err, AK_EINVAL, "compile of %s: no NVRTC library path, scratch folder or CUBIN path",
                         name);
        goto done;
    }
    s_limits (limit, job->cpu_s, &lim);
    s_build_argv (job, helper, &lim, &argv);
    if ((in = s_text_fd (job->text, job->text_len, err)) < 0) {
        rc = err->code;
        goto done;
    }
    if (pipe2 (pfd, O_CLOEXEC) != 0) {
        rc = ak_err_set (err, AK_EIO, "compile: pipe2: %s", strerror (errno));
        goto done;
    }
    /* Everything the child needs is made: after the fork, system calls only. */
    pid_t parent = getpid ();
    pid = fork ();
    if (pid < 0) {
        rc = ak_err_set (err, AK_EIO, "compile: fork: %s", strerror (errno));
        goto done;
    }
    if (pid == 0)
        s_child (helper, argv.v, in, pfd[1], parent);
    setpgid (pid, pid);                 /* whichever of the two runs first */
    close (pfd[1]);
    pfd[1] = -1;
    close (in);
    in = -1;

    ak_child_wait_t wait = { .timeout_ms = limit, .cancel = job->cancel,
                             .max_output = AK_NVRTC_LOG_MAX, .group = true };
    rc = ak_child_collect (pid, pfd[0], &wait, &out, err);
    pid = -1;                           /* reaped, whatever happened */
    if (rc)
        goto done;
    if (out.timed_out) {
        rc = ak_err_set (err, AK_ETIMEOUT, "compile of %s: NVRTC killed at the compile time limit of %" PRIu64
                         " ms", name, limit);
        goto done;
    }
    if (out.cancelled) {
        rc = ak_err_set (err, AK_ETIMEOUT, "compile of %s: NVRTC cancelled", name);
        goto done;
    }
    /* Split the log from a marked failure message. */
    char *mark = strstr (out.output, AK_NVRTC_ERR_MARK);
    char msg[600] = "";
    if (mark) {
        snprintf (msg, sizeof msg, "%s", mark + strlen (AK_NVRTC_ERR_MARK));
        *mark = '\0';
        out.len = (size_t) (mark - out.output);
    }
    rc = s_status_error (job, out.status, &lim, msg, err);

done:
    if (pid > 0) {
        kill (-pid, SIGKILL);
        kill (pid, SIGKILL);
        while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (in >= 0)
        close (in);
    if (pfd[0] >= 0)
        close (pfd[0]);
    if (pfd[1] >= 0)
        close (pfd[1]);
    s_argv_free (&argv);
    char *log = out.output ? out.output : ak_strdup ("");
    if (out.truncated) {
        char *t = ak_sprintf ("%s\n[NVRTC log truncated at %u bytes]", log, AK_NVRTC_LOG_MAX);
        free (log);
        log = t;
    }
    /* A helper stopped by a limit or a signal leaves no log of its own:
       the error says what happened, where a log reader looks too. */
    if (rc && rc != AK_ECOMPILE && !log[0]) {
        free (log);
        log = ak_strdup (err->msg);
    }
    else if (rc == AK_ECOMPILE && strncmp (err->msg, "compile of ", 11) == 0) {
        char *t = ak_sprintf ("%s%s%s", log, log[0] ? "\n" : "", err->msg);
        free (log);
        log = t;
    }
    *log_p = log;
    return rc;
}
