/*  tests/integration/test_operator_ux.c: what an operator reads (issue 14,
    item 9), on a batch with planted crashing and hanging candidates
    (kernels/testing/crash.c and hang.c) run by two workers:

    - `watch` and `report --out` make the crashes and hangs visible: the
      last line of watch says "crashed 1, hung 1", the verdict line
      "crashed=1 hung=1" (PASS stays what the help says it is);
    - the live bar of `watch` on a terminal is not cut: with the window
      size unknown it fits $COLUMNS (200), in a 60-column window it keeps
      every count and the clock within 59 columns;
    - `profile install B999999` says "no batch 'B999999'" (exit 4) without
      the store's path or LMDB's words;
    - `workers forget ID` refuses a live worker (exit 1), forgets a dead one
      for good (gone after a coordinator restart), and an unknown id is 4;
    - the HTML report (`report --out DIR --from report.json`, from a report
      with a noisy winner): every "±" has its number, every whisker ends
      before its value label, and the charts have an axis; the winner's
      confirmation disagreed, and the page says so (table and bars). */
#include "support.h"

#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static ak_test_cluster_t s_c;

/*  Runs akctl ARGS under a pseudo-terminal of cols columns (0: the size
    unknown) with COLUMNS=columns_env (NULL: unset); returns what it wrote. */
static char *s_on_tty (unsigned short cols, const char *columns_env, const char *args)
{
    struct winsize ws = { .ws_row = cols ? 40 : 0, .ws_col = cols };
    int master = -1;
    pid_t pid = forkpty (&master, NULL, NULL, &ws);
    assert_true (pid >= 0);
    if (pid == 0) {
        if (columns_env)
            setenv ("COLUMNS", columns_env, 1);
        else
            unsetenv ("COLUMNS");
        char *cmd = ak_sprintf ("%s %s", s_c.akctl, args);
        execl ("/bin/sh", "sh", "-c", cmd, (char *) NULL);
        _exit (127);
    }
    size_t cap = 1 << 16, len = 0;
    char *out = ak_malloc (cap);
    for (;;) {
        if (len + 4096 > cap)
            out = ak_realloc (out, cap *= 2);
        ssize_t n = read (master, out + len, 4096);
        if (n <= 0)
            break;                  /* EIO once the child's side closed */
        len += (size_t) n;
    }
    out[len] = '\0';
    close (master);
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    print_message ("akctl %s on a %u-column tty (COLUMNS=%s): exit %d\n%s\n", args, cols,
                   columns_env ? columns_env : "-", WIFEXITED (status) ? WEXITSTATUS (status) : -1, out);
    assert_true (WIFEXITED (status));
    return out;
}

/*  The live line: what follows the last "\033[K" up to the next "\r" or "\n". */
static char *s_live_line (const char *out)
{
    const char *p = NULL;
    for (const char *q = strstr (out, "\033[K"); q; q = strstr (q + 1, "\033[K"))
        p = q + 3;
    assert_non_null (p);
    size_t n = strcspn (p, "\r\n");
    char *line = ak_malloc (n + 1);
    memcpy (line, p, n);
    line[n] = '\0';
    return line;
}

static void s_watch_on_tty (const char *id)
{
    char *args = ak_sprintf ("watch %s", id);
    char *out = s_on_tty (0, "200", args);
    char *line = s_live_line (out);
    assert_true (strlen (line) <= 199);
    assert_non_null (strstr (line, "leased 0"));
    assert_non_null (strstr (line, "[####"));               /* room for the bar */
    free (line);
    assert_non_null (strstr (out, "(crashed 1, hung 1)"));     /* the planted crash.c and hang.c */
    free (out);
    out = s_on_tty (60, NULL, args);
    line = s_live_line (out);
    if (strlen (line) > 59 || !strstr (line, "leased 0") || !strstr (line, "done "))
        fail_msg ("a 60-column live line must hold every count: '%s'", line);
    free (line);
    free (out);
    free (args);
}

static bool s_dead (void *arg)
{
    json_t *w = ak_test_akctl_json (&s_c, "workers");
    bool dead = false;
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get (w, "workers"), i, x)
        if (strcmp (json_string_value (json_object_get (x, "worker_id")), arg) == 0)
            dead = strcmp (json_string_value (json_object_get (x, "state")), "dead") == 0;
    json_decref (w);
    return dead;
}

static bool s_listed (const char *id)
{
    json_t *w = ak_test_akctl_json (&s_c, "workers");
    assert_non_null (w);
    bool listed = false;
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get (w, "workers"), i, x)
        listed |= strcmp (json_string_value (json_object_get (x, "worker_id")), id) == 0;
    json_decref (w);
    return listed;
}

static void s_forget (void)
{
    char *out = NULL;
    assert_int_equal (ak_test_akctl (&s_c, &out, "workers forget ux-w2 2>&1"), 1);
    assert_non_null (strstr (out, "is alive"));
    free (out);
    ak_test_cluster_stop_worker (&s_c, 0, SIGTERM, 30000);
    assert_true (ak_test_wait (s_dead, "ux-w1", 60000));
    assert_int_equal (ak_test_akctl (&s_c, &out, "workers forget ux-w1 2>&1"), 0);
    assert_non_null (strstr (out, "forgot worker ux-w1"));
    free (out);
    assert_false (s_listed ("ux-w1"));
    assert_true (s_listed ("ux-w2"));
    assert_int_equal (ak_test_akctl (&s_c, &out, "workers forget ux-w1 2>&1"), 4);
    assert_non_null (strstr (out, "no worker 'ux-w1'"));
    free (out);
    assert_int_equal (ak_test_akctl (&s_c, NULL, "workers forget 2>/dev/null"), 2);

    /* for good: the coordinator started again does not list it */
    assert_int_equal (ak_test_akctl (&s_c, NULL, "shutdown"), 0);
    int status = ak_test_stop (s_c.coord, 0, 30000);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    s_c.coord = 0;
    ak_test_cluster_coord (&s_c, NULL, "akcoord2.log", NULL, 30000);
    assert_false (s_listed ("ux-w1"));
    assert_true (s_listed ("ux-w2"));
}

/*  Every whisker of the HTML ends before the value label that follows it,
    and every "±" is followed by a number. */
static void s_check_html (const char *html)
{
    assert_null (strstr (html, "&#177;</text>"));
    int whiskers = 0;
    for (const char *p = strstr (html, "&#177;"); p; p = strstr (p + 1, "&#177;")) {
        if (!(p[6] == ' ' && ((p[7] >= '0' && p[7] <= '9') || p[7] == '.')))
            fail_msg ("a '±' without its number: %.40s", p);
    }
    for (const char *p = strstr (html, "class=\"noise\" d=\"M"); p; p = strstr (p + 1, "class=\"noise\" d=\"M")) {
        int x0, y0, y1, x0b, ym, x1, x1b, y2, y3;
        assert_int_equal (sscanf (p, "class=\"noise\" d=\"M%d %dV%dM%d %dH%dM%d %dV%d", &x0, &y0, &y1, &x0b,
                                  &ym, &x1, &x1b, &y2, &y3), 9);
        const char *t = strstr (p, "<text x=\"");
        assert_non_null (t);
        int tx = 0;
        assert_int_equal (sscanf (t, "<text x=\"%d\"", &tx), 1);
        if (tx <= x1)
            fail_msg ("a whisker ends at x=%d, over its value label at x=%d", x1, tx);
        whiskers++;
    }
    assert_true (whiskers > 0);
    assert_non_null (strstr (html, "class=\"axis\""));
    assert_non_null (strstr (html, "class=\"tick\""));
}

/*  The report of the planted batch with its first pair given a promoted
    winner with noise and per-workload timings, rendered by --from. */
static void s_html (const char *id)
{
    char *rep = ak_sprintf ("%s/rep", s_c.dir), *rep2 = ak_sprintf ("%s/rep2", s_c.dir);
    char *out = NULL;
    int code = ak_test_akctl (&s_c, &out, "report %s --out '%s' 2>/dev/null", id, rep);
    assert_true (code == 0 || code == 1);
    assert_non_null (strstr (out, " crashed=1 hung=1"));
    free (out);
    char *path = ak_sprintf ("%s/report.json", rep);
    json_t *report = json_load_file (path, 0, NULL);
    assert_non_null (report);
    json_t *op = json_array_get (json_object_get (report, "ops"), 0);
    assert_non_null (op);
    json_object_set_new (op, "winner", json_pack ("{s:s, s:s, s:s, s:s, s:b, s:f, s:f, s:s, s:[], s:s}",
        "op", "softmax", "device_class", "host", "task_id", "B000001.0002", "candidate_name", "vectorized",
        "promoted", 1, "speedup", 1.8, "noise", 0.25, "reason", "planted for the test", "params",
        "confirmation", "disagrees"));
    json_object_set_new (report, "winner_timings", json_pack ("{s:[{s:{s:s, s:s, s:[i,i]}, s:f, s:f}]}",
        "B000001.0002", "workload", "name", "small", "dtype", "float32", "dims", 64, 256,
        "speedup", 2.5, "speedup_noise", 0.6));
    assert_int_equal (json_dump_file (report, path, 0), 0);
    json_decref (report);
    code = ak_test_akctl (&s_c, &out, "report %s --out '%s' --from '%s' 2>/dev/null", id, rep2, path);
    assert_true (code == 0 || code == 1);
    assert_non_null (strstr (out, "winners=1/1"));
    free (out);
    char *hpath = ak_sprintf ("%s/report.html", rep2), *html = NULL;
    size_t len = 0;
    ak_err_t err = { 0 };
    assert_int_equal (ak_file_read (hpath, 64u << 20, &html, &len, &err), 0);
    s_check_html (html);
    assert_non_null (strstr (html, "2.5x &#177; 0.6x"));
    /* a confirmation that disagreed is marked as the text report marks it
       (issue 14 item 6): in the winners table and on the winner's bars */
    assert_non_null (strstr (html, "<span class=\"disagrees\">CONFIRMATION DISAGREES: the lower of the two figures"));
    assert_non_null (strstr (html, "class=\"bar win disagrees\""));
    assert_non_null (strstr (html, "2.5x &#177; 0.6x (disagrees)"));
    free (html);
    free (hpath);
    free (path);
    free (rep);
    free (rep2);
}

static void test_operator_ux (void **state)
{
    (void) state;
    ak_test_cluster_init (&s_c, "ux", false);
    s_c.echo = true;
    ak_test_cluster_coord (&s_c, NULL, NULL, NULL, 30000);
    ak_test_cluster_workers (&s_c, "ux-w", 2, NULL, 60000);
    /* softmax's baseline and the planted crash.c and hang.c: one workload,
       a run timeout that a loaded box does not reach but hang.c does (the
       other jobs take well under a second on an idle box; hang.c spins a
       core for all of it, so it is no longer than it needs to be) */
    char *src = ak_test_src ("");
    char *text = ak_sprintf ("{\"schema_version\": 1, \"name\": \"crashes\", \"targets\": [\"host\"],\n"
        " \"policy\": {\"max_attempts\": 1, \"run_timeout_ms\": 8000, \"warmup\": 1, \"min_samples\": 3,\n"
        "            \"max_samples\": 10, \"max_time_ms\": 100},\n"
        " \"ops\": [{\"spec\": \"%s/kernels/softmax/spec.json\", \"workloads\": [\"small\"], \"candidates\": [],\n"
        "   \"extra_candidates\": [\n"
        "     {\"name\": \"crash\", \"backend\": \"host\", \"source\": \"%s/kernels/testing/crash.c\"},\n"
        "     {\"name\": \"hang\", \"backend\": \"host\", \"source\": \"%s/kernels/testing/hang.c\"}]}]}\n",
        src, src, src);
    char *manifest = ak_test_write (s_c.dir, "crashes.json", text);
    free (text);
    free (src);
    char *id = ak_test_submit (&s_c, "submit '%s'", manifest);
    json_t *st = ak_test_batch_wait (&s_c, id, 240000);
    json_decref (st);

    s_watch_on_tty (id);

    char *out = NULL;
    assert_int_equal (ak_test_akctl (&s_c, &out, "profile install B999999 --profile p 2>&1"), 4);
    assert_non_null (strstr (out, "no batch 'B999999'"));
    assert_null (strstr (out, s_c.store));
    assert_null (strstr (out, "key '"));
    assert_null (strstr (out, "mdb"));
    free (out);

    s_html (id);
    s_forget ();
    ak_test_cluster_shutdown (&s_c, 30000);
    free (id);
    free (manifest);
}

static int s_teardown (void **state)
{
    (void) state;
    ak_test_cluster_teardown (&s_c);
    return 0;
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_operator_ux, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
