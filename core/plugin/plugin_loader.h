/* The plugin registry: where plugin files are searched, which of them a job
 * loads, and the checks before any of their code runs (docs/plugins.md,
 * "Where plugins come from").
 *
 * The policy, in the spirit of Open MPI's MCA components (a component is
 * found by its file name and opened only when the run selects it) and of
 * the kernel's modinfo (a module says what it provides in a section that is
 * read without loading it):
 *  - Search directories are named explicitly: the job's [model] plugin_path
 *    (relative entries against the job file's directory), $TFENC_PLUGIN_PATH,
 *    and the built-in plugins of the running libtfenc (the build tree's when
 *    it runs from there, else the ones installed beside it).
 *  - A directory, or a plugin file, that another user could change is
 *    refused: owned by neither this user nor root, or writable by its group
 *    or by others. A plugin runs as the user, with the job's data.
 *  - A plugin file is examined before it is loaded (core/plugin/shared_object.h):
 *    a regular ELF shared object whose segments all lie inside the file.
 *  - A job loads only the files that provide the layer types it names: a
 *    file provides the types its TFENC_PLUGIN_TYPES declaration lists, or,
 *    without one, the type its name says (NAME.so provides NAME). Other
 *    files are never opened, so their constructors never run.
 *  - A layer type provided by two files is an error naming both: tfenc does
 *    not guess which one the user meant (a plugin could otherwise replace a
 *    built-in layer without a word).
 *  - Each file is loaded first in a child process (fork), then in tfenc:
 *    a constructor that crashes, hangs or ends the process (exit, _exit) is
 *    reported as such, naming the file, instead of ending the job with a
 *    misleading status. The child crashes quietly (default signal actions,
 *    not the crash reports of Open MPI or a sanitizer; its output goes to
 *    /dev/null): the refusal is the one line about it.
 * A refused file is recorded with its reason; it fails only a job that
 * needs a type it would provide. */
#ifndef TFENC_PLUGIN_LOADER_H
#define TFENC_PLUGIN_LOADER_H

#include "job/jobfile.h"
#include "tfenc/plugin.h"

typedef struct tfenc_plugin_registry tfenc_plugin_registry;

typedef struct tfenc_plugin_layer {
    const tfenc_layer_descriptor *descriptor;
    const char *file; /* the shared object it came from */
    const char *sha256; /* the SHA-256 of that file's bytes when it was loaded (hex) */
} tfenc_plugin_layer;

typedef struct tfenc_plugin_failure {
    const char *file; /* a file or a search directory */
    const char *reason; /* one line: why it was refused */
} tfenc_plugin_failure;

/* An empty registry with the search path: `job_plugin_path` (colon-separated,
 * may be NULL; relative entries are relative to `job_directory` when it is
 * not NULL), then $TFENC_PLUGIN_PATH, then the built-in plugins. Nothing is
 * examined or loaded yet. */
int tfenc_plugin_registry_create(tfenc_context *ctx, const char *job_plugin_path,
                                 const char *job_directory, tfenc_plugin_registry **registry);
/* Loads the plugin files that provide the layer types the job's sections
 * name (`type = ...`), and only those; an error names the section. */
int tfenc_plugin_registry_load_job(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                   const tfenc_jobfile *job);
/* Makes layer type `type` available: finds the one file that provides it and
 * loads it. `where` starts the messages (e.g. "job.ini:12: [pool]"): no file,
 * two files, or a file that fails its checks. */
int tfenc_plugin_registry_require(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                  const char *type, const char *where);
/* Loads every plugin file of the search path (--list-plugins): failures and
 * duplicate types are recorded, not returned; only allocation failure is. */
int tfenc_plugin_registry_scan(tfenc_context *ctx, tfenc_plugin_registry *registry);
/* Loads one shared object named explicitly, after the same checks, and
 * registers every type it describes; on refusal returns TFENC_ERR_PLUGIN
 * with a message that names the file and the reason (and records it). */
int tfenc_plugin_registry_load_file(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                    const char *path);
/* The layer type, when loaded; else NULL. */
const tfenc_plugin_layer *tfenc_plugin_registry_find(const tfenc_plugin_registry *registry,
                                                     const char *type);
/* Records and returns the error for a type nobody provides, listing the
 * directories searched (saying which do not exist) and the files and
 * directories that were refused, and the closest known type name when it
 * is a likely slip ("did you mean 'mha'?"). */
int tfenc_plugin_registry_missing(tfenc_context *ctx, const tfenc_plugin_registry *registry,
                                  const char *type, const char *where);

int tfenc_plugin_registry_n_layers(const tfenc_plugin_registry *registry);
const tfenc_plugin_layer *tfenc_plugin_registry_layer(const tfenc_plugin_registry *registry, int i);
int tfenc_plugin_registry_n_failures(const tfenc_plugin_registry *registry);
const tfenc_plugin_failure *tfenc_plugin_registry_failure(const tfenc_plugin_registry *registry,
                                                          int i);
/* Lines for the driver to print as warnings: a search directory the job's
 * plugin_path or $TFENC_PLUGIN_PATH names that does not exist. */
int tfenc_plugin_registry_n_warnings(const tfenc_plugin_registry *registry);
const char *tfenc_plugin_registry_warning(const tfenc_plugin_registry *registry, int i);
int tfenc_plugin_registry_n_directories(const tfenc_plugin_registry *registry);
const char *tfenc_plugin_registry_directory(const tfenc_plugin_registry *registry, int i);

/* dlcloses every plugin: call after every layer instance is destroyed. */
void tfenc_plugin_registry_destroy(tfenc_plugin_registry *registry);

#endif
