/*  coordinator/rounds_decide.c: the pure decisions of the search rounds
    and the confirmation round (rounds.h): ranking, workload leaders,
    finalists, the confirmation verdicts.  The store and index side is
    rounds.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include "rounds.h"
#include "cpb.h"
#include "promote.h"
#include "util.h"

// ------------------------------------------------------------------ helpers

static const char *s_label (const ak_promote_cand_t *cand, char *buf, size_t len)
{
    char params[128];
    ak_cpb_params_text (cand->params, cand->nparams, params, sizeof params);
    if (snprintf (buf, len, "%.64s%s%s", cand->candidate_name ? cand->candidate_name : "?",
                  params[0] ? " " : "", params) < 0)
        buf[0] = '\0';
    return buf;
}

// ------------------------------------------------------------ pure decisions

typedef struct {
    const ak_promote_cand_t *cands;
    const ak_promote_eval_t *evals;
} s_order_t;

/* Faster first, then the tie-break order. */
static int s_cmp_speed (const s_order_t *o, size_t a, size_t b)
{
    if (o->evals[a].speedup != o->evals[b].speedup)
        return o->evals[a].speedup > o->evals[b].speedup ? -1 : 1;
    return ak_promote_tiebreak (&o->cands[a], &o->cands[b]);
}

size_t ak_rounds_best (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                       size_t keep, size_t *out)
{
    s_order_t o = { cands, evals };
    size_t m = 0;
    /* insertion into the sorted prefix out[0..m), kept at most `keep` long */
    for (size_t i = 0; i < n; i++) {
        if (!evals[i].ok)
            continue;
        size_t pos = m;
        while (pos > 0 && s_cmp_speed (&o, i, out[pos - 1]) < 0)
            pos--;
        if (pos >= keep)
            continue;
        size_t end = m < keep ? m : keep - 1;
        memmove (out + pos + 1, out + pos, (end - pos) * sizeof *out);
        out[pos] = i;
        if (m < keep)
            m++;
    }
    return m;
}

static bool s_among (const size_t *v, size_t n, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (v[k] == i)
            return true;
    return false;
}

size_t ak_rounds_leaders (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                          double threshold, const size_t *kept, size_t nkept, size_t *out, size_t cap)
{
    size_t nw = 0, m = 0;
    const Ak__Workload **wls = ak_promote_workloads (cands, evals, n, &nw);
    for (size_t j = 0; j < nw && m < cap; j++) {
        const char *name = wls[j]->name, *dtype = wls[j]->dtype;
        ssize_t lead = -1;
        double sl = 0, nl = 0;
        for (size_t i = 0; i < n; i++) {
            double s, ns;
            if (!evals[i].ok || !ak_promote_at (cands[i].receipt, name, dtype, &s, &ns))
                continue;
            if (lead < 0 || s > sl || (s == sl && ak_promote_tiebreak (&cands[i], &cands[lead]) < 0)) {
                lead = (ssize_t) i;
                sl = s;
                nl = ns;
            }
        }
        if (lead < 0 || s_among (kept, nkept, (size_t) lead) || s_among (out, m, (size_t) lead)
            || sl < 1.0 + threshold + nl)
            continue;
        bool ahead = true;
        for (size_t k = 0; k < nkept && ahead; k++) {
            double s, ns;
            if (ak_promote_at (cands[kept[k]].receipt, name, dtype, &s, &ns))
                ahead = sl / s >= 1.0 + nl / sl + ns / s;
        }
        if (ahead)
            out[m++] = (size_t) lead;
    }
    free (wls);
    return m;
}

size_t ak_rounds_finalists (const ak_promote_cand_t *cands, const ak_promote_eval_t *evals, size_t n,
                            size_t out[AK_ROUNDS_MAX_FINALISTS])
{
    ssize_t best = -1;
    for (size_t i = 0; i < n; i++)
        if (evals[i].promotable && (best < 0 || evals[i].speedup > evals[best].speedup))
            best = (ssize_t) i;
    if (best < 0)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!evals[i].promotable)
            continue;
        double band = fmax (evals[best].noise, evals[i].noise);
        if (evals[i].speedup < evals[best].speedup - band)
            continue;
        size_t pos = m;
        while (pos > 0 && ak_promote_tiebreak (&cands[i], &cands[out[pos - 1]]) < 0)
            pos--;
        if (pos >= AK_ROUNDS_MAX_FINALISTS)
            continue;
        size_t end = m < AK_ROUNDS_MAX_FINALISTS ? m : AK_ROUNDS_MAX_FINALISTS - 1;
        memmove (out + pos + 1, out + pos, (end - pos) * sizeof *out);
        out[pos] = i;
        if (m < AK_ROUNDS_MAX_FINALISTS)
            m++;
    }
    return m;
}

static double s_half_width (double noise)
{
    return isfinite (noise) && noise > 0 ? noise : 0;
}

bool ak_rounds_confirm_agrees (double measured, double measured_noise, double confirmed,
                               double confirmed_noise, double threshold, double *tolerance_p)
{
    if (!isfinite (threshold) || threshold < 0)
        threshold = 0;
    double tol = s_half_width (measured_noise) + s_half_width (confirmed_noise);
    bool valid = isfinite (measured) && measured > 0 && isfinite (confirmed) && confirmed > 0;
    if (valid)
        tol += threshold * fmin (measured, confirmed);
    if (tolerance_p)
        *tolerance_p = tol;
    return valid && fabs (measured - confirmed) <= tol;
}

/* Appends "; text" (or text) to buf, cutting rather than overflowing. */
static void s_append (char *buf, size_t len, const char *text)
{
    size_t used = strlen (buf);
    if (used + 1 < len)
        snprintf (buf + used, len - used, "%s%s", used ? "; " : "", text);
}

void ak_rounds_confirm_decide (const ak_promote_rule_t *rule, double implausible,
                               const ak_promote_cand_t *cands, const ak_promote_eval_t *evals,
                               const ak_confirm_t *confirms, size_t n, Ak__Winner *win)
{
    size_t fin[AK_ROUNDS_MAX_FINALISTS];
    size_t nf = win->promoted ? ak_rounds_finalists (cands, evals, n, fin) : 0;
    bool any = false;
    for (size_t k = 0; k < nf; k++)
        any |= confirms[fin[k]].task_id != NULL;
    if (!any)
        return;
    if (!(implausible > 1))
        implausible = 10;
    char notes[768] = "", line[1024], label[160];
    const char *tie = win->tied > 1 && win->reason ? win->reason : "";
    char tie_text[256];
    snprintf (tie_text, sizeof tie_text, "%s", tie);
    for (size_t k = 0; k < nf; k++) {
        size_t i = fin[k];
        const ak_confirm_t *c = &confirms[i];
        s_label (&cands[i], label, sizeof label);
        char flag[96] = "";
        if (evals[i].speedup > implausible)
            snprintf (flag, sizeof flag, "implausible speedup %.2fx (> %gx), re-checked on fresh inputs: ",
                      evals[i].speedup, implausible);
        if (!c->task_id) {
            if (snprintf (line, sizeof line, "%s%s: no confirm task", flag, label) < 0)
                line[0] = '\0';
            s_append (notes, sizeof notes, line);
            continue;
        }
        if (!c->receipt) {
            if (snprintf (line, sizeof line, "%s%s not confirmed: confirm task %s %s%s%.160s", flag, label,
                          c->task_id, c->state ? c->state : "?", c->last_error && *c->last_error ? ": " : "",
                          c->last_error ? c->last_error : "") < 0)
                line[0] = '\0';
            s_append (notes, sizeof notes, line);
            continue;
        }
        ak_promote_cand_t cc = cands[i];
        cc.receipt = c->receipt;
        cc.task_id = c->task_id;
        ak_promote_rule_t r = *rule;
        r.has_incumbent = false;
        ak_promote_eval_t ev;
        ak_promote_eval (&r, &cc, &ev);
        const char *on = c->receipt->worker_id && *c->receipt->worker_id ? c->receipt->worker_id : "?";
        bool same = c->avoid_worker && *c->avoid_worker && strcmp (on, c->avoid_worker) == 0;
        if (!ev.promotable) {
            if (snprintf (line, sizeof line, "%s%s not confirmed on %s%s: %.300s", flag, label, on,
                          same ? " (the same worker: no other live worker of the class)" : "",
                          ev.reason[0] ? ev.reason : ev.status) < 0)
                line[0] = '\0';
            s_append (notes, sizeof notes, line);
            continue;
        }
        /* promotable on its confirmation: this finalist is the winner,
           with the lower of its two measurements (never the higher as
           confirmed); a confirmation outside the noise bands says so */
        const ak_promote_cand_t *w = &cands[i];
        double tol = 0;
        bool agrees = ak_rounds_confirm_agrees (evals[i].speedup, evals[i].noise, ev.speedup, ev.noise,
                                                rule->threshold, &tol);
        bool conf_lower = ev.speedup <= evals[i].speedup;
        ak_cpb_set (&win->task_id, w->task_id);
        ak_cpb_set (&win->receipt_id, w->receipt ? w->receipt->receipt_id : "");
        ak_cpb_set (&win->candidate_name, w->candidate_name);
        ak_cpb_params_free (win->params, win->n_params);
        win->params = ak_cpb_params_dup (w->params, w->nparams);
        win->n_params = w->nparams;
        win->speedup = conf_lower ? ev.speedup : evals[i].speedup;
        win->noise = conf_lower ? ev.noise : evals[i].noise;
        ak_cpb_set (&win->confirmation, agrees ? "confirmed" : "disagrees");
        ak_cpb_set (&win->figures_receipt_id, conf_lower ? c->receipt->receipt_id
                                                         : w->receipt ? w->receipt->receipt_id : "");
        char reason[1400], verdict[200];
        if (agrees)
            snprintf (verdict, sizeof verdict, "confirmed on %s", on);
        else
            snprintf (verdict, sizeof verdict, "confirmation disagrees: %.2fx on %s is %.2f off the "
                      "measured figure, outside the noise bands (+- %.2f); the lower figure is reported", ev.speedup,
                      on, fabs (ev.speedup - evals[i].speedup), tol);
        if (snprintf (reason, sizeof reason, "%s%s%s (task %s: %.2fx +- %.2f on fresh inputs; "
                  "measured %.2fx +- %.2f on %s)%s%.700s%s%s", flag, verdict,
                  same ? " (the same worker: no other live worker of the class)" : "",
                  c->task_id, ev.speedup, ev.noise, evals[i].speedup, evals[i].noise,
                  c->avoid_worker && *c->avoid_worker ? c->avoid_worker : "?",
                  notes[0] ? "; before it: " : "", notes, tie_text[0] ? "; " : "", tie_text) < 0)
            reason[0] = '\0';
        ak_cpb_set (&win->reason, reason);
        return;
    }
    win->promoted = false;
    ak_cpb_set (&win->task_id, "");
    ak_cpb_set (&win->receipt_id, "");
    ak_cpb_set (&win->candidate_name, "");
    ak_cpb_params_free (win->params, win->n_params);
    win->params = NULL;
    win->n_params = 0;
    win->speedup = 0;
    win->noise = 0;
    ak_cpb_setf (&win->reason, "not confirmed: %.900s; the baseline stays", notes);
}

void ak_rounds_picks_confirm (double threshold, const ak_promote_cand_t *cands, const ak_confirm_t *confirms,
                              size_t n, Ak__Winner *win)
{
    for (size_t j = 0; j < win->n_picks; j++) {
        Ak__WorkloadPick *pk = win->picks[j];
        ak_cpb_set (&pk->confirmation, "");
        ak_cpb_set (&pk->confirmed_on, "");
        size_t i = 0;
        while (i < n && strcmp (cands[i].task_id, pk->task_id) != 0)
            i++;
        const Ak__Receipt *cr = i < n ? confirms[i].receipt : NULL;
        double s = 0, ns = 0;
        if (!cr || !cr->status || strcmp (cr->status, "ok") != 0
            || !ak_promote_at (cr, pk->workload, pk->dtype, &s, &ns))
            continue;
        ak_cpb_set (&pk->confirmation,
                    ak_rounds_confirm_agrees (pk->speedup, pk->noise, s, ns, threshold, NULL) ? "confirmed"
                                                                                               : "disagrees");
        ak_cpb_set (&pk->confirmed_on, cr->worker_id ? cr->worker_id : "");
    }
}

