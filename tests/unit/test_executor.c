/*  tests/unit/test_executor.c: executor processes (worker/executor.c) and
    the daemon around them (worker/daemon.c).

    Executors are real children: $AK_BIN_DIR/akworker in executor mode.  The
    planted candidates of kernels/testing crash (SIGSEGV) and hang; the
    executor dies or is killed, the receipt says so, and a fresh executor
    runs the next job.  The last test runs the whole daemon against a fake
    coordinator (a ROUTER socket in this process): registration, STARTED,
    receipts, re-sending unacked receipts after a reconnect, crash and
    compile_error receipts, clean shutdown on SIGTERM. */
#include "support.h"
#include "hostexec.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/job.h"
#include "worker/executor.h"
#include "worker/pbutil.h"
#include "clock.h"
#include "digest.h"
#include "envelope.h"
#include "spec.h"
#include "util.h"

#include <czmq.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char      *dir;
    char      *bin;
    ak_spec_t *spec;
    char      *spec_json;
    char      *ref_path, *base_path;
} s_fix_t;

static s_fix_t s_fix;

static char *s_build (const char *text, bool reference)
{
    ak_err_t err = { 0 };
    char *log = NULL;
    char *path = ak_test_host_build (s_fix.dir, text, reference, &err, &log);
    if (!path)
        fprintf (stderr, "compile: %s\n%s\n", err.msg, log ? log : "");
    assert_non_null (path);
    free (log);
    return path;
}

static char *s_read_src (const char *rel)
{
    char *path = ak_test_src (rel);
    char *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_read (path, 1 << 20, &text, &len, &err), 0);
    free (path);
    return text;
}

static int s_group_setup (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    s_fix.dir = ak_test_tmpdir ("exec");
    s_fix.bin = ak_test_bin ("akworker");
    if (access (s_fix.bin, X_OK) != 0) {
        fprintf (stderr, "%s is not built: build the akworker target first\n", s_fix.bin);
        return -1;
    }
    char *spec_path = ak_test_src ("kernels/softmax/spec.json");
    assert_int_equal (ak_spec_load (spec_path, &s_fix.spec, &err), 0);
    free (spec_path);
    s_fix.spec_json = ak_spec_to_text (s_fix.spec, false);
    s_fix.ref_path = s_build (s_fix.spec->reference.text, true);
    s_fix.base_path = s_build (ak_spec_baseline (s_fix.spec, "host")->source.text, false);
    return 0;
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_spec_destroy (&s_fix.spec);
    free (s_fix.spec_json);
    free (s_fix.ref_path);
    free (s_fix.base_path);
    free (s_fix.bin);
    ak_test_rmtree (s_fix.dir);
    free (s_fix.dir);
    return 0;
}

/* --------------------------------------------------------- assign making */

/*  A heap-owned Assign (free with ak__assign__free_unpacked): softmax, kind,
    candidate text (NULL for preflight), one small workload, a quick policy. */
static Ak__Assign *s_assign (const char *task_id, const char *kind, const char *cand_name,
                             const char *cand_text, uint32_t run_timeout_ms)
{
    const ak_test_job_opts_t o = {
        .rows = 32, .cols = 128, .lease_ms = 60000, .compile_timeout_ms = 60000,
        .run_timeout_ms = run_timeout_ms, .max_samples = 10, .max_time_ms = 500, .seed = 42,
    };
    return ak_test_host_assign (s_fix.spec, s_fix.spec_json, task_id, kind, cand_name, cand_text, &o);
}

static Ak__ExecJob s_job (Ak__Assign *a, const char *cand_path)
{
    Ak__ExecJob job = AK__EXEC_JOB__INIT;
    job.assign = a;
    job.reference_path = s_fix.ref_path;
    job.baseline_path = s_fix.base_path;
    job.candidate_path = cand_path ? (char *) cand_path : (char *) "";
    return job;
}

static ak_exec_t *s_exec (void)
{
    ak_exec_t *e = NULL;
    ak_err_t err = { 0 };
    /* the job scratch directories in this test's folder (a daemon gives
       its executors its own: worker/daemon.c), so that the hang's, killed
       with its executor, goes with the folder */
    int rc = ak_exec_new (s_fix.bin, "host", 0, "warn", s_fix.dir, &e, &err);
    if (rc)
        fprintf (stderr, "%s\n", err.msg);
    assert_int_equal (rc, 0);
    assert_true (ak_exec_pid (e) > 0);
    assert_true (ak_exec_fd (e) >= 0);
    return e;
}

/* -------------------------------------------------------------- executor */

static void s_expect_ok (Ak__Receipt *r, bool tune)
{
    if (strcmp (r->status, "ok") != 0)
        fprintf (stderr, "status %s: %s\n", r->status, r->reason);
    assert_string_equal (r->status, "ok");
    assert_int_equal (r->n_gates, 6);
    for (size_t i = 0; i < r->n_gates; i++)
        assert_true (r->gates[i]->passed);
    assert_string_equal (r->gates[5]->stage, "recheck");
    assert_int_equal (r->n_timings, 1);
    Ak__WorkloadTiming *t = r->timings[0];
    assert_non_null (t->workload);
    assert_string_equal (t->workload->name, "small");
    assert_non_null (t->candidate);
    assert_true (t->candidate->n >= 3 && t->candidate->median_us > 0);
    if (tune) {
        assert_non_null (t->baseline);
        assert_true (t->speedup > 0);
    }
    else
        assert_null (t->baseline);
    assert_float_equal (t->flops, 5.0 * 32 * 128, 0);
    assert_true (r->gate_ms > 0 && r->timing_ms > 0);
    /* Where the gates' time went; the host job's own reference cache
       serves what its stages share (smoke's configuration is the sweep's
       first). */
    assert_non_null (r->gate_cost);
    assert_true (r->gate_cost->ref_misses > 0);
    assert_true (r->gate_cost->ref_hits >= 2);
    assert_true (r->gate_cost->reference_ms > 0 && r->gate_cost->compare_ms >= 0);
    /* Time inside timed samples: some, and within the timing's wall time. */
    assert_true (r->sampled_ms > 0 && r->sampled_ms <= r->timing_ms);
    assert_true (r->started_at_ms > 0 && r->finished_at_ms >= r->started_at_ms);
    assert_int_equal (strlen (r->source_digest), 64);
}

static void test_good_jobs (void **state)
{
    (void) state;
    ak_exec_t *e = s_exec ();
    ak_err_t err = { 0 };
    const char *btext = ak_spec_baseline (s_fix.spec, "host")->source.text;

    Ak__Assign *a = s_assign ("T1", "tune", "same", btext, 30000);
    Ak__ExecJob job = s_job (a, s_fix.base_path);
    Ak__Receipt *r = NULL;
    assert_int_equal (ak_exec_run (e, &job, 30000, &r, &err), 0);
    s_expect_ok (r, true);
    assert_string_equal (r->task_id, "T1");
    assert_string_equal (r->candidate_name, "same");
    assert_false (ak_exec_busy (e));
    ak__receipt__free_unpacked (r, NULL);
    ak__assign__free_unpacked (a, NULL);

    /* The same executor serves the next job: a preflight. */
    pid_t pid = ak_exec_pid (e);
    a = s_assign ("P1", "preflight", NULL, NULL, 30000);
    job = s_job (a, NULL);
    assert_int_equal (ak_exec_run (e, &job, 30000, &r, &err), 0);
    s_expect_ok (r, false);
    assert_int_equal (ak_exec_pid (e), pid);
    ak__receipt__free_unpacked (r, NULL);

    /* A kind it does not run, and a job without a reference, are errors. */
    ak_pb_set_str (&a->kind, "bogus");
    assert_int_equal (ak_exec_run (e, &job, 30000, &r, &err), 0);
    assert_string_equal (r->status, "error");
    assert_non_null (strstr (r->reason, "bogus"));
    ak__receipt__free_unpacked (r, NULL);
    ak_pb_set_str (&a->kind, "preflight");
    job.reference_path = (char *) "";
    assert_int_equal (ak_exec_run (e, &job, 30000, &r, &err), 0);
    assert_string_equal (r->status, "error");
    ak__receipt__free_unpacked (r, NULL);
    ak__assign__free_unpacked (a, NULL);
    ak_exec_destroy (&e);
    assert_null (e);
    ak_exec_destroy (&e);
}

static void test_crash_then_fresh (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    char *text = s_read_src ("kernels/testing/crash.c");
    char *path = s_build (text, false);
    ak_exec_t *e = s_exec ();
    Ak__Assign *a = s_assign ("T2", "tune", "crash", text, 30000);
    Ak__ExecJob job = s_job (a, path);
    Ak__Receipt *r = NULL;
    assert_int_equal (ak_exec_run (e, &job, 30000, &r, &err), AK_ECRASH);
    assert_string_equal (r->status, "crashed");
    assert_string_equal (r->task_id, "T2");
    assert_non_null (strstr (r->reason, "SIGSEGV"));
    ak__receipt__free_unpacked (r, NULL);
    ak__assign__free_unpacked (a, NULL);
    ak_exec_destroy (&e);

    /* A fresh executor runs a good job fine. */
    e = s_exec ();
    const char *btext = ak_spec_baseline (s_fix.spec, "host")->source.text;
    a = s_assign ("T3", "tune", "same", btext, 30000);
    job = s_job (a, s_fix.base_path);
    assert_int_equal (ak_exec_run (e, &job, 30000, &r, &err), 0);
    s_expect_ok (r, true);
    ak__receipt__free_unpacked (r, NULL);
    ak__assign__free_unpacked (a, NULL);
    ak_exec_destroy (&e);
    free (text);
    free (path);
}

static void test_hang_timeout (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    char *text = s_read_src ("kernels/testing/hang.c");
    char *path = s_build (text, false);
    ak_exec_t *e = s_exec ();
    Ak__Assign *a = s_assign ("T4", "tune", "hang", text, 1500);
    Ak__ExecJob job = s_job (a, path);
    Ak__Receipt *r = NULL;
    uint64_t t0 = ak_clock_mono_ms ();
    assert_int_equal (ak_exec_run (e, &job, 1500, &r, &err), AK_ETIMEOUT);
    uint64_t took = ak_clock_mono_ms () - t0;
    assert_true (took >= 1400 && took < 5000);
    assert_string_equal (r->status, "timeout");
    assert_non_null (strstr (r->reason, "1500 ms"));
    pid_t pid = ak_exec_pid (e);
    assert_true (pid <= 0 || kill (pid, 0) != 0);
    ak__receipt__free_unpacked (r, NULL);
    ak__assign__free_unpacked (a, NULL);
    ak_exec_destroy (&e);
    free (text);
    free (path);
}

static void test_signal_names (void **state)
{
    (void) state;
    char buf[32];
    assert_string_equal (ak_signal_name (SIGSEGV, buf, sizeof buf), "SIGSEGV");
    assert_string_equal (ak_signal_name (SIGKILL, buf, sizeof buf), "SIGKILL");
    assert_string_equal (ak_signal_name (63, buf, sizeof buf), "signal 63");
}

/* ------------------------------------------------------ artifacts per dtype */

/*  ak_job_artifact: the listed artifact of a role and dtype; the old single
    fields only stand for the build dtype, and only when the job lists no
    artifact of that role. */
static void test_job_artifacts (void **state)
{
    (void) state;
    Ak__ExecJob job = AK__EXEC_JOB__INIT;
    job.baseline_path = "base-old";
    job.candidate_path = "cand-old";
    /* no list: the old fields, for the build dtype only */
    assert_string_equal (ak_job_artifact (&job, "baseline", AK_DT_FLOAT32, AK_DT_FLOAT32), "base-old");
    assert_string_equal (ak_job_artifact (&job, "candidate", AK_DT_FLOAT32, AK_DT_FLOAT32), "cand-old");
    assert_null (ak_job_artifact (&job, "candidate", AK_DT_FLOAT16, AK_DT_FLOAT32));
    assert_string_equal (ak_job_artifact (&job, "candidate", AK_DT_BFLOAT16, AK_DT_BFLOAT16), "cand-old");

    Ak__Artifact arts[4], *ptrs[4];
    static const char *const spec[4][3] = {
        { "baseline", "float32", "b32" }, { "candidate", "float32", "c32" },
        { "candidate", "float16", "c16" }, { "candidate", "int8", "junk" },
    };
    for (int i = 0; i < 4; i++) {
        ak__artifact__init (&arts[i]);
        arts[i].role = (char *) spec[i][0];
        arts[i].dtype = (char *) spec[i][1];
        arts[i].path = (char *) spec[i][2];
        ptrs[i] = &arts[i];
    }
    job.artifacts = ptrs;
    job.n_artifacts = 4;
    assert_string_equal (ak_job_artifact (&job, "candidate", AK_DT_FLOAT16, AK_DT_FLOAT32), "c16");
    assert_string_equal (ak_job_artifact (&job, "candidate", AK_DT_FLOAT32, AK_DT_FLOAT32), "c32");
    assert_string_equal (ak_job_artifact (&job, "baseline", AK_DT_FLOAT32, AK_DT_FLOAT32), "b32");
    /* listed role, dtype not built: none, not the old field */
    assert_null (ak_job_artifact (&job, "candidate", AK_DT_BFLOAT16, AK_DT_BFLOAT16));
    assert_null (ak_job_artifact (&job, "baseline", AK_DT_FLOAT16, AK_DT_FLOAT32));
    /* an empty path is no artifact; unknown roles and NULLs are refused */
    arts[2].path = "";
    assert_null (ak_job_artifact (&job, "candidate", AK_DT_FLOAT16, AK_DT_FLOAT32));
    assert_null (ak_job_artifact (&job, "reference", AK_DT_FLOAT32, AK_DT_FLOAT32));
    assert_null (ak_job_artifact (NULL, "baseline", AK_DT_FLOAT32, AK_DT_FLOAT32));
    assert_null (ak_job_artifact (&job, NULL, AK_DT_FLOAT32, AK_DT_FLOAT32));
}

/*  A job that names its kernels only through the artifact list runs the
    same as one with the old fields; an artifact for a dtype the host
    backend does not run is not loaded (its path need not even exist). */
static void test_job_with_artifacts (void **state)
{
    (void) state;
    ak_exec_t *e = s_exec ();
    ak_err_t err = { 0 };
    const char *btext = ak_spec_baseline (s_fix.spec, "host")->source.text;
    Ak__Assign *a = s_assign ("A1", "tune", "same", btext, 30000);
    Ak__ExecJob job = AK__EXEC_JOB__INIT;
    job.assign = a;
    job.reference_path = s_fix.ref_path;
    Ak__Artifact arts[3], *ptrs[3];
    static const char *const roles[3] = { "baseline", "candidate", "candidate" };
    static const char *const dtypes[3] = { "float32", "float32", "float16" };
    for (int i = 0; i < 3; i++) {
        ak__artifact__init (&arts[i]);
        arts[i].role = (char *) roles[i];
        arts[i].dtype = (char *) dtypes[i];
        arts[i].path = i < 2 ? s_fix.base_path : (char *) "/nonexistent/float16.so";
        ptrs[i] = &arts[i];
    }
    job.artifacts = ptrs;
    job.n_artifacts = 3;
    Ak__Receipt *r = NULL;
    assert_int_equal (ak_exec_run (e, &job, 30000, &r, &err), 0);
    s_expect_ok (r, true);
    ak__receipt__free_unpacked (r, NULL);
    ak__assign__free_unpacked (a, NULL);
    ak_exec_destroy (&e);
}

/* ---------------------------------------------------- the daemon, whole */

typedef struct {
    zsock_t *router;
    char    *endpoint;
    zframe_t *peer;              /* routing id of the worker's current socket */
    bool     beat;               /* answer with heartbeats while waiting */
    uint64_t next_beat;
} s_coord_t;

static void s_coord_send (s_coord_t *c, Ak__Envelope *env)
{
    assert_non_null (c->peer);
    assert_int_equal (ak_envelope_send (c->router, zframe_data (c->peer), zframe_size (c->peer), env), 0);
}

static void s_coord_beat (s_coord_t *c)
{
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    s_coord_send (c, &env);
}

/*  Waits up to timeout_ms for a message of kind `want` from the worker,
    ignoring heartbeats (and answering them when c->beat).  Returns the
    envelope (caller frees) or NULL on timeout. */
static Ak__Envelope *s_coord_expect (s_coord_t *c, Ak__Envelope__BodyCase want, int timeout_ms)
{
    uint64_t deadline = ak_clock_mono_ms () + (uint64_t) timeout_ms;
    while (ak_clock_mono_ms () < deadline) {
        if (c->beat && c->peer && ak_clock_mono_ms () >= c->next_beat) {
            s_coord_beat (c);
            c->next_beat = ak_clock_mono_ms () + 100;
        }
        zmq_pollitem_t item = { zsock_resolve (c->router), 0, ZMQ_POLLIN, 0 };
        int n = zmq_poll (&item, 1, 50);
        if (n <= 0)
            continue;
        zmsg_t *msg = zmsg_recv (c->router);
        if (!msg)
            continue;
        zframe_t *id = zmsg_pop (msg);
        zframe_t *body = zmsg_pop (msg);
        Ak__Envelope *env = NULL;
        ak_err_t err = { 0 };
        assert_non_null (body);
        assert_int_equal (ak_envelope_unpack (zframe_data (body), zframe_size (body), 0, &env, &err), 0);
        zframe_destroy (&body);
        zmsg_destroy (&msg);
        zframe_destroy (&c->peer);
        c->peer = id;
        if (env->body_case == want)
            return env;
        ak_envelope_free (&env);
    }
    return NULL;
}

static void s_coord_assign (s_coord_t *c, Ak__Assign *a)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_ASSIGN;
    env.assign = a;
    s_coord_send (c, &env);
}

static void s_coord_ack (s_coord_t *c, const char *task_id, uint32_t attempt)
{
    Ak__Ack ack = AK__ACK__INIT;
    ack.task_id = (char *) task_id;
    ack.attempt = attempt;
    ack.receipt_id = (char *) "R1";
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    s_coord_send (c, &env);
}

static void test_daemon (void **state)
{
    (void) state;
    s_coord_t c = { 0 };
    zsys_handler_set (NULL);
    c.router = zsock_new (ZMQ_ROUTER);
    assert_non_null (c.router);
    /* A random port ("!"), not the first free one: a daemon left over by an
       earlier failed run keeps reconnecting to that one. */
    int port = zsock_bind (c.router, "tcp://127.0.0.1:!");
    assert_true (port > 0);
    c.endpoint = ak_sprintf ("tcp://127.0.0.1:%d", port);
    c.beat = true;
    char *cache = ak_sprintf ("%s/daemon-cache", s_fix.dir);
    char *log = ak_sprintf ("%s/daemon.log", s_fix.dir);
    char *argv[] = { s_fix.bin, "--coordinator", c.endpoint, "--id", "w-test", "--cache", cache,
                     "--backend", "host", "--heartbeat-ms", "200", "--liveness", "3", "--max-backoff-ms", "300",
                     "--compile-threads", "3", "--log-level", "info", NULL };
    pid_t pid = ak_test_spawn (argv, log);
    assert_true (pid > 0);

    /* Registration. */
    Ak__Envelope *env = s_coord_expect (&c, AK__ENVELOPE__BODY_HELLO, 10000);
    assert_non_null (env);
    Ak__Hello *h = env->hello;
    assert_string_equal (h->worker_id, "w-test");
    assert_int_equal (h->n_backends, 1);
    assert_string_equal (h->backends[0], "host");
    assert_int_equal (h->n_devices, 1);
    assert_string_equal (h->devices[0]->device_class, "host");
    assert_int_equal (h->devices[0]->slots, 1);
    assert_int_equal (h->slots, 1);
    assert_int_equal (h->prefetch, 3);                 /* no --prefetch: one task per compile thread */
    assert_int_equal (h->heartbeat_ms, 200);
    assert_int_equal (h->n_running, 0);
    ak_envelope_free (&env);
    s_coord_beat (&c);

    /* Garbage never hurts the daemon. */
    assert_int_equal (zmq_send (zsock_resolve (c.router), zframe_data (c.peer), zframe_size (c.peer),
                                ZMQ_SNDMORE), (int) zframe_size (c.peer));
    assert_int_equal (zmq_send (zsock_resolve (c.router), "\xff\x01garbage", 9, 0), 9);

    /* A task: STARTED, then the receipt, not acked yet. */
    const char *btext = ak_spec_baseline (s_fix.spec, "host")->source.text;
    Ak__Assign *a = s_assign ("D1", "tune", "same", btext, 30000);
    s_coord_assign (&c, a);
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_STARTED, 20000);
    assert_non_null (env);
    assert_string_equal (env->started->task_id, "D1");
    assert_int_equal (env->started->attempt, 1);
    ak_envelope_free (&env);
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_RECEIPT, 30000);
    assert_non_null (env);
    Ak__Receipt *r = env->receipt;
    s_expect_ok (r, true);
    assert_string_equal (r->task_id, "D1");
    assert_string_equal (r->worker_id, "w-test");
    assert_true (strlen (r->host) > 0);
    assert_non_null (r->device);
    assert_string_equal (r->device->backend, "host");
    assert_true (r->compile_ms > 0);
    assert_int_equal (strlen (r->options_digest), 64);
    ak_envelope_free (&env);

    /* Silence: the worker drops us, reconnects on a new socket, says HELLO
       and re-sends the unacked receipt. */
    c.beat = false;
    zframe_t *old = zframe_dup (c.peer);
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_HELLO, 5000);
    assert_non_null (env);
    assert_false (zframe_eq (old, c.peer));
    zframe_destroy (&old);
    ak_envelope_free (&env);
    c.beat = true;
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_RECEIPT, 5000);
    assert_non_null (env);
    assert_string_equal (env->receipt->task_id, "D1");
    ak_envelope_free (&env);

    /* Every DISCONNECT that follows the welcome to its last HELLO gets a
       HELLO, which lists the task whose receipt waits for its ACK, and the
       receipt again, however soon after that HELLO (two failed commits 7 ms
       apart: the second used to be ignored for 200 ms). */
    for (int i = 0; i < 2; i++) {
        s_coord_beat (&c);                      /* the welcome */
        Ak__Disconnect d = AK__DISCONNECT__INIT;
        d.reason = "the coordinator could not store your receipts: register again and re-send";
        Ak__Envelope denv = AK__ENVELOPE__INIT;
        denv.body_case = AK__ENVELOPE__BODY_DISCONNECT;
        denv.disconnect = &d;
        s_coord_send (&c, &denv);
        env = s_coord_expect (&c, AK__ENVELOPE__BODY_HELLO, 1000);
        if (!env)
            fail_msg ("DISCONNECT %d after the welcome: no HELLO", i + 1);
        assert_int_equal (env->hello->n_running, 1);
        assert_string_equal (env->hello->running[0]->task_id, "D1");
        ak_envelope_free (&env);
        env = s_coord_expect (&c, AK__ENVELOPE__BODY_RECEIPT, 2000);
        assert_non_null (env);
        assert_string_equal (env->receipt->task_id, "D1");
        ak_envelope_free (&env);
    }
    s_coord_ack (&c, "D1", 1);

    /* Heartbeats carry credits and the unacked count (now 0). */
    env = NULL;
    for (int i = 0; i < 20 && !env; i++) {
        env = s_coord_expect (&c, AK__ENVELOPE__BODY_HEARTBEAT, 1000);
        if (env && env->heartbeat->unacked != 0)
            ak_envelope_free (&env);
    }
    assert_non_null (env);
    assert_int_equal (env->heartbeat->credits, 4);         /* 1 slot + prefetch 3 */
    ak_envelope_free (&env);

    /* A crashing candidate: a "crashed" receipt naming SIGSEGV. */
    char *crash = s_read_src ("kernels/testing/crash.c");
    Ak__Assign *a2 = s_assign ("D2", "tune", "crash", crash, 30000);
    s_coord_assign (&c, a2);
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_RECEIPT, 30000);
    assert_non_null (env);
    assert_string_equal (env->receipt->task_id, "D2");
    assert_string_equal (env->receipt->status, "crashed");
    assert_non_null (strstr (env->receipt->reason, "SIGSEGV"));
    assert_string_equal (env->receipt->worker_id, "w-test");
    ak_envelope_free (&env);
    s_coord_ack (&c, "D2", 1);

    /* A broken source: compile_error with the log, no executor involved;
       then a good task runs on the fresh executor. */
    Ak__Assign *a3 = s_assign ("D3", "tune", "broken", "void ak_kernel (const ak_args_t *a) { nope }", 30000);
    s_coord_assign (&c, a3);
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_RECEIPT, 30000);
    assert_non_null (env);
    assert_string_equal (env->receipt->status, "compile_error");
    assert_non_null (strstr (env->receipt->reason, "candidate failed to compile"));
    assert_non_null (strstr (env->receipt->compile_log, "error"));
    ak_envelope_free (&env);
    s_coord_ack (&c, "D3", 1);
    ak_pb_set_str (&a->task_id, "D4");
    s_coord_assign (&c, a);
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_RECEIPT, 30000);
    assert_non_null (env);
    assert_string_equal (env->receipt->task_id, "D4");
    assert_string_equal (env->receipt->status, "ok");
    ak_envelope_free (&env);
    s_coord_ack (&c, "D4", 1);

    /* SIGTERM while a task hangs in its executor: a clean, prompt exit. */
    char *hang = s_read_src ("kernels/testing/hang.c");
    Ak__Assign *a4 = s_assign ("D5", "tune", "hang", hang, 30000);
    s_coord_assign (&c, a4);
    env = s_coord_expect (&c, AK__ENVELOPE__BODY_STARTED, 30000);
    assert_non_null (env);
    assert_string_equal (env->started->task_id, "D5");
    ak_envelope_free (&env);
    uint64_t t0 = ak_clock_mono_ms ();
    int status = ak_test_stop (pid, SIGTERM, 10000);
    assert_true (ak_clock_mono_ms () - t0 < 5000);
    ak__assign__free_unpacked (a4, NULL);
    free (hang);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);

    if (getenv ("AK_TEST_SHOW_LOGS")) {
        char *text = NULL;
        size_t len = 0;
        if (ak_file_read (log, 1 << 20, &text, &len, NULL) == 0)
            fprintf (stderr, "--- %s\n%s", log, text);
        free (text);
    }
    ak__assign__free_unpacked (a, NULL);
    ak__assign__free_unpacked (a2, NULL);
    ak__assign__free_unpacked (a3, NULL);
    free (crash);
    zframe_destroy (&c.peer);
    zsock_destroy (&c.router);
    free (c.endpoint);
    free (cache);
    free (log);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_signal_names),
        cmocka_unit_test (test_job_artifacts),
        cmocka_unit_test (test_good_jobs),
        cmocka_unit_test (test_job_with_artifacts),
        cmocka_unit_test (test_crash_then_fresh),
        cmocka_unit_test (test_hang_timeout),
        cmocka_unit_test (test_daemon),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
