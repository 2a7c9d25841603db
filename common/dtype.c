/*  common/dtype.c: element types (dtype.h). */
#include "dtype.h"

#include "error.h"
#include "util.h"

static const char *const s_dtype_names[AK_DT_COUNT] = { "float16", "bfloat16", "float32" };
static const size_t s_dtype_sizes[AK_DT_COUNT] = { 2, 2, 4 };

const char *ak_dtype_name (ak_dtype_t dt)
{
    if ((int) dt < 0 || dt >= AK_DT_COUNT)
        return "invalid";
    return s_dtype_names[dt];
}

int ak_dtype_parse (const char *name, ak_dtype_t *out)
{
    for (int i = 0; i < AK_DT_COUNT; i++)
        if (ak_streq (name, s_dtype_names[i])) {
            if (out)
                *out = (ak_dtype_t) i;
            return 0;
        }
    return AK_EINVAL;
}

size_t ak_dtype_size (ak_dtype_t dt)
{
    if ((int) dt < 0 || dt >= AK_DT_COUNT)
        return 0;
    return s_dtype_sizes[dt];
}
