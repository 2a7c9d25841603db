/*  coordinator/client.h: the client verbs (docs/client-api.md).

    One request in, one reply out: verb + args + body -> code, error, JSON.
    Reads come from the in-memory index and one read transaction; the only
    writes are `submit` (its own write transaction, committed before the
    reply) and `cancel` (through the group commit, flushed before the
    reply).  Never blocks on the network. */
#ifndef AK_CLIENT_H
#define AK_CLIENT_H
#include <stdbool.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "store.h"
#include "sched.h"
#include "registry.h"
#include "intake.h"
#include "counters.h"
#include "waiting.h"

typedef struct {
    ak_store_t          *store;
    ak_sched_t          *sched;
    ak_registry_t       *registry;
    ak_intake_t         *intake;
    const ak_counters_t *counters;
    uint64_t             start_ms;      /* monotonic ms at start */
    /* Commits every pending change now (0 or the store's error). */
    int                (*commit_now) (void *arg, ak_err_t *err);
    void                *arg;
    ak_waiting_log_t    *waiting;       /* unserved classes, WARN once (waiting.h); may be NULL */
    const struct ak_loopstat *loop;     /* the loop's statistics for `stats` (loopstat.h); may be NULL */
    /* set by the verbs for the caller to act on */
    bool                 shutdown;
    bool                 work_added;
} ak_client_env_t;

/* Runs req.  0 with *json_p (the caller frees) or a negative AK_E code with
   err saying what is wrong (naming the verb, batch, task or argument). */
int ak_client_handle (ak_client_env_t *env, const Ak__ClientRequest *req, uint64_t now,
                      char **json_p, ak_err_t *err);

/* The index of verb in the verb table (< AK_CLIENT_VERB_SLOTS - 1), or
   AK_CLIENT_VERB_SLOTS - 1 for a verb it does not know (or NULL). */
int ak_client_verb_id (const char *verb);
/* The verb of index id ("unknown" for the last slot, NULL past the table). */
const char *ak_client_verb_name (int id);

#endif
