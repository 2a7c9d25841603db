/*  worker/main.c: the akworker program.

    Two modes: the daemon (what operators run, see --help) and the hidden
    executor mode the daemon starts for each device
    (`akworker --executor --fd N --backend B --device I [--scratch DIR]`).  Bad flags are
    reported with the flag named and exit status 2.  Under systemd
    (Type=notify) the daemon says READY=1 once its backends and cache are
    set up and its loop (which starts the executors) is entered (not when the coordinator
    answers: a worker waiting for a coordinator that is down is doing its
    job, and systemd would otherwise fail the start), STOPPING=1 when it
    begins to stop, WATCHDOG=1 from its loop's tick (common/sdnotify.h). */
#include "auth.h"
#include "backend.h"
#include "backends.h"
#include "daemon.h"
#include "endpoint.h"
#include "error.h"
#include "executor.h"
#include "log.h"
#include "metrics_http.h"
#include "sdnotify.h"
#include "util.h"
#include "version.h"

#include <czmq.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit status when the coordinator refused this worker --max-refusals
   times in a row: restarting would not help (docs/operations.md). */
#define AK_WORKER_EXIT_REFUSED 3

static ak_daemon_t *s_daemon;

static void s_on_signal (int sig)
{
    (void) sig;
    (void) ak_sdnotify_stopping ();
    ak_daemon_stop (s_daemon);
}

static void s_usage (FILE *out)
{
    fprintf (out,
        "usage: akworker --coordinator ENDPOINT --id WORKER_ID [options]\n"
        "\n"
        "The akfleet worker daemon: registers with the coordinator, compiles the\n"
        "tasks it is assigned, runs them in per-device executor processes through\n"
        "the correctness gates and timing, and sends back a receipt for each.\n"
        "\n"
        "Options:\n"
        "  --coordinator ENDPOINT  coordinator worker endpoint, e.g. tcp://coord:5555 (required)\n"
        "  --id WORKER_ID          this worker's id at the coordinator (required)\n"
        "  --backend LIST          auto (default): the host (device class \"host\") plus every\n"
        "                          GPU the CUDA backend finds (class NAME/sm_XY/drvN/nvrtcM.m);\n"
        "                          or a comma list of host, cuda: only those, each required\n"
        "  --slots N               concurrent tasks per device (default 1)\n"
        "  --prefetch N            extra tasks held so compiles overlap runs, 0..64 (default: as\n"
        "                          many as compile threads)\n"
        "  --cache DIR             compile cache and receipt spool (unacknowledged receipts, sent\n"
        "                          again after a restart) (default $XDG_CACHE_HOME/akfleet or\n"
        "                          ~/.cache/akfleet)\n"
        "  --blob-cache-mb N       keep the spec and source texts of the tasks assigned, up to N MiB,\n"
        "                          so that each is sent once per registration; 0: off (default 64)\n"
        "  --ref-cache-mb N        per executor, keep the gates' inputs and float64 references\n"
        "                          for later tasks, up to N MiB; 0: off (default 2048;\n"
        "                          environment AK_REF_CACHE_MB)\n"
        "  --dref-cache-mb N       per executor, keep on the GPU the float64 outputs of device\n"
        "                          references (GPU-only workloads) for later tasks, up to N MiB;\n"
        "                          0: off (default 8192; environment AK_DREF_CACHE_MB)\n"
        "  --heartbeat-ms N        heartbeat interval (default 1000)\n"
        "  --liveness N            missed heartbeats before the coordinator counts as dead, counted\n"
        "                          from the end of the handshake (default 3)\n"
        "  --max-backoff-ms N      reconnect delay cap; delays start at 1000 and double, each wait\n"
        "                          drawn at random from [delay/2, delay] (default 32000)\n"
        "  --max-refusals N        stop with exit status 3 after the coordinator refused this worker\n"
        "                          N times in a row (its key, a worker id held by another key, a\n"
        "                          revoked key); 0: never stop (default 5)\n"
        "  --compile-threads N     compile pool size, 1..64 (default: one per core up to 8 cores,\n"
        "                          cores - 2 above, at most 32 and at most one per GiB of memory)\n"
        "  --cert FILE             this worker's secret certificate (NAME.key_secret from\n"
        "                          `akctl keys new NAME --role worker`): CURVE to the coordinator\n"
        "  --server-key KEY        the coordinator's public key: 40 Z85 characters or its\n"
        "                          certificate file (with --cert; without both: plain)\n"
        "  --metrics ADDR:PORT     serve Prometheus metrics on http://ADDR:PORT/metrics (off by\n"
        "                          default; 127.0.0.1:9465, [::1]:9465; port 0: any free port, logged)\n"
        "  --metrics-ms N          how often the loop renders the metrics, 100..60000 (default 1000)\n"
        "  --log-level LEVEL       debug|info|warn|error|quiet (default $AK_LOG_LEVEL, else info)\n"
        "  --version               print the version and exit\n"
        "  -h, --help              this text\n"
        "\n"
        "SIGINT or SIGTERM stops the worker cleanly (executors stopped, socket closed).\n"
        "Under systemd: Type=notify (READY=1 once its loop starts), WatchdogSec=, and log\n"
        "lines with their syslog priority when stderr is the journal.\n"
        "\n"
        "Exit status: 0 stopped by a signal, 1 a failure, 2 bad usage or configuration,\n"
        "3 refused by the coordinator --max-refusals times (restarting will not help:\n"
        "RestartPreventExitStatus=2 3 in the systemd unit).\n");
}

static int s_bad (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static int s_bad (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    fprintf (stderr, "akworker: ");
    vfprintf (stderr, fmt, ap);
    fprintf (stderr, "\nTry 'akworker --help'.\n");
    va_end (ap);
    return 2;
}

/*  Whole-string integer in [lo, hi] for flag name. */
static int s_uint (const char *name, const char *text, int64_t lo, int64_t hi, uint32_t *out)
{
    int64_t v = 0;
    if (ak_parse_i64 (text, &v) != 0 || v < lo || v > hi)
        return s_bad ("%s: expected an integer in %lld..%lld, got '%s'", name,
                      (long long) lo, (long long) hi, text);
    *out = (uint32_t) v;
    return 0;
}

enum {
    O_COORD = 256, O_ID, O_BACKEND, O_SLOTS, O_PREFETCH, O_CACHE, O_HB, O_LIVENESS, O_BLOBS,
    O_MAXBACK, O_MAXREFUSALS, O_CTHREADS, O_LOGLEVEL, O_HELP, O_VERSION, O_EXECUTOR, O_FD, O_DEVICE, O_CERT, O_SERVERKEY, O_REFCACHE, O_DREFCACHE,
    O_METRICS, O_METRICS_MS, O_SCRATCH,
};

static int s_executor_mode (int fd, const char *backend, uint32_t device, const char *scratch)
{
    ak_log_set_ident ("akworker-exec");
    if (fd < 0 || fcntl (fd, F_GETFD) < 0)
        return s_bad ("--executor: --fd %d is not an open descriptor", fd);
    if (!ak_backend_find (backend))
        return s_bad ("--executor: backend '%s' is not available in this build", backend);
    if (scratch && scratch[0] != '/')
        return s_bad ("--executor: --scratch '%s' is not an absolute path", scratch);
    return ak_executor_main (fd, backend, device, scratch);
}

int main (int argc, char **argv)
{
    static const struct option opts[] = {
        { "coordinator",     required_argument, NULL, O_COORD },
        { "id",              required_argument, NULL, O_ID },
        { "backend",         required_argument, NULL, O_BACKEND },
        { "slots",           required_argument, NULL, O_SLOTS },
        { "prefetch",        required_argument, NULL, O_PREFETCH },
        { "ref-cache-mb",    required_argument, NULL, O_REFCACHE },
        { "dref-cache-mb",   required_argument, NULL, O_DREFCACHE },
        { "cache",           required_argument, NULL, O_CACHE },
        { "heartbeat-ms",    required_argument, NULL, O_HB },
        { "liveness",        required_argument, NULL, O_LIVENESS },
        { "blob-cache-mb",   required_argument, NULL, O_BLOBS },
        { "max-backoff-ms",  required_argument, NULL, O_MAXBACK },
        { "max-refusals",    required_argument, NULL, O_MAXREFUSALS },
        { "compile-threads", required_argument, NULL, O_CTHREADS },
        { "log-level",       required_argument, NULL, O_LOGLEVEL },
        { "help",            no_argument,       NULL, O_HELP },
        { "version",         no_argument,       NULL, O_VERSION },
        { "executor",        no_argument,       NULL, O_EXECUTOR },
        { "fd",              required_argument, NULL, O_FD },
        { "device",          required_argument, NULL, O_DEVICE },
        { "scratch",         required_argument, NULL, O_SCRATCH },
        { "cert",            required_argument, NULL, O_CERT },
        { "server-key",      required_argument, NULL, O_SERVERKEY },
        { "metrics",         required_argument, NULL, O_METRICS },
        { "metrics-ms",      required_argument, NULL, O_METRICS_MS },
        { NULL, 0, NULL, 0 },
    };
    ak_daemon_config_t cfg;
    ak_daemon_config_defaults (&cfg);
    bool executor = false;
    const char *scratch = NULL;
    const char *metrics = NULL;
    uint32_t fd = 0, device = 0;
    bool have_fd = false;
    int rc = 0;

    ak_log_set_ident ("akworker");
    opterr = 0;
    int c;
    while ((c = getopt_long (argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
            case O_COORD:    cfg.coordinator = optarg; break;
            case O_ID:       cfg.worker_id = optarg; break;
            case O_BACKEND:  cfg.backend = optarg; break;
            case O_CACHE:    cfg.cache_dir = optarg; break;
            case O_SLOTS:    if ((rc = s_uint ("--slots", optarg, 1, 64, &cfg.slots))) return rc; break;
            case O_PREFETCH: if ((rc = s_uint ("--prefetch", optarg, 0, 64, &cfg.prefetch))) return rc; break;
            case O_HB:       if ((rc = s_uint ("--heartbeat-ms", optarg, 10, 600000, &cfg.heartbeat_ms))) return rc; break;
            case O_LIVENESS: if ((rc = s_uint ("--liveness", optarg, 1, 100, &cfg.liveness))) return rc; break;
            case O_BLOBS:    if ((rc = s_uint ("--blob-cache-mb", optarg, 0, 65536, &cfg.blob_cache_mb))) return rc; break;
            case O_MAXBACK:  if ((rc = s_uint ("--max-backoff-ms", optarg, 1, 3600000, &cfg.max_backoff_ms))) return rc; break;
            case O_MAXREFUSALS: if ((rc = s_uint ("--max-refusals", optarg, 0, 1000000, &cfg.max_refusals))) return rc; break;
            case O_CTHREADS: if ((rc = s_uint ("--compile-threads", optarg, 1, 64, &cfg.compile_threads))) return rc; break;
            case O_FD:       if ((rc = s_uint ("--fd", optarg, 0, 65535, &fd))) return rc; have_fd = true; break;
            case O_DEVICE:   if ((rc = s_uint ("--device", optarg, 0, 1023, &device))) return rc; break;
            case O_EXECUTOR: executor = true; break;
            case O_SCRATCH:  scratch = optarg; break;
            case O_CERT:     cfg.cert_file = optarg; break;
            case O_SERVERKEY: cfg.server_key = optarg; break;
            case O_REFCACHE:
            case O_DREFCACHE: {
                /* The executors read it from their environment (refcache.h);
                   set before any thread or child exists. */
                const char *flag = c == O_REFCACHE ? "--ref-cache-mb" : "--dref-cache-mb";
                uint32_t mb = 0;
                if ((rc = s_uint (flag, optarg, 0, 1u << 20, &mb)))
                    return rc;
                char text[16];
                snprintf (text, sizeof text, "%u", mb);
                if (setenv (c == O_REFCACHE ? "AK_REF_CACHE_MB" : "AK_DREF_CACHE_MB", text, 1) != 0)
                    return s_bad ("%s: setenv failed", flag);
                break;
            }
            case O_METRICS:  metrics = optarg; break;
            case O_METRICS_MS: if ((rc = s_uint ("--metrics-ms", optarg, 100, 60000, &cfg.metrics_ms))) return rc; break;
            case O_LOGLEVEL: {
                int level = ak_log_parse_level (optarg);
                if (level < 0)
                    return s_bad ("--log-level: expected debug|info|warn|error|quiet, got '%s'", optarg);
                ak_log_set_level ((ak_log_level_t) level);
                cfg.log_level = optarg;
                break;
            }
            case O_HELP:
            case 'h':
                s_usage (stdout);
                return 0;
            case O_VERSION:
                return ak_version_print ("akworker");
            case ':':
                return s_bad ("%s: needs a value", argv[optind - 1]);
            default:
                return s_bad ("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return s_bad ("unexpected argument '%s'", argv[optind]);

    if (executor) {
        if (!have_fd)
            return s_bad ("--executor needs --fd");
        return s_executor_mode ((int) fd, strcmp (cfg.backend, "auto") == 0 ? "host" : cfg.backend,
                                device, scratch);
    }
    if (!cfg.coordinator)
        return s_bad ("--coordinator ENDPOINT is required");
    if (!cfg.worker_id)
        return s_bad ("--id WORKER_ID is required");
    ak_err_t eerr = { 0 };
    if (ak_endpoint_check (cfg.coordinator, false, &eerr))
        return s_bad ("--coordinator: %s", eerr.msg);
    if (cfg.cert_file || cfg.server_key) {
        /* a bad certificate is a configuration error for now, not a retry loop */
        ak_err_t aerr = { 0 };
        zsock_t *probe = zsock_new (ZMQ_DEALER);
        int arc = probe ? ak_auth_client_setup (probe, cfg.cert_file, cfg.server_key, &aerr) : AK_EIO;
        zsock_destroy (&probe);
        if (arc)
            return s_bad ("%s", aerr.msg[0] ? aerr.msg : "cannot create a ZeroMQ socket");
    }
    if (cfg.max_backoff_ms < cfg.min_backoff_ms)
        cfg.min_backoff_ms = cfg.max_backoff_ms;
    if (metrics && ak_metrics_addr_check (metrics, &eerr))
        return s_bad ("%s", eerr.msg);

    /* Our handlers, not CZMQ's: a signal must stop the loop through the
       daemon's wake-up pipe. */
    zsys_handler_set (NULL);
    ak_err_t nerr = { 0 };
    if (ak_sdnotify_init (&nerr))       /* before the executors start: they must not inherit it */
        ak_warn ("%s", nerr.msg);
    ak_err_t err = { 0 };
    ak_metrics_srv_t *srv = NULL;
    if (metrics) {
        rc = ak_metrics_srv_new (metrics, &srv, &err);
        if (rc) {
            fprintf (stderr, "akworker: %s\n", err.msg);
            return rc == AK_EINVAL ? 2 : 1;
        }
        cfg.metrics = srv;
    }
    rc = ak_daemon_new (&cfg, &s_daemon, &err);
    if (rc) {
        fprintf (stderr, "akworker: %s\n", err.msg);
        ak_metrics_srv_destroy (&srv);
        return rc == AK_EINVAL ? 2 : 1;
    }
    if (srv)
        ak_info ("metrics on %s (every %u ms)", ak_metrics_srv_url (srv), cfg.metrics_ms ? cfg.metrics_ms : 1000);
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction (SIGPIPE, &sa, NULL);

    (void) ak_sdnotify_ready ();
    rc = ak_daemon_run (s_daemon, &err);
    (void) ak_sdnotify_stopping ();
    if (rc)
        ak_error ("%s", err.msg);
    sa.sa_handler = SIG_DFL;
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    ak_daemon_t *d = s_daemon;
    s_daemon = NULL;
    ak_daemon_destroy (&d);
    ak_metrics_srv_destroy (&srv);
    ak_info ("stopped");
    if (rc == AK_EDENIED)
        return AK_WORKER_EXIT_REFUSED;
    return rc ? 1 : 0;
}
