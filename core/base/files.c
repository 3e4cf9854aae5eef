/* Checks on the files a job names, and file identity: open without blocking,
 * refuse what is not a regular file, compare files by device and inode. */
#include "base/files.h"
#include "base/context.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

const char *tfenc_file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "is a directory";
    if (S_ISFIFO(mode))
        return "is a FIFO or pipe (reading it would wait for a writer)";
    if (S_ISSOCK(mode))
        return "is a socket";
    if (S_ISCHR(mode))
        return "is a character device (such as /dev/zero, whose data never ends)";
    if (S_ISBLK(mode))
        return "is a block device";
    return "is not a regular file";
}

static int refuse_kind(tfenc_context *ctx, const char *what, const char *path, mode_t mode)
{
    return tfenc_error(ctx, TFENC_ERR_IO, "%s %s: %s, not a regular file", what, path,
                       tfenc_file_kind(mode));
}

int tfenc_file_open_regular_descriptor(const char *path, struct stat *info, char *why,
                                       size_t why_size)
{
    /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer.
     * O_NOCTTY: a terminal named by mistake must not become ours. */
    int descriptor = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (descriptor < 0) {
        int error = errno;
        /* A socket cannot be opened at all (ENXIO): say what it is. */
        if (stat(path, info) == 0 && !S_ISREG(info->st_mode))
            snprintf(why, why_size, "%s, not a regular file", tfenc_file_kind(info->st_mode));
        else
            snprintf(why, why_size, "cannot open: %s", strerror(error));
        return -1;
    }
    if (fstat(descriptor, info) != 0) {
        snprintf(why, why_size, "cannot examine: %s", strerror(errno));
        close(descriptor);
        return -1;
    }
    if (!S_ISREG(info->st_mode)) {
        snprintf(why, why_size, "%s, not a regular file", tfenc_file_kind(info->st_mode));
        close(descriptor);
        return -1;
    }
    /* Regular files never block; clearing the flag keeps later reads plain. */
    int flags = fcntl(descriptor, F_GETFL);
    if (flags < 0 || fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        snprintf(why, why_size, "cannot open: %s", strerror(errno));
        close(descriptor);
        return -1;
    }
    return descriptor;
}

int tfenc_file_open_regular(tfenc_context *ctx, const char *what, const char *path, FILE **file)
{
    *file = NULL;
    struct stat info;
    char why[256];
    int descriptor = tfenc_file_open_regular_descriptor(path, &info, why, sizeof why);
    if (descriptor < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s %s: %s", what, path, why);
    if ((*file = fdopen(descriptor, "rb")) == NULL) {
        int error = errno;
        close(descriptor);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s %s: cannot open: %s", what, path,
                           strerror(error));
    }
    return TFENC_OK;
}

int tfenc_file_read_at(int fd, void *buffer, size_t size, uint64_t offset)
{
    unsigned char *bytes = buffer;
    while (size > 0) {
        ssize_t n = pread(fd, bytes, size, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? EIO : errno;
        bytes += n;
        size -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

int tfenc_file_write_all(int fd, const void *buffer, size_t size)
{
    const unsigned char *bytes = buffer;
    while (size > 0) {
        ssize_t n = write(fd, bytes, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? EIO : errno;
        bytes += n;
        size -= (size_t)n;
    }
    return 0;
}

int tfenc_file_read_all(tfenc_context *ctx, const char *what, const char *path, size_t max_bytes,
                        char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    struct stat info;
    char why[256];
    int descriptor = tfenc_file_open_regular_descriptor(path, &info, why, sizeof why);
    if (descriptor < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s %s: %s", what, path, why);
    const double mib = (double)max_bytes / (1024.0 * 1024.0);
    if ((uintmax_t)info.st_size > max_bytes) {
        close(descriptor);
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s %s: larger than %g MiB: not a %s", what,
                           path, mib, what);
    }
    /* The size is a hint: the file may grow while it is read, so the loop
     * stops at the cap whatever fstat said. */
    size_t capacity = (size_t)info.st_size + 1, used = 0;
    char *buffer = malloc(capacity + 1);
    int status = buffer != NULL ? TFENC_OK
                                : tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                                              "%s %s: out of memory (%zu bytes)", what, path,
                                              capacity);
    while (status == TFENC_OK) {
        ssize_t got = read(descriptor, buffer + used, capacity - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s %s: cannot read: %s", what, path,
                                 strerror(errno));
            break;
        }
        if (got == 0)
            break;
        used += (size_t)got;
        if (used > max_bytes) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s %s: larger than %g MiB: not a %s",
                                 what, path, mib, what);
            break;
        }
        if (used == capacity) {
            size_t grown_capacity = capacity * 2 < max_bytes + 1 ? capacity * 2 : max_bytes + 1;
            char *grown = realloc(buffer, grown_capacity + 1);
            if (grown == NULL) {
                status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s %s: out of memory", what,
                                     path);
                break;
            }
            buffer = grown;
            capacity = grown_capacity;
        }
    }
    close(descriptor);
    if (status != TFENC_OK) {
        free(buffer);
        return status;
    }
    buffer[used] = '\0';
    *data = buffer;
    *size = used;
    return TFENC_OK;
}

int tfenc_file_present(const char *path)
{
    struct stat info;
    return lstat(path, &info) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

int tfenc_file_check_regular(tfenc_context *ctx, const char *what, const char *path)
{
    struct stat info;
    if (stat(path, &info) != 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s %s: cannot open: %s", what, path,
                           strerror(errno));
    if (!S_ISREG(info.st_mode))
        return refuse_kind(ctx, what, path, info.st_mode);
    return TFENC_OK;
}

int tfenc_file_identity(const char *path, tfenc_file_id *id)
{
    struct stat info;
    if (path == NULL || stat(path, &info) != 0)
        return TFENC_ERR_NOT_FOUND;
    id->device = info.st_dev;
    id->inode = info.st_ino;
    return TFENC_OK;
}

int tfenc_file_same(const char *a, const char *b)
{
    tfenc_file_id first, second;
    return tfenc_file_identity(a, &first) == TFENC_OK &&
           tfenc_file_identity(b, &second) == TFENC_OK && first.device == second.device &&
           first.inode == second.inode;
}

char *tfenc_file_located_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *directory = slash == NULL ? strdup(".")
                      : slash == path ? strdup("/")
                                      : strndup(path, (size_t)(slash - path));
    const char *name = slash != NULL ? slash + 1 : path;
    char *real = directory != NULL ? realpath(directory, NULL) : NULL;
    free(directory);
    if (real == NULL)
        return strdup(path);
    size_t size = strlen(real) + strlen(name) + 2;
    char *located = malloc(size);
    if (located != NULL)
        snprintf(located, size, "%s%s%s", real, strcmp(real, "/") == 0 ? "" : "/", name);
    free(real);
    return located;
}

int tfenc_file_free_space(tfenc_context *ctx, const char *what, const char *path, double *bytes)
{
    *bytes = -1.0;
    char *directory = strdup(path);
    if (directory == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    char *slash = strrchr(directory, '/');
    if (slash == NULL)
        strcpy(directory, ".");
    else if (slash == directory)
        slash[1] = '\0';
    else
        *slash = '\0';
    int status = TFENC_OK;
    struct statvfs space;
    /* A directory that cannot be examined is left to the create, whose
     * message (HDF5's) says why it cannot make the file there. */
    if (statvfs(directory, &space) == 0) {
        /* procfs and sysfs report no blocks at all: they present the
         * kernel's state as files and cannot store one, so "0 MiB free"
         * would mislead. */
        if (space.f_blocks == 0)
            status = tfenc_error(ctx, TFENC_ERR_IO,
                                 "%s %s: %s is on a file system that cannot hold files (it has "
                                 "no data blocks, as /proc and /sys); choose another directory",
                                 what, path, directory);
        else
            *bytes = (double)space.f_bavail * (double)space.f_frsize;
    }
    free(directory);
    return status;
}
