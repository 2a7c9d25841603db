/*  common/manifest.h: batch manifests and bundles (docs/formats.md
    "Manifest").

    A manifest is a JSON file written by a person, as untrusted as a spec:
    every problem is reported as `FILE: FIELD.PATH: what is wrong`, for
    example `batch.json: ops[2].tolerances.float16.atol: must be finite`,
    and unknown fields are rejected.  It names the device classes to tune
    for, the policy (policy.h) and the operators: each a spec (spec.h), the
    candidates to tune, tolerance overrides and the workloads to time, given
    or read from a shape corpus (corpus.h).

    A manifest loaded from disk (ak_manifest_load) resolves every file it names
    (spec files relative to the manifest, kernel sources relative to their
    spec) and can be written out as one self-contained JSON *bundle*
    (ak_manifest_to_bundle) that is what akctl sends to the coordinator; the
    coordinator parses a bundle with ak_manifest_parse_bundle and the same
    validation.  A bundle never names files, only carries their text.

    Never: read a file while parsing a bundle, or write a bundle that names
    one; accept an op that no target can run. */
#ifndef AK_MANIFEST_H
#define AK_MANIFEST_H
#include <stdbool.h>
#include <stddef.h>
#include "error.h"
#include "policy.h"
#include "spec.h"

#define AK_MANIFEST_SCHEMA_VERSION  1

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
/* The same, with the manifest's "targets" replaced by the one device
   class target (NULL: as written) before the ops are checked against
   them (akctl submit FILE --target CLASS). */
int ak_manifest_load_for (const char *path, const char *target, ak_manifest_t **manifest_p, ak_err_t *err);
/* Parses a self-contained bundle (as sent by akctl submit). */
int ak_manifest_parse_bundle (const char *text, size_t len, const char *label,
                              ak_manifest_t **manifest_p, ak_err_t *err);
/* The bundle text; caller frees. */
char *ak_manifest_to_bundle (const ak_manifest_t *manifest);
void ak_manifest_destroy (ak_manifest_t **self_p);

/* The backend a device class runs on: "host" for "host", else "cuda". */
const char *ak_class_backend (const char *device_class);

/* ---------------------------------------------------------------- catalog */
/*  The catalog check refuses an operator whose name is the name of a
    built-in one (CATALOG/<name>/spec.json) unless its op entry says
    "override_builtin": true (docs/formats.md "External operators"). */

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

#endif
