/*  common/util.h: small helpers shared by every program. */
#ifndef AK_UTIL_H
#define AK_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "error.h"

/* Reads a whole file (at most max_bytes) into a NUL-terminated buffer the
   caller frees. AK_ENOTFOUND, AK_ETOOBIG or AK_EIO with err naming the path. */
int ak_file_read (const char *path, size_t max_bytes, char **data_p, size_t *len_p, ak_err_t *err);

/* Writes data to path atomically: a temp file in the same directory, fsync,
   rename.  Readers see the old file or the new one, never a torn one. */
int ak_file_write_atomic (const char *path, const void *data, size_t len, ak_err_t *err);

/* write(2) until all len bytes are written (EINTR retried): 0, or -1 with
   errno from the failing write. */
int ak_write_all (int fd, const void *data, size_t len);

/* mkdir -p with the given mode. */
int ak_mkdir_p (const char *path, int mode, ak_err_t *err);

/* Directory part of path ("." when none); caller frees. */
char *ak_dirname (const char *path);
/* Joins dir and rel ("dir/rel"); rel absolute is returned as is; caller frees. */
char *ak_path_join (const char *dir, const char *rel);
/*  Removes the tree at path, depth first, not following links; with
    keep_top, everything in it but path itself; never "/".  Best effort:
    what cannot be removed stays. */
void ak_rm_tree (const char *path, bool keep_top);

/* xmalloc-style helpers: abort on allocation failure (out of memory is not
   recoverable for these small, bounded allocations). */
/* Says "out of memory" on stderr and aborts (what ak_malloc does on failure). */
void ak_oom (size_t n) __attribute__ ((noreturn));
void *ak_malloc (size_t n);
void *ak_calloc (size_t n, size_t size);
void *ak_realloc (void *p, size_t n);
char *ak_strdup (const char *s);              /* NULL -> NULL */
bool ak_streq (const char *a, const char *b);  /* both non-NULL and equal */
char *ak_sprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* True when s is 1..max printable ASCII characters without spaces (an id
   that a peer sends: worker ids, device classes). */
bool ak_str_token (const char *s, size_t max);

/* For a long-running process that frees many small objects of the same
   sizes (akcoord, akload): starts this program again (same pid, argv and
   environment) with glibc's per-thread cache of freed chunks raised from 7
   to 16384 per size (GLIBC_TUNABLES glibc.malloc.tcache_count=16384; a
   larger one bought nothing more and cost memory; glibc reads tunables
   only when a program starts).  Returns without doing anything when the
   environment already sets tcache_count, when AK_MALLOC_TUNE=0, or when the
   exec fails.  docs/operations.md says why. */
void ak_malloc_tune (char **argv);

/* Strict integer / float parsing of a whole string. 0 or AK_EINVAL. */
int ak_parse_i64 (const char *text, int64_t *out);
int ak_parse_double (const char *text, double *out);

#endif
