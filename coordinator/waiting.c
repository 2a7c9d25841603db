/*  coordinator/waiting.c: queued work that no worker can take (see waiting.h). */
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "waiting.h"
#include "log.h"
#include "util.h"

/* Known workers of device_class: how many are alive, how many there are.
   Walks the registry with ak_registry_first/next: not from inside such a
   walk. */
static void s_workers_of (ak_registry_t *reg, const char *device_class, size_t *alive_p, size_t *known_p)
{
    size_t alive = 0, known = 0;
    for (ak_worker_t *w = ak_registry_first (reg); w; w = ak_registry_next (reg))
        for (size_t c = 0; c < w->nclasses; c++)
            if (strcmp (w->classes[c], device_class) == 0) {
                known++;
                alive += w->alive;
                break;
            }
    *alive_p = alive;
    *known_p = known;
}

bool ak_waiting_announced (ak_registry_t *reg, const char *device_class)
{
    size_t alive, known;
    s_workers_of (reg, device_class, &alive, &known);
    return known > 0;
}

/* Queued unpinned tasks of batch in device_class. */
static size_t s_queued (const ak_batch_t *batch, const char *device_class)
{
    size_t n = 0;
    for (size_t i = 0; i < batch->ntasks; i++) {
        const ak_task_t *t = batch->tasks[i];
        n += t->state == AK_TS_QUEUED && !t->pin_worker && strcmp (t->device_class, device_class) == 0;
    }
    return n;
}

size_t ak_waiting_batch (ak_registry_t *reg, const ak_batch_t *batch, ak_waiting_t **list_p)
{
    *list_p = NULL;
    if (batch->state != AK_BS_OPEN || batch->counts[AK_TS_QUEUED] == 0)
        return 0;
    size_t n = 0;
    ak_waiting_t *list = NULL;
    for (size_t i = 0; i < batch->ntargets; i++) {
        const char *cls = batch->targets[i];
        bool repeated = false;
        for (size_t j = 0; j < i; j++)
            repeated |= strcmp (batch->targets[j], cls) == 0;
        size_t alive, known, queued;
        if (repeated)
            continue;
        s_workers_of (reg, cls, &alive, &known);
        if (alive || (queued = s_queued (batch, cls)) == 0)
            continue;
        list = ak_realloc (list, (n + 1) * sizeof *list);
        list[n++] = (ak_waiting_t) { ak_strdup (cls), queued, known };
    }
    *list_p = list;
    return n;
}

void ak_waiting_free (ak_waiting_t **list_p, size_t n)
{
    if (list_p && *list_p) {
        for (size_t i = 0; i < n; i++)
            free ((*list_p)[i].device_class);
        free (*list_p);
        *list_p = NULL;
    }
}

void ak_waiting_text (const ak_waiting_t *w, char *buf, size_t len)
{
    char why[64];
    if (w->seen == 0)
        snprintf (why, sizeof why, "no worker has ever announced it");
    else
        snprintf (why, sizeof why, "its %zu worker%s %s dead", w->seen, w->seen == 1 ? "" : "s",
                  w->seen == 1 ? "is" : "are");
    snprintf (buf, len, "no live worker of class %.128s (%zu queued; %s)", w->device_class, w->queued, why);
}

// ------------------------------------------------------------------ the log

struct ak_waiting_log {
    zhashx_t *warned;           /* device class -> (void *) 1: waiting at the last check */
};

ak_waiting_log_t *ak_waiting_log_new (void)
{
    ak_waiting_log_t *self = ak_calloc (1, sizeof *self);
    self->warned = zhashx_new ();
    if (!self->warned)
        abort ();
    return self;
}

void ak_waiting_log_destroy (ak_waiting_log_t **self_p)
{
    if (self_p && *self_p) {
        ak_waiting_log_t *self = *self_p;
        zhashx_destroy (&self->warned);
        free (self);
        *self_p = NULL;
    }
}

size_t ak_waiting_log_check (ak_waiting_log_t *self, ak_sched_t *sched, ak_registry_t *reg)
{
    /* class -> queued tasks and the first batch, over every open batch */
    zhashx_t *now = zhashx_new ();
    zlistx_t *order = zlistx_new ();        /* ak_waiting_t, first seen first */
    if (!now || !order)
        abort ();
    for (ak_batch_t *b = ak_sched_batch_first (sched); b; b = ak_sched_batch_next (sched)) {
        ak_waiting_t *list = NULL;
        size_t n = ak_waiting_batch (reg, b, &list);
        for (size_t i = 0; i < n; i++) {
            ak_waiting_t *w = zhashx_lookup (now, list[i].device_class);
            if (w) {
                w->queued += list[i].queued;
                continue;
            }
            w = ak_malloc (sizeof *w);
            *w = list[i];
            list[i].device_class = NULL;        /* moved */
            zhashx_insert (now, w->device_class, w);
            zlistx_add_end (order, w);
            if (!zhashx_lookup (self->warned, w->device_class)) {
                char text[320];
                ak_waiting_text (w, text, sizeof text);
                ak_warn ("waiting: %s, batch %s and any other open batch of the class wait until one "
                         "registers (akctl workers lists who announced what)", text, b->batch_id);
            }
        }
        ak_waiting_free (&list, n);
    }
    /* classes that waited and no longer do */
    zlistx_t *gone = zlistx_new ();
    if (!gone)
        abort ();
    for (void *v = zhashx_first (self->warned); v; v = zhashx_next (self->warned))
        if (!zhashx_lookup (now, zhashx_cursor (self->warned)))
            zlistx_add_end (gone, (void *) zhashx_cursor (self->warned));
    for (const char *cls = zlistx_first (gone); cls; cls = zlistx_next (gone)) {
        ak_info ("class %s no longer waits: a worker of the class is live, or its queued work ended", cls);
        zhashx_delete (self->warned, cls);
    }
    zlistx_destroy (&gone);
    size_t count = 0;
    for (ak_waiting_t *w = zlistx_first (order); w; w = zlistx_next (order)) {
        zhashx_update (self->warned, w->device_class, (void *) 1);
        free (w->device_class);
        free (w);
        count++;
    }
    zlistx_destroy (&order);
    zhashx_destroy (&now);
    return count;
}
