/*  tests/integration/integration.h: what the integration tests of CURVE
    share (test_auth.c, test_refused.c): key pairs made for a test, a
    DEALER with a certificate, a minimal HELLO.  Each helper fails the test
    when a step fails. */
#ifndef AK_INTEGRATION_H
#define AK_INTEGRATION_H
#include "support.h"
#include <czmq.h>
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
/* Sends HELLO as worker id: one host device, 1 slot, prefetch 1. */
void ak_it_hello (zsock_t *s, const char *id);

#endif
