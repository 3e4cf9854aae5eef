/* The output kinds' table (kinds.h): what each kind accepts, writes,
 * refuses and says, one entry per kind. */
#include "output/kinds.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/names.h"
#include "output/multivector.h"
#include "output/quantize.h"
#include "output/sparse.h"

/* ------------------------------------------------------------ refusals */

/* Each kind's refusals in the order it checks them, so that a job with
 * two faults hears of the same one first whatever the kind. */
#define SPARSE_KEYS_REFUSED                                                                      \
    {TFENC_REFUSE_SPARSE_KEYS, TFENC_ERR_CONFIG, NULL,                                          \
     "[job] %s applies to sparse rows, but the model does not end in a sparse head (such as "   \
     "splade)", 0}
#define MULTIVECTOR_KEYS_REFUSED                                                                 \
    {TFENC_REFUSE_MULTIVECTOR_KEYS, TFENC_ERR_CONFIG, NULL,                                     \
     "applies to a model that ends in a multivector head (docs/output.md), and this one does "  \
     "not", 1}
#define OTHER_KIND_REFUSED {TFENC_REFUSE_OTHER_KIND, TFENC_ERR_CONFIG, NULL, "output_kind = %s", 0}
#define UNPOOLED_CHUNKS_REFUSED                                                                  \
    {TFENC_REFUSE_CHUNKS, TFENC_ERR_CONFIG, NULL,                                               \
     "[job] long_documents = chunk pools each chunk, but the model does not pool its output", 0}
#define UNPOOLED_OUTPUT_DIM_REFUSED                                                              \
    {TFENC_REFUSE_OUTPUT_DIM, TFENC_ERR_CONFIG, NULL,                                           \
     "[job] output_dim cuts pooled vectors, but the model does not pool its output", 0}
#define POOLED_OUTPUT_IDS_REFUSED                                                                \
    {TFENC_REFUSE_OUTPUT_IDS, TFENC_ERR_CONFIG, NULL,                                           \
     "[job] output_ids writes a token id beside each per-token row, but the model pools its "   \
     "output (end it with pooling mode = none, or no pooling)", 0}
#define CHUNK_SCORES_REFUSED(model)                                                              \
    {TFENC_REFUSE_CHUNK_KEY, TFENC_ERR_CONFIG, "chunk_scores",                                  \
     "aggregates the chunks' scores of a model that ends in a scores head, but the model "      \
     model " (leave chunk_scores out)", 0}
/* Late chunking pools token vectors over spans with the model's pooling
 * (run/late_chunks.h): a model that ends otherwise has none to pool. */
#define LATE_CHUNK_REFUSED                                                                       \
    {TFENC_REFUSE_LATE_CHUNK, TFENC_ERR_CONFIG, "long_documents",                               \
     "late_chunk pools each span's token vectors with the model's pooling, but the model %s", 0}
#define END_OF_REFUSALS {TFENC_REFUSE_END, 0, NULL, NULL, 0}

static const tfenc_output_kind_rule pooled_refusals[] = {
    SPARSE_KEYS_REFUSED, MULTIVECTOR_KEYS_REFUSED, OTHER_KIND_REFUSED, POOLED_OUTPUT_IDS_REFUSED,
    CHUNK_SCORES_REFUSED("pools its output; chunk_pooling aggregates its chunks"),
    END_OF_REFUSALS};

static const tfenc_output_kind_rule tokens_refusals[] = {
    SPARSE_KEYS_REFUSED, MULTIVECTOR_KEYS_REFUSED, OTHER_KIND_REFUSED, LATE_CHUNK_REFUSED,
    CHUNK_SCORES_REFUSED("does not pool its output"), UNPOOLED_CHUNKS_REFUSED,
    {TFENC_REFUSE_DTYPE_COMPACT, TFENC_ERR_CONFIG, NULL,
     "[job] output_dtype = %s applies to pooled vectors, but the model does not pool its "
     "output", 0},
    UNPOOLED_OUTPUT_DIM_REFUSED, END_OF_REFUSALS};

static const tfenc_output_kind_rule scores_refusals[] = {
    SPARSE_KEYS_REFUSED, MULTIVECTOR_KEYS_REFUSED,
    {TFENC_REFUSE_DTYPE_NOT_FLOAT32, TFENC_ERR_CONFIG, "output_dtype",
     "%s cannot apply: the model ends in a head that writes scores, which are written as "
     "float32 (leave output_dtype out)", 1},
    {TFENC_REFUSE_TOKEN_ROWS, TFENC_ERR_PLUGIN, NULL,
     "the model's last layer declares scores but leaves one row per token", 0},
    OTHER_KIND_REFUSED, LATE_CHUNK_REFUSED,
    {TFENC_REFUSE_CHUNK_KEY, TFENC_ERR_CONFIG, "chunk_pooling",
     "pools chunk vectors, but the model ends in a head that writes scores: chunk_scores = "
     "mean | max | first | all aggregates its chunks' scores", 0},
    {TFENC_REFUSE_OUTPUT_DIM, TFENC_ERR_CONFIG, NULL,
     "[job] output_dim cuts pooled vectors, but the model ends in a head that writes scores", 0},
    POOLED_OUTPUT_IDS_REFUSED, END_OF_REFUSALS};

static const tfenc_output_kind_rule sparse_refusals[] = {
    {TFENC_REFUSE_TOP_K_PAST_WIDTH, TFENC_ERR_CONFIG, NULL,
     "[job] sparse_top_k = %ld is larger than the vocabulary the model's sparse head writes "
     "(%d columns)", 0},
    LATE_CHUNK_REFUSED, CHUNK_SCORES_REFUSED("ends in a head that writes sparse rows"),
    {TFENC_REFUSE_CHUNKS, TFENC_ERR_CONFIG, NULL,
     "[job] long_documents = chunk pools each chunk's vectors, but the model ends in a head "
     "that writes sparse rows", 0},
    {TFENC_REFUSE_OUTPUT_DIM, TFENC_ERR_CONFIG, NULL,
     "[job] output_dim cuts pooled vectors, but the model ends in a head that writes sparse "
     "rows", 0},
    {TFENC_REFUSE_OUTPUT_IDS, TFENC_ERR_CONFIG, NULL,
     "[job] output_ids writes a token id beside each per-token row, but the model ends in a "
     "head that writes sparse rows", 0},
    MULTIVECTOR_KEYS_REFUSED,
    {TFENC_REFUSE_DTYPE_NOT_FLOAT32, TFENC_ERR_CONFIG, "output_dtype",
     "%s cannot apply: the model ends in a head that writes sparse rows, which are written as "
     "float32 (leave output_dtype out)", 1},
    OTHER_KIND_REFUSED, END_OF_REFUSALS};

static const tfenc_output_kind_rule vectors_refusals[] = {
    SPARSE_KEYS_REFUSED,
    {TFENC_REFUSE_DTYPE_COMPACT, TFENC_ERR_CONFIG, "output_dtype",
     "%s cannot apply: it compacts pooled vectors, and the model ends in a multivector head "
     "that writes a vector per token", 1},
    {TFENC_REFUSE_POOLED_ROWS, TFENC_ERR_PLUGIN, NULL,
     "the model's last layer declares vectors but leaves one row per sequence", 0},
    OTHER_KIND_REFUSED, LATE_CHUNK_REFUSED, CHUNK_SCORES_REFUSED("ends in a multivector head"),
    UNPOOLED_CHUNKS_REFUSED, UNPOOLED_OUTPUT_DIM_REFUSED, END_OF_REFUSALS};

/* ---------------------------------------------------------- attributes */

static const tfenc_output_kind_attribute no_attributes[] = {{NULL, 0}};
static const tfenc_output_kind_attribute scores_attributes[] = {
    {"id2label", offsetof(tfenc_output_options, labels)}, {NULL, 0}};
static const tfenc_output_kind_attribute vectors_attributes[] = {
    {"multivector_mode", offsetof(tfenc_output_options, multivector_mode)},
    {"multivector_marker", offsetof(tfenc_output_options, multivector_marker)},
    {"multivector_skiplist", offsetof(tfenc_output_options, multivector_skiplist)},
    {"multivector_query_padding", offsetof(tfenc_output_options, multivector_query_padding)},
    {"multivector_first_token", offsetof(tfenc_output_options, multivector_first_token)},
    {NULL, 0}};

/* -------------------------------------------------------- writer hooks */

static int write_pooled(tfenc_context *ctx, const tfenc_output_kind_write *call)
{
    const tfenc_batch *b = &call->microbatch->batch;
    return tfenc_output_write_pooled(ctx, call->output, b->n_seq, call->microbatch->indices, b->x);
}

/* A head's scores are the first `width` values of each row, packed. */
static int write_scores(tfenc_context *ctx, const tfenc_output_kind_write *call)
{
    const tfenc_batch *b = &call->microbatch->batch;
    for (int64_t j = 1; j < b->n_seq; j++)
        memmove(b->x + (size_t)j * (size_t)call->width, b->x + (size_t)j * (size_t)b->d_model,
                (size_t)call->width * sizeof *b->x);
    return write_pooled(ctx, call);
}

static int write_tokens(tfenc_context *ctx, const tfenc_output_kind_write *call)
{
    const tfenc_microbatch *m = call->microbatch;
    const tfenc_batch *b = &m->batch;
    return tfenc_output_write_tokens_with_ids(ctx, call->output, b->n_seq, m->indices,
                                              m->token_offsets, m->lengths, b->token_ids, b->x);
}

/* Room in a writer-owned buffer of int32 (the packed ids and counts). */
static int reserve_int32(tfenc_context *ctx, int32_t **buffer, size_t *capacity, size_t n)
{
    if (n <= *capacity)
        return TFENC_OK;
    int32_t *grown = realloc(*buffer, n * sizeof *grown);
    if (grown == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    *buffer = grown;
    *capacity = n;
    return TFENC_OK;
}

/* Multi-vector rows: the kept tokens' vectors packed, then written under
 * their documents' offsets (counted by the feeder with the same rule). */
static int write_vectors(tfenc_context *ctx, const tfenc_output_kind_write *call)
{
    const tfenc_microbatch *m = call->microbatch;
    const tfenc_batch *b = &m->batch;
    int status = reserve_int32(ctx, call->kept_ids, call->kept_ids_capacity, (size_t)b->n_tokens);
    if (status == TFENC_OK)
        status = reserve_int32(ctx, call->kept_counts, call->kept_counts_capacity,
                               (size_t)b->n_seq);
    if (status != TFENC_OK)
        return status;
    int32_t *ids = *call->kept_ids, *counts = *call->kept_counts;
    memcpy(ids, b->token_ids, (size_t)b->n_tokens * sizeof *ids);
    tfenc_multivector_pack(call->skiplist, b->x, ids, b->d_model, call->width, b->n_seq,
                           b->seq_start, counts);
    return tfenc_output_write_tokens_with_ids(ctx, call->output, b->n_seq, m->indices,
                                              m->token_offsets, counts, ids, b->x);
}

static int write_sparse(tfenc_context *ctx, const tfenc_output_kind_write *call)
{
    return tfenc_sparse_log_append(ctx, call->sparse_log, call->sparse_rows,
                                   call->microbatch->indices);
}

/* ------------------------------------------------------- descriptions */

/* Text grown by printf-like pieces; NULL once memory ran out. */
typedef struct text {
    char *s;
    size_t length, capacity;
} text;

static void add(text *t, const char *format, ...) TFENC_PRINTF(2, 3);

static void add(text *t, const char *format, ...)
{
    if (t->s == NULL && t->capacity > 0)
        return;
    va_list args;
    va_start(args, format);
    int n = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (n < 0)
        return;
    if (t->length + (size_t)n + 1 > t->capacity) {
        size_t capacity = 2 * (t->length + (size_t)n + 1);
        char *grown = realloc(t->s, capacity);
        if (grown == NULL) {
            free(t->s);
            t->s = NULL;
            t->capacity = 1;
            return;
        }
        t->s = grown;
        t->capacity = capacity;
    }
    va_start(args, format);
    vsnprintf(t->s + t->length, t->capacity - t->length, format, args);
    va_end(args);
    t->length += (size_t)n;
}

static const char *or_unknown(const char *value)
{
    return value != NULL ? value : "(not recorded)";
}

static const char *or_none(const char *value)
{
    return value != NULL && value[0] != '\0' ? value : "(none)";
}

/* --status: the token rows of a file that records them. */
static void add_token_rows(text *t, const tfenc_output_summary *s)
{
    if (s->n_rows >= 0)
        add(t, ", %lld token rows", (long long)s->n_rows);
}

static char *dense_plan(const tfenc_output_summary *s, const char *kind)
{
    text t = {0};
    add(&t, "%s (%s, %s%s)", s->path, kind, s->dtype,
        s->compact     ? ""
        : s->unit_norm ? ", rows of unit length"
                       : ", rows not of unit length: the model does not normalise them");
    return t.s;
}

static char *dense_status(const tfenc_output_summary *s, const char *kind)
{
    text t = {0};
    add(&t, "%s, %s, d_model %lld", kind, or_unknown(s->dtype), (long long)s->width);
    add_token_rows(&t, s);
    return t.s;
}

static char *pooled_plan(const tfenc_output_summary *s)
{
    return dense_plan(s, "pooled");
}

static char *pooled_status(const tfenc_output_summary *s)
{
    return dense_status(s, "pooled");
}

static char *tokens_plan(const tfenc_output_summary *s)
{
    return dense_plan(s, "tokens");
}

static char *tokens_status(const tfenc_output_summary *s)
{
    return dense_status(s, "tokens");
}

static char *scores_plan(const tfenc_output_summary *s)
{
    text t = {0};
    add(&t, "%s (scores [%lld, %lld] of the model's head, %s; id2label %s)", s->path,
        (long long)s->n_documents, (long long)s->width, s->dtype,
        s->labels != NULL ? s->labels : "(none)");
    return t.s;
}

static char *scores_status(const tfenc_output_summary *s)
{
    text t = {0};
    add(&t, "scores [%lld documents, %lld labels], %s, id2label %s", (long long)s->n_documents,
        (long long)s->width, or_unknown(s->dtype), or_none(s->labels));
    add_token_rows(&t, s);
    return t.s;
}

/* Which values of each row a sparse job keeps. */
static void add_sparse_limits(text *t, const tfenc_output_summary *s, const char *largest)
{
    if (s->sparse_top_k > 0)
        add(t, largest, s->sparse_top_k);
    else
        add(t, "every value");
    add(t, " above %g of each row", s->sparse_threshold);
}

static char *sparse_plan(const tfenc_output_summary *s)
{
    text t = {0};
    add(&t, "%s (sparse [%lld, %lld] over the vocabulary, CSR: sparse_indptr, sparse_indices, "
        "sparse_values; ", s->path, (long long)s->n_documents, (long long)s->width);
    add_sparse_limits(&t, s, "the %ld largest values");
    add(&t, ")");
    return t.s;
}

static char *sparse_status(const tfenc_output_summary *s)
{
    text t = {0};
    add(&t, "sparse [%lld documents, %lld columns%s], CSR sparse_indptr, sparse_indices, "
        "sparse_values: ", (long long)s->n_documents, (long long)s->width,
        s->has_vocabulary ? ", named by vocabulary" : "");
    if (s->sparse_values >= 0) {
        add(&t, "%lld values (%.1f a document), ", (long long)s->sparse_values,
            s->n_documents > 0 ? (double)s->sparse_values / (double)s->n_documents : 0.0);
        add_sparse_limits(&t, s, "the %ld largest");
    } else
        add(&t, "written when the job completes (the rows wait in %s.sparse-*)", s->path);
    add_token_rows(&t, s);
    return t.s;
}

static char *vectors_plan(const tfenc_output_summary *s)
{
    text t = {0};
    add(&t, "%s (vectors [%lld, %lld] of the model's multi-vector head, %s, and offsets [%lld])",
        s->path, (long long)s->n_rows, (long long)s->width, s->dtype,
        (long long)s->n_documents + 1);
    return t.s;
}

static char *vectors_status(const tfenc_output_summary *s)
{
    text t = {0};
    add(&t, "vectors (multi-vector, unit length; document i is rows offsets[i]:offsets[i+1]) "
        "[%lld rows, width %lld], %s, %s mode, marker %s, skiplist %s", (long long)s->n_rows,
        (long long)s->width, or_unknown(s->dtype), or_unknown(s->multivector_mode),
        or_none(s->multivector_marker),
        s->multivector_skiplist != NULL && s->multivector_skiplist[0] != '\0'
            ? "string.punctuation's tokens left out"
            : "(none: every token kept)");
    if (s->multivector_first_token != NULL && strcmp(s->multivector_first_token, "skipped") == 0)
        add(&t, ", each document's first token left out");
    /* Which ColBERT query encoding the rows are: the same model gives
     * other vectors either way (attend_to_mask_tokens). */
    const char *padding = s->multivector_query_padding != NULL ? s->multivector_query_padding : "";
    if (strcmp(padding, "masked") == 0)
        add(&t, ", [MASK] padding not attended to");
    else if (strcmp(padding, "attended") == 0)
        add(&t, ", [MASK] padding attended to");
    return t.s;
}

/* --------------------------------------------------------------- table */

const tfenc_output_kind_entry tfenc_output_kinds[TFENC_OUTPUT_AUTO] = {
    [TFENC_OUTPUT_POOLED] = {
        .id = TFENC_OUTPUT_POOLED, .name = "pooled",
        .layer = TFENC_LAYER_OUTPUT_HIDDEN, .pools = 1, .model_says = "pools its output",
        .rows = TFENC_ROWS_PER_DOCUMENT, .rows_dataset = "embeddings",
        .telling_dataset = "embeddings",
        .compact_dtypes = 1, .chunks = 1, .output_dim = 1, .dense = 1, .unit_rows = 1,
        .refusals = pooled_refusals, .attributes = no_attributes, .write = write_pooled,
        .describe_plan = pooled_plan, .describe_status = pooled_status},
    [TFENC_OUTPUT_TOKENS] = {
        .id = TFENC_OUTPUT_TOKENS, .name = "tokens",
        .layer = TFENC_LAYER_OUTPUT_HIDDEN, .pools = 0, .model_says = "does not pool its output",
        .rows = TFENC_ROWS_PER_TOKEN, .rows_dataset = "hidden", .offsets_dataset = "offsets",
        .telling_dataset = "hidden",
        .token_ids = 1, .token_rows = 1, .dense = 1, .unit_rows = 1,
        .refusals = tokens_refusals, .attributes = no_attributes, .write = write_tokens,
        .describe_plan = tokens_plan, .describe_status = tokens_status},
    [TFENC_OUTPUT_SCORES] = {
        .id = TFENC_OUTPUT_SCORES, .name = "scores",
        .layer = TFENC_LAYER_OUTPUT_SCORES, .pools = 1,
        .model_says = "ends in a head that writes scores",
        .rows = TFENC_ROWS_PER_DOCUMENT, .rows_dataset = "scores", .telling_dataset = "scores",
        .chunks = 1, .dense = 1, .head_width = 1, .has_labels = 1, .gated_by_scores = 1,
        .refusals = scores_refusals, .attributes = scores_attributes, .write = write_scores,
        .describe_plan = scores_plan, .describe_status = scores_status},
    [TFENC_OUTPUT_SPARSE] = {
        .id = TFENC_OUTPUT_SPARSE, .name = "sparse",
        .layer = TFENC_LAYER_OUTPUT_SPARSE, .pools = 1,
        .model_says = "ends in a head that writes sparse rows",
        .rows = TFENC_ROWS_SPARSE, .telling_dataset = "sparse_indptr",
        .head_width = 1, .projects_vocabulary = 1,
        .refusals = sparse_refusals, .attributes = no_attributes, .write = write_sparse,
        .describe_plan = sparse_plan, .describe_status = sparse_status},
    [TFENC_OUTPUT_VECTORS] = {
        .id = TFENC_OUTPUT_VECTORS, .name = "vectors",
        .layer = TFENC_LAYER_OUTPUT_VECTORS, .pools = 0,
        .model_says = "ends in a multi-vector head that writes vectors",
        .rows = TFENC_ROWS_PER_TOKEN, .rows_dataset = "vectors", .offsets_dataset = "offsets",
        .telling_dataset = "vectors",
        .token_ids = 1, .dense = 1, .unit_rows = 1, .head_width = 1,
        .refusals = vectors_refusals, .attributes = vectors_attributes, .write = write_vectors,
        .describe_plan = vectors_plan, .describe_status = vectors_status},
};

const char *const tfenc_output_kind_names[] = {"pooled", "tokens", "scores", "sparse",
                                                "vectors", "auto", NULL};

_Static_assert(sizeof tfenc_output_kind_names / sizeof tfenc_output_kind_names[0] ==
                   TFENC_OUTPUT_AUTO + 2,
               "a name for every kind, then auto and the end");

/* ------------------------------------------------------------- lookups */

int tfenc_output_kind_from_name(const char *name, tfenc_output_kind *kind)
{
    int index = tfenc_name_index(tfenc_output_kind_names, name);
    if (index < 0 || index >= TFENC_OUTPUT_AUTO)
        return TFENC_ERR_NOT_FOUND;
    *kind = (tfenc_output_kind)index;
    return TFENC_OK;
}

const char *tfenc_output_kind_name(tfenc_output_kind kind)
{
    return tfenc_name_of(tfenc_output_kind_names, TFENC_OUTPUT_AUTO + 1, kind);
}

const tfenc_output_kind_entry *tfenc_output_kind_entry_of(tfenc_output_kind kind)
{
    return (int)kind >= 0 && kind < TFENC_OUTPUT_AUTO ? &tfenc_output_kinds[kind] : NULL;
}

const tfenc_output_kind_entry *tfenc_output_kind_named(const char *name)
{
    tfenc_output_kind kind;
    return name != NULL && tfenc_output_kind_from_name(name, &kind) == TFENC_OK
               ? &tfenc_output_kinds[kind]
               : NULL;
}

const tfenc_output_kind_entry *tfenc_output_kind_from_datasets(int (*exists)(void *user,
                                                                              const char *name),
                                                                void *user)
{
    /* Pooled's embeddings last: the other kinds never have them. */
    for (int i = TFENC_OUTPUT_AUTO - 1; i >= 0; i--)
        if (exists(user, tfenc_output_kinds[i].telling_dataset))
            return &tfenc_output_kinds[i];
    return &tfenc_output_kinds[TFENC_OUTPUT_POOLED];
}

/* ------------------------------------------------------------ decision */

const tfenc_output_kind_entry *tfenc_output_kind_of_layer(tfenc_layer_output_kind declared,
                                                          int pools)
{
    const tfenc_output_kind_entry *first = NULL;
    for (int i = 0; i < TFENC_OUTPUT_AUTO; i++) {
        const tfenc_output_kind_entry *e = &tfenc_output_kinds[i];
        if (e->layer != declared)
            continue;
        if (first == NULL)
            first = e;
        if (e->pools == (pools != 0))
            return e;
    }
    return first;
}

/* A condition whose refusal is the rule's message as it stands. */
static int plain_refusal(int holds, const tfenc_output_kind_rule *rule, char *message,
                         size_t size)
{
    if (holds)
        snprintf(message, size, "%s", rule->message);
    return holds;
}

/* Whether the condition holds for the job, and the refusal if so. */
static int refused(const tfenc_output_kind_entry *e, const tfenc_output_kind_rule *rule,
                   const tfenc_output_kind_request *q, tfenc_output_kind_refusal *refusal)
{
    char *m = refusal->message;
    const size_t size = sizeof refusal->message;
    const char *dtype = tfenc_name_of(tfenc_output_dtype_names, TFENC_DTYPE_COUNT, q->dtype);
    refusal->status = rule->status;
    refusal->key = rule->key;
    switch (rule->condition) {
    case TFENC_REFUSE_SPARSE_KEYS:
        if (q->sparse_top_k <= 0 && q->sparse_threshold <= 0)
            return 0;
        snprintf(m, size, rule->message, q->sparse_top_k > 0 ? "sparse_top_k" : "sparse_threshold");
        return 1;
    case TFENC_REFUSE_TOP_K_PAST_WIDTH:
        if (q->sparse_top_k <= q->width)
            return 0;
        snprintf(m, size, rule->message, q->sparse_top_k, q->width);
        return 1;
    case TFENC_REFUSE_MULTIVECTOR_KEYS:
        if (q->multivector_key == NULL)
            return 0;
        refusal->key = q->multivector_key;
        snprintf(m, size, "%s", rule->message);
        return 1;
    case TFENC_REFUSE_DTYPE_NOT_FLOAT32:
    case TFENC_REFUSE_DTYPE_COMPACT:
        if (rule->condition == TFENC_REFUSE_DTYPE_NOT_FLOAT32 ? q->dtype == TFENC_DTYPE_FLOAT32
                                                               : !tfenc_dtype_is_compact(q->dtype))
            return 0;
        snprintf(m, size, rule->message, dtype);
        return 1;
    case TFENC_REFUSE_POOLED_ROWS:
    case TFENC_REFUSE_TOKEN_ROWS:
        if ((rule->condition == TFENC_REFUSE_POOLED_ROWS) != (q->pools != 0))
            return 0;
        snprintf(m, size, "%s", rule->message);
        return 1;
    case TFENC_REFUSE_OTHER_KIND:
        if (q->wanted == TFENC_OUTPUT_AUTO || q->wanted == e->id)
            return 0;
        snprintf(m, size, "output_kind = %s but the model %s", tfenc_output_kind_name(q->wanted),
                 e->model_says);
        return 1;
    case TFENC_REFUSE_CHUNKS:
        return plain_refusal(q->chunks != TFENC_CHUNKS_OFF, rule, m, size);
    case TFENC_REFUSE_CHUNK_KEY:
        return plain_refusal(q->chunk_key != NULL && strcmp(q->chunk_key, rule->key) == 0, rule,
                             m, size);
    case TFENC_REFUSE_LATE_CHUNK:
        if (!q->late_chunk)
            return 0;
        snprintf(m, size, rule->message, e->model_says);
        return 1;
    case TFENC_REFUSE_OUTPUT_DIM:
        return plain_refusal(q->output_dim > 0, rule, m, size);
    case TFENC_REFUSE_OUTPUT_IDS:
        return plain_refusal(q->output_ids, rule, m, size);
    case TFENC_REFUSE_END:
        break;
    }
    return 0;
}

int tfenc_output_kind_decide(const tfenc_output_kind_request *request,
                             const tfenc_output_kind_entry **kind,
                             tfenc_output_kind_refusal *refusal)
{
    const tfenc_output_kind_entry *e = tfenc_output_kind_of_layer(request->declared, request->pools);
    *kind = e;
    if (e == NULL) {
        refusal->status = TFENC_ERR_PLUGIN;
        refusal->key = NULL;
        snprintf(refusal->message, sizeof refusal->message,
                 "the model's last layer declares an output kind (%d) this tfenc does not know",
                 (int)request->declared);
        return refusal->status;
    }
    for (const tfenc_output_kind_rule *rule = e->refusals; rule->condition != TFENC_REFUSE_END;
         rule++)
        if (refused(e, rule, request, refusal))
            return refusal->status;
    return TFENC_OK;
}

int tfenc_output_kind_refuse_for_head(const tfenc_output_kind_request *request,
                                      tfenc_output_kind_refusal *refusal)
{
    const tfenc_output_kind_entry *e = tfenc_output_kind_of_layer(request->declared, 1);
    for (const tfenc_output_kind_rule *rule = e != NULL ? e->refusals : NULL;
         rule != NULL && rule->condition != TFENC_REFUSE_END; rule++)
        if (rule->head && refused(e, rule, request, refusal))
            return refusal->status;
    return TFENC_OK;
}
