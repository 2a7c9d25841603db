/*  coordinator/intake.c: staged receipts and the group commit (see intake.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "intake.h"
#include "clock.h"
#include "cpb.h"
#include "dupes.h"
#include "log.h"
#include "rounds.h"
#include "util.h"

typedef struct {
    Ak__Receipt *receipt;
    uint8_t     *raw;           /* the bytes it was decoded from, or NULL */
    size_t       rawlen;
    char        *worker_id;
    size_t       bytes;         /* what it counts in staged_bytes */
    bool         stored;        /* written in the transaction being built */
    ak_ack_t     ack;
} s_staged_t;

#define S_NPARTS 4              /* participants of the group commit */

struct ak_intake {
    ak_store_t       *store;
    ak_sched_t       *sched;
    ak_registry_t    *registry;
    ak_intake_opts_t  opts;
    s_staged_t       *staged;           /* waiting for the next commit */
    size_t            nstaged;
    size_t            cap;
    size_t            staged_bytes;     /* the staged receipts' sizes as they came (or packed) */
    uint64_t          first_staged;     /* monotonic ms of the oldest staged receipt */
    s_staged_t       *inflight;         /* the commit's own, taken from staged (s_take) */
    size_t            ninflight;
    size_t            inflight_cap;
    uint64_t          inflight_first;
    bool              busy;             /* a commit on the committer's thread (committer.h) */
    uint64_t          retry_at;         /* no commit before this after a failure */
    uint64_t          kill_in_commit;   /* fault injection (tests/fault), 0: off */
    uint64_t          receipt_commits;  /* commits that held receipts, for it */
    ak_intake_stats_t stats;
    ak_rounds_new_t   created;          /* search stages / confirm tasks of the commit being built */
    ak_commit_part_t  parts[S_NPARTS];         /* the group commit's participants, in order (commit.h) */
};

static const ak_commit_ops_t s_receipts_ops, s_rounds_ops;

ak_intake_t *ak_intake_new (ak_store_t *store, ak_sched_t *sched, ak_registry_t *registry,
                            const ak_intake_opts_t *opts)
{
    ak_intake_t *self = ak_calloc (1, sizeof *self);
    self->store = store;
    self->sched = sched;
    self->registry = registry;
    if (opts)
        self->opts = *opts;
    if (self->opts.commit_max == 0)
        self->opts.commit_max = 256;
    if (self->opts.map_max == 0)
        self->opts.map_max = AK_INTAKE_MAP_MAX;
    self->stats.map_max = self->opts.map_max;
    /* tasks first, so receipts see the state the index decided; workers
       last, so the tasks they completed in this commit are counted in it */
    self->parts[0] = (ak_commit_part_t) { &ak_sched_commit_ops, sched };
    self->parts[1] = (ak_commit_part_t) { &s_receipts_ops, self };
    self->parts[2] = (ak_commit_part_t) { &s_rounds_ops, self };
    self->parts[3] = (ak_commit_part_t) { &ak_registry_commit_ops, registry };
    /* Fault injection for tests/fault only: AKCOORD_FAULT_KILL_IN_COMMIT=N
       sends this process SIGKILL inside its Nth group commit that holds
       receipts, after every write and before the commit: the crash a
       group commit must survive without losing anything acknowledged. */
    const char *kill = getenv ("AKCOORD_FAULT_KILL_IN_COMMIT");
    if (kill && *kill) {
        self->kill_in_commit = strtoull (kill, NULL, 10);
        ak_warn ("AKCOORD_FAULT_KILL_IN_COMMIT=%llu: this coordinator kills itself inside a commit",
                 (unsigned long long) self->kill_in_commit);
    }
    return self;
}

static void s_list_clear (s_staged_t *list, size_t *n)
{
    for (size_t i = 0; i < *n; i++) {
        ak__receipt__free_unpacked (list[i].receipt, NULL);
        free (list[i].raw);
        free (list[i].worker_id);
    }
    *n = 0;
}

static void s_staged_clear (ak_intake_t *self)
{
    s_list_clear (self->staged, &self->nstaged);
    self->staged_bytes = 0;
    self->first_staged = 0;
}

/* The staged receipts become the commit's (inflight); staging goes on
   into an empty list. */
static void s_take (ak_intake_t *self)
{
    s_staged_t *list = self->inflight;
    size_t cap = self->inflight_cap;
    self->inflight = self->staged;
    self->ninflight = self->nstaged;
    self->inflight_cap = self->cap;
    self->inflight_first = self->first_staged;
    self->staged = list;
    self->cap = cap;
    self->nstaged = 0;
    self->staged_bytes = 0;
    self->first_staged = 0;
}

/* A commit that failed gives its receipts back, ahead of those staged
   since, in arrival order. */
static void s_untake (ak_intake_t *self)
{
    if (!self->ninflight)
        return;
    size_t n = self->ninflight + self->nstaged;
    s_staged_t *list = ak_malloc (n * sizeof *list);
    memcpy (list, self->inflight, self->ninflight * sizeof *list);
    if (self->nstaged)
        memcpy (list + self->ninflight, self->staged, self->nstaged * sizeof *list);
    for (size_t i = 0; i < self->ninflight; i++)
        self->staged_bytes += self->inflight[i].bytes;
    free (self->staged);
    self->staged = list;
    self->nstaged = self->cap = n;
    if (self->inflight_first && (!self->first_staged || self->inflight_first < self->first_staged))
        self->first_staged = self->inflight_first;
    self->ninflight = 0;
    self->inflight_first = 0;
}

void ak_intake_destroy (ak_intake_t **self_p)
{
    if (self_p && *self_p) {
        ak_intake_t *self = *self_p;
        s_staged_clear (self);
        free (self->staged);
        s_list_clear (self->inflight, &self->ninflight);
        free (self->inflight);
        ak_rounds_new_clear (&self->created);
        free (self);
        *self_p = NULL;
    }
}

const ak_intake_stats_t *ak_intake_stats (ak_intake_t *self)
{
    return &self->stats;
}

// ------------------------------------------------------------------ staging

int ak_intake_stage (ak_intake_t *self, const char *worker_id, Ak__Receipt **receipt_p,
                     uint64_t now, ak_err_t *err)
{
    return ak_intake_stage_raw (self, worker_id, receipt_p, NULL, 0, now, err);
}

int ak_intake_stage_raw (ak_intake_t *self, const char *worker_id, Ak__Receipt **receipt_p,
                         const void *raw, size_t rawlen, uint64_t now, ak_err_t *err)
{
    Ak__Receipt *r = *receipt_p;
    *receipt_p = NULL;
    ak_task_t *task = ak_sched_task (self->sched, r->task_id);
    int rc = 0;
    if (!task) {
        rc = ak_err_set (err, AK_ENOTFOUND, "receipt from %s for unknown task '%.64s'",
                         worker_id, r->task_id);
        goto fail;
    }
    if (r->attempt == 0 || r->attempt > task->attempt) {
        rc = ak_err_set (err, AK_EINVAL, "receipt from %s for task %s attempt %u: the task is at attempt %u",
                         worker_id, task->task_id, r->attempt, task->attempt);
        goto fail;
    }
    ak_cpb_set (&r->receipt_id, NULL);
    ak_cpb_set (&r->worker_id, worker_id);
    r->duplicate = false;
    r->received_at_ms = ak_clock_wall_ms ();

    if (self->nstaged == self->cap) {
        self->cap = self->cap ? self->cap * 2 : 64;
        self->staged = ak_realloc (self->staged, self->cap * sizeof *self->staged);
    }
    s_staged_t *s = &self->staged[self->nstaged++];
    memset (s, 0, sizeof *s);
    s->receipt = r;
    s->worker_id = ak_strdup (worker_id);
    s->ack.staged_ns = ak_clock_mono_ns ();
    if (raw) {
        s->raw = ak_malloc (rawlen ? rawlen : 1);
        memcpy (s->raw, raw, rawlen);
        s->rawlen = rawlen;
    }
    /* what the stored receipt will take, near enough: the bytes it came
       in (or its packed size), without the few the coordinator adds */
    s->bytes = raw ? rawlen : ak__receipt__get_packed_size (r);
    self->staged_bytes += s->bytes;
    if (!self->first_staged)
        self->first_staged = now ? now : 1;
    return 0;

fail:
    ak__receipt__free_unpacked (r, NULL);
    return rc;
}

size_t ak_intake_staged (ak_intake_t *self)
{
    return self->nstaged + self->ninflight;
}

bool ak_intake_busy (ak_intake_t *self)
{
    return self->busy;
}

static bool s_has (const s_staged_t *list, size_t n, const char *task_id, const char *worker_id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp (list[i].receipt->task_id, task_id) == 0 && strcmp (list[i].worker_id, worker_id) == 0)
            return true;
    return false;
}

static size_t s_count_for (const s_staged_t *list, size_t n, const char *worker_id)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += strcmp (list[i].worker_id, worker_id) == 0;
    return k;
}

bool ak_intake_full (ak_intake_t *self)
{
    return self->nstaged >= self->opts.commit_max || self->staged_bytes >= AK_INTAKE_MAX_BYTES;
}

bool ak_intake_room (ak_intake_t *self)
{
    if (self->stats.failing)
        return false;
    size_t bytes = self->staged_bytes;
    for (size_t i = 0; i < self->ninflight; i++)
        bytes += self->inflight[i].bytes;
    return ak_store_map_free (self->store) / 4 >= bytes + AK_INTAKE_ROOM_MARGIN;
}

bool ak_intake_pending (ak_intake_t *self, const char *task_id, const char *worker_id)
{
    return s_has (self->staged, self->nstaged, task_id, worker_id)
        || s_has (self->inflight, self->ninflight, task_id, worker_id);
}

size_t ak_intake_staged_for (ak_intake_t *self, const char *worker_id)
{
    return s_count_for (self->staged, self->nstaged, worker_id)
         + s_count_for (self->inflight, self->ninflight, worker_id);
}

uint64_t ak_intake_deadline (ak_intake_t *self)
{
    if (self->busy)
        return 0;               /* the next one is due when this one is done */
    uint64_t since = self->first_staged;
    uint64_t d = ak_sched_dirty_since (self->sched);
    if (d && (!since || d < since))
        since = d;
    d = ak_registry_dirty_since (self->registry);
    if (d && (!since || d < since))
        since = d;
    if (!since)
        return 0;
    uint64_t due = ak_intake_full (self) ? since : since + self->opts.commit_ms;
    return due > self->retry_at ? due : self->retry_at;
}

// ------------------------------------------------------------------- commit

/* Writes v in decimal at p, at least width digits (zero-padded), NUL
   after; returns the digits written.  p has room for 21 bytes.  (snprintf
   for the three keys of every receipt was a measurable share of a commit.) */
static size_t s_dec (char *p, uint64_t v, size_t width)
{
    char tmp[20];
    size_t n = 0;
    do
        tmp[n++] = (char) ('0' + v % 10);
    while ((v /= 10) != 0);
    while (n < width && n < sizeof tmp)
        tmp[n++] = '0';
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    p[n] = '\0';
    return n;
}

/* key = "TASK#ATTEMPT" and, with rid, "TASK#ATTEMPT#RID" (key holds 512;
   a task id is at most 128 bytes, a receipt id 24). */
static void s_attempt_key (char *key, size_t cap, const char *task_id, uint32_t attempt, const char *rid)
{
    size_t t = strnlen (task_id, cap - 64);
    memcpy (key, task_id, t);
    key[t++] = '#';
    t += s_dec (key + t, attempt, 0);
    if (rid) {
        size_t r = strnlen (rid, cap - t - 2);
        key[t++] = '#';
        memcpy (key + t, rid, r);
        key[t + r] = '\0';
    }
}

/* Stores one staged receipt and decides its task, inside txn. */
static int s_store_one (ak_intake_t *self, ak_txn_t *txn, s_staged_t *s, ak_err_t *err)
{
    Ak__Receipt *r = s->receipt;
    Ak__TaskRecord *task = NULL;
    uint64_t n = 0;
    char key[512];
    void *val = NULL;
    size_t len = 0;
    ak_tstate_t state;

    /* a leased task's record is cached (sched.h): no read, no decode */
    ak_task_t *indexed = ak_sched_task (self->sched, r->task_id);
    task = indexed ? indexed->rec : NULL;
    int rc = task ? 0 : ak_store_get_task (txn, r->task_id, &task, err);
    if (rc == AK_ENOTFOUND) {
        ak_error ("receipt for task %s: the task record is missing from the store; not stored",
                  r->task_id);
        return 0;
    }
    if (rc)
        return rc;
    rc = ak_store_next_id (txn, "receipt", &n, err);
    if (rc)
        goto done;
    s->ack.receipt_id[0] = 'R';                 /* "R%08llu" */
    s_dec (s->ack.receipt_id + 1, n, 8);

    /* Each (task, attempt) is accepted once: an attempt that already has a
       receipt is a copy even when the task is open again (`retry`). */
    s_attempt_key (key, sizeof key, r->task_id, r->attempt, NULL);
    rc = ak_store_get (txn, AK_DB_ATTEMPTS, key, &val, &len, err);
    free (val);
    bool seen = rc == 0;
    if (rc && rc != AK_ENOTFOUND)
        goto done;
    bool duplicate = seen || ak_tstate_parse (task->state, &state) != 0 || ak_tstate_terminal (state);

    ak_cpb_set (&r->receipt_id, s->ack.receipt_id);
    ak_cpb_set (&r->batch_id, task->batch_id);
    r->duplicate = duplicate;
    /* past the first few duplicates of a task, a digest (dupes.h) */
    bool folded = false;
    rc = duplicate && task->duplicates >= AK_DUP_KEEP_WHOLE
       ? ak_dupes_store (txn, r, s->raw, s->rawlen, s->ack.receipt_id, &folded, err)
       : ak_store_put_receipt_raw (txn, r, s->raw, s->rawlen, err);
    if (rc == 0 && !seen)
        rc = ak_store_put (txn, AK_DB_ATTEMPTS, key, s->ack.receipt_id, strlen (s->ack.receipt_id), err);
    if (rc)
        goto done;
    s_attempt_key (key, sizeof key, r->task_id, r->attempt, s->ack.receipt_id);
    rc = ak_store_put (txn, AK_DB_ATTEMPTS, key, s->ack.receipt_id, strlen (s->ack.receipt_id), err);
    if (rc)
        goto done;

    bool ok = strcmp (r->status, "ok") == 0;
    if (duplicate)
        task->duplicates++;
    else {
        ak_cpb_set (&task->state, ok ? "done" : "failed");
        ak_cpb_set (&task->receipt_id, s->ack.receipt_id);
        ak_cpb_setf (&task->status, "%.32s", r->status);
        ak_cpb_set (&task->worker_id, s->worker_id);
        task->finished_ms = r->received_at_ms;
    }
    /* a cached record is written once per commit, however often it changed */
    rc = indexed && task == indexed->rec ? ak_store_put_task_later (txn, task, &indexed->rec_def, err)
                                         : ak_store_put_task (txn, task, err);
    if (rc)
        goto done;
    s->stored = true;
    s->ack.task_id = r->task_id;
    s->ack.worker_id = s->worker_id;
    s->ack.attempt = r->attempt;
    s->ack.duplicate = duplicate;
    s->ack.ok = !duplicate && ok;
    if (!duplicate) {
        ak_worker_t *w = ak_registry_get (self->registry, s->worker_id);
        if (w)
            ak_registry_count_done (self->registry, w, ak_clock_mono_ms ());
    }
done:
    if (!indexed || task != indexed->rec)
        ak__task_record__free_unpacked (task, NULL);
    return rc;
}

// ---------------------------------------------------- commit participants

/* The staged receipts, each deciding its task (s_store_one). */
static int s_receipts_flush (void *arg, ak_txn_t *txn, ak_err_t *err)
{
    ak_intake_t *self = arg;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < self->ninflight; i++) {
        self->inflight[i].stored = false;
        rc = s_store_one (self, txn, &self->inflight[i], err);
    }
    return rc;
}

static const ak_commit_ops_t s_receipts_ops = { .name = "receipts", .flush = s_receipts_flush };

/* A receipt that completes a search stage or the tune tasks of an (op,
   class) creates the next tasks in this same transaction: the next search
   stages and confirm tasks for the tasks accepted in txn. */
static int s_rounds_flush (void *arg, ak_txn_t *txn, ak_err_t *err)
{
    ak_intake_t *self = arg;
    ak_task_t **done = ak_calloc (self->ninflight ? self->ninflight : 1, sizeof *done);
    size_t n = 0;
    for (size_t i = 0; i < self->ninflight; i++) {
        const s_staged_t *s = &self->inflight[i];
        if (s->stored && !s->ack.duplicate)
            done[n++] = ak_sched_task (self->sched, s->ack.task_id);
    }
    int rc = ak_rounds_advance (txn, self->sched, done, n, ak_clock_wall_ms (), &self->created, err);
    free (done);
    self->stats.round_checks += n;
    return rc;
}

static void s_rounds_clear (void *arg)
{
    ak_intake_t *self = arg;
    ak_rounds_new_clear (&self->created);
}

/* Indexed before the receipts finish their tasks (ak_intake_commit), so a
   batch whose stage just ended never looks settled. */
static void s_rounds_flushed (void *arg)
{
    ak_intake_t *self = arg;
    ak_rounds_committed (&self->created, self->sched);
}

static const ak_commit_ops_t s_rounds_ops = {
    .name = "rounds", .clear = s_rounds_clear, .flush = s_rounds_flush, .rollback = s_rounds_clear,
    .flushed = s_rounds_flushed,
};

/* The whole group written into txn: every participant flushed, then the
   fault injection's kill.  On the committer's thread for an asynchronous
   commit (the loop parked), on the loop's for a synchronous one. */
static int s_fill (void *arg, ak_txn_t *txn, ak_err_t *err)
{
    ak_intake_t *self = arg;
    int rc = ak_commit_flush (self->parts, S_NPARTS, txn, err);
    if (rc == 0 && self->kill_in_commit && self->ninflight && ++self->receipt_commits == self->kill_in_commit) {
        ak_warn ("fault injection: SIGKILL inside commit %llu (%zu receipts written, not committed)",
                 (unsigned long long) self->receipt_commits, self->ninflight);
        raise (SIGKILL);
    }
    return rc;
}

/* One synchronous attempt at the whole group. */
static int s_commit_once (ak_intake_t *self, ak_err_t *err)
{
    ak_txn_t *txn = NULL;
    int rc = ak_store_begin (self->store, true, &txn, err);
    if (rc)
        return rc;
    rc = s_fill (self, txn, err);
    if (rc) {
        ak_store_abort (&txn);
        ak_commit_rollback (self->parts, S_NPARTS);
        return rc;
    }
    rc = ak_store_commit (&txn, err);
    if (rc)
        ak_commit_rollback (self->parts, S_NPARTS);
    return rc;
}

void ak_intake_failed (ak_intake_t *self, int rc, const char *msg)
{
    ak_intake_stats_t *st = &self->stats;
    st->commit_failures++;
    st->store_full += rc == AK_ESTOREFULL || rc == AK_ENOSPACE;
    snprintf (st->last_error, sizeof st->last_error, "%.255s", msg);
    st->last_code = rc;
    if (!st->failing_since_ms)
        st->failing_since_ms = ak_clock_wall_ms ();
    st->failing++;
}

void ak_intake_healthy (ak_intake_t *self)
{
    ak_intake_stats_t *st = &self->stats;
    uint64_t now = ak_clock_wall_ms ();
    if (st->failing_since_ms)
        ak_info ("store commits succeed again after %llu failed ones in %llu ms",
                 (unsigned long long) st->failing,
                 (unsigned long long) (now > st->failing_since_ms ? now - st->failing_since_ms : 0));
    st->last_error[0] = '\0';
    st->last_code = 0;
    st->failing_since_ms = 0;
    st->failing = 0;
}

int ak_intake_grow (ak_intake_t *self, ak_err_t *err)
{
    size_t now = ak_store_map_size (self->store);
    if (now >= self->opts.map_max)
        return ak_err_set (err, AK_ESTOREFULL, "store full: the map is at its limit of %zu KiB "
                           "(--map-max); restart akcoord with a larger --map-max", now >> 10);
    size_t next = now * 2 > self->opts.map_max ? self->opts.map_max : now * 2;
    int rc = ak_store_set_map_size (self->store, next, err);
    if (rc)
        return rc;
    self->stats.map_grows++;
    ak_warn ("store map grown from %zu KiB to %zu KiB", now >> 10, next >> 10);
    return 0;
}

void ak_commit_clear (ak_commit_t *c)
{
    for (size_t i = 0; i < c->nacks; i++) {
        free (c->acks[i].worker_id);
        free (c->acks[i].task_id);
    }
    free (c->acks);
    for (size_t i = 0; i < c->ndropped; i++)
        free (c->dropped[i]);
    free (c->dropped);
    for (size_t i = 0; i < c->nlost; i++) {
        free (c->lost[i].worker_id);
        free (c->lost[i].task_id);
    }
    free (c->lost);
    memset (c, 0, sizeof *c);
}

/* The commit of the inflight receipts failed for good: they are dropped
   unacked (their workers re-send), *out names them. */
static void s_fail (ak_intake_t *self, int rc, uint64_t now, ak_commit_t *out, ak_err_t *err)
{
    ak_intake_failed (self, rc, err && err->msg[0] ? err->msg : ak_strerror (rc));
    self->stats.dropped += self->ninflight;
    self->retry_at = now + AK_INTAKE_RETRY_MS;
    ak_error ("commit failed, %zu receipts not stored or acked (workers will re-send): %s",
              self->ninflight, err ? err->msg : ak_strerror (rc));
    out->dropped = ak_calloc (self->ninflight ? self->ninflight : 1, sizeof *out->dropped);
    out->lost = ak_calloc (self->ninflight ? self->ninflight : 1, sizeof *out->lost);
    for (size_t i = 0; i < self->ninflight; i++) {
        ak_ack_t *lost = &out->lost[out->nlost++];
        lost->worker_id = ak_strdup (self->inflight[i].worker_id);
        lost->task_id = ak_strdup (self->inflight[i].receipt->task_id);
        lost->attempt = self->inflight[i].receipt->attempt;
        bool seen = false;
        for (size_t j = 0; j < out->ndropped; j++)
            if (strcmp (out->dropped[j], self->inflight[i].worker_id) == 0)
                seen = true;
        if (!seen)
            out->dropped[out->ndropped++] = ak_strdup (self->inflight[i].worker_id);
    }
    s_list_clear (self->inflight, &self->ninflight);
    self->inflight_first = 0;
}

/* The commit holds: the participants' flushed, then an ACK for each
   inflight receipt stored and its task finished in the index. */
static void s_succeed (ak_intake_t *self, uint64_t now, ak_commit_t *out)
{
    self->retry_at = 0;
    self->stats.commits++;
    ak_intake_healthy (self);
    ak_commit_flushed (self->parts, S_NPARTS);
    out->acks = ak_calloc (self->ninflight ? self->ninflight : 1, sizeof *out->acks);
    for (size_t i = 0; i < self->ninflight; i++) {
        s_staged_t *s = &self->inflight[i];
        if (!s->stored)
            continue;
        ak_ack_t *ack = &out->acks[out->nacks++];
        *ack = s->ack;
        ack->worker_id = ak_strdup (s->ack.worker_id);
        ack->task_id = ak_strdup (s->ack.task_id);
        if (ack->duplicate) {
            self->stats.duplicate++;
            ak_info ("receipt %s for task %s attempt %u from %s stored as a duplicate",
                     ack->receipt_id, ack->task_id, ack->attempt, ack->worker_id);
            continue;
        }
        self->stats.accepted++;
        self->stats.by_status[ak_metrics_status_index (s->receipt->status)]++;
        ak_task_t *task = ak_sched_task (self->sched, ack->task_id);
        if (task)
            ak_sched_finish (self->sched, task, ack->ok, true, now);
        /* the task's state change and its cause in one line (finish
           with `persisted` logs nothing) */
        ak_info ("task %s %s: receipt %s accepted (attempt %u, from %s, status %.32s)", ack->task_id,
                 ack->ok ? "done" : "failed", ack->receipt_id, ack->attempt, ack->worker_id,
                 s->receipt->status);
    }
    s_list_clear (self->inflight, &self->ninflight);
    self->inflight_first = 0;
}

static bool s_anything (ak_intake_t *self)
{
    return self->nstaged || ak_sched_dirty_since (self->sched) || ak_registry_dirty_since (self->registry);
}

int ak_intake_commit (ak_intake_t *self, uint64_t now, ak_commit_t *out, ak_err_t *err)
{
    memset (out, 0, sizeof *out);
    if (self->busy)
        return ak_err_set (err, AK_ESTATE, "a group commit is in flight: finish it first");
    if (!s_anything (self))
        return 0;
    s_take (self);
    int rc;
    while ((rc = s_commit_once (self, err)) == AK_ESTOREFULL) {
        ak_error ("store full while committing %zu receipts: %s; growing the map",
                  self->ninflight, err ? err->msg : "");
        int grc = ak_intake_grow (self, err);
        if (grc) {
            rc = grc;
            break;
        }
    }
    if (rc)
        s_fail (self, rc, now, out, err);
    else
        s_succeed (self, now, out);
    return rc;
}

int ak_intake_commit_start (ak_intake_t *self, ak_committer_t *committer, bool *started, uint64_t *parked_ns,
                            ak_err_t *err)
{
    *started = false;
    if (parked_ns)
        *parked_ns = 0;
    if (self->busy || !s_anything (self))
        return 0;
    s_take (self);
    int rc = ak_committer_start (committer, s_fill, self, parked_ns, err);
    if (rc) {
        /* nothing in flight: the caller commits synchronously (a full
           map grows there, another failure drops and pauses) */
        ak_commit_rollback (self->parts, S_NPARTS);
        s_untake (self);
        return rc;
    }
    self->busy = true;
    *started = true;
    return 0;
}

int ak_intake_commit_finish (ak_intake_t *self, ak_committer_t *committer, bool wait, uint64_t now,
                             ak_commit_t *out, bool *finished, uint64_t *commit_ns, ak_err_t *err)
{
    memset (out, 0, sizeof *out);
    *finished = false;
    if (!self->busy)
        return 0;
    int rc = ak_committer_done (committer, wait, finished, commit_ns, err);
    if (!*finished)
        return rc;
    self->busy = false;
    if (rc == 0) {
        s_succeed (self, now, out);
        return 0;
    }
    /* the commit itself failed (aborted on the thread): once more on the
       loop's thread, where a full map grows and any other failure drops
       the receipts as it always did */
    ak_warn ("group commit on the writer thread failed: %s; committing again synchronously",
             err ? err->msg : ak_strerror (rc));
    ak_commit_rollback (self->parts, S_NPARTS);
    s_untake (self);
    return ak_intake_commit (self, now, out, err);
}
