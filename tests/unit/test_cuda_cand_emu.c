/*  tests/unit/test_cuda_cand_emu.c: tensor-core, TMA and cluster
    candidates run on the CPU and judged against the operator's float64
    host oracle, with no GPU.
    The gates on a GPU (test_gpu_catalog) judge the same; this finds an
    indexing or fragment-layout mistake in a kernel before device time is
    spent on it.

    Each entry of s_runs names an operator, a candidate, its parameters
    and an element type: ref.c is compiled with gcc (ak_reference renamed
    ak_host_reference), the candidate's source (the spec's text) with g++
    through tests/unit/cuda_emu/main.cpp in its AK_EMU_CAND mode (emu.h:
    each thread a coroutine, CUDA's own cuda_fp16.h / cuda_bf16.h and
    kernels/ak_kernel_cuda.h for the types, mma.sync m16n8k16 and
    ldmatrix[.trans] emulated from the PTX ISA's fragment layouts, cp.async
    as a copy, the kernel's dynamic shared memory a buffer a block;
    kernels/ak_blocks_cuda.h's mma.sync blocks switch to these under
    AK_CUDA_EMU).  fa2 (flash_attention), correct on the H200, checks the
    emulation of ldmatrix and cp.async; mma_decode's D 64 and 128 paths,
    correct there too, that of mma.sync.  Then for every size and edge
    size of the spec with at most the run's max_elems elements in all
    (GPU-only sizes too), the
    generator's inputs in that type (seed 7) go to both, the launch is the
    candidate's for those dims and parameters, and every output element
    must be within the spec's tolerance for the type (atol + rtol*|oracle|;
    an unwritten element is NaN and fails); where the buffers hold at most
    2^18 elements the kernel is launched twice and the second launch's
    outputs are the ones judged (state left for the next launch).
    test_cand_planted: the same kernel given half the dynamic shared
    memory its launch asks for leaves its output unwritten, and the
    comparison must say so; test_cand_planted_wgmma: faults planted in
    matmul's wgmma that the emulation must catch.  Without CUDA's headers
    (cuda_fp16.h) the tests skip, saying so. */
#include "support.h"
#include "unit.h"
#include "space.h"
#include "spec.h"
#include "util.h"
#include "worker/backend_cuda.h"
#include "worker/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_SEED 7

#define S_MAXP 10

typedef struct {
    const char *op, *cand;
    ak_dtype_t  dt;
    size_t      max_elems;              /* sizes with at most this many elements in all */
    int         n;                      /* parameters */
    const char *names[S_MAXP];
    int64_t     values[S_MAXP];
} s_run_t;

/*  split_kv_attention's mma_decode: D 64, 128 (a warp owns a row's whole
    output) and 256 (warps in pairs, half the output each), every mask,
    NW 2 (bfloat16) and 8 (float16).  flash_attention's fa2 (cp.async,
    ldmatrix and ldmatrix.trans, mma.sync through ak_blocks_cuda.h): 16
    rows a warp (Q fragments in registers) and 32 (two row tiles a K and V
    fragment), causal and not, D 64 and 128.  stream_decode (cp.async
    rings, ldmatrix, ldmatrix.trans, the rows as the MMA's N): 16 rows a
    tile (two halves on the same V^T fragments) and 8; DMAX 256 (D 256 on
    tensor cores) with 3 and 2 stages, and DMAX 128 (D 256 on its plain
    path).  tile_decode (a block's warps on shared K and V tiles, 16 rows
    a warp): 64 rows a block over tiles of 32 keys with the slices merged
    (WAVES 4; pi05_small has pi0.5's head size and grouping), and 128
    rows over 64 keys, also split, with each row's output columns in four
    blocks (DS 4: V's columns, the partials and the merge at a column
    offset; DS 2 is the same code; BM only sets the warps a block: 32
    runs the same code with two).  tma_decode (K and V tiles by TMA into a
    block-wide ring, a producer warp and NC consumer warps on mbarriers,
    emulated by the prelude's ak_mbar_* and ak_tma_into_3d): BN 32 over two stages
    with KW 2, the slices merged (WAVES 1), and its D 256 path; NC 8 over
    BN 64 with KW 1 in one slice (WAVES 0, outside the spec's space: the
    launch rule's floor of one slice), so that the ring of two stages
    wraps (medium: four tiles), D 256 then on the plain path.
    matmul's skinny (B panels by TMA into a ring a warp,
    128-byte swizzled, fragments paired by prmt, the split over K merged by the
    last block; emu.h's TMA copies, built with the candidate's two tensor
    maps): two column groups a block in bfloat16 (the TMA path where N
    and K are multiples of 8, the direct register path at the edge sizes;
    float16 differs only in the MMA's type, which mma_decode's run
    covers) and the float32 FMA path; M above 16 at the larger sizes runs
    several row tiles.  The Hopper kit's kernels (emu.h's wgmma, named
    barriers and TMA stores; their own CTest entry,
    test_cuda_cand_emu_wgmma): matmul's wgmma with two consumer
    warpgroups over 132 blocks (the default; and BN 128 with SPLIT 4:
    every tile split), and with one over 7 persistent blocks walking the
    tiles by columns with SPLIT 2 (the stage ring and the epilogue's two
    buffers run on from tile to tile; at xlarge 7 of the 8 tiles whole,
    the last split in two, its halves taken by blocks 0 and 1 after their
    whole tiles), the TMA path and TMA-store epilogue where K and
    N are multiples of 8, the producer's own fill and the direct stores
    at the edge sizes (the partials, the counters and the ordered sum of
    split K; the second launch of every run, emu's, finds a counter not
    set back), and with clusters of two (BM 64 BN 256, 4 blocks: each
    block's half of B multicast into both, stages released by both
    blocks' consumers; and BM 64 BN 128 with SPLIT 2 over 4 clusters of
    8 blocks: the pairs of the last partial wave split, each block's
    partials apart from its peer's); softmax's row_cluster (a row over a cluster of 2
    or 4 blocks, its reductions through the peers' shared memory:
    float32 and bfloat16); fused_mlp's wgmma over 4 and
    3 blocks (GRID: outside the spec's space, so the grid barrier between
    the phases has blocks to wait for); flash_attention's wgmma in
    ping-pong with two consumers, and three without; wg_decode in
    ping-pong, and one consumer with the slices merged (WAVES 4). */
/* matmul wgmma's parameters, spec order */
#define S_MM_WGMMA { "BM", "BN", "BK", "STAGES", "CONSUMERS", "CLUSTER", "RASTER", "GROUP", "GRID", "SPLIT" }
static const s_run_t s_runs[] = {
    { "split_kv_attention", "mma_decode", AK_DT_BFLOAT16, 1 << 22, 2, { "NW", "WAVES" }, { 2, 1 } },
    { "split_kv_attention", "mma_decode", AK_DT_FLOAT16, 1 << 20, 2, { "NW", "WAVES" }, { 8, 4 } },
    { "split_kv_attention", "stream_decode", AK_DT_BFLOAT16, 1 << 18, 5, { "NW", "ROWS", "STG", "DMAX", "WAVES" },
      { 2, 16, 3, 256, 1 } },
    { "split_kv_attention", "stream_decode", AK_DT_BFLOAT16, 1 << 18, 5, { "NW", "ROWS", "STG", "DMAX", "WAVES" },
      { 4, 8, 2, 256, 2 } },
    { "split_kv_attention", "stream_decode", AK_DT_FLOAT16, 1 << 19, 5, { "NW", "ROWS", "STG", "DMAX", "WAVES" },
      { 4, 8, 2, 128, 4 } },
    { "split_kv_attention", "tile_decode", AK_DT_BFLOAT16, 1 << 19, 4, { "BM", "BN", "WAVES", "DS" }, { 64, 32, 4, 1 } },
    { "split_kv_attention", "tile_decode", AK_DT_FLOAT16, 1 << 19, 4, { "BM", "BN", "WAVES", "DS" }, { 128, 64, 4, 4 } },
    { "flash_attention", "fa2", AK_DT_BFLOAT16, 1 << 19, 3, { "BLOCK_M", "BLOCK_N", "WARP_ROWS" }, { 64, 32, 16 } },
    { "flash_attention", "fa2", AK_DT_FLOAT16, 1 << 19, 3, { "BLOCK_M", "BLOCK_N", "WARP_ROWS" }, { 128, 64, 32 } },
    { "split_kv_attention", "tma_decode", AK_DT_BFLOAT16, 1 << 19, 7,
      { "NC", "BN", "STAGES", "KW", "DMAX", "WAVES", "FLAT" }, { 4, 32, 2, 2, 256, 1, 0 } },
    { "split_kv_attention", "tma_decode", AK_DT_FLOAT16, 1 << 19, 7,
      { "NC", "BN", "STAGES", "KW", "DMAX", "WAVES", "FLAT" }, { 8, 64, 2, 1, 128, 0, 0 } },
    { "matmul", "skinny", AK_DT_BFLOAT16, 1 << 18, 4, { "WARPS", "CW", "STG", "WAVES" }, { 4, 2, 2, 4 } },
    { "matmul", "skinny", AK_DT_FLOAT32, 1 << 18, 4, { "WARPS", "CW", "STG", "WAVES" }, { 4, 1, 4, 2 } },
    { "matmul", "wgmma", AK_DT_BFLOAT16, 1 << 18, 10, S_MM_WGMMA,
      { 128, 256, 64, 4, 2, 1, 0, 8, 132, 1 } },
    { "matmul", "wgmma", AK_DT_BFLOAT16, 1 << 18, 10, S_MM_WGMMA,
      { 128, 128, 64, 4, 2, 1, 0, 8, 132, 4 } },
    { "matmul", "wgmma", AK_DT_FLOAT16, 1 << 18, 10, S_MM_WGMMA,
      { 64, 128, 128, 3, 1, 1, 1, 2, 7, 2 } },
    { "matmul", "wgmma", AK_DT_BFLOAT16, 1 << 18, 10, S_MM_WGMMA,
      { 64, 256, 64, 4, 1, 2, 0, 8, 4, 1 } },
    { "matmul", "wgmma", AK_DT_BFLOAT16, 1 << 18, 10, S_MM_WGMMA,
      { 64, 128, 64, 3, 1, 2, 0, 8, 8, 2 } },
    { "softmax", "row_cluster", AK_DT_FLOAT32, 1 << 16, 5, { "WPR", "VECB", "LOADS", "HINT", "CL" },
      { 8, 16, 2, 1, 2 } },
    { "softmax", "row_cluster", AK_DT_BFLOAT16, 1 << 16, 5, { "WPR", "VECB", "LOADS", "HINT", "CL" },
      { 16, 4, 4, 3, 4 } },
    { "fused_mlp", "wgmma", AK_DT_BFLOAT16, 1 << 18, 6, { "BM", "BN", "BK", "STAGES", "CONSUMERS", "GRID" },
      { 128, 128, 64, 4, 2, 4 } },
    { "fused_mlp", "wgmma", AK_DT_FLOAT16, 1 << 18, 6, { "BM", "BN", "BK", "STAGES", "CONSUMERS", "GRID" },
      { 64, 64, 64, 3, 1, 3 } },
    { "flash_attention", "wgmma", AK_DT_BFLOAT16, 1 << 19, 4, { "BN", "STAGES", "CONSUMERS", "PINGPONG" },
      { 128, 2, 2, 1 } },
    { "flash_attention", "wgmma", AK_DT_FLOAT16, 1 << 19, 4, { "BN", "STAGES", "CONSUMERS", "PINGPONG" },
      { 64, 3, 3, 0 } },
    { "split_kv_attention", "wg_decode", AK_DT_BFLOAT16, 1 << 19, 4, { "STAGES", "CONSUMERS", "PINGPONG", "WAVES" },
      { 2, 2, 1, 1 } },
    { "split_kv_attention", "wg_decode", AK_DT_FLOAT16, 1 << 19, 4, { "STAGES", "CONSUMERS", "PINGPONG", "WAVES" },
      { 3, 1, 0, 4 } },
};

/*  "NAME=VALUE ..." of run r, into buf. */
static const char *s_params (const s_run_t *r, char *buf, size_t size, const char *pre)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n && at < size; i++)
        at += (size_t) snprintf (buf + at, size - at, "%s%s%s=%lld", i ? " " : "", pre, r->names[i],
                                 (long long) r->values[i]);
    return buf;
}

static const char *s_cuda_include (void)
{
    const char *inc = ak_cuda_include_dir ();
    if (!inc)
        ak_test_skip ("no CUDA headers (cuda_fp16.h, cuda_bf16.h under $CUDA_HOME/include or /usr/local/cuda)");
    return inc;
}

static const ak_candidate_t *s_cand (const ak_spec_t *spec, const char *name)
{
    for (size_t c = 0; c < spec->ncandidates; c++)
        if (strcmp (spec->candidates[c].name, name) == 0 && strcmp (spec->candidates[c].backend, "cuda") == 0)
            return &spec->candidates[c];
    fail_msg ("%s: no cuda candidate %s", spec->name, name);
    return NULL;
}

/*  Builds the emulation of run r in dir (the candidate's source, or text
    where not NULL; kernels/ak_hopper_cuda.h, or the file hopper where not
    NULL); its path (caller frees). */
static char *s_build_text (const ak_spec_t *spec, const ak_candidate_t *cand, const s_run_t *r, const char *dir,
                           const char *inc, const char *text, const char *hopper)
{
    const char *dt = r->dt == AK_DT_BFLOAT16 ? "BFLOAT16" : r->dt == AK_DT_FLOAT16 ? "FLOAT16" : "FLOAT32";
    char defs[256];
    char *hop = hopper ? ak_sprintf ("-DAK_EMU_HOPPER='\"%s\"'", hopper) : ak_strdup ("");
    char *flags = ak_sprintf ("-Wno-unused-function -Wno-psabi -I'%s' -DAK_DTYPE_%s -DAK_EMU_NMAPS=%d %s %s", inc, dt,
                              cand->launch ? cand->launch->ntmaps : 0, s_params (r, defs, sizeof defs, "-D"), hop);
    free (hop);
    char *exe = ak_unit_emu_build (spec, dir, "AK_EMU_CAND", "cand.cu", text ? text : cand->source.text, flags);
    free (flags);
    return exe;
}

static char *s_build (const ak_spec_t *spec, const ak_candidate_t *cand, const s_run_t *r, const char *dir,
                      const char *inc)
{
    return s_build_text (spec, cand, r, dir, inc, NULL, NULL);
}

static void s_launch (const ak_spec_t *spec, const ak_candidate_t *cand, const s_run_t *r, const int64_t *dims,
                      ak_launch_cfg_t *cfg)
{
    ak_err_t err = { 0 };
    if (ak_launch_eval (spec, cand->launch, dims, r->dt, r->names, r->values, r->n, cfg, &err) != 0)
        fail_msg ("%s %s: launch: %s", spec->name, cand->name, err.msg);
}

/*  Whether name is wanted by the pair of lists in $ONLY (unset: all) and
    $EXCEPT. */
static bool s_listed (const char *only_env, const char *except_env, const char *name)
{
    const char *only = getenv (only_env), *except = getenv (except_env);
    return (!only || !*only || ak_test_listed (only, name)) && !(except && *except && ak_test_listed (except, name));
}

/*  Whether run r is wanted: its operator among $AK_CATALOG_OPS and not
    among $AK_CATALOG_OPS_EXCEPT, its candidate likewise with
    $AK_EMU_CANDS and $AK_EMU_CANDS_EXCEPT (tests/CMakeLists.txt runs
    groups of runs as separate CTest entries that way). */
static bool s_selected (const s_run_t *r)
{
    return s_listed ("AK_CATALOG_OPS", "AK_CATALOG_OPS_EXCEPT", r->op)
           && s_listed ("AK_EMU_CANDS", "AK_EMU_CANDS_EXCEPT", r->cand);
}

static void test_cand_catalog (void **state)
{
    (void) state;
    const char *inc = s_cuda_include ();
    int selected = 0;
    for (size_t k = 0; k < sizeof s_runs / sizeof s_runs[0]; k++) {
        const s_run_t *r = &s_runs[k];
        if (!s_selected (r))
            continue;
        selected++;
        ak_spec_t *spec = ak_cat_spec (r->op);
        const ak_candidate_t *cand = s_cand (spec, r->cand);
        const ak_tol_t *tol = ak_spec_tol (spec, r->dt);
        assert_non_null (tol);
        char *dir = ak_test_tmpdir ("candemu");
        char *exe = s_build (spec, cand, r, dir, inc);
        int runs = 0;
        for (size_t z = 0; z < spec->nsizes + spec->nedge; z++) {
            const ak_size_t *size = z < spec->nsizes ? &spec->sizes[z] : &spec->edge_sizes[z - spec->nsizes];
            ak_err_t err = { 0 };
            size_t nin[AK_MAX_BUFS] = { 0 }, nout[AK_MAX_BUFS] = { 0 }, all = 0;
            assert_int_equal (ak_buf_counts (spec, size->dims, r->dt, nin, nout, &err), 0);
            for (int j = 0; j < AK_MAX_BUFS; j++)
                all += nin[j] + nout[j];
            if (all > r->max_elems)
                continue;
            ak_launch_cfg_t cfg;
            s_launch (spec, cand, r, size->dims, &cfg);
            ak_emu_cmp_t c;
            ak_unit_emu_run (spec, dir, exe, size->dims, r->dt, S_SEED, &cfg, 1, tol, &c);
            char ps[256];
            s_params (r, ps, sizeof ps, "");
            if (c.bad || !c.checked)
                fail_msg ("%s %s %s %s at %s: %zu of %zu elements beyond the tolerance, worst %s[%zu] off by %.3g "
                          "(allowed %.3g)", r->op, r->cand, ps, ak_dtype_name (r->dt), size->name, c.bad, c.checked,
                          c.worst_out >= 0 ? spec->outputs[c.worst_out].name : "?", c.worst_at, c.worst, c.tol);
            print_message ("%s %s %s %s %s: %zu elements, worst error %.3g (allowed %.3g there), %.2f s\n", r->op,
                           r->cand, ps, ak_dtype_name (r->dt), size->name, c.checked, c.worst, c.tol, c.seconds);
            runs++;
        }
        if (runs == 0)
            fail_msg ("%s: no size small enough to emulate", r->op);
        if (!getenv ("AK_TEST_KEEP"))         /* the emulation program and its last job, to rerun */
            ak_test_rmtree (dir);
        else
            print_message ("kept %s\n", dir);
        free (dir);
        free (exe);
        ak_spec_destroy (&spec);
    }
    if (selected == 0)
        fail_msg ("no run left by AK_CATALOG_OPS=%s AK_CATALOG_OPS_EXCEPT=%s AK_EMU_CANDS=%s AK_EMU_CANDS_EXCEPT=%s",
                  getenv ("AK_CATALOG_OPS"), getenv ("AK_CATALOG_OPS_EXCEPT"), getenv ("AK_EMU_CANDS"),
                  getenv ("AK_EMU_CANDS_EXCEPT"));
}

static void test_cand_planted (void **state)
{
    (void) state;
    const char *inc = s_cuda_include ();
    const s_run_t *r = &s_runs[0];
    ak_spec_t *spec = ak_cat_spec (r->op);
    const ak_candidate_t *cand = s_cand (spec, r->cand);
    char *dir = ak_test_tmpdir ("candemu-planted");
    char *exe = s_build (spec, cand, r, dir, inc);
    const int64_t dims[7] = { 1, 10, 8, 1, 128, 256, 1 };     /* B Q HQ HK L D mask: pi0.5's D 256 */
    ak_launch_cfg_t cfg;
    s_launch (spec, cand, r, dims, &cfg);
    ak_emu_cmp_t c;
    ak_unit_emu_run (spec, dir, exe, dims, r->dt, S_SEED, &cfg, 1, ak_spec_tol (spec, r->dt), &c);
    assert_int_equal (c.bad, 0);
    cfg.shared_bytes /= 2;
    ak_unit_emu_run (spec, dir, exe, dims, r->dt, S_SEED, &cfg, 1, ak_spec_tol (spec, r->dt), &c);
    print_message ("mma_decode with half its shared memory: %zu of %zu elements beyond the tolerance\n", c.bad,
                   c.checked);
    assert_int_equal (c.bad, c.checked);                /* nothing written: every element NaN */
    ak_test_rmtree (dir);
    free (dir);
    free (exe);
    ak_spec_destroy (&spec);
}

/*  The emulation's own checks of a Hopper kernel, on matmul's wgmma
    (the first bfloat16 run of s_runs, which test_cand_catalog passes as
    written) at small (32^3, the TMA path and the TMA-store epilogue):
    with its stages aligned to 16 bytes instead of 1024 (what
    128-byte swizzle needs) the run stops at the first TMA load and says
    why; with B's descriptor saying 2048 bytes from one 8-row group of k
    to the next instead of 1024, or with the epilogue's chunks swizzled by
    row % 4 instead of row % 8, elements come out wrong; with the second
    consumer warpgroup's epilogue barrier counting 256 threads instead of
    its 128, or a stage expecting 128 bytes more than its TMA copies
    bring, the run stops as a deadlock. */
static void test_cand_planted_wgmma (void **state)
{
    (void) state;
    const char *inc = s_cuda_include ();
    const s_run_t *r = NULL;
    for (size_t k = 0; k < sizeof s_runs / sizeof s_runs[0] && !r; k++)
        if (strcmp (s_runs[k].op, "matmul") == 0 && strcmp (s_runs[k].cand, "wgmma") == 0
            && s_runs[k].dt == AK_DT_BFLOAT16)
            r = &s_runs[k];
    assert_non_null (r);
    ak_spec_t *spec = ak_cat_spec (r->op);
    const ak_candidate_t *cand = s_cand (spec, r->cand);
    static const struct {
        const char *from, *to;                  /* in the kernel's source (NULL: as written) */
        const char *file;                       /* or in kernels/ak_hopper_cuda.h (the prelude) */
        const char *fails;                      /* what the emulation says, or NULL: compared */
        bool        wrong;                      /* elements beyond the tolerance expected */
    } plants[] = {
        { "base_s = (raw_s + 1023u) & ~1023u", "base_s = (raw_s + 15u) & ~15u", NULL, "not 1024-byte aligned", false },
        { "ak_wgmma_desc (sb + kk * 16 * 128, BK * 128, 1024)", "ak_wgmma_desc (sb + kk * 16 * 128, BK * 128, 2048)",
          NULL, NULL, true },
        { "((ch ^ (r & 7)) << 4)", "((ch ^ (r & 3)) << 4)", "ak_hopper_cuda.h", NULL, true },
        { "ak_bar_sync_n<3, 128> ();", "ak_bar_sync_n<3, 256> ();", "ak_hopper_cuda.h", "deadlock", false },
        { "ak_bar_expect (fb, STAGE_BYTES);", "ak_bar_expect (fb, STAGE_BYTES + 128);", NULL, "deadlock", false },
    };
    const int64_t dims[3] = { 32, 32, 32 };
    char *prelude_path = ak_test_src ("kernels/ak_hopper_cuda.h");
    char *prelude = ak_test_read (prelude_path);
    for (size_t i = 0; i < sizeof plants / sizeof plants[0]; i++) {
        char *dir = ak_test_tmpdir ("candemu-wgmma");
        char *text = NULL, *hopper = NULL;
        if (plants[i].from) {
            const char *in = plants[i].file ? prelude : cand->source.text;
            const char *at = strstr (in, plants[i].from);
            assert_non_null (at);
            assert_null (strstr (at + 1, plants[i].from));      /* the one place */
            text = ak_sprintf ("%.*s%s%s", (int) (at - in), in, plants[i].to, at + strlen (plants[i].from));
            if (plants[i].file) {                 /* the changed prelude, in place of kernels/'s */
                hopper = ak_test_write (dir, plants[i].file, text);
                free (text);
                text = NULL;
            }
        }
        char *exe = s_build_text (spec, cand, r, dir, inc, text, hopper);
        ak_launch_cfg_t cfg;
        s_launch (spec, cand, r, dims, &cfg);
        ak_emu_cmp_t c;
        char *msg = NULL;
        const int rc = ak_unit_emu_try (spec, dir, exe, dims, r->dt, S_SEED, &cfg, 1, ak_spec_tol (spec, r->dt), &c,
                                        &msg);
        print_message ("matmul wgmma, %s -> %s: exit %d, %zu of %zu elements beyond the tolerance%s%s", plants[i].from
                       ? plants[i].from : "as written", plants[i].to ? plants[i].to : "", rc, c.bad, c.checked,
                       msg ? ": " : "\n", msg ? msg : "");
        if (plants[i].fails) {
            assert_int_not_equal (rc, 0);
            assert_non_null (msg);
            assert_non_null (strstr (msg, plants[i].fails));
        } else {
            assert_int_equal (rc, 0);
            assert_true (c.checked == 32 * 32);
            if (plants[i].wrong)
                assert_true (c.bad > 0);
            else
                assert_int_equal (c.bad, 0);
        }
        free (msg);
        free (text);
        free (hopper);
        free (exe);
        ak_test_rmtree (dir);
        free (dir);
    }
    free (prelude);
    free (prelude_path);
    ak_spec_destroy (&spec);
}

/*  test_cuda_cand_emu [--only TEST]: all tests, or only TEST (a cmocka
    test name or glob; tests/CMakeLists.txt's test_cuda_cand_emu_matmul). */
int main (int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_cand_catalog),
        cmocka_unit_test (test_cand_planted),
        cmocka_unit_test (test_cand_planted_wgmma),
    };
    if (argc == 3 && strcmp (argv[1], "--only") == 0)
        cmocka_set_test_filter (argv[2]);
    else if (argc != 1) {
        fprintf (stderr, "usage: %s [--only TEST]\n", argv[0]);
        return 2;
    }
    return cmocka_run_group_tests (tests, NULL, NULL);
}
