/*  common/util.c: small helpers shared by every program. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ allocation */

void ak_oom (size_t n)
{
    static const char msg[] = "akfleet: out of memory\n";
    (void) n;
    ssize_t w = write (STDERR_FILENO, msg, sizeof msg - 1);
    (void) w;
    abort ();
}

void *ak_malloc (size_t n)
{
    void *p = malloc (n ? n : 1);
    if (!p)
        ak_oom (n);
    return p;
}

void *ak_calloc (size_t n, size_t size)
{
    void *p = calloc (n ? n : 1, size ? size : 1);
    if (!p)
        ak_oom (n * size);
    return p;
}

void *ak_realloc (void *p, size_t n)
{
    void *q = realloc (p, n ? n : 1);
    if (!q)
        ak_oom (n);
    return q;
}

bool ak_str_token (const char *s, size_t max)
{
    size_t n = s ? strlen (s) : 0;
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) s[i] <= 0x20 || (unsigned char) s[i] >= 0x7f)
            return false;
    return true;
}

char *ak_strdup (const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen (s) + 1;
    char *d = ak_malloc (n);
    memcpy (d, s, n);
    return d;
}

bool ak_streq (const char *a, const char *b)
{
    return a && b && strcmp (a, b) == 0;
}

char *ak_sprintf (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int n = vsnprintf (NULL, 0, fmt, ap);
    va_end (ap);
    if (n < 0)
        n = 0;
    char *buf = ak_malloc ((size_t) n + 1);
    va_start (ap, fmt);
    int m = vsnprintf (buf, (size_t) n + 1, fmt, ap);
    va_end (ap);
    if (m < 0)
        buf[0] = '\0';
    return buf;
}

/* ----------------------------------------------------------------- files */

/*  Reads the whole file at path into a NUL-terminated buffer (caller frees).
    A file longer than max_bytes is AK_ETOOBIG; a missing one AK_ENOTFOUND;
    any other failure AK_EIO.  err names the path in every case. */
int ak_file_read (const char *path, size_t max_bytes, char **data_p, size_t *len_p, ak_err_t *err)
{
    int rc = 0;
    int fd = -1;
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (!path || !data_p)
        return ak_err_set (err, AK_EINVAL, "ak_file_read: no path");
    *data_p = NULL;
    if (len_p)
        *len_p = 0;
    /* Keeps max_bytes + 1 and the doubling below from wrapping around. */
    if (max_bytes > SIZE_MAX / 4)
        max_bytes = SIZE_MAX / 4;

    fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        rc = ak_err_set (err, e == ENOENT ? AK_ENOTFOUND : AK_EIO,
                         "%s: %s", path, strerror (e));
        goto fail;
    }
    struct stat st;
    if (fstat (fd, &st) != 0) {
        rc = ak_err_set (err, AK_EIO, "%s: fstat: %s", path, strerror (errno));
        goto fail;
    }
    if (S_ISDIR (st.st_mode)) {
        rc = ak_err_set (err, AK_EIO, "%s: is a directory", path);
        goto fail;
    }
    if (S_ISREG (st.st_mode) && (uint64_t) st.st_size > (uint64_t) max_bytes) {
        rc = ak_err_set (err, AK_ETOOBIG, "%s: %lld bytes, limit %zu",
                         path, (long long) st.st_size, max_bytes);
        goto fail;
    }
    cap = S_ISREG (st.st_mode) ? (size_t) st.st_size + 1 : 4096;
    if (cap > max_bytes + 1)
        cap = max_bytes + 1;
    buf = ak_malloc (cap + 1);
    /* Read until EOF; the file may grow or not be regular, so the limit is
       checked on what was actually read, one byte beyond it to detect more. */
    for (;;) {
        if (len == cap) {
            if (cap > max_bytes) {
                rc = ak_err_set (err, AK_ETOOBIG, "%s: more than %zu bytes", path, max_bytes);
                goto fail;
            }
            cap = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
            buf = ak_realloc (buf, cap + 1);
        }
        ssize_t n = read (fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = ak_err_set (err, AK_EIO, "%s: read: %s", path, strerror (errno));
            goto fail;
        }
        if (n == 0)
            break;
        len += (size_t) n;
        if (len > max_bytes) {
            rc = ak_err_set (err, AK_ETOOBIG, "%s: more than %zu bytes", path, max_bytes);
            goto fail;
        }
    }
    close (fd);
    buf[len] = '\0';
    *data_p = buf;
    if (len_p)
        *len_p = len;
    return 0;

fail:
    if (fd >= 0)
        close (fd);
    free (buf);
    return rc;
}

int ak_write_all (int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write (fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

/*  Writes data to a temp file next to path, fsyncs it, renames it over path
    and fsyncs the directory (best effort: some filesystems refuse).  On
    failure the temp file is removed and path is untouched. */
int ak_file_write_atomic (const char *path, const void *data, size_t len, ak_err_t *err)
{
    int rc = 0;
    int fd = -1;
    char *dir = NULL, *tmp = NULL;

    if (!path || !*path || (!data && len))
        return ak_err_set (err, AK_EINVAL, "ak_file_write_atomic: bad arguments");
    dir = ak_dirname (path);
    const char *base = strrchr (path, '/');
    base = base ? base + 1 : path;
    if (!*base) {
        rc = ak_err_set (err, AK_EINVAL, "%s: not a file name", path);
        goto fail;
    }
    tmp = ak_sprintf ("%s/.%s.XXXXXX", dir, base);
    fd = mkstemp (tmp);
    if (fd < 0) {
        rc = ak_err_set (err, AK_EIO, "%s: mkstemp: %s", tmp, strerror (errno));
        free (tmp);
        tmp = NULL;
        goto fail;
    }
    if (fchmod (fd, 0644) != 0) {
        rc = ak_err_set (err, AK_EIO, "%s: fchmod: %s", tmp, strerror (errno));
        goto fail;
    }
    if (ak_write_all (fd, data, len) != 0) {
        rc = ak_err_set (err, AK_EIO, "%s: write: %s", tmp, strerror (errno));
        goto fail;
    }
    if (fsync (fd) != 0) {
        rc = ak_err_set (err, AK_EIO, "%s: fsync: %s", tmp, strerror (errno));
        goto fail;
    }
    if (close (fd) != 0) {
        fd = -1;
        rc = ak_err_set (err, AK_EIO, "%s: close: %s", tmp, strerror (errno));
        goto fail;
    }
    fd = -1;
    if (rename (tmp, path) != 0) {
        rc = ak_err_set (err, AK_EIO, "%s: rename from %s: %s", path, tmp, strerror (errno));
        goto fail;
    }
    free (tmp);
    tmp = NULL;
    int dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void) fsync (dfd);
        close (dfd);
    }
    free (dir);
    return 0;

fail:
    if (fd >= 0)
        close (fd);
    if (tmp) {
        unlink (tmp);
        free (tmp);
    }
    free (dir);
    return rc;
}

/*  Creates path and every missing parent with mode.  An existing directory
    is fine; an existing non-directory is AK_EIO. */
int ak_mkdir_p (const char *path, int mode, ak_err_t *err)
{
    if (!path || !*path)
        return ak_err_set (err, AK_EINVAL, "ak_mkdir_p: empty path");
    char *copy = ak_strdup (path);
    int rc = 0;
    size_t n = strlen (copy);
    for (size_t i = 1; i <= n; i++) {
        if (copy[i] != '/' && copy[i] != '\0')
            continue;
        char saved = copy[i];
        copy[i] = '\0';
        if (mkdir (copy, (mode_t) mode) != 0) {
            int e = errno;
            struct stat st;
            if (e != EEXIST || stat (copy, &st) != 0 || !S_ISDIR (st.st_mode)) {
                rc = ak_err_set (err, AK_EIO, "%s: mkdir: %s", copy,
                                 e == EEXIST ? "exists and is not a directory" : strerror (e));
                break;
            }
        }
        copy[i] = saved;
    }
    free (copy);
    return rc;
}

char *ak_dirname (const char *path)
{
    if (!path || !*path)
        return ak_strdup (".");
    size_t n = strlen (path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    while (n > 0 && path[n - 1] != '/')
        n--;
    if (n == 0)
        return ak_strdup (".");
    while (n > 1 && path[n - 1] == '/')
        n--;
    char *d = ak_malloc (n + 1);
    memcpy (d, path, n);
    d[n] = '\0';
    return d;
}

static int s_rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    (void) ftw;
    remove (path);
    return 0;
}

static int s_rm_below (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    if (ftw->level > 0)
        remove (path);
    return 0;
}

void ak_rm_tree (const char *path, bool keep_top)
{
    if (path && *path && strcmp (path, "/") != 0)
        nftw (path, keep_top ? s_rm_below : s_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *ak_path_join (const char *dir, const char *rel)
{
    if (!rel)
        rel = "";
    if (rel[0] == '/' || !dir || !*dir)
        return ak_strdup (rel);
    size_t n = strlen (dir);
    if (dir[n - 1] == '/')
        return ak_sprintf ("%s%s", dir, rel);
    return ak_sprintf ("%s/%s", dir, rel);
}

/* --------------------------------------------------------------- parsing */

/*  Whole-string decimal integer (optional sign); no white space, no
    trailing characters, no overflow. */
int ak_parse_i64 (const char *text, int64_t *out)
{
    if (!text || !*text || !out)
        return AK_EINVAL;
    const char *p = text;
    if (*p == '+' || *p == '-')
        p++;
    if (*p < '0' || *p > '9')
        return AK_EINVAL;
    errno = 0;
    char *end = NULL;
    long long v = strtoll (text, &end, 10);
    if (errno == ERANGE || !end || *end != '\0')
        return AK_EINVAL;
    *out = (int64_t) v;
    return 0;
}

/*  Whole-string finite floating-point number; no white space, no trailing
    characters; "nan", "inf" and values that overflow are refused. */
int ak_parse_double (const char *text, double *out)
{
    if (!text || !*text || !out)
        return AK_EINVAL;
    const char *p = text;
    if (*p == '+' || *p == '-')
        p++;
    if (!((*p >= '0' && *p <= '9') || *p == '.'))
        return AK_EINVAL;
    errno = 0;
    char *end = NULL;
    double v = strtod (text, &end);
    if (!end || *end != '\0' || end == text)
        return AK_EINVAL;
    if (!isfinite (v))
        return AK_EINVAL;
    *out = v;
    return 0;
}

void ak_malloc_tune (char **argv)
{
    static const char tune[] = "glibc.malloc.tcache_count=16384";
    const char *off = getenv ("AK_MALLOC_TUNE");
    if ((off && strcmp (off, "0") == 0) || !argv || !argv[0])
        return;
    const char *old = getenv ("GLIBC_TUNABLES");
    if (old && strstr (old, "glibc.malloc.tcache_count="))
        return;                             /* set by the operator, or by us before the exec */
    /* the program's own path, not /proc/self/exe: the process keeps its
       name (ps, pkill) */
    char self[4096];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || (size_t) n >= sizeof self - 1)
        return;
    self[n] = '\0';
    char *saved = old ? ak_strdup (old) : NULL;
    char *value = old && *old ? ak_sprintf ("%s:%s", old, tune) : ak_strdup (tune);
    if (setenv ("GLIBC_TUNABLES", value, 1) == 0)
        execv (self, argv);
    /* still here: the exec failed; run on with glibc's defaults */
    if (saved)
        setenv ("GLIBC_TUNABLES", saved, 1);
    else
        unsetenv ("GLIBC_TUNABLES");
    free (saved);
    free (value);
}
