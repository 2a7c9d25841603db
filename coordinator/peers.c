/*  coordinator/peers.c: the peers behind the routing ids (see
    coord_private.h): malformed frames counted per peer and a peer dropped
    at opts.malformed_max, the key of each message checked against the ring
    (CURVE), the ZAP handler's answers, and the key ring re-read on SIGHUP
    or when a role directory changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coord_private.h"
#include "clock.h"
#include "log.h"

#define S_PEERS_MAX        65536        /* peers tracked for malformed frames / dropped */

// ======================================================== malformed frames

/* The key a peer's routing id is tracked under: "w:HEX" or "c:HEX". */
static void s_peer_key (ak_ep_t ep, const void *route, size_t len, char *buf, size_t size)
{
    buf[0] = ep == AK_EP_WORKERS ? 'w' : 'c';
    buf[1] = ':';
    coord_hex (route, len, buf + 2, size - 2);
}

/* Warns about a refused handshake or message, at most once a second. */
static void s_auth_warn (ak_coord_t *self, const char *fmt, const char *a, const char *b)
{
    uint64_t now = ak_clock_mono_ms ();
    if (self->auth_warn_at && now < self->auth_warn_at + AK_COORD_WARN_EVERY_MS) {
        self->auth_suppressed++;
        return;
    }
    char msg[512];
    snprintf (msg, sizeof msg, fmt, a, b);
    if (self->auth_suppressed)
        ak_warn ("%s (%llu more refused since the last warning)", msg,
                 (unsigned long long) self->auth_suppressed);
    else
        ak_warn ("%s", msg);
    self->auth_warn_at = now;
    self->auth_suppressed = 0;
}

/*  Counts one malformed frame from a peer; at opts.malformed_max the peer
    is dropped: a registered worker is declared dead and every later frame
    of that routing id is ignored (counted as rejected).  ZeroMQ cannot
    close one connection of a ROUTER; a peer that reconnects gets a new
    routing id and starts from zero. */
void coord_malformed (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len)
{
    char key[2 + 2 * AK_ROUTE_MAX + 1];
    s_peer_key (ep, route, len, key, sizeof key);
    uintptr_t n = (uintptr_t) zhashx_lookup (self->malformed, key) + 1;
    if (n < self->opts.malformed_max) {
        if (zhashx_size (self->malformed) >= S_PEERS_MAX)
            zhashx_purge (self->malformed);
        zhashx_update (self->malformed, key, (void *) n);
        return;
    }
    zhashx_delete (self->malformed, key);
    if (zhashx_size (self->dropped) >= S_PEERS_MAX)
        zhashx_purge (self->dropped);
    zhashx_update (self->dropped, key, (void *) 1);
    self->counters.peers_dropped++;
    char num[32];
    snprintf (num, sizeof num, "%u", self->opts.malformed_max);
    ak_warn ("%s endpoint: peer %s dropped after %s malformed frames", coord_ep_names[ep], key + 2, num);
    if (ep == AK_EP_WORKERS)
        coord_drop_worker (self, ak_registry_by_route (self->registry, route, len),
                           AK__DISCONNECT_CODE__DISCONNECT_REREGISTER, "dropped: too many malformed frames");
}

bool coord_peer_dropped (ak_coord_t *self, ak_ep_t ep, const void *route, size_t len)
{
    if (zhashx_size (self->dropped) == 0)
        return false;
    char key[2 + 2 * AK_ROUTE_MAX + 1];
    s_peer_key (ep, route, len, key, sizeof key);
    return zhashx_lookup (self->dropped, key) != NULL;
}

// =================================================================== CURVE

/*  With CURVE: the key of the connection body came on (the ZAP handler
    made it the User-Id) must still be in the ring with a role for ep.  A
    key revoked since the handshake gets nothing; its worker is dropped. */
bool coord_authorised (ak_coord_t *self, ak_ep_t ep, zmq_msg_t *body, const void *route, size_t len)
{
    self->peer = NULL;
    if (!self->ring)
        return true;
    const char *uid = zmq_msg_gets (body, "User-Id");
    const ak_key_t *k = uid ? ak_keyring_find (self->ring, uid) : NULL;
    if (k && (ep == AK_EP_WORKERS) == (k->role == AK_ROLE_WORKER)) {
        self->peer = k;
        return true;
    }
    self->counters.unauthorised++;
    s_auth_warn (self, "%s endpoint: ignored a message: key %s is no longer accepted", coord_ep_names[ep],
                 uid ? uid : "(none)");
    if (ep == AK_EP_WORKERS)
        coord_drop_worker (self, ak_registry_by_route (self->registry, route, len),
                           AK__DISCONNECT_CODE__DISCONNECT_KEY_REVOKED, "your key was revoked");
    return false;
}

/* Answers the ZAP requests waiting: handshakes of keys not in the ring
   fail before any application data moves. */
void coord_zap_drain (ak_coord_t *self)
{
    ak_zap_result_t res;
    for (int i = 0; i < AK_COORD_DRAIN_MAX && ak_zap_answer (self->zap, self->ring, &res); i++) {
        if (res.accepted) {
            self->counters.auth_accepted++;
            ak_debug ("%s endpoint: %s key %s (%s) connected from %s", res.endpoint == 0 ? "workers" : "clients",
                      ak_role_name (res.entry->role), res.entry->name, res.key, res.address);
            continue;
        }
        self->counters.auth_refused[res.endpoint == 0 ? AK_EP_WORKERS : AK_EP_CLIENTS]++;
        s_auth_warn (self, "refused a CURVE handshake from %s: %s", res.address, res.why);
    }
}

/*  Re-reads the key ring (on SIGHUP, or when a role directory changed) and
    drops every worker whose key is no longer a worker's: its connection
    gets nothing more and a reconnect fails the handshake.  A ring that does
    not load keeps the old one, loudly. */
void coord_keys_reload (ak_coord_t *self, bool forced)
{
    if (!self->ring || (!forced && !ak_keyring_changed (self->ring)))
        return;
    ak_err_t err = { 0 };
    ak_keyring_t *ring = NULL;
    if (ak_keyring_load (self->opts.keys_dir, &ring, &err)) {
        ak_error ("keys: cannot re-read %s (the old keys stay in force): %s", self->opts.keys_dir, err.msg);
        return;
    }
    ak_keyring_destroy (&self->ring);
    self->ring = ring;
    ak_info ("keys: re-read %s: %zu keys", self->opts.keys_dir, ak_keyring_size (ring));
    for (ak_worker_t *w = ak_registry_first (self->registry); w; w = ak_registry_next (self->registry)) {
        const char *key = w->key;
        const ak_key_t *k = key ? ak_keyring_find (ring, key) : NULL;
        if (!w->alive || (k && k->role == AK_ROLE_WORKER))
            continue;
        ak_warn ("keys: worker %s: its key %s was revoked: dropped", w->worker_id, key ? key : "?");
        self->counters.workers_revoked++;
        coord_drop_worker (self, w, AK__DISCONNECT_CODE__DISCONNECT_KEY_REVOKED, "your key was revoked");
    }
}
