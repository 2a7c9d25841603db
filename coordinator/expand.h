/*  coordinator/expand.h: batch expansion, as a pure function.

    A parsed manifest becomes one BatchRecord, its TaskRecords and the blobs
    they point at (spec JSON, reference, baseline and candidate sources, each
    stored once by digest).  Per (op, target device class), in manifest order:
    one `preflight` task (the baseline through gates and timing), then, for
    every selected candidate whose backend is ak_class_backend (target),
    one `tune` task per valid configuration (ak_space_walk; stage 0,
    exhaustive) or per sampled one (stage 1, short timing: successive
    halving, coordinator/rounds.h) as policy.search decides.  The batch
    record gets one SearchSummary per (op, target, candidate).  Later
    stages and confirm tasks are added while the batch runs (rounds.h).  Task ids are
    "<batch>.<seq>" with seq from 0001 upwards; every task starts `queued`
    at attempt 1.

    ak_expand touches neither the store nor the clock; ak_expand_store writes
    the whole expansion inside the caller's write transaction, so a batch is
    stored completely or not at all. */
#ifndef AK_EXPAND_H
#define AK_EXPAND_H
#include <stddef.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "manifest.h"
#include "spec_cuda.h"
#include "store.h"

#define AK_EXPAND_MAX_TASKS  100000     /* per batch */

typedef struct {
    char   digest[65];
    char  *data;                        /* owned, NUL-terminated */
    size_t len;
} ak_blob_t;

typedef struct {
    Ak__BatchRecord  *batch;            /* owned */
    Ak__TaskRecord  **tasks;            /* owned, in id order */
    size_t            ntasks;
    ak_blob_t        *blobs;            /* unique by digest */
    size_t            nblobs;
} ak_expansion_t;

/* Writes "B%06llu" for counter value n into buf. */
void ak_batch_id_format (uint64_t n, char buf[32]);

/* Expands manifest into *exp_p (the caller's).  batch_id names the batch,
   bundle_digest is the blob holding the submitted bundle, now_ms the wall
   clock for created_ms / queued_ms.  AK_EINVAL with err naming the op and
   target when a target has no baseline or a selected candidate is unknown;
   AK_ETOOBIG when the batch would exceed AK_EXPAND_MAX_TASKS tasks; a
   constraint error from ak_space_walk comes back as it is. */
int ak_expand (const ak_manifest_t *manifest, const char *batch_id, const char *bundle_digest,
               uint64_t now_ms, ak_expansion_t **exp_p, ak_err_t *err);

/* The configuration of an installed profile entry (a winner or workload
   pick of an earlier batch), by name: op, device class, candidate and
   parameters (pointers into the caller's profile records). */
typedef struct {
    const char       *op;
    const char       *device_class;
    const char       *candidate;
    Ak__Param *const *params;
    size_t            nparams;
} ak_installed_t;

/* ak_expand with the installed entries of the coordinator's profiles:
   where policy.search.installed is true, a halving search of (op, class,
   candidate) takes the configurations of that triple's entries as seeds
   after the candidate's own (those still valid in its space; within the
   budget), so a night starts from what the last ones installed. */
int ak_expand_with (const ak_manifest_t *manifest, const ak_installed_t *inst, size_t ninst,
                    const char *batch_id, const char *bundle_digest, uint64_t now_ms, ak_expansion_t **exp_p,
                    ak_err_t *err);

/* Whether a kernel built for arch (a spec's "arch": "sm_90a"; NULL none)
   can run on the device class target: false only when the class names its
   compute capability ("NVIDIA_H200/sm_90/...") and ak_arch_check refuses
   it.  ak_expand gives such a candidate no task on that target (an sm_90a
   candidate is never compiled for an sm_80 class); where the class does
   not say, the worker refuses it before compiling (invalid_config). */
bool ak_expand_arch_fits (const char *arch, const char *target);

/* Stores every blob, task record and the batch record in txn. */
int ak_expand_store (const ak_expansion_t *exp, ak_txn_t *txn, ak_err_t *err);

void ak_expansion_destroy (ak_expansion_t **self_p);

#endif
