/*  tests/unit/test_verify_rule.c: the verdict rule of `akctl verify`
    (coordinator/verify.h, docs/profiles.md "Verify"):
        pass iff measured >= 1 + threshold
             and |measured - recorded| <= min (k * (noise_m + noise_r) + floor * recorded,
                                               max (25%, floor) * recorded) */
#include "support.h"

#include <math.h>
#include <string.h>

#include "coordinator/verify.h"

static const ak_verify_rule_t s_rule = { 2.0, 0.10 };

static bool s_judge (double rec, double nr, double meas, double nm, double thr, char *why)
{
    return ak_verify_judge (&s_rule, rec, nr, meas, nm, thr, why, 256);
}

static void test_consistent_passes (void **state)
{
    char why[256];
    /* identical */
    assert_true (s_judge (1.85, 0.04, 1.85, 0.04, 0.03, why));
    assert_non_null (strstr (why, "within"));
    /* inside the noise band: 2 * (0.04 + 0.04) + 0.185 = 0.345 */
    assert_true (s_judge (1.85, 0.04, 1.55, 0.04, 0.03, why));
    assert_true (s_judge (1.85, 0.04, 2.19, 0.04, 0.03, why));
}

static void test_noise_widens_the_band (void **state)
{
    char why[256];
    /* 0.5 off: outside with small noise (band 0.345) ... */
    assert_false (s_judge (1.85, 0.04, 1.35, 0.04, 0.03, why));
    assert_non_null (strstr (why, "speedup 1.35"));
    assert_non_null (strstr (why, "vs recorded 1.85"));
    /* ... 0.4 off: outside with small noise, inside once the measurement
       is that noisy (2 * 0.2 + 0.185, under the cap of 25% of 1.85) */
    assert_false (s_judge (1.85, 0.04, 1.45, 0.04, 0.03, why));
    assert_true (s_judge (1.85, 0.04, 1.45, 0.16, 0.03, why));
    /* the recorded noise counts the same way */
    assert_true (s_judge (1.85, 0.16, 1.45, 0.04, 0.03, why));
}

/* Noise widens the band only up to AK_VERIFY_MAX_BAND of the recorded
   speedup: the demo's matmul record (12.30x +- 2.36) passed a measurement
   of about half of it with a band of +- 9.9. */
static void test_noisy_band_is_capped (void **state)
{
    char why[256];
    assert_false (s_judge (12.30, 2.36, 7.50, 2.00, 0.03, why));
    assert_non_null (strstr (why, "outside +- 3.1"));
    assert_non_null (strstr (why, "capped at 25% of the recorded speedup"));
    assert_false (s_judge (12.30, 2.36, 6.11, 0.35, 0.03, why));
    /* however noisy: 0.5 off 1.85 (27%) never passes */
    assert_false (s_judge (1.85, 0.04, 1.35, 0.16, 0.03, why));
    assert_false (s_judge (1.85, 5.0, 1.35, 5.0, 0.03, why));
    assert_false (s_judge (1.85, 5.0, 2.35, 5.0, 0.03, why));
    /* within the cap, noise still widens the band */
    assert_true (s_judge (12.30, 2.36, 11.00, 2.00, 0.03, why));
    assert_true (s_judge (12.30, 2.36, 9.30, 2.00, 0.03, why));
    assert_false (s_judge (12.30, 0.05, 9.30, 0.05, 0.03, why));
    /* a floor above the cap is the cap: 40% of 2.0 */
    ak_verify_rule_t wide = { 2.0, 0.40 };
    assert_true (ak_verify_judge (&wide, 2.0, 0.5, 1.25, 0.5, 0.03, why, sizeof why));
    assert_false (ak_verify_judge (&wide, 2.0, 0.5, 1.15, 0.5, 0.03, why, sizeof why));
    assert_non_null (strstr (why, "capped at 40%"));
}

static void test_floor_is_relative (void **state)
{
    char why[256];
    /* no noise at all: the floor alone, 10% of 8.0 = 0.8 */
    assert_true (s_judge (8.0, 0, 7.25, 0, 0.03, why));
    assert_false (s_judge (8.0, 0, 7.15, 0, 0.03, why));
    /* faster than recorded is as inconsistent as slower */
    assert_false (s_judge (8.0, 0, 8.85, 0, 0.03, why));
    ak_verify_rule_t none = { 0, 0 };
    assert_false (ak_verify_judge (&none, 2.0, 0.5, 2.01, 0.5, 0.03, why, sizeof why));
    assert_true (ak_verify_judge (&none, 2.0, 0.5, 2.0, 0.5, 0.03, why, sizeof why));
}

static void test_threshold (void **state)
{
    char why[256];
    /* consistent with the record, but not a speedup worth keeping */
    assert_false (s_judge (1.02, 0.01, 1.02, 0.01, 0.03, why));
    assert_non_null (strstr (why, "below 1.03"));
    assert_true (s_judge (1.04, 0.01, 1.04, 0.01, 0.03, why));
    /* a larger threshold */
    assert_false (s_judge (1.08, 0.01, 1.08, 0.01, 0.10, why));
    assert_non_null (strstr (why, "below 1.1"));
    /* threshold 0 or nonsense: the default 3% */
    assert_false (s_judge (1.02, 0.01, 1.02, 0.01, 0, why));
    assert_false (s_judge (1.02, 0.01, 1.02, 0.01, NAN, why));
    /* a slowdown is never consistent enough */
    assert_false (s_judge (1.85, 5.0, 0.5, 5.0, 0.03, why));
}

static void test_untrusted_figures (void **state)
{
    char why[256];
    assert_false (s_judge (1.85, 0.04, NAN, 0.04, 0.03, why));
    assert_non_null (strstr (why, "no valid speedup"));
    assert_false (s_judge (1.85, 0.04, 0, 0.04, 0.03, why));
    assert_false (s_judge (1.85, 0.04, -2, 0.04, 0.03, why));
    assert_false (s_judge (1.85, 0.04, INFINITY, 0.04, 0.03, why));
    /* a bad noise figure counts as none: it cannot widen the band */
    assert_false (s_judge (1.85, NAN, 1.35, INFINITY, 0.03, why));
    assert_false (s_judge (1.85, -1, 1.35, -1, 0.03, why));
    /* a recorded speedup that is not a number cannot be matched */
    assert_false (s_judge (NAN, 0.04, 1.85, 0.04, 0.03, why));
    assert_false (s_judge (0, 0.04, 1.85, 0.04, 0.03, why));
    /* a NULL or nonsense rule means the defaults (k 2, floor 10%) */
    assert_true (ak_verify_judge (NULL, 1.85, 0.04, 1.55, 0.04, 0.03, why, sizeof why));
    ak_verify_rule_t bad = { NAN, -1 };
    assert_false (ak_verify_judge (&bad, 1.85, 0.04, 1.35, 0.04, 0.03, why, sizeof why));
    /* a short buffer is truncated, never overrun */
    char tiny[8];
    assert_false (ak_verify_judge (&s_rule, 1.85, 0.04, 1.0, 0.04, 0.03, tiny, sizeof tiny));
    assert_int_equal (strlen (tiny), 7);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_consistent_passes),
        cmocka_unit_test (test_noise_widens_the_band),
        cmocka_unit_test (test_noisy_band_is_capped),
        cmocka_unit_test (test_floor_is_relative),
        cmocka_unit_test (test_threshold),
        cmocka_unit_test (test_untrusted_figures),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
