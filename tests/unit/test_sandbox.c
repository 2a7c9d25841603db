/*  tests/unit/test_sandbox.c: the confinement primitives (worker/sandbox.c):
    the include scan every compile starts with, the seccomp filter of a
    host kernel's process and Landlock, each applied in a forked child
    that reports what it was allowed. */
#include "support.h"
#include "worker/sandbox.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------- include scan */

static void s_ok (const char *src)
{
    ak_err_t err = { 0 };
    int rc = ak_sandbox_check_includes (src, strlen (src), &err);
    if (rc)
        fprintf (stderr, "refused: %s\n  (%s)\n", src, err.msg);
    assert_int_equal (rc, 0);
}

static void s_refused (const char *src, const char *in_msg)
{
    ak_err_t err = { 0 };
    int rc = ak_sandbox_check_includes (src, strlen (src), &err);
    if (rc != AK_EINVAL)
        fprintf (stderr, "accepted: %s\n", src);
    assert_int_equal (rc, AK_EINVAL);
    if (!strstr (err.msg, in_msg))
        fprintf (stderr, "message: %s\n  wanted: %s\n", err.msg, in_msg);
    assert_non_null (strstr (err.msg, in_msg));
}

static void test_includes_allowed (void **state)
{
    (void) state;
    s_ok ("#include <math.h>\n#include <sys/types.h>\n#include \"ak_kernel.h\"\nvoid f (void) {}\n");
    s_ok ("// #include \"/etc/shadow\"\n/* #include </etc/shadow> */\nint x;\n");
    s_ok ("const char *s = \"#include \\\"/etc/shadow\\\"\";\n");
    s_ok ("#includes_nothing\n#define include 1\n");
    s_ok ("#include \"a..b.h\"\n#include <x/y.h>\n");
    s_ok ("");
}

static void test_includes_refused (void **state)
{
    (void) state;
    s_refused ("#include \"/etc/shadow\"\n", "source line 1: #include \"/etc/shadow\"");
    s_refused ("int a;\n  #  include </etc/shadow>\n", "source line 2");
    s_refused ("#include \"../../secret.h\"\n", "'..'");
    s_refused ("#include \"a/../../b.h\"\n", "'..'");
    s_refused ("#include \"a\\\\b.h\"\n", "backslashes");
    /* what the preprocessor joins or skips does not hide a directive */
    s_refused ("int a;\n#inc\\\nlude \"/etc/shadow\"\n", "source line 2");
    s_refused ("#/* hidden */include \"/etc/shadow\"\n", "/etc/shadow");
    s_refused ("%:include \"/etc/shadow\"\n", "/etc/shadow");
    s_refused ("#include_next </etc/shadow>\n", "#include_next");
    s_refused ("#embed \"/etc/shadow\"\n", "#embed");
    s_refused ("#import \"/etc/shadow\"\n", "#import");
    /* a computed name could be anything */
    s_refused ("#define F \"/etc/shadow\"\n#include F\n", "computed");
    s_refused ("#include \"unterminated\n", "computed or malformed");
    /* the assembler reads files too */
    s_refused ("__asm__ (\".incbin \\\"/etc/shadow\\\"\");\n", ".incbin");
    /* a line after a splice keeps its number */
    s_refused ("int a = \\\n1;\n#include \"/x.h\"\n", "source line 3");
}

/* --------------------------------------------------------- in a child */

/*  Runs fn in a forked child and returns its exit status (fn's return). */
static int s_in_child (int (*fn) (void *), void *arg)
{
    fflush (NULL);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0)
        _exit (fn (arg));
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    if (!WIFEXITED (status))
        fprintf (stderr, "child ended with status 0x%x\n", status);
    assert_true (WIFEXITED (status));
    return WEXITSTATUS (status);
}

/*  Bits of what the filter let through (each a failure). */
static int s_seccomp_child (void *arg)
{
    const char *dir = arg;
    pid_t parent = getppid ();
    if (ak_sandbox_seccomp_kernel (getpid ()) != 0)
        return 100;
    int bad = 0;
    pid_t p = fork ();
    if (p == 0)
        _exit (0);
    if (p >= 0 || errno != EPERM)
        bad |= 1;
    if (kill (parent, 0) == 0 || errno != EPERM)
        bad |= 2;
    if (socket (AF_UNIX, SOCK_STREAM, 0) >= 0 || errno != EPERM)
        bad |= 4;
    char *path = ak_path_join (dir, "w.txt");
    if (open (path, O_WRONLY | O_CREAT, 0600) >= 0 || errno != EPERM)
        bad |= 8;
    if (open (path, O_RDWR) >= 0 || errno != EPERM)
        bad |= 8;
    free (path);
    /* what the harness needs stays allowed */
    int fd = open ("/dev/null", O_RDONLY);
    if (fd < 0)
        bad |= 16;
    else
        close (fd);
    if (kill (getpid (), 0) != 0 || kill (0, 0) != 0)
        bad |= 32;
    /* io_uring would open files past the filter */
    char params[120] = { 0 };
    if (syscall (__NR_io_uring_setup, 1, params) >= 0 || errno != EPERM)
        bad |= 128;
    char *execargs[] = { "/bin/true", NULL };
    execv ("/bin/true", execargs);
    if (errno != EPERM)
        bad |= 64;
    return bad;
}

static void test_seccomp_kernel (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("sbx-sec");
    assert_int_equal (s_in_child (s_seccomp_child, dir), 0);
    char *path = ak_path_join (dir, "w.txt");
    assert_int_not_equal (access (path, F_OK), 0);
    free (path);
    ak_test_rmtree (dir);
    free (dir);
}

typedef struct {
    int         ruleset;
    const char *rw, *outside_file;
} s_ll_t;

static int s_landlock_child (void *arg)
{
    s_ll_t *l = arg;
    if (ak_sandbox_enter (l->ruleset) != 0)
        return 100;
    int bad = 0;
    if (open (l->outside_file, O_RDONLY) >= 0 || errno != EACCES)
        bad |= 1;
    char *in = ak_path_join (l->rw, "ok.txt");
    int fd = open (in, O_WRONLY | O_CREAT, 0600);
    if (fd < 0)
        bad |= 2;
    else
        close (fd);
    free (in);
    fd = open ("/usr/include/stdio.h", O_RDONLY);
    if (fd < 0)
        bad |= 4;
    else
        close (fd);
    return bad;
}

static void test_landlock (void **state)
{
    (void) state;
    const char *why = NULL;
    if (ak_sandbox_landlock_abi (&why) == 0) {
        ak_test_skip_note ("no Landlock here (%s): only its refusal is checked", why);
        int fd = -1;
        ak_err_t err = { 0 };
        assert_int_equal (ak_sandbox_landlock_new (NULL, NULL, &fd, &err), AK_EUNSUPPORTED);
        char desc[512];
        ak_sandbox_limits_t lim = { .nofile = 64 };
        ak_sandbox_describe (&lim, 0, desc, sizeof desc);
        assert_non_null (strstr (desc, "NO landlock"));
        return;
    }
    char *rw = ak_test_tmpdir ("sbx-rw");
    char *outside = ak_test_tmpdir ("sbx-out");
    char *secret = ak_test_write (outside, "secret.txt", "secret\n");
    const char *ro[] = { "/usr", "/no/such/path", NULL };
    const char *rws[] = { rw, NULL };
    s_ll_t l = { .rw = rw, .outside_file = secret };
    ak_err_t err = { 0 };
    assert_int_equal (ak_sandbox_landlock_new (ro, rws, &l.ruleset, &err), 0);
    assert_int_equal (s_in_child (s_landlock_child, &l), 0);
    close (l.ruleset);
    free (secret);
    ak_test_rmtree (rw);
    ak_test_rmtree (outside);
    free (rw);
    free (outside);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_includes_allowed),
        cmocka_unit_test (test_includes_refused),
        cmocka_unit_test (test_seccomp_kernel),
        cmocka_unit_test (test_landlock),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
