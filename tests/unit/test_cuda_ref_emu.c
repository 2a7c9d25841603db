/*  tests/unit/test_cuda_ref_emu.c: every operator's float64 device
    reference (kernels/<op>/cuda/ref.cu, the oracle the GPU gates judge
    against) run on the CPU and compared with its host oracle (ref.c), with
    no GPU.  The gates on a GPU (test_gpu_reference) compare the same two;
    this finds an indexing or tiling mistake in a reference before device
    time is spent on it.

    For each operator with a reference_cuda (all, or $AK_CATALOG_OPS):
    ref.c is compiled with gcc (ak_reference renamed ak_host_reference)
    and linked by g++ with tests/unit/cuda_emu/main.cpp, which runs ref.cu
    through the CUDA of tests/unit/cuda_emu/emu.h (each thread a
    coroutine; barriers, warp shuffles, shared memory per block, and a
    grid-wide barrier of spins); the one piece of inline PTX the catalog's
    references have, fused_mlp's `%nsmid` read, becomes gridDim.x, and any
    other `asm` fails the test.  Then, for every size of the spec that the
    host runs and every edge size (those of at most 2^16 elements in all,
    2^20 for flash_attention),
    the spec's generator's inputs (float32 values, seed 7) go to both, the
    launch is the spec's reference launch for those dims, and every output
    element of the device reference must be within 1e-9 of the host's,
    relative to the output's largest magnitude (the two sum in other
    orders; both NaN counts as equal; an unwritten element is NaN).
    test_emu_planted: matmul's reference launched on half its grid leaves
    outputs unwritten, and the comparison must say so. */
#include "support.h"
#include "unit.h"
#include "space.h"
#include "worker/data.h"
#include "spec.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_ELEMS (1 << 16)

/*  Elements a size may have in all, per operator: S_MAX_ELEMS, more where
    a reference's paths (causal tiles, several key steps, D 128) show only
    at larger sizes and its emulation stays quick. */
static size_t s_max_elems (const char *op)
{
    return strcmp (op, "flash_attention") == 0 ? (size_t) 1 << 20 : (size_t) S_MAX_ELEMS;
}
#define S_SEED 7

/*  ref.cu's text for the emulation: the %nsmid read replaced; NULL with a
    failure where other inline PTX is left. */
static char *s_emu_source (const char *op, const char *text)
{
    static const char nsmid[] = "asm (\"mov.u32 %0, %%nsmid;\" : \"=r\" (nsm));";
    char *s = ak_strdup (text);
    char *p = strstr (s, nsmid);
    if (p) {
        static const char repl[] = "nsm = gridDim.x;";
        memcpy (p, repl, sizeof repl - 1);
        memset (p + sizeof repl - 1, ' ', sizeof nsmid - sizeof repl);
    }
    if (strstr (s, "asm (") || strstr (s, "asm(") || strstr (s, "asm volatile"))
        fail_msg ("%s: cuda/ref.cu has inline PTX the CPU emulation does not know", op);
    return s;
}

static void test_emu_catalog (void **state)
{
    (void) state;
    char *ops[AK_TEST_MAX_OPS];
    int nops = ak_test_catalog_ops (ops, AK_TEST_MAX_OPS), checked_ops = 0;
    for (int o = 0; o < nops; o++) {
        ak_spec_t *spec = ak_cat_spec (ops[o]);
        if (!spec->reference_cuda.text || !spec->reference_cuda_launch) {
            free (ops[o]);
            ak_spec_destroy (&spec);
            continue;
        }
        char *dir = ak_test_tmpdir ("cudaemu");
        char *cu = s_emu_source (ops[o], spec->reference_cuda.text);
        char *exe = ak_unit_emu_build (spec, dir, "AK_EMU_REF", "ref.cu", cu, "");
        int runs = 0;
        double secs = 0;
        for (size_t z = 0; z < spec->nsizes + spec->nedge; z++) {
            const ak_size_t *size = z < spec->nsizes ? &spec->sizes[z] : &spec->edge_sizes[z - spec->nsizes];
            if (!ak_size_for_backend (size, "host"))
                continue;
            ak_err_t err = { 0 };
            size_t nin[AK_MAX_BUFS] = { 0 }, nout[AK_MAX_BUFS] = { 0 }, all = 0;
            assert_int_equal (ak_buf_counts (spec, size->dims, AK_DT_FLOAT32, nin, nout, &err), 0);
            for (int j = 0; j < AK_MAX_BUFS; j++)
                all += nin[j] + nout[j];
            if (all > s_max_elems (ops[o]))
                continue;
            ak_launch_cfg_t cfg;
            if (ak_launch_eval (spec, spec->reference_cuda_launch, size->dims, AK_DT_FLOAT32, NULL, NULL, 0,
                                &cfg, &err) != 0)
                fail_msg ("%s %s: reference launch: %s", ops[o], size->name, err.msg);
            if (cfg.shared_bytes || cfg.cluster[0] * cfg.cluster[1] * cfg.cluster[2] != 1)
                fail_msg ("%s: the reference launch asks for dynamic shared memory or a cluster, which the "
                          "CPU emulation does not have", ops[o]);
            ak_emu_cmp_t r;
            ak_unit_emu_run (spec, dir, exe, size->dims, AK_DT_FLOAT32, S_SEED, &cfg, 1, NULL, &r);
            if (r.bad)
                fail_msg ("%s %s: %zu device-reference elements differ from ref.c's beyond %.3g, worst %s[%zu] "
                          "off by %.3g", ops[o], size->name, r.bad, r.tol, spec->outputs[r.worst_out].name,
                          r.worst_at, r.worst);
            runs++;
            secs += r.seconds;
        }
        print_message ("%s: device reference equal to ref.c at %d sizes (%.1f s of emulation)\n", ops[o], runs, secs);
        if (runs == 0)
            fail_msg ("%s: no size small enough to emulate", ops[o]);
        checked_ops++;
        ak_test_rmtree (dir);
        free (dir);
        free (cu);
        free (exe);
        free (ops[o]);
        ak_spec_destroy (&spec);
    }
    if (checked_ops == 0)
        fail_msg ("no operator with a device reference (AK_CATALOG_OPS=%s)",
                  getenv ("AK_CATALOG_OPS") ? getenv ("AK_CATALOG_OPS") : "");
}

static void test_emu_planted (void **state)
{
    (void) state;
    ak_spec_t *spec = ak_cat_spec ("matmul");
    char *dir = ak_test_tmpdir ("cudaemu-planted");
    char *cu = s_emu_source ("matmul", spec->reference_cuda.text);
    char *exe = ak_unit_emu_build (spec, dir, "AK_EMU_REF", "ref.cu", cu, "");
    const int64_t dims[3] = { 70, 130, 33 };      /* M N K: a grid of 3 x 2 blocks */
    ak_launch_cfg_t cfg;
    ak_err_t err = { 0 };
    assert_int_equal (ak_launch_eval (spec, spec->reference_cuda_launch, dims, AK_DT_FLOAT32, NULL, NULL, 0, &cfg,
                                      &err), 0);
    ak_emu_cmp_t r;
    ak_unit_emu_run (spec, dir, exe, dims, AK_DT_FLOAT32, S_SEED, &cfg, 1, NULL, &r);
    assert_int_equal (r.bad, 0);
    ak_unit_emu_run (spec, dir, exe, dims, AK_DT_FLOAT32, S_SEED, &cfg, 2, NULL, &r);
    print_message ("matmul on half its grid: %zu of %d elements differ\n", r.bad, 70 * 130);
    assert_true (r.bad >= 70 * 64);             /* columns 64..129 never written */
    ak_test_rmtree (dir);
    free (dir);
    free (cu);
    free (exe);
    ak_spec_destroy (&spec);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_emu_catalog),
        cmocka_unit_test (test_emu_planted),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
