/* Microbatches and how they travel between the pipeline stages of one
 * replica.
 *
 * A microbatch is a packed tfenc_batch plus what the last stage needs to
 * write its rows: each sequence's global document index, first token row,
 * file and line it was read from, length, keys of attention, word pieces
 * cut, and id. It lives in a slot: a `meta` buffer (header, then the
 * integer arrays back to back, then the ids) and an activations buffer
 * `x`. Moving a microbatch to the next stage is two messages (meta, then
 * x) sent straight from the slot, with no packing copy.
 *
 * Overlap: each stage owns several slots. A receiving stage keeps receives
 * posted in the free slots, so the previous stage's sends complete while this
 * stage computes; a sending stage hands a slot to MPI (the header as a
 * synchronous send, whose completion says the next stage has taken it, so
 * that a stage waiting for a slot back can wait without spinning) and goes
 * on with the next slot. With n slots a stage has up to n microbatches in flight, so
 * the pipeline stays full once it has filled (bubble (p-1)/(m+p-1) for p
 * stages and m microbatches per replica).
 *
 * A stage that is both first and last (pipeline_stages = 1) sends nothing:
 * one slot, filled, encoded, written and released. */
#ifndef TFENC_PIPELINE_H
#define TFENC_PIPELINE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include "tfenc/plugin.h"

typedef struct tfenc_microbatch {
    tfenc_batch batch;        /* seq_start, token_ids, ... and x point into the slot */
    /* The same arrays as the batch's, writable, for the stage that fills them. */
    int32_t *seq_start, *token_ids, *token_types, *positions;
    int64_t *indices;         /* [n_seq] global document index */
    int64_t *token_offsets;   /* [n_seq] first row in the output's hidden (tokens kind) */
    int64_t *source_lines;    /* [n_seq] its document's line (row) in its file, as
                               * tfenc_document.line; -1 when not known */
    int32_t *sources;         /* [n_seq] the file its document was read from */
    int32_t *lengths;         /* [n_seq] tokens of each sequence */
    int32_t *truncated;       /* [n_seq] word pieces cut from each document */
    /* A long document cut into chunks ([job] long_documents = chunk) is
     * several sequences: chunk[j] of n_chunks[j], whose first content token
     * is the document's chunk_start[j]-th. A whole document: 0 of 1 at 0. */
    int32_t *chunk, *n_chunks, *chunk_start;
    /* Late chunking ([job] long_documents = late_chunk): a document is one
     * sequence (or, longer than max_seq_len, a window of it per sequence)
     * whose token vectors are pooled over spans: spans[j] of them, its
     * document's chunks chunk[j] .. chunk[j] + spans[j] - 1 of n_chunks[j],
     * the sequence's pieces starting at the document's chunk_start[j]-th.
     * 1 for every other sequence. */
    int32_t *spans;
    /* Late chunking: the spans of every sequence, those of sequence 0 then
     * of 1 ..., each [span_begin, span_end) of its document's pieces (room
     * for n_seq + n_tokens: a span holds a piece at least, or is the one
     * empty span of an empty document). */
    int32_t *span_begin, *span_end;
    int32_t *keys;            /* [n_seq] each sequence's keys of attention (its first tokens);
                               * the batch's seq_keys points here when the job masks keys
                               * (a ColBERT query's [MASK] padding), else it is NULL */
    char *ids;                /* n_seq NUL-terminated ids one after another, or
                               * NULL when the corpus has none */
    size_t ids_bytes;
    /* The last stage's, set before its steps run: where the model's sparse
     * head puts its rows (output/sparse.h; batch.sparse_rows is its
     * destination), or NULL. Never sent. */
    struct tfenc_sparse_rows *sparse_rows;
    int end_of_stream;        /* no microbatch follows: the previous stage is done */
} tfenc_microbatch;

/* What one slot must hold. */
typedef struct tfenc_microbatch_limits {
    int max_tokens;      /* batch_tokens */
    int max_seqs;        /* at most one sequence per token */
    size_t max_ids_bytes;/* ids of a microbatch, NULs included; 0 without ids */
    int d_model;
} tfenc_microbatch_limits;

typedef struct tfenc_pipeline tfenc_pipeline;

/* `replica` orders the stages (its rank s is stage s); MPI_COMM_NULL for a
 * single-stage run, which needs no MPI. `n_slots` >= 1 (>= 2 to overlap). */
int tfenc_pipeline_create(tfenc_context *ctx, MPI_Comm replica, const tfenc_microbatch_limits *limits,
                          int n_slots, tfenc_pipeline **pipeline);

/* First stage: a free slot to fill, waiting for the oldest send to finish
 * when every slot is in flight. Then call tfenc_microbatch_shape(). */
int tfenc_pipeline_acquire(tfenc_context *ctx, tfenc_pipeline *pipeline, tfenc_microbatch **microbatch);

/* Points the microbatch's arrays at room for n_seq sequences of n_tokens
 * tokens in all and ids_bytes of ids (0: no ids), and sets the batch's
 * counts (rows = n_tokens). Fails when that exceeds the limits. */
int tfenc_microbatch_shape(tfenc_context *ctx, tfenc_pipeline *pipeline,
                           tfenc_microbatch *microbatch, int n_seq, int n_tokens,
                           size_t ids_bytes);

/* Other stages: the next microbatch from the previous stage. At the end
 * the returned microbatch has end_of_stream set (release it). `waited`
 * (may be NULL) gets the seconds spent blocked. */
int tfenc_pipeline_receive(tfenc_context *ctx, tfenc_pipeline *pipeline,
                           tfenc_microbatch **microbatch, double *waited);

/* Sends the microbatch on to the next stage without waiting for it to
 * arrive; the slot comes back to this stage once the send has finished. */
int tfenc_pipeline_pass_on(tfenc_context *ctx, tfenc_pipeline *pipeline, tfenc_microbatch *microbatch);

/* The last stage is done with the microbatch (its rows are written). */
void tfenc_pipeline_release(tfenc_pipeline *pipeline, tfenc_microbatch *microbatch);

/* Every stage but the last, once no more microbatches will be passed on:
 * tells the next stage, and waits for every send. Receiving stages call it
 * after the end of stream too: it cancels the receives still posted. */
int tfenc_pipeline_finish(tfenc_context *ctx, tfenc_pipeline *pipeline);

void tfenc_pipeline_destroy(tfenc_pipeline *pipeline);

#endif
