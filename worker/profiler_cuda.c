/*  worker/profiler_cuda.c: the `profile` task with the CUPTI range profiler
    (see profiler_cuda.h). */
#include "profiler_cuda.h"
#include "backend_cuda.h"
#include "cuda_api.h"
#include "data.h"
#include "log.h"
#include "pbutil.h"
#include "space.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ak_profile_metric_names[AK_PROFILE_NMETRICS] = {
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
};
const char *const ak_profile_metric_units[AK_PROFILE_NMETRICS] = {
    "nsecond", "byte", "byte", "%", "%",
};

/* ============================================================ figures */

static double s_rate (double amount, double ns)
{
    /* amount per nanosecond = 1e9 per second: GB/s, GFLOP/s. */
    if (!(ns > 0) || !isfinite (ns) || !isfinite (amount) || amount < 0)
        return 0;
    return amount / ns;
}

Ak__WorkloadProfile *ak_profile_to_pb (const Ak__Workload *w, const double values[AK_PROFILE_NMETRICS],
                                       double flops, double bytes, uint32_t passes)
{
    Ak__WorkloadProfile *p = ak_malloc (sizeof *p);
    ak__workload_profile__init (p);
    if (w)
        p->workload = ak_pb_dup (w);
    p->n_metrics = AK_PROFILE_NMETRICS;
    p->metrics = ak_calloc (AK_PROFILE_NMETRICS, sizeof *p->metrics);
    for (int i = 0; i < AK_PROFILE_NMETRICS; i++) {
        Ak__ProfileMetric *m = ak_malloc (sizeof *m);
        ak__profile_metric__init (m);
        m->name = ak_strdup (ak_profile_metric_names[i]);
        m->unit = ak_strdup (ak_profile_metric_units[i]);
        m->value = values[i];
        p->metrics[i] = m;
    }
    double ns = values[AK_PM_TIME];
    p->duration_us = ns > 0 && isfinite (ns) ? ns / 1000.0 : 0;
    p->flops = flops;
    p->bytes = bytes;
    p->achieved_gflops = s_rate (flops, ns);
    p->achieved_gbps = s_rate (bytes, ns);
    p->dram_gbps = s_rate (values[AK_PM_DRAM_READ] + values[AK_PM_DRAM_WRITE], ns);
    p->passes = passes;
    return p;
}

double ak_profile_pct (double achieved, double peak)
{
    if (!(peak > 0) || !isfinite (peak) || !isfinite (achieved) || achieved < 0)
        return 0;
    return 100.0 * achieved / peak;
}

void ak_profile_apply_peaks (Ak__WorkloadProfile *p, double copy_gbps, double fp32_gflops)
{
    p->measured_copy_gbps = copy_gbps > 0 && isfinite (copy_gbps) ? copy_gbps : 0;
    p->measured_fp32_gflops = fp32_gflops > 0 && isfinite (fp32_gflops) ? fp32_gflops : 0;
    p->pct_of_copy_bw = ak_profile_pct (p->achieved_gbps, p->measured_copy_gbps);
    p->pct_of_fp32_peak = ak_profile_pct (p->achieved_gflops, p->measured_fp32_gflops);
}

/* ======================================================== the profiler */

#if AK_HAVE_CUDA

struct ak_profiler {
    const ak_cuda_profiler_t   *pf;
    CUcontext                   ctx;
    bool                        initialized;   /* cuptiProfilerInitialize succeeded */
    CUpti_RangeProfiler_Object *obj;           /* enabled on ctx */
    CUpti_Profiler_Host_Object *host;
    uint8_t                    *avail;         /* counter availability image */
    uint8_t                    *config;
    size_t                      config_size;
    uint8_t                    *counter;
    size_t                      counter_size;
    size_t                      passes;
};

/* Where the range profiler fails, the whole CUPTI message plus the call. */
static int s_cp (CUptiResult r, const char *call, ak_err_t *err)
{
    return ak_cuda_cupti_check (r, call, err);
}

static const char *s_level (CUpti_Profiler_Support_Level l)
{
    switch (l) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:   return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:    return "disabled";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED: return "unsupported";
    default:                                       return "unknown";
    }
}

/*  Whether the device takes the range profiler; AK_EUNSUPPORTED naming
    each refusing feature otherwise. */
static int s_supported (ak_profiler_t *self, int device_index, ak_err_t *err)
{
    CUpti_Profiler_DeviceSupported_Params p;
    memset (&p, 0, sizeof p);
    p.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
    p.cuDevice = (CUdevice) device_index;
    p.api = CUPTI_PROFILER_RANGE_PROFILING;
    int rc = s_cp (self->pf->cuptiProfilerDeviceSupported (&p), "cuptiProfilerDeviceSupported", err);
    if (rc)
        return rc;
    if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
        return 0;
    return ak_err_set (err, AK_EUNSUPPORTED,
                       "device %d refuses the CUPTI range profiler: architecture %s, sli %s, vGPU %s, "
                       "confidential compute %s, cmp %s, wsl %s", device_index,
                       s_level (p.architecture), s_level (p.sli), s_level (p.vGpu),
                       s_level (p.confidentialCompute), s_level (p.cmp), s_level (p.wsl));
}

/*  The configuration image for our metrics on this chip, and the number
    of passes it takes. */
static int s_config (ak_profiler_t *self, const char *chip, ak_err_t *err)
{
    const ak_cuda_profiler_t *pf = self->pf;
    CUpti_Profiler_Host_Initialize_Params hi;
    memset (&hi, 0, sizeof hi);
    hi.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = chip;
    hi.pCounterAvailabilityImage = self->avail;
    int rc = s_cp (pf->cuptiProfilerHostInitialize (&hi), "cuptiProfilerHostInitialize", err);
    if (rc)
        return rc;
    self->host = hi.pHostObject;

    CUpti_Profiler_Host_ConfigAddMetrics_Params am;
    memset (&am, 0, sizeof am);
    am.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
    am.pHostObject = self->host;
    am.ppMetricNames = (const char **) ak_profile_metric_names;
    am.numMetrics = AK_PROFILE_NMETRICS;
    rc = s_cp (pf->cuptiProfilerHostConfigAddMetrics (&am), "cuptiProfilerHostConfigAddMetrics", err);
    if (rc)
        return rc;

    CUpti_Profiler_Host_GetConfigImageSize_Params cs;
    memset (&cs, 0, sizeof cs);
    cs.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
    cs.pHostObject = self->host;
    rc = s_cp (pf->cuptiProfilerHostGetConfigImageSize (&cs), "cuptiProfilerHostGetConfigImageSize", err);
    if (rc)
        return rc;
    if (cs.configImageSize == 0)
        return ak_err_set (err, AK_EINTERNAL, "cuptiProfilerHostGetConfigImageSize: 0 bytes");
    self->config_size = cs.configImageSize;
    self->config = ak_calloc (1, self->config_size);

    CUpti_Profiler_Host_GetConfigImage_Params ci;
    memset (&ci, 0, sizeof ci);
    ci.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
    ci.pHostObject = self->host;
    ci.configImageSize = self->config_size;
    ci.pConfigImage = self->config;
    rc = s_cp (pf->cuptiProfilerHostGetConfigImage (&ci), "cuptiProfilerHostGetConfigImage", err);
    if (rc)
        return rc;

    CUpti_Profiler_Host_GetNumOfPasses_Params np;
    memset (&np, 0, sizeof np);
    np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
    np.configImageSize = self->config_size;
    np.pConfigImage = self->config;
    rc = s_cp (pf->cuptiProfilerHostGetNumOfPasses (&np), "cuptiProfilerHostGetNumOfPasses", err);
    if (rc)
        return rc;
    self->passes = np.numOfPasses;
    return 0;
}

int ak_profiler_new (int device_index, ak_profiler_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    const ak_cuda_driver_t *drv = NULL;
    const ak_cuda_profiler_t *pf = NULL;
    int rc = ak_cuda_driver (&drv, err);
    if (rc == 0)
        rc = ak_cuda_profiler (&pf, err);
    if (rc)
        return rc;
    ak_profiler_t *self = ak_calloc (1, sizeof *self);
    self->pf = pf;

    rc = ak_cuda_check (drv->cuCtxGetCurrent (&self->ctx), "cuCtxGetCurrent", err);
    if (rc)
        goto fail;
    if (!self->ctx) {
        rc = ak_err_set (err, AK_EUNAVAIL, "range profiler: no CUDA context is current");
        goto fail;
    }

    CUpti_Profiler_Initialize_Params ip;
    memset (&ip, 0, sizeof ip);
    ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    rc = s_cp (pf->cuptiProfilerInitialize (&ip), "cuptiProfilerInitialize", err);
    if (rc)
        goto fail;
    self->initialized = true;
    if ((rc = s_supported (self, device_index, err)) != 0)
        goto fail;

    CUpti_Device_GetChipName_Params cn;
    memset (&cn, 0, sizeof cn);
    cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    cn.deviceIndex = (size_t) device_index;
    rc = s_cp (pf->cuptiDeviceGetChipName (&cn), "cuptiDeviceGetChipName", err);
    if (rc)
        goto fail;
    if (!cn.pChipName || !cn.pChipName[0]) {
        rc = ak_err_set (err, AK_EINTERNAL, "cuptiDeviceGetChipName: no chip name for device %d", device_index);
        goto fail;
    }

    CUpti_RangeProfiler_Enable_Params en;
    memset (&en, 0, sizeof en);
    en.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
    en.ctx = self->ctx;
    rc = s_cp (pf->cuptiRangeProfilerEnable (&en), "cuptiRangeProfilerEnable", err);
    if (rc)
        goto fail;
    self->obj = en.pRangeProfilerObject;

    /* Counter availability: asked twice, for the size, then the image. */
    CUpti_Profiler_GetCounterAvailability_Params ca;
    memset (&ca, 0, sizeof ca);
    ca.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
    ca.ctx = self->ctx;
    rc = s_cp (pf->cuptiProfilerGetCounterAvailability (&ca), "cuptiProfilerGetCounterAvailability", err);
    if (rc)
        goto fail;
    if (ca.counterAvailabilityImageSize == 0) {
        rc = ak_err_set (err, AK_EINTERNAL, "cuptiProfilerGetCounterAvailability: 0 bytes");
        goto fail;
    }
    self->avail = ak_calloc (1, ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = self->avail;
    rc = s_cp (pf->cuptiProfilerGetCounterAvailability (&ca), "cuptiProfilerGetCounterAvailability", err);
    if (rc)
        goto fail;

    if ((rc = s_config (self, cn.pChipName, err)) != 0) {
        ak_err_prefix (err, "chip %.32s", cn.pChipName);
        goto fail;
    }

    /* One range: auto range over one launch. */
    CUpti_RangeProfiler_GetCounterDataSize_Params ds;
    memset (&ds, 0, sizeof ds);
    ds.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
    ds.pRangeProfilerObject = self->obj;
    ds.pMetricNames = (const char **) ak_profile_metric_names;
    ds.numMetrics = AK_PROFILE_NMETRICS;
    ds.maxNumOfRanges = 1;
    ds.maxNumRangeTreeNodes = 1;
    rc = s_cp (pf->cuptiRangeProfilerGetCounterDataSize (&ds), "cuptiRangeProfilerGetCounterDataSize", err);
    if (rc)
        goto fail;
    if (ds.counterDataSize == 0) {
        rc = ak_err_set (err, AK_EINTERNAL, "cuptiRangeProfilerGetCounterDataSize: 0 bytes");
        goto fail;
    }
    self->counter_size = ds.counterDataSize;
    self->counter = ak_calloc (1, self->counter_size);
    ak_debug ("range profiler: chip %s, %zu passes, config %zu bytes, counter data %zu bytes",
              cn.pChipName, self->passes, self->config_size, self->counter_size);
    *self_p = self;
    return 0;

fail:
    ak_profiler_destroy (&self);
    return rc;
}

uint32_t ak_profiler_passes (const ak_profiler_t *self)
{
    return self ? (uint32_t) self->passes : 0;
}

int ak_profiler_measure (ak_profiler_t *self, const ak_backend_t *be, ak_dev_t *dev,
                         ak_kernel_t *kernel, const ak_launch_t *args,
                         double values[AK_PROFILE_NMETRICS], ak_err_t *err)
{
    const ak_cuda_profiler_t *pf = self->pf;
    for (int i = 0; i < AK_PROFILE_NMETRICS; i++)
        values[i] = NAN;

    /* A fresh counter data image for every launch: range 0 is this one. */
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii;
    memset (&ii, 0, sizeof ii);
    ii.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
    ii.pRangeProfilerObject = self->obj;
    ii.counterDataSize = self->counter_size;
    ii.pCounterData = self->counter;
    int rc = s_cp (pf->cuptiRangeProfilerCounterDataImageInitialize (&ii),
                   "cuptiRangeProfilerCounterDataImageInitialize", err);
    if (rc)
        return rc;

    CUpti_RangeProfiler_SetConfig_Params sc;
    memset (&sc, 0, sizeof sc);
    sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
    sc.pRangeProfilerObject = self->obj;
    sc.configSize = self->config_size;
    sc.pConfig = self->config;
    sc.counterDataImageSize = self->counter_size;
    sc.pCounterDataImage = self->counter;
    sc.range = CUPTI_AutoRange;
    sc.replayMode = CUPTI_KernelReplay;
    sc.maxRangesPerPass = 1;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    rc = s_cp (pf->cuptiRangeProfilerSetConfig (&sc), "cuptiRangeProfilerSetConfig", err);
    if (rc)
        return rc;

    CUpti_RangeProfiler_Start_Params st;
    memset (&st, 0, sizeof st);
    st.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
    st.pRangeProfilerObject = self->obj;
    rc = s_cp (pf->cuptiRangeProfilerStart (&st), "cuptiRangeProfilerStart", err);
    if (rc)
        return rc;
    /* Kernel replay: CUPTI runs every pass inside this one launch. */
    int lrc = be->launch (dev, kernel, args, err);

    CUpti_RangeProfiler_Stop_Params sp;
    memset (&sp, 0, sizeof sp);
    sp.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    sp.pRangeProfilerObject = self->obj;
    ak_err_t serr = { 0 };
    rc = s_cp (pf->cuptiRangeProfilerStop (&sp), "cuptiRangeProfilerStop", &serr);
    if (lrc)
        return lrc;                     /* the launch's own failure tells more */
    if (rc) {
        *err = serr;
        return rc;
    }
    if (!sp.isAllPassSubmitted)
        return ak_err_set (err, AK_EINTERNAL, "cuptiRangeProfilerStop: pass %zu of %zu submitted, "
                           "kernel replay should submit all in one launch", sp.passIndex + 1, self->passes);

    CUpti_RangeProfiler_DecodeData_Params dd;
    memset (&dd, 0, sizeof dd);
    dd.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
    dd.pRangeProfilerObject = self->obj;
    rc = s_cp (pf->cuptiRangeProfilerDecodeData (&dd), "cuptiRangeProfilerDecodeData", err);
    if (rc)
        return rc;
    if (dd.numOfRangeDropped)
        return ak_err_set (err, AK_EINTERNAL, "cuptiRangeProfilerDecodeData: %zu ranges dropped",
                           dd.numOfRangeDropped);

    CUpti_RangeProfiler_GetCounterDataInfo_Params gi;
    memset (&gi, 0, sizeof gi);
    gi.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
    gi.pCounterDataImage = self->counter;
    gi.counterDataImageSize = self->counter_size;
    rc = s_cp (pf->cuptiRangeProfilerGetCounterDataInfo (&gi), "cuptiRangeProfilerGetCounterDataInfo", err);
    if (rc)
        return rc;
    if (gi.numTotalRanges < 1)
        return ak_err_set (err, AK_ENOTFOUND, "range profiler: no range recorded for the launch");

    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev;
    memset (&ev, 0, sizeof ev);
    ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
    ev.pHostObject = self->host;
    ev.pCounterDataImage = self->counter;
    ev.counterDataImageSize = self->counter_size;
    ev.rangeIndex = 0;
    ev.ppMetricNames = (const char **) ak_profile_metric_names;
    ev.numMetrics = AK_PROFILE_NMETRICS;
    ev.pMetricValues = values;
    return s_cp (pf->cuptiProfilerHostEvaluateToGpuValues (&ev), "cuptiProfilerHostEvaluateToGpuValues", err);
}

void ak_profiler_destroy (ak_profiler_t **self_p)
{
    if (self_p && *self_p) {
        ak_profiler_t *self = *self_p;
        const ak_cuda_profiler_t *pf = self->pf;
        ak_err_t err = { 0 };
        if (self->obj) {
            CUpti_RangeProfiler_Disable_Params p;
            memset (&p, 0, sizeof p);
            p.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
            p.pRangeProfilerObject = self->obj;
            if (s_cp (pf->cuptiRangeProfilerDisable (&p), "cuptiRangeProfilerDisable", &err))
                ak_warn ("range profiler: %s", err.msg);
        }
        if (self->host) {
            CUpti_Profiler_Host_Deinitialize_Params p;
            memset (&p, 0, sizeof p);
            p.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
            p.pHostObject = self->host;
            if (s_cp (pf->cuptiProfilerHostDeinitialize (&p), "cuptiProfilerHostDeinitialize", &err))
                ak_warn ("range profiler: %s", err.msg);
        }
        if (self->initialized) {
            CUpti_Profiler_DeInitialize_Params p;
            memset (&p, 0, sizeof p);
            p.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
            if (s_cp (pf->cuptiProfilerDeInitialize (&p), "cuptiProfilerDeInitialize", &err))
                ak_warn ("range profiler: %s", err.msg);
        }
        free (self->avail);
        free (self->config);
        free (self->counter);
        free (self);
        *self_p = NULL;
    }
}

#else   /* no CUDA headers at build time */

struct ak_profiler { int unused; };

int ak_profiler_new (int device_index, ak_profiler_t **self_p, ak_err_t *err)
{
    (void) device_index;
    *self_p = NULL;
    return ak_err_set (err, AK_EUNAVAIL, "CUPTI range profiler: this akworker was built without CUDA headers");
}

uint32_t ak_profiler_passes (const ak_profiler_t *self)
{
    (void) self;
    return 0;
}

int ak_profiler_measure (ak_profiler_t *self, const ak_backend_t *be, ak_dev_t *dev,
                         ak_kernel_t *kernel, const ak_launch_t *args,
                         double values[AK_PROFILE_NMETRICS], ak_err_t *err)
{
    (void) self; (void) be; (void) dev; (void) kernel; (void) args; (void) values;
    return ak_err_set (err, AK_EUNAVAIL, "CUPTI range profiler: this akworker was built without CUDA headers");
}

void ak_profiler_destroy (ak_profiler_t **self_p)
{
    if (self_p && *self_p) {
        free (*self_p);
        *self_p = NULL;
    }
}
#endif

/* ========================================================== the task */

/*  Buffers of one workload: inputs generated on the host and uploaded,
    outputs poisoned. */
typedef struct {
    size_t   esz;
    size_t   nin[AK_MAX_BUFS], nout[AK_MAX_BUFS];
    uint8_t *raw_in[AK_MAX_BUFS];
    void    *in[AK_MAX_BUFS], *out[AK_MAX_BUFS];
} s_bufs_t;

static void s_bufs_free (const ak_profile_ctx_t *ctx, s_bufs_t *b)
{
    for (int j = 0; j < AK_MAX_BUFS; j++) {
        free (b->raw_in[j]);
        if (b->in[j])
            ctx->be->release (ctx->dev, &b->in[j]);
        if (b->out[j])
            ctx->be->release (ctx->dev, &b->out[j]);
    }
}

static int s_upload_inputs (const ak_profile_ctx_t *ctx, s_bufs_t *b, ak_err_t *err)
{
    for (int j = 0; j < ctx->spec->ninputs; j++) {
        int rc = ctx->be->upload (ctx->dev, b->in[j], b->raw_in[j], b->nin[j] * b->esz, err);
        if (rc)
            return rc;
    }
    for (int k = 0; !ctx->spec->inplace && k < ctx->spec->noutputs; k++) {
        int rc = ctx->be->fill (ctx->dev, b->out[k], 0xFF, b->nout[k] * b->esz, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int s_bufs_make (const ak_profile_ctx_t *ctx, const ak_workload_t *w, s_bufs_t *b, ak_err_t *err)
{
    const ak_spec_t *spec = ctx->spec;
    memset (b, 0, sizeof *b);
    b->esz = ak_dtype_size (w->dtype);
    int rc = ak_buf_counts (spec, w->dims, w->dtype, b->nin, b->nout, err);
    if (rc)
        return rc;
    for (int j = 0; j < spec->ninputs; j++) {
        b->raw_in[j] = ak_malloc (b->nin[j] * b->esz);
        ak_input_fill (spec, j, ctx->seed, w->dtype, b->nin[j], NULL, NULL, NULL, b->raw_in[j]);
        if ((rc = ctx->be->alloc (ctx->dev, b->nin[j] * b->esz, &b->in[j], err)) != 0)
            return rc;
    }
    for (int k = 0; !spec->inplace && k < spec->noutputs; k++)
        if ((rc = ctx->be->alloc (ctx->dev, b->nout[k] * b->esz, &b->out[k], err)) != 0)
            return rc;
    return s_upload_inputs (ctx, b, err);
}

/* The activity record of the plain launch, as timing reports its own. */
static void s_add_record (const ak_profile_ctx_t *ctx, Ak__Receipt *r, const char *workload)
{
    ak_cuda_kernel_record_t rec;
    ak_err_t err = { 0 };
    if (ak_cuda_last_kernel (ctx->dev, &rec, &err) != 0) {
        ak_debug ("profile %s: no CUPTI kernel record: %s", workload, err.msg);
        return;
    }
    Ak__KernelRecord *k = ak_malloc (sizeof *k);
    ak__kernel_record__init (k);
    k->name = ak_strdup (rec.name);
    k->role = ak_strdup (ctx->role ? ctx->role : "candidate");
    k->workload = ak_strdup (workload ? workload : "");
    k->registers = rec.registers;
    k->static_shared = rec.static_shared;
    k->dynamic_shared = rec.dynamic_shared;
    k->n_grid = 3;
    k->grid = ak_malloc (3 * sizeof *k->grid);
    memcpy (k->grid, rec.grid, 3 * sizeof *k->grid);
    k->n_block = 3;
    k->block = ak_malloc (3 * sizeof *k->block);
    memcpy (k->block, rec.block, 3 * sizeof *k->block);
    k->duration_us = rec.us;
    r->kernels = ak_realloc (r->kernels, (r->n_kernels + 1) * sizeof *r->kernels);
    r->kernels[r->n_kernels++] = k;
}

/*  One workload: buffers, the plain launch, the profiled launch. */
static int s_profile_one (const ak_profile_ctx_t *ctx, ak_profiler_t **prof, size_t i,
                          Ak__Receipt *r, ak_err_t *err)
{
    const ak_spec_t *spec = ctx->spec;
    const ak_workload_t *w = &ctx->workloads[i];
    ak_kernel_t *k = ctx->kernel[w->dtype];
    ak_launch_cfg_t lc;
    s_bufs_t b;
    ak_launch_t l;
    int64_t flops = 0, bytes = 0;
    double values[AK_PROFILE_NMETRICS];

    int rc = 0;
    if (ctx->rule && (rc = ak_launch_eval (spec, ctx->rule, w->dims, w->dtype, ctx->param_names,
                                           ctx->params, ctx->nparams, &lc, err)) != 0)
        return rc;
    if ((rc = ak_spec_eval (spec, spec->flops, w->dims, w->dtype, &flops, err)) != 0
        || (rc = ak_spec_eval (spec, spec->bytes, w->dims, w->dtype, &bytes, err)) != 0)
        return ak_err_prefix (err, "flops/bytes");
    rc = s_bufs_make (ctx, w, &b, err);
    if (rc)
        goto done;
    memset (&l, 0, sizeof l);
    l.ndims = spec->nkeys;
    for (int d = 0; d < spec->nkeys; d++)
        l.dims[d] = w->dims[d];
    l.nin = spec->ninputs;
    for (int j = 0; j < spec->ninputs; j++)
        l.in[j] = b.in[j];
    l.nout = spec->noutputs;
    for (int o = 0; o < spec->noutputs; o++)
        l.out[o] = spec->inplace ? b.in[o] : b.out[o];
    l.dtype = w->dtype;
    l.params = ctx->params;
    l.param_names = ctx->param_names;
    l.nparams = ctx->nparams;
    if (ctx->rule)
        ak_launch_apply (&lc, &l);
    /* The plain launch: the module is loaded and the context current
       before the profiler attaches, and CUPTI's activity record says
       registers, shared memory, grid and block. */
    if ((rc = ctx->be->launch (ctx->dev, k, &l, err)) != 0)
        goto done;
    s_add_record (ctx, r, w->name);
    if ((rc = s_upload_inputs (ctx, &b, err)) != 0)
        goto done;
    /* The device's peaks: measured on the first profile task of this
       executor's device (before the profiler attaches), cached after. */
    ak_cuda_peaks_t pk;
    ak_err_t pe = { 0 };
    if ((rc = ak_cuda_device_peaks (ctx->dev, &pk, &pe)) != 0) {
        if (rc == AK_ECRASH) {
            ak_err_set (err, rc, "device peaks: %s", pe.msg);
            goto done;
        }
        ak_debug ("profile %s: no measured peaks: %s", w->name, pe.msg);
        memset (&pk, 0, sizeof pk);
        rc = 0;
    }
    if (!*prof && (rc = ak_profiler_new (ctx->device ? (int) ctx->device->index : 0, prof, err)) != 0)
        goto done;
    if ((rc = ak_profiler_measure (*prof, ctx->be, ctx->dev, k, &l, values, err)) != 0)
        goto done;
    Ak__WorkloadProfile *p = ak_profile_to_pb (ctx->assign ? ctx->assign->workloads[i] : NULL, values,
                                               (double) flops, (double) bytes, ak_profiler_passes (*prof));
    ak_profile_apply_peaks (p, pk.copy_gbps, pk.fp32_gflops);
    r->profiles = ak_realloc (r->profiles, (r->n_profiles + 1) * sizeof *r->profiles);
    r->profiles[r->n_profiles++] = p;
done:
    s_bufs_free (ctx, &b);
    return rc;
}

int ak_profile_run (const ak_profile_ctx_t *ctx, Ak__Receipt *r, size_t *skipped, ak_err_t *err)
{
    *skipped = 0;
    if (!ctx->be || strcmp (ctx->be->name, "cuda") != 0)
        return ak_err_set (err, AK_EUNSUPPORTED, "profile tasks need the cuda backend (CUPTI range "
                           "profiler); this executor runs '%s'", ctx->be ? ctx->be->name : "none");
    ak_profiler_t *prof = NULL;
    int rc = 0;
    for (size_t i = 0; i < ctx->nworkloads && rc == 0; i++) {
        const ak_workload_t *w = &ctx->workloads[i];
        bool supported = !ctx->be->supports_dtype || ctx->be->supports_dtype (ctx->device, w->dtype);
        if (!ctx->kernel[w->dtype] || !supported) {
            (*skipped)++;
            continue;
        }
        rc = s_profile_one (ctx, &prof, i, r, err);
        if (rc)
            ak_err_prefix (err, "profile %s/%s", w->name, ak_dtype_name (w->dtype));
    }
    ak_profiler_destroy (&prof);
    return rc;
}
