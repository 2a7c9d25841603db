/*  ops/akload/main.c: akload's options, its event loop, start and stop
    (akload.h says what the tool is). */
#include "akload.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>
#include "auth.h"
#include "cli.h"
#include "clock.h"
#include "endpoint.h"
#include "log.h"
#include "util.h"
#include "version.h"

static volatile sig_atomic_t s_stop = 0;

static void s_on_signal (int sig)
{
    (void) sig;
    s_stop = 1;
}

// ================================================================ the model
// ================================================================ lifecycle

/* Raises the open-file limit to what n sockets need (each DEALER holds a
   mailbox descriptor and a TCP connection, its handshake monitor two more
   sockets with a mailbox each). */
static int s_raise_fd_limit (uint32_t workers, ak_err_t *err)
{
    struct rlimit rl;
    rlim_t need = (rlim_t) workers * 5 + 256;
    if (getrlimit (RLIMIT_NOFILE, &rl) != 0)
        return ak_err_set (err, AK_EIO, "getrlimit (RLIMIT_NOFILE): %s", strerror (errno));
    if (rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        return ak_err_set (err, AK_EINVAL, "%u workers need about %llu open files, the hard limit is %llu "
                           "(raise it with ulimit -Hn)", workers, (unsigned long long) need,
                           (unsigned long long) rl.rlim_max);
    rl.rlim_cur = need;
    if (setrlimit (RLIMIT_NOFILE, &rl) != 0)
        return ak_err_set (err, AK_EIO, "setrlimit (RLIMIT_NOFILE, %llu): %s", (unsigned long long) need,
                           strerror (errno));
    return 0;
}

static int s_load_new (const akl_opts_t *opts, akl_load_t **self_p, ak_err_t *err)
{
    *self_p = NULL;
    int rc = s_raise_fd_limit (opts->workers, err);
    if (rc)
        return rc;
    akl_load_t *self = ak_calloc (1, sizeof *self);
    self->opts = *opts;
    if (gethostname (self->host, sizeof self->host - 1) != 0)
        snprintf (self->host, sizeof self->host, "localhost");
    self->pid = (uint32_t) getpid ();
    self->ctx = zmq_ctx_new ();
    if (!self->ctx) {
        free (self);
        return ak_err_set (err, AK_EIO, "zmq_ctx_new: %s", zmq_strerror (zmq_errno ()));
    }
    if (zmq_ctx_set (self->ctx, ZMQ_MAX_SOCKETS, (int) opts->workers * 3 + 64) != 0) {
        rc = ak_err_set (err, AK_EIO, "zmq_ctx_set (ZMQ_MAX_SOCKETS, %u): %s", opts->workers * 3 + 64,
                         zmq_strerror (zmq_errno ()));
        if (zmq_ctx_term (self->ctx) != 0)
            ak_error ("zmq_ctx_term: %s", zmq_strerror (zmq_errno ()));
        free (self);
        return rc;
    }
    self->epoll = epoll_create1 (EPOLL_CLOEXEC);
    if (self->epoll < 0) {
        rc = ak_err_set (err, AK_EIO, "epoll_create1: %s", strerror (errno));
        if (zmq_ctx_term (self->ctx) != 0)
            ak_error ("zmq_ctx_term: %s", zmq_strerror (zmq_errno ()));
        free (self);
        return rc;
    }
    self->sims = ak_calloc (opts->workers, sizeof *self->sims);
    self->ready = ak_calloc (opts->workers, sizeof *self->ready);
    self->batch = ak_calloc (opts->workers, sizeof *self->batch);
    for (uint32_t i = 0; i < opts->workers; i++) {
        akl_sim_t *sim = &self->sims[i];
        snprintf (sim->id, sizeof sim->id, "%s-%u", opts->prefix, i + 1);
        sim->backoff_ms = opts->backoff_ms;
    }
    *self_p = self;
    return 0;
}

static void s_load_destroy (akl_load_t **self_p)
{
    if (self_p && *self_p) {
        akl_load_t *self = *self_p;
        for (uint32_t i = 0; i < self->opts.workers; i++) {
            akl_sim_t *sim = &self->sims[i];
            akl_close (self, sim, AKL_LINGER_MS);
            for (size_t k = 0; k < sim->ntasks; k++)
                akl_task_free (&sim->tasks[k]);
            free (sim->tasks);
            for (size_t k = 0; k < sim->npending; k++)
                akl_pending_free (&sim->pending[k]);
            free (sim->pending);
            free (sim->credit_ns);
            ak_blobcache_destroy (&sim->blobs);
        }
        if (zmq_ctx_term (self->ctx) != 0)
            ak_error ("zmq_ctx_term: %s", zmq_strerror (zmq_errno ()));
        if (close (self->epoll) != 0)
            ak_error ("close (epoll): %s", strerror (errno));
        free (self->sims);
        free (self->ready);
        free (self->batch);
        free (self->lat_us);
        free (self->commit_us);
        free (self->credit_us);
        free (self->credit_at_us);
        free (self->due);
        free (self);
        *self_p = NULL;
    }
}

void akl_all_registered (akl_load_t *self, uint64_t now_ns)
{
    self->all_registered_ns = now_ns;
    ak_info ("every simulated worker registered, %.3f s after the start",
             (double) (now_ns - self->start_ns) / 1e9);
    if (self->opts.warmup_from_registered) {
        self->window_ns = now_ns + (uint64_t) self->opts.warmup_s * 1000000000ull;
        if (self->opts.duration_s) {
            self->window_end_ns = self->window_ns
                                  + (uint64_t) (self->opts.duration_s - self->opts.warmup_s) * 1000000000ull;
            self->stop_ms = self->window_end_ns / 1000000 + (uint64_t) self->opts.cooldown_s * 1000;
        }
    }
    if (self->opts.ready_file) {
        char text[64];
        int n = snprintf (text, sizeof text, "%.3f\n", (double) (now_ns - self->start_ns) / 1e9);
        ak_err_t err = { 0 };
        if (ak_file_write_atomic (self->opts.ready_file, text, (size_t) n, &err) != 0) {
            ak_error ("--ready-file: %s", err.msg);
            self->ready_failed = true;
        }
    }
}

/* --samples: every credit->assign sample of the window as "AT_US LAT_US"
   lines (when the credit was freed, from the window's start; its wait),
   in the order the ASSIGNs came.  Before the statistics, which sort them. */
static int s_write_samples (akl_load_t *self, ak_err_t *err)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream (&buf, &size);
    if (!f)
        return ak_err_set (err, AK_EIO, "--samples: open_memstream: %s", strerror (errno));
    for (size_t i = 0; i < self->ncredit; i++)
        fprintf (f, "%" PRIu32 " %" PRIu32 "\n", self->credit_at_us[i], self->credit_us[i]);
    int rc = 0;
    if (fclose (f) != 0)
        rc = ak_err_set (err, AK_EIO, "--samples: cannot format %zu samples", self->ncredit);
    else if (ak_file_write_atomic (self->opts.samples_file, buf ? buf : "", size, err) != 0)
        rc = err->code ? err->code : AK_EIO;
    free (buf);
    return rc;
}

/* Runs until a signal or the duration; 0, or an error from epoll_wait. */
static int s_load_run (akl_load_t *self, ak_err_t *err)
{
    self->start_ns = ak_clock_mono_ns ();
    uint64_t now = self->start_ns / 1000000;
    uint64_t dur_ns = (uint64_t) self->opts.duration_s * 1000000000ull;
    if (self->opts.warmup_from_registered) {
        /* opened by akl_all_registered; no later than the duration */
        self->window_ns = self->window_end_ns = UINT64_MAX;
        self->stop_ms = self->opts.duration_s ? now + (uint64_t) self->opts.duration_s * 1000 : 0;
    } else {
        self->window_ns = self->start_ns + (uint64_t) self->opts.warmup_s * 1000000000ull;
        self->window_end_ns = dur_ns ? self->start_ns + dur_ns : UINT64_MAX;
        self->stop_ms = dur_ns ? now + ((uint64_t) self->opts.duration_s + self->opts.cooldown_s) * 1000 : 0;
    }
    uint64_t next_progress = now + AKL_PROGRESS_MS;
    uint64_t last_acks = 0;
    int rc = 0;
    ak_info ("%u simulated workers (%s-1 .. %s-%u, class %s, slots %u, prefetch %u, task %u ms) "
             "against %s: a load test, no kernel runs", self->opts.workers, self->opts.prefix,
             self->opts.prefix, self->opts.workers, self->opts.device_class, self->opts.slots,
             self->opts.prefetch, self->opts.task_ms, self->opts.endpoint);
    akl_all_timers (self, now);
    while (!s_stop) {
        now = ak_clock_mono_ms ();
        uint64_t end = self->stop_ms;       /* moves when the window opens late */
        if (end && now >= end)
            break;
        uint64_t wake = self->next_wake;
        if (self->ndue && self->due[0].due_ms < wake)
            wake = self->due[0].due_ms;
        if (end && end < wake)
            wake = end;
        int timeout = self->nready || wake <= now ? 0 : (int) (wake - now);
        struct epoll_event evs[AKL_EVENTS];
        int n = epoll_wait (self->epoll, evs, AKL_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = ak_err_set (err, AK_EIO, "epoll_wait: %s", strerror (errno));
            break;
        }
        now = ak_clock_mono_ms ();
        for (int i = 0; i < n; i++) {
            uint32_t data = evs[i].data.u32, index = data & ~AKL_MON_BIT;
            if (index >= self->opts.workers)
                continue;
            if (data & AKL_MON_BIT)
                akl_handshakes (self, &self->sims[index], now);
            else
                akl_mark_ready (self, &self->sims[index]);
        }
        akl_read_ready (self);
        now = ak_clock_mono_ms ();
        akl_due_tasks (self, now);
        if (now >= self->next_wake)
            akl_all_timers (self, now);
        if (now >= next_progress) {
            size_t unacked = 0;
            for (uint32_t i = 0; i < self->opts.workers; i++)
                unacked += self->sims[i].npending;
            ak_info ("progress: %" PRIu64 " acks (%.0f/s over the last %d s), %zu receipts unacked, "
                     "%" PRIu64 " reconnects", self->c.acks,
                     (double) (self->c.acks - last_acks) * 1000.0 / AKL_PROGRESS_MS, AKL_PROGRESS_MS / 1000,
                     unacked, self->c.reconnects);
            last_acks = self->c.acks;
            next_progress = now + AKL_PROGRESS_MS;
        }
    }
    self->end_ns = ak_clock_mono_ns ();
    if (rc == 0 && !s_stop && self->window_ns == UINT64_MAX)
        rc = ak_err_set (err, AK_ESTATE, "%u of %u simulated workers registered within --duration-s %u: "
                         "the window (--warmup-from registered) never opened", self->nregistered,
                         self->opts.workers, self->opts.duration_s);
    /* leaving: the coordinator re-queues what we held at once */
    for (uint32_t i = 0; i < self->opts.workers; i++) {
        akl_sim_t *sim = &self->sims[i];
        if (!sim->sock)
            continue;
        Ak__Disconnect d = AK__DISCONNECT__INIT;
        d.reason = (char *) "akload stopping";
        Ak__Envelope env = AK__ENVELOPE__INIT;
        env.body_case = AK__ENVELOPE__BODY_DISCONNECT;
        env.disconnect = &d;
        akl_send (self, sim, &env);
    }
    return rc;
}

// ==================================================================== main

static void s_usage (FILE *out)
{
    fprintf (out,
        "usage: akload --coordinator EP --workers N [options]\n"
        "\n"
        "A LOAD-TEST tool: simulates N workers against akcoord, each its own DEALER\n"
        "socket speaking the real worker protocol, none running a kernel.  Every\n"
        "ASSIGN gets STARTED and, --task-ms later, a receipt with status \"ok\",\n"
        "reason \"" AKL_REASON "\" and zero timings.\n"
        "Point it only at a coordinator whose batches exist for load tests.\n"
        "\n"
        "  --coordinator EP     the coordinator's worker endpoint, tcp:// or ipc:// (required)\n"
        "  --workers N          simulated workers, 1..%d (required)\n"
        "  --prefix P           worker ids are P-1 .. P-N (default load)\n"
        "  --class C            device class of every simulated device (default host)\n"
        "  --slots S            slots per worker (default 1)\n"
        "  --prefetch P         prefetch per worker (default 1)\n"
        "  --task-ms MS         time from STARTED to RECEIPT (default 0)\n"
        "  --duration-s S       stop after S seconds (default 0: until SIGTERM/SIGINT), and\n"
        "                       --cooldown-s later; with --warmup-from registered, S seconds\n"
        "                       after the last registration\n"
        "  --warmup-s S         leave the first S seconds out of the round-trip rate and\n"
        "                       the latencies (default 0)\n"
        "  --warmup-from W      start: the warm-up counts from the start (default);\n"
        "                       registered: from when every simulated worker has been heard\n"
        "                       once (a slow cold start, e.g. 1000 CURVE handshakes, stays out\n"
        "                       of the window); the window then lasts --duration-s less\n"
        "                       --warmup-s, and the run fails (exit 1) if not all register\n"
        "                       within --duration-s\n"
        "  --cooldown-s S       keep the load running S seconds after the window, sampling\n"
        "                       nothing (a harness's probes there do not fall in it; default 0)\n"
        "  --ready-file FILE    write the seconds from the start to the last registration\n"
        "                       there once every simulated worker has been heard\n"
        "  --samples FILE       write every credit->assign sample of the window there on exit,\n"
        "                       a line each: when the credit was freed (us from the window's\n"
        "                       start) and its wait for the ASSIGN (us)\n"
        "  --stats-json FILE    write the statistics there as JSON on exit\n"
        "  --heartbeat-ms N     heartbeat interval, 10..60000 (default 1000)\n"
        "  --blob-cache-mb N    each worker's blob cache, as akworker's; 0: off (default 64)\n"
        "  --liveness N         silent intervals after the handshake before the coordinator\n"
        "                       is dead (default 3)\n"
        "  --backoff-ms N       first reconnect delay, doubling up to 32x, each wait drawn at\n"
        "                       random from [delay/2, delay] (default 1000)\n"
        "  --cert FILE          a worker's secret certificate, used by every simulated worker\n"
        "                       (CURVE; default $AK_CERT)\n"
        "  --server-key KEY     the coordinator's public key, Z85 or its certificate file\n"
        "                       (default $AK_SERVER_KEY); without both: plain\n"
        "  --log-level LEVEL    debug | info | warn | error | quiet (default $AK_LOG_LEVEL,\n"
        "                       else info)\n"
        "  --version            print the version and exit\n"
        "  -h, --help           this text\n"
        "\n"
        "Statistics (stdout, and --stats-json): receipts sent, acks received, duplicates\n"
        "acked, round trips per second (acks after the warm-up / window), the\n"
        "dispatch->ack latency from ASSIGN received to ACK received and the\n"
        "receipt->ack latency from RECEIPT sent to ACK received, and the\n"
        "credit->assign latency from a credit freed (HELLO sent, or a RECEIPT sent,\n"
        "which frees its slot) to the ASSIGN that uses it (p50, p99, max), for credits\n"
        "freed after the warm-up.  Latencies are counted for ACKs and ASSIGNs after it.\n"
        "Exit status: 0 after SIGTERM/SIGINT or the duration, 1 on a failure, 2 for bad flags.\n",
        AKL_MAX_WORKERS);
}

/* An integer flag in lo..hi (cli.h's wording). */
static int s_uint (const char *flag, const char *text, int64_t lo, int64_t hi, uint32_t *out)
{
    return ak_cli_uint ("akload", flag, text, lo, hi, out);
}

int main (int argc, char **argv)
{
    enum { O_COORD = 1, O_WORKERS, O_PREFIX, O_CLASS, O_SLOTS, O_PREFETCH, O_TASK, O_DUR, O_WARM,
           O_JSON, O_HB, O_BLOBS, O_LIVE, O_BACKOFF, O_LOG, O_HELP, O_CERT, O_SKEY, O_VERSION,
           O_WFROM, O_COOL, O_READY, O_SAMPLES };
    static const struct option longopts[] = {
        { "coordinator", required_argument, NULL, O_COORD },
        { "workers", required_argument, NULL, O_WORKERS },
        { "prefix", required_argument, NULL, O_PREFIX },
        { "class", required_argument, NULL, O_CLASS },
        { "slots", required_argument, NULL, O_SLOTS },
        { "prefetch", required_argument, NULL, O_PREFETCH },
        { "task-ms", required_argument, NULL, O_TASK },
        { "duration-s", required_argument, NULL, O_DUR },
        { "warmup-s", required_argument, NULL, O_WARM },
        { "warmup-from", required_argument, NULL, O_WFROM },
        { "cooldown-s", required_argument, NULL, O_COOL },
        { "ready-file", required_argument, NULL, O_READY },
        { "samples", required_argument, NULL, O_SAMPLES },
        { "stats-json", required_argument, NULL, O_JSON },
        { "heartbeat-ms", required_argument, NULL, O_HB },
        { "blob-cache-mb", required_argument, NULL, O_BLOBS },
        { "liveness", required_argument, NULL, O_LIVE },
        { "backoff-ms", required_argument, NULL, O_BACKOFF },
        { "log-level", required_argument, NULL, O_LOG },
        { "help", no_argument, NULL, O_HELP },
        { "version", no_argument, NULL, O_VERSION },
        { "cert", required_argument, NULL, O_CERT },
        { "server-key", required_argument, NULL, O_SKEY },
        { NULL, 0, NULL, 0 },
    };
    ak_malloc_tune (argv);      /* before getopt permutes argv */
    akl_opts_t opts = {
        .prefix = "load", .device_class = "host", .slots = 1, .prefetch = 1,
        .heartbeat_ms = 1000, .blob_cache_mb = 64, .liveness = 3, .backoff_ms = 1000,
    };
    int level = -1;             /* none given: $AK_LOG_LEVEL, else info (log.h) */
    int opt;
    opterr = 0;
    while ((opt = getopt_long (argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = 0;
        switch (opt) {
            case O_COORD:    opts.endpoint = optarg; break;
            case O_WORKERS:  rc = s_uint ("--workers", optarg, 1, AKL_MAX_WORKERS, &opts.workers); break;
            case O_PREFIX:   opts.prefix = optarg; break;
            case O_CLASS:    opts.device_class = optarg; break;
            case O_SLOTS:    rc = s_uint ("--slots", optarg, 1, 65536, &opts.slots); break;
            case O_PREFETCH: rc = s_uint ("--prefetch", optarg, 0, 65536, &opts.prefetch); break;
            case O_TASK:     rc = s_uint ("--task-ms", optarg, 0, 3600000, &opts.task_ms); break;
            case O_DUR:      rc = s_uint ("--duration-s", optarg, 0, 86400 * 7, &opts.duration_s); break;
            case O_WARM:     rc = s_uint ("--warmup-s", optarg, 0, 86400, &opts.warmup_s); break;
            case O_WFROM:
                if (strcmp (optarg, "start") == 0 || strcmp (optarg, "registered") == 0)
                    opts.warmup_from_registered = strcmp (optarg, "registered") == 0;
                else
                    rc = ak_cli_bad ("akload", "--warmup-from: '%s' is neither start nor registered", optarg);
                break;
            case O_COOL:     rc = s_uint ("--cooldown-s", optarg, 0, 86400, &opts.cooldown_s); break;
            case O_READY:    opts.ready_file = optarg; break;
            case O_SAMPLES:  opts.samples_file = optarg; break;
            case O_JSON:     opts.stats_json = optarg; break;
            case O_CERT:     opts.cert_file = optarg; break;
            case O_SKEY:     opts.server_key = optarg; break;
            case O_HB:       rc = s_uint ("--heartbeat-ms", optarg, 10, 60000, &opts.heartbeat_ms); break;
            case O_BLOBS:    rc = s_uint ("--blob-cache-mb", optarg, 0, 65536, &opts.blob_cache_mb); break;
            case O_LIVE:     rc = s_uint ("--liveness", optarg, 1, 100, &opts.liveness); break;
            case O_BACKOFF:  rc = s_uint ("--backoff-ms", optarg, 1, 32000, &opts.backoff_ms); break;
            case O_LOG:      rc = ak_cli_log_level ("akload", optarg, &level); break;
            case O_HELP:
            case 'h':
                s_usage (stdout);
                return 0;
            case O_VERSION:
                return ak_version_print ("akload");
            default:
                return ak_cli_getopt_error ("akload", opt, argv, optind);
        }
        if (rc)
            return rc;
    }
    if (optind < argc)
        return ak_cli_bad ("akload", "unexpected argument '%s'", argv[optind]);
    if (!opts.endpoint)
        return ak_cli_bad ("akload", "--coordinator EP is required");
    ak_err_t eerr = { 0 };
    if (ak_endpoint_check (opts.endpoint, false, &eerr))
        return ak_cli_bad ("akload", "--coordinator: %s", eerr.msg);
    if (!opts.workers)
        return ak_cli_bad ("akload", "--workers N is required");
    char longest[AKL_MAX_ID + 64];
    snprintf (longest, sizeof longest, "%s-%u", opts.prefix, opts.workers);
    if (!*opts.prefix || !ak_str_token (longest, AKL_MAX_ID))
        return ak_cli_bad ("akload", "--prefix: '%s' must make worker ids of 1..128 printable characters without spaces",
                      opts.prefix);
    if (!ak_str_token (opts.device_class, AKL_MAX_CLASS))
        return ak_cli_bad ("akload", "--class: '%s' must be 1..64 printable characters without spaces", opts.device_class);
    if (opts.warmup_s && opts.duration_s && opts.warmup_s >= opts.duration_s)
        return ak_cli_bad ("akload", "--warmup-s must be shorter than --duration-s");
    if (opts.cooldown_s && !opts.duration_s)
        return ak_cli_bad ("akload", "--cooldown-s needs --duration-s (the window ends with the duration)");
    opts.max_backoff_ms = opts.backoff_ms * 32;     /* 1 s doubling to 32 s by default */
    if (!opts.cert_file && getenv ("AK_CERT") && *getenv ("AK_CERT"))
        opts.cert_file = getenv ("AK_CERT");
    if (!opts.server_key && getenv ("AK_SERVER_KEY") && *getenv ("AK_SERVER_KEY"))
        opts.server_key = getenv ("AK_SERVER_KEY");
    if (opts.cert_file || opts.server_key) {
        ak_err_t aerr = { 0 };
        void *ctx = zmq_ctx_new ();
        void *probe = ctx ? zmq_socket (ctx, ZMQ_DEALER) : NULL;
        int arc = probe ? ak_auth_client_setup (probe, opts.cert_file, opts.server_key, &aerr) : AK_EIO;
        if (probe)
            zmq_close (probe);
        if (ctx)
            zmq_ctx_term (ctx);
        if (arc)
            return ak_cli_bad ("akload", "%s", aerr.msg[0] ? aerr.msg : "cannot create a ZeroMQ socket");
    }

    ak_log_set_ident ("akload");
    if (level >= 0)
        ak_log_set_level ((ak_log_level_t) level);
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset (&sa.sa_mask);
    if (sigaction (SIGINT, &sa, NULL) != 0 || sigaction (SIGTERM, &sa, NULL) != 0) {
        perror ("akload: sigaction");
        return 1;
    }
    signal (SIGPIPE, SIG_IGN);

    ak_err_t err = { 0 };
    akl_load_t *load = NULL;
    int rc = s_load_new (&opts, &load, &err);
    if (rc) {
        ak_error ("cannot start: %s", err.msg);
        return 1;
    }
    rc = s_load_run (load, &err);
    if (rc)
        ak_error ("%s", err.msg);
    if (opts.samples_file) {
        ak_err_t serr = { 0 };
        if (s_write_samples (load, &serr) != 0) {
            ak_error ("%s", serr.msg);
            rc = rc ? rc : AK_EIO;
        }
    }
    if (load->ready_failed)
        rc = rc ? rc : AK_EIO;
    json_t *stats = akl_stats_json (load);
    akl_print_stats (load, stats);
    if (opts.stats_json) {
        char *text = json_dumps (stats, JSON_INDENT (2) | JSON_SORT_KEYS);
        ak_err_t werr = { 0 };
        if (!text || ak_file_write_atomic (opts.stats_json, text, strlen (text), &werr) != 0) {
            ak_error ("--stats-json: %s", text ? werr.msg : "cannot encode the statistics");
            rc = rc ? rc : AK_EIO;
        }
        free (text);
    }
    json_decref (stats);
    s_load_destroy (&load);
    return rc ? 1 : 0;
}
