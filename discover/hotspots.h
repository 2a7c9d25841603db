/*  discover/hotspots.h: where a trace's GPU time went, ranked, and what of
    it the catalog can tune (docs/discover.md).

    From an attributed trace (attribute.h): per range key (inclusive: a
    kernel counts once for every distinct key on its stack; self: only for
    its innermost range) and per kernel name, the GPU time per step, its
    share of the step's GPU time, launches, mean duration, the share of
    launches shorter than 5 us (launch-floor bound), and the Amdahl ceiling
    (the step time if the range took no time, and if it ran 2x faster).
    Per kernel, the outermost enclosing range that maps to a catalog
    operator (catalog_map.h) names its workload; the rest is unmapped time,
    listed by range with the reason.  workloads + unmapped = all GPU time.

    Never: drop time silently, or emit a batch without a workload. */
#ifndef AKD_HOTSPOTS_H
#define AKD_HOTSPOTS_H
#include <jansson.h>
#include <stdbool.h>
#include "attribute.h"
#include "catalog_map.h"

#define AKD_SHORT_NS 5000.0          /* launch-floor bound below this */

typedef struct {
    char   *key;                     /* range key, kernel name, or unmapped label */
    char   *detail;                  /* kernels: demangled name; unmapped: reason; else NULL */
    double  gpu_ns;                  /* over the whole window */
    double  self_ns;                 /* ranges: innermost-only time */
    long    launches;
    long    short_launches;          /* < AKD_SHORT_NS */
    bool    graph;                   /* kernels: replayed from a CUDA graph */
    const akd_kernel_t *first;       /* kernels: the first launch (its grid, block, registers,
                                        shared memory), borrowed from the trace */
} akd_row_t;

typedef struct {
    akd_map_t map;                   /* op, keys, values, dtype */
    char   *name;                    /* workload / corpus case name */
    char   *example;                 /* the range key it came from */
    double  gpu_ns;
    long    launches;
} akd_workload_t;

typedef struct {
    akd_row_t      *ranges;    size_t nranges;     /* by gpu_ns, descending */
    akd_row_t      *kernels;   size_t nkernels;
    akd_row_t      *unmapped;  size_t nunmapped;
    akd_workload_t *workloads; size_t nworkloads;
    double   gpu_ns, named_ns, catalog_ns;          /* totals: all, under a range, mapped */
    int      steps;
    double   step_ns;
    bool     step_from_ranges;
    long     sample;                                /* 1 step in sample traced (1: every step) */
    int      steps_seen;                            /* every step of the window */
    size_t   unsampled;                             /* kernels from no traced step, left out */
    size_t   untimed;                               /* kernel records without timestamps, left out */
    bool     steps_overlap;                         /* sampled steps ran at once on several threads */
    int      place_n[3];                            /* sampled: timed steps by place (attribute.h) */
    double   place_ns[3];                           /* and their mean wall time (ns) */
} akd_hotspots_t;

/*  Builds the tables.  Never fails on any attribution (an empty one gives
    empty tables); the caller frees with akd_hotspots_destroy. */
akd_hotspots_t *akd_hotspots_build (const akd_attr_t *a);
void akd_hotspots_destroy (akd_hotspots_t **self_p);

/*  A sampled run's own estimate of what sampling added to a step, in % of
    the steps that ran neither traced nor right after a traced step (the
    rest): per cycle of K steps, what the traced step and the step after
    it took beyond the rest's mean, spread over the K steps.  It leaves out
    what every step pays for the injection (the rest ran with CUPTI
    loaded too: a run without akctl discover measures that) and assumes
    the steps are alike.  NAN where it cannot be told: not sampled, K < 3
    (no rest), or a place without a timed step. */
double akd_sample_cost_pct (const akd_hotspots_t *h);

/*  The step time (ns) if `range_ns` of GPU time per step ran `speedup`
    times faster (0: took no time), assuming it is on the step's critical
    path; never below 0. */
double akd_amdahl (double step_ns, double range_ns, double speedup);

/*  "_Z3fooi" -> "foo(int)" through the C++ runtime's __cxa_demangle when
    it can be opened; else a copy of name.  Caller frees. */
char *akd_demangle (const char *name);

/*  The device class workers announce for the trace's first device
    ("NVIDIA_H200/sm_90/drv580/nvrtc13.0"), or NULL (err says what is
    missing) when the trace lacks the device, driver or NVRTC version. */
char *akd_device_class (const akd_trace_t *t, ak_err_t *err);

/*  Writes DIR/hotspots.json, DIR/hotspots.md and, when there is at least one
    workload, DIR/batch.json (targets [device_class], each op's spec as
    catalog_dir/OP/spec.json) and DIR/OP.corpus.json (weights: % of GPU
    time).  0 or AK_EIO naming the file. */
int akd_hotspots_write (const akd_hotspots_t *h, const akd_trace_t *t, const char *dir,
                        const char *device_class, const char *catalog_dir, ak_err_t *err);

/*  The hotspots.json document (caller decrefs) and the markdown (caller
    frees). */
json_t *akd_hotspots_json (const akd_hotspots_t *h, const akd_trace_t *t, const char *device_class);
char   *akd_hotspots_markdown (const akd_hotspots_t *h, const akd_trace_t *t, const char *device_class);

#endif
