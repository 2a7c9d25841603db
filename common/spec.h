/*  common/spec.h: operator specs and batch manifests.

    Both are JSON files written by people, so both are untrusted: every
    problem is reported as `FILE: FIELD.PATH: what is wrong`, for example
    `batch.json: ops[2].tolerances.float16.atol: must be finite`, and unknown
    fields are rejected (a typo must not silently change a night's run).
    See docs/formats.md for the file formats.

    A manifest loaded from disk (ak_manifest_load) resolves every file it names
    (spec files relative to the manifest, kernel sources relative to their
    spec) and can be written out as one self-contained JSON *bundle*
    (ak_manifest_to_bundle) that is what akctl sends to the coordinator; the
    coordinator parses a bundle with ak_manifest_parse_bundle and the same
    validation.  A bundle never names files, only carries their text. */
#ifndef AK_SPEC_H
#define AK_SPEC_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <jansson.h>
#include "error.h"

#define AK_MAX_DIMS      8
#define AK_MAX_BUFS      8
#define AK_MAX_PARAMS    16
/* Most elements of one input or output buffer at any size of a spec, a
   manifest workload or a corpus case: what a worker allocates (worker/data.h,
   AK_DATA_MAX_ELEMS), 2^28, checked when the spec or manifest is read so a
   size too large fails there, naming it, and not in the gates. */
#define AK_SPEC_MAX_ELEMS (1ull << 28)
#define AK_MAX_NAME      64
#define AK_SPEC_SCHEMA_VERSION      1
#define AK_MANIFEST_SCHEMA_VERSION  1
#define AK_MAX_SOURCE_BYTES (1u << 20)

/* ------------------------------------------------------------------ dtypes */
typedef enum { AK_DT_FLOAT16 = 0, AK_DT_BFLOAT16, AK_DT_FLOAT32, AK_DT_COUNT } ak_dtype_t;
const char *ak_dtype_name (ak_dtype_t dt);                  /* "float16" ... */
int ak_dtype_parse (const char *name, ak_dtype_t *out);     /* 0 or AK_EINVAL */
size_t ak_dtype_size (ak_dtype_t dt);                       /* 2, 2, 4 */

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

typedef struct {
    char  *name;                        /* file name, as named in the spec */
    char  *text;                        /* the source itself; NULL in a spec parsed from
                                           the form without sources (name + digest only) */
    char   digest[65];                  /* sha256 hex of text */
} ak_source_t;

/*  How a CUDA kernel is launched: grid and block dimensions and dynamic
    shared memory bytes, each an expression over the spec's keys, `b`
    (bytes per element of the dtype) and the candidate's parameters (a
    baseline has none).  Checked when the spec is read (names, syntax),
    evaluated per workload by ak_launch_eval.  Only `cuda` kernels have
    one; host kernels never do. */
typedef struct {
    char   *grid[3];                    /* 1 to 3 expressions, x first; missing ones are 1 */
    int     ngrid;
    char   *block[3];
    int     nblock;
    char   *shared;                     /* dynamic shared memory bytes; "0" when not given */
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
} ak_candidate_t;

typedef struct {
    char        *backend;               /* "host" | "cuda" */
    ak_source_t  source;
    ak_launch_rule_t *launch;           /* cuda: required; host: NULL */
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

/* Evaluates a count / flops / bytes expression for dims (key order) and
   dtype (for `b`). */
int ak_spec_eval (const ak_spec_t *spec, const char *expr, const int64_t *dims, ak_dtype_t dt,
                  int64_t *out, ak_err_t *err);

/* A launch configuration, evaluated. */
typedef struct {
    uint32_t grid[3], block[3];         /* each >= 1 */
    uint32_t shared_bytes;              /* dynamic shared memory */
} ak_launch_cfg_t;

/* Evaluates rule for dims (key order), dtype dt (for `b`) and the kernel's
   parameters (names[i] = values[i]; none for a baseline) into out.  Every
   grid and block dimension must come out in 1..2^31-1 and shared in
   0..2^31-1.  AK_EINVAL with err naming the field and the value or the
   expression's error ("launch.block[0] = 0: must be 1..2147483647"), a
   candidate's fault (receipt status invalid_config), never UB. */
int ak_launch_eval (const ak_spec_t *spec, const ak_launch_rule_t *rule, const int64_t *dims,
                    ak_dtype_t dt, const char *const *names, const int64_t *values, int nparams,
                    ak_launch_cfg_t *out, ak_err_t *err);

/* Enumerates the candidate's parameter space (cartesian product, params in
   declaration order, values in the order given), skipping configurations
   that fail a constraint, and calls fn for each with values[i] for params[i].
   fn returning non-zero stops and returns that value.  `count` (may be NULL)
   gets the number of valid configurations. */
typedef int (ak_space_fn) (const ak_candidate_t *cand, const int64_t *values, void *arg);
int ak_space_walk (const ak_candidate_t *cand, ak_space_fn *fn, void *arg, size_t *count, ak_err_t *err);

/* ----------------------------------------------------------------- policy */
typedef struct {
    uint32_t max_attempts;        /* 3 */
    uint32_t compile_timeout_ms;  /* 60000 */
    uint32_t run_timeout_ms;      /* 60000 */
    uint32_t lease_ms;            /* 120000 */
    uint32_t warmup;              /* 3 */
    uint32_t min_samples;         /* 10 */
    uint32_t max_samples;         /* 200 */
    double   rsd_target;          /* 0.005 */
    uint32_t max_time_ms;         /* 2000 */
    double   threshold;           /* 0.03 */
    double   max_regression;      /* 0.05 */
    uint64_t seed;                /* 42 */
    /* search (coordinator/rounds.h, docs/measurement.md "Search") */
    char     search_strategy[16]; /* "" auto (exhaustive when the valid space fits the budget) | exhaustive | halving */
    uint32_t search_budget;       /* 64 configurations sampled per (candidate, op, class) */
    uint32_t search_keep;         /* 4 finalists timed in full */
    uint32_t search_rounds;       /* 2 stages of successive halving */
    uint32_t short_max_time_ms;   /* 200: timing budget per workload in the short stages */
    bool     confirm;             /* true: finalists re-measured on another worker */
    double   implausible;         /* 10: speedups above are flagged and always confirmed */
} ak_policy_t;

void ak_policy_defaults (ak_policy_t *policy);

/* --------------------------------------------------------------- manifest */
typedef struct {
    char      *name;                    /* size name, or "custom-N" */
    int64_t    dims[AK_MAX_DIMS];
    ak_dtype_t dtype;
    double     weight;                  /* > 0 */
} ak_workload_t;

typedef struct {
    ak_spec_t      *spec;               /* owned; tolerance overrides applied */
    ak_workload_t  *workloads;          /* what tune/preflight tasks time */
    size_t          nworkloads;
    char          **candidates;         /* names of spec candidates to tune */
    size_t          ncandidates;
    bool            profile;            /* "profile": true: profile tasks on cuda targets */
    /* External operators and corpora (docs/formats.md): */
    char           *spec_path;          /* the spec file as resolved; NULL for an inline spec */
    char           *corpus_path;        /* "corpus": the file its cases came from; NULL: none */
    bool            override_builtin;   /* "override_builtin": true: replaces the built-in
                                           operator of the same name for this batch */
} ak_manifest_op_t;

typedef struct {
    char             *name;
    char            **targets;          /* device classes; "host" for the host backend */
    size_t            ntargets;
    ak_policy_t       policy;
    ak_manifest_op_t *ops;
    size_t            nops;
} ak_manifest_t;

/* Loads a manifest file and every file it names. */
int ak_manifest_load (const char *path, ak_manifest_t **manifest_p, ak_err_t *err);
/* Parses a self-contained bundle (as sent by akctl submit). */
int ak_manifest_parse_bundle (const char *text, size_t len, const char *label,
                              ak_manifest_t **manifest_p, ak_err_t *err);
/* The bundle text; caller frees. */
char *ak_manifest_to_bundle (const ak_manifest_t *manifest);
void ak_manifest_destroy (ak_manifest_t **self_p);

/* The backend a device class runs on: "host" for "host", else "cuda". */
const char *ak_class_backend (const char *device_class);

#endif
