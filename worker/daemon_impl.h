/*  worker/daemon_impl.h: what the files of the akworker daemon share;
    private to them (everyone else uses daemon.h).

    The daemon is one event loop (daemon.c: configuration, the task list,
    the tick, start and stop) and four parts it drives:
    - daemon_link.c: what it says to the coordinator and what it does with
      what it hears (HELLO, heartbeats, STARTED, RECEIPT; ASSIGN, ACK,
      DISCONNECT), over the socket that worker/uplink.c keeps up;
    - daemon_compile.c: the compile stage, run on the pool (pool.h);
    - daemon_slots.c: executor slots, their watchdogs and the dispatch of
      compiled tasks to them;
    - daemon_spool.c: a finished task's receipt, kept until its ACK in
      memory and in the spool CACHE/receipts/ID;
    - daemon_metrics.c: what the daemon counts per device and the
      metrics snapshot the loop publishes (--metrics).

    State lives on the event-loop thread, except a task's compile results,
    which a pool thread writes while the task is AK_DTASK_COMPILING and
    nobody else touches them.  Tasks move QUEUED -> COMPILING -> READY ->
    RUNNING and leave the daemon as a receipt, which stays in `pending`
    until the coordinator ACKs it (task id + attempt).

    Never: include this outside worker/daemon*.c; call into the daemon
    from a pool thread other than through a task it owns while COMPILING. */
#ifndef AK_WORKER_DAEMON_IMPL_H
#define AK_WORKER_DAEMON_IMPL_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <czmq.h>
#include "akfleet.pb-c.h"
#include "backend.h"
#include "blobcache.h"
#include "daemon.h"
#include "envelope.h"
#include "executor.h"
#include "policy.h"
#include "pool.h"
#include "uplink.h"

#ifndef AK_VERSION
#define AK_VERSION "0"
#endif

typedef enum {
    AK_DTASK_QUEUED = 0, AK_DTASK_COMPILING, AK_DTASK_READY, AK_DTASK_RUNNING
} ak_dtask_state_t;

typedef struct ak_dtask {
    Ak__Envelope   *env;               /* owns the assign */
    const Ak__Assign *a;
    ak_dtask_state_t state;
    ak_policy_t     policy;
    /* Compile outcome: written by a pool thread while AK_DTASK_COMPILING. */
    const char     *fail_status;       /* NULL: every artifact built */
    char            fail_reason[512];
    char           *compile_log;       /* of the failing compile */
    char           *ref_path;
    char           *dref_path;         /* the spec's reference_cuda, built for a cuda device */
    char           *base_path[AK_DT_COUNT], *cand_path[AK_DT_COUNT];   /* per element type built */
    char            options_digest[65];
    double          compile_ms;
    /* From the spec (s_build_dtypes): the "arch" of the baseline and the
       candidate ("" none), and whether the baseline is a library call. */
    char            base_arch[16], cand_arch[16];
    bool            base_library;
    /* Dispatch. */
    int             slot;              /* -1 until running */
    uint64_t        started_wall_ms;
    struct ak_dtask *next;
} ak_dtask_t;

typedef struct ak_dpending {
    char             *task_id;
    uint32_t          attempt;
    Ak__Receipt      *r;
    bool              sent;            /* handed to ZeroMQ on the current socket */
    struct ak_dpending *next;
} ak_dpending_t;

typedef struct {
    uint32_t    dev;                   /* index into devices[] */
    ak_exec_t  *exec;
    ak_dtask_t *task;
    uint64_t    respawn_at;            /* mono ms; when exec is NULL */
    uint32_t    backoff_ms;
    uint32_t    spawns;                /* executors started (restarts: the ones after the first) */
} ak_dslot_t;

/* Per device, what its tasks' receipts add up to (daemon_metrics.c). */
typedef struct {
    double      compile_s, gate_s, timing_s;   /* the receipts' compile_ms, gate_ms, timing_ms */
    double      busy_s;                /* executor holding a job: STARTED to the receipt */
    uint64_t    discarded;             /* timing samples thrown away: clock throttled */
    uint64_t    restarts;              /* executors started again after the first */
} ak_ddev_stats_t;

/* Tasks finished by device, kind and status. */
typedef struct {
    uint32_t    dev;
    char        kind[24];              /* "other" past AK_DSTATS_KINDS distinct kinds */
    int         status;                /* metrics.h: ak_metrics_status_index */
    uint64_t    n;
} ak_dtask_count_t;

struct ak_daemon {
    ak_daemon_config_t  cfg;           /* its strings point at the copies below */
    char               *coordinator, *worker_id, *backend_name, *cache_dir, *exe_path, *log_level;
    char               *spool_dir;     /* unacked receipts on disk; NULL: memory only */
    char               *scratch_dir;   /* the jobs' scratch directories (the executors' --scratch); NULL: TMPDIR */
    Ak__Device        **devices;       /* of every backend in use */
    const ak_backend_t **dev_be;       /* dev_be[i] runs devices[i] */
    size_t              ndevices;
    const char         *backends[4];   /* names of the backends in use, for HELLO */
    size_t              nbackends;
    char                host[256];

    ak_uplink_t        *link;          /* the socket to the coordinator (uplink.h) */
    uint64_t            seq;
    uint64_t            next_hb_ms, last_hello_ms;
    bool                hello_unread;  /* no message since our last HELLO: the coordinator may not have read it */
    ak_err_t            refused;       /* code set: the coordinator refused this worker; stop */

    int                 wake[2];
    atomic_int          stop;
    atomic_int          cancel;
    ak_pool_t          *pool;

    ak_dtask_t         *tasks;
    size_t              ntasks;
    ak_dpending_t      *pending;
    size_t              npending;
    ak_dslot_t         *slots;
    size_t              nslots;

    uint64_t            rejected;      /* messages refused */
    /* The GPU timing share's figures (Heartbeat.timing): wall time with a
       task held (busy_since: monotonic ms the current such time began, 0
       none), time inside timed samples, executors' task time, receipts. */
    uint64_t            busy_since_ms;
    double              busy_ms, sampled_ms, exec_ms;
    uint64_t            receipts_made;
    ak_ddev_stats_t    *dstats;        /* [ndevices] (daemon_metrics.c) */
    ak_dtask_count_t   *tcounts;
    size_t              ntcounts;
    uint64_t            start_ms, next_metrics;
    uint64_t            started_wall_ms;   /* wall clock at the start: Receipt.worker_started_ms */
    ak_blobcache_t     *blobs;         /* texts of this registration's ASSIGNs (blobcache.h) */
    uint32_t            blob_epoch;    /* registrations so far */
};

/* ------------------------------------------------------- tasks (daemon.c) */

void        ak_daemon_task_free (ak_dtask_t **t_p);
void        ak_daemon_task_unlink (ak_daemon_t *d, ak_dtask_t *t);
ak_dtask_t *ak_daemon_task_find (ak_daemon_t *d, const char *task_id, uint32_t attempt);
/*  The first device this task can run on, or -1. */
int         ak_daemon_device_for (ak_daemon_t *d, const Ak__Assign *a);

/* ------------------------------------------------------ scratch (daemon.c) */

/*  Removes the scratch directories that executor exec_pid (gone: reaped)
    left in the worker's (a job it was killed in the middle of). */
void ak_daemon_scratch_sweep (ak_daemon_t *d, pid_t exec_pid);

/* --------------------------------------------------------- daemon_link.c */

/* The socket to the coordinator; NULL while there is none (uplink.h). */
zsock_t *ak_daemon_sock (ak_daemon_t *d);
void     ak_daemon_send_heartbeat (ak_daemon_t *d);
void     ak_daemon_send_started (ak_daemon_t *d, ak_dtask_t *t, uint32_t device);
/*  Hands one pending receipt to ZeroMQ (a too large one loses its bulk). */
void     ak_daemon_send_receipt (ak_daemon_t *d, ak_dpending_t *p);
/*  all: re-send every unacked receipt; else only those not handed over yet. */
void     ak_daemon_flush_pending (ak_daemon_t *d, bool all);
/*  Acts on what the uplink said (a new socket, a lost one, refusals). */
void     ak_daemon_link_event (ak_daemon_t *d, ak_uplink_event_t ev, const ak_err_t *err);
/*  Reads and handles what the coordinator sent, a bounded number a turn. */
void     ak_daemon_recv_all (ak_daemon_t *d);

/* ------------------------------------------------------ daemon_compile.c */

/*  Pool thread: builds every artifact of a task (item); arg is the daemon. */
void ak_daemon_compile_task (void *item, void *arg);
/*  Loop thread: takes the compiled tasks back (READY, or failed). */
void ak_daemon_drain_compiles (ak_daemon_t *d);

/* -------------------------------------------------------- daemon_slots.c */

void ak_daemon_slot_spawn (ak_daemon_t *d, ak_dslot_t *s);
/*  The slot's executor is gone; its task, if any, fails with status/reason. */
void ak_daemon_slot_lost (ak_daemon_t *d, ak_dslot_t *s, const char *status, const char *reason);
void ak_daemon_slot_readable (ak_daemon_t *d, ak_dslot_t *s);
/*  Hands READY tasks to idle executors of a fitting device. */
void ak_daemon_dispatch (ak_daemon_t *d);

/* ------------------------------------------------------ daemon_metrics.c */

/*  Counts a finished task's receipt r on device dev (-1: none) in the
    per-device statistics; t is the task (its start time). */
void ak_daemon_count_receipt (ak_daemon_t *d, int dev, const ak_dtask_t *t, const Ak__Receipt *r);
/*  Renders and publishes the metrics snapshot when one is due (the tick). */
void ak_daemon_metrics_tick (ak_daemon_t *d, uint64_t now);

/* -------------------------------------------------------- daemon_spool.c */

/*  Completes t with receipt r (taken): kept until acked, spooled, sent; t freed. */
void ak_daemon_task_finish (ak_daemon_t *d, ak_dtask_t *t, Ak__Receipt *r);
void ak_daemon_task_fail (ak_daemon_t *d, ak_dtask_t *t, const char *status, const char *reason);
/*  CACHE/KIND/ID, safe as a directory name; caller frees.  The spool is
    CACHE/receipts/ID, the jobs' scratch directories are in CACHE/scratch/ID. */
char *ak_daemon_worker_dirname (const char *cache_dir, const char *kind, const char *worker_id);
char *ak_daemon_spool_dirname (const char *cache_dir, const char *worker_id);
void  ak_daemon_spool_remove (ak_daemon_t *d, const ak_dpending_t *p);
ak_dpending_t *ak_daemon_pending_find (ak_daemon_t *d, const char *task_id, uint32_t attempt);
/*  Loads the receipts an earlier run left unacked. */
void  ak_daemon_spool_load (ak_daemon_t *d);

#endif
