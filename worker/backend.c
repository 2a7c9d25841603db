/*  worker/backend.c: the table of backends this build has. */
#include "backend.h"

#include <string.h>

/*  The host backend is always present.  The CUDA backend (NVRTC, libcuda,
    CUPTI through dlopen) is not part of this build yet, so "cuda" is NULL
    and the daemon says so at start. */
const ak_backend_t *ak_backend_find (const char *name)
{
    if (!name)
        return NULL;
    if (strcmp (name, "host") == 0)
        return ak_backend_host ();
    return NULL;
}
