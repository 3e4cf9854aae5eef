/* Compact output ([job] output_dtype int8 / uint8): each dimension's range,
 * read from [job] output_ranges or calibrated by rank 0 on a sample of the
 * corpus through the whole model, as the writer will make the rows; every
 * rank gets them (r->plan: ranges, ranges_source, sample_indices). */
#ifndef TFENC_QUANTIZATION_RANGES_H
#define TFENC_QUANTIZATION_RANGES_H

#include "run/run_parts.h"

/* Before the weights are shared (the calibration's model would leave its
 * conversions in the node's arena). Nothing for other dtypes and dry runs.
 * Collective; 1 when the job is refused. */
int tfenc_run_quantization_ranges(tfenc_run *r);

#endif
