/*  tests/unit/test_log.c: common/log.c under journald (issue 21): when
    $JOURNAL_STREAM names stderr's device and inode, every line starts with
    its syslog priority and carries no time stamp; a variable that names
    another file, or is malformed, changes nothing.  Each case runs in a
    child whose stderr is a file, so this binary's own stderr is untouched. */
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* How the child sets $JOURNAL_STREAM for its stderr file. */
typedef enum { S_MATCH, S_OTHER_INODE, S_UNSET, S_TEXT } s_env_t;

/*  Runs one child that points stderr at a fresh file, sets the variable
    (S_TEXT: text as is), logs one line per level at level debug under
    ident, and returns what it wrote (caller frees). */
static char *s_log_in_child (s_env_t how, const char *text, const char *ident)
{
    char *dir = ak_test_tmpdir ("log");
    assert_non_null (dir);
    char *path = ak_sprintf ("%s/stderr", dir);
    fflush (stderr);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2 (fd, STDERR_FILENO) < 0)
            _exit (10);
        struct stat st;
        if (fstat (STDERR_FILENO, &st) != 0)
            _exit (11);
        char env[96];
        switch (how) {
            case S_MATCH:
                snprintf (env, sizeof env, "%llu:%llu", (unsigned long long) st.st_dev,
                          (unsigned long long) st.st_ino);
                setenv ("JOURNAL_STREAM", env, 1);
                break;
            case S_OTHER_INODE:
                snprintf (env, sizeof env, "%llu:%llu", (unsigned long long) st.st_dev,
                          (unsigned long long) st.st_ino + 1);
                setenv ("JOURNAL_STREAM", env, 1);
                break;
            case S_UNSET:
                unsetenv ("JOURNAL_STREAM");
                break;
            case S_TEXT:
                setenv ("JOURNAL_STREAM", text, 1);
                break;
        }
        ak_log_check_journal ();
        ak_log_set_ident (ident);
        ak_log_set_level (AK_LOG_DEBUG);
        ak_debug ("debug line %d", 1);
        ak_info ("info line %s", "two");
        ak_warn ("warn line %u", 3u);
        ak_error ("error line %.3s", "four");
        _exit (0);
    }
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    char *cmd = ak_sprintf ("cat '%s'", path);
    char *out = NULL;
    assert_int_equal (ak_test_run (cmd, &out), 0);
    free (cmd);
    free (path);
    ak_test_rmtree (dir);
    free (dir);
    return out;
}

/* The program's own name, the ident journald shows anyway. */
extern char *program_invocation_short_name;

static void test_journal_priorities (void **state)
{
    (void) state;
    char *out = s_log_in_child (S_MATCH, NULL, program_invocation_short_name);
    printf ("%s", out);
    assert_string_equal (out,
                         "<7>DEBUG debug line 1\n"
                         "<6>INFO info line two\n"
                         "<4>WARN warn line 3\n"
                         "<3>ERROR error line fou\n");
    free (out);
}

/* A child process with its own ident (the worker's executors) keeps its
   name and pid: journald would show the daemon's. */
static void test_journal_other_ident (void **state)
{
    (void) state;
    char *out = s_log_in_child (S_MATCH, NULL, "akworker-exec");
    printf ("%s", out);
    assert_non_null (strstr (out, "<6>akworker-exec["));
    assert_non_null (strstr (out, "] INFO info line two\n"));
    assert_non_null (strstr (out, "<3>akworker-exec["));
    assert_int_equal (strncmp (out, "<7>akworker-exec[", 17), 0);
    free (out);
}

/* Not the journal: the usual "<time>Z ident[pid] LEVEL" lines, no prefix. */
static void test_not_journal (void **state)
{
    (void) state;
    const char *bad[] = { "", "12", "12:", ":34", "abc:def", "1:2:3", "-1:5", " 1:2",
                          "99999999999999999999999:1", "1:99999999999999999999999" };
    for (int k = 0; k < 3 + (int) (sizeof bad / sizeof bad[0]); k++) {
        char *out = k == 0 ? s_log_in_child (S_OTHER_INODE, NULL, "akcoord")
                  : k == 1 ? s_log_in_child (S_UNSET, NULL, "akcoord")
                  : k == 2 ? s_log_in_child (S_TEXT, "0:0", "akcoord")
                  : s_log_in_child (S_TEXT, bad[k - 3], "akcoord");
        printf ("case %d: %s", k, out);
        assert_null (strstr (out, "<"));
        assert_non_null (strstr (out, "Z akcoord["));
        assert_non_null (strstr (out, "] ERROR error line fou\n"));
        /* a time stamp first: 2026-11-29T18:31:13.123Z */
        assert_true (strlen (out) > 24 && out[4] == '-' && out[10] == 'T' && out[23] == 'Z');
        free (out);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_journal_priorities),
        cmocka_unit_test (test_journal_other_ident),
        cmocka_unit_test (test_not_journal),
    };
    return ak_test_exit (cmocka_run_group_tests (tests, NULL, NULL));
}
