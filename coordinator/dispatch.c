/*  coordinator/dispatch.c: queued tasks to workers' credit (see
    coord_private.h).  Each worker's credit is filled from the queues of its
    device classes, round-robin, pinned tasks first; each task goes out as an
    ASSIGN built from its stored bytes and the blob cache, and a task that
    cannot be sent goes back to its queue (or burns an attempt when its
    record will not heal). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord_private.h"
#include "assign.h"
#include "cpb.h"
#include "envelope.h"
#include "log.h"
#include "pbwire.h"
#include "util.h"

#define S_BLOB_CACHE_MAX   (64u << 20)  /* bytes of cached blobs before the cache is emptied */

// =============================================================== blob cache

/*  Blobs (spec JSON, sources) are immutable and content-addressed: each is
    read and its digest checked once, then served from memory, so an ASSIGN
    costs no blob read, copy or hash.  Returns the cached text (borrowed:
    valid until s_blobs_trim) or the store's error. */
static int s_blob (ak_coord_t *self, ak_txn_t *txn, const char *digest, const char **text_p,
                   ak_err_t *err)
{
    char *text = zhashx_lookup (self->blobs, digest);
    if (!text) {
        size_t len = 0;
        int rc = ak_store_get_blob (txn, digest, &text, &len, err);
        if (rc)
            return rc;
        zhashx_insert (self->blobs, digest, text);
        self->blob_bytes += len + strlen (digest);
    }
    *text_p = text;
    return 0;
}

/* Empties the blob cache once it holds more than S_BLOB_CACHE_MAX bytes;
   only between assignments, never while one borrows from it. */
static void s_blobs_trim (ak_coord_t *self)
{
    if (self->blob_bytes > S_BLOB_CACHE_MAX) {
        zhashx_purge (self->blobs);
        self->blob_bytes = 0;
    }
}

void coord_blob_free (void **item)
{
    free (*item);
    *item = NULL;
}

// ================================================================== ASSIGN

/*  An ASSIGN built on the stack: its definition fields passed on from the
    task's stored bytes (assign.h), the rest in assign, with strings
    borrowed from parts and the blob cache. */
typedef struct {
    Ak__Assign      assign;
    Ak__Source      src[3];         /* reference, baseline, candidate */
    ak_assign_src_t parts;
    Ak__TaskRecord *rec;            /* slim (store.h), for the record cache */
    ak_task_def_t   def;            /* the stored bytes (store.h) */
} s_assign_msg_t;

static void s_assign_msg_clear (s_assign_msg_t *m)
{
    if (m->rec)
        ak__task_record__free_unpacked (m->rec, NULL);
    m->rec = NULL;
    ak_task_def_clear (&m->def);
    ak_assign_src_clear (&m->parts);
}

static int s_source (ak_coord_t *self, ak_txn_t *txn, const char *name, const char *digest,
                     Ak__Source *src, Ak__Source **src_p, ak_err_t *err)
{
    const char *text = NULL;
    int rc = s_blob (self, txn, digest, &text, err);
    if (rc)
        return rc;
    ak__source__init (src);
    src->name = (char *) name;
    src->digest = (char *) digest;
    src->text = (char *) text;
    *src_p = src;
    return 0;
}

/* Fills a with what the coordinator adds to a task's definition: attempt,
   lease, kind, spec, sources and launch, from p (the record's fields). */
static int s_assign_rest (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, const ak_assign_src_t *p,
                          Ak__Assign *a, Ak__Source src[3], ak_err_t *err)
{
    a->attempt = task->attempt;
    a->lease_ms = task->lease_ms;
    /* a confirm task is a tune measurement to the worker (rounds.h) */
    a->kind = (char *) (strcmp (p->kind, "confirm") == 0 ? "tune" : p->kind);
    const char *spec = NULL;
    int rc = s_blob (self, txn, p->spec_digest, &spec, err);
    a->spec_json = (char *) spec;
    a->spec_digest = (char *) p->spec_digest;
    if (rc == 0)
        rc = s_source (self, txn, p->reference_name, p->reference_digest, &src[0], &a->reference, err);
    if (rc == 0)
        rc = s_source (self, txn, p->baseline_name, p->baseline_digest, &src[1], &a->baseline, err);
    if (rc == 0 && *p->candidate_digest)
        rc = s_source (self, txn, p->candidate_source_name, p->candidate_digest, &src[2], &a->candidate, err);
    if (p->verify)
        a->launch = p->verify->launch;          /* verify: the launch the profile recorded */
    return rc;
}

/* Builds the ASSIGN of task from its stored bytes and blobs into m
   (cleared by the caller with s_assign_msg_clear, also after a failure). */
static int s_build_assign (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, s_assign_msg_t *m,
                           ak_err_t *err)
{
    memset (m, 0, sizeof *m);
    int rc = ak_store_get_task_slim (txn, task->task_id, &m->rec, &m->def, err);
    if (rc == 0)
        rc = ak_assign_src_read (m->def.data, m->def.len, task->task_id, &m->parts, err);
    if (rc == 0) {
        ak__assign__init (&m->assign);
        rc = s_assign_rest (self, txn, task, &m->parts, &m->assign, m->src, err);
    }
    if (rc)
        return ak_err_prefix (err, "task %s: cannot build its assignment", task->task_id);
    return 0;
}

#ifndef NDEBUG
/* Debug builds: the ASSIGN sent (buf) must decode to the one built from
   the decoded record, as before assign.h. */
static void s_assign_check (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, const ak_worker_t *w,
                            const uint8_t *buf, size_t size)
{
    ak_err_t err = { 0 };
    Ak__TaskRecord *rec = NULL;
    if (ak_store_get_task (txn, task->task_id, &rec, &err) != 0)
        abort ();
    Ak__Assign a = AK__ASSIGN__INIT;
    Ak__Source src[3];
    a.task_id = rec->task_id;
    a.batch_id = rec->batch_id;
    a.op = rec->op;
    a.device_class = rec->device_class;
    a.backend = rec->backend;
    a.candidate_name = rec->candidate_name;
    a.params = rec->params;
    a.n_params = rec->n_params;
    a.workloads = rec->workloads;
    a.n_workloads = rec->n_workloads;
    a.policy = rec->policy;
    ak_assign_src_t p = {
        .kind = rec->kind, .spec_digest = rec->spec_digest, .reference_name = rec->reference_name,
        .reference_digest = rec->reference_digest, .baseline_name = rec->baseline_name,
        .baseline_digest = rec->baseline_digest, .candidate_digest = rec->candidate_digest,
        .candidate_source_name = rec->candidate_source_name, .verify = rec->verify
    };
    if (s_assign_rest (self, txn, task, &p, &a, src, &err) != 0)
        abort ();
    ak_blobcache_mark (w->blobs, &a);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.version = AK_PROTOCOL_VERSION;
    env.seq = self->seq;
    env.body_case = AK__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    Ak__Envelope *got = ak__envelope__unpack (NULL, size, buf);
    if (!got || !ak_cpb_same (&env.base, &got->base)) {
        fprintf (stderr, "akcoord: the ASSIGN of task %s built from its stored bytes differs from "
                 "the one built from its record (assign.h)\n", task->task_id);
        abort ();
    }
    ak__envelope__free_unpacked (got, NULL);
    ak__task_record__free_unpacked (rec, NULL);
}
#endif

/* Sends the ASSIGN of m to w: an envelope holding m->assign packed,
   followed by the definition fields passed on (assign.h).  As coord_send. */
static int s_send_assign (ak_coord_t *self, ak_txn_t *txn, const ak_task_t *task, ak_worker_t *w,
                          s_assign_msg_t *m)
{
    (void) txn;
    (void) task;
    uint64_t seq = ++self->seq;
    size_t alen = ak__assign__get_packed_size (&m->assign);
    size_t body = alen + m->parts.ncopied;
    size_t size = ak_pbw_tag (NULL, 1, AK_PBW_VARINT) + ak_pbw_varint (NULL, AK_PROTOCOL_VERSION)
                + ak_pbw_tag (NULL, 2, AK_PBW_VARINT) + ak_pbw_varint (NULL, seq)
                + ak_pbw_tag (NULL, AK__ENVELOPE__BODY_ASSIGN, AK_PBW_LEN) + ak_pbw_varint (NULL, body) + body;
    int rc = 0;
    if (size > AK_MAX_MSG_SIZE)
        rc = AK_ETOOBIG;
    else {
        uint8_t *buf = coord_buf (self, size);
        size_t n = ak_pbw_tag (buf, 1, AK_PBW_VARINT);
        n += ak_pbw_varint (buf + n, AK_PROTOCOL_VERSION);
        n += ak_pbw_tag (buf + n, 2, AK_PBW_VARINT);
        n += ak_pbw_varint (buf + n, seq);
        n += ak_pbw_tag (buf + n, AK__ENVELOPE__BODY_ASSIGN, AK_PBW_LEN);
        n += ak_pbw_varint (buf + n, body);
        if (ak__assign__pack (&m->assign, buf + n) != alen)
            rc = AK_EINTERNAL;
        n += alen;
        if (m->parts.ncopied)
            memcpy (buf + n, m->parts.copied, m->parts.ncopied);
#ifndef NDEBUG
        if (rc == 0)
            s_assign_check (self, txn, task, w, buf, size);
#endif
        if (rc == 0)
            rc = coord_send_frame (self, AK_EP_WORKERS, w->route, w->route_len, buf, size);
        coord_buf_done (self, buf);
    }
    if (rc) {
        char hex[64];
        self->counters.send_failures++;
        ak_debug ("workers endpoint: assign to peer %s not sent: %s",
                  coord_hex (w->route, w->route_len, hex, sizeof hex), ak_strerror (rc));
    }
    return rc;
}

// ================================================================ dispatch

/* Re-queues task (attempt + 1, or poisoned), taking it from its holder. */
void coord_requeue (ak_coord_t *self, ak_task_t *task, const char *reason, uint64_t now)
{
    if (task->worker_id) {
        ak_worker_t *w = ak_registry_get (self->registry, task->worker_id);
        if (w)
            ak_worker_drop (w, task->task_id);
    }
    ak_sched_requeue (self->sched, task, reason, now);
    self->counters.requeued++;
    self->dispatch_due = true;
}

/* Sends one popped task to w.  0 to go on dispatching to w, else stop. */
static int s_assign (ak_coord_t *self, ak_txn_t *txn, ak_worker_t *w, ak_task_t *task, uint64_t now)
{
    ak_err_t err = { 0 };
    s_assign_msg_t m;
    s_blobs_trim (self);
    int rc = s_build_assign (self, txn, task, &m, &err);
    if (rc == AK_ENOTFOUND || rc == AK_ESTORE) {
        /* a missing or undecodable record will not heal: burn an attempt */
        s_assign_msg_clear (&m);
        ak_error ("%s", err.msg);
        ak_sched_requeue (self->sched, task, err.msg, now);
        return 0;
    }
    if (rc) {
        s_assign_msg_clear (&m);
        ak_error ("%s", err.msg);
        ak_sched_unpop (self->sched, task);
        return rc;
    }
    ak_blobcache_mark (w->blobs, &m.assign);        /* texts the worker holds go as digests */
    rc = s_send_assign (self, txn, task, w, &m);
    if (rc == 0)
        ak_blobcache_sent (w->blobs, &m.assign);
    if (rc)
        s_assign_msg_clear (&m);
    if (rc == AK_ETOOBIG) {
        ak_sched_requeue (self->sched, task, "its assignment exceeds the 16 MiB message limit", now);
        return 0;
    }
    if (rc) {
        ak_sched_unpop (self->sched, task);
        return rc;
    }
    w->last_sent = now;
    ak_sched_assign (self->sched, task, w->worker_id, now);
    ak_sched_cache (self->sched, task, &m.rec, &m.def);     /* the commits rewrite it from memory */
    s_assign_msg_clear (&m);                                /* what the cache did not take */
    ak_worker_hold (w, task->task_id, task->attempt);
    self->counters.assigns++;
    return 0;
}

/* True when a live worker other than task->avoid_worker serves the
   task's class (ak_sched_pop_for: confirm tasks measure elsewhere). */
static bool s_other_live (void *arg, const ak_task_t *task)
{
    ak_coord_t *self = arg;
    return ak_registry_other_live (self->registry, task->device_class, task->avoid_worker);
}

/* Fills w's credit from the queues of its device classes, round-robin. */
void coord_dispatch_worker (ak_coord_t *self, ak_worker_t *w, uint64_t now)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    if (!w->alive || !w->nclasses)
        return;
    while (ak_worker_credit (w) > 0) {
        ak_task_t *task = ak_sched_pop_pinned (self->sched, w->worker_id);
        for (size_t k = 0; k < w->nclasses && !task; k++) {
            size_t c = (w->next_class + k) % w->nclasses;
            task = ak_sched_pop_for (self->sched, w->classes[c], w->worker_id, s_other_live, self);
            if (task)
                w->next_class = (c + 1) % w->nclasses;
        }
        if (!task)
            break;
        if (!txn && ak_store_begin (self->store, false, &txn, &err)) {
            ak_error ("dispatch: %s", err.msg);
            ak_sched_unpop (self->sched, task);
            break;
        }
        if (s_assign (self, txn, w, task, now))
            break;
    }
    ak_store_abort (&txn);
}

void coord_dispatch_all (ak_coord_t *self, uint64_t now)
{
    for (ak_worker_t *w = ak_registry_first (self->registry); w && ak_sched_has_work (self->sched);
         w = ak_registry_next (self->registry))
        if (w->alive && ak_worker_credit (w) > 0)
            coord_dispatch_worker (self, w, now);
}
