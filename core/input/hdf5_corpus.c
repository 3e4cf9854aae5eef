/* HDF5 token-id corpora: ragged, flat ids `tokens [T]` with `offsets
 * [N+1]` from 0 to T, or padded, `ids [N, L]` with `lengths [N]` (dataset
 * names from the corpus options). One file, whose documents are known by
 * index: an indexed reader (reader.h), its shares contiguous ranges of
 * about equal document counts (share k starts at document k*N/n).
 *
 * A range of documents is selected at a time: its part of the offsets (or
 * lengths) is read and checked, and its token ids are read a block of
 * about a million at a time as the documents are asked for, so a reader
 * never holds much of its share; counting reads no token ids. Every error
 * names the file and the dataset: a missing dataset, a wrong rank, a
 * non-integer type, a dataset that stores less than it declares, offsets
 * that do not start at 0, decrease, or do not end at the token count, a
 * length outside [0, L], a negative token id or one past int32 (with the
 * value as stored). */
#include "input/reader.h"

#include <hdf5.h>

#include "base/context.h"
#include "base/files.h"
#include "base/hdf5_error.h"
#include "base/hdf5_intact.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Token ids read per block: large enough that hyperslab reads are
 * efficient, small enough (4 MiB) that no rank holds a large part of its
 * share. */
#define BLOCK_TOKENS ((int64_t)1 << 20)

typedef struct hdf5_corpus {
    char *path;
    hid_t h5_file;
    hid_t tokens;        /* ragged: [T]; padded: [N, L] */
    char *tokens_name;
    hid_t index;         /* ragged: offsets [N+1]; padded: lengths [N] */
    char *index_name;
    int64_t total_documents; /* N */
    int64_t total_tokens;    /* ragged: T; padded: unused */
    int padded;
    int64_t padded_width; /* L */
    int64_t first;        /* the selected documents are [first, end) */
    int64_t end;
    int64_t *offsets;     /* [end - first + 1]: token offsets of the selected documents,
                           * positions in `tokens` for ragged input, prefix sums of
                           * lengths from 0 for padded */
    int64_t *lengths;     /* padded: [end - first] */
    int32_t *block;       /* token ids of documents [block_first, block_end) */
    size_t block_capacity;
    int64_t block_first;
    int64_t block_end;
    int64_t next;         /* the selection's document next() gives */
    tfenc_corpus_files *files; /* the corpus's (one file), for the counts */
} hdf5_corpus;

static const char *h5_detail(char buffer[256])
{
    return tfenc_hdf5_error_detail(buffer, 256);
}

/* Compressed chunks hold at most this many times fewer bytes than their
 * data (deflate's best ratio is about 1000:1, on runs of one value). */
#define MAX_COMPRESSION_RATIO 1024
/* Datasets this small are read whatever their storage says: cheap anyway. */
#define SMALL_DATASET_BYTES ((hsize_t)1 << 20)

/* A corrupt or hostile file can declare a dataset far larger than the data
 * it stores (a 2 kB file claiming 10^13 offsets was found by fuzzing), and
 * HDF5 returns the fill value for what was never written. So before any
 * buffer is sized by the declared shape, the stored bytes must account for
 * it: all of them for contiguous or compact storage, 1/MAX_COMPRESSION_RATIO
 * for chunked storage, which may be compressed. */
static int check_storage(tfenc_context *ctx, hdf5_corpus *corpus, const char *name,
                         hid_t dataset, int rank, const hsize_t *dims)
{
    hid_t type = H5Dget_type(dataset);
    hsize_t element_size = type >= 0 ? (hsize_t)H5Tget_size(type) : 0;
    if (type >= 0)
        H5Tclose(type);
    hsize_t declared = element_size, limit = (hsize_t)INT64_MAX;
    for (int i = 0; i < rank && declared > 0; i++) {
        if (dims[i] > limit / declared)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' declares more data "
                               "than a file can hold (corrupt file?)", corpus->path, name);
        declared *= dims[i];
    }
    for (int i = 0; i < rank; i++)
        if (dims[i] == 0)
            declared = 0;
    if (declared <= SMALL_DATASET_BYTES)
        return TFENC_OK;
    hid_t properties = H5Dget_create_plist(dataset);
    H5D_layout_t layout = properties >= 0 ? H5Pget_layout(properties) : H5D_LAYOUT_ERROR;
    if (properties >= 0)
        H5Pclose(properties);
    hsize_t stored = H5Dget_storage_size(dataset);
    H5Eclear2(H5E_DEFAULT);
    hsize_t needed = layout == H5D_CHUNKED ? declared / MAX_COMPRESSION_RATIO : declared;
    if (stored < needed)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' declares %llu bytes of "
                           "data but stores only %llu (corrupt file, or a dataset that was "
                           "never written?)", corpus->path, name, (unsigned long long)declared,
                           (unsigned long long)stored);
    return TFENC_OK;
}

/* Opens an integer dataset of the expected rank and returns its dims. */
static int open_integer_dataset(tfenc_context *ctx, hdf5_corpus *corpus, const char *name,
                                int rank, hsize_t *dims, hid_t *dataset)
{
    char detail[256];
    if (H5Lexists(corpus->h5_file, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' not found", corpus->path,
                           name);
    }
    *dataset = H5Dopen2(corpus->h5_file, name, H5P_DEFAULT);
    if (*dataset < 0)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: cannot open dataset '%s': %s",
                           corpus->path, name, h5_detail(detail));
    hid_t type = H5Dget_type(*dataset);
    H5T_class_t type_class = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (type >= 0)
        H5Tclose(type);
    if (type_class != H5T_INTEGER)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' must hold integers, "
                           "found another type (class %d)", corpus->path, name, (int)type_class);
    hid_t space = H5Dget_space(*dataset);
    int found_rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (found_rank == rank)
        H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0)
        H5Sclose(space);
    if (found_rank != rank)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' must have rank %d, found "
                           "rank %d", corpus->path, name, rank, found_rank);
    return check_storage(ctx, corpus, name, *dataset, rank, dims);
}

/* HDF5 keeps bookkeeping for every chunk one read touches (kilobytes each):
 * one read over 260 000 one-element chunks took 2 GB (found by fuzzing).
 * Reads are split so that each touches at most this many chunks. */
#define MAX_CHUNKS_PER_READ 1024

/* Rows of `dataset` one read may cover, `width` columns wide. */
static int64_t rows_per_read(hid_t dataset, int rank, int64_t width)
{
    int64_t rows = INT64_MAX;
    hid_t properties = H5Dget_create_plist(dataset);
    if (properties >= 0 && H5Pget_layout(properties) == H5D_CHUNKED) {
        hsize_t chunk[2] = {1, 1};
        if (H5Pget_chunk(properties, 2, chunk) >= rank && chunk[0] > 0 && chunk[1] > 0) {
            int64_t across = rank == 2 ? (width + (int64_t)chunk[1] - 1) / (int64_t)chunk[1] : 1;
            int64_t down = MAX_CHUNKS_PER_READ / across;
            rows = (down > 0 ? down : 1) * (int64_t)chunk[0];
        }
    }
    if (properties >= 0)
        H5Pclose(properties);
    H5Eclear2(H5E_DEFAULT);
    return rows;
}

/* Reads elements [start, start + count) of a rank-1 dataset (or rows of a
 * rank-2 one, `width` columns from column 0) as `memory_type`. */
static int read_slab(tfenc_context *ctx, hdf5_corpus *corpus, hid_t dataset, const char *name,
                     int rank, int64_t start, int64_t count, int64_t width, hid_t memory_type,
                     void *buffer)
{
    if (count == 0 || width == 0)
        return TFENC_OK;
    int64_t step = rows_per_read(dataset, rank, width);
    size_t row_bytes = H5Tget_size(memory_type) * (size_t)(rank == 2 ? width : 1);
    hid_t file_space = H5Dget_space(dataset);
    herr_t result = file_space >= 0 ? 0 : -1;
    int64_t done = 0;
    while (result >= 0 && done < count) {
        int64_t rows = count - done < step ? count - done : step;
        hsize_t offset[2] = {(hsize_t)(start + done), 0};
        hsize_t size[2] = {(hsize_t)rows, (hsize_t)width};
        hsize_t memory_size = (hsize_t)rows * (hsize_t)(rank == 2 ? width : 1);
        hid_t memory_space = H5Screate_simple(1, &memory_size, NULL);
        result = -1;
        if (memory_space >= 0
            && H5Sselect_hyperslab(file_space, H5S_SELECT_SET, offset, NULL, size, NULL) >= 0)
            result = H5Dread(dataset, memory_type, memory_space, file_space, H5P_DEFAULT,
                             (char *)buffer + (size_t)done * row_bytes);
        if (memory_space >= 0)
            H5Sclose(memory_space);
        if (result >= 0)
            done += rows;
    }
    char detail[256];
    if (result < 0)
        h5_detail(detail);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (result < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read dataset '%s' at %lld: %s",
                           corpus->path, name, (long long)(start + done), detail);
    /* A corpus cut short while the job reads it gives zeros: refused, so
     * that no window is encoded (and marked finished) from them. */
    return tfenc_hdf5_check_intact(ctx, corpus->h5_file, corpus->path, name);
}

/* Reads and checks the index of documents [first, end): their offsets
 * (ragged) or lengths (padded), so that the next documents read are these.
 * Only this range is read, never the whole index: at scale the index of
 * 10^8 documents would be 800 MB on every rank. */
static int select_documents(tfenc_context *ctx, hdf5_corpus *corpus, int64_t first,
                            int64_t end)
{
    const int64_t n = end - first;
    const char *name = corpus->index_name;
    free(corpus->offsets);
    free(corpus->lengths);
    corpus->offsets = malloc(((size_t)n + 1) * sizeof *corpus->offsets);
    corpus->lengths = malloc(((size_t)n + 1) * sizeof *corpus->lengths);
    if (corpus->offsets == NULL || corpus->lengths == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory reading '%s'",
                           corpus->path, name);
    int64_t *offsets = corpus->offsets;
    int status = corpus->padded
                     ? read_slab(ctx, corpus, corpus->index, name, 1, first, n, 1,
                                 H5T_NATIVE_INT64, offsets + 1)
                     : read_slab(ctx, corpus, corpus->index, name, 1, first, n + 1, 1,
                                 H5T_NATIVE_INT64, offsets);
    if (status != TFENC_OK)
        return status;
    if (corpus->padded) {
        /* Turn lengths into running offsets, validating them on the way. */
        offsets[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t length = offsets[i + 1];
            if (length < 0 || length > corpus->padded_width)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s': entry %lld is "
                                   "%lld, outside [0, %lld] (the width of '%s')",
                                   corpus->path, name, (long long)(first + i),
                                   (long long)length, (long long)corpus->padded_width,
                                   corpus->tokens_name);
            offsets[i + 1] = offsets[i] + length;
        }
    } else {
        if (first == 0 && offsets[0] != 0)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' must start at 0, "
                               "found %lld", corpus->path, name, (long long)offsets[0]);
        for (int64_t i = 0; i <= n; i++) {
            if (i < n && offsets[i + 1] < offsets[i])
                return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' decreases at "
                                   "entry %lld (%lld after %lld): offsets must be "
                                   "non-decreasing", corpus->path, name,
                                   (long long)(first + i + 1), (long long)offsets[i + 1],
                                   (long long)offsets[i]);
            if (offsets[i] < 0 || offsets[i] > corpus->total_tokens)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s': entry %lld is "
                                   "%lld, outside [0, %lld] ('%s' holds %lld tokens)",
                                   corpus->path, name, (long long)(first + i),
                                   (long long)offsets[i], (long long)corpus->total_tokens,
                                   corpus->tokens_name, (long long)corpus->total_tokens);
        }
        if (end == corpus->total_documents && offsets[n] != corpus->total_tokens)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' ends at %lld but "
                               "'%s' holds %lld tokens: they must match", corpus->path, name,
                               (long long)offsets[n], corpus->tokens_name,
                               (long long)corpus->total_tokens);
    }
    for (int64_t i = 0; i < n; i++)
        corpus->lengths[i] = offsets[i + 1] - offsets[i];
    corpus->first = first;
    corpus->end = end;
    corpus->block_first = corpus->block_end = first;
    return TFENC_OK;
}

static int open_hdf5(tfenc_context *ctx, hdf5_corpus *corpus,
                     const tfenc_corpus_options *options, int share, int n_shares)
{
    char detail[256];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* Before HDF5 opens it: its open() would wait forever on a FIFO. */
    int checked = tfenc_file_check_regular(ctx, "[job] input", corpus->path);
    if (checked != TFENC_OK)
        return checked;
    corpus->h5_file = H5Fopen(corpus->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (corpus->h5_file < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open the HDF5 corpus: %s",
                           corpus->path, h5_detail(detail));
    if ((options->ids_dataset == NULL) != (options->lengths_dataset == NULL))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: a padded HDF5 corpus needs both "
                           "ids_dataset and lengths_dataset (only %s is set)", corpus->path,
                           options->ids_dataset != NULL ? "ids_dataset" : "lengths_dataset");
    corpus->padded = options->ids_dataset != NULL;
    const char *tokens_name = corpus->padded ? options->ids_dataset
                              : options->tokens_dataset != NULL ? options->tokens_dataset
                                                                : "tokens";
    const char *index_name = corpus->padded ? options->lengths_dataset
                             : options->offsets_dataset != NULL ? options->offsets_dataset
                                                                : "offsets";
    corpus->tokens_name = strdup(tokens_name);
    corpus->index_name = strdup(index_name);
    if (corpus->tokens_name == NULL || corpus->index_name == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", corpus->path);

    hsize_t token_dims[2] = {0, 0}, index_dims[1] = {0};
    int status = open_integer_dataset(ctx, corpus, tokens_name, corpus->padded ? 2 : 1,
                                      token_dims, &corpus->tokens);
    if (status == TFENC_OK)
        status = open_integer_dataset(ctx, corpus, index_name, 1, index_dims, &corpus->index);
    if (status != TFENC_OK)
        return status;
    if (corpus->padded && index_dims[0] != token_dims[0])
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' has %llu rows but '%s' "
                           "has %llu entries: they must match", corpus->path, tokens_name,
                           (unsigned long long)token_dims[0], index_name,
                           (unsigned long long)index_dims[0]);
    if (!corpus->padded && index_dims[0] < 1)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s' is empty: it needs N+1 "
                           "entries, from 0 to the token count", corpus->path, index_name);
    corpus->padded_width = (int64_t)token_dims[1];
    corpus->total_documents = corpus->padded ? (int64_t)token_dims[0] : (int64_t)index_dims[0] - 1;
    corpus->total_tokens = corpus->padded ? -1 : (int64_t)token_dims[0];
    /* Shares of equal document counts: they only validate and count; the
     * work itself is cut into windows (tfenc_corpus_select). */
    return select_documents(ctx, corpus,
                            tfenc_share_boundary(corpus->total_documents, share, n_shares),
                            tfenc_share_boundary(corpus->total_documents, share + 1, n_shares));
}

/* Refuses token `position` of `document`, a negative or too large id, with
 * the value as stored: it is read again alone, as a 64-bit integer of the
 * dataset's signedness, since the int32 block holds it clipped. */
static int refuse_token(tfenc_context *ctx, hdf5_corpus *corpus, int64_t document,
                        int64_t position)
{
    hsize_t coordinates[2] = {0, 0};
    if (corpus->padded) {
        coordinates[0] = (hsize_t)document;
        coordinates[1] = (hsize_t)position;
    } else {
        coordinates[0] = (hsize_t)(corpus->offsets[document - corpus->first] + position);
    }
    hid_t type = H5Dget_type(corpus->tokens);
    int is_unsigned = type >= 0 && H5Tget_sign(type) == H5T_SGN_NONE;
    if (type >= 0)
        H5Tclose(type);
    union {
        long long signed_value;
        unsigned long long unsigned_value;
    } stored = {0};
    hsize_t one = 1;
    hid_t file_space = H5Dget_space(corpus->tokens);
    hid_t memory_space = H5Screate_simple(1, &one, NULL);
    int read = file_space >= 0 && memory_space >= 0 &&
               H5Sselect_elements(file_space, H5S_SELECT_SET, 1, coordinates) >= 0 &&
               H5Dread(corpus->tokens, is_unsigned ? H5T_NATIVE_ULLONG : H5T_NATIVE_LLONG,
                       memory_space, file_space, H5P_DEFAULT, &stored) >= 0;
    if (memory_space >= 0)
        H5Sclose(memory_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    H5Eclear2(H5E_DEFAULT);
    char value[32];
    if (!read)
        snprintf(value, sizeof value, "%s", "(unreadable)");
    else if (is_unsigned)
        snprintf(value, sizeof value, "%llu", stored.unsigned_value);
    else
        snprintf(value, sizeof value, "%lld", stored.signed_value);
    if (read && !is_unsigned && stored.signed_value < 0)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s': document %lld has a "
                           "negative token id %s at position %lld", corpus->path,
                           corpus->tokens_name, (long long)document, value, (long long)position);
    return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s': document %lld has token id %s at "
                       "position %lld, outside 0..%d (token ids are 32-bit)", corpus->path,
                       corpus->tokens_name, (long long)document, value, (long long)position,
                       INT32_MAX - 1);
}

/* Loads the block of documents that starts at `first`: as many as fit in
 * BLOCK_TOKENS, at least one. */
static int load_block(tfenc_context *ctx, hdf5_corpus *corpus, int64_t first)
{
    int64_t local = first - corpus->first;
    int64_t end = first + 1;
    int64_t width = 0; /* padded: the widest row of the block */
    if (corpus->padded) {
        width = corpus->lengths[local];
        int64_t rows_limit = BLOCK_TOKENS / (corpus->padded_width > 0 ? corpus->padded_width : 1);
        while (end < corpus->end && end - first < rows_limit) {
            if (corpus->lengths[end - corpus->first] > width)
                width = corpus->lengths[end - corpus->first];
            end++;
        }
    } else {
        while (end < corpus->end
               && corpus->offsets[end + 1 - corpus->first] - corpus->offsets[local] <= BLOCK_TOKENS)
            end++;
    }
    size_t needed = corpus->padded ? (size_t)((end - first) * width)
                                   : (size_t)(corpus->offsets[end - corpus->first]
                                              - corpus->offsets[local]);
    if (needed > corpus->block_capacity || corpus->block == NULL) {
        /* Never NULL, even for a block of empty documents. */
        int32_t *grown = realloc(corpus->block, (needed + 1) * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for %zu token ids "
                               "of '%s'", corpus->path, needed, corpus->tokens_name);
        corpus->block = grown;
        corpus->block_capacity = needed;
    }
    int status = corpus->padded
        ? read_slab(ctx, corpus, corpus->tokens, corpus->tokens_name, 2, first, end - first,
                    width, H5T_NATIVE_INT32, corpus->block)
        : read_slab(ctx, corpus, corpus->tokens, corpus->tokens_name, 1,
                    corpus->offsets[local], (int64_t)needed, 1, H5T_NATIVE_INT32, corpus->block);
    if (status != TFENC_OK)
        return status;
    if (corpus->padded) {
        /* Pack the rows' real tokens end to end, dropping the padding. */
        size_t packed = 0;
        for (int64_t d = first; d < end; d++) {
            int64_t length = corpus->lengths[d - corpus->first];
            memmove(corpus->block + packed, corpus->block + (size_t)((d - first) * width),
                    (size_t)length * sizeof *corpus->block);
            packed += (size_t)length;
        }
        needed = packed;
    }
    /* HDF5 clips values of wider integer types to INT32_MIN/MAX when it reads
     * them as int32. Every id must be in 0..INT32_MAX - 1 (a vocabulary has at
     * most INT32_MAX entries), so a negative id or INT32_MAX is refused here,
     * with the value the file really holds; the embedding's vocabulary check
     * handles the rest. */
    for (size_t i = 0; i < needed; i++)
        if (corpus->block[i] < 0 || corpus->block[i] == INT32_MAX) {
            int64_t document = first;
            size_t seen = 0;
            while (seen + (size_t)corpus->lengths[document - corpus->first] <= i) {
                seen += (size_t)corpus->lengths[document - corpus->first];
                document++;
            }
            return refuse_token(ctx, corpus, document, (int64_t)(i - seen));
        }
    corpus->block_first = first;
    corpus->block_end = end;
    return TFENC_OK;
}

static int hdf5_next(tfenc_context *ctx, void *state, tfenc_document *document)
{
    hdf5_corpus *corpus = state;
    int64_t index = corpus->first + corpus->next;
    if (index >= corpus->end)
        return TFENC_ERR_NOT_FOUND;
    if (index < corpus->block_first || index >= corpus->block_end) {
        int status = load_block(ctx, corpus, index);
        if (status != TFENC_OK)
            return status;
    }
    int64_t length = corpus->lengths[index - corpus->first];
    if (length > INT_MAX)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: dataset '%s': document %lld has %lld "
                           "tokens, more than tfenc handles in one document", corpus->path,
                           corpus->tokens_name, (long long)index, (long long)length);
    /* Within a block the documents' tokens lie end to end. */
    int64_t skip = corpus->offsets[index - corpus->first]
                 - corpus->offsets[corpus->block_first - corpus->first];
    document->token_ids = corpus->block + skip;
    document->n_tokens = (int)length;
    document->source = 0;
    document->line = -1;
    corpus->next++;
    return TFENC_OK;
}

static int hdf5_rewind(tfenc_context *ctx, void *state)
{
    (void)ctx; /* the block stays: it is reloaded only if it is not the first */
    ((hdf5_corpus *)state)->next = 0;
    return TFENC_OK;
}

static int hdf5_select(tfenc_context *ctx, void *state, const tfenc_corpus_range *range)
{
    hdf5_corpus *corpus = state;
    if (range->first_index < 0 || range->n_documents < 0 ||
        range->first_index + range->n_documents > corpus->total_documents)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: documents [%lld, %lld) are not "
                           "in the corpus of %lld", corpus->path, (long long)range->first_index,
                           (long long)(range->first_index + range->n_documents),
                           (long long)corpus->total_documents);
    corpus->next = 0;
    return select_documents(ctx, corpus, range->first_index,
                            range->first_index + range->n_documents);
}

/* From the index alone: no token id is read. */
static int hdf5_count(tfenc_context *ctx, void *state, tfenc_corpus_counts *counts)
{
    (void)ctx;
    hdf5_corpus *corpus = state;
    int64_t n = corpus->end - corpus->first;
    counts->n_documents = n;
    counts->n_tokens = corpus->offsets[n] - corpus->offsets[0];
    corpus->files->documents[0] = n;
    corpus->files->lines[0] = n;
    corpus->files->counted = 1;
    return TFENC_OK;
}

static void hdf5_close(void *state)
{
    hdf5_corpus *corpus = state;
    if (corpus == NULL)
        return;
    if (corpus->tokens >= 0)
        H5Dclose(corpus->tokens);
    if (corpus->index >= 0)
        H5Dclose(corpus->index);
    if (corpus->h5_file >= 0)
        H5Fclose(corpus->h5_file);
    free(corpus->block);
    free(corpus->offsets);
    free(corpus->lengths);
    free(corpus->tokens_name);
    free(corpus->index_name);
    free(corpus->path);
    free(corpus);
}

static int hdf5_open(tfenc_context *ctx, const tfenc_corpus_options *options,
                     tfenc_corpus_files *files, int share, int n_shares, void **state,
                     tfenc_reader_opened *opened)
{
    *state = NULL;
    if (files->n > 1)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input %s: names %d files, but HDF5 "
                           "token ids are read from one file", options->path, files->n);
    hdf5_corpus *corpus = calloc(1, sizeof *corpus);
    if (corpus == NULL || (corpus->path = strdup(options->path)) == NULL) {
        free(corpus);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    }
    *state = corpus;
    corpus->files = files;
    corpus->h5_file = corpus->tokens = corpus->index = -1;
    int status = open_hdf5(ctx, corpus, options, share, n_shares);
    if (status != TFENC_OK)
        return status;
    opened->first_index = corpus->first;
    opened->total_documents = corpus->total_documents;
    return TFENC_OK;
}

static void hdf5_describe(const tfenc_corpus_options *options, char *line, size_t size)
{
    if (options->ids_dataset != NULL)
        snprintf(line, size, "padded: ids in dataset '%s', lengths in '%s'",
                 options->ids_dataset,
                 options->lengths_dataset != NULL ? options->lengths_dataset : "(none)");
    else
        snprintf(line, size, "ragged: ids in dataset '%s', offsets in '%s'",
                 options->tokens_dataset != NULL ? options->tokens_dataset : "tokens",
                 options->offsets_dataset != NULL ? options->offsets_dataset : "offsets");
}

const tfenc_corpus_reader tfenc_hdf5_reader = {
    .open = hdf5_open,
    .next = hdf5_next,
    .rewind = hdf5_rewind,
    .select = hdf5_select,
    .count = hdf5_count,
    .close = hdf5_close,
    .describe = hdf5_describe,
};
