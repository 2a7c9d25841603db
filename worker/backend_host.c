/*  worker/backend_host.c: the host backend.

    Kernels are C sources built with the system compiler (`cc`) into shared
    objects and run on the CPU, so the whole pipeline (compile cache,
    executors, gates, timing) works on a machine without a GPU.

    Daemon side: probe describes the CPU as one device; compile writes the
    prelude (kernels/ak_kernel.h, embedded) plus the source into a private
    build directory, runs cc there in its own process group, confined
    (sandbox.h: rlimits, no_new_privs, Landlock), under a time
    limit, and renames the result into cache_dir/<key>.so.  Executor side:
    dlopen + dlsym, malloc'ed buffers, a direct call, CLOCK_MONOTONIC.

    Never: run a compiler through a shell, trust a define name, or leave a
    half-written artifact where a reader could load it. */
#include "backend_host.h"
#include "cache.h"
#include "child.h"
#include "digest.h"
#include "log.h"
#include "sandbox.h"
#include "util.h"
#include "clock.h"
#include "ak_kernel.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
extern const char ak_prelude[];
extern const size_t ak_prelude_len;

#define AK_HOST_LOG_MAX        (64u * 1024)      /* compiler output kept */
#define AK_HOST_COMPILE_MS     60000u            /* when the request gives 0 */
#define AK_HOST_LLC_FALLBACK   (32u * 1024 * 1024)
#define AK_HOST_CFLAGS         "-O2 -fPIC -shared -std=gnu11 -Wall"

typedef void (ak_kernel_fn) (const ak_args_t *a);

struct ak_dev {
    uint32_t  index;
    uint8_t  *flush;             /* written over before a cold sample */
    size_t    flush_bytes;
    uint8_t   flush_value;
};

struct ak_kernel {
    void         *handle;
    ak_kernel_fn *fn;
};

/* ------------------------------------------------------------ host facts */

/*  Size of the last-level cache: /sys/.../index3/size ("32768K"), else
    32 MiB so that a cold sample still evicts a typical LLC. */
static size_t s_llc_bytes (void)
{
    char *text = NULL;
    size_t len = 0;
    size_t bytes = AK_HOST_LLC_FALLBACK;
    if (ak_file_read ("/sys/devices/system/cpu/cpu0/cache/index3/size", 64, &text, &len, NULL) == 0) {
        char *end = NULL;
        unsigned long long v = strtoull (text, &end, 10);
        if (end && end != text && v > 0) {
            if (*end == 'K' || *end == 'k')
                v *= 1024ull;
            else if (*end == 'M' || *end == 'm')
                v *= 1024ull * 1024;
            else if (*end == 'G' || *end == 'g')
                v *= 1024ull * 1024 * 1024;
            if (v >= 64 * 1024 && v <= (1ull << 34))
                bytes = (size_t) v;
        }
    }
    free (text);
    return bytes;
}

/*  Value of the first "key : value" line of /proc/cpuinfo, malloc'ed, or NULL. */
static char *s_cpuinfo (const char *key)
{
    char *text = NULL;
    size_t len = 0;
    char *value = NULL;
    if (ak_file_read ("/proc/cpuinfo", 4u << 20, &text, &len, NULL) != 0)
        return NULL;
    size_t klen = strlen (key);
    for (char *line = text; line && *line; ) {
        char *next = strchr (line, '\n');
        if (next)
            *next++ = '\0';
        if (strncmp (line, key, klen) == 0) {
            char *colon = strchr (line + klen, ':');
            if (colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t')
                    colon++;
                size_t n = strlen (colon);
                while (n > 0 && isspace ((unsigned char) colon[n - 1]))
                    colon[--n] = '\0';
                value = ak_strdup (colon);
                break;
            }
        }
        line = next;
    }
    free (text);
    return value;
}

static char *s_machine_id (void)
{
    char *text = NULL;
    size_t len = 0;
    if (ak_file_read ("/etc/machine-id", 256, &text, &len, NULL) != 0)
        return NULL;
    while (len > 0 && isspace ((unsigned char) text[len - 1]))
        text[--len] = '\0';
    if (len == 0) {
        free (text);
        return NULL;
    }
    return text;
}

/*  One device: the CPU.  slots is left 0 for the daemon to fill. */
static int s_probe (Ak__Device ***devices_p, size_t *n_p, ak_err_t *err)
{
    if (!devices_p || !n_p)
        return ak_err_set (err, AK_EINVAL, "host probe: no output");
    Ak__Device *d = ak_malloc (sizeof *d);
    ak__device__init (d);
    char *model = s_cpuinfo ("model name");
    char *mhz = s_cpuinfo ("cpu MHz");
    char *mid = s_machine_id ();
    d->index = 0;
    d->backend = ak_strdup ("host");
    d->device_class = ak_strdup ("host");
    d->name = ak_strdup (model ? model : "unknown cpu");
    d->uuid = mid ? ak_sprintf ("host-%s", mid) : ak_strdup ("");
    d->driver_version = ak_strdup ("");
    d->nvrtc_version = ak_strdup ("");
    d->cupti_version = ak_strdup ("");
    long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
    d->sm_count = ncpu > 0 ? (uint32_t) ncpu : 1;
    long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);
    d->mem_bytes = (pages > 0 && page > 0) ? (uint64_t) pages * (uint64_t) page : 0;
    d->l2_bytes = s_llc_bytes ();
    double f = 0;
    if (mhz && ak_parse_double (mhz, &f) == 0 && f > 0 && f < 1e6)
        d->clock_khz = (uint32_t) (f * 1000.0);
    free (model);
    free (mhz);
    free (mid);
    Ak__Device **arr = ak_malloc (sizeof *arr);
    arr[0] = d;
    *devices_p = arr;
    *n_p = 1;
    return 0;
}

/* ---------------------------------------------------------- the compiler */

/*  The child's output as the compile log, marked when it was cut. */
static char *s_log_take (ak_child_result_t *res)
{
    char *s = res->output;
    if (res->truncated) {
        s = ak_sprintf ("%s\n[compiler output truncated at %u bytes]", res->output, AK_HOST_LOG_MAX);
        free (res->output);
    }
    res->output = NULL;
    return s;
}

/*  argv[0] looked up in PATH, as execvp would, but before any fork (a
    child of a threaded daemon may only make system calls).  Caller frees;
    NULL when not found. */
static char *s_which (const char *name)
{
    if (strchr (name, '/'))
        return ak_strdup (name);
    const char *path = getenv ("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; ; ) {
        size_t n = strcspn (p, ":");
        char *cand = ak_sprintf ("%.*s/%s", (int) n, n ? p : ".", name);
        if (access (cand, X_OK) == 0)
            return cand;
        free (cand);
        if (!p[n])
            return NULL;
        p += n + 1;
    }
}

/*  The environment of a compiler child: this process's, with TMPDIR set
    to its build directory (tmpdir NULL: unchanged).  Caller frees the
    array and the one string it made (*made_p). */
static char **s_child_env (const char *tmpdir, char **made_p)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = ak_calloc (n + 2, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!tmpdir || strncmp (environ[i], "TMPDIR=", 7) != 0)
            envp[k++] = environ[i];
    *made_p = tmpdir ? ak_sprintf ("TMPDIR=%s", tmpdir) : NULL;
    if (*made_p)
        envp[k++] = *made_p;
    envp[k] = NULL;
    return envp;
}

/*  Runs argv (argv[0] looked up in PATH) in its own process group with
    stdin from /dev/null and stdout+stderr captured into *log_p (caller
    frees), confined (sandbox.h): rlimits, no_new_privs and, with a build
    directory (builddir, also its TMPDIR) where the kernel has Landlock,
    reads of the system's programs, libraries and headers only and writes
    in builddir only.  Past timeout_ms, or when *cancel turns non-zero, the
    whole group is killed and AK_ETIMEOUT returned.  *status_p gets the
    waitpid status. */
static int s_run_captured (char *const argv[], const char *builddir, uint32_t timeout_ms,
                           const atomic_int *cancel, int *status_p, char **log_p, ak_err_t *err)
{
    static const char *const ro[] = { "/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache",
                                      "/etc/ld.so.conf", "/etc/ld.so.conf.d", NULL };
    int rc = 0;
    int pipefd[2] = { -1, -1 }, null = -1, ruleset = -1;
    pid_t pid = -1;
    char *exe = NULL, *made = NULL;
    char **envp = NULL;
    uint64_t limit = timeout_ms ? timeout_ms : AK_HOST_COMPILE_MS;
    ak_sandbox_limits_t lim = { .cpu_s = limit / 1000 + 10, .fsize_bytes = 512u << 20, .nofile = 1024 };

    *log_p = NULL;
    *status_p = 0;
    exe = s_which (argv[0]);
    if (!exe) {
        rc = ak_err_set (err, AK_EUNAVAIL, "cannot run '%s': not found in PATH", argv[0]);
        goto fail;
    }
    if (pipe2 (pipefd, O_CLOEXEC) != 0 || (null = open ("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        rc = ak_err_set (err, AK_EIO, "pipe2 or /dev/null: %s", strerror (errno));
        goto fail;
    }
    if (builddir && ak_sandbox_landlock_abi (NULL) > 0) {
        const char *rw[] = { builddir, "/dev/null", NULL };
        rc = ak_sandbox_landlock_new (ro, rw, &ruleset, err);
        if (rc)
            goto fail;
    }
    envp = s_child_env (builddir, &made);
    /* Everything the child needs is prepared: after fork, only system
       calls (the daemon has threads). */
    sigset_t none;
    sigemptyset (&none);
    pid = fork ();
    if (pid < 0) {
        rc = ak_err_set (err, AK_EIO, "fork: %s", strerror (errno));
        goto fail;
    }
    if (pid == 0) {
        /* The compiler starts with no signal blocked and the usual ones at
           their default action, whatever the daemon set for itself. */
        static const int dfl[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD };
        struct sigaction sa;
        memset (&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        setpgid (0, 0);
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        for (size_t i = 0; i < sizeof dfl / sizeof dfl[0]; i++)
            sigaction (dfl[i], &sa, NULL);
        sigprocmask (SIG_SETMASK, &none, NULL);
        if (dup2 (null, 0) < 0 || dup2 (pipefd[1], 1) < 0 || dup2 (pipefd[1], 2) < 0)
            _exit (127);
        if (ak_sandbox_apply_limits (&lim) != 0 || ak_sandbox_enter (ruleset) != 0)
            _exit (126);
        close_range (3, ~0u, 0);
        execve (exe, argv, envp);
        _exit (127);
    }
    setpgid (pid, pid);           /* whichever of the two runs first */
    close (pipefd[1]);
    pipefd[1] = -1;

    ak_child_wait_t wait = { .timeout_ms = limit, .cancel = cancel,
                             .max_output = AK_HOST_LOG_MAX, .group = true };
    ak_child_result_t res;
    rc = ak_child_collect (pid, pipefd[0], &wait, &res, err);
    pid = -1;
    /* A grandchild (cc1, as, ld) of a killed group may linger a moment; the
       group kill reaches it. */
    if (!rc && res.timed_out)
        rc = ak_err_set (err, AK_ETIMEOUT, "'%s' killed after %" PRIu64 " ms", argv[0], limit);
    else if (!rc && res.cancelled)
        rc = ak_err_set (err, AK_ETIMEOUT, "'%s' cancelled", argv[0]);
    else if (!rc && WIFEXITED (res.status) && WEXITSTATUS (res.status) == 126 && !res.len)
        rc = ak_err_set (err, AK_EIO, "'%s': the compiler's sandbox could not be set up", argv[0]);
    *status_p = res.status;
    *log_p = s_log_take (&res);

fail:
    if (pid > 0) {
        kill (-pid, SIGKILL);
        kill (pid, SIGKILL);
        while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (pipefd[0] >= 0)
        close (pipefd[0]);
    if (pipefd[1] >= 0)
        close (pipefd[1]);
    if (null >= 0)
        close (null);
    if (ruleset >= 0)
        close (ruleset);
    free (exe);
    free (made);
    free (envp);
    if (!*log_p)
        *log_p = ak_strdup ("");
    return rc;
}

/*  `cc --version`, first line, run once per process; also the prelude
    digest.  Both go into every cache key. */
static pthread_once_t s_facts_once = PTHREAD_ONCE_INIT;
static char s_cc_version[256];
static char s_cc_error[512];
static char s_prelude_digest[65];

static void s_facts_init (void)
{
    char *argv[] = { "cc", "--version", NULL };
    char *log = NULL;
    int status = 0;
    ak_err_t err = { 0 };
    int rc = s_run_captured (argv, NULL, 10000, NULL, &status, &log, &err);
    if (rc)
        snprintf (s_cc_error, sizeof s_cc_error, "system compiler: %.400s", err.msg);
    else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        snprintf (s_cc_error, sizeof s_cc_error, "system compiler: 'cc --version' failed: %.200s", log);
    else {
        size_t n = strcspn (log, "\n");
        if (n >= sizeof s_cc_version)
            n = sizeof s_cc_version - 1;
        memcpy (s_cc_version, log, n);
        s_cc_version[n] = '\0';
    }
    free (log);
    ak_sha256_hex (ak_prelude, ak_prelude_len, s_prelude_digest);
}

/*  Builds req into the cache (see backend.h).  The options string lists
    exactly the flags passed to cc, so its digest names the build. */
static int s_compile (const ak_compile_req_t *req, ak_compile_out_t *out, ak_err_t *err)
{
    int rc = 0;
    char *options = NULL, *src_path = NULL, *so_path = NULL, *log = NULL, *text = NULL, *builddir = NULL;
    char **argv = NULL;
    int nargv = 0;

    uint64_t t0 = ak_clock_mono_ns ();
    rc = ak_compile_req_check (req, out, "host", err);
    if (rc)
        return rc;
    if (!req->reference && req->dtype != AK_DT_FLOAT32)
        return ak_err_set (err, AK_EUNSUPPORTED, "host backend builds float32 kernels only, not %s",
                           ak_dtype_name (req->dtype));
    if (req->ndefines < 0 || req->ndefines > AK_MAX_PARAMS)
        return ak_err_set (err, AK_EINVAL, "host compile: %d defines, limit %d",
                           req->ndefines, AK_MAX_PARAMS);
    for (int i = 0; i < req->ndefines; i++) {
        const char *name = req->define_names[i];
        if (!ak_compile_define_ok (name))
            return ak_err_set (err, AK_EINVAL, "parameter name '%.64s' is not a C identifier",
                               name ? name : "(null)");
        if (strncmp (name, "AK_", 3) == 0 || strcmp (name, "ak_t") == 0)
            return ak_err_set (err, AK_EINVAL, "parameter name '%s' is reserved", name);
    }

    pthread_once (&s_facts_once, s_facts_init);
    if (s_cc_error[0])
        return ak_err_set (err, AK_EUNAVAIL, "%s", s_cc_error);

    /* Options string and the cache key. */
    options = ak_strdup (AK_HOST_CFLAGS);
    if (req->reference) {
        char *o = ak_sprintf ("%s -DAK_REFERENCE", options);
        free (options);
        options = o;
    }
    for (int i = 0; i < req->ndefines; i++) {
        char *o = ak_sprintf ("%s -D%s=%" PRId64, options, req->define_names[i], req->define_values[i]);
        free (options);
        options = o;
    }
    ak_sha256_hex (options, strlen (options), out->options_digest);
    ak_sha256_t ctx;
    ak_sha256_init (&ctx);
    ak_compile_key_part (&ctx, "akfleet-host-1", 14);
    ak_compile_key_part (&ctx, s_prelude_digest, 64);
    ak_compile_key_part (&ctx, req->source, req->source_len);
    ak_compile_key_part (&ctx, options, strlen (options));
    ak_compile_key_part (&ctx, s_cc_version, strlen (s_cc_version));
    ak_sha256_final_hex (&ctx, out->key);

    ak_cache_build_t b;
    rc = ak_cache_build_begin (&b, req->cache_dir, out->key, ".so", out, err);
    if (rc || out->cached)
        goto done;
    src_path = ak_cache_build_path (&b, "kernel.c");
    so_path = ak_cache_build_path (&b, "kernel.so");
    size_t text_len = ak_prelude_len + req->source_len + 64;
    text = ak_malloc (text_len + 1);
    int head = snprintf (text, text_len, "%s\n#line 1 \"kernel.c\"\n", ak_prelude);
    memcpy (text + head, req->source, req->source_len);
    text_len = (size_t) head + req->source_len;
    text[text_len] = '\0';
    rc = ak_file_write_atomic (src_path, text, text_len, err);
    if (rc)
        goto done;

    /* argv: cc <flags...> [-DAK_REFERENCE] -DNAME=VALUE... -o so src -lm */
    argv = ak_calloc ((size_t) req->ndefines + 16, sizeof *argv);
    argv[nargv++] = ak_strdup ("cc");
    {
        char *flags = ak_strdup (AK_HOST_CFLAGS);
        for (char *save = NULL, *tok = strtok_r (flags, " ", &save); tok; tok = strtok_r (NULL, " ", &save))
            argv[nargv++] = ak_strdup (tok);
        free (flags);
    }
    if (req->reference)
        argv[nargv++] = ak_strdup ("-DAK_REFERENCE");
    for (int i = 0; i < req->ndefines; i++)
        argv[nargv++] = ak_sprintf ("-D%s=%" PRId64, req->define_names[i], req->define_values[i]);
    argv[nargv++] = ak_strdup ("-o");
    argv[nargv++] = ak_strdup (so_path);
    argv[nargv++] = ak_strdup (src_path);
    argv[nargv++] = ak_strdup ("-lm");
    argv[nargv] = NULL;

    int status = 0;
    builddir = ak_strdup (src_path);
    rc = s_run_captured (argv, dirname (builddir), req->timeout_ms, req->cancel, &status, &log, err);
    if (rc) {
        if (rc == AK_ETIMEOUT)
            ak_err_prefix (err, "compile");
        goto done;
    }
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        if (WIFSIGNALED (status))
            rc = ak_err_set (err, AK_ECOMPILE, "cc killed by signal %d", WTERMSIG (status));
        else
            rc = ak_err_set (err, AK_ECOMPILE, "cc exited with status %d", WEXITSTATUS (status));
        goto done;
    }
    if (!ak_cache_present (so_path)) {
        rc = ak_err_set (err, AK_ECOMPILE, "cc succeeded but wrote no %s", so_path);
        goto done;
    }
    rc = ak_cache_build_commit (&b, so_path, err);

done:
    if (argv) {
        for (int i = 0; i < nargv; i++)
            free (argv[i]);
        free (argv);
    }
    free (options);
    free (src_path);
    free (so_path);
    free (builddir);
    free (text);
    return ak_cache_build_end (&b, rc, t0, &log, out);
}

/* --------------------------------------------------------- executor side */

static int s_open (const Ak__Device *device, ak_dev_t **dev_p, ak_err_t *err)
{
    if (!dev_p)
        return ak_err_set (err, AK_EINVAL, "host open: no output");
    uint32_t index = device ? device->index : 0;
    if (index != 0)
        return ak_err_set (err, AK_ENOTFOUND, "host backend has one device (0), not %u", index);
    ak_dev_t *dev = ak_calloc (1, sizeof *dev);
    dev->index = index;
    dev->flush_bytes = s_llc_bytes ();
    *dev_p = dev;
    return 0;
}

static void s_close (ak_dev_t **dev_p)
{
    if (dev_p && *dev_p) {
        free ((*dev_p)->flush);
        free (*dev_p);
        *dev_p = NULL;
    }
}

static int s_load (ak_dev_t *dev, const char *artifact_path, const char *symbol,
                   ak_kernel_t **kernel_p, ak_err_t *err)
{
    if (!artifact_path || !symbol || !kernel_p)
        return ak_err_set (err, AK_EINVAL, "host load: bad arguments");
    void *handle = dlopen (artifact_path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror ();
        return ak_err_set (err, AK_EIO, "dlopen %s: %s", artifact_path, why ? why : "failed");
    }
    dlerror ();
    void *sym = dlsym (handle, symbol);
    if (!sym) {
        dlclose (handle);
        return ak_err_set (err, AK_ENOTFOUND, "%s: no symbol '%s'", artifact_path, symbol);
    }
    ak_kernel_t *k = ak_calloc (1, sizeof *k);
    k->handle = handle;
    /* POSIX guarantees a dlsym result converts to a function pointer. */
    memcpy (&k->fn, &sym, sizeof sym);
    *kernel_p = k;
    return 0;
}

static void s_unload (ak_dev_t *dev, ak_kernel_t **kernel_p)
{
    if (kernel_p && *kernel_p) {
        dlclose ((*kernel_p)->handle);
        free (*kernel_p);
        *kernel_p = NULL;
    }
}

static int s_alloc (ak_dev_t *dev, size_t bytes, void **buf_p, ak_err_t *err)
{
    size_t n = (bytes + 63) & ~(size_t) 63;
    if (n < bytes)
        return ak_err_set (err, AK_ENOMEM, "host alloc: %zu bytes", bytes);
    void *p = aligned_alloc (64, n ? n : 64);
    if (!p)
        return ak_err_set (err, AK_ENOMEM, "host alloc: %zu bytes", bytes);
    *buf_p = p;
    return 0;
}

static void s_release (ak_dev_t *dev, void **buf_p)
{
    if (buf_p && *buf_p) {
        free (*buf_p);
        *buf_p = NULL;
    }
}

static int s_upload (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err)
{
    if (bytes)
        memcpy (dst, src, bytes);
    return 0;
}

static int s_download (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err)
{
    if (bytes)
        memcpy (dst, src, bytes);
    return 0;
}

static int s_fill (ak_dev_t *dev, void *dst, int byte, size_t bytes, ak_err_t *err)
{
    if (bytes)
        memset (dst, byte, bytes);
    return 0;
}

static void s_args (const ak_launch_t *l, ak_args_t *a)
{
    memset (a, 0, sizeof *a);
    a->ndims = l->ndims;
    for (int i = 0; i < l->ndims && i < AK_MAX_DIMS; i++)
        a->dims[i] = l->dims[i];
    a->nin = l->nin;
    for (int i = 0; i < l->nin && i < AK_MAX_BUFS; i++)
        a->in[i] = l->in[i];
    a->nout = l->nout;
    for (int i = 0; i < l->nout && i < AK_MAX_BUFS; i++)
        a->out[i] = l->out[i];
}

static int s_launch (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, ak_err_t *err)
{
    if (!kernel || !args)
        return ak_err_set (err, AK_EINVAL, "host launch: bad arguments");
    ak_args_t a;
    s_args (args, &a);
    kernel->fn (&a);
    return 0;
}

/*  One sample: the flush buffer (LLC-sized) is rewritten first when cold,
    then only the call sits between the two clock reads. */
static int s_time (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                   double *us, ak_err_t *err)
{
    if (!dev || !kernel || !args || !us)
        return ak_err_set (err, AK_EINVAL, "host time: bad arguments");
    ak_args_t a;
    s_args (args, &a);
    if (cold) {
        if (!dev->flush) {
            dev->flush = malloc (dev->flush_bytes);
            if (!dev->flush)
                return ak_err_set (err, AK_ENOMEM, "host time: flush buffer of %zu bytes", dev->flush_bytes);
        }
        memset (dev->flush, ++dev->flush_value, dev->flush_bytes);
    }
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    kernel->fn (&a);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    *us = (double) (t1.tv_sec - t0.tv_sec) * 1e6 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e3;
    return 0;
}

static bool s_supports_dtype (const Ak__Device *device, ak_dtype_t dt)
{
    return dt == AK_DT_FLOAT32;
}

static const ak_backend_t s_host = {
    .name = "host",
    .probe = s_probe,
    .compile = s_compile,
    .open = s_open,
    .close = s_close,
    .load = s_load,
    .unload = s_unload,
    .alloc = s_alloc,
    .release = s_release,
    .upload = s_upload,
    .download = s_download,
    .fill = s_fill,
    .launch = s_launch,
    .time = s_time,
    .supports_dtype = s_supports_dtype,
};

const ak_backend_t *ak_backend_host (void)
{
    return &s_host;
}
