/*  tests/fault/test_unserved.c: a batch for a class no worker serves.

    A batch whose targets no worker ever announced would wait forever
    without a word.  Checked on a real akcoord with in-test workers:
      1. submit refuses it, naming the class and --allow-unserved (the client
         verb and `akctl submit`, exit 2), and stores nothing;
      2. with allow-unserved it is queued: the reply and akctl's warning name
         the class, `status` (JSON and human) and `watch` show "waiting: no
         live worker of class host (...; no worker has ever announced it)",
         and the coordinator logs it at WARN once, however many heartbeats;
      3. workers of the class register: nothing waits, an INFO says so;
      4. they die with tasks leased: those are queued again and the class
         waits again ("its 3 workers are dead"), a second WARN for the new
         episode;
      5. the class was announced once, so a plain submit for it is accepted,
         while one for a class nobody announced (a GPU class here) is
         refused; `submit --target` replaces the manifest's targets. */
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "util.h"

static ak_fault_coord_t *s_c;

static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 60);
    return 0;
}

/* The "waiting" entries of `status batch` (a new reference). */
static json_t *s_waiting (ak_fault_coord_t *c, const char *batch)
{
    json_t *st = ak_fault_json (c, "status", batch, NULL);
    json_t *w = json_incref (json_object_get (st, "waiting"));
    json_decref (st);
    assert_non_null (w);
    return w;
}

typedef struct {
    ak_fault_coord_t *c;
    const char       *batch;
    const char       *state;
    int64_t           at_least;
} s_until_t;

static bool s_count_reached (void *arg)
{
    s_until_t *u = arg;
    return ak_fault_count (u->c, u->batch, u->state) >= u->at_least;
}

/* The coordinator's log says the class is served again. */
static bool s_served_logged (void *arg)
{
    const ak_fault_coord_t *c = arg;
    return ak_fault_occurrences (c->log, "class host no longer waits") >= 1;
}

/* `akctl submit FLAGS 'MANIFEST'` exits want_rc, and its output holds
   needle (NULL: anything). */
static void s_submit (ak_fault_coord_t *c, const char *flags, const char *manifest, int want_rc, const char *needle)
{
    char *out = NULL, *args = ak_sprintf ("submit %s '%s' 2>&1", flags, manifest);
    assert_int_equal (ak_fault_akctl (c, args, &out), want_rc);
    if (needle && !strstr (out ? out : "", needle))
        fail_msg ("akctl %s: no \"%s\" in:\n%s", args, needle, out ? out : "");
    free (out);
    free (args);
}

/* Holds every task silently: leased, never finished. */
static const char *s_hold (const Ak__Assign *assign, void *arg)
{
    (void) assign;
    (void) arg;
    return NULL;
}

static void test_unserved_class (void **state)
{
    const char *flags[] = { "--heartbeat-ms", "200", "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new ("unserved", NULL, flags);
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "nobody", 4, "\"lease_ms\": 60000");
    char *manifest = ak_sprintf ("%s/nobody/batch.json", c->dir);

    /* 1. refused: the client verb and akctl, nothing stored */
    json_t *j = NULL;
    char *error = NULL;
    int rc = ak_fault_call (c, 20000, "submit", NULL, NULL, bundle, &j, &error);
    assert_int_equal (rc, AK_EINVAL);
    assert_non_null (error);
    fprintf (stderr, "refused: %s\n", error);
    assert_non_null (strstr (error, "no worker has ever announced the target class 'host' (targets[0])"));
    assert_non_null (strstr (error, "--allow-unserved"));
    free (error);
    char *out = NULL;
    char *args = ak_sprintf ("submit '%s' 2>&1", manifest);
    assert_int_equal (ak_fault_akctl (c, args, &out), 2);
    assert_non_null (strstr (out, "'host'"));
    assert_non_null (strstr (out, "--allow-unserved"));
    free (out);
    free (args);
    json_t *list = ak_fault_json (c, "list", NULL, NULL);
    assert_int_equal (json_array_size (json_object_get (list, "batches")), 0);
    json_decref (list);
    rc = ak_fault_call (c, 20000, "submit", "allow-all", NULL, bundle, NULL, &error);
    assert_int_equal (rc, AK_EINVAL);
    assert_non_null (strstr (error, "'allow-all' is not an option of submit"));
    free (error);

    /* 2. allowed: queued, named as waiting in status, watch and the log */
    s_submit (c, "--allow-unserved", manifest, 0, "warning: batch B000001: no worker has ever announced class host");
    const char *batch = "B000001";
    json_t *w = s_waiting (c, batch);
    assert_int_equal (json_array_size (w), 1);
    json_t *w0 = json_array_get (w, 0);
    assert_string_equal (json_string_value (json_object_get (w0, "device_class")), "host");
    assert_int_equal (json_integer_value (json_object_get (w0, "queued")), 5);
    assert_int_equal (json_integer_value (json_object_get (w0, "workers_seen")), 0);
    assert_string_equal (json_string_value (json_object_get (w0, "why")),
                         "no live worker of class host (5 queued; no worker has ever announced it)");
    json_decref (w);
    assert_int_equal (ak_fault_akctl (c, "status B000001", &out), 0);
    assert_non_null (strstr (out, "waiting: no live worker of class host (5 queued"));
    free (out);
    assert_int_equal (ak_fault_akctl (c, "status", &out), 0);
    assert_non_null (strstr (out, "B000001 waiting: no live worker of class host"));
    free (out);
    /* watch into a pipe: the plain line, then what it waits for */
    ak_fault_akctl (c, "watch B000001 & p=$!; sleep 1; kill $p; wait $p", &out);
    assert_non_null (out);
    assert_non_null (strstr (out, "queued 5"));
    assert_non_null (strstr (out, "waiting: no live worker of class host"));
    free (out);
    /* once at WARN, however many heartbeats pass */
    ak_test_sleep_ms (1200);
    assert_int_equal (ak_fault_occurrences (c->log, "WARN waiting: no live worker of class host"), 1);

    /* 3. workers of the class register and take the work (holding it) */
    ak_fault_sim_t *sim = ak_fault_sim_new (c->workers, 3, "unserved", 200);
    ak_fault_sim_set_status (sim, s_hold, NULL);
    s_until_t u = { c, batch, "leased", 5 };
    ak_fault_sim_run (sim, 20000, s_count_reached, &u);
    assert_int_equal (ak_fault_count (c, batch, "leased"), 5);
    w = s_waiting (c, batch);
    assert_int_equal (json_array_size (w), 0);
    json_decref (w);
    /* a heartbeat check or two: the line polled for (it was a fixed 600 ms) */
    ak_fault_sim_run (sim, 20000, s_served_logged, c);
    assert_true (ak_fault_occurrences (c->log, "class host no longer waits") >= 1);

    /* 4. they die: their tasks are queued again, and the class waits again */
    ak_fault_sim_destroy (&sim);
    uint64_t until = ak_fault_now_ms () + 20000;
    while (ak_fault_count (c, batch, "queued") < 5 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (100);
    assert_int_equal (ak_fault_count (c, batch, "queued"), 5);
    w = s_waiting (c, batch);
    assert_int_equal (json_array_size (w), 1);
    w0 = json_array_get (w, 0);
    assert_int_equal (json_integer_value (json_object_get (w0, "workers_seen")), 3);
    assert_non_null (strstr (json_string_value (json_object_get (w0, "why")), "its 3 workers are dead"));
    json_decref (w);
    until = ak_fault_now_ms () + 5000;
    while (ak_fault_occurrences (c->log, "WARN waiting: no live worker of class host") < 2 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (100);
    ak_test_sleep_ms (600);
    assert_int_equal (ak_fault_occurrences (c->log, "WARN waiting: no live worker of class host"), 2);
    assert_true (ak_fault_occurrences (c->log, "its 3 workers are dead") >= 1);

    /* 5. announced once: a plain submit is accepted, another class refused */
    rc = ak_fault_call (c, 20000, "submit", NULL, NULL, bundle, &j, &error);
    assert_int_equal (rc, 0);
    free (error);
    assert_int_equal (json_array_size (json_object_get (j, "unserved")), 0);
    json_decref (j);
    char *cuda = ak_test_src ("kernels/batches/cuda.json");
    args = ak_sprintf ("submit '%s' 2>&1", cuda);
    assert_int_equal (ak_fault_akctl (c, args, &out), 2);
    assert_non_null (strstr (out, "the target class 'NVIDIA_H200/sm_90/drv580/nvrtc13.0' (targets[0])"));
    free (out);
    free (args);
    /* --target replaces the manifest's targets: another unannounced class
       is refused by that name, the announced one accepted, a bad name
       refused before anything is sent */
    s_submit (c, "--target NVIDIA_H100_80GB_HBM3/sm_90/drv580/nvrtc13.0", cuda, 2,
              "the target class 'NVIDIA_H100_80GB_HBM3/sm_90/drv580/nvrtc13.0' (targets[0])");
    s_submit (c, "--target host", cuda, 0, NULL);
    s_submit (c, "--target 'no such/class!'", cuda, 2, "--target 'no such/class!': a device class must match");
    free (cuda);

    int status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    free (manifest);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_unserved_class, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
