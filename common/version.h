/*  common/version.h: the one version of akfleet every program prints.

    AK_VERSION comes from the project's version in CMakeLists.txt
    (project (akfleet VERSION ...)); `PROGRAM --version` prints
    "PROGRAM VERSION" on one line, the same on akcoord, akworker, akctl
    and akload, and exits 0.  Never: a second version number elsewhere. */
#ifndef AK_VERSION_H
#define AK_VERSION_H

#ifndef AK_VERSION
#error "AK_VERSION is set by CMakeLists.txt (target akcommon)"
#endif

/* "0.1.0" */
const char *ak_version (void);

/* Prints "program VERSION\n" to stdout; returns 0, the exit status of
   --version. */
int ak_version_print (const char *program);

#endif
