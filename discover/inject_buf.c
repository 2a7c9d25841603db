/*  discover/inject_buf.c: CUPTI's buffers for libakdiscover.so (inject.c
    registers and calls these): the host buffers CUPTI fills with
    activity records, kept for reuse, and the attributes of CUPTI's own
    device-side buffers, from akctl discover's environment
    (docs/discover.md, "CUPTI's buffers").

    Never: link anything but libc, or hold the pool's lock across
    anything but the pool's own array. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <cupti.h>

#include "inject_int.h"

#define S_CUPTI_BUF (8u << 20)          /* one CUPTI activity buffer */
#define S_POOL_MAX  8

/*  A buffer CUPTI has handed back goes to the pool (up to S_POOL_MAX)
    instead of free(), and the next request takes it, so the records of a
    traced step are not written into freshly mapped pages each time
    (8 MiB is past glibc's mmap threshold: each request would map it, the
    records fault its pages in, and free() unmaps it; on the H200 the
    traced replays took 13.0 ms with the pool, 15.1 without, session 39).
    On unless $AKD_BUFFER_POOL=0 (akd_buf_pool); freed at exit. */
static struct {
    pthread_mutex_t mu;
    bool            on;
    int             n;
    uint8_t        *buf[S_POOL_MAX];
} P = { .mu = PTHREAD_MUTEX_INITIALIZER };

void akd_buf_pool (bool on)
{
    pthread_mutex_lock (&P.mu);
    P.on = on;
    pthread_mutex_unlock (&P.mu);
}

void akd_buf_request (uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = NULL;
    pthread_mutex_lock (&P.mu);
    if (P.on && P.n > 0)
        b = P.buf[--P.n];
    pthread_mutex_unlock (&P.mu);
    if (!b)
        b = aligned_alloc (8, S_CUPTI_BUF);
    *buffer = b;
    *size = b ? S_CUPTI_BUF : 0;
    *max_records = 0;
}

void akd_buf_release (uint8_t *buffer)
{
    pthread_mutex_lock (&P.mu);
    if (P.on && buffer && P.n < S_POOL_MAX) {
        P.buf[P.n++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock (&P.mu);
    free (buffer);
}

void akd_buf_drain (void)
{
    pthread_mutex_lock (&P.mu);
    while (P.n > 0)
        free (P.buf[--P.n]);
    P.on = false;
    pthread_mutex_unlock (&P.mu);
}

/*  The attributes of CUPTI's device-side buffers, set before CUDA makes a
    context, as CUPTI asks: given[0] (AKD_CUPTI_PINNED=1) keeps the kernel
    records' device-side buffers in pinned host memory (CUPTI 13's default
    is device memory, copied out at each flush), given[1]
    (AKD_CUPTI_BUFFER_MB) their size in MiB and given[2]
    (AKD_CUPTI_PREALLOC) how many are made at start (CUPTI: 3.2 MB, 3);
    -1: not given, CUPTI's default.  For measuring what switching the
    records costs a CUDA-graph step (docs/benchmarks.md, session 37). */
int akd_buf_attrs (void *cupti, const long given[3], const char **failed, long *value, int *result)
{
    *failed = NULL;
    if (given[0] < 0 && given[1] < 0 && given[2] < 0)
        return 0;
    CUptiResult (*set) (CUpti_ActivityAttribute, size_t *, void *) =
        (CUptiResult (*) (CUpti_ActivityAttribute, size_t *, void *)) dlsym (cupti, "cuptiActivitySetAttribute");
    if (!set)
        return -1;
    uint8_t pin = given[0] > 0;
    size_t bytes = (size_t) (given[1] > 0 ? given[1] : 0) << 20, count = (size_t) (given[2] > 0 ? given[2] : 0);
    const struct {
        CUpti_ActivityAttribute attr;
        const char *name;
        void *value;
        size_t size;
    } a[3] = {
        { CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, "MEM_ALLOCATION_TYPE_HOST_PINNED", &pin, sizeof pin },
        { CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, "DEVICE_BUFFER_SIZE", &bytes, sizeof bytes },
        { CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, "DEVICE_BUFFER_PRE_ALLOCATE_VALUE", &count,
          sizeof count },
    };
    for (size_t i = 0; i < 3; i++) {
        if (given[i] < 0)
            continue;
        size_t size = a[i].size;
        CUptiResult r = set (a[i].attr, &size, a[i].value);
        if (r != CUPTI_SUCCESS) {
            *failed = a[i].name;
            *value = given[i];
            *result = (int) r;
            return -1;
        }
    }
    return 0;
}
