/*  ops/akctl/demo.c: the whole system on one host, in one command.

    `akctl demo` starts a private akcoord and N akworker processes (the
    binaries next to akctl) that talk over ipc:// endpoints inside one
    directory, submits the built-in batch, follows it with the live
    progress line, prints the report and shuts everything down.

    It must never leave processes behind: children run in their own process
    group (so a Ctrl-C on the terminal reaches akctl alone, which then stops
    them in order) and get SIGTERM from the kernel should akctl die without
    cleaning up (PR_SET_PDEATHSIG). */
#include "akctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "datadir.h"
#include "util.h"

#define S_MAX_WORKERS      64
#define S_START_MS         15000   /* coordinator answering, workers registered */
#define S_STOP_MS          10000   /* after SIGTERM / shutdown, before SIGKILL */
#define S_KILL_MS          3000
#define S_DEMO_MANIFEST    "kernels/batches/demo.json"

typedef struct {
    char  *name;                   /* "akcoord", "demo-w1" */
    char  *log;                    /* DIR/NAME.log */
    pid_t  pid;                    /* 0 once reaped */
    int    status;                 /* waitpid status once reaped */
} s_child_t;

typedef struct {
    char          *dir;            /* absolute */
    bool           remove_dir;
    char          *bindir;
    char          *workers_ep;
    char          *clients_ep;
    s_child_t      coord;
    s_child_t      workers[S_MAX_WORKERS];
    int            nworkers;
    akctl_client_t *client;
} s_demo_t;

/* ------------------------------------------------------------ processes */

/*  Starts argv[0] with argv, stdin from /dev/null, stdout and stderr
    appended to child->log.  Only async-signal-safe calls between fork and
    exec: everything the child needs is prepared before the fork. */
static int s_spawn (s_child_t *child, char *const argv[], ak_err_t *err)
{
    int logfd = open (child->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        return ak_err_set (err, AK_EIO, "%s: %s", child->log, strerror (errno));
    int nullfd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        close (logfd);
        return ak_err_set (err, AK_EIO, "/dev/null: %s", strerror (errno));
    }
    pid_t parent = getpid ();
    pid_t pid = fork ();
    if (pid == 0) {
        setpgid (0, 0);
        prctl (PR_SET_PDEATHSIG, SIGTERM);
        if (getppid () != parent)
            _exit (127);            /* akctl died before prctl took effect */
        sigset_t none;
        sigemptyset (&none);
        sigprocmask (SIG_SETMASK, &none, NULL);
        dup2 (nullfd, STDIN_FILENO);
        dup2 (logfd, STDOUT_FILENO);
        dup2 (logfd, STDERR_FILENO);
        execv (argv[0], argv);
        static const char msg[] = "akctl demo: exec failed\n";
        ssize_t w = write (STDERR_FILENO, msg, sizeof msg - 1);
        (void) w;
        _exit (127);
    }
    int e = errno;
    close (logfd);
    close (nullfd);
    if (pid < 0)
        return ak_err_set (err, AK_EIO, "fork for %s: %s", child->name, strerror (e));
    child->pid = pid;
    return 0;
}

/*  True while the child runs; reaps it (keeping its status) once it ended. */
static bool s_running (s_child_t *child)
{
    if (child->pid <= 0)
        return false;
    int status;
    pid_t r = waitpid (child->pid, &status, WNOHANG);
    if (r == child->pid || (r < 0 && errno == ECHILD)) {
        child->status = r == child->pid ? status : 0;
        child->pid = 0;
        return false;
    }
    return true;
}

/*  Waits up to ms for the child to end. */
static bool s_wait_exit (s_child_t *child, int ms)
{
    uint64_t deadline = ak_clock_mono_ms () + (uint64_t) ms;
    while (s_running (child)) {
        if (ak_clock_mono_ms () >= deadline)
            return false;
        struct timespec ts = { 0, 20 * 1000000L };
        nanosleep (&ts, NULL);
    }
    return true;
}

static void s_describe_status (const s_child_t *child, char *buf, size_t len)
{
    if (WIFEXITED (child->status))
        snprintf (buf, len, "exited %d", WEXITSTATUS (child->status));
    else
    if (WIFSIGNALED (child->status))
        snprintf (buf, len, "killed by signal %d", WTERMSIG (child->status));
    else
        snprintf (buf, len, "ended");
}

/*  The last lines of a child's log on stderr, so a failure explains itself. */
static void s_log_tail (const s_child_t *child, int lines)
{
    char *text = NULL;
    size_t len = 0;
    if (ak_file_read (child->log, 64u << 20, &text, &len, NULL) != 0)
        return;
    const char *p = text + len;
    int seen = 0;
    while (p > text && seen <= lines) {
        p--;
        if (*p == '\n' && p + 1 < text + len)
            seen++;
    }
    if (*p == '\n')
        p++;
    fprintf (stderr, "---- last lines of %s\n%s%s----\n", child->log, p,
             len && text[len - 1] != '\n' ? "\n" : "");
    free (text);
}

/*  SIGTERM, a bounded wait, SIGKILL as the last resort.  Returns true when
    the child ended without needing SIGKILL. */
static bool s_stop_child (s_child_t *child, int sig, int ms)
{
    if (!s_running (child))
        return true;
    if (sig)
        kill (child->pid, sig);
    if (s_wait_exit (child, ms))
        return true;
    fprintf (stderr, "akctl demo: %s (pid %d) did not stop within %d ms: SIGKILL\n",
             child->name, (int) child->pid, ms);
    kill (child->pid, SIGKILL);
    s_wait_exit (child, S_KILL_MS);
    return false;
}

/* ------------------------------------------------------------- the demo */

char *akctl_demo_manifest_path (ak_err_t *err)
{
    char *tried = NULL;
    char *found = ak_datadir_find (S_DEMO_MANIFEST, NULL, R_OK, &tried);
    if (!found)
        ak_err_set (err, AK_ENOTFOUND, "the demo batch %s is in none of %s (set $AK_SOURCE_DIR to a source tree)",
                    S_DEMO_MANIFEST, tried ? tried : "(nowhere to look)");
    free (tried);
    return found;
}

static int s_rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    (void) ftw;
    return remove (path) == 0 || errno == ENOENT ? 0 : -1;
}

/*  The work directory: --dir (created if needed) or a fresh one under
    $TMPDIR.  ipc:// paths must fit a sockaddr_un, so a long one is refused. */
static int s_make_dir (s_demo_t *self, const akctl_opts_t *o)
{
    if (o->dir) {
        ak_err_t err = { 0, "" };
        if (ak_mkdir_p (o->dir, 0700, &err) != 0) {
            fprintf (stderr, "akctl demo: %s\n", err.msg);
            return AKCTL_EXIT_USAGE;
        }
        char *real = realpath (o->dir, NULL);
        if (!real) {
            fprintf (stderr, "akctl demo: %s: %s\n", o->dir, strerror (errno));
            return AKCTL_EXIT_USAGE;
        }
        self->dir = ak_strdup (real);
        free (real);
        self->remove_dir = false;
    }
    else {
        const char *tmp = getenv ("TMPDIR");
        char *templ = ak_sprintf ("%s/akfleet-demo.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp (templ)) {
            fprintf (stderr, "akctl demo: mkdtemp %s: %s\n", templ, strerror (errno));
            free (templ);
            return AKCTL_EXIT_NEGATIVE;
        }
        char *real = realpath (templ, NULL);
        self->dir = ak_strdup (real ? real : templ);
        free (real);
        free (templ);
        self->remove_dir = !o->keep;
    }
    struct sockaddr_un sun;
    if (strlen (self->dir) + strlen ("/workers.ipc") >= sizeof sun.sun_path) {
        fprintf (stderr, "akctl demo: %s: path too long for ipc:// endpoints (at most %zu characters)\n",
                 self->dir, sizeof sun.sun_path - 1 - strlen ("/workers.ipc"));
        return AKCTL_EXIT_USAGE;
    }
    self->workers_ep = ak_sprintf ("ipc://%s/workers.ipc", self->dir);
    self->clients_ep = ak_sprintf ("ipc://%s/clients.ipc", self->dir);
    return AKCTL_EXIT_OK;
}

/*  Starts akcoord and waits until it answers `stats`. */
static int s_start_coordinator (s_demo_t *self, const akctl_opts_t *o)
{
    char *bin = ak_sprintf ("%s/akcoord", self->bindir);
    char *store = ak_sprintf ("%s/store", self->dir);
    /* plain: a private coordinator on ipc:// endpoints in a directory of
       this user's, which nobody else reaches (akcoord says so loudly) */
    char *argv[] = { bin, "--store", store, "--workers", self->workers_ep, "--clients",
                     self->clients_ep, "--plain", "--log-level", "info", NULL };
    self->coord.name = ak_strdup ("akcoord");
    self->coord.log = ak_sprintf ("%s/akcoord.log", self->dir);
    ak_err_t err = { 0, "" };
    int rc = s_spawn (&self->coord, argv, &err);
    free (bin);
    free (store);
    if (rc != 0) {
        fprintf (stderr, "akctl demo: cannot start akcoord: %s\n", err.msg);
        return AKCTL_EXIT_NEGATIVE;
    }
    printf ("  akcoord    pid %-7d clients %s\n", (int) self->coord.pid, self->clients_ep);
    fflush (stdout);

    akctl_client_set_auth (NULL, NULL);     /* the demo's coordinator is plain */
    self->client = akctl_client_new (self->clients_ep, o->timeout_ms, &err);
    if (!self->client) {
        fprintf (stderr, "akctl demo: %s\n", err.msg);
        return AKCTL_EXIT_NEGATIVE;
    }
    uint64_t deadline = ak_clock_mono_ms () + S_START_MS;
    while (!akctl_stop) {
        if (!s_running (&self->coord)) {
            char how[64];
            s_describe_status (&self->coord, how, sizeof how);
            fprintf (stderr, "akctl demo: akcoord %s while starting\n", how);
            s_log_tail (&self->coord, 20);
            return AKCTL_EXIT_NEGATIVE;
        }
        akctl_reply_t reply;
        rc = akctl_client_call_within (self->client, 300, "stats", NULL, 0, NULL, &reply, &err);
        akctl_reply_free (&reply);
        if (rc == 0)
            return AKCTL_EXIT_OK;
        if (ak_clock_mono_ms () >= deadline) {
            fprintf (stderr, "akctl demo: akcoord did not answer on %s within %d ms\n",
                     self->clients_ep, S_START_MS);
            s_log_tail (&self->coord, 20);
            return AKCTL_EXIT_NEGATIVE;
        }
    }
    return 130;
}

/*  Counts workers named demo-w* that the coordinator lists as alive. */
static int s_alive_workers (s_demo_t *self)
{
    akctl_reply_t reply;
    ak_err_t err = { 0, "" };
    int alive = 0;
    if (akctl_client_call_within (self->client, 1000, "workers", NULL, 0, NULL, &reply, &err) == 0
        && reply.code == 0) {
        json_t *answer = json_loads (reply.json, 0, NULL);
        size_t i;
        json_t *w;
        json_array_foreach (akj_arr (answer, "workers"), i, w)
            if (strncmp (akj_str (w, "worker_id"), "demo-w", 6) == 0
                && strcmp (akj_str (w, "state"), "alive") == 0)
                alive++;
        json_decref (answer);
    }
    akctl_reply_free (&reply);
    return alive;
}

/*  Starts the workers and waits until every one has registered. */
static int s_start_workers (s_demo_t *self, int n)
{
    char *bin = ak_sprintf ("%s/akworker", self->bindir);
    ak_err_t err = { 0, "" };
    for (int i = 0; i < n; i++) {
        s_child_t *w = &self->workers[i];
        w->name = ak_sprintf ("demo-w%d", i + 1);
        w->log = ak_sprintf ("%s/%s.log", self->dir, w->name);
        char *cache = ak_sprintf ("%s/cache/%s", self->dir, w->name);
        char *argv[] = { bin, "--coordinator", self->workers_ep, "--id", w->name, "--cache", cache,
                         "--log-level", "info", NULL };
        int rc = ak_mkdir_p (cache, 0700, &err);
        if (rc == 0)
            rc = s_spawn (w, argv, &err);
        free (cache);
        if (rc != 0) {
            fprintf (stderr, "akctl demo: cannot start %s: %s\n", w->name, err.msg);
            free (bin);
            return AKCTL_EXIT_NEGATIVE;
        }
        self->nworkers++;
        printf ("  akworker   pid %-7d id %s\n", (int) w->pid, w->name);
    }
    free (bin);
    fflush (stdout);

    uint64_t deadline = ak_clock_mono_ms () + S_START_MS;
    while (!akctl_stop) {
        for (int i = 0; i < self->nworkers; i++)
            if (!s_running (&self->workers[i])) {
                char how[64];
                s_describe_status (&self->workers[i], how, sizeof how);
                fprintf (stderr, "akctl demo: %s %s while starting\n", self->workers[i].name, how);
                s_log_tail (&self->workers[i], 20);
                return AKCTL_EXIT_NEGATIVE;
            }
        int alive = s_alive_workers (self);
        if (alive >= n) {
            printf ("  %d worker(s) registered\n", alive);
            fflush (stdout);
            return AKCTL_EXIT_OK;
        }
        if (ak_clock_mono_ms () >= deadline) {
            fprintf (stderr, "akctl demo: only %d of %d workers registered within %d ms\n", alive, n,
                     S_START_MS);
            for (int i = 0; i < self->nworkers; i++)
                s_log_tail (&self->workers[i], 10);
            return AKCTL_EXIT_NEGATIVE;
        }
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep (&ts, NULL);
    }
    return 130;
}

/*  watch's check: the coordinator and at least one worker still run. */
static bool s_children_alive (void *arg, char *why, size_t len)
{
    s_demo_t *self = arg;
    if (!s_running (&self->coord)) {
        char how[64];
        s_describe_status (&self->coord, how, sizeof how);
        snprintf (why, len, "akcoord %s (log: %s)", how, self->coord.log);
        return false;
    }
    for (int i = 0; i < self->nworkers; i++)
        if (s_running (&self->workers[i]))
            return true;
    snprintf (why, len, "every worker has exited (logs: %s/demo-w*.log)", self->dir);
    return false;
}

/*  Prints the report and checks that every operator x target of the
    manifest has a result (a winner, promoted or "baseline kept"). */
static int s_report (s_demo_t *self, const char *batch_id, char **pairs, int npairs, bool json)
{
    char *args[1] = { (char *) batch_id };
    akctl_reply_t reply;
    ak_err_t err = { 0, "" };
    int rc = akctl_client_call (self->client, "report", args, 1, NULL, &reply, &err);
    int code = akctl_call_exit (rc, &reply, &err);
    if (code != AKCTL_EXIT_OK) {
        akctl_reply_free (&reply);
        return code;
    }
    json_t *report = akctl_parse_json (reply.json, "report");
    if (!report) {
        akctl_reply_free (&reply);
        return AKCTL_EXIT_NEGATIVE;
    }
    printf ("\n");
    if (json)
        printf ("%s\n", reply.json);
    else
        akctl_render_report (stdout, report, false);
    printf ("\n");
    int missing = 0;
    for (int p = 0; p < npairs; p++) {
        bool found = false;
        size_t i;
        json_t *op;
        json_array_foreach (akj_arr (report, "ops"), i, op) {
            char *key = ak_sprintf ("%s@%s", akj_str (op, "op"), akj_str (op, "device_class"));
            if (strcmp (key, pairs[p]) == 0 && akj_obj (op, "winner"))
                found = true;
            free (key);
        }
        if (!found) {
            printf ("demo: no result for %s\n", pairs[p]);
            missing++;
        }
    }
    if (missing == 0)
        printf ("demo: every operator has a result (%d of %d)\n", npairs, npairs);
    json_decref (report);
    akctl_reply_free (&reply);
    return missing ? AKCTL_EXIT_NEGATIVE : AKCTL_EXIT_OK;
}

/*  Workers first (SIGTERM: they finish their conversation with the
    coordinator), then the coordinator through its `shutdown` verb, so it
    flushes and closes the store itself; signals only when that fails. */
static bool s_shutdown (s_demo_t *self)
{
    bool clean = true;
    for (int i = 0; i < self->nworkers; i++)
        if (s_running (&self->workers[i]))
            kill (self->workers[i].pid, SIGTERM);
    for (int i = 0; i < self->nworkers; i++)
        clean &= s_stop_child (&self->workers[i], 0, S_STOP_MS);
    if (s_running (&self->coord)) {
        bool asked = false;
        if (self->client) {
            akctl_reply_t reply;
            ak_err_t err = { 0, "" };
            asked = akctl_client_call_within (self->client, 2000, "shutdown", NULL, 0, NULL,
                                              &reply, &err) == 0 && reply.code == 0;
            akctl_reply_free (&reply);
        }
        if (asked)
            clean &= s_stop_child (&self->coord, 0, S_STOP_MS);
        else {
            fprintf (stderr, "akctl demo: akcoord did not take `shutdown`: SIGTERM\n");
            clean &= s_stop_child (&self->coord, SIGTERM, S_STOP_MS);
        }
    }
    akctl_client_destroy (&self->client);
    char how[64];
    for (int i = 0; i < self->nworkers; i++) {
        s_describe_status (&self->workers[i], how, sizeof how);
        if (!WIFEXITED (self->workers[i].status) || WEXITSTATUS (self->workers[i].status) != 0) {
            if (!(WIFSIGNALED (self->workers[i].status) && WTERMSIG (self->workers[i].status) == SIGTERM))
                clean = false;
            printf ("demo: %s %s\n", self->workers[i].name, how);
        }
    }
    if (self->coord.name) {
        s_describe_status (&self->coord, how, sizeof how);
        printf ("demo: akcoord %s\n", how);
        if (!WIFEXITED (self->coord.status) || WEXITSTATUS (self->coord.status) != 0)
            clean = false;
    }
    return clean;
}

static void s_demo_free (s_demo_t *self)
{
    free (self->dir);
    free (self->bindir);
    free (self->workers_ep);
    free (self->clients_ep);
    free (self->coord.name);
    free (self->coord.log);
    for (int i = 0; i < self->nworkers; i++) {
        free (self->workers[i].name);
        free (self->workers[i].log);
    }
}

int akctl_demo (const akctl_opts_t *o)
{
    s_demo_t self;
    memset (&self, 0, sizeof self);
    char *manifest = NULL, *bundle = NULL, *batch_id = NULL, **pairs = NULL;
    int npairs = 0;
    int code = AKCTL_EXIT_OK;
    ak_err_t err = { 0, "" };

    /* Everything that can be checked is checked before anything starts. */
    char exe[PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf (stderr, "akctl demo: readlink /proc/self/exe: %s\n", strerror (errno));
        return AKCTL_EXIT_NEGATIVE;
    }
    exe[n] = '\0';
    self.bindir = ak_dirname (exe);
    const char *needed[2] = { "akcoord", "akworker" };
    for (int i = 0; i < 2 && code == AKCTL_EXIT_OK; i++) {
        char *bin = ak_sprintf ("%s/%s", self.bindir, needed[i]);
        if (access (bin, X_OK) != 0) {
            fprintf (stderr, "akctl demo: %s: %s (the demo runs the binaries next to akctl)\n",
                     bin, strerror (errno));
            code = AKCTL_EXIT_NEGATIVE;
        }
        free (bin);
    }
    if (code == AKCTL_EXIT_OK) {
        manifest = o->npos == 1 ? ak_strdup (o->pos[0]) : akctl_demo_manifest_path (&err);
        if (!manifest) {
            fprintf (stderr, "akctl demo: %s\n", err.msg);
            code = AKCTL_EXIT_NEGATIVE;
        }
    }
    if (code == AKCTL_EXIT_OK)
        code = akctl_load_bundle (manifest, NULL, &bundle, &pairs, &npairs);
    if (code == AKCTL_EXIT_OK)
        code = s_make_dir (&self, o);
    if (code != AKCTL_EXIT_OK)
        goto done;

    akctl_catch_signals ();
    printf ("akfleet demo: %d worker(s) on this host, in %s\n", o->workers, self.dir);
    printf ("  batch      %s\n", manifest);
    fflush (stdout);
    code = s_start_coordinator (&self, o);
    if (code == AKCTL_EXIT_OK)
        code = s_start_workers (&self, o->workers);
    int64_t tasks = 0;
    if (code == AKCTL_EXIT_OK)
        code = akctl_submit_bundle (self.client, bundle, false, false, true, &batch_id, &tasks);
    if (code == AKCTL_EXIT_OK) {
        printf ("  submitted  batch %s: %" PRId64 " tasks for %d operator(s) x target(s)\n\n",
                batch_id, tasks, npairs);
        fflush (stdout);
        code = akctl_watch (self.client, batch_id, false, &akctl_stop, s_children_alive, &self, NULL);
        /* A batch that ended badly still has a report worth reading. */
        if ((code == AKCTL_EXIT_OK || code == AKCTL_EXIT_NEGATIVE) && !akctl_stop
            && s_running (&self.coord)) {
            int report = s_report (&self, batch_id, pairs, npairs, o->json);
            if (code == AKCTL_EXIT_OK)
                code = report;
        }
    }
    if (akctl_stop)
        code = 130;

    bool clean = s_shutdown (&self);
    printf ("demo: %s\n", clean ? "shut down cleanly" : "shut down, not cleanly (see the logs)");
    if (code != AKCTL_EXIT_OK && code != 130 && self.remove_dir) {
        self.remove_dir = false;
        printf ("demo: kept %s for its logs (akcoord.log, demo-w*.log)\n", self.dir);
    }
    if (self.remove_dir) {
        if (nftw (self.dir, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            fprintf (stderr, "akctl demo: could not remove all of %s: %s\n", self.dir, strerror (errno));
    }
    else
    if (self.dir && code == AKCTL_EXIT_OK)
        printf ("demo: store, logs and caches are in %s\n", self.dir);
    if (code == 130)
        fprintf (stderr, "akctl demo: interrupted\n");

done:
    if (pairs)
        for (int i = 0; i < npairs; i++)
            free (pairs[i]);
    free (pairs);
    free (batch_id);
    free (bundle);
    free (manifest);
    akctl_client_destroy (&self.client);
    s_demo_free (&self);
    fflush (stdout);
    return code;
}
