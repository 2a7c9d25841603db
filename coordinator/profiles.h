/*  coordinator/profiles.h: installed profiles (docs/profiles.md).

    A profile is name -> device class -> (operator, workload key) -> the
    chosen kernel, with everything a runtime needs to apply it (source
    digest, parameters, evaluated launch configuration, buffer counts) and
    the receipts that justify it.  The profiles database holds one
    ProfileClass record per (profile, device class) under "NAME#CLASS";
    sources live content-addressed in blobs.

    Rules every writer here keeps:
    - only promoted winners of a complete batch are installed; the rest is
      reported as skipped, with the reason;
    - an existing entry (same class, same workload key) is only replaced
      when the caller said so; otherwise the whole install is refused and
      nothing is written (AK_EEXIST naming the entry);
    - a class that the install does not name is never read for writing.
    Everything happens inside the caller's write transaction; on an error
    the caller aborts it.  Records and JSON from disk or the wire are
    untrusted: rejected with the field named, never asserted on. */
#ifndef AK_PROFILES_H
#define AK_PROFILES_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "store.h"

#define AK_PROFILE_FORMAT "akfleet-profile"
/* ProfileEntry.kind: a tuned kernel ("" in records made before kinds), or
   the spec's vendor-library baseline kept because no candidate beat it
   beyond the noise (docs/profiles.md, "Vendor entries"). */
#define AK_PROFILE_KIND_KERNEL "kernel"
#define AK_PROFILE_KIND_VENDOR "vendor"

/* Profile names: [A-Za-z0-9_.-]+, 1..64 characters. */
bool ak_profile_name_valid (const char *name);

/* Installs the promoted winners of batch_id into profile name, and a
   vendor entry per workload for each (op, class) whose baseline is a
   vendor library that no candidate beat (profile_vendor.c).  *out gets
   {"profile","batch_id","installed":[{device_class,op,key,kind,candidate,
    params,replaced,vendor?}], "skipped":[{op,device_class,reason}]}
   (caller decrefs).  AK_ENOTFOUND
   (no batch), AK_ESTATE (batch not complete), AK_EEXIST (an entry exists
   and replace is false), AK_EINVAL (nothing promoted to install, and no
   vendor entry either).  A
   winner goes in only when a confirm task on another worker re-measured
   it (the entry's confirmed_on); one that was not (confirmation off, or
   only the worker that measured it was alive) is skipped with the reason,
   unless unconfirmed (`akctl profile install --unconfirmed`), which
   installs it with confirmed_on "" and a warning in the log. */
int ak_profiles_install (ak_txn_t *txn, const char *batch_id, const char *name, bool replace,
                         bool unconfirmed, uint64_t now_ms, json_t **out, ak_err_t *err);

/* {"profiles":[{"profile","classes":[{device_class,entries,updated_ms}],"entries"}]} */
int ak_profiles_list (ak_txn_t *txn, json_t **out, ak_err_t *err);

/* The profile as profile.json holds it (docs/profiles.md); AK_ENOTFOUND. */
int ak_profiles_show (ak_txn_t *txn, const char *name, json_t **out, ak_err_t *err);

/* {"profile": <profile.json>, "sources": {digest: text}}: what akctl
   writes out as a package. */
int ak_profiles_export (ak_txn_t *txn, const char *name, json_t **out, ak_err_t *err);

/* Stores a package akctl has verified ({"profile","sources"} as export
   gives it) as profile `name` (NULL: the name in the package).  Every
   source must match its digest and every entry must name one.  Same
   replace rule as install.  *out like install's. */
int ak_profiles_import (ak_txn_t *txn, const json_t *package, const char *name, bool replace,
                        uint64_t now_ms, json_t **out, ak_err_t *err);

/* Every class record of profile name, in key order, into a malloc'ed
   array (free with ak_profiles_free); AK_ENOTFOUND when there is none. */
int ak_profiles_load (ak_txn_t *txn, const char *name, Ak__ProfileClass ***classes_p, size_t *n_p,
                      ak_err_t *err);
/* Every class record of every profile (none: *n_p 0), free with
   ak_profiles_free; a record that does not decode is skipped (logged). */
int ak_profiles_load_all (ak_txn_t *txn, Ak__ProfileClass ***classes_p, size_t *n_p, ak_err_t *err);
void ak_profiles_free (Ak__ProfileClass ***classes_p, size_t n);

/* The verification status of a profile (`akctl verify`, verify.h): the
   VerifyReport of its last completed verify batch, under "NAME!verify" in
   the profiles database.  Any install, replace or import into the profile
   deletes it: what was verified is no longer what is installed.  show and
   list report it as "verification" ({"state":"never"} when there is none). */
int ak_profiles_put_status (ak_txn_t *txn, const Ak__VerifyReport *rep, ak_err_t *err);
int ak_profiles_get_status (ak_txn_t *txn, const char *name, Ak__VerifyReport **rep_p, ak_err_t *err);

/* profile.json form of one class record (caller decrefs). */
json_t *ak_profile_class_json (const Ak__ProfileClass *pc);

#endif
