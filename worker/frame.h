/*  worker/frame.h: length-prefixed frames on a stream socket.

    The daemon and its executors talk over a socketpair: each message is a
    4-byte big-endian length followed by that many bytes (a packed ExecJob or
    Receipt).  Lengths are bounded by the reader, so a confused or hostile
    peer can at worst be disconnected, never make the reader allocate
    without limit. */
#ifndef AK_WORKER_FRAME_H
#define AK_WORKER_FRAME_H
#include <stddef.h>
#include <stdint.h>
#include "error.h"

/* Writes one frame, blocking (partial writes and EINTR handled).  A send
   timeout set on fd (SO_SNDTIMEO) bounds it: AK_ETIMEOUT.  AK_EIO otherwise. */
int ak_frame_write (int fd, const void *data, size_t len, ak_err_t *err);

/* Reads one frame, blocking.  *data_p is the caller's to free.  AK_EIO with
   "end of stream" when the peer closed before a frame began (err->msg says
   so), AK_ETOOBIG when the length exceeds max, AK_EIO for a torn frame. */
int ak_frame_read (int fd, size_t max, uint8_t **data_p, size_t *len_p, ak_err_t *err);

/* Incremental reader for a socket polled by an event loop: it never blocks
   (MSG_DONTWAIT), whatever the socket's own mode. */
typedef struct {
    uint8_t  hdr[4];
    size_t   hdr_got;
    uint8_t *buf;
    size_t   len, got;
    size_t   max;
} ak_frame_reader_t;

void ak_frame_reader_init (ak_frame_reader_t *r, size_t max);
void ak_frame_reader_reset (ak_frame_reader_t *r);   /* frees a partial frame */

/* Reads what is available.  Returns 1 with *data_p (caller frees) when a
   whole frame arrived, 0 when more is needed, AK_EIO on end of stream or a
   read error, AK_ETOOBIG on an oversized length. */
int ak_frame_reader_feed (ak_frame_reader_t *r, int fd, uint8_t **data_p, size_t *len_p, ak_err_t *err);

#endif
