/*  worker/pool.h: a small, bounded thread pool for compiles.

    Items go in with ak_pool_push, a fixed number of threads run fn on them,
    and finished items come back on the owner's thread with
    ak_pool_pop_done; each completion writes one byte to notify_fd so an
    event loop polling it wakes up.  The pool never owns or frees items. */
#ifndef AK_WORKER_POOL_H
#define AK_WORKER_POOL_H
#include "error.h"

typedef struct ak_pool ak_pool_t;
typedef void (ak_pool_fn) (void *item, void *arg);

/* threads in [1, 64].  AK_EINTERNAL when a thread cannot be started. */
int   ak_pool_new (int threads, ak_pool_fn *fn, void *arg, int notify_fd,
                   ak_pool_t **self_p, ak_err_t *err);
/* Drops items not started, waits for running ones, joins the threads. */
void  ak_pool_destroy (ak_pool_t **self_p);
void  ak_pool_push (ak_pool_t *self, void *item);
/* Next finished item (in completion order), or NULL. */
void *ak_pool_pop_done (ak_pool_t *self);

#endif
