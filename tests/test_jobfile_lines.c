/* CUnit suite: job-file lines have no length cap. inih's
 * default buffer cut lines at 198 characters, which a path or a prompt that
 * tfenc-import writes can pass; the only bound left is the job file's size. */
#include "base/context.h"
#include "job/jobfile.h"
#include "harness/cunit_main.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tfenc_context ctx;

/* "[job]\nKEY = xxx...x\nnext = 1\n" with a value of `length` characters. */
static char *job_with_value(size_t length)
{
    static const char head[] = "[job]\nlong = ", tail[] = "\nnext = 1\n";
    char *text = malloc(sizeof head + length + sizeof tail);
    if (text == NULL)
        return NULL;
    memcpy(text, head, sizeof head - 1);
    for (size_t i = 0; i < length; i++)
        text[sizeof head - 1 + i] = (char)('a' + i % 26);
    memcpy(text + sizeof head - 1 + length, tail, sizeof tail);
    return text;
}

static void expect_whole_value(size_t length)
{
    tfenc_context_init(&ctx);
    char *text = job_with_value(length);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    tfenc_jobfile *job = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&ctx, "j.ini", text, &job), TFENC_OK);
    tfenc_job_section *section = tfenc_jobfile_find(job, "job");
    CU_ASSERT_PTR_NOT_NULL_FATAL(section);
    tfenc_job_entry *entry = tfenc_job_section_get(section, "long");
    CU_ASSERT_PTR_NOT_NULL_FATAL(entry);
    CU_ASSERT_EQUAL(strlen(entry->value), length);
    CU_ASSERT_EQUAL(memcmp(entry->value, text + strlen("[job]\nlong = "), length), 0);
    /* The line after the long one is its own line, numbered as in the file. */
    tfenc_job_entry *next = tfenc_job_section_get(section, "next");
    CU_ASSERT_PTR_NOT_NULL_FATAL(next);
    CU_ASSERT_STRING_EQUAL(next->value, "1");
    CU_ASSERT_EQUAL(next->line, 3);
    tfenc_jobfile_destroy(job);
    free(text);
}

static void test_long_values_are_whole(void)
{
    expect_whole_value(197); /* fitted the old buffer */
    expect_whole_value(340); /* a sentence-transformers prompt */
    expect_whole_value(4096); /* PATH_MAX */
    expect_whole_value(500000);
}

static void test_errors_after_a_long_line_name_their_line(void)
{
    tfenc_context_init(&ctx);
    char *text = job_with_value(1000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    size_t length = strlen(text);
    char *longer = realloc(text, length + 32);
    CU_ASSERT_PTR_NOT_NULL_FATAL(longer);
    strcpy(longer + length, "not ini\n");
    tfenc_jobfile *job = NULL;
    CU_ASSERT_EQUAL(tfenc_jobfile_parse_string(&ctx, "j.ini", longer, &job), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "j.ini:4: not INI syntax"));
    free(longer);
}

/* A file written to disk and loaded: the size cap (1 MiB) is the bound. */
static void test_loaded_file_with_long_lines(void)
{
    tfenc_context_init(&ctx);
    char path[] = "/tmp/tfenc-jobfile-lines-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    FILE *file = fdopen(fd, "w");
    char *text = job_with_value(100000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    fputs(text, file);
    fclose(file);
    tfenc_jobfile *job = NULL;
    CU_ASSERT_EQUAL(tfenc_jobfile_load(&ctx, path, &job), TFENC_OK);
    tfenc_jobfile_destroy(job);
    file = fopen(path, "w");
    for (int i = 0; i < 12; i++) /* 1.2 MB */
        fputs(text, file);
    fclose(file);
    job = NULL;
    CU_ASSERT_EQUAL(tfenc_jobfile_load(&ctx, path, &job), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "larger than 1 MiB"));
    CU_ASSERT_PTR_NULL(job);
    unlink(path);
    free(text);
}

static const test_case jobfile_lines_cases[] = {
    {"long values are read whole", test_long_values_are_whole},
    {"errors after a long line name their line", test_errors_after_a_long_line_name_their_line},
    {"a loaded file with long lines", test_loaded_file_with_long_lines},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"job-file lines", NULL, NULL, jobfile_lines_cases},
    {NULL, NULL, NULL, NULL}};
