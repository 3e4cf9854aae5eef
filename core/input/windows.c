/* Windows of the corpus: the counting pass that cuts them, token offsets,
 * and what an earlier run finished. */
#include "input/windows.h"

#include "base/context.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Every rank learns whether all of them could allocate what a collective
 * step needs: without this, one rank out of memory would leave the others
 * waiting in the collective forever. */
static int agree_on_memory(tfenc_context *ctx, MPI_Comm comm, int ok)
{
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (all_ok)
        return TFENC_OK;
    return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                       ok ? "another rank ran out of memory while cutting the corpus into windows"
                          : "out of memory while cutting the corpus into windows");
}

int64_t tfenc_windows_grain(int64_t window_documents)
{
    int64_t grain = (window_documents + TFENC_WINDOW_TAIL_STEPS - 1) / TFENC_WINDOW_TAIL_STEPS;
    if (grain < TFENC_WINDOW_MIN_DOCUMENTS)
        grain = TFENC_WINDOW_MIN_DOCUMENTS;
    return grain < window_documents ? grain : window_documents;
}

/* The windows' first documents (then N) for N documents and width W. */
static int64_t cut(int64_t n_documents, int64_t width, int64_t *first)
{
    const int64_t grain = tfenc_windows_grain(width);
    int64_t k = 0, at = 0;
    while (at < n_documents) {
        int64_t left = n_documents - at;
        int64_t size = left / TFENC_WINDOW_TAIL_DIVISOR / grain * grain;
        size = size < grain ? grain : size > width ? width : size;
        if (first != NULL)
            first[k] = at;
        k++;
        at += size < left ? size : left;
    }
    if (first != NULL)
        first[k] = n_documents;
    return k;
}

/* Collective: the kept fields' counts of every share combined: each
 * type's first document over the corpus (with its file), the longest
 * string and kept text. */
static void combine_kept(MPI_Comm comm, const tfenc_windows_share *share_info,
                        tfenc_windows *windows)
{
    enum { N = TFENC_MAX_KEEP_FIELDS * TFENC_KEPT_TYPES };
    struct {
        long index; /* MPI_LONG_INT's pair: the document, then its file */
        int source;
    } mine[N], first[N];
    unsigned long long longest[TFENC_MAX_KEEP_FIELDS + 1], all_longest[TFENC_MAX_KEEP_FIELDS + 1];
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++) {
        for (int t = 0; t < TFENC_KEPT_TYPES; t++) {
            int64_t index = share_info->kept[k].first[t];
            mine[k * TFENC_KEPT_TYPES + t].index = index >= 0 ? (long)index : LONG_MAX;
            mine[k * TFENC_KEPT_TYPES + t].source = share_info->kept[k].first_source[t];
        }
        longest[k] = share_info->kept[k].longest;
    }
    longest[TFENC_MAX_KEEP_FIELDS] = share_info->max_kept_length;
    MPI_Allreduce(mine, first, N, MPI_LONG_INT, MPI_MINLOC, comm);
    MPI_Allreduce(longest, all_longest, TFENC_MAX_KEEP_FIELDS + 1, MPI_UNSIGNED_LONG_LONG,
                  MPI_MAX, comm);
    windows->n_keep_fields = share_info->n_keep_fields;
    windows->max_kept_length = (size_t)all_longest[TFENC_MAX_KEEP_FIELDS];
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++) {
        for (int t = 0; t < TFENC_KEPT_TYPES; t++) {
            long index = first[k * TFENC_KEPT_TYPES + t].index;
            windows->kept[k].first[t] = index == LONG_MAX ? -1 : (int64_t)index;
            windows->kept[k].first_source[t] = first[k * TFENC_KEPT_TYPES + t].source;
        }
        windows->kept[k].longest = (size_t)all_longest[k];
    }
}

/* The file a document came from, for messages. */
static const char *source_path(const tfenc_corpus_options *options, int source)
{
    return options->n_sources > 0 && source >= 0 && source < options->n_sources
               ? options->sources[source] : options->path;
}

int tfenc_windows_kept_types(tfenc_context *ctx, const tfenc_windows *windows,
                             const tfenc_corpus_options *options, tfenc_kept_type *types,
                             size_t *longest)
{
    for (int k = 0; k < options->n_keep_fields; k++) {
        const tfenc_kept_field_count *field = &windows->kept[k];
        const int64_t *first = field->first;
        const char *name = options->keep_fields[k];
        if (first[TFENC_KEPT_NULL] < 0 && first[TFENC_KEPT_STRING] < 0
            && first[TFENC_KEPT_INTEGER] < 0 && first[TFENC_KEPT_FLOAT] < 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] keep_fields: no record of %s has "
                               "a field '%s' (a field is kept when some record has it; the "
                               "records without it keep a null)", options->path, name);
        /* The first number of either kind, against the first string. */
        int number = first[TFENC_KEPT_INTEGER] < 0 ? TFENC_KEPT_FLOAT
                     : first[TFENC_KEPT_FLOAT] < 0 ? TFENC_KEPT_INTEGER
                     : first[TFENC_KEPT_INTEGER] < first[TFENC_KEPT_FLOAT] ? TFENC_KEPT_INTEGER
                                                                            : TFENC_KEPT_FLOAT;
        if (first[TFENC_KEPT_STRING] >= 0 && first[number] >= 0) {
            int earlier = first[TFENC_KEPT_STRING] < first[number] ? TFENC_KEPT_STRING : number;
            int later = earlier == TFENC_KEPT_STRING ? number : TFENC_KEPT_STRING;
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] keep_fields '%s': document %lld "
                               "(%s) holds %s %s but document %lld (%s) %s %s (a kept field "
                               "holds one type; integers and floats mix as floats)", name,
                               (long long)first[earlier], source_path(options,
                                                                      field->first_source[earlier]),
                               earlier == TFENC_KEPT_INTEGER ? "an" : "a",
                               tfenc_kept_type_names[earlier], (long long)first[later],
                               source_path(options, field->first_source[later]),
                               later == TFENC_KEPT_INTEGER ? "an" : "a",
                               tfenc_kept_type_names[later]);
        }
        types[k] = first[TFENC_KEPT_FLOAT] >= 0     ? TFENC_KEPT_FLOAT
                   : first[TFENC_KEPT_INTEGER] >= 0 ? TFENC_KEPT_INTEGER
                                                    : TFENC_KEPT_STRING;
        longest[k] = field->longest > 0 ? field->longest : 1;
    }
    return TFENC_OK;
}

/* Collective: every rank learns how many documents each source holds (a
 * share may hold parts of several plain sources, or none of one) and how
 * many records it left out, and each share where it starts in line
 * numbers (the lines of its first source in the shares before it). */
static int sum_source_documents(tfenc_context *ctx, MPI_Comm comm,
                                const tfenc_corpus_options *options, tfenc_corpus *corpus,
                                tfenc_windows_share *share_info)
{
    int n = options->n_sources > 0 ? options->n_sources : 1, rank = 0;
    MPI_Comm_rank(comm, &rank);
    int64_t *mine = calloc(3 * (size_t)n, sizeof *mine);
    int64_t *earlier_lines = calloc((size_t)n, sizeof *earlier_lines);
    share_info->source_documents = calloc((size_t)n, sizeof *share_info->source_documents);
    share_info->source_skipped = calloc((size_t)n, sizeof *share_info->source_skipped);
    int ok = mine != NULL && earlier_lines != NULL && share_info->source_documents != NULL
             && share_info->source_skipped != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        free(mine);
        free(earlier_lines);
        free(share_info->source_documents);
        share_info->source_documents = NULL;
        free(share_info->source_skipped);
        share_info->source_skipped = NULL;
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for %d sources", n);
    }
    if (corpus != NULL) {
        memcpy(mine, tfenc_corpus_source_documents(corpus), (size_t)n * sizeof *mine);
        memcpy(mine + n, tfenc_corpus_source_skipped(corpus), (size_t)n * sizeof *mine);
        memcpy(mine + 2 * n, tfenc_corpus_source_lines(corpus), (size_t)n * sizeof *mine);
    }
    MPI_Allreduce(mine, share_info->source_documents, n, MPI_INT64_T, MPI_SUM, comm);
    MPI_Allreduce(mine + n, share_info->source_skipped, n, MPI_INT64_T, MPI_SUM, comm);
    MPI_Exscan(mine + 2 * n, earlier_lines, n, MPI_INT64_T, MPI_SUM, comm);
    if (rank == 0)
        memset(earlier_lines, 0, (size_t)n * sizeof *earlier_lines); /* undefined there */
    if (corpus != NULL)
        tfenc_corpus_set_start_line(corpus, earlier_lines);
    free(earlier_lines);
    share_info->n_sources = n;
    /* Every rank that opened the corpus knows every source's kind. */
    uint8_t *whole = calloc((size_t)n, 1);
    share_info->source_whole = calloc((size_t)n, 1);
    for (int i = 0; whole != NULL && corpus != NULL && i < n; i++)
        whole[i] = (uint8_t)tfenc_corpus_source_whole(corpus, i);
    int whole_ok = whole != NULL && share_info->source_whole != NULL, all_whole_ok = 0;
    MPI_Allreduce(&whole_ok, &all_whole_ok, 1, MPI_INT, MPI_MIN, comm);
    if (all_whole_ok)
        MPI_Allreduce(whole, share_info->source_whole, n, MPI_UINT8_T, MPI_MAX, comm);
    free(whole);
    free(mine);
    if (!all_whole_ok) {
        free(share_info->source_whole);
        share_info->source_whole = NULL;
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for %d sources", n);
    }
    return TFENC_OK;
}

int tfenc_windows_scan(tfenc_context *ctx, MPI_Comm comm, const tfenc_corpus_options *options,
                       int64_t window_documents, tfenc_windows_share *share_info)
{
    memset(share_info, 0, sizeof *share_info);
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n_ranks);
    tfenc_corpus *corpus = NULL;
    tfenc_corpus_counts counts = {0};
    int status = tfenc_corpus_open(ctx, options, rank, n_ranks, &corpus);
    if (status == TFENC_OK)
        status = tfenc_corpus_count(ctx, corpus, &counts);
    /* Collective whatever happened above: a failed share counts nothing. */
    int64_t mine = status == TFENC_OK ? counts.n_documents : 0, first_index = 0, total = 0;
    MPI_Exscan(&mine, &first_index, 1, MPI_INT64_T, MPI_SUM, comm);
    if (rank == 0)
        first_index = 0; /* MPI_Exscan leaves rank 0's result undefined */
    MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, comm);
    int sources_status = sum_source_documents(ctx, comm, options, status == TFENC_OK ? corpus
                                                                                    : NULL,
                                              share_info);
    if (status == TFENC_OK)
        status = sources_status;
    share_info->n_documents = mine;
    share_info->max_id_length = counts.max_id_length;
    share_info->max_kept_length = counts.max_kept_length;
    share_info->n_keep_fields = options->n_keep_fields;
    /* The share numbered its documents from 0; the corpus from first_index. */
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++) {
        share_info->kept[k] = counts.kept[k];
        for (int t = 0; t < TFENC_KEPT_TYPES; t++)
            if (status != TFENC_OK || k >= options->n_keep_fields)
                share_info->kept[k].first[t] = -1;
            else if (counts.kept[k].first[t] >= 0)
                share_info->kept[k].first[t] += first_index;
    }
    if (status == TFENC_OK && tfenc_corpus_windows_by_position(corpus)) {
        /* The whole corpus's size gives the cut; the share reports where the
         * windows that start in it start. */
        int64_t n_windows = cut(total, window_documents, NULL);
        int64_t *first = malloc(((size_t)n_windows + 1) * sizeof *first);
        if (first == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the windows");
        } else {
            cut(total, window_documents, first);
            tfenc_corpus_set_first_index(corpus, first_index);
            status = tfenc_corpus_line_starts_at(ctx, corpus, first, n_windows,
                                                 &share_info->line_starts,
                                                 &share_info->line_numbers,
                                                 &share_info->n_line_starts);
            free(first);
        }
        share_info->file_size = tfenc_corpus_file_size(corpus);
    }
    tfenc_corpus_close(corpus);
    return status;
}

void tfenc_windows_share_free(tfenc_windows_share *share_info)
{
    free(share_info->line_starts);
    free(share_info->line_numbers);
    free(share_info->source_documents);
    free(share_info->source_skipped);
    free(share_info->source_whole);
    memset(share_info, 0, sizeof *share_info);
}

int tfenc_windows_build(tfenc_context *ctx, MPI_Comm comm, tfenc_windows_share *share_info,
                        int64_t window_documents, tfenc_windows *windows)
{
    memset(windows, 0, sizeof *windows);
    int n_ranks = 1;
    MPI_Comm_size(comm, &n_ranks);
    unsigned long long longest_id = share_info->max_id_length, longest = 0;
    MPI_Allreduce(&share_info->n_documents, &windows->n_documents, 1, MPI_INT64_T, MPI_SUM, comm);
    MPI_Allreduce(&longest_id, &longest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
    windows->max_id_length = (size_t)longest;
    combine_kept(comm, share_info, windows);
    windows->n_sources = share_info->n_sources;
    windows->source_documents = share_info->source_documents;
    share_info->source_documents = NULL;
    windows->source_skipped = share_info->source_skipped;
    share_info->source_skipped = NULL;
    windows->source_whole = share_info->source_whole;
    share_info->source_whole = NULL;
    windows->window_documents = window_documents;
    windows->n_windows = cut(windows->n_documents, window_documents, NULL);
    const int64_t n = windows->n_windows;
    windows->state = calloc((size_t)n + 1, 1);
    windows->first_document = malloc(((size_t)n + 1) * sizeof *windows->first_document);
    int ok = windows->state != NULL && windows->first_document != NULL;
    if (ok)
        cut(windows->n_documents, window_documents, windows->first_document);

    int is_text = share_info->line_starts != NULL || share_info->file_size > 0;
    int any_text = 0;
    MPI_Allreduce(&is_text, &any_text, 1, MPI_INT, MPI_MAX, comm);
    int *counts = NULL, *displacements = NULL;
    if (any_text) {
        windows->byte_start = malloc(((size_t)n + 1) * sizeof *windows->byte_start);
        windows->first_line_number = malloc(((size_t)n + 1) * sizeof *windows->first_line_number);
        counts = malloc((size_t)n_ranks * sizeof *counts);
        displacements = malloc((size_t)n_ranks * sizeof *displacements);
        ok = ok && windows->byte_start != NULL && windows->first_line_number != NULL
             && counts != NULL && displacements != NULL;
    }
    int status = agree_on_memory(ctx, comm, ok);
    if (status == TFENC_OK && any_text) {
        /* Every window's first line starts in exactly one share, and the
         * shares are in file order: their lists, concatenated, are the
         * windows' starts. */
        int mine = (int)share_info->n_line_starts;
        MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, comm);
        int64_t total = 0;
        for (int r = 0; r < n_ranks; r++) {
            displacements[r] = (int)total;
            total += counts[r];
        }
        if (total != n)
            status = tfenc_error(ctx, TFENC_ERR_INTERNAL,
                                 "the corpus's shares found %lld window starts for %lld windows "
                                 "(did the file change while it was read?)",
                                 (long long)total, (long long)n);
        else {
            MPI_Allgatherv(share_info->line_starts, mine, MPI_INT64_T, windows->byte_start,
                           counts, displacements, MPI_INT64_T, comm);
            MPI_Allgatherv(share_info->line_numbers, mine, MPI_INT64_T,
                           windows->first_line_number, counts, displacements, MPI_INT64_T, comm);
        }
        int64_t size = share_info->file_size, largest = 0;
        MPI_Allreduce(&size, &largest, 1, MPI_INT64_T, MPI_MAX, comm);
        windows->byte_start[n] = largest;
    }
    free(counts);
    free(displacements);
    free(share_info->line_starts);
    share_info->line_starts = NULL;
    free(share_info->line_numbers);
    share_info->line_numbers = NULL;
    if (status != TFENC_OK)
        tfenc_windows_free(windows);
    return status;
}

void tfenc_windows_range(const tfenc_windows *windows, int64_t k, tfenc_corpus_range *range)
{
    range->first_index = windows->first_document[k];
    range->n_documents = windows->first_document[k + 1] - windows->first_document[k];
    range->byte_start = windows->byte_start != NULL ? windows->byte_start[k] : 0;
    range->byte_end = windows->byte_start != NULL ? windows->byte_start[k + 1] : 0;
    range->first_line_number = windows->first_line_number != NULL
                                   ? windows->first_line_number[k] : 0;
}

/* ------------------------------------------------------------------ rows */

int tfenc_windows_count_local(tfenc_context *ctx, tfenc_windows *windows, int counter,
                              int n_counters, tfenc_window_counter count_window, void *user)
{
    free(windows->first_row);
    windows->first_row = calloc((size_t)windows->n_windows + 1, sizeof *windows->first_row);
    if (windows->first_row == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the windows' rows");
    int status = TFENC_OK;
    int64_t group = -1;
    int previous_source = -1;
    for (int64_t k = 0; counter >= 0 && status == TFENC_OK && k < windows->n_windows; k++) {
        int source = tfenc_windows_whole_source(windows, k);
        if (source < 0 || source != previous_source)
            group++;
        previous_source = source;
        if (group % n_counters == counter)
            status = count_window(ctx, user, k, &windows->first_row[k]);
    }
    return status;
}

int tfenc_windows_sum_rows(tfenc_context *ctx, MPI_Comm comm, tfenc_windows *windows)
{
    const int64_t n = windows->n_windows;
    int status = agree_on_memory(ctx, comm, windows->first_row != NULL);
    if (status != TFENC_OK)
        return status;
    /* Counts of windows nobody here counted are 0: the sum is each window's count. */
    MPI_Allreduce(MPI_IN_PLACE, windows->first_row, (int)n, MPI_INT64_T, MPI_SUM, comm);
    int64_t running = 0;
    for (int64_t k = 0; k <= n; k++) {
        int64_t rows = k < n ? windows->first_row[k] : 0;
        windows->first_row[k] = running;
        running += rows;
    }
    return TFENC_OK;
}

/* ---------------------------------------------------------------- resume */

int tfenc_windows_progress_local(tfenc_context *ctx, tfenc_windows *windows, int reader,
                                 int n_readers, tfenc_window_progress written, void *user)
{
    const int64_t width = windows->window_documents;
    uint8_t *done = malloc((size_t)width);
    if (done == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int status = TFENC_OK;
    for (int64_t k = reader; reader >= 0 && status == TFENC_OK && k < windows->n_windows;
         k += n_readers) {
        tfenc_corpus_range range;
        tfenc_windows_range(windows, k, &range);
        status = written(ctx, user, range.first_index, range.n_documents, done);
        int64_t finished = 0;
        for (int64_t i = 0; status == TFENC_OK && i < range.n_documents; i++)
            finished += done[i] != 0;
        if (status != TFENC_OK || finished == 0)
            continue;
        windows->state[k] = finished == range.n_documents ? TFENC_WINDOW_DONE
                                                           : TFENC_WINDOW_PARTIAL;
        if (windows->state[k] != TFENC_WINDOW_PARTIAL)
            continue;
        /* Kept until the combination: this reader's partial windows only. */
        int64_t *partial = realloc(windows->partial,
                                   ((size_t)windows->n_partial + 1) * sizeof *partial);
        uint8_t *flags = partial == NULL ? NULL
                                         : realloc(windows->partial_done,
                                                   ((size_t)windows->n_partial + 1) * (size_t)width);
        if (partial != NULL)
            windows->partial = partial;
        if (flags != NULL)
            windows->partial_done = flags;
        if (partial == NULL || flags == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
            break;
        }
        memset(flags + (size_t)windows->n_partial * (size_t)width, 0, (size_t)width);
        memcpy(flags + (size_t)windows->n_partial * (size_t)width, done, (size_t)range.n_documents);
        windows->partial[windows->n_partial++] = k;
    }
    free(done);
    return status;
}

int tfenc_windows_combine_progress(tfenc_context *ctx, MPI_Comm comm, tfenc_windows *windows)
{
    const int64_t n = windows->n_windows, width = windows->window_documents;
    MPI_Allreduce(MPI_IN_PLACE, windows->state, (int)n, MPI_UINT8_T, MPI_MAX, comm);
    int64_t n_partial = 0;
    for (int64_t k = 0; k < n; k++)
        n_partial += windows->state[k] == TFENC_WINDOW_PARTIAL;
    int64_t *partial = malloc(((size_t)n_partial + 1) * sizeof *partial);
    uint8_t *flags = calloc((size_t)n_partial * (size_t)width + 1, 1);
    int status = agree_on_memory(ctx, comm, partial != NULL && flags != NULL);
    if (status != TFENC_OK) {
        free(partial);
        free(flags);
        return status;
    }
    for (int64_t k = 0, j = 0; k < n; k++)
        if (windows->state[k] == TFENC_WINDOW_PARTIAL)
            partial[j++] = k;
    /* Each partial window's flags come from the one reader that has them. */
    for (int64_t i = 0; i < windows->n_partial; i++) {
        int64_t k = windows->partial[i], low = 0, high = n_partial;
        while (low < high) {
            int64_t middle = low + (high - low) / 2;
            if (partial[middle] < k)
                low = middle + 1;
            else
                high = middle;
        }
        memcpy(flags + (size_t)low * (size_t)width,
               windows->partial_done + (size_t)i * (size_t)width, (size_t)width);
    }
    if (n_partial > 0)
        MPI_Allreduce(MPI_IN_PLACE, flags, (int)(n_partial * width), MPI_UINT8_T, MPI_MAX, comm);
    free(windows->partial);
    free(windows->partial_done);
    windows->partial = partial;
    windows->partial_done = flags;
    windows->n_partial = n_partial;
    return TFENC_OK;
}

const uint8_t *tfenc_windows_finished_documents(const tfenc_windows *windows, int64_t k)
{
    if (windows->state == NULL || windows->state[k] != TFENC_WINDOW_PARTIAL)
        return NULL;
    int64_t low = 0, high = windows->n_partial;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (windows->partial[middle] < k)
            low = middle + 1;
        else
            high = middle;
    }
    if (low < windows->n_partial && windows->partial[low] == k)
        return windows->partial_done + (size_t)low * (size_t)windows->window_documents;
    return NULL;
}

int64_t tfenc_windows_documents_finished(const tfenc_windows *windows)
{
    int64_t finished = 0;
    for (int64_t k = 0; windows->state != NULL && k < windows->n_windows; k++) {
        tfenc_corpus_range range;
        tfenc_windows_range(windows, k, &range);
        if (windows->state[k] == TFENC_WINDOW_DONE)
            finished += range.n_documents;
        else if (windows->state[k] == TFENC_WINDOW_PARTIAL) {
            const uint8_t *done = tfenc_windows_finished_documents(windows, k);
            for (int64_t i = 0; done != NULL && i < range.n_documents; i++)
                finished += done[i] != 0;
        }
    }
    return finished;
}

int tfenc_windows_whole_source(const tfenc_windows *windows, int64_t k)
{
    if (windows->byte_start == NULL || windows->source_whole == NULL)
        return -1;
    int source = tfenc_corpus_position_source(windows->byte_start[k]);
    return source >= 0 && source < windows->n_sources && windows->source_whole[source] ? source
                                                                                          : -1;
}

void tfenc_windows_free(tfenc_windows *windows)
{
    free(windows->byte_start);
    free(windows->first_document);
    free(windows->first_row);
    free(windows->state);
    free(windows->partial);
    free(windows->partial_done);
    free(windows->source_documents);
    free(windows->source_skipped);
    free(windows->first_line_number);
    free(windows->source_whole);
    memset(windows, 0, sizeof *windows);
}
