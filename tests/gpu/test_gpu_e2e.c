/*  tests/gpu/test_gpu_e2e.c: the CUDA worker end to end, on a real GPU.

    akcoord (temporary store, loopback) + one `akworker --backend cuda`
    + akctl.  The GPU's device class is read back from `akctl workers`
    (what the worker announced) and a softmax batch on that class is
    submitted with the CUDA baseline and six planted candidates:
      good    softmax/cuda/block_row.cu, two configurations -> ok
      wrong   testing/cuda/wrong.cu                         -> wrong_answer
      oob     testing/cuda/oob.cu (illegal address)         -> crashed, naming
                                                               CUDA_ERROR_ILLEGAL_ADDRESS
      scribble testing/cuda/scribble.cu (right outputs, a   -> wrong_answer, "wrote outside
              store past the output's end)                    its buffers" (the guard regions)
      hang    testing/cuda/hang.cu, run_timeout_ms 8000     -> timeout
      broken  testing/cuda/broken.cu                        -> compile_error + NVRTC log
    The batch must complete, every task have exactly one accepted receipt,
    the worker (same process) still be alive and registered, and the good
    candidate's receipt show gates over float32, float16 and bfloat16 and
    timings of a float32 and a float16 workload.

    Where there is no GPU (tests/skip.h) the test prints "SKIP: no GPU:
    <reason>" and the binary exits 77 ("Not Run" in CTest); any other probe
    error (a broken driver, no NVRTC beside a GPU) fails it. */
#include "support.h"
#include "worker/backend.h"
#include "worker/backends.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define S_START_MS  60000          /* coordinator answering, worker registered (CUDA init) */
#define S_BATCH_MS  300000         /* the batch finishing */
#define S_RUN_MS    8000           /* run limit of every task: the hang is killed after it */

typedef struct {
    char  *dir;
    char  *akctl;
    pid_t  coord, worker;
    char  *batch_id;
    char  *device_class;
} s_ctx_t;

static s_ctx_t s_ctx;

/* ------------------------------------------------------------- helpers */

static int s_akctl (const char *args, char **out_p)
{
    char *cmd = ak_sprintf ("%s %s", s_ctx.akctl, args);
    int code = ak_test_run (cmd, out_p);
    free (cmd);
    return code;
}

static json_t *s_akctl_json (const char *args)
{
    char *full = ak_sprintf ("--json %s", args);
    char *out = NULL;
    int code = s_akctl (full, &out);
    json_t *json = code == 0 ? json_loads (out ? out : "", 0, NULL) : NULL;
    if (!json)
        print_message ("akctl %s: exit %d, output: %s\n", full, code, out ? out : "");
    free (out);
    free (full);
    return json;
}

static const char *s_str (const json_t *obj, const char *key)
{
    const json_t *v = json_object_get (obj, key);
    return json_is_string (v) ? json_string_value (v) : "";
}

static void s_dump_log (const char *name)
{
    char *path = ak_sprintf ("%s/%s", s_ctx.dir, name);
    char *text = NULL;
    size_t len = 0;
    if (ak_file_read (path, 4u << 20, &text, &len, NULL) == 0) {
        size_t from = len > 6000 ? len - 6000 : 0;
        print_message ("---- %s (last %zu bytes)\n%s\n----\n", name, len - from, text + from);
    }
    free (text);
    free (path);
}

static bool s_coordinator_answers (void *arg)
{
    (void) arg;
    return s_akctl ("--timeout 500 stats > /dev/null 2>&1", NULL) == 0;
}

/*  The worker is registered and alive; its GPU class is kept. */
static bool s_worker_alive (void *arg)
{
    (void) arg;
    json_t *answer = s_akctl_json ("workers");
    bool alive = false;
    size_t i, k;
    json_t *w, *cls;
    json_array_foreach (json_object_get (answer, "workers"), i, w) {
        if (strcmp (s_str (w, "worker_id"), "gpu-w1") != 0 || strcmp (s_str (w, "state"), "alive") != 0)
            continue;
        alive = true;
        json_array_foreach (json_object_get (w, "device_classes"), k, cls)
            if (json_is_string (cls) && strcmp (json_string_value (cls), "host") != 0 && !s_ctx.device_class)
                s_ctx.device_class = ak_strdup (json_string_value (cls));
    }
    json_decref (answer);
    return alive;
}

static bool s_batch_finished (void *arg)
{
    (void) arg;
    char *args = ak_sprintf ("status %s", s_ctx.batch_id);
    json_t *sum = s_akctl_json (args);
    bool done = sum && strcmp (s_str (sum, "state"), "open") != 0;
    json_decref (sum);
    free (args);
    return done;
}

/* --------------------------------------------------------------- setup */

static void s_start (void)
{
    s_ctx.dir = ak_test_tmpdir ("gpu-e2e");
    assert_non_null (s_ctx.dir);
    int ports[2];
    ak_test_free_ports (ports, 2);
    char *workers_ep = ak_sprintf ("tcp://127.0.0.1:%d", ports[0]);
    char *clients_ep = ak_sprintf ("tcp://127.0.0.1:%d", ports[1]);
    char *akctl = ak_test_bin ("akctl");
    s_ctx.akctl = ak_sprintf ("'%s' --coordinator %s --timeout 10000", akctl, clients_ep);

    char *coord = ak_test_bin ("akcoord");
    char *store = ak_sprintf ("%s/store", s_ctx.dir);
    char *log = ak_sprintf ("%s/akcoord.log", s_ctx.dir);
    char *cargv[] = { coord, "--store", store, "--workers", workers_ep, "--clients", clients_ep,
                      "--log-level", "debug", NULL };
    s_ctx.coord = ak_test_spawn_coord (cargv, log);
    assert_true (s_ctx.coord > 0);
    if (!ak_test_wait (s_coordinator_answers, NULL, S_START_MS)) {
        s_dump_log ("akcoord.log");
        fail_msg ("akcoord did not answer on %s", clients_ep);
    }

    char *worker = ak_test_bin ("akworker");
    char *cache = ak_sprintf ("%s/cache", s_ctx.dir);
    char *wlog = ak_sprintf ("%s/gpu-w1.log", s_ctx.dir);
    char *wargv[] = { worker, "--coordinator", workers_ep, "--id", "gpu-w1", "--cache", cache,
                      "--backend", "cuda", "--compile-threads", "4", "--prefetch", "2",
                      "--log-level", "debug", NULL };
    s_ctx.worker = ak_test_spawn (wargv, wlog);
    assert_true (s_ctx.worker > 0);
    if (!ak_test_wait (s_worker_alive, NULL, S_START_MS) || !s_ctx.device_class) {
        s_dump_log ("gpu-w1.log");
        s_dump_log ("akcoord.log");
        fail_msg ("the cuda worker did not register with a GPU class");
    }
    print_message ("GPU class: %s\n", s_ctx.device_class);
    free (worker);
    free (cache);
    free (wlog);
    free (coord);
    free (store);
    free (log);
    free (akctl);
    free (workers_ep);
    free (clients_ep);
}

static int s_teardown (void **state)
{
    (void) state;
    int status;
    if (s_ctx.worker > 0) {
        status = ak_test_stop (s_ctx.worker, SIGTERM, 15000);
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
            print_message ("gpu-w1 ended with status 0x%x\n", status);
    }
    if (s_ctx.coord > 0) {
        status = ak_test_stop (s_ctx.coord, SIGTERM, 10000);
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
            print_message ("akcoord ended with status 0x%x\n", status);
    }
    if (s_ctx.dir && !getenv ("AK_TEST_KEEP"))
        ak_test_rmtree (s_ctx.dir);
    free (s_ctx.dir);
    free (s_ctx.akctl);
    free (s_ctx.batch_id);
    free (s_ctx.device_class);
    memset (&s_ctx, 0, sizeof s_ctx);
    return 0;
}

/*  A planted candidate object: softmax ABI, one thread per row. */
static char *s_planted (const char *name, const char *rel)
{
    char *path = ak_test_src (rel);
    char *text = ak_sprintf ("{\"name\": \"%s\", \"backend\": \"cuda\", \"source\": \"%s\","
                             " \"launch\": {\"grid\": [\"(rows+127)/128\"], \"block\": [\"128\"]}}",
                             name, path);
    free (path);
    return text;
}

static char *s_write_manifest (void)
{
    char *spec = ak_test_src ("kernels/softmax/spec.json");
    char *good_src = ak_test_src ("kernels/softmax/cuda/block_row.cu");
    char *wrong = s_planted ("wrong", "kernels/testing/cuda/wrong.cu");
    char *oob = s_planted ("oob", "kernels/testing/cuda/oob.cu");
    char *scribble = s_planted ("scribble", "kernels/testing/cuda/scribble.cu");
    char *hang = s_planted ("hang", "kernels/testing/cuda/hang.cu");
    char *broken = s_planted ("broken", "kernels/testing/cuda/broken.cu");
    char *text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"gpu-e2e\", \"targets\": [\"%s\"],\n"
        " \"policy\": {\"max_attempts\": 2, \"warmup\": 2, \"min_samples\": 5, \"max_samples\": 30,\n"
        "            \"max_time_ms\": 150, \"rsd_target\": 0.05, \"run_timeout_ms\": %d,\n"
        "            \"compile_timeout_ms\": 120000, \"lease_ms\": 120000, \"confirm\": false},\n"
        " \"ops\": [{\"spec\": \"%s\",\n"
        "          \"workloads\": [\"medium\", {\"name\": \"large\", \"dtype\": \"float16\"}],\n"
        "          \"candidates\": [],\n"
        "          \"extra_candidates\": [\n"
        "            {\"name\": \"good\", \"backend\": \"cuda\", \"source\": \"%s\",\n"
        "             \"params\": {\"THREADS\": [128, 256], \"VEC\": [4]},\n"
        "             \"launch\": {\"grid\": [\"rows\"], \"block\": [\"THREADS\"]}},\n"
        "            %s,\n            %s,\n            %s,\n            %s,\n            %s]}]}\n",
        s_ctx.device_class, S_RUN_MS, spec, good_src, wrong, oob, scribble, hang, broken);
    char *path = ak_test_write (s_ctx.dir, "gpu-e2e.json", text);
    assert_non_null (path);
    free (text);
    free (spec);
    free (good_src);
    free (wrong);
    free (oob);
    free (scribble);
    free (hang);
    free (broken);
    return path;
}

/* ---------------------------------------------------------------- test */

typedef struct {
    const char *candidate;      /* "" for the preflight */
    const char *status;
    const char *needle;         /* in the reason (NULL: none asked) */
    int seen;
} s_expect_t;

/*  A stage's detail of the good candidate's receipt, for the dtypes check. */
static const char *s_gate_detail (json_t *receipt, const char *stage)
{
    size_t i;
    json_t *g;
    json_array_foreach (json_object_get (receipt, "gates"), i, g)
        if (strcmp (s_str (g, "stage"), stage) == 0)
            return s_str (g, "detail");
    return "";
}

static void s_check_good (json_t *r)
{
    /* every declared dtype swept on the GPU: nothing skipped */
    const char *sweep = s_gate_detail (r, "shape_sweep");
    if (strncmp (sweep, "PASS", 4) != 0 || strstr (sweep, "skipped"))
        fail_msg ("good: shape_sweep: %s", sweep);
    json_t *timings = json_object_get (r, "timings");
    if (json_array_size (timings) != 2)
        fail_msg ("good: %zu timings, expected 2 (medium/float32, large/float16)", json_array_size (timings));
    size_t i;
    json_t *t;
    json_array_foreach (timings, i, t) {
        json_t *wl = json_object_get (t, "workload");
        json_t *cand = json_object_get (t, "candidate");
        double median = json_number_value (json_object_get (cand, "median_us"));
        print_message ("  good %s/%s: median %.2f us, speedup %.3g\n", s_str (wl, "name"),
                       s_str (wl, "dtype"), median, json_number_value (json_object_get (t, "speedup")));
        assert_true (median > 0);
    }
}

static void test_gpu_batch (void **state)
{
    (void) state;
    Ak__Device **devs = NULL;
    size_t ndevs = 0;
    ak_test_cuda_or_skip (true, &devs, &ndevs);
    size_t ngpus = ndevs;
    for (size_t i = 0; i < ndevs; i++)
        ak__device__free_unpacked (devs[i], NULL);
    free (devs);

    s_start ();
    char *manifest = s_write_manifest ();
    char *args = ak_sprintf ("submit '%s'", manifest);
    char *out = NULL;
    int code = s_akctl (args, &out);
    if (code != 0)
        fail_msg ("akctl %s: exit %d: %s", args, code, out ? out : "");
    out[strcspn (out, "\n")] = '\0';
    s_ctx.batch_id = out;
    free (args);
    free (manifest);

    if (!ak_test_wait (s_batch_finished, NULL, S_BATCH_MS)) {
        s_dump_log ("gpu-w1.log");
        s_dump_log ("akcoord.log");
        fail_msg ("batch %s did not finish within %d ms", s_ctx.batch_id, S_BATCH_MS);
    }
    args = ak_sprintf ("status %s", s_ctx.batch_id);
    json_t *sum = s_akctl_json (args);
    free (args);
    assert_non_null (sum);
    assert_string_equal (s_str (sum, "state"), "complete");
    json_int_t total = json_integer_value (json_object_get (sum, "total"));
    json_decref (sum);

    /* Exactly one accepted receipt per task, each with its status. */
    args = ak_sprintf ("receipts %s", s_ctx.batch_id);
    json_t *answer = s_akctl_json (args);
    free (args);
    assert_non_null (answer);
    s_expect_t expect[] = {
        { "",       "ok",             NULL, 0 },
        { "good",   "ok",             NULL, 0 },
        { "wrong",  "wrong_answer",   "beyond tolerance", 0 },
        { "oob",    "crashed",        "CUDA_ERROR_ILLEGAL_ADDRESS", 0 },
        { "scribble", "wrong_answer", "wrote outside its buffers", 0 },
        { "hang",   "timeout",        NULL, 0 },
        { "broken", "compile_error",  "failed to compile", 0 },
    };
    const size_t nexpect = sizeof expect / sizeof expect[0];
    json_t *accepted = json_object ();
    json_t *per_device = json_object ();     /* uuid -> tasks an executor ran there */
    char *crash_uuid = NULL;
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get (answer, "receipts"), i, r) {
        if (json_is_true (json_object_get (r, "duplicate")))
            continue;
        const char *task = s_str (r, "task_id");
        if (json_object_get (accepted, task))
            fail_msg ("task %s has two accepted receipts", task);
        json_object_set (accepted, task, r);
        const char *cand = s_str (r, "candidate_name"), *status = s_str (r, "status");
        const char *reason = s_str (r, "reason");
        const char *uuid = s_str (json_object_get (r, "device"), "uuid");
        if (uuid[0] && strcmp (status, "compile_error") != 0) {
            json_int_t n = json_integer_value (json_object_get (per_device, uuid));
            json_object_set_new (per_device, uuid, json_integer (n + 1));
        }
        if (strcmp (cand, "oob") == 0)
            crash_uuid = ak_strdup (uuid);
        print_message ("%s %-9s %-7s %-14s %.300s\n", task, s_str (r, "kind"), cand[0] ? cand : "-",
                       status, reason);
        s_expect_t *e = NULL;
        for (size_t k = 0; k < nexpect && !e; k++)
            if (strcmp (expect[k].candidate, cand) == 0)
                e = &expect[k];
        if (!e)
            fail_msg ("unexpected candidate '%s' in the batch", cand);
        if (strcmp (status, e->status) != 0 || (e->needle && !strstr (reason, e->needle))) {
            s_dump_log ("gpu-w1.log");
            fail_msg ("%s (%s): status %s (%s), expected %s%s%s", task, cand[0] ? cand : "preflight",
                      status, reason, e->status, e->needle ? " mentioning " : "", e->needle ? e->needle : "");
        }
        if (strcmp (cand, "broken") == 0 && !strstr (s_str (r, "compile_log"), "not_declared_anywhere"))
            fail_msg ("broken: the NVRTC log is not in the receipt: %s", s_str (r, "compile_log"));
        if (strcmp (cand, "good") == 0)
            s_check_good (r);
        e->seen++;
    }
    if ((json_int_t) json_object_size (accepted) != total)
        fail_msg ("%zu tasks have an accepted receipt, the batch has %lld",
                  json_object_size (accepted), (long long) total);
    for (size_t k = 0; k < nexpect; k++)
        if (expect[k].seen != (strcmp (expect[k].candidate, "good") == 0 ? 2 : 1))
            fail_msg ("candidate '%s': %d receipts", expect[k].candidate, expect[k].seen);
    /* Several GPUs: one executor per device, tasks spread over them, and
       the device whose executor died (oob) leaves the others' work alone. */
    const char *uuid;
    json_t *count;
    json_object_foreach (per_device, uuid, count)
        print_message ("device %s: %lld task(s) ran there%s\n", uuid, (long long) json_integer_value (count),
                       crash_uuid && strcmp (uuid, crash_uuid) == 0 ? " (the oob crash was here)" : "");
    size_t ndev = ngpus;
    print_message ("%zu GPU(s) on this host, tasks ran on %zu\n", ndev, json_object_size (per_device));
    if (ndev >= 2) {
        if (json_object_size (per_device) < 2)
            fail_msg ("%zu GPUs but every task ran on one device", ndev);
        bool other_ok = false;
        json_array_foreach (json_object_get (answer, "receipts"), i, r) {
            const char *u = s_str (json_object_get (r, "device"), "uuid");
            if (!json_is_true (json_object_get (r, "duplicate")) && crash_uuid && strcmp (u, crash_uuid) != 0
                && strcmp (s_str (r, "status"), "ok") == 0)
                other_ok = true;
        }
        if (!other_ok)
            fail_msg ("no task finished ok on a device other than the one that crashed");
    }
    free (crash_uuid);
    json_decref (per_device);
    json_decref (accepted);
    json_decref (answer);

    /* The worker survived all of it: the same process, still registered. */
    assert_int_equal (kill (s_ctx.worker, 0), 0);
    assert_true (s_worker_alive (NULL));

    /* The report names the GPU class. */
    args = ak_sprintf ("report %s", s_ctx.batch_id);
    code = s_akctl (args, &out);
    free (args);
    if (code != 0 || !strstr (out, s_ctx.device_class))
        fail_msg ("akctl report: exit %d:\n%s", code, out ? out : "");
    print_message ("%s", out);
    free (out);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_gpu_batch, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
