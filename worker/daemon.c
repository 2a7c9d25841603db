/*  worker/daemon.c: the akworker daemon (see daemon.h and docs/protocol.md):
    configuration, the task list, the loop and its tick, start and stop.
    The parts the loop drives, and the state they share: daemon_impl.h. */
#include "daemon_impl.h"
#include "backends.h"
#include "clock.h"
#include "log.h"
#include "sdnotify.h"
#include "sandbox.h"
#include "util.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AK_TICK_MS              50

/* ================================================================ config */

/*  One compile thread per core up to 8 cores; above that, two cores are
    left to the daemon's loop and the executors (the host work of the gates
    and timing), at most 32 threads.  NVRTC holds a few hundred MB per
    compile, so never more threads than GiB of memory.  On the H200 hosts
    (16 cores) 14 threads with as many tasks prefetched kept the executor
    busy 96-97% of a batch's span where 8 and 6 left it idle 29-33%
    (docs/benchmarks.md, session 20). */
uint32_t ak_daemon_default_compile_threads (void)
{
    long cores = sysconf (_SC_NPROCESSORS_ONLN);
    long n = cores < 1 ? 1 : cores <= 8 ? cores : cores - 2;
    if (n > 32)
        n = 32;
    long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
        long gib = (long) (((unsigned long long) pages * (unsigned long long) page) >> 30);
        if (gib >= 1 && n > gib)
            n = gib;
    }
    return n < 1 ? 1u : (uint32_t) n;
}

void ak_daemon_config_defaults (ak_daemon_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->backend = "auto";
    cfg->slots = 1;
    cfg->prefetch = AK_PREFETCH_AUTO;
    cfg->blob_cache_mb = 64;
    cfg->heartbeat_ms = 1000;
    cfg->liveness = 3;
    cfg->min_backoff_ms = 1000;
    cfg->max_backoff_ms = 32000;
    cfg->compile_threads = ak_daemon_default_compile_threads ();
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

void ak_daemon_task_free (ak_dtask_t **t_p)
{
    if (t_p && *t_p) {
        ak_dtask_t *t = *t_p;
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

void ak_daemon_task_unlink (ak_daemon_t *d, ak_dtask_t *t)
{
    for (ak_dtask_t **p = &d->tasks; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            d->ntasks--;
            if (d->ntasks == 0 && d->busy_since_ms) {
                d->busy_ms += (double) (ak_clock_mono_ms () - d->busy_since_ms);
                d->busy_since_ms = 0;
            }
            return;
        }
}

ak_dtask_t *ak_daemon_task_find (ak_daemon_t *d, const char *task_id, uint32_t attempt)
{
    for (ak_dtask_t *t = d->tasks; t; t = t->next)
        if (t->a->attempt == attempt && strcmp (t->a->task_id, task_id) == 0)
            return t;
    return NULL;
}


/*  The first device this task can run on, or -1. */
int ak_daemon_device_for (ak_daemon_t *d, const Ak__Assign *a)
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

/* ================================================================== tick */

static void s_tick (ak_daemon_t *d)
{
    uint64_t now = ak_clock_mono_ms ();
    ak_sdnotify_watchdog (now);         /* systemd's WatchdogSec=: this loop still turns */

    /* Watchdogs. */
    for (size_t i = 0; i < d->nslots; i++) {
        ak_dslot_t *s = &d->slots[i];
        ak_err_t err = { 0 };
        if (s->exec && ak_exec_check (s->exec, now, &err) != 0)
            ak_daemon_slot_lost (d, s, "timeout", err.msg);
    }
    /* Executors to (re)start. */
    for (size_t i = 0; i < d->nslots; i++) {
        ak_dslot_t *s = &d->slots[i];
        if (!s->exec && now >= s->respawn_at)
            ak_daemon_slot_spawn (d, s);
    }
    ak_daemon_dispatch (d);
    ak_daemon_metrics_tick (d, now);

    /* The coordinator: handshakes, liveness, reconnects (uplink.h), heartbeats. */
    ak_err_t err = { 0 };
    ak_daemon_link_event (d, ak_uplink_tick (d->link, now, &err), &err);
    if (ak_daemon_sock (d)) {
        if (now >= d->next_hb_ms && ak_uplink_up (d->link)) {
            ak_daemon_send_heartbeat (d);
            d->next_hb_ms = now + d->cfg.heartbeat_ms;
        }
        ak_daemon_flush_pending (d, false);
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

void ak_daemon_scratch_sweep (ak_daemon_t *d, pid_t exec_pid)
{
    if (!d->scratch_dir || exec_pid <= 0)
        return;
    char prefix[64];
    const size_t n = (size_t) snprintf (prefix, sizeof prefix, "akfleet-job-%d-", (int) exec_pid);
    DIR *dir = opendir (d->scratch_dir);
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir (dir)))
        if (strncmp (e->d_name, prefix, n) == 0) {
            char *path = ak_path_join (d->scratch_dir, e->d_name);
            ak_rm_tree (path, false);
            free (path);
        }
    closedir (dir);
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
    if (cfg->prefetch > 64 && cfg->prefetch != AK_PREFETCH_AUTO)
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
    if (d->cfg.prefetch == AK_PREFETCH_AUTO)
        d->cfg.prefetch = d->cfg.compile_threads;
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
    /* absolute: executors and compile jobs run in scratch directories of
       their own (jobproc.c), where a relative --cache names nothing */
    char *abs = realpath (d->cache_dir, NULL);
    if (!abs) {
        rc = ak_err_set (err, AK_EIO, "cache directory %s: %s", d->cache_dir, strerror (errno));
        goto fail;
    }
    free (d->cache_dir);
    d->cache_dir = abs;
    d->cfg.cache_dir = abs;
    d->spool_dir = ak_daemon_spool_dirname (d->cache_dir, d->worker_id);
    rc = ak_mkdir_p (d->spool_dir, 0700, err);
    if (rc) {
        ak_err_prefix (err, "receipt spool");
        goto fail;
    }
    ak_daemon_spool_load (d);
    /* the jobs' scratch directories in one of this worker's own, which it
       empties at the start (what a killed run left: an executor killed
       mid-job cannot remove its job's) and at the end, and where it
       removes what an executor it lost left (ak_daemon_scratch_sweep); the
       executors it starts are given it (`--scratch`, jobproc.h) */
    d->scratch_dir = ak_daemon_worker_dirname (d->cache_dir, "scratch", d->worker_id);
    if (strlen (d->scratch_dir) < 200 && ak_mkdir_p (d->scratch_dir, 0700, NULL) == 0)
        ak_rm_tree (d->scratch_dir, true);
    else {
        ak_warn ("scratch directory %s: not usable: jobs' scratch directories go to TMPDIR", d->scratch_dir);
        free (d->scratch_dir);
        d->scratch_dir = NULL;
    }
    if (pipe2 (d->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        rc = ak_err_set (err, AK_EIO, "pipe2: %s", strerror (errno));
        goto fail;
    }
    rc = ak_pool_new ((int) cfg->compile_threads, ak_daemon_compile_task, d, d->wake[1], &d->pool, err);
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
    for (size_t i = 0; i < d->nbackends; i++)
        if (strcmp (d->backends[i], "host") == 0) {
            /* a kernel without Landlock is a WARN here, once (sandbox.h) */
            int abi = ak_sandbox_landlock_abi (NULL);
            if (abi > 0)
                ak_info ("host kernels and compilers confined: rlimits, no_new_privs, landlock abi %d, "
                         "seccomp for kernels (docs/operations.md, \"Threat model\")", abi);
        }
    d->start_ms = ak_clock_mono_ms ();
    d->started_wall_ms = ak_clock_wall_ms ();
    if (!d->dstats)
        d->dstats = ak_calloc (d->ndevices ? d->ndevices : 1, sizeof *d->dstats);
    for (size_t i = 0; i < d->nslots; i++)
        ak_daemon_slot_spawn (d, &d->slots[i]);
    ak_err_t lerr = { 0 };
    ak_daemon_link_event (d, ak_uplink_tick (d->link, ak_clock_mono_ms (), &lerr), &lerr);

    zmq_pollitem_t *items = ak_calloc (d->nslots + 2, sizeof *items);
    int *item_slot = ak_calloc (d->nslots + 2, sizeof *item_slot);
    int rc = 0;
    while (!atomic_load (&d->stop)) {
        int n = 0;
        items[n] = (zmq_pollitem_t) { .socket = NULL, .fd = d->wake[0], .events = ZMQ_POLLIN };
        item_slot[n++] = -1;
        int sock_item = -1;
        if (ak_daemon_sock (d)) {
            sock_item = n;
            items[n] = (zmq_pollitem_t) { .socket = zsock_resolve (ak_daemon_sock (d)), .events = ZMQ_POLLIN };
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
            ak_daemon_drain_compiles (d);
        }
        if (sock_item >= 0 && (items[sock_item].revents & ZMQ_POLLIN))
            ak_daemon_recv_all (d);
        for (int k = 0; k < n; k++) {
            if (item_slot[k] < 0 || !(items[k].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
                continue;
            ak_dslot_t *s = &d->slots[item_slot[k]];
            if (s->exec && ak_exec_fd (s->exec) == items[k].fd)
                ak_daemon_slot_readable (d, s);
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
    if (d->scratch_dir)
        ak_rm_tree (d->scratch_dir, true);             /* the executors are gone: what they left */
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
            ak_dtask_t *t = d->tasks;
            d->tasks = t->next;
            ak_daemon_task_free (&t);
        }
        while (d->pending) {
            ak_dpending_t *p = d->pending;
            d->pending = p->next;
            ak__receipt__free_unpacked (p->r, NULL);
            free (p->task_id);
            free (p);
        }
        for (size_t i = 0; i < d->ndevices; i++)
            ak__device__free_unpacked (d->devices[i], NULL);
        free (d->devices);
        free (d->dev_be);
        free (d->dstats);
        free (d->tcounts);
        if (d->wake[0] >= 0)
            close (d->wake[0]);
        if (d->wake[1] >= 0)
            close (d->wake[1]);
        free (d->coordinator);
        free (d->worker_id);
        free (d->backend_name);
        free (d->cache_dir);
        free (d->spool_dir);
        free (d->scratch_dir);
        free (d->exe_path);
        free (d->log_level);
        free (d);
        *self_p = NULL;
    }
}
