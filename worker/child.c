/*  worker/child.c: waiting on a compiler child process. */
#include "child.h"
#include "clock.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void s_add (ak_child_result_t *res, size_t *cap, size_t max, const char *p, size_t n)
{
    if (res->len + n > max) {
        res->truncated = true;
        n = res->len < max ? max - res->len : 0;
    }
    if (res->len + n + 1 > *cap) {
        *cap = (res->len + n + 1) * 2;
        res->output = ak_realloc (res->output, *cap);
    }
    memcpy (res->output + res->len, p, n);
    res->len += n;
    res->output[res->len] = '\0';
}

int ak_child_collect (pid_t pid, int fd, const ak_child_wait_t *opts, ak_child_result_t *res,
                      ak_err_t *err)
{
    int rc = 0;
    size_t cap = 1;
    memset (res, 0, sizeof *res);
    res->output = ak_calloc (1, 1);
    uint64_t deadline = ak_clock_mono_ms () + opts->timeout_ms;
    for (;;) {
        uint64_t now = ak_clock_mono_ms ();
        if (now >= deadline) {
            res->timed_out = true;
            break;
        }
        if (opts->cancel && atomic_load (opts->cancel)) {
            res->cancelled = true;
            break;
        }
        /* Wake at least every 100 ms to notice a cancel. */
        uint64_t wait = deadline - now;
        if (wait > 100)
            wait = 100;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int n = poll (&p, 1, (int) wait);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = ak_err_set (err, AK_EIO, "poll: %s", strerror (errno));
            break;
        }
        if (n == 0)
            continue;
        char chunk[4096];
        ssize_t got = read (fd, chunk, sizeof chunk);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            rc = ak_err_set (err, AK_EIO, "read compiler output: %s", strerror (errno));
            break;
        }
        if (got == 0)
            break;              /* every writer closed: the child is done */
        s_add (res, &cap, opts->max_output, chunk, (size_t) got);
    }
    if (res->timed_out || res->cancelled || rc) {
        if (opts->group)
            kill (-pid, SIGKILL);
        kill (pid, SIGKILL);
    }
    while (waitpid (pid, &res->status, 0) < 0) {
        if (errno != EINTR) {
            if (!rc)
                rc = ak_err_set (err, AK_EIO, "waitpid: %s", strerror (errno));
            break;
        }
    }
    return rc;
}
