/*  common/source.h: kernel sources named by a spec (docs/formats.md
    "Sources").

    A source is the text of a kernel, a reference or a baseline with its
    sha256.  In a spec file it is a path relative to the spec's directory;
    in a bundle and in what workers receive it is inline: {"name", "text"},
    or {"name", "digest"} in the form without sources.  Paths are confined:
    a spec cannot make akctl read, and ship to every worker of the fleet, a
    file outside its directory, through ".." or a symbolic link.

    Never: read a file for a source parsed without a base directory (a
    bundle names no files), accept text with a NUL byte, invalid UTF-8 or
    above AK_MAX_SOURCE_BYTES, or keep a name that carries a path of the
    submitting host beyond the spec's directory. */
#ifndef AK_SOURCE_H
#define AK_SOURCE_H
#include <stdbool.h>
#include <jansson.h>
#include "error.h"

#define AK_MAX_SOURCE_BYTES (1u << 20)

typedef struct {
    char  *name;                        /* file name, as named in the spec */
    char  *text;                        /* the source itself; NULL in a spec parsed from
                                           the form without sources (name + digest only) */
    char   digest[65];                  /* sha256 hex of text */
} ak_source_t;

/* Parses v at path of label into src (which the caller clears, also on
   failure): a file path read relative to base_dir, or an inline object.
   confined: the path must stay inside base_dir (a spec's own sources); a
   path that is not (a manifest's extra candidate) is named by its last
   component.  base_dir NULL: inline only.  0, or AK_EINVAL / AK_ETOOBIG /
   the read's code with err naming label and path. */
int ak_source_parse (json_t *v, const char *label, const char *path, const char *base_dir,
                     bool confined, ak_source_t *src, ak_err_t *err);

/* {"name", "text"} when with_text and src has text, else {"name", "digest"}. */
json_t *ak_source_to_json (const ak_source_t *src, bool with_text);

/* Frees what src holds and NULLs its pointers (src itself is the caller's). */
void ak_source_clear (ak_source_t *src);

#endif
