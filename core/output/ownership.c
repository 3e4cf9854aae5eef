/* Output ownership: the lock file and the identity check. */
#include "output/ownership.h"

#include "base/files.h"
#include "output/sparse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* What a lock file holds, so that a file that is not one is never written. */
#define LOCK_HEADER "tfenc-batch lock\n"

struct tfenc_output_lock {
    int fd;       /* the lock file's */
    char *path;   /* the lock file */
    int file_fd;  /* the output's own, locked at IDENTITY_BYTE */
    char *output; /* the output with its symbolic links resolved */
    int created;  /* the output did not exist: this lock made it (empty) */
    int holds_lock_file, holds_file; /* what is this job's to undo */
};

/* The byte of the output itself that a job locks: far beyond any data, so
 * that the byte-range locks MPI-IO takes on the data it writes never meet
 * it. A lock on the file, not on a name, is what a second job reaching the
 * file through a hard link finds. */
#define IDENTITY_BYTE ((off_t)1 << 62)

/* Who holds the output, kept with the file itself (an extended attribute)
 * so that a job that reaches it under another name can say whose it is. */
#define HOLDER_ATTRIBUTE "user.tfenc.writer"

/* Longest chain of symbolic links followed, as the kernel's. */
#define MAX_LINKS 40

/* `path` with every symbolic link resolved, also in its last component and
 * also when that component leads nowhere yet (a dangling link to an output
 * about to be made): two jobs that write one file through different names
 * meet at one lock file. A directory that cannot be resolved leaves the
 * path as it is (the create that follows says why). NULL: out of memory. */
static char *canonical_path(const char *path)
{
    char *current = strdup(path);
    for (int hop = 0; current != NULL && hop < MAX_LINKS; hop++) {
        struct stat link;
        char target[PATH_MAX];
        ssize_t length;
        if (lstat(current, &link) != 0 || !S_ISLNK(link.st_mode) ||
            (length = readlink(current, target, sizeof target - 1)) < 0)
            break;
        target[length] = '\0';
        const char *slash = strrchr(current, '/');
        size_t keep = target[0] == '/' || slash == NULL ? 0 : (size_t)(slash - current) + 1;
        char *next = malloc(keep + (size_t)length + 1);
        if (next != NULL) {
            memcpy(next, current, keep);
            memcpy(next + keep, target, (size_t)length + 1);
        }
        free(current);
        current = next;
    }
    if (current == NULL)
        return NULL;
    char *resolved = tfenc_file_located_path(current);
    free(current);
    return resolved;
}

static char *lock_path(const char *output_path)
{
    char *canonical = canonical_path(output_path);
    size_t size = canonical != NULL ? strlen(canonical) + sizeof ".lock" : 0;
    char *path = canonical != NULL ? malloc(size) : NULL;
    if (path != NULL)
        snprintf(path, size, "%s.lock", canonical);
    free(canonical);
    return path;
}

/* The holder's line, as its lock file says, for the refusal. */
static void read_holder(int fd, char *holder, size_t size)
{
    char text[PATH_MAX + 512] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    const char *line = strncmp(text, LOCK_HEADER, strlen(LOCK_HEADER)) == 0
                           ? text + strlen(LOCK_HEADER)
                           : "";
    snprintf(holder, size, "%.*s", (int)strcspn(line, "\n"), line);
}

/* "in use by another tfenc-batch job (HOLDER)": one line for both locks. */
static int refuse_held(tfenc_context *ctx, const char *output_path, const char *holder,
                       const char *how)
{
    return tfenc_error(ctx, TFENC_ERR_CONFIG,
                       "%s: in use by another tfenc-batch job (%s)%s; a file has one writing "
                       "job at a time: wait for it, or choose another output",
                       output_path, holder[0] != '\0' ? holder : "holder unknown", how);
}

/* The lock on the output file itself (IDENTITY_BYTE), which a job writing
 * it under any other name (a hard link) meets. The file is made empty when
 * it does not exist, so that it is locked before HDF5 creates it; the
 * release removes it again if nothing was written. */
static int lock_output_file(tfenc_context *ctx, tfenc_output_lock *lock, const char *output_path,
                            const char *holder_line)
{
    lock->file_fd = open(lock->output, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (lock->file_fd < 0 && errno == ENOENT) {
        lock->file_fd = open(lock->output, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK,
                             0644);
        lock->created = lock->file_fd >= 0;
    }
    struct stat file;
    if (lock->file_fd < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open it for writing: %s", output_path,
                           strerror(errno));
    if (fstat(lock->file_fd, &file) != 0 || !S_ISREG(file.st_mode))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: is not a regular file", output_path);
    struct flock region = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = IDENTITY_BYTE,
                           .l_len = 1};
    if (fcntl(lock->file_fd, F_OFD_SETLK, &region) != 0) {
        int error = errno;
        /* A file system whose locks stop short of IDENTITY_BYTE: the lock
         * file still guards every name that leads to the output. */
        if (error == EINVAL || error == EOVERFLOW)
            return TFENC_OK;
        if (error != EAGAIN && error != EACCES)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot lock it: %s", output_path,
                               strerror(error));
        char holder[PATH_MAX + 256] = "";
        ssize_t got = fgetxattr(lock->file_fd, HOLDER_ATTRIBUTE, holder, sizeof holder - 1);
        holder[got > 0 ? got : 0] = '\0';
        return refuse_held(ctx, output_path, holder, ", the same file under another name");
    }
    lock->holds_file = 1;
    /* Best effort: a file system without user attributes only loses the
     * holder's name in the other job's refusal. */
    fsetxattr(lock->file_fd, HOLDER_ATTRIBUTE, holder_line, strlen(holder_line), 0);
    return TFENC_OK;
}

static void release_output_file(tfenc_output_lock *lock)
{
    if (lock->file_fd < 0)
        return;
    struct stat file;
    /* Made by the lock (O_EXCL) and never written: a job that failed
     * before its output existed leaves none. */
    if (lock->created && fstat(lock->file_fd, &file) == 0 && file.st_size == 0)
        unlink(lock->output);
    else if (lock->holds_file)
        fremovexattr(lock->file_fd, HOLDER_ATTRIBUTE);
    close(lock->file_fd);
    lock->file_fd = -1;
}

int tfenc_output_lock_take(tfenc_context *ctx, const char *output_path, tfenc_output_lock **out)
{
    *out = NULL;
    tfenc_output_lock *lock = calloc(1, sizeof *lock);
    if (lock != NULL)
        lock->file_fd = lock->fd = -1;
    if (lock == NULL || (lock->output = canonical_path(output_path)) == NULL ||
        (lock->path = lock_path(output_path)) == NULL) {
        if (lock != NULL)
            free(lock->output);
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
            char holder[PATH_MAX + 256];
            read_holder(lock->fd, holder, sizeof holder);
            if (error == EAGAIN || error == EACCES)
                status = refuse_held(ctx, output_path, holder, "");
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
    /* Ours to remove at the end only once it is known to be a lock file:
     * someone's file under that name must survive the refusal. */
    lock->holds_lock_file = status == TFENC_OK;
    char line[PATH_MAX + 512];
    if (status == TFENC_OK) {
        char host[256] = "?", started[32] = "";
        gethostname(host, sizeof host - 1);
        time_t now = time(NULL);
        struct tm utc;
        gmtime_r(&now, &utc);
        strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &utc);
        /* The output by its resolved name: a job that reaches it through a
         * link learns which file it is. */
        snprintf(line, sizeof line, "host %s, pid %ld, since %s, writing %s", host,
                 (long)getpid(), started, lock->output);
        char text[sizeof line + sizeof LOCK_HEADER + 1];
        int length = snprintf(text, sizeof text, "%s%s\n", LOCK_HEADER, line);
        if (ftruncate(lock->fd, 0) != 0 || pwrite(lock->fd, text, (size_t)length, 0) != length)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write the lock file %s: %s",
                                 output_path, lock->path, strerror(errno));
    }
    /* Before anything truncates the output: the file itself, whatever its
     * names. */
    if (status == TFENC_OK)
        status = lock_output_file(ctx, lock, output_path, line);
    if (status != TFENC_OK) {
        tfenc_output_lock_release(lock);
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
    struct flock region = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    int held = fd >= 0 && fcntl(fd, F_OFD_GETLK, &region) == 0 && region.l_type != F_UNLCK;
    if (held && holder != NULL)
        read_holder(fd, holder, holder_size);
    if (fd >= 0)
        close(fd);
    if (held)
        return 1;
    /* A job writing the same file under another name holds the file. */
    fd = open(output_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat file;
    if (fd < 0)
        return 0;
    region = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = IDENTITY_BYTE,
                            .l_len = 1};
    held = fstat(fd, &file) == 0 && S_ISREG(file.st_mode) &&
           fcntl(fd, F_OFD_GETLK, &region) == 0 && region.l_type != F_UNLCK;
    if (held && holder != NULL) {
        ssize_t got = fgetxattr(fd, HOLDER_ATTRIBUTE, holder, holder_size - 1);
        holder[got > 0 ? got : 0] = '\0';
    }
    close(fd);
    return held;
}

void tfenc_output_lock_release(tfenc_output_lock *lock)
{
    if (lock == NULL)
        return;
    release_output_file(lock);
    /* Removed while still held, so no other job can take a lock on the
     * file we are about to delete. */
    if (lock->holds_lock_file)
        unlink(lock->path);
    if (lock->fd >= 0)
        close(lock->fd);
    free(lock->path);
    free(lock->output);
    free(lock);
}

/* What the file at `path` is to another output, when it is one of the
 * files tfenc-batch keeps beside an output (its lock file, a sparse rows'
 * log), else NULL: whatever its name, a job must not take it as its output. */
static const char *side_file_kind(const char *path)
{
    if (tfenc_sparse_is_log(path))
        return "the sparse rows' log of an output (kept beside it until its job completes, "
               "also for a resume)";
    struct stat file;
    char header[sizeof LOCK_HEADER] = "";
    int fd = stat(path, &file) == 0 && S_ISREG(file.st_mode)
                 ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
                 : -1;
    int is_lock = fd >= 0 && pread(fd, header, strlen(LOCK_HEADER), 0) ==
                                 (ssize_t)strlen(LOCK_HEADER) &&
                  memcmp(header, LOCK_HEADER, strlen(LOCK_HEADER)) == 0;
    if (fd >= 0)
        close(fd);
    return is_lock ? "the lock file of an output (held while its job runs)" : NULL;
}

/* The files that belong to an output besides itself, for the comparison
 * with the inputs: its lock file, then its sparse rows' logs. */
typedef struct side_files {
    char **paths;
    int n;
    int out_of_memory;
} side_files;

static int add_side_file(const char *path, void *user)
{
    side_files *files = user;
    char **grown = realloc(files->paths, ((size_t)files->n + 1) * sizeof *grown);
    if (grown != NULL)
        files->paths = grown;
    if (grown == NULL || (files->paths[files->n] = strdup(path)) == NULL) {
        files->out_of_memory = 1;
        return -1;
    }
    files->n++;
    return 0;
}

int tfenc_output_check_not_input(tfenc_context *ctx, const char *output_path,
                                 const tfenc_input_file *inputs, int n_inputs)
{
    side_files sides = {NULL, 0, 0};
    char *lock = lock_path(output_path);
    int status = lock == NULL || add_side_file(lock, &sides) != 0
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                     : TFENC_OK;
    free(lock);
    struct stat target;
    const char *side_kind = NULL;
    /* Writing HDF5 into a device, a FIFO or a directory is never meant. */
    if (status == TFENC_OK && stat(output_path, &target) == 0 && !S_ISREG(target.st_mode))
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: exists and %s; the output must be a new or a regular file",
                             output_path, tfenc_file_kind(target.st_mode));
    else if (status == TFENC_OK && (side_kind = side_file_kind(output_path)) != NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: is %s; refusing to overwrite it: "
                             "choose another output", output_path, side_kind);
    /* A missing directory lists nothing: the create says why later. */
    if (status == TFENC_OK)
        tfenc_sparse_each_log(output_path, add_side_file, &sides);
    if (sides.out_of_memory)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int c = -1; c < sides.n && status == TFENC_OK; c++) {
        const char *candidate = c < 0 ? output_path : sides.paths[c];
        for (int i = 0; i < n_inputs && status == TFENC_OK; i++)
            if (inputs[i].path != NULL && tfenc_file_same(candidate, inputs[i].path))
                status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                     "%s: %s%s is the same file as %s %s; refusing to "
                                     "overwrite an input",
                                     output_path,
                                     c < 0 ? "the output" : c == 0 ? "its lock file" :
                                     "its sparse rows' log ",
                                     c > 0 ? candidate : "", inputs[i].what, inputs[i].path);
    }
    for (int c = 0; c < sides.n; c++)
        free(sides.paths[c]);
    free(sides.paths);
    return status;
}
