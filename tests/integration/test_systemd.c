/*  tests/integration/test_systemd.c: akcoord and akworker under systemd
    (issue 21, item 2), with the environment systemd gives a Type=notify
    service and a socket standing in for systemd's:

    - akcoord says READY=1 only once it serves (akctl gets an answer right
      after), WATCHDOG=1 from its loop at half of $WATCHDOG_USEC, and
      STOPPING=1 on SIGTERM, then exits 0;
    - with $JOURNAL_STREAM naming its stderr, every line it writes starts
      with a syslog priority ("<6>INFO ...") and carries no time stamp;
    - akworker says READY=1 when its loop starts, WATCHDOG=1, STOPPING=1;
    - $AK_LOG_LEVEL sets akcoord's level and --log-level overrides it. */
#include "support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static ak_test_cluster_t s_c;

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

/* An abstract datagram socket "@akfleet-test-<pid>-<tag>" (1 s receive
   timeout); *name_p gets the name for $NOTIFY_SOCKET (caller frees). */
static int s_notify_socket (const char *tag, char **name_p)
{
    char *name = ak_sprintf ("@akfleet-test-%ld-%s", (long) getpid (), tag);
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true (fd >= 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    size_t len = strlen (name);
    memcpy (a.sun_path, name, len);
    a.sun_path[0] = '\0';
    assert_int_equal (bind (fd, (struct sockaddr *) &a, (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len)), 0);
    struct timeval tv = { .tv_sec = 1 };
    assert_int_equal (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    *name_p = name;
    return fd;
}

/*  Waits up to timeout_s for a datagram equal to want while pid lives;
    counts the other datagrams equal to also (may be NULL) in *also_n. */
static bool s_await (int fd, pid_t pid, const char *want, int timeout_s, const char *also, int *also_n)
{
    for (int t = 0; t < timeout_s; ) {
        char buf[256];
        ssize_t n = recv (fd, buf, sizeof buf - 1, 0);
        if (n < 0) {
            t++;                                        /* a 1 s timeout */
            if (pid > 0 && waitpid (pid, NULL, WNOHANG) == pid)
                fail_msg ("the process exited before it said %s", want);
            continue;
        }
        buf[n] = '\0';
        print_message ("notify: %s\n", buf);
        if (strcmp (buf, want) == 0)
            return true;
        if (also && also_n && strcmp (buf, also) == 0)
            (*also_n)++;
    }
    return false;
}

static void test_coordinator_notify_and_journal (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "systemd", false);
    char *log = ak_path_join (s_c.dir, "akcoord.log");
    char *touch = ak_test_write (s_c.dir, "akcoord.log", "");
    free (touch);
    struct stat st;
    assert_int_equal (stat (log, &st), 0);
    char journal[64];
    snprintf (journal, sizeof journal, "%llu:%llu", (unsigned long long) st.st_dev,
              (unsigned long long) st.st_ino);
    char *name = NULL;
    int fd = s_notify_socket ("coord", &name);

    char *bin = ak_test_bin ("akcoord");
    char *argv[] = { bin, "--store", s_c.store, "--workers", s_c.workers_ep, "--clients", s_c.clients_ep,
                     "--heartbeat-ms", "200", NULL };
    setenv ("NOTIFY_SOCKET", name, 1);
    setenv ("WATCHDOG_USEC", "600000", 1);             /* a ping every 300 ms */
    setenv ("JOURNAL_STREAM", journal, 1);
    s_c.coord = ak_test_spawn_coord (argv, log);
    unsetenv ("NOTIFY_SOCKET");
    unsetenv ("WATCHDOG_USEC");
    unsetenv ("JOURNAL_STREAM");
    assert_true (s_c.coord > 0);

    int pings = 0;
    assert_true (s_await (fd, s_c.coord, "READY=1", 120, NULL, NULL));
    /* ready means serving: the first request is answered */
    char *out = NULL;
    assert_int_equal (ak_test_akctl (&s_c, &out, "stats"), 0);
    free (out);
    /* the loop pings; wait for two (the READY above came first) */
    int stop_seen = 0;
    while (pings < 2)
        assert_true (s_await (fd, s_c.coord, "WATCHDOG=1", 60, "STOPPING=1", &stop_seen) && ++pings);
    assert_int_equal (stop_seen, 0);
    assert_int_equal (kill (s_c.coord, SIGTERM), 0);
    assert_true (s_await (fd, 0, "STOPPING=1", 60, NULL, NULL));
    int status = ak_test_stop (s_c.coord, SIGTERM, 60000);
    s_c.coord = 0;
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);

    char *text = ak_test_read (log);
    print_message ("%s", text);
    /* every line: <P>LEVEL message, no time stamp, no "akcoord[pid]" */
    assert_non_null (strstr (text, "<6>INFO "));
    assert_null (strstr (text, "Z akcoord["));
    size_t nlines = 0;
    for (char *line = text; *line; nlines++) {
        char *end = strchr (line, '\n');
        assert_non_null (end);
        if (!(line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>'))
            fail_msg ("a line without its priority: %.*s", (int) (end - line), line);
        line = end + 1;
    }
    assert_true (nlines >= 2);
    free (text);
    close (fd);
    free (name);
    free (bin);
    free (log);
}

static void test_worker_notify (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "systemdw", false);
    ak_test_cluster_coord (&s_c, NULL, NULL, NULL, 120000);
    char *name = NULL;
    int fd = s_notify_socket ("worker", &name);
    char *bin = ak_test_bin ("akworker");
    char *cache = ak_path_join (s_c.dir, "cache-wn");
    char *log = ak_path_join (s_c.dir, "wn.log");
    char *argv[] = { bin, "--coordinator", s_c.workers_ep, "--id", "wn", "--backend", "host",
                     "--cache", cache, NULL };
    setenv ("NOTIFY_SOCKET", name, 1);
    setenv ("WATCHDOG_USEC", "600000", 1);
    pid_t pid = ak_test_spawn (argv, log);
    unsetenv ("NOTIFY_SOCKET");
    unsetenv ("WATCHDOG_USEC");
    assert_true (pid > 0);
    s_c.workers[s_c.nworkers] = pid;
    snprintf (s_c.ids[s_c.nworkers], sizeof s_c.ids[0], "wn");
    s_c.nworkers++;
    assert_true (s_await (fd, pid, "READY=1", 120, NULL, NULL));
    assert_true (s_await (fd, pid, "WATCHDOG=1", 60, NULL, NULL));
    /* it registers (READY did not wait for that, but it does happen) */
    assert_true (ak_test_wait (ak_test_cluster_alive, &s_c, 60000));
    assert_int_equal (kill (pid, SIGTERM), 0);
    assert_true (s_await (fd, 0, "STOPPING=1", 60, NULL, NULL));
    int status = ak_test_cluster_stop_worker (&s_c, 0, SIGTERM, 60000);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    close (fd);
    free (name);
    free (bin);
    free (cache);
    free (log);
}

/*  The coordinator at $AK_LOG_LEVEL=warn writes no INFO line (not even
    "stopped"); --log-level info wins over the variable. */
static void s_coord_at (const char *env_level, const char *const args[], bool want_info)
{
    ak_test_cluster_init (&s_c, "loglevel", false);
    setenv ("AK_LOG_LEVEL", env_level, 1);
    ak_test_cluster_coord (&s_c, NULL, NULL, args, 120000);
    unsetenv ("AK_LOG_LEVEL");
    ak_test_cluster_shutdown (&s_c, 60000);
    char *log = ak_path_join (s_c.dir, "akcoord.log");
    char *text = ak_test_read (log);
    print_message ("AK_LOG_LEVEL=%s %s:\n%s", env_level, args ? args[0] : "", text);
    if (want_info)
        assert_non_null (strstr (text, " INFO stopped"));
    else
        assert_null (strstr (text, " INFO "));
    free (text);
    free (log);
    ak_test_cluster_teardown (&s_c);
}

static void test_log_level_environment (void **state)
{
    (void) state;
    s_coord_at ("warn", NULL, false);
    const char *const info[] = { "--log-level", "info", NULL };
    s_coord_at ("warn", info, true);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_coordinator_notify_and_journal, s_teardown),
        cmocka_unit_test_teardown (test_worker_notify, s_teardown),
        cmocka_unit_test_teardown (test_log_level_environment, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
