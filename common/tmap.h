/*  common/tmap.h: TMA tensor maps of a CUDA kernel (docs/formats.md
    "tensor_maps"), evaluated, and the rules cuTensorMapEncodeTiled puts on
    them, as pure functions.

    A spec's candidate (or baseline) may declare tensor maps over its
    buffers; space.h evaluates their expressions per workload into
    ak_tmap_cfg_t, and the CUDA backend encodes each with
    cuTensorMapEncodeTiled after it has the buffer's address, passing them
    as `const __grid_constant__` parameters after the argument block
    (kernels/ak_kernel_cuda.h, AK_CUDA_ABI 2).  A map that breaks a rule is
    the candidate's configuration, so it must become `invalid_config`
    naming the rule before anything reaches the driver: a bad box or stride
    handed to the TMA unit can fault the context or read past a buffer.

    Never: touch a device, or accept a map whose extent reaches past the
    buffer it names (ak_tmap_check's "extent" rule). */
#ifndef AK_TMAP_H
#define AK_TMAP_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <stddef.h>
#include "error.h"

#define AK_TMAP_MAX_RANK 5             /* cuTensorMapEncodeTiled's limit */
#define AK_MAX_TMAPS     8             /* per kernel */
#define AK_TMAP_MAX_BOX  256           /* elements per box dimension */

/* Values as the driver's enums number them (CUtensorMapSwizzle,
   CUtensorMapL2promotion, CUtensorMapFloatOOBfill). */
typedef enum { AK_TMAP_SWIZZLE_NONE = 0, AK_TMAP_SWIZZLE_32B, AK_TMAP_SWIZZLE_64B,
               AK_TMAP_SWIZZLE_128B } ak_tmap_swizzle_t;
typedef enum { AK_TMAP_L2_NONE = 0, AK_TMAP_L2_64B, AK_TMAP_L2_128B, AK_TMAP_L2_256B } ak_tmap_l2_t;
typedef enum { AK_TMAP_OOB_ZERO = 0, AK_TMAP_OOB_NAN } ak_tmap_oob_t;

/*  One tensor map, evaluated for a workload: what cuTensorMapEncodeTiled
    is given, besides the address and the data type. */
typedef struct {
    char     name[64];                 /* "tm_a": for messages */
    bool     output;                   /* the buffer is an output (else an input) */
    int      buf;                      /* its index among the inputs / outputs */
    uint32_t rank;                     /* 1..5 */
    uint64_t dims[AK_TMAP_MAX_RANK];   /* elements, innermost first */
    uint64_t strides[AK_TMAP_MAX_RANK - 1];   /* bytes of dims 1..rank-1 */
    uint32_t box[AK_TMAP_MAX_RANK];    /* elements, innermost first */
    uint32_t elem_bytes;               /* the buffer's element size: 2 or 4 */
    uint64_t buf_bytes;                /* bytes the buffer holds (the extent rule) */
    ak_tmap_swizzle_t swizzle;
    ak_tmap_l2_t      l2;
    ak_tmap_oob_t     oob;
    /* An optional map (the spec's "optional": true) that ak_tmap_check
       refused for this workload: passed to the kernel as 128 zero bytes
       (ak_tensor_map_present is false there), never encoded. */
    bool     absent;
} ak_tmap_cfg_t;

/*  Names of the enum values as the spec spells them ("128B", "none",
    "zero"); parse answers -1 for an unknown text. */
int         ak_tmap_swizzle_parse (const char *s);
int         ak_tmap_l2_parse (const char *s);
int         ak_tmap_oob_parse (const char *s);
const char *ak_tmap_swizzle_name (ak_tmap_swizzle_t s);
const char *ak_tmap_l2_name (ak_tmap_l2_t l);
const char *ak_tmap_oob_name (ak_tmap_oob_t o);
/*  Bytes of the swizzle span: 0 (none), 32, 64, 128. */
uint32_t    ak_tmap_swizzle_bytes (ak_tmap_swizzle_t s);

/*  Every rule of cuTensorMapEncodeTiled that does not depend on the
    address, and the extent rule: AK_EINVAL with err "tensor map NAME:
    rule RULE: ..." for the first one broken.  Rules, in this order:
      rank      1..5
      elem      element size 1, 2, 4 or 8 bytes
      dims      each 1..2^32
      strides   each a multiple of 16 and < 2^40; strides[0] >=
                dims[0]*elem, strides[i] >= strides[i-1]*dims[i]
                (dimensions do not overlap)
      box       each 1..256
      box_bytes box[0]*elem a multiple of 16 bytes
      swizzle   with a swizzle, box[0]*elem <= its span (32/64/128 bytes)
      enums     swizzle, L2 promotion, OOB fill in range
      extent    the last byte the map can address lies inside the buffer
                (strides[rank-2]*dims[rank-1], or dims[0]*elem for rank 1,
                <= buf_bytes) */
int ak_tmap_check (const ak_tmap_cfg_t *m, ak_err_t *err);

/*  The address rule: the buffer's address 16-byte aligned (rule "align"). */
int ak_tmap_check_address (const ak_tmap_cfg_t *m, uint64_t addr, ak_err_t *err);

/*  common/tmap_json.c: m as profile.json's "launch.maps" item
    {name, buffer, output, index, dims, strides, box, elem_bytes, swizzle,
    l2_promotion, oob_fill, absent} (buffer: the buffer's name); a new
    reference. */
json_t *ak_tmap_to_json (const ak_tmap_cfg_t *m, const char *buffer);
/*  j back into m, over the entry's nin inputs and nout outputs of
    in_counts / out_counts elements (buf_bytes from them); elem_bytes,
    when not 0, the only element size taken (the entry's dtype's).  Every
    field required; a present map must pass ak_tmap_check.  0 or AK_EINVAL
    with err naming the field or the rule. */
int ak_tmap_from_json (const json_t *j, const int64_t *in_counts, size_t nin, const int64_t *out_counts,
                       size_t nout, uint32_t elem_bytes, ak_tmap_cfg_t *m, ak_err_t *err);

#endif
