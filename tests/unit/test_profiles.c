/*  tests/unit/test_profiles.c: coordinator/profiles.c on a temporary store
    with synthetic batches: what install records, the replace and refusal
    rules, other classes left alone, export/import round trips and the
    import checks, TMA tensor maps through export and import; vendor entries (the vendor-library baseline kept: the
    fixture's batches are written as a CUDA worker leaves them, so no GPU
    is needed) and the checks of malformed ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "coordinator/profiles.h"
#include "coordinator/registry.h"
#include "coordinator/verify.h"
#include "cpb.h"
#include "spec.h"
#include "util.h"

#define S_CLASS_A "NVIDIA_H200/sm_90/drv580/nvrtc13.0"
#define S_CLASS_B "NVIDIA_B200/sm_100/drv580/nvrtc13.0"

typedef struct {
    char       *dir;
    ak_store_t *store;
    char        spec_digest[65], src_digest[65];
} s_fx_t;

/*  The catalog spec of op and the source of its candidate cand as blobs
    in store (a batch's tasks name them by these digests). */
static void s_store_spec (ak_store_t *store, const char *op, const char *cand_name, char *spec_digest,
                          char *src_digest)
{
    ak_err_t err = { 0 };
    char *rel = ak_sprintf ("kernels/%s/spec.json", op), *spec_path = ak_test_src (rel);
    ak_spec_t *spec = NULL;
    assert_int_equal (ak_spec_load (spec_path, &spec, &err), 0);
    free (spec_path);
    free (rel);
    char *text = ak_spec_to_text (spec, false);
    const ak_candidate_t *cand = ak_spec_candidate (spec, cand_name);
    assert_non_null (cand);
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_blob (txn, text, strlen (text), spec_digest, &err), 0);
    assert_int_equal (ak_store_put_blob (txn, cand->source.text, strlen (cand->source.text), src_digest, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    free (text);
    ak_spec_destroy (&spec);
}

static int s_setup (void **state)
{
    s_fx_t *fx = calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("profiles");
    ak_err_t err = { 0 };
    ak_store_opts_t opts = { .no_sync = true };
    char *path = ak_path_join (fx->dir, "store");
    assert_int_equal (ak_store_open (path, &opts, &fx->store, &err), 0);
    free (path);
    s_store_spec (fx->store, "softmax", "warp_row", fx->spec_digest, fx->src_digest);
    *state = fx;
    return 0;
}

static int s_teardown (void **state)
{
    s_fx_t *fx = *state;
    ak_store_destroy (&fx->store);
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    free (fx);
    return 0;
}

static Ak__Workload *s_workload (const char *name, int64_t rows, int64_t cols)
{
    Ak__Workload *w = ak_malloc (sizeof *w);
    ak__workload__init (w);
    ak_cpb_set (&w->name, name);
    w->dims = ak_malloc (2 * sizeof *w->dims);
    w->dims[0] = rows;
    w->dims[1] = cols;
    w->n_dims = 2;
    ak_cpb_set (&w->dtype, "float32");
    w->weight = 1;
    return w;
}

/* A done cuda tune task of op on cls whose accepted receipt is rid, with
   two timings' room: the caller adds params, workloads and digests. */
static Ak__TaskRecord *s_task (const char *task_id, const char *batch_id, const char *op, const char *cls,
                               const char *candidate, const char *rid, const char *status)
{
    Ak__TaskRecord *t = ak_malloc (sizeof *t);
    ak__task_record__init (t);
    ak_cpb_set (&t->task_id, task_id);
    ak_cpb_set (&t->batch_id, batch_id);
    ak_cpb_set (&t->state, "done");
    ak_cpb_set (&t->kind, "tune");
    ak_cpb_set (&t->op, op);
    ak_cpb_set (&t->device_class, cls);
    ak_cpb_set (&t->backend, "cuda");
    ak_cpb_set (&t->candidate_name, candidate);
    ak_cpb_set (&t->receipt_id, rid);
    ak_cpb_set (&t->status, status);
    return t;
}

/* Receipt rid of task t from worker w1 on device (name, cc_major), room
   for two timings. */
static Ak__Receipt *s_receipt (const Ak__TaskRecord *t, const char *rid, const char *status, const char *device,
                               uint32_t cc_major)
{
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    ak_cpb_set (&r->receipt_id, rid);
    ak_cpb_set (&r->task_id, t->task_id);
    ak_cpb_set (&r->batch_id, t->batch_id);
    ak_cpb_set (&r->status, status);
    ak_cpb_set (&r->worker_id, "w1");
    r->device = ak_malloc (sizeof *r->device);
    ak__device__init (r->device);
    ak_cpb_set (&r->device->name, device);
    r->device->cc_major = cc_major;
    ak_cpb_set (&r->device->driver_version, "580.65.06");
    ak_cpb_set (&r->device->nvrtc_version, "13.0");
    r->timings = ak_calloc (2, sizeof *r->timings);
    return r;
}

/* Writes a complete batch with one tune task per class in classes[] (the
   winner promoted where promoted[i]) with ROWS=rows_param, and its receipts. */
static void s_batch (s_fx_t *fx, const char *batch_id, const char *state, const char *const *classes,
                     const bool *promoted, size_t n, int64_t rows_param, uint64_t *next_receipt)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    Ak__BatchRecord b = AK__BATCH_RECORD__INIT;
    b.batch_id = (char *) batch_id;
    b.name = (char *) "t";
    b.state = (char *) state;
    Ak__Winner **winners = calloc (n, sizeof *winners);
    for (size_t i = 0; i < n; i++) {
        char task_id[32], rid[32];
        snprintf (task_id, sizeof task_id, "%s.%04zu", batch_id, i + 1);
        snprintf (rid, sizeof rid, "R%08llu", (unsigned long long) ++*next_receipt);
        Ak__TaskRecord *t = s_task (task_id, batch_id, "softmax", classes[i], "warp_row", rid, "ok");
        const char *names[2] = { "ROWS", "VEC" };
        int64_t values[2] = { rows_param, 1 };
        t->params = ak_cpb_params_new (names, values, 2);
        t->n_params = 2;
        ak_cpb_set (&t->spec_digest, fx->spec_digest);
        ak_cpb_set (&t->candidate_digest, fx->src_digest);
        ak_cpb_set (&t->candidate_source_name, "warp_row.cu");
        t->workloads = ak_malloc (2 * sizeof *t->workloads);
        t->workloads[0] = s_workload ("small", 32, 128);
        t->workloads[1] = s_workload ("medium", 128, 512);
        t->n_workloads = 2;
        assert_int_equal (ak_store_put_task (txn, t, &err), 0);

        Ak__Receipt *r = s_receipt (t, rid, "ok", i ? "NVIDIA B200" : "NVIDIA H200", i ? 10 : 9);
        for (int k = 0; k < 2; k++) {
            Ak__WorkloadTiming *wt = ak_malloc (sizeof *wt);
            ak__workload_timing__init (wt);
            wt->workload = (Ak__Workload *) ak_cpb_dup ((ProtobufCMessage *) t->workloads[k]);
            wt->speedup = 1.5 + k;
            wt->speedup_noise = 0.02;
            r->timings[r->n_timings++] = wt;
        }
        assert_int_equal (ak_store_put_receipt (txn, r, &err), 0);
        ak__receipt__free_unpacked (r, NULL);
        ak__task_record__free_unpacked (t, NULL);

        Ak__Winner *w = ak_malloc (sizeof *w);
        ak__winner__init (w);
        ak_cpb_set (&w->op, "softmax");
        ak_cpb_set (&w->device_class, classes[i]);
        w->promoted = promoted[i];
        ak_cpb_set (&w->task_id, task_id);
        ak_cpb_set (&w->receipt_id, rid);
        ak_cpb_set (&w->candidate_name, "warp_row");
        w->speedup = promoted[i] ? 2.0 : 1.01;
        w->noise = 0.02;
        if (!promoted[i])
            ak_cpb_set (&w->reason, "best candidate warp_row: 1.01x +- 0.02, below the 3% threshold");
        winners[i] = w;
    }
    b.winners = winners;
    b.n_winners = n;
    assert_int_equal (ak_store_put_batch (txn, &b, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    for (size_t i = 0; i < n; i++)
        ak__winner__free_unpacked (winners[i], NULL);
    free (winners);
}

/* An install as `--unconfirmed` allows (the fixture's winners have no
   confirmation unless s_confirm gives them one); s_install_strict: as a
   plain install, only winners another worker confirmed. */
static int s_install_as (s_fx_t *fx, const char *batch, const char *name, bool replace, bool unconfirmed,
                         json_t **out, ak_err_t *err)
{
    ak_txn_t *txn = NULL;
    *out = NULL;
    assert_int_equal (ak_store_begin (fx->store, true, &txn, err), 0);
    int rc = ak_profiles_install (txn, batch, name, replace, unconfirmed, 1000, out, err);
    if (rc == 0)
        assert_int_equal (ak_store_commit (&txn, err), 0);
    ak_store_abort (&txn);
    return rc;
}

static int s_install (s_fx_t *fx, const char *batch, const char *name, bool replace, json_t **out, ak_err_t *err)
{
    return s_install_as (fx, batch, name, replace, true, out, err);
}

static int s_install_strict (s_fx_t *fx, const char *batch, const char *name, json_t **out, ak_err_t *err)
{
    return s_install_as (fx, batch, name, false, false, out, err);
}

static json_t *s_show (s_fx_t *fx, const char *name)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    json_t *out = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    int rc = ak_profiles_show (txn, name, &out, &err);
    ak_store_abort (&txn);
    return rc == 0 ? out : NULL;
}

/* The element of array a whose string field is value, or NULL. */
static json_t *s_find (json_t *a, const char *field, const char *value)
{
    size_t i;
    json_t *x;
    json_array_foreach (a, i, x)
        if (strcmp (json_string_value (json_object_get (x, field)), value) == 0)
            return x;
    return NULL;
}

static json_t *s_class (json_t *profile, const char *cls)
{
    return s_find (json_object_get (profile, "classes"), "device_class", cls);
}

static void test_install_records_promoted_only (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[2] = { S_CLASS_A, S_CLASS_B };
    bool promoted[2] = { true, false };
    s_batch (fx, "B000001", "complete", classes, promoted, 2, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);
    json_t *skipped = json_object_get (out, "skipped");
    assert_int_equal (json_array_size (skipped), 1);
    assert_string_equal (json_string_value (json_object_get (json_array_get (skipped, 0), "device_class")), S_CLASS_B);
    assert_non_null (strstr (json_string_value (json_object_get (json_array_get (skipped, 0), "reason")), "threshold"));
    json_decref (out);

    json_t *p = s_show (fx, "prod");
    assert_non_null (p);
    assert_int_equal (json_array_size (json_object_get (p, "classes")), 1);
    json_t *c = s_class (p, S_CLASS_A);
    assert_non_null (c);
    json_t *dev = json_object_get (c, "device");
    assert_string_equal (json_string_value (json_object_get (dev, "name")), "NVIDIA H200");
    assert_int_equal (json_integer_value (json_object_get (dev, "cc_major")), 9);
    assert_int_equal (json_integer_value (json_object_get (dev, "driver_major")), 580);
    assert_string_equal (json_string_value (json_object_get (dev, "nvrtc_version")), "13.0");
    json_t *e = json_array_get (json_object_get (c, "entries"), 0);
    assert_string_equal (json_string_value (json_object_get (e, "key")), "softmax/rows=32,cols=128/float32");
    assert_string_equal (json_string_value (json_object_get (json_object_get (e, "source"), "digest")), fx->src_digest);
    /* launch: grid (rows+ROWS-1)/ROWS = 16, block 32 x ROWS */
    json_t *l = json_object_get (e, "launch");
    assert_int_equal (json_integer_value (json_array_get (json_object_get (l, "grid"), 0)), 16);
    assert_int_equal (json_integer_value (json_array_get (json_object_get (l, "block"), 0)), 32);
    assert_int_equal (json_integer_value (json_array_get (json_object_get (l, "block"), 1)), 2);
    assert_int_equal (json_integer_value (json_object_get (json_array_get (json_object_get (e, "inputs"), 0), "count")), 32 * 128);
    assert_true (json_number_value (json_object_get (e, "speedup")) > 1.49);
    json_t *ev = json_object_get (e, "evidence");
    assert_string_equal (json_string_value (json_array_get (ev, 0)), "R00000001");
    json_decref (p);
}

/* Adds to batch_id a done confirm task of its tune task number i (from 0),
   whose receipt rid, from worker `worker`, measured scale x the tune
   receipt's figures, and makes the batch's winner i report figures_rid's
   figures (rounds.h). */
static void s_confirm (s_fx_t *fx, const char *batch_id, size_t i, const char *rid, double scale,
                       const char *figures_rid, const char *worker)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    char tune_id[32], task_id[32];
    snprintf (tune_id, sizeof tune_id, "%s.%04zu", batch_id, i + 1);
    snprintf (task_id, sizeof task_id, "%s.%04zu", batch_id, 9 - i);
    Ak__TaskRecord *tune = NULL;
    assert_int_equal (ak_store_get_task (txn, tune_id, &tune, &err), 0);
    Ak__TaskRecord *t = (Ak__TaskRecord *) ak_cpb_dup ((ProtobufCMessage *) tune);
    ak_cpb_set (&t->task_id, task_id);
    ak_cpb_set (&t->kind, "confirm");
    ak_cpb_set (&t->confirm_of, tune_id);
    ak_cpb_set (&t->receipt_id, rid);
    assert_int_equal (ak_store_put_task (txn, t, &err), 0);
    Ak__Receipt *r = NULL;
    assert_int_equal (ak_store_get_receipt (txn, tune->receipt_id, &r, &err), 0);
    ak_cpb_set (&r->receipt_id, rid);
    ak_cpb_set (&r->task_id, task_id);
    ak_cpb_set (&r->worker_id, worker);
    for (size_t k = 0; k < r->n_timings; k++)
        r->timings[k]->speedup *= scale;
    assert_int_equal (ak_store_put_receipt (txn, r, &err), 0);
    Ak__BatchRecord *b = NULL;
    assert_int_equal (ak_store_get_batch (txn, batch_id, &b, &err), 0);
    ak_cpb_set (&b->winners[i]->confirmation, scale < 1 ? "disagrees" : "confirmed");
    ak_cpb_set (&b->winners[i]->figures_receipt_id, figures_rid);
    b->winners[i]->speedup *= scale;
    assert_int_equal (ak_store_put_batch (txn, b, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    ak__batch_record__free_unpacked (b, NULL);
    ak__receipt__free_unpacked (r, NULL);
    ak__task_record__free_unpacked (t, NULL);
    ak__task_record__free_unpacked (tune, NULL);
}

/* A winner whose confirmation measured less reports, and installs, the
   confirm receipt's figures, with that receipt as evidence; one whose
   figures receipt is gone is skipped, never installed with the others. */
static void test_install_confirmed_figures (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[1] = { S_CLASS_A };
    bool promoted[1] = { true };
    s_batch (fx, "B000001", "complete", classes, promoted, 1, 2, &rid);
    s_confirm (fx, "B000001", 0, "R00000050", 0.6, "R00000050", "w2");
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), 0);
    /* by those figures the winner trails the baseline at "small" (0.9x):
       that workload gets no entry (it keeps its baseline), and says so */
    json_t *sk = json_object_get (out, "skipped");
    assert_int_equal (json_array_size (sk), 1);
    assert_string_equal (json_string_value (json_object_get (json_array_get (sk, 0), "workload")), "small");
    assert_non_null (strstr (json_string_value (json_object_get (json_array_get (sk, 0), "reason")),
                             "keeps its baseline"));
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 1);
    json_decref (out);
    json_t *p = s_show (fx, "prod");
    assert_int_equal (json_array_size (json_object_get (s_class (p, S_CLASS_A), "entries")), 1);
    json_t *e = json_array_get (json_object_get (s_class (p, S_CLASS_A), "entries"), 0);
    /* the tune receipt measured 2.5 on "medium", the confirmation 1.5 */
    assert_string_equal (json_string_value (json_object_get (e, "workload")), "medium");
    assert_true (fabs (json_number_value (json_object_get (e, "speedup")) - 1.5) < 1e-9);
    assert_true (fabs (json_number_value (json_object_get (e, "op_speedup")) - 1.2) < 1e-9);
    json_t *ev = json_object_get (e, "evidence");
    assert_string_equal (json_string_value (json_array_get (ev, 0)), "R00000001");
    assert_string_equal (json_string_value (json_array_get (ev, 1)), "R00000050");
    json_decref (p);

    s_batch (fx, "B000002", "complete", classes, promoted, 1, 2, &rid);
    s_confirm (fx, "B000002", 0, "R00000060", 0.5, "R00000061", "w2");
    assert_int_equal (s_install (fx, "B000002", "other", false, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install"));
}

/* Only winners another worker confirmed go in by default: unconfirmed ones
   (no confirmation round, or one on the worker that measured them) are
   skipped with the reason, and installed only with unconfirmed, each
   entry saying who confirmed it (null: nobody). */
static void test_install_needs_confirmation (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[2] = { S_CLASS_A, S_CLASS_B };
    bool promoted[2] = { true, true };
    json_t *out = NULL;
    ak_err_t err = { 0 };

    /* class A confirmed on w2, class B never confirmed */
    s_batch (fx, "B000001", "complete", classes, promoted, 2, 2, &rid);
    s_confirm (fx, "B000001", 0, "R00000050", 1.0, "R00000001", "w2");
    assert_int_equal (s_install_strict (fx, "B000001", "prod", &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);    /* A's two workloads */
    json_t *skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_string_equal (json_string_value (json_object_get (skip, "device_class")), S_CLASS_B);
    const char *why = json_string_value (json_object_get (skip, "reason"));
    assert_non_null (strstr (why, "not confirmed on another worker: no confirmation round decided it"));
    assert_non_null (strstr (why, "--unconfirmed"));
    json_decref (out);
    json_t *p = s_show (fx, "prod");
    assert_null (s_class (p, S_CLASS_B));
    json_t *e = json_array_get (json_object_get (s_class (p, S_CLASS_A), "entries"), 0);
    assert_string_equal (json_string_value (json_object_get (e, "confirmed_on")), "w2");
    json_decref (p);

    /* --unconfirmed takes B too; its entries say nobody confirmed them */
    assert_int_equal (s_install_as (fx, "B000001", "all", false, true, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 4);
    json_decref (out);
    p = s_show (fx, "all");
    e = json_array_get (json_object_get (s_class (p, S_CLASS_B), "entries"), 0);
    assert_true (json_is_null (json_object_get (e, "confirmed_on")));
    json_decref (p);

    /* confirmed on the worker that measured it (a class with one live
       worker): skipped, and with nothing else to install, refused */
    s_batch (fx, "B000002", "complete", classes, promoted, 2, 4, &rid);
    s_confirm (fx, "B000002", 0, "R00000060", 1.0, "R00000003", "w1");
    s_confirm (fx, "B000002", 1, "R00000061", 1.0, "R00000004", "w2");
    assert_int_equal (s_install_strict (fx, "B000002", "one", &out, &err), 0);
    skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_string_equal (json_string_value (json_object_get (skip, "device_class")), S_CLASS_A);
    assert_non_null (strstr (json_string_value (json_object_get (skip, "reason")),
                             "confirmed on w1, the worker that measured it"));
    json_decref (out);
    s_batch (fx, "B000003", "complete", classes, promoted, 1, 8, &rid);
    s_confirm (fx, "B000003", 0, "R00000070", 1.0, "R00000005", "w1");
    assert_int_equal (s_install_strict (fx, "B000003", "none", &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install (1 skipped; softmax: not confirmed on another "
                                      "worker: confirmed on w1"));
}

/* A second tune task (number 2, ROWS=rows_param) of batch_id's class
   S_CLASS_A whose receipt rid (worker w1) measured speedup on 'small';
   with pick, the batch's winner gets it as the workload pick of 'small'
   (promote.h).  Its confirm task (number 8), when confirm_rid is given,
   re-measured it on worker `worker` at scale x. */
static void s_pick_task (s_fx_t *fx, const char *batch_id, const char *rid, int64_t rows_param, double speedup,
                         const char *confirm_rid, const char *worker, double scale)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    char first[32], task_id[32], confirm_id[32];
    snprintf (first, sizeof first, "%s.0001", batch_id);
    snprintf (task_id, sizeof task_id, "%s.0002", batch_id);
    snprintf (confirm_id, sizeof confirm_id, "%s.0008", batch_id);
    Ak__TaskRecord *t = NULL;
    assert_int_equal (ak_store_get_task (txn, first, &t, &err), 0);
    ak_cpb_set (&t->task_id, task_id);
    ak_cpb_set (&t->receipt_id, rid);
    t->params[0]->value = rows_param;
    assert_int_equal (ak_store_put_task (txn, t, &err), 0);
    Ak__Receipt *r = NULL;
    assert_int_equal (ak_store_get_receipt (txn, "R00000001", &r, &err), 0);
    ak_cpb_set (&r->receipt_id, rid);
    ak_cpb_set (&r->task_id, task_id);
    r->timings[0]->speedup = speedup;
    /* medians too: a confirmation is judged on the timing it measured */
    r->timings[0]->baseline = ak_calloc (1, sizeof (Ak__Stats));
    r->timings[0]->candidate = ak_calloc (1, sizeof (Ak__Stats));
    ak__stats__init (r->timings[0]->baseline);
    ak__stats__init (r->timings[0]->candidate);
    r->timings[0]->baseline->median_us = 100.0;
    r->timings[0]->candidate->median_us = 100.0 / speedup;
    assert_int_equal (ak_store_put_receipt (txn, r, &err), 0);
    if (confirm_rid) {
        ak_cpb_set (&t->task_id, confirm_id);
        ak_cpb_set (&t->kind, "confirm");
        ak_cpb_set (&t->confirm_of, task_id);
        ak_cpb_set (&t->receipt_id, confirm_rid);
        assert_int_equal (ak_store_put_task (txn, t, &err), 0);
        ak_cpb_set (&r->receipt_id, confirm_rid);
        ak_cpb_set (&r->task_id, confirm_id);
        ak_cpb_set (&r->worker_id, worker);
        r->timings[0]->speedup = speedup * scale;
        r->timings[0]->candidate->median_us = 100.0 / (speedup * scale);
        assert_int_equal (ak_store_put_receipt (txn, r, &err), 0);
    }
    Ak__BatchRecord *b = NULL;
    assert_int_equal (ak_store_get_batch (txn, batch_id, &b, &err), 0);
    Ak__Winner *w = b->winners[0];
    Ak__WorkloadPick *pk = ak_malloc (sizeof *pk);
    ak__workload_pick__init (pk);
    ak_cpb_set (&pk->workload, "small");
    ak_cpb_set (&pk->dtype, "float32");
    ak_cpb_set (&pk->task_id, task_id);
    ak_cpb_set (&pk->receipt_id, rid);
    ak_cpb_set (&pk->candidate_name, "warp_row");
    pk->params = ak_cpb_params_dup (t->params, t->n_params);
    pk->n_params = t->n_params;
    pk->speedup = speedup;
    pk->noise = 0.02;
    ak_cpb_set (&pk->replaces, w->promoted ? "winner" : "baseline");
    pk->over = speedup / 1.5;
    if (confirm_rid) {
        /* what the batch's decision says of it (ak_rounds_picks_confirm) */
        ak_cpb_set (&pk->confirmation, fabs (scale - 1) < 0.05 ? "confirmed" : "disagrees");
        ak_cpb_set (&pk->confirmed_on, worker);
    }
    w->picks = ak_malloc (sizeof *w->picks);
    w->picks[0] = pk;
    w->n_picks = 1;
    assert_int_equal (ak_store_put_batch (txn, b, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    ak__batch_record__free_unpacked (b, NULL);
    ak__receipt__free_unpacked (r, NULL);
    ak__task_record__free_unpacked (t, NULL);
}

/* The entry of key in class record c, or NULL. */
static json_t *s_entry_of (json_t *c, const char *key)
{
    return s_find (json_object_get (c, "entries"), "key", key);
}

/* A workload pick installs its own candidate for its workload alone,
   replacing the winner's entry there; like the winner it needs another
   worker's agreeing confirmation, or --unconfirmed; a winner that was not
   promoted leaves its workloads to the picks. */
static void test_install_workload_picks (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[1] = { S_CLASS_A };
    bool promoted[1] = { true };
    json_t *out = NULL, *p, *c, *e;
    ak_err_t err = { 0 };
    s_batch (fx, "B000001", "complete", classes, promoted, 1, 2, &rid);
    s_pick_task (fx, "B000001", "R00000040", 8, 3.0, NULL, NULL, 1);
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);
    assert_int_equal (json_array_size (json_object_get (out, "skipped")), 0);
    json_decref (out);
    p = s_show (fx, "prod");
    c = s_class (p, S_CLASS_A);
    assert_int_equal (json_array_size (json_object_get (c, "entries")), 2);
    e = s_entry_of (c, "softmax/rows=32,cols=128/float32");
    assert_non_null (e);
    assert_string_equal (json_string_value (json_object_get (e, "task_id")), "B000001.0002");
    assert_true (fabs (json_number_value (json_object_get (e, "speedup")) - 3.0) < 1e-9);
    assert_string_equal (json_string_value (json_array_get (json_object_get (e, "evidence"), 0)), "R00000040");
    /* grid (32+ROWS-1)/ROWS with the pick's ROWS=8 */
    assert_int_equal (json_integer_value (json_array_get (json_object_get (json_object_get (e, "launch"), "grid"), 0)), 4);
    e = s_entry_of (c, "softmax/rows=128,cols=512/float32");
    assert_non_null (e);
    assert_string_equal (json_string_value (json_object_get (e, "task_id")), "B000001.0001");
    json_decref (p);

    /* strict: neither the winner nor the pick was confirmed: nothing */
    assert_int_equal (s_install_strict (fx, "B000001", "strict", &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install (2 skipped"));

    /* the pick confirmed on w2 (agreeing): it goes in alone when the winner
       is not confirmed; a disagreeing confirmation is no confirmation */
    s_batch (fx, "B000002", "complete", classes, promoted, 1, 2, &rid);
    s_pick_task (fx, "B000002", "R00000041", 8, 3.0, "R00000042", "w2", 0.99);
    assert_int_equal (s_install_strict (fx, "B000002", "strict", &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 1);
    json_t *skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_non_null (strstr (json_string_value (json_object_get (skip, "reason")), "not confirmed on another worker"));
    json_decref (out);
    p = s_show (fx, "strict");
    e = s_entry_of (s_class (p, S_CLASS_A), "softmax/rows=32,cols=128/float32");
    assert_string_equal (json_string_value (json_object_get (e, "confirmed_on")), "w2");
    json_decref (p);
    s_batch (fx, "B000003", "complete", classes, promoted, 1, 2, &rid);
    s_pick_task (fx, "B000003", "R00000043", 8, 3.0, "R00000044", "w2", 0.5);
    s_confirm (fx, "B000003", 0, "R00000045", 1.0, "R00000003", "w2");
    assert_int_equal (s_install_strict (fx, "B000003", "strict3", &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);       /* the winner's two */
    skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_non_null (strstr (json_string_value (json_object_get (skip, "reason")),
                             "workload pick small/float32 (warp_row): the confirmation on w2 disagrees at "
                             "that workload"));
    json_decref (out);
    /* refuted, not unconfirmed: --unconfirmed does not take it either */
    assert_int_equal (s_install (fx, "B000003", "loose3", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);
    json_decref (out);

    /* no winner promoted (a kernel baseline kept): the pick's workload
       alone goes in */
    bool kept[1] = { false };
    s_batch (fx, "B000004", "complete", classes, kept, 1, 2, &rid);
    s_pick_task (fx, "B000004", "R00000046", 8, 3.0, NULL, NULL, 1);
    assert_int_equal (s_install (fx, "B000004", "kept", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 1);
    json_decref (out);
    p = s_show (fx, "kept");
    c = s_class (p, S_CLASS_A);
    assert_int_equal (json_array_size (json_object_get (c, "entries")), 1);
    assert_non_null (s_entry_of (c, "softmax/rows=32,cols=128/float32"));
    json_decref (p);
}

static void test_replace_rules (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *a[1] = { S_CLASS_A }, *b[1] = { S_CLASS_B };
    bool yes[1] = { true };
    s_batch (fx, "B000001", "complete", a, yes, 1, 2, &rid);
    s_batch (fx, "B000002", "complete", a, yes, 1, 4, &rid);
    s_batch (fx, "B000003", "complete", b, yes, 1, 8, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), 0);
    json_decref (out);
    json_t *before = s_show (fx, "prod");

    /* the same entries again: refused, nothing written */
    assert_int_equal (s_install (fx, "B000002", "prod", false, &out, &err), AK_EEXIST);
    assert_non_null (strstr (err.msg, "--replace"));
    assert_non_null (strstr (err.msg, "softmax/rows=32,cols=128/float32"));
    json_t *after = s_show (fx, "prod");
    assert_true (json_equal (before, after));
    json_decref (after);

    /* another class: installs without --replace, class A untouched */
    assert_int_equal (s_install (fx, "B000003", "prod", false, &out, &err), 0);
    json_decref (out);
    after = s_show (fx, "prod");
    assert_int_equal (json_array_size (json_object_get (after, "classes")), 2);
    assert_true (json_equal (s_class (before, S_CLASS_A), s_class (after, S_CLASS_A)));
    json_decref (after);

    /* --replace: class A's entries now come from B000002; B untouched */
    json_t *mid = s_show (fx, "prod");
    assert_int_equal (s_install (fx, "B000002", "prod", true, &out, &err), 0);
    assert_true (json_is_true (json_object_get (json_array_get (json_object_get (out, "installed"), 0), "replaced")));
    json_decref (out);
    after = s_show (fx, "prod");
    json_t *e = json_array_get (json_object_get (s_class (after, S_CLASS_A), "entries"), 0);
    assert_string_equal (json_string_value (json_object_get (e, "batch_id")), "B000002");
    assert_int_equal (json_array_size (json_object_get (s_class (after, S_CLASS_A), "entries")), 2);
    assert_true (json_equal (s_class (mid, S_CLASS_B), s_class (after, S_CLASS_B)));
    json_decref (after);
    json_decref (mid);
    json_decref (before);
}

static void test_refusals (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *a[1] = { S_CLASS_A };
    bool yes[1] = { true }, no[1] = { false };
    s_batch (fx, "B000001", "open", a, yes, 1, 2, &rid);
    s_batch (fx, "B000002", "complete", a, no, 1, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), AK_ESTATE);
    assert_non_null (strstr (err.msg, "open"));
    assert_int_equal (s_install (fx, "B000002", "prod", false, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner"));
    assert_int_equal (s_install (fx, "B000009", "prod", false, &out, &err), AK_ENOTFOUND);
    assert_int_equal (s_install (fx, "B000002", "bad name/..", false, &out, &err), AK_EINVAL);
    assert_null (s_show (fx, "prod"));
}

static int s_import (s_fx_t *fx, json_t *pkg, const char *name, bool replace, ak_err_t *err)
{
    ak_txn_t *txn = NULL;
    json_t *out = NULL;
    assert_int_equal (ak_store_begin (fx->store, true, &txn, err), 0);
    int rc = ak_profiles_import (txn, pkg, name, replace, 2000, &out, err);
    if (rc == 0)
        assert_int_equal (ak_store_commit (&txn, err), 0);
    ak_store_abort (&txn);
    json_decref (out);
    return rc;
}

/* The package of profile name, as export gives it (caller decrefs). */
static json_t *s_export (s_fx_t *fx, const char *name)
{
    ak_txn_t *txn = NULL;
    json_t *pkg = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_profiles_export (txn, name, &pkg, &err), 0);
    ak_store_abort (&txn);
    return pkg;
}

/* Profiles a and b hold the same, their names and the times their
   classes were written aside. */
static void s_assert_same (s_fx_t *fx, const char *a_name, const char *b_name)
{
    json_t *a = s_show (fx, a_name), *b = s_show (fx, b_name);
    json_object_set_new (b, "profile", json_string (a_name));
    for (size_t i = 0; i < json_array_size (json_object_get (a, "classes")); i++) {
        json_object_del (json_array_get (json_object_get (a, "classes"), i), "updated_ms");
        json_object_del (json_array_get (json_object_get (b, "classes"), i), "updated_ms");
    }
    assert_true (json_equal (a, b));
    json_decref (a);
    json_decref (b);
}

static void test_export_import_round_trip (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[2] = { S_CLASS_A, S_CLASS_B };
    bool promoted[2] = { true, true };
    s_batch (fx, "B000001", "complete", classes, promoted, 2, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), 0);
    json_decref (out);
    json_t *pkg = s_export (fx, "prod");
    assert_int_equal (json_object_size (json_object_get (pkg, "sources")), 2);   /* source + prelude */

    assert_int_equal (s_import (fx, pkg, "copy", false, &err), 0);
    s_assert_same (fx, "prod", "copy");
    /* again: exists; with replace: fine */
    assert_int_equal (s_import (fx, pkg, "copy", false, &err), AK_EEXIST);
    assert_int_equal (s_import (fx, pkg, "copy", true, &err), 0);

    /* entries without "kind" (a profile.json made before kinds) are the
       kernels they were */
    json_t *old = json_deep_copy (pkg), *cls, *ent;
    size_t ci, ei;
    json_array_foreach (json_object_get (json_object_get (old, "profile"), "classes"), ci, cls)
        json_array_foreach (json_object_get (cls, "entries"), ei, ent) {
            assert_string_equal (json_string_value (json_object_get (ent, "kind")), "kernel");
            json_object_del (ent, "kind");
        }
    assert_int_equal (s_import (fx, old, "old", false, &err), 0);
    s_assert_same (fx, "prod", "old");
    json_decref (old);

    /* a source that is not what its digest says */
    json_t *bad = json_deep_copy (pkg);
    const char *d;
    json_t *v;
    json_object_foreach (json_object_get (bad, "sources"), d, v) {
        json_string_set (v, "tampered");
        break;
    }
    assert_int_equal (s_import (fx, bad, "x", false, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "sha256"));
    json_decref (bad);
    /* an entry whose key does not match its shape */
    bad = json_deep_copy (pkg);
    json_t *e = json_array_get (json_object_get (json_array_get (json_object_get (json_object_get (bad, "profile"), "classes"), 0), "entries"), 0);
    json_array_set_new (json_object_get (e, "dims"), 1, json_integer (129));
    assert_int_equal (s_import (fx, bad, "x", false, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "key"));
    json_decref (bad);
    assert_null (s_show (fx, "x"));
    json_decref (pkg);

    /* list */
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_profiles_list (txn, &out, &err), 0);
    ak_store_abort (&txn);
    assert_int_equal (json_array_size (json_object_get (out, "profiles")), 3);
    json_decref (out);
}

// ---------------------------------------------------- tensor maps (ABI 2)

/* The first entry of class 0 of package pkg. */
static json_t *s_entry0 (json_t *pkg)
{
    json_t *classes = json_object_get (json_object_get (pkg, "profile"), "classes");
    return json_array_get (json_object_get (json_array_get (classes, 0), "entries"), 0);
}

/*  A rank-1 map over the entry's input 0 of n elements (index idx, box
    elements, swizzle sw) into its launch, tensor_maps set to count, the
    map twice with two. */
static void s_put_map (json_t *e, int idx, json_int_t n, int box, const char *sw, json_int_t count, bool two)
{
    json_t *launch = json_object_get (e, "launch");
    json_t *m = json_pack ("{s:s, s:s, s:b, s:I, s:[I], s:[], s:[i], s:I, s:s, s:s, s:s, s:b}", "name", "tm_x",
                           "buffer", "x", "output", 0, "index", (json_int_t) idx, "dims", n, "strides", "box", box,
                           "elem_bytes", (json_int_t) 4, "swizzle", sw, "l2_promotion", "256B", "oob_fill", "zero",
                           "absent", 0);
    json_t *maps = json_array ();
    json_array_append (maps, m);
    if (two)
        json_array_append (maps, m);
    json_decref (m);
    json_object_set_new (launch, "tensor_maps", json_integer (count));
    json_object_set_new (launch, "maps", maps);
}

/*  Installing a winner whose candidate takes tensor maps (flash_attention's
    sm_90a `wgmma` at gpu_llm, bfloat16): the entry records its arch and
    the three maps evaluated for that shape, as libakprofile encodes them
    (dims {D, S, B*H} innermost first, row strides in bytes, the Q box of
    64*CONSUMERS rows and the K / V boxes of BN keys). */
static void test_install_tensor_maps (void **state)
{
    s_fx_t *fx = *state;
    ak_err_t err = { 0 };
    char spec_digest[65], src_digest[65];
    s_store_spec (fx->store, "flash_attention", "wgmma", spec_digest, src_digest);
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);

    Ak__TaskRecord *t = s_task ("B000003.0001", "B000003", "flash_attention", S_CLASS_A, "wgmma", "R00000100", "ok");
    const char *names[4] = { "BN", "STAGES", "CONSUMERS", "PINGPONG" };
    int64_t values[4] = { 128, 2, 2, 1 };
    t->params = ak_cpb_params_new (names, values, 4);
    t->n_params = 4;
    ak_cpb_set (&t->spec_digest, spec_digest);
    ak_cpb_set (&t->candidate_digest, src_digest);
    ak_cpb_set (&t->candidate_source_name, "wgmma.cu");
    Ak__Workload *w = ak_malloc (sizeof *w);
    ak__workload__init (w);
    ak_cpb_set (&w->name, "gpu_llm");
    int64_t dims[5] = { 4, 32, 2048, 128, 1 };
    w->dims = ak_malloc (sizeof dims);
    memcpy (w->dims, dims, sizeof dims);
    w->n_dims = 5;
    ak_cpb_set (&w->dtype, "bfloat16");
    w->weight = 1;
    t->workloads = ak_malloc (sizeof *t->workloads);
    t->workloads[0] = w;
    t->n_workloads = 1;
    assert_int_equal (ak_store_put_task (txn, t, &err), 0);
    Ak__Receipt *r = s_receipt (t, "R00000100", "ok", "NVIDIA H200", 9);
    Ak__WorkloadTiming *wt = ak_malloc (sizeof *wt);
    ak__workload_timing__init (wt);
    wt->workload = (Ak__Workload *) ak_cpb_dup ((ProtobufCMessage *) w);
    wt->speedup = 250.0;
    wt->speedup_noise = 0.5;
    r->timings[r->n_timings++] = wt;
    assert_int_equal (ak_store_put_receipt (txn, r, &err), 0);
    ak__receipt__free_unpacked (r, NULL);
    ak__task_record__free_unpacked (t, NULL);
    Ak__Winner win = AK__WINNER__INIT, *wins[1] = { &win };
    win.op = (char *) "flash_attention";
    win.device_class = (char *) S_CLASS_A;
    win.promoted = true;
    win.task_id = (char *) "B000003.0001";
    win.receipt_id = (char *) "R00000100";
    win.candidate_name = (char *) "wgmma";
    win.speedup = 250.0;
    win.noise = 0.5;
    Ak__BatchRecord b = AK__BATCH_RECORD__INIT;
    b.batch_id = (char *) "B000003";
    b.name = (char *) "attention";
    b.state = (char *) "complete";
    b.winners = wins;
    b.n_winners = 1;
    assert_int_equal (ak_store_put_batch (txn, &b, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    json_t *out = NULL;
    if (s_install (fx, "B000003", "att", false, &out, &err) != 0)
        fail_msg ("install: %s", err.msg);
    json_decref (out);
    json_t *pkg = s_export (fx, "att");
    json_t *e = s_entry0 (pkg), *launch = json_object_get (e, "launch");
    assert_string_equal (json_string_value (json_object_get (e, "arch")), "sm_90a");
    assert_int_equal (json_integer_value (json_object_get (launch, "tensor_maps")), 3);
    json_t *maps = json_object_get (launch, "maps");
    assert_int_equal (json_array_size (maps), 3);
    const char *mnames[3] = { "tm_q", "tm_k", "tm_v" }, *bufs[3] = { "q", "k", "v" };
    for (size_t i = 0; i < 3; i++) {
        json_t *m = json_array_get (maps, i);
        json_t *want = json_pack ("{s:s, s:s, s:b, s:I, s:[iii], s:[ii], s:[iii], s:i, s:s, s:s, s:s, s:b}",
                                  "name", mnames[i], "buffer", bufs[i], "output", 0, "index", (json_int_t) i,
                                  "dims", 128, 2048, 128, "strides", 256, 524288, "box", 64, 128, 1,
                                  "elem_bytes", 2, "swizzle", "128B", "l2_promotion", "256B", "oob_fill", "zero",
                                  "absent", 0);
        if (!json_equal (m, want)) {
            char *got = json_dumps (m, JSON_COMPACT);
            fail_msg ("map %zu: %s", i, got);
        }
        json_decref (want);
    }
    /* the package imports back as it is */
    if (s_import (fx, pkg, "att2", false, &err) != 0)
        fail_msg ("import: %s", err.msg);
    json_decref (pkg);
}

/*  An entry's tensor maps survive import and export unchanged; a map that
    breaks a rule of cuTensorMapEncodeTiled or reaches past the entry's
    buffer is refused at import (libakprofile encodes what the package
    says over a program's buffers), naming the entry and the rule; a
    package of before the maps were recorded (tensor_maps, no "maps")
    still imports. */
static void test_tensor_maps_round_trip (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[1] = { S_CLASS_A };
    bool promoted[1] = { true };
    s_batch (fx, "B000001", "complete", classes, promoted, 1, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), 0);
    json_decref (out);
    json_t *pkg = s_export (fx, "prod");
    json_t *e = s_entry0 (pkg);
    assert_string_equal (json_string_value (json_object_get (e, "dtype")), "float32");
    json_int_t count = json_integer_value (json_object_get (json_array_get (json_object_get (e, "inputs"), 0), "count"));
    assert_true (count >= 8);

    s_put_map (e, 0, count, 8, "none", 1, false);
    json_t *want = json_deep_copy (json_object_get (json_object_get (e, "launch"), "maps"));
    if (s_import (fx, pkg, "tm", false, &err) != 0)
        fail_msg ("import: %s", err.msg);
    json_t *back = s_export (fx, "tm");
    assert_true (json_equal (json_object_get (json_object_get (s_entry0 (back), "launch"), "maps"), want));
    assert_int_equal (json_integer_value (json_object_get (json_object_get (s_entry0 (back), "launch"),
                                                           "tensor_maps")), 1);
    json_decref (back);
    json_decref (want);

    struct {
        int idx;
        json_int_t n;
        int box;
        const char *sw;
        bool two;
        const char *why;
    } bad[] = {
        { 0, count + 1, 8, "none", false, "rule extent" },
        { 3, count, 8, "none", false, "input 3 of the entry's 1" },
        { 0, count, 8, "256B", false, "swizzle, l2_promotion, oob_fill and absent are required" },
        { 0, count, 3, "none", false, "rule box_bytes" },
        { 0, count, 16, "32B", false, "rule swizzle" },
        { 0, count, 8, "none", true, "must be an array of tensor_maps (1) maps" },
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        s_put_map (e, bad[c].idx, bad[c].n, bad[c].box, bad[c].sw, 1, bad[c].two);
        if (s_import (fx, pkg, "x", false, &err) != AK_EINVAL)
            fail_msg ("case %zu: imported", c);
        if (!strstr (err.msg, bad[c].why) || !strstr (err.msg, ".launch.maps"))
            fail_msg ("case %zu: '%s' does not say '%s'", c, err.msg, bad[c].why);
    }
    assert_null (s_show (fx, "x"));

    /* before maps were recorded: the count alone imports */
    json_object_del (json_object_get (e, "launch"), "maps");
    json_object_set_new (json_object_get (e, "launch"), "tensor_maps", json_integer (2));
    assert_int_equal (s_import (fx, pkg, "old", false, &err), 0);
    json_decref (pkg);
}

// ------------------------------------------------------------ vendor entries

/* Stores kernels/OP/spec.json as a blob; its digest into digest. */
static void s_put_spec (s_fx_t *fx, const char *op, char digest[65])
{
    char rel[64];
    snprintf (rel, sizeof rel, "kernels/%s/spec.json", op);
    char *path = ak_test_src (rel);
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_spec_load (path, &spec, &err), 0);
    free (path);
    char *text = ak_spec_to_text (spec, false);
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_blob (txn, text, strlen (text), digest, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    free (text);
    ak_spec_destroy (&spec);
}

/* A complete batch of one cuda tune task of op (3 shape keys, or 2 for
   softmax) on S_CLASS_A whose receipt (status) timed it at speedup x the
   baseline's 10 us on two float16 workloads, and the winner not promoted
   (the baseline stays): what a batch where nothing beat the baseline
   leaves. */
static void s_kept_batch (s_fx_t *fx, const char *batch_id, const char *op, const char *spec_digest,
                          const char *status, double speedup)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    char task_id[32], rid[32];
    snprintf (task_id, sizeof task_id, "%s.0001", batch_id);
    snprintf (rid, sizeof rid, "R%s", batch_id);
    bool mm = strcmp (op, "matmul") == 0;
    Ak__TaskRecord *t = s_task (task_id, batch_id, op, S_CLASS_A, mm ? "mma" : "warp_row", rid, status);
    const char *names[1] = { mm ? "BM" : "ROWS" };
    int64_t values[1] = { 64 };
    t->params = ak_cpb_params_new (names, values, 1);
    t->n_params = 1;
    ak_cpb_set (&t->spec_digest, spec_digest);
    ak_cpb_set (&t->candidate_digest, fx->src_digest);
    t->workloads = ak_malloc (2 * sizeof *t->workloads);
    for (int k = 0; k < 2; k++) {
        Ak__Workload *w = t->workloads[k] = s_workload (k ? "large" : "small", 64 << k, 64 << k);
        ak_cpb_set (&w->dtype, "float16");
        if (mm) {
            w->dims = ak_realloc (w->dims, 3 * sizeof *w->dims);
            w->dims[2] = 32;
            w->n_dims = 3;
        }
    }
    t->n_workloads = 2;
    assert_int_equal (ak_store_put_task (txn, t, &err), 0);
    Ak__Receipt *r = s_receipt (t, rid, status, "NVIDIA H200", 9);
    for (int k = 0; k < 2 && strcmp (status, "ok") == 0; k++) {
        Ak__WorkloadTiming *wt = ak_malloc (sizeof *wt);
        ak__workload_timing__init (wt);
        wt->workload = (Ak__Workload *) ak_cpb_dup ((ProtobufCMessage *) t->workloads[k]);
        wt->baseline = ak_malloc (sizeof *wt->baseline);
        ak__stats__init (wt->baseline);
        wt->baseline->median_us = 10.0 * (k + 1);
        wt->candidate = ak_malloc (sizeof *wt->candidate);
        ak__stats__init (wt->candidate);
        wt->candidate->median_us = 10.0 * (k + 1) / speedup;
        wt->speedup = speedup;
        wt->speedup_noise = 0.02;
        r->timings[r->n_timings++] = wt;
    }
    assert_int_equal (ak_store_put_receipt (txn, r, &err), 0);
    ak__receipt__free_unpacked (r, NULL);
    ak__task_record__free_unpacked (t, NULL);

    Ak__BatchRecord b = AK__BATCH_RECORD__INIT;
    b.batch_id = (char *) batch_id;
    b.name = (char *) "t";
    b.state = (char *) "complete";
    Ak__Winner *w = ak_malloc (sizeof *w);
    ak__winner__init (w);
    ak_cpb_set (&w->op, op);
    ak_cpb_set (&w->device_class, S_CLASS_A);
    ak_cpb_setf (&w->reason, "best candidate %s BM=64: %.2fx +- 0.02, not beyond the 3%% threshold by more "
                 "than its noise", mm ? "mma" : "warp_row", speedup);
    b.winners = &w;
    b.n_winners = 1;
    assert_int_equal (ak_store_put_batch (txn, &b, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    ak__winner__free_unpacked (w, NULL);
}

static json_t *s_entry_at (json_t *profile, size_t i)
{
    return json_array_get (json_object_get (s_class (profile, S_CLASS_A), "entries"), i);
}

/* Profile prod from a matmul batch whose cuBLASLt baseline was kept (the
   best candidate at speedup), installed as a plain install; its package. */
static json_t *s_vendor_prod (s_fx_t *fx, double speedup)
{
    char mm[65];
    s_put_spec (fx, "matmul", mm);
    s_kept_batch (fx, "B000001", "matmul", mm, "ok", speedup);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install_strict (fx, "B000001", "prod", &out, &err), 0);
    json_decref (out);
    return s_export (fx, "prod");
}

/* The baseline kept on an operator whose baseline is cuBLASLt: a vendor
   entry per workload, installed without --unconfirmed (nothing to
   confirm), with the library, the reason and its time; kept on a kernel
   baseline, or where no candidate ran against the library: skipped. */
static void test_install_vendor_entry (void **state)
{
    s_fx_t *fx = *state;
    char mm[65], sm[65];
    s_put_spec (fx, "matmul", mm);
    s_put_spec (fx, "softmax", sm);
    s_kept_batch (fx, "B000001", "matmul", mm, "ok", 1.01);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install_strict (fx, "B000001", "prod", &out, &err), 0);
    json_t *inst = json_object_get (out, "installed");
    assert_int_equal (json_array_size (inst), 2);
    assert_int_equal (json_array_size (json_object_get (out, "skipped")), 0);
    assert_string_equal (json_string_value (json_object_get (json_array_get (inst, 0), "kind")), "vendor");
    assert_string_equal (json_string_value (json_object_get (json_array_get (inst, 0), "vendor")), "cublaslt");
    json_decref (out);

    json_t *p = s_show (fx, "prod");
    json_t *e = s_entry_at (p, 1);
    assert_string_equal (json_string_value (json_object_get (e, "kind")), "vendor");
    assert_string_equal (json_string_value (json_object_get (e, "key")), "matmul/M=128,N=128,K=32/float16");
    assert_string_equal (json_string_value (json_object_get (e, "vendor")), "cublaslt");
    assert_string_equal (json_string_value (json_object_get (e, "vendor_op")), "matmul");
    assert_string_equal (json_string_value (json_object_get (e, "reason")),
                         "no candidate beat cuBLASLt beyond the noise: best candidate mma BM=64: 1.01x +- 0.02, "
                         "not beyond the 3% threshold by more than its noise");
    assert_true (fabs (json_number_value (json_object_get (e, "baseline_us")) - 20.0) < 1e-9);
    assert_true (fabs (json_number_value (json_object_get (e, "speedup")) - 1.01) < 1e-9);
    assert_string_equal (json_string_value (json_object_get (e, "candidate")), "mma");
    assert_string_equal (json_string_value (json_array_get (json_object_get (e, "evidence"), 0)), "RB000001");
    assert_true (json_is_null (json_object_get (e, "confirmed_on")));
    /* no kernel: nothing a runtime could build or launch */
    assert_null (json_object_get (e, "source"));
    assert_null (json_object_get (e, "launch"));
    assert_null (json_object_get (e, "entry"));
    json_decref (p);

    /* a kernel baseline kept (softmax's cuda baseline): skipped, as before */
    s_kept_batch (fx, "B000002", "softmax", sm, "ok", 1.01);
    assert_int_equal (s_install (fx, "B000002", "k", false, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install (1 skipped; softmax: best candidate warp_row"));
    /* every candidate failed: the library was never measured against one */
    s_kept_batch (fx, "B000003", "matmul", mm, "wrong_answer", 1.01);
    assert_int_equal (s_install (fx, "B000003", "f", false, &out, &err), AK_EINVAL);
    assert_null (s_show (fx, "f"));
}

/* A vendor entry goes through export, import and replace like a kernel
   entry: the same JSON back, no sources, and a kernel over it (or it
   over a kernel) only with --replace, the refusal naming the library. */
static void test_vendor_round_trip (void **state)
{
    s_fx_t *fx = *state;
    json_t *out = NULL, *pkg = s_vendor_prod (fx, 0.98);
    ak_err_t err = { 0 };
    assert_int_equal (json_object_size (json_object_get (pkg, "sources")), 0);
    assert_int_equal (s_import (fx, pkg, "copy", false, &err), 0);
    s_assert_same (fx, "prod", "copy");
    json_decref (pkg);

    /* the same keys again: refused, naming what is there */
    assert_int_equal (s_install (fx, "B000001", "prod", false, &out, &err), AK_EEXIST);
    assert_non_null (strstr (err.msg, "(the vendor library cublaslt from batch B000001"));
    assert_int_equal (s_install (fx, "B000001", "prod", true, &out, &err), 0);
    assert_true (json_is_true (json_object_get (json_array_get (json_object_get (out, "installed"), 0), "replaced")));
    json_decref (out);
}

/* An entry of an untrusted package: an unknown or mistyped kind, a vendor
   entry without its reason or library, with a kernel, with a time that is
   not a number, on host: refused naming the entry and the field; nothing
   stored.  An entry without "kind" (a profile made before kinds) is a
   kernel and imports as before. */
static void test_vendor_import_rejects (void **state)
{
    s_fx_t *fx = *state;
    json_t *pkg = s_vendor_prod (fx, 1.0);
    ak_err_t err = { 0 };
    static const struct {
        const char *field;
        const char *json;           /* the field's new value; NULL: removed */
        const char *msg;
    } cases[] = {
        { "kind", "\"magic\"", "classes[0].entries[0].kind: unknown kind 'magic' (kernel or vendor)" },
        { "kind", "7", "classes[0].entries[0].kind: unknown kind '(not a string)'" },
        { "reason", NULL, "classes[0].entries[0].reason: a vendor entry needs a non-empty string" },
        { "reason", "42", "classes[0].entries[0].reason: a vendor entry needs a non-empty string" },
        { "vendor", "\"\"", "classes[0].entries[0].vendor: a vendor entry needs a non-empty string" },
        { "vendor_op", NULL, "classes[0].entries[0].vendor_op: a vendor entry needs" },
        { "baseline_us", "\"fast\"", "classes[0].entries[0].baseline_us: must be a non-negative number" },
        { "baseline_us", NULL, "classes[0].entries[0].baseline_us: must be a non-negative number" },
        { "speedup", "-1", "classes[0].entries[0].speedup: must be a non-negative number" },
        { "launch", "{\"grid\":[1],\"block\":[1],\"shared_bytes\":0}",
          "classes[0].entries[0].launch: a vendor entry has no kernel" },
        { "source", "{\"digest\":\"00\"}", "classes[0].entries[0].source: a vendor entry has no kernel" },
        { "backend", "\"host\"", "classes[0].entries[0].backend: a vendor entry is a cuda library call" },
        { "candidate", "[]", "classes[0].entries[0].candidate: must be a string" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *bad = json_deep_copy (pkg);
        json_t *e = json_array_get (json_object_get (json_array_get (json_object_get (
            json_object_get (bad, "profile"), "classes"), 0), "entries"), 0);
        if (cases[i].json)
            json_object_set_new (e, cases[i].field, json_loads (cases[i].json, JSON_DECODE_ANY, NULL));
        else
            json_object_del (e, cases[i].field);
        memset (&err, 0, sizeof err);
        assert_int_equal (s_import (fx, bad, "x", false, &err), AK_EINVAL);
        if (!strstr (err.msg, cases[i].msg))
            fail_msg ("case %zu (%s): '%s' does not say '%s'", i, cases[i].field, err.msg, cases[i].msg);
        json_decref (bad);
    }
    assert_null (s_show (fx, "x"));
    json_decref (pkg);
}

/* Verify of a profile with vendor entries: each gets the verdict "vendor"
   at once (no kernel to run; counted in entries_vendor, in no reason and
   in no failure), its kernel entries are verified as ever (here with no
   live worker: unverified). */
static void test_verify_vendor_entry (void **state)
{
    s_fx_t *fx = *state;
    uint64_t rid = 0;
    json_decref (s_vendor_prod (fx, 1.0));
    const char *classes[1] = { S_CLASS_A };
    bool promoted[1] = { true };
    s_batch (fx, "B000002", "complete", classes, promoted, 1, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (s_install (fx, "B000002", "prod", false, &out, &err), 0);
    json_decref (out);

    ak_registry_t *reg = ak_registry_new ();
    ak_verify_rule_t rule = { AK_VERIFY_DEFAULT_K, AK_VERIFY_DEFAULT_FLOOR };
    ak_expansion_t *exp = NULL;
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    assert_int_equal (ak_verify_create (txn, reg, "prod", &rule, "B000009", 3000, &exp, &err), 0);
    assert_int_equal (exp->ntasks, 0);
    const Ak__VerifyReport *rep = exp->batch->verify;
    assert_int_equal (rep->entries_vendor, 2);
    size_t nvendor = 0;
    for (size_t i = 0; i < rep->n_verdicts; i++) {
        const Ak__VerifyVerdict *v = rep->verdicts[i];
        if (strcmp (v->verdict, "vendor") != 0)
            continue;
        nvendor++;
        assert_non_null (strstr (v->key, "matmul/"));
        assert_non_null (strstr (v->reason, "vendor entry: no kernel to verify (the vendor library cublaslt "
                                            "stays: no candidate beat cuBLASLt"));
    }
    assert_int_equal (nvendor, 2);
    ak_expansion_destroy (&exp);
    bool is_verify = false;
    assert_int_equal (ak_verify_settle (txn, "B000009", 4000, &is_verify, &err), 0);
    assert_true (is_verify);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    ak_registry_destroy (&reg);

    json_t *p = s_show (fx, "prod");
    json_t *ver = json_object_get (p, "verification");
    /* the kernel entries (2 workloads of softmax) had no live worker */
    assert_string_equal (json_string_value (json_object_get (ver, "state")), "unverified");
    assert_int_equal (json_integer_value (json_object_get (ver, "entries")), 2);
    assert_int_equal (json_integer_value (json_object_get (ver, "entries_failed")), 0);
    assert_int_equal (json_integer_value (json_object_get (ver, "entries_unverified")), 2);
    assert_int_equal (json_integer_value (json_object_get (ver, "entries_vendor")), 2);
    size_t i;
    json_t *why;
    json_array_foreach (json_object_get (ver, "reasons"), i, why)
        assert_null (strstr (json_string_value (why), "matmul"));
    assert_int_equal (json_array_size (json_object_get (ver, "reasons")), 2);
    json_decref (p);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_install_records_promoted_only, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_install_confirmed_figures, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_install_needs_confirmation, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_install_workload_picks, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_replace_rules, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_refusals, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_export_import_round_trip, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_tensor_maps_round_trip, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_install_tensor_maps, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_install_vendor_entry, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_vendor_round_trip, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_vendor_import_rejects, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_verify_vendor_entry, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
