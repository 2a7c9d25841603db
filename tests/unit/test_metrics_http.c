/*  tests/unit/test_metrics_http.c: the --metrics endpoint by itself
    (common/metrics_http.c, issue 21), on loopback:
    - addresses: HOST:PORT and [V6]:PORT accepted, the rest refused with
      AK_EINVAL and a message naming what is wrong;
    - port 0 picks a free port, and the URL names it;
    - 503 until the first publish, then the text published, byte for byte;
      a later publish replaces it; scrapes are counted;
    - destroying the server closes its socket: the port binds again, and
      a second destroy is a no-op. */
#include "support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics_http.h"
#include "util.h"

static void test_addresses (void **state)
{
    (void) state;
    static const char *const good[] = { "127.0.0.1:9464", "127.0.0.1:0", "localhost:1", "[::1]:9464",
                                        "0.0.0.0:65535" };
    static const struct { const char *addr, *says; } bad[] = {
        { "", "empty" }, { "127.0.0.1", "no port" }, { "127.0.0.1:65536", "0..65535" },
        { "127.0.0.1:-1", "0..65535" }, { "127.0.0.1:80x", "0..65535" }, { "::1:80", "brackets" },
        { "[::1:80", "brackets" }, { ":80", "no host" }, { "no-such-host.invalid:80", "does not resolve" },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ak_err_t err = { 0 };
        if (ak_metrics_addr_check (good[i], &err))
            fail_msg ("%s refused: %s", good[i], err.msg);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ak_err_t err = { 0 };
        assert_int_equal (ak_metrics_addr_check (bad[i].addr, &err), AK_EINVAL);
        print_message ("'%s': %s\n", bad[i].addr, err.msg);
        assert_non_null (strstr (err.msg, bad[i].says));
        ak_metrics_srv_t *srv = NULL;
        assert_int_equal (ak_metrics_srv_new (bad[i].addr, &srv, &err), AK_EINVAL);
        assert_null (srv);
    }
}

static void test_serve_and_publish (void **state)
{
    (void) state;
    ak_metrics_srv_t *srv = NULL;
    ak_err_t err = { 0 };
    if (ak_metrics_srv_new ("127.0.0.1:0", &srv, &err))
        fail_msg ("%s", err.msg);
    int port = ak_metrics_srv_port (srv);
    assert_true (port > 0);
    char want[64];
    snprintf (want, sizeof want, "http://127.0.0.1:%d/metrics", port);
    assert_string_equal (ak_metrics_srv_url (srv), want);

    char *body = NULL;
    assert_int_equal (ak_test_http (port, "GET", "/metrics", &body), 503);
    free (body);
    char *text = ak_strdup ("# HELP a_total a\n# TYPE a_total counter\na_total 1\n");
    ak_metrics_srv_publish (srv, &text, strlen ("# HELP a_total a\n# TYPE a_total counter\na_total 1\n"));
    assert_null (text);
    assert_int_equal (ak_test_http (port, "GET", "/metrics", &body), 200);
    assert_string_equal (body, "# HELP a_total a\n# TYPE a_total counter\na_total 1\n");
    free (body);
    text = ak_strdup ("b 2\n");
    ak_metrics_srv_publish (srv, &text, 4);
    assert_int_equal (ak_test_http (port, "GET", "/metrics", &body), 200);
    assert_string_equal (body, "b 2\n");
    free (body);
    assert_int_equal (ak_test_http (port, "HEAD", "/metrics", &body), 200);
    assert_string_equal (body, "");
    free (body);
    assert_int_equal (ak_test_http (port, "DELETE", "/metrics", NULL), 405);
    assert_int_equal (ak_test_http (port, "GET", "/other", NULL), 404);
    assert_true (ak_metrics_srv_scrapes (srv) >= 4);

    ak_metrics_srv_destroy (&srv);
    assert_null (srv);
    ak_metrics_srv_destroy (&srv);
    /* the socket is closed: nobody answers, and the port binds again */
    assert_int_equal (ak_test_http (port, "GET", "/metrics", NULL), -1);
    char addr[32];
    snprintf (addr, sizeof addr, "127.0.0.1:%d", port);
    if (ak_metrics_srv_new (addr, &srv, &err))
        fail_msg ("%s again: %s", addr, err.msg);
    ak_metrics_srv_destroy (&srv);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_addresses),
        cmocka_unit_test (test_serve_and_publish),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
