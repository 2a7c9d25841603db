/*  common/tmap.c: the rules of cuTensorMapEncodeTiled as pure functions
    (tmap.h).  The rules are the CUDA 13.0 driver API's (cuda.h, "Tensor
    Map Object Managment"), restricted to what akfleet encodes: tiled maps,
    no interleave, element strides of 1, floating element types.

    Never: anything but arithmetic on the struct it is given. */
#include "tmap.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

static const char *const s_swizzle[] = { "none", "32B", "64B", "128B" };
static const char *const s_l2[] = { "none", "64B", "128B", "256B" };
static const char *const s_oob[] = { "zero", "nan" };

static int s_parse (const char *s, const char *const *names, int n)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp (s, names[i]) == 0)
            return i;
    return -1;
}

int ak_tmap_swizzle_parse (const char *s) { return s_parse (s, s_swizzle, 4); }
int ak_tmap_l2_parse (const char *s)      { return s_parse (s, s_l2, 4); }
int ak_tmap_oob_parse (const char *s)     { return s_parse (s, s_oob, 2); }

const char *ak_tmap_swizzle_name (ak_tmap_swizzle_t s)
{
    return (unsigned) s < 4 ? s_swizzle[s] : "?";
}

const char *ak_tmap_l2_name (ak_tmap_l2_t l)
{
    return (unsigned) l < 4 ? s_l2[l] : "?";
}

const char *ak_tmap_oob_name (ak_tmap_oob_t o)
{
    return (unsigned) o < 2 ? s_oob[o] : "?";
}

uint32_t ak_tmap_swizzle_bytes (ak_tmap_swizzle_t s)
{
    return s == AK_TMAP_SWIZZLE_32B ? 32 : s == AK_TMAP_SWIZZLE_64B ? 64 : s == AK_TMAP_SWIZZLE_128B ? 128 : 0;
}

#define S_BAD(rule, ...) \
    ak_err_set (err, AK_EINVAL, "tensor map %s: rule " rule ": " __VA_ARGS__)

int ak_tmap_check (const ak_tmap_cfg_t *m, ak_err_t *err)
{
    if (!m)
        return ak_err_set (err, AK_EINVAL, "ak_tmap_check: no map");
    const char *n = m->name;
    if (m->rank < 1 || m->rank > AK_TMAP_MAX_RANK)
        return S_BAD ("rank", "%u dimensions (cuTensorMapEncodeTiled takes 1..%d)", n, m->rank, AK_TMAP_MAX_RANK);
    uint64_t e = m->elem_bytes;
    if (e != 1 && e != 2 && e != 4 && e != 8)
        return S_BAD ("elem", "element size %" PRIu64 " bytes (1, 2, 4 or 8)", n, e);
    for (uint32_t i = 0; i < m->rank; i++)
        if (m->dims[i] < 1 || m->dims[i] > (UINT64_C (1) << 32))
            return S_BAD ("dims", "dims[%u] = %" PRIu64 ": must be 1..2^32", n, i, m->dims[i]);
    /* Each stride covers the dimensions inside it, so no two elements of
       the map share an address: strides[0] >= dims[0]*elem, then
       strides[i] >= strides[i-1]*dims[i].  dims <= 2^32 and strides < 2^40
       keep every product below 2^72 only with care: compare by division. */
    for (uint32_t i = 0; i + 1 < m->rank; i++) {
        uint64_t s = m->strides[i];
        if (s % 16 != 0)
            return S_BAD ("strides", "strides[%u] = %" PRIu64 " bytes: must be a multiple of 16", n, i, s);
        if (s >= (UINT64_C (1) << 40))
            return S_BAD ("strides", "strides[%u] = %" PRIu64 " bytes: must be < 2^40", n, i, s);
        uint64_t inner = i == 0 ? e : m->strides[i - 1];
        uint64_t d = m->dims[i];
        if (s / d < inner)
            return S_BAD ("strides", "strides[%u] = %" PRIu64 " bytes < %" PRIu64 " x %" PRIu64
                          " (dimension %u would overlap dimension %u)", n, i, s, d, inner, i + 1, i);
    }
    for (uint32_t i = 0; i < m->rank; i++)
        if (m->box[i] < 1 || m->box[i] > AK_TMAP_MAX_BOX)
            return S_BAD ("box", "box[%u] = %u: must be 1..%d", n, i, m->box[i], AK_TMAP_MAX_BOX);
    uint64_t inner = (uint64_t) m->box[0] * e;
    if (inner % 16 != 0)
        return S_BAD ("box_bytes", "box[0] x %" PRIu64 " bytes = %" PRIu64 ": must be a multiple of 16 bytes",
                      n, e, inner);
    if ((unsigned) m->swizzle > AK_TMAP_SWIZZLE_128B || (unsigned) m->l2 > AK_TMAP_L2_256B
        || (unsigned) m->oob > AK_TMAP_OOB_NAN)
        return S_BAD ("enums", "swizzle %d, l2_promotion %d, oob_fill %d out of range", n, (int) m->swizzle,
                      (int) m->l2, (int) m->oob);
    uint32_t span = ak_tmap_swizzle_bytes (m->swizzle);
    if (span && inner > span)
        return S_BAD ("swizzle", "box[0] x %" PRIu64 " bytes = %" PRIu64 " > the %s swizzle span", n, e,
                      inner, ak_tmap_swizzle_name (m->swizzle));
    /* The extent: the outermost stride times the outermost dimension (or the
       row for rank 1) must fit in the buffer, or TMA reads past it. */
    uint64_t outer = m->rank == 1 ? e : m->strides[m->rank - 2];
    uint64_t last = m->dims[m->rank - 1];
    if (outer > m->buf_bytes / last)
        return S_BAD ("extent", "%" PRIu64 " x %" PRIu64 " bytes reach past the buffer's %" PRIu64 " bytes",
                      n, last, outer, m->buf_bytes);
    return 0;
}

int ak_tmap_check_address (const ak_tmap_cfg_t *m, uint64_t addr, ak_err_t *err)
{
    if (!m)
        return ak_err_set (err, AK_EINVAL, "ak_tmap_check_address: no map");
    if (addr % 16 != 0)
        return S_BAD ("align", "buffer address 0x%" PRIx64 " is not 16-byte aligned", m->name, addr);
    return 0;
}
