/*  tests/integration/test_report_html.c: the morning report and profiles
    through akctl, end to end.

    Runs `akctl demo --keep` (a private coordinator and two workers tune the
    built-in host batch), starts akcoord again on the demo's store, then:
    - `akctl report B000001 --out DIR` prints the summary line scripts grep
      and writes report.md, report.json and report.html;
    - when /usr/bin/chromium exists, renders report.html headlessly
      (--dump-dom) and checks the three charts are in the DOM (else says
      SKIP and why);
    - `akctl profile install` installs the promoted winners (a second install
      without --replace is refused, exit 1), `export` writes a package that
      `import --as` takes, and a package with a changed source is refused
      (exit 2) before anything is sent. */
#include "support.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "util.h"

static struct {
    char *dir, *akctl;
    pid_t coord;
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

static bool s_answers (void *arg)
{
    return s_run (NULL, "%s --timeout 500 stats > /dev/null 2>&1", s_ctx.akctl) == 0;
}

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

static void test_report_and_profiles (void **state)
{
    s_ctx.dir = ak_test_tmpdir ("report");
    char *akctl = ak_test_bin ("akctl");
    char *demo = ak_sprintf ("%s/demo", s_ctx.dir);
    assert_int_equal (s_run (NULL, "'%s' demo --dir '%s' --keep > '%s/demo.out' 2>&1", akctl, demo, s_ctx.dir), 0);

    char *coord = ak_test_bin ("akcoord");
    char *store = ak_sprintf ("%s/store", demo);
    char *wep = ak_sprintf ("ipc://%s/w.ipc", s_ctx.dir), *cep = ak_sprintf ("ipc://%s/c.ipc", s_ctx.dir);
    char *log = ak_sprintf ("%s/akcoord.log", s_ctx.dir);
    char *argv[] = { coord, "--store", store, "--workers", wep, "--clients", cep, NULL };
    s_ctx.coord = ak_test_spawn_coord (argv, log);
    assert_true (s_ctx.coord > 0);
    s_ctx.akctl = ak_sprintf ("'%s' --coordinator %s --timeout 10000", akctl, cep);
    assert_true (ak_test_wait (s_answers, NULL, 20000));

    /* the report */
    char *out = NULL, *rep = ak_sprintf ("%s/rep", s_ctx.dir);
    int rc = s_run (&out, "%s report B000001 --out '%s' 2>/dev/null", s_ctx.akctl, rep);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "akfleet-report: batch B000001 verdict=PASS winners="));
    assert_non_null (strstr (out, " failures="));
    free (out);
    char *md = s_read (rep, "report.md"), *js = s_read (rep, "report.json"), *html = s_read (rep, "report.html");
    assert_non_null (strstr (md, "# Report for batch B000001"));
    assert_non_null (strstr (md, "akfleet-report: batch B000001 verdict=PASS"));
    json_t *j = json_loads (js, 0, NULL);
    assert_non_null (j);
    assert_string_equal (json_string_value (json_object_get (json_object_get (j, "verdict"), "verdict")), "PASS");
    json_decref (j);
    assert_non_null (strstr (html, "id=\"chart-speedup\""));
    assert_null (strstr (html, "<script"));
    free (md);
    free (js);
    free (html);

    if (access ("/usr/bin/chromium", X_OK) == 0) {
        char *dom = NULL;
        rc = s_run (&dom, "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu "
                    "--disable-background-networking --disable-component-update --disable-sync "
                    "--no-first-run --user-data-dir='%s/chromium' --dump-dom 'file://%s/report.html' 2>/dev/null",
                    s_ctx.dir, rep);
        assert_int_equal (rc, 0);
        const char *ids[] = { "chart-speedup", "chart-phases", "chart-failures" };
        for (int i = 0; i < 3; i++) {
            char *needle = ak_sprintf ("id=\"%s\"", ids[i]);
            if (!strstr (dom, needle))
                fail_msg ("the rendered DOM has no %s", needle);
            free (needle);
        }
        assert_non_null (strstr (dom, "<rect"));
        assert_non_null (strstr (dom, "verdict PASS"));
        free (dom);
    }
    else
        print_message ("SKIP: headless render of report.html: /usr/bin/chromium is not installed "
                       "(AK_OPTIONAL_DEPS_INSTALL=1 ops/test.sh or ops/setup.sh installs it)\n");

    /* profiles */
    rc = s_run (&out, "%s profile install B000001 --profile prod 2>&1", s_ctx.akctl);
    if (rc == 0) {
        assert_non_null (strstr (out, "into profile prod from batch B000001"));
        free (out);
        assert_int_equal (s_run (&out, "%s profile install B000001 --profile prod 2>&1", s_ctx.akctl), 1);
        assert_non_null (strstr (out, "--replace"));
        free (out);
        assert_int_equal (s_run (NULL, "%s profile install B000001 --profile prod --replace", s_ctx.akctl), 0);
        char *pkg = ak_sprintf ("%s/pkg", s_ctx.dir);
        assert_int_equal (s_run (NULL, "%s profile export prod '%s'", s_ctx.akctl, pkg), 0);
        assert_int_equal (s_run (NULL, "cd '%s' && sha256sum -c --quiet SHA256SUMS", pkg), 0);
        assert_int_equal (s_run (NULL, "%s profile import '%s' --as copy", s_ctx.akctl, pkg), 0);
        assert_int_equal (s_run (&out, "%s profile list", s_ctx.akctl), 0);
        assert_non_null (strstr (out, "copy"));
        free (out);
        assert_int_equal (s_run (NULL, "f=$(ls '%s'/sources/*.c | head -1) && echo '/* x */' >> \"$f\"", pkg), 0);
        assert_int_equal (s_run (&out, "%s profile import '%s' --as copy2 2>&1", s_ctx.akctl, pkg), 2);
        assert_non_null (strstr (out, "modified"));
        free (out);
        assert_int_equal (s_run (NULL, "%s profile show copy2 2>/dev/null", s_ctx.akctl), 4);
        free (pkg);
    }
    else {
        /* host timing is noisy: a run may promote nothing, which install says */
        assert_int_equal (rc, 2);
        assert_non_null (strstr (out, "no promoted winner"));
        free (out);
    }
    assert_int_equal (s_run (NULL, "%s shutdown", s_ctx.akctl), 0);
    assert_int_equal (ak_test_stop (s_ctx.coord, 0, 20000), 0);
    s_ctx.coord = 0;
    free (rep);
    free (log);
    free (wep);
    free (cep);
    free (store);
    free (coord);
    free (demo);
    free (akctl);
}

static int s_teardown (void **state)
{
    if (s_ctx.coord > 0)
        ak_test_stop (s_ctx.coord, SIGKILL, 5000);
    if (s_ctx.dir)
        ak_test_rmtree (s_ctx.dir);
    free (s_ctx.dir);
    free (s_ctx.akctl);
    return 0;
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_report_and_profiles, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
