/*  tests/unit/unit_profiles.c: the profile fixture of test_profiles and
    test_profiles_vendor (unit_profiles.h): a temporary store with
    softmax's spec and warp_row's source as blobs, synthetic batches,
    tasks and receipts written as the coordinator and a CUDA worker leave
    them, and install / show / import / export through
    coordinator/profiles.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "unit_profiles.h"
#include "coordinator/profiles.h"
#include "cpb.h"
#include "spec.h"
#include "util.h"

/*  The catalog spec of op and the source of its candidate cand as blobs
    in store (a batch's tasks name them by these digests). */
void ak_pf_store_spec (ak_store_t *store, const char *op, const char *cand_name, char *spec_digest,
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

int ak_pf_setup (void **state)
{
    ak_pf_fx_t *fx = calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("profiles");
    ak_err_t err = { 0 };
    ak_store_opts_t opts = { .no_sync = true };
    char *path = ak_path_join (fx->dir, "store");
    assert_int_equal (ak_store_open (path, &opts, &fx->store, &err), 0);
    free (path);
    ak_pf_store_spec (fx->store, "softmax", "warp_row", fx->spec_digest, fx->src_digest);
    *state = fx;
    return 0;
}

int ak_pf_teardown (void **state)
{
    ak_pf_fx_t *fx = *state;
    ak_store_destroy (&fx->store);
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    free (fx);
    return 0;
}

Ak__Workload *ak_pf_workload (const char *name, int64_t rows, int64_t cols)
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
Ak__TaskRecord *ak_pf_task (const char *task_id, const char *batch_id, const char *op, const char *cls,
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
Ak__Receipt *ak_pf_receipt (const Ak__TaskRecord *t, const char *rid, const char *status, const char *device,
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
void ak_pf_batch (ak_pf_fx_t *fx, const char *batch_id, const char *state, const char *const *classes,
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
        Ak__TaskRecord *t = ak_pf_task (task_id, batch_id, "softmax", classes[i], "warp_row", rid, "ok");
        const char *names[2] = { "ROWS", "VEC" };
        int64_t values[2] = { rows_param, 1 };
        t->params = ak_cpb_params_new (names, values, 2);
        t->n_params = 2;
        ak_cpb_set (&t->spec_digest, fx->spec_digest);
        ak_cpb_set (&t->candidate_digest, fx->src_digest);
        ak_cpb_set (&t->candidate_source_name, "warp_row.cu");
        t->workloads = ak_malloc (2 * sizeof *t->workloads);
        t->workloads[0] = ak_pf_workload ("small", 32, 128);
        t->workloads[1] = ak_pf_workload ("medium", 128, 512);
        t->n_workloads = 2;
        assert_int_equal (ak_store_put_task (txn, t, &err), 0);

        Ak__Receipt *r = ak_pf_receipt (t, rid, "ok", i ? "NVIDIA B200" : "NVIDIA H200", i ? 10 : 9);
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
   confirmation unless s_confirm gives them one); ak_pf_install_strict: as a
   plain install, only winners another worker confirmed. */
int ak_pf_install_as (ak_pf_fx_t *fx, const char *batch, const char *name, bool replace, bool unconfirmed,
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

int ak_pf_install (ak_pf_fx_t *fx, const char *batch, const char *name, bool replace, json_t **out, ak_err_t *err)
{
    return ak_pf_install_as (fx, batch, name, replace, true, out, err);
}

int ak_pf_install_strict (ak_pf_fx_t *fx, const char *batch, const char *name, json_t **out, ak_err_t *err)
{
    return ak_pf_install_as (fx, batch, name, false, false, out, err);
}

json_t *ak_pf_show (ak_pf_fx_t *fx, const char *name)
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
json_t *ak_pf_find (json_t *a, const char *field, const char *value)
{
    size_t i;
    json_t *x;
    json_array_foreach (a, i, x)
        if (strcmp (json_string_value (json_object_get (x, field)), value) == 0)
            return x;
    return NULL;
}

json_t *ak_pf_class (json_t *profile, const char *cls)
{
    return ak_pf_find (json_object_get (profile, "classes"), "device_class", cls);
}

int ak_pf_import (ak_pf_fx_t *fx, json_t *pkg, const char *name, bool replace, ak_err_t *err)
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
json_t *ak_pf_export (ak_pf_fx_t *fx, const char *name)
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
void ak_pf_assert_same (ak_pf_fx_t *fx, const char *a_name, const char *b_name)
{
    json_t *a = ak_pf_show (fx, a_name), *b = ak_pf_show (fx, b_name);
    json_object_set_new (b, "profile", json_string (a_name));
    for (size_t i = 0; i < json_array_size (json_object_get (a, "classes")); i++) {
        json_object_del (json_array_get (json_object_get (a, "classes"), i), "updated_ms");
        json_object_del (json_array_get (json_object_get (b, "classes"), i), "updated_ms");
    }
    assert_true (json_equal (a, b));
    json_decref (a);
    json_decref (b);
}
