/* The plugin loader (core/plugin/plugin_loader): plugins built for an older
 * ABI, objects without the entry symbol and files that are not shared
 * objects are refused with the reason, which a job asking for their layer
 * type learns; a search directory is scanned and refusals are recorded, not
 * fatal. */
#include "base/context.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "plugin/plugin_loader.h"

#include <CUnit/CUnit.h>
#include <stdio.h>

static tfenc_context ctx;

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

static const test_case loader_cases[] = {
    {"refuses old ABI and foreign objects", test_loader_refuses_old_abi_and_foreign_objects},
    {"scans the search path", test_loader_scans_search_path},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"plugin loader", NULL, NULL, loader_cases},
    {NULL, NULL, NULL, NULL}};
