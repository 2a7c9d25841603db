/*  tests/unit/test_blobcache.c: the blob cache of a worker registration:
    the coordinator's mirror and the worker's cache stay in step. */
#include "support.h"
#include "blobcache.h"
#include "cpb.h"
#include "digest.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static const char *s_spec = "{\"name\": \"softmax\"}";
static const char *s_ref = "double ref (void) { return 1; }";
static const char *s_cand = "__global__ void k () {}";

typedef struct {
    char spec_digest[AK_DIGEST_HEX_LEN + 1];
    char ref_digest[AK_DIGEST_HEX_LEN + 1];
    char cand_digest[AK_DIGEST_HEX_LEN + 1];
    Ak__Source ref, base, cand;
    Ak__Assign a;
} s_msg_t;

/* An ASSIGN as the coordinator builds it (borrowed strings); the baseline
   is the reference's text under another name. */
static void s_build (s_msg_t *m, const char *cand_text)
{
    memset (m, 0, sizeof *m);
    assert_int_equal (ak_sha256_hex (s_spec, strlen (s_spec), m->spec_digest), 0);
    assert_int_equal (ak_sha256_hex (s_ref, strlen (s_ref), m->ref_digest), 0);
    assert_int_equal (ak_sha256_hex (cand_text, strlen (cand_text), m->cand_digest), 0);
    ak__assign__init (&m->a);
    ak__source__init (&m->ref);
    ak__source__init (&m->base);
    ak__source__init (&m->cand);
    m->a.task_id = "B1.1";
    m->a.spec_json = (char *) s_spec;
    m->a.spec_digest = m->spec_digest;
    m->ref.name = "ref.c";
    m->ref.digest = m->ref_digest;
    m->ref.text = (char *) s_ref;
    m->base = m->ref;
    m->base.name = "base.c";
    m->cand.name = "cand.cu";
    m->cand.digest = m->cand_digest;
    m->cand.text = (char *) cand_text;
    m->a.reference = &m->ref;
    m->a.baseline = &m->base;
    m->a.candidate = &m->cand;
}

/* The coordinator marks and sends it; the worker gets the wire copy. */
static Ak__Assign *s_transmit (ak_blobcache_t *mirror, s_msg_t *m)
{
    ak_blobcache_mark (mirror, &m->a);
    size_t len = ak__assign__get_packed_size (&m->a);
    uint8_t *buf = malloc (len ? len : 1);
    assert_non_null (buf);
    assert_int_equal (ak__assign__pack (&m->a, buf), len);
    ak_blobcache_sent (mirror, &m->a);
    Ak__Assign *got = ak__assign__unpack (NULL, len, buf);
    free (buf);
    assert_non_null (got);
    return got;
}

/* A coordinator's mirror and a worker's cache of one registration. */
static void s_pair (ak_blobcache_t **mirror, ak_blobcache_t **cache, uint32_t epoch, uint64_t limit)
{
    *mirror = ak_blobcache_new (false);
    *cache = ak_blobcache_new (true);
    ak_blobcache_reset (*mirror, epoch, limit);
    ak_blobcache_reset (*cache, epoch, limit);
}

static void test_second_assign_sends_digests (void **state)
{
    (void) state;
    ak_blobcache_t *mirror, *cache;
    s_pair (&mirror, &cache, 1, 1 << 20);
    ak_err_t err;

    s_msg_t m;
    s_build (&m, s_cand);
    Ak__Assign *a = s_transmit (mirror, &m);
    assert_false (a->spec_cached);
    assert_false (a->reference->cached);
    assert_false (a->baseline->cached);     /* the same text twice in one ASSIGN: inline */
    assert_int_equal (a->blob_epoch, 1);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
    assert_string_equal (a->spec_json, s_spec);
    ak__assign__free_unpacked (a, NULL);
    /* three distinct texts on each side */
    assert_int_equal (ak_blobcache_count (mirror), 3);
    assert_int_equal (ak_blobcache_count (cache), 3);
    assert_true (ak_blobcache_bytes (mirror) == ak_blobcache_bytes (cache));

    /* the next ASSIGN carries digests only: akload's check finds them
       held and leaves them out; akworker's resolve restores them */
    s_build (&m, s_cand);
    a = s_transmit (mirror, &m);
    assert_int_equal (ak_blobcache_check (cache, a, &err), 0);
    assert_true (a->spec_cached && a->candidate->cached);
    assert_string_equal (a->spec_json, "");
    assert_string_equal (a->candidate->text, "");
    assert_true (a->spec_cached);
    assert_string_equal (a->spec_json, "");
    assert_true (a->reference->cached && a->baseline->cached && a->candidate->cached);
    assert_string_equal (a->candidate->text, "");
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
    assert_string_equal (a->spec_json, s_spec);
    assert_string_equal (a->reference->text, s_ref);
    assert_string_equal (a->baseline->text, s_ref);
    assert_string_equal (a->candidate->text, s_cand);
    assert_false (a->spec_cached || a->candidate->cached);
    ak__assign__free_unpacked (a, NULL);

    /* a new candidate text goes inline, the rest cached */
    s_build (&m, "__global__ void k2 () {}");
    a = s_transmit (mirror, &m);
    assert_true (a->spec_cached);
    assert_false (a->candidate->cached);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
    assert_string_equal (a->candidate->text, "__global__ void k2 () {}");
    ak__assign__free_unpacked (a, NULL);
    assert_int_equal (ak_blobcache_count (cache), 4);

    ak_blobcache_destroy (&mirror);
    ak_blobcache_destroy (&cache);
    assert_null (mirror);
}

/* The limit: a text that does not fit is sent inline every time, on both
   sides alike; a limit of 0 is no cache. */
static void test_limit (void **state)
{
    (void) state;
    size_t limit = strlen (s_spec) + strlen (s_ref);        /* no room for the candidate */
    ak_blobcache_t *mirror, *cache;
    s_pair (&mirror, &cache, 7, limit);
    ak_err_t err;
    s_msg_t m;
    for (int i = 0; i < 2; i++) {
        s_build (&m, s_cand);
        Ak__Assign *a = s_transmit (mirror, &m);
        assert_int_equal (a->spec_cached, i == 1);
        assert_false (a->candidate->cached);
        assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
        assert_string_equal (a->candidate->text, s_cand);
        ak__assign__free_unpacked (a, NULL);
    }
    assert_int_equal (ak_blobcache_count (mirror), 2);
    assert_int_equal (ak_blobcache_count (cache), 2);

    ak_blobcache_reset (mirror, 8, 0);
    ak_blobcache_reset (cache, 8, 0);
    s_build (&m, s_cand);
    Ak__Assign *a = s_transmit (mirror, &m);
    assert_false (a->spec_cached);
    assert_int_equal (a->blob_epoch, 0);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
    ak__assign__free_unpacked (a, NULL);
    assert_int_equal (ak_blobcache_count (cache), 0);
    ak_blobcache_destroy (&mirror);
    ak_blobcache_destroy (&cache);
}

/* Out of step: an ASSIGN of an earlier registration that names a cached
   blob is stale (AK_ESTATE); a cached blob missing in this registration
   is AK_ENOTFOUND; a text that does not match its digest is never
   admitted. */
static void test_out_of_step (void **state)
{
    (void) state;
    ak_blobcache_t *mirror, *cache;
    s_pair (&mirror, &cache, 1, 1 << 20);
    ak_err_t err;
    s_msg_t m;
    s_build (&m, s_cand);
    Ak__Assign *a = s_transmit (mirror, &m);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
    ak__assign__free_unpacked (a, NULL);

    /* the worker registered again (epoch 2); the coordinator has not seen it */
    ak_blobcache_reset (cache, 2, 1 << 20);
    s_build (&m, s_cand);
    a = s_transmit (mirror, &m);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), AK_ESTATE);
    assert_non_null (strstr (err.msg, "earlier registration"));
    assert_int_equal (ak_blobcache_check (cache, a, &err), AK_ESTATE);
    ak__assign__free_unpacked (a, NULL);
    /* a stale ASSIGN with every text inline still runs, admitting nothing */
    ak_blobcache_reset (mirror, 1, 1 << 20);
    s_build (&m, s_cand);
    a = s_transmit (mirror, &m);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
    assert_string_equal (a->spec_json, s_spec);
    ak__assign__free_unpacked (a, NULL);
    assert_int_equal (ak_blobcache_count (cache), 0);

    /* the mirror believes the worker has texts it never got (lost in a reconnect) */
    ak_blobcache_reset (mirror, 2, 1 << 20);
    s_build (&m, s_cand);
    ak_blobcache_mark (mirror, &m.a);
    ak_blobcache_sent (mirror, &m.a);        /* "sent", never received */
    s_build (&m, s_cand);
    a = s_transmit (mirror, &m);
    assert_true (a->spec_cached);
    assert_int_equal (ak_blobcache_check (cache, a, &err), AK_ENOTFOUND);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), AK_ENOTFOUND);
    assert_non_null (strstr (err.msg, "lacks"));
    ak__assign__free_unpacked (a, NULL);

    /* a text that is not what its digest says is not admitted */
    ak_blobcache_reset (mirror, 3, 1 << 20);
    ak_blobcache_reset (cache, 3, 1 << 20);
    s_build (&m, s_cand);
    m.a.spec_json = "{\"name\": \"tampered\"}";
    a = s_transmit (mirror, &m);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), 0);
    ak__assign__free_unpacked (a, NULL);
    assert_int_equal (ak_blobcache_count (cache), 2);         /* reference, candidate */
    s_build (&m, s_cand);
    a = s_transmit (mirror, &m);
    assert_int_equal (ak_blobcache_resolve (cache, a, &err), AK_ENOTFOUND);
    ak__assign__free_unpacked (a, NULL);

    ak_blobcache_destroy (&mirror);
    ak_blobcache_destroy (&cache);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_second_assign_sends_digests),
        cmocka_unit_test (test_limit),
        cmocka_unit_test (test_out_of_step),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
