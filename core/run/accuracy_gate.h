/* The int8 accuracy gate: before a job, it reads a sample spread over the
 * corpus, runs the model step by step on it at fp32 and at the job's
 * precision, and keeps in bf16 (or fp32) the steps that would take the
 * output below min_cosine. It reads the corpus and builds and runs trial
 * models, so it sits above the input and the model it drives. */
#ifndef TFENC_ACCURACY_GATE_H
#define TFENC_ACCURACY_GATE_H

#include "base/precision.h"
#include "input/corpus.h"
#include "input/windows.h"
#include "model/model.h"
#include "run/feeder.h"
#include "tfenc/plugin.h"
#include "tokenizer/tokenizer.h"

/* Where the sample comes from: the job's corpus, cut into its windows,
 * tokenized as the first stage tokenizes it. */
typedef struct tfenc_gate_corpus {
    tfenc_corpus *corpus;                /* read with select/next: its position changes */
    const tfenc_windows *windows;        /* the windows the corpus is cut into */
    tfenc_tokenizer *tokenizer;          /* as tfenc_feeder_tokenize takes it */
    const tfenc_feeder_options *feeding;
    long max_seq_len, batch_tokens;      /* the job's [job] settings */
    int d_model;
    /* 1: a long document is sampled as the job encodes it, every chunk a
     * sequence (feeding->chunks), not as its first max_seq_len tokens */
    int chunked;
} tfenc_gate_corpus;

/* The sample: packed batches of token ids over arrays the sample owns. */
typedef struct tfenc_gate_sample {
    tfenc_batch *batches;                /* [n_batches]; x is NULL */
    int32_t *ids, *types, *positions, *starts;
    int32_t *keys;                       /* per document, when the job masks keys; else NULL */
    int n_batches, capacity_batches, n_documents, n_tokens;
    int n_sequences;                     /* documents, or with chunks their chunks */
    int32_t *sequence_documents;         /* chunked: [n_sequences] each sequence's document
                                            (0..n_documents-1); NULL otherwise */
    int batch_tokens;                    /* the most tokens of a sample batch */
    int64_t *indices;                    /* NULL, or the caller's array that receives each
                                            sampled document's global index */
} tfenc_gate_sample;

/* Reads the sample into a zeroed `sample`: 8,192 tokens (four documents of
 * max_seq_len if more) in eight equal parts, each from the middle window of
 * one eighth of the corpus, so that it sees the corpus's kinds of documents
 * and lengths and not only its beginning; batches of 512 tokens (or one
 * document of max_seq_len, at most batch_tokens), a quarter of the
 * activation memory of a job's batches. Empty documents are left out.
 * Free with tfenc_gate_sample_free, also after an error. */
int tfenc_gate_sample_read(tfenc_context *ctx, const tfenc_gate_corpus *source,
                           tfenc_gate_sample *sample);

/* The same rule for other samples taken before a job (the ranges of
 * compact output): `capacity` tokens at most and, with max_documents > 0,
 * that many documents at most (sample->indices, when set, holds that
 * many), each eighth of the corpus its share. With source->chunked a
 * document is taken whole, all its chunks, or not at all. */
int tfenc_gate_sample_read_limited(tfenc_context *ctx, const tfenc_gate_corpus *source,
                                   size_t capacity, int max_documents, tfenc_gate_sample *sample);
void tfenc_gate_sample_free(tfenc_gate_sample *sample);

/* A further head of a job of several outputs (model.h's extra heads,
 * run/heads.h), which the gate judges besides the first: run at fp32 (a
 * further head's maps never run at int8: run/heads.h says why) on the
 * rows the trunk leaves, its output compared with the one it gives on
 * fp32's trunk by the measure of its kind: scores (a classifier) as a
 * scores model's output, sparse rows and pooled rows by their smallest
 * cosine. Its kind is what its last layer declares. */
typedef struct tfenc_gate_head {
    const char *name;
    const tfenc_model_plan *plan; /* the head's own plan */
} tfenc_gate_head;

/* What the accuracy gate found and chose. */
typedef struct tfenc_precision_report {
    tfenc_precision *step_precision; /* [n_steps], the caller's: each step's precision to run */
    double *step_cosine;             /* [n_steps] or NULL: each step alone at the requested
                                        precision against fp32, on fp32 inputs (1 = exact) */
    double sample_cosine;            /* the whole model with step_precision, against fp32:
                                        the smallest cosine over the sample's output rows;
                                        scores: cos(largest error / the scores' spread) */
    int n_fallbacks;                 /* int8 steps kept in bf16 (fp32 where bf16 does not run) */
    int worst_step;                  /* the least accurate step, -1 when all are exact */
    double *output_cosine;           /* [1 + n_heads] or NULL: each output's measure at
                                        step_precision (as sample_cosine, whose least it
                                        is): the first head's, then each further head's */
    int *output_scores;              /* [1 + n_heads] or NULL: 1 where that output's measure
                                        is the scores' (cos of their error), 0 a cosine */
} tfenc_precision_report;

/* The accuracy gate, run before a job on a sample of its corpus. The plan of
 * `options` (the whole model; first_step and end_step are ignored) runs
 * step by step, each step built alone as the pipeline survey does, so
 * memory holds one step's weights at a time:
 * 1. each step at fp32 and at the requested precision (options->config)
 *    on the same fp32 inputs gives the step's cosine;
 * 2. the whole model at the chosen precisions gives the sample's cosine to
 *    fp32: the smallest over every output row (token, or pooled document)
 *    of the sample batches; for a model that writes scores (scores_width
 *    > 0 scores a document) the cosine of an angle instead: the largest
 *    error of a score relative to the spread of fp32's scores of its label
 *    over the sample (the head's step alone is measured so too);
 * 3. for int8, while that is below the bar, the least accurate int8
 *    steps are kept in bf16, or fp32 where bf16 does not run: the fewest
 *    that a bisection over their count finds, probed on the hardest
 *    quarter of the sample's batches first and confirmed on the whole
 *    sample, whose cosine is the one reported.
 * With further heads (`heads`, n_heads of them: options->plan's extra
 * heads), the output of 2. and 3. is every head's: the sample's cosine is
 * the least of the first head's measure and each further head's (on the
 * rows the trunk's steps leave, at the chosen precisions), so a step stays
 * out of int8 when any head needs it; the bisection's hard part is the
 * batches least accurate in any head (none when a head writes scores).
 * Each trial step is built once (within a budget) and the runs start from
 * one another's activations (run/gate_checkpoints.h).
 * The bar is min_cosine with half its error to spare, 1 - (1 - min_cosine)
 * / 2: a corpus holds documents less accurate than its sample's worst.
 * The sample batches are read only: their token ids, positions and row
 * counts (within options->limits); their x is not used. Returns TFENC_OK
 * with the report filled in; TFENC_ERR_CONFIG and one line naming the
 * least accurate layer when min_cosine cannot be met (int8 with every step
 * out of int8, or bf16 itself); other errors as model creation
 * and forward report them. fp32 jobs are exact: cosine 1 without a run. */
int tfenc_precision_gate(tfenc_context *ctx, const tfenc_model_options *options,
                         const tfenc_batch *samples, int n_samples, double min_cosine,
                         int scores_width, const tfenc_gate_head *heads, int n_heads,
                         tfenc_precision_report *report);

#endif
