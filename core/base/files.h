/* The files a job names: the checks every reader applies before it reads,
 * and file identity.
 *
 * Every file tfenc reads for a job (the job file, the corpus, the weights,
 * the vocabulary, plugins) must be a regular file, or a symbolic link to
 * one. A FIFO or socket would block the reader forever (or until a writer
 * shows up), a device such as /dev/zero never ends, a directory cannot be
 * read, and the corpus is split into byte ranges, which only a regular file
 * has. So they are refused in one line naming the setting and the path,
 * before anything is read and without ever blocking. /dev/stdin (and
 * /dev/fd/N) is accepted exactly when it refers to a regular file, as with
 * `tfenc-batch job.ini < corpus.txt` and `input = /dev/stdin`; a pipe into
 * stdin is refused like any FIFO.
 *
 * Identity is what the kernel says, not the spelling: two paths name the
 * same file when, after following symbolic links, they have the same device
 * and inode (so ./x, x, a symlink to x, a hard link to x and /dev/stdin
 * redirected from x all name the same file). */
#ifndef TFENC_FILES_H
#define TFENC_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "tfenc/plugin.h"

/* Opens `path` for reading and checks it is a regular file. `what` names the
 * setting in messages, e.g. "[job] input" or "job file": a refusal reads
 * "WHAT PATH: is a FIFO or pipe, not a regular file (...)". The file is
 * opened with O_NONBLOCK, so that a FIFO without writer cannot block, and
 * checked with fstat on the open descriptor (no window between the check and
 * the read); the stream returned reads in the normal, blocking way. */
int tfenc_file_open_regular(tfenc_context *ctx, const char *what, const char *path, FILE **file);

/* The descriptor-level form, for readers that need the descriptor and its
 * status (the plugin loader): opens `path` as above and returns the
 * descriptor with *info filled, or -1 with the reason, without the path, in
 * `why` (e.g. "is a directory, not a regular file"). */
int tfenc_file_open_regular_descriptor(const char *path, struct stat *info, char *why,
                                       size_t why_size);

/* Reads the whole of `path`, opened and checked as tfenc_file_open_regular
 * does, into a malloc'ed buffer with a NUL after its *size bytes. A file of
 * more than `max_bytes` is refused ("WHAT PATH: larger than N MiB: not a
 * WHAT"): every reader of a whole file (job files, vocabularies, JSON
 * configurations) has a cap, so that a wrong path to a huge file cannot eat
 * all memory. */
int tfenc_file_read_all(tfenc_context *ctx, const char *what, const char *path, size_t max_bytes,
                        char **data, size_t *size);

/* pread() until all `size` bytes at `offset` of `fd` arrived (a short read
 * is not an error by itself, nor EINTR): 0, or the errno, EIO when the file
 * ends first. For readers of large files by offset (safetensors, torch.save
 * files). */
int tfenc_file_read_at(int fd, void *buffer, size_t size, uint64_t offset);
/* write() until all `size` bytes are written (short writes and EINTR
 * retried): 0, or the errno (ENOSPC, EIO...). */
int tfenc_file_write_all(int fd, const void *buffer, size_t size);

/* 1 when something is at `path` (a file of any kind, or a symbolic link,
 * even a dangling one); 0 only when nothing is. Optional inputs are absent
 * only when nothing is there: a FIFO or directory where a file belongs is
 * opened and refused for what it is, never taken as "absent". */
int tfenc_file_present(const char *path);

/* What a file that is not a regular file is, as a phrase for messages:
 * "is a directory", "is a FIFO or pipe (...)", "is a character device
 * (...)". */
const char *tfenc_file_kind(mode_t mode);

/* The same check for a file that another library opens by name (HDF5): a
 * stat(), which never blocks, of the file the path leads to. */
int tfenc_file_check_regular(tfenc_context *ctx, const char *what, const char *path);

/* A file as the kernel knows it. */
typedef struct tfenc_file_id {
    dev_t device;
    ino_t inode;
} tfenc_file_id;

/* The identity of the file `path` leads to after symbolic links. Returns
 * TFENC_OK, or TFENC_ERR_NOT_FOUND when it does not exist (or cannot be
 * looked at); records no message. */
int tfenc_file_identity(const char *path, tfenc_file_id *id);

/* 1 when both paths lead to the same existing file, else 0 (also when either
 * does not exist: a file about to be created is no other file). */
int tfenc_file_same(const char *a, const char *b);

/* `path` as an absolute path whose directory is resolved (realpath(3)) and
 * whose last component is kept as it is: the same string however the path
 * was spelled (./a, a, dir/../dir/a, through a link to a directory, from
 * any working directory), while a symbolic link keeps its own name (a
 * directory of links, such as a download cache, is listed by the links'
 * names). A directory that cannot be resolved leaves a copy of the path
 * as it is (the open that follows says why). NULL: out of memory. */
char *tfenc_file_located_path(const char *path);

/* For a file about to be created at `path`: the bytes free for it on the
 * file system of its directory, or -1 when the directory cannot be examined
 * (missing: the create that follows says why better). Refuses, naming
 * `what` and the path, a file system that holds no data blocks at all
 * (procfs, sysfs and the like, which cannot store a file). */
int tfenc_file_free_space(tfenc_context *ctx, const char *what, const char *path,
                          double *bytes);

#endif
