/*  common/dtype.h: the element types kernels are tuned for.

    A dtype is named in specs, manifests, corpora, task records and
    receipts by the strings here; its size is what `b` (bytes per element)
    is in every shape expression.

    Never: a dtype whose name or size differs between the coordinator and
    the workers (the names are part of the wire and the store). */
#ifndef AK_DTYPE_H
#define AK_DTYPE_H
#include <stddef.h>

typedef enum { AK_DT_FLOAT16 = 0, AK_DT_BFLOAT16, AK_DT_FLOAT32, AK_DT_COUNT } ak_dtype_t;

const char *ak_dtype_name (ak_dtype_t dt);                  /* "float16" ...; "invalid" */
int ak_dtype_parse (const char *name, ak_dtype_t *out);     /* 0 or AK_EINVAL */
size_t ak_dtype_size (ak_dtype_t dt);                       /* 2, 2, 4; 0 when invalid */

#endif
