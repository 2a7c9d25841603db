/*  tests/unit/test_rounds_flow.c: budgeted search and the confirmation
    round through the store and the index (coordinator/rounds.c): stage-2
    and confirm tasks created in the commit of the receipt that completed
    the stage (once, however often receipts are re-sent), the avoid_worker
    rule of the queue, the rebuild after a restart, and the final check.
    The pure decisions are test_rounds.c. */
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
#include "unit.h"

#define S_STR(x) #x
#define S_XSTR(x) S_STR (x)
#define AK_ROUNDS_FX_VALID_TEXT S_XSTR (AK_ROUNDS_FX_VALID)

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
    bool           large;           /* receipts measure a second workload, 'large' (s_large) */
    double         large_confirm_scale; /* the pick's confirm task measures 'large' at this x; 0: as tune */
} fx_t;

static ak_worker_t *s_worker (fx_t *fx, const char *id, const char *route)
{
    Ak__Hello *h = ak_unit_hello (id, 64, 0);
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
    ak_manifest_t *m = ak_rounds_fx_manifest (fx->dir, policy);
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

/* BLOCK*UNROLL of task t's configuration; 0 for the preflight. */
static int64_t s_product (const ak_task_t *t, fx_t *fx)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    Ak__TaskRecord *rec = NULL;
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_store_get_task (txn, t->task_id, &rec, &err), 0);
    ak_store_abort (&txn);
    int64_t p = 0;
    if (rec->n_params)
        p = ak_rounds_fx_param (rec->params, rec->n_params, "BLOCK")
            * ak_rounds_fx_param (rec->params, rec->n_params, "UNROLL");
    ak__task_record__free_unpacked (rec, NULL);
    return p;
}

/* The speedup a test worker "measures" for a configuration: BLOCK*UNROLL
   decides, so the best configurations are known. */
static double s_speed (const ak_task_t *t, fx_t *fx)
{
    return 1.0 + 0.1 * (double) s_product (t, fx);
}

/* With fx->large: a second timing, workload 'large' (both float32), where
   the slowest configuration (BLOCK*UNROLL 1) runs at 3x and every other
   one at 1.2x: the workload pick of 'large' (promote.h). */
static void s_large (fx_t *fx, const ak_task_t *t, Ak__Receipt *r)
{
    ak_cpb_set (&r->timings[0]->workload->dtype, "float32");
    if (!fx->large)
        return;
    bool slowest = s_product (t, fx) == 1;
    double sp = slowest ? 3.0 : 1.2;
    if (slowest && fx->large_confirm_scale > 0 && strcmp (t->kind, "confirm") == 0)
        sp *= fx->large_confirm_scale;
    Ak__Receipt *two = ak_rounds_fx_receipt ("", "", sp, 0.01);
    ak_cpb_set (&two->timings[0]->workload->name, "large");
    ak_cpb_set (&two->timings[0]->workload->dtype, "float32");
    r->timings = ak_realloc (r->timings, 2 * sizeof *r->timings);
    r->timings[r->n_timings++] = two->timings[0];
    two->n_timings = 0;
    ak__receipt__free_unpacked (two, NULL);
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
        Ak__Receipt *r = ak_rounds_fx_receipt ("", fx->w[wi]->worker_id, sp, 0.01);
        s_large (fx, tasks[i], r);
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
            double s = 0.1 * (double) (ak_rounds_fx_param (rec->params, rec->n_params, "BLOCK")
                                       * ak_rounds_fx_param (rec->params, rec->n_params, "UNROLL"));
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
    Ak__Receipt *dup = ak_rounds_fx_receipt ("", "w1", 9.0, 0.01);
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

/* policy.search.refine through the store: once stage 1 is done, its
   leaders' neighbours join stage 1 (short timing, counted in the search
   summary), none of them a configuration the stage measured; stage 2 then
   ranks sample and neighbours together; a restart and a second pass do
   not refine again. */
static void test_refine_flow (void **state)
{
    (void) state;
    fx_t *fx = s_fixture ("\"search\": {\"budget\": 3, \"keep\": 1, \"refine\": 4}, \"confirm\": false");
    assert_int_equal (s_count (fx, "tune", 1), 3);
    ak_batch_t *b = ak_sched_batch (fx->sched, "B000001");
    int64_t sampled_best = 0;
    /* preflight + the sample: the commit adds the neighbours to stage 1 */
    assert_int_equal (s_run_queue (fx, 0, NULL), 4);
    for (size_t i = 0; i < b->ntasks; i++)
        if (strcmp (b->tasks[i]->kind, "tune") == 0 && ak_tstate_terminal (b->tasks[i]->state))
            sampled_best = s_product (b->tasks[i], fx) > sampled_best ? s_product (b->tasks[i], fx) : sampled_best;
    size_t n1 = s_count (fx, "tune", 1);
    assert_true (n1 > 3 && n1 <= 3 + 4);
    assert_int_equal (s_count (fx, "tune", 2), 0);

    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    Ak__BatchRecord *brec = NULL;
    assert_int_equal (ak_store_get_batch (txn, "B000001", &brec, &err), 0);
    assert_int_equal (brec->n_search, 1);
    assert_int_equal (brec->search[0]->sampled, 3);
    assert_int_equal (brec->search[0]->refined, n1 - 3);
    assert_int_equal (brec->ntasks, 1 + n1);
    ak__batch_record__free_unpacked (brec, NULL);
    /* every added configuration is new, valid, one or two steps from a
       sampled one, with stage 1's short timing */
    int64_t seen[16][2];
    size_t ns = 0;
    for (size_t i = 0; i < b->ntasks; i++) {
        Ak__TaskRecord *rec = NULL;
        assert_int_equal (ak_store_get_task (txn, b->tasks[i]->task_id, &rec, &err), 0);
        if (strcmp (rec->kind, "tune") == 0) {
            int64_t bl = ak_rounds_fx_param (rec->params, rec->n_params, "BLOCK");
            int64_t un = ak_rounds_fx_param (rec->params, rec->n_params, "UNROLL");
            assert_true (bl * un <= 16);
            for (size_t k = 0; k < ns; k++)
                assert_false (seen[k][0] == bl && seen[k][1] == un);
            seen[ns][0] = bl;
            seen[ns][1] = un;
            ns++;
            assert_int_equal (rec->stage, 1);
            assert_int_equal (rec->policy->max_time_ms, 200);
        }
        ak__task_record__free_unpacked (rec, NULL);
    }
    ak_store_abort (&txn);
    assert_int_equal (ns, n1);

    /* the neighbours run; stage 2 is the best of all n1 */
    assert_int_equal (s_run_queue (fx, 0, NULL), n1 - 3);
    assert_int_equal (s_count (fx, "tune", 1), n1);
    assert_int_equal (s_count (fx, "tune", 2), 1);
    int64_t best = 0, kept = 0;
    for (size_t i = 0; i < b->ntasks; i++)
        if (strcmp (b->tasks[i]->kind, "tune") == 0) {
            int64_t pr = s_product (b->tasks[i], fx);
            if (b->tasks[i]->stage == 1 && pr > best)
                best = pr;
            if (b->tasks[i]->stage == 2)
                kept = pr;
        }
    assert_int_equal (kept, best);
    assert_true (best >= sampled_best);

    /* a restart and a pass over the batch add nothing more to stage 1 */
    s_close (fx);
    s_open (fx);
    b = ak_sched_batch (fx->sched, "B000001");
    ak_rounds_new_t made = { 0 };
    assert_int_equal (ak_store_begin (fx->store, true, &txn, &err), 0);
    assert_int_equal (ak_rounds_advance_batch (txn, fx->sched, b, 1, &made, &err), 0);
    ak_store_abort (&txn);
    assert_int_equal (made.n, 0);
    ak_rounds_new_clear (&made);
    assert_int_equal (s_count (fx, "tune", 1), n1);
    assert_int_equal (s_run_queue (fx, 0, NULL), 1);           /* stage 2 */
    assert_non_null (ak_sched_settling (fx->sched));
    s_fixture_free (fx);

    /* a sample of the whole space has no neighbour left to add: stage 2
       comes with the same commit, from the stage the refinement read */
    fx = s_fixture ("\"search\": {\"strategy\": \"halving\", \"budget\": " AK_ROUNDS_FX_VALID_TEXT
                    ", \"keep\": 1, \"refine\": 4}, \"confirm\": false");
    assert_int_equal (s_count (fx, "tune", 1), AK_ROUNDS_FX_VALID);
    assert_int_equal (s_run_queue (fx, 0, NULL), AK_ROUNDS_FX_VALID + 1);
    assert_int_equal (s_count (fx, "tune", 1), AK_ROUNDS_FX_VALID);
    assert_int_equal (s_count (fx, "tune", 2), 1);
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
    assert_int_equal (s_count (fx, "tune", 0), AK_ROUNDS_FX_VALID);
    assert_int_equal (s_run_queue (fx, 0, NULL), AK_ROUNDS_FX_VALID + 1);
    assert_int_equal (s_count (fx, "confirm", -1), 0);
    assert_non_null (ak_sched_settling (fx->sched));
    s_fixture_free (fx);

    /* confirm on, only w1 left alive: the confirm task runs on w1 and the
       winner says so; implausible (2.6x > 2x) is flagged */
    fx = s_fixture ("\"implausible\": 2");
    ak_registry_kill (fx->reg, fx->w[1], "test", 1000);
    assert_int_equal (s_run_queue (fx, 0, NULL), AK_ROUNDS_FX_VALID + 1);
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
        Ak__Receipt *r = ak_rounds_fx_receipt ("", "w1", s_speed (tasks[i], fx), 0.01);
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

/* A workload pick (promote.h) through the store: exhaustive, confirm on;
   the slowest configuration is 2.5x the winner on 'large' alone, so the
   confirmation round re-measures it too (on w2), and the decision names
   it for 'large'. */
static void test_workload_pick_flow (void **state)
{
    (void) state;
    fx_t *fx = s_fixture ("\"confirm\": true");
    fx->large = true;
    assert_int_equal (s_run_queue (fx, 0, NULL), AK_ROUNDS_FX_VALID + 1);
    /* the winner's finalists (its tie band) and the pick */
    size_t nconf = s_count (fx, "confirm", -1);
    assert_true (nconf >= 2 && nconf <= AK_ROUNDS_MAX_FINALISTS + 1);
    assert_int_equal (s_run_queue (fx, 1, NULL), nconf);
    assert_non_null (ak_sched_settling (fx->sched));
    ak_txn_t *txn = NULL;
    ak_results_t *res = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_results_load (txn, "B000001", &res, &err), 0);
    const Ak__Winner *w = res->pairs[0].winner;
    assert_true (w->promoted);
    assert_string_equal (w->confirmation, "confirmed");
    assert_int_equal (w->n_picks, 1);
    const Ak__WorkloadPick *pk = w->picks[0];
    assert_string_equal (pk->workload, "large");
    assert_string_equal (pk->replaces, "winner");
    assert_true (fabs (pk->over - 2.5) < 1e-9);
    Ak__TaskRecord *rec = NULL;
    assert_int_equal (ak_store_get_task (txn, pk->task_id, &rec, &err), 0);
    assert_int_equal (ak_rounds_fx_param (rec->params, rec->n_params, "BLOCK")
                          * ak_rounds_fx_param (rec->params, rec->n_params, "UNROLL"), 1);
    ak__task_record__free_unpacked (rec, NULL);
    /* its confirm task ran on the other worker, and agrees there */
    assert_string_equal (pk->confirmation, "confirmed");
    assert_string_equal (pk->confirmed_on, "w2");
    ak_store_abort (&txn);
    ak_results_destroy (&res);
    s_fixture_free (fx);

    /* a confirmation that measures the pick at 60% of its figure disagrees */
    fx = s_fixture ("\"confirm\": true");
    fx->large = true;
    fx->large_confirm_scale = 0.6;
    assert_int_equal (s_run_queue (fx, 0, NULL), AK_ROUNDS_FX_VALID + 1);
    nconf = s_count (fx, "confirm", -1);
    assert_int_equal (s_run_queue (fx, 1, NULL), nconf);
    assert_int_equal (ak_store_begin (fx->store, false, &txn, &err), 0);
    assert_int_equal (ak_results_load (txn, "B000001", &res, &err), 0);
    ak_store_abort (&txn);
    w = res->pairs[0].winner;
    assert_int_equal (w->n_picks, 1);
    assert_string_equal (w->picks[0]->confirmation, "disagrees");
    assert_string_equal (w->picks[0]->confirmed_on, "w2");
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
        Ak__Receipt *r = ak_rounds_fx_receipt ("", fx->w[0]->worker_id, s_speed (task, fx), 0.01);
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
        Ak__Receipt *r = ak_rounds_fx_receipt ("", fx->w[0]->worker_id, s_speed (t, fx), 0.01);
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
    assert_int_equal (n, AK_ROUNDS_FX_VALID + 1);
    /* no speedup anywhere, and one tune task fails: no winner, no confirm */
    ak_task_t *failing = NULL;
    ak_err_t err = { 0 };
    for (size_t i = 0; i < n; i++) {
        Ak__Receipt *r = ak_rounds_fx_receipt ("", fx->w[0]->worker_id, 1.0, 0.01);
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
    assert_int_equal (s_run_queue (fx, 0, NULL), AK_ROUNDS_FX_VALID + 1);
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
        cmocka_unit_test (test_halving_and_confirm_flow),
        cmocka_unit_test (test_workload_pick_flow),
        cmocka_unit_test (test_refine_flow),
        cmocka_unit_test (test_confirm_disagrees_flow),
        cmocka_unit_test (test_confirm_off_and_single_worker),
        cmocka_unit_test (test_stage_ends_with_its_last_commit),
        cmocka_unit_test (test_final_check_once),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
