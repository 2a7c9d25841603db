/*  common/corpus.h: shape corpora (docs/formats.md "Shape corpus").

    A shape corpus is a versioned JSON file of the shapes users actually run
    for one operator, each with a dtype, a weight (how much it matters) and
    tags.  A manifest op entry naming one ("corpus": "softmax.corpus.json")
    gets its cases as workloads, name = case name, weight = case weight
    (manifest.c).  The corpus is read against the op's spec: every size key,
    dtype and value must be one the spec declares.

    Never: accept a case the spec cannot run (unknown key or dtype, a shape
    out of range, a size's name with another shape), or an unknown field:
    like specs and manifests a corpus is untrusted, and every problem is
    reported as `FILE: FIELD.PATH: what is wrong`. */
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

#endif
