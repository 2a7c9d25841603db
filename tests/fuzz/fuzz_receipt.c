/*  tests/fuzz/fuzz_receipt.c: libFuzzer target for receipt intake: the
    path a worker's RECEIPT takes through the coordinator.  The frame is
    decoded as an envelope (common/envelope.c); a receipt is staged and
    group-committed (coordinator/intake.c: validation against the task,
    storing it and deciding the task's state) against a real temporary
    store holding one open batch of four tasks.  The store is rebuilt every
    S_RESET inputs so it never fills up.  Errors are fine; crashes, leaks
    and sanitizer reports are not. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ftw.h>

#include "cpb.h"
#include "coordinator/intake.h"
#include "coordinator/registry.h"
#include "coordinator/sched.h"
#include "envelope.h"
#include "store.h"
#include "util.h"

#define S_TASKS 4
#define S_RESET 500

static char          *s_dir;
static ak_store_t    *s_store;
static ak_sched_t    *s_sched;
static ak_registry_t *s_reg;
static ak_intake_t   *s_intake;
static unsigned       s_runs;

static void s_check (int rc, const ak_err_t *err, const char *what)
{
    if (rc) {
        fprintf (stderr, "fuzz_receipt: %s: %s\n", what, err->msg);
        abort ();
    }
}

static void s_put_records (void)
{
    ak_txn_t *txn = NULL;
    ak_err_t err = { 0 };
    s_check (ak_store_begin (s_store, true, &txn, &err), &err, "begin");
    Ak__Policy policy = AK__POLICY__INIT;
    policy.max_attempts = 2;
    policy.lease_ms = 5000;
    policy.threshold = 0.03;
    policy.max_regression = 0.05;
    Ak__BatchRecord b = AK__BATCH_RECORD__INIT;
    char *targets[] = { "host" };
    b.batch_id = "B000001";
    b.name = "fuzz";
    b.state = "open";
    b.targets = targets;
    b.n_targets = 1;
    b.policy = &policy;
    b.ntasks = S_TASKS;
    s_check (ak_store_put_batch (txn, &b, &err), &err, "put batch");
    for (int i = 1; i <= S_TASKS; i++) {
        char id[32];
        snprintf (id, sizeof id, "B000001.%04d", i);
        Ak__TaskRecord t = AK__TASK_RECORD__INIT;
        t.task_id = id;
        t.batch_id = "B000001";
        t.state = "queued";
        t.attempt = 1;
        t.kind = i == 1 ? "preflight" : "tune";
        t.op = "softmax";
        t.device_class = "host";
        t.backend = "host";
        t.candidate_name = i == 1 ? "" : "blocked";
        t.policy = &policy;
        s_check (ak_store_put_task (txn, &t, &err), &err, "put task");
    }
    s_check (ak_store_commit (&txn, &err), &err, "commit");
}

static int s_rm (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    remove (path);
    return 0;
}

static void s_close (void)
{
    ak_intake_destroy (&s_intake);
    ak_registry_destroy (&s_reg);
    ak_sched_destroy (&s_sched);
    ak_store_destroy (&s_store);
    if (s_dir) {
        nftw (s_dir, s_rm, 16, FTW_DEPTH | FTW_PHYS);
        free (s_dir);
        s_dir = NULL;
    }
}

static void s_open (void)
{
    const char *tmp = getenv ("TMPDIR");
    s_dir = ak_sprintf ("%s/ak-fuzz-receipt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp (s_dir))
        abort ();
    ak_store_opts_t so = { .map_size = 64u << 20, .no_sync = true };
    ak_err_t err = { 0 };
    s_check (ak_store_open (s_dir, &so, &s_store, &err), &err, "store");
    s_put_records ();
    s_sched = ak_sched_new ();
    s_reg = ak_registry_new ();
    ak_txn_t *txn = NULL;
    s_check (ak_store_begin (s_store, false, &txn, &err), &err, "begin");
    s_check (ak_registry_load (s_reg, txn, &err), &err, "registry");
    s_check (ak_sched_load (s_sched, txn, 1000, 3000, &err), &err, "sched");
    ak_store_abort (&txn);
    ak_intake_opts_t io = { .commit_ms = 0, .commit_max = 1, .map_max = 256u << 20 };
    s_intake = ak_intake_new (s_store, s_sched, s_reg, &io);
    Ak__Hello *h = ak_malloc (sizeof *h);
    ak__hello__init (h);
    ak_cpb_set (&h->worker_id, "w1");
    ak_cpb_set (&h->host, "fuzz");
    h->devices = ak_calloc (1, sizeof *h->devices);
    h->devices[0] = ak_malloc (sizeof *h->devices[0]);
    ak__device__init (h->devices[0]);
    ak_cpb_set (&h->devices[0]->device_class, "host");
    h->n_devices = 1;
    h->slots = 1;
    bool was_alive = false;
    ak_registry_hello (s_reg, "\0\1\2\3\4", 5, &h, 1000, &was_alive);
}

static void s_atexit (void)
{
    s_close ();
}

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc; (void) argv;
    s_open ();
    atexit (s_atexit);
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (++s_runs % S_RESET == 0) {
        s_close ();
        s_open ();
    }
    /* as coordinator/coord.c takes a worker's frame: a receipt slim when
       it can be (envelope.h), staged with its bytes as they came when it
       holds nothing unknown; the store reads back what was committed */
    Ak__Envelope *env = NULL;
    ak_err_t err = { 0 };
    size_t unknown = 0;
    bool slim = false;
    if (ak_envelope_unpack_counted (data, size, 0, AK_ENVELOPE_SLIM_RECEIPT, &env, &unknown, &slim, &err) != 0)
        return 0;
    if (env->body_case == AK__ENVELOPE__BODY_RECEIPT) {
        Ak__Receipt *r = env->receipt;
        env->receipt = NULL;
        env->body_case = AK__ENVELOPE__BODY__NOT_SET;
        const uint8_t *raw = NULL;
        size_t rawlen = 0;
        if (unknown || ak_envelope_field_bytes (data, size, AK__ENVELOPE__BODY_RECEIPT, &raw, &rawlen))
            raw = NULL;
        if (slim && !raw)
            abort ();           /* a slim receipt always has its bytes */
        uint64_t now = 1000 + s_runs;
        if (ak_intake_stage_raw (s_intake, "w1", &r, raw, rawlen, now, &err) == 0) {
            ak_commit_t c;
            if (ak_intake_commit (s_intake, now, &c, &err) == 0)
                for (size_t i = 0; i < c.nacks; i++) {
                    /* what was stored decodes */
                    ak_txn_t *txn = NULL;
                    Ak__Receipt *back = NULL;
                    if (ak_store_begin (s_store, false, &txn, &err) != 0
                        || ak_store_get_receipt (txn, c.acks[i].receipt_id, &back, &err) != 0)
                        abort ();
                    ak__receipt__free_unpacked (back, NULL);
                    ak_store_abort (&txn);
                }
            ak_commit_clear (&c);
        }
        if (r)
            abort ();           /* stage always takes the receipt */
    }
    ak_envelope_free (&env);
    return 0;
}
