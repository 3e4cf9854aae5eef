/* The further heads of a job of several outputs (model/model.h's extra
 * heads, `head = NAME` in the job file): built on the last pipeline stage,
 * each reads the rows the stage's model leaves at the trunk's end, runs
 * its own layers on a copy of them and writes its rows into its group of
 * the output file (output.h's tfenc_output_open_head). The run writes them
 * before the first head's writer queues the documents' metadata, so that a
 * document counts as finished (its length in the file) only once every
 * head's row is there: resuming needs nothing more. */
#ifndef TFENC_RUN_HEADS_H
#define TFENC_RUN_HEADS_H

#include "model/model.h"
#include "output/output.h"
#include "ranks/pipeline.h"

typedef struct tfenc_heads tfenc_heads;

/* Builds the further heads of options->plan (each a plan of its own), with
 * the options' job, weights and limits, decides what each writes (the
 * kinds' table, from its last layer and whether it pools) and taps
 * `stage` (the last stage's model, whose range must hold the trunk's end).
 * A head whose output is not one row per document (pooled, scores or
 * sparse) is refused naming it.
 * In an int8 job a further head's maps run at fp32, not int8: they are a
 * map or two over rows the trunk made (BGE-M3's dense and sparse heads:
 * none and one of [1, d]; a classifier's on one row per document), next to
 * nothing beside the trunk's, so int8 would save no time there, while at
 * fp32 they need no input ranges of their own in the calibration and add
 * no error to the trunk's. (A splade head's [vocab, d] map is the
 * exception, docs/job-file.md says to make it the first head.) The
 * accuracy gate judges each head's output so (run/accuracy_gate.h), and
 * keeps a trunk step out of int8 when any head needs it. The first head's steps are the plan's, and gated as a job of
 * one head gates them. (bf16 jobs run the heads in bf16, as the trunk.) */
int tfenc_heads_create(tfenc_context *ctx, const tfenc_model_options *options,
                       tfenc_model *stage, tfenc_heads **heads);

/* Before anything is read, what a job of further heads cannot have: long
 * documents cut into chunks (`long_documents`: "chunk" or "late_chunk",
 * NULL when whole; a further head would get a row per chunk).
 * TFENC_ERR_CONFIG in one line after the job file's path. */
int tfenc_heads_check_job(tfenc_context *ctx, const char *job_path,
                          const tfenc_model_plan *plan, const char *long_documents);

/* Each head's group in `file`, created or, for a reopened file
 * (`resumed`), checked, and the first head's name (`first`) as the file's
 * attribute `head`; a sparse head's log of rows (PATH.head-NAME.sparse-*,
 * output/sparse.h), whose sound rows a resumed run keeps. Collective over
 * the file's writers. */
int tfenc_heads_open_outputs(tfenc_context *ctx, tfenc_heads *heads, tfenc_output *file,
                             const char *first, int resumed, int was_complete);

/* Resumed: whether every sparse head has a sound row of `document` in its
 * logs. A document finished in the file whose row a head's log lost
 * (damaged, removed) is encoded again, as the first head's are. */
int tfenc_heads_rows_logged(const tfenc_heads *heads, int64_t document);

/* The writer's before-metadata hook (output/writer.h, user = the heads):
 * makes the sparse heads' logged rows durable. */
int tfenc_heads_sync(tfenc_context *ctx, void *user);

/* The job complete, before the file is marked so: each sparse head's CSR
 * from its logs, in its group. Collective over the writers. */
int tfenc_heads_finish(tfenc_context *ctx, tfenc_heads *heads, tfenc_output *file);

/* Once the file at `path` is complete and closed: the sparse heads' logs
 * go, and what their CSRs' finish allocated to it beyond its end. */
void tfenc_heads_remove_logs(const tfenc_heads *heads, const char *path);

/* The microbatch's rows of every further head, once the stage's model has
 * run over it (its trunk rows are in the tap). */
int tfenc_heads_write(tfenc_context *ctx, tfenc_heads *heads, const tfenc_microbatch *microbatch);

void tfenc_heads_destroy(tfenc_heads *heads);

#endif
