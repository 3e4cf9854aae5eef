/* The datasets of a tfenc output file, described once (output_description.h):
 * the table, and the answers a creating job and a checked file both take
 * from it. */
#include "output/output_description.h"

#include <stddef.h>

#include "output/output_internal.h"

/* Every dataset of a tfenc output (output/output.h, output/sparse.h). */
const tfenc_output_dataset tfenc_output_datasets[TFENC_DATASET_COUNT] = {
    /* The rows: only their shape is checked. */
    [TFENC_DATASET_ROWS] = {
        .presence = TFENC_WHEN_ROWS, .every_head = 1, .element = TFENC_ELEMENT_ROW,
        .dims = {TFENC_DIM_ROWS, TFENC_DIM_WIDTH}, .handle = offsetof(tfenc_output, rows)},
    /* Where each document's rows are, and what they hold per row. */
    [TFENC_DATASET_ROW_RUNS] = {
        .name = TFENC_CHUNK_OFFSETS_DATASET, /* per-token kinds: their entry's offsets_dataset */
        .presence = TFENC_WHEN_ROW_RUNS, .element = TFENC_ELEMENT_INT64,
        .dims = {TFENC_DIM_BOUNDARIES}, .handle = offsetof(tfenc_output, offsets),
        .indexing = TFENC_BY_BOUNDARY, .rule = TFENC_RULE_BOUNDARIES, .ends_at = TFENC_DIM_ROWS,
        .run = TFENC_RUN_OF_THE_ROWS},
    [TFENC_DATASET_CHUNK_STARTS] = {
        .name = "chunk_starts", .presence = TFENC_WHEN_CHUNK_EACH,
        .element = TFENC_ELEMENT_INT32, .dims = {TFENC_DIM_ROWS},
        .handle = offsetof(tfenc_output, chunk_starts), .indexing = TFENC_BY_RUN,
        .rule = TFENC_RULE_NOT_NEGATIVE, .bounds = TFENC_DATASET_ROW_RUNS},
    [TFENC_DATASET_TOKEN_IDS] = {
        .name = "token_ids", .presence = TFENC_WHEN_TOKEN_IDS, .element = TFENC_ELEMENT_INT32,
        .dims = {TFENC_DIM_ROWS}, .handle = offsetof(tfenc_output, token_ids),
        .indexing = TFENC_BY_RUN, .rule = TFENC_RULE_NOT_NEGATIVE,
        .bounds = TFENC_DATASET_ROW_RUNS},
    /* One entry per document. */
    [TFENC_DATASET_CHUNKS] = {
        .name = "chunks", .presence = TFENC_WHEN_CHUNKS, .element = TFENC_ELEMENT_INT32,
        .dims = {TFENC_DIM_DOCUMENTS}, .handle = offsetof(tfenc_output, chunk_counts),
        .indexing = TFENC_BY_DOCUMENT, .rule = TFENC_RULE_POSITIVE},
    [TFENC_DATASET_LENGTHS] = {
        .name = "lengths", .presence = TFENC_WHEN_ALWAYS, .element = TFENC_ELEMENT_INT32,
        .dims = {TFENC_DIM_DOCUMENTS}, .fill_unwritten = 1,
        .handle = offsetof(tfenc_output, lengths), .indexing = TFENC_BY_DOCUMENT,
        .rule = TFENC_RULE_LENGTH},
    [TFENC_DATASET_TRUNCATED] = {
        .name = "truncated", .presence = TFENC_WHEN_ALWAYS, .older_files_lack = 1,
        .element = TFENC_ELEMENT_INT32, .dims = {TFENC_DIM_DOCUMENTS},
        .handle = offsetof(tfenc_output, truncated), .indexing = TFENC_BY_DOCUMENT,
        .rule = TFENC_RULE_NOT_NEGATIVE},
    [TFENC_DATASET_IDS] = {
        .name = "ids", .presence = TFENC_WHEN_IDS, .element = TFENC_ELEMENT_STRING,
        .dims = {TFENC_DIM_DOCUMENTS}, .handle = offsetof(tfenc_output, ids)},
    [TFENC_DATASET_DOCUMENT_SOURCE] = {
        .name = "document_source", .presence = TFENC_WHEN_SOURCE,
        .element = TFENC_ELEMENT_SOURCE, .dims = {TFENC_DIM_DOCUMENTS},
        .handle = offsetof(tfenc_output, document_source), .indexing = TFENC_BY_DOCUMENT,
        .rule = TFENC_RULE_SOURCE},
    /* The sparse rows, as CSR. */
    [TFENC_DATASET_SPARSE_INDPTR] = {
        .name = "sparse_indptr", .presence = TFENC_WHEN_COMPLETE_CSR, .every_head = 1,
        .maker = TFENC_MADE_AT_COMPLETION, .element = TFENC_ELEMENT_INT64,
        .dims = {TFENC_DIM_BOUNDARIES}, .indexing = TFENC_BY_BOUNDARY,
        .rule = TFENC_RULE_BOUNDARIES, .ends_at = TFENC_DIM_ENTRIES,
        .run = TFENC_RUN_AT_MOST_TOP_K},
    [TFENC_DATASET_SPARSE_VALUES] = {
        .name = "sparse_values", .presence = TFENC_WHEN_COMPLETE_CSR, .every_head = 1,
        .maker = TFENC_MADE_AT_COMPLETION, .element = TFENC_ELEMENT_FLOAT32,
        .dims = {TFENC_DIM_ENTRIES}, .indexing = TFENC_BY_RUN,
        .rule = TFENC_RULE_ABOVE_THRESHOLD, .bounds = TFENC_DATASET_SPARSE_INDPTR},
    [TFENC_DATASET_SPARSE_INDICES] = {
        .name = "sparse_indices", .presence = TFENC_WHEN_COMPLETE_CSR, .every_head = 1,
        .maker = TFENC_MADE_AT_COMPLETION, .element = TFENC_ELEMENT_INT32,
        .dims = {TFENC_DIM_ENTRIES}, .indexing = TFENC_BY_RUN, .rule = TFENC_RULE_COLUMN,
        .bounds = TFENC_DATASET_SPARSE_INDPTR},
    [TFENC_DATASET_VOCABULARY] = {
        .name = "vocabulary", .presence = TFENC_WHEN_VOCABULARY, .every_head = 1,
        .maker = TFENC_MADE_AT_COMPLETION, .element = TFENC_ELEMENT_STRING,
        .dims = {TFENC_DIM_D_MODEL}},
    /* The compact dtypes' buckets. */
    [TFENC_DATASET_QUANTIZATION_RANGES] = {
        .name = "quantization_ranges", .presence = TFENC_WHEN_RANGES,
        .maker = TFENC_MADE_AT_CREATION, .element = TFENC_ELEMENT_FLOAT32,
        .dims = {TFENC_DIM_TWO, TFENC_DIM_D_MODEL}, .indexing = TFENC_WHOLE,
        .rule = TFENC_RULE_RANGES},
    [TFENC_DATASET_QUANTIZATION_SAMPLE] = {
        .name = "quantization_sample", .presence = TFENC_WHEN_CALIBRATED,
        .maker = TFENC_MADE_AT_CREATION, .element = TFENC_ELEMENT_INT64,
        .dims = {TFENC_DIM_ANY}, .indexing = TFENC_WHOLE, .rule = TFENC_RULE_DOCUMENT_INDEX},
};

static int ranged(tfenc_output_dtype dtype)
{
    return dtype == TFENC_DTYPE_INT8 || dtype == TFENC_DTYPE_UINT8;
}

/* Whether the condition holds; *known: whether the facts tell (a file's
 * attributes do not say whether a job wrote ids, say). */
static int condition(const tfenc_output_dataset *d, const tfenc_output_facts *f, int *known)
{
    const tfenc_output_kind_entry *kind = f->kind;
    const int per_token = tfenc_output_per_token(kind);
    const int chunked = kind->chunks && f->chunks != TFENC_CHUNKS_OFF;
    *known = 1;
    switch (d->presence) {
    case TFENC_WHEN_ROWS:
        return kind->rows_dataset != NULL;
    case TFENC_WHEN_ROW_RUNS:
        return per_token || (chunked && f->chunks == TFENC_CHUNKS_EACH);
    case TFENC_WHEN_CHUNK_EACH:
        return chunked && f->chunks == TFENC_CHUNKS_EACH;
    case TFENC_WHEN_CHUNKS:
        return chunked;
    case TFENC_WHEN_TOKEN_IDS:
        *known = f->job_known;
        return per_token && (!f->job_known || f->token_ids);
    case TFENC_WHEN_IDS:
        *known = f->job_known;
        return !f->job_known || f->ids;
    case TFENC_WHEN_SOURCE:
        *known = f->job_known;
        return !f->job_known || f->document_source;
    case TFENC_WHEN_COMPLETE_CSR:
        *known = f->job_known || f->csr_due;
        return kind->rows == TFENC_ROWS_SPARSE;
    case TFENC_WHEN_VOCABULARY:
        *known = 0;
        return kind->rows == TFENC_ROWS_SPARSE;
    case TFENC_WHEN_RANGES:
        return kind->compact_dtypes && ranged(f->dtype);
    case TFENC_WHEN_CALIBRATED:
        *known = 0;
        return kind->compact_dtypes && ranged(f->dtype);
    case TFENC_WHEN_ALWAYS:
        break;
    }
    return 1;
}

tfenc_output_presence tfenc_output_dataset_presence(tfenc_output_dataset_id id,
                                                    const tfenc_output_facts *facts)
{
    const tfenc_output_dataset *d = &tfenc_output_datasets[id];
    int known = 1;
    if (facts->further_head && !d->every_head)
        return TFENC_ABSENT;
    if (!condition(d, facts, &known))
        return TFENC_ABSENT;
    return known && (facts->job_known || !d->older_files_lack) ? TFENC_REQUIRED
                                                                : TFENC_OPTIONAL;
}

const char *tfenc_output_dataset_name(tfenc_output_dataset_id id,
                                      const tfenc_output_facts *facts)
{
    if (id == TFENC_DATASET_ROWS)
        return facts->kind->rows_dataset;
    if (id == TFENC_DATASET_ROW_RUNS)
        return tfenc_output_per_token(facts->kind) ? facts->kind->offsets_dataset
                                                   : tfenc_output_datasets[id].name;
    return tfenc_output_datasets[id].name;
}

int64_t tfenc_output_dimension_value(const tfenc_output_facts *facts,
                                     tfenc_output_dimension dimension)
{
    switch (dimension) {
    case TFENC_DIM_DOCUMENTS:
        return facts->n_documents;
    case TFENC_DIM_BOUNDARIES:
        return facts->n_documents >= 0 ? facts->n_documents + 1 : -1;
    case TFENC_DIM_ROWS:
        return facts->rows;
    case TFENC_DIM_WIDTH:
        return facts->width;
    case TFENC_DIM_D_MODEL:
        return facts->d_model;
    case TFENC_DIM_ENTRIES:
        return facts->entries;
    case TFENC_DIM_TWO:
        return 2;
    case TFENC_DIM_NONE:
    case TFENC_DIM_ANY:
        break;
    }
    return -1;
}

int tfenc_output_dataset_rank(tfenc_output_dataset_id id)
{
    return tfenc_output_datasets[id].dims[1] != TFENC_DIM_NONE ? 2 : 1;
}

tfenc_output_run_agreement tfenc_output_run_agreement_of(tfenc_output_dataset_id id,
                                                         const tfenc_output_facts *facts)
{
    const tfenc_output_run_agreement run = tfenc_output_datasets[id].run;
    if (run != TFENC_RUN_OF_THE_ROWS)
        return run;
    if (!tfenc_output_per_token(facts->kind))
        return TFENC_RUN_IS_CHUNKS;
    return facts->kind->token_rows ? TFENC_RUN_IS_LENGTH : TFENC_RUN_AT_MOST_LENGTH;
}
