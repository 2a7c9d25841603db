/*  worker/executor.c: executor processes (see executor.h).

    The daemon side never blocks on an executor for long: reads are
    incremental (the event loop polls the socket), a job is written with a
    send timeout, and a watchdog deadline bounds every job.  The child side
    is a plain blocking loop: read a job, run it, write the receipt. */
#include "executor.h"
#include "backend.h"
#include "backends.h"
#include "clock.h"
#include "envelope.h"
#include "frame.h"
#include "job.h"
#include "jobproc.h"
#include "log.h"
#include "pbutil.h"
#include "receipt_limits.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AK_EXEC_CHILD_FD     3
#define AK_EXEC_SEND_MS      5000    /* an idle executor takes a job at once */
#define AK_EXEC_REAP_MS      200     /* grace after closing before SIGKILL */
#define AK_EXEC_EOF_REAP_MS  1000    /* after end of stream, the exit is imminent */

struct ak_exec {
    pid_t              pid;
    pid_t              spawned;        /* pid as started (pid is -1 once reaped) */
    int                fd;
    uint32_t           device;
    bool               busy;
    uint64_t           deadline_ms;
    uint32_t           timeout_ms;
    ak_frame_reader_t  reader;
};

/* ---------------------------------------------------------------- names */

const char *ak_signal_name (int sig, char *buf, size_t len)
{
    static const struct { int sig; const char *name; } names[] = {
        { SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" },   { SIGFPE, "SIGFPE" },
        { SIGILL, "SIGILL" },   { SIGABRT, "SIGABRT" }, { SIGKILL, "SIGKILL" },
        { SIGTERM, "SIGTERM" }, { SIGINT, "SIGINT" },   { SIGTRAP, "SIGTRAP" },
        { SIGSYS, "SIGSYS" },   { SIGPIPE, "SIGPIPE" }, { SIGXCPU, "SIGXCPU" },
        { SIGXFSZ, "SIGXFSZ" }, { SIGHUP, "SIGHUP" },   { SIGQUIT, "SIGQUIT" },
        { SIGALRM, "SIGALRM" }, { SIGUSR1, "SIGUSR1" }, { SIGUSR2, "SIGUSR2" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf (buf, len, "signal %d", sig);
    return buf;
}

/*  Text for a waitpid status. */
static void s_status_text (int status, char *buf, size_t len)
{
    char tmp[32];
    if (WIFSIGNALED (status))
        snprintf (buf, len, "executor killed by %s%s", ak_signal_name (WTERMSIG (status), tmp, sizeof tmp),
                  WCOREDUMP (status) ? " (core dumped)" : "");
    else if (WIFEXITED (status))
        snprintf (buf, len, "executor exited with status %d", WEXITSTATUS (status));
    else
        snprintf (buf, len, "executor stopped (status 0x%x)", status);
}

/* ---------------------------------------------------------- daemon side */

int ak_exec_new (const char *bin, const char *backend, uint32_t device, const char *log_level,
                 const char *scratch, ak_exec_t **self_p, ak_err_t *err)
{
    int sv[2] = { -1, -1 };
    if (!bin || !backend || !self_p)
        return ak_err_set (err, AK_EINVAL, "executor: bad arguments");
    if (access (bin, X_OK) != 0)
        return ak_err_set (err, AK_EUNAVAIL, "executor binary %s: %s", bin, strerror (errno));
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return ak_err_set (err, AK_EIO, "socketpair: %s", strerror (errno));

    /* Everything the child needs is prepared before fork: after it, only
       async-signal-safe calls (the daemon has threads). */
    char fd_text[16], dev_text[16];
    snprintf (fd_text, sizeof fd_text, "%d", AK_EXEC_CHILD_FD);
    snprintf (dev_text, sizeof dev_text, "%u", device);
    char *argv[] = { (char *) bin, "--executor", "--fd", fd_text, "--backend", (char *) backend,
                     "--device", dev_text, "--log-level", (char *) (log_level ? log_level : "info"),
                     scratch ? "--scratch" : NULL, (char *) scratch, NULL };
    pid_t parent = getpid ();
    sigset_t none;
    sigemptyset (&none);
    struct rlimit no_core = { 0, 0 };

    pid_t pid = fork ();
    if (pid < 0) {
        int e = errno;
        close (sv[0]);
        close (sv[1]);
        return ak_err_set (err, AK_EIO, "fork: %s", strerror (e));
    }
    if (pid == 0) {
        /* The child: the socket on a fixed fd, dies with the daemon, no
           core files from crashing candidates, nothing blocked. */
        if (sv[1] == AK_EXEC_CHILD_FD) {
            if (fcntl (sv[1], F_SETFD, 0) != 0)
                _exit (127);
        }
        else if (dup2 (sv[1], AK_EXEC_CHILD_FD) < 0)
            _exit (127);
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (127);
        setrlimit (RLIMIT_CORE, &no_core);
        sigprocmask (SIG_SETMASK, &none, NULL);
        signal (SIGPIPE, SIG_DFL);
        execv (bin, argv);
        _exit (127);
    }
    close (sv[1]);
    struct timeval tv = { .tv_sec = AK_EXEC_SEND_MS / 1000, .tv_usec = (AK_EXEC_SEND_MS % 1000) * 1000 };
    if (setsockopt (sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
        int e = errno;
        close (sv[0]);
        kill (pid, SIGKILL);
        while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return ak_err_set (err, AK_EIO, "setsockopt SO_SNDTIMEO: %s", strerror (e));
    }
    ak_exec_t *self = ak_calloc (1, sizeof *self);
    self->pid = self->spawned = pid;
    self->fd = sv[0];
    self->device = device;
    ak_frame_reader_init (&self->reader, AK_MAX_MSG_SIZE);
    *self_p = self;
    ak_debug ("executor %d started for %s device %u", (int) pid, backend, device);
    return 0;
}

/*  Waits up to ms for the child, then kills it; *status_p gets its status.
    Returns true when the status is that of the child's own end (not our
    SIGKILL). */
static bool s_reap (ak_exec_t *self, uint64_t ms, int *status_p)
{
    int status = 0;
    uint64_t deadline = ak_clock_mono_ms () + ms;
    for (;;) {
        pid_t r = waitpid (self->pid, &status, WNOHANG);
        if (r == self->pid) {
            self->pid = -1;
            *status_p = status;
            return true;
        }
        if (r < 0 && errno != EINTR) {
            self->pid = -1;
            *status_p = 0;
            return false;
        }
        if (ak_clock_mono_ms () >= deadline)
            break;
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep (&ts, NULL);
    }
    kill (self->pid, SIGKILL);
    while (waitpid (self->pid, &status, 0) < 0 && errno == EINTR)
        ;
    self->pid = -1;
    *status_p = status;
    return false;
}

void ak_exec_destroy (ak_exec_t **self_p)
{
    if (self_p && *self_p) {
        ak_exec_t *self = *self_p;
        if (self->fd >= 0)
            close (self->fd);
        if (self->pid > 0) {
            int status = 0;
            s_reap (self, AK_EXEC_REAP_MS, &status);
        }
        ak_frame_reader_reset (&self->reader);
        free (self);
        *self_p = NULL;
    }
}

int ak_exec_fd (const ak_exec_t *self)
{
    return self ? self->fd : -1;
}

pid_t ak_exec_pid (const ak_exec_t *self)
{
    return self ? self->pid : -1;
}

pid_t ak_exec_spawned_pid (const ak_exec_t *self)
{
    return self ? self->spawned : -1;
}

bool ak_exec_busy (const ak_exec_t *self)
{
    return self && self->busy;
}

uint64_t ak_exec_deadline (const ak_exec_t *self)
{
    return self && self->busy ? self->deadline_ms : 0;
}

int ak_exec_submit (ak_exec_t *self, const Ak__ExecJob *job, uint32_t timeout_ms, ak_err_t *err)
{
    if (!self || !job)
        return ak_err_set (err, AK_EINVAL, "executor submit: bad arguments");
    if (self->busy)
        return ak_err_set (err, AK_ESTATE, "executor %d is busy", (int) self->pid);
    if (self->pid <= 0 || self->fd < 0)
        return ak_err_set (err, AK_ESTATE, "executor is gone");
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = ak_pb_pack (job, &data, &len);
    if (rc)
        return ak_err_set (err, rc, "executor submit: cannot pack the job");
    if (len > AK_MAX_MSG_SIZE) {
        free (data);
        return ak_err_set (err, AK_ETOOBIG, "job of %zu bytes, limit %u", len, (unsigned) AK_MAX_MSG_SIZE);
    }
    rc = ak_frame_write (self->fd, data, len, err);
    free (data);
    if (rc)
        return ak_err_prefix (err, "executor %d", (int) self->pid);
    self->busy = true;
    self->timeout_ms = timeout_ms;
    self->deadline_ms = ak_clock_mono_ms () + timeout_ms;
    return 0;
}

int ak_exec_on_readable (ak_exec_t *self, Ak__Receipt **receipt_p, ak_err_t *err)
{
    *receipt_p = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    ak_err_t rerr = { 0 };
    int rc = ak_frame_reader_feed (&self->reader, self->fd, &data, &len, &rerr);
    if (rc == 0)
        return 0;
    if (rc < 0) {
        /* End of stream or garbage: the executor is dead or broken. */
        int status = 0;
        bool own = self->pid > 0 && s_reap (self, rc == AK_EIO ? AK_EXEC_EOF_REAP_MS : 0, &status);
        char why[160];
        if (own)
            s_status_text (status, why, sizeof why);
        else
            snprintf (why, sizeof why, "executor broke the protocol (%.100s)", rerr.msg);
        self->busy = false;
        return ak_err_set (err, AK_ECRASH, "%s", why);
    }
    Ak__Receipt *r = ak__receipt__unpack (NULL, len, data);
    free (data);
    if (!r || !self->busy) {
        if (r)
            ak__receipt__free_unpacked (r, NULL);
        int status = 0;
        if (self->pid > 0)
            s_reap (self, 0, &status);
        self->busy = false;
        return ak_err_set (err, AK_ECRASH, "executor sent %s",
                           r ? "a receipt without a job" : "a malformed receipt");
    }
    self->busy = false;
    self->deadline_ms = 0;
    *receipt_p = r;
    return 0;
}

int ak_exec_check (ak_exec_t *self, uint64_t now_ms, ak_err_t *err)
{
    if (!self || !self->busy || now_ms < self->deadline_ms)
        return 0;
    if (self->pid > 0) {
        int status = 0;
        s_reap (self, 0, &status);
    }
    self->busy = false;
    return ak_err_set (err, AK_ETIMEOUT, "no answer within %u ms (run_timeout_ms); executor killed",
                       self->timeout_ms);
}

int ak_exec_run (ak_exec_t *self, const Ak__ExecJob *job, uint32_t timeout_ms,
                 Ak__Receipt **receipt_p, ak_err_t *err)
{
    const Ak__Assign *assign = job ? job->assign : NULL;
    *receipt_p = NULL;
    int rc = ak_exec_submit (self, job, timeout_ms, err);
    if (rc) {
        *receipt_p = ak_pb_receipt_for (assign, "crashed", err ? err->msg : "executor did not take the job");
        return AK_ECRASH;
    }
    for (;;) {
        uint64_t now = ak_clock_mono_ms ();
        rc = ak_exec_check (self, now, err);
        if (rc) {
            *receipt_p = ak_pb_receipt_for (assign, "timeout", err ? err->msg : "timeout");
            return rc;
        }
        uint64_t wait = self->deadline_ms > now ? self->deadline_ms - now : 0;
        if (wait > 100)
            wait = 100;
        struct pollfd pfd = { .fd = self->fd, .events = POLLIN };
        int n = poll (&pfd, 1, (int) wait);
        if (n < 0 && errno != EINTR)
            return ak_err_set (err, AK_EIO, "poll: %s", strerror (errno));
        if (n <= 0)
            continue;
        Ak__Receipt *r = NULL;
        rc = ak_exec_on_readable (self, &r, err);
        if (rc) {
            *receipt_p = ak_pb_receipt_for (assign, "crashed", err ? err->msg : "executor died");
            return rc;
        }
        if (r) {
            *receipt_p = r;
            return 0;
        }
    }
}

/* ----------------------------------------------------------- child side */

/*  Candidate faults must kill the process with their own signal: undo any
    handler a runtime (sanitizers) installed, so the daemon sees SIGSEGV
    and not an abort from a report. */
static void s_child_signals (void)
{
    static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS };
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset (&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaction (fatal[i], &sa, NULL);
    /* Ctrl-C reaches the whole process group: the daemon decides when the
       executor ends (by closing its socket). */
    sa.sa_handler = SIG_IGN;
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGPIPE, &sa, NULL);
}

/*  How the device cache of reference outputs frees a buffer. */
typedef struct {
    const ak_backend_t *be;
    ak_dev_t           *dev;
} s_release_arg_t;

static void s_dev_release (void *arg, void *buf)
{
    s_release_arg_t *a = arg;
    a->be->release (a->dev, &buf);
}

static void s_log_cache (const char *what, ak_refcache_t *cache)
{
    if (!cache)
        return;
    ak_refcache_stats_t st;
    ak_refcache_stats (cache, &st);
    ak_debug ("executor: %s %llu entries, %llu MiB of %llu, %llu hits, %llu misses, %llu evictions, "
              "%llu too big", what, (unsigned long long) st.entries, (unsigned long long) (st.bytes >> 20),
              (unsigned long long) (st.max_bytes >> 20), (unsigned long long) st.hits,
              (unsigned long long) st.misses, (unsigned long long) st.evictions,
              (unsigned long long) st.too_big);
}

int ak_executor_main (int fd, const char *backend, uint32_t device, const char *scratch)
{
    int code = 0;
    Ak__Device **devices = NULL;
    size_t ndevices = 0;
    ak_dev_t *dev = NULL;
    ak_refcache_t *cache = NULL, *dcache = NULL;
    s_release_arg_t rel = { 0 };
    ak_err_t err = { 0 };

    s_child_signals ();
    const ak_backend_t *be = ak_backend_find (backend);
    if (!be) {
        ak_error ("executor: backend '%s' is not available in this build", backend ? backend : "");
        return 2;
    }
    if (be->probe (&devices, &ndevices, &err) != 0) {
        ak_error ("executor: %s probe: %s", be->name, err.msg);
        return 2;
    }
    const Ak__Device *d = NULL;
    for (size_t i = 0; i < ndevices; i++)
        if (devices[i]->index == device)
            d = devices[i];
    if (!d) {
        ak_error ("executor: %s has no device %u", be->name, device);
        code = 2;
        goto done;
    }
    if (be->open (d, &dev, &err) != 0) {
        ak_error ("executor: %s device %u: %s", be->name, device, err.msg);
        code = 2;
        goto done;
    }
    /* Host kernels run in a confined job process of their own
       (jobproc.h); a CUDA kernel runs on the device this process owns. */
    bool confine = strcmp (be->name, "host") == 0;
    /* References kept across this executor's jobs (refcache.h); host jobs
       run in processes of their own, with caches of their own. */
    cache = confine ? NULL : ak_refcache_new (ak_refcache_env_bytes ());
    /* Device references' outputs kept on the device (gates.h, drefcache),
       where the backend compares on the device. */
    rel = (s_release_arg_t) { be, dev };
    uint64_t dbytes = ak_refcache_env_dev_bytes ();
    if (!confine && be->compare && dbytes)
        dcache = ak_refcache_new_device (dbytes, s_dev_release, &rel);
    ak_debug ("executor ready on %s device %u (reference cache %llu MiB)", be->name, device,
              cache ? (unsigned long long) (ak_refcache_env_bytes () >> 20) : 0ull);
    for (;;) {
        uint8_t *data = NULL;
        size_t len = 0;
        int rc = ak_frame_read (fd, AK_MAX_MSG_SIZE, &data, &len, &err);
        if (rc) {
            if (strstr (err.msg, "end of stream") == NULL) {
                ak_error ("executor: %s", err.msg);
                code = 1;
            }
            break;
        }
        Ak__ExecJob *job = ak__exec_job__unpack (NULL, len, data);
        free (data);
        Ak__Receipt *r = NULL;
        int fatal = 0;
        if (!job)
            r = ak_pb_receipt_for (NULL, "error", "executor got a malformed job");
        else if (confine)
            r = ak_jobproc_run (be, dev, d, job, scratch, &fatal);
        else
            r = ak_job_run (be, dev, d, job, cache, dcache);
        s_log_cache ("reference cache", cache);
        s_log_cache ("device reference cache", dcache);
        if (fatal) {
            /* A kernel's own death (SIGSEGV, SIGXCPU ...) ends this
               executor the same way, as when kernels ran here: the daemon
               reports "executor killed by SIGSEGV" and starts a fresh one. */
            ak__receipt__free_unpacked (r, NULL);
            ak__exec_job__free_unpacked (job, NULL);
            signal (fatal, SIG_DFL);
            raise (fatal);
            _exit (128 + fatal);
        }
        uint8_t *out = NULL;
        size_t out_len = 0;
        rc = ak_pb_pack (r, &out, &out_len);
        char why[320];
        if (rc == 0 && ak_receipt_check (out, out_len, r->task_id, why, sizeof why) != 0) {
            /* Keep the verdict, drop the bulk: the coordinator refuses a
               receipt past its limits (common/receipt_limits.h). */
            free (out);
            out = NULL;
            Ak__Receipt *small = ak_pb_receipt_for (job ? job->assign : NULL, r->status, r->reason);
            char reason[400];
            snprintf (reason, sizeof reason, "receipt too large (%s); gates and timings dropped", why);
            ak_pb_set_str (&small->reason, reason);
            rc = ak_pb_pack (small, &out, &out_len);
            ak__receipt__free_unpacked (small, NULL);
        }
        /* "crashed" from a job means the device context is lost (a sticky
           CUDA error): this process cannot run another job, so it leaves
           after the receipt and the daemon starts a fresh executor. */
        bool lost = strcmp (r->status, "crashed") == 0;
        ak__receipt__free_unpacked (r, NULL);
        if (job)
            ak__exec_job__free_unpacked (job, NULL);
        if (rc == 0)
            rc = ak_frame_write (fd, out, out_len, &err);
        free (out);
        if (rc) {
            ak_error ("executor: sending the receipt: %s", err.msg);
            code = 1;
            break;
        }
        if (lost) {
            ak_warn ("executor: %s device %u context lost; exiting so that a fresh executor "
                     "takes over", be->name, device);
            code = 3;
            break;
        }
    }
done:
    ak_refcache_destroy (&cache);
    ak_refcache_destroy (&dcache);         /* its buffers are on dev: before close */
    if (dev)
        be->close (&dev);
    for (size_t i = 0; i < ndevices; i++)
        ak__device__free_unpacked (devices[i], NULL);
    free (devices);
    return code;
}
