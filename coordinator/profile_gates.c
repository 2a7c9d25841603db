/*  coordinator/profile_gates.c: gate verdicts kept with a profile (see
    profile_gates.h). */
#include "profile_gates.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "akfleet.pb-c.h"
#include "cpb.h"
#include "util.h"

#define S_GATE_FORMAT   "akfleet-gate"
#define S_MIN_STEPS     10
#define S_MAX_REASONS   8
#define S_SCRIPT_MAX    256

static const char *const s_reasons[] = { "slower", "outputs differ", "no entry applied", "launch failed" };

static char *s_key (const char *name, const char *device_class)
{
    return ak_sprintf ("%s!gate!%s", name, device_class);
}

bool ak_profile_gates_is_key (const char *key)
{
    return key && strstr (key, "!gate!") != NULL;
}

/* A number, or "nan" / "inf" / "-inf" as the gate driver writes them. */
static int s_number (const json_t *j, const char *field, bool finite, double *v, ak_err_t *err)
{
    const json_t *x = json_object_get (j, field);
    if (json_is_number (x))
        *v = json_number_value (x);
    else
    if (!finite && json_is_string (x) && strcmp (json_string_value (x), "nan") == 0)
        *v = NAN;
    else
    if (!finite && json_is_string (x) && strcmp (json_string_value (x), "inf") == 0)
        *v = INFINITY;
    else
        return ak_err_set (err, AK_EINVAL, "gate: '%s' must be a %snumber", field, finite ? "finite " : "");
    if (finite && !isfinite (*v))
        return ak_err_set (err, AK_EINVAL, "gate: '%s' must be finite", field);
    return 0;
}

static const char *s_string (const json_t *j, const char *field)
{
    return json_string_value (json_object_get (j, field));
}

/* The reasons, each one of s_reasons, none repeated; "accepted" iff none,
   and verdict spelled as the driver spells it. */
static int s_verdict (const json_t *gate, Ak__GateRecord *g, ak_err_t *err)
{
    const json_t *reasons = json_object_get (gate, "reasons"), *acc = json_object_get (gate, "accepted");
    const char *verdict = s_string (gate, "verdict");
    if (!json_is_array (reasons) || json_array_size (reasons) > S_MAX_REASONS)
        return ak_err_set (err, AK_EINVAL, "gate: 'reasons' must be an array of at most %d reasons", S_MAX_REASONS);
    if (!json_is_boolean (acc))
        return ak_err_set (err, AK_EINVAL, "gate: 'accepted' must be true or false");
    if (!verdict)
        return ak_err_set (err, AK_EINVAL, "gate: 'verdict' must be a string");
    size_t n = json_array_size (reasons);
    g->reasons = ak_calloc (n + 1, sizeof *g->reasons);
    char *expect = ak_strdup (n ? "rejected (" : "accepted");
    for (size_t i = 0; i < n; i++) {
        const char *r = json_string_value (json_array_get (reasons, i));
        bool known = false;
        for (size_t k = 0; r && k < sizeof s_reasons / sizeof s_reasons[0]; k++)
            known |= strcmp (r, s_reasons[k]) == 0;
        for (size_t k = 0; known && k < g->n_reasons; k++)
            known = strcmp (g->reasons[k], r) != 0;
        if (!known) {
            free (expect);
            return ak_err_set (err, AK_EINVAL, "gate: reasons[%zu] must be one of slower, outputs differ, "
                               "no entry applied, launch failed (each once)", i);
        }
        g->reasons[g->n_reasons++] = ak_strdup (r);
        char *next = ak_sprintf ("%s%s%s", expect, i ? ", " : "", r);
        free (expect);
        expect = next;
    }
    if (n) {
        char *next = ak_sprintf ("%s)", expect);
        free (expect);
        expect = next;
    }
    int rc = 0;
    if (json_is_true (acc) != (n == 0))
        rc = ak_err_set (err, AK_EINVAL, "gate: 'accepted' is %s but %zu reason%s given", json_is_true (acc)
                         ? "true" : "false", n, n == 1 ? " is" : "s are");
    else
    if (strcmp (verdict, expect) != 0)
        rc = ak_err_set (err, AK_EINVAL, "gate: 'verdict' must read \"%s\" for these reasons", expect);
    free (expect);
    if (rc == 0) {
        g->accepted = n == 0;
        ak_cpb_set (&g->verdict, verdict);
    }
    return rc;
}

/* The figures: speedup, its noise and the hit share finite; the output
   deviations may be nan/inf (the verdict already says "outputs differ"). */
static int s_figures (const json_t *gate, Ak__GateRecord *g, ak_err_t *err)
{
    int rc = s_number (gate, "speedup", true, &g->speedup, err);
    if (rc == 0)
        rc = s_number (gate, "speedup_noise", true, &g->speedup_noise, err);
    if (rc == 0)
        rc = s_number (gate, "hit_share", true, &g->hit_share, err);
    if (rc == 0 && (g->speedup < 0 || g->speedup_noise < 0 || g->hit_share < 0 || g->hit_share > 1))
        rc = ak_err_set (err, AK_EINVAL, "gate: speedup and speedup_noise must be >= 0 and hit_share in [0, 1]");
    json_int_t steps = json_integer_value (json_object_get (gate, "steps"));
    if (rc == 0 && (!json_is_integer (json_object_get (gate, "steps")) || steps < S_MIN_STEPS || steps > 1000000))
        rc = ak_err_set (err, AK_EINVAL, "gate: 'steps' must be an integer >= %d (paired steps)", S_MIN_STEPS);
    g->steps = (uint32_t) steps;
    const json_t *outs = json_object_get (gate, "outputs");
    if (rc == 0 && !json_is_object (outs))
        rc = ak_err_set (err, AK_EINVAL, "gate: 'outputs' must be an object");
    if (rc == 0)
        rc = s_number (json_object_get (outs, "vs_off"), "max_abs", false, &g->max_abs_vs_off, err);
    if (rc == 0)
        rc = s_number (json_object_get (outs, "on_vs_float32"), "rel_rms", false, &g->rel_rms_on_vs_float32, err);
    if (rc == 0)
        rc = s_number (json_object_get (outs, "off_vs_float32"), "rel_rms", false, &g->rel_rms_off_vs_float32, err);
    return rc;
}

/* The class record as the gate saw it: package_classes[device_class] must
   be the installed record's updated_ms. */
static int s_fresh (ak_txn_t *txn, const char *name, const json_t *gate, Ak__GateRecord *g, ak_err_t *err)
{
    const char *cls = s_string (gate, "device_class");
    if (!cls || !*cls || strlen (cls) > 256)
        return ak_err_set (err, AK_EINVAL, "gate: 'device_class' must be a class string (1..256 characters)");
    ak_cpb_set (&g->device_class, cls);
    const json_t *pkg = json_object_get (json_object_get (gate, "package_classes"), cls);
    if (!json_is_integer (pkg) || json_integer_value (pkg) < 0)
        return ak_err_set (err, AK_EINVAL, "gate: 'package_classes' must give the package's updated_ms of %s "
                           "(a gate from before akprofile recorded it: run the gate again)", cls);
    g->class_updated_ms = (uint64_t) json_integer_value (pkg);
    char *key = ak_sprintf ("%s#%s", name, cls);
    void *val = NULL;
    size_t len = 0;
    int rc = ak_store_get (txn, AK_DB_PROFILES, key, &val, &len, err);
    free (key);
    if (rc == AK_ENOTFOUND)
        return ak_err_set (err, AK_ENOTFOUND, "profile %s has no class %s: the gate ran on a device the profile "
                           "does not cover, so nothing of it was applied", name, cls);
    if (rc)
        return rc;
    Ak__ProfileClass *pc = ak__profile_class__unpack (NULL, len, val);
    free (val);
    if (!pc)
        return ak_err_set (err, AK_ESTORE, "profiles: record '%s#%s' does not decode", name, cls);
    if (pc->updated_ms != g->class_updated_ms)
        rc = ak_err_set (err, AK_ESTATE, "the gate ran on another version of profile %s on %s (the package's "
                         "class was updated at %llu ms, the installed one at %llu ms): export it again and "
                         "re-run the gate", name, cls, (unsigned long long) g->class_updated_ms,
                         (unsigned long long) pc->updated_ms);
    ak__profile_class__free_unpacked (pc, NULL);
    return rc;
}

int ak_profile_gates_record (ak_txn_t *txn, const char *name, const json_t *gate, uint64_t now_ms,
                             json_t **out, ak_err_t *err)
{
    *out = NULL;
    if (!json_is_object (gate))
        return ak_err_set (err, AK_EINVAL, "gate: the body must be the gate JSON object (akctl gate --out FILE)");
    const char *fmt = s_string (gate, "format"), *prof = s_string (gate, "profile");
    if (!fmt || strcmp (fmt, S_GATE_FORMAT) != 0 || json_integer_value (json_object_get (gate, "schema_version")) != 1)
        return ak_err_set (err, AK_EINVAL, "gate: not an %s of schema_version 1", S_GATE_FORMAT);
    if (!prof || strcmp (prof, name) != 0)
        return ak_err_set (err, AK_EINVAL, "gate: it gated profile '%.64s', not %s", prof ? prof : "?", name);
    Ak__GateRecord *g = ak_malloc (sizeof *g);
    ak__gate_record__init (g);
    ak_cpb_set (&g->profile, name);
    int rc = s_fresh (txn, name, gate, g, err);
    if (rc == 0)
        rc = s_verdict (gate, g, err);
    if (rc == 0)
        rc = s_figures (gate, g, err);
    const char *sums = s_string (gate, "package_sha256");
    if (rc == 0 && (!sums || strlen (sums) != 64 || strspn (sums, "0123456789abcdef") != 64))
        rc = ak_err_set (err, AK_EINVAL, "gate: 'package_sha256' must be 64 lower-case hex digits");
    if (rc == 0) {
        ak_cpb_set (&g->package_sha256, sums);
        const char *script = s_string (gate, "script");
        const char *base = script ? strrchr (script, '/') : NULL;
        base = base ? base + 1 : script ? script : "";
        g->script = ak_sprintf ("%.*s", (int) strnlen (base, S_SCRIPT_MAX), base);
        g->recorded_ms = now_ms;
    }
    char *key = rc == 0 ? s_key (name, g->device_class) : NULL;
    bool replaced = false;
    if (rc == 0) {
        void *old = NULL;
        size_t olen = 0;
        int grc = ak_store_get (txn, AK_DB_PROFILES, key, &old, &olen, err);
        free (old);
        if (grc && grc != AK_ENOTFOUND)
            rc = grc;
        replaced = grc == 0;
    }
    if (rc == 0) {
        size_t len = ak__gate_record__get_packed_size (g);
        uint8_t *buf = ak_malloc (len ? len : 1);
        ak__gate_record__pack (g, buf);
        rc = ak_store_put (txn, AK_DB_PROFILES, key, buf, len, err);
        free (buf);
    }
    if (rc == 0)
        *out = json_pack ("{s:s, s:s, s:s, s:b, s:b}", "profile", name, "device_class", g->device_class,
                          "verdict", g->verdict, "accepted", g->accepted, "replaced", replaced);
    free (key);
    ak__gate_record__free_unpacked (g, NULL);
    return rc;
}

int ak_profile_gates_forget (ak_txn_t *txn, const char *name, const char *device_class, ak_err_t *err)
{
    char *key = s_key (name, device_class);
    int rc = ak_store_del (txn, AK_DB_PROFILES, key, err);
    free (key);
    return rc == AK_ENOTFOUND ? 0 : rc;
}

/* A double as JSON: null where it is not finite. */
static json_t *s_real (double v)
{
    return isfinite (v) ? json_real (v) : json_null ();
}

json_t *ak_profile_gates_json (ak_txn_t *txn, const char *name, const char *device_class)
{
    char *key = s_key (name, device_class);
    void *val = NULL;
    size_t len = 0;
    ak_err_t e = { 0 };
    int rc = ak_store_get (txn, AK_DB_PROFILES, key, &val, &len, &e);
    json_t *j = NULL;
    if (rc == AK_ENOTFOUND)
        j = json_pack ("{s:s}", "state", "never");
    else
    if (rc)
        j = json_pack ("{s:s, s:s}", "state", "unknown", "error", e.msg);
    Ak__GateRecord *g = rc == 0 ? ak__gate_record__unpack (NULL, len, val) : NULL;
    if (rc == 0 && !g)
        j = json_pack ("{s:s, s:s}", "state", "unknown", "error", "the gate record does not decode");
    if (g) {
        json_t *reasons = json_array ();
        for (size_t i = 0; i < g->n_reasons; i++)
            json_array_append_new (reasons, json_string (g->reasons[i]));
        j = json_pack ("{s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:s, s:s, s:I, s:I}",
                       "state", g->accepted ? "accepted" : "rejected", "verdict", g->verdict,
                       "accepted", g->accepted, "reasons", reasons,
                       "speedup", s_real (g->speedup), "speedup_noise", s_real (g->speedup_noise),
                       "hit_share", s_real (g->hit_share), "steps", (json_int_t) g->steps,
                       "max_abs_vs_off", s_real (g->max_abs_vs_off),
                       "rel_rms_on_vs_float32", s_real (g->rel_rms_on_vs_float32),
                       "rel_rms_off_vs_float32", s_real (g->rel_rms_off_vs_float32),
                       "script", g->script, "package_sha256", g->package_sha256,
                       "class_updated_ms", (json_int_t) g->class_updated_ms,
                       "recorded_ms", (json_int_t) g->recorded_ms);
        ak__gate_record__free_unpacked (g, NULL);
    }
    free (val);
    free (key);
    return j;
}
