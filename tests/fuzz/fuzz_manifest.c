/*  tests/fuzz/fuzz_manifest.c: libFuzzer target for the manifest bundle
    parser (common/spec.c: ak_manifest_parse_bundle), what `submit` hands the
    coordinator.  A bundle that parses must serialise and parse again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "manifest.h"
#include "spec.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    ak_manifest_t *m = NULL;
    ak_err_t err = { 0 };
    if (ak_manifest_parse_bundle ((const char *) data, size, "fuzz", &m, &err) != 0) {
        if (!err.msg[0] || m)
            abort ();
        return 0;
    }
    char *text = ak_manifest_to_bundle (m);
    if (!text)
        abort ();
    ak_manifest_t *again = NULL;
    if (ak_manifest_parse_bundle (text, strlen (text), "fuzz-again", &again, &err) != 0)
        abort ();
    ak_manifest_destroy (&again);
    free (text);
    ak_manifest_destroy (&m);
    return 0;
}
