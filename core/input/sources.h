/* What `[job] input` names, as the list of files (sources, or shards) that
 * make up the corpus: one file; every file of a directory (names starting
 * with "." excepted); the files a glob pattern matches (`*.jsonl.zst` in a directory);
 * or the files a list file names, one path a line (`@shards.txt`; relative
 * paths are taken from the list file's directory, blank lines and lines
 * starting with "#" are passed over).
 *
 * The list is sorted by each file's located path (base/files.h: absolute,
 * directory resolved, the file's own name kept), byte by byte (never by
 * locale), so the documents' global numbers, which run over the sources in
 * this order and then line by line, depend on the corpus alone: not on the
 * working directory nor on how the job file or the list spells the paths.
 * A pattern that matches nothing, an empty directory or list, and one file
 * named twice are errors: twice means the same located path, or the same
 * file by device and inode (./a and a, a symbolic link or a hard link to
 * another shard), which would encode its documents twice. */
#ifndef TFENC_SOURCES_H
#define TFENC_SOURCES_H

#include "tfenc/plugin.h"

typedef struct tfenc_sources {
    char **paths;   /* [n] as named (relative ones from the working directory):
                     * what is opened and named in messages */
    char **located; /* [n] the same files' located paths, the sort key: what
                     * the output records (output.h: corpus_shards) */
    int n;
} tfenc_sources;

/* `input` is the key's value resolved against the job file's directory;
 * `list_file` is nonzero when the value began with "@" (then `input` is the
 * list file's path, without the "@"). */
int tfenc_sources_expand(tfenc_context *ctx, const char *input, int list_file,
                         tfenc_sources *sources);

void tfenc_sources_free(tfenc_sources *sources);

#endif
