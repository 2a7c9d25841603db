/*  tests/integration/test_verify.c: `akctl verify`, end to end.

    Starts akcoord and two host workers, tunes a small matmul batch (the
    naive baseline against a register-tiled candidate, two workloads), and
    installs its winner as profile "vp" (2 entries), then:
    - `akctl verify --profile vp --wait` gives a pass verdict for each of the
      2 entries on each of the 2 workers, exit 0, and the profile shows as
      verified;
    - a planted regression: the profile is exported, the kernel source of
      one entry is replaced by a wrong matmul and that of the other by a
      slowed copy of the baseline, the package re-checksummed and imported
      over "vp" (--replace): the import clears the old verification, and
      verify now fails both entries (a gate for the wrong one, the speedup
      for the slow one), marks the profile failing and exits 1;
    - the same package imported for a device class no worker has is
      "unverified: no live worker", exit 1, and not marked verified;
    - a worker stopped (SIGSTOP, then killed) during a verify: its pinned
      tasks fail "worker gone" and never run on the other worker, whose
      verdicts pass; `retry --failed` of that batch re-queues them for the
      dead worker, they fail again ("not registered") and the batch is
      judged afresh (still 4 verdicts);
    - akcoord and the surviving worker exit 0 (no sanitizer report). */
#include "support.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <jansson.h>

#include "digest.h"
#include "util.h"

#define S_START_MS 30000
#define S_BATCH_MS 200000

static struct {
    char  *dir, *akctl;
    pid_t  coord, workers[2];
} s_ctx;

static int s_run (char **out, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static int s_run (char **out, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *cmd = NULL;
    if (vasprintf (&cmd, fmt, ap) < 0)
        cmd = NULL;
    va_end (ap);
    assert_non_null (cmd);
    char *o = NULL;
    int rc = ak_test_run (cmd, &o);
    print_message ("$ %s -> %d\n%s", cmd, rc, o ? o : "");
    free (cmd);
    if (out)
        *out = o;
    else
        free (o);
    return rc;
}

static json_t *s_json (const char *fmt, const char *arg)
{
    char *out = NULL;
    char *args = ak_sprintf (fmt, arg);
    int rc = s_run (&out, "%s --json %s", s_ctx.akctl, args);
    json_t *j = json_loads (out ? out : "", 0, NULL);
    free (args);
    free (out);
    (void) rc;
    return j;
}

static bool s_answers (void *arg)
{
    (void) arg;
    char *cmd = ak_sprintf ("%s --timeout 500 stats > /dev/null 2>&1", s_ctx.akctl);
    int rc = ak_test_run (cmd, NULL);
    free (cmd);
    return rc == 0;
}

static bool s_workers_alive (void *arg)
{
    (void) arg;
    char *cmd = ak_sprintf ("%s --json workers", s_ctx.akctl), *out = NULL;
    ak_test_run (cmd, &out);
    json_t *j = json_loads (out ? out : "", 0, NULL);
    int alive = 0;
    size_t i;
    json_t *w;
    json_array_foreach (json_object_get (j, "workers"), i, w)
        alive += strcmp (json_is_string (json_object_get (w, "state")) ? json_string_value (json_object_get (w, "state")) : "", "alive") == 0;
    json_decref (j);
    free (out);
    free (cmd);
    return alive == 2;
}

static void s_dump (const char *name)
{
    char *path = ak_sprintf ("%s/%s", s_ctx.dir, name), *text = NULL;
    size_t len = 0;
    if (ak_file_read (path, 1u << 20, &text, &len, NULL) == 0) {
        size_t from = len > 4000 ? len - 4000 : 0;
        print_message ("---- %s\n%s\n----\n", name, text + from);
    }
    free (text);
    free (path);
}

static void s_start (void)
{
    s_ctx.dir = ak_test_tmpdir ("verify");
    assert_non_null (s_ctx.dir);
    char *wep = ak_sprintf ("ipc://%s/w.ipc", s_ctx.dir), *cep = ak_sprintf ("ipc://%s/c.ipc", s_ctx.dir);
    char *akctl = ak_test_bin ("akctl"), *coord = ak_test_bin ("akcoord"), *worker = ak_test_bin ("akworker");
    char *store = ak_sprintf ("%s/store", s_ctx.dir), *log = ak_sprintf ("%s/akcoord.log", s_ctx.dir);
    s_ctx.akctl = ak_sprintf ("'%s' --coordinator %s --timeout 10000", akctl, cep);
    char *cargv[] = { coord, "--store", store, "--workers", wep, "--clients", cep, "--log-level", "debug", NULL };
    s_ctx.coord = ak_test_spawn_coord (cargv, log);
    assert_true (s_ctx.coord > 0);
    if (!ak_test_wait (s_answers, NULL, S_START_MS)) {
        s_dump ("akcoord.log");
        fail_msg ("akcoord did not answer");
    }
    for (int i = 0; i < 2; i++) {
        char id[16];
        snprintf (id, sizeof id, "vf-w%d", i + 1);
        char *cache = ak_sprintf ("%s/cache-%s", s_ctx.dir, id), *wlog = ak_sprintf ("%s/%s.log", s_ctx.dir, id);
        char *wargv[] = { worker, "--coordinator", wep, "--id", id, "--cache", cache, NULL };
        s_ctx.workers[i] = ak_test_spawn (wargv, wlog);
        assert_true (s_ctx.workers[i] > 0);
        free (cache);
        free (wlog);
    }
    if (!ak_test_wait (s_workers_alive, NULL, S_START_MS)) {
        s_dump ("akcoord.log");
        fail_msg ("the workers did not both register");
    }
    free (wep);
    free (cep);
    free (akctl);
    free (coord);
    free (worker);
    free (store);
    free (log);
}

static int s_teardown (void **state)
{
    (void) state;
    for (int i = 0; i < 2; i++)
        if (s_ctx.workers[i] > 0)
            ak_test_stop (s_ctx.workers[i], SIGTERM, 10000);
    if (s_ctx.coord > 0) {
        int status = ak_test_stop (s_ctx.coord, SIGTERM, 10000);
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            print_message ("akcoord ended with status 0x%x\n", status);
            s_dump ("akcoord.log");
        }
    }
    if (s_ctx.dir)
        ak_test_rmtree (s_ctx.dir);
    free (s_ctx.dir);
    free (s_ctx.akctl);
    memset (&s_ctx, 0, sizeof s_ctx);
    return 0;
}

// ---------------------------------------------------------------- pieces

/* The batch: matmul on host, medium (96^3) and large (192^3), the naive
   baseline against the tiled candidate at its default tile (one
   configuration: about 6x faster).  Enough samples that host noise on a
   busy machine does not hide that from the promotion rule. */
static char *s_manifest (void)
{
    char *spec = ak_test_src ("kernels/matmul/spec.json"), *tiled = ak_test_src ("kernels/matmul/host/tiled.c");
    char *text = ak_sprintf (
        "{\"schema_version\": 1, \"name\": \"vtune\", \"targets\": [\"host\"],\n"
        " \"policy\": {\"max_attempts\": 2, \"warmup\": 2, \"min_samples\": 20, \"max_samples\": 60,\n"
        "            \"max_time_ms\": 1000, \"rsd_target\": 0.02, \"lease_ms\": 120000, \"seed\": 7},\n"
        " \"ops\": [{\"spec\": \"%s\", \"workloads\": [\"medium\", \"large\"],\n"
        "          \"candidates\": [\"tiled48\"],\n"
        "          \"extra_candidates\": [{\"name\": \"tiled48\", \"backend\": \"host\", \"source\": \"%s\"}]}]}\n",
        spec, tiled);
    char *path = ak_test_write (s_ctx.dir, "vtune.json", text);
    free (text);
    free (spec);
    free (tiled);
    return path;
}

/* Planted kernels: a matmul that forgets the last k term (wrong), and the
   naive loop run four times over (right, but about 4x slower than the
   baseline). */
static const char s_wrong[] =
    "void ak_kernel (const ak_args_t *a)\n{\n"
    "    const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];\n"
    "    const float *A = AK_IN (a, 0), *B = AK_IN (a, 1);\n    float *C = AK_OUT (a, 0);\n"
    "    for (int64_t i = 0; i < M; i++)\n        for (int64_t j = 0; j < N; j++) {\n"
    "            float sum = 0.0f;\n"
    "            for (int64_t k = 0; k + 1 < K; k++)\n                sum += A[i * K + k] * B[k * N + j];\n"
    "            C[i * N + j] = sum;\n        }\n}\n";
static const char s_slow[] =
    "void ak_kernel (const ak_args_t *a)\n{\n"
    "    const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];\n"
    "    const float *A = AK_IN (a, 0), *B = AK_IN (a, 1);\n    float *C = AK_OUT (a, 0);\n"
    "    for (int rep = 0; rep < 4; rep++)\n"
    "    for (int64_t i = 0; i < M; i++)\n        for (int64_t j = 0; j < N; j++) {\n"
    "            volatile float sum = 0.0f;\n"
    "            for (int64_t k = 0; k < K; k++)\n                sum += A[i * K + k] * B[k * N + j];\n"
    "            C[i * N + j] = sum;\n        }\n}\n";

/* Writes text as a package source; its digest into hex. */
static void s_put_source (const char *pkg, const char *text, char hex[65])
{
    ak_sha256_hex (text, strlen (text), hex);
    char *rel = ak_sprintf ("sources/%s.c", hex);
    char *path = ak_test_write (pkg, rel, text);
    assert_non_null (path);
    free (path);
    free (rel);
}

/* Rewrites SHA256SUMS for every file of the package (what a tamperer who
   knows the format does: the package is consistent, only its kernels are
   not the installed ones). */
static void s_resum (const char *pkg)
{
    assert_int_equal (s_run (NULL, "cd '%s' && find . -type f ! -name SHA256SUMS | sed 's|^\\./||' | sort "
                             "| xargs sha256sum > ../SHA256SUMS.new && mv ../SHA256SUMS.new SHA256SUMS", pkg), 0);
}

/* Exports vp, plants the kernels (entry medium: wrong; large: slow), and,
   with cls, moves the class to cls. */
static char *s_tampered (const char *tag, const char *cls)
{
    char *pkg = ak_sprintf ("%s/%s", s_ctx.dir, tag);
    assert_int_equal (s_run (NULL, "%s profile export vp '%s'", s_ctx.akctl, pkg), 0);
    char *pj = ak_sprintf ("%s/profile.json", pkg);
    json_error_t jerr;
    json_t *p = json_load_file (pj, 0, &jerr);
    assert_non_null (p);
    json_t *cl = json_array_get (json_object_get (p, "classes"), 0);
    json_t *entries = json_object_get (cl, "entries");
    assert_int_equal (json_array_size (entries), 2);
    size_t i;
    json_t *e;
    json_array_foreach (entries, i, e) {
        const char *key = json_string_value (json_object_get (e, "key"));
        char hex[65];
        s_put_source (pkg, strstr (key, "M=96,") ? s_wrong : s_slow, hex);
        json_t *src = json_object_get (e, "source");
        json_object_set_new (src, "digest", json_string (hex));
        char *file = ak_sprintf ("sources/%s.c", hex);
        json_object_set_new (src, "file", json_string (file));
        free (file);
    }
    if (cls)
        json_object_set_new (cl, "device_class", json_string (cls));
    assert_int_equal (json_dump_file (p, pj, JSON_INDENT (2)), 0);
    json_decref (p);
    free (pj);
    s_resum (pkg);
    return pkg;
}

/* The verdicts of verify batch id, parsed; checks their count. */
static json_t *s_verdicts (const char *batch_id, size_t expect)
{
    json_t *j = s_json ("verify %s", batch_id);
    assert_non_null (j);
    json_t *v = json_object_get (json_object_get (j, "report"), "verdicts");
    if (json_array_size (v) != expect)
        fail_msg ("verify batch %s: %zu verdicts, expected %zu", batch_id, json_array_size (v), expect);
    json_incref (v);
    json_decref (j);
    return v;
}

/* "verify batch B000002 of profile" -> "B000002" (caller frees). */
static char *s_batch_of (const char *out)
{
    const char *p = out ? strstr (out, "verify batch ") : NULL;
    assert_non_null (p);
    p += strlen ("verify batch ");
    size_t n = strcspn (p, " ");
    char *id = ak_malloc (n + 1);
    memcpy (id, p, n);
    id[n] = '\0';
    return id;
}

// ------------------------------------------------------------------ test

static void test_verify (void **state)
{
    (void) state;
    s_start ();
    char *manifest = s_manifest (), *out = NULL, *tuned = NULL;
    int rc;
    /* The precondition is a promoted winner.  The tiled kernel is about 6x
       faster, but a machine busy with other tests can make one run's noise
       hide that from the promotion rule: up to three tuning batches. */
    for (int attempt = 0; attempt < 3 && !tuned; attempt++) {
        rc = s_run (&out, "%s submit '%s' --wait 2>&1", s_ctx.akctl, manifest);
        if (rc != 0)
            s_dump ("akcoord.log");
        assert_int_equal (rc, 0);
        char *batch = ak_sprintf ("%.*s", (int) strcspn (out, "\n"), out);
        free (out);
        rc = s_run (&out, "%s report %s 2>&1", s_ctx.akctl, batch);
        free (out);
        rc = s_run (&out, "%s profile install %s --profile vp 2>&1", s_ctx.akctl, batch);
        if (rc == 0) {
            assert_non_null (strstr (out, "installed 2 entries into profile vp"));
            tuned = batch;
        }
        else {
            assert_non_null (strstr (out, "no promoted winner"));
            free (batch);
        }
        free (out);
    }
    if (!tuned)
        fail_msg ("three tuning batches promoted nothing: this test needs a winner to verify");
    assert_int_equal (s_run (&out, "%s profile show vp", s_ctx.akctl), 0);
    assert_non_null (strstr (out, "verification: never"));
    free (out);

    /* 1: as installed: verified, 2 entries x 2 workers */
    rc = s_run (&out, "%s verify --profile vp --wait 2>&1", s_ctx.akctl);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "verify: profile vp: verified (2 of 2 entries passed; 4 of 4 host verdicts"));
    char *b1 = s_batch_of (out);
    free (out);
    json_t *v = s_verdicts (b1, 4);
    size_t i;
    json_t *x;
    int on[2] = { 0, 0 };
    json_array_foreach (v, i, x) {
        assert_string_equal (json_string_value (json_object_get (x, "verdict")), "pass");
        const char *w = json_string_value (json_object_get (x, "worker_id"));
        on[strcmp (w, "vf-w1") == 0 ? 0 : 1]++;
        assert_true (json_real_value (json_object_get (x, "measured")) > 1.03);
        assert_true (*json_string_value (json_object_get (x, "receipt_id")));
    }
    assert_int_equal (on[0], 2);
    assert_int_equal (on[1], 2);
    json_decref (v);
    assert_int_equal (s_run (&out, "%s profile show vp", s_ctx.akctl), 0);
    char *expect = ak_sprintf ("verification: verified (batch %s", b1);
    assert_non_null (strstr (out, expect));
    free (expect);
    free (out);
    assert_int_equal (s_run (&out, "%s profile list", s_ctx.akctl), 0);
    assert_non_null (strstr (out, "verified (batch"));
    free (out);

    /* 2: planted regression */
    char *pkg = s_tampered ("planted", NULL);
    assert_int_equal (s_run (NULL, "%s profile import '%s' --replace", s_ctx.akctl, pkg), 0);
    assert_int_equal (s_run (&out, "%s profile show vp", s_ctx.akctl), 0);
    assert_non_null (strstr (out, "verification: never"));      /* the import cleared it */
    free (out);
    rc = s_run (&out, "%s verify --profile vp --wait 2>&1", s_ctx.akctl);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (out, "verify: profile vp: failing (2 of 2 entries failed"));
    char *b2 = s_batch_of (out);
    free (out);
    v = s_verdicts (b2, 4);
    json_array_foreach (v, i, x) {
        const char *key = json_string_value (json_object_get (x, "key"));
        const char *why = json_string_value (json_object_get (x, "reason"));
        assert_string_equal (json_string_value (json_object_get (x, "verdict")), "fail");
        if (strstr (key, "M=96,")) {
            if (!strstr (why, "gate ") || !strstr (why, "wrong_answer"))
                fail_msg ("%s: expected a failed gate, got '%s'", key, why);
        }
        else
        if (!strstr (why, "speedup ") || !strstr (why, "below"))
            fail_msg ("%s: expected a speedup below the threshold, got '%s'", key, why);
    }
    json_decref (v);
    assert_int_equal (s_run (&out, "%s profile show vp", s_ctx.akctl), 0);
    assert_non_null (strstr (out, "verification: failing"));
    assert_non_null (strstr (out, "gate "));
    free (out);
    /* `verify BATCH` shows a finished verification again, same exit code */
    assert_int_equal (s_run (&out, "%s verify %s", s_ctx.akctl, b2), 1);
    assert_non_null (strstr (out, "verify: profile vp: failing"));
    free (out);

    /* 3: a class with no live worker: unverified, not verified */
    char *pkg2 = s_tampered ("other", "host-nobody");
    assert_int_equal (s_run (NULL, "%s profile import '%s' --as vp-other", s_ctx.akctl, pkg2), 0);
    rc = s_run (&out, "%s verify --profile vp-other --wait 2>&1", s_ctx.akctl);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (out, "verify: profile vp-other: unverified (2 of 2 entries unverified"));
    assert_non_null (strstr (out, "no live worker of class host-nobody"));
    free (out);

    /* 4: a worker that goes silent: its pinned tasks fail "worker gone"
       (never run elsewhere), the other worker's verdicts stand */
    assert_int_equal (s_run (NULL, "%s profile install %s --profile vp2", s_ctx.akctl, tuned), 0);
    assert_int_equal (kill (s_ctx.workers[1], SIGSTOP), 0);
    rc = s_run (&out, "%s verify --profile vp2 --wait 2>&1", s_ctx.akctl);
    kill (s_ctx.workers[1], SIGKILL);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (out, "verify: profile vp2: failing (2 of 2 entries failed"));
    char *b4 = s_batch_of (out);
    free (out);
    v = s_verdicts (b4, 4);
    json_array_foreach (v, i, x) {
        const char *w = json_string_value (json_object_get (x, "worker_id"));
        const char *why = json_string_value (json_object_get (x, "reason"));
        const char *verdict = json_string_value (json_object_get (x, "verdict"));
        if (strcmp (w, "vf-w2") == 0) {
            assert_string_equal (verdict, "fail");
            if (!strstr (why, "worker gone"))
                fail_msg ("%s on vf-w2: expected 'worker gone', got '%s'", json_string_value (json_object_get (x, "key")), why);
        }
        else
            assert_string_equal (verdict, "pass");
    }
    json_decref (v);
    /* retried, the tasks pinned to the dead worker go back to its queue,
       fail again once the coordinator sees it is not registered, and the
       batch is judged afresh: still one verdict per (entry, host) */
    assert_int_equal (s_run (NULL, "%s retry %s --failed", s_ctx.akctl, b4), 0);
    rc = s_run (&out, "%s verify %s --wait 2>&1", s_ctx.akctl, b4);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (out, "verify: profile vp2: failing (2 of 2 entries failed"));
    free (out);
    v = s_verdicts (b4, 4);
    size_t gone = 0;
    json_array_foreach (v, i, x)
        gone += strstr (json_string_value (json_object_get (x, "reason")), "worker gone (vf-w2 is not registered)") != NULL;
    assert_int_equal (gone, 2);
    json_decref (v);
    free (b4);
    free (tuned);

    /* everything it started ends cleanly (under ASan: no leak, no error) */
    int status = ak_test_stop (s_ctx.workers[0], SIGTERM, 20000);
    s_ctx.workers[0] = 0;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        s_dump ("vf-w1.log");
        fail_msg ("vf-w1 ended with status 0x%x", status);
    }
    assert_int_equal (s_run (NULL, "%s shutdown", s_ctx.akctl), 0);
    status = ak_test_stop (s_ctx.coord, 0, 20000);
    s_ctx.coord = 0;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        s_dump ("akcoord.log");
        fail_msg ("akcoord ended with status 0x%x", status);
    }

    free (pkg);
    free (pkg2);
    free (b1);
    free (b2);
    free (manifest);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_verify, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
