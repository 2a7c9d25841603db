/*  tests/fault/test_integrity.c: what a worker may do, against a real
    akcoord, with raw workers that misbehave on purpose (issue 15).

    1. Receipts are bound to an assignment: a second worker id listing
       another's running task in HELLO does not take its lease; a receipt
       for a queued, never-assigned task is refused; a forged receipt from
       another worker is refused and never becomes the winner.  Each
       refusal is counted (stats: security) and answered with an ACK that
       says so, nothing stored.
    2. HELLO limits: more than 16 devices, or a HELLO too large, is
       refused; `workers` answers in pages, however many workers there are.
    3. Leases survive restarts without being renewed: a started lease
       runs out on time although the coordinator restarts more often than
       lease_ms; a worker that registers again without a task it held gives
       it back at once.
    4. A receipt keeps its worker's slot until its commit holds unless the
       store can be trusted to take it (its commits succeed and its map has
       room, ak_intake_room): with the store full, no task is handed out
       on the strength of receipts that were not stored, and every task of
       the failed commits stays with its worker; with a sound store, a
       worker of one slot gets its next task as soon as its receipt is
       staged, before the commit (--commit-ms 1500) and its ACK.
    5. One process per worker id, without keys too: a second worker with
       the id of a live one (another host, or another pid on its host while
       it heartbeats) is refused with DISCONNECT_ID_TAKEN, naming the
       holder; the holder keeps its registration and its lease and delivers
       its receipt; its own reconnect (same host and pid, a new socket) is
       no refusal; once it is gone the id is free. */
#include "fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "envelope.h"
#include "receipt_limits.h"
#include "util.h"

static ak_fault_coord_t *s_c;

static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 60);
    return 0;
}

static ak_fault_coord_t *s_coord (const char *tag, const char *const *more)
{
    const char *flags[16] = { "--heartbeat-ms", "250", "--commit-ms", "5", "--log-level", "info" };
    int n = 6;
    for (int i = 0; more && more[i] && n < 15; i++)
        flags[n++] = more[i];
    flags[n] = NULL;
    ak_fault_coord_t *c = s_c = ak_fault_coord_new (tag, NULL, flags);
    ak_fault_coord_start (c);
    return c;
}

static int64_t s_security (ak_fault_coord_t *c, const char *key)
{
    return ak_fault_stat (c, "security", key);
}

/* show TASK's record: a field as a string ("" when absent). */
static char *s_task_field (ak_fault_coord_t *c, const char *task_id, const char *field)
{
    json_t *show = ak_fault_json (c, "show", task_id, NULL);
    json_t *v = json_object_get (json_object_get (show, "task"), field);
    char *out = json_is_string (v) ? ak_strdup (json_string_value (v))
              : json_is_integer (v) ? ak_sprintf ("%lld", (long long) json_integer_value (v)) : ak_strdup ("");
    json_decref (show);
    return out;
}

static void s_expect_field (ak_fault_coord_t *c, const char *task_id, const char *field, const char *want)
{
    char *got = s_task_field (c, task_id, field);
    if (strcmp (got, want) != 0)
        fail_msg ("task %s: %s is '%s', expected '%s'", task_id, field, got, want);
    free (got);
}

/* A raw worker of one host slot registered as worker_id on c; *first its first task. */
static zsock_t *s_one_slot (ak_fault_coord_t *c, const char *worker_id, Ak__Envelope **first)
{
    zsock_t *w = ak_fault_raw_new (c->workers);
    ak_fault_raw_hello (w, worker_id, "host", 1, 0, NULL, 0);
    *first = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ASSIGN, 10000);
    assert_non_null (*first);
    return w;
}

/* The ACK for a receipt of w: refused (why contains `why`) or not. */
static void s_expect_ack (zsock_t *w, const char *task_id, const char *why)
{
    Ak__Envelope *e = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ACK, 10000);
    if (!e)
        fail_msg ("no ACK for the receipt of %s", task_id);
    assert_string_equal (e->ack->task_id, task_id);
    if (why) {
        if (!strstr (e->ack->refused, why))
            fail_msg ("receipt of %s: refused '%s', expected '%s'", task_id, e->ack->refused, why);
        assert_string_equal (e->ack->receipt_id, "");
    }
    else {
        assert_string_equal (e->ack->refused, "");
        assert_false (e->ack->duplicate);
        assert_true (strlen (e->ack->receipt_id) > 0);
    }
    ak_envelope_free (&e);
}

/*  The stored receipt's ACK for task_id and w's next task, in either
    order (a receipt staged while the store has room frees its slot before
    its commit, so the ASSIGN usually comes first); returns the ASSIGN. */
static Ak__Envelope *s_expect_ack_and_next (zsock_t *w, const char *task_id)
{
    Ak__Envelope *next = NULL;
    bool acked = false;
    while (!acked || !next) {
        Ak__Envelope *e = ak_fault_raw_next (w, 10000);
        if (!e)
            fail_msg ("receipt of %s: %s", task_id, acked ? "no next ASSIGN" : "no ACK");
        if (e->body_case == AK__ENVELOPE__BODY_ASSIGN && !next) {
            next = e;
            continue;
        }
        if (e->body_case != AK__ENVELOPE__BODY_ACK || acked)
            fail_msg ("receipt of %s: an unexpected %s", task_id, ak_envelope_kind (e));
        assert_string_equal (e->ack->task_id, task_id);
        assert_string_equal (e->ack->refused, "");
        assert_true (strlen (e->ack->receipt_id) > 0);
        acked = true;
        ak_envelope_free (&e);
    }
    return next;
}

// ------------------------------------------------------- 1. bound receipts

static void test_forged_receipts_refused (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-forged", NULL);
    char *bundle = ak_fault_stub_bundle (c->dir, "forged", 1, "\"lease_ms\": 60000");
    char *batch = ak_fault_submit (c, bundle);

    Ak__Envelope *a1 = NULL;
    zsock_t *real = s_one_slot (c, "real-1", &a1);
    const char *t1 = a1->assign->task_id;
    char *t2 = ak_sprintf ("%s.0002", batch);
    assert_string_not_equal (t1, t2);

    /* a worker of a class nothing runs on lists real-1's task as its own */
    zsock_t *evil = ak_fault_raw_new (c->workers);
    Ak__TaskRef ref = AK__TASK_REF__INIT, *refs[1] = { &ref };
    ref.task_id = (char *) t1;
    ref.attempt = 1;
    ak_fault_raw_hello (evil, "evil-1", "nothing-runs-here", 1, 0, refs, 1);
    Ak__Envelope *hb = ak_fault_raw_expect (evil, AK__ENVELOPE__BODY_HEARTBEAT, 10000);
    assert_non_null (hb);
    ak_envelope_free (&hb);
    assert_int_equal (s_security (c, "claims_refused"), 1);
    s_expect_field (c, t1, "state", "leased");
    s_expect_field (c, t1, "worker_id", "real-1");

    /* its forged receipt for that task, and one for a task never assigned */
    ak_fault_raw_receipt (evil, a1->assign, 1, 3.0, 0);
    s_expect_ack (evil, t1, "held by real-1");
    Ak__Assign fake = *a1->assign;
    fake.task_id = t2;
    fake.kind = "tune";
    ak_fault_raw_receipt (evil, &fake, 1, 3.0, 0);
    s_expect_ack (evil, t2, "never assigned");
    s_expect_field (c, t2, "state", "queued");
    assert_int_equal (s_security (c, "receipts_refused"), 2);

    /* the real worker delivers both; evil forges the tune at 3x first */
    ak_fault_raw_started (real, t1, 1);
    ak_fault_raw_receipt (real, a1->assign, 1, 1.0, 0);
    Ak__Envelope *a2 = s_expect_ack_and_next (real, t1);
    assert_string_equal (a2->assign->task_id, t2);
    ak_fault_raw_started (real, t2, 1);
    ak_fault_raw_receipt (evil, a2->assign, 1, 3.0, 0);
    s_expect_ack (evil, t2, "held by real-1");
    ak_fault_raw_receipt (real, a2->assign, 1, 1.0, 0);
    s_expect_ack (real, t2, NULL);
    assert_int_equal (s_security (c, "receipts_refused"), 3);

    /* the batch's verdict is the real worker's: no 3x winner */
    ak_fault_wait_complete (c, batch, 30000);
    json_t *st = ak_fault_json (c, "status", batch, NULL);
    json_t *winners = json_object_get (st, "winners");
    for (size_t i = 0; i < json_array_size (winners); i++) {
        json_t *w = json_array_get (winners, i);
        assert_false (json_is_true (json_object_get (w, "promoted")));
        assert_true (json_real_value (json_object_get (w, "speedup")) < 1.5);
    }
    json_decref (st);
    json_t *rs = ak_fault_json (c, "receipts", batch, NULL);
    json_t *arr = json_object_get (rs, "receipts");
    assert_int_equal (json_array_size (arr), 2);
    for (size_t i = 0; i < json_array_size (arr); i++)
        assert_string_equal (json_string_value (json_object_get (json_array_get (arr, i), "worker_id")), "real-1");
    json_decref (rs);
    assert_true (ak_fault_akctl (c, "stats", NULL) == 0);
    fprintf (stderr, "forged: a foreign claim and 3 forged receipts refused, counted; the real worker's "
             "verdict stands\n");

    ak_envelope_free (&a1);
    ak_envelope_free (&a2);
    zsock_destroy (&evil);
    zsock_destroy (&real);
    int status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.receipts, 2);
    assert_int_equal (tally.accepted, 2);
    free (t2);
    free (batch);
    free (bundle);
}

// ------------------------------------------------------------ 2. HELLO limits

/* The next DISCONNECT of w within 10 s, whose reason must hold why: its code. */
static int s_expect_disconnect (zsock_t *w, const char *why)
{
    Ak__Envelope *e = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_DISCONNECT, 10000);
    if (!e)
        fail_msg ("no DISCONNECT (expected: %s)", why);
    if (!strstr (e->disconnect->reason, why))
        fail_msg ("DISCONNECT '%s', expected '%s'", e->disconnect->reason, why);
    int code = (int) e->disconnect->code;
    ak_envelope_free (&e);
    return code;
}

static void test_hello_limits_and_paged_workers (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-hello", NULL);
    zsock_t *w = ak_fault_raw_new (c->workers);

    /* 17 devices: more than a host has */
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dev[17], *devs[17];
    for (int i = 0; i < 17; i++) {
        ak__device__init (&dev[i]);
        dev[i].backend = "host";
        dev[i].device_class = "host";
        dev[i].slots = 1;
        devs[i] = &dev[i];
    }
    h.worker_id = "many-devices";
    h.host = "fault-test";
    h.devices = devs;
    h.n_devices = 17;
    h.slots = 17;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    assert_int_equal (ak_envelope_send (w, NULL, 0, &env), 0);
    s_expect_disconnect (w, "17 devices (must be 1..16)");

    /* 16 devices, but a HELLO of 40 KB */
    char *host = ak_calloc (1, 40001);
    memset (host, 'h', 40000);
    h.n_devices = 16;
    h.slots = 16;
    h.worker_id = "big-hello";
    h.host = host;
    assert_int_equal (ak_envelope_send (w, NULL, 0, &env), 0);
    s_expect_disconnect (w, "without its running list (at most 16384)");
    free (host);
    assert_int_equal (ak_fault_stat (c, "workers_known", NULL), 0);

    /* 25 workers: `workers` answers 10 at a time, "next" leads on */
    for (int i = 0; i < 25; i++) {
        char id[32];
        snprintf (id, sizeof id, "w-%02d", i);
        ak_fault_raw_hello (w, id, "host", 1, 0, NULL, 0);
    }
    uint64_t until = ak_fault_now_ms () + 10000;
    while (ak_fault_stat (c, "workers_known", NULL) < 25 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (50);
    assert_int_equal (ak_fault_stat (c, "workers_known", NULL), 25);
    char *after = NULL;
    int pages = 0, seen = 0;
    for (;;) {
        json_t *j = NULL;
        char *error = NULL;
        int rc = ak_fault_call (c, 10000, "workers", "10", after, NULL, &j, &error);
        if (rc)
            fail_msg ("workers: %d %s", rc, error ? error : "");
        free (error);
        json_t *arr = json_object_get (j, "workers");
        assert_true (json_array_size (arr) <= 10);
        seen += (int) json_array_size (arr);
        pages++;
        const char *next = json_string_value (json_object_get (j, "next"));
        free (after);
        after = next ? ak_strdup (next) : NULL;
        json_decref (j);
        if (!after)
            break;
        assert_true (pages < 10);
    }
    assert_int_equal (seen, 25);
    assert_int_equal (pages, 3);
    char *out = NULL;
    assert_int_equal (ak_fault_akctl (c, "workers --json", &out), 0);
    json_t *all = json_loads (out, 0, NULL);
    assert_non_null (all);
    assert_int_equal (json_array_size (json_object_get (all, "workers")), 25);
    json_decref (all);
    free (out);
    zsock_destroy (&w);
}

// ------------------------------------------------- 3. leases over restarts

static void test_lease_deadline_survives_restarts (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-lease-restarts", NULL);
    char *bundle = ak_fault_stub_bundle (c->dir, "leases", 1, "\"lease_ms\": 4000");
    char *batch = ak_fault_submit (c, bundle);
    Ak__Envelope *a = NULL;
    zsock_t *w = s_one_slot (c, "holder-1", &a);
    char *t1 = ak_strdup (a->assign->task_id);
    ak_fault_raw_started (w, t1, 1);
    ak_test_sleep_ms (300);                    /* the start is committed */
    ak_envelope_free (&a);
    zsock_destroy (&w);                         /* holder-1 is gone for good */

    /* restarts every ~second, more often than its 4 s lease: the lease
       still runs out on time (each start used to renew it) */
    uint64_t t0 = ak_fault_now_ms ();
    int restarts = 0;
    char *attempt = NULL;
    while (ak_fault_now_ms () < t0 + 25000) {
        ak_fault_coord_kill (c, SIGKILL);
        ak_fault_coord_start (c);
        restarts++;
        ak_test_sleep_ms (700);
        free (attempt);
        attempt = s_task_field (c, t1, "attempt");
        if (strcmp (attempt, "1") != 0)
            break;
    }
    fprintf (stderr, "leases: the started lease ran out after %d restarts, %llu ms\n", restarts,
             (unsigned long long) (ak_fault_now_ms () - t0));
    assert_string_equal (attempt, "2");
    char *why = s_task_field (c, t1, "last_error");
    assert_non_null (strstr (why, "lease expired"));
    free (why);
    free (attempt);
    free (t1);
    free (batch);
    free (bundle);
}

static void test_reregistering_without_a_task_releases_it (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-rereg", NULL);
    char *bundle = ak_fault_stub_bundle (c->dir, "rereg", 1, "\"lease_ms\": 60000");
    char *batch = ak_fault_submit (c, bundle);
    zsock_t *w = ak_fault_raw_new (c->workers);
    ak_fault_raw_hello (w, "holder-2", "host", 1, 1, NULL, 0);
    Ak__Envelope *a1 = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ASSIGN, 10000);
    Ak__Envelope *a2 = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ASSIGN, 10000);
    assert_non_null (a1);
    assert_non_null (a2);
    ak_fault_raw_started (w, a1->assign->task_id, 1);
    ak_test_sleep_ms (300);
    zsock_destroy (&w);

    /* a restart; holder-2 comes back holding only the first */
    ak_fault_coord_kill (c, SIGKILL);
    ak_fault_coord_start (c);
    s_expect_field (c, a2->assign->task_id, "state", "leased");
    w = ak_fault_raw_new (c->workers);
    Ak__TaskRef ref = AK__TASK_REF__INIT, *refs[1] = { &ref };
    ref.task_id = a1->assign->task_id;
    ref.attempt = 1;
    ak_fault_raw_hello (w, "holder-2", "host", 1, 1, refs, 1);
    /* the second goes back at once and, its slot free, comes again as attempt 2 */
    Ak__Envelope *again = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ASSIGN, 10000);
    assert_non_null (again);
    assert_string_equal (again->assign->task_id, a2->assign->task_id);
    assert_int_equal (again->assign->attempt, 2);
    char *why = s_task_field (c, a2->assign->task_id, "last_error");
    assert_non_null (strstr (why, "registered again without it"));
    free (why);
    /* the first stays, its lease not renewed */
    s_expect_field (c, a1->assign->task_id, "state", "leased");
    s_expect_field (c, a1->assign->task_id, "attempt", "1");
    json_t *ws = ak_fault_json (c, "workers", NULL, NULL);
    json_t *leases = json_object_get (json_array_get (json_object_get (ws, "workers"), 0), "leases");
    bool found = false;
    for (size_t i = 0; i < json_array_size (leases); i++) {
        json_t *l = json_array_get (leases, i);
        if (strcmp (json_string_value (json_object_get (l, "task_id")), a1->assign->task_id) == 0) {
            found = true;
            json_int_t left = json_integer_value (json_object_get (l, "expires_in_ms"));
            assert_true (left > 0 && left < 60000);
        }
    }
    assert_true (found);
    json_decref (ws);
    ak_envelope_free (&again);
    ak_envelope_free (&a1);
    ak_envelope_free (&a2);
    zsock_destroy (&w);
    free (batch);
    free (bundle);
}

// --------------------------------------------------- 4. a failed commit

static void test_failed_commit_keeps_slots (void **state)
{
    const char *more[] = { "--map-size", "1M", "--map-max", "1M", NULL };
    ak_fault_coord_t *c = s_coord ("fault-commit-slots", more);
    char *bundle = ak_fault_stub_bundle (c->dir, "slots", 60, "\"lease_ms\": 60000");
    char *batch = ak_fault_submit (c, bundle);
    zsock_t *w = ak_fault_raw_new (c->workers);
    ak_fault_raw_hello (w, "filler-1", "host", 32, 0, NULL, 0);

    /* 32 assigned; each receipt carries 60 KB: the 1 MiB map runs full */
    Ak__Envelope *as[32];
    for (int i = 0; i < 32; i++) {
        as[i] = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ASSIGN, 10000);
        assert_non_null (as[i]);
    }
    for (int i = 0; i < 32; i++) {
        ak_fault_raw_started (w, as[i]->assign->task_id, 1);
        ak_fault_raw_receipt (w, as[i]->assign, 1, 1.0, 60000);
    }
    /* count what comes back until the store-full DISCONNECT and 2 s after
       (the slots the stored receipts freed may be filled in the same
       wake-up, after the DISCONNECT went out) */
    int acks = 0, assigns = 0, disconnects = 0;
    uint64_t until = ak_fault_now_ms () + 15000;
    while (ak_fault_now_ms () < until) {
        zmq_pollitem_t item = { zsock_resolve (w), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 50) <= 0)
            continue;
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        assert_true (zmq_msg_recv (&msg, zsock_resolve (w), 0) >= 0);
        Ak__Envelope *e = NULL;
        ak_err_t err = { 0 };
        assert_int_equal (ak_envelope_unpack (zmq_msg_data (&msg), zmq_msg_size (&msg), AK_MAX_MSG_SIZE,
                                              &e, &err), 0);
        zmq_msg_close (&msg);
        if (e->body_case == AK__ENVELOPE__BODY_ACK && !*e->ack->refused)
            for (int i = 0; i < 32; i++)
                if (as[i] && strcmp (as[i]->assign->task_id, e->ack->task_id) == 0) {
                    ak_envelope_free (&as[i]);          /* stored: no longer the test's to check */
                    acks++;
                }
        assigns += e->body_case == AK__ENVELOPE__BODY_ASSIGN;
        if (e->body_case == AK__ENVELOPE__BODY_DISCONNECT && !disconnects++)
            until = ak_fault_now_ms () + 2000;
        ak_envelope_free (&e);
    }
    fprintf (stderr, "commit slots: %d acks, %d new assignments, %d DISCONNECTs\n", acks, assigns, disconnects);
    assert_true (disconnects >= 1);
    assert_true (ak_fault_stat (c, "store_full", NULL) >= 1);
    /* a slot comes free only with a receipt that was stored */
    assert_true (assigns <= acks);
    /* and every task whose receipt was not stored is still filler-1's,
       counted in its slots (`show` would commit first: the store is full) */
    json_t *ws = ak_fault_json (c, "workers", NULL, NULL);
    json_t *w0 = json_array_get (json_object_get (ws, "workers"), 0);
    assert_string_equal (json_string_value (json_object_get (w0, "worker_id")), "filler-1");
    assert_int_equal (json_integer_value (json_object_get (w0, "outstanding")), 32 - acks + assigns);
    json_t *leases = json_object_get (w0, "leases");
    for (int i = 0; i < 32; i++) {
        bool held = !as[i];
        for (size_t k = 0; as[i] && k < json_array_size (leases); k++)
            held |= strcmp (json_string_value (json_object_get (json_array_get (leases, k), "task_id")),
                            as[i]->assign->task_id) == 0;
        if (!held)
            fail_msg ("task %s: its receipt was not stored, and filler-1 no longer holds it",
                      as[i]->assign->task_id);
        ak_envelope_free (&as[i]);
    }
    json_decref (ws);
    zsock_destroy (&w);
    free (batch);
    free (bundle);
}

static void test_staged_receipt_frees_slot (void **state)
{
    (void) state;
    const char *more[] = { "--commit-ms", "1500", NULL };
    ak_fault_coord_t *c = s_coord ("fault-staged-slot", more);
    char *bundle = ak_fault_stub_bundle (c->dir, "staged", 4, "\"lease_ms\": 60000");
    char *batch = ak_fault_submit (c, bundle);
    Ak__Envelope *first = NULL;
    zsock_t *w = s_one_slot (c, "quick-1", &first);
    ak_fault_raw_started (w, first->assign->task_id, 1);
    const uint64_t t0 = ak_fault_now_ms ();
    ak_fault_raw_receipt (w, first->assign, 1, 1.0, 0);
    /* one slot, its receipt staged: the next task comes before the commit's ACK */
    Ak__Envelope *next = ak_fault_raw_next (w, 5000);
    assert_non_null (next);
    const uint64_t waited = ak_fault_now_ms () - t0;
    if (next->body_case != AK__ENVELOPE__BODY_ASSIGN || waited >= 1000)
        fail_msg ("after the receipt of %s: %s after %llu ms, want the next ASSIGN before the commit (1500 ms)",
                  first->assign->task_id, ak_envelope_kind (next), (unsigned long long) waited);
    assert_string_not_equal (next->assign->task_id, first->assign->task_id);
    /* the ACK follows once the commit holds */
    Ak__Envelope *ack = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ACK, 5000);
    assert_non_null (ack);
    assert_string_equal (ack->ack->task_id, first->assign->task_id);
    assert_false (*ack->ack->refused);
    ak_envelope_free (&ack);
    ak_envelope_free (&next);
    ak_envelope_free (&first);
    zsock_destroy (&w);
    free (batch);
    free (bundle);
}

// ------------------------------------------------- 5. oversized receipts

/* A live worker beside the test: HELLO (heartbeat 250 ms), then a
   HEARTBEAT every 100 ms and every message the coordinator sends read,
   until told to stop, on a thread of its own. */
typedef struct {
    const char      *endpoint;
    atomic_bool      stop;
    atomic_uint      heard;             /* messages from the coordinator */
    atomic_uint      send_failures;
    atomic_ullong    longest_gap_ms;    /* between two of them */
} s_beat_t;

static void *s_beat (void *arg)
{
    s_beat_t *b = arg;
    zsock_t *s = ak_fault_raw_new (b->endpoint);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dev = AK__DEVICE__INIT, *devs[1] = { &dev };
    dev.backend = "host";
    dev.device_class = "beat-class";
    dev.slots = 1;
    h.worker_id = "beat-1";
    h.host = "fault-test";
    h.devices = devs;
    h.n_devices = 1;
    h.slots = 1;
    h.heartbeat_ms = 250;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    if (ak_envelope_send (s, NULL, 0, &env) != 0)
        b->send_failures++;
    uint64_t last_beat = 0, last_heard = 0;
    while (!b->stop) {
        uint64_t now = ak_fault_now_ms ();
        if (now >= last_beat + 100) {
            Ak__Envelope hb_env = AK__ENVELOPE__INIT;
            Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
            hb_env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
            hb_env.heartbeat = &hb;
            if (ak_envelope_send (s, NULL, 0, &hb_env) != 0)
                b->send_failures++;
            last_beat = now;
        }
        zmq_pollitem_t item = { zsock_resolve (s), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 20) <= 0)
            continue;
        zmsg_t *msg = zmsg_recv (s);
        zmsg_destroy (&msg);
        now = ak_fault_now_ms ();
        if (last_heard && now - last_heard > b->longest_gap_ms)
            b->longest_gap_ms = now - last_heard;
        last_heard = now;
        b->heard++;
    }
    zsock_destroy (&s);
    return NULL;
}

/* n bytes of c, NUL-terminated (caller frees). */
static char *s_text (char c, size_t n)
{
    char *t = ak_malloc (n + 1);
    memset (t, c, n);
    t[n] = '\0';
    return t;
}

static s_beat_t  s_beater;
static pthread_t s_beat_thread;
static bool      s_beating;

/* Stops the live worker (also when a test failed while it ran). */
static void s_beat_stop (void)
{
    if (s_beating) {
        s_beater.stop = true;
        pthread_join (s_beat_thread, NULL);
        s_beating = false;
    }
}

static int s_teardown_beat (void **state)
{
    s_beat_stop ();
    return s_teardown (state);
}

/* A receipt for task attempt with ngates gate entries of detail bytes
   each, nkernels kernel records named by name_len bytes, log bytes of
   compile log and reason; *size_p its packed size. */
static void s_send_receipt (zsock_t *s, const char *task_id, uint32_t attempt, size_t ngates, size_t detail,
                            size_t nkernels, size_t name_len, size_t log, const char *reason, size_t *size_p)
{
    Ak__Receipt r = AK__RECEIPT__INIT;
    r.task_id = (char *) task_id;
    r.attempt = attempt;
    r.kind = "preflight";
    r.status = "ok";
    r.reason = (char *) reason;
    char *text = s_text ('l', log), *dtext = s_text ('d', detail), *ntext = s_text ('k', name_len);
    r.compile_log = text;
    Ak__GateResult *g = ak_calloc (ngates ? ngates : 1, sizeof *g);
    Ak__GateResult **gp = ak_calloc (ngates ? ngates : 1, sizeof *gp);
    for (size_t i = 0; i < ngates; i++) {
        ak__gate_result__init (&g[i]);
        g[i].stage = "smoke";
        g[i].passed = true;
        g[i].detail = dtext;
        gp[i] = &g[i];
    }
    r.gates = gp;
    r.n_gates = ngates;
    Ak__KernelRecord *k = ak_calloc (nkernels ? nkernels : 1, sizeof *k);
    Ak__KernelRecord **kp = ak_calloc (nkernels ? nkernels : 1, sizeof *kp);
    uint32_t grid[3] = { 64, 1, 1 }, block[3] = { 128, 1, 1 };
    for (size_t i = 0; i < nkernels; i++) {
        ak__kernel_record__init (&k[i]);
        k[i].name = ntext;
        k[i].role = "candidate";
        k[i].workload = "w";
        k[i].grid = grid;
        k[i].n_grid = 3;
        k[i].block = block;
        k[i].n_block = 3;
        k[i].duration_us = 1.5;
        kp[i] = &k[i];
    }
    r.kernels = kp;
    r.n_kernels = nkernels;
    *size_p = ak__receipt__get_packed_size (&r);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = &r;
    ak_fault_raw_send (s, &env);
    free (dtext);
    free (ntext);
    free (k);
    free (kp);
    free (g);
    free (gp);
    free (text);
}

/* Every page of `verb id`, each answer checked to be one message: *pages_p
   how many, the receipts of all of them. */
static json_t *s_pages (ak_fault_coord_t *c, const char *verb, const char *id, const char *key, const char *limit,
                        size_t *pages_p)
{
    json_t *all = json_array ();
    char *after = NULL;
    size_t pages = 0;
    do {
        const char *args[3] = { id, limit ? limit : "1000", after };
        json_t *page = NULL;
        char *error = NULL;
        uint64_t t0 = ak_fault_now_ms ();
        int rc = ak_fault_call_args (c, 30000, verb, args, after ? 3 : limit ? 2 : 1, NULL, &page, &error);
        if (rc)
            fail_msg ("%s %s (page %zu): %d %s", verb, id, pages + 1, rc, error ? error : "");
        size_t bytes = json_dumpb (page, NULL, 0, JSON_COMPACT);
        fprintf (stderr, "oversized: %s %s page %zu: %zu records, %zu KiB, answered in %llu ms\n", verb, id,
                 pages + 1, json_array_size (json_object_get (page, key)), bytes >> 10,
                 (unsigned long long) (ak_fault_now_ms () - t0));
        assert_true (bytes < AK_MAX_MSG_SIZE);
        json_array_extend (all, json_object_get (page, key));
        free (after);
        json_t *next = json_object_get (page, "next");
        after = json_is_string (next) ? ak_strdup (json_string_value (next)) : NULL;
        json_decref (page);
        free (error);
        pages++;
        assert_true (pages < 100);
    } while (after);
    *pages_p = pages;
    return all;
}

static void test_oversized_receipts_refused_and_paged (void **state)
{
    /* dead after 3 heartbeats of 2 s: far beyond what a page may take,
       even in a sanitised build on a loaded box */
    const char *more[] = { "--heartbeat-ms", "2000", NULL };
    ak_fault_coord_t *c = s_coord ("fault-oversized", more);
    char *bundle = ak_fault_stub_bundle (c->dir, "oversized", 1, "\"lease_ms\": 60000");
    char *batch = ak_fault_submit (c, bundle);

    s_beat_t *beat = &s_beater;
    beat->endpoint = c->workers;
    assert_int_equal (pthread_create (&s_beat_thread, NULL, s_beat, beat), 0);
    s_beating = true;

    Ak__Envelope *a1 = NULL;
    zsock_t *w = s_one_slot (c, "big-1", &a1);
    const char *t1 = a1->assign->task_id;
    ak_fault_raw_started (w, t1, 1);
    ak_fault_raw_receipt (w, a1->assign, 1, 1.0, 0);
    Ak__Envelope *a2 = s_expect_ack_and_next (w, t1);
    const char *t2 = a2->assign->task_id;
    ak_fault_raw_started (w, t2, 1);

    /* 60,000 gate entries with long details (about 12 MB, within the
       envelope's limits): refused, counted, and the lease of a task it
       held ends at once (attempt 2 comes back to it) */
    size_t size = 0;
    s_send_receipt (w, t1, 1, 60000, 200, 0, 0, 0, "", &size);
    assert_true (size > (12u << 20) - (1u << 20) && size < AK_MAX_MSG_SIZE);
    s_expect_ack (w, t1, "bytes (at most 4194304)");
    s_send_receipt (w, t2, 1, 1000, 100, 0, 0, 0, "", &size);
    s_expect_ack (w, t2, "more than 16 gate entries");
    assert_int_equal (s_security (c, "receipts_too_big"), 2);
    Ak__Envelope *again = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ASSIGN, 10000);
    assert_non_null (again);
    assert_string_equal (again->assign->task_id, t2);
    assert_int_equal (again->assign->attempt, 2);
    ak_envelope_free (&again);

    /* t2's attempt 2 done with a receipt of 190 KB, then 2 copies: shown
       whole, one a page (a page decodes about 256 KiB) */
    ak_fault_raw_started (w, t2, 2);
    for (int i = 0; i < 3; i++) {
        s_send_receipt (w, t2, 2, 6, 1000, 700, 220, 0, "mid", &size);
        assert_true (size > (150u << 10) && size < (256u << 10));
        Ak__Envelope *e = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ACK, 10000);
        assert_non_null (e);
        assert_string_equal (e->ack->refused, "");
        assert_int_equal (e->ack->duplicate, i > 0);
        ak_envelope_free (&e);
    }

    /* eight maximal copies for the task already done: within every limit */
    for (int i = 0; i < 8; i++) {
        char reason[64];
        snprintf (reason, sizeof reason, "copy %c", i < 5 ? 'A' : (char) ('A' + i));
        s_send_receipt (w, t1, 1, AK_RECEIPT_MAX_GATES, AK_RECEIPT_MAX_DETAIL, 14000, 220, AK_RECEIPT_MAX_LOG,
                        reason, &size);
        assert_true (size > (7u << 19) && size <= AK_RECEIPT_MAX_BYTES);
        Ak__Envelope *e = ak_fault_raw_expect (w, AK__ENVELOPE__BODY_ACK, 10000);
        assert_non_null (e);
        assert_string_equal (e->ack->refused, "");
        assert_true (e->ack->duplicate);
        ak_envelope_free (&e);
    }
    fprintf (stderr, "oversized: 8 copies of %zu bytes stored as duplicates\n", size);

    /* show, receipts and report answer, in pages each one message; the
       first 2 copies whole, the others as digests: 3 equal ones folded */
    size_t pages = 0;
    json_t *rs = s_pages (c, "show", t1, "receipts", "2", &pages);
    assert_int_equal (pages, 4);
    assert_int_equal (json_array_size (rs), 1 + 2 + 4);
    size_t whole = 0, digests = 0, copies = 0;
    json_t *r;
    size_t i;
    json_array_foreach (rs, i, r) {
        if (!json_is_true (json_object_get (r, "duplicate")))
            continue;
        if (strlen (json_string_value (json_object_get (r, "digest"))) == 64) {
            digests++;
            copies += (size_t) json_integer_value (json_object_get (r, "copies"));
            assert_int_equal (json_array_size (json_object_get (r, "kernels")), 0);
        }
        else {
            /* stored whole; at 4 MB, more than a page decodes: shown
               with its gates, without its kernel records */
            whole++;
            assert_int_equal (json_array_size (json_object_get (r, "gates")), AK_RECEIPT_MAX_GATES);
            const char *why = json_string_value (json_object_get (r, "truncated"));
            if (!why || !strstr (why, "14000 kernels"))
                fail_msg ("a whole copy: truncated is '%s'", why ? why : "(none)");
        }
    }
    assert_int_equal (whole, 2);
    assert_int_equal (digests, 4);
    assert_int_equal (copies, 6);
    json_decref (rs);
    rs = s_pages (c, "show", t2, "receipts", NULL, &pages);
    assert_int_equal (pages, 3);
    assert_int_equal (json_array_size (rs), 3);
    json_array_foreach (rs, i, r)
        assert_int_equal (json_array_size (json_object_get (r, "kernels")), 700);
    json_decref (rs);
    rs = s_pages (c, "receipts", batch, "receipts", NULL, &pages);
    assert_true (pages >= 2);
    assert_int_equal (json_array_size (rs), 7 + 3);
    json_decref (rs);
    rs = s_pages (c, "report", batch, "ops", NULL, &pages);
    assert_int_equal (json_array_size (rs), 1);
    json_decref (rs);

    /* akctl follows the pages: --json is the whole answer */
    char *args = ak_sprintf ("show %s --json", t2), *out = NULL;
    assert_int_equal (ak_fault_akctl (c, args, &out), 0);
    json_t *shown = json_loads (out, 0, NULL);
    assert_non_null (shown);
    assert_int_equal (json_array_size (json_object_get (shown, "receipts")), 3);
    json_array_foreach (json_object_get (shown, "receipts"), i, r)
        assert_int_equal (json_array_size (json_object_get (r, "kernels")), 700);
    assert_true (json_is_null (json_object_get (shown, "next")));
    json_decref (shown);
    free (out);
    free (args);
    args = ak_sprintf ("receipts %s --json", batch);
    assert_int_equal (ak_fault_akctl (c, args, &out), 0);
    shown = json_loads (out, 0, NULL);
    assert_int_equal (json_array_size (json_object_get (shown, "receipts")), 7 + 3);
    json_decref (shown);
    free (out);
    free (args);
    args = ak_sprintf ("show %s", t1);
    assert_int_equal (ak_fault_akctl (c, args, NULL), 0);
    free (args);
    args = ak_sprintf ("report %s", batch);
    assert_int_equal (ak_fault_akctl (c, args, NULL), 0);
    free (args);

    /* the live worker was answered all along: nobody declared dead */
    unsigned heard = beat->heard;
    json_t *ws = ak_fault_json (c, "workers", NULL, NULL);
    json_array_foreach (json_object_get (ws, "workers"), i, r)
        if (strcmp (json_string_value (json_object_get (r, "state")), "alive") != 0)
            fail_msg ("worker %s was declared dead", json_string_value (json_object_get (r, "worker_id")));
    assert_int_equal (json_array_size (json_object_get (ws, "workers")), 2);
    json_decref (ws);
    assert_int_equal (ak_fault_stat (c, "workers_died", NULL), 0);
    s_beat_stop ();
    assert_true (heard > 0);
    assert_int_equal (beat->send_failures, 0);
    fprintf (stderr, "oversized: the live worker heard %u messages, the longest silence %llu ms\n", heard,
             (unsigned long long) beat->longest_gap_ms);

    ak_envelope_free (&a1);
    ak_envelope_free (&a2);
    zsock_destroy (&w);
    int status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, false, &tally);
    assert_int_equal (tally.duplicates, 8 + 2);
    free (batch);
    free (bundle);
}

// ------------------------------------------------- 6. one process per id

static void test_duplicate_id_refused_without_keys (void **state)
{
    ak_fault_coord_t *c = s_coord ("fault-dup-id", NULL);
    char *bundle = ak_fault_stub_bundle (c->dir, "dupid", 2, "\"lease_ms\": 60000");
    char *batch = ak_fault_submit (c, bundle);
    zsock_t *first = ak_fault_raw_new (c->workers);
    ak_fault_raw_hello_from (first, "node-a", 1111, "dup-1", "host", 1, 0, NULL, 0);
    Ak__Envelope *a = ak_fault_raw_expect (first, AK__ENVELOPE__BODY_ASSIGN, 10000);
    assert_non_null (a);
    const char *task = a->assign->task_id;
    ak_fault_raw_started (first, task, 1);

    /* another host: refused while the first lives, the holder named */
    zsock_t *other = ak_fault_raw_new (c->workers);
    ak_fault_raw_hello_from (other, "node-b", 2222, "dup-1", "host", 1, 0, NULL, 0);
    assert_int_equal (s_expect_disconnect (other, "worker id dup-1 is held by a live worker (host node-a, pid 1111"),
                      AK__DISCONNECT_CODE__DISCONNECT_ID_TAKEN);
    /* another pid on the same host, the first heard just now: refused too */
    zsock_t *twin = ak_fault_raw_new (c->workers);
    ak_fault_raw_hello_from (twin, "node-a", 3333, "dup-1", "host", 1, 0, NULL, 0);
    assert_int_equal (s_expect_disconnect (twin, "(host node-a, pid 3333) with another --id"),
                      AK__DISCONNECT_CODE__DISCONNECT_ID_TAKEN);
    assert_true (s_security (c, "registrations_refused") >= 2);

    /* the first keeps its lease (attempt 1, its worker) and delivers */
    s_expect_field (c, task, "state", "leased");
    s_expect_field (c, task, "attempt", "1");
    s_expect_field (c, task, "worker_id", "dup-1");
    ak_fault_raw_receipt (first, a->assign, 1, 1.0, 0);
    s_expect_ack (first, task, NULL);

    /* its own reconnect, a new socket of the same process, is no refusal */
    zsock_destroy (&first);
    first = ak_fault_raw_new (c->workers);
    ak_fault_raw_hello_from (first, "node-a", 1111, "dup-1", "host", 1, 0, NULL, 0);
    Ak__Envelope *welcome = ak_fault_raw_expect (first, AK__ENVELOPE__BODY_HEARTBEAT, 10000);
    assert_non_null (welcome);
    ak_envelope_free (&welcome);

    /* gone (it says DISCONNECT): the id is free for the other host */
    Ak__Disconnect d = AK__DISCONNECT__INIT;
    d.reason = "stopping";
    Ak__Envelope bye = AK__ENVELOPE__INIT;
    bye.body_case = AK__ENVELOPE__BODY_DISCONNECT;
    bye.disconnect = &d;
    assert_int_equal (ak_envelope_send (first, NULL, 0, &bye), 0);
    bool taken = false;
    for (int i = 0; i < 100 && !taken; i++) {
        ak_fault_raw_hello_from (other, "node-b", 2222, "dup-1", "host", 1, 0, NULL, 0);
        Ak__Envelope *e = ak_fault_raw_expect (other, AK__ENVELOPE__BODY_HEARTBEAT, 200);
        taken = e != NULL;
        ak_envelope_free (&e);
    }
    assert_true (taken);
    json_t *ws = ak_fault_json (c, "workers", NULL, NULL);
    json_t *w = json_array_get (json_object_get (ws, "workers"), 0);
    assert_string_equal (json_string_value (json_object_get (w, "worker_id")), "dup-1");
    assert_string_equal (json_string_value (json_object_get (w, "host")), "node-b");
    json_decref (ws);
    ak_envelope_free (&a);
    zsock_destroy (&first);
    zsock_destroy (&other);
    zsock_destroy (&twin);
    free (batch);
    free (bundle);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_forged_receipts_refused, s_teardown),
        cmocka_unit_test_teardown (test_hello_limits_and_paged_workers, s_teardown),
        cmocka_unit_test_teardown (test_lease_deadline_survives_restarts, s_teardown),
        cmocka_unit_test_teardown (test_reregistering_without_a_task_releases_it, s_teardown),
        cmocka_unit_test_teardown (test_failed_commit_keeps_slots, s_teardown),
        cmocka_unit_test_teardown (test_staged_receipt_frees_slot, s_teardown),
        cmocka_unit_test_teardown (test_oversized_receipts_refused_and_paged, s_teardown_beat),
        cmocka_unit_test_teardown (test_duplicate_id_refused_without_keys, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
