/*  common/spec.h: operator specs (docs/formats.md "Operator spec").

    A spec is a JSON file written by a person, so it is untrusted: every
    problem is reported as `FILE: FIELD.PATH: what is wrong` (jpath.h), for
    example `softmax.json: tolerances.float16.atol: must be finite`, and
    unknown fields are rejected (a typo must not silently change a night's
    run).  Expressions are checked for syntax and names when the spec is
    read and evaluated by space.h; kernel sources are read by source.h,
    confined to the spec's directory.  The batch manifest that names specs
    is manifest.h.

    Never: evaluate an expression the parser has not checked, read a file
    for a spec parsed without a base directory, or keep a pointer into the
    json_t past the parse (every string is copied). */
#ifndef AK_SPEC_H
#define AK_SPEC_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <jansson.h>
#include "dtype.h"
#include "error.h"
#include "names.h"
#include "source.h"
#include "tmap.h"

#define AK_MAX_DIMS      8
#define AK_MAX_BUFS      8
#define AK_MAX_PARAMS    16
/* Most elements of one input or output buffer at any size of a spec, a
   manifest workload or a corpus case: what a worker allocates (worker/data.h,
   AK_DATA_MAX_ELEMS), 2^28, checked when the spec or manifest is read so a
   size too large fails there, naming it, and not in the gates. */
#define AK_SPEC_MAX_ELEMS (1ull << 28)
#define AK_SPEC_SCHEMA_VERSION      1
#define AK_SPEC_MAX_DIM        (INT64_C (1) << 31)  /* one shape dimension */
#define AK_SPEC_MAX_CANDIDATES 256

/* ------------------------------------------------------------------- spec */
/* Bits of ak_size_t.backends. */
#define AK_BACKEND_HOST 1u
#define AK_BACKEND_CUDA 2u

typedef struct {
    char   *name;                       /* "small" */
    int64_t dims[AK_MAX_DIMS];          /* in key order, each > 0 */
    unsigned backends;                  /* AK_BACKEND_* bits the size is for; 0: every
                                           backend (a size without "backends") */
} ak_size_t;

typedef struct {
    double atol, rtol;                  /* finite, >= 0 */
} ak_tol_t;

typedef struct {
    char  *name;                        /* "x" */
    char  *count;                       /* element count expression over keys */
    double lo, hi;                      /* generator range, inputs only */
} ak_buf_t;

typedef struct {
    char    *name;                      /* the -D name: "BLOCK" */
    int64_t *values;                    /* at least one */
    size_t   nvalues;
} ak_param_t;

/*  A TMA tensor map a CUDA kernel declares (its object's "tensor_maps",
    docs/formats.md): expressions over the same names as its launch rule,
    evaluated per workload by ak_launch_eval into ak_tmap_cfg_t (tmap.h). */
typedef struct {
    char   *name;                       /* "tm_a": a C identifier */
    char   *buffer;                     /* an input or output of the spec */
    int     rank;                       /* 1..AK_TMAP_MAX_RANK */
    char   *dims[AK_TMAP_MAX_RANK];     /* innermost first */
    char   *box[AK_TMAP_MAX_RANK];
    char   *strides[AK_TMAP_MAX_RANK - 1];   /* bytes of dims 1..rank-1; NULL: contiguous */
    int     nstrides;                   /* 0 or rank - 1 */
    ak_tmap_swizzle_t swizzle;
    ak_tmap_l2_t      l2;
    ak_tmap_oob_t     oob;
    bool    optional;                   /* refused by the rules: passed absent, not invalid_config */
} ak_tmap_rule_t;

/*  How a CUDA kernel is launched: grid and block dimensions and dynamic
    shared memory bytes, each an expression over the spec's keys, `b`
    (bytes per element of the dtype) and the candidate's parameters (a
    baseline has none).  Checked when the spec is read (names, syntax),
    evaluated per workload by ak_launch_eval.  Only `cuda` kernels have
    one; host kernels never do.  The kernel's tensor maps (its object's
    "tensor_maps") are kept here too: they are evaluated and passed with
    the launch. */
typedef struct {
    char   *grid[3];                    /* 1 to 3 expressions, x first; missing ones are 1 */
    int     ngrid;
    char   *block[3];
    int     nblock;
    char   *shared;                     /* dynamic shared memory bytes; "0" when not given */
    char   *cluster[3];                 /* thread-block cluster dims; ncluster 0: none */
    int     ncluster;
    ak_tmap_rule_t *tmaps;              /* in the order the kernel takes them */
    int     ntmaps;
} ak_launch_rule_t;

typedef struct {
    char        *name;                  /* "blocked" */
    char        *backend;               /* "host" | "cuda" */
    ak_source_t  source;
    ak_param_t  *params;
    size_t       nparams;
    char       **constraints;           /* expressions over the parameter names only */
    size_t       nconstraints;
    ak_launch_rule_t *launch;           /* cuda: required; host: NULL */
    char        *arch;                  /* cuda: "sm_90a" (built for that target, run only on
                                           its compute capability); NULL: the device's own */
    int64_t     *seeds;                 /* nseeds configurations (nparams values each, in params'
                                           order) a halving search always tries; NULL: none */
    size_t       nseeds;
} ak_candidate_t;

/*  A baseline is a kernel (source, launch) or, on cuda, a vendor library
    call ("library": "cublaslt", "op": "matmul"): then its source is the
    one-line library marker ak_spec_library_source makes (what the worker
    recognises instead of compiling) and launch is NULL. */
typedef struct {
    char        *backend;               /* "host" | "cuda" */
    ak_source_t  source;
    ak_launch_rule_t *launch;           /* cuda kernel: required; host, library: NULL */
    char        *arch;                  /* as a candidate's */
    char        *library;               /* "cublaslt"; NULL: a kernel */
    char        *lib_op;                /* "matmul" */
} ak_baseline_t;

typedef struct ak_spec {
    char          *name;                /* operator name: [a-z0-9_]+ */
    char          *keys[AK_MAX_DIMS];   /* shape keys: "rows", "cols" */
    int            nkeys;
    ak_dtype_t     dtypes[AK_DT_COUNT]; /* first is primary */
    int            ndtypes;
    ak_tol_t       tol[AK_DT_COUNT];    /* tol[i] is for dtypes[i]; use ak_spec_tol */
    ak_size_t     *sizes;               /* ordered smallest first; sizes[0] is the smoke size */
    size_t         nsizes;
    ak_size_t     *edge_sizes;
    size_t         nedge;
    char          *stability_size;      /* name of the size the stability gate uses ("small") */
    double         near_max_scale[AK_DT_COUNT]; /* by ak_dtype_t; 0: the default (spec_gates.c) */
    char          *flops;               /* expression over keys */
    char          *bytes;               /* expression over keys and `b` (bytes per element) */
    ak_buf_t       inputs[AK_MAX_BUFS];
    int            ninputs;
    ak_buf_t       outputs[AK_MAX_BUFS];
    int            noutputs;
    bool           inplace;             /* outputs alias inputs: restore inputs each run */
    ak_source_t    reference;           /* host float64 oracle, C */
    /* Optional device reference for the cuda backend: the op in float64 on
       the GPU (built with -DAK_REFERENCE, symbol ak_reference), launched by
       its own rule over the keys.  Its text travels inside the form without
       sources too (no task field carries it).  NULL text: none. */
    ak_source_t    reference_cuda;
    ak_launch_rule_t *reference_cuda_launch;
    ak_baseline_t *baselines;           /* one per backend */
    size_t         nbaselines;
    ak_candidate_t *candidates;
    size_t         ncandidates;
} ak_spec_t;

/* Loads a spec file from disk; kernel sources are read relative to the spec's
   directory and must stay inside it (no absolute paths, no ".."). */
int ak_spec_load (const char *path, ak_spec_t **spec_p, ak_err_t *err);

/* Parses a spec from JSON already in memory.  `label` prefixes error messages
   (a file name or "bundle: ops[1].spec").  Sources must be inline objects
   {"name": ..., "text": ...} unless base_dir is non-NULL, in which case
   string paths are read relative to it. */
int ak_spec_parse (json_t *json, const char *label, const char *base_dir, ak_spec_t **spec_p, ak_err_t *err);
int ak_spec_parse_text (const char *text, size_t len, const char *label, ak_spec_t **spec_p, ak_err_t *err);

/* Self-contained JSON of the spec (sources inline when with_sources, else
   omitted: that is the form sent to workers as Assign.spec_json, whose
   sources travel in their own fields).  Caller frees with json_decref. */
json_t *ak_spec_to_json (const ak_spec_t *spec, bool with_sources);
char   *ak_spec_to_text (const ak_spec_t *spec, bool with_sources);   /* caller frees */

void ak_spec_destroy (ak_spec_t **self_p);

/* Lookups. */
int  ak_spec_key_index (const ak_spec_t *spec, const char *key);          /* -1 if absent */
const ak_size_t *ak_spec_size (const ak_spec_t *spec, const char *name);  /* NULL if absent */
const ak_baseline_t *ak_spec_baseline (const ak_spec_t *spec, const char *backend);
const ak_candidate_t *ak_spec_candidate (const ak_spec_t *spec, const char *name);
bool ak_spec_has_dtype (const ak_spec_t *spec, ak_dtype_t dt);
/* True when size runs on backend ("host", "cuda"): it names no backends,
   or names that one. */
bool ak_size_for_backend (const ak_size_t *size, const char *backend);
const ak_tol_t *ak_spec_tol (const ak_spec_t *spec, ak_dtype_t dt);       /* NULL if dtype not declared */

/* A shape of an operator to time, with a dtype and a weight: a size of the
   spec or a shape given in a manifest or a corpus. */
typedef struct {
    char      *name;                    /* size name, or "custom-N" */
    int64_t    dims[AK_MAX_DIMS];
    ak_dtype_t dtype;
    double     weight;                  /* > 0 */
} ak_workload_t;

/* ------------------------------------------------------ for manifest ops */
/* Parts of the spec grammar that an op entry of a manifest reuses, with the
   same checks and messages (label and path as for ak_spec_parse). */

/* One candidate object {name, backend, source, params?, constraints?,
   launch?} into cand (cleared by ak_spec_destroy once it is in spec's
   candidates).  confined: its source path stays inside base_dir (see
   ak_source_parse).  Checks the parameter space: bounded, every constraint
   evaluates, at least one configuration satisfies them all. */
int ak_spec_parse_candidate (json_t *v, const ak_spec_t *spec, const char *label,
                             const char *path, const char *base_dir, bool confined,
                             ak_candidate_t *cand, ak_err_t *err);
/* The stability gate's near_max factor for dt: the spec's "near_max_scale"
   entry, else the default (x6e4 float16, x1e30 bfloat16, x1e18 float32). */
double ak_spec_near_max_scale (const ak_spec_t *spec, ak_dtype_t dt);
/* The optional "near_max_scale" object of root into spec (dtypes parsed). */
int ak_spec_parse_near_max (json_t *root, ak_spec_t *spec, const char *label, ak_err_t *err);
/* spec's "near_max_scale" entries (if any) into the JSON object o. */
void ak_spec_near_max_json (const ak_spec_t *spec, json_t *o);
/* A tolerances object {dtype: {atol, rtol}} over spec's dtypes into tol;
   seen[i] is set for each spec->dtypes[i] it gives. */
int ak_spec_parse_tols (json_t *obj, const ak_spec_t *spec, const char *label, const char *path,
                        ak_tol_t tol[AK_DT_COUNT], bool seen[AK_DT_COUNT], ak_err_t *err);
/* A shape object: every key of spec, each a positive integer at most
   AK_SPEC_MAX_DIM, into dims (key order). */
int ak_spec_parse_shape (json_t *v, const ak_spec_t *spec, const char *label, const char *path,
                         int64_t dims[AK_MAX_DIMS], ak_err_t *err);
/* The shape object of dims ({"rows": 4, "cols": 8}); caller decrefs. */
json_t *ak_spec_shape_json (const ak_spec_t *spec, const int64_t *dims);

#endif
