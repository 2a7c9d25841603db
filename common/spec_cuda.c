/*  common/spec_cuda.c: the CUDA-only parts of the spec grammar and the
    architecture rules (spec_cuda.h).

    Everything read here is untrusted like the rest of a spec: rejected
    fields are named by file and JSON path, unknown fields are errors,
    expressions are checked before anything evaluates them. */
#include "spec_cuda.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "jpath.h"
#include "space.h"
#include "util.h"

/* ========================================================= architecture */

int ak_arch_parse (const char *arch, int *major, int *minor, bool *specific)
{
    if (!arch || strncmp (arch, "sm_", 3) != 0)
        return -1;
    const char *p = arch + 3;
    if (!isdigit ((unsigned char) p[0]) || !isdigit ((unsigned char) p[1]))
        return -1;
    int a = p[0] - '0', b = p[1] - '0';
    bool spec = false;
    p += 2;
    /* sm_100 and later: three digits, the last the minor. */
    if (isdigit ((unsigned char) *p)) {
        a = a * 10 + b;
        b = *p - '0';
        p++;
    }
    if (*p == 'a') {
        spec = true;
        p++;
    }
    if (*p || a < 1)
        return -1;
    if (major)
        *major = a;
    if (minor)
        *minor = b;
    if (specific)
        *specific = spec;
    return 0;
}

int ak_arch_check (const char *arch, int major, int minor, ak_err_t *err)
{
    int am, an;
    bool specific;
    if (!arch)
        return 0;
    if (ak_arch_parse (arch, &am, &an, &specific))
        return ak_err_set (err, AK_EINVAL, "arch '%.32s' is not sm_XY or sm_XYa", arch);
    bool ok = specific ? (major == am && minor == an) : (major == am && minor >= an);
    if (ok)
        return 0;
    if (specific)
        return ak_err_set (err, AK_EUNSUPPORTED, "built for %s (compute capability %d.%d only); the device is "
                           "sm_%d%d", arch, am, an, major, minor);
    return ak_err_set (err, AK_EUNSUPPORTED, "built for %s (compute capability %d.%d to %d.9); the device is "
                       "sm_%d%d", arch, am, an, am, major, minor);
}

bool ak_class_cc (const char *device_class, int *major, int *minor)
{
    if (!device_class)
        return false;
    for (const char *p = strstr (device_class, "/sm_"); p; p = strstr (p + 1, "/sm_")) {
        char seg[16];
        size_t n = strcspn (p + 1, "/");
        if (n >= sizeof seg)
            continue;
        memcpy (seg, p + 1, n);
        seg[n] = '\0';
        bool specific;
        if (ak_arch_parse (seg, major, minor, &specific) == 0 && !specific)
            return true;
    }
    return false;
}

/* ================================================================ parsing */

int ak_spec_parse_arch (json_t *obj, const char *backend, const char *label, const char *path,
                        char **arch_p, ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    const char *s;
    int rc = ak_jpath_get_str (obj, "arch", false, label, path, &s, err);
    if (rc || !s)
        return rc;
    ak_jpath_field (p, path, "arch");
    if (!ak_streq (backend, "cuda"))
        return ak_jpath_bad (err, label, p, "only cuda kernels have an arch (backend is '%s')", backend);
    if (ak_arch_parse (s, NULL, NULL, NULL))
        return ak_jpath_bad (err, label, p, "must be sm_XY or sm_XYa (e.g. \"sm_90a\")");
    *arch_p = ak_strdup (s);
    return 0;
}

static bool s_ident_ok (const char *s)
{
    if (!s || !(isalpha ((unsigned char) s[0]) || s[0] == '_') || strlen (s) > 63)
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum ((unsigned char) *p) && *p != '_')
            return false;
    return true;
}

/*  An array of 1..max expressions at key of m (path p) into exprs. */
static int s_exprs (json_t *m, const char *key, int lo, int max, const char *const *names, int nnames,
                    const char *label, const char *p, char **exprs, int *n, ak_err_t *err)
{
    char f[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *arr, *e;
    size_t i;
    int rc = ak_jpath_get (m, key, JSON_ARRAY, true, label, p, &arr, err);
    if (rc)
        return rc;
    ak_jpath_field (f, p, key);
    if ((int) json_array_size (arr) < lo || (int) json_array_size (arr) > max)
        return ak_jpath_bad (err, label, f, "must list %d to %d expressions", lo, max);
    json_array_foreach (arr, i, e) {
        const char *text;
        ak_jpath_index (q, f, i);
        if ((rc = ak_jpath_str (e, label, q, &text, err)) != 0
         || (rc = ak_space_check_expr (text, names, nnames, label, q, err)) != 0)
            return rc;
        exprs[(*n)++] = ak_strdup (text);
    }
    return 0;
}

/*  An optional enum member: absent gives def. */
static int s_enum (json_t *m, const char *key, int (*parse) (const char *), int def, const char *allowed,
                   const char *label, const char *p, int *out, ak_err_t *err)
{
    char f[AK_JPATH_MAX];
    const char *s;
    int rc = ak_jpath_get_str (m, key, false, label, p, &s, err);
    if (rc)
        return rc;
    *out = s ? parse (s) : def;
    if (*out < 0)
        return ak_jpath_bad (err, label, ak_jpath_field (f, p, key), "must be one of %s", allowed);
    return 0;
}

static bool s_has_buffer (const ak_spec_t *spec, const char *name)
{
    for (int i = 0; i < spec->ninputs; i++)
        if (ak_streq (spec->inputs[i].name, name))
            return true;
    for (int i = 0; i < spec->noutputs; i++)
        if (ak_streq (spec->outputs[i].name, name))
            return true;
    return false;
}

/*  One tensor map object at p into t. */
static int s_parse_tmap (json_t *m, const ak_spec_t *spec, const char *const *names, int nnames,
                         const char *label, const char *p, ak_tmap_rule_t *t, ak_err_t *err)
{
    static const char *const fields[] = { "name", "buffer", "dims", "box", "strides", "swizzle",
                                          "l2_promotion", "oob_fill", "optional", NULL };
    char f[AK_JPATH_MAX];
    const char *name, *buffer;
    int rc, nbox = 0, v;
    if (!json_is_object (m))
        return ak_jpath_bad (err, label, p, "must be an object {\"name\", \"buffer\", \"dims\", \"box\", ...}");
    if ((rc = ak_jpath_only (m, fields, label, p, err)) != 0
     || (rc = ak_jpath_get_str (m, "name", true, label, p, &name, err)) != 0
     || (rc = ak_jpath_get_str (m, "buffer", true, label, p, &buffer, err)) != 0)
        return rc;
    if (!s_ident_ok (name))
        return ak_jpath_bad (err, label, ak_jpath_field (f, p, "name"), "must be a C identifier (at most 63 characters)");
    if (!s_has_buffer (spec, buffer))
        return ak_jpath_bad (err, label, ak_jpath_field (f, p, "buffer"), "'%s' is not an input or output of %s",
                             buffer, spec->name);
    t->name = ak_strdup (name);
    t->buffer = ak_strdup (buffer);
    if ((rc = s_exprs (m, "dims", 1, AK_TMAP_MAX_RANK, names, nnames, label, p, t->dims, &t->rank, err)) != 0
     || (rc = s_exprs (m, "box", 1, AK_TMAP_MAX_RANK, names, nnames, label, p, t->box, &nbox, err)) != 0)
        return rc;
    if (nbox != t->rank) {
        for (int i = t->rank; i < nbox; i++) {
            free (t->box[i]);
            t->box[i] = NULL;
        }
        return ak_jpath_bad (err, label, ak_jpath_field (f, p, "box"), "%d entries for %d dims (one per dimension)",
                             nbox, t->rank);
    }
    if (json_object_get (m, "strides")) {
        if (t->rank == 1)
            return ak_jpath_bad (err, label, ak_jpath_field (f, p, "strides"), "a map of rank 1 has no strides");
        rc = s_exprs (m, "strides", t->rank - 1, t->rank - 1, names, nnames, label, p, t->strides, &t->nstrides, err);
        if (rc)
            return rc;
    }
    if ((rc = s_enum (m, "swizzle", ak_tmap_swizzle_parse, 0, "none, 32B, 64B, 128B", label, p, &v, err)) != 0)
        return rc;
    t->swizzle = (ak_tmap_swizzle_t) v;
    if ((rc = s_enum (m, "l2_promotion", ak_tmap_l2_parse, 0, "none, 64B, 128B, 256B", label, p, &v, err)) != 0)
        return rc;
    t->l2 = (ak_tmap_l2_t) v;
    if ((rc = s_enum (m, "oob_fill", ak_tmap_oob_parse, 0, "zero, nan", label, p, &v, err)) != 0)
        return rc;
    t->oob = (ak_tmap_oob_t) v;
    json_t *opt;
    if ((rc = ak_jpath_get (m, "optional", JSON_TRUE, false, label, p, &opt, err)) != 0)
        return rc;
    t->optional = opt != NULL;
    return 0;
}

int ak_spec_parse_tmaps (json_t *obj, const ak_spec_t *spec, const char *const *names, int nnames,
                         const char *backend, const char *label, const char *path,
                         ak_launch_rule_t *rule, ak_err_t *err)
{
    char p[AK_JPATH_MAX], q[AK_JPATH_MAX];
    json_t *arr, *m;
    size_t i;
    int rc = ak_jpath_get (obj, "tensor_maps", JSON_ARRAY, false, label, path, &arr, err);
    if (rc || !arr)
        return rc;
    ak_jpath_field (p, path, "tensor_maps");
    if (!ak_streq (backend, "cuda") || !rule)
        return ak_jpath_bad (err, label, p, "only cuda kernels have tensor maps");
    if (json_array_size (arr) < 1 || json_array_size (arr) > AK_MAX_TMAPS)
        return ak_jpath_bad (err, label, p, "must list 1 to %d tensor maps", AK_MAX_TMAPS);
    rule->tmaps = ak_calloc (json_array_size (arr), sizeof *rule->tmaps);
    json_array_foreach (arr, i, m) {
        ak_jpath_index (q, p, i);
        ak_tmap_rule_t *t = &rule->tmaps[rule->ntmaps++];
        if ((rc = s_parse_tmap (m, spec, names, nnames, label, q, t, err)) != 0)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (ak_streq (rule->tmaps[j].name, t->name))
                return ak_jpath_bad (err, label, q, "duplicate tensor map name '%s'", t->name);
    }
    return 0;
}

int ak_spec_parse_cluster (json_t *launch, const char *const *names, int nnames, const char *label,
                           const char *path, ak_launch_rule_t *rule, ak_err_t *err)
{
    if (!json_object_get (launch, "cluster"))
        return 0;
    return s_exprs (launch, "cluster", 1, 3, names, nnames, label, path, rule->cluster, &rule->ncluster, err);
}

/* ======================================================= library baselines */

/*  What an op of a library needs of the spec: its dimension keys, and the
    buffers with their counts over them (checked by text, after spaces).
    swiglu_mlp: h = silu (x Wg) * (x Wu), y = h Wd, as three cuBLASLt
    matmuls and one elementwise kernel of the backend's (what PyTorch eager
    runs for a gated MLP, fused_mlp's spec). */
typedef struct {
    const char *library, *op;
    const char *keys[3];
    int nin, nout;
    const char *in_counts[4], *out_counts[2];
} s_libop_t;

static const s_libop_t s_libops[] = {
    { "cublaslt", "matmul", { "M", "N", "K" }, 2, 1, { "M*K", "K*N" }, { "M*N" } },
    { "cublaslt", "swiglu_mlp", { "batch", "dim", "hidden" }, 4, 2,
      { "batch*dim", "dim*hidden", "dim*hidden", "hidden*dim" }, { "batch*dim", "batch*hidden" } },
};

static const s_libop_t *s_libop (const char *library, const char *op)
{
    for (size_t i = 0; i < sizeof s_libops / sizeof s_libops[0]; i++)
        if (ak_streq (s_libops[i].library, library) && ak_streq (s_libops[i].op, op))
            return &s_libops[i];
    return NULL;
}

static bool s_count_is (const char *count, const char *want)
{
    char buf[64];
    size_t n = 0;
    for (const char *c = count; *c && n + 1 < sizeof buf; c++)
        if (!isspace ((unsigned char) *c))
            buf[n++] = *c;
    buf[n] = '\0';
    return strcmp (buf, want) == 0;
}

char *ak_spec_library_source (const ak_spec_t *spec, const char *library, const char *op)
{
    const s_libop_t *lo = s_libop (library, op);
    if (!lo || !spec)
        return NULL;
    int k[3];
    for (int i = 0; i < 3; i++)
        if ((k[i] = ak_spec_key_index (spec, lo->keys[i])) < 0)
            return NULL;
    return ak_sprintf (AK_LIBRARY_MARKER "%s %s %s=%d %s=%d %s=%d\n", library, op, lo->keys[0], k[0],
                       lo->keys[1], k[1], lo->keys[2], k[2]);
}

int ak_spec_parse_library (json_t *obj, const ak_spec_t *spec, const char *label, const char *path,
                           ak_baseline_t *bl, ak_err_t *err)
{
    char p[AK_JPATH_MAX];
    const char *lib, *op;
    int rc;
    if ((rc = ak_jpath_get_str (obj, "library", true, label, path, &lib, err)) != 0
     || (rc = ak_jpath_get_str (obj, "op", true, label, path, &op, err)) != 0)
        return rc;
    if (!ak_streq (bl->backend, "cuda"))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "library"),
                             "only cuda baselines can be a library call (backend is '%s')", bl->backend);
    if (!ak_streq (lib, "cublaslt"))
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "library"), "unknown library (cublaslt)");
    const s_libop_t *lo = s_libop (lib, op);
    if (!lo)
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "op"), "cublaslt runs no op '%s' (matmul, swiglu_mlp)", op);
    const char *also[] = { "source", "launch", "tensor_maps", NULL };
    for (int i = 0; also[i]; i++)
        if (json_object_get (obj, also[i]))
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, also[i]),
                                 "a library baseline has no %s", also[i]);
    for (int i = 0; i < 3; i++)
        if (ak_spec_key_index (spec, lo->keys[i]) < 0)
            return ak_jpath_bad (err, label, ak_jpath_field (p, path, "op"), "%s needs the key %s in %s's keys",
                                 op, lo->keys[i], spec->name);
    bool shaped = spec->ninputs == lo->nin && spec->noutputs == lo->nout && !spec->inplace;
    for (int i = 0; shaped && i < lo->nin; i++)
        shaped = s_count_is (spec->inputs[i].count, lo->in_counts[i]);
    for (int i = 0; shaped && i < lo->nout; i++)
        shaped = s_count_is (spec->outputs[i].count, lo->out_counts[i]);
    if (!shaped) {
        char want[256];
        size_t n = 0;
        for (int i = 0; i < lo->nin + lo->nout && n < sizeof want; i++)
            n += (size_t) snprintf (want + n, sizeof want - n, "%s%s",
                                    i == 0 ? "inputs of " : i == lo->nin ? "; outputs of " : ", ",
                                    i < lo->nin ? lo->in_counts[i] : lo->out_counts[i - lo->nin]);
        return ak_jpath_bad (err, label, ak_jpath_field (p, path, "op"), "%s needs %s elements (row-major, in "
                             "this order), not in place", op, want);
    }
    bl->library = ak_strdup (lib);
    bl->lib_op = ak_strdup (op);
    bl->source.name = ak_sprintf ("%s:%s", lib, op);
    bl->source.text = ak_spec_library_source (spec, lib, op);
    return ak_sha256_hex (bl->source.text, strlen (bl->source.text), bl->source.digest);
}

/* ========================================================= JSON and frees */

static json_t *s_strs (char *const *s, int n)
{
    json_t *a = json_array ();
    for (int i = 0; i < n; i++)
        json_array_append_new (a, json_string (s[i]));
    return a;
}

void ak_spec_cuda_json (json_t *o, const char *arch, const ak_launch_rule_t *rule)
{
    if (!o)
        return;
    if (arch)
        json_object_set_new (o, "arch", json_string (arch));
    if (!rule || rule->ntmaps == 0)
        return;
    json_t *a = json_array ();
    for (int i = 0; i < rule->ntmaps; i++) {
        const ak_tmap_rule_t *t = &rule->tmaps[i];
        json_t *m = json_pack ("{s:s, s:s, s:o, s:o}", "name", t->name, "buffer", t->buffer,
                               "dims", s_strs (t->dims, t->rank), "box", s_strs (t->box, t->rank));
        if (t->nstrides)
            json_object_set_new (m, "strides", s_strs (t->strides, t->nstrides));
        json_object_set_new (m, "swizzle", json_string (ak_tmap_swizzle_name (t->swizzle)));
        json_object_set_new (m, "l2_promotion", json_string (ak_tmap_l2_name (t->l2)));
        json_object_set_new (m, "oob_fill", json_string (ak_tmap_oob_name (t->oob)));
        if (t->optional)
            json_object_set_new (m, "optional", json_true ());
        json_array_append_new (a, m);
    }
    json_object_set_new (o, "tensor_maps", a);
}

void ak_spec_cluster_json (json_t *o, const ak_launch_rule_t *rule)
{
    if (o && rule && rule->ncluster)
        json_object_set_new (o, "cluster", s_strs (rule->cluster, rule->ncluster));
}

void ak_spec_cuda_rule_clear (ak_launch_rule_t *rule)
{
    if (!rule)
        return;
    for (int i = 0; i < rule->ncluster; i++)
        free (rule->cluster[i]);
    rule->ncluster = 0;
    for (int i = 0; i < rule->ntmaps; i++) {
        ak_tmap_rule_t *t = &rule->tmaps[i];
        free (t->name);
        free (t->buffer);
        for (int d = 0; d < t->rank; d++) {
            free (t->dims[d]);
            free (t->box[d]);
        }
        for (int d = 0; d < t->nstrides; d++)
            free (t->strides[d]);
    }
    free (rule->tmaps);
    rule->tmaps = NULL;
    rule->ntmaps = 0;
}
