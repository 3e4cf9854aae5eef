/* Typed getters over one job-file section (the tfenc_param_* functions of the
 * plugin SDK) and the check that every key in a section was read. */
#ifndef TFENC_PARAMS_H
#define TFENC_PARAMS_H

#include "job/jobfile.h"

/* Most keys a declared parameter table may hold (one bit each in `asked`). */
#define TFENC_MAX_DECLARED_PARAMS 64

/* A declared parameter table as the plugin compiled it: its entries lie
 * `stride` bytes apart, because an ABI 1.1 entry is shorter than this
 * host's (it lacks the ranges of 1.2). Read entries with
 * tfenc_param_table_entry, never by indexing a tfenc_param_info array. */
typedef struct tfenc_param_table {
    const char *entries; /* NULL: no table */
    size_t stride;
} tfenc_param_table;

struct tfenc_params {
    tfenc_context *ctx;
    const tfenc_jobfile *job;
    tfenc_job_section *section; /* may be NULL: every getter returns its default */
    /* A layer type's declared parameters (ABI 1.1), or none: getters then
     * accept any key, as for ABI 1.0 plugins and the host's own sections. */
    tfenc_param_table declared;
    const char *layer_type;
    uint64_t asked; /* bit i: declared entry i was read by a getter */
    /* The first getter failure: a create() that ignores it and returns
     * TFENC_OK is still refused by tfenc_params_check_all_used. */
    int failed;
};

void tfenc_params_bind(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                       tfenc_job_section *section);
/* The same for a layer instance: binds the descriptor's declared parameter
 * table when it has one, so that create() is held to it. */
void tfenc_params_bind_layer(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                             tfenc_job_section *section,
                             const tfenc_layer_descriptor *descriptor);
/* The descriptor's declared parameter table: none (entries NULL) for ABI 1.0
 * descriptors and for those without one. */
tfenc_param_table tfenc_params_declared(const tfenc_layer_descriptor *descriptor);
/* A table in this host's layout (a host-side or ABI 1.2 array). */
tfenc_param_table tfenc_param_table_of(const tfenc_param_info *entries);
/* Entry i in this host's layout (an ABI 1.1 entry reads as unbounded);
 * returns 0 at the end of the table (or when there is none). */
int tfenc_param_table_entry(tfenc_param_table table, int i, tfenc_param_info *info);
/* "int", "float", "bool", "string" or "choice". */
const char *tfenc_param_type_name(tfenc_param_type type);
/* The declared range as a job file's reader thinks of it, without spaces:
 * "1..65536", ">=0", ">0", "<=8"; "" when the key has none. */
const char *tfenc_param_range_text(const tfenc_param_info *info, char *text, size_t size);
/* Why a declared table is malformed (a key twice, a bad name or type, too
 * many keys, a bad range or a default outside it), written into `why`;
 * NULL when it is well formed. */
const char *tfenc_params_check_table(tfenc_param_table table, char *why, size_t size);
/* Checks every value the section gives for a declared key against the
 * key's declared range, before create() runs: "FILE:LINE: [SECTION] KEY =
 * 'VALUE': expected an integer in 1..65536 (the range layer type T
 * declares)". A value that is not a number is left to the getter. */
int tfenc_params_check_ranges(tfenc_params *params);
/* A file the job reads, named by `key`: *path is its value resolved against
 * the job file's directory (free() it), or NULL when the key is absent. The
 * entry is marked as an input (`what` is what the file is to the job, e.g.
 * "the corpus"; a string that lives as long as the job), so that
 * tfenc_jobfile_each_input() lists it: read every input path this way. */
int tfenc_param_input_path(tfenc_params *params, const char *key, const char *what, char **path);
/* Refuses an entry's value: "FILE:LINE: [SECTION] KEY = 'VALUE': MESSAGE", or
 * "FILE: --set SECTION.KEY=VALUE: MESSAGE" for a --set. TFENC_ERR_CONFIG. */
int tfenc_params_value_error(tfenc_context *ctx, const tfenc_jobfile *job,
                             const tfenc_job_section *section, const tfenc_job_entry *entry,
                             const char *message);
/* Fails with "FILE:LINE: [SECTION] unknown key 'KEY' (WHAT)" for the first
 * key no getter read; `what` says who rejected it, e.g. "layer type mha".
 * First fails with the first getter failure (create() ignored it), then,
 * with a declared table, for a declared key that no getter read (create()
 * and the table disagree: a bug of the plugin). */
int tfenc_params_check_all_used(tfenc_params *params, const char *what);

#endif
