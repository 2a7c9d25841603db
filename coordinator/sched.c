/*  coordinator/sched.c: in-memory index of batches, tasks, queues, leases
    (see sched.h). */
#include <czmq.h>
#include <stdlib.h>
#include <string.h>
#include "sched.h"
#include "clock.h"
#include "cpb.h"
#include "log.h"
#include "util.h"

#define S_DEFAULT_MAX_ATTEMPTS 3
#define S_DEFAULT_LEASE_MS     120000

struct ak_sched {
    zhashx_t *tasks;            /* task_id -> ak_task_t (owned) */
    zhashx_t *batches;          /* batch_id -> ak_batch_t (owned through `order`) */
    zlistx_t *order;            /* batches in creation order */
    zhashx_t *queues;           /* device class -> zlistx_t of ak_task_t */
    zhashx_t *pins;             /* worker id -> zlistx_t of its pinned queued tasks */
    zlistx_t *leased;           /* leased tasks, for deadline scans */
    ak_dirty_t dirty_tasks;     /* dirty.h */
    ak_dirty_t dirty_batches;
    zlistx_t *settling;         /* batches waiting for their winners */
    size_t    counts[AK_TS_COUNT];
};

static const char *s_tstate_names[AK_TS_COUNT] = {
    "queued", "leased", "done", "failed", "poisoned", "cancelled"
};
static const char *s_bstate_names[] = { "open", "complete", "cancelled" };

const char *ak_tstate_name (ak_tstate_t state)
{
    return state < AK_TS_COUNT ? s_tstate_names[state] : "unknown";
}

int ak_tstate_parse (const char *name, ak_tstate_t *state)
{
    for (int i = 0; i < AK_TS_COUNT; i++)
        if (name && strcmp (name, s_tstate_names[i]) == 0) {
            *state = (ak_tstate_t) i;
            return 0;
        }
    return AK_EINVAL;
}

bool ak_tstate_terminal (ak_tstate_t state)
{
    return state >= AK_TS_DONE;
}

const char *ak_bstate_name (ak_bstate_t state)
{
    return state <= AK_BS_CANCELLED ? s_bstate_names[state] : "unknown";
}

// ------------------------------------------------------------ construction

/* Drops task's cached record and its packed definition. */
static void s_uncache (ak_task_t *task)
{
    if (task->rec)
        ak__task_record__free_unpacked (task->rec, NULL);
    task->rec = NULL;
    ak_task_def_clear (&task->rec_def);
}

static void s_task_free (void **item)
{
    ak_task_t *task = *item;
    if (task) {
        free (task->task_id);
        free (task->device_class);
        free (task->kind);
        free (task->op);
        free (task->avoid_worker);
        free (task->worker_id);
        free (task->attempt_holder);
        free (task->last_error);
        free (task->pin_worker);
        s_uncache (task);
        free (task);
        *item = NULL;
    }
}

static void s_winners_free (Ak__Winner **winners, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ak__winner__free_unpacked (winners[i], NULL);
    free (winners);
}

static void s_batch_free (void **item)
{
    ak_batch_t *batch = *item;
    if (batch) {
        free (batch->batch_id);
        free (batch->name);
        for (size_t i = 0; i < batch->ntargets; i++)
            free (batch->targets[i]);
        free (batch->targets);
        s_winners_free (batch->winners, batch->nwinners);
        free (batch->tasks);
        zhashx_destroy ((zhashx_t **) &batch->rounds_memo);
        free (batch);
        *item = NULL;
    }
}

static void s_queue_free (void **item)
{
    zlistx_t *queue = *item;
    zlistx_destroy (&queue);
    *item = NULL;
}

ak_sched_t *ak_sched_new (void)
{
    ak_sched_t *self = ak_calloc (1, sizeof *self);
    self->tasks = zhashx_new ();
    self->batches = zhashx_new ();
    self->order = zlistx_new ();
    self->queues = zhashx_new ();
    self->pins = zhashx_new ();
    self->leased = zlistx_new ();
    ak_dirty_init (&self->dirty_tasks, offsetof (ak_task_t, dirty));
    ak_dirty_init (&self->dirty_batches, offsetof (ak_batch_t, dirty));
    self->settling = zlistx_new ();
    if (!self->tasks || !self->batches || !self->order || !self->queues || !self->pins || !self->leased
        || !self->settling)
        abort ();
    zhashx_set_destructor (self->tasks, s_task_free);
    zlistx_set_destructor (self->order, s_batch_free);
    zhashx_set_destructor (self->queues, s_queue_free);
    zhashx_set_destructor (self->pins, s_queue_free);
    return self;
}

void ak_sched_destroy (ak_sched_t **self_p)
{
    if (self_p && *self_p) {
        ak_sched_t *self = *self_p;
        zlistx_destroy (&self->settling);
        ak_dirty_destroy (&self->dirty_batches);
        ak_dirty_destroy (&self->dirty_tasks);
        zlistx_destroy (&self->leased);
        zhashx_destroy (&self->pins);
        zhashx_destroy (&self->queues);
        zhashx_destroy (&self->batches);
        zlistx_destroy (&self->order);
        zhashx_destroy (&self->tasks);
        free (self);
        *self_p = NULL;
    }
}

// ------------------------------------------------------------ bookkeeping

static void s_mark_task (ak_sched_t *self, ak_task_t *task, uint64_t now)
{
    ak_dirty_mark (&self->dirty_tasks, task, now);
}

static void s_mark_batch (ak_sched_t *self, ak_batch_t *batch, uint64_t now)
{
    ak_dirty_mark (&self->dirty_batches, batch, now);
}

static bool s_all_terminal (const ak_batch_t *batch)
{
    size_t terminal = 0;
    for (int s = AK_TS_DONE; s < AK_TS_COUNT; s++)
        terminal += batch->counts[s];
    return terminal == batch->total;
}

static void s_check_settled (ak_sched_t *self, ak_batch_t *batch)
{
    if (batch->state == AK_BS_OPEN && s_all_terminal (batch) && !batch->settling) {
        batch->settling = true;
        zlistx_add_end (self->settling, batch);
    }
}

/* Moves task to state, keeping every counter in step. */
static void s_set_state (ak_sched_t *self, ak_task_t *task, ak_tstate_t state)
{
    self->counts[task->state]--;
    task->batch->counts[task->state]--;
    if (task->state == AK_TS_LEASED && task->lease_handle) {
        zlistx_detach (self->leased, task->lease_handle);
        task->lease_handle = NULL;
    }
    if (state != AK_TS_LEASED)
        s_uncache (task);
    if (ak_tstate_terminal (task->state) && !ak_tstate_terminal (state))
        task->batch->reopens++;
    task->state = state;
    self->counts[state]++;
    task->batch->counts[state]++;
    if (state == AK_TS_LEASED)
        task->lease_handle = zlistx_add_end (self->leased, task);
    if (ak_tstate_terminal (state))
        s_check_settled (self, task->batch);
}

static zlistx_t *s_queue (ak_sched_t *self, const char *device_class)
{
    zlistx_t *queue = zhashx_lookup (self->queues, device_class);
    if (!queue) {
        queue = zlistx_new ();
        if (!queue)
            abort ();
        zhashx_insert (self->queues, device_class, queue);
    }
    return queue;
}

/* The queue a queued task waits in: its pinned worker's, else its class's. */
static zlistx_t *s_task_queue (ak_sched_t *self, ak_task_t *task)
{
    if (!task->pin_worker)
        return s_queue (self, task->device_class);
    zlistx_t *queue = zhashx_lookup (self->pins, task->pin_worker);
    if (!queue) {
        queue = zlistx_new ();
        if (!queue)
            abort ();
        zhashx_insert (self->pins, task->pin_worker, queue);
    }
    return queue;
}

/* A retry goes to the head of its queue: it keeps its place in line, so
   batches finish in submission order. */
static void s_enqueue (ak_sched_t *self, ak_task_t *task, bool front)
{
    if (!task->in_queue) {
        task->in_queue = true;
        if (front)
            zlistx_add_start (s_task_queue (self, task), task);
        else
            zlistx_add_end (s_task_queue (self, task), task);
    }
}

static ak_batch_t *s_batch_new (ak_sched_t *self, const Ak__BatchRecord *rec)
{
    ak_batch_t *batch = ak_calloc (1, sizeof *batch);
    batch->batch_id = ak_strdup (rec->batch_id);
    batch->name = ak_strdup (rec->name);
    batch->state = AK_BS_OPEN;
    if (strcmp (rec->state, "complete") == 0)
        batch->state = AK_BS_COMPLETE;
    else if (strcmp (rec->state, "cancelled") == 0)
        batch->state = AK_BS_CANCELLED;
    batch->created_ms = rec->created_ms;
    batch->finished_ms = rec->finished_ms;
    if (rec->n_targets) {
        batch->targets = ak_calloc (rec->n_targets, sizeof *batch->targets);
        for (size_t i = 0; i < rec->n_targets; i++)
            batch->targets[i] = ak_strdup (rec->targets[i]);
        batch->ntargets = rec->n_targets;
    }
    batch->threshold = rec->policy ? rec->policy->threshold : 0.03;
    batch->max_regression = rec->policy ? rec->policy->max_regression : 0.05;
    if (rec->n_winners) {
        batch->winners = ak_calloc (rec->n_winners, sizeof *batch->winners);
        for (size_t i = 0; i < rec->n_winners; i++) {
            batch->winners[i] = (Ak__Winner *) ak_cpb_dup (&rec->winners[i]->base);
            if (batch->winners[i])
                batch->nwinners++;
        }
    }
    zlistx_add_end (self->order, batch);
    zhashx_insert (self->batches, batch->batch_id, batch);
    return batch;
}

/* Indexes one task record (state as recorded). */
static ak_task_t *s_task_new (ak_sched_t *self, ak_batch_t *batch, const Ak__TaskRecord *rec,
                              ak_tstate_t state)
{
    ak_task_t *task = ak_calloc (1, sizeof *task);
    task->task_id = ak_strdup (rec->task_id);
    task->batch = batch;
    task->device_class = ak_strdup (rec->device_class);
    task->kind = ak_strdup (rec->kind);
    task->op = ak_strdup (rec->op);
    task->stage = rec->stage;
    if (rec->avoid_worker && *rec->avoid_worker)
        task->avoid_worker = ak_strdup (rec->avoid_worker);
    task->state = state;
    task->attempt = rec->attempt ? rec->attempt : 1;
    task->attempt_base = rec->attempt_base < task->attempt ? rec->attempt_base : 0;
    task->max_attempts = rec->policy && rec->policy->max_attempts ? rec->policy->max_attempts
                                                                  : S_DEFAULT_MAX_ATTEMPTS;
    task->lease_ms = rec->policy && rec->policy->lease_ms ? rec->policy->lease_ms : S_DEFAULT_LEASE_MS;
    task->queued_ms = rec->queued_ms;
    task->leased_ms = rec->leased_ms;
    task->finished_ms = rec->finished_ms;
    if (rec->last_error && *rec->last_error)
        task->last_error = ak_strdup (rec->last_error);
    if (rec->pin_worker && *rec->pin_worker)
        task->pin_worker = ak_strdup (rec->pin_worker);
    zhashx_insert (self->tasks, task->task_id, task);
    self->counts[state]++;
    batch->counts[state]++;
    if (batch->ntasks == batch->cap_tasks) {
        batch->cap_tasks = batch->cap_tasks ? batch->cap_tasks * 2 : 16;
        batch->tasks = ak_realloc (batch->tasks, batch->cap_tasks * sizeof *batch->tasks);
    }
    batch->tasks[batch->ntasks++] = task;
    batch->total = batch->ntasks;
    if (state == AK_TS_LEASED)
        task->lease_handle = zlistx_add_end (self->leased, task);
    else if (state == AK_TS_QUEUED)
        s_enqueue (self, task, false);
    return task;
}

// ------------------------------------------------------------------ loading

typedef struct {
    ak_sched_t *self;
    uint64_t    now;
    uint64_t    wall;           /* the wall clock at now */
    uint64_t    grace_ms;
    size_t      skipped;
} s_load_t;

static int s_load_batch (const char *key, const void *val, size_t len, void *arg)
{
    s_load_t *load = arg;
    Ak__BatchRecord *rec = ak__batch_record__unpack (NULL, len, val);
    if (!rec || !*rec->batch_id || zhashx_lookup (load->self->batches, rec->batch_id)) {
        ak_error ("store: batches/%s: undecodable or duplicate batch record, skipped", key);
        load->skipped++;
    }
    else
        s_batch_new (load->self, rec);
    if (rec)
        ak__batch_record__free_unpacked (rec, NULL);
    return 0;
}

static int s_load_task (const char *key, const void *val, size_t len, void *arg)
{
    s_load_t *load = arg;
    ak_sched_t *self = load->self;
    ak_tstate_t state;
    Ak__TaskRecord *rec = ak__task_record__unpack (NULL, len, val);
    ak_batch_t *batch = rec ? zhashx_lookup (self->batches, rec->batch_id) : NULL;
    if (!rec || !*rec->task_id || !*rec->device_class || zhashx_lookup (self->tasks, rec->task_id)
        || ak_tstate_parse (rec->state, &state) || !batch) {
        ak_error ("store: tasks/%s: undecodable task record, unknown state or batch, skipped", key);
        load->skipped++;
    }
    else {
        ak_task_t *task = s_task_new (self, batch, rec, state);
        /* the worker given the current attempt: it alone may deliver its
           receipt (again, once the task finished) or list it in HELLO */
        if (state != AK_TS_QUEUED && rec->worker_id && *rec->worker_id)
            task->attempt_holder = ak_strdup (rec->worker_id);
        if (state == AK_TS_LEASED) {
            task->worker_id = task->attempt_holder ? ak_strdup (task->attempt_holder) : NULL;
            if (rec->lease_deadline_ms) {
                /* started: its lease ends when it did before the restart */
                task->started = true;
                task->lease_end_ms = rec->lease_deadline_ms;
                task->deadline = rec->lease_deadline_ms > load->wall
                               ? load->now + (rec->lease_deadline_ms - load->wall) : load->now;
            }
            else {
                /* not started: its holder must come back for it within the
                   grace, or once lease_ms after it was assigned passed */
                uint64_t end = rec->leased_ms + task->lease_ms;
                task->deadline = load->now + (end > load->wall + load->grace_ms ? end - load->wall
                                                                                : load->grace_ms);
            }
        }
    }
    if (rec)
        ak__task_record__free_unpacked (rec, NULL);
    return 0;
}

int ak_sched_load (ak_sched_t *self, ak_txn_t *txn, uint64_t now, uint64_t grace_ms, ak_err_t *err)
{
    s_load_t load = { self, now, ak_clock_wall_ms (), grace_ms, 0 };
    int rc = ak_store_walk (txn, AK_DB_BATCHES, "", s_load_batch, &load, err);
    if (rc == 0)
        rc = ak_store_walk (txn, AK_DB_TASKS, "", s_load_task, &load, err);
    if (rc)
        return rc;
    for (ak_batch_t *b = zlistx_first (self->order); b; b = zlistx_next (self->order))
        s_check_settled (self, b);
    ak_info ("index rebuilt: %zu batches (%zu open), %zu tasks: %zu queued, %zu leased, %zu skipped records",
             zlistx_size (self->order), ak_sched_open_batches (self), zhashx_size (self->tasks),
             self->counts[AK_TS_QUEUED], self->counts[AK_TS_LEASED], load.skipped);
    return 0;
}

void ak_sched_add (ak_sched_t *self, const ak_expansion_t *exp)
{
    ak_batch_t *batch = s_batch_new (self, exp->batch);
    for (size_t i = 0; i < exp->ntasks; i++)
        s_task_new (self, batch, exp->tasks[i], AK_TS_QUEUED);
    s_check_settled (self, batch);
}

// ------------------------------------------------------------------ lookups

ak_task_t *ak_sched_task (ak_sched_t *self, const char *task_id)
{
    return task_id ? zhashx_lookup (self->tasks, task_id) : NULL;
}

ak_batch_t *ak_sched_batch (ak_sched_t *self, const char *batch_id)
{
    return batch_id ? zhashx_lookup (self->batches, batch_id) : NULL;
}

ak_batch_t *ak_sched_batch_first (ak_sched_t *self)
{
    return zlistx_first (self->order);
}

ak_batch_t *ak_sched_batch_next (ak_sched_t *self)
{
    return zlistx_next (self->order);
}

size_t ak_sched_count (ak_sched_t *self, ak_tstate_t state)
{
    return state < AK_TS_COUNT ? self->counts[state] : 0;
}

size_t ak_sched_open_batches (ak_sched_t *self)
{
    size_t n = 0;
    for (ak_batch_t *b = zlistx_first (self->order); b; b = zlistx_next (self->order))
        if (b->state == AK_BS_OPEN)
            n++;
    return n;
}

// ------------------------------------------------------------------- queues

ak_task_t *ak_sched_pop (ak_sched_t *self, const char *device_class)
{
    zlistx_t *queue = zhashx_lookup (self->queues, device_class);
    if (!queue)
        return NULL;
    ak_task_t *task;
    while ((task = zlistx_detach (queue, NULL))) {
        task->in_queue = false;
        if (task->state == AK_TS_QUEUED)
            return task;
    }
    return NULL;
}

void ak_sched_unpop (ak_sched_t *self, ak_task_t *task)
{
    if (task->state == AK_TS_QUEUED && !task->in_queue) {
        task->in_queue = true;
        zlistx_add_start (s_task_queue (self, task), task);
    }
}

ak_task_t *ak_sched_pop_for (ak_sched_t *self, const char *device_class, const char *worker_id,
                             ak_sched_other_fn *other_live, void *arg)
{
    zlistx_t *queue = zhashx_lookup (self->queues, device_class);
    if (!queue)
        return NULL;
    for (ak_task_t *task = zlistx_first (queue); task; ) {
        if (task->state != AK_TS_QUEUED) {
            /* terminal while queued: drop it, as ak_sched_pop does */
            task->in_queue = false;
            zlistx_detach_cur (queue);
            task = zlistx_first (queue);
            continue;
        }
        if (task->avoid_worker && worker_id && strcmp (task->avoid_worker, worker_id) == 0
            && other_live && other_live (arg, task)) {
            task = zlistx_next (queue);
            continue;
        }
        task->in_queue = false;
        zlistx_detach_cur (queue);
        return task;
    }
    return NULL;
}

void ak_sched_extend (ak_sched_t *self, Ak__TaskRecord *const *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ak_batch_t *batch = zhashx_lookup (self->batches, recs[i]->batch_id);
        if (!batch || zhashx_lookup (self->tasks, recs[i]->task_id)) {
            ak_error ("task %s: not indexed (unknown batch or id taken)", recs[i]->task_id);
            continue;
        }
        s_task_new (self, batch, recs[i], AK_TS_QUEUED);
        ak_info ("task %s queued (%s, stage %u) in batch %s", recs[i]->task_id, recs[i]->kind,
                 recs[i]->stage, batch->batch_id);
    }
}

ak_task_t *ak_sched_pop_pinned (ak_sched_t *self, const char *worker_id)
{
    if (zhashx_size (self->pins) == 0)
        return NULL;                    /* nothing pinned (no verify): no hashing per dispatch */
    zlistx_t *queue = zhashx_lookup (self->pins, worker_id);
    if (!queue)
        return NULL;
    ak_task_t *task;
    while ((task = zlistx_detach (queue, NULL))) {
        task->in_queue = false;
        if (task->state == AK_TS_QUEUED)
            return task;
    }
    zhashx_delete (self->pins, worker_id);      /* drained: forget the worker */
    return NULL;
}

/* Fails one pinned task that will never run on its worker. */
static void s_fail_pinned (ak_sched_t *self, ak_task_t *task, const char *reason, uint64_t now)
{
    free (task->last_error);
    task->last_error = ak_strdup (reason);
    free (task->worker_id);
    task->worker_id = NULL;
    task->deadline = 0;
    task->started = false;
    task->finished_ms = ak_clock_wall_ms ();
    s_set_state (self, task, AK_TS_FAILED);
    s_mark_task (self, task, now);
    ak_info ("task %s failed: pinned to %s: %s", task->task_id, task->pin_worker, reason);
}

size_t ak_sched_fail_pinned (ak_sched_t *self, const char *worker_id, const char *reason, uint64_t now)
{
    size_t n = 0;
    ak_task_t *task;
    char *wid = ak_strdup (worker_id);      /* it may be the key deleted below */
    worker_id = wid;
    zlistx_t *queue = zhashx_lookup (self->pins, worker_id);
    while (queue && (task = zlistx_detach (queue, NULL))) {
        task->in_queue = false;
        if (task->state == AK_TS_QUEUED) {
            s_fail_pinned (self, task, reason, now);
            n++;
        }
    }
    if (queue)
        zhashx_delete (self->pins, worker_id);
    /* leased ones: collected first, failing them edits the leased list */
    ak_task_t **ids = NULL;
    size_t m = 0;
    for (ak_task_t *t = zlistx_first (self->leased); t; t = zlistx_next (self->leased))
        if (t->pin_worker && strcmp (t->pin_worker, worker_id) == 0) {
            ids = ak_realloc (ids, (m + 1) * sizeof *ids);
            ids[m++] = t;
        }
    for (size_t i = 0; i < m; i++)
        s_fail_pinned (self, ids[i], reason, now);
    free (ids);
    free (wid);
    return n + m;
}

size_t ak_sched_pinned_workers (ak_sched_t *self, const char ***ids_p)
{
    size_t n = 0;
    const char **ids = ak_calloc (zhashx_size (self->pins) + 1, sizeof *ids);
    for (zlistx_t *q = zhashx_first (self->pins); q; q = zhashx_next (self->pins))
        if (zlistx_size (q))
            ids[n++] = zhashx_cursor (self->pins);
    *ids_p = ids;
    return n;
}

bool ak_sched_has_work (ak_sched_t *self)
{
    return self->counts[AK_TS_QUEUED] > 0;
}

// ------------------------------------------------------------ state changes

void ak_sched_assign (ak_sched_t *self, ak_task_t *task, const char *worker_id, uint64_t now)
{
    s_set_state (self, task, AK_TS_LEASED);
    free (task->worker_id);
    task->worker_id = ak_strdup (worker_id);
    free (task->attempt_holder);
    task->attempt_holder = ak_strdup (worker_id);
    task->started = false;
    task->deadline = 0;
    task->leased_ms = ak_clock_wall_ms ();
    s_mark_task (self, task, now);
    ak_info ("task %s assigned to %s (attempt %u)", task->task_id, worker_id, task->attempt);
}

void ak_sched_start (ak_sched_t *self, ak_task_t *task, uint64_t now)
{
    if (task->started)
        return;             /* a second STARTED does not extend the lease */
    task->started = true;
    task->deadline = now + task->lease_ms;
    task->leased_ms = ak_clock_wall_ms ();
    task->lease_end_ms = task->leased_ms + task->lease_ms;
    s_mark_task (self, task, now);
    ak_info ("task %s started on %s (attempt %u, lease %u ms)", task->task_id,
             task->worker_id ? task->worker_id : "?", task->attempt, task->lease_ms);
}

void ak_sched_reclaim (ak_sched_t *self, ak_task_t *task, uint64_t now)
{
    (void) self;
    (void) now;
    if (!task->started && task->deadline) {
        task->deadline = 0;
        ak_debug ("task %s reclaimed by its holder %s (attempt %u): not started, no deadline",
                  task->task_id, task->worker_id ? task->worker_id : "?", task->attempt);
    }
}

void ak_sched_requeue (ak_sched_t *self, ak_task_t *task, const char *reason, uint64_t now)
{
    if (ak_tstate_terminal (task->state))
        return;
    free (task->last_error);
    task->last_error = ak_strdup (reason);
    free (task->worker_id);
    task->worker_id = NULL;
    task->started = false;
    task->deadline = 0;
    if (task->attempt + 1 > task->attempt_base + task->max_attempts) {
        task->finished_ms = ak_clock_wall_ms ();
        s_set_state (self, task, AK_TS_POISONED);
        ak_info ("task %s poisoned after %u attempts: %s", task->task_id,
                 task->attempt - task->attempt_base, reason);
    }
    else {
        task->attempt++;
        free (task->attempt_holder);        /* nobody holds the new attempt yet */
        task->attempt_holder = NULL;
        task->queued_ms = ak_clock_wall_ms ();
        s_set_state (self, task, AK_TS_QUEUED);
        s_enqueue (self, task, true);
        ak_info ("task %s re-queued for attempt %u: %s", task->task_id, task->attempt, reason);
    }
    s_mark_task (self, task, now);
}

void ak_sched_finish (ak_sched_t *self, ak_task_t *task, bool ok, bool persisted, uint64_t now)
{
    if (ak_tstate_terminal (task->state))
        return;
    free (task->worker_id);
    task->worker_id = NULL;
    task->deadline = 0;
    task->started = false;
    task->finished_ms = ak_clock_wall_ms ();
    s_set_state (self, task, ok ? AK_TS_DONE : AK_TS_FAILED);
    if (!persisted) {
        s_mark_task (self, task, now);
        ak_info ("task %s %s (attempt %u)", task->task_id, ok ? "done" : "failed", task->attempt);
    }
}

bool ak_sched_reopen (ak_sched_t *self, ak_task_t *task, uint64_t now)
{
    if (task->state != AK_TS_FAILED && task->state != AK_TS_POISONED)
        return false;
    ak_batch_t *batch = task->batch;
    const char *was = ak_tstate_name (task->state);
    free (task->worker_id);
    task->worker_id = NULL;
    task->started = false;
    task->deadline = 0;
    task->finished_ms = 0;
    task->attempt_base = task->attempt;
    task->attempt++;
    free (task->attempt_holder);
    task->attempt_holder = NULL;
    task->queued_ms = ak_clock_wall_ms ();
    task->reopened = true;
    s_set_state (self, task, AK_TS_QUEUED);
    s_enqueue (self, task, false);
    s_mark_task (self, task, now);
    ak_info ("task %s retried (was %s): queued for attempt %u", task->task_id, was, task->attempt);
    if (batch->state == AK_BS_COMPLETE) {
        s_winners_free (batch->winners, batch->nwinners);
        batch->winners = NULL;
        batch->nwinners = 0;
        batch->state = AK_BS_OPEN;
        batch->finished_ms = 0;
        s_mark_batch (self, batch, now);
        ak_info ("batch %s open again: its winners are decided anew when it completes",
                 batch->batch_id);
    }
    return true;
}

size_t ak_sched_cancel (ak_sched_t *self, ak_batch_t *batch, uint64_t now)
{
    size_t n = 0;
    if (batch->state != AK_BS_OPEN)
        return 0;
    uint64_t wall = ak_clock_wall_ms ();
    for (size_t i = 0; i < batch->ntasks; i++) {
        ak_task_t *task = batch->tasks[i];
        if (ak_tstate_terminal (task->state))
            continue;
        free (task->worker_id);
        task->worker_id = NULL;
        task->deadline = 0;
        task->started = false;
        task->finished_ms = wall;
        s_set_state (self, task, AK_TS_CANCELLED);
        s_mark_task (self, task, now);
        ak_info ("task %s cancelled", task->task_id);
        n++;
    }
    batch->state = AK_BS_CANCELLED;
    batch->finished_ms = wall;
    s_mark_batch (self, batch, now);
    ak_info ("batch %s cancelled (%zu tasks)", batch->batch_id, n);
    return n;
}

size_t ak_sched_expired (ak_sched_t *self, uint64_t now, ak_task_t ***tasks_p)
{
    size_t n = 0, cap = 0;
    ak_task_t **list = NULL;
    for (ak_task_t *t = zlistx_first (self->leased); t; t = zlistx_next (self->leased)) {
        if (t->deadline && t->deadline <= now) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                list = ak_realloc (list, cap * sizeof *list);
            }
            list[n++] = t;
        }
    }
    *tasks_p = list;
    return n;
}

// ------------------------------------------------------------------ batches

ak_batch_t *ak_sched_settling (ak_sched_t *self)
{
    ak_batch_t *batch;
    while ((batch = zlistx_first (self->settling))) {
        /* a retry may have opened one of its tasks again meanwhile */
        if (batch->state == AK_BS_OPEN && s_all_terminal (batch))
            return batch;
        zlistx_detach (self->settling, NULL);
        batch->settling = false;
    }
    return NULL;
}

void ak_sched_complete (ak_sched_t *self, ak_batch_t *batch, Ak__Winner **winners, size_t nwinners,
                        uint64_t now)
{
    void *handle = zlistx_find (self->settling, batch);
    if (handle)
        zlistx_detach (self->settling, handle);
    batch->settling = false;
    s_winners_free (batch->winners, batch->nwinners);
    batch->winners = winners;
    batch->nwinners = nwinners;
    batch->state = AK_BS_COMPLETE;
    batch->finished_ms = ak_clock_wall_ms ();
    s_mark_batch (self, batch, now);
    size_t promoted = 0;
    for (size_t i = 0; i < nwinners; i++)
        promoted += winners[i]->promoted;
    ak_info ("batch %s complete: %zu tasks, %zu of %zu (op, class) pairs promoted a winner",
             batch->batch_id, batch->total, promoted, nwinners);
}

// ------------------------------------------------------------- record cache

void ak_sched_cache (ak_sched_t *self, ak_task_t *task, Ak__TaskRecord **rec_p, ak_task_def_t *def)
{
    Ak__TaskRecord *rec = *rec_p;
    *rec_p = NULL;
    s_uncache (task);
    if (task->state == AK_TS_LEASED && rec) {
        task->rec = rec;
        if (def) {
            task->rec_def = *def;           /* moved */
            *def = (ak_task_def_t) { 0 };
        }
    }
    else if (rec)
        ak__task_record__free_unpacked (rec, NULL);
    ak_task_def_clear (def);
}

void ak_sched_uncache_all (ak_sched_t *self)
{
    /* only leased tasks hold a cached record */
    for (ak_task_t *t = zlistx_first (self->leased); t; t = zlistx_next (self->leased))
        s_uncache (t);
}

// ------------------------------------------------------------- group commit

uint64_t ak_sched_dirty_since (ak_sched_t *self)
{
    uint64_t t = self->dirty_tasks.since, b = self->dirty_batches.since;
    return t && (!b || t < b) ? t : b;
}

static int s_flush_task (ak_task_t *task, ak_txn_t *txn, ak_err_t *err)
{
    Ak__TaskRecord *rec = task->rec;
    int rc = rec ? 0 : ak_store_get_task (txn, task->task_id, &rec, err);
    if (rc)
        return rc;
    ak_cpb_set (&rec->state, ak_tstate_name (task->state));
    rec->attempt = task->attempt;
    rec->attempt_base = task->attempt_base;
    if (task->reopened) {
        ak_cpb_set (&rec->receipt_id, "");
        ak_cpb_set (&rec->status, "");
    }
    if (task->worker_id)
        ak_cpb_set (&rec->worker_id, task->worker_id);
    rec->queued_ms = task->queued_ms;
    rec->leased_ms = task->leased_ms;
    rec->finished_ms = task->finished_ms;
    rec->lease_deadline_ms = task->state == AK_TS_LEASED && task->started ? task->lease_end_ms : 0;
    ak_cpb_set (&rec->last_error, task->last_error);
    if (rec == task->rec)               /* intake.c may change it again in this commit */
        return ak_store_put_task_later (txn, rec, &task->rec_def, err);
    rc = ak_store_put_task (txn, rec, err);
    ak__task_record__free_unpacked (rec, NULL);
    return rc;
}

static int s_flush_batch (ak_batch_t *batch, ak_txn_t *txn, ak_err_t *err)
{
    Ak__BatchRecord *rec = NULL;
    int rc = ak_store_get_batch (txn, batch->batch_id, &rec, err);
    if (rc)
        return rc;
    ak_cpb_set (&rec->state, ak_bstate_name (batch->state));
    rec->finished_ms = batch->finished_ms;
    for (size_t i = 0; i < rec->n_winners; i++)
        ak__winner__free_unpacked (rec->winners[i], NULL);
    free (rec->winners);
    rec->winners = NULL;
    rec->n_winners = 0;
    if (batch->nwinners) {
        /* the record borrows the index's winners only while it is packed */
        rec->winners = batch->winners;
        rec->n_winners = batch->nwinners;
    }
    rc = ak_store_put_batch (txn, rec, err);
    rec->winners = NULL;
    rec->n_winners = 0;
    ak__batch_record__free_unpacked (rec, NULL);
    return rc;
}

int ak_sched_flush (ak_sched_t *self, ak_txn_t *txn, ak_err_t *err)
{
    int rc = 0;
    ak_dirty_begin_flush (&self->dirty_tasks);
    ak_dirty_begin_flush (&self->dirty_batches);
    for (ak_task_t *t = ak_dirty_first (&self->dirty_tasks); t; t = ak_dirty_next (&self->dirty_tasks)) {
        rc = s_flush_task (t, txn, err);
        if (rc == AK_ENOTFOUND) {
            ak_error ("task %s: record missing from the store, state not saved", t->task_id);
            rc = 0;
        }
        if (rc)
            return rc;
    }
    for (ak_batch_t *b = ak_dirty_first (&self->dirty_batches); b; b = ak_dirty_next (&self->dirty_batches)) {
        rc = s_flush_batch (b, txn, err);
        if (rc == AK_ENOTFOUND) {
            ak_error ("batch %s: record missing from the store, state not saved", b->batch_id);
            rc = 0;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* A flushed task's old verdict is cleared in the store now. */
static void s_task_flushed (void *record, bool still, void *arg)
{
    (void) arg;
    if (!still)
        ((ak_task_t *) record)->reopened = false;
}

void ak_sched_flushed (ak_sched_t *self)
{
    ak_dirty_flushed (&self->dirty_tasks, s_task_flushed, NULL);
    ak_dirty_flushed (&self->dirty_batches, NULL, NULL);
}

static int s_commit_flush (void *self, ak_txn_t *txn, ak_err_t *err)
{
    return ak_sched_flush (self, txn, err);
}

static void s_commit_rollback (void *arg)
{
    ak_sched_t *self = arg;
    ak_sched_uncache_all (self);        /* they hold the failed attempt's writes */
    ak_dirty_rollback (&self->dirty_tasks);
    ak_dirty_rollback (&self->dirty_batches);
}

static void s_commit_flushed (void *self)
{
    ak_sched_flushed (self);
}

const ak_commit_ops_t ak_sched_commit_ops = {
    .name = "scheduler", .flush = s_commit_flush, .rollback = s_commit_rollback, .flushed = s_commit_flushed,
};
