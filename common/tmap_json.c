/*  common/tmap_json.c: one evaluated tensor map (ak_tmap_cfg_t) in the
    JSON form profile.json gives it (docs/profiles.md, "launch.maps"), and
    back, checked by ak_tmap_check against the buffer it names.  Part of
    aktmap (CMakeLists.txt), so the coordinator's export and import and
    libakprofile's load read and write one form with one set of rules.

    Never: accept a present map before ak_tmap_check passed on it. */
#include "tmap.h"

#include <stdio.h>
#include <string.h>

static json_t *s_u64s (const uint64_t *v, size_t n)
{
    json_t *a = json_array ();
    for (size_t i = 0; i < n; i++)
        json_array_append_new (a, json_integer ((json_int_t) v[i]));
    return a;
}

json_t *ak_tmap_to_json (const ak_tmap_cfg_t *m, const char *buffer)
{
    json_t *box = json_array ();
    for (uint32_t d = 0; d < m->rank; d++)
        json_array_append_new (box, json_integer (m->box[d]));
    return json_pack ("{s:s, s:s, s:b, s:I, s:o, s:o, s:o, s:I, s:s, s:s, s:s, s:b}", "name", m->name,
                      "buffer", buffer ? buffer : "", "output", m->output, "index", (json_int_t) m->buf,
                      "dims", s_u64s (m->dims, m->rank), "strides", s_u64s (m->strides, m->rank - 1), "box", box,
                      "elem_bytes", (json_int_t) m->elem_bytes, "swizzle", ak_tmap_swizzle_name (m->swizzle),
                      "l2_promotion", ak_tmap_l2_name (m->l2), "oob_fill", ak_tmap_oob_name (m->oob),
                      "absent", m->absent);
}

/*  An unsigned integer of at most max from j, or -1. */
static int s_uint (const json_t *j, uint64_t max, uint64_t *v)
{
    if (!json_is_integer (j) || json_integer_value (j) < 0 || (uint64_t) json_integer_value (j) > max)
        return -1;
    *v = (uint64_t) json_integer_value (j);
    return 0;
}

int ak_tmap_from_json (const json_t *j, const int64_t *in_counts, size_t nin, const int64_t *out_counts,
                       size_t nout, uint32_t elem_bytes, ak_tmap_cfg_t *m, ak_err_t *err)
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
        || s_uint (json_object_get (j, "index"), 7, &idx) || s_uint (json_object_get (j, "elem_bytes"), 8, &eb)
        || (elem_bytes && eb != elem_bytes) || rank < 1 || rank > AK_TMAP_MAX_RANK
        || json_array_size (box) != rank || json_array_size (strides) != rank - 1
        || sw < 0 || l2 < 0 || oob < 0 || !json_is_boolean (json_object_get (j, "absent")))
        return ak_err_set (err, AK_EINVAL, "name, output, index (of the entry's buffers), dims (1..%d), strides "
                           "(one fewer), box (as many), elem_bytes (the dtype's), swizzle, l2_promotion, oob_fill "
                           "and absent are required", AK_TMAP_MAX_RANK);
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
            return ak_err_set (err, AK_EINVAL, "dims, box and strides must be unsigned integers in range");
        m->box[d] = (uint32_t) bx;
    }
    size_t nb = m->output ? nout : nin;
    if ((size_t) m->buf >= nb)
        return ak_err_set (err, AK_EINVAL, "%s %d of the entry's %zu: the map's index (of the entry's buffers) is "
                           "past them", m->output ? "output" : "input", m->buf, nb);
    int64_t count = (m->output ? out_counts : in_counts)[m->buf];
    m->buf_bytes = count > 0 && count < (INT64_C (1) << 48) ? (uint64_t) count * m->elem_bytes : 0;
    /* an absent map is never encoded; a present one must pass every rule
       against the buffer the entry says it covers */
    if (!m->absent)
        return ak_tmap_check (m, err);
    return 0;
}
