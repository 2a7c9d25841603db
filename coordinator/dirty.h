/*  coordinator/dirty.h: a participant's dirty records for the group
    commit (commit.h), when the loop may change them while a commit is in
    flight (committer.h).

    Each record embeds an ak_dmark_t; a change marks it (ak_dirty_mark), the
    flush writes every marked record (ak_dirty_begin_flush first, then the
    walk), and after the commit holds, ak_dirty_flushed forgets the marks
    that flush wrote, keeping those the loop made again since: their newer
    state goes into the next commit.  Marks carry the generation they were
    made in; a flush closes one generation.  A rollback keeps every mark.

    Never: free a marked record without ak_dirty_forget. */
#ifndef AK_DIRTY_H
#define AK_DIRTY_H
#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    bool     on;
    uint64_t gen;               /* the generation of its latest mark */
} ak_dmark_t;

typedef struct {
    zlistx_t *list;             /* marked records, in marking order */
    size_t    mark_at;          /* offsetof (record, its ak_dmark_t) */
    uint64_t  gen;              /* marks made now get this */
    uint64_t  closed;           /* the flush in flight wrote marks of generations up to it */
    bool      flushing;
    uint64_t  since;            /* monotonic ms of the oldest unflushed mark; 0: none */
    uint64_t  since_next;       /* ... of the oldest mark made since the flush */
} ak_dirty_t;

/* Aborts without memory, as the rest of the index does. */
void ak_dirty_init (ak_dirty_t *self, size_t mark_at);
void ak_dirty_destroy (ak_dirty_t *self);
void ak_dirty_mark (ak_dirty_t *self, void *record, uint64_t now);
void ak_dirty_forget (ak_dirty_t *self, void *record);
/* The flush begins: the marks made until now are the ones it writes. */
void ak_dirty_begin_flush (ak_dirty_t *self);
/* The commit holds: each record the flush wrote is passed to done (may be
   NULL) with whether it stays marked (changed again since). */
void ak_dirty_flushed (ak_dirty_t *self, void (*done) (void *record, bool still, void *arg), void *arg);
/* The commit failed: every mark stays for the next attempt. */
void ak_dirty_rollback (ak_dirty_t *self);

#define ak_dirty_first(self) zlistx_first ((self)->list)
#define ak_dirty_next(self)  zlistx_next ((self)->list)

#endif
