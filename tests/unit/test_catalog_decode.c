/*  tests/unit/test_catalog_decode.c: the decode-step operators of the
    catalog (kernels/rotate_qk, kernels/split_kv_attention) on the host.

    - each spec loads with its keys, dtypes, sizes (the host ones within the
      host oracle's reach, the GPU-only LLM and pi0.5 shapes last), edge
      sizes (an empty cache, Q beyond the cache, uneven head groups, odd
      widths), byte counts of every buffer once, device reference,
      baselines and candidate spaces;
    - each float64 oracle against values worked out by hand: both rotary
      layouts, positions floored and clamped, the odd last element, theta;
      attention weights of ln 3 apart, grouped-query head mapping (even and
      uneven), causal bottom-right alignment, ragged lengths including an
      empty cache (output 0);
    - split_kv_attention's flash_decode launch rule, at every
      configuration, size, edge size and dtype: the grid (row tiles, the
      splits sized to about WAVES x 132 blocks and capped by the key
      tiles, B*HK), the block, and the dynamic shared memory equal to the
      stage geometry the kernel computes (restated here), which with the
      kernel's static shared memory fits sm_90's 227 KiB and holds the KP
      key partitions' sums; mma_decode's the same way (row tiles of 16,
      splits capped so each warp has a step of 16 keys, shared NW+1
      partials of 16 rows); tma_decode's (row tiles of 8, the floor rule,
      its ring or its partials, whichever is larger; and on the sizes of
      its tensor-core path at least one stage and room for the partials:
      no launch of the spec falls to its plain path for want of memory);
    - each host baseline, and every configuration of each host candidate,
      through the five gates (worker/gates.c) on every host size and edge
      size;
    - a baseline with the operator subtly wrong (pair index of the other
      layout, token index as position, head groups interleaved, the causal
      diagonal one off, ragged lengths ignored) is wrong_answer: the gates
      above can fail. */
#include "space.h"
#include "support.h"
#include "unit.h"
#include "worker/backend.h"
#include "worker/gates.h"
#include "spec.h"
#include "util.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static ak_cat_host_t S;

static int s_group_setup (void **state)
{
    (void) state;
    return ak_cat_host_open (&S, "catdec");
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_cat_host_close (&S);
    return 0;
}

/* ------------------------------------------------------------- the specs */

typedef struct {
    const char *name;
    const char *keys[7];
    const char *gpu_size;           /* a GPU-only size */
    const char *cuda_cand;
    size_t      cuda_configs;
    size_t      host_configs;       /* of the host candidates */
} s_op_t;

static const s_op_t s_ops[] = {
    { "rotate_qk",          { "B", "S", "HQ", "HK", "D", "layout", "theta" }, "llama3_b4_4k", "token_major", 40, 2 },
    { "split_kv_attention", { "B", "Q", "HQ", "HK", "L", "D", "mask" },       "llm7b_b8_32k", "split_kv",    88, 4 },
};
#define S_NOPS (sizeof s_ops / sizeof s_ops[0])

static void test_specs_load (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++) {
        const s_op_t *op = &s_ops[o];
        ak_spec_t *spec = ak_cat_spec (op->name);
        assert_string_equal (spec->name, op->name);
        assert_int_equal (spec->nkeys, 7);
        for (int k = 0; k < 7; k++)
            assert_string_equal (spec->keys[k], op->keys[k]);
        assert_int_equal (spec->ndtypes, 3);
        assert_int_equal (spec->dtypes[0], AK_DT_FLOAT32);
        assert_true (ak_spec_tol (spec, AK_DT_BFLOAT16)->atol > ak_spec_tol (spec, AK_DT_FLOAT16)->atol);
        assert_true (ak_spec_tol (spec, AK_DT_FLOAT16)->atol > ak_spec_tol (spec, AK_DT_FLOAT32)->atol);

        /* host sizes first, each buffer within the host oracle's reach */
        bool gpu_seen = false;
        size_t host = 0;
        for (size_t z = 0; z < spec->nsizes + spec->nedge; z++) {
            const ak_size_t *sz = z < spec->nsizes ? &spec->sizes[z] : &spec->edge_sizes[z - spec->nsizes];
            if (!ak_size_for_backend (sz, "host")) {
                gpu_seen = true;
                continue;
            }
            if (z < spec->nsizes) {
                assert_false (gpu_seen);
                host++;
            }
            for (int j = 0; j < spec->ninputs; j++)
                assert_true ((uint64_t) ak_cat_count (spec, spec->inputs[j].count, sz->dims) <= AK_GATE_ORACLE_MAX_ELEMS);
        }
        assert_true (host >= 6 && spec->nsizes - host >= 5);
        const ak_size_t *big = ak_spec_size (spec, op->gpu_size);
        assert_non_null (big);
        assert_false (ak_size_for_backend (big, "host"));
        assert_true (spec->nedge >= 5);

        assert_non_null (spec->reference.text);
        assert_non_null (spec->reference_cuda.text);
        assert_non_null (ak_spec_baseline (spec, "host"));
        assert_non_null (ak_spec_baseline (spec, "cuda")->launch);
        const ak_candidate_t *c = ak_spec_candidate (spec, op->cuda_cand);
        assert_non_null (c);
        assert_non_null (c->launch);
        ak_err_t err = { 0 };
        size_t count = 0;
        assert_int_equal (ak_space_walk (c, NULL, NULL, &count, &err), 0);
        assert_int_equal (count, op->cuda_configs);

        /* bytes: every element of every buffer once, at every size */
        for (size_t z = 0; z < spec->nsizes; z++) {
            int64_t bytes = 0, want = 0;
            assert_int_equal (ak_spec_eval (spec, spec->bytes, spec->sizes[z].dims, AK_DT_BFLOAT16, &bytes, &err), 0);
            for (int j = 0; j < spec->ninputs; j++)
                want += 2 * ak_cat_count (spec, spec->inputs[j].count, spec->sizes[z].dims);
            for (int k = 0; k < spec->noutputs; k++)
                want += 2 * ak_cat_count (spec, spec->outputs[k].count, spec->sizes[z].dims);
            assert_true (bytes == want);
        }
        ak_spec_destroy (&spec);
    }
}

/* --------------------------------------------------- oracles, by hand */

static void test_oracle_rotate_qk (void **state)
{
    (void) state;
    /* interleaved, theta 100, D 4: pair (0,1) at p, pair (2,3) at p/10.
       Token 0 at 2.7 -> p = 2; token 1 at -5 -> p = 0 (identity). */
    const int64_t d1[] = { 1, 2, 1, 1, 4, 2, 100 };
    const double q1[] = { 1, 2, 3, 4, 1, 1, 1, 1 }, k1[] = { 0.5, -1, 0, 2, 2, 2, 2, 2 };
    const double p1[] = { 2.7, -5 };
    const double *in1[] = { q1, k1, p1 };
    const double want1[] = { -2.234741690198506, 0.0770037537313969, 2.1455224103434802, 4.5162743037501505,
                             1, 1, 1, 1,
                             0.7012240085521105, 0.8707955499599833, -0.39733866159012243, 1.9601331556824833,
                             2, 2, 2, 2 };
    ak_cat_oracle (&S, "rotate_qk", d1, in1, want1, 1e-12);

    /* half split, theta 10000, D 4, position 1 (rotary_embedding's case),
       two q heads and one k head of one token rotate alike. */
    const int64_t d2[] = { 1, 1, 2, 1, 4, 1, 10000 };
    const double q2[] = { 1, 2, 3, 4, 1, 2, 3, 4 }, k2[] = { 1, 2, 3, 4 }, p2[] = { 1 };
    const double *in2[] = { q2, k2, p2 };
    const double r[] = { -1.9841106485555495, 1.959900667496664, 2.4623779024123156, 4.019799668334994 };
    const double want2[] = { r[0], r[1], r[2], r[3], r[0], r[1], r[2], r[3], r[0], r[1], r[2], r[3] };
    ak_cat_oracle (&S, "rotate_qk", d2, in2, want2, 1e-12);

    /* odd D 5, half split: pairs (0,2), (1,3), element 4 passes through;
       a position beyond 2^20 - 1 is clamped to it (angles ~1e6 rad: a
       looser bound for the libm's last bits). */
    const int64_t d3[] = { 1, 1, 1, 1, 5, 1, 10000 };
    const double q3[] = { 1, 2, 3, 4, 5 }, k3[] = { 0, 0, 0, 0, -1 }, p3[] = { 1e7 };
    const double *in3[] = { q3, k3, p3 };
    const double want3[] = { 2.6349057587051803, 2.3880508504348823, 1.7485055455280318, 3.7811655789897958, 5,
                             0, 0, 0, 0, -1 };
    ak_cat_oracle (&S, "rotate_qk", d3, in3, want3, 1e-9);
}

static void test_oracle_split_kv (void **state)
{
    (void) state;
    /* D 1 (scale 1), two query heads over one KV head, keys {0, ln 3},
       values {1, 5}: head 0 (q = 1) weighs them 1/4, 3/4 -> 4; head 1
       (q = 0) evenly -> 3. */
    const int64_t d1[] = { 1, 1, 2, 1, 2, 1, 1 };
    const double q1[] = { 1, 0 }, k1[] = { 0, 1.0986122886681098 }, v1[] = { 1, 5 };
    const double *in1[] = { q1, k1, v1 };
    ak_cat_oracle (&S, "split_kv_attention", d1, in1, (const double[]) { 4, 3 }, 1e-12);

    /* causal, Q = L = 2 (a prefix call on an empty cache: the new tokens
       attend to each other): token 0 sees key 0 only -> 1; token 1 both. */
    const int64_t d2[] = { 1, 2, 1, 1, 2, 1, 2 };
    const double q2[] = { 1, 1 };
    const double *in2[] = { q2, k1, v1 };
    ak_cat_oracle (&S, "split_kv_attention", d2, in2, (const double[]) { 1, 4 }, 1e-12);

    /* ragged, L 1: len_b = 1 - (b * 2654435761 mod 2^32) % 2 = 1, 0, 1, 0:
       sequences 1 and 3 have an empty cache -> 0. */
    const int64_t d3[] = { 4, 1, 1, 1, 1, 1, 3 };
    const double q3[] = { 1, 1, 1, 1 }, k3[] = { 0, 0, 0, 0 }, v3[] = { 7, 8, 9, 10 };
    const double *in3[] = { q3, k3, v3 };
    ak_cat_oracle (&S, "split_kv_attention", d3, in3, (const double[]) { 7, 0, 9, 0 }, 1e-12);

    /* uneven groups: 3 query heads over 2 KV heads read h * 2 / 3 = 0, 0, 1 */
    const int64_t d4[] = { 1, 1, 3, 2, 1, 1, 1 };
    const double q4[] = { 1, 1, 1 }, k4[] = { 0, 0 }, v4[] = { 7, 9 };
    const double *in4[] = { q4, k4, v4 };
    ak_cat_oracle (&S, "split_kv_attention", d4, in4, (const double[]) { 7, 7, 9 }, 1e-12);

    /* Q beyond the cache: Q 3, L 2, causal: token t sees 2 - 3 + 1 + t keys
       = 0, 1, 2 -> 0, 1, 4 */
    const int64_t d5[] = { 1, 3, 1, 1, 2, 1, 2 };
    const double q5[] = { 1, 1, 1 };
    const double *in5[] = { q5, k1, v1 };
    ak_cat_oracle (&S, "split_kv_attention", d5, in5, (const double[]) { 0, 1, 4 }, 1e-12);
}

/* ------------------------------------------ flash_decode's launch rule */

/* The stage bytes cuda/flash_decode.cu computes and checks: two stages of
   TKr K and V rows, a row an odd number of 16-byte chunks, TKr = TK halved
   while TKr rows pass 36864 bytes (not below 32). */
static int64_t s_fd_stage_bytes (int64_t D, int64_t b, int64_t TK)
{
    const int64_t nch = (D * b + 15) / 16, sdb = 16 * (nch | 1);
    int64_t tkr = TK;
    while (tkr > 32 && tkr * sdb > 36864)
        tkr /= 2;
    return 4 * tkr * sdb;
}

/* What a decode candidate's launch rule must give at one size and dtype. */
typedef void (*s_launch_check_t) (const ak_candidate_t *cand, const ak_size_t *sz, ak_dtype_t dt,
                                  const ak_launch_cfg_t *lc, const int64_t *v);

typedef struct {
    const ak_spec_t *spec;
    s_launch_check_t check;
    size_t checked;
} s_fd_t;

/* The launch rule at configuration v, for every size, edge size and dtype
   (an ak_space_walk callback). */
static int s_launch_each (const ak_candidate_t *cand, const int64_t *v, void *arg)
{
    s_fd_t *f = arg;
    const ak_spec_t *spec = f->spec;
    const char *names[AK_MAX_PARAMS];
    for (size_t i = 0; i < cand->nparams; i++)
        names[i] = cand->params[i].name;
    for (size_t z = 0; z < spec->nsizes + spec->nedge; z++) {
        const ak_size_t *sz = z < spec->nsizes ? &spec->sizes[z] : &spec->edge_sizes[z - spec->nsizes];
        for (int t = 0; t < spec->ndtypes; t++) {
            ak_launch_cfg_t lc;
            ak_err_t err = { 0 };
            if (ak_launch_eval (spec, cand->launch, sz->dims, spec->dtypes[t], names, v, (int) cand->nparams, &lc,
                                &err))
                fail_msg ("%s at %s: %s", cand->name, sz->name, err.msg);
            f->check (cand, sz, spec->dtypes[t], &lc, v);
            f->checked++;
        }
    }
    return 0;
}

/* Candidate `name` of spec, whose parameters are params[0..nparams) in
   that order: every one of its `want` configurations through check. */
static const ak_candidate_t *s_walk_launches (const ak_spec_t *spec, const char *name, const char *const *params,
                                              size_t nparams, size_t want, s_launch_check_t check)
{
    const ak_candidate_t *c = ak_spec_candidate (spec, name);
    assert_non_null (c);
    assert_int_equal (c->nparams, nparams);
    for (size_t i = 0; i < nparams; i++)
        assert_string_equal (c->params[i].name, params[i]);
    s_fd_t f = { .spec = spec, .check = check };
    size_t count = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_space_walk (c, s_launch_each, &f, &count, &err), 0);
    assert_int_equal (count, want);
    assert_int_equal (f.checked, count * (spec->nsizes + spec->nedge) * (size_t) spec->ndtypes);
    print_message ("%s: %zu configurations, %zu launches checked\n", name, count, f.checked);
    return c;
}

/* grid [row tiles of rows, splits, B*HK] with the splits about WAVES x 132
   blocks, at most `cap`, one more where L is 0; block [threads] */
static void s_check_grid (const ak_candidate_t *cand, const ak_size_t *sz, const ak_launch_cfg_t *lc, int64_t rows,
                          int64_t waves, int64_t cap, int64_t threads)
{
    const int64_t *d = sz->dims;
    const int64_t B = d[0], Q = d[1], HQ = d[2], HK = d[3], L = d[4];
    const int64_t rt = (((HQ + HK - 1) / HK) * Q + rows - 1) / rows, g = B * HK * rt;
    const int64_t w = (132 * waves + g - 1) / g, splits = (w < cap ? w : cap) + (L < 1);
    if ((int64_t) lc->grid[0] != rt || (int64_t) lc->grid[1] != splits || (int64_t) lc->grid[2] != B * HK
        || (int64_t) lc->block[0] != threads || lc->block[1] != 1 || lc->block[2] != 1)
        fail_msg ("%s (rows %" PRId64 ", waves %" PRId64 ") at %s: grid %ux%ux%u block %u, want %" PRId64 "x%" PRId64
                  "x%" PRId64 " block %" PRId64, cand->name, rows, waves, sz->name, lc->grid[0], lc->grid[1],
                  lc->grid[2], lc->block[0], rt, splits, B * HK, threads);
}

static void s_fd_check (const ak_candidate_t *cand, const ak_size_t *sz, ak_dtype_t dt, const ak_launch_cfg_t *lc,
                        const int64_t *v)
{
    const int64_t TK = v[0], NT = v[1], ROWS = v[2], PR = v[3], WAVES = v[4], KP = v[5];
    const int64_t L = sz->dims[4], D = sz->dims[5];
    const int64_t b = dt == AK_DT_FLOAT32 ? 4 : 2;
    /* the kernel's static shared memory: sq, ss, sm/sl/sc, sn, s_last */
    const int64_t stat = ROWS * 256 * 4 + ROWS * TK * 4 + 3 * ROWS * 4 + ROWS * 8 + 4;
    assert_int_equal (ROWS % PR, 0);
    assert_true (KP == 1 || (PR == 1 && KP * ROWS * 16 <= NT));
    s_check_grid (cand, sz, lc, ROWS, WAVES, (L + TK - 1) / TK, NT);
    const int64_t stage = s_fd_stage_bytes (D, b, TK);
    /* the KP partitions' sums pass through the stages after the last tile */
    const int64_t red = (KP - 1) * ROWS * ((D * b + 15) / 16) * (16 / b) * 4;
    if (red > stage)
        fail_msg ("flash_decode TK=%" PRId64 " ROWS=%" PRId64 " KP=%" PRId64 " at %s/%s: %" PRId64
                  " bytes of partition sums do not fit the %" PRId64 " bytes of stages",
                  TK, ROWS, KP, sz->name, ak_dtype_name (dt), red, stage);
    if ((int64_t) lc->shared_bytes != stage || stage + stat > 227 * 1024)
        fail_msg ("flash_decode TK=%" PRId64 " ROWS=%" PRId64 " at %s/%s: shared %u, the kernel "
                  "needs %" PRId64 " (+ %" PRId64 " static, at most 227 KiB)",
                  TK, ROWS, sz->name, ak_dtype_name (dt), lc->shared_bytes, stage, stat);
}

static void test_flash_decode_launch (void **state)
{
    (void) state;
    ak_spec_t *spec = ak_cat_spec ("split_kv_attention");
    const char *order[] = { "TK", "NT", "ROWS", "PR", "WAVES", "KP" };
    const ak_candidate_t *c = s_walk_launches (spec, "flash_decode", order, 6, 240, s_fd_check);
    ak_err_t err = { 0 };

    /* two worked cases: one sequence over a 4K cache (8 KV heads, 4 rows a
       group) fills 64 slices of one 64-key tile; pi0.5's 400 rows in 25
       tiles of 16 get 22 slices of its 28 tiles of 32 keys, D 256 in
       bf16 rows of 528 bytes */
    const char *names[] = { "TK", "NT", "ROWS", "PR", "WAVES" };
    ak_launch_cfg_t lc;
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "llm7b_b1_4k")->dims, AK_DT_BFLOAT16,
                                      names, (const int64_t[]) { 64, 128, 4, 1, 4 }, 5, &lc, &err), 0);
    assert_true (lc.grid[0] == 1 && lc.grid[1] == 64 && lc.grid[2] == 8 && lc.shared_bytes == 4 * 64 * 272);
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "pi05_denoise")->dims, AK_DT_BFLOAT16,
                                      names, (const int64_t[]) { 32, 256, 16, 2, 4 }, 5, &lc, &err), 0);
    assert_true (lc.grid[0] == 25 && lc.grid[1] == 22 && lc.grid[2] == 1 && lc.shared_bytes == 4 * 32 * 528);
    /* float32 at D 256: TK 128 holds 32 keys a stage (rows of 1040 bytes) */
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "pi05_small")->dims, AK_DT_FLOAT32,
                                      names, (const int64_t[]) { 128, 128, 16, 4, 1 }, 5, &lc, &err), 0);
    assert_int_equal (lc.shared_bytes, 4 * 32 * 1040);
    ak_spec_destroy (&spec);
}

/* ------------------------------------------ mma_decode's launch rule */

static void s_md_check (const ak_candidate_t *cand, const ak_size_t *sz, ak_dtype_t dt, const ak_launch_cfg_t *lc,
                        const int64_t *v)
{
    const int64_t NW = v[0], WAVES = v[1], L = sz->dims[4], D = sz->dims[5];
    s_check_grid (cand, sz, lc, 16, WAVES, (L + 16 * NW - 1) / (16 * NW), 32 * NW);
    /* NW+1 partials of 16 rows of WD floats (what the kernel checks), and
       the tile record and s_last (under 256 bytes) */
    const int64_t part = (NW + 1) * 16 * ((D + 7) / 8 * 8 + 8) * 4;
    if ((int64_t) lc->shared_bytes != part || part + 256 > 227 * 1024)
        fail_msg ("mma_decode NW=%" PRId64 " at %s/%s: shared %u, the kernel needs %" PRId64
                  " (+ static, at most 227 KiB)", NW, sz->name, ak_dtype_name (dt), lc->shared_bytes, part);
}

static void test_mma_decode_launch (void **state)
{
    (void) state;
    ak_spec_t *spec = ak_cat_spec ("split_kv_attention");
    const char *names[] = { "NW", "WAVES" };
    const ak_candidate_t *c = s_walk_launches (spec, "mma_decode", names, 2, 12, s_md_check);
    ak_err_t err = { 0 };

    /* worked cases: one sequence over a 4K cache (8 KV heads, 4 rows of a
       16-row tile) gets 33 slices (132*2/8 rounded up; 64 steps of 16
       keys for 4 warps cap it at 64); pi0.5's 400 rows a KV head make 25
       tiles and 6 slices (132*1/25 rounded up); D 256 rows of 264 floats */
    ak_launch_cfg_t lc;
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "llm7b_b1_4k")->dims, AK_DT_BFLOAT16,
                                      names, (const int64_t[]) { 4, 2 }, 2, &lc, &err), 0);
    assert_true (lc.grid[0] == 1 && lc.grid[1] == 33 && lc.grid[2] == 8 && lc.block[0] == 128);
    assert_int_equal (lc.shared_bytes, 5 * 16 * 136 * 4);
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "pi05_denoise")->dims, AK_DT_BFLOAT16,
                                      names, (const int64_t[]) { 8, 1 }, 2, &lc, &err), 0);
    assert_true (lc.grid[0] == 25 && lc.grid[1] == 6 && lc.grid[2] == 1 && lc.block[0] == 256);
    assert_int_equal (lc.shared_bytes, 9 * 16 * 264 * 4);
    ak_spec_destroy (&spec);
}

/* ------------------------------------------ tma_decode's launch rule */

/*  Grid [row tiles of 8, splits, B*HK] with the splits
    floor(WAVES x 132 / the tiles' blocks), at least one and at most the
    key tiles (one more where L is 0); shared the ring (at most 200 KiB)
    or the warps' partials, whichever is larger, + 1024 for the ring's
    alignment (FLAT is 0 only: the flat layout was removed).  Block
    [32*(NC+1)].  On the sizes the tensor-core path takes (16-bit types, D
    64, 128 or at DMAX 256 256) the kernel's own test must hold, or the
    launch would run its plain path: at least one stage, and room for the
    partials. */
static void s_td_check (const ak_candidate_t *cand, const ak_size_t *sz, ak_dtype_t dt, const ak_launch_cfg_t *lc,
                        const int64_t *v)
{
    const int64_t NC = v[0], BN = v[1], STAGES = v[2], DMAX = v[4], WAVES = v[5];
    assert_int_equal (v[6], 0);                    /* FLAT */
    const int64_t *d = sz->dims;
    const int64_t B = d[0], Q = d[1], HQ = d[2], HK = d[3], L = d[4], D = d[5];
    const int64_t b = dt == AK_DT_FLOAT32 ? 4 : 2;
    const int64_t rt = (((HQ + HK - 1) / HK) * Q + 7) / 8, g = B * HK * rt;
    int64_t splits = 132 * WAVES / g;
    if (splits < 1)
        splits = 1;
    if (splits > (L + BN - 1) / BN)
        splits = (L + BN - 1) / BN;
    splits += L < 1;
    const int64_t want_g[3] = { rt, splits, B * HK };
    if ((int64_t) lc->grid[0] != want_g[0] || (int64_t) lc->grid[1] != want_g[1] || (int64_t) lc->grid[2] != want_g[2]
        || (int64_t) lc->block[0] != 32 * (NC + 1) || lc->block[1] != 1 || lc->block[2] != 1)
        fail_msg ("%s at %s: grid %ux%ux%u block %u, want %" PRId64 "x%" PRId64 "x%" PRId64
                  " block %" PRId64, cand->name, sz->name, lc->grid[0], lc->grid[1], lc->grid[2], lc->block[0],
                  want_g[0], want_g[1], want_g[2], 32 * (NC + 1));
    const int64_t cap = 204800;
    const int64_t ring = STAGES * 2 * BN * D * b < cap ? STAGES * 2 * BN * D * b : cap;
    const int64_t part = NC * 8 * (D + 8) * 4;
    const int64_t want = (ring > part ? ring : part) + 1024;
    /* the kernel's static shared memory: the barriers, the merge's arrays, the tile record (ptxas: 1008 bytes at NC 8) */
    if ((int64_t) lc->shared_bytes != want || want + 2048 > 227 * 1024)
        fail_msg ("tma_decode NC=%" PRId64 " BN=%" PRId64 " STAGES=%" PRId64 " at %s/%s: shared %u, want %" PRId64
                  " (+ static, at most 227 KiB)", NC, BN, STAGES, sz->name, ak_dtype_name (dt), lc->shared_bytes, want);
    const bool tc = b == 2 && (D == 64 || D == 128 || (D == 256 && DMAX == 256));
    const int64_t room = (int64_t) lc->shared_bytes - 1024, nst = room / (4 * BN * D);
    if (tc && (nst < 1 || room < part))
        fail_msg ("tma_decode NC=%" PRId64 " BN=%" PRId64 " STAGES=%" PRId64 " at %s/%s: %" PRId64 " bytes hold %" PRId64
                  " stages of %" PRId64 " and need %" PRId64 " for the partials: the plain path would run",
                  NC, BN, STAGES, sz->name, ak_dtype_name (dt), room, nst, 4 * BN * D, part);
}

static void test_tma_decode_launch (void **state)
{
    (void) state;
    ak_spec_t *spec = ak_cat_spec ("split_kv_attention");
    const char *names[] = { "NC", "BN", "STAGES", "KW", "DMAX", "WAVES", "FLAT" };
    const ak_candidate_t *c = s_walk_launches (spec, "tma_decode", names, 7, 60, s_td_check);
    ak_err_t err = { 0 };

    /* worked cases: one sequence over a 4K cache (8 KV heads, 4 rows of an
       8-row tile): 16 slices (132/8), four stages of 64 keys, K and V at
       D 128 in bfloat16 (32 KiB a stage); pi0.5's 400 rows a KV head make
       50 tiles and 2 slices; at D 256 eight stages of 128 keys would be
       1 MiB, so the ring is capped at 200 KiB (three stages) */
    ak_launch_cfg_t lc;
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "llm7b_b1_4k")->dims, AK_DT_BFLOAT16,
                                      names, (const int64_t[]) { 4, 64, 4, 2, 128, 1, 0 }, 7, &lc, &err), 0);
    assert_true (lc.grid[0] == 1 && lc.grid[1] == 16 && lc.grid[2] == 8 && lc.block[0] == 160);
    assert_int_equal (lc.shared_bytes, 4 * 32768 + 1024);
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "pi05_denoise")->dims, AK_DT_BFLOAT16,
                                      names, (const int64_t[]) { 8, 128, 4, 1, 256, 1, 0 }, 7, &lc, &err), 0);
    assert_true (lc.grid[0] == 50 && lc.grid[1] == 2 && lc.grid[2] == 1 && lc.block[0] == 288);
    assert_int_equal (lc.shared_bytes, 204800 + 1024);
    /* sixteen sequences of 32 heads (one row each) over a 4K cache are
       512 row tiles, more than 132: one slice each (the floor rule's
       floor of one), the ring of four stages larger than the partials */
    assert_int_equal (ak_launch_eval (spec, c->launch, ak_spec_size (spec, "llama2_b16_4k")->dims, AK_DT_BFLOAT16,
                                      names, (const int64_t[]) { 4, 64, 4, 2, 128, 1, 0 }, 7, &lc, &err), 0);
    assert_true (lc.grid[0] == 1 && lc.grid[1] == 1 && lc.grid[2] == 512 && lc.block[0] == 160);
    assert_int_equal (lc.shared_bytes, 4 * 32768 + 1024);
    ak_spec_destroy (&spec);
}

/* ----------------------------------------------------------- the gates */

static void test_host_baselines_pass_gates (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++) {
        ak_spec_t *spec = ak_cat_spec (s_ops[o].name);
        ak_kernel_t *ref = ak_cat_build (&S, spec->reference.text, true, NULL, NULL, 0);
        ak_gate_report_t rep;
        if (ak_cat_gate (&S, spec, ref, ak_spec_baseline (spec, "host")->source.text, NULL, NULL, 0, &rep)
            != AK_GATE_OK)
            fail_msg ("%s baseline: %s: %s", spec->name, ak_gate_status_name (rep.status), rep.reason);
        assert_int_equal (rep.nstages, 5);
        uint32_t host_sizes = 0;
        for (size_t z = 0; z < spec->nsizes; z++)
            host_sizes += ak_size_for_backend (&spec->sizes[z], "host");
        for (int i = 0; i < 5; i++)
            assert_true (rep.stages[i].passed && !rep.stages[i].skipped);
        assert_int_equal (rep.stages[1].configs, host_sizes);
        assert_int_equal (rep.stages[4].configs, spec->nedge);
        print_message ("%s: host baseline passes the gates (%u sizes, %zu edge sizes)\n", spec->name,
                       host_sizes, spec->nedge);
        S.be->unload (S.dev, &ref);
        ak_spec_destroy (&spec);
    }
}

/* every configuration of the host candidates (rotate_qk's token_table: a
   token's cosines and sines once for its heads; split_kv_attention's
   grouped: the group's rows a key tile at a time) at every host size and
   edge size */
static void test_host_candidates_pass_gates (void **state)
{
    (void) state;
    for (size_t o = 0; o < S_NOPS; o++)
        if (s_ops[o].host_configs > 0)
            assert_int_equal (ak_cat_host_gates (&S, s_ops[o].name), s_ops[o].host_configs);
}

static void test_wrong_kernels_fail (void **state)
{
    (void) state;
    ak_cat_expect_wrong (&S, "rotate_qk", "ia = layout == 2 ? 2 * i : i, ib = layout == 2 ?",
                         "ia = layout == 1 ? 2 * i : i, ib = layout == 1 ?");
    ak_cat_expect_wrong (&S, "rotate_qk", "(int64_t) floorf (fminf (fmaxf (pos[t], 0.0f), 1048575.0f))", "t % S");
    ak_cat_expect_wrong (&S, "split_kv_attention", "h * HK / HQ", "h % HK");
    ak_cat_expect_wrong (&S, "split_kv_attention", "len - Q + 1 + t", "len - Q + t");
    ak_cat_expect_wrong (&S, "split_kv_attention", "mask == 3\n", "mask == 4\n");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_specs_load),
        cmocka_unit_test (test_oracle_rotate_qk),
        cmocka_unit_test (test_oracle_split_kv),
        cmocka_unit_test (test_flash_decode_launch),
        cmocka_unit_test (test_mma_decode_launch),
        cmocka_unit_test (test_tma_decode_launch),
        cmocka_unit_test (test_host_baselines_pass_gates),
        cmocka_unit_test (test_host_candidates_pass_gates),
        cmocka_unit_test (test_wrong_kernels_fail),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
