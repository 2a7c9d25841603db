/*  ops/akctl/watch.c: following a batch until it is finished.

    Polls `status BATCH` every AKCTL_WATCH_INTERVAL ms.  On a terminal it
    redraws one line (bar, percentage, counts, elapsed); into a pipe or file
    it writes a plain line when the counts change (at most once a second)
    and at least every ten seconds, so logs of overnight runs stay short;
    with --json it writes each changed BATCHSUM as one JSON line.  What
    keeps the batch from moving ("waiting: no live worker of class X",
    "store error: ...") is printed above the live line when it changes, and
    after each plain line while it lasts.  Only
    three unanswered polls in a row end it (exit code 3). */
#include "akctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "util.h"

#define S_BAR_WIDTH        30
#define S_PLAIN_MIN_MS     1000
#define S_PLAIN_MAX_MS     10000
#define S_SILENT_MAX       3        /* unanswered polls in a row before giving up */

typedef struct {
    int64_t total, done, failed, poisoned, cancelled, queued, leased;
    int64_t finished;               /* every terminal state */
} s_counts_t;

static void s_counts (const json_t *sum, s_counts_t *c)
{
    const json_t *n = akj_obj (sum, "counts");
    c->total = akj_int (sum, "total");
    c->done = akj_int (n, "done");
    c->failed = akj_int (n, "failed");
    c->poisoned = akj_int (n, "poisoned");
    c->cancelled = akj_int (n, "cancelled");
    c->queued = akj_int (n, "queued");
    c->leased = akj_int (n, "leased");
    c->finished = c->done + c->failed + c->poisoned + c->cancelled;
}

/*  Elapsed time of the batch: from its creation to its end (or now), by
    the coordinator's clock when it gave one, else since the watch began. */
static uint64_t s_elapsed (const json_t *sum, uint64_t watch_start_mono)
{
    uint64_t created = (uint64_t) akj_int (sum, "created_ms");
    uint64_t finished = (uint64_t) akj_int (sum, "finished_ms");
    uint64_t now = ak_clock_wall_ms ();
    if (created && finished >= created)
        return finished - created;
    if (created && now >= created)
        return now - created;
    return ak_clock_mono_ms () - watch_start_mono;
}

/*  Columns of the terminal on stdout: its window size, else $COLUMNS (a
    terminal that reports no size: a serial console, some `ssh -t`), else 80. */
static int s_columns (void)
{
    struct winsize ws;
    if (ioctl (STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    int64_t cols = 0;
    const char *env = getenv ("COLUMNS");
    if (env && ak_parse_i64 (env, &cols) == 0 && cols > 0 && cols <= 10000)
        return (int) cols;
    return 80;
}

/*  Redraws the one live line, fitted to the terminal's width (a line that
    wraps can no longer be redrawn in place): the counts and the clock are
    kept whole and the bar gets what is left, up to S_BAR_WIDTH; below
    S_BAR_MIN it goes; only a terminal too narrow even for the counts cuts. */
#define S_BAR_MIN 5
static void s_draw_bar (const char *batch_id, const s_counts_t *c, uint64_t elapsed)
{
    int pct = c->total > 0 ? (int) (100 * c->finished / c->total) : 0;
    char bar[S_BAR_WIDTH + 1], clk[32], counts[384], line[512], extra[96] = "";
    if (c->poisoned || c->cancelled)
        snprintf (extra, sizeof extra, "  poisoned %" PRId64 "  cancelled %" PRId64,
                  c->poisoned, c->cancelled);
    snprintf (counts, sizeof counts, "%3d%%  %" PRId64 "/%" PRId64 "  done %" PRId64 "  failed %" PRId64
              "  queued %" PRId64 "  leased %" PRId64 "%s  %s", pct, c->finished, c->total, c->done,
              c->failed, c->queued, c->leased, extra, akctl_clock (elapsed, clk, sizeof clk));
    int width = s_columns () - 1;
    int room = width - (int) strlen (batch_id) - (int) strlen (counts) - 4;    /* " [" "] " */
    int bar_w = room < S_BAR_WIDTH ? room : S_BAR_WIDTH;
    if (bar_w >= S_BAR_MIN) {
        int fill = c->total > 0 ? (int) (bar_w * c->finished / c->total) : 0;
        for (int i = 0; i < bar_w; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[bar_w] = '\0';
        snprintf (line, sizeof line, "%s [%s] %s", batch_id, bar, counts);
    }
    else
        snprintf (line, sizeof line, "%s %s", batch_id, counts);
    printf ("\r\033[K%.*s", width > 0 ? width : 1, line);
    fflush (stdout);
}

static void s_plain_line (const char *batch_id, const char *state, const s_counts_t *c, uint64_t elapsed)
{
    char clk[32];
    int pct = c->total > 0 ? (int) (100 * c->finished / c->total) : 0;
    printf ("%s %s %s %" PRId64 "/%" PRId64 " (%d%%) done %" PRId64 " failed %" PRId64
            " poisoned %" PRId64 " cancelled %" PRId64 " queued %" PRId64 " leased %" PRId64 "\n",
            akctl_clock (elapsed, clk, sizeof clk), batch_id, state, c->finished, c->total, pct,
            c->done, c->failed, c->poisoned, c->cancelled, c->queued, c->leased);
    fflush (stdout);
}

/*  What keeps the batch from moving (the status answer's "waiting" and
    "store_error"), as one string to tell when it changed; "" when none. */
static void s_notices (const json_t *sum, char *buf, size_t len)
{
    size_t i, used = 0;
    json_t *w;
    buf[0] = '\0';
    json_array_foreach (akj_arr (sum, "waiting"), i, w)
        if (used < len)
            used += (size_t) snprintf (buf + used, len - used, "%s;", akj_str (w, "why"));
    const json_t *se = akj_obj (sum, "store_error");
    if (se && used < len)
        snprintf (buf + used, len - used, "store:%s", akj_str (se, "error"));
}

/*  How many failed tasks of the batch crashed and hung (from its report);
    false when the report did not come. */
static bool s_crashes (akctl_client_t *client, const char *batch_id, int *crashed, int *hung)
{
    akctl_reply_t reply;
    ak_err_t err = { 0, "" };
    char *args[1] = { (char *) batch_id };
    bool ok = false;
    if (akctl_client_call (client, "report", args, 1, NULL, &reply, &err) == 0 && reply.code == 0) {
        json_t *report = json_loads (reply.json, 0, NULL);
        if (report) {
            akctl_report_crashes (report, crashed, hung);
            ok = true;
        }
        json_decref (report);
    }
    akctl_reply_free (&reply);
    return ok;
}

/*  Sleeps ms in short steps so a signal's stop flag is seen quickly. */
static void s_nap (int ms, volatile sig_atomic_t *stop_flag)
{
    while (ms > 0 && !(stop_flag && *stop_flag)) {
        int step = ms < 50 ? ms : 50;
        struct timespec ts = { 0, (long) step * 1000000L };
        nanosleep (&ts, NULL);
        ms -= step;
    }
}

int akctl_watch (akctl_client_t *client, const char *batch_id, bool json,
                 volatile sig_atomic_t *stop_flag, akctl_watch_check_fn *check, void *check_arg,
                 json_t **final_p)
{
    bool tty = !json && isatty (STDOUT_FILENO);
    uint64_t start = ak_clock_mono_ms ();
    uint64_t last_print = 0;
    s_counts_t last = { -1, -1, -1, -1, -1, -1, -1, -1 };
    char last_notes[2048] = "";
    bool drawn = false;
    json_t *sum = NULL;
    int code = AKCTL_EXIT_OK;
    char *args[1] = { (char *) batch_id };
    int silent = 0;

    for (;;) {
        if (stop_flag && *stop_flag) {
            code = 130;
            break;
        }
        char why[512] = "";
        if (check && !check (check_arg, why, sizeof why)) {
            if (drawn)
                printf ("\n");
            fprintf (stderr, "akctl: watch %s: %s\n", batch_id, why);
            code = AKCTL_EXIT_NEGATIVE;
            drawn = false;
            break;
        }
        akctl_reply_t reply;
        ak_err_t err = { 0, "" };
        int rc = akctl_client_call (client, "status", args, 1, NULL, &reply, &err);
        /* A night-long watch should not end on one slow answer (a big
           group commit): silence ends it only S_SILENT_MAX times in a row. */
        if (rc == AK_EUNAVAIL && ++silent < S_SILENT_MAX && !(stop_flag && *stop_flag))
            continue;
        if (rc != AK_EUNAVAIL)
            silent = 0;
        if (rc != 0 || reply.code != 0) {
            if (drawn)
                printf ("\n");
            drawn = false;
            code = akctl_call_exit (rc, &reply, &err);
            akctl_reply_free (&reply);
            break;
        }
        json_t *now = akctl_parse_json (reply.json, "status");
        if (!now) {
            akctl_reply_free (&reply);
            code = AKCTL_EXIT_NEGATIVE;
            break;
        }
        json_decref (sum);
        sum = now;

        s_counts_t c;
        s_counts (sum, &c);
        const char *state = akj_str (sum, "state");
        bool open = strcmp (state, "open") == 0;
        bool changed = memcmp (&c, &last, sizeof c) != 0;
        char notes[sizeof last_notes];
        s_notices (sum, notes, sizeof notes);
        bool notes_changed = strcmp (notes, last_notes) != 0;
        uint64_t t = ak_clock_mono_ms ();
        uint64_t elapsed = s_elapsed (sum, start);
        if (json) {
            if (changed || notes_changed || !open) {
                printf ("%s\n", reply.json);
                fflush (stdout);
            }
        }
        else
        if (tty) {
            /* a notice goes above the live line, once each time it changes */
            if (notes_changed && notes[0]) {
                printf ("\r\033[K");
                akctl_render_notices (stdout, sum, "");
            }
            s_draw_bar (batch_id, &c, elapsed);
            drawn = true;
        }
        else
        if (!open || notes_changed || (changed && t - last_print >= S_PLAIN_MIN_MS)
            || t - last_print >= S_PLAIN_MAX_MS) {
            s_plain_line (batch_id, state, &c, elapsed);
            akctl_render_notices (stdout, sum, "");
            fflush (stdout);
            last_print = t;
        }
        last = c;
        snprintf (last_notes, sizeof last_notes, "%s", notes);
        akctl_reply_free (&reply);

        if (!open) {
            if (drawn)
                printf ("\n");
            drawn = false;
            if (!json) {
                char clk[32];
                printf ("%s %s in %s: %" PRId64 " tasks, done %" PRId64 ", failed %" PRId64,
                        batch_id, state, akctl_clock (elapsed, clk, sizeof clk), c.total, c.done,
                        c.failed);
                int crashed = 0, hung = 0;
                if (c.failed && s_crashes (client, batch_id, &crashed, &hung) && (crashed || hung))
                    printf (" (crashed %d, hung %d)", crashed, hung);
                if (c.poisoned)
                    printf (", poisoned %" PRId64 " (gave up after too many attempts)", c.poisoned);
                if (c.cancelled)
                    printf (", cancelled %" PRId64, c.cancelled);
                printf ("\n");
            }
            if (strcmp (state, "complete") != 0 || c.poisoned || c.cancelled)
                code = AKCTL_EXIT_NEGATIVE;
            break;
        }
        s_nap (AKCTL_WATCH_INTERVAL, stop_flag);
    }
    if (drawn)
        printf ("\n");
    fflush (stdout);
    if (code == 130)
        fprintf (stderr, "akctl: watch %s: interrupted\n", batch_id);
    if (final_p)
        *final_p = sum;
    else
        json_decref (sum);
    return code;
}
