/*  tests/unit/test_loopstat.c: the coordinator loop's statistics
    (coordinator/loopstat.c, issue 24) and the exposition they are exported
    in (common/metrics.c, metrics_parse.c, issue 21):
    - a histogram counts each value in the first bucket whose bound is not
      below it, +Inf past the last, and renders cumulative buckets;
    - the ring keeps only wake-ups at or over the threshold, the last
      AK_LOOPSTAT_RING of them, newest first, each whole;
    - `stats --json`'s loop object and the akcoord_loop_* families say the
      same counts, and the exposition parses (HELP/TYPE, monotone buckets);
    - label values with quotes, backslashes and newlines are escaped and
      read back intact; the parser refuses samples without HELP/TYPE,
      buckets that go down, and a _count unequal to +Inf;
    - the cost of a record is printed (never asserted: a loaded box). */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "coordinator/loopstat.h"
#include "metrics.h"
#include "util.h"

static void test_hist_buckets (void **state)
{
    (void) state;
    static const double le[] = { 1, 5, 10 };
    ak_hist_t h;
    ak_hist_init (&h, le, 3);
    double values[] = { 0.5, 1, 1.5, 5, 7, 10, 11, 1000 };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        ak_hist_observe (&h, values[i]);
    assert_int_equal (h.counts[0], 2);      /* 0.5, 1 */
    assert_int_equal (h.counts[1], 2);      /* 1.5, 5 */
    assert_int_equal (h.counts[2], 2);      /* 7, 10 */
    assert_int_equal (h.counts[3], 2);      /* +Inf */
    assert_int_equal (h.count, 8);
    assert_true (fabs (h.sum - 1036.0) < 1e-9);

    json_t *j = ak_hist_json (&h);
    json_t *counts = json_object_get (j, "counts");
    assert_int_equal (json_array_size (counts), 4);
    assert_int_equal (json_integer_value (json_array_get (counts, 0)), 2);
    assert_int_equal (json_integer_value (json_array_get (counts, 1)), 4);
    assert_int_equal (json_integer_value (json_array_get (counts, 3)), 8);
    assert_string_equal (json_string_value (json_array_get (json_object_get (j, "le"), 3)), "+Inf");
    json_decref (j);

    ak_mtext_t t;
    ak_mtext_init (&t);
    ak_mtext_family (&t, "x_seconds", "histogram", "a test");
    ak_mtext_hist (&t, "x_seconds", &h, 0.001, "k", "v", NULL);
    char *text = ak_mtext_take (&t, NULL);
    print_message ("%s", text);
    ak_mparsed_t p;
    ak_err_t err = { 0 };
    assert_int_equal (ak_metrics_parse (text, &p, &err), 0);
    assert_true (ak_mparsed_get (&p, "x_seconds_bucket", "k=\"v\",le=\"0.001\"") == 2);
    assert_true (ak_mparsed_get (&p, "x_seconds_bucket", "k=\"v\",le=\"0.005\"") == 4);
    assert_true (ak_mparsed_get (&p, "x_seconds_bucket", "k=\"v\",le=\"+Inf\"") == 8);
    assert_true (ak_mparsed_get (&p, "x_seconds_count", "k=\"v\"") == 8);
    assert_true (fabs (ak_mparsed_get (&p, "x_seconds_sum", "k=\"v\"") - 1.036) < 1e-9);
    ak_mparsed_clear (&p);
    free (text);
}

static ak_wake_t s_wake (uint32_t us, uint32_t tag)
{
    ak_wake_t w;
    memset (&w, 0, sizeof w);
    w.total_us = us;
    w.msgs[AK_EP_WORKERS] = tag;
    w.commits = tag % 3;
    w.commit_receipts = tag;
    w.heartbeats = tag + 1;
    w.log_flushes = 1;
    return w;
}

static void test_ring (void **state)
{
    (void) state;
    ak_loopstat_t *ls = ak_loopstat_new (5);
    assert_null (ak_loopstat_slow_at (ls, 0));
    /* 400 wake-ups: every fourth one slow (5 ms exactly counts), tagged:
       100 slow ones, more than the ring holds */
    size_t slow = 0;
    for (uint32_t i = 0; i < 400; i++) {
        bool is_slow = i % 4 == 0;
        ak_wake_t w = s_wake (is_slow ? 5000 + i : 4999, i);
        ak_loopstat_record (ls, &w);
        slow += is_slow;
    }
    assert_int_equal (ak_loopstat_wakeups (ls), 400);
    assert_int_equal (ak_loopstat_slow (ls), slow);
    /* the newest first: tags 396, 392 ... and only AK_LOOPSTAT_RING kept */
    for (size_t i = 0; i < AK_LOOPSTAT_RING; i++) {
        const ak_wake_t *w = ak_loopstat_slow_at (ls, i);
        assert_non_null (w);
        uint32_t tag = 396 - 4 * (uint32_t) i;
        assert_int_equal (w->msgs[AK_EP_WORKERS], tag);
        assert_int_equal (w->total_us, 5000 + tag);
        assert_int_equal (w->heartbeats, tag + 1);
        assert_int_equal (w->commit_receipts, tag);
    }
    assert_null (ak_loopstat_slow_at (ls, AK_LOOPSTAT_RING));

    ak_loopstat_commit (ls, 1500, 40);
    ak_loopstat_commit (ls, 30000, 256);
    ak_loopstat_ack (ls, 3000);
    ak_loopstat_ack (ls, 19000);
    ak_loopstat_ack (ls, 21000);
    json_t *j = ak_loopstat_json (ls);
    assert_int_equal (json_integer_value (json_object_get (j, "wakeups")), 400);
    assert_int_equal (json_integer_value (json_object_get (j, "slow_wakeups")), (json_int_t) slow);
    assert_int_equal (json_integer_value (json_object_get (j, "slow_threshold_ms")), 5);
    json_t *ring = json_object_get (j, "slow");
    assert_int_equal (json_array_size (ring), AK_LOOPSTAT_RING);
    assert_int_equal (json_integer_value (json_object_get (json_array_get (ring, 0), "worker_msgs")), 396);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (j, "commit_ms"), "count")), 2);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (j, "receipt_ack_ms"), "count")), 3);
    json_decref (j);

    /* the exposition says the same */
    ak_mtext_t t;
    ak_mtext_init (&t);
    ak_loopstat_render (ls, &t);
    char *text = ak_mtext_take (&t, NULL);
    ak_mparsed_t p;
    ak_err_t err = { 0 };
    if (ak_metrics_parse (text, &p, &err))
        fail_msg ("%s\n%s", err.msg, text);
    assert_true (ak_mparsed_get (&p, "akcoord_loop_wakeup_seconds_count", "") == 400);
    /* the slow one of exactly 5 ms (tag 0) is in the le=0.005 bucket too */
    assert_true (ak_mparsed_get (&p, "akcoord_loop_wakeup_seconds_bucket", "le=\"0.005\"") == 400 - slow + 1);
    assert_true (ak_mparsed_get (&p, "akcoord_loop_slow_wakeups_total", "") == (double) slow);
    assert_true (ak_mparsed_get (&p, "akcoord_commit_seconds_count", "") == 2);
    assert_true (ak_mparsed_get (&p, "akcoord_commit_seconds_bucket", "le=\"0.002\"") == 1);
    assert_true (ak_mparsed_get (&p, "akcoord_commit_receipts_bucket", "le=\"256\"") == 2);
    assert_true (ak_mparsed_get (&p, "akcoord_receipt_ack_seconds_count", "") == 3);
    assert_true (ak_mparsed_get (&p, "akcoord_receipt_ack_seconds_bucket", "le=\"0.02\"") == 2);
    ak_mparsed_clear (&p);
    free (text);
    ak_loopstat_destroy (&ls);
    ak_loopstat_destroy (&ls);          /* twice: a no-op */
}

static void test_escaping_and_refusals (void **state)
{
    (void) state;
    ak_mtext_t t;
    ak_mtext_init (&t);
    ak_mtext_family (&t, "y_total", "counter", "help with \\ and\nnewline");
    ak_mtext_u64 (&t, "y_total", 7, "class", "H100 \"SXM\"\\x\nz", "batch", "B1", NULL);
    ak_mtext_dbl (&t, "y_total", NAN, "class", "", NULL);
    char *text = ak_mtext_take (&t, NULL);
    print_message ("%s", text);
    assert_non_null (strstr (text, "class=\"H100 \\\"SXM\\\"\\\\x\\nz\""));
    assert_null (strstr (text, "\nz\""));   /* no raw newline inside a label */
    ak_mparsed_t p;
    ak_err_t err = { 0 };
    assert_int_equal (ak_metrics_parse (text, &p, &err), 0);
    assert_int_equal (p.n, 2);
    assert_true (isnan (p.v[1].value));
    assert_true (ak_mparsed_sum (&p, "y_total", "batch=\"B1\"", NULL) == 7);
    ak_mparsed_clear (&p);
    free (text);

    static const char *const bad[] = {
        "z_total 1\n",                                                          /* no HELP/TYPE */
        "# HELP z z\n# TYPE z gauge\nz{a=\"b} 1\n",                             /* label not closed */
        "# HELP z z\n# TYPE z gauge\nz one\n",                                  /* not a number */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"2\"} 4\n"
            "h_bucket{le=\"+Inf\"} 5\nh_sum 1\nh_count 5\n",                   /* goes down */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 2\n"
            "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",                   /* le not ascending */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
            "h_sum 1\nh_count 3\n",                                             /* _count != +Inf */
        "# HELP z z\n# TYPE z gauge\n# TYPE z counter\nz 1\n",                  /* two TYPEs */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset (&err, 0, sizeof err);
        int rc = ak_metrics_parse (bad[i], &p, &err);
        print_message ("bad %zu: %s\n", i, err.msg);
        assert_int_equal (rc, AK_EPROTO);
        ak_mparsed_clear (&p);
    }
}

/* What a record costs the loop: the clock reads of a wake-up's phases and
   the record itself.  Printed for docs/benchmarks.md, not asserted. */
static void test_cost (void **state)
{
    (void) state;
    ak_loopstat_t *ls = ak_loopstat_new (5);
    const int n = 200000;
    uint64_t t0 = ak_clock_mono_ns ();
    for (int i = 0; i < n; i++) {
        ak_wake_t w = s_wake ((uint32_t) (i % 7000), (uint32_t) i);
        for (int k = 0; k < 6; k++)     /* the phase stamps of a busy wake-up */
            w.tick_us += (uint32_t) (ak_clock_mono_ns () & 1);
        ak_loopstat_record (ls, &w);
    }
    double ns = (double) (ak_clock_mono_ns () - t0) / n;
    print_message ("loopstat: %.0f ns per wake-up record (6 clock reads + record; this build)\n", ns);
    assert_int_equal (ak_loopstat_wakeups (ls), (uint64_t) n);
    ak_loopstat_destroy (&ls);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_hist_buckets),
        cmocka_unit_test (test_ring),
        cmocka_unit_test (test_escaping_and_refusals),
        cmocka_unit_test (test_cost),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
