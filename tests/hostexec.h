/*  tests/hostexec.h: the softmax host jobs that tests run through real
    executors (akworker --executor, host backend): test_executor and
    test_hostile_kernels.  Compiled once with support.c
    (tests/CMakeLists.txt).

    Never: assert inside (a caller that expects a failure gets it back);
    hold state between calls. */
#ifndef AK_TESTS_HOSTEXEC_H
#define AK_TESTS_HOSTEXEC_H
#include <stdbool.h>
#include <stdint.h>
#include "akfleet.pb-c.h"
#include "error.h"
#include "spec.h"

/* A host build of text (float32; reference: built as the reference) into
   the compile cache cache_dir: the artifact's path (caller frees), or NULL
   with err set and, when log_p is given, the compiler's log in *log_p
   (caller frees; also on success). */
char *ak_test_host_build (const char *cache_dir, const char *text, bool reference, ak_err_t *err,
                          char **log_p);

/* What differs between the jobs tests make. */
typedef struct {
    int64_t  rows, cols;                 /* the one float32 workload "small" */
    uint32_t lease_ms;                   /* 0: unset */
    uint32_t compile_timeout_ms;         /* 0: unset */
    uint32_t run_timeout_ms;
    uint32_t max_samples, max_time_ms;   /* warm-up 1, at least 3 samples, rsd 0.5 */
    uint64_t seed;
} ak_test_job_opts_t;

/* A heap-owned Assign of batch B000001, attempt 1, for softmax on the
   host (free with ak__assign__free_unpacked): its spec (spec, and
   spec_json its text), reference and host baseline; kind ("tune",
   "preflight" ...); the candidate cand_name with cand_text (NULL: none);
   and o's workload and policy. */
Ak__Assign *ak_test_host_assign (const ak_spec_t *spec, const char *spec_json, const char *task_id,
                                 const char *kind, const char *cand_name, const char *cand_text,
                                 const ak_test_job_opts_t *o);

#endif
