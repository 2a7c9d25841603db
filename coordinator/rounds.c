/*  coordinator/rounds.c: successive halving and the confirmation round
    (see rounds.h): the store and index side; the pure decisions are
    rounds_decide.c, the neighbours of stage 1's leaders refine.c. */
#include <czmq.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rounds.h"
#include "refine.h"
#include "search.h"
#include "promote.h"
#include "arena.h"
#include "cpb.h"
#include "log.h"
#include "util.h"

// ------------------------------------------------------- store and index side

void ak_rounds_new_clear (ak_rounds_new_t *out)
{
    for (size_t i = 0; i < out->n; i++)
        ak__task_record__free_unpacked (out->tasks[i], NULL);
    free (out->tasks);
    for (size_t i = 0; i < out->nchecked; i++)
        if (out->checked[i].winner)
            ak__winner__free_unpacked (out->checked[i].winner, NULL);
    free (out->checked);
    memset (out, 0, sizeof *out);
}

static void s_out_add (ak_rounds_new_t *out, Ak__TaskRecord *rec)
{
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 8;
        out->tasks = ak_realloc (out->tasks, out->cap * sizeof *out->tasks);
    }
    out->tasks[out->n++] = rec;
}

/* One (op, class) of a batch and what the round logic read of it. */
typedef struct {
    ak_txn_t         *txn;
    ak_sched_t       *sched;
    ak_batch_t       *batch;
    const char       *op;
    const char       *cls;
    zhashx_t         *finishing;        /* task ids turning terminal in txn; may be NULL */
    uint64_t          now;
    ak_rounds_new_t  *out;
    Ak__BatchRecord  *brec;             /* loaded on first need */
    /* loaded tasks */
    Ak__TaskRecord  **recs;
    Ak__Receipt     **receipts;
    ak_promote_cand_t *cands;
    ak_promote_eval_t *evals;
    size_t            n;
    ak_arena_t       *arena;            /* recs and receipts live here */
} s_pair_t;

static bool s_terminal (const s_pair_t *p, const ak_task_t *t)
{
    return ak_tstate_terminal (t->state) || (p->finishing && zhashx_lookup (p->finishing, t->task_id));
}

static void s_pair_unload (s_pair_t *p)
{
    ak_arena_destroy (&p->arena);       /* every record and receipt */
    free (p->recs);
    free (p->receipts);
    free (p->cands);
    free (p->evals);
    p->recs = NULL;
    p->receipts = NULL;
    p->cands = NULL;
    p->evals = NULL;
    p->n = 0;
}

/* Reads the tune tasks of the pair that `want` selects, with their
   accepted receipts, into p->recs / p->receipts: only the fields the
   decisions read (promote.h), or with full every field. */
static int s_pair_read (s_pair_t *p, bool (*want) (const ak_task_t *t, uint32_t arg), uint32_t arg,
                        bool full, ak_err_t *err)
{
    ak_batch_t *b = p->batch;
    for (size_t i = 0; i < b->ntasks; i++) {
        const ak_task_t *t = b->tasks[i];
        if (strcmp (t->kind, "tune") != 0 || strcmp (t->op, p->op) != 0
            || strcmp (t->device_class, p->cls) != 0 || !want (t, arg))
            continue;
        Ak__TaskRecord *rec = NULL;
        int rc = full ? ak_store_get_task (p->txn, t->task_id, &rec, err)
                      : ak_store_get_only (p->txn, AK_DB_TASKS, t->task_id, &ak__task_record__descriptor,
                                           ak_promote_task_fields (), (ProtobufCMessage **) &rec, err);
        if (rc)
            return rc;
        Ak__Receipt *r = NULL;
        rc = ak_promote_receipt_of (p->txn, rec, full, &r, err);
        if (rc)
            return rc;
        p->recs[p->n] = rec;
        p->receipts[p->n] = r;
        p->n++;
    }
    return 0;
}

#ifndef NDEBUG
/* Debug builds: the same pass from full records must evaluate every
   candidate the same (a decision reading a field ak_promote_task_fields or
   ak_promote_receipt_fields leaves out would not). */
static void s_pair_check (s_pair_t *p, bool (*want) (const ak_task_t *t, uint32_t arg), uint32_t arg,
                          const ak_promote_rule_t *rule)
{
    s_pair_t full = *p;
    full.recs = ak_calloc (p->batch->ntasks ? p->batch->ntasks : 1, sizeof *full.recs);
    full.receipts = ak_calloc (p->batch->ntasks ? p->batch->ntasks : 1, sizeof *full.receipts);
    full.n = 0;
    full.arena = ak_arena_new ();
    ak_err_t err = { 0 };
    ProtobufCAllocator *was = ak_store_decode_with (p->txn, ak_arena_pb (full.arena));
    int rc = s_pair_read (&full, want, arg, true, &err);
    ak_store_decode_with (p->txn, was);
    if (rc || full.n != p->n) {
        ak_error ("debug: full read of %s/%s: %s (%zu records, slim %zu)", p->op, p->cls, err.msg, full.n, p->n);
        abort ();
    }
    for (size_t i = 0; i < p->n; i++) {
        const Ak__TaskRecord *t = full.recs[i];
        ak_promote_cand_t c = { t->task_id, t->candidate_name, t->params, t->n_params, t->state,
                                t->last_error, full.receipts[i] };
        ak_promote_eval_t ev;
        ak_promote_eval (rule, &c, &ev);
        const ak_promote_eval_t *sl = &p->evals[i];
        if (ev.ok != sl->ok || ev.promotable != sl->promotable || ev.speedup != sl->speedup
            || ev.noise != sl->noise || strcmp (ev.status, sl->status) != 0 || strcmp (ev.reason, sl->reason) != 0
            || t->stage != p->recs[i]->stage || strcmp (t->task_id, p->recs[i]->task_id) != 0) {
            ak_error ("debug: task %s evaluates differently from its slim record: %s / %s", t->task_id,
                      ev.reason, sl->reason);
            abort ();
        }
    }
    ak_arena_destroy (&full.arena);
    free (full.recs);
    free (full.receipts);
}
#endif

/* Loads the tune tasks of the pair that `want` selects, with receipts and
   evaluations under the batch policy's rule. */
static int s_pair_load (s_pair_t *p, bool (*want) (const ak_task_t *t, uint32_t arg), uint32_t arg,
                        ak_err_t *err)
{
    ak_batch_t *b = p->batch;
    p->recs = ak_calloc (b->ntasks ? b->ntasks : 1, sizeof *p->recs);
    p->receipts = ak_calloc (b->ntasks ? b->ntasks : 1, sizeof *p->receipts);
    /* up to a batch's worth of records, decoded together and freed
       together: into an arena (arena.h) */
    p->arena = ak_arena_new ();
    ProtobufCAllocator *was = ak_store_decode_with (p->txn, ak_arena_pb (p->arena));
    int rc = s_pair_read (p, want, arg, false, err);
    ak_store_decode_with (p->txn, was);
    if (rc)
        return rc;
    p->cands = ak_calloc (p->n ? p->n : 1, sizeof *p->cands);
    p->evals = ak_calloc (p->n ? p->n : 1, sizeof *p->evals);
    const Ak__Policy *pol = p->brec->policy;
    ak_promote_rule_t rule = { .threshold = pol ? pol->threshold : 0.03,
                               .max_regression = pol ? pol->max_regression : 0.05 };
    for (size_t i = 0; i < p->n; i++) {
        const Ak__TaskRecord *t = p->recs[i];
        p->cands[i] = (ak_promote_cand_t) { t->task_id, t->candidate_name, t->params, t->n_params,
                                            t->state, t->last_error, p->receipts[i] };
        ak_promote_eval (&rule, &p->cands[i], &p->evals[i]);
    }
#ifndef NDEBUG
    s_pair_check (p, want, arg, &rule);
#endif
    return 0;
}

static bool s_want_stage (const ak_task_t *t, uint32_t stage)
{
    return t->stage == stage;
}

/* stage 0 and the last stage `rounds` (the line of halving may have ended
   earlier: then only stage 0) */
static bool s_want_final (const ak_task_t *t, uint32_t rounds)
{
    return t->stage == 0 || t->stage == rounds;
}

/* Stores a new task copied from src in txn and hands it to out. */
static int s_create_as (s_pair_t *p, const Ak__TaskRecord *src, const char *kind, uint32_t stage,
                        const ak_candidate_t *cand, const int64_t *values, ak_err_t *err)
{
    size_t made = 0;
    for (size_t i = 0; i < p->out->n; i++)
        made += strcmp (p->out->tasks[i]->batch_id, p->batch->batch_id) == 0;
    /* src holds only what the decisions read (s_pair_read): the copy
       starts from the stored record */
    Ak__TaskRecord *rec = NULL;
    int grc = ak_store_get_task (p->txn, src->task_id, &rec, err);
    if (grc)
        return grc;
    /* ids continue the batch's sequence; one taken by a record the index
       skipped is passed over */
    for (size_t seq = p->batch->ntasks + made + 1; ; seq++) {
        ak_cpb_setf (&rec->task_id, "%s.%04zu", p->batch->batch_id, seq);
        Ak__TaskRecord *old = NULL;
        int rc = ak_store_get_task (p->txn, rec->task_id, &old, err);
        if (rc == AK_ENOTFOUND)
            break;
        if (old)
            ak__task_record__free_unpacked (old, NULL);
        if (rc && rc != AK_ESTORE) {
            ak__task_record__free_unpacked (rec, NULL);
            return rc;
        }
    }
    /* a neighbour (refine.h): the seed's task with cand's params set to values */
    for (size_t k = 0; cand && k < rec->n_params; k++)
        for (size_t i = 0; i < cand->nparams; i++)
            if (rec->params[k]->name && strcmp (rec->params[k]->name, cand->params[i].name) == 0)
                rec->params[k]->value = values[i];
    ak_cpb_set (&rec->kind, kind);
    ak_cpb_set (&rec->state, "queued");
    rec->attempt = 1;
    rec->attempt_base = 0;
    ak_cpb_set (&rec->receipt_id, "");
    ak_cpb_set (&rec->status, "");
    ak_cpb_set (&rec->worker_id, "");
    ak_cpb_set (&rec->last_error, "");
    ak_cpb_set (&rec->avoid_worker, "");
    ak_cpb_set (&rec->confirm_of, "");
    rec->queued_ms = p->now;
    rec->leased_ms = 0;
    rec->finished_ms = 0;
    rec->duplicates = 0;
    rec->stage = stage;
    /* the full policy is the batch's; stages shorten it */
    if (p->brec->policy) {
        if (rec->policy)
            ak__policy__free_unpacked (rec->policy, NULL);
        rec->policy = (Ak__Policy *) ak_cpb_dup (&p->brec->policy->base);
        if (!rec->policy) {
            ak__task_record__free_unpacked (rec, NULL);
            return ak_err_set (err, AK_EINTERNAL, "copying the policy of batch %s failed",
                               p->batch->batch_id);
        }
    }
    if (strcmp (kind, "confirm") == 0) {
        ak_cpb_set (&rec->avoid_worker, src->worker_id);
        ak_cpb_set (&rec->confirm_of, src->task_id);
        if (rec->policy) {
            /* fresh inputs: a seed of its own, never 0 (the worker's default) */
            uint64_t st = ak_search_rng_seed (rec->policy->seed, src->task_id);
            uint64_t seed = ak_search_rng_next (&st);
            rec->policy->seed = seed && seed != rec->policy->seed ? seed : rec->policy->seed + 1;
        }
    }
    else if (rec->policy)
        ak_search_stage_policy (rec->policy, stage);
    int rc = ak_store_put_task (p->txn, rec, err);
    if (rc) {
        ak__task_record__free_unpacked (rec, NULL);
        return rc;
    }
    s_out_add (p->out, rec);
    p->brec->ntasks = (uint32_t) (p->batch->ntasks + made + 1);
    return ak_store_put_batch (p->txn, p->brec, err);
}

static int s_create (s_pair_t *p, const Ak__TaskRecord *src, const char *kind, uint32_t stage,
                     ak_err_t *err)
{
    return s_create_as (p, src, kind, stage, NULL, NULL, err);
}

static int s_brec (s_pair_t *p, ak_err_t *err)
{
    if (p->brec)
        return 0;
    return ak_store_get_batch (p->txn, p->batch->batch_id, &p->brec, err);
}

/* The best `keep` of the loaded stage by the weighted speedup, then each
   workload's own leader that is not among them (rounds.h: workload picks
   need it measured with full timing), as indices into p's arrays in
   *idx_p (the caller frees it); *nb_p gets how many are the best. */
static size_t s_leaders (const s_pair_t *p, size_t keep, size_t **idx_p, size_t *nb_p)
{
    const Ak__Policy *pol = p->brec->policy;
    size_t *idx = ak_calloc (keep + p->n + 1, sizeof *idx);
    size_t nb = ak_rounds_best (p->cands, p->evals, p->n, keep, idx);
    size_t nl = ak_rounds_leaders (p->cands, p->evals, p->n, pol ? pol->threshold : 0.03, idx, nb, idx + nb,
                                   p->n);
    *idx_p = idx;
    *nb_p = nb;
    return nb + nl;
}

/* The next halving stage; *made gets how many tasks it has.  Stage smax
   is loaded here unless the caller left it loaded (s_refine). */
static int s_next_stage (s_pair_t *p, uint32_t smax, uint32_t n1, bool *made, ak_err_t *err)
{
    *made = false;
    int rc = p->recs ? 0 : s_pair_load (p, s_want_stage, smax, err);
    if (rc)
        return rc;
    const Ak__Policy *pol = p->brec->policy;
    uint32_t rounds = pol && pol->search_rounds >= 2 ? pol->search_rounds : 2;
    uint32_t keep = ak_search_stage_size (n1, pol && pol->search_keep ? pol->search_keep : 4, rounds,
                                          smax + 1);
    size_t *best = NULL, nb = 0;
    size_t n = s_leaders (p, keep, &best, &nb);
    for (size_t k = 0; k < n && rc == 0; k++)
        rc = s_create (p, p->recs[best[k]], "tune", smax + 1, err);
    if (rc == 0) {
        *made = n > 0;
        ak_info ("batch %s: %s on %s: halving stage %u done (%zu tasks), %zu of them to stage %u%s, "
                 "%zu more as workload leaders", p->batch->batch_id, p->op, p->cls, smax, p->n, nb, smax + 1,
                 smax + 1 == rounds ? " (full timing)" : "", n - nb);
    }
    free (best);
    s_pair_unload (p);
    return rc;
}

/* Whether the first stage of the pair got its neighbours already: a
   search summary of the pair says how many it added. */
static bool s_refined (const s_pair_t *p)
{
    for (size_t i = 0; i < p->brec->n_search; i++) {
        const Ak__SearchSummary *sum = p->brec->search[i];
        if (sum->refined && strcmp (sum->op, p->op) == 0 && strcmp (sum->device_class, p->cls) == 0)
            return true;
    }
    return false;
}

/* The neighbours of the first stage's leaders (refine.h), at stage 1 with
   its short timing; *made when there were any.  When there were none the
   stage stays loaded for s_next_stage. */
static int s_refine (s_pair_t *p, uint32_t cap, bool *made, ak_err_t *err)
{
    *made = false;
    int rc = s_pair_load (p, s_want_stage, 1, err);
    if (rc)
        return rc;
    const Ak__Policy *pol = p->brec->policy;
    size_t *lead = NULL, nb = 0;
    size_t nseeds = s_leaders (p, pol && pol->search_keep ? pol->search_keep : 4, &lead, &nb);
    ak_promote_cand_t *seeds = ak_calloc (nseeds + 1, sizeof *seeds);
    for (size_t k = 0; k < nseeds; k++)
        seeds[k] = p->cands[lead[k]];
    /* every task of an op in a batch has the op's one spec */
    Ak__TaskRecord *first = NULL;
    char *text = NULL;
    size_t len = 0;
    ak_spec_t *spec = NULL;
    ak_refine_new_t *plan = NULL;
    size_t nplan = 0;
    if (nseeds > 0) {
        rc = ak_store_get_task (p->txn, p->recs[lead[0]]->task_id, &first, err);
        if (rc == 0)
            rc = ak_store_get_blob (p->txn, first->spec_digest, &text, &len, err);
        ak_err_t sub = { 0 };
        /* a spec this build cannot read (another version's) refines
           nothing; the halving goes on without it */
        if (rc == 0 && ak_spec_parse_text (text, len, first->spec_digest, &spec, &sub))
            ak_error ("batch %s: %s on %s: no refinement: its spec does not parse here: %s", p->batch->batch_id,
                      p->op, p->cls, sub.msg);
        else if (rc == 0)
            rc = ak_refine_plan (spec, seeds, nseeds, p->cands, p->n, cap, &plan, &nplan, err);
    }
    /* each neighbour is counted in its candidate's summary, which is also
       what says the stage was refined (s_refined): one without a summary
       is not added, so this runs once a pair */
    size_t added = 0;
    for (size_t k = 0; k < nplan && rc == 0; k++) {
        Ak__SearchSummary *sum = NULL;
        for (size_t i = 0; i < p->brec->n_search && !sum; i++)
            if (strcmp (p->brec->search[i]->op, p->op) == 0
                && strcmp (p->brec->search[i]->device_class, p->cls) == 0
                && strcmp (p->brec->search[i]->candidate_name, plan[k].cand->name) == 0)
                sum = p->brec->search[i];
        if (!sum)
            continue;
        sum->refined++;
        rc = s_create_as (p, p->recs[lead[plan[k].seed]], "tune", 1, plan[k].cand, plan[k].values, err);
        added++;
    }
    if (rc == 0) {
        *made = added > 0;
        ak_info ("batch %s: %s on %s: halving stage 1 done (%zu tasks): %zu neighbours of its %zu leaders added "
                 "to it", p->batch->batch_id, p->op, p->cls, p->n, added, nseeds);
    }
    free (plan);
    ak_spec_destroy (&spec);
    free (text);
    if (first)
        ak__task_record__free_unpacked (first, NULL);
    free (seeds);
    free (lead);
    if (rc || *made)
        s_pair_unload (p);
    return rc;
}

/* Confirm tasks for the finalists of a provisional winner. */
static int s_confirm (s_pair_t *p, uint32_t rounds, Ak__Winner **decided, ak_err_t *err)
{
    int rc = s_pair_load (p, s_want_final, rounds, err);
    if (rc)
        return rc;
    const Ak__Policy *pol = p->brec->policy;
    ak_promote_rule_t rule = { .threshold = pol ? pol->threshold : 0.03,
                               .max_regression = pol ? pol->max_regression : 0.05 };
    Ak__Winner *win = NULL;
    ak_promote_eval_t *ev = ak_calloc (p->n ? p->n : 1, sizeof *ev);
    ak_promote (p->op, p->cls, &rule, p->cands, p->n, ev, &win);
    double implausible = pol && pol->implausible > 1 ? pol->implausible : 10;
    bool confirm = pol && pol->confirm;
    bool round = (win->promoted && (confirm || win->speedup > implausible)) || (confirm && win->n_picks > 0);
    if (round) {
        size_t fin[AK_ROUNDS_MAX_FINALISTS];
        size_t nf = win->promoted ? ak_rounds_finalists (p->cands, ev, p->n, fin) : 0;
        for (size_t k = 0; k < nf && rc == 0; k++)
            rc = s_create (p, p->recs[fin[k]], "confirm", p->recs[fin[k]]->stage, err);
        /* the tasks of workload picks too (promote.h): a profile installs
           a pick only on another worker's agreeing measurement */
        size_t npk = 0;
        for (size_t j = 0; confirm && j < win->n_picks && rc == 0; j++) {
            size_t i = 0;
            while (i < p->n && strcmp (p->cands[i].task_id, win->picks[j]->task_id) != 0)
                i++;
            bool done = i == p->n;
            for (size_t k = 0; !done && k < nf; k++)
                done = fin[k] == i;
            for (size_t k = 0; !done && k < j; k++)
                done = strcmp (win->picks[k]->task_id, win->picks[j]->task_id) == 0;
            if (!done) {
                rc = s_create (p, p->recs[i], "confirm", p->recs[i]->stage, err);
                npk++;
            }
        }
        if (rc == 0 && win->promoted)
            ak_info ("batch %s: %s on %s: provisional winner %s %.3fx; %zu finalist(s) and %zu workload pick(s) "
                     "to confirm%s", p->batch->batch_id, p->op, p->cls, win->candidate_name, win->speedup, nf, npk,
                     win->speedup > implausible ? " (implausible speedup)" : "");
        else if (rc == 0)
            ak_info ("batch %s: %s on %s: the baseline stays; %zu workload pick(s) to confirm", p->batch->batch_id,
                     p->op, p->cls, npk);
    }
    if (!round && rc == 0) {
        *decided = win;             /* no confirmation round: this is the pair's winner */
        win = NULL;
    }
    if (win)
        ak__winner__free_unpacked (win, NULL);
    free (ev);
    s_pair_unload (p);
    return rc;
}

/*  What s_advance_pair needs to know of an (op, class)'s tasks besides
    their states: how many confirm tasks, the highest halving stage, the
    tune tasks of stage 1.  Tasks are only ever appended to a batch and
    their kind and stage never change, so this holds until ntasks grows;
    without it every group commit scanned the whole batch (100,000 tasks)
    with string compares, the coordinator's largest cost per receipt. */
typedef struct {
    size_t   ntasks;                /* batch->ntasks when counted */
    size_t   nconfirm;
    uint32_t smax, n1;
    size_t   hint;                  /* where the last open task was found */
    bool     checked;               /* the final check found nothing to create, */
    uint64_t checked_reopens;       /* with the batch's reopens at this count, */
    Ak__Winner *winner;             /* and this winner (ak_rounds_winners) */
} s_memo_t;

static uint64_t s_final_checks;

uint64_t ak_rounds_final_checks (void)
{
    return s_final_checks;
}

void ak_rounds_committed (ak_rounds_new_t *out, ak_sched_t *sched)
{
    ak_sched_extend (sched, out->tasks, out->n);
    for (size_t i = 0; i < out->nchecked; i++) {
        s_memo_t *m = out->checked[i].memo;
        m->checked = true;
        m->checked_reopens = out->checked[i].reopens;
        if (m->winner)
            ak__winner__free_unpacked (m->winner, NULL);
        m->winner = out->checked[i].winner;
        out->checked[i].winner = NULL;
    }
    ak_rounds_new_clear (out);
}

static void s_memo_free (void **item)
{
    s_memo_t *m = *item;
    if (m && m->winner)
        ak__winner__free_unpacked (m->winner, NULL);
    free (m);
    *item = NULL;
}

static s_memo_t *s_memo (ak_batch_t *b, const char *op, const char *cls)
{
    zhashx_t *memos = b->rounds_memo;
    if (!memos) {
        memos = zhashx_new ();
        if (!memos)
            abort ();
        zhashx_set_destructor (memos, s_memo_free);
        b->rounds_memo = memos;
    }
    char key[512];
    snprintf (key, sizeof key, "%s/%s", op, cls);
    s_memo_t *m = zhashx_lookup (memos, key);
    if (!m) {
        m = ak_calloc (1, sizeof *m);
        zhashx_insert (memos, key, m);
    }
    if (m->ntasks != b->ntasks) {
        if (m->winner)
            ak__winner__free_unpacked (m->winner, NULL);
        *m = (s_memo_t) { .ntasks = b->ntasks, .hint = m->hint };
        for (size_t i = 0; i < b->ntasks; i++) {
            const ak_task_t *t = b->tasks[i];
            if (strcmp (t->op, op) != 0 || strcmp (t->device_class, cls) != 0)
                continue;
            if (strcmp (t->kind, "confirm") == 0)
                m->nconfirm++;
            else if (strcmp (t->kind, "tune") == 0) {
                if (t->stage > m->smax)
                    m->smax = t->stage;
                m->n1 += t->stage == 1;
            }
        }
    }
    return m;
}

/* True when t is an open tune task of the pair (at stage smax when
   any_stage is false). */
static bool s_open_tune (const s_pair_t *p, const ak_task_t *t, uint32_t smax, bool any_stage)
{
    return (any_stage || t->stage == smax) && strcmp (t->kind, "tune") == 0 && strcmp (t->op, p->op) == 0
        && strcmp (t->device_class, p->cls) == 0 && !s_terminal (p, t);
}

static int s_advance_pair (s_pair_t *p, ak_err_t *err)
{
    ak_batch_t *b = p->batch;
    if (b->state != AK_BS_OPEN)
        return 0;
    s_memo_t *memo = s_memo (b, p->op, p->cls);
    uint32_t smax = memo->smax, n1 = memo->n1;
    if (memo->nconfirm)
        return 0;                       /* the last round is out already */
    /* one open task at the current stage (exhaustive: any) is enough to
       wait; the search starts where the last one was found, which is
       nearly always still open, so a commit costs a few compares */
    size_t open_tunes = 0;
    size_t n = b->ntasks, start = memo->hint < n ? memo->hint : 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        if (s_open_tune (p, b->tasks[i], smax, smax == 0)) {
            memo->hint = i;
            return 0;                   /* the current halving stage (exhaustive: the tasks) runs */
        }
    }
    /* no open task at the current stage: count the open ones left over */
    if (smax >= 1)
        for (size_t i = 0; i < n; i++)
            open_tunes += s_open_tune (p, b->tasks[i], smax, true);
    int rc = s_brec (p, err);
    if (rc)
        return rc;
    const Ak__Policy *pol = p->brec->policy;
    uint32_t rounds = pol && pol->search_rounds >= 2 ? pol->search_rounds : 2;
    if (smax == 1 && pol && pol->search_refine && !s_refined (p)) {
        bool made = false;
        rc = s_refine (p, pol->search_refine, &made, err);
        if (rc || made)
            return rc;
    }
    if (smax >= 1 && smax < rounds) {
        bool made = false;
        rc = s_next_stage (p, smax, n1, &made, err);
        if (rc || made)
            return rc;
    }
    if (open_tunes)
        return 0;
    /* decided already on these very tasks (ak_rounds_committed) */
    if (memo->checked && memo->checked_reopens == b->reopens)
        return 0;
    size_t made = p->out->n;
    s_final_checks++;
    Ak__Winner *decided = NULL;
    rc = s_confirm (p, rounds, &decided, err);
    if (rc == 0 && p->out->n == made) {
        ak_rounds_new_t *out = p->out;
        if (out->nchecked == out->cap_checked) {
            out->cap_checked = out->cap_checked ? out->cap_checked * 2 : 4;
            out->checked = ak_realloc (out->checked, out->cap_checked * sizeof *out->checked);
        }
        out->checked[out->nchecked++] = (ak_rounds_checked_t) { memo, b->reopens, decided };
        decided = NULL;
    }
    if (decided)
        ak__winner__free_unpacked (decided, NULL);
    return rc;
}

/* Runs the round logic once for each distinct (batch, op, class) of the
   tune tasks in tasks. */
static int s_advance (ak_txn_t *txn, ak_sched_t *sched, ak_task_t *const *tasks, size_t n,
                      zhashx_t *finishing, uint64_t now, ak_rounds_new_t *out, ak_err_t *err)
{
    int rc = 0;
    zhashx_t *seen = zhashx_new ();
    if (!seen)
        abort ();
    for (size_t i = 0; i < n && rc == 0; i++) {
        const ak_task_t *t = tasks[i];
        if (!t || !t->op || strcmp (t->kind, "tune") != 0)
            continue;
        char key[512];
        snprintf (key, sizeof key, "%s/%s/%s", t->batch->batch_id, t->op, t->device_class);
        if (zhashx_lookup (seen, key))
            continue;
        zhashx_insert (seen, key, (void *) t);
        s_pair_t p = { .txn = txn, .sched = sched, .batch = t->batch, .op = t->op,
                       .cls = t->device_class, .finishing = finishing, .now = now, .out = out };
        rc = s_advance_pair (&p, err);
        s_pair_unload (&p);
        if (p.brec)
            ak__batch_record__free_unpacked (p.brec, NULL);
    }
    zhashx_destroy (&seen);
    return rc;
}

int ak_rounds_advance (ak_txn_t *txn, ak_sched_t *sched, ak_task_t *const *touched, size_t n,
                       uint64_t now_wall_ms, ak_rounds_new_t *out, ak_err_t *err)
{
    if (n == 0)
        return 0;
    zhashx_t *finishing = zhashx_new ();
    if (!finishing)
        abort ();
    for (size_t i = 0; i < n; i++)
        if (touched[i])
            zhashx_insert (finishing, touched[i]->task_id, (void *) touched[i]);
    int rc = s_advance (txn, sched, touched, n, finishing, now_wall_ms, out, err);
    zhashx_destroy (&finishing);
    return rc;
}

int ak_rounds_advance_batch (ak_txn_t *txn, ak_sched_t *sched, ak_batch_t *batch,
                             uint64_t now_wall_ms, ak_rounds_new_t *out, ak_err_t *err)
{
    /* one representative tune task per (op, class) */
    size_t n = batch->ntasks;
    ak_task_t **reps = ak_calloc (n ? n : 1, sizeof *reps);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp (batch->tasks[i]->kind, "tune") == 0)
            reps[m++] = batch->tasks[i];
    int rc = s_advance (txn, sched, reps, m, NULL, now_wall_ms, out, err);
    free (reps);
    return rc;
}

/* One (op, class) of a settling batch: its memo, and its first task id
   in the store's (byte) order, which orders ak_results_decide's pairs. */
typedef struct {
    const s_memo_t *memo;
    const char     *first;
} s_pair_first_t;

static int s_cmp_first (const void *a, const void *b)
{
    return strcmp (((const s_pair_first_t *) a)->first, ((const s_pair_first_t *) b)->first);
}

bool ak_rounds_winners (ak_batch_t *batch, Ak__Winner ***winners_p, size_t *n_p)
{
    *winners_p = NULL;
    *n_p = 0;
    zhashx_t *memos = batch->rounds_memo;
    if (!memos)
        return false;
    s_pair_first_t *pairs = NULL;
    size_t n = 0, cur = 0;
    const ak_task_t *prev = NULL;
    for (size_t i = 0; i < batch->ntasks; i++) {
        const ak_task_t *t = batch->tasks[i];
        if (!prev || strcmp (t->op, prev->op) != 0 || strcmp (t->device_class, prev->device_class) != 0) {
            char key[512];
            snprintf (key, sizeof key, "%s/%s", t->op, t->device_class);
            const s_memo_t *m = zhashx_lookup (memos, key);
            /* the final check of this (op, class) found its winner on the
               tasks as they are now, and no confirmation round followed */
            if (!m || !m->checked || !m->winner || m->ntasks != batch->ntasks || m->nconfirm
                || m->checked_reopens != batch->reopens) {
                free (pairs);
                return false;
            }
            for (cur = 0; cur < n && pairs[cur].memo != m; cur++)
                ;
            if (cur == n) {
                pairs = ak_realloc (pairs, (n + 1) * sizeof *pairs);
                pairs[n++] = (s_pair_first_t) { m, t->task_id };
            }
            prev = t;
        }
        if (strcmp (t->task_id, pairs[cur].first) < 0)
            pairs[cur].first = t->task_id;
    }
    if (n == 0) {
        free (pairs);
        return false;
    }
    qsort (pairs, n, sizeof *pairs, s_cmp_first);
    Ak__Winner **list = ak_calloc (n, sizeof *list);
    for (size_t k = 0; k < n; k++)
        list[k] = (Ak__Winner *) ak_cpb_dup (&pairs[k].memo->winner->base);
    free (pairs);
    *winners_p = list;
    *n_p = n;
    return true;
}
