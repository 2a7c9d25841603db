/*  coordinator/profiles_impl.h: what the files of installed profiles
    share; private to them (everyone else uses profiles.h).

    - profiles.c: class records, their JSON form, listing, show, export,
      verification status, the merge of new entries and install from a
      batch's winners;
    - profile_import.c: import of a package akctl verified;
    - profile_vendor.c: vendor entries (the vendor-library baseline kept),
      their install decision and their import checks;
    - profile_picks.c: the entries of workload picks (promote.h);
    - profile_tmaps.c: an entry's TMA tensor maps in the record, in
      profile.json and back from an import.
    Functions shared between them are prefixed profiles_; what one file
    alone uses stays static (s_).

    Never: include this outside coordinator/profiles.c,
    coordinator/profile_import.c, coordinator/profile_vendor.c, coordinator/profile_picks.c and
    coordinator/profile_tmaps.c; write a class record other than through
    profiles_merge (it keeps the replace rule of profiles.h and drops the
    verification and gate status of what it changes). */
#ifndef AK_PROFILES_IMPL_H
#define AK_PROFILES_IMPL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "results.h"
#include "spec.h"
#include "store.h"
#include "tmap.h"

#define PROFILES_MAX_ENTRIES 100000      /* entries a class record may hold */

/* The n evaluated tensor maps into lc (tensor_maps and maps). */
void profiles_tmaps_set (Ak__LaunchConfig *lc, const ak_tmap_cfg_t *maps, int n);
/* lc's maps as profile.json's "launch.maps", buffer names from the
   entry's inputs / outputs. */
json_t *profiles_tmaps_json (const Ak__LaunchConfig *lc, char *const *inputs, size_t nin, char *const *outputs,
                             size_t nout);
/* "launch.maps" of an imported entry into lc (whose tensor_maps is read):
   absent is no maps (an older package); present, exactly tensor_maps
   maps, each passing ak_tmap_check against the entry's buffer of
   in_counts / out_counts elements.  AK_EINVAL naming at. */
int profiles_tmaps_from_json (const json_t *arr, Ak__LaunchConfig *lc, const int64_t *in_counts, size_t nin,
                              const int64_t *out_counts, size_t nout, const char *at, ak_err_t *err);

/* Device class names: [A-Za-z0-9_./-]+, 1..256 characters. */
bool profiles_class_valid (const char *cls);
/* An entry's workload key, "softmax/rows=32,cols=128/float32" from op, the
   n shape keys and dims and dtype; caller frees. */
char *profiles_entry_key (const char *op, char *const *keys, const int64_t *dims, size_t n,
                         const char *dtype);
/* A new class record of profile name for device class cls (dev, when
   given, fills the device fields), without entries; the caller owns it
   (ak__profile_class__free_unpacked). */
Ak__ProfileClass *profiles_class_new (const char *name, const char *cls, const Ak__Device *dev,
                                     const char *backend);
/* Appends e to pc, which owns it from now on. */
void profiles_class_add (Ak__ProfileClass *pc, Ak__ProfileEntry *e);
/* The record of class cls among news[0..*nnews), appended (from dev and
   backend) when there is none yet; news keep owning it. */
Ak__ProfileClass *profiles_news_class (Ak__ProfileClass ***news, size_t *nnews, const char *name, const char *cls,
                                      const Ak__Device *dev, const char *backend);
/* A new entry, appended to pc, for workload wl of task t: op, key, keys,
   dims, dtype, workload, candidate, params, backend, task and batch ids,
   installed_ms, and the figures of fig's timing of wl; room for 3 evidence
   ids.  The caller adds what its kind needs. */
Ak__ProfileEntry *profiles_entry_base (Ak__ProfileClass *pc, const ak_spec_t *spec, const Ak__TaskRecord *t,
                                       const Ak__Workload *wl, const Ak__Receipt *fig, uint64_t now_ms);
/* Whether e is a vendor entry (kind "vendor"; "" and "kernel" are kernels). */
bool profiles_entry_is_vendor (const Ak__ProfileEntry *e);
/* For an (op, class) pair whose winner w was not promoted: when the
   baseline of the pair's backend in the spec its tasks ran is a vendor
   library and a candidate ran ok against it (so the library was
   measured), appends one vendor entry per workload of the best such
   candidate's task to the class record of news (profiles_news_class) and
   returns true.  Otherwise false (a kernel baseline, nothing measured, or
   records missing: logged), and the caller skips w with its reason.  pair
   may be NULL. */
bool profiles_vendor_add (ak_txn_t *txn, const ak_result_pair_t *pair, const Ak__Winner *w, const char *name,
                          uint64_t now_ms, Ak__ProfileClass ***news, size_t *nnews);
/* The vendor fields of profile.json entry j (kind "vendor", at names it
   in messages) into e, whose common fields the caller has read: vendor,
   vendor_op and reason non-empty strings, figures numbers, no source,
   prelude, entry or launch (a vendor entry has no kernel).  AK_EINVAL
   naming the field. */
int profiles_vendor_from (const json_t *j, Ak__ProfileEntry *e, const char *at, ak_err_t *err);
/* Removes the entries of pc whose key is key (freed). */
void profiles_class_drop (Ak__ProfileClass *pc, const char *key);
/* The stored spec (*spec_p, the caller's: ak_spec_destroy) and candidate
   of task t, with its source in the store: NULL, or why not (err may say
   more). */
const char *profiles_task_load (ak_txn_t *txn, const Ak__TaskRecord *t, ak_spec_t **spec_p,
                                const ak_candidate_t **cand_p, ak_err_t *err);
/* One kernel entry per workload of task t (only the workload named only
   with dtype only_dtype, when only is not NULL), appended to pc, with the
   figures of fig: the tune receipt r, or the confirm receipt when the
   confirmation round reported its (lower) measurement (Winner.figures_
   receipt_id, rounds.h), which is then evidence too; op_speedup and
   op_noise are the candidate's weighted figures over all its workloads.
   Fails (AK_EINVAL naming the workload) when a launch rule does not
   evaluate: a task that ran cannot have that, so the records disagree. */
int profiles_entries_for (const ak_spec_t *spec, const ak_candidate_t *cand, const Ak__TaskRecord *t,
                          const Ak__Receipt *r, const Ak__Receipt *fig, double op_speedup, double op_noise,
                          const char *only, const char *only_dtype, const char *pre_receipt,
                          const char *prelude_digest, const char *confirmed_on, uint64_t now_ms,
                          Ak__ProfileClass *pc, ak_err_t *err);
/* The entries pc->entries[from..] (the winner w's, just added) that did not beat the
   baseline at their own workload: a winner is promoted over all of an
   operator's workloads and may trail the baseline at one by up to
   policy.max_regression, but a profile entry makes the program run it,
   so an entry goes in only where its figures say speedup >= 1 + threshold
   + noise (the bar verify checks again, and a pick's).  The others are
   dropped and appended to skipped with why (the workload keeps its
   baseline, or a pick). */
void profiles_winner_trim (Ak__ProfileClass *pc, size_t from, const Ak__Winner *w, double threshold,
                           const char *name, json_t *skipped);
/* The tune task of pair whose id is task_id into *rt_p (NULL when it is
   not there), and why its records cannot go into a profile: the task or
   its receipt is missing, its accepted receipt is no longer receipt_id (a
   retry), or device_class is no valid name; NULL when they can. */
const char *profiles_tune_why (const ak_result_pair_t *pair, const char *task_id, const char *receipt_id,
                               const char *device_class, const ak_result_task_t **rt_p);
/* The workload picks of winner w (promote.h) into the class records of
   news: for each, the entry of that workload from the pick's task,
   replacing the winner's (or vendor's) entry of the same key installed
   just before.  A pick goes in when the confirm receipt of its task came
   from another worker and agrees at that workload (its confirmation, as
   the batch decided it), or with unconfirmed; otherwise, and when its
   records are missing, it is appended to skipped with why.  0, or an
   error that aborts the install. */
int profiles_picks_add (ak_txn_t *txn, const ak_result_pair_t *pair, const Ak__Winner *w, const char *name,
                        bool unconfirmed, const char *prelude_host, const char *prelude_cuda, uint64_t now_ms,
                        Ak__ProfileClass ***news, size_t *nnews, json_t *skipped, ak_err_t *err);
/* Frees the n records of v and v. */
void profiles_classes_free (Ak__ProfileClass **v, size_t n);
/* Writes the entries of each record in news into its profile: an entry
   with the key of an existing one replaces it only with replace (else
   AK_EEXIST naming it, and the caller aborts the transaction); other
   entries of the class stay; classes not in news are not read.  Appends
   {device_class,op,key,candidate,replaced} to installed for each entry.
   news stay the caller's. */
int profiles_merge (ak_txn_t *txn, Ak__ProfileClass *const *news, size_t nnews, bool replace,
                    uint64_t now_ms, json_t *installed, ak_err_t *err);

#endif
