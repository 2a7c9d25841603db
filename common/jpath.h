/*  common/jpath.h: reading untrusted JSON with errors that name the file
    and the JSON path of the value (docs/formats.md).

    Specs, manifests and shape corpora are written by people, so every
    problem is reported as `LABEL: PATH: what is wrong`, for example
    `batch.json: ops[2].tolerances.float16.atol: must be finite`.  These are
    the pieces every reader of such a file shares: building paths, the
    messages, the typed access to members, the unknown-field check, and
    parsing text so that even a syntax error names the path it is in.

    Never: trust a key or a string for a message unfiltered (ak_jpath_show
    makes it printable and short), keep a pointer into a json_t past the
    parse, or know what a spec or a manifest is (the grammars live in
    spec.c, manifest.c, corpus.c). */
#ifndef AK_JPATH_H
#define AK_JPATH_H
#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "error.h"

#define AK_JPATH_MAX       256          /* bytes of a JSON path in a message */
#define AK_JPATH_SHOW      72           /* bytes of ak_jpath_show's buffer */
#define AK_JPATH_MAX_FILE  (16u << 20)  /* a spec, manifest or corpus file */

/* Copies untrusted text into buf for a message: printable ASCII only, cut at
   64 characters ("..." after), "(null)" for NULL.  Returns buf. */
const char *ak_jpath_show (const char *text, char buf[AK_JPATH_SHOW]);

/* `LABEL: PATH: message` (`LABEL: message` when path is empty) into err;
   ak_jpath_bad with AK_EINVAL, ak_jpath_fail with code.  Return the code. */
int ak_jpath_bad (ak_err_t *err, const char *label, const char *path, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
int ak_jpath_fail (ak_err_t *err, int code, const char *label, const char *path,
                   const char *fmt, ...) __attribute__ ((format (printf, 5, 6)));

/* parent.key (key alone at the top level; key shown as ak_jpath_show) and
   parent[i] into buf, AK_JPATH_MAX bytes.  Return buf. */
const char *ak_jpath_field (char *buf, const char *parent, const char *key);
const char *ak_jpath_index (char *buf, const char *parent, size_t i);

/* Parses JSON text, duplicate keys rejected.  0 and *root_p (caller
   decrefs), or AK_EINVAL with err naming label, the path of the value the
   syntax error is in, and its line and column ("must be finite" for a
   number too large for a double). */
int ak_jpath_load (const char *text, size_t len, const char *label, json_t **root_p,
                   ak_err_t *err);

/* The top of a versioned document (a spec, a manifest): root is an object
   ("a WHAT must be a JSON object"), has only the allowed members, and its
   "schema_version" is version (AK_EVERSION "unsupported version N (this
   build reads V)" otherwise). */
int ak_jpath_document (json_t *root, const char *what, const char *const *allowed, int version,
                       const char *label, ak_err_t *err);

/* AK_EINVAL naming the first member of obj that is not in allowed
   (NULL-terminated): "unknown field". */
int ak_jpath_only (json_t *obj, const char *const *allowed, const char *label,
                   const char *path, ak_err_t *err);

/* obj[key] of the given JSON type into *out; *out NULL when absent and not
   required ("missing" when required).  JSON_REAL accepts any number,
   JSON_TRUE either boolean.  *out is borrowed from obj. */
int ak_jpath_get (json_t *obj, const char *key, json_type type, bool required,
                  const char *label, const char *parent, json_t **out, ak_err_t *err);

/* v as a string without embedded NUL bytes into *out (borrowed from v). */
int ak_jpath_str (json_t *v, const char *label, const char *path, const char **out,
                  ak_err_t *err);

/* ak_jpath_get of a string member, then ak_jpath_str: *out NULL when absent
   and not required. */
int ak_jpath_get_str (json_t *obj, const char *key, bool required, const char *label,
                      const char *parent, const char **out, ak_err_t *err);

#endif
