/*  ops/akctl/report.c: the morning report, as text or Markdown.

    Per operator and device class: the winner (or that the baseline stays,
    and why), its configuration and speedup with its noise, the baseline's
    own time per workload from preflight, every candidate with its status
    and speedup, the failures with their reasons; then where the fleet's
    time went (compile, gates, timing).  The numbers are the coordinator's;
    this file only lays them out. */
#include "akctl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/*  Heading at level (1..3): "# text" in Markdown, else plain lines with the
    first level underlined so it stands out in a terminal. */
static void s_heading (FILE *out, bool md, int level, const char *text)
{
    if (md) {
        fprintf (out, "\n%.*s %s\n\n", level, "###", text);
        return;
    }
    if (level == 1)
        fprintf (out, "%s\n", text);
    else
    if (level == 2)
        fprintf (out, "\n%s\n", text);
    else
        fprintf (out, "  %s\n", text);
}

static const char *s_indent (bool md)
{
    return md ? "" : "    ";
}

/*  The winner line: "winner: NAME PARAMS, S.SSx +- N.NN over the baseline
    (task T)" or "winner: baseline kept (reason)". */
/*  The workload picks (promote.h): a line each. */
static void s_picks (FILE *out, bool md, const json_t *w)
{
    const json_t *picks = akj_arr (w, "picks");
    if (!json_array_size (picks))
        return;
    fprintf (out, md ? "\n**Workload picks** (another candidate installed for that workload alone):\n\n"
                     : "  workload picks (another candidate installed for that workload alone):\n");
    size_t i;
    const json_t *pk;
    json_array_foreach (picks, i, pk) {
        char *params = akctl_params_text (akj_arr (pk, "params"));
        char sp[64];
        const char *conf = akj_str (pk, "confirmation");
        char said[160];
        if (strcmp (conf, "confirmed") == 0)
            snprintf (said, sizeof said, "; confirmed on %.64s", akj_str (pk, "confirmed_on"));
        else
        if (strcmp (conf, "disagrees") == 0)
            snprintf (said, sizeof said, "; the confirmation on %.64s disagrees: not installed",
                      akj_str (pk, "confirmed_on"));
        else
            snprintf (said, sizeof said, "; not confirmed");
        fprintf (out, "%s%s/%s: %s%s%s %s, %s over the baseline, %.2fx over the %s there (task %s%s)\n",
                 md ? "- " : "    ", akj_str (pk, "workload"), akj_str (pk, "dtype"), md ? "`" : "",
                 akj_str (pk, "candidate_name"), md ? "`" : "", params,
                 akctl_speedup (akj_num (pk, "speedup"), akj_num (pk, "noise"), sp, sizeof sp),
                 akj_num (pk, "over"), akj_str (pk, "replaces"), akj_str (pk, "task_id"), said);
        free (params);
    }
}

static void s_winner (FILE *out, bool md, const json_t *w)
{
    const char *pre = md ? "**Winner:** " : "  winner: ";
    if (!w) {
        fprintf (out, "%sno result yet\n", pre);
        return;
    }
    if (!akj_bool (w, "promoted")) {
        const char *reason = akj_str (w, "reason");
        fprintf (out, "%sbaseline kept%s%s%s\n", pre, *reason ? " (" : "", reason, *reason ? ")" : "");
        s_picks (out, md, w);
        return;
    }
    char *params = akctl_params_text (akj_arr (w, "params"));
    char sp[64];
    fprintf (out, "%s%s%s%s %s, %s over the baseline (task %s", pre, md ? "`" : "",
             akj_str (w, "candidate_name"), md ? "`" : "", params,
             akctl_speedup (akj_num (w, "speedup"), akj_num (w, "noise"), sp, sizeof sp),
             akj_str (w, "task_id"));
    if (akj_int (w, "tied") > 0)
        fprintf (out, "; %" PRId64 " tied inside the noise", akj_int (w, "tied"));
    /* the confirmation round's verdict on this figure (docs/measurement.md) */
    const char *conf = akj_str (w, "confirmation");
    if (strcmp (conf, "confirmed") == 0)
        fprintf (out, "; confirmed on another run");
    else
    if (strcmp (conf, "disagrees") == 0)
        fprintf (out, "; %sCONFIRMATION DISAGREES%s: the lower of the two figures", md ? "**" : "",
                 md ? "**" : "");
    fprintf (out, ")\n");
    if (*akj_str (w, "reason"))
        fprintf (out, "%s%s\n", md ? "\n" : "          ", akj_str (w, "reason"));
    free (params);
    s_picks (out, md, w);
}

/*  The baseline's time per workload, from the preflight task. */
static void s_preflight (FILE *out, bool md, const json_t *pre)
{
    char title[256];
    if (!pre) {
        s_heading (out, md, 3, "baseline: no preflight result");
        return;
    }
    const char *status = akj_str (pre, "status");
    if (!*status)
        status = *akj_str (pre, "state") ? akj_str (pre, "state") : "pending";
    snprintf (title, sizeof title, "baseline (preflight %s: %s%s%s)", akj_str (pre, "task_id"),
              status, *akj_str (pre, "reason") ? ", " : "", akj_str (pre, "reason"));
    s_heading (out, md, 3, title);
    json_t *timings = akj_arr (pre, "timings");
    if (!timings || json_array_size (timings) == 0)
        return;
    static const char *const head[] = { "WORKLOAD", "DTYPE", "DIMS", "WEIGHT", "MEDIAN", "P10", "P90", "N", "SPREAD" };
    akctl_table_t *t = akctl_table_new (9, head);
    size_t i;
    json_t *w;
    json_array_foreach (timings, i, w) {
        const json_t *wl = akj_obj (w, "workload");
        const json_t *s = akj_obj (w, "candidate");
        char *dims = akctl_dims_text (akj_arr (wl, "dims"));
        char weight[24], med[32], p10[32], p90[32], n[24], rsd[32];
        snprintf (weight, sizeof weight, "%g", akj_num (wl, "weight"));
        snprintf (n, sizeof n, "%" PRId64, akj_int (s, "n"));
        /* The robust relative spread the worker's stopping rule uses
           (docs/measurement.md), so "target missed" and the figure agree. */
        double med_us = akj_num (s, "median_us");
        double spread = med_us > 0 ? (akj_num (s, "p90_us") - akj_num (s, "p10_us"))
                                     / (2 * 1.2816 * med_us) : 0.0;
        snprintf (rsd, sizeof rsd, "%.2f%%%s", 100 * spread,
                  akj_bool (w, "rsd_met") ? "" : " (target missed)");
        const char *row[9] = {
            akj_str (wl, "name"), akj_str (wl, "dtype"), dims, weight,
            akctl_micros (akj_num (s, "median_us"), med, sizeof med),
            akctl_micros (akj_num (s, "p10_us"), p10, sizeof p10),
            akctl_micros (akj_num (s, "p90_us"), p90, sizeof p90), n, rsd
        };
        akctl_table_add (t, row);
        free (dims);
    }
    akctl_table_print (t, out, s_indent (md), md);
    akctl_table_destroy (&t);
}

/*  The weighted aggregates (docs/measurement.md): per dtype and over all
    workloads, weighted mean latency of baseline and kernel and their ratio,
    the speedup the promotion rule uses. */
static void s_aggregates (FILE *out, bool md, const json_t *agg)
{
    json_t *rows = akj_arr (agg, "rows");
    if (!agg || !rows || json_array_size (rows) == 0)
        return;
    const char *source = akj_str (agg, "source");
    char title[384];
    char *params = akctl_params_text (akj_arr (agg, "params"));
    if (strcmp (source, "preflight") == 0)
        snprintf (title, sizeof title, "weighted aggregate (baseline only, preflight %s)",
                  akj_str (agg, "task_id"));
    else
        snprintf (title, sizeof title, "weighted aggregate (%s %s %s, task %s)",
                  strcmp (source, "winner") == 0 ? "winner" : "best candidate, not promoted:",
                  akj_str (agg, "candidate"), params, akj_str (agg, "task_id"));
    free (params);
    s_heading (out, md, 3, title);
    static const char *const head[] = { "DTYPE", "WORKLOADS", "WEIGHT", "BASELINE", "KERNEL", "SPEEDUP" };
    akctl_table_t *t = akctl_table_new (6, head);
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        char n[24], w[32], b[32], k[32], sp[32];
        snprintf (n, sizeof n, "%" PRId64, akj_int (r, "workloads"));
        snprintf (w, sizeof w, "%g", akj_num (r, "weight"));
        akctl_micros (akj_num (r, "baseline_us"), b, sizeof b);
        if (akj_num (r, "candidate_us") > 0) {
            akctl_micros (akj_num (r, "candidate_us"), k, sizeof k);
            snprintf (sp, sizeof sp, "%.3fx", akj_num (r, "speedup"));
        }
        else {
            snprintf (k, sizeof k, "-");
            snprintf (sp, sizeof sp, "-");
        }
        const char *row[6] = { akj_str (r, "dtype"), n, w, b, k, sp };
        akctl_table_add (t, row);
    }
    akctl_table_print (t, out, s_indent (md), md);
    akctl_table_destroy (&t);
}

/*  Sort order for candidates: finished ones by speedup, best first; the
    rest after them, in the coordinator's order. */
static int s_by_speedup (const void *a, const void *b)
{
    const json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;
    bool xok = strcmp (akj_str (x, "status"), "ok") == 0;
    bool yok = strcmp (akj_str (y, "status"), "ok") == 0;
    if (xok != yok)
        return xok ? -1 : 1;
    double dx = akj_num (x, "speedup"), dy = akj_num (y, "speedup");
    return dx < dy ? 1 : dx > dy ? -1 : 0;
}

static void s_candidates (FILE *out, bool md, const json_t *cands)
{
    size_t n = cands ? json_array_size (cands) : 0;
    char title[64];
    snprintf (title, sizeof title, "candidates (%zu)", n);
    s_heading (out, md, 3, title);
    if (n == 0)
        return;
    json_t **sorted = ak_calloc (n, sizeof (json_t *));
    for (size_t i = 0; i < n; i++)
        sorted[i] = json_array_get (cands, i);
    qsort (sorted, n, sizeof (json_t *), s_by_speedup);
    static const char *const head[] = { "TASK", "CANDIDATE", "PARAMS", "STATUS", "SPEEDUP", "PROMOTABLE", "REASON" };
    akctl_table_t *t = akctl_table_new (7, head);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = sorted[i];
        char *params = akctl_params_text (akj_arr (c, "params"));
        char sp[64];
        const char *status = akj_str (c, "status");
        const char *row[7] = {
            akj_str (c, "task_id"), akj_str (c, "candidate"), params,
            *status ? status : "pending",
            akctl_speedup (akj_num (c, "speedup"), akj_num (c, "noise"), sp, sizeof sp),
            strcmp (status, "ok") == 0 ? (akj_bool (c, "promotable") ? "yes" : "no") : "-",
            akj_str (c, "reason")
        };
        akctl_table_add (t, row);
        free (params);
    }
    akctl_table_print (t, out, s_indent (md), md);
    akctl_table_destroy (&t);
    free (sorted);
}

/*  A metric of a profiled workload by name, NAN when absent. */
static double s_metric (const json_t *wp, const char *name)
{
    size_t i;
    json_t *m;
    json_array_foreach (akj_arr (wp, "metrics"), i, m)
        if (strcmp (akj_str (m, "name"), name) == 0)
            return akj_num (m, "value");
    return NAN;
}

/*  "51.2 (of 4012)": a share of a measured device peak; "-" where the
    peak was not measured (0 or absent). */
static void s_pct_of (double pct, double peak, char *buf, size_t len)
{
    if (!(peak > 0) || !isfinite (peak) || !isfinite (pct))
        snprintf (buf, len, "-");
    else
        snprintf (buf, len, "%.1f (of %.0f)", pct, peak);
}

/*  Profile tasks (op "profile": true): one row per profiled workload, the
    CUPTI range profiler's figures beside the spec's accounting. */
static void s_profiles (FILE *out, bool md, const json_t *profs)
{
    size_t n = profs ? json_array_size (profs) : 0;
    if (n == 0)
        return;
    char title[64];
    snprintf (title, sizeof title, "profiles (%zu)", n);
    s_heading (out, md, 3, title);
    static const char *const head[] = { "TASK", "KERNEL", "STATUS", "WORKLOAD", "GPU TIME",
                                        "DRAM RD+WR", "GB/s (SPEC)", "GFLOP/s", "SM %", "DRAM %",
                                        "% COPY BW (OF GB/s)", "% FP32 FMA (OF GFLOP/s)" };
    akctl_table_t *t = akctl_table_new (12, head);
    size_t i;
    json_t *p;
    json_array_foreach (profs, i, p) {
        const char *cand = akj_str (p, "candidate");
        char *params = akctl_params_text (akj_arr (p, "params"));
        char kernel[256];
        snprintf (kernel, sizeof kernel, "%s%s%s", *cand ? cand : "baseline", *params ? " " : "", params);
        free (params);
        size_t nw = json_array_size (akj_arr (p, "workloads"));
        if (nw == 0) {
            const char *row[12] = { akj_str (p, "task_id"), kernel, akj_str (p, "status"),
                                    akj_str (p, "reason"), "", "", "", "", "", "", "", "" };
            akctl_table_add (t, row);
            continue;
        }
        size_t j;
        json_t *wp;
        json_array_foreach (akj_arr (p, "workloads"), j, wp) {
            char wl[96], us[32], dram[32], gbs[32], gfl[32], sm[16], dr[16], pcb[48], pcf[48];
            const json_t *w = akj_obj (wp, "workload");
            snprintf (wl, sizeof wl, "%s/%s", akj_str (w, "name"), akj_str (w, "dtype"));
            akctl_micros (akj_num (wp, "duration_us"), us, sizeof us);
            snprintf (dram, sizeof dram, "%.3g MB", (s_metric (wp, "dram__bytes_read.sum")
                                                     + s_metric (wp, "dram__bytes_write.sum")) / 1e6);
            snprintf (gbs, sizeof gbs, "%.1f", akj_num (wp, "achieved_gbps"));
            snprintf (gfl, sizeof gfl, "%.1f", akj_num (wp, "achieved_gflops"));
            snprintf (sm, sizeof sm, "%.1f", s_metric (wp, "sm__throughput.avg.pct_of_peak_sustained_elapsed"));
            snprintf (dr, sizeof dr, "%.1f", s_metric (wp, "dram__throughput.avg.pct_of_peak_sustained_elapsed"));
            s_pct_of (akj_num (wp, "pct_of_copy_bw"), akj_num (wp, "measured_copy_gbps"), pcb, sizeof pcb);
            s_pct_of (akj_num (wp, "pct_of_fp32_peak"), akj_num (wp, "measured_fp32_gflops"), pcf, sizeof pcf);
            const char *row[12] = { j ? "" : akj_str (p, "task_id"), j ? "" : kernel,
                                    j ? "" : akj_str (p, "status"), wl, us, dram, gbs, gfl, sm, dr, pcb, pcf };
            akctl_table_add (t, row);
        }
    }
    akctl_table_print (t, out, s_indent (md), md);
    akctl_table_destroy (&t);
}

static void s_failures (FILE *out, bool md, const json_t *fails)
{
    size_t n = fails ? json_array_size (fails) : 0;
    char title[64];
    snprintf (title, sizeof title, "failures (%zu)", n);
    s_heading (out, md, 3, title);
    if (n == 0)
        return;
    static const char *const head[] = { "TASK", "CANDIDATE", "PARAMS", "STATUS", "REASON" };
    akctl_table_t *t = akctl_table_new (5, head);
    size_t i;
    json_t *f;
    json_array_foreach (fails, i, f) {
        char *params = akctl_params_text (akj_arr (f, "params"));
        const char *row[5] = {
            akj_str (f, "task_id"), akj_str (f, "candidate"), params, akj_str (f, "status"),
            akj_str (f, "reason")
        };
        akctl_table_add (t, row);
        free (params);
    }
    akctl_table_print (t, out, s_indent (md), md);
    akctl_table_destroy (&t);
}

/*  Time per phase, summed over the batch's receipts. */
/*  The GPU timing share line (docs/measurement.md, "GPU timing share"). */
static void s_gpu_timing (FILE *out, bool md, const json_t *gt)
{
    if (!json_is_object (gt) || !json_is_number (json_object_get (gt, "share")))
        return;
    char smp[32], wall[32], task[32];
    double share = akj_num (gt, "share"), of_task = akj_num (gt, "share_of_task_time");
    double dwall = akj_num (gt, "device_wall_ms"), dtask = akj_num (gt, "task_ms");
    akctl_duration (akj_num (gt, "sampled_ms"), smp, sizeof smp);
    akctl_duration (dwall, wall, sizeof wall);
    akctl_duration (dtask, task, sizeof task);
    /* A batch carried across several runs of its workers counts each
       device's wall time within each run (Receipt.worker_started_ms). */
    double devs = akj_num (gt, "devices"), runs = akj_num (gt, "device_runs");
    char in_runs[48] = "";
    if (runs > devs)
        snprintf (in_runs, sizeof in_runs, " in %.0f worker runs", runs);
    if (md)
        fprintf (out, "\nGPU timing share: **%.1f%%** (time inside timed samples %s of %s device wall "
                 "time over %.0f devices%s; %.1f%% of the executors' task time %s)\n",
                 100 * share, smp, wall, devs, in_runs, 100 * of_task, task);
    else
        fprintf (out, "GPU timing share: %.1f%% (inside timed samples %s of %s device wall time, "
                 "%.0f devices%s; %.1f%% of task time %s)\n", 100 * share, smp, wall,
                 devs, in_runs, 100 * of_task, task);
    /* With one task at a time on each device, device wall time less task
       time is the executors' wait between tasks (docs/worker-architecture.md:
       compiles not ready, the coordinator's dispatch); with several slots a
       device's tasks overlap and the difference says nothing. */
    if (dtask > 0 && dtask < dwall) {
        char idle[32];
        akctl_duration (dwall - dtask, idle, sizeof idle);
        fprintf (out, md ? "\nExecutors idle between tasks: **%s** (%.1f%% of the device wall time: compiles not "
                           "ready, or waiting on the coordinator)\n"
                         : "Executors idle between tasks: %s (%.1f%% of the device wall time: compiles not ready, "
                           "or waiting on the coordinator)\n", idle, 100 * (dwall - dtask) / dwall);
    }
}

static void s_phases (FILE *out, bool md, const json_t *phases)
{
    char c[32], g[32], t[32];
    double compile = akj_num (phases, "compile"), gates = akj_num (phases, "gates"),
           timing = akj_num (phases, "timing");
    if (md) {
        s_heading (out, md, 2, "Time per phase");
        static const char *const head[] = { "compile", "gates", "timing" };
        akctl_table_t *tab = akctl_table_new (3, head);
        const char *row[3] = {
            akctl_duration (compile, c, sizeof c), akctl_duration (gates, g, sizeof g),
            akctl_duration (timing, t, sizeof t)
        };
        akctl_table_add (tab, row);
        akctl_table_print (tab, out, "", true);
        akctl_table_destroy (&tab);
        return;
    }
    fprintf (out, "\nTime per phase (all workers): compile %s, gates %s, timing %s\n",
             akctl_duration (compile, c, sizeof c), akctl_duration (gates, g, sizeof g),
             akctl_duration (timing, t, sizeof t));
}

void akctl_render_report (FILE *out, const json_t *report, bool md)
{
    const json_t *sum = akj_obj (report, "batch");
    const json_t *counts = akj_obj (sum, "counts");
    char title[512], dur[32];
    snprintf (title, sizeof title, "Report for batch %s \"%s\"", akj_str (sum, "batch_id"),
              akj_str (sum, "name"));
    if (md)
        fprintf (out, "# %s\n\n", title);
    else
        fprintf (out, "%s\n", title);
    uint64_t created = (uint64_t) akj_int (sum, "created_ms");
    uint64_t finished = (uint64_t) akj_int (sum, "finished_ms");
    fprintf (out, "%s%s; %" PRId64 " tasks: done %" PRId64 ", failed %" PRId64 ", poisoned %" PRId64
             ", cancelled %" PRId64 ", queued %" PRId64 ", leased %" PRId64,
             md ? "" : "  ", akj_str (sum, "state"), akj_int (sum, "total"),
             akj_int (counts, "done"), akj_int (counts, "failed"), akj_int (counts, "poisoned"),
             akj_int (counts, "cancelled"), akj_int (counts, "queued"), akj_int (counts, "leased"));
    if (created && finished >= created)
        fprintf (out, "; took %s", akctl_duration ((double) (finished - created), dur, sizeof dur));
    fprintf (out, "\n");
    json_t *overrides = akj_arr (report, "overrides");
    if (overrides && json_array_size (overrides)) {
        fprintf (out, "%sexternal specs replace the built-in operator%s:", md ? "\n" : "  ",
                 json_array_size (overrides) == 1 ? "" : "s");
        size_t k;
        json_t *v;
        json_array_foreach (overrides, k, v)
            fprintf (out, " %s", json_is_string (v) ? json_string_value (v) : "?");
        fprintf (out, "\n");
    }

    json_t *ops = akj_arr (report, "ops");
    size_t i;
    json_t *op;
    json_array_foreach (ops, i, op) {
        snprintf (title, sizeof title, "%s on %s", akj_str (op, "op"), akj_str (op, "device_class"));
        s_heading (out, md, 2, title);
        s_winner (out, md, akj_obj (op, "winner"));
        s_aggregates (out, md, akj_obj (op, "aggregates"));
        s_preflight (out, md, akj_obj (op, "preflight"));
        s_candidates (out, md, akj_arr (op, "candidates"));
        if (akj_int (op, "pending") > 0)
            fprintf (out, "%s%" PRId64 " task(s) of %s not finished yet\n", md ? "\n" : "    ",
                     akj_int (op, "pending"), akj_str (op, "op"));
        s_failures (out, md, akj_arr (op, "failures"));
        s_profiles (out, md, akj_arr (op, "profiles"));
    }
    if (!ops || json_array_size (ops) == 0)
        fprintf (out, "%sno operator results yet\n", md ? "\n" : "\n  ");
    s_phases (out, md, akj_obj (report, "phases_ms"));
    s_gpu_timing (out, md, akj_obj (report, "gpu_timing"));
}
