/*  common/space.h: a spec's expressions and parameter spaces
    (docs/formats.md).

    The spec parser (spec.c) checks every expression here for syntax and
    names and reads each candidate's parameter space here; everything else
    evaluates them: buffer counts, flops and bytes at a shape and dtype, a
    kernel's launch rule at a shape and a configuration, the configurations
    of a candidate that satisfy its constraints.  The coordinator samples
    the space; the worker launches what it evaluates.

    Never: undefined behaviour on any value (overflow, division by zero, a
    launch dimension out of range are errors naming the expression), or a
    walk over a space the parser has not bounded (ak_space_parse bounds
    the configurations and the work of checking their constraints). */
#ifndef AK_SPACE_H
#define AK_SPACE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "error.h"
#include "spec.h"

/* Evaluates a count / flops / bytes expression for dims (key order) and
   dtype (for `b`). */
int ak_spec_eval (const ak_spec_t *spec, const char *expr, const int64_t *dims, ak_dtype_t dt,
                  int64_t *out, ak_err_t *err);

/* Checks a shape of spec (a size, a workload) as the parser does:
   every count, flops and bytes expression evaluates for dims with every
   declared dtype; counts are 1..AK_SPEC_MAX_ELEMS; in-place outputs match
   their inputs.  AK_EINVAL with err naming label and path. */
int ak_spec_check_shape (const ak_spec_t *spec, const int64_t *dims, const char *label,
                         const char *path, ak_err_t *err);

/* A launch configuration, evaluated. */
typedef struct {
    uint32_t grid[3], block[3];         /* each >= 1 */
    uint32_t shared_bytes;              /* dynamic shared memory */
    uint32_t cluster[3];                /* thread-block cluster; 1, 1, 1: none */
    ak_tmap_cfg_t tmaps[AK_MAX_TMAPS];  /* the kernel's tensor maps, checked (ak_tmap_check) */
    int      ntmaps;
} ak_launch_cfg_t;

/* Evaluates rule for dims (key order), dtype dt (for `b`) and the kernel's
   parameters (names[i] = values[i]; none for a baseline) into out.  Every
   grid and block dimension must come out in 1..2^31-1 and shared in
   0..2^31-1.  AK_EINVAL with err naming the field and the value or the
   expression's error ("launch.block[0] = 0: must be 1..2147483647"), a
   candidate's fault (receipt status invalid_config), never UB.  The
   cluster must divide the grid in every dimension and hold at most 8
   blocks (the portable cluster size); each tensor map is evaluated (its
   element size that of dt, its buffer's bytes from the spec's count) and
   must pass ak_tmap_check, so a broken rule is named before any launch;
   an optional map that does not is marked absent instead. */
int ak_launch_eval (const ak_spec_t *spec, const ak_launch_rule_t *rule, const int64_t *dims,
                    ak_dtype_t dt, const char *const *names, const int64_t *values, int nparams,
                    ak_launch_cfg_t *out, ak_err_t *err);

/* Enumerates the candidate's parameter space (cartesian product, params in
   declaration order, values in the order given), skipping configurations
   that fail a constraint, and calls fn for each with values[i] for params[i].
   fn returning non-zero stops and returns that value.  `count` (may be NULL)
   gets the number of valid configurations. */
typedef int (ak_space_fn) (const ak_candidate_t *cand, const int64_t *values, void *arg);
int ak_space_walk (const ak_candidate_t *cand, ak_space_fn *fn, void *arg, size_t *count, ak_err_t *err);

/* Whether each values[i] is one of params[i]'s values (constraints not
   checked): a configuration of this version of the space's lists. */
bool ak_space_in_lists (const ak_candidate_t *cand, const int64_t *values);

/* Whether values is a configuration of the space: in the lists and every
   constraint true (one that fails to evaluate: false). */
bool ak_space_valid (const ak_candidate_t *cand, const int64_t *values);

/* The neighbours of the configuration center (center[i] for params[i],
   each one of its parameter's values) in the candidate's space, for a
   local search around a good configuration: first each parameter moved
   one step in its value list (down, then up), then each pair of
   parameters moved one step each in opposite directions (a trade such as
   more threads a row for fewer loads a thread, which a one-parameter move
   cannot make where a constraint ties them).  Only configurations inside
   the value lists that satisfy every constraint; fn is called for each in
   that fixed order (no configuration twice: every neighbour differs from
   center in a distinct set of moves), fn returning non-zero stops and
   returns that value.  AK_EINVAL when a center value is not one of its
   parameter's values, or a constraint fails to evaluate. */
int ak_space_neighbors (const ak_candidate_t *cand, const int64_t *center, ak_space_fn *fn, void *arg,
                        ak_err_t *err);

/* ----------------------------------------------------- for the parser */
/* Checks that text is an expression over names only (and at most 1024
   characters), without evaluating it: AK_EINVAL naming label and path. */
int ak_space_check_expr (const char *text, const char *const *names, int nnames,
                         const char *label, const char *path, ak_err_t *err);

/* The "params" and "constraints" members of the candidate object v (at
   path of label) into cand's params and constraints, and the space they
   make checked: bounded, every constraint evaluates at every configuration,
   at least one configuration satisfies them all. */
int ak_space_parse (json_t *v, const char *label, const char *path, ak_candidate_t *cand,
                    ak_err_t *err);

#endif
