/*  common/expr.c: integer expressions over named variables.

    A recursive-descent parser that evaluates as it parses.  Precedence from
    loosest to tightest: ||, &&, == !=, < <= > >=, + -, * / %, unary - !.
    && and || short-circuit: the side not taken is parsed and its names are
    checked but it is not evaluated, so "N != 0 && M / N > 2" is safe.
    Every arithmetic step is overflow-checked; text length and nesting depth
    are bounded so hostile input cannot exhaust the stack. */
#include "expr.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define AK_EXPR_MAX_LEN    4096
#define AK_EXPR_MAX_DEPTH  64

typedef struct {
    const char *text;
    size_t len;
    size_t pos;
    const ak_var_t *vars;           /* eval mode */
    int nvars;
    const char *const *names;       /* check mode */
    int nnames;
    bool check;                     /* names only, never evaluate */
    int depth;
    ak_err_t *err;
} s_parser_t;

static int s_parse_or (s_parser_t *p, bool live, int64_t *v);

/*  Every error message starts with the expression text (cut when long). */
__attribute__ ((format (printf, 3, 4)))
static int s_fail (s_parser_t *p, size_t at, const char *fmt, ...)
{
    if (!p->err)
        return AK_EINVAL;
    char what[512];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (what, sizeof what, fmt, ap);
    va_end (ap);
    int shown = p->len > 200 ? 200 : (int) p->len;
    return ak_err_set (p->err, AK_EINVAL, "expr '%.*s%s': %s at %zu",
                       shown, p->text, p->len > 200 ? "..." : "", what, at);
}

static void s_skip_ws (s_parser_t *p)
{
    while (p->pos < p->len && isspace ((unsigned char) p->text[p->pos]))
        p->pos++;
}

/* Consumes op (one or two characters) if it comes next, but never the prefix
   of a longer operator: '<' does not match "<=", '!' does not match "!=". */
static bool s_accept (s_parser_t *p, const char *op)
{
    s_skip_ws (p);
    size_t n = strlen (op);
    if (p->pos + n > p->len || memcmp (p->text + p->pos, op, n) != 0)
        return false;
    if (n == 1 && p->pos + 1 < p->len && p->text[p->pos + 1] == '=' &&
        (op[0] == '<' || op[0] == '>' || op[0] == '!' || op[0] == '='))
        return false;
    if (n == 1 && (op[0] == '&' || op[0] == '|' || op[0] == '='))
        return false;               /* single & | = are not operators */
    p->pos += n;
    return true;
}

static int s_describe_here (s_parser_t *p, const char *expected)
{
    s_skip_ws (p);
    if (p->pos >= p->len)
        return s_fail (p, p->pos, "unexpected end of expression, expected %s", expected);
    char c = p->text[p->pos];
    if (isprint ((unsigned char) c))
        return s_fail (p, p->pos, "unexpected '%c', expected %s", c, expected);
    return s_fail (p, p->pos, "unexpected byte 0x%02x, expected %s", (unsigned char) c, expected);
}

static int s_lookup (s_parser_t *p, size_t at, size_t n, int64_t *v)
{
    const char *name = p->text + at;
    if (p->check) {
        for (int i = 0; i < p->nnames; i++)
            if (p->names[i] && strlen (p->names[i]) == n && memcmp (p->names[i], name, n) == 0) {
                *v = 0;
                return 0;
            }
    }
    else {
        for (int i = 0; i < p->nvars; i++)
            if (p->vars[i].name && strlen (p->vars[i].name) == n &&
                memcmp (p->vars[i].name, name, n) == 0) {
                *v = p->vars[i].value;
                return 0;
            }
    }
    int shown = n > 64 ? 64 : (int) n;
    return s_fail (p, at, "unknown name '%.*s%s'", shown, name, n > 64 ? "..." : "");
}

static int s_parse_primary (s_parser_t *p, bool live, int64_t *v)
{
    s_skip_ws (p);
    if (p->pos >= p->len)
        return s_describe_here (p, "a number, a name or '('");
    size_t at = p->pos;
    unsigned char c = (unsigned char) p->text[at];
    if (isdigit (c)) {
        int64_t acc = 0;
        while (p->pos < p->len && isdigit ((unsigned char) p->text[p->pos])) {
            int d = p->text[p->pos] - '0';
            if (__builtin_mul_overflow (acc, 10, &acc) || __builtin_add_overflow (acc, d, &acc))
                return s_fail (p, at, "integer literal too large");
            p->pos++;
        }
        if (p->pos < p->len && (isalpha ((unsigned char) p->text[p->pos]) || p->text[p->pos] == '_'))
            return s_fail (p, p->pos, "bad character '%c' in number", p->text[p->pos]);
        *v = acc;
        return 0;
    }
    if (isalpha (c) || c == '_') {
        while (p->pos < p->len && (isalnum ((unsigned char) p->text[p->pos]) || p->text[p->pos] == '_'))
            p->pos++;
        return s_lookup (p, at, p->pos - at, v);
    }
    if (c == '(') {
        p->pos++;
        if (++p->depth > AK_EXPR_MAX_DEPTH)
            return s_fail (p, at, "nesting deeper than %d", AK_EXPR_MAX_DEPTH);
        int rc = s_parse_or (p, live, v);
        p->depth--;
        if (rc)
            return rc;
        s_skip_ws (p);
        if (p->pos >= p->len || p->text[p->pos] != ')')
            return s_describe_here (p, "')'");
        p->pos++;
        return 0;
    }
    return s_describe_here (p, "a number, a name or '('");
}

static int s_parse_unary (s_parser_t *p, bool live, int64_t *v)
{
    s_skip_ws (p);
    size_t at = p->pos;
    bool neg = s_accept (p, "-");
    bool not = !neg && s_accept (p, "!");
    if (!neg && !not)
        return s_parse_primary (p, live, v);
    if (++p->depth > AK_EXPR_MAX_DEPTH)
        return s_fail (p, at, "nesting deeper than %d", AK_EXPR_MAX_DEPTH);
    int64_t x = 0;
    int rc = s_parse_unary (p, live, &x);
    p->depth--;
    if (rc)
        return rc;
    if (!live) {
        *v = 0;
        return 0;
    }
    if (not) {
        *v = !x;
        return 0;
    }
    if (__builtin_sub_overflow ((int64_t) 0, x, v))
        return s_fail (p, at, "overflow in '-'");
    return 0;
}

static int s_parse_mul (s_parser_t *p, bool live, int64_t *v)
{
    int rc = s_parse_unary (p, live, v);
    while (!rc) {
        s_skip_ws (p);
        size_t at = p->pos;
        char op;
        if (s_accept (p, "*"))
            op = '*';
        else if (s_accept (p, "/"))
            op = '/';
        else if (s_accept (p, "%"))
            op = '%';
        else
            break;
        int64_t r = 0;
        rc = s_parse_unary (p, live, &r);
        if (rc || !live)
            continue;
        if (op == '*') {
            if (__builtin_mul_overflow (*v, r, v))
                rc = s_fail (p, at, "overflow in '*'");
        }
        else if (r == 0)
            rc = s_fail (p, at, op == '/' ? "division by zero" : "modulo by zero");
        else if (r == -1 && *v == INT64_MIN)
            rc = s_fail (p, at, "overflow in '%c'", op);
        else
            *v = op == '/' ? *v / r : *v % r;
    }
    return rc;
}

static int s_parse_add (s_parser_t *p, bool live, int64_t *v)
{
    int rc = s_parse_mul (p, live, v);
    while (!rc) {
        s_skip_ws (p);
        size_t at = p->pos;
        char op;
        if (s_accept (p, "+"))
            op = '+';
        else if (s_accept (p, "-"))
            op = '-';
        else
            break;
        int64_t r = 0;
        rc = s_parse_mul (p, live, &r);
        if (rc || !live)
            continue;
        bool over = op == '+' ? __builtin_add_overflow (*v, r, v)
                              : __builtin_sub_overflow (*v, r, v);
        if (over)
            rc = s_fail (p, at, "overflow in '%c'", op);
    }
    return rc;
}

static int s_parse_rel (s_parser_t *p, bool live, int64_t *v)
{
    int rc = s_parse_add (p, live, v);
    while (!rc) {
        int op;
        if (s_accept (p, "<="))
            op = 'l';
        else if (s_accept (p, ">="))
            op = 'g';
        else if (s_accept (p, "<"))
            op = '<';
        else if (s_accept (p, ">"))
            op = '>';
        else
            break;
        int64_t r = 0;
        rc = s_parse_add (p, live, &r);
        if (rc || !live)
            continue;
        switch (op) {
            case 'l': *v = *v <= r; break;
            case 'g': *v = *v >= r; break;
            case '<': *v = *v < r; break;
            default:  *v = *v > r; break;
        }
    }
    return rc;
}

static int s_parse_eq (s_parser_t *p, bool live, int64_t *v)
{
    int rc = s_parse_rel (p, live, v);
    while (!rc) {
        bool eq;
        if (s_accept (p, "=="))
            eq = true;
        else if (s_accept (p, "!="))
            eq = false;
        else
            break;
        int64_t r = 0;
        rc = s_parse_rel (p, live, &r);
        if (!rc && live)
            *v = eq ? *v == r : *v != r;
    }
    return rc;
}

static int s_parse_and (s_parser_t *p, bool live, int64_t *v)
{
    int rc = s_parse_eq (p, live, v);
    while (!rc && s_accept (p, "&&")) {
        bool take = live && *v != 0;
        int64_t r = 0;
        rc = s_parse_eq (p, take, &r);
        if (!rc && live)
            *v = take && r != 0;
    }
    return rc;
}

static int s_parse_or (s_parser_t *p, bool live, int64_t *v)
{
    int rc = s_parse_and (p, live, v);
    while (!rc && s_accept (p, "||")) {
        bool take = live && *v == 0;
        int64_t r = 0;
        rc = s_parse_and (p, take, &r);
        if (!rc && live)
            *v = !take || r != 0;
    }
    return rc;
}

/*  Parses the whole text; anything left after a complete expression is a
    syntax error. */
static int s_run (s_parser_t *p, int64_t *out)
{
    if (!p->text)
        return ak_err_set (p->err, AK_EINVAL, "expr: no text");
    p->len = strnlen (p->text, AK_EXPR_MAX_LEN + 1);
    if (p->len > AK_EXPR_MAX_LEN)
        return ak_err_set (p->err, AK_EINVAL, "expr '%.64s...': longer than %d characters",
                           p->text, AK_EXPR_MAX_LEN);
    s_skip_ws (p);
    if (p->pos >= p->len)
        return ak_err_set (p->err, AK_EINVAL, "expr '%s': empty expression", p->text);
    int64_t v = 0;
    int rc = s_parse_or (p, !p->check, &v);
    if (rc)
        return rc;
    s_skip_ws (p);
    if (p->pos < p->len)
        return s_describe_here (p, "an operator or the end");
    if (out)
        *out = v;
    return 0;
}

int ak_expr_eval (const char *text, const ak_var_t *vars, int nvars, int64_t *out, ak_err_t *err)
{
    s_parser_t p = { .text = text, .vars = vars, .nvars = vars ? nvars : 0, .err = err };
    return s_run (&p, out);
}

int ak_expr_check (const char *text, const char *const *names, int nnames, ak_err_t *err)
{
    s_parser_t p = { .text = text, .names = names, .nnames = names ? nnames : 0,
                     .check = true, .err = err };
    return s_run (&p, NULL);
}
