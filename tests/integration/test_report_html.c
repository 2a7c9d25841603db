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

static void test_report_and_profiles (void **state)
{
    ak_test_cluster_init (&s_c, "report", false);
    s_c.echo = true;
    char *akctl = ak_test_bin ("akctl");
    char *demo = ak_sprintf ("%s/demo", s_c.dir);
    assert_int_equal (ak_test_runf (NULL, "'%s' demo --dir '%s' --keep > '%s/demo.out' 2>&1", akctl, demo, s_c.dir), 0);

    /* akcoord again, on the demo's store */
    char *store = ak_sprintf ("%s/store", demo);
    ak_test_cluster_coord (&s_c, store, NULL, NULL, 20000);

    /* the report */
    char *out = NULL, *rep = ak_sprintf ("%s/rep", s_c.dir);
    int rc = ak_test_akctl (&s_c, &out, "report B000001 --out '%s' 2>/dev/null", rep);
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
        rc = ak_test_runf (&dom, "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu "
                    "--disable-background-networking --disable-component-update --disable-sync "
                    "--no-first-run --user-data-dir='%s/chromium' --dump-dom 'file://%s/report.html' 2>/dev/null",
                    s_c.dir, rep);
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
        ak_test_skip_note ("headless render of report.html: /usr/bin/chromium is not installed "
                           "(AK_OPTIONAL_DEPS_INSTALL=1 ops/test.sh or ops/setup.sh installs it)");

    /* profiles */
    rc = ak_test_akctl (&s_c, &out, "profile install B000001 --profile prod 2>&1");
    if (rc == 0) {
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
    }
    else {
        /* host timing is noisy: a run may promote nothing, which install says */
        assert_int_equal (rc, 2);
        assert_non_null (strstr (out, "no promoted winner"));
        free (out);
    }
    ak_test_cluster_shutdown (&s_c, 20000);
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
