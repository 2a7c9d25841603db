/*  worker/frame.c: length-prefixed frames on a stream socket. */
#include "frame.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int s_write_all (int fd, const uint8_t *p, size_t len, ak_err_t *err)
{
    while (len > 0) {
        ssize_t n = send (fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return ak_err_set (err, AK_ETIMEOUT, "frame write: peer not reading");
            return ak_err_set (err, AK_EIO, "frame write: %s", strerror (errno));
        }
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

int ak_frame_write (int fd, const void *data, size_t len, ak_err_t *err)
{
    if (len > UINT32_MAX)
        return ak_err_set (err, AK_ETOOBIG, "frame write: %zu bytes", len);
    uint8_t hdr[4] = { (uint8_t) (len >> 24), (uint8_t) (len >> 16),
                       (uint8_t) (len >> 8), (uint8_t) len };
    int rc = s_write_all (fd, hdr, 4, err);
    if (rc)
        return rc;
    return s_write_all (fd, data, len, err);
}

/*  Reads exactly len bytes; *got tells how many came before an end of stream. */
static int s_read_all (int fd, uint8_t *p, size_t len, size_t *got, ak_err_t *err)
{
    *got = 0;
    while (*got < len) {
        ssize_t n = read (fd, p + *got, len - *got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return ak_err_set (err, AK_EIO, "frame read: %s", strerror (errno));
        }
        if (n == 0)
            return ak_err_set (err, AK_EIO, "frame read: end of stream");
        *got += (size_t) n;
    }
    return 0;
}

int ak_frame_read (int fd, size_t max, uint8_t **data_p, size_t *len_p, ak_err_t *err)
{
    uint8_t hdr[4];
    size_t got = 0;
    *data_p = NULL;
    *len_p = 0;
    int rc = s_read_all (fd, hdr, 4, &got, err);
    if (rc) {
        if (got > 0)
            ak_err_set (err, AK_EIO, "frame read: torn header");
        return rc;
    }
    size_t len = ((size_t) hdr[0] << 24) | ((size_t) hdr[1] << 16) | ((size_t) hdr[2] << 8) | hdr[3];
    if (len > max)
        return ak_err_set (err, AK_ETOOBIG, "frame read: %zu bytes, limit %zu", len, max);
    uint8_t *buf = ak_malloc (len ? len : 1);
    rc = s_read_all (fd, buf, len, &got, err);
    if (rc) {
        free (buf);
        return ak_err_set (err, AK_EIO, "frame read: torn frame (%zu of %zu bytes)", got, len);
    }
    *data_p = buf;
    *len_p = len;
    return 0;
}

void ak_frame_reader_init (ak_frame_reader_t *r, size_t max)
{
    memset (r, 0, sizeof *r);
    r->max = max;
}

void ak_frame_reader_reset (ak_frame_reader_t *r)
{
    free (r->buf);
    size_t max = r->max;
    ak_frame_reader_init (r, max);
}

int ak_frame_reader_feed (ak_frame_reader_t *r, int fd, uint8_t **data_p, size_t *len_p, ak_err_t *err)
{
    *data_p = NULL;
    *len_p = 0;
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (r->hdr_got < 4) {
            dst = r->hdr + r->hdr_got;
            want = 4 - r->hdr_got;
        }
        else {
            dst = r->buf + r->got;
            want = r->len - r->got;
        }
        ssize_t n = want ? recv (fd, dst, want, MSG_DONTWAIT) : 0;
        if (want && n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return ak_err_set (err, AK_EIO, "frame read: %s", strerror (errno));
        }
        if (want && n == 0)
            return ak_err_set (err, AK_EIO, "frame read: end of stream");
        if (r->hdr_got < 4) {
            r->hdr_got += (size_t) n;
            if (r->hdr_got < 4)
                continue;
            r->len = ((size_t) r->hdr[0] << 24) | ((size_t) r->hdr[1] << 16)
                   | ((size_t) r->hdr[2] << 8) | r->hdr[3];
            if (r->len > r->max)
                return ak_err_set (err, AK_ETOOBIG, "frame read: %zu bytes, limit %zu", r->len, r->max);
            r->buf = ak_malloc (r->len ? r->len : 1);
            r->got = 0;
        }
        else
            r->got += (size_t) n;
        if (r->got == r->len) {
            *data_p = r->buf;
            *len_p = r->len;
            r->buf = NULL;
            r->hdr_got = 0;
            r->len = r->got = 0;
            return 1;
        }
    }
}
