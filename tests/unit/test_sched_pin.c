/*  tests/unit/test_sched_pin.c: pinned tasks in the scheduler's index
    (TaskRecord.pin_worker, used by verify batches; coordinator/sched.h):
    a pinned task is never handed out by its class queue, only to its
    worker; a requeue keeps it pinned; failing a worker's pinned tasks
    (queued and leased) settles the batch. */
#include "support.h"

#include <stdlib.h>
#include <string.h>

#include "cpb.h"
#include "coordinator/expand.h"
#include "coordinator/sched.h"
#include "util.h"

static Ak__TaskRecord *s_task (const char *id, const char *pin)
{
    Ak__TaskRecord *t = ak_malloc (sizeof *t);
    ak__task_record__init (t);
    ak_cpb_set (&t->task_id, id);
    ak_cpb_set (&t->batch_id, "B000001");
    ak_cpb_set (&t->state, "queued");
    ak_cpb_set (&t->kind, pin ? "verify" : "tune");
    ak_cpb_set (&t->device_class, "host");
    ak_cpb_set (&t->pin_worker, pin);
    t->attempt = 1;
    return t;
}

/* B000001: .0001 pinned to w1, .0002 pinned to w2, .0003 free. */
static ak_expansion_t *s_exp (void)
{
    ak_expansion_t *exp = ak_calloc (1, sizeof *exp);
    exp->batch = ak_malloc (sizeof *exp->batch);
    ak__batch_record__init (exp->batch);
    ak_cpb_set (&exp->batch->batch_id, "B000001");
    ak_cpb_set (&exp->batch->state, "open");
    exp->tasks = ak_calloc (3, sizeof *exp->tasks);
    exp->tasks[exp->ntasks++] = s_task ("B000001.0001", "w1");
    exp->tasks[exp->ntasks++] = s_task ("B000001.0002", "w2");
    exp->tasks[exp->ntasks++] = s_task ("B000001.0003", NULL);
    return exp;
}

static void test_pinned_only_to_its_worker (void **state)
{
    ak_sched_t *s = ak_sched_new ();
    ak_expansion_t *exp = s_exp ();
    ak_sched_add (s, exp);
    /* the class queue holds only the free task */
    ak_task_t *t = ak_sched_pop (s, "host");
    assert_non_null (t);
    assert_string_equal (t->task_id, "B000001.0003");
    assert_null (ak_sched_pop (s, "host"));
    ak_sched_unpop (s, t);
    /* each pinned task to its worker only */
    assert_null (ak_sched_pop_pinned (s, "w3"));
    ak_task_t *p1 = ak_sched_pop_pinned (s, "w1");
    assert_non_null (p1);
    assert_string_equal (p1->task_id, "B000001.0001");
    assert_null (ak_sched_pop_pinned (s, "w1"));
    /* a requeue (lease expired) goes back to w1's queue, not the class's */
    ak_sched_assign (s, p1, "w1", 1000);
    ak_sched_requeue (s, p1, "lease expired", 2000);
    assert_int_equal (p1->state, AK_TS_QUEUED);
    t = ak_sched_pop (s, "host");
    assert_string_equal (t->task_id, "B000001.0003");
    ak_sched_unpop (s, t);
    assert_ptr_equal (ak_sched_pop_pinned (s, "w1"), p1);
    ak_sched_unpop (s, p1);                      /* unpop keeps it pinned too */
    t = ak_sched_pop (s, "host");
    assert_string_equal (t->task_id, "B000001.0003");
    assert_null (ak_sched_pop (s, "host"));
    ak_sched_unpop (s, t);
    assert_ptr_equal (ak_sched_pop_pinned (s, "w1"), p1);
    ak_expansion_destroy (&exp);
    ak_sched_destroy (&s);
}

static void test_fail_pinned_settles (void **state)
{
    ak_sched_t *s = ak_sched_new ();
    ak_expansion_t *exp = s_exp ();
    ak_sched_add (s, exp);
    ak_batch_t *b = ak_sched_batch (s, "B000001");
    const char **ids = NULL;
    assert_int_equal (ak_sched_pinned_workers (s, &ids), 2);
    free (ids);
    /* w1's task is running, w2's waits */
    ak_task_t *p1 = ak_sched_pop_pinned (s, "w1");
    ak_sched_assign (s, p1, "w1", 1000);
    assert_int_equal (ak_sched_fail_pinned (s, "w1", "worker gone (w1: silent)", 3000), 1);
    assert_int_equal (p1->state, AK_TS_FAILED);
    assert_string_equal (p1->last_error, "worker gone (w1: silent)");
    assert_int_equal (ak_sched_fail_pinned (s, "w2", "worker gone (w2 is not registered)", 3000), 1);
    ak_task_t *p2 = ak_sched_task (s, "B000001.0002");
    assert_int_equal (p2->state, AK_TS_FAILED);
    assert_null (ak_sched_pop_pinned (s, "w2"));
    assert_int_equal (ak_sched_pinned_workers (s, &ids), 0);
    free (ids);
    /* failing again is a no-op; the free task was never touched */
    assert_int_equal (ak_sched_fail_pinned (s, "w1", "again", 4000), 0);
    ak_task_t *t = ak_sched_pop (s, "host");
    assert_string_equal (t->task_id, "B000001.0003");
    assert_null (ak_sched_settling (s));
    ak_sched_assign (s, t, "w3", 5000);
    ak_sched_finish (s, t, true, false, 6000);
    assert_ptr_equal (ak_sched_settling (s), b);
    assert_int_equal (b->counts[AK_TS_FAILED], 2);
    ak_expansion_destroy (&exp);
    ak_sched_destroy (&s);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_pinned_only_to_its_worker),
        cmocka_unit_test (test_fail_pinned_settles),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
