/*  coordinator/counters.h: the coordinator's own counters, shown by `stats`. */
#ifndef AK_COUNTERS_H
#define AK_COUNTERS_H
#include <stdint.h>

typedef enum { AK_EP_WORKERS = 0, AK_EP_CLIENTS, AK_EP_COUNT } ak_ep_t;

/* Client requests by verb (client.c's table; the last slot: a verb it
   does not know) and by result, for the metrics endpoint. */
#define AK_CLIENT_VERB_SLOTS 32
typedef enum {
    AK_CR_OK = 0,       /* answered */
    AK_CR_ERROR,        /* answered with an error */
    AK_CR_REFUSED,      /* the key's role may not use the verb */
    AK_CR_BUSY,         /* the client queue was full */
    AK_CR_COUNT
} ak_client_result_t;

typedef struct {
    uint64_t messages[AK_EP_COUNT];       /* well-formed messages handled */
    uint64_t rejected[AK_EP_COUNT];       /* malformed, wrong version, wrong body, unknown task ... */
    uint64_t connected[AK_EP_COUNT];      /* transport connections accepted */
    uint64_t disconnected[AK_EP_COUNT];   /* transport connections closed (incl. oversized frames) */
    uint64_t disconnects_sent;            /* DISCONNECT to unregistered workers */
    uint64_t assigns;
    uint64_t acks;
    uint64_t send_failures;
    uint64_t requeued;
    uint64_t leases_expired;
    uint64_t workers_died;
    /* security (coordinator/access.c) */
    uint64_t auth_refused[AK_EP_COUNT];   /* CURVE handshakes the ZAP handler refused */
    uint64_t auth_accepted;               /* CURVE handshakes accepted */
    uint64_t unauthorised;                /* messages on a connection whose key is revoked */
    uint64_t verbs_refused;               /* client verbs the key's role may not use */
    uint64_t busy_refused;                /* client requests refused: the queue was full */
    uint64_t peers_dropped;               /* peers dropped after too many malformed frames */
    uint64_t workers_revoked;             /* workers dropped because their key was revoked */
    /* what a worker may do (coordinator/admit.h) */
    uint64_t receipts_refused;            /* receipts not from the holder of the task's current attempt */
    uint64_t claims_refused;              /* HELLO.running / STARTED for a task not leased to that worker */
    uint64_t hellos_refused;              /* registrations refused: limits, key's ids, rate */
    uint64_t receipts_too_big;            /* receipts past the limits of common/receipt_limits.h */
    /* metrics (coordinator/instrument.c) */
    uint64_t heartbeats;                  /* HEARTBEATs sent */
    uint64_t client_requests[AK_CLIENT_VERB_SLOTS][AK_CR_COUNT];
} ak_counters_t;

#endif
