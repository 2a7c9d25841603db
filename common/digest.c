/*  common/digest.c: SHA-256 via libsodium, as lower-case hex. */
#include "digest.h"
#include "error.h"

#include <sodium.h>
#include <string.h>

_Static_assert (sizeof (crypto_hash_sha256_state) <= sizeof (((ak_sha256_t *) 0)->state),
                "ak_sha256_t too small for libsodium state");

static void s_hex (const unsigned char *bin, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[bin[i] >> 4];
        hex[2 * i + 1] = digits[bin[i] & 15];
    }
    hex[2 * n] = '\0';
}

int ak_sha256_hex (const void *data, size_t len, char hex[AK_DIGEST_HEX_LEN + 1])
{
    unsigned char out[crypto_hash_sha256_BYTES];
    if (crypto_hash_sha256 (out, (const unsigned char *) (data ? data : ""), len) != 0) {
        hex[0] = '\0';
        return AK_EINTERNAL;
    }
    s_hex (out, sizeof out, hex);
    return 0;
}

/*  ak_sha256_t holds the libsodium state as bytes, which need not be aligned
    for it: copy in and out instead of casting. */
void ak_sha256_init (ak_sha256_t *ctx)
{
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init (&st);
    memcpy (ctx->state, &st, sizeof st);
}

void ak_sha256_update (ak_sha256_t *ctx, const void *data, size_t len)
{
    if (len == 0)
        return;
    crypto_hash_sha256_state st;
    memcpy (&st, ctx->state, sizeof st);
    crypto_hash_sha256_update (&st, (const unsigned char *) data, len);
    memcpy (ctx->state, &st, sizeof st);
}

void ak_sha256_final_hex (ak_sha256_t *ctx, char hex[AK_DIGEST_HEX_LEN + 1])
{
    unsigned char out[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    memcpy (&st, ctx->state, sizeof st);
    crypto_hash_sha256_final (&st, out);
    memcpy (ctx->state, &st, sizeof st);
    s_hex (out, sizeof out, hex);
}

int ak_digest_valid (const char *text)
{
    if (!text)
        return 0;
    size_t i;
    for (i = 0; text[i]; i++) {
        if (i >= AK_DIGEST_HEX_LEN)
            return 0;
        char c = text[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return i == AK_DIGEST_HEX_LEN;
}
