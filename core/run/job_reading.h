/* The run's first step: the job read once on every rank (its file with the
 * request's overrides, the [model] and [job] keys, the plan of steps, the
 * plugins, the weights), and rank 0's record of every input file as it was
 * when the job began reading it, checked before the output records their
 * checksums and before it is marked complete. */
#ifndef TFENC_JOB_READING_H
#define TFENC_JOB_READING_H

#include "run/run_parts.h"

/* The job, the model's plan and the layout check: identical on every rank,
 * so a failure here is reported once. Fills r->settings, places the rank
 * (r->plan.layout), opens the weights and, on rank 0, watches the inputs
 * and hashes the weights. Returns a status (not yet agreed on). */
int tfenc_run_read_job(tfenc_run *r);

/* Every rank: whether it sees the corpus files rank 0 sees. Collective;
 * 1 when a rank does not (agreed on, the run refused), else 0. */
int tfenc_run_same_sources(tfenc_run *r);

/* Rank 0: TFENC_ERR_IO naming the first watched file (or, with `only` not
 * NULL, the first whose description starts with it, e.g. "the corpus")
 * that is no longer as it was when the job began reading it. */
int tfenc_run_check_watched(tfenc_run *r, const char *only);

void tfenc_run_free_watched(tfenc_run *r);

/* Rank 0: the SHA-256 of [model] weights and of each layer's weights_file
 * (r->settings.weights_sha256, weights_file_sha256). */
int tfenc_run_hash_weights(tfenc_run *r);

/* Rank 0, once the weights are hashed: the digest an int8 calibration
 * records as the weights it is of. */
void tfenc_run_calibration_weights_digest(const tfenc_run *r, char digest[65]);

#endif
