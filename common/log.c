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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AK_LOG_LINE_MAX 4096

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static atomic_int s_level = AK_LOG_INFO;
static atomic_bool s_level_set = false;
static char s_ident[64] = "akfleet";
static pthread_mutex_t s_ident_lock = PTHREAD_MUTEX_INITIALIZER;
/* stderr is the journal (log.h); the pid that found it so */
static atomic_bool s_journal = false;
static atomic_long s_journal_pid = 0;

/* Each thread keeps the head of its lines: the time stamp of the current
   second and "Z ident[pid] ", remade when the ident changes or the
   process forks (s_gen), so a line costs no strftime and no getpid. */
static atomic_uint s_gen = 1;
static _Thread_local struct {
    time_t   secs;
    char     stamp[32];
    unsigned gen;
    char     tail[sizeof "Z " + 64 + sizeof "[-9223372036854775808] "];
    size_t   tail_len;
} t_head = { .secs = -1 };

static void s_after_fork (void)
{
    atomic_fetch_add (&s_gen, 1);
}

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

/* this thread's flushes that wrote, their bytes and time (ak_log_flush_stats) */
static _Thread_local uint64_t t_flushes, t_flushed_bytes, t_flush_ns;

void ak_log_flush (void)
{
    if (s_nheld) {
        struct timespec a, b;
        clock_gettime (CLOCK_MONOTONIC, &a);
        s_write_all (s_held, s_nheld);
        clock_gettime (CLOCK_MONOTONIC, &b);
        t_flushes++;
        t_flushed_bytes += s_nheld;
        t_flush_ns += (uint64_t) (b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t) b.tv_nsec - (uint64_t) a.tv_nsec;
    }
    s_nheld = 0;
}

void ak_log_flush_stats (uint64_t *flushes, uint64_t *bytes, uint64_t *ns)
{
    *flushes = t_flushes;
    *bytes = t_flushed_bytes;
    *ns = t_flush_ns;
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

/*  $JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected to
    journald; stderr is the journal only if fd 2 is still that file (a
    service may have redirected it, and children inherit the variable). */
bool ak_log_check_journal (void)
{
    bool journal = false;
    const char *env = getenv ("JOURNAL_STREAM");
    struct stat st;
    if (env && *env && fstat (STDERR_FILENO, &st) == 0) {
        char *end = NULL;
        errno = 0;
        unsigned long long dev = strtoull (env, &end, 10);
        if (!errno && end != env && *end == ':' && end[1] >= '0' && end[1] <= '9') {
            const char *ino_text = end + 1;
            unsigned long long ino = strtoull (ino_text, &end, 10);
            journal = !errno && *end == '\0' && env[0] >= '0' && env[0] <= '9'
                      && dev == (unsigned long long) st.st_dev && ino == (unsigned long long) st.st_ino;
        }
    }
    atomic_store (&s_journal_pid, (long) getpid ());
    atomic_store (&s_journal, journal);
    atomic_fetch_add (&s_gen, 1);
    return journal;
}

static void s_init (void)
{
    (void) pthread_atfork (NULL, NULL, s_after_fork);   /* fails only without memory: pids then go stale in forked children's lines */
    (void) ak_log_check_journal ();
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
    atomic_fetch_add (&s_gen, 1);
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

/* syslog(3)'s priorities, the digit journald reads from "<N>" */
static char s_priority (ak_log_level_t level)
{
    switch (level) {
        case AK_LOG_DEBUG: return '7';
        case AK_LOG_INFO:  return '6';
        case AK_LOG_WARN:  return '4';
        default:           return '3';
    }
}

/*  Formats "<iso-ms>Z ident[pid] LEVEL message\n" and writes it to stderr
    in one call.  Over-long messages are cut and end with "..."; trailing
    newlines in the message are dropped. */
/* Appends v in decimal (neg: a minus first) at out[*n] if it fits in cap. */
static bool s_put_dec (char *out, size_t cap, size_t *n, unsigned long long v, bool neg)
{
    char tmp[24];
    size_t k = 0;
    do
        tmp[k++] = (char) ('0' + v % 10);
    while ((v /= 10) != 0);
    if (neg)
        tmp[k++] = '-';
    if (*n + k >= cap)
        return false;
    while (k)
        out[(*n)++] = tmp[--k];
    return true;
}

/*  vsnprintf for the formats most lines use: conversions %s %.Ns %d %u
    %ld %lu %lld %llu %zu and %% with no flags or width.  The
    length written (NUL after it), or -1 for any other format or a line
    that does not fit, which the caller then gives to vsnprintf.  (Three
    lines per task at thousands of tasks a second: vsnprintf was most of
    their cost.) */
static int s_format_simple (char *out, size_t cap, const char *fmt, va_list ap)
{
    size_t n = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            if (n + 1 >= cap)
                return -1;
            out[n++] = *p;
            continue;
        }
        p++;
        /* a precision for %s: "%.32s" */
        long prec = -1;
        if (*p == '.') {
            prec = 0;
            for (p++; *p >= '0' && *p <= '9' && prec < 100000; p++)
                prec = prec * 10 + (*p - '0');
            if (*p != 's')
                return -1;
        }
        int longs = 0;
        bool size = false;
        while (*p == 'l' && longs < 2) {
            longs++;
            p++;
        }
        if (*p == 'z' && !longs) {
            size = true;
            p++;
        }
        bool ok = true;
        switch (*p) {
            case '%':
                if (longs || size || n + 1 >= cap)
                    return -1;
                out[n++] = '%';
                break;
            case 's': {
                if (longs || size)
                    return -1;
                const char *s = va_arg (ap, const char *);
                if (!s)
                    s = "(null)";
                size_t len = prec >= 0 ? strnlen (s, (size_t) prec) : strlen (s);
                if (n + len >= cap)
                    return -1;
                memcpy (out + n, s, len);
                n += len;
                break;
            }
            case 'd': {
                long long v = size ? -1 : longs == 2 ? va_arg (ap, long long)
                            : longs == 1 ? va_arg (ap, long) : va_arg (ap, int);
                if (size)
                    return -1;
                ok = s_put_dec (out, cap, &n, v < 0 ? 0ull - (unsigned long long) v : (unsigned long long) v,
                                v < 0);
                break;
            }
            case 'u': {
                unsigned long long v = size ? va_arg (ap, size_t) : longs == 2 ? va_arg (ap, unsigned long long)
                                     : longs == 1 ? va_arg (ap, unsigned long) : va_arg (ap, unsigned);
                ok = s_put_dec (out, cap, &n, v, false);
                break;
            }
            default:
                return -1;
        }
        if (!ok)
            return -1;
    }
    out[n] = '\0';
    return (int) n;
}

void ak_log (ak_log_level_t level, const char *fmt, ...)
{
    if (level >= AK_LOG_QUIET || level < ak_log_level ())
        return;

    char line[AK_LOG_LINE_MAX];
    uint64_t now = ak_clock_wall_ms ();
    time_t secs = (time_t) (now / 1000);
    if (t_head.secs != secs) {
        struct tm tm;
        t_head.stamp[0] = '\0';
        if (gmtime_r (&secs, &tm))
            strftime (t_head.stamp, sizeof t_head.stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        t_head.secs = secs;
    }
    unsigned gen = atomic_load (&s_gen);
    bool journal = atomic_load (&s_journal);
    if (t_head.gen != gen) {
        char ident[sizeof s_ident];
        pthread_mutex_lock (&s_ident_lock);
        memcpy (ident, s_ident, sizeof ident);
        pthread_mutex_unlock (&s_ident_lock);
        int t;
        if (!journal)
            t = snprintf (t_head.tail, sizeof t_head.tail, "Z %s[%ld] ", ident, (long) getpid ());
        else if (strcmp (ident, program_invocation_short_name) != 0
                 || (long) getpid () != atomic_load (&s_journal_pid))
            t = snprintf (t_head.tail, sizeof t_head.tail, "%s[%ld] ", ident, (long) getpid ());
        else
            t = 0;
        t_head.tail_len = t > 0 && (size_t) t < sizeof t_head.tail ? (size_t) t : 0;
        t_head.gen = gen;
    }
    /* "<stamp>.<ms>Z ident[pid] LEVEL ", or "<P>[ident[pid] ]LEVEL " to the journal */
    const char *lname = s_level_name (level);
    size_t slen = strlen (t_head.stamp), llen = strlen (lname);
    size_t head = 0;
    if (journal) {
        line[head++] = '<';
        line[head++] = s_priority (level);
        line[head++] = '>';
    }
    else {
        unsigned ms = (unsigned) (now % 1000);
        memcpy (line, t_head.stamp, slen);
        head += slen;
        line[head++] = '.';
        line[head++] = (char) ('0' + ms / 100);
        line[head++] = (char) ('0' + ms / 10 % 10);
        line[head++] = (char) ('0' + ms % 10);
    }
    memcpy (line + head, t_head.tail, t_head.tail_len);
    head += t_head.tail_len;
    memcpy (line + head, lname, llen);
    head += llen;
    line[head++] = ' ';

    va_list ap;
    va_start (ap, fmt);
    int m = s_format_simple (line + head, sizeof line - head, fmt, ap);
    va_end (ap);
    if (m < 0) {
        va_start (ap, fmt);
        m = vsnprintf (line + head, sizeof line - head, fmt, ap);
        va_end (ap);
    }
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
