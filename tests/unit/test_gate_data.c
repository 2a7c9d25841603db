/*  tests/unit/test_gate_data.c: what the correctness gates (worker/gates.c)
    compute with, without running a kernel: element conversions and the
    inputs (worker/data.c), which configurations the host oracle takes
    (ak_gate_oracle_fits), and the comparison of a large output in parts
    (gates_cmp.c).  Split from test_gates.c. */
#include "support.h"
#include "worker/data.h"
#include "worker/gates.h"
#include "worker/gates_impl.h"
#include "rng.h"
#include "spec.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ak_spec_t *s_spec;           /* kernels/softmax/spec.json */

static int s_group_setup (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    char *spec_path = ak_test_src ("kernels/softmax/spec.json");
    int rc = ak_spec_load (spec_path, &s_spec, &err);
    if (rc)
        fprintf (stderr, "%s: %s\n", spec_path, err.msg);
    free (spec_path);
    assert_int_equal (rc, 0);
    return 0;
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_spec_destroy (&s_spec);
    return 0;
}

static void test_elements (void **state)
{
    (void) state;
    uint8_t buf[16];
    /* float16: ties to even, range clipping, subnormals, round trip. */
    assert_float_equal (ak_elem_round (AK_DT_FLOAT16, 1.0 + ldexp (1, -11)), 1.0, 0);
    assert_float_equal (ak_elem_round (AK_DT_FLOAT16, 1.0 + 3 * ldexp (1, -11)), 1.0 + ldexp (1, -9), 0);
    assert_float_equal (ak_elem_round (AK_DT_FLOAT16, 1e6), 65504.0, 0);
    assert_float_equal (ak_elem_round (AK_DT_FLOAT16, -1e6), -65504.0, 0);
    assert_float_equal (ak_elem_round (AK_DT_FLOAT16, ldexp (1, -24) * 0.6), ldexp (1, -24), 0);
    double vals[] = { 0.0, 1.0, -2.5, 65504.0, ldexp (1, -24), ldexp (3, -20), 0.333251953125 };
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        double v = ak_elem_round (AK_DT_FLOAT16, vals[i]);
        ak_elem_store (AK_DT_FLOAT16, buf, 1, v);
        assert_float_equal (ak_elem_load (AK_DT_FLOAT16, buf, 1), v, 0);
    }
    uint16_t one;
    ak_elem_store (AK_DT_FLOAT16, &one, 0, 1.0);
    assert_int_equal (one, 0x3c00);
    /* bfloat16 and float32. */
    assert_float_equal (ak_elem_round (AK_DT_BFLOAT16, 1.0 + ldexp (1, -8)), 1.0, 0);
    ak_elem_store (AK_DT_BFLOAT16, buf, 0, ak_elem_round (AK_DT_BFLOAT16, 3.14159));
    assert_float_equal (ak_elem_load (AK_DT_BFLOAT16, buf, 0), 3.140625, 0);
    assert_float_equal (ak_elem_round (AK_DT_FLOAT32, 0.1), (double) 0.1f, 0);
    assert_float_equal (ak_elem_round (AK_DT_FLOAT32, 1e300), (double) 3.40282346638528859812e+38f, 0);
    assert_true (isnan (ak_elem_round (AK_DT_FLOAT32, NAN)));
    /* The poison pattern reads as NaN in every float type. */
    memset (buf, 0xFF, sizeof buf);
    assert_true (isnan (ak_elem_load (AK_DT_FLOAT32, buf, 0)));
    assert_true (isnan (ak_elem_load (AK_DT_FLOAT16, buf, 0)));
    assert_true (isnan (ak_elem_load (AK_DT_BFLOAT16, buf, 0)));
    /* Inputs are a pure function of (seed, buffer, element). */
    double a = ak_input_value (s_spec, 0, 5, 42, AK_DT_FLOAT32);
    assert_float_equal (a, ak_input_value (s_spec, 0, 5, 42, AK_DT_FLOAT32), 0);
    assert_true (a != ak_input_value (s_spec, 0, 5, 43, AK_DT_FLOAT32));
    assert_true (a >= -4 && a < 4);
}

static double s_negate (void *arg, int j, uint64_t i, double v)
{
    (void) arg;
    (void) j;
    (void) i;
    return -v;
}

/*  ak_input_fill, in parts on threads above AK_INPUT_FILL_MIN elements
    (n is not a multiple of the parts), makes element for element what
    ak_input_value makes, in float64 and in the element type; a transform
    is applied before the rounding. */
static void test_input_fill (void **state)
{
    (void) state;
    const size_t n = 3 * (size_t) AK_INPUT_FILL_MIN + 7;
    double *vals = ak_malloc (n * sizeof *vals);
    uint8_t *raw = ak_malloc (n * 4), *want = ak_malloc (n * 4);
    const ak_dtype_t dts[] = { AK_DT_FLOAT32, AK_DT_FLOAT16, AK_DT_BFLOAT16 };
    for (size_t d = 0; d < 3; d++) {
        ak_dtype_t dt = dts[d];
        memset (raw, 0xA5, n * 4);
        ak_input_fill (s_spec, 0, 42, dt, n, NULL, NULL, vals, raw);
        for (size_t i = 0; i < n; i++) {
            double w = ak_input_value (s_spec, 0, i, 42, dt);
            if (vals[i] != w)
                fail_msg ("%s element %zu: %.17g, ak_input_value %.17g", ak_dtype_name (dt), i, vals[i], w);
            ak_elem_store (dt, want, i, w);
        }
        assert_memory_equal (raw, want, n * ak_dtype_size (dt));
        ak_input_fill (s_spec, 0, 42, dt, n, s_negate, NULL, vals, raw);
        const ak_buf_t *b = &s_spec->inputs[0];
        for (size_t i = 0; i < n; i += 997)
            assert_float_equal (vals[i], ak_elem_round (dt, -ak_rng_range (42, 0, i, b->lo, b->hi)), 0);
    }
    free (vals);
    free (raw);
    free (want);
}

/*  Which configurations the host oracle takes where a device reference
    is there (ak_gate_oracle_fits): by the largest buffer and by the
    spec's work.  flash_attention's "large" (537 MFLOP) goes to the device
    reference alone by its work though every buffer is within 2^20
    elements; "medium" (17 MFLOP) stays with the oracle, as matmul's
    "xlarge" does (34 MFLOP); raising the limit takes "large" back; a
    buffer beyond max_elems sends any size away. */
static void s_fits (const char *op, const char *size, uint64_t max_elems, uint64_t max_flops, bool want)
{
    ak_err_t err = { 0 };
    ak_spec_t *spec = NULL;
    char *rel = ak_sprintf ("kernels/%s/spec.json", op);
    char *path = ak_test_src (rel);
    assert_int_equal (ak_spec_load (path, &spec, &err), 0);
    const ak_size_t *z = ak_spec_size (spec, size);
    assert_non_null (z);
    size_t nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
    assert_int_equal (ak_buf_counts (spec, z->dims, AK_DT_BFLOAT16, nin, nout, &err), 0);
    bool got = ak_gate_oracle_fits (spec, z->dims, AK_DT_BFLOAT16, nin, nout, max_elems, max_flops);
    if (got != want)
        fail_msg ("%s %s (max_elems %llu, max_flops %llu): oracle_fits %d, expected %d", op, size,
                  (unsigned long long) max_elems, (unsigned long long) max_flops, got, want);
    ak_spec_destroy (&spec);
    free (path);
    free (rel);
}

static void test_oracle_fits (void **state)
{
    (void) state;
    s_fits ("flash_attention", "large", 0, 0, false);
    s_fits ("flash_attention", "s1025", 0, 0, false);
    s_fits ("flash_attention", "s1023", 0, 0, false);
    s_fits ("flash_attention", "medium", 0, 0, true);
    s_fits ("flash_attention", "large", 0, 1ull << 30, true);
    s_fits ("matmul", "xlarge", 0, 0, true);
    s_fits ("softmax", "small", 0, 0, true);
    s_fits ("softmax", "small", 1000, 0, false);
}

/*  The host comparison of a large output, made in parts on several
    threads (ak_par_for, gates_cmp.c), says what the element-by-element
    order says: the counts of each kind, the largest finite error, and the
    first failing element, wherever the parts' boundaries fall. */
static void test_compare_parts (void **state)
{
    (void) state;
    const size_t n = 5 * ((size_t) 1 << 16) + 3;
    double *ref = ak_malloc (n * sizeof *ref);
    float *got = ak_malloc (n * sizeof *got);
    for (size_t i = 0; i < n; i++) {
        ref[i] = sin ((double) i * 0.001);
        got[i] = (float) ref[i];
    }
    ak_gate_ctx_t ctx;
    memset (&ctx, 0, sizeof ctx);
    ctx.spec = s_spec;
    ak_gcfg_t c;
    memset (&c, 0, sizeof c);
    c.ctx = &ctx;
    c.dt = AK_DT_FLOAT32;
    c.esz = 4;
    c.nout[0] = n;
    c.got[0] = (uint8_t *) got;
    c.ref[0] = ref;
    assert_false (s_spec->inplace);
    for (int k = 1; k < s_spec->noutputs; k++)
        c.nout[k] = 0;
    ak_gcmp_t r;
    ak_err_t err = { 0 };

    /* the planted: the first failure in the last part of any split, the
       others before and after it */
    const size_t first = n - 20;
    got[first] += 1.0f;                     /* beyond */
    got[n - 1] += 2.0f;                     /* beyond, the worst */
    got[n - 10] = NAN;                      /* non-finite */
    memset (&got[n - 5], AK_POISON_BYTE, 4);   /* unwritten */
    assert_int_equal (ak_gcfg_compare (&c, 1.0, &r, &err), 0);
    assert_int_equal (r.n, n);
    assert_int_equal (r.beyond, 2);
    assert_int_equal (r.nonfinite, 1);
    assert_int_equal (r.unwritten, 1);
    assert_int_equal (r.first_out, 0);
    assert_int_equal (r.first_i, first);
    assert_string_equal (r.first_kind, "beyond tolerance");
    assert_true (fabs (r.worst - 2.0) < 1e-6);

    /* one more failure early, in the first part: it is the first */
    got[3] = NAN;
    assert_int_equal (ak_gcfg_compare (&c, 1.0, &r, &err), 0);
    assert_int_equal (r.nonfinite, 2);
    assert_int_equal (r.first_i, 3);
    assert_string_equal (r.first_kind, "non-finite");

    /* all fine: nothing failing, the worst a rounding */
    got[3] = (float) ref[3];
    got[first] = (float) ref[first];
    got[n - 1] = (float) ref[n - 1];
    got[n - 10] = (float) ref[n - 10];
    got[n - 5] = (float) ref[n - 5];
    assert_int_equal (ak_gcfg_compare (&c, 1.0, &r, &err), 0);
    assert_int_equal (r.beyond + r.nonfinite + r.unwritten, 0);
    assert_int_equal (r.first_out, -1);
    assert_true (r.worst < 1e-7);
    free (ref);
    free (got);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_elements),
        cmocka_unit_test (test_input_fill),
        cmocka_unit_test (test_compare_parts),
        cmocka_unit_test (test_oracle_fits),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
