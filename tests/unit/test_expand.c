/*  tests/unit/test_expand.c: batch expansion (coordinator/expand.c). */
#include "support.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coordinator/expand.h"
#include "digest.h"
#include "spec.h"
#include "store.h"
#include "util.h"

/* A spec in the format of kernels/<op>/spec.json; `cands` is the JSON of
   its candidates array. */
static char *s_spec_json (const char *name, const char *k1, const char *k2, const char *cands)
{
    return ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"%s\", \"keys\": [\"%s\", \"%s\"],"
        " \"dtypes\": [\"float32\"], \"tolerances\": {\"float32\": {\"atol\": 1e-5, \"rtol\": 1e-5}},"
        " \"sizes\": [{\"name\": \"small\", \"size\": {\"%s\": 4, \"%s\": 8}},"
        "             {\"name\": \"medium\", \"size\": {\"%s\": 64, \"%s\": 128}}],"
        " \"stability_size\": \"small\", \"flops\": \"%s*%s\", \"bytes\": \"2*%s*%s*b\","
        " \"inputs\": [{\"name\": \"x\", \"count\": \"%s*%s\", \"range\": [-1, 1]}],"
        " \"outputs\": [{\"name\": \"y\", \"count\": \"%s*%s\"}],"
        " \"reference\": \"ref.c\","
        " \"baselines\": [{\"backend\": \"host\", \"source\": \"base.c\"},"
        "                 {\"backend\": \"cuda\", \"source\": \"base.cu\","
        "                  \"launch\": {\"grid\": [\"%s\"], \"block\": [\"128\"]}}],"
        " \"candidates\": %s}",
        name, k1, k2, k1, k2, k1, k2, k1, k2, k1, k2, k1, k2, k1, k2, k1, cands);
}

static void s_write_op (const char *dir, const char *op, const char *k1, const char *k2, const char *cands)
{
    char *sub = ak_path_join (dir, op);
    assert_int_equal (ak_mkdir_p (sub, 0700, NULL), 0);
    char *spec = s_spec_json (op, k1, k2, cands);
    free (ak_test_write (sub, "spec.json", spec));
    free (spec);
    free (ak_test_write (sub, "ref.c", "/* reference */ void ref (void) {}\n"));
    char *base = ak_sprintf ("/* %s host baseline */\n", op);
    free (ak_test_write (sub, "base.c", base));
    free (base);
    free (ak_test_write (sub, "base.cu", "/* cuda baseline */\n"));
    free (ak_test_write (sub, "blocked.c", "/* blocked */\n"));
    free (ak_test_write (sub, "simple.c", "/* simple */\n"));
    free (ak_test_write (sub, "tiled.cu", "/* tiled */\n"));
    free (ak_test_write (sub, "wide.c", "/* wide */\n"));
    free (sub);
}

static const char *s_opa_cands =
    "[{\"name\": \"blocked\", \"backend\": \"host\", \"source\": \"blocked.c\","
    "  \"params\": {\"BLOCK\": [4, 8, 16, 32], \"UNROLL\": [1, 2]},"
    "  \"constraints\": [\"BLOCK*UNROLL <= 32\"]},"
    " {\"name\": \"simple\", \"backend\": \"host\", \"source\": \"simple.c\"},"
    " {\"name\": \"tiled\", \"backend\": \"cuda\", \"source\": \"tiled.cu\", \"params\": {\"TILE\": [16, 32]},"
    "  \"launch\": {\"grid\": [\"(rows+TILE-1)/TILE\"], \"block\": [\"TILE\", \"TILE\"]}}]";
static const char *s_opb_cands =
    "[{\"name\": \"wide\", \"backend\": \"host\", \"source\": \"wide.c\", \"params\": {\"W\": [1, 2, 3]}}]";

typedef struct {
    char *dir;
    ak_manifest_t *m;
} fx_t;

/* Writes two ops and a manifest with `targets` and `opa_extra` (JSON
   members added to the opa op) and loads it. */
static fx_t *s_fixture (const char *targets, const char *opa_extra)
{
    fx_t *fx = ak_calloc (1, sizeof *fx);
    fx->dir = ak_test_tmpdir ("expand");
    s_write_op (fx->dir, "opa", "rows", "cols", s_opa_cands);
    s_write_op (fx->dir, "opb", "M", "N", s_opb_cands);
    char *manifest = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"nightly\", \"targets\": %s,"
        " \"policy\": {\"max_attempts\": 4, \"lease_ms\": 5000, \"threshold\": 0.05},"
        " \"ops\": [{\"spec\": \"opa/spec.json\"%s},"
        "           {\"spec\": \"opb/spec.json\", \"workloads\": [\"medium\", {\"name\": \"big\", \"size\": {\"M\": 256, \"N\": 512}, \"weight\": 3}]}]}",
        targets, opa_extra);
    char *path = ak_test_write (fx->dir, "batch.json", manifest);
    ak_err_t err = { 0 };
    int rc = ak_manifest_load (path, &fx->m, &err);
    if (rc)
        fail_msg ("manifest: %s", err.msg);
    free (manifest);
    free (path);
    return fx;
}

static void s_fixture_free (fx_t *fx)
{
    ak_manifest_destroy (&fx->m);
    ak_test_rmtree (fx->dir);
    free (fx->dir);
    free (fx);
}

static size_t s_count (const ak_expansion_t *exp, const char *op, const char *cls, const char *kind)
{
    size_t n = 0;
    for (size_t i = 0; i < exp->ntasks; i++) {
        const Ak__TaskRecord *t = exp->tasks[i];
        if (strcmp (t->op, op) == 0 && strcmp (t->device_class, cls) == 0 && strcmp (t->kind, kind) == 0)
            n++;
    }
    return n;
}

// ------------------------------------------------------------------- tests

static void test_counts_and_backend_filter (void **state)
{
    fx_t *fx = s_fixture ("[\"host\", \"h100\"]", "");
    ak_expansion_t *exp = NULL;
    ak_err_t err = { 0 };
    int rc = ak_expand (fx->m, "B000007", "abc", 1234, &exp, &err);
    if (rc)
        fail_msg ("%s", err.msg);
    /* opa/host: preflight + blocked 7 (BLOCK*UNROLL <= 32) + simple 1;
       opa/h100: preflight + tiled 2; opb/host: preflight + wide 3; opb/h100: preflight */
    assert_int_equal (s_count (exp, "opa", "host", "preflight"), 1);
    assert_int_equal (s_count (exp, "opa", "host", "tune"), 8);
    assert_int_equal (s_count (exp, "opa", "h100", "preflight"), 1);
    assert_int_equal (s_count (exp, "opa", "h100", "tune"), 2);
    assert_int_equal (s_count (exp, "opb", "host", "preflight"), 1);
    assert_int_equal (s_count (exp, "opb", "host", "tune"), 3);
    assert_int_equal (s_count (exp, "opb", "h100", "preflight"), 1);
    assert_int_equal (s_count (exp, "opb", "h100", "tune"), 0);
    assert_int_equal (exp->ntasks, 17);

    for (size_t i = 0; i < exp->ntasks; i++) {
        const Ak__TaskRecord *t = exp->tasks[i];
        char id[32];
        snprintf (id, sizeof id, "B000007.%04zu", i + 1);
        assert_string_equal (t->task_id, id);
        assert_string_equal (t->batch_id, "B000007");
        assert_string_equal (t->state, "queued");
        assert_int_equal (t->attempt, 1);
        assert_int_equal (t->queued_ms, 1234);
        assert_string_equal (t->backend, strcmp (t->device_class, "host") == 0 ? "host" : "cuda");
        assert_true (ak_digest_valid (t->spec_digest));
        assert_true (ak_digest_valid (t->reference_digest));
        assert_true (ak_digest_valid (t->baseline_digest));
        assert_non_null (t->policy);
        assert_int_equal (t->policy->max_attempts, 4);
        assert_int_equal (t->policy->lease_ms, 5000);
        if (strcmp (t->kind, "preflight") == 0) {
            assert_string_equal (t->candidate_name, "");
            assert_string_equal (t->candidate_digest, "");
            assert_int_equal (t->n_params, 0);
        }
        else {
            assert_true (ak_digest_valid (t->candidate_digest));
            /* backend filtering: a candidate only lands on its backend's classes */
            if (strcmp (t->candidate_name, "tiled") == 0)
                assert_string_equal (t->device_class, "h100");
            else
                assert_string_equal (t->device_class, "host");
        }
    }
    /* within a pair: preflight first, then configurations in walk order */
    assert_string_equal (exp->tasks[0]->kind, "preflight");
    assert_string_equal (exp->tasks[1]->candidate_name, "blocked");
    assert_int_equal (exp->tasks[1]->n_params, 2);
    assert_string_equal (exp->tasks[1]->params[0]->name, "BLOCK");
    assert_int_equal (exp->tasks[1]->params[0]->value, 4);
    assert_string_equal (exp->tasks[1]->params[1]->name, "UNROLL");
    assert_int_equal (exp->tasks[1]->params[1]->value, 1);
    for (size_t i = 1; i <= 7; i++)     /* no configuration breaks the constraint */
        assert_true (exp->tasks[i]->params[0]->value * exp->tasks[i]->params[1]->value <= 32);
    assert_string_equal (exp->tasks[8]->candidate_name, "simple");
    assert_int_equal (exp->tasks[8]->n_params, 0);
    assert_string_equal (exp->tasks[9]->kind, "preflight");
    assert_string_equal (exp->tasks[9]->device_class, "h100");

    /* workloads: opa all sizes with weight 1; opb as listed */
    assert_int_equal (exp->tasks[0]->n_workloads, 2);
    assert_string_equal (exp->tasks[0]->workloads[1]->name, "medium");
    assert_int_equal (exp->tasks[0]->workloads[1]->n_dims, 2);
    assert_int_equal (exp->tasks[0]->workloads[1]->dims[0], 64);
    assert_int_equal (exp->tasks[0]->workloads[1]->dims[1], 128);
    assert_string_equal (exp->tasks[0]->workloads[1]->dtype, "float32");
    const Ak__TaskRecord *b = exp->tasks[12];
    assert_string_equal (b->op, "opb");
    assert_int_equal (b->n_workloads, 2);
    assert_string_equal (b->workloads[1]->name, "big");
    assert_true (b->workloads[1]->weight == 3.0);

    /* the batch record */
    assert_string_equal (exp->batch->batch_id, "B000007");
    assert_string_equal (exp->batch->name, "nightly");
    assert_string_equal (exp->batch->state, "open");
    assert_string_equal (exp->batch->bundle_digest, "abc");
    assert_int_equal (exp->batch->ntasks, 17);
    assert_int_equal (exp->batch->n_targets, 2);
    assert_string_equal (exp->batch->targets[1], "h100");
    assert_true (exp->batch->policy->threshold == 0.05);

    /* blobs: each distinct text once, digests matching */
    for (size_t i = 0; i < exp->nblobs; i++) {
        char d[65];
        ak_sha256_hex (exp->blobs[i].data, exp->blobs[i].len, d);
        assert_string_equal (d, exp->blobs[i].digest);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal (exp->blobs[i].digest, exp->blobs[j].digest);
    }
    /* 2 specs, 1 reference (same text), 3 baselines (base.c differs per op,
       base.cu shared), 4 candidate sources */
    assert_int_equal (exp->nblobs, 10);
    ak_expansion_destroy (&exp);
    ak_expansion_destroy (&exp);
    s_fixture_free (fx);
}

static void test_selected_subset (void **state)
{
    fx_t *fx = s_fixture ("[\"host\"]", ", \"candidates\": [\"simple\"]");
    ak_expansion_t *exp = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_expand (fx->m, "B000001", "d", 1, &exp, &err), 0);
    assert_int_equal (s_count (exp, "opa", "host", "tune"), 1);
    assert_int_equal (s_count (exp, "opb", "host", "tune"), 3);
    assert_int_equal (exp->ntasks, 1 + 1 + 1 + 3);
    ak_expansion_destroy (&exp);
    s_fixture_free (fx);
}

static void test_errors (void **state)
{
    fx_t *fx = s_fixture ("[\"host\", \"h100\"]", "");
    ak_expansion_t *exp = NULL;
    ak_err_t err = { 0 };

    /* a selected candidate the spec does not have */
    char *saved = fx->m->ops[0].candidates[0];
    fx->m->ops[0].candidates[0] = "nosuch";
    assert_int_equal (ak_expand (fx->m, "B000002", "d", 1, &exp, &err), AK_EINVAL);
    assert_null (exp);
    assert_non_null (strstr (err.msg, "unknown candidate 'nosuch'"));
    fx->m->ops[0].candidates[0] = saved;

    /* a target whose backend has no baseline */
    char *cls = fx->m->targets[1];
    fx->m->targets[1] = "b200";
    char *backend = fx->m->ops[1].spec->baselines[1].backend;
    fx->m->ops[1].spec->baselines[1].backend = "none";
    assert_int_equal (ak_expand (fx->m, "B000002", "d", 1, &exp, &err), AK_EINVAL);
    assert_null (exp);
    assert_string_equal (err.msg, "ops[1] (opb): no baseline for backend 'cuda' (target 'b200')");
    fx->m->ops[1].spec->baselines[1].backend = backend;
    fx->m->targets[1] = cls;

    /* a constraint that cannot be evaluated */
    ak_candidate_t *c = &fx->m->ops[0].spec->candidates[0];
    char *constraint = c->constraints[0];
    c->constraints[0] = "BLOCK / (UNROLL - UNROLL)";
    assert_int_equal (ak_expand (fx->m, "B000002", "d", 1, &exp, &err), AK_EINVAL);
    assert_null (exp);
    assert_non_null (strstr (err.msg, "ops[0] (opa): candidate 'blocked'"));
    c->constraints[0] = constraint;
    s_fixture_free (fx);
}

static void test_too_many_tasks (void **state)
{
    fx_t *fx = s_fixture ("[\"host\"]", "");
    ak_candidate_t *c = &fx->m->ops[0].spec->candidates[0];
    /* 400 x 400 configurations, no constraint */
    int64_t *big = ak_calloc (400, sizeof *big);
    for (int i = 0; i < 400; i++)
        big[i] = i + 1;
    int64_t *v0 = c->params[0].values, *v1 = c->params[1].values;
    size_t n0 = c->params[0].nvalues, n1 = c->params[1].nvalues, nc = c->nconstraints;
    c->params[0].values = c->params[1].values = big;
    c->params[0].nvalues = c->params[1].nvalues = 400;
    c->nconstraints = 0;
    ak_expansion_t *exp = NULL;
    ak_err_t err = { 0 };
    /* exhaustive asked for: the default would sample the space (halving) */
    snprintf (fx->m->policy.search_strategy, sizeof fx->m->policy.search_strategy, "exhaustive");
    assert_int_equal (ak_expand (fx->m, "B000003", "d", 1, &exp, &err), AK_ETOOBIG);
    assert_null (exp);
    assert_non_null (strstr (err.msg, "more than 100000 tasks"));
    c->params[0].values = v0;
    c->params[1].values = v1;
    c->params[0].nvalues = n0;
    c->params[1].nvalues = n1;
    c->nconstraints = nc;
    free (big);
    s_fixture_free (fx);
}

static void test_persisted (void **state)
{
    fx_t *fx = s_fixture ("[\"host\", \"h100\"]", "");
    char *sdir = ak_test_tmpdir ("expand-store");
    ak_store_opts_t so = { .no_sync = true };
    ak_store_t *store = NULL;
    ak_txn_t *txn = NULL;
    ak_expansion_t *exp = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_open (sdir, &so, &store, &err), 0);
    assert_int_equal (ak_store_begin (store, true, &txn, &err), 0);
    assert_int_equal (ak_expand (fx->m, "B000001", "bundle-digest", 99, &exp, &err), 0);
    assert_int_equal (ak_expand_store (exp, txn, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    assert_int_equal (ak_store_begin (store, false, &txn, &err), 0);
    uint64_t n = 0;
    assert_int_equal (ak_store_count (txn, AK_DB_TASKS, &n, &err), 0);
    assert_int_equal (n, 17);
    assert_int_equal (ak_store_count (txn, AK_DB_BLOBS, &n, &err), 0);
    assert_int_equal (n, exp->nblobs);
    Ak__BatchRecord *b = NULL;
    assert_int_equal (ak_store_get_batch (txn, "B000001", &b, &err), 0);
    assert_int_equal (b->ntasks, 17);
    assert_string_equal (b->state, "open");
    ak__batch_record__free_unpacked (b, NULL);
    for (size_t i = 0; i < exp->ntasks; i++) {
        Ak__TaskRecord *t = NULL;
        assert_int_equal (ak_store_get_task (txn, exp->tasks[i]->task_id, &t, &err), 0);
        assert_string_equal (t->kind, exp->tasks[i]->kind);
        assert_int_equal (t->n_params, exp->tasks[i]->n_params);
        char *text = NULL;
        size_t len = 0;
        assert_int_equal (ak_store_get_blob (txn, t->spec_digest, &text, &len, &err), 0);
        /* the spec travels without sources */
        assert_non_null (strstr (text, "\"name\""));
        assert_null (strstr (text, "/* reference */"));
        free (text);
        if (*t->candidate_digest) {
            assert_int_equal (ak_store_get_blob (txn, t->candidate_digest, &text, &len, &err), 0);
            free (text);
        }
        ak__task_record__free_unpacked (t, NULL);
    }
    ak_store_abort (&txn);
    ak_expansion_destroy (&exp);
    ak_store_destroy (&store);
    ak_test_rmtree (sdir);
    free (sdir);
    s_fixture_free (fx);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_counts_and_backend_filter),
        cmocka_unit_test (test_selected_subset),
        cmocka_unit_test (test_errors),
        cmocka_unit_test (test_too_many_tasks),
        cmocka_unit_test (test_persisted),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
