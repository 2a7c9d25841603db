/*  tests/unit/test_expr.c: integer expressions. */
#include "support.h"
#include "expr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ak_var_t s_vars[] = {
    { "M", 1024 }, { "N", 512 }, { "K", 64 }, { "BLOCK", 128 }, { "UNROLL", 4 },
    { "ZERO", 0 }, { "NEG", -7 }, { "BIG", INT64_MAX }, { "SMALL", INT64_MIN },
    { "rows_2", 3 },
};
#define NVARS ((int) (sizeof s_vars / sizeof s_vars[0]))

static int64_t s_eval_ok (const char *text)
{
    int64_t v = -12345;
    ak_err_t err = { 0 };
    int rc = ak_expr_eval (text, s_vars, NVARS, &v, &err);
    if (rc)
        fail_msg ("'%s' failed: %s", text, err.msg);
    return v;
}

static void s_eval_bad (const char *text, const char *needle)
{
    int64_t v = -12345;
    ak_err_t err = { 0 };
    int rc = ak_expr_eval (text, s_vars, NVARS, &v, &err);
    if (rc != AK_EINVAL)
        fail_msg ("'%s' gave %d (value %lld), expected AK_EINVAL", text, rc, (long long) v);
    if (needle && !strstr (err.msg, needle))
        fail_msg ("'%s': message '%s' lacks '%s'", text, err.msg, needle);
    assert_int_equal (v, -12345);
}

static void test_arithmetic (void **state)
{
    (void) state;
    assert_int_equal (s_eval_ok ("42"), 42);
    assert_int_equal (s_eval_ok ("  42  "), 42);
    assert_int_equal (s_eval_ok ("M*N"), 1024 * 512);
    assert_int_equal (s_eval_ok ("2*M*N*K"), 2LL * 1024 * 512 * 64);
    assert_int_equal (s_eval_ok ("M + N - K"), 1024 + 512 - 64);
    assert_int_equal (s_eval_ok ("7 / 2"), 3);
    assert_int_equal (s_eval_ok ("-7 / 2"), -3);
    assert_int_equal (s_eval_ok ("7 % 3"), 1);
    assert_int_equal (s_eval_ok ("-7 % 3"), -1);
    assert_int_equal (s_eval_ok ("NEG * -1"), 7);
    assert_int_equal (s_eval_ok ("--3"), 3);
    assert_int_equal (s_eval_ok ("- - -3"), -3);
    assert_int_equal (s_eval_ok ("rows_2*rows_2"), 9);
    assert_int_equal (s_eval_ok ("(M*N+N)*2"), (1024 * 512 + 512) * 2);
    assert_int_equal (s_eval_ok ("9223372036854775807"), INT64_MAX);
    assert_true (s_eval_ok ("-9223372036854775807 - 1") == INT64_MIN);
    assert_true (s_eval_ok ("BIG") == INT64_MAX);
    assert_true (s_eval_ok ("SMALL") == INT64_MIN);
    assert_int_equal (s_eval_ok ("SMALL / 2"), INT64_MIN / 2);
}

static void test_precedence (void **state)
{
    (void) state;
    assert_int_equal (s_eval_ok ("2+3*4"), 14);
    assert_int_equal (s_eval_ok ("(2+3)*4"), 20);
    assert_int_equal (s_eval_ok ("10-4-3"), 3);          /* left associative */
    assert_int_equal (s_eval_ok ("100/10/5"), 2);
    assert_int_equal (s_eval_ok ("2*3%4"), 2);
    assert_int_equal (s_eval_ok ("-2*3"), -6);
    assert_int_equal (s_eval_ok ("1+2 < 4"), 1);
    assert_int_equal (s_eval_ok ("1 < 2 == 1"), 1);      /* relational binds tighter */
    assert_int_equal (s_eval_ok ("1 || 0 && 0"), 1);     /* && binds tighter */
    assert_int_equal (s_eval_ok ("(1 || 0) && 0"), 0);
    assert_int_equal (s_eval_ok ("!0 + 1"), 2);
    assert_int_equal (s_eval_ok ("!(2 > 1)"), 0);
    assert_int_equal (s_eval_ok ("((((((1))))))"), 1);
}

static void test_comparisons_logic (void **state)
{
    (void) state;
    assert_int_equal (s_eval_ok ("BLOCK*UNROLL <= 512"), 1);
    assert_int_equal (s_eval_ok ("BLOCK*UNROLL < 512"), 0);
    assert_int_equal (s_eval_ok ("M >= N"), 1);
    assert_int_equal (s_eval_ok ("M > M"), 0);
    assert_int_equal (s_eval_ok ("M == 1024"), 1);
    assert_int_equal (s_eval_ok ("M != 1024"), 0);
    assert_int_equal (s_eval_ok ("BLOCK*UNROLL <= 512 && N % BLOCK == 0"), 1);
    assert_int_equal (s_eval_ok ("N % 3 == 0 || K == 64"), 1);
    assert_int_equal (s_eval_ok ("0 && 1"), 0);
    assert_int_equal (s_eval_ok ("5 && 7"), 1);
    assert_int_equal (s_eval_ok ("0 || 0"), 0);
    assert_int_equal (s_eval_ok ("!!42"), 1);
    /* Short circuit: the side not taken is not evaluated. */
    assert_int_equal (s_eval_ok ("ZERO != 0 && M / ZERO > 2"), 0);
    assert_int_equal (s_eval_ok ("ZERO == 0 || M / ZERO > 2"), 1);
    assert_int_equal (s_eval_ok ("0 && BIG * BIG"), 0);
    /* ... but it is still parsed and its names checked. */
    s_eval_bad ("0 && Q", "unknown name 'Q'");
    s_eval_bad ("1 || (", "expected");
}

static void test_overflow (void **state)
{
    (void) state;
    s_eval_bad ("BIG + 1", "overflow in '+'");
    s_eval_bad ("SMALL - 1", "overflow in '-'");
    s_eval_bad ("BIG * 2", "overflow in '*'");
    s_eval_bad ("-SMALL", "overflow in '-'");
    s_eval_bad ("SMALL / -1", "overflow in '/'");
    s_eval_bad ("SMALL % -1", "overflow in '%'");
    s_eval_bad ("9223372036854775808", "integer literal too large");
    s_eval_bad ("M*M*M*M*M*M*M", "overflow");
    s_eval_bad ("M / ZERO", "division by zero");
    s_eval_bad ("M % 0", "modulo by zero");
    s_eval_bad ("1 / (K - 64)", "division by zero at 2");
}

static void test_errors (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    int64_t v;
    assert_int_equal (ak_expr_eval ("BLOCK*Q", s_vars, NVARS, &v, &err), AK_EINVAL);
    assert_string_equal (err.msg, "expr 'BLOCK*Q': unknown name 'Q' at 6");
    s_eval_bad ("", "empty");
    s_eval_bad ("   ", "empty");
    s_eval_bad ("1 +", "unexpected end");
    s_eval_bad ("(1 + 2", "expected ')'");
    s_eval_bad ("1 + 2)", "unexpected ')'");
    s_eval_bad ("1 2", "unexpected '2'");
    s_eval_bad ("M N", "unexpected 'N'");
    s_eval_bad ("1 = 1", "unexpected '='");
    s_eval_bad ("1 & 1", "unexpected '&'");
    s_eval_bad ("1 | 1", "unexpected '|'");
    s_eval_bad ("1 + # 2", "unexpected '#'");
    s_eval_bad ("12abc", "bad character 'a'");
    s_eval_bad ("1 +\x01", "unexpected byte 0x01");
    s_eval_bad ("*", "unexpected '*'");
    s_eval_bad ("m", "unknown name 'm'");        /* names are case-sensitive */
    s_eval_bad ("MM", "unknown name 'MM'");
    assert_int_equal (ak_expr_eval (NULL, s_vars, NVARS, &v, &err), AK_EINVAL);
    assert_int_equal (ak_expr_eval ("1", NULL, 0, &v, NULL), 0);
    assert_int_equal (v, 1);
    assert_int_equal (ak_expr_eval ("x", NULL, 0, &v, NULL), AK_EINVAL);

    /* Length and depth bounds. */
    char *deep = malloc (1000);
    memset (deep, '(', 100);
    strcpy (deep + 100, "1");
    memset (deep + 101, ')', 100);
    deep[201] = '\0';
    s_eval_bad (deep, "nesting deeper than 64");
    memset (deep, '-', 200);
    strcpy (deep + 200, "1");
    s_eval_bad (deep, "nesting deeper than 64");
    memset (deep, '(', 64);
    strcpy (deep + 64, "1");
    memset (deep + 65, ')', 64);
    deep[129] = '\0';
    assert_int_equal (s_eval_ok (deep), 1);
    free (deep);

    char *longtext = malloc (5000);
    for (int i = 0; i < 4999; i += 2) {
        longtext[i] = '1';
        longtext[i + 1] = '+';
    }
    longtext[4999] = '\0';
    longtext[4998] = '1';
    s_eval_bad (longtext, "longer than 4096");
    longtext[4095] = '\0';      /* "1+1+...+1" ends on '1' at an even index */
    longtext[4094] = '1';
    assert_int_equal (s_eval_ok (longtext), 2048);
    free (longtext);
}

static void test_check (void **state)
{
    (void) state;
    const char *names[] = { "M", "N", "BLOCK" };
    ak_err_t err = { 0 };
    assert_int_equal (ak_expr_check ("M*N / BLOCK", names, 3, &err), 0);
    /* No evaluation: division by zero is not an error in check mode. */
    assert_int_equal (ak_expr_check ("M / 0 + BLOCK", names, 3, &err), 0);
    assert_int_equal (ak_expr_check ("M * K", names, 3, &err), AK_EINVAL);
    assert_string_equal (err.msg, "expr 'M * K': unknown name 'K' at 4");
    assert_int_equal (ak_expr_check ("M *", names, 3, &err), AK_EINVAL);
    assert_int_equal (ak_expr_check ("", names, 3, &err), AK_EINVAL);
    assert_int_equal (ak_expr_check ("1+2", NULL, 0, &err), 0);
}

/* Random byte strings over the expression alphabet never crash. */
static void test_fuzz (void **state)
{
    (void) state;
    const char alphabet[] = "0123456789MNK()+-*/%<>=!&| _x\t";
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char buf[64];
    int ok = 0;
    for (int iter = 0; iter < 20000; iter++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int len = (int) (x % 40);
        for (int i = 0; i < len; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            buf[i] = alphabet[x % (sizeof alphabet - 1)];
        }
        buf[len] = '\0';
        int64_t v;
        ak_err_t err;
        int rc = ak_expr_eval (buf, s_vars, NVARS, &v, &err);
        assert_true (rc == 0 || rc == AK_EINVAL);
        ok += rc == 0;
    }
    assert_true (ok > 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_arithmetic),
        cmocka_unit_test (test_precedence),
        cmocka_unit_test (test_comparisons_logic),
        cmocka_unit_test (test_overflow),
        cmocka_unit_test (test_errors),
        cmocka_unit_test (test_check),
        cmocka_unit_test (test_fuzz),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
