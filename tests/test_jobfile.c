/* Job files (core/job/jobfile): sections in file order with their line
 * numbers, paths resolved against the job's directory, errors that name
 * the file and line, and --set overrides. */
#include "base/context.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "job/jobfile.h"

#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

static tfenc_context ctx;

static void test_jobfile_sections_in_order_with_lines(void)
{
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    const char *text = "; comment\n[job]\ninput = a.txt\n\n[b]\ntype = x\n[a]\ntype = y\n";
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&ctx, "dir/j.ini", text, &job), TFENC_OK);
    CU_ASSERT_EQUAL(job->n_sections, 3);
    CU_ASSERT_STRING_EQUAL(job->sections[1].name, "b");
    CU_ASSERT_STRING_EQUAL(job->sections[2].name, "a");
    CU_ASSERT_EQUAL(tfenc_job_section_get(&job->sections[0], "input")->line, 3);
    CU_ASSERT_EQUAL(job->sections[2].line, 7);
    char *resolved = tfenc_jobfile_resolve_path(job, "a.txt");
    CU_ASSERT_STRING_EQUAL(resolved, "dir/a.txt");
    free(resolved);
    resolved = tfenc_jobfile_resolve_path(job, "/abs/a.txt");
    CU_ASSERT_STRING_EQUAL(resolved, "/abs/a.txt");
    free(resolved);
    tfenc_jobfile_destroy(job);
}

static void expect_parse_error(const char *text, const char *message)
{
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    CU_ASSERT_EQUAL(tfenc_jobfile_parse_string(&ctx, "j.ini", text, &job), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NULL(job);
    CU_ASSERT(contains(tfenc_context_message(&ctx), message));
}

static void test_jobfile_errors_name_line(void)
{
    expect_parse_error("[a]\nx = 1\nx = 2\n", "j.ini:3: [a] key 'x' is set twice (first at line 2)");
    expect_parse_error("[a]\nx = 1\n[b]\ny = 1\n[a]\nz = 1\n", "j.ini:6: section [a] appears twice");
    expect_parse_error("[a]\nthis is not ini\n", "j.ini:2: not INI syntax");
    expect_parse_error("x = 1\n", "j.ini:1: key 'x' is outside any [section]");
}

static void test_jobfile_override(void)
{
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    CU_ASSERT_EQUAL_FATAL(
        tfenc_jobfile_parse_string(&ctx, "j.ini", "[enc.ffn]\nact = relu\n", &job), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_jobfile_override(&ctx, job, "enc.ffn.act = gelu"), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_jobfile_override(&ctx, job, "job.input=x.txt"), TFENC_OK);
    CU_ASSERT_STRING_EQUAL(tfenc_job_section_get(tfenc_jobfile_find(job, "enc.ffn"), "act")->value,
                           "gelu");
    CU_ASSERT_STRING_EQUAL(tfenc_job_section_get(tfenc_jobfile_find(job, "job"), "input")->value,
                           "x.txt");
    CU_ASSERT_EQUAL(tfenc_jobfile_override(&ctx, job, "nodot=1"), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "expected section.key=value"));
    tfenc_jobfile_destroy(job);
}

static const test_case jobfile_cases[] = {
    {"sections in order with lines", test_jobfile_sections_in_order_with_lines},
    {"errors name the line", test_jobfile_errors_name_line},
    {"--set overrides", test_jobfile_override},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"jobfile", NULL, NULL, jobfile_cases},
    {NULL, NULL, NULL, NULL}};
