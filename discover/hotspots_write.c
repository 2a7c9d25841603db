/*  discover/hotspots_write.c: hotspots.json, hotspots.md, the batch
    manifest and the shape corpora of `akctl discover` (hotspots.h;
    formats in docs/formats.md, "Discover outputs"). */
#include "hotspots.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define S_MD_ROWS 25

static double s_pct (double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0;
}

static double s_round (double v, double unit)
{
    return round (v / unit) * unit;
}

/* One ranked row: per-step figures and the Amdahl ceiling. */
static json_t *s_row_json (const akd_hotspots_t *h, const akd_row_t *r, bool range)
{
    double per_step = r->gpu_ns / h->steps;
    json_t *o = json_pack ("{s:s, s:f, s:f, s:I, s:f, s:f}",
                           "name", r->key,
                           "gpu_us_per_step", s_round (per_step / 1e3, 0.001),
                           "pct_of_step_gpu", s_round (s_pct (r->gpu_ns, h->gpu_ns), 0.01),
                           "launches", (json_int_t) r->launches,
                           "mean_us", s_round (r->launches ? r->gpu_ns / r->launches / 1e3 : 0, 0.001),
                           "short_launch_share", s_round (r->launches ? (double) r->short_launches / r->launches : 0,
                                                          0.0001));
    if (range)
        json_object_set_new (o, "self_us_per_step", json_real (s_round (r->self_ns / h->steps / 1e3, 0.001)));
    if (r->detail && !range)
        json_object_set_new (o, "demangled", json_string (r->detail));
    if (!range)
        json_object_set_new (o, "graph", json_boolean (r->graph));
    if (!range && r->first) {
        const akd_kernel_t *k = r->first;
        json_object_set_new (o, "first_launch",
                             json_pack ("{s:[i,i,i], s:[i,i,i], s:[I,I,I], s:I, s:i, s:i}",
                                        "grid", k->grid[0], k->grid[1], k->grid[2],
                                        "block", k->block[0], k->block[1], k->block[2],
                                        "cluster", (json_int_t) k->cluster[0], (json_int_t) k->cluster[1],
                                        (json_int_t) k->cluster[2], "registers", (json_int_t) k->regs,
                                        "smem_static", k->smem_static, "smem_dynamic", k->smem_dynamic));
    }
    json_object_set_new (o, "step_us_if_zero", json_real (s_round (akd_amdahl (h->step_ns, per_step, 0) / 1e3, 0.001)));
    json_object_set_new (o, "step_us_if_2x", json_real (s_round (akd_amdahl (h->step_ns, per_step, 2) / 1e3, 0.001)));
    return o;
}

json_t *akd_hotspots_json (const akd_hotspots_t *h, const akd_trace_t *t, const char *device_class)
{
    json_t *ranges = json_array (), *kernels = json_array (), *wl = json_array (), *un = json_array ();
    for (size_t i = 0; i < h->nranges; i++)
        json_array_append_new (ranges, s_row_json (h, &h->ranges[i], true));
    for (size_t i = 0; i < h->nkernels; i++)
        json_array_append_new (kernels, s_row_json (h, &h->kernels[i], false));
    for (size_t i = 0; i < h->nworkloads; i++) {
        const akd_workload_t *w = &h->workloads[i];
        json_t *size = json_object ();
        for (int k = 0; k < w->map.nkeys; k++)
            json_object_set_new (size, w->map.keys[k], json_integer (w->map.values[k]));
        json_array_append_new (wl, json_pack ("{s:s, s:s, s:o, s:s, s:f, s:f, s:I, s:s}",
                                              "op", w->map.op, "name", w->name, "size", size,
                                              "dtype", w->map.dtype,
                                              "gpu_us_per_step", s_round (w->gpu_ns / h->steps / 1e3, 0.001),
                                              "pct_of_step_gpu", s_round (s_pct (w->gpu_ns, h->gpu_ns), 0.01),
                                              "launches", (json_int_t) w->launches, "range", w->example));
    }
    for (size_t i = 0; i < h->nunmapped; i++) {
        const akd_row_t *r = &h->unmapped[i];
        json_array_append_new (un, json_pack ("{s:s, s:s, s:f, s:f, s:I}", "range", r->key,
                                              "why", r->detail ? r->detail : "",
                                              "gpu_us_per_step", s_round (r->gpu_ns / h->steps / 1e3, 0.001),
                                              "pct_of_step_gpu", s_round (s_pct (r->gpu_ns, h->gpu_ns), 0.01),
                                              "launches", (json_int_t) r->launches));
    }
    json_t *o = json_pack ("{s:i, s:s?, s:b, s:{s:i, s:f, s:s, s:f, s:f, s:f, s:f}}",
                           "schema_version", 1, "device_class", device_class,
                           "partial", akd_trace_partial (t),
                           "totals", "steps", h->steps,
                           "step_us", s_round (h->step_ns / 1e3, 0.001),
                           "step_time_from", h->step_from_ranges ? "step ranges" : "kernel span",
                           "gpu_us_per_step", s_round (h->gpu_ns / h->steps / 1e3, 0.001),
                           "pct_gpu_time_in_named_range", s_round (s_pct (h->named_ns, h->gpu_ns), 0.01),
                           "pct_gpu_time_mapped_to_catalog", s_round (s_pct (h->catalog_ns, h->gpu_ns), 0.01),
                           "short_kernel_threshold_us", AKD_SHORT_NS / 1e3);
    json_t *totals = json_object_get (o, "totals");
    json_object_set_new (totals, "sample", json_integer (h->sample));
    json_object_set_new (totals, "steps_seen", json_integer (h->steps_seen));
    json_object_set_new (totals, "kernels_unsampled", json_integer ((json_int_t) h->unsampled));
    json_object_set_new (totals, "kernels_untimed", json_integer ((json_int_t) h->untimed));
    json_object_set_new (totals, "sampled_steps_overlap", json_boolean (h->sample > 1 && h->steps_overlap));
    if (h->sample > 1) {
        /* the steps by place in the sampling cycle, and the run's own
           estimate of what sampling added (akd_sample_cost_pct) */
        static const char *const places[3] = { "traced", "after_traced", "rest" };
        json_t *ps = json_object ();
        for (int p = 0; p < 3; p++)
            json_object_set_new (ps, places[p], json_pack ("{s:i, s:f}", "steps", h->place_n[p], "mean_us",
                                                           s_round (h->place_ns[p] / 1e3, 0.001)));
        const double cost = akd_sample_cost_pct (h);
        json_object_set_new (ps, "added_pct", isnan (cost) ? json_null () : json_real (s_round (cost, 0.01)));
        json_object_set_new (totals, "sample_steps", ps);
    }
    json_t *trace = json_pack ("{s:s, s:b, s:i, s:I, s:I}", "step_range", t->step_range ? t->step_range : "",
                               "ended", t->ended, "signal", t->signal, "dropped_records", (json_int_t) t->dropped,
                               "bad_lines", (json_int_t) t->bad_lines);
    json_object_set_new (o, "trace", trace);
    json_object_set_new (o, "ranges", ranges);
    json_object_set_new (o, "kernels", kernels);
    json_object_set_new (o, "workloads", wl);
    json_object_set_new (o, "unmapped", un);
    return o;
}

/* Markdown cells: '|' and newlines would break the table. */
static void s_cell (char *out, size_t cap, const char *text, size_t max)
{
    size_t o = 0;
    for (const char *p = text; *p && o + 4 < cap && o < max; p++)
        out[o++] = *p == '|' ? '/' : (*p == '\n' || *p == '\r') ? ' ' : *p;
    if (*text && strlen (text) > max && o + 4 < cap) {
        memcpy (out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static void s_md_rows (char **md, const akd_hotspots_t *h, const akd_row_t *rows, size_t n, bool kernel)
{
    char *s = *md;
    for (size_t i = 0; i < n && i < S_MD_ROWS; i++) {
        const akd_row_t *r = &rows[i];
        char name[240];
        s_cell (name, sizeof name, kernel && r->detail ? r->detail : r->key, 120);
        double per = r->gpu_ns / h->steps;
        char *line = ak_sprintf ("| %zu | %s%s | %.1f | %.1f%% | %ld | %.2f | %.0f%% | %.1f | %.1f |\n", i + 1, name,
                                 kernel && r->graph ? " (graph)" : "", per / 1e3, s_pct (r->gpu_ns, h->gpu_ns),
                                 r->launches, r->launches ? r->gpu_ns / r->launches / 1e3 : 0,
                                 r->launches ? 100.0 * (double) r->short_launches / r->launches : 0,
                                 akd_amdahl (h->step_ns, per, 0) / 1e3, akd_amdahl (h->step_ns, per, 2) / 1e3);
        char *next = ak_sprintf ("%s%s", s, line);
        free (line);
        free (s);
        s = next;
    }
    if (n > S_MD_ROWS) {
        char *next = ak_sprintf ("%s\n(%zu more in hotspots.json)\n", s, n - S_MD_ROWS);
        free (s);
        s = next;
    }
    *md = s;
}

static char *s_cat (char *s, const char *add)
{
    char *next = ak_sprintf ("%s%s", s, add);
    free (s);
    return next;
}

char *akd_hotspots_markdown (const akd_hotspots_t *h, const akd_trace_t *t, const char *device_class)
{
    static const char head[] = "| # | %s | GPU us/step | %% of step GPU | launches | mean us | < 5 us | "
                               "step us if 0 | step us if 2x |\n|---|---|---|---|---|---|---|---|---|\n";
    char *smp = h->sample > 1
                ? ak_sprintf ("\n\n**Sampled**: 1 step in %ld was traced (%d of the window's %d steps); the GPU "
                              "figures are those steps', the step time is the mean of the others (which ran "
                              "without kernel records) where there are any, less the step right after each traced "
                              "one (it pays for the records' switch) where others remain; %zu kernel%s launched "
                              "outside a traced "
                              "step left out.%s", h->sample, h->steps, h->steps_seen, h->unsampled,
                              h->unsampled == 1 ? "" : "s",
                              h->steps_overlap ? "  **Steps overlapped** (several threads ran steps at once): the "
                                                 "kernel records are switched for the whole process, so the traced "
                                                 "steps' figures may hold other steps' kernels or miss their own; "
                                                 "run with --sample 1." : "")
                : ak_strdup ("");
    if (h->sample > 1) {
        const double cost = akd_sample_cost_pct (h);
        char est[200] = "";
        if (!isnan (cost))
            snprintf (est, sizeof est, ": sampling added about %.1f%% a step against the others (what "
                      "every step pays for the injection is not in it: compare a run without akctl discover)",
                      cost);
        char *u = ak_sprintf ("%s\n\nStep times by place in the sampling cycle: traced %.1f us (%d), the step "
                              "after each %.1f us (%d), the others %.1f us (%d)%s.", smp,
                              h->place_ns[AKD_PLACE_TRACED] / 1e3, h->place_n[AKD_PLACE_TRACED],
                              h->place_ns[AKD_PLACE_AFTER] / 1e3, h->place_n[AKD_PLACE_AFTER],
                              h->place_ns[AKD_PLACE_REST] / 1e3, h->place_n[AKD_PLACE_REST], est);
        free (smp);
        smp = u;
    }
    if (h->untimed) {
        char *u = ak_sprintf ("%s\n\n**Kernel records without timestamps**: %zu (CUPTI's 0), left out "
                              "of every figure.", smp, h->untimed);
        free (smp);
        smp = u;
    }
    char *s = ak_sprintf ("# Hotspots\n\nDevice class: %s. Steps: %d (range \"%s\"), step time %.1f us (from %s), "
                          "GPU time %.1f us per step.\nGPU time under a named range: %.1f%%; mapped to a catalog "
                          "operator: %.1f%%.%s%s\n\nThe Amdahl columns assume the range's GPU time is on the step's "
                          "critical path: they are ceilings.\n\n## Ranges (inclusive)\n\n",
                          device_class ? device_class : "unknown", h->steps, t->step_range ? t->step_range : "",
                          h->step_ns / 1e3, h->step_from_ranges ? "the step ranges" : "the kernels' span",
                          h->gpu_ns / h->steps / 1e3, s_pct (h->named_ns, h->gpu_ns), s_pct (h->catalog_ns, h->gpu_ns),
                          akd_trace_partial (t) ? "\n\n**Partial trace**: the program did not finish normally or "
                                                  "CUPTI dropped records; figures cover what was recorded." : "",
                          smp);
    free (smp);
    char *hd = ak_sprintf (head, "range");
    s = s_cat (s, hd);
    free (hd);
    s_md_rows (&s, h, h->ranges, h->nranges, false);
    s = s_cat (s, "\n## Kernels\n\n");
    hd = ak_sprintf (head, "kernel");
    s = s_cat (s, hd);
    free (hd);
    s_md_rows (&s, h, h->kernels, h->nkernels, true);
    s = s_cat (s, "\n## Catalog workloads (batch.json)\n\n| op | workload | dtype | GPU us/step | % of step GPU |"
                  " launches |\n|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < h->nworkloads; i++) {
        const akd_workload_t *w = &h->workloads[i];
        char *line = ak_sprintf ("| %s | %s | %s | %.1f | %.1f%% | %ld |\n", w->map.op, w->name, w->map.dtype,
                                 w->gpu_ns / h->steps / 1e3, s_pct (w->gpu_ns, h->gpu_ns), w->launches);
        s = s_cat (s, line);
        free (line);
    }
    if (h->nworkloads == 0)
        s = s_cat (s, "(none: no range maps to a catalog operator; no batch written)\n");
    s = s_cat (s, "\n## Not in the catalog\n\n| range | why | GPU us/step | % of step GPU | launches |\n"
                  "|---|---|---|---|---|\n");
    for (size_t i = 0; i < h->nunmapped; i++) {
        const akd_row_t *r = &h->unmapped[i];
        char name[240], why[240];
        s_cell (name, sizeof name, r->key, 120);
        s_cell (why, sizeof why, r->detail ? r->detail : "", 160);
        char *line = ak_sprintf ("| %s | %s | %.1f | %.1f%% | %ld |\n", name, why, r->gpu_ns / h->steps / 1e3,
                                 s_pct (r->gpu_ns, h->gpu_ns), r->launches);
        s = s_cat (s, line);
        free (line);
    }
    return s;
}

static int s_write_json (const char *dir, const char *name, json_t *doc, ak_err_t *err)
{
    char *path = ak_path_join (dir, name);
    char *text = json_dumps (doc, JSON_INDENT (2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION (10));
    int rc = text ? ak_file_write_atomic (path, text, strlen (text), err)
                  : ak_err_set (err, AK_EINTERNAL, "%s: cannot encode", path);
    free (text);
    free (path);
    return rc;
}

int akd_hotspots_write (const akd_hotspots_t *h, const akd_trace_t *t, const char *dir,
                        const char *device_class, const char *catalog_dir, ak_err_t *err)
{
    int rc = ak_mkdir_p (dir, 0755, err);
    if (rc)
        return rc;
    json_t *doc = akd_hotspots_json (h, t, device_class);
    rc = s_write_json (dir, "hotspots.json", doc, err);
    json_decref (doc);
    if (rc)
        return rc;
    char *md = akd_hotspots_markdown (h, t, device_class);
    char *path = ak_path_join (dir, "hotspots.md");
    rc = ak_file_write_atomic (path, md, strlen (md), err);
    free (path);
    free (md);
    if (rc || h->nworkloads == 0)
        return rc;

    /* ---- a corpus per operator, and the batch naming them */
    json_t *ops = json_array ();
    for (size_t i = 0; i < h->nworkloads && rc == 0; i++) {
        const char *op = h->workloads[i].map.op;
        bool done = false;
        for (size_t j = 0; j < i && !done; j++)
            done = strcmp (h->workloads[j].map.op, op) == 0;
        if (done)
            continue;
        json_t *cases = json_array ();
        for (size_t j = i; j < h->nworkloads; j++) {
            const akd_workload_t *w = &h->workloads[j];
            if (strcmp (w->map.op, op) != 0)
                continue;
            json_t *size = json_object ();
            for (int k = 0; k < w->map.nkeys; k++)
                json_object_set_new (size, w->map.keys[k], json_integer (w->map.values[k]));
            double weight = s_round (s_pct (w->gpu_ns, h->gpu_ns), 0.0001);
            json_array_append_new (cases, json_pack ("{s:s, s:o, s:s, s:f, s:[s]}", "name", w->name, "sizes", size,
                                                     "dtype", w->map.dtype, "weight", weight > 0 ? weight : 0.0001,
                                                     "tags", "discover"));
        }
        char *desc = ak_sprintf ("Shapes measured by akctl discover; weights are %% of the program's GPU time "
                                 "per step (%d steps).", h->steps);
        json_t *corpus = json_pack ("{s:i, s:s, s:s, s:o}", "schema_version", 1, "operation", op,
                                    "description", desc, "cases", cases);
        free (desc);
        char *name = ak_sprintf ("%s.corpus.json", op);
        rc = s_write_json (dir, name, corpus, err);
        json_decref (corpus);
        char *spec = ak_sprintf ("%s/%s/spec.json", catalog_dir, op);
        json_array_append_new (ops, json_pack ("{s:s, s:s}", "spec", spec, "corpus", name));
        free (spec);
        free (name);
    }
    if (rc == 0) {
        json_t *batch = json_pack ("{s:i, s:s, s:[s], s:O}", "schema_version", 1, "name", "discover",
                                   "targets", device_class, "ops", ops);
        rc = s_write_json (dir, "batch.json", batch, err);
        json_decref (batch);
    }
    json_decref (ops);
    return rc;
}
