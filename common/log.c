/*  common/log.c: one-line logging to stderr.

    Each line is formatted into one buffer and written with one write(2), so
    lines from threads and processes sharing stderr never interleave. */
#include "log.h"
#include "clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define AK_LOG_LINE_MAX 4096

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static atomic_int s_level = AK_LOG_INFO;
static atomic_bool s_level_set = false;
static char s_ident[64] = "akfleet";
static pthread_mutex_t s_ident_lock = PTHREAD_MUTEX_INITIALIZER;

/* ak_log_hold: the calling thread's held lines */
#define S_HELD_MAX (32 * 1024)
static _Thread_local char  *s_held;
static _Thread_local size_t s_nheld;
static _Thread_local bool   s_holding;
static pthread_once_t s_exit_once = PTHREAD_ONCE_INIT;

static void s_write_all (const char *p, size_t len)
{
    int saved = errno;
    while (len > 0) {
        ssize_t w = write (STDERR_FILENO, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        p += w;
        len -= (size_t) w;
    }
    errno = saved;
}

void ak_log_flush (void)
{
    if (s_nheld)
        s_write_all (s_held, s_nheld);
    s_nheld = 0;
}

static void s_flush_at_exit (void)
{
    ak_log_flush ();                /* the thread that calls exit (), the one that holds */
}

static void s_exit_init (void)
{
    atexit (s_flush_at_exit);
}

void ak_log_hold (bool on)
{
    if (on && !s_held) {
        s_held = malloc (S_HELD_MAX);
        if (!s_held)
            return;                 /* no buffer: lines are written one by one */
        pthread_once (&s_exit_once, s_exit_init);
    }
    if (!on)
        ak_log_flush ();
    s_holding = on;
}

static void s_init (void)
{
    const char *env = getenv ("AK_LOG_LEVEL");
    if (env && !atomic_load (&s_level_set)) {
        int level = ak_log_parse_level (env);
        if (level >= 0)
            atomic_store (&s_level, level);
    }
}

void ak_log_set_ident (const char *ident)
{
    pthread_mutex_lock (&s_ident_lock);
    snprintf (s_ident, sizeof s_ident, "%s", ident ? ident : "akfleet");
    pthread_mutex_unlock (&s_ident_lock);
}

/*  An explicit level wins over AK_LOG_LEVEL, whichever comes first. */
void ak_log_set_level (ak_log_level_t level)
{
    pthread_once (&s_once, s_init);
    if (level < AK_LOG_DEBUG || level > AK_LOG_QUIET)
        return;
    atomic_store (&s_level_set, true);
    atomic_store (&s_level, (int) level);
}

ak_log_level_t ak_log_level (void)
{
    pthread_once (&s_once, s_init);
    return (ak_log_level_t) atomic_load (&s_level);
}

int ak_log_parse_level (const char *text)
{
    static const char *names[] = { "debug", "info", "warn", "error", "quiet" };
    if (!text)
        return -1;
    for (int i = 0; i < 5; i++)
        if (strcasecmp (text, names[i]) == 0)
            return i;
    if (strcasecmp (text, "warning") == 0)
        return AK_LOG_WARN;
    return -1;
}

static const char *s_level_name (ak_log_level_t level)
{
    switch (level) {
        case AK_LOG_DEBUG: return "DEBUG";
        case AK_LOG_INFO:  return "INFO";
        case AK_LOG_WARN:  return "WARN";
        case AK_LOG_ERROR: return "ERROR";
        default:           return "LOG";
    }
}

/*  Formats "<iso-ms>Z ident[pid] LEVEL message\n" and writes it to stderr
    in one call.  Over-long messages are cut and end with "..."; trailing
    newlines in the message are dropped. */
void ak_log (ak_log_level_t level, const char *fmt, ...)
{
    if (level >= AK_LOG_QUIET || level < ak_log_level ())
        return;

    char line[AK_LOG_LINE_MAX];
    uint64_t now = ak_clock_wall_ms ();
    time_t secs = (time_t) (now / 1000);
    struct tm tm;
    char stamp[32] = "";
    if (gmtime_r (&secs, &tm))
        strftime (stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);

    char ident[sizeof s_ident];
    pthread_mutex_lock (&s_ident_lock);
    memcpy (ident, s_ident, sizeof ident);
    pthread_mutex_unlock (&s_ident_lock);

    int n = snprintf (line, sizeof line, "%s.%03uZ %s[%ld] %s ", stamp,
                      (unsigned) (now % 1000), ident, (long) getpid (), s_level_name (level));
    if (n < 0 || (size_t) n >= sizeof line)
        n = 0;
    size_t head = (size_t) n;

    va_list ap;
    va_start (ap, fmt);
    int m = vsnprintf (line + head, sizeof line - head, fmt, ap);
    va_end (ap);
    size_t len;
    if (m < 0)
        len = head;
    else if ((size_t) m >= sizeof line - head) {
        len = sizeof line - 1;
        memcpy (line + len - 3, "...", 3);
    }
    else
        len = head + (size_t) m;
    while (len > head && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (len >= sizeof line)
        len = sizeof line - 1;
    line[len++] = '\n';

    if (s_holding && level <= AK_LOG_INFO) {
        if (s_nheld + len > S_HELD_MAX)
            ak_log_flush ();
        memcpy (s_held + s_nheld, line, len);
        s_nheld += len;
        return;
    }
    ak_log_flush ();                /* what was held comes first */
    s_write_all (line, len);
}
