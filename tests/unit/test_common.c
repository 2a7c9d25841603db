/*  tests/unit/test_common.c: error, log, clock, digest, util, rng, stats. */
#include "support.h"
#include "auth.h"
#include "cli.h"
#include <czmq.h>
#include "clock.h"
#include "digest.h"
#include "endpoint.h"
#include "error.h"
#include "log.h"
#include "rng.h"
#include "stats.h"
#include "util.h"

#include <fcntl.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- error */

static void test_error (void **state)
{
    (void) state;
    assert_string_equal (ak_strerror (AK_OK), "success");
    assert_string_equal (ak_strerror (AK_ESTOREFULL), "store map full");
    assert_non_null (ak_strerror (12345));
    assert_non_null (ak_strerror (AK_EINTERNAL));

    ak_err_t err = { 0 };
    assert_int_equal (ak_err_set (&err, AK_EINVAL, "field %s: %d", "atol", 3), AK_EINVAL);
    assert_int_equal (err.code, AK_EINVAL);
    assert_string_equal (err.msg, "field atol: 3");
    assert_int_equal (ak_err_prefix (&err, "batch.json"), AK_EINVAL);
    assert_string_equal (err.msg, "batch.json: field atol: 3");
    assert_int_equal (ak_err_set (NULL, AK_EIO, "x"), AK_EIO);

    /* Prefixing a full message truncates rather than overflows. */
    char big[2000];
    memset (big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ak_err_set (&err, AK_EIO, "%s", big);
    ak_err_prefix (&err, "%s", big);
    assert_int_equal (strlen (err.msg), sizeof err.msg - 1);
    assert_int_equal (err.code, AK_EIO);
}

/* ------------------------------------------------------------------ log */

static void test_log (void **state)
{
    (void) state;
    assert_int_equal (ak_log_parse_level ("debug"), AK_LOG_DEBUG);
    assert_int_equal (ak_log_parse_level ("INFO"), AK_LOG_INFO);
    assert_int_equal (ak_log_parse_level ("warn"), AK_LOG_WARN);
    assert_int_equal (ak_log_parse_level ("error"), AK_LOG_ERROR);
    assert_int_equal (ak_log_parse_level ("quiet"), AK_LOG_QUIET);
    assert_int_equal (ak_log_parse_level ("loud"), -1);
    assert_int_equal (ak_log_parse_level (NULL), -1);

    /* Capture stderr in a file and check the line format. */
    char *dir = ak_test_tmpdir ("log");
    assert_non_null (dir);
    char *path = ak_path_join (dir, "log.txt");
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true (fd >= 0);
    int saved = dup (STDERR_FILENO);
    assert_true (saved >= 0);
    assert_true (dup2 (fd, STDERR_FILENO) >= 0);
    close (fd);

    ak_log_set_ident ("akunit");
    ak_log_set_level (AK_LOG_INFO);
    assert_int_equal (ak_log_level (), AK_LOG_INFO);
    ak_debug ("hidden %d", 1);
    ak_info ("task %s leased to %s\n", "B1.7", "w1");
    ak_error ("boom");
    char huge[10000];
    memset (huge, 'y', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    ak_warn ("%s", huge);
    /* the simple conversions are formatted without vsnprintf (log.c):
       each must read as vsnprintf writes it; others go to vsnprintf */
    ak_info ("conv %d %u %ld %lu %lld %llu %zu %% %s|%.3s|%.0s|%.9s|", -42, 42u, -7L, 7UL, LLONG_MIN,
             ULLONG_MAX, (size_t) 99, "end", "abcdef", "gone", "ab");
    ak_info ("wide %05d %.3d %x", 7, 5, 255u);
    ak_log_set_level (AK_LOG_QUIET);
    ak_error ("not shown");
    ak_log_set_level (AK_LOG_INFO);
    /* the head of a line is cached per thread: a forked child still
       writes its own pid */
    fflush (NULL);
    pid_t child = fork ();
    assert_true (child >= 0);
    if (child == 0) {
        ak_info ("from the child");
        _exit (0);
    }
    int status = 0;
    assert_int_equal (waitpid (child, &status, 0), child);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);

    assert_true (dup2 (saved, STDERR_FILENO) >= 0);
    close (saved);

    char *text = NULL;
    size_t len = 0;
    ak_err_t err;
    assert_int_equal (ak_file_read (path, 1 << 20, &text, &len, &err), 0);
    /* Exactly four lines, each ending in one newline. */
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    assert_int_equal (lines, 6);
    char conv[256];
    snprintf (conv, sizeof conv, "INFO conv %d %u %ld %lu %lld %llu %zu %% %s|%.3s|%.0s|%.9s|\n", -42, 42u,
              -7L, 7UL, LLONG_MIN, ULLONG_MAX, (size_t) 99, "end", "abcdef", "gone", "ab");
    assert_non_null (strstr (text, conv));
    assert_non_null (strstr (text, "INFO wide 00007 005 ff\n"));
    char childtag[64];
    snprintf (childtag, sizeof childtag, " akunit[%ld] INFO from the child\n", (long) child);
    assert_non_null (strstr (text, childtag));
    assert_null (strstr (text, "hidden"));
    assert_null (strstr (text, "not shown"));
    char pidtag[64];
    snprintf (pidtag, sizeof pidtag, " akunit[%ld] INFO task B1.7 leased to w1\n", (long) getpid ());
    char *hit = strstr (text, pidtag);
    assert_non_null (hit);
    /* 2026-11-29T18:31:13.123Z */
    assert_int_equal (hit - text, 24);
    assert_true (text[4] == '-' && text[10] == 'T' && text[19] == '.' && text[23] == 'Z');
    assert_non_null (strstr (text, "ERROR boom\n"));
    assert_non_null (strstr (text, "...\n"));
    free (text);
    free (path);
    ak_test_rmtree (dir);
    free (dir);
}

/* ak_log_hold: info lines wait for a flush, a warning, or the end of
   holding, and come out whole and in order. */
static void test_log_hold (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("loghold");
    assert_non_null (dir);
    char *path = ak_path_join (dir, "log.txt");
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true (fd >= 0);
    int saved = dup (STDERR_FILENO);
    assert_true (saved >= 0);
    assert_true (dup2 (fd, STDERR_FILENO) >= 0);
    close (fd);
    ak_log_set_level (AK_LOG_INFO);
    struct stat st;

    ak_log_hold (true);
    ak_info ("held %d", 1);
    ak_info ("held %d", 2);
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_size, 0);                   /* nothing written yet */
    ak_warn ("warned");                                 /* writes the held lines first */
    assert_int_equal (stat (path, &st), 0);
    off_t after_warn = st.st_size;
    assert_true (after_warn > 0);
    ak_info ("held %d", 3);
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_size, after_warn);
    ak_log_flush ();
    assert_int_equal (stat (path, &st), 0);
    assert_true (st.st_size > after_warn);
    /* more than the buffer holds: written as it fills, nothing lost */
    for (int i = 0; i < 2000; i++)
        ak_info ("bulk line %04d with some text to fill the buffer", i);
    ak_info ("last held");
    ak_log_hold (false);                                /* flushes */
    ak_info ("not held");

    assert_true (dup2 (saved, STDERR_FILENO) >= 0);
    close (saved);
    char *text = NULL;
    size_t len = 0;
    ak_err_t err;
    assert_int_equal (ak_file_read (path, 1 << 20, &text, &len, &err), 0);
    char *h1 = strstr (text, "INFO held 1\n"), *h2 = strstr (text, "INFO held 2\n");
    char *w = strstr (text, "WARN warned\n"), *h3 = strstr (text, "INFO held 3\n");
    char *last = strstr (text, "INFO last held\n"), *nh = strstr (text, "INFO not held\n");
    assert_true (h1 && h2 && w && h3 && last && nh);
    assert_true (h1 < h2 && h2 < w && w < h3 && h3 < last && last < nh);
    int bulk = 0, lines = 0;
    for (const char *p = text; (p = strstr (p, "INFO bulk line ")); p++)
        bulk++;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    assert_int_equal (bulk, 2000);
    assert_int_equal (lines, 2000 + 6);
    free (text);
    free (path);
    ak_test_rmtree (dir);
    free (dir);
}

/* ---------------------------------------------------------------- clock */

static void test_clock (void **state)
{
    (void) state;
    uint64_t a = ak_clock_mono_ns ();
    uint64_t b = ak_clock_mono_ns ();
    assert_true (b >= a);
    assert_true (ak_clock_mono_ms () >= a / 1000000);
    assert_true (ak_clock_wall_ms () > 1600000000000ull);
    char buf[32];
    assert_string_equal (ak_clock_iso (0, buf, sizeof buf), "1970-01-01T00:00:00Z");
    assert_string_equal (ak_clock_iso (1796063473123ull, buf, sizeof buf), "2026-11-30T18:31:13Z");
    char tiny[4];
    assert_string_equal (ak_clock_iso (0, tiny, sizeof tiny), "");
}

/* --------------------------------------------------------------- digest */

static void test_digest (void **state)
{
    (void) state;
    char hex[AK_DIGEST_HEX_LEN + 1];
    assert_int_equal (ak_sha256_hex ("abc", 3, hex), 0);
    assert_string_equal (hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal (ak_sha256_hex ("", 0, hex), 0);
    assert_string_equal (hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

    ak_sha256_t ctx;
    ak_sha256_init (&ctx);
    ak_sha256_update (&ctx, "a", 1);
    ak_sha256_update (&ctx, "", 0);
    ak_sha256_update (&ctx, "bc", 2);
    char hex2[AK_DIGEST_HEX_LEN + 1];
    ak_sha256_final_hex (&ctx, hex2);
    assert_string_equal (hex2, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

    assert_true (ak_digest_valid (hex));
    assert_false (ak_digest_valid (NULL));
    assert_false (ak_digest_valid (""));
    assert_false (ak_digest_valid ("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
    assert_false (ak_digest_valid ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a"));
    assert_false (ak_digest_valid ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad0"));
    assert_false (ak_digest_valid ("ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
}

/* ----------------------------------------------------------------- util */

static void test_util_files (void **state)
{
    (void) state;
    ak_err_t err;
    char *dir = ak_test_tmpdir ("util");
    assert_non_null (dir);

    char *sub = ak_path_join (dir, "a/b/c");
    assert_int_equal (ak_mkdir_p (sub, 0700, &err), 0);
    assert_int_equal (ak_mkdir_p (sub, 0700, &err), 0);
    struct stat st;
    assert_int_equal (stat (sub, &st), 0);
    assert_true (S_ISDIR (st.st_mode));

    char *path = ak_path_join (sub, "f.txt");
    assert_int_equal (ak_file_write_atomic (path, "hello", 5, &err), 0);
    assert_int_equal (ak_file_write_atomic (path, "hello world", 11, &err), 0);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal (ak_file_read (path, 100, &data, &len, &err), 0);
    assert_int_equal (len, 11);
    assert_string_equal (data, "hello world");
    free (data);

    /* Read limits: exactly at the limit is fine, one over is AK_ETOOBIG. */
    assert_int_equal (ak_file_read (path, 11, &data, &len, &err), 0);
    free (data);
    assert_int_equal (ak_file_read (path, SIZE_MAX, &data, &len, &err), 0);
    assert_string_equal (data, "hello world");
    free (data);
    assert_int_equal (ak_file_read (path, 10, &data, &len, &err), AK_ETOOBIG);
    assert_null (data);
    assert_non_null (strstr (err.msg, path));
    assert_int_equal (ak_file_read (path, 0, &data, &len, &err), AK_ETOOBIG);

    /* Empty file. */
    assert_int_equal (ak_file_write_atomic (path, NULL, 0, &err), 0);
    assert_int_equal (ak_file_read (path, 0, &data, &len, &err), 0);
    assert_int_equal (len, 0);
    assert_string_equal (data, "");
    free (data);

    char *missing = ak_path_join (dir, "missing");
    assert_int_equal (ak_file_read (missing, 100, &data, &len, &err), AK_ENOTFOUND);
    assert_non_null (strstr (err.msg, "missing"));
    assert_int_equal (ak_file_read (dir, 100, &data, &len, &err), AK_EIO);

    /* Writing under a missing directory fails and leaves no temp file. */
    char *bad = ak_path_join (missing, "x");
    assert_int_equal (ak_file_write_atomic (bad, "x", 1, &err), AK_EIO);

    /* No temp files left behind next to the target. */
    char *cmd = ak_sprintf ("ls -A '%s' | wc -l", sub);
    char *out = NULL;
    assert_int_equal (ak_test_run (cmd, &out), 0);
    assert_int_equal (atoi (out), 1);
    free (out);
    free (cmd);

    /* A non-regular file is read up to the limit. */
    assert_int_equal (ak_file_read ("/dev/zero", 1000, &data, &len, &err), AK_ETOOBIG);
    assert_int_equal (ak_file_read ("/dev/null", 1000, &data, &len, &err), 0);
    assert_int_equal (len, 0);
    free (data);

    /* mkdir_p refuses a path through a file. */
    char *through = ak_path_join (path, "sub");
    assert_int_equal (ak_mkdir_p (through, 0700, &err), AK_EIO);

    free (through);
    free (bad);
    free (missing);
    free (path);
    free (sub);
    ak_test_rmtree (dir);
    free (dir);
}

static void test_util_strings (void **state)
{
    (void) state;
    char *s;
    s = ak_dirname ("a/b/c"); assert_string_equal (s, "a/b"); free (s);
    s = ak_dirname ("c"); assert_string_equal (s, "."); free (s);
    s = ak_dirname ("/c"); assert_string_equal (s, "/"); free (s);
    s = ak_dirname ("/a//c/"); assert_string_equal (s, "/a"); free (s);
    s = ak_dirname (""); assert_string_equal (s, "."); free (s);
    s = ak_dirname ("/"); assert_string_equal (s, "/"); free (s);
    s = ak_path_join ("a", "b"); assert_string_equal (s, "a/b"); free (s);
    s = ak_path_join ("a/", "b"); assert_string_equal (s, "a/b"); free (s);
    s = ak_path_join ("a", "/b"); assert_string_equal (s, "/b"); free (s);
    s = ak_sprintf ("%s-%d", "x", 42); assert_string_equal (s, "x-42"); free (s);
    assert_null (ak_strdup (NULL));
    s = ak_strdup ("dup"); assert_string_equal (s, "dup"); free (s);
    void *p = ak_calloc (4, 4);
    assert_int_equal (((char *) p)[15], 0);
    p = ak_realloc (p, 100);
    free (p);

    int64_t i;
    assert_int_equal (ak_parse_i64 ("42", &i), 0); assert_int_equal (i, 42);
    assert_int_equal (ak_parse_i64 ("-9223372036854775808", &i), 0);
    assert_true (i == INT64_MIN);
    assert_int_equal (ak_parse_i64 ("9223372036854775808", &i), AK_EINVAL);
    assert_int_equal (ak_parse_i64 ("", &i), AK_EINVAL);
    assert_int_equal (ak_parse_i64 (" 1", &i), AK_EINVAL);
    assert_int_equal (ak_parse_i64 ("1 ", &i), AK_EINVAL);
    assert_int_equal (ak_parse_i64 ("1x", &i), AK_EINVAL);
    assert_int_equal (ak_parse_i64 ("-", &i), AK_EINVAL);
    assert_int_equal (ak_parse_i64 (NULL, &i), AK_EINVAL);

    double d;
    assert_int_equal (ak_parse_double ("1.5e3", &d), 0); assert_true (d == 1500.0);
    assert_int_equal (ak_parse_double ("-.25", &d), 0); assert_true (d == -0.25);
    assert_int_equal (ak_parse_double ("nan", &d), AK_EINVAL);
    assert_int_equal (ak_parse_double ("inf", &d), AK_EINVAL);
    assert_int_equal (ak_parse_double ("1e999", &d), AK_EINVAL);
    assert_int_equal (ak_parse_double ("1.0x", &d), AK_EINVAL);
    assert_int_equal (ak_parse_double (" 1", &d), AK_EINVAL);
    assert_int_equal (ak_parse_double ("", &d), AK_EINVAL);
}

/* ------------------------------------------------------------------ rng */

static void test_rng_kat (void **state)
{
    (void) state;
    uint32_t out[4];
    /* Random123 kat_vectors: philox4x32 10, counter 0, key 0. */
    ak_philox4x32 (0, 0, 0, out);
    assert_int_equal (out[0], 0x6627e8d5);
    assert_int_equal (out[1], 0xe169c58d);
    assert_int_equal (out[2], 0xbc57ac4c);
    assert_int_equal (out[3], 0x9b00dbd8);
    /* Counter all ones, key all ones. */
    ak_philox4x32 (UINT64_MAX, UINT64_MAX, UINT64_MAX, out);
    assert_int_equal (out[0], 0x408f276d);
    assert_int_equal (out[1], 0x41c83b0e);
    assert_int_equal (out[2], 0xa20bc7c6);
    assert_int_equal (out[3], 0x6d5451fd);
    /* Random123: counter 243f6a88 85a308d3 13198a2e 03707344, key a4093822 299f31d0. */
    ak_philox4x32 (0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull, out);
    assert_int_equal (out[0], 0xd16cfe09);
    assert_int_equal (out[1], 0x94fdcceb);
    assert_int_equal (out[2], 0x5001e420);
    assert_int_equal (out[3], 0x24126ea1);
}

static void test_rng_uniform (void **state)
{
    (void) state;
    /* Pure function of (seed, stream, i). */
    assert_true (ak_rng_uniform (42, 3, 7) == ak_rng_uniform (42, 3, 7));
    assert_true (ak_rng_uniform (42, 3, 7) != ak_rng_uniform (42, 3, 8));
    assert_true (ak_rng_uniform (42, 3, 7) != ak_rng_uniform (42, 4, 7));
    assert_true (ak_rng_uniform (42, 3, 7) != ak_rng_uniform (43, 3, 7));

    /* The layout a device port must reproduce. */
    uint32_t out[4];
    ak_philox4x32 (42, 3, 7, out);
    uint64_t u = (uint64_t) out[0] | ((uint64_t) out[1] << 32);
    assert_true (ak_rng_uniform (42, 3, 7) == (double) (u >> 11) * 0x1.0p-53);

    double sum = 0, lo = 1, hi = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double x = ak_rng_uniform (1, 0, (uint64_t) i);
        assert_true (x >= 0.0 && x < 1.0);
        sum += x;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        double r = ak_rng_range (1, 1, (uint64_t) i, -2.0, 3.0);
        assert_true (r >= -2.0 && r < 3.0);
    }
    assert_true (fabs (sum / n - 0.5) < 0.01);
    assert_true (lo < 0.001 && hi > 0.999);
    assert_true (ak_rng_range (5, 5, 5, 1.0, 1.0) == 1.0);
}

/* ---------------------------------------------------------------- stats */

static void test_stats (void **state)
{
    (void) state;
    ak_stats_t s;
    ak_stats_compute (NULL, 0, &s);
    assert_int_equal (s.n, 0);
    assert_true (s.mean == 0 && s.median == 0 && s.stddev == 0);
    assert_true (ak_stats_rsd (&s) == 0);

    const double one[] = { 7.0 };
    ak_stats_compute (one, 1, &s);
    assert_true (s.n == 1 && s.median == 7 && s.min == 7 && s.p10 == 7 && s.p90 == 7);
    assert_true (s.stddev == 0);

    /* Unsorted input, not modified. */
    double x[] = { 5, 1, 4, 2, 3, 10, 9, 8, 7, 6 };
    double copy[10];
    memcpy (copy, x, sizeof x);
    ak_stats_compute (x, 10, &s);
    assert_memory_equal (x, copy, sizeof x);
    assert_int_equal (s.n, 10);
    assert_true (s.min == 1);
    assert_true (s.mean == 5.5);
    assert_true (s.median == 5.5);
    /* numpy: percentile([1..10], 10) = 1.9, 90 -> 9.1; std(ddof=1) = 3.0276503540974917 */
    assert_true (fabs (s.p10 - 1.9) < 1e-12);
    assert_true (fabs (s.p90 - 9.1) < 1e-12);
    assert_true (fabs (s.stddev - 3.0276503540974917) < 1e-12);
    assert_true (fabs (ak_stats_rsd (&s) - 3.0276503540974917 / 5.5) < 1e-12);

    const double odd[] = { 3, 1, 2 };
    ak_stats_compute (odd, 3, &s);
    assert_true (s.median == 2 && s.mean == 2 && s.stddev == 1);
    assert_true (fabs (s.p10 - 1.2) < 1e-12 && fabs (s.p90 - 2.8) < 1e-12);
}

/* Endpoints that cannot work are refused with the problem named. */
static void test_endpoint_check (void **state)
{
    (void) state;
    ak_err_t err = { 0 };
    assert_int_equal (ak_endpoint_check ("tcp://127.0.0.1:5555", false, &err), 0);
    assert_int_equal (ak_endpoint_check ("tcp://localhost:1", false, &err), 0);
    assert_int_equal (ak_endpoint_check ("tcp://[::1]:65535", false, &err), 0);
    assert_int_equal (ak_endpoint_check ("tcp://0.0.0.0:5555", true, &err), 0);
    assert_int_equal (ak_endpoint_check ("tcp://*:5555", true, &err), 0);
    assert_int_equal (ak_endpoint_check ("tcp://eth0:5555", true, &err), 0);   /* ZeroMQ's to judge */
    assert_int_equal (ak_endpoint_check ("ipc:///tmp/x", true, &err), 0);
    const struct { const char *ep; bool bind; const char *says; } bad[] = {
        { "tcp://127.0.0.1:99999", false, "port '99999' is not a number in 1..65535" },
        { "tcp://127.0.0.1:0", true, "1..65535" },
        { "tcp://127.0.0.1:", false, "port ''" },
        { "tcp://127.0.0.1:55x", false, "port '55x'" },
        { "tcp://127.0.0.1", false, "expected tcp://HOST:PORT" },
        { "tcp://:5555", false, "expected tcp://HOST:PORT" },
        { "tcp://[]:5555", false, "no host" },
        { "tcp://no-such-host.invalid:5555", false, "does not resolve" },
        { "ipc://", true, "no path" },
        { "udp://127.0.0.1:5555", false, "is not a tcp:// or ipc:// endpoint" },
        { "", false, "empty endpoint" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset (&err, 0, sizeof err);
        assert_int_equal (ak_endpoint_check (bad[i].ep, bad[i].bind, &err), AK_EINVAL);
        if (!strstr (err.msg, bad[i].says))
            fail_msg ("%s: expected \"%s\" in \"%s\"", bad[i].ep, bad[i].says, err.msg);
    }
    char longpath[200];
    memset (longpath, 'a', sizeof longpath);
    memcpy (longpath, "ipc:///", 7);
    longpath[sizeof longpath - 1] = '\0';
    assert_int_equal (ak_endpoint_check (longpath, true, &err), AK_EINVAL);
    assert_non_null (strstr (err.msg, "a Unix socket takes at most"));
}

/* A worker key's "workers" metadata is read from its public file even
   where its secret file lies beside it (zcert_load would read the secret's
   metadata instead: the 1000-worker CURVE benchmark was refused at 1). */
static void test_keyring_workers_meta (void **state)
{
    (void) state;
    char *dir = ak_test_tmpdir ("keyring");
    char *pub = NULL, *text = NULL;
    ak_err_t err = { 0 };
    assert_int_equal (ak_keys_new (dir, "load", AK_ROLE_WORKER, &pub, &err), 0);
    size_t len = 0;
    assert_int_equal (ak_file_read (pub, 1 << 20, &text, &len, NULL), 0);
    char *meta = strstr (text, "metadata\n");
    assert_non_null (meta);
    meta += strlen ("metadata\n");
    char *edited = ak_sprintf ("%.*s    workers = \"3\"\n%s", (int) (meta - text), text, meta);
    assert_int_equal (ak_file_write_atomic (pub, edited, strlen (edited), NULL), 0);
    char *secret = ak_sprintf ("%s_secret", pub);
    assert_int_equal (access (secret, R_OK), 0);           /* the secret is beside it */
    ak_keyring_t *ring = NULL;
    assert_int_equal (ak_keyring_load (dir, &ring, &err), 0);
    zcert_t *cert = zcert_load (pub);
    assert_non_null (cert);
    const ak_key_t *k = ak_keyring_find (ring, zcert_public_txt (cert));
    assert_non_null (k);
    assert_int_equal (k->max_workers, 3);
    zcert_destroy (&cert);
    ak_keyring_destroy (&ring);
    free (secret);
    free (edited);
    free (text);
    free (pub);
    ak_test_rmtree (dir);
    free (dir);
}

/*  The shared wording of bad flags (cli.h): 2 and nothing stored for a
    value out of range or not a number, the value for one in range. */
static void test_cli (void **state)
{
    (void) state;
    uint32_t v = 7;
    assert_int_equal (ak_cli_uint ("akx", "--n", "0", 1, 10, &v), 2);
    assert_int_equal (ak_cli_uint ("akx", "--n", "11", 1, 10, &v), 2);
    assert_int_equal (ak_cli_uint ("akx", "--n", "5x", 1, 10, &v), 2);
    assert_int_equal (v, 7);
    assert_int_equal (ak_cli_uint ("akx", "--n", "10", 1, 10, &v), 0);
    assert_int_equal (v, 10);
    int level = -1;
    assert_int_equal (ak_cli_log_level ("akx", "loud", &level), 2);
    assert_int_equal (level, -1);
    assert_int_equal (ak_cli_log_level ("akx", "warn", &level), 0);
    assert_int_equal (level, (int) AK_LOG_WARN);
    char *argv[] = { "akx", "--bogus", NULL };
    assert_int_equal (ak_cli_getopt_error ("akx", '?', argv, 2), 2);
    assert_int_equal (ak_cli_getopt_error ("akx", ':', argv, 2), 2);
    assert_int_equal (ak_cli_bad ("akx", "%s", "planted"), 2);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_error),
        cmocka_unit_test (test_cli),
        cmocka_unit_test (test_keyring_workers_meta),
        cmocka_unit_test (test_log),
        cmocka_unit_test (test_log_hold),
        cmocka_unit_test (test_clock),
        cmocka_unit_test (test_digest),
        cmocka_unit_test (test_util_files),
        cmocka_unit_test (test_util_strings),
        cmocka_unit_test (test_rng_kat),
        cmocka_unit_test (test_rng_uniform),
        cmocka_unit_test (test_stats),
        cmocka_unit_test (test_endpoint_check),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
