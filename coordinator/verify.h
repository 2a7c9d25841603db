/*  coordinator/verify.h: fleet-wide verification of an installed profile
    (`akctl verify`, docs/profiles.md "Verify").

    A verify batch is a BatchRecord of kind "verify" naming the profile.
    ak_verify_create gives it one `verify` task per profile entry and live
    worker of the entry's device class, pinned to that worker
    (TaskRecord.pin_worker: sched.c hands it to no other, and it fails with
    "worker gone" when that worker dies).  A verify task is the entry's
    stored candidate source, parameters and workload against the baseline of
    the task that won it: the worker runs it as it runs a tune task (gates,
    interleaved timing, recheck).  Entries of a class without a live worker
    get the verdict "unverified" at once.  A vendor entry (profiles.h: the
    vendor library stays) has no kernel to run: its verdict is "vendor" at
    once, counted in VerifyReport.entries_vendor and in none of the
    entries below (a profile of vendor entries alone is "unverified":
    nothing of it was checked).

    When every task is terminal, ak_verify_settle judges each (entry, host)
    with ak_verify_judge, stores the verdicts in the batch record and the
    outcome as the profile's verification status (profiles.h):
        verified    every entry passed on every live host of its class
        failing     some entry failed on some host
        unverified  nothing failed, but some entry was not checked
    Records from disk are untrusted: a missing receipt or an odd figure is
    a failing verdict with the reason, never a crash. */
#ifndef AK_VERIFY_H
#define AK_VERIFY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "expand.h"
#include "registry.h"
#include "store.h"

#define AK_VERIFY_KIND          "verify"
#define AK_VERIFY_VENDOR        "vendor"  /* the verdict of a vendor entry: no kernel to verify */
#define AK_VERIFY_DEFAULT_K     2.0     /* noise multiplier */
#define AK_VERIFY_DEFAULT_FLOOR 0.10    /* relative floor: 10% of the recorded speedup */
#define AK_VERIFY_DEFAULT_THRESHOLD 0.03

#define AK_VERIFY_MAX_BAND      0.25    /* the band never exceeds 25% of the recorded speedup */

/* The rule a measured speedup must meet (docs/profiles.md "Verify"):
       measured >= 1 + threshold
   and |measured - recorded| <= band, where
       band = min (k * (measured_noise + recorded_noise) + floor * recorded,
                   max (AK_VERIFY_MAX_BAND, floor) * recorded)
   so that noise widens the band only up to a fixed share of the recorded
   figure: a noisy record or measurement cannot make any figure pass.
   Noise figures are the absolute half-widths the receipts carry; a
   negative or non-finite noise counts as 0, a non-finite or non-positive
   speedup fails.  threshold <= 0 or non-finite means the default 3%.
   Returns true for pass; on a fail writes the reason into reason
   ("speedup 1.02 +- 0.01 vs recorded 1.85 +- 0.04: outside +- 0.27"). */
typedef struct {
    double k;
    double floor;
} ak_verify_rule_t;

bool ak_verify_judge (const ak_verify_rule_t *rule, double recorded, double recorded_noise,
                      double measured, double measured_noise, double threshold,
                      char *reason, size_t len);

/* Builds the verify batch batch_id of profile name into *exp_p (batch
   record and tasks, no blobs: the sources are in the store already) from
   the profile's records in txn and the live workers of reg, and stores it
   in txn.  AK_ENOTFOUND when there is no such profile. */
int ak_verify_create (ak_txn_t *txn, ak_registry_t *reg, const char *name, const ak_verify_rule_t *rule,
                      const char *batch_id, uint64_t now_ms, ak_expansion_t **exp_p, ak_err_t *err);

/* When batch_id is a verify batch (*is_verify), judges its tasks, writes
   the verdicts into its record and the profile's verification status, all
   in txn (the caller commits).  0 with *is_verify false for any other
   batch. */
int ak_verify_settle (ak_txn_t *txn, const char *batch_id, uint64_t now_ms, bool *is_verify,
                      ak_err_t *err);

#endif
