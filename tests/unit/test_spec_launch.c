/*  tests/unit/test_spec_launch.c: the launch rules of CUDA baselines and
    candidates in a spec (common/spec.c, common/launch.c): loading,
    evaluation, and each rejected field named by its JSON path, on the spec
    fixture of tests/unit/unit.c. */
#include "support.h"
#include "unit.h"
#include "space.h"
#include "spec_cuda.h"
#include "spec.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================= launch rules */

/*  Adds a cuda baseline (baselines[1]) and a cuda candidate (candidates[1])
    with launch rules to the fixture. */
static void s_add_cuda (ak_spec_fx_t *fx)
{
    json_t *bl = json_pack ("{s:s, s:s, s:{s:[s], s:[s]}}", "backend", "cuda", "source", "cuda/base.cu",
                            "launch", "grid", "(rows+127)/128", "block", "128");
    json_t *cand = json_pack ("{s:s, s:s, s:s, s:{s:[i, i, i], s:[i, i]}, s:[s],"
                              " s:{s:[s, s], s:[s], s:s}}",
                              "name", "rows", "backend", "cuda", "source", "cuda/rows.cu",
                              "params", "THREADS", 64, 128, 256, "VEC", 1, 4,
                              "constraints", "THREADS % 32 == 0",
                              "launch", "grid", "(rows+THREADS/32-1)/(THREADS/32)", "cols/cols",
                              "block", "THREADS", "shared", "THREADS/32*VEC*b");
    assert_non_null (bl);
    assert_non_null (cand);
    assert_int_equal (json_array_append_new (json_object_get (fx->json, "baselines"), bl), 0);
    assert_int_equal (json_array_append_new (json_object_get (fx->json, "candidates"), cand), 0);
}

static void test_launch_rules_load (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_non_null (bl->launch);
    assert_int_equal (bl->launch->ngrid, 1);
    assert_int_equal (bl->launch->nblock, 1);
    assert_string_equal (bl->launch->shared, "0");          /* not given: 0 */
    assert_null (ak_spec_baseline (spec, "host")->launch);
    const ak_candidate_t *cand = ak_spec_candidate (spec, "rows");
    assert_non_null (cand->launch);
    assert_int_equal (cand->launch->ngrid, 2);
    assert_string_equal (cand->launch->grid[1], "cols/cols");
    assert_string_equal (cand->launch->block[0], "THREADS");
    assert_string_equal (cand->launch->shared, "THREADS/32*VEC*b");
    assert_null (ak_spec_candidate (spec, "blocked")->launch);

    /* Both JSON forms carry the rules and read back to the same text. */
    for (int with = 0; with < 2; with++) {
        char *text = ak_spec_to_text (spec, with);
        ak_spec_t *again = NULL;
        if (ak_spec_parse_text (text, strlen (text), "again", &again, &err))
            fail_msg ("%s", err.msg);
        char *text2 = ak_spec_to_text (again, with);
        assert_string_equal (text, text2);
        assert_non_null (strstr (text, "\"launch\":{\"grid\":[\"(rows+127)/128\"],\"block\":[\"128\"],"
                                       "\"shared\":\"0\"}"));
        free (text);
        free (text2);
        ak_spec_destroy (&again);
    }
    ak_spec_destroy (&spec);
}

static void test_launch_eval (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    const ak_candidate_t *cand = ak_spec_candidate (spec, "rows");
    const char *names[] = { "THREADS", "VEC" };
    int64_t values[] = { 128, 4 };
    int64_t dims[AK_MAX_DIMS] = { 33, 100 };
    ak_launch_cfg_t lc;
    memset (&lc, 0xAB, sizeof lc);
    assert_int_equal (ak_launch_eval (spec, cand->launch, dims, AK_DT_FLOAT32, names, values, 2, &lc, &err), 0);
    assert_int_equal (lc.grid[0], 9);           /* 33 rows, 4 per block */
    assert_int_equal (lc.grid[1], 1);
    assert_int_equal (lc.grid[2], 1);           /* not given: 1 */
    assert_int_equal (lc.block[0], 128);
    assert_int_equal (lc.block[1], 1);
    assert_int_equal (lc.block[2], 1);
    assert_int_equal (lc.shared_bytes, 4 * 4 * 4);
    assert_int_equal (ak_launch_eval (spec, cand->launch, dims, AK_DT_FLOAT16, names, values, 2, &lc, &err), 0);
    assert_int_equal (lc.shared_bytes, 4 * 4 * 2);   /* b follows the dtype */
    const ak_baseline_t *bl = ak_spec_baseline (spec, "cuda");
    assert_int_equal (ak_launch_eval (spec, bl->launch, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), 0);
    assert_int_equal (lc.grid[0], 1);
    assert_int_equal (lc.block[0], 128);
    assert_int_equal (lc.shared_bytes, 0);

    /* Out of range values and failing expressions name the field. */
    values[0] = 0;                                      /* block 0, and /0 in the grid */
    assert_int_equal (ak_launch_eval (spec, cand->launch, dims, AK_DT_FLOAT32, names, values, 2, &lc, &err),
                      AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.grid[0]"));
    assert_non_null (strstr (err.msg, "division by zero"));
    ak_launch_rule_t rule = { .grid = { "rows - 40" }, .ngrid = 1, .block = { "32" }, .nblock = 1,
                              .shared = "0" };
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.grid[0] 'rows - 40' = -7: must be 1..2147483647"));
    rule.grid[0] = "1";
    rule.block[0] = "rows * 100000000";
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.block[0]"));
    rule.block[0] = "32";
    rule.shared = "0 - 1";
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "launch.shared '0 - 1' = -1: must be 0..2147483647"));
    rule.shared = "THREADS";                            /* a baseline has no parameters */
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "unknown name"));
    /* Bad arguments are refused, never dereferenced. */
    assert_int_equal (ak_launch_eval (spec, NULL, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 3, &lc, &err), AK_EINVAL);
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_COUNT, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    rule.ngrid = 0;
    assert_int_equal (ak_launch_eval (spec, &rule, dims, AK_DT_FLOAT32, NULL, NULL, 0, &lc, &err), AK_EINVAL);
    ak_spec_destroy (&spec);
}

static void test_reject_launch_on_host (void **state)
{
    ak_spec_fx_t *fx = *state;
    ak_spec_fx_reject (fx, "candidates[0].launch", json_pack ("{s:[s], s:[s]}", "grid", "1", "block", "1"),
                       "candidates[0].launch: only cuda kernels have a launch rule", NULL);
    ak_spec_fx_reject (fx, "baselines[0].launch", json_pack ("{s:[s], s:[s]}", "grid", "1", "block", "1"),
                       "baselines[0].launch: only cuda kernels have a launch rule", NULL);
}

static void test_reject_launch_missing (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_fx_reject (fx, "candidates[1].launch", NULL, "candidates[1].launch: missing", NULL);
    ak_spec_fx_reject (fx, "baselines[1].launch", NULL, "baselines[1].launch: missing", NULL);
}

static void test_reject_launch_not_object (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_fx_reject (fx, "candidates[1].launch", json_string ("128"), "candidates[1].launch: must be an object",
                       NULL);
}

static void test_reject_launch_unknown_field (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_fx_reject (fx, "candidates[1].launch.threads", json_integer (128),
                       "candidates[1].launch.threads: unknown field", NULL);
}

static void test_reject_launch_grid (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", NULL, "candidates[1].launch.grid: missing", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", json_array (), "candidates[1].launch.grid: must list 1 to 3",
                       NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", json_pack ("[s, s, s, s]", "1", "1", "1", "1"),
                       "candidates[1].launch.grid: must list 1 to 3", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", json_string ("rows"),
                       "candidates[1].launch.grid: must be an array", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", json_pack ("[i]", 4),
                       "candidates[1].launch.grid[0]: must be a string", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", json_pack ("[s]", "rows +"),
                       "candidates[1].launch.grid[0]: invalid expression", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", json_pack ("[s]", "cdiv(rows, THREADS)"),
                       "candidates[1].launch.grid[0]: invalid expression", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.grid", json_pack ("[s]", "rows/TILE"),
                       "candidates[1].launch.grid[0]: invalid expression", "TILE");
}

static void test_reject_launch_block (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_fx_reject (fx, "candidates[1].launch.block", NULL, "candidates[1].launch.block: missing", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.block", json_array (),
                       "candidates[1].launch.block: must list 1 to 3", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.block", json_pack ("[s, n]", "32", NULL),
                       "candidates[1].launch.block[1]: must be a string", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.block", json_pack ("[s]", "WARPS*32"),
                       "candidates[1].launch.block[0]: invalid expression", "WARPS");
    /* a baseline's rule sees no parameters */
    ak_spec_fx_reject (fx, "baselines[1].launch.block", json_pack ("[s]", "THREADS"),
                       "baselines[1].launch.block[0]: invalid expression", "THREADS");
}

static void test_reject_launch_shared (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    ak_spec_fx_reject (fx, "candidates[1].launch.shared", json_integer (1024),
                       "candidates[1].launch.shared: must be a string", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.shared", json_string ("THREADS*"),
                       "candidates[1].launch.shared: invalid expression", NULL);
    ak_spec_fx_reject (fx, "candidates[1].launch.shared", json_string ("TILE*4"),
                       "candidates[1].launch.shared: invalid expression", "TILE");
}

static void test_reject_launch_param_named_like_key (void **state)
{
    ak_spec_fx_t *fx = *state;
    s_add_cuda (fx);
    /* keys "rows", "COLS": the parameter COLS would shadow a key in the rule */
    char *text = json_dumps (fx->json, JSON_COMPACT);
    char *from = text, *out = ak_strdup ("");
    for (char *at; (at = strstr (from, "\"cols")) != NULL; from = at + 5) {
        char *joined = ak_sprintf ("%s%.*s\"COLS", out, (int) (at - from), from);
        free (out);
        out = joined;
    }
    char *all = ak_sprintf ("%s%s", out, from);
    free (out);
    free (text);
    json_decref (fx->json);
    fx->json = json_loads (all, 0, NULL);
    free (all);
    assert_non_null (fx->json);
    ak_test_json_set (fx->json, "candidates[1].launch.grid", json_pack ("[s]", "rows"));
    ak_test_json_set (fx->json, "flops", json_string ("5*rows*COLS"));
    ak_test_json_set (fx->json, "bytes", json_string ("2*rows*COLS*b"));
    ak_test_json_set (fx->json, "inputs[0].count", json_string ("rows*COLS"));
    ak_test_json_set (fx->json, "outputs[0].count", json_string ("rows*COLS"));
    ak_spec_t *spec = NULL;
    ak_err_t err;
    if (ak_spec_fx_load (fx, &spec, &err))
        fail_msg ("%s", err.msg);
    ak_spec_destroy (&spec);
    ak_spec_fx_reject (fx, "candidates[1].params.COLS", json_pack ("[i]", 4),
                       "candidates[1].launch: parameter COLS has the name of a shape key", NULL);
}

int main (void)
{
#define T(fn) cmocka_unit_test_setup_teardown (fn, ak_spec_fx_setup, ak_spec_fx_teardown)
    const struct CMUnitTest tests[] = {
        T (test_launch_rules_load),
        T (test_launch_eval),
        T (test_reject_launch_on_host),
        T (test_reject_launch_missing),
        T (test_reject_launch_not_object),
        T (test_reject_launch_unknown_field),
        T (test_reject_launch_grid),
        T (test_reject_launch_block),
        T (test_reject_launch_shared),
        T (test_reject_launch_param_named_like_key),
    };
#undef T
    return cmocka_run_group_tests (tests, NULL, NULL);
}
