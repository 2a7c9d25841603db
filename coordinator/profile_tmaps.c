/*  coordinator/profile_tmaps.c: the TMA tensor maps of a profile entry
    (kernel ABI 2), evaluated for the entry's shape at install, in the
    class record (LaunchConfig.maps), in profile.json ("launch": {"maps":
    [...]}) and back from an imported package, in the JSON form of
    common/tmap_json.c (libakprofile reads the same), checked by the rules
    of common/tmap.h against the entry's own buffers.

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

/*  Record map t back as the evaluated map it was made from. */
static void s_cfg (const Ak__TensorMapConfig *t, ak_tmap_cfg_t *m)
{
    memset (m, 0, sizeof *m);
    snprintf (m->name, sizeof m->name, "%s", t->name);
    m->output = t->output;
    m->buf = (int) t->buffer;
    m->rank = (uint32_t) (t->n_dims < AK_TMAP_MAX_RANK ? t->n_dims : AK_TMAP_MAX_RANK);
    for (uint32_t d = 0; d < m->rank; d++) {
        m->dims[d] = t->dims[d];
        m->box[d] = d < t->n_box ? t->box[d] : 0;
        if (d + 1 < m->rank && d < t->n_strides)
            m->strides[d] = t->strides[d];
    }
    m->elem_bytes = t->elem_bytes;
    m->swizzle = (ak_tmap_swizzle_t) t->swizzle;
    m->l2 = (ak_tmap_l2_t) t->l2;
    m->oob = (ak_tmap_oob_t) t->oob;
    m->absent = t->absent;
}

json_t *profiles_tmaps_json (const Ak__LaunchConfig *lc, char *const *inputs, size_t nin, char *const *outputs,
                             size_t nout)
{
    json_t *arr = json_array ();
    for (size_t i = 0; lc && i < lc->n_maps; i++) {
        ak_tmap_cfg_t m;
        s_cfg (lc->maps[i], &m);
        size_t nb = m.output ? nout : nin;
        const char *buffer = (size_t) m.buf < nb ? (m.output ? outputs : inputs)[m.buf] : "";
        json_array_append_new (arr, ak_tmap_to_json (&m, buffer));
    }
    return arr;
}

int profiles_tmaps_from_json (const json_t *arr, Ak__LaunchConfig *lc, const int64_t *in_counts, size_t nin,
                              const int64_t *out_counts, size_t nout, const char *at, ak_err_t *err)
{
    if (!arr || json_is_null (arr))
        return 0;          /* a package exported before maps were recorded: libakprofile falls back on it */
    if (!json_is_array (arr) || json_array_size (arr) != lc->tensor_maps)
        return ak_err_set (err, AK_EINVAL, "%s.maps: must be an array of tensor_maps (%u) maps", at, lc->tensor_maps);
    ak_tmap_cfg_t maps[AK_MAX_TMAPS];
    for (size_t i = 0; i < json_array_size (arr); i++)
        if (ak_tmap_from_json (json_array_get (arr, i), in_counts, nin, out_counts, nout, 0, &maps[i], err) != 0)
            return ak_err_prefix (err, "%s.maps[%zu]", at, i);
    profiles_tmaps_set (lc, maps, (int) json_array_size (arr));
    return 0;
}
