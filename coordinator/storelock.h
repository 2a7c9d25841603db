/*  coordinator/storelock.h: one coordinator per store.

    Two coordinators on one store would each serve only the batches they
    created and answer "no batch" for the other's (their indexes are
    rebuilt from the store only at start).  akcoord therefore takes an
    exclusive lock on STORE/akcoord.lock (a POSIX record lock, held by the
    process until it exits, even by kill -9) before it opens the store, and
    a second akcoord on the same store stops with the holder's pid named.
    The file also holds that pid as text, for people.

    Never: open or create anything in the store besides the lock file
    before the lock is held; remove the lock file (a stale file is harmless:
    the lock, not the file, is what counts). */
#ifndef AK_STORELOCK_H
#define AK_STORELOCK_H
#include "error.h"

#define AK_STORELOCK_FILE "akcoord.lock"

typedef struct ak_storelock ak_storelock_t;

/*  Creates store_dir (0700) when it is missing and takes the lock on
    store_dir/akcoord.lock.  0 with *self_p; AK_EEXIST when another process
    holds it (err: "store DIR is in use by another akcoord (pid N ...)");
    AK_EIO when the directory or the file cannot be made or locked. */
int  ak_storelock_take (const char *store_dir, ak_storelock_t **self_p, ak_err_t *err);
/*  Releases the lock (the process's exit does the same). */
void ak_storelock_release (ak_storelock_t **self_p);

#endif
