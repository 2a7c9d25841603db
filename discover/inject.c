/*  discover/inject.c: libakdiscover.so, the injection library of
    `akctl discover` (docs/discover.md).

    Loaded into an unmodified program twice over, by the same file:
    - CUDA_INJECTION64_PATH: cuInit calls InitializeInjection, which opens
      CUPTI with dlopen (as the worker does: libcupti.so.<major>, then
      libcupti.so, then the toolkit folders), subscribes to the launch APIs
      of the runtime and driver (correlation id -> launching thread) and to
      graph node creation and cloning, and enables CONCURRENT_KERNEL activity;
    - NVTX_INJECTION64_PATH: the first NVTX call of the program calls
      InitializeInjectionNvtx2, which puts our own handlers into NVTX's
      core tables (push/pop, registered strings, domain push/pop).  Our own
      handlers rather than CUPTI's marker activity: they see the thread and
      the order of every push and pop relative to the launches (one global
      sequence number), need no second CUPTI feature, and work before cuInit.

    Every event becomes one JSON line of the trace file ($AKD_TRACE, format
    in docs/formats.md, "Discover trace").  Lines go to a buffer under one
    mutex; a flusher thread writes it out every 200 ms and asks CUPTI for
    its completed buffers; at exit the rest and an "end" line are written.
    A fatal signal writes what is buffered (never the "end" line), so a
    crashed program leaves a trace that reads as partial.

    Window ($AKD_STEP_RANGE, $AKD_WARMUP_STEPS, $AKD_STEPS, $AKD_SKIP_MS):
    before it opens only device and graph-node lines are written; ranges
    and launches are written while it is open; kernels from its opening on
    (the analysis keeps those whose launch it saw).

    Never: change what the program computes or how it handles signals
    (handlers chain to the ones they replace), write the file from a CUDA or
    NVTX call (the flusher and the exit do; only a buffer filled within one
    flush interval is written by the call that fills it), or link anything
    but libc: the library is loaded into processes we do not control. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
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

#define AKD_EXPORT __attribute__ ((visibility ("default")))
#define S_BUF_CAP      (4u << 20)       /* trace bytes buffered before a write */
#define S_LINE_MAX     8192             /* one trace line at most (names cut) */
#define S_STACK_MAX    256              /* NVTX depth kept per thread */
#define S_CUPTI_BUF    (8u << 20)       /* one CUPTI activity buffer */
#define S_FLUSH_MS     200

/* ================================================================ state */

enum { S_BEFORE, S_OPEN, S_CLOSED };

static struct {
    pthread_once_t   once;
    bool             on;                /* AKD_TRACE was set and opened */
    int              fd;
    pthread_mutex_t  mu;                /* buf, len */
    char            *buf;
    size_t           len;
    atomic_uint_fast64_t seq;           /* order of host events, all threads */
    atomic_uint_fast64_t range_ids;
    /* window */
    char            *step_range;        /* NULL: no steps */
    long             warmup, steps;     /* steps 0: until exit */
    long             skip_ms;
    struct timespec  t0;
    atomic_int       window;            /* S_BEFORE ... */
    atomic_int       generation;        /* bumped when the window opens */
    atomic_long      step_starts, step_ends;
    atomic_bool      ended;
    /* CUPTI */
    void            *cupti;
    bool             cupti_on;
    CUpti_SubscriberHandle sub;
    pthread_t        flusher;
    bool             flusher_on;
    atomic_bool      stop;
    atomic_uint_fast64_t dropped;
    atomic_bool      device_seen;       /* a device line was written */
} S = { .once = PTHREAD_ONCE_INIT, .fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER };

/* CUPTI entry points, opened with dlopen (never linked). */
#define S_CUPTI_FNS(X)                                                         \
    X (cuptiGetVersion) X (cuptiGetResultString) X (cuptiSubscribe)            \
    X (cuptiEnableCallback) X (cuptiEnableDomain) X (cuptiActivityEnable)      \
    X (cuptiActivityRegisterCallbacks) X (cuptiActivityFlushAll)               \
    X (cuptiActivityGetNextRecord) X (cuptiActivityGetNumDroppedRecords)       \
    X (cuptiGetTimestamp) X (cuptiGetGraphNodeId) X (cuptiGetGraphId)
#define S_MEMBER(name) __typeof__ (&name) name;
static struct { S_CUPTI_FNS (S_MEMBER) } C;

typedef struct {
    uint64_t id;
    char    *name;                      /* owned */
} s_frame_t;

static __thread struct {
    s_frame_t stack[S_STACK_MAX];
    int       depth;                    /* may exceed S_STACK_MAX: frames beyond are not kept */
    int       generation;               /* the window generation this thread's stack was written for */
    long      tid;
} T;

/* ============================================================== writing */

static long s_tid (void)
{
    if (!T.tid)
        T.tid = (long) syscall (SYS_gettid);
    return T.tid;
}

static uint64_t s_now (void)
{
    uint64_t ts = 0;
    if (S.cupti_on && C.cuptiGetTimestamp (&ts) == CUPTI_SUCCESS)
        return ts;
    return 0;
}

/* Writes the buffer out; caller holds mu.  A failed write loses the bytes
   (the trace then lacks its "end" line and reads as partial). */
static void s_drain_locked (void)
{
    size_t off = 0;
    while (off < S.len) {
        ssize_t n = write (S.fd, S.buf + off, S.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t) n;
    }
    S.len = 0;
}

static void s_emit (const char *line, size_t n)
{
    pthread_mutex_lock (&S.mu);
    if (S.len + n > S_BUF_CAP)
        s_drain_locked ();
    memcpy (S.buf + S.len, line, n);
    S.len += n;
    pthread_mutex_unlock (&S.mu);
}

/* Appends text as a JSON string body: quotes, backslashes and control
   characters escaped, invalid UTF-8 replaced by U+FFFD, cut to fit. */
static size_t s_json_str (char *out, size_t cap, const char *text)
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *) (text ? text : "");
    while (*p && o + 8 < cap) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char) c;
            p++;
        }
        else
        if (c < 0x20) {
            o += (size_t) snprintf (out + o, cap - o, "\\u%04x", c);
            p++;
        }
        else
        if (c < 0x80)
            out[o++] = (char) *p++;
        else {
            int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
            bool ok = len > 0;
            for (int i = 1; ok && i < len; i++)
                ok = (p[i] & 0xC0) == 0x80;
            if (ok && o + (size_t) len + 8 < cap) {
                memcpy (out + o, p, (size_t) len);
                o += (size_t) len;
                p += len;
            }
            else {
                memcpy (out + o, "\\ufffd", 6);
                o += 6;
                p++;
            }
        }
    }
    out[o] = '\0';
    return o;
}

static void s_emitf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static void s_emitf (const char *fmt, ...)
{
    char line[S_LINE_MAX];
    va_list ap;
    va_start (ap, fmt);
    int n = vsnprintf (line, sizeof line - 1, fmt, ap);
    va_end (ap);
    if (n < 0)
        return;
    if ((size_t) n >= sizeof line - 1)
        return;                          /* names are cut before this; never a broken line */
    line[n++] = '\n';
    s_emit (line, (size_t) n);
}

/* =============================================================== window */

static bool s_skip_elapsed (void)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - S.t0.tv_sec) * 1000 + (now.tv_nsec - S.t0.tv_nsec) / 1000000;
    return ms >= S.skip_ms;
}

static void s_window_set (int state)
{
    int from = atomic_load (&S.window);
    if (from == state || (state == S_OPEN && from != S_BEFORE))
        return;
    if (!atomic_compare_exchange_strong (&S.window, &from, state))
        return;
    if (state == S_OPEN)
        atomic_fetch_add (&S.generation, 1);
    s_emitf ("{\"t\":\"window\",\"state\":\"%s\",\"seq\":%llu,\"ts\":%llu,\"tid\":%ld}",
             state == S_OPEN ? "open" : "closed",
             (unsigned long long) atomic_fetch_add (&S.seq, 1), (unsigned long long) s_now (), s_tid ());
}

/* Without a step range the window opens once --skip-ms has passed. */
static bool s_window_open_now (void)
{
    int w = atomic_load (&S.window);
    if (w == S_BEFORE && !S.step_range && s_skip_elapsed ()) {
        s_window_set (S_OPEN);
        w = atomic_load (&S.window);
    }
    return w == S_OPEN;
}

/* The first line a thread writes in the window is preceded by the ranges
   it already had open, flagged "pre" (their push happened before). */
static void s_thread_sync (void)
{
    int gen = atomic_load (&S.generation);
    if (T.generation == gen)
        return;
    T.generation = gen;
    int kept = T.depth < S_STACK_MAX ? T.depth : S_STACK_MAX;
    for (int i = 0; i < kept; i++) {
        char name[S_LINE_MAX / 2];
        s_json_str (name, sizeof name, T.stack[i].name);
        s_emitf ("{\"t\":\"push\",\"seq\":%llu,\"tid\":%ld,\"ts\":0,\"id\":%llu,\"pre\":true,\"name\":\"%s\"}",
                 (unsigned long long) atomic_fetch_add (&S.seq, 1), s_tid (),
                 (unsigned long long) T.stack[i].id, name);
    }
}

/* ================================================================= NVTX */

static void s_init (void);

static int s_push (const char *text)
{
    pthread_once (&S.once, s_init);
    if (!S.on)
        return T.depth++;
    int level = T.depth;
    if (level == 0 && S.step_range && text && strcmp (text, S.step_range) == 0) {
        long n = atomic_fetch_add (&S.step_starts, 1) + 1;
        if (n == S.warmup + 1 && (S.skip_ms <= 0 || s_skip_elapsed ()))
            s_window_set (S_OPEN);
        else
        if (atomic_load (&S.window) == S_BEFORE && n > S.warmup && S.skip_ms > 0 && s_skip_elapsed ())
            s_window_set (S_OPEN);
    }
    uint64_t id = atomic_fetch_add (&S.range_ids, 1) + 1;
    if (s_window_open_now ()) {
        s_thread_sync ();
        char name[S_LINE_MAX / 2];
        s_json_str (name, sizeof name, text);
        s_emitf ("{\"t\":\"push\",\"seq\":%llu,\"tid\":%ld,\"ts\":%llu,\"id\":%llu,\"name\":\"%s\"}",
                 (unsigned long long) atomic_fetch_add (&S.seq, 1), s_tid (),
                 (unsigned long long) s_now (), (unsigned long long) id, name);
    }
    if (level < S_STACK_MAX) {
        T.stack[level].id = id;
        T.stack[level].name = strdup (text ? text : "");
    }
    T.depth++;
    return level;
}

static int s_pop (void)
{
    if (T.depth <= 0)
        return -1;
    if (S.on && s_window_open_now ()) {
        s_thread_sync ();
        s_emitf ("{\"t\":\"pop\",\"seq\":%llu,\"tid\":%ld,\"ts\":%llu}",
                 (unsigned long long) atomic_fetch_add (&S.seq, 1), s_tid (), (unsigned long long) s_now ());
    }
    int level = --T.depth;
    bool step = false;
    if (level < S_STACK_MAX) {
        step = level == 0 && S.step_range && T.stack[0].name && strcmp (T.stack[0].name, S.step_range) == 0;
        free (T.stack[level].name);
        T.stack[level].name = NULL;
    }
    if (S.on && step && atomic_load (&S.window) == S_OPEN) {
        long n = atomic_fetch_add (&S.step_ends, 1) + 1;
        (void) n;
        long begun = atomic_load (&S.step_starts);
        if (S.steps > 0 && begun - S.warmup >= S.steps && level == 0) {
            /* the last step of the window has ended on this thread */
            s_window_set (S_CLOSED);
        }
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

static void s_error (const char *code, const char *what)
{
    char text[1024];
    s_json_str (text, sizeof text, what);
    s_emitf ("{\"t\":\"error\",\"code\":\"%s\",\"what\":\"%s\"}", code, text);
}

static void CUPTIAPI s_buffer_requested (uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc (8, S_CUPTI_BUF);
    *size = *buffer ? S_CUPTI_BUF : 0;
    *max_records = 0;
}

static void s_kernel_line (const CUpti_ActivityKernel10 *k)
{
    char name[S_LINE_MAX / 2];
    s_json_str (name, sizeof name, k->name);
    s_emitf ("{\"t\":\"kernel\",\"corr\":%u,\"start\":%llu,\"end\":%llu,\"dev\":%u,\"stream\":%u,"
             "\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"cluster\":[%u,%u,%u],"
             "\"smem_static\":%d,\"smem_dynamic\":%d,\"regs\":%u,\"graph\":%u,\"gnode\":%llu,\"name\":\"%s\"}",
             k->correlationId, (unsigned long long) k->start, (unsigned long long) k->end,
             k->deviceId, k->streamId, k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ,
             k->clusterX, k->clusterY, k->clusterZ, k->staticSharedMemory, k->dynamicSharedMemory,
             (unsigned) k->registersPerThread, k->graphId, (unsigned long long) k->graphNodeId, name);
}

static void CUPTIAPI s_buffer_completed (CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                         size_t size, size_t valid)
{
    (void) ctx;
    (void) stream;
    (void) size;
    CUpti_Activity *rec = NULL;
    bool keep = atomic_load (&S.window) != S_BEFORE;
    while (valid > 0 && C.cuptiActivityGetNextRecord (buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            if (keep)
                s_kernel_line ((const CUpti_ActivityKernel10 *) rec);
        }
        else
        if (rec->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
            const CUpti_ActivityDevice5 *d = (const CUpti_ActivityDevice5 *) rec;
            char name[512];
            s_json_str (name, sizeof name, d->name);
            s_emitf ("{\"t\":\"device\",\"id\":%u,\"name\":\"%s\",\"cc\":[%u,%u],\"sms\":%u}",
                     d->id, name, d->computeCapabilityMajor, d->computeCapabilityMinor,
                     d->numMultiprocessors);
            atomic_store (&S.device_seen, true);
        }
    }
    size_t dropped = 0;
    if (C.cuptiActivityGetNumDroppedRecords (ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        s_emitf ("{\"t\":\"dropped\",\"n\":%zu}", dropped);
    free (buffer);
}

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
    /* The stack goes with the node: a graph is often captured in a warm-up
       whose pushes are not in the trace. */
    char line[S_LINE_MAX];
    int n = snprintf (line, sizeof line, "{\"t\":\"gnode\",\"seq\":%llu,\"tid\":%ld,\"graph\":%u,\"node\":%llu,"
                      "\"orig\":%llu,\"stack\":[",
                      (unsigned long long) atomic_fetch_add (&S.seq, 1), s_tid (), graph,
                      (unsigned long long) node, (unsigned long long) orig);
    int kept = T.depth < S_STACK_MAX ? T.depth : S_STACK_MAX;
    for (int i = 0; !cloned && i < kept && n > 0 && (size_t) n < sizeof line - 64; i++) {
        char name[1024];
        s_json_str (name, sizeof name, T.stack[i].name);
        if ((size_t) n + strlen (name) + 8 >= sizeof line - 8)
            break;
        n += snprintf (line + n, sizeof line - (size_t) n, "%s\"%s\"", i ? "," : "", name);
    }
    if (n > 0 && (size_t) n < sizeof line - 4) {
        n += snprintf (line + n, sizeof line - (size_t) n, "]}\n");
        s_emit (line, (size_t) n);
    }
}

static void CUPTIAPI s_callback (void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    (void) ud;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED || cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED)
            s_gnode ((const CUpti_ResourceData *) data, cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
        return;
    }
    const CUpti_CallbackData *cd = (const CUpti_CallbackData *) data;
    if (cd->callbackSite != CUPTI_API_ENTER || !s_window_open_now ())
        return;
    s_thread_sync ();
    s_emitf ("{\"t\":\"launch\",\"seq\":%llu,\"tid\":%ld,\"ts\":%llu,\"corr\":%u,\"api\":\"%s\"}",
             (unsigned long long) atomic_fetch_add (&S.seq, 1), s_tid (), (unsigned long long) s_now (),
             cd->correlationId, cd->functionName ? cd->functionName : "");
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
    char p[1024];
    s_json_str (p, sizeof p, path);
    s_emitf ("{\"t\":\"cupti\",\"version\":%u,\"path\":\"%s\"}", version, p);

    CUptiResult r = C.cuptiSubscribe (&S.sub, (CUpti_CallbackFunc) s_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        snprintf (why, sizeof why, "cuptiSubscribe: %s%s", s_cupti_text (r),
                  r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                  ? " (another tool already holds CUPTI: Nsight Systems, torch.profiler, "
                    "a second injection ...)" : "");
        s_error (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "cupti_busy" : "cupti_failed", why);
        return -1;
    }
    S.cupti_on = true;
    for (size_t i = 0; i < sizeof s_runtime_cbids / sizeof s_runtime_cbids[0]; i++)
        if ((r = C.cuptiEnableCallback (1, S.sub, CUPTI_CB_DOMAIN_RUNTIME_API, s_runtime_cbids[i])) != CUPTI_SUCCESS)
            break;
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof s_driver_cbids / sizeof s_driver_cbids[0]; i++)
        r = C.cuptiEnableCallback (1, S.sub, CUPTI_CB_DOMAIN_DRIVER_API, s_driver_cbids[i]);
    if (r == CUPTI_SUCCESS)
        r = C.cuptiEnableCallback (1, S.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    if (r == CUPTI_SUCCESS)
        r = C.cuptiEnableCallback (1, S.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    if (r == CUPTI_SUCCESS)
        r = C.cuptiActivityRegisterCallbacks (s_buffer_requested, s_buffer_completed);
    if (r == CUPTI_SUCCESS)
        r = C.cuptiActivityEnable (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
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
        char name[256] = "", esc[512];
        if (get_fn (&dev, i) != 0 || name_fn (name, (int) sizeof name - 1, dev) != 0
            || attr_fn (&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != 0
            || attr_fn (&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != 0
            || attr_fn (&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != 0)
            continue;
        s_json_str (esc, sizeof esc, name);
        s_emitf ("{\"t\":\"device\",\"id\":%d,\"name\":\"%s\",\"cc\":[%d,%d],\"sms\":%d,\"from\":\"driver\"}",
                 i, esc, maj, min, sms);
        atomic_store (&S.device_seen, true);
    }
}

static void *s_flusher_main (void *arg)
{
    (void) arg;
    int closed_flushes = 0, open_flushes = 0;
    while (!atomic_load (&S.stop)) {
        struct timespec ts = { 0, S_FLUSH_MS * 1000000L };
        nanosleep (&ts, NULL);
        if (S.cupti_on && closed_flushes < 2) {
            bool closed = atomic_load (&S.window) == S_CLOSED;
            C.cuptiActivityFlushAll (closed ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
            closed_flushes += closed;
            if (atomic_load (&S.window) != S_BEFORE && !atomic_load (&S.device_seen) && ++open_flushes == 3)
                s_device_fallback ();
        }
        pthread_mutex_lock (&S.mu);
        s_drain_locked ();
        pthread_mutex_unlock (&S.mu);
    }
    return NULL;
}

static void s_at_exit (void)
{
    if (!S.on || atomic_exchange (&S.ended, true))
        return;
    atomic_store (&S.stop, true);
    if (S.flusher_on)
        pthread_join (S.flusher, NULL);
    if (S.cupti_on)
        C.cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    s_emitf ("{\"t\":\"end\",\"reason\":\"exit\",\"steps_begun\":%ld,\"steps_ended\":%ld}",
             atomic_load (&S.step_starts), atomic_load (&S.step_ends));
    pthread_mutex_lock (&S.mu);
    s_drain_locked ();
    pthread_mutex_unlock (&S.mu);
}

static const int s_signals[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGQUIT };
static struct sigaction s_old[sizeof s_signals / sizeof s_signals[0]];

/*  Writes what is buffered (if no other thread is inside the writer), then
    hands the signal to whoever had it before us. */
static void s_on_signal (int sig, siginfo_t *si, void *uc)
{
    if (pthread_mutex_trylock (&S.mu) == 0) {
        char line[96];
        int n = snprintf (line, sizeof line, "{\"t\":\"signal\",\"signal\":%d}\n", sig);
        if (S.len + (size_t) n <= S_BUF_CAP) {
            memcpy (S.buf + S.len, line, (size_t) n);
            S.len += (size_t) n;
        }
        s_drain_locked ();
        pthread_mutex_unlock (&S.mu);
    }
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
    write the parent's buffered lines again into the same file. */
static void s_after_fork_child (void)
{
    S.on = false;
    S.cupti_on = false;
    S.flusher_on = false;
    S.len = 0;
    if (S.fd >= 0)
        close (S.fd);
    S.fd = -1;
    pthread_mutex_init (&S.mu, NULL);
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
    S.buf = malloc (S_BUF_CAP);
    S.fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (!S.buf || S.fd < 0) {
        free (S.buf);
        S.buf = NULL;
        return;
    }
    /* The child processes of the program (a launcher, a compiler ...) do
       not trace into our file. */
    unsetenv ("AKD_TRACE");
    const char *step = getenv ("AKD_STEP_RANGE");
    S.step_range = step && *step ? strdup (step) : NULL;
    S.warmup = s_env_long ("AKD_WARMUP_STEPS", 0);
    S.steps = s_env_long ("AKD_STEPS", 0);
    S.skip_ms = s_env_long ("AKD_SKIP_MS", 0);
    S.on = true;
    char drv[64], nvrtc[32], step_json[512];
    s_read_driver_release (drv, sizeof drv);
    s_read_nvrtc (nvrtc, sizeof nvrtc);
    s_json_str (step_json, sizeof step_json, S.step_range ? S.step_range : "");
    s_emitf ("{\"t\":\"header\",\"format\":\"akdiscover-trace\",\"version\":1,\"pid\":%ld,"
             "\"step_range\":\"%s\",\"warmup_steps\":%ld,\"steps\":%ld,\"skip_ms\":%ld,"
             "\"driver\":\"%s\",\"nvrtc\":\"%s\"}",
             (long) getpid (), step_json, S.warmup, S.steps, S.skip_ms, drv, nvrtc);
    if (!S.step_range && S.skip_ms <= 0)
        s_window_set (S_OPEN);
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
    runs on whatever happens here: a failure is an "error" line). */
AKD_EXPORT int InitializeInjection (void)
{
    pthread_once (&S.once, s_init);
    if (!S.on || S.cupti_on)
        return 1;
    (void) s_cupti_start ();
    return 1;
}
