/*  common/linkwatch.c: handshake monitor, reconnect backoff and liveness rule
    of a link to the coordinator (link.h). */
#include "linkwatch.h"

#include <czmq.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define S_EVENTS (ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL \
                  | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

struct ak_hsmon {
    void *handle;              /* the monitored socket (borrowed) */
    void *pair;                /* our end of the monitor */
};

static atomic_uint s_monitors;

int ak_hsmon_new (void *ctx, void *handle, ak_hsmon_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    if (!ctx)
        ctx = zsys_init ();
    char ep[64];
    snprintf (ep, sizeof ep, "inproc://ak-hsmon-%d-%u", (int) getpid (), atomic_fetch_add (&s_monitors, 1));
    if (zmq_socket_monitor (handle, ep, S_EVENTS) != 0)
        return ak_err_set (err, AK_EIO, "zmq_socket_monitor: %s", zmq_strerror (zmq_errno ()));
    void *pair = zmq_socket (ctx, ZMQ_PAIR);
    int zero = 0;
    if (!pair || zmq_setsockopt (pair, ZMQ_LINGER, &zero, sizeof zero) != 0 || zmq_connect (pair, ep) != 0) {
        int rc = ak_err_set (err, AK_EIO, "handshake monitor %s: %s", ep, zmq_strerror (zmq_errno ()));
        /* cleanup of what did open: their failures add nothing to err */
        if (pair)
            (void) zmq_close (pair);
        (void) zmq_socket_monitor (handle, NULL, 0);
        return rc;
    }
    ak_hsmon_t *self = ak_calloc (1, sizeof *self);
    self->handle = handle;
    self->pair = pair;
    *self_p = self;
    return 0;
}

void ak_hsmon_destroy (ak_hsmon_t **self_p)
{
    if (self_p && *self_p) {
        ak_hsmon_t *self = *self_p;
        /* both only fail on a handle that is not a socket (a bug) */
        if (zmq_socket_monitor (self->handle, NULL, 0) != 0)
            ak_error ("zmq_socket_monitor (stop): %s", zmq_strerror (zmq_errno ()));
        if (zmq_close (self->pair) != 0)
            ak_error ("zmq_close (monitor): %s", zmq_strerror (zmq_errno ()));
        free (self);
        *self_p = NULL;
    }
}

void *ak_hsmon_handle (ak_hsmon_t *self)
{
    return self->pair;
}

/*  One monitor message: a frame of 6 bytes (event: uint16, value: uint32,
    native order), then a frame with the endpoint, which is dropped. */
int ak_hsmon_next (ak_hsmon_t *self, ak_hs_event_t *ev)
{
    memset (ev, 0, sizeof *ev);
    for (;;) {
        uint8_t head[6];
        int n = zmq_recv (self->pair, head, sizeof head, ZMQ_DONTWAIT);
        if (n < 0)
            return zmq_errno () == EAGAIN || zmq_errno () == EINTR ? 0 : AK_EIO;
        int more = 0;
        size_t len = sizeof more;
        if (zmq_getsockopt (self->pair, ZMQ_RCVMORE, &more, &len) != 0)
            return AK_EIO;
        while (more) {
            char tail[256];
            if (zmq_recv (self->pair, tail, sizeof tail, ZMQ_DONTWAIT) < 0
                || zmq_getsockopt (self->pair, ZMQ_RCVMORE, &more, &len) != 0)
                return AK_EIO;
        }
        if (n != (int) sizeof head)
            continue;
        uint16_t event;
        uint32_t value;
        memcpy (&event, head, sizeof event);
        memcpy (&value, head + 2, sizeof value);
        ev->value = value;
        switch (event) {
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:      ev->kind = AK_HS_OK; return 1;
            case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:     ev->kind = AK_HS_AUTH; return 1;
            case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: ev->kind = AK_HS_PROTOCOL; return 1;
            case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: ev->kind = AK_HS_NO_DETAIL; return 1;
            default: continue;          /* MONITOR_STOPPED and the like */
        }
    }
}

bool ak_hs_refused (const ak_hs_event_t *ev)
{
    return ev->kind == AK_HS_AUTH || ev->kind == AK_HS_PROTOCOL;
}

const char *ak_hs_describe (const ak_hs_event_t *ev, bool curve, char *buf, size_t len)
{
    switch (ev->kind) {
        case AK_HS_OK:
            snprintf (buf, len, "handshake succeeded");
            break;
        case AK_HS_AUTH:
            if (ev->value == 400)
                snprintf (buf, len, "the coordinator refused this key (ZAP status 400: the key is not in "
                          "its key directory for this endpoint; workers need a worker key, akctl an "
                          "operator or viewer key)");
            else
                snprintf (buf, len, "the coordinator refused this key (ZAP status %u)", ev->value);
            break;
        case AK_HS_PROTOCOL:
            if (ev->value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
                snprintf (buf, len, "the coordinator refused the handshake: one side uses CURVE and the "
                          "other does not (a certificate without akcoord --cert, or none with it: check "
                          "--cert and --server-key)");
            else if (ev->value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
                snprintf (buf, len, "the coordinator refused the handshake: a cryptographic error "
                          "(check that --server-key is the coordinator's public key)");
            else
                snprintf (buf, len, "the coordinator refused the handshake (protocol error 0x%08x)",
                          ev->value);
            break;
        case AK_HS_NO_DETAIL:
            /* the server drops a handshake it cannot read, and one of the
               other mechanism, before the client may learn why */
            if (curve)
                snprintf (buf, len, "the coordinator closed the connection during the handshake (%s): it "
                          "could not read this peer's CURVE handshake: --server-key is not the "
                          "coordinator's public key, or the coordinator runs without CURVE (--plain)",
                          ev->value ? strerror ((int) ev->value) : "no error");
            else
                snprintf (buf, len, "the coordinator closed the connection during the handshake (%s): it "
                          "expects CURVE: give --cert and --server-key (AK_CERT, AK_SERVER_KEY)",
                          ev->value ? strerror ((int) ev->value) : "no error");
            break;
        default:
            snprintf (buf, len, "no handshake event");
            break;
    }
    return buf;
}

/* =============================================================== backoff */

uint32_t ak_backoff_next (uint32_t delay_ms, uint32_t min_ms, uint32_t max_ms)
{
    if (max_ms < min_ms)
        max_ms = min_ms;
    uint64_t next = (uint64_t) delay_ms * 2;
    if (next < min_ms)
        next = min_ms;
    return next > max_ms ? max_ms : (uint32_t) next;
}

uint32_t ak_backoff_jitter (uint32_t delay_ms, uint32_t r)
{
    uint32_t lo = delay_ms - delay_ms / 2;          /* delay/2, rounded up */
    return lo + r % (delay_ms - lo + 1);
}

/* ============================================================== liveness */

void ak_liveness_reset (ak_liveness_t *l)
{
    l->up = false;
    l->since_ms = 0;
}

void ak_liveness_heard (ak_liveness_t *l, uint64_t now)
{
    l->up = true;
    l->since_ms = now;
}

bool ak_liveness_dead (const ak_liveness_t *l, uint64_t now, uint32_t heartbeat_ms, uint32_t liveness)
{
    return l->up && now > l->since_ms && now - l->since_ms > (uint64_t) liveness * heartbeat_ms;
}
