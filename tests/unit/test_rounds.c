/*  tests/unit/test_rounds.c: budgeted search and the confirmation round
    (coordinator/rounds.c, coordinator/search.c): sampling, stage sizes, the choice of the best K,
    stage-2 and confirm tasks created in the commit of the receipt that
    completed the stage (once, however often receipts are re-sent), the
    avoid_worker rule of the queue, the rebuild after a restart, and the
    promotion decision after the confirmation. */
#include "support.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpb.h"
#include "coordinator/expand.h"
#include "coordinator/intake.h"
#include "coordinator/promote.h"
#include "coordinator/registry.h"
#include "coordinator/results.h"
#include "coordinator/rounds.h"
#include "coordinator/search.h"
#include "coordinator/sched.h"
#include "spec.h"
#include "store.h"
#include "util.h"

/* BLOCK 1..8 x UNROLL 1..4 with BLOCK*UNROLL <= 16: 25 valid of 32 */
static const char *s_cands =
    "[{\"name\": \"blocked\", \"backend\": \"host\", \"source\": \"blocked.c\","
    "  \"params\": {\"BLOCK\": [1, 2, 3, 4, 5, 6, 7, 8], \"UNROLL\": [1, 2, 3, 4]},"
    "  \"constraints\": [\"BLOCK*UNROLL <= 16\"]}]";
#define S_VALID 25

static void s_write_op (const char *dir)
{
    char *sub = ak_path_join (dir, "opa");
    assert_int_equal (ak_mkdir_p (sub, 0700, NULL), 0);
    char *spec = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"opa\", \"keys\": [\"rows\", \"cols\"],"
        " \"dtypes\": [\"float32\"], \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5}},"
        " \"sizes\": [{\"name\": \"small\", \"size\": {\"rows\": 4, \"cols\": 8}}],"
        " \"stability_size\": \"small\", \"flops\": \"rows*cols\", \"bytes\": \"2*rows*cols*b\","
        " \"inputs\": [{\"name\": \"x\", \"count\": \"rows*cols\", \"range\": [-1, 1]}],"
        " \"outputs\": [{\"name\": \"y\", \"count\": \"rows*cols\"}],"
        " \"reference\": \"ref.c\", \"baselines\": [{\"backend\": \"host\", \"source\": \"base.c\"}],"
        " \"candidates\": %s}", s_cands);
    free (ak_test_write (sub, "spec.json", spec));
    free (ak_test_write (sub, "ref.c", "/* reference */\n"));
    free (ak_test_write (sub, "base.c", "/* baseline */\n"));
    free (ak_test_write (sub, "blocked.c", "/* blocked */\n"));
    free (spec);
    free (sub);
}

static ak_manifest_t *s_manifest (const char *dir, const char *policy)
{
    s_write_op (dir);
    char *text = ak_sprintf ("{\"schema_version\": 1, \"name\": \"r\", \"targets\": [\"host\"],"
                             " \"policy\": {%s}, \"ops\": [{\"spec\": \"opa/spec.json\"}]}", policy);
    char *path = ak_test_write (dir, "batch.json", text);
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_load (path, &m, &err))
        fail_msg ("manifest: %s", err.msg);
    free (text);
    free (path);
    return m;
}

static int64_t s_param (Ak__Param *const *params, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp (params[i]->name, name) == 0)
            return params[i]->value;
    fail_msg ("no param %s", name);
    return 0;
}

// ---------------------------------------------------------------- sampling

static void test_sample (void **state)
{
    char *dir = ak_test_tmpdir ("rounds");
    ak_manifest_t *m = s_manifest (dir, "");
    const ak_candidate_t *cand = &m->ops[0].spec->candidates[0];
    ak_err_t err = { 0 };
    ak_search_sample_t a, b, c, all;
    assert_int_equal (ak_search_sample (cand, 42, "opa/host/blocked", 8, &a, &err), 0);
    assert_int_equal (ak_search_sample (cand, 42, "opa/host/blocked", 8, &b, &err), 0);
    assert_int_equal (ak_search_sample (cand, 43, "opa/host/blocked", 8, &c, &err), 0);
    assert_int_equal (a.valid, S_VALID);
    assert_int_equal (a.n, 8);
    assert_int_equal (a.nparams, 2);
    /* deterministic from the seed, another seed another sample */
    assert_memory_equal (a.values, b.values, 8 * 2 * sizeof *a.values);
    assert_true (memcmp (a.values, c.values, 8 * 2 * sizeof *a.values) != 0);
    for (size_t i = 0; i < a.n; i++) {
        int64_t bl = a.values[2 * i], un = a.values[2 * i + 1];
        assert_true (bl * un <= 16);            /* constraints hold */
        for (size_t j = 0; j < i; j++)          /* without replacement */
            assert_false (a.values[2 * j] == bl && a.values[2 * j + 1] == un);
    }
    /* a budget over the space: every valid configuration, in walk order */
    assert_int_equal (ak_search_sample (cand, 42, "x", 100, &all, &err), 0);
    assert_int_equal (all.n, S_VALID);
    assert_int_equal (all.values[0], 1);
    assert_int_equal (all.values[1], 1);
    assert_int_equal (all.values[2 * (S_VALID - 1)], 8);
    assert_int_equal (all.values[2 * (S_VALID - 1) + 1], 2);
    /* uniform: over 2000 seeds each valid configuration comes out about
       2000 * 5 / 25 = 400 times */
    int counts[9][5] = { { 0 } };
    for (uint64_t seed = 0; seed < 2000; seed++) {
        ak_search_sample_t s;
        assert_int_equal (ak_search_sample (cand, seed, "u", 5, &s, &err), 0);
        for (size_t i = 0; i < s.n; i++)
            counts[s.values[2 * i]][s.values[2 * i + 1]]++;
        ak_search_sample_clear (&s);
    }
    for (int bl = 1; bl <= 8; bl++)
        for (int un = 1; un <= 4; un++) {
            if (bl * un > 16)
                assert_int_equal (counts[bl][un], 0);
            else if (counts[bl][un] < 320 || counts[bl][un] > 480)
                fail_msg ("BLOCK=%d UNROLL=%d sampled %d times of 2000 (expected about 400)", bl, un,
                          counts[bl][un]);
        }
    ak_search_sample_clear (&a);
    ak_search_sample_clear (&b);
    ak_search_sample_clear (&c);
    ak_search_sample_clear (&all);
    ak_manifest_destroy (&m);
    ak_test_rmtree (dir);
    free (dir);
}

static void test_stage_sizes_and_policy (void **state)
{
    assert_int_equal (ak_search_stage_size (16, 2, 2, 1), 16);
    assert_int_equal (ak_search_stage_size (16, 2, 2, 2), 2);
    assert_int_equal (ak_search_stage_size (16, 2, 3, 2), 6);      /* ceil(16 * sqrt(2/16)) */
    assert_int_equal (ak_search_stage_size (16, 2, 3, 3), 2);
    assert_int_equal (ak_search_stage_size (3, 4, 2, 2), 3);       /* keep beyond the sample */
    Ak__Policy p = AK__POLICY__INIT;
    p.max_time_ms = 2000;
    p.min_samples = 10;
    p.max_samples = 200;
    p.short_max_time_ms = 150;
    p.search_rounds = 3;
    ak_search_stage_policy (&p, 1);
    assert_int_equal (p.max_time_ms, 150);
    assert_int_equal (p.max_samples, 50);
    p.max_time_ms = 2000;
    p.max_samples = 200;
    ak_search_stage_policy (&p, 2);
    assert_int_equal (p.max_time_ms, 300);
    p.max_time_ms = 2000;
    p.max_samples = 200;
    ak_search_stage_policy (&p, 3);                 /* the last stage: full timing */
    assert_int_equal (p.max_time_ms, 2000);
    assert_int_equal (p.max_samples, 200);
}

static void test_expand_strategies (void **state)
{
    char *dir = ak_test_tmpdir ("rounds");
    ak_err_t err = { 0 };
    struct { const char *policy; size_t tunes; const char *strategy; uint32_t stage; uint32_t max_time; } cases[] = {
        { "", S_VALID, "exhaustive", 0, 2000 },                          /* 25 <= budget 64 */
        { "\"search\": {\"budget\": 6, \"keep\": 2}", 6, "halving", 1, 200 },
        { "\"search\": {\"budget\": 6, \"strategy\": \"exhaustive\"}", S_VALID, "exhaustive", 0, 2000 },
        { "\"search\": {\"budget\": 30, \"strategy\": \"halving\", \"short_max_time_ms\": 50}", S_VALID, "halving", 1, 50 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ak_manifest_t *m = s_manifest (dir, cases[k].policy);
        ak_expansion_t *exp = NULL;
        assert_int_equal (ak_expand (m, "B000001", "d", 1, &exp, &err), 0);
        size_t tunes = 0;
        for (size_t i = 0; i < exp->ntasks; i++) {
            const Ak__TaskRecord *t = exp->tasks[i];
            if (strcmp (t->kind, "tune") != 0)
                continue;
            tunes++;
            assert_int_equal (t->stage, cases[k].stage);
            assert_int_equal (t->policy->max_time_ms, cases[k].max_time);
            assert_true (s_param (t->params, t->n_params, "BLOCK") * s_param (t->params, t->n_params, "UNROLL") <= 16);
        }
        assert_int_equal (tunes, cases[k].tunes);
        assert_int_equal (exp->ntasks, tunes + 1);
        assert_int_equal (exp->batch->n_search, 1);
        const Ak__SearchSummary *s = exp->batch->search[0];
        assert_string_equal (s->strategy, cases[k].strategy);
        assert_int_equal (s->valid, S_VALID);
        assert_int_equal (s->sampled, cases[k].tunes);
        assert_true (exp->batch->policy->max_time_ms == 2000);     /* the batch keeps the full policy */
        ak_expansion_destroy (&exp);
        ak_manifest_destroy (&m);
    }
    ak_test_rmtree (dir);
    free (dir);
}

static void test_policy_parsing (void **state)
{
    char *dir = ak_test_tmpdir ("rounds");
    ak_manifest_t *m = s_manifest (dir, "");
    /* defaults */
    assert_string_equal (m->policy.search_strategy, "");
    assert_int_equal (m->policy.search_budget, 64);
    assert_int_equal (m->policy.search_keep, 4);
    assert_int_equal (m->policy.search_rounds, 2);
    assert_int_equal (m->policy.short_max_time_ms, 200);
    assert_true (m->policy.confirm);
    assert_true (m->policy.implausible == 10.0);
    /* the bundle carries every field to the coordinator */
    char *bundle = ak_manifest_to_bundle (m);
    ak_manifest_destroy (&m);
    m = s_manifest (dir, "\"search\": {\"strategy\": \"halving\", \"budget\": 9, \"keep\": 3, \"rounds\": 3,"
                         " \"short_max_time_ms\": 70}, \"confirm\": false, \"implausible\": 4");
    free (bundle);
    bundle = ak_manifest_to_bundle (m);
    ak_manifest_t *b = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_manifest_parse_bundle (bundle, strlen (bundle), "bundle", &b, &err), 0);
    assert_string_equal (b->policy.search_strategy, "halving");
    assert_int_equal (b->policy.search_budget, 9);
    assert_int_equal (b->policy.search_keep, 3);
    assert_int_equal (b->policy.search_rounds, 3);
    assert_int_equal (b->policy.short_max_time_ms, 70);
    assert_false (b->policy.confirm);
    assert_true (b->policy.implausible == 4.0);
    ak_manifest_destroy (&b);
    ak_manifest_destroy (&m);
    free (bundle);
    /* each bad field is named */
    struct { const char *policy; const char *field; } bad[] = {
        { "\"search\": {\"strategy\": \"greedy\"}", "policy.search.strategy" },
        { "\"search\": {\"budget\": 0}", "policy.search.budget" },
        { "\"search\": {\"budget\": 4, \"keep\": 5}", "policy.search.keep" },
        { "\"search\": {\"rounds\": 1}", "policy.search.rounds" },
        { "\"search\": {\"sample\": 4}", "policy.search.sample" },
        { "\"search\": 3", "policy.search" },
        { "\"confirm\": 1", "policy.confirm" },
        { "\"implausible\": 1", "policy.implausible" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s_write_op (dir);
        char *text = ak_sprintf ("{\"schema_version\": 1, \"name\": \"r\", \"targets\": [\"host\"],"
                                 " \"policy\": {%s}, \"ops\": [{\"spec\": \"opa/spec.json\"}]}", bad[i].policy);
        char *path = ak_test_write (dir, "bad.json", text);
        memset (&err, 0, sizeof err);
        assert_int_not_equal (ak_manifest_load (path, &m, &err), 0);
        if (!strstr (err.msg, bad[i].field))
            fail_msg ("%s: error '%s' does not name %s", bad[i].policy, err.msg, bad[i].field);
        free (text);
        free (path);
    }
    ak_test_rmtree (dir);
    free (dir);
}

// ------------------------------------------------------- pure decisions

static Ak__Receipt *s_receipt (const char *id, const char *worker, double speedup, double noise)
{
    Ak__Receipt *r = ak_malloc (sizeof *r);
    ak__receipt__init (r);
    ak_cpb_set (&r->receipt_id, id);
    ak_cpb_set (&r->status, "ok");
    ak_cpb_set (&r->kind, "tune");
    ak_cpb_set (&r->worker_id, worker);
    r->timings = ak_calloc (1, sizeof *r->timings);
    Ak__WorkloadTiming *t = ak_malloc (sizeof *t);
    ak__workload_timing__init (t);
    t->workload = ak_malloc (sizeof *t->workload);
    ak__workload__init (t->workload);
    ak_cpb_set (&t->workload->name, "small");
    t->workload->weight = 1;
    t->baseline = ak_malloc (sizeof *t->baseline);
    ak__stats__init (t->baseline);
    t->baseline->median_us = 100.0;
    t->candidate = ak_malloc (sizeof *t->candidate);
    ak__stats__init (t->candidate);
    t->candidate->median_us = 100.0 / speedup;
    t->speedup = speedup;
    t->speedup_noise = noise;
    r->timings[0] = t;
    r->n_timings = 1;
    return r;
}

typedef struct {
    ak_promote_cand_t cand[4];
    Ak__Param       **params[4];
    Ak__Receipt      *tunes[4];
    Ak__Receipt      *confirms[4];
    ak_confirm_t      conf[4];
    ak_promote_eval_t ev[4];
    size_t            n;
} dec_t;

static const char *const s_ids[] = { "B1.0002", "B1.0003", "B1.0004", "B1.0005" };
static const char *const s_cids[] = { "B1.0010", "B1.0011", "B1.0012", "B1.0013" };

/* n candidates "blocked BLOCK=i+1" with tune speedups sp[i] +- noise
   measured on w1, confirmed (cs[i] > 0) on w2 with speedup cs[i]. */
static void s_dec (dec_t *d, size_t n, const double *sp, const double *cs, double noise)
{
    memset (d, 0, sizeof *d);
    d->n = n;
    const char *names[] = { "BLOCK" };
    for (size_t i = 0; i < n; i++) {
        int64_t v = (int64_t) i + 1;
        d->params[i] = ak_cpb_params_new (names, &v, 1);
        d->tunes[i] = s_receipt ("R1", "w1", sp[i], noise);
        d->cand[i] = (ak_promote_cand_t) { s_ids[i], "blocked", d->params[i], 1, "done", "", d->tunes[i] };
        if (cs[i] > 0) {
            d->confirms[i] = s_receipt ("R2", "w2", cs[i], noise);
            d->conf[i] = (ak_confirm_t) { s_cids[i], "done", "", "w1", d->confirms[i] };
        }
        else if (cs[i] < 0)
            d->conf[i] = (ak_confirm_t) { s_cids[i], "poisoned", "worker died", "w1", NULL };
    }
}

static void s_dec_free (dec_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        ak_cpb_params_free (d->params[i], 1);
        ak__receipt__free_unpacked (d->tunes[i], NULL);
        if (d->confirms[i])
            ak__receipt__free_unpacked (d->confirms[i], NULL);
    }
}

static Ak__Winner *s_run (dec_t *d, double implausible)
{
    static const ak_promote_rule_t rule = { .threshold = 0.03, .max_regression = 0.05 };
    Ak__Winner *w = NULL;
    ak_promote ("opa", "host", &rule, d->cand, d->n, d->ev, &w);
    ak_rounds_confirm_decide (&rule, implausible, d->cand, d->ev, d->conf, d->n, w);
    return w;
}

static void test_best_and_finalists (void **state)
{
    dec_t d;
    double sp[] = { 1.5, 2.0, 2.0, 1.2 }, none[] = { 0, 0, 0, 0 };
    s_dec (&d, 4, sp, none, 0.01);
    d.cand[3].receipt = NULL;                   /* failed: never kept */
    d.cand[3].state = "failed";
    ak_promote_rule_t rule = { .threshold = 0.03, .max_regression = 0.05 };
    for (size_t i = 0; i < 4; i++)
        ak_promote_eval (&rule, &d.cand[i], &d.ev[i]);
    size_t best[4];
    /* 2.0 and 2.0 tie: BLOCK=2 before BLOCK=3; then 1.5 */
    assert_int_equal (ak_rounds_best (d.cand, d.ev, 4, 2, best), 2);
    assert_int_equal (best[0], 1);
    assert_int_equal (best[1], 2);
    assert_int_equal (ak_rounds_best (d.cand, d.ev, 4, 4, best), 3);
    assert_int_equal (best[2], 0);
    size_t fin[AK_ROUNDS_MAX_FINALISTS];
    assert_int_equal (ak_rounds_finalists (d.cand, d.ev, 4, fin), 2);   /* 1.5 is outside the band */
    assert_int_equal (fin[0], 1);
    assert_int_equal (fin[1], 2);
    s_dec_free (&d);
}

static void test_confirm_decisions (void **state)
{
    dec_t d;
    /* confirmed on the other worker */
    double sp1[] = { 1.5 }, cs1[] = { 1.45 };
    s_dec (&d, 1, sp1, cs1, 0.01);
    Ak__Winner *w = s_run (&d, 10);
    assert_true (w->promoted);
    assert_string_equal (w->task_id, "B1.0002");
    assert_string_equal (w->receipt_id, "R1");          /* the measurement that won */
    /* within the noise bands (0.05 <= 0.01 + 0.01 + 3% of 1.45): the lower
       figure, the confirmation's, is the one reported and installed */
    assert_string_equal (w->confirmation, "confirmed");
    assert_true (fabs (w->speedup - 1.45) < 1e-6);
    assert_string_equal (w->figures_receipt_id, "R2");
    assert_non_null (strstr (w->reason, "confirmed on w2"));
    assert_null (strstr (w->reason, "same worker"));
    ak__winner__free_unpacked (w, NULL);
    /* the same worker: said so */
    ak_cpb_set (&d.confirms[0]->worker_id, "w1");
    w = s_run (&d, 10);
    assert_true (w->promoted);
    assert_non_null (strstr (w->reason, "confirmed on w1 (the same worker"));
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);

    /* refuted: the next finalist of the tie band wins */
    double sp2[] = { 1.50, 1.49 }, cs2[] = { 1.01, 1.48 };
    s_dec (&d, 2, sp2, cs2, 0.02);
    w = s_run (&d, 10);
    assert_true (w->promoted);
    assert_string_equal (w->task_id, "B1.0003");
    assert_int_equal (w->params[0]->value, 2);
    assert_non_null (strstr (w->reason, "confirmed on w2"));
    assert_non_null (strstr (w->reason, "blocked BLOCK=1 not confirmed on w2"));
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);

    /* every finalist refuted or lost: the baseline stays */
    double cs3[] = { 1.01, -1 };
    s_dec (&d, 2, sp2, cs3, 0.02);
    w = s_run (&d, 10);
    assert_false (w->promoted);
    assert_string_equal (w->task_id, "");
    assert_non_null (strstr (w->reason, "not confirmed: "));
    assert_non_null (strstr (w->reason, "below the 3% threshold"));
    assert_non_null (strstr (w->reason, "confirm task B1.0011 poisoned: worker died"));
    assert_non_null (strstr (w->reason, "the baseline stays"));
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);

    /* implausible: flagged, confirmed or not */
    double sp4[] = { 12.0 }, cs4[] = { 11.8 }, cs5[] = { 1.0 };
    s_dec (&d, 1, sp4, cs4, 0.05);
    w = s_run (&d, 10);
    assert_true (w->promoted);
    assert_non_null (strstr (w->reason, "implausible speedup 12.00x (> 10x)"));
    assert_non_null (strstr (w->reason, "confirmed on w2"));
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);
    s_dec (&d, 1, sp4, cs5, 0.05);
    w = s_run (&d, 10);
    assert_false (w->promoted);
    assert_non_null (strstr (w->reason, "implausible speedup 12.00x"));
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);

    /* a confirmation above the measurement, within noise: the lower figure
       (the original) is reported */
    double cs6[] = { 1.52 };
    s_dec (&d, 1, sp1, cs6, 0.01);
    w = s_run (&d, 10);
    assert_true (w->promoted);
    assert_string_equal (w->confirmation, "confirmed");
    assert_true (fabs (w->speedup - 1.5) < 1e-6);
    assert_string_equal (w->figures_receipt_id, "R1");
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);

    /* no confirm task at all (confirmation off): the decision stands */
    double none[] = { 0 };
    s_dec (&d, 1, sp1, none, 0.01);
    w = s_run (&d, 10);
    assert_true (w->promoted);
    assert_string_equal (w->reason, "");
    assert_string_equal (w->confirmation, "");
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);
}

/* The rule of ak_rounds_confirm_agrees: overlapping noise bands, widened
   by the threshold of the lower figure; nonsense never agrees. */
static void test_confirm_agreement_rule (void **state)
{
    double tol = -1;
    /* the demo's matmul winner: 12.30 +- 2.36 measured, 6.11 +- 0.35 confirmed */
    assert_false (ak_rounds_confirm_agrees (12.30, 2.36, 6.11, 0.35, 0.03, &tol));
    assert_true (fabs (tol - (2.36 + 0.35 + 0.03 * 6.11)) < 1e-9);
    assert_true (ak_rounds_confirm_agrees (12.30, 2.36, 10.0, 0.35, 0.03, NULL));
    assert_true (ak_rounds_confirm_agrees (1.50, 0.01, 1.45, 0.01, 0.03, NULL));
    assert_false (ak_rounds_confirm_agrees (1.50, 0.01, 1.40, 0.01, 0.03, NULL));
    /* symmetric: a confirmation far above disagrees as well */
    assert_false (ak_rounds_confirm_agrees (1.40, 0.01, 1.50, 0.01, 0.03, NULL));
    /* without noise or threshold: equal figures only */
    assert_true (ak_rounds_confirm_agrees (2.0, 0, 2.0, 0, 0, NULL));
    assert_false (ak_rounds_confirm_agrees (2.0, 0, 2.01, 0, 0, NULL));
    /* bad noise or threshold counts as 0; bad figures never agree */
    assert_false (ak_rounds_confirm_agrees (2.0, NAN, 2.5, INFINITY, -1, NULL));
    assert_false (ak_rounds_confirm_agrees (2.0, -5, 2.5, -5, NAN, NULL));
    assert_false (ak_rounds_confirm_agrees (NAN, 1, 2.0, 1, 0.03, NULL));
    assert_false (ak_rounds_confirm_agrees (2.0, 1, 0, 1, 0.03, NULL));
    assert_false (ak_rounds_confirm_agrees (2.0, 1, INFINITY, 1, 0.03, NULL));
}

/* A confirmation outside the noise bands is a disagreement: the winner is
   reported with the lower figure and says so, never "confirmed" with the
   higher one. */
static void test_confirm_disagreement (void **state)
{
    dec_t d;
    double sp[] = { 12.30 }, cs[] = { 6.11 };
    s_dec (&d, 1, sp, cs, 2.36);
    d.confirms[0]->timings[0]->speedup_noise = 0.35;
    Ak__Winner *w = s_run (&d, 20);
    assert_true (w->promoted);
    assert_string_equal (w->task_id, "B1.0002");
    assert_string_equal (w->receipt_id, "R1");
    assert_string_equal (w->confirmation, "disagrees");
    assert_string_equal (w->figures_receipt_id, "R2");
    assert_true (fabs (w->speedup - 6.11) < 1e-6);
    assert_true (fabs (w->noise - 0.35) < 1e-6);
    assert_null (strstr (w->reason, "confirmed on"));
    assert_non_null (strstr (w->reason, "confirmation disagrees: 6.11x on w2"));
    assert_non_null (strstr (w->reason, "the lower figure is reported"));
    assert_non_null (strstr (w->reason, "measured 12.30x +- 2.36 on w1"));
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);

    /* the confirmation far above the measurement: the measurement stands */
    double sp2[] = { 1.50 }, cs2[] = { 3.00 };
    s_dec (&d, 1, sp2, cs2, 0.02);
    w = s_run (&d, 10);
    assert_true (w->promoted);
    assert_string_equal (w->confirmation, "disagrees");
    assert_string_equal (w->figures_receipt_id, "R1");
    assert_true (fabs (w->speedup - 1.50) < 1e-6);
    assert_non_null (strstr (w->reason, "confirmation disagrees: 3.00x on w2"));
    ak__winner__free_unpacked (w, NULL);
    s_dec_free (&d);
}

// ------------------------------------------------ the store and the index

typedef struct {
    char          *dir;
    char          *store_dir;
    ak_store_t    *store;
    ak_sched_t    *sched;
    ak_registry_t *reg;
    ak_intake_t   *intake;
    ak_worker_t   *w[2];
    double         confirm_scale;   /* confirm tasks measure 1 + (s - 1) * this; 0: as tune */
} fx_t;

static ak_worker_t *s_worker (fx_t *fx, const char *id, const char *route)
{
    Ak__Hello *h = ak_malloc (sizeof *h);
    ak__hello__init (h);
    ak_cpb_set (&h->worker_id, id);
    ak_cpb_set (&h->host, "testhost");
    h->devices = ak_calloc (1, sizeof *h->devices);
    h->devices[0] = ak_malloc (sizeof *h->devices[0]);
    ak__device__init (h->devices[0]);
    ak_cpb_set (&h->devices[0]->device_class, "host");
    h->n_devices = 1;
    h->slots = 64;
    bool was_alive = false;
    return ak_registry_hello (fx->reg, route, 3, &h, 1000, &was_alive);
}

static void s_open (fx_t *fx)
{
    ak_store_opts_t so = { .map_size = 16u << 20, .no_sync = true };
    ak_err_t err = { 0 };
    if (ak_store_open (fx->store_dir, &so, &fx->store, &err))
        fail_msg ("store: %s", err.msg);
    fx->sched = ak_sched_new ();
    fx->reg = ak_registry_new ();
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_registry_load (fx->reg, txn, &err), 0);
    assert_int_equal (ak_sched_load (fx->sched, txn, 1000, 3000, &err), 0);
    ak_store_abort (&txn);
    ak_intake_opts_t io = { .commit_ms = 0, .commit_max = 256 };
    fx->intake = ak_intake_new (fx->store, fx->sched, fx->reg, &io);
    fx->w[0] = s_worker (fx, "w1", "\1\1\1");
    fx->w[1] = s_worker (fx, "w2", "\2\2\2");
}

static void s_close (fx_t *fx)
{
    ak_intake_destroy (&fx->intake);
    ak_registry_destroy (&fx->reg);
    ak_sched_destroy (&fx->sched);
    ak_store_destroy (&fx->store);
}

static fx_t *s_fixture (const char *policy)
{
    fx_t *fx = ak_calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("rounds");
    fx->store_dir = ak_path_join (fx->dir, "store");
    assert_int_equal (ak_mkdir_p (fx->store_dir, 0700, NULL), 0);
    ak_manifest_t *m = s_manifest (fx->dir, policy);
    ak_expansion_t *exp = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_expand (m, "B000001", "d", 1, &exp, &err), 0);
    ak_store_opts_t so = { .map_size = 16u << 20, .no_sync = true };
    assert_int_equal (ak_store_open (fx->store_dir, &so, &fx->store, &err), 0);
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    assert_int_equal (ak_expand_store (exp, txn, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);
    ak_store_destroy (&fx->store);
    ak_expansion_destroy (&exp);
    ak_manifest_destroy (&m);
    s_open (fx);
    return fx;
}

static void s_fixture_free (fx_t *fx)
{
    s_close (fx);
    ak_test_rmtree (fx->dir);
    free (fx->store_dir);
    free (fx->dir);
    free (fx);
}

static bool s_yes (void *arg, const ak_task_t *task)
{
    (void) arg;
    (void) task;
    return true;
}

/* The speedup a test worker "measures" for a configuration: BLOCK*UNROLL
   decides, so the best configurations are known. */
static double s_speed (const ak_task_t *t, fx_t *fx)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    Ak__TaskRecord *rec = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_task (txn, t->task_id, &rec, &err), 0);
    ak_store_abort (&txn);
    double s = 1.0;
    if (rec->n_params)
        s = 1.0 + 0.1 * (double) (s_param (rec->params, rec->n_params, "BLOCK")
                                  * s_param (rec->params, rec->n_params, "UNROLL"));
    ak__task_record__free_unpacked (rec, NULL);
    return s;
}

/* Assigns every queued task to worker wi (or, with avoid, whoever may
   take it), sends a receipt for each and commits; returns how many ran. */
static size_t s_run_queue (fx_t *fx, int wi, const char *kind_only)
{
    ak_task_t *tasks[256];
    size_t n = 0;
    ak_task_t *t;
    while (n < 256 && (t = ak_sched_pop_for (fx->sched, "host", fx->w[wi]->worker_id, s_yes, NULL))) {
        if (kind_only && strcmp (t->kind, kind_only) != 0) {
            ak_sched_unpop (fx->sched, t);
            break;
        }
        ak_sched_assign (fx->sched, t, fx->w[wi]->worker_id, 1000);
        tasks[n++] = t;
    }
    ak_err_t err = { 0 };
    for (size_t i = 0; i < n; i++) {
        double sp = s_speed (tasks[i], fx);
        if (fx->confirm_scale > 0 && strcmp (tasks[i]->kind, "confirm") == 0)
            sp = 1 + (sp - 1) * fx->confirm_scale;
        Ak__Receipt *r = s_receipt ("", fx->w[wi]->worker_id, sp, 0.01);
        ak_cpb_set (&r->task_id, tasks[i]->task_id);
        r->attempt = tasks[i]->attempt;
        assert_int_equal (ak_intake_stage (fx->intake, fx->w[wi]->worker_id, &r, 1000, &err), 0);
    }
    ak_commit_t c;
    assert_int_equal (ak_intake_commit (fx->intake, 1000, &c, &err), 0);
    ak_commit_clear (&c);
    return n;
}

/* Tasks of `kind` at `stage` (-1: any) in the index. */
static size_t s_count (fx_t *fx, const char *kind, int stage)
{
    ak_batch_t *b = ak_sched_batch (fx->sched, "B000001");
    size_t n = 0;
    for (size_t i = 0; i < b->ntasks; i++)
        n += strcmp (b->tasks[i]->kind, kind) == 0 && (stage < 0 || b->tasks[i]->stage == (uint32_t) stage);
    return n;
}

static void test_halving_and_confirm_flow (void **state)
{
    fx_t *fx = s_fixture ("\"search\": {\"budget\": 6, \"keep\": 2}");
    assert_int_equal (s_count (fx, "tune", 1), 6);
    assert_int_equal (ak_sched_batch (fx->sched, "B000001")->total, 7);

    /* stage 1 on w1: the commit that accepts its last receipt creates
       stage 2, the best 2 by their speedup */
    assert_int_equal (s_run_queue (fx, 0, NULL), 7);
    assert_int_equal (s_count (fx, "tune", 2), 2);
    assert_int_equal (s_count (fx, "confirm", -1), 0);
    ak_batch_t *b = ak_sched_batch (fx->sched, "B000001");
    assert_int_equal (b->total, 9);
    assert_null (ak_sched_settling (fx->sched));

    /* they are in the store, with the full timing policy, and are the two
       fastest of stage 1 */
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    double best1 = 0, best2 = 0, kept[2];
    size_t nk = 0;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    Ak__BatchRecord *brec = NULL;
    assert_int_equal (ak_store_get_batch (txn, "B000001", &brec, &err), 0);
    assert_int_equal (brec->ntasks, 9);
    ak__batch_record__free_unpacked (brec, NULL);
    for (size_t i = 0; i < b->ntasks; i++) {
        Ak__TaskRecord *rec = NULL;
        assert_int_equal (ak_store_get_task (txn, b->tasks[i]->task_id, &rec, &err), 0);
        if (strcmp (rec->kind, "tune") == 0) {
            double s = 0.1 * (double) (s_param (rec->params, rec->n_params, "BLOCK")
                                       * s_param (rec->params, rec->n_params, "UNROLL"));
            if (rec->stage == 1) {
                if (s > best1) {
                    best2 = best1;
                    best1 = s;
                }
                else if (s > best2)
                    best2 = s;
                assert_int_equal (rec->policy->max_time_ms, 200);
            }
            else {
                assert_int_equal (rec->stage, 2);
                assert_string_equal (rec->state, "queued");
                assert_int_equal (rec->policy->max_time_ms, 2000);
                kept[nk++] = s;
            }
        }
        ak__task_record__free_unpacked (rec, NULL);
    }
    ak_store_abort (&txn);
    assert_int_equal (nk, 2);
    assert_true (fabs (fmax (kept[0], kept[1]) - best1) < 1e-9);
    assert_true (fabs (fmin (kept[0], kept[1]) - best2) < 1e-9);

    /* a stage-1 receipt sent again is a duplicate and makes nothing; nor
       does the settle-time pass */
    Ak__Receipt *dup = s_receipt ("", "w1", 9.0, 0.01);
    ak_cpb_set (&dup->task_id, "B000001.0002");
    dup->attempt = 1;
    assert_int_equal (ak_intake_stage (fx->intake, "w1", &dup, 1000, &err), 0);
    ak_commit_t c;
    assert_int_equal (ak_intake_commit (fx->intake, 1000, &c, &err), 0);
    assert_true (c.acks[0].duplicate);
    ak_commit_clear (&c);
    ak_rounds_new_t made = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    assert_int_equal (ak_rounds_advance_batch (txn, fx->sched, b, 1, &made, &err), 0);
    ak_store_abort (&txn);
    assert_int_equal (made.n, 0);
    assert_int_equal (s_count (fx, "tune", 2), 2);

    /* stage 2 on w1 completes the tune tasks: the confirmation round, one
       confirm task per finalist (two when the kept two tie), avoiding w1 */
    assert_int_equal (s_run_queue (fx, 0, NULL), 2);
    size_t nconf = best1 - best2 > 0.05 ? 1 : 2;
    assert_int_equal (s_count (fx, "confirm", -1), nconf);
    ak_task_t *conf = b->tasks[b->ntasks - 1];
    assert_string_equal (conf->kind, "confirm");
    assert_string_equal (conf->avoid_worker, "w1");

    /* the restart rebuilds all of it from the store */
    s_close (fx);
    s_open (fx);
    b = ak_sched_batch (fx->sched, "B000001");
    assert_int_equal (b->total, 9 + nconf);
    assert_int_equal (s_count (fx, "tune", 1), 6);
    assert_int_equal (s_count (fx, "tune", 2), 2);
    assert_int_equal (s_count (fx, "confirm", -1), nconf);
    conf = b->tasks[b->ntasks - 1];
    assert_string_equal (conf->avoid_worker, "w1");

    /* w1 may not take it while w2 is live; w2 does */
    assert_null (ak_sched_pop_for (fx->sched, "host", "w1", s_yes, NULL));
    assert_int_equal (s_run_queue (fx, 1, NULL), nconf);
    ak_batch_t *settled = ak_sched_settling (fx->sched);
    assert_ptr_equal (settled, b);

    /* the decision: the stage-2 winner, confirmed on w2 */
    ak_results_t *res = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_results_load (txn, "B000001", &res, &err), 0);
    ak_store_abort (&txn);
    assert_int_equal (res->npairs, 1);
    const Ak__Winner *w = res->pairs[0].winner;
    assert_true (w->promoted);
    assert_true (fabs (w->speedup - (1.0 + best1)) < 1e-6);
    assert_non_null (strstr (w->reason, "confirmed on w2"));
    assert_int_equal (res->pairs[0].nconfirms, nconf);
    /* stage-1 evaluations are never promotable */
    for (size_t j = 0; j < res->pairs[0].ntunes; j++)
        if (res->pairs[0].tunes[j].task->stage == 1) {
            assert_false (res->pairs[0].evals[j].promotable);
            assert_non_null (strstr (res->pairs[0].evals[j].reason, "halving stage 1 of 2"));
        }
    ak_results_destroy (&res);
    s_fixture_free (fx);
}

/* The confirmation round through the store: a confirm run on w2 that
   measures far less than w1 did is a disagreement, and the batch's winner
   reports (and its aggregates show) the confirm receipt's lower figures. */
static void test_confirm_disagrees_flow (void **state)
{
    fx_t *fx = s_fixture ("\"search\": {\"budget\": 6, \"keep\": 1}");
    fx->confirm_scale = 0.5;
    assert_int_equal (s_run_queue (fx, 0, NULL), 7);        /* preflight + stage 1 */
    assert_int_equal (s_run_queue (fx, 0, NULL), 1);        /* stage 2: the one kept */
    assert_int_equal (s_count (fx, "confirm", -1), 1);
    assert_int_equal (s_run_queue (fx, 1, NULL), 1);        /* the confirm task, on w2 */
    assert_non_null (ak_sched_settling (fx->sched));

    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    ak_results_t *res = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_results_load (txn, "B000001", &res, &err), 0);
    ak_store_abort (&txn);
    const ak_result_pair_t *p = &res->pairs[0];
    const Ak__Winner *w = p->winner;
    assert_int_equal (p->nconfirms, 1);
    const Ak__Receipt *cr = p->confirms[0].receipt;
    assert_non_null (cr);
    assert_true (w->promoted);
    assert_string_equal (w->confirmation, "disagrees");
    assert_string_equal (w->figures_receipt_id, cr->receipt_id);
    assert_string_not_equal (w->receipt_id, cr->receipt_id);
    assert_true (fabs (w->speedup - cr->timings[0]->speedup) < 1e-6);
    assert_non_null (strstr (w->reason, "confirmation disagrees"));
    assert_null (strstr (w->reason, "confirmed on"));
    json_t *agg = ak_results_aggregates (p, w);
    assert_string_equal (json_string_value (json_object_get (agg, "receipt_id")), cr->receipt_id);
    json_decref (agg);
    ak_results_destroy (&res);
    s_fixture_free (fx);
}

static void test_confirm_off_and_single_worker (void **state)
{
    /* confirm off: exhaustive batch completes without confirm tasks */
    fx_t *fx = s_fixture ("\"confirm\": false");
    assert_int_equal (s_count (fx, "tune", 0), S_VALID);
    assert_int_equal (s_run_queue (fx, 0, NULL), S_VALID + 1);
    assert_int_equal (s_count (fx, "confirm", -1), 0);
    assert_non_null (ak_sched_settling (fx->sched));
    s_fixture_free (fx);

    /* confirm on, only w1 left alive: the confirm task runs on w1 and the
       winner says so; implausible (2.6x > 2x) is flagged */
    fx = s_fixture ("\"implausible\": 2");
    ak_registry_kill (fx->reg, fx->w[1], "test", 1000);
    assert_int_equal (s_run_queue (fx, 0, NULL), S_VALID + 1);
    assert_true (s_count (fx, "confirm", -1) >= 1);
    /* with no other live worker, the coordinator's rule lets w1 take it */
    ak_task_t *t = ak_sched_pop_for (fx->sched, "host", "w1", NULL, NULL);
    assert_non_null (t);
    ak_sched_unpop (fx->sched, t);
    /* s_yes would refuse it: only the registry can say who is live */
    assert_false (ak_registry_other_live (fx->reg, "host", "w1"));
    assert_true (ak_registry_other_live (fx->reg, "host", "w0"));
    /* dispatch asks it while it walks the registry: the walk must still
       see every worker once (a moved cursor looped akcoord forever) */
    size_t seen = 0;
    for (ak_worker_t *w = ak_registry_first (fx->reg); w && seen < 10; w = ak_registry_next (fx->reg)) {
        assert_true (ak_registry_other_live (fx->reg, "host", "w2"));
        seen++;
    }
    assert_int_equal (seen, 2);
    size_t nconf = s_count (fx, "confirm", -1);
    ak_task_t *tasks[8];
    size_t n = 0;
    while (n < 8 && (t = ak_sched_pop_for (fx->sched, "host", "w1", NULL, NULL))) {
        ak_sched_assign (fx->sched, t, "w1", 1000);
        tasks[n++] = t;
    }
    assert_int_equal (n, nconf);
    ak_err_t err = { 0 };
    for (size_t i = 0; i < n; i++) {
        Ak__Receipt *r = s_receipt ("", "w1", s_speed (tasks[i], fx), 0.01);
        ak_cpb_set (&r->task_id, tasks[i]->task_id);
        r->attempt = 1;
        assert_int_equal (ak_intake_stage (fx->intake, "w1", &r, 1000, &err), 0);
    }
    ak_commit_t c;
    assert_int_equal (ak_intake_commit (fx->intake, 1000, &c, &err), 0);
    ak_commit_clear (&c);
    ak_txn_t *txn = NULL;
    ak_results_t *res = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_results_load (txn, "B000001", &res, &err), 0);
    ak_store_abort (&txn);
    const Ak__Winner *w = res->pairs[0].winner;
    assert_true (w->promoted);
    assert_non_null (strstr (w->reason, "implausible speedup"));
    assert_non_null (strstr (w->reason, "confirmed on w1 (the same worker: no other live worker"));
    ak_results_destroy (&res);
    s_fixture_free (fx);
}

/* One commit per receipt, in an order that is not the batch's (the
   scan for an open task resumes where the last one was found, then wraps):
   stage 2 comes with the commit of the stage's last receipt, not before,
   and the confirm round only once stage 2 is done. */
static void test_stage_ends_with_its_last_commit (void **state)
{
    (void) state;
    fx_t *fx = s_fixture ("\"search\": {\"budget\": 6, \"keep\": 2}");
    ak_task_t *tasks[16];
    size_t n = 0;
    ak_task_t *t;
    while (n < 16 && (t = ak_sched_pop_for (fx->sched, "host", fx->w[0]->worker_id, s_yes, NULL))) {
        ak_sched_assign (fx->sched, t, fx->w[0]->worker_id, 1000);
        tasks[n++] = t;
    }
    assert_int_equal (n, 7);                        /* 6 tunes + the preflight */
    static const size_t order[7] = { 3, 0, 6, 1, 5, 2, 4 };
    ak_err_t err = { 0 };
    for (size_t k = 0; k < n; k++) {
        ak_task_t *task = tasks[order[k]];
        Ak__Receipt *r = s_receipt ("", fx->w[0]->worker_id, s_speed (task, fx), 0.01);
        ak_cpb_set (&r->task_id, task->task_id);
        r->attempt = task->attempt;
        assert_int_equal (ak_intake_stage (fx->intake, fx->w[0]->worker_id, &r, 1000, &err), 0);
        ak_commit_t c;
        assert_int_equal (ak_intake_commit (fx->intake, 1000, &c, &err), 0);
        ak_commit_clear (&c);
        assert_int_equal (s_count (fx, "tune", 2), k + 1 < n ? 0 : 2);
    }
    assert_int_equal (s_count (fx, "confirm", -1), 0);
    /* stage 2 one receipt at a time: the confirm round after the second */
    for (size_t k = 0; k < 2; k++) {
        assert_int_equal (s_count (fx, "confirm", -1), 0);
        t = ak_sched_pop_for (fx->sched, "host", fx->w[0]->worker_id, s_yes, NULL);
        assert_non_null (t);
        assert_int_equal (t->stage, 2);
        ak_sched_assign (fx->sched, t, fx->w[0]->worker_id, 1000);
        Ak__Receipt *r = s_receipt ("", fx->w[0]->worker_id, s_speed (t, fx), 0.01);
        ak_cpb_set (&r->task_id, t->task_id);
        r->attempt = t->attempt;
        assert_int_equal (ak_intake_stage (fx->intake, fx->w[0]->worker_id, &r, 1000, &err), 0);
        ak_commit_t c;
        assert_int_equal (ak_intake_commit (fx->intake, 1000, &c, &err), 0);
        ak_commit_clear (&c);
    }
    assert_true (s_count (fx, "confirm", -1) > 0);
    s_fixture_free (fx);
}

/* The final check (confirm round or not) loads every task of the pair and
   its receipt.  It runs in the commit that ends the pair; the settle-time
   pass must not repeat it on the same tasks, and a retry must bring it
   back. */
static void test_final_check_once (void **state)
{
    (void) state;
    fx_t *fx = s_fixture ("\"confirm\": true");
    ak_task_t *tasks[64];
    size_t n = 0;
    ak_task_t *t;
    while (n < 64 && (t = ak_sched_pop_for (fx->sched, "host", fx->w[0]->worker_id, s_yes, NULL))) {
        ak_sched_assign (fx->sched, t, fx->w[0]->worker_id, 1000);
        tasks[n++] = t;
    }
    assert_int_equal (n, S_VALID + 1);
    /* no speedup anywhere, and one tune task fails: no winner, no confirm */
    ak_task_t *failing = NULL;
    ak_err_t err = { 0 };
    for (size_t i = 0; i < n; i++) {
        Ak__Receipt *r = s_receipt ("", fx->w[0]->worker_id, 1.0, 0.01);
        ak_cpb_set (&r->task_id, tasks[i]->task_id);
        r->attempt = tasks[i]->attempt;
        if (!failing && strcmp (tasks[i]->kind, "tune") == 0 && tasks[i]->stage == 0) {
            failing = tasks[i];
            ak_cpb_set (&r->status, "error");
        }
        assert_int_equal (ak_intake_stage (fx->intake, fx->w[0]->worker_id, &r, 1000, &err), 0);
    }
    assert_non_null (failing);
    uint64_t checks = ak_rounds_final_checks ();
    ak_commit_t c;
    assert_int_equal (ak_intake_commit (fx->intake, 1000, &c, &err), 0);
    ak_commit_clear (&c);
    assert_int_equal (ak_rounds_final_checks (), checks + 1);
    assert_int_equal (s_count (fx, "confirm", -1), 0);
    ak_batch_t *b = ak_sched_batch (fx->sched, "B000001");
    assert_ptr_equal (ak_sched_settling (fx->sched), b);

    /* the settle-time pass: nothing to create, and no second check */
    ak_txn_t *txn = NULL;
    ak_rounds_new_t made = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    assert_int_equal (ak_rounds_advance_batch (txn, fx->sched, b, 1, &made, &err), 0);
    ak_store_abort (&txn);
    assert_int_equal (made.n, 0);
    ak_rounds_committed (&made, fx->sched);
    ak_rounds_new_clear (&made);
    assert_int_equal (ak_rounds_final_checks (), checks + 1);

    /* the check's winner is the batch's: what deciding from every record
       gives, without reading one */
    Ak__Winner **winners = NULL;
    size_t nw = 0;
    assert_true (ak_rounds_winners (b, &winners, &nw));
    assert_int_equal (nw, 1);
    ak_results_t *res = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_results_decide (txn, "B000001", &res, &err), 0);
    ak_store_abort (&txn);
    assert_int_equal (res->npairs, 1);
    assert_true (ak_cpb_same (&res->pairs[0].winner->base, &winners[0]->base));
    assert_false (winners[0]->promoted);
    ak_results_destroy (&res);
    ak__winner__free_unpacked (winners[0], NULL);
    free (winners);

    /* a retry of the failed task, which now measures a winner: the commit
       that ends the pair again checks again, and the confirm round comes */
    assert_true (ak_sched_reopen (fx->sched, failing, 1000));
    assert_false (ak_rounds_winners (b, &winners, &nw));   /* a task is open again */
    assert_null (winners);
    assert_int_equal (s_run_queue (fx, 0, NULL), 1);
    assert_int_equal (ak_rounds_final_checks (), checks + 2);
    assert_true (s_count (fx, "confirm", -1) >= 1);
    /* a confirmation round: only the records can decide */
    assert_false (ak_rounds_winners (b, &winners, &nw));

    /* a pass that finds a check to make, without a commit after it, is
       not remembered: the next pass checks again */
    s_fixture_free (fx);
    fx = s_fixture ("\"confirm\": false");
    assert_int_equal (s_run_queue (fx, 0, NULL), S_VALID + 1);
    checks = ak_rounds_final_checks ();
    b = ak_sched_batch (fx->sched, "B000001");
    for (int k = 0; k < 2; k++) {
        b->reopens++;                   /* as a retry would: the memo is stale */
        memset (&made, 0, sizeof made);
        assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
        assert_int_equal (ak_rounds_advance_batch (txn, fx->sched, b, 1, &made, &err), 0);
        ak_store_abort (&txn);
        ak_rounds_new_clear (&made);    /* not committed */
    }
    assert_int_equal (ak_rounds_final_checks (), checks + 2);
    s_fixture_free (fx);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_sample),
        cmocka_unit_test (test_stage_sizes_and_policy),
        cmocka_unit_test (test_policy_parsing),
        cmocka_unit_test (test_expand_strategies),
        cmocka_unit_test (test_best_and_finalists),
        cmocka_unit_test (test_confirm_decisions),
        cmocka_unit_test (test_confirm_agreement_rule),
        cmocka_unit_test (test_confirm_disagreement),
        cmocka_unit_test (test_halving_and_confirm_flow),
        cmocka_unit_test (test_confirm_disagrees_flow),
        cmocka_unit_test (test_confirm_off_and_single_worker),
        cmocka_unit_test (test_stage_ends_with_its_last_commit),
        cmocka_unit_test (test_final_check_once),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
