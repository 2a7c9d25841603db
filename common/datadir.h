/*  common/datadir.h: where a program finds the files it needs at run time
    that are not compiled into it (the operator catalog kernels/, the demo
    batch, the Python binding), in a source tree and in an installed one.

    Looked for in this order, the first that exists wins:
      1. $AK_SOURCE_DIR/SRC_REL (an explicit source tree),
      2. BINDIR/../share/akfleet/INST_REL (installed beside this binary:
         /usr/bin/akctl -> /usr/share/akfleet/kernels; `cmake --install`
         and the Debian packages, also when extracted into another root),
      3. the source tree the binary was built from (AK_SOURCE_DIR at build),
      4. BINDIR/../../SRC_REL (build/bin/akctl of a tree moved with its
         sources).
    Never: look at the working directory, or anywhere the user did not
    install or build akfleet. */
#ifndef AK_DATADIR_H
#define AK_DATADIR_H

/*  The directory of the running binary (/proc/self/exe); caller frees;
    NULL when unknown. */
char *ak_datadir_bindir (void);

/*  The first of the places above where SRC_REL (in a source tree) or
    INST_REL (below share/akfleet; NULL: the same as SRC_REL) passes
    access (2) with amode, as an absolute path (realpath); caller frees.
    NULL when none; then *tried_p (when not NULL) gets the places looked
    at, comma-separated, for the message (caller frees). */
char *ak_datadir_find (const char *src_rel, const char *inst_rel, int amode, char **tried_p);

#endif
