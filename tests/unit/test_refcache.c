/*  tests/unit/test_refcache.c: the executor's reference cache
    (worker/refcache.h): hit, miss, least-recently-used eviction at the
    memory bound, entries too large for it, pinned entries, the
    environment's bounds, a device cache (its buffers freed by its release
    function on eviction, refusal and destroy), forgetting a corrupt
    entry.  The gates' use of it (keys, verdicts with and
    without it) is tests/unit/test_gates.c's. */
#include "support.h"
#include "worker/refcache.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static void s_key (uint8_t key[AK_REFCACHE_KEY_LEN], int n)
{
    memset (key, 0, AK_REFCACHE_KEY_LEN);
    key[0] = (uint8_t) n;
    key[31] = (uint8_t) (n >> 8);
}

/*  An entry of one input of in_bytes and one output of nref doubles, its
    values all v. */
static ak_refentry_t s_entry (size_t in_bytes, size_t nref, double v)
{
    ak_refentry_t e;
    memset (&e, 0, sizeof e);
    e.nin = 1;
    e.nout = 1;
    if (in_bytes) {
        e.in[0] = ak_malloc (in_bytes);
        memset (e.in[0], 0x5A, in_bytes);
        e.in_bytes[0] = in_bytes;
    }
    e.ref[0] = ak_malloc (nref * sizeof (double));
    for (size_t i = 0; i < nref; i++)
        e.ref[0][i] = v;
    e.nref[0] = nref;
    return e;
}

static void test_hit_miss (void **state)
{
    (void) state;
    ak_refcache_t *c = ak_refcache_new (1 << 20);
    uint8_t k1[AK_REFCACHE_KEY_LEN], k2[AK_REFCACHE_KEY_LEN];
    s_key (k1, 1);
    s_key (k2, 2);
    assert_null (ak_refcache_get (c, k1));
    ak_refentry_t e = s_entry (64, 100, 1.5);
    assert_int_equal (ak_refentry_bytes (&e), 64 + 100 * sizeof (double));
    assert_true (ak_refcache_put (c, k1, &e));
    assert_null (e.ref[0]);                       /* taken */
    const ak_refentry_t *got = ak_refcache_get (c, k1);
    assert_non_null (got);
    assert_int_equal (got->nref[0], 100);
    assert_float_equal (got->ref[0][99], 1.5, 0);
    assert_int_equal (got->in[0][63], 0x5A);
    ak_refcache_release (c, got);
    /* Another key is a miss: one bit of the key differs. */
    assert_null (ak_refcache_get (c, k2));
    uint8_t k1b[AK_REFCACHE_KEY_LEN];
    memcpy (k1b, k1, sizeof k1b);
    k1b[17] ^= 1;
    assert_null (ak_refcache_get (c, k1b));
    /* A second put of the same key keeps the first entry. */
    ak_refentry_t e2 = s_entry (0, 100, 7.0);
    assert_false (ak_refcache_put (c, k1, &e2));
    assert_null (e2.ref[0]);
    got = ak_refcache_get (c, k1);
    assert_float_equal (got->ref[0][0], 1.5, 0);
    ak_refcache_release (c, got);

    ak_refcache_stats_t st;
    ak_refcache_stats (c, &st);
    assert_int_equal (st.hits, 2);
    assert_int_equal (st.misses, 3);
    assert_int_equal (st.entries, 1);
    assert_int_equal (st.bytes, 64 + 100 * sizeof (double));
    ak_refcache_destroy (&c);
    ak_refcache_destroy (&c);                     /* twice is fine */
    assert_null (c);
}

/*  Entries of 1 KiB in a cache of 4 KiB: the fifth evicts the least
    recently used one, which is not the oldest once that was read. */
static void test_eviction_at_bound (void **state)
{
    (void) state;
    ak_refcache_t *c = ak_refcache_new (4096);
    uint8_t k[8][AK_REFCACHE_KEY_LEN];
    for (int i = 0; i < 8; i++)
        s_key (k[i], i + 1);
    for (int i = 0; i < 4; i++) {
        ak_refentry_t e = s_entry (0, 128, i);
        assert_true (ak_refcache_put (c, k[i], &e));
    }
    ak_refcache_stats_t st;
    ak_refcache_stats (c, &st);
    assert_int_equal (st.bytes, 4096);
    assert_int_equal (st.evictions, 0);
    /* Entry 0 read: entry 1 is now the least recently used. */
    ak_refcache_release (c, ak_refcache_get (c, k[0]));
    ak_refentry_t e = s_entry (0, 128, 4);
    assert_true (ak_refcache_put (c, k[4], &e));
    ak_refcache_stats (c, &st);
    assert_int_equal (st.evictions, 1);
    assert_true (st.bytes <= 4096);
    assert_null (ak_refcache_get (c, k[1]));
    const ak_refentry_t *g = ak_refcache_get (c, k[0]);
    assert_non_null (g);
    assert_float_equal (g->ref[0][0], 0, 0);
    ak_refcache_release (c, g);
    /* A 2 KiB entry evicts two more (2 and 3, the least recent now). */
    e = s_entry (0, 256, 5);
    assert_true (ak_refcache_put (c, k[5], &e));
    ak_refcache_stats (c, &st);
    assert_int_equal (st.evictions, 3);
    assert_int_equal (st.bytes, 4096);
    assert_null (ak_refcache_get (c, k[2]));
    assert_null (ak_refcache_get (c, k[3]));
    /* Larger than the whole bound: not kept, nothing evicted for it. */
    e = s_entry (8, 512, 6);
    assert_false (ak_refcache_put (c, k[6], &e));
    assert_null (e.ref[0]);
    ak_refcache_stats (c, &st);
    assert_int_equal (st.too_big, 1);
    assert_int_equal (st.evictions, 3);
    assert_int_equal (st.entries, 3);
    ak_refcache_destroy (&c);

    /* A bound of 0 keeps nothing. */
    c = ak_refcache_new (0);
    e = s_entry (0, 1, 1);
    assert_false (ak_refcache_put (c, k[0], &e));
    assert_null (ak_refcache_get (c, k[0]));
    ak_refcache_destroy (&c);
}

/*  An entry in use is never evicted: a put that would need its room is
    refused instead, and the entry's data stay valid. */
static void test_pinned_survive (void **state)
{
    (void) state;
    ak_refcache_t *c = ak_refcache_new (2048);
    uint8_t k1[AK_REFCACHE_KEY_LEN], k2[AK_REFCACHE_KEY_LEN];
    s_key (k1, 1);
    s_key (k2, 2);
    ak_refentry_t e = s_entry (0, 200, 3.25);
    assert_true (ak_refcache_put (c, k1, &e));
    const ak_refentry_t *pinned = ak_refcache_get (c, k1);
    e = s_entry (0, 200, 9);
    assert_false (ak_refcache_put (c, k2, &e));
    assert_float_equal (pinned->ref[0][199], 3.25, 0);
    ak_refcache_release (c, pinned);
    e = s_entry (0, 200, 9);
    assert_true (ak_refcache_put (c, k2, &e));
    assert_null (ak_refcache_get (c, k1));
    ak_refcache_destroy (&c);
}

static void test_env_bound (void **state)
{
    (void) state;
    unsetenv ("AK_REF_CACHE_MB");
    assert_int_equal (ak_refcache_env_bytes (), (uint64_t) AK_REFCACHE_DEFAULT_MB << 20);
    setenv ("AK_REF_CACHE_MB", "16", 1);
    assert_int_equal (ak_refcache_env_bytes (), 16ull << 20);
    setenv ("AK_REF_CACHE_MB", "0", 1);
    assert_int_equal (ak_refcache_env_bytes (), 0);
    setenv ("AK_REF_CACHE_MB", "-5", 1);
    assert_int_equal (ak_refcache_env_bytes (), (uint64_t) AK_REFCACHE_DEFAULT_MB << 20);
    setenv ("AK_REF_CACHE_MB", "12x", 1);
    assert_int_equal (ak_refcache_env_bytes (), (uint64_t) AK_REFCACHE_DEFAULT_MB << 20);
    unsetenv ("AK_REF_CACHE_MB");
}

/* ------------------------------------------------------ a device cache */

/*  Stands for the device: counts the buffers released (each one a host
    allocation here, freed). */
static int s_released;

static void s_release (void *arg, void *buf)
{
    assert_ptr_equal (arg, &s_released);
    s_released++;
    free (buf);
}

static ak_refentry_t s_dentry (size_t nref)
{
    ak_refentry_t e;
    memset (&e, 0, sizeof e);
    e.nout = 1;
    e.ref[0] = ak_malloc (nref * sizeof (double));
    e.nref[0] = nref;
    e.dsum[0] = 0xABCDull + nref;
    return e;
}

static void test_device_cache (void **state)
{
    (void) state;
    assert_null (ak_refcache_new_device (1024, NULL, NULL));
    s_released = 0;
    ak_refcache_t *c = ak_refcache_new_device (2048, s_release, &s_released);
    uint8_t k1[AK_REFCACHE_KEY_LEN], k2[AK_REFCACHE_KEY_LEN], k3[AK_REFCACHE_KEY_LEN];
    s_key (k1, 1);
    s_key (k2, 2);
    s_key (k3, 3);
    ak_refentry_t e = s_dentry (100);
    assert_true (ak_refcache_put (c, k1, &e));
    assert_null (e.ref[0]);
    const ak_refentry_t *hit = ak_refcache_get (c, k1);
    assert_non_null (hit);
    assert_true (hit->dsum[0] == 0xABCDull + 100);
    ak_refcache_release (c, hit);
    e = s_dentry (1000);                       /* 8000 bytes > 2048: refused, released */
    assert_false (ak_refcache_put (c, k2, &e));
    assert_int_equal (s_released, 1);
    e = s_dentry (200);                        /* evicts k1 */
    assert_true (ak_refcache_put (c, k2, &e));
    assert_int_equal (s_released, 2);
    assert_null (ak_refcache_get (c, k1));
    e = s_dentry (10);                         /* the same key again: released */
    assert_false (ak_refcache_put (c, k2, &e));
    assert_int_equal (s_released, 3);
    /* forgotten while pinned: no longer answered, released at the last release */
    hit = ak_refcache_get (c, k2);
    assert_non_null (hit);
    ak_refcache_forget (c, hit);
    assert_null (ak_refcache_get (c, k2));
    assert_int_equal (s_released, 3);
    ak_refcache_release (c, hit);
    assert_int_equal (s_released, 4);
    ak_refcache_stats_t st;
    ak_refcache_stats (c, &st);
    assert_int_equal (st.entries, 0);
    assert_int_equal (st.bytes, 0);
    e = s_dentry (10);
    assert_true (ak_refcache_put (c, k3, &e));
    ak_refcache_destroy (&c);
    assert_int_equal (s_released, 5);
    unsetenv ("AK_DREF_CACHE_MB");
    assert_int_equal (ak_refcache_env_dev_bytes (), (uint64_t) AK_DREFCACHE_DEFAULT_MB << 20);
    setenv ("AK_DREF_CACHE_MB", "0", 1);
    assert_int_equal (ak_refcache_env_dev_bytes (), 0);
    unsetenv ("AK_DREF_CACHE_MB");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_hit_miss),
        cmocka_unit_test (test_eviction_at_bound),
        cmocka_unit_test (test_pinned_survive),
        cmocka_unit_test (test_env_bound),
        cmocka_unit_test (test_device_cache),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
