/* Plugin discovery and ABI checks: dlopen, dlsym of the one entry symbol,
 * version compare, each refusal one line naming the file and the reason. */
#include "plugin_loader.h"
#include "context.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct tfenc_plugin_registry {
    char **directories;
    int n_directories;
    void **handles;
    char **files; /* realpath of every file tried, loaded or not */
    int n_files;
    tfenc_plugin_layer *layers;
    int n_layers;
    tfenc_plugin_failure *failures;
    int n_failures;
};

/* Grows *array (of element size `size`) to hold `count + 1` elements. */
static int reserve(void *array, int count, size_t size)
{
    void **pointer = array;
    /* The capacity is always the smallest power of two above count. */
    if (count != 0 && (count & (count - 1)) != 0)
        return 0;
    size_t capacity = count == 0 ? 1 : (size_t)count * 2;
    void *grown = realloc(*pointer, capacity * size);
    if (grown == NULL)
        return -1;
    *pointer = grown;
    return 0;
}

#ifdef TFENC_BUILD_PLUGIN_DIR
/* Whether this libtfenc is the build tree's: the build's plugin directory
 * is BUILD/plugins/.libs and its library lives under BUILD/core/. */
static int running_from_build_tree(void)
{
    Dl_info info;
    if (dladdr((void *)&tfenc_plugin_registry_create, &info) == 0 || info.dli_fname == NULL)
        return 1;
    const char *suffix = "/plugins/.libs";
    size_t length = strlen(TFENC_BUILD_PLUGIN_DIR);
    if (length < strlen(suffix) || length - strlen(suffix) >= PATH_MAX)
        return 1;
    char top[PATH_MAX], top_resolved[PATH_MAX], library[PATH_MAX];
    memcpy(top, TFENC_BUILD_PLUGIN_DIR, length - strlen(suffix));
    top[length - strlen(suffix)] = '\0';
    if (realpath(top, top_resolved) == NULL || realpath(info.dli_fname, library) == NULL)
        return 0; /* no build tree, or no way to tell: use the installed plugins */
    size_t top_length = strlen(top_resolved);
    return strncmp(library, top_resolved, top_length) == 0 &&
           strncmp(library + top_length, "/core/", 6) == 0;
}
#endif

static int is_directory(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

static int add_directory(tfenc_plugin_registry *registry, const char *directory, size_t length)
{
    if (length == 0)
        return TFENC_OK;
    /* The same directory named twice (job path, environment, build tree) is
     * searched and listed once. */
    for (int i = 0; i < registry->n_directories; i++)
        if (strlen(registry->directories[i]) == length &&
            strncmp(registry->directories[i], directory, length) == 0)
            return TFENC_OK;
    char *copy = strndup(directory, length);
    if (copy == NULL || reserve(&registry->directories, registry->n_directories, sizeof(char *)))
        return free(copy), TFENC_ERR_NO_MEMORY;
    registry->directories[registry->n_directories++] = copy;
    return TFENC_OK;
}

static int add_path_list(tfenc_plugin_registry *registry, const char *list)
{
    while (list != NULL && *list != '\0') {
        const char *colon = strchr(list, ':');
        size_t length = colon != NULL ? (size_t)(colon - list) : strlen(list);
        if (add_directory(registry, list, length) != TFENC_OK)
            return TFENC_ERR_NO_MEMORY;
        list = colon != NULL ? colon + 1 : NULL;
    }
    return TFENC_OK;
}

int tfenc_plugin_registry_create(tfenc_context *ctx, const char *job_plugin_path,
                                 tfenc_plugin_registry **registry_out)
{
    *registry_out = NULL;
    tfenc_plugin_registry *registry = calloc(1, sizeof *registry);
    if (registry == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "plugins: out of memory");
    int status = add_path_list(registry, job_plugin_path);
    if (status == TFENC_OK)
        status = add_path_list(registry, getenv("TFENC_PLUGIN_PATH"));
#ifdef TFENC_BUILD_PLUGIN_DIR
    /* Lets an uninstalled build run its own plugins. An installed libtfenc
     * skips them even while the build tree still exists: they could be
     * newer or older than the installed library. */
    if (status == TFENC_OK && running_from_build_tree() && is_directory(TFENC_BUILD_PLUGIN_DIR))
        status = add_directory(registry, TFENC_BUILD_PLUGIN_DIR, strlen(TFENC_BUILD_PLUGIN_DIR));
#endif
#ifdef TFENC_INSTALLED_PLUGIN_DIR
    if (status == TFENC_OK)
        status = add_directory(registry, TFENC_INSTALLED_PLUGIN_DIR,
                               strlen(TFENC_INSTALLED_PLUGIN_DIR));
#endif
    if (status != TFENC_OK) {
        tfenc_plugin_registry_destroy(registry);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "plugins: out of memory");
    }
    *registry_out = registry;
    return TFENC_OK;
}

static int refuse(tfenc_context *ctx, tfenc_plugin_registry *registry, const char *path,
                  const char *format, ...) TFENC_PRINTF(4, 5);

static int refuse(tfenc_context *ctx, tfenc_plugin_registry *registry, const char *path,
                  const char *format, ...)
{
    char reason[768];
    va_list args;
    va_start(args, format);
    vsnprintf(reason, sizeof reason, format, args);
    va_end(args);
    if (reserve(&registry->failures, registry->n_failures, sizeof(tfenc_plugin_failure)) == 0) {
        tfenc_plugin_failure *failure = &registry->failures[registry->n_failures];
        failure->file = strdup(path);
        failure->reason = strdup(reason);
        if (failure->file != NULL && failure->reason != NULL)
            registry->n_failures++;
        else {
            free((char *)failure->file);
            free((char *)failure->reason);
        }
    }
    return tfenc_error(ctx, TFENC_ERR_PLUGIN, "plugin %s: %s", path, reason);
}

static int valid_type_name(const char *type)
{
    if (type == NULL || *type == '\0')
        return 0;
    for (const char *c = type; *c != '\0'; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return 0;
    return 1;
}

/* Why a descriptor cannot be used, or NULL when it can. */
static const char *check_descriptor(const tfenc_layer_descriptor *descriptor, char *why,
                                    size_t size)
{
    if (descriptor->abi_major != TFENC_ABI_MAJOR || descriptor->abi_minor > TFENC_ABI_MINOR) {
        snprintf(why, size,
                 "built for plugin ABI %u.%u, this tfenc provides ABI %d.%d (rebuild the plugin "
                 "against this tfenc's tfenc/plugin.h)",
                 descriptor->abi_major, descriptor->abi_minor, TFENC_ABI_MAJOR, TFENC_ABI_MINOR);
        return why;
    }
    if (descriptor->struct_size < offsetof(tfenc_layer_descriptor, reserved)) {
        snprintf(why, size, "descriptor is %zu bytes, smaller than ABI %d.0's",
                 descriptor->struct_size, TFENC_ABI_MAJOR);
        return why;
    }
    if (!valid_type_name(descriptor->type)) {
        snprintf(why, size, "layer type name '%s' is not [a-z0-9_]+",
                 descriptor->type != NULL ? descriptor->type : "(null)");
        return why;
    }
    if (descriptor->create == NULL || descriptor->forward == NULL || descriptor->destroy == NULL) {
        snprintf(why, size, "layer type '%s' lacks create, forward or destroy", descriptor->type);
        return why;
    }
    return NULL;
}

int tfenc_plugin_registry_load_file(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                    const char *path)
{
    char resolved[PATH_MAX];
    if (realpath(path, resolved) == NULL)
        return refuse(ctx, registry, path, "no such file");
    for (int i = 0; i < registry->n_files; i++)
        if (strcmp(registry->files[i], resolved) == 0)
            return TFENC_OK; /* the same file reached through two directories */
    if (reserve(&registry->files, registry->n_files, sizeof(char *)) ||
        reserve(&registry->handles, registry->n_files, sizeof(void *)))
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "plugins: out of memory");
    registry->files[registry->n_files] = strdup(resolved);
    registry->handles[registry->n_files] = NULL;
    if (registry->files[registry->n_files] == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "plugins: out of memory");
    int file_index = registry->n_files++;

    dlerror();
    void *handle = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *reason = dlerror();
        return refuse(ctx, registry, path, "cannot load: %s", reason != NULL ? reason : "unknown");
    }
    tfenc_plugin_entry_fn entry;
    *(void **)&entry = dlsym(handle, TFENC_PLUGIN_ENTRY);
    if (entry == NULL) {
        dlclose(handle);
        return refuse(ctx, registry, path, "not a tfenc plugin: it does not export %s()",
                      TFENC_PLUGIN_ENTRY);
    }
    /* Check every descriptor before registering any: a file is usable whole or not at all. */
    char why[512];
    unsigned count = 0;
    for (const tfenc_layer_descriptor *d; (d = entry(count)) != NULL; count++) {
        if (count >= 1024 || check_descriptor(d, why, sizeof why) != NULL) {
            dlclose(handle);
            if (count >= 1024)
                return refuse(ctx, registry, path, "more than 1024 descriptors (no NULL end?)");
            return refuse(ctx, registry, path, "%s", why);
        }
    }
    if (count == 0) {
        dlclose(handle);
        return refuse(ctx, registry, path, "%s() describes no layer type", TFENC_PLUGIN_ENTRY);
    }
    registry->handles[file_index] = handle;
    for (unsigned i = 0; i < count; i++) {
        const tfenc_layer_descriptor *descriptor = entry(i);
        if (tfenc_plugin_registry_find(registry, descriptor->type) != NULL)
            continue; /* shadowed by an earlier directory */
        if (reserve(&registry->layers, registry->n_layers, sizeof(tfenc_plugin_layer)))
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "plugins: out of memory");
        registry->layers[registry->n_layers].descriptor = descriptor;
        registry->layers[registry->n_layers].file = registry->files[file_index];
        registry->n_layers++;
    }
    return TFENC_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int tfenc_plugin_registry_scan(tfenc_context *ctx, tfenc_plugin_registry *registry)
{
    for (int d = 0; d < registry->n_directories; d++) {
        DIR *directory = opendir(registry->directories[d]);
        if (directory == NULL)
            continue; /* a missing search directory is normal (e.g. not installed) */
        char **names = NULL;
        int n_names = 0;
        for (struct dirent *item; (item = readdir(directory)) != NULL;) {
            size_t length = strlen(item->d_name);
            if (length < 4 || strcmp(item->d_name + length - 3, ".so") != 0)
                continue;
            if (reserve(&names, n_names, sizeof(char *)) || (names[n_names] = strdup(item->d_name)) == NULL) {
                closedir(directory);
                for (int i = 0; i < n_names; i++)
                    free(names[i]);
                free(names);
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "plugins: out of memory");
            }
            n_names++;
        }
        closedir(directory);
        /* Sorted, so that which plugin wins a name clash does not depend on the file system. */
        qsort(names, (size_t)n_names, sizeof *names, compare_names);
        for (int i = 0; i < n_names; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", registry->directories[d], names[i]);
            tfenc_context scratch;
            tfenc_context_init(&scratch);
            int status = tfenc_plugin_registry_load_file(&scratch, registry, path);
            free(names[i]);
            if (status == TFENC_ERR_NO_MEMORY) {
                for (int k = i + 1; k < n_names; k++)
                    free(names[k]);
                free(names);
                return tfenc_error(ctx, status, "%s", tfenc_context_message(&scratch));
            }
        }
        free(names);
    }
    return TFENC_OK;
}

const tfenc_plugin_layer *tfenc_plugin_registry_find(const tfenc_plugin_registry *registry,
                                                     const char *type)
{
    for (int i = 0; i < registry->n_layers; i++)
        if (strcmp(registry->layers[i].descriptor->type, type) == 0)
            return &registry->layers[i];
    return NULL;
}

int tfenc_plugin_registry_missing(tfenc_context *ctx, const tfenc_plugin_registry *registry,
                                  const char *type, const char *where)
{
    char detail[768] = "";
    size_t used = 0;
    for (int i = 0; i < registry->n_directories && used < sizeof detail; i++)
        used += (size_t)snprintf(detail + used, sizeof detail - used, "%s%s", i ? ":" : "",
                                 registry->directories[i]);
    for (int i = 0; i < registry->n_failures && used < sizeof detail; i++)
        used += (size_t)snprintf(detail + used, sizeof detail - used, "; refused %s: %s",
                                 registry->failures[i].file, registry->failures[i].reason);
    return tfenc_error(ctx, TFENC_ERR_PLUGIN,
                       "%s: no plugin provides layer type '%s' (searched %s)", where, type,
                       detail[0] != '\0' ? detail : "nothing");
}

int tfenc_plugin_registry_n_layers(const tfenc_plugin_registry *registry)
{
    return registry->n_layers;
}

const tfenc_plugin_layer *tfenc_plugin_registry_layer(const tfenc_plugin_registry *registry, int i)
{
    return &registry->layers[i];
}

int tfenc_plugin_registry_n_failures(const tfenc_plugin_registry *registry)
{
    return registry->n_failures;
}

const tfenc_plugin_failure *tfenc_plugin_registry_failure(const tfenc_plugin_registry *registry,
                                                          int i)
{
    return &registry->failures[i];
}

int tfenc_plugin_registry_n_directories(const tfenc_plugin_registry *registry)
{
    return registry->n_directories;
}

const char *tfenc_plugin_registry_directory(const tfenc_plugin_registry *registry, int i)
{
    return registry->directories[i];
}

void tfenc_plugin_registry_destroy(tfenc_plugin_registry *registry)
{
    if (registry == NULL)
        return;
    for (int i = 0; i < registry->n_files; i++) {
        if (registry->handles[i] != NULL)
            dlclose(registry->handles[i]);
        free(registry->files[i]);
    }
    for (int i = 0; i < registry->n_failures; i++) {
        free((char *)registry->failures[i].file);
        free((char *)registry->failures[i].reason);
    }
    for (int i = 0; i < registry->n_directories; i++)
        free(registry->directories[i]);
    free(registry->directories);
    free(registry->handles);
    free(registry->files);
    free(registry->layers);
    free(registry->failures);
    free(registry);
}
