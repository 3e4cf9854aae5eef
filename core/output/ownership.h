/* Owning an output file. A job holds its output exclusively from before it
 * creates, truncates or reopens it until it ends: a second job writing the
 * same file at the same time would leave rows of two corpora in one file
 * marked complete (HDF5's own lock does not cover MPI-IO). Ownership is two
 * fcntl locks taken by one rank and held to the end: one on a lock file
 * beside the output with its symbolic links resolved (OUTPUT.lock), which
 * names its holder (host, pid, start time, the output's resolved path) for
 * the refusal; and one on the output file itself, on a byte beyond any
 * data, which a job reaching the file through another name (a hard link)
 * meets. The kernel drops them when the process dies, so a killed job never
 * leaves a stale lock.
 *
 * And an output is never one of the job's inputs under another name: paths
 * are compared by file identity (device and inode, symbolic links
 * followed), not by spelling. */
#ifndef TFENC_OWNERSHIP_H
#define TFENC_OWNERSHIP_H

#include <stddef.h>

#include "tfenc/plugin.h"

typedef struct tfenc_output_lock tfenc_output_lock;

/* Takes the locks of `output_path` for this process, making the output
 * (empty) when it does not exist; releasing removes it again while it is
 * empty. TFENC_ERR_CONFIG naming the holder and the file it writes when
 * another job holds either; TFENC_ERR_IO when the lock file cannot be made
 * (say, a read-only directory). */
int tfenc_output_lock_take(tfenc_context *ctx, const char *output_path, tfenc_output_lock **lock);

/* 1 when a job holds a lock of `output_path` now (its holder line, as
 * "host H, pid P, since T, writing PATH", goes to `holder` when it is not
 * NULL), else 0.
 * Takes nothing: for tools that only look. */
int tfenc_output_lock_held(const char *output_path, char *holder, size_t holder_size);

/* Releases the lock and removes the lock file. NULL is allowed. */
void tfenc_output_lock_release(tfenc_output_lock *lock);

/* A path a job reads, and what it is to the job ("the corpus", ...). */
typedef struct tfenc_input_file {
    const char *what;
    const char *path;
} tfenc_input_file;

/* TFENC_ERR_CONFIG when `output_path` exists and is not a regular file,
 * when it is a file tfenc-batch keeps beside some output (a lock file, a
 * sparse rows' log: known by its content, whatever its name), or when it,
 * its lock file or one of its sparse rows' logs is the same file as one of
 * the inputs, naming both; inputs with a NULL path are skipped. */
int tfenc_output_check_not_input(tfenc_context *ctx, const char *output_path,
                                 const tfenc_input_file *inputs, int n_inputs);

#endif
