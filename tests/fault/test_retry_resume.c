/*  tests/fault/test_retry_resume.c: the operator's recovery verbs on a
    live coordinator, through the akctl binary, with in-test workers that
    fail some tasks, hold others silently, die or register again.

    1. retry --failed: failed tasks (wrong_answer, timeout) and poisoned
       ones (their worker died with max_attempts 1) are queued again with
       a new attempt and a fresh budget; the complete batch opens again and
       completes again with its winners decided anew; a copy of an old
       failed receipt that arrives after the retry is stored as a duplicate
       (each (task, attempt) is accepted once); a second retry does nothing;
       retry without --failed is a usage error.
    2. resume: leases a worker dropped (it registered again without them)
       are taken back at once and run elsewhere; tasks running on live
       workers are left alone; a second resume does nothing.  cancel is
       idempotent, and retry on a cancelled batch is refused. */
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "envelope.h"
#include "util.h"

static ak_fault_coord_t *s_c;

static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 60);
    return 0;
}

static ak_fault_coord_t *s_coord (const char *tag)
{
    const char *flags[] = { "--heartbeat-ms", "200", "--liveness", "3", "--commit-ms", "5",
                            "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new (tag, NULL, flags);
    ak_fault_coord_start (c);
    return c;
}

/* akctl ARGS --json; its answer (exit code checked against want). */
static json_t *s_akctl (ak_fault_coord_t *c, int want, const char *fmt, const char *batch)
{
    char *args = ak_sprintf (fmt, batch);
    char *out = NULL;
    int rc = ak_fault_akctl (c, args, &out);
    if (rc != want)
        fail_msg ("akctl %s: exit %d, expected %d: %s", args, rc, want, out ? out : "");
    json_t *j = NULL;
    if (want == 0) {
        json_error_t jerr;
        j = json_loads (out, 0, &jerr);
        if (!j)
            fail_msg ("akctl %s: not JSON: %s", args, out);
    }
    free (out);
    free (args);
    return j;
}

static int64_t s_param (const Ak__Assign *a)
{
    return a->n_params ? a->params[0]->value : 0;
}

/* First round: P=3 and P=7 give wrong answers, P=5 times out. */
static const char *s_first_round (const Ak__Assign *a, void *arg)
{
    int64_t p = s_param (a);
    if (a->attempt == 1 && (p == 3 || p == 7))
        return "wrong_answer";
    if (a->attempt == 1 && p == 5)
        return "timeout";
    return "ok";
}

/* Holds whatever it is given and never answers. */
static const char *s_mute (const Ak__Assign *a, void *arg)
{
    return NULL;
}

typedef struct {
    ak_fault_coord_t *c;
    const char       *batch;
    const char       *state;
} s_wait_t;

static bool s_batch_is (void *arg)
{
    s_wait_t *w = arg;
    char buf[32];
    return strcmp (ak_fault_batch_state (w->c, w->batch, buf, sizeof buf), w->state) == 0;
}

static json_t *s_task (ak_fault_coord_t *c, const char *task_id)
{
    json_t *show = ak_fault_json (c, "show", task_id, NULL);
    json_t *t = json_incref (json_object_get (show, "task"));
    json_decref (show);
    return t;
}

static void test_retry_failed (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-retry");
    char *bundle = ak_fault_stub_bundle (c->dir, "retry", 10, "\"lease_ms\": 20000, \"max_attempts\": 1");
    char *batch = ak_fault_submit (c, bundle);

    /* a worker takes two tasks (the first two of the queue: the preflight
       and P=1) and dies: with max_attempts 1 they are poisoned */
    ak_fault_sim_t *doomed = ak_fault_sim_new (c->workers, 1, "doomed", 200);
    ak_fault_sim_set_status (doomed, s_mute, NULL);
    ak_fault_sim_run (doomed, 300, NULL, NULL);
    ak_fault_sim_destroy (&doomed);
    uint64_t until = ak_fault_now_ms () + 10000;
    while (ak_fault_count (c, batch, "poisoned") < 2 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (50);
    assert_int_equal (ak_fault_count (c, batch, "poisoned"), 2);

    /* the rest: three failures */
    ak_fault_sim_t *sim = ak_fault_sim_new (c->workers, 2, "sim", 5000);
    ak_fault_sim_set_status (sim, s_first_round, NULL);
    s_wait_t w = { c, batch, "complete" };
    ak_fault_sim_run (sim, 20000, s_batch_is, &w);
    assert_true (s_batch_is (&w));
    assert_int_equal (ak_fault_count (c, batch, "failed"), 3);
    assert_int_equal (ak_fault_count (c, batch, "done"), 6);
    json_t *st = ak_fault_json (c, "status", batch, NULL);
    int64_t finished1 = json_integer_value (json_object_get (st, "finished_ms"));
    assert_int_equal (json_array_size (json_object_get (st, "winners")), 1);
    json_decref (st);
    json_t *t = s_task (c, "B000001.0004");             /* P=3 */
    assert_string_equal (json_string_value (json_object_get (t, "status")), "wrong_answer");
    json_decref (t);

    /* retry needs to be told what */
    s_akctl (c, 2, "retry %s", batch);
    json_t *r = s_akctl (c, 0, "retry %s --failed --json", batch);
    json_t *retried = json_object_get (r, "retried");
    assert_int_equal (json_array_size (retried), 5);
    assert_true (json_is_true (json_object_get (r, "reopened")));
    json_t *sum = json_object_get (r, "batch");
    assert_string_equal (json_string_value (json_object_get (sum, "state")), "open");
    assert_int_equal (json_array_size (json_object_get (sum, "winners")), 0);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (sum, "counts"), "queued")), 5);
    size_t i;
    json_t *e;
    int poisoned = 0, failed = 0;
    json_array_foreach (retried, i, e) {
        poisoned += strcmp (json_string_value (json_object_get (e, "was")), "poisoned") == 0;
        failed += strcmp (json_string_value (json_object_get (e, "was")), "failed") == 0;
        assert_int_equal (json_integer_value (json_object_get (e, "attempt")),
                          json_integer_value (json_object_get (e, "from_attempt")) + 1);
    }
    assert_int_equal (poisoned, 2);
    assert_int_equal (failed, 3);
    json_decref (r);
    /* (the idle workers may have been assigned it already) */
    t = s_task (c, "B000001.0004");
    const char *ts = json_string_value (json_object_get (t, "state"));
    assert_true (strcmp (ts, "queued") == 0 || strcmp (ts, "leased") == 0);
    assert_int_equal (json_integer_value (json_object_get (t, "attempt")), 2);
    assert_string_equal (json_string_value (json_object_get (t, "receipt_id")), "");
    json_decref (t);

    /* idempotent: nothing failed is left */
    r = s_akctl (c, 0, "retry %s --failed --json", batch);
    assert_int_equal (json_array_size (json_object_get (r, "retried")), 0);
    json_decref (r);

    /* a copy of P=3's old failed receipt arrives now from a worker that
       never held it: refused, never stored (docs/protocol.md) */
    zsock_t *late = zsock_new (ZMQ_DEALER);
    zsock_set_linger (late, 0);
    assert_int_equal (zsock_connect (late, "%s", c->workers), 0);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dev = AK__DEVICE__INIT, *devs[1] = { &dev };
    dev.backend = "host";
    dev.device_class = "elsewhere";
    h.worker_id = "late-1";
    h.host = "test";
    h.devices = devs;
    h.n_devices = 1;
    h.slots = 1;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    assert_int_equal (ak_envelope_send (late, NULL, 0, &env), 0);
    Ak__Receipt copy = AK__RECEIPT__INIT;
    copy.task_id = "B000001.0004";
    copy.attempt = 1;
    copy.status = "ok";                                  /* even a better verdict */
    Ak__Envelope renv = AK__ENVELOPE__INIT;
    renv.body_case = AK__ENVELOPE__BODY_RECEIPT;
    renv.receipt = &copy;
    assert_int_equal (ak_envelope_send (late, NULL, 0, &renv), 0);
    bool acked = false;
    until = ak_fault_now_ms () + 5000;
    while (!acked && ak_fault_now_ms () < until) {
        zmq_pollitem_t item = { zsock_resolve (late), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 100) <= 0)
            continue;
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        assert_true (zmq_msg_recv (&msg, zsock_resolve (late), 0) >= 0);
        Ak__Envelope *m = NULL;
        ak_err_t err = { 0 };
        assert_int_equal (ak_envelope_unpack (zmq_msg_data (&msg), zmq_msg_size (&msg), AK_MAX_MSG_SIZE,
                                              &m, &err), 0);
        zmq_msg_close (&msg);
        if (m->body_case == AK__ENVELOPE__BODY_ACK) {
            assert_string_equal (m->ack->task_id, "B000001.0004");
            assert_non_null (strstr (m->ack->refused, "the task is at attempt 2"));
            assert_string_equal (m->ack->receipt_id, "");
            acked = true;
        }
        ak_envelope_free (&m);
    }
    zsock_destroy (&late);
    assert_true (acked);
    t = s_task (c, "B000001.0004");
    ts = json_string_value (json_object_get (t, "state"));
    assert_true (strcmp (ts, "queued") == 0 || strcmp (ts, "leased") == 0);
    json_decref (t);

    /* second round: everything passes; the batch completes again */
    ak_fault_sim_run (sim, 20000, s_batch_is, &w);
    assert_true (s_batch_is (&w));
    assert_int_equal (ak_fault_count (c, batch, "done"), 11);
    st = ak_fault_json (c, "status", batch, NULL);
    assert_int_equal (json_array_size (json_object_get (st, "winners")), 1);
    assert_true (json_integer_value (json_object_get (st, "finished_ms")) >= finished1);
    json_decref (st);
    json_t *show = ak_fault_json (c, "show", "B000001.0004", NULL);
    t = json_object_get (show, "task");
    assert_string_equal (json_string_value (json_object_get (t, "state")), "done");
    assert_string_equal (json_string_value (json_object_get (t, "status")), "ok");
    assert_int_equal (json_integer_value (json_object_get (t, "attempt")), 2);
    json_t *rs = json_object_get (show, "receipts");
    assert_int_equal (json_array_size (rs), 2);          /* failed #1, ok #2: the copy was refused */
    int ndup = 0;
    json_array_foreach (rs, i, e)
        ndup += json_is_true (json_object_get (e, "duplicate"));
    assert_int_equal (ndup, 0);
    assert_string_equal (json_string_value (json_object_get (t, "receipt_id")),
                         json_string_value (json_object_get (json_array_get (rs, 1), "receipt_id")));
    json_decref (show);
    fprintf (stderr, "retry: 3 failed + 2 poisoned re-run, the batch completed again, the late copy "
             "from another worker was refused\n");
    ak_fault_sim_destroy (&sim);
    free (batch);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
}

static void test_resume_and_cancel (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-resume");
    char *bundle = ak_fault_stub_bundle (c->dir, "resume", 20, "\"lease_ms\": 60000, \"max_attempts\": 5");
    char *batch = ak_fault_submit (c, bundle);

    /* "holder" takes two tasks and keeps them silently, then registers
       again without them: a worker that lost what it held gives it back at
       once (attempt 2), and it is handed two tasks again */
    ak_fault_sim_t *holder = ak_fault_sim_new (c->workers, 1, "holder", 5000);
    ak_fault_sim_set_status (holder, s_mute, NULL);
    uint64_t until;
    ak_fault_sim_run (holder, 300, NULL, NULL);
    assert_int_equal (ak_fault_count (c, batch, "leased"), 2);
    int64_t requeued = ak_fault_stat (c, "requeued", NULL);
    ak_fault_sim_rehello (holder);
    ak_fault_sim_run (holder, 300, NULL, NULL);
    assert_int_equal (ak_fault_stat (c, "requeued", NULL) - requeued, 2);
    assert_int_equal (ak_fault_count (c, batch, "leased"), 2);
    json_t *r = s_akctl (c, 0, "resume %s --json", batch);
    assert_int_equal (json_array_size (json_object_get (r, "requeued")), 0);
    assert_int_equal (json_integer_value (json_object_get (r, "running")), 2);
    json_decref (r);

    /* a restart: the leases stay with holder, which stays silent: resume
       takes them back instead of waiting for their lease */
    ak_fault_coord_kill (c, SIGKILL);
    ak_fault_coord_start (c);
    r = s_akctl (c, 0, "resume %s --json", batch);
    assert_int_equal (json_array_size (json_object_get (r, "requeued")), 2);
    assert_int_equal (json_integer_value (json_object_get (r, "running")), 0);
    json_t *first = json_array_get (json_object_get (r, "requeued"), 0);
    assert_int_equal (json_integer_value (json_object_get (first, "attempt")), 3);
    json_decref (r);
    r = s_akctl (c, 0, "resume %s --json", batch);
    assert_int_equal (json_array_size (json_object_get (r, "requeued")), 0);
    json_decref (r);
    char *out = NULL;
    char *args = ak_sprintf ("resume %s", batch);
    assert_int_equal (ak_fault_akctl (c, args, &out), 0);
    assert_non_null (strstr (out, "no lease to take back"));
    free (out);
    free (args);

    /* holder registers again (its HELLO lists what it sat on: no longer
       its own, refused) and is handed two tasks; the taken-back tasks run
       elsewhere while holder sits on those two */
    until = ak_fault_now_ms () + 10000;
    while (ak_fault_count (c, batch, "leased") < 2 && ak_fault_now_ms () < until)
        ak_fault_sim_run (holder, 100, NULL, NULL);
    assert_int_equal (ak_fault_count (c, batch, "leased"), 2);
    ak_fault_sim_t *sim = ak_fault_sim_new (c->workers, 2, "sim", 5000);
    until = ak_fault_now_ms () + 20000;
    while (ak_fault_count (c, batch, "done") < 19 && ak_fault_now_ms () < until) {
        ak_fault_sim_run (sim, 100, NULL, NULL);
        ak_fault_sim_run (holder, 20, NULL, NULL);      /* alive, silent on its tasks */
    }
    assert_int_equal (ak_fault_count (c, batch, "done"), 19);
    assert_int_equal (ak_fault_count (c, batch, "leased"), 2);

    /* cancel while two still run: they are cancelled, twice is harmless */
    r = s_akctl (c, 0, "cancel %s --json", batch);
    assert_string_equal (json_string_value (json_object_get (r, "state")), "cancelled");
    assert_int_equal (json_integer_value (json_object_get (json_object_get (r, "counts"), "cancelled")), 2);
    json_decref (r);
    r = s_akctl (c, 0, "cancel %s --json", batch);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (r, "counts"), "cancelled")), 2);
    assert_int_equal (json_integer_value (json_object_get (json_object_get (r, "counts"), "done")), 19);
    json_decref (r);
    s_akctl (c, 1, "retry %s --failed", batch);
    r = s_akctl (c, 0, "resume %s --json", batch);
    assert_int_equal (json_array_size (json_object_get (r, "requeued")), 0);
    json_decref (r);
    s_akctl (c, 4, "resume B000099%s", "");

    ak_fault_sim_destroy (&holder);
    ak_fault_sim_destroy (&sim);
    int status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.accepted, 19);
    free (batch);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_retry_failed, s_teardown),
        cmocka_unit_test_teardown (test_resume_and_cancel, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
