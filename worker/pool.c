/*  worker/pool.c: a small, bounded thread pool (see pool.h). */
#include "pool.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct s_node {
    void          *item;
    struct s_node *next;
} s_node_t;

typedef struct {
    s_node_t *head, *tail;
} s_queue_t;

struct ak_pool {
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    s_queue_t       todo, done;
    bool            stopping;
    pthread_t      *threads;
    int             nthreads;
    ak_pool_fn     *fn;
    void           *arg;
    int             notify_fd;
};

static void s_put (s_queue_t *q, void *item)
{
    s_node_t *n = ak_malloc (sizeof *n);
    n->item = item;
    n->next = NULL;
    if (q->tail)
        q->tail->next = n;
    else
        q->head = n;
    q->tail = n;
}

static void *s_take (s_queue_t *q)
{
    s_node_t *n = q->head;
    if (!n)
        return NULL;
    q->head = n->next;
    if (!q->head)
        q->tail = NULL;
    void *item = n->item;
    free (n);
    return item;
}

static void *s_thread (void *arg)
{
    ak_pool_t *self = arg;
    pthread_mutex_lock (&self->lock);
    for (;;) {
        while (!self->stopping && !self->todo.head)
            pthread_cond_wait (&self->cond, &self->lock);
        if (self->stopping)
            break;
        void *item = s_take (&self->todo);
        pthread_mutex_unlock (&self->lock);
        self->fn (item, self->arg);
        pthread_mutex_lock (&self->lock);
        s_put (&self->done, item);
        if (self->notify_fd >= 0) {
            char b = 1;
            /* Full pipe: a wake-up is already pending, which is enough. */
            ssize_t w = write (self->notify_fd, &b, 1);
            (void) w;
        }
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

int ak_pool_new (int threads, ak_pool_fn *fn, void *arg, int notify_fd,
                 ak_pool_t **self_p, ak_err_t *err)
{
    if (threads < 1 || threads > 64 || !fn || !self_p)
        return ak_err_set (err, AK_EINVAL, "pool: %d threads (allowed 1..64)", threads);
    ak_pool_t *self = ak_calloc (1, sizeof *self);
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->cond, NULL);
    self->fn = fn;
    self->arg = arg;
    self->notify_fd = notify_fd;
    self->threads = ak_calloc ((size_t) threads, sizeof *self->threads);
    for (int i = 0; i < threads; i++) {
        int e = pthread_create (&self->threads[i], NULL, s_thread, self);
        if (e != 0) {
            ak_pool_destroy (&self);
            return ak_err_set (err, AK_EINTERNAL, "pool: pthread_create: %s", strerror (e));
        }
        self->nthreads++;
    }
    *self_p = self;
    return 0;
}

void ak_pool_destroy (ak_pool_t **self_p)
{
    if (self_p && *self_p) {
        ak_pool_t *self = *self_p;
        pthread_mutex_lock (&self->lock);
        self->stopping = true;
        pthread_cond_broadcast (&self->cond);
        pthread_mutex_unlock (&self->lock);
        for (int i = 0; i < self->nthreads; i++)
            pthread_join (self->threads[i], NULL);
        while (s_take (&self->todo))
            ;
        while (s_take (&self->done))
            ;
        pthread_cond_destroy (&self->cond);
        pthread_mutex_destroy (&self->lock);
        free (self->threads);
        free (self);
        *self_p = NULL;
    }
}

void ak_pool_push (ak_pool_t *self, void *item)
{
    pthread_mutex_lock (&self->lock);
    s_put (&self->todo, item);
    pthread_cond_signal (&self->cond);
    pthread_mutex_unlock (&self->lock);
}

void *ak_pool_pop_done (ak_pool_t *self)
{
    pthread_mutex_lock (&self->lock);
    void *item = s_take (&self->done);
    pthread_mutex_unlock (&self->lock);
    return item;
}
