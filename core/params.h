/* Typed getters over one job-file section (the tfenc_param_* functions of the
 * plugin SDK) and the check that every key in a section was read. */
#ifndef TFENC_PARAMS_H
#define TFENC_PARAMS_H

#include "jobfile.h"

struct tfenc_params {
    tfenc_context *ctx;
    const tfenc_jobfile *job;
    tfenc_job_section *section; /* may be NULL: every getter returns its default */
};

void tfenc_params_bind(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                       tfenc_job_section *section);
/* Fails with "FILE:LINE: [SECTION] unknown key 'KEY' (WHAT)" for the first
 * key no getter read; `what` says who rejected it, e.g. "layer type mha". */
int tfenc_params_check_all_used(tfenc_params *params, const char *what);

#endif
