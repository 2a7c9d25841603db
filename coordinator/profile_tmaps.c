/*  coordinator/profile_tmaps.c: the TMA tensor maps of a profile entry
    (kernel ABI 2), evaluated for the entry's shape at install, in the
    class record (LaunchConfig.maps), in profile.json ("launch": {"maps":
    [...]}) and back from an imported package, checked by the rules of
    common/tmap.h against the entry's own buffers.

    A runtime (libakprofile) encodes them over the program's buffers with
    cuTensorMapEncodeTiled, so a map in a profile must never reach past
    the buffer it names: the import refuses one that breaks a rule.

    Never: trust a map of an imported package before ak_tmap_check passed. */
#include <stdio.h>
#include <string.h>
#include "profiles_impl.h"
#include "tmap.h"
#include "util.h"

void profiles_tmaps_set (Ak__LaunchConfig *lc, const ak_tmap_cfg_t *maps, int n)
{
    lc->tensor_maps = (uint32_t) n;
    lc->n_maps = 0;
    lc->maps = n > 0 ? ak_calloc ((size_t) n, sizeof *lc->maps) : NULL;
    for (int i = 0; i < n; i++) {
        const ak_tmap_cfg_t *m = &maps[i];
        Ak__TensorMapConfig *t = ak_malloc (sizeof *t);
        ak__tensor_map_config__init (t);
        t->name = ak_strdup (m->name);
        t->output = m->output;
        t->buffer = (uint32_t) m->buf;
        t->n_dims = t->n_box = m->rank;
        t->n_strides = m->rank - 1;
        t->dims = ak_calloc (m->rank, sizeof *t->dims);
        t->box = ak_calloc (m->rank, sizeof *t->box);
        t->strides = m->rank > 1 ? ak_calloc (m->rank - 1, sizeof *t->strides) : NULL;
        for (uint32_t d = 0; d < m->rank; d++) {
            t->dims[d] = m->dims[d];
            t->box[d] = m->box[d];
            if (d + 1 < m->rank)
                t->strides[d] = m->strides[d];
        }
        t->elem_bytes = m->elem_bytes;
        t->swizzle = (uint32_t) m->swizzle;
        t->l2 = (uint32_t) m->l2;
        t->oob = (uint32_t) m->oob;
        t->absent = m->absent;
        lc->maps[lc->n_maps++] = t;
    }
}

static json_t *s_u64s (const uint64_t *v, size_t n)
{
    json_t *a = json_array ();
    for (size_t i = 0; i < n; i++)
        json_array_append_new (a, json_integer ((json_int_t) v[i]));
    return a;
}

json_t *profiles_tmaps_json (const Ak__LaunchConfig *lc, char *const *inputs, size_t nin, char *const *outputs,
                             size_t nout)
{
    json_t *arr = json_array ();
    for (size_t i = 0; lc && i < lc->n_maps; i++) {
        const Ak__TensorMapConfig *t = lc->maps[i];
        char *const *names = t->output ? outputs : inputs;
        size_t nb = t->output ? nout : nin;
        json_t *box = json_array ();
        for (size_t d = 0; d < t->n_box; d++)
            json_array_append_new (box, json_integer (t->box[d]));
        json_array_append_new (arr, json_pack ("{s:s, s:s, s:b, s:I, s:o, s:o, s:o, s:I, s:s, s:s, s:s, s:b}",
            "name", t->name, "buffer", t->buffer < nb ? names[t->buffer] : "", "output", t->output,
            "index", (json_int_t) t->buffer, "dims", s_u64s (t->dims, t->n_dims),
            "strides", s_u64s (t->strides, t->n_strides), "box", box, "elem_bytes", (json_int_t) t->elem_bytes,
            "swizzle", ak_tmap_swizzle_name ((ak_tmap_swizzle_t) t->swizzle),
            "l2_promotion", ak_tmap_l2_name ((ak_tmap_l2_t) t->l2),
            "oob_fill", ak_tmap_oob_name ((ak_tmap_oob_t) t->oob), "absent", t->absent));
    }
    return arr;
}

/*  An unsigned integer of at most max from j, or -1. */
static int s_uint (const json_t *j, uint64_t max, uint64_t *v)
{
    if (!json_is_integer (j) || json_integer_value (j) < 0 || (uint64_t) json_integer_value (j) > max)
        return -1;
    *v = (uint64_t) json_integer_value (j);
    return 0;
}

static int s_map_from (const json_t *j, const int64_t *in_counts, size_t nin, const int64_t *out_counts,
                       size_t nout, ak_tmap_cfg_t *m, const char *at, ak_err_t *err)
{
    memset (m, 0, sizeof *m);
    const char *name = json_string_value (json_object_get (j, "name"));
    const json_t *dims = json_object_get (j, "dims"), *strides = json_object_get (j, "strides"),
                 *box = json_object_get (j, "box");
    uint64_t idx = 0, eb = 0;
    int sw = ak_tmap_swizzle_parse (json_string_value (json_object_get (j, "swizzle"))),
        l2 = ak_tmap_l2_parse (json_string_value (json_object_get (j, "l2_promotion"))),
        oob = ak_tmap_oob_parse (json_string_value (json_object_get (j, "oob_fill")));
    size_t rank = json_array_size (dims);
    if (!name || !*name || strlen (name) >= sizeof m->name || !json_is_boolean (json_object_get (j, "output"))
        || s_uint (json_object_get (j, "index"), AK_MAX_BUFS - 1, &idx) || s_uint (json_object_get (j, "elem_bytes"), 8, &eb)
        || rank < 1 || rank > AK_TMAP_MAX_RANK || json_array_size (box) != rank || json_array_size (strides) != rank - 1
        || sw < 0 || l2 < 0 || oob < 0 || !json_is_boolean (json_object_get (j, "absent")))
        return ak_err_set (err, AK_EINVAL, "%s: name, output, index, dims (1..%d), strides (one fewer), box (as many), "
                           "elem_bytes, swizzle, l2_promotion, oob_fill and absent are required", at, AK_TMAP_MAX_RANK);
    snprintf (m->name, sizeof m->name, "%s", name);
    m->output = json_is_true (json_object_get (j, "output"));
    m->buf = (int) idx;
    m->rank = (uint32_t) rank;
    m->elem_bytes = (uint32_t) eb;
    m->swizzle = (ak_tmap_swizzle_t) sw;
    m->l2 = (ak_tmap_l2_t) l2;
    m->oob = (ak_tmap_oob_t) oob;
    m->absent = json_is_true (json_object_get (j, "absent"));
    for (size_t d = 0; d < rank; d++) {
        uint64_t bx = 0;
        if (s_uint (json_array_get (dims, d), UINT64_C (1) << 32, &m->dims[d])
            || s_uint (json_array_get (box, d), UINT32_MAX, &bx)
            || (d + 1 < rank && s_uint (json_array_get (strides, d), UINT64_C (1) << 40, &m->strides[d])))
            return ak_err_set (err, AK_EINVAL, "%s: dims, box and strides must be unsigned integers in range", at);
        m->box[d] = (uint32_t) bx;
    }
    size_t nb = m->output ? nout : nin;
    if ((size_t) m->buf >= nb)
        return ak_err_set (err, AK_EINVAL, "%s: %s %d of the entry's %zu", at, m->output ? "output" : "input",
                           m->buf, nb);
    int64_t count = (m->output ? out_counts : in_counts)[m->buf];
    m->buf_bytes = count > 0 ? (uint64_t) count * m->elem_bytes : 0;
    /* an absent map is never encoded; a present one must pass every rule
       against the buffer the entry says it covers */
    if (!m->absent && ak_tmap_check (m, err) != 0)
        return ak_err_prefix (err, "%s", at);
    return 0;
}

int profiles_tmaps_from_json (const json_t *arr, Ak__LaunchConfig *lc, const int64_t *in_counts, size_t nin,
                              const int64_t *out_counts, size_t nout, const char *at, ak_err_t *err)
{
    if (!arr || json_is_null (arr))
        return 0;          /* a package exported before maps were recorded: libakprofile falls back on it */
    if (!json_is_array (arr) || json_array_size (arr) != lc->tensor_maps)
        return ak_err_set (err, AK_EINVAL, "%s.maps: must be an array of tensor_maps (%u) maps", at, lc->tensor_maps);
    ak_tmap_cfg_t maps[AK_MAX_TMAPS];
    for (size_t i = 0; i < json_array_size (arr); i++) {
        char what[320];
        snprintf (what, sizeof what, "%s.maps[%zu]", at, i);
        int rc = s_map_from (json_array_get (arr, i), in_counts, nin, out_counts, nout, &maps[i], what, err);
        if (rc)
            return rc;
    }
    profiles_tmaps_set (lc, maps, (int) json_array_size (arr));
    return 0;
}
