/*  discover/attribute.h: which range each kernel of a trace belongs to
    (docs/discover.md, "Attribution").

    Host events are replayed in their global order (seq) with one range
    stack per thread; a kernel belongs to the innermost range open on the
    thread that launched it, at the moment of the launch (its correlation
    id names the launch).  Kernels replayed from a CUDA graph are never
    merged with eager ones: when the node they ran from was captured in a
    range, they are attributed to copies of the ranges open at capture,
    flagged `graph`, under the range open at the graph's launch; otherwise
    to a range "[graph replay G]" there.

    Never: drop a kernel without counting it (`outside`: launched outside
    the window), or trust an id from the trace without looking it up. */
#ifndef AKD_ATTRIBUTE_H
#define AKD_ATTRIBUTE_H
#include "trace.h"

typedef struct {
    char    *name;                 /* the range text (owned) */
    char    *key;                  /* grouping key (akd_payload_key, " [graph]" added for graph copies) */
    int      parent;               /* enclosing instance, -1 for none */
    int64_t  tid;
    uint64_t start_ts, end_ts;     /* 0 when unknown */
    bool     closed;               /* its pop was seen */
    bool     pre;                  /* opened before the window */
    bool     graph;                /* a capture-time range copied for replayed kernels */
    bool     synthetic;            /* "[graph replay G]": no range of the program */
} akd_range_t;

/*  A sampled step's place in the cycle of K (akd_attr_t.place_n). */
#define AKD_PLACE_TRACED 0          /* window step j with j % K == 0 */
#define AKD_PLACE_AFTER  1          /* j % K == 1: opens as the records go off */
#define AKD_PLACE_REST   2

typedef struct {
    const akd_kernel_t *k;         /* borrowed from the trace */
    int      range;                /* innermost instance, -1: none open */
    int64_t  tid;                  /* launching thread, -1 unknown */
    bool     launched;             /* its launch record was in the trace */
} akd_kattr_t;

typedef struct {
    akd_range_t *ranges;  size_t nranges;
    akd_kattr_t *kernels; size_t nkernels;   /* the kernels of the window */
    size_t   outside;              /* kernels left out: launched outside the window */
    size_t   no_launch;            /* kept, but their launch was not recorded */
    size_t   unmatched_pops;
    int      steps;                /* step ranges seen (1 when the trace has none); sampled: the traced ones */
    double   step_ns;              /* mean step wall time (ns); sampled: of the untraced steps where any
                                      (those not right after a traced one, where any) */
    long     sample;               /* 1 step in sample traced (1: every step) */
    int      steps_seen;           /* sampled: every step range of the window */
    size_t   unsampled;            /* sampled: kernels left out, from no traced step */
    /* sampled: the timed steps by their place in the cycle (window step j:
       j % sample == 0 traced, 1 the step after a traced one, else the
       rest), their count and mean wall time (ns; 0 where none) */
    int      place_n[3];
    double   place_ns[3];
    size_t   untimed;              /* left out: records without timestamps (CUPTI's 0) */
    bool     steps_overlap;        /* two steps ran at once (on two threads): sampling cannot tell them apart */
    bool     step_from_ranges;     /* step_ns measured from step ranges, else the kernels' span */
    uint64_t gpu_ns;               /* total kernel time of the window */
    double   overlap;              /* the most, over devices, of the kept kernels' summed time over the
                                      time at least one ran (the mean count running at once); 0: none */
    uint32_t overlap_dev;          /* the device of that figure */
} akd_attr_t;

/*  More kernels than this never run at once on one GPU (the concurrent
    kernels of compute capability 7.0 to 9.0): a trace whose kernel records
    overlap more on average than this cannot be true (docs/discover.md,
    "Kernel records that cannot be true"). */
#define AKD_MAX_CONCURRENT_KERNELS 128

/*  Attributes every kernel of t.  *attr_p is the caller's (akd_attr_destroy);
    it borrows kernels from t, which must outlive it.  0, or AK_EINVAL when
    the trace holds nothing to attribute is not an error: the result has
    nkernels 0. */
int  akd_attribute (const akd_trace_t *t, akd_attr_t **attr_p, ak_err_t *err);
void akd_attr_destroy (akd_attr_t **self_p);

#endif
