/*  tests/integration/integration.c: see integration.h. */
#include "integration.h"

#include <string.h>

#include "envelope.h"
#include "util.h"

char *ak_it_key (const char *dir, const char *name, ak_role_t role)
{
    ak_err_t err = { 0 };
    char *pub = NULL;
    if (ak_keys_new (dir, name, role, &pub, &err))
        fail_msg ("ak_keys_new %s: %s", name, err.msg);
    char *secret = ak_sprintf ("%s_secret", pub);
    free (pub);
    return secret;
}

char *ak_it_public (const char *secret)
{
    char *pub = ak_strdup (secret);
    size_t n = strlen (pub), tail = strlen ("_secret");
    assert_true (n > tail && strcmp (pub + n - tail, "_secret") == 0);
    pub[n - tail] = '\0';
    return pub;
}

zsock_t *ak_it_dealer (const char *endpoint, const char *cert, const char *server_pub)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    assert_non_null (s);
    zsock_set_linger (s, 0);
    zsock_set_maxmsgsize (s, (int) AK_MAX_MSG_SIZE);
    if (cert) {
        ak_err_t err = { 0 };
        if (ak_auth_client_setup (s, cert, server_pub, &err))
            fail_msg ("client setup: %s", err.msg);
    }
    assert_int_equal (zsock_connect (s, "%s", endpoint), 0);
    return s;
}

void ak_it_hello (zsock_t *s, const char *id)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__Hello h = AK__HELLO__INIT;
    Ak__Device dv = AK__DEVICE__INIT, *dvs[1] = { &dv };
    dv.backend = "host";
    dv.device_class = "host";
    h.worker_id = (char *) id;
    h.host = "test";
    h.devices = dvs;
    h.n_devices = 1;
    h.slots = 1;
    h.prefetch = 1;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    assert_int_equal (ak_envelope_send (s, NULL, 0, &env), 0);
}
