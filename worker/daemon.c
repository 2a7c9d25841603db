/*  worker/daemon.c: the akworker daemon (see daemon.h and docs/protocol.md).

    State lives on the event-loop thread, except a task's compile results,
    which a pool thread writes while the task is S_COMPILING and nobody else
    touches them.  Tasks move QUEUED -> COMPILING -> READY -> RUNNING and
    leave the daemon as a receipt, which stays in `pending` until the
    coordinator ACKs it (task id + attempt). */
#include "daemon.h"
#include "blobcache.h"
#include "backend.h"
#include "backends.h"
#include "clock.h"
#include "digest.h"
#include "auth.h"
#include "envelope.h"
#include "executor.h"
#include "job.h"
#include "log.h"
#include "sdnotify.h"
#include "pbutil.h"
#include "pool.h"
#include "uplink.h"
#include "util.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AK_TICK_MS              50
#define AK_COMPILE_LOG_MAX      (64u * 1024)
#define AK_RECV_BATCH           256        /* messages per loop turn */
#define AK_RESPAWN_MIN_MS       250
#define AK_RESPAWN_MAX_MS       30000
#define AK_REHELLO_GAP_MS       200        /* a burst of out-of-step ASSIGNs gets one HELLO */

#ifndef AK_VERSION
#define AK_VERSION "0"
#endif

/* ================================================================= state */

typedef enum { S_QUEUED = 0, S_COMPILING, S_READY, S_RUNNING } s_state_t;

typedef struct s_task {
    Ak__Envelope   *env;               /* owns the assign */
    const Ak__Assign *a;
    s_state_t       state;
    ak_policy_t     policy;
    /* Compile outcome: written by a pool thread while S_COMPILING. */
    const char     *fail_status;       /* NULL: every artifact built */
    char            fail_reason[512];
    char           *compile_log;       /* of the failing compile */
    char           *ref_path;
    char           *dref_path;         /* the spec's reference_cuda, built for a cuda device */
    char           *base_path[AK_DT_COUNT], *cand_path[AK_DT_COUNT];   /* per element type built */
    char            options_digest[65];
    double          compile_ms;
    /* Dispatch. */
    int             slot;              /* -1 until running */
    uint64_t        started_wall_ms;
    struct s_task  *next;
} s_task_t;

typedef struct s_pending {
    char             *task_id;
    uint32_t          attempt;
    Ak__Receipt      *r;
    bool              sent;            /* handed to ZeroMQ on the current socket */
    struct s_pending *next;
} s_pending_t;

typedef struct {
    uint32_t    dev;                   /* index into devices[] */
    ak_exec_t  *exec;
    s_task_t   *task;
    uint64_t    respawn_at;            /* mono ms; when exec is NULL */
    uint32_t    backoff_ms;
} s_slot_t;

struct ak_daemon {
    ak_daemon_config_t  cfg;           /* its strings point at the copies below */
    char               *coordinator, *worker_id, *backend_name, *cache_dir, *exe_path, *log_level;
    char               *spool_dir;     /* unacked receipts on disk; NULL: memory only */
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

    s_task_t           *tasks;
    size_t              ntasks;
    s_pending_t        *pending;
    size_t              npending;
    s_slot_t           *slots;
    size_t              nslots;

    uint64_t            rejected;      /* messages refused */
    ak_blobcache_t     *blobs;         /* texts of this registration's ASSIGNs (blobcache.h) */
    uint32_t            blob_epoch;    /* registrations so far */
};

/* ================================================================ config */

void ak_daemon_config_defaults (ak_daemon_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->backend = "auto";
    cfg->slots = 1;
    cfg->prefetch = 1;
    cfg->blob_cache_mb = 64;
    cfg->heartbeat_ms = 1000;
    cfg->liveness = 3;
    cfg->min_backoff_ms = 1000;
    cfg->max_backoff_ms = 32000;
    /* NVRTC holds a few hundred MB per compile: one thread per core, at
       most 8 (PRIOR_ART: CuPy, Triton cap concurrent compiles about there). */
    long cores = sysconf (_SC_NPROCESSORS_ONLN);
    cfg->compile_threads = cores < 1 ? 1 : cores > 8 ? 8 : (uint32_t) cores;
    cfg->linger_ms = 1000;
    cfg->max_refusals = 5;
    cfg->log_level = "info";
}

char *ak_daemon_default_cache (void)
{
    const char *xdg = getenv ("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/')
        return ak_sprintf ("%s/akfleet", xdg);
    const char *home = getenv ("HOME");
    if (home && home[0] == '/')
        return ak_sprintf ("%s/.cache/akfleet", home);
    return ak_sprintf ("/tmp/akfleet-cache-%u", (unsigned) getuid ());
}

/* ================================================================= tasks */

static void s_task_free (s_task_t **t_p)
{
    if (t_p && *t_p) {
        s_task_t *t = *t_p;
        ak_envelope_free (&t->env);
        free (t->compile_log);
        free (t->ref_path);
        free (t->dref_path);
        for (int dt = 0; dt < AK_DT_COUNT; dt++) {
            free (t->base_path[dt]);
            free (t->cand_path[dt]);
        }
        free (t);
        *t_p = NULL;
    }
}

static void s_task_unlink (ak_daemon_t *d, s_task_t *t)
{
    for (s_task_t **p = &d->tasks; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            d->ntasks--;
            return;
        }
}

static s_task_t *s_task_find (ak_daemon_t *d, const char *task_id, uint32_t attempt)
{
    for (s_task_t *t = d->tasks; t; t = t->next)
        if (t->a->attempt == attempt && strcmp (t->a->task_id, task_id) == 0)
            return t;
    return NULL;
}

static s_pending_t *s_pending_find (ak_daemon_t *d, const char *task_id, uint32_t attempt)
{
    for (s_pending_t *p = d->pending; p; p = p->next)
        if (p->attempt == attempt && strcmp (p->task_id, task_id) == 0)
            return p;
    return NULL;
}

/*  The first device this task can run on, or -1. */
static int s_device_for (ak_daemon_t *d, const Ak__Assign *a)
{
    for (size_t i = 0; i < d->ndevices; i++) {
        const Ak__Device *dev = d->devices[i];
        if (a->device_class[0] && strcmp (a->device_class, dev->device_class) != 0)
            continue;
        if (a->backend[0] && strcmp (a->backend, dev->backend) != 0)
            continue;
        return (int) i;
    }
    return -1;
}

/* ============================================================== sending */

/* The socket to the coordinator; NULL while there is none (uplink.h). */
static zsock_t *s_sock (ak_daemon_t *d)
{
    return d->link ? ak_uplink_socket (d->link) : NULL;
}

static int s_send (ak_daemon_t *d, Ak__Envelope *env)
{
    zsock_t *sock = s_sock (d);
    if (!sock)
        return AK_EUNAVAIL;
    env->seq = ++d->seq;
    int rc = ak_envelope_send (sock, NULL, 0, env);
    if (rc && rc != AK_EUNAVAIL)
        ak_warn ("sending %s: %s", ak_envelope_kind (env), ak_strerror (rc));
    if (rc == 0)        /* any message is a heartbeat: the next one is due later */
        d->next_hb_ms = ak_clock_mono_ms () + d->cfg.heartbeat_ms;
    return rc;
}

static uint32_t s_total_slots (ak_daemon_t *d)
{
    return (uint32_t) d->nslots;
}

static void s_send_hello (ak_daemon_t *d)
{
    Ak__Hello hello = AK__HELLO__INIT;
    hello.worker_id = d->worker_id;
    hello.host = d->host;
    hello.pid = (uint32_t) getpid ();
    hello.n_backends = d->nbackends;
    hello.backends = (char **) d->backends;
    hello.n_devices = d->ndevices;
    hello.devices = d->devices;
    hello.slots = s_total_slots (d);
    hello.prefetch = d->cfg.prefetch;
    hello.software_version = (char *) AK_VERSION;
    hello.heartbeat_ms = d->cfg.heartbeat_ms;
    /* a registration starts a new blob cache: ASSIGNs sent before the
       coordinator sees this HELLO are of the old epoch */
    hello.blob_epoch = ++d->blob_epoch;
    hello.blob_cache_bytes = (uint64_t) d->cfg.blob_cache_mb << 20;
    ak_blobcache_reset (d->blobs, hello.blob_epoch, hello.blob_cache_bytes);

    /* what it holds: the tasks it runs and those whose receipt waits for
       an ACK (re-sent right after), so that the coordinator keeps them
       with this worker instead of re-queueing them (docs/protocol.md) */
    size_t cap = d->ntasks + d->npending;
    Ak__TaskRef *refs = cap ? ak_calloc (cap, sizeof *refs) : NULL;
    Ak__TaskRef **ptrs = cap ? ak_calloc (cap, sizeof *ptrs) : NULL;
    size_t n = 0;
    for (s_task_t *t = d->tasks; t && n < cap; t = t->next, n++) {
        ak__task_ref__init (&refs[n]);
        refs[n].task_id = t->a->task_id;
        refs[n].attempt = t->a->attempt;
        ptrs[n] = &refs[n];
    }
    for (s_pending_t *p = d->pending; p && n < cap; p = p->next, n++) {
        ak__task_ref__init (&refs[n]);
        refs[n].task_id = p->task_id;
        refs[n].attempt = p->attempt;
        ptrs[n] = &refs[n];
    }
    hello.n_running = n;
    hello.running = ptrs;

    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    if (s_send (d, &env) == 0)
        ak_info ("HELLO to %s as %s (%u slots, prefetch %u, %zu tasks held)", d->coordinator,
                 d->worker_id, hello.slots, hello.prefetch, n);
    d->last_hello_ms = ak_clock_mono_ms ();
    d->hello_unread = true;
    free (refs);
    free (ptrs);
}

static void s_send_heartbeat (ak_daemon_t *d)
{
    Ak__Heartbeat hb = AK__HEARTBEAT__INIT;
    uint32_t cap = s_total_slots (d) + d->cfg.prefetch;
    hb.credits = d->ntasks >= cap ? 0 : cap - (uint32_t) d->ntasks;
    hb.unacked = (uint32_t) d->npending;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    s_send (d, &env);
}

static void s_send_started (ak_daemon_t *d, s_task_t *t, uint32_t device)
{
    Ak__TaskStarted st = AK__TASK_STARTED__INIT;
    st.task_id = t->a->task_id;
    st.attempt = t->a->attempt;
    st.device = device;
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_STARTED;
    env.started = &st;
    s_send (d, &env);
}

/*  Hands one pending receipt to ZeroMQ.  One that cannot fit a message
    loses its bulk (gates detail, timings, log) but keeps its verdict. */
static void s_send_receipt (ak_daemon_t *d, s_pending_t *p)
{
    Ak__Envelope env = AK__ENVELOPE__INIT;
    env.body_case = AK__ENVELOPE__BODY_RECEIPT;
    env.receipt = p->r;
    int rc = s_send (d, &env);
    if (rc == AK_ETOOBIG) {
        Ak__Receipt *r = p->r;
        for (size_t i = 0; i < r->n_timings; i++)
            ak__workload_timing__free_unpacked (r->timings[i], NULL);
        free (r->timings);
        r->timings = NULL;
        r->n_timings = 0;
        for (size_t i = 0; i < r->n_gates; i++)
            ak_pb_set_str (&r->gates[i]->detail, "");
        ak_pb_set_str (&r->compile_log, "");
        ak_warn ("receipt %s#%u too large: timings and details dropped", p->task_id, p->attempt);
        rc = s_send (d, &env);
    }
    p->sent = rc == 0;
}

/*  all: re-send every unacked receipt (after a registration); else only
    those not handed over yet. */
static void s_flush_pending (ak_daemon_t *d, bool all)
{
    for (s_pending_t *p = d->pending; p && s_sock (d); p = p->next)
        if (all || !p->sent)
            s_send_receipt (d, p);
}

/* ============================================================ connection */

/*  What the uplink said (uplink.h): a new socket registers and re-sends
    every unacked receipt; a closed one leaves them to be sent again; too
    many refusals stop the daemon (ak_daemon_run returns AK_EDENIED). */
static void s_link_event (ak_daemon_t *d, ak_uplink_event_t ev, const ak_err_t *err)
{
    switch (ev) {
        case AK_UPLINK_CONNECTED:
            d->next_hb_ms = ak_clock_mono_ms () + d->cfg.heartbeat_ms;
            s_send_hello (d);
            s_flush_pending (d, true);
            break;
        case AK_UPLINK_REFUSED:
            d->refused = *err;
            ak_daemon_stop (d);
            /* fall through */
        case AK_UPLINK_LOST:
            for (s_pending_t *p = d->pending; p; p = p->next)
                p->sent = false;
            break;
        default:
            break;
    }
}

/* ================================================================= spool */

/*  Receipts wait for their ACK in memory and, so that a restart of the
    daemon loses none, as one file each in CACHE/receipts/WORKER/: written
    atomically (temp file, fsync, rename) before the first send, deleted
    on the ACK, loaded back (and re-sent after the HELLO) at start.  A
    failure to write is a warning: the receipt is still kept in memory. */

/*  CACHE/receipts/ID, with any character of the id that is unsafe in a
    file name replaced and, then, a digest of the id added so that two ids
    never share a directory. */
static char *s_spool_dirname (const char *cache_dir, const char *worker_id)
{
    char safe[160], hex[AK_DIGEST_HEX_LEN + 1];
    size_t n = 0;
    bool changed = worker_id[0] == '.';
    for (const char *c = worker_id; *c && n < 128; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
               || *c == '-' || *c == '_' || *c == '.';
        safe[n++] = ok ? *c : '_';
        changed |= !ok;
    }
    safe[n] = '\0';
    if (changed && ak_sha256_hex (worker_id, strlen (worker_id), hex) == 0) {
        hex[12] = '\0';
        snprintf (safe + n, sizeof safe - n, "-%s", hex);
    }
    return ak_sprintf ("%s/receipts/%s", cache_dir, safe);
}

static char *s_spool_path (ak_daemon_t *d, const char *task_id, uint32_t attempt)
{
    char hex[AK_DIGEST_HEX_LEN + 1];
    char *key = ak_sprintf ("%s#%u", task_id, attempt);
    if (ak_sha256_hex (key, strlen (key), hex) != 0)
        snprintf (hex, sizeof hex, "unnamed");
    free (key);
    hex[32] = '\0';
    return ak_sprintf ("%s/%s.receipt", d->spool_dir, hex);
}

static void s_spool_write (ak_daemon_t *d, const s_pending_t *p)
{
    if (!d->spool_dir)
        return;
    size_t len = ak__receipt__get_packed_size (p->r);
    uint8_t *buf = ak_malloc (len ? len : 1);
    ak__receipt__pack (p->r, buf);
    char *path = s_spool_path (d, p->task_id, p->attempt);
    ak_err_t err = { 0 };
    if (ak_file_write_atomic (path, buf, len, &err) != 0)
        ak_warn ("receipt %s#%u kept in memory only (lost if this daemon stops before its ACK): %s",
                 p->task_id, p->attempt, err.msg);
    free (path);
    free (buf);
}

static void s_spool_remove (ak_daemon_t *d, const s_pending_t *p)
{
    if (!d->spool_dir)
        return;
    char *path = s_spool_path (d, p->task_id, p->attempt);
    if (unlink (path) != 0 && errno != ENOENT)
        ak_warn ("acked receipt %s#%u: cannot remove %s: %s", p->task_id, p->attempt, path,
                 strerror (errno));
    free (path);
}

static void s_pending_append (ak_daemon_t *d, s_pending_t *p)
{
    s_pending_t **tail = &d->pending;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    d->npending++;
}

/*  Loads the receipts an earlier run left unacked.  Temp files of an
    interrupted write are removed; a file that does not decode is removed
    with a warning (the rename makes torn files impossible: it is damage). */
static void s_spool_load (ak_daemon_t *d)
{
    DIR *dir = opendir (d->spool_dir);
    if (!dir) {
        ak_warn ("receipt spool %s: %s", d->spool_dir, strerror (errno));
        return;
    }
    size_t loaded = 0;
    struct dirent *e;
    while ((e = readdir (dir)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen (name);
        if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
            continue;
        char *path = ak_path_join (d->spool_dir, name);
        if (name[0] == '.') {
            if (unlink (path) != 0)
                ak_warn ("receipt spool: cannot remove the temp file %s: %s", path, strerror (errno));
            free (path);
            continue;
        }
        if (len < 9 || strcmp (name + len - 8, ".receipt") != 0) {
            free (path);
            continue;
        }
        char *data = NULL;
        size_t size = 0;
        ak_err_t err = { 0 };
        Ak__Receipt *r = NULL;
        if (ak_file_read (path, AK_MAX_MSG_SIZE, &data, &size, &err) == 0)
            r = ak__receipt__unpack (NULL, size, (const uint8_t *) data);
        free (data);
        if (!r || !r->task_id[0] || !r->attempt) {
            ak_warn ("receipt spool: %s does not hold a receipt%s%s; removed", path,
                     err.msg[0] ? ": " : "", err.msg);
            if (r)
                ak__receipt__free_unpacked (r, NULL);
            if (unlink (path) != 0)
                ak_warn ("receipt spool: cannot remove %s: %s", path, strerror (errno));
            free (path);
            continue;
        }
        free (path);
        if (s_pending_find (d, r->task_id, r->attempt)) {
            ak__receipt__free_unpacked (r, NULL);
            continue;
        }
        s_pending_t *p = ak_calloc (1, sizeof *p);
        p->task_id = ak_strdup (r->task_id);
        p->attempt = r->attempt;
        p->r = r;
        s_pending_append (d, p);
        loaded++;
    }
    closedir (dir);
    if (loaded)
        ak_info ("%zu unacknowledged receipt(s) of an earlier run loaded from %s: sent again after HELLO",
                 loaded, d->spool_dir);
}

/* ============================================================== receipts */

/*  Completes t with receipt r (taken): identity from the daemon's own copy
    of the assign, worker/host/device and compile figures added, then kept
    until acked and sent.  t is unlinked and freed. */
static void s_task_finish (ak_daemon_t *d, s_task_t *t, Ak__Receipt *r)
{
    const Ak__Assign *a = t->a;
    uint64_t now_wall = ak_clock_wall_ms ();
    ak_pb_set_str (&r->task_id, a->task_id);
    ak_pb_set_str (&r->batch_id, a->batch_id);
    r->attempt = a->attempt;
    ak_pb_set_str (&r->kind, a->kind);
    ak_pb_set_str (&r->op, a->op);
    ak_pb_set_str (&r->candidate_name, a->candidate_name);
    ak_pb_set_str (&r->worker_id, d->worker_id);
    ak_pb_set_str (&r->host, d->host);
    int dev = t->slot >= 0 ? (int) d->slots[t->slot].dev : s_device_for (d, a);
    if (dev >= 0) {
        if (r->device)
            ak__device__free_unpacked (r->device, NULL);
        r->device = ak_pb_dup (d->devices[dev]);
    }
    r->compile_ms = t->compile_ms;
    if (t->options_digest[0])
        ak_pb_set_str (&r->options_digest, t->options_digest);
    if (!r->source_digest[0]) {
        const Ak__Source *src = ak_job_tests_candidate (a) ? a->candidate : a->baseline;
        char hex[65];
        if (src && ak_sha256_hex (src->text, strlen (src->text), hex) == 0)
            ak_pb_set_str (&r->source_digest, hex);
    }
    if (t->started_wall_ms)
        r->started_at_ms = t->started_wall_ms;
    else if (!r->started_at_ms)
        r->started_at_ms = now_wall;
    r->finished_at_ms = now_wall;
    if (t->compile_log && t->compile_log[0])     /* only a failing compile leaves one */
        ak_pb_set_str_max (&r->compile_log, t->compile_log, AK_COMPILE_LOG_MAX);

    ak_info ("task %s#%u: %s%s%s", a->task_id, a->attempt, r->status,
             r->reason[0] ? ": " : "", r->reason);

    s_pending_t *p = ak_calloc (1, sizeof *p);
    p->task_id = ak_strdup (a->task_id);
    p->attempt = a->attempt;
    p->r = r;
    s_pending_append (d, p);
    s_spool_write (d, p);
    s_send_receipt (d, p);

    if (t->slot >= 0 && d->slots[t->slot].task == t)
        d->slots[t->slot].task = NULL;
    s_task_unlink (d, t);
    s_task_free (&t);
}

static void s_task_fail (ak_daemon_t *d, s_task_t *t, const char *status, const char *reason)
{
    s_task_finish (d, t, ak_pb_receipt_for (t->a, status, reason));
}

/* ============================================================== compiles */

/*  The line of a compiler log worth quoting: the first with "error". */
static void s_log_headline (const char *log, char *buf, size_t len)
{
    const char *line = log, *pick = NULL;
    while (line && *line) {
        const char *end = strchr (line, '\n');
        size_t n = end ? (size_t) (end - line) : strlen (line);
        if (!pick && n > 0)
            pick = line;
        if (memmem (line, n, "error", 5)) {
            pick = line;
            break;
        }
        line = end ? end + 1 : NULL;
    }
    if (!pick) {
        snprintf (buf, len, "no compiler output");
        return;
    }
    size_t n = strcspn (pick, "\n");
    if (n >= len)
        n = len - 1;
    memcpy (buf, pick, n);
    buf[n] = '\0';
}

/*  One compile of a task (reference, baseline or candidate, for element
    type dtype) for device.  On failure sets the task's failure status and
    reason and returns non-zero: a source under test that does not build is
    a compile_error; the reference (or a tune task's baseline) not building
    is an error of the batch, not of the candidate. */
static int s_compile_one (ak_daemon_t *d, s_task_t *t, const char *what, const ak_backend_t *be,
                          const Ak__Device *device, const Ak__Source *src, ak_dtype_t dtype,
                          bool reference, bool with_params, bool under_test,
                          char **path_p, char *options_digest)
{
    const Ak__Assign *a = t->a;
    ak_compile_req_t req;
    ak_compile_out_t out;
    ak_err_t err = { 0 };
    memset (&req, 0, sizeof req);
    if (!src || !src->text || !src->text[0]) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "task has no %s source", what);
        return -1;
    }
    if (src->digest[0]) {
        char hex[65];
        ak_sha256_hex (src->text, strlen (src->text), hex);
        if (strcmp (hex, src->digest) != 0) {
            t->fail_status = "error";
            snprintf (t->fail_reason, sizeof t->fail_reason,
                      "%s source %.64s: digest %.16s... does not match its text (%.16s...)",
                      what, src->name, src->digest, hex);
            return -1;
        }
    }
    req.source = src->text;
    req.source_len = strlen (src->text);
    req.reference = reference;
    req.dtype = dtype;
    if (with_params) {
        for (size_t i = 0; i < a->n_params; i++) {
            req.define_names[i] = a->params[i]->name;
            req.define_values[i] = a->params[i]->value;
        }
        req.ndefines = (int) a->n_params;
    }
    req.cache_dir = d->cache_dir;
    /* compile_timeout_ms bounds the task's compiles together, apart from
       its run limit (run_timeout_ms, the executor's watchdog) */
    req.timeout_ms = t->policy.compile_timeout_ms;
    if (req.timeout_ms)
        req.timeout_ms = t->compile_ms + 1 < req.timeout_ms ? req.timeout_ms - (uint32_t) t->compile_ms : 1;
    req.device = device;
    req.cancel = &d->cancel;

    int rc = be->compile (&req, &out, &err);
    t->compile_ms += out.ms;
    if (rc == 0) {
        *path_p = out.artifact_path;
        if (options_digest)
            memcpy (options_digest, out.options_digest, sizeof out.options_digest);
        ak_debug ("task %s#%u: %s (%s) %s (%.0f ms)", a->task_id, a->attempt, what,
                  reference ? "float64" : ak_dtype_name (dtype), out.cached ? "from cache" : "compiled",
                  out.ms);
        free (out.log);
        return 0;
    }
    if (options_digest && out.options_digest[0])
        memcpy (options_digest, out.options_digest, sizeof out.options_digest);
    if (rc == AK_ECOMPILE) {
        char head[240];
        s_log_headline (out.log ? out.log : "", head, sizeof head);
        t->fail_status = under_test ? "compile_error" : "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s failed to compile (%s): %s", what,
                  reference ? "float64" : ak_dtype_name (dtype), head);
    }
    else if (rc == AK_ETIMEOUT) {
        t->fail_status = under_test ? "compile_error" : "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s: %.400s", what, err.msg);
    }
    else if (rc == AK_EINVAL || rc == AK_EUNSUPPORTED) {
        t->fail_status = "invalid_config";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s: %.400s", what, err.msg);
    }
    else {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%s: %.400s", what, err.msg);
    }
    free (t->compile_log);
    t->compile_log = out.log;
    free (out.artifact_path);
    return -1;
}

/*  The element types to build a task's kernels for on device: those the
    spec declares and the backend supports, in spec order; when there are
    none, the backend's default (the gates then say the spec's dtypes are
    not supported).  Returns how many, or -1 with the task failed when the
    spec does not parse. */
static int s_build_dtypes (s_task_t *t, const ak_backend_t *be, const Ak__Device *device,
                           ak_dtype_t out[AK_DT_COUNT])
{
    const Ak__Assign *a = t->a;
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (!a->spec_json || ak_spec_parse_text (a->spec_json, strlen (a->spec_json), "assign.spec_json",
                                             &spec, &err) != 0) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason, "spec: %.480s",
                  a->spec_json ? err.msg : "missing");
        return -1;
    }
    int n = 0;
    for (int i = 0; i < spec->ndtypes; i++)
        if (!be->supports_dtype || be->supports_dtype (device, spec->dtypes[i]))
            out[n++] = spec->dtypes[i];
    if (n == 0)
        out[n++] = ak_job_build_dtype (be, device);
    ak_spec_destroy (&spec);
    return n;
}

/*  The spec's device reference (reference_cuda, its text inside
    spec_json), built in float64 for a cuda device; nothing to do for other
    backends or a spec without one.  Non-zero when it failed to build (the
    task's error, set by s_compile_one). */
static int s_compile_dref (ak_daemon_t *d, s_task_t *t, const ak_backend_t *be,
                           const Ak__Device *device)
{
    const Ak__Assign *a = t->a;
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (strcmp (be->name, "cuda") != 0 || !a->spec_json
     || ak_spec_parse_text (a->spec_json, strlen (a->spec_json), "assign.spec_json", &spec, &err) != 0)
        return 0;        /* a spec that does not parse fails the task elsewhere */
    int rc = 0;
    if (spec->reference_cuda.text && spec->reference_cuda_launch) {
        Ak__Source src = AK__SOURCE__INIT;
        src.name = spec->reference_cuda.name;
        src.text = spec->reference_cuda.text;
        src.digest = spec->reference_cuda.digest;
        rc = s_compile_one (d, t, "device reference", be, device, &src, AK_DT_FLOAT32,
                            true, false, false, &t->dref_path, NULL);
    }
    ak_spec_destroy (&spec);
    return rc;
}

/*  Pool thread: builds the reference (always host, float64), then the
    baseline and, for tune, the candidate with its parameters as defines,
    once per element type the device's backend runs for the spec.  The
    options digest of the receipt is that of the first (primary) build. */
static void s_compile_task (void *item, void *arg)
{
    s_task_t *t = item;
    ak_daemon_t *d = arg;
    const Ak__Assign *a = t->a;
    bool tune = ak_job_is_tune (a);               /* tune, verify */
    bool profile = strcmp (a->kind, "profile") == 0;
    bool cand = ak_job_tests_candidate (a);      /* tune; profile of a candidate */
    if (!tune && !profile && strcmp (a->kind, "preflight") != 0) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason,
                  "task kind '%.32s' is not run by this worker (preflight, tune, verify and profile are)", a->kind);
        return;
    }
    if (a->n_params > AK_MAX_PARAMS) {
        t->fail_status = "invalid_config";
        snprintf (t->fail_reason, sizeof t->fail_reason, "%zu parameters, limit %d",
                  a->n_params, AK_MAX_PARAMS);
        return;
    }
    int dev = s_device_for (d, a);
    if (dev < 0) {
        t->fail_status = "error";
        snprintf (t->fail_reason, sizeof t->fail_reason,
                  "no device of class '%.64s' (backend '%.16s') on this worker",
                  a->device_class, a->backend);
        return;
    }
    const ak_backend_t *be = d->dev_be[dev];
    const Ak__Device *device = d->devices[dev];
    ak_dtype_t dtypes[AK_DT_COUNT];
    int n = s_build_dtypes (t, be, device, dtypes);
    if (n < 0)
        return;
    if (s_compile_one (d, t, "reference", ak_backend_host (), NULL, a->reference, AK_DT_FLOAT32,
                       true, false, false, &t->ref_path, NULL) != 0)
        return;
    if (s_compile_dref (d, t, be, device) != 0)
        return;
    for (int i = 0; i < n; i++) {
        ak_dtype_t dt = dtypes[i];
        char *digest = i == 0 ? t->options_digest : NULL;
        /* A profile of a candidate runs only the candidate. */
        if (!(profile && cand)
            && s_compile_one (d, t, "baseline", be, device, a->baseline, dt, false, false, !cand,
                              &t->base_path[dt], cand ? NULL : digest) != 0)
            return;
        if (cand && s_compile_one (d, t, "candidate", be, device, a->candidate, dt, false, true, true,
                                   &t->cand_path[dt], digest) != 0)
            return;
    }
}

static void s_drain_compiles (ak_daemon_t *d)
{
    s_task_t *t;
    while ((t = ak_pool_pop_done (d->pool)) != NULL) {
        if (t->fail_status) {
            s_task_fail (d, t, t->fail_status, t->fail_reason);
            continue;
        }
        t->state = S_READY;
    }
}

/* ============================================================= executors */

static void s_slot_spawn (ak_daemon_t *d, s_slot_t *s)
{
    ak_err_t err = { 0 };
    const Ak__Device *dev = d->devices[s->dev];
    if (ak_exec_new (d->exe_path, d->dev_be[s->dev]->name, dev->index, d->log_level, &s->exec, &err) != 0) {
        s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : AK_RESPAWN_MIN_MS;
        if (s->backoff_ms > AK_RESPAWN_MAX_MS)
            s->backoff_ms = AK_RESPAWN_MAX_MS;
        s->respawn_at = ak_clock_mono_ms () + s->backoff_ms;
        ak_error ("executor for device %u: %s (retry in %u ms)", dev->index, err.msg, s->backoff_ms);
    }
}

/*  The executor of slot s is gone (crash, timeout, protocol breach).  Its
    task, if any, gets a receipt with status and reason; a fresh executor
    starts at once after a job died, after a growing delay when it died
    idle (a broken set-up must not spin). */
static void s_slot_lost (ak_daemon_t *d, s_slot_t *s, const char *status, const char *reason)
{
    ak_exec_destroy (&s->exec);
    s_task_t *t = s->task;
    s->task = NULL;
    if (t) {
        ak_warn ("task %s#%u: %s", t->a->task_id, t->a->attempt, reason);
        s_task_fail (d, t, status, reason);
        s->respawn_at = ak_clock_mono_ms ();
    }
    else {
        s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : AK_RESPAWN_MIN_MS;
        if (s->backoff_ms > AK_RESPAWN_MAX_MS)
            s->backoff_ms = AK_RESPAWN_MAX_MS;
        s->respawn_at = ak_clock_mono_ms () + s->backoff_ms;
        ak_warn ("idle executor lost: %s (new one in %u ms)", reason, s->backoff_ms);
    }
}

static void s_slot_readable (ak_daemon_t *d, s_slot_t *s)
{
    Ak__Receipt *r = NULL;
    ak_err_t err = { 0 };
    int rc = ak_exec_on_readable (s->exec, &r, &err);
    if (rc) {
        s_slot_lost (d, s, "crashed", err.msg);
        return;
    }
    if (!r)
        return;
    s_task_t *t = s->task;
    s->task = NULL;
    s->backoff_ms = 0;
    /* "crashed" from the executor itself: its device context is lost (a
       sticky CUDA error).  It exits after this receipt; it must get no
       other job, so it is replaced now. */
    bool lost = strcmp (r->status, "crashed") == 0;
    if (!t) {
        ak_warn ("executor %d sent a receipt with no job out; dropped", (int) ak_exec_pid (s->exec));
        ak__receipt__free_unpacked (r, NULL);
    }
    else
        s_task_finish (d, t, r);
    if (lost) {
        ak_info ("executor %d on device %u lost its device context: starting a fresh one",
                 (int) ak_exec_pid (s->exec), d->devices[s->dev]->index);
        ak_exec_destroy (&s->exec);
        s->respawn_at = ak_clock_mono_ms ();
    }
}

/*  The compiled kernels of t for the executor of device dev: one Artifact
    per role and element type built (arts and ptrs are the caller's
    storage), and the old single-artifact fields for the backend's default
    dtype.  Strings are borrowed from t. */
static void s_job_artifacts (ak_daemon_t *d, s_task_t *t, uint32_t dev, Ak__ExecJob *job,
                             Ak__Artifact arts[2 * AK_DT_COUNT + 1], Ak__Artifact *ptrs[2 * AK_DT_COUNT + 1])
{
    ak_dtype_t build_dt = ak_job_build_dtype (d->dev_be[dev], d->devices[dev]);
    size_t n = 0;
    for (int role = 0; role < 2; role++)
        for (int dt = 0; dt < AK_DT_COUNT; dt++) {
            char *path = role ? t->cand_path[dt] : t->base_path[dt];
            if (!path)
                continue;
            ak__artifact__init (&arts[n]);
            arts[n].role = (char *) (role ? "candidate" : "baseline");
            arts[n].dtype = (char *) ak_dtype_name ((ak_dtype_t) dt);
            arts[n].path = path;
            ptrs[n] = &arts[n];
            n++;
        }
    if (t->dref_path) {
        ak__artifact__init (&arts[n]);
        arts[n].role = (char *) "reference_cuda";
        arts[n].dtype = (char *) "float64";
        arts[n].path = t->dref_path;
        ptrs[n] = &arts[n];
        n++;
    }
    job->n_artifacts = n;
    job->artifacts = ptrs;
    job->baseline_path = t->base_path[build_dt] ? t->base_path[build_dt] : (char *) "";
    job->candidate_path = t->cand_path[build_dt] ? t->cand_path[build_dt] : (char *) "";
}

/*  Hands READY tasks (in arrival order) to idle executors of a fitting
    device: STARTED to the coordinator, then the job. */
static void s_dispatch (ak_daemon_t *d)
{
    for (s_task_t *t = d->tasks, *next; t; t = next) {
        next = t->next;
        if (t->state != S_READY)
            continue;
        int want = s_device_for (d, t->a);
        if (want < 0) {
            char why[256];
            snprintf (why, sizeof why, "no device of class '%.64s' (backend '%.16s') on this worker",
                      t->a->device_class, t->a->backend);
            s_task_fail (d, t, "error", why);
            continue;
        }
        for (size_t i = 0; i < d->nslots; i++) {
            s_slot_t *s = &d->slots[i];
            const Ak__Device *dev = d->devices[s->dev];
            if (!s->exec || s->task || ak_exec_busy (s->exec))
                continue;
            if (t->a->device_class[0] && strcmp (t->a->device_class, dev->device_class) != 0)
                continue;
            Ak__ExecJob job = AK__EXEC_JOB__INIT;
            Ak__Artifact arts[2 * AK_DT_COUNT + 1], *art_ptrs[2 * AK_DT_COUNT + 1];
            s_job_artifacts (d, t, s->dev, &job, arts, art_ptrs);
            job.assign = (Ak__Assign *) t->a;
            job.reference_path = t->ref_path;
            job.device = dev->index;
            t->slot = (int) i;
            t->state = S_RUNNING;
            t->started_wall_ms = ak_clock_wall_ms ();
            s->task = t;
            s_send_started (d, t, dev->index);
            ak_err_t err = { 0 };
            if (ak_exec_submit (s->exec, &job, t->policy.run_timeout_ms, &err) != 0) {
                /* The executor is broken, not the task: back to READY. */
                ak_warn ("executor %d did not take task %s#%u: %s", (int) ak_exec_pid (s->exec),
                         t->a->task_id, t->a->attempt, err.msg);
                s->task = NULL;
                t->slot = -1;
                t->state = S_READY;
                t->started_wall_ms = 0;
                s_slot_lost (d, s, "crashed", err.msg);
                continue;
            }
            ak_debug ("task %s#%u on device %u (executor %d)", t->a->task_id, t->a->attempt,
                      dev->index, (int) ak_exec_pid (s->exec));
            break;
        }
    }
}

/* ============================================================== incoming */

static void s_on_assign (ak_daemon_t *d, Ak__Envelope **env_p)
{
    Ak__Envelope *env = *env_p;
    const Ak__Assign *a = env->assign;
    if (!a->task_id[0]) {
        d->rejected++;
        ak_warn ("ASSIGN without a task id refused");
        return;
    }
    if (s_task_find (d, a->task_id, a->attempt)) {
        ak_debug ("ASSIGN %s#%u: already held", a->task_id, a->attempt);
        return;
    }
    ak_err_t berr = { 0 };
    int brc = ak_blobcache_resolve (d->blobs, env->assign, &berr);
    if (brc == AK_ESTATE) {
        /* sent before the coordinator saw our last HELLO, which released it */
        ak_info ("ASSIGN %s#%u dropped: %s", a->task_id, a->attempt, berr.msg);
        return;
    }
    if (brc) {
        /* out of step with the coordinator's mirror (messages lost in a
           reconnect): a new registration starts both afresh */
        d->rejected++;
        ak_warn ("ASSIGN %s#%u dropped: %s; registering again", a->task_id, a->attempt, berr.msg);
        if (ak_clock_mono_ms () - d->last_hello_ms >= AK_REHELLO_GAP_MS) {
            s_send_hello (d);
            s_flush_pending (d, true);
        }
        return;
    }
    s_pending_t *p = s_pending_find (d, a->task_id, a->attempt);
    if (p) {
        /* Finished already: the coordinator lacks the receipt. */
        s_send_receipt (d, p);
        return;
    }
    size_t cap = (s_total_slots (d) + d->cfg.prefetch) * 2 + 8;
    if (d->ntasks >= cap) {
        d->rejected++;
        ak_warn ("ASSIGN %s#%u refused: %zu tasks held already (credit ignored)",
                 a->task_id, a->attempt, d->ntasks);
        return;
    }
    s_task_t *t = ak_calloc (1, sizeof *t);
    t->env = env;
    *env_p = NULL;
    t->a = a;
    t->slot = -1;
    ak_job_policy (a->policy, &t->policy);
    s_task_t **tail = &d->tasks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = t;
    d->ntasks++;
    ak_info ("task %s#%u assigned: %s %s%s%s", a->task_id, a->attempt, a->kind, a->op,
             a->candidate_name[0] ? " " : "", a->candidate_name);
    t->state = S_COMPILING;
    ak_pool_push (d->pool, t);
}

static void s_on_ack (ak_daemon_t *d, const Ak__Ack *ack)
{
    for (s_pending_t **pp = &d->pending; *pp; pp = &(*pp)->next) {
        s_pending_t *p = *pp;
        if (p->attempt == ack->attempt && strcmp (p->task_id, ack->task_id) == 0) {
            *pp = p->next;
            d->npending--;
            if (ack->refused && *ack->refused)
                ak_warn ("receipt %s#%u refused by the coordinator, dropped: %s", p->task_id, p->attempt,
                         ack->refused);
            else
                ak_debug ("receipt %s#%u acked as %s%s", p->task_id, p->attempt, ack->receipt_id,
                          ack->duplicate ? " (duplicate)" : "");
            s_spool_remove (d, p);
            ak__receipt__free_unpacked (p->r, NULL);
            free (p->task_id);
            free (p);
            return;
        }
    }
    ak_debug ("ACK for unknown receipt %s#%u", ack->task_id, ack->attempt);
}

/*  A DISCONNECT that refuses this worker (docs/protocol.md, "Refusals"):
    the same HELLO would be refused again, so no HELLO now; the uplink logs
    it at ERROR, reconnects after its backoff, and stops the daemon after
    too many. */
static void s_refused (ak_daemon_t *d, const Ak__Disconnect *dc, uint64_t now)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value (&ak__disconnect_code__descriptor,
                                                                       (int) dc->code);
    char why[512];
    snprintf (why, sizeof why, "the coordinator refused this worker: %.300s (%s)",
              dc->reason && *dc->reason ? dc->reason : "no reason given", v ? v->name : "unknown code");
    ak_err_t err = { 0 };
    s_link_event (d, ak_uplink_refused (d->link, why, now, &err), &err);
}

static void s_on_frame (ak_daemon_t *d, const void *data, size_t size)
{
    Ak__Envelope *env = NULL;
    ak_err_t err = { 0 };
    uint64_t now = ak_clock_mono_ms ();
    if (ak_envelope_unpack (data, size, AK_MAX_MSG_SIZE, &env, &err) != 0) {
        d->rejected++;
        ak_warn ("message from the coordinator refused (%" PRIu64 " so far): %s", d->rejected, err.msg);
        return;
    }
    /* Any message proves the coordinator alive; any but a DISCONNECT
       that this worker is registered and that it read our HELLO
       (s_send_hello). */
    ak_uplink_heard (d->link, now, env->body_case != AK__ENVELOPE__BODY_DISCONNECT);
    if (env->body_case != AK__ENVELOPE__BODY_DISCONNECT)
        d->hello_unread = false;
    switch (env->body_case) {
        case AK__ENVELOPE__BODY_HEARTBEAT:
            break;
        case AK__ENVELOPE__BODY_ASSIGN:
            s_on_assign (d, &env);
            break;
        case AK__ENVELOPE__BODY_ACK:
            s_on_ack (d, env->ack);
            break;
        case AK__ENVELOPE__BODY_DISCONNECT:
            if (env->disconnect->code != AK__DISCONNECT_CODE__DISCONNECT_REREGISTER) {
                s_refused (d, env->disconnect, now);
                break;
            }
            /* One sent before the coordinator read our last HELLO answers
               what we sent before it, and all of that (every unacked
               receipt) went again after that HELLO: a burst of them gets
               one HELLO.  The coordinator's first word after reading a
               HELLO is its welcome, so once anything else arrived every
               DISCONNECT is new and gets a HELLO and the receipts again. */
            if (d->hello_unread && now - d->last_hello_ms < (uint64_t) d->cfg.heartbeat_ms * d->cfg.liveness) {
                ak_debug ("DISCONNECT (%s) ignored: sent before our HELLO was read", env->disconnect->reason);
                break;
            }
            ak_info ("coordinator asks to re-register (%s)", env->disconnect->reason);
            s_send_hello (d);
            s_flush_pending (d, true);
            break;
        default:
            d->rejected++;
            ak_warn ("unexpected %s from the coordinator ignored", ak_envelope_kind (env));
            break;
    }
    ak_envelope_free (&env);
}

/*  Drops the rest of a multi-frame message (one frame per message is the
    protocol on this socket). */
static void s_drop_rest (void *h, zmq_msg_t *msg)
{
    while (zmq_msg_more (msg)) {
        if (zmq_msg_close (msg) != 0 || zmq_msg_init (msg) != 0)
            return;
        if (zmq_msg_recv (msg, h, ZMQ_DONTWAIT) < 0)
            break;
    }
}

static void s_recv_all (ak_daemon_t *d)
{
    for (int i = 0; i < AK_RECV_BATCH && s_sock (d); i++) {
        void *h = zsock_resolve (s_sock (d));
        zmq_msg_t msg;
        if (zmq_msg_init (&msg) != 0) {
            ak_error ("zmq_msg_init: %s", zmq_strerror (zmq_errno ()));
            return;
        }
        if (zmq_msg_recv (&msg, h, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno ();
            if (zmq_msg_close (&msg) != 0)
                ak_error ("zmq_msg_close: %s", zmq_strerror (zmq_errno ()));
            if (e != EAGAIN && e != EINTR)
                ak_warn ("receive: %s", zmq_strerror (e));
            return;
        }
        if (zmq_msg_more (&msg)) {
            s_drop_rest (h, &msg);
            d->rejected++;
            ak_warn ("multi-frame message from the coordinator refused (%" PRIu64 " so far)", d->rejected);
        }
        else
            s_on_frame (d, zmq_msg_data (&msg), zmq_msg_size (&msg));
        if (zmq_msg_close (&msg) != 0)
            ak_error ("zmq_msg_close: %s", zmq_strerror (zmq_errno ()));
    }
}

/* ================================================================== tick */

static void s_tick (ak_daemon_t *d)
{
    uint64_t now = ak_clock_mono_ms ();
    ak_sdnotify_watchdog (now);         /* systemd's WatchdogSec=: this loop still turns */

    /* Watchdogs. */
    for (size_t i = 0; i < d->nslots; i++) {
        s_slot_t *s = &d->slots[i];
        ak_err_t err = { 0 };
        if (s->exec && ak_exec_check (s->exec, now, &err) != 0)
            s_slot_lost (d, s, "timeout", err.msg);
    }
    /* Executors to (re)start. */
    for (size_t i = 0; i < d->nslots; i++) {
        s_slot_t *s = &d->slots[i];
        if (!s->exec && now >= s->respawn_at)
            s_slot_spawn (d, s);
    }
    s_dispatch (d);

    /* The coordinator: handshakes, liveness, reconnects (uplink.h), heartbeats. */
    ak_err_t err = { 0 };
    s_link_event (d, ak_uplink_tick (d->link, now, &err), &err);
    if (s_sock (d)) {
        if (now >= d->next_hb_ms && ak_uplink_up (d->link)) {
            s_send_heartbeat (d);
            d->next_hb_ms = now + d->cfg.heartbeat_ms;
        }
        s_flush_pending (d, false);
    }
}

/* ============================================================= lifecycle */

static char *s_self_exe (void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return ak_strdup (buf);
}

/*  A malformed endpoint is a configuration error to report at start, not
    something to retry forever: try it on a throw-away socket. */
static int s_check_endpoint (const char *endpoint, ak_err_t *err)
{
    zsock_t *probe = zsock_new (ZMQ_DEALER);
    if (!probe)
        return ak_err_set (err, AK_EIO, "cannot create a ZeroMQ socket: %s", zmq_strerror (zmq_errno ()));
    void *h = zsock_resolve (probe);
    int rc = 0;
    int zero = 0;
    if (zmq_setsockopt (h, ZMQ_LINGER, &zero, sizeof zero) != 0)
        rc = ak_err_set (err, AK_EIO, "zmq_setsockopt ZMQ_LINGER: %s", zmq_strerror (zmq_errno ()));
    else if (zmq_connect (h, endpoint) != 0)
        rc = ak_err_set (err, AK_EINVAL, "--coordinator %s: %s", endpoint, zmq_strerror (zmq_errno ()));
    zsock_destroy (&probe);
    return rc;
}

/*  A device class as the coordinator and manifests take it: the backend's
    class with every character outside [A-Za-z0-9_./-] (the spaces of a GPU
    name: "NVIDIA H200/sm_90/...") replaced by '_'. */
static void s_class_fix (Ak__Device *dv)
{
    for (char *c = dv->device_class; c && *c; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
               || *c == '_' || *c == '.' || *c == '-' || *c == '/';
        if (!ok)
            *c = '_';
    }
}

/*  Takes the n devices of backend be into the daemon's list. */
static void s_add_devices (ak_daemon_t *d, const ak_backend_t *be, Ak__Device **devs, size_t n)
{
    d->devices = ak_realloc (d->devices, (d->ndevices + n) * sizeof *d->devices);
    d->dev_be = ak_realloc (d->dev_be, (d->ndevices + n) * sizeof *d->dev_be);
    for (size_t i = 0; i < n; i++) {
        devs[i]->slots = d->cfg.slots;
        s_class_fix (devs[i]);
        d->devices[d->ndevices] = devs[i];
        d->dev_be[d->ndevices++] = be;
    }
    d->backends[d->nbackends++] = be->name;
}

/*  Probes the backends list names ("auto", or names separated by commas)
    and takes their devices.  "auto": host, plus every other backend of this
    build whose probe finds devices (one that does not is logged with the
    reason and left out).  A backend named explicitly must be in this build
    and find devices, else AK_EUNAVAIL with the probe's reason. */
static int s_open_backends (ak_daemon_t *d, const char *list, ak_err_t *err)
{
    static const char *const known[] = { "host", "cuda" };
    const size_t nknown = sizeof known / sizeof known[0];
    const char *want[sizeof known / sizeof known[0]];
    size_t nwant = 0;
    bool autoselect = !list || !*list || strcmp (list, "auto") == 0;
    if (autoselect)
        for (size_t k = 0; k < nknown; k++)
            want[nwant++] = known[k];
    else {
        for (const char *p = list; ; ) {
            size_t len = strcspn (p, ",");
            const char *name = NULL;
            for (size_t k = 0; k < nknown && !name; k++)
                if (strlen (known[k]) == len && strncmp (p, known[k], len) == 0)
                    name = known[k];
            if (!name)
                return ak_err_set (err, AK_EINVAL, "--backend %.64s: '%.*s' is not a backend "
                                   "(auto, or a list of host, cuda)", list, (int) (len < 32 ? len : 32), p);
            for (size_t k = 0; k < nwant; k++)
                if (want[k] == name)
                    return ak_err_set (err, AK_EINVAL, "--backend %.64s: %s named twice", list, name);
            want[nwant++] = name;
            if (!p[len])
                break;
            p += len + 1;
        }
    }
    for (size_t k = 0; k < nwant; k++) {
        const ak_backend_t *be = ak_backend_find (want[k]);
        if (!be) {
            if (autoselect)
                continue;
            return ak_err_set (err, AK_EUNAVAIL, "--backend %s: not available in this build "
                               "(backends: host%s)", want[k], ak_backend_find ("cuda") ? ", cuda" : "");
        }
        Ak__Device **devs = NULL;
        size_t n = 0;
        ak_err_t sub = { 0 };
        int rc = be->probe (&devs, &n, &sub);
        if (rc == 0 && n == 0) {
            free (devs);
            devs = NULL;
            rc = ak_err_set (&sub, AK_EUNAVAIL, "no devices");
        }
        if (rc) {
            if (autoselect && strcmp (be->name, "host") != 0) {
                ak_info ("%s backend not used: %s", be->name, sub.msg);
                continue;
            }
            return ak_err_set (err, rc, "%s backend: %s", be->name, sub.msg);
        }
        s_add_devices (d, be, devs, n);
        free (devs);
    }
    if (d->ndevices == 0)
        return ak_err_set (err, AK_EUNAVAIL, "--backend %s: no backend found a device", list);
    return 0;
}

int ak_daemon_new (const ak_daemon_config_t *cfg, ak_daemon_t **self_p, ak_err_t *err)
{
    int rc = 0;
    ak_daemon_t *d = NULL;
    if (!cfg || !self_p)
        return ak_err_set (err, AK_EINVAL, "daemon: no configuration");
    if (!cfg->coordinator || !*cfg->coordinator)
        return ak_err_set (err, AK_EINVAL, "--coordinator: an endpoint is required");
    if (!cfg->worker_id || !*cfg->worker_id || strlen (cfg->worker_id) > 128)
        return ak_err_set (err, AK_EINVAL, "--id: a worker id of 1..128 characters is required");
    if (cfg->slots < 1 || cfg->slots > 64)
        return ak_err_set (err, AK_EINVAL, "--slots: %u (allowed 1..64)", cfg->slots);
    if (cfg->prefetch > 64)
        return ak_err_set (err, AK_EINVAL, "--prefetch: %u (allowed 0..64)", cfg->prefetch);
    if (cfg->heartbeat_ms < 10 || cfg->heartbeat_ms > 600000)
        return ak_err_set (err, AK_EINVAL, "--heartbeat-ms: %u (allowed 10..600000)", cfg->heartbeat_ms);
    if (cfg->liveness < 1 || cfg->liveness > 100)
        return ak_err_set (err, AK_EINVAL, "--liveness: %u (allowed 1..100)", cfg->liveness);
    if (cfg->compile_threads < 1 || cfg->compile_threads > 64)
        return ak_err_set (err, AK_EINVAL, "--compile-threads: %u (allowed 1..64)", cfg->compile_threads);

    rc = s_check_endpoint (cfg->coordinator, err);
    if (rc)
        return rc;

    d = ak_calloc (1, sizeof *d);
    d->wake[0] = d->wake[1] = -1;
    d->cfg = *cfg;
    d->coordinator = ak_strdup (cfg->coordinator);
    d->blobs = ak_blobcache_new (true);
    d->worker_id = ak_strdup (cfg->worker_id);
    d->backend_name = ak_strdup (cfg->backend && *cfg->backend ? cfg->backend : "auto");
    d->cache_dir = cfg->cache_dir ? ak_strdup (cfg->cache_dir) : ak_daemon_default_cache ();
    d->exe_path = cfg->exe_path ? ak_strdup (cfg->exe_path) : s_self_exe ();
    d->log_level = ak_strdup (cfg->log_level ? cfg->log_level : "info");
    d->cfg.coordinator = d->coordinator;
    d->cfg.worker_id = d->worker_id;
    d->cfg.backend = d->backend_name;
    d->cfg.cache_dir = d->cache_dir;
    d->cfg.exe_path = d->exe_path;
    d->cfg.log_level = d->log_level;
    if (!d->cfg.min_backoff_ms)
        d->cfg.min_backoff_ms = 1000;
    if (d->cfg.max_backoff_ms < d->cfg.min_backoff_ms)
        d->cfg.max_backoff_ms = d->cfg.min_backoff_ms;
    ak_uplink_config_t ucfg = {
        .endpoint = d->coordinator, .cert_file = cfg->cert_file, .server_key = cfg->server_key,
        .heartbeat_ms = cfg->heartbeat_ms, .liveness = cfg->liveness,
        .min_backoff_ms = d->cfg.min_backoff_ms, .max_backoff_ms = d->cfg.max_backoff_ms,
        .linger_ms = cfg->linger_ms, .max_refusals = cfg->max_refusals,
    };
    d->link = ak_uplink_new (&ucfg);
    atomic_init (&d->stop, 0);
    atomic_init (&d->cancel, 0);
    if (!d->exe_path) {
        rc = ak_err_set (err, AK_EIO, "cannot find this program (/proc/self/exe) to start executors");
        goto fail;
    }
    if (gethostname (d->host, sizeof d->host - 1) != 0)
        snprintf (d->host, sizeof d->host, "unknown");

    rc = s_open_backends (d, d->backend_name, err);
    if (rc)
        goto fail;

    rc = ak_mkdir_p (d->cache_dir, 0755, err);
    if (rc) {
        ak_err_prefix (err, "cache directory");
        goto fail;
    }
    d->spool_dir = s_spool_dirname (d->cache_dir, d->worker_id);
    rc = ak_mkdir_p (d->spool_dir, 0700, err);
    if (rc) {
        ak_err_prefix (err, "receipt spool");
        goto fail;
    }
    s_spool_load (d);
    if (pipe2 (d->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        rc = ak_err_set (err, AK_EIO, "pipe2: %s", strerror (errno));
        goto fail;
    }
    rc = ak_pool_new ((int) cfg->compile_threads, s_compile_task, d, d->wake[1], &d->pool, err);
    if (rc)
        goto fail;

    d->nslots = d->ndevices * cfg->slots;
    d->slots = ak_calloc (d->nslots, sizeof *d->slots);
    for (size_t i = 0; i < d->nslots; i++)
        d->slots[i].dev = (uint32_t) (i / cfg->slots);

    *self_p = d;
    return 0;

fail:
    ak_daemon_destroy (&d);
    return rc;
}

void ak_daemon_stop (ak_daemon_t *self)
{
    if (!self)
        return;
    atomic_store (&self->stop, 1);
    char b = 0;
    ssize_t w = write (self->wake[1], &b, 1);
    (void) w;
}

int ak_daemon_run (ak_daemon_t *d, ak_err_t *err)
{
    if (!d)
        return ak_err_set (err, AK_EINVAL, "daemon: none");
    ak_info ("akworker %s: id %s, backend%s %s%s%s, %zu device(s), %u slot(s) per device, prefetch %u, "
             "cache %s", AK_VERSION, d->worker_id, d->nbackends > 1 ? "s" : "", d->backends[0],
             d->nbackends > 1 ? ", " : "", d->nbackends > 1 ? d->backends[1] : "", d->ndevices,
             d->cfg.slots, d->cfg.prefetch, d->cache_dir);
    for (size_t i = 0; i < d->ndevices; i++)
        ak_info ("device %s:%u: %s, class %s", d->devices[i]->backend, d->devices[i]->index,
                 d->devices[i]->name, d->devices[i]->device_class);
    for (size_t i = 0; i < d->nslots; i++)
        s_slot_spawn (d, &d->slots[i]);
    ak_err_t lerr = { 0 };
    s_link_event (d, ak_uplink_tick (d->link, ak_clock_mono_ms (), &lerr), &lerr);

    zmq_pollitem_t *items = ak_calloc (d->nslots + 2, sizeof *items);
    int *item_slot = ak_calloc (d->nslots + 2, sizeof *item_slot);
    int rc = 0;
    while (!atomic_load (&d->stop)) {
        int n = 0;
        items[n] = (zmq_pollitem_t) { .socket = NULL, .fd = d->wake[0], .events = ZMQ_POLLIN };
        item_slot[n++] = -1;
        int sock_item = -1;
        if (s_sock (d)) {
            sock_item = n;
            items[n] = (zmq_pollitem_t) { .socket = zsock_resolve (s_sock (d)), .events = ZMQ_POLLIN };
            item_slot[n++] = -1;
        }
        for (size_t i = 0; i < d->nslots; i++)
            if (d->slots[i].exec) {
                items[n] = (zmq_pollitem_t) { .socket = NULL, .fd = ak_exec_fd (d->slots[i].exec),
                                              .events = ZMQ_POLLIN };
                item_slot[n++] = (int) i;
            }
        int got = zmq_poll (items, n, AK_TICK_MS);
        if (got < 0) {
            int e = zmq_errno ();
            if (e == EINTR)
                continue;
            rc = ak_err_set (err, AK_EIO, "zmq_poll: %s", zmq_strerror (e));
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            char buf[256];
            while (read (d->wake[0], buf, sizeof buf) > 0)
                ;
            s_drain_compiles (d);
        }
        if (sock_item >= 0 && (items[sock_item].revents & ZMQ_POLLIN))
            s_recv_all (d);
        for (int k = 0; k < n; k++) {
            if (item_slot[k] < 0 || !(items[k].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
                continue;
            s_slot_t *s = &d->slots[item_slot[k]];
            if (s->exec && ak_exec_fd (s->exec) == items[k].fd)
                s_slot_readable (d, s);
        }
        s_tick (d);
    }
    free (items);
    free (item_slot);

    if (d->npending)
        ak_info ("stopping: %zu task(s) held, %zu receipt(s) unacked, kept in %s: sent again when "
                 "this worker starts with the same --id and --cache", d->ntasks, d->npending,
                 d->spool_dir);
    else
        ak_info ("stopping: %zu task(s) held, no receipt unacked", d->ntasks);
    atomic_store (&d->cancel, 1);
    ak_pool_destroy (&d->pool);
    for (size_t i = 0; i < d->nslots; i++)
        ak_exec_destroy (&d->slots[i].exec);
    ak_uplink_destroy (&d->link);
    if (!rc && d->refused.code)
        rc = ak_err_set (err, d->refused.code, "%s", d->refused.msg);
    return rc;
}

void ak_daemon_destroy (ak_daemon_t **self_p)
{
    if (self_p && *self_p) {
        ak_daemon_t *d = *self_p;
        atomic_store (&d->cancel, 1);
        ak_pool_destroy (&d->pool);
        ak_blobcache_destroy (&d->blobs);
        for (size_t i = 0; i < d->nslots; i++)
            ak_exec_destroy (&d->slots[i].exec);
        free (d->slots);
        ak_uplink_destroy (&d->link);
        while (d->tasks) {
            s_task_t *t = d->tasks;
            d->tasks = t->next;
            s_task_free (&t);
        }
        while (d->pending) {
            s_pending_t *p = d->pending;
            d->pending = p->next;
            ak__receipt__free_unpacked (p->r, NULL);
            free (p->task_id);
            free (p);
        }
        for (size_t i = 0; i < d->ndevices; i++)
            ak__device__free_unpacked (d->devices[i], NULL);
        free (d->devices);
        free (d->dev_be);
        if (d->wake[0] >= 0)
            close (d->wake[0]);
        if (d->wake[1] >= 0)
            close (d->wake[1]);
        free (d->coordinator);
        free (d->worker_id);
        free (d->backend_name);
        free (d->cache_dir);
        free (d->spool_dir);
        free (d->exe_path);
        free (d->log_level);
        free (d);
        *self_p = NULL;
    }
}
