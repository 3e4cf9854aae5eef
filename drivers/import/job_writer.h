/* Writes the job file of an import. */
#ifndef TFENC_IMPORT_JOB_WRITER_H
#define TFENC_IMPORT_JOB_WRITER_H

#include "importer.h"

/* Writes into `job_tmp` the job that will live at `job_path` and read the
 * weights at `weights_path` (named relative to the job's directory, so that
 * both can move together). */
int import_write_job(importer *self, const char *job_tmp, const char *job_path,
                     const char *weights_path);

#endif
