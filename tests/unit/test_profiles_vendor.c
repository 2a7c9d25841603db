/*  tests/unit/test_profiles_vendor.c: coordinator/profiles.c's entries
    beyond a plain kernel, on the fixture of tests/unit/unit_profiles.c:
    TMA tensor maps through install, export and import; vendor entries
    (the vendor-library baseline kept: the fixture's batches are written as
    a CUDA worker leaves them, so no GPU is needed), their round trip, the
    checks of malformed ones, and verify's view of them. */
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
    ak_pf_fx_t *fx = *state;
    ak_err_t err = { 0 };
    char spec_digest[65], src_digest[65];
    ak_pf_store_spec (fx->store, "flash_attention", "wgmma", spec_digest, src_digest);
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);

    Ak__TaskRecord *t = ak_pf_task ("B000003.0001", "B000003", "flash_attention", AK_PF_CLASS_A, "wgmma", "R00000100", "ok");
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
    Ak__Receipt *r = ak_pf_receipt (t, "R00000100", "ok", "NVIDIA H200", 9);
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
    win.device_class = (char *) AK_PF_CLASS_A;
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
    if (ak_pf_install (fx, "B000003", "att", false, &out, &err) != 0)
        fail_msg ("install: %s", err.msg);
    json_decref (out);
    json_t *pkg = ak_pf_export (fx, "att");
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
    if (ak_pf_import (fx, pkg, "att2", false, &err) != 0)
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
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    const char *classes[1] = { AK_PF_CLASS_A };
    bool promoted[1] = { true };
    ak_pf_batch (fx, "B000001", "complete", classes, promoted, 1, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), 0);
    json_decref (out);
    json_t *pkg = ak_pf_export (fx, "prod");
    json_t *e = s_entry0 (pkg);
    assert_string_equal (json_string_value (json_object_get (e, "dtype")), "float32");
    json_int_t count = json_integer_value (json_object_get (json_array_get (json_object_get (e, "inputs"), 0), "count"));
    assert_true (count >= 8);

    s_put_map (e, 0, count, 8, "none", 1, false);
    json_t *want = json_deep_copy (json_object_get (json_object_get (e, "launch"), "maps"));
    if (ak_pf_import (fx, pkg, "tm", false, &err) != 0)
        fail_msg ("import: %s", err.msg);
    json_t *back = ak_pf_export (fx, "tm");
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
        if (ak_pf_import (fx, pkg, "x", false, &err) != AK_EINVAL)
            fail_msg ("case %zu: imported", c);
        if (!strstr (err.msg, bad[c].why) || !strstr (err.msg, ".launch.maps"))
            fail_msg ("case %zu: '%s' does not say '%s'", c, err.msg, bad[c].why);
    }
    assert_null (ak_pf_show (fx, "x"));

    /* before maps were recorded: the count alone imports */
    json_object_del (json_object_get (e, "launch"), "maps");
    json_object_set_new (json_object_get (e, "launch"), "tensor_maps", json_integer (2));
    assert_int_equal (ak_pf_import (fx, pkg, "old", false, &err), 0);
    json_decref (pkg);
}

// ------------------------------------------------------------ vendor entries

/* Stores kernels/OP/spec.json as a blob; its digest into digest. */
static void s_put_spec (ak_pf_fx_t *fx, const char *op, char digest[65])
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

/* Tune task BATCH.000N of op on AK_PF_CLASS_A into txn (matmul's 3 shape
   keys, or 2 for softmax): candidate cand with one param (BM, ROWS for
   softmax) of value v, over float16 workloads small and large (and extra,
   which the receipt never times, when extra), whose receipt (status,
   R<task id>) timed it at speedups[k] the baseline's 10 * (k + 1) us at
   workload k. */
static void s_put_tune (ak_pf_fx_t *fx, ak_txn_t *txn, const char *batch_id, int n, const char *op,
                        const char *spec_digest, const char *status, const char *cand, int64_t v,
                        const double speedups[2], bool extra)
{
    ak_err_t err = { 0 };
    char task_id[32], rid[40];
    snprintf (task_id, sizeof task_id, "%s.%04d", batch_id, n);
    snprintf (rid, sizeof rid, "R%s", task_id);
    bool mm = strcmp (op, "matmul") == 0;
    Ak__TaskRecord *t = ak_pf_task (task_id, batch_id, op, AK_PF_CLASS_A, cand, rid, status);
    const char *names[1] = { mm ? "BM" : "ROWS" };
    t->params = ak_cpb_params_new (names, &v, 1);
    t->n_params = 1;
    ak_cpb_set (&t->spec_digest, spec_digest);
    ak_cpb_set (&t->candidate_digest, fx->src_digest);
    size_t nw = extra ? 3 : 2;
    static const char *const wnames[3] = { "small", "large", "extra" };
    t->workloads = ak_malloc (nw * sizeof *t->workloads);
    for (size_t k = 0; k < nw; k++) {
        Ak__Workload *w = t->workloads[k] = ak_pf_workload (wnames[k], 64 << k, 64 << k);
        ak_cpb_set (&w->dtype, "float16");
        if (mm) {
            w->dims = ak_realloc (w->dims, 3 * sizeof *w->dims);
            w->dims[2] = 32;
            w->n_dims = 3;
        }
    }
    t->n_workloads = nw;
    assert_int_equal (ak_store_put_task (txn, t, &err), 0);
    Ak__Receipt *r = ak_pf_receipt (t, rid, status, "NVIDIA H200", 9);
    for (int k = 0; k < 2 && strcmp (status, "ok") == 0; k++) {
        Ak__WorkloadTiming *wt = ak_malloc (sizeof *wt);
        ak__workload_timing__init (wt);
        wt->workload = (Ak__Workload *) ak_cpb_dup ((ProtobufCMessage *) t->workloads[k]);
        wt->baseline = ak_malloc (sizeof *wt->baseline);
        ak__stats__init (wt->baseline);
        wt->baseline->median_us = 10.0 * (k + 1);
        wt->candidate = ak_malloc (sizeof *wt->candidate);
        ak__stats__init (wt->candidate);
        wt->candidate->median_us = 10.0 * (k + 1) / speedups[k];
        wt->speedup = speedups[k];
        wt->speedup_noise = 0.02;
        r->timings[r->n_timings++] = wt;
    }
    assert_int_equal (ak_store_put_receipt (txn, r, &err), 0);
    ak__receipt__free_unpacked (r, NULL);
    ak__task_record__free_unpacked (t, NULL);
}

/* Complete batch batch_id into txn, its winner of op on AK_PF_CLASS_A not
   promoted (the baseline stays) for reason. */
static void s_put_kept (ak_txn_t *txn, const char *batch_id, const char *op, const char *reason)
{
    ak_err_t err = { 0 };
    Ak__BatchRecord b = AK__BATCH_RECORD__INIT;
    b.batch_id = (char *) batch_id;
    b.name = (char *) "t";
    b.state = (char *) "complete";
    Ak__Winner *w = ak_malloc (sizeof *w);
    ak__winner__init (w);
    ak_cpb_set (&w->op, op);
    ak_cpb_set (&w->device_class, AK_PF_CLASS_A);
    ak_cpb_set (&w->reason, reason);
    b.winners = &w;
    b.n_winners = 1;
    assert_int_equal (ak_store_put_batch (txn, &b, &err), 0);
    ak__winner__free_unpacked (w, NULL);
}

/* A complete batch of one cuda tune task of op whose receipt (status)
   timed it at speedup x the baseline's on two float16 workloads, and the
   winner not promoted (the baseline stays): what a batch where nothing
   beat the baseline leaves. */
static void s_kept_batch (ak_pf_fx_t *fx, const char *batch_id, const char *op, const char *spec_digest,
                          const char *status, double speedup)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    bool mm = strcmp (op, "matmul") == 0;
    const double speedups[2] = { speedup, speedup };
    s_put_tune (fx, txn, batch_id, 1, op, spec_digest, status, mm ? "mma" : "warp_row", 64, speedups, false);
    char *why = ak_sprintf ("best candidate %s BM=64: %.2fx +- 0.02, not beyond the 3%% threshold by more "
                            "than its noise", mm ? "mma" : "warp_row", speedup);
    s_put_kept (txn, batch_id, op, why);
    free (why);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
}

static json_t *s_entry_at (json_t *profile, size_t i)
{
    return json_array_get (json_object_get (ak_pf_class (profile, AK_PF_CLASS_A), "entries"), i);
}

/* Profile prod from a matmul batch whose cuBLASLt baseline was kept (the
   best candidate at speedup), installed as a plain install; its package. */
static json_t *s_vendor_prod (ak_pf_fx_t *fx, double speedup)
{
    char mm[65];
    s_put_spec (fx, "matmul", mm);
    s_kept_batch (fx, "B000001", "matmul", mm, "ok", speedup);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install_strict (fx, "B000001", "prod", &out, &err), 0);
    json_decref (out);
    return ak_pf_export (fx, "prod");
}

/* The baseline kept on an operator whose baseline is cuBLASLt: a vendor
   entry per workload, installed without --unconfirmed (nothing to
   confirm), with the library, the reason and its time; kept on a kernel
   baseline, or where no candidate ran against the library: skipped. */
static void test_install_vendor_entry (void **state)
{
    ak_pf_fx_t *fx = *state;
    char mm[65], sm[65];
    s_put_spec (fx, "matmul", mm);
    s_put_spec (fx, "softmax", sm);
    s_kept_batch (fx, "B000001", "matmul", mm, "ok", 1.01);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install_strict (fx, "B000001", "prod", &out, &err), 0);
    json_t *inst = json_object_get (out, "installed");
    assert_int_equal (json_array_size (inst), 2);
    assert_int_equal (json_array_size (json_object_get (out, "skipped")), 0);
    assert_string_equal (json_string_value (json_object_get (json_array_get (inst, 0), "kind")), "vendor");
    assert_string_equal (json_string_value (json_object_get (json_array_get (inst, 0), "vendor")), "cublaslt");
    json_decref (out);

    json_t *p = ak_pf_show (fx, "prod");
    json_t *e = s_entry_at (p, 1);
    assert_string_equal (json_string_value (json_object_get (e, "kind")), "vendor");
    assert_string_equal (json_string_value (json_object_get (e, "key")), "matmul/M=128,N=128,K=32/float16");
    assert_string_equal (json_string_value (json_object_get (e, "vendor")), "cublaslt");
    assert_string_equal (json_string_value (json_object_get (e, "vendor_op")), "matmul");
    assert_string_equal (json_string_value (json_object_get (e, "reason")),
                         "no candidate beat cuBLASLt beyond the noise at large/float16: the best there, mma BM=64, "
                         "ran 1.01x +- 0.02; over the operator's workloads: best candidate mma BM=64: 1.01x +- 0.02, "
                         "not beyond the 3% threshold by more than its noise");
    assert_true (fabs (json_number_value (json_object_get (e, "baseline_us")) - 20.0) < 1e-9);
    assert_true (fabs (json_number_value (json_object_get (e, "speedup")) - 1.01) < 1e-9);
    assert_string_equal (json_string_value (json_object_get (e, "candidate")), "mma");
    assert_string_equal (json_string_value (json_array_get (json_object_get (e, "evidence"), 0)), "RB000001.0001");
    assert_true (json_is_null (json_object_get (e, "confirmed_on")));
    /* no kernel: nothing a runtime could build or launch */
    assert_null (json_object_get (e, "source"));
    assert_null (json_object_get (e, "launch"));
    assert_null (json_object_get (e, "entry"));
    json_decref (p);

    /* a kernel baseline kept (softmax's cuda baseline): skipped, as before */
    s_kept_batch (fx, "B000002", "softmax", sm, "ok", 1.01);
    assert_int_equal (ak_pf_install (fx, "B000002", "k", false, &out, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "no promoted winner to install (1 skipped; softmax: best candidate warp_row"));
    /* every candidate failed: the library was never measured against one */
    s_kept_batch (fx, "B000003", "matmul", mm, "wrong_answer", 1.01);
    assert_int_equal (ak_pf_install (fx, "B000003", "f", false, &out, &err), AK_EINVAL);
    assert_null (ak_pf_show (fx, "f"));
}

/* Two tunes against cuBLASLt, neither beating it, each the closer one at a
   different workload (mma at small, wgmma at large and over both, where
   small regressed): each vendor entry's reason names its own workload, the
   candidate that came closest there and its speedup, then the
   operator-level reason; at a workload no receipt timed (extra) the
   operator-level reason alone.  The entries' figures stay those of the
   best task (wgmma) at the workload. */
static void test_vendor_reason_per_workload (void **state)
{
    ak_pf_fx_t *fx = *state;
    char mm[65];
    s_put_spec (fx, "matmul", mm);
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    const double near_small[2] = { 0.95, 0.80 }, near_large[2] = { 0.85, 0.97 };
    s_put_tune (fx, txn, "B000001", 1, "matmul", mm, "ok", "mma", 64, near_small, false);
    s_put_tune (fx, txn, "B000001", 2, "matmul", mm, "ok", "wgmma", 128, near_large, true);
    const char *op_why = "best candidate wgmma BM=128: 0.93x +- 0.02, but workload 'small' is 17.6% slower than "
                         "the baseline (limit 5%)";
    s_put_kept (txn, "B000001", "matmul", op_why);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    json_t *out = NULL;
    assert_int_equal (ak_pf_install_strict (fx, "B000001", "prod", &out, &err), 0);
    json_decref (out);

    static const struct {
        const char *workload;
        const char *reason;         /* before op_why */
        double speedup;             /* the entry's figure: wgmma's there */
    } want[] = {
        { "small", "no candidate beat cuBLASLt beyond the noise at small/float16: the best there, mma BM=64, "
                   "ran 0.95x +- 0.02; over the operator's workloads: ", 0.85 },
        { "large", "no candidate beat cuBLASLt beyond the noise at large/float16: the best there, wgmma BM=128, "
                   "ran 0.97x +- 0.02; over the operator's workloads: ", 0.97 },
        { "extra", "no candidate beat cuBLASLt beyond the noise: ", 0 },
    };
    json_t *p = ak_pf_show (fx, "prod");
    json_t *entries = json_object_get (ak_pf_class (p, AK_PF_CLASS_A), "entries");
    assert_int_equal (json_array_size (entries), 3);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *e = NULL, *x;
        size_t j;
        json_array_foreach (entries, j, x)
            if (strcmp (json_string_value (json_object_get (x, "workload")), want[i].workload) == 0)
                e = x;
        if (!e)
            fail_msg ("no entry for workload %s", want[i].workload);
        assert_string_equal (json_string_value (json_object_get (e, "kind")), "vendor");
        char *reason = ak_sprintf ("%s%s", want[i].reason, op_why);
        assert_string_equal (json_string_value (json_object_get (e, "reason")), reason);
        free (reason);
        assert_string_equal (json_string_value (json_object_get (e, "candidate")), "wgmma");
        assert_string_equal (json_string_value (json_object_get (e, "task_id")), "B000001.0002");
        assert_true (fabs (json_number_value (json_object_get (e, "speedup")) - want[i].speedup) < 1e-9);
    }
    json_decref (p);
}

/* A vendor entry goes through export, import and replace like a kernel
   entry: the same JSON back, no sources, and a kernel over it (or it
   over a kernel) only with --replace, the refusal naming the library. */
static void test_vendor_round_trip (void **state)
{
    ak_pf_fx_t *fx = *state;
    json_t *out = NULL, *pkg = s_vendor_prod (fx, 0.98);
    ak_err_t err = { 0 };
    assert_int_equal (json_object_size (json_object_get (pkg, "sources")), 0);
    assert_int_equal (ak_pf_import (fx, pkg, "copy", false, &err), 0);
    ak_pf_assert_same (fx, "prod", "copy");
    json_decref (pkg);

    /* the same keys again: refused, naming what is there */
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", false, &out, &err), AK_EEXIST);
    assert_non_null (strstr (err.msg, "(the vendor library cublaslt from batch B000001"));
    assert_int_equal (ak_pf_install (fx, "B000001", "prod", true, &out, &err), 0);
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
    ak_pf_fx_t *fx = *state;
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
        assert_int_equal (ak_pf_import (fx, bad, "x", false, &err), AK_EINVAL);
        if (!strstr (err.msg, cases[i].msg))
            fail_msg ("case %zu (%s): '%s' does not say '%s'", i, cases[i].field, err.msg, cases[i].msg);
        json_decref (bad);
    }
    assert_null (ak_pf_show (fx, "x"));
    json_decref (pkg);
}

/* Verify of a profile with vendor entries: each gets the verdict "vendor"
   at once (no kernel to run; counted in entries_vendor, in no reason and
   in no failure), its kernel entries are verified as ever (here with no
   live worker: unverified). */
static void test_verify_vendor_entry (void **state)
{
    ak_pf_fx_t *fx = *state;
    uint64_t rid = 0;
    json_decref (s_vendor_prod (fx, 1.0));
    const char *classes[1] = { AK_PF_CLASS_A };
    bool promoted[1] = { true };
    ak_pf_batch (fx, "B000002", "complete", classes, promoted, 1, 2, &rid);
    json_t *out = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_pf_install (fx, "B000002", "prod", false, &out, &err), 0);
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

    json_t *p = ak_pf_show (fx, "prod");
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
        cmocka_unit_test_setup_teardown (test_tensor_maps_round_trip, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_install_tensor_maps, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_install_vendor_entry, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_vendor_reason_per_workload, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_vendor_round_trip, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_vendor_import_rejects, ak_pf_setup, ak_pf_teardown),
        cmocka_unit_test_setup_teardown (test_verify_vendor_entry, ak_pf_setup, ak_pf_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
