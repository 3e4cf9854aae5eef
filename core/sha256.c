/* SHA-256 after FIPS 180-4, kept here because the dependency list has no
 * crypto library; tests/test_output.c checks it against the standard's
 * vectors. */
#include "sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotate_right(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress(uint32_t state[8], const unsigned char block[64])
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16
             | (uint32_t)block[4 * t + 2] << 8 | (uint32_t)block[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotate_right(w[t - 15], 7) ^ rotate_right(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotate_right(w[t - 2], 17) ^ rotate_right(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; t++) {
        uint32_t sum1 = rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25);
        uint32_t choose = (e & f) ^ (~e & g);
        uint32_t t1 = h + sum1 + choose + round_constants[t] + w[t];
        uint32_t sum0 = rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22);
        uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = sum0 + majority;
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

void tfenc_sha256_init(tfenc_sha256 *hash)
{
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(hash->state, initial, sizeof initial);
    hash->total_bytes = 0;
    hash->block_used = 0;
}

void tfenc_sha256_update(tfenc_sha256 *hash, const void *data, size_t size)
{
    const unsigned char *bytes = data;
    hash->total_bytes += size;
    while (size > 0) {
        if (hash->block_used == 0 && size >= 64) {
            compress(hash->state, bytes);
            bytes += 64;
            size -= 64;
            continue;
        }
        size_t take = 64 - hash->block_used;
        if (take > size)
            take = size;
        memcpy(hash->block + hash->block_used, bytes, take);
        hash->block_used += take;
        bytes += take;
        size -= take;
        if (hash->block_used == 64) {
            compress(hash->state, hash->block);
            hash->block_used = 0;
        }
    }
}

void tfenc_sha256_final(tfenc_sha256 *hash, unsigned char digest[32])
{
    uint64_t bit_length = hash->total_bytes * 8;
    /* Padding: a 1 bit, zeros up to 56 mod 64 bytes, then the length. */
    unsigned char padding[72] = {0x80};
    size_t pad = (hash->block_used < 56 ? 56 : 120) - hash->block_used;
    for (int i = 0; i < 8; i++)
        padding[pad + i] = (unsigned char)(bit_length >> (56 - 8 * i));
    uint64_t total = hash->total_bytes;
    tfenc_sha256_update(hash, padding, pad + 8);
    hash->total_bytes = total;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++)
            digest[4 * i + j] = (unsigned char)(hash->state[i] >> (24 - 8 * j));
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
    tfenc_sha256 hash;
    unsigned char digest[32];
    tfenc_sha256_init(&hash);
    tfenc_sha256_update(&hash, data, size);
    tfenc_sha256_final(&hash, digest);
    to_hex(digest, hex);
}

int tfenc_sha256_file(tfenc_context *ctx, const char *path, char hex[65])
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open for the checksum: %s", path,
                           strerror(errno));
    unsigned char buffer[1 << 16];
    tfenc_sha256 hash;
    tfenc_sha256_init(&hash);
    size_t got;
    while ((got = fread(buffer, 1, sizeof buffer, file)) > 0)
        tfenc_sha256_update(&hash, buffer, got);
    int failed = ferror(file);
    int saved_errno = errno;
    fclose(file);
    if (failed)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: read error while computing the checksum: %s",
                           path, strerror(saved_errno));
    unsigned char digest[32];
    tfenc_sha256_final(&hash, digest);
    to_hex(digest, hex);
    return TFENC_OK;
}
