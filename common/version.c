/*  common/version.c: see version.h. */
#include "version.h"

#include <stdio.h>

const char *ak_version (void)
{
    return AK_VERSION;
}

int ak_version_print (const char *program)
{
    printf ("%s %s\n", program, AK_VERSION);
    return fflush (stdout) == 0 ? 0 : 1;
}
