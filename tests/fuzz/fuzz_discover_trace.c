/*  tests/fuzz/fuzz_discover_trace.c: libFuzzer target for the discover
    trace reader (discover/trace.c, trace_bin.c: the binary traces of
    version 2 and the JSON lines of version 1, told apart by their first
    bytes) and the attribution over what it reads (discover/attribute.c).
    Every input must either be read, every kernel then attributed to a
    range that exists (or none), or be refused with an error message; a
    binary refusal names an offset. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "discover/attribute.h"
#include "discover/trace.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    akd_trace_t *t = NULL;
    ak_err_t err = { 0 };
    if (akd_trace_parse ((const char *) data, size, "fuzz.akd", &t, &err) != 0) {
        if (!err.msg[0] || t)
            abort ();
        if (size >= 8 && memcmp (data, "AKDTRACE", 8) == 0 && !strstr (err.msg, "offset"))
            abort ();
        return 0;
    }
    akd_attr_t *a = NULL;
    if (akd_attribute (t, &a, &err) != 0 || !a)
        abort ();
    for (size_t i = 0; i < a->nkernels; i++)
        if (a->kernels[i].range < -1 || a->kernels[i].range >= (int) a->nranges)
            abort ();
    for (size_t i = 0; i < a->nranges; i++)
        if (a->ranges[i].parent < -1 || a->ranges[i].parent >= (int) i)
            abort ();
    akd_attr_destroy (&a);
    akd_trace_destroy (&t);
    return 0;
}
