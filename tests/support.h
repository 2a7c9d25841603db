/*  tests/support.h: helpers shared by the cmocka test binaries. */
#ifndef AK_TEST_SUPPORT_H
#define AK_TEST_SUPPORT_H
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <cmocka.h>
#include <jansson.h>
#include "spec.h"             /* ak_candidate_t, AK_MAX_PARAMS */
#include "skip.h"             /* ak_test_skip, ak_test_exit: every test's main returns through it */

/* A fresh temporary directory (mkdtemp under $TMPDIR or /tmp); caller frees
   the string; ak_test_rmtree removes it. */
char *ak_test_tmpdir (const char *tag);
void  ak_test_rmtree (const char *path);

/* Paths: $AK_SOURCE_DIR/rel and $AK_BIN_DIR/name (set by CTest); caller frees. */
char *ak_test_src (const char *rel);
char *ak_test_bin (const char *name);
/* This build's libakprofile.so: lib/ beside $AK_BIN_DIR in a build tree,
   $AK_BIN_DIR/lib in a bundle (ops/bundle.sh); caller frees. */
char *ak_test_akprofile_lib (void);

/* The absolute path of the NVRTC library this process loads, as the CUDA
   backend hands it to its compile helper (worker/nvrtc_run.h); fails the
   test when NVRTC does not load or the loader cannot say.  Builds with the
   CUDA backend only (AK_HAVE_CUDA). */
const char *ak_test_nvrtc_file (void);

/* The operators of the catalog: every kernels/<op>/ that has a spec.json,
   in name order, or only those named in $AK_CATALOG_OPS ("layernorm,reduce"),
   less those named in $AK_CATALOG_OPS_EXCEPT.
   Stores malloc'ed names in ops (room for max) and returns how many; fails
   the test when there is none or more than max. */
#define AK_TEST_MAX_OPS 64
/* Is name one of the comma-separated names in list ("layernorm,reduce")? */
bool ak_test_listed (const char *list, const char *name);
int ak_test_catalog_ops (char *ops[], int max);

/* A heap-owned Ak__Source (name, text, its sha256 digest) for an Assign
   built by a test; freed with the Assign. */
struct Ak__Source;
struct Ak__Source *ak_test_source (const char *name, const char *text);

/* The whole file at path (up to 16 MiB; caller frees), or "" when it
   cannot be read. */
char *ak_test_read (const char *path);

/* The text of the testing kernel kernels/testing/cuda/NAME.cu (caller
   frees); fails the test when it cannot be read. */
char *ak_test_testing_kernel (const char *name);

/* Writes text to dir/name and returns the full path (caller frees). */
char *ak_test_write (const char *dir, const char *name, const char *text);

/* The spec text of a host-only stub operator called name: rows x cols
   float32, one size "small" (4 x 8), x -> y, reference ref.c, host
   baseline base.c, and candidates_json as its "candidates" (caller frees;
   the tests that use it never compile the sources). */
char *ak_test_stub_spec (const char *name, const char *candidates_json);

/* Starts argv[0] with argv (NULL-terminated), stdout+stderr to log_path
   (appended; NULL: inherit).  Returns the pid or -1. */
pid_t ak_test_spawn (char *const argv[], const char *log_path);
/* Starts akcoord as ak_test_spawn does, with "--plain" added after argv[0]
   (the akcoord binary): tests on loopback and ipc:// run without
   authentication, which akcoord only does when asked.  Tests of CURVE
   (tests/integration/test_auth.c) use ak_test_spawn with --cert/--keys. */
pid_t ak_test_spawn_coord (char *const argv[], const char *log_path);
/* Sends sig and waits up to timeout_ms; then SIGKILL. Returns exit status (waitpid form). */
int   ak_test_stop (pid_t pid, int sig, int timeout_ms);

/* Runs a command line through /bin/sh, captures stdout (caller frees) and
   returns the exit code (or -1). */
int   ak_test_run (const char *cmdline, char **out_p);

/* ak_test_run of a printf-style command line that also prints the line,
   its exit code and its stdout (for the test's log). */
int   ak_test_runf (char **out_p, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* n (at most 8) distinct free TCP ports on 127.0.0.1, all bound at once
   and then released. */
void  ak_test_free_ports (int ports[], int n);
/* One HTTP/1.0 request (method, path) to 127.0.0.1:port, read to the
   end (10 s timeout): the status code (-1: no answer) and, with body_p,
   the body (caller frees; "" when none). */
int   ak_test_http (int port, const char *method, const char *path, char **body_p);

/* The path of the AddressSanitizer runtime this process runs with, into
   buf (false, buf "", in a build without it): what a python3 child that
   loads our instrumented libraries needs in LD_PRELOAD. */
bool  ak_test_asan_runtime (char *buf, size_t len);

/* Polls fn(arg) until it returns true or timeout_ms passes (a last call
   at the deadline decides); the pause between calls grows from 20 ms to
   250 ms, so that a predicate that starts a process does not take a core;
   the processes fn starts run without LeakSanitizer's scan at exit (the
   tests' own calls of the same verbs keep it). */
bool  ak_test_wait (bool (*fn) (void *arg), void *arg, int timeout_ms);

/* Helpers of support.c that tests/cluster.c uses too: a pause; LeakSanitizer off in the processes started until
   ak_test_leak_scan_on (which takes back what ak_test_leak_scan_off
   returned); vasprintf that fails the test when it fails; and ak_test_run
   that, with echo, prints the command, its exit code and its stdout. */
void  ak_test_sleep_ms (int ms);
char *ak_test_leak_scan_off (void);
void  ak_test_leak_scan_on (char *saved);
char *ak_test_vsprintf (const char *fmt, va_list ap);
int   ak_test_run_echo (const char *cmd, char **out_p, bool echo);

/* JSON fixtures: the value at path ("ops[0].policy.threshold",
   "sizes[2].size.cols") of root, or NULL; and set (value non-NULL, stolen)
   or delete the member at path, whose parent must exist (else the test fails). */
json_t *ak_test_json_at (json_t *root, const char *path);
void    ak_test_json_set (json_t *root, const char *path, json_t *value);
/* Writes json (indented; the first `from` in its text replaced by `to`
   when from is given, else the test fails) as dir/name; returns the path
   (caller frees). */
char   *ak_test_write_json (const char *dir, const char *name, const json_t *json,
                            const char *from, const char *to);
/* A refused load: rc must be code, loaded NULL, and msg must name the file
   ("NAME: ") and hold each needle given. */
void    ak_test_expect_refused (int rc, int code, const void *loaded, const char *msg,
                                const char *name, const char *needle1, const char *needle2);
/* ak_test_json_set of path to value that returns a copy of what was there
   (NULL: nothing), for ak_test_json_restore to put back. */
json_t *ak_test_json_swap (json_t *root, const char *path, json_t *value);
void    ak_test_json_restore (json_t *root, const char *path, json_t *old);

/*  A private cluster: a temporary directory, akcoord in plain mode on ipc://
    or free loopback endpoints, N akworker processes, and the akctl command
    line that talks to that coordinator.  Every step asserts (and dumps the
    logs) when it fails; ak_test_cluster_teardown stops whatever did start,
    so tests start the cluster inside the test and tear it down in the
    cmocka teardown.  Logs: DIR/akcoord.log (or the name given to
    ak_test_cluster_coord), DIR/<worker id>.log. */
#define AK_TEST_CLUSTER_MAX 4
typedef struct {
    char   *dir;                /* the temporary directory */
    char   *store;              /* DIR/store */
    char   *workers_ep, *clients_ep;
    char   *akctl;              /* "'BIN/akctl' --coordinator CLIENTS --timeout 10000" */
    pid_t   coord;              /* 0 once stopped */
    char   *coord_log;          /* its log's name in dir */
    int     nworkers;
    pid_t   workers[AK_TEST_CLUSTER_MAX];
    char    ids[AK_TEST_CLUSTER_MAX][32];
    bool    echo;               /* ak_test_akctl prints each command, its exit code and stdout */
    size_t  dump_bytes;         /* how much of a log's tail a dump shows (0: 4000) */
    bool    relative_cache;     /* workers start in dir with --cache cache-<id> (relative) */
} ak_test_cluster_t;

/* The directory (mkdtemp, tag in its name), the endpoints (tcp: two free
   loopback ports; else ipc:// in the directory) and the akctl prefix. */
void ak_test_cluster_init (ak_test_cluster_t *c, const char *tag, bool tcp);
/* Starts akcoord --plain --store STORE (NULL: c->store) on the endpoints,
   args (NULL-terminated, may be NULL) appended, logging to DIR/log (NULL:
   "akcoord.log"), and waits up to timeout_ms until `akctl stats` answers. */
void ak_test_cluster_coord (ak_test_cluster_t *c, const char *store, const char *log,
                            const char *const args[], int timeout_ms);
/* Starts n workers ID_PREFIX1..n (--cache DIR/cache-ID, args appended) and
   waits up to timeout_ms until `akctl workers` lists each of them alive. */
void ak_test_cluster_workers (ak_test_cluster_t *c, const char *id_prefix, int n,
                              const char *const args[], int timeout_ms);
/* True when every worker still running (pid > 0) is listed alive; arg is
   the cluster (for ak_test_wait). */
bool ak_test_cluster_alive (void *c);
/* Runs `akctl ARGS` (printf-style, through /bin/sh) against the cluster;
   returns the exit code and, with out_p, stdout (caller frees). */
int  ak_test_akctl (ak_test_cluster_t *c, char **out_p, const char *fmt, ...)
     __attribute__ ((format (printf, 3, 4)));
/* `akctl --json ARGS`, parsed; NULL (with a message) unless it exited 0
   with JSON. */
json_t *ak_test_akctl_json (ak_test_cluster_t *c, const char *fmt, ...)
     __attribute__ ((format (printf, 2, 3)));
/* `akctl ARGS` must exit 0 and print a batch id ("B..."): returns it
   (caller frees); else the test fails. */
char *ak_test_submit (ak_test_cluster_t *c, const char *fmt, ...)
     __attribute__ ((format (printf, 2, 3)));
/* Waits up to timeout_ms until batch id is no longer open and returns its
   `akctl --json status` (caller decrefs); on timeout dumps the logs and
   fails the test.  One `akctl watch` follows the batch (its polls in one
   process), again where it ends early (a coordinator restarted). */
json_t *ak_test_batch_wait (ak_test_cluster_t *c, const char *id, int timeout_ms);
/* Prints the tail of DIR/name; name NULL: every worker's log and the
   coordinator's. */
void ak_test_cluster_dump (ak_test_cluster_t *c, const char *name);
/* Stops worker i with sig (ak_test_stop) and forgets it; returns the status. */
int  ak_test_cluster_stop_worker (ak_test_cluster_t *c, int i, int sig, int timeout_ms);
/* A clean stop that the test asserts: each remaining worker on SIGTERM,
   then the coordinator on `akctl shutdown`, each must exit 0 within
   timeout_ms (else its log is dumped and the test fails). */
void ak_test_cluster_shutdown (ak_test_cluster_t *c, int timeout_ms);
/* Stops whatever still runs (SIGTERM, then SIGKILL), saying how anything
   that did not exit 0 ended, removes the directory (kept when AK_TEST_KEEP
   is set) and clears c. */
void ak_test_cluster_teardown (ak_test_cluster_t *c);

/*  A deterministic sample of a candidate's valid configurations, spread
    over its space: the first and the last, then (valid configurations
    visited in a fixed scrambled order) each that holds a value of some
    parameter no chosen one holds yet, until every value that occurs in a
    valid configuration is covered.  So every value of every parameter is
    compiled (and gated) by a few configurations.  Returns how many (at
    most max) in out[i][param]; fails the test when the walk fails. */
size_t ak_test_space_sample (const ak_candidate_t *cand, int64_t (*out)[AK_MAX_PARAMS], size_t max);

#endif
