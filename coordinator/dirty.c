/*  coordinator/dirty.c: dirty records across a commit in flight (see dirty.h). */
#include <stdlib.h>
#include "dirty.h"

static ak_dmark_t *s_mark (const ak_dirty_t *self, const void *record)
{
    return (ak_dmark_t *) ((char *) record + self->mark_at);
}

void ak_dirty_init (ak_dirty_t *self, size_t mark_at)
{
    *self = (ak_dirty_t) { .list = zlistx_new (), .mark_at = mark_at, .gen = 1 };
    if (!self->list)
        abort ();
}

void ak_dirty_destroy (ak_dirty_t *self)
{
    zlistx_destroy (&self->list);
}

void ak_dirty_mark (ak_dirty_t *self, void *record, uint64_t now)
{
    ak_dmark_t *m = s_mark (self, record);
    m->gen = self->gen;
    if (!m->on) {
        m->on = true;
        zlistx_add_end (self->list, record);
    }
    if (!now)
        now = 1;
    if (!self->since)
        self->since = now;
    if (self->flushing && !self->since_next)
        self->since_next = now;
}

void ak_dirty_forget (ak_dirty_t *self, void *record)
{
    ak_dmark_t *m = s_mark (self, record);
    if (!m->on)
        return;
    void *handle = zlistx_find (self->list, record);
    if (handle)
        zlistx_delete (self->list, handle);
    m->on = false;
    if (zlistx_size (self->list) == 0)
        self->since = self->since_next = 0;
}

void ak_dirty_begin_flush (ak_dirty_t *self)
{
    self->closed = self->gen++;
    self->flushing = true;
    self->since_next = 0;
}

void ak_dirty_flushed (ak_dirty_t *self, void (*done) (void *record, bool still, void *arg), void *arg)
{
    size_t n = zlistx_size (self->list);
    for (size_t i = 0; i < n; i++) {
        void *record = zlistx_detach (self->list, NULL);
        ak_dmark_t *m = s_mark (self, record);
        bool still = self->flushing && m->gen > self->closed;
        if (still)
            zlistx_add_end (self->list, record);
        else
            m->on = false;
        if (done)
            done (record, still, arg);
    }
    self->since = zlistx_size (self->list) ? (self->since_next ? self->since_next : self->since) : 0;
    self->since_next = 0;
    self->flushing = false;
}

void ak_dirty_rollback (ak_dirty_t *self)
{
    self->flushing = false;
    self->since_next = 0;
}
