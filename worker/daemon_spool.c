/*  worker/daemon_spool.c: a finished task's receipt, from the task's end
    to the coordinator's ACK (daemon_impl.h).

    Receipts wait for their ACK in memory and, so that a restart of the
    daemon loses none, as one file each in CACHE/receipts/WORKER/: written
    atomically (temp file, fsync, rename) before the first send, deleted
    on the ACK, loaded back (and re-sent after the HELLO) at start.  A
    failure to write is a warning: the receipt is still kept in memory. */
#include "daemon_impl.h"
#include "clock.h"
#include "digest.h"
#include "assign.h"
#include "log.h"
#include "pbutil.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AK_COMPILE_LOG_MAX      (64u * 1024)

/* ================================================================= spool */

/*  CACHE/KIND/ID, with any character of the id that is unsafe in a file
    name replaced and, then, a digest of the id added so that two ids
    never share a directory. */
char *ak_daemon_worker_dirname (const char *cache_dir, const char *kind, const char *worker_id)
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
    return ak_sprintf ("%s/%s/%s", cache_dir, kind, safe);
}

char *ak_daemon_spool_dirname (const char *cache_dir, const char *worker_id)
{
    return ak_daemon_worker_dirname (cache_dir, "receipts", worker_id);
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

static void s_spool_write (ak_daemon_t *d, const ak_dpending_t *p)
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

void ak_daemon_spool_remove (ak_daemon_t *d, const ak_dpending_t *p)
{
    if (!d->spool_dir)
        return;
    char *path = s_spool_path (d, p->task_id, p->attempt);
    if (unlink (path) != 0 && errno != ENOENT)
        ak_warn ("acked receipt %s#%u: cannot remove %s: %s", p->task_id, p->attempt, path,
                 strerror (errno));
    free (path);
}

ak_dpending_t *ak_daemon_pending_find (ak_daemon_t *d, const char *task_id, uint32_t attempt)
{
    for (ak_dpending_t *p = d->pending; p; p = p->next)
        if (p->attempt == attempt && strcmp (p->task_id, task_id) == 0)
            return p;
    return NULL;
}

static void s_pending_append (ak_daemon_t *d, ak_dpending_t *p)
{
    ak_dpending_t **tail = &d->pending;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    d->npending++;
}

/*  Loads the receipts an earlier run left unacked.  Temp files of an
    interrupted write are removed; a file that does not decode is removed
    with a warning (the rename makes torn files impossible: it is damage). */
void ak_daemon_spool_load (ak_daemon_t *d)
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
        if (ak_daemon_pending_find (d, r->task_id, r->attempt)) {
            ak__receipt__free_unpacked (r, NULL);
            continue;
        }
        ak_dpending_t *p = ak_calloc (1, sizeof *p);
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
void ak_daemon_task_finish (ak_daemon_t *d, ak_dtask_t *t, Ak__Receipt *r)
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
    int dev = t->slot >= 0 ? (int) d->slots[t->slot].dev : ak_daemon_device_for (d, a);
    if (dev >= 0) {
        if (r->device)
            ak__device__free_unpacked (r->device, NULL);
        r->device = ak_pb_dup (d->devices[dev]);
    }
    r->compile_ms = t->compile_ms;
    if (t->options_digest[0])
        ak_pb_set_str (&r->options_digest, t->options_digest);
    if (!r->source_digest[0]) {
        const Ak__Source *src = ak_assign_tests_candidate (a) ? a->candidate : a->baseline;
        char hex[65];
        if (src && ak_sha256_hex (src->text, strlen (src->text), hex) == 0)
            ak_pb_set_str (&r->source_digest, hex);
    }
    if (t->started_wall_ms)
        r->started_at_ms = t->started_wall_ms;
    else if (!r->started_at_ms)
        r->started_at_ms = now_wall;
    r->finished_at_ms = now_wall;
    r->worker_started_ms = d->started_wall_ms;
    d->receipts_made++;
    if (isfinite (r->sampled_ms) && r->sampled_ms > 0)
        d->sampled_ms += r->sampled_ms;
    if (t->started_wall_ms && r->finished_at_ms >= r->started_at_ms)
        d->exec_ms += (double) (r->finished_at_ms - r->started_at_ms);
    if (t->compile_log && t->compile_log[0])     /* only a failing compile leaves one */
        ak_pb_set_str_max (&r->compile_log, t->compile_log, AK_COMPILE_LOG_MAX);

    ak_info ("task %s#%u: %s%s%s", a->task_id, a->attempt, r->status,
             r->reason[0] ? ": " : "", r->reason);
    ak_daemon_count_receipt (d, dev, t, r);

    ak_dpending_t *p = ak_calloc (1, sizeof *p);
    p->task_id = ak_strdup (a->task_id);
    p->attempt = a->attempt;
    p->r = r;
    s_pending_append (d, p);
    s_spool_write (d, p);
    ak_daemon_send_receipt (d, p);

    if (t->slot >= 0 && d->slots[t->slot].task == t)
        d->slots[t->slot].task = NULL;
    ak_daemon_task_unlink (d, t);
    ak_daemon_task_free (&t);
}

void ak_daemon_task_fail (ak_daemon_t *d, ak_dtask_t *t, const char *status, const char *reason)
{
    ak_daemon_task_finish (d, t, ak_pb_receipt_for (t->a, status, reason));
}
