/*  common/digest.h: SHA-256 (libsodium) as lower-case hex. */
#ifndef AK_DIGEST_H
#define AK_DIGEST_H
#include <stddef.h>

#define AK_DIGEST_HEX_LEN 64

/* Writes 64 hex chars + NUL into hex[65]. Returns 0 or AK_EINTERNAL. */
int ak_sha256_hex (const void *data, size_t len, char hex[AK_DIGEST_HEX_LEN + 1]);

/* Streaming form, for digests over several parts (source + options ...). */
typedef struct { unsigned char state[256]; } ak_sha256_t;
void ak_sha256_init (ak_sha256_t *ctx);
void ak_sha256_update (ak_sha256_t *ctx, const void *data, size_t len);
void ak_sha256_final_hex (ak_sha256_t *ctx, char hex[AK_DIGEST_HEX_LEN + 1]);

/* True when text is exactly 64 lower-case hex characters. */
int ak_digest_valid (const char *text);

#endif
