/*  coordinator/waiting.h: queued work that no worker can take.

    A queued task waits for a live worker of its device class.  When there
    is none (no worker ever announced the class, or every one that did is
    dead now) it would wait forever without a word; this module says so:
      - `submit` names the targets no worker has ever announced (client.c
        refuses them unless the request says allow-unserved);
      - `status` lists, per batch, the classes whose queued tasks have no
        live worker ("waiting": no live worker of class X);
      - the coordinator logs it at WARN once per class when the class starts
        waiting, and at INFO when it stops (a worker of the class came, or
        its queued work ended), from its tick.
    Pinned tasks (verify) are not counted: they wait for their own worker,
    and fail when it dies (sched.h).

    Never: changes a task or a worker, touches the store or the network. */
#ifndef AK_WAITING_H
#define AK_WAITING_H
#include <stdbool.h>
#include <stddef.h>
#include "registry.h"
#include "sched.h"

typedef struct {
    char   *device_class;
    size_t  queued;             /* queued tasks of the class (unpinned) */
    size_t  seen;               /* known workers that announced it, all dead now; 0: never announced */
} ak_waiting_t;

/* True when some known worker, alive or dead, has announced device_class. */
bool ak_waiting_announced (ak_registry_t *reg, const char *device_class);

/* The classes of batch's queued (unpinned) tasks that no live worker
   serves, in the order of batch->targets, into a malloc'ed array (free with
   ak_waiting_free; NULL when none); returns how many. */
size_t ak_waiting_batch (ak_registry_t *reg, const ak_batch_t *batch, ak_waiting_t **list_p);
void ak_waiting_free (ak_waiting_t **list_p, size_t n);

/* "no live worker of class X (28 queued; no worker has ever announced it)"
   or "(28 queued; its 2 workers are dead)", cut to len. */
void ak_waiting_text (const ak_waiting_t *w, char *buf, size_t len);

/* The WARN-once log over every open batch. */
typedef struct ak_waiting_log ak_waiting_log_t;

ak_waiting_log_t *ak_waiting_log_new (void);
void ak_waiting_log_destroy (ak_waiting_log_t **self_p);
/* Logs a WARN for each class that waits now and did not at the last
   check, an INFO for each that waited and no longer does; returns how
   many classes wait now. */
size_t ak_waiting_log_check (ak_waiting_log_t *self, ak_sched_t *sched, ak_registry_t *reg);

#endif
