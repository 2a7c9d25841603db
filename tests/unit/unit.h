/*  tests/unit/unit.h: what the unit tests of the catalog share
    (tests/unit/unit.c, linked into every unit test binary).

    The host backend opened once per test group, and the steps every
    catalog test takes on it: load a built-in spec, build a kernel (float32)
    or the float64 oracle, run the oracle on hand-made inputs, run a kernel
    through the five gates, walk every host configuration of an operator
    through them, and check that a subtly wrong kernel is wrong_answer.

    Never: skip a stage or a size to go green; every helper fails the test
    (cmocka) with the operator, the configuration and the gate's reason. */
#ifndef AK_TEST_UNIT_H
#define AK_TEST_UNIT_H
#include "worker/backend.h"
#include "worker/gates.h"
#include "spec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*  Opens the host backend and a scratch directory (tag names it);
    ak_cat_close releases both.  One at a time per process.  The group
    setup and teardown of cmocka do the same (tag "catalog"). */
int  ak_cat_open (const char *tag);
void ak_cat_close (void);
int  ak_cat_group_setup (void **state);
int  ak_cat_group_teardown (void **state);

/*  kernels/OP/spec.json, loaded; fails the test on any error. Caller
    destroys. */
ak_spec_t *ak_cat_spec (const char *op);

/*  Compiles text with the host backend (float32, or the float64 oracle
    when reference) with n -D defines, and loads its symbol. Caller
    unloads with ak_cat_unload. */
ak_kernel_t *ak_cat_build (const char *text, bool reference, const char *const *names,
                           const int64_t *values, int n);
void ak_cat_unload (ak_kernel_t **k);

/*  Runs op's oracle on dims with the given float64 inputs (in spec order,
    each the spec's count long) and checks every output element against
    want (outputs concatenated) to 1e-12 relative. */
void ak_cat_oracle (const char *op, const int64_t *dims, const double *const *in, const double *want);

/*  text through the five gates against ref (seed 42); returns the status,
    the report in *rep. */
ak_gate_status_t ak_cat_gate (const ak_spec_t *spec, ak_kernel_t *ref, const char *text,
                              const char *const *names, const int64_t *values, int n,
                              ak_gate_report_t *rep);

/*  The host baseline and every configuration of every host candidate of
    op through the gates: each must pass all five stages, with every host
    size and every edge size run.  Returns the number of candidate
    configurations (the baseline not counted). */
size_t ak_cat_host_gates (const char *op);

/*  op's host baseline with the first occurrence of from replaced by to
    must be wrong_answer, "beyond tolerance". */
void ak_cat_expect_wrong (const char *op, const char *from, const char *to);

#endif
