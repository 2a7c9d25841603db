/*  tests/fault/test_hostile_kernels.c: host kernels that attack the worker
    (issue 15 item 6; worker/jobproc.c, worker/sandbox.c).

    Each kernel of tests/data/hostile/ does one hostile thing on its first
    call and then (where it goes on) computes the softmax baseline, so that
    only the attack can make its receipt differ from an honest one.  They
    run through real executors (akworker --executor, host backend), as the
    daemon runs them:
    - fork: the forked child is refused, and nothing it could start
      outlives the task;
    - print: 10 MB of output is captured and capped in the receipt, none
      of it reaches the worker's log;
    - files: a file outside the cache and scratch directories (a secret
      of this test, and /etc/shadow) cannot be read, a file outside the
      scratch directory cannot be written;
    - killparent: SIGKILL to its parent is refused, the executor and the
      worker (this process, once the kernel's parent) live on;
    - forge: a hand-made "ok 2.0x" receipt frame on the executor's old
      result descriptor (and every other) is never accepted;
    - include: `#include` of a file outside the include paths is refused
      before compile; no log or error quotes the file; and the compiler
      itself cannot open files outside the system's headers and its
      build directory. */
#include "support.h"
#include "hostexec.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/executor.h"
#include "worker/pbutil.h"
#include "worker/sandbox.h"
#include "digest.h"
#include "spec.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    char      *cache;              /* compile cache (the job process may read it) */
    char      *outside;            /* neither cache nor scratch: the kernels' targets */
    char      *secret_path;
    char       secret[64];         /* its content */
    char      *bin;
    ak_spec_t *spec;
    char      *spec_json;
    char      *ref_path, *base_path;
} s;

static char *s_build (const char *text, bool reference, ak_err_t *err, char **log_p)
{
    return ak_test_host_build (s.cache, text, reference, err, log_p);
}

static char *s_replace (const char *text, const char *what, const char *with)
{
    char *out = ak_strdup (text);
    size_t from = 0;
    for (char *at; (at = strstr (out + from, what)) != NULL; ) {
        *at = '\0';
        char *next = ak_sprintf ("%s%s%s", out, with, at + strlen (what));
        from = (size_t) (at - out) + strlen (with);
        free (out);
        out = next;
    }
    return out;
}

/*  tests/data/hostile/NAME.c with its placeholders filled, followed by
    the softmax host baseline whose first statement calls s_hostile once. */
static char *s_hostile_source (const char *name)
{
    char *rel = ak_sprintf ("tests/data/hostile/%s.c", name);
    char *path = ak_test_src (rel);
    char *text = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_read (path, 1 << 20, &text, &len, &err), 0);
    free (path);
    free (rel);
    char *a = s_replace (text, "@DIR@", s.outside);
    char *b = s_replace (a, "@SECRET@", s.secret_path);
    const char *base = ak_spec_baseline (s.spec, "host")->source.text;
    char *hooked = s_replace (base, "void ak_kernel (const ak_args_t *a)\n{\n",
                              "void ak_kernel (const ak_args_t *a)\n{\n"
                              "    static int hostile_done;\n"
                              "    if (!hostile_done++)\n"
                              "        s_hostile (a);\n");
    assert_non_null (strstr (hooked, "hostile_done"));
    char *full = ak_sprintf ("%s\n%s", b, hooked);
    free (text);
    free (a);
    free (b);
    free (hooked);
    return full;
}

static int s_group_setup (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    s.cache = ak_test_tmpdir ("hostile-cache");
    s.outside = ak_test_tmpdir ("hostile-outside");
    s.bin = ak_test_bin ("akworker");
    if (access (s.bin, X_OK) != 0) {
        fprintf (stderr, "%s is not built: build the akworker target first\n", s.bin);
        return -1;
    }
    uint8_t rnd[8];
    FILE *f = fopen ("/dev/urandom", "rb");
    assert_non_null (f);
    assert_int_equal (fread (rnd, 1, sizeof rnd, f), sizeof rnd);
    fclose (f);
    snprintf (s.secret, sizeof s.secret, "AKSECRET-%02x%02x%02x%02x%02x%02x%02x%02x: do not quote",
              rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    s.secret_path = ak_test_write (s.outside, "secret.txt", s.secret);
    char *spec_path = ak_test_src ("kernels/softmax/spec.json");
    assert_int_equal (ak_spec_load (spec_path, &s.spec, &err), 0);
    free (spec_path);
    s.spec_json = ak_spec_to_text (s.spec, false);
    s.ref_path = s_build (s.spec->reference.text, true, &err, NULL);
    s.base_path = s_build (ak_spec_baseline (s.spec, "host")->source.text, false, &err, NULL);
    assert_non_null (s.ref_path);
    assert_non_null (s.base_path);
    return 0;
}

static int s_group_teardown (void **state)
{
    (void) state;
    ak_spec_destroy (&s.spec);
    free (s.spec_json);
    free (s.ref_path);
    free (s.base_path);
    free (s.bin);
    free (s.secret_path);
    ak_test_rmtree (s.cache);
    ak_test_rmtree (s.outside);
    free (s.cache);
    free (s.outside);
    return 0;
}

/*  A tune task of softmax for candidate text, one small workload. */
static Ak__Assign *s_assign (const char *name, const char *text)
{
    const ak_test_job_opts_t o = {
        .rows = 16, .cols = 64, .run_timeout_ms = 60000, .max_samples = 5, .max_time_ms = 200, .seed = 7,
    };
    return ak_test_host_assign (s.spec, s.spec_json, name, "tune", name, text, &o);
}

/*  Builds the hostile kernel NAME and runs it as a tune task on a fresh
    executor; returns its receipt.  *exec_p (may be NULL) keeps the
    executor. */
static Ak__Receipt *s_run (const char *name, ak_exec_t **exec_p)
{
    char *text = s_hostile_source (name);
    ak_err_t err = { 0 };
    char *log = NULL;
    char *cand = s_build (text, false, &err, &log);
    if (!cand)
        fprintf (stderr, "%s: %s\n%s\n", name, err.msg, log ? log : "");
    assert_non_null (cand);
    free (log);
    Ak__Assign *a = s_assign (name, text);
    Ak__ExecJob job = AK__EXEC_JOB__INIT;
    job.assign = a;
    job.reference_path = s.ref_path;
    job.baseline_path = s.base_path;
    job.candidate_path = cand;
    ak_exec_t *e = NULL;
    assert_int_equal (ak_exec_new (s.bin, "host", 0, "warn", NULL, &e, &err), 0);
    Ak__Receipt *r = NULL;
    ak_exec_run (e, &job, 60000, &r, &err);
    assert_non_null (r);
    fprintf (stderr, "%s: %s: %s\n  sandbox: %s\n  output (%llu bytes%s): %.300s\n", name, r->status,
             r->reason, r->sandbox, (unsigned long long) r->kernel_output_bytes,
             r->kernel_output_truncated ? ", truncated" : "", r->kernel_output);
    if (exec_p)
        *exec_p = e;
    else
        ak_exec_destroy (&e);
    ak__assign__free_unpacked (a, NULL);
    free (cand);
    free (text);
    return r;
}

static bool s_landlock (void)
{
    const char *why = NULL;
    if (ak_sandbox_landlock_abi (&why) > 0)
        return true;
    ak_test_skip_note ("this kernel has no Landlock (%s): file confinement not tested here", why);
    return false;
}

/* ----------------------------------------------------------------- tests */

static void test_fork_leaves_nothing (void **state)
{
    (void) state;
    Ak__Receipt *r = s_run ("fork", NULL);
    char *pidfile = ak_path_join (s.outside, "forked.pid");
    char *text = NULL;
    size_t len = 0;
    pid_t child = 0;
    if (ak_file_read (pidfile, 64, &text, &len, NULL) == 0) {
        child = (pid_t) atoi (text);
        free (text);
    }
    bool alive = child > 0 && kill (child, 0) == 0;
    if (alive)
        kill (child, SIGKILL);        /* leave nothing behind, then fail */
    unlink (pidfile);
    free (pidfile);
    assert_false (alive);
    assert_string_equal (r->status, "ok");
    assert_non_null (strstr (r->kernel_output, "fork: -1"));
    assert_non_null (strstr (r->sandbox, "own process group"));
    ak__receipt__free_unpacked (r, NULL);
}

static void test_output_capped (void **state)
{
    (void) state;
    Ak__Receipt *r = s_run ("print", NULL);
    assert_string_equal (r->status, "ok");
    assert_true (r->kernel_output_truncated);
    assert_true (r->kernel_output_bytes >= 10u * 1024 * 1024 - 16 * 1024);
    assert_true (strlen (r->kernel_output) <= 64u * 1024);
    assert_non_null (strstr (r->kernel_output, "AAAAAAAA"));
    ak__receipt__free_unpacked (r, NULL);
}

static void test_files_denied (void **state)
{
    (void) state;
    Ak__Receipt *r = s_run ("files", NULL);
    char *written = ak_path_join (s.outside, "written");
    bool wrote = access (written, F_OK) == 0;
    unlink (written);
    free (written);
    assert_false (wrote);
    assert_string_equal (r->status, "ok");
    assert_null (strstr (r->kernel_output, "AKSECRET"));
    /* /etc/shadow, where this test can read it, is never quoted */
    char *shadow = NULL;
    size_t len = 0;
    if (ak_file_read ("/etc/shadow", 1 << 20, &shadow, &len, NULL) == 0 && len > 8) {
        shadow[8] = '\0';
        assert_null (strstr (r->kernel_output, shadow));
    }
    free (shadow);
    if (s_landlock ()) {
        assert_non_null (strstr (r->kernel_output, "secret.txt: Permission denied"));
        assert_non_null (strstr (r->sandbox, "landlock abi"));
    }
    else
        assert_non_null (strstr (r->sandbox, "NO landlock"));
    ak__receipt__free_unpacked (r, NULL);
}

static void test_kill_parent_denied (void **state)
{
    (void) state;
    ak_exec_t *e = NULL;
    Ak__Receipt *r = s_run ("killparent", &e);
    /* this process (the kernel's parent when kernels ran in the executor)
       is alive to check; the executor answered and is alive too */
    assert_string_equal (r->status, "ok");
    assert_non_null (strstr (r->kernel_output, "kill parent: Operation not permitted"));
    assert_true (ak_exec_pid (e) > 0);
    assert_int_equal (kill (ak_exec_pid (e), 0), 0);
    ak_exec_destroy (&e);
    ak__receipt__free_unpacked (r, NULL);
}

static void test_forged_frame_refused (void **state)
{
    (void) state;
    Ak__Receipt *r = s_run ("forge", NULL);
    assert_string_not_equal (r->status, "ok");
    assert_null (strstr (r->reason, "2.0x"));
    assert_non_null (strstr (r->reason, "did not verify"));
    ak__receipt__free_unpacked (r, NULL);
}

static void test_include_refused (void **state)
{
    (void) state;
    char *hostile = s_hostile_source ("include");
    const char *shadow = "#include \"/etc/shadow\"\nvoid ak_kernel (const ak_args_t *a) { (void) a; }\n";
    const char *texts[] = { hostile, shadow };
    char *etc = NULL;
    size_t elen = 0;
    if (ak_file_read ("/etc/shadow", 1 << 20, &etc, &elen, NULL) == 0 && elen > 8)
        etc[8] = '\0';
    for (size_t i = 0; i < 2; i++) {
        ak_err_t err = { 0 };
        char *log = NULL;
        char *art = s_build (texts[i], false, &err, &log);
        fprintf (stderr, "include %zu: %s\n%.400s\n", i, err.msg, log ? log : "");
        assert_null (art);
        assert_int_equal (err.code, AK_EINVAL);
        assert_non_null (strstr (err.msg, "refused"));
        assert_null (strstr (err.msg, "AKSECRET"));
        assert_true (!log || !strstr (log, "AKSECRET"));
        if (etc) {
            assert_null (strstr (err.msg, etc));
            assert_true (!log || !strstr (log, etc));
        }
        free (log);
    }
    /* the same check guards the CUDA backend: every compile starts with it */
    ak_compile_req_t req;
    ak_compile_out_t out;
    memset (&req, 0, sizeof req);
    req.source = shadow;
    req.source_len = strlen (shadow);
    req.cache_dir = s.cache;
    ak_err_t err = { 0 };
    assert_int_equal (ak_compile_req_check (&req, &out, "cuda", &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "/etc/shadow"));
    free (etc);
    free (hostile);
}

/*  The compiler itself is confined: a file the scan lets through (a
    pragma that only looks at a file's date) is still out of its reach. */
static void test_compiler_confined (void **state)
{
    (void) state;
    if (!s_landlock ())
        return;
    char *text = ak_sprintf ("#pragma GCC dependency \"%s\"\nvoid ak_kernel (const ak_args_t *a) { (void) a; }\n",
                             s.secret_path);
    ak_err_t err = { 0 };
    char *log = NULL;
    char *art = s_build (text, false, &err, &log);
    fprintf (stderr, "pragma: %s\n%.400s\n", err.msg, log ? log : "");
    assert_null (art);
    assert_int_equal (err.code, AK_ECOMPILE);
    assert_non_null (strstr (log, "Permission denied"));
    free (log);
    free (text);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_fork_leaves_nothing),
        cmocka_unit_test (test_output_capped),
        cmocka_unit_test (test_files_denied),
        cmocka_unit_test (test_kill_parent_denied),
        cmocka_unit_test (test_forged_frame_refused),
        cmocka_unit_test (test_include_refused),
        cmocka_unit_test (test_compiler_confined),
    };
    /* AK_TEST_FILTER=test_forged*: one of them (cmocka's pattern) */
    if (getenv ("AK_TEST_FILTER"))
        cmocka_set_test_filter (getenv ("AK_TEST_FILTER"));
    return ak_test_exit (cmocka_run_group_tests (tests, s_group_setup, s_group_teardown));
}
