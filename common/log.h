/*  common/log.h: one-line logging to stderr.

    Lines look like `2026-11-29T18:31:13.123Z akcoord[1234] INFO task B1.7 leased to w1`.
    Thread-safe (one write(2) per line).

    When stderr is the journal ($JOURNAL_STREAM names stderr's device and
    inode, as systemd sets it for a service whose stderr goes to journald),
    each line starts with its syslog priority instead of the time stamp:
    `<6>INFO task B1.7 leased to w1` (<7> debug, <6> info, <4> warn,
    <3> error), so that `journalctl -p err` finds the errors; journald
    stamps each line itself and shows the program and pid, so both are
    left out, except on the lines of a process whose ident is not its
    program's name or that was forked from the one journald saw
    (`akworker-exec[4321] INFO ...`).

    The level: --log-level where a program has it, else $AK_LOG_LEVEL
    (debug|info|warn|error|quiet), else info.

    Never: write a line in more than one write(2), or block on anything but
    stderr. */
#ifndef AK_LOG_H
#define AK_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { AK_LOG_DEBUG = 0, AK_LOG_INFO, AK_LOG_WARN, AK_LOG_ERROR, AK_LOG_QUIET } ak_log_level_t;

void ak_log_set_ident (const char *ident);       /* "akcoord", "akworker" ... */
void ak_log_set_level (ak_log_level_t level);
ak_log_level_t ak_log_level (void);
/* Parses "debug|info|warn|error|quiet"; returns -1 if unknown. */
/* Re-reads whether stderr is the journal (done once at the first line):
   for a process that redirected fd 2 since.  True when it is. */
bool ak_log_check_journal (void);
int  ak_log_parse_level (const char *text);
void ak_log (ak_log_level_t level, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/*  Holding (the coordinator's loop, which logs three info lines per task
    and would otherwise make three write(2) calls per task): while the
    calling thread holds, its debug and info lines are kept in a buffer
    and written together by ak_log_flush, when the buffer is full, before
    any warn or error line of that thread, and at exit.  Lines keep their
    own time stamps and order.  A process killed while holding loses the
    lines since its last flush: flush before anything that makes them
    observable (a reply, an acknowledgement).  ak_log_hold (false)
    flushes and stops holding. */
void ak_log_hold (bool on);
void ak_log_flush (void);
/* The calling thread's flushes that wrote held lines so far: how many,
   their bytes and the time their write(2)s took (ns); for the
   coordinator's loop statistics (coordinator/loopstat.h). */
void ak_log_flush_stats (uint64_t *flushes, uint64_t *bytes, uint64_t *ns);

#define ak_debug(...) ak_log (AK_LOG_DEBUG, __VA_ARGS__)
#define ak_info(...)  ak_log (AK_LOG_INFO,  __VA_ARGS__)
#define ak_warn(...)  ak_log (AK_LOG_WARN,  __VA_ARGS__)
#define ak_error(...) ak_log (AK_LOG_ERROR, __VA_ARGS__)

#endif
