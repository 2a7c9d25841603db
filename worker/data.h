/*  worker/data.h: element types and generated inputs, shared by gates and
    timing.

    Inputs are never shipped: element i of input buffer j is
    ak_rng_range (seed, j, i, lo, hi) from the spec's generator, rounded to
    the kernel's element type, so any process (and later a device) derives
    the same values.  The float64 reference sees exactly those rounded
    values.  float16 and bfloat16 are handled here in software (round to
    nearest even) so gates are the same code for every backend. */
#ifndef AK_WORKER_DATA_H
#define AK_WORKER_DATA_H
#include <stddef.h>
#include <stdint.h>
#include "error.h"
#include "spec.h"

/* Largest finite value of dt. */
double ak_elem_max (ak_dtype_t dt);
/* v rounded to the nearest value of dt (ties to even), clipped to
   [-max, max] so it stays finite; NaN stays NaN. */
double ak_elem_round (ak_dtype_t dt, double v);
/* Element i of a dt array: store v (already representable) / load it. */
void   ak_elem_store (ak_dtype_t dt, void *base, size_t i, double v);
double ak_elem_load (ak_dtype_t dt, const void *base, size_t i);

/* The spec's generator value for input j, element i, rounded to dt. */
double ak_input_value (const ak_spec_t *spec, int j, uint64_t i, uint64_t seed, ak_dtype_t dt);

/* Input j's elements 0..n-1: the generator's value, passed through xform
   when given (xform (arg, j, i, v): the gates' special inputs), rounded to
   dt, into raw (n elements of dt) and, when given, vals (float64); with no
   xform, vals[i] is ak_input_value's.  An input is made in parts of at
   least AK_INPUT_FILL_MIN elements, at most one a CPU and 16 in all, on
   threads of their own (each element depends on nothing but seed, j and
   i; a 64 Mi-element input takes seconds on one); a part whose thread
   cannot start (a sandbox that denies clone) is made by the caller. */
#define AK_INPUT_FILL_MIN (1u << 16)

/* fn (arg, part, lo, hi) over elements 0..n-1 in parts of at least min
   elements (one part when n < 2 min), at most one a CPU and AK_PAR_MAX in
   all, part p covering [n p / parts, n (p+1) / parts): part 0 on the
   caller, the others on threads of their own (a part whose thread cannot
   start, in a sandbox that denies clone, runs on the caller after part 0).
   Returns the number of parts; every part has run when it returns. */
#define AK_PAR_MAX 16
typedef void (ak_par_fn) (void *arg, size_t part, size_t lo, size_t hi);
size_t ak_par_for (size_t n, size_t min, ak_par_fn *fn, void *arg);
typedef double (ak_input_xform_fn) (void *arg, int j, uint64_t i, double v);
void ak_input_fill (const ak_spec_t *spec, int j, uint64_t seed, ak_dtype_t dt, size_t n,
                    ak_input_xform_fn *xform, void *arg, double *vals, void *raw);

/* Element counts of every input and output buffer for dims, each checked
   to be in [1, AK_DATA_MAX_ELEMS]; AK_EINVAL naming the buffer otherwise. */
#define AK_DATA_MAX_ELEMS AK_SPEC_MAX_ELEMS
int ak_buf_counts (const ak_spec_t *spec, const int64_t *dims, ak_dtype_t dt,
                   size_t nin[AK_MAX_BUFS], size_t nout[AK_MAX_BUFS], ak_err_t *err);

/* "128x256" for dims in key order, into buf. */
const char *ak_dims_text (const ak_spec_t *spec, const int64_t *dims, char *buf, size_t len);

#endif
