/* SHA-256 (FIPS 180-4), for the weights checksum stored in every output file
 * so that a result can be traced to the exact model that produced it, and
 * for the inputs' fingerprints. OpenSSL's libcrypto computes it (with the
 * CPU's SHA instructions where it has them: gigabytes per second, where a
 * portable C loop manages a tenth of that). */
#ifndef TFENC_SHA256_H
#define TFENC_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include "tfenc/plugin.h"

/* An incremental digest. */
typedef struct tfenc_sha256 {
    void *state; /* libcrypto's digest context; NULL when it could not be made */
} tfenc_sha256;

/* TFENC_ERR_NO_MEMORY when libcrypto cannot make a context. */
int tfenc_sha256_init(tfenc_sha256 *hash);
void tfenc_sha256_update(tfenc_sha256 *hash, const void *data, size_t size);
/* Writes the 32-byte digest and frees the state (init again to reuse). */
void tfenc_sha256_final(tfenc_sha256 *hash, unsigned char digest[32]);
/* The digest of a buffer. */
void tfenc_sha256_digest(const void *data, size_t size, unsigned char digest[32]);
/* Digest of a buffer as 64 lower-case hex digits and a NUL. */
void tfenc_sha256_hex(const void *data, size_t size, char hex[65]);
/* Digest of a whole file as lower-case hex; TFENC_ERR_IO naming the path
 * when it cannot be opened or read. */
int tfenc_sha256_file(tfenc_context *ctx, const char *path, char hex[65]);

#endif
