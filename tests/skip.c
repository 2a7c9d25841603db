/*  tests/skip.c: skips that CTest sees, and when a CUDA test may skip
    (skip.h). */
#include "support.h"
#include "skip.h"
#include "worker/backend.h"
#include "worker/backends.h"
#include "worker/cuda_api.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if AK_HAVE_CUDA
_Static_assert (CUDA_ERROR_NO_DEVICE == AK_TEST_CU_NO_DEVICE, "CUDA_ERROR_NO_DEVICE moved");
#endif

static int s_skipped;

void ak_test_skip_note (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    printf ("SKIP: ");
    vprintf (fmt, ap);
    printf ("\n");
    va_end (ap);
    fflush (stdout);
    s_skipped++;
}

int ak_test_exit (int failed)
{
    if (failed)
        return failed == AK_TEST_SKIPPED ? failed + 1 : failed;
    if (s_skipped) {
        printf ("SKIPPED: %d skip%s (see the SKIP: lines above); exit %d, which CTest shows as \"Not Run\"\n",
                s_skipped, s_skipped == 1 ? "" : "s", AK_TEST_SKIPPED);
        return AK_TEST_SKIPPED;
    }
    return 0;
}

bool ak_test_require_gpu (void)
{
    const char *v = getenv ("AK_REQUIRE_GPU");
    return v && strcmp (v, "1") == 0;
}

/* --------------------------------------------------------------- verdict */

static ak_test_verdict_t s_skip (const ak_test_cuda_facts_t *f, char *why, size_t len,
                                 const char *reason, const char *detail)
{
    if (f->require) {
        snprintf (why, len, "AK_REQUIRE_GPU=1 and %s: %s", reason, detail);
        return AK_TEST_FAIL;
    }
    snprintf (why, len, "%s: %s", reason, detail);
    return AK_TEST_SKIP;
}

ak_test_verdict_t ak_test_cuda_verdict (const ak_test_cuda_facts_t *f, bool need_device,
                                        char *why, size_t len)
{
    if (!f->backend)
        return s_skip (f, why, len, need_device ? "no GPU" : "no NVRTC",
                       "this build has no CUDA backend (no CUDA headers at build time)");
    if (!need_device) {
        if (f->nvrtc_rc == 0) {
            snprintf (why, len, "NVRTC loads");
            return AK_TEST_RUN;
        }
        if (f->nvrtc_found) {
            snprintf (why, len, "NVRTC is installed but unusable: %s", f->nvrtc_why);
            return AK_TEST_FAIL;
        }
        if (f->libcuda) {
            snprintf (why, len, "the NVIDIA driver is here (libcuda.so.1 opens) but NVRTC is not: %s",
                      f->nvrtc_why);
            return AK_TEST_FAIL;
        }
        return s_skip (f, why, len, "no NVRTC", f->nvrtc_why);
    }
    if (!f->libcuda)
        return s_skip (f, why, len, "no GPU", f->libcuda_why);
    if (f->driver_rc != 0) {
        snprintf (why, len, "libcuda.so.1 opens but is unusable: %s", f->driver_why);
        return AK_TEST_FAIL;
    }
    if (f->init_result == AK_TEST_CU_NO_DEVICE)
        return s_skip (f, why, len, "no GPU", "cuInit: CUDA_ERROR_NO_DEVICE");
    if (f->init_result != 0) {
        snprintf (why, len, "cuInit failed: %s (a driver that is there but broken is not \"no GPU\")",
                  f->init_name);
        return AK_TEST_FAIL;
    }
    if (f->count_result != 0) {
        snprintf (why, len, "cuDeviceGetCount failed: %s", f->count_name);
        return AK_TEST_FAIL;
    }
    if (f->count <= 0)
        return s_skip (f, why, len, "no GPU", "cuDeviceGetCount: 0 devices");
    if (f->nvrtc_rc != 0) {
        snprintf (why, len, "%d CUDA device(s) but NVRTC does not load: %s", f->count, f->nvrtc_why);
        return AK_TEST_FAIL;
    }
    if (f->probe_rc != 0) {
        snprintf (why, len, "the CUDA backend's probe failed: %s", f->probe_why);
        return AK_TEST_FAIL;
    }
    snprintf (why, len, "%d CUDA device(s)", f->count);
    return AK_TEST_RUN;
}

/* ----------------------------------------------------------------- probe */

/*  Fills f step by step, stopping at the first step that decides. */
static void s_facts (ak_test_cuda_facts_t *f, bool need_device, Ak__Device ***devs_p, size_t *n_p)
{
    ak_err_t err = { 0 };
    memset (f, 0, sizeof *f);
    f->require = ak_test_require_gpu ();
    const ak_backend_t *be = ak_backend_find ("cuda");
    f->backend = be != NULL;
    if (!be)
        return;
    void *h = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    f->libcuda = h != NULL;
    if (!h) {
        const char *e = dlerror ();
        snprintf (f->libcuda_why, sizeof f->libcuda_why, "no NVIDIA driver: %s", e ? e : "libcuda.so.1 does not open");
    }
    else
        dlclose (h);
    f->nvrtc_rc = ak_cuda_load_nvrtc (&err);
    f->nvrtc_found = ak_cuda_nvrtc_path ()[0] != 0;
    snprintf (f->nvrtc_why, sizeof f->nvrtc_why, "%.500s", f->nvrtc_rc ? err.msg : "");
    if (!need_device || !f->libcuda)
        return;
#if AK_HAVE_CUDA
    const ak_cuda_driver_t *drv = NULL;
    f->driver_rc = ak_cuda_driver (&drv, &err);
    if (f->driver_rc) {
        snprintf (f->driver_why, sizeof f->driver_why, "%.500s", err.msg);
        return;
    }
    char buf[32];
    CUresult r = drv->cuInit (0);
    f->init_result = (int) r;
    snprintf (f->init_name, sizeof f->init_name, "%s", ak_cuda_result_name (r, buf, sizeof buf));
    if (r != CUDA_SUCCESS)
        return;
    int count = 0;
    r = drv->cuDeviceGetCount (&count);
    f->count_result = (int) r;
    f->count = count;
    snprintf (f->count_name, sizeof f->count_name, "%s", ak_cuda_result_name (r, buf, sizeof buf));
    if (r != CUDA_SUCCESS || count <= 0 || f->nvrtc_rc)
        return;
    f->probe_rc = be->probe (devs_p, n_p, &err);
    if (f->probe_rc)
        snprintf (f->probe_why, sizeof f->probe_why, "%.500s", err.msg);
#else
    (void) devs_p;
    (void) n_p;
#endif
}

ak_test_verdict_t ak_test_need_cuda (bool need_device, Ak__Device ***devs_p, size_t *n_p,
                                     char *why, size_t len)
{
    ak_test_cuda_facts_t f;
    Ak__Device **mine = NULL;
    size_t nmine = 0;
    s_facts (&f, need_device, devs_p ? devs_p : &mine, n_p ? n_p : &nmine);
    for (size_t i = 0; i < nmine; i++)
        ak__device__free_unpacked (mine[i], NULL);
    free (mine);
    ak_test_verdict_t v = ak_test_cuda_verdict (&f, need_device, why, len);
    if (v == AK_TEST_SKIP)
        ak_test_skip_note ("%s", why);
    else if (v == AK_TEST_FAIL) {
        fprintf (stderr, "FAIL: %s\n", why);
        fflush (stderr);
    }
    return v;
}

void ak_test_cuda_or_skip (bool need_device, Ak__Device ***devs_p, size_t *n_p)
{
    char why[1100];
    ak_test_verdict_t v = ak_test_need_cuda (need_device, devs_p, n_p, why, sizeof why);
    if (v == AK_TEST_FAIL)
        fail_msg ("%s", why);
    if (v == AK_TEST_SKIP)
        skip ();
}
