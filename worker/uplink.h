/*  worker/uplink.h: the daemon's connection to the coordinator.

    Owns the DEALER to the coordinator's worker endpoint (CURVE when a
    certificate is configured), its handshake monitor (common/linkwatch.h), the
    coordinator's liveness, the reconnect backoff and the count of
    refusals.  The daemon sends and receives on ak_uplink_socket and tells
    the uplink what it heard; each tick the uplink says whether a new
    socket is up (say HELLO), the link was lost, or the coordinator refused
    this worker too often (stop, exit 3).

    - Liveness counts from the handshake's success, never from the
      connect: a thousand workers handshaking with one coordinator at once
      wait their turn instead of giving up and starting over.
    - Every reconnect waits a delay doubling from min to max backoff, drawn
      at random from [delay/2, delay]; libzmq's own TCP retries on a socket
      waiting for its handshake use the same bounds (ZMQ_RECONNECT_IVL,
      _MAX; libzmq adds its own jitter).
    - A refusal (the handshake refused by the coordinator's key check, or
      a DISCONNECT with a refusal code) is logged at ERROR with its reason,
      and after max_refusals of them with no registration between, the
      daemon stops.  A handshake that fails without detail (a wrong
      --server-key, or a coordinator stopping mid-handshake) is logged at
      ERROR but not counted.

    Never: send or read application messages (the daemon does); block. */
#ifndef AK_WORKER_UPLINK_H
#define AK_WORKER_UPLINK_H
#include <stdbool.h>
#include <stdint.h>
#include <czmq.h>
#include "error.h"

typedef struct {
    const char *endpoint;
    const char *cert_file;         /* NULL: plain */
    const char *server_key;
    uint32_t    heartbeat_ms;
    uint32_t    liveness;
    uint32_t    min_backoff_ms;
    uint32_t    max_backoff_ms;
    uint32_t    linger_ms;
    uint32_t    max_refusals;      /* 0: never stop */
} ak_uplink_config_t;

typedef enum {
    AK_UPLINK_IDLE = 0,            /* nothing new */
    AK_UPLINK_CONNECTED,           /* a new socket: say HELLO, send every unacked receipt again */
    AK_UPLINK_LOST,                /* the socket was closed; a new one comes after the backoff */
    AK_UPLINK_REFUSED,             /* refused max_refusals times in a row: stop (err says why) */
} ak_uplink_event_t;

typedef struct ak_uplink ak_uplink_t;

/* The configuration is copied.  No socket yet: the first tick connects. */
ak_uplink_t *ak_uplink_new (const ak_uplink_config_t *cfg);
/* Closes the socket (linger bounded). */
void ak_uplink_destroy (ak_uplink_t **self_p);

/* The connected socket, or NULL while waiting to reconnect. */
zsock_t *ak_uplink_socket (ak_uplink_t *self);
/* True once the current socket's handshake succeeded (or a message came):
   heartbeats before that would only queue up behind the HELLO. */
bool ak_uplink_up (ak_uplink_t *self);

/* Reads the handshake monitor, checks liveness, connects when due. */
ak_uplink_event_t ak_uplink_tick (ak_uplink_t *self, uint64_t now, ak_err_t *err);
/* A message came at now: the coordinator is alive and the backoff starts
   over; accepted (any message but a DISCONNECT) also clears the count of
   refusals. */
void ak_uplink_heard (ak_uplink_t *self, uint64_t now, bool accepted);
/* The coordinator refused this worker (why: its reason): logged at ERROR,
   the socket closed; LOST, or REFUSED once max_refusals is reached. */
ak_uplink_event_t ak_uplink_refused (ak_uplink_t *self, const char *why, uint64_t now, ak_err_t *err);

#endif
