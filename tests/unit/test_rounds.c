/*  tests/unit/test_rounds.c: budgeted search and the confirmation round
    (coordinator/rounds.c, coordinator/search.c), the pure parts: sampling,
    stage sizes, policy parsing, the expansion's strategies, the choice of
    the best K and the promotion decision after the confirmation.  The
    flows through the store and the index are test_rounds_flow.c; the
    fixture both use is in unit.c (ak_rounds_fx_*). */
#include "support.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpb.h"
#include "coordinator/expand.h"
#include "coordinator/intake.h"
#include "coordinator/promote.h"
#include "coordinator/refine.h"
#include "coordinator/registry.h"
#include "coordinator/results.h"
#include "coordinator/rounds.h"
#include "coordinator/search.h"
#include "coordinator/sched.h"
#include "spec.h"
#include "store.h"
#include "util.h"
#include "unit.h"

// ---------------------------------------------------------------- sampling

static void test_sample (void **state)
{
    char *dir = ak_test_tmpdir ("rounds");
    ak_manifest_t *m = ak_rounds_fx_manifest (dir, "");
    const ak_candidate_t *cand = &m->ops[0].spec->candidates[0];
    ak_err_t err = { 0 };
    ak_search_sample_t a, b, c, all;
    assert_int_equal (ak_search_sample (cand, 42, "opa/host/blocked", 8, &a, &err), 0);
    assert_int_equal (ak_search_sample (cand, 42, "opa/host/blocked", 8, &b, &err), 0);
    assert_int_equal (ak_search_sample (cand, 43, "opa/host/blocked", 8, &c, &err), 0);
    assert_int_equal (a.valid, AK_ROUNDS_FX_VALID);
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
    assert_int_equal (all.n, AK_ROUNDS_FX_VALID);
    assert_int_equal (all.values[0], 1);
    assert_int_equal (all.values[1], 1);
    assert_int_equal (all.values[2 * (AK_ROUNDS_FX_VALID - 1)], 8);
    assert_int_equal (all.values[2 * (AK_ROUNDS_FX_VALID - 1) + 1], 2);
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

/* Tune tasks of exp at BLOCK=bl UNROLL=un. */
static int s_tunes_at (const ak_expansion_t *exp, int64_t bl, int64_t un)
{
    int n = 0;
    for (size_t i = 0; i < exp->ntasks; i++) {
        const Ak__TaskRecord *t = exp->tasks[i];
        if (strcmp (t->kind, "tune") == 0 && ak_rounds_fx_param (t->params, t->n_params, "BLOCK") == bl
            && ak_rounds_fx_param (t->params, t->n_params, "UNROLL") == un)
            n++;
    }
    return n;
}

/* The candidate's seeds: first in every sample, within the budget, never
   drawn twice; the rest of the budget drawn from the other
   configurations, in walk order. */
static void test_sample_seeds (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("rounds");
    ak_manifest_t *m = ak_rounds_fx_manifest (dir, "");
    ak_candidate_t *cand = &m->ops[0].spec->candidates[0];
    static const int64_t seeds[] = { 8, 2, 1, 1 };       /* BLOCK UNROLL pairs */
    cand->seeds = ak_malloc (sizeof seeds);
    memcpy (cand->seeds, seeds, sizeof seeds);
    cand->nseeds = 2;
    ak_err_t err = { 0 };
    for (uint64_t seed = 0; seed < 50; seed++) {
        ak_search_sample_t a;
        assert_int_equal (ak_search_sample (cand, seed, "opa/host/blocked", 6, &a, &err), 0);
        assert_int_equal (a.valid, AK_ROUNDS_FX_VALID);
        assert_int_equal (a.n, 6);
        assert_int_equal (a.seeded, 2);
        assert_memory_equal (a.values, seeds, sizeof seeds);
        for (size_t i = 2; i < a.n; i++) {
            for (size_t j = 0; j < i; j++)
                assert_false (a.values[2 * j] == a.values[2 * i] && a.values[2 * j + 1] == a.values[2 * i + 1]);
            if (i > 2)           /* the drawn ones in walk order (BLOCK, then UNROLL) */
                assert_true (a.values[2 * (i - 1)] * 10 + a.values[2 * i - 1] < a.values[2 * i] * 10 + a.values[2 * i + 1]);
        }
        ak_search_sample_clear (&a);
    }
    /* a budget of one: the first seed alone */
    ak_search_sample_t one, all;
    assert_int_equal (ak_search_sample (cand, 42, "x", 1, &one, &err), 0);
    assert_int_equal (one.n, 1);
    assert_int_equal (one.seeded, 1);
    assert_int_equal (one.values[0], 8);
    assert_int_equal (one.values[1], 2);
    /* a budget over the space: every configuration once, the seeds first */
    assert_int_equal (ak_search_sample (cand, 42, "x", 100, &all, &err), 0);
    assert_int_equal (all.n, AK_ROUNDS_FX_VALID);
    assert_int_equal (all.seeded, 2);
    assert_memory_equal (all.values, seeds, sizeof seeds);
    for (size_t i = 0; i < all.n; i++)
        for (size_t j = 0; j < i; j++)
            assert_false (all.values[2 * j] == all.values[2 * i] && all.values[2 * j + 1] == all.values[2 * i + 1]);
    ak_search_sample_clear (&one);
    ak_search_sample_clear (&all);
    /* through the expansion: the summary counts them, the first stage holds them */
    ak_manifest_t *mh = ak_rounds_fx_manifest (dir, "\"search\": {\"budget\": 6, \"keep\": 2}");
    ak_candidate_t *ch = &mh->ops[0].spec->candidates[0];
    ch->seeds = ak_malloc (sizeof seeds);
    memcpy (ch->seeds, seeds, sizeof seeds);
    ch->nseeds = 2;
    ak_expansion_t *exp = NULL;
    assert_int_equal (ak_expand (mh, "B000001", "d", 1, &exp, &err), 0);
    assert_int_equal (exp->batch->search[0]->sampled, 6);
    assert_int_equal (exp->batch->search[0]->seeded, 2);
    assert_int_equal (s_tunes_at (exp, 8, 2), 1);
    assert_int_equal (s_tunes_at (exp, 1, 1), 1);
    ak_expansion_destroy (&exp);
    ak_manifest_destroy (&mh);
    ak_manifest_destroy (&m);
    ak_test_rmtree (dir);
    free (dir);
}

/* policy.search.installed: the installed entries of (op, class,
   candidate) that are valid in the space today are seeds after the
   spec's, once each; others (another class, another candidate, a value
   no longer in the lists, a parameter missing) are left out; without the
   policy they are not used. */
static Ak__Param *s_param (const char *name, int64_t value)
{
    Ak__Param *p = ak_malloc (sizeof *p);
    ak__param__init (p);
    p->name = (char *) name;
    p->value = value;
    return p;
}

static void test_expand_installed (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("rounds");
    Ak__Param *ok[] = { s_param ("BLOCK", 3), s_param ("UNROLL", 4) };          /* 12 <= 16 */
    Ak__Param *dup[] = { s_param ("UNROLL", 4), s_param ("BLOCK", 3) };         /* the same, by name */
    Ak__Param *gone[] = { s_param ("BLOCK", 9), s_param ("UNROLL", 1) };        /* 9 not in the list */
    Ak__Param *bad[] = { s_param ("BLOCK", 8), s_param ("UNROLL", 4) };         /* 32 > 16 */
    Ak__Param *half[] = { s_param ("BLOCK", 2), s_param ("WIDTH", 1) };         /* UNROLL missing */
    Ak__Param *other[] = { s_param ("BLOCK", 5), s_param ("UNROLL", 3) };
    const ak_installed_t inst[] = {
        { "opa", "host", "blocked", ok, 2 },
        { "opa", "host", "blocked", dup, 2 },
        { "opa", "host", "blocked", gone, 2 },
        { "opa", "host", "blocked", bad, 2 },
        { "opa", "host", "blocked", half, 2 },
        { "opa", "NVIDIA_H200/sm_90/drv580/nvrtc13.0", "blocked", other, 2 },
        { "opb", "host", "blocked", other, 2 },
        { "opa", "host", "other", other, 2 },
    };
    ak_err_t err = { 0 };
    for (int on = 0; on < 2; on++) {
        ak_manifest_t *m = ak_rounds_fx_manifest (dir, on ? "\"search\": {\"budget\": 4, \"installed\": true}"
                                                          : "\"search\": {\"budget\": 4}");
        ak_expansion_t *exp = NULL;
        assert_int_equal (ak_expand_with (m, inst, sizeof inst / sizeof inst[0], "B000001", "d", 1, &exp, &err), 0);
        const Ak__SearchSummary *sum = exp->batch->search[0];
        assert_int_equal (sum->sampled, 4);
        assert_int_equal (sum->seeded, on ? 1 : 0);
        assert_int_equal (sum->installed, on ? 1 : 0);
        if (on)
            assert_int_equal (s_tunes_at (exp, 3, 4), 1);      /* once, though installed twice */
        assert_true (s_tunes_at (exp, 5, 3) <= 1);             /* only as a random draw */
        ak_expansion_destroy (&exp);
        ak_manifest_destroy (&m);
    }
    Ak__Param **all[] = { ok, dup, gone, bad, half, other };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free (all[i][0]);
        free (all[i][1]);
    }
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
        { "", AK_ROUNDS_FX_VALID, "exhaustive", 0, 2000 },                          /* 25 <= budget 64 */
        { "\"search\": {\"budget\": 6, \"keep\": 2}", 6, "halving", 1, 200 },
        { "\"search\": {\"budget\": 6, \"strategy\": \"exhaustive\"}", AK_ROUNDS_FX_VALID, "exhaustive", 0, 2000 },
        { "\"search\": {\"budget\": 30, \"strategy\": \"halving\", \"short_max_time_ms\": 50}", AK_ROUNDS_FX_VALID, "halving", 1, 50 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ak_manifest_t *m = ak_rounds_fx_manifest (dir, cases[k].policy);
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
            assert_true (ak_rounds_fx_param (t->params, t->n_params, "BLOCK") * ak_rounds_fx_param (t->params, t->n_params, "UNROLL") <= 16);
        }
        assert_int_equal (tunes, cases[k].tunes);
        assert_int_equal (exp->ntasks, tunes + 1);
        assert_int_equal (exp->batch->n_search, 1);
        const Ak__SearchSummary *s = exp->batch->search[0];
        assert_string_equal (s->strategy, cases[k].strategy);
        assert_int_equal (s->valid, AK_ROUNDS_FX_VALID);
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
    ak_manifest_t *m = ak_rounds_fx_manifest (dir, "");
    /* defaults */
    assert_string_equal (m->policy.search_strategy, "");
    assert_int_equal (m->policy.search_budget, 64);
    assert_int_equal (m->policy.search_keep, 4);
    assert_int_equal (m->policy.search_rounds, 2);
    assert_int_equal (m->policy.short_max_time_ms, 200);
    assert_true (m->policy.confirm);
    assert_true (m->policy.implausible == 10.0);
    assert_int_equal (m->policy.search_refine, 0);
    assert_false (m->policy.search_installed);
    /* the bundle carries every field to the coordinator */
    char *bundle = ak_manifest_to_bundle (m);
    ak_manifest_destroy (&m);
    m = ak_rounds_fx_manifest (dir, "\"search\": {\"strategy\": \"halving\", \"budget\": 9, \"keep\": 3, \"rounds\": 3,"
                         " \"short_max_time_ms\": 70, \"refine\": 12, \"installed\": true}, \"confirm\": false,"
                         " \"implausible\": 4");
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
    assert_int_equal (b->policy.search_refine, 12);
    assert_true (b->policy.search_installed);
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
        { "\"search\": {\"refine\": 1025}", "policy.search.refine" },
        { "\"search\": {\"refine\": -1}", "policy.search.refine" },
        { "\"search\": {\"sample\": 4}", "policy.search.sample" },
        { "\"search\": {\"installed\": 1}", "policy.search.installed" },
        { "\"search\": 3", "policy.search" },
        { "\"confirm\": 1", "policy.confirm" },
        { "\"implausible\": 1", "policy.implausible" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ak_rounds_fx_write_op (dir);
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
        d->tunes[i] = ak_rounds_fx_receipt ("R1", "w1", sp[i], noise);
        d->cand[i] = (ak_promote_cand_t) { s_ids[i], "blocked", d->params[i], 1, "done", "", d->tunes[i] };
        if (cs[i] > 0) {
            d->confirms[i] = ak_rounds_fx_receipt ("R2", "w2", cs[i], noise);
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

/* Adds workload "large"/float32 measured at speedup +- noise to r. */
static void s_add_large (Ak__Receipt *r, double speedup, double noise)
{
    Ak__Receipt *one = ak_rounds_fx_receipt ("x", "w1", speedup, noise);
    Ak__WorkloadTiming *t = one->timings[0];
    one->n_timings = 0;
    ak__receipt__free_unpacked (one, NULL);
    ak_cpb_set (&t->workload->name, "large");
    ak_cpb_set (&t->workload->dtype, "float32");
    r->timings = ak_realloc (r->timings, (r->n_timings + 1) * sizeof *r->timings);
    r->timings[r->n_timings++] = t;
}

/* A halving stage carries each workload's own leader beyond the best
   `keep`: only one outside the noise of every kept candidate there, that
   beats the baseline there, is ok, and is not kept already. */
static void test_workload_leaders (void **state)
{
    dec_t d;
    /* "small": 2.0, 1.9, 1.2, 1.0; "large": 1.1, 1.2, L, 1.02 */
    double sp[] = { 2.0, 1.9, 1.2, 1.0 }, none[] = { 0, 0, 0, 0 };
    const struct { double large2; double noise; size_t want; } cases[] = {
        { 1.8, 0.01, 1 },           /* candidate 2 leads "large" by far: carried */
        { 1.21, 0.01, 0 },          /* 1.21 against the kept 1.2: inside the noise */
        { 1.21, 0.0, 1 },           /* the same without noise: ahead */
    };
    ak_promote_rule_t rule = { .threshold = 0.03, .max_regression = 0.05 };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        s_dec (&d, 4, sp, none, cases[c].noise);
        double large[] = { 1.1, 1.2, cases[c].large2, 1.02 };
        for (size_t i = 0; i < 4; i++) {
            s_add_large (d.tunes[i], large[i], cases[c].noise);
            ak_promote_eval (&rule, &d.cand[i], &d.ev[i]);
            assert_true (d.ev[i].ok);
        }
        size_t kept[2] = { 0, 1 }, out[4];
        size_t m = ak_rounds_leaders (d.cand, d.ev, 4, 0.03, kept, 2, out, 4);
        assert_int_equal (m, cases[c].want);
        if (m)
            assert_int_equal (out[0], 2);
        /* a leader already kept is not carried twice; cap 0 carries none */
        size_t kept3[3] = { 0, 1, 2 };
        assert_int_equal (ak_rounds_leaders (d.cand, d.ev, 4, 0.03, kept3, 3, out, 4), 0);
        assert_int_equal (ak_rounds_leaders (d.cand, d.ev, 4, 0.03, kept, 2, out, 0), 0);
        /* one that failed is never a leader */
        d.ev[2].ok = false;
        assert_int_equal (ak_rounds_leaders (d.cand, d.ev, 4, 0.03, kept, 2, out, 4), 0);
        s_dec_free (&d);
    }

/* nothing beats the baseline at "large": no leader there */
    s_dec (&d, 4, sp, none, 0.01);
    double low[] = { 0.9, 0.95, 1.02, 1.0 };
    for (size_t i = 0; i < 4; i++) {
        s_add_large (d.tunes[i], low[i], 0.01);
        ak_promote_eval (&rule, &d.cand[i], &d.ev[i]);
    }
    size_t kept[2] = { 0, 1 }, out[4];
    assert_int_equal (ak_rounds_leaders (d.cand, d.ev, 4, 0.03, kept, 2, out, 4), 0);
    s_dec_free (&d);
}

/* The neighbours of the leaders (refine.h): round-robin over the seeds in
   their order, nothing the stage measured or already picked, at most cap;
   a seed of another candidate or outside the value lists gives none. */
static void test_refine_plan (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("refine");
    ak_rounds_fx_write_op (dir);
    char *path = ak_path_join (dir, "opa/spec.json");
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_load (path, &spec, &err))
        fail_msg ("%s", err.msg);
    const char *names[] = { "BLOCK", "UNROLL" };
    static const int64_t cfg[][2] = { { 4, 2 }, { 2, 2 }, { 3, 2 }, { 9, 2 } };
    Ak__Param **params[4];
    ak_promote_cand_t c[4];
    for (size_t i = 0; i < 4; i++) {
        params[i] = ak_cpb_params_new (names, cfg[i], 2);
        c[i] = (ak_promote_cand_t) { s_ids[i], "blocked", params[i], 2, "done", "", NULL };
    }
    /* seeds (4,2) then (2,2); the stage measured those and (3,2) */
    ak_refine_new_t *plan = NULL;
    size_t n = 0;
    assert_int_equal (ak_refine_plan (spec, c, 2, c, 3, 3, &plan, &n, &err), 0);
    static const struct { size_t seed; int64_t b, u; } want[] = { { 1, 1, 2 }, { 0, 5, 2 }, { 0, 4, 1 } };
    assert_int_equal (n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal (plan[i].seed, want[i].seed);
        assert_string_equal (plan[i].cand->name, "blocked");
        assert_int_equal (plan[i].values[0], want[i].b);
        assert_int_equal (plan[i].values[1], want[i].u);
    }
    free (plan);
    /* without a cap: every neighbour of both, each once, all valid */
    assert_int_equal (ak_refine_plan (spec, c, 2, c, 3, 100, &plan, &n, &err), 0);
    assert_int_equal (n, 10);          /* 6 around each, less (3,2) measured */
    for (size_t i = 0; i < n; i++) {
        assert_true (plan[i].values[0] * plan[i].values[1] <= 16);
        for (size_t k = 0; k < i; k++)
            assert_false (plan[k].values[0] == plan[i].values[0] && plan[k].values[1] == plan[i].values[1]);
    }
    free (plan);
    /* a seed outside the lists (BLOCK 9: an older spec), one of a candidate
       the spec lacks, cap 0, no seeds: nothing */
    assert_int_equal (ak_refine_plan (spec, &c[3], 1, c, 3, 10, &plan, &n, &err), 0);
    assert_int_equal (n, 0);
    assert_null (plan);
    ak_promote_cand_t gone = c[0];
    gone.candidate_name = "gone";
    assert_int_equal (ak_refine_plan (spec, &gone, 1, c, 3, 10, &plan, &n, &err), 0);
    assert_int_equal (n, 0);
    free (plan);
    assert_int_equal (ak_refine_plan (spec, c, 2, c, 3, 0, &plan, &n, &err), 0);
    assert_int_equal (n, 0);
    assert_int_equal (ak_refine_plan (spec, c, 0, c, 3, 5, &plan, &n, &err), 0);
    assert_int_equal (n, 0);
    for (size_t i = 0; i < 4; i++)
        ak_cpb_params_free (params[i], 2);
    ak_spec_destroy (&spec);
    free (path);
    ak_test_rmtree (dir);
    free (dir);
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

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_sample),
        cmocka_unit_test (test_sample_seeds),
        cmocka_unit_test (test_expand_installed),
        cmocka_unit_test (test_stage_sizes_and_policy),
        cmocka_unit_test (test_policy_parsing),
        cmocka_unit_test (test_expand_strategies),
        cmocka_unit_test (test_best_and_finalists),
        cmocka_unit_test (test_workload_leaders),
        cmocka_unit_test (test_refine_plan),
        cmocka_unit_test (test_confirm_decisions),
        cmocka_unit_test (test_confirm_agreement_rule),
        cmocka_unit_test (test_confirm_disagreement),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
