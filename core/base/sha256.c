/* SHA-256 through OpenSSL's EVP interface. */
#include "base/sha256.h"
#include "base/files.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tfenc_sha256_init(tfenc_sha256 *hash)
{
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context != NULL && EVP_DigestInit_ex(context, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(context);
        context = NULL;
    }
    hash->state = context;
    return context != NULL ? TFENC_OK : TFENC_ERR_NO_MEMORY;
}

void tfenc_sha256_update(tfenc_sha256 *hash, const void *data, size_t size)
{
    if (hash->state != NULL && size > 0)
        EVP_DigestUpdate(hash->state, data, size);
}

void tfenc_sha256_final(tfenc_sha256 *hash, unsigned char digest[32])
{
    unsigned int length = 0;
    memset(digest, 0, 32);
    if (hash->state != NULL)
        EVP_DigestFinal_ex(hash->state, digest, &length);
    EVP_MD_CTX_free(hash->state);
    hash->state = NULL;
}

void tfenc_sha256_digest(const void *data, size_t size, unsigned char digest[32])
{
    unsigned int length = 0;
    if (EVP_Digest(data, size, digest, &length, EVP_sha256(), NULL) != 1)
        memset(digest, 0, 32);
}

static void to_hex(const unsigned char digest[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

void tfenc_sha256_hex(const void *data, size_t size, char hex[65])
{
    unsigned char digest[32];
    tfenc_sha256_digest(data, size, digest);
    to_hex(digest, hex);
}

int tfenc_sha256_file(tfenc_context *ctx, const char *path, char hex[65])
{
    /* Checked as every input is (base/files.h): the file may have been
     * replaced by a FIFO since the reader that named it looked. */
    struct stat info;
    char why[256];
    int descriptor = tfenc_file_open_regular_descriptor(path, &info, why, sizeof why);
    FILE *file = descriptor >= 0 ? fdopen(descriptor, "rb") : NULL;
    if (file == NULL) {
        if (descriptor >= 0) {
            snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
            close(descriptor);
        }
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: %s (for the checksum)", path, why);
    }
    tfenc_sha256 hash;
    if (tfenc_sha256_init(&hash) != TFENC_OK) {
        fclose(file);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: no SHA-256 context for the checksum",
                           path);
    }
    unsigned char buffer[1 << 16];
    size_t got;
    while ((got = fread(buffer, 1, sizeof buffer, file)) > 0)
        tfenc_sha256_update(&hash, buffer, got);
    int failed = ferror(file);
    int saved_errno = errno;
    fclose(file);
    unsigned char digest[32];
    tfenc_sha256_final(&hash, digest);
    if (failed)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: read error while computing the checksum: %s",
                           path, strerror(saved_errno));
    to_hex(digest, hex);
    return TFENC_OK;
}
