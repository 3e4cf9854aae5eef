/* CUnit suites for the core: job files, params, weight stores, linear maps,
 * the plugin registry (including the ABI refusals), model composition, and
 * the model's memory promises (weights live with their layers; forward never
 * allocates), checked with a counting allocator. */
#include "allocation_counter.h"
#include "base/context.h"
#include "job/jobfile.h"
#include "matrix/matrix.h"
#include "model/model.h"
#include "job/params.h"
#include "plugin/plugin_loader.h"
#include "run/accuracy_gate.h"
#include "model/weights.h"

#include <CUnit/Basic.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tfenc_context ctx;

static int contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) != NULL)
        return 1;
    fprintf(stderr, "\n  expected \"%s\" in: %s\n", needle, haystack);
    return 0;
}

static const char *build_dir(void)
{
    const char *dir = getenv("abs_top_builddir");
    return dir != NULL ? dir : ".";
}

/* ------------------------------------------------------------ job files */

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

/* --------------------------------------------------------------- params */

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

/* -------------------------------------------------------------- weights */

static void test_weights_memory_shapes_and_nan(void)
{
    tfenc_context_init(&ctx);
    tfenc_weight_store *store = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_create_memory(&ctx, &store), TFENC_OK);
    const float values[6] = {1, 2, 3, 4, 5, 6};
    const float bad[2] = {1, NAN};
    int64_t shape[2] = {2, 3}, bad_shape[1] = {2};
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, "/g/w", 2, shape, values), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, "/g/bad", 1, bad_shape, bad), TFENC_OK);
    tfenc_weights *group = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(&ctx, store, "g/", NULL, &group), TFENC_OK);
    CU_ASSERT(tfenc_weight_exists(group, "w"));
    CU_ASSERT(!tfenc_weight_exists(group, "nothing"));
    int64_t dims[2] = {-1, 3};
    const float *data = NULL;
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "w", 2, dims, &data), TFENC_OK);
    CU_ASSERT_EQUAL(dims[0], 2);
    CU_ASSERT_EQUAL(data[5], 6.0f);
    CU_ASSERT_EQUAL((uintptr_t)data % 64, 0);
    int64_t wrong[2] = {3, 3};
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "w", 2, wrong, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx),
                       "dataset /g/w: expected shape [3, 3], found [2, 3]"));
    tfenc_context_init(&ctx);
    int64_t any[1] = {-1};
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "bad", 1, any, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /g/bad holds a non-finite value"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "missing", 1, any, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /g/missing not found"));
    tfenc_weight_store_close(store);
}

/* Writes `values` as a 16-bit IEEE half dataset, the layout docs/weights.md gives. */
static void write_half_dataset(hid_t file, const char *name, const float *values, hsize_t count)
{
    hid_t half = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(half, 15, 10, 5, 0, 10);
    H5Tset_size(half, 2);
    H5Tset_ebias(half, 15);
    hid_t space = H5Screate_simple(1, &count, NULL);
    hid_t dataset = H5Dcreate2(file, name, half, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Tclose(half);
}

static void test_weights_hdf5_file(void)
{
    char path[] = "/tmp/tfenc-test-weights-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t group = H5Gcreate2(file, "/layer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(group);
    const float halves[3] = {0.5f, -1.25f, 65504.0f}; /* exactly representable in float16 */
    write_half_dataset(file, "/layer/scale", halves, 3);
    H5Fclose(file);

    tfenc_context_init(&ctx);
    tfenc_weight_store *store = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_open(&ctx, path, &store), TFENC_OK);
    tfenc_weights *weights = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(&ctx, store, "/layer", NULL, &weights), TFENC_OK);
    int64_t dims[1] = {3};
    const float *data = NULL;
    CU_ASSERT_EQUAL(tfenc_weight_load(weights, "scale", 1, dims, &data), TFENC_OK);
    CU_ASSERT_EQUAL(data[0], 0.5f);
    CU_ASSERT_EQUAL(data[1], -1.25f);
    CU_ASSERT_EQUAL(data[2], 65504.0f);
    CU_ASSERT_EQUAL(tfenc_weight_load(weights, "none/deeper", 1, dims, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /layer/none/deeper not found"));
    tfenc_weight_store_close(store);

    /* Not HDF5 at all, and missing. */
    FILE *junk = fopen(path, "wb");
    fputs("not hdf5", junk);
    fclose(junk);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_store_open(&ctx, path, &store), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "not an HDF5 file"));
    unlink(path);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_store_open(&ctx, path, &store), TFENC_ERR_IO);
}

static void test_linear_matches_naive_and_stacks_parts(void)
{
    enum { ROWS = 5, IN = 7, OUT_A = 3, OUT_B = 4 };
    float a[OUT_A * IN], b[OUT_B * IN], bias_a[OUT_A], bias_b[OUT_B], x[ROWS * IN];
    srand(7);
    for (int i = 0; i < OUT_A * IN; i++)
        a[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < OUT_B * IN; i++)
        b[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < OUT_A; i++)
        bias_a[i] = (float)i;
    for (int i = 0; i < OUT_B; i++)
        bias_b[i] = -(float)i;
    for (int i = 0; i < ROWS * IN; i++)
        x[i] = (float)rand() / RAND_MAX - 0.5f;
    tfenc_context_init(&ctx);
    tfenc_weight_store *store = NULL;
    tfenc_weight_store_create_memory(&ctx, &store);
    int64_t da[2] = {OUT_A, IN}, db[2] = {OUT_B, IN}, dba[1] = {OUT_A}, dbb[1] = {OUT_B};
    tfenc_weight_store_add(&ctx, store, "/l/a", 2, da, a);
    tfenc_weight_store_add(&ctx, store, "/l/b", 2, db, b);
    tfenc_weight_store_add(&ctx, store, "/l/a_bias", 1, dba, bias_a);
    tfenc_weight_store_add(&ctx, store, "/l/b_bias", 1, dbb, bias_b);
    tfenc_weights *weights = NULL;
    tfenc_weight_store_group(&ctx, store, "/l", NULL, &weights);
    const char *const names[] = {"a", "b"}, *const biases[] = {"a_bias", "b_bias"};
    tfenc_linear *linear = NULL;
    int out = 0;
    CU_ASSERT_EQUAL_FATAL(tfenc_linear_load(weights, 2, names, biases, IN, &out, &linear), TFENC_OK);
    CU_ASSERT_EQUAL(out, OUT_A + OUT_B);
    float y[ROWS * (OUT_A + OUT_B)];
    CU_ASSERT_EQUAL(tfenc_linear_forward(&ctx, linear, x, ROWS, y), TFENC_OK);
    double worst = 0;
    for (int r = 0; r < ROWS; r++)
        for (int o = 0; o < OUT_A + OUT_B; o++) {
            const float *w = o < OUT_A ? &a[o * IN] : &b[(o - OUT_A) * IN];
            double expected = o < OUT_A ? bias_a[o] : bias_b[o - OUT_A];
            for (int k = 0; k < IN; k++)
                expected += (double)x[r * IN + k] * w[k];
            worst = fmax(worst, fabs(expected - y[r * (OUT_A + OUT_B) + o]));
        }
    /* 7 products of magnitude < 0.25 in float32: error far below 1e-6. */
    CU_ASSERT(worst < 1e-6);
    int64_t wrong_in = 6;
    CU_ASSERT_EQUAL(tfenc_linear_load(weights, 1, names, NULL, (int)wrong_in, &out, &linear),
                    TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /l/a: expected shape [?, 6], found [3, 7]"));
    tfenc_weight_store_close(store);
}

/* -------------------------------------------------------------- plugins */

static void test_loader_refuses_old_abi_and_foreign_objects(void)
{
    char path[1024];
    tfenc_context_init(&ctx);
    tfenc_plugin_registry *registry = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_plugin_registry_create(&ctx, NULL, NULL, &registry), TFENC_OK);

    snprintf(path, sizeof path, "%s/tests/plugins/.libs/old_abi.so", build_dir());
    CU_ASSERT_EQUAL(tfenc_plugin_registry_load_file(&ctx, registry, path), TFENC_ERR_PLUGIN);
    char expected[128];
    snprintf(expected, sizeof expected, "old_abi.so: built for plugin ABI 0.9, this tfenc provides ABI %d.%d",
             TFENC_ABI_MAJOR, TFENC_ABI_MINOR);
    CU_ASSERT(contains(tfenc_context_message(&ctx), expected));
    CU_ASSERT_PTR_NULL(tfenc_plugin_registry_find(registry, "old_layer"));

    tfenc_context_init(&ctx);
    snprintf(path, sizeof path, "%s/tests/plugins/.libs/no_entry.so", build_dir());
    CU_ASSERT_EQUAL(tfenc_plugin_registry_load_file(&ctx, registry, path), TFENC_ERR_PLUGIN);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "no_entry.so: not a tfenc plugin: it does not export tfenc_plugin_descriptor()"));

    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_plugin_registry_load_file(&ctx, registry, "/nonexistent/x.so"), TFENC_ERR_PLUGIN);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "plugin /nonexistent/x.so: cannot open: No such file"));

    /* A file that is not a shared object at all: refused before dlopen. */
    tfenc_context_init(&ctx);
    snprintf(path, sizeof path, "%s/tests/plugins/arithmetic.la", build_dir());
    CU_ASSERT_EQUAL(tfenc_plugin_registry_load_file(&ctx, registry, path), TFENC_ERR_PLUGIN);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "arithmetic.la: not an ELF shared object"));

    /* A job asking for the refused type learns why it is missing. */
    tfenc_context_init(&ctx);
    tfenc_plugin_registry_missing(&ctx, registry, "old_layer", "j.ini:3: [x]");
    CU_ASSERT(contains(tfenc_context_message(&ctx), "no plugin provides layer type 'old_layer'"));
    CU_ASSERT(contains(tfenc_context_message(&ctx), "refused"));
    CU_ASSERT(contains(tfenc_context_message(&ctx), "ABI 0.9"));
    tfenc_plugin_registry_destroy(registry);
}

static void test_loader_scans_search_path(void)
{
    char directory[1024];
    snprintf(directory, sizeof directory, "%s/tests/plugins/.libs", build_dir());
    tfenc_context_init(&ctx);
    tfenc_plugin_registry *registry = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_plugin_registry_create(&ctx, directory, NULL, &registry), TFENC_OK);
    CU_ASSERT_STRING_EQUAL(tfenc_plugin_registry_directory(registry, 0), directory);
    CU_ASSERT_EQUAL(tfenc_plugin_registry_scan(&ctx, registry), TFENC_OK);
    CU_ASSERT_PTR_NOT_NULL(tfenc_plugin_registry_find(registry, "scale"));
    CU_ASSERT_PTR_NOT_NULL(tfenc_plugin_registry_find(registry, "add"));
    CU_ASSERT_PTR_NULL(tfenc_plugin_registry_find(registry, "old_layer"));
    /* old_abi.so and no_entry.so were refused and recorded, not fatal. */
    CU_ASSERT(tfenc_plugin_registry_n_failures(registry) >= 2);
    tfenc_plugin_registry_destroy(registry);
}

/* ---------------------------------------------------------------- model */

typedef struct composed {
    tfenc_jobfile *job;
    tfenc_model_config config;
    tfenc_model_plan plan;
    tfenc_plugin_registry *registry;
    tfenc_weight_store *store;
    tfenc_model *model;
} composed;

/* The job written in `text`, its model's config and plan, the plugins of
 * `directory` (NULL: $TFENC_PLUGIN_PATH and the build tree) and an empty
 * memory store: a model's pieces, without the model. */
static int compose_pieces(composed *c, const char *text, const char *directory)
{
    memset(c, 0, sizeof *c);
    tfenc_context_init(&ctx);
    int status = tfenc_jobfile_parse_string(&ctx, "m.ini", text, &c->job);
    if (status == TFENC_OK)
        status = tfenc_model_config_read(&ctx, c->job, &c->config);
    if (status == TFENC_OK)
        status = tfenc_model_plan_read(&ctx, c->job, &c->plan);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_create(&ctx, directory, NULL, &c->registry);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_scan(&ctx, c->registry);
    if (status == TFENC_OK)
        status = tfenc_weight_store_create_memory(&ctx, &c->store);
    return status;
}

static int compose(composed *c, const char *text)
{
    char directory[1024];
    snprintf(directory, sizeof directory, "%s/tests/plugins/.libs", build_dir());
    int status = compose_pieces(c, text, directory);
    if (status == TFENC_OK) {
        float bias[2] = {100, 200};
        int64_t dims[1] = {2};
        tfenc_weight_store_add(&ctx, c->store, "/blk/1/inc/bias", 1, dims, bias);
        tfenc_model_options options = {
            .job = c->job, .config = &c->config, .plan = &c->plan, .registry = c->registry,
            .weights = c->store, .limits = {.max_tokens = 8, .max_seq_len = 8, .max_seqs = 8},
            .first_step = 0, .end_step = c->plan.n_steps};
        status = tfenc_model_create(&ctx, &options, &c->model);
    }
    return status;
}

static void release(composed *c)
{
    tfenc_model_destroy(c->model);
    tfenc_weight_store_close(c->store);
    tfenc_plugin_registry_destroy(c->registry);
    tfenc_model_plan_free(&c->plan);
    tfenc_model_config_free(&c->config);
    tfenc_jobfile_destroy(c->job);
}

static void run_one_token(composed *c, float value, float *out)
{
    int32_t starts[2] = {0, 1}, zero[1] = {0};
    float x[2] = {value, value};
    tfenc_batch batch = {.n_seq = 1, .n_tokens = 1, .seq_start = starts, .token_ids = zero,
                         .token_types = zero, .positions = zero, .x = x, .rows = 1, .d_model = 2};
    CU_ASSERT_EQUAL(tfenc_model_forward(&ctx, c->model, &batch), TFENC_OK);
    out[0] = x[0];
    out[1] = x[1];
}

static void test_model_post_and_pre_norm(void)
{
    const char *post =
        "[model]\nweights = w.h5\nd_model = 2\n"
        "[first]\ntype = add\noffset = 1\n"
        "[blk]\nrepeat = 2\n"
        "[blk.f]\ntype = scale\nfactor = 3\n"
        "[blk.f.norm]\ntype = scale\nfactor = 0.5\n"
        "[blk.inc]\ntype = add\nresidual = false\n";
    composed c;
    CU_ASSERT_EQUAL_FATAL(compose(&c, post), TFENC_OK);
    CU_ASSERT_EQUAL(c.plan.n_steps, 5);
    CU_ASSERT_STRING_EQUAL(c.plan.steps[3].name, "blk.1.f");
    CU_ASSERT_STRING_EQUAL(c.plan.steps[3].group, "/blk/1/f");
    CU_ASSERT_STRING_EQUAL(c.plan.steps[3].norm_group, "/blk/1/f/norm");
    float y[2];
    run_one_token(&c, 1.0f, y);
    /* x=2; post-norm: 0.5*(x + 3x) = 2x -> 4; inc (no bias at repeat 0) -> 4;
     * repeat 1: 8; inc adds bias [100, 200] from /blk/1/inc -> [108, 208]. */
    CU_ASSERT_DOUBLE_EQUAL(y[0], 108.0, 1e-5);
    CU_ASSERT_DOUBLE_EQUAL(y[1], 208.0, 1e-5);
    release(&c);

    const char *pre =
        "[model]\nweights = w.h5\nd_model = 2\n"
        /* compose() always stores /blk/1/inc/bias: one layer more than this
         * block runs, on purpose here. */
        "[blk]\nrepeat = 1\nnorm_position = pre\nextra_layers = ignore\n"
        "[blk.f]\ntype = scale\nfactor = 3\n"
        "[blk.f.norm]\ntype = scale\nfactor = 0.5\n";
    CU_ASSERT_EQUAL_FATAL(compose(&c, pre), TFENC_OK);
    run_one_token(&c, 2.0f, y);
    /* pre-norm: x + 3 * (0.5 x) = 2.5 x = 5 */
    CU_ASSERT_DOUBLE_EQUAL(y[0], 5.0, 1e-5);
    release(&c);
}

/* ------------------------------------------------------ memory promises */

/* A BERT-like encoder of real layers (mha, ffn, layernorm from the build's
 * plugins) with random weights in a memory store: big enough that a step's
 * weights (ENCODER_D x ENCODER_F x 2 floats for the FFN) stand out from the
 * libraries' bookkeeping. */
enum { ENCODER_D = 64, ENCODER_F = 1024, ENCODER_HEADS = 4, ENCODER_REPEAT = 3, ENCODER_VOCAB = 100 };

static void add_random(tfenc_weight_store *store, const char *path, int rank, int64_t rows,
                       int64_t columns, unsigned *seed)
{
    size_t count = (size_t)rows * (size_t)(rank == 2 ? columns : 1);
    float *values = malloc(count * sizeof *values);
    /* Amplitude 1/sqrt(inputs): unit-scale activations through the layers. */
    float amplitude = 1.0f / sqrtf((float)(rank == 2 ? columns : 64));
    for (size_t i = 0; i < count; i++) {
        *seed = *seed * 1103515245u + 12345u;
        values[i] = amplitude * ((float)(*seed >> 8) / 16777216.0f * 2.0f - 1.0f);
    }
    int64_t dims[2] = {rows, columns};
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, path, rank, dims, values), TFENC_OK);
    free(values);
}

static void add_encoder_weights(tfenc_weight_store *store)
{
    unsigned seed = 5;
    char path[128];
    /* Token vectors of unit scale (amplitude sqrt(3) gives unit variance). */
    add_random(store, "/embeddings/token_embeddings", 2, ENCODER_VOCAB, ENCODER_D, &seed);
    add_random(store, "/embeddings_norm/weight", 1, ENCODER_D, 0, &seed);
    add_random(store, "/embeddings_norm/bias", 1, ENCODER_D, 0, &seed);
    for (int i = 0; i < ENCODER_REPEAT; i++) {
        static const char *const projections[] = {"q", "k", "v", "out"};
        for (int p = 0; p < 4; p++) {
            snprintf(path, sizeof path, "/enc/%d/attention/%s_weight", i, projections[p]);
            add_random(store, path, 2, ENCODER_D, ENCODER_D, &seed);
            snprintf(path, sizeof path, "/enc/%d/attention/%s_bias", i, projections[p]);
            add_random(store, path, 1, ENCODER_D, 0, &seed);
        }
        snprintf(path, sizeof path, "/enc/%d/ffn/in_weight", i);
        add_random(store, path, 2, ENCODER_F, ENCODER_D, &seed);
        snprintf(path, sizeof path, "/enc/%d/ffn/in_bias", i);
        add_random(store, path, 1, ENCODER_F, 0, &seed);
        snprintf(path, sizeof path, "/enc/%d/ffn/out_weight", i);
        add_random(store, path, 2, ENCODER_D, ENCODER_F, &seed);
        snprintf(path, sizeof path, "/enc/%d/ffn/out_bias", i);
        add_random(store, path, 1, ENCODER_D, 0, &seed);
        static const char *const norms[] = {"attention", "ffn"};
        for (int n = 0; n < 2; n++) {
            /* Two channels 20 times larger than the rest, as trained BERTs
             * have: what makes per-token int8 lose precision. */
            float scale[ENCODER_D];
            for (int j = 0; j < ENCODER_D; j++)
                scale[j] = j == 5 || j == 41 ? 20.0f : 1.0f + 0.01f * (float)j;
            int64_t dims[1] = {ENCODER_D};
            snprintf(path, sizeof path, "/enc/%d/%s/norm/weight", i, norms[n]);
            CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, path, 1, dims, scale), TFENC_OK);
            snprintf(path, sizeof path, "/enc/%d/%s/norm/bias", i, norms[n]);
            add_random(store, path, 1, ENCODER_D, 0, &seed);
        }
    }
}

static void encoder_job(char *text, size_t size, const char *precision)
{
    snprintf(text, size,
             "[model]\nweights = w.h5\nd_model = %d\nprecision = %s\n"
             "[embeddings]\ntype = embedding\nscale_by_sqrt_d = true\n"
             "[embeddings_norm]\ntype = layernorm\n"
             "[enc]\nrepeat = %d\n"
             "[enc.attention]\ntype = mha\nn_heads = %d\n"
             "[enc.attention.norm]\ntype = layernorm\n"
             "[enc.ffn]\ntype = ffn\nactivation = gelu\n"
             "[enc.ffn.norm]\ntype = layernorm\n",
             ENCODER_D, precision, ENCODER_REPEAT, ENCODER_HEADS);
}

/* The pieces of a model over the encoder job, without the model itself. */
static int encoder_open(composed *c, const char *precision, tfenc_model_options *options)
{
    char text[1024];
    encoder_job(text, sizeof text, precision);
    /* TFENC_PLUGIN_PATH (set by the test harness) leads to the build's plugins. */
    int status = compose_pieces(c, text, NULL);
    if (status == TFENC_OK)
        add_encoder_weights(c->store);
    *options = (tfenc_model_options){
        .job = c->job, .config = &c->config, .plan = &c->plan, .registry = c->registry,
        .weights = c->store, .limits = {.max_tokens = 128, .max_seq_len = 128, .max_seqs = 128},
        .first_step = 0, .end_step = c->plan.n_steps};
    return status;
}

/* Bytes of one FFN step's weights, the largest step of the encoder. */
static const long long ffn_step_bytes = 2LL * ENCODER_D * ENCODER_F * (long long)sizeof(float);

/* The pipeline survey builds every step once and destroys it: afterwards
 * no step's weights may stay behind (they did while the store owned every
 * load, which kept all of a model on rank 0 of a pipelined job), and a
 * destroyed stage model leaves nothing behind either. */
static void test_weights_live_with_their_layers(void)
{
    if (!allocation_counter_works()) {
        CU_FAIL("the counting allocator sees no allocations in this build");
        return;
    }
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, "fp32", &options), TFENC_OK);
    double flops[16];
    int pools = 0;
    /* Once to let the libraries set up what they keep for the process. */
    CU_ASSERT_EQUAL(tfenc_model_survey(&ctx, &options, 10.0, flops, &pools), TFENC_OK);
    allocation_counter_start();
    int status = tfenc_model_survey(&ctx, &options, 10.0, flops, &pools);
    allocation_counts survey = allocation_counter_stop();
    CU_ASSERT_EQUAL(status, TFENC_OK);
    if (survey.live_bytes >= ffn_step_bytes / 2)
        fprintf(stderr, "\n  the survey left %lld bytes allocated (one FFN step: %lld)\n",
                survey.live_bytes, ffn_step_bytes);
    CU_ASSERT(survey.live_bytes < ffn_step_bytes / 2);

    /* A stage of two steps holds their weights, and gives them back. */
    options.first_step = 4;
    options.end_step = 6;
    allocation_counter_start();
    CU_ASSERT_EQUAL_FATAL(tfenc_model_create(&ctx, &options, &c.model), TFENC_OK);
    allocation_counts built = allocation_counter_stop();
    CU_ASSERT(built.live_bytes >= ffn_step_bytes);
    allocation_counter_start();
    tfenc_model_destroy(c.model);
    allocation_counts destroyed = allocation_counter_stop();
    c.model = NULL;
    CU_ASSERT(built.live_bytes + destroyed.live_bytes < ffn_step_bytes / 2);
    release(&c);
}

/* A packed batch of n_seq sequences of `length` tokens with its own buffers. */
typedef struct owned_batch {
    tfenc_batch batch;
    int32_t seq_start[16], ids[128], types[128], positions[128];
    float x[128 * ENCODER_D];
} owned_batch;

static void owned_batch_fill(owned_batch *b, int n_seq, int length, float value)
{
    memset(b, 0, sizeof *b);
    for (int s = 0; s <= n_seq; s++)
        b->seq_start[s] = s * length;
    for (int t = 0; t < n_seq * length; t++) {
        b->positions[t] = t % length;
        b->ids[t] = (t * 37 + 11) % ENCODER_VOCAB;
        for (int j = 0; j < ENCODER_D; j++)
            b->x[t * ENCODER_D + j] = value * sinf((float)(t * 7 + j));
    }
    b->batch = (tfenc_batch){.n_seq = n_seq, .n_tokens = n_seq * length,
                             .seq_start = b->seq_start, .token_ids = b->ids,
                             .token_types = b->types, .positions = b->positions, .x = b->x,
                             .rows = n_seq * length, .d_model = ENCODER_D};
}

/* Forward never allocates: no scratch grows, no oneDNN primitive or memory
 * object is made, even for a batch of more rows and longer sequences than
 * every earlier one (the model's build made them all). Two forward passes
 * come first, so that the libraries' once-per-process set-up (OpenMP's
 * thread team, OpenBLAS's buffers) is not counted. oneDNN's execute itself
 * allocates a few small blocks of bookkeeping per call (its argument map)
 * and frees them before it returns: measured at 5 blocks of at most 104
 * bytes with oneDNN 2.6, so the bf16 and int8 check is "nothing kept,
 * nothing larger than 256 bytes"; fp32 (OpenBLAS) allocates nothing. */
static void check_forward_allocations(const char *precision)
{
    if (!allocation_counter_works()) {
        CU_FAIL("the counting allocator sees no allocations in this build");
        return;
    }
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, precision, &options), TFENC_OK);
    if (c.config.precision != TFENC_PRECISION_FP32 &&
        tfenc_matrix_check_precision(&ctx, c.config.precision) != TFENC_OK) {
        CU_FAIL("this precision does not run here: its allocations are unchecked");
        release(&c);
        return;
    }
    CU_ASSERT_EQUAL_FATAL(tfenc_model_create(&ctx, &options, &c.model), TFENC_OK);
    owned_batch small, medium, large;
    owned_batch_fill(&small, 1, 3, 1.0f);
    owned_batch_fill(&medium, 3, 30, 0.5f);
    owned_batch_fill(&large, 1, 100, 0.7f); /* more rows and longer sequences than before */
    CU_ASSERT_EQUAL(tfenc_model_forward(&ctx, c.model, &small.batch), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_model_forward(&ctx, c.model, &medium.batch), TFENC_OK);
    allocation_counter_start();
    int status = tfenc_model_forward(&ctx, c.model, &large.batch);
    allocation_counts counts = allocation_counter_stop();
    CU_ASSERT_EQUAL(status, TFENC_OK);
    fprintf(stderr, "\n  %s forward: %ld allocations, largest %zu bytes, %lld bytes kept ",
            precision, counts.calls, counts.largest, counts.live_bytes);
    CU_ASSERT_EQUAL(counts.live_bytes, 0);
    if (c.config.precision == TFENC_PRECISION_FP32)
        CU_ASSERT_EQUAL(counts.calls, 0);
    CU_ASSERT(counts.largest <= 256);
    release(&c);
}

static void test_forward_does_not_allocate(void)
{
    check_forward_allocations("fp32");
    check_forward_allocations("bf16");
    check_forward_allocations("int8");
}

/* Runs the whole encoder at the given step precisions (NULL: the job's) on
 * a copy of `in` and returns its output rows in `out`. */
static int encoder_output(composed *c, tfenc_model_options options,
                          const tfenc_precision *step_precision, const owned_batch *in,
                          owned_batch *out)
{
    *out = *in;
    out->batch.seq_start = out->seq_start;
    out->batch.token_ids = out->ids;
    out->batch.token_types = out->types;
    out->batch.positions = out->positions;
    out->batch.x = out->x;
    options.step_precision = step_precision;
    tfenc_model *model = NULL;
    int status = tfenc_model_create(&ctx, &options, &model);
    if (status == TFENC_OK)
        status = tfenc_model_forward(&ctx, model, &out->batch);
    tfenc_model_destroy(model);
    return status;
}

static double smallest_cosine(const owned_batch *a, const owned_batch *b)
{
    double lowest = 1.0;
    for (int r = 0; r < a->batch.rows; r++) {
        double dot = 0, aa = 0, bb = 0;
        for (int j = 0; j < ENCODER_D; j++) {
            dot += (double)a->x[r * ENCODER_D + j] * b->x[r * ENCODER_D + j];
            aa += (double)a->x[r * ENCODER_D + j] * a->x[r * ENCODER_D + j];
            bb += (double)b->x[r * ENCODER_D + j] * b->x[r * ENCODER_D + j];
        }
        lowest = fmin(lowest, dot / sqrt(aa * bb));
    }
    return lowest;
}

/* The whole encoder (embedding, 3 BERT blocks) in bf16 against fp32: every
 * token's cosine >= 0.9999, the bar. Per block, bf16 rounds the
 * activations entering 6 products and the weights of 4 (relative 2^-9
 * each), 1 - cos ~ 5e-6 per block by the estimate of test_layers' FFN
 * test; three blocks stay near 2e-5, 5x under the bar. */
static void test_bf16_encoder_against_fp32(void)
{
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, "bf16", &options), TFENC_OK);
    if (tfenc_matrix_check_precision(&ctx, TFENC_PRECISION_BF16) != TFENC_OK) {
        CU_FAIL("bf16 does not run here: its accuracy is untested");
        release(&c);
        return;
    }
    owned_batch input, fp32, bf16;
    owned_batch_fill(&input, 3, 40, 0.0f);
    tfenc_precision everywhere_fp32[16];
    for (int i = 0; i < 16; i++)
        everywhere_fp32[i] = TFENC_PRECISION_FP32;
    CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, &input, &fp32), TFENC_OK);
    CU_ASSERT_EQUAL(encoder_output(&c, options, NULL, &input, &bf16), TFENC_OK);
    double cosine = smallest_cosine(&fp32, &bf16);
    fprintf(stderr, "\n  bf16 encoder: min cosine to fp32 %.7f ", cosine);
    CU_ASSERT(cosine >= 0.9999 && cosine < 1.0);
    release(&c);
}

/* The int8 accuracy gate on a sample: it meets min_cosine (default 0.999)
 * by its choice of steps, and that choice, run as a model, gives the
 * cosine it reported; a bar it cannot meet refuses the job in one line
 * that names a layer. */
static void test_precision_gate(void)
{
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, "int8", &options), TFENC_OK);
    if (tfenc_matrix_check_precision(&ctx, TFENC_PRECISION_INT8) != TFENC_OK) {
        CU_FAIL("int8 does not run here: the gate is untested");
        release(&c);
        return;
    }
    owned_batch first, second;
    owned_batch_fill(&first, 3, 30, 0.0f);
    owned_batch_fill(&second, 2, 50, 0.0f);
    tfenc_batch samples[2] = {first.batch, second.batch};
    tfenc_precision chosen[16];
    double step_cosines[16];
    tfenc_precision_report report = {.step_precision = chosen, .step_cosine = step_cosines};
    int status = tfenc_precision_gate(&ctx, &options, samples, 2, c.config.min_cosine, &report);
    CU_ASSERT_EQUAL_FATAL(status, TFENC_OK);
    fprintf(stderr, "\n  int8 gate: sample cosine %.6f, %d step%s in bf16 ", report.sample_cosine,
            report.n_fallbacks, report.n_fallbacks == 1 ? "" : "s");
    CU_ASSERT(report.sample_cosine >= 0.9995);
    int in_bf16 = 0;
    for (int i = 0; i < c.plan.n_steps; i++) {
        CU_ASSERT(chosen[i] == TFENC_PRECISION_INT8 || chosen[i] == TFENC_PRECISION_BF16);
        CU_ASSERT(step_cosines[i] <= 1.0 && step_cosines[i] > 0.99);
        in_bf16 += chosen[i] == TFENC_PRECISION_BF16;
    }
    CU_ASSERT_EQUAL(in_bf16, report.n_fallbacks);
    /* The choice reproduces the reported cosine on the sample. The fp32
     * reference must not calibrate again: the store keeps the gate's. */
    owned_batch fp32, int8;
    tfenc_precision everywhere_fp32[16];
    for (int i = 0; i < 16; i++)
        everywhere_fp32[i] = TFENC_PRECISION_FP32;
    CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, &second, &fp32), TFENC_OK);
    CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, &second, &int8), TFENC_OK);
    double cosine = smallest_cosine(&fp32, &int8);
    CU_ASSERT(cosine >= report.sample_cosine - 1e-6 && cosine < 1.0);

    /* A bar between all-int8 and all-bf16 keeps some steps, not all, in
     * bf16, and is met. */
    for (int i = 0; i < 16; i++)
        chosen[i] = TFENC_PRECISION_INT8;
    owned_batch out;
    double all_int8 = 1.0, all_bf16 = 1.0;
    for (int b = 0; b < 2; b++) {
        const owned_batch *in = b == 0 ? &first : &second;
        CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, in, &fp32), TFENC_OK);
        CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, in, &out), TFENC_OK);
        all_int8 = fmin(all_int8, smallest_cosine(&fp32, &out));
    }
    for (int i = 0; i < 16; i++)
        chosen[i] = TFENC_PRECISION_BF16;
    for (int b = 0; b < 2; b++) {
        const owned_batch *in = b == 0 ? &first : &second;
        CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, in, &fp32), TFENC_OK);
        CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, in, &out), TFENC_OK);
        all_bf16 = fmin(all_bf16, smallest_cosine(&fp32, &out));
    }
    /* the gate wants the sample at 1 - (1 - min_cosine) / 2 */
    double target = (all_int8 + all_bf16) / 2, bar = 1.0 - 2.0 * (1.0 - target);
    fprintf(stderr, "all int8 %.8f, all bf16 %.8f ", all_int8, all_bf16);
    CU_ASSERT(all_int8 < all_bf16);
    status = tfenc_precision_gate(&ctx, &options, samples, 2, bar, &report);
    CU_ASSERT_EQUAL(status, TFENC_OK);
    CU_ASSERT(report.sample_cosine >= target);
    CU_ASSERT(report.n_fallbacks >= 1 && report.n_fallbacks < 2 * ENCODER_REPEAT);
    in_bf16 = 0;
    for (int i = 0; i < c.plan.n_steps; i++)
        in_bf16 += chosen[i] == TFENC_PRECISION_BF16;
    CU_ASSERT_EQUAL(in_bf16, report.n_fallbacks);
    double reproduced = 1.0;
    for (int b = 0; b < 2; b++) {
        const owned_batch *in = b == 0 ? &first : &second;
        CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, in, &fp32), TFENC_OK);
        CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, in, &out), TFENC_OK);
        reproduced = fmin(reproduced, smallest_cosine(&fp32, &out));
    }
    CU_ASSERT(reproduced >= target);

    /* A bar above what even bf16 gives is refused, naming the layer. */
    tfenc_context_init(&ctx);
    status = tfenc_precision_gate(&ctx, &options, samples, 2, 0.99999999, &report);
    CU_ASSERT_EQUAL(status, TFENC_ERR_CONFIG);
    const char *message = tfenc_context_message(&ctx);
    CU_ASSERT(contains(message, "precision = int8: on the corpus sample"));
    CU_ASSERT(contains(message, "(min_cosine = 0.99999999 with half its error to spare)"));
    CU_ASSERT(contains(message, "the least accurate layer is enc."));
    CU_ASSERT_PTR_NULL(strchr(message, '\n'));
    release(&c);
}

static void expect_compose_error(const char *text, const char *message)
{
    composed c;
    CU_ASSERT_NOT_EQUAL(compose(&c, text), TFENC_OK);
    CU_ASSERT(contains(tfenc_context_message(&ctx), message));
    release(&c);
}

static void test_model_composition_errors(void)
{
    const char *head = "[model]\nweights = w.h5\nd_model = 2\n";
    char text[1024];
    snprintf(text, sizeof text, "%s[l]\ntype = scale\nfactr = 2\n", head);
    expect_compose_error(text, "m.ini:6: [l] unknown key 'factr' (not a parameter of layer type scale)");
    snprintf(text, sizeof text, "%s[l]\ntype = nosuch\n", head);
    expect_compose_error(text, "m.ini:4: [l]: no plugin provides layer type 'nosuch'");
    snprintf(text, sizeof text, "%s[l]\nfactor = 2\n", head);
    expect_compose_error(text, "m.ini:4: section [l] has no 'type' key");
    snprintf(text, sizeof text, "%s[b.x]\ntype = scale\n", head);
    expect_compose_error(text, "no block (a section with 'repeat') precedes it");
    snprintf(text, sizeof text, "%s[b]\nrepeat = 0\n[b.x]\ntype = scale\n", head);
    expect_compose_error(text, "[b] repeat = '0': expected an integer in 1..100000");
    snprintf(text, sizeof text, "%s[b]\nrepeat = 2\nnorm = pre\n[b.x]\ntype = scale\n", head);
    expect_compose_error(text, "m.ini:6: [b] unknown key 'norm'");
    /* compose() stores /blk/1/inc/bias: weights of two layers for a block of one. */
    snprintf(text, sizeof text, "%s[blk]\nrepeat = 1\n[blk.inc]\ntype = add\n", head);
    expect_compose_error(text, "m.ini:4: [blk] repeat = 1, but weights (memory) hold group /blk/1 too");
    expect_compose_error("[model]\nd_model = 2\n[l]\ntype = scale\n", "[model] requires key 'weights'");
    expect_compose_error("[model]\nweights = w\nd_model = 2\nwat = 1\n[l]\ntype = scale\n",
                         "m.ini:4: [model] unknown key 'wat'");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite jobs = CU_add_suite("jobfile", NULL, NULL);
    CU_add_test(jobs, "sections in order with lines", test_jobfile_sections_in_order_with_lines);
    CU_add_test(jobs, "errors name the line", test_jobfile_errors_name_line);
    CU_add_test(jobs, "--set overrides", test_jobfile_override);
    CU_pSuite params = CU_add_suite("params", NULL, NULL);
    CU_add_test(params, "typed getters and unused keys", test_params_typed_getters);
    CU_add_test(params, "bad values", test_params_bad_values);
    CU_pSuite weights = CU_add_suite("weights", NULL, NULL);
    CU_add_test(weights, "memory store shapes and NaN", test_weights_memory_shapes_and_nan);
    CU_add_test(weights, "HDF5 file and float16", test_weights_hdf5_file);
    CU_add_test(weights, "linear maps", test_linear_matches_naive_and_stacks_parts);
    CU_pSuite plugins = CU_add_suite("plugin loader", NULL, NULL);
    CU_add_test(plugins, "refuses old ABI and foreign objects", test_loader_refuses_old_abi_and_foreign_objects);
    CU_add_test(plugins, "scans the search path", test_loader_scans_search_path);
    CU_pSuite model = CU_add_suite("model", NULL, NULL);
    CU_add_test(model, "post and pre norm blocks", test_model_post_and_pre_norm);
    CU_add_test(model, "composition errors", test_model_composition_errors);
    CU_pSuite memory = CU_add_suite("memory promises", NULL, NULL);
    CU_add_test(memory, "weights live with their layers", test_weights_live_with_their_layers);
    CU_add_test(memory, "forward does not allocate", test_forward_does_not_allocate);
    CU_pSuite precision = CU_add_suite("precision", NULL, NULL);
    CU_add_test(precision, "bf16 encoder against fp32", test_bf16_encoder_against_fp32);
    CU_add_test(precision, "int8 accuracy gate", test_precision_gate);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_failures() != 0 || CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
