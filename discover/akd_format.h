/*  discover/akd_format.h: the binary discover trace, version 3
    (docs/formats.md, "Discover trace"), written by libakdiscover.so
    (discover/inject.c, inject_rec.c) and read by discover/trace_bin.c.

    A file is a 32-byte header, then records.  Every record starts with
    akd_rec_head_t; `size` is the whole record in bytes, a multiple of 8.
    Each type has one fixed size, except STRING (16 + its text, padded to
    8) and GNODE (40 + 4 per stack entry, padded to 8).  All numbers are
    little-endian, as the host writes them (the writer is on x86-64 or
    aarch64).  Strings (range texts, kernel and API names, ...) are written
    once as STRING records and named by their id (ids start at 1; 0 is "no
    string"); a record may only name a string defined before it.

    Never: a pointer, a padding byte left uninitialised, or a field whose
    meaning changes without a new AKD_BIN_VERSION. */
#ifndef AKD_FORMAT_H
#define AKD_FORMAT_H
#include <stdint.h>

#define AKD_BIN_MAGIC      "AKDTRACE"
#define AKD_BIN_VERSION    3            /* 3: META's sample (2: its pad, 0; read as every step) */
#define AKD_STRING_MAX     4096u        /* texts are cut to this many bytes */
#define AKD_GNODE_STACK_MAX 256u
#define AKD_REC_MAX        (16u + AKD_STRING_MAX + 8u)   /* the largest record (STRING) */

typedef struct {
    char     magic[8];                  /* "AKDTRACE", no terminator */
    uint32_t version;                   /* AKD_BIN_VERSION */
    uint32_t header_size;               /* 32 */
    int64_t  pid;
    uint64_t reserved;                  /* 0 */
} akd_bin_header_t;

enum {
    AKD_REC_STRING = 1, AKD_REC_META, AKD_REC_CUPTI, AKD_REC_DEVICE, AKD_REC_THREAD, AKD_REC_PUSH,
    AKD_REC_POP, AKD_REC_API, AKD_REC_KERNEL, AKD_REC_GNODE, AKD_REC_WINDOW, AKD_REC_ERROR,
    AKD_REC_DROPPED, AKD_REC_SIGNAL, AKD_REC_END, AKD_REC_TYPES
};

typedef struct {
    uint16_t type;                      /* AKD_REC_... */
    uint16_t flags;                     /* PUSH: AKD_PUSH_PRE; else 0 */
    uint32_t size;                      /* the whole record, bytes */
} akd_rec_head_t;

#define AKD_PUSH_PRE 1                  /* opened before the window: ts 0 */

typedef struct { akd_rec_head_t h; uint32_t id, len; /* char text[len], zero-padded */ } akd_rec_string_t;
/* sample: 1 window step in `sample` was traced (kernel records on), the
   first of each `sample` from the window's opening step (0 or 1: every
   step); steps counts the traced ones. */
typedef struct { akd_rec_head_t h; int64_t warmup, steps, skip_ms; uint32_t step_range, driver, nvrtc, sample; } akd_rec_meta_t;
typedef struct { akd_rec_head_t h; uint32_t version, path; } akd_rec_cupti_t;
typedef struct { akd_rec_head_t h; uint32_t id, name; int32_t cc_major, cc_minor, sms; uint32_t from_driver; } akd_rec_device_t;
/* A thread that pushed ranges: its kernel id (gettid) and pthread_self,
   either of which CUPTI's API records may carry as threadId. */
typedef struct { akd_rec_head_t h; int64_t tid; uint64_t pthread; } akd_rec_thread_t;
typedef struct { akd_rec_head_t h; int64_t tid; uint64_t ts; uint32_t name, pad; } akd_rec_push_t;
typedef struct { akd_rec_head_t h; int64_t tid; uint64_t ts; } akd_rec_pop_t;
/* A launch API call, from CUPTI's RUNTIME / DRIVER activity records. */
typedef struct {
    akd_rec_head_t h;
    uint32_t corr, cbid, thread, domain;    /* domain: CUpti_CallbackDomain (1 driver, 2 runtime) */
    uint64_t start, end;
    uint32_t name, pad;
} akd_rec_api_t;
typedef struct {
    akd_rec_head_t h;
    uint32_t corr, name;
    uint64_t start, end, gnode;
    uint32_t dev, stream;
    int32_t  grid[3], block[3];
    uint32_t cluster[3];
    int32_t  smem_static, smem_dynamic;
    uint32_t regs, graph, pad;
} akd_rec_kernel_t;
typedef struct {
    akd_rec_head_t h;
    int64_t  tid;
    uint64_t node, orig;
    uint32_t graph, nstack;             /* then nstack string ids, outermost first, zero-padded */
} akd_rec_gnode_t;
typedef struct { akd_rec_head_t h; uint32_t open, pad; uint64_t ts; int64_t tid; } akd_rec_window_t;
typedef struct { akd_rec_head_t h; uint32_t code, what; } akd_rec_error_t;
/* Records lost: tid 0 for CUPTI's, else a thread whose buffer was full. */
typedef struct { akd_rec_head_t h; uint64_t n; int64_t tid; } akd_rec_dropped_t;
typedef struct { akd_rec_head_t h; int32_t signal, pad; } akd_rec_signal_t;
typedef struct { akd_rec_head_t h; int64_t steps_begun, steps_ended; } akd_rec_end_t;

_Static_assert (sizeof (akd_bin_header_t) == 32, "header layout");
_Static_assert (sizeof (akd_rec_string_t) == 16, "string layout");
_Static_assert (sizeof (akd_rec_meta_t) == 48, "meta layout");
_Static_assert (sizeof (akd_rec_device_t) == 32, "device layout");
_Static_assert (sizeof (akd_rec_push_t) == 32, "push layout");
_Static_assert (sizeof (akd_rec_api_t) == 48, "api layout");
_Static_assert (sizeof (akd_rec_kernel_t) == 104, "kernel layout");
_Static_assert (sizeof (akd_rec_gnode_t) == 40, "gnode layout");
_Static_assert (sizeof (akd_rec_window_t) == 32, "window layout");

#define AKD_PAD8(n) (((n) + 7u) & ~(uint32_t) 7u)

#endif
