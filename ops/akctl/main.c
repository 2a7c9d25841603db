/*  ops/akctl/main.c: akctl's entry point: the verb table, options, help.

    usage: akctl [--coordinator EP] [--json] [--timeout MS] VERB [ARGS...]

    Options may come before or after the verb; `--` ends them.  Every verb
    has --help.  Exit codes are the AKCTL_EXIT_* values of akctl.h and are
    listed in `akctl --help`; scripts depend on them, so they do not change. */
#include "akctl.h"

#include <czmq.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint.h"
#include "log.h"
#include "util.h"

/* ================================================================ verbs */

enum {
    S_OPT_MARKDOWN = 1 << 0,
    S_OPT_WAIT     = 1 << 1,
    S_OPT_DEMO     = 1 << 2,      /* --dir, --workers, --keep */
    S_OPT_FAILED   = 1 << 3,      /* retry --failed */
    S_OPT_PROFILE  = 1 << 4,      /* profile --profile, --replace, --as */
    S_OPT_OUT      = 1 << 5,      /* report --out */
    S_OPT_EXTERNAL = 1 << 7,      /* submit --op, --workloads, --target, --override-builtin */
    S_OPT_KEYS     = 1 << 6,      /* keys --role, --dir */
    S_OPT_RULE     = 1 << 8,      /* verify --k, --floor */
    S_OPT_UNSERVED = 1 << 9,      /* submit --allow-unserved */
    /* not options: what the verb is */
    S_OWN_ARGV     = 1 << 10,     /* parses its own options: named first, it gets argv
                                     from its name on (akctl_opts_t.argv) and nothing
                                     else is parsed; after a global option, the shared
                                     parser reaches it with argv NULL */
    S_NO_COORD     = 1 << 11,     /* needs no coordinator: its endpoint is not checked */
};

typedef int (s_verb_fn) (const akctl_opts_t *o);

typedef struct {
    const char *name;
    const char *args;             /* positional arguments, for the usage line */
    int         min_pos, max_pos;
    int         options;          /* S_OPT_* it accepts besides the global ones, S_OWN_ARGV, S_NO_COORD */
    s_verb_fn  *fn;
    const char *summary;          /* one line for `akctl --help` */
    const char *help;             /* the rest of `akctl VERB --help` */
} s_verb_t;

static const s_verb_t *s_verb_find (const char *name);

static const char s_global_help[] =
    "Options (before or after the verb):\n"
    "  --coordinator EP  the coordinator's client endpoint (default: $AK_COORDINATOR,\n"
    "                    else " AKCTL_DEFAULT_ENDPOINT ")\n"
    "  --json            print the coordinator's JSON answer as is\n"
    "  --timeout MS      give up on a request after MS milliseconds (default 5000)\n"
    "  --cert FILE       this user's secret certificate (NAME.key_secret) for a\n"
    "                    coordinator with CURVE (default: $AK_CERT)\n"
    "  --server-key KEY  the coordinator's public key: 40 Z85 characters or its\n"
    "                    certificate file (default: $AK_SERVER_KEY)\n"
    "  -h, --help        this help\n"
    "  --version         print akctl's version\n";

static const char s_exit_help[] =
    "Exit codes:\n"
    "  0  ok\n"
    "  1  the command ran but the result is negative (a batch cancelled or with\n"
    "     poisoned tasks, a demo that did not finish, a request the coordinator refused)\n"
    "  2  bad usage or invalid input (manifest errors name the file and the field)\n"
    "  3  the coordinator did not answer within the timeout\n"
    "  4  not found (no such batch or task)\n"
    "  5  the coordinator refused this key (the CURVE handshake: a key not in its key\n"
    "     directory for this endpoint, no certificate, or a wrong --server-key)\n"
    "  130  interrupted (watch, submit --wait, demo; demo stops its children first)\n";


/* ------------------------------------------------------------------ help */

static void s_verb_usage (FILE *out, const s_verb_t *v)
{
    fprintf (out, "usage: akctl [OPTIONS] %s%s%s\n", v->name, *v->args ? " " : "", v->args);
}

static void s_help_verb (FILE *out, const s_verb_t *v)
{
    s_verb_usage (out, v);
    fprintf (out, "\n%s\n%s\n%s", v->help, s_global_help, s_exit_help);
}

static int s_verb_help (const akctl_opts_t *o);

static const s_verb_t s_verbs[] = {
    { "submit", "FILE [--target CLASS] | --op DIR [--op DIR...]", 0, 1, S_OPT_WAIT | S_OPT_EXTERNAL | S_OPT_UNSERVED,
      akctl_verb_submit,
      "validate a batch manifest, submit it, print the batch id",
      "Loads the batch manifest FILE and every file it names (operator specs,\n"
      "kernel sources), validates all of it here, and sends the result as one\n"
      "self-contained bundle to the coordinator.  Prints the new batch id on\n"
      "stdout (with --json the coordinator's answer {\"batch_id\",\"tasks\"}).\n"
      "A manifest error is printed as FILE: FIELD.PATH: problem and exits 2;\n"
      "nothing is sent then.\n"
      "\n"
      "  --wait            then follow the batch like `akctl watch` and exit with\n"
      "                    watch's code\n"
      "  --target CLASS    replace the manifest's targets with this one device\n"
      "                    class (one manifest for any card: the class as\n"
      "                    `akctl workers` lists it); its ops are checked\n"
      "                    against it as if the manifest named it\n"
      "  --allow-unserved  queue the batch even when a target class has never been\n"
      "                    announced by any worker (a typo, or workers started\n"
      "                    later); without it the coordinator refuses such a\n"
      "                    batch and names the classes (exit 2).  Queued work of a\n"
      "                    class with no live worker shows as \"waiting: no live\n"
      "                    worker of class X\" in status and watch\n"
      "\n"
      "External operators (instead of FILE; docs/formats.md):\n"
      "  --op DIR          an operator directory with spec.json and its kernel\n"
      "                    sources; repeatable.  akctl builds a one-off manifest\n"
      "                    (name \"external\", the default policy, every op with\n"
      "                    its spec's sizes and the candidates its target runs)\n"
      "                    and submits it like a FILE\n"
      "  --workloads A,B   size names to time, for every --op (default: the\n"
      "                    spec's sizes)\n"
      "  --target CLASS    the device class to tune for (default host)\n"
      "  --override-builtin  let an --op whose name is a built-in operator's\n"
      "                    (kernels/NAME/spec.json) replace it in this batch;\n"
      "                    without it such an --op is refused (exit 2)\n" },
    { "status", "[BATCH]", 0, 1, 0, akctl_verb_status,
      "progress and winners of a batch (every batch without BATCH)",
      "With BATCH: its state, targets, times, task counts by state, the\n"
      "search of each candidate (exhaustive, or halving: N of M valid\n"
      "configurations sampled, K kept), its rounds (tune stages, confirm\n"
      "tasks: finished/total) and the winners found so far; a winner's reason\n"
      "says where it was confirmed.  Without: the same table as `akctl list`.\n" },
    { "list", "", 0, 0, 0, akctl_verb_list,
      "every batch the coordinator knows, with task counts",
      "One line per batch: id, name, state, finished/total tasks, counts by\n"
      "state, creation time.\n" },
    { "watch", "BATCH", 1, 1, 0, akctl_verb_watch,
      "follow a batch until it is finished",
      "Polls the batch's status every 250 ms until it is no longer open.  On a\n"
      "terminal: one live line with a bar, percentage, finished/total, done,\n"
      "failed, queued and leased counts and the elapsed time.  Otherwise a plain\n"
      "line when the counts change (at most once a second, at least every 10 s);\n"
      "with --json each changed status as one JSON line.  The last line counts\n"
      "the failed tasks and, among them, those that crashed or hung (timeout).\n"
      "The live line fits the terminal's width ($COLUMNS where the terminal\n"
      "reports none).  Exits 0 when the batch\n"
      "completed with no task poisoned or cancelled, 1 when it was cancelled or\n"
      "has poisoned tasks, 3 after three polls in a row got no answer (each\n"
      "bounded by --timeout), 130 on Ctrl-C (the batch itself goes on).\n" },
    { "show", "TASK", 1, 1, 0, akctl_verb_show,
      "one task and every receipt it got",
      "The task's kind, operator, candidate and parameters, state, attempts and\n"
      "worker; every receipt in arrival order (duplicates flagged); and for the\n"
      "accepted receipt its gate results, timings and compiler output.\n" },
    { "receipts", "BATCH", 1, 1, 0, akctl_verb_receipts,
      "every receipt of a batch, duplicates flagged",
      "One line per receipt: id, task, attempt, worker, kind, operator,\n"
      "candidate, parameters, status, whether it is a duplicate (stored but\n"
      "never counted) and the reason of a failure.\n" },
    { "report", "BATCH", 1, 1, S_OPT_MARKDOWN | S_OPT_OUT, akctl_verb_report,
      "winners, speedups, baselines and failures per operator",
      "Per operator and device class: the winner and its configuration with\n"
      "its speedup over the baseline and the noise of that figure (\"1.84x +-\n"
      "0.03\"), or \"baseline kept\" and why; the weighted aggregate per dtype and\n"
      "over all workloads (weighted mean latency of baseline and kernel, and their\n"
      "ratio: the speedup promotion uses); the baseline's time per workload\n"
      "from preflight; every candidate with its status and speedup; failures\n"
      "with their reasons; then the time spent compiling, gating and timing.\n"
      "\n"
      "  --markdown        print it as Markdown (headings and tables)\n"
      "  --out DIR         write DIR/report.md, report.json and report.html (charts:\n"
      "                    speedup per operator and size, time per phase, failures\n"
      "                    by reason) and print one summary line for scripts:\n"
      "                    akfleet-report: batch B verdict=PASS|FAIL|INCOMPLETE winners=W/P failures=F\n"
      "                      crashed=C hung=H\n"
      "                    (exit 1 unless PASS).  PASS: the batch completed, nothing poisoned or\n"
      "                    cancelled, and every operator/class pair decided (a winner or the\n"
      "                    baseline kept) on a baseline that passed; FAIL otherwise (a failed\n"
      "                    baseline adds baselines_failed=N).  Failed candidates, crashed and\n"
      "                    hung ones too, are results of the tuning: counted, not a FAIL\n"
      "  --from FILE       with --out: render a report.json that --out wrote before,\n"
      "                    without asking the coordinator (BATCH is not used)\n" },
    { "profile", "install BATCH|list|show NAME|export NAME DIR|import DIR|record-gate FILE", 1, 3, S_OPT_PROFILE,
      akctl_profile,
      "install winners as a profile; list, show, export and import profiles; record a gate's verdict",
      "  install BATCH --profile NAME [--replace] [--unconfirmed]\n"
      "      records the promoted winners of a complete batch: per device class and\n"
      "      per operator and workload (op, dims, dtype) the kernel, its parameters,\n"
      "      launch configuration, source digest, speedup and noise, and the receipts\n"
      "      as evidence.  Where no candidate beat a vendor-library baseline\n"
      "      (cuBLASLt) beyond the noise, a \"vendor\" entry says the library stays,\n"
      "      with the reason (no kernel; runtimes fall back to the library).  Other\n"
      "      winners that were not promoted are listed as skipped, with the\n"
      "      reason; so are winners no other worker confirmed (one worker's word:\n"
      "      confirmation off, or the class had one live worker) unless\n"
      "      --unconfirmed.  An entry that exists already is only replaced with\n"
      "      --replace (else nothing is installed, exit 1); other device classes are\n"
      "      never touched.\n"
      "  list                 every profile with its classes and entry counts\n"
      "  show NAME            every entry of a profile\n"
      "  export NAME DIR      writes the package: DIR/profile.json, DIR/sources/<sha256>.*\n"
      "                       and DIR/SHA256SUMS (DIR must be new or empty)\n"
      "  import DIR [--as NAME] [--replace]\n"
      "      verifies DIR against SHA256SUMS (a changed, missing or extra file, a link\n"
      "      or a path leaving DIR is refused, exit 2) and installs it\n"
      "  record-gate FILE   keeps the verdict of `akctl gate` (its JSON, FILE) with the\n"
      "                     profile it gated, for the device class it ran on; refused\n"
      "                     when that class was installed again since the export.\n"
      "                     show and list report it; a rejected gate is never shown\n"
      "                     as verified\n"
      "\n"
      "  --profile NAME     the profile to install into ([A-Za-z0-9_.-], 1..64)\n"
      "  --replace          allow replacing existing entries\n"
      "  --unconfirmed      install winners no other worker re-measured too (a class\n"
      "                     with one worker); each entry says who confirmed it\n"
      "  --as NAME          import under another name\n" },
    { "verify", "--profile NAME | BATCH", 0, 1, S_OPT_PROFILE | S_OPT_WAIT | S_OPT_RULE, akctl_verify,
      "re-check an installed profile on every live worker of its classes",
      "  verify --profile NAME [--wait]\n"
      "      the coordinator makes a verify batch: for each entry of the profile and\n"
      "      each live worker of the entry's device class one `verify` task, pinned\n"
      "      to that worker (it fails with \"worker gone\" if the worker dies), that\n"
      "      runs the stored kernel source with its parameters and workload through\n"
      "      the gates and the interleaved timing against the baseline again.  A\n"
      "      verdict per (entry, host): pass, fail (a gate failed, or the speedup is\n"
      "      below 1 + threshold or further from the recorded one than\n"
      "      K x (measured noise + recorded noise) + FLOOR x the recorded speedup,\n"
      "      K 2 and FLOOR 0.10 unless --k and --floor say otherwise), or\n"
      "      unverified (no live worker of the class).  The profile is then marked\n"
      "      verified, failing or unverified, with the reasons, the time and the\n"
      "      batch (`akctl profile show|list` report it).  Without --wait, prints the\n"
      "      batch id and returns.\n"
      "  verify BATCH [--wait]\n"
      "      the verdicts of that verify batch (--wait: once it is judged)\n"
      "\n"
      "  --k K --floor FLOOR  the rule's noise multiple (0..100) and floor (0..10,\n"
      "                       a fraction of the recorded speedup), both or neither\n"
      "\n"
      "  prints one line per entry and host and a summary line for scripts:\n"
      "      verify: profile NAME: verified|failing|unverified (...)\n"
      "  exit 0 when verified, 1 when failing or unverified\n" },
    { "keys", "new NAME --role ROLE --dir DIR | list --dir DIR", 1, 2, S_OPT_KEYS | S_NO_COORD, akctl_keys,
      "create and list CurveZMQ certificates for a fleet",
      "  new NAME --role ROLE --dir DIR\n"
      "      writes DIR/ROLE/NAME.key (public) and DIR/ROLE/NAME.key_secret (public\n"
      "      and secret key), both mode 0600, directories 0700.  ROLE is worker,\n"
      "      operator, viewer or server (the coordinator's own).  Give the secret\n"
      "      file to whoever uses the key (akworker/akctl/akload --cert) and keep\n"
      "      the public one in the coordinator's --keys DIR/ROLE/.\n"
      "  list --dir DIR\n"
      "      the keys akcoord --keys DIR accepts: role, name, public key, file\n"
      "\n"
      "Removing DIR/worker/NAME.key revokes a worker: akcoord re-reads DIR when\n"
      "it changes (or on SIGHUP) and drops the worker.  docs/operations.md walks\n"
      "through setting up a fleet.\n" },
    { "workers", "[forget WORKER_ID]", 0, 2, 0, akctl_verb_workers,
      "registered workers: liveness, device classes, leases",
      "One line per worker the coordinator has seen: id, host, alive or dead,\n"
      "time since it was last heard (any message counts as a heartbeat), device\n"
      "classes, slots and prefetch, outstanding tasks, leases held (and how many\n"
      "of them started on an executor), when the soonest of its leases runs out,\n"
      "tasks done and registrations (a worker that comes back after being\n"
      "declared dead registers again).\n"
      "\n"
      "  forget WORKER_ID  remove a dead worker's record for good (a host that was\n"
      "                    retired or renamed); an operator key is needed, a live\n"
      "                    worker is refused (exit 1), an unknown one is exit 4.  A\n"
      "                    worker that comes back later registers as new.\n" },
    { "cancel", "BATCH", 1, 1, 0, akctl_verb_cancel,
      "cancel every unfinished task of a batch",
      "Cancels every queued or leased task of BATCH (finished ones keep their\n"
      "results) and prints the batch's status afterwards.  Cancelling a batch\n"
      "twice is harmless.\n" },
    { "resume", "BATCH", 1, 1, 0, akctl_verb_resume,
      "re-queue the leases of a batch that nobody runs",
      "Takes back every leased task of BATCH that no live worker runs (a lease\n"
      "left unclaimed after a coordinator restart, or held by a worker that is\n"
      "dead or re-registered without it) and queues it again at once, with the\n"
      "attempt raised (poisoned when that passes the batch's max_attempts),\n"
      "instead of waiting for its lease to run out.  Tasks running on live\n"
      "workers are left alone; queued ones are dispatched.  Prints what it\n"
      "re-queued and the batch's status.  Safe while the batch runs, and\n"
      "running it twice is harmless: the second finds nothing to take back.\n"
      "A receipt that still comes for an attempt it took back is accepted if\n"
      "the task has none yet, else stored as a duplicate.\n" },
    { "retry", "BATCH --failed", 1, 1, S_OPT_FAILED, akctl_verb_retry,
      "run the failed, timed-out and poisoned tasks of a batch again",
      "Queues every failed task of BATCH (any status: wrong_answer, timeout,\n"
      "crashed, compile_error ...) and every poisoned one again with a new\n"
      "attempt and a fresh budget of max_attempts.  Their old receipts stay\n"
      "(akctl show lists them); a copy of an old receipt that arrives later is\n"
      "stored as a duplicate.  A complete batch becomes open again and its\n"
      "winners are decided anew when it completes.  Prints what it re-queued\n"
      "and the batch's status.  Safe while the batch runs; running it twice is\n"
      "harmless (the re-queued tasks are no longer failed).  A cancelled batch\n"
      "is refused (exit 1).\n"
      "\n"
      "  --failed          retry failed, timed-out and poisoned tasks (required)\n" },
    { "stats", "", 0, 0, 0, akctl_verb_stats,
      "the coordinator's counters",
      "Workers alive, open batches, queued and leased tasks, receipts accepted\n"
      "and duplicate, commits, rejected messages, uptime.\n" },
    { "shutdown", "", 0, 0, 0, akctl_verb_shutdown,
      "stop the coordinator cleanly",
      "Asks the coordinator to commit whatever is pending (acknowledging the\n"
      "receipts in it), close its store and exit 0, like SIGTERM does.  Nothing\n"
      "is lost: open batches continue when akcoord starts again on the same\n"
      "store.  Workers keep their receipts and reconnect with backoff.\n" },
    { "demo", "[MANIFEST]", 0, 1, S_OPT_DEMO | S_NO_COORD, akctl_demo,
      "tune a batch (default: the built-in one) with a private coordinator and workers",
      "Starts akcoord and N akworker processes (the binaries next to akctl) on\n"
      "this host, talking over ipc:// endpoints in a fresh directory, submits\n"
      "MANIFEST, or else the built-in batch kernels/batches/demo.json (found in\n"
      "$AK_SOURCE_DIR, else ../share/akfleet/kernels next to akctl when installed,\n"
      "else the source tree akctl was built from, else ../../kernels next to\n"
      "akctl), shows its progress, prints the report and\n"
      "shuts everything down: `shutdown` to akcoord, SIGTERM to the workers,\n"
      "SIGKILL only as a last resort.  Logs are DIR/akcoord.log and DIR/demo-wN.log.  The directory is\n"
      "removed at the end unless --keep or --dir is given or the demo failed.\n"
      "Ctrl-C stops the children too.  With --json the report is printed as the\n"
      "coordinator's JSON.  Exits 0 only when the batch completed and every\n"
      "operator got a result (a winner or \"baseline kept\").\n"
      "\n"
      "  --dir DIR         use DIR (created if needed) instead of a temporary one\n"
      "  --workers N       how many workers to start, 1 to 64 (default 2)\n"
      "  --keep            keep the directory (store, logs, caches) afterwards\n" },
    { "discover", "--out DIR [OPTIONS] -- CMD [ARGS...]", 0, 64, S_OWN_ARGV,
      akctl_discover_verb,
      "run a GPU program under CUPTI, rank its hotspots, emit a batch for what the catalog has",
      "`akctl discover --help` prints its options (they are its own).\n" },
    { "gate", "--profile DIR [--steps N] [--tolerance-file F] -- python3 SCRIPT [ARGS...]", 0, 0, S_OWN_ARGV,
      akctl_gate_verb,
      "the end-to-end gate of a profile package on a program (docs/apply.md)", akctl_gate_help },
    { "help", "[VERB]", 0, 1, S_NO_COORD, s_verb_help,
      "this list, or the help of VERB",
      "Prints the help of VERB, or the list of verbs.\n" },
};

#define S_NVERBS ((int) (sizeof s_verbs / sizeof s_verbs[0]))

static const s_verb_t *s_verb_find (const char *name)
{
    for (int i = 0; i < S_NVERBS; i++)
        if (strcmp (s_verbs[i].name, name) == 0)
            return &s_verbs[i];
    return NULL;
}

static void s_help_main (FILE *out)
{
    fprintf (out,
             "usage: akctl [--coordinator EP] [--json] [--timeout MS] VERB [ARGS...]\n"
             "\n"
             "The operator's command line of akfleet: submit tuning batches to the\n"
             "coordinator (akcoord), follow them, read their receipts and reports.\n"
             "\n"
             "Verbs:\n");
    for (int i = 0; i < S_NVERBS; i++) {
        /* the whole synopsis, however long (a fixed buffer once cut gate's
           and profile's); a long one gets its own line, the summary under it */
        int len = fprintf (out, "  %s%s%s", s_verbs[i].name, *s_verbs[i].args ? " " : "", s_verbs[i].args) - 2;
        if (len > 20)
            fprintf (out, "\n  %-20s %s\n", "", s_verbs[i].summary);
        else
            fprintf (out, "%*s %s\n", 20 - len, "", s_verbs[i].summary);
    }
    fprintf (out, "\n%s\n%s\n`akctl VERB --help` (or `akctl help VERB`) tells more about a verb.\n",
             s_global_help, s_exit_help);
}

static int s_verb_help (const akctl_opts_t *o)
{
    if (o->npos == 0) {
        s_help_main (stdout);
        return AKCTL_EXIT_OK;
    }
    const s_verb_t *v = s_verb_find (o->pos[0]);
    if (!v) {
        fprintf (stderr, "akctl: help: no verb '%s' (see akctl --help)\n", o->pos[0]);
        return AKCTL_EXIT_USAGE;
    }
    s_help_verb (stdout, v);
    return AKCTL_EXIT_OK;
}

/* ============================================================== options */

/*  A usage error: what is wrong, the usage line, where to read more. */
static int s_usage_error (const s_verb_t *v, const char *fmt, const char *arg)
{
    fprintf (stderr, "akctl: ");
    fprintf (stderr, fmt, arg);
    fprintf (stderr, "\n");
    if (v) {
        s_verb_usage (stderr, v);
        fprintf (stderr, "(akctl %s --help says more)\n", v->name);
    }
    else
        fprintf (stderr, "usage: akctl [--coordinator EP] [--json] [--timeout MS] VERB [ARGS...]\n"
                         "(akctl --help lists the verbs)\n");
    return AKCTL_EXIT_USAGE;
}

/*  Parses a positive integer option value within [lo, hi]. */
static int s_int_option (const char *text, int lo, int hi, int *out)
{
    int64_t v;
    if (ak_parse_i64 (text, &v) != 0 || v < lo || v > hi)
        return -1;
    *out = (int) v;
    return 0;
}

int main (int argc, char **argv)
{
    /* CZMQ would install its own SIGINT handler; akctl has its own. */
    zsys_handler_set (NULL);
    ak_log_set_ident ("akctl");
    akctl_opts_t o;
    memset (&o, 0, sizeof o);
    const s_verb_t *first = argc > 1 ? s_verb_find (argv[1]) : NULL;
    if (first && (first->options & S_OWN_ARGV)) {
        o.argc = argc - 1;
        o.argv = argv + 1;
        return first->fn (&o);
    }
    o.endpoint = getenv ("AK_COORDINATOR");
    if (!o.endpoint || !*o.endpoint)
        o.endpoint = AKCTL_DEFAULT_ENDPOINT;
    o.timeout_ms = AKCTL_DEFAULT_TIMEOUT;
    o.workers = 2;
    o.pos = ak_calloc ((size_t) argc, sizeof (char *));

    const char *cert = getenv ("AK_CERT"), *server_key = getenv ("AK_SERVER_KEY");
    const s_verb_t *verb = NULL;
    bool help = false, version = false, dashdash = false;
    const char *endpoint_from = getenv ("AK_COORDINATOR") && *getenv ("AK_COORDINATOR")
                              ? "$AK_COORDINATOR" : "the default endpoint";
    int code = AKCTL_EXIT_OK;
    for (int i = 1; i < argc && code == AKCTL_EXIT_OK; i++) {
        const char *a = argv[i];
        if (dashdash || a[0] != '-' || a[1] == '\0') {
            if (!verb) {
                verb = s_verb_find (a);
                if (!verb)
                    code = s_usage_error (NULL, "unknown verb '%s'", a);
            }
            else
                o.pos[o.npos++] = argv[i];
            continue;
        }
        if (strcmp (a, "--") == 0) {
            dashdash = true;
            continue;
        }
        /* --name=value or --name value */
        char name[64];
        const char *value = NULL;
        const char *eq = strchr (a, '=');
        size_t nlen = eq ? (size_t) (eq - a) : strlen (a);
        if (nlen >= sizeof name) {
            code = s_usage_error (verb, "unknown option '%s'", a);
            break;
        }
        memcpy (name, a, nlen);
        name[nlen] = '\0';
        if (eq)
            value = eq + 1;
        bool takes_value = strcmp (name, "--coordinator") == 0 || strcmp (name, "--timeout") == 0
                        || strcmp (name, "--profile") == 0 || strcmp (name, "--as") == 0
                        || strcmp (name, "--out") == 0 || strcmp (name, "--role") == 0
                        || strcmp (name, "--from") == 0
                        || strcmp (name, "--cert") == 0 || strcmp (name, "--server-key") == 0
                        || strcmp (name, "--op") == 0 || strcmp (name, "--workloads") == 0
                        || strcmp (name, "--target") == 0
                        || strcmp (name, "--dir") == 0 || strcmp (name, "--workers") == 0
                        || strcmp (name, "--k") == 0 || strcmp (name, "--floor") == 0;
        if (takes_value && !value) {
            if (i + 1 >= argc) {
                code = s_usage_error (verb, "option %s needs a value", name);
                break;
            }
            value = argv[++i];
        }
        else
        if (!takes_value && value) {
            code = s_usage_error (verb, "option %s takes no value", name);
            break;
        }
        int need = strcmp (name, "--markdown") == 0 ? S_OPT_MARKDOWN
                 : strcmp (name, "--wait") == 0 ? S_OPT_WAIT
                 : strcmp (name, "--failed") == 0 ? S_OPT_FAILED
                 : strcmp (name, "--profile") == 0 || strcmp (name, "--as") == 0
                   || strcmp (name, "--replace") == 0 || strcmp (name, "--unconfirmed") == 0 ? S_OPT_PROFILE
                 : strcmp (name, "--out") == 0 || strcmp (name, "--from") == 0 ? S_OPT_OUT
                 : strcmp (name, "--op") == 0 || strcmp (name, "--workloads") == 0
                   || strcmp (name, "--target") == 0
                   || strcmp (name, "--override-builtin") == 0 ? S_OPT_EXTERNAL
                 : strcmp (name, "--allow-unserved") == 0 ? S_OPT_UNSERVED
                 : strcmp (name, "--role") == 0 ? S_OPT_KEYS
                 : strcmp (name, "--k") == 0 || strcmp (name, "--floor") == 0 ? S_OPT_RULE
                 : strcmp (name, "--dir") == 0 ? S_OPT_DEMO | S_OPT_KEYS
                 : strcmp (name, "--workers") == 0 || strcmp (name, "--keep") == 0 ? S_OPT_DEMO : 0;
        if (need && !(verb && (verb->options & need))) {
            code = s_usage_error (verb, verb ? "option %s does not apply to this verb"
                                             : "option %s belongs after its verb", name);
            break;
        }
        if (strcmp (name, "-h") == 0 || strcmp (name, "--help") == 0)
            help = true;
        else
        if (strcmp (name, "--version") == 0)
            version = true;
        else
        if (strcmp (name, "--json") == 0)
            o.json = true;
        else
        if (strcmp (name, "--coordinator") == 0) {
            if (!*value)
                code = s_usage_error (verb, "--coordinator needs an endpoint%s", "");
            o.endpoint = value;
            endpoint_from = "--coordinator";
        }
        else
        if (strcmp (name, "--timeout") == 0) {
            if (s_int_option (value, 1, 3600000, &o.timeout_ms) != 0)
                code = s_usage_error (verb, "--timeout wants milliseconds from 1 to 3600000, not '%s'", value);
        }
        else
        if (strcmp (name, "--markdown") == 0)
            o.markdown = true;
        else
        if (strcmp (name, "--wait") == 0)
            o.wait = true;
        else
        if (strcmp (name, "--failed") == 0)
            o.failed = true;
        else
        if (strcmp (name, "--keep") == 0)
            o.keep = true;
        else
        if (strcmp (name, "--replace") == 0)
            o.replace = true;
        else
        if (strcmp (name, "--unconfirmed") == 0)
            o.unconfirmed = true;
        else
        if (strcmp (name, "--profile") == 0 || strcmp (name, "--as") == 0 || strcmp (name, "--out") == 0) {
            if (!*value)
                code = s_usage_error (verb, "%s needs a value", name);
            *(name[2] == 'p' ? &o.profile : name[2] == 'a' ? &o.as : &o.out) = value;
        }
        else
        if (strcmp (name, "--op") == 0 || strcmp (name, "--workloads") == 0
            || strcmp (name, "--target") == 0) {
            if (!*value)
                code = s_usage_error (verb, "%s needs a value", name);
            if (name[2] == 'o') {
                o.ops = ak_realloc (o.ops, (size_t) (o.nops + 1) * sizeof *o.ops);
                o.ops[o.nops++] = (char *) value;
            }
            else
                *(name[2] == 'w' ? &o.workloads : &o.target) = value;
        }
        else
        if (strcmp (name, "--override-builtin") == 0)
            o.override_builtin = true;
        else
        if (strcmp (name, "--allow-unserved") == 0)
            o.allow_unserved = true;
        else
        if (strcmp (name, "--from") == 0) {
            if (!*value)
                code = s_usage_error (verb, "--from needs a report.json%s", "");
            o.from = value;
        }
        else
        if (strcmp (name, "--role") == 0)
            o.role = value;
        else
        if (strcmp (name, "--k") == 0 || strcmp (name, "--floor") == 0) {
            if (!*value)
                code = s_usage_error (verb, "%s needs a number", name);
            *(name[2] == 'k' ? &o.rule_k : &o.rule_floor) = value;
        }
        else
        if (strcmp (name, "--cert") == 0)
            cert = value;
        else
        if (strcmp (name, "--server-key") == 0)
            server_key = value;
        else
        if (strcmp (name, "--dir") == 0) {
            if (!*value)
                code = s_usage_error (verb, "--dir needs a directory%s", "");
            o.dir = value;
        }
        else
        if (strcmp (name, "--workers") == 0) {
            if (s_int_option (value, 1, 64, &o.workers) != 0)
                code = s_usage_error (verb, "--workers wants a number from 1 to 64, not '%s'", value);
        }
        else
            code = s_usage_error (verb, "unknown option '%s'", a);
    }

    akctl_client_set_auth (cert, server_key);
    /* a coordinator endpoint that cannot work is a usage error before any
       request waits for an answer (keys, help and demo need none) */
    ak_err_t eerr = { 0, "" };
    if (code == AKCTL_EXIT_OK && !help && !version && verb && !(verb->options & S_NO_COORD)
        && ak_endpoint_check (o.endpoint, false, &eerr) != 0) {
        char msg[sizeof eerr.msg + 64];
        snprintf (msg, sizeof msg, "%s: %s", endpoint_from, eerr.msg);
        code = s_usage_error (verb, "%s", msg);
    }
    if (code == AKCTL_EXIT_OK) {
        if (version)
            printf ("akctl %s\n", AK_VERSION);
        else
        if (help) {
            if (verb && verb->fn == s_verb_help && o.npos > 0)
                code = s_verb_help (&o);          /* akctl help VERB --help */
            else
            if (verb)
                s_help_verb (stdout, verb);
            else
                s_help_main (stdout);
        }
        else
        if (!verb)
            code = s_usage_error (NULL, "no verb given%s", "");
        else
        if (o.npos < verb->min_pos)
            code = s_usage_error (verb, "%s: missing argument", verb->name);
        else
        if (o.npos > verb->max_pos)
            code = s_usage_error (verb, "unexpected argument '%s'", o.pos[verb->max_pos]);
        else
            code = verb->fn (&o);
    }
    free (o.pos);
    free (o.ops);
    fflush (stdout);
    return code;
}
