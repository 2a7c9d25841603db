/*  worker/jobproc.c: one host job in a confined process of its own
    (jobproc.h). */
#include "jobproc.h"
#include "assign.h"
#include "envelope.h"
#include "executor.h"
#include "job.h"
#include "log.h"
#include "pbutil.h"
#include "refcache.h"
#include "sandbox.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_RESULT_FD   3               /* in the job process */
#define S_KEY_FD      4
#define S_RULESET_FD  5
#define S_RESULT_MAX  (AK_MAX_MSG_SIZE + crypto_auth_BYTES)
#define S_MAX_RO      24
/* Bound of a host job's own reference cache. */
#define AK_JOBPROC_REFCACHE_MAX (256ull << 20)

/* ============================================================ the child */

/*  Exit codes of a job process that failed before running the job. */
enum { S_EXIT_SETUP = 120, S_EXIT_KEY, S_EXIT_LIMITS, S_EXIT_LANDLOCK, S_EXIT_SECCOMP, S_EXIT_SEND };

static const char *s_exit_text (int code)
{
    switch (code) {
        case S_EXIT_SETUP:    return "could not set up its descriptors";
        case S_EXIT_KEY:      return "got no result key";
        case S_EXIT_LIMITS:   return "could not set its resource limits";
        case S_EXIT_LANDLOCK: return "could not enter its Landlock domain";
        case S_EXIT_SECCOMP:  return "could not install its seccomp filter";
        case S_EXIT_SEND:     return "could not send its receipt";
        default:              return NULL;
    }
}

/*  The job process: confine, run the job, send the receipt MACed with the
    key the executor wrote before anything else ran.  Never returns. */
static void s_child (const ak_backend_t *be, ak_dev_t *dev, const Ak__Device *device,
                     const Ak__ExecJob *job, const int fds[4], const char *scratch,
                     const ak_sandbox_limits_t *lim, pid_t parent)
{
    /* fds: result (write), key (read), output (write), ruleset or -1 */
    setpgid (0, 0);
    if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid () != parent)
        _exit (S_EXIT_SETUP);
    int null = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    int hi[5];
    for (int i = 0; i < 4; i++)
        hi[i] = fds[i] >= 0 ? fcntl (fds[i], F_DUPFD_CLOEXEC, 10) : -1;
    hi[4] = null >= 0 ? fcntl (null, F_DUPFD_CLOEXEC, 10) : -1;
    if (hi[0] < 0 || hi[1] < 0 || hi[2] < 0 || hi[4] < 0 || (fds[3] >= 0 && hi[3] < 0))
        _exit (S_EXIT_SETUP);
    /* the executor's socket to the daemon (fd 3 there) is gone after this */
    if (dup2 (hi[4], 0) < 0 || dup2 (hi[2], 1) < 0 || dup2 (hi[2], 2) < 0 || dup2 (hi[0], S_RESULT_FD) < 0
        || dup2 (hi[1], S_KEY_FD) < 0 || (hi[3] >= 0 && dup2 (hi[3], S_RULESET_FD) < 0))
        _exit (S_EXIT_SETUP);
    if (close_range (hi[3] >= 0 ? S_RULESET_FD + 1 : S_RULESET_FD, ~0u, 0) != 0)
        _exit (S_EXIT_SETUP);

    /* The key, before any kernel code: kept on a page of its own that is
       unreadable while the job runs. */
    uint8_t *key = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (key == MAP_FAILED)
        _exit (S_EXIT_KEY);
    size_t got = 0;
    while (got < crypto_auth_KEYBYTES) {
        ssize_t n = read (S_KEY_FD, key + got, crypto_auth_KEYBYTES - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit (S_EXIT_KEY);
        got += (size_t) n;
    }
    close (S_KEY_FD);
    if (mprotect (key, 4096, PROT_NONE) != 0)
        _exit (S_EXIT_KEY);

    if (ak_sandbox_apply_limits (lim) != 0)
        _exit (S_EXIT_LIMITS);
    if (chdir (scratch) != 0 || setenv ("TMPDIR", scratch, 1) != 0 || setenv ("HOME", scratch, 1) != 0)
        _exit (S_EXIT_SETUP);
    if (ak_sandbox_enter (hi[3] >= 0 ? S_RULESET_FD : -1) != 0)
        _exit (S_EXIT_LANDLOCK);
    if (hi[3] >= 0)
        close (S_RULESET_FD);
    if (ak_sandbox_seccomp_kernel (getpid ()) != 0)
        _exit (S_EXIT_SECCOMP);

    /* A cache of this job's own references (the executor's is not shared
       with a process that runs kernel code on the CPU, and what this one
       computes would not come back): the gates' stages still share the
       configurations they have in common. */
    uint64_t cache_bytes = ak_refcache_env_bytes ();
    ak_refcache_t *cache = ak_refcache_new (cache_bytes < AK_JOBPROC_REFCACHE_MAX ? cache_bytes
                                                                                  : AK_JOBPROC_REFCACHE_MAX);
    Ak__Receipt *r = ak_job_run (be, dev, device, job, cache, NULL);
    ak_refcache_destroy (&cache);
    fflush (NULL);

    size_t len = ak__receipt__get_packed_size (r);
    if (len > AK_MAX_MSG_SIZE) {
        /* keep the verdict, drop the bulk (as the executor does) */
        Ak__Receipt *small = ak_pb_receipt_for (job->assign, r->status, "receipt too large; gates and timings dropped");
        ak__receipt__free_unpacked (r, NULL);
        r = small;
        len = ak__receipt__get_packed_size (r);
    }
    uint8_t *buf = malloc (len + crypto_auth_BYTES);
    if (!buf)
        _exit (S_EXIT_SEND);
    ak__receipt__pack (r, buf);
    if (mprotect (key, 4096, PROT_READ | PROT_WRITE) != 0)
        _exit (S_EXIT_SEND);
    crypto_auth (buf + len, buf, len, key);
    sodium_memzero (key, crypto_auth_KEYBYTES);
    if (ak_write_all (S_RESULT_FD, buf, len + crypto_auth_BYTES) != 0)
        _exit (S_EXIT_SEND);
    _exit (0);
}

/* =========================================================== the parent */

typedef struct {
    char    *text;                 /* what the job process printed, at most AK_JOBPROC_OUTPUT_MAX */
    size_t   len;
    uint64_t total;                /* bytes it printed */
    uint8_t *result;               /* everything written on the result pipe, at most S_RESULT_MAX */
    size_t   result_len;
    bool     result_over;
} s_collect_t;

/*  Reads fd into c (result or output); false at end of stream. */
static bool s_read_some (int fd, bool result, s_collect_t *c)
{
    uint8_t chunk[65536];
    ssize_t n = read (fd, chunk, sizeof chunk);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN;
    if (n == 0)
        return false;
    if (result) {
        size_t take = (size_t) n;
        if (c->result_len + take > S_RESULT_MAX) {
            c->result_over = true;
            take = S_RESULT_MAX - c->result_len;
        }
        c->result = ak_realloc (c->result, c->result_len + take + 1);
        memcpy (c->result + c->result_len, chunk, take);
        c->result_len += take;
    }
    else {
        size_t take = (size_t) n;
        if (c->len + take > AK_JOBPROC_OUTPUT_MAX)
            take = c->len < AK_JOBPROC_OUTPUT_MAX ? AK_JOBPROC_OUTPUT_MAX - c->len : 0;
        if (take) {
            /* a receipt's strings are text: anything else shows as '?' */
            for (size_t i = 0; i < take; i++)
                if ((chunk[i] < 0x20 && chunk[i] != '\n' && chunk[i] != '\t') || chunk[i] >= 0x7f)
                    chunk[i] = '?';
            c->text = ak_realloc (c->text, c->len + take + 1);
            memcpy (c->text + c->len, chunk, take);
            c->len += take;
            c->text[c->len] = '\0';
        }
        c->total += (uint64_t) n;
    }
    return true;
}

/*  Reads both pipes until the result pipe closes (the job process ended
    or sent its receipt) or the job process ended; then kills its group
    (the task's end: whatever a kernel started goes too) and reaps it.
    The job process is reaped only after the group kill, so that its pid,
    the group's id, cannot be reused before. */
static void s_collect (pid_t pid, int res_fd, int out_fd, s_collect_t *c, int *status)
{
    bool res_open = true, out_open = true;
    while (res_open) {
        struct pollfd p[2] = { { .fd = res_fd, .events = POLLIN }, { .fd = out_open ? out_fd : -1, .events = POLLIN } };
        int n = poll (p, 2, 100);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            res_open = s_read_some (res_fd, true, c);
        if (n > 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            out_open = s_read_some (out_fd, false, c);
        siginfo_t si;
        memset (&si, 0, sizeof si);
        if (res_open && waitid (P_PID, (id_t) pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
            /* ended: what it wrote before is in the pipe */
            while (res_open && poll (p, 1, 0) > 0)
                res_open = s_read_some (res_fd, true, c);
            break;
        }
    }
    kill (-pid, SIGKILL);
    kill (pid, SIGKILL);
    while (waitpid (pid, status, 0) < 0 && errno == EINTR)
        ;
    /* The group is dead, so the output pipe closes at once. */
    while (out_open) {
        struct pollfd p = { .fd = out_fd, .events = POLLIN };
        if (poll (&p, 1, 1000) <= 0)
            break;
        out_open = s_read_some (out_fd, false, c);
    }
}

/*  The directories a job process may read: system libraries and the
    directories of the job's artifacts (the compile cache). */
static size_t s_read_paths (const Ak__ExecJob *job, const char *ro[S_MAX_RO + 1], char *dirs[S_MAX_RO])
{
    static const char *const sys[] = { "/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache",
                                       "/dev/urandom", "/sys/devices/system/cpu", "/proc/self" };
    size_t n = 0, nd = 0;
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++)
        ro[n++] = sys[i];
    const char *paths[S_MAX_RO];
    size_t np = 0;
    paths[np++] = job->reference_path;
    paths[np++] = job->baseline_path;
    paths[np++] = job->candidate_path;
    for (size_t i = 0; i < job->n_artifacts && np < S_MAX_RO - 8; i++)
        paths[np++] = job->artifacts[i] ? job->artifacts[i]->path : NULL;
    for (size_t i = 0; i < np && n < S_MAX_RO; i++) {
        if (!paths[i] || !paths[i][0])
            continue;
        char *copy = ak_strdup (paths[i]);
        char *dir = ak_strdup (dirname (copy));
        free (copy);
        bool seen = false;
        for (size_t k = 0; k < nd; k++)
            seen |= strcmp (dirs[k], dir) == 0;
        if (seen) {
            free (dir);
            continue;
        }
        dirs[nd++] = dir;
        ro[n++] = dir;
    }
    ro[n] = NULL;
    return nd;
}

static Ak__Receipt *s_fail (const Ak__ExecJob *job, const char *status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static Ak__Receipt *s_fail (const Ak__ExecJob *job, const char *status, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (why, sizeof why, fmt, ap);
    va_end (ap);
    return ak_pb_receipt_for (job ? job->assign : NULL, status, why);
}

/*  The receipt in what the job process sent, if it verifies with key. */
static Ak__Receipt *s_verify (const s_collect_t *c, const uint8_t key[crypto_auth_KEYBYTES])
{
    if (c->result_over || c->result_len < crypto_auth_BYTES)
        return NULL;
    size_t len = c->result_len - crypto_auth_BYTES;
    if (crypto_auth_verify (c->result + len, c->result, len, key) != 0)
        return NULL;
    return ak__receipt__unpack (NULL, len, c->result);
}

Ak__Receipt *ak_jobproc_run (const ak_backend_t *be, ak_dev_t *dev, const Ak__Device *device,
                             const Ak__ExecJob *job, const char *scratch_root, int *fatal_sig)
{
    Ak__Receipt *r = NULL;
    int res[2] = { -1, -1 }, key[2] = { -1, -1 }, out[2] = { -1, -1 }, ruleset = -1;
    char *dirs[S_MAX_RO] = { 0 };
    size_t ndirs = 0;
    char scratch[256] = "";
    uint8_t k[crypto_auth_KEYBYTES];
    s_collect_t c = { 0 };
    *fatal_sig = 0;

    if (sodium_init () < 0)
        return s_fail (job, "error", "sandbox: libsodium did not initialise");
    ak_policy_t pol;
    ak_assign_policy (job->assign ? job->assign->policy : NULL, &pol);
    ak_sandbox_limits_t lim = {
        .cpu_s = 2 * ((uint64_t) pol.run_timeout_ms / 1000) + 10,
        .as_bytes = device && device->mem_bytes ? device->mem_bytes : 0,
        .fsize_bytes = 1u << 20,
        .nofile = 64,
        .no_procs = true,
    };
    int abi = ak_sandbox_landlock_abi (NULL);
    const char *tmp = scratch_root ? scratch_root : getenv ("TMPDIR");   /* the worker's own (daemon.c) */
    /* named by this executor's pid: the daemon removes what an executor it lost left (daemon.c) */
    snprintf (scratch, sizeof scratch, "%s/akfleet-job-%d-XXXXXX",
              tmp && tmp[0] == '/' && strlen (tmp) < 200 ? tmp : "/tmp", (int) getpid ());
    if (!mkdtemp (scratch)) {
        r = s_fail (job, "error", "sandbox: scratch directory %s: %s", scratch, strerror (errno));
        scratch[0] = '\0';
        goto done;
    }
    if (abi > 0) {
        const char *ro[S_MAX_RO + 1];
        const char *rw[] = { scratch, "/dev/null", NULL };
        ndirs = s_read_paths (job, ro, dirs);
        ak_err_t err = { 0 };
        if (ak_sandbox_landlock_new (ro, rw, &ruleset, &err) != 0) {
            r = s_fail (job, "error", "%s", err.msg);
            goto done;
        }
    }
    if (pipe2 (res, O_CLOEXEC) != 0 || pipe2 (key, O_CLOEXEC) != 0 || pipe2 (out, O_CLOEXEC) != 0) {
        r = s_fail (job, "error", "sandbox: pipe2: %s", strerror (errno));
        goto done;
    }
    randombytes_buf (k, sizeof k);
    fflush (NULL);
    pid_t parent = getpid ();
    pid_t pid = fork ();
    if (pid < 0) {
        r = s_fail (job, "error", "sandbox: fork: %s", strerror (errno));
        goto done;
    }
    if (pid == 0) {
        sodium_memzero (k, sizeof k);       /* the child reads its copy from the pipe */
        int fds[4] = { res[1], key[0], out[1], ruleset };
        s_child (be, dev, device, job, fds, scratch, &lim, parent);
    }
    close (res[1]);
    close (key[0]);
    close (out[1]);
    res[1] = key[0] = out[1] = -1;
    if (ak_write_all (key[1], k, sizeof k) != 0)
        ak_warn ("job process %d: could not hand it its result key: %s", (int) pid, strerror (errno));
    close (key[1]);
    key[1] = -1;

    int status = 0;
    s_collect (pid, res[0], out[0], &c, &status);
    r = s_verify (&c, k);
    if (!r) {
        char sig[32];
        if (WIFSIGNALED (status) && c.result_len == 0) {
            *fatal_sig = WTERMSIG (status);
            r = s_fail (job, "crashed", "job process killed by %s",
                        ak_signal_name (WTERMSIG (status), sig, sizeof sig));
        }
        else if (WIFEXITED (status) && s_exit_text (WEXITSTATUS (status)))
            r = s_fail (job, "error", "sandbox: the job process %s", s_exit_text (WEXITSTATUS (status)));
        else if (c.result_len)
            r = s_fail (job, "launch_error", "the job's result did not verify (%zu bytes on the result "
                        "channel, not the harness's authenticated receipt): refused", c.result_len);
        else
            r = s_fail (job, "launch_error", "the job process ended (status 0x%x) without a result", status);
        ak_warn ("task %s: %s", job->assign ? job->assign->task_id : "?", r->reason);
    }

done:
    sodium_memzero (k, sizeof k);
    for (int i = 0; i < 2; i++) {
        if (res[i] >= 0) close (res[i]);
        if (key[i] >= 0) close (key[i]);
        if (out[i] >= 0) close (out[i]);
    }
    if (ruleset >= 0)
        close (ruleset);
    for (size_t i = 0; i < ndirs; i++)
        free (dirs[i]);
    if (scratch[0])
        ak_rm_tree (scratch, false);
    char desc[512];
    ak_sandbox_describe (&lim, abi, desc, sizeof desc);
    ak_pb_set_str (&r->sandbox, desc);
    ak_pb_set_str (&r->kernel_output, c.text ? c.text : "");
    r->kernel_output_bytes = c.total;
    r->kernel_output_truncated = c.total > c.len;
    free (c.text);
    free (c.result);
    return r;
}
