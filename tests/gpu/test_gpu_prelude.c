/*  tests/gpu/test_gpu_prelude.c: the row kernels' conversions and
    exponential in kernels/ak_kernel_cuda.h on a real GPU, through
    kernels/testing/cuda/pairs.cu built for float16 and for bfloat16:
    - ak_unpack gives ak_to_acc's bits for every 16-bit pattern in either
      half of a word;
    - ak_pack gives ak_from_acc's bits (or NaN where it gives NaN) for
      every float32 pattern in either half;
    - ak_exp_fold (x, m log2 e) taken back by ak_exp_fold_err is exp(x - m)
      within 4e-6 for |m| up to 2^24, and ak_exp_foldable refuses beyond;
    - the same kernel with a planted bug (PLANT=1: ak_pack given its
      halves swapped) counts mismatches: the check can fail.

    Without a GPU every test skips after "SKIP: no GPU: <reason>" (exit 77,
    "Not Run"); the paired conversions need compute capability 8.0, and a
    device below it skips with "SKIP: needs sm_80 ...". */
#include "support.h"
#include "gpu.h"
#include "worker/backend.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ak_gpu_fixture_t S;          /* the first CUDA device (gpu.h) */
static bool s_sm80;

static int s_group_setup (void **state)
{
    (void) state;
    int rc = ak_gpu_fixture_open (&S, "gpuprelude");
    if (rc || S.skip)
        return rc;
    s_sm80 = ak_gpu_fixture_needs (&S, S.devs[0]->cc_major >= 8, "sm_80 for the paired conversions");
    return 0;
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_gpu_fixture_close (&S);
    return 0;
}

/*  Builds kernels/testing/cuda/pairs.cu for dt (with PLANT=plant), runs it
    once and returns its six counters (see the kernel). */
static void s_run_pairs (ak_dtype_t dt, int plant, uint64_t c[6])
{
    const char *names[] = { "PLANT" };
    const int64_t values[] = { plant };
    ak_kernel_t *k = ak_gpu_load_testing (&S, "pairs", NULL, dt, names, values, 1);
    ak_err_t err = { 0 };
    void *buf = NULL;
    assert_int_equal (S.be->alloc (S.dev, 6 * sizeof (uint64_t), &buf, &err), 0);
    assert_int_equal (S.be->fill (S.dev, buf, 0, 6 * sizeof (uint64_t), &err), 0);
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.out[0] = buf;
    l.nout = 1;
    l.dtype = dt;
    l.grid[0] = 4096;
    l.grid[1] = l.grid[2] = 1;
    l.block[0] = 256;
    l.block[1] = l.block[2] = 1;
    if (S.be->launch (S.dev, k, &l, &err) != 0)
        fail_msg ("pairs.cu (%s): %s", ak_dtype_name (dt), err.msg);
    assert_int_equal (S.be->download (S.dev, c, buf, 6 * sizeof (uint64_t), &err), 0);
    S.be->release (S.dev, &buf);
    S.be->unload (S.dev, &k);
}

static void s_check (ak_dtype_t dt)
{
    if (S.skip || !s_sm80)
        skip ();
    uint64_t c[6];
    s_run_pairs (dt, 0, c);
    print_message ("%s: %" PRIu64 " threads; unpack mismatches %" PRIu64 ", pack mismatches %" PRIu64
                   " (an input 0x%08" PRIx64 "), fold beyond tolerance %" PRIu64 "\n",
                   ak_dtype_name (dt), c[5], c[0], c[1], c[4], c[2]);
    assert_int_equal (c[5], 4096 * 256);        /* every thread ran to the end */
    assert_int_equal (c[0], 0);
    assert_int_equal (c[1], 0);
    assert_int_equal (c[2], 0);
    assert_int_equal (c[3], 0);
}

static void test_pairs_float16 (void **state)
{
    (void) state;
    s_check (AK_DT_FLOAT16);
}

static void test_pairs_bfloat16 (void **state)
{
    (void) state;
    s_check (AK_DT_BFLOAT16);
}

static void test_pairs_planted (void **state)
{
    (void) state;
    if (S.skip || !s_sm80)
        skip ();
    uint64_t c[6];
    s_run_pairs (AK_DT_BFLOAT16, 1, c);
    /* 2^32 patterns u, each packed twice (u low, then high) with two
       elements compared per pack: 2^34 comparisons */
    print_message ("planted swap: pack mismatches %" PRIu64 " of %" PRIu64 " comparisons\n", c[1],
                   (uint64_t) 1 << 34);
    assert_int_equal (c[5], 4096 * 256);
    assert_int_equal (c[0], 0);
    assert_true (c[1] > ((uint64_t) 1 << 33));  /* most of the 2^34 differ */
    assert_true (c[1] <= ((uint64_t) 1 << 34));
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_pairs_float16),
        cmocka_unit_test (test_pairs_bfloat16),
        cmocka_unit_test (test_pairs_planted),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
