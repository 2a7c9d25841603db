/*  worker/child.h: waiting on a compiler child process.

    Both backends compile in a child process so that a compile can be
    killed: the host backend runs the system compiler, the CUDA backend runs
    NVRTC in the exec'd helper ak-nvrtc.  Each child writes its output (the
    compile log) to a pipe; this module reads that pipe until the child
    closes it, bounded in time and size, and reaps the child.  It never leaves a zombie or a
    running child behind. */
#ifndef AK_CHILD_H
#define AK_CHILD_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "error.h"

typedef struct {
    uint64_t          timeout_ms;  /* from the start of the wait */
    const atomic_int *cancel;      /* may be NULL; non-zero: stop now */
    size_t            max_output;  /* bytes kept; the rest is dropped and flagged */
    bool              group;       /* the child leads a process group: kill it all */
} ak_child_wait_t;

typedef struct {
    char  *output;                 /* NUL-terminated, never NULL; caller frees */
    size_t len;
    bool   truncated;              /* output went past max_output */
    bool   timed_out;
    bool   cancelled;
    int    status;                 /* waitpid status (killed ones included) */
} ak_child_result_t;

/*  Reads fd (the read end of the child's output pipe; the caller closed its
    copy of the write end) until end of file, the deadline or a cancel.  On
    timeout, cancel or a read error the child (and its group when asked) is
    killed with SIGKILL; it is always reaped.  Returns 0, with res saying
    whether the child finished, timed out or was cancelled, or AK_EIO with
    err set (res is filled as far as it got).  fd stays open. */
int ak_child_collect (pid_t pid, int fd, const ak_child_wait_t *opts, ak_child_result_t *res,
                      ak_err_t *err);

#endif
