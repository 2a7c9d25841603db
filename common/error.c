/*  common/error.c: error codes and error context. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *ak_strerror (int code)
{
    switch (code) {
        case AK_OK:           return "success";
        case AK_EINVAL:       return "invalid input";
        case AK_ENOMEM:       return "out of memory";
        case AK_EIO:          return "I/O error";
        case AK_ENOTFOUND:    return "not found";
        case AK_EEXIST:       return "already exists";
        case AK_EPROTO:       return "malformed message";
        case AK_EVERSION:     return "unsupported version";
        case AK_ETOOBIG:      return "too big";
        case AK_ETIMEOUT:     return "timed out";
        case AK_ESTORE:       return "store failure";
        case AK_ESTOREFULL:   return "store map full";
        case AK_ECOMPILE:     return "compile error";
        case AK_ECRASH:       return "crashed";
        case AK_EUNSUPPORTED: return "unsupported";
        case AK_ESTATE:       return "invalid state";
        case AK_EDENIED:      return "denied";
        case AK_EUNAVAIL:     return "unavailable";
        case AK_EINTERNAL:    return "internal error";
        case AK_ENOSPACE:     return "no space left on device";
        case AK_EBOUNDS:      return "wrote outside its outputs";
        default:              return "unknown error";
    }
}

int ak_err_set (ak_err_t *err, int code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (err->msg, sizeof err->msg, fmt, ap);
        va_end (ap);
    }
    return code;
}

/*  Prefixes err->msg with the formatted text and ": ".  The result is
    truncated to the buffer; the code is kept and returned. */
int ak_err_prefix (ak_err_t *err, const char *fmt, ...)
{
    if (!err)
        return AK_OK;
    char prefix[sizeof err->msg];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (prefix, sizeof prefix, fmt, ap);
    va_end (ap);
    /* Joined by hand (not snprintf) so the truncation is explicit. */
    char joined[sizeof err->msg];
    size_t lp = strlen (prefix), lm = strlen (err->msg), cap = sizeof joined - 1;
    size_t n = lp < cap ? lp : cap;
    memcpy (joined, prefix, n);
    for (const char *sep = ": "; *sep && n < cap; sep++)
        joined[n++] = *sep;
    size_t m = lm < cap - n ? lm : cap - n;
    memcpy (joined + n, err->msg, m);
    joined[n + m] = '\0';
    memcpy (err->msg, joined, sizeof err->msg);
    return err->code;
}
