/*  coordinator/send.c: everything the coordinator sends (envelopes packed
    into one reusable buffer, replies to clients, DISCONNECT, heartbeats)
    and the rate-limited warnings of rejected and refused messages (see
    coord_private.h).  A send never blocks: a peer gone or with its queue
    full is counted and logged at debug, never fatal. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord_private.h"
#include "clock.h"
#include "envelope.h"
#include "log.h"
#include "util.h"

#define S_SENDBUF_KEEP     (1u << 20)   /* a larger send buffer is freed after use */

/* Hex of a routing id, for logs. */
const char *coord_hex (const void *data, size_t len, char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *d = data;
    size_t n = 0;
    for (size_t i = 0; i < len && n + 3 <= size; i++) {
        buf[n++] = hex[d[i] >> 4];
        buf[n++] = hex[d[i] & 15];
    }
    buf[n] = '\0';
    return buf;
}

/* A buffer of size bytes to pack a message into: the reusable one, grown
   up to S_SENDBUF_KEEP, or one for this message (coord_buf_done frees it). */
uint8_t *coord_buf (ak_coord_t *self, size_t size)
{
    if (size <= self->sendcap)
        return self->sendbuf;
    uint8_t *buf = ak_malloc (size);
    if (size <= S_SENDBUF_KEEP) {
        free (self->sendbuf);
        self->sendbuf = buf;
        self->sendcap = size;
    }
    return buf;
}

void coord_buf_done (ak_coord_t *self, uint8_t *buf)
{
    if (buf != self->sendbuf)
        free (buf);
}

/* Sends route + the packed envelope buf.  0, AK_EUNAVAIL or AK_EIO. */
int coord_send_frame (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, const uint8_t *buf,
                      size_t size)
{
    void *h = zsock_resolve (self->sock[ep]);
    if (zmq_send (h, route, len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 || zmq_send (h, buf, size, ZMQ_DONTWAIT) < 0)
        return zmq_errno () == EAGAIN || zmq_errno () == EHOSTUNREACH ? AK_EUNAVAIL : AK_EIO;
    return 0;
}

/* Packs env into the reusable send buffer (what ak_envelope_send does with
   a buffer per message: a malloc of an ASSIGN's size per dispatch, which
   showed in profiles) and sends route + envelope.  0, AK_ETOOBIG,
   AK_EUNAVAIL (peer gone or its queue full) or AK_EIO. */
static int s_send_packed (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, Ak__Envelope *env)
{
    size_t size = 0;
    int rc = ak_envelope_size (env, &size);
    if (rc)
        return rc;
    uint8_t *buf = coord_buf (self, size);
    rc = ak__envelope__pack (env, buf) != size ? AK_EINTERNAL : coord_send_frame (self, ep, route, len, buf, size);
    coord_buf_done (self, buf);
    return rc;
}

/* Sends env to route on endpoint ep without blocking.  0 or the
   s_send_packed code; failures are counted, never fatal. */
int coord_send (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, Ak__Envelope *env)
{
    env->seq = ++self->seq;
    int rc = s_send_packed (self, ep, route, len, env);
    if (rc) {
        char hex[64];
        self->counters.send_failures++;
        ak_debug ("%s endpoint: %s to peer %s not sent: %s", coord_ep_names[ep], ak_envelope_kind (env),
                  coord_hex (route, len, hex, sizeof hex), ak_strerror (rc));
    }
    return rc;
}

/* DISCONNECT with a code: REREGISTER asks the worker to say HELLO again,
   any other refuses it (docs/protocol.md, "Refusals"). */
void coord_send_disconnect_code (ak_coord_t *self, const void *route, size_t len, Ak__DisconnectCode code,
                                 const char *reason)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Disconnect d = AK__DISCONNECT__INIT;
    d.reason = (char *) reason;
    d.code = code;
    env.body_case = AK__ENVELOPE__BODY_DISCONNECT;
    env.disconnect = &d;
    if (coord_send (self, AK_EP_WORKERS, route, len, &env) == 0)
        self->counters.disconnects_sent++;
}

void coord_send_disconnect (ak_coord_t *self, const void *route, size_t len, const char *reason)
{
    coord_send_disconnect_code (self, route, len, AK__DISCONNECT_CODE__DISCONNECT_REREGISTER, reason);
}

void coord_send_heartbeat (ak_coord_t *self, ak_worker_t *w, uint64_t now)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    int64_t credit = ak_worker_credit (w);
    hb.credits = credit > 0 ? (uint32_t) credit : 0;
    hb.unacked = (uint32_t) ak_intake_staged_for (self->intake, w->worker_id);
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    if (coord_send (self, AK_EP_WORKERS, w->route, w->route_len, &env) == 0) {
        w->last_sent = now;
        self->counters.heartbeats++;
    }
}

void coord_reply (ak_coord_t *self, const void *route, size_t len, int code, const char *error,
                  const char *json)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientReply reply = AK__CLIENT_REPLY__INIT;
    reply.code = code;
    reply.error = (char *) (error ? error : "");
    reply.json = (char *) (json ? json : "");
    env.body_case = AK__ENVELOPE__BODY_REPLY;
    env.reply = &reply;
    ak_log_flush ();                /* what a client can see is in the log */
    if (coord_send (self, AK_EP_CLIENTS, route, len, &env) == AK_ETOOBIG) {
        reply.code = AK_ETOOBIG;
        reply.error = "the answer exceeds the 16 MiB message limit";
        reply.json = "";
        coord_send (self, AK_EP_CLIENTS, route, len, &env);
    }
}

/* Counts a rejected message and warns, at most once a second per endpoint. */
void coord_reject (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len, const char *why)
{
    uint64_t now = ak_clock_mono_ms ();
    self->counters.rejected[ep]++;
    if (self->warn_at[ep] && now < self->warn_at[ep] + AK_COORD_WARN_EVERY_MS) {
        self->suppressed[ep]++;
        return;
    }
    char hex[64], more[64] = "";
    if (self->suppressed[ep])
        snprintf (more, sizeof more, " (%llu more rejected since the last warning)",
                  (unsigned long long) self->suppressed[ep]);
    ak_warn ("%s endpoint: rejected a message from peer %s: %s%s", coord_ep_names[ep],
             coord_hex (route, len, hex, sizeof hex), why, more);
    self->warn_at[ep] = now;
    self->suppressed[ep] = 0;
}

/*  Counts (in *counter) something a worker may not do and warns, at most
    once a second, naming the peer: its routing id and, with CURVE, its key. */
void coord_refuse (ak_coord_t *self, uint64_t *counter, const void *route, size_t len, const char *why)
{
    uint64_t now = ak_clock_mono_ms ();
    (*counter)++;
    if (self->refuse_warn_at && now < self->refuse_warn_at + AK_COORD_WARN_EVERY_MS) {
        self->refuse_suppressed++;
        return;
    }
    char hex[64], more[64] = "";
    if (self->refuse_suppressed)
        snprintf (more, sizeof more, " (%llu more refused since the last warning)",
                  (unsigned long long) self->refuse_suppressed);
    ak_warn ("workers endpoint: refused from peer %s (key %s): %s%s", coord_hex (route, len, hex, sizeof hex),
             self->peer ? self->peer->name : "none, plain mode", why, more);
    self->refuse_warn_at = now;
    self->refuse_suppressed = 0;
}
