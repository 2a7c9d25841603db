/*  worker/jobproc.h: one host job in a confined process of its own.

    An executor of the host backend runs no kernel code itself: each job
    runs in a child it forks (the "job process"), confined before any
    kernel is loaded (worker/sandbox.h: its own process group, rlimits,
    no_new_privs, Landlock, seccomp), with stdin from /dev/null and
    stdout/stderr captured through a pipe: the first 64 KiB are kept for
    the receipt, the rest counted and dropped, nothing reaches the
    worker's log.  The executor's socket to the daemon is closed in the
    child.  The job process sends its receipt on a pipe, as a frame
    authenticated with a per-job key (libsodium crypto_auth) that the
    executor hands it before any kernel code runs; a frame that does not
    verify is never taken for the harness's verdict.  At the end of the
    job the whole process group is killed (SIGKILL), so nothing a kernel
    started outlives its task.  What one process cannot guarantee (a
    kernel that finds the key in its own process's memory):
    docs/operations.md, "Threat model".

    Never: run kernel code in the executor; log the kernel's output;
    accept a receipt that did not verify; leave the job process or its
    group running after ak_jobproc_run returns. */
#ifndef AK_WORKER_JOBPROC_H
#define AK_WORKER_JOBPROC_H
#include "akfleet.pb-c.h"
#include "backend.h"

#define AK_JOBPROC_OUTPUT_MAX (64u * 1024)   /* kernel output kept in a receipt */

/* Runs job like ak_job_run (job.h) in a confined job process and returns
   its receipt (never NULL; the caller frees it), with `sandbox` saying
   what confined it and `kernel_output*` what it printed.  When the job
   process was killed by a signal of its own (a crashing kernel: SIGSEGV,
   SIGXCPU at its CPU limit ...), *fatal_sig gets the signal and the
   receipt says "crashed": an executor re-raises it, so that the daemon
   sees what it saw when kernels ran in the executor.  The job's scratch
   directory is made in scratch (the worker's own, an absolute path; NULL:
   TMPDIR, else /tmp), named by this process's pid. */
Ak__Receipt *ak_jobproc_run (const ak_backend_t *be, ak_dev_t *dev, const Ak__Device *device,
                             const Ak__ExecJob *job, const char *scratch_root, int *fatal_sig);

#endif
