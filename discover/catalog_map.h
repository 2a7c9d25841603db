/*  discover/catalog_map.h: which catalog operator a range stands for, and
    at which shape (docs/discover.md, "Mapping to the catalog").

    The table maps PyTorch op names (emit_nvtx) and the module and attention
    ranges of ops/discover/torch_nvtx.py to kernels/<op>/spec.json and
    derives the spec's shape keys from the recorded argument sizes.

    Never: guess a shape the sizes do not give.  A range whose operator is in
    the catalog but whose shape the catalog cannot express (a batched GEMM,
    attention with different query and key lengths) says why instead. */
#ifndef AKD_CATALOG_MAP_H
#define AKD_CATALOG_MAP_H
#include <stdint.h>
#include "payload.h"

#define AKD_MAP_MAX_KEYS 8                /* AK_MAX_DIMS */

typedef struct {
    const char *op;                        /* "matmul"; NULL when not a catalog operator */
    int         nkeys;
    const char *keys[AKD_MAP_MAX_KEYS];    /* the spec's keys, in its order */
    int64_t     values[AKD_MAP_MAX_KEYS];
    const char *dtype;                     /* catalog dtype from the payload, NULL when it has none */
    char        why[160];                  /* op set but shape unusable: why ("" when usable) */
} akd_map_t;

/*  Maps one parsed range.  Returns 1 (op and shape), -1 (op, no shape:
    why says), 0 (not a catalog operator). */
int akd_map_payload (const akd_payload_t *p, akd_map_t *out);

/*  The catalog dtype of p's first tensor argument with a known dtype, or
    NULL. */
const char *akd_map_dtype (const akd_payload_t *p);

/*  One line per table row, for `akctl discover --help` and docs. */
extern const char akd_map_table_text[];

#endif
