/*  tests/fault/fault.c: what the fault tests share (see fault.h). */
#include "fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "envelope.h"
#include "error.h"
#include "manifest.h"
#include "spec.h"
#include "store.h"
#include "util.h"

// ================================================================ processes

#define S_MAX_CHILDREN 64

static pid_t s_children[S_MAX_CHILDREN];

static void s_remember (pid_t pid)
{
    for (int i = 0; i < S_MAX_CHILDREN; i++)
        if (s_children[i] == 0) {
            s_children[i] = pid;
            return;
        }
}

static void s_forget (pid_t pid)
{
    for (int i = 0; i < S_MAX_CHILDREN; i++)
        if (s_children[i] == pid)
            s_children[i] = 0;
}

pid_t ak_fault_spawn (char *const argv[], const char *log_path)
{
    pid_t pid = ak_test_spawn (argv, log_path);
    if (pid > 0)
        s_remember (pid);
    return pid;
}

int ak_fault_stop (pid_t pid, int sig, int timeout_ms)
{
    if (pid <= 0)
        return -1;
    s_forget (pid);
    return ak_test_stop (pid, sig, timeout_ms);
}

void ak_fault_reap_all (void)
{
    for (int i = 0; i < S_MAX_CHILDREN; i++)
        if (s_children[i] > 0) {
            pid_t pid = s_children[i];
            s_children[i] = 0;
            kill (pid, SIGCONT);            /* a stopped one must be able to die */
            ak_test_stop (pid, SIGKILL, 2000);
        }
}

bool ak_fault_alive (pid_t pid)
{
    int status;
    pid_t r = waitpid (pid, &status, WNOHANG);
    if (r == pid) {
        s_forget (pid);
        return false;
    }
    return r == 0;
}

uint64_t ak_fault_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

// ============================================================= coordinator

zsock_t *ak_fault_dealer (const char *endpoint)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    assert_non_null (s);
    zsock_set_linger (s, 0);
    assert_int_equal (zsock_connect (s, "%s", endpoint), 0);
    return s;
}

ak_fault_coord_t *ak_fault_coord_new (const char *tag, const char *host, const char *const *extra)
{
    ak_fault_coord_t *self = ak_calloc (1, sizeof *self);
    self->dir = ak_test_tmpdir (tag);
    assert_non_null (self->dir);
    self->store = ak_path_join (self->dir, "store");
    self->log = ak_path_join (self->dir, "akcoord.log");
    snprintf (self->host, sizeof self->host, "%s", host ? host : "127.0.0.1");
    /* both at once: two ports asked for one after the other (each socket
       closed before the next bind) can be the same one, and akcoord then
       refused to start (test_partition_proxy failed so once) */
    int ports[2];
    ak_test_free_ports (ports, 2);
    snprintf (self->workers, sizeof self->workers, "tcp://%s:%d", self->host, ports[0]);
    snprintf (self->clients, sizeof self->clients, "tcp://127.0.0.1:%d", ports[1]);
    for (int i = 0; extra && extra[i] && self->nargs < 20; i++)
        self->args[self->nargs++] = ak_strdup (extra[i]);
    return self;
}

void ak_fault_coord_start (ak_fault_coord_t *self)
{
    char *bin = ak_test_bin ("akcoord");
    char *argv[40] = { bin, "--plain", "--store", self->store, "--workers", self->workers,
                       "--clients", self->clients };
    int n = 8;
    for (int i = 0; i < self->nargs; i++)
        argv[n++] = self->args[i];
    argv[n] = NULL;
    char *name = NULL;
    if (self->env) {
        char *eq = strchr (self->env, '=');
        name = ak_strdup (self->env);
        name[eq - self->env] = '\0';
        setenv (name, eq + 1, 1);
    }
    self->pid = ak_fault_spawn (argv, self->log);
    if (name) {
        unsetenv (name);
        free (name);
        free (self->env);
        self->env = NULL;
    }
    free (bin);
    assert_true (self->pid > 0);
    self->starts++;
    zsock_destroy (&self->client);
    self->client = ak_fault_dealer (self->clients);
    uint64_t until = ak_fault_now_ms () + 20000;
    while (ak_fault_now_ms () < until) {
        json_t *j = NULL;
        if (ak_fault_call (self, 300, "stats", NULL, NULL, NULL, &j, NULL) == 0) {
            json_decref (j);
            return;
        }
        if (!ak_fault_alive (self->pid))
            fail_msg ("akcoord exited at start %d (log: %s)", self->starts, self->log);
    }
    fail_msg ("akcoord does not answer on %s (log: %s)", self->clients, self->log);
}

int ak_fault_coord_kill (ak_fault_coord_t *self, int sig)
{
    int status = ak_fault_stop (self->pid, sig, 15000);
    self->pid = 0;
    zsock_destroy (&self->client);
    return status;
}

void ak_fault_coord_destroy (ak_fault_coord_t **self_p, int lines)
{
    if (!self_p || !*self_p)
        return;
    ak_fault_coord_t *self = *self_p;
    zsock_destroy (&self->client);
    ak_fault_reap_all ();
    self->pid = 0;
    if (lines > 0) {
        char *out = NULL;
        char *cmd = ak_sprintf ("tail -n %d %s", lines, self->log);
        ak_test_run (cmd, &out);
        fprintf (stderr, "---- last lines of %s ----\n%s", self->log, out ? out : "");
        free (out);
        free (cmd);
    }
    if (getenv ("AK_FAULT_KEEP"))           /* to read the logs of a run */
        fprintf (stderr, "AK_FAULT_KEEP: %s kept\n", self->dir);
    else
        ak_test_rmtree (self->dir);
    for (int i = 0; i < self->nargs; i++)
        free (self->args[i]);
    free (self->env);
    free (self->dir);
    free (self->store);
    free (self->log);
    free (self);
    *self_p = NULL;
}

int ak_fault_call (ak_fault_coord_t *self, int timeout_ms, const char *verb, const char *arg0,
                   const char *arg1, const char *body, json_t **json_p, char **error_p)
{
    const char *args[2] = { arg0, arg1 };
    return ak_fault_call_args (self, timeout_ms, verb, args, arg1 ? 2 : arg0 ? 1 : 0, body, json_p, error_p);
}

int ak_fault_call_args (ak_fault_coord_t *self, int timeout_ms, const char *verb, const char *const *args,
                        size_t nargs, const char *body, json_t **json_p, char **error_p)
{
    if (json_p)
        *json_p = NULL;
    if (error_p)
        *error_p = NULL;
    if (!self->client)
        self->client = ak_fault_dealer (self->clients);
    Ak__Envelope env = AK__ENVELOPE__INIT;
    Ak__ClientRequest req = AK__CLIENT_REQUEST__INIT;
    req.verb = (char *) verb;
    req.args = (char **) args;
    req.n_args = nargs;
    req.body = (char *) (body ? body : "");
    env.body_case = AK__ENVELOPE__BODY_REQUEST;
    env.request = &req;
    if (ak_envelope_send (self->client, NULL, 0, &env) != 0) {
        zsock_destroy (&self->client);
        return AK_EUNAVAIL;
    }
    zmq_pollitem_t item = { zsock_resolve (self->client), 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, timeout_ms) <= 0) {
        zsock_destroy (&self->client);      /* a late answer must not match a later call */
        return AK_EUNAVAIL;
    }
    zmq_msg_t msg;
    zmq_msg_init (&msg);
    if (zmq_msg_recv (&msg, zsock_resolve (self->client), 0) < 0) {
        zmq_msg_close (&msg);
        zsock_destroy (&self->client);
        return AK_EUNAVAIL;
    }
    Ak__Envelope *r = NULL;
    ak_err_t err = { 0 };
    int rc = ak_envelope_unpack (zmq_msg_data (&msg), zmq_msg_size (&msg), AK_MAX_MSG_SIZE, &r, &err);
    zmq_msg_close (&msg);
    if (rc || r->body_case != AK__ENVELOPE__BODY_REPLY)
        fail_msg ("%s: the coordinator's answer is not a reply (%s)", verb, err.msg);
    rc = r->reply->code;
    if (error_p)
        *error_p = ak_strdup (r->reply->error);
    if (rc == 0 && json_p) {
        json_error_t jerr;
        *json_p = json_loads (r->reply->json, 0, &jerr);
        if (!*json_p)
            fail_msg ("%s: answer is not JSON: %s", verb, jerr.text);
    }
    ak_envelope_free (&r);
    return rc;
}

json_t *ak_fault_json (ak_fault_coord_t *self, const char *verb, const char *arg0, const char *arg1)
{
    json_t *j = NULL;
    char *error = NULL;
    int rc = ak_fault_call (self, 20000, verb, arg0, arg1, NULL, &j, &error);
    if (rc)
        fail_msg ("%s %s: %d %s", verb, arg0 ? arg0 : "", rc, error ? error : "");
    free (error);
    return j;
}

json_t *ak_fault_json_pages (ak_fault_coord_t *self, const char *verb, const char *arg0, const char *key)
{
    json_t *all = ak_fault_json (self, verb, arg0, NULL);
    char *after = NULL;
    while (json_is_string (json_object_get (all, "next"))) {
        free (after);
        after = ak_strdup (json_string_value (json_object_get (all, "next")));
        const char *args[3] = { arg0, "1000", after };
        size_t n = arg0 ? 3 : 2;
        json_t *page = NULL;
        char *error = NULL;
        int rc = ak_fault_call_args (self, 20000, verb, arg0 ? args : args + 1, n, NULL, &page, &error);
        if (rc)
            fail_msg ("%s %s after %s: %d %s", verb, arg0 ? arg0 : "", after, rc, error ? error : "");
        free (error);
        json_array_extend (json_object_get (all, key), json_object_get (page, key));
        json_object_set (all, "next", json_object_get (page, "next"));
        json_decref (page);
    }
    free (after);
    return all;
}

int64_t ak_fault_stat (ak_fault_coord_t *self, const char *key, const char *sub)
{
    json_t *j = ak_fault_json (self, "stats", NULL, NULL);
    json_t *v = json_object_get (j, key);
    if (sub)
        v = json_object_get (v, sub);
    int64_t n = (int64_t) json_integer_value (v);
    json_decref (j);
    return n;
}

int64_t ak_fault_count (ak_fault_coord_t *self, const char *batch_id, const char *state)
{
    json_t *j = NULL;
    if (ak_fault_call (self, 2000, "status", batch_id, NULL, NULL, &j, NULL) != 0)
        return -1;
    int64_t n = (int64_t) json_integer_value (json_object_get (json_object_get (j, "counts"), state));
    json_decref (j);
    return n;
}

const char *ak_fault_batch_state (ak_fault_coord_t *self, const char *batch_id, char *buf, size_t len)
{
    json_t *j = NULL;
    buf[0] = '\0';
    if (ak_fault_call (self, 2000, "status", batch_id, NULL, NULL, &j, NULL) == 0)
        snprintf (buf, len, "%s", json_string_value (json_object_get (j, "state")));
    json_decref (j);
    return buf;
}

void ak_fault_wait_complete (ak_fault_coord_t *self, const char *batch_id, int timeout_ms)
{
    uint64_t until = ak_fault_now_ms () + (uint64_t) timeout_ms;
    char state[32];
    while (ak_fault_now_ms () < until) {
        if (strcmp (ak_fault_batch_state (self, batch_id, state, sizeof state), "complete") == 0)
            return;
        ak_test_sleep_ms (100);
    }
    json_t *j = NULL;
    ak_fault_call (self, 2000, "status", batch_id, NULL, NULL, &j, NULL);
    char *text = j ? json_dumps (j, JSON_COMPACT) : NULL;
    fail_msg ("batch %s not complete after %d ms: %s", batch_id, timeout_ms, text ? text : "(no answer)");
}

int ak_fault_akctl (ak_fault_coord_t *self, const char *args, char **out_p)
{
    char *bin = ak_test_bin ("akctl");
    char *cmd = ak_sprintf ("%s --coordinator %s --timeout 20000 %s", bin, self->clients, args);
    int rc = ak_test_run (cmd, out_p);
    free (cmd);
    free (bin);
    return rc;
}

// ================================================================= batches

/* Loads DIR/NAME/batch.json and turns it into a bundle. */
static char *s_bundle (const char *path)
{
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_load (path, &m, &err))
        fail_msg ("manifest %s: %s", path, err.msg);
    char *bundle = ak_manifest_to_bundle (m);
    assert_non_null (bundle);
    ak_manifest_destroy (&m);
    return bundle;
}

char *ak_fault_stub_bundle (const char *dir, const char *name, int ntune, const char *policy_json)
{
    char *sub = ak_path_join (dir, name);
    char *op = ak_path_join (sub, "fa");
    assert_int_equal (ak_mkdir_p (op, 0700, NULL), 0);
    size_t cap = (size_t) ntune * 8 + 64, used = 0;
    char *values = ak_malloc (cap);
    values[0] = '\0';
    for (int i = 1; i <= ntune; i++)
        used += (size_t) snprintf (values + used, cap - used, "%s%d", i > 1 ? ", " : "", i);
    char *cands = ak_sprintf ("[{\"name\": \"c\", \"backend\": \"host\", \"source\": \"c.c\","
                              " \"params\": {\"P\": [%s]}}]", values);
    char *spec = ak_test_stub_spec ("fa", cands);
    free (cands);
    free (ak_test_write (op, "spec.json", spec));
    free (ak_test_write (op, "ref.c", "/* reference stub: never compiled by fault tests */\n"));
    free (ak_test_write (op, "base.c", "/* baseline stub */\n"));
    free (ak_test_write (op, "c.c", "/* candidate stub */\n"));
    /* every configuration timed once, no confirmation round: the fault
       tests count tasks exactly (coordinator/rounds.h) */
    char *manifest = ak_sprintf ("{\"schema_version\": 1, \"name\": \"%s\", \"targets\": [\"host\"],"
                                 " \"policy\": {\"confirm\": false, \"search\": {\"strategy\": \"exhaustive\"}%s%s},"
                                 " \"ops\": [{\"spec\": \"fa/spec.json\"}]}",
                                 name, policy_json && *policy_json ? ", " : "", policy_json ? policy_json : "");
    char *path = ak_test_write (sub, "batch.json", manifest);
    assert_non_null (path);
    char *bundle = s_bundle (path);
    free (path);
    free (manifest);
    free (spec);
    free (values);
    free (op);
    free (sub);
    return bundle;
}

char *ak_fault_real_bundle (const char *dir, const char *name, const char *const *planted,
                            const char *policy_json)
{
    char *kernels = ak_test_src ("kernels");
    char extra[2048] = "";
    size_t used = 0;
    for (int i = 0; planted && planted[i]; i++)
        used += (size_t) snprintf (extra + used, sizeof extra - used,
                                   "%s{\"name\": \"%s\", \"backend\": \"host\", \"source\": \"%s/testing/%s.c\"}",
                                   i ? ", " : "", planted[i], kernels, planted[i]);
    char *manifest = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"%s\", \"targets\": [\"host\"], \"policy\": {\"confirm\": false%s%s},"
        " \"ops\": [{\"spec\": \"%s/softmax/spec.json\", \"workloads\": [\"small\"],"
        "            \"candidates\": [], \"extra_candidates\": [%s]}]}",
        name, policy_json && *policy_json ? ", " : "", policy_json ? policy_json : "", kernels, extra);
    char *file = ak_sprintf ("%s.json", name);
    char *path = ak_test_write (dir, file, manifest);
    assert_non_null (path);
    char *bundle = s_bundle (path);
    free (path);
    free (file);
    free (manifest);
    free (kernels);
    return bundle;
}

char *ak_fault_submit (ak_fault_coord_t *self, const char *bundle)
{
    json_t *j = NULL;
    char *error = NULL;
    /* the fault tests submit before their workers exist: allow-unserved */
    int rc = ak_fault_call (self, 30000, "submit", "allow-unserved", NULL, bundle, &j, &error);
    if (rc)
        fail_msg ("submit: %d %s", rc, error ? error : "");
    free (error);
    char *id = ak_strdup (json_string_value (json_object_get (j, "batch_id")));
    json_decref (j);
    assert_non_null (id);
    return id;
}

// ================================================================== checks

typedef struct {
    const char        *batch_id;
    size_t             prefix_len;
    zhashx_t          *tasks;       /* task_id -> Ak__TaskRecord */
    zhashx_t          *accepted;    /* task_id -> receipt id (strdup) */
    zhashx_t          *attempts;    /* "task#attempt" -> count of accepted */
    ak_fault_tally_t  *tally;
    char               why[512];
} s_check_t;

static void s_free_task (void **item)
{
    if (*item)
        ak__task_record__free_unpacked (*item, NULL);
    *item = NULL;
}

static int s_check_task (const char *key, const void *val, size_t len, void *arg)
{
    s_check_t *c = arg;
    Ak__TaskRecord *t = ak__task_record__unpack (NULL, len, val);
    if (!t) {
        snprintf (c->why, sizeof c->why, "tasks/%s does not decode", key);
        return 1;
    }
    c->tally->tasks++;
    c->tally->dup_counted += t->duplicates;
    zhashx_insert (c->tasks, key, t);
    return 0;
}

static int s_check_receipt (const char *key, const void *val, size_t len, void *arg)
{
    s_check_t *c = arg;
    Ak__Receipt *r = ak__receipt__unpack (NULL, len, val);
    if (!r) {
        snprintf (c->why, sizeof c->why, "receipts/%s does not decode", key);
        return 1;
    }
    int rc = 0;
    if (strcmp (r->batch_id, c->batch_id) != 0)
        goto done;
    c->tally->receipts++;
    if (strcmp (r->receipt_id, key) != 0 || !zhashx_lookup (c->tasks, r->task_id)) {
        snprintf (c->why, sizeof c->why, "receipt %s: id %s, task %s unknown or mismatched", key,
                  r->receipt_id, r->task_id);
        rc = 1;
        goto done;
    }
    if (r->duplicate) {     /* a digest record stands for its copies (coordinator/dupes.h) */
        c->tally->duplicates += r->digest && *r->digest ? r->copies : 1;
        goto done;
    }
    c->tally->accepted++;
    char akey[256];
    snprintf (akey, sizeof akey, "%s#%u", r->task_id, r->attempt);
    if (zhashx_lookup (c->attempts, akey)) {
        snprintf (c->why, sizeof c->why, "two accepted receipts for %s", akey);
        rc = 1;
        goto done;
    }
    zhashx_insert (c->attempts, akey, (void *) 1);
    const char *other = zhashx_lookup (c->accepted, r->task_id);
    if (other) {
        snprintf (c->why, sizeof c->why, "task %s has two accepted receipts: %s and %s", r->task_id,
                  other, key);
        rc = 1;
        goto done;
    }
    zhashx_insert (c->accepted, r->task_id, ak_strdup (key));
done:
    ak__receipt__free_unpacked (r, NULL);
    return rc;
}

void ak_fault_check_store (const char *store_dir, const char *batch_id, bool all_terminal,
                           ak_fault_tally_t *tally)
{
    memset (tally, 0, sizeof *tally);
    ak_store_t *store = NULL;
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    if (ak_store_open (store_dir, NULL, &store, &err))
        fail_msg ("store %s does not open: %s", store_dir, err.msg);
    assert_int_equal (ak_store_begin (store, false, &txn, &err), 0);
    s_check_t c = { .batch_id = batch_id, .tally = tally };
    c.tasks = zhashx_new ();
    c.accepted = zhashx_new ();
    c.attempts = zhashx_new ();
    zhashx_set_destructor (c.tasks, s_free_task);
    zhashx_set_destructor (c.accepted, (zhashx_destructor_fn *) zstr_free);
    char prefix[64];
    snprintf (prefix, sizeof prefix, "%s.", batch_id);
    int rc = ak_store_walk (txn, AK_DB_TASKS, prefix, s_check_task, &c, &err);
    if (rc == 0)
        rc = ak_store_walk (txn, AK_DB_RECEIPTS, "", s_check_receipt, &c, &err);
    if (rc)
        fail_msg ("store check of %s: %s", batch_id, c.why[0] ? c.why : err.msg);

    for (Ak__TaskRecord *t = zhashx_first (c.tasks); t; t = zhashx_next (c.tasks)) {
        bool terminal = strcmp (t->state, "done") == 0 || strcmp (t->state, "failed") == 0
                     || strcmp (t->state, "poisoned") == 0 || strcmp (t->state, "cancelled") == 0;
        bool verdict = strcmp (t->state, "done") == 0 || strcmp (t->state, "failed") == 0;
        tally->terminal += terminal;
        if (all_terminal && !terminal)
            fail_msg ("task %s is %s, not terminal", t->task_id, t->state);
        const char *acc = zhashx_lookup (c.accepted, t->task_id);
        if (verdict && (!acc || strcmp (acc, t->receipt_id) != 0))
            fail_msg ("task %s is %s with receipt '%s' but its accepted receipt is %s", t->task_id,
                      t->state, t->receipt_id, acc ? acc : "none");
        if (!verdict && acc)
            fail_msg ("task %s is %s but has an accepted receipt %s", t->task_id, t->state, acc);
        if (verdict) {
            char key[256];
            void *val = NULL;
            size_t len = 0;
            Ak__Receipt *r = NULL;
            assert_int_equal (ak_store_get_receipt (txn, acc, &r, &err), 0);
            snprintf (key, sizeof key, "%s#%u", t->task_id, r->attempt);
            ak__receipt__free_unpacked (r, NULL);
            if (ak_store_get (txn, AK_DB_ATTEMPTS, key, &val, &len, &err) != 0)
                fail_msg ("attempts index has no %s", key);
            free (val);
        }
    }
    if (tally->dup_counted != tally->duplicates)
        fail_msg ("batch %s: %zu receipts flagged duplicate but the task records count %zu",
                  batch_id, tally->duplicates, tally->dup_counted);
    zhashx_destroy (&c.tasks);
    zhashx_destroy (&c.accepted);
    zhashx_destroy (&c.attempts);
    ak_store_abort (&txn);
    ak_store_destroy (&store);
}

size_t ak_fault_check_receipts (ak_fault_coord_t *self, const char *batch_id, size_t *dups_p)
{
    json_t *rs = ak_fault_json_pages (self, "receipts", batch_id, "receipts");
    json_t *arr = json_object_get (rs, "receipts");
    zhashx_t *seen = zhashx_new ();
    size_t accepted = 0, dups = 0, i;
    json_t *r;
    json_array_foreach (arr, i, r) {
        const char *task = json_string_value (json_object_get (r, "task_id"));
        if (json_is_true (json_object_get (r, "duplicate"))) {
            dups++;
            continue;
        }
        if (zhashx_lookup (seen, task))
            fail_msg ("task %s has two accepted receipts (receipts %s)", task, batch_id);
        zhashx_insert (seen, task, (void *) 1);
        accepted++;
    }
    json_t *st = ak_fault_json (self, "status", batch_id, NULL);
    json_t *counts = json_object_get (st, "counts");
    size_t verdicts = (size_t) (json_integer_value (json_object_get (counts, "done"))
                              + json_integer_value (json_object_get (counts, "failed")));
    if (verdicts != accepted)
        fail_msg ("batch %s: %zu tasks done or failed but %zu accepted receipts", batch_id, verdicts,
                  accepted);
    json_decref (st);
    zhashx_destroy (&seen);
    json_decref (rs);
    if (dups_p)
        *dups_p = dups;
    return accepted;
}

int64_t ak_fault_akload_count (const char *stats_path, const char *name)
{
    json_error_t jerr;
    json_t *j = json_load_file (stats_path, 0, &jerr);
    if (!j)
        fail_msg ("akload stats %s: %s", stats_path, jerr.text);
    int64_t n = (int64_t) json_integer_value (json_object_get (json_object_get (j, "counts"), name));
    json_decref (j);
    return n;
}
