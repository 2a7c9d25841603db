/*  worker/nvrtc/main.c: ak-nvrtc, the CUDA backend's compile helper.

    akworker starts one per compile (worker/nvrtc_run.c, whose header
    holds the protocol): it confines itself (rlimits, no_new_privs,
    Landlock), only then loads NVRTC, compiles the program text read from
    stdin with the options after "--", writes the NVRTC log (and, on a
    failure that is not a compile error, a marked message) to stdout and
    the CUBIN to --out.  It is a program of its own, not a forked copy of
    the daemon, so that no lock held by a daemon thread at the fork can
    follow NVRTC into it.

    Never: load NVRTC (or read the program text) before the confinement
    holds; run with a confinement that failed to apply; leave through
    exit() (LeakSanitizer would read /proc, which Landlock denies). */
#include "worker/nvrtc_run.h"
#include "worker/sandbox.h"
#include "util.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_MAX_PATHS 64

typedef struct {
    nvrtcResult (*create) (nvrtcProgram *, const char *, const char *, int, const char *const *,
                           const char *const *);
    nvrtcResult (*compile) (nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size) (nvrtcProgram, size_t *);
    nvrtcResult (*log) (nvrtcProgram, char *);
    nvrtcResult (*cubin_size) (nvrtcProgram, size_t *);
    nvrtcResult (*cubin) (nvrtcProgram, char *);
    const char *(*error_string) (nvrtcResult);
} s_nv_t;

/*  The marked message "what: why" on stdout; returns code. */
static int s_fail (int code, const char *what, const char *why)
{
    char msg[1200];
    int n = snprintf (msg, sizeof msg, AK_NVRTC_ERR_MARK "%s: %s", what, why ? why : "failed");
    if (n > 0 && (size_t) n < sizeof msg) {
        ssize_t w = write (1, msg, (size_t) n);
        (void) w;
    }
    return code;
}

static bool s_u64 (const char *s, uint64_t *v)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull (s, &end, 10);
    if (errno || !end || *end || end == s)
        return false;
    *v = (uint64_t) x;
    return true;
}

/*  stdin to the end, at most AK_NVRTC_TEXT_MAX bytes, NUL-terminated. */
static char *s_read_text (void)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc (cap);
    for (;;) {
        if (!buf)
            return NULL;
        if (len + 1 == cap) {
            if (cap > AK_NVRTC_TEXT_MAX) {
                free (buf);
                errno = EFBIG;
                return NULL;
            }
            char *t = realloc (buf, cap * 2);
            if (!t)
                free (buf);
            buf = t;
            cap *= 2;
            continue;
        }
        ssize_t n = read (0, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free (buf);
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t) n;
    }
    buf[len] = '\0';
    return buf;
}

static int s_load (const char *path, s_nv_t *nv)
{
    void *h = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return s_fail (AK_NVRTC_USAGE, path, dlerror ());
    struct { const char *name; void **slot; } syms[] = {
        { "nvrtcCreateProgram", (void **) &nv->create }, { "nvrtcCompileProgram", (void **) &nv->compile },
        { "nvrtcGetProgramLogSize", (void **) &nv->log_size }, { "nvrtcGetProgramLog", (void **) &nv->log },
        { "nvrtcGetCUBINSize", (void **) &nv->cubin_size }, { "nvrtcGetCUBIN", (void **) &nv->cubin },
        { "nvrtcGetErrorString", (void **) &nv->error_string },
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym (h, syms[i].name);
        if (!p)
            return s_fail (AK_NVRTC_USAGE, path, syms[i].name);
        memcpy (syms[i].slot, &p, sizeof p);
    }
    return 0;
}

/*  NVRTC on text with opts, the log to stdout, the CUBIN to out (created,
    must not exist).  Returns the exit code. */
static int s_compile (const s_nv_t *nv, const char *text, const char *const *opts, int nopts, const char *out)
{
    nvrtcProgram prog = NULL;
    nvrtcResult r = nv->create (&prog, text, "kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return s_fail (r == NVRTC_ERROR_OUT_OF_MEMORY ? AK_NVRTC_NOMEM : AK_NVRTC_FAILED,
                       "nvrtcCreateProgram", nv->error_string (r));
    nvrtcResult cr = nv->compile (prog, nopts, opts);
    size_t log_len = 0;
    r = nv->log_size (prog, &log_len);
    if (r != NVRTC_SUCCESS)
        return s_fail (AK_NVRTC_FAILED, "nvrtcGetProgramLogSize", nv->error_string (r));
    if (log_len > 1) {
        char *log = malloc (log_len);
        if (!log)
            return s_fail (AK_NVRTC_NOMEM, "malloc", "NVRTC log");
        r = nv->log (prog, log);
        if (r != NVRTC_SUCCESS)
            return s_fail (AK_NVRTC_FAILED, "nvrtcGetProgramLog", nv->error_string (r));
        ak_write_all (1, log, strnlen (log, log_len));
        free (log);
    }
    if (cr == NVRTC_ERROR_COMPILATION)
        return AK_NVRTC_COMPILE;
    if (cr != NVRTC_SUCCESS)
        return s_fail (cr == NVRTC_ERROR_OUT_OF_MEMORY ? AK_NVRTC_NOMEM : AK_NVRTC_FAILED,
                       "nvrtcCompileProgram", nv->error_string (cr));
    size_t n = 0;
    r = nv->cubin_size (prog, &n);
    if (r != NVRTC_SUCCESS)
        return s_fail (AK_NVRTC_FAILED, "nvrtcGetCUBINSize", nv->error_string (r));
    char *cubin = malloc (n ? n : 1);
    if (!cubin)
        return s_fail (AK_NVRTC_NOMEM, "malloc", "CUBIN");
    r = nv->cubin (prog, cubin);
    if (r != NVRTC_SUCCESS)
        return s_fail (AK_NVRTC_FAILED, "nvrtcGetCUBIN", nv->error_string (r));
    int fd = open (out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return s_fail (AK_NVRTC_IO, out, strerror (errno));
    if (ak_write_all (fd, cubin, n) != 0 || fsync (fd) != 0)
        return s_fail (AK_NVRTC_IO, out, strerror (errno));
    if (close (fd) != 0)
        return s_fail (AK_NVRTC_IO, out, strerror (errno));
    /* The program is not destroyed: _exit returns everything at once. */
    return AK_NVRTC_OK;
}

static int s_main (int argc, char **argv)
{
    const char *nvrtc = NULL, *out = NULL;
    const char *ro[S_MAX_PATHS + 1], *rw[S_MAX_PATHS + 1];
    size_t nro = 0, nrw = 0;
    bool landlock = true;
    ak_sandbox_limits_t lim = { 0 };
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp (a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp (a, "--no-landlock") == 0) {
            landlock = false;
            continue;
        }
        if (!v)
            return s_fail (AK_NVRTC_USAGE, a, "needs a value");
        i++;
        if (strcmp (a, "--nvrtc") == 0)
            nvrtc = v;
        else if (strcmp (a, "--out") == 0)
            out = v;
        else if (strcmp (a, "--ro") == 0 && nro < S_MAX_PATHS)
            ro[nro++] = v;
        else if (strcmp (a, "--rw") == 0 && nrw < S_MAX_PATHS)
            rw[nrw++] = v;
        else if (strcmp (a, "--cpu") == 0 && s_u64 (v, &lim.cpu_s))
            ;
        else if (strcmp (a, "--as") == 0 && s_u64 (v, &lim.as_bytes))
            ;
        else if (strcmp (a, "--fsize") == 0 && s_u64 (v, &lim.fsize_bytes))
            ;
        else if (strcmp (a, "--nofile") == 0 && s_u64 (v, &lim.nofile))
            ;
        else
            return s_fail (AK_NVRTC_USAGE, a, "unknown option, bad value or too many paths");
    }
    ro[nro] = NULL;
    rw[nrw] = NULL;
    if (!nvrtc || nvrtc[0] != '/' || !out || !lim.cpu_s || !lim.fsize_bytes || !lim.nofile
        || (landlock && !nrw))
        return s_fail (AK_NVRTC_USAGE, AK_NVRTC_HELPER,
                       "--nvrtc (absolute), --out, --cpu, --fsize, --nofile and --rw (or --no-landlock) "
                       "are required");

    /* The confinement, before NVRTC or the text is touched. */
    int e = ak_sandbox_apply_limits (&lim);
    if (e)
        return s_fail (AK_NVRTC_SANDBOX, "setrlimit", strerror (-e));
    int ruleset = -1;
    if (landlock) {
        ak_err_t err = { 0 };
        if (ak_sandbox_landlock_new (ro, rw, &ruleset, &err) != 0)
            return s_fail (AK_NVRTC_SANDBOX, "landlock", err.msg);
    }
    if ((e = ak_sandbox_enter (ruleset)) != 0)
        return s_fail (AK_NVRTC_SANDBOX, "no_new_privs / landlock_restrict_self", strerror (-e));
    if (ruleset >= 0)
        close (ruleset);

    char *text = s_read_text ();
    if (!text)
        return s_fail (AK_NVRTC_IO, "reading the program text from stdin", strerror (errno));
    s_nv_t nv;
    int rc = s_load (nvrtc, &nv);
    if (rc)
        return rc;
    return s_compile (&nv, text, (const char *const *) argv + i, argc - i, out);
}

int main (int argc, char **argv)
{
    _exit (s_main (argc, argv));
}
