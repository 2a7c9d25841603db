/*  tests/integration/test_akctl.c: akctl's promises that need no coordinator.

    - `--help` of every verb (and `akctl --help`, `akctl help VERB`) exits 0
      and talks about that verb;
    - bad usage exits 2 with a usage line;
    - a coordinator that is not there is exit code 3, quickly;
    - `submit` of an invalid manifest exits 2 and names the file and the
      field, without contacting anybody. */
#include "support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static const char *const s_verbs[] = {
    "submit", "status", "list", "watch", "show", "receipts", "report", "profile", "verify", "keys",
    "workers", "cancel", "resume", "retry", "stats", "shutdown", "demo", "help"
};
#define S_NVERBS (sizeof s_verbs / sizeof s_verbs[0])

/*  Runs `akctl ARGS 2>&1` and returns the exit code; *out_p the output. */
static int s_akctl (const char *args, char **out_p)
{
    char *bin = ak_test_bin ("akctl");
    char *cmd = ak_sprintf ("'%s' %s 2>&1", bin, args);
    int code = ak_test_run (cmd, out_p);
    free (cmd);
    free (bin);
    return code;
}

/*  A loopback port nothing listens on: bound and closed again. */
static int s_dead_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in sa;
    memset (&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (bind (fd, (struct sockaddr *) &sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    assert_int_equal (getsockname (fd, (struct sockaddr *) &sa, &len), 0);
    close (fd);
    return ntohs (sa.sin_port);
}

static double s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

static void test_main_help (void **state)
{
    (void) state;
    char *out = NULL;
    assert_int_equal (s_akctl ("--help", &out), 0);
    for (size_t i = 0; i < S_NVERBS; i++)
        assert_non_null (strstr (out, s_verbs[i]));
    /* The exit codes are part of the contract, so the help lists them. */
    assert_non_null (strstr (out, "Exit codes"));
    assert_non_null (strstr (out, "3  the coordinator did not answer"));
    free (out);
    assert_int_equal (s_akctl ("help", &out), 0);
    assert_non_null (strstr (out, "usage: akctl"));
    free (out);
}

/*  The main help lists every verb with its whole synopsis: the one the
    verb's own --help prints after "usage: akctl [OPTIONS] " (a 64-byte
    buffer once cut profile's and gate's), and the two verbs that parse
    their own arguments with theirs. */
static void test_main_help_synopses (void **state)
{
    (void) state;
    char *main_help = NULL;
    assert_int_equal (s_akctl ("--help", &main_help), 0);
    for (size_t i = 0; i < S_NVERBS; i++) {
        char *out = NULL;
        char *args = ak_sprintf ("%s --help", s_verbs[i]);
        assert_int_equal (s_akctl (args, &out), 0);
        const char *at = strstr (out, "usage: akctl [OPTIONS] ");
        if (!at)
            fail_msg ("akctl %s: no usage line:\n%s", args, out);
        at += strlen ("usage: akctl [OPTIONS] ");
        char *synopsis = ak_sprintf ("  %.*s\n", (int) strcspn (at, "\n"), at);
        /* a short synopsis is padded to its summary's column */
        char *padded = ak_sprintf ("  %-20.*s ", (int) strcspn (at, "\n"), at);
        if (!strstr (main_help, synopsis) && !strstr (main_help, padded))
            fail_msg ("akctl --help does not show the whole synopsis of %s (%.*s):\n%s", s_verbs[i],
                      (int) strcspn (at, "\n"), at, main_help);
        free (padded);
        free (synopsis);
        free (args);
        free (out);
    }
    assert_non_null (strstr (main_help, "  discover --out DIR [OPTIONS] -- CMD [ARGS...]\n"));
    assert_non_null (strstr (main_help,
                             "  gate --profile DIR [--steps N] [--tolerance-file F] -- python3 SCRIPT [ARGS...]\n"));
    free (main_help);
}

static void test_verb_help (void **state)
{
    (void) state;
    for (size_t i = 0; i < S_NVERBS; i++) {
        char *out = NULL;
        char *args = ak_sprintf ("%s --help", s_verbs[i]);
        int code = s_akctl (args, &out);
        char *usage = ak_sprintf ("usage: akctl [OPTIONS] %s", s_verbs[i]);
        if (code != 0 || !strstr (out, usage))
            fail_msg ("akctl %s: exit %d, output:\n%s", args, code, out);
        free (out);
        free (args);

        args = ak_sprintf ("help %s", s_verbs[i]);
        code = s_akctl (args, &out);
        if (code != 0 || !strstr (out, usage))
            fail_msg ("akctl %s: exit %d, output:\n%s", args, code, out);
        free (out);
        free (args);
        free (usage);
    }
    /* Help wins over everything else on the line, even a coordinator that
       is not there. */
    char *out = NULL;
    assert_int_equal (s_akctl ("--coordinator tcp://127.0.0.1:1 report -h B000001", &out), 0);
    assert_non_null (strstr (out, "--markdown"));
    free (out);
    assert_int_equal (s_akctl ("demo --help", &out), 0);
    assert_non_null (strstr (out, "--workers N"));
    assert_non_null (strstr (out, "--keep"));
    free (out);
    assert_int_equal (s_akctl ("submit --help", &out), 0);
    assert_non_null (strstr (out, "--wait"));
    free (out);
}

static void test_bad_usage (void **state)
{
    (void) state;
    static const char *const bad[] = {
        "",                                 /* no verb */
        "frobnicate",                       /* unknown verb */
        "list --frobnicate",                /* unknown option */
        "--markdown report B1",             /* verb option before the verb */
        "status --markdown B1",             /* option of another verb */
        "show",                             /* missing argument */
        "receipts",
        "report",
        "cancel",
        "watch",
        "submit",
        "list extra",                       /* too many arguments */
        "shutdown now",
        "status B1 B2",
        "--timeout 0 list",                 /* bad values */
        "--timeout soon list",
        "--timeout",
        "list --json=yes",
        "demo --workers 0",
        "demo --workers 65",
        "help frobnicate",
        "--coordinator not-an-endpoint list",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out = NULL;
        int code = s_akctl (bad[i], &out);
        if (code != 2 || !strstr (out, "akctl"))
            fail_msg ("akctl %s: exit %d (want 2), output:\n%s", bad[i], code, out);
        free (out);
    }
    char *out = NULL;
    assert_int_equal (s_akctl ("list --frobnicate", &out), 2);
    assert_non_null (strstr (out, "unknown option '--frobnicate'"));
    assert_non_null (strstr (out, "usage: akctl [OPTIONS] list"));
    free (out);
}

static void test_unreachable (void **state)
{
    (void) state;
    int port = s_dead_port ();
    static const char *const verbs[] = { "list", "status", "status B000001", "workers", "stats",
                                         "show B000001.T0001", "report B000001", "watch B000001" };
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        char *out = NULL;
        char *args = ak_sprintf ("--coordinator tcp://127.0.0.1:%d --timeout 300 %s", port, verbs[i]);
        double t0 = s_now_ms ();
        int code = s_akctl (args, &out);
        double took = s_now_ms () - t0;
        if (code != 3 || !strstr (out, "no answer from tcp://127.0.0.1:") || !strstr (out, "300 ms"))
            fail_msg ("akctl %s: exit %d (want 3), output:\n%s", args, code, out);
        /* 300 ms bound plus process start; generous for sanitizer builds. */
        if (took > 5000)
            fail_msg ("akctl %s took %.0f ms", args, took);
        free (out);
        free (args);
    }
    /* $AK_COORDINATOR is the endpoint when --coordinator is not given. */
    char *out = NULL;
    char *args = ak_sprintf ("--timeout 200 list");
    char *bin = ak_test_bin ("akctl");
    char *cmd = ak_sprintf ("AK_COORDINATOR=tcp://127.0.0.1:%d '%s' %s 2>&1", port, bin, args);
    assert_int_equal (ak_test_run (cmd, &out), 3);
    char *want = ak_sprintf ("tcp://127.0.0.1:%d", port);
    assert_non_null (strstr (out, want));
    free (want);
    free (cmd);
    free (bin);
    free (args);
    free (out);
}

static void test_invalid_manifest (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("akctl");
    assert_non_null (dir);
    /* A dead port: submit must fail on the manifest before any request. */
    int port = s_dead_port ();
    struct {
        const char *text;
        const char *field;              /* what the message must name */
    } cases[] = {
        { "{\"schema_version\":1,\"name\":\"bad\",\"targets\":[\"host\"],"
          "\"policy\":{\"max_attempts\":0},\"ops\":[]}", "policy.max_attempts" },
        { "{\"schema_version\":1,\"name\":\"bad\",\"targets\":[\"host\"],"
          "\"policy\":{\"threshhold\":0.1},\"ops\":[]}", "policy.threshhold" },
        { "{\"schema_version\":1,\"name\":\"bad\",\"targets\":[\"host\"],"
          "\"ops\":[{\"spec\":\"no-such-spec.json\"}]}", "ops[0].spec" },
        { "{\"schema_version\":1,\"name\":\"bad\",\"targets\":[],\"ops\":[]}", "targets" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf (name, sizeof name, "bad%zu.json", i);
        char *path = ak_test_write (dir, name, cases[i].text);
        assert_non_null (path);
        char *args = ak_sprintf ("--coordinator tcp://127.0.0.1:%d --timeout 300 submit '%s'", port, path);
        char *out = NULL;
        int code = s_akctl (args, &out);
        if (code != 2 || !strstr (out, path) || !strstr (out, cases[i].field))
            fail_msg ("akctl %s: exit %d (want 2 naming %s and %s), output:\n%s", args, code,
                      path, cases[i].field, out);
        free (out);
        free (args);
        free (path);
    }
    /* A file that is not there is invalid input too. */
    char *missing = ak_sprintf ("%s/absent.json", dir);
    char *args = ak_sprintf ("--coordinator tcp://127.0.0.1:%d submit '%s'", port, missing);
    char *out = NULL;
    assert_int_equal (s_akctl (args, &out), 2);
    assert_non_null (strstr (out, missing));
    free (out);
    free (args);
    free (missing);
    ak_test_rmtree (dir);
    free (dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_main_help),
        cmocka_unit_test (test_main_help_synopses),
        cmocka_unit_test (test_verb_help),
        cmocka_unit_test (test_bad_usage),
        cmocka_unit_test (test_unreachable),
        cmocka_unit_test (test_invalid_manifest),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
