/*  discover/payload.h: the text of an NVTX range, read as a PyTorch
    emit_nvtx payload (docs/discover.md, "Range payloads").

    PyTorch's autograd profiler with emit_nvtx(record_shapes=True) names each
    range "aten::softmax, seq = 12, op_id = 3, sizes = [[4096, 32000], []]";
    ops/discover/torch_nvtx.py adds module and attention ranges of the same
    shape with "dtypes = [bfloat16, ...]" and flags such as "is_causal = 1".
    The grammar read here: NAME (", " KEY " = " VALUE)*, VALUE a number, a
    bare word, or a bracketed list of those (nested).  Anything else is
    carried in the name or skipped.

    Never: crash, read past the text, or fail on odd or truncated text: a
    text that is not a payload is a payload with only a name (and
    `truncated` set when a list or value was cut off). */
#ifndef AKD_PAYLOAD_H
#define AKD_PAYLOAD_H
#include <stdbool.h>
#include <stdint.h>

#define AKD_MAX_DIMS    8
#define AKD_MAX_ARGS    16
#define AKD_MAX_INTS    8

typedef struct {
    bool    tensor;                 /* a list of integers (a scalar arg is [] and not one) */
    int     ndims;
    int64_t dims[AKD_MAX_DIMS];
} akd_shape_t;

typedef struct {
    char        name[160];          /* "aten::softmax", or the whole text cut to fit */
    int64_t     seq;                /* -1 when absent */
    bool        has_sizes;
    int         nsizes;             /* arguments, tensors or not */
    akd_shape_t sizes[AKD_MAX_ARGS];
    int         ndtypes;
    char        dtypes[AKD_MAX_ARGS][24];   /* as written: "bfloat16", "c10::BFloat16", "Float" */
    int         nints;
    struct { char key[24]; int64_t value; } ints[AKD_MAX_INTS];   /* other integer fields */
    bool        truncated;          /* a value or list ended before it closed */
} akd_payload_t;

/*  Reads text (any bytes, NUL-terminated; NULL reads as "") into *out.
    Always fills *out; returns true when the text had at least one
    "KEY = VALUE" field, i.e. looked like a payload. */
bool akd_payload_parse (const char *text, akd_payload_t *out);

/*  The integer field key, or dflt. */
int64_t akd_payload_int (const akd_payload_t *p, const char *key, int64_t dflt);

/*  The catalog dtype of a PyTorch dtype text: "float32", "float16",
    "bfloat16", or NULL for any other (int64, float64, unknown). */
const char *akd_dtype_catalog (const char *torch_dtype);

/*  The key ranges are grouped by: the text without the fields that change
    from call to call (seq, op_id, input_op_ids), e.g.
    "aten::softmax, sizes = [[4096, 32000], []]".  Writes at most cap-1
    bytes and a NUL. */
void akd_payload_key (const char *text, char *out, int cap);

#endif
