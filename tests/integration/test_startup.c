/*  tests/integration/test_startup.c: what the programs do before they run
    (issue 14, items 1, 7 and part of 9).

    - one coordinator per store: a second akcoord on the store of a running
      one exits 2 naming the first's pid, binds nothing, and the first goes
      on serving;
    - configuration errors exit 2 (systemd does not restart them) and
      create nothing on disk: akcoord with a missing --keys directory, a
      missing or public --cert; akworker with a missing or public --cert;
      akctl with a missing certificate;
    - endpoints that cannot work are refused up front with exit 2 and the
      problem named: port 99999, a host that does not resolve (akcoord,
      akworker, akctl, akload);
    - --version and -h/--help on akcoord, akworker, akctl and akload, in
      one form (issue 21);
    - akcoord with an empty key directory starts and warns that nobody can
      connect yet. */
#include "support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static ak_test_cluster_t s_c;

static bool s_exists (const char *dir, const char *name)
{
    char *path = ak_path_join (dir, name);
    struct stat st;
    bool yes = lstat (path, &st) == 0;
    free (path);
    return yes;
}

/*  Runs `PROG ARGS` (bounded by timeout(1)) with stdout and stderr into
    DIR/out.txt; returns the exit code, *out_p (caller frees) what it said. */
static int s_run (const char *dir, const char *prog, char **out_p, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
static int s_run (const char *dir, const char *prog, char **out_p, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char args[4096];
    vsnprintf (args, sizeof args, fmt, ap);
    va_end (ap);
    char *bin = ak_test_bin (prog);
    char *log = ak_path_join (dir, "out.txt");
    int code = ak_test_runf (NULL, "timeout 120 '%s' %s > '%s' 2>&1", bin, args, log);
    *out_p = ak_test_read (log);
    print_message ("%s", *out_p);
    unlink (log);
    free (log);
    free (bin);
    return code;
}

static void s_expect (const char *out, const char *needle)
{
    if (!strstr (out, needle))
        fail_msg ("expected \"%s\" in:\n%s", needle, out);
}

// ------------------------------------------------------------- item 1

static void test_one_coordinator_per_store (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "lock", false);
    ak_test_cluster_coord (&s_c, NULL, NULL, NULL, 30000);
    char *out = NULL;
    int code = s_run (s_c.dir, "akcoord", &out, "--plain --store '%s' --workers 'ipc://%s/w2' "
                      "--clients 'ipc://%s/c2'", s_c.store, s_c.dir, s_c.dir);
    assert_int_equal (code, 2);
    s_expect (out, "is in use by another akcoord");
    char pid[32];
    snprintf (pid, sizeof pid, "pid %d", (int) s_c.coord);
    s_expect (out, pid);
    free (out);
    /* it bound nothing, and the first still answers */
    assert_false (s_exists (s_c.dir, "w2"));
    assert_false (s_exists (s_c.dir, "c2"));
    assert_int_equal (ak_test_akctl (&s_c, NULL, "stats > /dev/null"), 0);

    /* a coordinator killed with -9 leaves the lock file, not the lock */
    assert_int_equal (kill (s_c.coord, SIGKILL), 0);
    assert_int_equal (waitpid (s_c.coord, NULL, 0), s_c.coord);
    s_c.coord = 0;
    assert_true (s_exists (s_c.store, "akcoord.lock"));
    ak_test_cluster_coord (&s_c, NULL, "akcoord2.log", NULL, 30000);
    ak_test_cluster_shutdown (&s_c, 30000);
    ak_test_cluster_teardown (&s_c);
}

// ------------------------------------------------------------- item 7

static void test_config_errors_exit_2 (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("config");
    char *out = NULL;
    char *akctl = ak_test_bin ("akctl");
    assert_int_equal (ak_test_runf (NULL, "'%s' keys new akcoord --role server --dir '%s/k' >/dev/null", akctl, dir), 0);
    assert_int_equal (ak_test_runf (NULL, "'%s' keys new w1 --role worker --dir '%s/k/keys' >/dev/null", akctl, dir), 0);
    /* a public certificate with no secret next to it */
    assert_int_equal (ak_test_runf (NULL, "cp '%s/k/server/akcoord.key' '%s/public.key'", dir, dir), 0);
    const char *eps = "--workers ipc://%s/w --clients ipc://%s/c";
    char *ep = ak_sprintf (eps, dir, dir);

    /* akcoord: a missing --keys directory */
    assert_int_equal (s_run (dir, "akcoord", &out, "--store '%s/store' --cert '%s/k/server/akcoord.key_secret' "
                             "--keys '%s/nokeys' %s", dir, dir, dir, ep), 2);
    s_expect (out, "--keys");
    s_expect (out, "nokeys");
    free (out);
    /* a missing --cert */
    assert_int_equal (s_run (dir, "akcoord", &out, "--store '%s/store' --cert '%s/nocert.key_secret' "
                             "--keys '%s/k/keys' %s", dir, dir, dir, ep), 2);
    s_expect (out, "nocert.key_secret");
    free (out);
    /* a public --cert */
    assert_int_equal (s_run (dir, "akcoord", &out, "--store '%s/store' --cert '%s/public.key' "
                             "--keys '%s/k/keys' %s", dir, dir, dir, ep), 2);
    s_expect (out, "no secret key");
    free (out);
    /* nothing was created: no store, no sockets */
    assert_false (s_exists (dir, "store"));
    assert_false (s_exists (dir, "w"));
    assert_false (s_exists (dir, "c"));

    /* akworker: a missing or public --cert, before its cache is made */
    assert_int_equal (s_run (dir, "akworker", &out, "--coordinator tcp://127.0.0.1:5555 --id w1 "
                             "--cert '%s/nocert.key_secret' --server-key '%s/k/server/akcoord.key' "
                             "--cache '%s/cache'", dir, dir, dir), 2);
    s_expect (out, "nocert.key_secret");
    free (out);
    assert_int_equal (s_run (dir, "akworker", &out, "--coordinator tcp://127.0.0.1:5555 --id w1 "
                             "--cert '%s/public.key' --server-key '%s/k/server/akcoord.key' "
                             "--cache '%s/cache'", dir, dir, dir), 2);
    s_expect (out, "no secret key");
    free (out);
    assert_false (s_exists (dir, "cache"));

    /* akctl: a missing certificate */
    assert_int_equal (s_run (dir, "akctl", &out, "--coordinator tcp://127.0.0.1:5556 --timeout 500 "
                             "--cert '%s/nocert.key_secret' --server-key '%s/k/server/akcoord.key' "
                             "list", dir, dir), 2);
    s_expect (out, "nocert.key_secret");
    free (out);
    free (ep);
    free (akctl);
    ak_test_rmtree (dir);
    free (dir);
}

// ------------------------------------------------------------- item 9

static void test_bad_endpoints (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("endpoints");
    char *out = NULL;
    const char *badhost = "tcp://no-such-host.invalid:5555";

    assert_int_equal (s_run (dir, "akcoord", &out, "--plain --store '%s/store' --workers tcp://127.0.0.1:99999 "
                             "--clients 'ipc://%s/c'", dir, dir), 2);
    s_expect (out, "99999");
    s_expect (out, "1..65535");
    free (out);
    assert_int_equal (s_run (dir, "akcoord", &out, "--plain --store '%s/store' --workers 'ipc://%s/w' "
                             "--clients tcp://127.0.0.1:0", dir, dir), 2);
    s_expect (out, "1..65535");
    free (out);
    assert_false (s_exists (dir, "store"));

    assert_int_equal (s_run (dir, "akworker", &out, "--coordinator tcp://127.0.0.1:99999 --id w1 "
                             "--cache '%s/cache'", dir), 2);
    s_expect (out, "99999");
    free (out);
    assert_int_equal (s_run (dir, "akworker", &out, "--coordinator %s --id w1 --cache '%s/cache'",
                             badhost, dir), 2);
    s_expect (out, "does not resolve");
    free (out);
    assert_false (s_exists (dir, "cache"));

    assert_int_equal (s_run (dir, "akctl", &out, "--coordinator tcp://127.0.0.1:99999 list"), 2);
    s_expect (out, "99999");
    free (out);
    assert_int_equal (s_run (dir, "akctl", &out, "--coordinator tcp://no-such-host.invalid:5556 list"), 2);
    s_expect (out, "no-such-host.invalid");
    s_expect (out, "does not resolve");
    free (out);
    assert_int_equal (ak_test_runf (&out, "AK_COORDINATOR=tcp://127.0.0.1:99999 '%s/akctl' status 2>&1",
                                    getenv ("AK_BIN_DIR")), 2);
    s_expect (out, "$AK_COORDINATOR");
    free (out);
    assert_int_equal (s_run (dir, "akload", &out, "--coordinator tcp://127.0.0.1:99999 --workers 1"), 2);
    s_expect (out, "99999");
    free (out);
    assert_int_equal (s_run (dir, "akload", &out, "--coordinator %s --workers 1", badhost), 2);
    s_expect (out, "does not resolve");
    free (out);
    ak_test_rmtree (dir);
    free (dir);
}

/*  The same form on every program (issue 21): `--version` prints one line
    "PROG VERSION"; -h and --help print the same text, whose first line is
    "usage: PROG ...", and which lists --version and the exit codes. */
static void test_version_and_help (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("version");
    const char *progs[] = { "akcoord", "akworker", "akctl", "akload" };
    for (size_t i = 0; i < 4; i++) {
        char *out = NULL;
        assert_int_equal (s_run (dir, progs[i], &out, "--version"), 0);
        char *want = ak_sprintf ("%s %s\n", progs[i], AK_VERSION);
        if (strcmp (out, want) != 0)
            fail_msg ("%s --version: expected exactly \"%s\", got \"%s\"", progs[i], want, out);
        free (want);
        free (out);
        char *first = NULL;
        const char *flags[] = { "-h", "--help" };
        for (int f = 0; f < 2; f++) {
            assert_int_equal (s_run (dir, progs[i], &out, "%s", flags[f]), 0);
            char *usage = ak_sprintf ("usage: %s ", progs[i]);
            if (strncmp (out, usage, strlen (usage)) != 0)
                fail_msg ("%s %s: the first line is not \"%s...\":\n%s", progs[i], flags[f], usage, out);
            free (usage);
            s_expect (out, "--version");
            if (!strstr (out, "Exit status:") && !strstr (out, "Exit codes:"))
                fail_msg ("%s %s: the help does not state the exit codes:\n%s", progs[i], flags[f], out);
            if (!first)
                first = out;
            else {
                assert_string_equal (first, out);
                free (out);
            }
        }
        free (first);
    }
    ak_test_rmtree (dir);
    free (dir);
}

static bool s_log_says_no_keys (void *arg)
{
    char *log = ak_test_read (arg);
    /* the warning, then the line that says it serves (its signal handlers are in place) */
    bool yes = strstr (log, "holds no keys") != NULL && strstr (log, "CURVE on both endpoints") != NULL;
    free (log);
    return yes;
}

static void test_empty_key_directory_warns (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("nokeys");
    char *akctl = ak_test_bin ("akctl"), *akcoord = ak_test_bin ("akcoord");
    assert_int_equal (ak_test_runf (NULL, "'%s' keys new akcoord --role server --dir '%s/k' >/dev/null", akctl, dir), 0);
    assert_int_equal (ak_test_runf (NULL, "mkdir -p '%s/keys'", dir), 0);
    char *store = ak_sprintf ("%s/store", dir), *cert = ak_sprintf ("%s/k/server/akcoord.key_secret", dir);
    char *keys = ak_sprintf ("%s/keys", dir), *w = ak_sprintf ("ipc://%s/w", dir), *c = ak_sprintf ("ipc://%s/c", dir);
    char *log = ak_sprintf ("%s/akcoord.log", dir);
    char *argv[] = { akcoord, "--store", store, "--cert", cert, "--keys", keys, "--workers", w,
                     "--clients", c, NULL };
    pid_t pid = ak_test_spawn (argv, log);
    assert_true (pid > 0);
    bool warned = ak_test_wait (s_log_says_no_keys, log, 60000);
    int status = ak_test_stop (pid, SIGTERM, 30000);
    char *text = ak_test_read (log);
    print_message ("%s", text);
    if (!warned)
        fail_msg ("akcoord with an empty key directory did not warn");
    assert_non_null (strstr (text, "WARN"));
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    free (text);
    free (log);
    free (store);
    free (cert);
    free (keys);
    free (w);
    free (c);
    free (akctl);
    free (akcoord);
    ak_test_rmtree (dir);
    free (dir);
}

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_one_coordinator_per_store, s_teardown),
        cmocka_unit_test (test_config_errors_exit_2),
        cmocka_unit_test (test_bad_endpoints),
        cmocka_unit_test (test_version_and_help),
        cmocka_unit_test (test_empty_key_directory_warns),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
