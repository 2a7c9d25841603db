/*  common/sdnotify.h: telling systemd how a daemon is doing (sd_notify(3)),
    by the socket protocol by hand: one datagram per state to the AF_UNIX
    socket that $NOTIFY_SOCKET names (a path, or an abstract name written
    with a leading '@').  No libsystemd: the protocol is a documented
    datagram of "KEY=VALUE" lines, and a worker host need not carry it.

    A daemon calls ak_sdnotify_init once at start (it reads $NOTIFY_SOCKET,
    $WATCHDOG_USEC and $WATCHDOG_PID and removes them from the environment,
    so that executors and other children do not speak for it), then
    ak_sdnotify_ready when it serves, ak_sdnotify_watchdog from its loop's
    tick, ak_sdnotify_stopping when it begins to stop.  Outside systemd
    (no $NOTIFY_SOCKET) every call does nothing and returns 0.

    Never: block (the socket is non-blocking; a full queue loses the
    datagram, as with sd_notify), allocate after init, or send WATCHDOG=1
    from anywhere but the loop whose liveness it vouches for. */
#ifndef AK_SDNOTIFY_H
#define AK_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/*  Reads and unsets $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID.
    Returns 0 (also when not under systemd), or AK_EINVAL when one of them
    is malformed (a relative path, a name too long for sun_path, a
    watchdog interval that is not a positive integer): err says which, and
    notification stays off.  Call again to re-read (tests). */
int  ak_sdnotify_init (ak_err_t *err);

/*  True when $NOTIFY_SOCKET was valid at init. */
bool ak_sdnotify_enabled (void);

/*  The watchdog interval systemd asked for ($WATCHDOG_USEC, for this pid
    when $WATCHDOG_PID is set), in microseconds; 0 when none. */
uint64_t ak_sdnotify_watchdog_usec (void);

/*  Sends text ("READY=1", "STATUS=..."; lines separated by '\n') as one
    datagram.  0, AK_EIO when the send failed, 0 when disabled.
    Async-signal-safe (socket, sendto, close only). */
int  ak_sdnotify_send (const char *text);

/*  READY=1: the daemon serves (Type=notify units wait for it). */
int  ak_sdnotify_ready (void);

/*  STOPPING=1, once however often it is called: safe from a signal
    handler. */
int  ak_sdnotify_stopping (void);

/*  WATCHDOG=1 when half the watchdog interval has passed since the last
    one (now_ms: ak_clock_mono_ms); nothing without a watchdog.  Called
    from the loop's tick, so a loop that hangs stops the pings and systemd
    restarts the service. */
void ak_sdnotify_watchdog (uint64_t now_ms);

#endif
