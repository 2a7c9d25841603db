/*  tests/unit/test_promote.c: the promotion rule (coordinator/promote.c). */
#include "support.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "coordinator/promote.h"
#include "clock.h"
#include "cpb.h"
#include "util.h"

/* One workload of a test receipt: weight, baseline and candidate medians
   (us) and the absolute one-sigma noise of its speedup. */
typedef struct {
    const char *name;
    double weight, base_us, cand_us, noise;
} wl_t;

static Ak__Stats *s_stats (double median)
{
    Ak__Stats *s = ak_malloc (sizeof *s);
    ak__stats__init (s);
    s->n = 10;
    s->median_us = median;
    return s;
}

static Ak__Receipt *s_receipt (const char *receipt_id, const char *status, const wl_t *wl, size_t n)
{
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    ak_cpb_set (&r->receipt_id, receipt_id);
    ak_cpb_set (&r->status, status);
    ak_cpb_set (&r->kind, "tune");
    r->gates = ak_calloc (1, sizeof *r->gates);
    r->gates[0] = ak_malloc (sizeof *r->gates[0]);
    ak__gate_result__init (r->gates[0]);
    ak_cpb_set (&r->gates[0]->stage, "smoke");
    r->gates[0]->passed = strcmp (status, "ok") == 0;
    r->n_gates = 1;
    r->timings = ak_calloc (n ? n : 1, sizeof *r->timings);
    for (size_t i = 0; i < n; i++) {
        Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
        ak__workload_timing__init (t);
        t->workload = ak_malloc (sizeof *t->workload);
        ak__workload__init (t->workload);
        ak_cpb_set (&t->workload->name, wl[i].name);
        ak_cpb_set (&t->workload->dtype, "float32");
        t->workload->weight = wl[i].weight;
        t->baseline = s_stats (wl[i].base_us);
        t->candidate = s_stats (wl[i].cand_us);
        t->speedup = wl[i].base_us / wl[i].cand_us;
        t->speedup_noise = wl[i].noise;
        r->timings[i] = t;
    }
    r->n_timings = n;
    return r;
}

/* A candidate with one param BLOCK=block. */
typedef struct {
    ak_promote_cand_t cand;
    Ak__Param       **params;
    Ak__Receipt      *receipt;
} tc_t;

static void s_cand (tc_t *tc, const char *task_id, const char *name, int64_t block, Ak__Receipt *r)
{
    const char *names[] = { "BLOCK" };
    memset (tc, 0, sizeof *tc);
    tc->params = ak_cpb_params_new (names, &block, 1);
    tc->receipt = r;
    tc->cand.task_id = task_id;
    tc->cand.candidate_name = name;
    tc->cand.params = tc->params;
    tc->cand.nparams = 1;
    tc->cand.state = r ? (strcmp (r->status, "ok") == 0 ? "done" : "failed") : "poisoned";
    tc->cand.receipt = r;
}

static void s_cand_free (tc_t *tc)
{
    ak_cpb_params_free (tc->params, 1);
    if (tc->receipt)
        ak__receipt__free_unpacked (tc->receipt, NULL);
}

static const ak_promote_rule_t s_rule = { .threshold = 0.03, .max_regression = 0.05 };

/* Runs the rule over n candidates (copied out of tcs). */
static Ak__Winner *s_decide (const ak_promote_rule_t *rule, tc_t *tcs, size_t n, ak_promote_eval_t *ev)
{
    ak_promote_cand_t cands[8];
    for (size_t i = 0; i < n; i++)
        cands[i] = tcs[i].cand;
    Ak__Winner *w = NULL;
    assert_int_equal (ak_promote ("softmax", "host", rule, cands, n, ev, &w), 0);
    assert_non_null (w);
    assert_string_equal (w->op, "softmax");
    assert_string_equal (w->device_class, "host");
    return w;
}

// ------------------------------------------------------------------- tests

static void test_below_threshold (void **state)
{
    wl_t wl[] = { { "medium", 1, 100.0, 98.0, 0.001 } };
    tc_t tc;
    ak_promote_eval_t ev[1];
    s_cand (&tc, "B000001.0002", "blocked", 8, s_receipt ("R00000001", "ok", wl, 1));
    Ak__Winner *w = s_decide (&s_rule, &tc, 1, ev);
    assert_true (ev[0].ok);
    assert_false (ev[0].promotable);
    assert_true (fabs (ev[0].speedup - 100.0 / 98.0) < 1e-12);
    assert_false (w->promoted);
    assert_string_equal (w->task_id, "");
    assert_string_equal (w->reason, "best candidate blocked BLOCK=8: 1.02x +- 0.00, below the 3% threshold");
    ak__winner__free_unpacked (w, NULL);
    s_cand_free (&tc);
}

static void test_beyond_noise (void **state)
{
    wl_t wl[] = { { "medium", 1, 100.0, 80.0, 0.0125 }, { "large", 1, 200.0, 160.0, 0.0125 } };
    tc_t tc;
    ak_promote_eval_t ev[1];
    s_cand (&tc, "B000001.0002", "blocked", 8, s_receipt ("R00000007", "ok", wl, 2));
    Ak__Winner *w = s_decide (&s_rule, &tc, 1, ev);
    assert_true (ev[0].promotable);
    assert_string_equal (ev[0].reason, "");
    assert_true (w->promoted);
    assert_string_equal (w->task_id, "B000001.0002");
    assert_string_equal (w->receipt_id, "R00000007");
    assert_string_equal (w->candidate_name, "blocked");
    assert_int_equal (w->n_params, 1);
    assert_string_equal (w->params[0]->name, "BLOCK");
    assert_int_equal (w->params[0]->value, 8);
    assert_true (fabs (w->speedup - 1.25) < 1e-12);
    /* relative noise 0.01 on each workload: 0.01 * 1.25 */
    assert_true (fabs (w->noise - 0.0125) < 1e-12);
    assert_int_equal (w->tied, 1);
    assert_string_equal (w->reason, "");
    ak__winner__free_unpacked (w, NULL);
    s_cand_free (&tc);
}

static void test_weights (void **state)
{
    /* weighted_base = (3*10 + 1*100)/4, weighted_cand = (3*5 + 1*100)/4 */
    wl_t wl[] = { { "small", 3, 10.0, 5.0, 0.0 }, { "big", 1, 100.0, 100.0, 0.0 } };
    tc_t tc;
    ak_promote_eval_t ev[1];
    s_cand (&tc, "B000001.0002", "blocked", 8, s_receipt ("R1", "ok", wl, 2));
    Ak__Winner *w = s_decide (&s_rule, &tc, 1, ev);
    assert_true (fabs (ev[0].weighted_base_us - 32.5) < 1e-12);
    assert_true (fabs (ev[0].weighted_cand_us - 28.75) < 1e-12);
    assert_true (fabs (ev[0].speedup - 32.5 / 28.75) < 1e-12);
    assert_true (w->promoted);
    ak__winner__free_unpacked (w, NULL);
    s_cand_free (&tc);
}

static void test_noise_swallows_speedup (void **state)
{
    /* 1.053x is past the 3% threshold but its noise (3% relative) is not */
    wl_t wl[] = { { "medium", 1, 100.0, 95.0, 0.0316 } };
    tc_t tc;
    ak_promote_eval_t ev[1];
    s_cand (&tc, "B000001.0002", "blocked", 16, s_receipt ("R1", "ok", wl, 1));
    Ak__Winner *w = s_decide (&s_rule, &tc, 1, ev);
    assert_true (ev[0].ok);
    assert_true (ev[0].speedup > 1.03);
    assert_false (ev[0].promotable);
    assert_false (w->promoted);
    assert_non_null (strstr (w->reason, "blocked BLOCK=16: 1.05x +- 0.03"));
    assert_non_null (strstr (w->reason, "not beyond the 3% threshold by more than its noise"));
    ak__winner__free_unpacked (w, NULL);
    s_cand_free (&tc);
}

static void test_regression_blocks (void **state)
{
    /* much faster overall, but 'large' is 7% slower than the baseline */
    wl_t wl[] = { { "medium", 1, 100.0, 70.0, 0.0 }, { "large", 1, 100.0, 107.0, 0.0 } };
    wl_t ok[] = { { "medium", 1, 100.0, 90.0, 0.0 }, { "large", 1, 100.0, 104.0, 0.0 } };
    tc_t tc[2];
    ak_promote_eval_t ev[2];
    s_cand (&tc[0], "B000001.0002", "blocked", 8, s_receipt ("R1", "ok", wl, 2));
    Ak__Winner *w = s_decide (&s_rule, tc, 1, ev);
    assert_true (ev[0].speedup > 1.1);
    assert_false (ev[0].promotable);
    assert_false (w->promoted);
    assert_non_null (strstr (w->reason, "workload 'large' is 7.0% slower than the baseline (limit 5%)"));
    ak__winner__free_unpacked (w, NULL);

    /* 4% slower on one workload is within the limit: a slower-but-promotable
       candidate wins over the blocked faster one */
    s_cand (&tc[1], "B000001.0003", "blocked", 16, s_receipt ("R2", "ok", ok, 2));
    w = s_decide (&s_rule, tc, 2, ev);
    assert_false (ev[0].promotable);
    assert_true (ev[1].promotable);
    assert_true (w->promoted);
    assert_string_equal (w->task_id, "B000001.0003");
    ak__winner__free_unpacked (w, NULL);
    s_cand_free (&tc[0]);
    s_cand_free (&tc[1]);
}

/* The pick of workload name (promote.h), or NULL. */
static const Ak__WorkloadPick *s_pick (const Ak__Winner *w, const char *name)
{
    for (size_t i = 0; i < w->n_picks; i++)
        if (strcmp (w->picks[i]->workload, name) == 0) {
            assert_string_equal (w->picks[i]->dtype, "float32");
            return w->picks[i];
        }
    return NULL;
}

static void test_workload_picks (void **state)
{
    (void) state;
    /* A wins overall (1.43x); B is twice as fast on 'small' alone, slower
       than A on 'large'; C beats A on 'small' by 2.6%, under the 3%
       threshold; D beats everyone on 'small' but failed a gate; E is far
       ahead on 'small' by its figure, but its noise band swallows it */
    wl_t a[] = { { "small", 1, 100.0, 80.0, 0.0 }, { "large", 1, 100.0, 60.0, 0.0 } };
    wl_t b[] = { { "small", 1, 100.0, 50.0, 0.01 }, { "large", 1, 100.0, 95.0, 0.0 } };
    wl_t c[] = { { "small", 1, 100.0, 78.0, 0.0 }, { "large", 1, 100.0, 98.0, 0.0 } };
    wl_t d[] = { { "small", 1, 100.0, 20.0, 0.0 }, { "large", 1, 100.0, 50.0, 0.0 } };
    wl_t e[] = { { "small", 1, 100.0, 40.0, 2.0 }, { "large", 1, 100.0, 99.0, 0.0 } };
    tc_t tc[5];
    ak_promote_eval_t ev[5];
    s_cand (&tc[0], "B1.0002", "alpha", 8, s_receipt ("R1", "ok", a, 2));
    s_cand (&tc[1], "B1.0003", "beta", 8, s_receipt ("R2", "ok", b, 2));
    s_cand (&tc[2], "B1.0004", "gamma", 8, s_receipt ("R3", "ok", c, 2));
    s_cand (&tc[3], "B1.0005", "delta", 8, s_receipt ("R4", "wrong_answer", d, 2));
    s_cand (&tc[4], "B1.0006", "eps", 8, s_receipt ("R5", "ok", e, 2));
    Ak__Winner *w = s_decide (&s_rule, tc, 5, ev);
    assert_true (w->promoted);
    assert_string_equal (w->task_id, "B1.0002");
    assert_int_equal (w->n_picks, 1);
    const Ak__WorkloadPick *pk = s_pick (w, "small");
    assert_non_null (pk);
    assert_string_equal (pk->task_id, "B1.0003");
    assert_string_equal (pk->receipt_id, "R2");
    assert_string_equal (pk->candidate_name, "beta");
    assert_int_equal (pk->n_params, 1);
    assert_string_equal (pk->replaces, "winner");
    assert_true (fabs (pk->speedup - 2.0) < 1e-12);
    assert_true (fabs (pk->noise - 0.01) < 1e-12);
    assert_true (fabs (pk->over - 2.0 / 1.25) < 1e-12);
    assert_null (s_pick (w, "large"));

    /* the winner changes (as a confirmation round may decide): picks are
       decided again against it; B is then the winner and A the pick of
       'large' */
    ak_cpb_set (&w->task_id, "B1.0003");
    ak_promote_cand_t cands[5];
    for (size_t i = 0; i < 5; i++)
        cands[i] = tc[i].cand;
    assert_int_equal (ak_promote_picks (&s_rule, cands, ev, 5, w), 1);
    pk = s_pick (w, "large");
    assert_non_null (pk);
    assert_string_equal (pk->task_id, "B1.0002");
    assert_true (fabs (pk->over - (100.0 / 60.0) / (100.0 / 95.0)) < 1e-12);
    assert_null (s_pick (w, "small"));
    ak__winner__free_unpacked (w, NULL);

    /* nothing promoted (every candidate is > 5% slower on some workload):
       a pick replaces the baseline where it beats it beyond the noise */
    wl_t f[] = { { "small", 1, 100.0, 60.0, 0.0 }, { "large", 1, 100.0, 110.0, 0.0 } };
    wl_t g[] = { { "small", 1, 100.0, 120.0, 0.0 }, { "large", 1, 100.0, 99.0, 0.0 } };
    tc_t nt[2];
    s_cand (&nt[0], "B1.0007", "zeta", 8, s_receipt ("R6", "ok", f, 2));
    s_cand (&nt[1], "B1.0008", "eta", 8, s_receipt ("R7", "ok", g, 2));
    w = s_decide (&s_rule, nt, 2, ev);
    assert_false (w->promoted);
    assert_int_equal (w->n_picks, 1);
    pk = s_pick (w, "small");
    assert_non_null (pk);
    assert_string_equal (pk->task_id, "B1.0007");
    assert_string_equal (pk->replaces, "baseline");
    assert_true (fabs (pk->over - 100.0 / 60.0) < 1e-12);
    assert_null (s_pick (w, "large"));              /* 1.01x: under the threshold */
    ak__winner__free_unpacked (w, NULL);
    for (size_t i = 0; i < 5; i++)
        s_cand_free (&tc[i]);
    s_cand_free (&nt[0]);
    s_cand_free (&nt[1]);
}

static void test_incumbent (void **state)
{
    wl_t wl[] = { { "medium", 1, 100.0, 80.0, 0.0 } };
    tc_t tc;
    ak_promote_eval_t ev[1];
    s_cand (&tc, "B000001.0002", "blocked", 8, s_receipt ("R1", "ok", wl, 1));

    ak_promote_rule_t rule = s_rule;
    rule.has_incumbent = true;
    rule.incumbent_us = 81.0;           /* 1.0125x: not 3% better than the incumbent */
    Ak__Winner *w = s_decide (&rule, &tc, 1, ev);
    assert_false (ev[0].promotable);
    assert_false (w->promoted);
    assert_non_null (strstr (w->reason, "over the incumbent"));
    ak__winner__free_unpacked (w, NULL);

    rule.incumbent_us = 90.0;           /* 1.125x over the incumbent */
    w = s_decide (&rule, &tc, 1, ev);
    assert_true (w->promoted);
    ak__winner__free_unpacked (w, NULL);

    rule.has_incumbent = false;         /* no incumbent: baseline alone decides */
    rule.incumbent_us = 1.0;
    w = s_decide (&rule, &tc, 1, ev);
    assert_true (w->promoted);
    ak__winner__free_unpacked (w, NULL);
    s_cand_free (&tc);
}

static void test_ties (void **state)
{
    /* 1.30x and 1.28x with 0.03 noise tie; 1.10x is outside the band */
    wl_t a[] = { { "medium", 1, 130.0, 100.0, 0.03 } };
    wl_t b[] = { { "medium", 1, 128.0, 100.0, 0.03 } };
    wl_t c[] = { { "medium", 1, 110.0, 100.0, 0.0 } };
    tc_t tc[4];
    ak_promote_eval_t ev[4];
    s_cand (&tc[0], "B000001.0004", "blocked", 16, s_receipt ("R1", "ok", a, 1));
    s_cand (&tc[1], "B000001.0003", "blocked", 8, s_receipt ("R2", "ok", b, 1));
    s_cand (&tc[2], "B000001.0002", "alpha", 4, s_receipt ("R3", "ok", c, 1));
    Ak__Winner *w = s_decide (&s_rule, tc, 3, ev);
    assert_true (w->promoted);
    assert_int_equal (w->tied, 2);
    /* same name: params ascending picks BLOCK=8 although BLOCK=16 was faster */
    assert_string_equal (w->task_id, "B000001.0003");
    assert_int_equal (w->params[0]->value, 8);
    assert_true (fabs (w->speedup - 1.28) < 1e-12);
    assert_non_null (strstr (w->reason, "2 candidates within noise"));
    ak__winner__free_unpacked (w, NULL);

    /* the order of the input does not matter */
    tc_t rev[3] = { tc[2], tc[1], tc[0] };
    w = s_decide (&s_rule, rev, 3, ev);
    assert_string_equal (w->task_id, "B000001.0003");
    ak__winner__free_unpacked (w, NULL);

    /* a name that sorts first wins inside the band; then task id breaks
       a tie of equal name and params */
    wl_t d[] = { { "medium", 1, 129.0, 100.0, 0.03 } };
    s_cand (&tc[3], "B000001.0009", "aaa", 32, s_receipt ("R4", "ok", d, 1));
    w = s_decide (&s_rule, tc, 4, ev);
    assert_string_equal (w->candidate_name, "aaa");
    assert_int_equal (w->tied, 3);
    ak__winner__free_unpacked (w, NULL);
    tc_t same[2] = { tc[1], tc[1] };
    same[0].cand.task_id = "B000001.0031";
    same[1].cand.task_id = "B000001.0030";
    w = s_decide (&s_rule, same, 2, ev);
    assert_string_equal (w->task_id, "B000001.0030");
    ak__winner__free_unpacked (w, NULL);
    for (int i = 0; i < 4; i++)
        s_cand_free (&tc[i]);
}

static void test_none_or_all_failed (void **state)
{
    Ak__Winner *w = s_decide (&s_rule, NULL, 0, NULL);
    assert_false (w->promoted);
    assert_string_equal (w->reason, "no candidates for this operator and device class");
    ak__winner__free_unpacked (w, NULL);

    wl_t wl[] = { { "medium", 1, 100.0, 50.0, 0.0 } };
    tc_t tc[4];
    ak_promote_eval_t ev[4];
    s_cand (&tc[0], "B1.0002", "blocked", 8, s_receipt ("R1", "wrong_answer", wl, 1));
    s_cand (&tc[1], "B1.0003", "blocked", 16, s_receipt ("R2", "compile_error", NULL, 0));
    s_cand (&tc[2], "B1.0004", "blocked", 32, s_receipt ("R3", "wrong_answer", wl, 1));
    s_cand (&tc[3], "B1.0005", "blocked", 64, NULL);
    tc[3].cand.last_error = "lease expired (w1)";
    w = s_decide (&s_rule, tc, 4, ev);
    assert_false (w->promoted);
    assert_string_equal (w->reason,
                         "no candidate passed: all 4 failed (wrong_answer x2, compile_error x1, poisoned x1)");
    assert_string_equal (ev[3].status, "poisoned");
    assert_non_null (strstr (ev[3].reason, "lease expired (w1)"));
    ak__winner__free_unpacked (w, NULL);
    for (int i = 0; i < 4; i++)
        s_cand_free (&tc[i]);
}

/* A batch holds up to 100,000 candidates of one operator: deciding that
   none passed is one pass over them (it once compared every pair, and a
   finished 100,000-task batch held the coordinator's loop for minutes). */
static void test_all_failed_at_batch_scale (void **state)
{
    (void) state;
    enum { N = 100000 };
    ak_promote_cand_t *cands = ak_calloc (N, sizeof *cands);
    ak_promote_eval_t *ev = ak_calloc (N, sizeof *ev);
    for (size_t i = 0; i < N; i++) {
        cands[i].task_id = "B1.x";
        cands[i].candidate_name = "scale";
        cands[i].state = i % 3 ? "poisoned" : "cancelled";
    }
    Ak__Winner *w = NULL;
    uint64_t t0 = ak_clock_mono_ms ();
    assert_int_equal (ak_promote ("softmax", "host", &s_rule, cands, N, ev, &w), 0);
    uint64_t ms = ak_clock_mono_ms () - t0;
    assert_false (w->promoted);
    assert_string_equal (w->reason, "no candidate passed: all 100000 failed (cancelled x33334, poisoned x66666)");
    assert_true (ms < 5000);        /* ~10 ms here; minutes when it was quadratic */
    ak__winner__free_unpacked (w, NULL);
    free (cands);
    free (ev);
}

static void test_untrusted_timings (void **state)
{
    wl_t nan_wl[] = { { "medium", 1, NAN, 50.0, 0.0 } };
    wl_t zero_wl[] = { { "medium", 0, 100.0, 50.0, 0.0 } };
    wl_t neg_noise[] = { { "medium", 1, 100.0, 50.0, -1.0 } };
    tc_t tc[4];
    ak_promote_eval_t ev[4];
    s_cand (&tc[0], "B1.0002", "blocked", 8, s_receipt ("R1", "ok", nan_wl, 1));
    s_cand (&tc[1], "B1.0003", "blocked", 16, s_receipt ("R2", "ok", zero_wl, 1));
    s_cand (&tc[2], "B1.0004", "blocked", 32, s_receipt ("R3", "ok", neg_noise, 1));
    s_cand (&tc[3], "B1.0005", "blocked", 64, s_receipt ("R4", "ok", NULL, 0));
    Ak__Winner *w = s_decide (&s_rule, tc, 4, ev);
    assert_false (w->promoted);
    for (int i = 0; i < 4; i++) {
        assert_false (ev[i].ok);
        assert_string_equal (ev[i].status, "invalid");
    }
    ak__winner__free_unpacked (w, NULL);

    /* a failed gate makes a receipt with status ok fail */
    wl_t wl[] = { { "medium", 1, 100.0, 50.0, 0.0 } };
    Ak__Receipt *r = s_receipt ("R5", "ok", wl, 1);
    r->gates[0]->passed = false;
    ak_cpb_set (&r->gates[0]->detail, "3/40 failed");
    tc_t g;
    s_cand (&g, "B1.0006", "blocked", 8, r);
    w = s_decide (&s_rule, &g, 1, ev);
    assert_false (w->promoted);
    assert_string_equal (ev[0].status, "gate_failed");
    assert_string_equal (ev[0].reason, "gate smoke failed: 3/40 failed");
    ak__winner__free_unpacked (w, NULL);
    s_cand_free (&g);
    for (int i = 0; i < 4; i++)
        s_cand_free (&tc[i]);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_below_threshold),
        cmocka_unit_test (test_beyond_noise),
        cmocka_unit_test (test_weights),
        cmocka_unit_test (test_noise_swallows_speedup),
        cmocka_unit_test (test_regression_blocks),
        cmocka_unit_test (test_workload_picks),
        cmocka_unit_test (test_incumbent),
        cmocka_unit_test (test_ties),
        cmocka_unit_test (test_none_or_all_failed),
        cmocka_unit_test (test_all_failed_at_batch_scale),
        cmocka_unit_test (test_untrusted_timings),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
