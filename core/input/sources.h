/* What `[job] input` names, as the list of files (sources, or shards) that
 * make up the corpus: one file; every file of a directory (names starting
 * with "." excepted); the files a glob pattern matches (`*.jsonl.zst` in a directory);
 * or the files a list file names, one path a line (`@shards.txt`; relative
 * paths are taken from the list file's directory, blank lines and lines
 * starting with "#" are passed over).
 *
 * The list is sorted by path, byte by byte (never by locale), so the
 * documents' global numbers, which run over the sources in this order and
 * then line by line, depend on the corpus alone. A pattern that matches
 * nothing, an empty directory or list, and a path named twice are errors. */
#ifndef TFENC_SOURCES_H
#define TFENC_SOURCES_H

#include "tfenc/plugin.h"

typedef struct tfenc_sources {
    char **paths; /* [n] sorted */
    int n;
} tfenc_sources;

/* `input` is the key's value resolved against the job file's directory;
 * `list_file` is nonzero when the value began with "@" (then `input` is the
 * list file's path, without the "@"). */
int tfenc_sources_expand(tfenc_context *ctx, const char *input, int list_file,
                         tfenc_sources *sources);

void tfenc_sources_free(tfenc_sources *sources);

#endif
