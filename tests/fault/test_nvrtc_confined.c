/*  tests/fault/test_nvrtc_confined.c: the CUDA backend's compile helper
    (ak-nvrtc, worker/nvrtc_run.h) holds its limits, and no compile can
    hang the worker.

    - a source that includes /etc/shadow is refused by the CUDA backend
      before any helper starts (the include scan);
    - a compile that burns CPU past the helper's CPU limit is stopped
      with an error naming the kernel and the limit, and one past the wall
      limit likewise (the wait is bounded; the helper is reaped);
    - the helper cannot write outside its scratch folder, nor make NVRTC
      read a file outside the toolkit (Landlock; skipped visibly on a
      kernel without it);
    - the helper dies with the process that started it (a worker killed
      with SIGKILL mid-compile leaves no NVRTC running);
    - a missing helper is a clear error, never an unconfined compile.
    NVRTC without a GPU is enough; without NVRTC the binary skips. */
#include "support.h"
#include "skip.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/nvrtc_run.h"
#include "worker/sandbox.h"
#include "util.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if AK_HAVE_CUDA

static char *s_dir;
static const char *s_nvrtc = "";

/*  A macro whose expansion doubles the preprocessor's work at every
    level and keeps its memory flat: A28 takes NVRTC minutes of CPU
    (A22 about 6 s on a 2-core box) in about 100 MB. */
static char *s_slow_source (void)
{
    char *s = ak_strdup ("#define A0(x) x\n");
    for (int i = 1; i <= 28; i++) {
        char *t = ak_sprintf ("%s#define A%d(x) A%d(A%d(x))\n", s, i, i - 1, i - 1);
        free (s);
        s = t;
    }
    char *t = ak_sprintf ("%sextern \"C\" __global__ void k (int *p) { p[0] = A28(1); }\n", s);
    free (s);
    return t;
}

static int s_setup (void **state)
{
    (void) state;
    s_dir = ak_test_tmpdir ("nvrtc-confined");
    return s_dir ? 0 : -1;
}

/*  Every test starts here: skips (visibly) without NVRTC, else finds the
    NVRTC library's absolute path once. */
static void s_need_nvrtc (void)
{
    ak_test_cuda_or_skip (false, NULL, NULL);
    s_nvrtc = ak_test_nvrtc_file ();
}

static int s_teardown (void **state)
{
    (void) state;
    if (s_dir)
        ak_test_rmtree (s_dir);
    free (s_dir);
    return 0;
}

/*  A fresh scratch folder under s_dir; caller frees. */
static char *s_scratch (const char *tag)
{
    char *p = ak_sprintf ("%s/%s", s_dir, tag);
    assert_int_equal (mkdir (p, 0700), 0);
    return p;
}

static const char *const s_opts[] = { "--gpu-architecture=sm_90", "--std=c++17" };

static ak_nvrtc_job_t s_job (const char *name, const char *text, const char *scratch, const char *cubin)
{
    ak_nvrtc_job_t job = { .name = name, .nvrtc_path = s_nvrtc, .text = text, .text_len = strlen (text),
                           .opts = s_opts, .nopts = 2, .scratch_dir = scratch, .cubin_path = cubin,
                           .timeout_ms = 120000 };
    return job;
}

/*  Without the helper beside this program (nor in $AK_BIN_DIR) a compile
    is refused with a clear error; nothing compiles unconfined.  In a
    child: the helper's path is found once per process. */
static void test_no_helper (void **state)
{
    (void) state;
    s_need_nvrtc ();
    char *scratch = s_scratch ("nohelper");
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        unsetenv ("AK_BIN_DIR");
        const char *src = "extern \"C\" __global__ void k () {}\n";
        char *cubin = ak_path_join (scratch, "kernel.cubin");
        ak_nvrtc_job_t job = s_job ("candidate lost", src, scratch, cubin);
        char *log = NULL;
        ak_err_t err = { 0 };
        int rc = ak_nvrtc_run (&job, &log, &err);
        fprintf (stderr, "no helper: %s\n", err.msg);
        bool ok = rc == AK_EUNAVAIL && strstr (err.msg, "compile of candidate lost")
                  && strstr (err.msg, "ak-nvrtc not found") && access (cubin, F_OK) != 0;
        _exit (ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    free (scratch);
}

static void test_shadow_refused (void **state)
{
    (void) state;
    s_need_nvrtc ();
    const ak_backend_t *be = ak_backend_find ("cuda");
    assert_non_null (be);
    Ak__Device dev;
    ak__device__init (&dev);
    dev.cc_major = 9;
    const char *src = "#include \"/etc/shadow\"\nextern \"C\" __global__ void ak_kernel () {}\n";
    ak_compile_req_t req;
    memset (&req, 0, sizeof req);
    req.source = src;
    req.source_len = strlen (src);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = s_dir;
    req.device = &dev;
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    assert_int_equal (be->compile (&req, &out, &err), AK_EINVAL);
    print_message ("%s\n", err.msg);
    assert_non_null (strstr (err.msg, "refused"));
    assert_non_null (strstr (err.msg, "/etc/shadow"));
    /* before NVRTC: no log, nothing built */
    assert_true (!out.log || !out.log[0]);
    assert_null (out.artifact_path);
    free (out.log);
}

/*  A thread inside dl_iterate_phdr holds the dynamic loader's lock until
    released: the lock a fork taken at that moment copies, held, into the
    child. */
static pthread_mutex_t s_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t s_hold_cv = PTHREAD_COND_INITIALIZER;
static int s_hold_state;                /* 0 wait, 1 holding, 2 release */

static int s_hold_cb (struct dl_phdr_info *info, size_t size, void *arg)
{
    (void) info;
    (void) size;
    (void) arg;
    pthread_mutex_lock (&s_hold_mu);
    s_hold_state = 1;
    pthread_cond_broadcast (&s_hold_cv);
    while (s_hold_state != 2)
        pthread_cond_wait (&s_hold_cv, &s_hold_mu);
    pthread_mutex_unlock (&s_hold_mu);
    return 1;
}

static void *s_hold_loader (void *arg)
{
    (void) arg;
    dl_iterate_phdr (s_hold_cb, NULL);
    return NULL;
}

/*  A compile while another thread of the process holds the loader's lock
    (as a daemon thread opening a library might at any moment): NVRTC
    loads its builtins library while compiling, so a child forked without
    exec waited for that lock for ever and the compile timed out; the
    exec'd helper has locks of its own and builds.  The same bug class as
    the AddressSanitizer allocator's lock that hung test_cuda_spaces, made
    deterministic. */
static void test_lock_held_across_fork (void **state)
{
    (void) state;
    s_need_nvrtc ();
    const ak_backend_t *be = ak_backend_find ("cuda");
    Ak__Device dev;
    ak__device__init (&dev);
    dev.cc_major = 9;
    char *cache = s_scratch ("lockcache");
    ak_compile_req_t req;
    memset (&req, 0, sizeof req);
    req.source = "extern \"C\" __global__ void ak_kernel (int *p) { p[0] = 3; }\n";
    req.source_len = strlen (req.source);
    req.dtype = AK_DT_FLOAT32;
    req.cache_dir = cache;
    req.device = &dev;
    req.timeout_ms = 60000;
    req.name = "candidate locked";
    ak_compile_out_t out = { 0 };
    ak_err_t err = { 0 };
    /* once: every lazy set-up of the backend done before the lock is held */
    if (be->compile (&req, &out, &err) != 0)
        fail_msg ("%s\n%s", err.msg, out.log ? out.log : "");
    free (out.artifact_path);
    free (out.log);
    req.define_names[0] = "LOCKED";
    req.define_values[0] = 1;
    req.ndefines = 1;                   /* another key: a real compile */

    pthread_t th;
    s_hold_state = 0;
    assert_int_equal (pthread_create (&th, NULL, s_hold_loader, NULL), 0);
    pthread_mutex_lock (&s_hold_mu);
    while (s_hold_state != 1)
        pthread_cond_wait (&s_hold_cv, &s_hold_mu);
    pthread_mutex_unlock (&s_hold_mu);
    memset (&out, 0, sizeof out);
    int rc = be->compile (&req, &out, &err);
    pthread_mutex_lock (&s_hold_mu);
    s_hold_state = 2;
    pthread_cond_broadcast (&s_hold_cv);
    pthread_mutex_unlock (&s_hold_mu);
    pthread_join (th, NULL);
    if (rc != 0)
        fail_msg ("compile with the loader's lock held elsewhere: %s\n%s", err.msg, out.log ? out.log : "");
    assert_false (out.cached);
    free (out.artifact_path);
    free (out.log);
    free (cache);
}

/*  A compile past its CPU limit (1 s here; the wall limit is 2 minutes)
    is stopped by the kernel and reported as such. */
static void test_cpu_limit (void **state)
{
    (void) state;
    s_need_nvrtc ();
    char *src = s_slow_source ();
    char *scratch = s_scratch ("cpu");
    char *cubin = ak_path_join (scratch, "kernel.cubin");
    ak_nvrtc_job_t job = s_job ("candidate spin", src, scratch, cubin);
    job.cpu_s = 1;
    char *log = NULL;
    ak_err_t err = { 0 };
    int rc = ak_nvrtc_run (&job, &log, &err);
    print_message ("%s\nlog: %s\n", err.msg, log);
    assert_int_equal (rc, AK_ETIMEOUT);
    assert_non_null (strstr (err.msg, "compile of candidate spin"));
    assert_non_null (strstr (err.msg, "CPU limit of 1 s"));
    assert_non_null (strstr (log, "CPU limit"));
    assert_int_equal (access (cubin, F_OK), -1);
    free (log);
    free (cubin);
    free (scratch);
    free (src);
}

/*  The same compile under a wall limit of 1.5 s: killed, reaped, named. */
static void test_wall_limit (void **state)
{
    (void) state;
    s_need_nvrtc ();
    char *src = s_slow_source ();
    char *scratch = s_scratch ("wall");
    char *cubin = ak_path_join (scratch, "kernel.cubin");
    ak_nvrtc_job_t job = s_job ("candidate spin", src, scratch, cubin);
    job.timeout_ms = 1500;
    job.cpu_s = 600;
    char *log = NULL;
    ak_err_t err = { 0 };
    int rc = ak_nvrtc_run (&job, &log, &err);
    print_message ("%s\n", err.msg);
    assert_int_equal (rc, AK_ETIMEOUT);
    assert_non_null (strstr (err.msg, "compile of candidate spin"));
    assert_non_null (strstr (err.msg, "compile time limit of 1500 ms"));
    /* reaped: this process has no child left */
    assert_int_equal (waitpid (-1, NULL, WNOHANG), -1);
    assert_int_equal (errno, ECHILD);
    free (log);
    free (cubin);
    free (scratch);
    free (src);
}

/*  The helper writes its scratch folder only: a CUBIN path outside it is
    refused by Landlock, and the error names the path. */
static void test_write_outside_scratch (void **state)
{
    (void) state;
    s_need_nvrtc ();
    const char *why = NULL;
    if (ak_sandbox_landlock_abi (&why) <= 0)
        ak_test_skip ("no Landlock here (%s): the helper's writes are not confined", why);
    char *scratch = s_scratch ("write");
    char *outside = ak_path_join (s_dir, "outside.cubin");
    const char *src = "extern \"C\" __global__ void k (int *p) { p[0] = 1; }\n";
    ak_nvrtc_job_t job = s_job ("candidate writer", src, scratch, outside);
    char *log = NULL;
    ak_err_t err = { 0 };
    int rc = ak_nvrtc_run (&job, &log, &err);
    print_message ("%s\n", err.msg);
    assert_int_equal (rc, AK_EIO);
    assert_non_null (strstr (err.msg, "outside.cubin"));
    assert_non_null (strstr (err.msg, "Permission denied"));
    assert_int_equal (access (outside, F_OK), -1);
    free (log);
    /* the same job inside the scratch folder builds */
    char *inside = ak_path_join (scratch, "kernel.cubin");
    job.cubin_path = inside;
    assert_int_equal (ak_nvrtc_run (&job, &log, &err), 0);
    assert_int_equal (access (inside, R_OK), 0);
    free (log);
    free (inside);
    free (outside);
    free (scratch);
}

/*  NVRTC in the helper cannot read a file outside the toolkit, even from
    a source that got past the include scan (this test hands the text to
    the helper directly): the log never quotes it. */
static void test_read_outside (void **state)
{
    (void) state;
    s_need_nvrtc ();
    const char *why = NULL;
    if (ak_sandbox_landlock_abi (&why) <= 0)
        ak_test_skip ("no Landlock here (%s): NVRTC's reads are not confined", why);
    char *secret = ak_test_write (s_dir, "secret.h", "AKSECRET_7f3a is not C++\n");
    char *scratch = s_scratch ("read");
    char *cubin = ak_path_join (scratch, "kernel.cubin");
    char *src = ak_sprintf ("#include \"%s\"\nextern \"C\" __global__ void k () {}\n", secret);
    ak_nvrtc_job_t job = s_job ("candidate reader", src, scratch, cubin);
    char *log = NULL;
    ak_err_t err = { 0 };
    int rc = ak_nvrtc_run (&job, &log, &err);
    print_message ("%s\nlog: %.400s\n", err.msg, log);
    assert_int_equal (rc, AK_ECOMPILE);
    assert_non_null (strstr (log, "cannot open source file"));
    assert_null (strstr (log, "AKSECRET"));
    free (log);
    free (src);
    free (cubin);
    free (scratch);
    free (secret);
}

static bool s_gone (void *arg)
{
    pid_t pid = *(pid_t *) arg;
    char path[64], *stat = NULL;
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    if (kill (pid, 0) != 0)
        return true;
    /* a zombie waiting for a reaper (PID 1 of a container may not reap) is dead too */
    stat = ak_test_read (path);
    bool zombie = stat && strstr (stat, ") Z ");
    free (stat);
    return zombie;
}

/*  The first child of pid (its compile helper), 0 when none yet. */
static pid_t s_child_of (pid_t pid)
{
    char path[64];
    snprintf (path, sizeof path, "/proc/%d/task/%d/children", (int) pid, (int) pid);
    char *text = ak_test_read (path);
    pid_t c = text ? (pid_t) atoi (text) : 0;
    free (text);
    return c;
}

static bool s_has_child (void *arg)
{
    return s_child_of (*(pid_t *) arg) > 0;
}

/*  A "worker" (a child of this test) killed with SIGKILL in the middle of
    a compile takes its helper with it. */
static void test_dies_with_worker (void **state)
{
    (void) state;
    s_need_nvrtc ();
    char *src = s_slow_source ();
    char *scratch = s_scratch ("orphan");
    char *cubin = ak_path_join (scratch, "kernel.cubin");
    pid_t worker = fork ();
    assert_true (worker >= 0);
    if (worker == 0) {
        ak_nvrtc_job_t job = s_job ("candidate orphan", src, scratch, cubin);
        job.timeout_ms = 600000;
        char *log = NULL;
        ak_err_t err = { 0 };
        ak_nvrtc_run (&job, &log, &err);
        _exit (0);
    }
    assert_true (ak_test_wait (s_has_child, &worker, 60000));
    pid_t helper = s_child_of (worker);
    print_message ("worker %d, helper %d\n", (int) worker, (int) helper);
    assert_true (helper > 0);
    assert_int_equal (kill (worker, SIGKILL), 0);
    assert_int_equal (waitpid (worker, NULL, 0), worker);
    assert_true (ak_test_wait (s_gone, &helper, 60000));
    free (cubin);
    free (scratch);
    free (src);
}

#endif

int main (void)
{
#if AK_HAVE_CUDA
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_no_helper),
        cmocka_unit_test (test_shadow_refused),
        cmocka_unit_test (test_lock_held_across_fork),
        cmocka_unit_test (test_cpu_limit),
        cmocka_unit_test (test_wall_limit),
        cmocka_unit_test (test_write_outside_scratch),
        cmocka_unit_test (test_read_outside),
        cmocka_unit_test (test_dies_with_worker),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, s_setup, s_teardown));
#else
    ak_test_skip_note ("built without the CUDA backend");
    return ak_test_exit (0);
#endif
}
