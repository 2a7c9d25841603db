/*  worker/job.h: running one task inside an executor.

    Executor side of the daemon/executor split: given an ExecJob (the task
    and the paths of its compiled artifacts), load the reference and the
    kernels, run the gates, time every workload, recheck on fresh inputs and
    fill a Receipt.  What the candidate does can only show up as a status in
    the receipt (or, for a crash or hang, as the death of this process,
    which the daemon turns into a receipt).  Also usable in-process by tests. */
#ifndef AK_WORKER_JOB_H
#define AK_WORKER_JOB_H
#include "akfleet.pb-c.h"
#include "assign.h"
#include "backend.h"
#include "policy.h"
#include "refcache.h"
#include "spec.h"

/* The compiled artifact of a job for role ("baseline" | "candidate") and
   element type dt: the entry of job->artifacts with that role and dtype;
   when the job lists no artifact of that role at all (a daemon that builds
   one artifact per source), the old field (baseline_path / candidate_path)
   stands for build_dt.  NULL when there is none: that dtype is not run.
   Borrowed from job. */
const char *ak_job_artifact (const Ak__ExecJob *job, const char *role, ak_dtype_t dt,
                             ak_dtype_t build_dt);

/* Runs job on dev (opened by be) and returns a new receipt, never NULL;
   the caller frees it with ak__receipt__free_unpacked (r, NULL).  Fills
   task identity, status, reason, gates, timings, source/options digests
   from the assign, gate_ms, timing_ms and started/finished times; the
   daemon adds worker, host, device and compile figures.
   Every element type the spec declares, the backend supports and the job
   has artifacts for is gated and timed, each with its own kernel; launch
   configurations come from the spec's launch rules (ak_launch_eval).
   Status "crashed" means the device context is lost (a sticky error, the
   CUDA error named in the reason): the caller must not run another job
   on dev, and an executor exits after sending that receipt.
   refcache (may be NULL): the executor's reference cache, which the gates
   read and fill (keyed by the digests of the job's compiled references,
   gates.h); drefcache (may be NULL) the same on dev, for the outputs of
   device references (ak_refcache_new_device); both outlive the job. */
Ak__Receipt *ak_job_run (const ak_backend_t *be, ak_dev_t *dev, const Ak__Device *device,
                         const Ak__ExecJob *job, ak_refcache_t *refcache, ak_refcache_t *drefcache);

#endif
