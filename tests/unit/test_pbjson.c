/*  tests/unit/test_pbjson.c: protobuf-c messages as JSON. */
#include "support.h"
#include "pbjson.h"
#include "akfleet.pb-c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_receipt (void **state)
{
    (void) state;
    Ak__Device dev = AK__DEVICE__INIT;
    dev.name = "H200";
    dev.cc_major = 9;
    dev.mem_bytes = 150000000000ull;
    Ak__Param p0 = AK__PARAM__INIT, p1 = AK__PARAM__INIT;
    p0.name = "BLOCK";
    p0.value = 256;
    p1.name = "SHIFT";
    p1.value = -3;
    Ak__Param *params[] = { &p0, &p1 };
    Ak__GateResult g = AK__GATE_RESULT__INIT;
    g.stage = "smoke";
    g.passed = 1;
    g.worst_err = NAN;
    Ak__GateResult *gates[] = { &g };
    int64_t dims[] = { 1024, 4096 };
    Ak__Workload wl = AK__WORKLOAD__INIT;
    wl.name = "w";
    wl.n_dims = 2;
    wl.dims = dims;
    wl.weight = 1.5;
    Ak__Stats cand = AK__STATS__INIT;
    cand.n = 10;
    cand.median_us = 12.25;
    Ak__WorkloadTiming t = AK__WORKLOAD_TIMING__INIT;
    t.workload = &wl;
    t.candidate = &cand;
    t.speedup = INFINITY;
    Ak__WorkloadTiming *timings[] = { &t };
    Ak__Receipt rec = AK__RECEIPT__INIT;
    rec.receipt_id = "R1";
    rec.task_id = "B1.7";
    rec.status = "ok";
    rec.reason = "bad \xff byte";
    rec.device = &dev;
    rec.n_params = 2;
    rec.params = params;
    rec.n_gates = 1;
    rec.gates = gates;
    rec.n_timings = 1;
    rec.timings = timings;
    rec.started_at_ms = 18446744073709551615ull;
    rec.finished_at_ms = 1796063473123ull;

    json_t *j = ak_pb_to_json (&rec.base);
    assert_non_null (j);
    assert_true (json_is_object (j));
    assert_string_equal (json_string_value (json_object_get (j, "receipt_id")), "R1");
    /* Zero scalars and empty strings are present. */
    assert_true (json_is_integer (json_object_get (j, "attempt")));
    assert_int_equal (json_integer_value (json_object_get (j, "attempt")), 0);
    assert_string_equal (json_string_value (json_object_get (j, "host")), "");
    assert_true (json_is_false (json_object_get (j, "duplicate")));
    assert_true (json_is_real (json_object_get (j, "compile_ms")));
    /* Invalid UTF-8 is replaced, not dropped. */
    assert_string_equal (json_string_value (json_object_get (j, "reason")), "bad \xef\xbf\xbd byte");
    /* uint64 beyond int64 becomes a decimal string; the rest are integers. */
    assert_string_equal (json_string_value (json_object_get (j, "started_at_ms")),
                         "18446744073709551615");
    assert_true (json_integer_value (json_object_get (j, "finished_at_ms")) == 1796063473123LL);

    json_t *d = json_object_get (j, "device");
    assert_true (json_is_object (d));
    assert_string_equal (json_string_value (json_object_get (d, "name")), "H200");
    assert_int_equal (json_integer_value (json_object_get (d, "cc_major")), 9);
    assert_true (json_integer_value (json_object_get (d, "mem_bytes")) == 150000000000LL);

    json_t *ps = json_object_get (j, "params");
    assert_true (json_is_array (ps));
    assert_int_equal (json_array_size (ps), 2);
    assert_int_equal (json_integer_value (json_object_get (json_array_get (ps, 1), "value")), -3);

    json_t *gs = json_object_get (j, "gates");
    assert_true (json_is_null (json_object_get (json_array_get (gs, 0), "worst_err")));
    assert_true (json_is_true (json_object_get (json_array_get (gs, 0), "passed")));

    json_t *ts = json_array_get (json_object_get (j, "timings"), 0);
    assert_true (json_is_null (json_object_get (ts, "speedup")));
    assert_true (json_is_null (json_object_get (ts, "baseline")));     /* unset sub-message */
    json_t *w = json_object_get (ts, "workload");
    assert_int_equal (json_array_size (json_object_get (w, "dims")), 2);
    assert_int_equal (json_integer_value (json_array_get (json_object_get (w, "dims"), 1)), 4096);
    assert_true (json_real_value (json_object_get (w, "weight")) == 1.5);
    assert_true (json_real_value (json_object_get (json_object_get (ts, "candidate"),
                                                   "median_us")) == 12.25);
    /* Empty repeated fields are empty arrays. */
    assert_int_equal (json_array_size (json_object_get (w, "dims")), 2);

    /* Every field of the descriptor is present. */
    assert_int_equal (json_object_size (j), ak__receipt__descriptor.n_fields);

    /* It serialises. */
    char *text = json_dumps (j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null (text);
    assert_non_null (strstr (text, "\"stage\":\"smoke\""));
    free (text);
    json_decref (j);
}

static void test_oneof_and_empty (void **state)
{
    (void) state;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Ack ack = AK__ACK__INIT;
    ack.task_id = "B1.7";
    env.version = 1;
    env.body_case = AK__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    json_t *j = ak_pb_to_json (&env.base);
    assert_non_null (j);
    /* version, seq and only the set case of the oneof. */
    assert_int_equal (json_object_size (j), 3);
    assert_true (json_is_object (json_object_get (j, "ack")));
    assert_null (json_object_get (j, "hello"));
    assert_string_equal (json_string_value (json_object_get (json_object_get (j, "ack"), "task_id")),
                         "B1.7");
    json_decref (j);

    Ak__Envelope none = AK__ENVELOPE__INIT;
    j = ak_pb_to_json (&none.base);
    assert_int_equal (json_object_size (j), 2);
    json_decref (j);

    Ak__Hello hello = AK__HELLO__INIT;
    j = ak_pb_to_json (&hello.base);
    assert_true (json_is_array (json_object_get (j, "backends")));
    assert_int_equal (json_array_size (json_object_get (j, "backends")), 0);
    assert_true (json_is_array (json_object_get (j, "devices")));
    json_decref (j);

    assert_null (ak_pb_to_json (NULL));
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_receipt),
        cmocka_unit_test (test_oneof_and_empty),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
