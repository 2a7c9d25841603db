/*  tests/fuzz/fuzz_envelope.c: libFuzzer target for the envelope decoder
    (common/envelope.c), the door every network byte comes through.  A frame
    that decodes must pack again within the size limit, and every body kind
    must be nameable.  The receipt validator never passes bytes protobuf-c
    refuses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "envelope.h"
#include "pbwire.h"

/* The receipt validator (common/pbwire.c) against protobuf-c: bytes it
   passes with nothing unknown, protobuf-c must decode. */
static void s_validator_agrees (const uint8_t *data, size_t size)
{
    size_t unknown = 0;
    if (ak_pbw_validate (&ak__receipt__descriptor, data, size, 31, AK_MAX_STRING, AK_MAX_REPEATED, &unknown) == 0
        && unknown == 0) {
        Ak__Receipt *r = ak__receipt__unpack (NULL, size, data);
        if (!r)
            abort ();
        ak__receipt__free_unpacked (r, NULL);
    }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    s_validator_agrees (data, size);
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
