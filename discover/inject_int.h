/*  discover/inject_int.h: what the files of libakdiscover.so share
    (inject.c: set-up, NVTX, CUPTI, window, exit and signals;
    inject_rec.c: the per-thread record buffers, string interning and the
    writer; inject_buf.c: CUPTI's buffers).  Internal: nothing here is
    exported from the library.

    Never: take a lock, allocate or format text in akd_rec_push / pop
    (the hot path of every NVTX range), or block a program's thread for
    more than a bounded wait when its buffer is full. */
#ifndef AKD_INJECT_INT_H
#define AKD_INJECT_INT_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "akd_format.h"

enum { AKD_W_BEFORE, AKD_W_OPEN, AKD_W_CLOSED };

/* The window as the writer reads it: a push or pop stamped before
   open_ts is not written (it is kept on the thread's shadow stack, written
   as a "pre" push when the window opens), one after close_ts is dropped. */
typedef struct {
    atomic_int      window;             /* AKD_W_... */
    _Atomic uint64_t open_ts, close_ts; /* 0 until known */
    atomic_uint     string_ids;         /* the last string id given */
} akd_shared_t;
extern akd_shared_t akd_g;

/* Set-up, by inject.c's init: fd is the trace file (its header is written
   here).  0, or -1 when memory is short. */
int  akd_rec_init (int fd, int64_t pid);
/* Records from CUPTI's buffers, the window, errors ...: into the shared
   buffer under its mutex (never from the hot path). */
void akd_rec_out (const void *rec, size_t n);
/* The id of text as a string of the shared buffer (written once). */
uint32_t akd_rec_string (const char *text);
/* The hot path: this thread's push (text, cut to AKD_STRING_MAX) and pop. */
void akd_rec_push (const char *text, uint64_t ts);
void akd_rec_pop (uint64_t ts);
/* A launch API entered (its callback): an API record of this thread,
   stamped ts, into its ring. */
void akd_rec_launch (uint32_t corr, uint32_t cbid, uint32_t domain, uint32_t name, uint64_t ts);
/* A graph node created (with this thread's range stack) or cloned. */
void akd_rec_gnode (uint32_t graph, uint64_t node, uint64_t orig, bool with_stack);
/* Writes every thread's records and the shared buffer to the file (the
   flusher, the exit).  akd_rec_wait waits up to ms, less when a thread's
   buffer is half full. */
void akd_rec_flush (void);
void akd_rec_wait (long ms);
/* Wakes the flusher out of akd_rec_wait. */
void akd_rec_kick (void);
/* From a signal handler: as flush, when no other thread is inside the
   writer within a bounded wait; then rec (a SIGNAL record) last. */
void akd_rec_flush_signal (const void *rec, size_t n);
/* After fork, in the child: nothing more is written. */
void akd_rec_forget (void);

/* CUPTI's buffers (inject_buf.c).  The host buffers CUPTI asks for and
   hands back (its buffer callbacks), kept for reuse while the pool is on
   (akd_buf_pool; akd_buf_drain frees them and turns it off, at exit). */
void akd_buf_pool (bool on);
void akd_buf_request (uint8_t **buffer, size_t *size, size_t *max_records);
void akd_buf_release (uint8_t *buffer);
void akd_buf_drain (void);
/* The AKD_CUPTI_* attributes of CUPTI's device-side buffers (given: pinned,
   MiB a buffer, buffers made at start; -1 each where not given), through
   the cuptiActivitySetAttribute of cupti (a dlopen handle).  0; or -1
   with *failed NULL (no such function), or naming the attribute CUPTI
   refused, with *value the value given and *result CUPTI's CUptiResult. */
int  akd_buf_attrs (void *cupti, const long given[3], const char **failed, long *value, int *result);

#endif
