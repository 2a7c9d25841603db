/*  tests/fuzz/fuzz_envelope.c: libFuzzer target for the envelope decoder
    (common/envelope.c), the door every network byte comes through.  A frame
    that decodes must pack again within the size limit, and every body kind
    must be nameable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "envelope.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    Ak__Envelope *env = NULL;
    ak_err_t err = { 0 };
    if (ak_envelope_unpack (data, size, 0, &env, &err) != 0) {
        if (!err.msg[0] || env)
            abort ();           /* a failure always says why and returns nothing */
        return 0;
    }
    if (!ak_envelope_kind (env))
        abort ();
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = ak_envelope_pack (env, &buf, &len);
    if (rc != 0 && rc != AK_ETOOBIG)
        abort ();
    if (rc == 0) {
        /* what we pack, we decode */
        Ak__Envelope *again = NULL;
        if (ak_envelope_unpack (buf, len, 0, &again, &err) != 0 || again->body_case != env->body_case)
            abort ();
        ak_envelope_free (&again);
    }
    free (buf);
    ak_envelope_free (&env);
    return 0;
}
