/*  tests/unit/test_profiles.c: coordinator/profiles.c on a temporary store
    with synthetic batches (tests/unit/unit_profiles.c): what install
    records, confirmed figures and workload picks, the replace and refusal
    rules, other classes left alone, export/import round trips and the
    import checks.  Tensor maps and vendor entries: test_profiles_vendor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "unit_profiles.h"
#include "coordinator/profiles.h"
#include "coordinator/registry.h"
#include "coordinator/verify.h"
#include "cpb.h"
#include "spec.h"
#include "util.h"

static void test_install_records_promoted_only (void **state)
{
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[2] = { AK_PF_CLASS_A, AK_PF_CLASS_B };
    bool promoted[2] = { true, false };
    ak_pf_batch (fx, "B000001", "complete", classes, promoted, 2, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);
    json_t *skipped = json_object_get (out, "skipped");
    assert_int_equal (json_array_size (skipped), 1);
    assert_string_equal (json_string_value (json_object_get (json_array_get (skipped, 0), "device_class")), AK_PF_CLASS_B);
    assert_non_null (strstr (json_string_value (json_object_get (json_array_get (skipped, 0), "reason")), "threshold"));
    json_decref (out);

    json_t *p = ak_pf_show (fx, "prod");
    assert_non_null (p);
    assert_int_equal (json_array_size (json_object_get (p, "classes")), 1);
    json_t *c = ak_pf_class (p, AK_PF_CLASS_A);
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
static void s_confirm (ak_pf_fx_t *fx, const char *batch_id, size_t i, const char *rid, double scale,
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
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[1] = { AK_PF_CLASS_A };
    bool promoted[1] = { true };
    ak_pf_batch (fx, "B000001", "complete", classes, promoted, 1, 2, &rid);
    s_confirm (fx, "B000001", 0, "R00000050", 0.6, "R00000050", "w2");
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), 0);
    /* by those figures the winner trails the baseline at "small" (0.9x):
       that workload gets no entry (it keeps its baseline), and says so */
    json_t *sk = json_object_get (out, "skipped");
    assert_int_equal (json_array_size (sk), 1);
    assert_string_equal (json_string_value (json_object_get (json_array_get (sk, 0), "workload")), "small");
    assert_non_null (strstr (json_string_value (json_object_get (json_array_get (sk, 0), "reason")),
                             "keeps its baseline"));
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 1);
    json_decref (out);
    json_t *p = ak_pf_show (fx, "prod");
    assert_int_equal (json_array_size (json_object_get (ak_pf_class (p, AK_PF_CLASS_A), "entries")), 1);
    json_t *e = json_array_get (json_object_get (ak_pf_class (p, AK_PF_CLASS_A), "entries"), 0);
    /* the tune receipt measured 2.5 on "medium", the confirmation 1.5 */
    assert_string_equal (json_string_value (json_object_get (e, "workload")), "medium");
    assert_true (fabs (json_number_value (json_object_get (e, "speedup")) - 1.5) < 1e-9);
    assert_true (fabs (json_number_value (json_object_get (e, "op_speedup")) - 1.2) < 1e-9);
    json_t *ev = json_object_get (e, "evidence");
    assert_string_equal (json_string_value (json_array_get (ev, 0)), "R00000001");
    assert_string_equal (json_string_value (json_array_get (ev, 1)), "R00000050");
    json_decref (p);

    ak_pf_batch (fx, "B000002", "complete", classes, promoted, 1, 2, &rid);
    s_confirm (fx, "B000002", 0, "R00000060", 0.5, "R00000061", "w2");
    assert_int_equal (ak_pf_install (fx, "B000002", "other", false, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install"));
}

/* Only winners another worker confirmed go in by default: unconfirmed ones
   (no confirmation round, or one on the worker that measured them) are
   skipped with the reason, and installed only with unconfirmed, each
   entry saying who confirmed it (null: nobody). */
static void test_install_needs_confirmation (void **state)
{
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[2] = { AK_PF_CLASS_A, AK_PF_CLASS_B };
    bool promoted[2] = { true, true };
    json_t *out = NULL;
    ak_err_t err = { 0 };

    /* class A confirmed on w2, class B never confirmed */
    ak_pf_batch (fx, "B000001", "complete", classes, promoted, 2, 2, &rid);
    s_confirm (fx, "B000001", 0, "R00000050", 1.0, "R00000001", "w2");
    assert_int_equal (ak_pf_install_strict (fx, "B000001", "prod", &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);    /* A's two workloads */
    json_t *skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_string_equal (json_string_value (json_object_get (skip, "device_class")), AK_PF_CLASS_B);
    const char *why = json_string_value (json_object_get (skip, "reason"));
    assert_non_null (strstr (why, "not confirmed on another worker: no confirmation round decided it"));
    assert_non_null (strstr (why, "--unconfirmed"));
    json_decref (out);
    json_t *p = ak_pf_show (fx, "prod");
    assert_null (ak_pf_class (p, AK_PF_CLASS_B));
    json_t *e = json_array_get (json_object_get (ak_pf_class (p, AK_PF_CLASS_A), "entries"), 0);
    assert_string_equal (json_string_value (json_object_get (e, "confirmed_on")), "w2");
    json_decref (p);

    /* --unconfirmed takes B too; its entries say nobody confirmed them */
    assert_int_equal (ak_pf_install_as (fx, "B000001", "all", false, true, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 4);
    json_decref (out);
    p = ak_pf_show (fx, "all");
    e = json_array_get (json_object_get (ak_pf_class (p, AK_PF_CLASS_B), "entries"), 0);
    assert_true (json_is_null (json_object_get (e, "confirmed_on")));
    json_decref (p);

    /* confirmed on the worker that measured it (a class with one live
       worker): skipped, and with nothing else to install, refused */
    ak_pf_batch (fx, "B000002", "complete", classes, promoted, 2, 4, &rid);
    s_confirm (fx, "B000002", 0, "R00000060", 1.0, "R00000003", "w1");
    s_confirm (fx, "B000002", 1, "R00000061", 1.0, "R00000004", "w2");
    assert_int_equal (ak_pf_install_strict (fx, "B000002", "one", &out, &err), 0);
    skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_string_equal (json_string_value (json_object_get (skip, "device_class")), AK_PF_CLASS_A);
    assert_non_null (strstr (json_string_value (json_object_get (skip, "reason")),
                             "confirmed on w1, the worker that measured it"));
    json_decref (out);
    ak_pf_batch (fx, "B000003", "complete", classes, promoted, 1, 8, &rid);
    s_confirm (fx, "B000003", 0, "R00000070", 1.0, "R00000005", "w1");
    assert_int_equal (ak_pf_install_strict (fx, "B000003", "none", &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install (1 skipped; softmax: not confirmed on another "
                                      "worker: confirmed on w1"));
}

/* A second tune task (number 2, ROWS=rows_param) of batch_id's class
   AK_PF_CLASS_A whose receipt rid (worker w1) measured speedup on 'small';
   with pick, the batch's winner gets it as the workload pick of 'small'
   (promote.h).  Its confirm task (number 8), when confirm_rid is given,
   re-measured it on worker `worker` at scale x. */
static void s_pick_task (ak_pf_fx_t *fx, const char *batch_id, const char *rid, int64_t rows_param, double speedup,
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
    return ak_pf_find (json_object_get (c, "entries"), "key", key);
}

/* A workload pick installs its own candidate for its workload alone,
   replacing the winner's entry there; like the winner it needs another
   worker's agreeing confirmation, or --unconfirmed; a winner that was not
   promoted leaves its workloads to the picks. */
static void test_install_workload_picks (void **state)
{
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[1] = { AK_PF_CLASS_A };
    bool promoted[1] = { true };
    json_t *out = NULL, *p, *c, *e;
    ak_err_t err = { 0 };
    ak_pf_batch (fx, "B000001", "complete", classes, promoted, 1, 2, &rid);
    s_pick_task (fx, "B000001", "R00000040", 8, 3.0, NULL, NULL, 1);
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);
    assert_int_equal (json_array_size (json_object_get (out, "skipped")), 0);
    json_decref (out);
    p = ak_pf_show (fx, "prod");
    c = ak_pf_class (p, AK_PF_CLASS_A);
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
    assert_int_equal (ak_pf_install_strict (fx, "B000001", "strict", &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install (2 skipped"));

    /* the pick confirmed on w2 (agreeing): it goes in alone when the winner
       is not confirmed; a disagreeing confirmation is no confirmation */
    ak_pf_batch (fx, "B000002", "complete", classes, promoted, 1, 2, &rid);
    s_pick_task (fx, "B000002", "R00000041", 8, 3.0, "R00000042", "w2", 0.99);
    assert_int_equal (ak_pf_install_strict (fx, "B000002", "strict", &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 1);
    json_t *skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_non_null (strstr (json_string_value (json_object_get (skip, "reason")), "not confirmed on another worker"));
    json_decref (out);
    p = ak_pf_show (fx, "strict");
    e = s_entry_of (ak_pf_class (p, AK_PF_CLASS_A), "softmax/rows=32,cols=128/float32");
    assert_string_equal (json_string_value (json_object_get (e, "confirmed_on")), "w2");
    json_decref (p);
    ak_pf_batch (fx, "B000003", "complete", classes, promoted, 1, 2, &rid);
    s_pick_task (fx, "B000003", "R00000043", 8, 3.0, "R00000044", "w2", 0.5);
    s_confirm (fx, "B000003", 0, "R00000045", 1.0, "R00000003", "w2");
    assert_int_equal (ak_pf_install_strict (fx, "B000003", "strict3", &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);       /* the winner's two */
    skip = json_array_get (json_object_get (out, "skipped"), 0);
    assert_non_null (strstr (json_string_value (json_object_get (skip, "reason")),
                             "workload pick small/float32 (warp_row): the confirmation on w2 disagrees at "
                             "that workload"));
    json_decref (out);
    /* refuted, not unconfirmed: --unconfirmed does not take it either */
    assert_int_equal (ak_pf_install (fx, "B000003", "loose3", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 2);
    json_decref (out);

    /* no winner promoted (a kernel baseline kept): the pick's workload
       alone goes in */
    bool kept[1] = { false };
    ak_pf_batch (fx, "B000004", "complete", classes, kept, 1, 2, &rid);
    s_pick_task (fx, "B000004", "R00000046", 8, 3.0, NULL, NULL, 1);
    assert_int_equal (ak_pf_install (fx, "B000004", "kept", false, &out, &err), 0);
    assert_int_equal (json_array_size (json_object_get (out, "installed")), 1);
    json_decref (out);
    p = ak_pf_show (fx, "kept");
    c = ak_pf_class (p, AK_PF_CLASS_A);
    assert_int_equal (json_array_size (json_object_get (c, "entries")), 1);
    assert_non_null (s_entry_of (c, "softmax/rows=32,cols=128/float32"));
    json_decref (p);
}

static void test_replace_rules (void **state)
{
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *a[1] = { AK_PF_CLASS_A }, *b[1] = { AK_PF_CLASS_B };
    bool yes[1] = { true };
    ak_pf_batch (fx, "B000001", "complete", a, yes, 1, 2, &rid);
    ak_pf_batch (fx, "B000002", "complete", a, yes, 1, 4, &rid);
    ak_pf_batch (fx, "B000003", "complete", b, yes, 1, 8, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), 0);
    json_decref (out);
    json_t *before = ak_pf_show (fx, "prod");

    /* the same entries again: refused, nothing written */
    assert_int_equal (ak_pf_install (fx, "B000002", "prod", false, &out, &err), AK_EEXIST);
    assert_non_null (strstr (err.msg, "--replace"));
    assert_non_null (strstr (err.msg, "softmax/rows=32,cols=128/float32"));
    json_t *after = ak_pf_show (fx, "prod");
    assert_true (json_equal (before, after));
    json_decref (after);

    /* another class: installs without --replace, class A untouched */
    assert_int_equal (ak_pf_install (fx, "B000003", "prod", false, &out, &err), 0);
    json_decref (out);
    after = ak_pf_show (fx, "prod");
    assert_int_equal (json_array_size (json_object_get (after, "classes")), 2);
    assert_true (json_equal (ak_pf_class (before, AK_PF_CLASS_A), ak_pf_class (after, AK_PF_CLASS_A)));
    json_decref (after);

    /* --replace: class A's entries now come from B000002; B untouched */
    json_t *mid = ak_pf_show (fx, "prod");
    assert_int_equal (ak_pf_install (fx, "B000002", "prod", true, &out, &err), 0);
    assert_true (json_is_true (json_object_get (json_array_get (json_object_get (out, "installed"), 0), "replaced")));
    json_decref (out);
    after = ak_pf_show (fx, "prod");
    json_t *e = json_array_get (json_object_get (ak_pf_class (after, AK_PF_CLASS_A), "entries"), 0);
    assert_string_equal (json_string_value (json_object_get (e, "batch_id")), "B000002");
    assert_int_equal (json_array_size (json_object_get (ak_pf_class (after, AK_PF_CLASS_A), "entries")), 2);
    assert_true (json_equal (ak_pf_class (mid, AK_PF_CLASS_B), ak_pf_class (after, AK_PF_CLASS_B)));
    json_decref (after);
    json_decref (mid);
    json_decref (before);
}

static void test_refusals (void **state)
{
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *a[1] = { AK_PF_CLASS_A };
    bool yes[1] = { true }, no[1] = { false };
    ak_pf_batch (fx, "B000001", "open", a, yes, 1, 2, &rid);
    ak_pf_batch (fx, "B000002", "complete", a, no, 1, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), AK_ESTATE);
    assert_non_null (strstr (err.msg, "open"));
    assert_int_equal (ak_pf_install (fx, "B000002", "prod", false, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner"));
    assert_int_equal (ak_pf_install (fx, "B000009", "prod", false, &out, &err), AK_ENOTFOUND);
    assert_int_equal (ak_pf_install (fx, "B000002", "bad name/..", false, &out, &err), AK_EINVAL);
    assert_null (ak_pf_show (fx, "prod"));
}


static void test_export_import_round_trip (void **state)
{
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[2] = { AK_PF_CLASS_A, AK_PF_CLASS_B };
    bool promoted[2] = { true, true };
    ak_pf_batch (fx, "B000001", "complete", classes, promoted, 2, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), 0);
    json_decref (out);
    json_t *pkg = ak_pf_export (fx, "prod");
    assert_int_equal (json_object_size (json_object_get (pkg, "sources")), 2);   /* source + prelude */

    assert_int_equal (ak_pf_import (fx, pkg, "copy", false, &err), 0);
    ak_pf_assert_same (fx, "prod", "copy");
    /* again: exists; with replace: fine */
    assert_int_equal (ak_pf_import (fx, pkg, "copy", false, &err), AK_EEXIST);
    assert_int_equal (ak_pf_import (fx, pkg, "copy", true, &err), 0);

    /* entries without "kind" (a profile.json made before kinds) are the
       kernels they were */
    json_t *old = json_deep_copy (pkg), *cls, *ent;
    size_t ci, ei;
    json_array_foreach (json_object_get (json_object_get (old, "profile"), "classes"), ci, cls)
        json_array_foreach (json_object_get (cls, "entries"), ei, ent) {
            assert_string_equal (json_string_value (json_object_get (ent, "kind")), "kernel");
            json_object_del (ent, "kind");
        }
    assert_int_equal (ak_pf_import (fx, old, "old", false, &err), 0);
    ak_pf_assert_same (fx, "prod", "old");
    json_decref (old);

    /* a source that is not what its digest says */
    json_t *bad = json_deep_copy (pkg);
    const char *d;
    json_t *v;
    json_object_foreach (json_object_get (bad, "sources"), d, v) {
        json_string_set (v, "tampered");
        break;
    }
    assert_int_equal (ak_pf_import (fx, bad, "x", false, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "sha256"));
    json_decref (bad);
    /* an entry whose key does not match its shape */
    bad = json_deep_copy (pkg);
    json_t *e = json_array_get (json_object_get (json_array_get (json_object_get (json_object_get (bad, "profile"), "classes"), 0), "entries"), 0);
    json_array_set_new (json_object_get (e, "dims"), 1, json_integer (129));
    assert_int_equal (ak_pf_import (fx, bad, "x", false, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "key"));
    json_decref (bad);
    assert_null (ak_pf_show (fx, "x"));
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

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_install_records_promoted_only, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_install_confirmed_figures, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_install_needs_confirmation, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_install_workload_picks, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_replace_rules, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_refusals, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_export_import_round_trip, ak_pf_setup, ak_pf_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
