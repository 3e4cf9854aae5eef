/* The job's inputs come from one place: every key read
 * with tfenc_param_input_path is listed by tfenc_jobfile_each_input, with
 * what it is, "[section] key" and its path resolved against the job file's
 * directory, --set overrides included; keys read otherwise are not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/context.h"
#include "job/jobfile.h"
#include "job/params.h"
#include "harness/cunit_main.h"

typedef struct seen {
    char lines[8][512];
    int n;
} seen;

static int remember(void *user, const char *what, const char *setting, const char *path)
{
    seen *s = user;
    if (s->n < 8)
        snprintf(s->lines[s->n++], sizeof s->lines[0], "%s|%s|%s", what, setting, path);
    return TFENC_OK;
}

static int stop_at_first(void *user, const char *what, const char *setting, const char *path)
{
    (void)user, (void)what, (void)setting, (void)path;
    return TFENC_ERR_CONFIG;
}

static void test_listed_as_read(void)
{
    static const char text[] = "[job]\ninput = corpus.txt\noutput = out.h5\n"
                               "[tokenizer]\njson = /abs/tokenizer.json\n"
                               "[custom]\nlookup = table.tsv\nname = not a path\n";
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    CU_ASSERT_FATAL(tfenc_jobfile_parse_string(&ctx, "jobs/j.ini", text, &job) == TFENC_OK);
    CU_ASSERT_FATAL(tfenc_jobfile_override(&ctx, job, "model.weights=m.h5") == TFENC_OK);
    seen none = {.n = 0};
    CU_ASSERT(tfenc_jobfile_each_input(job, remember, &none) == TFENC_OK);
    CU_ASSERT(none.n == 0); /* nothing read yet */

    const char *sections[] = {"job", "tokenizer", "custom", "model"};
    const char *keys[] = {"input", "json", "lookup", "weights"};
    const char *whats[] = {"the corpus", "the tokenizer", "the table", "the weights"};
    for (int i = 0; i < 4; i++) {
        tfenc_params params;
        tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, sections[i]));
        char *path = NULL;
        CU_ASSERT(tfenc_param_input_path(&params, keys[i], whats[i], &path) == TFENC_OK);
        CU_ASSERT(path != NULL);
        free(path);
    }
    /* Read as text, or as the output: not inputs. */
    tfenc_params job_params, custom;
    tfenc_params_bind(&job_params, &ctx, job, tfenc_jobfile_find(job, "job"));
    tfenc_params_bind(&custom, &ctx, job, tfenc_jobfile_find(job, "custom"));
    const char *value = NULL;
    CU_ASSERT(tfenc_param_string(&job_params, "output", NULL, &value) == TFENC_OK);
    CU_ASSERT(tfenc_param_string(&custom, "name", NULL, &value) == TFENC_OK);
    /* An absent key lists nothing and gives NULL. */
    char *absent = (char *)"unchanged";
    CU_ASSERT(tfenc_param_input_path(&custom, "missing", "x", &absent) == TFENC_OK);
    CU_ASSERT(absent == NULL);

    seen listed = {.n = 0};
    CU_ASSERT(tfenc_jobfile_each_input(job, remember, &listed) == TFENC_OK);
    CU_ASSERT_EQUAL(listed.n, 4);
    CU_ASSERT_STRING_EQUAL(listed.lines[0], "the corpus|[job] input|jobs/corpus.txt");
    CU_ASSERT_STRING_EQUAL(listed.lines[1], "the tokenizer|[tokenizer] json|/abs/tokenizer.json");
    CU_ASSERT_STRING_EQUAL(listed.lines[2], "the table|[custom] lookup|jobs/table.tsv");
    CU_ASSERT_STRING_EQUAL(listed.lines[3], "the weights|[model] weights|jobs/m.h5");
    /* The visitor's status ends the walk. */
    CU_ASSERT(tfenc_jobfile_each_input(job, stop_at_first, NULL) == TFENC_ERR_CONFIG);
    tfenc_jobfile_destroy(job);
}

static const test_case job_inputs_cases[] = {
    {"input path keys are listed as read", test_listed_as_read},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"job inputs", NULL, NULL, job_inputs_cases},
    {NULL, NULL, NULL, NULL}};
