/* File fingerprints: a hash of block hashes, computed in parallel. */
#include "output/fingerprint.h"

#include "base/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK_BYTES ((int64_t)4 << 20)

/* Hashes block `index` of the open file into digest. */
static int hash_block(tfenc_context *ctx, const char *path, int fd, int64_t index, int64_t size,
                      unsigned char *buffer, unsigned char digest[32])
{
    int64_t start = index * BLOCK_BYTES;
    int64_t length = size - start < BLOCK_BYTES ? size - start : BLOCK_BYTES;
    int64_t done = 0;
    while (done < length) {
        ssize_t got = pread(fd, buffer + done, (size_t)(length - done), (off_t)(start + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read bytes %lld..%lld to "
                               "fingerprint it: %s", path, (long long)(start + done),
                               (long long)(start + length),
                               got < 0 ? strerror(errno) : "the file got shorter");
        done += got;
    }
    tfenc_sha256_digest(buffer, (size_t)length, digest);
    return TFENC_OK;
}

int tfenc_fingerprint_file(tfenc_context *ctx, MPI_Comm comm, const char *path, char hex[65])
{
    hex[0] = '\0';
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n_ranks);
    int status = TFENC_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat file;
    if (fd < 0 || fstat(fd, &file) != 0)
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open to fingerprint it: %s", path,
                             strerror(errno));
    else if (!S_ISREG(file.st_mode))
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: not a regular file, cannot fingerprint it",
                             path);
    /* Every rank must agree on the size, or they hash different blocks. */
    int64_t size = status == TFENC_OK ? (int64_t)file.st_size : -1, smallest = 0, largest = 0;
    MPI_Allreduce(&size, &smallest, 1, MPI_INT64_T, MPI_MIN, comm);
    MPI_Allreduce(&size, &largest, 1, MPI_INT64_T, MPI_MAX, comm);
    if (status == TFENC_OK && smallest != largest)
        status = tfenc_error(ctx, TFENC_ERR_IO, smallest < 0 ? "%s: another rank cannot read it"
                                                             : "%s: its size differs between "
                                                               "ranks (is it being written?)",
                             path);
    const int64_t n_blocks = size > 0 ? (size + BLOCK_BYTES - 1) / BLOCK_BYTES : 0;
    unsigned char *digests = status == TFENC_OK ? calloc((size_t)n_blocks + 1, 32) : NULL;
    unsigned char *buffer = status == TFENC_OK ? malloc((size_t)BLOCK_BYTES) : NULL;
    if (status == TFENC_OK && (digests == NULL || buffer == NULL))
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory to fingerprint it",
                             path);
    for (int64_t b = rank; status == TFENC_OK && b < n_blocks; b += n_ranks)
        status = hash_block(ctx, path, fd, b, size, buffer, digests + 32 * b);
    free(buffer);
    if (fd >= 0)
        close(fd);
    int failed = status != TFENC_OK, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, comm);
    if (any_failed) {
        free(digests);
        return failed ? status
                      : tfenc_error(ctx, TFENC_ERR_IO, "%s: another rank could not read it",
                                    path);
    }
    /* Each block's digest is written by one rank; the others hold zeros. */
    if (n_blocks > 0)
        MPI_Allreduce(MPI_IN_PLACE, digests, (int)(32 * n_blocks), MPI_BYTE, MPI_BOR, comm);
    /* The size first, then every block's digest in order. */
    char header[32];
    int header_length = snprintf(header, sizeof header, "%lld\n", (long long)size);
    unsigned char *message = malloc((size_t)header_length + 32 * (size_t)n_blocks);
    if (message == NULL) {
        free(digests);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory to fingerprint it", path);
    }
    memcpy(message, header, (size_t)header_length);
    memcpy(message + header_length, digests, 32 * (size_t)n_blocks);
    unsigned char digest[32];
    tfenc_sha256_digest(message, (size_t)header_length + 32 * (size_t)n_blocks, digest);
    free(message);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    free(digests);
    return TFENC_OK;
}

int tfenc_fingerprint_sources(tfenc_context *ctx, MPI_Comm comm, const char *const *paths, int n,
                              char hex[65], char (*each)[65])
{
    hex[0] = '\0';
    if (n == 1) {
        int status = tfenc_fingerprint_file(ctx, comm, paths[0], hex);
        memcpy(each[0], hex, 65);
        return status;
    }
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n_ranks);
    memset(each, 0, (size_t)n * 65);
    int status = TFENC_OK;
    for (int i = rank; status == TFENC_OK && i < n; i += n_ranks)
        status = tfenc_fingerprint_file(ctx, MPI_COMM_SELF, paths[i], each[i]);
    int failed = status != TFENC_OK, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, comm);
    if (any_failed)
        return failed ? status
                      : tfenc_error(ctx, TFENC_ERR_IO, "another rank could not fingerprint one "
                                    "of the corpus's %d files", n);
    /* Each file's fingerprint is written by one rank; the others hold zeros. */
    MPI_Allreduce(MPI_IN_PLACE, each, n * 65, MPI_BYTE, MPI_BOR, comm);
    tfenc_sha256 hash;
    if (tfenc_sha256_init(&hash) != TFENC_OK)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory to fingerprint the corpus");
    for (int i = 0; i < n; i++) {
        /* The name without its directory: the corpus is the same however
         * its directory is reached (core/input/sources.h). */
        const char *slash = strrchr(paths[i], '/'), *name = slash != NULL ? slash + 1 : paths[i];
        tfenc_sha256_update(&hash, name, strlen(name) + 1);
        tfenc_sha256_update(&hash, each[i], 64);
    }
    unsigned char digest[32];
    tfenc_sha256_final(&hash, digest);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return TFENC_OK;
}
