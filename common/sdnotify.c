/*  common/sdnotify.c: sd_notify's datagram protocol by hand (sdnotify.h).

    The socket address is built once at init, so that a send is socket,
    sendto and close: all async-signal-safe, usable from the handler that
    sees SIGTERM. */
#include "sdnotify.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un s_addr;
static socklen_t s_addr_len;            /* 0: notification off */
static uint64_t  s_watchdog_usec;
static uint64_t  s_last_ping_ms;
static bool      s_pinged;
static atomic_flag s_stopping_sent = ATOMIC_FLAG_INIT;

/* Whole-string decimal integer, no sign, no overflow. */
static bool s_parse_u64 (const char *text, uint64_t *out)
{
    uint64_t v = 0;
    if (!text || !*text)
        return false;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t) (*p - '0');
    }
    *out = v;
    return true;
}

int ak_sdnotify_init (ak_err_t *err)
{
    s_addr_len = 0;
    s_watchdog_usec = 0;
    s_pinged = false;
    atomic_flag_clear (&s_stopping_sent);
    const char *sock = getenv ("NOTIFY_SOCKET");
    const char *usec = getenv ("WATCHDOG_USEC");
    const char *wpid = getenv ("WATCHDOG_PID");
    int rc = 0;
    if (sock && *sock) {
        size_t len = strlen (sock);
        memset (&s_addr, 0, sizeof s_addr);
        s_addr.sun_family = AF_UNIX;
        if (sock[0] != '/' && sock[0] != '@')
            rc = ak_err_set (err, AK_EINVAL, "NOTIFY_SOCKET=%s: neither an absolute path nor an abstract "
                             "name (@...): not notifying systemd", sock);
        else if (len >= sizeof s_addr.sun_path)
            rc = ak_err_set (err, AK_EINVAL, "NOTIFY_SOCKET: %zu characters, more than a socket address "
                             "holds (%zu): not notifying systemd", len, sizeof s_addr.sun_path - 1);
        else {
            memcpy (s_addr.sun_path, sock, len);
            if (sock[0] == '@')
                s_addr.sun_path[0] = '\0';          /* abstract: no terminating NUL counted */
            s_addr_len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len + (sock[0] == '/'));
        }
    }
    if (rc == 0 && usec && *usec) {
        uint64_t v = 0, pid = 0;
        if (!s_parse_u64 (usec, &v) || v == 0)
            rc = ak_err_set (err, AK_EINVAL, "WATCHDOG_USEC=%s: not a positive integer: no watchdog pings",
                             usec);
        else if (wpid && *wpid && !s_parse_u64 (wpid, &pid))
            rc = ak_err_set (err, AK_EINVAL, "WATCHDOG_PID=%s: not a process id: no watchdog pings", wpid);
        else if (!(wpid && *wpid) || pid == (uint64_t) getpid ())
            s_watchdog_usec = v;
    }
    if (rc)
        s_addr_len = 0;
    unsetenv ("NOTIFY_SOCKET");
    unsetenv ("WATCHDOG_USEC");
    unsetenv ("WATCHDOG_PID");
    return rc;
}

bool ak_sdnotify_enabled (void)
{
    return s_addr_len > 0;
}

uint64_t ak_sdnotify_watchdog_usec (void)
{
    return s_addr_len ? s_watchdog_usec : 0;
}

int ak_sdnotify_send (const char *text)
{
    if (!s_addr_len || !text)
        return 0;
    int saved = errno;
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = 0;
    if (fd < 0)
        rc = AK_EIO;
    else {
        ssize_t n = sendto (fd, text, strlen (text), MSG_NOSIGNAL, (const struct sockaddr *) &s_addr,
                            s_addr_len);
        if (n < 0)
            rc = AK_EIO;
        close (fd);
    }
    errno = saved;
    return rc;
}

int ak_sdnotify_ready (void)
{
    return ak_sdnotify_send ("READY=1");
}

int ak_sdnotify_stopping (void)
{
    if (atomic_flag_test_and_set (&s_stopping_sent))
        return 0;
    return ak_sdnotify_send ("STOPPING=1");
}

void ak_sdnotify_watchdog (uint64_t now_ms)
{
    uint64_t usec = ak_sdnotify_watchdog_usec ();
    if (!usec)
        return;
    uint64_t half_ms = usec / 2000;
    if (s_pinged && now_ms < s_last_ping_ms + half_ms)
        return;
    s_pinged = true;
    s_last_ping_ms = now_ms;
    (void) ak_sdnotify_send ("WATCHDOG=1");
}
