/* The accuracy gate that decides, on a sample of the corpus, which steps of
 * an int8 model run in int8 and which stay in bf16 (see run/accuracy_gate.h):
 * the sample, read from windows spread over the corpus, then the trial
 * runs of the model on it. */
#include "run/accuracy_gate.h"
#include "base/aligned.h"
#include "base/context.h"
#include "matrix/matrix.h"
#include "model/model.h"
#include "output/kinds.h"
#include "output/sparse.h"
#include "run/feeder.h"
#include "run/gate_checkpoints.h"

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the sample */

/* Sample of the accuracy gate: GATE_SAMPLE_TOKENS tokens (4 documents
 * of max_seq_len if more), read in GATE_SAMPLE_PIECES equal parts from
 * windows spread evenly over the whole corpus (the first documents of
 * each), so that it sees the corpus's kinds of documents and lengths, not
 * only its beginning. Its microbatches hold GATE_BATCH_TOKENS tokens (or
 * one document of max_seq_len): the gate's trial steps then need a
 * quarter of the activation memory of the job's 2048-token batches, and
 * GEMMs of 512 rows still run at full rate. */
#define GATE_SAMPLE_TOKENS 8192
#define GATE_SAMPLE_PIECES 8
#define GATE_BATCH_TOKENS 512

/* Packs documents into the sample's batches. */
typedef struct sample_packer {
    tfenc_gate_sample *sample;
    int batch_tokens, n_seq, used, batch_first;
    int32_t *starts;
    int32_t *keys;   /* the batch's first document's; NULL: every token is a key */
} sample_packer;

static int close_batch(tfenc_context *ctx, sample_packer *p, int d_model)
{
    tfenc_gate_sample *sample = p->sample;
    if (p->n_seq == 0)
        return TFENC_OK;
    if (sample->n_batches == sample->capacity_batches) {
        int capacity = sample->capacity_batches > 0 ? 2 * sample->capacity_batches : 16;
        tfenc_batch *grown = realloc(sample->batches, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        sample->batches = grown;
        sample->capacity_batches = capacity;
    }
    sample->batches[sample->n_batches++] = (tfenc_batch){
        .n_seq = p->n_seq, .n_tokens = p->used - p->batch_first, .seq_start = p->starts,
        .token_ids = sample->ids + p->batch_first, .token_types = sample->types + p->batch_first,
        .positions = sample->positions + p->batch_first, .rows = p->used - p->batch_first,
        .d_model = d_model, .seq_keys = p->keys};
    p->starts += p->n_seq + 1;
    if (p->keys != NULL)
        p->keys += p->n_seq;
    p->batch_first = p->used;
    p->n_seq = 0;
    return TFENC_OK;
}

/* Adds one sequence, a document or a chunk of one (the caller leaves room
 * for it in the sample). */
static int pack_sequence(tfenc_context *ctx, sample_packer *p, const int32_t *document,
                         const int32_t *types, int length, int keys, int d_model)
{
    tfenc_gate_sample *sample = p->sample;
    if (p->used - p->batch_first + length > p->batch_tokens) {
        int status = close_batch(ctx, p, d_model);
        if (status != TFENC_OK)
            return status;
    }
    p->starts[p->n_seq] = p->used - p->batch_first;
    if (p->keys != NULL)
        p->keys[p->n_seq] = keys;
    memcpy(sample->ids + p->used, document, (size_t)length * sizeof *document);
    memcpy(sample->types + p->used, types, (size_t)length * sizeof *types);
    for (int t = 0; t < length; t++)
        sample->positions[p->used + t] = t;
    p->used += length;
    p->starts[++p->n_seq] = p->used - p->batch_first;
    if (sample->sequence_documents != NULL)
        sample->sequence_documents[sample->n_sequences] = sample->n_documents;
    sample->n_sequences++;
    return TFENC_OK;
}

/* The document just tokenized, as the job encodes it: itself, or every
 * chunk when the source chunks; *full when it does not fit. */
static int pack_document(tfenc_context *ctx, sample_packer *p, const tfenc_gate_corpus *source,
                         int32_t *document, int32_t *types, int32_t length, int32_t keys,
                         int32_t truncated, size_t capacity, int *full)
{
    const int n_chunks =
        source->chunked ? tfenc_feeder_chunks(source->feeding, source->tokenizer, truncated) : 1;
    size_t tokens = n_chunks == 1 ? (size_t)length : 0;
    for (int c = 0; n_chunks > 1 && c < n_chunks; c++)
        tokens += (size_t)tfenc_feeder_chunk(source->feeding, source->tokenizer, truncated, c,
                                             NULL, NULL, NULL);
    if ((size_t)p->used + tokens > capacity) {
        *full = 1;
        return TFENC_OK;
    }
    int status = TFENC_OK;
    if (n_chunks == 1)
        status = pack_sequence(ctx, p, document, types, length, keys, source->d_model);
    for (int c = 0; status == TFENC_OK && n_chunks > 1 && c < n_chunks; c++) {
        const int32_t chunk = tfenc_feeder_chunk(source->feeding, source->tokenizer, truncated,
                                                 c, document, types, NULL);
        status = pack_sequence(ctx, p, document, types, chunk, chunk, source->d_model);
    }
    p->sample->n_documents++;
    return status;
}

int tfenc_gate_sample_read(tfenc_context *ctx, const tfenc_gate_corpus *source,
                           tfenc_gate_sample *sample)
{
    const long max_seq_len = source->max_seq_len;
    const size_t capacity = (size_t)(4 * max_seq_len > GATE_SAMPLE_TOKENS ? 4 * max_seq_len
                                                                          : GATE_SAMPLE_TOKENS);
    return tfenc_gate_sample_read_limited(ctx, source, capacity, 0, sample);
}

int tfenc_gate_sample_read_limited(tfenc_context *ctx, const tfenc_gate_corpus *source,
                                   size_t capacity, int max_documents, tfenc_gate_sample *sample)
{
    const long max_seq_len = source->max_seq_len;
    long batch_tokens = max_seq_len > GATE_BATCH_TOKENS ? max_seq_len : GATE_BATCH_TOKENS;
    if (batch_tokens > source->batch_tokens)
        batch_tokens = source->batch_tokens;
    sample->batch_tokens = (int)batch_tokens;
    sample->ids = calloc(capacity, sizeof *sample->ids);
    sample->types = calloc(capacity, sizeof *sample->types);
    sample->positions = calloc(capacity, sizeof *sample->positions);
    /* a start per document and an end per batch: each holds a token at least */
    sample->starts = calloc(2 * capacity, sizeof *sample->starts);
    /* The job's batches mask keys (a query's padding): so do the sample's,
     * or the gate would judge a model the job does not run. */
    const int masked_keys = source->feeding->pad_id >= 0 && !source->feeding->pad_attended;
    if (masked_keys)
        sample->keys = calloc(capacity, sizeof *sample->keys);
    if (source->chunked)
        sample->sequence_documents = calloc(capacity, sizeof *sample->sequence_documents);
    int32_t *document = malloc((size_t)source->feeding->max_seq_len * sizeof *document);
    int32_t *types = malloc((size_t)source->feeding->max_seq_len * sizeof *types);
    if (sample->ids == NULL || sample->types == NULL || sample->positions == NULL ||
        sample->starts == NULL || document == NULL || types == NULL ||
        (masked_keys && sample->keys == NULL) ||
        (source->chunked && sample->sequence_documents == NULL)) {
        free(document);
        free(types);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    sample_packer packer = {.sample = sample, .batch_tokens = (int)batch_tokens,
                            .starts = sample->starts, .keys = sample->keys};
    const int64_t n_windows = source->windows->n_windows;
    const int pieces = n_windows < GATE_SAMPLE_PIECES ? (int)n_windows : GATE_SAMPLE_PIECES;
    int status = TFENC_OK, full = 0;
    for (int piece = 0; status == TFENC_OK && !full && piece < pieces; piece++) {
        /* The middle window of each of `pieces` equal parts of the corpus,
         * read until the piece's share of the sample's tokens. */
        const int64_t window = (2 * (int64_t)piece + 1) * n_windows / (2 * pieces);
        const long quota = (long)capacity * (piece + 1) / pieces;
        const int document_quota = max_documents * (piece + 1) / pieces;
        tfenc_corpus_range range;
        tfenc_windows_range(source->windows, window, &range);
        status = tfenc_corpus_select(ctx, source->corpus, &range);
        while (status == TFENC_OK && !full && packer.used < quota &&
               (max_documents == 0 || sample->n_documents < document_quota)) {
            tfenc_document doc;
            status = tfenc_corpus_next(ctx, source->corpus, &doc);
            int32_t length = 0, keys = 0, truncated = 0;
            if (status == TFENC_OK)
                status = tfenc_feeder_tokenize(ctx, source->feeding, source->tokenizer, &doc,
                                               doc.local_index, document, types, &length,
                                               &keys, &truncated);
            if (status == TFENC_OK && length > 0) { /* an empty one tells nothing */
                if (sample->indices != NULL)
                    sample->indices[sample->n_documents] = range.first_index + doc.local_index;
                status = pack_document(ctx, &packer, source, document, types, length, keys,
                                       truncated, capacity, &full);
            }
        }
        if (status == TFENC_ERR_NOT_FOUND) { /* the window's last document */
            tfenc_context_clear(ctx);
            status = TFENC_OK;
        }
    }
    if (status == TFENC_OK)
        status = close_batch(ctx, &packer, source->d_model);
    free(document);
    free(types);
    sample->n_tokens = packer.used;
    return status;
}

void tfenc_gate_sample_free(tfenc_gate_sample *sample)
{
    free(sample->batches);
    free(sample->ids);
    free(sample->types);
    free(sample->positions);
    free(sample->starts);
    free(sample->keys);
    free(sample->sequence_documents);
}

/* ------------------------------------------------------- the trial runs */

/* The memory the trial runs' checkpoints may take (run/gate_checkpoints.h):
 * on all-MiniLM-L6-v2's 8,192-token sample a boundary takes 12.6 MB, and
 * this keeps every fourth boundary of the reference and of the last three
 * trials. With the steps kept built (GATE_BUILT_STEP_BYTES) the gate's
 * memory is at most 256 MiB beside the sample's activations. */
#define GATE_CHECKPOINT_BYTES ((size_t)192 << 20)

/* One copy of the sample's activations: the batches as the caller gave
 * them, each with its own x, and the rows a sparse head (splade) hands
 * over instead of writing them into x, which the gate must compare too. */
typedef struct stream {
    tfenc_batch *batches;
    int n;
    tfenc_sparse_rows **sparse; /* [n], or NULL when [model] gives no vocab_size */
} stream;

/* `per_sequence`: room for a row per sequence only (a further head's
 * output, kept beside the tokens' rows it is made from). */
static int stream_create(tfenc_context *ctx, stream *s, const tfenc_batch *samples, int n,
                         int max_tokens, int d_model, int vocab_size, int per_sequence)
{
    s->n = n;
    s->batches = calloc((size_t)n, sizeof *s->batches);
    if (s->batches == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    if (vocab_size > 0 && (s->sparse = calloc((size_t)n, sizeof *s->sparse)) == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    for (int b = 0; s->sparse != NULL && b < n; b++) {
        int status = tfenc_sparse_rows_create(ctx, vocab_size, 0, 0.0, &s->sparse[b]);
        if (status == TFENC_OK)
            status = tfenc_sparse_rows_begin(ctx, s->sparse[b], samples[b].n_seq);
        if (status != TFENC_OK)
            return status;
    }
    for (int b = 0; b < n; b++) {
        s->batches[b] = samples[b];
        s->batches[b].d_model = d_model;
        /* Rows never outnumber the batch's tokens (pooling only drops
         * them): the sample's activations take no more than they use. */
        int rows = samples[b].n_tokens < max_tokens ? samples[b].n_tokens : max_tokens;
        if (per_sequence)
            rows = samples[b].n_seq;
        s->batches[b].x = tfenc_aligned_alloc((size_t)(rows > 0 ? rows : 1) * (size_t)d_model *
                                              sizeof(float));
        if (s->batches[b].x == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    }
    return TFENC_OK;
}

static void stream_destroy(stream *s)
{
    for (int b = 0; s->batches != NULL && b < s->n; b++)
        tfenc_aligned_free(s->batches[b].x);
    for (int b = 0; s->sparse != NULL && b < s->n; b++)
        tfenc_sparse_rows_destroy(s->sparse[b]);
    free(s->sparse);
    s->sparse = NULL;
    free(s->batches);
    s->batches = NULL;
}

/* Back to the model's input: zeros, one row per token. */
static void stream_reset(stream *s, const tfenc_batch *samples)
{
    for (int b = 0; b < s->n; b++) {
        memset(s->batches[b].x, 0,
               (size_t)samples[b].n_tokens * (size_t)s->batches[b].d_model * sizeof(float));
        s->batches[b].rows = samples[b].n_tokens;
    }
}

static void stream_copy(stream *to, const stream *from)
{
    for (int b = 0; b < to->n; b++) {
        memcpy(to->batches[b].x, from->batches[b].x,
               (size_t)from->batches[b].rows * (size_t)from->batches[b].d_model * sizeof(float));
        to->batches[b].rows = from->batches[b].rows;
    }
}

/* Two zero rows agree (cosine 1); a zero row against a non-zero one does
 * not (0); NaN counts as the worst. */
static double row_cosine(double dot, double uu, double vv)
{
    double cosine = uu == 0.0 && vv == 0.0 ? 1.0
                    : uu == 0.0 || vv == 0.0 ? 0.0
                                             : dot / sqrt(uu * vv);
    return isnan(cosine) ? -1.0 : cosine;
}

/* The smallest cosine between the sparse rows of two batches (columns
 * ascending in each, so one merge finds the common ones). */
static double sparse_cosine(const tfenc_sparse_rows *a, const tfenc_sparse_rows *b)
{
    if (a->n_rows != b->n_rows)
        return 0.0;
    double lowest = 1.0;
    for (int r = 0; r < a->n_rows; r++) {
        double dot = 0.0, uu = 0.0, vv = 0.0;
        int64_t i = a->row_start[r], j = b->row_start[r];
        const int64_t i_end = a->row_start[r + 1], j_end = b->row_start[r + 1];
        for (int64_t k = i; k < i_end; k++)
            uu += (double)a->values[k] * a->values[k];
        for (int64_t k = j; k < j_end; k++)
            vv += (double)b->values[k] * b->values[k];
        while (i < i_end && j < j_end) {
            if (a->indices[i] == b->indices[j])
                dot += (double)a->values[i++] * b->values[j++];
            else if (a->indices[i] < b->indices[j])
                i++;
            else
                j++;
        }
        double cosine = row_cosine(dot, uu, vv);
        lowest = cosine < lowest ? cosine : lowest;
    }
    return lowest;
}

/* The smallest cosine between matching rows of two streams: the sparse
 * rows where the last step run handed some over, else the rows of x. */
static double stream_cosine(const stream *a, const stream *b)
{
    double lowest = 1.0;
    for (int i = 0; i < a->n; i++) {
        if (a->sparse != NULL && (a->sparse[i]->n_rows > 0 || b->sparse[i]->n_rows > 0)) {
            double cosine = sparse_cosine(a->sparse[i], b->sparse[i]);
            lowest = cosine < lowest ? cosine : lowest;
            continue;
        }
        const tfenc_batch *x = &a->batches[i], *y = &b->batches[i];
        if (x->rows != y->rows)
            return 0.0;
        for (int r = 0; r < x->rows; r++) {
            const float *u = x->x + (size_t)r * x->d_model, *v = y->x + (size_t)r * y->d_model;
            double dot = 0.0, uu = 0.0, vv = 0.0;
            for (int j = 0; j < x->d_model; j++) {
                dot += (double)u[j] * v[j];
                uu += (double)u[j] * u[j];
                vv += (double)v[j] * v[j];
            }
            double cosine = uu == 0.0 && vv == 0.0 ? 1.0
                            : uu == 0.0 || vv == 0.0 ? 0.0
                                                     : dot / sqrt(uu * vv);
            if (!(cosine >= lowest)) /* NaN counts as the worst */
                lowest = isnan(cosine) ? -1.0 : cosine;
        }
    }
    return lowest;
}

/* A scores output (a head's k values per document at the start of each
 * row) compared with the fp32 reference's: the largest error of any
 * document's score, each label's error taken relative to the spread of
 * that label's fp32 scores over the sample (their range), so that a score
 * counts as far off as it moves among the documents' scores, whatever the
 * head's scale (logits, probabilities, a regression). A cosine of rows of
 * one or two scores would say nothing (one score's cosine is its sign).
 * The gate's bar is a cosine, and the relative error e of a row is the
 * angle by which it turns (cos e ~ 1 - e^2 / 2): the result is cos e, so
 * that min_cosine = 0.999 allows scores off by 4.5% of their spread, the
 * error it allows an embedding's row. */
static double stream_scores_similarity(const stream *reference, const stream *tested, int width)
{
    double error = 0.0;
    for (int j = 0; j < width; j++) {
        double lowest = INFINITY, highest = -INFINITY, largest_difference = 0.0;
        for (int i = 0; i < reference->n; i++) {
            const tfenc_batch *x = &reference->batches[i], *y = &tested->batches[i];
            if (x->rows != y->rows || x->d_model < width)
                return -1.0;
            for (int r = 0; r < x->rows; r++) {
                double want = x->x[(size_t)r * x->d_model + j];
                double got = y->x[(size_t)r * y->d_model + j];
                lowest = want < lowest ? want : lowest;
                highest = want > highest ? want : highest;
                double difference = fabs(got - want);
                if (!(difference <= largest_difference)) /* NaN counts as the worst */
                    largest_difference = isnan(difference) ? INFINITY : difference;
            }
        }
        /* One document, or scores all equal: their size stands for the spread. */
        double spread = highest - lowest;
        if (!(spread > 0.0))
            spread = fmax(fabs(highest), 1e-30);
        double relative = largest_difference / spread;
        error = relative > error ? relative : error;
    }
    return error < acos(-1.0) ? cos(error) : -1.0;
}

/* The gate's measure of an output against fp32's: the scores' measure
 * for the last step of a model that writes scores (scores_width > 0),
 * else the smallest cosine of the rows. */
static double stream_similarity(const stream *reference, const stream *tested, int last_step,
                                int scores_width)
{
    return last_step && scores_width > 0
               ? stream_scores_similarity(reference, tested, scores_width)
               : stream_cosine(reference, tested);
}

/* The trial steps, each built once: building a step (reading its weights,
 * quantizing or converting them, creating its products) took 16 ms of
 * all-MiniLM-L6-v2's, 40% of a bisection probe's time when every run
 * rebuilt its steps. They share one scratch (they never run at the same
 * time), so that what a kept step holds is its weights: 1 to 2 MB for
 * one of all-MiniLM-L6-v2's at int8 or bf16, against the 5 to 6 MB of its
 * scratch. Kept while they fit GATE_BUILT_STEP_BYTES, measured as the heap
 * a build leaves allocated (every arena, mmapped chunks included); a step
 * that does not fit is built and destroyed per run as before, so a large
 * model's gate holds one step's weights at a time. An fp32 step that
 * calibrates is never kept: it records its maps' input ranges on every
 * run. All of all-MiniLM-L6-v2's int8 and bf16 steps take 40 MB; of
 * all-mpnet-base-v2's, a quarter fits (64 MiB there took 1.6 s off a
 * 23 s gate, without raising its peak RSS beside 64 MiB fewer
 * checkpoints; 128 MiB took 3 s off and raised it by 88 MiB). */
#define GATE_BUILT_STEP_BYTES ((size_t)64 << 20)

typedef struct built_steps {
    tfenc_model **models; /* [n_steps * TFENC_PRECISION_COUNT], NULL where not kept */
    size_t *model_bytes;  /* [n_steps * TFENC_PRECISION_COUNT]: what each took to build */
    size_t bytes;         /* their sum */
    unsigned char *never; /* [n_steps * TFENC_PRECISION_COUNT]: not to be kept */
    tfenc_model_scratch *scratch; /* every trial step's */
} built_steps;

static size_t heap_in_use(void)
{
    const struct mallinfo2 heap = mallinfo2();
    return heap.uordblks + heap.hblkhd;
}

/* Step `step` at `precision` is not to be kept (from now on). */
static void built_step_drop(built_steps *built, int step, tfenc_precision precision)
{
    const int i = step * TFENC_PRECISION_COUNT + (int)precision;
    tfenc_model_destroy(built->models[i]);
    built->models[i] = NULL;
    built->bytes -= built->model_bytes[i];
    built->model_bytes[i] = 0;
    built->never[i] = 1;
}

static void built_steps_destroy(built_steps *built, int n_steps)
{
    for (int i = 0; built->models != NULL && i < n_steps * TFENC_PRECISION_COUNT; i++)
        tfenc_model_destroy(built->models[i]);
    free(built->models);
    free(built->model_bytes);
    free(built->never);
    tfenc_model_scratch_destroy(built->scratch);
}

/* Runs every batch of `s` through step `step` at `precision`, built (or
 * taken from `built`) alone; `calibrate` (fp32 only) records its maps'
 * input ranges. */
static int run_step(tfenc_context *ctx, const tfenc_model_options *options, tfenc_precision *chosen,
                    int step, tfenc_precision precision, int calibrate, stream *s,
                    built_steps *built)
{
    tfenc_model_options one = *options;
    one.first_step = step;
    one.end_step = step + 1;
    one.calibrate = calibrate && precision == TFENC_PRECISION_FP32;
    one.shared_scratch = built->scratch;
    tfenc_model **kept_model = one.calibrate ? NULL
                                             : &built->models[step * TFENC_PRECISION_COUNT +
                                                              (int)precision];
    tfenc_model *model = kept_model != NULL ? *kept_model : NULL;
    int status = TFENC_OK;
    if (model == NULL) {
        tfenc_precision kept = chosen[step];
        chosen[step] = precision;
        one.step_precision = chosen;
        const size_t before = heap_in_use();
        status = tfenc_model_create(ctx, &one, &model);
        const size_t after = heap_in_use(), took = after > before ? after - before : 0;
        chosen[step] = kept;
        if (status == TFENC_OK && kept_model != NULL && !built->never[kept_model - built->models] &&
            built->bytes + took <= GATE_BUILT_STEP_BYTES) {
            *kept_model = model;
            built->model_bytes[kept_model - built->models] = took;
            built->bytes += took;
        }
    }
    for (int b = 0; status == TFENC_OK && b < s->n; b++) {
        /* A sparse head's rows go where the batch says; other steps leave
         * the batch's rows empty. */
        s->batches[b].sparse_rows = s->sparse != NULL ? &s->sparse[b]->destination : NULL;
        if (s->sparse != NULL)
            status = tfenc_sparse_rows_begin(ctx, s->sparse[b], s->batches[b].n_seq);
        if (status == TFENC_OK)
            status = tfenc_model_forward(ctx, model, &s->batches[b]);
    }
    if (kept_model == NULL || *kept_model != model)
        tfenc_model_destroy(model);
    return status;
}

/* The whole model at precisions `chosen`, step by step, on the sample
 * (which == NULL) or on n_which of its batches (samples and s hold only
 * those; which[i] is their index in the sample): from the deepest
 * checkpoint an earlier run at the same precisions left. Only runs on the
 * whole sample leave checkpoints of their own. With `tap` (not NULL) the
 * run starts no later than the trunk's end, step trunk_steps, and leaves
 * the rows it had there in `tap`, for the further heads. */
static int run_at_precisions(tfenc_context *ctx, const tfenc_model_options *options,
                             tfenc_precision *chosen, const tfenc_batch *samples, stream *s,
                             tfenc_gate_checkpoints *checkpoints, const int *which,
                             built_steps *built, stream *tap, int trunk_steps)
{
    const int n_steps = options->plan->n_steps;
    const int start = tfenc_gate_checkpoints_restore(checkpoints, chosen, s->batches, which, s->n,
                                                     tap != NULL ? trunk_steps : n_steps);
    if (start == 0)
        stream_reset(s, samples);
    int status = TFENC_OK;
    for (int i = start; status == TFENC_OK && i < n_steps; i++) {
        /* (past the trunk's end a run with a tap would never take them) */
        if (i > start && which == NULL && (tap == NULL || i <= trunk_steps))
            tfenc_gate_checkpoints_keep(checkpoints, i, chosen, s->batches);
        if (tap != NULL && i == trunk_steps)
            stream_copy(tap, s);
        status = run_step(ctx, options, chosen, i, chosen[i], 0, s, built);
    }
    return status;
}

/* Whether two streams hold bitwise the same rows. */
static int streams_identical(const stream *a, const stream *b)
{
    for (int i = 0; i < a->n; i++) {
        const tfenc_batch *x = &a->batches[i], *y = &b->batches[i];
        if (x->rows != y->rows || x->d_model != y->d_model ||
            memcmp(x->x, y->x, (size_t)x->rows * (size_t)x->d_model * sizeof(float)) != 0)
            return 0;
    }
    return 1;
}

/* Each step alone at `precision` against fp32 on fp32 inputs; `reference`
 * ends holding the fp32 model's output. The fp32 steps here, and only
 * these, calibrate the int8 maps' input smoothing: on the reference's
 * activations, recorded before the step's int8 map is built. The fp32
 * steps of the trial runs below (fp32 is the fallback where bf16 does not
 * run) see activations that int8 steps upstream have moved; had they
 * recorded too, a step's int8 map would depend on which trials ran before
 * it, and a run could not start from the activations an earlier run with
 * the same precisions left (run/gate_checkpoints.h). The reference's
 * activations are the first checkpoints (`all_fp32`: [n_steps] fp32), and
 * the int8 steps that give bitwise its output are marked so. With `tap`,
 * the reference's rows at the trunk's end (step trunk_steps) are left
 * there. */
static int step_cosines(tfenc_context *ctx, const tfenc_model_options *options,
                        tfenc_precision *chosen, const tfenc_batch *samples,
                        tfenc_precision precision, stream *reference, stream *tested,
                        int scores_width, double *cosines, tfenc_gate_checkpoints *checkpoints,
                        const tfenc_precision *all_fp32, built_steps *built, stream *tap,
                        int trunk_steps)
{
    stream_reset(reference, samples);
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < options->plan->n_steps; i++) {
        if (tap != NULL && i == trunk_steps)
            stream_copy(tap, reference);
        stream_copy(tested, reference);
        tfenc_gate_checkpoints_keep(checkpoints, i, all_fp32, reference->batches);
        status = run_step(ctx, options, chosen, i, TFENC_PRECISION_FP32, 1, reference, built);
        if (status == TFENC_OK)
            status = run_step(ctx, options, chosen, i, precision, 0, tested, built);
        if (status == TFENC_OK) {
            cosines[i] = stream_similarity(reference, tested, i == options->plan->n_steps - 1,
                                           scores_width);
            /* A step whose int8 run is the fp32 one (an embedding lookup:
             * all-MiniLM-L6-v2's takes 49 MB) is left to the checkpoints. */
            const int identical = precision == TFENC_PRECISION_INT8 &&
                                  streams_identical(reference, tested);
            if (precision == TFENC_PRECISION_INT8)
                tfenc_gate_checkpoints_set_identical(checkpoints, i, identical);
            if (identical)
                built_step_drop(built, i, precision);
        }
    }
    return status;
}

/* The least accurate step by `cosines`, or -1 when every one is exact. */
static int worst_step(const double *cosines, int n)
{
    int worst = -1;
    for (int i = 0; i < n; i++)
        if (cosines[i] < 1.0 && (worst < 0 || cosines[i] < cosines[worst]))
            worst = i;
    return worst;
}

/* int8 with the `k` least accurate int8 steps (order[0..k)) in bf16 (fp32
 * where bf16 does not run). */
static void assign(tfenc_precision *chosen, int n_steps, const int *order, int k)
{
    for (int i = 0; i < n_steps; i++)
        chosen[i] = TFENC_PRECISION_INT8;
    for (int i = 0; i < k; i++)
        chosen[order[i]] = tfenc_matrix_int8_fallback();
}

/* Orders step indices by their cosine, least accurate first (a model has
 * tens of steps: insertion sort). */
static void sort_by_cosine(int *order, int n, const double *cosines)
{
    for (int i = 1; i < n; i++) {
        int step = order[i], j = i;
        for (; j > 0 && cosines[order[j - 1]] > cosines[step]; j--)
            order[j] = order[j - 1];
        order[j] = step;
    }
}

/* A further head in the gate: built once at fp32 over its whole plan,
 * its output (a row per document, sparse rows beside) on fp32's trunk
 * (reference) and on a trial's (tested). */
typedef struct gate_head {
    const char *name;
    tfenc_model *model;
    int scores_width; /* > 0: measured as scores */
    stream reference, tested;
    /* On the gate's hard part: views of its reference's batches (the
     * arrays are the head's) and its output there. */
    stream hard_reference, hard_tested;
} gate_head;

/* What one run of the gate holds: the sample, the fp32 model's output on
 * it (reference), the trial runs' (tested), each step's cosine, the order
 * the int8 steps fall back in, the bar the sample must meet, and the
 * hardest of the sample's batches, on which the bisection probes first. */
typedef struct gate {
    tfenc_context *ctx;
    const tfenc_model_options *options;
    const tfenc_batch *samples;
    int n_samples;
    tfenc_precision *chosen; /* [n_steps] the report's step_precision */
    int n_steps;
    stream reference, tested;
    tfenc_gate_checkpoints *checkpoints;
    built_steps built;
    tfenc_precision *all_fp32; /* [n_steps] */
    double *cosines; /* [n_steps] */
    int *order;      /* [n_steps] */
    double bar;
    int scores_width; /* > 0: the model writes this many scores a document */
    /* The hard part: n_hard of the sample's batches (hard[i] their index),
     * their inputs, fp32 outputs (views of the reference's) and a stream
     * of their own for the trials; n_hard = 0 when there is none. */
    int n_hard;
    int *hard;
    tfenc_batch *hard_samples, *hard_reference_batches;
    tfenc_sparse_rows **hard_reference_sparse;
    stream hard_reference, hard_tested;
    /* Further heads: n_heads of them, read from `tap`, the rows a run had
     * at the trunk's end (step trunk_steps), each run on a copy of it in
     * `head_rows` (the sample's tokens, as tap: one copy for every head,
     * whose own streams keep a row per document). Each output's measure in the
     * last trial on the whole sample (`values`, [1 + n_heads]: the first
     * head's, then the further heads'), and in the last that met the bar
     * (`passed`): the chosen precisions' once the bisection ends. */
    gate_head *heads;
    int n_heads, trunk_steps;
    stream tap, head_rows;
    stream hard_tap, hard_head_rows; /* the same for a run on the hard part */
    double *values, *passed;
} gate;

/* Head h's output on the rows in `tap` into `into`: run on a copy of
 * them in `rows`, its row per document (as run/heads.c checks) copied, its
 * sparse rows handed to `into`'s. */
static int run_head(gate *g, gate_head *h, const stream *tap, stream *rows, stream *into)
{
    stream_copy(rows, tap);
    int status = TFENC_OK;
    for (int b = 0; status == TFENC_OK && b < into->n; b++) {
        tfenc_batch *batch = &rows->batches[b];
        batch->sparse_rows = into->sparse != NULL ? &into->sparse[b]->destination : NULL;
        if (into->sparse != NULL)
            status = tfenc_sparse_rows_begin(g->ctx, into->sparse[b], batch->n_seq);
        if (status == TFENC_OK)
            status = tfenc_model_forward(g->ctx, h->model, batch);
        if (status == TFENC_OK && batch->rows != batch->n_seq)
            status = tfenc_error(g->ctx, TFENC_ERR_PLUGIN, "head %s left %d rows for %d documents",
                                 h->name, batch->rows, batch->n_seq);
        if (status == TFENC_OK) {
            memcpy(into->batches[b].x, batch->x,
                   (size_t)batch->rows * (size_t)batch->d_model * sizeof(float));
            into->batches[b].rows = batch->rows;
        }
    }
    return status;
}

/* Builds head i (fp32, the gate's options with its plan), learns how its
 * output is measured from what its last layer declares, and makes its
 * streams: a sparse head's rows of the width it declares. */
static int head_create(gate *g, const tfenc_gate_head *head, gate_head *h, int max_tokens)
{
    h->name = head->name;
    const int n_steps = head->plan->n_steps;
    tfenc_precision *fp32 = calloc((size_t)(n_steps > 0 ? n_steps : 1), sizeof *fp32);
    if (fp32 == NULL)
        return tfenc_error(g->ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    for (int i = 0; i < n_steps; i++)
        fp32[i] = TFENC_PRECISION_FP32;
    tfenc_model_options o = *g->options;
    o.plan = head->plan;
    o.first_step = 0;
    o.end_step = n_steps;
    o.input_unset = 0;
    o.calibrate = 0;
    o.step_precision = fp32;
    o.shared_scratch = g->built.scratch;
    int status = tfenc_model_create(g->ctx, &o, &h->model);
    free(fp32); /* read while the model is built only */
    tfenc_layer_output declared = {.struct_size = sizeof declared};
    int pools = 0;
    if (status == TFENC_OK)
        status = tfenc_model_output(g->ctx, h->model, &declared);
    if (status == TFENC_OK)
        status = tfenc_model_probe_pools(g->ctx, h->model, &pools, NULL);
    if (status != TFENC_OK)
        return tfenc_error_prefix(g->ctx, status, "head %s", head->name);
    const tfenc_output_kind_entry *kind = tfenc_output_kind_of_layer(declared.kind, pools);
    /* As the run refuses it (run/heads.c), before the gate runs it. */
    if (kind != NULL && kind->rows == TFENC_ROWS_PER_TOKEN)
        return tfenc_error(g->ctx, TFENC_ERR_CONFIG,
                           "head %s writes %s rows, but a head after the first writes one row "
                           "per document (pooled, scores or sparse): make it the first head",
                           head->name, kind->name);
    h->scores_width = kind != NULL && kind->gated_by_scores ? declared.width : 0;
    const int sparse_width = kind != NULL && kind->rows == TFENC_ROWS_SPARSE
                                 ? (declared.width > 0 ? declared.width
                                                       : g->options->config->vocab_size)
                                 : 0;
    const int d = g->options->config->d_model;
    status = stream_create(g->ctx, &h->reference, g->samples, g->n_samples, max_tokens, d,
                           sparse_width, 1);
    if (status == TFENC_OK)
        status = stream_create(g->ctx, &h->tested, g->samples, g->n_samples, max_tokens, d,
                               sparse_width, 1);
    return status;
}

/* Head h's measure: its tested output against its reference. */
static double head_similarity(const gate_head *h)
{
    return h->scores_width > 0
               ? stream_scores_similarity(&h->reference, &h->tested, h->scores_width)
               : stream_cosine(&h->reference, &h->tested);
}

static void heads_destroy(gate *g)
{
    for (int i = 0; g->heads != NULL && i < g->n_heads; i++) {
        stream_destroy(&g->heads[i].reference);
        stream_destroy(&g->heads[i].tested);
        tfenc_model_destroy(g->heads[i].model);
    }
    free(g->heads);
    stream_destroy(&g->tap);
    stream_destroy(&g->head_rows);
    free(g->values);
    free(g->passed);
}

/* The further heads built, and their output on the fp32 reference's trunk
 * (step_cosines left it in g->tap). */
static int heads_create(gate *g, const tfenc_gate_head *heads, int max_tokens)
{
    g->values = calloc((size_t)g->n_heads + 1, sizeof *g->values);
    g->passed = calloc((size_t)g->n_heads + 1, sizeof *g->passed);
    if (g->values == NULL || g->passed == NULL)
        return tfenc_error(g->ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    if (g->n_heads == 0)
        return TFENC_OK;
    if ((g->heads = calloc((size_t)g->n_heads, sizeof *g->heads)) == NULL)
        return tfenc_error(g->ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    const int d = g->options->config->d_model;
    int status = stream_create(g->ctx, &g->tap, g->samples, g->n_samples, max_tokens, d, 0, 0);
    if (status == TFENC_OK)
        status = stream_create(g->ctx, &g->head_rows, g->samples, g->n_samples, max_tokens, d,
                               0, 0);
    for (int i = 0; status == TFENC_OK && i < g->n_heads; i++)
        status = head_create(g, &heads[i], &g->heads[i], max_tokens);
    return status;
}

/* The whole model at the chosen precisions on the sample (or only on its
 * hard part): its smallest cosine to the fp32 output (0 after an error).
 * With further heads, the least of every head's measure (on the whole
 * sample, g->values each, g->passed too when it meets the bar). */
static int trial_cosine(gate *g, int hard_part, double *cosine)
{
    stream *tap = g->n_heads == 0 ? NULL : hard_part ? &g->hard_tap : &g->tap;
    int status = hard_part
                     ? run_at_precisions(g->ctx, g->options, g->chosen, g->hard_samples,
                                         &g->hard_tested, g->checkpoints, g->hard, &g->built,
                                         tap, g->trunk_steps)
                     : run_at_precisions(g->ctx, g->options, g->chosen, g->samples, &g->tested,
                                         g->checkpoints, NULL, &g->built, tap, g->trunk_steps);
    *cosine = status != TFENC_OK ? 0.0
              : hard_part        ? stream_cosine(&g->hard_reference, &g->hard_tested)
                                 : stream_similarity(&g->reference, &g->tested, 1,
                                                     g->scores_width);
    if (status == TFENC_OK && hard_part) {
        /* No scores head has a hard part (choose_hard_part). */
        for (int i = 0; status == TFENC_OK && i < g->n_heads; i++) {
            gate_head *h = &g->heads[i];
            status = run_head(g, h, &g->hard_tap, &g->hard_head_rows, &h->hard_tested);
            const double head = status == TFENC_OK
                                    ? stream_cosine(&h->hard_reference, &h->hard_tested)
                                    : 0.0;
            *cosine = head < *cosine ? head : *cosine;
        }
        return status;
    }
    if (status != TFENC_OK)
        return status;
    g->values[0] = *cosine;
    for (int i = 0; status == TFENC_OK && i < g->n_heads; i++) {
        status = run_head(g, &g->heads[i], &g->tap, &g->head_rows, &g->heads[i].tested);
        g->values[1 + i] = status == TFENC_OK ? head_similarity(&g->heads[i]) : 0.0;
        *cosine = g->values[1 + i] < *cosine ? g->values[1 + i] : *cosine;
    }
    if (status == TFENC_OK && *cosine >= g->bar)
        memcpy(g->passed, g->values, ((size_t)g->n_heads + 1) * sizeof *g->values);
    return status;
}

static int model_cosine(gate *g, double *cosine)
{
    return trial_cosine(g, 0, cosine);
}

/* Head h on the hard part (g->hard): views of its reference's batches
 * and sparse rows, and a stream of its own for the trials. */
static int head_hard_part(gate *g, gate_head *h, int max_tokens)
{
    const int n = g->n_hard;
    const int sparse = h->reference.sparse != NULL;
    tfenc_batch *batches = malloc((size_t)n * sizeof *batches);
    tfenc_sparse_rows **rows = sparse ? malloc((size_t)n * sizeof *rows) : NULL;
    h->hard_reference = (stream){.batches = batches, .n = n, .sparse = rows};
    if (batches == NULL || (sparse && rows == NULL))
        return tfenc_error(g->ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    for (int i = 0; i < n; i++) {
        batches[i] = h->reference.batches[g->hard[i]];
        if (sparse)
            rows[i] = h->reference.sparse[g->hard[i]];
    }
    return stream_create(g->ctx, &h->hard_tested, g->hard_samples, n, max_tokens,
                         g->options->config->d_model,
                         sparse ? h->reference.sparse[0]->width : 0, 1);
}

/* The sample's hard part, chosen after the all-int8 run (g->tested and
 * each further head's tested hold its output): the quarter of the batches
 * with the smallest cosines to fp32 (the least over the heads), the least
 * first. Its smallest cosine is never above the whole
 * sample's, so a count of fallbacks that fails on it fails on the sample,
 * and one that passes on it usually passes on the sample: the bisection
 * probes there, at a quarter of the cost, and the sample confirms. None
 * for scores, the first head's or a further head's (measured against
 * their spread over the whole sample), or a sample of fewer than 4
 * batches. */
static int choose_hard_part(gate *g, int max_tokens, int d_model, int vocab_size)
{
    const int n = g->n_samples, wanted = (n + 3) / 4;
    int scores = g->scores_width > 0;
    for (int i = 0; i < g->n_heads; i++)
        scores |= g->heads[i].scores_width > 0;
    if (scores || n < 4)
        return TFENC_OK;
    double *cosines = malloc((size_t)n * sizeof *cosines);
    g->hard = malloc((size_t)wanted * sizeof *g->hard);
    g->hard_samples = malloc((size_t)wanted * sizeof *g->hard_samples);
    g->hard_reference_batches = malloc((size_t)wanted * sizeof *g->hard_reference_batches);
    if (g->reference.sparse != NULL)
        g->hard_reference_sparse = malloc((size_t)wanted * sizeof *g->hard_reference_sparse);
    if (cosines == NULL || g->hard == NULL || g->hard_samples == NULL ||
        g->hard_reference_batches == NULL ||
        (g->reference.sparse != NULL && g->hard_reference_sparse == NULL)) {
        free(cosines);
        return tfenc_error(g->ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    }
    for (int b = 0; b < n; b++) {
        const stream reference = {.batches = &g->reference.batches[b], .n = 1,
                                  .sparse = g->reference.sparse ? &g->reference.sparse[b] : NULL};
        const stream tested = {.batches = &g->tested.batches[b], .n = 1,
                               .sparse = g->tested.sparse ? &g->tested.sparse[b] : NULL};
        cosines[b] = stream_cosine(&reference, &tested);
        for (int i = 0; i < g->n_heads; i++) {
            const gate_head *h = &g->heads[i];
            const stream head_reference = {
                .batches = &h->reference.batches[b], .n = 1,
                .sparse = h->reference.sparse ? &h->reference.sparse[b] : NULL};
            const stream head_tested = {.batches = &h->tested.batches[b], .n = 1,
                                        .sparse = h->tested.sparse ? &h->tested.sparse[b] : NULL};
            cosines[b] = fmin(cosines[b], stream_cosine(&head_reference, &head_tested));
        }
    }
    for (int i = 0; i < wanted; i++) {
        int least = -1;
        for (int b = 0; b < n; b++)
            if (cosines[b] <= 2.0 && (least < 0 || cosines[b] < cosines[least]))
                least = b;
        cosines[least] = INFINITY; /* taken */
        g->hard[i] = least;
        g->hard_samples[i] = g->samples[least];
        g->hard_reference_batches[i] = g->reference.batches[least];
        if (g->hard_reference_sparse != NULL)
            g->hard_reference_sparse[i] = g->reference.sparse[least];
    }
    free(cosines);
    g->hard_reference = (stream){.batches = g->hard_reference_batches, .n = wanted,
                                 .sparse = g->hard_reference_sparse};
    g->n_hard = wanted;
    int status = stream_create(g->ctx, &g->hard_tested, g->hard_samples, wanted, max_tokens,
                               d_model, vocab_size, 0);
    if (status == TFENC_OK && g->n_heads > 0)
        status = stream_create(g->ctx, &g->hard_tap, g->hard_samples, wanted, max_tokens,
                               d_model, 0, 0);
    if (status == TFENC_OK && g->n_heads > 0)
        status = stream_create(g->ctx, &g->hard_head_rows, g->hard_samples, wanted, max_tokens,
                               d_model, 0, 0);
    for (int i = 0; status == TFENC_OK && i < g->n_heads; i++)
        status = head_hard_part(g, &g->heads[i], max_tokens);
    return status;
}

static void hard_part_free(gate *g)
{
    for (int i = 0; g->heads != NULL && i < g->n_heads; i++) {
        free(g->heads[i].hard_reference.batches);
        free(g->heads[i].hard_reference.sparse);
        stream_destroy(&g->heads[i].hard_tested);
    }
    stream_destroy(&g->hard_tap);
    stream_destroy(&g->hard_head_rows);
    stream_destroy(&g->hard_tested);
    free(g->hard);
    free(g->hard_samples);
    free(g->hard_reference_batches);
    free(g->hard_reference_sparse);
}

/* Where the bisection starts: the steps' errors add up (1 - cosine of the
 * model ~ the sum over its int8 steps), so the fewest candidates whose
 * errors, taken out, bring the model to the bar is a first probe that
 * saves a few. */
static int first_guess(const gate *g, int n_candidates, double int8_cosine)
{
    double total = 0.0;
    for (int i = 0; i < n_candidates; i++)
        total += 1.0 - g->cosines[g->order[i]];
    double left = total, int8_error = 1.0 - int8_cosine;
    int guess = 0;
    while (guess < n_candidates && total > 0.0 && int8_error * left / total > 1.0 - g->bar) {
        left -= 1.0 - g->cosines[g->order[guess]];
        guess++;
    }
    return guess;
}

/* Bisection over k in (*low, *high] for the fewest candidates out of int8
 * that meet the bar on the hard part or the whole sample: k = *low is
 * known to fail there; k = *high passes with *high_cosine, or is assumed
 * to (*high_cosine NaN). The first probe is `guess` if it lies between. */
static int bisect(gate *g, int hard_part, int guess, int *low, int *high, double *high_cosine)
{
    int status = TFENC_OK;
    for (int probes = 0; status == TFENC_OK && *high - *low > 1; probes++) {
        const int middle = probes == 0 && guess > *low && guess < *high ? guess
                                                                         : (*low + *high) / 2;
        assign(g->chosen, g->n_steps, g->order, middle);
        double probe;
        status = trial_cosine(g, hard_part, &probe);
        if (probe >= g->bar) {
            *high = middle;
            *high_cosine = probe;
        } else {
            *low = middle;
        }
    }
    return status;
}

/* The fewest candidates out of int8 (least accurate first) that meet the
 * bar on the whole sample, as a bisection on it finds them, k = 0 known
 * to fail: bisection on the hard part first, whose answer k_hard fails
 * below on the sample too, so the sample confirms k_hard in one run
 * unless a row outside the hard part fails there (then bisection above
 * it). All candidates out of int8 are run only when every smaller count
 * failed: *cosine below the bar then means that even they miss it. Leaves
 * the chosen precisions at that count. */
static int fewest_fallbacks(gate *g, int n_candidates, double int8_cosine, int *fallbacks,
                            double *cosine)
{
    int low = 0, high = n_candidates, status = TFENC_OK;
    double high_cosine = NAN;
    int guess = first_guess(g, n_candidates, int8_cosine);
    if (g->n_hard > 0) {
        int hard_high = n_candidates;
        double hard_cosine = NAN;
        status = bisect(g, 1, guess, &low, &hard_high, &hard_cosine);
        guess = hard_high;
    }
    if (status == TFENC_OK)
        status = bisect(g, 0, guess, &low, &high, &high_cosine);
    if (status == TFENC_OK && isnan(high_cosine)) {
        assign(g->chosen, g->n_steps, g->order, high);
        status = model_cosine(g, &high_cosine);
    }
    assign(g->chosen, g->n_steps, g->order, high);
    *fallbacks = high;
    *cosine = high_cosine;
    return status;
}

/* int8 below the bar: the int8 steps that are not exact are the
 * candidates for bf16, least accurate first. Where some of them out of
 * int8 meet the bar, the fewest are kept out (*sample_cosine becomes
 * theirs). Otherwise the job is refused (*refuse), naming the layer that
 * bf16 itself serves worst (report->worst_step, its cosine
 * *refused_cosine). */
static int keep_out_of_int8(gate *g, tfenc_precision_report *report, double *sample_cosine,
                            int *refuse, double *refused_cosine)
{
    int n_candidates = 0;
    for (int i = 0; i < g->n_steps; i++)
        if (g->cosines[i] < 1.0)
            g->order[n_candidates++] = i;
    sort_by_cosine(g->order, n_candidates, g->cosines);
    int fallbacks = 0;
    double cosine = 0.0;
    int status = fewest_fallbacks(g, n_candidates, *sample_cosine, &fallbacks, &cosine);
    if (status != TFENC_OK)
        return status;
    *sample_cosine = cosine;
    if (cosine >= g->bar) {
        report->n_fallbacks = fallbacks;
        return TFENC_OK;
    }
    *refuse = 1;
    status = step_cosines(g->ctx, g->options, g->chosen, g->samples, tfenc_matrix_int8_fallback(),
                          &g->reference, &g->tested, g->scores_width, g->cosines,
                          g->checkpoints, g->all_fp32, &g->built, NULL, 0);
    int worst = worst_step(g->cosines, g->n_steps);
    report->worst_step = worst;
    *refused_cosine = worst >= 0 ? g->cosines[worst] : 1.0;
    return status;
}

/* The one line a refused job ends with. */
static int refuse_job(gate *g, const tfenc_precision_report *report, double min_cosine,
                      double refused_cosine)
{
    const tfenc_precision requested = g->options->config->precision;
    const char *name =
        report->worst_step >= 0 ? g->options->plan->steps[report->worst_step].name : "(none)";
    const char *even = requested == TFENC_PRECISION_INT8 ? " even with every layer out of int8"
                                                         : "";
    const char *alone = tfenc_precision_names[requested == TFENC_PRECISION_INT8
                                                  ? tfenc_matrix_int8_fallback()
                                                  : requested];
    /* With further heads, the one whose output misses the bar by most is
     * named; the layers' own measure is the first head's. */
    int worst = 0;
    for (int i = 1; i <= g->n_heads; i++)
        worst = g->values[i] < g->values[worst] ? i : worst;
    char whose[TFENC_MESSAGE_MAX / 4] = "";
    if (g->n_heads > 0)
        snprintf(whose, sizeof whose, " of head %s",
                 worst == 0 ? g->options->plan->first_head : g->heads[worst - 1].name);
    const int scores = worst == 0 ? g->scores_width > 0 : g->heads[worst - 1].scores_width > 0;
    /* The layer's own measure: the first head's scores', or a cosine. */
    char layer[TFENC_MESSAGE_MAX / 4];
    if (worst == 0 && scores)
        snprintf(layer, sizeof layer, "%.4g%% in %s alone",
                 100.0 * acos(fmax(fmin(refused_cosine, 1.0), -1.0)), alone);
    else
        snprintf(layer, sizeof layer, "cosine %.8f in %s alone", refused_cosine, alone);
    if (scores)
        return tfenc_error(
            g->ctx, TFENC_ERR_CONFIG,
            "precision = %s: on the corpus sample the scores%s are off fp32's by %.4g%% of "
            "their spread, more than %.4g%% (min_cosine = %.8f as an angle, with half its error "
            "to spare)%s; the least accurate layer is %s (%s)",
            tfenc_precision_names[requested], whose,
            100.0 * acos(fmax(report->sample_cosine, -1.0)), 100.0 * acos(g->bar), min_cosine,
            even, name, layer);
    return tfenc_error(
        g->ctx, TFENC_ERR_CONFIG,
        "precision = %s: on the corpus sample the %smin cosine to fp32%s is %.8f, below "
        "%.8f (min_cosine = %.8f with half its error to spare)%s; the least accurate layer "
        "is %s (%s)",
        tfenc_precision_names[requested], g->n_heads > 0 ? "" : "output's ", whose,
        report->sample_cosine, g->bar, min_cosine, even, name, layer);
}

/* The report of an exact run: every step at the requested precision. */
static void report_exact(tfenc_precision_report *report, int n_steps, tfenc_precision requested)
{
    for (int i = 0; i < n_steps; i++)
        report->step_precision[i] = requested;
    report->sample_cosine = 1.0;
    report->n_fallbacks = 0;
    report->worst_step = -1;
    if (report->step_cosine != NULL)
        for (int i = 0; i < n_steps; i++)
            report->step_cosine[i] = 1.0;
}

int tfenc_precision_gate(tfenc_context *ctx, const tfenc_model_options *options,
                         const tfenc_batch *samples, int n_samples, double min_cosine,
                         int scores_width, const tfenc_gate_head *heads, int n_heads,
                         tfenc_precision_report *report)
{
    const int n_steps = options->plan->n_steps;
    const tfenc_precision requested = options->config->precision;
    report_exact(report, n_steps, requested);
    for (int i = 0; report->output_cosine != NULL && i <= n_heads; i++)
        report->output_cosine[i] = 1.0;
    for (int i = 0; report->output_scores != NULL && i <= n_heads; i++)
        report->output_scores[i] = i == 0 ? scores_width > 0 : 0;
    if (requested == TFENC_PRECISION_FP32)
        return TFENC_OK;
    if (n_samples < 1)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "accuracy gate: no sample batches");

    /* A corpus holds documents less accurate than its sample's worst: the
     * sample must meet the bar with half the error to spare (all-MiniLM-
     * L6-v2: 0.99908 on a 139-document sample, 0.99873 over its 532). */
    gate g = {.ctx = ctx, .options = options, .samples = samples, .n_samples = n_samples,
              .chosen = report->step_precision, .n_steps = n_steps,
              .bar = 1.0 - (1.0 - min_cosine) / 2.0, .scores_width = scores_width,
              .n_heads = n_heads, .trunk_steps = options->plan->trunk_steps};
    g.cosines = calloc((size_t)n_steps, sizeof *g.cosines);
    g.order = calloc((size_t)n_steps, sizeof *g.order);
    g.all_fp32 = calloc((size_t)n_steps, sizeof *g.all_fp32);
    g.built.models = calloc((size_t)n_steps * TFENC_PRECISION_COUNT, sizeof *g.built.models);
    g.built.model_bytes = calloc((size_t)n_steps * TFENC_PRECISION_COUNT,
                                 sizeof *g.built.model_bytes);
    g.built.never = calloc((size_t)n_steps * TFENC_PRECISION_COUNT, 1);
    int status = g.cosines == NULL || g.order == NULL || g.all_fp32 == NULL ||
                         g.built.models == NULL || g.built.model_bytes == NULL ||
                         g.built.never == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory")
                     : tfenc_model_scratch_create(ctx, &g.built.scratch);
    for (int i = 0; g.all_fp32 != NULL && i < n_steps; i++)
        g.all_fp32[i] = TFENC_PRECISION_FP32;
    const int max_tokens = options->limits.max_tokens, d = options->config->d_model;
    const int vocab = options->config->vocab_size;
    size_t boundary_bytes = 0;
    for (int b = 0; b < n_samples; b++)
        boundary_bytes += (size_t)(samples[b].n_tokens < max_tokens ? samples[b].n_tokens
                                                                     : max_tokens) *
                          (size_t)d * sizeof(float);
    if (status == TFENC_OK)
        status = tfenc_gate_checkpoints_create(ctx, n_steps, n_samples, boundary_bytes,
                                               GATE_CHECKPOINT_BYTES, &g.checkpoints);
    if (status == TFENC_OK)
        status = stream_create(ctx, &g.reference, samples, n_samples, max_tokens, d, vocab, 0);
    if (status == TFENC_OK)
        status = stream_create(ctx, &g.tested, samples, n_samples, max_tokens, d, vocab, 0);
    if (status == TFENC_OK)
        status = heads_create(&g, heads, max_tokens);
    if (status == TFENC_OK)
        status = step_cosines(ctx, options, g.chosen, samples, requested, &g.reference,
                              &g.tested, scores_width, g.cosines, g.checkpoints, g.all_fp32,
                              &g.built, n_heads > 0 ? &g.tap : NULL, g.trunk_steps);
    /* g.reference now holds the fp32 model's output, g.tap its trunk's
     * rows: the further heads' fp32 output follows. */
    for (int i = 0; status == TFENC_OK && i < n_heads; i++) {
        status = run_head(&g, &g.heads[i], &g.tap, &g.head_rows, &g.heads[i].reference);
        if (report->output_scores != NULL)
            report->output_scores[1 + i] = g.heads[i].scores_width > 0;
    }
    double sample_cosine = 0.0;
    if (status == TFENC_OK) {
        if (report->step_cosine != NULL)
            memcpy(report->step_cosine, g.cosines, (size_t)n_steps * sizeof *g.cosines);
        report->worst_step = worst_step(g.cosines, n_steps);
        status = model_cosine(&g, &sample_cosine);
    }
    int refuse = 0;
    double refused_cosine = 0.0;
    if (status == TFENC_OK && sample_cosine < g.bar) {
        if (requested == TFENC_PRECISION_INT8) {
            status = choose_hard_part(&g, max_tokens, d, vocab);
            if (status == TFENC_OK)
                status = keep_out_of_int8(&g, report, &sample_cosine, &refuse, &refused_cosine);
        } else {
            refuse = 1;
            refused_cosine = report->worst_step >= 0 ? g.cosines[report->worst_step] : 1.0;
        }
    }
    report->sample_cosine = sample_cosine;
    if (status == TFENC_OK && report->output_cosine != NULL)
        memcpy(report->output_cosine, refuse ? g.values : g.passed,
               ((size_t)n_heads + 1) * sizeof *g.values);
    if (status == TFENC_OK && refuse)
        status = refuse_job(&g, report, min_cosine, refused_cosine);
    stream_destroy(&g.reference);
    stream_destroy(&g.tested);
    hard_part_free(&g);
    heads_destroy(&g);
    tfenc_gate_checkpoints_destroy(g.checkpoints);
    built_steps_destroy(&g.built, n_steps);
    free(g.all_fp32);
    free(g.cosines);
    free(g.order);
    malloc_trim(0); /* the sample's activations and the steps built for it */
    return status;
}
