/*  worker/backend_cuda_exec.c: the CUDA backend's executor side, run by
    an executor child (akworker --executor) that owns one device: the
    CUPTI ring, the device's primary context, memory, module loading and
    launches.  Timing samples are backend_cuda_timing.c.

    The context: one blocking stream, two events, an L2 flush buffer;
    launches with the single by-value argument block ak_cuda_args_t; CUPTI
    activity records (when CUPTI loads) give per-kernel device durations
    next to the event timings.

    Never: keep using a context after a sticky error (every later call
    answers AK_ECRASH: the executor must be replaced), or launch a
    configuration the device or the kernel cannot take (invalid_config). */
#include "backend_cuda_impl.h"
#include "log.h"
#include "spec_cuda.h"
#include "util.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if AK_HAVE_CUDA

/* ================================================================ CUPTI */

/*  CUPTI's activity API is process-wide and its callbacks carry no user
    pointer, so the records land in two small rings here, under a mutex
    (CUPTI delivers full buffers from its own thread):
    - external correlation records: our id (pushed around each launch) ->
      CUPTI's correlation id;
    - kernel records, by correlation id.
    Reading pairs them.  External correlation records are emitted with API
    records, so the DRIVER kind is enabled too. */
typedef struct {
    uint64_t ext;
    uint32_t corr;
} s_ext_rec_t;

static pthread_mutex_t s_cupti_mu = PTHREAD_MUTEX_INITIALIZER;
static const ak_cuda_cupti_t *s_cp;
static s_ext_rec_t s_ext_ring[AK_CUPTI_RING];
static ak_cuda_kernel_record_t s_kern_ring[AK_CUPTI_RING];
static unsigned s_ext_next, s_kern_next;
static size_t s_cupti_dropped;
static char s_cupti_buffer_error[256];

static pthread_once_t s_cupti_once = PTHREAD_ONCE_INIT;
static int s_cupti_reg_rc;
static ak_err_t s_cupti_reg_err;

static void CUPTIAPI s_cupti_requested (uint8_t **buffer, size_t *size, size_t *max_records)
{
    /* Activity buffers must be 8-byte aligned. */
    *buffer = aligned_alloc (8, AK_CUPTI_BUF_BYTES);
    *size = *buffer ? AK_CUPTI_BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI s_cupti_completed (CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                        size_t size, size_t valid)
{
    (void) size;
    pthread_mutex_lock (&s_cupti_mu);
    CUpti_Activity *rec = NULL;
    for (;;) {
        CUptiResult r = s_cp->cuptiActivityGetNextRecord (buffer, valid, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
            break;
        if (r != CUPTI_SUCCESS) {
            ak_err_t e = { 0 };
            ak_cuda_cupti_check (r, "cuptiActivityGetNextRecord", &e);
            snprintf (s_cupti_buffer_error, sizeof s_cupti_buffer_error, "%.200s", e.msg);
            break;
        }
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *) rec;
            ak_cuda_kernel_record_t *o = &s_kern_ring[s_kern_next++ % AK_CUPTI_RING];
            memset (o, 0, sizeof *o);
            o->start_ns = k->start;
            o->end_ns = k->end;
            o->us = k->end > k->start ? (double) (k->end - k->start) / 1000.0 : 0.0;
            o->correlation_id = k->correlationId;
            o->registers = k->registersPerThread;
            o->static_shared = (uint32_t) (k->staticSharedMemory > 0 ? k->staticSharedMemory : 0);
            o->dynamic_shared = (uint32_t) (k->dynamicSharedMemory > 0 ? k->dynamicSharedMemory : 0);
            o->grid[0] = (uint32_t) k->gridX;
            o->grid[1] = (uint32_t) k->gridY;
            o->grid[2] = (uint32_t) k->gridZ;
            o->block[0] = (uint32_t) k->blockX;
            o->block[1] = (uint32_t) k->blockY;
            o->block[2] = (uint32_t) k->blockZ;
            snprintf (o->name, sizeof o->name, "%s", k->name ? k->name : "");
        }
        else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *) rec;
            if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
                s_ext_rec_t *o = &s_ext_ring[s_ext_next++ % AK_CUPTI_RING];
                o->ext = x->externalId;
                o->corr = x->correlationId;
            }
        }
    }
    size_t dropped = 0;
    if (s_cp->cuptiActivityGetNumDroppedRecords (ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        s_cupti_dropped += dropped;
    pthread_mutex_unlock (&s_cupti_mu);
    free (buffer);
}

static void s_cupti_register (void)
{
    const ak_cuda_cupti_t *cp = NULL;
    s_cupti_reg_rc = ak_cuda_cupti (&cp, &s_cupti_reg_err);
    if (s_cupti_reg_rc)
        return;
    s_cp = cp;
    s_cupti_reg_rc = ak_cuda_cupti_check (cp->cuptiActivityRegisterCallbacks (s_cupti_requested, s_cupti_completed),
                                          "cuptiActivityRegisterCallbacks", &s_cupti_reg_err);
}

static const CUpti_ActivityKind s_cupti_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

/*  Turns kernel records on for dev, or leaves dev->cupti_why saying why
    not (then timing is events only).  AK_CUDA_CUPTI=0 in the environment
    turns it off on purpose. */
static void s_cupti_start (ak_dev_t *dev)
{
    const char *env = getenv ("AK_CUDA_CUPTI");
    if (env && strcmp (env, "0") == 0) {
        snprintf (dev->cupti_why, sizeof dev->cupti_why, "CUPTI off (AK_CUDA_CUPTI=0)");
        return;
    }
    pthread_once (&s_cupti_once, s_cupti_register);
    if (s_cupti_reg_rc) {
        snprintf (dev->cupti_why, sizeof dev->cupti_why, "%.300s", s_cupti_reg_err.msg);
        return;
    }
    /* AK_CUDA_CUPTI_KINDS (diagnostics: which activity kind costs what):
       a subset of "kernel,driver,extcorr"; the default is all three. */
    const char *names[] = { "kernel", "driver", "extcorr" };
    const char *kinds = getenv ("AK_CUDA_CUPTI_KINDS");
    size_t n = sizeof s_cupti_kinds / sizeof s_cupti_kinds[0];
    dev->cupti_kinds = 0;
    for (size_t i = 0; i < n; i++) {
        ak_err_t e = { 0 };
        if (kinds && !strstr (kinds, names[i]))
            continue;
        dev->cupti_kinds |= 1u << i;
        if (ak_cuda_cupti_check (s_cp->cuptiActivityEnable (s_cupti_kinds[i]), "cuptiActivityEnable", &e) != 0) {
            snprintf (dev->cupti_why, sizeof dev->cupti_why, "%.300s (kind %d)", e.msg, (int) s_cupti_kinds[i]);
            for (size_t j = 0; j < i; j++) {
                ak_err_t e2 = { 0 };
                if ((dev->cupti_kinds & (1u << j))
                    && ak_cuda_cupti_check (s_cp->cuptiActivityDisable (s_cupti_kinds[j]), "cuptiActivityDisable", &e2))
                    ak_debug ("cuda: %s", e2.msg);
            }
            return;
        }
    }
    dev->cupti_on = true;
}

static void s_cupti_stop (ak_dev_t *dev)
{
    if (!dev->cupti_on)
        return;
    ak_err_t e = { 0 };
    if (ak_cuda_cupti_check (s_cp->cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                             "cuptiActivityFlushAll", &e))
        ak_debug ("cuda: %s", e.msg);
    for (size_t i = 0; i < sizeof s_cupti_kinds / sizeof s_cupti_kinds[0]; i++)
        if ((dev->cupti_kinds & (1u << i)) && !(i == 0 && dev->kernel_trace_off)
            && ak_cuda_cupti_check (s_cp->cuptiActivityDisable (s_cupti_kinds[i]), "cuptiActivityDisable", &e))
            ak_debug ("cuda: %s", e.msg);
    dev->cupti_on = false;
}

bool ak_cuda_cupti_active (ak_dev_t *dev, const char **why_p)
{
    if (why_p)
        *why_p = dev ? dev->cupti_why : "no device";
    return dev && dev->cupti_on;
}

/*  Under s_cupti_mu: the kernel record of external id ext, newest first. */
static void s_cupti_find (uint64_t ext, bool *have_corr, uint32_t *corr, bool *found,
                          ak_cuda_kernel_record_t *rec)
{
    *have_corr = *found = false;
    for (unsigned i = 0; i < AK_CUPTI_RING && i < s_ext_next; i++) {
        const s_ext_rec_t *x = &s_ext_ring[(s_ext_next - 1 - i) % AK_CUPTI_RING];
        if (x->ext == ext) {
            *corr = x->corr;
            *have_corr = true;
            break;
        }
    }
    for (unsigned i = 0; *have_corr && i < AK_CUPTI_RING && i < s_kern_next; i++) {
        const ak_cuda_kernel_record_t *k = &s_kern_ring[(s_kern_next - 1 - i) % AK_CUPTI_RING];
        if (k->correlation_id == *corr) {
            *rec = *k;
            *found = true;
            break;
        }
    }
}

int ak_cuda_last_kernel (ak_dev_t *dev, ak_cuda_kernel_record_t *rec, ak_err_t *err)
{
    if (!dev || !rec)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_last_kernel: bad arguments");
    if (!dev->cupti_on)
        return ak_err_set (err, AK_EUNAVAIL, "no CUPTI kernel records: %s",
                           dev->cupti_why[0] ? dev->cupti_why : "CUPTI not started");
    if (!dev->last_ext)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_last_kernel: no launch yet");
    /* The launch has finished (launch and time synchronise), so its
       records are complete and a plain flush hands them over.  Not a
       forced one: measured on an H200 (CUDA 13.0), a forced flush after
       every sample added about 200 us of host latency to the next launch,
       which the next sample's events then carried; a plain flush added
       none.  Forced only as a fallback when the plain one brought nothing. */
    bool have_corr = false, found = false;
    uint32_t corr = 0;
    for (int attempt = 0; attempt < 2 && !found; attempt++) {
        uint32_t flag = attempt == 0 ? 0 : CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
        int rc = ak_cuda_cupti_check (s_cp->cuptiActivityFlushAll (flag), "cuptiActivityFlushAll", err);
        if (rc)
            return rc;
        pthread_mutex_lock (&s_cupti_mu);
        s_cupti_find (dev->last_ext, &have_corr, &corr, &found, rec);
        pthread_mutex_unlock (&s_cupti_mu);
    }
    pthread_mutex_lock (&s_cupti_mu);
    size_t dropped = s_cupti_dropped;
    char buf_err[256];
    snprintf (buf_err, sizeof buf_err, "%s", s_cupti_buffer_error);
    pthread_mutex_unlock (&s_cupti_mu);
    if (!have_corr)
        return ak_err_set (err, AK_ENOTFOUND, "CUPTI: no correlation record for launch %" PRIu64
                           " (%zu records dropped%s%s)", dev->last_ext, dropped,
                           buf_err[0] ? "; " : "", buf_err);
    if (!found)
        return ak_err_set (err, AK_ENOTFOUND, "CUPTI: no kernel record with correlation id %u "
                           "(%zu records dropped%s%s)", corr, dropped, buf_err[0] ? "; " : "", buf_err);
    if (rec->end_ns <= rec->start_ns)
        return ak_err_set (err, AK_ENOTFOUND, "CUPTI: kernel record %u has no duration", corr);
    return 0;
}

int ak_cuda_last_kernel_us (ak_dev_t *dev, double *us, ak_err_t *err)
{
    ak_cuda_kernel_record_t rec;
    if (!us)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_last_kernel_us: no output");
    int rc = ak_cuda_last_kernel (dev, &rec, err);
    if (rc == 0)
        *us = rec.us;
    return rc;
}

/*  Kernel records (CUPTI CONCURRENT_KERNEL) off or on for dev.  The
    driver and external-correlation kinds stay as they are: correlation
    ids are still pushed around every launch, only no kernel record comes
    for them while off.  AK_EUNAVAIL when dev records no kernels. */
int ak_cuda_kernel_trace (ak_dev_t *dev, bool on, ak_err_t *err)
{
    if (!dev)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_kernel_trace: no device");
    if (!dev->cupti_on || !(dev->cupti_kinds & 1u))
        return ak_err_set (err, AK_EUNAVAIL, "no CUPTI kernel records: %s",
                           dev->cupti_why[0] ? dev->cupti_why : "kernel kind not enabled (AK_CUDA_CUPTI_KINDS)");
    if (on == !dev->kernel_trace_off)
        return 0;
    int rc = on ? ak_cuda_cupti_check (s_cp->cuptiActivityEnable (s_cupti_kinds[0]), "cuptiActivityEnable", err)
                : ak_cuda_cupti_check (s_cp->cuptiActivityDisable (s_cupti_kinds[0]), "cuptiActivityDisable", err);
    if (rc)
        return ak_err_prefix (err, "CUPTI kernel records %s", on ? "on" : "off");
    dev->kernel_trace_off = !on;
    return 0;
}

/* ======================================================== executor side */

/*  Every executor call starts here: a dead context answers AK_ECRASH at
    once, and the context is made current for the calling thread. */
int ak_cuda_be_enter (ak_dev_t *dev, ak_err_t *err)
{
    if (!dev)
        return ak_err_set (err, AK_EINVAL, "cuda: no device");
    if (dev->dead)
        return ak_err_set (err, AK_ECRASH, "device %d context is unusable after %s: replace the executor",
                           dev->ordinal, dev->dead_reason);
    return ak_cuda_check (dev->drv->cuCtxSetCurrent (dev->ctx), "cuCtxSetCurrent", err);
}

/*  ak_cuda_check, and a sticky error marks the context dead. */
int ak_cuda_be_cu (ak_dev_t *dev, CUresult r, const char *call, ak_err_t *err)
{
    if (r == CUDA_SUCCESS)
        return 0;
    int rc = ak_cuda_check (r, call, err);
    if (ak_cuda_result_sticky (r) && dev) {
        char buf[32];
        dev->dead = true;
        snprintf (dev->dead_reason, sizeof dev->dead_reason, "%s in %s",
                  ak_cuda_result_name (r, buf, sizeof buf), call);
    }
    return rc;
}

int ak_cuda_be_open (const Ak__Device *device, ak_dev_t **dev_p, ak_err_t *err)
{
    int rc = 0;
    const ak_cuda_driver_t *drv = NULL;
    if (!dev_p)
        return ak_err_set (err, AK_EINVAL, "cuda open: no output");
    *dev_p = NULL;
    if ((rc = ak_cuda_driver (&drv, err)) != 0)
        return rc;
    ak_cuda_be_eager_modules ();
    if ((rc = ak_cuda_check (drv->cuInit (0), "cuInit", err)) != 0)
        return rc;
    ak_dev_t *dev = ak_calloc (1, sizeof *dev);
    dev->drv = drv;
    dev->ordinal = device ? (int) device->index : 0;
    if ((rc = ak_cuda_be_cu (dev, drv->cuDeviceGet (&dev->cudev, dev->ordinal), "cuDeviceGet", err)) != 0)
        goto fail;
    if (device && device->uuid && device->uuid[0]) {
        CUuuid u;
        char uuid[48];
        if ((rc = ak_cuda_be_cu (dev, drv->cuDeviceGetUuid (&u, dev->cudev), "cuDeviceGetUuid", err)) != 0)
            goto fail;
        ak_cuda_be_uuid_text (&u, uuid);
        if (strcmp (uuid, device->uuid) != 0) {
            rc = ak_err_set (err, AK_ENOTFOUND, "cuda device %d is %s, not %s (CUDA_VISIBLE_DEVICES changed?)",
                             dev->ordinal, uuid, device->uuid);
            goto fail;
        }
    }
    int l2 = 0;
    const struct { CUdevice_attribute a; const char *what; int *v; } attrs[] = {
        { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count", &dev->sm_count },
        { CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size", &l2 },
        { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block", &dev->max_threads },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "max block x", &dev->max_block[0] },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "max block y", &dev->max_block[1] },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "max block z", &dev->max_block[2] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "max grid x", &dev->max_grid[0] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "max grid y", &dev->max_grid[1] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "max grid z", &dev->max_grid[2] },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "max shared per block", &dev->max_shared },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max opt-in shared per block",
          &dev->max_shared_optin },
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        if ((rc = ak_cuda_be_attr (drv, dev->cudev, attrs[i].a, attrs[i].what, attrs[i].v, err)) != 0)
            goto fail;

    /* Kernel records from the first launch on: enable before the context. */
    s_cupti_start (dev);
    if (!dev->cupti_on)
        ak_info ("cuda device %d: timing with CUDA events only: %s", dev->ordinal, dev->cupti_why);

    if ((rc = ak_cuda_be_cu (dev, drv->cuDevicePrimaryCtxRetain (&dev->ctx, dev->cudev),
                             "cuDevicePrimaryCtxRetain", err)) != 0)
        goto fail;
    dev->ctx_retained = true;
    if ((rc = ak_cuda_be_cu (dev, drv->cuCtxSetCurrent (dev->ctx), "cuCtxSetCurrent", err)) != 0)
        goto fail;
    /* A blocking stream: ordered after the legacy stream's copies and
       memsets (upload / download), so no extra synchronisation is needed. */
    if ((rc = ak_cuda_be_cu (dev, drv->cuStreamCreate (&dev->stream, CU_STREAM_DEFAULT),
                             "cuStreamCreate", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuEventCreate (&dev->ev_start, CU_EVENT_DEFAULT),
                                "cuEventCreate", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuEventCreate (&dev->ev_stop, CU_EVENT_DEFAULT),
                                "cuEventCreate", err)) != 0)
        goto fail;
    /* Twice the L2, at least 64 MiB: written before each cold sample. */
    dev->flush_bytes = (size_t) l2 * 2;
    if (dev->flush_bytes < AK_CUDA_FLUSH_MIN)
        dev->flush_bytes = AK_CUDA_FLUSH_MIN;
    if ((rc = ak_cuda_be_cu (dev, drv->cuMemAlloc (&dev->flush, dev->flush_bytes),
                             "cuMemAlloc (L2 flush buffer)", err)) != 0)
        goto fail;
    if ((rc = ak_cuda_be_timing_open (dev, err)) != 0)
        goto fail;
    ak_cuda_lib_preload ();
    *dev_p = dev;
    return 0;

fail:
    ak_err_prefix (err, "cuda device %d", dev->ordinal);
    ak_cuda_be_close (&dev);
    return rc;
}

void ak_cuda_be_close (ak_dev_t **dev_p)
{
    if (!dev_p || !*dev_p)
        return;
    ak_dev_t *dev = *dev_p;
    const ak_cuda_driver_t *drv = dev->drv;
    ak_err_t e = { 0 };
    /* After a sticky error every call below fails; they are still made so
       that a live context is left clean, and failures only logged. */
    if (dev->ctx && ak_cuda_check (drv->cuCtxSetCurrent (dev->ctx), "cuCtxSetCurrent", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->flush && ak_cuda_check (drv->cuMemFree (dev->flush), "cuMemFree", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->help_mod && ak_cuda_check (drv->cuModuleUnload (dev->help_mod), "cuModuleUnload", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->words && ak_cuda_check (drv->cuMemFreeHost ((void *) dev->words), "cuMemFreeHost", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->ev_start && ak_cuda_check (drv->cuEventDestroy (dev->ev_start), "cuEventDestroy", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->ev_stop && ak_cuda_check (drv->cuEventDestroy (dev->ev_stop), "cuEventDestroy", &e))
        ak_debug ("cuda close: %s", e.msg);
    if (dev->stream && ak_cuda_check (drv->cuStreamDestroy (dev->stream), "cuStreamDestroy", &e))
        ak_debug ("cuda close: %s", e.msg);
    s_cupti_stop (dev);
    if (dev->ctx_retained
        && ak_cuda_check (drv->cuDevicePrimaryCtxRelease (dev->cudev), "cuDevicePrimaryCtxRelease", &e))
        ak_debug ("cuda close: %s", e.msg);
    free (dev);
    *dev_p = NULL;
    ak_cuda_lib_preload_wait ();       /* no exit while cuBLASLt's initializers run (backend_cuda_impl.h) */
}

int ak_cuda_be_load (ak_dev_t *dev, const char *artifact_path, const char *symbol,
                     ak_kernel_t **kernel_p, ak_err_t *err)
{
    int rc = 0;
    char *image = NULL;
    size_t len = 0;
    if (!artifact_path || !symbol || !kernel_p)
        return ak_err_set (err, AK_EINVAL, "cuda load: bad arguments");
    *kernel_p = NULL;
    if (strlen (symbol) > AK_MAX_NAME)
        return ak_err_set (err, AK_EINVAL, "cuda load: symbol name too long");
    if ((rc = ak_cuda_be_enter (dev, err)) != 0)
        return rc;
    if ((rc = ak_file_read (artifact_path, AK_CUDA_CUBIN_MAX, &image, &len, err)) != 0)
        return rc;
    if (len > strlen (AK_LIBRARY_MARKER) && memcmp (image, AK_LIBRARY_MARKER, strlen (AK_LIBRARY_MARKER)) == 0) {
        ak_kernel_t *lk = ak_calloc (1, sizeof *lk);
        snprintf (lk->symbol, sizeof lk->symbol, "%s", symbol);
        rc = ak_cuda_lib_open (dev, image, len, &lk->lib, err);
        free (image);
        if (rc) {
            free (lk);
            return ak_err_prefix (err, "%s", artifact_path);
        }
        lk->warm = false;
        *kernel_p = lk;
        return 0;
    }
    if (len < 4 || memcmp (image, "\177ELF", 4) != 0) {
        free (image);
        return ak_err_set (err, AK_ECOMPILE, "%s: not a CUBIN (no ELF header)", artifact_path);
    }
    ak_kernel_t *k = ak_calloc (1, sizeof *k);
    snprintf (k->symbol, sizeof k->symbol, "%s", symbol);
    const ak_cuda_driver_t *drv = dev->drv;
    if ((rc = ak_cuda_be_cu (dev, drv->cuModuleLoadData (&k->mod, image), "cuModuleLoadData", err)) != 0) {
        k->mod = NULL;
        goto fail;
    }
    if ((rc = ak_cuda_be_cu (dev, drv->cuModuleGetFunction (&k->fn, k->mod, symbol),
                             "cuModuleGetFunction", err)) != 0) {
        if (rc == AK_ENOTFOUND)
            ak_err_prefix (err, "no kernel '%s'", symbol);
        goto fail;
    }
    if ((rc = ak_cuda_be_cu (dev, drv->cuFuncGetAttribute (&k->regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k->fn),
                             "cuFuncGetAttribute (NUM_REGS)", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuFuncGetAttribute (&k->max_threads,
                                                              CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn),
                                "cuFuncGetAttribute (MAX_THREADS_PER_BLOCK)", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuFuncGetAttribute (&k->static_shared,
                                                              CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn),
                                "cuFuncGetAttribute (SHARED_SIZE_BYTES)", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuFuncGetAttribute (&k->local_bytes,
                                                              CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->fn),
                                "cuFuncGetAttribute (LOCAL_SIZE_BYTES)", err)) != 0)
        goto fail;
    free (image);
    *kernel_p = k;
    return 0;

fail:
    ak_err_prefix (err, "%s", artifact_path);
    if (k->mod) {
        ak_err_t e = { 0 };
        if (ak_cuda_check (drv->cuModuleUnload (k->mod), "cuModuleUnload", &e))
            ak_debug ("cuda load: %s", e.msg);
    }
    free (k);
    free (image);
    return rc;
}

void ak_cuda_be_unload (ak_dev_t *dev, ak_kernel_t **kernel_p)
{
    if (!kernel_p || !*kernel_p)
        return;
    ak_kernel_t *k = *kernel_p;
    ak_err_t e = { 0 };
    if (k->lib && dev && ak_cuda_be_enter (dev, &e) == 0)
        ak_cuda_lib_close (dev, &k->lib);
    if (dev && k->mod && ak_cuda_be_enter (dev, &e) == 0
        && ak_cuda_check (dev->drv->cuModuleUnload (k->mod), "cuModuleUnload", &e))
        ak_debug ("cuda unload: %s", e.msg);
    free (k);
    *kernel_p = NULL;
}

int ak_cuda_be_alloc (ak_dev_t *dev, size_t bytes, void **buf_p, ak_err_t *err)
{
    int rc = ak_cuda_be_enter (dev, err);
    if (rc)
        return rc;
    CUdeviceptr p = 0;
    rc = ak_cuda_be_cu (dev, dev->drv->cuMemAlloc (&p, bytes ? bytes : 1), "cuMemAlloc", err);
    if (rc)
        return ak_err_prefix (err, "%zu bytes", bytes);
    *buf_p = (void *) (uintptr_t) p;
    return 0;
}

void ak_cuda_be_release (ak_dev_t *dev, void **buf_p)
{
    if (!buf_p || !*buf_p)
        return;
    ak_err_t e = { 0 };
    if (dev && ak_cuda_be_enter (dev, &e) == 0
        && ak_cuda_check (dev->drv->cuMemFree ((CUdeviceptr) (uintptr_t) *buf_p), "cuMemFree", &e))
        ak_debug ("cuda release: %s", e.msg);
    *buf_p = NULL;
}

int ak_cuda_be_upload (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err)
{
    int rc = ak_cuda_be_enter (dev, err);
    if (rc || !bytes)
        return rc;
    return ak_cuda_be_cu (dev, dev->drv->cuMemcpyHtoD ((CUdeviceptr) (uintptr_t) dst, src, bytes),
                          "cuMemcpyHtoD", err);
}

int ak_cuda_be_download (ak_dev_t *dev, void *dst, const void *src, size_t bytes, ak_err_t *err)
{
    int rc = ak_cuda_be_enter (dev, err);
    if (rc || !bytes)
        return rc;
    return ak_cuda_be_cu (dev, dev->drv->cuMemcpyDtoH (dst, (CUdeviceptr) (uintptr_t) src, bytes),
                          "cuMemcpyDtoH", err);
}

int ak_cuda_be_fill (ak_dev_t *dev, void *dst, int byte, size_t bytes, ak_err_t *err)
{
    int rc = ak_cuda_be_enter (dev, err);
    if (rc || !bytes)
        return rc;
    if ((rc = ak_cuda_be_cu (dev, dev->drv->cuMemsetD8Async ((CUdeviceptr) (uintptr_t) dst,
                                                             (unsigned char) byte, bytes,
                                                             dev->stream), "cuMemsetD8Async", err)) != 0)
        return rc;
    return ak_cuda_be_cu (dev, dev->drv->cuStreamSynchronize (dev->stream), "cuStreamSynchronize", err);
}

/*  The launch configuration against the device's and the kernel's limits.
    AK_EINVAL "launch configuration missing" when grid or block is unset,
    AK_EINVAL "invalid_config: ..." when it cannot run (a candidate's
    fault, not the worker's); sets the dynamic shared memory opt-in when
    the request needs more than the default. */
int ak_cuda_be_check_launch (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_err_t *err)
{
    if (l->ndims < 0 || l->ndims > AK_MAX_DIMS || l->nin < 0 || l->nin > AK_MAX_BUFS
        || l->nout < 0 || l->nout > AK_MAX_BUFS)
        return ak_err_set (err, AK_EINVAL, "cuda launch: %d dims, %d inputs, %d outputs (limits %d, %d, %d)",
                           l->ndims, l->nin, l->nout, AK_MAX_DIMS, AK_MAX_BUFS, AK_MAX_BUFS);
    if (k->lib)                  /* a library call: no launch configuration of ours */
        return 0;
    if (l->ntmaps < 0 || l->ntmaps > AK_MAX_TMAPS || (l->ntmaps && !l->tmaps))
        return ak_err_set (err, AK_EINVAL, "cuda launch: %d tensor maps (limit %d)", l->ntmaps, AK_MAX_TMAPS);
    for (int i = 0; i < 3; i++)
        if (l->grid[i] == 0 || l->block[i] == 0)
            return ak_err_set (err, AK_EINVAL, "launch configuration missing: grid %ux%ux%u block %ux%ux%u "
                               "(the CUDA backend has no default; every dimension must be >= 1)",
                               l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
    for (int i = 0; i < 3; i++) {
        if (l->block[i] > (uint32_t) dev->max_block[i])
            return ak_err_set (err, AK_EINVAL, "invalid_config: block.%c = %u > device limit %d",
                               "xyz"[i], l->block[i], dev->max_block[i]);
        if (l->grid[i] > (uint32_t) dev->max_grid[i])
            return ak_err_set (err, AK_EINVAL, "invalid_config: grid.%c = %u > device limit %d",
                               "xyz"[i], l->grid[i], dev->max_grid[i]);
    }
    uint64_t threads = (uint64_t) l->block[0] * l->block[1] * l->block[2];
    if (threads > (uint64_t) k->max_threads)
        return ak_err_set (err, AK_EINVAL, "invalid_config: block of %" PRIu64 " threads > %d for kernel '%s' "
                           "(%d registers/thread)", threads, k->max_threads, k->symbol, k->regs);
    uint64_t shared = (uint64_t) l->shared_bytes + (uint64_t) k->static_shared;
    if (shared > (uint64_t) dev->max_shared_optin)
        return ak_err_set (err, AK_EINVAL, "invalid_config: shared memory %u dynamic + %d static bytes > "
                           "%d per block", l->shared_bytes, k->static_shared, dev->max_shared_optin);
    if (shared > (uint64_t) dev->max_shared && (int) l->shared_bytes > k->dyn_shared_set) {
        int rc = ak_cuda_be_cu (dev, dev->drv->cuFuncSetAttribute (k->fn,
                                                                   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                                   (int) l->shared_bytes),
                                "cuFuncSetAttribute (MAX_DYNAMIC_SHARED_SIZE_BYTES)", err);
        if (rc)
            return rc == AK_EINVAL ? ak_err_prefix (err, "invalid_config") : rc;
        k->dyn_shared_set = (int) l->shared_bytes;
    }
    return 0;
}

void ak_cuda_be_pack (const ak_launch_t *l, ak_cuda_be_args_t *a)
{
    memset (a, 0, sizeof *a);
    a->ndims = l->ndims;
    for (int i = 0; i < l->ndims && i < AK_MAX_DIMS; i++)
        a->dims[i] = l->dims[i];
    a->nin = l->nin;
    for (int i = 0; i < l->nin && i < AK_MAX_BUFS; i++)
        a->in[i] = (uint64_t) (uintptr_t) l->in[i];
    a->nout = l->nout;
    for (int i = 0; i < l->nout && i < AK_MAX_BUFS; i++)
        a->out[i] = (uint64_t) (uintptr_t) l->out[i];
}

/*  An external correlation id for CUPTI around one launch: pushed
    before, popped after (s_corr_pop); true when pushed. */
static bool s_corr_push (ak_dev_t *dev)
{
    bool pushed = false;
    if (dev->cupti_on) {
        ak_err_t e = { 0 };
        uint64_t id = ++dev->ext_seq;
        if (ak_cuda_cupti_check (s_cp->cuptiActivityPushExternalCorrelationId (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id),
                                 "cuptiActivityPushExternalCorrelationId", &e) == 0) {
            pushed = true;
            dev->last_ext = id;
        }
        else {
            ak_debug ("cuda: %s", e.msg);
            dev->last_ext = 0;
        }
    }
    return pushed;
}

static void s_corr_pop (bool pushed)
{
    if (pushed) {
        ak_err_t e = { 0 };
        uint64_t last = 0;
        if (ak_cuda_cupti_check (s_cp->cuptiActivityPopExternalCorrelationId (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
                                 "cuptiActivityPopExternalCorrelationId", &e))
            ak_debug ("cuda: %s", e.msg);
    }
}

/*  Enqueues one launch of fn on dev's stream with params, inside an
    external correlation id for CUPTI.  A refused launch is the
    candidate's configuration: AK_EINVAL "invalid_config: ...". */
int ak_cuda_be_enqueue (ak_dev_t *dev, CUfunction fn, const uint32_t grid[3], const uint32_t block[3],
                        uint32_t shared, void **params, ak_err_t *err)
{
    bool pushed = s_corr_push (dev);
    CUresult r = dev->drv->cuLaunchKernel (fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                           shared, dev->stream, params, NULL);
    s_corr_pop (pushed);
    int rc = ak_cuda_be_cu (dev, r, "cuLaunchKernel", err);
    if (rc == AK_EINVAL)
        ak_err_prefix (err, "invalid_config");
    if (rc)
        dev->last_ext = 0;
    return rc;
}

/* ------------------------------------------------ tensor maps, clusters */

/*  The driver's data type for a tensor map of elem_bytes over dtype dt. */
static CUtensorMapDataType s_tmap_type (ak_dtype_t dt)
{
    return dt == AK_DT_FLOAT16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
         : dt == AK_DT_BFLOAT16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

int ak_cuda_be_prepare (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_cuda_be_params_t *p,
                        ak_err_t *err)
{
    ak_cuda_be_pack (l, &p->a);
    p->params[0] = &p->a;
    if (k->lib || l->ntmaps == 0)
        return 0;
    for (int i = 0; i < l->ntmaps; i++) {
        const ak_tmap_cfg_t *m = &l->tmaps[i];
        int nbuf = m->output ? l->nout : l->nin;
        if (m->buf < 0 || m->buf >= nbuf)
            return ak_err_set (err, AK_EINVAL, "invalid_config: tensor map %s: buffer %d of %d", m->name,
                               m->buf, nbuf);
        const void *buf = m->output ? l->out[m->buf] : l->in[m->buf];
        p->params[1 + i] = &p->maps[i];
        if (m->absent) {         /* optional, refused by the rules here: 128 zero bytes */
            memset (&p->maps[i], 0, sizeof p->maps[i]);
            continue;
        }
        if (m->elem_bytes != ak_dtype_size (l->dtype))
            return ak_err_set (err, AK_EINVAL, "invalid_config: tensor map %s: rule elem: %u-byte elements, the "
                               "launch is %s", m->name, m->elem_bytes, ak_dtype_name (l->dtype));
        int rc = ak_tmap_check (m, err);
        if (rc == 0)
            rc = ak_tmap_check_address (m, (uint64_t) (uintptr_t) buf, err);
        if (rc)
            return ak_err_prefix (err, "invalid_config");
        cuuint64_t dims[AK_TMAP_MAX_RANK], strides[AK_TMAP_MAX_RANK - 1];
        cuuint32_t box[AK_TMAP_MAX_RANK], estr[AK_TMAP_MAX_RANK];
        for (uint32_t d = 0; d < m->rank; d++) {
            dims[d] = m->dims[d];
            box[d] = m->box[d];
            estr[d] = 1;
            if (d + 1 < m->rank)
                strides[d] = m->strides[d];
        }
        CUresult r = dev->drv->cuTensorMapEncodeTiled (&p->maps[i], s_tmap_type (l->dtype), m->rank, (void *) buf,
                                                       dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                       (CUtensorMapSwizzle) m->swizzle,
                                                       (CUtensorMapL2promotion) m->l2,
                                                       (CUtensorMapFloatOOBfill) m->oob);
        /* Our rules passed, so a refusal is a rule we do not know of:
           still the candidate's configuration. */
        rc = ak_cuda_be_cu (dev, r, "cuTensorMapEncodeTiled", err);
        if (rc)
            return rc == AK_EINVAL ? ak_err_prefix (err, "invalid_config: tensor map %s", m->name) : rc;
    }
    return 0;
}

int ak_cuda_be_enqueue_kernel (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_cuda_be_params_t *p,
                               bool correlate, ak_err_t *err)
{
    bool cluster = l->cluster[0] > 1 || l->cluster[1] > 1 || l->cluster[2] > 1;
    bool pushed = correlate && s_corr_push (dev);
    CUresult r = CUDA_SUCCESS;
    int rc = 0;
    const char *call = "cuLaunchKernel";
    if (k->lib) {
        rc = ak_cuda_lib_enqueue (dev, k->lib, l, err);
    }
    else if (cluster) {
        CUlaunchAttribute attr;
        memset (&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = l->cluster[0] ? l->cluster[0] : 1;
        attr.value.clusterDim.y = l->cluster[1] ? l->cluster[1] : 1;
        attr.value.clusterDim.z = l->cluster[2] ? l->cluster[2] : 1;
        CUlaunchConfig cfg;
        memset (&cfg, 0, sizeof cfg);
        cfg.gridDimX = l->grid[0];
        cfg.gridDimY = l->grid[1];
        cfg.gridDimZ = l->grid[2];
        cfg.blockDimX = l->block[0];
        cfg.blockDimY = l->block[1];
        cfg.blockDimZ = l->block[2];
        cfg.sharedMemBytes = l->shared_bytes;
        cfg.hStream = dev->stream;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        call = "cuLaunchKernelEx (cluster)";
        r = dev->drv->cuLaunchKernelEx (&cfg, k->fn, p->params, NULL);
    }
    else
        r = dev->drv->cuLaunchKernel (k->fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                                      l->block[2], l->shared_bytes, dev->stream, p->params, NULL);
    if (correlate)
        s_corr_pop (pushed);
    if (!k->lib) {
        rc = ak_cuda_be_cu (dev, r, call, err);
        if (rc == AK_EINVAL)
            ak_err_prefix (err, "invalid_config");
    }
    if (rc)
        dev->last_ext = 0;
    return rc;
}

/*  Waits for everything on the context; a sticky error kills the
    context (AK_ECRASH naming it). */
int ak_cuda_be_sync (ak_dev_t *dev, ak_err_t *err)
{
    return ak_cuda_be_cu (dev, dev->drv->cuCtxSynchronize (), "cuCtxSynchronize", err);
}

int ak_cuda_be_begin_launch (ak_dev_t *dev, ak_kernel_t *k, const ak_launch_t *l, ak_cuda_be_params_t *p,
                             ak_err_t *err)
{
    int rc = ak_cuda_be_enter (dev, err);
    if (rc || (rc = ak_cuda_be_check_launch (dev, k, l, err)) != 0)
        return rc;
    return ak_cuda_be_prepare (dev, k, l, p, err);
}

int ak_cuda_be_launch (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, ak_err_t *err)
{
    if (!kernel || !args)
        return ak_err_set (err, AK_EINVAL, "cuda launch: bad arguments");
    ak_cuda_be_params_t p;
    int rc = ak_cuda_be_begin_launch (dev, kernel, args, &p, err);
    if (rc || (rc = ak_cuda_be_enqueue_kernel (dev, kernel, args, &p, true, err)) != 0)
        return rc;
    return ak_cuda_be_sync (dev, err);
}

#endif
