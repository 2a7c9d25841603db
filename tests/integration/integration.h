/*  tests/integration/integration.h: what the integration tests of CURVE
    share (test_auth.c, test_refused.c): key pairs made for a test, a
    DEALER with a certificate, a minimal HELLO, and the fixture both start
    from (a key directory, akcoord with CURVE on loopback).  Each helper
    fails the test when a step fails. */
#ifndef AK_INTEGRATION_H
#define AK_INTEGRATION_H
#include "support.h"
#include <czmq.h>
#include <sys/types.h>
#include "auth.h"

/* A new key pair NAME of role under dir (ak_keys_new); returns the secret
   file, NAME.key_secret (caller frees). */
char *ak_it_key (const char *dir, const char *name, ak_role_t role);
/* The public file of a secret one: NAME.key_secret -> NAME.key (caller frees). */
char *ak_it_public (const char *secret);
/* A DEALER (linger 0, the message size bound) connected to endpoint, a
   CURVE client with cert and the server's public key server_pub (cert
   NULL: plain). */
zsock_t *ak_it_dealer (const char *endpoint, const char *cert, const char *server_pub);
/* Sends HELLO as worker id: one host device, 1 slot, prefetch 1; a send
   that finds no peer yet is tried again for up to 10 s. */
void ak_it_hello (zsock_t *s, const char *id);
/* The same, its send's outcome returned: 0, or AK_EUNAVAIL where the socket has
   no peer to queue it for (a connection the coordinator dropped). */
int ak_it_hello_rc (zsock_t *s, const char *id);

/* A coordinator with CURVE and its keys, for one test. */
typedef struct {
    char  *dir, *keys, *store, *log;    /* the test's directory; DIR/keys (akcoord --keys) ... */
    char   workers[64], clients[64];    /* tcp://127.0.0.1:PORT */
    char  *server_pub, *server_secret;  /* the coordinator's certificate (DIR/server/) */
    char  *op, *viewer, *w1, *w2;       /* secret certificate files: alice (operator), bob
                                           (viewer), w1 and w2 (workers), in DIR/keys */
    char  *stranger;                    /* mallory, of the role asked for, NOT in DIR/keys */
    char  *akctl, *akworker;            /* the binaries */
    pid_t  pid;                         /* akcoord, once started */
} ak_it_fx_t;

/* A fresh directory DIR (tag in its name), the keys above and two free
   loopback ports; nothing started. */
ak_it_fx_t *ak_it_fx_new (const char *tag, ak_role_t stranger_role);
/* Starts akcoord on fx (--cert, --keys, --heartbeat-ms 500, --log-level
   debug, then extra, NULL-terminated; may be NULL) and waits until it
   answers the operator's `stats` (fails the test after 15 s). */
void ak_it_fx_start (ak_it_fx_t *fx, const char *const *extra);
/* Stops akcoord (SIGTERM), removes DIR (kept when $AK_TEST_KEEP is set)
   and frees fx. */
void ak_it_fx_destroy (ak_it_fx_t **fx_p);

#endif
