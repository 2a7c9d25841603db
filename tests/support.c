/*  tests/support.c: helpers shared by the cmocka test binaries. */
#include "support.h"

#include <sys/prctl.h>
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void s_sleep_ms (int ms)
{
    struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
    while (nanosleep (&ts, &ts) != 0 && errno == EINTR)
        ;
}

char *ak_test_tmpdir (const char *tag)
{
    const char *base = getenv ("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    char *path = ak_sprintf ("%s/ak-%s-XXXXXX", base, tag ? tag : "test");
    if (!mkdtemp (path)) {
        fprintf (stderr, "ak_test_tmpdir: mkdtemp %s: %s\n", path, strerror (errno));
        free (path);
        return NULL;
    }
    return path;
}

static int s_rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    (void) ftw;
    if (remove (path) != 0 && errno != ENOENT)
        fprintf (stderr, "ak_test_rmtree: %s: %s\n", path, strerror (errno));
    return 0;
}

void ak_test_rmtree (const char *path)
{
    if (!path || !*path || strcmp (path, "/") == 0)
        return;
    nftw (path, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *ak_test_src (const char *rel)
{
    const char *dir = getenv ("AK_SOURCE_DIR");
#ifdef AK_SOURCE_DIR
    if (!dir || !*dir)
        dir = AK_SOURCE_DIR;
#endif
    return ak_path_join (dir && *dir ? dir : ".", rel);
}

char *ak_test_bin (const char *name)
{
    const char *dir = getenv ("AK_BIN_DIR");
    return ak_path_join (dir && *dir ? dir : "bin", name);
}

char *ak_test_write (const char *dir, const char *name, const char *text)
{
    char *path = ak_path_join (dir, name);
    FILE *f = fopen (path, "w");
    if (!f) {
        fprintf (stderr, "ak_test_write: %s: %s\n", path, strerror (errno));
        free (path);
        return NULL;
    }
    size_t n = text ? strlen (text) : 0;
    if ((n && fwrite (text, 1, n, f) != n) || fclose (f) != 0) {
        if (n)
            fprintf (stderr, "ak_test_write: %s: write failed\n", path);
        free (path);
        return NULL;
    }
    return path;
}

/*  fork + execv; the child gets /dev/null as stdin and, with log_path,
    stdout and stderr appended to that file. */
pid_t ak_test_spawn (char *const argv[], const char *log_path)
{
    if (!argv || !argv[0])
        return -1;
    fflush (stdout);
    fflush (stderr);
    pid_t parent = getpid ();
    pid_t pid = fork ();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* A test that fails or is killed by its timeout must not leave
           daemons behind that later runs then talk to. */
        if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid () != parent)
            _exit (125);
        int in = open ("/dev/null", O_RDONLY);
        if (in >= 0) {
            dup2 (in, STDIN_FILENO);
            if (in > STDERR_FILENO)
                close (in);
        }
        if (log_path) {
            int fd = open (log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd < 0)
                _exit (126);
            if (dup2 (fd, STDOUT_FILENO) < 0 || dup2 (fd, STDERR_FILENO) < 0)
                _exit (126);
            if (fd > STDERR_FILENO)
                close (fd);
        }
        execv (argv[0], argv);
        _exit (127);
    }
    return pid;
}

/*  Sends sig, then polls for the exit for up to timeout_ms; a process still
    running after that gets SIGKILL.  Returns the waitpid status, or -1 if pid
    is not our child. */
pid_t ak_test_spawn_coord (char *const argv[], const char *log_path)
{
    size_t n = 0;
    while (argv[n])
        n++;
    char **args = ak_calloc (n + 2, sizeof *args);
    args[0] = argv[0];
    args[1] = "--plain";
    for (size_t i = 1; i < n; i++)
        args[i + 1] = argv[i];
    pid_t pid = ak_test_spawn (args, log_path);
    free (args);
    return pid;
}

int ak_test_stop (pid_t pid, int sig, int timeout_ms)
{
    if (pid <= 0)
        return -1;
    int status = 0;
    if (kill (pid, sig) != 0 && errno != ESRCH)
        return -1;
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        pid_t r = waitpid (pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        s_sleep_ms (10);
    }
    kill (pid, SIGKILL);
    for (;;) {
        pid_t r = waitpid (pid, &status, 0);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/*  popen (cmdline) and read all of its stdout.  Returns the exit code, or
    -1 if it could not run or did not exit normally. */
int ak_test_run (const char *cmdline, char **out_p)
{
    if (out_p)
        *out_p = NULL;
    if (!cmdline)
        return -1;
    fflush (stdout);
    fflush (stderr);
    FILE *p = popen (cmdline, "r");
    if (!p)
        return -1;
    size_t len = 0, cap = 4096;
    char *buf = ak_malloc (cap);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            buf = ak_realloc (buf, cap);
        }
        size_t n = fread (buf + len, 1, cap - len - 1, p);
        if (n == 0)
            break;
        len += n;
    }
    buf[len] = '\0';
    int status = pclose (p);
    if (out_p)
        *out_p = buf;
    else
        free (buf);
    if (status < 0 || !WIFEXITED (status))
        return -1;
    return WEXITSTATUS (status);
}

bool ak_test_wait (bool (*fn) (void *arg), void *arg, int timeout_ms)
{
    struct timespec start, now;
    clock_gettime (CLOCK_MONOTONIC, &start);
    for (;;) {
        if (fn (arg))
            return true;
        clock_gettime (CLOCK_MONOTONIC, &now);
        long elapsed = (long) (now.tv_sec - start.tv_sec) * 1000 +
                       (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed >= timeout_ms)
            return fn (arg);
        s_sleep_ms (20);
    }
}

/*  The value at path ("ops[0].policy.threshold"), or NULL. */
json_t *ak_test_json_at (json_t *root, const char *path)
{
    json_t *cur = root;
    const char *p = path;
    while (cur && *p) {
        char key[128];
        size_t n = 0;
        if (*p == '[') {
            long index = strtol (p + 1, (char **) &p, 10);
            p++;
            cur = json_array_get (cur, (size_t) index);
        }
        else {
            while (*p && *p != '.' && *p != '[' && n < sizeof key - 1)
                key[n++] = *p++;
            key[n] = '\0';
            cur = json_object_get (cur, key);
        }
        if (*p == '.')
            p++;
    }
    return cur;
}

/*  Sets (value non-NULL, stolen) or deletes the member at path of root;
    the parent must exist. */
void ak_test_json_set (json_t *root, const char *path, json_t *value)
{
    const char *dot = strrchr (path, '.'), *bracket = strrchr (path, '[');
    const char *cut = dot > bracket ? dot : bracket;
    json_t *parent = root;
    char head[256];
    if (cut) {
        snprintf (head, sizeof head, "%.*s", (int) (cut - path), path);
        parent = ak_test_json_at (root, head);
        if (!parent)
            fail_msg ("ak_test_json_set: no %s in the fixture", head);
    }
    const char *last = cut ? (cut == dot ? cut + 1 : cut) : path;
    if (*last == '[') {
        size_t index = (size_t) strtol (last + 1, NULL, 10);
        if (value)
            assert_int_equal (json_array_set_new (parent, index, value), 0);
        else
            assert_int_equal (json_array_remove (parent, index), 0);
    }
    else if (value)
        assert_int_equal (json_object_set_new (parent, last, value), 0);
    else
        assert_int_equal (json_object_del (parent, last), 0);
}

static int s_name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/*  Is name one of the comma-separated names in list? */
static bool s_listed (const char *list, const char *name)
{
    size_t len = strlen (name);
    for (const char *p = list; (p = strstr (p, name)); p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == 0))
            return true;
    return false;
}

int ak_test_catalog_ops (char *ops[], int max)
{
    char *root = ak_test_src ("kernels");
    DIR *d = opendir (root);
    assert_non_null (d);
    const char *only = getenv ("AK_CATALOG_OPS");
    int n = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        if (e->d_name[0] == '.' || (only && *only && !s_listed (only, e->d_name)))
            continue;
        char *spec = ak_sprintf ("%s/%s/spec.json", root, e->d_name);
        if (access (spec, R_OK) == 0) {
            assert_true (n < max);
            ops[n++] = ak_strdup (e->d_name);
        }
        free (spec);
    }
    closedir (d);
    free (root);
    qsort (ops, (size_t) n, sizeof ops[0], s_name_cmp);
    assert_true (n > 0);
    return n;
}
