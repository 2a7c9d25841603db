/*  common/error.h: error codes and error context.

    Functions return 0 on success or a negative AK_E... code; where a caller
    needs to know *what* failed (which file, field, task, library call) they
    also take an ak_err_t and fill it.  Never assert on untrusted input. */
#ifndef AK_ERROR_H
#define AK_ERROR_H

#include <stddef.h>

enum {
    AK_OK          =  0,
    AK_EINVAL      = -1,    /* invalid input (manifest, spec, argument) */
    AK_ENOMEM      = -2,
    AK_EIO         = -3,    /* file or socket I/O */
    AK_ENOTFOUND   = -4,
    AK_EEXIST      = -5,
    AK_EPROTO      = -6,    /* malformed message */
    AK_EVERSION    = -7,    /* unknown protocol or schema version */
    AK_ETOOBIG     = -8,    /* over a size limit */
    AK_ETIMEOUT    = -9,
    AK_ESTORE      = -10,   /* LMDB failure */
    AK_ESTOREFULL  = -11,   /* LMDB map is full */
    AK_ECOMPILE    = -12,
    AK_ECRASH      = -13,
    AK_EUNSUPPORTED= -14,
    AK_ESTATE      = -15,   /* operation not valid in this state */
    AK_EDENIED     = -16,
    AK_EUNAVAIL    = -17,   /* peer or service not reachable */
    AK_EINTERNAL   = -18,
    AK_ENOSPACE    = -19,   /* the store's disk (or file size limit) is full */
    AK_EBOUNDS     = -20,   /* a kernel wrote outside its outputs (a guard region or an input changed) */
};

/* Human text for a code; never NULL. */
const char *ak_strerror (int code);

/* Context of a failure: "batch.json: ops[2].tolerances.float16.atol: must be finite" */
typedef struct {
    int  code;
    char msg[1024];
} ak_err_t;

/* Fills err (when not NULL) and returns code, so callers can write
   `return ak_err_set (err, AK_EINVAL, "%s: %s: must be finite", file, path);` */
int ak_err_set (ak_err_t *err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Prefixes the message already in err with "prefix: " (keeps the code). */
int ak_err_prefix (ak_err_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

#endif
