/*  coordinator/committer.c: the group commit's writer thread (see committer.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "committer.h"
#include "clock.h"
#include "util.h"

typedef enum { S_IDLE, S_FILL, S_COMMIT, S_DONE } s_phase_t;

struct ak_committer {
    ak_store_t            *store;
    int                    efd;
    pthread_t              thread;
    pthread_mutex_t        lock;
    pthread_cond_t         cv;          /* every change of phase or quit */
    bool                   quit;
    s_phase_t              phase;       /* under lock */
    ak_committer_fill_fn  *fill;
    void                  *arg;
    int                    rc;          /* the phase's outcome */
    ak_err_t               err;
    uint64_t               commit_ns;
};

static void s_set_phase (ak_committer_t *self, s_phase_t phase)
{
    pthread_mutex_lock (&self->lock);
    self->phase = phase;
    pthread_cond_broadcast (&self->cv);
    pthread_mutex_unlock (&self->lock);
}

/* Reads the eventfd's count (EAGAIN: nothing posted). */
static void s_drain (ak_committer_t *self)
{
    uint64_t n;
    while (read (self->efd, &n, sizeof n) < 0 && errno == EINTR)
        ;
}

static void *s_main (void *arg)
{
    ak_committer_t *self = arg;
    for (;;) {
        pthread_mutex_lock (&self->lock);
        while (!self->quit && self->phase != S_FILL)
            pthread_cond_wait (&self->cv, &self->lock);
        bool quit = self->quit && self->phase != S_FILL;
        pthread_mutex_unlock (&self->lock);
        if (quit)
            return NULL;

        /* fill: the caller is parked in ak_committer_start */
        uint64_t t0 = ak_clock_mono_ns ();
        ak_txn_t *txn = NULL;
        memset (&self->err, 0, sizeof self->err);
        int rc = ak_store_begin (self->store, true, &txn, &self->err);
        if (rc == 0)
            rc = self->fill (self->arg, txn, &self->err);
        if (rc == 0)
            rc = ak_store_prepare (txn, &self->err);
        if (rc) {
            ak_store_abort (&txn);
            self->rc = rc;
            s_set_phase (self, S_IDLE);
            continue;
        }
        self->rc = 0;
        s_set_phase (self, S_COMMIT);

        /* commit: the caller goes on; only the transaction is touched */
        rc = ak_store_commit (&txn, &self->err);
        self->commit_ns = ak_clock_mono_ns () - t0;
        self->rc = rc;
        /* posted after the phase says done: a caller woken by the post
           always finds the outcome (posting first had the loop poll a
           readable fd in vain until this thread was scheduled again: a
           spin on a busy machine).  A caller that took the outcome before
           the post leaves it behind: ak_committer_done drains it when it
           finds the next commit still running. */
        s_set_phase (self, S_DONE);
        uint64_t one = 1;
        while (write (self->efd, &one, sizeof one) < 0 && errno == EINTR)
            ;   /* an eventfd write fails only on overflow (2^64 - 1 posts): never */
    }
}

ak_committer_t *ak_committer_new (ak_store_t *store, ak_err_t *err)
{
    ak_committer_t *self = ak_calloc (1, sizeof *self);
    self->store = store;
    self->efd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->efd < 0) {
        ak_err_set (err, AK_EIO, "committer: eventfd: %s", strerror (errno));
        free (self);
        return NULL;
    }
    int prc = pthread_mutex_init (&self->lock, NULL);
    if (prc == 0 && (prc = pthread_cond_init (&self->cv, NULL)) != 0)
        pthread_mutex_destroy (&self->lock);
    if (prc == 0 && (prc = pthread_create (&self->thread, NULL, s_main, self)) != 0) {
        pthread_cond_destroy (&self->cv);
        pthread_mutex_destroy (&self->lock);
    }
    if (prc) {
        ak_err_set (err, AK_EIO, "committer: cannot start its thread: %s", strerror (prc));
        close (self->efd);
        free (self);
        return NULL;
    }
    return self;
}

void ak_committer_destroy (ak_committer_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ak_committer_t *self = *self_p;
    pthread_mutex_lock (&self->lock);
    while (self->phase == S_COMMIT || self->phase == S_FILL)
        pthread_cond_wait (&self->cv, &self->lock);
    self->quit = true;
    pthread_cond_broadcast (&self->cv);
    pthread_mutex_unlock (&self->lock);
    pthread_join (self->thread, NULL);
    pthread_cond_destroy (&self->cv);
    pthread_mutex_destroy (&self->lock);
    close (self->efd);
    free (self);
    *self_p = NULL;
}

int ak_committer_fd (ak_committer_t *self)
{
    return self->efd;
}

bool ak_committer_busy (ak_committer_t *self)
{
    pthread_mutex_lock (&self->lock);
    bool busy = self->phase != S_IDLE;
    pthread_mutex_unlock (&self->lock);
    return busy;
}

int ak_committer_start (ak_committer_t *self, ak_committer_fill_fn *fill, void *arg, uint64_t *parked_ns,
                        ak_err_t *err)
{
    uint64_t t0 = ak_clock_mono_ns ();
    pthread_mutex_lock (&self->lock);
    if (self->phase != S_IDLE) {
        pthread_mutex_unlock (&self->lock);
        return ak_err_set (err, AK_ESTATE, "committer: a commit is in flight already");
    }
    self->fill = fill;
    self->arg = arg;
    self->phase = S_FILL;
    pthread_cond_broadcast (&self->cv);
    while (self->phase == S_FILL)
        pthread_cond_wait (&self->cv, &self->lock);
    int rc = self->phase == S_IDLE ? self->rc : 0;
    if (rc && err)
        *err = self->err;
    pthread_mutex_unlock (&self->lock);
    if (parked_ns)
        *parked_ns = ak_clock_mono_ns () - t0;
    return rc;
}

int ak_committer_done (ak_committer_t *self, bool wait, bool *finished, uint64_t *commit_ns, ak_err_t *err)
{
    *finished = false;
    pthread_mutex_lock (&self->lock);
    if (self->phase != S_COMMIT && self->phase != S_DONE) {
        pthread_mutex_unlock (&self->lock);
        return ak_err_set (err, AK_ESTATE, "committer: no commit in flight");
    }
    while (wait && self->phase == S_COMMIT)
        pthread_cond_wait (&self->cv, &self->lock);
    if (self->phase == S_COMMIT) {
        /* woken by an earlier commit's post (this one posts only after
           its S_DONE): drain it, unless this one finished meanwhile */
        pthread_mutex_unlock (&self->lock);
        s_drain (self);
        pthread_mutex_lock (&self->lock);
        if (self->phase == S_COMMIT) {
            pthread_mutex_unlock (&self->lock);
            return 0;
        }
    }
    int rc = self->rc;
    if (rc && err)
        *err = self->err;
    if (commit_ns)
        *commit_ns = self->commit_ns;
    self->phase = S_IDLE;
    pthread_mutex_unlock (&self->lock);
    s_drain (self);
    *finished = true;
    return rc;
}
