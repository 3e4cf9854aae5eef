/* Typed getters over one job-file section (the tfenc_param_* functions of the
 * plugin SDK) and the check that every key in a section was read. */
#ifndef TFENC_PARAMS_H
#define TFENC_PARAMS_H

#include "job/jobfile.h"

/* Most keys a declared parameter table may hold (one bit each in `asked`). */
#define TFENC_MAX_DECLARED_PARAMS 64

struct tfenc_params {
    tfenc_context *ctx;
    const tfenc_jobfile *job;
    tfenc_job_section *section; /* may be NULL: every getter returns its default */
    /* A layer type's declared parameters (ABI 1.1), or NULL: getters then
     * accept any key, as for ABI 1.0 plugins and the host's own sections. */
    const tfenc_param_info *declared;
    const char *layer_type;
    uint64_t asked; /* bit i: declared[i] was read by a getter */
};

void tfenc_params_bind(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                       tfenc_job_section *section);
/* The same for a layer instance: binds the descriptor's declared parameter
 * table when it has one, so that create() is held to it. */
void tfenc_params_bind_layer(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                             tfenc_job_section *section,
                             const tfenc_layer_descriptor *descriptor);
/* The descriptor's declared parameter table: NULL for ABI 1.0 descriptors
 * and for those without one. */
const tfenc_param_info *tfenc_params_declared(const tfenc_layer_descriptor *descriptor);
/* "int", "float", "bool", "string" or "choice". */
const char *tfenc_param_type_name(tfenc_param_type type);
/* Why a declared table is malformed (a key twice, a bad name or type, too
 * many keys), written into `why`; NULL when it is well formed. */
const char *tfenc_params_check_table(const tfenc_param_info *table, char *why, size_t size);
/* A file the job reads, named by `key`: *path is its value resolved against
 * the job file's directory (free() it), or NULL when the key is absent. The
 * entry is marked as an input (`what` is what the file is to the job, e.g.
 * "the corpus"; a string that lives as long as the job), so that
 * tfenc_jobfile_each_input() lists it: read every input path this way. */
int tfenc_param_input_path(tfenc_params *params, const char *key, const char *what, char **path);
/* Fails with "FILE:LINE: [SECTION] unknown key 'KEY' (WHAT)" for the first
 * key no getter read; `what` says who rejected it, e.g. "layer type mha".
 * With a declared table, first fails for a declared key that no getter read
 * (create() and the table disagree: a bug of the plugin). */
int tfenc_params_check_all_used(tfenc_params *params, const char *what);

#endif
