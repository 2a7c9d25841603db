/*  worker/executor.h: executor processes.

    Per device the daemon keeps executor children: the akworker binary
    started again (fork + exec) as `akworker --executor --fd N --backend B
    --device I`, talking over a socketpair with length-prefixed packed
    protobuf (ExecJob in, Receipt out; worker/frame.h).  Candidate code runs
    only there, so a crash, a hang or a corrupted device context kills the
    executor, never the daemon: the daemon gets a "crashed" or "timeout"
    receipt and starts a fresh executor.

    Daemon side: the ak_exec_t class.  Child side: ak_executor_main. */
#ifndef AK_WORKER_EXECUTOR_H
#define AK_WORKER_EXECUTOR_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "akfleet.pb-c.h"
#include "error.h"

typedef struct ak_exec ak_exec_t;

/* Starts an executor: bin in executor mode for backend and device, its log
   lines at log_level ("info" when NULL), its host jobs' scratch
   directories made in scratch (`--scratch`; NULL: in TMPDIR, jobproc.h).
   AK_EIO / AK_EUNAVAIL with err naming the failing call. */
int  ak_exec_new (const char *bin, const char *backend, uint32_t device, const char *log_level,
                  const char *scratch, ak_exec_t **self_p, ak_err_t *err);
/* Closes the socket (the executor exits on end of stream), waits up to
   200 ms, then SIGKILLs it and reaps it.  Safe twice. */
void ak_exec_destroy (ak_exec_t **self_p);

int      ak_exec_fd (const ak_exec_t *self);       /* poll it for input */
pid_t    ak_exec_pid (const ak_exec_t *self);
/*  The pid it was started with, also once it is reaped (-1: none). */
pid_t    ak_exec_spawned_pid (const ak_exec_t *self);
bool     ak_exec_busy (const ak_exec_t *self);     /* a job is out */
uint64_t ak_exec_deadline (const ak_exec_t *self); /* monotonic ms; 0 when idle */

/* Hands job to the idle executor; its watchdog starts now and fires
   timeout_ms later.  AK_ESTATE when busy; AK_EIO/AK_ETIMEOUT when the
   executor does not take it (treat it as dead). */
int  ak_exec_submit (ak_exec_t *self, const Ak__ExecJob *job, uint32_t timeout_ms, ak_err_t *err);

/* Reads what the executor sent.  0 with *receipt_p NULL: not complete yet.
   0 with *receipt_p (caller frees with ak__receipt__free_unpacked): the job
   is done and the executor idle again.  AK_ECRASH: the executor died or
   broke the protocol; err->msg is the reason for a "crashed" receipt
   ("executor killed by SIGSEGV"); the executor is gone, destroy it. */
int  ak_exec_on_readable (ak_exec_t *self, Ak__Receipt **receipt_p, ak_err_t *err);

/* Watchdog: when a job is out past its deadline at now_ms, SIGKILLs and
   reaps the executor and returns AK_ETIMEOUT (err: "no answer within N
   ms"); destroy it then.  0 otherwise. */
int  ak_exec_check (ak_exec_t *self, uint64_t now_ms, ak_err_t *err);

/* Blocking form for tools and tests: submit, then wait for the receipt,
   the executor's death or the deadline.  *receipt_p always gets a receipt:
   the executor's own, or one made from job->assign with status "crashed"
   or "timeout" and the reason.  Returns 0, or AK_ECRASH / AK_ETIMEOUT when
   the executor is gone (destroy it and start another). */
int  ak_exec_run (ak_exec_t *self, const Ak__ExecJob *job, uint32_t timeout_ms,
                  Ak__Receipt **receipt_p, ak_err_t *err);

/* Name of a signal for reasons: "SIGSEGV", else "signal N" (in buf). */
const char *ak_signal_name (int sig, char *buf, size_t len);

/* The child: serves jobs on fd until end of stream.  Returns the process
   exit code (0 on a clean end, 2 for bad arguments or no device, 3 after
   sending a "crashed" receipt: the device context is lost). */
int  ak_executor_main (int fd, const char *backend, uint32_t device, const char *scratch);

#endif
