/*  worker/daemon_slots.c: executor slots (daemon_impl.h): per device
    `slots` executors, restarted with a growing delay when they die idle,
    and the dispatch of compiled tasks to them. */
#include "daemon_impl.h"
#include "clock.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AK_RESPAWN_MIN_MS       250
#define AK_RESPAWN_MAX_MS       30000

void ak_daemon_slot_spawn (ak_daemon_t *d, ak_dslot_t *s)
{
    ak_err_t err = { 0 };
    const Ak__Device *dev = d->devices[s->dev];
    int rc = ak_exec_new (d->exe_path, d->dev_be[s->dev]->name, dev->index, d->log_level, d->scratch_dir,
                          &s->exec, &err);
    if (rc == 0 && s->spawns++ > 0 && d->dstats)
        d->dstats[s->dev].restarts++;
    if (rc != 0) {
        s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : AK_RESPAWN_MIN_MS;
        if (s->backoff_ms > AK_RESPAWN_MAX_MS)
            s->backoff_ms = AK_RESPAWN_MAX_MS;
        s->respawn_at = ak_clock_mono_ms () + s->backoff_ms;
        ak_error ("executor for device %u: %s (retry in %u ms)", dev->index, err.msg, s->backoff_ms);
    }
}

/*  The executor of slot s is gone (crash, timeout, protocol breach).  Its
    task, if any, gets a receipt with status and reason; a fresh executor
    starts at once after a job died, after a growing delay when it died
    idle (a broken set-up must not spin). */
void ak_daemon_slot_lost (ak_daemon_t *d, ak_dslot_t *s, const char *status, const char *reason)
{
    const pid_t pid = ak_exec_spawned_pid (s->exec);
    ak_exec_destroy (&s->exec);
    ak_daemon_scratch_sweep (d, pid);                 /* the job it died in left its scratch */
    ak_dtask_t *t = s->task;
    s->task = NULL;
    if (t) {
        ak_warn ("task %s#%u: %s", t->a->task_id, t->a->attempt, reason);
        ak_daemon_task_fail (d, t, status, reason);
        s->respawn_at = ak_clock_mono_ms ();
    }
    else {
        s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : AK_RESPAWN_MIN_MS;
        if (s->backoff_ms > AK_RESPAWN_MAX_MS)
            s->backoff_ms = AK_RESPAWN_MAX_MS;
        s->respawn_at = ak_clock_mono_ms () + s->backoff_ms;
        ak_warn ("idle executor lost: %s (new one in %u ms)", reason, s->backoff_ms);
    }
}

void ak_daemon_slot_readable (ak_daemon_t *d, ak_dslot_t *s)
{
    Ak__Receipt *r = NULL;
    ak_err_t err = { 0 };
    int rc = ak_exec_on_readable (s->exec, &r, &err);
    if (rc) {
        ak_daemon_slot_lost (d, s, "crashed", err.msg);
        return;
    }
    if (!r)
        return;
    ak_dtask_t *t = s->task;
    s->task = NULL;
    s->backoff_ms = 0;
    /* "crashed" from the executor itself: its device context is lost (a
       sticky CUDA error).  It exits after this receipt; it must get no
       other job, so it is replaced now. */
    bool lost = strcmp (r->status, "crashed") == 0;
    if (!t) {
        ak_warn ("executor %d sent a receipt with no job out; dropped", (int) ak_exec_pid (s->exec));
        ak__receipt__free_unpacked (r, NULL);
    }
    else
        ak_daemon_task_finish (d, t, r);
    if (lost) {
        ak_info ("executor %d on device %u lost its device context: starting a fresh one",
                 (int) ak_exec_pid (s->exec), d->devices[s->dev]->index);
        ak_exec_destroy (&s->exec);
        s->respawn_at = ak_clock_mono_ms ();
    }
}

/*  The compiled kernels of t for the executor of device dev: one Artifact
    per role and element type built (arts and ptrs are the caller's
    storage), and the old single-artifact fields for the backend's default
    dtype.  Strings are borrowed from t. */
static void s_job_artifacts (ak_daemon_t *d, ak_dtask_t *t, uint32_t dev, Ak__ExecJob *job,
                             Ak__Artifact arts[2 * AK_DT_COUNT + 1], Ak__Artifact *ptrs[2 * AK_DT_COUNT + 1])
{
    ak_dtype_t build_dt = ak_backend_build_dtype (d->dev_be[dev], d->devices[dev]);
    size_t n = 0;
    for (int role = 0; role < 2; role++)
        for (int dt = 0; dt < AK_DT_COUNT; dt++) {
            char *path = role ? t->cand_path[dt] : t->base_path[dt];
            if (!path)
                continue;
            ak__artifact__init (&arts[n]);
            arts[n].role = (char *) (role ? "candidate" : "baseline");
            arts[n].dtype = (char *) ak_dtype_name ((ak_dtype_t) dt);
            arts[n].path = path;
            ptrs[n] = &arts[n];
            n++;
        }
    if (t->dref_path) {
        ak__artifact__init (&arts[n]);
        arts[n].role = (char *) "reference_cuda";
        arts[n].dtype = (char *) "float64";
        arts[n].path = t->dref_path;
        ptrs[n] = &arts[n];
        n++;
    }
    job->n_artifacts = n;
    job->artifacts = ptrs;
    job->baseline_path = t->base_path[build_dt] ? t->base_path[build_dt] : (char *) "";
    job->candidate_path = t->cand_path[build_dt] ? t->cand_path[build_dt] : (char *) "";
}

/*  Hands READY tasks (in arrival order) to idle executors of a fitting
    device: STARTED to the coordinator, then the job. */
void ak_daemon_dispatch (ak_daemon_t *d)
{
    for (ak_dtask_t *t = d->tasks, *next; t; t = next) {
        next = t->next;
        if (t->state != AK_DTASK_READY)
            continue;
        int want = ak_daemon_device_for (d, t->a);
        if (want < 0) {
            char why[256];
            snprintf (why, sizeof why, "no device of class '%.64s' (backend '%.16s') on this worker",
                      t->a->device_class, t->a->backend);
            ak_daemon_task_fail (d, t, "error", why);
            continue;
        }
        for (size_t i = 0; i < d->nslots; i++) {
            ak_dslot_t *s = &d->slots[i];
            const Ak__Device *dev = d->devices[s->dev];
            if (!s->exec || s->task || ak_exec_busy (s->exec))
                continue;
            if (t->a->device_class[0] && strcmp (t->a->device_class, dev->device_class) != 0)
                continue;
            Ak__ExecJob job = AK__EXEC_JOB__INIT;
            Ak__Artifact arts[2 * AK_DT_COUNT + 1], *art_ptrs[2 * AK_DT_COUNT + 1];
            s_job_artifacts (d, t, s->dev, &job, arts, art_ptrs);
            job.assign = (Ak__Assign *) t->a;
            job.reference_path = t->ref_path;
            job.device = dev->index;
            t->slot = (int) i;
            t->state = AK_DTASK_RUNNING;
            t->started_wall_ms = ak_clock_wall_ms ();
            s->task = t;
            ak_daemon_send_started (d, t, dev->index);
            ak_err_t err = { 0 };
            if (ak_exec_submit (s->exec, &job, t->policy.run_timeout_ms, &err) != 0) {
                /* The executor is broken, not the task: back to READY. */
                ak_warn ("executor %d did not take task %s#%u: %s", (int) ak_exec_pid (s->exec),
                         t->a->task_id, t->a->attempt, err.msg);
                s->task = NULL;
                t->slot = -1;
                t->state = AK_DTASK_READY;
                t->started_wall_ms = 0;
                ak_daemon_slot_lost (d, s, "crashed", err.msg);
                continue;
            }
            ak_debug ("task %s#%u on device %u (executor %d)", t->a->task_id, t->a->attempt,
                      dev->index, (int) ak_exec_pid (s->exec));
            break;
        }
    }
}
