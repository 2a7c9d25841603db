/*  worker/backends.c: the table of backends this build has (backends.h). */
#include "backends.h"

#include <string.h>

const ak_backend_t *ak_backend_find (const char *name)
{
    if (!name)
        return NULL;
    if (strcmp (name, "host") == 0)
        return ak_backend_host ();
    if (strcmp (name, "cuda") == 0)
        return ak_backend_cuda ();
    return NULL;
}
