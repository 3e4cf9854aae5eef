/* The datasets a job writes as it goes, as the description gives them
 * (output/output_description.h: when a job has each, its element type, its
 * shape and its fill), then two per kept field ([job] keep_fields: its
 * values and NAME_valid). tfenc_output_create makes the file's datasets by
 * walking the description, and tfenc_output_reopen holds an existing file
 * to the same description before it appends a row; the checks
 * (output/output_checks.h) hold every file to it as well, with the rules
 * its contents keep, and a resume runs them too (output_resume.c). */
#ifndef TFENC_OUTPUT_LAYOUT_H
#define TFENC_OUTPUT_LAYOUT_H

#include "output/output_description.h"
#include "output/output_internal.h"

/* Creates every dataset the job's file holds and keeps each open in the
 * handle; collective over the writers. */
int tfenc_output_layout_create(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_output_options *options);

/* Opens every dataset the job's file must hold, each checked against the
 * description (present, rank, dimensions, element type), and refuses a
 * dataset the job would not write: one line "PATH: dataset 'NAME' ...;
 * refusing to append to it", TFENC_ERR_CONFIG. */
int tfenc_output_layout_reopen(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_output_options *options);

#endif
