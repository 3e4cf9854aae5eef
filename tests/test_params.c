/* Layer parameters (core/job/params): typed getters with defaults, keys
 * create() never read refused after it, bad values named with their line,
 * integer ranges checked on the whole value (no wrap to int), inline
 * comments, and declared parameter tables (ABI 1.1): the host holds
 * create() to its table, checks values against the declared ranges (ABI
 * 1.2) before create(), reads a 1.1 table with its own stride, and refuses
 * a create() that ignored a getter's failure. */
#include "base/context.h"
#include "job/jobfile.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "job/params.h"

#include <CUnit/CUnit.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static tfenc_context ctx;

static tfenc_jobfile *parse(const char *text)
{
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    CU_ASSERT_EQUAL(tfenc_jobfile_parse_string(&ctx, "j.ini", text, &job), TFENC_OK);
    return job;
}

/* Reads `key` of section [s] of `text` with the range getter. */
static int read_range(const char *value, long minimum, long maximum, long *result)
{
    char text[256];
    snprintf(text, sizeof text, "[s]\nk = %s\n", value);
    tfenc_jobfile *job = parse(text);
    if (job == NULL)
        return -100;
    tfenc_params params;
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "s"));
    int status = tfenc_param_int_range(&params, "k", 0, minimum, maximum, result);
    tfenc_jobfile_destroy(job);
    return status;
}

static void test_int_range_boundaries(void)
{
    long value = -1;
    /* Inside the range, at both ends. */
    CU_ASSERT_EQUAL(read_range("0", 0, INT_MAX, &value), TFENC_OK);
    CU_ASSERT_EQUAL(value, 0);
    CU_ASSERT_EQUAL(read_range("2147483647", 0, INT_MAX, &value), TFENC_OK);
    CU_ASSERT_EQUAL(value, INT_MAX);
    CU_ASSERT_EQUAL(read_range("-2147483648", INT_MIN, INT_MAX, &value), TFENC_OK);
    CU_ASSERT_EQUAL(value, INT_MIN);
    /* One past either end, and the values that wrapped through (int) before. */
    const char *outside[] = {"-1", "2147483648", "4294967296", "4294967297", "4294997818",
                             "9223372036854775807", "9223372036854775808",
                             "-9223372036854775809", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
        CU_ASSERT_EQUAL(read_range(outside[i], 0, INT_MAX, &value), TFENC_ERR_CONFIG);
        char expected[128];
        snprintf(expected, sizeof expected, "[s] k = '%s': expected an integer in 0..2147483647",
                 outside[i]);
        CU_ASSERT(contains(tfenc_context_message(&ctx), expected));
    }
    CU_ASSERT_EQUAL(read_range("-2147483649", INT_MIN, INT_MAX, &value), TFENC_ERR_CONFIG);
    /* Not integers, whatever the range. */
    const char *malformed[] = {"12x", "0x10", "1e3", "1.0", "", "--1", "4 2"};
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++)
        CU_ASSERT_EQUAL(read_range(malformed[i], LONG_MIN, LONG_MAX, &value), TFENC_ERR_CONFIG);
    /* The plain getter: any long, nothing beyond. */
    tfenc_jobfile *job = parse("[s]\nbig = 9223372036854775807\nhuge = 9223372036854775808\n");
    tfenc_params params;
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "s"));
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "big", 0, &value), TFENC_OK);
    CU_ASSERT_EQUAL(value, LONG_MAX);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "huge", 0, &value), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "huge = '9223372036854775808': expected an integer"));
    tfenc_jobfile_destroy(job);
    /* Absent: the default, even outside the range (a "required" marker). */
    job = parse("[s]\nother = 1\n");
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "s"));
    CU_ASSERT_EQUAL(tfenc_param_int_range(&params, "k", -1, 1, 10, &value), TFENC_OK);
    CU_ASSERT_EQUAL(value, -1);
    tfenc_jobfile_destroy(job);
}

static void test_inline_comments(void)
{
    /* docs/job-file.md: ';' or '#' after a space or tab starts a comment;
     * a '#' inside a value stays. */
    tfenc_jobfile *job = parse("# whole line\n[job]\noutput = x.h5   # a note\ninput = a#b.txt\n"
                               "text_field = t\t; note\nid_field = i;d\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(job);
    const tfenc_job_section *section = tfenc_jobfile_find(job, "job");
    CU_ASSERT_STRING_EQUAL(tfenc_job_section_get(section, "output")->value, "x.h5");
    CU_ASSERT_STRING_EQUAL(tfenc_job_section_get(section, "input")->value, "a#b.txt");
    CU_ASSERT_STRING_EQUAL(tfenc_job_section_get(section, "text_field")->value, "t");
    CU_ASSERT_STRING_EQUAL(tfenc_job_section_get(section, "id_field")->value, "i;d");
    tfenc_jobfile_destroy(job);
}

/* A minimal ABI 1.1 descriptor around a table. */
static int no_create(tfenc_context *c, const tfenc_layer_init *init, void **instance)
{
    (void)c, (void)init, (void)instance;
    return TFENC_OK;
}

static tfenc_layer_descriptor descriptor_with(const tfenc_param_info *table, uint32_t minor)
{
    tfenc_layer_descriptor descriptor = {TFENC_DESCRIPTOR_INIT, .type = "t", .params = table,
                                         .create = no_create};
    descriptor.abi_minor = minor;
    return descriptor;
}

static void test_declared_table_holds_create(void)
{
    static const tfenc_param_info table[] = {
        {"n", TFENC_PARAM_INT, "1", "a count", TFENC_PARAM_NO_RANGE},
        {"f", TFENC_PARAM_FLOAT, "0.5", "a factor", TFENC_PARAM_NO_RANGE},
        {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
    };
    tfenc_layer_descriptor descriptor = descriptor_with(table, TFENC_ABI_MINOR);
    tfenc_jobfile *job = parse("[l]\nn = 3\n");
    tfenc_job_section *section = tfenc_jobfile_find(job, "l");
    tfenc_params params;
    long n;
    double f;
    /* Reading what the table declares, as declared: fine, and all read. */
    tfenc_params_bind_layer(&params, &ctx, job, section, &descriptor);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "n", 1, &n), TFENC_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(tfenc_param_float(&params, "f", 0.5, &f), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "test"), TFENC_OK);
    /* A key the table lacks. */
    tfenc_context_init(&ctx);
    tfenc_params_bind_layer(&params, &ctx, job, section, &descriptor);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "m", 1, &n), TFENC_ERR_PLUGIN);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "layer type t reads key 'm', which its declared parameter table lacks"));
    /* A declared key read as another type. */
    tfenc_context_init(&ctx);
    tfenc_params_bind_layer(&params, &ctx, job, section, &descriptor);
    CU_ASSERT_EQUAL(tfenc_param_float(&params, "n", 1, &f), TFENC_ERR_PLUGIN);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "declares key 'n' as int but reads it as float"));
    /* A declared key never read. */
    tfenc_context_init(&ctx);
    tfenc_params_bind_layer(&params, &ctx, job, section, &descriptor);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "n", 1, &n), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "test"), TFENC_ERR_PLUGIN);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "declares key 'f' but its create() never reads it"));
    /* An ABI 1.0 descriptor has no table, whatever its reserved slot holds:
     * the getters accept any key, as before. */
    tfenc_context_init(&ctx);
    descriptor = descriptor_with(table, 0);
    CU_ASSERT_PTR_NULL(tfenc_params_declared(&descriptor).entries);
    tfenc_params_bind_layer(&params, &ctx, job, section, &descriptor);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "m", 1, &n), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "n", 1, &n), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "test"), TFENC_OK);
    tfenc_jobfile_destroy(job);
}

static void test_declared_table_checks(void)
{
    char why[256];
    static const tfenc_param_info twice[] = {{"a", TFENC_PARAM_INT, "1", "", TFENC_PARAM_NO_RANGE},
                                             {"a", TFENC_PARAM_BOOL, "true", "", TFENC_PARAM_NO_RANGE},
                                             {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    static const tfenc_param_info bad_name[] = {{"Bad-Name", TFENC_PARAM_INT, "1", "", TFENC_PARAM_NO_RANGE},
                                                {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    static const tfenc_param_info bad_type[] = {{"a", (tfenc_param_type)9, "1", "", TFENC_PARAM_NO_RANGE},
                                                {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    static const tfenc_param_info two_lines[] = {{"a", TFENC_PARAM_INT, "1", "one\ntwo", TFENC_PARAM_NO_RANGE},
                                                 {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    CU_ASSERT_PTR_NULL(tfenc_params_check_table(tfenc_param_table_of(NULL), why, sizeof why));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(twice), why, sizeof why) != NULL &&
              contains(why, "declares parameter 'a' twice"));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(bad_name), why, sizeof why) != NULL &&
              contains(why, "not a key name"));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(bad_type), why, sizeof why) != NULL &&
              contains(why, "unknown type 9"));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(two_lines), why, sizeof why) != NULL &&
              contains(why, "one line"));
    tfenc_param_info many[TFENC_MAX_DECLARED_PARAMS + 2];
    char names[TFENC_MAX_DECLARED_PARAMS + 1][8];
    for (int i = 0; i <= TFENC_MAX_DECLARED_PARAMS; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i);
        many[i] = (tfenc_param_info){names[i], TFENC_PARAM_INT, "0", "", TFENC_PARAM_NO_RANGE};
    }
    many[TFENC_MAX_DECLARED_PARAMS + 1] = (tfenc_param_info){NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE};
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(many), why, sizeof why) != NULL &&
              contains(why, "more than 64 parameters"));
    many[TFENC_MAX_DECLARED_PARAMS] = (tfenc_param_info){NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE};
    CU_ASSERT_PTR_NULL(tfenc_params_check_table(tfenc_param_table_of(many), why, sizeof why));
}

/* Binds a layer section of `text` to `descriptor` and returns the status of
 * the host's range check before create(). */
static int check_ranges_of(const char *text, const tfenc_layer_descriptor *descriptor)
{
    tfenc_jobfile *job = parse(text);
    tfenc_params params;
    tfenc_params_bind_layer(&params, &ctx, job, tfenc_jobfile_find(job, "l"), descriptor);
    int status = tfenc_params_check_ranges(&params);
    tfenc_jobfile_destroy(job);
    return status;
}

static void test_declared_ranges(void)
{
    static const tfenc_param_info table[] = {
        {"heads", TFENC_PARAM_INT, NULL, "a count", TFENC_PARAM_RANGE(1, 64)},
        {"eps", TFENC_PARAM_FLOAT, "1e-5", "non-negative", TFENC_PARAM_AT_LEAST(0)},
        {"base", TFENC_PARAM_FLOAT, "10000", "positive", TFENC_PARAM_ABOVE(0)},
        {"free", TFENC_PARAM_INT, "0", "unbounded", TFENC_PARAM_NO_RANGE},
        {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
    };
    tfenc_layer_descriptor descriptor = descriptor_with(table, TFENC_ABI_MINOR);
    char text[96];
    /* Inside, at the ends. */
    CU_ASSERT_EQUAL(check_ranges_of("[l]\nheads = 1\neps = 0\nbase = 1e-30\nfree = -5\n",
                                    &descriptor), TFENC_OK);
    CU_ASSERT_EQUAL(check_ranges_of("[l]\nheads = 64\n", &descriptor), TFENC_OK);
    /* Outside: one line naming file, line, section, key, value and range. */
    CU_ASSERT_EQUAL(check_ranges_of("[l]\nheads = 65\n", &descriptor), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx),
                       "j.ini:2: [l] heads = '65': expected an integer in 1..64 (the range "
                       "layer type t declares)"));
    CU_ASSERT_EQUAL(check_ranges_of("[l]\nheads = 0\n", &descriptor), TFENC_ERR_CONFIG);
    CU_ASSERT_EQUAL(check_ranges_of("[l]\neps = -1e-12\n", &descriptor), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "[l] eps = '-1e-12': expected a number in >=0"));
    CU_ASSERT_EQUAL(check_ranges_of("[l]\nfree = 1\nbase = 0\n", &descriptor), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "j.ini:3: [l] base = '0': expected a number in >0"));
    /* Not a number: left to the getter, which says what it expected. */
    CU_ASSERT_EQUAL(check_ranges_of("[l]\nheads = many\n", &descriptor), TFENC_OK);
    /* The getters hold the declared range too, whatever range they pass. */
    tfenc_jobfile *job = parse("[l]\nheads = 100\neps = -1\n");
    tfenc_params params;
    long heads;
    double eps;
    tfenc_params_bind_layer(&params, &ctx, job, tfenc_jobfile_find(job, "l"), &descriptor);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "heads", 8, &heads), TFENC_ERR_CONFIG);
    CU_ASSERT_EQUAL(heads, 8);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "heads = '100': expected an integer in 1..64"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_param_float(&params, "eps", 1e-5, &eps), TFENC_ERR_CONFIG);
    tfenc_jobfile_destroy(job);
    /* --list-plugins' spelling of each range. */
    CU_ASSERT_STRING_EQUAL(tfenc_param_range_text(&table[0], text, sizeof text), "1..64");
    CU_ASSERT_STRING_EQUAL(tfenc_param_range_text(&table[1], text, sizeof text), ">=0");
    CU_ASSERT_STRING_EQUAL(tfenc_param_range_text(&table[2], text, sizeof text), ">0");
    CU_ASSERT_STRING_EQUAL(tfenc_param_range_text(&table[3], text, sizeof text), "");
}

/* A table as an ABI 1.1 plugin compiled it: entries of four fields. */
typedef struct {
    const char *name;
    tfenc_param_type type;
    const char *default_value;
    const char *help;
} param_info_1_1;

static void test_minor_1_table(void)
{
    static const param_info_1_1 old_table[] = {
        {"n", TFENC_PARAM_INT, "1", "a count"},
        {"f", TFENC_PARAM_FLOAT, "0.5", "a factor"},
        {"s", TFENC_PARAM_STRING, "x", "a name"},
        {NULL, 0, NULL, NULL},
    };
    tfenc_layer_descriptor descriptor =
        descriptor_with((const tfenc_param_info *)(const void *)old_table, 1);
    tfenc_param_table table = tfenc_params_declared(&descriptor);
    tfenc_param_info info;
    char why[256];
    /* Read with its own stride: every key found, none with a range. */
    const char *names[] = {"n", "f", "s"};
    int count = 0;
    for (; tfenc_param_table_entry(table, count, &info); count++) {
        CU_ASSERT_STRING_EQUAL(info.name, names[count]);
        CU_ASSERT_EQUAL(info.bounds, 0);
    }
    CU_ASSERT_EQUAL(count, 3);
    CU_ASSERT_PTR_NULL(tfenc_params_check_table(table, why, sizeof why));
    /* create() held to it as before: all three read, huge values accepted. */
    tfenc_jobfile *job = parse("[l]\nn = 100000\nf = -3\ns = y\n");
    tfenc_params params;
    long n;
    double f;
    const char *s;
    tfenc_params_bind_layer(&params, &ctx, job, tfenc_jobfile_find(job, "l"), &descriptor);
    CU_ASSERT_EQUAL(tfenc_params_check_ranges(&params), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "n", 1, &n), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_param_float(&params, "f", 0.5, &f), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_param_string(&params, "s", "x", &s), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "test"), TFENC_OK);
    CU_ASSERT_EQUAL(n, 100000);
    tfenc_jobfile_destroy(job);
}

static void test_ignored_getter_failure(void)
{
    static const tfenc_param_info table[] = {
        {"n", TFENC_PARAM_INT, "1", "a count", TFENC_PARAM_RANGE(0, 9)},
        {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
    };
    tfenc_layer_descriptor descriptor = descriptor_with(table, TFENC_ABI_MINOR);
    tfenc_jobfile *job = parse("[l]\nn = 3\n");
    tfenc_params params;
    long n;
    double alpha;
    /* create() reads an undeclared key, ignores the failure, returns OK. */
    tfenc_params_bind_layer(&params, &ctx, job, tfenc_jobfile_find(job, "l"), &descriptor);
    (void)tfenc_param_float(&params, "alpha", 1.0, &alpha);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "n", 1, &n), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "test"), TFENC_ERR_PLUGIN);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "reads key 'alpha', which its declared parameter table lacks"));
    tfenc_jobfile_destroy(job);
    /* The same for a bad value in a section without a table. */
    job = parse("[l]\nn = three\n");
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "l"));
    (void)tfenc_param_int(&params, "n", 1, &n);
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "test"), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "n = 'three': expected an integer"));
    tfenc_jobfile_destroy(job);
}

static void test_declared_range_checks(void)
{
    char why[256];
    static const tfenc_param_info default_outside[] = {
        {"n", TFENC_PARAM_INT, "0", "", TFENC_PARAM_RANGE(1, 8)}, {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    static const tfenc_param_info fraction[] = {
        {"n", TFENC_PARAM_INT, "1", "", TFENC_PARAM_RANGE(0.5, 8)}, {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    static const tfenc_param_info on_bool[] = {
        {"b", TFENC_PARAM_BOOL, "true", "", TFENC_PARAM_RANGE(0, 1)}, {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    static const tfenc_param_info reversed[] = {
        {"x", TFENC_PARAM_FLOAT, NULL, "", TFENC_PARAM_RANGE(2, 1)}, {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    static const tfenc_param_info unknown_bits[] = {
        {"x", TFENC_PARAM_FLOAT, NULL, "", .bounds = 64}, {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE}};
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(default_outside), why, sizeof why) != NULL &&
              contains(why, "default '0' is not a int in its range 1..8"));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(fraction), why, sizeof why) != NULL &&
              contains(why, "whole numbers"));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(on_bool), why, sizeof why) != NULL &&
              contains(why, "a range needs an int or float key, not bool"));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(reversed), why, sizeof why) != NULL &&
              contains(why, "above its maximum"));
    CU_ASSERT(tfenc_params_check_table(tfenc_param_table_of(unknown_bits), why, sizeof why) != NULL &&
              contains(why, "unknown range bounds"));
}

static void test_params_typed_getters(void)
{
    static const char *const modes[] = {"cls", "mean", NULL};
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    const char *text = "[l]\nn = 12\nf = 1e-12\nb = Yes\nm = mean\ns = hello\n";
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&ctx, "j.ini", text, &job), TFENC_OK);
    tfenc_params params;
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "l"));
    long n;
    double f;
    int b, m;
    const char *s;
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "n", 0, &n), TFENC_OK);
    CU_ASSERT_EQUAL(n, 12);
    CU_ASSERT_EQUAL(tfenc_param_float(&params, "f", 0, &f), TFENC_OK);
    CU_ASSERT_DOUBLE_EQUAL(f, 1e-12, 1e-24);
    CU_ASSERT_EQUAL(tfenc_param_bool(&params, "b", 0, &b), TFENC_OK);
    CU_ASSERT_EQUAL(b, 1);
    CU_ASSERT_EQUAL(tfenc_param_choice(&params, "m", modes, 0, &m), TFENC_OK);
    CU_ASSERT_EQUAL(m, 1);
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "absent", 7, &n), TFENC_OK);
    CU_ASSERT_EQUAL(n, 7);
    /* s was never read: the host must reject it after create(). */
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "layer type t"), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "j.ini:6: [l] unknown key 's' (layer type t)"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_param_string(&params, "s", NULL, &s), TFENC_OK);
    CU_ASSERT_STRING_EQUAL(s, "hello");
    CU_ASSERT_EQUAL(tfenc_params_check_all_used(&params, "x"), TFENC_OK);
    tfenc_jobfile_destroy(job);
}

static void test_params_bad_values(void)
{
    static const char *const modes[] = {"cls", "mean", NULL};
    tfenc_jobfile *job = NULL;
    tfenc_context_init(&ctx);
    const char *text = "[l]\nn = 12x\nf = nan\nb = maybe\nm = sum\n";
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&ctx, "j.ini", text, &job), TFENC_OK);
    tfenc_params params;
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "l"));
    long n;
    double f;
    int b, m;
    CU_ASSERT_EQUAL(tfenc_param_int(&params, "n", 0, &n), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "j.ini:2: [l] n = '12x': expected an integer"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_param_float(&params, "f", 0, &f), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "expected a finite number"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_param_bool(&params, "b", 0, &b), TFENC_ERR_CONFIG);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_param_choice(&params, "m", modes, 0, &m), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "expected one of cls, mean"));
    tfenc_jobfile_destroy(job);
}

static const test_case params_cases[] = {
    {"typed getters and unused keys", test_params_typed_getters},
    {"bad values", test_params_bad_values},
    {"integer ranges on the whole value", test_int_range_boundaries},
    {"inline comments", test_inline_comments},
    {"declared tables hold create()", test_declared_table_holds_create},
    {"declared tables are checked", test_declared_table_checks},
    {"declared ranges checked by the host", test_declared_ranges},
    {"an ABI 1.1 table is read with its stride", test_minor_1_table},
    {"a create() ignoring a getter failure is refused", test_ignored_getter_failure},
    {"declared ranges are checked", test_declared_range_checks},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"params", NULL, NULL, params_cases},
    {NULL, NULL, NULL, NULL}};
