/*  common/expr.h: integer expressions over named variables.

    Used for buffer sizes ("rows*cols"), FLOP and byte counts ("2*M*N*K"),
    parameter constraints ("BLOCK*UNROLL <= 64 && N % BLOCK == 0") and, later,
    launch rules.  Grammar: integers, identifiers, ( ), unary - !, * / %,
    + -, < <= > >= == !=, && ||.  64-bit signed arithmetic; overflow, division
    by zero, unknown names and syntax errors are errors, never UB. */
#ifndef AK_EXPR_H
#define AK_EXPR_H
#include <stdint.h>
#include "error.h"

typedef struct {
    const char *name;
    int64_t value;
} ak_var_t;

/* Evaluates text with the nvars variables; 0 and *out, or AK_EINVAL with err
   saying what and where ("unknown name 'Q' at 4"). */
int ak_expr_eval (const char *text, const ak_var_t *vars, int nvars, int64_t *out, ak_err_t *err);

/* Checks syntax and that every identifier is one of names[]; no evaluation. */
int ak_expr_check (const char *text, const char *const *names, int nnames, ak_err_t *err);

#endif
