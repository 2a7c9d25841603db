/*  coordinator/admit.h: what a worker may do (docs/operations.md, "What a
    worker key may do"; docs/protocol.md).

    A worker is known by the worker id of its HELLO and, with CURVE, by the
    key of its connection.  This module decides, from the registry and the
    scheduler's index, whether
      - a HELLO may register: limits that fit a real host (devices, slots,
        the size of what it says about itself), one process per id (a live
        worker's id is not taken by a HELLO from another host and pid, with
        or without keys), the worker ids its key may have (one, unless the
        key's certificate allows more), the rate of its key's registrations
        and the number of workers known;
      - a task listed in HELLO.running stays with it: only a task leased to
        that same worker id, at that attempt;
      - a receipt may be staged: only from the worker that holds the task's
        current attempt (or held it, once the task finished: a copy sent
        again after a lost ACK, which intake.c stores as a duplicate).
    The caller counts and logs every refusal with the peer (worker_proto.c).

    Never: talks to the network, changes a task or a worker (beyond its own
    rate buckets), trusts anything a HELLO or receipt says about who sent it. */
#ifndef AK_ADMIT_H
#define AK_ADMIT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "auth.h"
#include "registry.h"
#include "sched.h"

#define AK_HELLO_MAX_DEVICES    16          /* GPUs of one host (an 8- or 16-GPU node) */
#define AK_HELLO_MAX_SLOTS      1024        /* slots, and prefetch, of one worker */
#define AK_HELLO_MAX_BYTES      16384       /* a HELLO without its running list, packed */
#define AK_HELLO_MAX_RUNNING    4096        /* tasks listed as held */
#define AK_WORKER_ID_MAX        128
#define AK_DEVICE_CLASS_MAX     64
#define AK_WORKERS_MAX          65536       /* worker ids known (alive or dead) */
#define AK_HELLO_BURST          30          /* registrations per key and allowed id, at once */
#define AK_HELLO_REFILL_MS      1000        /* ... and one more per key and id each this many ms */
#define AK_ADMIT_HELD_BEATS     2           /* a live worker's id is its own on its host while heard
                                               within this many of its heartbeat intervals */

typedef struct ak_admit ak_admit_t;

ak_admit_t *ak_admit_new (void);
void ak_admit_destroy (ak_admit_t **self_p);

/* Whether hello is within the limits above (a worker id and device
   classes of printable characters, 1..AK_HELLO_MAX_DEVICES devices ...).
   false with why set when not. */
bool ak_admit_hello_valid (const Ak__Hello *hello, char *why, size_t len);

/* Whether the worker of hello may register now, from a connection with key
   peer (NULL: plain mode, no keys): its id is not held by another live
   process (a worker alive under that id whose HELLO named another host or
   pid: refused while it lives if on another host, and while it is heard
   within AK_ADMIT_HELD_BEATS heartbeat intervals if on the same host; the
   same host and pid is the holder itself on a new socket), its id is not
   bound to another key still in ring, its key has room for a new id
   (ak_key_t.max_workers), the key's registration rate allows one more, and
   a new id does not pass AK_WORKERS_MAX.  Takes one registration from the
   key's bucket when it says yes.  false with why set when not, and *retry
   false when the same HELLO would be refused again (its id held by a live
   process or bound to another key, its key out of ids: the worker is told
   DISCONNECT_ID_TAKEN), true when it may pass later (the rate, the
   registry's size). */
bool ak_admit_hello (ak_admit_t *self, ak_registry_t *registry, const ak_keyring_t *ring,
                     const Ak__Hello *hello, const ak_key_t *peer, uint64_t now, bool *retry, char *why,
                     size_t len);

/* Whether worker w (on a connection with key peer, NULL in plain mode) may
   deliver a receipt for attempt of task: w is bound to peer and holds, or
   held, the task's current attempt.  false with why set when not. */
bool ak_admit_receipt (const ak_task_t *task, uint32_t attempt, const ak_worker_t *w, const ak_key_t *peer,
                       char *why, size_t len);

/* Whether task, listed at attempt in w's HELLO.running, is w's to keep:
   leased to w's id at that attempt. */
bool ak_admit_claim (const ak_task_t *task, uint32_t attempt, const ak_worker_t *w);

#endif
