/*  worker/gates.h: correctness gates, written once over the backend table.

    A candidate (or a baseline, for preflight) is run against the float64
    reference on generated inputs in five stages (smoke, shape_sweep,
    stability, determinism, edge_cases) and, after timing, a recheck on fresh
    inputs.  Outputs are poisoned (0xFF bytes: NaN for floats) before every
    run, so an element the kernel never writes fails.  Gates fail closed:
    anything that is not a clear pass is a failure with a reason naming the
    stage, size and dtype.  docs/measurement.md describes the method.

    A run keeps the device buffers of one configuration for the next (a
    buffer is allocated again only when a larger one is needed) and frees
    them before it returns.  With a reference cache in the context, the
    inputs and float64 reference of a configuration seen before (in this
    task or an earlier one of the executor) are reused, never recomputed.

    The code: gates.c (the stages), gates_ref.c (a configuration's inputs,
    reference, buffers and runs; the cache), gates_cmp.c (comparisons).

    Never: own the kernels or devices they are given; take a reference
    from the cache without the reference's digests in the context; let a
    buffer outlive the call that allocated it. */
#ifndef AK_WORKER_GATES_H
#define AK_WORKER_GATES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "error.h"
#include "refcache.h"
#include "spec.h"

typedef enum {
    AK_GATE_OK = 0,
    AK_GATE_WRONG,          /* "wrong_answer": beyond tolerance, unwritten, not deterministic */
    AK_GATE_NAN,            /* "nan": NaN/Inf where the reference has none */
    AK_GATE_LAUNCH,         /* "launch_error": the backend could not run the candidate */
    AK_GATE_ERROR,          /* "error": the reference or the spec failed; not the candidate's fault */
    AK_GATE_INVALID,        /* "invalid_config": the launch configuration cannot run on this
                               device (launch rule, block / shared memory limits) */
    AK_GATE_CRASH,          /* "crashed": a sticky device error (illegal address ...); the device
                               context is lost, so the gates stop and the executor must go */
} ak_gate_status_t;

/* Receipt status text for a gate status: "ok", "wrong_answer", ... */
const char *ak_gate_status_name (ak_gate_status_t status);

#define AK_GATE_MAX_STAGES 6

typedef struct {
    char     stage[16];      /* smoke | shape_sweep | stability | determinism | edge_cases | recheck */
    bool     passed;
    bool     skipped;        /* not run (an earlier stage stopped the gates, or nothing to run) */
    uint32_t configs;        /* configurations run */
    uint32_t failed;
    double   worst_err;      /* largest finite |out - ref| seen */
    char     worst_at[128];  /* "size/dtype" of worst_err */
    char     detail[1024];    /* PASS (N configs ...) / FAIL (k/N failed): ...; skipped dtypes named */
} ak_gate_result_t;

/* Where the gates' time went (milliseconds of the executor's monotonic
   clock, summed over configurations; the receipt's gate_cost).  A
   reference served by the cache costs nothing in inputs_ms and
   reference_ms. */
typedef struct {
    double   inputs_ms;        /* inputs generated on the host (and rounded to the dtype) */
    double   reference_ms;     /* host oracle, device reference and their agreement check */
    double   alloc_ms;         /* device buffers allocated and released */
    double   copy_ms;          /* uploads, poison fills, on-device input generation, downloads */
    double   launch_ms;        /* the kernel under test's launches */
    double   compare_ms;       /* outputs against the reference, bitwise checks */
    uint32_t ref_hits;         /* configurations whose reference came from the cache */
    uint32_t ref_misses;       /* configurations that computed it (cache on, or off) */
    uint32_t allocs;           /* device buffers allocated */
    uint32_t reused;           /* device buffers reused from an earlier configuration */
} ak_gate_cost_t;

typedef struct {
    ak_gate_result_t stages[AK_GATE_MAX_STAGES];
    int              nstages;
    ak_gate_status_t status;   /* of the first failing stage */
    char             reason[512];
    ak_gate_cost_t   cost;
} ak_gate_report_t;

typedef struct {
    const ak_spec_t     *spec;
    /* The kernel under test and where it runs. */
    const ak_backend_t  *be;
    ak_dev_t            *dev;
    const Ak__Device    *device;                 /* for be->supports_dtype; may be NULL */
    ak_kernel_t         *kernel[AK_DT_COUNT];    /* per element type; NULL: not built */
    /* The float64 oracle: always the host backend. */
    const ak_backend_t  *ref_be;
    ak_dev_t            *ref_dev;
    ak_kernel_t         *ref;
    /* Corpus cases (the task's workloads) swept besides the spec sizes and
       used by the recheck. */
    const ak_workload_t *workloads;
    size_t               nworkloads;
    uint64_t             seed;                   /* policy seed (42) */
    const int64_t       *params;                 /* passed through to launches */
    const char *const   *param_names;
    int                  nparams;
    /* The launch rule of the kernel under test (CUDA), evaluated for every
       configuration with params into ak_launch_t.grid/block/shared_bytes;
       NULL: none (the host backend).  A rule that does not evaluate, or a
       configuration the backend refuses with "invalid_config: ...", is
       status invalid_config. */
    const ak_launch_rule_t *launch;
    /* The device reference (CUDA; NULL: the host oracle for every size):
       the op in float64 on ctx->dev, launched by dref_launch, and the
       generator kernel gen (ctx->be->generate).  On configurations the
       host oracle runs (every buffer at most oracle_max_elems elements,
       and all transformed inputs) the device reference is run too and
       must agree with the oracle, else the configuration is status error
       ("device reference disagrees ...": not the candidate's fault).
       Larger configurations get inputs generated on the device and the
       device reference alone; the host never holds their inputs.  With
       dcmp (the compare kernel of the reference's module, ctx->be->compare)
       their outputs are judged on the device too: neither the reference
       nor the outputs cross to the host (on an H200 that took a softmax
       task's gates from 16.9 s to well under one), and the reference's
       outputs are cached on the device (drefcache), never in the host
       cache, where 1 GiB entries evicted every small configuration.  A
       keyed sum of the reference, taken when it was made and checked at
       every comparison, shows a reference that a kernel wrote to. */
    ak_kernel_t         *dref;
    const ak_launch_rule_t *dref_launch;
    ak_kernel_t         *gen;
    ak_kernel_t         *dcmp;
    uint64_t             oracle_max_elems;       /* 0: AK_GATE_ORACLE_MAX_ELEMS */
    uint64_t             oracle_max_flops;       /* 0: AK_GATE_ORACLE_MAX_FLOPS */
    /* Sizes the spec restricts to some backends (the large, GPU-only ones,
       judged by the device reference alone) are swept only at the
       (dims, dtype) of the task's workloads: a task answers for the shapes
       it times, and the float64 device reference of every LLM-sized spec
       size in every dtype costs seconds per task.  true: sweep them all
       (tests/gpu/test_gpu_reference.c checks the references themselves). */
    bool                 sweep_all_sizes;
    /* The executor's reference cache (refcache.h; NULL: none).  A
       configuration's inputs and reference are taken from it and put in
       it only when the reference's identity is known: ref_digest (sha256
       hex of the compiled host oracle) and, when dref is set, dref_digest
       (of the device reference's module, which holds the generator too).
       Without them the cache is not used. */
    ak_refcache_t       *refcache;
    /* The same on ctx->dev (ak_refcache_new_device; NULL: none), for the
       outputs of the device reference on configurations judged on the
       device (dcmp), under the same keys: the inputs are remade by the
       generator, the float64 reference (a GEMM's takes seconds) is not.
       Not for in-place specs (their reference overwrites its inputs). */
    ak_refcache_t       *drefcache;
    const char          *ref_digest;
    const char          *dref_digest;
} ak_gate_ctx_t;

/* Largest buffer (elements) the host float64 oracle is run on when a
   device reference is there: every size of the built-in catalog's host
   sizes is within it (softmax 512x2048). */
#define AK_GATE_ORACLE_MAX_ELEMS (1ull << 20)

/* Most work (the spec's "flops" at the configuration's dims) the host
   oracle is run on when a device reference is there, 2^26: the oracle is
   one host thread in plain float64 C: flash_attention's large,
   large_causal, s1023 and s1025 (134-538 MFLOP each) are 98% of the work
   of its host sizes, and its references took 1.8 s of a nightly-bench
   confirmation's gates on the H200's host; above it the device
   reference judges alone, as for the GPU-only sizes, while the smaller
   sizes still check it against the oracle. */
#define AK_GATE_ORACLE_MAX_FLOPS (1ull << 26)

/* Agreement asked of the device reference with the host oracle: per
   element |dev - host| <= AK_GATE_DREF_RTOL * |host| + AK_GATE_DREF_ATOL *
   max |host| of the buffer (summation order differs; float64 both). */
#define AK_GATE_DREF_RTOL 1e-9
#define AK_GATE_DREF_ATOL 1e-10

/* The gate status a failed backend call stands for: AK_ECRASH is
   AK_GATE_CRASH, an error whose text says "invalid_config" (the backends'
   and ak_launch_eval's refusals) AK_GATE_INVALID, anything else
   AK_GATE_LAUNCH.  Timing uses it too. */
ak_gate_status_t ak_gate_status_for (int rc, const ak_err_t *err);

/* Runs the five stages into rep (a smoke failure stops the rest, which are
   listed as skipped; so does a crash, which also outranks any earlier
   failure in rep->status).  Returns 0 when the gates ran, whatever their verdict
   (rep->status); a negative code only when they could not run at all (bad
   context), err saying why. */
int ak_gates_run (const ak_gate_ctx_t *ctx, ak_gate_report_t *rep, ak_err_t *err);

/* Whether the host oracle takes a configuration of spec at dims (buffer
   counts nin[], nout[] elements) when a device reference is there: every
   buffer within max_elems and the spec's flops within max_flops (0: the
   defaults above; flops that do not evaluate count as within). */
bool ak_gate_oracle_fits (const ak_spec_t *spec, const int64_t *dims, ak_dtype_t dt, const size_t *nin,
                          const size_t *nout, uint64_t max_elems, uint64_t max_flops);

/* rep->cost as one line for logs: "inputs 1.2 ms, reference 30.1 ms ...". */
void ak_gate_cost_text (const ak_gate_cost_t *c, char *buf, size_t len);

/* The post-timing recheck: every workload (or the smoke size when there are
   none) on fresh inputs from seed, appended to rep as stage "recheck";
   rep->status/reason are set if it fails and nothing failed before. */
int ak_gates_recheck (const ak_gate_ctx_t *ctx, uint64_t seed, ak_gate_report_t *rep, ak_err_t *err);

#endif
