/*  ops/akctl/render.c: the human forms of status, list, show, receipts,
    workers and stats (report has its own file).  Each renderer takes the
    parsed answer documented in docs/client-api.md and prints what an
    operator reads first at the top: state and counts, then the detail. */
#include "akctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* --------------------------------------------------------------- batches */

/*  "20/23" style progress of a BATCHSUM: terminal tasks over all. */
static void s_progress (const json_t *sum, char *buf, size_t len)
{
    const json_t *c = akj_obj (sum, "counts");
    int64_t terminal = akj_int (c, "done") + akj_int (c, "failed") + akj_int (c, "poisoned")
                     + akj_int (c, "cancelled");
    snprintf (buf, len, "%" PRId64 "/%" PRId64, terminal, akj_int (sum, "total"));
}

void akctl_render_list (FILE *out, const json_t *answer)
{
    json_t *batches = akj_arr (answer, "batches");
    akctl_render_notices (out, answer, "");
    if (!batches || json_array_size (batches) == 0) {
        fprintf (out, "no batches\n");
        return;
    }
    static const char *const head[] = {
        "BATCH", "NAME", "STATE", "FINISHED", "DONE", "FAILED", "POISONED", "CANCELLED",
        "QUEUED", "LEASED", "CREATED"
    };
    akctl_table_t *t = akctl_table_new (11, head);
    size_t i;
    json_t *b;
    json_array_foreach (batches, i, b) {
        const json_t *c = akj_obj (b, "counts");
        char prog[48], n[6][24], when[40];
        s_progress (b, prog, sizeof prog);
        const char *keys[6] = { "done", "failed", "poisoned", "cancelled", "queued", "leased" };
        for (int k = 0; k < 6; k++)
            snprintf (n[k], sizeof n[k], "%" PRId64, akj_int (c, keys[k]));
        const char *row[11] = {
            akj_str (b, "batch_id"), akj_str (b, "name"), akj_str (b, "state"), prog,
            n[0], n[1], n[2], n[3], n[4], n[5],
            akctl_when ((uint64_t) akj_int (b, "created_ms"), when, sizeof when)
        };
        akctl_table_add (t, row);
    }
    akctl_table_print (t, out, "", false);
    akctl_table_destroy (&t);
    json_array_foreach (batches, i, b) {
        size_t k;
        json_t *w;
        json_array_foreach (akj_arr (b, "waiting"), k, w)
            fprintf (out, "%s waiting: %s\n", akj_str (b, "batch_id"), akj_str (w, "why"));
    }
}

void akctl_render_notices (FILE *out, const json_t *sum, const char *prefix)
{
    size_t i;
    json_t *w;
    json_array_foreach (akj_arr (sum, "waiting"), i, w)
        fprintf (out, "%swaiting: %s\n", prefix, akj_str (w, "why"));
    const json_t *se = akj_obj (sum, "store_error");
    if (se) {
        char when[40];
        fprintf (out, "%sSTORE ERROR: %s (since %s, %" PRId64 " failed commits)\n", prefix,
                 akj_str (se, "error"), akctl_when ((uint64_t) akj_int (se, "since_ms"), when, sizeof when),
                 akj_int (se, "failures"));
    }
}

/*  Winners of a batch (BATCHSUM.winners) as a table. */
static void s_winners (FILE *out, const json_t *winners, const char *indent)
{
    static const char *const head[] = { "OP", "CLASS", "WINNER", "PARAMS", "SPEEDUP", "TASK" };
    akctl_table_t *t = akctl_table_new (6, head);
    size_t i;
    json_t *w;
    json_array_foreach (winners, i, w) {
        bool promoted = akj_bool (w, "promoted");
        char *params = akctl_params_text (akj_arr (w, "params"));
        char sp[64];
        const char *row[6] = {
            akj_str (w, "op"), akj_str (w, "device_class"),
            promoted ? akj_str (w, "candidate_name") : "baseline kept",
            promoted ? params : "-",
            promoted ? akctl_speedup (akj_num (w, "speedup"), akj_num (w, "noise"), sp, sizeof sp) : "-",
            promoted ? akj_str (w, "task_id") : "-"
        };
        akctl_table_add (t, row);
        free (params);
    }
    akctl_table_print (t, out, indent, false);
    akctl_table_destroy (&t);
}

/*  The search summary and the rounds of a batch (`status BATCH`):
    "softmax on host: vectorized halving, 4 of 7 valid sampled, keep 2 in 2 stages"
    and "softmax on host: tune stage 1 4/4, tune stage 2 2/2, confirm 1/1". */
static void s_search (FILE *out, const json_t *sum)
{
    size_t i;
    json_t *v;
    json_array_foreach (akj_arr (sum, "search"), i, v) {
        fprintf (out, "  %s %s on %s: %s %s, ", i ? "         " : "search   ", akj_str (v, "op"),
                 akj_str (v, "device_class"), akj_str (v, "candidate_name"), akj_str (v, "strategy"));
        if (strcmp (akj_str (v, "strategy"), "halving") == 0)
        {
            fprintf (out, "%" PRId64 " of %" PRId64 " valid sampled", akj_int (v, "sampled"), akj_int (v, "valid"));
            if (akj_int (v, "seeded") > 0) {
                fprintf (out, " (%" PRId64 " of them seeds", akj_int (v, "seeded"));
                if (akj_int (v, "installed") > 0)
                    fprintf (out, ", %" PRId64 " from installed profiles", akj_int (v, "installed"));
                fputc (')', out);
            }
            if (akj_int (v, "refined") > 0)
                fprintf (out, " and %" PRId64 " of their neighbours", akj_int (v, "refined"));
            fprintf (out, ", keep %" PRId64 " in %" PRId64 " stages\n", akj_int (v, "keep"), akj_int (v, "rounds"));
        }
        else
            fprintf (out, "all %" PRId64 " valid\n", akj_int (v, "valid"));
    }
    size_t shown = 0;
    json_array_foreach (akj_arr (sum, "rounds"), i, v) {
        if (strcmp (akj_str (v, "kind"), "tune") == 0 && akj_int (v, "stage") == 0)
            continue;               /* exhaustive: the task counts say it all */
        fprintf (out, "  %s %s on %s: %s", shown++ ? "         " : "rounds   ", akj_str (v, "op"),
                 akj_str (v, "device_class"), akj_str (v, "kind"));
        if (strcmp (akj_str (v, "kind"), "tune") == 0)
            fprintf (out, " stage %" PRId64, akj_int (v, "stage"));
        fprintf (out, " %" PRId64 "/%" PRId64 " finished\n", akj_int (v, "finished"), akj_int (v, "total"));
    }
}

void akctl_render_batch (FILE *out, const json_t *sum)
{
    const json_t *c = akj_obj (sum, "counts");
    char when[40], dur[32], prog[48];
    fprintf (out, "Batch %s \"%s\": %s\n", akj_str (sum, "batch_id"), akj_str (sum, "name"),
             akj_str (sum, "state"));
    json_t *targets = akj_arr (sum, "targets");
    fprintf (out, "  targets   ");
    size_t i;
    json_t *v;
    json_array_foreach (targets, i, v)
        fprintf (out, "%s%s", i ? ", " : "", json_is_string (v) ? json_string_value (v) : "?");
    fprintf (out, "%s\n", targets && json_array_size (targets) ? "" : "-");
    uint64_t created = (uint64_t) akj_int (sum, "created_ms");
    uint64_t finished = (uint64_t) akj_int (sum, "finished_ms");
    fprintf (out, "  created   %s\n", akctl_when (created, when, sizeof when));
    if (finished) {
        fprintf (out, "  finished  %s", akctl_when (finished, when, sizeof when));
        if (created && finished >= created)
            fprintf (out, " (took %s)", akctl_duration ((double) (finished - created), dur, sizeof dur));
        fprintf (out, "\n");
    }
    s_progress (sum, prog, sizeof prog);
    fprintf (out, "  tasks     %s finished: done %" PRId64 ", failed %" PRId64 ", poisoned %" PRId64
             ", cancelled %" PRId64 "; queued %" PRId64 ", leased %" PRId64 "\n",
             prog, akj_int (c, "done"), akj_int (c, "failed"), akj_int (c, "poisoned"),
             akj_int (c, "cancelled"), akj_int (c, "queued"), akj_int (c, "leased"));
    akctl_render_notices (out, sum, "  ");
    s_search (out, sum);
    json_t *winners = akj_arr (sum, "winners");
    if (winners && json_array_size (winners)) {
        fprintf (out, "  winners\n");
        s_winners (out, winners, "    ");
    }
}

/*  "B000001.0003 (attempt 2), ..." for at most 8 entries of a list of
    {task_id, attempt}, then how many more. */
static void s_task_list (FILE *out, const json_t *tasks)
{
    size_t i, n = json_array_size (tasks);
    json_t *t;
    json_array_foreach (tasks, i, t) {
        if (i == 8) {
            fprintf (out, ", and %zu more", n - i);
            break;
        }
        fprintf (out, "%s%s (attempt %" PRId64 ")", i ? ", " : "", akj_str (t, "task_id"),
                 akj_int (t, "attempt"));
    }
}

void akctl_render_resume (FILE *out, const json_t *answer)
{
    json_t *requeued = akj_arr (answer, "requeued"), *poisoned = akj_arr (answer, "poisoned");
    size_t n = json_array_size (requeued), np = json_array_size (poisoned);
    if (n + np == 0)
        fprintf (out, "resume %s: no lease to take back", akj_str (answer, "batch_id"));
    else {
        fprintf (out, "resume %s: %zu lease%s nobody ran re-queued", akj_str (answer, "batch_id"),
                 n, n == 1 ? "" : "s");
        if (n) {
            fprintf (out, ": ");
            s_task_list (out, requeued);
        }
        if (np) {
            fprintf (out, "; %zu poisoned (attempts used up): ", np);
            s_task_list (out, poisoned);
        }
    }
    fprintf (out, "; %" PRId64 " running on live workers, %" PRId64 " queued\n",
             akj_int (answer, "running"), akj_int (answer, "queued"));
    akctl_render_batch (out, akj_obj (answer, "batch"));
}

void akctl_render_retry (FILE *out, const json_t *answer)
{
    json_t *retried = akj_arr (answer, "retried");
    size_t n = json_array_size (retried);
    if (n == 0)
        fprintf (out, "retry %s: no failed or poisoned task to retry\n", akj_str (answer, "batch_id"));
    else {
        fprintf (out, "retry %s: %zu failed or poisoned task%s re-queued: ", akj_str (answer, "batch_id"),
                 n, n == 1 ? "" : "s");
        s_task_list (out, retried);
        fprintf (out, "%s\n", akj_bool (answer, "reopened") ? "; the batch is open again" : "");
    }
    akctl_render_batch (out, akj_obj (answer, "batch"));
}

/* ----------------------------------------------------------------- tasks */

/*  Gate results of a receipt, one line per stage. */
static void s_gates (FILE *out, const json_t *gates)
{
    static const char *const head[] = { "STAGE", "RESULT", "CONFIGS", "FAILED", "WORST ERR", "AT", "DETAIL" };
    akctl_table_t *t = akctl_table_new (7, head);
    size_t i;
    json_t *g;
    json_array_foreach (gates, i, g) {
        char configs[24], failed[24], worst[32];
        snprintf (configs, sizeof configs, "%" PRId64, akj_int (g, "configs"));
        snprintf (failed, sizeof failed, "%" PRId64, akj_int (g, "failed"));
        snprintf (worst, sizeof worst, "%.3g", akj_num (g, "worst_err"));
        const char *row[7] = {
            akj_str (g, "stage"),
            akj_bool (g, "skipped") ? "skipped" : akj_bool (g, "passed") ? "pass" : "FAIL",
            configs, failed, worst, akj_str (g, "worst_at"), akj_str (g, "detail")
        };
        akctl_table_add (t, row);
    }
    akctl_table_print (t, out, "    ", false);
    akctl_table_destroy (&t);
}

/*  Timings of a receipt: per workload, candidate and baseline medians and
    the speedup with its noise. */
static void s_timings (FILE *out, const json_t *timings)
{
    static const char *const head[] = { "WORKLOAD", "DTYPE", "DIMS", "KERNEL", "N", "BASELINE", "SPEEDUP", "RSD MET" };
    akctl_table_t *t = akctl_table_new (8, head);
    size_t i;
    json_t *w;
    json_array_foreach (timings, i, w) {
        const json_t *wl = akj_obj (w, "workload");
        const json_t *cand = akj_obj (w, "candidate");
        const json_t *base = akj_obj (w, "baseline");
        char *dims = akctl_dims_text (akj_arr (wl, "dims"));
        char k[32], b[32], n[24], sp[64];
        snprintf (n, sizeof n, "%" PRId64, akj_int (cand, "n"));
        const char *row[8] = {
            akj_str (wl, "name"), akj_str (wl, "dtype"), dims,
            akctl_micros (akj_num (cand, "median_us"), k, sizeof k), n,
            akctl_micros (akj_num (base, "median_us"), b, sizeof b),
            akctl_speedup (akj_num (w, "speedup"), akj_num (w, "speedup_noise"), sp, sizeof sp),
            akj_bool (w, "rsd_met") ? "yes" : "no"
        };
        akctl_table_add (t, row);
        free (dims);
    }
    akctl_table_print (t, out, "    ", false);
    akctl_table_destroy (&t);
}

void akctl_render_show (FILE *out, const json_t *answer)
{
    const json_t *task = akj_obj (answer, "task");
    json_t *receipts = akj_arr (answer, "receipts");
    char when[40], *params = akctl_params_text (akj_arr (task, "params"));
    fprintf (out, "Task %s (batch %s): %s", akj_str (task, "task_id"), akj_str (task, "batch_id"),
             akj_str (task, "state"));
    if (*akj_str (task, "status"))
        fprintf (out, ", %s", akj_str (task, "status"));
    fprintf (out, "\n");
    fprintf (out, "  kind       %s\n", akj_str (task, "kind"));
    if (akj_int (task, "stage"))
        fprintf (out, "  stage      %" PRId64 " of %" PRId64 " (successive halving%s)\n", akj_int (task, "stage"),
                 akj_int (akj_obj (task, "policy"), "search_rounds"),
                 akj_int (task, "stage") < akj_int (akj_obj (task, "policy"), "search_rounds") ? ", short timing" : "");
    if (*akj_str (task, "confirm_of"))
        fprintf (out, "  confirms   %s, on fresh inputs, away from %s\n", akj_str (task, "confirm_of"),
                 *akj_str (task, "avoid_worker") ? akj_str (task, "avoid_worker") : "-");
    fprintf (out, "  operator   %s on %s (backend %s)%s\n", akj_str (task, "op"),
             akj_str (task, "device_class"), akj_str (task, "backend"),
             akj_bool (answer, "override_builtin") ? ", external spec overriding the built-in" : "");
    if (*akj_str (task, "candidate_name"))
        fprintf (out, "  candidate  %s %s (%s)\n", akj_str (task, "candidate_name"), params,
                 akj_str (task, "candidate_source_name"));
    else
        fprintf (out, "  baseline   %s\n", akj_str (task, "baseline_name"));
    fprintf (out, "  workloads  %zu\n", json_array_size (akj_arr (task, "workloads")));
    fprintf (out, "  attempt    %" PRId64 " of %" PRId64 "\n", akj_int (task, "attempt"),
             akj_int (akj_obj (task, "policy"), "max_attempts"));
    if (*akj_str (task, "worker_id"))
        fprintf (out, "  worker     %s\n", akj_str (task, "worker_id"));
    fprintf (out, "  queued     %s\n", akctl_when ((uint64_t) akj_int (task, "queued_ms"), when, sizeof when));
    if (akj_int (task, "leased_ms"))
        fprintf (out, "  leased     %s\n", akctl_when ((uint64_t) akj_int (task, "leased_ms"), when, sizeof when));
    if (akj_int (task, "finished_ms"))
        fprintf (out, "  finished   %s\n", akctl_when ((uint64_t) akj_int (task, "finished_ms"), when, sizeof when));
    if (*akj_str (task, "receipt_id"))
        fprintf (out, "  receipt    %s (accepted), %" PRId64 " duplicate(s)\n",
                 akj_str (task, "receipt_id"), akj_int (task, "duplicates"));
    if (*akj_str (task, "last_error"))
        fprintf (out, "  last error %s\n", akj_str (task, "last_error"));
    free (params);

    size_t nreceipts = receipts ? json_array_size (receipts) : 0;
    fprintf (out, "\nReceipts (%zu)\n", nreceipts);
    if (nreceipts == 0)
        return;
    static const char *const head[] = { "RECEIPT", "ATTEMPT", "WORKER", "HOST", "DEVICE", "STATUS", "DUPLICATE", "RECEIVED", "REASON" };
    akctl_table_t *t = akctl_table_new (9, head);
    size_t i;
    json_t *r;
    const json_t *accepted = NULL;
    json_array_foreach (receipts, i, r) {
        char att[24];
        snprintf (att, sizeof att, "%" PRId64, akj_int (r, "attempt"));
        bool dup = akj_bool (r, "duplicate");
        const char *row[9] = {
            akj_str (r, "receipt_id"), att, akj_str (r, "worker_id"), akj_str (r, "host"),
            akj_str (akj_obj (r, "device"), "name"), akj_str (r, "status"), dup ? "yes" : "no",
            akctl_when ((uint64_t) akj_int (r, "received_at_ms"), when, sizeof when),
            akj_str (r, "reason")
        };
        akctl_table_add (t, row);
        if (!dup && (!accepted || strcmp (akj_str (r, "receipt_id"), akj_str (task, "receipt_id")) == 0))
            accepted = r;
    }
    akctl_table_print (t, out, "  ", false);
    akctl_table_destroy (&t);
    if (!accepted)
        return;

    char ms[3][32];
    fprintf (out, "\nReceipt %s: compile %s, gates %s, timing %s\n", akj_str (accepted, "receipt_id"),
             akctl_duration (akj_num (accepted, "compile_ms"), ms[0], sizeof ms[0]),
             akctl_duration (akj_num (accepted, "gate_ms"), ms[1], sizeof ms[1]),
             akctl_duration (akj_num (accepted, "timing_ms"), ms[2], sizeof ms[2]));
    if (*akj_str (accepted, "source_digest"))
        fprintf (out, "  source sha256 %s\n", akj_str (accepted, "source_digest"));
    json_t *gates = akj_arr (accepted, "gates");
    if (gates && json_array_size (gates)) {
        fprintf (out, "  gates\n");
        s_gates (out, gates);
    }
    json_t *timings = akj_arr (accepted, "timings");
    if (timings && json_array_size (timings)) {
        fprintf (out, "  timings\n");
        s_timings (out, timings);
    }
    json_t *budgets = akj_arr (accepted, "budgets");
    if (budgets && json_array_size (budgets)) {
        size_t k;
        json_t *b;
        fprintf (out, "  kernels (register budget)\n");
        json_array_foreach (budgets, k, b) {
            if (strncmp (akj_str (b, "arch"), "library:", 8) == 0) {
                fprintf (out, "    %-9s %-8s %s\n", akj_str (b, "role"), akj_str (b, "dtype"), akj_str (b, "arch"));
                continue;
            }
            fprintf (out, "    %-9s %-8s %-7s %3" PRId64 " registers, %" PRId64 " B local (spills)%s, %" PRId64
                     " B static shared, at most %" PRId64 " threads/block\n", akj_str (b, "role"),
                     akj_str (b, "dtype"), akj_str (b, "arch"), akj_int (b, "registers"), akj_int (b, "local_bytes"),
                     akj_int (b, "local_bytes") ? " SPILLS" : "", akj_int (b, "static_shared"),
                     akj_int (b, "max_threads"));
        }
    }
    const char *log = akj_str (accepted, "compile_log");
    if (*log)
        fprintf (out, "  compiler output\n%s%s", log, log[strlen (log) - 1] == '\n' ? "" : "\n");
}

void akctl_render_receipts (FILE *out, const json_t *answer)
{
    json_t *receipts = akj_arr (answer, "receipts");
    size_t n = receipts ? json_array_size (receipts) : 0;
    static const char *const head[] = { "RECEIPT", "TASK", "ATTEMPT", "WORKER", "KIND", "OP", "CANDIDATE", "PARAMS", "STATUS", "DUPLICATE", "REASON" };
    akctl_table_t *t = akctl_table_new (11, head);
    size_t i, dups = 0;
    json_t *r;
    json_array_foreach (receipts, i, r) {
        char att[24], *params = akctl_params_text (akj_arr (r, "params"));
        snprintf (att, sizeof att, "%" PRId64, akj_int (r, "attempt"));
        bool dup = akj_bool (r, "duplicate");
        dups += dup;
        const char *row[11] = {
            akj_str (r, "receipt_id"), akj_str (r, "task_id"), att, akj_str (r, "worker_id"),
            akj_str (r, "kind"), akj_str (r, "op"), akj_str (r, "candidate_name"), params,
            akj_str (r, "status"), dup ? "yes" : "no", akj_str (r, "reason")
        };
        akctl_table_add (t, row);
        free (params);
    }
    if (n)
        akctl_table_print (t, out, "", false);
    akctl_table_destroy (&t);
    fprintf (out, "%zu receipt(s) for batch %s, %zu duplicate(s) (stored, never counted)\n", n,
             akj_str (answer, "batch_id"), dups);
}

/* --------------------------------------------------------------- workers */

void akctl_render_workers (FILE *out, const json_t *answer)
{
    json_t *workers = akj_arr (answer, "workers");
    if (!workers || json_array_size (workers) == 0) {
        fprintf (out, "no workers have registered\n");
        return;
    }
    static const char *const head[] = { "WORKER", "HOST", "STATE", "SEEN", "CLASSES", "SLOTS", "PREFETCH", "OUTSTANDING", "LEASES", "NEXT EXPIRY", "DONE", "REGISTRATIONS", "GPU TIMING" };
    akctl_table_t *t = akctl_table_new (13, head);
    size_t i, alive = 0;
    json_t *w;
    json_array_foreach (workers, i, w) {
        char ago[32], seen[48], slots[16], pf[16], outst[16], done[24], regs[16], leases[48], expiry[32];
        char timing[24] = "-";
        char classes[256] = "";
        snprintf (seen, sizeof seen, "%s ago", akctl_duration (akj_num (w, "ago_ms"), ago, sizeof ago));
        size_t j;
        json_t *c;
        json_array_foreach (akj_arr (w, "device_classes"), j, c) {
            size_t used = strlen (classes);
            snprintf (classes + used, sizeof classes - used, "%s%s", j ? "," : "",
                      json_is_string (c) ? json_string_value (c) : "?");
        }
        snprintf (slots, sizeof slots, "%" PRId64, akj_int (w, "slots"));
        snprintf (pf, sizeof pf, "%" PRId64, akj_int (w, "prefetch"));
        snprintf (outst, sizeof outst, "%" PRId64, akj_int (w, "outstanding"));
        /* leases: how many, how many started (running on an executor), and
           the soonest a lease of this worker runs out */
        size_t nstarted = 0, k;
        double soonest = -1;
        json_t *l;
        json_array_foreach (akj_arr (w, "leases"), k, l) {
            nstarted += akj_bool (l, "started");
            json_t *exp = json_object_get (l, "expires_in_ms");
            if (json_is_number (exp) && (soonest < 0 || akj_value_num (exp) < soonest))
                soonest = akj_value_num (exp);
        }
        snprintf (leases, sizeof leases, "%zu (%zu started)", json_array_size (akj_arr (w, "leases")),
                  nstarted);
        if (soonest >= 0)
            snprintf (expiry, sizeof expiry, "in %s", akctl_duration (soonest, ago, sizeof ago));
        else
            snprintf (expiry, sizeof expiry, "-");
        snprintf (done, sizeof done, "%" PRId64, akj_int (w, "tasks_done"));
        snprintf (regs, sizeof regs, "%" PRId64, akj_int (w, "registrations"));
        alive += strcmp (akj_str (w, "state"), "alive") == 0;
        /* time inside timed samples / wall time with a task held */
        json_t *share = json_object_get (akj_obj (w, "timing"), "gpu_timing_share");
        if (json_is_number (share))
            snprintf (timing, sizeof timing, "%.1f%%", 100 * akj_value_num (share));
        const char *row[13] = {
            akj_str (w, "worker_id"), akj_str (w, "host"), akj_str (w, "state"), seen, classes,
            slots, pf, outst, leases, expiry, done, regs, timing
        };
        akctl_table_add (t, row);
    }
    akctl_table_print (t, out, "", false);
    akctl_table_destroy (&t);
    fprintf (out, "%zu worker(s), %zu alive\n", json_array_size (workers), alive);
}

/* ----------------------------------------------------------------- stats */

/*  Adds every member of obj as a row "prefix.key | value", recursing into
    objects, so counters a newer coordinator adds show up too. */
static void s_stats_members (akctl_table_t *t, const json_t *obj, const char *prefix)
{
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *) obj, key, v) {
        char name[256], value[64];
        snprintf (name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
        if (json_is_object (v)) {
            s_stats_members (t, v, name);
            continue;
        }
        /* the loop's histograms (their count and sum stay) and its ring
           of slow wake-ups are for --json */
        if (json_is_array (v) && (strcmp (key, "le") == 0 || strcmp (key, "counts") == 0))
            continue;
        if (json_is_array (v) && strcmp (name, "loop.slow") == 0) {
            snprintf (value, sizeof value, "%zu kept (akctl --json stats)", json_array_size (v));
            const char *row[2] = { name, value };
            akctl_table_add (t, row);
            continue;
        }
        char *text = NULL;
        if (json_is_integer (v))
            snprintf (value, sizeof value, "%" JSON_INTEGER_FORMAT, json_integer_value (v));
        else
        if (json_is_real (v))
            snprintf (value, sizeof value, "%g", json_real_value (v));
        else
        if (json_is_boolean (v))
            snprintf (value, sizeof value, "%s", json_is_true (v) ? "true" : "false");
        else
        if (!json_is_string (v))
            text = json_dumps (v, JSON_COMPACT | JSON_ENCODE_ANY);
        const char *row[2] = { name, json_is_string (v) ? json_string_value (v) : text ? text : value };
        akctl_table_add (t, row);
        free (text);
    }
}

void akctl_render_stats (FILE *out, const json_t *answer)
{
    char up[32];
    if (json_object_get (answer, "uptime_ms"))
        fprintf (out, "coordinator up %s\n\n",
                 akctl_duration ((double) akj_int (answer, "uptime_ms"), up, sizeof up));
    static const char *const head[] = { "COUNTER", "VALUE" };
    akctl_table_t *t = akctl_table_new (2, head);
    s_stats_members (t, answer, "");
    akctl_table_print (t, out, "", false);
    akctl_table_destroy (&t);
}
