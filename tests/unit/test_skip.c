/*  tests/unit/test_skip.c: when a CUDA test may skip (tests/skip.c).

    The verdict on what the CUDA probe found is a pure function: only "no
    GPU" (no CUDA backend built, no libcuda.so.1, cuInit answering
    CUDA_ERROR_NO_DEVICE, no device counted) skips; every other probe error
    (a driver too old, cuInit failing otherwise, NVRTC missing or too old
    beside a working driver, the backend's probe failing) fails naming it;
    AK_REQUIRE_GPU=1 turns a skip into a failure.  And the exit status: a
    binary that skipped and did not fail exits 77 (CTest's "Not Run"). */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"
#include "worker/backend.h"

/* A host with a working GPU, as far as each step goes. */
static ak_test_cuda_facts_t s_gpu_host (void)
{
    ak_test_cuda_facts_t f;
    memset (&f, 0, sizeof f);
    f.backend = true;
    f.libcuda = true;
    f.count = 1;
    f.nvrtc_found = true;
    return f;
}

static ak_test_verdict_t s_judge (const ak_test_cuda_facts_t *f, bool need_device, const char *needle)
{
    char why[1100] = "";
    ak_test_verdict_t v = ak_test_cuda_verdict (f, need_device, why, sizeof why);
    print_message ("  %s -> %s\n", v == AK_TEST_RUN ? "run" : v == AK_TEST_SKIP ? "skip" : "fail", why);
    if (needle && !strstr (why, needle))
        fail_msg ("the reason \"%s\" does not name \"%s\"", why, needle);
    return v;
}

static void test_no_gpu_skips (void **state)
{
    (void) state;
    ak_test_cuda_facts_t f = s_gpu_host ();
    assert_int_equal (s_judge (&f, true, "device"), AK_TEST_RUN);

    f.backend = false;
    assert_int_equal (s_judge (&f, true, "no CUDA backend"), AK_TEST_SKIP);
    assert_int_equal (s_judge (&f, false, "no CUDA backend"), AK_TEST_SKIP);

    f = s_gpu_host ();
    f.libcuda = false;
    snprintf (f.libcuda_why, sizeof f.libcuda_why, "libcuda.so.1: cannot open shared object file");
    assert_int_equal (s_judge (&f, true, "libcuda.so.1: cannot open"), AK_TEST_SKIP);

    f = s_gpu_host ();
    f.init_result = AK_TEST_CU_NO_DEVICE;
    assert_int_equal (s_judge (&f, true, "CUDA_ERROR_NO_DEVICE"), AK_TEST_SKIP);

    f = s_gpu_host ();
    f.count = 0;
    assert_int_equal (s_judge (&f, true, "0 devices"), AK_TEST_SKIP);

    /* NVRTC alone: neither NVRTC nor a driver here */
    f = s_gpu_host ();
    f.libcuda = false;
    f.nvrtc_found = false;
    f.nvrtc_rc = AK_EUNAVAIL;
    snprintf (f.nvrtc_why, sizeof f.nvrtc_why, "NVRTC: libnvrtc.so.13: cannot open shared object file");
    assert_int_equal (s_judge (&f, false, "libnvrtc.so.13"), AK_TEST_SKIP);
    f.nvrtc_rc = 0;
    assert_int_equal (s_judge (&f, false, NULL), AK_TEST_RUN);
}

static void test_probe_errors_fail (void **state)
{
    (void) state;
    /* a driver that opens but is too old */
    ak_test_cuda_facts_t f = s_gpu_host ();
    f.driver_rc = AK_EUNAVAIL;
    snprintf (f.driver_why, sizeof f.driver_why, "CUDA driver: CUDA driver supports CUDA 12.4; this worker needs 13.0");
    assert_int_equal (s_judge (&f, true, "supports CUDA 12.4"), AK_TEST_FAIL);

    /* cuInit failing other than "no device": 999, 3, 803 ... */
    const int broken[] = { 999, 3, 4, 803, 804, 34 };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        f = s_gpu_host ();
        f.init_result = broken[i];
        snprintf (f.init_name, sizeof f.init_name, "CUresult %d", broken[i]);
        assert_int_equal (s_judge (&f, true, f.init_name), AK_TEST_FAIL);
    }

    f = s_gpu_host ();
    f.count_result = 999;
    snprintf (f.count_name, sizeof f.count_name, "CUDA_ERROR_UNKNOWN");
    assert_int_equal (s_judge (&f, true, "cuDeviceGetCount failed: CUDA_ERROR_UNKNOWN"), AK_TEST_FAIL);

    /* NVRTC missing beside a working GPU */
    f = s_gpu_host ();
    f.nvrtc_found = false;
    f.nvrtc_rc = AK_EUNAVAIL;
    snprintf (f.nvrtc_why, sizeof f.nvrtc_why, "NVRTC: libnvrtc.so.13: cannot open shared object file");
    assert_int_equal (s_judge (&f, true, "libnvrtc.so.13"), AK_TEST_FAIL);
    /* ... and for a test that needs NVRTC alone, where the driver is here */
    assert_int_equal (s_judge (&f, false, "driver is here"), AK_TEST_FAIL);
    /* NVRTC there but too old: fails even without a driver */
    f.libcuda = false;
    f.nvrtc_found = true;
    snprintf (f.nvrtc_why, sizeof f.nvrtc_why, "NVRTC: libnvrtc.so.12 is NVRTC 12.4; this worker needs 13.0");
    assert_int_equal (s_judge (&f, false, "NVRTC 12.4"), AK_TEST_FAIL);

    /* the backend's own probe failing where everything else worked */
    f = s_gpu_host ();
    f.probe_rc = AK_EINTERNAL;
    snprintf (f.probe_why, sizeof f.probe_why, "cuDeviceGetAttribute: CUDA_ERROR_INVALID_VALUE");
    assert_int_equal (s_judge (&f, true, "probe failed"), AK_TEST_FAIL);
}

static void test_require_gpu (void **state)
{
    (void) state;
    ak_test_cuda_facts_t f = s_gpu_host ();
    f.require = true;
    assert_int_equal (s_judge (&f, true, NULL), AK_TEST_RUN);
    f.init_result = AK_TEST_CU_NO_DEVICE;
    assert_int_equal (s_judge (&f, true, "AK_REQUIRE_GPU=1"), AK_TEST_FAIL);
    f = s_gpu_host ();
    f.require = true;
    f.backend = false;
    assert_int_equal (s_judge (&f, true, "AK_REQUIRE_GPU=1"), AK_TEST_FAIL);
    assert_int_equal (s_judge (&f, false, "AK_REQUIRE_GPU=1"), AK_TEST_FAIL);
    f = s_gpu_host ();
    f.require = true;
    f.libcuda = false;
    assert_int_equal (s_judge (&f, true, "AK_REQUIRE_GPU=1"), AK_TEST_FAIL);
}

/* Whatever this host has, the live probe agrees with the pure verdict's
   rules: a skip names "no GPU", and AK_REQUIRE_GPU=1 never skips. */
static void test_this_host (void **state)
{
    (void) state;
    char why[1100];
    Ak__Device **devs = NULL;
    size_t n = 0;
    unsetenv ("AK_REQUIRE_GPU");
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        /* in a child: a skip here must not mark this binary skipped */
        ak_test_verdict_t v = ak_test_need_cuda (true, &devs, &n, why, sizeof why);
        if (v == AK_TEST_SKIP && !strstr (why, "no GPU"))
            _exit (3);
        if (v == AK_TEST_RUN && n == 0)
            _exit (4);
        setenv ("AK_REQUIRE_GPU", "1", 1);
        ak_test_verdict_t r = ak_test_need_cuda (true, &devs, &n, why, sizeof why);
        _exit (r == AK_TEST_SKIP ? 5 : v == AK_TEST_SKIP && r != AK_TEST_FAIL ? 6 : 0);
    }
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
}

/* The exit status CTest reads: 77 only for a skip without a failure. */
static void test_exit_status (void **state)
{
    (void) state;
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        int clean = ak_test_exit (0);
        ak_test_skip_note ("a reason");
        int skipped = ak_test_exit (0), failed = ak_test_exit (2), seventyseven = ak_test_exit (77);
        _exit (clean == 0 && skipped == AK_TEST_SKIPPED && failed == 2 && seventyseven == 78 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_no_gpu_skips),
        cmocka_unit_test (test_probe_errors_fail),
        cmocka_unit_test (test_require_gpu),
        cmocka_unit_test (test_this_host),
        cmocka_unit_test (test_exit_status),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
