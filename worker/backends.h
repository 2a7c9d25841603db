/*  worker/backends.h: the backends this build has, by name.

    The table of backends sits above both of them: backend.h is the
    interface alone, backend_host.h and backend_cuda.h are the two
    implementations, and this is the one place that knows the list.

    Never: name a backend this build cannot offer (ak_backend_find says
    NULL), or be included by a backend. */
#ifndef AK_BACKENDS_H
#define AK_BACKENDS_H
#include "backend.h"
#include "backend_cuda.h"
#include "backend_host.h"

/* By name ("host", "cuda"); NULL when this build lacks it.  The host
   backend is always present.  "cuda" is present when the build found CUDA
   headers (AK_HAVE_CUDA): on a host without a driver, GPU or NVRTC its
   table is still returned, and its probe answers AK_EUNAVAIL with the
   reason, so the daemon can say why instead of "not in this build". */
const ak_backend_t *ak_backend_find (const char *name);

#endif
