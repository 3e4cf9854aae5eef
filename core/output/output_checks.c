/* The description of an output file's attributes and datasets, kind by
 * kind, and the checks that hold a file to it (output_checks.h). */
#include "output/output_checks.h"
#include "output/corpus_shards.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "base/precision.h"
#include "job/id2label.h"
#include "output/kinds.h"
#include "output/output.h"
#include "output/output_internal.h"

/* Index datasets are read this many elements at a time: bounded memory
 * for any corpus. */
#define ELEMENTS_PER_READ ((hsize_t)1 << 16)

/* Rows of a pooled, scores or multi-vector output are at most [model]
 * d_model wide; only a sparse output's columns (a vocabulary) are more. */
#define WIDEST_DENSE_ROW 65536

#define KIND(kind) (1u << (kind))
#define EVERY_KIND                                                                         \
    (KIND(TFENC_OUTPUT_POOLED) | KIND(TFENC_OUTPUT_TOKENS) | KIND(TFENC_OUTPUT_SCORES) |   \
     KIND(TFENC_OUTPUT_SPARSE) | KIND(TFENC_OUTPUT_VECTORS))
#define PER_TOKEN (KIND(TFENC_OUTPUT_TOKENS) | KIND(TFENC_OUTPUT_VECTORS))
/* The kinds whose documents may be chunked (pooled vectors, a head's scores). */
#define CHUNKED (KIND(TFENC_OUTPUT_POOLED) | KIND(TFENC_OUTPUT_SCORES))

/* ============================================================ the description */

/* ---------------------------------------------------------- attributes */

typedef enum attribute_domain {
    DOMAIN_TEXT,          /* any string */
    DOMAIN_CHOICE,        /* one of `choices` (its first n_choices, when given) */
    DOMAIN_INTEGER,       /* one integer in minimum..maximum */
    DOMAIN_FLOAT,         /* one finite value in low..high */
    DOMAIN_FLOAT_ARRAY,   /* d_model finite values */
    DOMAIN_DIGEST,        /* a SHA-256 as 64 hex digits, or "" where there is nothing to hash */
    DOMAIN_FILE_DIGESTS,  /* lines "FILE SHA256" (plugins_sha256) */
    DOMAIN_ID2LABEL,      /* "" or a JSON object naming d_model labels (job/id2label.h) */
    DOMAIN_TOKEN_IDS,     /* non-negative integers separated by spaces, or "" */
    DOMAIN_LAYOUT,        /* "ranks=R data_parallel=D pipeline_stages=S", words KEY=VALUE */
    DOMAIN_CORPUS_SHARDS  /* the table of the corpus's files (read_corpus_shards) */
} attribute_domain;

typedef struct attribute_spec {
    const char *name;
    attribute_domain domain;
    const char *const *choices;
    int n_choices; /* 0: every entry of `choices` up to its NULL */
    int64_t minimum, maximum;
    double low, high;
} attribute_spec;

static const char *const multivector_modes[] = {"document", "query", NULL};
static const char *const query_paddings[] = {"", "attended", "masked", NULL};
static const char *const first_tokens[] = {"", "kept", "skipped", NULL};

/* Every root attribute a tfenc output has (output/output.h), in the order
 * they are checked: `complete` first, since a reader trusts it first. */
static const attribute_spec attributes[] = {
    {.name = "complete", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = 1},
    {.name = "n_documents", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT64_MAX},
    {.name = "d_model", .domain = DOMAIN_INTEGER, .minimum = 1, .maximum = INT32_MAX},
    {.name = "n_tokens", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT64_MAX},
    {.name = "n_chunks", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT64_MAX},
    {.name = "sparse_top_k", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = INT32_MAX},
    {.name = "output_kind", .domain = DOMAIN_CHOICE, .choices = tfenc_output_kind_names,
     .n_choices = TFENC_OUTPUT_AUTO},
    {.name = "dtype", .domain = DOMAIN_CHOICE, .choices = tfenc_output_dtype_names,
     .n_choices = TFENC_DTYPE_COUNT},
    {.name = "compression", .domain = DOMAIN_CHOICE, .choices = tfenc_output_compression_names},
    {.name = "chunks", .domain = DOMAIN_CHOICE, .choices = tfenc_output_chunks_names},
    {.name = "precision", .domain = DOMAIN_CHOICE, .choices = tfenc_precision_names,
     .n_choices = TFENC_PRECISION_COUNT},
    {.name = "multivector_mode", .domain = DOMAIN_CHOICE, .choices = multivector_modes},
    {.name = "multivector_query_padding", .domain = DOMAIN_CHOICE, .choices = query_paddings},
    {.name = "multivector_skiplist", .domain = DOMAIN_TOKEN_IDS},
    {.name = "multivector_first_token", .domain = DOMAIN_CHOICE, .choices = first_tokens},
    {.name = "multivector_marker", .domain = DOMAIN_TEXT},
    {.name = "id2label", .domain = DOMAIN_ID2LABEL},
    {.name = "sparse_threshold", .domain = DOMAIN_FLOAT, .low = 0.0, .high = INFINITY},
    {.name = "precision_sample_min_cosine", .domain = DOMAIN_FLOAT, .low = -1.0, .high = 1.0},
    {.name = "quantization_min", .domain = DOMAIN_FLOAT_ARRAY},
    {.name = "quantization_max", .domain = DOMAIN_FLOAT_ARRAY},
    {.name = "quantization_ranges_source", .domain = DOMAIN_TEXT},
    {.name = "weights_sha256", .domain = DOMAIN_DIGEST},
    {.name = "corpus_fingerprint", .domain = DOMAIN_DIGEST},
    {.name = "vocabulary_fingerprint", .domain = DOMAIN_DIGEST},
    {.name = "plugins_sha256", .domain = DOMAIN_FILE_DIGESTS},
    {.name = "corpus_shards", .domain = DOMAIN_CORPUS_SHARDS},
    {.name = "layout", .domain = DOMAIN_LAYOUT},
    {.name = "tfenc_version", .domain = DOMAIN_TEXT},
    {.name = "created", .domain = DOMAIN_TEXT},
    {.name = "job", .domain = DOMAIN_TEXT},
    {.name = "job_settings", .domain = DOMAIN_TEXT},
    {.name = "job_path", .domain = DOMAIN_TEXT},
    {.name = "working_directory", .domain = DOMAIN_TEXT},
    {.name = "job_overrides", .domain = DOMAIN_TEXT},
    {.name = "precision_steps", .domain = DOMAIN_TEXT},
    {.name = "kernels", .domain = DOMAIN_TEXT},
    {.name = "path_choices", .domain = DOMAIN_TEXT},
    {.name = "run_summaries", .domain = DOMAIN_TEXT},
    {.name = "unit_norm", .domain = DOMAIN_INTEGER, .minimum = 0, .maximum = 1},
};

/* ------------------------------------------------------------ datasets */

/* A dimension, as the attributes give it. */
typedef enum dimension {
    DIM_NONE,       /* (rank 1: no second dimension) */
    DIM_DOCUMENTS,  /* n_documents */
    DIM_BOUNDARIES, /* n_documents + 1 */
    DIM_ROWS,       /* rows of the kind: n_tokens (tokens, vectors), n_chunks (chunks = each),
                     * else n_documents */
    DIM_WIDTH,      /* a row's values: d_model, or d_model / 8 packed signs */
    DIM_D_MODEL,    /* d_model (the ranges' width, a sparse output's vocabulary) */
    DIM_ENTRIES,    /* a sparse output's entries: the rows of sparse_values */
    DIM_TWO         /* 2: minimum and maximum */
} dimension;

typedef enum type_class {
    CLASS_ROW_VALUES, /* floating-point, or integer for the compact dtypes */
    CLASS_INTEGER,
    CLASS_FLOAT,
    CLASS_STRING,
    CLASS_SOURCE /* compound {shard, line} */
} type_class;

typedef enum presence {
    ALWAYS,          /* every output of its kinds */
    OPTIONAL,        /* with a job option, or absent from older files */
    WITH_CHUNK_EACH, /* chunks = each */
    WITH_CHUNKS,     /* chunks = mean or each */
    WITH_RANGES,     /* dtype int8 or uint8 */
    WITH_CALIBRATION, /* dtype int8 or uint8 whose ranges came from the corpus: optional */
    ONCE_COMPLETE    /* written when the job completes: then all of them, before none */
} presence;

/* Which of a dataset's elements belong to document i. */
typedef enum indexing {
    UNREAD,      /* rows and strings: only the shape is checked */
    BY_DOCUMENT, /* element i */
    BY_BOUNDARY, /* elements i and i + 1 bound the document's run of rows or entries */
    BY_RUN,      /* the document's run, as the dataset named in `bounds` gives it */
    WHOLE        /* a small dataset held to its rule as a whole */
} indexing;

typedef enum content_rule {
    RULE_NONE,
    RULE_LENGTH,          /* -1 (not written yet) or a token count >= 1; 0 too where the
                           * job encodes documents without tokens (empty_zeros) */
    RULE_NOT_NEGATIVE,    /* >= 0 */
    RULE_POSITIVE,        /* >= 1 */
    RULE_BOUNDARIES,      /* from 0, never decreasing, ends at `ends_at`; runs agree (`run`) */
    RULE_SOURCE,          /* a file of corpus_shards whose rows hold the document; line >= 0 */
    RULE_COLUMN,          /* a column of the vocabulary (0..d_model-1), ascending in a row */
    RULE_ABOVE_THRESHOLD, /* finite and above sparse_threshold */
    RULE_RANGES,          /* finite, each dimension's minimum <= maximum */
    RULE_DOCUMENT_INDEX   /* a document: 0..n_documents-1 */
} content_rule;

/* What a document's run (RULE_BOUNDARIES) must agree with. */
typedef enum run_agreement {
    RUN_ANY,
    RUN_IS_LENGTH,       /* a row per token: hidden */
    RUN_AT_MOST_LENGTH,  /* a row per token kept: vectors (skiplist tokens left out) */
    RUN_IS_CHUNKS,       /* a row per chunk: the document's entry of `chunks` */
    RUN_AT_MOST_TOP_K    /* CSR entries: at most sparse_top_k (when set) and the columns */
} run_agreement;

typedef struct dataset_spec {
    const char *name;
    unsigned kinds; /* KIND() of the output kinds that have it */
    presence presence;
    type_class type;
    int rank;
    dimension dims[2];
    indexing indexing;
    content_rule rule;
    dimension ends_at;   /* RULE_BOUNDARIES: the last element's value */
    run_agreement run;   /* RULE_BOUNDARIES */
    const char *bounds;  /* BY_RUN: the BY_BOUNDARY dataset giving the document's run */
} dataset_spec;

/* Every dataset of a tfenc output (output/output.h, output/sparse.h), in
 * the order they are checked: shapes in this order, then the contents
 * document by document in this order (a run's bounds before the run). */
static const dataset_spec datasets[] = {
    /* The rows: only their shape. */
    {.name = "embeddings", .kinds = KIND(TFENC_OUTPUT_POOLED), .presence = ALWAYS,
     .type = CLASS_ROW_VALUES, .rank = 2, .dims = {DIM_ROWS, DIM_WIDTH}},
    {.name = "scores", .kinds = KIND(TFENC_OUTPUT_SCORES), .presence = ALWAYS,
     .type = CLASS_ROW_VALUES, .rank = 2, .dims = {DIM_ROWS, DIM_WIDTH}},
    {.name = "hidden", .kinds = KIND(TFENC_OUTPUT_TOKENS), .presence = ALWAYS,
     .type = CLASS_ROW_VALUES, .rank = 2, .dims = {DIM_ROWS, DIM_WIDTH}},
    {.name = "vectors", .kinds = KIND(TFENC_OUTPUT_VECTORS), .presence = ALWAYS,
     .type = CLASS_ROW_VALUES, .rank = 2, .dims = {DIM_ROWS, DIM_WIDTH}},
    /* One entry per document. */
    {.name = "lengths", .kinds = EVERY_KIND, .presence = ALWAYS,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_DOCUMENTS},
     .indexing = BY_DOCUMENT, .rule = RULE_LENGTH},
    {.name = "document_source", .kinds = EVERY_KIND, .presence = OPTIONAL,
     .type = CLASS_SOURCE, .rank = 1, .dims = {DIM_DOCUMENTS},
     .indexing = BY_DOCUMENT, .rule = RULE_SOURCE},
    {.name = "truncated", .kinds = EVERY_KIND, .presence = OPTIONAL,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_DOCUMENTS},
     .indexing = BY_DOCUMENT, .rule = RULE_NOT_NEGATIVE},
    {.name = "ids", .kinds = EVERY_KIND, .presence = OPTIONAL,
     .type = CLASS_STRING, .rank = 1, .dims = {DIM_DOCUMENTS}},
    {.name = "chunks", .kinds = CHUNKED, .presence = WITH_CHUNKS,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_DOCUMENTS},
     .indexing = BY_DOCUMENT, .rule = RULE_POSITIVE},
    /* Where each document's rows are, and what they hold per row. */
    {.name = "offsets", .kinds = KIND(TFENC_OUTPUT_TOKENS), .presence = ALWAYS,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_BOUNDARIES},
     .indexing = BY_BOUNDARY, .rule = RULE_BOUNDARIES, .ends_at = DIM_ROWS,
     .run = RUN_IS_LENGTH},
    {.name = "offsets", .kinds = KIND(TFENC_OUTPUT_VECTORS), .presence = ALWAYS,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_BOUNDARIES},
     .indexing = BY_BOUNDARY, .rule = RULE_BOUNDARIES, .ends_at = DIM_ROWS,
     .run = RUN_AT_MOST_LENGTH},
    {.name = "chunk_offsets", .kinds = CHUNKED, .presence = WITH_CHUNK_EACH,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_BOUNDARIES},
     .indexing = BY_BOUNDARY, .rule = RULE_BOUNDARIES, .ends_at = DIM_ROWS,
     .run = RUN_IS_CHUNKS},
    {.name = "token_ids", .kinds = PER_TOKEN, .presence = OPTIONAL,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_ROWS},
     .indexing = BY_RUN, .rule = RULE_NOT_NEGATIVE, .bounds = "offsets"},
    {.name = "chunk_starts", .kinds = CHUNKED, .presence = WITH_CHUNK_EACH,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_ROWS},
     .indexing = BY_RUN, .rule = RULE_NOT_NEGATIVE, .bounds = "chunk_offsets"},
    /* The sparse rows, as CSR. */
    {.name = "sparse_indptr", .kinds = KIND(TFENC_OUTPUT_SPARSE), .presence = ONCE_COMPLETE,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_BOUNDARIES},
     .indexing = BY_BOUNDARY, .rule = RULE_BOUNDARIES, .ends_at = DIM_ENTRIES,
     .run = RUN_AT_MOST_TOP_K},
    {.name = "sparse_values", .kinds = KIND(TFENC_OUTPUT_SPARSE), .presence = ONCE_COMPLETE,
     .type = CLASS_FLOAT, .rank = 1, .dims = {DIM_ENTRIES},
     .indexing = BY_RUN, .rule = RULE_ABOVE_THRESHOLD, .bounds = "sparse_indptr"},
    {.name = "sparse_indices", .kinds = KIND(TFENC_OUTPUT_SPARSE), .presence = ONCE_COMPLETE,
     .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_ENTRIES},
     .indexing = BY_RUN, .rule = RULE_COLUMN, .bounds = "sparse_indptr"},
    {.name = "vocabulary", .kinds = KIND(TFENC_OUTPUT_SPARSE), .presence = OPTIONAL,
     .type = CLASS_STRING, .rank = 1, .dims = {DIM_D_MODEL}},
    /* The compact dtypes' buckets. */
    {.name = "quantization_ranges", .kinds = KIND(TFENC_OUTPUT_POOLED), .presence = WITH_RANGES,
     .type = CLASS_FLOAT, .rank = 2, .dims = {DIM_TWO, DIM_D_MODEL},
     .indexing = WHOLE, .rule = RULE_RANGES},
    {.name = "quantization_sample", .kinds = KIND(TFENC_OUTPUT_POOLED),
     .presence = WITH_CALIBRATION, .type = CLASS_INTEGER, .rank = 1, .dims = {DIM_NONE},
     .indexing = WHOLE, .rule = RULE_DOCUMENT_INDEX},
};

int tfenc_output_names_dataset(const char *name)
{
    /* The groups besides the table's datasets: the calibration, and the
     * further heads' /outputs. */
    if (strcmp(name, TFENC_CALIBRATION_GROUP) == 0 || strcmp(name, "outputs") == 0)
        return 1;
    for (size_t i = 0; i < sizeof datasets / sizeof datasets[0]; i++)
        if (strcmp(datasets[i].name, name) == 0)
            return 1;
    return 0;
}

#define N_DATASETS (sizeof datasets / sizeof datasets[0])

/* ============================================================== the checks */

/* The corpus's files: the documents each holds (corpus_shards). */
typedef struct shard_rows {
    int64_t first, documents; /* documents -1: not recorded */
} shard_rows;

typedef struct shard_table {
    int present;
    int64_t n;
    shard_rows *rows;
} shard_table;

/* Reads a dataset in blocks of ELEMENTS_PER_READ elements, the block that
 * holds the element asked for: sequential reads touch each block once. */
typedef struct block_reader {
    int open;
    hid_t dataset, space, memory_type;
    size_t element_size;
    hsize_t length;      /* elements of the dataset */
    hsize_t first, held; /* the block held: elements first .. first + held - 1 */
    unsigned char *block;
} block_reader;

/* A run's bounds for the current document, as its BY_BOUNDARY dataset gave them. */
typedef struct run_bounds {
    int known;
    int64_t first, end;
} run_bounds;

typedef struct check {
    tfenc_context *ctx;
    const char *path;
    hid_t file;
    int status; /* the first failure; every step stops once it is set */
    int complete;
    tfenc_output_kind kind;
    const tfenc_output_kind_entry *entry; /* the kinds' table's entry of `kind` */
    tfenc_output_dtype dtype;
    tfenc_output_chunks chunks;
    int64_t n_documents, d_model, n_tokens, n_chunks, entries, top_k;
    double threshold;
    int csr_written; /* a sparse output holds a dataset written at completion */
    int empty_zeros; /* the job's settings say `empty_documents = zeros`: length 0 is a
                      * document without tokens, not damage */
    shard_table shards;
    int present[N_DATASETS];
    block_reader readers[N_DATASETS];
    run_bounds bounds[N_DATASETS];
    /* Found once, not per document: the datasets with per-document rules
     * in table order, the BY_BOUNDARY dataset of each BY_RUN one, and
     * `chunks` (-1 where absent). */
    size_t per_document[N_DATASETS];
    size_t n_per_document;
    int run_bounds_of[N_DATASETS];
    int chunks_index;
} check;

static int fail(check *c, int status, const char *format, ...) TFENC_PRINTF(3, 4);

/* Records the first failure as "PATH: inconsistent: ..." (or, for I/O,
 * "PATH: ..."); later ones are dropped. */
static int fail(check *c, int status, const char *format, ...)
{
    if (c->status != TFENC_OK)
        return c->status;
    char text[TFENC_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    c->status = tfenc_error(c->ctx, status, "%s: %s%s", c->path,
                            status == TFENC_ERR_CONFIG ? "inconsistent: " : "", text);
    return c->status;
}

/* A stored string for a one-line message: at most 60 bytes, control
 * characters as '?'. */
static const char *quoted(const char *value, char *text, size_t size)
{
    size_t n = 0;
    for (; value[n] != '\0' && n < 60 && n + 4 < size; n++)
        text[n] = iscntrl((unsigned char)value[n]) ? '?' : value[n];
    snprintf(text + n, size - n, "%s", value[n] != '\0' ? "..." : "");
    return text;
}

/* An integer attribute, or `absent`. */
static int64_t integer_attribute(hid_t file, const char *name, int64_t absent)
{
    int64_t value = absent;
    return tfenc_hdf5_attribute_number(file, name, H5T_INTEGER, H5T_NATIVE_INT64, &value)
               ? value
               : absent;
}

/* What an HDF5 type is, for messages: "int8", "float32", "string", ... */
static void describe_type(hid_t type, char *text, size_t size)
{
    H5T_class_t kind = H5Tget_class(type);
    size_t bytes = H5Tget_size(type);
    if (kind == H5T_INTEGER)
        snprintf(text, size, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "",
                 8 * bytes);
    else if (kind == H5T_FLOAT)
        snprintf(text, size, "float%zu", 8 * bytes);
    else if (kind == H5T_STRING)
        snprintf(text, size, "string");
    else if (kind == H5T_COMPOUND)
        snprintf(text, size, "compound");
    else
        snprintf(text, size, "class-%d", (int)kind);
}

/* The shape of a dataspace as "[3]", "[50, 16]" or "a scalar". */
static void describe_space(hid_t space, char *text, size_t size)
{
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(space);
    if (rank <= 0) {
        snprintf(text, size, "a scalar");
        return;
    }
    H5Sget_simple_extent_dims(space, dims, NULL);
    size_t used = (size_t)snprintf(text, size, "[");
    for (int i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%llu", i > 0 ? ", " : "",
                                 (unsigned long long)dims[i]);
    if (used < size)
        snprintf(text + used, size - used, "]");
}

/* ------------------------------------------------------ the corpus's files */


static int is_digest(const char *text, size_t length)
{
    if (length != 64)
        return 0;
    for (size_t i = 0; i < length; i++)
        if (!isxdigit((unsigned char)text[i]))
            return 0;
    return 1;
}

/* The table of the corpus's files (output/corpus_shards.h: the dataset, or
 * an older file's tab-separated attribute), whose reader checks each row
 * (fingerprints, counts, each file's rows following the last's); here,
 * that all of them are the file's n_documents. Fills table->rows with each
 * file's rows. */
static int read_corpus_shards(check *c, shard_table *table)
{
    memset(table, 0, sizeof *table);
    tfenc_corpus_shards shards = {0};
    int status = tfenc_corpus_shards_read(c->ctx, c->path, c->file, &shards);
    if (status == TFENC_ERR_NOT_FOUND) {
        char *text = tfenc_hdf5_attribute_string(c->file, "corpus_shards");
        status = text != NULL ? tfenc_corpus_shards_parse(c->ctx, c->path, text, &shards)
                              : TFENC_ERR_NOT_FOUND;
        free(text);
    }
    if (status == TFENC_ERR_NOT_FOUND)
        return TFENC_OK; /* a file from before either */
    if (status != TFENC_OK) {
        c->status = status;
        return status;
    }
    table->present = 1;
    table->n = shards.n;
    table->rows = calloc((size_t)shards.n + 1, sizeof *table->rows);
    if (table->rows == NULL) {
        tfenc_corpus_shards_free(&shards);
        return fail(c, TFENC_ERR_NO_MEMORY, "out of memory for %d files of corpus_shards",
                    shards.n);
    }
    int64_t total = 0;
    int all_known = 1;
    for (int k = 0; k < shards.n; k++) {
        table->rows[k] = (shard_rows){shards.shards[k].first_document, shards.shards[k].documents};
        all_known &= shards.shards[k].documents >= 0;
        total += shards.shards[k].documents;
    }
    tfenc_corpus_shards_free(&shards);
    if (all_known && table->n > 0 && c->n_documents >= 0 && total != c->n_documents)
        fail(c, TFENC_ERR_CONFIG, "corpus_shards lists %lld documents, but n_documents is %lld",
             (long long)total, (long long)c->n_documents);
    return c->status;
}

/* ------------------------------------------------------ attribute checks */

/* The attribute's form, its type class and count of values, before its
 * value: a value in another form would read as absent or be misread. */
static int check_attribute_form(check *c, const attribute_spec *spec, hid_t attribute)
{
    hid_t type = H5Aget_type(attribute), space = H5Aget_space(attribute);
    H5T_class_t found = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    H5T_class_t wanted = spec->domain == DOMAIN_INTEGER     ? H5T_INTEGER
                         : spec->domain == DOMAIN_FLOAT ||
                                   spec->domain == DOMAIN_FLOAT_ARRAY ? H5T_FLOAT
                                                                      : H5T_STRING;
    const int64_t d_model = c->d_model;
    int agrees = found == wanted &&
                 (spec->domain != DOMAIN_FLOAT_ARRAY ? count == 1
                                                     : d_model < 0 || count == d_model);
    if (!agrees) {
        char type_text[32] = "unreadable", shape[96] = "unreadable", expected[96];
        if (type >= 0)
            describe_type(type, type_text, sizeof type_text);
        if (space >= 0)
            describe_space(space, shape, sizeof shape);
        if (spec->domain == DOMAIN_INTEGER)
            snprintf(expected, sizeof expected, "one integer");
        else if (spec->domain == DOMAIN_FLOAT)
            snprintf(expected, sizeof expected, "one floating-point value");
        else if (spec->domain == DOMAIN_FLOAT_ARRAY)
            snprintf(expected, sizeof expected, "d_model (%lld) floating-point values",
                     (long long)d_model);
        else
            snprintf(expected, sizeof expected, "one string");
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %s of %s, expected %s", spec->name, shape,
             type_text, expected);
    }
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return c->status;
}

static void check_integer_value(check *c, const attribute_spec *spec)
{
    int64_t value = integer_attribute(c->file, spec->name, 0);
    if (value >= spec->minimum && value <= spec->maximum)
        return;
    if (spec->minimum == 0 && spec->maximum == 1)
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %lld, expected 0 or 1", spec->name,
             (long long)value);
    else if (spec->maximum == INT64_MAX)
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %lld, expected at least %lld", spec->name,
             (long long)value, (long long)spec->minimum);
    else
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %lld, expected %lld to %lld", spec->name,
             (long long)value, (long long)spec->minimum, (long long)spec->maximum);
}

static void check_float_value(check *c, const attribute_spec *spec)
{
    double value = NAN;
    tfenc_hdf5_attribute_number(c->file, spec->name, H5T_FLOAT, H5T_NATIVE_DOUBLE, &value);
    if (isfinite(value) && value >= spec->low && value <= spec->high)
        return;
    if (isinf(spec->high))
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %g, expected a finite value >= %g",
             spec->name, value, spec->low);
    else
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is %g, expected a finite value from %g to %g",
             spec->name, value, spec->low, spec->high);
}

static void check_float_array(check *c, const attribute_spec *spec, hid_t attribute)
{
    hid_t space = H5Aget_space(attribute);
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (space >= 0)
        H5Sclose(space);
    /* Its count is d_model's, which is at most WIDEST_DENSE_ROW for the
     * pooled outputs that have it (checked after); a bound here keeps a
     * damaged file without d_model from asking for any size. */
    if (count < 0 || count > WIDEST_DENSE_ROW) {
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %lld values, more than a row has",
             spec->name, (long long)count);
        return;
    }
    double *values = malloc(((size_t)count + 1) * sizeof *values);
    if (values == NULL) {
        fail(c, TFENC_ERR_NO_MEMORY, "out of memory for attribute '%s'", spec->name);
        return;
    }
    if (H5Aread(attribute, H5T_NATIVE_DOUBLE, values) < 0) {
        char detail[256];
        fail(c, TFENC_ERR_IO, "cannot read attribute '%s': %s", spec->name,
             tfenc_hdf5_error_detail(detail, sizeof detail));
    }
    for (hssize_t i = 0; c->status == TFENC_OK && i < count; i++)
        if (!isfinite(values[i]))
            fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %g at index %lld, expected finite "
                 "values", spec->name, values[i], (long long)i);
    free(values);
}

/* Lines "FILE SHA256" (the digest may be empty where none was computed). */
static int file_digests_valid(const char *text)
{
    for (const char *line = text; *line != '\0';) {
        size_t length = strcspn(line, "\n");
        const char *space = memchr(line, ' ', length);
        size_t digest_length = space != NULL ? length - (size_t)(space - line) - 1 : 0;
        if (space == NULL || space == line || line[length] != '\n' ||
            (digest_length > 0 && !is_digest(space + 1, digest_length)))
            return 0;
        line += length + 1;
    }
    return 1;
}

static int token_ids_valid(const char *text)
{
    for (const char *p = text; *p != '\0'; p++)
        if (!isdigit((unsigned char)*p) && !(*p == ' ' && p > text && p[1] != '\0' && p[1] != ' '))
            return 0;
    return 1;
}

/* "ranks=R ..." with R >= 1, every word KEY=VALUE. */
static int layout_valid(const char *text)
{
    if (*text == '\0')
        return 1;
    char *end = NULL;
    if (strncmp(text, "ranks=", 6) != 0 || strtol(text + 6, &end, 10) < 1 || end == text + 6)
        return 0;
    for (const char *word = text; *word != '\0';) {
        size_t length = strcspn(word, " ");
        const char *equals = memchr(word, '=', length);
        if (length == 0 || equals == NULL || equals == word || equals == word + length - 1)
            return 0;
        word += length + (word[length] == ' ');
    }
    return 1;
}

static void check_string_value(check *c, const attribute_spec *spec)
{
    char *value = tfenc_hdf5_attribute_string(c->file, spec->name);
    if (value == NULL) {
        fail(c, TFENC_ERR_IO, "cannot read attribute '%s'", spec->name);
        return;
    }
    char shown[80], why[256];
    if (spec->domain == DOMAIN_CHOICE) {
        int found = 0, n = 0;
        char expected[200] = "";
        for (; spec->choices[n] != NULL && (spec->n_choices == 0 || n < spec->n_choices); n++) {
            found |= strcmp(value, spec->choices[n]) == 0;
            size_t used = strlen(expected);
            snprintf(expected + used, sizeof expected - used, "%s'%s'", n > 0 ? ", " : "",
                     spec->choices[n]);
        }
        if (!found)
            fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected one of %s", spec->name,
                 quoted(value, shown, sizeof shown), expected);
    } else if (spec->domain == DOMAIN_DIGEST && value[0] != '\0' &&
               !is_digest(value, strlen(value))) {
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected a SHA-256 of 64 hex digits",
             spec->name, quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_FILE_DIGESTS && !file_digests_valid(value)) {
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected lines 'FILE SHA256'",
             spec->name, quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_TOKEN_IDS && !token_ids_valid(value)) {
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected token ids separated by "
             "spaces", spec->name, quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_LAYOUT && !layout_valid(value)) {
        fail(c, TFENC_ERR_CONFIG, "attribute '%s' is '%s', expected 'ranks=R data_parallel=D "
             "pipeline_stages=S'", spec->name, quoted(value, shown, sizeof shown));
    } else if (spec->domain == DOMAIN_ID2LABEL && value[0] != '\0' && c->d_model >= 0) {
        char width[64];
        snprintf(width, sizeof width, "d_model is %lld", (long long)c->d_model);
        if (c->d_model > WIDEST_DENSE_ROW ||
            !tfenc_id2label_valid(value, (int)c->d_model, width, why, sizeof why))
            fail(c, TFENC_ERR_CONFIG, "attribute '%s' %s", spec->name,
                 c->d_model > WIDEST_DENSE_ROW ? "names more labels than a row holds" : why);
    } else if (spec->domain == DOMAIN_CORPUS_SHARDS) {
        shard_table table;
        read_corpus_shards(c, &table);
        free(table.rows);
    }
    free(value);
}

static void check_attribute(check *c, const attribute_spec *spec)
{
    if (H5Aexists(c->file, spec->name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    hid_t attribute = H5Aopen(c->file, spec->name, H5P_DEFAULT);
    if (attribute < 0) {
        char detail[256];
        fail(c, TFENC_ERR_IO, "cannot open attribute '%s': %s", spec->name,
             tfenc_hdf5_error_detail(detail, sizeof detail));
        return;
    }
    if (check_attribute_form(c, spec, attribute) == TFENC_OK) {
        if (spec->domain == DOMAIN_INTEGER)
            check_integer_value(c, spec);
        else if (spec->domain == DOMAIN_FLOAT)
            check_float_value(c, spec);
        else if (spec->domain == DOMAIN_FLOAT_ARRAY)
            check_float_array(c, spec, attribute);
        else
            check_string_value(c, spec);
    }
    H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
}

/* An enum attribute's value through its names, or `absent` (older files). */
static int named_attribute(hid_t file, const char *name, int (*from_name)(const char *, int *),
                           int absent)
{
    char *text = tfenc_hdf5_attribute_string(file, name);
    int value = absent;
    if (text != NULL && from_name(text, &value) != TFENC_OK)
        value = absent;
    free(text);
    return value;
}

static int kind_from_name(const char *name, int *value)
{
    tfenc_output_kind kind;
    int status = tfenc_output_kind_from_name(name, &kind);
    *value = (int)kind;
    return status;
}

static int dtype_from_name(const char *name, int *value)
{
    tfenc_output_dtype dtype;
    int status = tfenc_output_dtype_from_name(name, &dtype);
    *value = (int)dtype;
    return status;
}

static int chunks_from_name(const char *name, int *value)
{
    for (int i = 0; tfenc_output_chunks_names[i] != NULL; i++)
        if (strcmp(name, tfenc_output_chunks_names[i]) == 0) {
            *value = i;
            return TFENC_OK;
        }
    return TFENC_ERR_NOT_FOUND;
}

static int compact(tfenc_output_dtype dtype)
{
    return dtype == TFENC_DTYPE_INT8 || dtype == TFENC_DTYPE_UINT8 ||
           dtype == TFENC_DTYPE_BINARY || dtype == TFENC_DTYPE_UBINARY;
}

static int has_dataset(void *file, const char *name)
{
    return H5Lexists(*(hid_t *)file, name, H5P_DEFAULT) > 0;
}

/* Whether the job_settings attribute (one "section.key = value" line per
 * setting) has `job.empty_documents = zeros`. */
static int settings_say_empty_zeros(hid_t file)
{
    char *settings = tfenc_hdf5_attribute_string(file, "job_settings");
    int found = 0;
    for (const char *line = settings; line != NULL && *line != '\0' && !found;) {
        const char *end = strchr(line, '\n');
        const size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        static const char wanted[] = "job.empty_documents = zeros";
        found = length == sizeof wanted - 1 && memcmp(line, wanted, length) == 0;
        line = end != NULL ? end + 1 : line + length;
    }
    free(settings);
    return found;
}

/* What the attributes say the file is. Files of older versions lack
 * output_kind (their datasets tell) and chunks (off). */
static void read_facts(check *c)
{
    hid_t f = c->file;
    c->complete = integer_attribute(f, "complete", 0) == 1;
    c->n_documents = integer_attribute(f, "n_documents", -1);
    c->d_model = integer_attribute(f, "d_model", -1);
    c->n_tokens = integer_attribute(f, "n_tokens", -1);
    c->n_chunks = integer_attribute(f, "n_chunks", -1);
    c->top_k = integer_attribute(f, "sparse_top_k", 0);
    c->threshold = 0.0;
    tfenc_hdf5_attribute_number(f, "sparse_threshold", H5T_FLOAT, H5T_NATIVE_DOUBLE,
                                  &c->threshold);
    int kind = named_attribute(f, "output_kind", kind_from_name, -1);
    c->entry = kind >= 0 ? tfenc_output_kind_entry_of((tfenc_output_kind)kind)
                         : tfenc_output_kind_from_datasets(has_dataset, &f);
    c->kind = c->entry->id;
    c->empty_zeros = settings_say_empty_zeros(f);
    c->dtype = (tfenc_output_dtype)named_attribute(f, "dtype", dtype_from_name,
                                                   TFENC_DTYPE_FLOAT32);
    c->chunks = (tfenc_output_chunks)named_attribute(f, "chunks", chunks_from_name,
                                                     TFENC_CHUNKS_OFF);
    H5Eclear2(H5E_DEFAULT);
}

/* The attributes against each other. */
static void check_attributes_agree(check *c)
{
    const char *kind = tfenc_output_kind_name(c->kind);
    if (compact(c->dtype) && !c->entry->compact_dtypes)
        fail(c, TFENC_ERR_CONFIG, "attribute 'dtype' is '%s', but only pooled outputs are "
             "compact (output_kind '%s')", tfenc_output_dtype_name(c->dtype), kind);
    else if (c->chunks != TFENC_CHUNKS_OFF && !c->entry->chunks)
        fail(c, TFENC_ERR_CONFIG, "attribute 'chunks' is '%s', but only pooled outputs "
             "and scores are chunked (output_kind '%s')", tfenc_output_chunks_names[c->chunks],
             kind);
    else if (c->entry->dense && c->d_model > WIDEST_DENSE_ROW)
        fail(c, TFENC_ERR_CONFIG, "attribute 'd_model' is %lld, expected 1 to %d for output_kind "
             "'%s'", (long long)c->d_model, WIDEST_DENSE_ROW, kind);
    else if ((c->dtype == TFENC_DTYPE_BINARY || c->dtype == TFENC_DTYPE_UBINARY) &&
             c->d_model % 8 != 0)
        fail(c, TFENC_ERR_CONFIG, "attribute 'd_model' is %lld, but dtype '%s' packs 8 "
             "dimensions a byte", (long long)c->d_model, tfenc_output_dtype_name(c->dtype));
}

int tfenc_output_check_attributes(tfenc_context *ctx, const char *path, hid_t file)
{
    check c = {.ctx = ctx, .path = path, .file = file, .status = TFENC_OK};
    /* The counts the others are checked against, first. */
    for (size_t i = 0; c.status == TFENC_OK && i < sizeof attributes / sizeof *attributes; i++)
        if (attributes[i].domain == DOMAIN_INTEGER)
            check_attribute(&c, &attributes[i]);
    if (c.status == TFENC_OK)
        read_facts(&c);
    for (size_t i = 0; c.status == TFENC_OK && i < sizeof attributes / sizeof *attributes; i++)
        if (attributes[i].domain != DOMAIN_INTEGER)
            check_attribute(&c, &attributes[i]);
    if (c.status == TFENC_OK)
        check_attributes_agree(&c);
    return c.status;
}

/* ------------------------------------------------------------ dataset shapes */

static int64_t dimension_value(const check *c, dimension d)
{
    const int packed = c->dtype == TFENC_DTYPE_BINARY || c->dtype == TFENC_DTYPE_UBINARY;
    switch (d) {
    case DIM_DOCUMENTS:
        return c->n_documents;
    case DIM_BOUNDARIES:
        return c->n_documents >= 0 ? c->n_documents + 1 : -1;
    case DIM_ROWS:
        return c->entry->rows == TFENC_ROWS_PER_TOKEN ? c->n_tokens
               : c->chunks == TFENC_CHUNKS_EACH ? c->n_chunks
                                                : c->n_documents;
    case DIM_WIDTH:
        return packed && c->d_model >= 0 ? c->d_model / 8 : c->d_model;
    case DIM_D_MODEL:
        return c->d_model;
    case DIM_ENTRIES:
        return c->entries;
    case DIM_TWO:
        return 2;
    case DIM_NONE:
        break;
    }
    return -1;
}

/* "n_documents 50", "d_model / 8 = 2", ...: a dimension and its value. */
static const char *dimension_text(const check *c, dimension d, char *text, size_t size)
{
    const long long value = (long long)dimension_value(c, d);
    const int packed = c->dtype == TFENC_DTYPE_BINARY || c->dtype == TFENC_DTYPE_UBINARY;
    switch (d) {
    case DIM_DOCUMENTS:
        snprintf(text, size, "n_documents %lld", value);
        break;
    case DIM_BOUNDARIES:
        snprintf(text, size, "n_documents + 1 = %lld", value);
        break;
    case DIM_ROWS:
        snprintf(text, size, "%s %lld",
                 c->entry->rows == TFENC_ROWS_PER_TOKEN ? "n_tokens"
                 : c->chunks == TFENC_CHUNKS_EACH ? "n_chunks"
                                                  : "n_documents",
                 value);
        break;
    case DIM_WIDTH:
        snprintf(text, size, packed ? "d_model / 8 = %lld" : "d_model %lld", value);
        break;
    case DIM_D_MODEL:
        snprintf(text, size, "d_model %lld", value);
        break;
    case DIM_ENTRIES:
        snprintf(text, size, "%lld, as sparse_values", value);
        break;
    case DIM_TWO:
        snprintf(text, size, "2");
        break;
    case DIM_NONE:
        snprintf(text, size, "any");
        break;
    }
    return text;
}

static int applies(const check *c, const dataset_spec *spec, int *required)
{
    const int ranged = c->dtype == TFENC_DTYPE_INT8 || c->dtype == TFENC_DTYPE_UINT8;
    *required = 0;
    if (!(spec->kinds & KIND(c->kind)))
        return 0;
    switch (spec->presence) {
    case ALWAYS:
        *required = 1;
        return 1;
    case OPTIONAL:
        return 1;
    case WITH_CHUNK_EACH:
        *required = c->chunks == TFENC_CHUNKS_EACH;
        return *required;
    case WITH_CHUNKS:
        *required = c->chunks != TFENC_CHUNKS_OFF;
        return *required;
    case WITH_RANGES:
        *required = ranged;
        return ranged;
    case WITH_CALIBRATION:
        return ranged;
    case ONCE_COMPLETE:
        *required = c->complete || c->csr_written;
        return 1;
    }
    return 0;
}

/* Why a dataset that is missing should be there. */
static void fail_missing(check *c, const dataset_spec *spec)
{
    if (spec->presence == ONCE_COMPLETE && c->complete)
        fail(c, TFENC_ERR_CONFIG, "complete = 1 but no dataset '%s'", spec->name);
    else if (spec->presence == ONCE_COMPLETE)
        fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which is written with the others of the "
             "sparse rows", spec->name);
    else if (spec->presence == WITH_RANGES)
        fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which every output of dtype '%s' has",
             spec->name, tfenc_output_dtype_name(c->dtype));
    else if (spec->presence == WITH_CHUNKS || spec->presence == WITH_CHUNK_EACH)
        fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which every output of chunks = %s has",
             spec->name, tfenc_output_chunks_names[c->chunks]);
    else
        fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which every %s output has", spec->name,
             tfenc_output_kind_name(c->kind));
}

static int class_agrees(const check *c, type_class type, H5T_class_t found,
                        const char **expected)
{
    H5T_class_t wanted = H5T_FLOAT;
    *expected = "floating-point";
    if ((type == CLASS_ROW_VALUES && compact(c->dtype)) || type == CLASS_INTEGER) {
        wanted = H5T_INTEGER;
        *expected = "integer";
    } else if (type == CLASS_STRING) {
        wanted = H5T_STRING;
        *expected = "string";
    } else if (type == CLASS_SOURCE) {
        wanted = H5T_COMPOUND;
        *expected = "compound {shard, line}";
    }
    return found == wanted;
}

/* The dataset's type class, rank and dimensions against the attributes
 * (an unknown dimension, of an older file without the attribute, is any). */
static void check_shape(check *c, const dataset_spec *spec)
{
    hid_t dataset = H5Dopen2(c->file, spec->name, H5P_DEFAULT);
    hid_t type = dataset >= 0 ? H5Dget_type(dataset) : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    if (dataset < 0 || type < 0 || space < 0) {
        fail(c, TFENC_ERR_CONFIG, "'%s' is not a readable dataset", spec->name);
    } else {
        hsize_t dims[H5S_MAX_RANK];
        const char *class_text;
        int agrees = class_agrees(c, spec->type, H5Tget_class(type), &class_text) &&
                     H5Sget_simple_extent_ndims(space) == spec->rank &&
                     H5Sget_simple_extent_dims(space, dims, NULL) == spec->rank;
        for (int i = 0; agrees && i < spec->rank; i++) {
            int64_t expected = dimension_value(c, spec->dims[i]);
            agrees = spec->dims[i] == DIM_NONE || expected < 0 || dims[i] == (hsize_t)expected;
        }
        if (!agrees) {
            char type_text[32], shape[96], expected[200] = "[", dim[80];
            describe_type(type, type_text, sizeof type_text);
            describe_space(space, shape, sizeof shape);
            for (int i = 0; i < spec->rank; i++)
                snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
                         i > 0 ? ", " : "", dimension_text(c, spec->dims[i], dim, sizeof dim));
            snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "]");
            fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %s %s values, expected %s %s",
                 spec->name, shape, type_text, expected, class_text);
        }
    }
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
}

/* The rows of a rank-1 dataset, or -1. */
static int64_t dataset_length(hid_t file, const char *name)
{
    hid_t dataset = H5Lexists(file, name, H5P_DEFAULT) > 0 ? H5Dopen2(file, name, H5P_DEFAULT)
                                                           : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t length = 0;
    int64_t found = space >= 0 && H5Sget_simple_extent_ndims(space) == 1 &&
                            H5Sget_simple_extent_dims(space, &length, NULL) == 1
                        ? (int64_t)length
                        : -1;
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
    return found;
}

static void check_shapes(check *c)
{
    /* Older files lack n_documents: their lengths say it. */
    if (c->n_documents < 0)
        c->n_documents = dataset_length(c->file, "lengths");
    c->entries = dataset_length(c->file, "sparse_values");
    for (size_t i = 0; i < N_DATASETS; i++)
        c->csr_written |= datasets[i].presence == ONCE_COMPLETE &&
                          (datasets[i].kinds & KIND(c->kind)) &&
                          H5Lexists(c->file, datasets[i].name, H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    for (size_t i = 0; c->status == TFENC_OK && i < N_DATASETS; i++) {
        int required = 0;
        if (!applies(c, &datasets[i], &required))
            continue;
        c->present[i] = H5Lexists(c->file, datasets[i].name, H5P_DEFAULT) > 0;
        H5Eclear2(H5E_DEFAULT);
        if (c->present[i])
            check_shape(c, &datasets[i]);
        else if (required)
            fail_missing(c, &datasets[i]);
    }
}

/* ---------------------------------------------------------- block reading */

static void reader_open(check *c, block_reader *r, const dataset_spec *spec)
{
    memset(r, 0, sizeof *r);
    r->open = 1;
    r->dataset = r->space = r->memory_type = -1;
    if (spec->type == CLASS_SOURCE) {
        r->memory_type = tfenc_output_source_type(1);
        r->element_size = sizeof(tfenc_output_source);
    } else if (spec->type == CLASS_FLOAT) {
        r->memory_type = H5Tcopy(H5T_NATIVE_DOUBLE);
        r->element_size = sizeof(double);
    } else {
        r->memory_type = H5Tcopy(H5T_NATIVE_INT64);
        r->element_size = sizeof(int64_t);
    }
    r->dataset = H5Dopen2(c->file, spec->name, H5P_DEFAULT);
    r->space = r->dataset >= 0 ? H5Dget_space(r->dataset) : -1;
    r->block = malloc(ELEMENTS_PER_READ * r->element_size);
    int ok = r->memory_type >= 0 && r->space >= 0 && r->block != NULL;
    if (ok)
        r->length = (hsize_t)H5Sget_simple_extent_npoints(r->space);
    if (!ok) {
        char detail[256];
        fail(c, r->block == NULL ? TFENC_ERR_NO_MEMORY : TFENC_ERR_IO,
             "cannot read dataset '%s': %s", spec->name,
             tfenc_hdf5_error_detail(detail, sizeof detail));
    }
}

static void reader_close(block_reader *r)
{
    if (r->space >= 0)
        H5Sclose(r->space);
    if (r->dataset >= 0)
        H5Dclose(r->dataset);
    if (r->memory_type >= 0)
        H5Tclose(r->memory_type);
    free(r->block);
    memset(r, 0, sizeof *r);
}

/* Element `index` (< the dataset's length) of a rank-1 dataset, or NULL
 * after a read failure (recorded). */
static const void *element_at(check *c, block_reader *r, const char *name, int64_t index)
{
    const hsize_t at = (hsize_t)index;
    if (c->status != TFENC_OK || index < 0 || at >= r->length) {
        if (c->status == TFENC_OK)
            fail(c, TFENC_ERR_INTERNAL, "dataset '%s': element %lld asked of %llu", name,
                 (long long)index, (unsigned long long)r->length);
        return NULL;
    }
    if (at < r->first || at >= r->first + r->held) {
        hsize_t count = r->length - at < ELEMENTS_PER_READ ? r->length - at : ELEMENTS_PER_READ;
        hid_t memory = H5Screate_simple(1, &count, NULL);
        int ok = memory >= 0 &&
                 H5Sselect_hyperslab(r->space, H5S_SELECT_SET, &at, NULL, &count, NULL) >= 0 &&
                 H5Dread(r->dataset, r->memory_type, memory, r->space, H5P_DEFAULT, r->block) >= 0;
        if (memory >= 0)
            H5Sclose(memory);
        if (!ok) {
            char detail[256];
            fail(c, TFENC_ERR_IO, "cannot read dataset '%s' at index %lld: %s", name,
                 (long long)index, tfenc_hdf5_error_detail(detail, sizeof detail));
            r->held = 0;
            return NULL;
        }
        r->first = at;
        r->held = count;
    }
    return r->block + (size_t)(at - r->first) * r->element_size;
}

static int64_t integer_at(check *c, size_t spec, int64_t index)
{
    const int64_t *value = element_at(c, &c->readers[spec], datasets[spec].name, index);
    return value != NULL ? *value : 0;
}

/* --------------------------------------------------------------- contents */

/* The index of the applicable, present dataset called `name`, or -1. */
static int find_present(const check *c, const char *name)
{
    for (size_t i = 0; name != NULL && i < N_DATASETS; i++)
        if (c->present[i] && strcmp(datasets[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void check_source(check *c, size_t spec, int64_t document)
{
    const tfenc_output_source *entry
        = element_at(c, &c->readers[spec], datasets[spec].name, document);
    if (entry == NULL)
        return;
    const shard_table *shards = &c->shards;
    if (entry->shard < 0 || (shards->present && entry->shard >= shards->n))
        fail(c, TFENC_ERR_CONFIG, "dataset 'document_source' names file %d at index %lld, but "
             "corpus_shards lists %lld files", entry->shard, (long long)document,
             (long long)shards->n);
    else if (entry->line < 0)
        fail(c, TFENC_ERR_CONFIG, "dataset 'document_source' holds line %lld at index %lld, "
             "expected >= 0", (long long)entry->line, (long long)document);
    else if (shards->present && shards->rows[entry->shard].documents >= 0) {
        const shard_rows rows = shards->rows[entry->shard];
        if (document < rows.first || document >= rows.first + rows.documents)
            fail(c, TFENC_ERR_CONFIG, "dataset 'document_source' names file %d at index %lld, "
                 "but corpus_shards gives that file rows %lld to %lld", entry->shard,
                 (long long)document, (long long)rows.first,
                 (long long)(rows.first + rows.documents - 1));
    }
}

/* RULE_NOT_NEGATIVE, RULE_POSITIVE: one integer element, the document's
 * own or (in_run) one of its run. */
static void check_count(check *c, size_t spec, int64_t index, int64_t document, int in_run)
{
    const int64_t least = datasets[spec].rule == RULE_POSITIVE ? 1 : 0;
    int64_t value = integer_at(c, spec, index);
    char where[64] = "";
    if (in_run)
        snprintf(where, sizeof where, " (document %lld)", (long long)document);
    if (c->status == TFENC_OK && value < least)
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld%s, expected >= %lld",
             datasets[spec].name, (long long)value, (long long)index, where, (long long)least);
}

/* A document's run: elements i and i + 1 of a BY_BOUNDARY dataset. The
 * second is known when the next document is finished, or is the last
 * entry (written when the file was created). */
static void check_boundaries(check *c, size_t spec, int64_t document, int64_t length,
                             int next_known)
{
    const dataset_spec *d = &datasets[spec];
    const int64_t end = dimension_value(c, d->ends_at);
    char end_text[80];
    int64_t first = integer_at(c, spec, document);
    int64_t next = next_known ? integer_at(c, spec, document + 1) : 0;
    c->bounds[spec] = (run_bounds){0};
    if (c->status != TFENC_OK)
        return;
    if (document == 0 && first != 0) {
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' starts at %lld, expected 0", d->name,
             (long long)first);
        return;
    }
    if (first < 0 || (end >= 0 && first > end)) {
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld, outside 0 to %s",
             d->name, (long long)first, (long long)document,
             dimension_text(c, d->ends_at, end_text, sizeof end_text));
        return;
    }
    if (!next_known)
        return;
    if (next < first) {
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' decreases at index %lld (%lld, then %lld)",
             d->name, (long long)document, (long long)first, (long long)next);
        return;
    }
    if (end >= 0 && next > end) {
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld, outside 0 to %s",
             d->name, (long long)next, (long long)document + 1,
             dimension_text(c, d->ends_at, end_text, sizeof end_text));
        return;
    }
    const int64_t run = next - first;
    const int chunks = c->chunks_index;
    if (d->run == RUN_IS_LENGTH && run != length)
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld rows (index %lld to "
             "%lld), but 'lengths' gives it %lld tokens", d->name, (long long)document,
             (long long)run, (long long)document, (long long)document + 1, (long long)length);
    else if (d->run == RUN_AT_MOST_LENGTH && run > length)
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld rows (index %lld to "
             "%lld), more than its %lld tokens in 'lengths'", d->name, (long long)document,
             (long long)run, (long long)document, (long long)document + 1, (long long)length);
    else if (d->run == RUN_IS_CHUNKS && chunks >= 0 &&
             run != integer_at(c, (size_t)chunks, document))
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld rows (index %lld to "
             "%lld), but 'chunks' gives it %lld", d->name, (long long)document, (long long)run,
             (long long)document, (long long)document + 1,
             (long long)integer_at(c, (size_t)chunks, document));
    else if (d->run == RUN_AT_MOST_TOP_K && ((c->top_k > 0 && run > c->top_k) || run > c->d_model))
        fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld entries (index %lld to "
             "%lld), more than %s %lld", d->name, (long long)document, (long long)run,
             (long long)document, (long long)document + 1,
             c->top_k > 0 && run > c->top_k ? "sparse_top_k" : "the columns, d_model",
             (long long)(c->top_k > 0 && run > c->top_k ? c->top_k : c->d_model));
    c->bounds[spec] = (run_bounds){c->status == TFENC_OK, first, next};
}

/* The elements of a document's run (its rows or CSR entries). */
static void check_run(check *c, size_t spec, int64_t document)
{
    const dataset_spec *d = &datasets[spec];
    const int bounds = c->run_bounds_of[spec];
    if (bounds < 0 || !c->bounds[bounds].known)
        return;
    const run_bounds run = c->bounds[bounds];
    int64_t previous = -1;
    for (int64_t e = run.first; c->status == TFENC_OK && e < run.end; e++) {
        if (d->rule == RULE_NOT_NEGATIVE) {
            check_count(c, spec, e, document, 1);
        } else if (d->rule == RULE_COLUMN) {
            int64_t column = integer_at(c, spec, e);
            if (c->status == TFENC_OK && (column < 0 || column >= c->d_model))
                fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld (document "
                     "%lld), outside the columns 0 to d_model - 1 = %lld", d->name,
                     (long long)column, (long long)e, (long long)document,
                     (long long)c->d_model - 1);
            else if (c->status == TFENC_OK && column <= previous)
                fail(c, TFENC_ERR_CONFIG, "dataset '%s' is not ascending within document %lld: "
                     "%lld at index %lld follows %lld", d->name, (long long)document,
                     (long long)column, (long long)e, (long long)previous);
            previous = column;
        } else if (d->rule == RULE_ABOVE_THRESHOLD) {
            const double *value = element_at(c, &c->readers[spec], d->name, e);
            if (value != NULL && !(isfinite(*value) && *value > c->threshold))
                fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %g at index %lld (document %lld), "
                     "expected a finite value above sparse_threshold %g", d->name, *value,
                     (long long)e, (long long)document, c->threshold);
        }
    }
}

/* quantization_ranges [2, d]: finite, each minimum <= its maximum, and the
 * same as the attributes quantization_min and quantization_max. d is at
 * most WIDEST_DENSE_ROW (its shape against d_model, checked before). */
static void check_ranges(check *c, size_t spec)
{
    hid_t dataset = H5Dopen2(c->file, datasets[spec].name, H5P_DEFAULT);
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t dims[2] = {0, 0};
    int ok = space >= 0 && H5Sget_simple_extent_dims(space, dims, NULL) == 2 && dims[0] == 2 &&
             dims[1] <= WIDEST_DENSE_ROW;
    const size_t d = (size_t)dims[1];
    double *ranges = ok ? malloc((2 * d + 1) * sizeof *ranges) : NULL;
    double *attribute = ok ? malloc((d + 1) * sizeof *attribute) : NULL;
    if (ok && (ranges == NULL || attribute == NULL))
        fail(c, TFENC_ERR_NO_MEMORY, "out of memory for dataset '%s'", datasets[spec].name);
    else if (!ok ||
             H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, ranges) < 0) {
        char detail[256];
        fail(c, TFENC_ERR_IO, "cannot read dataset '%s': %s", datasets[spec].name,
             tfenc_hdf5_error_detail(detail, sizeof detail));
    }
    for (size_t j = 0; c->status == TFENC_OK && j < 2 * d; j++)
        if (!isfinite(ranges[j]))
            fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %g at [%zu, %zu], expected finite "
                 "values", datasets[spec].name, ranges[j], j / d, j % d);
    for (size_t j = 0; c->status == TFENC_OK && j < d; j++)
        if (ranges[j] > ranges[d + j])
            fail(c, TFENC_ERR_CONFIG, "dataset '%s': dimension %zu has minimum %g above its "
                 "maximum %g", datasets[spec].name, j, ranges[j], ranges[d + j]);
    static const char *const names[] = {"quantization_min", "quantization_max"};
    for (int row = 0; c->status == TFENC_OK && row < 2; row++) {
        hid_t stored = H5Aexists(c->file, names[row]) > 0
                           ? H5Aopen(c->file, names[row], H5P_DEFAULT)
                           : -1;
        hid_t values = stored >= 0 ? H5Aget_space(stored) : -1;
        const hssize_t count = values >= 0 ? H5Sget_simple_extent_npoints(values) : -1;
        /* (Its count against d_model was checked with the attributes; a
         * file without d_model is held to the dataset's here.) */
        if (values >= 0 && count != (hssize_t)d) {
            fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %lld values, but dataset '%s' has "
                 "%zu dimensions", names[row], (long long)count, datasets[spec].name, d);
        } else if (values >= 0 && H5Aread(stored, H5T_NATIVE_DOUBLE, attribute) >= 0) {
            for (size_t j = 0; c->status == TFENC_OK && j < d; j++)
                if ((float)attribute[j] != (float)ranges[(size_t)row * d + j])
                    fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %g at index %zu, but "
                         "dataset '%s' [%d, %zu] holds %g", names[row], attribute[j], j,
                         datasets[spec].name, row, j, ranges[(size_t)row * d + j]);
        }
        if (values >= 0)
            H5Sclose(values);
        if (stored >= 0)
            H5Aclose(stored);
    }
    free(attribute);
    free(ranges);
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
}

static void check_document_indices(check *c, size_t spec)
{
    for (int64_t i = 0; c->status == TFENC_OK && (hsize_t)i < c->readers[spec].length; i++) {
        int64_t document = integer_at(c, spec, i);
        if (c->status == TFENC_OK && (document < 0 || document >= c->n_documents))
            fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld, outside the "
                 "documents 0 to %lld", datasets[spec].name, (long long)document, (long long)i,
                 (long long)c->n_documents - 1);
    }
}

/* The per-document rules of every present dataset, document by document. */
static void check_documents(check *c, int marked, tfenc_output_census *census)
{
    const size_t lengths = (size_t)find_present(c, "lengths");
    const size_t truncated_spec = (size_t)find_present(c, "truncated");
    const int has_truncated = find_present(c, "truncated") >= 0;
    const int64_t n = c->n_documents;
    census->truncated = has_truncated ? 0 : -1;
    int64_t next_length = n > 0 ? integer_at(c, lengths, 0) : 0;
    for (int64_t i = 0; c->status == TFENC_OK && i < n; i++) {
        const int64_t length = next_length;
        next_length = i + 1 < n ? integer_at(c, lengths, i + 1) : 0;
        if (length == 0 && !c->empty_zeros)
            fail(c, TFENC_ERR_CONFIG, "document %lld has length 0 in 'lengths' (a document "
                 "without tokens is written only by a job with [job] empty_documents = zeros)",
                 (long long)i);
        else if (length < -1)
            fail(c, TFENC_ERR_CONFIG, "dataset 'lengths' holds %lld at index %lld, expected -1 "
                 "(not written yet) or a token count >= %d", (long long)length, (long long)i,
                 c->empty_zeros ? 0 : 1);
        census->finished += length >= 0;
        /* Which entries a killed run wrote: only a marked file tells. */
        const int finished = marked ? length >= 0 : c->complete;
        const int next_known = i + 1 == n || (marked ? next_length >= 0 : c->complete);
        if (!finished)
            continue;
        if (has_truncated && length >= 0 && integer_at(c, truncated_spec, i) > 0)
            census->truncated++;
        for (size_t j = 0; c->status == TFENC_OK && j < c->n_per_document; j++) {
            const size_t k = c->per_document[j];
            if (datasets[k].indexing == BY_DOCUMENT && datasets[k].rule == RULE_SOURCE)
                check_source(c, k, i);
            else if (datasets[k].indexing == BY_DOCUMENT)
                check_count(c, k, i, i, 0);
            else if (datasets[k].indexing == BY_BOUNDARY)
                check_boundaries(c, k, i, length, next_known);
            else if (datasets[k].indexing == BY_RUN)
                check_run(c, k, i);
        }
    }
    /* The last boundary is written when the file is created. */
    for (size_t k = 0; c->status == TFENC_OK && n >= 0 && k < N_DATASETS; k++) {
        const int64_t end = dimension_value(c, datasets[k].ends_at);
        char end_text[80];
        if (!c->present[k] || datasets[k].indexing != BY_BOUNDARY || end < 0)
            continue;
        int64_t last = integer_at(c, k, n);
        if (c->status == TFENC_OK && last != end)
            fail(c, TFENC_ERR_CONFIG, "dataset '%s' ends at %lld (index %lld), expected %s",
                 datasets[k].name, (long long)last, (long long)n,
                 dimension_text(c, datasets[k].ends_at, end_text, sizeof end_text));
    }
    if (c->status == TFENC_OK && c->complete && marked && census->finished != n)
        fail(c, TFENC_ERR_CONFIG, "complete = 1 but %lld of %lld documents are not written",
             (long long)(n - census->finished), (long long)n);
}

/* Only a -1 fill value makes an unwritten length recognisable. */
static int lengths_marked(hid_t file)
{
    hid_t lengths = H5Dopen2(file, "lengths", H5P_DEFAULT);
    hid_t create = lengths >= 0 ? H5Dget_create_plist(lengths) : -1;
    int32_t fill = 0;
    H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
    int marked = create >= 0 && H5Pfill_value_defined(create, &defined) >= 0 &&
                 defined == H5D_FILL_VALUE_USER_DEFINED &&
                 H5Pget_fill_value(create, H5T_NATIVE_INT32, &fill) >= 0 && fill == -1;
    if (create >= 0)
        H5Pclose(create);
    if (lengths >= 0)
        H5Dclose(lengths);
    H5Eclear2(H5E_DEFAULT);
    return marked;
}

int tfenc_output_check_datasets(tfenc_context *ctx, const char *path, hid_t file,
                                tfenc_output_census *census)
{
    check c = {.ctx = ctx, .path = path, .file = file, .status = TFENC_OK};
    memset(census, 0, sizeof *census);
    census->sparse_entries = census->truncated = -1;
    read_facts(&c);
    check_shapes(&c);
    census->n_documents = c.n_documents;
    if (c.status == TFENC_OK)
        read_corpus_shards(&c, &c.shards);
    for (size_t k = 0; c.status == TFENC_OK && k < N_DATASETS; k++)
        if (c.present[k] && datasets[k].indexing != UNREAD)
            reader_open(&c, &c.readers[k], &datasets[k]);
    c.chunks_index = find_present(&c, "chunks");
    for (size_t k = 0; k < N_DATASETS; k++) {
        c.run_bounds_of[k] = find_present(&c, datasets[k].bounds);
        /* lengths' own rule runs first, for every document */
        if (c.present[k] && datasets[k].rule != RULE_LENGTH &&
            (datasets[k].indexing == BY_DOCUMENT || datasets[k].indexing == BY_BOUNDARY ||
             datasets[k].indexing == BY_RUN))
            c.per_document[c.n_per_document++] = k;
    }
    for (size_t k = 0; c.status == TFENC_OK && k < N_DATASETS; k++) {
        if (c.present[k] && datasets[k].rule == RULE_RANGES)
            check_ranges(&c, k);
        else if (c.present[k] && datasets[k].rule == RULE_DOCUMENT_INDEX)
            check_document_indices(&c, k);
    }
    const int marked = lengths_marked(file);
    if (c.status == TFENC_OK)
        check_documents(&c, marked, census);
    census->lengths_marked = marked;
    if (find_present(&c, "sparse_values") >= 0)
        census->sparse_entries = c.entries;
    for (size_t k = 0; k < N_DATASETS; k++)
        if (c.readers[k].open)
            reader_close(&c.readers[k]);
    free(c.shards.rows);
    return c.status;
}
