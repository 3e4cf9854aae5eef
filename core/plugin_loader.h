/* The plugin registry: finds layer-plugin shared objects along the search
 * path, checks their ABI, and maps `type =` names to descriptors. A bad
 * plugin is recorded and skipped; it only fails a job that needs it. */
#ifndef TFENC_PLUGIN_LOADER_H
#define TFENC_PLUGIN_LOADER_H

#include "tfenc/plugin.h"

typedef struct tfenc_plugin_registry tfenc_plugin_registry;

typedef struct tfenc_plugin_layer {
    const tfenc_layer_descriptor *descriptor;
    const char *file; /* the shared object it came from */
} tfenc_plugin_layer;

typedef struct tfenc_plugin_failure {
    const char *file;
    const char *reason; /* one line: why the file was refused */
} tfenc_plugin_failure;

/* An empty registry with the search path: `job_plugin_path` (colon-separated,
 * may be NULL), then $TFENC_PLUGIN_PATH, then the build tree's plugins, then
 * the installed pkglibdir. Nothing is loaded yet. */
int tfenc_plugin_registry_create(tfenc_context *ctx, const char *job_plugin_path,
                                 tfenc_plugin_registry **registry);
/* Loads every *.so in the search path, in order; an earlier directory's
 * layer type shadows a later one of the same name. Failures are recorded,
 * not returned: only allocation failure is an error. */
int tfenc_plugin_registry_scan(tfenc_context *ctx, tfenc_plugin_registry *registry);
/* Loads one shared object; on refusal returns TFENC_ERR_PLUGIN with a
 * message that names the file and the reason (and records the failure). */
int tfenc_plugin_registry_load_file(tfenc_context *ctx, tfenc_plugin_registry *registry,
                                    const char *path);
/* The layer type, or NULL. */
const tfenc_plugin_layer *tfenc_plugin_registry_find(const tfenc_plugin_registry *registry,
                                                     const char *type);
/* Records and returns the error for a type nobody provides, listing the
 * directories searched and the plugins that were refused. */
int tfenc_plugin_registry_missing(tfenc_context *ctx, const tfenc_plugin_registry *registry,
                                  const char *type, const char *where);

int tfenc_plugin_registry_n_layers(const tfenc_plugin_registry *registry);
const tfenc_plugin_layer *tfenc_plugin_registry_layer(const tfenc_plugin_registry *registry, int i);
int tfenc_plugin_registry_n_failures(const tfenc_plugin_registry *registry);
const tfenc_plugin_failure *tfenc_plugin_registry_failure(const tfenc_plugin_registry *registry,
                                                          int i);
int tfenc_plugin_registry_n_directories(const tfenc_plugin_registry *registry);
const char *tfenc_plugin_registry_directory(const tfenc_plugin_registry *registry, int i);

/* dlcloses every plugin: call after every layer instance is destroyed. */
void tfenc_plugin_registry_destroy(tfenc_plugin_registry *registry);

#endif
