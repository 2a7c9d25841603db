/*  tests/unit/unit_profiles.h: the fixture test_profiles and
    test_profiles_vendor share (tests/unit/unit_profiles.c).  Every helper
    fails the running test (cmocka) on an error it does not return. */
#ifndef AK_TESTS_UNIT_PROFILES_H
#define AK_TESTS_UNIT_PROFILES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "store.h"

#define AK_PF_CLASS_A "NVIDIA_H200/sm_90/drv580/nvrtc13.0"
#define AK_PF_CLASS_B "NVIDIA_B200/sm_100/drv580/nvrtc13.0"

typedef struct {
    char       *dir;
    ak_store_t *store;
    char        spec_digest[65], src_digest[65];   /* softmax's spec, warp_row's source */
} ak_pf_fx_t;

/* cmocka setup and teardown: a fresh store in a temporary folder. */
int ak_pf_setup (void **state);
int ak_pf_teardown (void **state);

/* The catalog spec of op and the source of its candidate cand_name as
   blobs in store (a batch's tasks name them by these digests). */
void ak_pf_store_spec (ak_store_t *store, const char *op, const char *cand_name, char *spec_digest,
                       char *src_digest);

/* A float32 workload name of rows x cols, weight 1. */
Ak__Workload *ak_pf_workload (const char *name, int64_t rows, int64_t cols);

/* A done cuda tune task of op on cls whose accepted receipt is rid; the
   caller adds params, workloads and digests. */
Ak__TaskRecord *ak_pf_task (const char *task_id, const char *batch_id, const char *op, const char *cls,
                            const char *candidate, const char *rid, const char *status);

/* Receipt rid of task t from worker w1 on device (name, cc_major), room
   for two timings. */
Ak__Receipt *ak_pf_receipt (const Ak__TaskRecord *t, const char *rid, const char *status, const char *device,
                            uint32_t cc_major);

/* A complete batch with one softmax tune task per class in classes[] (the
   winner promoted where promoted[i]) with ROWS=rows_param, and its
   receipts (ids from *next_receipt on). */
void ak_pf_batch (ak_pf_fx_t *fx, const char *batch_id, const char *state, const char *const *classes,
                  const bool *promoted, size_t n, int64_t rows_param, uint64_t *next_receipt);

/* Install batch's winners as profile name: _as with the flags given,
   ak_pf_install as `--unconfirmed` allows, _strict as a plain install
   (only winners another worker confirmed).  Its outcome; *out the answer. */
int ak_pf_install_as (ak_pf_fx_t *fx, const char *batch, const char *name, bool replace, bool unconfirmed,
                      json_t **out, ak_err_t *err);
int ak_pf_install (ak_pf_fx_t *fx, const char *batch, const char *name, bool replace, json_t **out, ak_err_t *err);
int ak_pf_install_strict (ak_pf_fx_t *fx, const char *batch, const char *name, json_t **out, ak_err_t *err);

/* Profile name as `akctl profiles show` gives it, or NULL (caller decrefs). */
json_t *ak_pf_show (ak_pf_fx_t *fx, const char *name);

/* The element of array a whose string field is value, or NULL; the class
   cls of a profile. */
json_t *ak_pf_find (json_t *a, const char *field, const char *value);
json_t *ak_pf_class (json_t *profile, const char *cls);

/* Imports package pkg as profile name (its outcome); the package of
   profile name as export gives it (caller decrefs). */
int     ak_pf_import (ak_pf_fx_t *fx, json_t *pkg, const char *name, bool replace, ak_err_t *err);
json_t *ak_pf_export (ak_pf_fx_t *fx, const char *name);

/* Profiles a_name and b_name hold the same, their names and the times
   their classes were written aside. */
void ak_pf_assert_same (ak_pf_fx_t *fx, const char *a_name, const char *b_name);

#endif
