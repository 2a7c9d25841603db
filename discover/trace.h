/*  discover/trace.h: reading a discover trace (docs/formats.md, "Discover
    trace"): the binary file libakdiscover.so writes (version 2,
    discover/akd_format.h, read by trace_bin.c), or the JSON-lines file
    of earlier versions (version 1, here).

    Binary: every record is checked; a garbled one refuses the trace with
    its offset named, a file cut inside a record is read up to it
    (truncated_at).  JSON lines: the reader takes any file: lines that are not JSON objects of a known
    type, or lack a field their type needs, are counted (bad_lines) and
    skipped; a last line without its newline is a cut-off write.  A trace
    without its "end" line is partial (the program crashed, was killed, or
    is still running).

    Never: trust a number, a length or an order in the file; every index
    taken from the file is checked. */
#ifndef AKD_TRACE_H
#define AKD_TRACE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "error.h"

#define AKD_TRACE_VERSION 1

typedef enum { AKD_EV_PUSH, AKD_EV_POP, AKD_EV_LAUNCH } akd_ev_kind_t;

/* A host event: range push or pop, or a kernel launch API call. */
typedef struct {
    akd_ev_kind_t kind;
    uint64_t seq;                  /* global order of host events */
    int64_t  tid;
    uint64_t ts;                   /* CUPTI clock, ns; 0 when unknown */
    uint64_t id;                   /* push: range instance id */
    bool     pre;                  /* push: opened before the window */
    uint32_t corr;                 /* launch: correlation id */
    char    *name;                 /* push: text; launch: API name; owned */
} akd_event_t;

typedef struct {
    uint32_t corr;
    uint64_t start, end;
    uint32_t dev, stream;
    int32_t  grid[3], block[3];
    uint32_t cluster[3];
    int32_t  smem_static, smem_dynamic;
    uint32_t regs;
    uint32_t graph;                /* 0: not from a graph */
    uint64_t gnode;
    char    *name;                 /* mangled; owned */
} akd_kernel_t;

/* A graph node created (orig 0, with the creating thread's range stack)
   or cloned from orig when a graph is instantiated. */
typedef struct {
    uint32_t graph;
    uint64_t node, orig;
    char   **stack;                /* outermost first; owned */
    int      nstack;
} akd_gnode_t;

typedef struct {
    uint32_t id;
    char    *name;
    int      cc_major, cc_minor, sms;
} akd_device_t;

typedef struct {
    int       version;
    char     *step_range;          /* "" when none */
    long      warmup_steps, steps, skip_ms;
    long      sample;              /* 1 window step in sample traced (1: every step) */
    char     *driver, *nvrtc;      /* "580.65.06", "13.0"; "" when unknown */
    uint32_t  cupti_version;
    akd_event_t  *events;   size_t nevents;
    akd_kernel_t *kernels;  size_t nkernels;
    akd_gnode_t  *gnodes;   size_t ngnodes;
    akd_device_t *devices;  size_t ndevices;
    uint64_t  window_open_ts, window_close_ts;   /* 0 when absent */
    bool      window_opened, window_closed;
    bool      ended;               /* the "end" line is there */
    int       signal;              /* a "signal" line: its number, else 0 */
    uint64_t  dropped;             /* CUPTI records lost */
    size_t    bad_lines;
    size_t    truncated_at;        /* binary: the offset of a record the file ends inside; 0: none */
    char     *error_code, *error;  /* the first "error" line, NULL if none */
} akd_trace_t;

/*  Reads the trace at path.  0, or AK_ENOTFOUND / AK_EIO (cannot read) or
    AK_EINVAL (not a discover trace: no header line first, or a format
    version we do not read), with err naming the file.  The caller frees
    *trace_p with akd_trace_destroy. */
int  akd_trace_load (const char *path, akd_trace_t **trace_p, ak_err_t *err);
/*  The same over bytes in memory (label names it in errors): binary when
    they start with AKD_BIN_MAGIC, else JSON lines. */
int  akd_trace_parse (const char *text, size_t len, const char *label, akd_trace_t **trace_p, ak_err_t *err);
/*  The binary reader (trace_bin.c). */
int  akd_trace_parse_bin (const char *data, size_t len, const char *label, akd_trace_t **trace_p, ak_err_t *err);
void akd_trace_destroy (akd_trace_t **self_p);

/*  Writes t as JSON lines of version 1 (trace_dump.c): read back, it
    attributes the same.  0, or AK_EIO with err set. */
int  akd_trace_write_jsonl (const akd_trace_t *t, FILE *f, ak_err_t *err);

/*  True when the trace may lack records: no "end" line, a signal,
    records dropped (by CUPTI or a full thread buffer), or a file cut
    inside a record. */
bool akd_trace_partial (const akd_trace_t *t);

#endif
