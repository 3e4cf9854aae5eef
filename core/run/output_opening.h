/* The output, opened once the plan is made: rank 0 claims it (not one of
 * the job's inputs under another name, locked for this job); the job's
 * identity is made (settings, weights' and plugins' checksums, the corpus's
 * fingerprint); the last stages create the file or reopen it to resume,
 * with its writer and, for a sparse head, its rows and logs (r->state);
 * then the work left (run/work_left.h). At the end, the sparse CSR. */
#ifndef TFENC_OUTPUT_OPENING_H
#define TFENC_OUTPUT_OPENING_H

#include "run/run_parts.h"

/* Every rank. Collective; 1 when the job is refused. */
int tfenc_run_open_output(tfenc_run *r);

/* Every writer, the job complete: the CSR from every log, with the
 * vocabulary that names its columns. Returns a status (not agreed on). */
int tfenc_run_finish_sparse_rows(tfenc_run *r);

#endif
