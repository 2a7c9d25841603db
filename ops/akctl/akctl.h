/*  ops/akctl/akctl.h: the pieces of akctl, the operator's command line.

    akctl is a thin client: every verb is one request to the coordinator's
    client endpoint (docs/client-api.md) and one reply, rendered as a table
    for people or passed through as JSON for scripts.  The only verbs that do
    more are `watch` (a polling loop), `submit` (loads and validates the
    manifest locally first, so mistakes are caught before anything is sent)
    and `demo` (starts a private coordinator and workers).

    akctl never changes state behind the coordinator's back and never waits
    without a bound: a request that gets no answer in time is exit code 3. */
#ifndef AKCTL_H
#define AKCTL_H
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include "error.h"
#include "manifest.h"

/* ------------------------------------------------------------ exit codes */
enum {
    AKCTL_EXIT_OK          = 0,   /* done, and the result is what was asked for */
    AKCTL_EXIT_NEGATIVE    = 1,   /* ran, but the result is negative (cancelled, poisoned, failed) */
    AKCTL_EXIT_USAGE       = 2,   /* bad usage or invalid input (manifest, arguments) */
    AKCTL_EXIT_UNREACHABLE = 3,   /* no answer from the coordinator in time */
    AKCTL_EXIT_NOTFOUND    = 4,   /* the batch, task ... does not exist */
    AKCTL_EXIT_REFUSED     = 5,   /* the coordinator refused this key (the CURVE handshake) */
};

#define AKCTL_DEFAULT_ENDPOINT  "tcp://127.0.0.1:5556"
#define AKCTL_DEFAULT_TIMEOUT   5000      /* ms per request */
#define AKCTL_WATCH_INTERVAL    250       /* ms between status polls */

/* -------------------------------------------------------------- options */
typedef struct {
    const char *endpoint;         /* --coordinator, $AK_COORDINATOR, default */
    int         timeout_ms;       /* --timeout: bound on each request */
    bool        json;             /* --json: the coordinator's JSON as is */
    bool        markdown;         /* report --markdown */
    bool        wait;             /* submit --wait */
    bool        failed;           /* retry --failed */
    const char *dir;              /* demo --dir */
    int         workers;          /* demo --workers */
    bool        keep;             /* demo --keep */
    const char *profile;          /* profile install --profile NAME */
    const char *rule_k;           /* verify --k K (the coordinator checks it) */
    const char *rule_floor;       /* verify --floor FLOOR */
    const char *as;               /* profile import --as NAME */
    bool        replace;          /* profile install/import --replace */
    bool        unconfirmed;      /* profile install --unconfirmed */
    const char *out;              /* report --out DIR */
    const char *from;             /* report --from FILE (a report.json), with --out */
    char      **ops;              /* submit --op DIR (repeatable): external operators */
    int         nops;
    const char *workloads;        /* submit --workloads a,b (with --op) */
    const char *target;           /* submit --target CLASS (with --op; default host) */
    bool        override_builtin; /* submit --override-builtin */
    bool        allow_unserved;   /* submit --allow-unserved */
    const char *role;             /* keys new --role ROLE */
    char      **pos;              /* positional arguments after the verb */
    int         npos;
    /* A verb with options of its own (discover, gate: S_OWN_ARGV in
       main.c's verb table) named first on the command line gets argv from
       its name on, unparsed, and nothing else here is set; NULL when the
       shared parser reached it (a global option came first), which such a
       verb refuses. */
    int         argc;
    char      **argv;
} akctl_opts_t;

/* --------------------------------------------------------------- client */
typedef struct akctl_client akctl_client_t;

typedef struct {
    int   code;                   /* ClientReply.code: 0 or a negative AK_E... */
    char *error;                  /* ClientReply.error, "" when none; owned */
    char *json;                   /* ClientReply.json, "" when none; owned */
} akctl_reply_t;

/* A DEALER connected to endpoint; requests wait at most timeout_ms.
   NULL with err filled when the endpoint is malformed (AK_EINVAL). */
akctl_client_t *akctl_client_new (const char *endpoint, int timeout_ms, ak_err_t *err);
void akctl_client_destroy (akctl_client_t **self_p);
const char *akctl_client_endpoint (akctl_client_t *self);

/* Sends one ClientRequest and waits for its ClientReply.  Returns 0 when an
   answer came (reply->code may still say the request failed; free the reply
   with akctl_reply_free), AK_EUNAVAIL when none came within the timeout
   ("no answer from EP within N ms"), AK_EDENIED when the coordinator refused
   the handshake ("EP: the coordinator refused this key (...)"), AK_EPROTO when the answer was not a
   well-formed reply.  After a failure the socket is replaced, so a late
   answer can never be mistaken for the reply to a later request. */
int  akctl_client_call (akctl_client_t *self, const char *verb, char *const *args, int nargs,
                        const char *body, akctl_reply_t *reply, ak_err_t *err);
/* Same, with its own bound (the demo polls a coordinator that is starting). */
int  akctl_client_call_within (akctl_client_t *self, int timeout_ms, const char *verb,
                               char *const *args, int nargs, const char *body,
                               akctl_reply_t *reply, ak_err_t *err);
void akctl_reply_free (akctl_reply_t *reply);

/* CURVE for every client made from now on: cert_file (this user's secret
   certificate) and server_key (Z85 or a certificate file); both NULL:
   plain.  Checked when a client connects (AK_EINVAL naming the file). */
void akctl_client_set_auth (const char *cert_file, const char *server_key);

/* `akctl keys new NAME --role ROLE --dir DIR` and `akctl keys list --dir DIR`. */
int akctl_keys (const akctl_opts_t *opts);

/* A client for o's endpoint and timeout, or NULL with the reason printed
   ("akctl: ...") and *code the exit code (2 for a malformed endpoint). */
akctl_client_t *akctl_client_for (const akctl_opts_t *o, int *code);

/* Exit code for the outcome of a call: rc from akctl_client_call, then the
   reply code.  Prints the error on stderr ("akctl: ...") when there is one. */
int  akctl_call_exit (int rc, const akctl_reply_t *reply, const ak_err_t *err);

/* Parses reply JSON; NULL (message on stderr) when it does not parse. */
json_t *akctl_parse_json (const char *text, const char *verb);

/* ------------------------------------------------------ JSON accessors */
/* Tolerant readers over the coordinator's JSON: a missing field gives the
   type's zero; 64-bit integers may come as numbers or decimal strings. */
const char *akj_str (const json_t *obj, const char *key);
double      akj_num (const json_t *obj, const char *key);
int64_t     akj_int (const json_t *obj, const char *key);
bool        akj_bool (const json_t *obj, const char *key);
json_t     *akj_arr (const json_t *obj, const char *key);   /* NULL if absent */
json_t     *akj_obj (const json_t *obj, const char *key);   /* NULL if absent */
double      akj_value_num (const json_t *value);

/* --------------------------------------------------------- formatting */
/* "BLOCK=8 UNROLL=2", "-" when empty; caller frees. */
char *akctl_params_text (const json_t *params);
/* "32x128"; caller frees. */
char *akctl_dims_text (const json_t *dims);
/* "450 ms", "12.3 s", "3m04s", "1h02m" into buf. */
const char *akctl_duration (double ms, char *buf, size_t len);
/* "00:07", "12:34", "1:02:03" (elapsed on a clock). */
const char *akctl_clock (uint64_t ms, char *buf, size_t len);
/* ISO time of a wall-clock ms value, "-" for 0. */
const char *akctl_when (uint64_t wall_ms, char *buf, size_t len);
/* "1.84x +- 0.03"; "-" when speedup is 0. */
const char *akctl_speedup (double speedup, double noise, char *buf, size_t len);
/* "12.3 us" / "1.25 ms". */
const char *akctl_micros (double us, char *buf, size_t len);

/* A table of strings printed with aligned columns, or as a Markdown table. */
typedef struct akctl_table akctl_table_t;
akctl_table_t *akctl_table_new (int ncols, const char *const *headers);
void akctl_table_destroy (akctl_table_t **self_p);
/* Adds a row of ncols cells (copied; NULL prints as "-"). */
void akctl_table_add (akctl_table_t *self, const char *const *cells);
int  akctl_table_rows (akctl_table_t *self);
void akctl_table_print (akctl_table_t *self, FILE *out, const char *indent, bool markdown);

/* ---------------------------------------------------------- renderers */
/* Human forms of the answers; each takes the parsed JSON of that verb. */
void akctl_render_list (FILE *out, const json_t *answer);
void akctl_render_batch (FILE *out, const json_t *batchsum);
/* What keeps a batch from moving, one line each, prefix first: "waiting:
   no live worker of class X (...)" per entry of the status answer's
   "waiting", and "store error: ..." when its "store_error" is set. */
void akctl_render_notices (FILE *out, const json_t *status, const char *prefix);
void akctl_render_show (FILE *out, const json_t *answer);
void akctl_render_receipts (FILE *out, const json_t *answer);
void akctl_render_workers (FILE *out, const json_t *answer);
void akctl_render_resume (FILE *out, const json_t *answer);
void akctl_render_retry (FILE *out, const json_t *answer);
void akctl_render_stats (FILE *out, const json_t *answer);
void akctl_render_report (FILE *out, const json_t *report, bool markdown);

/* ------------------------------------------------------------- profiles */
/* `akctl profile install|list|show|export|import` (ops/akctl/profile.c,
   docs/profiles.md).  Returns an exit code. */
int akctl_profile (const akctl_opts_t *opts);

/* verify --profile NAME [--wait] | verify BATCH [--wait] (verify.c) */
int akctl_verify (const akctl_opts_t *opts);

/* `akctl report BATCH --out DIR`: report.md, report.json, report.html and
   the summary line (ops/akctl/html.c).  Returns an exit code. */
int akctl_report_out (const akctl_opts_t *opts);

/* The self-contained HTML page of a REPORT (inline SVG charts). */
void akctl_render_report_html (FILE *out, const json_t *report);

/* The counts the summary line of a REPORT shows. */
typedef struct {
    int winners, pairs;           /* pairs that promoted a winner, of every (op, class) pair */
    int failures;                 /* failed candidates (any status) */
    int crashed, hung;            /* of them: status "crashed", status "timeout" */
    int baselines_failed;         /* pairs whose preflight (the baseline) did not pass */
} akctl_verdict_t;

/* The verdict of a REPORT: "INCOMPLETE" while the batch is open; "FAIL"
   when it was cancelled, has poisoned tasks, has no pair, or a pair has no
   decision or a failed baseline; else "PASS": every (operator, class) pair
   decided on a measured baseline.  A candidate that fails (crashed and
   hung ones included) is a result of the tuning, not a FAIL: the summary
   line counts them (crashed=C hung=H) so that a script sees them. */
const char *akctl_report_verdict (const json_t *report, akctl_verdict_t *v);
/* "akfleet-report: batch B verdict=V winners=W/P failures=F crashed=C hung=H
   [baselines_failed=N]" into line. */
void akctl_verdict_line (const json_t *report, char *line, size_t len);
/* Failed candidates of a REPORT by status: crashed and timeout (hung). */
void akctl_report_crashes (const json_t *report, int *crashed, int *hung);

/* ---------------------------------------------------------------- watch */
/* Called once per poll; returning false stops the watch (a demo child died). */
typedef bool (akctl_watch_check_fn) (void *arg, char *why, size_t len);

/* Follows batch_id until it is no longer open: a live bar on a TTY, plain
   lines otherwise, JSON lines with json.  Returns an exit code: 0 complete
   with nothing poisoned or cancelled, 1 otherwise, 3/4 as for any call,
   130 when interrupted (stop_flag set by a signal handler, may be NULL).
   *final_p (may be NULL) gets the last BATCHSUM (caller decrefs). */
int akctl_watch (akctl_client_t *client, const char *batch_id, bool json,
                 volatile sig_atomic_t *stop_flag, akctl_watch_check_fn *check, void *check_arg,
                 json_t **final_p);

/* ---------------------------------------------------------------- verbs */
/* The verbs of main.c's table that live in verbs.c and submit.c; each
   takes the parsed options and returns an exit code. */
int akctl_verb_status (const akctl_opts_t *o);
int akctl_verb_list (const akctl_opts_t *o);
int akctl_verb_watch (const akctl_opts_t *o);
int akctl_verb_show (const akctl_opts_t *o);
int akctl_verb_receipts (const akctl_opts_t *o);
int akctl_verb_report (const akctl_opts_t *o);
int akctl_verb_workers (const akctl_opts_t *o);
int akctl_verb_cancel (const akctl_opts_t *o);
int akctl_verb_resume (const akctl_opts_t *o);
int akctl_verb_retry (const akctl_opts_t *o);
int akctl_verb_stats (const akctl_opts_t *o);
int akctl_verb_shutdown (const akctl_opts_t *o);
int akctl_verb_submit (const akctl_opts_t *o);

/* -------------------------------------------------------------- signals */
/* Set by SIGINT/SIGTERM/SIGHUP/SIGPIPE once akctl_catch_signals ran: watch and demo stop
   at the next step and clean up (demo stops its children). */
extern volatile sig_atomic_t akctl_stop;
void akctl_catch_signals (void);

/* ----------------------------------------------------------------- demo */
int akctl_demo (const akctl_opts_t *opts);

/* `akctl gate ...` (gate.c): parses its own options from opts->argv
   (argv[0] is "gate"); refuses (exit 2) when opts->argv is NULL. */
int akctl_gate_verb (const akctl_opts_t *opts);
extern const char akctl_gate_help[];

/* The demo manifest, found as common/datadir.h says ($AK_SOURCE_DIR, the
   installed share/akfleet beside the binary, the source tree akctl was
   built from, ../.. of the binary).  Caller frees; NULL when none exists
   (err says where it looked). */
char *akctl_demo_manifest_path (ak_err_t *err);

/* Loads and validates a manifest and turns it into the bundle to send;
   exit code 2 with the loader's message printed verbatim on failure.
   On success *bundle_p (caller frees) and, when pairs_p is not NULL,
   the operator x target pairs "op@class" it will produce (caller frees
   each and the array).  target: NULL, or the one device class that
   replaces the manifest's targets (submit FILE --target). */
int akctl_load_bundle (const char *path, const char *target, char **bundle_p, char ***pairs_p,
                       int *npairs_p);

/* ------------------------------------------------- external operators */
/* ops/akctl/external.c.  The catalog of built-in operators (kernels/),
   found as common/datadir.h says; NULL when none (caller frees). */
char *akctl_catalog_dir (void);
/* Refuses (exit code 2, message on stderr) an op of manifest with a
   built-in's name that is not the built-in, unless it overrides it. */
int akctl_check_builtins (ak_manifest_t *manifest, const char *label);
/* Writes the one-off manifest of `submit --op DIR...` (targets [--target
   or host], each DIR/spec.json by absolute path, --workloads, and
   --override-builtin as "override_builtin": true) to a temporary file;
   *path_p gets its path (caller unlinks and frees).  Returns an exit code. */
int akctl_external_manifest (const akctl_opts_t *o, char **path_p);

/* `akctl discover` (discover.c): parses its own options from opts->argv
   (argv[0] is "discover"); refuses (exit 2) when opts->argv is NULL.  Its
   help text is a printf format taking the catalog map table. */
extern const char akctl_discover_help[];
int akctl_discover_verb (const akctl_opts_t *opts);

/* submit's work, shared with demo: sends the bundle and, unless quiet,
   prints the batch id (stdout; the task count on stderr when that is a
   terminal).  allow_unserved queues a batch whose targets no worker has
   announced (a warning on stderr names them); without it the coordinator
   refuses such a batch.  *batch_id_p gets the id (caller frees), *tasks_p
   (may be NULL) the number of tasks.  Returns an exit code. */
int akctl_submit_bundle (akctl_client_t *client, const char *bundle, bool allow_unserved, bool json,
                         bool quiet, char **batch_id_p, int64_t *tasks_p);

#endif
