/* Plugin discovery and loading: the search path, the trust and file checks,
 * the index of which file provides which layer type, the probe in a child
 * process, dlopen, and the ABI checks. Each refusal is one line naming the
 * file (or directory) and the reason. */
#include "plugin/plugin_loader.h"
#include "base/context.h"
#include "base/files.h"
#include "base/sha256.h"
#include "job/params.h"
#include "plugin/shared_object.h"
/* TFENC_BUILD_PLUGIN_DIR, written by the build (core/plugin/local.mk) */
#include "plugin/build_plugin_dir.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A plugin's constructors and entry function get this long in the probe
 * process; loading a shared object takes milliseconds. */
#define PROBE_SECONDS 60
/* More descriptors than this means the entry function has no NULL end. */
#define MAX_DESCRIPTORS 1024

enum file_state { NOT_LOADED, LOADED, REFUSED };

/* One plugin file found in a search directory, examined but perhaps not loaded. */
typedef struct plugin_file {
    char *path;       /* directory/name, as found: used in messages */
    char *resolved;   /* after symbolic links: what dlopen gets */
    tfenc_file_id id; /* the same file through two directories is one file */
    char **provides;  /* the layer types it provides (declared, or its name's) */
    int n_provides;
    int declared;     /* 1: `provides` is its TFENC_PLUGIN_TYPES declaration */
    enum file_state state;
    void *handle;
    char *sha256;     /* of the bytes dlopen mapped, once loaded: part of a job's identity */
} plugin_file;

struct tfenc_plugin_registry {
    char **directories;
    int n_directories;
    int indexed; /* the directories were examined */
    plugin_file *files;
    int n_files;
    tfenc_plugin_layer *layers;
    int n_layers;
    tfenc_plugin_failure *failures;
    int n_failures;
    char **warnings; /* search directories named by the user that do not exist */
    int n_warnings;
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

static int out_of_memory(tfenc_context *ctx)
{
    return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "plugins: out of memory");
}

/* ------------------------------------------------------- the search path */

/* The directory of the running libtfenc, resolved, into `directory`. */
static int library_directory(char *directory, size_t size)
{
    Dl_info info;
    char library[PATH_MAX];
    if (dladdr((void *)&tfenc_plugin_registry_create, &info) == 0 || info.dli_fname == NULL ||
        realpath(info.dli_fname, library) == NULL)
        return -1;
    char *slash = strrchr(library, '/');
    if (slash == NULL || (size_t)(slash - library) >= size)
        return -1;
    *slash = '\0';
    snprintf(directory, size, "%s", library);
    return 0;
}

#ifdef TFENC_BUILD_PLUGIN_DIR
/* Whether this libtfenc is the build tree's: the build's plugin directory
 * is BUILD/plugins/.libs and its library lives under BUILD/core/. */
static int running_from_build_tree(void)
{
    const char *suffix = "/plugins/.libs";
    size_t length = strlen(TFENC_BUILD_PLUGIN_DIR);
    if (length < strlen(suffix) || length - strlen(suffix) >= PATH_MAX)
        return 0;
    char top[PATH_MAX], top_resolved[PATH_MAX], library[PATH_MAX];
    memcpy(top, TFENC_BUILD_PLUGIN_DIR, length - strlen(suffix));
    top[length - strlen(suffix)] = '\0';
    if (realpath(top, top_resolved) == NULL || library_directory(library, sizeof library) != 0)
        return 0; /* no build tree, or no way to tell: use the installed plugins */
    size_t top_length = strlen(top_resolved);
    return strncmp(library, top_resolved, top_length) == 0 &&
           strncmp(library + top_length, "/core/", 6) == 0;
}
#endif

/* The built-in plugins of the running libtfenc, into `directory`; 0 if none. */
static int builtin_directory(char *directory, size_t size)
{
#ifdef TFENC_BUILD_PLUGIN_DIR
    /* An uninstalled build runs its own plugins; an installed libtfenc never
     * mixes in the build tree's, which may be newer or older. */
    if (running_from_build_tree()) {
        snprintf(directory, size, "%s", TFENC_BUILD_PLUGIN_DIR);
        return 1;
    }
#endif
#if defined(TFENC_INSTALLED_PLUGIN_DIR) && defined(TFENC_INSTALLED_LIB_DIR)
    /* Installed, the plugins live in LIBDIR/tfenc beside libtfenc.so: found
     * from where the library really is, so that a copy installed elsewhere
     * (a staged DESTDIR, a moved prefix) uses its own plugins and never
     * another installation's. */
    char library[PATH_MAX];
    if (strcmp(TFENC_INSTALLED_PLUGIN_DIR, TFENC_INSTALLED_LIB_DIR "/tfenc") == 0 &&
        library_directory(library, sizeof library) == 0 && strlen(library) + 7 <= size) {
        memcpy(directory, library, strlen(library));
        memcpy(directory + strlen(library), "/tfenc", 7);
        return 1;
    }
#endif
#ifdef TFENC_INSTALLED_PLUGIN_DIR
    snprintf(directory, size, "%s", TFENC_INSTALLED_PLUGIN_DIR);
    return 1;
#else
    (void)directory;
    (void)size;
    return 0;
#endif
}

/* A directory the user named (`origin`: where) that does not exist is
 * searched all the same (it may appear later), but said: a misspelt
 * plugin_path would otherwise only show as a missing layer type. */
static int warn_if_missing(tfenc_plugin_registry *registry, const char *directory,
                           const char *origin)
{
    struct stat info;
    if (origin == NULL || stat(directory, &info) == 0 || (errno != ENOENT && errno != ENOTDIR))
        return TFENC_OK;
    size_t length = strlen(directory) + strlen(origin) + 64;
    char *line = malloc(length);
    if (line == NULL || reserve(&registry->warnings, registry->n_warnings, sizeof(char *)))
        return free(line), TFENC_ERR_NO_MEMORY;
    snprintf(line, length, "plugin directory %s (%s) does not exist", directory, origin);
    registry->warnings[registry->n_warnings++] = line;
    return TFENC_OK;
}

static int add_directory(tfenc_plugin_registry *registry, const char *directory, size_t length,
                         const char *relative_to, const char *origin)
{
    if (length == 0)
        return TFENC_OK;
    char *copy;
    if (relative_to != NULL && directory[0] != '/' && strcmp(relative_to, ".") != 0) {
        /* `plugin_path = .` means the job file's directory, as every other
         * path of the job does. */
        size_t total = strlen(relative_to) + 1 + length + 1;
        copy = malloc(total);
        if (copy != NULL)
            snprintf(copy, total, "%s/%.*s", relative_to, (int)length, directory);
    } else {
        copy = strndup(directory, length);
    }
    if (copy == NULL)
        return TFENC_ERR_NO_MEMORY;
    /* The same directory named twice (job path, environment, built-in) is
     * searched and listed once. */
    for (int i = 0; i < registry->n_directories; i++)
        if (strcmp(registry->directories[i], copy) == 0)
            return free(copy), TFENC_OK;
    if (warn_if_missing(registry, copy, origin) != TFENC_OK ||
        reserve(&registry->directories, registry->n_directories, sizeof(char *)))
        return free(copy), TFENC_ERR_NO_MEMORY;
    registry->directories[registry->n_directories++] = copy;
    return TFENC_OK;
}

static int add_path_list(tfenc_plugin_registry *registry, const char *list,
                         const char *relative_to, const char *origin)
{
    while (list != NULL && *list != '\0') {
        const char *colon = strchr(list, ':');
        size_t length = colon != NULL ? (size_t)(colon - list) : strlen(list);
        if (add_directory(registry, list, length, relative_to, origin) != TFENC_OK)
            return TFENC_ERR_NO_MEMORY;
        list = colon != NULL ? colon + 1 : NULL;
    }
    return TFENC_OK;
}

int tfenc_plugin_registry_create(tfenc_context *ctx, const char *job_plugin_path,
                                 const char *job_directory, tfenc_plugin_registry **registry_out)
{
    *registry_out = NULL;
    tfenc_plugin_registry *registry = calloc(1, sizeof *registry);
    if (registry == NULL)
        return out_of_memory(ctx);
    int status = add_path_list(registry, job_plugin_path, job_directory, "[model] plugin_path");
    if (status == TFENC_OK)
        status = add_path_list(registry, getenv("TFENC_PLUGIN_PATH"), NULL, "$TFENC_PLUGIN_PATH");
    /* The built-in directory is absent in some installs: no warning. */
    char builtin[PATH_MAX];
    if (status == TFENC_OK && builtin_directory(builtin, sizeof builtin))
        status = add_directory(registry, builtin, strlen(builtin), NULL, NULL);
    if (status != TFENC_OK) {
        tfenc_plugin_registry_destroy(registry);
        return out_of_memory(ctx);
    }
    *registry_out = registry;
    return TFENC_OK;
}

/* ------------------------------------------------------------ refusals */

/* Records why `path` (a file or a directory) was refused; returns 0, or -1
 * when out of memory. */
static int record(tfenc_plugin_registry *registry, const char *path, const char *format, ...)
    TFENC_PRINTF(3, 4);

static int record(tfenc_plugin_registry *registry, const char *path, const char *format, ...)
{
    char reason[768];
    va_list args;
    va_start(args, format);
    vsnprintf(reason, sizeof reason, format, args);
    va_end(args);
    for (int i = 0; i < registry->n_failures; i++)
        if (strcmp(registry->failures[i].file, path) == 0 &&
            strcmp(registry->failures[i].reason, reason) == 0)
            return 0; /* the same refusal found again (a second scan) */
    if (reserve(&registry->failures, registry->n_failures, sizeof(tfenc_plugin_failure)))
        return -1;
    tfenc_plugin_failure *failure = &registry->failures[registry->n_failures];
    failure->file = strdup(path);
    failure->reason = strdup(reason);
    if (failure->file == NULL || failure->reason == NULL) {
        free((char *)failure->file);
        free((char *)failure->reason);
        return -1;
    }
    registry->n_failures++;
    return 0;
}

/* Records the refusal and returns it as the context's error. */
static int refuse(tfenc_context *ctx, tfenc_plugin_registry *registry, const char *path,
                  const char *reason)
{
    if (record(registry, path, "%s", reason) != 0)
        return out_of_memory(ctx);
    return tfenc_error(ctx, TFENC_ERR_PLUGIN, "plugin %s: %s", path, reason);
}

/* Why a file or directory may not supply code that runs as this user, or
 * NULL: it must belong to this user or to root, and be writable by nobody
 * else, or anyone in its group or on the machine could swap the code. */
static const char *untrusted(const char *path, const struct stat *info, char *why, size_t size)
{
    uid_t user = geteuid();
    if (info->st_uid != user && info->st_uid != 0)
        snprintf(why, size, "owned by uid %ld, neither this user (uid %ld) nor root: its owner "
                 "could change the code tfenc runs", (long)info->st_uid, (long)user);
    else if (info->st_mode & S_IWOTH)
        snprintf(why, size, "writable by every user (mode %04o): anyone could change the code "
                 "tfenc runs (chmod o-w %s)", (unsigned)(info->st_mode & 07777), path);
    else if (info->st_mode & S_IWGRP)
        snprintf(why, size, "writable by its group (mode %04o): the group could change the "
                 "code tfenc runs (chmod g-w %s)", (unsigned)(info->st_mode & 07777), path);
    else
        return NULL;
    return why;
}

/* ------------------------------------------------------------ the index */

static int valid_type_name(const char *type)
{
    if (type == NULL || *type == '\0')
        return 0;
    for (const char *c = type; *c != '\0'; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return 0;
    return 1;
}

static int provides(const plugin_file *file, const char *type)
{
    for (int i = 0; i < file->n_provides; i++)
        if (strcmp(file->provides[i], type) == 0)
            return 1;
    return 0;
}

static void free_file(plugin_file *file)
{
    if (file->handle != NULL)
        dlclose(file->handle);
    for (int i = 0; i < file->n_provides; i++)
        free(file->provides[i]);
    free(file->provides);
    free(file->path);
    free(file->resolved);
    free(file->sha256);
}

/* Examines one file and adds it to the index. Returns TFENC_OK (also when
 * the file is refused: that is recorded), or TFENC_ERR_NO_MEMORY. With
 * `explicit_file`, a refusal is also returned as the context's error. */
static int index_file(tfenc_context *ctx, tfenc_plugin_registry *registry, const char *path,
                      const char *search_directory, int explicit_file, plugin_file **indexed)
{
    *indexed = NULL;
    char why[768], trust[768 + PATH_MAX];
    struct stat info;
    int descriptor = tfenc_file_open_regular_descriptor(path, &info, why, sizeof why);
    if (descriptor < 0)
        return explicit_file ? refuse(ctx, registry, path, why)
                             : (record(registry, path, "%s", why) ? out_of_memory(ctx) : TFENC_OK);
    for (int i = 0; i < registry->n_files; i++)
        if (registry->files[i].id.device == info.st_dev && registry->files[i].id.inode == info.st_ino) {
            close(descriptor); /* the same file reached through two directories */
            *indexed = &registry->files[i];
            return TFENC_OK;
        }
    char resolved[PATH_MAX];
    const char *problem = NULL;
    if (realpath(path, resolved) == NULL) {
        snprintf(why, sizeof why, "cannot resolve: %s", strerror(errno));
        problem = why;
    } else if ((problem = untrusted(resolved, &info, trust, sizeof trust)) == NULL) {
        /* A symbolic link into another directory: that one must be safe too. */
        char *slash = strrchr(resolved, '/');
        char real_directory[PATH_MAX] = "/", search_resolved[PATH_MAX] = "";
        if (slash != NULL && slash != resolved)
            snprintf(real_directory, sizeof real_directory, "%.*s", (int)(slash - resolved),
                     resolved);
        struct stat directory_info;
        char directory_why[512];
        if (search_directory != NULL)
            (void)!realpath(search_directory, search_resolved);
        if (strcmp(real_directory, search_resolved) != 0 &&
            stat(real_directory, &directory_info) == 0 &&
            untrusted(real_directory, &directory_info, directory_why, sizeof directory_why) != NULL) {
            snprintf(trust, sizeof trust, "its directory %s is %s", real_directory, directory_why);
            problem = trust;
        }
    }
    tfenc_shared_object object = {0};
    if (problem == NULL &&
        tfenc_shared_object_examine(descriptor, info.st_size, &object, why, sizeof why) != 0)
        problem = why;
    /* The plugin ABI is tfenc/plugin.h: libtfenc's other functions are for
     * its own programs and change without notice (core/libtfenc.map). */
    if (problem == NULL && object.uses_private_symbols) {
        snprintf(why, sizeof why, "needs libtfenc symbols of version %s, which are not plugin "
                 "ABI: a plugin may call only the functions of tfenc/plugin.h (nm -D shows "
                 "which)", TFENC_PRIVATE_VERSION);
        problem = why;
    }
    close(descriptor);
    if (problem != NULL) {
        tfenc_shared_object_free(&object);
        if (explicit_file)
            return refuse(ctx, registry, path, problem);
        return record(registry, path, "%s", problem) ? out_of_memory(ctx) : TFENC_OK;
    }

    if (reserve(&registry->files, registry->n_files, sizeof(plugin_file))) {
        tfenc_shared_object_free(&object);
        return out_of_memory(ctx);
    }
    plugin_file *file = &registry->files[registry->n_files];
    memset(file, 0, sizeof *file);
    file->path = strdup(path);
    file->resolved = strdup(resolved);
    file->id.device = info.st_dev;
    file->id.inode = info.st_ino;
    file->declared = object.declares_types;
    if (object.declares_types) {
        file->provides = object.types;
        file->n_provides = object.n_types;
        object.types = NULL;
        object.n_types = 0;
    } else {
        /* Without a declaration the name says the type: NAME.so gives NAME. */
        const char *base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
        size_t length = strlen(base);
        char *type = length > 3 && strcmp(base + length - 3, ".so") == 0
                         ? strndup(base, length - 3) : NULL;
        if (type != NULL && valid_type_name(type)) {
            file->provides = malloc(sizeof *file->provides);
            if (file->provides != NULL) {
                file->provides[0] = type;
                file->n_provides = 1;
                type = NULL;
            }
        }
        free(type);
    }
    tfenc_shared_object_free(&object);
    if (file->path == NULL || file->resolved == NULL) {
        free_file(file);
        return out_of_memory(ctx);
    }
    registry->n_files++;
    *indexed = file;
    return TFENC_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Examines every search directory and every *.so in it, once. */
static int index_directories(tfenc_context *ctx, tfenc_plugin_registry *registry)
{
    if (registry->indexed)
        return TFENC_OK;
    registry->indexed = 1;
    for (int d = 0; d < registry->n_directories; d++) {
        const char *name = registry->directories[d];
        struct stat info;
        char why[512];
        if (stat(name, &info) != 0)
            continue; /* a missing search directory is normal (e.g. not installed) */
        const char *problem = !S_ISDIR(info.st_mode) ? "is not a directory"
                                                     : untrusted(name, &info, why, sizeof why);
        if (problem != NULL) {
            if (record(registry, name, "search directory %s", problem))
                return out_of_memory(ctx);
            continue;
        }
        DIR *directory = opendir(name);
        if (directory == NULL) {
            if (record(registry, name, "search directory cannot be read: %s", strerror(errno)))
                return out_of_memory(ctx);
            continue;
        }
        char **names = NULL;
        int n_names = 0, status = TFENC_OK;
        for (struct dirent *item; status == TFENC_OK && (item = readdir(directory)) != NULL;) {
            size_t length = strlen(item->d_name);
            if (length < 4 || strcmp(item->d_name + length - 3, ".so") != 0)
                continue;
            if (reserve(&names, n_names, sizeof(char *)) ||
                (names[n_names] = strdup(item->d_name)) == NULL)
                status = out_of_memory(ctx);
            else
                n_names++;
        }
        closedir(directory);
        /* Sorted, so that messages and listings do not depend on the file system. */
        if (n_names > 0)
            qsort(names, (size_t)n_names, sizeof *names, compare_names);
        for (int i = 0; i < n_names; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", name, names[i]);
            plugin_file *file;
            if (status == TFENC_OK)
                status = index_file(ctx, registry, path, name, 0, &file);
            free(names[i]);
        }
        free(names);
        if (status != TFENC_OK)
            return status;
    }
    return TFENC_OK;
}

/* ------------------------------------------------------------- loading */

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
    if (descriptor->struct_size < offsetof(tfenc_layer_descriptor, params)) {
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
    char table[400];
    if (tfenc_params_check_table(tfenc_params_declared(descriptor), table, sizeof table) != NULL) {
        snprintf(why, size, "layer type '%s' %s", descriptor->type, table);
        return why;
    }
    return NULL;
}

/* Loads `path` in a child process first: its constructors and entry
 * function run there, so that one that crashes, hangs or ends the process
 * ends only the child, and the reason can be told. Returns 0 when the child
 * got through, else -1 with the reason in `why`. */
static int probe(const char *path, char *why, size_t size)
{
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) {
        snprintf(why, size, "cannot make a pipe to probe it: %s", strerror(errno));
        return -1;
    }
    pid_t child = fork();
    if (child < 0) {
        snprintf(why, size, "cannot fork to probe it: %s", strerror(errno));
        close(ends[0]);
        close(ends[1]);
        return -1;
    }
    if (child == 0) {
        /* The child only loads, calls the entry function and reports; it
         * never returns into tfenc (MPI, HDF5, open files are the parent's).
         * A dlopen error is left for the parent's own dlopen to report. */
        close(ends[0]);
        /* A crash must end the child quietly: the parent says what it was.
         * The child inherited the crash handlers of Open MPI (a 25-line
         * backtrace) or of a sanitizer; back to the default action. And
         * whatever the plugin prints here, the parent's own load prints
         * again: the child's output goes nowhere. */
        static const int crashes[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP};
        for (size_t i = 0; i < sizeof crashes / sizeof *crashes; i++)
            signal(crashes[i], SIG_DFL);
        int nowhere = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (nowhere >= 0) {
            dup2(nowhere, STDOUT_FILENO);
            dup2(nowhere, STDERR_FILENO);
            close(nowhere);
        }
        void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        tfenc_plugin_entry_fn entry = NULL;
        if (handle != NULL)
            *(void **)&entry = dlsym(handle, TFENC_PLUGIN_ENTRY);
        for (unsigned i = 0; entry != NULL && i <= MAX_DESCRIPTORS && entry(i) != NULL; i++)
            ;
        (void)!write(ends[1], "ok", 2);
        _exit(0);
    }
    close(ends[1]);
    char reply[2];
    size_t got = 0;
    int timed_out = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (got < sizeof reply) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed_ms = (long)(now.tv_sec - start.tv_sec) * 1000 +
                          (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed_ms >= PROBE_SECONDS * 1000L) {
            timed_out = 1;
            break;
        }
        struct pollfd ready = {.fd = ends[0], .events = POLLIN};
        int polled = poll(&ready, 1, (int)(PROBE_SECONDS * 1000L - elapsed_ms));
        if (polled < 0 && errno == EINTR)
            continue; /* a signal for the job (SIGTERM is handled after loading) */
        if (polled <= 0)
            continue;
        ssize_t n = read(ends[0], reply + got, sizeof reply - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the child ended without a word */
        got += (size_t)n;
    }
    close(ends[0]);
    if (timed_out)
        kill(child, SIGKILL);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (got == sizeof reply && memcmp(reply, "ok", 2) == 0)
        return 0;
    if (timed_out)
        snprintf(why, size, "did not finish loading within %d s (a constructor or %s() hangs; "
                 "found in a probe process)", PROBE_SECONDS, TFENC_PLUGIN_ENTRY);
    else if (WIFSIGNALED(status))
        snprintf(why, size, "crashes while loading: %s in a constructor or %s() (found in a "
                 "probe process)", strsignal(WTERMSIG(status)), TFENC_PLUGIN_ENTRY);
    else
        snprintf(why, size, "ends the process while loading, with exit status %d and no error "
                 "(a constructor or %s() calls exit or _exit; a plugin must return errors, "
                 "never end the process; found in a probe process)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, TFENC_PLUGIN_ENTRY);
    return -1;
}

static int described(tfenc_plugin_entry_fn entry, unsigned count, const char *type)
{
    for (unsigned i = 0; i < count; i++)
        if (strcmp(entry(i)->type, type) == 0)
            return 1;
    return 0;
}

/* Adds a loaded descriptor to the layer types; the same type from another
 * file is refused (recorded against `file`). */
static int add_layer(tfenc_context *ctx, tfenc_plugin_registry *registry, plugin_file *file,
                     const tfenc_layer_descriptor *descriptor)
{
    const tfenc_plugin_layer *existing = tfenc_plugin_registry_find(registry, descriptor->type);
    if (existing != NULL) {
        if (strcmp(existing->file, file->resolved) != 0 &&
            record(registry, file->path, "provides layer type '%s', which %s provides too: a "
                   "job needing it is refused until one of them is removed", descriptor->type,
                   existing->file))
            return out_of_memory(ctx);
        return TFENC_OK;
    }
    if (reserve(&registry->layers, registry->n_layers, sizeof(tfenc_plugin_layer)))
        return out_of_memory(ctx);
    registry->layers[registry->n_layers].descriptor = descriptor;
    registry->layers[registry->n_layers].file = file->resolved;
    registry->layers[registry->n_layers].sha256 = file->sha256;
    registry->n_layers++;
    return TFENC_OK;
}

/* Loads an indexed file: probe, dlopen, entry symbol, descriptors checked
 * whole (a file is usable whole or not at all) and against what the file
 * provides. With `all_types`, every described type is registered (a file
 * named explicitly), else only the ones it provides. */
static int load(tfenc_context *ctx, tfenc_plugin_registry *registry, plugin_file *file,
                int all_types)
{
    if (file->state == LOADED)
        return TFENC_OK;
    char why[768];
    if (file->state == REFUSED) {
        for (int i = registry->n_failures - 1; i >= 0; i--)
            if (strcmp(registry->failures[i].file, file->path) == 0)
                return tfenc_error(ctx, TFENC_ERR_PLUGIN, "plugin %s: %s", file->path,
                                   registry->failures[i].reason);
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "plugin %s: refused", file->path);
    }
    file->state = REFUSED; /* until every check passed */
    if (probe(file->resolved, why, sizeof why) != 0)
        return refuse(ctx, registry, file->path, why);
    /* Hashed just before dlopen maps it: a resumed job must run the same
     * code as the run that began its output (a rebuilt plugin with other
     * arithmetic would mix two builds' rows in one file). */
    if (file->sha256 == NULL && (file->sha256 = malloc(65)) == NULL)
        return out_of_memory(ctx);
    if (tfenc_sha256_file(ctx, file->resolved, file->sha256) != TFENC_OK) {
        snprintf(why, sizeof why, "cannot read it: %s", tfenc_context_message(ctx));
        tfenc_context_clear(ctx);
        return refuse(ctx, registry, file->path, why);
    }
    dlerror();
    void *handle = dlopen(file->resolved, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *reason = dlerror();
        snprintf(why, sizeof why, "cannot load: %s", reason != NULL ? reason : "unknown");
        return refuse(ctx, registry, file->path, why);
    }
    tfenc_plugin_entry_fn entry;
    *(void **)&entry = dlsym(handle, TFENC_PLUGIN_ENTRY);
    if (entry == NULL) {
        dlclose(handle);
        snprintf(why, sizeof why, "not a tfenc plugin: it does not export %s()",
                 TFENC_PLUGIN_ENTRY);
        return refuse(ctx, registry, file->path, why);
    }
    unsigned count = 0;
    const char *problem = NULL;
    for (const tfenc_layer_descriptor *d; problem == NULL && (d = entry(count)) != NULL; count++) {
        if (count >= MAX_DESCRIPTORS) {
            snprintf(why, sizeof why, "more than %d descriptors (no NULL end?)", MAX_DESCRIPTORS);
            problem = why;
        } else {
            problem = check_descriptor(d, why, sizeof why);
        }
    }
    if (problem == NULL && count == 0) {
        snprintf(why, sizeof why, "%s() describes no layer type", TFENC_PLUGIN_ENTRY);
        problem = why;
    }
    /* What the index promised must hold: a declaration lists exactly the
     * described types; a file without one describes the type of its name. */
    for (int i = 0; problem == NULL && i < file->n_provides; i++)
        if (!described(entry, count, file->provides[i])) {
            snprintf(why, sizeof why, file->declared
                     ? "declares layer type '%s' (TFENC_PLUGIN_TYPES) but describes no such type"
                     : "is named after layer type '%s' but describes no such type (declare its "
                       "types with TFENC_PLUGIN_TYPES)", file->provides[i]);
            problem = why;
        }
    if (problem != NULL) {
        dlclose(handle);
        return refuse(ctx, registry, file->path, problem);
    }
    file->handle = handle;
    file->state = LOADED;
    for (unsigned i = 0; i < count; i++) {
        const tfenc_layer_descriptor *descriptor = entry(i);
        if (!all_types && !provides(file, descriptor->type)) {
            /* Not findable without loading, so never offered: a job needing
             * it is told why instead of loading the file by chance. */
            if (record(registry, file->path, "describes layer type '%s' but does not declare "
                       "it (TFENC_PLUGIN_TYPES%s): that type is not offered", descriptor->type,
                       file->declared ? "" : ", or a file name of its own") != 0)
                return out_of_memory(ctx);
            continue;
        }
        int status = add_layer(ctx, registry, file, descriptor);
        if (status != TFENC_OK)
            return status;
    }
    return TFENC_OK;
}

int tfenc_plugin_registry_require(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                  const char *type, const char *where)
{
    int status = index_directories(ctx, registry);
    if (status != TFENC_OK)
        return status;
    plugin_file *found = NULL;
    for (int i = 0; i < registry->n_files; i++) {
        plugin_file *file = &registry->files[i];
        if (!provides(file, type))
            continue;
        if (found != NULL)
            return tfenc_error(ctx, TFENC_ERR_PLUGIN,
                               "%s: layer type '%s' is provided by both %s and %s: remove or "
                               "rename one (tfenc does not choose between plugins)",
                               where, type, found->path, file->path);
        found = file;
    }
    if (found == NULL) {
        /* A file loaded explicitly may describe it too. */
        if (tfenc_plugin_registry_find(registry, type) != NULL)
            return TFENC_OK;
        return tfenc_plugin_registry_missing(ctx, registry, type, where);
    }
    status = load(ctx, registry, found, 0);
    if (status != TFENC_OK) {
        /* Say where the type was needed, then why its file is refused. */
        return tfenc_error_prefix(ctx, status, "%s: layer type '%s'", where, type);
    }
    return TFENC_OK;
}

int tfenc_plugin_registry_load_job(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                   const tfenc_jobfile *job)
{
    for (int i = 0; i < job->n_sections; i++) {
        const tfenc_job_section *section = &job->sections[i];
        const tfenc_job_entry *type = tfenc_job_section_get(section, "type");
        /* Even when its file is loaded already (for another type it
         * provides): a second file providing the type must be refused. */
        if (type == NULL)
            continue;
        char where[600];
        if (type->line > 0)
            snprintf(where, sizeof where, "%s:%d: [%s]", job->path, type->line, section->name);
        else
            snprintf(where, sizeof where, "%s: --set %s.type", job->path, section->name);
        int status = tfenc_plugin_registry_require(ctx, registry, type->value, where);
        if (status != TFENC_OK)
            return status;
    }
    return TFENC_OK;
}

int tfenc_plugin_registry_scan(tfenc_context *ctx, tfenc_plugin_registry *registry)
{
    int status = index_directories(ctx, registry);
    for (int i = 0; status == TFENC_OK && i < registry->n_files; i++) {
        plugin_file *file = &registry->files[i];
        if (file->n_provides == 0) {
            if (file->state == NOT_LOADED &&
                record(registry, file->path, "provides no layer type: it declares none "
                       "(TFENC_PLUGIN_TYPES) and its name is no type name [a-z0-9_]+.so"))
                return out_of_memory(ctx);
            file->state = REFUSED;
            continue;
        }
        tfenc_context scratch;
        tfenc_context_init(&scratch);
        if (load(&scratch, registry, file, 0) == TFENC_ERR_NO_MEMORY)
            status = out_of_memory(ctx);
    }
    return status;
}

int tfenc_plugin_registry_load_file(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                    const char *path)
{
    plugin_file *file = NULL;
    int status = index_file(ctx, registry, path, NULL, 1, &file);
    if (status != TFENC_OK)
        return status;
    return load(ctx, registry, file, 1);
}

/* ------------------------------------------------------------- queries */

const tfenc_plugin_layer *tfenc_plugin_registry_find(const tfenc_plugin_registry *registry,
                                                     const char *type)
{
    for (int i = 0; i < registry->n_layers; i++)
        if (strcmp(registry->layers[i].descriptor->type, type) == 0)
            return &registry->layers[i];
    return NULL;
}

/* Levenshtein distance of two type names (at most a few dozen bytes). */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(b);
    if (strlen(a) > 64 || n > 64)
        return INT_MAX;
    int row[65];
    for (size_t j = 0; j <= n; j++)
        row[j] = (int)j;
    for (size_t i = 1; a[i - 1] != '\0'; i++) {
        int diagonal = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= n; j++) {
            int above = row[j];
            int best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[n];
}

/* The known type name closest to `type`, when close enough to be a slip
 * (a third of its letters, at least one), else NULL. Known: every type a
 * file in the search path provides, and every type loaded. */
static const char *closest_type(const tfenc_plugin_registry *registry, const char *type)
{
    const char *best = NULL;
    int best_distance = (int)strlen(type) / 3 > 1 ? (int)strlen(type) / 3 : 1;
    for (int i = 0; i < registry->n_files; i++)
        for (int k = 0; k < registry->files[i].n_provides; k++) {
            int distance = edit_distance(type, registry->files[i].provides[k]);
            if (distance <= best_distance && (best == NULL || distance < best_distance ||
                                              strcmp(registry->files[i].provides[k], best) < 0)) {
                best = registry->files[i].provides[k];
                best_distance = distance;
            }
        }
    for (int i = 0; i < registry->n_layers; i++) {
        const char *name = registry->layers[i].descriptor->type;
        int distance = edit_distance(type, name);
        if (distance <= best_distance && (best == NULL || distance < best_distance ||
                                          strcmp(name, best) < 0)) {
            best = name;
            best_distance = distance;
        }
    }
    return best;
}

int tfenc_plugin_registry_missing(tfenc_context *ctx, const tfenc_plugin_registry *registry,
                                  const char *type, const char *where)
{
    char detail[768] = "", suggestion[160] = "";
    const char *closest = closest_type(registry, type);
    if (closest != NULL)
        snprintf(suggestion, sizeof suggestion, " (did you mean '%s'?)", closest);
    size_t used = 0;
    for (int i = 0; i < registry->n_directories && used < sizeof detail; i++) {
        struct stat info;
        used += (size_t)snprintf(detail + used, sizeof detail - used, "%s%s%s", i ? ":" : "",
                                 registry->directories[i],
                                 stat(registry->directories[i], &info) != 0 ? " (does not exist)"
                                                                            : "");
    }
    for (int i = 0; i < registry->n_failures && used < sizeof detail; i++)
        used += (size_t)snprintf(detail + used, sizeof detail - used, "; refused %s: %s",
                                 registry->failures[i].file, registry->failures[i].reason);
    return tfenc_error(ctx, TFENC_ERR_PLUGIN,
                       "%s: no plugin provides layer type '%s'%s (searched %s; a file provides "
                       "the types it declares, or the one its name says: %s.so)",
                       where, type, suggestion, detail[0] != '\0' ? detail : "nothing", type);
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

int tfenc_plugin_registry_n_warnings(const tfenc_plugin_registry *registry)
{
    return registry->n_warnings;
}

const char *tfenc_plugin_registry_warning(const tfenc_plugin_registry *registry, int i)
{
    return registry->warnings[i];
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
    for (int i = 0; i < registry->n_files; i++)
        free_file(&registry->files[i]);
    for (int i = 0; i < registry->n_failures; i++) {
        free((char *)registry->failures[i].file);
        free((char *)registry->failures[i].reason);
    }
    for (int i = 0; i < registry->n_directories; i++)
        free(registry->directories[i]);
    free(registry->directories);
    for (int i = 0; i < registry->n_warnings; i++)
        free(registry->warnings[i]);
    free(registry->warnings);
    free(registry->files);
    free(registry->layers);
    free(registry->failures);
    free(registry);
}
