/*  lib/akprofile/akp_private.h: what libakprofile's own files share; not
    installed, not part of the API (akprofile.h is).

    Never: declare anything a caller of the library may use. */
#ifndef AKP_PRIVATE_H
#define AKP_PRIVATE_H
#include <stddef.h>

/* Formats into err (len bytes; either may be NULL/0) and returns code. */
int akp_errf (char *err, size_t len, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5), visibility ("hidden")));

#endif
