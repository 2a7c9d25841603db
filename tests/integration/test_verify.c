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
    - with one live worker left, a new tuning batch's winner is confirmed
      on the worker that measured it: `profile install` takes nothing and
      says why ("not confirmed on another worker ... --unconfirmed"), and
      `--unconfirmed` installs it with `confirmed_on` null (the first
      install, with two workers, passed because the other one confirmed);
    - akcoord and the surviving worker exit 0 (no sanitizer report). */
#include "support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>

#include "digest.h"
#include "util.h"

#define S_START_MS 30000
#define S_BATCH_MS 200000

static ak_test_cluster_t s_c;

/* `akctl --json ARGS` parsed whatever its exit code (a failing verify
   exits 1 with its JSON). */
static json_t *s_json (const char *fmt, const char *arg)
{
    char *out = NULL;
    char *args = ak_sprintf (fmt, arg);
    ak_test_akctl (&s_c, &out, "--json %s", args);
    json_t *j = json_loads (out ? out : "", 0, NULL);
    free (args);
    free (out);
    return j;
}

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
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
    char *path = ak_test_write (s_c.dir, "vtune.json", text);
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
    assert_int_equal (ak_test_runf (NULL, "cd '%s' && find . -type f ! -name SHA256SUMS | sed 's|^\\./||' | sort "
                             "| xargs sha256sum > ../SHA256SUMS.new && mv ../SHA256SUMS.new SHA256SUMS", pkg), 0);
}

/* Exports vp, plants the kernels (entry medium: wrong; large: slow), and,
   with cls, moves the class to cls. */
static char *s_tampered (const char *tag, const char *cls)
{
    char *pkg = ak_sprintf ("%s/%s", s_c.dir, tag);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile export vp '%s'", pkg), 0);
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

/* vp exported and made what an install leaves where no candidate beat
   cuBLASLt (no host pipeline can: the vendor baseline is cuda's): its
   entries vendor entries of class NVIDIA_H200/..., without kernels or
   sources. */
static char *s_vendor_pkg (const char *tag)
{
    char *pkg = ak_sprintf ("%s/%s", s_c.dir, tag);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile export vp '%s'", pkg), 0);
    assert_int_equal (ak_test_runf (NULL, "rm -f '%s'/sources/*", pkg), 0);
    char *pj = ak_sprintf ("%s/profile.json", pkg);
    json_error_t jerr;
    json_t *p = json_load_file (pj, 0, &jerr);
    assert_non_null (p);
    json_t *cl = json_array_get (json_object_get (p, "classes"), 0);
    json_object_set_new (cl, "device_class", json_string ("NVIDIA_H200/sm_90/drv580/nvrtc13.0"));
    json_object_set_new (cl, "backend", json_string ("cuda"));
    size_t i;
    json_t *e;
    json_array_foreach (json_object_get (cl, "entries"), i, e) {
        static const char *const kernel[] = { "entry", "source", "prelude", "launch", "arch", "inputs", "outputs" };
        for (size_t k = 0; k < sizeof kernel / sizeof kernel[0]; k++)
            json_object_del (e, kernel[k]);
        json_object_set_new (e, "kind", json_string ("vendor"));
        json_object_set_new (e, "backend", json_string ("cuda"));
        json_object_set_new (e, "vendor", json_string ("cublaslt"));
        json_object_set_new (e, "vendor_op", json_string ("matmul"));
        json_object_set_new (e, "confirmed_on", json_null ());     /* nothing to confirm */
        /* as install words it: the entry's own workload first */
        char *why = ak_sprintf ("no candidate beat cuBLASLt beyond the noise at %s/%s: the best there, tiled TM=2, "
                                "ran 1.01x +- 0.02; over the operator's workloads: best candidate tiled TM=2: "
                                "1.01x +- 0.02", json_string_value (json_object_get (e, "workload")),
                                json_string_value (json_object_get (e, "dtype")));
        json_object_set_new (e, "reason", json_string (why));
        free (why);
    }
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

/* Writes a gate JSON for profile vp as `akctl gate` would (the figures and
   reasons given; cls and updated_ms as the package says unless bumped), and
   returns its path. */
static char *s_gate_file (const char *tag, const char *pkg, const char *reasons_csv, double speedup,
                          int64_t bump_ms, bool lie)
{
    char *pj = ak_sprintf ("%s/profile.json", pkg);
    json_t *p = json_load_file (pj, 0, NULL);
    assert_non_null (p);
    json_t *cl = json_array_get (json_object_get (p, "classes"), 0);
    const char *cls = json_string_value (json_object_get (cl, "device_class"));
    json_int_t upd = json_integer_value (json_object_get (cl, "updated_ms"));
    json_t *reasons = json_array ();
    char *verdict = ak_strdup (*reasons_csv ? "rejected (" : "accepted");
    for (const char *r = reasons_csv; *r; ) {
        size_t n = strcspn (r, ",");
        json_array_append_new (reasons, json_stringn (r, n));
        char *next = ak_sprintf ("%s%s%.*s", verdict, json_array_size (reasons) > 1 ? ", " : "", (int) n, r);
        free (verdict);
        verdict = next;
        r += n + (r[n] == ',');
    }
    if (*reasons_csv) {
        char *next = ak_sprintf ("%s)", verdict);
        free (verdict);
        verdict = next;
    }
    json_t *g = json_pack ("{s:s, s:i, s:s, s:s, s:{s:I}, s:s, s:s, s:b, s:o, s:f, s:f, s:f, s:i, "
                           "s:{s:{s:f}, s:{s:f}, s:{s:s}}, s:s, s:[]}",
                           "format", "akfleet-gate", "schema_version", 1, "profile", "vp", "device_class", cls,
                           "package_classes", cls, (json_int_t) (upd + bump_ms),
                           "package_sha256", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                           "verdict", verdict, "accepted", lie ? !*reasons_csv == 0 : !*reasons_csv,
                           "reasons", reasons, "speedup", speedup, "speedup_noise", 0.02, "hit_share", 0.5,
                           "steps", 20, "outputs", "vs_off", "max_abs", 0.0, "on_vs_float32", "rel_rms", 0.01,
                           "off_vs_float32", "rel_rms", "nan", "script", "/srv/model/llama_gate.py", "calls");
    char *path = ak_sprintf ("%s/%s.gate.json", s_c.dir, tag);
    assert_int_equal (json_dump_file (g, path, JSON_INDENT (1)), 0);
    json_decref (g);
    json_decref (p);
    free (verdict);
    free (pj);
    return path;
}

/* The end-to-end gate recorded with the profile (issue 19): kept for the
   class it ran on, shown by show and list, a rejected one never shown as
   verified, a stale, inconsistent or foreign one refused. */
static void s_check_gates (void)
{
    char *pkg = ak_sprintf ("%s/gated", s_c.dir), *out = NULL;
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile export vp '%s'", pkg), 0);

    char *ok = s_gate_file ("ok", pkg, "", 1.05, 0, false);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile record-gate '%s' 2>&1", ok), 0);
    assert_non_null (strstr (out, "end-to-end gate accepted recorded"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp"), 0);
    assert_non_null (strstr (out, "verification: verified (batch"));
    assert_non_null (strstr (out, "end-to-end gate: accepted 1.05x +- 0.02 (llama_gate.py, 20 pairs, 50% of calls hit"));
    free (out);

    char *slow = s_gate_file ("slow", pkg, "slower,outputs differ", 0.6, 0, false);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile record-gate '%s' 2>&1", slow), 0);
    assert_non_null (strstr (out, "end-to-end gate rejected (slower, outputs differ) recorded (replacing the earlier one)"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp"), 0);
    assert_non_null (strstr (out, "verification: rejected by the end-to-end gate (below); kernels: verified (batch"));
    assert_non_null (strstr (out, "end-to-end gate: rejected (slower, outputs differ) 0.60x +- 0.02"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile list"), 0);
    assert_non_null (strstr (out, "end-to-end gate rejected (slower, outputs differ) 0.60x +- 0.02 (kernels: verified"));
    free (out);
    json_t *j = s_json ("profile show %s", "vp");
    json_t *g = json_object_get (json_array_get (json_object_get (j, "classes"), 0), "gate");
    assert_string_equal (json_string_value (json_object_get (g, "state")), "rejected");
    assert_true (json_is_null (json_object_get (g, "rel_rms_off_vs_float32")));     /* "nan" kept as not finite */
    assert_string_equal (json_string_value (json_object_get (g, "script")), "llama_gate.py");
    json_decref (j);

    /* refused: the class was installed again since the export (stale), a
       verdict that contradicts its reasons, nothing to read */
    char *stale = s_gate_file ("stale", pkg, "", 1.05, 1, false);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile record-gate '%s' 2>&1", stale), 1);
    assert_non_null (strstr (out, "the gate ran on another version of profile vp"));
    free (out);
    char *lie = s_gate_file ("lie", pkg, "slower", 0.6, 0, true);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile record-gate '%s' 2>&1", lie), 2);
    assert_non_null (strstr (out, "'accepted' is true but 1 reason is given"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile record-gate '%s/nothing.json' 2>&1", s_c.dir), 2);
    free (out);
    /* still the rejected one */
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp"), 0);
    assert_non_null (strstr (out, "end-to-end gate: rejected (slower, outputs differ)"));
    free (out);
    free (ok);
    free (slow);
    free (stale);
    free (lie);
    free (pkg);
}

static void test_verify (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "verify", false);
    s_c.echo = true;
    ak_test_cluster_coord (&s_c, NULL, NULL, (const char *const[]) { "--log-level", "debug", NULL },
                           S_START_MS);
    ak_test_cluster_workers (&s_c, "vf-w", 2, NULL, S_START_MS);
    char *manifest = s_manifest (), *out = NULL, *tuned = NULL;
    int rc;
    /* The precondition is a promoted winner.  The tiled kernel is about 6x
       faster, but a machine busy with other tests can make one run's noise
       hide that from the promotion rule: up to three tuning batches. */
    for (int attempt = 0; attempt < 3 && !tuned; attempt++) {
        rc = ak_test_akctl (&s_c, &out, "submit '%s' --wait 2>&1", manifest);
        if (rc != 0)
            ak_test_cluster_dump (&s_c, "akcoord.log");
        assert_int_equal (rc, 0);
        char *batch = ak_sprintf ("%.*s", (int) strcspn (out, "\n"), out);
        free (out);
        rc = ak_test_akctl (&s_c, &out, "report %s 2>&1", batch);
        free (out);
        /* --replace: what an earlier attempt installed (a workload pick
           alone) gives way */
        rc = ak_test_akctl (&s_c, &out, "profile install %s --profile vp --replace 2>&1", batch);
        if (rc == 0 && strstr (out, "installed 2 entries into profile vp"))
            tuned = batch;
        else {
            /* noise hid the winner (nothing went in, or only a workload
               pick), or left it behind the baseline at one workload (that
               entry stays out); both say why */
            if (rc != 0)
                assert_non_null (strstr (out, "no promoted winner"));
            else
                assert_non_null (strstr (out, "skipped: matmul on host"));
            free (batch);
        }
        free (out);
    }
    if (!tuned)
        fail_msg ("three tuning batches promoted nothing: this test needs a winner to verify");
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp"), 0);
    assert_non_null (strstr (out, "verification: never"));
    /* two workers: the other one confirmed the winner, and show says which */
    assert_non_null (strstr (out, "CONFIRMED ON"));
    assert_non_null (strstr (out, "  vf-w"));
    free (out);

    /* 1: as installed: verified, 2 entries x 2 workers.  A floor of three
       times the recorded speedup: host timings on a shared 2-core machine moved
       by up to 40% between the tuning and the verification (4.58x measured
       against 7.62x recorded), by 2x under a load of 39 (13.8x and 56.5x
       against 27.8x; 13.4x against 6.48x once the box went idle), and the
       noise no longer widens the band past max(25%, floor) of the record
       (issue 14); this part is about the
       flow, the rule's arithmetic is test_verify_rule's. */
    rc = ak_test_akctl (&s_c, &out, "verify --profile vp --k 2 --floor 3 --wait 2>&1");
    assert_non_null (strstr (out, "+ 3 x recorded"));
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
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp"), 0);
    char *expect = ak_sprintf ("verification: verified (batch %s", b1);
    assert_non_null (strstr (out, expect));
    free (expect);
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile list"), 0);
    assert_non_null (strstr (out, "verified (batch"));
    free (out);
    s_check_gates ();

    /* 2: planted regression */
    char *pkg = s_tampered ("planted", NULL);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile import '%s' --replace", pkg), 0);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp"), 0);
    assert_non_null (strstr (out, "verification: never"));      /* the import cleared it */
    assert_null (strstr (out, "end-to-end gate"));               /* and the class's gate */
    free (out);
    rc = ak_test_akctl (&s_c, &out, "verify --profile vp --wait 2>&1");
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
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp"), 0);
    assert_non_null (strstr (out, "verification: failing"));
    assert_non_null (strstr (out, "gate "));
    free (out);
    /* `verify BATCH` shows a finished verification again, same exit code */
    assert_int_equal (ak_test_akctl (&s_c, &out, "verify %s", b2), 1);
    assert_non_null (strstr (out, "verify: profile vp: failing"));
    free (out);

    /* 3: a class with no live worker: unverified, not verified */
    char *pkg2 = s_tampered ("other", "host-nobody");
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile import '%s' --as vp-other", pkg2), 0);
    rc = ak_test_akctl (&s_c, &out, "verify --profile vp-other --wait 2>&1");
    assert_int_equal (rc, 1);
    assert_non_null (strstr (out, "verify: profile vp-other: unverified (2 of 2 entries unverified"));
    assert_non_null (strstr (out, "no live worker of class host-nobody"));
    free (out);

    /* 3b: vendor entries (the vendor library kept): imported, shown with
       their kind and reason, exported without sources and imported again;
       verify has no kernel to run for them and says so, failing nothing
       (vendor entries alone: nothing checked, unverified) */
    char *vpkg = s_vendor_pkg ("vendor");
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile import '%s' --as vp-vendor 2>&1", vpkg), 0);
    assert_non_null (strstr (out, "imported 2 entries into profile vp-vendor"));
    assert_non_null (strstr (out, "vendor"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp-vendor"), 0);
    assert_non_null (strstr (out, "vendor entries (the vendor library stays; no kernel is applied):"));
    assert_non_null (strstr (out, "cublaslt matmul"));
    assert_non_null (strstr (out, "no candidate beat cuBLASLt beyond the noise"));
    free (out);
    json_t *vj = s_json ("profile show %s", "vp-vendor");
    const json_t *ve = json_array_get (json_object_get (json_array_get (json_object_get (vj, "classes"), 0),
                                                        "entries"), 0);
    assert_string_equal (json_string_value (json_object_get (ve, "kind")), "vendor");
    assert_null (json_object_get (ve, "source"));
    json_decref (vj);
    char *vpkg2 = ak_sprintf ("%s/vendor2", s_c.dir);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile export vp-vendor '%s'", vpkg2), 0);
    assert_non_null (strstr (out, "profile.json, 0 source file(s), SHA256SUMS"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile import '%s' --as vp-vendor2", vpkg2), 0);
    rc = ak_test_akctl (&s_c, &out, "verify --profile vp-vendor2 --wait 2>&1");
    assert_int_equal (rc, 1);
    assert_non_null (strstr (out, "verify: profile vp-vendor2: unverified (0 of 0 entries unverified; 0 of 0 host "
                                  "verdicts passed; 2 vendor entries, no kernel to verify"));
    assert_non_null (strstr (out, "vendor entry: no kernel to verify (the vendor library cublaslt stays"));
    free (out);
    free (vpkg2);
    free (vpkg);

    /* 4: a worker that goes silent: its pinned tasks fail "worker gone"
       (never run elsewhere), the other worker's verdicts stand */
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile install %s --profile vp2", tuned), 0);
    assert_int_equal (kill (s_c.workers[1], SIGSTOP), 0);
    rc = ak_test_akctl (&s_c, &out, "verify --profile vp2 --wait 2>&1");
    ak_test_cluster_stop_worker (&s_c, 1, SIGKILL, 10000);
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
        else {
            /* measured and judged on its own: a receipt, not "worker gone".
               Whether the measurement lands inside the tolerance is timing
               on a shared machine (with vf-w2 stopped, vf-w1 alone once
               measured 8.0x against a recorded 6.33x +- 0.26); the rule
               itself is test_verify_rule's. */
            const char *rid = json_string_value (json_object_get (x, "receipt_id"));
            assert_non_null (rid);
            assert_true (*rid);
            assert_null (strstr (why, "worker gone"));
            assert_true (strcmp (verdict, "pass") == 0 || strcmp (verdict, "fail") == 0);
        }
    }
    json_decref (v);
    /* retried, the tasks pinned to the dead worker go back to its queue,
       fail again once the coordinator sees it is not registered, and the
       batch is judged afresh: still one verdict per (entry, host) */
    assert_int_equal (ak_test_akctl (&s_c, NULL, "retry %s --failed", b4), 0);
    rc = ak_test_akctl (&s_c, &out, "verify %s --wait 2>&1", b4);
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

    /* 5: one live worker (vf-w2 is gone): the confirmation runs on the
       worker that measured the winner, so a plain install takes nothing
       and says why; --unconfirmed installs it, confirmed by nobody */
    char *alone = NULL;
    for (int attempt = 0; attempt < 3 && !alone; attempt++) {
        assert_int_equal (ak_test_akctl (&s_c, &out, "submit '%s' --wait 2>&1", manifest), 0);
        char *batch = ak_sprintf ("%.*s", (int) strcspn (out, "\n"), out);
        free (out);
        rc = ak_test_akctl (&s_c, &out, "profile install %s --profile vp3 2>&1", batch);
        assert_int_not_equal (rc, 0);
        if (strstr (out, "not confirmed on another worker")) {
            assert_non_null (strstr (out, "confirmed on vf-w1, the worker that measured it"));
            assert_non_null (strstr (out, "--unconfirmed"));
            alone = batch;
        }
        else {
            assert_non_null (strstr (out, "no promoted winner"));      /* noise hid the winner: again */
            free (batch);
        }
        free (out);
    }
    if (!alone)
        fail_msg ("three tuning batches with one worker promoted nothing");
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile install %s --profile vp3 --unconfirmed 2>&1", alone), 0);
    assert_non_null (strstr (out, "installed 2 entries into profile vp3"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile show vp3 --json"), 0);
    json_error_t jerr;
    json_t *shown = json_loads (out, 0, &jerr);
    assert_non_null (shown);
    const json_t *entry = json_array_get (json_object_get (json_array_get (json_object_get (shown, "classes"), 0),
                                                           "entries"), 0);
    assert_non_null (entry);
    assert_true (json_is_null (json_object_get (entry, "confirmed_on")));
    json_decref (shown);
    free (out);
    free (alone);

    /* everything it started ends cleanly (under ASan: no leak, no error) */
    ak_test_cluster_shutdown (&s_c, 20000);

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
