/*  ops/akctl/html.c: `akctl report BATCH --out DIR`: the morning report as
    files (report.md, report.json, report.html) and one summary line for
    scripts:

        akfleet-report: batch B000001 verdict=PASS winners=3/3 failures=0 crashed=0 hung=0

    The HTML page is self-contained (no scripts, no fetches: inline CSS and
    SVG) with three charts: the winner's speedup per operator and workload
    (with its noise band), time spent per phase, failures by reason.  The
    numbers are the coordinator's REPORT plus, for each promoted winner, the
    receipt of the figures it reports (from `show`: its measurement, or its
    confirmation where that was lower), for the per-workload speedups.  A
    winner whose confirmation disagreed with its measurement is marked as in
    the text report ("CONFIRMATION DISAGREES: the lower of the two figures",
    docs/measurement.md), in the table and on its bars. */
#include "akctl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

// ----------------------------------------------------------------- verdict

void akctl_report_crashes (const json_t *report, int *crashed, int *hung)
{
    *crashed = *hung = 0;
    size_t i, j;
    json_t *op, *f;
    json_array_foreach (akj_arr (report, "ops"), i, op)
        json_array_foreach (akj_arr (op, "failures"), j, f) {
            *crashed += strcmp (akj_str (f, "status"), "crashed") == 0;
            *hung += strcmp (akj_str (f, "status"), "timeout") == 0;
        }
}

const char *akctl_report_verdict (const json_t *report, akctl_verdict_t *v)
{
    const json_t *sum = akj_obj (report, "batch");
    const json_t *counts = akj_obj (sum, "counts");
    memset (v, 0, sizeof *v);
    bool missing = false;
    size_t i;
    json_t *op;
    json_array_foreach (akj_arr (report, "ops"), i, op) {
        v->pairs++;
        const json_t *win = akj_obj (op, "winner");
        if (!win || !json_is_object (win) || !*akj_str (win, "op"))
            missing = true;
        else
        if (akj_bool (win, "promoted"))
            v->winners++;
        v->failures += (int) json_array_size (akj_arr (op, "failures"));
        const json_t *pre = akj_obj (op, "preflight");
        if (pre && json_is_object (pre) && strcmp (akj_str (pre, "status"), "ok") != 0)
            v->baselines_failed++;
    }
    akctl_report_crashes (report, &v->crashed, &v->hung);
    const char *state = akj_str (sum, "state");
    if (strcmp (state, "open") == 0)
        return "INCOMPLETE";
    if (strcmp (state, "complete") != 0 || akj_int (counts, "poisoned") > 0 || missing || v->pairs == 0
        || v->baselines_failed > 0)
        return "FAIL";
    return "PASS";
}

void akctl_verdict_line (const json_t *report, char *line, size_t len)
{
    akctl_verdict_t v;
    const char *verdict = akctl_report_verdict (report, &v);
    int n = snprintf (line, len, "akfleet-report: batch %s verdict=%s winners=%d/%d failures=%d crashed=%d hung=%d",
                      akj_str (akj_obj (report, "batch"), "batch_id"), verdict, v.winners, v.pairs,
                      v.failures, v.crashed, v.hung);
    if (v.baselines_failed && n > 0 && (size_t) n < len)
        snprintf (line + n, len - (size_t) n, " baselines_failed=%d", v.baselines_failed);
}

// -------------------------------------------------------------------- HTML

static void s_esc (FILE *out, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
            case '<': fputs ("&lt;", out); break;
            case '>': fputs ("&gt;", out); break;
            case '&': fputs ("&amp;", out); break;
            case '"': fputs ("&quot;", out); break;
            case '\'': fputs ("&#39;", out); break;
            default: fputc (*s, out);
        }
    }
}

typedef struct {
    char   label[256];
    double value, noise;
    bool   promoted;
    bool   disagrees;             /* its confirmation disagreed: the lower figure */
} s_bar_t;

/* A step of 1, 2 or 5 times a power of ten near span / 4, for the axis. */
static double s_tick_step (double span)
{
    double raw = span / 4, p = pow (10, floor (log10 (raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* Horizontal bar chart with an axis under the bars; `unit` follows each
   value; a bar with noise gets a whisker (value +- noise, with caps) and
   its value reads "V +- N" after the bar or the whisker, whichever ends
   later, so that no line crosses a label; ref > 0 draws a dashed line at
   that value (1.0x: the baseline), labelled above the bars. */
static void s_bars (FILE *out, const char *id, const char *title, const s_bar_t *bars, size_t n,
                    const char *unit, double ref)
{
    const int label_w = 300, plot_w = 420, row_h = 22, top = 40, value_w = 170;
    double max = ref > 0 ? ref : 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite (bars[i].value + bars[i].noise) && bars[i].value + bars[i].noise > max)
            max = bars[i].value + bars[i].noise;
    if (max <= 0)
        max = 1;
    double step = s_tick_step (max);
    max = ceil (max / step) * step;         /* the axis ends on a tick */
    int axis_y = top + (int) (n ? n : 1) * row_h + 4;
    int h = axis_y + 34;
    fprintf (out, "<figure><svg id=\"%s\" class=\"akchart\" xmlns=\"http://www.w3.org/2000/svg\" "
             "width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"", id, label_w + plot_w + value_w, h);
    s_esc (out, title);
    fprintf (out, "\">\n<text x=\"4\" y=\"18\" class=\"title\">");
    s_esc (out, title);
    fprintf (out, "</text>\n");
    if (n == 0)
        fprintf (out, "<text x=\"4\" y=\"%d\" class=\"none\">nothing to show</text>\n", top + 14);
    for (size_t i = 0; i < n; i++) {
        int y = top + (int) i * row_h;
        double v = isfinite (bars[i].value) && bars[i].value > 0 ? bars[i].value : 0;
        bool noisy = bars[i].noise > 0 && isfinite (bars[i].noise);
        int w = (int) (plot_w * v / max);
        fprintf (out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" class=\"label\">", label_w - 6, y + 15);
        s_esc (out, bars[i].label);
        fprintf (out, "</text><rect class=\"bar%s%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>",
                 bars[i].promoted ? " win" : "", bars[i].disagrees ? " disagrees" : "", label_w, y + 3,
                 w > 0 ? w : 1, row_h - 6);
        s_esc (out, bars[i].label);
        fprintf (out, ": %.3f%s%s</title></rect>", v, unit,
                 bars[i].disagrees ? " (confirmation disagrees: the lower of the two figures)" : "");
        int end = label_w + w;
        if (noisy) {
            int x0 = label_w + (int) (plot_w * fmax (v - bars[i].noise, 0) / max);
            int x1 = label_w + (int) (plot_w * (v + bars[i].noise) / max);
            int ym = y + row_h / 2;
            fprintf (out, "<path class=\"noise\" d=\"M%d %dV%dM%d %dH%dM%d %dV%d\"/>", x0, ym - 4, ym + 4,
                     x0, ym, x1, x1, ym - 4, ym + 4);
            if (x1 > end)
                end = x1;
        }
        fprintf (out, "<text x=\"%d\" y=\"%d\" class=\"value\">%.3g%s", end + 6, y + 15, v, unit);
        if (noisy)
            fprintf (out, " &#177; %.2g%s", bars[i].noise, unit);
        if (bars[i].disagrees)
            fprintf (out, " (disagrees)");
        fprintf (out, "</text>\n");
    }
    /* the axis: a line, ticks and their values */
    fprintf (out, "<path class=\"axis\" d=\"M%d %dH%d\"/>", label_w, axis_y, label_w + plot_w);
    for (double t = 0; t <= max + step / 2; t += step) {
        int x = label_w + (int) (plot_w * t / max);
        fprintf (out, "<path class=\"axis\" d=\"M%d %dV%d\"/><text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                 "class=\"tick\">%g%s</text>", x, axis_y, axis_y + 4, x, axis_y + 16, t, unit);
    }
    fprintf (out, "\n");
    if (ref > 0) {
        int x = label_w + (int) (plot_w * ref / max);
        fprintf (out, "<line class=\"ref\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>"
                 "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"value\">baseline</text>\n",
                 x, x, top - 2, axis_y, x, top - 6);
    }
    fprintf (out, "</svg></figure>\n");
}

/* The winner's receipt timings of op (from `show`), if akctl fetched them. */
static const json_t *s_winner_timings (const json_t *report, const char *task_id)
{
    const json_t *wt = akj_obj (report, "winner_timings");
    return wt ? json_object_get (wt, task_id) : NULL;
}

void akctl_render_report_html (FILE *out, const json_t *report)
{
    const json_t *sum = akj_obj (report, "batch");
    akctl_verdict_t v;
    const char *verdict = akctl_report_verdict (report, &v);
    fprintf (out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>akfleet report ");
    s_esc (out, akj_str (sum, "batch_id"));
    fprintf (out, "</title>\n<style>\n"
             "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
             "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\n"
             ".verdict{font-weight:bold;padding:2px 8px;border-radius:4px}.PASS{background:#c8f0c8}"
             ".FAIL{background:#f6c4c4}.INCOMPLETE{background:#f3e3b0}\n"
             ".disagrees{background:#f6c4c4;font-weight:bold}.confirmed{color:#3c8d5a}\n"
             "svg .bar{fill:#9aa9c8}svg .bar.win{fill:#3c8d5a}svg .bar.win.disagrees{fill:#c0504d}svg .noise{stroke:#222;stroke-width:2;fill:none}"
             "svg .axis{stroke:#444;fill:none}svg .tick{font-size:10px}"
             "svg .ref{stroke:#b33;stroke-dasharray:4 3}svg text{font-size:12px}svg .title{font-weight:bold;font-size:14px}\n"
             "</style></head><body>\n<h1>Batch ");
    s_esc (out, akj_str (sum, "batch_id"));
    fprintf (out, " &ldquo;");
    s_esc (out, akj_str (sum, "name"));
    fprintf (out, "&rdquo;</h1>\n<p id=\"verdict\">Verdict: <span class=\"verdict %s\">%s</span> &mdash; "
             "%d of %d operator/class pairs promoted a winner, %d failed candidate(s) "
             "(<span id=\"crashed\">%d crashed</span>, <span id=\"hung\">%d hung</span>)%s; batch ",
             verdict, verdict, v.winners, v.pairs, v.failures, v.crashed, v.hung,
             v.baselines_failed ? ", a baseline failed" : "");
    s_esc (out, akj_str (sum, "state"));
    fprintf (out, ", %" PRId64 " tasks.</p>\n", akj_int (sum, "total"));

    /* winners table */
    fprintf (out, "<h2>Winners</h2>\n<table id=\"winners\"><tr><th>operator</th><th>device class</th><th>winner</th>"
             "<th>params</th><th>speedup</th><th>note</th></tr>\n");
    size_t i, j;
    json_t *op, *x;
    json_array_foreach (akj_arr (report, "ops"), i, op) {
        const json_t *w = akj_obj (op, "winner");
        char *params = akctl_params_text (akj_arr (w, "params"));
        char sp[64];
        bool promoted = akj_bool (w, "promoted");
        fprintf (out, "<tr><td>");
        s_esc (out, akj_str (op, "op"));
        fprintf (out, "</td><td>");
        s_esc (out, akj_str (op, "device_class"));
        fprintf (out, "</td><td>");
        s_esc (out, promoted ? akj_str (w, "candidate_name") : "baseline kept");
        fprintf (out, "</td><td>");
        s_esc (out, promoted ? params : "-");
        fprintf (out, "</td><td>%s", promoted ? akctl_speedup (akj_num (w, "speedup"), akj_num (w, "noise"), sp, sizeof sp) : "-");
        /* the confirmation round's verdict on this figure, as the text report says it */
        const char *conf = promoted ? akj_str (w, "confirmation") : "";
        if (strcmp (conf, "disagrees") == 0)
            fprintf (out, "<br><span class=\"disagrees\">CONFIRMATION DISAGREES: the lower of the two figures</span>");
        else
        if (strcmp (conf, "confirmed") == 0)
            fprintf (out, "<br><span class=\"confirmed\">confirmed on another run</span>");
        fprintf (out, "</td><td>");
        s_esc (out, akj_str (w, "reason"));
        fprintf (out, "</td></tr>\n");
        free (params);
        /* workload picks (promote.h): a row each, under their winner */
        const json_t *pk;
        json_array_foreach (akj_arr (w, "picks"), j, pk) {
            char *pp = akctl_params_text (akj_arr (pk, "params"));
            fprintf (out, "<tr class=\"pick\"><td></td><td>workload pick: ");
            s_esc (out, akj_str (pk, "workload"));
            fprintf (out, "/");
            s_esc (out, akj_str (pk, "dtype"));
            fprintf (out, "</td><td>");
            s_esc (out, akj_str (pk, "candidate_name"));
            fprintf (out, "</td><td>");
            s_esc (out, pp);
            fprintf (out, "</td><td>%s</td><td>%.2fx over the ",
                     akctl_speedup (akj_num (pk, "speedup"), akj_num (pk, "noise"), sp, sizeof sp),
                     akj_num (pk, "over"));
            s_esc (out, akj_str (pk, "replaces"));
            fprintf (out, " there (task ");
            s_esc (out, akj_str (pk, "task_id"));
            const char *conf = akj_str (pk, "confirmation");
            fprintf (out, "; %s", strcmp (conf, "confirmed") == 0 ? "confirmed on "
                                  : strcmp (conf, "disagrees") == 0 ? "the confirmation disagrees: not installed, on "
                                  : "not confirmed");
            if (*conf)
                s_esc (out, akj_str (pk, "confirmed_on"));
            fprintf (out, ")</td></tr>\n");
            free (pp);
        }
    }
    fprintf (out, "</table>\n");

    /* weighted aggregates per operator, class and dtype (docs/measurement.md) */
    fprintf (out, "<h2>Weighted aggregates</h2>\n<table id=\"aggregates\"><tr><th>operator</th>"
             "<th>device class</th><th>kernel</th><th>dtype</th><th>workloads</th><th>weight</th>"
             "<th>baseline</th><th>kernel time</th><th>speedup</th></tr>\n");
    json_array_foreach (akj_arr (report, "ops"), i, op) {
        const json_t *agg = akj_obj (op, "aggregates");
        json_array_foreach (akj_arr (agg, "rows"), j, x) {
            char *params = akctl_params_text (akj_arr (agg, "params"));
            char kernel[256], n[24], w[32], b[32], k[32], sp[32];
            snprintf (kernel, sizeof kernel, "%s %s (%s)", akj_str (agg, "candidate"), params,
                      akj_str (agg, "source"));
            free (params);
            snprintf (n, sizeof n, "%" PRId64, akj_int (x, "workloads"));
            snprintf (w, sizeof w, "%g", akj_num (x, "weight"));
            akctl_micros (akj_num (x, "baseline_us"), b, sizeof b);
            bool has = akj_num (x, "candidate_us") > 0;
            if (has) {
                akctl_micros (akj_num (x, "candidate_us"), k, sizeof k);
                snprintf (sp, sizeof sp, "%.3fx", akj_num (x, "speedup"));
            }
            const char *cells[9] = { akj_str (op, "op"), akj_str (op, "device_class"), kernel,
                                     akj_str (x, "dtype"), n, w, b, has ? k : "-", has ? sp : "-" };
            fprintf (out, "<tr>");
            for (int c = 0; c < 9; c++) {
                fprintf (out, "<td>");
                s_esc (out, cells[c]);
                fprintf (out, "</td>");
            }
            fprintf (out, "</tr>\n");
        }
    }
    fprintf (out, "</table>\n");

    /* chart 1: speedup per operator and size */
    size_t cap = 16, n = 0;
    s_bar_t *bars = ak_calloc (cap, sizeof *bars);
    json_array_foreach (akj_arr (report, "ops"), i, op) {
        const json_t *w = akj_obj (op, "winner");
        bool promoted = akj_bool (w, "promoted");
        bool disagrees = promoted && strcmp (akj_str (w, "confirmation"), "disagrees") == 0;
        const json_t *timings = promoted ? s_winner_timings (report, akj_str (w, "task_id")) : NULL;
        if (timings && json_array_size (timings)) {
            json_array_foreach (timings, j, x) {
                if (n == cap)
                    bars = ak_realloc (bars, (cap *= 2) * sizeof *bars);
                const json_t *wl = akj_obj (x, "workload");
                char *dims = akctl_dims_text (akj_arr (wl, "dims"));
                snprintf (bars[n].label, sizeof bars[n].label, "%s %s %s (%s)", akj_str (op, "op"),
                          akj_str (wl, "name"), dims, akj_str (wl, "dtype"));
                free (dims);
                bars[n].value = akj_num (x, "speedup");
                bars[n].noise = akj_num (x, "speedup_noise");
                bars[n].promoted = true;
                bars[n].disagrees = disagrees;
                n++;
            }
        }
        else {
            if (n == cap)
                bars = ak_realloc (bars, (cap *= 2) * sizeof *bars);
            snprintf (bars[n].label, sizeof bars[n].label, "%s on %.180s (%s)", akj_str (op, "op"),
                      akj_str (op, "device_class"), promoted ? "weighted" : "baseline kept");
            bars[n].value = promoted ? akj_num (w, "speedup") : 1.0;
            bars[n].noise = promoted ? akj_num (w, "noise") : 0;
            bars[n].promoted = promoted;
            bars[n].disagrees = disagrees;
            n++;
        }
    }
    fprintf (out, "<h2>Speedup per operator and size</h2>\n");
    s_bars (out, "chart-speedup", "winner speedup over the baseline (x), with its noise band", bars, n, "x", 1.0);

    /* chart 2: time per phase */
    const json_t *ph = akj_obj (report, "phases_ms");
    s_bar_t phase[3] = { { "compile", akj_num (ph, "compile") / 1000, 0, false, false },
                         { "gates", akj_num (ph, "gates") / 1000, 0, false, false },
                         { "timing", akj_num (ph, "timing") / 1000, 0, false, false } };
    fprintf (out, "<h2>Time spent per phase</h2>\n");
    s_bars (out, "chart-phases", "seconds, summed over every worker", phase, 3, " s", 0);
    const json_t *gt = akj_obj (report, "gpu_timing");
    if (gt && json_is_number (json_object_get (gt, "share")))
        fprintf (out, "<p id=\"gpu-timing\">GPU timing share: <b>%.1f%%</b> (time inside timed samples "
                 "%.1f s of %.1f s device wall time over %.0f devices in %.0f worker runs; %.1f%% of the "
                 "executors' task time)</p>\n", 100 * akj_num (gt, "share"), akj_num (gt, "sampled_ms") / 1000,
                 akj_num (gt, "device_wall_ms") / 1000, akj_num (gt, "devices"), akj_num (gt, "device_runs"),
                 100 * akj_num (gt, "share_of_task_time"));

    /* chart 3: failures by reason (status) */
    n = 0;
    json_array_foreach (akj_arr (report, "ops"), i, op) {
        json_array_foreach (akj_arr (op, "failures"), j, x) {
            const char *status = *akj_str (x, "status") ? akj_str (x, "status") : "unknown";
            size_t k = 0;
            while (k < n && strcmp (bars[k].label, status) != 0)
                k++;
            if (k == n) {
                if (n == cap)
                    bars = ak_realloc (bars, (cap *= 2) * sizeof *bars);
                memset (&bars[n], 0, sizeof bars[n]);
                snprintf (bars[n].label, sizeof bars[n].label, "%s", status);
                n++;
            }
            bars[k].value += 1;
        }
    }
    fprintf (out, "<h2>Failures by reason</h2>\n");
    s_bars (out, "chart-failures", "failed candidates by status", bars, n, "", 0);
    free (bars);

    /* failures table */
    fprintf (out, "<table id=\"failures\"><tr><th>task</th><th>operator</th><th>candidate</th><th>params</th>"
             "<th>status</th><th>reason</th></tr>\n");
    json_array_foreach (akj_arr (report, "ops"), i, op) {
        json_array_foreach (akj_arr (op, "failures"), j, x) {
            char *params = akctl_params_text (akj_arr (x, "params"));
            const char *cells[6] = { akj_str (x, "task_id"), akj_str (op, "op"), akj_str (x, "candidate"), params,
                                     akj_str (x, "status"), akj_str (x, "reason") };
            fprintf (out, "<tr>");
            for (int c = 0; c < 6; c++) {
                fprintf (out, "<td>");
                s_esc (out, cells[c]);
                fprintf (out, "</td>");
            }
            fprintf (out, "</tr>\n");
            free (params);
        }
    }
    fprintf (out, "</table>\n<footer>akfleet %s</footer>\n</body></html>\n", AK_VERSION);
}

// ------------------------------------------------------------------- files

static int s_write_file (const char *dir, const char *name, void (*fn) (FILE *, const json_t *, void *),
                         const json_t *report, void *arg)
{
    char *path = ak_path_join (dir, name);
    char *tmp = ak_sprintf ("%s.tmp", path);
    FILE *f = fopen (tmp, "w");
    int rc = 0;
    if (!f) {
        fprintf (stderr, "akctl: report: %s: cannot write\n", tmp);
        rc = -1;
    }
    else {
        fn (f, report, arg);
        if (fclose (f) != 0 || rename (tmp, path) != 0) {
            fprintf (stderr, "akctl: report: %s: write failed\n", path);
            rc = -1;
        }
    }
    free (tmp);
    free (path);
    return rc;
}

static void s_md (FILE *f, const json_t *report, void *arg)
{
    akctl_render_report (f, report, true);
    fprintf (f, "\n%s\n", (const char *) arg);
}

static void s_json (FILE *f, const json_t *report, void *arg)
{
    json_dumpf (report, f, JSON_INDENT (2));
    fputc ('\n', f);
}

static void s_html (FILE *f, const json_t *report, void *arg)
{
    akctl_render_report_html (f, report);
}

static int s_write_report (const akctl_opts_t *o, json_t *report);

/*  report --from FILE: a report.json that --out wrote, rendered again
    without a coordinator. */
static json_t *s_report_from (const char *path)
{
    json_error_t jerr;
    json_t *report = json_load_file (path, 0, &jerr);
    if (!report)
        fprintf (stderr, "akctl: report: %s: %s (line %d)\n", path, jerr.text, jerr.line);
    else
    if (!json_is_object (report) || !akj_obj (report, "batch") || !akj_arr (report, "ops")) {
        fprintf (stderr, "akctl: report: %s: not a report.json (no batch and ops)\n", path);
        json_decref (report);
        report = NULL;
    }
    return report;
}

int akctl_report_out (const akctl_opts_t *o)
{
    ak_err_t err = { 0, "" };
    if (o->from) {
        json_t *report = s_report_from (o->from);
        return report ? s_write_report (o, report) : AKCTL_EXIT_USAGE;
    }
    akctl_client_t *client = akctl_client_new (o->endpoint, o->timeout_ms, &err);
    if (!client) {
        fprintf (stderr, "akctl: %s\n", err.msg);
        return AKCTL_EXIT_USAGE;
    }
    akctl_reply_t reply;
    int rc = akctl_client_call (client, "report", o->pos, 1, NULL, &reply, &err);
    int code = akctl_call_exit (rc, &reply, &err);
    json_t *report = code == AKCTL_EXIT_OK ? akctl_parse_json (reply.json, "report") : NULL;
    akctl_reply_free (&reply);
    if (code == AKCTL_EXIT_OK && !report)
        code = AKCTL_EXIT_NEGATIVE;
    /* the winners' per-workload timings, from the receipt of the figures
       each reports: its measurement, or the confirmation where that was
       lower (figures_receipt_id), which is a receipt of a confirm task */
    json_t *wt = json_object ();
    size_t i;
    json_t *op;
    json_array_foreach (report ? akj_arr (report, "ops") : NULL, i, op) {
        const json_t *w = akj_obj (op, "winner");
        if (code != AKCTL_EXIT_OK || !akj_bool (w, "promoted") || !*akj_str (w, "task_id"))
            continue;
        const char *task_id = akj_str (w, "task_id");
        const char *want = *akj_str (w, "figures_receipt_id") ? akj_str (w, "figures_receipt_id")
                                                              : akj_str (w, "receipt_id");
        const json_t *confirms = akj_arr (op, "confirms");
        for (size_t c = 0; c <= json_array_size (confirms) && !json_object_get (wt, task_id); c++) {
            /* the winner's own task first, then its confirm tasks */
            const json_t *conf = c ? json_array_get (confirms, c - 1) : NULL;
            if (conf && strcmp (akj_str (conf, "confirm_of"), task_id) != 0)
                continue;
            char *args[1] = { (char *) (conf ? akj_str (conf, "task_id") : task_id) };
            if (akctl_client_call (client, "show", args, 1, NULL, &reply, &err) == 0 && reply.code == 0) {
                json_t *show = json_loads (reply.json, 0, NULL);
                size_t k;
                json_t *r;
                json_array_foreach (akj_arr (show, "receipts"), k, r)
                    if (strcmp (akj_str (r, "receipt_id"), want) == 0 && akj_arr (r, "timings"))
                        json_object_set (wt, task_id, akj_arr (r, "timings"));
                json_decref (show);
            }
            akctl_reply_free (&reply);
        }
    }
    akctl_client_destroy (&client);
    if (code != AKCTL_EXIT_OK) {
        json_decref (wt);
        json_decref (report);
        return code;
    }
    json_object_set_new (report, "winner_timings", wt);
    return s_write_report (o, report);
}

/*  The three files and the summary line of report (taken); an exit code. */
static int s_write_report (const akctl_opts_t *o, json_t *report)
{
    ak_err_t err = { 0, "" };
    int code = AKCTL_EXIT_OK;
    akctl_verdict_t v;
    const char *verdict = akctl_report_verdict (report, &v);
    char line[320];
    akctl_verdict_line (report, line, sizeof line);
    json_object_set_new (report, "verdict", json_pack ("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s}",
                                                       "verdict", verdict, "winners", v.winners,
                                                       "pairs", v.pairs, "failures", v.failures,
                                                       "crashed", v.crashed, "hung", v.hung,
                                                       "baselines_failed", v.baselines_failed,
                                                       "summary", line));
    if (ak_mkdir_p (o->out, 0755, &err) != 0) {
        fprintf (stderr, "akctl: report: %s\n", err.msg);
        json_decref (report);
        return AKCTL_EXIT_NEGATIVE;
    }
    if (s_write_file (o->out, "report.md", s_md, report, line) != 0
        || s_write_file (o->out, "report.json", s_json, report, NULL) != 0
        || s_write_file (o->out, "report.html", s_html, report, NULL) != 0)
        code = AKCTL_EXIT_NEGATIVE;
    if (code == AKCTL_EXIT_OK) {
        printf ("%s\n", line);
        if (!o->json)
            fprintf (stderr, "wrote %s/report.md, report.json, report.html\n", o->out);
        code = strcmp (verdict, "PASS") == 0 ? AKCTL_EXIT_OK : AKCTL_EXIT_NEGATIVE;
    }
    json_decref (report);
    return code;
}
