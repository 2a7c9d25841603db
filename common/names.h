/*  common/names.h: the grammars of the names in specs, manifests and shape
    corpora (docs/formats.md).

    A name travels into task ids, store keys, file names, -D flags and log
    lines, so each kind has one grammar, checked where the name is read.
    Every check also bounds the length: 1 to AK_MAX_NAME - 1 characters.

    Never: accept an empty name, or one of AK_MAX_NAME characters or more. */
#ifndef AK_NAMES_H
#define AK_NAMES_H
#include <stdbool.h>

#define AK_MAX_NAME 64

/* [a-z0-9_]+: operators, sizes, buffers, candidates. */
bool ak_name_ok (const char *s);
/* [A-Z][A-Z0-9_]*: a candidate's parameters (they become -D macros). */
bool ak_name_param_ok (const char *s);
/* [A-Za-z_][A-Za-z0-9_]*: shape keys (variables of expressions). */
bool ak_name_ident_ok (const char *s);
/* [a-z0-9_-]+ (workloads, corpus cases), or with upper [A-Za-z0-9_.-]+
   (manifest names). */
bool ak_name_label_ok (const char *s, bool upper);
/* [A-Za-z0-9_./-]+: device classes ("H100-SXM5-80GB", "host"). */
bool ak_name_class_ok (const char *s);

#endif
