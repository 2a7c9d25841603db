/*  tests/integration/test_report_html.c: the morning report and profiles
    through akctl, end to end.

    Runs `akctl demo --keep MANIFEST` (a private coordinator and two workers
    tune a host batch), starts akcoord again on the demo's store, then:
    - `akctl report B000001 --out DIR` prints the summary line scripts grep
      and writes report.md, report.json and report.html;
      (the headless render of a report.html in chromium is its own test,
      test_report_render, so that a box without chromium shows only that
      one as skipped); the per-workload timings in report.json are those
      of the receipt whose figures the winner reports (its measurement, or
      its confirmation where that was lower);
    - `akctl profile install` installs the promoted winners (a second install
      without --replace is refused, exit 1), `export` writes a package that
      `import --as` takes, and a package with a changed source is refused
      (exit 2) before anything is sent.

    The batch is made so that the profile steps always run: one operator,
    "slowbase" (rmsnorm's maths), whose host baseline does the whole work
    S_SLOWDOWN times over and whose one candidate does it once.  Host timing
    is noisy, but not by a factor of S_SLOWDOWN: on small shapes (a sample
    rarely spans a preemption) and with at least 25 paired rounds, the
    median ratio's confidence band stays well inside it and the candidate
    is promoted on a loaded box too (promotion needs the speedup beyond
    the 3% threshold by more than that band: coordinator/promote.c).
    S_SLOWDOWN stays under 10x, where a speedup counts as implausible and
    is re-checked by another task. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "util.h"

static ak_test_cluster_t s_c;

static char *s_read (const char *dir, const char *name)
{
    char *path = ak_path_join (dir, name), *data = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    if (ak_file_read (path, 64u << 20, &data, &len, &err) != 0)
        fail_msg ("%s", err.msg);
    free (path);
    return data;
}

/* ------------------------------------------------ a certain winner */

#define S_SLOWDOWN 8

static const char s_spec[] =
    "{\"schema_version\": 1, \"name\": \"slowbase\", \"keys\": [\"M\", \"N\"],\n"
    " \"dtypes\": [\"float32\"],\n"
    " \"tolerances\": {\"float32\": {\"atol\": 1e-4, \"rtol\": 1e-4}},\n"
    " \"sizes\": [{\"name\": \"small\", \"size\": {\"M\": 16, \"N\": 256}},\n"
    "           {\"name\": \"medium\", \"size\": {\"M\": 32, \"N\": 256}}],\n"
    " \"edge_sizes\": [{\"name\": \"odd\", \"size\": {\"M\": 7, \"N\": 33}}],\n"
    " \"stability_size\": \"small\", \"flops\": \"6*M*N\", \"bytes\": \"(2*M*N + N)*b\",\n"
    " \"inputs\": [{\"name\": \"x\", \"count\": \"M*N\", \"range\": [-4, 4]},\n"
    "            {\"name\": \"w\", \"count\": \"N\", \"range\": [0.5, 1.5]}],\n"
    " \"outputs\": [{\"name\": \"y\", \"count\": \"M*N\"}], \"inplace\": false,\n"
    " \"reference\": \"ref.c\",\n"
    " \"baselines\": [{\"backend\": \"host\", \"source\": \"slow.c\"}],\n"
    " \"candidates\": [{\"name\": \"once\", \"backend\": \"host\", \"source\": \"once.c\"}]}\n";

/* rmsnorm's host baseline with the work repeated REPS times; the empty asm
   with a memory clobber keeps the compiler from folding the repeats. */
static const char s_kernel[] =
    "#ifndef REPS\n#define REPS 1\n#endif\n"
    "void ak_kernel (const ak_args_t *a)\n"
    "{\n"
    "    const int64_t M = a->dims[0], N = a->dims[1];\n"
    "    const float *x = AK_IN (a, 0), *w = AK_IN (a, 1);\n"
    "    float *y = AK_OUT (a, 0);\n"
    "    for (int rep = 0; rep < REPS; rep++) {\n"
    "        for (int64_t m = 0; m < M; m++) {\n"
    "            const float *xr = x + m * N;\n"
    "            float *yr = y + m * N;\n"
    "            float ss = 0.0f;\n"
    "            for (int64_t n = 0; n < N; n++)\n"
    "                ss += xr[n] * xr[n];\n"
    "            float inv = 1.0f / sqrtf (ss / (float) N + 1e-6f);\n"
    "            for (int64_t n = 0; n < N; n++)\n"
    "                yr[n] = xr[n] * inv * w[n];\n"
    "        }\n"
    "        __asm__ volatile (\"\" ::: \"memory\");\n"
    "    }\n"
    "}\n";

/*  dir/slowbase/ (spec, rmsnorm's reference, the slow baseline and the
    candidate) and dir/report.json, the batch of it; returns the batch's
    path (caller frees). */
static char *s_write_batch (const char *dir)
{
    char *op = ak_path_join (dir, "slowbase"), *ref_path = ak_test_src ("kernels/rmsnorm/ref.c");
    char *ref = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_mkdir_p (op, 0755, &err), 0);
    if (ak_file_read (ref_path, 1 << 20, &ref, NULL, &err) != 0)
        fail_msg ("%s", err.msg);
    char *slow = ak_sprintf ("#define REPS %d\n%s", S_SLOWDOWN, s_kernel);
    const char *files[][2] = { { "spec.json", s_spec }, { "ref.c", ref }, { "slow.c", slow },
                               { "once.c", s_kernel } };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        free (ak_test_write (op, files[i][0], files[i][1]));
    char *manifest = ak_test_write (dir, "report.json",
        "{\"schema_version\": 1, \"name\": \"report\", \"targets\": [\"host\"],\n"
        " \"policy\": {\"max_attempts\": 3, \"compile_timeout_ms\": 30000, \"run_timeout_ms\": 30000,\n"
        "            \"lease_ms\": 60000, \"warmup\": 2, \"min_samples\": 25, \"max_samples\": 60,\n"
        "            \"rsd_target\": 0.02, \"max_time_ms\": 3000, \"threshold\": 0.03,\n"
        "            \"max_regression\": 0.05, \"seed\": 42},\n"
        " \"ops\": [{\"spec\": \"slowbase/spec.json\", \"workloads\": [\"small\", \"medium\"]}]}\n");
    assert_non_null (manifest);
    free (slow);
    free (ref);
    free (ref_path);
    free (op);
    return manifest;
}

/*  The winner's per-workload timings in report.json (winner_timings) are
    those of the receipt its figures come from (figures_receipt_id: the
    measurement, or the confirmation where that was lower), found with
    `show` on its task and its confirm tasks. */
static void s_check_timings (const json_t *report)
{
    const json_t *op = json_array_get (json_object_get (report, "ops"), 0);
    const json_t *w = json_object_get (op, "winner");
    const char *task = json_string_value (json_object_get (w, "task_id"));
    const char *fig = json_string_value (json_object_get (w, "figures_receipt_id"));
    if (!fig || !*fig)
        fig = json_string_value (json_object_get (w, "receipt_id"));
    assert_non_null (task);
    assert_non_null (fig);
    const json_t *timings = json_object_get (json_object_get (report, "winner_timings"), task);
    assert_non_null (timings);
    const json_t *confirms = json_object_get (op, "confirms");
    bool found = false;
    for (size_t c = 0; c <= json_array_size (confirms) && !found; c++) {
        const char *id = c ? json_string_value (json_object_get (json_array_get (confirms, c - 1), "task_id"))
                           : task;
        char *out = NULL;
        assert_int_equal (ak_test_akctl (&s_c, &out, "--json show %s", id), 0);
        json_t *show = json_loads (out, 0, NULL);
        assert_non_null (show);
        size_t k;
        json_t *r;
        json_array_foreach (json_object_get (show, "receipts"), k, r)
            if (strcmp (json_string_value (json_object_get (r, "receipt_id")), fig) == 0) {
                found = true;
                if (!json_equal (json_object_get (r, "timings"), (json_t *) timings))
                    fail_msg ("report.json's timings of %s are not those of receipt %s (the winner's figures)",
                              task, fig);
            }
        json_decref (show);
        free (out);
    }
    if (!found)
        fail_msg ("receipt %s (the figures of winner %s) not found by show", fig, task);
    printf ("winner %s: timings from receipt %s (%s)\n", task, fig,
            strcmp (fig, json_string_value (json_object_get (w, "receipt_id"))) == 0
            ? "its measurement" : "its confirmation, the lower figure");
}

static void test_report_and_profiles (void **state)
{
    ak_test_cluster_init (&s_c, "report", false);
    s_c.echo = true;
    char *akctl = ak_test_bin ("akctl");
    char *demo = ak_sprintf ("%s/demo", s_c.dir);
    char *manifest = s_write_batch (s_c.dir);
    assert_int_equal (ak_test_runf (NULL, "'%s' demo --dir '%s' --keep '%s' > '%s/demo.out' 2>&1", akctl, demo,
                                    manifest, s_c.dir), 0);

    /* akcoord again, on the demo's store */
    char *store = ak_sprintf ("%s/store", demo);
    ak_test_cluster_coord (&s_c, store, NULL, NULL, 20000);

    /* the report */
    char *out = NULL, *rep = ak_sprintf ("%s/rep", s_c.dir);
    int rc = ak_test_akctl (&s_c, &out, "report B000001 --out '%s' 2>/dev/null", rep);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "akfleet-report: batch B000001 verdict=PASS winners=1/1 failures=0"));
    assert_non_null (strstr (out, " failures="));
    free (out);
    char *md = s_read (rep, "report.md"), *js = s_read (rep, "report.json"), *html = s_read (rep, "report.html");
    assert_non_null (strstr (md, "# Report for batch B000001"));
    assert_non_null (strstr (md, "akfleet-report: batch B000001 verdict=PASS"));
    json_t *j = json_loads (js, 0, NULL);
    assert_non_null (j);
    assert_string_equal (json_string_value (json_object_get (json_object_get (j, "verdict"), "verdict")), "PASS");
    s_check_timings (j);
    json_decref (j);
    assert_non_null (strstr (html, "id=\"chart-speedup\""));
    /* The batch's GPU timing share, in every form. */
    assert_non_null (strstr (html, "id=\"gpu-timing\""));
    assert_non_null (strstr (md, "GPU timing share: **"));
    j = json_loads (js, 0, NULL);
    double share = json_number_value (json_object_get (json_object_get (j, "gpu_timing"), "share"));
    assert_true (share > 0 && share <= 1);
    json_decref (j);
    assert_null (strstr (html, "<script"));
    free (md);
    free (js);
    free (html);

    /* profiles: the candidate won both workloads, so install has winners */
    rc = ak_test_akctl (&s_c, &out, "profile install B000001 --profile prod 2>&1");
    if (rc != 0)
        ak_test_cluster_dump (&s_c, NULL);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "into profile prod from batch B000001"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile install B000001 --profile prod 2>&1"), 1);
    assert_non_null (strstr (out, "--replace"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile install B000001 --profile prod --replace"), 0);
    char *pkg = ak_sprintf ("%s/pkg", s_c.dir);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile export prod '%s'", pkg), 0);
    assert_int_equal (ak_test_runf (NULL, "cd '%s' && sha256sum -c --quiet SHA256SUMS", pkg), 0);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile import '%s' --as copy", pkg), 0);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile list"), 0);
    assert_non_null (strstr (out, "copy"));
    free (out);
    assert_int_equal (ak_test_runf (NULL, "f=$(ls '%s'/sources/*.c | head -1) && echo '/* x */' >> \"$f\"", pkg), 0);
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile import '%s' --as copy2 2>&1", pkg), 2);
    assert_non_null (strstr (out, "modified"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "profile show copy2 2>/dev/null"), 4);
    free (pkg);
    ak_test_cluster_shutdown (&s_c, 20000);
    free (manifest);
    free (rep);
    free (store);
    free (demo);
    free (akctl);
}

static int s_teardown (void **state)
{
    ak_test_cluster_teardown (&s_c);
    return 0;
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_report_and_profiles, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
