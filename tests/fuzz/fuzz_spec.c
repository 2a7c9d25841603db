/*  tests/fuzz/fuzz_spec.c: libFuzzer target for the kernel spec parser
    (common/spec.c, common/expr.c): JSON text as it comes inline in a
    bundle.  A spec that parses must serialise, and its serialisation must
    parse again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "spec.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    ak_spec_t *spec = NULL;
    ak_err_t err = { 0 };
    if (ak_spec_parse_text ((const char *) data, size, "fuzz", &spec, &err) != 0) {
        if (!err.msg[0] || spec)
            abort ();
        return 0;
    }
    char *text = ak_spec_to_text (spec, true);
    if (!text)
        abort ();
    ak_spec_t *again = NULL;
    if (ak_spec_parse_text (text, strlen (text), "fuzz-again", &again, &err) != 0)
        abort ();               /* what we write, we read */
    ak_spec_destroy (&again);
    free (text);
    ak_spec_destroy (&spec);
    return 0;
}
