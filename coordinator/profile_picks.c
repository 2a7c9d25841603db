/*  coordinator/profile_picks.c: the entries of workload picks in installed
    profiles (profiles_impl.h, docs/profiles.md "Workload picks").

    A winner is one configuration for all of an operator's workloads; where
    another candidate beat it at one workload alone beyond the threshold and
    both noise bands (Winner.picks, promote.h), the profile installs that
    candidate for that workload: its entry replaces the winner's (or the
    vendor entry, when the vendor library was kept) of the same key.

    Never: install a pick whose confirmation disagrees at its workload
    (--unconfirmed or not); install a pick on its own measurement alone
    without --unconfirmed (another worker's confirm receipt of its task must agree
    at that workload, as for the winner: Winner.picks[].confirmation); let a pick's records that do not
    match (a retried task, a missing blob) abort the install: the pick is
    skipped with why, the winner's entry stays.

    Also here, the other per-workload decision of an install: a winner's
    entry goes in only at the workloads where it beat the baseline
    (profiles_winner_trim). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profiles.h"
#include "profiles_impl.h"
#include "log.h"
#include "util.h"

/*  The worker other than the one that measured pick pk (its tune receipt
    r) whose confirm receipt agreed at the pick's workload (the
    confirmation round's word, ak_rounds_picks_confirm), or NULL with
    why. */
static const char *s_confirmed_on (const Ak__WorkloadPick *pk, const Ak__Receipt *r, char *why, size_t len)
{
    const char *measured = r->worker_id ? r->worker_id : "";
    const char *on = pk->confirmed_on ? pk->confirmed_on : "";
    if (!pk->confirmation || !*pk->confirmation)
        snprintf (why, len, "no confirm receipt of task %.64s (policy.confirm off, or its confirm task failed)",
                  pk->task_id);
    else
    if (strcmp (pk->confirmation, "confirmed") != 0)
        snprintf (why, len, "the confirmation on %.64s disagrees at that workload", on);
    else
    if (!*on || strcmp (on, measured) == 0)
        snprintf (why, len, "confirmed on %.64s, the worker that measured it (no other live worker of the class)",
                  measured);
    else
        return on;
    return NULL;
}

static void s_skip (json_t *skipped, const Ak__Winner *w, const Ak__WorkloadPick *pk, const char *name,
                    const char *why)
{
    char *reason = ak_sprintf ("workload pick %s/%s (%s): %s", pk->workload, pk->dtype, pk->candidate_name, why);
    json_array_append_new (skipped, json_pack ("{s:s, s:s, s:s}", "op", w->op, "device_class", w->device_class,
                                               "reason", reason));
    ak_warn ("profile %s: %s on %s: %s", name, w->op, w->device_class, reason);
    free (reason);
}

void profiles_winner_trim (Ak__ProfileClass *pc, size_t from, const Ak__Winner *w, double threshold,
                           const char *name, json_t *skipped)
{
    size_t k = from;
    for (size_t i = from; i < pc->n_entries; i++) {
        Ak__ProfileEntry *e = pc->entries[i];
        double bar = 1.0 + threshold + (isfinite (e->noise) && e->noise > 0 ? e->noise : 0);
        if (isfinite (e->speedup) && e->speedup >= bar) {
            pc->entries[k++] = e;
            continue;
        }
        char *reason = ak_sprintf ("workload %s/%s: the winner %s measured %.3fx +- %.3f there, below %.3fx "
                                   "(1 + threshold + noise): the workload keeps its baseline", e->workload_name,
                                   e->dtype, e->candidate_name, e->speedup, e->noise, bar);
        json_array_append_new (skipped, json_pack ("{s:s, s:s, s:s, s:s, s:s}", "op", w->op, "device_class",
                                                   w->device_class, "workload", e->workload_name, "dtype",
                                                   e->dtype, "reason", reason));
        ak_info ("profile %s: %s on %s: %s", name, w->op, w->device_class, reason);
        free (reason);
        ak__profile_entry__free_unpacked (e, NULL);
    }
    pc->n_entries = k;
}

int profiles_picks_add (ak_txn_t *txn, const ak_result_pair_t *pair, const Ak__Winner *w, const char *name,
                        bool unconfirmed, const char *prelude_host, const char *prelude_cuda, uint64_t now_ms,
                        Ak__ProfileClass ***news, size_t *nnews, json_t *skipped, ak_err_t *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && pair && i < w->n_picks; i++) {
        const Ak__WorkloadPick *pk = w->picks[i];
        const ak_result_task_t *rt = NULL;
        const char *why = profiles_tune_why (pair, pk->task_id, pk->receipt_id, w->device_class, &rt);
        const char *confirmed_on = NULL;
        char unconf[448], unconf_why[240];
        /* refuted is not unconfirmed: --unconfirmed does not take it */
        if (!why && pk->confirmation && strcmp (pk->confirmation, "disagrees") == 0) {
            snprintf (unconf, sizeof unconf, "the confirmation on %.64s disagrees at that workload",
                      pk->confirmed_on ? pk->confirmed_on : "?");
            why = unconf;
        }
        if (!why && !(confirmed_on = s_confirmed_on (pk, rt->receipt, unconf_why, sizeof unconf_why))
            && !unconfirmed) {
            snprintf (unconf, sizeof unconf, "not confirmed on another worker: %s; install with --unconfirmed",
                      unconf_why);
            why = unconf;
        }
        ak_spec_t *spec = NULL;
        const ak_candidate_t *cand = NULL;
        ak_err_t e2 = { 0 };
        if (!why)
            why = profiles_task_load (txn, rt->task, &spec, &cand, &e2);
        const Ak__Workload *wl = NULL;
        for (size_t k = 0; !why && !wl && k < rt->task->n_workloads; k++)
            if (strcmp (rt->task->workloads[k]->name, pk->workload) == 0
                && strcmp (rt->task->workloads[k]->dtype, pk->dtype) == 0)
                wl = rt->task->workloads[k];
        if (!why && !wl)
            why = "its task has no such workload (the records disagree)";
        if (why) {
            s_skip (skipped, w, pk, name, why);
            ak_spec_destroy (&spec);
            continue;
        }
        const Ak__TaskRecord *t = rt->task;
        Ak__ProfileClass *pc = profiles_news_class (news, nnews, name, w->device_class, rt->receipt->device,
                                                    t->backend);
        char *key = profiles_entry_key (t->op, spec->keys, wl->dims, wl->n_dims, pk->dtype);
        profiles_class_drop (pc, key);
        free (key);
        const ak_promote_eval_t *ev = &pair->evals[rt - pair->tunes];
        const char *pre = pair->preflight.receipt ? pair->preflight.receipt->receipt_id : NULL;
        rc = profiles_entries_for (spec, cand, t, rt->receipt, rt->receipt, ev->speedup, ev->noise, pk->workload,
                                   pk->dtype, pre,
                                   strcmp (t->backend, "cuda") == 0 ? prelude_cuda : prelude_host, confirmed_on,
                                   now_ms, pc, err);
        if (rc == 0 && !confirmed_on)
            ak_warn ("profile %s: %s on %s: workload pick %s/%s installed unconfirmed (--unconfirmed): %s", name,
                     w->op, w->device_class, pk->workload, pk->dtype, unconf_why);
        ak_spec_destroy (&spec);
    }
    return rc;
}
