/* Paths chosen by measurement (run/path_choice.h), without timing: the
 * rule that turns measured times into a choice (margin, ties, noise, a
 * default that could not be measured, a pinned choice), and a job's
 * choices taken from a record or its keys, which never measure. The
 * measurement itself runs end to end in tests/path_choice.sh. */
#include "harness/cunit_main.h"
#include "base/context.h"
#include "job/jobfile.h"
#include "model/model.h"
#include "run/job_settings.h"
#include "run/path_choice.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_clearly_faster_is_taken(void)
{
    const double seconds[2] = {1.0, 0.8};
    CU_ASSERT_EQUAL(tfenc_path_pick(seconds, 2, 0, -1, 0.10), 1);
    const double default_slow[3] = {2.0, 1.5, 1.0};
    CU_ASSERT_EQUAL(tfenc_path_pick(default_slow, 3, 0, -1, 0.10), 2);
    /* At the margin exactly: taken (at most 1 - margin of the default's). */
    const double at_margin[2] = {1.0, 0.875};
    CU_ASSERT_EQUAL(tfenc_path_pick(at_margin, 2, 0, -1, 0.125), 1);
}

static void test_ties_and_noise_keep_the_default(void)
{
    const double tie[2] = {1.0, 1.0};
    CU_ASSERT_EQUAL(tfenc_path_pick(tie, 2, 0, -1, 0.10), 0);
    CU_ASSERT_EQUAL(tfenc_path_pick(tie, 2, 1, -1, 0.10), 1);
    const double noise[2] = {1.0, 0.95};
    CU_ASSERT_EQUAL(tfenc_path_pick(noise, 2, 0, -1, 0.10), 0);
    const double just_short[2] = {1.0, 0.901};
    CU_ASSERT_EQUAL(tfenc_path_pick(just_short, 2, 0, -1, 0.10), 0);
    /* The default faster: stays. */
    const double default_fast[2] = {0.5, 1.0};
    CU_ASSERT_EQUAL(tfenc_path_pick(default_fast, 2, 0, -1, 0.10), 0);
}

static void test_unmeasured_candidates(void)
{
    /* A candidate that could not be timed is never taken... */
    const double missing[3] = {1.0, 0.0, NAN};
    CU_ASSERT_EQUAL(tfenc_path_pick(missing, 3, 0, -1, 0.10), 0);
    const double negative[2] = {1.0, -5.0};
    CU_ASSERT_EQUAL(tfenc_path_pick(negative, 2, 0, -1, 0.10), 0);
    /* ...and a default that could not be timed stays, whatever the others. */
    const double no_default[2] = {NAN, 0.1};
    CU_ASSERT_EQUAL(tfenc_path_pick(no_default, 2, 0, -1, 0.10), 0);
}

static void test_pinned_choice_wins(void)
{
    const double seconds[2] = {1.0, 0.1};
    CU_ASSERT_EQUAL(tfenc_path_pick(seconds, 2, 0, 0, 0.10), 0);
    const double slower[2] = {1.0, 9.0};
    CU_ASSERT_EQUAL(tfenc_path_pick(slower, 2, 0, 1, 0.10), 1);
    const double unmeasured[2] = {NAN, NAN};
    CU_ASSERT_EQUAL(tfenc_path_pick(unmeasured, 2, 0, 1, 0.10), 1);
}

/* CPU-seconds choose; the wall time can only keep the default (a path
 * that saves CPU time by leaving threads idle is not faster). */
static void test_wall_time_vetoes(void)
{
    const double cpu[2] = {1.0, 0.5};
    const double wall_agrees[2] = {0.6, 0.4};
    CU_ASSERT_EQUAL(tfenc_path_pick_measured(cpu, wall_agrees, 2, 0, -1, 0.10), 1);
    const double wall_slower[2] = {0.6, 0.7};
    CU_ASSERT_EQUAL(tfenc_path_pick_measured(cpu, wall_slower, 2, 0, -1, 0.10), 0);
    const double wall_level[2] = {0.6, 0.6};
    CU_ASSERT_EQUAL(tfenc_path_pick_measured(cpu, wall_level, 2, 0, -1, 0.10), 0);
    const double wall_missing[2] = {0.6, NAN};
    CU_ASSERT_EQUAL(tfenc_path_pick_measured(cpu, wall_missing, 2, 0, -1, 0.10), 0);
    /* Wall time alone never moves off the default... */
    const double cpu_level[2] = {1.0, 0.97};
    const double wall_much_faster[2] = {1.0, 0.2};
    CU_ASSERT_EQUAL(tfenc_path_pick_measured(cpu_level, wall_much_faster, 2, 0, -1, 0.10), 0);
    /* ...and a pinned choice stands whatever the times. */
    CU_ASSERT_EQUAL(tfenc_path_pick_measured(cpu, wall_slower, 2, 0, 1, 0.10), 1);
}

static void test_recorded_values(void)
{
    const char *record = "encoder.attention.kernel=products\nglobal.attn.kernel=fused\n";
    char value[32];
    CU_ASSERT_TRUE(tfenc_path_recorded(record, "encoder.attention", "kernel", value, sizeof value));
    CU_ASSERT_STRING_EQUAL(value, "products");
    CU_ASSERT_TRUE(tfenc_path_recorded(record, "global.attn", "kernel", value, sizeof value));
    CU_ASSERT_STRING_EQUAL(value, "fused");
    /* A section whose name is a prefix of another's is not it. */
    CU_ASSERT_FALSE(tfenc_path_recorded(record, "encoder.attn", "kernel", value, sizeof value));
    CU_ASSERT_FALSE(tfenc_path_recorded(record, "global.attn", "kern", value, sizeof value));
    CU_ASSERT_FALSE(tfenc_path_recorded("", "global.attn", "kernel", value, sizeof value));
}

/* ------------------------------------------------ a job's choices, unmeasured */

static const char job_text[] = "[model]\n"
                               "weights = w.h5\n"
                               "d_model = 64\n"
                               "[embeddings]\n"
                               "type = embedding\n"
                               "[encoder]\n"
                               "repeat = 2\n"
                               "[encoder.attention]\n"
                               "type = mha\n"
                               "n_heads = 2\n"
                               "%s"
                               "[encoder.ffn]\n"
                               "type = ffn\n";

typedef struct fixture {
    tfenc_context ctx;
    tfenc_jobfile *job;
    tfenc_model_plan plan;
    tfenc_model_config config;
    tfenc_model_options options;
} fixture;

static void fixture_open(fixture *f, const char *kernel_line)
{
    memset(f, 0, sizeof *f);
    tfenc_context_init(&f->ctx);
    char text[1024];
    snprintf(text, sizeof text, job_text, kernel_line);
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&f->ctx, "j.ini", text, &f->job), TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(tfenc_model_plan_read(&f->ctx, f->job, &f->plan), TFENC_OK);
    f->config.d_model = 64;
    f->config.precision = TFENC_PRECISION_FP32;
    f->options.config = &f->config;
    f->options.plan = &f->plan;
    f->options.job = f->job;
}

static void fixture_close(fixture *f)
{
    tfenc_model_plan_free(&f->plan);
    tfenc_jobfile_destroy(f->job);
}

static const char *kernel_value(const fixture *f)
{
    const tfenc_job_entry *entry =
        tfenc_job_section_get(tfenc_jobfile_find(f->job, "encoder.attention"), "kernel");
    return entry != NULL ? entry->value : NULL;
}

/* A record is taken as it is: no measurement (no sample is given, so one
 * would fail), the job's entry set to it, the job's identity as the user
 * wrote it. */
static void test_record_is_taken_without_measuring(void)
{
    fixture f;
    fixture_open(&f, "");
    tfenc_job_settings settings = {0};
    char *before = tfenc_job_settings_identity(f.job, &settings);
    const tfenc_path_record record = {.assignments = "encoder.attention.kernel=products\n",
                                      .origin = "the file this run resumes (o.h5)"};
    tfenc_path_choices choices;
    CU_ASSERT_EQUAL_FATAL(tfenc_path_choices_decide(&f.ctx, f.job, &f.plan, &f.options, NULL,
                                                    &record, &choices),
                          TFENC_OK);
    CU_ASSERT_STRING_EQUAL(choices.assignments,
                           "encoder.attention.kernel=products\nmodel.fp32_products=openblas\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(choices.line, "as recorded in the file this run resumes"));
    CU_ASSERT_STRING_EQUAL(kernel_value(&f), "products");
    char *after = tfenc_job_settings_identity(f.job, &settings);
    CU_ASSERT_STRING_EQUAL(before, after);
    free(before);
    free(after);
    tfenc_path_choices_free(&choices);
    fixture_close(&f);
}

/* The job's choices against a record from [model] paths docs.h5 that
 * contradicts its key: one error line holding `message`. */
static void refused_in_one_line(fixture *f, const char *recorded, const char *message)
{
    const tfenc_path_record record = {.assignments = recorded, .origin = "[model] paths docs.h5"};
    tfenc_path_choices choices;
    CU_ASSERT_EQUAL(tfenc_path_choices_decide(&f->ctx, f->job, &f->plan, &f->options, NULL,
                                              &record, &choices),
                    TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NULL(strchr(f->ctx.message, '\n'));
    CU_ASSERT_PTR_NOT_NULL(strstr(f->ctx.message, message));
}

/* The key pins its place; a record that contradicts it is one error line
 * naming the section, the key's value, the file and what it records. */
static void test_key_pins_and_contradiction_is_refused(void)
{
    fixture f;
    fixture_open(&f, "kernel = fused\n");
    tfenc_path_choices choices;
    const tfenc_path_record none = {0};
    CU_ASSERT_EQUAL_FATAL(tfenc_path_choices_decide(&f.ctx, f.job, &f.plan, &f.options, NULL,
                                                    &none, &choices),
                          TFENC_OK);
    CU_ASSERT_STRING_EQUAL(choices.assignments,
                           "encoder.attention.kernel=fused\nmodel.fp32_products=openblas\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(choices.line, "the job's key"));
    tfenc_path_choices_free(&choices);
    refused_in_one_line(&f, "encoder.attention.kernel=products\n",
                        "[encoder.attention] kernel = fused contradicts [model] paths docs.h5, "
                        "which records encoder.attention.kernel=products");
    fixture_close(&f);
}

/* A record of a path this tfenc does not have is refused; a file that
 * records nothing (an older tfenc's) gets the default, unmeasured; the
 * default of an fp32 job is the fused kernel (plugins/attention.c). */
static void test_bad_and_empty_records(void)
{
    fixture f;
    fixture_open(&f, "kernel = auto\n");
    tfenc_path_choices choices;
    const tfenc_path_record bad = {.assignments = "encoder.attention.kernel=fastest\n",
                                   .origin = "[model] paths x.h5"};
    CU_ASSERT_EQUAL(tfenc_path_choices_decide(&f.ctx, f.job, &f.plan, &f.options, NULL, &bad,
                                              &choices),
                    TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.ctx.message, "x.h5: records encoder.attention.kernel=fastest"));
    tfenc_context_init(&f.ctx);
    const tfenc_path_record older = {.assignments = NULL, .origin = "the file this run resumes"};
    CU_ASSERT_EQUAL_FATAL(tfenc_path_choices_decide(&f.ctx, f.job, &f.plan, &f.options, NULL,
                                                    &older, &choices),
                          TFENC_OK);
    CU_ASSERT_STRING_EQUAL(choices.assignments,
                           "encoder.attention.kernel=fused\nmodel.fp32_products=openblas\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(choices.line, "the default"));
    /* The user's "auto" stays in the identity. */
    tfenc_job_settings settings = {0};
    char *identity = tfenc_job_settings_identity(f.job, &settings);
    CU_ASSERT_PTR_NOT_NULL(strstr(identity, "encoder.attention.kernel = auto"));
    free(identity);
    tfenc_path_choices_free(&choices);
    fixture_close(&f);
}

/* [model] fp32_products, a place of fp32 jobs only: a record is taken and
 * reaches what the model reads (tfenc_model_fp32_products), the key pins
 * it and a record against it is one line, a record of another library is
 * refused; a bf16 job has no such place (its maps are not fp32 ones). */
static void test_fp32_products(void)
{
    fixture f;
    fixture_open(&f, "");
    tfenc_path_choices choices;
    const tfenc_path_record record = {.assignments = "model.fp32_products=onednn\n",
                                      .origin = "[model] paths docs.h5"};
    CU_ASSERT_EQUAL_FATAL(tfenc_path_choices_decide(&f.ctx, f.job, &f.plan, &f.options, NULL,
                                                    &record, &choices),
                          TFENC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(choices.assignments, "model.fp32_products=onednn\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(choices.line, "model.fp32_products=onednn (as recorded in "
                                                "[model] paths docs.h5)"));
    CU_ASSERT_EQUAL(tfenc_model_fp32_products(f.job), TFENC_FP32_PRODUCTS_ONEDNN);
    tfenc_path_choices_free(&choices);
    fixture_close(&f);

    fixture_open(&f, "");
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_override(&f.ctx, f.job, "model.fp32_products=openblas"),
                          TFENC_OK);
    refused_in_one_line(&f, record.assignments,
                        "[model] fp32_products = openblas contradicts [model] paths docs.h5, "
                        "which records model.fp32_products=onednn");
    fixture_close(&f);

    fixture_open(&f, "");
    const tfenc_path_record bad = {.assignments = "model.fp32_products=mkl\n",
                                   .origin = "[model] paths x.h5"};
    CU_ASSERT_EQUAL(tfenc_path_choices_decide(&f.ctx, f.job, &f.plan, &f.options, NULL, &bad,
                                              &choices),
                    TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.ctx.message, "x.h5: records model.fp32_products=mkl, which "
                                                 "is not a path of this tfenc (openblas or "
                                                 "onednn)"));
    fixture_close(&f);

    fixture_open(&f, "kernel = products\n");
    f.config.precision = TFENC_PRECISION_BF16;
    const tfenc_path_record none = {0};
    CU_ASSERT_EQUAL_FATAL(tfenc_path_choices_decide(&f.ctx, f.job, &f.plan, &f.options, NULL,
                                                    &none, &choices),
                          TFENC_OK);
    CU_ASSERT_STRING_EQUAL(choices.assignments, "encoder.attention.kernel=products\n");
    tfenc_path_choices_free(&choices);
    fixture_close(&f);
}

/* [model] fp32_products is read into the config (auto: OpenBLAS until a
 * choice sets the key); a value that is no library is one error line. */
static void test_fp32_products_key(void)
{
    static const char *const values[] = {"", "fp32_products = auto\n",
                                         "fp32_products = openblas\n",
                                         "fp32_products = onednn\n"};
    static const tfenc_fp32_products expected[] = {
        TFENC_FP32_PRODUCTS_OPENBLAS, TFENC_FP32_PRODUCTS_OPENBLAS,
        TFENC_FP32_PRODUCTS_OPENBLAS, TFENC_FP32_PRODUCTS_ONEDNN};
    for (int i = 0; i < 5; i++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        char text[256];
        snprintf(text, sizeof text, "[model]\nweights = w.h5\nd_model = 64\n%s",
                 i < 4 ? values[i] : "fp32_products = mkl\n");
        tfenc_jobfile *job = NULL;
        CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&ctx, "j.ini", text, &job), TFENC_OK);
        tfenc_model_config config;
        const int status = tfenc_model_config_read(&ctx, job, &config);
        if (i < 4) {
            CU_ASSERT_EQUAL(status, TFENC_OK);
            CU_ASSERT_EQUAL(config.fp32_products, expected[i]);
            tfenc_model_config_free(&config);
        } else {
            CU_ASSERT_EQUAL(status, TFENC_ERR_CONFIG);
            CU_ASSERT_PTR_NOT_NULL(strstr(ctx.message, "fp32_products"));
            CU_ASSERT_PTR_NULL(strchr(ctx.message, '\n'));
        }
        tfenc_jobfile_destroy(job);
    }
}

/* Another rank applies rank 0's assignments to its own job. */
static void test_apply_sets_every_entry(void)
{
    fixture f;
    fixture_open(&f, "");
    CU_ASSERT_EQUAL(tfenc_path_choices_apply(&f.ctx, f.job, "encoder.attention.kernel=fused\n"),
                    TFENC_OK);
    CU_ASSERT_STRING_EQUAL(kernel_value(&f), "fused");
    CU_ASSERT_EQUAL(tfenc_path_choices_apply(&f.ctx, f.job, "no assignment\n"), TFENC_ERR_CONFIG);
    fixture_close(&f);
}

static const test_case path_choice_cases[] = {
    {"clearly faster is taken", test_clearly_faster_is_taken},
    {"ties and noise keep the default", test_ties_and_noise_keep_the_default},
    {"unmeasured candidates", test_unmeasured_candidates},
    {"pinned choice wins", test_pinned_choice_wins},
    {"wall time vetoes", test_wall_time_vetoes},
    {"recorded values", test_recorded_values},
    {"record is taken without measuring", test_record_is_taken_without_measuring},
    {"key pins and contradiction is refused", test_key_pins_and_contradiction_is_refused},
    {"bad and empty records", test_bad_and_empty_records},
    {"apply sets every entry", test_apply_sets_every_entry},
    {"fp32 products", test_fp32_products},
    {"fp32 products key", test_fp32_products_key},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"path_choice", NULL, NULL, path_choice_cases},
    {NULL, NULL, NULL, NULL}};
