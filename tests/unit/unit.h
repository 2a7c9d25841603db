/*  tests/unit/unit.h: what the unit tests share (linked into each of them,
    tests/CMakeLists.txt).

    The host-catalog fixture of the tests that run catalog kernels on the
    host backend (test_catalog_mem, test_catalog_compute,
    test_catalog_decode): the backend opened once per group, a fresh
    compile cache, the built-in specs, kernels built and loaded.  Every
    helper fails the running test (cmocka fail_msg) on an error instead of
    returning it. */
#ifndef AK_TESTS_UNIT_H
#define AK_TESTS_UNIT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "worker/backend.h"
#include "worker/gates.h"
#include "spec.h"
#include "space.h"
#include "akfleet.pb-c.h"
#include "manifest.h"

typedef struct {
    char               *dir;           /* the compile cache: a fresh directory named after tag */
    const ak_backend_t *be;            /* the host backend */
    ak_dev_t           *dev;
} ak_cat_host_t;

/* 0, or -1 when the host backend cannot be opened (the group setup fails). */
int  ak_cat_host_open (ak_cat_host_t *h, const char *tag);
void ak_cat_host_close (ak_cat_host_t *h);

/* kernels/OP/spec.json of the source tree; the caller destroys it. */
ak_spec_t *ak_cat_spec (const char *op);

/* text built with h's backend, float32 (or the float64 oracle with
   reference), the n parameters names[i] = values[i] as defines, and its
   ak_kernel (ak_reference) loaded; the caller unloads it. */
ak_kernel_t *ak_cat_build (ak_cat_host_t *h, const char *text, bool reference,
                           const char *const *names, const int64_t *values, int n);

/* expr (a buffer count, flops, bytes) of spec at dims, float32. */
int64_t ak_cat_count (const ak_spec_t *spec, const char *expr, const int64_t *dims);

/* op's float64 oracle on dims with float64 inputs in (spec order, each
   its count long): every output element (outputs concatenated in want)
   within tol * (1 + |want|). */
void ak_cat_oracle (ak_cat_host_t *h, const char *op, const int64_t *dims, const double *const *in,
                    const double *want, double tol);

/* The five gates of spec over text (float32, seed 42, parameters as in
   ak_cat_build) against the oracle ref; rep filled, its status returned.
   The stages are printed when it is not ok. */
ak_gate_status_t ak_cat_gate (ak_cat_host_t *h, const ak_spec_t *spec, ak_kernel_t *ref, const char *text,
                              const char *const *names, const int64_t *values, int n,
                              ak_gate_report_t *rep);

/* op's host baseline with the first `from` replaced by `to` must come out
   of the gates wrong_answer, beyond tolerance. */
void ak_cat_expect_wrong (ak_cat_host_t *h, const char *op, const char *from, const char *to);

/* The host baseline and every configuration of every host candidate of op
   through the five gates: each passes all five stages, every host size
   and every edge size run.  Returns the number of candidate
   configurations (the baseline not counted). */
size_t ak_cat_host_gates (ak_cat_host_t *h, const char *op);

/*  The spec fixture of test_spec and test_spec_launch (cmocka setup and
    teardown): a known-good toy spec ("toy", keys rows and cols, a host
    baseline and a host candidate; its sources written to dir: ref.c,
    host/, cuda/base.cu and cuda/rows.cu) as JSON that a test changes, then
    writes to dir/spec.json and loads. */
typedef struct {
    char   *dir;
    json_t *json;
} ak_spec_fx_t;

int ak_spec_fx_setup (void **state);
int ak_spec_fx_teardown (void **state);

/* Writes the spec (with `from` replaced by `to` in the text when given)
   and loads it; returns the code, spec or err filled. */
int ak_spec_fx_load_text (ak_spec_fx_t *fx, const char *from, const char *to, ak_spec_t **spec, ak_err_t *err);
int ak_spec_fx_load (ak_spec_fx_t *fx, ak_spec_t **spec, ak_err_t *err);

/* Loading must fail with code and a message holding every needle. */
void ak_spec_fx_expect (ak_spec_fx_t *fx, const char *from, const char *to, int code, const char *needle1,
                        const char *needle2);

/* Sets path to value (NULL: deletes it), expects AK_EINVAL naming the
   needles, then puts the fixture back as it was. */
void ak_spec_fx_reject (ak_spec_fx_t *fx, const char *path, json_t *value, const char *needle1,
                        const char *needle2);

/*  The rounds fixture of test_rounds and test_rounds_flow: an operator
    "opa" (host, one size "small") whose candidate "blocked" has BLOCK 1..8
    x UNROLL 1..4 with BLOCK*UNROLL <= 16 (AK_ROUNDS_FX_VALID of 32
    configurations), written under dir with a manifest of that policy
    (JSON members without braces), loaded. */
#define AK_ROUNDS_FX_VALID 25
ak_manifest_t *ak_rounds_fx_manifest (const char *dir, const char *policy);
/* Only the operator's files, under dir/opa. */
void ak_rounds_fx_write_op (const char *dir);
/* The value of parameter name (the test fails without it). */
int64_t ak_rounds_fx_param (Ak__Param *const *params, size_t n, const char *name);
/* An ok tune receipt of worker with one workload "small": baseline 100 us,
   the candidate 100/speedup, speedup and noise as given. */
Ak__Receipt *ak_rounds_fx_receipt (const char *id, const char *worker, double speedup, double noise);

/* A HELLO of worker id from host "testhost" with one device of class
   "host", slots and prefetch as given (free with ak__hello__free_unpacked). */
Ak__Hello *ak_unit_hello (const char *id, uint32_t slots, uint32_t prefetch);

/*  A kernel through the CPU emulation (tests/unit/cuda_emu, unit_emu.c):
    exe (built by the test) runs the host oracle and the device kernel on
    the spec's inputs for dims in dtype dt (seed), with the launch cfg
    (grid[0] divided by shrink); every output element of the device side
    is compared with the oracle's: within atol + rtol*|oracle| (tol), or
    without tol within 1e-9 of the output's largest magnitude; both NaN is
    equal, an element left unwritten is NaN. */
/* The emulation program in dir (its path; the caller frees): the host
   oracle (spec's ref.c, ak_reference renamed ak_host_reference) compiled
   with gcc, and tests/unit/cuda_emu/main.cpp with g++, text written to
   dir/file and named by -Dmacro ("AK_EMU_REF": a device reference;
   "AK_EMU_CAND": a candidate), flags added (-I, -D). */
char *ak_unit_emu_build (const ak_spec_t *spec, const char *dir, const char *macro, const char *file,
                         const char *text, const char *flags);

typedef struct {
    size_t checked, bad, worst_at;
    double worst, tol;
    int    worst_out;                   /* -1: none beyond */
    double seconds;                     /* the emulation program's run (oracle included) */
} ak_emu_cmp_t;
void ak_unit_emu_run (const ak_spec_t *spec, const char *dir, const char *exe, const int64_t *dims,
                      ak_dtype_t dt, uint64_t seed, const ak_launch_cfg_t *cfg, unsigned shrink,
                      const ak_tol_t *tol, ak_emu_cmp_t *r);
/* The same, but an emulation that fails (exits non-zero: a deadlock, an
   address outside shared memory, ...) returns its exit status with what
   it printed in *msg (the caller frees), r zeroed; 0 once compared. */
int ak_unit_emu_try (const ak_spec_t *spec, const char *dir, const char *exe, const int64_t *dims,
                     ak_dtype_t dt, uint64_t seed, const ak_launch_cfg_t *cfg, unsigned shrink,
                     const ak_tol_t *tol, ak_emu_cmp_t *r, char **msg);

#endif
