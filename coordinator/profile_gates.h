/*  coordinator/profile_gates.h: end-to-end gate verdicts recorded with a
    profile (docs/apply.md "Recording the verdict", docs/profiles.md).

    `akctl gate` runs a program with a profile package off and on and
    writes a gate JSON (lib/akprofile/python/akprofile/gate.py).  An
    operator records it here (`profile-gate NAME`, the JSON as body) as
    evidence for one device class of the profile.  The record is kept under
    "NAME!gate!CLASS" in the profiles database as a GateRecord.

    Rules:
    - a gate is taken only for the content it ran on: the gate names the
      class record's updated_ms as the package had it (package_classes),
      and it must equal the installed record's; otherwise AK_ESTATE ("the
      gate ran on another version of profile NAME on CLASS");
    - the verdict must be consistent (accepted iff no reason; every reason
      one of slower | outputs differ | no entry applied | launch failed;
      figures finite, steps >= 10), else AK_EINVAL naming the field;
    - an install, replace or import into a class deletes its gate
      (ak_profile_gates_forget): what was gated is no longer installed;
    - a class whose gate rejected the profile is never reported as
      verified: show and list carry the gate beside the verification and
      akctl says "rejected by the end-to-end gate".
    Everything happens inside the caller's transaction.

    Never: trusts the JSON's shape (every field is checked and named), or
    keeps more than the summary (the per-call counts stay in the file). */
#ifndef AK_PROFILE_GATES_H
#define AK_PROFILE_GATES_H
#include <jansson.h>
#include <stdint.h>
#include "error.h"
#include "store.h"

/* Records gate (the gate JSON, untrusted) for profile name.  *out gets
   {"profile","device_class","verdict","accepted","replaced"}.  AK_ENOTFOUND
   (no profile, or the class is not in it), AK_ESTATE (stale), AK_EINVAL. */
int ak_profile_gates_record (ak_txn_t *txn, const char *name, const json_t *gate, uint64_t now_ms,
                             json_t **out, ak_err_t *err);

/* Deletes the gate of (name, device_class), if any. */
int ak_profile_gates_forget (ak_txn_t *txn, const char *name, const char *device_class, ak_err_t *err);

/* The gate of (name, device_class) as JSON ({"state":"never"} when none;
   {"state":"unknown","error"} when it does not decode); caller decrefs. */
json_t *ak_profile_gates_json (ak_txn_t *txn, const char *name, const char *device_class);

/* True for keys of the profiles database that hold a gate. */
bool ak_profile_gates_is_key (const char *key);

#endif
