/*  worker/backend.c: the table of backends this build has. */
#include "backend.h"
#include "backend_cuda.h"

#include <string.h>

/*  The host backend is always present.  "cuda" is present when the build
    found CUDA headers (AK_HAVE_CUDA), and NULL otherwise.  On a host
    without a driver, GPU or NVRTC the CUDA table is still returned: its
    probe answers AK_EUNAVAIL with the reason ("CUDA driver: libcuda.so.1:
    cannot open shared object file ..."), so the daemon can say why instead
    of "not in this build". */
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
