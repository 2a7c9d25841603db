/*  coordinator/coord.h: the coordinator: one event loop over the worker
    and client ROUTER sockets and one timer tick.

    It owns the store, the scheduler index, the worker registry and the
    intake, and is the only module that touches the network.  Every frame is
    untrusted: anything malformed, oversized, of another protocol version,
    with the wrong frame count or a body not valid for its endpoint is
    rejected and counted per endpoint, logged at a rate-limited warn, and the
    loop goes on. */
#ifndef AK_COORD_H
#define AK_COORD_H
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"
#include "metrics_http.h"

#define AK_COORD_COMMIT_THREAD_MS 0     /* akcoord: commits this slow on average go to the writer thread (0: all) */

typedef struct {
    const char *store_dir;
    const char *workers_endpoint;       /* tcp://127.0.0.1:5555 */
    const char *clients_endpoint;       /* tcp://127.0.0.1:5556 */
    uint32_t    heartbeat_ms;           /* 1000 */
    uint32_t    liveness;               /* 3 */
    uint32_t    commit_ms;              /* 2 */
    uint32_t    commit_max;             /* 256 */
    bool        commit_sync;            /* the group commit's fsyncs on the loop's thread
                                           (no writer thread: committer.h) */
    uint32_t    commit_thread_ms;       /* commits go to the writer thread while their
                                           running average is at least this (0: always;
                                           akcoord's default AK_COORD_COMMIT_THREAD_MS) */
    uint32_t    commit_delay_ms;        /* benchmarks: ak_store_opts_t.commit_delay_ms */
    size_t      map_size;               /* initial map; 0: AK_STORE_DEFAULT_MAP (a store keeps a larger one) */
    size_t      map_max;                /* growth limit; 0: AK_INTAKE_MAP_MAX */
    /* set (to non-zero) by a signal handler to stop the loop; may be NULL */
    volatile sig_atomic_t *stop_flag;
    /* security (common/auth.h, docs/operations.md): CURVE with the server
       certificate cert_file and the key ring keys_dir, or plain (no
       authentication at all) only when plain is set */
    const char *cert_file;
    const char *keys_dir;
    bool        plain;
    uint32_t    client_queue_max;       /* client requests waiting; beyond: "busy" (0: 1024) */
    uint32_t    malformed_max;          /* malformed frames before a peer is dropped (0: 16) */
    /* set (to non-zero) by a signal handler to re-read keys_dir now; may be NULL */
    volatile sig_atomic_t *reload_flag;
    /* observability (instrument.c, loopstat.h): the metrics endpoint the
       loop publishes to (borrowed; NULL: none), how often it renders
       (0: 1000 ms), and the slow wake-up threshold (0: 5 ms) */
    ak_metrics_srv_t *metrics;
    uint32_t    metrics_ms;
    uint32_t    slow_wakeup_ms;
} ak_coord_opts_t;

typedef struct ak_coord ak_coord_t;

/* Opens the store, rebuilds the index from it and binds both endpoints.
   AK_EIO with err naming the endpoint when a bind fails; the store's error
   when it cannot be opened. */
int ak_coord_new (const ak_coord_opts_t *opts, ak_coord_t **self_p, ak_err_t *err);

/* Runs the loop until a client says shutdown or *stop_flag is set, then
   commits whatever is pending (acks included).  0, or the error that made
   the final commit fail. */
int ak_coord_run (ak_coord_t *self, ak_err_t *err);

/* Closes the sockets and the store. */
void ak_coord_destroy (ak_coord_t **self_p);

#endif
