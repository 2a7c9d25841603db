/*  tests/integration/test_metrics.c: the --metrics endpoints of akcoord and
    akworker (issue 21 item 1) and the coordinator loop's statistics
    (issue 24 item 1), scraped over loopback with a plain socket client.

    - both endpoints answer GET /metrics with exposition that parses
      (common/metrics_parse.c: every family has HELP and TYPE, histogram
      buckets ascend and end with +Inf equal to _count); / names /metrics,
      another path is 404, POST is 405;
    - the values move: a small batch through one worker makes the
      coordinator's done tasks, accepted receipts, group commits, assigns
      and submit requests, and the worker's tasks, timing seconds and
      device info, show up in later scrapes (polled, never timed);
    - the loop histogram is exported, and `akctl stats --json` carries the
      loop object: wake-ups counted, cumulative buckets, slow wake-ups
      (--slow-wakeup-ms 1) each at least the threshold;
    - a bad --metrics address exits 2 naming the problem, before anything
      is created; a port in use exits 1 saying so. */
#include "support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrics.h"
#include "util.h"

#define S_START_MS  30000
#define S_BATCH_MS  240000

static ak_test_cluster_t s_c;
static int s_ports[2];

/* ------------------------------------------------------------- client */

/* A scrape of port, parsed and checked; fails the test when it does not parse. */
static void s_scrape (int port, ak_mparsed_t *p)
{
    char *body = NULL;
    int status = ak_test_http (port, "GET", "/metrics", &body);
    if (status != 200)
        fail_msg ("GET /metrics on port %d: status %d: %s", port, status, body ? body : "");
    ak_err_t err = { 0 };
    if (ak_metrics_parse (body, p, &err))
        fail_msg ("port %d: the exposition does not parse: %s\n%s", port, err.msg, body);
    free (body);
}

typedef struct {
    int         port;
    const char *name;
    const char *labels;     /* NULL: sum over every label set */
    double      at_least;
} s_expect_t;

/* ak_test_wait: the sample reaches at_least in a scrape */
static bool s_reaches (void *arg)
{
    const s_expect_t *e = arg;
    char *body = NULL;
    if (ak_test_http (e->port, "GET", "/metrics", &body) != 200) {
        free (body);
        return false;
    }
    ak_mparsed_t p;
    ak_err_t err = { 0 };
    bool ok = false;
    if (ak_metrics_parse (body, &p, &err) == 0) {
        double v = e->labels ? ak_mparsed_get (&p, e->name, e->labels) : ak_mparsed_sum (&p, e->name, NULL, NULL);
        ok = !isnan (v) && v >= e->at_least;
    }
    ak_mparsed_clear (&p);
    free (body);
    return ok;
}

static void s_expect (int port, const char *name, const char *labels, double at_least)
{
    s_expect_t e = { port, name, labels, at_least };
    if (!ak_test_wait (s_reaches, &e, 60000)) {
        char *body = NULL;
        ak_test_http (port, "GET", "/metrics", &body);
        fail_msg ("port %d: %s{%s} never reached %g:\n%s", port, name, labels ? labels : "*", at_least,
                  body ? body : "");
    }
}

/* -------------------------------------------------------------- tests */

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

static void test_scrape_moves (void **state)
{
    (void) state;
    ak_test_free_ports (s_ports, 2);
    char coord_addr[32], worker_addr[32];
    snprintf (coord_addr, sizeof coord_addr, "127.0.0.1:%d", s_ports[0]);
    snprintf (worker_addr, sizeof worker_addr, "127.0.0.1:%d", s_ports[1]);
    const char *const cargs[] = { "--metrics", coord_addr, "--metrics-ms", "200", "--slow-wakeup-ms", "1", NULL };
    const char *const wargs[] = { "--metrics", worker_addr, "--metrics-ms", "200", NULL };
    ak_test_cluster_init (&s_c, "metrics", false);
    ak_test_cluster_coord (&s_c, NULL, NULL, cargs, S_START_MS);
    ak_test_cluster_workers (&s_c, "met-w", 1, wargs, S_START_MS);

    /* HTTP around the endpoint */
    char *body = NULL;
    assert_int_equal (ak_test_http (s_ports[0], "GET", "/", &body), 200);
    assert_non_null (strstr (body, "/metrics"));
    free (body);
    assert_int_equal (ak_test_http (s_ports[0], "GET", "/nope", NULL), 404);
    assert_int_equal (ak_test_http (s_ports[0], "POST", "/metrics", NULL), 405);
    assert_int_equal (ak_test_http (s_ports[1], "GET", "/nope", NULL), 404);

    /* before the batch: the worker registered, the loop histogram there */
    s_expect (s_ports[0], "akcoord_workers", "class=\"host\",state=\"alive\"", 1);
    s_expect (s_ports[0], "akcoord_loop_wakeup_seconds_count", "", 1);
    s_expect (s_ports[1], "akworker_coordinator_up", "", 1);
    ak_mparsed_t before;
    s_scrape (s_ports[0], &before);
    assert_true (ak_mparsed_get (&before, "akcoord_tasks", "state=\"done\"") == 0);
    assert_false (isnan (ak_mparsed_get (&before, "akcoord_commit_seconds_bucket", "le=\"+Inf\"")));
    assert_false (isnan (ak_mparsed_get (&before, "akcoord_store_map_size_bytes", "")));
    assert_true (ak_mparsed_get (&before, "akcoord_store_map_used_bytes", "") > 0);
    double wakeups = ak_mparsed_get (&before, "akcoord_loop_wakeup_seconds_count", "");
    ak_mparsed_clear (&before);
    ak_mparsed_t w0;
    s_scrape (s_ports[1], &w0);
    size_t ndev = 0;
    ak_mparsed_sum (&w0, "akworker_device_info", "class=\"host\"", &ndev);
    assert_true (ndev >= 1);
    assert_true (ak_mparsed_sum (&w0, "akworker_tasks_total", NULL, NULL) == 0);
    ak_mparsed_clear (&w0);

    /* a small batch; its tasks move the counters */
    char *example = ak_test_src ("ops/examples/scale_bias");
    char *id = ak_test_submit (&s_c, "submit --op '%s' --workloads tiny", example);
    free (example);
    json_t *st = ak_test_batch_wait (&s_c, id, S_BATCH_MS);
    json_decref (st);
    free (id);
    s_expect (s_ports[0], "akcoord_client_requests_total", "verb=\"submit\",result=\"ok\"", 1);
    s_expect (s_ports[0], "akcoord_commits_total", "", 1);
    s_expect (s_ports[0], "akcoord_commit_seconds_count", "", 1);
    s_expect (s_ports[0], "akcoord_assigns_total", "", 1);
    s_expect (s_ports[0], "akcoord_receipts_accepted_total", NULL, 1);
    s_expect (s_ports[0], "akcoord_loop_wakeup_seconds_count", "", wakeups + 1);
    s_expect (s_ports[1], "akworker_tasks_total", NULL, 1);
    s_expect (s_ports[1], "akworker_timing_seconds_total", NULL, 1e-9);
    s_expect (s_ports[1], "akworker_busy_seconds_total", NULL, 1e-9);
    s_expect (s_ports[1], "akworker_sampled_seconds_total", "", 1e-9);
    s_expect (s_ports[1], "akworker_gpu_timing_share", "", 1e-9);

    /* the scrapes agree with `akctl stats` once the batch is over */
    ak_mparsed_t after;
    s_scrape (s_ports[0], &after);
    json_t *stats = ak_test_akctl_json (&s_c, "stats");
    assert_non_null (stats);
    double done = ak_mparsed_get (&after, "akcoord_tasks", "state=\"done\"")
                + ak_mparsed_get (&after, "akcoord_tasks", "state=\"failed\"");
    assert_true (done >= 1);
    assert_true (done == (double) (json_integer_value (json_object_get (stats, "tasks_done"))
                                   + json_integer_value (json_object_get (stats, "tasks_failed"))));
    assert_true (ak_mparsed_sum (&after, "akcoord_receipts_accepted_total", NULL, NULL)
                 == (double) json_integer_value (json_object_get (stats, "receipts_accepted")));
    ak_mparsed_clear (&after);
    ak_mparsed_t w1;
    s_scrape (s_ports[1], &w1);
    assert_true (ak_mparsed_sum (&w1, "akworker_tasks_total", NULL, NULL) >= done);
    ak_mparsed_clear (&w1);

    /* the loop's statistics in stats --json */
    json_t *loop = json_object_get (stats, "loop");
    assert_non_null (loop);
    assert_true (json_integer_value (json_object_get (loop, "wakeups")) > 0);
    assert_int_equal (json_integer_value (json_object_get (loop, "slow_threshold_ms")), 1);
    json_t *counts = json_object_get (json_object_get (loop, "wakeup_ms"), "counts");
    assert_true (json_array_size (counts) > 1);
    for (size_t i = 1; i < json_array_size (counts); i++)
        assert_true (json_integer_value (json_array_get (counts, i))
                     >= json_integer_value (json_array_get (counts, i - 1)));
    /* each ACK's wait since its receipt was staged: one per ACK sent */
    json_t *racks = json_object_get (json_object_get (loop, "receipt_ack_ms"), "count");
    assert_true (json_integer_value (racks) >= 1);
    assert_int_equal (json_integer_value (racks), json_integer_value (json_object_get (stats, "acks")));
    json_t *slow = json_object_get (loop, "slow");
    print_message ("loop: %lld wake-ups, %lld slow (>= 1 ms), %zu kept\n",
                   (long long) json_integer_value (json_object_get (loop, "wakeups")),
                   (long long) json_integer_value (json_object_get (loop, "slow_wakeups")), json_array_size (slow));
    for (size_t i = 0; i < json_array_size (slow); i++)
        assert_true (json_integer_value (json_object_get (json_array_get (slow, i), "total_us")) >= 1000);
    json_decref (stats);
    ak_test_cluster_shutdown (&s_c, 30000);
}

/* Runs PROG ARGS with output into DIR/out.txt: the exit code and, in
   *out_p, what it said. */
static int s_run (const char *dir, const char *prog, char **out_p, const char *args)
{
    char *bin = ak_test_bin (prog);
    char *log = ak_path_join (dir, "out.txt");
    int code = ak_test_runf (NULL, "timeout 120 '%s' %s > '%s' 2>&1", bin, args, log);
    *out_p = ak_test_read (log);
    print_message ("%s %s -> %d: %s", prog, args, code, *out_p);
    unlink (log);
    free (log);
    free (bin);
    return code;
}

static void test_bad_address (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("metrics-bad");
    static const struct { const char *addr, *says; } bad[] = {
        { "127.0.0.1", "no port" },
        { "127.0.0.1:99999", "is not 0..65535" },
        { "127.0.0.1:x", "is not 0..65535" },
        { "no-such-host.invalid:9464", "does not resolve" },
        { "::1:9464", "brackets" },
        { ":9464", "no host" },
        { "192.0.2.1:9464", "not an address of this host" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *args = ak_sprintf ("--plain --store '%s/store%zu' --workers 'ipc://%s/w' --clients 'ipc://%s/c' "
                                 "--metrics '%s'", dir, i, dir, dir, bad[i].addr);
        char *out = NULL;
        assert_int_equal (s_run (dir, "akcoord", &out, args), 2);
        if (!strstr (out, bad[i].says) || !strstr (out, "--metrics"))
            fail_msg ("akcoord --metrics %s: expected \"%s\" in: %s", bad[i].addr, bad[i].says, out);
        free (out);
        free (args);
        if (i == sizeof bad / sizeof bad[0] - 1)
            continue;                   /* the store is not made before the address is checked */
        char *store = ak_sprintf ("%s/store%zu", dir, i);
        struct stat sb;
        assert_int_not_equal (stat (store, &sb), 0);
        free (store);
        args = ak_sprintf ("--coordinator 'ipc://%s/w' --id w1 --cache '%s/cache' --metrics '%s'", dir, dir,
                           bad[i].addr);
        assert_int_equal (s_run (dir, "akworker", &out, args), 2);
        if (!strstr (out, bad[i].says))
            fail_msg ("akworker --metrics %s: expected \"%s\" in: %s", bad[i].addr, bad[i].says, out);
        free (out);
        free (args);
    }

    /* a port in use: exit 1 (another process may let it go: a restart can help) */
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true (fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (bind (fd, (struct sockaddr *) &a, sizeof a), 0);
    assert_int_equal (listen (fd, 1), 0);
    socklen_t alen = sizeof a;
    assert_int_equal (getsockname (fd, (struct sockaddr *) &a, &alen), 0);
    char *args = ak_sprintf ("--plain --store '%s/store-inuse' --workers 'ipc://%s/w' --clients 'ipc://%s/c' "
                             "--metrics 127.0.0.1:%d", dir, dir, dir, ntohs (a.sin_port));
    char *out = NULL;
    assert_int_equal (s_run (dir, "akcoord", &out, args), 1);
    assert_non_null (strstr (out, "cannot listen"));
    assert_non_null (strstr (out, "in use"));
    free (out);
    free (args);
    close (fd);
    ak_test_rmtree (dir);
    free (dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_scrape_moves, s_teardown),
        cmocka_unit_test (test_bad_address),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
