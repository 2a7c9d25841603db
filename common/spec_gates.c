/*  common/spec_gates.c: what a spec says about how the gates treat it,
    beyond its sizes and tolerances.

    "near_max_scale": {"bfloat16": 1e17}, optional: the factor the
    stability gate's near_max transform multiplies the inputs by, per
    declared dtype.  The defaults (x6e4 float16, x1e30 bfloat16, x1e18
    float32) push an elementwise operator's inputs towards the element
    type's range; an operator that sums products of its inputs (matmul,
    fused_mlp) in a float32 accumulator has no defined answer once those
    products pass float32's range (1e30 x 1e30), so its spec lowers the
    factor until they fit. */
#include "spec.h"
#include "jpath.h"

#include <math.h>

double ak_spec_near_max_scale (const ak_spec_t *spec, ak_dtype_t dt)
{
    if (spec && dt >= 0 && dt < AK_DT_COUNT && spec->near_max_scale[dt] > 0)
        return spec->near_max_scale[dt];
    switch (dt) {
        case AK_DT_FLOAT16:  return 6e4;
        case AK_DT_BFLOAT16: return 1e30;
        default:             return 1e18;
    }
}

int ak_spec_parse_near_max (json_t *root, ak_spec_t *spec, const char *label, ak_err_t *err)
{
    json_t *obj, *v;
    int rc = ak_jpath_get (root, "near_max_scale", JSON_OBJECT, false, label, "", &obj, err);
    if (rc || !obj)
        return rc;
    char p[AK_JPATH_MAX];
    const char *key;
    json_object_foreach (obj, key, v) {
        ak_dtype_t dt;
        ak_jpath_field (p, "near_max_scale", key);
        if (ak_dtype_parse (key, &dt))
            return ak_jpath_bad (err, label, p, "unknown dtype (float16, bfloat16, float32)");
        bool declared = false;
        for (int t = 0; t < spec->ndtypes; t++)
            declared = declared || spec->dtypes[t] == dt;
        if (!declared)
            return ak_jpath_bad (err, label, p, "dtype not declared in %s's dtypes", spec->name);
        double x = json_is_number (v) ? json_number_value (v) : NAN;
        if (!isfinite (x) || x < 1.0)
            return ak_jpath_bad (err, label, p, "must be a finite number >= 1 (the factor near_max "
                                 "inputs are scaled by)");
        spec->near_max_scale[dt] = x;
    }
    return 0;
}

void ak_spec_near_max_json (const ak_spec_t *spec, json_t *o)
{
    json_t *m = NULL;
    for (int t = 0; t < spec->ndtypes; t++) {
        ak_dtype_t dt = spec->dtypes[t];
        if (spec->near_max_scale[dt] <= 0)
            continue;
        if (!m)
            m = json_object ();
        json_object_set_new (m, ak_dtype_name (dt), json_real (spec->near_max_scale[dt]));
    }
    if (m)
        json_object_set_new (o, "near_max_scale", m);
}
