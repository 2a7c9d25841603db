/*  tests/unit/test_arena.c: the bump allocator (common/arena.h) and the
    passes that decode a batch into one: only the fields deciding reads
    (ak_store_get_only, ak_pbw_unpack_only_with). */
#include "support.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "arena.h"
#include "cpb.h"
#include "pbwire.h"
#include "coordinator/promote.h"
#include "store.h"
#include "util.h"

static void test_alloc (void **state)
{
    (void) state;
    ak_arena_t *a = ak_arena_new ();
    assert_int_equal (ak_arena_used (a), 0);
    /* small blocks: aligned, distinct, writable, counted */
    uint8_t *prev = NULL;
    for (size_t i = 1; i <= 100000; i++) {
        size_t n = i % 97 + 1;
        uint8_t *p = ak_arena_alloc (a, n);
        assert_non_null (p);
        assert_int_equal ((uintptr_t) p % 16, 0);
        memset (p, (int) (i & 0xff), n);
        if (prev)
            assert_true (prev != p);
        prev = p;
    }
    size_t used = ak_arena_used (a);
    assert_true (used >= 100000 * 16);
    /* a block larger than a chunk, then small ones again */
    uint8_t *big = ak_arena_alloc (a, 5u << 20);
    memset (big, 0xab, 5u << 20);
    assert_int_equal (big[(5u << 20) - 1], 0xab);
    uint8_t *after = ak_arena_alloc (a, 24);
    memset (after, 0, 24);
    assert_true (ak_arena_used (a) >= used + (5u << 20) + 32);
    assert_int_equal (ak_arena_alloc (a, 0) != NULL, 1);
    ak_arena_destroy (&a);
    assert_null (a);
    ak_arena_destroy (&a);          /* NULL is fine */
}

/* A receipt decoded into the arena through its protobuf-c allocator is
   whole (freed with the arena only); decoding only some fields leaves the
   rest at their defaults. */
static void test_decode_only (void **state)
{
    (void) state;
    Ak__Receipt r = AK__RECEIPT__INIT;
    r.receipt_id = (char *) "R00000007";
    r.task_id = (char *) "B000001.0007";
    r.status = (char *) "ok";
    r.host = (char *) "gpu-host-12";
    r.compile_log = (char *) "a long compile log that no decision reads";
    Ak__WorkloadTiming wt = AK__WORKLOAD_TIMING__INIT;
    wt.speedup = 1.25;
    Ak__WorkloadTiming *wts[1] = { &wt };
    r.timings = wts;
    r.n_timings = 1;
    size_t len = ak__receipt__get_packed_size (&r);
    uint8_t *buf = ak_malloc (len);
    ak__receipt__pack (&r, buf);

    ak_arena_t *a = ak_arena_new ();
    Ak__Receipt *full = ak__receipt__unpack (ak_arena_pb (a), len, buf);
    assert_non_null (full);
    assert_string_equal (full->host, "gpu-host-12");
    Ak__Receipt *slim = (Ak__Receipt *) ak_pbw_unpack_only_with (&ak__receipt__descriptor, ak_arena_pb (a), buf,
                                                                 len, ak_promote_receipt_fields ());
    assert_non_null (slim);
    assert_string_equal (slim->receipt_id, "R00000007");
    assert_string_equal (slim->status, "ok");
    assert_int_equal (slim->n_timings, 1);
    assert_true (slim->timings[0]->speedup == 1.25);
    assert_string_equal (slim->host, "");            /* not a deciding field */
    assert_string_equal (slim->compile_log, "");
    /* the arena's free does nothing: freeing with its allocator is safe */
    ak__receipt__free_unpacked (slim, ak_arena_pb (a));
    assert_true (ak_arena_used (a) > 0);
    ak_arena_destroy (&a);
    free (buf);
}

/* ak_store_get_only decodes the stored value's kept fields into the
   transaction's decode allocator. */
static void test_store_get_only (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("arena");
    ak_store_t *store = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_store_open (dir, NULL, &store, &err), 0);
    Ak__TaskRecord t = AK__TASK_RECORD__INIT;
    t.task_id = (char *) "B000001.0001";
    t.batch_id = (char *) "B000001";
    t.state = (char *) "done";
    t.kind = (char *) "tune";
    t.backend = (char *) "cuda";
    t.stage = 2;
    Ak__Policy pol = AK__POLICY__INIT;
    pol.max_attempts = 3;
    t.policy = &pol;
    ak_txn_t *txn = NULL;
    assert_int_equal (ak_store_begin (store, true, &txn, &err), 0);
    assert_int_equal (ak_store_put_task (txn, &t, &err), 0);
    assert_int_equal (ak_store_commit (&txn, &err), 0);

    ak_arena_t *a = ak_arena_new ();
    assert_int_equal (ak_store_begin (store, false, &txn, &err), 0);
    assert_null (ak_store_decode_with (txn, ak_arena_pb (a)));
    Ak__TaskRecord *slim = NULL;
    assert_int_equal (ak_store_get_only (txn, AK_DB_TASKS, "B000001.0001", &ak__task_record__descriptor,
                                         ak_promote_task_fields (), (ProtobufCMessage **) &slim, &err), 0);
    assert_string_equal (slim->state, "done");
    assert_int_equal (slim->stage, 2);              /* field 32: kept */
    assert_string_equal (slim->backend, "");        /* not kept */
    assert_null (slim->policy);
    assert_int_equal (ak_store_get_only (txn, AK_DB_TASKS, "B000001.0002", &ak__task_record__descriptor,
                                         ak_promote_task_fields (), (ProtobufCMessage **) &slim, &err),
                      AK_ENOTFOUND);
    /* back to malloc: a record read now is the caller's to free */
    assert_ptr_equal (ak_store_decode_with (txn, NULL), ak_arena_pb (a));
    Ak__TaskRecord *whole = NULL;
    assert_int_equal (ak_store_get_task (txn, "B000001.0001", &whole, &err), 0);
    assert_string_equal (whole->backend, "cuda");
    assert_int_equal (whole->policy->max_attempts, 3);
    ak__task_record__free_unpacked (whole, NULL);
    ak_store_abort (&txn);
    ak_arena_destroy (&a);
    ak_store_destroy (&store);
    ak_test_rmtree (dir);
    free (dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_alloc),
        cmocka_unit_test (test_decode_only),
        cmocka_unit_test (test_store_get_only),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
