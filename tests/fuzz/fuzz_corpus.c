/*  tests/fuzz/fuzz_corpus.c: libFuzzer target for the shape-corpus parser
    (common/corpus.c) against the catalog's softmax spec.  Every input must
    either parse into a corpus whose cases satisfy the documented invariants
    (a declared dtype, positive sizes, a finite positive weight, unique
    names) or be refused with an error message. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "corpus.h"
#include "spec.h"

static ak_spec_t *s_spec;

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    ak_err_t err = { 0 };
    if (ak_spec_load (AK_FUZZ_SPEC, &s_spec, &err) != 0)
        abort ();
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *json = json_loadb ((const char *) data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!json)
        return 0;
    ak_corpus_t *corpus = NULL;
    ak_err_t err = { 0 };
    if (ak_corpus_parse (json, "fuzz.json", s_spec, &corpus, &err) != 0) {
        if (!err.msg[0] || corpus)
            abort ();
        json_decref (json);
        return 0;
    }
    if (!corpus || corpus->ncases == 0 || strcmp (corpus->operation, s_spec->name) != 0)
        abort ();
    for (size_t i = 0; i < corpus->ncases; i++) {
        const ak_corpus_case_t *c = &corpus->cases[i];
        if (!ak_spec_has_dtype (s_spec, c->dtype) || !(c->weight > 0) || !isfinite (c->weight))
            abort ();
        for (int k = 0; k < s_spec->nkeys; k++)
            if (c->dims[k] <= 0)
                abort ();
        for (size_t j = 0; j < i; j++)
            if (strcmp (c->name, corpus->cases[j].name) == 0)
                abort ();
    }
    ak_corpus_destroy (&corpus);
    json_decref (json);
    return 0;
}
