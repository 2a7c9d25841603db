/*  tests/integration/test_packages.c: the Debian packages (issue 21,
    item 3), built from the tree this test runs in (no rebuild: cpack
    installs what is built) into a scratch directory:

    - cpack makes akfleet-common, akfleet-coordinator, akfleet-worker,
      akfleet-ctl and libakprofile-dev;
    - every library a packaged binary links (its DT_NEEDED) belongs to a
      Debian package its package Depends on (dpkg -S), sanitizer and
      compiler runtimes aside;
    - `dpkg -x` of all of them into a scratch root: the systemd units'
      ExecStart names a binary that the same package installs, at the path
      the unit says; akprofile.pc and the .pth name the installed paths;
    - the installed binaries answer --version, and run: a coordinator and
      a worker from the scratch root start under the installed `akctl
      demo`, which finds its batch in the installed catalog beside itself
      (not in the source tree), submits it, and stops cleanly on SIGINT. */
#include "support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static char *s_scratch;

static int s_teardown (void **state)
{
    (void) state;
    if (s_scratch && !getenv ("AK_TEST_KEEP"))
        ak_test_rmtree (s_scratch);
    free (s_scratch);
    s_scratch = NULL;
    return 0;
}

static const char *s_packages[] = {
    "akfleet-common", "akfleet-coordinator", "akfleet-worker", "akfleet-ctl", "libakprofile-dev",
};
#define S_NPACKAGES (sizeof s_packages / sizeof s_packages[0])

/* The one PKGS/NAME_*.deb (caller frees); fails the test otherwise. */
static char *s_deb (const char *pkgs, const char *name)
{
    char *out = NULL;
    assert_int_equal (ak_test_runf (&out, "ls '%s'/%s_*.deb", pkgs, name), 0);
    char *nl = strchr (out, '\n');
    assert_non_null (nl);
    *nl = '\0';
    assert_null (strchr (nl + 1, '\n'));
    return out;
}

/*  check-deps.sh TMP DEB BIN [DEB BIN ...]: each DT_NEEDED library of
    each BIN is in a Debian package that its DEB depends on.  One dpkg -S
    for all of them (each call reads dpkg's whole database). */
static const char s_check_deps[] =
    "set -eu\n"
    "tmp=$1; shift\n"
    ": > \"$tmp/needed\"\n"
    "i=0\n"
    "while [ $# -ge 2 ]; do\n"
    "    deb=$1; bin=$2; shift 2; i=$((i + 1))\n"
    "    dpkg-deb -f \"$deb\" Depends | tr ',|' '\\n\\n' | sed 's/(.*//; s/ //g' > \"$tmp/deps.$i\"\n"
    "    ldd \"$bin\" > \"$tmp/ldd\"\n"
    "    for so in $(readelf -d \"$bin\" | sed -n 's/.*(NEEDED).*\\[\\(.*\\)\\]/\\1/p'); do\n"
    "        case $so in libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|ld-linux*|libasan.so.*|libubsan.so.*|libgcc_s.so.*) continue ;; esac\n"
    "        path=$(awk -v s=\"$so\" '$1 == s { print $3 }' \"$tmp/ldd\")\n"
    "        [ -n \"$path\" ] || { echo \"$bin: $so not found by ldd\"; exit 1; }\n"
    "        echo \"$i $deb $bin $so $(readlink -f \"$path\")\" >> \"$tmp/needed\"\n"
    "    done\n"
    "done\n"
    "paths=$(awk '{ print $5; sub(\"^/usr\", \"\", $5); print $5 }' \"$tmp/needed\" | sort -u)\n"
    "dpkg -S $paths > \"$tmp/owners\" 2>/dev/null || true\n"
    "while read -r i deb bin so real; do\n"
    "    pkg=$(awk -F': ' -v p=\"$real\" -v q=\"${real#/usr}\" '$2 == p || $2 == q { print $1; exit }' \"$tmp/owners\" | cut -d: -f1)\n"
    "    if [ -z \"$pkg\" ]; then echo \"$bin: $so ($real) belongs to no Debian package\"; exit 1; fi\n"
    "    if ! grep -qx \"$pkg\" \"$tmp/deps.$i\"; then\n"
    "        echo \"$bin links $so from $pkg, which $deb does not depend on: $(cat \"$tmp/deps.$i\" | tr '\\n' ' ')\"; exit 1\n"
    "    fi\n"
    "    echo \"${bin##*/}: $so -> $pkg, a dependency of ${deb##*/}\"\n"
    "done < \"$tmp/needed\"\n";

static const char *s_demo_log;

static bool s_demo_submitted (void *arg)
{
    (void) arg;
    char *text = ak_test_read (s_demo_log);
    bool yes = strstr (text, "  submitted  batch") != NULL;
    free (text);
    return yes;
}

/* The first word after "ExecStart=" in the unit file (caller frees). */
static char *s_exec_start (const char *unit_path)
{
    char *text = ak_test_read (unit_path);
    char *p = strstr (text, "\nExecStart=");
    assert_non_null (p);
    p += strlen ("\nExecStart=");
    size_t n = strcspn (p, " \t\n");
    char *path = strndup (p, n);
    free (text);
    return path;
}

static void test_packages (void **state)
{
    (void) state;
    const char *bindir = getenv ("AK_BIN_DIR");
    assert_non_null (bindir);
    char *build = ak_sprintf ("%s/..", bindir);
    s_scratch = ak_test_tmpdir ("packages");
    char *pkgs = ak_path_join (s_scratch, "pkgs"), *root = ak_path_join (s_scratch, "root");

    /* 1. the packages, from the build tree as it is */
    int rc = ak_test_runf (NULL, "cd '%s' && cpack -G DEB --config '%s/CPackConfig.cmake' -B '%s' > cpack.log 2>&1"
                           " || { cat cpack.log; exit 1; }", s_scratch, build, pkgs);
    assert_int_equal (rc, 0);
    char *debs[S_NPACKAGES];
    for (size_t i = 0; i < S_NPACKAGES; i++) {
        debs[i] = s_deb (pkgs, s_packages[i]);
        assert_int_equal (ak_test_runf (NULL, "dpkg-deb -f '%s' Package Version Architecture Depends", debs[i]), 0);
        assert_int_equal (ak_test_runf (NULL, "mkdir -p '%s' && dpkg -x '%s' '%s'", root, debs[i], root), 0);
    }

    /* 2. what the binaries link is what the packages depend on */
    char *script = ak_test_write (s_scratch, "check-deps.sh", s_check_deps);
    const struct { size_t pkg; const char *file; } bins[] = {
        { 1, "usr/bin/akcoord" }, { 2, "usr/bin/akworker" }, { 3, "usr/bin/akctl" },
        { 3, "usr/bin/akload" }, { 4, "usr/lib/libakprofile.so" },
#if AK_HAVE_CUDA
        /* the CUDA backend's compile helper, which akworker runs from its own folder */
        { 2, "usr/bin/ak-nvrtc" },
#endif
    };
    char *cmd = ak_sprintf ("sh '%s' '%s'", script, s_scratch);
    for (size_t i = 0; i < sizeof bins / sizeof bins[0]; i++) {
        char *next = ak_sprintf ("%s '%s' '%s/%s'", cmd, debs[bins[i].pkg], root, bins[i].file);
        free (cmd);
        cmd = next;
    }
    assert_int_equal (ak_test_runf (NULL, "%s", cmd), 0);
    free (cmd);

    /* 3. the units start what their package installs */
    const struct { size_t pkg; const char *unit; const char *bin; } units[] = {
        { 1, "usr/lib/systemd/system/akcoord.service", "/usr/bin/akcoord" },
        { 2, "usr/lib/systemd/system/akworker.service", "/usr/bin/akworker" },
    };
    for (size_t i = 0; i < 2; i++) {
        char *unit = ak_path_join (root, units[i].unit);
        char *exec = s_exec_start (unit);
        print_message ("%s: ExecStart %s\n", units[i].unit, exec);
        assert_string_equal (exec, units[i].bin);
        char *installed = ak_sprintf ("%s%s", root, exec);
        assert_int_equal (access (installed, X_OK), 0);
        /* in the unit's own package, with the unit */
        assert_int_equal (ak_test_runf (NULL, "dpkg -c '%s' > '%s/list' && grep -q ' \\.%s$' '%s/list' && "
                                        "grep -q ' \\./%s$' '%s/list'", debs[units[i].pkg], s_scratch, exec,
                                        s_scratch, units[i].unit, s_scratch), 0);
        assert_int_equal (ak_test_runf (NULL, "grep -qx 'Type=notify' '%s'", unit), 0);
        free (installed);
        free (exec);
        free (unit);
    }
    char *out = NULL;
    assert_int_equal (ak_test_runf (&out, "PKG_CONFIG_SYSROOT_DIR='%s' PKG_CONFIG_LIBDIR='%s/usr/lib/pkgconfig' "
                                    "pkg-config --cflags --libs akprofile", root, root), 0);
    char *want = ak_sprintf ("-I%s/usr/include -L%s/usr/lib -lakprofile", root, root);
    assert_non_null (strstr (out, want));
    free (want);
    free (out);
    assert_int_equal (ak_test_runf (NULL, "printf '#include <akprofile.h>\\nint main (void) { return 0; }\\n' > '%s/t.c' && "
                                    "cc -std=c11 -Wall -Werror -c '%s/t.c' -o '%s/t.o' -I'%s/usr/include'",
                                    s_scratch, s_scratch, s_scratch, root), 0);
    assert_int_equal (ak_test_runf (&out, "cat '%s/usr/lib/python3/dist-packages/akfleet.pth'", root), 0);
    assert_string_equal (out, "/usr/share/akfleet/python\n");
    free (out);
    char *init = ak_sprintf ("%s/usr/share/akfleet/python/akprofile/__init__.py", root);
    assert_int_equal (access (init, R_OK), 0);
    free (init);

    /* 4. the installed binaries run */
    const char *progs[] = { "akcoord", "akworker", "akctl", "akload" };
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal (ak_test_runf (&out, "'%s/usr/bin/%s' --version", root, progs[i]), 0);
        char *line = ak_sprintf ("%s %s\n", progs[i], AK_VERSION);
        assert_string_equal (out, line);
        free (line);
        free (out);
    }
    /* akctl demo from the scratch root: its coordinator and worker are
       the installed ones beside it, its batch the installed catalog's
       (without $AK_SOURCE_DIR it looks beside itself before the source
       tree it was built from).  Stopped (SIGINT) once its batch is in. */
    char *real_root = realpath (root, NULL);
    assert_non_null (real_root);
    char *demo_dir = ak_path_join (s_scratch, "demo");
    char *demo_log = ak_path_join (s_scratch, "demo.log");
    char *akctl = ak_sprintf ("%s/usr/bin/akctl", root);
    char *argv[] = { akctl, "demo", "--workers", "1", "--dir", demo_dir, NULL };
    char *saved_src = ak_strdup (getenv ("AK_SOURCE_DIR"));
    unsetenv ("AK_SOURCE_DIR");
    pid_t demo = ak_test_spawn (argv, demo_log);
    if (saved_src)
        setenv ("AK_SOURCE_DIR", saved_src, 1);
    free (saved_src);
    assert_true (demo > 0);
    s_demo_log = demo_log;
    bool submitted = ak_test_wait (s_demo_submitted, NULL, 180000);
    int status = ak_test_stop (demo, SIGINT, 120000);
    char *text = ak_test_read (demo_log);
    print_message ("%s", text);
    assert_true (submitted);
    char *want_batch = ak_sprintf ("  batch      %s/usr/share/akfleet/kernels/batches/demo.json\n", real_root);
    assert_non_null (strstr (text, want_batch));
    assert_non_null (strstr (text, "demo: shut down cleanly"));
    assert_true (WIFEXITED (status));
    assert_true (WEXITSTATUS (status) == 130 || WEXITSTATUS (status) == 0);
    free (want_batch);
    free (text);
    free (akctl);
    free (demo_dir);
    free (demo_log);
    s_demo_log = NULL;
    free (real_root);

    for (size_t i = 0; i < S_NPACKAGES; i++)
        free (debs[i]);
    free (script);
    free (pkgs);
    free (root);
    free (build);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_packages, s_teardown),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
