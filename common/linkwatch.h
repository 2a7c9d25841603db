/*  common/linkwatch.h: the client side of a link to the coordinator.

    What akworker, akload and akctl share about their DEALER to akcoord:

    - The handshake monitor.  A refused CURVE handshake looks like silence
      at the application: ZeroMQ delivers nothing and, after an explicit
      refusal, does not even reconnect.  libzmq's socket monitor
      (zmq_socket_monitor over inproc) says what happened: handshake
      succeeded, refused by the server's ZAP handler (status 400: the key is
      not in its key directory for this endpoint), a protocol error (one
      side CURVE, the other plain; a broken handshake), or failed without
      detail (the server closed the connection mid-handshake: typically a
      wrong server key, which the server cannot even read).
    - The reconnect backoff: a delay that doubles from min to max, each
      wait drawn at random from [delay/2, delay] so that a thousand workers
      that lost the coordinator at once do not come back at once.
    - The liveness rule: a link is dead after `liveness` heartbeat
      intervals of silence, counted from the handshake's success (or the
      first message, whichever is seen first), never from the connect: a
      handshake that waits its turn on a coordinator busy with a thousand
      others is not silence.  libzmq bounds a handshake itself
      (ZMQ_HANDSHAKE_IVL, 30 s) and retries it.

    The backoff and the liveness rule are pure functions (tests/unit/test_link.c).

    Never: block (every read here is non-blocking); treat a handshake
    failure without detail as a refusal of the key (it is also what a
    coordinator that stops mid-handshake looks like). */
#ifndef AK_LINK_H
#define AK_LINK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"

/* ------------------------------------------------------ handshake monitor */

typedef enum {
    AK_HS_NONE = 0,
    AK_HS_OK,                  /* handshake succeeded */
    AK_HS_AUTH,                /* refused by the server's ZAP handler; value: its status (400) */
    AK_HS_PROTOCOL,            /* protocol error; value: ZMQ_PROTOCOL_ERROR_* */
    AK_HS_NO_DETAIL,           /* failed without detail; value: errno */
} ak_hs_kind_t;

typedef struct {
    ak_hs_kind_t kind;
    uint32_t     value;
} ak_hs_event_t;

typedef struct ak_hsmon ak_hsmon_t;

/*  Monitors the handshakes of the ZeroMQ socket handle (a raw handle, not
    a zsock_t) through a PAIR in ctx (NULL: CZMQ's context, which zsock_t
    sockets live in; the monitored socket must be in the same context).
    Destroy it before closing the socket. */
int  ak_hsmon_new (void *ctx, void *handle, ak_hsmon_t **self_p, ak_err_t *err);
void ak_hsmon_destroy (ak_hsmon_t **self_p);
/* The PAIR's raw handle, to poll (ZMQ_POLLIN) or for its ZMQ_FD. */
void *ak_hsmon_handle (ak_hsmon_t *self);
/* The next handshake event without waiting: 1 with *ev, 0 when none waits,
   AK_EIO when the monitor broke. */
int  ak_hsmon_next (ak_hsmon_t *self, ak_hs_event_t *ev);

/* True for what the server decided (AUTH, PROTOCOL): trying again with the
   same key and settings gets the same answer. */
bool ak_hs_refused (const ak_hs_event_t *ev);
/* What ev means for an operator, into buf ("the coordinator refused this
   key (ZAP status 400: ...)"); curve: this peer uses CURVE (a certificate),
   which decides what a handshake closed without detail hints at.  Returns
   buf. */
const char *ak_hs_describe (const ak_hs_event_t *ev, bool curve, char *buf, size_t len);

/* --------------------------------------------------------------- backoff */

/* The delay after delay_ms: doubled, within [min_ms, max_ms]. */
uint32_t ak_backoff_next (uint32_t delay_ms, uint32_t min_ms, uint32_t max_ms);
/* The wait for delay_ms with jitter: delay/2 + r mod (delay/2 + 1), so
   uniform in [delay/2, delay] for a uniform r. */
uint32_t ak_backoff_jitter (uint32_t delay_ms, uint32_t r);

/* -------------------------------------------------------------- liveness */

typedef struct {
    bool     up;               /* handshake succeeded or a message came on this socket */
    uint64_t since_ms;         /* the last of those (monotonic ms) */
} ak_liveness_t;

/* A new socket: not up, nothing counts yet. */
void ak_liveness_reset (ak_liveness_t *l);
/* The handshake succeeded or a message came at now. */
void ak_liveness_heard (ak_liveness_t *l, uint64_t now);
/* Dead: up, and silent for more than liveness * heartbeat_ms.  A link not
   up yet is never dead. */
bool ak_liveness_dead (const ak_liveness_t *l, uint64_t now, uint32_t heartbeat_ms, uint32_t liveness);

#endif
