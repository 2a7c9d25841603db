/*  common/corpus.h: shape corpora, built-in operator names, weighted
    aggregates (docs/formats.md "Shape corpus", "External operators";
    docs/measurement.md "Weighted aggregates").

    A shape corpus is a versioned JSON file of the shapes users actually run
    for one operator, each with a dtype, a weight (how much it matters) and
    tags.  A manifest op entry naming one ("corpus": "softmax.corpus.json")
    gets its cases as workloads, name = case name, weight = case weight.
    The corpus is read against the op's spec: every size key, dtype and
    value must be one the spec declares.  Like specs and manifests it is
    untrusted: every problem is reported as `FILE: FIELD.PATH: what is
    wrong` and unknown fields are rejected.

    The catalog check refuses an operator whose name is the name of a
    built-in one (CATALOG/<name>/spec.json) unless its op entry says
    "override_builtin": true.

    ak_aggregate is the one definition of a weighted aggregate over
    workloads: the promotion rule (coordinator/promote.c) and the reports
    use the same formula, so a report's speedup is the promoted one. */
#ifndef AK_CORPUS_H
#define AK_CORPUS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "error.h"
#include "spec.h"

#define AK_CORPUS_SCHEMA_VERSION 1
#define AK_CORPUS_MAX_CASES      4096
#define AK_CORPUS_MAX_TAGS       32

/* ----------------------------------------------------------------- corpus */
typedef struct {
    char      *name;                    /* [a-z0-9_-]+, unique in the corpus */
    int64_t    dims[AK_MAX_DIMS];       /* in the spec's key order, each > 0 */
    ak_dtype_t dtype;                   /* one of the spec's dtypes */
    double     weight;                  /* finite, > 0 (default 1) */
    char     **tags;
    size_t     ntags;
} ak_corpus_case_t;

typedef struct {
    char             *operation;        /* = the spec's name */
    ak_corpus_case_t *cases;            /* at least one */
    size_t            ncases;
} ak_corpus_t;

/* Parses a corpus already in memory against spec.  `label` (a file name)
   prefixes error messages.  0 and *corpus_p (caller destroys), or
   AK_EINVAL / AK_EVERSION with err naming the label and the field. */
int ak_corpus_parse (json_t *json, const char *label, const ak_spec_t *spec,
                     ak_corpus_t **corpus_p, ak_err_t *err);
/* Reads the file at path and parses it (label = path). */
int ak_corpus_load (const char *path, const ak_spec_t *spec, ak_corpus_t **corpus_p,
                    ak_err_t *err);
void ak_corpus_destroy (ak_corpus_t **self_p);

/* ---------------------------------------------------------------- catalog */
/* CATALOG/<name>/spec.json when it exists (caller frees), else NULL. */
char *ak_catalog_builtin (const char *catalog_dir, const char *name);

/* Checks every op of m loaded from a file (or inline) against the built-in
   operators of catalog_dir: an op whose spec has a built-in's name but is
   not that built-in's spec file is refused (AK_EEXIST, err names label,
   ops[i].spec and both files) unless op->override_builtin is set.  The
   flag is cleared on ops that override nothing, so what the batch records
   is true.  catalog_dir NULL: nothing to check, 0. */
int ak_catalog_check (ak_manifest_t *m, const char *label, const char *catalog_dir,
                      ak_err_t *err);

/* ------------------------------------------------------------- aggregates */
typedef struct {
    double weight;                      /* > 0 */
    double base_us;                     /* baseline median, > 0 */
    double cand_us;                     /* candidate median, > 0 */
} ak_wpoint_t;

typedef struct {
    size_t n;                           /* workloads aggregated */
    double weight;                      /* sum of weights */
    double base_us;                     /* sum(w * base) / sum(w) */
    double cand_us;                     /* sum(w * cand) / sum(w) */
    double speedup;                     /* base_us / cand_us */
} ak_aggregate_t;

/* The weighted aggregate of n points (n >= 1).  AK_EINVAL (out zeroed)
   when a weight or median is not a finite positive number. */
int ak_aggregate (const ak_wpoint_t *points, size_t n, ak_aggregate_t *out);

#endif
