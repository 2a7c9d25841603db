/*  tests/unit/test_sdnotify.c: common/sdnotify.c speaks systemd's notify
    protocol (issue 21): datagrams to $NOTIFY_SOCKET, a path or an abstract
    name ('@'), READY=1, STOPPING=1 once, WATCHDOG=1 at half of
    $WATCHDOG_USEC and only for the pid in $WATCHDOG_PID; malformed
    variables refused with a message, never a crash; nothing at all
    outside systemd. */
#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sdnotify.h"
#include "util.h"

/* A datagram socket bound to name (a path, or '@' + abstract name). */
static int s_listen (const char *name)
{
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true (fd >= 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    size_t len = strlen (name);
    assert_true (len < sizeof a.sun_path);
    memcpy (a.sun_path, name, len);
    if (name[0] == '@')
        a.sun_path[0] = '\0';
    socklen_t alen = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len + (name[0] == '/'));
    assert_int_equal (bind (fd, (struct sockaddr *) &a, alen), 0);
    struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
    assert_int_equal (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    return fd;
}

/* The next datagram (empty string when none came within 200 ms). */
static char *s_recv (int fd)
{
    char buf[512];
    ssize_t n = recv (fd, buf, sizeof buf - 1, 0);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    return ak_strdup (buf);
}

static void s_expect (int fd, const char *want)
{
    char *got = s_recv (fd);
    assert_string_equal (got, want);
    free (got);
}

static void s_clear_env (void)
{
    unsetenv ("NOTIFY_SOCKET");
    unsetenv ("WATCHDOG_USEC");
    unsetenv ("WATCHDOG_PID");
}

static void test_outside_systemd (void **state)
{
    (void) state;
    s_clear_env ();
    ak_err_t err = { 0 };
    assert_int_equal (ak_sdnotify_init (&err), 0);
    assert_false (ak_sdnotify_enabled ());
    assert_int_equal (ak_sdnotify_ready (), 0);
    assert_int_equal (ak_sdnotify_stopping (), 0);
    ak_sdnotify_watchdog (12345);
    assert_int_equal (ak_sdnotify_watchdog_usec (), 0);
}

static void test_abstract_socket (void **state)
{
    (void) state;
    s_clear_env ();
    char name[64];
    snprintf (name, sizeof name, "@akfleet-test-sdnotify-%ld", (long) getpid ());
    int fd = s_listen (name);
    setenv ("NOTIFY_SOCKET", name, 1);
    setenv ("WATCHDOG_USEC", "2000000", 1);         /* 2 s: a ping every 1000 ms */
    char pid[32];
    snprintf (pid, sizeof pid, "%ld", (long) getpid ());
    setenv ("WATCHDOG_PID", pid, 1);
    ak_err_t err = { 0 };
    assert_int_equal (ak_sdnotify_init (&err), 0);
    assert_true (ak_sdnotify_enabled ());
    assert_int_equal (ak_sdnotify_watchdog_usec (), 2000000);
    /* removed, so that children do not speak for this process */
    assert_null (getenv ("NOTIFY_SOCKET"));
    assert_null (getenv ("WATCHDOG_USEC"));
    assert_null (getenv ("WATCHDOG_PID"));

    assert_int_equal (ak_sdnotify_ready (), 0);
    s_expect (fd, "READY=1");
    ak_sdnotify_watchdog (10000);                   /* the first tick pings */
    s_expect (fd, "WATCHDOG=1");
    ak_sdnotify_watchdog (10500);                   /* before half the interval: nothing */
    ak_sdnotify_watchdog (10999);
    s_expect (fd, "");
    ak_sdnotify_watchdog (11000);                   /* half of 2 s since the last */
    s_expect (fd, "WATCHDOG=1");
    assert_int_equal (ak_sdnotify_stopping (), 0);
    s_expect (fd, "STOPPING=1");
    assert_int_equal (ak_sdnotify_stopping (), 0);  /* once */
    s_expect (fd, "");
    close (fd);
}

static void test_path_socket (void **state)
{
    (void) state;
    s_clear_env ();
    char *dir = ak_test_tmpdir ("sdnotify");
    char *path = ak_sprintf ("%s/notify", dir);
    int fd = s_listen (path);
    setenv ("NOTIFY_SOCKET", path, 1);
    setenv ("WATCHDOG_USEC", "1000000", 1);
    setenv ("WATCHDOG_PID", "1", 1);                /* another process's watchdog */
    ak_err_t err = { 0 };
    assert_int_equal (ak_sdnotify_init (&err), 0);
    assert_int_equal (ak_sdnotify_watchdog_usec (), 0);
    ak_sdnotify_watchdog (5000);
    assert_int_equal (ak_sdnotify_send ("STATUS=serving\nREADY=1"), 0);
    s_expect (fd, "STATUS=serving\nREADY=1");       /* the watchdog sent nothing before it */
    close (fd);
    free (path);
    ak_test_rmtree (dir);
    free (dir);
}

static void test_malformed (void **state)
{
    (void) state;
    char longname[200];
    memset (longname, 'x', sizeof longname - 1);
    longname[0] = '/';
    longname[sizeof longname - 1] = '\0';
    struct { const char *sock, *usec, *pid, *needle; } cases[] = {
        { "relative/path", NULL, NULL, "neither an absolute path" },
        { longname, NULL, NULL, "more than a socket address holds" },
        { "@ok", "0", NULL, "WATCHDOG_USEC=0" },
        { "@ok", "-5", NULL, "WATCHDOG_USEC=-5" },
        { "@ok", "12abc", NULL, "WATCHDOG_USEC=12abc" },
        { "@ok", "99999999999999999999999", NULL, "WATCHDOG_USEC=9999" },
        { "@ok", "1000", "pid", "WATCHDOG_PID=pid" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_clear_env ();
        setenv ("NOTIFY_SOCKET", cases[i].sock, 1);
        if (cases[i].usec)
            setenv ("WATCHDOG_USEC", cases[i].usec, 1);
        if (cases[i].pid)
            setenv ("WATCHDOG_PID", cases[i].pid, 1);
        ak_err_t err = { 0 };
        assert_int_equal (ak_sdnotify_init (&err), AK_EINVAL);
        printf ("%s\n", err.msg);
        assert_non_null (strstr (err.msg, cases[i].needle));
        assert_false (ak_sdnotify_enabled ());
        assert_int_equal (ak_sdnotify_ready (), 0);
    }
    /* a socket nobody listens on: the send fails, nothing else happens */
    s_clear_env ();
    setenv ("NOTIFY_SOCKET", "@akfleet-test-nobody-listens", 1);
    ak_err_t err = { 0 };
    assert_int_equal (ak_sdnotify_init (&err), 0);
    assert_int_equal (ak_sdnotify_ready (), AK_EIO);
    s_clear_env ();
    assert_int_equal (ak_sdnotify_init (&err), 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_outside_systemd),
        cmocka_unit_test (test_abstract_socket),
        cmocka_unit_test (test_path_socket),
        cmocka_unit_test (test_malformed),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
