/*  tests/unit/test_report_timing.c: a report page's GPU timing share
    (coordinator/report_timing.h): each device's wall time is counted per
    run of its worker, so a batch carried across calls does not count the
    time between them; a receipt from a worker before worker_started_ms
    (0) counts as one run; insane figures add nothing. */
#include "support.h"
#include <math.h>
#include <string.h>
#include "coordinator/report_timing.h"

static Ak__Receipt s_receipt (Ak__Device *dev, const char *worker, uint64_t run, uint64_t start, uint64_t end,
                              double sampled)
{
    Ak__Receipt r = AK__RECEIPT__INIT;
    r.worker_id = (char *) worker;
    r.device = dev;
    r.worker_started_ms = run;
    r.started_at_ms = start;
    r.finished_at_ms = end;
    r.sampled_ms = sampled;
    r.compile_ms = 5;
    r.gate_ms = 2;
    r.timing_ms = sampled + 1;
    return r;
}

static double s_num (json_t *j, const char *key)
{
    return json_number_value (json_object_get (j, key));
}

/* One device, two runs of its worker two hours apart: the wall time is the
   two runs' spans, not the first task's start to the last one's end. */
static void test_runs_apart (void **state)
{
    (void) state;
    Ak__Device d0 = AK__DEVICE__INIT;
    d0.index = 0;
    ak_rtiming_t a;
    memset (&a, 0, sizeof a);
    const uint64_t t0 = 1796307798000ull, gap = 2ull * 3600 * 1000;
    Ak__Receipt r[] = {
        s_receipt (&d0, "carry-w1", t0 - 500, t0, t0 + 400, 300),
        s_receipt (&d0, "carry-w1", t0 - 500, t0 + 500, t0 + 1000, 300),
        s_receipt (&d0, "carry-w1", t0 + gap, t0 + gap + 100, t0 + gap + 600, 400),
        s_receipt (&d0, "carry-w1", t0 + gap, t0 + gap + 700, t0 + gap + 1100, 200),
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        ak_rtiming_add (&a, &r[i]);
    ak_rtiming_add (&a, NULL);
    json_t *j = ak_rtiming_json (&a);
    assert_true (fabs (s_num (j, "device_wall_ms") - (1000 + 1000)) < 1e-9);
    assert_true (fabs (s_num (j, "task_ms") - (400 + 500 + 500 + 400)) < 1e-9);
    assert_true (fabs (s_num (j, "sampled_ms") - 1200) < 1e-9);
    assert_true (fabs (s_num (j, "share") - 1200.0 / 2000) < 1e-9);
    assert_true (fabs (s_num (j, "share_of_task_time") - 1200.0 / 1800) < 1e-9);
    assert_int_equal ((int) s_num (j, "devices"), 1);
    assert_int_equal ((int) s_num (j, "device_runs"), 2);
    assert_true (fabs (a.phases[0] - 20) < 1e-9 && fabs (a.phases[1] - 8) < 1e-9);
    assert_null (a.spans);
    json_decref (j);
}

/* Two devices of one worker, one of another, receipts without a run (an
   older worker: 0), and receipts whose figures are not sane. */
static void test_devices_and_insane (void **state)
{
    (void) state;
    Ak__Device d0 = AK__DEVICE__INIT, d1 = AK__DEVICE__INIT;
    d0.index = 0;
    d1.index = 1;
    ak_rtiming_t a;
    memset (&a, 0, sizeof a);
    Ak__Receipt r[] = {
        s_receipt (&d0, "w1", 0, 1000, 2000, 100),
        s_receipt (&d0, "w1", 0, 5000, 6000, 100),       /* same run: the span grows to 1000..6000 */
        s_receipt (&d1, "w1", 0, 1000, 1500, 100),
        s_receipt (&d0, "w2", 0, 1000, 1200, 100),
        s_receipt (&d0, "w2", 0, 3000, 2000, NAN),       /* ends before it starts: no wall time */
        s_receipt (NULL, "w3", 0, 0, 2000, -5),           /* no start: no wall time */
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        ak_rtiming_add (&a, &r[i]);
    json_t *j = ak_rtiming_json (&a);
    assert_true (fabs (s_num (j, "device_wall_ms") - (5000 + 500 + 200)) < 1e-9);
    assert_true (fabs (s_num (j, "sampled_ms") - 400) < 1e-9);
    assert_int_equal ((int) s_num (j, "devices"), 3);
    assert_int_equal ((int) s_num (j, "device_runs"), 3);
    json_decref (j);

    /* Nothing at all: no share to state. */
    memset (&a, 0, sizeof a);
    j = ak_rtiming_json (&a);
    assert_true (json_is_null (json_object_get (j, "share")));
    assert_true (json_is_null (json_object_get (j, "share_of_task_time")));
    json_decref (j);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_runs_apart),
        cmocka_unit_test (test_devices_and_insane),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
