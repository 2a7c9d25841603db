/*  tests/support.h: helpers shared by the cmocka test binaries. */
#ifndef AK_TEST_SUPPORT_H
#define AK_TEST_SUPPORT_H
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <cmocka.h>
#include <jansson.h>

/* A fresh temporary directory (mkdtemp under $TMPDIR or /tmp); caller frees
   the string; ak_test_rmtree removes it. */
char *ak_test_tmpdir (const char *tag);
void  ak_test_rmtree (const char *path);

/* Paths: $AK_SOURCE_DIR/rel and $AK_BIN_DIR/name (set by CTest); caller frees. */
char *ak_test_src (const char *rel);
char *ak_test_bin (const char *name);

/* The operators of the catalog: every kernels/<op>/ that has a spec.json,
   in name order, or only those named in $AK_CATALOG_OPS ("layernorm,reduce").
   Stores malloc'ed names in ops (room for max) and returns how many; fails
   the test when there is none or more than max. */
#define AK_TEST_MAX_OPS 64
int ak_test_catalog_ops (char *ops[], int max);

/* Writes text to dir/name and returns the full path (caller frees). */
char *ak_test_write (const char *dir, const char *name, const char *text);

/* Starts argv[0] with argv (NULL-terminated), stdout+stderr to log_path
   (appended; NULL: inherit).  Returns the pid or -1. */
pid_t ak_test_spawn (char *const argv[], const char *log_path);
/* Starts akcoord as ak_test_spawn does, with "--plain" added after argv[0]
   (the akcoord binary): tests on loopback and ipc:// run without
   authentication, which akcoord only does when asked.  Tests of CURVE
   (tests/integration/test_auth.c) use ak_test_spawn with --cert/--keys. */
pid_t ak_test_spawn_coord (char *const argv[], const char *log_path);
/* Sends sig and waits up to timeout_ms; then SIGKILL. Returns exit status (waitpid form). */
int   ak_test_stop (pid_t pid, int sig, int timeout_ms);

/* Runs a command line through /bin/sh, captures stdout (caller frees) and
   returns the exit code (or -1). */
int   ak_test_run (const char *cmdline, char **out_p);

/* Polls fn(arg) every 20 ms until it returns true or timeout_ms passes. */
bool  ak_test_wait (bool (*fn) (void *arg), void *arg, int timeout_ms);

/* JSON fixtures: the value at path ("ops[0].policy.threshold",
   "sizes[2].size.cols") of root, or NULL; and set (value non-NULL, stolen)
   or delete the member at path, whose parent must exist (else the test fails). */
json_t *ak_test_json_at (json_t *root, const char *path);
void    ak_test_json_set (json_t *root, const char *path, json_t *value);

#endif
