/*  discover/inject.c: libakdiscover.so, the injection library of
    `akctl discover` (docs/discover.md).

    Loaded into an unmodified program twice over, by the same file:
    - CUDA_INJECTION64_PATH: cuInit calls InitializeInjection, which opens
      CUPTI with dlopen (as the worker does: libcupti.so.<major>, then
      libcupti.so, then the toolkit folders), subscribes to graph node
      creation and cloning (the one synchronous callback left: rare, and
      it needs the capturing thread's range stack), and enables activity
      records: CONCURRENT_KERNEL, and RUNTIME / DRIVER for the launch APIs
      only (each carries the launching thread, its start and end on the
      host clock and the correlation id its kernels carry);
    - NVTX_INJECTION64_PATH: the first NVTX call of the program calls
      InitializeInjectionNvtx2, which puts our own push/pop handlers into
      NVTX's core tables.  A push or pop is a timestamped fixed-size record
      in the thread's own buffer (inject_rec.c): no lock, no allocation,
      no formatting.  Kernels are attributed to ranges afterwards, by the
      reader (discover/trace_bin.c): a launch belongs to the innermost
      range open on its thread at the launch's start.

    The trace ($AKD_TRACE) is binary (discover/akd_format.h).  A flusher
    thread asks CUPTI for its completed buffers and writes every thread's
    records every 200 ms (sooner when a thread's buffer is half full); at
    exit the rest and an END record are written.  A fatal signal writes
    what is buffered and a SIGNAL record (never END), so a crashed program
    leaves a trace that reads as partial.

    Window ($AKD_STEP_RANGE, $AKD_WARMUP_STEPS, $AKD_STEPS, $AKD_SKIP_MS):
    ranges and launches stamped while it is open are written (the ranges
    a thread had open when it opened as "pre" pushes); kernels from its
    opening on (the analysis keeps those whose launch it saw).  With a
    window that opens later, CUPTI's kernel records are on only from its
    opening until its kernels are read after it closed (s_gate;
    $AKD_GATE=0: always on); the launch-API records are on from the start
    (CUPTI 13 makes none when they are enabled once the program runs).
    $AKD_SAMPLE=K (with a step range): 1 window step in K is traced, the
    window's first and every K-th after it; the kernel records go on as a
    traced step opens and off as an untraced one opens (s_sample), and the
    window lasts $AKD_STEPS traced steps (K times as many).  Sampled, the
    launches are recorded by callbacks on the launch APIs instead of
    activity records (which cannot be turned on once the program runs):
    switched with the kernel records, so the untraced steps' launches cost
    no CUPTI record of either kind ($AKD_LAUNCH_CB: 1 callbacks, 0 activity
    records; default 1 when sampled, else 0).  CUPTI's completed records
    are flushed before the kernel records go off ($AKD_SAMPLE_FLUSH=0: not):
    without it a CUDA graph's records got their ends from later, untraced
    replays (docs/discover.md).
    $AKD_LAUNCH_CB_DOMAINS=runtime or driver: the launch callbacks of that
    API only (default both; an experiment on their cost, docs/discover.md).

    Never: change what the program computes or how it handles signals
    (handlers chain to the ones they replace), write the file from a CUDA or
    NVTX call (only the writer does; an NVTX call that opens or closes the
    window appends to the shared buffer, which is written by that call only
    when it is full), or link anything but libc: the library is loaded into
    processes we do not control. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cupti.h>
/* A tool: NVTX's types and callback ids, none of its implementation. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "inject_int.h"

#define AKD_EXPORT __attribute__ ((visibility ("default")))
#define S_FLUSH_MS     200

/* ================================================================ state */

static struct {
    pthread_once_t   once;
    bool             on;                /* AKD_TRACE was set and opened */
    /* window */
    char            *step_range;        /* NULL: no steps */
    long             warmup, steps;     /* steps 0: until exit */
    long             sample;            /* 1 step in sample traced (1: every step) */
    bool             launch_cb;         /* launches by callbacks, switched with the kernel records */
    unsigned         cb_domains;        /* $AKD_LAUNCH_CB_DOMAINS: 1 runtime, 2 driver, 3 both */
    bool             sample_flush;      /* CUPTI's buffers flushed as the records go off (not: $AKD_SAMPLE_FLUSH=0) */
    atomic_long      open_step;         /* the step count when the window opened (0: not yet) */
    long             skip_ms;
    struct timespec  t0;
    atomic_long      step_starts, step_ends;
    atomic_bool      ended;
    /* CUPTI */
    void            *cupti;
    atomic_bool      cupti_on;
    bool             api_filter;        /* RUNTIME/DRIVER enabled whole: keep the launch APIs only */
    CUpti_SubscriberHandle sub;
    pthread_t        flusher;
    bool             flusher_on;
    atomic_bool      stop;
    atomic_bool      device_seen;       /* a device record was written */
    /* the gate: kernel records only while the window is open */
    bool             gate;              /* a window that opens later ($AKD_GATE, default 1) */
    pthread_mutex_t  gate_mu;           /* CUPTI set up, records on: both changed under it */
    bool             cupti_ready;       /* s_cupti_start got as far as the records */
    bool             records_on;
} S = { .once = PTHREAD_ONCE_INIT, .gate_mu = PTHREAD_MUTEX_INITIALIZER };

/* CUPTI entry points, opened with dlopen (never linked). */
#define S_CUPTI_FNS(X)                                                         \
    X (cuptiGetVersion) X (cuptiGetResultString) X (cuptiSubscribe)            \
    X (cuptiEnableCallback) X (cuptiActivityEnable) X (cuptiActivityDisable)   \
    X (cuptiActivityRegisterCallbacks) X (cuptiActivityFlushAll)               \
    X (cuptiActivityGetNextRecord) X (cuptiActivityGetNumDroppedRecords)       \
    X (cuptiGetTimestamp) X (cuptiGetGraphNodeId) X (cuptiGetGraphId)
#define S_MEMBER(name) __typeof__ (&name) name;
static struct {
    S_CUPTI_FNS (S_MEMBER)
    /* optional: per-API activity (CUPTI 12.x on), API names */
    __typeof__ (&cuptiActivityEnableRuntimeApi) enable_runtime_api;
    __typeof__ (&cuptiActivityEnableDriverApi)  enable_driver_api;
    __typeof__ (&cuptiGetCallbackName)          callback_name;
} C;

/* Per thread: the NVTX depth and whether its outermost range is a step. */
static __thread int  T_depth;
static __thread bool T_step;

/*  The host clock of every record: CUPTI's (that of its API records) once
    it is started; before, the clock CUPTI documents as its own on Linux
    (CLOCK_REALTIME, in ns), so that the window opened and the ranges
    pushed before cuInit are still ordered. */
static uint64_t s_now (void)
{
    uint64_t ts = 0;
    if (atomic_load_explicit (&S.cupti_on, memory_order_relaxed) && C.cuptiGetTimestamp (&ts) == CUPTI_SUCCESS)
        return ts;
    struct timespec now;
    clock_gettime (CLOCK_REALTIME, &now);
    return (uint64_t) now.tv_sec * 1000000000ull + (uint64_t) now.tv_nsec;
}

static void s_error (const char *code, const char *what)
{
    akd_rec_error_t r = { { AKD_REC_ERROR, 0, sizeof r }, akd_rec_string (code), akd_rec_string (what) };
    akd_rec_out (&r, sizeof r);
}

/* =============================================================== window */

static bool s_skip_elapsed (void)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - S.t0.tv_sec) * 1000 + (now.tv_nsec - S.t0.tv_nsec) / 1000000;
    return ms >= S.skip_ms;
}

/*  Opens or closes the window; the time is published after the state (a
    writer that sees the state before the time treats it as not yet
    there), and is at least 1 (0 means "not yet").  Opening it turns the
    gated records on (s_gate) before its time is taken. */
static void s_gate (bool on);

static void s_window_set (int state)
{
    int from = atomic_load (&akd_g.window);
    if (from == state || (state == AKD_W_OPEN && from != AKD_W_BEFORE))
        return;
    if (!atomic_compare_exchange_strong (&akd_g.window, &from, state))
        return;
    /* the records first, then the window's time: a launch stamped after
       the opening has its records */
    if (state == AKD_W_OPEN)
        s_gate (true);
    uint64_t ts = s_now ();
    ts = ts ? ts : 1;
    atomic_store (state == AKD_W_OPEN ? &akd_g.open_ts : &akd_g.close_ts, ts);
    akd_rec_window_t r = { { AKD_REC_WINDOW, 0, sizeof r }, state == AKD_W_OPEN, 0, ts,
                           (int64_t) syscall (SYS_gettid) };
    akd_rec_out (&r, sizeof r);
}

/* Without a step range the window opens once --skip-ms has passed. */
static void s_window_by_time (void)
{
    if (atomic_load_explicit (&akd_g.window, memory_order_relaxed) == AKD_W_BEFORE && !S.step_range
        && s_skip_elapsed ())
        s_window_set (AKD_W_OPEN);
}

/* ================================================================= NVTX */

static void s_init (void);
static void s_sample (bool traced);

static int s_push (const char *text)
{
    pthread_once (&S.once, s_init);
    int level = T_depth++;
    if (!S.on)
        return level;
    text = text ? text : "";
    if (level == 0) {
        T_step = S.step_range && strcmp (text, S.step_range) == 0;
        if (T_step) {
            long n = atomic_fetch_add (&S.step_starts, 1) + 1;
            bool opens = false;
            if (n == S.warmup + 1 && (S.skip_ms <= 0 || s_skip_elapsed ()))
                opens = true;
            else
            if (atomic_load (&akd_g.window) == AKD_W_BEFORE && n > S.warmup && S.skip_ms > 0 && s_skip_elapsed ())
                opens = true;
            if (opens) {
                atomic_store (&S.open_step, n);
                s_window_set (AKD_W_OPEN);
            }
            else
            if (S.sample > 1 && atomic_load (&akd_g.window) == AKD_W_OPEN)
                s_sample ((n - atomic_load (&S.open_step)) % S.sample == 0);
        }
    }
    s_window_by_time ();
    if (atomic_load_explicit (&akd_g.window, memory_order_relaxed) != AKD_W_CLOSED)
        akd_rec_push (text, s_now ());
    return level;
}

static int s_pop (void)
{
    if (T_depth <= 0)
        return -1;
    int level = --T_depth;
    if (!S.on)
        return level;
    int w = atomic_load_explicit (&akd_g.window, memory_order_relaxed);
    if (w != AKD_W_CLOSED)
        akd_rec_pop (s_now ());
    if (level == 0 && T_step && w == AKD_W_OPEN) {
        atomic_fetch_add (&S.step_ends, 1);
        /* the last step of the window has ended on this thread (sampled:
           the window's steps run from the one that opened it) */
        if (S.steps > 0 && (S.sample > 1 ? atomic_load (&S.step_starts) - atomic_load (&S.open_step) + 1
                                         >= S.steps * S.sample
                                         : atomic_load (&S.step_starts) - S.warmup >= S.steps))
            s_window_set (AKD_W_CLOSED);
    }
    return level;
}

static const char *s_message (const nvtxEventAttributes_t *a)
{
    if (!a)
        return "";
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:      return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_REGISTERED: return a->message.registered ? (const char *) a->message.registered : "";
    case NVTX_MESSAGE_TYPE_UNICODE:    return "(wide-character range)";
    default:                           return "";
    }
}

static int NVTX_API s_RangePushA (const char *m) { return s_push (m); }
static int NVTX_API s_RangePushW (const wchar_t *m) { (void) m; return s_push ("(wide-character range)"); }
static int NVTX_API s_RangePushEx (const nvtxEventAttributes_t *a) { return s_push (s_message (a)); }
static int NVTX_API s_RangePop (void) { return s_pop (); }
static int NVTX_API s_DomainRangePushEx (nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void) d;
    return s_push (s_message (a));
}
static int NVTX_API s_DomainRangePop (nvtxDomainHandle_t d) { (void) d; return s_pop (); }
/* A registered string's handle is our own copy of it (kept for the life
   of the process, as NVTX's contract says). */
static nvtxStringHandle_t NVTX_API s_DomainRegisterStringA (nvtxDomainHandle_t d, const char *s)
{
    (void) d;
    return (nvtxStringHandle_t) strdup (s ? s : "");
}
/* Domains: any non-NULL handle will do, we keep no state per domain. */
static nvtxDomainHandle_t NVTX_API s_DomainCreateA (const char *name)
{
    return (nvtxDomainHandle_t) strdup (name ? name : "");
}

static void s_hook (NvtxFunctionTable table, unsigned int size, unsigned int id, NvtxFunctionPointer fn)
{
    if (table && id < size && table[id])
        *table[id] = fn;
}

AKD_EXPORT int InitializeInjectionNvtx2 (NvtxGetExportTableFunc_t get_table)
{
    pthread_once (&S.once, s_init);
    const NvtxExportTableCallbacks *cb = get_table ? get_table (NVTX_ETID_CALLBACKS) : NULL;
    if (!cb || !cb->GetModuleFunctionTable)
        return 0;
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned int ncore = 0, ncore2 = 0;
    if (!cb->GetModuleFunctionTable (NVTX_CB_MODULE_CORE, &core, &ncore))
        return 0;
    s_hook (core, ncore, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer) s_RangePushA);
    s_hook (core, ncore, NVTX_CBID_CORE_RangePushW, (NvtxFunctionPointer) s_RangePushW);
    s_hook (core, ncore, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer) s_RangePushEx);
    s_hook (core, ncore, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer) s_RangePop);
    if (cb->GetModuleFunctionTable (NVTX_CB_MODULE_CORE2, &core2, &ncore2)) {
        s_hook (core2, ncore2, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer) s_DomainRangePushEx);
        s_hook (core2, ncore2, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer) s_DomainRangePop);
        s_hook (core2, ncore2, NVTX_CBID_CORE2_DomainRegisterStringA,
                (NvtxFunctionPointer) s_DomainRegisterStringA);
        s_hook (core2, ncore2, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer) s_DomainCreateA);
    }
    return 1;
}

/* ================================================================ CUPTI */

static const char *s_cupti_text (CUptiResult r)
{
    const char *s = NULL;
    if (C.cuptiGetResultString && C.cuptiGetResultString (r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI result";
}

static const CUpti_CallbackId s_runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};
static const CUpti_CallbackId s_driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

#define S_NRUNTIME (sizeof s_runtime_cbids / sizeof s_runtime_cbids[0])
#define S_NDRIVER  (sizeof s_driver_cbids / sizeof s_driver_cbids[0])

/*  cbid's index among the domain's launch APIs, or -1: not a launch. */
static int s_launch_index (CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    const bool rt = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    const CUpti_CallbackId *ids = rt ? s_runtime_cbids : s_driver_cbids;
    const size_t n = rt ? S_NRUNTIME : S_NDRIVER;
    for (size_t i = 0; i < n; i++)
        if (ids[i] == cbid)
            return (int) i;
    return -1;
}

static void CUPTIAPI s_buffer_requested (uint8_t **buffer, size_t *size, size_t *max_records)
{
    akd_buf_request (buffer, size, max_records);
}

static void s_kernel_rec (const CUpti_ActivityKernel10 *k)
{
    akd_rec_kernel_t r;
    memset (&r, 0, sizeof r);
    r.h = (akd_rec_head_t) { AKD_REC_KERNEL, 0, sizeof r };
    r.corr = k->correlationId;
    r.name = akd_rec_string (k->name);
    r.start = k->start;
    r.end = k->end;
    r.gnode = k->graphNodeId;
    r.dev = k->deviceId;
    r.stream = k->streamId;
    r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
    r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
    r.cluster[0] = k->clusterX, r.cluster[1] = k->clusterY, r.cluster[2] = k->clusterZ;
    r.smem_static = k->staticSharedMemory;
    r.smem_dynamic = k->dynamicSharedMemory;
    r.regs = k->registersPerThread;
    r.graph = k->graphId;
    akd_rec_out (&r, sizeof r);
}

/*  A launch API call stamped inside the window (the window's times are
    published before any launch inside it can complete). */
static void s_api_rec (const CUpti_ActivityAPI *a, CUpti_CallbackDomain domain)
{
    uint64_t open = atomic_load (&akd_g.open_ts), close = atomic_load (&akd_g.close_ts);
    if (open == 0 || a->start < open || (close != 0 && a->start > close))
        return;
    if (S.api_filter && s_launch_index (domain, a->cbid) < 0)
        return;
    const char *name = NULL;
    char fallback[48];
    if (!C.callback_name || C.callback_name (domain, a->cbid, &name) != CUPTI_SUCCESS || !name) {
        snprintf (fallback, sizeof fallback, "%s:%u", domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver",
                  a->cbid);
        name = fallback;
    }
    akd_rec_api_t r = { { AKD_REC_API, 0, sizeof r }, a->correlationId, a->cbid, a->threadId, (uint32_t) domain,
                        a->start, a->end, akd_rec_string (name), 0 };
    akd_rec_out (&r, sizeof r);
}

static void CUPTIAPI s_buffer_completed (CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                         size_t size, size_t valid)
{
    (void) size;
    CUpti_Activity *rec = NULL;
    bool keep = atomic_load (&akd_g.window) != AKD_W_BEFORE;
    while (valid > 0 && C.cuptiActivityGetNextRecord (buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            if (keep)
                s_kernel_rec ((const CUpti_ActivityKernel10 *) rec);
        }
        else
        if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
            s_api_rec ((const CUpti_ActivityAPI *) rec, rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME
                                                       ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API);
        else
        if (rec->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
            const CUpti_ActivityDevice5 *d = (const CUpti_ActivityDevice5 *) rec;
            akd_rec_device_t r = { { AKD_REC_DEVICE, 0, sizeof r }, d->id, akd_rec_string (d->name),
                                   (int32_t) d->computeCapabilityMajor, (int32_t) d->computeCapabilityMinor,
                                   (int32_t) d->numMultiprocessors, 0 };
            akd_rec_out (&r, sizeof r);
            atomic_store (&S.device_seen, true);
        }
    }
    size_t dropped = 0;
    if (C.cuptiActivityGetNumDroppedRecords (ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
        akd_rec_dropped_t r = { { AKD_REC_DROPPED, 0, sizeof r }, dropped, 0 };
        akd_rec_out (&r, sizeof r);
    }
    akd_buf_release (buffer);
}

/*  Graph node created (with the creating thread's range stack: a graph is
    often captured in a warm-up whose pushes are not in the trace) or
    cloned at instantiation. */
static void s_gnode (const CUpti_ResourceData *rd, bool cloned)
{
    const CUpti_GraphData *g = (const CUpti_GraphData *) rd->resourceDescriptor;
    if (!g)
        return;
    uint64_t node = 0, orig = 0;
    uint32_t graph = 0;
    if (C.cuptiGetGraphNodeId (g->node, &node) != CUPTI_SUCCESS || C.cuptiGetGraphId (g->graph, &graph) != CUPTI_SUCCESS)
        return;
    if (cloned && C.cuptiGetGraphNodeId (g->originalNode, &orig) != CUPTI_SUCCESS)
        return;
    akd_rec_gnode (graph, node, orig, !cloned);
}

/*  A launch API entered ($AKD_LAUNCH_CB), inside the window: an API
    record in the thread's ring, stamped now (its start and end), named
    once per API. */
static void s_launch_cb (CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cd)
{
    if (cd->callbackSite != CUPTI_API_ENTER
        || atomic_load_explicit (&akd_g.window, memory_order_relaxed) != AKD_W_OPEN)
        return;
    static _Atomic uint32_t runtime_names[S_NRUNTIME], driver_names[S_NDRIVER];
    const int i = s_launch_index (domain, cbid);
    if (i < 0)
        return;
    _Atomic uint32_t *slot = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? &runtime_names[i] : &driver_names[i];
    uint32_t name = atomic_load_explicit (slot, memory_order_relaxed);
    if (!name) {
        name = akd_rec_string (cd->functionName ? cd->functionName : "");
        atomic_store (slot, name);
    }
    akd_rec_launch (cd->correlationId, cbid, (uint32_t) domain, name, s_now ());
}

static void CUPTIAPI s_callback (void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    (void) ud;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API)
        s_launch_cb (domain, cbid, (const CUpti_CallbackData *) data);
    else
    if (domain == CUPTI_CB_DOMAIN_RESOURCE
        && (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED || cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED))
        s_gnode ((const CUpti_ResourceData *) data, cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
}

static long s_env_long (const char *name, long dflt);

/*  Activity records of the launch APIs only (cuptiActivityEnableRuntimeApi
    / DriverApi), else the whole RUNTIME and DRIVER kinds, filtered when
    read. */
static CUptiResult s_enable_launch_records (void)
{
    CUptiResult r = CUPTI_SUCCESS;
    if (C.enable_runtime_api && C.enable_driver_api) {
        for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof s_runtime_cbids / sizeof s_runtime_cbids[0]; i++)
            r = C.enable_runtime_api (s_runtime_cbids[i], 1);
        for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof s_driver_cbids / sizeof s_driver_cbids[0]; i++)
            r = C.enable_driver_api (s_driver_cbids[i], 1);
        if (r == CUPTI_SUCCESS)
            return r;
    }
    S.api_filter = true;
    r = C.cuptiActivityEnable (CUPTI_ACTIVITY_KIND_RUNTIME);
    return r == CUPTI_SUCCESS ? C.cuptiActivityEnable (CUPTI_ACTIVITY_KIND_DRIVER) : r;
}

/*  The launch APIs' callbacks ($AKD_LAUNCH_CB), on or off. */
static CUptiResult s_launch_callbacks (bool on)
{
    CUptiResult r = CUPTI_SUCCESS;
    for (size_t i = 0; r == CUPTI_SUCCESS && (S.cb_domains & 1) && i < S_NRUNTIME; i++)
        r = C.cuptiEnableCallback (on, S.sub, CUPTI_CB_DOMAIN_RUNTIME_API, s_runtime_cbids[i]);
    for (size_t i = 0; r == CUPTI_SUCCESS && (S.cb_domains & 2) && i < S_NDRIVER; i++)
        r = C.cuptiEnableCallback (on, S.sub, CUPTI_CB_DOMAIN_DRIVER_API, s_driver_cbids[i]);
    return r;
}

/*  The kernel records (and with $AKD_LAUNCH_CB the launch callbacks), on
    or off; S.gate_mu held. */
static CUptiResult s_records (bool on)
{
    CUptiResult r = on ? C.cuptiActivityEnable (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                       : C.cuptiActivityDisable (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r == CUPTI_SUCCESS && S.launch_cb)
        r = s_launch_callbacks (on);
    if (r == CUPTI_SUCCESS)
        S.records_on = on;
    return r;
}

/*  The kernel records (s_records) on or off, once CUPTI is set up and
    where they are not so already; a failure is an ERROR record naming
    when_on or when_off, and the records stay as they are. */
static void s_switch (bool on, const char *when_on, const char *when_off)
{
    pthread_mutex_lock (&S.gate_mu);
    if (S.cupti_ready && S.records_on != on) {
        CUptiResult r = s_records (on);
        if (r != CUPTI_SUCCESS) {
            char why[256];
            snprintf (why, sizeof why, "turning CUPTI's kernel records %s: %s", on ? when_on : when_off,
                      s_cupti_text (r));
            s_error ("cupti_failed", why);
        }
    }
    pthread_mutex_unlock (&S.gate_mu);
}

/*  The gate (docs/discover.md, "The gate"): with a window that opens
    later (a step range, or --skip-ms), the launches before it cost no
    kernel record; the window's opening turns them on (from the NVTX call
    that opens it, or from InitializeInjection when the window opened
    before cuInit), and they go off again once the window has closed and
    its kernels have been read (s_gate (false), from the flusher), so a
    program that goes on after its window pays less.  The launch-API
    activity records are not gated: on the H200 (CUPTI 13.0.1,
    2026-12-04) the launch APIs enabled at the window's opening made no
    record at all, and every kernel lost its launch ($AKD_LAUNCH_CB's
    callbacks are, with the kernel records). */
static void s_gate (bool on)
{
    if (S.gate)
        s_switch (on, "on as the window opened", "off after the window");
}

/*  Sampling ($AKD_SAMPLE): the kernel records on as a traced step of the
    window opens, off as an untraced one does (the traced step's kernels
    were all launched by then: their records are made at the launch), from
    the NVTX push that opens the step.  A failure is an ERROR record, and
    the records stay as they are. */
static void s_sample (bool traced)
{
    /* the records CUPTI holds of the traced step's kernels are asked for
       (completed ones, as the flusher does) before they are switched off:
       on the H100 (session 36) a CUDA graph's kernel records otherwise
       took their ends from the untraced replays after it (33 ms median
       for kernels of 2 us); with the flush they were the unsampled run's
       ($AKD_SAMPLE_FLUSH=0: no flush; docs/discover.md) */
    if (!traced && S.sample_flush && atomic_load (&S.cupti_on)) {
        pthread_mutex_lock (&S.gate_mu);
        if (S.cupti_ready && S.records_on)
            C.cuptiActivityFlushAll (0);
        pthread_mutex_unlock (&S.gate_mu);
    }
    s_switch (traced, "on for a sampled step", "off for a step not sampled");
}

/*  CUPTI's buffer attributes from the environment (inject_buf.c,
    akd_buf_attrs): 0, or -1 after an ERROR record naming the attribute
    CUPTI refused (or a CUPTI without cuptiActivitySetAttribute). */
static int s_cupti_attrs (void)
{
    const long given[3] = { s_env_long ("AKD_CUPTI_PINNED", -1), s_env_long ("AKD_CUPTI_BUFFER_MB", -1),
                            s_env_long ("AKD_CUPTI_PREALLOC", -1) };
    const char *name = NULL;
    long value = 0;
    int r = 0;
    if (akd_buf_attrs (S.cupti, given, &name, &value, &r) == 0)
        return 0;
    char why[256];
    if (!name)
        snprintf (why, sizeof why, "AKD_CUPTI_*: this CUPTI has no cuptiActivitySetAttribute");
    else
        snprintf (why, sizeof why, "cuptiActivitySetAttribute (%s, %ld from the environment): %s", name, value,
                  s_cupti_text ((CUptiResult) r));
    s_error ("cupti_failed", why);
    return -1;
}

static void *s_open_cupti (char *path, size_t cap)
{
    char soname[32];
    snprintf (soname, sizeof soname, "libcupti.so.%d", CUDA_VERSION / 1000);
    const char *names[] = { soname, "libcupti.so" };
    const char *env = getenv ("CUDA_HOME");
    const char *roots[] = { env, getenv ("CUDA_PATH"),
#ifdef AK_CUDA_ROOT_DIR
                            AK_CUDA_ROOT_DIR,
#endif
                            "/usr/local/cuda" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen (names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf (path, cap, "%s", names[i]);
            return h;
        }
    }
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++)
        for (int sub = 0; roots[r] && *roots[r] && sub < 2; sub++)
            for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                snprintf (path, cap, "%s/%s/%s", roots[r], sub ? "extras/CUPTI/lib64" : "lib64", names[i]);
                void *h = dlopen (path, RTLD_NOW | RTLD_LOCAL);
                if (h)
                    return h;
            }
    path[0] = '\0';
    return NULL;
}

static int s_cupti_start (void)
{
    char path[1024], why[1200];
    S.cupti = s_open_cupti (path, sizeof path);
    if (!S.cupti) {
        s_error ("cupti_missing", "libcupti.so: not found (searched the loader path, $CUDA_HOME, "
                                  "$CUDA_PATH, /usr/local/cuda: lib64 and extras/CUPTI/lib64)");
        return -1;
    }
#define S_RESOLVE(name)                                                        \
    if (!(C.name = (__typeof__ (C.name)) dlsym (S.cupti, #name))) {            \
        snprintf (why, sizeof why, "%s: no symbol %s", path, #name);           \
        s_error ("cupti_missing", why);                                        \
        return -1;                                                             \
    }
    S_CUPTI_FNS (S_RESOLVE)
#undef S_RESOLVE
    C.enable_runtime_api = (__typeof__ (C.enable_runtime_api)) dlsym (S.cupti, "cuptiActivityEnableRuntimeApi");
    C.enable_driver_api = (__typeof__ (C.enable_driver_api)) dlsym (S.cupti, "cuptiActivityEnableDriverApi");
    C.callback_name = (__typeof__ (C.callback_name)) dlsym (S.cupti, "cuptiGetCallbackName");
    uint32_t version = 0;
    C.cuptiGetVersion (&version);
    /* Activity records are read with our headers' layouts
       (CUpti_ActivityKernel10 in CUPTI 13); an older CUPTI writes older ones. */
    if (version < (CUPTI_API_VERSION / 10000) * 10000) {
        snprintf (why, sizeof why, "%s is CUPTI API %u; libakdiscover.so reads CUPTI %d records "
                  "(built against %d)", path, version, CUPTI_API_VERSION / 10000, CUPTI_API_VERSION);
        s_error ("cupti_old", why);
        return -1;
    }
    akd_rec_cupti_t cr = { { AKD_REC_CUPTI, 0, sizeof cr }, version, akd_rec_string (path) };
    akd_rec_out (&cr, sizeof cr);

    if (s_cupti_attrs () != 0)
        return -1;
    CUptiResult r = C.cuptiSubscribe (&S.sub, (CUpti_CallbackFunc) s_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        snprintf (why, sizeof why, "cuptiSubscribe: %s%s", s_cupti_text (r),
                  r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                  ? " (another tool already holds CUPTI: Nsight Systems, torch.profiler, "
                    "a second injection ...)" : "");
        s_error (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "cupti_busy" : "cupti_failed", why);
        return -1;
    }
    /* From here on pushes carry CUPTI's clock, the one of its records. */
    atomic_store (&S.cupti_on, true);
    r = C.cuptiEnableCallback (1, S.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    if (r == CUPTI_SUCCESS)
        r = C.cuptiEnableCallback (1, S.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    if (r == CUPTI_SUCCESS)
        r = C.cuptiActivityRegisterCallbacks (s_buffer_requested, s_buffer_completed);
    /* AKD_LAUNCH_RECORDS=0: no launch-API records (kernels lose their
       launching thread); for ops/bench/launch_cost.sh --split only, which
       measures what those records cost a launch.  The kernel records wait
       for the window (s_gate), unless it is open already; the launch-API
       records do not (s_gate says why). */
    if (r == CUPTI_SUCCESS && !S.launch_cb && s_env_long ("AKD_LAUNCH_RECORDS", 1) != 0)
        r = s_enable_launch_records ();
    pthread_mutex_lock (&S.gate_mu);
    if (r == CUPTI_SUCCESS && (!S.gate || atomic_load (&akd_g.window) == AKD_W_OPEN))
        r = s_records (true);
    S.cupti_ready = r == CUPTI_SUCCESS;
    pthread_mutex_unlock (&S.gate_mu);
    if (r != CUPTI_SUCCESS) {
        snprintf (why, sizeof why, "CUPTI set-up: %s", s_cupti_text (r));
        s_error ("cupti_failed", why);
        return -1;
    }
    /* Device records are emitted at driver initialisation; EnableAndDump
       also hands over those emitted before (s_device_fallback otherwise). */
    CUptiResult (*dump) (CUpti_ActivityKind) =
        (CUptiResult (*) (CUpti_ActivityKind)) dlsym (S.cupti, "cuptiActivityEnableAndDump");
    (void) (dump ? dump (CUPTI_ACTIVITY_KIND_DEVICE) : C.cuptiActivityEnable (CUPTI_ACTIVITY_KIND_DEVICE));
    return 0;
}

/* ============================================================ lifetime */

/*  When CUPTI gave no device record, the devices as the driver names them
    (from the flusher thread, never inside cuInit; ids are ordinals, as
    CUPTI's deviceId). */
static void s_device_fallback (void)
{
    void *h = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return;
    int (*count_fn) (int *) = (int (*) (int *)) dlsym (h, "cuDeviceGetCount");
    int (*get_fn) (int *, int) = (int (*) (int *, int)) dlsym (h, "cuDeviceGet");
    int (*name_fn) (char *, int, int) = (int (*) (char *, int, int)) dlsym (h, "cuDeviceGetName");
    int (*attr_fn) (int *, int, int) = (int (*) (int *, int, int)) dlsym (h, "cuDeviceGetAttribute");
    int n = 0;
    if (!count_fn || !get_fn || !name_fn || !attr_fn || count_fn (&n) != 0)
        return;
    for (int i = 0; i < n && i < 64; i++) {
        int dev = 0, maj = 0, min = 0, sms = 0;
        char name[256] = "";
        if (get_fn (&dev, i) != 0 || name_fn (name, (int) sizeof name - 1, dev) != 0
            || attr_fn (&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != 0
            || attr_fn (&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != 0
            || attr_fn (&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != 0)
            continue;
        akd_rec_device_t r = { { AKD_REC_DEVICE, 0, sizeof r }, (uint32_t) i, akd_rec_string (name), maj, min, sms, 1 };
        akd_rec_out (&r, sizeof r);
        atomic_store (&S.device_seen, true);
    }
}

static void *s_flusher_main (void *arg)
{
    (void) arg;
    int closed_flushes = 0, open_flushes = 0;
    while (!atomic_load (&S.stop)) {
        akd_rec_wait (S_FLUSH_MS);
        s_window_by_time ();
        if (atomic_load (&S.cupti_on) && closed_flushes < 2) {
            bool closed = atomic_load (&akd_g.window) == AKD_W_CLOSED;
            C.cuptiActivityFlushAll (closed ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
            closed_flushes += closed;
            if (closed_flushes == 2)
                s_gate (false);     /* the window's kernels are read: no more records */
            if (atomic_load (&akd_g.window) != AKD_W_BEFORE && !atomic_load (&S.device_seen) && ++open_flushes == 3)
                s_device_fallback ();
        }
        akd_rec_flush ();
    }
    return NULL;
}

static void s_at_exit (void)
{
    if (!S.on || atomic_exchange (&S.ended, true))
        return;
    atomic_store (&S.stop, true);
    if (S.flusher_on) {
        akd_rec_kick ();
        pthread_join (S.flusher, NULL);
    }
    if (atomic_load (&S.cupti_on))
        C.cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    akd_rec_flush ();
    akd_rec_end_t r = { { AKD_REC_END, 0, sizeof r }, atomic_load (&S.step_starts), atomic_load (&S.step_ends) };
    akd_rec_out (&r, sizeof r);
    akd_rec_flush ();
    akd_buf_drain ();
}

static const int s_signals[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGQUIT };
static struct sigaction s_old[sizeof s_signals / sizeof s_signals[0]];

/*  Writes what is buffered (if no other thread is inside the writer within
    a bounded wait), then hands the signal to whoever had it before us. */
static void s_on_signal (int sig, siginfo_t *si, void *uc)
{
    akd_rec_signal_t r = { { AKD_REC_SIGNAL, 0, sizeof r }, sig, 0 };
    akd_rec_flush_signal (&r, sizeof r);
    for (size_t i = 0; i < sizeof s_signals / sizeof s_signals[0]; i++) {
        if (s_signals[i] != sig)
            continue;
        const struct sigaction *old = &s_old[i];
        if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
            old->sa_sigaction (sig, si, uc);
            return;
        }
        if (old->sa_handler == SIG_IGN)
            return;
        if (old->sa_handler != SIG_DFL) {
            old->sa_handler (sig);
            return;
        }
        /* default action: put it back and let the signal do it */
        sigaction (sig, old, NULL);
        if (sig != SIGSEGV && sig != SIGBUS && sig != SIGFPE && sig != SIGILL)
            raise (sig);
        return;
    }
}

/*  A forked child (a data loader worker ...) is not traced: it would
    write the parent's buffered records again into the same file. */
static void s_after_fork_child (void)
{
    S.on = false;
    atomic_store (&S.cupti_on, false);
    S.flusher_on = false;
    akd_rec_forget ();
    atomic_store (&S.ended, true);
}

static void s_read_driver_release (char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen ("/proc/driver/nvidia/version", "r");
    if (!f)
        return;
    char line[512];
    if (fgets (line, sizeof line, f)) {
        char *save = NULL;
        for (char *tok = strtok_r (line, " \t\n", &save); tok; tok = strtok_r (NULL, " \t\n", &save)) {
            bool digits = tok[0] >= '0' && tok[0] <= '9' && strchr (tok, '.');
            for (char *c = tok; digits && *c; c++)
                digits = (*c >= '0' && *c <= '9') || *c == '.';
            if (digits) {
                snprintf (out, cap, "%s", tok);
                break;
            }
        }
    }
    fclose (f);
}

/* NVRTC's version is part of a device class (worker/backend_cuda.c). */
static void s_read_nvrtc (char *out, size_t cap)
{
    out[0] = '\0';
    char soname[32];
    snprintf (soname, sizeof soname, "libnvrtc.so.%d", CUDA_VERSION / 1000);
    void *h = dlopen (soname, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen ("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen ("/usr/local/cuda/lib64/libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    int (*version) (int *, int *) = (int (*) (int *, int *)) dlsym (h, "nvrtcVersion");
    int maj = 0, min = 0;
    if (version && version (&maj, &min) == 0)
        snprintf (out, cap, "%d.%d", maj, min);
}

static long s_env_long (const char *name, long dflt)
{
    const char *v = getenv (name);
    if (!v || !*v)
        return dflt;
    char *end = NULL;
    long n = strtol (v, &end, 10);
    return (end && *end == '\0' && n >= 0) ? n : dflt;
}

static void s_init (void)
{
    const char *path = getenv ("AKD_TRACE");
    if (!path || !*path)
        return;
    clock_gettime (CLOCK_MONOTONIC, &S.t0);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (akd_rec_init (fd, (int64_t) getpid ()) != 0) {
        close (fd);
        return;
    }
    /* The child processes of the program (a launcher, a compiler ...) do
       not trace into our file. */
    unsetenv ("AKD_TRACE");
    const char *step = getenv ("AKD_STEP_RANGE");
    S.step_range = step && *step ? strdup (step) : NULL;
    S.warmup = s_env_long ("AKD_WARMUP_STEPS", 0);
    S.steps = s_env_long ("AKD_STEPS", 0);
    S.sample = S.step_range ? s_env_long ("AKD_SAMPLE", 1) : 1;
    if (S.sample < 1)
        S.sample = 1;
    S.launch_cb = s_env_long ("AKD_LAUNCH_CB", S.sample > 1) != 0;
    S.sample_flush = S.sample > 1 && s_env_long ("AKD_SAMPLE_FLUSH", 1) != 0;
    const char *dom = getenv ("AKD_LAUNCH_CB_DOMAINS");
    S.cb_domains = dom && strcmp (dom, "runtime") == 0 ? 1u : dom && strcmp (dom, "driver") == 0 ? 2u : 3u;
    S.skip_ms = s_env_long ("AKD_SKIP_MS", 0);
    S.gate = (S.step_range || S.skip_ms > 0) && s_env_long ("AKD_GATE", 1) != 0;
    akd_buf_pool (s_env_long ("AKD_BUFFER_POOL", 1) != 0);
    S.on = true;
    char drv[64], nvrtc[32];
    s_read_driver_release (drv, sizeof drv);
    s_read_nvrtc (nvrtc, sizeof nvrtc);
    akd_rec_meta_t m = { { AKD_REC_META, 0, sizeof m }, S.warmup, S.steps, S.skip_ms,
                         akd_rec_string (S.step_range ? S.step_range : ""), akd_rec_string (drv),
                         akd_rec_string (nvrtc), (uint32_t) S.sample };
    akd_rec_out (&m, sizeof m);
    if (!S.step_range && S.skip_ms <= 0)
        s_window_set (AKD_W_OPEN);
    atexit (s_at_exit);
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_sigaction = s_on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset (&sa.sa_mask);
    for (size_t i = 0; i < sizeof s_signals / sizeof s_signals[0]; i++)
        sigaction (s_signals[i], &sa, &s_old[i]);
    pthread_atfork (NULL, NULL, s_after_fork_child);
    S.flusher_on = pthread_create (&S.flusher, NULL, s_flusher_main, NULL) == 0;
}

/*  CUDA_INJECTION64_PATH: called by cuInit.  1 on success (the program
    runs on whatever happens here: a failure is an ERROR record). */
AKD_EXPORT int InitializeInjection (void)
{
    pthread_once (&S.once, s_init);
    if (!S.on || atomic_load (&S.cupti_on))
        return 1;
    (void) s_cupti_start ();
    return 1;
}
