/*  tests/fault/fault.h: what the fault tests share.

    Each fault test is a real multi-process run: an akcoord it can kill -9
    and start again on the same store, workers (akload's simulated ones or
    real akworkers), and checks made two ways: through the client API while
    things run, and by reading the LMDB store itself once the coordinator is
    stopped.  Every wait is bounded; a process the test started is killed
    (by its pid) when the test ends, whatever happened. */
#ifndef AK_FAULT_H
#define AK_FAULT_H
#include "support.h"
#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include <sys/types.h>

/* ------------------------------------------------------------- processes */

/* Starts argv (argv[0] a path) with output appended to log_path; the pid
   is remembered so ak_fault_reap_all kills it if the test does not. */
pid_t ak_fault_spawn (char *const argv[], const char *log_path);
/* Kills pid with sig and reaps it (SIGKILL after timeout_ms); returns the
   waitpid status.  The pid is forgotten. */
int   ak_fault_stop (pid_t pid, int sig, int timeout_ms);
/* SIGKILLs every process spawned and not stopped yet. */
void  ak_fault_reap_all (void);
/* True while pid (our child) has not exited; reaps it when it has. */
bool  ak_fault_alive (pid_t pid);

/* Milliseconds on the monotonic clock (sleeping: ak_test_sleep_ms; free
   ports: ak_test_free_ports, support.h). */
uint64_t ak_fault_now_ms (void);

/* A DEALER socket connected to endpoint, linger 0 (the test fails if it
   cannot be made). */
zsock_t *ak_fault_dealer (const char *endpoint);

/* ----------------------------------------------------------- coordinator */

typedef struct {
    char    *dir;               /* the test's directory */
    char    *store;             /* DIR/store */
    char    *log;               /* DIR/akcoord.log, appended across restarts */
    char     host[64];          /* address both endpoints bind */
    char     workers[96];       /* tcp://HOST:PORT */
    char     clients[96];
    char    *args[24];          /* extra akcoord flags (owned copies) */
    int      nargs;
    char    *env;               /* one NAME=VALUE for the next start only, or NULL */
    pid_t    pid;
    int      starts;
    zsock_t *client;            /* DEALER on the client endpoint */
} ak_fault_coord_t;

/* A test directory and endpoints on host (NULL: 127.0.0.1); extra is a
   NULL-terminated list of akcoord flags added to every start. */
ak_fault_coord_t *ak_fault_coord_new (const char *tag, const char *host, const char *const *extra);
/* Starts akcoord and waits until it answers (fails the test after 20 s). */
void ak_fault_coord_start (ak_fault_coord_t *self);
/* kill -SIG and reap; the client socket is replaced.  Returns the status. */
int  ak_fault_coord_kill (ak_fault_coord_t *self, int sig);
/* Prints the end of the log (lines lines), stops anything left and
   removes the directory (kept when $AK_FAULT_KEEP is set). */
void ak_fault_coord_destroy (ak_fault_coord_t **self_p, int lines);

/* One client request.  Returns the reply code; on 0, *json_p (may be
   NULL) gets the parsed answer (caller decrefs).  A missing answer within
   timeout_ms is AK_EUNAVAIL.  The socket is replaced after a failure. */
int     ak_fault_call (ak_fault_coord_t *self, int timeout_ms, const char *verb, const char *arg0,
                       const char *arg1, const char *body, json_t **json_p, char **error_p);
/* The same with nargs arguments. */
int     ak_fault_call_args (ak_fault_coord_t *self, int timeout_ms, const char *verb, const char *const *args,
                            size_t nargs, const char *body, json_t **json_p, char **error_p);
/* Every page of a paged answer (docs/client-api.md, "Pages") as one: the
   arrays `key` of the pages after the first appended to its own. */
json_t *ak_fault_json_pages (ak_fault_coord_t *self, const char *verb, const char *arg0, const char *key);
/* The answer of a call that must succeed (fails the test otherwise). */
json_t *ak_fault_json (ak_fault_coord_t *self, const char *verb, const char *arg0, const char *arg1);
/* A counter of `stats` (sub: a member of an object counter, or NULL). */
int64_t ak_fault_stat (ak_fault_coord_t *self, const char *key, const char *sub);
/* counts[state] of batch_id, -1 when there is no answer. */
int64_t ak_fault_count (ak_fault_coord_t *self, const char *batch_id, const char *state);
/* The batch's state ("open", "complete" ...) into buf; "" when no answer. */
const char *ak_fault_batch_state (ak_fault_coord_t *self, const char *batch_id, char *buf, size_t len);
/* Waits until batch_id is complete (fails the test after timeout_ms). */
void ak_fault_wait_complete (ak_fault_coord_t *self, const char *batch_id, int timeout_ms);

/* Runs akctl (--coordinator set) with args, output into *out_p; returns
   its exit code. */
int ak_fault_akctl (ak_fault_coord_t *self, const char *args, char **out_p);

/* --------------------------------------------------------------- batches */

/* Writes an operator "fa" whose candidate `c` has ntune values of P, and a
   manifest with policy_json (the members of "policy", e.g. "\"lease_ms\":
   5000"), into DIR/NAME/; returns the bundle (caller frees).  The batch
   has ntune + 1 tasks (one preflight).  Its sources are stubs: only for
   akload or fake workers. */
char *ak_fault_stub_bundle (const char *dir, const char *name, int ntune, const char *policy_json);
/* A manifest over the real catalog: softmax with the given extra planted
   candidates from kernels/testing ("hang", "wrong" ...), only those tuned;
   workloads "small"; returns the bundle. */
char *ak_fault_real_bundle (const char *dir, const char *name, const char *const *planted,
                            const char *policy_json);
/* Submits bundle (allow-unserved: the workers may come later); returns
   the batch id (caller frees). */
char *ak_fault_submit (ak_fault_coord_t *self, const char *bundle);

/* ----------------------------------------------------------------- checks */

typedef struct {
    size_t tasks;               /* task records of the batch */
    size_t terminal;            /* of them done/failed/poisoned/cancelled */
    size_t receipts;            /* receipts stored for the batch */
    size_t accepted;            /* of them not flagged duplicate */
    size_t duplicates;          /* flagged duplicate */
    size_t dup_counted;         /* sum of TaskRecord.duplicates */
} ak_fault_tally_t;

/* Opens the store of a STOPPED coordinator and checks batch_id: every task
   terminal (when all_terminal) with exactly one accepted receipt when it is
   done or failed, that receipt is the one its record names, of its task
   and batch, in the attempts index; never two accepted receipts for a task
   nor two for one (task, attempt); duplicates flagged and counted in the
   records.  Fails the test on the first violation; fills *tally. */
void ak_fault_check_store (const char *store_dir, const char *batch_id, bool all_terminal,
                           ak_fault_tally_t *tally);

/* The same through the client API (`receipts` and `status`) on a running
   coordinator: per task at most one accepted receipt, exactly one when
   done or failed; returns accepted receipts, *dups_p the duplicates. */
size_t ak_fault_check_receipts (ak_fault_coord_t *self, const char *batch_id, size_t *dups_p);

/* How many times needle occurs in the file at path (a log); -1 when it
   cannot be read. */
int ak_fault_occurrences (const char *path, const char *needle);

/* Reads akload's --stats-json file: counts.NAME (acks_received ...). */
int64_t ak_fault_akload_count (const char *stats_path, const char *name);

/* ------------------------------------------------------ in-test workers */

/* Simulated workers inside the test process, for checks that need every
   ACK a worker saw: each is a DEALER that says HELLO (running: what it
   holds), answers every ASSIGN at once with STARTED and a RECEIPT (status
   ok), keeps receipts until ACKed, heartbeats, and on DISCONNECT says
   HELLO again and re-sends.  Every ACK is recorded. */
typedef struct {
    char     task_id[64];
    uint32_t attempt;
    char     receipt_id[24];
    bool     duplicate;
} ak_fault_ack_t;

typedef struct ak_fault_sim ak_fault_sim_t;

/* heartbeat_ms is what the workers announce in HELLO: the coordinator
   declares one dead after 3 of its intervals (or its own, if longer) of
   silence, and the workers only speak inside ak_fault_sim_run. */
ak_fault_sim_t *ak_fault_sim_new (const char *endpoint, int workers, const char *prefix,
                                  uint32_t heartbeat_ms);
/* Serves for ms milliseconds, or until until(arg) says true (may be NULL). */
void ak_fault_sim_run (ak_fault_sim_t *self, int ms, bool (*until) (void *arg), void *arg);
/* What the workers answer to an ASSIGN: fn returns the receipt's status
   ("ok", "wrong_answer" ...), or NULL to hold the task silently (no
   STARTED, no RECEIPT).  Default: "ok" for everything. */
typedef const char *(ak_fault_status_fn) (const Ak__Assign *assign, void *arg);
void ak_fault_sim_set_status (ak_fault_sim_t *self, ak_fault_status_fn *fn, void *arg);
/* Every worker says HELLO again now, having lost the tasks it sat on
   silently (its unacked receipts it keeps).  Every HELLO lists the tasks a
   worker holds: those it sits on and those whose receipts wait for an ACK,
   as akworker's does. */
void ak_fault_sim_rehello (ak_fault_sim_t *self);
/* ACKs that said a receipt was refused (not recorded among the ACKs). */
size_t ak_fault_sim_refused (ak_fault_sim_t *self);
/* Every ACK received so far, in order. */
size_t ak_fault_sim_acks (ak_fault_sim_t *self, const ak_fault_ack_t **acks_p);
void ak_fault_sim_destroy (ak_fault_sim_t **self_p);

/* ------------------------------------------------------- raw workers */

/* A DEALER on endpoint that says only what the test tells it to: for
   workers that misbehave on purpose, and for exact interleavings. */
zsock_t *ak_fault_raw_new (const char *endpoint);
/* HELLO as worker_id: one host device of device_class, slots and
   prefetch as given, running the n tasks refs (may be NULL). */
void ak_fault_raw_hello (zsock_t *s, const char *worker_id, const char *device_class, uint32_t slots,
                         uint32_t prefetch, Ak__TaskRef **refs, size_t n);
/* The same as from another process: host and pid as given (the HELLO
   above names host "fault-test" and the test's pid). */
void ak_fault_raw_hello_from (zsock_t *s, const char *host, uint32_t pid, const char *worker_id,
                              const char *device_class, uint32_t slots, uint32_t prefetch, Ak__TaskRef **refs,
                              size_t n);
/* The next message of kind within timeout_ms (others are skipped), or NULL. */
Ak__Envelope *ak_fault_raw_expect (zsock_t *s, Ak__Envelope__BodyCase kind, int timeout_ms);
/* The next message other than a HEARTBEAT within timeout_ms, or NULL. */
Ak__Envelope *ak_fault_raw_next (zsock_t *s, int timeout_ms);
void ak_fault_raw_started (zsock_t *s, const char *task_id, uint32_t attempt);
/* Sends env as it is (the test built it). */
void ak_fault_raw_send (zsock_t *s, Ak__Envelope *env);
/* A RECEIPT with status ok for attempt of the task a describes, each of
   its workloads timed at speedup over the baseline (noise 1%); extra_log
   bytes of compile log make it as large as a test needs. */
void ak_fault_raw_receipt (zsock_t *s, const Ak__Assign *a, uint32_t attempt, double speedup, size_t extra_log);

#endif
