/*  tests/fault/test_partition.c: a network partition between some workers
    and the coordinator, then heal.

    test_partition_netns makes a network namespace joined to this one by a
    veth pair (ip netns, ip link: root is needed; without it the test skips
    saying why).  The coordinator listens on the veth address; akload "far"
    workers run inside the namespace, akload "near" workers outside.  With
    the batch under way the veth link goes down (packets vanish, no reset:
    a real partition) long enough for the far workers to be declared dead;
    the near ones carry on with their tasks.  Then the link comes up.
    test_partition_proxy runs the same where anyone can: the far workers
    reach the coordinator through a TCP proxy in the test that, cut, stops
    moving bytes (and accepting) without closing anything.

    Proves: during the partition the far workers are dead and their tasks
    run elsewhere while the batch keeps moving; after the heal they
    register again on their own and deliver what they finished meanwhile;
    the batch completes with exactly one accepted receipt per task, the
    late copies stored as duplicates, nothing counted twice. */
#include "fault.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static ak_fault_coord_t *s_c;
static char s_ns[32], s_host_if[16], s_ns_if[16];
static char s_ip_bin[64];

// ============================================================ the proxy

/*  Where network namespaces cannot be made: a TCP proxy in this process
    between the far workers and the coordinator.  Cut, it stops reading
    and accepting: bytes stay where they are, nothing is refused or reset,
    as when packets vanish on a dead link.  Healed, it moves them again. */
#define S_PROXY_PAIRS 32

typedef struct {
    int              listen_fd;
    int              port;
    int              target_port;
    int              fds[S_PROXY_PAIRS][2];      /* client side, coordinator side */
    int              npairs;
    atomic_int       cut;
    atomic_int       stop;
    pthread_t        thread;
} s_proxy_t;

static s_proxy_t s_proxy = { .listen_fd = -1 };

static void s_pair_close (s_proxy_t *p, int i)
{
    close (p->fds[i][0]);
    close (p->fds[i][1]);
    p->fds[i][0] = p->fds[--p->npairs][0];
    p->fds[i][1] = p->fds[p->npairs][1];
}

static void *s_proxy_run (void *arg)
{
    s_proxy_t *p = arg;
    while (!atomic_load (&p->stop)) {
        if (atomic_load (&p->cut)) {
            usleep (10000);
            continue;
        }
        struct pollfd pfd[1 + 2 * S_PROXY_PAIRS];
        int n = 0;
        pfd[n++] = (struct pollfd) { p->listen_fd, POLLIN, 0 };
        for (int i = 0; i < p->npairs; i++) {
            pfd[n++] = (struct pollfd) { p->fds[i][0], POLLIN, 0 };
            pfd[n++] = (struct pollfd) { p->fds[i][1], POLLIN, 0 };
        }
        if (poll (pfd, (nfds_t) n, 20) <= 0)
            continue;
        if ((pfd[0].revents & POLLIN) && p->npairs < S_PROXY_PAIRS) {
            int in = accept (p->listen_fd, NULL, NULL);
            int out = socket (AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) p->target_port) };
            a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
            if (in >= 0 && out >= 0 && connect (out, (struct sockaddr *) &a, sizeof a) == 0) {
                p->fds[p->npairs][0] = in;
                p->fds[p->npairs][1] = out;
                p->npairs++;
            }
            else {
                if (in >= 0)
                    close (in);
                if (out >= 0)
                    close (out);
            }
        }
        for (int i = p->npairs - 1; i >= 0; i--)
            for (int side = 0; side < 2; side++) {
                short ev = pfd[1 + 2 * i + side].revents;
                if (!(ev & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                char buf[65536];
                ssize_t got = read (p->fds[i][side], buf, sizeof buf);
                bool ok = got > 0;
                for (ssize_t off = 0; ok && off < got;) {
                    ssize_t w = write (p->fds[i][!side], buf + off, (size_t) (got - off));
                    if (w < 0 && errno == EINTR)
                        continue;
                    ok = w > 0;
                    off += w > 0 ? w : 0;
                }
                if (!ok) {
                    s_pair_close (p, i);
                    break;
                }
            }
    }
    return NULL;
}

static void s_proxy_start (int target_port)
{
    s_proxy_t *p = &s_proxy;
    p->target_port = target_port;
    p->listen_fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (p->listen_fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (bind (p->listen_fd, (struct sockaddr *) &a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal (getsockname (p->listen_fd, (struct sockaddr *) &a, &len), 0);
    p->port = ntohs (a.sin_port);
    assert_int_equal (listen (p->listen_fd, 64), 0);
    atomic_init (&p->cut, 0);
    atomic_init (&p->stop, 0);
    assert_int_equal (pthread_create (&p->thread, NULL, s_proxy_run, p), 0);
}

static void s_proxy_stop (void)
{
    s_proxy_t *p = &s_proxy;
    if (p->listen_fd < 0)
        return;
    atomic_store (&p->stop, 1);
    pthread_join (p->thread, NULL);
    while (p->npairs)
        s_pair_close (p, 0);
    close (p->listen_fd);
    p->listen_fd = -1;
}

// ========================================================== namespaces

/* Runs `ip ARGS` (in the namespace when ns); returns its exit code. */
static int s_ip (bool ns, const char *fmt, const char *a, const char *b)
{
    char args[256];
    snprintf (args, sizeof args, fmt, a, b);
    char *cmd = ns ? ak_sprintf ("%s netns exec %s %s %s 2>&1", s_ip_bin, s_ns, s_ip_bin, args)
                   : ak_sprintf ("%s %s 2>&1", s_ip_bin, args);
    char *out = NULL;
    int rc = ak_test_run (cmd, &out);
    if (rc != 0)
        fprintf (stderr, "'%s' failed (%d): %s", cmd, rc, out ? out : "");
    free (out);
    free (cmd);
    return rc;
}

static int s_teardown (void **state)
{
    ak_fault_coord_destroy (&s_c, 60);
    s_proxy_stop ();
    if (s_ns[0]) {
        s_ip (false, "netns del %s%s", s_ns, "");       /* the veth pair goes with it */
        s_ns[0] = '\0';
    }
    return 0;
}

/* Why the namespace cannot be made, or NULL. */
static const char *s_cannot (void)
{
    static const char *paths[] = { "/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip" };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && !s_ip_bin[0]; i++)
        if (access (paths[i], X_OK) == 0)
            snprintf (s_ip_bin, sizeof s_ip_bin, "%s", paths[i]);
    if (!s_ip_bin[0])
        return "no `ip` program (iproute2) on this host";
    if (geteuid () != 0)
        return "network namespaces and veth pairs need root (CAP_NET_ADMIN)";
    return NULL;
}

static int64_t s_worker_int (ak_fault_coord_t *c, const char *id, const char *key, const char **state)
{
    json_t *all = ak_fault_json (c, "workers", NULL, NULL);
    size_t i;
    json_t *w;
    int64_t v = -1;
    static char st[16];
    st[0] = '\0';
    json_array_foreach (json_object_get (all, "workers"), i, w)
        if (strcmp (json_string_value (json_object_get (w, "worker_id")), id) == 0) {
            v = (int64_t) json_integer_value (json_object_get (w, key));
            snprintf (st, sizeof st, "%s", json_string_value (json_object_get (w, "state")));
        }
    json_decref (all);
    if (state)
        *state = st;
    return v;
}

/* Makes the namespace and the veth pair; false (with why) when it cannot. */
static bool s_netns_up (char *host_ip, char *ns_ip, size_t len)
{
    int id = (int) getpid ();
    snprintf (s_ns, sizeof s_ns, "akfault-%d", id);
    snprintf (s_host_if, sizeof s_host_if, "akh%d", id % 1000000);
    snprintf (s_ns_if, sizeof s_ns_if, "akn%d", id % 1000000);
    snprintf (host_ip, len, "10.213.%d.%d", (id / 64) % 250, (id % 64) * 4 + 1);
    snprintf (ns_ip, len, "10.213.%d.%d", (id / 64) % 250, (id % 64) * 4 + 2);
    if (s_ip (false, "netns add %s%s", s_ns, "") != 0) {
        s_ns[0] = '\0';
        return false;
    }
    assert_int_equal (s_ip (false, "link add %s type veth peer name %s", s_host_if, s_ns_if), 0);
    assert_int_equal (s_ip (false, "link set %s netns %s", s_ns_if, s_ns), 0);
    assert_int_equal (s_ip (false, "addr add %s/30 dev %s", host_ip, s_host_if), 0);
    assert_int_equal (s_ip (false, "link set %s up%s", s_host_if, ""), 0);
    assert_int_equal (s_ip (true, "addr add %s/30 dev %s", ns_ip, s_ns_if), 0);
    assert_int_equal (s_ip (true, "link set %s up%s", s_ns_if, ""), 0);
    assert_int_equal (s_ip (true, "link set lo up%s%s", "", ""), 0);
    return true;
}

/* Cuts (or heals) the far workers off. */
static void s_cut (bool netns, bool cut)
{
    if (netns)
        assert_int_equal (s_ip (false, "link set %s %s", s_host_if, cut ? "down" : "up"), 0);
    else
        atomic_store (&s_proxy.cut, cut ? 1 : 0);
}

/* The whole run, the far workers behind a veth pair (netns) or the proxy. */
static void s_partition (bool netns)
{
    char host_ip[32] = "127.0.0.1", ns_ip[32] = "";
    if (netns) {
        const char *why = s_cannot ();
        if (why) {
            ak_test_skip ("the partition test with a network namespace: %s "
                          "(test_partition_proxy covers the same with a TCP proxy)", why);
        }
        if (!s_netns_up (host_ip, ns_ip, sizeof host_ip)) {
            ak_test_skip ("the partition test with a network namespace: `ip netns add` does not "
                          "work here (see above); test_partition_proxy covers the same with a TCP proxy");
        }
    }
    const char *flags[] = { "--heartbeat-ms", "200", "--liveness", "3", "--commit-ms", "5",
                            "--log-level", "info", NULL };
    ak_fault_coord_t *c = s_c = ak_fault_coord_new (netns ? "fault-partition-netns" : "fault-partition-proxy",
                                                    host_ip, flags);
    ak_fault_coord_start (c);
    char *bundle = ak_fault_stub_bundle (c->dir, "partition", 300, "\"lease_ms\": 20000, \"max_attempts\": 10");
    char *batch = ak_fault_submit (c, bundle);
    char far_ep[96];
    if (netns)
        snprintf (far_ep, sizeof far_ep, "%s", c->workers);
    else {
        s_proxy_start (atoi (strrchr (c->workers, ':') + 1));
        snprintf (far_ep, sizeof far_ep, "tcp://127.0.0.1:%d", s_proxy.port);
    }

    char *akload = ak_test_bin ("akload");
    char *far_stats = ak_path_join (c->dir, "far.json");
    char *near_stats = ak_path_join (c->dir, "near.json");
    char *far_log = ak_path_join (c->dir, "far.log");
    char *near_log = ak_path_join (c->dir, "near.log");
    /* in the namespace, `ip netns exec` execs akload: the pid is akload's */
    char *far_args[] = { akload, "--coordinator", far_ep, "--workers", "3", "--prefix", "far",
                         "--task-ms", "150", "--heartbeat-ms", "200", "--backoff-ms", "100",
                         "--stats-json", far_stats, "--log-level", "info", NULL };
    char *far_argv[32] = { s_ip_bin, "netns", "exec", s_ns };
    size_t k = netns ? 4 : 0;
    for (size_t i = 0; far_args[i]; i++)
        far_argv[k++] = far_args[i];
    far_argv[k] = NULL;
    char *near_argv[] = { akload, "--coordinator", c->workers, "--workers", "2", "--prefix", "near",
                          "--task-ms", "60", "--heartbeat-ms", "200", "--backoff-ms", "100",
                          "--stats-json", near_stats, "--log-level", "warn", NULL };
    pid_t far = ak_fault_spawn (far_argv, far_log);
    pid_t near = ak_fault_spawn (near_argv, near_log);
    assert_true (far > 0 && near > 0);

    /* the far workers work, and hold leases when the partition comes */
    uint64_t until = ak_fault_now_ms () + 30000;
    while (s_worker_int (c, "far-1", "tasks_done", NULL) < 3 && ak_fault_now_ms () < until)
        ak_test_sleep_ms (50);
    if (s_worker_int (c, "far-1", "tasks_done", NULL) < 3)
        fail_msg ("the far workers did not get to work through %s (log %s)",
                  netns ? "the veth pair" : "the proxy", far_log);
    int64_t done_before = ak_fault_count (c, batch, "done");
    s_cut (netns, true);
    uint64_t cut = ak_fault_now_ms ();

    /* partitioned: the far workers are declared dead, the batch goes on */
    const char *st = NULL;
    until = ak_fault_now_ms () + 10000;
    bool dead = false;
    while (!dead && ak_fault_now_ms () < until) {
        dead = true;
        for (int i = 1; i <= 3; i++) {
            char wid[16];
            snprintf (wid, sizeof wid, "far-%d", i);
            s_worker_int (c, wid, "registrations", &st);
            dead = dead && strcmp (st, "dead") == 0;
        }
        if (!dead)
            ak_test_sleep_ms (50);
    }
    if (!dead)
        fail_msg ("the far workers are not declared dead 10 s into the partition");
    uint64_t declared = ak_fault_now_ms () - cut;
    /* the near workers go on with the batch: polled, not a fixed wait */
    until = ak_fault_now_ms () + 30000;
    int64_t done_during = ak_fault_count (c, batch, "done");
    while (done_during <= done_before && ak_fault_now_ms () < until) {
        ak_test_sleep_ms (50);
        done_during = ak_fault_count (c, batch, "done");
    }
    assert_true (done_during > done_before);
    s_cut (netns, false);
    uint64_t healed = ak_fault_now_ms ();

    /* healed: they come back by themselves */
    until = ak_fault_now_ms () + 30000;
    bool back = false;
    while (!back && ak_fault_now_ms () < until) {
        back = true;
        for (int i = 1; i <= 3; i++) {
            char wid[16];
            snprintf (wid, sizeof wid, "far-%d", i);
            int64_t regs = s_worker_int (c, wid, "registrations", &st);
            back = back && regs >= 2 && strcmp (st, "alive") == 0;
        }
        if (!back)
            ak_test_sleep_ms (50);
    }
    if (!back)
        fail_msg ("the far workers did not register again within 30 s of the heal");
    uint64_t rejoined = ak_fault_now_ms () - healed;

    ak_fault_wait_complete (c, batch, 60000);
    size_t dups = 0;
    assert_int_equal (ak_fault_check_receipts (c, batch, &dups), 301);
    assert_true (ak_fault_stat (c, "workers_died", NULL) >= 3);
    int status = ak_fault_stop (far, SIGTERM, 10000);
    assert_true (WIFEXITED (status));
    status = ak_fault_stop (near, SIGTERM, 10000);
    assert_true (WIFEXITED (status));
    status = ak_fault_coord_kill (c, SIGTERM);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ak_fault_tally_t tally;
    ak_fault_check_store (c->store, batch, true, &tally);
    assert_int_equal (tally.accepted, 301);
    int64_t acks = ak_fault_akload_count (far_stats, "acks_received")
                 + ak_fault_akload_count (near_stats, "acks_received");
    int64_t dup_acks = ak_fault_akload_count (far_stats, "duplicates_acked")
                     + ak_fault_akload_count (near_stats, "duplicates_acked");
    assert_true ((size_t) acks <= tally.receipts);
    assert_true (acks - dup_acks <= 301);
    fprintf (stderr, "partition (%s): far workers dead %llu ms after the cut, %lld tasks done meanwhile; "
             "back %llu ms after the heal; %zu receipts (%zu duplicates), workers got %lld acks "
             "(%lld duplicate)\n", netns ? "veth in a network namespace" : "TCP proxy",
             (unsigned long long) declared, (long long) (done_during - done_before),
             (unsigned long long) rejoined, tally.receipts, tally.duplicates, (long long) acks,
             (long long) dup_acks);

    free (near_log);
    free (far_log);
    free (near_stats);
    free (far_stats);
    free (akload);
    free (batch);
    free (bundle);
    ak_fault_coord_destroy (&s_c, 0);
    s_proxy_stop ();
    if (s_ns[0]) {
        s_ip (false, "netns del %s%s", s_ns, "");
        s_ns[0] = '\0';
    }
}

static void test_partition_netns (void **state)
{
    s_partition (true);
}

static void test_partition_proxy (void **state)
{
    s_partition (false);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_partition_netns, s_teardown),
        cmocka_unit_test_teardown (test_partition_proxy, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
