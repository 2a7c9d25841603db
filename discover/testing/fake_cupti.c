/*  discover/testing/fake_cupti.c: a stand-in libcupti.so.13 for the tests
    of libakdiscover.so on hosts without a GPU (tests/integration/
    test_discover.c, through akd-nvtx-probe's `cupti` mode).

    It implements the CUPTI entry points the library resolves, with the
    real headers' types: a subscriber, activity buffers, records of
    CUpti_ActivityKernel10, CUpti_ActivityAPI (RUNTIME) and
    CUpti_ActivityDevice5.  The probe drives it through akd_fake_launch (a
    launch API call: a RUNTIME record with the calling thread, its start
    and end and the correlation id, and a kernel record, queued for the
    next flush).  Its clock is CLOCK_REALTIME (CUPTI's on Linux) made strictly increasing, so
    a push, a launch and a pop on one thread never share a stamp.
    $AKD_FAKE_CUPTI_TID=pthread makes the API records carry pthread_self
    (truncated) as their threadId instead of the kernel's thread id.  A
    launch makes its kernel record only while CONCURRENT_KERNEL is enabled
    and its API record only while the launch API's records are (as CUPTI
    does); a launch API's records enabled after the first launch stay off,
    as the real CUPTI 13.0.1 did on the H200 (no record at all when
    enabled from the NVTX push that opened a window).  While the
    subscriber's callback for cudaLaunchKernel is enabled (at any time), a
    launch calls it on the API's entry and exit, with the launch's
    correlation id.  With $AKD_FAKE_CUPTI_COUNT=PATH it writes, at exit,
    "launches N kernel_records K api_records A callbacks C flush_offs F"
    to PATH (C: launches that called the callback; F: the times
    CONCURRENT_KERNEL was disabled right after a flush without
    CUPTI_ACTIVITY_FLAG_FLUSH_FORCED on the same thread, as a sampled
    step's switch does by default), then " attrs pinned P buffer B prealloc
    N": the values cuptiActivitySetAttribute was given (-1: never set); it
    refuses a DEVICE_BUFFER_SIZE of 0 (CUPTI_ERROR_INVALID_PARAMETER).
    $AKD_FAKE_CUPTI=busy makes cuptiSubscribe answer
    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as when another tool
    holds CUPTI.

    Never: used outside tests; it is built into build/tests/fakecupti and
    found only through LD_LIBRARY_PATH. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#define S_MAX 4096

static CUpti_CallbackFunc s_cb;
static void *s_ud;
static CUpti_BuffersCallbackRequestFunc s_req;
static CUpti_BuffersCallbackCompleteFunc s_done;
static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static CUpti_ActivityKernel10 s_queue[S_MAX];
static CUpti_ActivityAPI s_apis[S_MAX];
static int s_napis;
static _Atomic uint64_t s_last;
static char s_names[S_MAX][64];
static int s_n;
static int s_device_sent;
static _Atomic int s_kernels_on, s_api_on, s_launch_cb_on;
static _Atomic int s_launches, s_kernel_recs, s_api_recs, s_callbacks, s_flush_offs;
static __thread int T_flushed;          /* this thread's last CUPTI call: a flush with flag 0 */
static long long s_attr_pinned = -1, s_attr_buffer = -1, s_attr_prealloc = -1;

__attribute__ ((destructor)) static void s_count (void)
{
    const char *path = getenv ("AKD_FAKE_CUPTI_COUNT");
    FILE *f = path && *path ? fopen (path, "w") : NULL;
    if (f) {
        fprintf (f, "launches %d kernel_records %d api_records %d callbacks %d flush_offs %d attrs pinned %lld "
                 "buffer %lld prealloc %lld\n", atomic_load (&s_launches), atomic_load (&s_kernel_recs),
                 atomic_load (&s_api_recs), atomic_load (&s_callbacks), atomic_load (&s_flush_offs), s_attr_pinned,
                 s_attr_buffer, s_attr_prealloc);
        fclose (f);
    }
}

static uint64_t s_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);         /* CUPTI's own clock on Linux */
    uint64_t now = (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec, last = atomic_load (&s_last);
    do {
        if (now <= last)
            now = last + 1;
    } while (!atomic_compare_exchange_weak (&s_last, &last, now));
    return now;
}

CUptiResult cuptiGetVersion (uint32_t *v) { *v = CUPTI_API_VERSION; return CUPTI_SUCCESS; }
CUptiResult cuptiGetResultString (CUptiResult r, const char **s)
{
    *s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
       : r == CUPTI_ERROR_INVALID_PARAMETER                  ? "CUPTI_ERROR_INVALID_PARAMETER"
                                                             : "CUPTI_ERROR_UNKNOWN";
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivitySetAttribute (CUpti_ActivityAttribute a, size_t *size, void *value)
{
    if (a == CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED && *size == sizeof (uint8_t))
        s_attr_pinned = *(uint8_t *) value;
    else
    if (a == CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE && *size == sizeof (size_t) && *(size_t *) value > 0)
        s_attr_buffer = (long long) *(size_t *) value;
    else
    if (a == CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE && *size == sizeof (size_t))
        s_attr_prealloc = (long long) *(size_t *) value;
    else
        return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiSubscribe (CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud)
{
    const char *mode = getenv ("AKD_FAKE_CUPTI");
    if (mode && strcmp (mode, "busy") == 0)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    s_cb = cb;
    s_ud = ud;
    *sub = (CUpti_SubscriberHandle) &s_cb;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableCallback (uint32_t e, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId c)
{
    (void) s;
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API && c == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
        atomic_store (&s_launch_cb_on, e != 0);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableDomain (uint32_t e, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
{
    (void) e; (void) s; (void) d;
    return CUPTI_SUCCESS;
}
static CUptiResult s_kind (CUpti_ActivityKind k, int on)
{
    if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        atomic_store (&s_kernels_on, on);
    if (k == CUPTI_ACTIVITY_KIND_RUNTIME)
        atomic_store (&s_api_on, on);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable (CUpti_ActivityKind k)
{
    T_flushed = 0;
    return s_kind (k, 1);
}
CUptiResult cuptiActivityDisable (CUpti_ActivityKind k)
{
    if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && T_flushed)
        atomic_fetch_add (&s_flush_offs, 1);
    T_flushed = 0;
    return s_kind (k, 0);
}
CUptiResult cuptiActivityEnableRuntimeApi (CUpti_CallbackId c, uint8_t e)
{
    if (c == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 && atomic_load (&s_launches) == 0)
        atomic_store (&s_api_on, e != 0);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnableDriverApi (CUpti_CallbackId c, uint8_t e) { (void) c; (void) e; return CUPTI_SUCCESS; }
CUptiResult cuptiGetCallbackName (CUpti_CallbackDomain d, uint32_t c, const char **name)
{
    (void) d; (void) c;
    *name = "cudaLaunchKernel";
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks (CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done)
{
    s_req = req;
    s_done = done;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp (uint64_t *ts) { *ts = s_ns (); return CUPTI_SUCCESS; }
CUptiResult cuptiGetGraphNodeId (CUgraphNode n, uint64_t *id) { *id = (uint64_t) (uintptr_t) n; return CUPTI_SUCCESS; }
CUptiResult cuptiGetGraphId (CUgraph g, uint32_t *id) { *id = (uint32_t) (uintptr_t) g; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityGetNumDroppedRecords (CUcontext c, uint32_t s, size_t *n)
{
    (void) c; (void) s;
    *n = 0;
    return CUPTI_SUCCESS;
}

/* Records in a buffer: a device record first, then kernels; each record's
   size follows from its kind. */
static size_t s_size (const CUpti_Activity *r)
{
    return r->kind == CUPTI_ACTIVITY_KIND_DEVICE    ? sizeof (CUpti_ActivityDevice5)
         : r->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? sizeof (CUpti_ActivityAPI)
                                                  : sizeof (CUpti_ActivityKernel10);
}

CUptiResult cuptiActivityGetNextRecord (uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
    uint8_t *next = *rec ? (uint8_t *) *rec + s_size (*rec) : buf;
    if (next >= buf + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *) next;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll (uint32_t flag)
{
    T_flushed = flag == 0;
    if (!s_req || !s_done)
        return CUPTI_SUCCESS;
    pthread_mutex_lock (&s_mu);
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0, used = 0;
    s_req (&buf, &size, &maxrec);
    if (!buf) {
        pthread_mutex_unlock (&s_mu);
        return CUPTI_ERROR_UNKNOWN;
    }
    if (!s_device_sent && size >= sizeof (CUpti_ActivityDevice5)) {
        CUpti_ActivityDevice5 d;
        memset (&d, 0, sizeof d);
        d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
        d.name = "Fake GPU";
        d.computeCapabilityMajor = 9;
        d.numMultiprocessors = 4;
        memcpy (buf, &d, sizeof d);
        used += sizeof d;
        s_device_sent = 1;
    }
    int apis = 0;
    while (apis < s_napis && used + sizeof (CUpti_ActivityAPI) <= size) {
        memcpy (buf + used, &s_apis[apis], sizeof s_apis[0]);
        used += sizeof s_apis[0];
        apis++;
    }
    memmove (s_apis, s_apis + apis, (size_t) (s_napis - apis) * sizeof s_apis[0]);
    s_napis -= apis;
    int taken = 0;
    while (taken < s_n && used + sizeof (CUpti_ActivityKernel10) <= size) {
        memcpy (buf + used, &s_queue[taken], sizeof s_queue[0]);
        used += sizeof s_queue[0];
        taken++;
    }
    memmove (s_queue, s_queue + taken, (size_t) (s_n - taken) * sizeof s_queue[0]);
    memmove (s_names, s_names + taken, (size_t) (s_n - taken) * sizeof s_names[0]);
    s_n -= taken;
    for (int i = 0; i < s_n; i++)
        s_queue[i].name = s_names[i];
    pthread_mutex_unlock (&s_mu);
    s_done (NULL, 0, buf, size, used);
    return CUPTI_SUCCESS;
}

/*  A launch: the RUNTIME record of the API call (this thread, its start
    and end), then a kernel of dur_ns, both queued for the next flush. */
void akd_fake_launch (uint32_t corr, const char *kernel, uint64_t dur_ns)
{
    const char *tid_mode = getenv ("AKD_FAKE_CUPTI_TID");
    uint32_t thread = tid_mode && strcmp (tid_mode, "pthread") == 0 ? (uint32_t) pthread_self ()
                                                                      : (uint32_t) syscall (SYS_gettid);
    CUpti_CallbackData cd;
    memset (&cd, 0, sizeof cd);
    cd.functionName = "cudaLaunchKernel";
    cd.correlationId = corr;
    const bool cb = atomic_load (&s_launch_cb_on) && s_cb;
    if (cb) {
        cd.callbackSite = CUPTI_API_ENTER;
        s_cb (s_ud, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cd);
        atomic_fetch_add (&s_callbacks, 1);
    }
    uint64_t start = s_ns ();
    uint64_t end = s_ns ();
    atomic_fetch_add (&s_launches, 1);
    const bool api = atomic_load (&s_api_on), kern = atomic_load (&s_kernels_on);
    atomic_fetch_add (&s_api_recs, api);
    atomic_fetch_add (&s_kernel_recs, kern);
    pthread_mutex_lock (&s_mu);
    if (api && s_napis < S_MAX) {
        CUpti_ActivityAPI *a = &s_apis[s_napis++];
        memset (a, 0, sizeof *a);
        a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
        a->cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        a->start = start;
        a->end = end;
        a->threadId = thread;
        a->correlationId = corr;
    }
    if (kern && s_n < S_MAX) {
        CUpti_ActivityKernel10 *k = &s_queue[s_n];
        memset (k, 0, sizeof *k);
        k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k->correlationId = corr;
        k->start = s_ns ();
        k->end = k->start + dur_ns;
        k->gridX = k->gridY = k->gridZ = 1;
        k->blockX = 128;
        k->blockY = k->blockZ = 1;
        k->registersPerThread = 40;
        k->streamId = 7;
        strncpy (s_names[s_n], kernel, sizeof s_names[0] - 1);
        k->name = s_names[s_n];
        s_n++;
    }
    pthread_mutex_unlock (&s_mu);
    if (cb) {
        cd.callbackSite = CUPTI_API_EXIT;
        s_cb (s_ud, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cd);
    }
}
