/*  tests/unit/test_link.c: the link rules of common/linkwatch.h as pure
    functions: the reconnect backoff doubles within its bounds, its jitter
    stays in [delay/2, delay] and spreads, the liveness clock starts at the
    handshake (never at the connect), and the handshake events read as an
    operator needs them. */
#include "support.h"

#include <string.h>
#include <zmq.h>

#include "linkwatch.h"

static void test_backoff_doubles_within_bounds (void **state)
{
    (void) state;
    assert_int_equal (ak_backoff_next (1000, 1000, 32000), 2000);
    assert_int_equal (ak_backoff_next (16000, 1000, 32000), 32000);
    assert_int_equal (ak_backoff_next (32000, 1000, 32000), 32000);
    assert_int_equal (ak_backoff_next (20000, 1000, 32000), 32000);     /* capped, not 40000 */
    assert_int_equal (ak_backoff_next (0, 1000, 32000), 1000);          /* never below min */
    assert_int_equal (ak_backoff_next (3000000000u, 1000, 4000000000u), 4000000000u);  /* no overflow */
    assert_int_equal (ak_backoff_next (5, 10, 1), 10);                  /* max below min: min */
    uint32_t d = 1000, n = 0;
    while (d < 32000 && n < 100) {
        d = ak_backoff_next (d, 1000, 32000);
        n++;
    }
    assert_int_equal (n, 5);            /* 1 s doubling to 32 s: five steps */
}

static void test_jitter_in_range_and_spread (void **state)
{
    (void) state;
    assert_int_equal (ak_backoff_jitter (0, 12345), 0);
    assert_int_equal (ak_backoff_jitter (1, 0xffffffffu), 1);
    assert_int_equal (ak_backoff_jitter (1000, 0), 500);
    assert_int_equal (ak_backoff_jitter (1000, 500), 1000);
    assert_int_equal (ak_backoff_jitter (1001, 0), 501);
    assert_int_equal (ak_backoff_jitter (1001, 500), 1001);
    uint32_t lo = UINT32_MAX, hi = 0;
    int buckets[10] = { 0 };
    uint64_t x = 88172645463325252ull;          /* xorshift64: a spread of inputs */
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t w = ak_backoff_jitter (32000, (uint32_t) x);
        assert_true (w >= 16000 && w <= 32000);
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
        buckets[(w - 16000) * 10 / 16001]++;
    }
    /* a thousand workers that lost the coordinator together come back
       spread over the whole window, not at one instant */
    assert_true (lo < 16500);
    assert_true (hi > 31500);
    for (int b = 0; b < 10; b++)
        assert_true (buckets[b] > 700 && buckets[b] < 1300);
    assert_true (ak_backoff_jitter (UINT32_MAX, UINT32_MAX) >= UINT32_MAX / 2);     /* no overflow */
}

static void test_liveness_starts_at_handshake (void **state)
{
    (void) state;
    ak_liveness_t l;
    ak_liveness_reset (&l);
    /* connecting: the handshake may wait its turn for minutes, never dead */
    assert_false (ak_liveness_dead (&l, 0, 1000, 3));
    assert_false (ak_liveness_dead (&l, 10 * 60 * 1000, 1000, 3));
    /* the handshake succeeded at t = 600 s: the clock starts there */
    ak_liveness_heard (&l, 600000);
    assert_false (ak_liveness_dead (&l, 600000, 1000, 3));
    assert_false (ak_liveness_dead (&l, 603000, 1000, 3));     /* exactly 3 intervals: not yet */
    assert_true (ak_liveness_dead (&l, 603001, 1000, 3));
    /* a message restarts it */
    ak_liveness_heard (&l, 602000);
    assert_false (ak_liveness_dead (&l, 603001, 1000, 3));
    assert_true (ak_liveness_dead (&l, 605001, 1000, 3));
    assert_false (ak_liveness_dead (&l, 605001, 1000, 4));     /* --liveness 4 */
    assert_false (ak_liveness_dead (&l, 601000, 1000, 3));     /* a clock read before the event */
    /* a new socket: back to connecting */
    ak_liveness_reset (&l);
    assert_false (ak_liveness_dead (&l, 10000000, 1000, 3));
}

static void test_handshake_events_described (void **state)
{
    (void) state;
    char buf[512];
    ak_hs_event_t auth = { AK_HS_AUTH, 400 };
    assert_true (ak_hs_refused (&auth));
    assert_non_null (strstr (ak_hs_describe (&auth, true, buf, sizeof buf), "the coordinator refused this key"));
    assert_non_null (strstr (buf, "400"));
    ak_hs_event_t mismatch = { AK_HS_PROTOCOL, ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH };
    assert_true (ak_hs_refused (&mismatch));
    assert_non_null (strstr (ak_hs_describe (&mismatch, false, buf, sizeof buf), "CURVE"));
    ak_hs_event_t other = { AK_HS_PROTOCOL, 0x10000001 };
    assert_non_null (strstr (ak_hs_describe (&other, true, buf, sizeof buf), "0x10000001"));
    ak_hs_event_t closed = { AK_HS_NO_DETAIL, 32 };
    assert_false (ak_hs_refused (&closed));       /* also a coordinator going away mid-handshake */
    assert_non_null (strstr (ak_hs_describe (&closed, true, buf, sizeof buf), "--server-key is not"));
    /* without a certificate the same close means the coordinator wants one */
    assert_non_null (strstr (ak_hs_describe (&closed, false, buf, sizeof buf), "expects CURVE"));
    assert_null (strstr (buf, "--server-key is not"));
    ak_hs_event_t ok = { AK_HS_OK, 0 };
    assert_false (ak_hs_refused (&ok));
    /* a short buffer is cut, never overrun */
    char small[8];
    ak_hs_describe (&auth, true, small, sizeof small);
    assert_int_equal (strlen (small), 7);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_backoff_doubles_within_bounds),
        cmocka_unit_test (test_jitter_in_range_and_spread),
        cmocka_unit_test (test_liveness_starts_at_handshake),
        cmocka_unit_test (test_handshake_events_described),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
