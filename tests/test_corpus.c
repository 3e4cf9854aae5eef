/* Corpus readers: shares must partition a corpus exactly (compared with a
 * plain whole-file split), every malformed input must be reported with
 * its file and line or dataset, and a JSON Lines null text is what
 * [job] null_text says. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/CUnit.h>
#include <hdf5.h>

#include "harness/cunit_main.h"
#include "base/context.h"
#include "input/corpus.h"
#include "input/jsonl_record.h"

static char directory[256];

static void make_directory(void)
{
    mkdir("tests", 0755);
    mkdir("tests/data", 0755);
    mkdir("tests/data/generated", 0755);
    snprintf(directory, sizeof directory, "tests/data/generated/corpus-XXXXXX");
    if (mkdtemp(directory) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
}

static void write_file(const char *path, const char *data, size_t size)
{
    FILE *file = fopen(path, "wb");
    CU_ASSERT_FATAL(file != NULL);
    CU_ASSERT_FATAL(fwrite(data, 1, size, file) == size);
    fclose(file);
}

/* ------------------------------------------------- an independent split */

/* The reference: the whole file in memory, split on '\n' (a final newline
 * ends the last line rather than starting an empty one), '\r' stripped. */
typedef struct reference_lines {
    char **lines;
    size_t *lengths;
    size_t *starts; /* byte offset of each line */
    int count;
} reference_lines;

static reference_lines split_reference(const char *data, size_t size)
{
    reference_lines ref = {NULL, NULL, NULL, 0};
    ref.lines = malloc((size + 1) * sizeof *ref.lines);
    ref.lengths = malloc((size + 1) * sizeof *ref.lengths);
    ref.starts = malloc((size + 1) * sizeof *ref.starts);
    size_t start = 0;
    while (start < size) {
        size_t end = start;
        while (end < size && data[end] != '\n')
            end++;
        size_t length = end - start;
        if (length > 0 && data[start + length - 1] == '\r')
            length--;
        ref.lines[ref.count] = malloc(length + 1);
        memcpy(ref.lines[ref.count], data + start, length);
        ref.lines[ref.count][length] = '\0';
        ref.lengths[ref.count] = length;
        ref.starts[ref.count] = start;
        ref.count++;
        start = end + 1;
    }
    return ref;
}

static void free_reference(reference_lines *ref)
{
    for (int i = 0; i < ref->count; i++)
        free(ref->lines[i]);
    free(ref->lines);
    free(ref->lengths);
    free(ref->starts);
}

/* The windows of a text corpus (every `stride` lines): the shares' line
 * starts, concatenated, must be the reference's starts of lines 0, stride,
 * 2*stride, ...; and selecting each window must read exactly its lines. */
static void check_windows(const char *path, const reference_lines *ref, int n_shares,
                          int64_t stride)
{
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_TEXT};
    int64_t n_windows = (ref->count + stride - 1) / stride, found = 0, first_index = 0;
    int64_t *starts = calloc((size_t)n_windows + 1, sizeof *starts);
    for (int share = 0; share < n_shares; share++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_corpus *corpus = NULL;
        tfenc_corpus_counts counts;
        CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, share, n_shares, &corpus) == TFENC_OK);
        CU_ASSERT_FATAL(tfenc_corpus_count(&ctx, corpus, &counts) == TFENC_OK);
        tfenc_corpus_set_first_index(corpus, first_index);
        int64_t *mine = NULL, n_mine = 0;
        CU_ASSERT_FATAL(tfenc_corpus_line_starts(&ctx, corpus, stride, &mine, &n_mine) == TFENC_OK);
        CU_ASSERT_FATAL(found + n_mine <= n_windows);
        /* A share with no window start returns no array at all. */
        if (n_mine > 0)
            memcpy(starts + found, mine, (size_t)n_mine * sizeof *mine);
        found += n_mine;
        free(mine);
        first_index += counts.n_documents;
        tfenc_corpus_close(corpus);
    }
    CU_ASSERT(found == n_windows);
    for (int64_t k = 0; k < found; k++)
        CU_ASSERT(starts[k] == (int64_t)ref->starts[k * stride]);
    struct stat file;
    CU_ASSERT_FATAL(stat(path, &file) == 0);
    starts[n_windows] = (int64_t)file.st_size;
    /* Windows read back in reverse, so each select really seeks. */
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_corpus *corpus = NULL;
    CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, 0, 1, &corpus) == TFENC_OK);
    int mismatches = 0;
    for (int64_t k = n_windows - 1; k >= 0 && found == n_windows; k--) {
        int64_t first = k * stride, n = ref->count - first < stride ? ref->count - first : stride;
        tfenc_corpus_range range = {.first_index = first, .n_documents = n,
                                    .byte_start = starts[k], .byte_end = starts[k + 1]};
        CU_ASSERT_FATAL(tfenc_corpus_select(&ctx, corpus, &range) == TFENC_OK);
        tfenc_document document;
        int64_t read = 0;
        while (tfenc_corpus_next(&ctx, corpus, &document) == TFENC_OK) {
            int64_t line = first + document.local_index;
            if (line >= ref->count || document.text_length != ref->lengths[line] ||
                memcmp(document.text, ref->lines[line], ref->lengths[line]) != 0)
                mismatches++;
            read++;
        }
        CU_ASSERT(read == n);
    }
    CU_ASSERT(mismatches == 0);
    tfenc_corpus_close(corpus);
    free(starts);
}

/* Reads every share in turn and checks that, concatenated, they are the
 * reference lines, and that each share's count matches what it yields. */
static void check_shares(const char *path, const char *data, size_t size, int n_shares)
{
    reference_lines ref = split_reference(data, size);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_TEXT};
    int seen = 0, mismatches = 0;
    for (int share = 0; share < n_shares; share++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_corpus *corpus = NULL;
        CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, share, n_shares, &corpus) == TFENC_OK);
        CU_ASSERT(tfenc_corpus_first_index(corpus) == (share == 0 ? 0 : -1));
        tfenc_corpus_counts counts;
        CU_ASSERT_FATAL(tfenc_corpus_count(&ctx, corpus, &counts) == TFENC_OK);
        CU_ASSERT(counts.n_tokens == -1);
        tfenc_document document;
        int64_t local = 0;
        int status;
        while ((status = tfenc_corpus_next(&ctx, corpus, &document)) == TFENC_OK) {
            CU_ASSERT(document.local_index == local);
            local++;
            if (seen >= ref.count || document.text_length != ref.lengths[seen]
                || memcmp(document.text, ref.lines[seen], ref.lengths[seen]) != 0
                || document.text[document.text_length] != '\0')
                mismatches++;
            seen++;
        }
        CU_ASSERT(status == TFENC_ERR_NOT_FOUND);
        CU_ASSERT(ctx.status == TFENC_OK);
        CU_ASSERT(local == counts.n_documents);
        tfenc_corpus_close(corpus);
    }
    CU_ASSERT(mismatches == 0);
    CU_ASSERT(seen == ref.count);
    if (mismatches != 0 || seen != ref.count)
        fprintf(stderr, "\n%s: %d shares: %d lines read, %d expected, %d mismatches\n", path,
                n_shares, seen, ref.count, mismatches);
    for (int64_t stride = 1; stride <= 4 && ref.count > 0; stride++)
        check_windows(path, &ref, n_shares, stride);
    free_reference(&ref);
}

/* Random corpora with empty lines, CRLF, lines longer than a share, with
 * and without a final newline, for every share count from 1 to 9. */
static void test_text_shares_partition(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/random.txt", directory);
    srand(12345);
    for (int trial = 0; trial < 60; trial++) {
        size_t capacity = 4096, size = 0;
        char *data = malloc(capacity);
        int n_lines = rand() % 40;
        int long_lines = trial % 3 == 0;
        for (int i = 0; i < n_lines; i++) {
            int length = rand() % 4 == 0 ? 0 : rand() % (long_lines ? 400 : 12);
            if (size + (size_t)length + 2 >= capacity) {
                capacity = 2 * (capacity + (size_t)length);
                data = realloc(data, capacity);
            }
            for (int k = 0; k < length; k++)
                data[size++] = (char)('a' + rand() % 26);
            if (rand() % 5 == 0)
                data[size++] = '\r';
            if (i + 1 < n_lines || trial % 2 == 0)
                data[size++] = '\n';
        }
        write_file(path, data, size);
        for (int n_shares = 1; n_shares <= 9; n_shares++)
            check_shares(path, data, size, n_shares);
        free(data);
    }
}

static void test_text_edge_cases(void)
{
    static const char *cases[] = {"", "\n", "\n\n\n", "a", "a\n", "a\r\n\r\nb", "\r\n",
                                  "one\ntwo\nthree", "x\n\n", "\n\nx"};
    char path[300];
    snprintf(path, sizeof path, "%s/edge.txt", directory);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_file(path, cases[c], strlen(cases[c]));
        for (int n_shares = 1; n_shares <= 12; n_shares++)
            check_shares(path, cases[c], strlen(cases[c]), n_shares);
    }
}

/* A 10 MB line among short ones: read whole, never truncated. */
static void test_text_long_line(void)
{
    size_t long_length = 10u << 20;
    size_t size = long_length + 64;
    char *data = malloc(size);
    size_t at = 0;
    at += (size_t)sprintf(data, "short\n");
    memset(data + at, 'x', long_length);
    at += long_length;
    at += (size_t)sprintf(data + at, "\nafter\n\ntail");
    char path[300];
    snprintf(path, sizeof path, "%s/long.txt", directory);
    write_file(path, data, at);
    check_shares(path, data, at, 1);
    check_shares(path, data, at, 4);
    free(data);
}

/* Runs a whole share and returns the first error (or TFENC_OK). */
static int read_all(tfenc_context *ctx, const tfenc_corpus_options *options, int share,
                    int n_shares, int64_t *documents)
{
    tfenc_corpus *corpus = NULL;
    int status = tfenc_corpus_open(ctx, options, share, n_shares, &corpus);
    if (status != TFENC_OK)
        return status;
    tfenc_document document;
    int64_t n = 0;
    while ((status = tfenc_corpus_next(ctx, corpus, &document)) == TFENC_OK)
        n++;
    if (documents != NULL)
        *documents = n;
    tfenc_corpus_close(corpus);
    return status == TFENC_ERR_NOT_FOUND ? TFENC_OK : status;
}

static void test_text_nul_byte(void)
{
    static const char data[] = "first\nsecond\nthi\0rd\nfourth\n";
    char path[300];
    snprintf(path, sizeof path, "%s/nul.txt", directory);
    write_file(path, data, sizeof data - 1);
    /* Share 0 of 1 knows its line numbers; share 1 of 2 (bytes 13..) must
     * count them: both must name line 3 and the NUL's byte offset, 16. */
    for (int n_shares = 1; n_shares <= 2; n_shares++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_TEXT};
        int share = n_shares - 1;
        CU_ASSERT(read_all(&ctx, &options, share, n_shares, NULL) == TFENC_ERR_INPUT);
        CU_ASSERT(strstr(ctx.message, path) != NULL);
        CU_ASSERT(strstr(ctx.message, "line 3") != NULL);
        CU_ASSERT(strstr(ctx.message, "byte offset 16") != NULL);
    }
    /* count() validates up front. */
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_TEXT};
    tfenc_corpus *corpus = NULL;
    CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, 0, 1, &corpus) == TFENC_OK);
    tfenc_corpus_counts counts;
    CU_ASSERT(tfenc_corpus_count(&ctx, corpus, &counts) == TFENC_ERR_INPUT);
    tfenc_corpus_close(corpus);
}

static void test_missing_file(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_corpus_options options = {.path = "/nonexistent/corpus.txt",
                                    .format = TFENC_CORPUS_TEXT};
    tfenc_corpus *corpus = NULL;
    CU_ASSERT(tfenc_corpus_open(&ctx, &options, 0, 1, &corpus) == TFENC_ERR_IO);
    CU_ASSERT(strstr(ctx.message, "/nonexistent/corpus.txt") != NULL);
    CU_ASSERT(corpus == NULL);
}

static void test_format_names(void)
{
    tfenc_corpus_format format;
    CU_ASSERT(tfenc_corpus_format_from_name("jsonl", &format) == TFENC_OK
              && format == TFENC_CORPUS_JSONL);
    CU_ASSERT(tfenc_corpus_format_from_name("hdf5", &format) == TFENC_OK
              && format == TFENC_CORPUS_HDF5);
    CU_ASSERT(tfenc_corpus_format_from_name("text", &format) == TFENC_OK
              && format == TFENC_CORPUS_TEXT);
    CU_ASSERT(tfenc_corpus_format_from_name("csv", &format) == TFENC_ERR_NOT_FOUND);
    CU_ASSERT(tfenc_corpus_format_from_path("a/b.jsonl") == TFENC_CORPUS_JSONL);
    CU_ASSERT(tfenc_corpus_format_from_path("b.H5") == TFENC_CORPUS_HDF5);
    CU_ASSERT(tfenc_corpus_format_from_path("x.hdf5") == TFENC_CORPUS_HDF5);
    CU_ASSERT(tfenc_corpus_format_from_path("x.txt") == TFENC_CORPUS_TEXT);
    CU_ASSERT(tfenc_corpus_format_from_path("dir.h5/corpus") == TFENC_CORPUS_TEXT);
}

/* ---------------------------------------------------------- JSON Lines */

static void test_jsonl_documents(void)
{
    static const char data[] =
        "{\"text\": \"hello world\", \"id\": \"doc-1\"}\r\n"
        "{\"id\": 42, \"text\": \"caf\\u00e9\", \"extra\": [1, 2]}\n"
        "{\"text\": \"\", \"id\": \"a-much-longer-identifier\"}\n"
        "{\"text\": \"last\", \"id\": -7}";
    static const char *texts[] = {"hello world", "caf\xc3\xa9", "", "last"};
    static const char *ids[] = {"doc-1", "42", "a-much-longer-identifier", "-7"};
    char path[300];
    snprintf(path, sizeof path, "%s/docs.jsonl", directory);
    write_file(path, data, sizeof data - 1);
    for (int n_shares = 1; n_shares <= 5; n_shares++) {
        int seen = 0;
        for (int share = 0; share < n_shares; share++) {
            tfenc_context ctx;
            tfenc_context_init(&ctx);
            tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_JSONL,
                                            .id_field = "id"};
            tfenc_corpus *corpus = NULL;
            CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, share, n_shares, &corpus)
                            == TFENC_OK);
            tfenc_corpus_counts counts;
            CU_ASSERT_FATAL(tfenc_corpus_count(&ctx, corpus, &counts) == TFENC_OK);
            size_t longest = 0;
            tfenc_document document;
            while (tfenc_corpus_next(&ctx, corpus, &document) == TFENC_OK) {
                CU_ASSERT_FATAL(seen < 4);
                CU_ASSERT(document.text_length == strlen(texts[seen]));
                CU_ASSERT(strcmp(document.text, texts[seen]) == 0);
                CU_ASSERT(document.id != NULL && strcmp(document.id, ids[seen]) == 0);
                CU_ASSERT(document.id_length == strlen(ids[seen]));
                if (document.id_length > longest)
                    longest = document.id_length;
                seen++;
            }
            CU_ASSERT(counts.max_id_length == longest);
            tfenc_corpus_close(corpus);
        }
        CU_ASSERT(seen == 4);
    }
}

/* `data` written to `path` must fail with TFENC_ERR_INPUT naming the file
 * and `expect` (the line and the field), read whole or as 2 shares. */
static void check_refused(const char *path, const char *data, const tfenc_corpus_options *given,
                          const char *expect)
{
    write_file(path, data, strlen(data));
    for (int n_shares = 1; n_shares <= 2; n_shares++) {
        int errors = 0;
        for (int share = 0; share < n_shares; share++) {
            tfenc_context ctx;
            tfenc_context_init(&ctx);
            tfenc_corpus_options options = *given;
            options.path = path;
            if (read_all(&ctx, &options, share, n_shares, NULL) != TFENC_OK) {
                errors++;
                CU_ASSERT(ctx.status == TFENC_ERR_INPUT);
                CU_ASSERT(strstr(ctx.message, path) != NULL);
                CU_ASSERT(strstr(ctx.message, expect) != NULL);
                if (strstr(ctx.message, expect) == NULL)
                    fprintf(stderr, "\nexpected '%s' in: %s\n", expect, ctx.message);
            }
        }
        CU_ASSERT(errors == 1);
    }
}

/* Each bad line must fail naming the file, the line and (for fields) the
 * field; `expect` is a fragment the message must hold. */
static void check_jsonl_error(const char *data, const char *id_field, const char *expect)
{
    char path[300];
    snprintf(path, sizeof path, "%s/bad.jsonl", directory);
    const tfenc_corpus_options options = {.format = TFENC_CORPUS_JSONL, .text_field = "body",
                                          .id_field = id_field};
    check_refused(path, data, &options, expect);
}

static void test_jsonl_errors(void)
{
    static const char good[] = "{\"body\": \"fine\", \"key\": \"k\"}\n";
    char data[512];
    snprintf(data, sizeof data, "%s%s{\"text\": \"wrong field\", \"key\": \"k\"}\n", good, good);
    check_jsonl_error(data, NULL, "line 3: text field 'body' is missing");
    snprintf(data, sizeof data, "%s%s%s{\"body\": 3, \"key\": \"k\"}\n", good, good, good);
    check_jsonl_error(data, NULL, "line 4: text field 'body' is an integer, expected a string");
    snprintf(data, sizeof data, "%s{\"body\": \"x\" \"key\": 1}\n%s", good, good);
    check_jsonl_error(data, NULL, "line 2, column");
    snprintf(data, sizeof data, "%s\n%s", good, good);
    check_jsonl_error(data, NULL, "line 2: blank line");
    snprintf(data, sizeof data, "%s%s   \n", good, good);
    check_jsonl_error(data, NULL, "line 3: blank line");
    snprintf(data, sizeof data, "%s[1, 2]\n%s", good, good);
    check_jsonl_error(data, NULL, "line 2: expected a JSON object, found an array");
    snprintf(data, sizeof data, "%s%s{\"body\": \"no id\"}\n", good, good);
    check_jsonl_error(data, "key", "line 3: id field 'key' is missing");
    snprintf(data, sizeof data, "%s{\"body\": \"x\", \"key\": 1.5}\n%s", good, good);
    check_jsonl_error(data, "key", "line 2: id field 'key' is a number, expected a string or an integer");
}

/* ---------------------------------------------------------------- HDF5 */

static void write_dataset(hid_t file, const char *name, hid_t type, int rank,
                          const hsize_t *dims, const void *data)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_FATAL(dataset >= 0);
    CU_ASSERT(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(dataset);
    H5Sclose(space);
}

/* A ragged corpus of N documents whose token j of document i is
 * 1000*i + j; some documents are empty, one is long. */
#define RAGGED_DOCS 23
static void ragged_lengths(int64_t *lengths)
{
    for (int i = 0; i < RAGGED_DOCS; i++)
        lengths[i] = i % 5 == 3 ? 0 : i == 11 ? 300 : 1 + (i * 7) % 13;
}

static void make_ragged(const char *path, int64_t *total)
{
    int64_t lengths[RAGGED_DOCS], offsets[RAGGED_DOCS + 1] = {0};
    ragged_lengths(lengths);
    for (int i = 0; i < RAGGED_DOCS; i++)
        offsets[i + 1] = offsets[i] + lengths[i];
    int32_t *tokens = malloc((size_t)offsets[RAGGED_DOCS] * sizeof *tokens);
    for (int i = 0; i < RAGGED_DOCS; i++)
        for (int64_t j = 0; j < lengths[i]; j++)
            tokens[offsets[i] + j] = (int32_t)(1000 * i + j);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t t_dims[1] = {(hsize_t)offsets[RAGGED_DOCS]}, o_dims[1] = {RAGGED_DOCS + 1};
    write_dataset(file, "tok", H5T_STD_I32LE, 1, t_dims, tokens);
    write_dataset(file, "off", H5T_STD_I64LE, 1, o_dims, offsets);
    H5Fclose(file);
    free(tokens);
    *total = offsets[RAGGED_DOCS];
}

/* Reads all shares; checks documents, first indices and document balance. */
static void check_hdf5_shares(const tfenc_corpus_options *options, int n_shares)
{
    int64_t lengths[RAGGED_DOCS];
    ragged_lengths(lengths);
    int64_t next_index = 0;
    for (int share = 0; share < n_shares; share++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_corpus *corpus = NULL;
        CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, options, share, n_shares, &corpus) == TFENC_OK);
        CU_ASSERT(tfenc_corpus_first_index(corpus) == next_index);
        tfenc_corpus_counts counts;
        CU_ASSERT_FATAL(tfenc_corpus_count(&ctx, corpus, &counts) == TFENC_OK);
        /* Share k starts at document k*N/n: shares differ by one document
         * at most. */
        CU_ASSERT(counts.n_documents >= RAGGED_DOCS / n_shares &&
                  counts.n_documents <= RAGGED_DOCS / n_shares + 1);
        tfenc_document document;
        int64_t tokens = 0, documents = 0;
        for (int pass = 0; pass < 2; pass++) { /* the second pass checks rewind */
            int64_t index = tfenc_corpus_first_index(corpus);
            tokens = documents = 0;
            while (tfenc_corpus_next(&ctx, corpus, &document) == TFENC_OK) {
                CU_ASSERT(document.local_index == documents);
                CU_ASSERT(document.text == NULL);
                CU_ASSERT_FATAL(index < RAGGED_DOCS);
                CU_ASSERT(document.n_tokens == lengths[index]);
                int wrong = 0;
                for (int j = 0; j < document.n_tokens; j++)
                    wrong += document.token_ids[j] != 1000 * index + j;
                CU_ASSERT(wrong == 0);
                tokens += document.n_tokens;
                documents++;
                index++;
            }
            CU_ASSERT(ctx.status == TFENC_OK);
            CU_ASSERT(tfenc_corpus_rewind(&ctx, corpus) == TFENC_OK);
        }
        CU_ASSERT(documents == counts.n_documents);
        CU_ASSERT(tokens == counts.n_tokens);
        next_index += documents;
        tfenc_corpus_close(corpus);
    }
    CU_ASSERT(next_index == RAGGED_DOCS);
}

/* Kept values to text and back, bit for bit: doubles through %.17g and
 * strtod, int64's ends, strings holding the codec's own tags. */
static void test_kept_values_codec(void)
{
    const tfenc_kept_value values[] = {
        {.type = TFENC_KEPT_STRING, .string = "s3:i1;f", .length = 7},
        {.type = TFENC_KEPT_STRING, .string = "", .length = 0},
        {.type = TFENC_KEPT_INTEGER, .integer = INT64_MIN},
        {.type = TFENC_KEPT_INTEGER, .integer = INT64_MAX},
        {.type = TFENC_KEPT_FLOAT, .real = 0.1},
        {.type = TFENC_KEPT_FLOAT, .real = -0.0},
        {.type = TFENC_KEPT_FLOAT, .real = 4.9406564584124654e-324},
        {.type = TFENC_KEPT_FLOAT, .real = 1.7976931348623157e308},
        {.type = TFENC_KEPT_NULL},
        {.type = TFENC_KEPT_ABSENT}};
    const int n = (int)(sizeof values / sizeof values[0]);
    tfenc_kept_text text = {0};
    for (int i = 0; i < n; i++)
        CU_ASSERT_FATAL(tfenc_kept_append(&text, &values[i]) == 0);
    CU_ASSERT(strlen(text.text) == text.length);
    const char *cursor = text.text;
    for (int i = 0; i < n; i++) {
        tfenc_kept_value value;
        CU_ASSERT_FATAL(tfenc_kept_next(&cursor, &value) == 0);
        CU_ASSERT(value.type == values[i].type);
        if (value.type == TFENC_KEPT_STRING)
            CU_ASSERT(value.length == values[i].length
                      && memcmp(value.string, values[i].string, value.length) == 0);
        CU_ASSERT(value.integer == values[i].integer);
        CU_ASSERT(memcmp(&value.real, &values[i].real, sizeof value.real) == 0);
    }
    tfenc_kept_value value;
    CU_ASSERT(*cursor == '\0' && tfenc_kept_next(&cursor, &value) != 0);
    const char *bad[] = {"s9:short", "i12", "x", "s:abc", "f;"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cursor = bad[i];
        CU_ASSERT(tfenc_kept_next(&cursor, &value) != 0);
    }
    tfenc_kept_text_free(&text);
}

/* JSON Lines keep_fields: each document's values in order (strings,
 * integers, floats, null, absent), whatever share reads it, and what the
 * counting pass learns: each type's first document, the longest string. */
static void test_jsonl_kept_fields(void)
{
    static const char data[] =
        "{\"text\": \"a\", \"url\": \"https://x/1\", \"n\": 7, \"score\": 0.25}\n"
        "{\"text\": \"b\", \"url\": null, \"n\": -3, \"score\": 2}\n"
        "{\"text\": \"c\", \"n\": 9007199254740993, \"score\": 1e-7}\n"
        "{\"text\": \"d\", \"url\": \"caf\\u00e9\", \"n\": null, \"score\": null}\n";
    static const char *const keep[] = {"url", "n", "score"};
    static const struct {
        tfenc_kept_type type[3];
        const char *url;
        int64_t n;
        double score;
    } expected[] = {
        {{TFENC_KEPT_STRING, TFENC_KEPT_INTEGER, TFENC_KEPT_FLOAT}, "https://x/1", 7, 0.25},
        {{TFENC_KEPT_NULL, TFENC_KEPT_INTEGER, TFENC_KEPT_INTEGER}, NULL, -3, 2},
        {{TFENC_KEPT_ABSENT, TFENC_KEPT_INTEGER, TFENC_KEPT_FLOAT}, NULL, 9007199254740993LL,
         1e-7},
        {{TFENC_KEPT_STRING, TFENC_KEPT_NULL, TFENC_KEPT_NULL}, "caf\xc3\xa9", 0, 0}};
    char path[300];
    snprintf(path, sizeof path, "%s/kept.jsonl", directory);
    write_file(path, data, sizeof data - 1);
    for (int n_shares = 1; n_shares <= 3; n_shares++) {
        int seen = 0;
        for (int share = 0; share < n_shares; share++) {
            tfenc_context ctx;
            tfenc_context_init(&ctx);
            tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_JSONL,
                                            .keep_fields = keep, .n_keep_fields = 3};
            tfenc_corpus *corpus = NULL;
            CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, share, n_shares, &corpus)
                            == TFENC_OK);
            tfenc_corpus_counts counts;
            CU_ASSERT_FATAL(tfenc_corpus_count(&ctx, corpus, &counts) == TFENC_OK);
            int first = seen;
            tfenc_document document;
            while (tfenc_corpus_next(&ctx, corpus, &document) == TFENC_OK) {
                CU_ASSERT_FATAL(seen < 4 && document.kept != NULL);
                CU_ASSERT(strlen(document.kept) == document.kept_length);
                CU_ASSERT(document.kept_length <= counts.max_kept_length);
                const char *cursor = document.kept;
                tfenc_kept_value value[3];
                for (int k = 0; k < 3; k++) {
                    CU_ASSERT_FATAL(tfenc_kept_next(&cursor, &value[k]) == 0);
                    CU_ASSERT(value[k].type == expected[seen].type[k]);
                }
                if (value[0].type == TFENC_KEPT_STRING)
                    CU_ASSERT(value[0].length == strlen(expected[seen].url)
                              && memcmp(value[0].string, expected[seen].url,
                                        value[0].length) == 0);
                if (value[1].type == TFENC_KEPT_INTEGER)
                    CU_ASSERT(value[1].integer == expected[seen].n);
                if (value[2].type == TFENC_KEPT_FLOAT)
                    CU_ASSERT(value[2].real == expected[seen].score);
                if (value[2].type == TFENC_KEPT_INTEGER)
                    CU_ASSERT((double)value[2].integer == expected[seen].score);
                /* The counts name the share's first document of each type. */
                for (int k = 0; k < 3; k++) {
                    int64_t at = counts.kept[k].first[value[k].type];
                    CU_ASSERT(at >= 0 && at <= seen - first);
                }
                seen++;
            }
            if (share == 0 && n_shares == 1) {
                CU_ASSERT(counts.kept[0].first[TFENC_KEPT_STRING] == 0);
                CU_ASSERT(counts.kept[0].first[TFENC_KEPT_NULL] == 1);
                CU_ASSERT(counts.kept[0].first[TFENC_KEPT_ABSENT] == 2);
                CU_ASSERT(counts.kept[0].first[TFENC_KEPT_FLOAT] == -1);
                CU_ASSERT(counts.kept[0].longest == strlen("https://x/1"));
                CU_ASSERT(counts.kept[2].first[TFENC_KEPT_INTEGER] == 1);
                CU_ASSERT(counts.kept[2].first[TFENC_KEPT_FLOAT] == 0);
            }
            tfenc_corpus_close(corpus);
        }
        CU_ASSERT(seen == 4);
    }
}

/* One refused line: the file, the line and the kept field. */
static void check_kept_error(const char *data, size_t max_field_bytes, const char *expect)
{
    static const char *const keep[] = {"url"};
    char path[300];
    snprintf(path, sizeof path, "%s/bad-kept.jsonl", directory);
    const tfenc_corpus_options options = {.format = TFENC_CORPUS_JSONL, .keep_fields = keep,
                                          .n_keep_fields = 1,
                                          .max_field_bytes = max_field_bytes};
    check_refused(path, data, &options, expect);
}

static void test_jsonl_kept_errors(void)
{
    static const char good[] = "{\"text\": \"fine\", \"url\": \"u\"}\n";
    char data[512];
    snprintf(data, sizeof data, "%s%s{\"text\": \"x\", \"url\": {\"a\": 1}}\n", good, good);
    check_kept_error(data, 0, "line 3: keep_fields 'url' is an object");
    snprintf(data, sizeof data, "%s{\"text\": \"x\", \"url\": [1]}\n%s", good, good);
    check_kept_error(data, 0, "line 2: keep_fields 'url' is an array");
    snprintf(data, sizeof data, "%s{\"text\": \"x\", \"url\": false}\n%s", good, good);
    check_kept_error(data, 0, "line 2: keep_fields 'url' is a boolean");
    snprintf(data, sizeof data, "%s%s{\"text\": \"x\", \"url\": \"12345\"}\n", good, good);
    check_kept_error(data, 4, "line 3: keep_fields 'url' is 5 bytes long, more than [job] "
                              "max_field_bytes = 4");
    /* Fields are kept from records, not from lines of text. */
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    static const char *const keep[] = {"url"};
    char path[300];
    snprintf(path, sizeof path, "%s/plain.txt", directory);
    write_file(path, "one\ntwo\n", 8);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_TEXT,
                                    .keep_fields = keep, .n_keep_fields = 1};
    tfenc_corpus *corpus = NULL;
    CU_ASSERT(tfenc_corpus_open(&ctx, &options, 0, 1, &corpus) == TFENC_ERR_CONFIG);
    CU_ASSERT(strstr(ctx.message, "keep_fields = url") != NULL
              && strstr(ctx.message, "not from a text corpus") != NULL);
    CU_ASSERT(corpus == NULL);
}

static void test_hdf5_ragged(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/ragged.h5", directory);
    int64_t total;
    make_ragged(path, &total);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_HDF5,
                                    .tokens_dataset = "tok", .offsets_dataset = "off"};
    for (int n_shares = 1; n_shares <= 30; n_shares += n_shares < 6 ? 1 : 8)
        check_hdf5_shares(&options, n_shares);
}

static void test_hdf5_padded(void)
{
    int64_t lengths[RAGGED_DOCS];
    ragged_lengths(lengths);
    const int width = 300;
    int32_t *ids = malloc((size_t)RAGGED_DOCS * width * sizeof *ids);
    int16_t short_lengths[RAGGED_DOCS];
    for (int i = 0; i < RAGGED_DOCS; i++) {
        short_lengths[i] = (int16_t)lengths[i];
        for (int j = 0; j < width; j++)
            ids[i * width + j] = j < lengths[i] ? 1000 * i + j : -1; /* -1 pads */
    }
    char path[300];
    snprintf(path, sizeof path, "%s/padded.h5", directory);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t i_dims[2] = {RAGGED_DOCS, (hsize_t)width}, l_dims[1] = {RAGGED_DOCS};
    write_dataset(file, "input_ids", H5T_STD_I32LE, 2, i_dims, ids);
    write_dataset(file, "lengths", H5T_STD_I16LE, 1, l_dims, short_lengths);
    H5Fclose(file);
    free(ids);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_HDF5,
                                    .ids_dataset = "input_ids", .lengths_dataset = "lengths"};
    for (int n_shares = 1; n_shares <= 7; n_shares++)
        check_hdf5_shares(&options, n_shares);
}

/* Builds a file from one tokens and one index dataset and expects opening
 * (or reading) share 0 of 1 to fail naming the file and `expect`. */
static void check_hdf5_error(const char *tokens_name, hid_t tokens_type, int tokens_rank,
                             const hsize_t *tokens_dims, const void *tokens,
                             const char *index_name, hid_t index_type, const hsize_t *index_dims,
                             const void *index, int padded, const char *expect)
{
    char path[300];
    snprintf(path, sizeof path, "%s/bad.h5", directory);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (tokens_name != NULL)
        write_dataset(file, tokens_name, tokens_type, tokens_rank, tokens_dims, tokens);
    if (index_name != NULL)
        write_dataset(file, index_name, index_type, 1, index_dims, index);
    H5Fclose(file);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_HDF5};
    if (padded) {
        options.ids_dataset = "ids";
        options.lengths_dataset = "lengths";
    }
    CU_ASSERT(read_all(&ctx, &options, 0, 1, NULL) == TFENC_ERR_INPUT);
    CU_ASSERT(strstr(ctx.message, path) != NULL);
    CU_ASSERT(strstr(ctx.message, expect) != NULL);
    if (strstr(ctx.message, expect) == NULL)
        fprintf(stderr, "\nexpected '%s' in: %s\n", expect, ctx.message);
}

static void test_hdf5_errors(void)
{
    int32_t tokens[6] = {5, 6, 7, 8, 9, 10};
    hsize_t t6[1] = {6}, o4[1] = {4}, o3[1] = {3};
    int64_t good[4] = {0, 2, 2, 6};
    check_hdf5_error(NULL, 0, 0, NULL, NULL, "offsets", H5T_STD_I64LE, o4, good, 0,
                     "dataset 'tokens' not found");
    check_hdf5_error("tokens", H5T_STD_I32LE, 1, t6, tokens, NULL, 0, NULL, NULL, 0,
                     "dataset 'offsets' not found");
    float float_tokens[6] = {0};
    check_hdf5_error("tokens", H5T_IEEE_F32LE, 1, t6, float_tokens, "offsets", H5T_STD_I64LE,
                     o4, good, 0, "dataset 'tokens' must hold integers");
    hsize_t t23[2] = {2, 3};
    check_hdf5_error("tokens", H5T_STD_I32LE, 2, t23, tokens, "offsets", H5T_STD_I64LE, o4, good,
                     0, "dataset 'tokens' must have rank 1, found rank 2");
    int64_t decreasing[4] = {0, 3, 2, 6};
    check_hdf5_error("tokens", H5T_STD_I32LE, 1, t6, tokens, "offsets", H5T_STD_I64LE, o4,
                     decreasing, 0, "dataset 'offsets' decreases at entry 2");
    int64_t short_end[4] = {0, 2, 2, 5};
    check_hdf5_error("tokens", H5T_STD_I32LE, 1, t6, tokens, "offsets", H5T_STD_I64LE, o4,
                     short_end, 0, "dataset 'offsets' ends at 5 but 'tokens' holds 6 tokens");
    int32_t late_start[4] = {1, 2, 2, 6};
    check_hdf5_error("tokens", H5T_STD_I32LE, 1, t6, tokens, "offsets", H5T_STD_I32LE, o4,
                     late_start, 0, "dataset 'offsets' must start at 0");
    int32_t negative_tokens[6] = {5, 6, 7, -8, 9, 10};
    check_hdf5_error("tokens", H5T_STD_I32LE, 1, t6, negative_tokens, "offsets", H5T_STD_I64LE,
                     o4, good, 0, "dataset 'tokens': document 2 has a negative token id -8 at "
                     "position 1");
    /* Padded: lengths beyond the width, negative lengths, row mismatch. */
    int32_t too_long[3] = {1, 3, 2};
    check_hdf5_error("ids", H5T_STD_I32LE, 2, (hsize_t[]){3, 2}, tokens, "lengths",
                     H5T_STD_I32LE, o3, too_long, 1, "dataset 'lengths': entry 1 is 3, outside "
                     "[0, 2]");
    int32_t negative[3] = {1, -1, 2};
    check_hdf5_error("ids", H5T_STD_I32LE, 2, (hsize_t[]){3, 2}, tokens, "lengths",
                     H5T_STD_I32LE, o3, negative, 1, "entry 1 is -1");
    check_hdf5_error("ids", H5T_STD_I32LE, 2, (hsize_t[]){2, 3}, tokens, "lengths",
                     H5T_STD_I32LE, o3, negative, 1, "dataset 'ids' has 2 rows but 'lengths' "
                     "has 3 entries");
    /* Not an HDF5 file at all. */
    char path[300];
    snprintf(path, sizeof path, "%s/not.h5", directory);
    write_file(path, "hello", 5);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_HDF5};
    CU_ASSERT(read_all(&ctx, &options, 0, 1, NULL) == TFENC_ERR_IO);
    CU_ASSERT(strstr(ctx.message, path) != NULL);
}

static int suite_init(void)
{
    make_directory();
    return 0;
}

/* The files stay for inspection when something failed. */
static int suite_clean(void)
{
    if (CU_get_number_of_failures() != 0)
        return 0;
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", directory);
    return system(command) != 0;
}

/* A null text, as [job] null_text says: an error that names the field and
 * the setting, an empty document, or a record left out; a string or an
 * integer id either way. */
static void test_jsonl_null_text(void)
{
    tfenc_jsonl_fields fields = {.text_field = "text", .id_field = "id"};
    tfenc_jsonl_record record = {0};
    tfenc_document document;
    char why[256];
    const char *line = "{\"id\": 7, \"text\": null}";
    memset(&document, 0, sizeof document);
    fields.null_text = TFENC_NULL_TEXT_ERROR;
    CU_ASSERT_EQUAL(tfenc_jsonl_record_read(&fields, line, strlen(line), &record, &document, why,
                                            sizeof why), TFENC_ERR_INPUT);
    CU_ASSERT_STRING_EQUAL(why, ": text field 'text' is null (set [job] null_text = empty to "
                                "read it as an empty document, or skip to leave it out)");
    fields.null_text = TFENC_NULL_TEXT_SKIP;
    CU_ASSERT_EQUAL(tfenc_jsonl_record_read(&fields, line, strlen(line), &record, &document, why,
                                            sizeof why), TFENC_JSONL_SKIPPED);
    fields.null_text = TFENC_NULL_TEXT_EMPTY;
    CU_ASSERT_EQUAL(tfenc_jsonl_record_read(&fields, line, strlen(line), &record, &document, why,
                                            sizeof why), TFENC_OK);
    CU_ASSERT_EQUAL(document.text_length, 0);
    CU_ASSERT_STRING_EQUAL(document.text, "");
    CU_ASSERT_STRING_EQUAL(document.id, "7");
    /* A text that is not a string is still refused, null_text or not. */
    const char *number = "{\"id\": \"a\", \"text\": 3}";
    CU_ASSERT_EQUAL(tfenc_jsonl_record_read(&fields, number, strlen(number), &record, &document,
                                            why, sizeof why), TFENC_ERR_INPUT);
    CU_ASSERT_STRING_EQUAL(why, ": text field 'text' is an integer, expected a string");
    tfenc_jsonl_record_clear(&record);
}

static const test_case corpus_cases[] = {
    {"text shares partition random corpora", test_text_shares_partition},
    {"text edge cases", test_text_edge_cases},
    {"text 10 MB line", test_text_long_line},
    {"text NUL byte", test_text_nul_byte},
    {"missing file", test_missing_file},
    {"format names", test_format_names},
    {"jsonl documents and ids", test_jsonl_documents},
    {"jsonl errors", test_jsonl_errors},
    {"jsonl null text", test_jsonl_null_text},
    {"kept values to text and back", test_kept_values_codec},
    {"jsonl keep_fields", test_jsonl_kept_fields},
    {"jsonl keep_fields errors", test_jsonl_kept_errors},
    {"hdf5 ragged shares", test_hdf5_ragged},
    {"hdf5 padded shares", test_hdf5_padded},
    {"hdf5 invalid inputs", test_hdf5_errors},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"corpus", suite_init, suite_clean, corpus_cases},
    {NULL, NULL, NULL, NULL}};
