/*  coordinator/access.h: what each role may ask of the coordinator, and the
    security counters `stats` shows (docs/operations.md).

    Operators may use every verb; viewers only the verbs that read.  A verb
    not listed as a read is an operator's (a verb added later is closed to
    viewers until someone decides otherwise). */
#ifndef AK_ACCESS_H
#define AK_ACCESS_H
#include <stdbool.h>
#include <jansson.h>
#include "auth.h"
#include "counters.h"
#include "error.h"

/* True when verb only reads. */
bool ak_access_read_verb (const char *verb);

/* 0 when a key of role (named name) may use verb; AK_EDENIED with
   "refused: viewer key NAME may not VERB" otherwise. */
int ak_access_check (ak_role_t role, const char *name, const char *verb, ak_err_t *err);

/* The security counters of c as a JSON object (new reference). */
json_t *ak_access_stats (const ak_counters_t *c);

#endif
