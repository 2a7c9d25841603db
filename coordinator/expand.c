/*  coordinator/expand.c: manifest -> batch, tasks and blobs (see expand.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "expand.h"
#include "cpb.h"
#include "refine.h"
#include "search.h"
#include "digest.h"
#include "space.h"
#include "util.h"

typedef struct {
    ak_expansion_t *exp;
    size_t          cap_tasks;
    size_t          cap_blobs;
    const char     *batch_id;
    size_t          seq;
    Ak__SearchSummary **search;         /* one per (op, class, candidate) */
    size_t          nsearch;
    const ak_installed_t *inst;         /* installed entries (policy.search.installed) */
    size_t          ninst;
} s_ctx_t;

void ak_batch_id_format (uint64_t n, char buf[32])
{
    snprintf (buf, 32, "B%06llu", (unsigned long long) n);
}

/* Adds a blob (copying data) unless one with the same digest is there;
   writes the digest into digest_out. */
static int s_add_blob (s_ctx_t *ctx, const char *data, size_t len, char digest_out[65], ak_err_t *err)
{
    char digest[65];
    if (ak_sha256_hex (data, len, digest))
        return ak_err_set (err, AK_EINTERNAL, "sha256 failed");
    memcpy (digest_out, digest, sizeof digest);
    ak_expansion_t *exp = ctx->exp;
    for (size_t i = 0; i < exp->nblobs; i++)
        if (strcmp (exp->blobs[i].digest, digest) == 0)
            return 0;
    if (exp->nblobs == ctx->cap_blobs) {
        ctx->cap_blobs = ctx->cap_blobs ? ctx->cap_blobs * 2 : 8;
        exp->blobs = ak_realloc (exp->blobs, ctx->cap_blobs * sizeof *exp->blobs);
    }
    ak_blob_t *blob = &exp->blobs[exp->nblobs++];
    memcpy (blob->digest, digest, sizeof digest);
    blob->data = ak_malloc (len + 1);
    memcpy (blob->data, data, len);
    blob->data[len] = '\0';
    blob->len = len;
    return 0;
}

static void s_add_task (s_ctx_t *ctx, Ak__TaskRecord *task)
{
    ak_expansion_t *exp = ctx->exp;
    if (exp->ntasks == ctx->cap_tasks) {
        ctx->cap_tasks = ctx->cap_tasks ? ctx->cap_tasks * 2 : 64;
        exp->tasks = ak_realloc (exp->tasks, ctx->cap_tasks * sizeof *exp->tasks);
    }
    exp->tasks[exp->ntasks++] = task;
}

static Ak__Policy *s_policy (const ak_policy_t *p)
{
    Ak__Policy *pol = ak_malloc (sizeof *pol);
    ak__policy__init (pol);
    pol->max_attempts = p->max_attempts;
    pol->compile_timeout_ms = p->compile_timeout_ms;
    pol->run_timeout_ms = p->run_timeout_ms;
    pol->lease_ms = p->lease_ms;
    pol->warmup = p->warmup;
    pol->min_samples = p->min_samples;
    pol->max_samples = p->max_samples;
    pol->rsd_target = p->rsd_target;
    pol->max_time_ms = p->max_time_ms;
    pol->threshold = p->threshold;
    pol->max_regression = p->max_regression;
    pol->seed = p->seed;
    ak_cpb_set (&pol->search_strategy, p->search_strategy);
    pol->search_budget = p->search_budget;
    pol->search_keep = p->search_keep;
    pol->search_rounds = p->search_rounds;
    pol->search_refine = p->search_refine;
    pol->short_max_time_ms = p->short_max_time_ms;
    pol->confirm = p->confirm;
    pol->implausible = p->implausible;
    return pol;
}

static Ak__Workload **s_workloads (const ak_manifest_op_t *op)
{
    if (op->nworkloads == 0)
        return NULL;
    Ak__Workload **wl = ak_calloc (op->nworkloads, sizeof *wl);
    for (size_t i = 0; i < op->nworkloads; i++) {
        const ak_workload_t *src = &op->workloads[i];
        Ak__Workload *w = ak_malloc (sizeof *w);
        ak__workload__init (w);
        ak_cpb_set (&w->name, src->name);
        size_t nd = (size_t) (op->spec->nkeys > 0 ? op->spec->nkeys : 0);
        if (nd) {
            w->dims = ak_calloc (nd, sizeof *w->dims);
            memcpy (w->dims, src->dims, nd * sizeof *w->dims);
            w->n_dims = nd;
        }
        ak_cpb_set (&w->dtype, ak_dtype_name (src->dtype));
        w->weight = src->weight;
        wl[i] = w;
    }
    return wl;
}

/* The next task record, copied from the template of its (op, target). */
static Ak__TaskRecord *s_task_from (s_ctx_t *ctx, const Ak__TaskRecord *tmpl, const char *kind, ak_err_t *err)
{
    if (ctx->exp->ntasks >= AK_EXPAND_MAX_TASKS) {
        ak_err_set (err, AK_ETOOBIG, "batch would have more than %d tasks", AK_EXPAND_MAX_TASKS);
        return NULL;
    }
    Ak__TaskRecord *task = (Ak__TaskRecord *) ak_cpb_dup (&tmpl->base);
    if (!task) {
        ak_err_set (err, AK_EINTERNAL, "copying a task template failed");
        return NULL;
    }
    ak_cpb_setf (&task->task_id, "%s.%04zu", ctx->batch_id, ++ctx->seq);
    ak_cpb_set (&task->kind, kind);
    return task;
}

typedef struct {
    s_ctx_t              *ctx;
    const Ak__TaskRecord *tmpl;
    ak_err_t             *err;
    int                   rc;
    bool                  profile;     /* a profile task beside each tune task */
} s_walk_t;

static int s_on_config (const ak_candidate_t *cand, const int64_t *values, void *arg)
{
    s_walk_t *walk = arg;
    const char *names[AK_MAX_PARAMS];
    size_t np = cand->nparams < AK_MAX_PARAMS ? cand->nparams : AK_MAX_PARAMS;
    for (size_t i = 0; i < np; i++)
        names[i] = cand->params[i].name;
    for (int k = 0; k < (walk->profile ? 2 : 1); k++) {
        Ak__TaskRecord *task = s_task_from (walk->ctx, walk->tmpl, k ? "profile" : "tune", walk->err);
        if (!task) {
            walk->rc = walk->err->code;
            return 1;
        }
        task->params = ak_cpb_params_new (names, values, np);
        task->n_params = np;
        s_add_task (walk->ctx, task);
    }
    return 0;
}

/* The configurations of the installed entries of (op, target, cand) that
   are valid in cand's space today (a parameter missing, a value no longer
   in its list or a constraint false: left out), none twice nor equal to
   one of cand's own seeds, in the order given: a malloc'ed array of *n
   rows (NULL when none). */
static int64_t *s_installed (const s_ctx_t *ctx, const char *op, const char *target, const ak_candidate_t *cand,
                             size_t *n)
{
    size_t np = cand->nparams;
    int64_t *out = NULL;
    *n = 0;
    if (np == 0 || np > AK_MAX_PARAMS)
        return NULL;
    for (size_t e = 0; e < ctx->ninst; e++) {
        const ak_installed_t *in = &ctx->inst[e];
        if (!ak_streq (in->op, op) || !ak_streq (in->device_class, target) || !ak_streq (in->candidate, cand->name)
            || in->nparams != np)
            continue;
        int64_t v[AK_MAX_PARAMS];
        if (!ak_refine_values (cand, in->params, in->nparams, v) || !ak_space_valid (cand, v))
            continue;
        bool dup = false;
        for (size_t k = 0; k < cand->nseeds && !dup; k++)
            dup = memcmp (cand->seeds + k * np, v, np * sizeof *v) == 0;
        for (size_t k = 0; k < *n && !dup; k++)
            dup = memcmp (out + k * np, v, np * sizeof *v) == 0;
        if (dup)
            continue;
        out = ak_realloc (out, (*n + 1) * np * sizeof *out);
        memcpy (out + *n * np, v, np * sizeof *v);
        (*n)++;
    }
    return out;
}

/* The tune tasks of one candidate (rounds.h): every valid configuration
   at stage 0 (exhaustive), or a sample of policy.search_budget of them at
   stage 1 with the short timing policy (halving): the candidate's seeds,
   with policy.search.installed the installed entries' configurations, and
   the rest of the budget drawn at random (ak_search_sample_with). */
static int s_expand_candidate (s_ctx_t *ctx, const ak_policy_t *pol, const char *op, const char *target,
                               const ak_candidate_t *cand, const Ak__TaskRecord *ctmpl, bool profile,
                               ak_err_t *err)
{
    char salt[512];
    snprintf (salt, sizeof salt, "%s/%s/%s", op, target, cand->name);
    ak_search_sample_t sample;
    size_t ninst = 0;
    int64_t *inst = pol->search_installed ? s_installed (ctx, op, target, cand, &ninst) : NULL;
    int rc = ak_search_sample_with (cand, inst, ninst, pol->seed, salt,
                                    pol->search_budget ? pol->search_budget : 64, &sample, err);
    free (inst);
    if (rc)
        return rc;
    bool halving = strcmp (pol->search_strategy, "halving") == 0
                   || (strcmp (pol->search_strategy, "exhaustive") != 0 && sample.valid > sample.n);
    /* halving over a space that fits in one stage is the same as timing it all */
    halving = halving && sample.n > 0;

    Ak__SearchSummary *sum = ak_malloc (sizeof *sum);
    ak__search_summary__init (sum);
    ak_cpb_set (&sum->op, op);
    ak_cpb_set (&sum->device_class, target);
    ak_cpb_set (&sum->candidate_name, cand->name);
    ak_cpb_set (&sum->strategy, halving ? "halving" : "exhaustive");
    sum->valid = (uint32_t) sample.valid;
    sum->sampled = (uint32_t) (halving ? sample.n : sample.valid);
    sum->seeded = (uint32_t) (halving ? sample.seeded : 0);
    sum->installed = (uint32_t) (halving ? sample.extra : 0);
    sum->keep = halving ? ak_search_stage_size ((uint32_t) sample.n, pol->search_keep, pol->search_rounds,
                                                pol->search_rounds) : (uint32_t) sample.valid;
    sum->rounds = halving ? pol->search_rounds : 1;
    ctx->search = ak_realloc (ctx->search, (ctx->nsearch + 1) * sizeof *ctx->search);
    ctx->search[ctx->nsearch++] = sum;

    if (!halving) {
        ak_search_sample_clear (&sample);
        s_walk_t walk = { ctx, ctmpl, err, 0, profile };
        rc = ak_space_walk (cand, s_on_config, &walk, NULL, err);
        return walk.rc ? walk.rc : rc;
    }
    /* stage 1: short timing, no profile tasks (profiles are for configs
       timed in full) */
    Ak__TaskRecord *stmpl = (Ak__TaskRecord *) ak_cpb_dup (&ctmpl->base);
    if (!stmpl) {
        ak_search_sample_clear (&sample);
        return ak_err_set (err, AK_EINTERNAL, "copying a task template failed");
    }
    stmpl->stage = 1;
    ak_search_stage_policy (stmpl->policy, 1);
    s_walk_t walk = { ctx, stmpl, err, 0, false };
    for (size_t i = 0; i < sample.n && rc == 0; i++) {
        if (s_on_config (cand, sample.values + i * sample.nparams, &walk))
            rc = walk.rc;
    }
    ak__task_record__free_unpacked (stmpl, NULL);
    ak_search_sample_clear (&sample);
    return rc;
}

bool ak_expand_arch_fits (const char *arch, const char *target)
{
    int major, minor;
    if (!arch || !ak_class_cc (target, &major, &minor))
        return true;
    return ak_arch_check (arch, major, minor, NULL) == 0;
}

/* Tasks of one (op, target). */
static int s_expand_pair (s_ctx_t *ctx, const ak_manifest_t *m, size_t opi, const char *target,
                          const char *spec_digest, uint64_t now_ms, ak_err_t *err)
{
    const ak_manifest_op_t *op = &m->ops[opi];
    const ak_spec_t *spec = op->spec;
    const char *backend = ak_class_backend (target);
    const ak_baseline_t *base = ak_spec_baseline (spec, backend);
    char digest[65];
    int rc = 0;
    if (!base)
        return ak_err_set (err, AK_EINVAL, "ops[%zu] (%s): no baseline for backend '%s' (target '%s')",
                           opi, spec->name, backend, target);

    Ak__TaskRecord *tmpl = ak_malloc (sizeof *tmpl);
    ak__task_record__init (tmpl);
    ak_cpb_set (&tmpl->batch_id, ctx->batch_id);
    ak_cpb_set (&tmpl->state, "queued");
    tmpl->attempt = 1;
    ak_cpb_set (&tmpl->op, spec->name);
    ak_cpb_set (&tmpl->device_class, target);
    ak_cpb_set (&tmpl->backend, backend);
    ak_cpb_set (&tmpl->spec_digest, spec_digest);
    rc = s_add_blob (ctx, spec->reference.text, strlen (spec->reference.text), digest, err);
    if (rc)
        goto done;
    ak_cpb_set (&tmpl->reference_digest, digest);
    ak_cpb_set (&tmpl->reference_name, spec->reference.name);
    rc = s_add_blob (ctx, base->source.text, strlen (base->source.text), digest, err);
    if (rc)
        goto done;
    ak_cpb_set (&tmpl->baseline_digest, digest);
    ak_cpb_set (&tmpl->baseline_name, base->source.name);
    tmpl->workloads = s_workloads (op);
    tmpl->n_workloads = op->nworkloads;
    tmpl->policy = s_policy (&m->policy);
    tmpl->queued_ms = now_ms;

    Ak__TaskRecord *pre = s_task_from (ctx, tmpl, "preflight", err);
    if (!pre) {
        rc = err->code;
        goto done;
    }
    s_add_task (ctx, pre);
    /* "profile": true profiles the baseline and every configuration, on
       cuda targets only (the CUPTI range profiler). */
    bool profile = op->profile && strcmp (backend, "cuda") == 0;
    if (profile) {
        Ak__TaskRecord *pt = s_task_from (ctx, tmpl, "profile", err);
        if (!pt) {
            rc = err->code;
            goto done;
        }
        s_add_task (ctx, pt);
    }

    for (size_t c = 0; c < op->ncandidates; c++) {
        const ak_candidate_t *cand = ak_spec_candidate (spec, op->candidates[c]);
        if (!cand) {
            rc = ak_err_set (err, AK_EINVAL, "ops[%zu] (%s): candidates[%zu]: unknown candidate '%s'",
                             opi, spec->name, c, op->candidates[c]);
            goto done;
        }
        if (strcmp (cand->backend, backend) != 0 || !ak_expand_arch_fits (cand->arch, target))
            continue;
        Ak__TaskRecord *ctmpl = (Ak__TaskRecord *) ak_cpb_dup (&tmpl->base);
        if (!ctmpl) {
            rc = ak_err_set (err, AK_EINTERNAL, "copying a task template failed");
            goto done;
        }
        ak_cpb_set (&ctmpl->candidate_name, cand->name);
        ak_cpb_set (&ctmpl->candidate_source_name, cand->source.name);
        rc = s_add_blob (ctx, cand->source.text, strlen (cand->source.text), digest, err);
        if (rc == 0) {
            ak_cpb_set (&ctmpl->candidate_digest, digest);
            rc = s_expand_candidate (ctx, &m->policy, spec->name, target, cand, ctmpl, profile, err);
            if (rc)
                ak_err_prefix (err, "ops[%zu] (%s): candidate '%s'", opi, spec->name, cand->name);
        }
        ak__task_record__free_unpacked (ctmpl, NULL);
        if (rc)
            goto done;
    }
done:
    ak__task_record__free_unpacked (tmpl, NULL);
    return rc;
}

int ak_expand (const ak_manifest_t *m, const char *batch_id, const char *bundle_digest,
               uint64_t now_ms, ak_expansion_t **exp_p, ak_err_t *err)
{
    return ak_expand_with (m, NULL, 0, batch_id, bundle_digest, now_ms, exp_p, err);
}

int ak_expand_with (const ak_manifest_t *m, const ak_installed_t *inst, size_t ninst, const char *batch_id,
                    const char *bundle_digest, uint64_t now_ms, ak_expansion_t **exp_p, ak_err_t *err)
{
    int rc = 0;
    ak_err_t local;
    if (!err)
        err = &local;
    s_ctx_t ctx = { .batch_id = batch_id, .inst = inst, .ninst = ninst };
    ctx.exp = ak_calloc (1, sizeof *ctx.exp);
    *exp_p = NULL;
    if (m->nops == 0 || m->ntargets == 0) {
        rc = ak_err_set (err, AK_EINVAL, "manifest has no %s", m->nops == 0 ? "ops" : "targets");
        goto fail;
    }

    for (size_t o = 0; o < m->nops; o++) {
        char spec_digest[65];
        char *spec_text = ak_spec_to_text (m->ops[o].spec, false);
        if (!spec_text) {
            rc = ak_err_set (err, AK_EINTERNAL, "ops[%zu]: spec could not be serialised", o);
            goto fail;
        }
        rc = s_add_blob (&ctx, spec_text, strlen (spec_text), spec_digest, err);
        free (spec_text);
        if (rc)
            goto fail;
        for (size_t t = 0; t < m->ntargets; t++) {
            rc = s_expand_pair (&ctx, m, o, m->targets[t], spec_digest, now_ms, err);
            if (rc)
                goto fail;
        }
    }

    Ak__BatchRecord *b = ak_malloc (sizeof *b);
    ak__batch_record__init (b);
    ak_cpb_set (&b->batch_id, batch_id);
    ak_cpb_set (&b->name, m->name);
    ak_cpb_set (&b->state, "open");
    b->created_ms = now_ms;
    ak_cpb_set (&b->bundle_digest, bundle_digest);
    b->targets = ak_calloc (m->ntargets, sizeof *b->targets);
    for (size_t t = 0; t < m->ntargets; t++) {
        b->targets[t] = (char *) protobuf_c_empty_string;
        ak_cpb_set (&b->targets[t], m->targets[t]);
    }
    b->n_targets = m->ntargets;
    b->policy = s_policy (&m->policy);
    b->ntasks = (uint32_t) ctx.exp->ntasks;
    /* External specs that replace a built-in, so `show` and `report` say so. */
    b->overrides = ak_calloc (m->nops, sizeof *b->overrides);
    for (size_t o = 0; o < m->nops; o++)
        if (m->ops[o].override_builtin) {
            b->overrides[b->n_overrides] = (char *) protobuf_c_empty_string;
            ak_cpb_set (&b->overrides[b->n_overrides++], m->ops[o].spec->name);
        }
    if (b->n_overrides == 0) {
        free (b->overrides);
        b->overrides = NULL;
    }
    b->search = ctx.search;
    b->n_search = ctx.nsearch;
    ctx.search = NULL;
    ctx.nsearch = 0;
    ctx.exp->batch = b;
    *exp_p = ctx.exp;
    return 0;

fail:
    for (size_t i = 0; i < ctx.nsearch; i++)
        ak__search_summary__free_unpacked (ctx.search[i], NULL);
    free (ctx.search);
    ak_expansion_destroy (&ctx.exp);
    return rc;
}

int ak_expand_store (const ak_expansion_t *exp, ak_txn_t *txn, ak_err_t *err)
{
    int rc = 0;
    char digest[65];
    for (size_t i = 0; i < exp->nblobs; i++) {
        rc = ak_store_put_blob (txn, exp->blobs[i].data, exp->blobs[i].len, digest, err);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < exp->ntasks; i++) {
        rc = ak_store_put_task (txn, exp->tasks[i], err);
        if (rc)
            return rc;
    }
    return ak_store_put_batch (txn, exp->batch, err);
}

void ak_expansion_destroy (ak_expansion_t **self_p)
{
    if (self_p && *self_p) {
        ak_expansion_t *self = *self_p;
        if (self->batch)
            ak__batch_record__free_unpacked (self->batch, NULL);
        for (size_t i = 0; i < self->ntasks; i++)
            ak__task_record__free_unpacked (self->tasks[i], NULL);
        free (self->tasks);
        for (size_t i = 0; i < self->nblobs; i++)
            free (self->blobs[i].data);
        free (self->blobs);
        free (self);
        *self_p = NULL;
    }
}
