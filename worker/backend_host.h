/*  worker/backend_host.h: the host backend, the table of backend.h for C
    kernels built with the system compiler and run on the CPU (float32
    only): the whole pipeline works without a GPU, and it builds the
    float64 reference (the oracle) for every backend.

    Never: run a compiler through a shell, trust a define name, or leave a
    half-written artifact where a reader could load it (backend_host.c). */
#ifndef AK_BACKEND_HOST_H
#define AK_BACKEND_HOST_H
#include "backend.h"

/* The table; always present. */
const ak_backend_t *ak_backend_host (void);

#endif
