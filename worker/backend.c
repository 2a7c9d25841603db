/*  worker/backend.c: what every backend shares (backend.h). */
#include "backend.h"
#include "sandbox.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int ak_compile_req_check (const ak_compile_req_t *req, ak_compile_out_t *out, const char *who,
                          ak_err_t *err)
{
    if (!req || !out)
        return ak_err_set (err, AK_EINVAL, "%s compile: no request", who);
    memset (out, 0, sizeof *out);
    if (!req->source)
        return ak_err_set (err, AK_EINVAL, "%s compile: no source", who);
    if (req->source_len > AK_MAX_SOURCE_BYTES)
        return ak_err_set (err, AK_ETOOBIG, "%s compile: source of %zu bytes, limit %u", who,
                           req->source_len, (unsigned) AK_MAX_SOURCE_BYTES);
    if (memchr (req->source, '\0', req->source_len))
        return ak_err_set (err, AK_EINVAL, "%s compile: source holds a NUL byte", who);
    if (!req->cache_dir || !*req->cache_dir)
        return ak_err_set (err, AK_EINVAL, "%s compile: no cache directory", who);
    /* before any compiler reads it: no file outside the include paths */
    int rc = ak_sandbox_check_includes (req->source, req->source_len, err);
    if (rc)
        return ak_err_prefix (err, "%s compile", who);
    return 0;
}

bool ak_compile_define_ok (const char *s)
{
    if (!s || !(isalpha ((unsigned char) s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 0; s[i]; i++) {
        if (i >= AK_MAX_NAME)
            return false;
        if (!(isalnum ((unsigned char) s[i]) || s[i] == '_'))
            return false;
    }
    return true;
}

void ak_compile_key_part (ak_sha256_t *ctx, const void *data, size_t len)
{
    char hdr[32];
    int n = snprintf (hdr, sizeof hdr, "%zu:", len);
    ak_sha256_update (ctx, hdr, (size_t) n);
    ak_sha256_update (ctx, data, len);
}

void ak_launch_apply (const ak_launch_cfg_t *lc, ak_launch_t *l)
{
    memcpy (l->grid, lc->grid, sizeof l->grid);
    memcpy (l->block, lc->block, sizeof l->block);
    l->shared_bytes = lc->shared_bytes;
    memcpy (l->cluster, lc->cluster, sizeof l->cluster);
    l->tmaps = lc->ntmaps ? lc->tmaps : NULL;
    l->ntmaps = lc->ntmaps;

}

ak_dtype_t ak_backend_build_dtype (const ak_backend_t *be, const Ak__Device *device)
{
    static const ak_dtype_t order[] = { AK_DT_FLOAT32, AK_DT_BFLOAT16, AK_DT_FLOAT16 };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (!be || !be->supports_dtype || be->supports_dtype (device, order[i]))
            return order[i];
    return AK_DT_FLOAT32;
}
