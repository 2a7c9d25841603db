/*  worker/cache.c: one build into the content-addressed compile cache
    (cache.h). */
#include "cache.h"
#include "clock.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool ak_cache_present (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 && S_ISREG (st.st_mode) && st.st_size > 0;
}

int ak_cache_build_begin (ak_cache_build_t *b, const char *cache_dir, const char *key,
                          const char *ext, ak_compile_out_t *out, ak_err_t *err)
{
    memset (b, 0, sizeof *b);
    int rc = ak_mkdir_p (cache_dir, 0755, err);
    if (rc)
        return rc;
    b->artifact = ak_sprintf ("%s/%s%s", cache_dir, key, ext);
    if (ak_cache_present (b->artifact)) {
        out->cached = true;
        return 0;
    }
    b->build_dir = ak_sprintf ("%s/.build-XXXXXX", cache_dir);
    if (!mkdtemp (b->build_dir)) {
        rc = ak_err_set (err, AK_EIO, "%s: mkdtemp: %s", b->build_dir, strerror (errno));
        free (b->build_dir);
        b->build_dir = NULL;
        return rc;
    }
    return 0;
}

char *ak_cache_build_path (const ak_cache_build_t *b, const char *name)
{
    return ak_path_join (b->build_dir, name);
}

int ak_cache_build_commit (ak_cache_build_t *b, const char *built, ak_err_t *err)
{
    if (rename (built, b->artifact) != 0)
        return ak_err_set (err, AK_EIO, "rename %s -> %s: %s", built, b->artifact, strerror (errno));
    return 0;
}

/*  The build directory is flat: the source, the compiler's output. */
static void s_rm_build_dir (const char *dir)
{
    DIR *d = opendir (dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir (d)) != NULL) {
            if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
                continue;
            char *p = ak_path_join (dir, de->d_name);
            unlink (p);
            free (p);
        }
        closedir (d);
    }
    rmdir (dir);
}

int ak_cache_build_end (ak_cache_build_t *b, int rc, uint64_t t0, char **log, ak_compile_out_t *out)
{
    if (rc == 0) {
        out->artifact_path = b->artifact;
        b->artifact = NULL;
    }
    out->log = *log ? *log : ak_strdup ("");
    *log = NULL;
    out->ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    if (b->build_dir) {
        s_rm_build_dir (b->build_dir);
        free (b->build_dir);
    }
    free (b->artifact);
    memset (b, 0, sizeof *b);
    return rc;
}
