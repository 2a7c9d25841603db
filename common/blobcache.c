/*  common/blobcache.c: the blob cache of one worker registration (see
    blobcache.h). */
#include "blobcache.h"
#include "cpb.h"
#include "digest.h"
#include "util.h"

#include <czmq.h>
#include <stdlib.h>
#include <string.h>

struct ak_blobcache {
    zhashx_t *blobs;                /* digest -> text (worker) or a marker (coordinator) */
    bool      keep_text;
    uint32_t  epoch;
    uint64_t  limit;
    uint64_t  bytes;
};

static char s_marker;               /* the coordinator's value: it keeps no text */

static void s_text_free (void **item)
{
    if (*item != &s_marker)
        free (*item);
    *item = NULL;
}

ak_blobcache_t *ak_blobcache_new (bool keep_text)
{
    ak_blobcache_t *self = ak_calloc (1, sizeof *self);
    self->blobs = zhashx_new ();
    if (!self->blobs)
        abort ();
    zhashx_set_destructor (self->blobs, s_text_free);
    self->keep_text = keep_text;
    return self;
}

void ak_blobcache_destroy (ak_blobcache_t **self_p)
{
    if (self_p && *self_p) {
        zhashx_destroy (&(*self_p)->blobs);
        free (*self_p);
        *self_p = NULL;
    }
}

void ak_blobcache_reset (ak_blobcache_t *self, uint32_t epoch, uint64_t limit)
{
    zhashx_purge (self->blobs);
    self->epoch = epoch;
    self->limit = limit;
    self->bytes = 0;
}

uint32_t ak_blobcache_epoch (const ak_blobcache_t *self) { return self->epoch; }
uint64_t ak_blobcache_limit (const ak_blobcache_t *self) { return self->limit; }
size_t ak_blobcache_count (const ak_blobcache_t *self) { return zhashx_size (self->blobs); }
uint64_t ak_blobcache_bytes (const ak_blobcache_t *self) { return self->bytes; }

bool ak_blobcache_has (const ak_blobcache_t *self, const char *digest)
{
    return self->limit && digest && *digest && zhashx_lookup (self->blobs, digest) != NULL;
}

bool ak_blobcache_admit (ak_blobcache_t *self, const char *digest, const char *text, size_t len)
{
    if (!self->limit || !digest || !*digest || zhashx_lookup (self->blobs, digest)
        || len > self->limit - self->bytes)
        return false;
    void *value = &s_marker;
    if (self->keep_text) {
        char *copy = ak_malloc (len + 1);
        memcpy (copy, text, len);
        copy[len] = '\0';
        value = copy;
    }
    if (zhashx_insert (self->blobs, digest, value) != 0)
        abort ();                   /* absent a moment ago */
    self->bytes += len;
    return true;
}

/* ----------------------------------------------------------- coordinator */

static void s_mark_source (const ak_blobcache_t *self, Ak__Source *src)
{
    if (src && ak_blobcache_has (self, src->digest)) {
        src->cached = true;
        src->text = (char *) protobuf_c_empty_string;
    }
}

void ak_blobcache_mark (const ak_blobcache_t *self, Ak__Assign *a)
{
    if (!self || !self->limit)
        return;
    a->blob_epoch = self->epoch;
    if (ak_blobcache_has (self, a->spec_digest)) {
        a->spec_cached = true;
        a->spec_json = (char *) protobuf_c_empty_string;
    }
    s_mark_source (self, a->reference);
    s_mark_source (self, a->baseline);
    s_mark_source (self, a->candidate);
}

static void s_sent_source (ak_blobcache_t *self, const Ak__Source *src)
{
    if (src && !src->cached && src->text)
        ak_blobcache_admit (self, src->digest, NULL, strlen (src->text));
}

void ak_blobcache_sent (ak_blobcache_t *self, const Ak__Assign *a)
{
    if (!self || !self->limit)
        return;
    if (!a->spec_cached && a->spec_json)
        ak_blobcache_admit (self, a->spec_digest, NULL, strlen (a->spec_json));
    s_sent_source (self, a->reference);
    s_sent_source (self, a->baseline);
    s_sent_source (self, a->candidate);
}

/* ---------------------------------------------------------------- worker */

/* One blob of a received ASSIGN: *text_p is its text field (malloc'ed by
   protobuf-c or the shared empty string), cached its flag. */
static int s_resolve_one (ak_blobcache_t *self, const char *what, const char *digest, bool cached,
                          char **text_p, bool current, bool fill, ak_err_t *err)
{
    if (!cached) {
        if (!current)
            return 0;
        const char *text = *text_p ? *text_p : "";
        size_t len = strlen (text);
        char hex[AK_DIGEST_HEX_LEN + 1];
        if (digest && *digest && !zhashx_lookup (self->blobs, digest)
            && ak_sha256_hex (text, len, hex) == 0 && strcmp (hex, digest) == 0)
            ak_blobcache_admit (self, digest, text, len);
        return 0;
    }
    const char *text = digest && *digest ? zhashx_lookup (self->blobs, digest) : NULL;
    if (!text || !current)
        return ak_err_set (err, current ? AK_ENOTFOUND : AK_ESTATE,
                           "%s %.64s is marked cached but %s", what, digest ? digest : "",
                           current ? "the blob cache lacks it" : "the assignment is from an earlier registration");
    if (fill)
        ak_cpb_set (text_p, text);
    return 0;
}

static int s_resolve (ak_blobcache_t *self, Ak__Assign *a, bool fill, ak_err_t *err)
{
    bool current = self->limit && a->blob_epoch == self->epoch;
    int rc = s_resolve_one (self, "spec", a->spec_digest, a->spec_cached, &a->spec_json, current, fill, err);
    Ak__Source *srcs[] = { a->reference, a->baseline, a->candidate };
    const char *names[] = { "reference", "baseline", "candidate" };
    for (size_t i = 0; i < 3 && rc == 0; i++)
        if (srcs[i])
            rc = s_resolve_one (self, names[i], srcs[i]->digest, srcs[i]->cached, &srcs[i]->text,
                                current, fill, err);
    if (rc == 0 && fill) {
        a->spec_cached = false;
        for (size_t i = 0; i < 3; i++)
            if (srcs[i])
                srcs[i]->cached = false;
    }
    return rc;
}

int ak_blobcache_resolve (ak_blobcache_t *self, Ak__Assign *a, ak_err_t *err)
{
    return s_resolve (self, a, true, err);
}

int ak_blobcache_check (ak_blobcache_t *self, Ak__Assign *a, ak_err_t *err)
{
    return s_resolve (self, a, false, err);
}
