/*  worker/cache.h: one build into the content-addressed compile cache.

    Both backends build the same way: the artifact is <cache_dir>/<key><ext>
    where the key hashes everything that decides the build; a build happens
    in a private directory next to it (<cache_dir>/.build-XXXXXX) and its
    result is renamed over the artifact path, which is atomic on one
    filesystem, so a reader sees either no artifact or a whole one, and two
    workers building the same key at once both end with the same file.

        ak_cache_build_t b;
        rc = ak_cache_build_begin (&b, cache_dir, key, ".so", out, err);
        if (rc == 0 && !out->cached) {
            char *tmp = ak_cache_build_path (&b, "kernel.so");
            ... build tmp, collecting the compiler's log ...
            rc = ak_cache_build_commit (&b, tmp, err);
        }
        return ak_cache_build_end (&b, rc, t0, &log, out);
*/
#ifndef AK_WORKER_CACHE_H
#define AK_WORKER_CACHE_H
#include <stdbool.h>
#include <stdint.h>
#include "backend.h"
#include "error.h"

typedef struct {
    char *artifact;                     /* <cache_dir>/<key><ext> */
    char *build_dir;                    /* the private build directory, or NULL */
} ak_cache_build_t;

/* A regular file of at least one byte. */
bool ak_cache_present (const char *path);

/* Creates cache_dir (0755) if needed.  When the artifact is present sets
   out->cached and returns 0 with no build directory; else makes the build
   directory and returns 0.  AK_EIO with the path named when either fails. */
int ak_cache_build_begin (ak_cache_build_t *b, const char *cache_dir, const char *key,
                          const char *ext, ak_compile_out_t *out, ak_err_t *err);

/* <build_dir>/<name>; caller frees. */
char *ak_cache_build_path (const ak_cache_build_t *b, const char *name);

/* Renames built (inside the build directory) over the artifact. */
int ak_cache_build_commit (ak_cache_build_t *b, const char *built, ak_err_t *err);

/* Finishes the compile: on rc == 0 out->artifact_path takes the artifact;
   out->log takes *log (or "") either way, out->ms the time since t0 (ns,
   ak_clock_mono_ns); removes the build directory and what is in it, frees
   b.  Returns rc. */
int ak_cache_build_end (ak_cache_build_t *b, int rc, uint64_t t0, char **log, ak_compile_out_t *out);

#endif
