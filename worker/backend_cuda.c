/*  worker/backend_cuda.c: the CUDA backend's table, joining its two
    sides, and the helpers both use.

    Kernels are CUDA C++ sources compiled by NVRTC to CUBIN for the
    device's exact sm_XY and run through the driver API; libcuda, NVRTC and
    CUPTI come from worker/cuda_api.c (dlopen, never linked).  The code runs
    in two processes (backend.h):
    - backend_cuda_daemon.c, the worker daemon: compile plan, probe, compile;
    - backend_cuda_exec.c and backend_cuda_timing.c, an executor child that
      owns the device: context, memory, launch, the CUPTI ring; timing
      samples, the event floor, the device's peaks.

    Never: link a CUDA library, or offer a table in a build without CUDA
    headers (ak_backend_cuda () is NULL there and the extras answer
    AK_EUNAVAIL). */
#include "backend_cuda_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if AK_HAVE_CUDA

/* ============================================================ both sides */

void ak_cuda_be_uuid_text (const CUuuid *u, char out[48])
{
    const unsigned char *b = (const unsigned char *) u->bytes;
    snprintf (out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
              b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
              b[12], b[13], b[14], b[15]);
}

int ak_cuda_be_attr (const ak_cuda_driver_t *drv, CUdevice d, CUdevice_attribute a, const char *what,
                     int *v, ak_err_t *err)
{
    int rc = ak_cuda_check (drv->cuDeviceGetAttribute (v, a, d), "cuDeviceGetAttribute", err);
    if (rc)
        ak_err_prefix (err, "%s", what);
    return rc;
}

/*  CUDA_MODULE_LOADING=EAGER before the first cuInit of the process (the
    probe's, in the daemon and in each executor; executors inherit it):
    modules then load in full at cuModuleLoadData.  A function loaded
    lazily at its first launch would wait for the device behind the
    blocking kernel of a timing sample, a deadlock until the blocker's
    time limit.  ak_cuda_be_sample also runs every kernel once without the blocker,
    which covers a process that called cuInit before this.  An operator's
    own setting wins. */
static pthread_once_t s_eager_once = PTHREAD_ONCE_INIT;
static void s_eager_set (void)
{
    setenv ("CUDA_MODULE_LOADING", "EAGER", 0);
}
void ak_cuda_be_eager_modules (void)
{
    pthread_once (&s_eager_once, s_eager_set);
}

/* ================================================================ table */

static bool s_supports_dtype (const Ak__Device *device, ak_dtype_t dt)
{
    if (dt == AK_DT_FLOAT32)
        return true;
    if (dt == AK_DT_FLOAT16 || dt == AK_DT_BFLOAT16)
        return ak_cuda_include_dir () != NULL;
    return false;
}

static int s_kernel_budget (ak_kernel_t *k, ak_kernel_budget_t *out, ak_err_t *err)
{
    if (!k || !out)
        return ak_err_set (err, AK_EINVAL, "cuda kernel_budget: bad arguments");
    memset (out, 0, sizeof *out);
    out->library = k->lib != NULL;
    if (!k->lib) {
        out->registers = (uint32_t) (k->regs > 0 ? k->regs : 0);
        out->local_bytes = (uint32_t) (k->local_bytes > 0 ? k->local_bytes : 0);
        out->static_shared = (uint32_t) (k->static_shared > 0 ? k->static_shared : 0);
        out->max_threads = (uint32_t) (k->max_threads > 0 ? k->max_threads : 0);
    }
    return 0;
}

static const ak_backend_t s_cuda = {
    .name = "cuda",
    .probe = ak_cuda_be_probe,
    .compile = ak_cuda_be_compile,
    .open = ak_cuda_be_open,
    .close = ak_cuda_be_close,
    .load = ak_cuda_be_load,
    .unload = ak_cuda_be_unload,
    .alloc = ak_cuda_be_alloc,
    .release = ak_cuda_be_release,
    .upload = ak_cuda_be_upload,
    .download = ak_cuda_be_download,
    .fill = ak_cuda_be_fill,
    .launch = ak_cuda_be_launch,
    .time = ak_cuda_be_time,
    .sample = ak_cuda_be_sample,
    .supports_dtype = s_supports_dtype,
    .generate = ak_cuda_fill_uniform,
    .compare = ak_cuda_compare,
    .kernel_trace = ak_cuda_kernel_trace,
    .event_floor = ak_cuda_event_floor,
    .kernel_budget = s_kernel_budget,
};

const ak_backend_t *ak_backend_cuda (void)
{
    return &s_cuda;
}

#else  /* !AK_HAVE_CUDA: the table is absent; the extras answer AK_EUNAVAIL. */

static int s_absent (ak_err_t *err)
{
    return ak_err_set (err, AK_EUNAVAIL, "CUDA backend: this akworker was built without CUDA headers");
}

const ak_backend_t *ak_backend_cuda (void)
{
    return NULL;
}

int ak_cuda_last_kernel (ak_dev_t *dev, ak_cuda_kernel_record_t *rec, ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_last_kernel_us (ak_dev_t *dev, double *us, ak_err_t *err)
{
    return s_absent (err);
}

bool ak_cuda_cupti_active (ak_dev_t *dev, const char **why_p)
{
    if (why_p)
        *why_p = "built without CUDA headers";
    return false;
}

int ak_cuda_timing_info (ak_dev_t *dev, ak_cuda_timing_info_t *info, ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_blocker_selftest (ak_dev_t *dev, double *waited_ms, bool *timed_out, ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_time_plain (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                        uint32_t reps, double *us, ak_err_t *err)
{
    return s_absent (err);
}

void ak_cuda_lib_bench_pick (int index)
{
    (void) index;
}

int ak_cuda_fill_uniform (ak_dev_t *dev, ak_kernel_t *fill, void *buf, uint64_t n,
                          uint64_t seed, uint64_t stream, double lo, double hi,
                          int dtype, ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_compare (ak_dev_t *dev, ak_kernel_t *cmp, const void *got, int code, const void *want,
                     uint64_t n, double atol, double rtol, double dmax, bool poison, uint64_t key,
                     ak_dcmp_t *out,
                     ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_kernel_trace (ak_dev_t *dev, bool on, ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_event_floor (ak_dev_t *dev, double *us, ak_err_t *err)
{
    return s_absent (err);
}

int ak_cuda_device_peaks (ak_dev_t *dev, ak_cuda_peaks_t *peaks, ak_err_t *err)
{
    if (peaks)
        memset (peaks, 0, sizeof *peaks);
    return s_absent (err);
}

#endif
