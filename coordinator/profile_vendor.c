/*  coordinator/profile_vendor.c: vendor entries of installed profiles
    (profiles_impl.h, docs/profiles.md "Vendor entries").

    A spec's baseline can be a vendor library call (cuBLASLt for matmul and
    fused_mlp on cuda).  When no candidate beats it beyond the noise, the
    baseline stays, and the profile says so with an entry of kind "vendor"
    per workload: the library, the reason, the library's time and the best
    candidate's figures as evidence, no kernel.  Each entry's reason gives
    its own workload's closest candidate first, then the operator-level
    reason.  A runtime's lookup of such an entry answers a fallback with the
    reason (libakprofile), and verify has nothing to run for it.

    Never: make a vendor entry for a kernel baseline (that one is skipped,
    as before), or for a pair where no candidate ran against the library
    (nothing measured it); give a vendor entry a source, prelude or launch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profiles.h"
#include "profiles_impl.h"
#include "cpb.h"
#include "dtype.h"
#include "log.h"
#include "promote.h"
#include "util.h"

/* The library's name as its vendor writes it, for reasons. */
static const char *s_display (const char *library)
{
    return strcmp (library, "cublaslt") == 0 ? "cuBLASLt" : library;
}

/* The checks before any entry is made: every workload of t has a dtype
   and the spec's number of dims (else why). */
static bool s_workloads_ok (const ak_spec_t *spec, const Ak__TaskRecord *t, char *why, size_t len)
{
    for (size_t k = 0; k < t->n_workloads; k++) {
        ak_dtype_t dt;
        const Ak__Workload *wl = t->workloads[k];
        if (ak_dtype_parse (wl->dtype, &dt) != 0 || wl->n_dims != (size_t) spec->nkeys) {
            snprintf (why, len, "task %.64s: workload %.64s: bad dtype or shape", t->task_id, wl->name);
            return false;
        }
    }
    if (t->n_workloads == 0)
        snprintf (why, len, "task %.64s has no workloads", t->task_id);
    return t->n_workloads > 0;
}

/* The reason of the vendor entry at workload wl (library as its vendor
   writes it, op_why the operator-level reason): first the ok tune that
   came closest to the library at wl alone, then op_why.  op_why names one
   candidate's weighted figures and, where a workload regressed, maybe
   another workload, so without the first part a user cannot tell how near
   the kernels came at this shape.  op_why alone where no ok tune measured
   wl.  The string is the caller's. */
static char *s_reason (const ak_result_pair_t *pair, const char *library, const Ak__Workload *wl,
                       const char *op_why)
{
    ssize_t at = -1;
    double s = 0, noise = 0;
    for (size_t j = 0; wl->name && wl->dtype && j < pair->ntunes; j++) {
        double sj, nj;
        if (pair->evals[j].ok && pair->tunes[j].receipt
            && ak_promote_at (pair->tunes[j].receipt, wl->name, wl->dtype, &sj, &nj) && (at < 0 || sj > s)) {
            at = (ssize_t) j;
            s = sj;
            noise = nj;
        }
    }
    if (at < 0)
        return ak_sprintf ("no candidate beat %s beyond the noise: %s", library, op_why);
    const Ak__TaskRecord *t = pair->tunes[at].task;
    char params[256];
    ak_cpb_params_text (t->params, t->n_params, params, sizeof params);
    return ak_sprintf ("no candidate beat %s beyond the noise at %s/%s: the best there, %s%s%s, ran %.2fx +- %.2f; "
                       "over the operator's workloads: %s", library, wl->name, wl->dtype, t->candidate_name,
                       params[0] ? " " : "", params, s, noise, op_why);
}

bool profiles_vendor_add (ak_txn_t *txn, const ak_result_pair_t *pair, const Ak__Winner *w, const char *name,
                          uint64_t now_ms, Ak__ProfileClass ***news, size_t *nnews)
{
    ssize_t best = pair ? ak_results_best (pair) : -1;
    if (best < 0 || !profiles_class_valid (w->device_class))
        return false;
    const ak_result_task_t *bt = &pair->tunes[best];
    const Ak__TaskRecord *t = bt->task;
    char *spec_text = NULL, why[200] = "";
    size_t spec_len = 0;
    ak_spec_t *spec = NULL;
    ak_err_t e2 = { 0 };
    const ak_baseline_t *bl = NULL;
    if (ak_store_get_blob (txn, t->spec_digest, &spec_text, &spec_len, &e2) != 0)
        snprintf (why, sizeof why, "the operator spec is missing from the store");
    else
    if (ak_spec_parse_text (spec_text, spec_len, "spec", &spec, &e2) != 0)
        snprintf (why, sizeof why, "the stored operator spec does not parse");
    else
    if ((bl = ak_spec_baseline (spec, t->backend)) && bl->library)
        s_workloads_ok (spec, t, why, sizeof why);
    free (spec_text);
    if (*why)
        ak_warn ("profile %s: %s on %s: no vendor entry: %s%s%s", name, w->op, w->device_class, why,
                 e2.msg[0] ? ": " : "", e2.msg);
    if (*why || !bl || !bl->library) {
        ak_spec_destroy (&spec);
        return false;
    }
    const ak_promote_eval_t *ev = &pair->evals[best];
    char *op_why = *w->reason ? ak_strdup (w->reason)
                              : ak_sprintf ("best candidate %s: %.2fx +- %.2f", t->candidate_name, ev->speedup,
                                            ev->noise);
    const char *pre = pair->preflight.receipt ? pair->preflight.receipt->receipt_id : NULL;
    Ak__ProfileClass *pc = profiles_news_class (news, nnews, name, w->device_class, bt->receipt->device,
                                                t->backend);
    for (size_t k = 0; k < t->n_workloads; k++) {
        Ak__ProfileEntry *e = profiles_entry_base (pc, spec, t, t->workloads[k], bt->receipt, now_ms);
        ak_cpb_set (&e->kind, AK_PROFILE_KIND_VENDOR);
        ak_cpb_set (&e->vendor, bl->library);
        ak_cpb_set (&e->vendor_op, bl->lib_op);
        char *reason = s_reason (pair, s_display (bl->library), t->workloads[k], op_why);
        ak_cpb_set (&e->reason, reason);
        free (reason);
        e->op_speedup = isfinite (ev->speedup) ? ev->speedup : 0;
        e->op_noise = isfinite (ev->noise) ? ev->noise : 0;
        e->evidence[e->n_evidence++] = ak_strdup (bt->receipt->receipt_id);
        if (pre && *pre)
            e->evidence[e->n_evidence++] = ak_strdup (pre);
    }
    ak_info ("profile %s: %s on %s: %zu vendor entr%s (%s): no candidate beat it beyond the noise: %s", name, w->op,
             w->device_class, t->n_workloads, t->n_workloads == 1 ? "y" : "ies", bl->library, op_why);
    free (op_why);
    ak_spec_destroy (&spec);
    return true;
}

// ------------------------------------------------------------------ import

int profiles_vendor_from (const json_t *j, Ak__ProfileEntry *e, const char *at, ak_err_t *err)
{
    static const char *const strs[] = { "vendor", "vendor_op", "reason" };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        const char *v = json_string_value (json_object_get (j, strs[i]));
        if (!v || !*v)
            return ak_err_set (err, AK_EINVAL, "%s.%s: a vendor entry needs a non-empty string", at, strs[i]);
    }
    /* a vendor entry applies no kernel: anything that would build or
       launch one is a contradiction, not something to ignore */
    static const char *const kernel[] = { "entry", "source", "prelude", "launch", "arch", "inputs", "outputs" };
    for (size_t i = 0; i < sizeof kernel / sizeof kernel[0]; i++) {
        const json_t *v = json_object_get (j, kernel[i]);
        if (v && !json_is_null (v))
            return ak_err_set (err, AK_EINVAL, "%s.%s: a vendor entry has no kernel (no %s)", at, kernel[i],
                               kernel[i]);
    }
    if (strcmp (e->backend, "cuda") != 0)
        return ak_err_set (err, AK_EINVAL, "%s.backend: a vendor entry is a cuda library call (backend cuda)", at);
    static const char *const nums[] = { "baseline_us", "speedup", "noise", "op_speedup", "op_noise",
                                        "candidate_us" };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const json_t *v = json_object_get (j, nums[i]);
        if ((v || i == 0) && (!json_is_number (v) || !isfinite (json_number_value (v))
                              || json_number_value (v) < 0))
            return ak_err_set (err, AK_EINVAL, "%s.%s: must be a non-negative number%s", at, nums[i],
                               i == 0 ? " (the vendor library's time)" : "");
    }
    ak_cpb_set (&e->kind, AK_PROFILE_KIND_VENDOR);
    ak_cpb_set (&e->vendor, json_string_value (json_object_get (j, "vendor")));
    ak_cpb_set (&e->vendor_op, json_string_value (json_object_get (j, "vendor_op")));
    ak_cpb_set (&e->reason, json_string_value (json_object_get (j, "reason")));
    return 0;
}
