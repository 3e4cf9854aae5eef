/* Inputs cut short while a job reads them: a text corpus
 * truncated in the middle of a line, and HDF5 corpora of both layouts
 * (contiguous and chunked) truncated after they were opened, must fail the
 * read naming the file, never hand out a partial line or zeros. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/CUnit.h>
#include <hdf5.h>

#include "base/context.h"
#include "base/hdf5_intact.h"
#include "input/corpus.h"
#include "harness/cunit_main.h"

static char directory[256];

static void make_directory(void)
{
    mkdir("tests", 0755);
    mkdir("tests/data", 0755);
    mkdir("tests/data/generated", 0755);
    snprintf(directory, sizeof directory, "tests/data/generated/truncated-XXXXXX");
    if (mkdtemp(directory) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
}

static long long file_size(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 ? (long long)info.st_size : -1;
}

static void test_text_cut_mid_line(void)
{
    static const char data[] = "the first line\nthe second line, longer\nthird\n";
    char path[300];
    snprintf(path, sizeof path, "%s/cut.txt", directory);
    FILE *file = fopen(path, "wb");
    CU_ASSERT_FATAL(file != NULL);
    fwrite(data, 1, sizeof data - 1, file);
    fclose(file);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_TEXT};
    tfenc_corpus *corpus = NULL;
    CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, 0, 1, &corpus) == TFENC_OK);
    /* Cut inside the second line, after the reader opened the file. */
    CU_ASSERT_FATAL(truncate(path, (off_t)(strlen("the first line\n") + 7)) == 0);
    tfenc_document document;
    int status = tfenc_corpus_next(&ctx, corpus, &document);
    /* The stream may have buffered the whole file before the cut; the
     * first line is whole either way. */
    CU_ASSERT(status == TFENC_OK);
    status = tfenc_corpus_next(&ctx, corpus, &document);
    if (status == TFENC_OK) /* read before the cut: the second line must be whole */
        CU_ASSERT_STRING_EQUAL(document.text, "the second line, longer");
    if (status != TFENC_OK) {
        CU_ASSERT(status == TFENC_ERR_IO);
        CU_ASSERT(strstr(ctx.message, path) != NULL);
        CU_ASSERT(strstr(ctx.message, "changed while reading") != NULL);
    }
    tfenc_corpus_close(corpus);
}

/* A ragged corpus of `n` documents of 1..50 tokens, stored contiguous or in
 * chunks of 64 ids; its offsets are written first, so the tokens are last. */
static void write_ragged(const char *path, int n, int chunked)
{
    long long *offsets = malloc(((size_t)n + 1) * sizeof *offsets);
    offsets[0] = 0;
    for (int i = 0; i < n; i++)
        offsets[i + 1] = offsets[i] + 1 + (i * 7) % 50;
    hsize_t n_tokens = (hsize_t)offsets[n], n_offsets = (hsize_t)n + 1;
    int *tokens = malloc(n_tokens * sizeof *tokens);
    for (hsize_t t = 0; t < n_tokens; t++)
        tokens[t] = 1 + (int)(t % 500);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &n_offsets, NULL);
    hid_t dataset = H5Dcreate2(file, "offsets", H5T_NATIVE_LLONG, space, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dataset, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets);
    H5Dclose(dataset);
    H5Sclose(space);
    hid_t create = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk = 64;
    if (chunked)
        H5Pset_chunk(create, 1, &chunk);
    space = H5Screate_simple(1, &n_tokens, NULL);
    dataset = H5Dcreate2(file, "tokens", H5T_NATIVE_INT, space, H5P_DEFAULT, create, H5P_DEFAULT);
    H5Dwrite(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Pclose(create);
    H5Fclose(file);
    free(tokens);
    free(offsets);
}

static void test_hdf5_cut_after_open(void)
{
    for (int chunked = 0; chunked <= 1; chunked++) {
        char path[300];
        snprintf(path, sizeof path, "%s/cut-%d.h5", directory, chunked);
        write_ragged(path, 2000, chunked);
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_HDF5,
                                        .tokens_dataset = "tokens",
                                        .offsets_dataset = "offsets"};
        tfenc_corpus *corpus = NULL;
        CU_ASSERT_FATAL(tfenc_corpus_open(&ctx, &options, 0, 1, &corpus) == TFENC_OK);
        /* The last documents' tokens lie in the file's second half. */
        CU_ASSERT_FATAL(truncate(path, (off_t)(file_size(path) / 2)) == 0);
        tfenc_corpus_range last = {.first_index = 1900, .n_documents = 100};
        int status = tfenc_corpus_select(&ctx, corpus, &last);
        tfenc_document document;
        int zeros = 0;
        while (status == TFENC_OK && (status = tfenc_corpus_next(&ctx, corpus, &document)) ==
                                         TFENC_OK)
            for (int t = 0; t < document.n_tokens; t++)
                zeros += document.token_ids[t] == 0;
        CU_ASSERT(zeros == 0);
        CU_ASSERT(status == TFENC_ERR_IO);
        CU_ASSERT(strstr(ctx.message, path) != NULL);
        CU_ASSERT(strstr(ctx.message, "truncated while this job read") != NULL);
        tfenc_corpus_close(corpus);
    }
}

static void test_check_intact(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/whole.h5", directory);
    write_ragged(path, 100, 1);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    CU_ASSERT(tfenc_hdf5_check_intact(&ctx, file, path, "tokens") == TFENC_OK);
    CU_ASSERT_FATAL(truncate(path, (off_t)(file_size(path) - 1)) == 0);
    CU_ASSERT(tfenc_hdf5_check_intact(&ctx, file, path, "tokens") == TFENC_ERR_IO);
    CU_ASSERT(strstr(ctx.message, "'tokens'") != NULL);
    H5Fclose(file);
}

static int suite_init(void)
{
    make_directory();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

/* The scratch files go, after a failure too (they are small). */
static int suite_clean(void)
{
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", directory);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", directory);
    return 0;
}

static const test_case truncated_inputs_cases[] = {
    {"text cut in the middle of a line", test_text_cut_mid_line},
    {"hdf5 corpus cut after open, contiguous and chunked", test_hdf5_cut_after_open},
    {"one byte short of the end of allocation", test_check_intact},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"truncated inputs", suite_init, suite_clean, truncated_inputs_cases},
    {NULL, NULL, NULL, NULL}};
