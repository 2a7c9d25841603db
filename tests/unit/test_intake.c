/*  tests/unit/test_intake.c: receipt intake and group commit
    (coordinator/intake.c) over a real temporary store, with the scheduler
    index and the registry it keeps in step, and the rebuild from LMDB. */
#include "support.h"
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpb.h"
#include "envelope.h"
#include "coordinator/committer.h"
#include "coordinator/intake.h"
#include "coordinator/registry.h"
#include "coordinator/sched.h"
#include "store.h"
#include "unit.h"
#include "util.h"

#define NTASKS 4

typedef struct {
    char          *dir;
    ak_store_t    *store;
    ak_sched_t    *sched;
    ak_registry_t *reg;
    ak_intake_t   *intake;
    ak_worker_t   *w1;
} fx_t;

static void s_put_records (ak_store_t *store)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (store, true, &txn, &err), 0);
    Ak__Policy policy = AK__POLICY__INIT;
    policy.max_attempts = 2;
    policy.lease_ms = 5000;
    policy.threshold = 0.03;
    policy.max_regression = 0.05;
    Ak__BatchRecord b = AK__BATCH_RECORD__INIT;
    char *targets[] = { "host" };
    b.batch_id = "B000001";
    b.name = "t";
    b.state = "open";
    b.targets = targets;
    b.n_targets = 1;
    b.policy = &policy;
    b.ntasks = NTASKS;
    assert_int_equal (ak_store_put_batch (txn, &b, &err), 0);
    for (int i = 1; i <= NTASKS; i++) {
        char id[32];
        snprintf (id, sizeof id, "B000001.%04d", i);
        Ak__TaskRecord t = AK__TASK_RECORD__INIT;
        t.task_id = id;
        t.batch_id = "B000001";
        t.state = "queued";
        t.attempt = 1;
        t.kind = i == 1 ? "preflight" : "tune";
        t.op = "softmax";
        t.device_class = "host";
        t.backend = "host";
        t.candidate_name = i == 1 ? "" : "blocked";
        t.policy = &policy;
        assert_int_equal (ak_store_put_task (txn, &t, &err), 0);
    }
    assert_int_equal (ak_store_commit (&txn, &err), 0);
}

static Ak__Hello *s_hello (const char *id)
{
    return ak_unit_hello (id, 2, 1);
}

/* Opens (or re-opens) the store and rebuilds the index, as akcoord does. */
static void s_open (fx_t *fx, size_t map_size, size_t map_max, uint64_t now)
{
    ak_store_opts_t so = { .map_size = map_size, .no_sync = true };
    ak_err_t err = { 0 };
    if (ak_store_open (fx->dir, &so, &fx->store, &err))
        fail_msg ("store: %s", err.msg);
    fx->sched = ak_sched_new ();
    fx->reg = ak_registry_new ();
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_registry_load (fx->reg, txn, &err), 0);
    assert_int_equal (ak_sched_load (fx->sched, txn, now, 3000, &err), 0);
    ak_store_abort (&txn);
    ak_intake_opts_t io = { .commit_ms = 2, .commit_max = 3, .map_max = map_max };
    fx->intake = ak_intake_new (fx->store, fx->sched, fx->reg, &io);
}

static void s_close (fx_t *fx)
{
    ak_intake_destroy (&fx->intake);
    ak_registry_destroy (&fx->reg);
    ak_sched_destroy (&fx->sched);
    ak_store_destroy (&fx->store);
    fx->w1 = NULL;
}

static fx_t *s_fixture (size_t map_size, size_t map_max)
{
    fx_t *fx = ak_calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("intake");
    ak_store_opts_t so = { .map_size = map_size, .no_sync = true };
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_open (fx->dir, &so, &fx->store, &err), 0);
    s_put_records (fx->store);
    ak_store_destroy (&fx->store);
    s_open (fx, map_size, map_max, 1000);
    Ak__Hello *h = s_hello ("w1");
    bool was_alive = true;
    fx->w1 = ak_registry_hello (fx->reg, "\0\1\2\3\4", 5, &h, 1000, &was_alive);
    assert_false (was_alive);
    assert_null (h);
    return fx;
}

static void s_fixture_free (fx_t *fx)
{
    s_close (fx);
    ak_intake_destroy (&fx->intake);    /* twice is fine */
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    free (fx);
}

/* Pops the next host task and assigns it to w, as dispatch does. */
static ak_task_t *s_assign (fx_t *fx, ak_worker_t *w, uint64_t now)
{
    ak_task_t *t = ak_sched_pop (fx->sched, "host");
    assert_non_null (t);
    ak_sched_assign (fx->sched, t, w->worker_id, now);
    ak_worker_hold (w, t->task_id, t->attempt);
    return t;
}

static Ak__Receipt *s_receipt (const char *task_id, uint32_t attempt, const char *status)
{
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    ak_cpb_set (&r->task_id, task_id);
    r->attempt = attempt;
    ak_cpb_set (&r->status, status);
    /* the coordinator's to set: the stored receipt must have its values */
    ak_cpb_set (&r->receipt_id, "R-FROM-WORKER");
    ak_cpb_set (&r->worker_id, "w-liar");
    ak_cpb_set (&r->batch_id, "B-LIE");
    r->received_at_ms = 1;
    r->duplicate = true;
    /* fields the coordinator neither reads nor sets: kept as sent */
    ak_cpb_set (&r->reason, "as the worker said");
    ak_cpb_set (&r->host, "h1");
    r->compile_ms = 2.5;
    return r;
}

/* A receipt with a compile log of S_BIG bytes of c: more than a 512 KiB
   map holds. */
#define S_BIG (2u << 20)
static Ak__Receipt *s_big_receipt (const char *task_id, char c)
{
    Ak__Receipt *big = s_receipt (task_id, 1, "compile_error");
    char *log = ak_malloc (S_BIG + 1);
    memset (log, c, S_BIG);
    log[S_BIG] = '\0';
    big->compile_log = log;
    return big;
}

/* Stages a receipt as the coordinator does one that arrived: packed in an
   envelope, its bytes found there (ak_envelope_field_bytes), decoded from
   them and staged with them, so the commit stores those bytes followed by
   the coordinator's fields. */
static int s_stage (fx_t *fx, const char *task_id, uint32_t attempt, const char *status, uint64_t now)
{
    Ak__Receipt *sent = s_receipt (task_id, attempt, status);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = sent;
    uint8_t *frame = NULL;
    size_t size = 0;
    assert_int_equal (ak_envelope_pack (&env, &frame, &size), 0);
    ak__receipt__free_unpacked (sent, NULL);
    Ak__Envelope *got = NULL;
    ak_err_t err = { 0 };
    bool slim = false;
    assert_int_equal (ak_envelope_unpack_counted (frame, size, 0, AK_ENVELOPE_SLIM_RECEIPT, &got, NULL, &slim,
                                                  &err), 0);
    assert_true (slim);
    assert_string_equal (got->receipt->reason, "");         /* not decoded ... */
    const uint8_t *raw = NULL;
    size_t rawlen = 0;
    assert_int_equal (ak_envelope_field_bytes (frame, size, AK__ENVELOPE__BODY_RECEIPT, &raw, &rawlen), 0);
    Ak__Receipt *r = got->receipt;
    got->receipt = NULL;
    got->body_case = AK__ENVELOPE__BODY__NOT_SET;
    ak_envelope_free (&got);
    int rc = ak_intake_stage_raw (fx->intake, "w1", &r, raw, rawlen, now, &err);
    assert_null (r);
    free (frame);
    return rc;
}

static Ak__TaskRecord *s_task_rec (fx_t *fx, const char *id)
{
    ak_txn_t *txn = NULL;
    Ak__TaskRecord *t = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_task (txn, id, &t, &err), 0);
    ak_store_abort (&txn);
    return t;
}

static Ak__Receipt *s_receipt_rec (fx_t *fx, const char *id)
{
    ak_txn_t *txn = NULL;
    Ak__Receipt *r = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_receipt (txn, id, &r, &err), 0);
    ak_store_abort (&txn);
    return r;
}

static char *s_attempt_key (fx_t *fx, const char *key)
{
    ak_txn_t *txn = NULL;
    void *val = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    int rc = ak_store_get (txn, AK_DB_ATTEMPTS, key, &val, &len, &err);
    ak_store_abort (&txn);
    return rc ? NULL : val;
}

// ------------------------------------------------------------------- tests

static void test_first_accepted_then_duplicate (void **state)
{
    fx_t *fx = s_fixture (0, 0);
    ak_commit_t c;
    ak_err_t err = { 0 };
    ak_task_t *t1 = s_assign (fx, fx->w1, 1000);
    assert_int_equal (t1->state, AK_TS_LEASED);
    assert_int_equal (ak_worker_credit (fx->w1), 2);

    /* a commit of the assignment alone: state persisted, no acks */
    assert_true (ak_intake_deadline (fx->intake) == 1002);
    assert_int_equal (ak_intake_commit (fx->intake, 1002, &c, &err), 0);
    assert_int_equal (c.nacks, 0);
    ak_commit_clear (&c);
    Ak__TaskRecord *rec = s_task_rec (fx, "B000001.0001");
    assert_string_equal (rec->state, "leased");
    assert_string_equal (rec->worker_id, "w1");
    ak__task_record__free_unpacked (rec, NULL);
    assert_int_equal (ak_intake_deadline (fx->intake), 0);

    /* staged: nothing acked, nothing stored yet */
    ak_worker_drop (fx->w1, "B000001.0001");
    assert_int_equal (s_stage (fx, "B000001.0001", 1, "ok", 2000), 0);
    assert_int_equal (ak_intake_staged (fx->intake), 1);
    assert_int_equal (ak_intake_staged_for (fx->intake, "w1"), 1);
    assert_true (ak_intake_deadline (fx->intake) == 2002);
    assert_null (s_attempt_key (fx, "B000001.0001#1"));
    assert_int_equal (t1->state, AK_TS_LEASED);

    assert_int_equal (ak_intake_commit (fx->intake, 2002, &c, &err), 0);
    assert_int_equal (c.nacks, 1);
    assert_string_equal (c.acks[0].task_id, "B000001.0001");
    assert_string_equal (c.acks[0].worker_id, "w1");
    assert_int_equal (c.acks[0].attempt, 1);
    assert_string_equal (c.acks[0].receipt_id, "R00000001");
    assert_false (c.acks[0].duplicate);
    ak_commit_clear (&c);
    assert_int_equal (t1->state, AK_TS_DONE);
    assert_int_equal (fx->w1->tasks_done, 1);

    rec = s_task_rec (fx, "B000001.0001");
    assert_string_equal (rec->state, "done");
    assert_string_equal (rec->receipt_id, "R00000001");
    assert_string_equal (rec->status, "ok");
    assert_int_equal (rec->duplicates, 0);
    ak__task_record__free_unpacked (rec, NULL);
    Ak__Receipt *r = s_receipt_rec (fx, "R00000001");
    assert_string_equal (r->receipt_id, "R00000001");
    assert_string_equal (r->worker_id, "w1");
    assert_string_equal (r->batch_id, "B000001");
    assert_false (r->duplicate);
    assert_true (r->received_at_ms > 1);
    assert_string_equal (r->reason, "as the worker said");   /* ... but stored as sent */
    assert_string_equal (r->host, "h1");
    assert_true (r->compile_ms == 2.5);
    ak__receipt__free_unpacked (r, NULL);
    char *v = s_attempt_key (fx, "B000001.0001#1");
    assert_string_equal (v, "R00000001");
    free (v);

    /* the same attempt again: stored as a duplicate, counted once */
    assert_int_equal (s_stage (fx, "B000001.0001", 1, "ok", 3000), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 3002, &c, &err), 0);
    assert_int_equal (c.nacks, 1);
    assert_true (c.acks[0].duplicate);
    assert_string_equal (c.acks[0].receipt_id, "R00000002");
    ak_commit_clear (&c);
    rec = s_task_rec (fx, "B000001.0001");
    assert_string_equal (rec->state, "done");
    assert_string_equal (rec->receipt_id, "R00000001");
    assert_int_equal (rec->duplicates, 1);
    ak__task_record__free_unpacked (rec, NULL);
    r = s_receipt_rec (fx, "R00000002");
    assert_true (r->duplicate);
    ak__receipt__free_unpacked (r, NULL);
    v = s_attempt_key (fx, "B000001.0001#1");
    assert_string_equal (v, "R00000001");       /* still the first */
    free (v);
    v = s_attempt_key (fx, "B000001.0001#1#R00000002");
    assert_string_equal (v, "R00000002");
    free (v);
    const ak_intake_stats_t *st = ak_intake_stats (fx->intake);
    assert_int_equal (st->accepted, 1);
    assert_int_equal (st->duplicate, 1);
    assert_int_equal (fx->w1->tasks_done, 1);
    assert_int_equal (ak_sched_count (fx->sched, AK_TS_DONE), 1);
    s_fixture_free (fx);
}

static void test_older_attempt_after_accept (void **state)
{
    fx_t *fx = s_fixture (0, 0);
    ak_commit_t c;
    ak_err_t err = { 0 };
    s_assign (fx, fx->w1, 1000);                        /* 0001 */
    ak_task_t *t2 = s_assign (fx, fx->w1, 1000);        /* 0002 */
    assert_string_equal (t2->task_id, "B000001.0002");
    ak_sched_requeue (fx->sched, t2, "lease expired (w1)", 1001);
    assert_int_equal (t2->attempt, 2);
    assert_int_equal (t2->state, AK_TS_QUEUED);
    ak_task_t *again = ak_sched_pop (fx->sched, "host");   /* a retry keeps its place: first */
    assert_ptr_equal (again, t2);
    ak_sched_unpop (fx->sched, again);

    /* attempt 2 fails first: accepted as failed; then attempt 1 is a duplicate */
    assert_int_equal (s_stage (fx, "B000001.0002", 2, "wrong_answer", 1100), 0);
    assert_int_equal (s_stage (fx, "B000001.0002", 1, "ok", 1100), 0);
    /* impossible attempts and unknown tasks are refused at the door */
    assert_int_equal (s_stage (fx, "B000001.0002", 3, "ok", 1100), AK_EINVAL);
    assert_int_equal (s_stage (fx, "B000001.0002", 0, "ok", 1100), AK_EINVAL);
    assert_int_equal (s_stage (fx, "B000009.0001", 1, "ok", 1100), AK_ENOTFOUND);
    assert_int_equal (ak_intake_staged (fx->intake), 2);
    assert_int_equal (ak_intake_commit (fx->intake, 1102, &c, &err), 0);
    assert_int_equal (c.nacks, 2);
    assert_false (c.acks[0].duplicate);
    assert_false (c.acks[0].ok);
    assert_true (c.acks[1].duplicate);
    ak_commit_clear (&c);
    assert_int_equal (t2->state, AK_TS_FAILED);
    Ak__TaskRecord *rec = s_task_rec (fx, "B000001.0002");
    assert_string_equal (rec->state, "failed");
    assert_string_equal (rec->status, "wrong_answer");
    assert_int_equal (rec->attempt, 2);
    assert_string_equal (rec->last_error, "lease expired (w1)");
    assert_int_equal (rec->duplicates, 1);
    ak__task_record__free_unpacked (rec, NULL);

    /* a queued task that gets a (late) receipt is done; its stale queue
       entries (0002's, 0003's) are skipped */
    assert_int_equal (s_stage (fx, "B000001.0003", 1, "ok", 1200), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 1202, &c, &err), 0);
    ak_commit_clear (&c);
    ak_task_t *next = ak_sched_pop (fx->sched, "host");
    assert_non_null (next);
    assert_string_equal (next->task_id, "B000001.0004");
    assert_null (ak_sched_pop (fx->sched, "host"));
    s_fixture_free (fx);
}

/* retry: a failed task opened again takes a new attempt with a fresh
   budget; a copy of its old receipt is a duplicate even though the task is
   open (each (task, attempt) is accepted once); the budget survives a
   rebuild from the store. */
static void test_reopen_accepts_each_attempt_once (void **state)
{
    fx_t *fx = s_fixture (0, 0);
    ak_commit_t c;
    ak_err_t err = { 0 };
    s_assign (fx, fx->w1, 1000);                        /* 0001 */
    ak_task_t *t2 = s_assign (fx, fx->w1, 1000);        /* 0002 */
    assert_int_equal (s_stage (fx, "B000001.0002", 1, "wrong_answer", 1100), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 1102, &c, &err), 0);
    ak_commit_clear (&c);
    assert_int_equal (t2->state, AK_TS_FAILED);
    assert_false (ak_sched_reopen (fx->sched, ak_sched_task (fx->sched, "B000001.0003"), 1150));

    assert_true (ak_sched_reopen (fx->sched, t2, 1200));
    assert_int_equal (t2->state, AK_TS_QUEUED);
    assert_int_equal (t2->attempt, 2);
    assert_int_equal (t2->attempt_base, 1);
    assert_false (ak_sched_reopen (fx->sched, t2, 1200));      /* not failed any more */
    /* the old attempt's copy arrives: a duplicate, the task stays open */
    assert_int_equal (s_stage (fx, "B000001.0002", 1, "ok", 1300), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 1302, &c, &err), 0);
    assert_int_equal (c.nacks, 1);
    assert_true (c.acks[0].duplicate);
    ak_commit_clear (&c);
    assert_int_equal (t2->state, AK_TS_QUEUED);
    Ak__TaskRecord *rec = s_task_rec (fx, "B000001.0002");
    assert_string_equal (rec->state, "queued");
    assert_string_equal (rec->receipt_id, "");         /* the old verdict cleared */
    assert_string_equal (rec->status, "");
    assert_int_equal (rec->attempt, 2);
    assert_int_equal (rec->attempt_base, 1);
    assert_int_equal (rec->duplicates, 1);
    ak__task_record__free_unpacked (rec, NULL);

    /* the budget (max_attempts 2) counts from the retry, across a restart */
    s_close (fx);
    s_open (fx, 0, 0, 5000);
    t2 = ak_sched_task (fx->sched, "B000001.0002");
    assert_int_equal (t2->attempt_base, 1);
    ak_sched_requeue (fx->sched, t2, "lease expired", 5001);
    assert_int_equal (t2->state, AK_TS_QUEUED);
    assert_int_equal (t2->attempt, 3);
    ak_sched_requeue (fx->sched, t2, "lease expired", 5002);
    assert_int_equal (t2->state, AK_TS_POISONED);

    /* attempt 2's receipt (late, the task poisoned meanwhile) is a duplicate;
       retried again, attempt 4 is accepted */
    assert_true (ak_sched_reopen (fx->sched, t2, 5100));
    assert_int_equal (t2->attempt, 4);
    assert_int_equal (s_stage (fx, "B000001.0002", 4, "ok", 5200), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 5202, &c, &err), 0);
    assert_int_equal (c.nacks, 1);
    assert_false (c.acks[0].duplicate);
    ak_commit_clear (&c);
    assert_int_equal (t2->state, AK_TS_DONE);
    rec = s_task_rec (fx, "B000001.0002");
    assert_string_equal (rec->state, "done");
    assert_string_equal (rec->status, "ok");
    assert_int_equal (rec->attempt, 4);
    ak__task_record__free_unpacked (rec, NULL);
    s_fixture_free (fx);
}

static void test_commit_max_and_ack_after_commit (void **state)
{
    /* a 512 KiB map that a 2 MiB receipt cannot fit into */
    fx_t *fx = s_fixture (512 * 1024, 512 * 1024);
    ak_commit_t c;
    ak_err_t err = { 0 };
    for (int i = 0; i < 3; i++)
        s_assign (fx, fx->w1, 1000);
    assert_int_equal (ak_intake_commit (fx->intake, 1002, &c, &err), 0);
    ak_commit_clear (&c);

    /* commit_max (3) staged receipts make a commit due at once */
    assert_int_equal (s_stage (fx, "B000001.0001", 1, "ok", 5000), 0);
    assert_int_equal (s_stage (fx, "B000001.0002", 1, "ok", 5001), 0);
    assert_true (ak_intake_deadline (fx->intake) == 5002);
    Ak__Receipt *big = s_big_receipt ("B000001.0003", 'x');
    assert_int_equal (ak_intake_stage (fx->intake, "w1", &big, 5002, &err), 0);
    assert_true (ak_intake_deadline (fx->intake) == 5000);

    /* the map cannot grow past its limit: nothing is acked or stored */
    int rc = ak_intake_commit (fx->intake, 5003, &c, &err);
    assert_int_equal (rc, AK_ESTOREFULL);
    assert_int_equal (c.nacks, 0);
    assert_int_equal (c.ndropped, 1);
    assert_string_equal (c.dropped[0], "w1");
    ak_commit_clear (&c);
    assert_int_equal (ak_intake_staged (fx->intake), 0);
    assert_int_equal (ak_intake_stats (fx->intake)->commit_failures, 1);
    assert_int_equal (ak_intake_stats (fx->intake)->dropped, 3);
    assert_null (s_attempt_key (fx, "B000001.0001#1"));
    assert_int_equal (ak_sched_task (fx->sched, "B000001.0001")->state, AK_TS_LEASED);
    /* a failed commit pauses the next attempt */
    assert_true (ak_intake_deadline (fx->intake) == 0
                 || ak_intake_deadline (fx->intake) >= 5003 + AK_INTAKE_RETRY_MS);
    s_close (fx);

    /* with room to grow, the same receipts (re-sent) are stored and acked */
    s_open (fx, 512 * 1024, 64u << 20, 6000);
    Ak__Hello *h = s_hello ("w1");
    bool was_alive;
    fx->w1 = ak_registry_hello (fx->reg, "\0\1\2\3\5", 5, &h, 6000, &was_alive);
    assert_int_equal (s_stage (fx, "B000001.0001", 1, "ok", 6000), 0);
    big = s_big_receipt ("B000001.0003", 'y');
    assert_int_equal (ak_intake_stage (fx->intake, "w1", &big, 6000, &err), 0);
    rc = ak_intake_commit (fx->intake, 6002, &c, &err);
    if (rc)
        fail_msg ("commit: %s", err.msg);
    assert_int_equal (c.nacks, 2);
    assert_int_equal (c.ndropped, 0);
    assert_string_equal (c.acks[1].receipt_id, "R00000002");
    ak_commit_clear (&c);
    assert_true (ak_intake_stats (fx->intake)->map_grows >= 1);
    assert_true (ak_store_map_size (fx->store) > 512 * 1024);
    Ak__Receipt *r = s_receipt_rec (fx, "R00000002");
    assert_int_equal (strlen (r->compile_log), S_BIG);
    ak__receipt__free_unpacked (r, NULL);
    assert_int_equal (ak_sched_task (fx->sched, "B000001.0003")->state, AK_TS_FAILED);
    s_fixture_free (fx);
}

static void test_rebuild_from_store (void **state)
{
    fx_t *fx = s_fixture (0, 0);
    ak_commit_t c;
    ak_err_t err = { 0 };
    ak_task_t *t1 = s_assign (fx, fx->w1, 1000);
    ak_task_t *t2 = s_assign (fx, fx->w1, 1000);
    ak_sched_start (fx->sched, t2, 1000);
    assert_int_equal (t2->deadline, 6000);
    ak_task_t *t3 = s_assign (fx, fx->w1, 1000);
    ak_sched_requeue (fx->sched, t3, "worker w1 died", 1000);
    assert_int_equal (s_stage (fx, t1->task_id, 1, "ok", 1000), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 1002, &c, &err), 0);
    ak_commit_clear (&c);
    s_close (fx);

    /* a new coordinator: queues and leases come back from the store */
    s_open (fx, 0, 0, 50000);
    assert_int_equal (ak_sched_count (fx->sched, AK_TS_DONE), 1);
    assert_int_equal (ak_sched_count (fx->sched, AK_TS_LEASED), 1);
    assert_int_equal (ak_sched_count (fx->sched, AK_TS_QUEUED), 2);
    assert_int_equal (ak_sched_open_batches (fx->sched), 1);
    ak_task_t *leased = ak_sched_task (fx->sched, "B000001.0002");
    assert_int_equal (leased->state, AK_TS_LEASED);
    /* held by the worker it was given to; a started lease keeps its
       deadline (5000 ms from its start, some of which passed): never a
       fresh one at a restart */
    assert_string_equal (leased->worker_id, "w1");
    assert_string_equal (leased->attempt_holder, "w1");
    assert_true (leased->started);
    assert_true (leased->deadline > 50000 && leased->deadline <= 50000 + 5000);
    uint64_t deadline = leased->deadline;
    ak_task_t *q = ak_sched_pop (fx->sched, "host");
    assert_string_equal (q->task_id, "B000001.0003");
    assert_int_equal (q->attempt, 2);
    ak_sched_unpop (fx->sched, q);
    assert_string_equal (ak_sched_pop (fx->sched, "host")->task_id, "B000001.0003");
    assert_string_equal (ak_sched_pop (fx->sched, "host")->task_id, "B000001.0004");
    assert_null (ak_sched_pop (fx->sched, "host"));
    ak_sched_unpop (fx->sched, ak_sched_task (fx->sched, "B000001.0004"));
    ak_sched_unpop (fx->sched, ak_sched_task (fx->sched, "B000001.0003"));
    ak_worker_t *w = ak_registry_get (fx->reg, "w1");
    assert_non_null (w);
    assert_false (w->alive);                            /* known, dead until HELLO */
    assert_int_equal (w->tasks_done, 1);

    /* no one claims the lease: it expires and re-queues with attempt 2 */
    ak_task_t **exp = NULL;
    assert_int_equal (ak_sched_expired (fx->sched, deadline - 1, &exp), 0);
    free (exp);
    assert_int_equal (ak_sched_expired (fx->sched, deadline, &exp), 1);
    assert_ptr_equal (exp[0], leased);
    ak_sched_requeue (fx->sched, leased, "lease expired", deadline);
    free (exp);
    assert_int_equal (leased->attempt, 2);
    assert_int_equal (ak_sched_count (fx->sched, AK_TS_QUEUED), 3);

    /* the retry is first in line; max_attempts is 2: its next failure poisons it */
    ak_task_t *first = ak_sched_pop (fx->sched, "host");
    assert_ptr_equal (first, leased);
    ak_sched_assign (fx->sched, first, "w2", 55001);
    ak_sched_requeue (fx->sched, first, "worker w2 died", 56000);
    assert_int_equal (first->state, AK_TS_POISONED);
    assert_int_equal (first->attempt, 2);
    assert_int_equal (ak_sched_count (fx->sched, AK_TS_QUEUED), 2);
    assert_int_equal (ak_intake_commit (fx->intake, 56002, &c, &err), 0);
    ak_commit_clear (&c);
    Ak__TaskRecord *rec = s_task_rec (fx, "B000001.0002");
    assert_string_equal (rec->state, "poisoned");
    assert_string_equal (rec->last_error, "worker w2 died");
    ak__task_record__free_unpacked (rec, NULL);
    s_fixture_free (fx);
}

static void test_settle_and_cancel (void **state)
{
    fx_t *fx = s_fixture (0, 0);
    ak_commit_t c;
    ak_err_t err = { 0 };
    ak_batch_t *b = ak_sched_batch (fx->sched, "B000001");
    assert_non_null (b);
    assert_null (ak_sched_settling (fx->sched));
    for (int i = 0; i < 2; i++) {
        ak_task_t *t = s_assign (fx, fx->w1, 1000);
        assert_int_equal (s_stage (fx, t->task_id, 1, "ok", 1000), 0);
    }
    assert_int_equal (ak_intake_commit (fx->intake, 1002, &c, &err), 0);
    ak_commit_clear (&c);
    assert_null (ak_sched_settling (fx->sched));
    /* cancel the rest: counted cancelled, the batch is cancelled, not settled */
    assert_int_equal (ak_sched_cancel (fx->sched, b, 1003), 2);
    assert_int_equal (ak_sched_cancel (fx->sched, b, 1003), 0);
    assert_int_equal (b->state, AK_BS_CANCELLED);
    assert_int_equal (b->counts[AK_TS_CANCELLED], 2);
    assert_null (ak_sched_settling (fx->sched));
    /* a receipt after the cancel is a duplicate */
    assert_int_equal (s_stage (fx, "B000001.0003", 1, "ok", 1004), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 1006, &c, &err), 0);
    assert_int_equal (c.nacks, 1);
    assert_true (c.acks[0].duplicate);
    ak_commit_clear (&c);
    ak_txn_t *txn = NULL;
    Ak__BatchRecord *rec = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_batch (txn, "B000001", &rec, &err), 0);
    ak_store_abort (&txn);
    assert_string_equal (rec->state, "cancelled");
    assert_true (rec->finished_ms > 0);
    ak__batch_record__free_unpacked (rec, NULL);
    s_fixture_free (fx);
}

/* Past the first AK_DUP_KEEP_WHOLE duplicates of a task, a duplicate is a
   digest record; equal copies from the same worker fold into one. */
static void test_duplicates_past_the_cap_as_digests (void **state)
{
    fx_t *fx = s_fixture (0, 0);
    ak_commit_t c;
    ak_err_t err = { 0 };
    s_assign (fx, fx->w1, 1000);
    ak_worker_drop (fx->w1, "B000001.0001");
    assert_int_equal (s_stage (fx, "B000001.0001", 1, "ok", 2000), 0);
    assert_int_equal (ak_intake_commit (fx->intake, 2002, &c, &err), 0);
    ak_commit_clear (&c);
    const char *want[] = { "R00000002", "R00000003", "R00000004", "R00000004", "R00000004" };
    for (int i = 0; i < 5; i++) {
        assert_int_equal (s_stage (fx, "B000001.0001", 1, "ok", 3000 + (uint64_t) i * 10), 0);
        assert_int_equal (ak_intake_commit (fx->intake, 3002 + (uint64_t) i * 10, &c, &err), 0);
        assert_int_equal (c.nacks, 1);
        assert_true (c.acks[0].duplicate);
        assert_string_equal (c.acks[0].receipt_id, want[i]);
        ak_commit_clear (&c);
    }
    Ak__TaskRecord *rec = s_task_rec (fx, "B000001.0001");
    assert_int_equal (rec->duplicates, 5);              /* every copy counted */
    ak__task_record__free_unpacked (rec, NULL);
    for (int i = 0; i < 2; i++) {                       /* whole */
        Ak__Receipt *r = s_receipt_rec (fx, want[i]);
        assert_true (r->duplicate);
        assert_true (r->compile_ms == 2.5);
        assert_string_equal (r->digest, "");
        ak__receipt__free_unpacked (r, NULL);
    }
    Ak__Receipt *d = s_receipt_rec (fx, "R00000004");   /* a digest of 3 copies */
    assert_true (d->duplicate);
    assert_int_equal (strlen (d->digest), 64);
    assert_int_equal (d->copies, 3);
    assert_true (d->size > 0);
    assert_true (d->last_at_ms >= d->received_at_ms);
    assert_string_equal (d->worker_id, "w1");
    assert_string_equal (d->batch_id, "B000001");
    assert_string_equal (d->task_id, "B000001.0001");
    assert_string_equal (d->reason, "as the worker said");
    assert_string_equal (d->host, "h1");
    assert_true (d->compile_ms == 0);                   /* the body is not kept */
    char *key = ak_sprintf ("B000001.0001#digest#%s", d->digest);
    char *v = s_attempt_key (fx, key);
    assert_string_equal (v, "R00000004");
    free (v);
    free (key);
    ak__receipt__free_unpacked (d, NULL);
    v = s_attempt_key (fx, "B000001.0001#1#R00000004");
    assert_string_equal (v, "R00000004");
    free (v);
    assert_int_equal (ak_intake_stats (fx->intake)->duplicate, 5);
    s_fixture_free (fx);
}

/* A commit on the writer thread (committer.h): what the loop changes while
   it is in flight (a receipt staged, a task leased, a leased task started)
   is not lost by the flushed step of the one in flight: it goes into the
   next commit; nothing is acked before its own commit holds. */
static void test_async_commit_keeps_what_changed_in_flight (void **state)
{
    (void) state;
    fx_t *fx = s_fixture (1u << 20, 0);
    ak_err_t err = { 0 };
    ak_committer_t *c = ak_committer_new (fx->store, &err);
    assert_non_null (c);
    ak_task_t *t1 = s_assign (fx, fx->w1, 1000);
    ak_task_t *t2 = s_assign (fx, fx->w1, 1000);
    assert_int_equal (s_stage (fx, t1->task_id, 1, "ok", 1001), 0);
    bool started = false, again = true, finished = false;
    uint64_t parked = 0, ns = 0;
    assert_int_equal (ak_intake_commit_start (fx->intake, c, &started, &parked, &err), 0);
    assert_true (started);
    assert_true (ak_intake_busy (fx->intake));
    assert_int_equal (ak_intake_deadline (fx->intake), 0);
    assert_int_equal (ak_intake_commit_start (fx->intake, c, &again, NULL, &err), 0);
    assert_false (again);                           /* one in flight at a time */
    ak_commit_t out;
    assert_int_equal (ak_intake_commit (fx->intake, 1002, &out, &err), AK_ESTATE);
    ak_commit_clear (&out);

    /* in flight: t2's receipt, t2 started, t3 leased */
    assert_int_equal (s_stage (fx, t2->task_id, 1, "ok", 1002), 0);
    ak_sched_start (fx->sched, t2, 1002);
    ak_task_t *t3 = s_assign (fx, fx->w1, 1002);
    assert_true (ak_intake_pending (fx->intake, t1->task_id, "w1"));
    assert_true (ak_intake_pending (fx->intake, t2->task_id, "w1"));
    assert_int_equal (ak_intake_staged_for (fx->intake, "w1"), 2);
    assert_int_equal (ak_intake_staged (fx->intake), 2);

    /* the fd says when: readable means finished (never a wake-up that
       finds the commit still running), and drained by the finish */
    struct pollfd pfd = { .fd = ak_committer_fd (c), .events = POLLIN };
    assert_int_equal (poll (&pfd, 1, 10000), 1);
    assert_int_equal (ak_intake_commit_finish (fx->intake, c, false, 1003, &out, &finished, &ns, &err), 0);
    assert_true (finished);
    assert_true (ns > 0);
    assert_int_equal (poll (&pfd, 1, 0), 0);
    assert_int_equal (out.nacks, 1);
    assert_string_equal (out.acks[0].task_id, t1->task_id);
    ak_commit_clear (&out);
    assert_false (ak_intake_busy (fx->intake));
    assert_int_equal (t1->state, AK_TS_DONE);
    assert_int_equal (t2->state, AK_TS_LEASED);
    assert_int_equal (ak_intake_staged (fx->intake), 1);
    assert_false (ak_intake_pending (fx->intake, t1->task_id, "w1"));
    /* the changes made in flight are dirty still, and due */
    assert_int_equal (ak_sched_dirty_since (fx->sched), 1002);
    assert_true (ak_intake_deadline (fx->intake) != 0);
    Ak__TaskRecord *r = s_task_rec (fx, t1->task_id);
    assert_string_equal (r->state, "done");
    ak__task_record__free_unpacked (r, NULL);
    r = s_task_rec (fx, t2->task_id);
    assert_string_equal (r->state, "leased");
    assert_int_equal (r->lease_deadline_ms, 0);     /* its start came after the flush */
    ak__task_record__free_unpacked (r, NULL);
    r = s_task_rec (fx, t3->task_id);
    assert_string_equal (r->state, "queued");       /* its lease came after the flush */
    ak__task_record__free_unpacked (r, NULL);

    /* the next commit takes them */
    assert_int_equal (ak_intake_commit_start (fx->intake, c, &started, &parked, &err), 0);
    assert_true (started);
    assert_int_equal (ak_intake_commit_finish (fx->intake, c, true, 1004, &out, &finished, &ns, &err), 0);
    assert_true (finished);
    assert_int_equal (out.nacks, 1);
    assert_string_equal (out.acks[0].task_id, t2->task_id);
    ak_commit_clear (&out);
    assert_int_equal (ak_sched_dirty_since (fx->sched), 0);
    assert_int_equal (ak_registry_dirty_since (fx->reg), 0);
    r = s_task_rec (fx, t2->task_id);
    assert_string_equal (r->state, "done");
    ak__task_record__free_unpacked (r, NULL);
    r = s_task_rec (fx, t3->task_id);
    assert_string_equal (r->state, "leased");
    ak__task_record__free_unpacked (r, NULL);
    /* nothing pending: a start starts nothing; a finish finishes nothing */
    assert_int_equal (ak_intake_commit_start (fx->intake, c, &started, &parked, &err), 0);
    assert_false (started);
    assert_int_equal (ak_intake_commit_finish (fx->intake, c, false, 1005, &out, &finished, &ns, &err), 0);
    assert_false (finished);
    ak_commit_clear (&out);
    ak_committer_destroy (&c);
    assert_null (c);

    /* what the two commits stored is what a restart rebuilds */
    s_close (fx);
    s_open (fx, 1u << 20, 0, 2000);
    assert_int_equal (ak_sched_task (fx->sched, "B000001.0001")->state, AK_TS_DONE);
    assert_int_equal (ak_sched_task (fx->sched, "B000001.0002")->state, AK_TS_DONE);
    assert_int_equal (ak_sched_task (fx->sched, "B000001.0003")->state, AK_TS_LEASED);
    s_fixture_free (fx);
}

/* A commit that cannot be written on the writer thread (the map is full)
   leaves nothing in flight and its receipts staged, in order: the
   synchronous commit then grows the map and stores them. */
static void test_async_commit_full_map_falls_back (void **state)
{
    (void) state;
    fx_t *fx = s_fixture (512 * 1024, 64u << 20);
    ak_err_t err = { 0 };
    ak_committer_t *c = ak_committer_new (fx->store, &err);
    assert_non_null (c);
    s_assign (fx, fx->w1, 1000);
    s_assign (fx, fx->w1, 1000);
    assert_int_equal (s_stage (fx, "B000001.0001", 1, "ok", 1001), 0);
    Ak__Receipt *big = s_big_receipt ("B000001.0002", 'z');
    assert_int_equal (ak_intake_stage (fx->intake, "w1", &big, 1001, &err), 0);
    bool started = true;
    assert_int_equal (ak_intake_commit_start (fx->intake, c, &started, NULL, &err), AK_ESTOREFULL);
    assert_false (started);
    assert_false (ak_intake_busy (fx->intake));
    assert_false (ak_committer_busy (c));
    assert_int_equal (ak_intake_staged (fx->intake), 2);
    assert_int_equal (ak_intake_stats (fx->intake)->commit_failures, 0);
    ak_commit_t out;
    assert_int_equal (ak_intake_commit (fx->intake, 1002, &out, &err), 0);
    assert_int_equal (out.nacks, 2);
    assert_string_equal (out.acks[0].task_id, "B000001.0001");
    assert_string_equal (out.acks[0].receipt_id, "R00000001");
    assert_string_equal (out.acks[1].task_id, "B000001.0002");
    ak_commit_clear (&out);
    assert_true (ak_intake_stats (fx->intake)->map_grows >= 1);
    Ak__Receipt *r = s_receipt_rec (fx, "R00000002");
    assert_int_equal (strlen (r->compile_log), S_BIG);
    ak__receipt__free_unpacked (r, NULL);
    ak_committer_destroy (&c);
    s_fixture_free (fx);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_first_accepted_then_duplicate),
        cmocka_unit_test (test_older_attempt_after_accept),
        cmocka_unit_test (test_reopen_accepts_each_attempt_once),
        cmocka_unit_test (test_commit_max_and_ack_after_commit),
        cmocka_unit_test (test_rebuild_from_store),
        cmocka_unit_test (test_settle_and_cancel),
        cmocka_unit_test (test_duplicates_past_the_cap_as_digests),
        cmocka_unit_test (test_async_commit_keeps_what_changed_in_flight),
        cmocka_unit_test (test_async_commit_full_map_falls_back),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
