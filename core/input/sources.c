/* `[job] input` expanded to its files: glob(3), readdir(3) or a list file,
 * then sorted by located path with strcmp so the order never depends on the
 * locale, the working directory or the spelling. */
#include "input/sources.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/files.h"

/* Global document numbers and reading positions keep the source's index in
 * the upper bits of 64 (corpus.c), which leaves room for this many. */
#define MAX_SOURCES (1 << 22)

static int add_path(tfenc_context *ctx, tfenc_sources *s, int *capacity, const char *directory,
                    const char *name, size_t name_length)
{
    if (s->n >= MAX_SOURCES)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input: more than %d files", MAX_SOURCES);
    if (s->n == *capacity) {
        int grown = *capacity > 0 ? 2 * *capacity : 16;
        char **bigger = realloc(s->paths, (size_t)grown * sizeof *bigger);
        if (bigger == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "[job] input: out of memory");
        s->paths = bigger;
        *capacity = grown;
    }
    int relative = directory != NULL && name[0] != '/';
    size_t length = (relative ? strlen(directory) + 1 : 0) + name_length + 1;
    char *path = malloc(length);
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "[job] input: out of memory");
    if (relative)
        snprintf(path, length, "%s/%.*s", directory, (int)name_length, name);
    else
        snprintf(path, length, "%.*s", (int)name_length, name);
    s->paths[s->n++] = path;
    return TFENC_OK;
}

/* A file of the list while it is sorted and checked. */
typedef struct source {
    char *path, *located;
    tfenc_file_id id;
    int identified; /* id is known: the file exists */
} source;

/* Located path, then the path as named: one order for the corpus, and one
 * for the message when two names lead to one file. */
static int compare_located(const void *a, const void *b)
{
    const source *x = a, *y = b;
    int order = strcmp(x->located, y->located);
    return order != 0 ? order : strcmp(x->path, y->path);
}

static int compare_identity(const void *a, const void *b)
{
    const source *x = *(const source *const *)a, *y = *(const source *const *)b;
    if (x->id.device != y->id.device)
        return x->id.device < y->id.device ? -1 : 1;
    if (x->id.inode != y->id.inode)
        return x->id.inode < y->id.inode ? -1 : 1;
    return x < y ? -1 : x > y; /* corpus order: the first named first */
}

static int named_twice(tfenc_context *ctx, const char *input, int list_file, const source *first,
                       const source *second)
{
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input %s%s: %s and %s are the same file "
                       "(one path spelled two ways, or a link): its documents would be encoded "
                       "twice; name it once", list_file ? "@" : "", input, first->path,
                       second->path);
}

/* Sorts the list by located path and refuses a file named twice, by its
 * located path or by device and inode. */
static int sort_and_check(tfenc_context *ctx, const char *input, int list_file,
                          tfenc_sources *s)
{
    source *all = calloc((size_t)s->n, sizeof *all);
    const source **by_identity = calloc((size_t)s->n, sizeof *by_identity);
    s->located = calloc((size_t)s->n, sizeof *s->located);
    int status = all == NULL || by_identity == NULL || s->located == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "[job] input: out of memory")
                     : TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < s->n; i++) {
        all[i].path = s->paths[i];
        all[i].located = tfenc_file_located_path(s->paths[i]);
        all[i].identified = tfenc_file_identity(s->paths[i], &all[i].id) == TFENC_OK;
        if (all[i].located == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "[job] input: out of memory");
    }
    if (status == TFENC_OK) {
        qsort(all, (size_t)s->n, sizeof *all, compare_located);
        for (int i = 0; i < s->n; i++) {
            s->paths[i] = all[i].path;
            s->located[i] = all[i].located;
        }
    } else {
        for (int i = 0; all != NULL && i < s->n; i++)
            free(all[i].located);
    }
    for (int i = 1; status == TFENC_OK && i < s->n; i++)
        if (strcmp(all[i - 1].located, all[i].located) == 0)
            status = named_twice(ctx, input, list_file, &all[i - 1], &all[i]);
    int n_identified = 0;
    for (int i = 0; status == TFENC_OK && i < s->n; i++)
        if (all[i].identified)
            by_identity[n_identified++] = &all[i];
    if (status == TFENC_OK)
        qsort(by_identity, (size_t)n_identified, sizeof *by_identity, compare_identity);
    for (int i = 1; status == TFENC_OK && i < n_identified; i++)
        if (by_identity[i - 1]->id.device == by_identity[i]->id.device
            && by_identity[i - 1]->id.inode == by_identity[i]->id.inode)
            status = named_twice(ctx, input, list_file, by_identity[i - 1], by_identity[i]);
    free(by_identity);
    free(all);
    return status;
}

static int expand_glob(tfenc_context *ctx, const char *pattern, tfenc_sources *s, int *capacity)
{
    glob_t found;
    /* NOSORT: glob sorts by the locale's collation; we sort by bytes. */
    int ret = glob(pattern, GLOB_ERR | GLOB_NOSORT, NULL, &found);
    if (ret == GLOB_NOMATCH)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input %s: the pattern matches no file",
                           pattern);
    if (ret != 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "[job] input %s: cannot expand the pattern%s",
                           pattern, ret == GLOB_ABORTED ? " (a directory cannot be read)"
                                                       : " (out of memory)");
    int status = TFENC_OK;
    for (size_t i = 0; status == TFENC_OK && i < found.gl_pathc; i++)
        status = add_path(ctx, s, capacity, NULL, found.gl_pathv[i], strlen(found.gl_pathv[i]));
    globfree(&found);
    return status;
}

static int expand_directory(tfenc_context *ctx, const char *directory, tfenc_sources *s,
                            int *capacity)
{
    DIR *dir = opendir(directory);
    if (dir == NULL)
        return tfenc_error(ctx, TFENC_ERR_IO, "[job] input %s: cannot read the directory: %s",
                           directory, strerror(errno));
    int status = TFENC_OK;
    struct dirent *entry;
    while (status == TFENC_OK && (errno = 0, entry = readdir(dir)) != NULL)
        if (entry->d_name[0] != '.')
            status = add_path(ctx, s, capacity, directory, entry->d_name,
                              strlen(entry->d_name));
    if (status == TFENC_OK && errno != 0)
        status = tfenc_error(ctx, TFENC_ERR_IO, "[job] input %s: cannot read the directory: %s",
                             directory, strerror(errno));
    closedir(dir);
    if (status == TFENC_OK && s->n == 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input %s: the directory holds no "
                             "file", directory);
    return status;
}

/* What is wrong with line `number` of a list file (its `n` bytes without
 * the line end), said naming the list and the line; TFENC_OK for a path.
 * A NUL would end the path early (the rest of the line silently dropped),
 * and white space around a path is never part of a shard's name but of a
 * careless edit: it would only ever be "cannot open". */
static int check_list_line(tfenc_context *ctx, const char *list, long number, const char *line,
                           size_t n)
{
    const char *nul = memchr(line, '\0', n);
    if (nul != NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input list %s: line %ld: NUL byte at "
                           "byte %zu (a path cannot hold one)", list, number,
                           (size_t)(nul - line));
    size_t first = 0;
    while (first < n && isspace((unsigned char)line[first]))
        first++;
    if (first == n)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input list %s: line %ld: holds only "
                           "white space (a blank line must be empty; lines name one path each, "
                           "as it is)", list, number);
    if (first > 0 || isspace((unsigned char)line[n - 1]))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input list %s: line %ld: the path "
                           "'%.*s' %s with white space (lines name one path each, as it is)",
                           list, number, (int)n, line, first > 0 ? "begins" : "ends");
    return TFENC_OK;
}

static int expand_list(tfenc_context *ctx, const char *list, tfenc_sources *s, int *capacity)
{
    FILE *file = NULL;
    int status = tfenc_file_open_regular(ctx, "[job] input list", list, &file);
    if (status != TFENC_OK)
        return status;
    /* Relative paths are the list's neighbours, wherever the job runs. */
    char *directory = NULL;
    const char *slash = strrchr(list, '/');
    if (slash != NULL && (directory = malloc((size_t)(slash - list) + 2)) != NULL)
        snprintf(directory, (size_t)(slash - list) + 2, "%.*s", (int)(slash - list + (slash == list)),
                 list);
    char *line = NULL;
    size_t capacity_line = 0;
    ssize_t got;
    long number = 0;
    while (status == TFENC_OK && (got = getline(&line, &capacity_line, file)) >= 0) {
        size_t n = (size_t)got;
        number++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            n--;
        if (n == 0 || line[0] == '#')
            continue;
        status = check_list_line(ctx, list, number, line, n);
        if (status == TFENC_OK)
            status = add_path(ctx, s, capacity, directory, line, n);
    }
    if (status == TFENC_OK && ferror(file))
        status = tfenc_error(ctx, TFENC_ERR_IO, "[job] input list %s: read error", list);
    if (status == TFENC_OK && s->n == 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input list %s names no file", list);
    free(line);
    free(directory);
    fclose(file);
    return status;
}

int tfenc_sources_expand(tfenc_context *ctx, const char *input, int list_file,
                         tfenc_sources *sources)
{
    sources->paths = sources->located = NULL;
    sources->n = 0;
    int capacity = 0, status;
    struct stat info;
    if (list_file)
        status = expand_list(ctx, input, sources, &capacity);
    else if (stat(input, &info) == 0 && S_ISDIR(info.st_mode))
        status = expand_directory(ctx, input, sources, &capacity);
    else if (strpbrk(input, "*?[") != NULL && stat(input, &info) != 0)
        status = expand_glob(ctx, input, sources, &capacity);
    else
        status = add_path(ctx, sources, &capacity, NULL, input, strlen(input));
    if (status == TFENC_OK)
        status = sort_and_check(ctx, input, list_file, sources);
    if (status != TFENC_OK)
        tfenc_sources_free(sources);
    return status;
}

void tfenc_sources_free(tfenc_sources *sources)
{
    for (int i = 0; i < sources->n; i++) {
        free(sources->paths[i]);
        if (sources->located != NULL)
            free(sources->located[i]);
    }
    free(sources->paths);
    free(sources->located);
    sources->paths = sources->located = NULL;
    sources->n = 0;
}
