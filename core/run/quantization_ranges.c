/* Compact output's ranges (run/quantization_ranges.h): given by the job,
 * or calibrated by rank 0 on a sample of the corpus, then shared. */
#include "config.h"

#include "run/quantization_ranges.h"

#include "base/aligned.h"
#include "output/quantize.h"
#include "run/accuracy_gate.h"
#include "run/kind_survey.h"

#include <stdio.h>
#include <stdlib.h>

/* int8 / uint8 output: ranges from up to CALIBRATION_DOCUMENTS documents
 * and CALIBRATION_TOKENS tokens (room for CALIBRATION_MIN_DOCUMENTS of
 * max_seq_len if more), the first of the middle window of each of 8 equal
 * parts of the corpus (the gate's rule: it depends on the job and the
 * corpus alone, never on the layout), encoded by rank 0 before the job as
 * the file will get them: the token bound keeps that to seconds (65,536
 * tokens of BERT-base are about 10^13 FLOP). Fewer than
 * CALIBRATION_MIN_DOCUMENTS make no ranges: sentence-transformers warns
 * below 100 too, and a handful of vectors leaves most values outside.
 * With long_documents = chunk a document is encoded whole, every chunk,
 * and its rows made as the writer makes them (each chunk, or their mean):
 * ranges from first chunks alone let a mean's values fall outside and wrap
 * around. The token bound then grows CALIBRATION_CHUNKS times. */
#define CALIBRATION_DOCUMENTS 512
#define CALIBRATION_TOKENS 65536
#define CALIBRATION_MIN_DOCUMENTS 100
#define CALIBRATION_CHUNKS 4

/* Rank 0: the sample through the whole model, its rows folded into
 * r->plan.ranges as the job writes them. */
static int calibrate_ranges(tfenc_run *r)
{
    const char *dtype = tfenc_output_dtype_name(r->settings.job.dtype);
    const int chunked = r->settings.job.chunks != TFENC_CHUNKS_OFF;
    const int means = r->settings.job.chunks == TFENC_CHUNKS_MEAN;
    tfenc_gate_sample sample = {0};
    const size_t least = (size_t)CALIBRATION_MIN_DOCUMENTS * (size_t)r->settings.job.max_seq_len;
    const size_t capacity = (least > CALIBRATION_TOKENS ? least : CALIBRATION_TOKENS) *
                            (chunked ? CALIBRATION_CHUNKS : 1);
    sample.indices = malloc(CALIBRATION_DOCUMENTS * sizeof *sample.indices);
    if (sample.indices == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    const tfenc_gate_corpus source = {
        .corpus = r->state.corpus, .windows = &r->plan.windows, .tokenizer = r->plan.tokenizer,
        .feeding = &r->plan.feeding, .max_seq_len = r->settings.job.max_seq_len,
        .batch_tokens = r->settings.job.batch_tokens, .d_model = r->settings.model.d_model,
        .chunked = chunked};
    int status = tfenc_gate_sample_read_limited(r->ctx, &source, capacity, CALIBRATION_DOCUMENTS,
                                                &sample);
    tfenc_model *model = NULL;
    tfenc_model_options o = tfenc_run_model_options(r, 0, r->settings.steps.n_steps);
    o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens;
    if (status == TFENC_OK)
        status = tfenc_model_create(r->ctx, &o, &model);
    /* Chunk means are scaled back to unit length when the model's rows
     * have it (the writer's rule): the probe says. */
    int pools = 0, unit_rows = 0;
    if (status == TFENC_OK && means)
        status = tfenc_model_probe_pools(r->ctx, model, &pools, &unit_rows);
    const int d = r->settings.model.d_model, width = tfenc_run_output_width(r);
    float *x = NULL, *sums = NULL;
    int *chunks = NULL;
    if (status == TFENC_OK &&
        (x = tfenc_aligned_alloc((size_t)sample.batch_tokens * (size_t)d * sizeof *x)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && means &&
        ((sums = calloc((size_t)sample.n_documents * (size_t)d, sizeof *sums)) == NULL ||
         (chunks = calloc((size_t)sample.n_documents, sizeof *chunks)) == NULL))
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int b = 0, sequence = 0; status == TFENC_OK && b < sample.n_batches; b++) {
        tfenc_batch batch = sample.batches[b];
        batch.x = x;
        status = tfenc_model_forward(r->ctx, model, &batch);
        if (status == TFENC_OK && batch.rows != batch.n_seq)
            status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                                 "%s: [job] output_dtype = %s applies to pooled vectors, but "
                                 "the model does not pool its output",
                                 r->settings.job_file->path, dtype);
        /* Chunk means: each document's chunks summed, its row made below. */
        for (int j = 0; status == TFENC_OK && means && j < batch.rows; j++, sequence++) {
            const int document = sample.sequence_documents[sequence];
            float *sum = sums + (size_t)document * (size_t)d;
            for (int c = 0; c < d; c++)
                sum[c] += x[(size_t)j * (size_t)d + (size_t)c];
            chunks[document]++;
        }
        if (status == TFENC_OK && !means && width != d)
            tfenc_writer_truncate_rows(x, batch.rows, d, width);
        if (status == TFENC_OK && !means)
            tfenc_quantize_ranges_update(r->plan.ranges, width, x, batch.rows, b == 0);
    }
    for (int i = 0; status == TFENC_OK && means && i < sample.n_documents; i++) {
        float *row = sums + (size_t)i * (size_t)d;
        tfenc_writer_chunk_mean(row, chunks[i], d, (int)r->settings.job.output_dim, unit_rows);
        tfenc_quantize_ranges_update(r->plan.ranges, width, row, 1, i == 0);
    }
    /* After the model: a model that does not pool is the first thing to say. */
    if (status == TFENC_OK && sample.n_documents < CALIBRATION_MIN_DOCUMENTS)
        status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                             "%s: [job] output_dtype = %s needs ranges: the corpus gives a "
                             "calibration sample of %d documents (at least %d%s); give them in "
                             "[job] output_ranges (.npy or .h5, [2, %d])",
                             r->settings.job_file->path, dtype, sample.n_documents,
                             CALIBRATION_MIN_DOCUMENTS,
                             chunked ? ", each encoded whole, every chunk, within "
                                       "the sample's tokens"
                                     : "",
                             tfenc_run_output_width(r));
    if (status == TFENC_OK) {
        snprintf(r->plan.ranges_source, sizeof r->plan.ranges_source,
                 "calibrated: the minimum and maximum of each dimension over %d documents of "
                 "the corpus (dataset quantization_sample)", sample.n_documents);
        r->plan.sample_indices = sample.indices;
        r->plan.n_sample = sample.n_documents;
        sample.indices = NULL;
    }
    tfenc_aligned_free(x);
    free(sums);
    free(chunks);
    tfenc_model_destroy(model);
    free(sample.indices);
    tfenc_gate_sample_free(&sample);
    return status;
}

/* int8 / uint8 output: rank 0 reads the job's ranges or calibrates them,
 * every rank gets them. Before the weights are shared: the calibration's
 * model would otherwise leave its conversions in the node's arena. */
int tfenc_run_quantization_ranges(tfenc_run *r)
{
    if (!tfenc_dtype_needs_ranges(r->settings.job.dtype) || r->settings.request->dry_run)
        return 0;
    const int width = tfenc_run_output_width(r);
    r->plan.ranges = calloc(2 * (size_t)width, sizeof *r->plan.ranges);
    if (r->plan.ranges == NULL)
        return tfenc_run_agree_on_failure(
            r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    int status = TFENC_OK;
    if (r->rank == 0 && r->settings.job.output_ranges != NULL) {
        char where[512];
        snprintf(where, sizeof where, "%s: [job] output_ranges", r->settings.job_file->path);
        status = r->settings.job.output_ranges_inline
                     ? tfenc_quantize_ranges_parse(r->ctx, where, r->settings.job.output_ranges,
                                                   width, r->plan.ranges)
                     : tfenc_quantize_ranges_read(r->ctx, where, r->settings.job.output_ranges,
                                                  width, r->plan.ranges);
        snprintf(r->plan.ranges_source, sizeof r->plan.ranges_source, "given: %s",
                 r->settings.job.output_ranges_inline ? "[job] output_ranges"
                                                  : r->settings.job.output_ranges);
    } else if (r->rank == 0) {
        status = calibrate_ranges(r);
    }
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->plan.ranges, 2 * width, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Bcast(r->plan.ranges_source, sizeof r->plan.ranges_source, MPI_CHAR, 0, MPI_COMM_WORLD);
    /* Every writer announces the same datasets: the sample's indices too. */
    MPI_Bcast(&r->plan.n_sample, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r->rank != 0 && r->plan.n_sample > 0 &&
        (r->plan.sample_indices =
             malloc((size_t)r->plan.n_sample * sizeof *r->plan.sample_indices)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    if (r->plan.n_sample > 0)
        MPI_Bcast(r->plan.sample_indices, r->plan.n_sample, MPI_INT64_T, 0, MPI_COMM_WORLD);
    return 0;
}
