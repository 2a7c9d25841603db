/*  worker/daemon.h: the akworker daemon.

    One per host.  A single event loop (zmq_poll over the DEALER socket to
    the coordinator, the executors' sockets and a wake-up pipe, plus a timer
    tick) speaks docs/protocol.md: HELLO with the probed devices, heartbeats
    both ways, ASSIGNs into a local queue, compiles on a small thread pool
    so they overlap the running task, STARTED when an executor takes a job,
    RECEIPTs kept until ACKed (in memory and in the spool CACHE/receipts/ID,
    which a restart loads again) and re-sent after every (re-)registration.
    The link itself is worker/uplink.h: a coordinator silent for `liveness`
    heartbeats after the handshake is dropped (the socket is closed and a
    new one connects after a jittered backoff, 1 s doubling to 32 s); a
    coordinator that refuses this worker (its key, or a DISCONNECT with a
    refusal code) is logged at ERROR, and after max_refusals in a row the
    daemon stops (ak_daemon_run: AK_EDENIED, akworker exits 3).

    Never: block the loop on a compile, a candidate or the network; trust a
    message; lose a receipt before its ACK, even across a restart. */
#ifndef AK_WORKER_DAEMON_H
#define AK_WORKER_DAEMON_H
#include <stdint.h>
#include "error.h"
#include "metrics_http.h"

typedef struct {
    const char *coordinator;       /* endpoint, "tcp://host:5555" */
    const char *worker_id;         /* registry key at the coordinator */
    const char *backend;           /* "auto" (host plus every backend whose probe finds
                                      devices), or a comma list: "host", "cuda", "host,cuda" */
    uint32_t    slots;             /* concurrent tasks per device (1) */
    uint32_t    prefetch;          /* extra tasks held so compiles overlap runs
                                      (AK_PREFETCH_AUTO: as many as compile threads) */
    const char *cache_dir;         /* compile cache; NULL: $XDG_CACHE_HOME/akfleet or ~/.cache/akfleet */
    uint32_t    blob_cache_mb;     /* blob cache per registration, MiB (64; 0: none, blobcache.h) */
    uint32_t    heartbeat_ms;      /* 1000 */
    uint32_t    liveness;          /* missed heartbeats before the coordinator is dead (3) */
    uint32_t    min_backoff_ms;    /* first reconnect delay (1000) */
    uint32_t    max_backoff_ms;    /* reconnect delay cap (32000) */
    uint32_t    compile_threads;   /* compile pool size (ak_daemon_default_compile_threads) */
    uint32_t    linger_ms;         /* socket linger on close (1000) */
    uint32_t    max_refusals;      /* refusals in a row before the daemon stops (5; 0: never) */
    const char *exe_path;          /* executor binary; NULL: this program (/proc/self/exe) */
    const char *log_level;         /* passed to executors ("info") */
    const char *cert_file;         /* CURVE: this worker's secret certificate; NULL: plain */
    const char *server_key;        /* CURVE: the coordinator's public key (Z85 or cert file) */
    ak_metrics_srv_t *metrics;     /* the metrics endpoint the loop publishes to (borrowed; NULL: none) */
    uint32_t    metrics_ms;        /* how often the loop renders them (0: 1000) */
} ak_daemon_config_t;

typedef struct ak_daemon ak_daemon_t;

#define AK_PREFETCH_AUTO UINT32_MAX  /* prefetch: one task per compile thread */

void ak_daemon_config_defaults (ak_daemon_config_t *cfg);

/* The compile pool's default size: a thread per core up to 8 cores, cores - 2
   above (at most 32), never more than GiB of memory; at least 1. */
uint32_t ak_daemon_default_compile_threads (void);

/* The default cache directory ($XDG_CACHE_HOME/akfleet, else
   $HOME/.cache/akfleet, else /tmp/akfleet-cache); caller frees. */
char *ak_daemon_default_cache (void);

/* Checks cfg, probes the backends cfg->backend names (each device keeps its
   backend; classes are made safe for the coordinator: characters outside
   [A-Za-z0-9_./-] become '_'), creates the cache directory and starts the
   compile pool.  The configuration is copied.  AK_EINVAL for a bad flag,
   AK_EUNAVAIL when a required backend finds no device. */
int  ak_daemon_new (const ak_daemon_config_t *cfg, ak_daemon_t **self_p, ak_err_t *err);
/* Runs the loop until ak_daemon_stop; then stops executors and compiles
   and closes the socket with bounded linger.  0 on a clean stop;
   AK_EDENIED (err: the coordinator's last reason) when the coordinator
   refused this worker max_refusals times in a row. */
int  ak_daemon_run (ak_daemon_t *self, ak_err_t *err);
/* Asks the loop to stop.  Async-signal-safe and thread-safe. */
void ak_daemon_stop (ak_daemon_t *self);
void ak_daemon_destroy (ak_daemon_t **self_p);

#endif
