/*  worker/uplink.c: the daemon's connection to the coordinator (uplink.h). */
#include "uplink.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "envelope.h"
#include "linkwatch.h"
#include "log.h"
#include "util.h"

#define S_HWM 10000

struct ak_uplink {
    ak_uplink_config_t cfg;        /* its strings point at the copies below */
    char          *endpoint, *cert_file, *server_key;
    zsock_t       *sock;
    ak_hsmon_t    *mon;
    ak_liveness_t  live;
    uint32_t       backoff_ms;     /* the next delay, before jitter */
    uint64_t       next_connect_ms;
    uint64_t       connected_ms;   /* the current socket was made */
    uint64_t       warn_ms;        /* next "no handshake yet" warning */
    uint32_t       refusals;       /* in a row, since the last registration */
    bool           given_up;       /* refused max_refusals times: no more sockets */
};

ak_uplink_t *ak_uplink_new (const ak_uplink_config_t *cfg)
{
    ak_uplink_t *self = ak_calloc (1, sizeof *self);
    self->cfg = *cfg;
    self->endpoint = ak_strdup (cfg->endpoint);
    self->cert_file = cfg->cert_file ? ak_strdup (cfg->cert_file) : NULL;
    self->server_key = cfg->server_key ? ak_strdup (cfg->server_key) : NULL;
    self->cfg.endpoint = self->endpoint;
    self->cfg.cert_file = self->cert_file;
    self->cfg.server_key = self->server_key;
    if (!self->cfg.min_backoff_ms)
        self->cfg.min_backoff_ms = 1000;
    if (self->cfg.max_backoff_ms < self->cfg.min_backoff_ms)
        self->cfg.max_backoff_ms = self->cfg.min_backoff_ms;
    self->backoff_ms = self->cfg.min_backoff_ms;
    ak_liveness_reset (&self->live);
    return self;
}

static void s_close (ak_uplink_t *self)
{
    ak_hsmon_destroy (&self->mon);
    if (self->sock) {
        zsock_set_linger (self->sock, (int) self->cfg.linger_ms);
        zsock_destroy (&self->sock);
    }
    ak_liveness_reset (&self->live);
}

void ak_uplink_destroy (ak_uplink_t **self_p)
{
    if (self_p && *self_p) {
        ak_uplink_t *self = *self_p;
        s_close (self);
        free (self->endpoint);
        free (self->cert_file);
        free (self->server_key);
        free (self);
        *self_p = NULL;
    }
}

zsock_t *ak_uplink_socket (ak_uplink_t *self)
{
    return self->sock;
}

bool ak_uplink_up (ak_uplink_t *self)
{
    return self->sock && self->live.up;
}

/* Closes the socket and schedules the next one after the jittered backoff,
   which then doubles; returns the wait. */
static uint32_t s_later (ak_uplink_t *self, uint64_t now)
{
    s_close (self);
    uint32_t wait = ak_backoff_jitter (self->backoff_ms, randombytes_random ());
    self->next_connect_ms = now + wait;
    self->backoff_ms = ak_backoff_next (self->backoff_ms, self->cfg.min_backoff_ms, self->cfg.max_backoff_ms);
    return wait;
}

static int s_sockopt (void *h, int opt, int value, const char *name, ak_err_t *err)
{
    if (zmq_setsockopt (h, opt, &value, sizeof value) != 0)
        return ak_err_set (err, AK_EIO, "zmq_setsockopt %s: %s", name, zmq_strerror (zmq_errno ()));
    return 0;
}

/* A new DEALER with its monitor, connecting (the handshake follows). */
static int s_open (ak_uplink_t *self, uint64_t now, ak_err_t *err)
{
    self->sock = zsock_new (ZMQ_DEALER);
    if (!self->sock)
        return ak_err_set (err, AK_EIO, "cannot create a ZeroMQ socket: %s", zmq_strerror (zmq_errno ()));
    void *h = zsock_resolve (self->sock);
    int64_t max = AK_MAX_MSG_SIZE;
    int rc = s_sockopt (h, ZMQ_LINGER, (int) self->cfg.linger_ms, "ZMQ_LINGER", err);
    if (!rc)
        rc = s_sockopt (h, ZMQ_SNDHWM, S_HWM, "ZMQ_SNDHWM", err);
    if (!rc)
        rc = s_sockopt (h, ZMQ_RCVHWM, S_HWM, "ZMQ_RCVHWM", err);
    if (!rc)
        rc = s_sockopt (h, ZMQ_RECONNECT_IVL, (int) self->cfg.min_backoff_ms, "ZMQ_RECONNECT_IVL", err);
    if (!rc)
        rc = s_sockopt (h, ZMQ_RECONNECT_IVL_MAX, (int) self->cfg.max_backoff_ms, "ZMQ_RECONNECT_IVL_MAX", err);
    if (!rc && zmq_setsockopt (h, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0)
        rc = ak_err_set (err, AK_EIO, "zmq_setsockopt ZMQ_MAXMSGSIZE: %s", zmq_strerror (zmq_errno ()));
    if (!rc && (rc = ak_auth_client_setup (h, self->cfg.cert_file, self->cfg.server_key, err)) != 0)
        ak_err_prefix (err, "CURVE");
    if (!rc)
        rc = ak_hsmon_new (NULL, h, &self->mon, err);
    if (!rc && zmq_connect (h, self->cfg.endpoint) != 0)
        rc = ak_err_set (err, AK_EIO, "connect %s: %s", self->cfg.endpoint, zmq_strerror (zmq_errno ()));
    if (rc)
        return rc;
    self->connected_ms = now;
    self->warn_ms = now + (uint64_t) self->cfg.liveness * self->cfg.heartbeat_ms;
    return 0;
}

ak_uplink_event_t ak_uplink_refused (ak_uplink_t *self, const char *why, uint64_t now, ak_err_t *err)
{
    self->refusals++;
    if (self->cfg.max_refusals && self->refusals >= self->cfg.max_refusals) {
        s_close (self);
        self->given_up = true;
        ak_err_set (err, AK_EDENIED, "coordinator %s refused this worker %u times in a row, stopping: %s",
                    self->endpoint, self->refusals, why);
        return AK_UPLINK_REFUSED;
    }
    uint32_t wait = s_later (self, now);
    if (self->cfg.max_refusals)
        ak_error ("%s: %s (refusal %u of %u before this worker stops; trying again in %u ms)",
                  self->endpoint, why, self->refusals, self->cfg.max_refusals, wait);
    else
        ak_error ("%s: %s (refusal %u; trying again in %u ms)", self->endpoint, why,
                  self->refusals, wait);
    return AK_UPLINK_LOST;
}

void ak_uplink_heard (ak_uplink_t *self, uint64_t now, bool accepted)
{
    ak_liveness_heard (&self->live, now);
    self->backoff_ms = self->cfg.min_backoff_ms;
    if (accepted)
        self->refusals = 0;
}

/*  What the monitor saw since the last tick: a success starts the
    liveness clock, a refusal counts, a failure without detail closes the
    socket (libzmq would retry it at its own pace; ours backs off). */
static ak_uplink_event_t s_handshakes (ak_uplink_t *self, uint64_t now, ak_err_t *err)
{
    ak_hs_event_t ev;
    int n;
    while (self->mon && (n = ak_hsmon_next (self->mon, &ev)) != 0) {
        char why[512];
        if (n < 0) {
            ak_warn ("coordinator %s: the handshake monitor broke: reconnecting", self->endpoint);
            s_later (self, now);
            return AK_UPLINK_LOST;
        }
        if (ev.kind == AK_HS_OK) {
            ak_debug ("coordinator %s: handshake succeeded after %" PRIu64 " ms", self->endpoint,
                      now - self->connected_ms);
            ak_liveness_heard (&self->live, now);
            continue;
        }
        ak_hs_describe (&ev, self->cfg.cert_file != NULL, why, sizeof why);
        if (ak_hs_refused (&ev))
            return ak_uplink_refused (self, why, now, err);
        uint32_t wait = s_later (self, now);
        ak_error ("%s: %s (trying again in %u ms)", self->endpoint, why, wait);
        return AK_UPLINK_LOST;
    }
    return AK_UPLINK_IDLE;
}

ak_uplink_event_t ak_uplink_tick (ak_uplink_t *self, uint64_t now, ak_err_t *err)
{
    if (!self->sock) {
        if (self->given_up || now < self->next_connect_ms)
            return AK_UPLINK_IDLE;
        ak_err_t oerr = { 0 };
        if (s_open (self, now, &oerr) != 0) {
            uint32_t wait = s_later (self, now);
            ak_error ("%s: %s (trying again in %u ms)", self->endpoint, oerr.msg, wait);
            return AK_UPLINK_IDLE;
        }
        return AK_UPLINK_CONNECTED;
    }
    ak_uplink_event_t ev = s_handshakes (self, now, err);
    if (ev != AK_UPLINK_IDLE)
        return ev;
    if (ak_liveness_dead (&self->live, now, self->cfg.heartbeat_ms, self->cfg.liveness)) {
        uint64_t silent = now - self->live.since_ms;
        uint32_t wait = s_later (self, now);
        ak_warn ("coordinator %s silent for %" PRIu64 " ms: reconnecting in %u ms", self->endpoint, silent,
                 wait);
        return AK_UPLINK_LOST;
    }
    if (!self->live.up && now >= self->warn_ms) {
        uint64_t waited = now - self->connected_ms;
        ak_warn ("coordinator %s: no handshake yet after %" PRIu64 " ms (is akcoord running there? "
                 "ZeroMQ keeps trying)", self->endpoint, waited);
        self->warn_ms = now + (waited < self->cfg.max_backoff_ms ? waited : self->cfg.max_backoff_ms);
    }
    return AK_UPLINK_IDLE;
}
