/*  tests/skip.h: skips that CTest sees, and when a CUDA test may skip.

    A cmocka skip() alone passes: the binary exits 0 and CTest counts it
    as passed.  Here a test that skips says why (one line "SKIP: <why>"),
    and main returns ak_test_exit (failed): AK_TEST_SKIPPED (77, the
    SKIP_RETURN_CODE tests/CMakeLists.txt gives every test) when something
    was skipped and nothing failed, so CTest lists the binary as "Not Run"
    with the reason in its output.

    The CUDA tests skip only where there is nothing to test: no CUDA
    backend in the build, no NVIDIA driver (libcuda.so.1 does not open),
    cuInit answering CUDA_ERROR_NO_DEVICE or no device counted (and for
    the NVRTC-only tests, no NVRTC on a host without a driver).  Every
    other probe error fails the test naming it: a driver that opens but is
    too old, cuInit failing any other way, NVRTC missing or too old where
    the driver works, the backend's probe failing.  AK_REQUIRE_GPU=1 (set
    it on a GPU machine) turns every CUDA skip into a failure.

    Never: skip on an error that could be a defect; skip without a reason. */
#ifndef AK_TEST_SKIP_H
#define AK_TEST_SKIP_H
#include <stdbool.h>
#include <stddef.h>

struct Ak__Device;                 /* the probe's devices (akfleet.pb-c.h) */

/* The exit status of a binary that skipped (CTest SKIP_RETURN_CODE). */
#define AK_TEST_SKIPPED 77

/* Prints "SKIP: <why>" and marks the binary skipped; the test goes on
   (for a part of a test that cannot run here). */
void ak_test_skip_note (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* ak_test_skip_note, then cmocka's skip () (ends the test). */
#define ak_test_skip(...) do { ak_test_skip_note (__VA_ARGS__); skip (); } while (0)

/* A CUDA capability the device lacks (a dtype, CUPTI, the blocking
   kernel): ak_test_skip_note, or a failure when AK_REQUIRE_GPU=1; the
   test goes on ... */
#define ak_test_skip_gpu_note(...)                                             \
    do {                                                                       \
        if (ak_test_require_gpu ())                                            \
            fail_msg ("AK_REQUIRE_GPU=1 and this test would skip: " __VA_ARGS__); \
        ak_test_skip_note (__VA_ARGS__);                                       \
    } while (0)
/* ... or ends here. */
#define ak_test_skip_gpu(...) do { ak_test_skip_gpu_note (__VA_ARGS__); skip (); } while (0)

/* What main returns: failed (cmocka's count) when non-zero, else
   AK_TEST_SKIPPED when anything was skipped, else 0. */
int  ak_test_exit (int failed);

/* $AK_REQUIRE_GPU is "1". */
bool ak_test_require_gpu (void);

/* ------------------------------------------------ the CUDA probe, judged */

typedef enum { AK_TEST_RUN = 0, AK_TEST_SKIP = 1, AK_TEST_FAIL = -1 } ak_test_verdict_t;

/* CUDA_ERROR_NO_DEVICE (checked against cuda.h where it is there). */
#define AK_TEST_CU_NO_DEVICE 100

/*  What the CUDA probe found, step by step in this order; a step after
    the one that decides is not looked at. */
typedef struct {
    bool backend;                  /* the build has the CUDA backend */
    bool libcuda;                  /* dlopen ("libcuda.so.1") worked */
    int  driver_rc;                /* ak_cuda_load_driver: 0 or AK_EUNAVAIL (too old ...) */
    int  init_result;              /* cuInit's CUresult */
    int  count_result;             /* cuDeviceGetCount's CUresult */
    int  count;                    /* devices it counted */
    bool nvrtc_found;              /* a libnvrtc opened (usable or not) */
    int  nvrtc_rc;                 /* ak_cuda_load_nvrtc */
    int  probe_rc;                 /* the backend's probe */
    /* what each step said, for the verdict's reason */
    char libcuda_why[256], driver_why[512], init_name[64], count_name[64], nvrtc_why[512], probe_why[512];
    bool require;                  /* AK_REQUIRE_GPU=1 */
} ak_test_cuda_facts_t;

/*  The verdict on facts for a test that needs a device (need_device) or
    only NVRTC, with the reason in why ("no GPU: cuInit: CUDA_ERROR_NO_DEVICE",
    "cuInit failed: CUDA_ERROR_UNKNOWN ...").  A pure function. */
ak_test_verdict_t ak_test_cuda_verdict (const ak_test_cuda_facts_t *facts, bool need_device,
                                        char *why, size_t len);

/*  Probes this host (fills facts as far as the deciding step) and judges
    it.  AK_TEST_RUN: with need_device, *devs_p / *n_p hold the backend's
    probe (caller frees each with ak__device__free_unpacked, then the
    array).  AK_TEST_SKIP: printed "SKIP: <why>" and marked the binary
    skipped.  AK_TEST_FAIL: printed "FAIL: <why>" on stderr.  devs_p and
    n_p may be NULL (the devices are then not kept). */
ak_test_verdict_t ak_test_need_cuda (bool need_device, struct Ak__Device ***devs_p, size_t *n_p,
                                     char *why, size_t len);

/*  Inside a cmocka test: ak_test_need_cuda, then the test fails
    (AK_TEST_FAIL, naming why) or skips (AK_TEST_SKIP); returns only when
    it can run. */
void ak_test_cuda_or_skip (bool need_device, struct Ak__Device ***devs_p, size_t *n_p);

#endif
