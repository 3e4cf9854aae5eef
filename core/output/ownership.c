/* Output ownership: the lock file and the identity check. */
#include "output/ownership.h"

#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What a lock file holds, so that a file that is not one is never written. */
#define LOCK_HEADER "tfenc-batch lock\n"

struct tfenc_output_lock {
    int fd;
    char *path;
};

static char *lock_path(const char *output_path)
{
    size_t size = strlen(output_path) + sizeof ".lock";
    char *path = malloc(size);
    if (path != NULL)
        snprintf(path, size, "%s.lock", output_path);
    return path;
}

/* The holder's line, as its lock file says, for the refusal. */
static void read_holder(int fd, char *holder, size_t size)
{
    char text[512] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    const char *line = strncmp(text, LOCK_HEADER, strlen(LOCK_HEADER)) == 0
                           ? text + strlen(LOCK_HEADER)
                           : "";
    snprintf(holder, size, "%.*s", (int)strcspn(line, "\n"), line);
}

int tfenc_output_lock_take(tfenc_context *ctx, const char *output_path, tfenc_output_lock **out)
{
    *out = NULL;
    tfenc_output_lock *lock = calloc(1, sizeof *lock);
    if (lock == NULL || (lock->path = lock_path(output_path)) == NULL) {
        free(lock);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    /* O_NOFOLLOW: a symbolic link planted as the lock file is refused
     * rather than followed to a file this job would then write. */
    lock->fd = open(lock->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat file;
    int status = TFENC_OK;
    if (lock->fd < 0) {
        int error = errno;
        /* A file system that holds no files at all (/proc) is the reason to
         * give, not the lock file it could not hold (core/base/files.h). */
        double free_bytes;
        status = tfenc_file_free_space(ctx, "[job] output", output_path, &free_bytes);
        if (status == TFENC_OK)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create the lock file %s: %s",
                                 output_path, lock->path, strerror(error));
    }
    else if (fstat(lock->fd, &file) != 0 || !S_ISREG(file.st_mode))
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: the lock file %s is not a regular file",
                             output_path, lock->path);
    if (status == TFENC_OK) {
        /* Open file description locks: held by this open file, not by the
         * process (so no other close in the process drops it), and they
         * work over NFS. */
        struct flock region = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        if (fcntl(lock->fd, F_OFD_SETLK, &region) != 0) {
            int error = errno;
            char holder[256];
            read_holder(lock->fd, holder, sizeof holder);
            if (error == EAGAIN || error == EACCES)
                status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                     "%s: in use by another tfenc-batch job (%s); a file has "
                                     "one writing job at a time: wait for it, or choose "
                                     "another output",
                                     output_path, holder[0] != '\0' ? holder : "holder unknown");
            else
                status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot lock %s: %s", output_path,
                                     lock->path, strerror(error));
        }
    }
    if (status == TFENC_OK && file.st_size > 0) {
        char header[sizeof LOCK_HEADER] = "";
        ssize_t got = pread(lock->fd, header, strlen(LOCK_HEADER), 0);
        if (got != (ssize_t)strlen(LOCK_HEADER) || memcmp(header, LOCK_HEADER, (size_t)got) != 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s exists and is not a tfenc lock "
                                 "file; refusing to overwrite it", output_path, lock->path);
    }
    if (status == TFENC_OK) {
        char host[256] = "?", started[32] = "";
        gethostname(host, sizeof host - 1);
        time_t now = time(NULL);
        struct tm utc;
        gmtime_r(&now, &utc);
        strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &utc);
        char text[512];
        int length = snprintf(text, sizeof text, "%shost %s, pid %ld, since %s\n", LOCK_HEADER,
                              host, (long)getpid(), started);
        if (ftruncate(lock->fd, 0) != 0 || pwrite(lock->fd, text, (size_t)length, 0) != length)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write the lock file %s: %s",
                                 output_path, lock->path, strerror(errno));
    }
    if (status != TFENC_OK) {
        if (lock->fd >= 0)
            close(lock->fd);
        free(lock->path);
        free(lock);
        return status;
    }
    *out = lock;
    return TFENC_OK;
}

int tfenc_output_lock_held(const char *output_path, char *holder, size_t holder_size)
{
    char *path = lock_path(output_path);
    int fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
    free(path);
    if (fd < 0)
        return 0;
    struct flock region = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    int held = fcntl(fd, F_OFD_GETLK, &region) == 0 && region.l_type != F_UNLCK;
    if (held && holder != NULL)
        read_holder(fd, holder, holder_size);
    close(fd);
    return held;
}

void tfenc_output_lock_release(tfenc_output_lock *lock)
{
    if (lock == NULL)
        return;
    /* Removed while still held, so no other job can take a lock on the
     * file we are about to delete. */
    unlink(lock->path);
    close(lock->fd);
    free(lock->path);
    free(lock);
}

int tfenc_output_check_not_input(tfenc_context *ctx, const char *output_path,
                                 const tfenc_input_file *inputs, int n_inputs)
{
    char *lock = lock_path(output_path);
    if (lock == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    const char *candidates[2] = {output_path, lock};
    int status = TFENC_OK;
    struct stat target;
    /* Writing HDF5 into a device, a FIFO or a directory is never meant. */
    if (stat(output_path, &target) == 0 && !S_ISREG(target.st_mode))
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: exists and %s; the output must be a new or a regular file",
                             output_path, tfenc_file_kind(target.st_mode));
    for (int c = 0; c < 2 && status == TFENC_OK; c++)
        for (int i = 0; i < n_inputs && status == TFENC_OK; i++)
            if (inputs[i].path != NULL && tfenc_file_same(candidates[c], inputs[i].path))
                status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                     "%s: %s is the same file as %s %s; refusing to overwrite "
                                     "an input",
                                     output_path, c == 0 ? "the output" : "its lock file",
                                     inputs[i].what, inputs[i].path);
    free(lock);
    return status;
}
