/*  coordinator/storelock.c: one coordinator per store (see storelock.h). */
#include "storelock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

struct ak_storelock {
    int   fd;
    char *path;
};

/* The pid the lock's holder wrote into the file, or 0. */
static long s_written_pid (int fd)
{
    char buf[32];
    ssize_t n = pread (fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long pid = strtol (buf, NULL, 10);
    return pid > 0 ? pid : 0;
}

int ak_storelock_take (const char *store_dir, ak_storelock_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    int rc = ak_mkdir_p (store_dir, 0700, err);
    if (rc)
        return ak_err_prefix (err, "store %s", store_dir);
    char *path = ak_path_join (store_dir, AK_STORELOCK_FILE);
    int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = ak_err_set (err, AK_EIO, "store %s: cannot open its lock file %s: %s", store_dir, path,
                         strerror (errno));
        free (path);
        return rc;
    }
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    if (fcntl (fd, F_SETLK, &fl) != 0) {
        int e = errno;
        if (e == EACCES || e == EAGAIN) {
            struct flock who = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
            long pid = fcntl (fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK && who.l_pid > 0
                     ? (long) who.l_pid : s_written_pid (fd);
            char holder[48] = "pid unknown";
            if (pid)
                snprintf (holder, sizeof holder, "pid %ld", pid);
            rc = ak_err_set (err, AK_EEXIST, "store %s is in use by another akcoord (%s, holding %s): "
                             "one coordinator per store; stop it first, or give this one another --store",
                             store_dir, holder, path);
        }
        else
            rc = ak_err_set (err, AK_EIO, "store %s: cannot lock %s: %s", store_dir, path, strerror (e));
        close (fd);
        free (path);
        return rc;
    }
    char text[32];
    int n = snprintf (text, sizeof text, "%ld\n", (long) getpid ());
    if (ftruncate (fd, 0) != 0 || pwrite (fd, text, (size_t) n, 0) != n) {
        rc = ak_err_set (err, AK_EIO, "store %s: cannot write %s: %s", store_dir, path, strerror (errno));
        close (fd);
        free (path);
        return rc;
    }
    ak_storelock_t *self = ak_calloc (1, sizeof *self);
    self->fd = fd;
    self->path = path;
    *self_p = self;
    return 0;
}

void ak_storelock_release (ak_storelock_t **self_p)
{
    if (self_p && *self_p) {
        ak_storelock_t *self = *self_p;
        close (self->fd);
        free (self->path);
        free (self);
        *self_p = NULL;
    }
}
