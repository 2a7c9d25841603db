/*  tests/unit/test_store.c: the LMDB store. */
#include "support.h"
#include "digest.h"
#include "cpb.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char *dir;
    ak_store_t *store;
} s_fixture_t;

static ak_store_opts_t s_opts = { .map_size = 0, .no_sync = true };

static int s_setup (void **state)
{
    s_fixture_t *f = calloc (1, sizeof *f);
    char *tmp = ak_test_tmpdir ("store");
    if (!f || !tmp)
        return -1;
    f->dir = ak_path_join (tmp, "db");       /* a directory open creates */
    free (tmp);
    ak_err_t err;
    if (ak_store_open (f->dir, &s_opts, &f->store, &err) != 0) {
        fprintf (stderr, "open: %s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}

static int s_teardown (void **state)
{
    s_fixture_t *f = *state;
    ak_store_destroy (&f->store);
    ak_store_destroy (&f->store);
    char *parent = ak_dirname (f->dir);
    ak_test_rmtree (parent);
    free (parent);
    free (f->dir);
    free (f);
    return 0;
}

static void s_reopen (s_fixture_t *f)
{
    ak_err_t err;
    ak_store_destroy (&f->store);
    int rc = ak_store_open (f->dir, &s_opts, &f->store, &err);
    if (rc)
        fail_msg ("reopen: %s", err.msg);
}

/* ---------------------------------------------------------------- tests */

static void test_open_layout (void **state)
{
    s_fixture_t *f = *state;
    struct stat st;
    assert_int_equal (stat (f->dir, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0700);
    char *data = ak_path_join (f->dir, "data.mdb");
    assert_int_equal (stat (data, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0600);
    free (data);
    uint32_t version = 0;
    assert_int_equal (ak_store_schema_version (f->store, &version), 0);
    assert_int_equal (version, AK_STORE_SCHEMA_VERSION);
    assert_true (ak_store_map_size (f->store) >= AK_STORE_DEFAULT_MAP);

    ak_err_t err;
    ak_store_t *bad = NULL;
    assert_int_equal (ak_store_open ("/proc/self/nonexistent/db", &s_opts, &bad, &err), AK_EIO);
    assert_null (bad);
    assert_int_equal (ak_store_open (NULL, &s_opts, &bad, &err), AK_EINVAL);
}

static void test_raw (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put (txn, AK_DB_ATTEMPTS, "B1.7#1", "R1", 2, &err), 0);
    assert_int_equal (ak_store_put (txn, AK_DB_ATTEMPTS, "B1.7#2", "", 0, &err), 0);
    void *val = NULL;
    size_t len = 0;
    assert_int_equal (ak_store_get (txn, AK_DB_ATTEMPTS, "B1.7#1", &val, &len, &err), 0);
    assert_int_equal (len, 2);
    assert_string_equal (val, "R1");
    free (val);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    assert_null (txn);

    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get (txn, AK_DB_ATTEMPTS, "B1.7#2", &val, &len, &err), 0);
    assert_int_equal (len, 0);
    free (val);
    assert_int_equal (ak_store_get (txn, AK_DB_ATTEMPTS, "nope", &val, &len, &err), AK_ENOTFOUND);
    assert_null (val);
    assert_non_null (strstr (err.msg, "'nope'"));
    assert_non_null (strstr (err.msg, "attempts"));
    /* Writes in a read transaction are refused. */
    assert_int_equal (ak_store_put (txn, AK_DB_ATTEMPTS, "x", "y", 1, &err), AK_ESTATE);
    /* Resizing with a transaction open is refused. */
    assert_int_equal (ak_store_set_map_size (f->store, 2ull << 30, &err), AK_ESTATE);
    ak_store_abort (&txn);
    assert_null (txn);
    ak_store_abort (&txn);

    /* Bad keys write nothing and leave the transaction usable. */
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    char longkey[600];
    memset (longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    assert_int_equal (ak_store_put (txn, AK_DB_META, longkey, "v", 1, &err), AK_EINVAL);
    assert_int_equal (ak_store_put (txn, AK_DB_META, "", "v", 1, &err), AK_EINVAL);
    assert_int_equal (ak_store_put (txn, AK_DB_META, NULL, "v", 1, &err), AK_EINVAL);
    assert_int_equal (ak_store_put (txn, AK_DB_COUNT, "k", "v", 1, &err), AK_EINVAL);
    assert_int_equal (ak_store_del (txn, AK_DB_ATTEMPTS, "B1.7#2", &err), 0);
    assert_int_equal (ak_store_del (txn, AK_DB_ATTEMPTS, "B1.7#2", &err), AK_ENOTFOUND);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    uint64_t count = 0;
    assert_int_equal (ak_store_count (txn, AK_DB_ATTEMPTS, &count, &err), 0);
    assert_int_equal (count, 1);
    ak_store_abort (&txn);
    assert_int_equal (ak_store_set_map_size (f->store, 2ull << 30, &err), 0);
    assert_true (ak_store_map_size (f->store) >= (2ull << 30));
}

static void test_records (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;

    Ak__Policy pol = AK__POLICY__INIT;
    pol.max_attempts = 3;
    pol.threshold = 0.03;
    pol.seed = 42;
    char *targets[] = { "h100", "h200" };
    Ak__BatchRecord batch = AK__BATCH_RECORD__INIT;
    batch.batch_id = "B1";
    batch.name = "nightly";
    batch.state = "open";
    batch.n_targets = 2;
    batch.targets = targets;
    batch.policy = &pol;
    batch.ntasks = 12;

    Ak__Param param = AK__PARAM__INIT;
    param.name = "BLOCK";
    param.value = 256;
    Ak__Param *params[] = { &param };
    Ak__TaskRecord task = AK__TASK_RECORD__INIT;
    task.task_id = "B1.7";
    task.batch_id = "B1";
    task.state = "queued";
    task.attempt = 1;
    task.n_params = 1;
    task.params = params;
    task.queued_ms = 1796063473123ull;

    Ak__Device dev = AK__DEVICE__INIT;
    dev.name = "H200";
    dev.cc_major = 9;
    Ak__Receipt rec = AK__RECEIPT__INIT;
    rec.receipt_id = "R1";
    rec.task_id = "B1.7";
    rec.status = "ok";
    rec.device = &dev;
    rec.compile_ms = 12.5;

    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = "w1";
    hello.host = "node-1";
    Ak__WorkerRecord worker = AK__WORKER_RECORD__INIT;
    worker.hello = &hello;
    worker.state = "alive";
    worker.tasks_done = 5;

    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_batch (txn, &batch, &err), 0);
    assert_int_equal (ak_store_put_task (txn, &task, &err), 0);
    assert_int_equal (ak_store_put_receipt (txn, &rec, &err), 0);
    assert_int_equal (ak_store_put_worker (txn, &worker, &err), 0);
    /* Receipts are never overwritten; the refusal leaves the txn usable. */
    rec.status = "wrong_answer";
    assert_int_equal (ak_store_put_receipt (txn, &rec, &err), AK_EEXIST);
    assert_non_null (strstr (err.msg, "R1"));
    /* Records without ids are refused. */
    Ak__TaskRecord noid = AK__TASK_RECORD__INIT;
    assert_int_equal (ak_store_put_task (txn, &noid, &err), AK_EINVAL);
    Ak__WorkerRecord nohello = AK__WORKER_RECORD__INIT;
    assert_int_equal (ak_store_put_worker (txn, &nohello, &err), AK_EINVAL);
    assert_int_equal (ak_store_put_task (txn, NULL, &err), AK_EINVAL);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    /* Task records are overwritten by later state. */
    task.state = "leased";
    task.worker_id = "w1";
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task (txn, &task, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    s_reopen (f);
    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    Ak__BatchRecord *b = NULL;
    assert_int_equal (ak_store_get_batch (txn, "B1", &b, &err), 0);
    assert_string_equal (b->name, "nightly");
    assert_int_equal (b->n_targets, 2);
    assert_string_equal (b->targets[1], "h200");
    assert_true (b->policy->threshold == 0.03);
    assert_int_equal (b->ntasks, 12);
    ak__batch_record__free_unpacked (b, NULL);

    Ak__TaskRecord *t = NULL;
    assert_int_equal (ak_store_get_task (txn, "B1.7", &t, &err), 0);
    assert_string_equal (t->state, "leased");
    assert_string_equal (t->worker_id, "w1");
    assert_int_equal (t->params[0]->value, 256);
    assert_true (t->queued_ms == 1796063473123ull);
    ak__task_record__free_unpacked (t, NULL);

    Ak__Receipt *r = NULL;
    assert_int_equal (ak_store_get_receipt (txn, "R1", &r, &err), 0);
    assert_string_equal (r->status, "ok");
    assert_int_equal (r->device->cc_major, 9);
    assert_true (r->compile_ms == 12.5);
    ak__receipt__free_unpacked (r, NULL);

    Ak__WorkerRecord *w = NULL;
    assert_int_equal (ak_store_get_worker (txn, "w1", &w, &err), 0);
    assert_string_equal (w->hello->host, "node-1");
    assert_int_equal (w->tasks_done, 5);
    ak__worker_record__free_unpacked (w, NULL);

    assert_int_equal (ak_store_get_task (txn, "B9.9", &t, &err), AK_ENOTFOUND);
    assert_null (t);
    ak_store_abort (&txn);

    /* A value that does not decode is AK_ESTORE naming the key. */
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put (txn, AK_DB_TASKS, "B1.8", "\xff\xff\xff", 3, &err), 0);
    assert_int_equal (ak_store_get_task (txn, "B1.8", &t, &err), AK_ESTORE);
    assert_null (t);
    assert_non_null (strstr (err.msg, "B1.8"));
    ak_store_abort (&txn);
}

/* The record as protobuf-c packs it in field order: two records are equal
   when these bytes are. */
static void s_task_bytes (const Ak__TaskRecord *t, uint8_t **data, size_t *len)
{
    *len = ak__task_record__get_packed_size (t);
    *data = malloc (*len ? *len : 1);
    assert_non_null (*data);
    assert_int_equal (ak__task_record__pack (t, *data), *len);
}

static void s_assert_task_stored (s_fixture_t *f, const Ak__TaskRecord *want)
{
    ak_err_t err;
    ak_txn_t *txn = NULL;
    Ak__TaskRecord *got = NULL;
    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_task (txn, want->task_id, &got, &err), 0);
    ak_store_abort (&txn);
    uint8_t *a, *b;
    size_t alen, blen;
    s_task_bytes (want, &a, &alen);
    s_task_bytes (got, &b, &blen);
    assert_int_equal (alen, blen);
    assert_memory_equal (a, b, alen);
    free (a);
    free (b);
    ak__task_record__free_unpacked (got, NULL);
}

/* put_task_later with a cached definition: the definition is packed once,
   each write adds the state as it is, and what is read back is the whole
   record, state fields set, changed and cleared alike. */
static void test_task_def_split (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;

    Ak__Param p1 = AK__PARAM__INIT, p2 = AK__PARAM__INIT;
    p1.name = "BLOCK";
    p1.value = 256;
    p2.name = "ROWS";
    p2.value = 4;
    Ak__Param *params[] = { &p1, &p2 };
    int64_t dims[] = { 4096, 8192 };
    Ak__Workload wl = AK__WORKLOAD__INIT;
    wl.name = "llm";
    wl.n_dims = 2;
    wl.dims = dims;
    wl.dtype = "bfloat16";
    wl.weight = 0.5;
    Ak__Workload *wls[] = { &wl };
    Ak__Policy pol = AK__POLICY__INIT;
    pol.max_attempts = 3;
    pol.lease_ms = 60000;
    Ak__VerifyRef vr = AK__VERIFY_REF__INIT;
    vr.profile = "nightly";
    vr.speedup = 1.25;

    Ak__TaskRecord task = AK__TASK_RECORD__INIT;
    task.task_id = "B1.42";
    task.batch_id = "B1";
    task.kind = "tune";
    task.op = "softmax";
    task.device_class = "h200";
    task.candidate_name = "row_warp";
    task.n_params = 2;
    task.params = params;
    task.spec_digest = "sha256:aa";
    task.candidate_digest = "sha256:bb";
    task.n_workloads = 1;
    task.workloads = wls;
    task.policy = &pol;
    task.stage = 2;
    task.avoid_worker = "w0";
    task.verify = &vr;
    /* state: leased */
    task.state = "leased";
    task.attempt = 1;
    task.worker_id = "w1";
    task.queued_ms = 1000;
    task.leased_ms = 2000;

    ak_task_def_t def = { 0 };
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task_later (txn, &task, &def, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    assert_true (def.packed);
    void *packed_once = def.data;
    s_assert_task_stored (f, &task);

    /* done, in a later commit: the state changes, the definition is reused */
    task.state = "done";
    task.receipt_id = "R9";
    task.status = "ok";
    task.finished_ms = 3000;
    task.duplicates = 2;
    task.last_error = "lease expired once";
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task_later (txn, &task, &def, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    assert_ptr_equal (def.data, packed_once);
    s_assert_task_stored (f, &task);

    /* reopened (retry): state fields go back to empty and zero */
    task.state = "queued";
    task.attempt = 2;
    task.attempt_base = 1;
    task.receipt_id = "";
    task.status = "";
    task.worker_id = "";
    task.leased_ms = 0;
    task.finished_ms = 0;
    task.last_error = "";
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task_later (txn, &task, &def, &err), 0);
    /* a read in the same transaction sees the deferred write */
    Ak__TaskRecord *mid = NULL;
    assert_int_equal (ak_store_get_task (txn, "B1.42", &mid, &err), 0);
    assert_string_equal (mid->state, "queued");
    assert_string_equal (mid->worker_id, "");
    assert_string_equal (mid->op, "softmax");
    ak__task_record__free_unpacked (mid, NULL);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    s_assert_task_stored (f, &task);
    s_reopen (f);
    s_assert_task_stored (f, &task);
    ak_task_def_clear (&def);
    assert_null (def.data);
    assert_false (def.packed);

    /* the stored bytes as the definition (get_task_def): they hold the
       old state, which the explicit state fields override, zeros and
       empty strings included */
    ak_task_def_t raw = { 0 };
    Ak__TaskRecord *cached = NULL;
    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_task_def (txn, "B1.42", &cached, &raw, &err), 0);
    ak_store_abort (&txn);
    assert_true (raw.packed);
    assert_string_equal (cached->state, "queued");
    ak_cpb_set (&cached->state, "leased");
    ak_cpb_set (&cached->worker_id, "w7");
    cached->attempt = 3;
    cached->leased_ms = 5000;
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task_later (txn, cached, &raw, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    s_assert_task_stored (f, cached);
    ak_cpb_set (&cached->state, "failed");
    ak_cpb_set (&cached->worker_id, "");
    cached->leased_ms = 0;
    cached->duplicates = 0;
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task_later (txn, cached, &raw, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    s_assert_task_stored (f, cached);
    ak__task_record__free_unpacked (cached, NULL);
    ak_task_def_clear (&raw);
    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_task_def (txn, "B9.9", &cached, &raw, &err), AK_ENOTFOUND);
    ak_store_abort (&txn);
    assert_null (cached);
    assert_false (raw.packed);

#ifndef NDEBUG
    /* debug builds refuse a definition field changed under a cached def */
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task_later (txn, &task, &def, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    fflush (NULL);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        task.op = "layernorm";
        ak_txn_t *t2 = NULL;
        if (ak_store_begin (f->store, true, &t2, &err) == 0
            && ak_store_put_task_later (t2, &task, &def, &err) == 0)
            (void) ak_store_commit (&t2, &err);
        _exit (0);
    }
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT);
    ak_task_def_clear (&def);
#endif
}

static void test_schema_version (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;
    s_reopen (f);
    uint32_t version = 0;
    assert_int_equal (ak_store_schema_version (f->store, &version), 0);
    assert_int_equal (version, AK_STORE_SCHEMA_VERSION);

    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put (txn, AK_DB_META, "schema_version", "7", 1, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    ak_store_destroy (&f->store);

    assert_int_equal (ak_store_open (f->dir, &s_opts, &f->store, &err), AK_EVERSION);
    assert_null (f->store);
    char expect[1200];
    snprintf (expect, sizeof expect, "store %s: schema version 7, this build reads %d",
              f->dir, AK_STORE_SCHEMA_VERSION);
    assert_string_equal (err.msg, expect);

    /* A damaged version is refused too. */
    ak_test_rmtree (f->dir);
    s_reopen (f);
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put (txn, AK_DB_META, "schema_version", "one", 3, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    ak_store_destroy (&f->store);
    assert_int_equal (ak_store_open (f->dir, &s_opts, &f->store, &err), AK_EVERSION);
    assert_non_null (strstr (err.msg, "'one'"));

    /* A fresh store gets the current version. */
    ak_test_rmtree (f->dir);
    s_reopen (f);
    assert_int_equal (ak_store_schema_version (f->store, &version), 0);
    assert_int_equal (version, AK_STORE_SCHEMA_VERSION);
}

static void test_next_id (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;
    uint64_t v = 0, last = 0;
    for (int round = 0; round < 3; round++) {
        assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
        for (int i = 0; i < 5; i++) {
            assert_int_equal (ak_store_next_id (txn, "batch", &v, &err), 0);
            assert_true (v == last + 1);
            last = v;
        }
        assert_int_equal (ak_store_commit (&txn, &err), 0);
        s_reopen (f);
    }
    assert_int_equal (last, 15);
    /* An aborted increment is not kept. */
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_next_id (txn, "batch", &v, &err), 0);
    ak_store_abort (&txn);
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_next_id (txn, "batch", &v, &err), 0);
    assert_int_equal (v, 16);
    /* Counters are independent, and "next.X" names the same counter as "X". */
    assert_int_equal (ak_store_next_id (txn, "receipt", &v, &err), 0);
    assert_int_equal (v, 1);
    assert_int_equal (ak_store_next_id (txn, "next.receipt", &v, &err), 0);
    assert_int_equal (v, 2);
    void *val = NULL;
    size_t len = 0;
    assert_int_equal (ak_store_get (txn, AK_DB_META, "next.batch", &val, &len, &err), 0);
    assert_string_equal (val, "16");
    free (val);
    /* A damaged counter is an error, not a reset. */
    assert_int_equal (ak_store_put (txn, AK_DB_META, "next.bad", "12x", 3, &err), 0);
    assert_int_equal (ak_store_next_id (txn, "bad", &v, &err), AK_ESTORE);
    assert_int_equal (ak_store_next_id (txn, "", &v, &err), AK_EINVAL);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    /* Raised in memory within a transaction, written once: every read,
       walk and count of meta sees the latest value, a put of the counter
       itself wins over the earlier raises, and more counters than a
       transaction keeps still count right. */
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal (ak_store_next_id (txn, "receipt", &v, &err), 0);
    assert_int_equal (v, 5);
    assert_int_equal (ak_store_get (txn, AK_DB_META, "next.receipt", &val, &len, &err), 0);
    assert_string_equal (val, "5");
    free (val);
    assert_int_equal (ak_store_next_id (txn, "receipt", &v, &err), 0);
    assert_int_equal (v, 6);
    assert_int_equal (ak_store_put (txn, AK_DB_META, "next.receipt", "40", 2, &err), 0);
    assert_int_equal (ak_store_next_id (txn, "receipt", &v, &err), 0);
    assert_int_equal (v, 41);
    const char *names[] = { "c1", "c2", "c3", "c4", "c5", "c6" };
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < 6; i++) {
            assert_int_equal (ak_store_next_id (txn, names[i], &v, &err), 0);
            assert_int_equal (v, (uint64_t) round + 1);
        }
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    s_reopen (f);
    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get (txn, AK_DB_META, "next.receipt", &val, &len, &err), 0);
    assert_string_equal (val, "41");
    free (val);
    assert_int_equal (ak_store_get (txn, AK_DB_META, "next.c6", &val, &len, &err), 0);
    assert_string_equal (val, "2");
    free (val);
    ak_store_abort (&txn);
}

static void test_blobs (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;
    char d1[65], d2[65], d3[65];
    const char *src = "__global__ void k() {}";
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_blob (txn, src, strlen (src), d1, &err), 0);
    assert_int_equal (ak_store_put_blob (txn, src, strlen (src), d2, &err), 0);
    assert_int_equal (ak_store_put_blob (txn, "", 0, d3, &err), 0);
    assert_string_equal (d1, d2);
    char expect[65];
    ak_sha256_hex (src, strlen (src), expect);
    assert_string_equal (d1, expect);
    uint64_t count = 0;
    assert_int_equal (ak_store_count (txn, AK_DB_BLOBS, &count, &err), 0);
    assert_int_equal (count, 2);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal (ak_store_get_blob (txn, d1, &data, &len, &err), 0);
    assert_int_equal (len, strlen (src));
    assert_string_equal (data, src);
    free (data);
    assert_int_equal (ak_store_get_blob (txn, d3, &data, &len, &err), 0);
    assert_int_equal (len, 0);
    free (data);
    assert_int_equal (ak_store_get_blob (txn, "abc", &data, &len, &err), AK_EINVAL);
    assert_int_equal (ak_store_get_blob (txn, NULL, &data, &len, &err), AK_EINVAL);
    ak_sha256_hex ("other", 5, expect);
    assert_int_equal (ak_store_get_blob (txn, expect, &data, &len, &err), AK_ENOTFOUND);
    ak_store_abort (&txn);

    /* Damaged content (bytes that do not match their key) is detected. */
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put (txn, AK_DB_BLOBS, expect, "tampered", 8, &err), 0);
    assert_int_equal (ak_store_get_blob (txn, expect, &data, &len, &err), AK_ESTORE);
    assert_null (data);
    ak_store_abort (&txn);
}

typedef struct {
    int n;
    char keys[8][32];
    int stop_at;
} s_walk_t;

static int s_walk_fn (const char *key, const void *val, size_t len, void *arg)
{
    s_walk_t *w = arg;
    (void) val;
    (void) len;
    if (w->n < 8)
        snprintf (w->keys[w->n], sizeof w->keys[0], "%s", key);
    w->n++;
    return w->stop_at && w->n == w->stop_at ? 42 : 0;
}

static void test_walk_count (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;
    const char *ids[] = { "B2.1", "B1.2", "B1.1", "B10.1", "B1.3", "A9" };
    assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
    for (int i = 0; i < 6; i++) {
        Ak__TaskRecord t = AK__TASK_RECORD__INIT;
        t.task_id = (char *) ids[i];
        t.state = "queued";
        assert_int_equal (ak_store_put_task (txn, &t, &err), 0);
    }
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    s_walk_t w = { 0 };
    assert_int_equal (ak_store_walk (txn, AK_DB_TASKS, "B1.", s_walk_fn, &w, &err), 0);
    assert_int_equal (w.n, 3);
    assert_string_equal (w.keys[0], "B1.1");
    assert_string_equal (w.keys[1], "B1.2");
    assert_string_equal (w.keys[2], "B1.3");

    memset (&w, 0, sizeof w);
    assert_int_equal (ak_store_walk (txn, AK_DB_TASKS, "", s_walk_fn, &w, &err), 0);
    assert_int_equal (w.n, 6);
    assert_string_equal (w.keys[0], "A9");
    assert_string_equal (w.keys[5], "B2.1");

    memset (&w, 0, sizeof w);
    assert_int_equal (ak_store_walk (txn, AK_DB_TASKS, NULL, s_walk_fn, &w, &err), 0);
    assert_int_equal (w.n, 6);

    memset (&w, 0, sizeof w);
    assert_int_equal (ak_store_walk (txn, AK_DB_TASKS, "C", s_walk_fn, &w, &err), 0);
    assert_int_equal (w.n, 0);
    assert_int_equal (ak_store_walk (txn, AK_DB_PROFILES, "", s_walk_fn, &w, &err), 0);
    assert_int_equal (w.n, 0);

    memset (&w, 0, sizeof w);
    w.stop_at = 2;
    assert_int_equal (ak_store_walk (txn, AK_DB_TASKS, "B", s_walk_fn, &w, &err), 42);
    assert_int_equal (w.n, 2);

    uint64_t count = 0;
    assert_int_equal (ak_store_count (txn, AK_DB_TASKS, &count, &err), 0);
    assert_int_equal (count, 6);
    assert_int_equal (ak_store_count (txn, AK_DB_WORKERS, &count, &err), 0);
    assert_int_equal (count, 0);
    ak_store_abort (&txn);
}

/* Which write errors are the store's disk running full (AK_ENOSPACE):
   what LMDB returns for a short write (EIO) is when little space is left
   or a file size limit below the map is in force, never otherwise. */
static void test_space_reason (void **state)
{
    char why[200] = "untouched";
    const uint64_t none = UINT64_MAX, plenty = 100ull << 30, map = 1ull << 30;
    assert_true (ak_store_space_reason (ENOSPC, plenty, none, map, why, sizeof why));
    assert_non_null (strstr (why, "no space left on device"));
    assert_true (ak_store_space_reason (EIO, 12 << 10, none, map, why, sizeof why));
    assert_string_equal (why, "no space left on device (12 KiB free)");
    assert_true (ak_store_space_reason (EDQUOT, plenty, none, map, why, sizeof why));
    assert_non_null (strstr (why, "quota"));
    assert_true (ak_store_space_reason (EIO, plenty, 512 << 10, map, why, sizeof why));
    assert_non_null (strstr (why, "file size limit"));
    assert_non_null (strstr (why, "512 KiB"));
    assert_true (ak_store_space_reason (EFBIG, plenty, 512 << 10, map, why, sizeof why));
    assert_non_null (strstr (why, "file size limit"));
    assert_true (ak_store_space_reason (EFBIG, plenty, none, map, why, sizeof why));
    assert_non_null (strstr (why, "file too large"));
    /* a genuine I/O error, or any other, is not "full" */
    strcpy (why, "untouched");
    assert_false (ak_store_space_reason (EIO, plenty, none, map, why, sizeof why));
    assert_false (ak_store_space_reason (EIO, plenty, 2 * map, map, why, sizeof why));
    assert_false (ak_store_space_reason (EACCES, 0, none, map, why, sizeof why));
    assert_false (ak_store_space_reason (-30795 /* MDB_PANIC */, 0, 0, map, why, sizeof why));
    assert_string_equal (why, "untouched");
}

static void test_map_full (void **state)
{
    s_fixture_t *f = *state;
    ak_err_t err;
    ak_txn_t *txn = NULL;
    ak_store_destroy (&f->store);
    ak_test_rmtree (f->dir);
    ak_store_opts_t small = { .map_size = 1 << 20, .no_sync = true };
    assert_int_equal (ak_store_open (f->dir, &small, &f->store, &err), 0);

    /* 16 KiB distinct blobs, one per committed transaction, until full. */
    size_t chunk = 16 * 1024;
    char *buf = malloc (chunk);
    char digests[200][65];
    int committed = 0, full = 0;
    for (int i = 0; i < 200 && !full; i++) {
        memset (buf, 'a' + i % 26, chunk);
        snprintf (buf, chunk, "blob %d", i);
        assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
        int rc = ak_store_put_blob (txn, buf, chunk, digests[i], &err);
        if (rc == 0) {
            rc = ak_store_commit (&txn, &err);
            if (rc == 0) {
                committed++;
                continue;
            }
            assert_int_equal (rc, AK_ESTOREFULL);
            full = 1;
            continue;
        }
        assert_int_equal (rc, AK_ESTOREFULL);
        assert_non_null (strstr (err.msg, "grow the map"));
        /* The transaction is poisoned: further use and the commit fail. */
        uint64_t count;
        assert_int_equal (ak_store_count (txn, AK_DB_BLOBS, &count, &err), AK_ESTOREFULL);
        assert_int_equal (ak_store_commit (&txn, &err), AK_ESTOREFULL);
        assert_null (txn);
        full = 1;
    }
    assert_true (full);
    assert_true (committed > 10);

    /* Everything committed before is intact. */
    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    uint64_t count = 0;
    assert_int_equal (ak_store_count (txn, AK_DB_BLOBS, &count, &err), 0);
    assert_int_equal (count, (uint64_t) committed);
    for (int i = 0; i < committed; i++) {
        char *data = NULL;
        size_t len = 0;
        assert_int_equal (ak_store_get_blob (txn, digests[i], &data, &len, &err), 0);
        assert_int_equal (len, chunk);
        free (data);
    }
    ak_store_abort (&txn);

    /* Grow and continue. */
    assert_int_equal (ak_store_set_map_size (f->store, 8 << 20, &err), 0);
    for (int i = 0; i < 20; i++) {
        memset (buf, 'A' + i % 26, chunk);
        snprintf (buf, chunk, "more %d", i);
        char d[65];
        assert_int_equal (ak_store_begin (f->store, true, &txn, &err), 0);
        assert_int_equal (ak_store_put_blob (txn, buf, chunk, d, &err), 0);
        assert_int_equal (ak_store_commit (&txn, &err), 0);
    }
    assert_int_equal (ak_store_begin (f->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_count (txn, AK_DB_BLOBS, &count, &err), 0);
    assert_int_equal (count, (uint64_t) committed + 20);
    ak_store_abort (&txn);
    free (buf);

    /* The grown size persists across reopen with the small option. */
    s_opts.map_size = 1 << 20;
    s_reopen (f);
    s_opts.map_size = 0;
    assert_true (ak_store_map_size (f->store) >= (8u << 20));
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_open_layout, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_raw, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_records, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_task_def_split, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_schema_version, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_next_id, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_blobs, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_walk_count, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_map_full, s_setup, s_teardown),
        cmocka_unit_test (test_space_reason),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
