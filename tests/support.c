/*  tests/support.c: helpers shared by the cmocka test binaries. */
#include "support.h"

#include <link.h>

#include <sys/prctl.h>
#include "clock.h"
#include "util.h"
#include "source.h"
#include "space.h"
#include "digest.h"
#include "akfleet.pb-c.h"
#include "worker/pbutil.h"
#if AK_HAVE_CUDA
#include "worker/cuda_api.h"
#endif

#include <dirent.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void ak_test_sleep_ms (int ms)
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

char *ak_test_akprofile_lib (void)
{
    char *bin = ak_test_bin ("akctl");
    char *bindir = ak_dirname (bin);
    char *lib = ak_sprintf ("%s/lib/libakprofile.so", bindir);
    if (access (lib, R_OK) != 0) {
        free (lib);
        lib = ak_sprintf ("%s/../lib/libakprofile.so", bindir);
    }
    free (bindir);
    free (bin);
    return lib;
}

#if AK_HAVE_CUDA
const char *ak_test_nvrtc_file (void)
{
    const ak_cuda_nvrtc_t *nv = NULL;
    ak_err_t err = { 0 };
    if (ak_cuda_nvrtc (&nv, &err) != 0)
        fail_msg ("NVRTC: %s", err.msg);
    const char *file = ak_cuda_nvrtc_file ();
    assert_true (file[0] == '/');
    return file;
}
#endif

char *ak_test_read (const char *path)
{
    char *data = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    if (ak_file_read (path, 16u << 20, &data, &len, &err) != 0)
        return ak_strdup ("");
    return data;
}

char *ak_test_testing_kernel (const char *name)
{
    char *rel = ak_sprintf ("kernels/testing/cuda/%s.cu", name);
    char *path = ak_test_src (rel);
    char *text = NULL;
    ak_err_t err = { 0 };
    if (ak_file_read (path, AK_MAX_SOURCE_BYTES, &text, NULL, &err) != 0)
        fail_msg ("%s: %s", rel, err.msg);
    free (path);
    free (rel);
    return text;
}

char *ak_test_stub_spec (const char *name, const char *candidates_json)
{
    return ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"%s\", \"keys\": [\"rows\", \"cols\"],"
        " \"dtypes\": [\"float32\"], \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5}},"
        " \"sizes\": [{\"name\": \"small\", \"size\": {\"rows\": 4, \"cols\": 8}}],"
        " \"stability_size\": \"small\", \"flops\": \"rows*cols\", \"bytes\": \"2*rows*cols*b\","
        " \"inputs\": [{\"name\": \"x\", \"count\": \"rows*cols\", \"range\": [-1, 1]}],"
        " \"outputs\": [{\"name\": \"y\", \"count\": \"rows*cols\"}],"
        " \"reference\": \"ref.c\", \"baselines\": [{\"backend\": \"host\", \"source\": \"base.c\"}],"
        " \"candidates\": %s}", name, candidates_json);
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
        ak_test_sleep_ms (10);
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

/*  The pause between polls doubles from 20 ms up to S_POLL_MAX_MS: most
    predicates run `akctl` (a sanitizer build's process costs about 0.1 s
    of CPU), and polled every 20 ms they took most of a core from the
    processes whose effect they wait for on a 2-core box. */
#define S_POLL_MAX_MS 250

/*  LeakSanitizer off in the processes started until ak_test_leak_scan_on:
    half of a polled akctl's CPU in a sanitizer build (0.095 -> 0.045 s)
    was the leak scan at its exit, and a test's waits polled it a hundred
    times and more.  The same verbs run with the scan where a test calls
    them itself.  ASAN_OPTIONS is parsed left to right, so the appended
    flag wins; ak_test_leak_scan_on sets it back as it was (saved, freed). */
char *ak_test_leak_scan_off (void)
{
    const char *cur = getenv ("ASAN_OPTIONS");
    char *saved = cur ? ak_strdup (cur) : NULL;
    char *quiet = ak_sprintf ("%s%sdetect_leaks=0", saved ? saved : "", saved && saved[0] ? ":" : "");
    setenv ("ASAN_OPTIONS", quiet, 1);
    free (quiet);
    return saved;
}

void ak_test_leak_scan_on (char *saved)
{
    if (saved)
        setenv ("ASAN_OPTIONS", saved, 1);
    else
        unsetenv ("ASAN_OPTIONS");
    free (saved);
}

static bool s_poll (bool (*fn) (void *arg), void *arg)
{
    char *saved = ak_test_leak_scan_off ();
    bool ok = fn (arg);
    ak_test_leak_scan_on (saved);
    return ok;
}

bool ak_test_wait (bool (*fn) (void *arg), void *arg, int timeout_ms)
{
    struct timespec start, now;
    clock_gettime (CLOCK_MONOTONIC, &start);
    int pause = 20;
    for (;;) {
        if (s_poll (fn, arg))
            return true;
        clock_gettime (CLOCK_MONOTONIC, &now);
        long elapsed = (long) (now.tv_sec - start.tv_sec) * 1000 +
                       (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed >= timeout_ms)
            return s_poll (fn, arg);
        ak_test_sleep_ms (elapsed + pause < timeout_ms ? pause : (int) (timeout_ms - elapsed));
        pause = pause * 2 < S_POLL_MAX_MS ? pause * 2 : S_POLL_MAX_MS;
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

bool ak_test_listed (const char *list, const char *name)
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
    const char *only = getenv ("AK_CATALOG_OPS"), *except = getenv ("AK_CATALOG_OPS_EXCEPT");
    int n = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        if (e->d_name[0] == '.' || (only && *only && !ak_test_listed (only, e->d_name))
            || (except && *except && ak_test_listed (except, e->d_name)))
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

char *ak_test_write_json (const char *dir, const char *name, const json_t *json,
                          const char *from, const char *to)
{
    char *text = json_dumps (json, JSON_INDENT (1));
    assert_non_null (text);
    if (from) {
        char *at = strstr (text, from);
        if (!at)
            fail_msg ("'%s' not in the fixture text", from);
        char *joined = ak_sprintf ("%.*s%s%s", (int) (at - text), text, to, at + strlen (from));
        free (text);
        text = joined;
    }
    char *path = ak_test_write (dir, name, text);
    assert_non_null (path);
    free (text);
    return path;
}

void ak_test_expect_refused (int rc, int code, const void *loaded, const char *msg,
                             const char *name, const char *needle1, const char *needle2)
{
    if (rc != code)
        fail_msg ("loaded with %d (expected %d): %s", rc, code, rc ? msg : "(no error)");
    assert_null (loaded);
    char *named = ak_sprintf ("%s: ", name);
    if (!strstr (msg, named))
        fail_msg ("message does not name the file: %s", msg);
    free (named);
    if (needle1 && !strstr (msg, needle1))
        fail_msg ("message lacks '%s': %s", needle1, msg);
    if (needle2 && !strstr (msg, needle2))
        fail_msg ("message lacks '%s': %s", needle2, msg);
}

json_t *ak_test_json_swap (json_t *root, const char *path, json_t *value)
{
    json_t *old = ak_test_json_at (root, path);
    old = old ? json_deep_copy (old) : NULL;
    ak_test_json_set (root, path, value);
    return old;
}

/*  Deleting what is not there is no change. */
void ak_test_json_restore (json_t *root, const char *path, json_t *old)
{
    if (old || ak_test_json_at (root, path))
        ak_test_json_set (root, path, old);
}

char *ak_test_vsprintf (const char *fmt, va_list ap)
{
    char *text = NULL;
    if (vasprintf (&text, fmt, ap) < 0)
        text = NULL;
    assert_non_null (text);
    return text;
}

/*  Runs cmd; with echo, prints it with its exit code and stdout. */
int ak_test_run_echo (const char *cmd, char **out_p, bool echo)
{
    char *out = NULL;
    int code = ak_test_run (cmd, &out);
    if (echo)
        print_message ("$ %s -> %d\n%s", cmd, code, out ? out : "");
    if (out_p)
        *out_p = out;
    else
        free (out);
    return code;
}

int ak_test_runf (char **out_p, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *cmd = ak_test_vsprintf (fmt, ap);
    va_end (ap);
    int code = ak_test_run_echo (cmd, out_p, true);
    free (cmd);
    return code;
}

/* ------------------------------------------------------------ network */

/* One HTTP/1.0 request to 127.0.0.1:port (support.h). */
int ak_test_http (int port, const char *method, const char *path, char **body_p)
{
    if (body_p)
        *body_p = NULL;
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true (fd >= 0);
    struct timeval tv = { .tv_sec = 10 };
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (connect (fd, (struct sockaddr *) &a, sizeof a) != 0) {
        close (fd);
        return -1;
    }
    char req[256];
    int n = snprintf (req, sizeof req, "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", method, path);
    assert_int_equal (write (fd, req, (size_t) n), n);
    size_t len = 0, cap = 65536;
    char *buf = ak_malloc (cap);
    for (;;) {
        if (len + 4096 > cap)
            buf = ak_realloc (buf, cap *= 2);
        ssize_t r = read (fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t) r;
    }
    close (fd);
    buf[len] = '\0';
    int status = -1;
    if (sscanf (buf, "HTTP/1.%*d %d", &status) != 1)
        status = -1;
    const char *body = strstr (buf, "\r\n\r\n");
    if (body_p)
        *body_p = ak_strdup (body ? body + 4 : "");
    free (buf);
    return status;
}

/*  n distinct free loopback ports: all bound at once, then released. */
void ak_test_free_ports (int ports[], int n)
{
    int fds[8];
    assert_true (n >= 1 && n <= 8);
    for (int i = 0; i < n; i++) {
        fds[i] = socket (AF_INET, SOCK_STREAM, 0);
        assert_true (fds[i] >= 0);
        struct sockaddr_in sa;
        memset (&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
        assert_int_equal (bind (fds[i], (struct sockaddr *) &sa, sizeof sa), 0);
        socklen_t len = sizeof sa;
        assert_int_equal (getsockname (fds[i], (struct sockaddr *) &sa, &len), 0);
        ports[i] = ntohs (sa.sin_port);
    }
    for (int i = 0; i < n; i++)
        close (fds[i]);
}

typedef struct {
    char  *buf;
    size_t len;
} s_asan_find_t;

static int s_find_asan (struct dl_phdr_info *info, size_t size, void *data)
{
    (void) size;
    s_asan_find_t *f = data;
    if (info->dlpi_name && strstr (info->dlpi_name, "libasan.so")) {
        snprintf (f->buf, f->len, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

bool ak_test_asan_runtime (char *buf, size_t len)
{
    s_asan_find_t f = { buf, len };
    if (len)
        buf[0] = '\0';
    return dl_iterate_phdr (s_find_asan, &f) != 0;

}

struct Ak__Source *ak_test_source (const char *name, const char *text)
{
    Ak__Source *s = ak_malloc (sizeof *s);
    ak__source__init (s);
    ak_pb_set_str (&s->name, name);
    ak_pb_set_str (&s->text, text);
    char hex[65];
    ak_sha256_hex (text, strlen (text), hex);
    ak_pb_set_str (&s->digest, hex);
    return s;
}

static size_t s_gcd (size_t x, size_t y)
{
    while (y) {
        size_t t = x % y;
        x = y;
        y = t;
    }
    return x;
}

/* ------------------------------------------------------ space samples */

typedef struct {
    int64_t (*all)[AK_MAX_PARAMS];
    size_t n, cap, nparams;
} s_space_all_t;

static int s_space_collect (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_space_all_t *a = arg;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 256;
        a->all = ak_realloc (a->all, a->cap * sizeof *a->all);
    }
    memcpy (a->all[a->n++], values, cand->nparams * sizeof *values);
    return 0;
}

/*  Whether config c holds a (parameter, value) not yet in covered
    (covered[p][v]: value index v of parameter p); marks them. */
static bool s_space_cover (const ak_candidate_t *cand, const int64_t *c, bool (*covered)[1024])
{
    bool any = false;
    for (size_t p = 0; p < cand->nparams; p++)
        for (size_t v = 0; v < cand->params[p].nvalues && v < 1024; v++)
            if (cand->params[p].values[v] == c[p] && !covered[p][v]) {
                covered[p][v] = true;
                any = true;
            }
    return any;
}

size_t ak_test_space_sample (const ak_candidate_t *cand, int64_t (*out)[AK_MAX_PARAMS], size_t max)
{
    s_space_all_t a = { .nparams = cand->nparams };
    ak_err_t err = { 0 };
    if (ak_space_walk (cand, s_space_collect, &a, NULL, &err) != 0)
        fail_msg ("%s", err.msg);
    assert_true (a.n > 0);
    bool (*covered)[1024] = ak_calloc (AK_MAX_PARAMS, sizeof *covered);
    size_t n = 0;
    /* a stride coprime with a.n visits every configuration once, spread */
    size_t stride = a.n / 3 + 1;
    while (a.n > 1 && s_gcd (stride, a.n) != 1)
        stride++;
    for (size_t k = 0; k < a.n + 2 && n < max; k++) {
        /* the first, the last, then every configuration once, scrambled */
        size_t i = k == 0 ? 0 : k == 1 ? a.n - 1 : ((k - 2) * stride + 1) % a.n;
        bool fresh = s_space_cover (cand, a.all[i], covered);
        if (k == 0 || (k == 1 && a.n > 1) || (k >= 2 && fresh))
            memcpy (out[n++], a.all[i], cand->nparams * sizeof out[0][0]);
    }
    free (covered);
    free (a.all);
    return n;
}
