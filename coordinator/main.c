/*  coordinator/main.c: the akcoord program.

    Parses flags, starts the coordinator and runs its loop until a client
    says `shutdown` or SIGINT/SIGTERM arrives; either way pending commits
    are flushed (and their acks sent) before the sockets and the store
    close.  Exit status: 0 after a clean stop, 1 when the coordinator could
    not start or its last commit failed, 2 for bad flags.  Under systemd
    (Type=notify) it says READY=1 once both endpoints are bound and the
    store is open, STOPPING=1 when it begins to stop, and WATCHDOG=1 from
    its loop's tick (common/sdnotify.h). */
#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "auth.h"
#include "cli.h"
#include "coord.h"
#include "endpoint.h"
#include "log.h"
#include "metrics_http.h"
#include "sdnotify.h"
#include "storelock.h"
#include "util.h"
#include "version.h"

static volatile sig_atomic_t s_stop = 0;
static volatile sig_atomic_t s_reload = 0;

static void s_on_signal (int sig)
{
    if (sig == SIGHUP)
        s_reload = 1;
    else {
        s_stop = 1;
        (void) ak_sdnotify_stopping ();
    }
}

static void s_usage (FILE *out)
{
    fprintf (out,
        "usage: akcoord --store DIR (--cert FILE --keys DIR | --plain) [options]\n"
        "\n"
        "The akfleet coordinator: worker registry and liveness, per-class task queues\n"
        "with leases and credit-based dispatch, receipt intake with group commit,\n"
        "batch expansion and promotion, and the client API used by akctl.\n"
        "\n"
        "  --store DIR          LMDB store directory (created if missing; required); one\n"
        "                       akcoord per store: a second one exits 2 naming the first's pid\n"
        "  --workers ENDPOINT   worker ROUTER endpoint, tcp:// or ipc://\n"
        "                       (default tcp://127.0.0.1:5555)\n"
        "  --clients ENDPOINT   client ROUTER endpoint, tcp:// or ipc://\n"
        "                       (default tcp://127.0.0.1:5556)\n"
        "  --heartbeat-ms N     heartbeat interval, 10..60000 (default 1000)\n"
        "  --liveness N         missed heartbeats before a worker is dead, 1..100 (default 3)\n"
        "  --commit-ms N        longest a receipt waits for its group commit, 0..10000 (default 2)\n"
        "  --commit-max N       receipts per group commit, 1..100000 (default 256)\n"
        "  --commit-sync        run every group commit on the loop's thread (the loop waits\n"
        "                       for its fsyncs); default: on a writer thread while the loop\n"
        "                       goes on (ACKs only after the commit holds, either way)\n"
        "  --commit-thread-ms N keep commits on the loop's thread while their running\n"
        "                       average is under N ms, 0..10000 (default 0: always the thread)\n"
        "  --map-size SIZE      initial LMDB map size (default 1G; a store that grew keeps\n"
        "                       its size); SIZE is bytes or a number with K, M or G\n"
        "  --map-max SIZE       the map doubles when full up to this limit (default 64G);\n"
        "                       past it commits fail with \"store full\" until akcoord is\n"
        "                       restarted with a larger --map-max (nothing is lost)\n"
        "  --cert FILE          the coordinator's secret certificate (NAME.key_secret, made by\n"
        "                       `akctl keys new NAME --role server --dir DIR`): CURVE on both endpoints\n"
        "  --keys DIR           public certificates accepted, by role: DIR/worker/*.key (workers\n"
        "                       endpoint), DIR/operator/*.key (every verb), DIR/viewer/*.key (read\n"
        "                       verbs); re-read on SIGHUP and when a role directory changes; a\n"
        "                       worker whose key is removed is dropped\n"
        "  --plain              no authentication and no encryption (single-machine demos on ipc://\n"
        "                       only); without --cert/--keys and without --plain akcoord will not start\n"
        "  --client-queue N     client requests waiting before \"busy\" answers, 1..1000000 (default 1024)\n"
        "  --malformed-max N    malformed frames before a peer is dropped, 1..1000000 (default 16)\n"
        "  --metrics ADDR:PORT  serve Prometheus metrics on http://ADDR:PORT/metrics (off by\n"
        "                       default; 127.0.0.1:9464, [::1]:9464; port 0: any free port, logged)\n"
        "  --metrics-ms N       how often the loop renders the metrics, 100..60000 (default 1000)\n"
        "  --slow-wakeup-ms N   loop wake-ups at least this long are kept with what they did\n"
        "                       (akctl stats --json: loop.slow), 1..60000 (default 5)\n"
        "  --log-level LEVEL    debug | info | warn | error | quiet (default $AK_LOG_LEVEL,\n"
        "                       else info)\n"
        "  --version            print the version and exit\n"
        "  -h, --help           this text\n"
        "\n"
        "SIGINT or SIGTERM (or `akctl shutdown`) commits what is pending and exits 0;\n"
        "SIGHUP re-reads --keys.  docs/operations.md explains setting up an authenticated fleet.\n"
        "Under systemd: Type=notify (READY=1 once serving), WatchdogSec=, and log lines with\n"
        "their syslog priority when stderr is the journal.\n"
        "\n"
        "Exit status: 0 stopped cleanly, 1 could not start or the last commit failed,\n"
        "2 bad usage or configuration, or the store held by another akcoord (restarting\n"
        "will not help: RestartPreventExitStatus=2 in the systemd unit).\n");
}

/* A size in bytes: digits with an optional K, M or G (powers of 1024). */
static int s_size (const char *flag, const char *text, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    unsigned shift = 0;
    if (end && *end && !end[1]) {
        switch (*end) {
            case 'k': case 'K': shift = 10; end++; break;
            case 'm': case 'M': shift = 20; end++; break;
            case 'g': case 'G': shift = 30; end++; break;
            default: break;
        }
    }
    if (errno || end == text || !end || *end || !(text[0] >= '0' && text[0] <= '9')
        || v > (1ull << 40) >> shift || (v << shift) < (64ull << 10))
        return ak_cli_bad ("akcoord", "%s: '%s' is not a size from 64K to 1024G", flag, text);
    *out = (size_t) (v << shift);
    return 0;
}

/*  The configuration that the flags name on disk: the server certificate
    (a secret one) and the key directory.  Checked before anything is
    created, so that a unit with a wrong path exits 2 (systemd does not
    restart it) and leaves no store behind.  *nkeys_p: the keys accepted. */
static int s_check_auth (const ak_coord_opts_t *opts, size_t *nkeys_p)
{
    ak_err_t err = { 0 };
    zsock_t *probe = zsock_new (ZMQ_ROUTER);
    int rc = probe ? ak_auth_server_setup (probe, opts->cert_file, "probe", &err) : AK_EIO;
    zsock_destroy (&probe);
    if (rc)
        return ak_cli_bad ("akcoord", "--cert: %s", err.msg[0] ? err.msg : "cannot create a ZeroMQ socket");
    ak_keyring_t *ring = NULL;
    rc = ak_keyring_load (opts->keys_dir, &ring, &err);
    if (rc)
        return ak_cli_bad ("akcoord", "--keys: %s", err.msg);
    *nkeys_p = ak_keyring_size (ring);
    ak_keyring_destroy (&ring);
    return 0;
}

/* An integer flag in lo..hi (cli.h's wording). */
static int s_uint (const char *flag, const char *text, int64_t lo, int64_t hi, uint32_t *out)
{
    return ak_cli_uint ("akcoord", flag, text, lo, hi, out);
}

int main (int argc, char **argv)
{
    enum { O_STORE = 1, O_WORKERS, O_CLIENTS, O_HB, O_LIVE, O_CMS, O_CMAX, O_MAPSZ, O_MAPMAX, O_LOG,
           O_HELP, O_CERT, O_KEYS, O_PLAIN, O_CQUEUE, O_MALFORMED, O_VERSION, O_METRICS, O_METRICS_MS,
           O_SLOW, O_CSYNC, O_CTHREAD };
    static const struct option longopts[] = {
        { "store", required_argument, NULL, O_STORE },
        { "workers", required_argument, NULL, O_WORKERS },
        { "clients", required_argument, NULL, O_CLIENTS },
        { "heartbeat-ms", required_argument, NULL, O_HB },
        { "liveness", required_argument, NULL, O_LIVE },
        { "commit-ms", required_argument, NULL, O_CMS },
        { "commit-max", required_argument, NULL, O_CMAX },
        { "map-size", required_argument, NULL, O_MAPSZ },
        { "map-max", required_argument, NULL, O_MAPMAX },
        { "log-level", required_argument, NULL, O_LOG },
        { "help", no_argument, NULL, O_HELP },
        { "version", no_argument, NULL, O_VERSION },
        { "cert", required_argument, NULL, O_CERT },
        { "keys", required_argument, NULL, O_KEYS },
        { "plain", no_argument, NULL, O_PLAIN },
        { "client-queue", required_argument, NULL, O_CQUEUE },
        { "malformed-max", required_argument, NULL, O_MALFORMED },
        { "metrics", required_argument, NULL, O_METRICS },
        { "metrics-ms", required_argument, NULL, O_METRICS_MS },
        { "slow-wakeup-ms", required_argument, NULL, O_SLOW },
        { "commit-sync", no_argument, NULL, O_CSYNC },
        { "commit-thread-ms", required_argument, NULL, O_CTHREAD },
        { NULL, 0, NULL, 0 },
    };
    ak_malloc_tune (argv);      /* before getopt permutes argv */
    ak_coord_opts_t opts = {
        .workers_endpoint = "tcp://127.0.0.1:5555",
        .clients_endpoint = "tcp://127.0.0.1:5556",
        .heartbeat_ms = 1000, .liveness = 3, .commit_ms = 2, .commit_max = 256,
        .commit_thread_ms = AK_COORD_COMMIT_THREAD_MS, .stop_flag = &s_stop, .reload_flag = &s_reload,
    };
    /* for the test suite and benchmarks, before the flags (which win):
       AKCOORD_COMMIT_THREAD_MS (the fault tests put every commit on the
       writer thread: tests/CMakeLists.txt), AKCOORD_SLOW_COMMIT_MS (storage
       with a slow fsync, simulated: ops/bench/coord_scale.sh) */
    const char *const envs[] = { "AKCOORD_COMMIT_THREAD_MS", "AKCOORD_SLOW_COMMIT_MS" };
    uint32_t *const envto[] = { &opts.commit_thread_ms, &opts.commit_delay_ms };
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const char *v = getenv (envs[i]);
        int erc = v && *v ? s_uint (envs[i], v, 0, 10000, envto[i]) : 0;
        if (erc)
            return erc;
    }
    int level = -1;             /* none given: $AK_LOG_LEVEL, else info (log.h) */
    const char *metrics = NULL;
    int opt;
    opterr = 0;
    while ((opt = getopt_long (argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = 0;
        switch (opt) {
            case O_STORE:   opts.store_dir = optarg; break;
            case O_WORKERS: opts.workers_endpoint = optarg; break;
            case O_CLIENTS: opts.clients_endpoint = optarg; break;
            case O_HB:      rc = s_uint ("--heartbeat-ms", optarg, 10, 60000, &opts.heartbeat_ms); break;
            case O_LIVE:    rc = s_uint ("--liveness", optarg, 1, 100, &opts.liveness); break;
            case O_CMS:     rc = s_uint ("--commit-ms", optarg, 0, 10000, &opts.commit_ms); break;
            case O_CMAX:    rc = s_uint ("--commit-max", optarg, 1, 100000, &opts.commit_max); break;
            case O_MAPSZ:   rc = s_size ("--map-size", optarg, &opts.map_size); break;
            case O_MAPMAX:  rc = s_size ("--map-max", optarg, &opts.map_max); break;
            case O_CERT:    opts.cert_file = optarg; break;
            case O_KEYS:    opts.keys_dir = optarg; break;
            case O_PLAIN:   opts.plain = true; break;
            case O_CQUEUE:  rc = s_uint ("--client-queue", optarg, 1, 1000000, &opts.client_queue_max); break;
            case O_MALFORMED: rc = s_uint ("--malformed-max", optarg, 1, 1000000, &opts.malformed_max); break;
            case O_LOG:     rc = ak_cli_log_level ("akcoord", optarg, &level); break;
            case O_METRICS: metrics = optarg; break;
            case O_METRICS_MS: rc = s_uint ("--metrics-ms", optarg, 100, 60000, &opts.metrics_ms); break;
            case O_SLOW:    rc = s_uint ("--slow-wakeup-ms", optarg, 1, 60000, &opts.slow_wakeup_ms); break;
            case O_CSYNC:   opts.commit_sync = true; break;
            case O_CTHREAD: rc = s_uint ("--commit-thread-ms", optarg, 0, 10000, &opts.commit_thread_ms); break;
            case O_HELP:
            case 'h':
                s_usage (stdout);
                return 0;
            case O_VERSION:
                return ak_version_print ("akcoord");
            default:
                return ak_cli_getopt_error ("akcoord", opt, argv, optind);
        }
        if (rc)
            return rc;
    }
    if (optind < argc)
        return ak_cli_bad ("akcoord", "unexpected argument '%s'", argv[optind]);
    if (!opts.store_dir || !*opts.store_dir)
        return ak_cli_bad ("akcoord", "--store DIR is required");
    ak_err_t err = { 0 };
    if (ak_endpoint_check (opts.workers_endpoint, true, &err))
        return ak_cli_bad ("akcoord", "--workers: %s", err.msg);
    if (ak_endpoint_check (opts.clients_endpoint, true, &err))
        return ak_cli_bad ("akcoord", "--clients: %s", err.msg);
    if (opts.plain && (opts.cert_file || opts.keys_dir))
        return ak_cli_bad ("akcoord", "--plain and --cert/--keys exclude each other");
    if (!opts.plain && (!opts.cert_file || !opts.keys_dir))
        return ak_cli_bad ("akcoord", "no authentication configured: give --cert FILE and --keys DIR "
                           "(see `akctl keys` and docs/operations.md), or --plain to run without any");
    if (strcmp (opts.workers_endpoint, opts.clients_endpoint) == 0)
        return ak_cli_bad ("akcoord", "--workers and --clients must differ (both '%s')", opts.workers_endpoint);
    if (metrics && ak_metrics_addr_check (metrics, &err))
        return ak_cli_bad ("akcoord", "%s", err.msg);


    /* our handlers, not CZMQ's: the loop sees the flag and shuts down cleanly */
    zsys_handler_set (NULL);
    size_t nkeys = 0;
    if (!opts.plain) {
        int arc = s_check_auth (&opts, &nkeys);
        if (arc)
            return arc;
    }
    ak_log_set_ident ("akcoord");
    if (level >= 0)
        ak_log_set_level ((ak_log_level_t) level);
    ak_err_t nerr = { 0 };
    if (ak_sdnotify_init (&nerr))
        ak_warn ("%s", nerr.msg);
    if (!opts.plain && nkeys == 0)
        ak_warn ("WARNING: key directory %s holds no keys: no worker and no akctl can connect until "
                 "public keys are added under %s/worker, %s/operator or %s/viewer (`akctl keys new "
                 "NAME --role ROLE --dir %s`); they are read without a restart",
                 opts.keys_dir, opts.keys_dir, opts.keys_dir, opts.keys_dir, opts.keys_dir);

    /* one coordinator per store: the lock before the store is opened */
    ak_storelock_t *lock = NULL;
    int lrc = ak_storelock_take (opts.store_dir, &lock, &err);
    if (lrc) {
        ak_error ("cannot start: %s", err.msg);
        return lrc == AK_EEXIST ? 2 : 1;
    }
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset (&sa.sa_mask);
    if (sigaction (SIGINT, &sa, NULL) != 0 || sigaction (SIGTERM, &sa, NULL) != 0
        || sigaction (SIGHUP, &sa, NULL) != 0) {
        perror ("akcoord: sigaction");
        return 1;
    }
    signal (SIGPIPE, SIG_IGN);
    /* a file size limit (ulimit -f, systemd LimitFSIZE=) makes the store's
       writes fail (reported as "store full", the batch waits) instead of
       killing the coordinator in the middle of a commit */
    signal (SIGXFSZ, SIG_IGN);

    /* the metrics socket before the store is opened: a bad one stops the
       start with nothing done (2: an address not of this host; 1: in use) */
    ak_metrics_srv_t *srv = NULL;
    if (metrics) {
        int mrc = ak_metrics_srv_new (metrics, &srv, &err);
        if (mrc) {
            ak_error ("cannot start: %s", err.msg);
            ak_storelock_release (&lock);
            return mrc == AK_EINVAL ? 2 : 1;
        }
        opts.metrics = srv;
        ak_info ("metrics on %s (every %u ms)", ak_metrics_srv_url (srv), opts.metrics_ms ? opts.metrics_ms : 1000);
    }
    ak_coord_t *coord = NULL;
    int rc = ak_coord_new (&opts, &coord, &err);
    if (rc) {
        ak_error ("cannot start: %s", err.msg);
        ak_metrics_srv_destroy (&srv);
        ak_storelock_release (&lock);
        return 1;
    }
    (void) ak_sdnotify_ready ();
    rc = ak_coord_run (coord, &err);
    (void) ak_sdnotify_stopping ();
    if (rc)
        ak_error ("final commit failed: %s", err.msg);
    ak_coord_destroy (&coord);
    ak_metrics_srv_destroy (&srv);
    ak_storelock_release (&lock);
    ak_info ("stopped");
    return rc ? 1 : 0;
}
